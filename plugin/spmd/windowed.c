/* windowed.c - XLA's ReshardAsWindowedInput: a value resharded so that a
 * windowed op (reduce-window, convolution, pad and slice seen as windows)
 * run locally computes each shard's part of the result.  Per partitioned
 * windowed dim, each shard's first and last input positions on the padded
 * dim give its halos (halo.c exchanges them); shards that read only
 * padding are trimmed off the exchange; base dilation moves the local
 * window's padding and may leave the result to be dynamic-sliced.  When
 * the halos reach too far the windowed dims are gathered and each shard
 * pads and slices its window out of the whole. */
#include "spmd_internal.h"


/* MultiplyAddDivide: (j * mul + add) / div, truncating as XLA does. */
typedef struct mad {
  int64_t mul, add, div;
} mad;

static int64_t mad_at(mad f, int64_t j) { return (j * f.mul + f.add) / f.div; }

static bool trivial_dim(const hk_window_dim *w) {
  return w->size == 1 && w->stride == 1 && !w->pad_lo && !w->pad_hi && w->base_dilation == 1 &&
         w->window_dilation == 1 && !w->reversal;
}

/* The plan for one dim. */
typedef struct wplan {
  int64_t count;                   /* shards of the exchange (trimmed) */
  bool leave;                      /* trivial window: the dim stays as it is */
  bool pre_mask;                   /* uneven padding masked before the exchange */
  int64_t explicit_left, shard, padded, hx_base, in_shard;
  int64_t slice_start, slice_limit;  /* of the local input before the exchange */
  mad start, limit;                /* by shard: first / past-last position on the padded dim */
  spmd_halo_ring ring;
  int64_t *offset;                 /* by tile: offset on the padded dim (NULL: 0) */
  int64_t *out_offset;             /* by tile: dynamic-slice start of the result, or NULL */
} wplan;

typedef struct wstate {
  spmd_visitor *v;
  spmd_value *val;
  const hk_window_dim *wd;
  const hk_sharding *target;
  hk_instr *pv;
  bool mask;
  int rank;
  wplan p[HK_MAX_RANK];
  hk_window_dim *swd;
  bool trimmed_in_shard;
} wstate;

/* Shard of the exchange at tile t (tiles inside a skipped range map past it). */
static int64_t ordinal_of(const wplan *p, int64_t t) {
  /* Tiles inside the skipped range hold no output: any shard will do. */
  return p->ring.skip_from >= 0 && t >= p->ring.skip_from + p->ring.skip ? t - p->ring.skip : t;
}

static int64_t *tile_table(const wplan *p, int64_t k, mad f) {
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)k);
  if (!tab) hk_out_of_memory();
  for (int64_t t = 0; t < k; t++) tab[t] = mad_at(f, ordinal_of(p, t));
  return tab;
}

static void free_plans(wstate *w) {
  for (int i = 0; i < w->rank; i++) {
    free(w->p[i].offset);
    free(w->p[i].out_offset);
    w->p[i].offset = w->p[i].out_offset = NULL;
  }
}

/* Shards that read nothing but padding on the right (and, with a large
 * negative left padding, in the middle) are dropped from the exchange. */
static void trim_right(wstate *w, int i, int64_t wc, int64_t full, hk_window_dim *swd) {
  wplan *p = &w->p[i];
  const hk_window_dim *wd = &w->wd[i];
  int64_t base = w->val->base_shape->dims[i], k = p->count;
  if (!(wc < k && wd->window_dilation == 1 && wd->base_dilation == 1)) return;
  int64_t useful = spmd_ceil_div(base + wd->pad_hi, p->in_shard);
  if (useful >= k) return;
  p->count = useful > wc ? useful : wc;
  if (p->count == 1) {
    swd->pad_hi = base + wd->pad_hi - p->in_shard;
    return;
  }
  p->hx_base = p->in_shard * p->count;
  if (p->in_shard * p->count > base && wd->pad_hi > 0) {
    p->pre_mask = true;
  } else if (wd->pad_hi < 0 && full - wd->pad_lo < p->in_shard) {
    p->in_shard = full - wd->pad_lo;
    p->hx_base = p->in_shard * p->count;
    p->slice_limit = p->in_shard;
    w->trimmed_in_shard = true;
  }
}

