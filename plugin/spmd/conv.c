/* conv.c - convolutions partitioned along their convolutional spatial dims
 * (XLA's PartitionConvolution): with both operands tiled alike, the lhs
 * gets halos from its neighbours (conv_halo_exchange_always_on_lhs) and
 * each shard convolves its piece with its piece of the kernel, partial sums
 * all-reduced; with the output tiled, the lhs is resharded as a windowed
 * input (windowed.c) and convolved with the replicated kernel.  Every other
 * convolution - dims that act as batch, contracting or non-contracting
 * dims, groups - goes through the dot handler (dot.c). */
#include "spmd_internal.h"

static int64_t groups_of(int64_t g) { return g > 1 ? g : 1; }

spmd_conv_dim_role spmd_conv_dim_role_of(const hk_instr *conv, int k) {
  const hk_conv_dnums *cd = conv->attrs->conv;
  const hk_window *w = conv->attrs->window;
  if (!w || k >= w->n_dims) return SPMD_CONV_SPATIAL;
  const hk_window_dim *wd = &w->dims[k];
  int64_t l = conv->operands[0]->shape->dims[cd->input_spatial[k]];
  int64_t r = conv->operands[1]->shape->dims[cd->kernel_spatial[k]];
  bool unpadded = !wd->pad_lo && !wd->pad_hi && !wd->reversal;
  int64_t step = l > 1 ? l - 1 : 1;
  /* XLA's SpatialIsBatch (its padded form is left a convolution dim) */
  if (unpadded && l == wd->size && l == wd->base_dilation) {
    if (wd->stride == step && wd->window_dilation == 1) return SPMD_CONV_BATCH;
    if (wd->window_dilation == step && wd->stride == 1) return SPMD_CONV_BATCH_DILATED;
  }
  bool plain = wd->base_dilation == 1 && wd->window_dilation == 1;
  if (plain && unpadded && l == wd->size && r == wd->size) return SPMD_CONV_CONTRACTING;
  if (!plain || wd->stride != 1) return SPMD_CONV_SPATIAL;
  if (r == 1 && wd->size == 1 && unpadded) return SPMD_CONV_LHS_NON_CONTRACTING;
  if (l == 1 && wd->size == r && wd->pad_lo == r - 1 && wd->pad_hi == r - 1 && wd->reversal)
    return SPMD_CONV_RHS_NON_CONTRACTING;
  return SPMD_CONV_SPATIAL;
}

/* Whether spatial dim i is a real convolution dim, not a dot dim in disguise. */
static bool conv_spatial_dim(const hk_instr *conv, int i) {
  return spmd_conv_dim_role_of(conv, i) == SPMD_CONV_SPATIAL;
}

static int64_t parts(const hk_sharding *s, int64_t d) {
  return s && hk_sharding_is_tiled(s) ? hk_sharding_dim_partitions(s, (int)d) : 1;
}

/* The local convolution of lhs and rhs with window dims wd (n_spatial). */
static hk_instr *local_conv(spmd_visitor *v, hk_instr *orig, hk_instr *lhs, hk_instr *rhs,
                            const hk_window_dim *wd) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  int64_t dims[HK_MAX_RANK];
  int64_t bgc = groups_of(orig->attrs->batch_group_count);
  int64_t out_batch = orig->shape->dims[cd->output_batch];
  dims[cd->output_batch] = bgc > 1 ? out_batch : lhs->shape->dims[cd->input_batch];
  dims[cd->output_feature] = rhs->shape->dims[cd->kernel_output_feature];
  for (int i = 0; i < cd->n_spatial; i++) {
    const hk_window_dim *w = &wd[i];
    int64_t n = lhs->shape->dims[cd->input_spatial[i]];
    int64_t padded = (n > 0 ? (n - 1) * w->base_dilation + 1 : 0) + w->pad_lo + w->pad_hi;
    int64_t dilated = (w->size - 1) * w->window_dilation + 1;
    dims[cd->output_spatial[i]] = padded < dilated ? 0 : (padded - dilated) / w->stride + 1;
  }
  hk_instr *ops[2] = {lhs, rhs};
  hk_instr *c = spmd_clone(v, orig, hk_shape_with_dims(v->m, orig->shape, orig->shape->rank, dims), 2, ops);
  hk_attrs *a = hk_instr_attrs(c);
  hk_window *win = hk_alloc(v->m, sizeof *win);
  win->n_dims = cd->n_spatial;
  win->dims = wd;
  a->window = win;
  if (groups_of(a->feature_group_count) > 1)
    a->feature_group_count = lhs->shape->dims[cd->input_feature] / rhs->shape->dims[cd->kernel_input_feature];
  if (bgc > 1) a->batch_group_count = lhs->shape->dims[cd->input_batch] / out_batch;
  return c;
}

