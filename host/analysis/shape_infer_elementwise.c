/* shape_infer_elementwise.c - shape inference for unary, binary and ternary elementwise ops and conversions. */
#include <string.h>

#include "analysis_internal.h"

static hk_prim elem_of(const hk_shape *s) { return (hk_prim)s->elem; }

static hk_prim complex_component(hk_prim p) {
  return p == HK_C128 ? HK_F64 : p == HK_C64 ? HK_F32 : p;
}

static hk_status *need_array(ana_ctx *c, int k) {
  const hk_shape *s = c->i->operands[k]->shape;
  if (!hk_shape_is_array(s)) {
    char b[128];
    return ana_fail(c->i, "operand %d must be an array, has shape %s", k,
                    ana_shape_str(s, b, sizeof b));
  }
  return NULL;
}

static const hk_shape *with_elem(ana_ctx *c, const hk_shape *s, hk_prim e) {
  if (s->elem == e) return s;
  return ana_array(c->m, e, s->rank, s->dims, s->dynamic);
}

/* ---- unary ---------------------------------------------------------------- */

typedef enum { T_FLOAT, T_FLOAT_COMPLEX, T_SIGNED_FLOAT_COMPLEX, T_NUMERIC,
               T_PRED_INT, T_INT, T_ANY } type_rule;

static bool type_ok(type_rule r, hk_prim p) {
  bool f = hk_prim_is_float(p), cx = hk_prim_is_complex(p);
  switch (r) {
    case T_FLOAT: return f;
    case T_FLOAT_COMPLEX: return f || cx;
    case T_SIGNED_FLOAT_COMPLEX: return f || cx || hk_prim_is_signed_int(p);
    case T_NUMERIC: return f || cx || hk_prim_is_integral(p);
    case T_PRED_INT: return p == HK_PRED || hk_prim_is_integral(p);
    case T_INT: return hk_prim_is_integral(p);
    case T_ANY: return true;
  }
  return false;
}

static const char *rule_name(type_rule r) {
  switch (r) {
    case T_FLOAT: return "floating point";
    case T_FLOAT_COMPLEX: return "floating point or complex";
    case T_SIGNED_FLOAT_COMPLEX: return "signed integral, floating point or complex";
    case T_NUMERIC: return "integral, floating point or complex";
    case T_PRED_INT: return "pred or integral";
    case T_INT: return "integral";
    case T_ANY: return "any";
  }
  return "?";
}

static bool unary_rule(hk_opcode op, type_rule *r) {
  switch (op) {
    case HK_OP_CEIL: case HK_OP_FLOOR: case HK_OP_ROUND_NEAREST_AFZ:
    case HK_OP_ROUND_NEAREST_EVEN: case HK_OP_IS_FINITE:
    case HK_OP_REDUCE_PRECISION:
      *r = T_FLOAT; return true;
    case HK_OP_COS: case HK_OP_SIN: case HK_OP_TAN: case HK_OP_TANH:
    case HK_OP_EXP: case HK_OP_EXPM1: case HK_OP_LOG: case HK_OP_LOG1P:
    case HK_OP_LOGISTIC: case HK_OP_RSQRT: case HK_OP_SQRT: case HK_OP_CBRT:
    case HK_OP_ERF: case HK_OP_REAL: case HK_OP_IMAG:
      *r = T_FLOAT_COMPLEX; return true;
    case HK_OP_ABS: case HK_OP_SIGN:
      *r = T_SIGNED_FLOAT_COMPLEX; return true;
    case HK_OP_NEGATE:
      *r = T_NUMERIC; return true;
    case HK_OP_NOT:
      *r = T_PRED_INT; return true;
    case HK_OP_CLZ: case HK_OP_POPCNT:
      *r = T_INT; return true;
    default:
      return false;
  }
}

static hk_status *infer_unary(ana_ctx *c, type_rule r, const hk_shape **out) {
  HK_TRY(need_array(c, 0));
  const hk_shape *s = c->i->operands[0]->shape;
  hk_prim e = elem_of(s);
  hk_opcode op = (hk_opcode)c->i->opcode;
  if (!type_ok(r, e))
    return ana_fail(c->i, "%s expects a %s operand, got %s", hk_opcode_name(op),
                    rule_name(r), hk_prim_name(e));
  if (op == HK_OP_IS_FINITE) e = HK_PRED;
  if (op == HK_OP_ABS || op == HK_OP_REAL || op == HK_OP_IMAG) e = complex_component(e);
  if (op == HK_OP_REDUCE_PRECISION && c->i->attrs &&
      (c->i->attrs->exponent_bits < 1 || c->i->attrs->mantissa_bits < 0))
    return ana_fail(c->i, "reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0");
  *out = with_elem(c, s, e);
  return NULL;
}

/* ---- binary --------------------------------------------------------------- */

