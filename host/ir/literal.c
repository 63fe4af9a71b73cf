/* literal.c - literals (dense constant data) and f16/bf16/f8/f4 conversions. */
#include <math.h>
#include <string.h>

#include "irpriv.h"

/* ---- f16 and bf16 --------------------------------------------------------------- */

static uint32_t float_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

static float bits_float(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

float hk_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t hk_float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));  /* quiet NaN */
  if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  /* >= 65520 rounds to inf */
  if (ax < 0x38800000) {  /* below the smallest normal half: a multiple of 2^-24 */
    uint32_t q = (uint32_t)rintf(bits_float(ax) * 0x1p24f);
    return (uint16_t)(sign | q);
  }
  uint32_t h = ((((ax >> 23) - 112) << 10) | ((ax >> 13) & 0x3ff));
  uint32_t rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float hk_bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t hk_float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* ---- f8 / f4 ---------------------------------------------------------------------------- */

typedef enum nan_kind {
  NAN_IEEE,   /* exponent all ones: mantissa 0 = inf, else NaN */
  NAN_FN,     /* only all-ones exponent and mantissa is NaN; no inf */
  NAN_FNUZ,   /* only 0x80 is NaN; no inf, no negative zero */
  NAN_NONE,   /* f4e2m1fn: neither */
} nan_kind;

typedef struct small_float {
  int ebits, mbits, bias;
  nan_kind nan;
  uint8_t qnan;      /* ml_dtypes' quiet_NaN() */
  uint8_t max;       /* largest finite magnitude */
} small_float;

static bool small_float_format(hk_prim p, small_float *f) {
  switch (p) {
    case HK_F8E5M2: *f = (small_float){5, 2, 15, NAN_IEEE, 0x7e, 0x7b}; return true;
    case HK_F8E4M3: *f = (small_float){4, 3, 7, NAN_IEEE, 0x7c, 0x77}; return true;
    case HK_F8E4M3FN: *f = (small_float){4, 3, 7, NAN_FN, 0x7f, 0x7e}; return true;
    case HK_F8E4M3B11FNUZ: *f = (small_float){4, 3, 11, NAN_FNUZ, 0x80, 0x7f}; return true;
    case HK_F8E5M2FNUZ: *f = (small_float){5, 2, 16, NAN_FNUZ, 0x80, 0x7f}; return true;
    case HK_F8E4M3FNUZ: *f = (small_float){4, 3, 8, NAN_FNUZ, 0x80, 0x7f}; return true;
    case HK_F8E3M4: *f = (small_float){3, 4, 3, NAN_IEEE, 0x78, 0x6f}; return true;
    case HK_F4E2M1FN: *f = (small_float){2, 1, 1, NAN_NONE, 0x8, 0x7}; return true;
    default: return false;
  }
}

static uint8_t sign_bit(const small_float *f) { return (uint8_t)(1u << (f->ebits + f->mbits)); }

/* ml_dtypes' unary minus on the bit pattern. */
static uint8_t sf_negate(const small_float *f, uint8_t bits) {
  if (f->nan == NAN_FNUZ && (bits & 0x7f) == 0) return bits;   /* 0 and NaN */
  return bits ^ sign_bit(f);
}

/* ml_dtypes' infinity(): inf, or NaN / the max value for finite types. */
static uint8_t sf_infinity(const small_float *f) {
  switch (f->nan) {
    case NAN_IEEE: return (uint8_t)(((1u << f->ebits) - 1) << f->mbits);
    case NAN_NONE: return f->max;
    default: return f->qnan;
  }
}

static double sf_decode(const small_float *f, uint8_t bits) {
  unsigned emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
  bits &= (uint8_t)((sign_bit(f) << 1) - 1);
  bool neg = bits & sign_bit(f);
  unsigned e = (bits >> f->mbits) & emask, m = bits & mmask;
  if (f->nan == NAN_FNUZ && bits == 0x80) return NAN;
  if (f->nan == NAN_IEEE && e == emask) return m ? (neg ? -NAN : NAN) : (neg ? -INFINITY : INFINITY);
  if (f->nan == NAN_FN && e == emask && m == mmask) return neg ? -NAN : NAN;
  double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                    : ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
  return neg ? -v : v;
}

