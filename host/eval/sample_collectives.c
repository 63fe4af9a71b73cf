/* sample_collectives.c - collectives in the sampled evaluator: a box of a
 * collective's result on one device is assembled from boxes of its operand
 * on the devices of its group (XLA's CollectiveOpGroupMode), in group
 * order.  Results that every member of a group shares (all-reduce,
 * all-gather) are computed once, on the group's first member. */
#include "eval/sample_internal.h"

/* Global device of id `id` of a group, for the q-th copy of the group. */
static int64_t device_of(const se_ctx *x, hk_group_mode mode, int64_t id, int64_t q, int64_t j) {
  switch (mode) {
    case HK_MODE_CROSS_REPLICA: return id * x->num_partitions + q;
    case HK_MODE_CROSS_PARTITION: return q * x->num_partitions + id;
    case HK_MODE_FLATTENED: return id;
    default: return id * x->num_partitions + j;
  }
}

static hk_status *build_groups(se_ctx *x, const hk_instr *ins, se_groups **out) {
  hk_group_mode mode = hk_collective_group_mode(ins);
  hk_id_groups ig;
  hk_collective_id_groups(ins, mode, x->num_partitions, x->num_replicas, &ig);
  int32_t ng = ig.n, *start = ig.start;
  int64_t *ids = ig.ids;
  int64_t nd = x->num_partitions * x->num_replicas;
  int64_t copies = mode == HK_MODE_CROSS_REPLICA ? x->num_partitions
                 : mode == HK_MODE_CROSS_PARTITION ? x->num_replicas : 1;
  int64_t inner = mode == HK_MODE_CROSS_REPLICA_AND_PARTITION ? x->num_partitions : 1;
  se_groups *g = calloc(1, sizeof *g);
  if (!g) hk_out_of_memory();
  g->ins = ins;
  g->n_devices = nd;
  g->n_groups = (int32_t)(ng * copies);
  g->group_of = malloc((size_t)nd * sizeof(int32_t));
  g->rank_of = malloc((size_t)nd * sizeof(int32_t));
  g->start = malloc((size_t)(g->n_groups + 1) * sizeof(int32_t));
  g->members = malloc((size_t)(start[ng] * copies * inner + 1) * sizeof(int64_t));
  if (!g->group_of || !g->rank_of || !g->start || !g->members) hk_out_of_memory();
  for (int64_t d = 0; d < nd; d++) g->group_of[d] = g->rank_of[d] = -1;
  hk_status *st = NULL;
  int32_t n = 0, gi = 0;
  for (int64_t q = 0; q < copies; q++)
    for (int32_t i = 0; i < ng; i++, gi++) {
      g->start[gi] = n;
      for (int32_t k = start[i]; k < start[i + 1]; k++)
        for (int64_t j = 0; j < inner; j++) {
          int64_t dev = device_of(x, mode, ids[k], q, j);
          if (dev < 0 || dev >= nd) {
            if (!st) st = hk_eval_error(ins, HK_FAILED_PRECONDITION, "replica group id %lld names no device",
                                        (long long)ids[k]);
            continue;
          }
          g->group_of[dev] = gi;
          g->rank_of[dev] = n - g->start[gi];
          g->members[n++] = dev;
        }
    }
  g->start[gi] = n;
  hk_id_groups_free(&ig);
  g->next = x->groups;
  x->groups = g;
  *out = g;
  return st;
}

static hk_status *group_of(se_ctx *x, const hk_instr *ins, const se_frame *f, const int64_t **members,
                           int32_t *size, int32_t *rank) {
  se_groups *g = x->groups;
  while (g && g->ins != ins) g = g->next;
  if (!g) HK_TRY(build_groups(x, ins, &g));
  int64_t dev = se_frame_device(x, f);
  int32_t gi = g->group_of[dev];
  if (gi < 0) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "device %lld is in no replica group", (long long)dev);
  *members = g->members + g->start[gi];
  *size = g->start[gi + 1] - g->start[gi];
  *rank = g->rank_of[dev];
  return NULL;
}

/* ---- the ops ------------------------------------------------------------------- */

/* Operand `leaf` (collectives with several operands return a tuple, leaf k
 * from operand k) in box b on device dev. */
static hk_status *operand_on(se_ctx *x, const se_frame *f, const hk_instr *ins, int leaf, int64_t dev,
                             const se_box *b, hk_value **out) {
  if (leaf >= ins->n_operands) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "no operand for leaf %d", leaf);
  return se_eval(x, se_peer_frame(x, f, dev), ins->operands[leaf], 0, b, out);
}

