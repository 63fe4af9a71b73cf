/* query.c - questions about shardings: kinds, tile counts, tile shapes, device -> tile index/offset, tuple sub-shardings, validation. */
#include <stdlib.h>
#include <string.h>

#include "sharding/sharding_impl.h"

/* True when every element of a tuple satisfies pred (XLA: all_of). */
static bool all_elems(const hk_sharding *s, bool (*pred)(const hk_sharding *)) {
  for (int i = 0; i < s->n_elems; i++)
    if (!pred(s->elems[i])) return false;
  return true;
}

bool hk_sharding_is_replicated(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) return all_elems(s, hk_sharding_is_replicated);
  return hk_sharding_semantic(s)->kind == HK_SHARDING_REPLICATED;
}

bool hk_sharding_is_manual(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) return all_elems(s, hk_sharding_is_manual);
  return hk_sharding_semantic(s)->kind == HK_SHARDING_MANUAL;
}

bool hk_sharding_is_maximal(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) return s->n_elems > 0 && all_elems(s, hk_sharding_is_maximal);
  return s->kind == HK_SHARDING_MAXIMAL;
}

bool hk_sharding_is_tiled(const hk_sharding *s) {
  return s->kind == HK_SHARDING_TILED && hk_shard_impl(s)->num_tiles > 1;
}

bool hk_sharding_is_tuple(const hk_sharding *s) { return s->kind == HK_SHARDING_TUPLE; }

int64_t hk_sharding_unique_device(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_MAXIMAL) return s->device;
  if (s->kind != HK_SHARDING_TUPLE || s->n_elems == 0) return -1;
  int64_t d = hk_sharding_unique_device(s->elems[0]);
  for (int i = 1; i < s->n_elems && d >= 0; i++)
    if (hk_sharding_unique_device(s->elems[i]) != d) d = -1;
  return d;
}

int hk_sharding_data_rank(const hk_sharding *s) {
  return s->kind == HK_SHARDING_TILED ? hk_shard_impl(s)->data_rank : 0;
}

int64_t hk_sharding_dim_partitions(const hk_sharding *s, int d) {
  if (s->kind != HK_SHARDING_TILED || d < 0 || d >= hk_shard_impl(s)->data_rank) return 1;
  return s->tile_dims[d];
}

int64_t hk_sharding_num_tiles(const hk_sharding *s) {
  return s->kind == HK_SHARDING_TILED ? hk_shard_impl(s)->num_tiles : 1;
}

int64_t hk_sharding_replication_factor(const hk_sharding *s) {
  return s->kind == HK_SHARDING_TILED ? hk_shard_impl(s)->replication : 1;
}

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

/* ---- tile shapes -------------------------------------------------------- */

static const hk_shape *tile_shape_array(hk_module *m, const hk_sharding *s, const hk_shape *shape) {
  if (s->kind != HK_SHARDING_TILED || !hk_shape_is_array(shape)) return shape;
  const hk_sharding_impl *p = hk_shard_impl(s);
  if (p->data_rank != shape->rank) return NULL;
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < shape->rank; i++) dims[i] = ceil_div(shape->dims[i], s->tile_dims[i]);
  hk_shape t = *shape;
  t.dims = dims;
  return hk_shape_intern(m, &t);
}

/* Tile shape of a (sub)shape, consuming tuple leaves from *leaf. */
static const hk_shape *tile_shape_rec(hk_module *m, const hk_sharding *s, const hk_shape *shape,
                                      int64_t *leaf) {
  if (!hk_shape_is_tuple(shape)) {
    const hk_sharding *e = s;
    if (s->kind == HK_SHARDING_TUPLE) {
      if (*leaf >= s->n_elems) return NULL;
      e = s->elems[(*leaf)++];
    }
    return tile_shape_array(m, e, shape);
  }
  int n = shape->n_tuple;
  const hk_shape **elems = malloc(sizeof(*elems) * (size_t)(n ? n : 1));
  const hk_shape *r = NULL;
  int i = 0;
  for (; i < n; i++)
    if (!(elems[i] = tile_shape_rec(m, s, shape->tuple[i], leaf))) break;
  if (i == n) r = hk_shape_tuple(m, n, elems);
  free(elems);
  return r;
}

const hk_shape *hk_sharding_tile_shape(hk_module *m, const hk_sharding *s, const hk_shape *shape) {
  if (s->kind == HK_SHARDING_TUPLE && !hk_shape_is_tuple(shape)) return NULL;
  int64_t leaf = 0;
  return tile_shape_rec(m, s, shape, &leaf);
}

