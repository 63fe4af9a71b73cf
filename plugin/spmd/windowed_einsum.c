/* windowed_einsum.c - the windowed dot ("collective matmul", XLA's
 * windowed einsum): a loop of N steps around a ring of devices instead of
 * one big collective.  Gather: an operand sharded along a non-contracting
 * dim passes its shards round; each step fills that shard's slice of the
 * result (replaces an all-gather of the operand).  Contract: the same with
 * contracting dims (one or several, their tiles row-major along the ring;
 * the ring a subgroup when the rotating operand is also split along
 * non-contracting dims, XLA's windows within groups); each step
 * multiplies the matching slice of the other operand and accumulates.  Scatter: both operands sharded along the
 * contracting dim and the result sharded; slices of the result travel round
 * the ring, each device adding its partial sum (replaces a reduce-scatter of
 * a result-sized buffer).  Each device holds one shard at a time.  Uneven
 * dims, as XLA's: every step covers ceil(dim / N) rows, the padding of a
 * contracted dim is zeroed first (it would add to the sums), an operand
 * windowed whole is zero-padded to N chunks, and a gathered result dim is
 * sliced back to its size after the loop.  As XLA's options say, the
 * loop is rolled (one step an iteration), unrolled (two steps an
 * iteration, ring size even) or bidirectional (two steps an iteration, data
 * sent both ways round the ring so each direction covers half the tiles,
 * ring size a multiple of 4); see loop_mode.  dot.c decides when
 * (spmd_windowed_dot); this file emits the loop. */
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
  if (!ids) hk_out_of_memory();
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
  if (!pairs) hk_out_of_memory();
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

/* while (i < n), i the state's element i_index */
static hk_computation *loop_condition(spmd_visitor *v, const hk_shape *state, int i_index,
                                      int64_t n) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.cond");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  hk_instr *ops[2] = {spmd_gte(c, p, i_index), s32_constant(c, n)};
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

/* The tile (own + a + sign * i) mod N, own this partition's tile along the
 * ring, i a step counter in [0, N). */
static hk_instr *ring_tile(hk_computation *c, const spmd_windowed_dot *w, hk_instr *own,
                           hk_instr *i, int64_t a, int sign) {
  int64_t n = w->ring_size, base = (a % n + n) % n + n;   /* keeps the sum non-negative */
  hk_instr *t = binary(c, HK_OP_ADD, own, s32_constant(c, base));
  t = binary(c, sign > 0 ? HK_OP_ADD : HK_OP_SUBTRACT, t, i);
  return binary(c, HK_OP_REMAINDER, t, s32_constant(c, n));
}

/* Gather: the rows along the ring's dim one step covers: ceil(dim / N). */
static int64_t window_chunk(const hk_instr *orig, const spmd_windowed_dot *w) {
  int64_t n = w->ring_size, d = orig->operands[w->side]->shape->dims[w->dim];
  return (d + n - 1) / n;
}

/* Scatter / contract: the rows one step covers along window dim j of
 * operand side. */
static int64_t win_chunk(const hk_instr *orig, const spmd_windowed_dot *w, int j) {
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
      for (int j = 0; j < w->n_win; j++) {
        in[w->side] = spmd_zero_padding(v, w->rot_sharding, orig->operands[w->side]->shape,
                                        w->win_dims[j], in[w->side]);
        in[1 - w->side] = pad_dim_to(v, in[1 - w->side], w->win_other[j],
                                     win_chunk(orig, w, j) * w->win_parts[j]);
      }
      break;
    case SPMD_WINDOW_SCATTER:
    default:
      in[0] = spmd_zero_padding(v, w->lhs_sharding, orig->operands[0]->shape, w->lhs_contract, in[0]);
      in[1] = spmd_zero_padding(v, w->rhs_sharding, orig->operands[1]->shape, w->rhs_contract, in[1]);
      for (int j = 0; j < w->n_win; j++)
        in[w->side] = pad_dim_to(v, in[w->side], w->win_dims[j], win_chunk(orig, w, j) * w->win_parts[j]);
      break;
  }
}

/* How the loop runs (XLA's options, gated as XLA gates them on the ring
 * size): one ring step per iteration; two (unroll_windowed_einsum); or two
 * steps with data sent both ways round the ring, each direction covering
 * half the tiles (bidirectional_windowed_einsum, which takes precedence). */
