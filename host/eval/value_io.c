/* value_io.c - comparing values with tolerances, and values as JSON. */
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>

#include "eval/eval_internal.h"

/* ---- comparing ----------------------------------------------------------- */

void hk_default_tolerance(hk_prim p, double *atol, double *rtol) {
  switch (p) {
    case HK_F64: case HK_C128: *atol = 1e-9; *rtol = 1e-8; break;
    case HK_F32: case HK_C64: *atol = 1e-5; *rtol = 1e-4; break;
    case HK_F16: *atol = 1e-3; *rtol = 1e-2; break;
    case HK_BF16: *atol = 1e-2; *rtol = 2e-2; break;
    default: *atol = 0.125; *rtol = 0.125; break;   /* f8 / f4 */
  }
}

double hk_value_rms(const hk_value *v) {
  double sum = 0;
  int64_t n = 0;
  int parts = hk_prim_is_complex((hk_prim)v->elem) ? 2 : 1;
  for (int64_t i = 0; i < v->n; i++) {
    double re, im;
    hk_value_get_c(v, i, &re, &im);
    for (int c = 0; c < parts; c++) {
      double x = c ? im : re;
      if (isfinite(x)) {
        sum += x * x;
        n++;
      }
    }
  }
  return n ? sqrt(sum / (double)n) : 0;
}

/* Ulps of the leaf's scale a reassociated sum may be off by. */
#define HK_SUM_ULPS 16

double hk_reassociation_slack(hk_prim p, double rms) {
  int mantissa;
  switch (p) {
    case HK_F64: case HK_C128: mantissa = 52; break;
    case HK_F32: case HK_C64: mantissa = 23; break;
    case HK_F16: mantissa = 10; break;
    case HK_BF16: mantissa = 7; break;
    default: mantissa = 3; break;   /* f8 / f4 */
  }
  return HK_SUM_ULPS * ldexp(1.0, -mantissa) * rms;
}

static void set_message(hk_compare_result *r, char *msg) {
  r->equal = false;
  if (!r->message) r->message = msg;
  else free(msg);
}

static void mismatch(hk_compare_result *r, int64_t leaf, int64_t i, double e, double a) {
  r->equal = false;
  if (r->has_mismatch) return;
  r->has_mismatch = true;
  r->mismatch_leaf = leaf;
  r->mismatch_index = i;
  r->expected = e;
  r->actual = a;
}

static void compare_leaf(const hk_value *e, const hk_value *a, int64_t leaf, double atol,
                         double rtol, hk_compare_result *r) {
  hk_prim p = (hk_prim)e->elem;
  bool same_shape = e->elem == a->elem && e->rank == a->rank && e->n == a->n;
  for (int j = 0; same_shape && j < e->rank; j++) same_shape = e->dims[j] == a->dims[j];
  if (!same_shape) {
    char *x = hk_value_shape_string(e), *y = hk_value_shape_string(a), buf[512];
    snprintf(buf, sizeof buf, "output %lld: expected shape %s, got %s", (long long)leaf, x, y);
    free(x);
    free(y);
    set_message(r, strdup(buf));
    return;
  }
  if (!hk_prim_is_float(p) && !hk_prim_is_complex(p)) {
    for (int64_t i = 0; i < e->n; i++) {
      int64_t x = hk_value_get_i64(e, i), y = hk_value_get_i64(a, i);
      if (x != y) mismatch(r, leaf, i, (double)x, (double)y);
    }
    return;
  }
  double at = atol, rt = rtol, dat, drt;
  hk_default_tolerance(p, &dat, &drt);
  if (at < 0) at = dat;
  if (rt < 0) rt = drt;
  int parts = hk_prim_is_complex(p) ? 2 : 1;
  /* Reassociated sums: a partitioned program adds partial sums in another
   * order, and a sum's rounding error scales with its terms, not with its
   * result (an element near zero by cancellation).  So with default
   * tolerances an element may also be off by a few ulps of the leaf's
   * magnitude: HK_SUM_ULPS * epsilon(type) * rms(expected). */
  if (atol < 0) at += hk_reassociation_slack(p, hk_value_rms(e));
  for (int64_t i = 0; i < e->n; i++)
    for (int c = 0; c < parts; c++) {
      double x, y, xi, yi;
      hk_value_get_c(e, i, &x, &xi);
      hk_value_get_c(a, i, &y, &yi);
      if (c) {
        x = xi;
        y = yi;
      }
      if (isnan(x) || isnan(y)) {
        if (isnan(x) != isnan(y)) mismatch(r, leaf, i, x, y);
        continue;
      }
      if (isinf(x) || isinf(y)) {
        if (x != y) mismatch(r, leaf, i, x, y);
        continue;
      }
      double d = fabs(x - y), rel = x != 0 ? d / fabs(x) : (d > 0 ? INFINITY : 0);
      if (d > r->max_abs_error) r->max_abs_error = d;
      if (rel > r->max_rel_error && isfinite(rel)) r->max_rel_error = rel;
      if (d > at + rt * fabs(x)) mismatch(r, leaf, i, x, y);
    }
}