/* ---- device -> tile ---------------------------------------------------- */

bool hk_sharding_tile_index(const hk_sharding *s, int64_t device, int64_t *out) {
  int64_t pos = hk_sharding_device_position(s, device);
  if (pos < 0) return false;
  int rank = hk_shard_impl(s)->data_rank;
  for (int i = s->n_tile_dims - 1; i >= 0; i--) {
    if (i < rank) out[i] = pos % s->tile_dims[i];
    pos /= s->tile_dims[i];
  }
  return true;
}

/* Offset (limit = false) or limit of device's tile in each data dim. */
static bool tile_bound(const hk_sharding *s, const hk_shape *shape, int64_t device, int64_t *out,
                       bool limit) {
  if (s->kind == HK_SHARDING_MAXIMAL || s->kind == HK_SHARDING_REPLICATED) {
    for (int i = 0; i < shape->rank; i++) out[i] = limit ? shape->dims[i] : 0;
    return true;
  }
  if (s->kind != HK_SHARDING_TILED || hk_shard_impl(s)->data_rank != shape->rank) return false;
  if (!hk_sharding_tile_index(s, device, out)) return false;
  for (int i = 0; i < shape->rank; i++) {
    int64_t chunk = ceil_div(shape->dims[i], s->tile_dims[i]);
    int64_t v = (out[i] + (limit ? 1 : 0)) * chunk;
    out[i] = v < shape->dims[i] ? v : shape->dims[i];
  }
  return true;
}

bool hk_sharding_tile_offset(const hk_sharding *s, const hk_shape *shape, int64_t device, int64_t *out) {
  return tile_bound(s, shape, device, out, false);
}

bool hk_sharding_tile_limit(const hk_sharding *s, const hk_shape *shape, int64_t device, int64_t *out) {
  return tile_bound(s, shape, device, out, true);
}

/* ---- tuples ------------------------------------------------------------ */

const hk_sharding *hk_sharding_subsharding(const hk_sharding *s, int n, const int64_t *index) {
  if (s->kind != HK_SHARDING_TUPLE || n == 0) return s;
  if (n != 1 || index[0] < 0 || index[0] >= s->n_elems) return NULL;
  return s->elems[index[0]];
}

/* XLA's RequiredLeaves: an empty tuple still takes one sharding. */
static int64_t required_leaves(const hk_shape *shape) {
  int64_t n = hk_shape_leaf_count(shape);
  return n ? n : 1;
}

bool hk_shard_tuple_matches(const hk_sharding *s, const hk_shape *shape) {
  int64_t leaves = hk_shape_leaf_count(shape);
  return s->n_elems == leaves || (leaves == 0 && s->n_elems <= 1);
}

const hk_sharding *hk_sharding_subsharding_shape(hk_module *m, const hk_sharding *s,
                                                 const hk_shape *shape, int n, const int64_t *index) {
  int64_t off = 0;
  const hk_shape *sub = shape;
  for (int k = 0; k < n; k++) {
    if (!hk_shape_is_tuple(sub) || index[k] < 0 || index[k] >= sub->n_tuple) return NULL;
    for (int64_t i = 0; i < index[k]; i++) off += hk_shape_leaf_count(sub->tuple[i]);
    sub = sub->tuple[index[k]];
  }
  if (s->kind != HK_SHARDING_TUPLE) return s;
  if (!hk_shape_is_tuple(shape) || !hk_shard_tuple_matches(s, shape)) return NULL;
  if (!hk_shape_is_tuple(sub)) return s->elems[off];
  int64_t k = hk_shape_leaf_count(sub);
  if (k == 0) return hk_sharding_tuple(m, 0, NULL);
  return hk_sharding_tuple(m, (int)k, s->elems + off);
}

const hk_sharding *hk_sharding_for_shape(hk_module *m, const hk_sharding *s, const hk_shape *shape) {
  if (!hk_shape_is_tuple(shape) || s->kind == HK_SHARDING_TUPLE) return s;
  int64_t n = required_leaves(shape);
  const hk_sharding **elems = malloc(sizeof(*elems) * (size_t)n);
  for (int64_t i = 0; i < n; i++) elems[i] = s;
  const hk_sharding *r = hk_sharding_tuple(m, (int)n, elems);
  free(elems);
  return r;
}
