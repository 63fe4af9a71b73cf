/* lex.c - the cursor lexer used by the sharding and metadata parsers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/unescape.h"
#include "sharding/lex.h"

static bool is_ident_start(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
static bool is_ident_char(char ch) {
  return is_ident_start(ch) || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
}

static void skip_blanks(hk_cursor *c) {
  while (c->i < c->n) {
    char ch = c->s[c->i];
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      c->i++;
    } else if (ch == '/' && c->i + 1 < c->n && c->s[c->i + 1] == '*') {
      const char *end = NULL;
      for (size_t j = c->i + 2; j + 1 < c->n; j++)
        if (c->s[j] == '*' && c->s[j + 1] == '/') { end = c->s + j; break; }
      if (!end) return;          /* unterminated comment: leave it as a token */
      c->i = (size_t)(end - c->s) + 2;
    } else {
      return;
    }
  }
}

char hk_cur_peek(hk_cursor *c) {
  skip_blanks(c);
  return c->i < c->n ? c->s[c->i] : 0;
}

bool hk_cur_eat(hk_cursor *c, char ch) {
  if (hk_cur_peek(c) != ch || ch == 0) return false;
  c->i++;
  return true;
}

bool hk_cur_eat_word(hk_cursor *c, const char *word) {
  skip_blanks(c);
  size_t k = strlen(word);
  if (c->n - c->i < k || memcmp(c->s + c->i, word, k) != 0) return false;
  if (c->i + k < c->n && is_ident_char(c->s[c->i + k])) return false;
  c->i += k;
  return true;
}

bool hk_cur_ident(hk_cursor *c, const char **start, size_t *len) {
  skip_blanks(c);
  if (c->i >= c->n || !is_ident_start(c->s[c->i])) return false;
  size_t j = c->i;
  while (j < c->n && is_ident_char(c->s[j])) j++;
  *start = c->s + c->i;
  *len = j - c->i;
  c->i = j;
  return true;
}

hk_status *hk_cur_error_at(size_t at, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hk_error(HK_INVALID_ARGUMENT, "@%zu: %s", at, msg);
}

hk_status *hk_cur_error(hk_cursor *c, const char *fmt, ...) {
  char msg[512];
  skip_blanks(c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return hk_error(HK_INVALID_ARGUMENT, "@%zu: %s", c->i, msg);
}

hk_status *hk_cur_expect(hk_cursor *c, char ch, const char *what) {
  if (hk_cur_eat(c, ch)) return NULL;
  return hk_cur_error(c, "expected '%c' %s", ch, what);
}

hk_status *hk_cur_int(hk_cursor *c, int64_t *out) {
  skip_blanks(c);
  size_t j = c->i;
  bool neg = false;
  if (j < c->n && (c->s[j] == '-' || c->s[j] == '+')) neg = c->s[j++] == '-';
  if (j >= c->n || c->s[j] < '0' || c->s[j] > '9') return hk_cur_error(c, "expected an integer");
  uint64_t v = 0;
  while (j < c->n && c->s[j] >= '0' && c->s[j] <= '9') {
    uint64_t d = (uint64_t)(c->s[j] - '0');
    if (v > (UINT64_MAX - d) / 10) return hk_cur_error(c, "integer out of range");
    v = v * 10 + d;
    j++;
  }
  if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return hk_cur_error(c, "integer out of range");
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  c->i = j;
  return NULL;
}

hk_status *hk_cur_string(hk_cursor *c, hk_module *m, const char **out, size_t *len) {
  if (hk_cur_peek(c) != '"') return hk_cur_error(c, "expected a string");
  size_t start = c->i, j = c->i + 1;
  while (j < c->n && c->s[j] != '"') j += c->s[j] == '\\' ? 2 : 1;
  if (j >= c->n) return hk_cur_error_at(start, "unterminated string");
  size_t raw = j - start - 1;
  char small[256], msg[128];
  char *buf = raw <= sizeof small ? small : malloc(raw);
  if (!buf) return hk_cur_error_at(start, "out of memory");
  size_t k = 0;
  hk_status *st = NULL;
  /* one decoder for every quoted string, with XLA's lexer's rules */
  if (hk_unescape(c->s + start + 1, raw, buf, &k, msg, sizeof msg)) {
    *out = hk_intern(m, buf, k);
    if (len) *len = k;
    c->i = j + 1;
  } else {
    st = hk_cur_error_at(start, "%s", msg);
  }
  if (buf != small) free(buf);
  return st;
}

hk_status *hk_cur_skip_value(hk_cursor *c, const char **start, size_t *len) {
  char ch = hk_cur_peek(c);
  size_t b = c->i;
  if (ch == '"') {
    size_t j = c->i + 1;
    while (j < c->n && c->s[j] != '"') j += c->s[j] == '\\' ? 2 : 1;
    if (j >= c->n) return hk_cur_error_at(b, "unterminated string");
    c->i = j + 1;
  } else if (ch == '{') {
    int depth = 0;
    size_t j = c->i;
    for (; j < c->n; j++) {
      if (c->s[j] == '"') {
        j++;
        while (j < c->n && c->s[j] != '"') j += c->s[j] == '\\' ? 2 : 1;
      } else if (c->s[j] == '{') {
        depth++;
      } else if (c->s[j] == '}' && --depth == 0) {
        break;
      }
    }
    if (j >= c->n) return hk_cur_error_at(b, "expected '}' to close '{'");
    c->i = j + 1;
  } else {
    size_t j = c->i;
    while (j < c->n && c->s[j] != ' ' && c->s[j] != '}' && c->s[j] != ',' && c->s[j] != '\n' &&
           c->s[j] != '\t' && c->s[j] != '\r')
      j++;
    if (j == c->i) return hk_cur_error(c, "expected a value");
    c->i = j;
  }
  *start = c->s + b;
  *len = c->i - b;
  return NULL;
}
