/* reshape.c - shardings through reshape, as XLA's hlo_sharding_util
 * (PropagateShardingThroughReshape over ReshapeSharding): intervals of
 * source dims whose tiling a reshape keeps are found on iota groupings, and
 * the given tile assignment is transposed (interval dims first) and
 * reshaped row-major onto the result, so XLA's device order is kept. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

typedef struct dim_stack {
  int n;
  int64_t v[HK_MAX_RANK * 4];
} dim_stack;

static void st_push(dim_stack *s, int64_t x) {
  if (s->n < HK_MAX_RANK * 4) s->v[s->n++] = x;
}
static int64_t st_back(const dim_stack *s) { return s->v[s->n - 1]; }
static int64_t st_pop(dim_stack *s) { return s->v[--s->n]; }
static int64_t st_product(const dim_stack *s) {
  int64_t p = 1;
  for (int k = 0; k < s->n; k++) p *= s->v[k];
  return p;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

typedef struct target_tiles {
  int n;
  int64_t v[HK_MAX_RANK * 2];
  bool inplace;            /* the next factor multiplies the last dim */
} target_tiles;

static void tt_append(target_tiles *t, int64_t size) {
  if (t->inplace && t->n > 0) t->v[t->n - 1] *= size;
  else if (t->n < HK_MAX_RANK * 2) t->v[t->n++] = size;
  t->inplace = false;
}

/* XLA's ReshapeSharding for a tiling without trailing dims (tiles[] per
 * source dim): the tile counts of the target dims, false when the reshape
 * keeps none.  The replicated remainder is what the caller does not place. */
static bool reshape_tile_dims(const hk_shape *from, const hk_shape *to, const int64_t *tiles,
                              int64_t *out) {
  dim_stack src = {0}, tgt = {0}, part = {0};
  for (int k = from->rank - 1; k >= 0; k--) {
    st_push(&src, from->dims[k]);
    st_push(&part, tiles[k]);
  }
  for (int k = to->rank - 1; k >= 0; k--) st_push(&tgt, to->dims[k]);
  target_tiles res = {0};
  while (src.n || tgt.n) {
    if (st_product(&part) == 1) break;
    int64_t prod = 1;
    while (part.n && st_back(&part) == 1) {
      prod *= st_pop(&src);
      st_pop(&part);
    }
    while (tgt.n && st_back(&tgt) > 1 && prod % st_back(&tgt) == 0) {
      prod /= st_pop(&tgt);
      tt_append(&res, 1);
    }
    if (prod != 1) {
      st_push(&src, prod);
      st_push(&part, 1);
    }
    if (!tgt.n) break;
    int64_t t = st_pop(&tgt), s = 1, sp = 1;
    if (src.n) {
      s = st_pop(&src);
      sp = st_pop(&part);
    }
    if (s == t) {
      tt_append(&res, sp);
    } else if (sp > 1 && s % sp == 0 && t % sp == 0) {
      st_push(&src, s / sp);
      st_push(&part, 1);
      st_push(&tgt, t / sp);
      tt_append(&res, sp);
      res.inplace = true;
    } else if (t == 1) {                 /* a size-1 dim added */
      tt_append(&res, 1);
      st_push(&src, s);
      st_push(&part, sp);
    } else if (s == 1) {                 /* a size-1 dim removed: its tiles replicate */
      st_push(&tgt, t);
    } else if (s > t) {                  /* a split */
      if (s % sp) return false;
      if (s % t) {
        tt_append(&res, gcd64(t, sp));
        break;
      }
      if (t % sp == 0) {
        tt_append(&res, sp);
        st_push(&src, s / t);
        st_push(&part, 1);
      } else if (sp % t == 0) {
        tt_append(&res, t);
        st_push(&src, s / t);
        st_push(&part, sp / t);
      } else {
        tt_append(&res, gcd64(t, sp));
        break;
      }
    } else {                             /* a merge with the next source dim */
      if (s % sp || !src.n) return false;
      if (t % s) {
        tt_append(&res, gcd64(t, sp));
        break;
      }
      if (st_back(&part) != 1 && s != sp) break;   /* the shard would not be contiguous */
      src.v[src.n - 1] *= s;
      part.v[part.n - 1] *= sp;
      st_push(&tgt, t);
    }
  }
  int64_t prod = 1;
  for (int k = 0; k < res.n; k++) prod *= res.v[k];
  if (prod == 1 || res.n > to->rank) return false;
  for (int k = 0; k < to->rank; k++) out[k] = k < res.n ? res.v[k] : 1;
  return true;
}

/* The tile assignment of t with data dims [a, b) moved first, reshaped
 * row-major onto the target's dims (the rest replicated). */
static const hk_sharding *interval_sharding(hk_module *m, const pt_tiles *t, int a, int b,
                                            const hk_shape *to, const int64_t *tdims,
                                            const hk_sharding *meta) {
  int order[HK_MAX_RANK], no = 0;
  for (int k = a; k < b; k++) order[no++] = k;
  for (int k = 0; k < a; k++) order[no++] = k;
  for (int k = b; k < t->n; k++) order[no++] = k;
  pt_tiles r = *t;
  r.dev = pt_permute(t, t->n, t->dims, order);
  int64_t dims[HK_MAX_RANK], placed = 1;
  for (int k = 0; k < to->rank; k++) placed *= (dims[k] = tdims[k]);
  dims[to->rank] = pt_count(t) / placed;
  uint8_t sub[1] = {HK_SUBGROUP_REPLICATED};
  pt_reshape(&r, to->rank + 1, dims, to->rank, sub);
  const hk_sharding *s = pt_to_sharding(m, &r, meta);
  pt_free(&r);
  return s;
}