static bool trim_middle(wstate *w, int i, int64_t wc, int64_t full) {
  wplan *p = &w->p[i];
  const hk_window_dim *wd = &w->wd[i];
  if (!(wc < w->target->tile_dims[i] && wd->window_dilation == 1 && wd->base_dilation == 1))
    return true;
  int64_t middle = (-p->explicit_left) / p->in_shard - wc;
  if (middle <= 0) return true;
  p->count -= middle;
  if (p->count <= 1) return false;
  p->ring.skip_from = wc;
  p->ring.skip = middle;
  p->explicit_left += middle * p->in_shard;
  p->hx_base = p->in_shard * p->count;
  if (-p->explicit_left > p->in_shard * (p->count - 1)) {
    int64_t skip = -p->explicit_left - p->in_shard * (p->count - 1);
    p->in_shard -= skip;
    p->explicit_left += skip * p->count;
    p->slice_start = skip;
    w->trimmed_in_shard = true;
    if (full < p->in_shard) {
      skip = p->in_shard - full;
      p->slice_limit -= skip;
      p->explicit_left += skip * (p->count - 1);
      p->in_shard = full;
    }
    p->hx_base = p->in_shard * p->count;
  }
  return true;
}

/* Base dilation: the local window's padding, and the result's dynamic
 * slice when shards start at different phases of the dilation. */
static bool plan_base_dilation(wstate *w, int i, int64_t pswc, int64_t dilated, hk_window_dim *swd) {
  wplan *p = &w->p[i];
  const hk_window_dim *wd = &w->wd[i];
  int64_t bd = wd->base_dilation, step = wd->stride * pswc;
  int64_t *first = malloc(sizeof(int64_t) * (size_t)p->count);
  if (!first) hk_out_of_memory();
  for (int64_t j = 0; j < p->count; j++) first[j] = mad_at(p->start, j) * bd + swd->pad_lo - step * j;
  for (int64_t j = 0; j < p->count; j++) {
    int64_t wanted = wd->stride * (pswc - 1) + dilated;
    int64_t actual = first[j] + (p->shard - 1) * bd + 1;
    if (wanted - actual > swd->pad_hi) swd->pad_hi = wanted - actual;
  }
  if (wd->stride != 1) {
    free(first);
    return step % bd == 0;
  }
  int64_t max_lo = first[0];
  bool same = true;
  for (int64_t j = 1; j < p->count; j++) {
    if (first[j] != swd->pad_lo) same = false;
    if (first[j] > max_lo) max_lo = first[j];
  }
  if (!same) {
    int64_t k = w->target->tile_dims[i];
    p->out_offset = malloc(sizeof(int64_t) * (size_t)k);
    if (!p->out_offset) hk_out_of_memory();
    for (int64_t t = 0; t < k; t++) {
      int64_t j = ordinal_of(p, t);
      p->out_offset[t] = pswc * j - (bd * mad_at(p->start, j) + swd->pad_lo - max_lo);
    }
  }
  free(first);
  swd->pad_lo = max_lo;
  return true;
}

/* One windowed, partitioned dim (XLA's per-dim loop); false: not possible. */
static bool plan_windowed_dim(wstate *w, int i, const hk_shape *cur) {
  wplan *p = &w->p[i];
  const hk_window_dim *wd = &w->wd[i];
  hk_window_dim *swd = &w->swd[i];
  int64_t base = w->val->base_shape->dims[i];
  int64_t dilated = 1 + (wd->size - 1) * wd->window_dilation;
  int64_t full = 1 + (base - 1) * wd->base_dilation + wd->pad_hi + wd->pad_lo;
  if (full < dilated || wd->reversal || base == 0) return false;
  int64_t wc = (full - dilated) / wd->stride + 1;
  int64_t pswc = spmd_ceil_div(wc, p->count);
  p->in_shard = cur->dims[i];
  if (p->in_shard <= 0) return false;
  trim_right(w, i, wc, full, swd);
  if (p->count == 1) return true;
  p->explicit_left = wd->pad_lo / wd->base_dilation;
  swd->pad_lo = wd->pad_lo % wd->base_dilation;
  swd->pad_hi = 0;
  if (!trim_middle(w, i, wc, full)) return false;
  if (wd->stride != 1 && (wd->stride * pswc) % wd->base_dilation) return false;
  int64_t bd = wd->base_dilation, step = wd->stride * pswc;
  p->start = (mad){step, bd - 1 - swd->pad_lo, bd};
  int64_t dshard = wd->stride * (pswc - 1) + dilated;
  p->limit = (mad){step, dshard + bd - 1 - swd->pad_lo, bd};
  p->offset = tile_table(p, w->target->tile_dims[i], p->start);
  int64_t max_shard = 0;
  for (int64_t j = 0; j < p->count; j++) {
    int64_t sz = mad_at(p->limit, j) - mad_at(p->start, j);
    if (j == 0 || sz > max_shard) max_shard = sz;
  }
  p->shard = max_shard;
  p->padded = mad_at(p->limit, p->count - 1);
  return bd == 1 || plan_base_dilation(w, i, pswc, dilated, swd);
}

