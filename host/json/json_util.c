/* json_util.c - JSON paths, error messages and typed value readers/writers shared by import and export. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* ---- paths --------------------------------------------------------------- */

/* Appends seg to the path; a path too long to hold just stops growing. */
static size_t path_append(hkj_ctx *c, const char *seg, size_t n) {
  size_t saved = c->plen;
  if (c->plen + n >= HKJ_PATH_CAP) return saved;
  memcpy(c->path + c->plen, seg, n);
  c->plen += n;
  c->path[c->plen] = '\0';
  return saved;
}

size_t hkj_push_key(hkj_ctx *c, const char *key) {
  size_t saved = c->plen;
  if (c->plen > 0) path_append(c, ".", 1);
  path_append(c, key, strlen(key));
  return saved;
}

/* "[index]" without printf: this runs for every array element read. */
size_t hkj_push_index(hkj_ctx *c, size_t index) {
  char seg[32];
  char *p = seg + sizeof seg;
  *--p = ']';
  do {
    *--p = (char)('0' + index % 10);
    index /= 10;
  } while (index);
  *--p = '[';
  return path_append(c, p, (size_t)(seg + sizeof seg - p));
}

/* ---- errors -------------------------------------------------------------- */

static hk_status *path_verror(hkj_ctx *c, const char *fmt, va_list ap) {
  hk_status *st = hk_verror(HK_INVALID_ARGUMENT, fmt, ap);
  const char *file = c->file ? c->file : "<input>";
  if (c->plen > 0) return hk_status_prefix(st, "%s: %s", file, c->path);
  return hk_status_prefix(st, "%s", file);
}

hk_status *hkj_err(hkj_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = path_verror(c, fmt, ap);
  va_end(ap);
  return st;
}

hk_status *hkj_err_at(hkj_ctx *c, const char *key, const char *fmt, ...) {
  size_t saved = hkj_push_key(c, key);
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = path_verror(c, fmt, ap);
  va_end(ap);
  hkj_pop(c, saved);
  return st;
}

const char *hkj_type_name(json_object *v) {
  if (!v) return "null";
  switch (json_object_get_type(v)) {
    case json_type_null: return "null";
    case json_type_boolean: return "boolean";
    case json_type_double: return "number";
    case json_type_int: return "integer";
    case json_type_object: return "object";
    case json_type_array: return "array";
    case json_type_string: return "string";
  }
  return "value";
}

/* ---- readers -------------------------------------------------------------- */

hk_status *hkj_object(hkj_ctx *c, json_object *v) {
  if (!json_object_is_type(v, json_type_object))
    return hkj_err(c, "expected an object, got %s", hkj_type_name(v));
  return NULL;
}

hk_status *hkj_array(hkj_ctx *c, json_object *v, size_t *n) {
  if (!json_object_is_type(v, json_type_array))
    return hkj_err(c, "expected an array, got %s", hkj_type_name(v));
  *n = json_object_array_length(v);
  return NULL;
}

/* json-c keeps integers above INT64_MAX as uint64; those do not fit here. */
hk_status *hkj_i64(hkj_ctx *c, json_object *v, int64_t *out) {
  if (!json_object_is_type(v, json_type_int))
    return hkj_err(c, "expected an integer, got %s", hkj_type_name(v));
  int64_t x = json_object_get_int64(v);
  if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
    return hkj_err(c, "integer out of range");
  *out = x;
  return NULL;
}