static bool binary_rule(hk_opcode op, type_rule *r) {
  switch (op) {
    case HK_OP_ADD: case HK_OP_SUBTRACT: case HK_OP_MULTIPLY:
    case HK_OP_DIVIDE: case HK_OP_MAXIMUM: case HK_OP_MINIMUM:
    case HK_OP_REMAINDER: case HK_OP_POWER: case HK_OP_COMPARE:
      *r = T_ANY; return true;
    case HK_OP_ATAN2:
      *r = T_FLOAT_COMPLEX; return true;
    case HK_OP_AND: case HK_OP_OR: case HK_OP_XOR:
      *r = T_PRED_INT; return true;
    case HK_OP_SHIFT_LEFT: case HK_OP_SHIFT_RIGHT_ARITHMETIC:
    case HK_OP_SHIFT_RIGHT_LOGICAL:
      *r = T_INT; return true;
    case HK_OP_COMPLEX:
      *r = T_FLOAT; return true;
    default:
      return false;
  }
}

/* Dimensions of two same-dims operands with dynamic flags merged. */
static const hk_shape *merged(ana_ctx *c, const hk_shape *a, const hk_shape *b,
                              hk_prim e) {
  if (!b->dynamic || a->dynamic == b->dynamic) return with_elem(c, a, e);
  bool dyn[HK_MAX_RANK];
  for (int d = 0; d < a->rank; d++)
    dyn[d] = (a->dynamic && a->dynamic[d]) || b->dynamic[d];
  return ana_array(c->m, e, a->rank, a->dims, dyn);
}

static hk_status *infer_binary(ana_ctx *c, type_rule r, const hk_shape **out) {
  HK_TRY(need_array(c, 0));
  HK_TRY(need_array(c, 1));
  const hk_shape *a = c->i->operands[0]->shape, *b = c->i->operands[1]->shape;
  hk_opcode op = (hk_opcode)c->i->opcode;
  char sa[128], sb[128];
  if (!ana_same_dims(a, b))
    return ana_fail(c->i, "%s operands have incompatible shapes %s and %s",
                    hk_opcode_name(op), ana_shape_str(a, sa, sizeof sa),
                    ana_shape_str(b, sb, sizeof sb));
  if (!ana_same_elem_ignoring_fp(elem_of(a), elem_of(b)))
    return ana_fail(c->i, "%s operands have different element types %s and %s",
                    hk_opcode_name(op), hk_prim_name(elem_of(a)),
                    hk_prim_name(elem_of(b)));
  if (!type_ok(r, elem_of(a)))
    return ana_fail(c->i, "%s expects %s operands, got %s", hk_opcode_name(op),
                    rule_name(r), hk_prim_name(elem_of(a)));
  hk_prim e = ana_higher_precision(elem_of(a), elem_of(b));
  if (op == HK_OP_COMPARE) e = HK_PRED;
  if (op == HK_OP_COMPLEX) {
    if (e != HK_F32 && e != HK_F64)
      return ana_fail(c->i, "complex expects f32 or f64 operands, got %s", hk_prim_name(e));
    e = e == HK_F64 ? HK_C128 : HK_C64;
  }
  *out = merged(c, a, b, e);
  return NULL;
}

/* ---- ternary -------------------------------------------------------------- */

static hk_status *infer_select(ana_ctx *c, const hk_shape **out) {
  for (int k = 0; k < 3; k++) HK_TRY(need_array(c, k));
  const hk_shape *p = c->i->operands[0]->shape;
  const hk_shape *t = c->i->operands[1]->shape, *f = c->i->operands[2]->shape;
  char s1[128], s2[128];
  if (!ana_same_dims(t, f) || !ana_same_elem_ignoring_fp(elem_of(t), elem_of(f)))
    return ana_fail(c->i, "operands to select must be the same shape, got %s and %s",
                    ana_shape_str(t, s1, sizeof s1), ana_shape_str(f, s2, sizeof s2));
  if (p->elem != HK_PRED)
    return ana_fail(c->i, "select's predicate must have element type pred, got %s",
                    hk_prim_name(elem_of(p)));
  /* XLA's InferSelectShape: a scalar predicate picks whole operands */
  if (!ana_is_scalar(p) && !ana_same_dims(p, t))
    return ana_fail(c->i, "select's predicate %s and operands %s must have the same dimensions",
                    ana_shape_str(p, s1, sizeof s1), ana_shape_str(t, s2, sizeof s2));
  *out = merged(c, t, f, ana_higher_precision(elem_of(t), elem_of(f)));
  return NULL;
}

static hk_status *infer_clamp(ana_ctx *c, const hk_shape **out) {
  for (int k = 0; k < 3; k++) HK_TRY(need_array(c, k));
  const hk_shape *lo = c->i->operands[0]->shape, *x = c->i->operands[1]->shape,
                 *hi = c->i->operands[2]->shape;
  char s1[128], s2[128];
  const hk_shape *bounds[2] = {lo, hi};
  for (int k = 0; k < 2; k++) {
    const hk_shape *b = bounds[k];
    if (!ana_is_scalar(b) && !ana_same_dims(b, x))
      return ana_fail(c->i, "clamp bound %s must be a scalar or match the operand %s",
                      ana_shape_str(b, s1, sizeof s1), ana_shape_str(x, s2, sizeof s2));
    if (!ana_same_elem_ignoring_fp(elem_of(b), elem_of(x)))
      return ana_fail(c->i, "clamp with different element types %s and %s",
                      hk_prim_name(elem_of(b)), hk_prim_name(elem_of(x)));
  }
  *out = x;
  return NULL;
}