/* The intervals of source dims, longest first from each start, whose
 * tiling the reshape keeps; their shardings merged. */
static const hk_sharding *reshape_tiled(hk_module *m, const hk_shape *from, const hk_shape *to,
                                        const pt_tiles *t, const hk_sharding *meta) {
  const hk_sharding *result = hk_sharding_replicated(m);
  int start = 0;
  while (start < from->rank) {
    bool found = false;
    for (int end = from->rank; end > start && !found; end--) {
      int64_t grouped[HK_MAX_RANK], tdims[HK_MAX_RANK];
      for (int k = 0; k < from->rank; k++) grouped[k] = k >= start && k < end ? t->dims[k] : 1;
      if (!reshape_tile_dims(from, to, grouped, tdims)) continue;
      const hk_sharding *s = interval_sharding(m, t, start, end, to, tdims, meta);
      if (sa_merge_compatible(m, s, sa_num_tiles(result) + 1, &result)) {
        start = end;
        found = true;
      }
    }
    if (!found) start++;
  }
  return result;
}

/* Manual subgroups: the manual dim is set aside (moved last), the rest
 * reshaped as above within each group, and the manual dim put back. */
static const hk_sharding *reshape_manual_subgroup(hk_module *m, const hk_shape *from,
                                                  const hk_shape *to, const pt_tiles *t,
                                                  const hk_sharding *meta) {
  int md = -1;
  for (int k = t->data_rank; k < t->n; k++)
    if (t->sub[k - t->data_rank] == HK_SUBGROUP_MANUAL) md = k;
  int order[HK_MAX_RANK], no = 0;
  for (int k = 0; k < t->n; k++)
    if (k != md) order[no++] = k;
  order[no++] = md;
  int64_t per_group = pt_count(t) / t->dims[md];
  /* Inner tiling: data dims and the replicated remainder of one group. */
  pt_tiles inner = *t;
  inner.dev = pt_permute(t, t->n, t->dims, order);
  int64_t idims[HK_MAX_RANK];
  memcpy(idims, t->dims, sizeof(int64_t) * (size_t)t->data_rank);
  idims[t->data_rank] = per_group;
  for (int k = 0; k < t->data_rank; k++) idims[t->data_rank] /= t->dims[k];
  uint8_t isub[1] = {HK_SUBGROUP_REPLICATED};
  int64_t *all = inner.dev;
  pt_tiles g0 = inner;
  pt_reshape(&g0, t->data_rank + 1, idims, t->data_rank, isub);
  /* The result structure comes from group 0 (ids are positions within it). */
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)per_group);
  if (!pos) hk_out_of_memory();
  for (int64_t k = 0; k < per_group; k++) pos[k] = k;
  g0.dev = pos;
  const hk_sharding *r0 = reshape_tiled(m, from, to, &g0, NULL);
  free(pos);
  pt_tiles rt, full;
  const hk_sharding *out;
  if (!pt_from_sharding(r0, &rt)) {        /* replicated within each group */
    full = (pt_tiles){to->rank + 2, to->rank, {0}, {HK_SUBGROUP_REPLICATED, HK_SUBGROUP_MANUAL}, all};
    for (int k = 0; k < to->rank; k++) full.dims[k] = 1;
    full.dims[to->rank] = per_group;
    full.dims[to->rank + 1] = t->dims[md];
    out = pt_to_sharding(m, &full, meta);
    free(all);
    return out;
  }
  /* rt.dev are positions within a group: map them through every group. */
  int64_t n_r = pt_count(&rt);
  full = rt;
  full.dims[full.n] = t->dims[md];
  full.sub[full.n - full.data_rank] = HK_SUBGROUP_MANUAL;
  full.n++;
  full.dev = malloc(sizeof(int64_t) * (size_t)(n_r * t->dims[md]));
  if (!full.dev) hk_out_of_memory();
  for (int64_t k = 0; k < n_r; k++)
    for (int64_t g = 0; g < t->dims[md]; g++)
      full.dev[k * t->dims[md] + g] = all[rt.dev[k] * t->dims[md] + g];
  out = pt_to_sharding(m, &full, meta);
  pt_free(&full);
  pt_free(&rt);
  free(all);
  return out;
}

const hk_sharding *sa_reshape(hk_module *m, const hk_shape *from, const hk_shape *to,
                              const hk_sharding *s) {
  if (sa_tile_maximal(s)) return s;
  pt_tiles t;
  if (!pt_from_sharding(s, &t)) return NULL;
  const hk_sharding *r = NULL;
  if (t.data_rank == from->rank) {
    if (sa_manual_subgroup(s)) r = reshape_manual_subgroup(m, from, to, &t, s);
    else r = reshape_tiled(m, from, to, &t, s);
  }
  pt_free(&t);
  return r;
}