/* Grouped convolutions keep their grouped dims whole here. */
static bool groups_unpartitioned(const hk_instr *orig, const hk_sharding *ls, const hk_sharding *rs) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  if (groups_of(orig->attrs->feature_group_count) > 1 &&
      (parts(ls, cd->input_feature) > 1 || parts(rs, cd->kernel_output_feature) > 1))
    return false;
  if (groups_of(orig->attrs->batch_group_count) > 1 &&
      (parts(ls, cd->input_batch) > 1 || parts(rs, cd->kernel_output_feature) > 1))
    return false;
  return true;
}

/* ---- both operands tiled: halos on one of them, partial sums all-reduced ---- */

/* The rhs under rt with the reversed kernel dims rev (n of them) padded
 * on the left instead of the right (XLA's HaloExchangeToPadOnLeft): rt
 * holds those dims' tiles in reverse device order, so the uneven padding
 * a reversed window reads first must sit at the start of the kernel, not
 * its end.  A windowed reshard with low padding, the padding then zeroed;
 * *out NULL when that reshard cannot be built. */
static hk_status *rhs_padded_on_left(spmd_visitor *v, hk_instr *orig, const hk_sharding *rt, int nrev,
                                     const int64_t *rev, hk_instr **out) {
  const hk_shape *gs = orig->operands[1]->shape;
  int r = gs->rank;
  int64_t lo[HK_MAX_RANK] = {0};
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)r);
  for (int k = 0; k < nrev; k++) {
    int64_t n = parts(rt, rev[k]);
    lo[rev[k]] = (gs->dims[rev[k]] + n - 1) / n * n - gs->dims[rev[k]];
  }
  for (int d = 0; d < r; d++) wd[d] = (hk_window_dim){1, 1, lo[d], 0, 1, 1, false};
  hk_instr *zero = spmd_constant_scalar(v, (hk_prim)gs->elem, 0);
  bool ok;
  spmd_windowed_input w;
  *out = NULL;
  HK_TRY(spmd_reshard_as_windowed_input(v, spmd_lookup(v, orig->operands[1]), wd, rt, zero, false, &ok, &w));
  if (!ok || w.out_offsets || !hk_shape_compatible(w.hlo->shape, spmd_local_shape(v, rt, gs))) return NULL;
  hk_instr *x = w.hlo;
  for (int d = 0; d < r; d++)
    x = lo[d] ? spmd_mask_outside(v, x, d, spmd_tile_offset(v, rt, gs, d), lo[d], INT64_MAX, zero)
              : spmd_zero_padding(v, rt, gs, d, x);
  *out = x;
  return NULL;
}

/* The operands of a convolution with both tiled, aligned as XLA's
 * PartitionConvolutionWithSpatialDimensionHaloExchangeOn{LHS,RHS} align
 * them: the smaller one resharded to follow the other (with the kernel's
 * tiles in reverse order along reversed window dims, which only the lhs
 * variant, allow_reversal, takes), uneven padding zeroed.  false when they
 * cannot be (a batch or output feature split, split groups, base-dilated
 * windows). */
