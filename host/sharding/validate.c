/* validate.c - checks a sharding against a shape and a device count, with XLA's HloSharding::Validate messages. */
#include <stdlib.h>
#include <string.h>

#include "sharding/sharding_impl.h"

/* A shape's dims for messages, e.g. f32[4,8] or (f32[2], s32[]). */
static void put_shape(hk_buf *b, const hk_shape *s) {
  if (hk_shape_is_tuple(s)) {
    hk_buf_put(b, "(", 1);
    for (int i = 0; i < s->n_tuple; i++) {
      if (i) hk_buf_put(b, ", ", 2);
      put_shape(b, s->tuple[i]);
    }
    hk_buf_put(b, ")", 1);
    return;
  }
  hk_buf_puts(b, hk_prim_name((hk_prim)s->elem));
  if (!hk_shape_is_array(s)) return;
  hk_buf_put(b, "[", 1);
  for (int i = 0; i < s->rank; i++) hk_buf_printf(b, i ? ",%lld" : "%lld", (long long)s->dims[i]);
  hk_buf_put(b, "]", 1);
}

static char *shape_text(const hk_shape *s) {
  hk_buf b;
  hk_buf_init(&b);
  put_shape(&b, s);
  hk_buf_put(&b, "", 0);
  char *r = malloc(b.len + 1);
  if (r) {
    memcpy(r, b.data, b.len);
    r[b.len] = 0;
  }
  hk_buf_free(&b);
  return r;
}

static hk_status *device_in_range(int64_t d, int64_t num_devices) {
  if (d < 0) return hk_error(HK_INVALID_ARGUMENT, "device %lld is negative in tile assignment", (long long)d);
  if (num_devices >= 0 && d >= num_devices)
    return hk_error(HK_INVALID_ARGUMENT, "device %lld >= num_devices (%lld) in tile assignment",
                    (long long)d, (long long)num_devices);
  return NULL;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Every device in range and used once; all num_devices used. */
static hk_status *validate_devices(const hk_sharding *s, int64_t num_devices) {
  int64_t n = hk_shard_num_devices(s);
  int64_t *sorted = malloc(sizeof(int64_t) * (size_t)n);
  memcpy(sorted, s->devices, sizeof(int64_t) * (size_t)n);
  qsort(sorted, (size_t)n, sizeof(int64_t), cmp_i64);
  hk_status *st = NULL;
  for (int64_t i = 0; i < n && !st; i++) {
    st = device_in_range(sorted[i], num_devices);
    if (!st && i > 0 && sorted[i] == sorted[i - 1])
      st = hk_error(HK_INVALID_ARGUMENT, "device %lld is not unique in tile assignment", (long long)sorted[i]);
  }
  free(sorted);
  if (!st && num_devices >= 0 && n != num_devices)
    st = hk_error(HK_INVALID_ARGUMENT, "tile_assignment should have %lld devices but has %lld",
                  (long long)num_devices, (long long)n);
  return st;
}

static hk_status *validate_non_tuple(const hk_sharding *s, const hk_shape *shape, int64_t num_devices) {
  if (hk_shape_is_tuple(shape))
    return hk_error(HK_INVALID_ARGUMENT, "Validation shape is a tuple but sharding is not.");
  if (s->kind == HK_SHARDING_MAXIMAL) return device_in_range(s->device, num_devices);
  if (s->kind != HK_SHARDING_TILED) return NULL;
  if (hk_shard_num_devices(s) == 1)
    return hk_error(HK_INVALID_ARGUMENT,
                    "Tile assignment only contains a single device. If a replicated sharding was intended, "
                    "use HloSharding::Replicated(). If a device placement was intended, use "
                    "HloSharding::AssignDevice()");
  if (hk_shard_impl(s)->data_rank != shape->rank) {
    char *t = hk_sharding_to_string(s);
    char *sh = shape_text(shape);
    hk_status *st = hk_error(HK_INVALID_ARGUMENT,
                             "Number of tile assignment dimensions (excluding subgroups) is different than "
                             "the input rank. sharding=%s, input_shape=%s",
                             t ? t : "?", sh ? sh : "?");
    free(t);
    free(sh);
    return st;
  }
  return validate_devices(s, num_devices);
}

/* The sharding of leaf i: a tuple's element, or a non-tuple s itself. */
static const hk_sharding *leaf_sharding(const hk_sharding *s, int i) {
  return s->kind == HK_SHARDING_TUPLE ? s->elems[i] : s;
}

static hk_status *validate_tuple(const hk_sharding *s, const hk_shape *shape, int64_t num_devices) {
  if (!hk_shape_is_tuple(shape))
    return hk_error(HK_INVALID_ARGUMENT, "Sharding is tuple-shaped but validation shape is not.");
  int64_t leaves = hk_shape_leaf_count(shape);
  int64_t n_shardings = s->kind == HK_SHARDING_TUPLE ? s->n_elems : leaves;
  if (s->kind == HK_SHARDING_TUPLE && !hk_shard_tuple_matches(s, shape))
    return hk_error(HK_INVALID_ARGUMENT, "Shape has %lld leaf nodes while this sharding has %d",
                    (long long)leaves, s->n_elems);
  /* Walk the leaves in order with their shapes. */
  int64_t path[HK_MAX_RANK];
  const hk_shape *stack[HK_MAX_RANK];
  int depth = 0, leaf = 0;
  stack[0] = shape;
  path[0] = -1;
  while (depth >= 0 && leaf < n_shardings && leaves > 0) {
    const hk_shape *cur = stack[depth];
    if (++path[depth] >= cur->n_tuple) {
      depth--;
      continue;
    }
    const hk_shape *child = cur->tuple[path[depth]];
    if (hk_shape_is_tuple(child)) {
      if (depth + 1 == HK_MAX_RANK) break;
      stack[++depth] = child;
      path[depth] = -1;
      continue;
    }
    hk_status *st = validate_non_tuple(leaf_sharding(s, leaf), child, num_devices);
    if (st) return hk_status_prefix(st, "tuple element %d", leaf);
    leaf++;
  }
  return NULL;
}

hk_status *hk_sharding_validate(const hk_sharding *s, const hk_shape *shape, int64_t num_devices) {
  if (shape->elem == HK_TOKEN) return NULL;
  bool tuple = s->kind == HK_SHARDING_TUPLE || hk_shape_is_tuple(shape);
  hk_status *st = tuple ? validate_tuple(s, shape, num_devices) : validate_non_tuple(s, shape, num_devices);
  if (st) {
    char *t = hk_sharding_to_string(s);
    char *sh = shape_text(shape);
    st = hk_status_prefix(st, "sharding %s against shape %s", t ? t : "?", sh ? sh : "?");
    free(t);
    free(sh);
  }
  return st;
}
