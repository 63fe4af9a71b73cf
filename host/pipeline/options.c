/* options.c - typed pass options: checking declarations, turning key=value
 * pairs into typed values (errors name pass, option and accepted options),
 * and the accessors passes read them with. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

typedef struct opt_val {
  bool set;
  bool b;
  int64_t i;
  char *s;          /* string, or the chosen enum name (borrowed for enums) */
  int idx;          /* enum */
  int32_t n;        /* bool list */
  bool *list;
} opt_val;

struct hk_option_values {
  const hk_pass_desc *desc;
  opt_val *v;
};

const char *hk_option_type_name(hk_option_type t) {
  switch (t) {
    case HK_OPT_BOOL: return "bool";
    case HK_OPT_INT: return "int";
    case HK_OPT_STRING: return "string";
    case HK_OPT_ENUM: return "enum";
    case HK_OPT_BOOL_LIST: return "list of bool";
  }
  return "?";
}

/* ---- messages ------------------------------------------------------------ */

static void put_choices(hk_buf *b, const hk_option_decl *d) {
  for (int c = 0; d->choices && d->choices[c]; c++)
    hk_buf_printf(b, "%s%s", c ? "|" : "", d->choices[c]);
}

/* "a (bool), b (enum: x|y)" or "none". */
static char *accepted_options(const hk_pass_desc *desc) {
  hk_buf b;
  hk_buf_init(&b);
  if (desc->n_options == 0) hk_buf_puts(&b, "none");
  for (int32_t i = 0; i < desc->n_options; i++) {
    const hk_option_decl *d = &desc->options[i];
    hk_buf_printf(&b, "%s%s (%s", i ? ", " : "", d->name, hk_option_type_name(d->type));
    if (d->type == HK_OPT_ENUM) {
      hk_buf_puts(&b, ": ");
      put_choices(&b, d);
    }
    hk_buf_puts(&b, ")");
  }
  hk_buf_put(&b, "", 1);
  return b.data;
}

static hk_status *option_error(const hk_pass_desc *desc, const char *fmt_option,
                               const char *option, const char *detail) {
  char *acc = accepted_options(desc);
  hk_status *st = hk_error(HK_INVALID_ARGUMENT, "pass '%s': %s '%s'%s; accepted options: %s",
                           desc->name, fmt_option, option, detail, acc);
  free(acc);
  return st;
}

/* ---- scalar conversion ------------------------------------------------------ */

static bool parse_bool(const char *s, bool *out) {
  if (strcmp(s, "true") == 0) return *out = true, true;
  if (strcmp(s, "false") == 0) return *out = false, true;
  return false;
}

