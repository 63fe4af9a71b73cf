/* algebra.c - the sharding algebra propagation needs beyond sharding.h:
 * specificity, merging of partial shardings, transposes with collapsed
 * dims and reshapes (XLA's hlo_sharding_util facts, our own code). */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

/* ---- queries --------------------------------------------------------------- */

bool sa_tile_maximal(const hk_sharding *s) {
  return !s || s->kind != HK_SHARDING_TILED;
}

bool sa_spatial(const hk_sharding *s) {
  if (!s) return false;
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (sa_spatial(s->elems[i])) return true;
    return false;
  }
  return s->kind == HK_SHARDING_TILED || s->kind == HK_SHARDING_REPLICATED ||
         s->kind == HK_SHARDING_MANUAL;
}

int64_t sa_num_tiles(const hk_sharding *s) {
  if (!s || s->kind != HK_SHARDING_TILED) return 1;
  int r = hk_sharding_data_rank(s);
  int64_t n = 1;
  for (int d = 0; d < r; d++) n *= s->tile_dims[d];
  return n;
}

bool sa_partial(const hk_sharding *s) {
  if (!s || s->kind != HK_SHARDING_TILED) return false;
  if (s->replicate_on_last_tile_dim) return true;
  for (int k = 0; k < s->n_subgroups; k++)
    if (s->subgroups[k] == HK_SUBGROUP_REPLICATED) return true;
  return false;
}

bool sa_manual_subgroup(const hk_sharding *s) {
  if (!s || s->kind != HK_SHARDING_TILED) return false;
  for (int k = 0; k < s->n_subgroups; k++)
    if (s->subgroups[k] == HK_SUBGROUP_MANUAL) return true;
  return false;
}

int64_t sa_dim(const hk_sharding *s, int d) {
  if (!s || s->kind != HK_SHARDING_TILED || d < 0 || d >= hk_sharding_data_rank(s)) return 1;
  return s->tile_dims[d];
}

bool sa_xla_tile_maximal(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (!sa_xla_tile_maximal(s->elems[i])) return false;
    return true;
  }
  return s->kind == HK_SHARDING_REPLICATED || s->kind == HK_SHARDING_MAXIMAL ||
         s->kind == HK_SHARDING_UNKNOWN;
}

static bool is_manualish(const hk_sharding *s) {
  return s->kind == HK_SHARDING_MANUAL;
}

bool sa_more_specific(const hk_sharding *a, const hk_sharding *b) {
  if (a->kind == HK_SHARDING_TUPLE || b->kind == HK_SHARDING_TUPLE) {
    if (a->kind != HK_SHARDING_TUPLE || b->kind != HK_SHARDING_TUPLE || a->n_elems != b->n_elems)
      return false;
    bool better = false;
    for (int i = 0; i < a->n_elems; i++) {
      if (sa_more_specific(b->elems[i], a->elems[i])) return false;
      if (sa_more_specific(a->elems[i], b->elems[i])) better = true;
    }
    return better;
  }
  /* manual beats tile maximal (XLA's IsLeafShardingMoreSpecific) */
  if (is_manualish(a) && sa_xla_tile_maximal(b)) return true;
  if (is_manualish(a) || is_manualish(b)) return false;
  if (b->kind == HK_SHARDING_TILED) return sa_num_tiles(a) > sa_num_tiles(b);
  if (b->kind == HK_SHARDING_MAXIMAL) return a->kind == HK_SHARDING_TILED;
  return a->kind != HK_SHARDING_REPLICATED && a->kind != HK_SHARDING_UNKNOWN;
}

/* ---- factor transposes --------------------------------------------------------
 * The device array of t viewed as nf factor dims (row-major, product =
 * device count), permuted by order[] (out dim k = factor order[k]). */
