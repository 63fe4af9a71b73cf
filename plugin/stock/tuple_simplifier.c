/* tuple_simplifier.c - tuple-simplifier: XLA's TupleSimplifier.
 *   get-tuple-element(tuple(a0, a1, ...), k)        -> ak
 *   tuple(gte(x, 0), gte(x, 1), ..., gte(x, n-1))   -> x   (same shape)
 * Replaced instructions are left without users for hlo-dce, except that a
 * replaced root moves to its replacement. */
#include <stdlib.h>

#include "stock.h"

/* x when t is tuple(gte(x,0) .. gte(x,n-1)) covering all of x, else NULL. */
static hk_instr *tuple_of_all_elements(const hk_instr *t) {
  if (t->n_operands == 0) return NULL;
  hk_instr *src = NULL;
  for (int32_t k = 0; k < t->n_operands; k++) {
    const hk_instr *g = t->operands[k];
    if (g->opcode != HK_OP_GET_TUPLE_ELEMENT || hk_instr_tuple_index(g) != k) return NULL;
    if (src && g->operands[0] != src) return NULL;
    src = g->operands[0];
  }
  if (!hk_shape_is_tuple(src->shape) || src->shape->n_tuple != t->n_operands) return NULL;
  return hk_shape_compatible(src->shape, t->shape) ? src : NULL;
}

static hk_instr *simplified(const hk_instr *i) {
  if (i->opcode == HK_OP_GET_TUPLE_ELEMENT) {
    const hk_instr *t = i->operands[0];
    int64_t k = hk_instr_tuple_index(i);
    if (t->opcode == HK_OP_TUPLE && k < t->n_operands &&
        hk_shape_compatible(t->operands[k]->shape, i->shape))
      return t->operands[k];
    return NULL;
  }
  if (i->opcode == HK_OP_TUPLE) return tuple_of_all_elements(i);
  return NULL;
}

/* Only tuples and get-tuple-elements are rewritten: a computation without
 * them needs no post order. */
static bool has_tuple_ops(const hk_computation *c) {
  for (const hk_instr *i = c->first; i; i = i->next) {
    hk_instr_prefetch_ahead(i);
    if (i->opcode == HK_OP_TUPLE || i->opcode == HK_OP_GET_TUPLE_ELEMENT) return true;
  }
  return false;
}

static bool simplify_computation(hk_computation *c) {
  if (!has_tuple_ops(c)) return false;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  bool changed = false;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    hk_instr *r = simplified(i);
    if (!r || r == i) continue;
    /* A replacement that loses a sharding the original carried would
     * change the partitioning; keep those. */
    if (i->sharding && r->sharding != i->sharding) continue;
    if (i->attrs && i->attrs->n_control_succs) continue;
    hk_instr_replace_all_uses(i, r);
    changed = true;
  }
  free(order);
  return changed;
}

static hk_status *tuple_simplifier_run(hk_pass *self, hk_module *m,
                                       const hk_exec_threads *threads, bool *changed) {
  stock_pass *p = (stock_pass *)self;
  bool any = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    if (p->flag[0] && c == m->entry) continue;
    any |= simplify_computation(c);
  }
  *changed = any;
  return NULL;
}

static const hk_pass_vtable tuple_simplifier_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "tuple-simplifier",
    .run = tuple_simplifier_run, .destroy = stock_pass_destroy};

static hk_pass *tuple_simplifier_create(const hk_option_values *opts, hk_registry *reg,
                                        hk_status **err) {
  (void)reg;
  hk_pass *pass = hk_pass_alloc(&tuple_simplifier_vtable, sizeof(stock_pass), err);
  if (pass) ((stock_pass *)pass)->flag[0] = hk_opt_bool(opts, "exclude_entry_computation");
  return pass;
}

static const hk_option_decl tuple_simplifier_options[] = {
    {"exclude_entry_computation", HK_OPT_BOOL, "false",
     "leave the entry computation alone", NULL},
};

const hk_pass_desc stock_tuple_simplifier_desc = {
    .size = sizeof(hk_pass_desc), .name = "tuple-simplifier",
    .summary = "folds get-tuple-element(tuple) and tuple(get-tuple-element...)",
    .options = tuple_simplifier_options, .n_options = 1, .create = tuple_simplifier_create};
