/* tiles.c - the mutable tile-assignment form (pt_tiles) the propagation
 * algebra works on, and its conversion to and from interned shardings. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

int64_t pt_count(const pt_tiles *t) {
  int64_t n = 1;
  for (int d = 0; d < t->n; d++) n *= t->dims[d];
  return n;
}

bool pt_from_sharding(const hk_sharding *s, pt_tiles *t) {
  memset(t, 0, sizeof *t);
  if (!s || s->kind != HK_SHARDING_TILED) return false;
  int trailing = s->n_subgroups + (s->replicate_on_last_tile_dim ? 1 : 0);
  t->n = s->n_tile_dims;
  t->data_rank = t->n - trailing;
  memcpy(t->dims, s->tile_dims, sizeof(int64_t) * (size_t)t->n);
  for (int k = 0; k < s->n_subgroups; k++) t->sub[k] = s->subgroups[k];
  if (s->replicate_on_last_tile_dim) t->sub[trailing - 1] = HK_SUBGROUP_REPLICATED;
  int64_t n = pt_count(t);
  t->dev = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!t->dev) hk_out_of_memory();
  memcpy(t->dev, s->devices, sizeof(int64_t) * (size_t)n);
  return true;
}

void pt_free(pt_tiles *t) {
  free(t->dev);
  t->dev = NULL;
}

void pt_reshape(pt_tiles *t, int n, const int64_t *dims, int data_rank, const uint8_t *sub) {
  int64_t tmp[HK_MAX_RANK];
  uint8_t ts[HK_MAX_RANK];
  memcpy(tmp, dims, sizeof(int64_t) * (size_t)n);
  memcpy(ts, sub, (size_t)(n - data_rank));
  t->n = n;
  t->data_rank = data_rank;
  memcpy(t->dims, tmp, sizeof(int64_t) * (size_t)n);
  memset(t->sub, 0, sizeof t->sub);
  memcpy(t->sub, ts, (size_t)(n - data_rank));
}

/* Drops trailing dims of size 1 and merges several replicated trailing dims
 * into one (moving it last), so the template is in XLA's shape. */
static void pt_normalise_trailing(pt_tiles *t) {
  int w = t->data_rank;
  int64_t repl = 1;
  int n_repl = 0;
  for (int k = t->data_rank; k < t->n; k++) {
    if (t->sub[k - t->data_rank] == HK_SUBGROUP_REPLICATED) {
      repl *= t->dims[k];
      n_repl++;
    }
  }
  bool need_move = false;
  for (int k = t->data_rank, seen_repl = 0; k < t->n; k++) {
    if (t->sub[k - t->data_rank] == HK_SUBGROUP_REPLICATED) seen_repl = 1;
    else if (seen_repl && t->dims[k] > 1) need_move = true;
  }
  if (n_repl > 1 || need_move) {
    /* Transpose replicated trailing dims to the end, then merge them. */
    int order[HK_MAX_RANK], o = 0;
    for (int k = 0; k < t->n; k++)
      if (k < t->data_rank || t->sub[k - t->data_rank] != HK_SUBGROUP_REPLICATED) order[o++] = k;
    for (int k = t->data_rank; k < t->n; k++)
      if (t->sub[k - t->data_rank] == HK_SUBGROUP_REPLICATED) order[o++] = k;
    int64_t total = pt_count(t);
    int64_t *nd = malloc(sizeof(int64_t) * (size_t)total);
    if (!nd) hk_out_of_memory();
    int64_t idx[HK_MAX_RANK] = {0}, strides[HK_MAX_RANK];
    strides[t->n - 1] = 1;
    for (int k = t->n - 2; k >= 0; k--) strides[k] = strides[k + 1] * t->dims[k + 1];
    for (int64_t f = 0; f < total; f++) {
      int64_t src = 0;
      for (int k = 0; k < t->n; k++) src += idx[order[k]] * strides[order[k]];
      nd[f] = t->dev[src];
      for (int k = t->n - 1; k >= 0; k--) {
        if (++idx[order[k]] < t->dims[order[k]]) break;
        idx[order[k]] = 0;
      }
    }
    free(t->dev);
    t->dev = nd;
    int64_t dims[HK_MAX_RANK];
    uint8_t sub[HK_MAX_RANK];
    int nn = 0;
    for (int k = 0; k < t->n; k++) {
      int s = order[k];
      if (s >= t->data_rank && t->sub[s - t->data_rank] == HK_SUBGROUP_REPLICATED) continue;
      dims[nn] = t->dims[s];
      if (nn >= t->data_rank) sub[nn - t->data_rank] = t->sub[s - t->data_rank];
      nn++;
    }
    dims[nn] = repl;
    sub[nn - t->data_rank] = HK_SUBGROUP_REPLICATED;
    nn++;
    pt_reshape(t, nn, dims, t->data_rank, sub);
  }
  /* drop size-1 trailing dims */
  int64_t dims[HK_MAX_RANK];
  uint8_t sub[HK_MAX_RANK];
  memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->data_rank);
  for (int k = t->data_rank; k < t->n; k++) {
    if (t->dims[k] == 1) continue;
    dims[w] = t->dims[k];
    sub[w - t->data_rank] = t->sub[k - t->data_rank];
    w++;
  }
  pt_reshape(t, w, dims, t->data_rank, sub);
}

