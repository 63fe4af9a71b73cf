/* metadata.c - OpMetadata text: parse ({field=value ...}), print in XLA's field order, compare and hash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/intern.h"
#include "sharding/lex.h"
#include "sharding/metadata.h"
#include "sharding/sharding_impl.h"

/* Extra fields in XLA's print order; unknown names sort after these. */
static const char *const kExtraOrder[] = {
    "source_end_line", "source_column", "source_end_column", "profile_type",
    "deduplicated_name", "preserve_layout", "scheduling_name", "stack_frame_id",
};
enum { kExtraKnown = sizeof kExtraOrder / sizeof kExtraOrder[0] };

typedef struct extra_field {
  const char *text;   /* name=value, verbatim */
  size_t len;
  int rank;           /* position in kExtraOrder, kExtraKnown for unknown */
  int seq;            /* input order */
} extra_field;

static int extra_rank(const char *name, size_t len) {
  for (int i = 0; i < kExtraKnown; i++)
    if (strlen(kExtraOrder[i]) == len && memcmp(kExtraOrder[i], name, len) == 0) return i;
  return kExtraKnown;
}

static int cmp_extra(const void *a, const void *b) {
  const extra_field *x = a, *y = b;
  if (x->rank != y->rank) return x->rank - y->rank;
  return x->seq - y->seq;
}

/* A field XLA would not print: empty string, zero, false, empty list. */
static bool value_is_default(const char *v, size_t n) {
  return (n == 2 && memcmp(v, "\"\"", 2) == 0) || (n == 1 && v[0] == '0') ||
         (n == 5 && memcmp(v, "false", 5) == 0) || (n == 2 && memcmp(v, "{}", 2) == 0);
}

static bool name_is(const char *name, size_t len, const char *lit) {
  return strlen(lit) == len && memcmp(name, lit, len) == 0;
}

/* Parses one known string field's value (absent when empty). */
static hk_status *parse_string_field(hk_cursor *c, hk_module *m, const char **dst) {
  const char *s;
  size_t n;
  HK_TRY(hk_cur_string(c, m, &s, &n));
  *dst = n ? s : NULL;
  return NULL;
}

/* Joins the extra fields, sorted into XLA's order, into one interned string. */
static const char *join_extras(hk_module *m, extra_field *ex, int n) {
  if (n == 0) return NULL;
  qsort(ex, (size_t)n, sizeof *ex, cmp_extra);
  hk_buf b;
  hk_buf_init(&b);
  for (int i = 0; i < n; i++) {
    if (i) hk_buf_put(&b, " ", 1);
    hk_buf_put(&b, ex[i].text, ex[i].len);
  }
  const char *r = hk_intern(m, b.data ? b.data : "", b.len);
  hk_buf_free(&b);
  return r;
}

/* Parses one `name=value` field into md or the extras list. */
static hk_status *parse_field(hk_cursor *c, hk_module *m, hk_metadata *md,
                              extra_field **ex, int *n_ex, int *cap_ex) {
  const char *name;
  size_t nlen;
  size_t at = c->i;
  if (!hk_cur_ident(c, &name, &nlen)) return hk_cur_error(c, "expected a metadata attribute name");
  HK_TRY(hk_cur_expect(c, '=', "after metadata attribute name"));
  if (name_is(name, nlen, "op_type")) return parse_string_field(c, m, &md->op_type);
  if (name_is(name, nlen, "op_name")) return parse_string_field(c, m, &md->op_name);
  if (name_is(name, nlen, "source_file")) return parse_string_field(c, m, &md->source_file);
  if (name_is(name, nlen, "source_line")) return hk_cur_int(c, &md->source_line);
  const char *v;
  size_t vlen;
  HK_TRY(hk_cur_skip_value(c, &v, &vlen));
  if (value_is_default(v, vlen)) return NULL;
  if (*n_ex == *cap_ex) {
    int nc = *cap_ex ? *cap_ex * 2 : 4;
    extra_field *ne = realloc(*ex, sizeof **ex * (size_t)nc);
    if (!ne) return hk_cur_error_at(at, "out of memory");
    *ex = ne;
    *cap_ex = nc;
  }
  (*ex)[*n_ex] = (extra_field){name, (size_t)(v + vlen - name), extra_rank(name, nlen), *n_ex};
  (*n_ex)++;
  return NULL;
}

