/* json_dnums.c - structured attributes as JSON: windows, dimension numbers, slices, padding, replica groups, pairs, metadata. */
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* ---- small shared readers ------------------------------------------------- */

/* obj[key] as int64 when present (else *out unchanged). */
static hk_status *opt_i64(hkj_ctx *c, json_object *obj, const char *key, int64_t lo, int64_t *out) {
  json_object *v = hkj_get(obj, key);
  if (!v) return NULL;
  size_t saved = hkj_push_key(c, key);
  hk_status *st = hkj_i64_range(c, v, lo, INT64_MAX, out);
  hkj_pop(c, saved);
  return st;
}

static hk_status *req_i64(hkj_ctx *c, json_object *obj, const char *key, int64_t lo, int64_t *out) {
  if (!hkj_get(obj, key)) return hkj_err(c, "missing key '%s'", key);
  return opt_i64(c, obj, key, lo, out);
}

/* obj[key] as an int list when present (else empty, non-NULL). */
static hk_status *opt_i64s(hkj_ctx *c, json_object *obj, const char *key, hk_i64s *out) {
  json_object *v = hkj_get(obj, key);
  if (!v) {
    out->n = 0;
    out->v = hk_alloc(c->m, sizeof(int64_t));
    return NULL;
  }
  size_t saved = hkj_push_key(c, key);
  hk_status *st = hkj_i64s(c, v, out);
  hkj_pop(c, saved);
  return st;
}

static hk_status *opt_str(hkj_ctx *c, json_object *obj, const char *key, const char **out) {
  json_object *v = hkj_get(obj, key);
  if (!v) return NULL;
  size_t saved = hkj_push_key(c, key);
  hk_status *st = hkj_str(c, v, out);
  hkj_pop(c, saved);
  return st;
}

/* Reads an array of fixed-size int tuples ([[a,b,c], ...]) into rows. */
static hk_status *int_rows(hkj_ctx *c, json_object *v, int width, const char *what, int32_t *n_out,
                           int64_t **rows) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX / (size_t)width) return hkj_err(c, "array too long");
  int64_t *r = hk_alloc(c->m, (n * (size_t)width + 1) * sizeof *r);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_i64s row;
    hk_status *st = hkj_i64s(c, json_object_array_get_idx(v, k), &row);
    if (!st && row.n != width) st = hkj_err(c, "expected %s", what);
    if (!st) memcpy(r + k * (size_t)width, row.v, (size_t)width * sizeof *r);
    hkj_pop(c, saved);
    if (st) return st;
  }
  *n_out = (int32_t)n;
  *rows = r;
  return NULL;
}

static json_object *int_row(int n, const int64_t *v) { return hkj_new_i64s(n, v); }

/* ---- window --------------------------------------------------------------- */

json_object *hkj_window_to_json(const hk_window *w) {
  json_object *a = json_object_new_array_ext(w->n_dims);
  for (int k = 0; k < w->n_dims; k++) {
    const hk_window_dim *d = &w->dims[k];
    json_object *o = json_object_new_object();
    hkj_put(o, "size", json_object_new_int64(d->size));
    hkj_put(o, "stride", json_object_new_int64(d->stride));
    hkj_put(o, "pad_lo", json_object_new_int64(d->pad_lo));
    hkj_put(o, "pad_hi", json_object_new_int64(d->pad_hi));
    hkj_put(o, "base_dilation", json_object_new_int64(d->base_dilation));
    hkj_put(o, "window_dilation", json_object_new_int64(d->window_dilation));
    hkj_put(o, "reversal", json_object_new_boolean(d->reversal));
    json_object_array_add(a, o);
  }
  return a;
}

