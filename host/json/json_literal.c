/* json_literal.c - constant literals as nested JSON arrays in row-major order, both directions. */
#include <inttypes.h>
#include <string.h>

#include "json/json_internal.h"

/* Raw storage bits of element idx of a real floating literal. */
static uint64_t float_bits(const hk_literal *l, hk_prim p, int64_t idx, int part) {
  int size = hk_prim_is_complex(p) ? hk_prim_storage_bytes(p) / 2 : hk_prim_storage_bytes(p);
  const unsigned char *at = (const unsigned char *)l->data + (idx * (hk_prim_is_complex(p) ? 2 : 1) + part) * size;
  switch (size) {
    case 8: { uint64_t b; memcpy(&b, at, 8); return b; }
    case 4: { uint32_t b; memcpy(&b, at, 4); return b; }
    case 2: { uint16_t b; memcpy(&b, at, 2); return b; }
    default: return *at;
  }
}

static void set_float_bits(hk_literal *l, hk_prim p, int64_t idx, int part, uint64_t bits) {
  int size = hk_prim_is_complex(p) ? hk_prim_storage_bytes(p) / 2 : hk_prim_storage_bytes(p);
  unsigned char *at = (unsigned char *)l->data + (idx * (hk_prim_is_complex(p) ? 2 : 1) + part) * size;
  switch (size) {
    case 8: memcpy(at, &bits, 8); break;
    case 4: { uint32_t b = (uint32_t)bits; memcpy(at, &b, 4); break; }
    case 2: { uint16_t b = (uint16_t)bits; memcpy(at, &b, 2); break; }
    default: *at = (unsigned char)bits; break;
  }
}

/* The real-type half of a complex type (c64 -> f32). */
static hk_prim complex_part(hk_prim p) { return p == HK_C128 ? HK_F64 : HK_F32; }

/* ---- export ------------------------------------------------------------- */

static json_object *element_to_json(const hk_literal *l, hk_prim p, int64_t idx) {
  if (p == HK_PRED) return json_object_new_boolean(hk_literal_get_i64(l, idx) != 0);
  if (hk_prim_is_unsigned_int(p)) return json_object_new_uint64((uint64_t)hk_literal_get_i64(l, idx));
  if (hk_prim_is_signed_int(p)) return json_object_new_int64(hk_literal_get_i64(l, idx));
  if (hk_prim_is_complex(p)) {
    json_object *pair = json_object_new_array_ext(2);
    json_object_array_add(pair, hkj_float_to_json(complex_part(p), float_bits(l, p, idx, 0)));
    json_object_array_add(pair, hkj_float_to_json(complex_part(p), float_bits(l, p, idx, 1)));
    return pair;
  }
  return hkj_float_to_json(p, float_bits(l, p, idx, 0));
}

/* Nested arrays over dims [d, rank), consuming elements from *idx. */
static json_object *dims_to_json(const hk_literal *l, hk_prim p, int d, int64_t *idx) {
  const hk_shape *s = l->shape;
  if (d == s->rank) return element_to_json(l, p, (*idx)++);
  json_object *a = json_object_new_array_ext((int)s->dims[d]);
  for (int64_t k = 0; k < s->dims[d]; k++) json_object_array_add(a, dims_to_json(l, p, d + 1, idx));
  return a;
}

json_object *hkj_literal_to_json(const hk_literal *l) {
  if (!l || l->elided) return NULL;
  bool no_values = !l->data && hk_shape_is_array(l->shape) && hk_shape_elements(l->shape) > 0;
  if (no_values) return NULL;   /* printed as {...}, like an elided literal */
  if (hk_shape_is_tuple(l->shape)) {
    json_object *a = json_object_new_array_ext(l->n_elems);
    for (int k = 0; k < l->n_elems; k++) json_object_array_add(a, hkj_literal_to_json(l->elems[k]));
    return a;
  }
  if (!hk_shape_is_array(l->shape)) return json_object_new_array();
  int64_t idx = 0;
  return dims_to_json(l, (hk_prim)l->shape->elem, 0, &idx);
}

/* ---- import ------------------------------------------------------------- */

static hk_status *int_element(hkj_ctx *c, json_object *v, hk_literal *l, hk_prim p, int64_t idx) {
  int bits = hk_prim_bits(p);
  if (hk_prim_is_unsigned_int(p) && bits == 64) {
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
      return hkj_err(c, "expected an integer in [0, 2^64), got %s", hkj_type_name(v));
    hk_literal_set_i64(l, idx, (int64_t)json_object_get_uint64(v));
    return NULL;
  }
  int64_t lo = hk_prim_is_unsigned_int(p) ? 0 : (bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1)));
  int64_t hi = hk_prim_is_unsigned_int(p) ? ((int64_t)1 << bits) - 1
                                          : (bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1);
  int64_t x;
  HK_TRY(hkj_i64_range(c, v, lo, hi, &x));
  hk_literal_set_i64(l, idx, x);
  return NULL;
}

