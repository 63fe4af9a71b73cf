/* elementwise.c - unary, binary and ternary elementwise ops with XLA semantics. */
#include "eval/cplx.h"
#include "eval/eval_internal.h"
#include "eval/elem_ops.h"

typedef enum { CLS_FLOAT, CLS_SIGNED, CLS_UNSIGNED, CLS_COMPLEX } elem_class;

static elem_class class_of(hk_prim p) {
  if (hk_prim_is_complex(p)) return CLS_COMPLEX;
  if (hk_prim_is_float(p)) return CLS_FLOAT;
  if (hk_prim_is_signed_int(p)) return CLS_SIGNED;
  return CLS_UNSIGNED;   /* unsigned ints and pred */
}

/* Index of element i in an operand that may be a scalar broadcast. */
static inline int64_t at(const hk_value *v, int64_t i) { return v->n == 1 ? 0 : i; }

void hk_elem_compare(hk_cmp_dir dir, hk_cmp_type ty, const hk_value *a, int64_t ia,
                     const hk_value *b, int64_t ib, hk_value *out, int64_t i) {
  elem_class cls = class_of((hk_prim)a->elem);
  int c = 0;
  bool unordered = false;
  if (cls == CLS_FLOAT || cls == CLS_COMPLEX) {
    double x = hk_value_get_f64(a, ia), y = hk_value_get_f64(b, ib);
    if (ty == HK_CMPT_TOTALORDER) {
      uint64_t kx = total_order_key(x), ky = total_order_key(y);
      c = (kx > ky) - (kx < ky);
    } else if (cls == CLS_COMPLEX) {
      double xi, yi, xr, yr;
      hk_value_get_c(a, ia, &xr, &xi);
      hk_value_get_c(b, ib, &yr, &yi);
      unordered = isnan(xr) || isnan(yr) || isnan(xi) || isnan(yi);
      c = (xr == yr && xi == yi) ? 0 : 1;
    } else {
      unordered = isnan(x) || isnan(y);
      c = (x > y) - (x < y);
    }
  } else if (cls == CLS_SIGNED && ty != HK_CMPT_UNSIGNED) {
    int64_t x = hk_value_get_i64(a, ia), y = hk_value_get_i64(b, ib);
    c = (x > y) - (x < y);
  } else {
    uint64_t m = width_mask((hk_prim)a->elem);
    uint64_t x = (uint64_t)hk_value_get_i64(a, ia) & m, y = (uint64_t)hk_value_get_i64(b, ib) & m;
    c = (x > y) - (x < y);
  }
  ((uint8_t *)out->data)[i] = cmp_result(dir, c, unordered);
}

static hk_status *op_compare(const hk_instr *ins, hk_value *const *ops, hk_value *out) {
  const hk_value *a = ops[0], *b = ops[1];
  hk_cmp_dir dir = ins->attrs ? (hk_cmp_dir)ins->attrs->cmp_dir : HK_CMP_NONE;
  hk_cmp_type ty = ins->attrs ? (hk_cmp_type)ins->attrs->cmp_type : HK_CMPT_DEFAULT;
  if (dir == HK_CMP_NONE) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "compare without direction");
  for (int64_t i = 0; i < out->n; i++) hk_elem_compare(dir, ty, a, at(a, i), b, at(b, i), out, i);
  return NULL;
}

/* ---- fast paths ------------------------------------------------------------ */

static bool f32_binary_fast(hk_opcode op, const hk_value *a, const hk_value *b, hk_value *out) {
  if (a->elem != HK_F32 || a->n != out->n || b->n != out->n) return false;
  const float *x = a->data, *y = b->data;
  float *r = out->data;
  int64_t n = out->n;
  switch (op) {
    case HK_OP_ADD: for (int64_t i = 0; i < n; i++) r[i] = x[i] + y[i]; return true;
    case HK_OP_SUBTRACT: for (int64_t i = 0; i < n; i++) r[i] = x[i] - y[i]; return true;
    case HK_OP_MULTIPLY: for (int64_t i = 0; i < n; i++) r[i] = x[i] * y[i]; return true;
    case HK_OP_DIVIDE: for (int64_t i = 0; i < n; i++) r[i] = x[i] / y[i]; return true;
    default: return false;
  }
}