int64_t *pt_permute(const pt_tiles *t, int nf, const int64_t *fsize, const int *order) {
  int64_t total = pt_count(t);
  int64_t *out = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  if (!out) hk_out_of_memory();
  int64_t stride[HK_MAX_RANK * 2], idx[HK_MAX_RANK * 2];
  stride[nf - 1] = 1;
  for (int k = nf - 2; k >= 0; k--) stride[k] = stride[k + 1] * fsize[k + 1];
  memset(idx, 0, sizeof idx);
  for (int64_t f = 0; f < total; f++) {
    int64_t src = 0;
    for (int k = 0; k < nf; k++) src += idx[order[k]] * stride[order[k]];
    out[f] = t->dev[src];
    for (int k = nf - 1; k >= 0; k--) {
      if (++idx[order[k]] < fsize[order[k]]) break;
      idx[order[k]] = 0;
    }
  }
  return out;
}

/* ---- transpose with collapsed dims ------------------------------------------- */

const hk_sharding *sa_transpose_collapsed(hk_module *m, const hk_sharding *s, int src_rank,
                                          const int64_t *src_to_tgt, int tgt_rank,
                                          const int64_t *tgt_to_src) {
  (void)src_to_tgt;
  if (sa_tile_maximal(s)) return s;
  pt_tiles t;
  pt_from_sharding(s, &t);
  if (t.data_rank != src_rank) {
    pt_free(&t);
    return NULL;
  }
  bool used[HK_MAX_RANK] = {0};
  int order[HK_MAX_RANK * 2], no = 0;
  int64_t dims[HK_MAX_RANK];
  for (int j = 0; j < tgt_rank; j++) {
    int64_t sd = tgt_to_src[j];
    if (sd >= 0 && sd < src_rank) {
      dims[j] = t.dims[sd];
      used[sd] = true;
      order[no++] = (int)sd;
    } else {
      dims[j] = 1;
    }
  }
  for (int d = 0; d < src_rank; d++) {
    if (used[d]) continue;
    if (t.dims[d] != 1) {
      pt_free(&t);
      return NULL;
    }
    order[no++] = d;   /* size 1: position irrelevant */
  }
  int trailing = t.n - t.data_rank;
  for (int k = 0; k < trailing; k++) {
    order[no++] = t.data_rank + k;
    dims[tgt_rank + k] = t.dims[t.data_rank + k];
  }
  int64_t *nd = pt_permute(&t, t.n, t.dims, order);
  free(t.dev);
  t.dev = nd;
  uint8_t sub[HK_MAX_RANK];
  memcpy(sub, t.sub, (size_t)trailing);
  pt_reshape(&t, tgt_rank + trailing, dims, tgt_rank, sub);
  const hk_sharding *r = pt_to_sharding(m, &t, s);
  pt_free(&t);
  return r;
}

/* ---- replicate all data dims -------------------------------------------------- */

const hk_sharding *sa_replicate_all_data(hk_module *m, const hk_sharding *s, int data_rank) {
  if (!s) return NULL;
  if (s->kind == HK_SHARDING_MANUAL) return s;
  if (!sa_manual_subgroup(s)) {
    hk_sharding t;
    memset(&t, 0, sizeof t);
    t.kind = HK_SHARDING_REPLICATED;
    if (s->kind != HK_SHARDING_TUPLE) {
      t.n_metadata = s->n_metadata;
      t.metadata = s->metadata;
    }
    return hk_sharding_intern(m, &t);
  }
  pt_tiles t;
  pt_from_sharding(s, &t);
  /* fold every data dim into replication, keep the manual dims */
  int order[HK_MAX_RANK], no = 0;
  int trailing = t.n - t.data_rank;
  for (int k = 0; k < trailing; k++)
    if (t.sub[k] == HK_SUBGROUP_MANUAL) order[no++] = t.data_rank + k;
  int n_manual = no;
  for (int d = 0; d < t.data_rank; d++) order[no++] = d;
  for (int k = 0; k < trailing; k++)
    if (t.sub[k] != HK_SUBGROUP_MANUAL) order[no++] = t.data_rank + k;
  int64_t *nd = pt_permute(&t, t.n, t.dims, order);
  int64_t dims[HK_MAX_RANK];
  uint8_t sub[HK_MAX_RANK];
  int r = data_rank < 0 ? t.data_rank : data_rank;
  int64_t manual = 1;
  for (int d = 0; d < r; d++) dims[d] = 1;
  for (int k = 0; k < n_manual; k++) {
    dims[r + k] = t.dims[order[k]];
    sub[k] = HK_SUBGROUP_MANUAL;
    manual *= dims[r + k];
  }
  dims[r + n_manual] = pt_count(&t) / manual;
  sub[n_manual] = HK_SUBGROUP_REPLICATED;
  free(t.dev);
  t.dev = nd;
  pt_reshape(&t, r + n_manual + 1, dims, r, sub);
  const hk_sharding *res = pt_to_sharding(m, &t, s);
  pt_free(&t);
  return res;
}

