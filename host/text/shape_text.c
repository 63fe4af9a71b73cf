/* shape_text.c - shapes and layouts in HLO text: f32[<=4,?]{1,0:T(8,128)S(1)}, tuples, token[], opaque[]. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static const char *skip_blanks(const char *q, const char *e) {
  while (q < e && is_blank(*q)) q++;
  return q;
}

/* Whether the text at q (just after a shape's ']') starts its layout. XLA's
 * lexer skips blanks between tokens and takes '{' for a layout when an
 * integer or ':' follows it ("f32[2] {0}"), not the '{' of a computation
 * body after a signature's result; an adjacent "{}" is the empty layout. */
static bool layout_follows(const char *q, const char *e) {
  const char *b = skip_blanks(q, e);
  if (b >= e || *b != '{') return false;
  if (b == q && b + 1 < e && b[1] == '}') return true;
  const char *c = skip_blanks(b + 1, e);
  return c < e && ((*c >= '0' && *c <= '9') || *c == ':');
}

static bool prim_at(tx_parser *P, hk_prim *prim, const char **after) {
  const char *s, *a;
  size_t len;
  if (!tx_peek_ident(P, &s, &len, &a) || s != P->p) return false;
  a = skip_blanks(a, P->end); /* "s32 [4]" is one shape to XLA's lexer */
  if (a >= P->end || *a != '[') return false;
  hk_prim pr = hk_prim_from_name(s, len);
  if (pr == HK_PRIM_INVALID || pr == HK_TUPLE) return false;
  *prim = pr;
  *after = a;
  return true;
}

bool tx_at_shape(tx_parser *P) {
  int c = tx_peek(P);
  if (c == '(') return true;
  hk_prim pr;
  const char *a;
  return prim_at(P, &pr, &a);
}

/* ---- layouts ------------------------------------------------------------- */

/* Rank of an extra layout item in XLA's print order (D, T, L, #, *, E, S, SC, P, M). */
static int extra_rank(const char *item) {
  switch (item[0]) {
    case 'D': return 0;
    case 'L': return 2;
    case '#': return 3;
    case '*': return 4;
    case 'S': return 7;    /* SC */
    case 'P': return 8;
    case 'M': return 9;
  }
  return 10;
}

/* Length of the balanced "(...)" group starting at p (0 if none). */
static size_t paren_group(const char *p, const char *e) {
  if (p >= e || *p != '(') return 0;
  int d = 0;
  const char *q = p;
  for (; q < e; q++) {
    if (*q == '(') d++;
    else if (*q == ')' && --d == 0) return (size_t)(q + 1 - p);
  }
  return 0;
}

typedef struct layout_items {
  const char *s[8];
  size_t n[8];
  int k;
} layout_items;

static bool check_dim_level_types(tx_parser *P, const char *p, size_t n, int rank,
                                  int *count) {
  /* p points at "(...)" */
  int cnt = 0;
  const char *q = p + 1, *e = p + n - 1;
  while (q < e) {
    while (q < e && (*q == ' ' || *q == ',')) q++;
    if (q >= e) break;
    if (*q != 'D' && *q != 'C' && *q != 'S' && *q != 'H')
      return tx_error_at(P, q, "expected a DimLevelType abbreviation (D, C, or S)");
    bool dense = *q++ == 'D';
    /* '+': not unique, '~': not ordered, in that order; a dense
     * dimension is both (XLA's LayoutUtil::ValidateDimLevel) */
    bool unique = true, ordered = true;
    if (q < e && *q == '+') unique = false, q++;
    if (q < e && *q == '~') ordered = false, q++;
    if (dense && !(unique && ordered))
      return tx_error_at(P, q, "invalid DimLevelType/unique/ordered combination in shape");
    cnt++;
  }
  *count = cnt;
  (void)rank;
  return true;
}

