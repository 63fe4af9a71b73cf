/* literal_text.c - constant literals in HLO text: parsing every element type (nan payloads, inf, complex, elided {...}) and printing as XLA does. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/text_internal.h"

/* ---- element encodings --------------------------------------------------- */

typedef struct fp_format {
  int mant_bits, exp_bits;   /* IEEE-like formats with a payload-carrying NaN */
  int digits10, max_digits10;
} fp_format;

static fp_format fp_of(hk_prim p) {
  switch (p) {
    case HK_F16: return (fp_format){10, 5, 3, 5};
    case HK_BF16: return (fp_format){7, 8, 2, 4};
    case HK_F32: return (fp_format){23, 8, 6, 9};
    case HK_F64: return (fp_format){52, 11, 15, 17};
    /* narrow types with IEEE NaNs (signaling ones too), so NaN payloads */
    case HK_F8E5M2: return (fp_format){2, 5, 0, 2};
    case HK_F8E4M3: return (fp_format){3, 4, 0, 3};
    case HK_F8E3M4: return (fp_format){4, 3, 0, 3};
    /* the narrow types: max_digits10 = ceil(digits * log10(2) + 1), as
     * ml_dtypes defines it (digits counts the implicit bit) */
    case HK_F8E5M2FNUZ: case HK_F4E2M1FN: case HK_F8E8M0FNU:
      return (fp_format){0, 0, 0, 2};
    default: return (fp_format){0, 0, 0, 3};
  }
}

static const char *upper_name(hk_prim p, char *buf) {
  const char *n = hk_prim_name(p);
  size_t i = 0;
  for (; n[i] && i < 31; i++) buf[i] = (char)toupper((unsigned char)n[i]);
  buf[i] = 0;
  return buf;
}

static uint64_t load_bits(hk_prim p, const void *e) {
  switch (hk_prim_storage_bytes(p)) {
    case 1: return *(const uint8_t *)e;
    case 2: { uint16_t v; memcpy(&v, e, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, e, 4); return v; }
    default: { uint64_t v; memcpy(&v, e, 8); return v; }
  }
}

static void store_bits(hk_prim p, void *e, uint64_t bits) {
  switch (hk_prim_storage_bytes(p)) {
    case 1: *(uint8_t *)e = (uint8_t)bits; break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(e, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(e, &v, 4); break; }
    default: memcpy(e, &bits, 8);
  }
}

static double decode_real(hk_prim p, const void *e) {
  switch (p) {
    case HK_F16: return hk_half_to_float((uint16_t)load_bits(p, e));
    case HK_BF16: return hk_bf16_to_float((uint16_t)load_bits(p, e));
    case HK_F32: { float f; memcpy(&f, e, 4); return f; }
    case HK_F64: { double d; memcpy(&d, e, 8); return d; }
    default: return hk_small_float_decode(p, *(const uint8_t *)e);
  }
}

/* Stores a finite or infinite value; returns false if it overflows the type. */
static bool encode_real(hk_prim p, void *e, double v) {
  switch (p) {
    case HK_F16: store_bits(p, e, hk_float_to_half((float)v)); break;
    case HK_BF16: store_bits(p, e, hk_float_to_bf16((float)v)); break;
    case HK_F32: { float f = (float)v; memcpy(e, &f, 4); break; }
    case HK_F64: memcpy(e, &v, 8); break;
    default: *(uint8_t *)e = hk_small_float_encode(p, v);
  }
  if (isinf(v)) return true;
  double back = decode_real(p, e);
  return !isinf(back) && !(isnan(back) && !isnan(v));
}

/* ---- element parsing ---------------------------------------------------------- */

/* "shape at linear index N" of the element being parsed, for messages. */
typedef struct elem_pos {
  const hk_shape *shape;
  int64_t index;
} elem_pos;

