/* json_shape.c - shapes and layouts as JSON objects, both directions. */
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* ---- export ------------------------------------------------------------ */

static json_object *tile_to_json(const hk_tile *t) {
  json_object *a = json_object_new_array_ext(t->n_dims);
  for (int k = 0; k < t->n_dims; k++)
    json_object_array_add(a, t->dims[k] == HK_TILE_COMBINE ? json_object_new_string("*")
                                                           : json_object_new_int64(t->dims[k]));
  return a;
}

static json_object *layout_to_json(const hk_layout *l) {
  json_object *o = json_object_new_object();
  hkj_put(o, "minor_to_major", hkj_new_i64s(l->n_minor_to_major, l->minor_to_major));
  if (l->n_tiles > 0) {
    json_object *tiles = json_object_new_array_ext(l->n_tiles);
    for (int k = 0; k < l->n_tiles; k++) json_object_array_add(tiles, tile_to_json(&l->tiles[k]));
    hkj_put(o, "tiles", tiles);
  }
  if (l->element_size_bits) hkj_put(o, "element_size_bits", json_object_new_int64(l->element_size_bits));
  if (l->memory_space) hkj_put(o, "memory_space", json_object_new_int64(l->memory_space));
  if (l->extra) hkj_put(o, "extra", json_object_new_string(l->extra));
  return o;
}

static bool any_dynamic(const hk_shape *s) {
  if (!s->dynamic) return false;
  for (int k = 0; k < s->rank; k++)
    if (s->dynamic[k]) return true;
  return false;
}

json_object *hkj_shape_to_json(const hk_shape *s) {
  json_object *o = json_object_new_object();
  hkj_put(o, "element_type", json_object_new_string(hk_prim_name((hk_prim)s->elem)));
  if (s->elem == HK_TUPLE) {
    json_object *elems = json_object_new_array_ext(s->n_tuple);
    for (int k = 0; k < s->n_tuple; k++) json_object_array_add(elems, hkj_shape_to_json(s->tuple[k]));
    hkj_put(o, "tuple_shapes", elems);
    return o;
  }
  if (!hk_shape_is_array(s)) return o;   /* token, opaque */
  hkj_put(o, "dims", hkj_new_i64s(s->rank, s->dims));
  if (any_dynamic(s)) hkj_put(o, "dynamic", hkj_new_bools(s->rank, s->dynamic));
  if (s->layout) hkj_put(o, "layout", layout_to_json(s->layout));
  return o;
}

/* ---- import ------------------------------------------------------------ */

