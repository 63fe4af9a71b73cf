/* elem_ops.h - the per-element bodies of the elementwise ops (XLA
 * semantics), inline so elementwise.c and the scalar programs'
 * per-type kernels (scalar_prog.c) compute the same bits from one text. */
#ifndef HK_EVAL_ELEM_OPS_H
#define HK_EVAL_ELEM_OPS_H

#include <math.h>

#include "eval/eval_internal.h"

static inline uint64_t width_mask(hk_prim p) {
  int b = p == HK_PRED ? 1 : hk_prim_bits(p);
  return b >= 64 ? UINT64_MAX : (UINT64_C(1) << b) - 1;
}

static inline int width_bits(hk_prim p) { return p == HK_PRED ? 1 : hk_prim_bits(p); }

/* ---- floats ------------------------------------------------------------- */

static inline double f_unary(hk_opcode op, double x, bool *ok) {
  switch (op) {
    case HK_OP_ABS: return fabs(x);
    case HK_OP_NEGATE: return -x;
    case HK_OP_CEIL: return ceil(x);
    case HK_OP_FLOOR: return floor(x);
    case HK_OP_CBRT: return cbrt(x);
    case HK_OP_COS: return cos(x);
    case HK_OP_SIN: return sin(x);
    case HK_OP_TAN: return tan(x);
    case HK_OP_TANH: return tanh(x);
    case HK_OP_EXP: return exp(x);
    case HK_OP_EXPM1: return expm1(x);
    case HK_OP_LOG: return log(x);
    case HK_OP_LOG1P: return log1p(x);
    case HK_OP_LOGISTIC: return 1.0 / (1.0 + exp(-x));
    case HK_OP_SQRT: return sqrt(x);
    case HK_OP_RSQRT: return 1.0 / sqrt(x);
    case HK_OP_ERF: return erf(x);
    case HK_OP_ROUND_NEAREST_AFZ: return round(x);
    case HK_OP_ROUND_NEAREST_EVEN: return nearbyint(x);
    case HK_OP_SIGN: return isnan(x) ? x : x == 0 ? x : copysign(1.0, x);
    case HK_OP_REAL: case HK_OP_COPY: return x;
    case HK_OP_IMAG: return 0;
    default: *ok = false; return 0;
  }
}

static inline double f_binary(hk_opcode op, double x, double y, bool *ok) {
  switch (op) {
    case HK_OP_ADD: return x + y;
    case HK_OP_SUBTRACT: return x - y;
    case HK_OP_MULTIPLY: return x * y;
    case HK_OP_DIVIDE: return x / y;
    case HK_OP_REMAINDER: return fmod(x, y);
    case HK_OP_POWER: return pow(x, y);
    case HK_OP_ATAN2: return atan2(x, y);
    case HK_OP_MAXIMUM: return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
    case HK_OP_MINIMUM: return isnan(x) || isnan(y) ? NAN : (x < y ? x : y);
    default: *ok = false; return 0;
  }
}

/* ---- integers ----------------------------------------------------------- */

static inline int64_t s_min_of(int bits) { return bits >= 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1)); }

static inline uint64_t u_pow(uint64_t b, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return r;
}

static inline int64_t s_binary(hk_opcode op, int64_t x, int64_t y, int bits, bool *ok) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  uint64_t sh = uy;
  switch (op) {
    case HK_OP_ADD: return (int64_t)(ux + uy);
    case HK_OP_SUBTRACT: return (int64_t)(ux - uy);
    case HK_OP_MULTIPLY: return (int64_t)(ux * uy);
    case HK_OP_DIVIDE:
      if (y == 0) return -1;
      if (y == -1 && x == s_min_of(bits)) return x;
      return x / y;
    case HK_OP_REMAINDER:
      if (y == 0) return x;
      if (y == -1) return 0;
      return x % y;
    case HK_OP_MAXIMUM: return x > y ? x : y;
    case HK_OP_MINIMUM: return x < y ? x : y;
    case HK_OP_AND: return x & y;
    case HK_OP_OR: return x | y;
    case HK_OP_XOR: return x ^ y;
    case HK_OP_SHIFT_LEFT: return sh >= (uint64_t)bits ? 0 : (int64_t)(ux << sh);
    case HK_OP_SHIFT_RIGHT_ARITHMETIC:
      return sh >= (uint64_t)bits ? (x < 0 ? -1 : 0) : x >> sh;
    case HK_OP_SHIFT_RIGHT_LOGICAL: {
      uint64_t m = bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
      return sh >= (uint64_t)bits ? 0 : (int64_t)((ux & m) >> sh);
    }
    case HK_OP_POWER:
      if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
      return (int64_t)u_pow(ux, uy);
    default: *ok = false; return 0;
  }
}

static inline uint64_t u_binary(hk_opcode op, uint64_t x, uint64_t y, int bits, bool *ok) {
  switch (op) {
    case HK_OP_ADD: return x + y;
    case HK_OP_SUBTRACT: return x - y;
    case HK_OP_MULTIPLY: return x * y;
    case HK_OP_DIVIDE: return y == 0 ? UINT64_MAX : x / y;
    case HK_OP_REMAINDER: return y == 0 ? x : x % y;
    case HK_OP_MAXIMUM: return x > y ? x : y;
    case HK_OP_MINIMUM: return x < y ? x : y;
    case HK_OP_AND: return x & y;
    case HK_OP_OR: return x | y;
    case HK_OP_XOR: return x ^ y;
    case HK_OP_SHIFT_LEFT: return y >= (uint64_t)bits ? 0 : x << y;
    case HK_OP_SHIFT_RIGHT_ARITHMETIC:
    case HK_OP_SHIFT_RIGHT_LOGICAL: return y >= (uint64_t)bits ? 0 : x >> y;
    case HK_OP_POWER: return u_pow(x, y);
    default: *ok = false; return 0;
  }
}

static inline int popcount64(uint64_t x) { return __builtin_popcountll(x); }

/* An integer unary op on x of a `bits`-wide type (signed or not, pred). */
static inline int64_t int_unary(hk_opcode op, int64_t x, int bits, bool sgn, bool pred, bool *ok) {
  uint64_t ux = (uint64_t)x & (bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1);
  switch (op) {
    case HK_OP_ABS: return sgn && x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case HK_OP_NEGATE: return (int64_t)(0 - (uint64_t)x);
    case HK_OP_NOT: return pred ? !x : ~x;
    case HK_OP_POPCNT: return popcount64(ux);
    case HK_OP_CLZ: return ux == 0 ? bits : bits - (64 - __builtin_clzll(ux));
    case HK_OP_SIGN: return sgn ? (x > 0) - (x < 0) : x != 0;
    case HK_OP_COPY: case HK_OP_REAL: return x;
    case HK_OP_IMAG: return 0;
    default: *ok = false; return 0;
  }
}

/* ---- comparisons -------------------------------------------------------- */

static inline bool cmp_result(hk_cmp_dir dir, int c, bool unordered) {
  if (unordered) return dir == HK_CMP_NE;
  switch (dir) {
    case HK_CMP_EQ: return c == 0;
    case HK_CMP_NE: return c != 0;
    case HK_CMP_LT: return c < 0;
    case HK_CMP_LE: return c <= 0;
    case HK_CMP_GT: return c > 0;
    case HK_CMP_GE: return c >= 0;
    default: return false;
  }
}

static inline uint64_t total_order_key(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
}

#endif
