/* cse.c - hlo-cse: XLA's HloCSE.  Within a computation, an instruction
 * identical to an earlier one (same opcode, operands, shape, attributes,
 * called computations, sharding) and free of side effects is replaced by
 * it, visiting the instructions in post order.  Equal instructions have
 * the same first operand, so the earlier twin is looked for among that
 * operand's users, which sit in cache next to it; only a first operand
 * with many users (a shared constant) or none sends the lookup to a hash
 * table over (opcode, interned shape, operands, dims, called computations,
 * interned sharding).  Either way, only when two instructions agree on all
 * of that and carry attributes are their printed forms compared, which
 * covers every attribute the printer knows, raw ones included, unless
 * their attribute blocks are byte-identical (literals and dynamic-slice
 * sizes compared by value).  So the common case prints nothing. */
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
  if (!t->slots) hk_out_of_memory();
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
  if (!slots) hk_out_of_memory();
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

/* Same attributes, for structurally equal a and b; printed forms are
 * made on first need and kept in *a_key, *b_key. */
static bool same_attrs(const hk_instr *a, char **a_key, const hk_instr *b, char **b_key,
                       bool layout_sensitive) {
  if (!b->attrs || attrs_same_bytes(a->attrs, b->attrs)) return true;
  if (!*a_key) *a_key = identity_key(a, layout_sensitive);
  if (!*b_key) *b_key = identity_key(b, layout_sensitive);
  return strcmp(*a_key, *b_key) == 0;
}

/* Same instruction modulo name: structure, then (if any) attributes. */
static bool identical(const hk_instr *a, char **a_key, const hk_instr *b, char **b_key,
                      bool layout_sensitive) {
  return structurally_equal(a, b) && same_attrs(a, a_key, b, b_key, layout_sensitive);
}

/* Records representative i (printed form key, or NULL) at empty slot. */
static void table_add(cse_table *t, size_t slot, uint32_t h, hk_instr *i, char *key) {
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 1024;
    t->entries = realloc(t->entries, t->cap * sizeof *t->entries);
    if (!t->entries) hk_out_of_memory();
  }
  t->entries[t->n++] = (cse_entry){i, key};
  t->slots[slot] = (cse_slot){h, (uint32_t)t->n};
}

static uint32_t table_hash(const hk_instr *i) { return (uint32_t)(structural_hash(i) >> 32); }

/* Returns the representative identical to i, or records i and returns
 * NULL. */
static hk_instr *table_find_or_add(cse_table *t, hk_instr *i) {
  if (2 * (t->n + 1) > t->mask + 1) table_grow(t);
  uint32_t h = table_hash(i);
  char *key = NULL;
  size_t k = h & t->mask;
  for (; t->slots[k].entry; k = (k + 1) & t->mask) {
    if (t->slots[k].hash != h) continue;
    cse_entry *e = &t->entries[t->slots[k].entry - 1];
    if (identical(e->instr, &e->key, i, &key, t->layout_sensitive)) {
      free(key);
      return e->instr;
    }
  }
  table_add(t, k, h, i, key);
  return NULL;
}

/* Records representative i, known to have no twin in the table. */
static void table_insert(cse_table *t, hk_instr *i) {
  if (2 * (t->n + 1) > t->mask + 1) table_grow(t);
  uint32_t h = table_hash(i);
  size_t k = h & t->mask;
  while (t->slots[k].entry) k = (k + 1) & t->mask;
  table_add(t, k, h, i, NULL);
}

/* Per-instruction state, by post-order position. */
enum {
  ST_REP = 1,       /* visited and kept: a representative */
  ST_DECIDED = 2,   /* as a first operand: whether it is a hub is decided */
  ST_HUB = 4,       /* as a first operand: its users are looked up in the table */
};
/* A first operand with more users than this is a hub. */
#define HUB_USERS 16

/* One computation's run: the order, positions and states. */
typedef struct cse_walk {
  cse_table t;
  hk_instr **order;
  int64_t n;
  stock_order_ws *ws;   /* pos_by_id: positions of the instructions visited so far */
  uint8_t *st;
  char **keys;   /* printed forms of representatives by position, made on first need */
} cse_walk;

/* i's position in the order if the walk has visited it (else -1, or its
 * position, which holds no state yet, when a stale entry happens to
 * match). */
static int64_t position_of(const cse_walk *w, const hk_instr *i) {
  if (i->id < 0 || (size_t)i->id >= w->ws->n_ids) return -1;
  uint32_t q = w->ws->pos_by_id[i->id];
  return (int64_t)q < w->n && w->order[q] == i ? (int64_t)q : -1;
}

static bool is_rep(const cse_walk *w, const hk_instr *i) {
  int64_t q = position_of(w, i);
  return q >= 0 && (w->st[q] & ST_REP);
}

/* Operand o turns into a hub: the representatives found through it so far
 * (those whose first operand it is) move to the table. */
static void make_hub(cse_walk *w, const hk_instr *o) {
  for (int32_t u = 0; u < o->n_users; u++) {
    hk_instr *x = o->users[u];
    if (x->n_operands && x->operands[0] == o && is_rep(w, x)) table_insert(&w->t, x);
  }
}