static hk_status *aligned_operands(spmd_visitor *v, hk_instr *orig, bool allow_reversal,
                                   const hk_sharding **lt, const hk_sharding **rt, hk_instr **lhs,
                                   hk_instr **rhs, bool *ok) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_window *win = orig->attrs->window;
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  const hk_sharding *ls = lv->sharding, *rs = rv->sharding;
  *ok = false;
  if (!hk_sharding_is_tiled(ls) || !hk_sharding_is_tiled(rs) || ls->n_subgroups || rs->n_subgroups ||
      spmd_is_subgroup_manual(ls) || spmd_is_subgroup_manual(rs))
    return NULL;
  int64_t rev[HK_MAX_RANK];
  int nrev = 0;
  for (int i = 0; i < cd->n_spatial; i++) {
    if (win->dims[i].base_dilation != 1 || (win->dims[i].reversal && !allow_reversal)) return NULL;
    if (win->dims[i].reversal) rev[nrev++] = cd->kernel_spatial[i];
  }
  int r = orig->shape->rank;
  int64_t rhs_to_lhs[HK_MAX_RANK], lhs_to_rhs[HK_MAX_RANK];
  rhs_to_lhs[cd->kernel_output_feature] = cd->input_batch;
  rhs_to_lhs[cd->kernel_input_feature] = cd->input_feature;
  for (int i = 0; i < cd->n_spatial; i++) rhs_to_lhs[cd->kernel_spatial[i]] = cd->input_spatial[i];
  for (int i = 0; i < r; i++) lhs_to_rhs[rhs_to_lhs[i]] = i;
  *lt = ls;
  *rt = rs;
  if (hk_shape_byte_size(orig->operands[0]->shape) < hk_shape_byte_size(orig->operands[1]->shape))
    *lt = hk_sharding_transpose(v->m, nrev ? spmd_reverse_sharding(v, rs, rev, nrev) : rs, lhs_to_rhs);
  else if ((*rt = hk_sharding_transpose(v->m, ls, rhs_to_lhs)) && nrev)
    *rt = spmd_reverse_sharding(v, *rt, rev, nrev);
  if (!*lt || !*rt || parts(*lt, cd->input_batch) != 1 || parts(*rt, cd->kernel_output_feature) != 1 ||
      !groups_unpartitioned(orig, *lt, *rt))
    return NULL;
  if (nrev) {
    HK_TRY(rhs_padded_on_left(v, orig, *rt, nrev, rev, rhs));
    if (!*rhs) return NULL;
  } else {
    HK_TRY(spmd_reshard(v, rv, *rt, rhs));
    for (int d = 0; d < r; d++) *rhs = spmd_zero_padding(v, *rt, orig->operands[1]->shape, d, *rhs);
  }
  HK_TRY(spmd_reshard(v, lv, *lt, lhs));
  for (int d = 0; d < r; d++) *lhs = spmd_zero_padding(v, *lt, orig->operands[0]->shape, d, *lhs);
  *ok = true;
  return NULL;
}

/* The local convolution c of aligned operands (the lhs tiled by lt) is a
 * partial sum of the whole result: summed over the tiles (replicas of a
 * tile hold the same sums) and resharded to the output's sharding. */
static hk_status *sum_partial_conv(spmd_visitor *v, hk_instr *orig, hk_instr *c, const hk_sharding *lt) {
  int r = orig->shape->rank;
  int64_t tdims[HK_MAX_RANK], n_groups, gsize;
  for (int i = 0; i < r; i++) tdims[i] = i;
  int64_t *groups = spmd_groups(v, lt, r, tdims, &n_groups, &gsize);
  const hk_spmd_collective_ops *co = &v->p->collectives;
  c = co->all_reduce(co->state, v->comp, c, spmd_reducer(v->m, (hk_prim)c->shape->elem, HK_OP_ADD), n_groups,
                     gsize, groups, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(groups);
  const hk_sharding *rep = hk_sharding_replicated(v->m);
  if (lt->replicate_on_last_tile_dim) rep = hk_sharding_replicate_dims(v->m, lt, r, tdims);
  const hk_sharding *o = spmd_sharding_of(v, orig);
  hk_instr *out;
  HK_TRY(spmd_reshard_hlo(v, c, orig->shape, rep, o, &out));
  spmd_set(v, orig, out, o);
  return NULL;
}

/* The window count of spatial dim i over the whole lhs. */
static int64_t window_count(const hk_instr *orig, int i) {
  const hk_window_dim *wd = &orig->attrs->window->dims[i];
  int64_t base = orig->operands[0]->shape->dims[orig->attrs->conv->input_spatial[i]];
  return 1 + (wd->pad_lo + wd->pad_hi + base - (1 + (wd->size - 1) * wd->window_dilation)) / wd->stride;
}

/* The aligned operands of a halo plan (lhs tiled by lt, rhs by rt), the
 * local window being built (nw) and the zero the halos are padded with. */
typedef struct halo_conv {
  const hk_sharding *lt, *rt;
  hk_instr *lhs, *rhs, *zero;
  hk_window_dim *nw;
} halo_conv;

/* Spatial dim i, split k ways: the lhs shard i with the halos the windows
 * of kernel shard i read, [rsz D i - pad_lo, + stride (wc - 1) + (rsz - 1) D
 * + 1); false when they reach too far. */
static bool lhs_dim_halos(spmd_visitor *v, hk_instr *orig, int i, int64_t k, halo_conv *hc) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_window_dim *wd = &orig->attrs->window->dims[i];
  int64_t d = cd->input_spatial[i], base = orig->operands[0]->shape->dims[d];
  int64_t lsz = (base + k - 1) / k;
  int64_t rsz = (orig->operands[1]->shape->dims[cd->kernel_spatial[i]] + k - 1) / k;
  int64_t wc = window_count(orig, i), rd = rsz * wd->window_dilation;
  int64_t *left = malloc(sizeof(int64_t) * (size_t)(3 * k));
  if (!left) hk_out_of_memory();
  int64_t *right = left + k, *none = left + 2 * k;
  for (int64_t j = 0; j < k; j++) {
    left[j] = (lsz - rd) * j + wd->pad_lo;
    right[j] = (rd - lsz) * j + rd - lsz + 1 - wd->window_dilation + wd->stride * (wc - 1) - wd->pad_lo;
    none[j] = 0;
  }
  spmd_halo h = {.ring = {k, -1, 0}, .left = left, .right = right, .explicit_left = wd->pad_lo,
                 .padded_full = 0, .base_dim = base,
                 .shard_with_halo = wd->stride * (wc - 1) + (rsz - 1) * wd->window_dilation + 1,
                 .offset_on_padded = none, .mask = false};
  hk_instr *ext = spmd_exchange_halo_valid(v, hc->lhs, hc->lt, d, &h, hc->zero);
  free(left);
  if (!ext) return false;
  hc->lhs = ext;
  hc->nw[i].pad_lo = hc->nw[i].pad_hi = 0;
  hc->nw[i].size = rsz;
  return true;
}

