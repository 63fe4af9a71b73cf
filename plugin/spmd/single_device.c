/* single_device.c - instructions placed on one device ({maximal device=N},
 * or a tuple all on N), as XLA's partitioner places them: an op without
 * side effects is cloned with its operands moved to that device
 * (DefaultAction); an op with side effects (infeed, outfeed, custom calls)
 * runs in a conditional on partition-id == N, the other partitions taking
 * a branch that yields zeros (HandleSingleDevice). */
#include "spmd_internal.h"

/* {maximal device=dev} spread over shape's leaves. */
static const hk_sharding *on_device(spmd_visitor *v, int64_t dev, const hk_shape *shape) {
  return hk_sharding_for_shape(v->m, hk_sharding_maximal(v->m, dev), shape);
}

/* orig's operands resharded onto device dev, into ops. */
static hk_status *operands_on_device(spmd_visitor *v, const hk_instr *orig, int64_t dev,
                                     hk_instr **ops) {
  for (int k = 0; k < orig->n_operands; k++) {
    spmd_value *val = spmd_lookup(v, orig->operands[k]);
    if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
    HK_TRY(spmd_reshard(v, val, on_device(v, dev, orig->operands[k]->shape), &ops[k]));
  }
  return NULL;
}

hk_status *spmd_handle_on_device(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int64_t dev = hk_sharding_unique_device(s);
  if (dev < 0) return hk_error(HK_INTERNAL, "'%s' is not on one device", orig->name);
  hk_instr **ops = calloc((size_t)orig->n_operands + 1, sizeof(hk_instr *));
  if (!ops) hk_out_of_memory();
  hk_status *st = operands_on_device(v, orig, dev, ops);
  if (!st) spmd_set(v, orig, spmd_clone(v, orig, orig->shape, orig->n_operands, ops), s);
  free(ops);
  return st;
}

/* Zeros of any shape in c: arrays of 0, tuples of zeros, after-all for a
 * token (XLA's CreateZero). */
hk_instr *spmd_zero_of(hk_computation *c, const hk_shape *shape) {
  if (shape->elem == HK_TOKEN) return hk_instr_new(c, HK_OP_AFTER_ALL, shape, 0, NULL, NULL);
  if (!hk_shape_is_tuple(shape))
    return hk_build_broadcast_scalar(c, NULL, hk_build_constant_i64(c, NULL, (hk_prim)shape->elem, 0),
                                     shape);
  hk_instr **e = malloc(sizeof(hk_instr *) * (size_t)(shape->n_tuple + 1));
  if (!e) hk_out_of_memory();
  for (int i = 0; i < shape->n_tuple; i++) e[i] = spmd_zero_of(c, shape->tuple[i]);
  hk_instr *t = hk_instr_new(c, HK_OP_TUPLE, shape, shape->n_tuple, e, NULL);
  free(e);
  return t;
}

/* A branch computation taking one parameter of shape `param`. */
static hk_computation *branch(spmd_visitor *v, const char *name, const hk_shape *param,
                              hk_instr **p) {
  hk_computation *c = hk_computation_new(v->m, name);
  *p = hk_instr_new(c, HK_OP_PARAMETER, param, 0, NULL, "param");
  hk_instr_attrs(*p)->parameter_number = 0;
  hk_computation_register_param(c, *p);
  return c;
}

hk_status *spmd_handle_single_device(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int64_t dev = hk_sharding_unique_device(s);
  if (dev < 0) return hk_error(HK_INTERNAL, "'%s' is not on one device", orig->name);
  int n = orig->n_operands;
  hk_instr **ops = calloc((size_t)n + 1, sizeof(hk_instr *));
  const hk_shape **shapes = calloc((size_t)n + 1, sizeof(hk_shape *));
  if (!ops || !shapes) hk_out_of_memory();
  hk_status *st = operands_on_device(v, orig, dev, ops);
  if (!st) {
    for (int k = 0; k < n; k++) shapes[k] = ops[k]->shape;
    const hk_shape *ts = hk_shape_tuple(v->m, n, shapes);
    hk_instr *args = hk_instr_new(v->comp, HK_OP_TUPLE, ts, n, ops, NULL);
    hk_instr *cmp[2] = {spmd_partition_id(v), hk_build_constant_i64(v->comp, NULL, HK_U32, dev)};
    hk_instr *pred = hk_instr_new(v->comp, HK_OP_COMPARE, hk_shape_scalar(v->m, HK_PRED), 2, cmp, NULL);
    hk_instr_attrs(pred)->cmp_dir = HK_CMP_EQ;
    /* The device's branch runs the op on the tuple's elements. */
    hk_instr *tp, *fp;
    hk_computation *tc = branch(v, "true_computation", ts, &tp);
    for (int k = 0; k < n; k++) ops[k] = spmd_gte(tc, tp, k);
    hk_instr *op = hk_instr_clone(tc, orig, orig->shape, n, ops, NULL);
    hk_instr_set_sharding(op, NULL);
    hk_computation_set_root(tc, op);
    hk_computation *fc = branch(v, "false_computation", ts, &fp);
    hk_computation_set_root(fc, spmd_zero_of(fc, orig->shape));
    hk_instr *cops[3] = {pred, args, args};
    hk_instr *cond = hk_instr_new(v->comp, HK_OP_CONDITIONAL, orig->shape, 3, cops, NULL);
    hk_computation *called[2] = {tc, fc};
    hk_instr_set_called(cond, 2, called);
    spmd_set(v, orig, cond, s);
  }
  free(ops);
  free(shapes);
  return st;
}
