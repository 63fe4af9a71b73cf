/* windowed_einsum.c - the windowed dot ("collective matmul"): instead of
 * all-gathering a large operand sharded along one of its non-contracting
 * dims, a loop of N steps multiplies the kept operand with the shard at
 * hand, writes the product into that shard's slice of the result, and
 * passes the shard to the neighbour with a collective-permute (XLA's
 * windowed einsum; with the operand sharded along a contracting dim, each
 * step multiplies the matching slice of the kept operand and accumulates).
 * Each device holds one shard of the big operand at a time instead of all
 * of it.  The loop is rolled and unidirectional (unroll_windowed_einsum and
 * bidirectional_windowed_einsum are not implemented).
 * dot.c decides when (spmd_windowed_dot); this file emits the loop. */
#include "spmd_internal.h"

/* A scalar s32 constant in computation c. */
static hk_instr *s32_constant(hk_computation *c, int64_t value) {
  return hk_build_constant_i64(c, NULL, HK_S32, value);
}

static hk_instr *binary(hk_computation *c, hk_opcode op, hk_instr *a, hk_instr *b) {
  hk_instr *ops[2] = {a, b};
  return hk_instr_new(c, op, a->shape, 2, ops, NULL);
}

static hk_instr *gte(hk_computation *c, hk_instr *tuple, int64_t k) {
  hk_instr *g = hk_instr_new(c, HK_OP_GET_TUPLE_ELEMENT, tuple->shape->tuple[k], 1, &tuple, NULL);
  hk_instr_attrs(g)->tuple_index = k;
  return g;
}

/* The tile index of this partition along dim d of s, as an s32[] in c: a
 * table over partitions indexed by partition-id. */
static hk_instr *tile_index_of_partition(spmd_visitor *v, hk_computation *c, const hk_sharding *s,
                                         int d) {
  int64_t n = v->p->num_partitions, idx[HK_MAX_RANK];
  const hk_shape *ts = hk_shape_array(v->m, HK_S32, 1, &n);
  hk_literal *l = hk_literal_new(v->m, ts);
  for (int64_t dev = 0; dev < n; dev++)
    hk_literal_set_i64(l, dev, hk_sharding_tile_index(s, dev, idx) ? idx[d] : 0);
  hk_instr *table = hk_instr_new(c, HK_OP_CONSTANT, ts, 0, NULL, NULL);
  hk_instr_attrs(table)->literal = l;
  const hk_spmd_collective_ops *co = &v->p->collectives;
  hk_instr *ops[2] = {table, co->partition_id(co->state, c)};
  int64_t one = 1;
  hk_instr *ds = hk_instr_new(c, HK_OP_DYNAMIC_SLICE, hk_shape_array(v->m, HK_S32, 1, &one), 2,
                              ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = 1;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, &one, sizeof one);
  return hk_instr_new(c, HK_OP_RESHAPE, hk_shape_scalar(v->m, HK_S32), 1, &ds, NULL);
}

/* Pairs that move tile t+1's holder's data to tile t's holder along dim d
 * of s (s tiles only d, one device per tile). */
static hk_pair *rotation_pairs(spmd_visitor *v, const hk_sharding *s, int d, int64_t *n_pairs) {
  int64_t n = v->p->num_partitions, idx[HK_MAX_RANK];
  int64_t *holder = malloc(sizeof *holder * (size_t)n);
  hk_pair *pairs = malloc(sizeof *pairs * (size_t)n);
  if (!holder || !pairs) abort();
  for (int64_t dev = 0; dev < n; dev++)
    if (hk_sharding_tile_index(s, dev, idx)) holder[idx[d]] = dev;
  for (int64_t t = 0; t < n; t++) pairs[t] = (hk_pair){holder[(t + 1) % n], holder[t]};
  free(holder);
  *n_pairs = n;
  return pairs;
}

/* while (i < n) */
static hk_computation *loop_condition(spmd_visitor *v, const hk_shape *state, int64_t n) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.cond");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  hk_instr *ops[2] = {gte(c, p, 3), s32_constant(c, n)};
  hk_instr *lt = hk_instr_new(c, HK_OP_COMPARE, hk_shape_scalar(v->m, HK_PRED), 2, ops, NULL);
  hk_instr_attrs(lt)->cmp_dir = HK_CMP_LT;
  hk_computation_set_root(c, lt);
  return c;
}

/* The slice of `kept` along kept_dim that multiplies tile `tile` of the
 * rotating operand (contracting windows). */
