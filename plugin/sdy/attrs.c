/* attrs.c - reading and writing frontend attributes (module and
 * instruction key/value lists), and errors that name where bad Shardy
 * text was found. */
#include <string.h>

#include "sdy.h"

const char *sdy_attr_get(int n, const hk_kv *kvs, const char *key) {
  for (int k = 0; k < n; k++)
    if (strcmp(kvs[k].key, key) == 0) return kvs[k].value;
  return NULL;
}

const char *sdy_instr_attr(const hk_instr *i, const char *key) {
  return i->attrs ? sdy_attr_get(i->attrs->n_frontend_attributes, i->attrs->frontend_attributes, key)
                  : NULL;
}

/* The list is copied before it changes: other instructions (clones) may
 * share the array. */
void sdy_kv_set(hk_module *m, int32_t *n, const hk_kv **kvs, const char *key,
                const char *value) {
  hk_kv *out = hk_alloc(m, sizeof *out * (size_t)(*n + 1));
  int32_t w = 0;
  bool done = false;
  for (int32_t k = 0; k < *n; k++) {
    if (strcmp((*kvs)[k].key, key) != 0) {
      out[w++] = (*kvs)[k];
    } else if (value && !done) {
      out[w].key = (*kvs)[k].key;
      out[w++].value = hk_intern_cstr(m, value);
      done = true;
    }
  }
  if (value && !done) {
    out[w].key = hk_intern_cstr(m, key);
    out[w++].value = hk_intern_cstr(m, value);
  }
  *n = w;
  *kvs = w ? out : NULL;
}

void sdy_instr_attr_set(hk_instr *i, const char *key, const char *value) {
  if (!value && !sdy_instr_attr(i, key)) return;
  hk_attrs *a = hk_instr_attrs(i);
  sdy_kv_set(i->parent->module, &a->n_frontend_attributes, &a->frontend_attributes, key, value);
}

hk_status *sdy_error_at(const hk_instr *i, const char *key, hk_status *st) {
  const char *text = i && key ? sdy_instr_attr(i, key) : NULL;
  if (i && text)
    return hk_status_prefix(st, "instruction %s: %s=\"%s\"", i->name, key, text);
  if (i) return hk_status_prefix(st, "instruction %s", i->name);
  return hk_status_prefix(st, "module attribute %s", key);
}

const char *sdy_kept(const hk_instr *i, const char *what) {
  char key[96];
  snprintf(key, sizeof key, KEEP_PREFIX "%s", what);
  return sdy_instr_attr(i, key);
}

void sdy_unkeep(hk_instr *i, const char *what) {
  char key[96];
  snprintf(key, sizeof key, KEEP_PREFIX "%s", what);
  sdy_instr_attr_set(i, key, NULL);
}
