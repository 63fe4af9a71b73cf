/* json_attrs.c - the instruction attribute table: each JSON attribute key with its exporter and importer. */
#include <stddef.h>
#include <string.h>

#include "json/json_internal.h"

/* Plain fields of hk_attrs are described by kind and offset; everything
 * else has its own pair of functions. */
typedef enum attr_kind { A_I64, A_BOOL, A_STR, A_I64S, A_CUSTOM } attr_kind;

typedef struct attr_desc attr_desc;
/* Adds the attribute to obj when present on i. */
typedef void (*attr_export)(const hk_instr *i, json_object *obj, const attr_desc *d);
typedef hk_status *(*attr_import)(hkj_ctx *c, hk_instr *i, json_object *v);

struct attr_desc {
  const char *key;
  attr_kind kind;
  size_t off;
  attr_export exp;
  attr_import imp;
};

#define FIELD(i, d, type) ((type *)((char *)(i)->attrs + (d)->off))

/* ---- plain fields ------------------------------------------------------------ */

static void export_plain(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (!i->attrs) return;
  switch (d->kind) {
    case A_I64: {
      int64_t v = *FIELD(i, d, const int64_t);
      if (v) hkj_put(obj, d->key, json_object_new_int64(v));
      break;
    }
    case A_BOOL:
      if (*FIELD(i, d, const bool)) hkj_put(obj, d->key, json_object_new_boolean(true));
      break;
    case A_STR: {
      const char *s = *FIELD(i, d, const char *const);
      if (s) hkj_put(obj, d->key, json_object_new_string(s));
      break;
    }
    case A_I64S: {
      const hk_i64s *l = FIELD(i, d, const hk_i64s);
      if (l->n || l->v) hkj_put(obj, d->key, hkj_new_i64s(l->n, l->v));
      break;
    }
    case A_CUSTOM: break;
  }
}

static hk_status *import_plain(hkj_ctx *c, hk_instr *i, json_object *v, const attr_desc *d) {
  hk_attrs *a = hk_instr_attrs(i);
  char *at = (char *)a + d->off;
  switch (d->kind) {
    case A_I64: return hkj_i64(c, v, (int64_t *)at);
    case A_BOOL: return hkj_bool(c, v, (bool *)at);
    case A_STR: return hkj_str(c, v, (const char **)at);
    case A_I64S: return hkj_i64s(c, v, (hk_i64s *)at);
    case A_CUSTOM: break;
  }
  return hkj_err(c, "internal: no importer");
}

/* ---- instruction fields: dimensions, sharding --------------------------------- */

static void export_dims(const hk_instr *i, json_object *obj, const attr_desc *d) {
  (void)d;
  if (!i->n_dims && !i->dims) return;
  if (i->opcode == HK_OP_IOTA && i->n_dims == 1)
    hkj_put(obj, "iota_dimension", json_object_new_int64(i->dims[0]));
  else
    hkj_put(obj, "dimensions", hkj_new_i64s(i->n_dims, i->dims));
}

static hk_status *import_dims(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_i64s d;
  HK_TRY(hkj_i64s(c, v, &d));
  hk_instr_set_dims(i, d.n, d.v);
  return NULL;
}

static hk_status *import_iota_dim(hkj_ctx *c, hk_instr *i, json_object *v) {
  int64_t d;
  HK_TRY(hkj_i64_range(c, v, 0, HK_MAX_RANK - 1, &d));
  hk_instr_set_dims(i, 1, &d);
  return NULL;
}

static void export_sharding(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->sharding) hkj_put(obj, d->key, hkj_new_sharding(i->sharding));
}

static hk_status *import_sharding(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_sharding(c, v, &i->sharding);
}

/* ---- numbers that are meaningful at zero for their opcode ---------------------- */

static void export_parameter_number(const hk_instr *i, json_object *obj, const attr_desc *d) {
  int64_t n = i->attrs ? i->attrs->parameter_number : 0;
  if (n || i->opcode == HK_OP_PARAMETER) hkj_put(obj, d->key, json_object_new_int64(n));
}

