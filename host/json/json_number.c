/* json_number.c - floating-point literal elements as JSON: shortest exact numbers, "inf"/"-inf"/"nan" strings, NaN payloads. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* Raw bits <-> value for each real floating type. */
static double decode(hk_prim p, uint64_t bits) {
  switch (p) {
    case HK_F64: { double d; memcpy(&d, &bits, 8); return d; }
    case HK_F32: { uint32_t b = (uint32_t)bits; float f; memcpy(&f, &b, 4); return f; }
    case HK_F16: return hk_half_to_float((uint16_t)bits);
    case HK_BF16: return hk_bf16_to_float((uint16_t)bits);
    default: return hk_small_float_decode(p, (uint8_t)bits);
  }
}

static uint64_t encode(hk_prim p, double v) {
  switch (p) {
    case HK_F64: { uint64_t b; memcpy(&b, &v, 8); return b; }
    case HK_F32: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); return b; }
    case HK_F16: return hk_float_to_half((float)v);
    case HK_BF16: return hk_float_to_bf16((float)v);
    default: return hk_small_float_encode(p, v);
  }
}

/* Width of the mantissa (trailing significand) field, for NaN payloads. */
static int mantissa_bits(hk_prim p) {
  switch (p) {
    case HK_F64: return 52;
    case HK_F32: return 23;
    case HK_F16: return 10;
    case HK_BF16: return 7;
    case HK_F8E5M2: case HK_F8E5M2FNUZ: return 2;
    case HK_F8E3M4: return 4;
    case HK_F4E2M1FN: return 1;
    case HK_F8E8M0FNU: return 0;
    default: return 3;   /* the e4m3 family */
  }
}

static int max_digits(hk_prim p) { return p == HK_F64 ? 17 : 9; }

/* The shortest %g spelling that reads back to the same bits. */
static void shortest_spelling(hk_prim p, uint64_t bits, double v, char *buf, size_t cap) {
  if (v == 0 && signbit(v)) {
    snprintf(buf, cap, "-0.0");   /* "-0" would read back as the integer 0 */
    return;
  }
  for (int digits = 1; digits <= max_digits(p); digits++) {
    snprintf(buf, cap, "%.*g", digits, v);
    if (encode(p, strtod(buf, NULL)) == bits) return;
  }
  snprintf(buf, cap, "%.17g", v);
}

static uint64_t sign_mask(hk_prim p) { return (uint64_t)1 << (hk_prim_bits(p) - 1); }

static json_object *nan_to_json(hk_prim p, uint64_t bits, double v) {
  bool neg = signbit(v);
  if (encode(p, neg ? -NAN : NAN) == bits) return json_object_new_string(neg ? "-nan" : "nan");
  uint64_t payload = bits & (((uint64_t)1 << mantissa_bits(p)) - 1);
  char buf[48];
  neg = (bits & sign_mask(p)) != 0;
  snprintf(buf, sizeof buf, "%snan(0x%" PRIx64 ")", neg ? "-" : "", payload);
  return json_object_new_string(buf);
}

json_object *hkj_float_to_json(hk_prim p, uint64_t bits) {
  double v = decode(p, bits);
  if (isnan(v)) return nan_to_json(p, bits, v);
  if (isinf(v)) return json_object_new_string(v < 0 ? "-inf" : "inf");
  char buf[40];
  shortest_spelling(p, bits, v, buf, sizeof buf);
  return json_object_new_double_s(v, buf);
}

/* "nan(0xPAYLOAD)" with the sign already stripped: sign | all-ones exponent | payload. */
static hk_status *nan_payload(hkj_ctx *c, hk_prim p, const char *s, bool neg, uint64_t *bits) {
  char *end = NULL;
  uint64_t payload = strtoull(s + 4, &end, 16);
  int mb = mantissa_bits(p);
  uint64_t mask = ((uint64_t)1 << mb) - 1;
  if (strncmp(s + 4, "0x", 2) || !end || strcmp(end, ")") || payload == 0 || payload > mask)
    return hkj_err(c, "bad NaN payload '%s' for %s", s, hk_prim_name(p));
  uint64_t exp = (((uint64_t)1 << (hk_prim_bits(p) - 1 - mb)) - 1) << mb;
  *bits = (neg ? sign_mask(p) : 0) | exp | payload;
  if (!isnan(decode(p, *bits))) return hkj_err(c, "'%s' is not a NaN of %s", s, hk_prim_name(p));
  return NULL;
}

static hk_status *special_from_json(hkj_ctx *c, const char *s, hk_prim p, uint64_t *bits) {
  bool neg = s[0] == '-';
  const char *body = neg ? s + 1 : s;
  if (strcmp(body, "inf") == 0) {
    *bits = encode(p, neg ? -INFINITY : INFINITY);
    if (!isinf(decode(p, *bits))) return hkj_err(c, "%s has no infinity", hk_prim_name(p));
    return NULL;
  }
  if (strcmp(body, "nan") == 0) {
    *bits = encode(p, neg ? -NAN : NAN);
    return NULL;
  }
  if (strncmp(body, "nan(", 4) == 0) return nan_payload(c, p, body, neg, bits);
  return hkj_err(c, "expected a number, \"inf\", \"-inf\" or \"nan\", got \"%s\"", s);
}

hk_status *hkj_float_from_json(hkj_ctx *c, json_object *v, hk_prim p, uint64_t *bits) {
  double d;
  if (json_object_is_type(v, json_type_string))
    return special_from_json(c, json_object_get_string(v), p, bits);
  if (json_object_is_type(v, json_type_double)) {
    d = json_object_get_double(v);
  } else if (json_object_is_type(v, json_type_int)) {
    int64_t i = json_object_get_int64(v);
    d = (i == INT64_MAX) ? (double)json_object_get_uint64(v) : (double)i;
  } else {
    return hkj_err(c, "expected a number, got %s", hkj_type_name(v));
  }
  if (isnan(d)) return special_from_json(c, signbit(d) ? "-nan" : "nan", p, bits);
  if (isinf(d)) return special_from_json(c, d < 0 ? "-inf" : "inf", p, bits);
  *bits = encode(p, d);
  if (!isfinite(decode(p, *bits)))
    return hkj_err(c, "%g is out of range for %s", d, hk_prim_name(p));
  return NULL;
}