/* ---- families ----------------------------------------------------------------- */

bool hk_elem_binary(hk_opcode op, const hk_value *a, int64_t ia, const hk_value *b, int64_t ib,
                    hk_value *out, int64_t i) {
  hk_prim p = (hk_prim)a->elem;
  int bits = width_bits(p);
  bool ok = true;
  switch (class_of(p)) {
    case CLS_FLOAT:
      hk_value_set_f64(out, i, f_binary(op, hk_value_get_f64(a, ia), hk_value_get_f64(b, ib), &ok));
      break;
    case CLS_SIGNED:
      hk_value_set_i64(out, i, s_binary(op, hk_value_get_i64(a, ia), hk_value_get_i64(b, ib), bits, &ok));
      break;
    case CLS_UNSIGNED: {
      uint64_t m = width_mask(p);
      uint64_t x = (uint64_t)hk_value_get_i64(a, ia) & m, y = (uint64_t)hk_value_get_i64(b, ib) & m;
      uint64_t r = u_binary(op, x, y, bits, &ok);
      if (p == HK_PRED && (op == HK_OP_ADD || op == HK_OP_MULTIPLY))
        r = op == HK_OP_ADD ? (x | y) : (x & y);
      hk_value_set_i64(out, i, (int64_t)(r & m));
      break;
    }
    case CLS_COMPLEX: {
      double complex x = hk_cplx_get(a, ia), y = hk_cplx_get(b, ib), r;
      if (op == HK_OP_ADD) r = x + y;
      else if (op == HK_OP_SUBTRACT) r = x - y;
      else if (op == HK_OP_MULTIPLY) r = x * y;
      else if (op == HK_OP_DIVIDE) r = x / y;
      else if (op == HK_OP_POWER) r = cpow(x, y);
      else if (op == HK_OP_COMPLEX) r = creal(x) + creal(y) * I;
      else { ok = false; r = 0; }
      hk_cplx_set(out, i, r);
      break;
    }
  }
  return ok;
}

static hk_status *op_binary(const hk_instr *ins, hk_opcode op, hk_value *const *ops,
                            hk_value *out) {
  const hk_value *a = ops[0], *b = ops[1];
  if (f32_binary_fast(op, a, b, out)) return NULL;
  bool ok = true;
  for (int64_t i = 0; i < out->n && ok; i++) ok = hk_elem_binary(op, a, at(a, i), b, at(b, i), out, i);
  if (!ok)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "not supported for element type %s", hk_prim_name((hk_prim)a->elem));
  return NULL;
}

static hk_status *op_complex(hk_value *const *ops, hk_value *out) {
  for (int64_t i = 0; i < out->n; i++)
    hk_value_set_c(out, i, hk_value_get_f64(ops[0], at(ops[0], i)), hk_value_get_f64(ops[1], at(ops[1], i)));
  return NULL;
}

static hk_status *op_unary_complex(const hk_instr *ins, hk_opcode op, const hk_value *a,
                                   hk_value *out) {
  for (int64_t i = 0; i < out->n; i++) {
    double complex x = hk_cplx_get(a, i), r;
    double re = creal(x), im = cimag(x);
    switch (op) {
      case HK_OP_REAL: hk_value_set_f64(out, i, re); continue;
      case HK_OP_IMAG: hk_value_set_f64(out, i, im); continue;
      case HK_OP_ABS: hk_value_set_f64(out, i, cabs(x)); continue;
      case HK_OP_IS_FINITE: hk_value_set_i64(out, i, isfinite(re) && isfinite(im)); continue;
      case HK_OP_NEGATE: r = -x; break;
      case HK_OP_COPY: r = x; break;
      case HK_OP_EXP: r = cexp(x); break;
      case HK_OP_LOG: r = clog(x); break;
      case HK_OP_SQRT: r = csqrt(x); break;
      case HK_OP_COS: r = ccos(x); break;
      case HK_OP_SIN: r = csin(x); break;
      case HK_OP_TANH: r = ctanh(x); break;
      default:
        return hk_eval_error(ins, HK_UNIMPLEMENTED, "not supported for complex element types");
    }
    hk_cplx_set(out, i, r);
  }
  return NULL;
}