static hk_status *import_parameter_number(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_i64_range(c, v, 0, INT32_MAX, &hk_instr_attrs(i)->parameter_number);
}

static void export_tuple_index(const hk_instr *i, json_object *obj, const attr_desc *d) {
  int64_t n = i->attrs ? i->attrs->tuple_index : 0;
  if (n || i->opcode == HK_OP_GET_TUPLE_ELEMENT) hkj_put(obj, d->key, json_object_new_int64(n));
}

static hk_status *import_tuple_index(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_i64_range(c, v, 0, INT32_MAX, &hk_instr_attrs(i)->tuple_index);
}

/* ---- literal ----------------------------------------------------------------- */

static void export_literal(const hk_instr *i, json_object *obj, const attr_desc *d) {
  (void)d;
  if (!i->attrs || !i->attrs->literal) return;
  json_object *lit = hkj_literal_to_json(i->attrs->literal);
  if (lit)
    hkj_put(obj, "literal", lit);
  else
    hkj_put(obj, "elided", json_object_new_boolean(true));
}

static hk_status *import_literal(hkj_ctx *c, hk_instr *i, json_object *v) {
  if (!v) return hkj_err(c, "null literal (use \"elided\": true)");
  hk_attrs *a = hk_instr_attrs(i);
  if (a->literal) return hkj_err(c, "both 'literal' and 'elided' given");
  return hkj_literal_from_json(c, v, i->shape, &a->literal);
}

static hk_status *import_elided(hkj_ctx *c, hk_instr *i, json_object *v) {
  bool elided;
  HK_TRY(hkj_bool(c, v, &elided));
  if (!elided) return hkj_err(c, "only \"elided\": true is meaningful");
  hk_attrs *a = hk_instr_attrs(i);
  if (a->literal) return hkj_err(c, "both 'literal' and 'elided' given");
  return hkj_literal_from_json(c, NULL, i->shape, &a->literal);
}

/* ---- comparison ---------------------------------------------------------------- */

static const char *const cmp_dirs[] = {"", "EQ", "NE", "LT", "LE", "GT", "GE"};
static const char *const cmp_types[] = {"", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};

static void export_comparison(const hk_instr *i, json_object *obj, const attr_desc *d) {
  const hk_attrs *a = i->attrs;
  if (!a || (a->cmp_dir == HK_CMP_NONE && a->cmp_type == HK_CMPT_DEFAULT)) return;
  json_object *o = json_object_new_object();
  if (a->cmp_dir != HK_CMP_NONE && a->cmp_dir <= HK_CMP_GE)
    hkj_put(o, "direction", json_object_new_string(cmp_dirs[a->cmp_dir]));
  if (a->cmp_type != HK_CMPT_DEFAULT && a->cmp_type <= HK_CMPT_UNSIGNED)
    hkj_put(o, "type", json_object_new_string(cmp_types[a->cmp_type]));
  hkj_put(obj, d->key, o);
}

static hk_status *enum_from_json(hkj_ctx *c, json_object *v, const char *key, const char *const *names,
                                 int n, uint8_t *out) {
  size_t saved = hkj_push_key(c, key);
  const char *s;
  size_t len;
  hk_status *st = hkj_str_raw(c, v, &s, &len);
  for (int k = 1; !st && k < n; k++)
    if (strcmp(s, names[k]) == 0) {
      *out = (uint8_t)k;
      hkj_pop(c, saved);
      return NULL;
    }
  if (!st) st = hkj_err(c, "unknown value '%s'", s);
  hkj_pop(c, saved);
  return st;
}