/* ---- tuples ------------------------------------------------------------------------ */

const hk_sharding *sa_tuple_of(hk_module *m, const hk_shape *shape, const hk_sharding *s) {
  if (!hk_shape_is_tuple(shape)) return s;
  return hk_sharding_for_shape(m, s, shape);
}

const hk_sharding *sa_element(hk_module *m, const hk_sharding *s, const hk_shape *shape, int64_t i) {
  if (!s) return NULL;
  if (!hk_shape_is_tuple(shape)) return s;
  return hk_sharding_subsharding_shape(m, s, shape, 1, &i);
}

/* ---- merging --------------------------------------------------------------------------- */

static int manual_dim(const pt_tiles *t) {
  for (int k = t->data_rank; k < t->n; k++)
    if (t->sub[k - t->data_rank] == HK_SUBGROUP_MANUAL) return k;
  return -1;
}

static void tile_index(const hk_sharding *s, const pt_tiles *t, int64_t device, int64_t *idx) {
  int64_t pos = hk_sharding_device_position(s, device);
  for (int k = t->n - 1; k >= 0; k--) {
    idx[k] = pos % t->dims[k];
    pos /= t->dims[k];
  }
}

/* s with dst's metadata followed by to_merge's not already there (XLA's
 * MergeShardingIfCompatible keeps both sources). */
static const hk_sharding *merge_metadata(hk_module *m, const hk_sharding *s, const hk_sharding *dst,
                                         const hk_sharding *to_merge) {
  int n = dst->n_metadata, extra = 0;
  hk_metadata *md = hk_check_alloc(malloc(sizeof *md * (size_t)(n + to_merge->n_metadata + 1)));
  for (int k = 0; k < n; k++) md[k] = dst->metadata[k];
  for (int k = 0; k < to_merge->n_metadata; k++) {
    bool seen = false;
    for (int j = 0; j < dst->n_metadata && !seen; j++)
      seen = hk_metadata_equal(&to_merge->metadata[k], &dst->metadata[j]);
    if (!seen) md[n + extra++] = to_merge->metadata[k];
  }
  if (extra > 0) {
    hk_sharding t = *s;
    t.n_metadata = n + extra;
    t.metadata = md;
    s = hk_sharding_intern(m, &t);
  }
  free(md);
  return s;
}

typedef struct merge_slot { int64_t key, device; } merge_slot;

static int cmp_slot(const void *a, const void *b) {
  const merge_slot *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->device < y->device ? -1 : x->device > y->device;
}

/* Merged tiles of a and b (both tiled, same data rank and devices) if every
 * device's tile indices agree; NULL otherwise. */
