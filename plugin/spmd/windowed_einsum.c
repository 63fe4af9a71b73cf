/* windowed_einsum.c - the windowed dot ("collective matmul", XLA's
 * windowed einsum): a loop of N steps around a ring of devices instead of
 * one big collective.  Gather: an operand sharded along a non-contracting
 * dim passes its shards round; each step fills that shard's slice of the
 * result (replaces an all-gather of the operand).  Contract: the same with
 * a contracting dim; each step multiplies the matching slice of the other
 * operand and accumulates.  Scatter: both operands sharded along the
 * contracting dim and the result sharded; slices of the result travel round
 * the ring, each device adding its partial sum (replaces a reduce-scatter of
 * a result-sized buffer).  Each device holds one shard at a time.  Uneven
 * dims, as XLA's: every step covers ceil(dim / N) rows, the padding of a
 * contracted dim is zeroed first (it would add to the sums), an operand
 * windowed whole is zero-padded to N chunks, and a gathered result dim is
 * sliced back to its size after the loop.  The loop
 * is rolled and unidirectional (unroll_windowed_einsum and
 * bidirectional_windowed_einsum are accepted but not implemented).
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

/* The tile index of this partition along dim d of s, as an s32[] in c: a
 * table over partitions indexed by partition-id. */
static hk_instr *tile_index_of_partition(spmd_visitor *v, hk_computation *c, const hk_sharding *s,
                                         int d) {
  int64_t parts = hk_sharding_dim_partitions(s, d);
  int64_t *ids = malloc(sizeof *ids * (size_t)parts);
  if (!ids) abort();
  for (int64_t t = 0; t < parts; t++) ids[t] = t;
  hk_instr *index = spmd_per_tile_scalar_in(v, c, s, d, ids);   /* the table copies them */
  free(ids);
  return index;
}

/* One ring step along tile dim d of s, in every ring at once (the devices
 * differing only in their tile along d): the holder of tile t sends to the
 * holder of tile t+step of the same ring (step = -1: data moves to the
 * previous tile's holder).  A ring is the whole device set when only d is
 * split, a subgroup when s splits other dims too. */
static hk_instr *ring_permute(spmd_visitor *v, hk_computation *c, hk_instr *x,
                              const hk_sharding *s, int d, int64_t step) {
  int64_t total = 1, stride = 1, k = s->tile_dims[d];
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  for (int i = d + 1; i < s->n_tile_dims; i++) stride *= s->tile_dims[i];
  hk_pair *pairs = malloc(sizeof *pairs * (size_t)total);
  if (!pairs) abort();
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t t = lin / stride % k, to = (t + step + k) % k;
    pairs[lin] = (hk_pair){s->devices[lin], s->devices[lin + (to - t) * stride]};
  }
  const hk_spmd_collective_ops *co = &v->p->collectives;
  hk_instr *out = co->collective_permute(co->state, c, x, total, pairs, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(pairs);
  return out;
}

/* while (i < n) */
static hk_computation *loop_condition(spmd_visitor *v, const hk_shape *state, int64_t n) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.cond");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  hk_instr *ops[2] = {spmd_gte(c, p, 3), s32_constant(c, n)};
  hk_instr *lt = hk_instr_new(c, HK_OP_COMPARE, hk_shape_scalar(v->m, HK_PRED), 2, ops, NULL);
  hk_instr_attrs(lt)->cmp_dir = HK_CMP_LT;
  hk_computation_set_root(c, lt);
  return c;
}

/* x with dims[j] cut to [offsets[j], offsets[j] + chunks[j]) (j < n). */
static hk_instr *window_of(spmd_visitor *v, hk_computation *c, hk_instr *x, int n, const int *dims,
                           const int64_t *chunks, hk_instr *const *offsets) {
  const hk_shape *xs = x->shape;
  int64_t sizes[HK_MAX_RANK];
  memcpy(sizes, xs->dims, sizeof(int64_t) * (size_t)xs->rank);
  hk_instr *ops[1 + HK_MAX_RANK];
  ops[0] = x;
  hk_instr *zero = s32_constant(c, 0);
  for (int d = 0; d < xs->rank; d++) ops[1 + d] = zero;
  for (int j = 0; j < n; j++) {
    sizes[dims[j]] = chunks[j];
    ops[1 + dims[j]] = offsets[j];
  }
  hk_instr *ds = hk_instr_new(c, HK_OP_DYNAMIC_SLICE, hk_shape_with_dims(v->m, xs, xs->rank, sizes),
                              1 + xs->rank, ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = xs->rank;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, sizes, sizeof(int64_t) * (size_t)(xs->rank ? xs->rank : 1));
  return ds;
}