/* The low padding npl(j) lhs shard j (lsz elements along ld) needs: when
 * every shard needs the same, the local window's (*pad_lo).  Else the lhs
 * is padded by max(max_npl, 0) low and max_npl - min npl high and shard j
 * slices lsz + max_npl from lo_pad - npl(j), *pad_lo 0 (XLA pads by
 * max_npl on both sides, which needs every npl(j) >= 0: with negative
 * padding one may not be).  start: k scratch elements.  false when the
 * slice would be empty. */
static bool lhs_low_padding(spmd_visitor *v, halo_conv *hc, int64_t ld, int64_t lsz, int64_t k,
                            const int64_t *npl, int64_t max_npl, int64_t *start, int64_t *pad_lo) {
  bool constant = true;
  int64_t min_npl = npl[0];
  for (int64_t j = 0; j < k; j++) {
    constant = constant && npl[j] == npl[0];
    if (npl[j] < min_npl) min_npl = npl[j];
  }
  *pad_lo = constant ? max_npl : 0;
  if (constant) return true;
  if (lsz + max_npl <= 0) return false;
  int64_t lo_pad = max_npl > 0 ? max_npl : 0;
  for (int64_t j = 0; j < k; j++) start[j] = lo_pad - npl[j];
  hk_instr *padded = spmd_pad_along(v, hc->lhs, hc->zero, ld, lo_pad, max_npl - min_npl);
  hc->lhs = spmd_dynamic_slice_dim(v, padded, ld, spmd_per_tile_scalar(v, hc->lt, ld, start), lsz + max_npl);
  return true;
}

/* Spatial dim i, split k ways: kernel shard i (positions [rsz i, rsz (i +
 * 1)) of the undilated kernel) with the halos from its neighbours that
 * every window over lhs shard i [lsz i, lsz (i + 1)) reaches, in undilated
 * kernel positions:
 *   left(i)  = ceil((i (rsz D - lsz) + (wc - 1) stride - pad_lo) / D)
 *   right(i) = ceil(((i + 1) (lsz - rsz D) + pad_lo) / D)
 * (XLA's PartitionConvolutionWithSpatialDimensionHaloExchangeOnRHS).  The
 * lhs shard then needs low padding npl(i) = left(i) D - (i (rsz D - lsz)
 * - pad_lo), given as lhs_low_padding says. */
