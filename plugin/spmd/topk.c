/* topk.c - the "TopK" custom call ((values, indices) of the k largest along
 * the last dim), as XLA's HandleCustomCallTopK.  Other dims partition as
 * they are.  When the last dim is split (unevenly: the padding filled with
 * the lowest value), each partition takes the top k of its piece, turns the local
 * indices into global ones, the candidates of the devices along that dim
 * are all-gathered, and a stable sort by value keeps the k best. */
#include <math.h>

#include "spmd_internal.h"

/* (value a, value b, index a, index b) -> a > b in total order. */
static hk_computation *greater_comparator(spmd_visitor *v, hk_prim value, hk_prim index) {
  hk_computation *c = hk_computation_new(v->m, "topk.greater");
  hk_prim types[4] = {value, value, index, index};
  hk_instr *p[4];
  for (int k = 0; k < 4; k++) {
    p[k] = hk_instr_new(c, HK_OP_PARAMETER, hk_shape_scalar(v->m, types[k]), 0, NULL, "p");
    hk_instr_attrs(p[k])->parameter_number = k;
    hk_computation_register_param(c, p[k]);
  }
  hk_instr *gt = hk_instr_new(c, HK_OP_COMPARE, hk_shape_scalar(v->m, HK_PRED), 2, p, NULL);
  hk_attrs *a = hk_instr_attrs(gt);
  a->cmp_dir = HK_CMP_GT;
  a->cmp_type = hk_prim_is_float(value) ? HK_CMPT_TOTALORDER : HK_CMPT_DEFAULT;
  hk_computation_set_root(c, gt);
  return c;
}

/* The top k of the gathered candidates (values, global indices). */
static hk_instr *merge_candidates(spmd_visitor *v, hk_instr *vals, hk_instr *idx, int d, int64_t k) {
  hk_instr *ops[2] = {vals, idx};
  const hk_shape *parts[2] = {vals->shape, idx->shape};
  hk_instr *sort = hk_instr_new(v->comp, HK_OP_SORT, hk_shape_tuple(v->m, 2, parts), 2, ops, NULL);
  int64_t dim = d;
  hk_instr_set_dims(sort, 1, &dim);
  hk_computation *cmp = greater_comparator(v, (hk_prim)vals->shape->elem, (hk_prim)idx->shape->elem);
  hk_instr_set_called(sort, 1, &cmp);
  hk_instr_attrs(sort)->is_stable = true;
  hk_instr *out[2] = {spmd_slice_dim(v, spmd_gte(v->comp, sort, 0), d, 0, k),
                      spmd_slice_dim(v, spmd_gte(v->comp, sort, 1), d, 0, k)};
  const hk_shape *os[2] = {out[0]->shape, out[1]->shape};
  return hk_instr_new(v->comp, HK_OP_TUPLE, hk_shape_tuple(v->m, 2, os), 2, out, NULL);
}

/* The first value of t's total order (XLA's CreateFirstWithType). */
static hk_instr *lowest(hk_prim t, spmd_visitor *v) {
  if (hk_prim_is_float(t)) return hk_build_constant_f64(v->comp, NULL, t, -INFINITY);
  int bits = hk_prim_bits(t);
  if (t == HK_PRED || hk_prim_is_unsigned_int(t)) return hk_build_constant_i64(v->comp, NULL, t, 0);
  return hk_build_constant_i64(v->comp, NULL, t, bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1)));
}

hk_status *spmd_handle_topk(spmd_visitor *v, hk_instr *orig) {
  spmd_value *xv = spmd_lookup(v, orig->operands[0]);
  const hk_shape *xs = orig->operands[0]->shape, *os = orig->shape;
  if (!xv || !xv->sharding || xv->sharding->kind != HK_SHARDING_TILED ||
      spmd_is_subgroup_manual(xv->sharding) || xv->sharding->n_subgroups || xs->rank < 1 ||
      os->elem != HK_TUPLE || os->n_tuple != 2)
    return spmd_handle_fallback(v, orig);
  const hk_sharding *s = xv->sharding;
  int last = xs->rank - 1;
  int64_t parts = hk_sharding_dim_partitions(s, last), k = os->tuple[0]->dims[last];
  int64_t per_partition = (xs->dims[last] + parts - 1) / parts;
  if (parts > 1 && per_partition <= k) return spmd_handle_fallback(v, orig);
  hk_instr *x;
  HK_TRY(spmd_reshard(v, xv, s, &x));
  /* An uneven split: the padding holds the lowest value, so it is never
   * picked before a real element (ties go to the lower, real, index). */
  if (parts > 1 && xs->dims[last] % parts)
    x = spmd_mask_padding(v, s, xs, last, x, lowest((hk_prim)xs->elem, v));
  const hk_sharding *out_s = parts > 1 ? spmd_replicate_dims(v, s, 1, (int64_t[]){last}) : s;
  /* Each partition's own top k: the other dims local, k whole. */
  const hk_shape *lv = spmd_local_shape(v, out_s, os->tuple[0]);
  const hk_shape *li = spmd_local_shape(v, out_s, os->tuple[1]);
  hk_instr *local = spmd_clone(v, orig, hk_shape_tuple(v->m, 2, (const hk_shape *[]){lv, li}),
                                   1, &x);
  if (parts > 1) {
    hk_instr *vals = spmd_gte(v->comp, local, 0), *idx = spmd_gte(v->comp, local, 1);
    hk_instr *off = spmd_tile_offset(v, s, xs, last);
    if (idx->shape->elem != HK_S32)
      off = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_scalar(v->m, (hk_prim)idx->shape->elem),
                         1, &off, NULL);
    hk_instr *ops[2] = {idx, hk_build_broadcast_scalar(v->comp, NULL, off, idx->shape)};
    idx = hk_instr_new(v->comp, HK_OP_ADD, idx->shape, 2, ops, NULL);
    int64_t n_groups, gsize, d = last;
    int64_t *groups = spmd_groups(v, s, 1, &d, &n_groups, &gsize);
    const hk_spmd_collective_ops *c = &v->p->collectives;
    hk_instr *g[2];
    hk_instr *src[2] = {vals, idx};
    for (int j = 0; j < 2; j++) {
      int64_t dims[HK_MAX_RANK];
      memcpy(dims, src[j]->shape->dims, sizeof(int64_t) * (size_t)xs->rank);
      dims[last] *= gsize;
      g[j] = c->all_gather(c->state, v->comp, src[j],
                           hk_shape_with_dims(v->m, src[j]->shape, xs->rank, dims), last, n_groups,
                           gsize, groups, &v->p->next_channel_id);
      v->p->collectives_emitted++;
    }
    free(groups);
    local = merge_candidates(v, g[0], g[1], last, k);
  }
  spmd_set(v, orig, local, hk_sharding_tuple(v->m, 2, (const hk_sharding *[]){out_s, out_s}));
  return NULL;
}
