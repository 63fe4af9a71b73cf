/* sort_topk.c - a sort that is a TopK in disguise, as XLA partitions it
 * (HandleSort with GetKValueInTopKWhenPartitionSortDim): sort(values,
 * iota) by a NaN-safe greater-than, each result read only by a slice of
 * its first k along the sort dim, values split along that dim alone.
 * Each partition sorts its shard (padding: the lowest value, the largest
 * index), keeps its first k, the k * partitions candidates are
 * all-gathered and sorted again; the slices that follow read the first k
 * of that. */
#include <math.h>

#include "spmd_internal.h"

/* ---- the comparator: gt(key(p0), key(p1)), key the sign-folded bits ----- */

static bool is_param(const hk_instr *i, int64_t n, hk_prim t) {
  return i->opcode == HK_OP_PARAMETER && i->attrs && i->attrs->parameter_number == n &&
         i->shape->elem == t;
}

/* f32 parameter n, or an f32 convert of the bf16 one. */
static bool is_f32_of_param(const hk_instr *i, int64_t n) {
  if (i->shape->elem != HK_F32) return false;
  if (is_param(i, n, HK_F32)) return true;
  return i->opcode == HK_OP_CONVERT && is_param(i->operands[0], n, HK_BF16);
}

static bool is_bitcast_of(const hk_instr *i, hk_prim t, const hk_instr **src) {
  if (i->opcode != HK_OP_BITCAST_CONVERT || i->shape->elem != t) return false;
  *src = i->operands[0];
  return true;
}

static bool is_const(const hk_instr *i, int64_t value) {
  const hk_literal *l = i->opcode == HK_OP_CONSTANT && i->attrs ? i->attrs->literal : NULL;
  return l && l->data && i->shape->rank == 0 && hk_literal_get_i64(l, 0) == value;
}

/* select(bits < 0, bitcast_s32(INT32_MAX - bitcast_u32(x)), bits), bits =
 * bitcast_s32(x), x parameter n as f32: its total order as an s32. */
static bool is_sign_folded_key(const hk_instr *i, int64_t n) {
  if (i->opcode != HK_OP_SELECT || i->shape->elem != HK_S32) return false;
  const hk_instr *lt = i->operands[0], *x = NULL, *y = NULL, *z = NULL;
  if (lt->opcode != HK_OP_COMPARE || !lt->attrs || lt->attrs->cmp_dir != HK_CMP_LT ||
      !is_const(lt->operands[1], 0) || !is_bitcast_of(lt->operands[0], HK_S32, &x) ||
      !is_f32_of_param(x, n))
    return false;
  if (!is_bitcast_of(i->operands[2], HK_S32, &y) || y != x) return false;
  const hk_instr *sub;
  if (!is_bitcast_of(i->operands[1], HK_S32, &sub) || sub->opcode != HK_OP_SUBTRACT ||
      !is_const(sub->operands[0], INT32_MAX) || !is_bitcast_of(sub->operands[1], HK_U32, &z))
    return false;
  return z == x;
}

/* XLA's IsNanSafeGt. */
static bool is_nan_safe_gt(const hk_computation *c) {
  const hk_instr *r = c->root;
  if (!r) return false;
  if (r->opcode == HK_OP_SELECT) r = r->operands[2];
  return r->opcode == HK_OP_COMPARE && r->attrs && r->attrs->cmp_dir == HK_CMP_GT &&
         is_sign_folded_key(r->operands[0], 0) && is_sign_folded_key(r->operands[1], 1);
}

/* ---- the pattern ---------------------------------------------------------------- */

/* k when orig is a TopK sort to partition so; 0 otherwise (XLA's
 * GetKValueInTopKWhenPartitionSortDim): the sort's readers are
 * get-tuple-elements, each read by a slice of the first k along the sort
 * dim alone.  They read the shrunk sort, whose global shape the value
 * records. */
static int64_t topk_k(spmd_visitor *v, const hk_instr *orig) {
  if (orig->n_operands != 2 || orig->n_called != 1 || orig->n_dims != 1 ||
      !is_nan_safe_gt(orig->called[0]))
    return 0;
  const hk_instr *data = orig->operands[0], *iota = orig->operands[1];
  int64_t sd = orig->dims[0];
  hk_prim t = (hk_prim)data->shape->elem;
  if (iota->opcode != HK_OP_IOTA || iota->shape->elem != HK_S32 || iota->n_dims != 1 ||
      iota->dims[0] != sd)
    return 0;
  if (t != HK_F32 && t != HK_BF16 && t != HK_S32 && t != HK_U32) return 0;
  int64_t k = 0;
  for (int u = 0; u < orig->n_users; u++) {
    const hk_instr *g = orig->users[u];
    if (g->opcode != HK_OP_GET_TUPLE_ELEMENT || g->n_users != 1) return 0;
    const hk_instr *sl = g->users[0];
    if (sl->opcode != HK_OP_SLICE || !sl->attrs || sl->attrs->n_slice != data->shape->rank)
      return 0;
    for (int d = 0; d < data->shape->rank; d++) {
      hk_slice_dim s = sl->attrs->slice[d];
      if (s.start != 0 || s.stride != 1) return 0;
      if (d != sd && s.limit != g->shape->dims[d]) return 0;
    }
    int64_t kk = sl->attrs->slice[sd].limit;
    if (k && kk != k) return 0;
    k = kk;
  }
  const hk_sharding *s = spmd_sharding_of(v, data);
  if (!k || s->kind != HK_SHARDING_TILED || spmd_is_subgroup_manual(s)) return 0;
  for (int d = 0; d < data->shape->rank; d++)
    if (d != sd && hk_sharding_dim_partitions(s, d) > 1) return 0;
  int64_t parts = hk_sharding_dim_partitions(s, (int)sd);
  if (parts <= 1) return 0;
  int64_t per = (data->shape->dims[sd] + parts - 1) / parts;
  return k < per ? k : 0;
}