static bool rhs_dim_halos(spmd_visitor *v, hk_instr *orig, int i, int64_t k, halo_conv *hc) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_window_dim *wd = &orig->attrs->window->dims[i];
  int64_t ld = cd->input_spatial[i], kd = cd->kernel_spatial[i];
  int64_t D = wd->window_dilation, wc = window_count(orig, i);
  int64_t lsz = (orig->operands[0]->shape->dims[ld] + k - 1) / k;
  int64_t rsz = (orig->operands[1]->shape->dims[kd] + k - 1) / k;
  int64_t *left = calloc((size_t)(4 * k), sizeof(int64_t));
  if (!left) hk_out_of_memory();
  int64_t *right = left + k, *npl = left + 2 * k, *start = left + 3 * k;
  int64_t max_left = INT64_MIN, max_right = INT64_MIN, max_npl = INT64_MIN;
  for (int64_t j = 0; j < k; j++) {
    left[j] = (j * (rsz * D - lsz) + (wc - 1) * wd->stride - wd->pad_lo + D - 1) / D;
    right[j] = (j * (lsz - rsz * D) + lsz - rsz * D + wd->pad_lo + D - 1) / D;
    npl[j] = left[j] * D - (j * (rsz * D - lsz) - wd->pad_lo);
    if (j >= 1 && left[j] > max_left) max_left = left[j];
    if (j < k - 1 && right[j] > max_right) max_right = right[j];
    if (npl[j] > max_npl) max_npl = npl[j];
  }
  /* The window of every shard spans rsz + max_left + max_right; shard 0's
   * own left halo (kernel positions below 0, zeros) may reach so far
   * (negative padding, strides) that its window ends short of its right
   * halo: cut to what fits. */
  if (left[0] + right[0] > max_left + max_right) {
    left[0] = max_left + max_right - right[0];
    if (left[0] < 0) {
      free(left);
      return false;
    }
    npl[0] = left[0] * D + wd->pad_lo;
    max_npl = npl[0];
    for (int64_t j = 1; j < k; j++)
      if (npl[j] > max_npl) max_npl = npl[j];
  }
  int64_t pad_lo;
  if (!lhs_low_padding(v, hc, ld, lsz, k, npl, max_npl, start, &pad_lo)) {
    free(left);
    return false;
  }
  int64_t size = hc->rhs->shape->dims[kd] + max_left + max_right;
  hc->nw[i].size = size;
  hc->nw[i].pad_lo = pad_lo;
  hc->nw[i].pad_hi = wc * wd->stride + (size - 1) * D - max_npl - lsz;
  for (int64_t j = 0; j < k; j++) start[j] = 0;
  spmd_halo h = {.ring = {k, -1, 0}, .left = left, .right = right, .explicit_left = left[0],
                 .padded_full = 0, .base_dim = orig->operands[1]->shape->dims[kd],
                 .shard_with_halo = size, .offset_on_padded = start, .mask = false};
  hk_instr *ext = spmd_exchange_halo_valid(v, hc->rhs, hc->rt, kd, &h, hc->zero);
  free(left);
  if (!ext) return false;
  hc->rhs = ext;
  return true;
}

/* Both operands tiled: aligned, the halos exchanged on the lhs (on_lhs)
 * or the rhs along every split spatial dim, the local convolution's
 * partial sums all-reduced. */
static hk_status *conv_with_halos(spmd_visitor *v, hk_instr *orig, bool on_lhs, bool *handled) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  halo_conv hc;
  bool ok;
  HK_TRY(aligned_operands(v, orig, on_lhs, &hc.lt, &hc.rt, &hc.lhs, &hc.rhs, &ok));
  if (!ok) return NULL;
  hc.nw = hk_alloc(v->m, sizeof *hc.nw * (size_t)cd->n_spatial);
  hc.zero = spmd_constant_scalar(v, (hk_prim)hc.lhs->shape->elem, 0);
  for (int i = 0; i < cd->n_spatial; i++) {
    hc.nw[i] = orig->attrs->window->dims[i];
    int64_t k = on_lhs ? parts(hc.lt, cd->input_spatial[i]) : parts(hc.rt, cd->kernel_spatial[i]);
    if (k > 1 && !(on_lhs ? lhs_dim_halos : rhs_dim_halos)(v, orig, i, k, &hc)) return NULL;
  }
  HK_TRY(sum_partial_conv(v, orig, local_conv(v, orig, hc.lhs, hc.rhs, hc.nw), hc.lt));
  *handled = true;
  return NULL;
}

/* ---- output tiled: the lhs as a windowed input, the kernel replicated ---------- */

/* The lhs resharded as the windowed input of the output's tiling o,
 * convolved with the kernel under rt (replicated, or split on its output
 * feature like o's feature groups). */
static hk_status *windowed_lhs_conv(spmd_visitor *v, hk_instr *orig, const hk_sharding *rt,
                                    bool *handled) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_window *win = orig->attrs->window;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  int r = orig->shape->rank;
  int64_t in_to_out[HK_MAX_RANK];
  in_to_out[cd->input_batch] = cd->output_batch;
  in_to_out[cd->input_feature] = cd->output_feature;
  for (int i = 0; i < cd->n_spatial; i++) in_to_out[cd->input_spatial[i]] = cd->output_spatial[i];
  const hk_sharding *lt = hk_sharding_transpose(v->m, o, in_to_out);
  if (!lt) return NULL;
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)r);
  for (int i = 0; i < r; i++) wd[i] = (hk_window_dim){1, 1, 0, 0, 1, 1, false};
  for (int i = 0; i < cd->n_spatial; i++) {
    /* The kernel's reversal does not change which input positions a window reads. */
    wd[cd->input_spatial[i]] = win->dims[i];
    wd[cd->input_spatial[i]].reversal = false;
  }
  hk_instr *zero = spmd_constant_scalar(v, (hk_prim)orig->shape->elem, 0);
  bool ok;
  spmd_windowed_input in;
  HK_TRY(spmd_reshard_as_windowed_input(v, lv, wd, lt, zero, true, &ok, &in));
  if (!ok) return NULL;
  hk_instr *rhs;
  HK_TRY(spmd_reshard(v, rv, rt, &rhs));
  hk_window_dim *nw = hk_alloc(v->m, sizeof *nw * (size_t)cd->n_spatial);
  for (int i = 0; i < cd->n_spatial; i++) {
    nw[i] = in.window[cd->input_spatial[i]];
    nw[i].reversal = win->dims[i].reversal;
  }
  hk_instr *c = local_conv(v, orig, in.hlo, rhs, nw);
  const hk_shape *ls = spmd_local_shape(v, o, orig->shape);
  if (in.out_offsets) {
    hk_instr *starts[HK_MAX_RANK];
    /* The offsets are by lhs dim; the result's dims are the output's. */
    for (int i = 0; i < r; i++) starts[in_to_out[i]] = in.out_offsets[i];
    c = spmd_dynamic_slice(v, c, starts, ls);
  }
  if (!hk_shape_compatible(c->shape, ls))
    return hk_error(HK_INTERNAL, "convolution '%s': local shape from the windowed reshard differs",
                    orig->name);
  spmd_set(v, orig, c, o);
  *handled = true;
  return NULL;
}