static hk_status *window_dim(hkj_ctx *c, json_object *v, hk_window_dim *d) {
  static const char *const keys[] = {"size", "stride", "pad_lo", "pad_hi", "base_dilation",
                                     "window_dilation", "reversal", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  *d = (hk_window_dim){.stride = 1, .base_dilation = 1, .window_dilation = 1};
  HK_TRY(req_i64(c, v, "size", 0, &d->size));
  HK_TRY(opt_i64(c, v, "stride", 0, &d->stride));
  HK_TRY(opt_i64(c, v, "pad_lo", INT64_MIN, &d->pad_lo));
  HK_TRY(opt_i64(c, v, "pad_hi", INT64_MIN, &d->pad_hi));
  HK_TRY(opt_i64(c, v, "base_dilation", 0, &d->base_dilation));
  HK_TRY(opt_i64(c, v, "window_dilation", 0, &d->window_dilation));
  json_object *r = hkj_get(v, "reversal");
  if (r) {
    size_t saved = hkj_push_key(c, "reversal");
    hk_status *st = hkj_bool(c, r, &d->reversal);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return NULL;
}

hk_status *hkj_window_from_json(hkj_ctx *c, json_object *v, const hk_window **out) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > HK_MAX_RANK) return hkj_err(c, "window has more than %d dims", HK_MAX_RANK);
  hk_window_dim *dims = hk_alloc(c->m, (n + 1) * sizeof *dims);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = window_dim(c, json_object_array_get_idx(v, k), &dims[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  hk_window *w = hk_alloc(c->m, sizeof *w);
  w->n_dims = (int32_t)n;
  w->dims = dims;
  *out = w;
  return NULL;
}

/* ---- convolution dim_labels ------------------------------------------------- */

json_object *hkj_conv_to_json(const hk_conv_dnums *d) {
  json_object *o = json_object_new_object();
  hkj_put(o, "input_batch_dimension", json_object_new_int64(d->input_batch));
  hkj_put(o, "input_feature_dimension", json_object_new_int64(d->input_feature));
  hkj_put(o, "input_spatial_dimensions", hkj_new_i64s(d->n_spatial, d->input_spatial));
  hkj_put(o, "kernel_input_feature_dimension", json_object_new_int64(d->kernel_input_feature));
  hkj_put(o, "kernel_output_feature_dimension", json_object_new_int64(d->kernel_output_feature));
  hkj_put(o, "kernel_spatial_dimensions", hkj_new_i64s(d->n_spatial, d->kernel_spatial));
  hkj_put(o, "output_batch_dimension", json_object_new_int64(d->output_batch));
  hkj_put(o, "output_feature_dimension", json_object_new_int64(d->output_feature));
  hkj_put(o, "output_spatial_dimensions", hkj_new_i64s(d->n_spatial, d->output_spatial));
  return o;
}

static hk_status *conv_spatial(hkj_ctx *c, json_object *v, const char *key, int32_t *n,
                               const int64_t **out) {
  hk_i64s s;
  HK_TRY(opt_i64s(c, v, key, &s));
  if (*n >= 0 && s.n != *n)
    return hkj_err_at(c, key, "has %d entries, the other spatial lists have %d", (int)s.n, (int)*n);
  *n = s.n;
  *out = s.v;
  return NULL;
}

hk_status *hkj_conv_from_json(hkj_ctx *c, json_object *v, const hk_conv_dnums **out) {
  static const char *const keys[] = {
      "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
      "kernel_input_feature_dimension", "kernel_output_feature_dimension",
      "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
      "output_spatial_dimensions", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_conv_dnums *d = hk_alloc(c->m, sizeof *d);
  HK_TRY(req_i64(c, v, "input_batch_dimension", 0, &d->input_batch));
  HK_TRY(req_i64(c, v, "input_feature_dimension", 0, &d->input_feature));
  HK_TRY(req_i64(c, v, "kernel_input_feature_dimension", 0, &d->kernel_input_feature));
  HK_TRY(req_i64(c, v, "kernel_output_feature_dimension", 0, &d->kernel_output_feature));
  HK_TRY(req_i64(c, v, "output_batch_dimension", 0, &d->output_batch));
  HK_TRY(req_i64(c, v, "output_feature_dimension", 0, &d->output_feature));
  int32_t n = -1;
  HK_TRY(conv_spatial(c, v, "input_spatial_dimensions", &n, &d->input_spatial));
  HK_TRY(conv_spatial(c, v, "kernel_spatial_dimensions", &n, &d->kernel_spatial));
  HK_TRY(conv_spatial(c, v, "output_spatial_dimensions", &n, &d->output_spatial));
  d->n_spatial = n;
  *out = d;
  return NULL;
}

/* ---- dot / gather / scatter dimension numbers ------------------------------- */

json_object *hkj_dot_to_json(const hk_dot_dnums *d) {
  json_object *o = json_object_new_object();
  hkj_put(o, "lhs_batch_dims", hkj_new_i64s(d->lhs_batch.n, d->lhs_batch.v));
  hkj_put(o, "rhs_batch_dims", hkj_new_i64s(d->rhs_batch.n, d->rhs_batch.v));
  hkj_put(o, "lhs_contracting_dims", hkj_new_i64s(d->lhs_contracting.n, d->lhs_contracting.v));
  hkj_put(o, "rhs_contracting_dims", hkj_new_i64s(d->rhs_contracting.n, d->rhs_contracting.v));
  return o;
}

hk_status *hkj_dot_from_json(hkj_ctx *c, json_object *v, const hk_dot_dnums **out) {
  static const char *const keys[] = {"lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims",
                                     "rhs_contracting_dims", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_dot_dnums *d = hk_alloc(c->m, sizeof *d);
  HK_TRY(opt_i64s(c, v, "lhs_batch_dims", &d->lhs_batch));
  HK_TRY(opt_i64s(c, v, "rhs_batch_dims", &d->rhs_batch));
  HK_TRY(opt_i64s(c, v, "lhs_contracting_dims", &d->lhs_contracting));
  HK_TRY(opt_i64s(c, v, "rhs_contracting_dims", &d->rhs_contracting));
  *out = d;
  return NULL;
}

json_object *hkj_gather_to_json(const hk_gather_dnums *d) {
  json_object *o = json_object_new_object();
  hkj_put(o, "offset_dims", hkj_new_i64s(d->offset_dims.n, d->offset_dims.v));
  hkj_put(o, "collapsed_slice_dims", hkj_new_i64s(d->collapsed_slice_dims.n, d->collapsed_slice_dims.v));
  hkj_put(o, "start_index_map", hkj_new_i64s(d->start_index_map.n, d->start_index_map.v));
  hkj_put(o, "operand_batching_dims",
          hkj_new_i64s(d->operand_batching_dims.n, d->operand_batching_dims.v));
  hkj_put(o, "start_indices_batching_dims",
          hkj_new_i64s(d->start_indices_batching_dims.n, d->start_indices_batching_dims.v));
  hkj_put(o, "index_vector_dim", json_object_new_int64(d->index_vector_dim));
  return o;
}

hk_status *hkj_gather_from_json(hkj_ctx *c, json_object *v, const hk_gather_dnums **out) {
  static const char *const keys[] = {"offset_dims", "collapsed_slice_dims", "start_index_map",
                                     "operand_batching_dims", "start_indices_batching_dims",
                                     "index_vector_dim", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_gather_dnums *d = hk_alloc(c->m, sizeof *d);
  HK_TRY(opt_i64s(c, v, "offset_dims", &d->offset_dims));
  HK_TRY(opt_i64s(c, v, "collapsed_slice_dims", &d->collapsed_slice_dims));
  HK_TRY(opt_i64s(c, v, "start_index_map", &d->start_index_map));
  HK_TRY(opt_i64s(c, v, "operand_batching_dims", &d->operand_batching_dims));
  HK_TRY(opt_i64s(c, v, "start_indices_batching_dims", &d->start_indices_batching_dims));
  HK_TRY(req_i64(c, v, "index_vector_dim", 0, &d->index_vector_dim));
  *out = d;
  return NULL;
}

json_object *hkj_scatter_to_json(const hk_scatter_dnums *d) {
  json_object *o = json_object_new_object();
  hkj_put(o, "update_window_dims", hkj_new_i64s(d->update_window_dims.n, d->update_window_dims.v));
  hkj_put(o, "inserted_window_dims",
          hkj_new_i64s(d->inserted_window_dims.n, d->inserted_window_dims.v));
  hkj_put(o, "scatter_dims_to_operand_dims",
          hkj_new_i64s(d->scatter_dims_to_operand_dims.n, d->scatter_dims_to_operand_dims.v));
  hkj_put(o, "input_batching_dims", hkj_new_i64s(d->input_batching_dims.n, d->input_batching_dims.v));
  hkj_put(o, "scatter_indices_batching_dims",
          hkj_new_i64s(d->scatter_indices_batching_dims.n, d->scatter_indices_batching_dims.v));
  hkj_put(o, "index_vector_dim", json_object_new_int64(d->index_vector_dim));
  return o;
}

hk_status *hkj_scatter_from_json(hkj_ctx *c, json_object *v, const hk_scatter_dnums **out) {
  static const char *const keys[] = {"update_window_dims", "inserted_window_dims",
                                     "scatter_dims_to_operand_dims", "input_batching_dims",
                                     "scatter_indices_batching_dims", "index_vector_dim", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_scatter_dnums *d = hk_alloc(c->m, sizeof *d);
  HK_TRY(opt_i64s(c, v, "update_window_dims", &d->update_window_dims));
  HK_TRY(opt_i64s(c, v, "inserted_window_dims", &d->inserted_window_dims));
  HK_TRY(opt_i64s(c, v, "scatter_dims_to_operand_dims", &d->scatter_dims_to_operand_dims));
  HK_TRY(opt_i64s(c, v, "input_batching_dims", &d->input_batching_dims));
  HK_TRY(opt_i64s(c, v, "scatter_indices_batching_dims", &d->scatter_indices_batching_dims));
  HK_TRY(req_i64(c, v, "index_vector_dim", 0, &d->index_vector_dim));
  *out = d;
  return NULL;
}

/* ---- slice, padding, pairs ------------------------------------------------ */

json_object *hkj_slice_to_json(int n, const hk_slice_dim *s) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++)
    json_object_array_add(a, int_row(3, (const int64_t[]){s[k].start, s[k].limit, s[k].stride}));
  return a;
}

hk_status *hkj_slice_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_slice_dim **out) {
  int64_t *rows;
  HK_TRY(int_rows(c, v, 3, "[start, limit, stride]", n, &rows));
  hk_slice_dim *s = hk_alloc(c->m, ((size_t)*n + 1) * sizeof *s);
  for (int k = 0; k < *n; k++) s[k] = (hk_slice_dim){rows[3 * k], rows[3 * k + 1], rows[3 * k + 2]};
  *out = s;
  return NULL;
}

json_object *hkj_padding_to_json(int n, const hk_pad_dim *p) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++)
    json_object_array_add(a, int_row(3, (const int64_t[]){p[k].lo, p[k].hi, p[k].interior}));
  return a;
}

hk_status *hkj_padding_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_pad_dim **out) {
  int64_t *rows;
  HK_TRY(int_rows(c, v, 3, "[lo, hi, interior]", n, &rows));
  hk_pad_dim *p = hk_alloc(c->m, ((size_t)*n + 1) * sizeof *p);
  for (int k = 0; k < *n; k++) p[k] = (hk_pad_dim){rows[3 * k], rows[3 * k + 1], rows[3 * k + 2]};
  *out = p;
  return NULL;
}