/* Folds the operand boxes of every member, in group order. */
static hk_status *combine_group(se_ctx *x, const se_frame *f, const hk_instr *ins, int leaf,
                                const int64_t *members, int32_t n, const se_box *ob, hk_value **out) {
  if (ins->n_called < 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "no reducer");
  const hk_computation *c = ins->called[0];
  hk_reducer_kind kind = hk_reducer_kind_of(c);
  hk_value *acc, *first;
  HK_TRY(operand_on(x, f, ins, leaf, members[0], ob, &first));
  acc = hk_value_clone(first);
  hk_value_release(first);
  hk_status *st = NULL;
  for (int32_t j = 1; j < n && !st; j++) {
    hk_value *v = NULL;
    st = operand_on(x, f, ins, leaf, members[j], ob, &v);
    for (int64_t i = 0; !st && i < acc->n; i++) st = se_combine_elem(x, c, kind, acc, i, v, i);
    hk_value_release(v);
  }
  if (st) {
    hk_value_release(acc);
    return st;
  }
  *out = acc;
  return NULL;
}

/* Assembles box b of a result whose dim `dim` is the concatenation, in
 * group order, of one chunk of `c` elements per member: member j's chunk
 * is its operand `leaf` at offset `base` along dim (all-gather: 0, its
 * whole operand; all-to-all: rank * c, the chunk meant for this device). */
static hk_status *concat_chunks(se_ctx *x, const se_frame *f, const hk_instr *ins, int leaf, hk_prim elem,
                                const se_box *b, const int64_t *members, int32_t n, int dim, int64_t c,
                                int64_t base, hk_value **out) {
  hk_value *v = se_value_of_box(elem, b);
  hk_status *st = NULL;
  for (int32_t j = 0; j < n && !st; j++) {
    int64_t lo = b->lo[dim] > j * c ? b->lo[dim] : j * c;
    int64_t hi = b->lo[dim] + b->n[dim] < (j + 1) * c ? b->lo[dim] + b->n[dim] : (j + 1) * c;
    if (lo >= hi) continue;
    se_box ob = *b, placed = *b;
    ob.lo[dim] = base + lo - j * c;
    ob.n[dim] = hi - lo;
    placed.lo[dim] = lo;
    placed.n[dim] = hi - lo;
    hk_value *piece;
    st = operand_on(x, f, ins, leaf, members[j], &ob, &piece);
    if (!st) {
      se_copy_box(v, b, piece, &placed);
      hk_value_release(piece);
    }
  }
  if (st) {
    hk_value_release(v);
    return st;
  }
  *out = v;
  return NULL;
}

static hk_status *all_gather(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                             const int64_t *members, int32_t n, hk_value **out) {
  if (ins->n_dims != 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "all-gather without a dimension");
  int gd = (int)ins->dims[0];
  const hk_shape *os = ins->operands[leaf < ins->n_operands ? leaf : 0]->shape;
  return concat_chunks(x, f, ins, leaf, (hk_prim)os->elem, b, members, n, gd, os->dims[gd], 0, out);
}

static hk_status *all_to_all(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                             const int64_t *members, int32_t n, int32_t rank, hk_value **out) {
  if (ins->n_dims == 0)   /* tuple form: leaf j is operand `rank` of member j */
    return se_eval(x, se_peer_frame(x, f, members[leaf]), ins->operands[rank], 0, b, out);
  int sd = (int)ins->dims[0];
  int64_t c = ins->operands[0]->shape->dims[sd] / n;
  return concat_chunks(x, f, ins, 0, (hk_prim)ins->shape->elem, b, members, n, sd, c, rank * c, out);
}

static hk_status *collective_permute(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b,
                                     hk_value **out) {
  if (ins->n_operands != 1) return hk_eval_error(ins, HK_UNIMPLEMENTED, "in-place collective-permute");
  bool cross_partition = hk_instr_has_channel_id(ins);
  int64_t me = cross_partition ? f->partition : f->replica;
  const hk_attrs *at = ins->attrs;
  for (int32_t i = 0; at && i < at->n_source_target_pairs; i++) {
    if (at->source_target_pairs[i].b != me) continue;
    int64_t src = at->source_target_pairs[i].a;
    int64_t dev = cross_partition ? f->replica * x->num_partitions + src : src * x->num_partitions + f->partition;
    if (dev < 0 || dev >= x->num_partitions * x->num_replicas)
      return hk_eval_error(ins, HK_FAILED_PRECONDITION, "source %lld names no device", (long long)src);
    return se_eval(x, se_peer_frame(x, f, dev), ins->operands[0], 0, b, out);
  }
  *out = se_value_of_box((hk_prim)ins->shape->elem, b);   /* nothing received: zeros */
  return NULL;
}