static hk_status *import_comparison(hkj_ctx *c, hk_instr *i, json_object *v) {
  static const char *const keys[] = {"direction", "type", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  hk_attrs *a = hk_instr_attrs(i);
  json_object *f;
  if ((f = hkj_get(v, "direction"))) HK_TRY(enum_from_json(c, f, "direction", cmp_dirs, 7, &a->cmp_dir));
  if ((f = hkj_get(v, "type"))) HK_TRY(enum_from_json(c, f, "type", cmp_types, 5, &a->cmp_type));
  return NULL;
}

/* ---- structured attributes (converters in json_dnums.c) ------------------------ */

static void export_window(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->window) hkj_put(obj, d->key, hkj_window_to_json(i->attrs->window));
}
static hk_status *import_window(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_window_from_json(c, v, &hk_instr_attrs(i)->window);
}

static void export_conv(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->conv) hkj_put(obj, d->key, hkj_conv_to_json(i->attrs->conv));
}
static hk_status *import_conv(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_conv_from_json(c, v, &hk_instr_attrs(i)->conv);
}

static void export_dot(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->dot) hkj_put(obj, d->key, hkj_dot_to_json(i->attrs->dot));
}
static hk_status *import_dot(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_dot_from_json(c, v, &hk_instr_attrs(i)->dot);
}

static void export_gather(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->gather) hkj_put(obj, d->key, hkj_gather_to_json(i->attrs->gather));
}
static hk_status *import_gather(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_gather_from_json(c, v, &hk_instr_attrs(i)->gather);
}

static void export_scatter(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->scatter) hkj_put(obj, d->key, hkj_scatter_to_json(i->attrs->scatter));
}
static hk_status *import_scatter(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_scatter_from_json(c, v, &hk_instr_attrs(i)->scatter);
}

static void export_slice(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && (i->attrs->n_slice || i->attrs->slice))
    hkj_put(obj, d->key, hkj_slice_to_json(i->attrs->n_slice, i->attrs->slice));
}
static hk_status *import_slice(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_slice_from_json(c, v, &a->n_slice, &a->slice);
}

static void export_padding(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && (i->attrs->n_pad || i->attrs->pad))
    hkj_put(obj, d->key, hkj_padding_to_json(i->attrs->n_pad, i->attrs->pad));
}
static hk_status *import_padding(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_padding_from_json(c, v, &a->n_pad, &a->pad);
}

static void export_replica_groups(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->replica_groups)
    hkj_put(obj, d->key, hkj_replica_groups_to_json(i->attrs->replica_groups));
}
static hk_status *import_replica_groups(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_replica_groups_from_json(c, v, &hk_instr_attrs(i)->replica_groups);
}

static void export_pairs(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && (i->attrs->n_source_target_pairs || i->attrs->source_target_pairs))
    hkj_put(obj, d->key,
            hkj_pairs_to_json(i->attrs->n_source_target_pairs, i->attrs->source_target_pairs));
}
static hk_status *import_pairs(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_pairs_from_json(c, v, &a->n_source_target_pairs, &a->source_target_pairs);
}

static void export_metadata(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->metadata) hkj_put(obj, d->key, hkj_metadata_to_json(i->attrs->metadata));
}
static hk_status *import_metadata(hkj_ctx *c, hk_instr *i, json_object *v) {
  return hkj_metadata_from_json(c, v, &hk_instr_attrs(i)->metadata);
}

/* ---- lists and strings ------------------------------------------------------------ */

static void export_frontend(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && (i->attrs->n_frontend_attributes || i->attrs->frontend_attributes))
    hkj_put(obj, d->key, hkj_new_kvs(i->attrs->n_frontend_attributes, i->attrs->frontend_attributes));
}
static hk_status *import_frontend(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_kvs(c, v, &a->n_frontend_attributes, &a->frontend_attributes);
}

static void export_precision(const hk_instr *i, json_object *obj, const attr_desc *d) {
  const hk_attrs *a = i->attrs;
  if (!a || (!a->n_operand_precision && !a->operand_precision)) return;
  json_object *arr = json_object_new_array_ext(a->n_operand_precision);
  for (int k = 0; k < a->n_operand_precision; k++)
    json_object_array_add(arr, json_object_new_string(a->operand_precision[k]));
  hkj_put(obj, d->key, arr);
}