static const char *pos_text(const elem_pos *pos, char *buf, size_t cap) {
  char *h = tx_human_shape(pos->shape);
  snprintf(buf, cap, "%s at linear index %lld", h, (long long)pos->index);
  free(h);
  return buf;
}

/* `nan` or `nan(0xPAYLOAD)` after the sign: the text reads as a double NaN
 * (a payload of 1..2^52-1, default the quiet one), which is then narrowed
 * as XLA does: a type with NaN payloads takes the payload if it fits (the
 * quiet one becomes the type's quiet NaN); a type without takes only the
 * quiet NaN. */
static bool parse_nan(tx_parser *P, hk_prim p, void *e, bool neg, const char *at,
                      const char *q, const elem_pos *pos) {
  const char *end = P->end;
  const uint64_t dquiet = 1ull << 51;
  uint64_t payload = dquiet;
  if (q < end && *q == '(') {
    const char *h = q + 1;
    if (end - h < 3 || h[0] != '0' || (h[1] != 'x' && h[1] != 'X') || !isxdigit((unsigned char)h[2]))
      return tx_error_at(P, h, "expects hexadecimal NaN payload");
    h += 2;
    payload = 0;
    bool big = false;
    for (; h < end && isxdigit((unsigned char)*h); h++) {
      if (payload >> 52) big = true;
      payload = payload * 16 + (uint64_t)(isdigit((unsigned char)*h) ? *h - '0' : (tolower((unsigned char)*h) - 'a' + 10));
    }
    if (big || payload == 0 || payload >> 52)
      return tx_error_at(P, at, "NaN payload out of range");
    if (h >= end || *h != ')') return tx_error_at(P, h, "expects ')' after NaN payload");
    q = h + 1;
  }
  P->p = q;
  char where[160];
  fp_format f = fp_of(p);
  if (f.mant_bits) {
    uint64_t mask = (1ull << f.mant_bits) - 1;
    if (payload == dquiet) payload = 1ull << (f.mant_bits - 1);
    if (payload > mask)
      return tx_error_at(P, at,
                         "tries to set NaN payload 0x%llx to a literal in shape %s, but the NaN "
                         "payload is out of range (0x%llx)",
                         (unsigned long long)payload, pos_text(pos, where, sizeof where),
                         (unsigned long long)mask);
    uint64_t bits = ((uint64_t)neg << (f.mant_bits + f.exp_bits)) |
                    (((1ull << f.exp_bits) - 1) << f.mant_bits) | payload;
    store_bits(p, e, bits);
    return true;
  }
  if (payload != dquiet)
    return tx_error_at(P, at,
                       "tries to set NaN payload 0x%llx to a literal in shape %s, but %s does not "
                       "support payloads",
                       (unsigned long long)payload, pos_text(pos, where, sizeof where),
                       hk_prim_name(p));
  uint8_t b = hk_small_float_encode(p, NAN);
  /* the fnuz types have one NaN (0x80) and e8m0fnu has no sign bit */
  if (neg && !(p == HK_F8E4M3B11FNUZ || p == HK_F8E5M2FNUZ || p == HK_F8E4M3FNUZ ||
               p == HK_F8E8M0FNU))
    b |= 0x80;
  *(uint8_t *)e = b;
  return true;
}

