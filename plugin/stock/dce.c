/* dce.c - hlo-dce: XLA's HloDCE.  Removes instructions whose value nobody
 * uses (no users, not a root, no side effect, no control edges) and the
 * computations nothing calls any more. */
#include <stdlib.h>

#include "stock.h"

/* The scratch value that marks an instruction found dead. */
static const char dead_mark;

static bool marked_dead(const hk_instr *i) { return i->scratch == &dead_mark; }

/* Removable once the users already found dead are gone (they all are). */
static bool only_dead_users(const hk_instr *i) {
  for (int32_t u = 0; u < i->n_users; u++)
    if (!marked_dead(i->users[u])) return false;
  return !hk_instr_is_root(i) &&
         !(i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs));
}

/* Collectives that only talk across partitions may be removed when dead
 * if the user asks (XLA's remove_cross_partition_collective_ops). */
static bool is_dead_cross_partition_collective(const hk_instr *i) {
  switch (i->opcode) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL:
    case HK_OP_REDUCE_SCATTER: case HK_OP_COLLECTIVE_PERMUTE:
      break;
    default:
      return false;
  }
  return hk_instr_has_channel_id(i);
}

static bool is_dead(const hk_instr *i, bool remove_collectives) {
  if (!only_dead_users(i) || i->opcode == HK_OP_PARAMETER) return false;
  return !hk_instr_has_side_effect(i) ||
         (remove_collectives && is_dead_cross_partition_collective(i));
}

/* Adds a call site's callee to cl (consecutive repeats dropped). */
static void add_callee(stock_callees *cl, hk_computation *c) {
  if (cl->n && cl->v[cl->n - 1] == c) return;
  if (cl->n == cl->cap) {
    cl->cap = cl->cap ? 2 * cl->cap : 8;
    cl->v = realloc(cl->v, (size_t)cl->cap * sizeof *cl->v);
    if (!cl->v) hk_out_of_memory();
  }
  cl->v[cl->n++] = c;
}

/* One walk of c: its callees into cl, and whether anything in it is dead
 * with no users at all (nothing is dead otherwise, so a clean computation
 * needs no post order). */
static bool scan(const hk_computation *c, bool look_for_dead, bool remove_collectives,
                 stock_callees *cl) {
  bool dead = false;
  cl->n = 0;
  for (const hk_instr *i = c->first; i; i = i->next) {
    hk_instr_prefetch_ahead(i);
    for (int32_t k = 0; k < i->n_called; k++) add_callee(cl, i->called[k]);
    if (look_for_dead && !dead && !i->n_users && is_dead(i, remove_collectives)) dead = true;
  }
  return dead;
}

static bool remove_dead(hk_computation *c, bool remove_collectives) {
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  void **saved = malloc((size_t)(n ? n : 1) * sizeof *saved);
  hk_instr **dead = malloc((size_t)(n ? n : 1) * sizeof *dead);
  if (!saved || !dead) hk_out_of_memory();
  int64_t n_dead = 0;
  /* Users come after their operands in post order: walking it backwards
   * sees every user before the operands it may make dead.  The dead are
   * removed together, users first, so a value shared by many dead
   * instructions costs its user count once. */
  for (int64_t k = 0; k < n; k++) saved[k] = order[k]->scratch;
  for (int64_t k = n - 1; k >= 0; k--) {
    hk_instr *i = order[k];
    if (!is_dead(i, remove_collectives)) continue;
    i->scratch = (void *)&dead_mark;
    dead[n_dead++] = i;
  }
  for (int64_t k = 0; k < n; k++) order[k]->scratch = saved[k];
  hk_status *st = hk_instrs_remove(dead, n_dead);
  if (st) hk_status_free(st);
  free(saved);
  free(dead);
  free(order);
  return n_dead > 0 && !st;
}

static hk_status *dce_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  stock_pass *p = (stock_pass *)self;
  bool any = false, collectives = p->flag[0];
  int32_t nc = m->n_computations;
  stock_callees *calls = calloc((size_t)nc + 1, sizeof *calls);
  if (!calls) hk_out_of_memory();
  for (int32_t k = 0; k < nc; k++) {
    hk_computation *c = m->computations[k];
    bool mine = hk_exec_threads_include(threads, c);
    if (scan(c, mine, collectives, &calls[c->index]) && remove_dead(c, collectives)) {
      any = true;
      scan(c, false, collectives, &calls[c->index]);   /* removed call sites */
    }
  }
  any |= stock_remove_unreachable_by_callees(m, calls);
  for (int32_t k = 0; k < nc; k++) free(calls[k].v);
  free(calls);
  *changed = any;
  return NULL;
}

static const hk_pass_vtable dce_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hlo-dce",
    .run = dce_run, .destroy = stock_pass_destroy};

static hk_pass *dce_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  hk_pass *pass = hk_pass_alloc(&dce_vtable, sizeof(stock_pass), err);
  if (pass) ((stock_pass *)pass)->flag[0] = hk_opt_bool(opts, "remove_cross_partition_collective_ops");
  return pass;
}

static const hk_option_decl dce_options[] = {
    {"remove_cross_partition_collective_ops", HK_OPT_BOOL, "false",
     "also remove dead collectives that carry a channel id", NULL},
};

const hk_pass_desc stock_dce_desc = {
    .size = sizeof(hk_pass_desc), .name = "hlo-dce",
    .summary = "removes dead instructions and uncalled computations",
    .options = dce_options, .n_options = 1, .create = dce_create};
