/* reshape_halo.c - XLA's shard_reshape for a reshape that splits or merges
 * a partitioned dim where uneven shards misalign the data: one reshape
 * group of input and output misaligned (the other groups partitioned as a
 * local reshape needs, XLA's recursive grouping), its major dims after
 * dims of equal total size, the same number of tiles, and the output dim
 * a multiple or a divisor of the input's.  Split: the input is given each output shard's rows by halo
 * exchange (a size-1 window padded to the output's padded extent), then
 * reshaped locally.  Merge: the shard is reshaped locally first, then the
 * result's rows realigned by halo exchange (a window with negative
 * padding).  Anything else (*handled false) goes to handlers.c's paths. */
#include "spmd_internal.h"

/* The number of elements of s before dim (its dims major to dim). */
static int64_t major_size(const hk_shape *s, int dim) {
  int64_t n = 1;
  for (int d = 0; d < dim; d++) n *= s->dims[d];
  return n;
}

/* x with the residual window of a size-1 windowed reshard applied (pads
 * with zeros, negative pads sliced off). */
static hk_instr *apply_residual(spmd_visitor *v, hk_instr *x, const hk_window_dim *w) {
  int r = x->shape->rank;
  bool pad = false, cut = false;
  for (int i = 0; i < r; i++) {
    pad = pad || w[i].pad_lo > 0 || w[i].pad_hi > 0;
    cut = cut || w[i].pad_lo < 0 || w[i].pad_hi < 0;
  }
  int64_t dims[HK_MAX_RANK];
  if (pad) {
    hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)r);
    for (int i = 0; i < r; i++) {
      pd[i] = (hk_pad_dim){w[i].pad_lo > 0 ? w[i].pad_lo : 0, w[i].pad_hi > 0 ? w[i].pad_hi : 0, 0};
      dims[i] = x->shape->dims[i] + pd[i].lo + pd[i].hi;
    }
    hk_instr *ops[2] = {x, spmd_constant_scalar(v, (hk_prim)x->shape->elem, 0)};
    x = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, x->shape, r, dims), 2, ops, NULL);
    hk_attrs *a = hk_instr_attrs(x);
    a->n_pad = r;
    a->pad = pd;
  }
  for (int i = 0; cut && i < r; i++) {
    int64_t lo = w[i].pad_lo < 0 ? -w[i].pad_lo : 0, hi = w[i].pad_hi < 0 ? -w[i].pad_hi : 0;
    if (lo || hi) x = spmd_slice_dim(v, x, i, lo, x->shape->dims[i] - hi);
  }
  return x;
}

/* val (a stand-in value: global shape gs, sharded by s) resharded as the
 * input of a size-1 window padded by pad_hi along dim; NULL if it cannot. */
static hk_status *windowed_rows(spmd_visitor *v, hk_instr *x, const hk_shape *gs,
                                const hk_sharding *s, int dim, int64_t pad_hi, hk_instr **out) {
  int r = gs->rank;
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)r);
  for (int i = 0; i < r; i++) wd[i] = (hk_window_dim){1, 1, 0, i == dim ? pad_hi : 0, 1, 1, false};
  spmd_value tmp = {.orig = NULL, .hlo = x, .sharding = s, .base_shape = gs, .cache = NULL};
  bool ok = false;
  spmd_windowed_input w;
  hk_status *st = spmd_reshard_as_windowed_input(v, &tmp, wd, s, spmd_constant_scalar(v, (hk_prim)gs->elem, 0),
                                                 false, &ok, &w);
  spmd_free_cache(tmp.cache);   /* reshards of the stand-in, none kept */
  *out = st || !ok || w.out_offsets ? NULL : apply_residual(v, w.hlo, w.window);
  return st;
}

hk_status *spmd_reshape_by_halo(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  const hk_shape *in = orig->operands[0]->shape, *out = orig->shape;
  if (!val || !val->sharding || !hk_sharding_is_tiled(s) || !hk_sharding_is_tiled(val->sharding) ||
      s->n_subgroups || val->sharding->n_subgroups || spmd_is_subgroup_manual(s) ||
      spmd_is_subgroup_manual(val->sharding) || !hk_shape_is_array(out) ||
      hk_sharding_num_tiles(s) != hk_sharding_num_tiles(val->sharding))
    return NULL;
  /* The input tiled in the output's device order: the dims of the other
   * reshape groups as the local reshape needs them (XLA groups the
   * devices on them and partitions the rest within each group), the one
   * misaligned group's input dim a by the output dim b's tiles. */
  int halo[2];
  const hk_sharding *aligned = spmd_reshape_operand_sharding(v, in, out, s, halo);
  int a = halo[0], b = halo[1];
  if (!aligned || a < 0 || major_size(in, a) != major_size(out, b)) return NULL;
  int64_t A = in->dims[a], B = out->dims[b], k = hk_sharding_dim_partitions(s, b);
  if (A == 0 || B == 0 || (A % B && B % A)) return NULL;
  /* With several dims tiled, only when the input is (nearly) aligned
   * already: a reshard that gathers first would make the halos moot. */
  if (spmd_only_tiled_dim(val->sharding, in->rank) < 0 &&
      spmd_value_reshard_cost(v, val, aligned) >
          spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, hk_shape_byte_size(val->hlo->shape), 2))
    return NULL;
  hk_instr *x;
  HK_TRY(spmd_reshard(v, val, aligned, &x));
  const hk_shape *ls = spmd_local_shape(v, s, out);
  hk_instr *res = NULL;
  if (A % B == 0) {
    /* Split: output shard j holds input rows [c j, c (j + 1)), c = its rows x A / B. */
    int64_t c = ls->dims[b] * (A / B);
    HK_TRY(windowed_rows(v, x, in, aligned, a, c * k - A, &x));
    if (x && x->shape->dims[a] == c)
      res = hk_instr_new(v->comp, HK_OP_RESHAPE, ls, 1, &x, NULL);
  } else {
    /* Merge: the shard's rows reshaped as they are, then realigned. */
    int64_t rows = x->shape->dims[a] * (B / A);
    int64_t dims[HK_MAX_RANK];
    for (int i = 0; i < out->rank; i++) dims[i] = i == b ? rows : ls->dims[i];
    hk_instr *t = hk_instr_new(v->comp, HK_OP_RESHAPE, hk_shape_with_dims(v->m, ls, out->rank, dims), 1,
                               &x, NULL);
    dims[b] = rows * k;
    const hk_shape *tmp_full = hk_shape_with_dims(v->m, out, out->rank, dims);
    HK_TRY(windowed_rows(v, t, tmp_full, s, b, B - rows * k, &t));
    if (t && hk_shape_compatible(t->shape, ls)) res = t;
  }
  if (!res) return NULL;
  spmd_set(v, orig, res, s);
  *handled = true;
  return NULL;
}