static bool parse_real_token(tx_parser *P, hk_prim p, void *e, const elem_pos *pos) {
  tx_skip(P);
  const char *at = P->p, *q = P->p, *end = P->end;
  bool neg = false;
  if (q < end && (*q == '-' || *q == '+')) neg = *q++ == '-';
  if (end - q >= 3 && memcmp(q, "nan", 3) == 0) return parse_nan(P, p, e, neg, at, q + 3, pos);
  double v;
  if (end - q >= 3 && memcmp(q, "inf", 3) == 0) {
    v = neg ? -INFINITY : INFINITY;
    P->p = q + 3;
  } else {
    char buf[128];
    size_t n = 0;
    const char *r = at;
    while (r < end && n < sizeof buf - 1 &&
           (isdigit((unsigned char)*r) || *r == '.' || *r == 'e' || *r == 'E' || *r == '-' ||
            *r == '+'))
      buf[n++] = *r++;
    buf[n] = 0;
    if (n == 0) return tx_error_at(P, at, "expects a number");
    char *ep;
    errno = 0;
    v = strtod(buf, &ep);
    if (ep == buf) return tx_error_at(P, at, "expects a number");
    if (errno == ERANGE && isinf(v)) {
      char un[32];
      return tx_error_at(P, at, "value %s is out of range for literal's primitive type %s",
                         buf, upper_name(p, un));
    }
    P->p = at + (ep - buf);
  }
  if (!encode_real(p, e, v)) {
    char un[32];
    return tx_error_at(P, at, "value %.*s is out of range for literal's primitive type %s",
                       (int)(P->p - at), at, upper_name(p, un));
  }
  return true;
}

/* XLA's lexer reads an integer as int64 (a number above INT64_MAX as its
 * uint64 bits); the literal then takes it if it is in the type's range,
 * an unsigned type comparing the int64's bits as uint64 (so u64 takes -1).
 * False with the message's range in lo/hi otherwise. */
static bool int_in_range(tx_parser *P, hk_prim p, uint64_t u, bool neg, const char *at) {
  if (neg && u > (1ull << 63)) return tx_error_at(P, at, "integer is out of range");
  int64_t v = neg ? (int64_t)(0 - u) : (int64_t)u;
  int bits = hk_prim_bits(p);
  char un[32];
  if (hk_prim_is_unsigned_int(p)) {
    uint64_t max = bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
    if ((uint64_t)v <= max) return true;
    return tx_error_at(P, at,
                       "value %lld is out of range for literal's primitive type %s namely [0, %llu].",
                       (long long)v, upper_name(p, un), (unsigned long long)max);
  }
  int64_t max = bits >= 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1), min = -max - 1;
  if (v >= min && v <= max) return true;
  return tx_error_at(P, at,
                     "value %lld is out of range for literal's primitive type %s namely [%lld, %lld].",
                     (long long)v, upper_name(p, un), (long long)min, (long long)max);
}

static bool parse_element(tx_parser *P, hk_prim p, void *e, const elem_pos *pos) {
  tx_skip(P);
  const char *at = P->p;
  /* true/false stand for 1/0 in a literal of any real type */
  bool word_true = tx_accept_word(P, "true");
  if (word_true || tx_accept_word(P, "false")) {
    if (hk_prim_is_complex(p)) return tx_error_at(P, at, "expects a complex number");
    if (hk_prim_is_float(p)) {
      encode_real(p, e, word_true ? 1.0 : 0.0);
    } else {
      uint64_t one = word_true;
      store_bits(p, e, one);
    }
    return true;
  }
  if (p == HK_PRED || hk_prim_is_integral(p)) {
    uint64_t u;
    bool neg;
    char un[32];
    if (!tx_uint64(P, &u, &neg)) return false;
    if (P->p < P->end && (*P->p == '.' || *P->p == 'e' || *P->p == 'E'))
      return tx_error_at(P, at, "expects integer for primitive type: %s", upper_name(p, un));
    if (p == HK_PRED) {
      if (neg ? u != 0 : u > 1)
        return tx_error_at(P, at,
                           "value %s%llu is out of range for literal's primitive type PRED namely "
                           "[0, 1].",
                           neg ? "-" : "", (unsigned long long)u);
      *(uint8_t *)e = u != 0;
      return true;
    }
    if (!int_in_range(P, p, u, neg, at)) return false;
    uint64_t bits = neg ? 0 - u : u;
    int sb = hk_prim_storage_bytes(p);
    if (sb < 8) bits &= (1ull << (8 * sb)) - 1;
    store_bits(p, e, bits);
    return true;
  }
  if (hk_prim_is_complex(p)) {
    hk_prim c = p == HK_C64 ? HK_F32 : HK_F64;
    int half = hk_prim_storage_bytes(p) / 2;
    if (!tx_expect(P, '(', "at the start of a complex number") ||
        !parse_real_token(P, c, e, pos) || !tx_expect(P, ',', "in a complex number") ||
        !parse_real_token(P, c, (char *)e + half, pos) ||
        !tx_expect(P, ')', "at the end of a complex number"))
      return false;
    return true;
  }
  if (hk_prim_is_float(p)) return parse_real_token(P, p, e, pos);
  return tx_error_at(P, at, "literal of type %s is not supported", hk_prim_name(p));
}