json_object *hkj_pairs_to_json(int n, const hk_pair *p) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, int_row(2, (const int64_t[]){p[k].a, p[k].b}));
  return a;
}

hk_status *hkj_pairs_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_pair **out) {
  int64_t *rows;
  HK_TRY(int_rows(c, v, 2, "[source, target]", n, &rows));
  hk_pair *p = hk_alloc(c->m, ((size_t)*n + 1) * sizeof *p);
  for (int k = 0; k < *n; k++) p[k] = (hk_pair){rows[2 * k], rows[2 * k + 1]};
  *out = p;
  return NULL;
}

/* ---- replica groups --------------------------------------------------------- */

static json_object *iota_to_json(const hk_iota *iota) {
  json_object *o = json_object_new_object();
  hkj_put(o, "dims", hkj_new_i64s(iota->n_dims, iota->dims));
  hkj_put(o, "reshape_dims", hkj_new_i64s(iota->n_reshape_dims, iota->reshape_dims));
  json_object *perm = json_object_new_array_ext(iota->n_reshape_dims);
  for (int k = 0; k < iota->n_reshape_dims; k++) json_object_array_add(perm, json_object_new_int(iota->perm[k]));
  hkj_put(o, "perm", perm);
  return o;
}

json_object *hkj_replica_groups_to_json(const hk_replica_groups *g) {
  json_object *o = json_object_new_object();
  json_object *groups = json_object_new_array_ext(g->n_groups);
  for (int k = 0; k < g->n_groups; k++)
    json_object_array_add(groups, hkj_new_i64s(g->group_start[k + 1] - g->group_start[k],
                                               g->ids + g->group_start[k]));
  hkj_put(o, "groups", groups);
  if (g->iota) hkj_put(o, "iota", iota_to_json(g->iota));
  return o;
}