/* ---- partitioning ------------------------------------------------------------------ */

/* The first (lowest) and last (highest) value of t's order. */
static hk_instr *extreme(spmd_visitor *v, hk_prim t, bool last) {
  if (hk_prim_is_float(t)) return hk_build_constant_f64(v->comp, NULL, t, last ? INFINITY : -INFINITY);
  if (t == HK_U32) return hk_build_constant_i64(v->comp, NULL, t, last ? UINT32_MAX : 0);
  return hk_build_constant_i64(v->comp, NULL, t, last ? INT32_MAX : INT32_MIN);
}

/* A sort like orig of local operands (shapes as they come). */
static hk_instr *sort_of(spmd_visitor *v, hk_instr *orig, hk_instr *a, hk_instr *b, bool clone) {
  hk_instr *ops[2] = {a, b};
  const hk_shape *s[2] = {a->shape, b->shape};
  const hk_shape *ts = hk_shape_tuple(v->m, 2, s);
  hk_instr *h = clone ? spmd_clone(v, orig, ts, 2, ops)
                      : hk_instr_clone(v->comp, orig, ts, 2, ops, NULL);
  hk_instr_set_sharding(h, NULL);
  return h;
}

/* The first k of element j of a sort, gathered along the sort dim. */
static hk_instr *gathered_first_k(spmd_visitor *v, hk_instr *sorted, int j, const hk_sharding *s,
                                  int64_t sd, int64_t k) {
  hk_instr *e = spmd_slice_dim(v, spmd_gte(v->comp, sorted, j), sd, 0, k);
  int64_t n_groups, gsize;
  int64_t *groups = spmd_groups(v, s, 1, &sd, &n_groups, &gsize);
  int64_t dims[HK_MAX_RANK];
  memcpy(dims, e->shape->dims, sizeof(int64_t) * (size_t)e->shape->rank);
  dims[sd] *= gsize;
  const hk_spmd_collective_ops *c = &v->p->collectives;
  hk_instr *g = c->all_gather(c->state, v->comp, e, hk_shape_with_dims(v->m, e->shape, e->shape->rank, dims),
                              sd, n_groups, gsize, groups, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(groups);
  return g;
}

hk_status *spmd_handle_sort_topk(spmd_visitor *v, hk_instr *orig, bool *handled) {
  int64_t k = topk_k(v, orig);
  *handled = k > 0;
  if (!k) return NULL;
  const hk_instr *data = orig->operands[0];
  const hk_sharding *s = spmd_sharding_of(v, data);
  const hk_shape *gs = data->shape;
  int64_t sd = orig->dims[0];
  spmd_value *dv = spmd_lookup(v, data), *iv = spmd_lookup(v, orig->operands[1]);
  if (!dv || !iv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  hk_instr *x, *idx;
  HK_TRY(spmd_reshard(v, dv, s, &x));
  HK_TRY(spmd_reshard(v, iv, s, &idx));
  if (gs->dims[sd] % hk_sharding_dim_partitions(s, (int)sd)) {
    x = spmd_mask_padding(v, s, gs, (int)sd, x, extreme(v, (hk_prim)gs->elem, false));
    idx = spmd_mask_padding(v, s, gs, (int)sd, idx, extreme(v, HK_S32, true));
  }
  hk_instr *local = sort_of(v, orig, x, idx, false);
  hk_instr *vals = gathered_first_k(v, local, 0, s, sd, k);
  hk_instr *ids = gathered_first_k(v, local, 1, s, sd, k);
  hk_instr *final = sort_of(v, orig, vals, ids, true);
  /* Replicated candidates: the value's global shape is theirs, k per
   * partition along the sort dim; the sort's own sharding is the
   * readers' business (they reshard from this). */
  spmd_set(v, orig, final, spmd_replicated_like(v, spmd_sharding_of(v, orig), final->shape))->base_shape =
      final->shape;
  return NULL;
}