/* ---- literals ------------------------------------------------------------------- */

/* The literal's storage is taken once its text can fill it (take_data). */
static hk_literal *new_literal(hk_module *m, const hk_shape *s) {
  hk_literal *l = hk_alloc(m, sizeof *l);
  l->shape = s;
  if (hk_shape_is_array(s)) l->nbytes = hk_shape_elements(s) * hk_prim_storage_bytes((hk_prim)s->elem);
  return l;
}

/* The machine's memory: a literal larger than it cannot be held, and
 * asking for it would end the process in the out-of-memory policy. */
static int64_t memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (int64_t)pages * size : INT64_MAX;
}

/* Storage for the whole shape.  A bare element fills a shape of any size
 * (XLA's rule), so the size is the input's to choose: one past the
 * machine's memory (or past int64) is an error at the literal, not an
 * abort (fuzzer: f32[699999999999999,3] constant(1)). */
static bool take_data(tx_parser *P, hk_literal *l, const char *at) {
  int64_t n = hk_shape_elements(l->shape);
  int esz = hk_prim_storage_bytes((hk_prim)l->shape->elem);
  /* sysconf only for a literal of a GiB or more: not on every constant */
  if (n < 0 || (esz > 0 && n > INT64_MAX / esz) ||
      (l->nbytes >= ((int64_t)1 << 30) && l->nbytes > memory_bytes())) {
    char *h = tx_human_shape(l->shape);
    tx_error_at(P, at, "a literal in shape %s is larger than this machine's memory", h);
    free(h);
    return false;
  }
  l->data = l->nbytes ? hk_alloc(P->m, (size_t)l->nbytes) : NULL;
  return true;
}

static bool at_elided(tx_parser *P) {
  const char *q = P->p + 1;
  while (q < P->end && (*q == ' ' || *q == '\n')) q++;
  return P->end - q >= 3 && memcmp(q, "...", 3) == 0;
}

