/* cp_cycle_decomposer.c - hilo-collective-permute-cycle-decomposer: a
 * collective-permute whose source->target pairs contain a cycle is split in
 * two acyclic ones, for devices that cannot run a cycle at once.  From each
 * cycle one "back edge" (the pair whose target is the cycle's smallest
 * device) goes to the first permute, the other pairs to the second; every
 * device then picks, with a select on its id, the permute that targets it.
 * Ids are partition ids for channel (cross-partition) permutes and replica
 * ids otherwise, as in XLA. */
#include <stdlib.h>

#include "hilo.h"

/* Marks in is_back[] the pairs chosen as back edges; returns how many. */
static int32_t find_back_edges(const hk_pair *pairs, int32_t n, bool *is_back) {
  int32_t count = 0;
  bool *visited = calloc((size_t)n, sizeof *visited);
  if (!visited) hk_out_of_memory();
  for (int32_t k = 0; k < n; k++) {
    if (visited[k] || pairs[k].a == pairs[k].b) continue;
    /* Follow source -> target from pair k; a cycle returns to pairs[k].a. */
    int32_t cur = k, best = k, steps = 0;
    bool cycle = false;
    while (steps++ <= n) {
      visited[cur] = true;
      if (pairs[cur].b < pairs[best].b) best = cur;
      if (pairs[cur].b == pairs[k].a) {
        cycle = true;
        break;
      }
      int32_t nxt = -1;
      for (int32_t j = 0; j < n; j++)
        if (pairs[j].a == pairs[cur].b) nxt = j;
      if (nxt < 0 || visited[nxt]) break;
      cur = nxt;
    }
    if (cycle) {
      is_back[best] = true;
      count++;
    }
  }
  free(visited);
  return count;
}

static hk_instr *permute_with(hk_instr *cp, const hk_pair *pairs, int32_t n, int64_t channel) {
  hk_instr *x = cp->operands[0];
  hk_instr *p = hk_instr_clone(cp->parent, cp, cp->shape, 1, &x, "collective-permute");
  hk_attrs *a = hk_instr_attrs(p);
  a->source_target_pairs = hk_memdup(cp->parent->module, pairs, (size_t)n * sizeof *pairs);
  a->n_source_target_pairs = n;
  a->channel_id = channel;
  return p;
}

/* pred[] true on the devices listed as targets in back[]: a constant table
 * indexed by the device id. */
static hk_instr *targets_back_edge(hk_instr *cp, const hk_pair *back, int32_t n_back) {
  hk_module *m = cp->parent->module;
  int64_t max_id = 0;
  for (int32_t k = 0; k < cp->attrs->n_source_target_pairs; k++) {
    const hk_pair *p = &cp->attrs->source_target_pairs[k];
    if (p->a > max_id) max_id = p->a;
    if (p->b > max_id) max_id = p->b;
  }
  int64_t size = max_id + 1, one = 1;
  const hk_shape *ts = hk_shape_array(m, HK_PRED, 1, &size);
  hk_instr *table = hk_instr_new(cp->parent, HK_OP_CONSTANT, ts, 0, NULL, "constant");
  hk_literal *lit = hk_literal_new(m, ts);
  for (int32_t k = 0; k < n_back; k++) hk_literal_set_i64(lit, back[k].b, 1);
  hk_instr_attrs(table)->literal = lit;
  bool cross_partition = hk_instr_has_channel_id(cp);
  hk_instr *id = hk_instr_new(cp->parent, cross_partition ? HK_OP_PARTITION_ID : HK_OP_REPLICA_ID,
                              hk_shape_scalar(m, HK_U32), 0, NULL, NULL);
  hk_instr *ops[2] = {table, id};
  hk_instr *slot = hk_instr_new(cp->parent, HK_OP_DYNAMIC_SLICE, hk_shape_array(m, HK_PRED, 1, &one),
                                2, ops, NULL);
  hk_attrs *a = hk_instr_attrs(slot);
  a->dynamic_slice_sizes.n = 1;
  a->dynamic_slice_sizes.v = hk_memdup(m, &one, sizeof one);
  hk_instr *flag = hk_instr_new(cp->parent, HK_OP_RESHAPE, hk_shape_scalar(m, HK_PRED), 1, &slot, NULL);
  return hk_build_broadcast_scalar(cp->parent, NULL, flag, cp->shape);
}

static bool decompose(hk_instr *cp, int64_t *next_channel) {
  if (cp->opcode != HK_OP_COLLECTIVE_PERMUTE || cp->n_operands != 1 || !cp->attrs ||
      !hk_shape_is_array(cp->shape))
    return false;
  int32_t n = cp->attrs->n_source_target_pairs;
  if (n < 2) return false;
  bool *is_back = calloc((size_t)n, sizeof *is_back);
  hk_pair *back = malloc((size_t)n * sizeof *back), *rest = malloc((size_t)n * sizeof *rest);
  if (!is_back || !back || !rest) hk_out_of_memory();
  bool changed = false;
  if (find_back_edges(cp->attrs->source_target_pairs, n, is_back) > 0) {
    int32_t nb = 0, nr = 0;
    for (int32_t k = 0; k < n; k++) {
      if (is_back[k]) back[nb++] = cp->attrs->source_target_pairs[k];
      else rest[nr++] = cp->attrs->source_target_pairs[k];
    }
    bool channel = hk_instr_has_channel_id(cp);
    hk_instr *cp_back = permute_with(cp, back, nb, channel ? (*next_channel)++ : 0);
    hk_instr *cp_rest = permute_with(cp, rest, nr, channel ? hk_instr_channel_id(cp) : 0);
    hk_instr *ops[3] = {targets_back_edge(cp, back, nb), cp_back, cp_rest};
    hk_instr *sel = hk_instr_new(cp->parent, HK_OP_SELECT, cp->shape, 3, ops, NULL);
    hk_instr_set_sharding(sel, cp->sharding);
    hk_instr_replace_all_uses(cp, sel);
    hk_instr_remove_control_deps(cp);
    hk_status *st = hk_instr_remove(cp);
    if (st) hk_status_free(st);
    changed = true;
  }
  free(is_back);
  free(back);
  free(rest);
  return changed;
}

static hk_status *cpd_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  (void)self;
  int64_t next_channel = hk_module_next_channel_id(m);
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    int64_t n_cp = 0;
    hk_instr **cps = hilo_collect(c, HK_OP_COLLECTIVE_PERMUTE, &n_cp);
    for (int64_t j = 0; j < n_cp; j++) *changed |= decompose(cps[j], &next_channel);
    free(cps);
  }
  return NULL;
}

static const hk_pass_vtable cpd_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-collective-permute-cycle-decomposer",
    .run = cpd_run, .destroy = hk_pass_free};

static hk_pass *cpd_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&cpd_vtable, sizeof(hilo_pass), err);
}

const hk_pass_desc hilo_cp_cycle_decomposer_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-collective-permute-cycle-decomposer",
    .summary = "splits a cyclic collective-permute into two acyclic ones",
    .options = NULL, .n_options = 0, .create = cpd_create};