static uint8_t sf_encode(const small_float *f, double v) {
  bool neg = signbit(v);
  if (isnan(v)) return neg ? sf_negate(f, f->qnan) : f->qnan;
  if (isinf(v)) return neg ? sf_negate(f, sf_infinity(f)) : sf_infinity(f);
  double a = fabs(v);
  int64_t bits;
  if (a == 0) {
    bits = 0;
  } else {
    int e2;
    frexp(a, &e2);
    int exp = e2 - 1, min_exp = 1 - f->bias;
    int q = (exp < min_exp ? min_exp : exp) - f->mbits;
    int64_t r = (int64_t)rint(ldexp(a, -q));   /* quanta, rounded to nearest even */
    if (exp < min_exp) {
      bits = r;   /* subnormal; r == 2^mbits is the smallest normal */
    } else {
      if (r == (int64_t)2 << f->mbits) {
        exp++;
        r >>= 1;
      }
      bits = ((int64_t)(exp + f->bias) << f->mbits) | (r - ((int64_t)1 << f->mbits));
    }
    if (bits > f->max) return neg ? sf_negate(f, sf_infinity(f)) : sf_infinity(f);
  }
  return neg ? sf_negate(f, (uint8_t)bits) : (uint8_t)bits;
}

/* f8e8m0fnu: an unsigned power of two 2^(bits-127); 0xff is NaN. */
static double e8m0_decode(uint8_t bits) { return bits == 0xff ? NAN : ldexp(1.0, bits - 127); }

static uint8_t e8m0_encode(double v) {
  if (isnan(v) || isinf(v) || v <= 0 || signbit(v)) return 0xff;
  int e2;
  frexp(v, &e2);
  int exp = e2 - 1;
  if (rint(ldexp(v, -exp)) >= 2.0) exp++;
  int biased = exp + 127;
  if (biased < 0) return 0x00;
  if (biased > 0xfe) return 0xff;
  return (uint8_t)biased;
}

double hk_small_float_decode(hk_prim p, uint8_t bits) {
  if (p == HK_F8E8M0FNU) return e8m0_decode(bits);
  small_float f;
  return small_float_format(p, &f) ? sf_decode(&f, bits) : NAN;
}

uint8_t hk_small_float_encode(hk_prim p, double v) {
  if (p == HK_F8E8M0FNU) return e8m0_encode(v);
  small_float f;
  return small_float_format(p, &f) ? sf_encode(&f, v) : 0;
}

/* ---- literals ------------------------------------------------------------------------------ */

hk_literal *hk_literal_new(hk_module *m, const hk_shape *shape) {
  hk_literal *l = hk_alloc(m, sizeof *l);
  l->shape = shape;
  if (shape->elem == HK_TUPLE) {
    l->n_elems = shape->n_tuple;
    l->elems = shape->n_tuple ? hk_alloc(m, (size_t)shape->n_tuple * sizeof *l->elems) : NULL;
    for (int k = 0; k < shape->n_tuple; k++) l->elems[k] = hk_literal_new(m, shape->tuple[k]);
  } else if (hk_shape_is_array(shape)) {
    l->nbytes = hk_shape_elements(shape) * hk_prim_storage_bytes((hk_prim)shape->elem);
    l->data = hk_alloc(m, (size_t)(l->nbytes ? l->nbytes : 1));
  }
  return l;
}

hk_literal *hk_literal_copy(hk_module *m, const hk_literal *src) {
  if (!src) return NULL;
  hk_literal *l = hk_alloc(m, sizeof *l);
  *l = *src;
  l->shape = hk_shape_intern(m, src->shape);
  l->data = src->data ? hk_memdup(m, src->data, (size_t)(src->nbytes ? src->nbytes : 1)) : NULL;
  if (src->n_elems) {
    l->elems = hk_alloc(m, (size_t)src->n_elems * sizeof *l->elems);
    for (int k = 0; k < src->n_elems; k++) l->elems[k] = hk_literal_copy(m, src->elems[k]);
  }
  return l;
}

/* Loads element idx as a signed or unsigned 64-bit integer pattern. */
static int64_t load_int(hk_prim p, const void *data, int64_t idx) {
  const uint8_t *b = data;
  switch (p) {
    case HK_PRED: return b[idx] != 0;
    case HK_S2: case HK_S4: case HK_S8: return (int8_t)b[idx];
    case HK_U2: case HK_U4: case HK_U8: return b[idx];
    case HK_S16: { int16_t v; memcpy(&v, b + idx * 2, 2); return v; }
    case HK_U16: { uint16_t v; memcpy(&v, b + idx * 2, 2); return v; }
    case HK_S32: { int32_t v; memcpy(&v, b + idx * 4, 4); return v; }
    case HK_U32: { uint32_t v; memcpy(&v, b + idx * 4, 4); return v; }
    case HK_S64: case HK_U64: { int64_t v; memcpy(&v, b + idx * 8, 8); return v; }
    default: return 0;
  }
}

/* Stores v, truncated to the type's width (sub-byte signed types kept
 * sign-extended in their byte, unsigned ones masked). */