/* Product of dims, or -1 past 2^24 devices (the HLO parser's bound). */
#define MAX_GROUP_DEVICES (INT64_C(1) << 24)
static int64_t bounded_product(const hk_i64s *d) {
  int64_t p = 1;
  for (int k = 0; k < d->n; k++) {
    if (d->v[k] < 0 || (d->v[k] && p > MAX_GROUP_DEVICES / d->v[k])) return -1;
    p *= d->v[k];
  }
  return p;
}

static hk_status *iota_perm(hkj_ctx *c, json_object *v, int n, int32_t **out) {
  hk_i64s p;
  HK_TRY(opt_i64s(c, v, "perm", &p));
  int32_t *perm = hk_alloc(c->m, ((size_t)n + 1) * sizeof *perm);
  bool seen[HK_MAX_RANK] = {false};
  if (!hkj_get(v, "perm")) {
    for (int k = 0; k < n; k++) perm[k] = k;
    *out = perm;
    return NULL;
  }
  if (p.n != n) return hkj_err_at(c, "perm", "has %d entries, reshape_dims has %d", (int)p.n, n);
  for (int k = 0; k < n; k++) {
    if (p.v[k] < 0 || p.v[k] >= n || seen[p.v[k]])
      return hkj_err_at(c, "perm", "is not a permutation of the reshape dims");
    seen[p.v[k]] = true;
    perm[k] = (int32_t)p.v[k];
  }
  *out = perm;
  return NULL;
}

