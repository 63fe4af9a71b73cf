/* cse.c - hlo-cse: XLA's HloCSE.  Within a computation, an instruction
 * identical to an earlier one (same opcode, operands, shape, attributes,
 * called computations, sharding) and free of side effects is replaced by
 * it.  Identity is decided on the instruction's printed form without its
 * name, which covers every attribute the printer knows, raw ones included. */
#include <stdlib.h>
#include <string.h>

#include "stock.h"

typedef struct cse_entry {
  char *key;
  hk_instr *instr;
} cse_entry;

typedef struct cse_table {
  cse_entry *slots;
  size_t mask, count;
} cse_table;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void table_init(cse_table *t, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 2) cap *= 2;
  t->slots = calloc(cap, sizeof *t->slots);
  if (!t->slots) abort();
  t->mask = cap - 1;
  t->count = 0;
}

static void table_free(cse_table *t) {
  for (size_t k = 0; k <= t->mask; k++) free(t->slots[k].key);
  free(t->slots);
}

/* Returns the existing instruction for key, or records (key, i) and
 * returns NULL.  Takes ownership of key. */
static hk_instr *table_find_or_add(cse_table *t, char *key, hk_instr *i) {
  size_t k = (size_t)hash_str(key) & t->mask;
  while (t->slots[k].key) {
    if (strcmp(t->slots[k].key, key) == 0) {
      free(key);
      return t->slots[k].instr;
    }
    k = (k + 1) & t->mask;
  }
  t->slots[k].key = key;
  t->slots[k].instr = i;
  t->count++;
  return NULL;
}

/* The printed instruction minus "ROOT " and "name = ". */
static char *identity_key(const hk_instr *i, bool layout_sensitive) {
  char *text = hk_instr_to_string(i, layout_sensitive ? HK_PRINT_LONG : HK_PRINT_SHORT);
  const char *eq = strstr(text, " = ");
  const char *body = eq ? eq + 3 : text;
  memmove(text, body, strlen(body) + 1);
  return text;
}

static bool cse_candidate(const hk_instr *i, bool only_scalars) {
  if (i->opcode == HK_OP_PARAMETER || hk_instr_has_side_effect(i)) return false;
  if (i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs)) return false;
  if (only_scalars && !(hk_shape_is_array(i->shape) && i->shape->rank == 0)) return false;
  return true;
}

static bool cse_computation(hk_computation *c, bool layout_sensitive, bool only_scalars) {
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  cse_table t;
  table_init(&t, (size_t)n);
  bool changed = false;
  /* Post order: operands are canonical before their users are keyed, so
   * equal expressions print with equal operand names. */
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    if (!cse_candidate(i, only_scalars)) continue;
    hk_instr *prev = table_find_or_add(&t, identity_key(i, layout_sensitive), i);
    if (!prev || !hk_shape_equal(prev->shape, i->shape)) continue;
    hk_instr_replace_all_uses(i, prev);
    if (stock_is_removable(i)) {
      hk_status *st = hk_instr_remove(i);
      if (st) hk_status_free(st);
    }
    changed = true;
  }
  table_free(&t);
  free(order);
  return changed;
}

static hk_status *cse_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  stock_pass *p = (stock_pass *)self;
  bool any = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (hk_exec_threads_include(threads, c)) any |= cse_computation(c, p->flag[0], p->flag[1]);
  }
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