static bool parse_layout(tx_parser *P, int rank, hk_layout *lay, int64_t *m2m,
                         hk_tile *tiles, int64_t *tile_dims, char **extra_out) {
  const char *open = P->p;
  P->p++; /* '{' */
  int n = 0;
  tx_skip(P);
  while (P->p < P->end && isdigit((unsigned char)*P->p)) {
    int64_t v;
    if (!tx_int(P, &v)) return false;
    if (n >= HK_MAX_RANK) return tx_error_at(P, open, "layout has too many dimensions");
    m2m[n++] = v;
    if (!tx_accept(P, ',')) break;
    tx_skip(P);
  }
  lay->n_minor_to_major = n;
  lay->minor_to_major = m2m;
  layout_items items = {.k = 0};
  int n_tiles = 0, n_tile_dims = 0;
  bool has_d = false, has_p = false;
  int n_dlt = 0;
  const char *d_at = NULL;
  if (tx_accept(P, ':')) {
    for (;;) {
      tx_skip(P);
      const char *at = P->p, *e = P->end;
      if (at >= e || *at == '}') break;
      if (*at == 'T' && at + 1 < e && at[1] == '(') {
        P->p++;
        while (tx_peek(P) == '(') {
          P->p++;
          int k = 0;
          hk_tile *t = &tiles[n_tiles];
          t->dims = tile_dims + n_tile_dims;
          while (!tx_accept(P, ')')) {
            int64_t v;
            if (tx_accept(P, '*')) v = HK_TILE_COMBINE;
            else if (!tx_int(P, &v)) return false;
            if (n_tile_dims + k >= 4 * HK_MAX_RANK) return tx_error_at(P, at, "too many tiles");
            tile_dims[n_tile_dims + k++] = v;
            if (!tx_accept(P, ',') && tx_peek(P) != ')')
              return tx_error_at(P, P->p, "expects ',' or ')' in a tile");
          }
          t->n_dims = k;
          n_tile_dims += k;
          if (++n_tiles >= HK_MAX_RANK) return tx_error_at(P, at, "too many tiles");
        }
        continue;
      }
      if ((*at == 'E' || (*at == 'S' && at + 1 < e && at[1] == '(')) && at + 1 < e &&
          at[1] == '(') {
        P->p += 2;
        int64_t v;
        if (!tx_int(P, &v) || !tx_expect(P, ')', "after a layout value")) return false;
        if (*at == 'E') lay->element_size_bits = v;
        else lay->memory_space = v;
        continue;
      }
      const char *name_end = at;
      while (name_end < e && (isalpha((unsigned char)*name_end) || *name_end == '#' ||
                              *name_end == '*'))
        name_end++;
      size_t g = paren_group(name_end, e);
      if (name_end == at || g == 0)
        return tx_error_at(P, at, "unexpected layout annotation");
      const char *q = name_end + g;
      if (name_end - at == 2 && at[0] == 'S' && at[1] == 'C') {
        size_t g2;
        while ((g2 = paren_group(q, e)) != 0) q += g2;
      }
      if (*at == 'D') {
        has_d = true;
        d_at = at;
        if (!check_dim_level_types(P, name_end, g, rank, &n_dlt)) return false;
      }
      if (*at == 'P') has_p = true;
      if (items.k >= 8) return tx_error_at(P, at, "too many layout annotations");
      items.s[items.k] = at;
      items.n[items.k++] = (size_t)(q - at);
      P->p = q;
    }
  }
  if (!tx_expect(P, '}', "at the end of a layout")) return false;
  if (has_d && n_dlt != rank)
    return tx_error_at(P, d_at, "Dimensions size is %d, but dim level types size is %d",
                       rank, n_dlt);
  if (has_d && n_tiles)
    return tx_error_at(P, open, "Layout has tiles, but is for a sparse array");
  if (has_p && !has_d)
    return tx_error_at(P, open, "Layout has physical shape, but is not for a sparse array");
  if (n_tiles) {
    lay->n_tiles = n_tiles;
    lay->tiles = tiles;
  }
  if (items.k) {
    /* canonical order, stable */
    for (int i = 1; i < items.k; i++)
      for (int j = i; j > 0 && extra_rank(items.s[j]) < extra_rank(items.s[j - 1]); j--) {
        const char *ts = items.s[j];
        size_t tn = items.n[j];
        items.s[j] = items.s[j - 1], items.n[j] = items.n[j - 1];
        items.s[j - 1] = ts, items.n[j - 1] = tn;
      }
    size_t tot = 1;
    for (int i = 0; i < items.k; i++) tot += items.n[i];
    char *x = hk_check_alloc(malloc(tot));
    size_t o = 0;
    for (int i = 0; i < items.k; i++) memcpy(x + o, items.s[i], items.n[i]), o += items.n[i];
    x[o] = 0;
    *extra_out = x;
  }
  return true;
}