static hk_status *tiled_output(spmd_visitor *v, hk_instr *orig, bool *handled) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  if (!hk_sharding_is_tiled(o) || o->n_subgroups || spmd_is_subgroup_manual(o) ||
      parts(o, cd->output_feature) > 1)
    return NULL;
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  if (!groups_unpartitioned(orig, lv->sharding, rv->sharding)) return NULL;
  return windowed_lhs_conv(v, orig, hk_sharding_replicated(v->m), handled);
}

/* ---- feature groups split, then spatial dims within each (XLA's grouping
 * on the feature-group dims, the spatial base case inside the group) ------- */

static hk_status *feature_groups_then_spatial(spmd_visitor *v, hk_instr *orig, bool *handled) {
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  int64_t fgc = groups_of(orig->attrs->feature_group_count), k = parts(o, cd->output_feature);
  if (fgc == 1 || groups_of(orig->attrs->batch_group_count) > 1 || !hk_sharding_is_tiled(o) ||
      o->n_subgroups || spmd_is_subgroup_manual(o) || k == 1 || fgc % k)
    return NULL;
  /* The kernel split on its output feature as o splits the groups, whole
   * elsewhere (replicated across the output's other tiles). */
  int r = orig->shape->rank;
  int64_t others[HK_MAX_RANK], rhs_to_out[HK_MAX_RANK];
  int n = 0;
  for (int d = 0; d < r; d++)
    if (d != cd->output_feature) others[n++] = d;
  rhs_to_out[cd->kernel_output_feature] = cd->output_feature;
  rhs_to_out[cd->kernel_input_feature] = cd->output_batch;
  for (int i = 0; i < cd->n_spatial; i++) rhs_to_out[cd->kernel_spatial[i]] = cd->output_spatial[i];
  const hk_sharding *rt = hk_sharding_transpose(v->m, spmd_replicate_dims(v, o, n, others), rhs_to_out);
  if (!rt) return NULL;
  return windowed_lhs_conv(v, orig, rt, handled);
}

/* Whether orig is a convolution this file can partition: well formed,
 * operands partitioned, the output not on one device. */
static bool conv_partitionable(spmd_visitor *v, hk_instr *orig) {
  const hk_attrs *a = orig->attrs;
  if (!a || !a->conv || !a->window || orig->n_operands != 2 || a->window->n_dims != a->conv->n_spatial ||
      orig->shape->elem == HK_PRED || !hk_shape_is_array(orig->shape))
    return false;
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  return lv && rv && lv->sharding && rv->sharding && !hk_sharding_is_maximal(spmd_sharding_of(v, orig));
}

static hk_status *conv_spatial(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  if (!conv_partitionable(v, orig)) return NULL;
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *ls = spmd_lookup(v, orig->operands[0])->sharding;
  const hk_sharding *rs = spmd_lookup(v, orig->operands[1])->sharding;
  bool spatial = false;
  for (int i = 0; i < cd->n_spatial; i++)
    if (conv_spatial_dim(orig, i) &&
        (parts(ls, cd->input_spatial[i]) > 1 || parts(rs, cd->kernel_spatial[i]) > 1 ||
         parts(o, cd->output_spatial[i]) > 1))
      spatial = true;
  /* XLA's is_conv_batch_or_contracting_dim_partitioned: the input batch
   * dim is a non-contracting dim of the dot view, not a batch dim, so a
   * convolution tiled on it and on a spatial dim stays here (the output
   * tiled on both, the lhs a windowed input). */
  bool dot_dims = parts(ls, cd->input_feature) > 1 && parts(rs, cd->kernel_input_feature) > 1;
  for (int i = 0; i < cd->n_spatial; i++)
    if (!conv_spatial_dim(orig, i) && (parts(ls, cd->input_spatial[i]) > 1 || parts(o, cd->output_spatial[i]) > 1))
      dot_dims = true;
  if (!spatial || dot_dims) return NULL;
  HK_TRY(conv_with_halos(v, orig, v->p->options.conv_halo_exchange_always_on_lhs, handled));
  if (!*handled) HK_TRY(tiled_output(v, orig, handled));
  return NULL;
}

