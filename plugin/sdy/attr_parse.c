/* attr_parse.c - a strict parser for the Shardy attribute texts XLA's sdy
 * round trip stores in frontend attributes (grammar: shardy's attrs.td and
 * parsers.cc).  Anything else is refused with the byte offset and what was
 * expected there. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

typedef struct cursor {
  const char *s, *p;
  hk_status *err;                  /* first error only */
} cursor;

static void skip_ws(cursor *c) {
  while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

static bool fail(cursor *c, const char *what) {
  if (!c->err)
    c->err = hk_error(HK_INVALID_ARGUMENT, "at offset %d: expected %s", (int)(c->p - c->s), what);
  return false;
}

/* Consumes the literal `tok` after optional whitespace. */
static bool accept(cursor *c, const char *tok) {
  skip_ws(c);
  size_t n = strlen(tok);
  if (strncmp(c->p, tok, n) != 0) return false;
  c->p += n;
  return true;
}

static bool expect(cursor *c, const char *tok) {
  if (accept(c, tok)) return true;
  char what[48];
  snprintf(what, sizeof what, "'%s'", tok);
  return fail(c, what);
}

static bool parse_int(cursor *c, int64_t *out, bool allow_negative) {
  skip_ws(c);
  const char *q = c->p;
  if (allow_negative && *q == '-') q++;
  if (!isdigit((unsigned char)*q)) return fail(c, "an integer");
  char *end;
  long long v = strtoll(c->p, &end, 10);
  c->p = end;
  *out = v;
  return true;
}

/* A quoted MLIR string: \" \\ \n \t and two-digit hex escapes. */
static bool parse_string(cursor *c, char *out, size_t cap) {
  skip_ws(c);
  if (*c->p != '"') return fail(c, "a quoted name");
  c->p++;
  size_t n = 0;
  while (*c->p && *c->p != '"') {
    char ch = *c->p++;
    if (ch == '\\') {
      char e = *c->p;
      if (e == '"' || e == '\\') ch = e, c->p++;
      else if (e == 'n') ch = '\n', c->p++;
      else if (e == 't') ch = '\t', c->p++;
      else if (isxdigit((unsigned char)e) && isxdigit((unsigned char)c->p[1])) {
        char hex[3] = {e, c->p[1], 0};
        ch = (char)strtol(hex, NULL, 16);
        c->p += 2;
      } else {
        return fail(c, "a valid escape");
      }
    }
    if (n + 1 >= cap) return fail(c, "a shorter name");
    out[n++] = ch;
  }
  if (*c->p != '"') return fail(c, "'\"' closing the name");
  c->p++;
  out[n] = 0;
  if (n == 0) return fail(c, "a non-empty name");
  return true;
}

/* A bare MLIR identifier (mesh symbol or dictionary key), or a string. */
static bool parse_symbol(cursor *c, char *out, size_t cap) {
  skip_ws(c);
  if (*c->p == '"') return parse_string(c, out, cap);
  size_t n = 0;
  if (!(isalpha((unsigned char)*c->p) || *c->p == '_')) return fail(c, "a name");
  while (isalnum((unsigned char)*c->p) || strchr("_$.", *c->p)) {
    if (*c->p == 0) break;
    if (n + 1 >= cap) return fail(c, "a shorter name");
    out[n++] = *c->p++;
  }
  out[n] = 0;
  return true;
}

static bool parse_mesh_body(cursor *c, sdy_mesh *m) {
  if (!expect(c, "<") || !expect(c, "[")) return false;
  if (!accept(c, "]")) {
    do {
      if (m->n_axes == SDY_MAX_AXES) return fail(c, "fewer mesh axes");
      sdy_axis *a = &m->axes[m->n_axes];
      if (!parse_string(c, a->name, sizeof a->name) || !expect(c, "=") ||
          !parse_int(c, &a->size, false))
        return false;
      if (a->size < 1) return fail(c, "an axis size of at least 1");
      for (int k = 0; k < m->n_axes; k++)
        if (strcmp(m->axes[k].name, a->name) == 0) return fail(c, "distinct axis names");
      m->n_axes++;
    } while (accept(c, ","));
    if (!expect(c, "]")) return false;
  }
  if (accept(c, ",")) {
    if (!expect(c, "device_ids") || !expect(c, "=") || !expect(c, "[")) return false;
    int cap = 0;
    if (!accept(c, "]")) {
      do {
        if (m->n_devices == cap) {
          cap = cap ? cap * 2 : 16;
          m->devices = realloc(m->devices, sizeof *m->devices * (size_t)cap);
          if (!m->devices) hk_out_of_memory();
        }
        if (!parse_int(c, &m->devices[m->n_devices], false)) return false;
        m->n_devices++;
      } while (accept(c, ","));
      if (!expect(c, "]")) return false;
    }
  }
  return expect(c, ">");
}

static bool parse_axis_ref(cursor *c, sdy_axis_ref *r) {
  memset(r, 0, sizeof *r);
  if (!parse_string(c, r->name, sizeof r->name)) return false;
  if (accept(c, ":")) {
    r->sub = true;
    if (!expect(c, "(") || !parse_int(c, &r->pre_size, false) || !expect(c, ")") ||
        !parse_int(c, &r->size, false))
      return false;
    if (r->pre_size < 1 || r->size < 2) return fail(c, "a sub-axis with pre-size >= 1 and size > 1");
  }
  return true;
}

static bool parse_axis_list(cursor *c, sdy_axis_ref *v, int *n) {
  if (!expect(c, "{")) return false;
  if (accept(c, "}")) return true;
  do {
    if (*n == SDY_MAX_AXES) return fail(c, "fewer axes");
    if (!parse_axis_ref(c, &v[(*n)++])) return false;
  } while (accept(c, ","));
  return expect(c, "}");
}

/* {"x", "y", ?}p1 - '?' only last, never after a bare ','. */
static bool parse_dim(cursor *c, sdy_dim *d) {
  memset(d, 0, sizeof *d);
  d->priority = -1;
  if (!expect(c, "{")) return false;
  if (accept(c, "?")) {
    d->open = true;
  } else if (!accept(c, "}")) {
    do {
      if (accept(c, "?")) {
        d->open = true;
        break;
      }
      if (d->n_axes == SDY_MAX_AXES) return fail(c, "fewer axes");
      if (!parse_axis_ref(c, &d->axes[d->n_axes++])) return false;
    } while (accept(c, ","));
  } else {
    goto priority;
  }
  if (!expect(c, "}")) return false;
priority:
  if (*c->p == 'p') {              /* no whitespace before the priority */
    c->p++;
    if (!isdigit((unsigned char)*c->p)) return fail(c, "a priority number after 'p'");
    if (!parse_int(c, &d->priority, false)) return false;
    if (!d->open && d->n_axes == 0) return fail(c, "an axis in a closed dimension with a priority");
  }
  return true;
}

static bool parse_sharding_body(cursor *c, sdy_sharding *s) {
  memset(s, 0, sizeof *s);
  if (!expect(c, "<")) return false;
  if (accept(c, "@")) {
    if (!parse_symbol(c, s->mesh_name, sizeof s->mesh_name)) return false;
  } else if (accept(c, "mesh")) {
    if (!parse_mesh_body(c, &s->inline_mesh)) return false;
  } else {
    return fail(c, "'@mesh_name' or an inline 'mesh<...>'");
  }
  if (!expect(c, ",") || !expect(c, "[")) return false;
  if (!accept(c, "]")) {
    do {
      if (s->rank == SDY_MAX_DIMS) return fail(c, "fewer dimensions");
      if (!parse_dim(c, &s->dims[s->rank++])) return false;
    } while (accept(c, ","));
    if (!expect(c, "]")) return false;
  }
  while (accept(c, ",")) {
    if (accept(c, "replicated")) {
      if (!expect(c, "=") || !parse_axis_list(c, s->replicated, &s->n_replicated)) return false;
    } else if (accept(c, "unreduced")) {
      if (!expect(c, "=") || !parse_axis_list(c, s->unreduced, &s->n_unreduced)) return false;
    } else {
      return fail(c, "'replicated=' or 'unreduced='");
    }
  }
  return expect(c, ">");
}

static hk_status *finish(cursor *c, bool ok) {
  if (ok) {
    skip_ws(c);
    if (*c->p) ok = fail(c, "the end of the attribute");
  }
  return ok ? NULL : c->err;
}

hk_status *sdy_parse_meshes(const char *text, sdy_meshes *out) {
  memset(out, 0, sizeof *out);
  cursor c = {text, text, NULL};
  bool ok = expect(&c, "{");
  if (ok && !accept(&c, "}")) {
    do {
      if (out->n == SDY_MAX_MESHES) {
        ok = fail(&c, "fewer meshes");
        break;
      }
      sdy_mesh *m = &out->m[out->n++];
      ok = parse_symbol(&c, m->name, sizeof m->name) && expect(&c, "=") &&
           expect(&c, "#sdy.mesh") && parse_mesh_body(&c, m);
    } while (ok && accept(&c, ","));
    ok = ok && expect(&c, "}");
  }
  hk_status *st = finish(&c, ok);
  if (st) sdy_meshes_free(out);
  return st;
}

hk_status *sdy_parse_sharding(const char *text, sdy_sharding *out) {
  cursor c = {text, text, NULL};
  bool ok = expect(&c, "#sdy.sharding") && parse_sharding_body(&c, out);
  hk_status *st = finish(&c, ok);
  if (st) sdy_sharding_free(out);
  return st;
}

hk_status *sdy_parse_per_value(const char *text, sdy_per_value *out) {
  memset(out, 0, sizeof *out);
  cursor c = {text, text, NULL};
  bool ok = expect(&c, "#sdy.sharding_per_value") && expect(&c, "<") && expect(&c, "[");
  if (ok && !accept(&c, "]")) {
    do {
      out->v = realloc(out->v, sizeof *out->v * (size_t)(out->n + 1));
      if (!out->v) hk_out_of_memory();
      ok = parse_sharding_body(&c, &out->v[out->n++]);
    } while (ok && accept(&c, ","));
    ok = ok && expect(&c, "]");
  }
  ok = ok && expect(&c, ">");
  hk_status *st = finish(&c, ok);
  if (st) sdy_per_value_free(out);
  return st;
}

hk_status *sdy_parse_manual_axes(const char *text, sdy_manual_axes *out) {
  memset(out, 0, sizeof *out);
  cursor c = {text, text, NULL};
  bool ok = expect(&c, "#sdy<manual_axes") && expect(&c, "{");
  if (ok && !accept(&c, "}")) {
    do {
      if (out->n == SDY_MAX_AXES) {
        ok = fail(&c, "fewer axes");
        break;
      }
      ok = parse_string(&c, out->names[out->n++], sizeof out->names[0]);
    } while (ok && accept(&c, ","));
    ok = ok && expect(&c, "}");
  }
  ok = ok && expect(&c, ">");
  return finish(&c, ok);
}

hk_status *sdy_parse_group_id(const char *text, int64_t *out) {
  cursor c = {text, text, NULL};
  bool ok = parse_int(&c, out, false);
  if (ok && accept(&c, ":")) ok = expect(&c, "i64");
  return finish(&c, ok);
}

void sdy_sharding_free(sdy_sharding *s) {
  free(s->inline_mesh.devices);
  s->inline_mesh.devices = NULL;
}

void sdy_per_value_free(sdy_per_value *pv) {
  for (int k = 0; k < pv->n; k++) sdy_sharding_free(&pv->v[k]);
  free(pv->v);
  pv->v = NULL;
  pv->n = 0;
}

void sdy_meshes_free(sdy_meshes *ms) {
  for (int k = 0; k < ms->n; k++) free(ms->m[k].devices);
  ms->n = 0;
}