/* ---- shapes ------------------------------------------------------------------ */

static bool parse_array_shape(tx_parser *P, const hk_shape **out) {
  hk_prim prim;
  const char *after;
  const char *at = P->p;
  if (!prim_at(P, &prim, &after)) {
    const char *s;
    size_t len;
    if (tx_peek_ident(P, &s, &len, NULL))
      return tx_error_at(P, at, "expects a shape, but sees '%.*s'", (int)len, s);
    return tx_error_at(P, at, "expects a shape");
  }
  P->p = after + 1;
  int64_t dims[HK_MAX_RANK];
  bool dyn[HK_MAX_RANK];
  bool any_dyn = false;
  int rank = 0;
  if (!tx_accept(P, ']')) {
    do {
      if (rank >= HK_MAX_RANK) return tx_error_at(P, at, "shape rank is too large");
      dyn[rank] = false;
      if (tx_accept(P, '?')) {
        dims[rank] = HK_UNBOUNDED_DIM;
        dyn[rank] = any_dyn = true;
      } else {
        if (tx_peek(P) == '<') {
          P->p++;
          if (!tx_expect(P, '=', "after '<' in a dynamic dimension")) return false;
          dyn[rank] = any_dyn = true;
        }
        int64_t v;
        if (!tx_int(P, &v)) return false;
        if (v < 0) return tx_error_at(P, at, "negative dimension size");
        dims[rank] = v;
      }
      rank++;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, ']', "at the end of shape dimensions")) return false;
  }
  if (!hk_prim_is_array(prim) && rank != 0)
    return tx_error_at(P, at, "%s shape must have no dimensions", hk_prim_name(prim));
  hk_shape tmpl = {.elem = (uint8_t)prim, .rank = (uint8_t)rank, .dims = dims,
                   .dynamic = any_dyn ? dyn : NULL};
  hk_layout lay;
  memset(&lay, 0, sizeof lay);
  int64_t m2m[HK_MAX_RANK];
  hk_tile tiles[HK_MAX_RANK];
  int64_t tile_dims[4 * HK_MAX_RANK];
  char *extra = NULL;
  if (layout_follows(P->p, P->end)) {
    P->p = skip_blanks(P->p, P->end);
    const char *lat = P->p;
    if (!parse_layout(P, rank, &lay, m2m, tiles, tile_dims, &extra)) {
      free(extra);
      return false;
    }
    if (hk_prim_is_array(prim) && lay.n_minor_to_major != rank &&
        !(lay.n_minor_to_major == 0 && rank == 0)) {
      free(extra);
      return tx_error_at(P, lat, "Dimensions size is %d, but minor to major size is %d.", rank,
                         lay.n_minor_to_major);
    }
    lay.extra = extra;
    if (hk_prim_is_array(prim)) tmpl.layout = &lay;
  } else if (hk_prim_is_array(prim)) {
    for (int i = 0; i < rank; i++) m2m[i] = rank - 1 - i;
    lay.n_minor_to_major = rank;
    lay.minor_to_major = m2m;
    tmpl.layout = &lay;
  }
  *out = hk_shape_intern(P->m, &tmpl);
  free(extra);
  return true;
}

/* Length of the array shape text at p (name[dims]{layout}), 0 if unsure. */
static size_t array_shape_span(const char *p, const char *e) {
  const char *q = p;
  while (q < e && *q != '[') {
    if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9'))) return 0;
    q++;
  }
  while (q < e && *q != ']') {
    if (*q == '/' || *q == '\n') return 0;
    q++;
  }
  if (q >= e) return 0;
  q++;
  if (q < e && is_blank(*q) && layout_follows(q, e)) return 0; /* a spaced layout: no cache */
  if (q < e && *q == '{') {
    int d = 0;
    for (; q < e; q++) {
      if (*q == '/' || *q == '\n') return 0;
      if (*q == '{') d++;
      else if (*q == '}' && --d == 0) break;
    }
    if (q >= e) return 0;
    q++;
  }
  return (size_t)(q - p);
}