void hk_value_compare(const hk_value *expected, const hk_value *actual, double atol,
                      double rtol, hk_compare_result *out) {
  memset(out, 0, sizeof *out);
  out->equal = true;
  int64_t ne = hk_value_leaf_count(expected), na = hk_value_leaf_count(actual);
  if (ne != na) {
    char buf[128];
    snprintf(buf, sizeof buf, "expected %lld outputs, got %lld", (long long)ne, (long long)na);
    set_message(out, strdup(buf));
    return;
  }
  for (int64_t k = 0; k < ne; k++) {
    const hk_value *e = hk_value_leaf(expected, k), *a = hk_value_leaf(actual, k);
    if (!hk_prim_is_array((hk_prim)e->elem)) continue;
    compare_leaf(e, a, k, atol, rtol, out);
  }
}

void hk_compare_result_free(hk_compare_result *r) {
  free(r->message);
  r->message = NULL;
}

/* ---- JSON out --------------------------------------------------------------- */

static void put_float(hk_buf *out, double x, bool f64) {
  if (isnan(x)) hk_buf_puts(out, "\"nan\"");
  else if (isinf(x)) hk_buf_puts(out, x > 0 ? "\"inf\"" : "\"-inf\"");
  else hk_buf_printf(out, f64 ? "%.17g" : "%.9g", x);
}

void hk_value_leaf_to_json(const hk_value *v, hk_buf *out) {
  char *shape = hk_value_shape_string(v);
  hk_buf_printf(out, "{\"shape\": \"%s\", \"values\": [", shape);
  free(shape);
  hk_prim p = (hk_prim)v->elem;
  if (hk_prim_is_array(p)) {
    for (int64_t i = 0; i < v->n; i++) {
      if (i) hk_buf_puts(out, ", ");
      if (p == HK_PRED) {
        hk_buf_puts(out, hk_value_get_i64(v, i) ? "true" : "false");
      } else if (hk_prim_is_complex(p)) {
        double re, im;
        hk_value_get_c(v, i, &re, &im);
        hk_buf_puts(out, "[");
        put_float(out, re, p == HK_C128);
        hk_buf_puts(out, ", ");
        put_float(out, im, p == HK_C128);
        hk_buf_puts(out, "]");
      } else if (hk_prim_is_float(p)) {
        put_float(out, hk_value_get_f64(v, i), p == HK_F64);
      } else if (p == HK_U64) {
        hk_buf_printf(out, "%llu", (unsigned long long)hk_value_get_i64(v, i));
      } else {
        hk_buf_printf(out, "%lld", (long long)hk_value_get_i64(v, i));
      }
    }
  }
  hk_buf_puts(out, "]}");
}

/* ---- JSON in ------------------------------------------------------------------ */

static hk_status *number_of(json_object *o, double *d, int64_t *i, bool *is_int) {
  *is_int = false;
  switch (json_object_get_type(o)) {
    case json_type_boolean: *i = json_object_get_boolean(o); *d = (double)*i; *is_int = true; return NULL;
    case json_type_int: *i = json_object_get_int64(o); *d = (double)*i; *is_int = true; return NULL;
    case json_type_double: *d = json_object_get_double(o); return NULL;
    case json_type_string: {
      const char *s = json_object_get_string(o);
      if (!strcmp(s, "nan")) *d = NAN;
      else if (!strcmp(s, "inf")) *d = INFINITY;
      else if (!strcmp(s, "-inf")) *d = -INFINITY;
      else return hk_error(HK_INVALID_ARGUMENT, "bad value \"%s\"", s);
      return NULL;
    }
    default: return hk_error(HK_INVALID_ARGUMENT, "values must be numbers, booleans or \"inf\"/\"nan\"");
  }
}