const hk_sharding *pt_to_sharding(hk_module *m, const pt_tiles *in, const hk_sharding *meta) {
  pt_tiles t = *in;
  t.dev = malloc(sizeof(int64_t) * (size_t)pt_count(in));
  if (!t.dev) hk_out_of_memory();
  memcpy(t.dev, in->dev, sizeof(int64_t) * (size_t)pt_count(in));
  pt_normalise_trailing(&t);
  int64_t data_tiles = 1;
  for (int d = 0; d < t.data_rank; d++) data_tiles *= t.dims[d];
  bool all_repl = true, all_manual = true;
  for (int k = t.data_rank; k < t.n; k++) {
    if (t.sub[k - t.data_rank] != HK_SUBGROUP_REPLICATED) all_repl = false;
    if (t.sub[k - t.data_rank] != HK_SUBGROUP_MANUAL) all_manual = false;
  }
  hk_sharding tmpl;
  memset(&tmpl, 0, sizeof tmpl);
  if (meta && meta->kind != HK_SHARDING_TUPLE) {
    tmpl.n_metadata = meta->n_metadata;
    tmpl.metadata = meta->metadata;
  }
  if (data_tiles == 1 && (all_repl || (all_manual && t.n > t.data_rank))) {
    tmpl.kind = all_repl ? HK_SHARDING_REPLICATED : HK_SHARDING_MANUAL;
    pt_free(&t);
    return hk_sharding_intern(m, &tmpl);
  }
  if (t.data_rank == 0) {  /* scalars: only replication or manual is meaningful */
    tmpl.kind = all_manual ? HK_SHARDING_MANUAL : HK_SHARDING_REPLICATED;
    pt_free(&t);
    return hk_sharding_intern(m, &tmpl);
  }
  tmpl.kind = HK_SHARDING_TILED;
  tmpl.n_tile_dims = t.n;
  tmpl.tile_dims = t.dims;
  tmpl.devices = t.dev;
  int trailing = t.n - t.data_rank;
  uint8_t subs[HK_MAX_RANK];
  if (trailing == 1 && t.sub[0] == HK_SUBGROUP_REPLICATED) {
    tmpl.replicate_on_last_tile_dim = true;
  } else if (trailing > 0) {
    memcpy(subs, t.sub, (size_t)trailing);
    tmpl.n_subgroups = trailing;
    tmpl.subgroups = subs;
  }
  const hk_sharding *r = hk_sharding_intern(m, &tmpl);
  pt_free(&t);
  return r ? hk_sharding_canonical(m, r) : NULL;
}