static void store_int(hk_prim p, void *data, int64_t idx, int64_t v) {
  uint8_t *b = data;
  switch (p) {
    case HK_PRED: b[idx] = v != 0; break;
    case HK_S2: b[idx] = (uint8_t)((int8_t)(uint8_t)((uint64_t)v << 6) >> 6); break;
    case HK_S4: b[idx] = (uint8_t)((int8_t)(uint8_t)((uint64_t)v << 4) >> 4); break;
    case HK_U2: b[idx] = (uint8_t)(v & 3); break;
    case HK_U4: b[idx] = (uint8_t)(v & 15); break;
    case HK_S8: case HK_U8: b[idx] = (uint8_t)v; break;
    case HK_S16: case HK_U16: { uint16_t x = (uint16_t)v; memcpy(b + idx * 2, &x, 2); break; }
    case HK_S32: case HK_U32: { uint32_t x = (uint32_t)v; memcpy(b + idx * 4, &x, 4); break; }
    case HK_S64: case HK_U64: memcpy(b + idx * 8, &v, 8); break;
    default: break;
  }
}

static double load_float(hk_prim p, const void *data, int64_t idx) {
  const uint8_t *b = data;
  switch (p) {
    case HK_F16: { uint16_t h; memcpy(&h, b + idx * 2, 2); return hk_half_to_float(h); }
    case HK_BF16: { uint16_t h; memcpy(&h, b + idx * 2, 2); return hk_bf16_to_float(h); }
    case HK_F32: case HK_C64: {
      float f;
      memcpy(&f, b + idx * (p == HK_C64 ? 8 : 4), 4);
      return f;
    }
    case HK_F64: case HK_C128: {
      double d;
      memcpy(&d, b + idx * (p == HK_C128 ? 16 : 8), 8);
      return d;
    }
    default: return hk_small_float_decode(p, b[idx]);
  }
}

static void store_float(hk_prim p, void *data, int64_t idx, double v) {
  uint8_t *b = data;
  switch (p) {
    case HK_F16: { uint16_t h = hk_float_to_half((float)v); memcpy(b + idx * 2, &h, 2); break; }
    case HK_BF16: { uint16_t h = hk_float_to_bf16((float)v); memcpy(b + idx * 2, &h, 2); break; }
    case HK_F32: { float f = (float)v; memcpy(b + idx * 4, &f, 4); break; }
    case HK_F64: memcpy(b + idx * 8, &v, 8); break;
    case HK_C64: { float f[2] = {(float)v, 0}; memcpy(b + idx * 8, f, 8); break; }
    case HK_C128: { double d[2] = {v, 0}; memcpy(b + idx * 16, d, 16); break; }
    default: b[idx] = hk_small_float_encode(p, v); break;
  }
}

static bool is_floatish(hk_prim p) { return hk_prim_is_float(p) || hk_prim_is_complex(p); }

/* double -> int64 without undefined behaviour: NaN is 0, out of range saturates. */
static int64_t f64_to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

/* double -> the integer type's range (saturating), for set_f64. */
static int64_t f64_to_int_of(hk_prim p, double v) {
  if (isnan(v)) return 0;
  if (p == HK_PRED) return v != 0;
  int bits = hk_prim_bits(p);
  if (hk_prim_is_unsigned_int(p)) {
    if (v <= 0) return 0;
    if (bits == 64) return v >= 0x1p64 ? (int64_t)UINT64_MAX : (int64_t)(uint64_t)v;
    double max = ldexp(1.0, bits) - 1;
    return (int64_t)(v >= max ? max : v);
  }
  double max = ldexp(1.0, bits - 1) - 1, min = -ldexp(1.0, bits - 1);
  if (bits == 64) return f64_to_i64(v);
  return (int64_t)(v >= max ? max : v <= min ? min : v);
}

double hk_literal_get_f64(const hk_literal *l, int64_t i) {
  hk_prim p = (hk_prim)l->shape->elem;
  if (!l->data) return 0;
  if (is_floatish(p)) return load_float(p, l->data, i);
  int64_t v = load_int(p, l->data, i);
  return p == HK_U64 ? (double)(uint64_t)v : (double)v;
}

int64_t hk_literal_get_i64(const hk_literal *l, int64_t i) {
  hk_prim p = (hk_prim)l->shape->elem;
  if (!l->data) return 0;
  if (is_floatish(p)) return f64_to_i64(load_float(p, l->data, i));
  return load_int(p, l->data, i);
}

void hk_literal_set_f64(hk_literal *l, int64_t i, double v) {
  hk_prim p = (hk_prim)l->shape->elem;
  if (!l->data) return;
  if (is_floatish(p)) store_float(p, l->data, i, v);
  else store_int(p, l->data, i, f64_to_int_of(p, v));
}

void hk_literal_set_i64(hk_literal *l, int64_t i, int64_t v) {
  hk_prim p = (hk_prim)l->shape->elem;
  if (!l->data) return;
  if (is_floatish(p)) store_float(p, l->data, i, (double)v);
  else store_int(p, l->data, i, v);
}