/* Whether first operand o (at position q) is a hub: decided when first
 * met, and turned into one once its users outgrow HUB_USERS.  Twins share
 * their first operand, so they always look in the same place. */
static bool first_operand_is_hub(cse_walk *w, const hk_instr *o, int64_t q) {
  uint8_t *s = &w->st[q];
  if (!(*s & ST_DECIDED)) {
    *s |= ST_DECIDED | (o->n_users > HUB_USERS ? ST_HUB : 0);
  } else if (!(*s & ST_HUB) && o->n_users > HUB_USERS) {
    make_hub(w, o);
    *s |= ST_HUB;
  }
  return *s & ST_HUB;
}

/* Where representative x (at position q) keeps its printed form. */
static char **key_slot(cse_walk *w, int64_t q) {
  if (!w->keys) {
    w->keys = calloc((size_t)w->n + 1, sizeof *w->keys);
    if (!w->keys) hk_out_of_memory();
  }
  return &w->keys[q];
}

/* The representative among o's users identical to i, or NULL. */
static hk_instr *find_among_users(cse_walk *w, const hk_instr *o, hk_instr *i) {
  char *key = NULL;
  hk_instr *found = NULL;
  for (int32_t u = 0; u < o->n_users && !found; u++) {
    hk_instr *x = o->users[u];
    if (x == i) continue;
    int64_t q = position_of(w, x);
    if (q < 0 || !(w->st[q] & ST_REP) || !structurally_equal(x, i)) continue;
    if (same_attrs(x, key_slot(w, q), i, &key, w->t.layout_sensitive)) found = x;
  }
  free(key);
  return found;
}

/* Returns the representative identical to i (at position pos), or makes
 * i one and returns NULL.  At most one representative is identical to i:
 * a second one would have been replaced by the first. */
static hk_instr *find_or_add(cse_walk *w, hk_instr *i, int64_t pos) {
  hk_instr *found;
  int64_t q = i->n_operands ? position_of(w, i->operands[0]) : -1;
  if (q < 0 || first_operand_is_hub(w, i->operands[0], q))
    found = table_find_or_add(&w->t, i);
  else
    found = find_among_users(w, i->operands[0], i);
  if (!found) w->st[pos] |= ST_REP;
  return found;
}

/* Whether candidate i, just replaced (so without users), can go: what
 * stock_is_removable checks beyond that, cse_candidate already did. */
static bool replaced_is_removable(const hk_instr *i) {
  return !i->n_users && !hk_instr_is_root(i);
}

static bool cse_candidate(const hk_instr *i, bool only_scalars) {
  if (i->opcode == HK_OP_PARAMETER || hk_instr_has_side_effect(i)) return false;
  if (i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs)) return false;
  if (only_scalars && !(hk_shape_is_array(i->shape) && i->shape->rank == 0)) return false;
  return true;
}

/* Two stages ahead of the walk: the instruction 16 on, then what the
 * walk reads behind the pointers of the one 8 on (loaded by then): its
 * operands and its attributes (control edges are checked). */
static void prefetch_ahead(hk_instr *const *order, int64_t n, int64_t k) {
  if (k + 16 < n) {
    __builtin_prefetch(order[k + 16]);
    __builtin_prefetch((char *)order[k + 16] + 64);
  }
  if (k + 8 < n) {
    const hk_instr *x = order[k + 8];
    if (x->attrs) __builtin_prefetch(&x->attrs->n_control_preds);
    if (x->n_operands) __builtin_prefetch(x->operands);
  }
}

static bool cse_computation(hk_computation *c, stock_order_ws *ws, bool layout_sensitive,
                            bool only_scalars) {
  cse_walk w = {.ws = ws};
  w.order = stock_post_order(c, ws, &w.n);
  w.st = calloc((size_t)w.n + 1, 1);
  hk_instr **dead = malloc(((size_t)w.n + 1) * sizeof *dead);
  if (!w.st || !dead) hk_out_of_memory();
  table_init(&w.t, layout_sensitive);
  bool changed = false;
  int64_t n_dead = 0;   /* replaced instructions, removed together below */
  /* Post order: an instruction's operands were already replaced by their
   * earlier twins, so equal expressions have the very same operands. */
  for (int64_t k = 0; k < w.n; k++) {
    hk_instr *i = w.order[k];
    prefetch_ahead(w.order, w.n, k);
    /* Positions are needed only for instructions visited already: the
     * first operands (earlier in post order) and the representatives. */
    stock_order_note(ws, i, k);
    if (!cse_candidate(i, only_scalars)) continue;
    hk_instr *prev = find_or_add(&w, i, k);
    if (!prev) continue;
    hk_instr_replace_all_uses(i, prev);
    if (replaced_is_removable(i)) dead[n_dead++] = i;
    changed = true;
  }
  table_free(&w.t);
  for (int64_t k = 0; w.keys && k < w.n; k++) free(w.keys[k]);
  free(w.keys);
  /* All at once: a constant shared by many replaced instructions costs its
   * user count once, not once per removal. */
  hk_status *st = hk_instrs_remove(dead, n_dead);
  if (st) hk_status_free(st);
  free(dead);
  free(w.st);
  free(w.order);
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
  hk_pass *pass = hk_pass_alloc(&cse_vtable, sizeof(stock_pass), err);
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