static struct tx_shape_memo *memo_slot(tx_parser *P, const char *p) {
  int k = tx_memo_index(P, p);
  return k < 0 ? NULL : &P->shape_memo[k];
}

/* Whether the memo entry's text is at p and array_shape_span would end
 * where it does (a layout-less text must not be followed by a layout). */
static bool memo_matches(const struct tx_shape_memo *e, const char *p, const char *end) {
  if (!e->text || (size_t)(end - p) < e->len + 1 || !tx_bytes_equal(p, e->text, e->len)) return false;
  return e->text[e->len - 1] == '}' || !layout_follows(p + e->len, end);
}

bool tx_cached_shape(tx_parser *P, const hk_shape **out) {
  tx_skip(P);
  const char *st = P->p;
  struct tx_shape_memo *e = memo_slot(P, st);
  if (e && memo_matches(e, st, P->end)) {
    P->p = st + e->len;
    *out = e->shape;
    return true;
  }
  size_t span = array_shape_span(st, P->end);
  const hk_shape *hit = span ? tx_table_get(&P->shapes, st, span) : NULL;
  if (!hit) return false;
  if (e) *e = (struct tx_shape_memo){st, (uint32_t)span, hit};
  P->p = st + span;
  *out = hit;
  return true;
}

bool tx_parse_shape(tx_parser *P, const hk_shape **out) {
  if (tx_peek(P) != '(') {
    const char *st = P->p;
    size_t span = array_shape_span(st, P->end);
    if (span) {
      const hk_shape *hit = tx_table_get(&P->shapes, st, span);
      if (hit) {
        P->p = st + span;
        *out = hit;
        return true;
      }
    }
    if (!parse_array_shape(P, out)) return false;
    if (span && P->p == st + span) tx_table_put(&P->shapes, st, span, (void *)*out);
    return true;
  }
  if (!tx_enter(P)) return false;
  P->p++;
  const hk_shape *elems_stack[16];
  const hk_shape **elems = elems_stack;
  int n = 0, cap = 16;
  bool ok = true;
  if (!tx_accept(P, ')')) {
    do {
      const hk_shape *e;
      if (!(ok = tx_parse_shape(P, &e))) break;
      if (n == cap) {
        cap *= 2;
        if (elems == elems_stack) {
          elems = hk_check_alloc(malloc(cap * sizeof *elems));
          memcpy(elems, elems_stack, sizeof elems_stack);
        } else {
          elems = hk_check_alloc(realloc(elems, cap * sizeof *elems));
        }
      }
      elems[n++] = e;
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, ')', "at the end of a tuple shape");
  }
  if (ok) {
    hk_shape tmpl = {.elem = HK_TUPLE, .n_tuple = n, .tuple = elems};
    *out = hk_shape_intern(P->m, &tmpl);
  }
  if (elems != elems_stack) free(elems);
  tx_leave(P);
  return ok;
}

/* ---- printing ------------------------------------------------------------------ */

void tx_put_i64(hk_buf *b, int64_t v) {
  char tmp[24];
  char *e = tmp + sizeof tmp, *p = e;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do *--p = (char)('0' + u % 10), u /= 10;
  while (u);
  if (v < 0) *--p = '-';
  tx_put(b, p, (size_t)(e - p));
}

void tx_print_i64s(hk_buf *b, const int64_t *v, int n) {
  for (int i = 0; i < n; i++) {
    if (i) tx_put(b, ",", 1);
    tx_put_i64(b, v[i]);
  }
}