static bool parse_int(const char *s, int64_t *out) {
  if (!*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

static int enum_index(const hk_option_decl *d, const char *s) {
  for (int c = 0; d->choices && d->choices[c]; c++)
    if (strcmp(d->choices[c], s) == 0) return c;
  return -1;
}

/* Why text does not fit decl d, or NULL when it does (value stored). */
static const char *set_scalar(const hk_option_decl *d, const char *text, opt_val *v) {
  switch (d->type) {
    case HK_OPT_BOOL:
      return parse_bool(text, &v->b) ? NULL : "a bool (true or false)";
    case HK_OPT_INT:
      return parse_int(text, &v->i) ? NULL : "an int";
    case HK_OPT_STRING:
      free(v->s);
      v->s = strdup(text);
      return NULL;
    case HK_OPT_ENUM:
      v->idx = enum_index(d, text);
      if (v->idx < 0) return "one of the choices";
      v->s = (char *)d->choices[v->idx];
      return NULL;
    case HK_OPT_BOOL_LIST: {
      bool b;
      if (!parse_bool(text, &b)) return "a list of bool ([true,false])";
      free(v->list);
      v->list = malloc(sizeof(bool));
      v->list[0] = b;
      v->n = 1;
      return NULL;
    }
  }
  return "a known type";
}

static const char *set_list(const hk_option_decl *d, int32_t n, char *const *elems,
                            opt_val *v) {
  if (d->type != HK_OPT_BOOL_LIST) return "a single value, not a list";
  bool *list = malloc(sizeof(bool) * (size_t)(n ? n : 1));
  for (int32_t k = 0; k < n; k++) {
    if (!parse_bool(elems[k], &list[k])) {
      free(list);
      return "a list of bool ([true,false])";
    }
  }
  free(v->list);
  v->list = list;
  v->n = n;
  return NULL;
}

static const char *set_from_kv(const hk_option_decl *d, const hk_option_kv *kv, opt_val *v) {
  return kv->is_list ? set_list(d, kv->n_elems, kv->elems, v) : set_scalar(d, kv->value, v);
}

/* Applies the textual default of d (NULL = zero value). */
static const char *set_default(const hk_option_decl *d, opt_val *v) {
  if (!d->default_value) {
    if (d->type == HK_OPT_STRING) v->s = strdup("");
    if (d->type == HK_OPT_ENUM && d->choices && d->choices[0]) v->s = (char *)d->choices[0];
    return NULL;
  }
  const char *t = d->default_value;
  if (d->type != HK_OPT_BOOL_LIST || t[0] != '[') return set_scalar(d, t, v);
  int32_t n;
  hk_option_kv *kvs;
  char *spec = malloc(strlen(t) + 3);
  strcpy(spec, "x=");
  strcat(spec, t);
  hk_status *st = hk_option_kvs_parse(spec, strlen(spec), &n, &kvs);
  free(spec);
  if (st) {
    hk_status_free(st);
    return "a list of bool ([true,false])";
  }
  const char *why = set_from_kv(d, &kvs[0], v);
  hk_option_kvs_free(n, kvs);
  return why;
}

/* ---- declarations ------------------------------------------------------------ */

static void free_val(const hk_option_decl *d, opt_val *v) {
  if (d->type == HK_OPT_STRING) free(v->s);
  free(v->list);
}

hk_status *hk_option_decls_check(const hk_pass_desc *desc) {
  for (int32_t i = 0; i < desc->n_options; i++) {
    const hk_option_decl *d = &desc->options[i];
    if (!d->name || !d->name[0])
      return hk_error(HK_INVALID_ARGUMENT, "pass '%s': option %d has no name", desc->name, (int)i);
    if ((unsigned)d->type > HK_OPT_BOOL_LIST)
      return hk_error(HK_INVALID_ARGUMENT, "pass '%s': option '%s' has unknown type %d",
                      desc->name, d->name, (int)d->type);
    if (d->type == HK_OPT_ENUM && (!d->choices || !d->choices[0]))
      return hk_error(HK_INVALID_ARGUMENT, "pass '%s': enum option '%s' has no choices",
                      desc->name, d->name);
    for (int32_t j = 0; j < i; j++)
      if (strcmp(desc->options[j].name, d->name) == 0)
        return hk_error(HK_INVALID_ARGUMENT, "pass '%s': option '%s' declared twice",
                        desc->name, d->name);
    opt_val v = {0};
    const char *why = set_default(d, &v);
    free_val(d, &v);
    if (why)
      return hk_error(HK_INVALID_ARGUMENT, "pass '%s': default '%s' of option '%s' is not %s",
                      desc->name, d->default_value, d->name, why);
  }
  return NULL;
}

const char *hk_option_default_text(const hk_option_decl *d) {
  if (d->default_value) return d->default_value;
  switch (d->type) {
    case HK_OPT_BOOL: return "false";
    case HK_OPT_INT: return "0";
    case HK_OPT_STRING: return "\"\"";
    case HK_OPT_ENUM: return d->choices && d->choices[0] ? d->choices[0] : "";
    case HK_OPT_BOOL_LIST: return "[]";
  }
  return "";
}

/* ---- values ------------------------------------------------------------------- */

static int32_t decl_index(const hk_pass_desc *desc, const char *name) {
  for (int32_t i = 0; i < desc->n_options; i++)
    if (strcmp(desc->options[i].name, name) == 0) return i;
  return -1;
}

static hk_status *apply_kv(hk_option_values *vals, const hk_option_kv *kv) {
  const hk_pass_desc *desc = vals->desc;
  int32_t i = decl_index(desc, kv->key);
  if (i < 0) return option_error(desc, "unknown option", kv->key, "");
  const hk_option_decl *d = &desc->options[i];
  const char *why = set_from_kv(d, kv, &vals->v[i]);
  if (!why) {
    vals->v[i].set = true;
    return NULL;
  }
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_printf(&b, " expects %s", why);
  if (d->type == HK_OPT_ENUM) {
    hk_buf_puts(&b, " (");
    put_choices(&b, d);
    hk_buf_puts(&b, ")");
  }
  if (kv->is_list) {
    hk_buf_puts(&b, ", got '[");
    for (int32_t k = 0; k < kv->n_elems; k++) hk_buf_printf(&b, "%s%s", k ? "," : "", kv->elems[k]);
    hk_buf_puts(&b, "]'");
  } else {
    hk_buf_printf(&b, ", got '%s'", kv->value);
  }
  hk_buf_put(&b, "", 1);
  hk_status *st = option_error(desc, "option", kv->key, b.data);
  hk_buf_free(&b);
  return st;
}

hk_status *hk_option_values_new(const hk_pass_desc *desc, int32_t n_kvs,
                                const hk_option_kv *kvs, hk_option_values **out) {
  hk_option_values *vals = calloc(1, sizeof *vals);
  vals->desc = desc;
  vals->v = calloc((size_t)(desc->n_options ? desc->n_options : 1), sizeof *vals->v);
  for (int32_t i = 0; i < desc->n_options; i++)
    set_default(&desc->options[i], &vals->v[i]);   /* checked at registration */
  for (int32_t k = 0; k < n_kvs; k++) {
    hk_status *st = apply_kv(vals, &kvs[k]);
    if (st) {
      hk_option_values_free(vals);
      return st;
    }
  }
  *out = vals;
  return NULL;
}

void hk_option_values_free(hk_option_values *v) {
  if (!v) return;
  for (int32_t i = 0; i < v->desc->n_options; i++) free_val(&v->desc->options[i], &v->v[i]);
  free(v->v);
  free(v);
}

/* ---- accessors ------------------------------------------------------------------ */

static const opt_val *lookup(const hk_option_values *v, const char *name, hk_option_type t) {
  int32_t i = decl_index(v->desc, name);
  if (i < 0 || v->desc->options[i].type != t) {
    fprintf(stderr, "hlokit: pass '%s' reads option '%s' as %s, but it %s\n",
            v->desc->name, name, hk_option_type_name(t),
            i < 0 ? "is not declared" : "is declared with another type");
    abort();
  }
  return &v->v[i];
}

bool hk_opt_bool(const hk_option_values *v, const char *name) {
  return lookup(v, name, HK_OPT_BOOL)->b;
}
int64_t hk_opt_int(const hk_option_values *v, const char *name) {
  return lookup(v, name, HK_OPT_INT)->i;
}
const char *hk_opt_string(const hk_option_values *v, const char *name) {
  return lookup(v, name, HK_OPT_STRING)->s;
}
const char *hk_opt_enum(const hk_option_values *v, const char *name) {
  return lookup(v, name, HK_OPT_ENUM)->s;
}
int hk_opt_enum_index(const hk_option_values *v, const char *name) {
  return lookup(v, name, HK_OPT_ENUM)->idx;
}
int32_t hk_opt_bool_list(const hk_option_values *v, const char *name, const bool **out) {
  const opt_val *o = lookup(v, name, HK_OPT_BOOL_LIST);
  *out = o->list;
  return o->n;
}
bool hk_opt_is_set(const hk_option_values *v, const char *name) {
  int32_t i = decl_index(v->desc, name);
  return i >= 0 && v->v[i].set;
}