static hk_status *iota_from_json(hkj_ctx *c, json_object *v, hk_iota **out, int64_t *count) {
  static const char *const keys[] = {"dims", "reshape_dims", "perm", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_i64s dims, reshape;
  if (!hkj_get(v, "dims")) return hkj_err(c, "missing key 'dims'");
  HK_TRY(opt_i64s(c, v, "dims", &dims));
  if (dims.n != 2) return hkj_err_at(c, "dims", "replica groups need [num_groups, group_size]");
  int64_t n = bounded_product(&dims);
  if (n < 0) return hkj_err_at(c, "dims", "too many devices");
  if (hkj_get(v, "reshape_dims")) {
    HK_TRY(opt_i64s(c, v, "reshape_dims", &reshape));
  } else {   /* [n] */
    int64_t *r = hk_alloc(c->m, sizeof *r);
    r[0] = n;
    reshape = (hk_i64s){1, r};
  }
  if (reshape.n < 1 || reshape.n > HK_MAX_RANK) return hkj_err_at(c, "reshape_dims", "bad rank");
  if (bounded_product(&reshape) != n)
    return hkj_err_at(c, "reshape_dims", "product differs from the product of dims");
  hk_iota *iota = hk_alloc(c->m, sizeof *iota);
  int32_t *perm = NULL;
  HK_TRY(iota_perm(c, v, reshape.n, &perm));
  *iota = (hk_iota){dims.n, dims.v, reshape.n, reshape.v, perm};
  *out = iota;
  *count = n;
  return NULL;
}

static hk_status *group_lists(hkj_ctx *c, json_object *v, hk_replica_groups *g) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX - 1) return hkj_err(c, "too many groups");
  int32_t *start = hk_alloc(c->m, (n + 1) * sizeof *start);
  hk_i64s *rows = malloc((n + 1) * sizeof *rows);
  hk_status *st = NULL;
  int64_t total = 0;
  for (size_t k = 0; k < n && !st; k++) {
    size_t saved = hkj_push_index(c, k);
    st = hkj_i64s(c, json_object_array_get_idx(v, k), &rows[k]);
    hkj_pop(c, saved);
    total += st ? 0 : rows[k].n;
    if (total > INT32_MAX) st = hkj_err(c, "too many ids");
  }
  int64_t *ids = st ? NULL : hk_alloc(c->m, ((size_t)total + 1) * sizeof *ids);
  for (size_t k = 0, at = 0; !st && k < n; at += (size_t)rows[k].n, k++) {
    start[k] = (int32_t)at;
    memcpy(ids + at, rows[k].v, (size_t)rows[k].n * sizeof *ids);
    start[k + 1] = (int32_t)(at + (size_t)rows[k].n);
  }
  free(rows);
  if (st) return st;
  g->n_groups = (int32_t)n;
  g->group_start = start;
  g->ids = ids;
  return NULL;
}

