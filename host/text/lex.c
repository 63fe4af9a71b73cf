/* lex.c - the HLO text lexer: a cursor over the input buffer (no tokens are allocated), name tables and error positions. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/intern.h"
#include "ir/unescape.h"
#include "text/text_internal.h"

/* ---- errors ------------------------------------------------------------ */

/* Line and column (1-based) of `at`; \n, \r\n and \r each end a line. */
static void line_col(const tx_parser *P, const char *at, int *line, int *col,
                     const char **line_start) {
  int ln = 1;
  const char *ls = P->src;
  for (const char *q = P->src; q < at && q < P->end; q++) {
    if (*q == '\n' || (*q == '\r' && (q + 1 >= P->end || q[1] != '\n'))) {
      ln++;
      ls = q + 1;
    }
  }
  *line = ln;
  *col = (int)(at - ls) + 1;
  *line_start = ls;
}

static void append_location(tx_parser *P, hk_buf *b, const char *at,
                            bool first, const char *fmt, va_list ap) {
  int line, col;
  const char *ls;
  if (at > P->end) at = P->end;
  line_col(P, at, &line, &col, &ls);
  /* the first error is named FILE:LINE:COL; each then reads as XLA's
   * parser words its errors ("was parsing LINE:COL: error: ...") */
  if (first)
    hk_buf_printf(b, "%s:%d:%d: ", P->filename ? P->filename : "<input>", line, col);
  else
    hk_buf_put(b, "\n", 1);
  hk_buf_printf(b, "was parsing %d:%d: error: ", line, col);
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  hk_buf_puts(b, msg);
  const char *le = ls;
  while (le < P->end && *le != '\n' && *le != '\r') le++;
  hk_buf_put(b, "\n", 1);
  hk_buf_put(b, ls, (size_t)(le - ls));
  hk_buf_put(b, "\n", 1);
  for (int i = 1; i < col; i++) hk_buf_put(b, " ", 1);
  hk_buf_put(b, "^", 1);
}

bool tx_error_at(tx_parser *P, const char *at, const char *fmt, ...) {
  if (P->err) return false;
  hk_buf b;
  hk_buf_init(&b);
  va_list ap;
  va_start(ap, fmt);
  append_location(P, &b, at, true, fmt, ap);
  va_end(ap);
  P->err = hk_error(HK_INVALID_ARGUMENT, "%s", b.data ? b.data : "");
  hk_buf_free(&b);
  return false;
}

void tx_note_at(tx_parser *P, const char *at, const char *fmt, ...) {
  if (!P->err) return;
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, P->err->message);
  va_list ap;
  va_start(ap, fmt);
  append_location(P, &b, at, false, fmt, ap);
  va_end(ap);
  free(P->err->message);
  P->err->message = hk_check_alloc(strdup(b.data));
  hk_buf_free(&b);
}

bool tx_enter(tx_parser *P) {
  if (++P->depth > TX_MAX_DEPTH) {
    P->depth--;
    return tx_error_at(P, P->p, "nesting is too deep");
  }
  return true;
}

/* ---- blanks and comments ----------------------------------------------- */

void tx_skip_slow(tx_parser *P) {
  const char *p = P->p, *e = P->end;
  for (;;) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
    if (p + 1 < e && p[0] == '/' && p[1] == '*') {
      const char *q = p + 2;
      while (q + 1 < e && !(q[0] == '*' && q[1] == '/')) q++;
      if (q + 1 >= e) {
        P->p = p;
        tx_error_at(P, p, "unterminated comment");
        P->p = e;
        return;
      }
      p = q + 2;
      continue;
    }
    if (p + 1 < e && p[0] == '/' && p[1] == '/') {
      while (p < e && *p != '\n' && *p != '\r') p++;
      continue;
    }
    break;
  }
  P->p = p;
}

int tx_peek(tx_parser *P) {
  tx_skip(P);
  return P->p < P->end ? (unsigned char)*P->p : 0;
}

bool tx_accept(tx_parser *P, char c) {
  if (tx_peek(P) == (unsigned char)c) {
    P->p++;
    return true;
  }
  return false;
}

