/* json_internal.h - shared pieces of the JSON exporter and importer (host/json only). */
#ifndef HLOKIT_JSON_INTERNAL_H
#define HLOKIT_JSON_INTERNAL_H

#include <json-c/json.h>

#include "hlokit/hlokit.h"

/* ---- import context: the module being built and the JSON path ----------- */

#define HKJ_PATH_CAP 512

typedef struct hkj_ctx {
  hk_module *m;
  const char *file;            /* for messages */
  char path[HKJ_PATH_CAP];     /* e.g. computations[0].instructions[3] */
  size_t plen;
  size_t comp_instrs;          /* instructions in the computation being read */
} hkj_ctx;

/* Path segments: each push returns the previous length for hkj_pop. */
size_t hkj_push_key(hkj_ctx *c, const char *key);
size_t hkj_push_index(hkj_ctx *c, size_t index);
static inline void hkj_pop(hkj_ctx *c, size_t saved) {
  c->plen = saved;
  c->path[saved] = '\0';
}

/* HK_INVALID_ARGUMENT "FILE: PATH: message". */
hk_status *hkj_err(hkj_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, with ".key" appended to the path for this message only. */
hk_status *hkj_err_at(hkj_ctx *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The JSON type name of v, for messages ("null", "string", ...). */
const char *hkj_type_name(json_object *v);

/* ---- value readers: the path already names the value ----------------- */
hk_status *hkj_object(hkj_ctx *c, json_object *v);     /* must be an object */
hk_status *hkj_array(hkj_ctx *c, json_object *v, size_t *n);
hk_status *hkj_i64(hkj_ctx *c, json_object *v, int64_t *out);
hk_status *hkj_i64_range(hkj_ctx *c, json_object *v, int64_t lo, int64_t hi, int64_t *out);
hk_status *hkj_bool(hkj_ctx *c, json_object *v, bool *out);
/* Interned in c->m. */
hk_status *hkj_str(hkj_ctx *c, json_object *v, const char **out);
/* Borrowed from v (valid while v lives). */
hk_status *hkj_str_raw(hkj_ctx *c, json_object *v, const char **out, size_t *len);
/* Integer array into the module arena (v non-NULL even when empty). */
hk_status *hkj_i64s(hkj_ctx *c, json_object *v, hk_i64s *out);
hk_status *hkj_bools(hkj_ctx *c, json_object *v, int32_t *n, const bool **out);
/* Whether key is in the NULL-terminated list. */
bool hkj_key_listed(const char *const *keys, const char *key);
/* Refuses keys of obj that are not in the NULL-terminated list. */
hk_status *hkj_known_keys(hkj_ctx *c, json_object *obj, const char *const *keys);
/* obj[key], or NULL if absent. */
json_object *hkj_get(json_object *obj, const char *key);
/* Required obj[key]: error "missing key" when absent. */
hk_status *hkj_need(hkj_ctx *c, json_object *obj, const char *key, json_object **out);

/* Sharding text -> interned sharding (whole string must be consumed). */
hk_status *hkj_sharding(hkj_ctx *c, json_object *v, const hk_sharding **out);
/* Key/value object (strings) -> ordered hk_kv array. */
hk_status *hkj_kvs(hkj_ctx *c, json_object *v, int32_t *n, const hk_kv **out);
/* [{name, value}] -> hk_raw_attr array. */
hk_status *hkj_raw_attrs(hkj_ctx *c, json_object *v, int32_t *n, const hk_raw_attr **out);

/* ---- export helpers ----------------------------------------------------- */
/* obj[key] = val with a constant, known-new key. */
void hkj_put(json_object *obj, const char *key, json_object *val);
json_object *hkj_new_i64s(int n, const int64_t *v);
json_object *hkj_new_bools(int n, const bool *v);
json_object *hkj_new_sharding(const hk_sharding *s);
json_object *hkj_new_kvs(int n, const hk_kv *kv);
json_object *hkj_new_raw_attrs(int n, const hk_raw_attr *raw);
/* A string, or JSON null for a NULL pointer. */
json_object *hkj_new_str(const char *s);

/* Pretty output (json_pretty.c): objects one key per line, arrays holding
 * no objects on one line; ends with a newline. */
void hkj_write_pretty(json_object *doc, hk_buf *out);

/* ---- shapes (json_shape.c) --------------------------------------------- */
json_object *hkj_shape_to_json(const hk_shape *s);
hk_status *hkj_shape_from_json(hkj_ctx *c, json_object *v, const hk_shape **out);

/* ---- literals (json_literal.c) ----------------------------------------- */
/* NULL for an elided literal. */
json_object *hkj_literal_to_json(const hk_literal *l);
/* v NULL means elided. */
hk_status *hkj_literal_from_json(hkj_ctx *c, json_object *v, const hk_shape *shape,
                                 hk_literal **out);

/* ---- floating point elements (json_number.c) ----------------------------- */
/* One element of a real floating type, from its raw bits (the storage
 * bytes of hk_literal). */
json_object *hkj_float_to_json(hk_prim p, uint64_t bits);
hk_status *hkj_float_from_json(hkj_ctx *c, json_object *v, hk_prim p, uint64_t *bits);

/* ---- instruction attributes (json_attrs.c, json_dnums.c) ----------------- */
/* Adds every attribute present on i to obj (after name/opcode/shape/operands). */
void hkj_attrs_to_json(const hk_instr *i, json_object *obj);
/* True if key is an attribute key this schema knows. */
bool hkj_is_attr_key(const char *key);
/* Sets the attribute `key` of i from v (phase one: everything except
 * references to other instructions or computations). */
hk_status *hkj_attr_from_json(hkj_ctx *c, hk_instr *i, const char *key, json_object *v);

/* Structured attributes (json_dnums.c), both directions. */
json_object *hkj_window_to_json(const hk_window *w);
hk_status *hkj_window_from_json(hkj_ctx *c, json_object *v, const hk_window **out);
json_object *hkj_conv_to_json(const hk_conv_dnums *d);
hk_status *hkj_conv_from_json(hkj_ctx *c, json_object *v, const hk_conv_dnums **out);
json_object *hkj_dot_to_json(const hk_dot_dnums *d);
hk_status *hkj_dot_from_json(hkj_ctx *c, json_object *v, const hk_dot_dnums **out);
json_object *hkj_gather_to_json(const hk_gather_dnums *d);
hk_status *hkj_gather_from_json(hkj_ctx *c, json_object *v, const hk_gather_dnums **out);
json_object *hkj_scatter_to_json(const hk_scatter_dnums *d);
hk_status *hkj_scatter_from_json(hkj_ctx *c, json_object *v, const hk_scatter_dnums **out);
json_object *hkj_slice_to_json(int n, const hk_slice_dim *s);
hk_status *hkj_slice_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_slice_dim **out);
json_object *hkj_padding_to_json(int n, const hk_pad_dim *p);
hk_status *hkj_padding_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_pad_dim **out);
json_object *hkj_replica_groups_to_json(const hk_replica_groups *g);
hk_status *hkj_replica_groups_from_json(hkj_ctx *c, json_object *v,
                                        const hk_replica_groups **out);
json_object *hkj_pairs_to_json(int n, const hk_pair *p);
hk_status *hkj_pairs_from_json(hkj_ctx *c, json_object *v, int32_t *n, const hk_pair **out);
json_object *hkj_metadata_to_json(const hk_metadata *md);
hk_status *hkj_metadata_from_json(hkj_ctx *c, json_object *v, const hk_metadata **out);

#endif