/* ---- conversions ---------------------------------------------------------- */

static hk_status *infer_convert(ana_ctx *c, const hk_shape **out) {
  HK_TRY(need_array(c, 0));
  const hk_shape *s = c->i->operands[0]->shape;
  hk_prim to = elem_of(c->i->shape);
  if (!hk_prim_is_array(to))
    return ana_fail(c->i, "convert to non-array type %s", hk_prim_name(to));
  if (hk_prim_is_complex(elem_of(s)) && !hk_prim_is_complex(to))
    return ana_fail(c->i, "conversion from complex to real type %s => %s is not implemented",
                    hk_prim_name(elem_of(s)), hk_prim_name(to));
  *out = with_elem(c, s, to);
  return NULL;
}

static hk_status *infer_bitcast_convert(ana_ctx *c, const hk_shape **out) {
  HK_TRY(need_array(c, 0));
  const hk_shape *s = c->i->operands[0]->shape;
  hk_prim from = elem_of(s), to = elem_of(c->i->shape);
  if (!hk_prim_is_array(to))
    return ana_fail(c->i, "bitcast-convert to non-array type %s", hk_prim_name(to));
  if (hk_prim_is_complex(from) != hk_prim_is_complex(to))
    return ana_fail(c->i, "bitcast-convert between complex and real types %s and %s",
                    hk_prim_name(from), hk_prim_name(to));
  int in = hk_prim_bits(from), outb = hk_prim_bits(to);
  if (in == outb) {
    *out = with_elem(c, s, to);
    return NULL;
  }
  int64_t dims[HK_MAX_RANK];
  ana_copy_dims(dims, s);
  if (in < outb) {
    if (outb % in != 0 || s->rank == 0 || s->dims[s->rank - 1] != outb / in)
      return ana_fail(c->i, "bitcast-convert from %s to %s needs a last dimension of %d",
                      hk_prim_name(from), hk_prim_name(to), in ? outb / in : 0);
    *out = ana_array(c->m, to, s->rank - 1, dims, NULL);
    return NULL;
  }
  if (in % outb != 0 || s->rank + 1 > HK_MAX_RANK)
    return ana_fail(c->i, "bitcast-convert from %s to %s: bit widths do not divide",
                    hk_prim_name(from), hk_prim_name(to));
  dims[s->rank] = in / outb;
  *out = ana_array(c->m, to, s->rank + 1, dims, NULL);
  return NULL;
}

static hk_status *infer_stochastic_convert(ana_ctx *c, const hk_shape **out) {
  HK_TRY(need_array(c, 0));
  HK_TRY(need_array(c, 1));
  const hk_shape *s = c->i->operands[0]->shape, *r = c->i->operands[1]->shape;
  if (!hk_prim_is_float(elem_of(s)))
    return ana_fail(c->i, "stochastic-convert operand must be floating point, got %s",
                    hk_prim_name(elem_of(s)));
  if (!hk_prim_is_unsigned_int(elem_of(r)) ||
      hk_prim_bits(elem_of(r)) != hk_prim_bits(elem_of(s)))
    return ana_fail(c->i, "stochastic-convert random operand must be an unsigned integer "
                    "of the operand's bit width, got %s", hk_prim_name(elem_of(r)));
  if (!ana_same_dims(s, r))
    return ana_fail(c->i, "stochastic-convert operand and random bits differ in dimensions");
  *out = with_elem(c, s, elem_of(c->i->shape));
  return NULL;
}

hk_status *ana_infer_elementwise(ana_ctx *c, bool *handled, const hk_shape **out) {
  hk_opcode op = (hk_opcode)c->i->opcode;
  type_rule r;
  *handled = true;
  if (unary_rule(op, &r)) return infer_unary(c, r, out);
  if (binary_rule(op, &r)) return infer_binary(c, r, out);
  switch (op) {
    case HK_OP_SELECT: return infer_select(c, out);
    case HK_OP_CLAMP: return infer_clamp(c, out);
    case HK_OP_CONVERT: return infer_convert(c, out);
    case HK_OP_BITCAST_CONVERT: return infer_bitcast_convert(c, out);
    case HK_OP_STOCHASTIC_CONVERT: return infer_stochastic_convert(c, out);
    case HK_OP_COPY: case HK_OP_DOMAIN: case HK_OP_OPTIMIZATION_BARRIER:
      *out = c->i->operands[0]->shape;
      return NULL;
    default:
      *handled = false;
      return NULL;
  }
}
