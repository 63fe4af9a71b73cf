/* control.c - while, conditional and call: the called computations are
 * partitioned recursively (PartitionComputation on each callee) with the
 * shardings the caller passes in and expects back. */
#include "spmd_internal.h"

static hk_status *handle_while(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  hk_computation *cond = orig->called[0], *body = orig->called[1];
  hk_instr *op;
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  HK_TRY(spmd_reshard(v, val, s, &op));
  hk_computation *nb, *nc;
  HK_TRY(spmd_partition_computation(v->p, body, 1, &s, s, v->cg, &nb));
  const hk_sharding *pred = hk_sharding_is_manual(spmd_sharding_of(v, cond->root))
                                ? cond->root->sharding
                                : spmd_replicated_like(v, spmd_sharding_of(v, cond->root), NULL);
  HK_TRY(spmd_partition_computation(v->p, cond, 1, &s, pred, v->cg, &nc));
  hk_instr *w = spmd_clone(v, orig, op->shape, 1, &op);
  hk_computation *called[2] = {nc, nb};
  hk_instr_set_called(w, 2, called);
  spmd_set(v, orig, w, s);
  return NULL;
}

static const hk_sharding *param_sharding(spmd_visitor *v, hk_computation *c, int k) {
  if (k < c->n_params && c->params[k]) return spmd_sharding_of(v, c->params[k]);
  return hk_sharding_replicated(v->m);
}

static hk_status *handle_conditional(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  hk_instr **ops = calloc((size_t)orig->n_operands, sizeof(hk_instr *));
  hk_computation **called = calloc((size_t)(orig->n_called + 1), sizeof(hk_computation *));
  if (!ops || !called) hk_out_of_memory();
  hk_status *st = NULL;
  spmd_value *pv = spmd_lookup(v, orig->operands[0]);
  st = spmd_reshard(v, pv, pv->sharding && hk_sharding_is_manual(pv->sharding)
                              ? pv->sharding
                              : spmd_replicated_like(v, pv->sharding, NULL),
                    &ops[0]);
  for (int b = 0; b < orig->n_called && !st; b++) {
    hk_computation *br = orig->called[b];
    const hk_sharding *ps = param_sharding(v, br, 0);
    spmd_value *ov = spmd_lookup(v, orig->operands[b + 1]);
    st = spmd_reshard(v, ov, ps, &ops[b + 1]);
    if (!st) st = spmd_partition_computation(v->p, br, 1, &ps, s, v->cg, &called[b]);
  }
  if (!st) {
    hk_instr *c = spmd_clone(v, orig, spmd_local_shape(v, s, orig->shape),
                                 orig->n_operands, ops);
    hk_instr_set_called(c, orig->n_called, called);
    spmd_set(v, orig, c, s);
  }
  free(ops);
  free(called);
  return st;
}

static hk_status *handle_call(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  hk_computation *callee = orig->called[0];
  int n = orig->n_operands;
  hk_instr **ops = calloc((size_t)(n + 1), sizeof(hk_instr *));
  const hk_sharding **ps = calloc((size_t)(n + 1), sizeof(hk_sharding *));
  if (!ops || !ps) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < n && !st; k++) {
    ps[k] = param_sharding(v, callee, k);
    st = spmd_reshard(v, spmd_lookup(v, orig->operands[k]), ps[k], &ops[k]);
  }
  hk_computation *nc = NULL;
  if (!st) st = spmd_partition_computation(v->p, callee, n, ps, s, v->cg, &nc);
  if (!st) {
    hk_instr *c = spmd_clone(v, orig, nc->root->shape, n, ops);
    hk_instr_set_called(c, 1, &nc);
    spmd_set(v, orig, c, s);
  }
  free(ops);
  free(ps);
  return st;
}

hk_status *spmd_handle_control_flow(spmd_visitor *v, hk_instr *orig) {
  switch ((hk_opcode)orig->opcode) {
    case HK_OP_WHILE: return handle_while(v, orig);
    case HK_OP_CONDITIONAL: return handle_conditional(v, orig);
    case HK_OP_CALL: return handle_call(v, orig);
    default: return hk_error(HK_INTERNAL, "'%s' is not control flow", orig->name);
  }
}