static const hk_sharding *merge_tiles(hk_module *m, const hk_sharding *a, const hk_sharding *b,
                                      int64_t min_tiles) {
  pt_tiles ta, tb;
  pt_from_sharding(a, &ta);
  pt_from_sharding(b, &tb);
  const hk_sharding *res = NULL;
  merge_slot *slots = NULL;
  int am = manual_dim(&ta), bm = manual_dim(&tb);
  int64_t n = pt_count(&ta);
  if (ta.data_rank != tb.data_rank || n != pt_count(&tb) || (am >= 0) != (bm >= 0)) goto out;
  if (am >= 0 && ta.dims[am] != tb.dims[bm]) goto out;
  int r = ta.data_rank;
  int64_t dims[HK_MAX_RANK], tiles = 1;
  for (int d = 0; d < r; d++) {
    int64_t x = ta.dims[d], y = tb.dims[d];
    if (x != y && x != 1 && y != 1) goto out;
    dims[d] = x > y ? x : y;
    tiles *= dims[d];
  }
  if (tiles < min_tiles) goto out;
  int64_t manual = am >= 0 ? ta.dims[am] : 1;
  if (n % (tiles * manual)) goto out;
  int64_t repl = n / (tiles * manual);
  slots = malloc(sizeof *slots * (size_t)n);
  if (!slots) hk_out_of_memory();
  int64_t ia[HK_MAX_RANK], ib[HK_MAX_RANK];
  for (int64_t k = 0; k < n; k++) {
    int64_t dev = ta.dev[k];
    if (hk_sharding_device_position(b, dev) < 0) goto out;
    tile_index(a, &ta, dev, ia);
    tile_index(b, &tb, dev, ib);
    int64_t key = 0;
    for (int d = 0; d < r; d++) {
      int64_t x = ta.dims[d] > 1 ? ia[d] : ib[d];
      if (ta.dims[d] > 1 && tb.dims[d] > 1 && ia[d] != ib[d]) goto out;
      key = key * dims[d] + x;
    }
    if (am >= 0) {
      if (ia[am] != ib[bm]) goto out;
      key = key * manual + ia[am];
    }
    slots[k].key = key;
    slots[k].device = dev;
  }
  qsort(slots, (size_t)n, sizeof *slots, cmp_slot);
  for (int64_t k = 0; k < n; k++)
    if (slots[k].key != k / repl) goto out;
  pt_tiles t;
  memset(&t, 0, sizeof t);
  t.dev = malloc(sizeof(int64_t) * (size_t)n);
  if (!t.dev) hk_out_of_memory();
  for (int64_t k = 0; k < n; k++) t.dev[k] = slots[k].device;
  uint8_t sub[2];
  int nd = r;
  if (am >= 0) {
    dims[nd] = manual;
    sub[nd - r] = HK_SUBGROUP_MANUAL;
    nd++;
  }
  dims[nd] = repl;
  sub[nd - r] = HK_SUBGROUP_REPLICATED;
  nd++;
  pt_reshape(&t, nd, dims, r, sub);
  res = merge_metadata(m, pt_to_sharding(m, &t, b), b, a);
  pt_free(&t);
out:
  free(slots);
  pt_free(&ta);
  pt_free(&tb);
  return res;
}

bool sa_merge_compatible(hk_module *m, const hk_sharding *to_merge, int64_t min_tiles,
                         const hk_sharding **dst) {
  if (!to_merge || to_merge->kind != HK_SHARDING_TILED) return false;
  if ((*dst)->kind == HK_SHARDING_REPLICATED) {
    *dst = to_merge;
    return true;
  }
  if ((*dst)->kind != HK_SHARDING_TILED || !sa_partial(*dst)) return false;
  const hk_sharding *r = merge_tiles(m, to_merge, *dst, min_tiles);
  if (!r) return false;
  *dst = r;
  return true;
}

static int64_t tile_devices(const hk_sharding *s) {
  int64_t n = 1;
  for (int k = 0; k < s->n_tile_dims; k++) n *= s->tile_dims[k];
  return n;
}

bool sa_merge(hk_module *m, const hk_sharding *old, const hk_sharding **cand, bool may_combine) {
  if (old->kind == HK_SHARDING_TUPLE && (*cand)->kind == HK_SHARDING_TUPLE &&
      old->n_elems == (*cand)->n_elems) {
    const hk_sharding **el = malloc(sizeof *el * (size_t)(old->n_elems ? old->n_elems : 1));
    if (!el) hk_out_of_memory();
    bool changed = false;
    for (int i = 0; i < old->n_elems; i++) {
      el[i] = (*cand)->elems[i];
      changed |= sa_merge(m, old->elems[i], &el[i], may_combine);
    }
    *cand = hk_sharding_tuple(m, old->n_elems, el);
    free(el);
    return changed;
  }
  if (old->kind == HK_SHARDING_TUPLE || (*cand)->kind == HK_SHARDING_TUPLE) return false;
  if (may_combine && sa_partial(old) && sa_partial(*cand) &&
      tile_devices(old) == tile_devices(*cand)) {
    int64_t a = sa_num_tiles(old), b = sa_num_tiles(*cand);
    if (sa_merge_compatible(m, old, (a > b ? a : b) + 1, cand)) return true;
  }
  return sa_more_specific(*cand, old);
}
