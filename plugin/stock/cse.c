/* cse.c - hlo-cse: XLA's HloCSE.  Within a computation, an instruction
 * identical to an earlier one (same opcode, operands, shape, attributes,
 * called computations, sharding) and free of side effects is replaced by
 * it.  Candidates are found by a structural hash (opcode, interned shape,
 * operands, dims, called computations, interned sharding); only when two
 * instructions agree on all of that and carry attributes are their printed
 * forms compared, which covers every attribute the printer knows, raw ones
 * included, unless their attribute blocks are byte-identical (literals and
 * dynamic-slice sizes compared by value).  So the common case prints
 * nothing. */
#include <stdlib.h>
#include <string.h>

#include "stock.h"

/* Instructions kept as representatives, in the order they were met. */
typedef struct cse_entry {
  hk_instr *instr;
  char *key;         /* printed form, made on first need */
} cse_entry;

/* Open addressing over entry numbers: a slot holds 32 bits of the hash and
 * entry index + 1 (0 = empty), so probing touches 8 bytes a slot and the
 * table grows with the representatives, not with the computation. */
typedef struct cse_slot {
  uint32_t hash, entry;
} cse_slot;

typedef struct cse_table {
  cse_slot *slots;
  size_t mask;
  cse_entry *entries;
  size_t n, cap;
  bool layout_sensitive;
} cse_table;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static uint64_t structural_hash(const hk_instr *i) {
  uint64_t h = mix(i->opcode, (uint64_t)(uintptr_t)i->shape);
  h = mix(h, (uint64_t)(uintptr_t)i->sharding);
  for (int32_t k = 0; k < i->n_operands; k++) h = mix(h, (uint64_t)(uintptr_t)i->operands[k]);
  for (int32_t k = 0; k < i->n_dims; k++) h = mix(h, (uint64_t)i->dims[k]);
  for (int32_t k = 0; k < i->n_called; k++) h = mix(h, (uint64_t)(uintptr_t)i->called[k]);
  return mix(h, i->attrs != NULL);
}

static bool structurally_equal(const hk_instr *a, const hk_instr *b) {
  if (a->opcode != b->opcode || a->shape != b->shape || a->sharding != b->sharding ||
      a->n_operands != b->n_operands || a->n_dims != b->n_dims || a->n_called != b->n_called ||
      (a->attrs == NULL) != (b->attrs == NULL))
    return false;
  for (int32_t k = 0; k < a->n_operands; k++)
    if (a->operands[k] != b->operands[k]) return false;
  for (int32_t k = 0; k < a->n_dims; k++)
    if (a->dims[k] != b->dims[k]) return false;
  for (int32_t k = 0; k < a->n_called; k++)
    if (a->called[k] != b->called[k]) return false;
  return true;
}

/* The printed instruction minus "ROOT " and "name = ". */
static char *identity_key(const hk_instr *i, bool layout_sensitive) {
  char *text = hk_instr_to_string(i, layout_sensitive ? HK_PRINT_LONG : HK_PRINT_SHORT);
  const char *eq = strstr(text, " = ");
  const char *body = eq ? eq + 3 : text;
  memmove(text, body, strlen(body) + 1);
  return text;
}

static void table_init(cse_table *t, bool layout_sensitive) {
  memset(t, 0, sizeof *t);
  t->mask = 1023;
  t->slots = calloc(t->mask + 1, sizeof *t->slots);
  if (!t->slots) abort();
  t->layout_sensitive = layout_sensitive;
}

static void table_free(cse_table *t) {
  for (size_t k = 0; k < t->n; k++) free(t->entries[k].key);
  free(t->entries);
  free(t->slots);
}

/* Doubles the slots once they are half full; entries keep their numbers. */
static void table_grow(cse_table *t) {
  size_t cap = 2 * (t->mask + 1);
  cse_slot *slots = calloc(cap, sizeof *slots);
  if (!slots) abort();
  for (size_t k = 0; k <= t->mask; k++) {
    if (!t->slots[k].entry) continue;
    size_t j = t->slots[k].hash & (cap - 1);
    while (slots[j].entry) j = (j + 1) & (cap - 1);
    slots[j] = t->slots[k];
  }
  free(t->slots);
  t->slots = slots;
  t->mask = cap - 1;
}

static bool same_literal(const hk_literal *a, const hk_literal *b) {
  return a && b && a->shape == b->shape && a->data && b->data && a->nbytes == b->nbytes &&
         !a->n_elems && !b->n_elems && !a->elided && !b->elided &&
         memcmp(a->data, b->data, (size_t)a->nbytes) == 0;
}

static bool same_i64s(hk_i64s a, hk_i64s b) {
  return a.n == b.n && (a.n == 0 || memcmp(a.v, b.v, sizeof(int64_t) * (size_t)a.n) == 0);
}

/* Byte-identical attribute blocks (once the literal and the dynamic-slice
 * sizes, copied per instruction, are compared by value) are certainly the
 * same attributes; the printed comparison settles every other case. */