static bool parse_dense(tx_parser *P, const hk_shape *s, hk_literal *l) {
  hk_prim p = (hk_prim)s->elem;
  int esz = hk_prim_storage_bytes(p);
  int rank = s->rank;
  elem_pos pos = {s, 0};
  if (rank == 0) {
    if (!take_data(P, l, P->p)) return false;
    return parse_element(P, p, l->data, &pos);
  }
  if (tx_peek(P) != '{') {
    if (tx_peek(P) == '}') return tx_error_at(P, P->p, "unexpected '}' token");
    /* XLA's ParseDenseLiteral ignores its nesting complaint about a bare
     * element: it becomes element 0, the others stay zero */
    if (hk_shape_elements(s) == 0) {
      char *h = tx_human_shape(s);
      tx_error_at(P, P->p, "tries to set a value to a literal in shape %s at linear index 0, but the index is out of range", h);
      free(h);
      return false;
    }
    /* read into scratch first: a bad element fails before storage for the
     * whole (maybe huge) shape is taken (fuzzer: 2.3 GB for f32[288888888,2]) */
    char scratch[16] = {0};
    const char *at = P->p;
    if (!parse_element(P, p, scratch, &pos) || !take_data(P, l, at)) return false;
    memcpy(l->data, scratch, (size_t)esz);
    return true;
  }
  if (at_elided(P)) {
    P->p++;
    tx_skip(P);
    P->p += 3;
    l->elided = true;
    l->data = NULL;
    return tx_expect(P, '}', "after '...'");
  }
  int64_t seen[HK_MAX_RANK + 1];
  int nest = 0;
  int64_t idx = 0, total = hk_shape_elements(s);
  /* every element takes a character: a shorter text cannot fill the shape
   * and fails on its count, so it is read into one scratch element instead
   * of storage for the whole declared shape */
  char scratch[16];
  bool doomed = total > P->end - P->p;
  if (!doomed && !take_data(P, l, P->p)) return false;
  do {
    int c = tx_peek(P);
    const char *at = P->p;
    if (c == '{') {
      if (nest >= rank)
        return tx_error_at(P, at, "expects nested array in rank %d, but sees larger", rank);
      if (nest > 0) seen[nest - 1]++;
      seen[nest++] = 0;
      P->p++;
    } else if (c == '}') {
      if (nest == 0) return tx_error_at(P, at, "unexpected '}' token");
      nest--;
      if (seen[nest] != s->dims[nest]) {
        char idxs[256];
        size_t o = 0;
        idxs[o++] = '[';
        for (int d = 0; d < nest && o < 200; d++)
          o += (size_t)snprintf(idxs + o, sizeof idxs - o, "%s%lld", d ? "," : "",
                                (long long)(seen[d] - 1 < 0 ? 0 : seen[d] - 1));
        idxs[o++] = ']';
        idxs[o] = 0;
        return tx_error_at(P, at, "expects %lld elements in the %sth element, but sees %lld",
                           (long long)s->dims[nest], idxs, (long long)seen[nest]);
      }
      P->p++;
    } else if (c == ',') {
      P->p++;
    } else if (c == 0) {
      return tx_error_at(P, at, "unexpected end of input in a literal");
    } else {
      if (nest < rank)
        return tx_error_at(P, at, "expects nested array in rank %d, but sees %d", rank, nest);
      if (idx >= total) {
        char *h = tx_human_shape(s);
        const char *v = at;
        while (v < P->end && *v != ',' && *v != '}' && *v != '\n' && v - at < 64) v++;
        tx_error_at(P, at,
                    "tries to set value %.*s to a literal in shape %s at linear index %lld, but "
                    "the index is out of range",
                    (int)(v - at), at, h, (long long)idx);
        free(h);
        return false;
      }
      seen[rank - 1]++;
      pos.index = idx;
      if (!parse_element(P, p, doomed ? scratch : (char *)l->data + idx * esz, &pos)) return false;
      idx++;
    }
  } while (nest > 0);
  return !doomed || tx_error_at(P, P->p, "literal has fewer elements than its shape");
}

static bool parse_any(tx_parser *P, const hk_shape *s, hk_literal **out) {
  *out = NULL;
  /* a literal holds its elements: a '?' dim has no size to hold */
  if (hk_shape_is_array(s) && hk_shape_is_unbounded_dynamic(s))
    return tx_error_at(P, P->p, "a literal cannot have an unbounded dynamic dimension ('?')");
  hk_literal *l = new_literal(P->m, s);
  *out = l;
  if (s->elem == HK_TUPLE) {
    if (!tx_expect(P, '(', "at the start of a tuple literal")) return false;
    l->n_elems = s->n_tuple;
    l->elems = hk_alloc(P->m, sizeof(hk_literal *) * (size_t)(s->n_tuple ? s->n_tuple : 1));
    if (!tx_enter(P)) return false;
    bool ok = true;
    for (int i = 0; i < s->n_tuple && ok; i++) {
      if (i && !(ok = tx_expect(P, ',', "between tuple literal elements"))) break;
      ok = parse_any(P, s->tuple[i], &l->elems[i]);
    }
    tx_leave(P);
    return ok && tx_expect(P, ')', "at the end of a tuple literal");
  }
  if (!hk_shape_is_array(s)) {
    if (s->elem == HK_TOKEN) return true;
    return tx_error_at(P, P->p, "cannot parse a literal of type %s", hk_prim_name((hk_prim)s->elem));
  }
  return parse_dense(P, s, l);
}