hk_status *hkj_i64_range(hkj_ctx *c, json_object *v, int64_t lo, int64_t hi, int64_t *out) {
  HK_TRY(hkj_i64(c, v, out));
  if (*out < lo || *out > hi)
    return hkj_err(c, "%" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", *out, lo, hi);
  return NULL;
}

hk_status *hkj_bool(hkj_ctx *c, json_object *v, bool *out) {
  if (!json_object_is_type(v, json_type_boolean))
    return hkj_err(c, "expected true or false, got %s", hkj_type_name(v));
  *out = json_object_get_boolean(v);
  return NULL;
}

hk_status *hkj_str_raw(hkj_ctx *c, json_object *v, const char **out, size_t *len) {
  if (!json_object_is_type(v, json_type_string))
    return hkj_err(c, "expected a string, got %s", hkj_type_name(v));
  *out = json_object_get_string(v);
  *len = (size_t)json_object_get_string_len(v);
  return NULL;
}

hk_status *hkj_str(hkj_ctx *c, json_object *v, const char **out) {
  const char *s;
  size_t n;
  HK_TRY(hkj_str_raw(c, v, &s, &n));
  if (memchr(s, '\0', n)) return hkj_err(c, "string contains a NUL character");
  *out = hk_intern(c->m, s, n);
  return NULL;
}

hk_status *hkj_i64s(hkj_ctx *c, json_object *v, hk_i64s *out) {
  size_t n = 0;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX) return hkj_err(c, "array too long");
  int64_t *vals = hk_alloc(c->m, (n + 1) * sizeof *vals);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = hkj_i64(c, json_object_array_get_idx(v, k), &vals[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  out->n = (int32_t)n;
  out->v = vals;
  return NULL;
}

hk_status *hkj_bools(hkj_ctx *c, json_object *v, int32_t *n_out, const bool **out) {
  size_t n = 0;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX) return hkj_err(c, "array too long");
  bool *vals = hk_alloc(c->m, n + 1);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = hkj_bool(c, json_object_array_get_idx(v, k), &vals[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  *n_out = (int32_t)n;
  *out = vals;
  return NULL;
}

bool hkj_key_listed(const char *const *keys, const char *key) {
  for (const char *const *k = keys; *k; k++)
    if (**k == *key && strcmp(*k, key) == 0) return true;
  return false;
}

hk_status *hkj_known_keys(hkj_ctx *c, json_object *obj, const char *const *keys) {
  json_object_object_foreach(obj, key, val) {
    (void)val;
    if (!hkj_key_listed(keys, key)) return hkj_err(c, "unknown key '%s'", key);
  }
  return NULL;
}

json_object *hkj_get(json_object *obj, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(obj, key, &v)) return NULL;
  return v;
}

hk_status *hkj_need(hkj_ctx *c, json_object *obj, const char *key, json_object **out) {
  if (!json_object_object_get_ex(obj, key, out)) return hkj_err(c, "missing key '%s'", key);
  return NULL;
}

hk_status *hkj_sharding(hkj_ctx *c, json_object *v, const hk_sharding **out) {
  const char *s;
  size_t n;
  HK_TRY(hkj_str_raw(c, v, &s, &n));
  size_t consumed = 0;
  hk_status *st = hk_sharding_parse(c->m, s, n, out, &consumed);
  if (st) {
    hk_status *e = hkj_err(c, "bad sharding '%s': %s", s, st->message);
    hk_status_free(st);
    return e;
  }
  if (consumed != n) return hkj_err(c, "bad sharding '%s': unexpected text after it", s);
  return NULL;
}

hk_status *hkj_kvs(hkj_ctx *c, json_object *v, int32_t *n_out, const hk_kv **out) {
  HK_TRY(hkj_object(c, v));
  int n = json_object_object_length(v);
  hk_kv *kv = hk_alloc(c->m, ((size_t)n + 1) * sizeof *kv);
  int k = 0;
  json_object_object_foreach(v, key, val) {
    size_t saved = hkj_push_key(c, key);
    hk_status *st = hkj_str(c, val, &kv[k].value);
    hkj_pop(c, saved);
    if (st) return st;
    kv[k++].key = hk_intern_cstr(c->m, key);
  }
  *n_out = k;
  *out = kv;
  return NULL;
}

static hk_status *raw_attr_from_json(hkj_ctx *c, json_object *v, hk_raw_attr *out) {
  static const char *const keys[] = {"name", "value", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  json_object *name, *value;
  HK_TRY(hkj_need(c, v, "name", &name));
  HK_TRY(hkj_need(c, v, "value", &value));
  size_t saved = hkj_push_key(c, "name");
  hk_status *st = hkj_str(c, name, &out->name);
  hkj_pop(c, saved);
  if (st) return st;
  if (!out->name[0]) return hkj_err_at(c, "name", "empty attribute name");
  saved = hkj_push_key(c, "value");
  st = hkj_str(c, value, &out->value);
  hkj_pop(c, saved);
  return st;
}

hk_status *hkj_raw_attrs(hkj_ctx *c, json_object *v, int32_t *n_out, const hk_raw_attr **out) {
  size_t n = 0;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX) return hkj_err(c, "array too long");
  hk_raw_attr *raw = hk_alloc(c->m, (n + 1) * sizeof *raw);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = raw_attr_from_json(c, json_object_array_get_idx(v, k), &raw[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  *n_out = (int32_t)n;
  *out = raw;
  return NULL;
}

/* ---- writers -------------------------------------------------------------- */

void hkj_put(json_object *obj, const char *key, json_object *val) {
  json_object_object_add_ex(obj, key, val,
                            JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY);
}

json_object *hkj_new_i64s(int n, const int64_t *v) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, json_object_new_int64(v[k]));
  return a;
}

json_object *hkj_new_bools(int n, const bool *v) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, json_object_new_boolean(v[k]));
  return a;
}

json_object *hkj_new_str(const char *s) {
  return s ? json_object_new_string(s) : NULL;
}

json_object *hkj_new_sharding(const hk_sharding *s) {
  hk_buf b;
  hk_buf_init(&b);
  hk_sharding_print_buf(s, &b);
  json_object *v = json_object_new_string_len(b.data ? b.data : "", (int)b.len);
  hk_buf_free(&b);
  return v;
}

json_object *hkj_new_kvs(int n, const hk_kv *kv) {
  json_object *o = json_object_new_object();
  for (int k = 0; k < n; k++)
    json_object_object_add(o, kv[k].key, json_object_new_string(kv[k].value));
  return o;
}

json_object *hkj_new_raw_attrs(int n, const hk_raw_attr *raw) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) {
    json_object *o = json_object_new_object();
    hkj_put(o, "name", json_object_new_string(raw[k].name));
    hkj_put(o, "value", json_object_new_string(raw[k].value));
    json_object_array_add(a, o);
  }
  return a;
}