bool hk_elem_unary(hk_opcode op, const hk_value *a, int64_t i, hk_value *out) {
  hk_prim p = (hk_prim)a->elem;
  elem_class cls = class_of(p);
  bool ok = true;
  if (cls == CLS_COMPLEX) return false;
  if (op == HK_OP_IS_FINITE) {
    hk_value_set_i64(out, i, isfinite(hk_value_get_f64(a, i)));
  } else if (cls == CLS_FLOAT) {
    if (op == HK_OP_NOT) ok = false;
    else hk_value_set_f64(out, i, f_unary(op, hk_value_get_f64(a, i), &ok));
  } else {
    int64_t x = hk_value_get_i64(a, i);
    if (op == HK_OP_CEIL || op == HK_OP_FLOOR || op == HK_OP_ROUND_NEAREST_AFZ ||
        op == HK_OP_ROUND_NEAREST_EVEN)
      hk_value_set_i64(out, i, x);
    else
      hk_value_set_i64(out, i, int_unary(op, x, width_bits(p), hk_prim_is_signed_int(p), p == HK_PRED, &ok));
  }
  return ok;
}

static hk_status *op_unary(const hk_instr *ins, hk_opcode op, const hk_value *a, hk_value *out) {
  hk_prim p = (hk_prim)a->elem;
  if (class_of(p) == CLS_COMPLEX) return op_unary_complex(ins, op, a, out);
  bool ok = true;
  for (int64_t i = 0; i < out->n && ok; i++) ok = hk_elem_unary(op, a, i, out);
  if (!ok)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "not supported for element type %s", hk_prim_name(p));
  return NULL;
}

static hk_status *op_select(hk_value *const *ops, hk_value *out) {
  const hk_value *c = ops[0], *t = ops[1], *f = ops[2];
  int es = hk_esize(out->elem);
  const uint8_t *cd = c->data;
  uint8_t *r = out->data;
  for (int64_t i = 0; i < out->n; i++) {
    const hk_value *src = cd[at(c, i)] ? t : f;
    memcpy(r + i * es, (const uint8_t *)src->data + at(src, i) * es, (size_t)es);
  }
  return NULL;
}

static hk_status *op_clamp(const hk_instr *ins, hk_value *const *ops, hk_value *out) {
  hk_value *mx[2] = {ops[0], ops[1]};
  HK_TRY(op_binary(ins, HK_OP_MAXIMUM, mx, out));
  hk_value *mn[2] = {out, ops[2]};
  hk_value *tmp = hk_value_new_array((hk_prim)out->elem, out->rank, out->dims);
  hk_status *st = op_binary(ins, HK_OP_MINIMUM, mn, tmp);
  if (!st) memcpy(out->data, tmp->data, (size_t)out->nbytes);
  hk_value_release(tmp);
  return st;
}

/* XLA's reduce-precision on an IEEE bit pattern of `nbits` bits. */
static uint64_t reduce_precision_bits(uint64_t x, int nbits, int src_exp, int src_mant,
                                      int exp_bits, int mant_bits) {
  if (mant_bits < src_mant) {
    uint64_t last = UINT64_C(1) << (src_mant - mant_bits);
    uint64_t base_bias = (last >> 1) - 1;
    uint64_t bias = ((x & last) >> (src_mant - mant_bits)) + base_bias;
    x = (x + bias) & ~(last - 1);
  }
  if (exp_bits < src_exp) {
    uint64_t sign = UINT64_C(1) << (nbits - 1);
    uint64_t exp_mask = ((UINT64_C(1) << src_exp) - 1) << src_mant;
    int64_t ebias = (INT64_C(1) << (src_exp - 1)) - 1;
    int64_t rbias = (INT64_C(1) << (exp_bits - 1)) - 1;
    uint64_t e = x & exp_mask;
    bool over = e > ((uint64_t)(ebias + rbias) << src_mant);
    bool under = e <= ((uint64_t)(ebias - rbias) << src_mant);
    uint64_t szero = x & sign;
    x = over ? (szero | exp_mask) : under ? szero : x;
  }
  return x;
}