static hk_status *tile_from_json(hkj_ctx *c, json_object *v, hk_tile *out) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > HK_MAX_RANK) return hkj_err(c, "tile has more than %d dims", HK_MAX_RANK);
  int64_t *dims = hk_alloc(c->m, (n + 1) * sizeof *dims);
  for (size_t k = 0; k < n; k++) {
    json_object *d = json_object_array_get_idx(v, k);
    size_t saved = hkj_push_index(c, k);
    hk_status *st = NULL;
    if (json_object_is_type(d, json_type_string) && strcmp(json_object_get_string(d), "*") == 0)
      dims[k] = HK_TILE_COMBINE;
    else
      st = hkj_i64_range(c, d, 1, INT64_MAX, &dims[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  out->n_dims = (int32_t)n;
  out->dims = dims;
  return NULL;
}

static hk_status *tiles_from_json(hkj_ctx *c, json_object *v, hk_layout *l) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > HK_MAX_RANK) return hkj_err(c, "too many tiles");
  hk_tile *tiles = hk_alloc(c->m, (n + 1) * sizeof *tiles);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = tile_from_json(c, json_object_array_get_idx(v, k), &tiles[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  l->n_tiles = (int32_t)n;
  l->tiles = tiles;
  return NULL;
}

/* minor_to_major must be a permutation of 0..rank-1. */
static hk_status *check_permutation(hkj_ctx *c, const hk_i64s *p, int rank) {
  if (p->n != rank)
    return hkj_err(c, "has %d entries for a rank-%d shape", (int)p->n, rank);
  bool seen[HK_MAX_RANK] = {false};
  for (int k = 0; k < p->n; k++) {
    if (p->v[k] < 0 || p->v[k] >= rank || seen[p->v[k]])
      return hkj_err(c, "is not a permutation of the dimensions");
    seen[p->v[k]] = true;
  }
  return NULL;
}

static hk_status *layout_fields(hkj_ctx *c, json_object *v, int rank, hk_layout *l) {
  static const char *const keys[] = {"minor_to_major", "tiles", "element_size_bits",
                                     "memory_space", "extra", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  json_object *f;
  HK_TRY(hkj_need(c, v, "minor_to_major", &f));
  size_t saved = hkj_push_key(c, "minor_to_major");
  hk_i64s m2m;
  hk_status *st = hkj_i64s(c, f, &m2m);
  if (!st) st = check_permutation(c, &m2m, rank);
  hkj_pop(c, saved);
  if (st) return st;
  l->n_minor_to_major = m2m.n;
  l->minor_to_major = m2m.v;
  if ((f = hkj_get(v, "tiles"))) {
    saved = hkj_push_key(c, "tiles");
    st = tiles_from_json(c, f, l);
    hkj_pop(c, saved);
    if (st) return st;
  }
  if ((f = hkj_get(v, "element_size_bits"))) {
    saved = hkj_push_key(c, "element_size_bits");
    st = hkj_i64_range(c, f, 0, 1 << 20, &l->element_size_bits);
    hkj_pop(c, saved);
    if (st) return st;
  }
  if ((f = hkj_get(v, "memory_space"))) {
    saved = hkj_push_key(c, "memory_space");
    st = hkj_i64_range(c, f, 0, INT64_MAX, &l->memory_space);
    hkj_pop(c, saved);
    if (st) return st;
  }
  if ((f = hkj_get(v, "extra"))) {
    saved = hkj_push_key(c, "extra");
    st = hkj_str(c, f, &l->extra);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return NULL;
}

static hk_status *tuple_from_json(hkj_ctx *c, json_object *v, const hk_shape **out) {
  static const char *const keys[] = {"element_type", "tuple_shapes", NULL};
  HK_TRY(hkj_known_keys(c, v, keys));
  json_object *elems;
  HK_TRY(hkj_need(c, v, "tuple_shapes", &elems));
  size_t saved = hkj_push_key(c, "tuple_shapes");
  size_t n = 0;
  hk_status *st = hkj_array(c, elems, &n);
  if (!st && n > INT32_MAX) st = hkj_err(c, "too many tuple elements");
  const hk_shape **shapes = st ? NULL : malloc((n + 1) * sizeof *shapes);
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = hkj_shape_from_json(c, json_object_array_get_idx(elems, k), &shapes[k]);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  if (!st) *out = hk_shape_tuple(c->m, (int)n, shapes);
  free(shapes);
  return st;
}

static hk_status *dims_from_json(hkj_ctx *c, json_object *v, hk_shape *s) {
  json_object *dims;
  HK_TRY(hkj_need(c, v, "dims", &dims));
  size_t saved = hkj_push_key(c, "dims");
  hk_i64s d;
  hk_status *st = hkj_i64s(c, dims, &d);
  if (!st && d.n > HK_MAX_RANK) st = hkj_err(c, "rank %d exceeds %d", (int)d.n, HK_MAX_RANK);
  for (int k = 0; !st && k < d.n; k++)
    if (d.v[k] < 0) {
      size_t s2 = hkj_push_index(c, (size_t)k);
      st = hkj_err(c, "negative dimension size");
      hkj_pop(c, s2);
    }
  hkj_pop(c, saved);
  if (st) return st;
  s->rank = (uint8_t)d.n;
  s->dims = d.v;
  return NULL;
}

static hk_status *dynamic_from_json(hkj_ctx *c, json_object *v, hk_shape *s) {
  size_t saved = hkj_push_key(c, "dynamic");
  int32_t n;
  const bool *dyn;
  hk_status *st = hkj_bools(c, v, &n, &dyn);
  if (!st && n != s->rank) st = hkj_err(c, "has %d entries for a rank-%d shape", (int)n, s->rank);
  hkj_pop(c, saved);
  if (!st) s->dynamic = dyn;
  return st;
}

static hk_status *array_from_json(hkj_ctx *c, json_object *v, hk_prim p, const hk_shape **out) {
  static const char *const keys[] = {"element_type", "dims", "dynamic", "layout", NULL};
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_shape s = {.elem = (uint8_t)p};
  HK_TRY(dims_from_json(c, v, &s));
  json_object *f;
  if ((f = hkj_get(v, "dynamic"))) HK_TRY(dynamic_from_json(c, f, &s));
  hk_layout layout = {0};
  if ((f = hkj_get(v, "layout"))) {
    size_t saved = hkj_push_key(c, "layout");
    hk_status *st = layout_fields(c, f, s.rank, &layout);
    hkj_pop(c, saved);
    if (st) return st;
    s.layout = &layout;
  }
  *out = hk_shape_intern(c->m, &s);
  return NULL;
}

/* The HLO spelling ("f32[2,3]{1,0}"), accepted on import as a shorthand. */
static hk_status *shape_from_text(hkj_ctx *c, json_object *v, const hk_shape **out) {
  hk_status *st = hk_parse_shape(c->m, json_object_get_string(v), (size_t)json_object_get_string_len(v), out);
  if (!st) return NULL;
  hk_status *e = hkj_err(c, "bad shape '%s': %s", json_object_get_string(v), st->message);
  hk_status_free(st);
  return e;
}

hk_status *hkj_shape_from_json(hkj_ctx *c, json_object *v, const hk_shape **out) {
  if (json_object_is_type(v, json_type_string)) return shape_from_text(c, v, out);
  HK_TRY(hkj_object(c, v));
  json_object *et;
  HK_TRY(hkj_need(c, v, "element_type", &et));
  const char *name;
  size_t len;
  size_t saved = hkj_push_key(c, "element_type");
  hk_status *st = hkj_str_raw(c, et, &name, &len);
  hk_prim p = st ? HK_PRIM_INVALID : hk_prim_from_name(name, len);
  if (!st && p == HK_PRIM_INVALID) st = hkj_err(c, "unknown element type '%s'", name);
  hkj_pop(c, saved);
  if (st) return st;
  if (p == HK_TUPLE) return tuple_from_json(c, v, out);
  if (!hk_prim_is_array(p)) {
    static const char *const keys[] = {"element_type", NULL};
    HK_TRY(hkj_known_keys(c, v, keys));
    hk_shape s = {.elem = (uint8_t)p};
    *out = hk_shape_intern(c->m, &s);
    return NULL;
  }
  return array_from_json(c, v, p, out);
}