static hk_instr *kept_window(spmd_visitor *v, hk_computation *c, hk_instr *kept, int dim,
                             int64_t chunk, hk_instr *offset) {
  const hk_shape *ks = kept->shape;
  int64_t sizes[HK_MAX_RANK];
  memcpy(sizes, ks->dims, sizeof(int64_t) * (size_t)ks->rank);
  sizes[dim] = chunk;
  hk_instr *ops[1 + HK_MAX_RANK];
  ops[0] = kept;
  hk_instr *zero = s32_constant(c, 0);
  for (int d = 0; d < ks->rank; d++) ops[1 + d] = d == dim ? offset : zero;
  hk_instr *ds = hk_instr_new(c, HK_OP_DYNAMIC_SLICE, hk_shape_with_dims(v->m, ks, ks->rank, sizes),
                              1 + ks->rank, ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = ks->rank;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, sizes, sizeof(int64_t) * (size_t)(ks->rank ? ks->rank : 1));
  return ds;
}

/* (kept, shard, acc, i) -> (kept, next shard, acc updated with this step's
 * product, i + 1).  Step i holds tile (own tile + i) mod n of the rotating
 * operand; its product fills that tile's slice of the result, or (a
 * contracting window) multiplies that slice of the kept operand and adds. */
static hk_computation *loop_body(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w,
                                 const hk_shape *state) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.body");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  hk_instr *kept = gte(c, p, 0), *shard = gte(c, p, 1), *acc = gte(c, p, 2), *i = gte(c, p, 3);
  int64_t n = v->p->num_partitions;
  const hk_shape *acc_shape = state->tuple[2];
  int64_t chunk = orig->operands[w->rotating_side]->shape->dims[w->rotating_dim] / n;
  hk_instr *tile = binary(c, HK_OP_REMAINDER,
                          binary(c, HK_OP_ADD, tile_index_of_partition(v, c, w->rotating_sharding,
                                                                       w->rotating_dim), i),
                          s32_constant(c, n));
  hk_instr *offset = binary(c, HK_OP_MULTIPLY, tile, s32_constant(c, chunk));
  hk_instr *ops[2];
  ops[w->rotating_side] = shard;
  ops[1 - w->rotating_side] = w->contracting ? kept_window(v, c, kept, w->kept_dim, chunk, offset)
                                             : kept;
  hk_instr *updated;
  if (w->contracting) {
    hk_instr *prod = hk_instr_clone(c, orig, acc_shape, 2, ops, NULL);
    updated = binary(c, HK_OP_ADD, acc, prod);
  } else {
    int64_t dims[HK_MAX_RANK];
    memcpy(dims, acc_shape->dims, sizeof(int64_t) * (size_t)acc_shape->rank);
    dims[w->out_dim] = chunk;
    hk_instr *prod = hk_instr_clone(c, orig, hk_shape_with_dims(v->m, acc_shape, acc_shape->rank, dims),
                                    2, ops, NULL);
    hk_instr *dus_ops[2 + HK_MAX_RANK];
    dus_ops[0] = acc;
    dus_ops[1] = prod;
    hk_instr *zero = s32_constant(c, 0);
    for (int d = 0; d < acc_shape->rank; d++) dus_ops[2 + d] = d == w->out_dim ? offset : zero;
    updated = hk_instr_new(c, HK_OP_DYNAMIC_UPDATE_SLICE, acc_shape, 2 + acc_shape->rank, dus_ops,
                           NULL);
  }
  /* The next step's shard comes from the neighbour. */
  int64_t n_pairs;
  hk_pair *pairs = rotation_pairs(v, w->rotating_sharding, w->rotating_dim, &n_pairs);
  const hk_spmd_collective_ops *co = &v->p->collectives;
  hk_instr *next = co->collective_permute(co->state, c, shard, n_pairs, pairs,
                                          &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(pairs);
  hk_instr *out[4] = {kept, next, updated, binary(c, HK_OP_ADD, i, s32_constant(c, 1))};
  hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, state, 4, out, NULL));
  return c;
}

hk_instr *spmd_emit_windowed_dot(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w) {
  const hk_shape *acc_shape = spmd_local_shape(v, w->out, orig->shape);
  hk_instr *init[4] = {w->kept, w->rotating, spmd_zeros(v, acc_shape), s32_constant(v->comp, 0)};
  const hk_shape *parts[4] = {init[0]->shape, init[1]->shape, acc_shape, init[3]->shape};
  const hk_shape *state = hk_shape_tuple(v->m, 4, parts);
  hk_instr *tuple = hk_instr_new(v->comp, HK_OP_TUPLE, state, 4, init, NULL);
  hk_computation *called[2] = {loop_condition(v, state, v->p->num_partitions),
                               loop_body(v, orig, w, state)};
  hk_instr *loop = hk_instr_new(v->comp, HK_OP_WHILE, state, 1, &tuple, NULL);
  hk_instr_set_called(loop, 2, called);
  return gte(v->comp, loop, 2);
}