static hk_status *value_from_json(json_object *o, const hk_shape *s, hk_value **out) {
  if (s->elem == HK_TUPLE) {
    json_object *t;
    if (!json_object_object_get_ex(o, "tuple", &t) || !json_object_is_type(t, json_type_array) ||
        (int)json_object_array_length(t) != s->n_tuple)
      return hk_error(HK_INVALID_ARGUMENT, "a tuple parameter needs {\"tuple\": [%d entries]}", s->n_tuple);
    hk_value **e = calloc((size_t)(s->n_tuple ? s->n_tuple : 1), sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < s->n_tuple; i++) {
      hk_status *st = value_from_json(json_object_array_get_idx(t, (size_t)i), s->tuple[i], &e[i]);
      if (st) {
        for (int j = 0; j < i; j++) hk_value_release(e[j]);
        free(e);
        return hk_status_prefix(st, "tuple element %d", i);
      }
    }
    *out = hk_value_new_tuple(s->n_tuple, e);
    free(e);
    return NULL;
  }
  if (!hk_prim_is_array((hk_prim)s->elem)) {
    *out = hk_value_new_token();
    return NULL;
  }
  json_object *vals;
  if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "values", &vals) ||
      !json_object_is_type(vals, json_type_array))
    return hk_error(HK_INVALID_ARGUMENT, "expected {\"shape\": ..., \"values\": [...]}");
  hk_value *v = hk_value_new_array((hk_prim)s->elem, s->rank, s->dims);
  if ((int64_t)json_object_array_length(vals) != v->n) {
    hk_status *st = hk_error(HK_INVALID_ARGUMENT, "%zu values given, the shape holds %lld",
                             json_object_array_length(vals), (long long)v->n);
    hk_value_release(v);
    return st;
  }
  for (int64_t i = 0; i < v->n; i++) {
    double d = 0;
    int64_t x = 0;
    bool is_int;
    hk_status *st = number_of(json_object_array_get_idx(vals, (size_t)i), &d, &x, &is_int);
    if (st) {
      hk_value_release(v);
      return hk_status_prefix(st, "value %lld", (long long)i);
    }
    if (is_int && !hk_prim_is_float((hk_prim)s->elem) && !hk_prim_is_complex((hk_prim)s->elem))
      hk_value_set_i64(v, i, x);
    else
      hk_value_set_f64(v, i, d);
  }
  *out = v;
  return NULL;
}

hk_status *hk_values_from_json(const hk_module *m, const char *text, size_t len,
                               hk_value ***out, int *n_out) {
  json_tokener *tok = json_tokener_new();
  json_object *root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  json_tokener_free(tok);
  if (!root || jerr != json_tokener_success) {
    if (root) json_object_put(root);
    return hk_error(HK_INVALID_ARGUMENT, "inputs: invalid JSON: %s", json_tokener_error_desc(jerr));
  }
  json_object *arr = root, *inner;
  if (json_object_is_type(root, json_type_object) && json_object_object_get_ex(root, "inputs", &inner))
    arr = inner;
  const hk_computation *e = m->entry;
  hk_status *st = NULL;
  if (!json_object_is_type(arr, json_type_array))
    st = hk_error(HK_INVALID_ARGUMENT, "inputs: expected an array of parameter values");
  else if ((int)json_object_array_length(arr) != e->n_params)
    st = hk_error(HK_INVALID_ARGUMENT, "inputs: %zu values for %d parameters",
                  json_object_array_length(arr), e->n_params);
  hk_value **vals = NULL;
  if (!st) {
    vals = calloc((size_t)(e->n_params ? e->n_params : 1), sizeof(hk_value *));
    if (!vals) hk_out_of_memory();
    for (int i = 0; i < e->n_params && !st; i++) {
      st = value_from_json(json_object_array_get_idx(arr, (size_t)i), e->params[i]->shape, &vals[i]);
      if (st) st = hk_status_prefix(st, "inputs: parameter %d", i);
    }
  }
  json_object_put(root);
  if (st) {
    for (int i = 0; vals && i < e->n_params; i++) hk_value_release(vals[i]);
    free(vals);
    return st;
  }
  *out = vals;
  *n_out = e->n_params;
  return NULL;
}