bool tx_expect(tx_parser *P, char c, const char *what) {
  if (tx_accept(P, c)) return true;
  if (P->p >= P->end)
    return tx_error_at(P, P->p, "expects '%c' %s, but sees end of input", c, what);
  return tx_error_at(P, P->p, "expects '%c' %s", c, what);
}

/* 1: may start a name, 2: may continue one, 4: '-' (not part of "->"),
 * 8: may continue one and is not '-' */
static const uint8_t kNameClass[256] = {
    ['-'] = 6, ['.'] = 10, ['0'] = 10, ['1'] = 10, ['2'] = 10, ['3'] = 10, ['4'] = 10,
    ['5'] = 10, ['6'] = 10, ['7'] = 10, ['8'] = 10, ['9'] = 10, ['_'] = 11,
    ['A'] = 11, ['B'] = 11, ['C'] = 11, ['D'] = 11, ['E'] = 11, ['F'] = 11, ['G'] = 11,
    ['H'] = 11, ['I'] = 11, ['J'] = 11, ['K'] = 11, ['L'] = 11, ['M'] = 11, ['N'] = 11,
    ['O'] = 11, ['P'] = 11, ['Q'] = 11, ['R'] = 11, ['S'] = 11, ['T'] = 11, ['U'] = 11,
    ['V'] = 11, ['W'] = 11, ['X'] = 11, ['Y'] = 11, ['Z'] = 11,
    ['a'] = 11, ['b'] = 11, ['c'] = 11, ['d'] = 11, ['e'] = 11, ['f'] = 11, ['g'] = 11,
    ['h'] = 11, ['i'] = 11, ['j'] = 11, ['k'] = 11, ['l'] = 11, ['m'] = 11, ['n'] = 11,
    ['o'] = 11, ['p'] = 11, ['q'] = 11, ['r'] = 11, ['s'] = 11, ['t'] = 11, ['u'] = 11,
    ['v'] = 11, ['w'] = 11, ['x'] = 11, ['y'] = 11, ['z'] = 11,
};
static inline bool name_start(int c) { return kNameClass[c & 0xff] & 1; }

/* The end of the name characters from p ('-' counts unless it starts
 * "->"). */
static inline const char *name_end(const char *p, const char *e) {
  for (;;) {
    /* four characters a step while the text has them: the bound check
     * and the loop branch once per step (the scan was 6% of a parse) */
    while (e - p >= 4 && (kNameClass[(unsigned char)p[0]] & kNameClass[(unsigned char)p[1]] &
                          kNameClass[(unsigned char)p[2]] & kNameClass[(unsigned char)p[3]] & 8))
      p += 4;
    while (p < e && (kNameClass[(unsigned char)*p] & 8)) p++;
    if (p < e && *p == '-' && !(p + 1 < e && p[1] == '>')) {
      p++;
      continue;
    }
    return p;
  }
}

bool tx_peek_ident(tx_parser *P, const char **s, size_t *len, const char **after) {
  tx_skip(P);
  const char *p = P->p, *e = P->end;
  if (p < e && *p == '%') p++;
  if (p >= e || !name_start((unsigned char)*p)) return false;
  const char *st = p;
  p = name_end(p, e);
  *s = st;
  *len = (size_t)(p - st);
  if (after) *after = p;
  return true;
}

bool tx_ident(tx_parser *P, const char **s, size_t *len) {
  const char *after;
  if (!tx_peek_ident(P, s, len, &after)) return false;
  P->p = after;
  return true;
}

bool tx_accept_word(tx_parser *P, const char *w) {
  const char *s, *after;
  size_t len;
  if (!tx_peek_ident(P, &s, &len, &after)) return false;
  if (s != P->p || len != strlen(w) || memcmp(s, w, len) != 0) return false;
  P->p = after;
  return true;
}

/* ---- numbers, booleans, strings ------------------------------------------ */

