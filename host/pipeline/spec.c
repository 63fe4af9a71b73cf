/* spec.c - pipeline text: "--passes=a,b{k=v k2=[true,false]},c" and the
 * option list inside braces, with quoting and nested brackets. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

typedef struct cursor {
  const char *s;
  size_t len, pos;
} cursor;

static bool at_end(const cursor *c) { return c->pos >= c->len; }
static char peek(const cursor *c) { return at_end(c) ? '\0' : c->s[c->pos]; }

static char *dup_range(const char *s, size_t n) {
  char *r = malloc(n + 1);
  memcpy(r, s, n);
  r[n] = '\0';
  return r;
}

static bool is_sep(char ch) { return isspace((unsigned char)ch) || ch == ','; }

static void skip_seps(cursor *c) {
  while (!at_end(c) && is_sep(peek(c))) c->pos++;
}

static void skip_spaces(cursor *c) {
  while (!at_end(c) && isspace((unsigned char)peek(c))) c->pos++;
}

/* "..." with \" and \\ escapes; c is on the opening quote. */
static hk_status *read_quoted(cursor *c, char **out) {
  size_t start = c->pos++;
  char *r = malloc(c->len - c->pos + 1);
  size_t n = 0;
  while (!at_end(c) && peek(c) != '"') {
    if (peek(c) == '\\' && c->pos + 1 < c->len) c->pos++;
    r[n++] = c->s[c->pos++];
  }
  if (at_end(c)) {
    free(r);
    return hk_error(HK_INVALID_ARGUMENT, "column %zu: unterminated string", start + 1);
  }
  c->pos++;
  r[n] = '\0';
  *out = r;
  return NULL;
}

/* A bare value: up to a separator (or `stop`) outside any brackets. */
static hk_status *read_bare(cursor *c, char stop, char **out) {
  size_t start = c->pos;
  int depth = 0;
  for (; !at_end(c); c->pos++) {
    char ch = peek(c);
    if (depth == 0 && (is_sep(ch) || ch == stop)) break;
    if (ch == '{' || ch == '[' || ch == '(') depth++;
    if (ch == '}' || ch == ']' || ch == ')') {
      if (depth == 0) break;
      depth--;
    }
  }
  if (depth)
    return hk_error(HK_INVALID_ARGUMENT, "column %zu: unbalanced brackets in value", start + 1);
  *out = dup_range(c->s + start, c->pos - start);
  return NULL;
}

static hk_status *read_scalar(cursor *c, char stop, char **out) {
  return peek(c) == '"' ? read_quoted(c, out) : read_bare(c, stop, out);
}

/* [a, b, c]; c is on '['. */
static hk_status *read_list(cursor *c, hk_option_kv *kv) {
  size_t start = c->pos++;
  int32_t cap = 0;
  for (;;) {
    skip_seps(c);
    if (at_end(c))
      return hk_error(HK_INVALID_ARGUMENT, "column %zu: unterminated list", start + 1);
    if (peek(c) == ']') break;
    if (kv->n_elems == cap) {
      cap = cap ? cap * 2 : 4;
      kv->elems = realloc(kv->elems, sizeof(char *) * (size_t)cap);
    }
    HK_TRY(read_scalar(c, ']', &kv->elems[kv->n_elems]));
    kv->n_elems++;
  }
  c->pos++;
  kv->is_list = true;
  return NULL;
}

static hk_status *read_kv(cursor *c, hk_option_kv *kv) {
  size_t start = c->pos;
  while (!at_end(c) && peek(c) != '=' && !is_sep(peek(c))) c->pos++;
  if (peek(c) != '=' || c->pos == start)
    return hk_error(HK_INVALID_ARGUMENT, "column %zu: expected key=value, got '%.*s'",
                    start + 1, (int)(c->pos - start + (at_end(c) ? 0 : 1)), c->s + start);
  kv->key = dup_range(c->s + start, c->pos - start);
  c->pos++;
  if (peek(c) == '[') return read_list(c, kv);
  return read_scalar(c, '\0', &kv->value);
}

void hk_option_kvs_free(int32_t n, hk_option_kv *kvs) {
  for (int32_t i = 0; i < n; i++) {
    free(kvs[i].key);
    free(kvs[i].value);
    for (int32_t k = 0; k < kvs[i].n_elems; k++) free(kvs[i].elems[k]);
    free(kvs[i].elems);
  }
  free(kvs);
}

hk_status *hk_option_kvs_parse(const char *text, size_t len, int32_t *n_out,
                               hk_option_kv **out) {
  cursor c = {text, len, 0};
  int32_t n = 0, cap = 0;
  hk_option_kv *kvs = NULL;
  for (;;) {
    skip_seps(&c);
    if (at_end(&c)) break;
    if (n == cap) {
      cap = cap ? cap * 2 : 4;
      kvs = realloc(kvs, sizeof *kvs * (size_t)cap);
    }
    memset(&kvs[n], 0, sizeof kvs[n]);
    hk_status *st = read_kv(&c, &kvs[n++]);
    if (st) {
      hk_option_kvs_free(n, kvs);
      return st;
    }
  }
  *n_out = n;
  *out = kvs;
  return NULL;
}