/* ---- split groups aligned (XLA's PartitionConvolutionWithBatchGroupCount /
 * WithFeatureGroupCount, also for a split over part of the devices, as its
 * grouping recursion reaches): the groups split as the lhs splits them, as
 * the rhs does, or as the output does (XLA's grouped dot aligning the
 * operands with the output's group split), each keeping that split alone;
 * the other operands follow, each device convolves its groups and the
 * result is resharded to the output's.  The cheapest by the cost hook wins
 * (operands priced as their reshard would run: rebuilt values are free);
 * on a tie the operand splitting the groups more. ---- */

/* Dim maps of a grouped convolution: rhs dim -> lhs dim, lhs dim -> rhs
 * dim, lhs dim -> output dim, the lhs dim holding the groups and their
 * count. */
typedef struct group_maps {
  int64_t rhs_to_lhs[HK_MAX_RANK], lhs_to_rhs[HK_MAX_RANK], lhs_to_out[HK_MAX_RANK];
  int64_t out_to_lhs[HK_MAX_RANK];
  int64_t lg, g;
} group_maps;

/* The maps, or false when the groups are not what the plans need. */
static bool group_maps_of(const hk_instr *orig, group_maps *gm) {
  const hk_attrs *a = orig->attrs;
  const hk_conv_dnums *cd = a->conv;
  const hk_shape *lsh = orig->operands[0]->shape, *rsh = orig->operands[1]->shape;
  int64_t bgc = groups_of(a->batch_group_count), fgc = groups_of(a->feature_group_count);
  bool batch = bgc > 1;
  int64_t g = batch ? bgc : fgc;
  gm->g = g;
  gm->lg = batch ? cd->input_batch : cd->input_feature;
  int64_t lo = batch ? cd->input_feature : cd->input_batch;
  if (batch ? (lsh->dims[gm->lg] != g || rsh->dims[cd->kernel_output_feature] != g)
            : (lsh->dims[gm->lg] % g || rsh->dims[cd->kernel_output_feature] % g))
    return false;
  int r = orig->shape->rank;
  gm->rhs_to_lhs[cd->kernel_output_feature] = gm->lg;
  gm->rhs_to_lhs[cd->kernel_input_feature] = lo;
  for (int i = 0; i < cd->n_spatial; i++) gm->rhs_to_lhs[cd->kernel_spatial[i]] = cd->input_spatial[i];
  for (int i = 0; i < r; i++) gm->lhs_to_rhs[gm->rhs_to_lhs[i]] = i;
  gm->lhs_to_out[gm->lg] = cd->output_feature;
  gm->lhs_to_out[lo] = cd->output_batch;
  for (int i = 0; i < cd->n_spatial; i++) gm->lhs_to_out[cd->input_spatial[i]] = cd->output_spatial[i];
  for (int i = 0; i < r; i++) gm->out_to_lhs[gm->lhs_to_out[i]] = i;
  return true;
}

/* One plan: the operands' and the local result's shardings. */
typedef struct group_plan {
  const hk_sharding *lt, *rt, *ot;
} group_plan;

/* The plan splitting the groups as s (sharding of a value whose dim gd
 * holds them; to_lhs maps its dims to the lhs's, NULL: s is the lhs's)
 * does; false when that split does not divide the groups. */
static bool group_plan_from(spmd_visitor *v, const group_maps *gm, const hk_sharding *s, int64_t gd,
                            const int64_t *to_lhs, int r, group_plan *pl) {
  if (!hk_sharding_is_tiled(s) || s->n_subgroups || spmd_is_subgroup_manual(s)) return false;
  int64_t k = hk_sharding_dim_partitions(s, (int)gd);
  if (k < 2 || gm->g % k) return false;
  int64_t others[HK_MAX_RANK];
  int n = 0;
  for (int d = 0; d < r; d++)
    if (d != gd) others[n++] = d;
  const hk_sharding *only = spmd_replicate_dims(v, s, n, others);
  pl->lt = to_lhs ? hk_sharding_transpose(v->m, only, to_lhs) : only;
  pl->rt = pl->lt ? hk_sharding_transpose(v->m, pl->lt, gm->rhs_to_lhs) : NULL;
  pl->ot = pl->lt ? hk_sharding_transpose(v->m, pl->lt, gm->out_to_lhs) : NULL;
  return pl->lt && pl->rt && pl->ot;
}

