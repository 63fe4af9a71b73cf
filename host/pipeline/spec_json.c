/* spec_json.c - pipeline files (--pipeline=FILE.json): a JSON array of
 * {"pass": NAME, "options": {...}}, or "NAME" / "@preset" strings. */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* The text a JSON scalar stands for in pipeline syntax, or NULL. */
static char *scalar_text(json_object *v) {
  char buf[64];
  switch (json_object_get_type(v)) {
    case json_type_boolean:
      return strdup(json_object_get_boolean(v) ? "true" : "false");
    case json_type_int:
      snprintf(buf, sizeof buf, "%lld", (long long)json_object_get_int64(v));
      return strdup(buf);
    case json_type_double:
      snprintf(buf, sizeof buf, "%.17g", json_object_get_double(v));
      return strdup(buf);
    case json_type_string:
      return strdup(json_object_get_string(v));
    default:
      return NULL;
  }
}

static hk_status *kv_from_json(const char *key, json_object *v, hk_option_kv *kv) {
  kv->key = strdup(key);
  if (json_object_get_type(v) != json_type_array) {
    kv->value = scalar_text(v);
    return kv->value ? NULL
                     : hk_error(HK_INVALID_ARGUMENT, "option '%s': expected a bool, number, "
                                "string or list, got %s", key, json_object_to_json_string(v));
  }
  kv->is_list = true;
  int32_t n = (int32_t)json_object_array_length(v);
  kv->elems = calloc((size_t)(n ? n : 1), sizeof(char *));
  for (int32_t i = 0; i < n; i++) {
    kv->elems[i] = scalar_text(json_object_array_get_idx(v, (size_t)i));
    if (!kv->elems[i])
      return hk_error(HK_INVALID_ARGUMENT, "option '%s': list element %d is not a scalar",
                      key, (int)i);
    kv->n_elems = i + 1;
  }
  return NULL;
}

static hk_status *options_from_json(json_object *opts, hk_pass_spec *p) {
  if (!opts) return NULL;
  if (json_object_get_type(opts) != json_type_object)
    return hk_error(HK_INVALID_ARGUMENT, "\"options\" of pass '%s' is not an object", p->name);
  int32_t n = (int32_t)json_object_object_length(opts);
  p->kvs = calloc((size_t)(n ? n : 1), sizeof *p->kvs);
  json_object_object_foreach(opts, key, val) {
    hk_status *st = kv_from_json(key, val, &p->kvs[p->n_kvs++]);
    if (st) return hk_status_prefix(st, "pass '%s'", p->name);
  }
  return NULL;
}

static hk_pass_spec *append_spec(hk_pipeline_spec *out, const char *name) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 8;
    out->passes = realloc(out->passes, sizeof *out->passes * (size_t)out->cap);
  }
  hk_pass_spec *p = &out->passes[out->n++];
  memset(p, 0, sizeof *p);
  p->name = name ? strdup(name) : NULL;
  return p;
}

/* "name" or "@preset": pipeline syntax for one entry. */
static hk_status *entry_from_string(const char *s, const hk_module_config *cfg,
                                    hk_pipeline_spec *out) {
  hk_pipeline_spec one;
  HK_TRY(hk_pipeline_spec_parse(s, cfg, &one));
  for (int32_t i = 0; i < one.n; i++) *append_spec(out, NULL) = one.passes[i];
  out->presets = realloc(out->presets, sizeof(char *) * (size_t)(out->n_presets + one.n_presets + 1));
  for (int32_t i = 0; i < one.n_presets; i++) out->presets[out->n_presets++] = one.presets[i];
  free(one.presets);
  free(one.passes);
  return NULL;
}

static hk_status *entry_from_json(json_object *e, int idx, const hk_module_config *cfg,
                                  hk_pipeline_spec *out) {
  if (json_object_get_type(e) == json_type_string)
    return entry_from_string(json_object_get_string(e), cfg, out);
  json_object *name = NULL, *opts = NULL;
  if (json_object_get_type(e) != json_type_object ||
      !json_object_object_get_ex(e, "pass", &name) ||
      json_object_get_type(name) != json_type_string)
    return hk_error(HK_INVALID_ARGUMENT,
                    "entry %d: expected {\"pass\": NAME, \"options\": {...}}", idx);
  json_object_object_foreach(e, key, val) {
    (void)val;
    if (strcmp(key, "pass") != 0 && strcmp(key, "options") != 0)
      return hk_error(HK_INVALID_ARGUMENT, "entry %d: unknown key \"%s\" (expected "
                      "\"pass\" and \"options\")", idx, key);
  }
  json_object_object_get_ex(e, "options", &opts);
  hk_pass_spec *p = append_spec(out, json_object_get_string(name));
  return options_from_json(opts, p);
}

static hk_status *spec_from_array(json_object *arr, const hk_module_config *cfg,
                                  hk_pipeline_spec *out) {
  if (json_object_get_type(arr) != json_type_array)
    return hk_error(HK_INVALID_ARGUMENT,
                    "expected a JSON array of {\"pass\": NAME, \"options\": {...}}");
  int n = (int)json_object_array_length(arr);
  for (int i = 0; i < n; i++)
    HK_TRY(entry_from_json(json_object_array_get_idx(arr, (size_t)i), i, cfg, out));
  return NULL;
}

hk_status *hk_pipeline_spec_from_json(const char *text, size_t len, const char *filename,
                                      const hk_module_config *cfg, hk_pipeline_spec *out) {
  memset(out, 0, sizeof *out);
  json_tokener *tok = json_tokener_new();
  json_object *root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t off = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  while (off < len && isspace((unsigned char)text[off])) off++;
  if (!root || jerr != json_tokener_success || off < len) {
    if (root) json_object_put(root);
    return hk_error(HK_INVALID_ARGUMENT, "%s: offset %zu: invalid JSON: %s", filename, off,
                    jerr == json_tokener_success ? "trailing data"
                                                 : json_tokener_error_desc(jerr));
  }
  hk_status *st = spec_from_array(root, cfg, out);
  json_object_put(root);
  if (st) {
    hk_pipeline_spec_free(out);
    return hk_status_prefix(st, "%s", filename);
  }
  return NULL;
}

hk_status *hk_pipeline_spec_from_file(const char *path, const hk_module_config *cfg,
                                      hk_pipeline_spec *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return hk_error(HK_NOT_FOUND, "%s: cannot open pipeline file: %s", path,
                    strerror(errno));
  hk_buf b;
  hk_buf_init(&b);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) hk_buf_put(&b, chunk, n);
  fclose(f);
  hk_status *st = hk_pipeline_spec_from_json(b.data ? b.data : "", b.len, path, cfg, out);
  hk_buf_free(&b);
  return st;
}