bool tx_parse_literal(tx_parser *P, const hk_shape *shape, hk_literal **out) {
  return parse_any(P, shape, out);
}

/* ---- printing -------------------------------------------------------------------- */

static void print_real(hk_prim p, double v, const void *e, hk_buf *out) {
  if (isnan(v)) {
    fp_format f = fp_of(p);
    uint64_t bits = load_bits(p, e);
    bool neg;
    uint64_t payload = 0, quiet = 0;
    if (f.mant_bits) {
      neg = (bits >> (f.mant_bits + f.exp_bits)) & 1;
      payload = bits & ((1ull << f.mant_bits) - 1);
      quiet = 1ull << (f.mant_bits - 1);
    } else {
      /* the one NaN of a fnuz type is the negative-zero pattern 0x80: it
       * widens to a negative NaN, which XLA prints as -nan */
      neg = (bits & 0x80) && p != HK_F8E8M0FNU;
      uint8_t canon = hk_small_float_encode(p, NAN) & 0x7f;
      payload = quiet = (uint64_t)(bits & 0x7f) == canon ? 0 : 0;
    }
    hk_buf_puts(out, neg ? "-nan" : "nan");
    if (payload != quiet) hk_buf_printf(out, "(0x%llx)", (unsigned long long)payload);
    return;
  }
  if (isinf(v)) {
    hk_buf_puts(out, v < 0 ? "-inf" : "inf");
    return;
  }
  /* f32 and f64 print the shortest of digits10 and max_digits10 that reads
   * back; the other types always print max_digits10 digits (XLA's
   * RoundTripFpToString) */
  fp_format f = fp_of(p);
  char buf[64];
  bool same = false;
  if (p == HK_F32 || p == HK_F64) {
    snprintf(buf, sizeof buf, "%.*g", f.digits10, v);
    if (p == HK_F64) same = strtod(buf, NULL) == v;
    else same = strtof(buf, NULL) == (float)v;
  }
  if (!same) snprintf(buf, sizeof buf, "%.*g", f.max_digits10, v);
  hk_buf_puts(out, buf);
}

void tx_print_float(hk_prim p, const void *e, hk_buf *out) {
  print_real(p, decode_real(p, e), e, out);
}

static void print_element(hk_prim p, const void *e, int rank, hk_buf *out) {
  if (p == HK_PRED) {
    bool b = *(const uint8_t *)e;
    hk_buf_puts(out, rank > 0 ? (b ? "1" : "0") : (b ? "true" : "false"));
    return;
  }
  if (hk_prim_is_integral(p)) {
    uint64_t bits = load_bits(p, e);
    int nb = hk_prim_bits(p);
    if (hk_prim_storage_bytes(p) * 8 < 64 && nb < 64) bits &= (1ull << nb) - 1;
    if (hk_prim_is_signed_int(p)) {
      int64_t v = nb >= 64 ? (int64_t)bits
                           : (int64_t)(bits << (64 - nb)) >> (64 - nb);
      hk_buf_printf(out, "%lld", (long long)v);
    } else {
      hk_buf_printf(out, "%llu", (unsigned long long)bits);
    }
    return;
  }
  if (hk_prim_is_complex(p)) {
    hk_prim c = p == HK_C64 ? HK_F32 : HK_F64;
    int half = hk_prim_storage_bytes(p) / 2;
    hk_buf_put(out, "(", 1);
    tx_print_float(c, e, out);
    hk_buf_put(out, ", ", 2);
    tx_print_float(c, (const char *)e + half, out);
    hk_buf_put(out, ")", 1);
    return;
  }
  tx_print_float(p, e, out);
}