static bool plan_dims(wstate *w, const hk_shape *cur) {
  const hk_sharding *t = w->target;
  for (int i = 0; i < w->rank; i++) {
    wplan *p = &w->p[i];
    int64_t k = hk_sharding_dim_partitions(t, i), base = w->val->base_shape->dims[i];
    *p = (wplan){.count = k, .shard = base, .padded = base, .hx_base = base,
                 .slice_limit = cur->dims[i], .ring = {k, -1, 0}};
    w->swd[i] = w->wd[i];
    if (k == 1) continue;
    if (trivial_dim(&w->wd[i])) {
      p->leave = true;
      p->shard = spmd_ceil_div(base, k);
      p->padded = p->shard * k;
      p->offset = tile_table(p, k, (mad){p->shard, 0, 1});
      continue;
    }
    if (!plan_windowed_dim(w, i, cur)) return false;
    p->ring.n = p->count;
  }
  return true;
}

static hk_instr **out_offsets(wstate *w) {
  bool any = false;
  for (int i = 0; i < w->rank; i++) any = any || w->p[i].out_offset;
  if (!any) return NULL;
  hk_instr **o = hk_alloc(w->v->m, sizeof *o * (size_t)w->rank);
  for (int i = 0; i < w->rank; i++)
    o[i] = w->p[i].out_offset ? spmd_per_tile_scalar(w->v, w->target, i, w->p[i].out_offset)
                              : spmd_constant_scalar(w->v, HK_S32, 0);
  return o;
}

static void finish(wstate *w, hk_instr *h, spmd_windowed_input *out) {
  out->hlo = h;
  out->window = w->swd;
  out->out_offsets = out_offsets(w);
}

/* Every windowed dim whole in x: pad it and slice each shard's window. */
static void pad_and_slice(wstate *w, hk_instr *x, const hk_sharding *cur, spmd_windowed_input *out) {
  spmd_visitor *v = w->v;
  int r = w->rank;
  hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)(r ? r : 1));
  int64_t dims[HK_MAX_RANK], sizes[HK_MAX_RANK];
  bool any = false, cur_repl = hk_sharding_is_replicated(cur);
  for (int i = 0; i < r; i++) {
    const wplan *p = &w->p[i];
    pd[i] = (hk_pad_dim){0, 0, 0};
    if (!(w->target->tile_dims[i] == 1 || (p->leave && !cur_repl))) {
      /* Past the last window's limit when a shorter last window starts
       * late (base dilation): a dynamic-slice would move it back. */
      int64_t end = p->padded;
      for (int64_t t = 0; p->offset && t < w->target->tile_dims[i]; t++)
        if (p->offset[t] + p->shard > end) end = p->offset[t] + p->shard;
      pd[i] = (hk_pad_dim){p->explicit_left, end - p->explicit_left - w->val->base_shape->dims[i], 0};
    }
    any = any || pd[i].lo || pd[i].hi;
    dims[i] = x->shape->dims[i] + pd[i].lo + pd[i].hi;
    sizes[i] = p->shard;
  }
  if (any) {
    hk_instr *ops[2] = {x, w->pv};
    x = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, x->shape, r, dims), 2, ops, NULL);
    hk_attrs *a = hk_instr_attrs(x);
    a->n_pad = r;
    a->pad = pd;
  }
  hk_instr *starts[HK_MAX_RANK];
  for (int i = 0; i < r; i++)
    starts[i] = w->p[i].offset ? spmd_per_tile_scalar(v, w->target, i, w->p[i].offset)
                               : spmd_constant_scalar(v, HK_S32, 0);
  hk_instr *ds = spmd_dynamic_slice(v, x, starts, hk_shape_with_dims(v->m, x->shape, r, sizes));
  finish(w, ds, out);
}

/* target with its windowed dims replicated. */
static const hk_sharding *windowed_dims_replicated(wstate *w) {
  int64_t dims[HK_MAX_RANK];
  int n = 0;
  for (int i = 0; i < w->rank; i++)
    if (hk_sharding_dim_partitions(w->target, i) > 1 && !trivial_dim(&w->wd[i])) dims[n++] = i;
  return n ? spmd_replicate_dims(w->v, w->target, n, dims) : w->target;
}

/* The local input before the exchange: the uneven padding of trimmed
 * dims masked, the unused part of the one useful shard sliced off. */