/* The tile step i works on: the ring moves data towards lower tiles
 * (gather, contract: own tile + i) or the partial sums towards higher
 * ones, arriving home at the last step (scatter: own tile - 1 - i). */
static hk_instr *step_tile(spmd_visitor *v, hk_computation *c, const spmd_windowed_dot *w,
                           hk_instr *i) {
  int64_t n = w->ring_size;
  hk_instr *own = tile_index_of_partition(v, c, w->ring, w->ring_dim);
  hk_instr *t = w->kind == SPMD_WINDOW_SCATTER
                    ? binary(c, HK_OP_SUBTRACT, binary(c, HK_OP_ADD, own, s32_constant(c, n - 1)), i)
                    : binary(c, HK_OP_ADD, own, i);
  return binary(c, HK_OP_REMAINDER, t, s32_constant(c, n));
}

/* The rows along the ring's dim one step covers: ceil(dim / N). */
static int64_t window_chunk(const hk_instr *orig, const spmd_windowed_dot *w) {
  int64_t n = w->ring_size, d = orig->operands[w->side]->shape->dims[w->dim];
  return (d + n - 1) / n;
}

/* Scatter: the rows one step covers along window dim j of operand side. */
static int64_t scatter_chunk(const hk_instr *orig, const spmd_windowed_dot *w, int j) {
  int64_t n = w->win_parts[j], d = orig->operands[w->side]->shape->dims[w->win_dims[j]];
  return (d + n - 1) / n;
}

/* x with dim d zero-padded at the end to `size`. */
static hk_instr *pad_dim_to(spmd_visitor *v, hk_instr *x, int d, int64_t size) {
  int64_t dims[HK_MAX_RANK];
  memcpy(dims, x->shape->dims, sizeof(int64_t) * (size_t)x->shape->rank);
  dims[d] = size;
  return spmd_pad_to(v, x, dims);
}

/* The loop's operands made ready for uneven dims (see the top). */
static void prepare_operands(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w,
                             hk_instr **in) {
  in[0] = w->lhs;
  in[1] = w->rhs;
  switch (w->kind) {
    case SPMD_WINDOW_GATHER:
      break;
    case SPMD_WINDOW_CONTRACT:
      in[w->side] = spmd_zero_padding(v, w->ring, orig->operands[w->side]->shape, w->dim, in[w->side]);
      in[1 - w->side] = pad_dim_to(v, in[1 - w->side], w->other_dim, window_chunk(orig, w) * w->ring_size);
      break;
    case SPMD_WINDOW_SCATTER:
    default:
      in[0] = spmd_zero_padding(v, w->lhs_sharding, orig->operands[0]->shape, w->lhs_contract, in[0]);
      in[1] = spmd_zero_padding(v, w->rhs_sharding, orig->operands[1]->shape, w->rhs_contract, in[1]);
      for (int j = 0; j < w->n_win; j++)
        in[w->side] = pad_dim_to(v, in[w->side], w->win_dims[j], scatter_chunk(orig, w, j) * w->win_parts[j]);
      break;
  }
}

