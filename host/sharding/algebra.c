/* algebra.c - sharding algebra the propagation pass and the partitioner share: transpose, partial replication of dims, removing/inserting dims, device groups. */
#include <stdlib.h>
#include <string.h>

#include "sharding/work.h"

/* Marks data dims listed in dims (others ignored); returns how many. */
static int mark_dims(int data, int n, const int64_t *dims, bool *mark) {
  int k = 0;
  memset(mark, 0, sizeof(bool) * HK_MAX_RANK);
  for (int i = 0; i < n; i++)
    if (dims[i] >= 0 && dims[i] < data && !mark[dims[i]]) mark[dims[i]] = true, k++;
  return k;
}

const hk_sharding *hk_sharding_transpose(hk_module *m, const hk_sharding *s, const int64_t *perm) {
  if (s->kind != HK_SHARDING_TILED) return s->kind == HK_SHARDING_TUPLE ? NULL : s;
  work w;
  hk_shw_load(&w, s);
  int data = w.nd - w.nsub, p[HK_MAX_RANK];
  bool seen[HK_MAX_RANK] = {false};
  for (int i = 0; i < data; i++) {
    if (perm[i] < 0 || perm[i] >= data || seen[perm[i]]) {
      free(w.dev);
      return NULL;
    }
    seen[perm[i]] = true;
    p[i] = (int)perm[i];
  }
  for (int i = data; i < w.nd; i++) p[i] = i;
  hk_shw_transpose(&w, p);
  hk_shw_normalise(&w, false);
  return hk_shw_intern(m, &w, s, s->iota != NULL);
}

/* Moves the marked data dims into the replication subgroup. */
static void work_replicate_marked(work *w, const bool *mark) {
  int data = w->nd - w->nsub, p[HK_MAX_RANK], np = 0;
  int64_t dims[HK_MAX_RANK], group = 1, old_repl = 1;
  uint8_t types[HK_MAX_RANK];
  int nt = 0, nd = 0;
  for (int i = 0; i < data; i++) {
    if (!mark[i]) p[np++] = i;
    dims[nd++] = mark[i] ? 1 : w->dims[i];
  }
  for (int i = 0; i < w->nsub; i++) {
    if (w->sub[i] == HK_SUBGROUP_REPLICATED) continue;
    p[np++] = data + i;
    dims[nd++] = w->dims[data + i];
    types[nt++] = w->sub[i];
  }
  for (int i = 0; i < data; i++)
    if (mark[i]) p[np++] = i, group *= w->dims[i];
  for (int i = 0; i < w->nsub; i++)
    if (w->sub[i] == HK_SUBGROUP_REPLICATED) p[np++] = data + i, old_repl *= w->dims[data + i];
  hk_shw_transpose(w, p);
  dims[nd++] = group * old_repl;
  types[nt++] = HK_SUBGROUP_REPLICATED;
  w->nd = nd;
  memcpy(w->dims, dims, sizeof(int64_t) * (size_t)nd);
  w->nsub = nt;
  memcpy(w->sub, types, (size_t)nt);
}

const hk_sharding *hk_sharding_replicate_dims(hk_module *m, const hk_sharding *s, int n, const int64_t *dims) {
  if (s->kind != HK_SHARDING_TILED) return s->kind == HK_SHARDING_TUPLE ? NULL : s;
  bool mark[HK_MAX_RANK];
  int data = hk_shard_impl(s)->data_rank;
  mark_dims(data, n, dims, mark);
  bool any = false;
  for (int i = 0; i < data; i++) {
    if (mark[i] && s->tile_dims[i] == 1) mark[i] = false;
    any |= mark[i];
  }
  if (!any) return s;
  work w;
  hk_shw_load(&w, s);
  work_replicate_marked(&w, mark);
  hk_shw_normalise(&w, false);
  return hk_shw_intern(m, &w, s, s->iota != NULL);
}

