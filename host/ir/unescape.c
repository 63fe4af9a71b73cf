/* unescape.c - C string escapes as absl's CUnescape reads them: one decoder for the HLO and sharding lexers. */
#include "ir/unescape.h"

#include <stdint.h>
#include <stdio.h>

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t put_utf8(char *out, uint32_t r) {
  if (r < 0x80) { out[0] = (char)r; return 1; }
  if (r < 0x800) {
    out[0] = (char)(0xc0 | (r >> 6));
    out[1] = (char)(0x80 | (r & 0x3f));
    return 2;
  }
  if (r < 0x10000) {
    out[0] = (char)(0xe0 | (r >> 12));
    out[1] = (char)(0x80 | ((r >> 6) & 0x3f));
    out[2] = (char)(0x80 | (r & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | (r >> 18));
  out[1] = (char)(0x80 | ((r >> 12) & 0x3f));
  out[2] = (char)(0x80 | ((r >> 6) & 0x3f));
  out[3] = (char)(0x80 | (r & 0x3f));
  return 4;
}

/* \x: any number of hex digits; the sum stops growing once past 0xff so
 * a long run cannot overflow. */
static bool hex_escape(const char *s, size_t n, size_t *i, char *out, size_t *k, char *msg, size_t cap) {
  size_t start = *i;
  if (start >= n) return snprintf(msg, cap, "String cannot end with \\x"), false;
  if (hex_digit(s[start]) < 0) return snprintf(msg, cap, "\\x cannot be followed by a non-hex digit"), false;
  unsigned v = 0;
  while (*i < n && hex_digit(s[*i]) >= 0) {
    if (v <= 0xff) v = v * 16 + (unsigned)hex_digit(s[*i]);
    (*i)++;
  }
  if (v > 0xff)
    return snprintf(msg, cap, "Value of \\x%.*s exceeds 0xff", (int)(*i - start), s + start), false;
  out[(*k)++] = (char)v;
  return true;
}

/* \u (4 digits) or \U (8 digits): one code point, written as UTF-8. */
static bool unicode_escape(const char *s, size_t n, size_t *i, int digits, char *out, size_t *k, char *msg,
                           size_t cap) {
  char u = digits == 4 ? 'u' : 'U';
  uint32_t r = 0;
  for (int d = 0; d < digits; d++) {
    if (*i + (size_t)d >= n || hex_digit(s[*i + d]) < 0)
      return snprintf(msg, cap, "\\%c must be followed by %d hex digits", u, digits), false;
    r = r * 16 + (uint32_t)hex_digit(s[*i + d]);
  }
  if (r > 0x10ffff)
    return snprintf(msg, cap, "Value of \\%c%.*s exceeds Unicode limit (0x10FFFF)", u, digits, s + *i), false;
  *i += (size_t)digits;
  *k += put_utf8(out + *k, r);
  return true;
}

static int simple_escape(char c) {
  switch (c) {
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'v': return '\v';
    case '\\': case '?': case '\'': case '"': return c;
    default: return -1;
  }
}

/* One escape after the backslash at s[*i - 1]. */
static bool one_escape(const char *s, size_t n, size_t *i, char *out, size_t *k, char *msg, size_t cap) {
  char c = s[(*i)++];
  int simple = simple_escape(c);
  if (simple >= 0) {
    out[(*k)++] = (char)simple;
    return true;
  }
  if (c >= '0' && c <= '7') {
    size_t start = *i - 1;
    unsigned v = (unsigned)(c - '0');
    while (*i < n && *i - start < 3 && s[*i] >= '0' && s[*i] <= '7') v = v * 8 + (unsigned)(s[(*i)++] - '0');
    if (v > 0xff) return snprintf(msg, cap, "Value of \\%.*s exceeds 0xff", (int)(*i - start), s + start), false;
    out[(*k)++] = (char)v;
    return true;
  }
  if (c == 'x' || c == 'X') return hex_escape(s, n, i, out, k, msg, cap);
  if (c == 'u') return unicode_escape(s, n, i, 4, out, k, msg, cap);
  if (c == 'U') return unicode_escape(s, n, i, 8, out, k, msg, cap);
  snprintf(msg, cap, "Unknown escape sequence: \\%c", c);
  return false;
}

bool hk_unescape(const char *s, size_t n, char *out, size_t *out_n, char *msg, size_t msg_cap) {
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] != '\\') {
      out[k++] = s[i++];
      continue;
    }
    if (++i >= n) return snprintf(msg, msg_cap, "String cannot end with a single \\"), false;
    if (!one_escape(s, n, &i, out, &k, msg, msg_cap)) return false;
  }
  *out_n = k;
  return true;
}