static int64_t group_plan_cost(spmd_visitor *v, const hk_instr *orig, spmd_value *lv, spmd_value *rv,
                               const group_plan *pl) {
  return spmd_value_reshard_cost(v, lv, pl->lt) + spmd_value_reshard_cost(v, rv, pl->rt) +
         spmd_reshard_cost(v, orig->shape, pl->ot, spmd_sharding_of(v, orig));
}

static hk_status *groups_aligned(spmd_visitor *v, hk_instr *orig, bool *handled) {
  const hk_attrs *a = orig->attrs;
  const hk_conv_dnums *cd = a->conv;
  group_maps gm;
  if (!group_maps_of(orig, &gm)) return NULL;
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  const hk_sharding *ls = lv->sharding, *rs = rv->sharding, *o = spmd_sharding_of(v, orig);
  if (!hk_sharding_is_tiled(ls) && !hk_sharding_is_tiled(rs)) return NULL;
  if ((hk_sharding_is_tiled(ls) && (ls->n_subgroups || spmd_is_subgroup_manual(ls))) ||
      (hk_sharding_is_tiled(rs) && (rs->n_subgroups || spmd_is_subgroup_manual(rs))))
    return NULL;
  int r = orig->shape->rank;
  int64_t kl = parts(ls, gm.lg), kr = parts(rs, cd->kernel_output_feature);
  /* Candidates in tie order: the operand splitting the groups more, the
   * other, the output. */
  group_plan cand[3], *best = NULL;
  bool ok[3];
  int first = kl >= kr ? 0 : 1;
  ok[first] = group_plan_from(v, &gm, ls, gm.lg, NULL, r, &cand[first]);
  ok[1 - first] = group_plan_from(v, &gm, rs, cd->kernel_output_feature, gm.lhs_to_rhs, r, &cand[1 - first]);
  ok[2] = group_plan_from(v, &gm, o, cd->output_feature, gm.lhs_to_out, r, &cand[2]);
  int64_t best_cost = 0;
  for (int i = 0; i < 3; i++) {
    if (!ok[i]) continue;
    int64_t c = group_plan_cost(v, orig, lv, rv, &cand[i]);
    if (!best || c < best_cost) {
      best = &cand[i];
      best_cost = c;
    }
  }
  /* Groups neither operand splits are the dot handler's (dot.c). */
  if (!best || (!ok[0] && !ok[1])) return NULL;
  hk_instr *lhs, *rhs;
  HK_TRY(spmd_reshard(v, lv, best->lt, &lhs));
  HK_TRY(spmd_reshard(v, rv, best->rt, &rhs));
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)cd->n_spatial);
  for (int i = 0; i < cd->n_spatial; i++) wd[i] = a->window->dims[i];
  hk_instr *c = local_conv(v, orig, lhs, rhs, wd);
  hk_instr *out;
  HK_TRY(spmd_reshard_hlo(v, c, orig->shape, best->ot, o, &out));
  spmd_set(v, orig, out, o);
  *handled = true;
  return NULL;
}

/* A grouped convolution whose groups and spatial dims are both split. */
static hk_status *grouped_spatial(spmd_visitor *v, hk_instr *orig, bool *handled) {
  if (!conv_partitionable(v, orig)) return NULL;
  const hk_conv_dnums *cd = orig->attrs->conv;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  bool spatial = false;
  for (int i = 0; i < cd->n_spatial; i++)
    spatial = spatial || (conv_spatial_dim(orig, i) && parts(o, cd->output_spatial[i]) > 1);
  if (spatial) HK_TRY(feature_groups_then_spatial(v, orig, handled));
  if (!*handled) HK_TRY(groups_aligned(v, orig, handled));
  return NULL;
}

hk_status *spmd_handle_convolution(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_attrs *a = orig->attrs;
  /* Grouped convolutions try their groups first, as XLA's base case does. */
  bool grouped = a && (groups_of(a->feature_group_count) > 1 || groups_of(a->batch_group_count) > 1);
  if (grouped) HK_TRY(grouped_spatial(v, orig, handled));
  if (grouped && !*handled) HK_TRY(spmd_handle_conv(v, orig, handled));
  if (!*handled) HK_TRY(conv_spatial(v, orig, handled));
  if (!*handled && !grouped) HK_TRY(spmd_handle_conv(v, orig, handled));
  return NULL;
}