/* (lhs, rhs, acc, i) -> the same after step i. */
static hk_computation *loop_body(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w,
                                 const hk_shape *state) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.body");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  hk_instr *in[2] = {spmd_gte(c, p, 0), spmd_gte(c, p, 1)};
  hk_instr *acc = spmd_gte(c, p, 2), *i = spmd_gte(c, p, 3);
  const hk_shape *acc_shape = state->tuple[2];
  hk_instr *tile = step_tile(v, c, w, i);
  hk_instr *ops[2] = {in[0], in[1]}, *out[2] = {in[0], in[1]}, *updated;
  if (w->kind == SPMD_WINDOW_SCATTER) {
    /* The step's tile, row-major over the ring's dims, as a window. */
    int64_t chunks[HK_MAX_RANK], stride = w->ring_size;
    hk_instr *offsets[HK_MAX_RANK];
    for (int j = 0; j < w->n_win; j++) {
      stride /= w->win_parts[j];
      hk_instr *coord = binary(c, HK_OP_REMAINDER, binary(c, HK_OP_DIVIDE, tile, s32_constant(c, stride)),
                               s32_constant(c, w->win_parts[j]));
      chunks[j] = scatter_chunk(orig, w, j);
      offsets[j] = binary(c, HK_OP_MULTIPLY, coord, s32_constant(c, chunks[j]));
    }
    ops[w->side] = window_of(v, c, in[w->side], w->n_win, w->win_dims, chunks, offsets);
    updated = binary(c, HK_OP_ADD, ring_permute(v, c, acc, w->ring, w->ring_dim, +1),
                     hk_instr_clone(c, orig, acc_shape, 2, ops, NULL));
    hk_instr *next[4] = {out[0], out[1], updated, binary(c, HK_OP_ADD, i, s32_constant(c, 1))};
    hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, state, 4, next, NULL));
    return c;
  }
  int64_t chunk = window_chunk(orig, w);
  hk_instr *offset = binary(c, HK_OP_MULTIPLY, tile, s32_constant(c, chunk));
  switch (w->kind) {
    case SPMD_WINDOW_GATHER: {
      int64_t dims[HK_MAX_RANK];
      memcpy(dims, acc_shape->dims, sizeof(int64_t) * (size_t)acc_shape->rank);
      dims[w->out_dim] = chunk;
      hk_instr *prod = hk_instr_clone(
          c, orig, hk_shape_with_dims(v->m, acc_shape, acc_shape->rank, dims), 2, ops, NULL);
      hk_instr *dus_ops[2 + HK_MAX_RANK] = {acc, prod};
      hk_instr *zero = s32_constant(c, 0);
      for (int d = 0; d < acc_shape->rank; d++) dus_ops[2 + d] = d == w->out_dim ? offset : zero;
      updated = hk_instr_new(c, HK_OP_DYNAMIC_UPDATE_SLICE, acc_shape, 2 + acc_shape->rank,
                             dus_ops, NULL);
      out[w->side] = ring_permute(v, c, in[w->side], w->ring, w->ring_dim, -1);
      break;
    }
    case SPMD_WINDOW_CONTRACT:
    default:
      ops[1 - w->side] = window_of(v, c, in[1 - w->side], 1, &w->other_dim, &chunk, &offset);
      updated = binary(c, HK_OP_ADD, acc, hk_instr_clone(c, orig, acc_shape, 2, ops, NULL));
      out[w->side] = ring_permute(v, c, in[w->side], w->ring, w->ring_dim, -1);
      break;
  }
  hk_instr *next[4] = {out[0], out[1], updated, binary(c, HK_OP_ADD, i, s32_constant(c, 1))};
  hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, state, 4, next, NULL));
  return c;
}

hk_instr *spmd_emit_windowed_dot(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w) {
  const hk_shape *out_shape = spmd_local_shape(v, w->out, orig->shape), *acc_shape = out_shape;
  if (w->kind == SPMD_WINDOW_GATHER) {   /* N whole chunks along the gathered dim */
    int64_t dims[HK_MAX_RANK];
    memcpy(dims, out_shape->dims, sizeof(int64_t) * (size_t)out_shape->rank);
    dims[w->out_dim] = window_chunk(orig, w) * w->ring_size;
    acc_shape = hk_shape_with_dims(v->m, out_shape, out_shape->rank, dims);
  }
  hk_instr *in[2];
  prepare_operands(v, orig, w, in);
  hk_instr *init[4] = {in[0], in[1], spmd_zeros(v, acc_shape), s32_constant(v->comp, 0)};
  const hk_shape *parts[4] = {init[0]->shape, init[1]->shape, acc_shape, init[3]->shape};
  const hk_shape *state = hk_shape_tuple(v->m, 4, parts);
  hk_instr *tuple = hk_instr_new(v->comp, HK_OP_TUPLE, state, 4, init, NULL);
  hk_computation *called[2] = {loop_condition(v, state, w->ring_size),
                               loop_body(v, orig, w, state)};
  hk_instr *loop = hk_instr_new(v->comp, HK_OP_WHILE, state, 1, &tuple, NULL);
  hk_instr_set_called(loop, 2, called);
  hk_instr *acc = spmd_gte(v->comp, loop, 2);
  return acc_shape == out_shape ? acc : spmd_slice_dim(v, acc, w->out_dim, 0, out_shape->dims[w->out_dim]);
}