static bool attrs_same_bytes(const hk_attrs *a, const hk_attrs *b) {
  hk_attrs x;
  memcpy(&x, b, sizeof x);
  if (x.literal != a->literal && same_literal(x.literal, a->literal)) x.literal = a->literal;
  if (x.dynamic_slice_sizes.v != a->dynamic_slice_sizes.v &&
      same_i64s(x.dynamic_slice_sizes, a->dynamic_slice_sizes))
    x.dynamic_slice_sizes.v = a->dynamic_slice_sizes.v;
  return memcmp(&x, a, sizeof x) == 0;
}

/* Same instruction modulo name: structure, then (if any) attributes. */
static bool identical(cse_table *t, cse_entry *e, const hk_instr *i, char **i_key) {
  if (!structurally_equal(e->instr, i)) return false;
  if (!i->attrs || attrs_same_bytes(e->instr->attrs, i->attrs)) return true;
  if (!e->key) e->key = identity_key(e->instr, t->layout_sensitive);
  if (!*i_key) *i_key = identity_key(i, t->layout_sensitive);
  return strcmp(e->key, *i_key) == 0;
}

static void table_add(cse_table *t, size_t slot, uint32_t h, hk_instr *i, char *key) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->entries = realloc(t->entries, t->cap * sizeof *t->entries);
    if (!t->entries) abort();
  }
  t->entries[t->n++] = (cse_entry){i, key};
  t->slots[slot] = (cse_slot){h, (uint32_t)t->n};
}

/* Returns the earlier instruction identical to i, or records i and
 * returns NULL. */
static hk_instr *table_find_or_add(cse_table *t, hk_instr *i) {
  if (2 * (t->n + 1) > t->mask + 1) table_grow(t);
  uint32_t h = (uint32_t)(structural_hash(i) >> 32);
  char *key = NULL;
  size_t k = h & t->mask;
  for (; t->slots[k].entry; k = (k + 1) & t->mask) {
    if (t->slots[k].hash != h) continue;
    cse_entry *e = &t->entries[t->slots[k].entry - 1];
    if (identical(t, e, i, &key)) {
      free(key);
      return e->instr;
    }
  }
  table_add(t, k, h, i, key);
  return NULL;
}

static bool cse_candidate(const hk_instr *i, bool only_scalars) {
  if (i->opcode == HK_OP_PARAMETER || hk_instr_has_side_effect(i)) return false;
  if (i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs)) return false;
  if (only_scalars && !(hk_shape_is_array(i->shape) && i->shape->rank == 0)) return false;
  return true;
}

static bool cse_computation(hk_computation *c, stock_order_ws *ws, bool layout_sensitive,
                            bool only_scalars) {
  int64_t n = 0;
  hk_instr **order = stock_post_order(c, ws, &n);
  cse_table t;
  table_init(&t, layout_sensitive);
  bool changed = false;
  int64_t n_dead = 0;   /* replaced instructions, removed together below */
  /* Post order: an instruction's operands were already replaced by their
   * earlier twins, so equal expressions have the very same operands. */
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    if (k + 8 < n) {
      __builtin_prefetch(order[k + 8]);
      __builtin_prefetch((char *)order[k + 8] + 64);
    }
    if (!cse_candidate(i, only_scalars)) continue;
    hk_instr *prev = table_find_or_add(&t, i);
    if (!prev) continue;
    hk_instr_replace_all_uses(i, prev);
    if (stock_is_removable(i)) order[n_dead++] = i;   /* k >= n_dead: order[k] was read */
    changed = true;
  }
  table_free(&t);
  /* All at once: a constant shared by many replaced instructions costs its
   * user count once, not once per removal. */
  hk_status *st = hk_instrs_remove(order, n_dead);
  if (st) hk_status_free(st);
  free(order);
  return changed;
}

static hk_status *cse_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  stock_pass *p = (stock_pass *)self;
  bool any = false;
  stock_order_ws ws = {0};
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (hk_exec_threads_include(threads, c)) any |= cse_computation(c, &ws, p->flag[0], p->flag[1]);
  }
  stock_order_ws_free(&ws);
  *changed = any;
  return NULL;
}

static const hk_pass_vtable cse_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hlo-cse",
    .run = cse_run, .destroy = stock_pass_destroy};

static hk_pass *cse_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  hk_pass *pass = stock_pass_new(&cse_vtable, err);
  if (pass) {
    ((stock_pass *)pass)->flag[0] = hk_opt_bool(opts, "is_layout_sensitive");
    ((stock_pass *)pass)->flag[1] = hk_opt_bool(opts, "only_scalars");
  }
  return pass;
}

static const hk_option_decl cse_options[] = {
    {"is_layout_sensitive", HK_OPT_BOOL, "false", "instructions must also agree on layouts", NULL},
    {"only_scalars", HK_OPT_BOOL, "false", "only merge scalar-shaped instructions", NULL},
};

const hk_pass_desc stock_cse_desc = {
    .size = sizeof(hk_pass_desc), .name = "hlo-cse",
    .summary = "merges identical side-effect-free instructions",
    .options = cse_options, .n_options = 2, .create = cse_create};