typedef enum loop_mode { LOOP_ROLLED, LOOP_UNROLLED, LOOP_BIDIRECTIONAL } loop_mode;

static loop_mode loop_mode_of(const spmd_visitor *v, const spmd_windowed_dot *w) {
  const hk_spmd_options *o = &v->p->options;
  if (o->bidirectional_windowed_einsum && w->ring_size % 4 == 0) return LOOP_BIDIRECTIONAL;
  if (o->unroll_windowed_einsum && w->ring_size % 2 == 0) return LOOP_UNROLLED;
  return LOOP_ROLLED;
}

/* The loop state carries a second buffer (after acc): the second result
 * buffer of an unrolled or bidirectional scatter, or the copy of the
 * rotating operand that travels the other way in a bidirectional
 * gather/contract. */
static bool has_extra(loop_mode mode, const spmd_windowed_dot *w) {
  return mode == LOOP_BIDIRECTIONAL || (mode == LOOP_UNROLLED && w->kind == SPMD_WINDOW_SCATTER);
}

/* The local dot (or convolution) of ops, shaped `shape`, in c. */
static hk_instr *local_dot(spmd_visitor *v, hk_computation *c, hk_instr *orig,
                           const spmd_windowed_dot *w, const hk_shape *shape, hk_instr **ops) {
  hk_instr *d = hk_instr_clone(c, orig, shape, 2, ops, NULL);
  if (w->fit_local) w->fit_local(v, d, w->fit_ctx);
  return d;
}

/* Scatter / contract: the offsets along the n_win window dims of ring
 * tile `tile` (row-major over win_parts) and the rows each covers. */
static void window_offsets(hk_computation *c, hk_instr *orig, const spmd_windowed_dot *w,
                           hk_instr *tile, int64_t *chunks, hk_instr **offsets) {
  int64_t stride = w->ring_size;
  for (int j = 0; j < w->n_win; j++) {
    stride /= w->win_parts[j];
    hk_instr *coord = binary(c, HK_OP_REMAINDER, binary(c, HK_OP_DIVIDE, tile, s32_constant(c, stride)),
                             s32_constant(c, w->win_parts[j]));
    chunks[j] = win_chunk(orig, w, j);
    offsets[j] = binary(c, HK_OP_MULTIPLY, coord, s32_constant(c, chunks[j]));
  }
}

/* Gather / contract: acc after the step where the rotating operand's
 * shard is x and holds `tile`. */
static hk_instr *gather_step(spmd_visitor *v, hk_computation *c, hk_instr *orig,
                             const spmd_windowed_dot *w, hk_instr *const in[2], hk_instr *x,
                             hk_instr *tile, hk_instr *acc) {
  const hk_shape *acc_shape = acc->shape;
  hk_instr *ops[2] = {in[0], in[1]};
  ops[w->side] = x;
  if (w->kind == SPMD_WINDOW_CONTRACT) {
    int64_t chunks[HK_MAX_RANK];
    hk_instr *offsets[HK_MAX_RANK];
    window_offsets(c, orig, w, tile, chunks, offsets);
    ops[1 - w->side] = window_of(v, c, in[1 - w->side], w->n_win, w->win_other, chunks, offsets);
    return binary(c, HK_OP_ADD, acc, local_dot(v, c, orig, w, acc_shape, ops));
  }
  int64_t chunk = window_chunk(orig, w);
  hk_instr *offset = binary(c, HK_OP_MULTIPLY, tile, s32_constant(c, chunk));
  int64_t dims[HK_MAX_RANK];
  memcpy(dims, acc_shape->dims, sizeof(int64_t) * (size_t)acc_shape->rank);
  dims[w->out_dim] = chunk;
  hk_instr *prod = local_dot(v, c, orig, w, hk_shape_with_dims(v->m, acc_shape, acc_shape->rank, dims),
                             ops);
  hk_instr *dus_ops[2 + HK_MAX_RANK] = {acc, prod};
  hk_instr *zero = s32_constant(c, 0);
  for (int d = 0; d < acc_shape->rank; d++) dus_ops[2 + d] = d == w->out_dim ? offset : zero;
  return hk_instr_new(c, HK_OP_DYNAMIC_UPDATE_SLICE, acc_shape, 2 + acc_shape->rank, dus_ops, NULL);
}