static hk_status *op_reduce_precision(const hk_instr *ins, const hk_value *a, hk_value *out) {
  int eb = ins->attrs ? (int)ins->attrs->exponent_bits : 0;
  int mb = ins->attrs ? (int)ins->attrs->mantissa_bits : 0;
  if (eb < 1 || mb < 0) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad exponent/mantissa bits");
  bool f64 = a->elem == HK_F64;
  for (int64_t i = 0; i < out->n; i++) {
    double v = hk_value_get_f64(a, i);
    double r;
    if (f64) {
      uint64_t b;
      memcpy(&b, &v, 8);
      b = reduce_precision_bits(b, 64, 11, 52, eb < 11 ? eb : 11, mb < 52 ? mb : 52);
      memcpy(&r, &b, 8);
    } else {
      float f = (float)v;
      uint32_t b;
      memcpy(&b, &f, 4);
      b = (uint32_t)reduce_precision_bits(b, 32, 8, 23, eb < 8 ? eb : 8, mb < 23 ? mb : 23);
      memcpy(&f, &b, 4);
      r = f;
    }
    if (isnan(v)) r = mb > 0 ? v : copysign(INFINITY, v);
    hk_value_set_f64(out, i, r);
  }
  return NULL;
}

hk_status *hk_op_elementwise(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                             hk_value **out) {
  (void)d;
  hk_opcode op = (hk_opcode)ins->opcode;
  if (op == HK_OP_COPY) {
    *out = hk_value_retain(ops[0]);
    return NULL;
  }
  if (ins->shape->elem == HK_TUPLE || !hk_prim_is_array((hk_prim)ins->shape->elem))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "elementwise op with a non-array result");
  for (int k = 0; k < ins->n_operands; k++)
    if (ops[k]->elem == HK_TUPLE || (ops[k]->n != 1 && ops[k]->n != hk_shape_elements(ins->shape)))
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d has %lld elements, result %lld", k,
                           (long long)ops[k]->n, (long long)hk_shape_elements(ins->shape));
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  hk_status *st;
  switch (op) {
    case HK_OP_COMPARE: st = op_compare(ins, ops, r); break;
    case HK_OP_SELECT: st = op_select(ops, r); break;
    case HK_OP_CLAMP: st = op_clamp(ins, ops, r); break;
    case HK_OP_COMPLEX: st = op_complex(ops, r); break;
    case HK_OP_REDUCE_PRECISION: st = op_reduce_precision(ins, ops[0], r); break;
    default:
      if (ins->n_operands == 1) st = op_unary(ins, op, ops[0], r);
      else if (ins->n_operands == 2) st = op_binary(ins, op, ops, r);
      else st = hk_eval_error(ins, HK_UNIMPLEMENTED, "elementwise op not supported by the evaluator");
  }
  if (st) {
    hk_value_release(r);
    return st;
  }
  *out = r;
  return NULL;
}

/* ---- convert ---------------------------------------------------------------- */

void hk_elem_convert(const hk_value *v, int64_t i, hk_value *r, int64_t j) {
  hk_prim from = (hk_prim)v->elem, to = (hk_prim)r->elem;
  elem_class fc = class_of(from), tc = class_of(to);
  if (fc == CLS_COMPLEX || tc == CLS_COMPLEX) {
    double re, im;
    hk_value_get_c(v, i, &re, &im);
    hk_value_set_c(r, j, re, im);
  } else if (fc == CLS_FLOAT) {
    hk_value_set_f64(r, j, hk_value_get_f64(v, i));   /* saturating, NaN -> 0 */
  } else if (tc == CLS_FLOAT) {
    int64_t x = hk_value_get_i64(v, i);
    double dx = from == HK_U64 ? (double)(uint64_t)x : (double)x;
    hk_value_set_f64(r, j, dx);
  } else {
    hk_value_set_i64(r, j, hk_value_get_i64(v, i));    /* wraps */
  }
}