bool tx_uint64(tx_parser *P, uint64_t *out, bool *neg) {
  tx_skip(P);
  const char *p = P->p, *e = P->end;
  *neg = false;
  if (p < e && (*p == '-' || *p == '+')) {
    *neg = *p == '-';
    p++;
  }
  if (p >= e || !isdigit((unsigned char)*p))
    return tx_error_at(P, P->p, "expects integer");
  uint64_t v = 0;
  while (p < e && isdigit((unsigned char)*p)) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return tx_error_at(P, P->p, "integer is out of range");
    v = v * 10 + d;
    p++;
  }
  P->p = p;
  *out = v;
  return true;
}

bool tx_int(tx_parser *P, int64_t *out) {
  /* Fast path: plain decimal digits. */
  const char *p = P->p, *e = P->end;
  if (p < e && isdigit((unsigned char)*p)) {
    int64_t v = 0;
    int n = 0;
    while (p < e && isdigit((unsigned char)*p) && n < 18) v = v * 10 + (*p++ - '0'), n++;
    if (p >= e || !isdigit((unsigned char)*p)) {
      P->p = p;
      *out = v;
      return true;
    }
  }
  const char *at = (tx_skip(P), P->p);
  uint64_t u;
  bool neg;
  if (!tx_uint64(P, &u, &neg)) return false;
  if (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX)
    return tx_error_at(P, at, "integer is out of range");
  *out = neg ? (int64_t)(0 - u) : (int64_t)u;
  return true;
}

bool tx_bool(tx_parser *P, bool *out) {
  if (tx_accept_word(P, "true")) return *out = true, true;
  if (tx_accept_word(P, "false")) return *out = false, true;
  return tx_error_at(P, P->p, "expects true or false");
}

bool tx_quoted_raw(tx_parser *P, const char **s, size_t *len) {
  tx_skip(P);
  const char *p = P->p, *e = P->end;
  if (p >= e || *p != '"') return tx_error_at(P, p, "expects string");
  p++;
  while (p < e && *p != '"') {
    if (*p == '\\' && p + 1 < e) p++;
    p++;
  }
  if (p >= e) return tx_error_at(P, P->p, "unterminated string");
  *s = P->p;
  *len = (size_t)(p + 1 - P->p);
  P->p = p + 1;
  return true;
}

bool tx_string(tx_parser *P, const char **s, size_t *len) {
  const char *q;
  size_t ql;
  if (!tx_quoted_raw(P, &q, &ql)) return false;
  char stackbuf[256], msg[128];
  char *buf = ql <= sizeof stackbuf ? stackbuf : hk_check_alloc(malloc(ql));
  size_t n = 0;
  /* a bad escape fails the string token, where XLA's lexer fails it */
  bool ok = hk_unescape(q + 1, ql - 2, buf, &n, msg, sizeof msg);
  if (ok) {
    *s = hk_intern(P->m, buf, n);
    *len = n;
  } else {
    tx_error_at(P, q, "%s", msg);
  }
  if (buf != stackbuf) free(buf);
  return ok;
}

const char *tx_intern(tx_parser *P, const char *s, size_t len) {
  return hk_intern(P->m, s, len);
}

/* {1,2,3} or [1,2] style integer lists into the module arena. */
bool tx_int_list(tx_parser *P, char open, char close, hk_i64s *out) {
  if (!tx_expect(P, open, "at the start of a list")) return false;
  P->n_ints = 0;
  if (!tx_accept(P, close)) {
    do {
      int64_t v;
      tx_skip(P);
      if (!tx_int(P, &v)) return false;
      if (P->n_ints == P->cap_ints) {
        P->cap_ints = P->cap_ints ? 2 * P->cap_ints : 64;
        P->ints = hk_check_alloc(realloc(P->ints, P->cap_ints * sizeof *P->ints));
      }
      P->ints[P->n_ints++] = v;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, close, "at the end of a list")) return false;
  }
  out->n = (int32_t)P->n_ints;
  out->v = P->n_ints ? hk_memdup(P->m, P->ints, P->n_ints * sizeof(int64_t)) : NULL;
  return true;
}

/* An attribute value we keep verbatim: balanced (), {}, [] and strings, up
 * to a ',' ')' or '}' at depth 0 or the end of the line. */