static hk_status *groups_from_iota(hkj_ctx *c, json_object *v, hk_replica_groups *g) {
  hk_iota *iota = NULL;
  int64_t n = 0;
  size_t saved = hkj_push_key(c, "iota");
  hk_status *st = iota_from_json(c, v, &iota, &n);
  hkj_pop(c, saved);
  if (st) return st;
  int64_t *ids = hk_alloc(c->m, ((size_t)n + 1) * sizeof *ids);
  hk_iota_expand(iota, ids);
  int32_t *start = hk_alloc(c->m, ((size_t)iota->dims[0] + 1) * sizeof *start);
  for (int64_t k = 0; k <= iota->dims[0]; k++) start[k] = (int32_t)(k * iota->dims[1]);
  *g = (hk_replica_groups){(int32_t)iota->dims[0], start, ids, iota};
  return NULL;
}

static bool same_groups(const hk_replica_groups *a, const hk_replica_groups *b) {
  if (a->n_groups != b->n_groups) return false;
  for (int k = 0; k <= a->n_groups; k++)
    if (a->group_start[k] != b->group_start[k]) return false;
  return memcmp(a->ids, b->ids, (size_t)a->group_start[a->n_groups] * sizeof *a->ids) == 0;
}

hk_status *hkj_replica_groups_from_json(hkj_ctx *c, json_object *v, const hk_replica_groups **out) {
  static const char *const keys[] = {"groups", "iota", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  json_object *groups = hkj_get(v, "groups"), *iota = hkj_get(v, "iota");
  if (!groups && !iota) return hkj_err(c, "needs 'groups' or 'iota'");
  hk_replica_groups *g = hk_alloc(c->m, sizeof *g), listed = {0};
  if (groups) {
    size_t saved = hkj_push_key(c, "groups");
    hk_status *st = group_lists(c, groups, &listed);
    hkj_pop(c, saved);
    if (st) return st;
    *g = listed;
  }
  if (iota) {
    HK_TRY(groups_from_iota(c, iota, g));
    if (groups && !same_groups(g, &listed))
      return hkj_err_at(c, "groups", "does not match the groups of 'iota'");
  }
  *out = g;
  return NULL;
}

/* ---- metadata ------------------------------------------------------------- */

json_object *hkj_metadata_to_json(const hk_metadata *md) {
  json_object *o = json_object_new_object();
  if (md->op_type) hkj_put(o, "op_type", json_object_new_string(md->op_type));
  if (md->op_name) hkj_put(o, "op_name", json_object_new_string(md->op_name));
  if (md->source_file) hkj_put(o, "source_file", json_object_new_string(md->source_file));
  if (md->source_line) hkj_put(o, "source_line", json_object_new_int64(md->source_line));
  if (md->extra) hkj_put(o, "extra", json_object_new_string(md->extra));
  return o;
}

hk_status *hkj_metadata_from_json(hkj_ctx *c, json_object *v, const hk_metadata **out) {
  static const char *const keys[] = {"op_type", "op_name", "source_file", "source_line", "extra", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_metadata *md = hk_alloc(c->m, sizeof *md);
  HK_TRY(opt_str(c, v, "op_type", &md->op_type));
  HK_TRY(opt_str(c, v, "op_name", &md->op_name));
  HK_TRY(opt_str(c, v, "source_file", &md->source_file));
  HK_TRY(opt_i64(c, v, "source_line", INT64_MIN, &md->source_line));
  HK_TRY(opt_str(c, v, "extra", &md->extra));
  *out = md;
  return NULL;
}