/* Scatter: acc (already moved a step round the ring) plus this device's
 * partial sum for `tile` (row-major over the ring's result dims). */
static hk_instr *scatter_step(spmd_visitor *v, hk_computation *c, hk_instr *orig,
                              const spmd_windowed_dot *w, hk_instr *const in[2], hk_instr *tile,
                              hk_instr *acc) {
  int64_t chunks[HK_MAX_RANK];
  hk_instr *offsets[HK_MAX_RANK];
  window_offsets(c, orig, w, tile, chunks, offsets);
  hk_instr *ops[2] = {in[0], in[1]};
  ops[w->side] = window_of(v, c, in[w->side], w->n_win, w->win_dims, chunks, offsets);
  return binary(c, HK_OP_ADD, acc, local_dot(v, c, orig, w, acc->shape, ops));
}

/* Scatter, one iteration.  Rolled: the buffer moves one tile up the ring
 * and gains tile own+N-1-i, so it is home after N steps.  Unrolled: two
 * buffers move two tiles up, each visiting the devices of one parity (acc
 * for tiles own+N-2-i, extra for own+N-1-i: extra ends one device short
 * and is moved home after the loop).  Bidirectional: acc moves up over
 * the N/2 devices below the owner, extra down over the N/2 above it
 * (ending one device past home), two steps an iteration. */
static void scatter_iteration(spmd_visitor *v, hk_computation *c, hk_instr *orig,
                              const spmd_windowed_dot *w, loop_mode mode, hk_instr *const in[2],
                              hk_instr *i, hk_instr **acc, hk_instr **extra) {
  int64_t n = w->ring_size;
  hk_instr *own = tile_index_of_partition(v, c, w->ring, w->ring_dim);
  switch (mode) {
    case LOOP_ROLLED:
      *acc = scatter_step(v, c, orig, w, in, ring_tile(c, w, own, i, n - 1, -1),
                          ring_permute(v, c, *acc, w->ring, w->ring_dim, +1));
      break;
    case LOOP_UNROLLED:
      *extra = scatter_step(v, c, orig, w, in, ring_tile(c, w, own, i, n - 1, -1),
                            ring_permute(v, c, *extra, w->ring, w->ring_dim, +2));
      *acc = scatter_step(v, c, orig, w, in, ring_tile(c, w, own, i, n - 2, -1),
                          ring_permute(v, c, *acc, w->ring, w->ring_dim, +2));
      break;
    case LOOP_BIDIRECTIONAL:
    default:
      for (int s = 0; s < 2; s++) {
        hk_instr *j = s ? binary(c, HK_OP_ADD, i, s32_constant(c, 1)) : i;
        *acc = scatter_step(v, c, orig, w, in, ring_tile(c, w, own, j, n / 2 - 1, -1),
                            ring_permute(v, c, *acc, w->ring, w->ring_dim, +1));
        *extra = scatter_step(v, c, orig, w, in, ring_tile(c, w, own, j, -n / 2, +1),
                              ring_permute(v, c, *extra, w->ring, w->ring_dim, -1));
      }
      break;
  }
}

/* Gather / contract, one iteration: the rotating shard x holds tile own+i
 * and moves one tile down the ring per step (one step rolled, two
 * unrolled or bidirectional); bidirectionally its copy `extra`, moved up
 * once before the loop, holds tile own-1-i and moves up. */
static void gather_iteration(spmd_visitor *v, hk_computation *c, hk_instr *orig,
                             const spmd_windowed_dot *w, loop_mode mode, hk_instr **in,
                             hk_instr *i, hk_instr **acc, hk_instr **extra) {
  hk_instr *own = tile_index_of_partition(v, c, w->ring, w->ring_dim), *x = in[w->side];
  for (int s = 0; s < (mode == LOOP_ROLLED ? 1 : 2); s++) {
    hk_instr *j = s ? binary(c, HK_OP_ADD, i, s32_constant(c, 1)) : i;
    *acc = gather_step(v, c, orig, w, in, x, ring_tile(c, w, own, j, 0, +1), *acc);
    x = ring_permute(v, c, x, w->ring, w->ring_dim, -1);
    if (mode == LOOP_BIDIRECTIONAL) {
      *acc = gather_step(v, c, orig, w, in, *extra, ring_tile(c, w, own, j, -1, -1), *acc);
      *extra = ring_permute(v, c, *extra, w->ring, w->ring_dim, +1);
    }
  }
  in[w->side] = x;
}

