/* util.c - utilities shared by the hilo passes: the
 * collective predicate, collective depths, constants, group comparison. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hilo.h"

static int64_t depth_of(const hk_instr *i) { return (int64_t)(intptr_t)i->scratch - 1; }

hk_instr **hilo_collective_depths(hk_computation *c, int64_t *n, int64_t **depth) {
  hk_instr **order = hk_computation_post_order(c, n);
  int64_t *d = malloc((size_t)(*n ? *n : 1) * sizeof *d);
  if (!d) hk_out_of_memory();
  for (int64_t k = 0; k < *n; k++) {
    hk_instr *i = order[k];
    int64_t best = 0;
    for (int32_t j = 0; j < i->n_operands; j++) {
      const hk_instr *op = i->operands[j];
      int64_t v = depth_of(op) + (hk_opcode_is_collective(op->opcode) ? 1 : 0);
      if (v > best) best = v;
    }
    if (i->attrs)
      for (int32_t j = 0; j < i->attrs->n_control_preds; j++) {
        const hk_instr *op = i->attrs->control_preds[j];
        int64_t v = depth_of(op) + (hk_opcode_is_collective(op->opcode) ? 1 : 0);
        if (v > best) best = v;
      }
    d[k] = best;
    i->scratch = (void *)(intptr_t)(best + 1);
  }
  *depth = d;
  return order;
}

void hilo_clear_scratch(hk_instr **order, int64_t n) {
  for (int64_t k = 0; k < n; k++) order[k]->scratch = NULL;
}

bool hilo_same_replica_groups(const hk_replica_groups *a, const hk_replica_groups *b) {
  int32_t na = a ? a->n_groups : 0, nb = b ? b->n_groups : 0;
  if (na != nb) return false;
  if (na == 0) return true;
  if (a->group_start[na] != b->group_start[nb]) return false;
  if (memcmp(a->group_start, b->group_start, ((size_t)na + 1) * sizeof *a->group_start)) return false;
  return memcmp(a->ids, b->ids, (size_t)a->group_start[na] * sizeof *a->ids) == 0;
}

bool hilo_same_reduction(const hk_computation *a, const hk_computation *b) {
  if (a == b) return true;
  if (!a || !b || !a->root || !b->root) return false;
  const hk_instr *ra = a->root, *rb = b->root;
  if (ra->opcode != rb->opcode || ra->n_operands != 2 || rb->n_operands != 2) return false;
  if (a->n_params != 2 || b->n_params != 2) return false;
  if (!hk_shape_compatible(ra->shape, rb->shape)) return false;
  for (int k = 0; k < 2; k++) {
    if (ra->operands[k]->opcode != HK_OP_PARAMETER || rb->operands[k]->opcode != HK_OP_PARAMETER)
      return false;
    if (hk_instr_parameter_number(ra->operands[k]) != hk_instr_parameter_number(rb->operands[k]))
      return false;
  }
  return true;
}

hk_instr **hilo_collect(hk_computation *c, hk_opcode op, int64_t *n) {
  int64_t count = 0;
  for (hk_instr *i = c->first; i; i = i->next) count += i->opcode == op;
  hk_instr **v = malloc((size_t)(count ? count : 1) * sizeof *v);
  if (!v) hk_out_of_memory();
  *n = 0;
  for (hk_instr *i = c->first; i; i = i->next)
    if (i->opcode == op) v[(*n)++] = i;
  return v;
}