static hk_instr *pre_exchange(wstate *w, hk_instr *x, const hk_sharding *cur) {
  spmd_visitor *v = w->v;
  for (int i = 0; i < w->rank; i++)
    if (w->p[i].pre_mask)
      x = spmd_mask_outside(v, x, i, spmd_tile_offset(v, cur, w->val->base_shape, i), INT64_MIN,
                            w->val->base_shape->dims[i], w->pv);
  if (!w->trimmed_in_shard) return x;
  int r = w->rank;
  hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)(r ? r : 1));
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < r; i++) {
    sd[i] = (hk_slice_dim){w->p[i].slice_start, w->p[i].slice_limit, 1};
    dims[i] = w->p[i].slice_limit - w->p[i].slice_start;
  }
  hk_instr *sl = hk_instr_new(v->comp, HK_OP_SLICE, hk_shape_with_dims(v->m, x->shape, r, dims), 1, &x, NULL);
  hk_attrs *a = hk_instr_attrs(sl);
  a->n_slice = r;
  a->slice = sd;
  return sl;
}

/* Each windowed dim's halos in turn; NULL when one reaches too far. */
static hk_instr *exchange_all(wstate *w, hk_instr *x) {
  for (int d = 0; d < w->rank; d++) {
    const wplan *p = &w->p[d];
    if (p->count == 1 || p->leave) continue;
    int64_t s = spmd_ceil_div(p->hx_base, p->count);
    int64_t *left = malloc(sizeof(int64_t) * (size_t)p->count * 2);
    if (!left) hk_out_of_memory();
    int64_t *right = left + p->count;
    for (int64_t j = 0; j < p->count; j++) {
      left[j] = s * j + p->explicit_left - mad_at(p->start, j);
      right[j] = mad_at(p->limit, j) - (s * j + s + p->explicit_left);
    }
    spmd_halo h = {.ring = p->ring, .left = left, .right = right, .explicit_left = p->explicit_left,
                   .padded_full = p->padded, .base_dim = p->hx_base, .shard_with_halo = p->shard,
                   .offset_on_padded = p->offset, .mask = w->mask};
    x = spmd_exchange_halo_valid(w->v, x, w->target, d, &h, w->pv);
    free(left);
    if (!x) return NULL;
  }
  return x;
}

static hk_status *windowed_from(wstate *w, hk_instr *x, const hk_sharding *cur, int depth,
                                bool *ok, spmd_windowed_input *out) {
  spmd_visitor *v = w->v;
  free_plans(w);
  w->trimmed_in_shard = false;
  if (!plan_dims(w, x->shape)) return NULL;
  const hk_sharding *wrep = windowed_dims_replicated(w);
  bool same = hk_sharding_equivalent(cur, w->target);
  if (hk_sharding_is_replicated(cur) || (!same && hk_sharding_equivalent(wrep, cur))) {
    pad_and_slice(w, x, cur, out);
    *ok = true;
    return NULL;
  }
  if (!same) {
    if (depth > 1) return NULL;
    HK_TRY(spmd_reshard(v, w->val, w->target, &x));
    return windowed_from(w, x, w->target, depth + 1, ok, out);
  }
  int64_t tiles = 1;
  for (int i = 0; i < w->rank; i++) tiles *= w->p[i].leave ? hk_sharding_dim_partitions(w->target, i) : w->p[i].count;
  hk_instr *h = tiles == 1 ? x : exchange_all(w, pre_exchange(w, x, cur));
  if (h) {
    finish(w, h, out);
    *ok = true;
    return NULL;
  }
  if (hk_sharding_equivalent(wrep, cur)) {
    pad_and_slice(w, x, cur, out);
    *ok = true;
    return NULL;
  }
  if (depth > 1) return NULL;
  HK_TRY(spmd_reshard(v, w->val, wrep, &x));
  return windowed_from(w, x, wrep, depth + 1, ok, out);
}

hk_status *spmd_reshard_as_windowed_input(spmd_visitor *v, spmd_value *val, const hk_window_dim *wd,
                                          const hk_sharding *target, hk_instr *pad_value,
                                          bool mask, bool *ok, spmd_windowed_input *out) {
  *ok = false;
  if (!hk_sharding_is_tiled(target) || spmd_is_subgroup_manual(target) || target->n_subgroups ||
      !val->sharding || spmd_is_subgroup_manual(val->sharding) || hk_sharding_is_maximal(val->sharding) ||
      !hk_shape_is_array(val->base_shape) || val->base_shape->rank > HK_MAX_RANK)
    return NULL;
  wstate w = {.v = v, .val = val, .wd = wd, .target = target, .pv = pad_value, .mask = mask,
              .rank = val->base_shape->rank};
  w.swd = hk_alloc(v->m, sizeof(hk_window_dim) * (size_t)(w.rank ? w.rank : 1));
  hk_status *st = windowed_from(&w, val->hlo, val->sharding, 0, ok, out);
  free_plans(&w);
  return st;
}