/* Prints extra layout items whose rank is in [lo, hi). */
static bool print_extra_range(const char *x, int lo, int hi, hk_buf *b, bool colon) {
  const char *p = x, *e = x + strlen(x);
  while (p < e) {
    const char *name_end = p;
    while (name_end < e && *name_end != '(') name_end++;
    const char *q = name_end;
    size_t g;
    while ((g = paren_group(q, e)) != 0) {
      q += g;
      if (!(name_end - p == 2 && p[0] == 'S' && p[1] == 'C')) break;
    }
    if (q == name_end) q = e;
    int r = extra_rank(p);
    if (r >= lo && r < hi) {
      if (!colon) tx_put(b, ":", 1), colon = true;
      tx_put(b, p, (size_t)(q - p));
    }
    p = q;
  }
  return colon;
}

static void print_layout(const hk_layout *l, hk_buf *b) {
  tx_put(b, "{", 1);
  tx_print_i64s(b, l->minor_to_major, l->n_minor_to_major);
  bool colon = false;
  if (l->extra) colon = print_extra_range(l->extra, 0, 1, b, colon);
  if (l->n_tiles) {
    if (!colon) tx_put(b, ":", 1), colon = true;
    tx_put(b, "T", 1);
    for (int i = 0; i < l->n_tiles; i++) {
      tx_put(b, "(", 1);
      for (int j = 0; j < l->tiles[i].n_dims; j++) {
        if (j) tx_put(b, ",", 1);
        if (l->tiles[i].dims[j] == HK_TILE_COMBINE) tx_put(b, "*", 1);
        else tx_put_i64(b, l->tiles[i].dims[j]);
      }
      tx_put(b, ")", 1);
    }
  }
  if (l->extra) colon = print_extra_range(l->extra, 2, 5, b, colon);
  if (l->element_size_bits) {
    if (!colon) tx_put(b, ":", 1), colon = true;
    hk_buf_printf(b, "E(%lld)", (long long)l->element_size_bits);
  }
  if (l->memory_space) {
    if (!colon) tx_put(b, ":", 1), colon = true;
    hk_buf_printf(b, "S(%lld)", (long long)l->memory_space);
  }
  if (l->extra) print_extra_range(l->extra, 7, 11, b, colon);
  tx_put(b, "}", 1);
}

static bool layout_is_trivial_scalar(const hk_layout *l) {
  return l->n_minor_to_major == 0 && l->n_tiles == 0 && !l->element_size_bits &&
         !l->memory_space && !(l->extra && *l->extra);
}

void tx_print_shape(const hk_shape *s, bool layout, hk_buf *b) {
  if (s->elem == HK_TUPLE) {
    tx_put(b, "(", 1);
    for (int i = 0; i < s->n_tuple; i++) {
      if (i) tx_put(b, ", ", 2);
      if (i && i % 5 == 0) hk_buf_printf(b, "/*index=%d*/", i);
      tx_print_shape(s->tuple[i], layout, b);
    }
    tx_put(b, ")", 1);
    return;
  }
  tx_puts(b, hk_prim_name((hk_prim)s->elem));
  tx_put(b, "[", 1);
  for (int i = 0; i < s->rank; i++) {
    if (i) tx_put(b, ",", 1);
    if (s->dynamic && s->dynamic[i]) {
      if (s->dims[i] == HK_UNBOUNDED_DIM) {
        tx_put(b, "?", 1);
        continue;
      }
      tx_put(b, "<=", 2);
    }
    tx_put_i64(b, s->dims[i]);
  }
  tx_put(b, "]", 1);
  if (layout && s->layout && hk_prim_is_array((hk_prim)s->elem) &&
      !(s->rank == 0 && layout_is_trivial_scalar(s->layout)))
    print_layout(s->layout, b);
}

void hk_print_shape(const hk_shape *s, hk_buf *out) { tx_print_shape(s, true, out); }

char *hk_shape_to_string(const hk_shape *s) {
  hk_buf b;
  hk_buf_init(&b);
  tx_print_shape(s, true, &b);
  tx_put(&b, "", 0);
  if (!b.data) return hk_check_alloc(strdup(""));
  return b.data;
}

char *tx_human_shape(const hk_shape *s) {
  hk_buf b;
  hk_buf_init(&b);
  tx_print_shape(s, false, &b);
  return b.data ? b.data : hk_check_alloc(strdup(""));
}