static hk_status *import_precision(hkj_ctx *c, hk_instr *i, json_object *v) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX) return hkj_err(c, "array too long");
  const char **names = hk_alloc(c->m, (n + 1) * sizeof *names);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = hkj_str(c, json_object_array_get_idx(v, k), &names[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  hk_attrs *a = hk_instr_attrs(i);
  a->n_operand_precision = (int32_t)n;
  a->operand_precision = names;
  return NULL;
}

static void export_replication(const hk_instr *i, json_object *obj, const attr_desc *d) {
  const hk_attrs *a = i->attrs;
  if (a && (a->n_parameter_replication || a->parameter_replication))
    hkj_put(obj, d->key, hkj_new_bools(a->n_parameter_replication, a->parameter_replication));
}
static hk_status *import_replication(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_bools(c, v, &a->n_parameter_replication, &a->parameter_replication);
}

/* api_version: XLA's CustomCallApiVersion names (an int is accepted too). */
static const char *const api_versions[] = {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                                           "API_VERSION_STATUS_RETURNING",
                                           "API_VERSION_STATUS_RETURNING_UNIFIED",
                                           "API_VERSION_TYPED_FFI"};
#define N_API_VERSIONS 5

static void export_api_version(const hk_instr *i, json_object *obj, const attr_desc *d) {
  int32_t v = i->attrs ? i->attrs->api_version : 0;
  if (!v) return;
  hkj_put(obj, d->key, v > 0 && v < N_API_VERSIONS ? json_object_new_string(api_versions[v])
                                                   : json_object_new_int(v));
}

static hk_status *import_api_version(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  if (!json_object_is_type(v, json_type_string)) {
    int64_t x;
    HK_TRY(hkj_i64_range(c, v, 0, INT32_MAX, &x));
    a->api_version = (int32_t)x;
    return NULL;
  }
  const char *s = json_object_get_string(v);
  for (int k = 1; k < N_API_VERSIONS; k++)
    if (!strcmp(s, api_versions[k])) {
      a->api_version = k;
      return NULL;
    }
  return hkj_err(c, "unknown API version '%s'", s);
}

/* infeed_config on infeed, outfeed_config on outfeed: one field. */
static void export_feed_config(const hk_instr *i, json_object *obj, const attr_desc *d) {
  (void)d;
  if (!i->attrs || !i->attrs->infeed_config) return;
  const char *key = i->opcode == HK_OP_OUTFEED ? "outfeed_config" : "infeed_config";
  hkj_put(obj, key, json_object_new_string(i->attrs->infeed_config));
}
static hk_status *import_feed_config(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  if (a->infeed_config) return hkj_err(c, "both infeed_config and outfeed_config given");
  return hkj_str(c, v, &a->infeed_config);
}

static void export_raw(const hk_instr *i, json_object *obj, const attr_desc *d) {
  if (i->attrs && i->attrs->n_raw) hkj_put(obj, d->key, hkj_new_raw_attrs(i->attrs->n_raw, i->attrs->raw));
}
static hk_status *import_raw(hkj_ctx *c, hk_instr *i, json_object *v) {
  hk_attrs *a = hk_instr_attrs(i);
  return hkj_raw_attrs(c, v, &a->n_raw, &a->raw);
}

/* ---- the table, in export order ------------------------------------------------------ */

#define PLAIN(key, kind, field) {key, kind, offsetof(hk_attrs, field), export_plain, NULL}
#define CUSTOM(key, exp, imp) {key, A_CUSTOM, 0, exp, imp}

static const attr_desc attr_table[] = {
    CUSTOM("parameter_number", export_parameter_number, import_parameter_number),
    CUSTOM("index", export_tuple_index, import_tuple_index),
    CUSTOM("dimensions", export_dims, import_dims),
    CUSTOM("iota_dimension", NULL, import_iota_dim),
    CUSTOM("literal", export_literal, import_literal),
    CUSTOM("elided", NULL, import_elided),
    CUSTOM("comparison", export_comparison, import_comparison),
    CUSTOM("slice", export_slice, import_slice),
    PLAIN("dynamic_slice_sizes", A_I64S, dynamic_slice_sizes),
    CUSTOM("padding", export_padding, import_padding),
    CUSTOM("window", export_window, import_window),
    CUSTOM("dim_labels", export_conv, import_conv),
    PLAIN("feature_group_count", A_I64, feature_group_count),
    PLAIN("batch_group_count", A_I64, batch_group_count),
    CUSTOM("dot_dimension_numbers", export_dot, import_dot),
    CUSTOM("gather_dimension_numbers", export_gather, import_gather),
    PLAIN("slice_sizes", A_I64S, gather_slice_sizes),
    CUSTOM("scatter_dimension_numbers", export_scatter, import_scatter),
    PLAIN("indices_are_sorted", A_BOOL, indices_are_sorted),
    PLAIN("unique_indices", A_BOOL, unique_indices),
    CUSTOM("operand_precision", export_precision, import_precision),
    CUSTOM("replica_groups", export_replica_groups, import_replica_groups),
    CUSTOM("source_target_pairs", export_pairs, import_pairs),
    PLAIN("channel_id", A_I64, channel_id),
    PLAIN("use_global_device_ids", A_BOOL, use_global_device_ids),
    PLAIN("constrain_layout", A_BOOL, constrain_layout),
    PLAIN("is_host_transfer", A_BOOL, is_host_transfer),
    PLAIN("custom_call_target", A_STR, custom_call_target),
    PLAIN("custom_call_has_side_effect", A_BOOL, custom_call_has_side_effect),
    CUSTOM("api_version", export_api_version, import_api_version),
    PLAIN("kind", A_STR, fusion_kind),
    PLAIN("is_stable", A_BOOL, is_stable),
    PLAIN("distribution", A_STR, rng_distribution),
    PLAIN("algorithm", A_STR, rng_algorithm),
    PLAIN("delta", A_I64, rng_delta),
    PLAIN("exponent_bits", A_I64, exponent_bits),
    PLAIN("mantissa_bits", A_I64, mantissa_bits),
    CUSTOM("infeed_config", export_feed_config, import_feed_config),
    CUSTOM("outfeed_config", NULL, import_feed_config),
    PLAIN("k", A_I64, k),
    PLAIN("largest", A_BOOL, largest),
    PLAIN("fft_type", A_STR, fft_type),
    PLAIN("fft_length", A_I64S, fft_length),
    PLAIN("is_composite", A_BOOL, is_composite),
    PLAIN("async_execution_thread", A_STR, async_execution_thread),
    CUSTOM("parameter_replication", export_replication, import_replication),
    CUSTOM("sharding", export_sharding, import_sharding),
    PLAIN("backend_config", A_STR, backend_config),
    CUSTOM("metadata", export_metadata, import_metadata),
    CUSTOM("frontend_attributes", export_frontend, import_frontend),
    CUSTOM("raw", export_raw, import_raw),
};

#define N_ATTRS (sizeof attr_table / sizeof attr_table[0])

static const attr_desc *find_attr(const char *key) {
  for (size_t k = 0; k < N_ATTRS; k++)
    if (attr_table[k].key[0] == key[0] && strcmp(attr_table[k].key, key) == 0) return &attr_table[k];
  return NULL;
}

void hkj_attrs_to_json(const hk_instr *i, json_object *obj) {
  for (size_t k = 0; k < N_ATTRS; k++)
    if (attr_table[k].exp) attr_table[k].exp(i, obj, &attr_table[k]);
}

bool hkj_is_attr_key(const char *key) { return find_attr(key) != NULL; }

hk_status *hkj_attr_from_json(hkj_ctx *c, hk_instr *i, const char *key, json_object *v) {
  const attr_desc *d = find_attr(key);
  if (!d) return hkj_err(c, "unknown attribute '%s'", key);
  size_t saved = hkj_push_key(c, key);
  hk_status *st = d->imp ? d->imp(c, i, v) : import_plain(c, i, v, d);
  hkj_pop(c, saved);
  return st;
}