bool tx_raw_value(tx_parser *P, const char **s, size_t *len) {
  tx_skip(P);
  const char *st = P->p, *p = P->p, *e = P->end;
  int depth = 0;
  while (p < e) {
    char c = *p;
    if (c == '"') {
      p++;
      while (p < e && *p != '"') {
        if (*p == '\\') p++;
        p++;
      }
      if (p >= e) return tx_error_at(P, st, "unterminated string");
      p++;
      continue;
    }
    if (c == '{' || c == '(' || c == '[') depth++;
    else if (c == '}' || c == ')' || c == ']') {
      if (depth == 0) break;
      depth--;
    } else if (depth == 0 && (c == ',' || c == '\n' || c == '\r')) break;
    p++;
  }
  if (depth != 0) return tx_error_at(P, st, "unbalanced attribute value");
  while (p > st && (p[-1] == ' ' || p[-1] == '\t')) p--;
  if (p == st) return tx_error_at(P, st, "expects an attribute value");
  *s = st;
  *len = (size_t)(p - st);
  P->p = p;
  return true;
}

int tx_memo_index(const tx_parser *P, const char *p) {
  if (P->end - p < 17) return -1;
  uint64_t a, b;
  memcpy(&a, p, 8);
  memcpy(&b, p + 8, 8);
  uint64_t h = (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
  return (int)((h ^ (h >> 29)) >> 56);
}

/* ---- tables ---------------------------------------------------------------- */

static uint32_t hash_bytes(const char *s, size_t n) {
  uint64_t h = hk_hash_bytes(s, n, 0x2545f4914f6cdd1dull);
  return (uint32_t)(h ^ (h >> 32));
}

void tx_table_init(tx_table *t) { memset(t, 0, sizeof *t); }
void tx_table_free(tx_table *t) {
  free(t->slots);
  memset(t, 0, sizeof *t);
}

void *tx_table_get(const tx_table *t, const char *key, size_t len) {
  if (!t->cap) return NULL;
  uint32_t h = hash_bytes(key, len);
  for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    const tx_slot *s = &t->slots[i];
    if (!s->key) return NULL;
    if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return s->val;
  }
}

static void table_grow(tx_table *t) {
  size_t ncap = t->cap ? t->cap * 2 : 64;
  tx_slot *ns = hk_check_alloc(calloc(ncap, sizeof *ns));
  for (size_t i = 0; i < t->cap; i++) {
    tx_slot *s = &t->slots[i];
    if (!s->key) continue;
    size_t j = s->hash & (ncap - 1);
    while (ns[j].key) j = (j + 1) & (ncap - 1);
    ns[j] = *s;
  }
  free(t->slots);
  t->slots = ns;
  t->cap = ncap;
}

tx_slot *tx_table_claim(tx_table *t, const char *key, size_t len, bool *existed) {
  if ((t->n + 1) * 2 > t->cap) table_grow(t);
  uint32_t h = hash_bytes(key, len);
  size_t i = h & (t->cap - 1);
  for (;; i = (i + 1) & (t->cap - 1)) {
    tx_slot *s = &t->slots[i];
    if (!s->key) break;
    if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) {
      *existed = true;
      return s;
    }
  }
  *existed = false;
  t->slots[i] = (tx_slot){key, (uint32_t)len, h, NULL};
  t->n++;
  return &t->slots[i];
}

bool tx_table_put(tx_table *t, const char *key, size_t len, void *val) {
  if ((t->n + 1) * 2 > t->cap) table_grow(t);
  uint32_t h = hash_bytes(key, len);
  size_t i = h & (t->cap - 1);
  for (;; i = (i + 1) & (t->cap - 1)) {
    tx_slot *s = &t->slots[i];
    if (!s->key) break;
    if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0) return false;
  }
  t->slots[i] = (tx_slot){key, (uint32_t)len, h, val};
  t->n++;
  return true;
}

void tx_vec_push(tx_vec *v, void *p) {
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 64;
    v->v = hk_check_alloc(realloc(v->v, v->cap * sizeof *v->v));
  }
  v->v[v->n++] = p;
}