const hk_sharding *hk_sharding_replicate_all_except(hk_module *m, const hk_sharding *s, int n,
                                                    const int64_t *keep) {
  if (s->kind != HK_SHARDING_TILED) return s->kind == HK_SHARDING_TUPLE ? NULL : s;
  bool kept[HK_MAX_RANK];
  int data = hk_shard_impl(s)->data_rank;
  mark_dims(data, n, keep, kept);
  int64_t dims[HK_MAX_RANK];
  int k = 0;
  for (int i = 0; i < data; i++)
    if (!kept[i]) dims[k++] = i;
  return hk_sharding_replicate_dims(m, s, k, dims);
}

/* Rewrites the data dims of a work (flat order unchanged: only dims of
 * size one come or go). */
static void work_set_data_dims(work *w, int nd, const int64_t *data_dims) {
  int64_t sub[HK_MAX_RANK];
  int data = w->nd - w->nsub;
  memcpy(sub, w->dims + data, sizeof(int64_t) * (size_t)w->nsub);
  memcpy(w->dims, data_dims, sizeof(int64_t) * (size_t)nd);
  memcpy(w->dims + nd, sub, sizeof(int64_t) * (size_t)w->nsub);
  w->nd = nd + w->nsub;
}

/* Back from work form: the replicate flag for a lone REPLICATED subgroup. */
static const hk_sharding *work_intern_as_is(hk_module *m, work *w, const hk_sharding *like) {
  if (w->nsub == 1 && w->sub[0] == HK_SUBGROUP_REPLICATED) {
    w->nsub = 0;
    w->flag = true;
  }
  return hk_shw_intern(m, w, like, like->iota != NULL);
}

const hk_sharding *hk_sharding_remove_dims(hk_module *m, const hk_sharding *s, int n, const int64_t *dims) {
  if (s->kind != HK_SHARDING_TILED) return s->kind == HK_SHARDING_TUPLE ? NULL : s;
  int data = hk_shard_impl(s)->data_rank;
  bool mark[HK_MAX_RANK];
  if (mark_dims(data, n, dims, mark) == 0) return s;
  const hk_sharding *r = hk_sharding_replicate_dims(m, s, n, dims);
  if (r->kind != HK_SHARDING_TILED) return r;
  work w;
  hk_shw_load(&w, r);
  int64_t nd[HK_MAX_RANK];
  int k = 0;
  for (int i = 0; i < data; i++)
    if (!mark[i]) nd[k++] = w.dims[i];
  work_set_data_dims(&w, k, nd);
  return work_intern_as_is(m, &w, r);
}

const hk_sharding *hk_sharding_insert_dims(hk_module *m, const hk_sharding *s, int n, const int64_t *at) {
  if (s->kind != HK_SHARDING_TILED) return s->kind == HK_SHARDING_TUPLE ? NULL : s;
  int data = hk_shard_impl(s)->data_rank, out_rank = data + n;
  if (out_rank + s->n_tile_dims - data >= HK_MAX_RANK) return NULL;
  bool mark[HK_MAX_RANK];
  if (mark_dims(out_rank, n, at, mark) != n) return NULL;
  work w;
  hk_shw_load(&w, s);
  int64_t nd[HK_MAX_RANK];
  for (int i = 0, k = 0; i < out_rank; i++) nd[i] = mark[i] ? 1 : w.dims[k++];
  work_set_data_dims(&w, out_rank, nd);
  return work_intern_as_is(m, &w, s);
}

int64_t hk_sharding_device_groups(const hk_sharding *s, int n, const int64_t *dims, int64_t *out) {
  if (s->kind != HK_SHARDING_TILED) return -1;
  bool mark[HK_MAX_RANK];
  mark_dims(s->n_tile_dims, n, dims, mark);
  work w;
  hk_shw_load(&w, s);
  int p[HK_MAX_RANK], np = 0;
  int64_t size = 1;
  for (int i = 0; i < s->n_tile_dims; i++)
    if (!mark[i]) p[np++] = i;
  for (int i = 0; i < s->n_tile_dims; i++)
    if (mark[i]) p[np++] = i, size *= s->tile_dims[i];
  hk_shw_transpose(&w, p);
  memcpy(out, w.dev, sizeof(int64_t) * (size_t)w.n);
  free(w.dev);
  return size;
}