static hk_status *pred_element(hkj_ctx *c, json_object *v, hk_literal *l, int64_t idx) {
  if (json_object_is_type(v, json_type_boolean)) {
    hk_literal_set_i64(l, idx, json_object_get_boolean(v) ? 1 : 0);
    return NULL;
  }
  int64_t x;
  if (!json_object_is_type(v, json_type_int))
    return hkj_err(c, "expected true or false, got %s", hkj_type_name(v));
  HK_TRY(hkj_i64_range(c, v, 0, 1, &x));
  hk_literal_set_i64(l, idx, x);
  return NULL;
}

static hk_status *complex_element(hkj_ctx *c, json_object *v, hk_literal *l, hk_prim p, int64_t idx) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n != 2) return hkj_err(c, "a complex value is [real, imag], got %zu entries", n);
  for (int part = 0; part < 2; part++) {
    uint64_t bits;
    size_t saved = hkj_push_index(c, (size_t)part);
    hk_status *st = hkj_float_from_json(c, json_object_array_get_idx(v, (size_t)part),
                                        complex_part(p), &bits);
    hkj_pop(c, saved);
    if (st) return st;
    set_float_bits(l, p, idx, part, bits);
  }
  return NULL;
}

static hk_status *element_from_json(hkj_ctx *c, json_object *v, hk_literal *l, hk_prim p, int64_t idx) {
  if (p == HK_PRED) return pred_element(c, v, l, idx);
  if (hk_prim_is_integral(p)) return int_element(c, v, l, p, idx);
  if (hk_prim_is_complex(p)) return complex_element(c, v, l, p, idx);
  uint64_t bits;
  HK_TRY(hkj_float_from_json(c, v, p, &bits));
  set_float_bits(l, p, idx, 0, bits);
  return NULL;
}

static hk_status *dims_from_json(hkj_ctx *c, json_object *v, hk_literal *l, hk_prim p, int d,
                                 int64_t *idx) {
  const hk_shape *s = l->shape;
  if (d == s->rank) return element_from_json(c, v, l, p, (*idx)++);
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if ((int64_t)n != s->dims[d])
    return hkj_err(c, "has %zu entries, dimension %d of the shape has %" PRId64, n, d, s->dims[d]);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = dims_from_json(c, json_object_array_get_idx(v, k), l, p, d + 1, idx);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return NULL;
}

/* Checks only the nesting (array lengths against dims), so that a literal
 * is allocated only once the JSON is known to hold all its elements. */
static hk_status *check_nesting(hkj_ctx *c, json_object *v, const hk_shape *s, int d) {
  if (d == s->rank) return NULL;
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if ((int64_t)n != s->dims[d])
    return hkj_err(c, "has %zu entries, dimension %d of the shape has %" PRId64, n, d, s->dims[d]);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = check_nesting(c, json_object_array_get_idx(v, k), s, d + 1);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return NULL;
}

static hk_literal *elided_literal(hkj_ctx *c, const hk_shape *shape) {
  hk_literal *l = hk_alloc(c->m, sizeof *l);
  l->shape = shape;
  l->elided = true;
  return l;
}

static hk_status *tuple_from_json(hkj_ctx *c, json_object *v, const hk_shape *shape, hk_literal **out) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if ((int64_t)n != shape->n_tuple)
    return hkj_err(c, "has %zu entries for a %d-element tuple", n, (int)shape->n_tuple);
  hk_literal *l = hk_alloc(c->m, sizeof *l);
  l->shape = shape;
  l->n_elems = shape->n_tuple;
  l->elems = hk_alloc(c->m, (n + 1) * sizeof *l->elems);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = hkj_literal_from_json(c, json_object_array_get_idx(v, k), shape->tuple[k],
                                          &l->elems[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  *out = l;
  return NULL;
}

hk_status *hkj_literal_from_json(hkj_ctx *c, json_object *v, const hk_shape *shape, hk_literal **out) {
  if (!v) {
    *out = elided_literal(c, shape);
    return NULL;
  }
  if (hk_shape_is_tuple(shape)) return tuple_from_json(c, v, shape, out);
  if (!hk_shape_is_array(shape)) {
    size_t n;
    HK_TRY(hkj_array(c, v, &n));
    if (n) return hkj_err(c, "a %s literal has no values", hk_prim_name((hk_prim)shape->elem));
    *out = hk_literal_new(c->m, shape);
    return NULL;
  }
  HK_TRY(check_nesting(c, v, shape, 0));
  hk_literal *l = hk_literal_new(c->m, shape);
  int64_t idx = 0;
  HK_TRY(dims_from_json(c, v, l, (hk_prim)shape->elem, 0, &idx));
  *out = l;
  return NULL;
}