hk_value *hk_convert_value(const hk_value *v, hk_prim to) {
  hk_value *r = hk_value_new_array(to, v->rank, v->dims);
  hk_prim from = (hk_prim)v->elem;
  if (from == to) {
    memcpy(r->data, v->data, (size_t)r->nbytes);
    return r;
  }
  if (from == HK_F32 && to == HK_F64) {   /* exact: skip the per-element dispatch */
    const float *src = v->data;
    double *dst = r->data;
    for (int64_t i = 0; i < v->n; i++) dst[i] = src[i];
    return r;
  }
  for (int64_t i = 0; i < v->n; i++) hk_elem_convert(v, i, r, i);
  return r;
}

hk_status *hk_op_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                         hk_value **out) {
  (void)d;
  if (ops[0]->elem == HK_TUPLE || !hk_prim_is_array((hk_prim)ins->shape->elem))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "convert of a non-array");
  *out = hk_convert_value(ops[0], (hk_prim)ins->shape->elem);
  return NULL;
}

hk_status *hk_op_bitcast_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                 hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  int fb = hk_prim_bits((hk_prim)a->elem), tb = hk_prim_bits((hk_prim)r->elem);
  if (fb == tb && hk_esize(a->elem) == hk_esize(r->elem) && r->nbytes == a->nbytes) {
    memcpy(r->data, a->data, (size_t)r->nbytes);
  } else if (r->nbytes == a->nbytes && fb % 8 == 0 && tb % 8 == 0) {
    memcpy(r->data, a->data, (size_t)r->nbytes);  /* little-endian reinterpretation */
  } else {
    hk_value_release(r);
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "bitcast-convert between %s and %s",
                         hk_prim_name((hk_prim)a->elem), hk_prim_name((hk_prim)ins->shape->elem));
  }
  *out = r;
  return NULL;
}

/* ---- stochastic-convert ------------------------------------------------------ */

/* XLA's StochasticConvertOp: float x to integer type `to`, rounding |x| up
 * when its fraction (as a fixed-point number of the random operand's width)
 * exceeds the random bits; saturating, NaN -> 0. */
static int64_t stochastic_round(double x, uint64_t random, int rbits, hk_prim fp, hk_prim to) {
  int w = hk_prim_bits(to);
  bool sgn = hk_prim_is_signed_int(to);
  int64_t maxv = sgn ? (int64_t)((UINT64_C(1) << (w - 1)) - 1) : (int64_t)((w >= 64 ? 0 : UINT64_C(1) << w) - 1);
  int64_t minv = sgn ? -maxv - 1 : 0;
  if (isnan(x)) return 0;
  if (isinf(x)) return signbit(x) ? minv : maxv;
  if (x >= hk_round_to_type(fp, (double)maxv)) return maxv;
  if (x <= hk_round_to_type(fp, (double)minv)) return minv;
  bool neg = signbit(x);
  double a = fabs(x);
  int64_t t = (int64_t)a;
  double frac = a - (double)t;                /* exact: the fraction of a float */
  if (frac != 0) {
    uint64_t fixed = (uint64_t)ldexp(frac, rbits);
    if (random < fixed) {
      if (t == maxv) return minv;
      t++;
    }
  }
  return hk_wrap_int(to, neg ? -t : t);
}

hk_status *hk_op_stochastic_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                    hk_value **out) {
  (void)d;
  const hk_value *x = ops[0], *r = ops[1];
  hk_prim to = (hk_prim)ins->shape->elem;
  if (ins->n_operands != 2 || x->elem == HK_TUPLE || r->elem == HK_TUPLE || x->n != r->n ||
      !hk_prim_is_float((hk_prim)x->elem) || !hk_prim_is_unsigned_int((hk_prim)r->elem) ||
      !hk_prim_is_integral(to))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT,
                         "stochastic-convert takes a float operand and unsigned random bits of its shape "
                         "and returns integers");
  hk_value *v = hk_value_for_shape_dims(ins->shape);
  int rbits = hk_prim_bits((hk_prim)r->elem);
  for (int64_t i = 0; i < v->n; i++)
    hk_value_set_i64(v, i, stochastic_round(hk_value_get_f64(x, i), (uint64_t)hk_value_get_i64(r, i), rbits,
                                            (hk_prim)x->elem, to));
  *out = v;
  return NULL;
}