/* (lhs, rhs, acc, [extra,] i) -> the same after one iteration. */
static hk_computation *loop_body(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w,
                                 loop_mode mode, const hk_shape *state) {
  hk_computation *c = hk_computation_new(v->m, "windowed_dot.body");
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, state, 0, NULL, "param");
  hk_computation_register_param(c, p);
  int n_state = state->n_tuple, last = n_state - 1;
  hk_instr *in[2] = {spmd_gte(c, p, 0), spmd_gte(c, p, 1)};
  hk_instr *acc = spmd_gte(c, p, 2), *i = spmd_gte(c, p, last);
  hk_instr *extra = has_extra(mode, w) ? spmd_gte(c, p, 3) : NULL;
  if (w->kind == SPMD_WINDOW_SCATTER)
    scatter_iteration(v, c, orig, w, mode, in, i, &acc, &extra);
  else
    gather_iteration(v, c, orig, w, mode, in, i, &acc, &extra);
  hk_instr *next[5] = {in[0], in[1], acc, extra, NULL};
  next[last] = binary(c, HK_OP_ADD, i, s32_constant(c, mode == LOOP_ROLLED ? 1 : 2));
  hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, state, n_state, next, NULL));
  return c;
}

/* The second buffer's start (see has_extra). */
static hk_instr *extra_init(spmd_visitor *v, const spmd_windowed_dot *w, hk_instr *const in[2],
                            const hk_shape *acc_shape) {
  if (w->kind == SPMD_WINDOW_SCATTER) return spmd_zeros(v, acc_shape);
  return ring_permute(v, v->comp, in[w->side], w->ring, w->ring_dim, +1);
}

hk_instr *spmd_emit_windowed_dot(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w) {
  const hk_shape *out_shape = spmd_local_shape(v, w->out, orig->shape), *acc_shape = out_shape;
  if (w->kind == SPMD_WINDOW_GATHER) {   /* N whole chunks along the gathered dim */
    int64_t dims[HK_MAX_RANK];
    memcpy(dims, out_shape->dims, sizeof(int64_t) * (size_t)out_shape->rank);
    dims[w->out_dim] = window_chunk(orig, w) * w->ring_size;
    acc_shape = hk_shape_with_dims(v->m, out_shape, out_shape->rank, dims);
  }
  loop_mode mode = loop_mode_of(v, w);
  bool extra = has_extra(mode, w);
  hk_instr *in[2];
  prepare_operands(v, orig, w, in);
  int n_state = extra ? 5 : 4;
  hk_instr *init[5] = {in[0], in[1], spmd_zeros(v, acc_shape), NULL, NULL};
  if (extra) init[3] = extra_init(v, w, in, acc_shape);
  init[n_state - 1] = s32_constant(v->comp, 0);
  const hk_shape *parts[5];
  for (int k = 0; k < n_state; k++) parts[k] = init[k]->shape;
  const hk_shape *state = hk_shape_tuple(v->m, n_state, parts);
  hk_instr *tuple = hk_instr_new(v->comp, HK_OP_TUPLE, state, n_state, init, NULL);
  /* i counts ring steps; bidirectionally each step covers two tiles. */
  int64_t steps = mode == LOOP_BIDIRECTIONAL ? w->ring_size / 2 : w->ring_size;
  hk_computation *called[2] = {loop_condition(v, state, n_state - 1, steps),
                               loop_body(v, orig, w, mode, state)};
  hk_instr *loop = hk_instr_new(v->comp, HK_OP_WHILE, state, 1, &tuple, NULL);
  hk_instr_set_called(loop, 2, called);
  hk_instr *acc = spmd_gte(v->comp, loop, 2);
  if (extra && w->kind == SPMD_WINDOW_SCATTER) {   /* the second buffer, one device off home */
    hk_instr *rest = ring_permute(v, v->comp, spmd_gte(v->comp, loop, 3), w->ring, w->ring_dim,
                                  mode == LOOP_UNROLLED ? +1 : -1);
    acc = binary(v->comp, HK_OP_ADD, acc, rest);
  }
  return acc_shape == out_shape ? acc : spmd_slice_dim(v, acc, w->out_dim, 0, out_shape->dims[w->out_dim]);
}