/* XLA prints literals over several lines and then compacts every run of
 * blanks to one space; we emit the compacted form directly: a piece list
 * joined so that whitespace collapses. */
typedef struct compact {
  hk_buf *out;
  bool pending_space, started;
} compact;

static void c_space(compact *c) {
  if (c->started) c->pending_space = true;
}
static void c_put(compact *c, const char *s) {
  if (c->pending_space) hk_buf_put(c->out, " ", 1);
  c->pending_space = false;
  c->started = true;
  hk_buf_puts(c->out, s);
}

static void print_dense_rec(const hk_literal *l, int dim, int64_t *idx, int64_t *lin,
                            compact *c, hk_buf *tmp) {
  const hk_shape *s = l->shape;
  int rank = s->rank;
  hk_prim p = (hk_prim)s->elem;
  int remaining = rank - dim;
  if (remaining == 0) {
    tmp->len = 0;
    print_element(p, (const char *)l->data + (*lin)++ * hk_prim_storage_bytes(p), rank, tmp);
    /* element strings may contain blanks (complex): they compact the same */
    c_put(c, tmp->data);
    return;
  }
  /* opening brace */
  if (rank == 1) {
    c_put(c, "{");
    c->pending_space = false;
  } else if (remaining == 1) {
    c_space(c);
    c_put(c, "{");
    if (s->dims[dim] > 1) c_space(c);
    else c->pending_space = false;
  } else {
    c_put(c, "{");
    if (rank > 3 && dim > 0 && dim < rank) {
      char cm[48];
      snprintf(cm, sizeof cm, "/*i%d=%lld*/", dim - 1, (long long)idx[dim - 1]);
      c_space(c);
      c_put(c, cm);
    }
    c_space(c);
  }
  for (int64_t i = 0; i < s->dims[dim]; i++) {
    idx[dim] = i;
    print_dense_rec(l, dim + 1, idx, lin, c, tmp);
    if (i < s->dims[dim] - 1) {
      c->pending_space = false;
      c_put(c, ",");
      c_space(c);
    }
  }
  /* closing brace */
  if (rank == 1) {
    c->pending_space = false;
    c_put(c, "}");
  } else if (remaining == 1) {
    if (s->dims[dim] > 1) c_space(c);
    else c->pending_space = false;
    c_put(c, "}");
  } else {
    c_space(c);
    c_put(c, "}");
  }
}

static void print_lit(const hk_literal *l, compact *c, hk_buf *tmp) {
  const hk_shape *s = l->shape;
  if (s->elem == HK_TUPLE) {
    c_put(c, "(");
    c_space(c);
    for (int i = 0; i < l->n_elems; i++) {
      if (i) {
        c->pending_space = false;
        c_put(c, ",");
        c_space(c);
      }
      print_lit(l->elems[i], c, tmp);
    }
    c_space(c);
    c_put(c, ")");
    return;
  }
  if (l->elided || (!l->data && hk_shape_elements(s) > 0)) {
    c_put(c, "{...}");
    return;
  }
  if (s->elem == HK_TOKEN) {
    c_put(c, "token");
    return;
  }
  int64_t idx[HK_MAX_RANK + 1], lin = 0;
  if (s->rank == 0) {
    tmp->len = 0;
    print_element((hk_prim)s->elem, l->data, 0, tmp);
    c_put(c, tmp->data);
    return;
  }
  print_dense_rec(l, 0, idx, &lin, c, tmp);
}

void tx_print_literal(const hk_literal *l, hk_buf *out) {
  compact c = {out, false, false};
  hk_buf tmp;
  hk_buf_init(&tmp);
  hk_buf_put(&tmp, "", 0);
  print_lit(l, &c, &tmp);
  hk_buf_free(&tmp);
}