/* Offset array k (2: input_offsets, 3: send_sizes, 4: output_offsets) of
 * ragged-all-to-all on device dev, whole. */
static hk_status *ragged_offsets(se_ctx *x, const se_frame *f, const hk_instr *ins, int k, int64_t dev,
                                 hk_value **out) {
  se_box ob;
  se_box_full(&ob, ins->operands[k]->shape);
  return operand_on(x, f, ins, k, dev, &ob, out);
}

/* Box b of ragged-all-to-all: the device's output operand, overwritten in
 * group order by the rows each peer's updates for this device (the
 * dense evaluator's rule) place inside the box. */
static hk_status *ragged_all_to_all(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b,
                                    const int64_t *members, int32_t n, int32_t rank, hk_value **out) {
  if (ins->n_operands != 6 || b->rank < 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-all-to-all needs 6 operands of rank >= 1");
  hk_value *v;
  HK_TRY(operand_on(x, f, ins, 1, se_frame_device(x, f), b, &v));
  hk_value *r = hk_value_clone(v);
  hk_value_release(v);
  hk_status *st = NULL;
  for (int32_t j = 0; j < n && !st; j++) {
    hk_value *off[3] = {0};
    for (int k = 0; k < 3 && !st; k++) st = ragged_offsets(x, f, ins, 2 + k, members[j], &off[k]);
    int64_t per = !st && n > 0 ? off[0]->n / n : 0;
    for (int64_t u = 0; u < per && !st; u++) {
      int64_t idx = rank * per + u, in_off = hk_value_get_i64(off[0], idx);
      int64_t size = hk_value_get_i64(off[1], idx), out_off = hk_value_get_i64(off[2], idx);
      st = hk_ragged_update_check(ins, in_off, size, out_off, ins->operands[0]->shape->dims[0],
                                  ins->operands[1]->shape->dims[0]);
      if (st) break;
      int64_t lo = b->lo[0] > out_off ? b->lo[0] : out_off;
      int64_t hi = b->lo[0] + b->n[0] < out_off + size ? b->lo[0] + b->n[0] : out_off + size;
      if (lo >= hi) continue;
      se_box ib = *b, placed = *b;
      ib.lo[0] = in_off + lo - out_off;
      ib.n[0] = placed.n[0] = hi - lo;
      placed.lo[0] = lo;
      hk_value *piece = NULL;
      st = operand_on(x, f, ins, 0, members[j], &ib, &piece);
      if (!st) se_copy_box(r, b, piece, &placed);
      hk_value_release(piece);
    }
    for (int k = 0; k < 3; k++) hk_value_release(off[k]);
  }
  if (st) {
    hk_value_release(r);
    return st;
  }
  *out = r;
  return NULL;
}

hk_status *se_op_collective(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                            hk_value **out) {
  if (ins->opcode == HK_OP_COLLECTIVE_PERMUTE) return collective_permute(x, f, ins, b, out);
  const int64_t *members = NULL;
  int32_t n = 0, rank = 0;
  HK_TRY(group_of(x, ins, f, &members, &n, &rank));
  switch ((hk_opcode)ins->opcode) {
    case HK_OP_ALL_REDUCE:
      if (rank != 0) return se_eval(x, se_peer_frame(x, f, members[0]), ins, leaf, b, out);
      return combine_group(x, f, ins, leaf, members, n, b, out);
    case HK_OP_ALL_GATHER:
      if (rank != 0) return se_eval(x, se_peer_frame(x, f, members[0]), ins, leaf, b, out);
      return all_gather(x, f, ins, leaf, b, members, n, out);
    case HK_OP_REDUCE_SCATTER: {
      if (ins->n_dims != 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "reduce-scatter without a dimension");
      int sd = (int)ins->dims[0];
      se_box ob = *b;
      ob.lo[sd] += rank * se_leaf_shape(ins->shape, leaf)->dims[sd];
      return combine_group(x, f, ins, leaf, members, n, &ob, out);
    }
    case HK_OP_ALL_TO_ALL: return all_to_all(x, f, ins, leaf, b, members, n, rank, out);
    case HK_OP_RAGGED_ALL_TO_ALL: return ragged_all_to_all(x, f, ins, b, members, n, rank, out);
    default:
      return hk_eval_error(ins, HK_UNIMPLEMENTED, "the sampled evaluator does not support %s",
                           hk_opcode_name((hk_opcode)ins->opcode));
  }
}