/* Parses `{...}` at the cursor (offsets in errors relative to c->s). */
hk_status *hk_metadata_parse_cursor(hk_cursor *c, hk_module *m, hk_metadata *out) {
  memset(out, 0, sizeof *out);
  HK_TRY(hk_cur_expect(c, '{', "to start metadata"));
  extra_field *ex = NULL;
  int n_ex = 0, cap_ex = 0;
  hk_status *st = NULL;
  while (!st && !hk_cur_eat(c, '}')) {
    if (hk_cur_peek(c) == 0) {
      st = hk_cur_error(c, "expected '}' to end metadata");
      break;
    }
    hk_cur_eat(c, ',');
    st = parse_field(c, m, out, &ex, &n_ex, &cap_ex);
  }
  if (!st) out->extra = join_extras(m, ex, n_ex);
  free(ex);
  return st;
}

hk_status *hk_metadata_parse(hk_module *m, const char *text, size_t len,
                             hk_metadata *out, size_t *consumed) {
  hk_cursor c = {text, len, 0};
  HK_TRY(hk_metadata_parse_cursor(&c, m, out));
  if (consumed) *consumed = c.i;
  return NULL;
}

/* absl::CEscape: \n \r \t \" \' \\ by name, other bytes outside
 * [0x20, 0x7e] as three octal digits. */
static void put_cescaped(hk_buf *out, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '\n': hk_buf_put(out, "\\n", 2); break;
      case '\r': hk_buf_put(out, "\\r", 2); break;
      case '\t': hk_buf_put(out, "\\t", 2); break;
      case '"': hk_buf_put(out, "\\\"", 2); break;
      case '\'': hk_buf_put(out, "\\'", 2); break;
      case '\\': hk_buf_put(out, "\\\\", 2); break;
      default:
        if (*p < 0x20 || *p >= 0x7f) {
          char o[5];
          snprintf(o, sizeof o, "\\%03o", *p);
          hk_buf_put(out, o, 4);
        } else {
          hk_buf_put(out, (const char *)p, 1);
        }
    }
  }
}

static void put_string_field(hk_buf *out, bool *first, const char *name, const char *v) {
  if (!v || !*v) return;
  if (!*first) hk_buf_put(out, " ", 1);
  *first = false;
  hk_buf_puts(out, name);
  hk_buf_put(out, "=\"", 2);
  put_cescaped(out, v);
  hk_buf_put(out, "\"", 1);
}

void hk_metadata_print_fields(const hk_metadata *md, hk_buf *out) {
  bool first = true;
  put_string_field(out, &first, "op_type", md->op_type);
  put_string_field(out, &first, "op_name", md->op_name);
  put_string_field(out, &first, "source_file", md->source_file);
  if (md->source_line) {
    hk_buf_printf(out, "%ssource_line=%lld", first ? "" : " ", (long long)md->source_line);
    first = false;
  }
  if (md->extra && *md->extra) {
    if (!first) hk_buf_put(out, " ", 1);
    hk_buf_puts(out, md->extra);
  }
}

void hk_metadata_print(const hk_metadata *md, hk_buf *out) {
  hk_buf_put(out, "{", 1);
  hk_metadata_print_fields(md, out);
  hk_buf_put(out, "}", 1);
}

bool hk_metadata_is_empty(const hk_metadata *md) {
  return !(md->op_type && *md->op_type) && !(md->op_name && *md->op_name) &&
         !(md->source_file && *md->source_file) && !md->source_line &&
         !(md->extra && *md->extra);
}

static bool str_eq(const char *a, const char *b) {
  if (!a || !*a) return !b || !*b;
  return b && strcmp(a, b) == 0;
}

bool hk_metadata_equal(const hk_metadata *a, const hk_metadata *b) {
  return str_eq(a->op_type, b->op_type) && str_eq(a->op_name, b->op_name) &&
         str_eq(a->source_file, b->source_file) && a->source_line == b->source_line &&
         str_eq(a->extra, b->extra);
}

static uint64_t hash_str(const char *s, uint64_t h) {
  size_t n = s ? strlen(s) : 0;
  return hk_hash_combine(h, n ? hk_hash_bytes(s, n, 0x9e3779b97f4a7c15ull) : 0x51ed27ull);
}

uint64_t hk_metadata_hash(const hk_metadata *md, uint64_t h) {
  h = hash_str(md->op_type, h);
  h = hash_str(md->op_name, h);
  h = hash_str(md->source_file, h);
  h = hk_hash_combine(h, (uint64_t)md->source_line);
  return hash_str(md->extra, h);
}

static const char *copy_str(hk_module *m, const char *s) {
  return s && *s ? hk_intern_cstr(m, s) : NULL;
}

void hk_metadata_copy_into(hk_module *m, hk_metadata *dst, const hk_metadata *src) {
  dst->op_type = copy_str(m, src->op_type);
  dst->op_name = copy_str(m, src->op_name);
  dst->source_file = copy_str(m, src->source_file);
  dst->source_line = src->source_line;
  dst->extra = copy_str(m, src->extra);
}