/* ---- pipeline specs ----------------------------------------------------------- */

void hk_pipeline_spec_free(hk_pipeline_spec *s) {
  for (int32_t i = 0; i < s->n; i++) {
    free(s->passes[i].name);
    hk_option_kvs_free(s->passes[i].n_kvs, s->passes[i].kvs);
  }
  free(s->passes);
  for (int32_t i = 0; i < s->n_presets; i++) free(s->presets[i]);
  free(s->presets);
  memset(s, 0, sizeof *s);
}

static hk_pass_spec *spec_append(hk_pipeline_spec *s, const char *name, size_t len) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->passes = realloc(s->passes, sizeof *s->passes * (size_t)s->cap);
  }
  hk_pass_spec *p = &s->passes[s->n++];
  memset(p, 0, sizeof *p);
  p->name = dup_range(name, len);
  return p;
}

/* Offset of the '}' matching the '{' at `open`, or 0 when unbalanced. */
static size_t matching_brace(const char *s, size_t len, size_t open) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = open; i < len; i++) {
    if (quoted) {
      if (s[i] == '\\') i++;
      else if (s[i] == '"') quoted = false;
      continue;
    }
    if (s[i] == '"') quoted = true;
    else if (s[i] == '{') depth++;
    else if (s[i] == '}' && --depth == 0) return i;
  }
  return 0;
}

static bool is_name_char(char ch) {
  return isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '.' || ch == '@';
}

/* Appends preset `name` (after '@') to out. */
static hk_status *append_preset(const char *name, size_t len,
                                const hk_module_config *cfg, hk_pipeline_spec *out) {
  char *pname = dup_range(name, len);
  hk_pipeline_spec pre;
  hk_status *st = hk_pipeline_preset(pname, cfg, &pre);
  free(pname);
  if (st) return st;
  for (int32_t i = 0; i < pre.n; i++) {
    hk_pass_spec *p = spec_append(out, "", 0);
    free(p->name);
    *p = pre.passes[i];
  }
  free(pre.passes);
  out->presets = realloc(out->presets, sizeof(char *) * (size_t)(out->n_presets + pre.n_presets));
  for (int32_t i = 0; i < pre.n_presets; i++) out->presets[out->n_presets++] = pre.presets[i];
  free(pre.presets);
  return NULL;
}

/* One `name`, `name{options}` or `@preset` at c. */
static hk_status *parse_one_pass(cursor *c, const hk_module_config *cfg,
                                 hk_pipeline_spec *out) {
  size_t start = c->pos;
  while (!at_end(c) && is_name_char(peek(c))) c->pos++;
  if (c->pos == start)
    return hk_error(HK_INVALID_ARGUMENT, "column %zu: expected a pass name, got '%c'",
                    start + 1, peek(c) ? peek(c) : ' ');
  if (c->s[start] == '@') return append_preset(c->s + start + 1, c->pos - start - 1, cfg, out);
  hk_pass_spec *p = spec_append(out, c->s + start, c->pos - start);
  skip_spaces(c);
  if (peek(c) != '{') return NULL;
  size_t close = matching_brace(c->s, c->len, c->pos);
  if (!close)
    return hk_error(HK_INVALID_ARGUMENT, "column %zu: '{' of pass '%s' is never closed",
                    c->pos + 1, p->name);
  hk_status *st = hk_option_kvs_parse(c->s + c->pos + 1, close - c->pos - 1, &p->n_kvs, &p->kvs);
  if (st) return hk_status_prefix(st, "options of pass '%s'", p->name);
  c->pos = close + 1;
  return NULL;
}

static hk_status *parse_pass_list(const char *text, const hk_module_config *cfg,
                                  hk_pipeline_spec *out) {
  cursor c = {text, strlen(text), 0};
  for (;;) {
    skip_spaces(&c);
    HK_TRY(parse_one_pass(&c, cfg, out));
    skip_spaces(&c);
    if (at_end(&c)) return NULL;
    if (peek(&c) != ',')
      return hk_error(HK_INVALID_ARGUMENT, "column %zu: expected ',' between passes, got '%c'",
                      c.pos + 1, peek(&c));
    c.pos++;
  }
}

hk_status *hk_pipeline_spec_parse(const char *text, const hk_module_config *cfg,
                                  hk_pipeline_spec *out) {
  memset(out, 0, sizeof *out);
  while (isspace((unsigned char)*text)) text++;
  if (!*text) return NULL;   /* the empty pipeline */
  hk_status *st = parse_pass_list(text, cfg, out);
  if (st) {
    hk_pipeline_spec_free(out);
    return hk_status_prefix(st, "--passes");
  }
  return NULL;
}
