/* shape_infer.c - shape inference entry point, opcode arities and shared shape helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

/* ---- messages ------------------------------------------------------------ */

static hk_status *vfail(hk_code code, const hk_instr *i, const char *fmt,
                        va_list ap) {
  hk_status *st = hk_verror(code, fmt, ap);
  const char *comp = i && i->parent && i->parent->name ? i->parent->name : "?";
  return hk_status_prefix(st, "instruction '%s' in computation '%s'",
                          i && i->name ? i->name : "?", comp);
}

hk_status *ana_fail(const hk_instr *i, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = vfail(HK_INVALID_ARGUMENT, i, fmt, ap);
  va_end(ap);
  return st;
}

hk_status *ana_fail_code(hk_code code, const hk_instr *i, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = vfail(code, i, fmt, ap);
  va_end(ap);
  return st;
}

const char *ana_shape_str(const hk_shape *s, char *buf, size_t cap) {
  if (!s) {
    snprintf(buf, cap, "(none)");
    return buf;
  }
  char *t = hk_shape_to_string(s);
  snprintf(buf, cap, "%s", t ? t : "?");
  free(t);
  return buf;
}

/* ---- comparisons ------------------------------------------------------- */

bool ana_same_elem_ignoring_fp(hk_prim a, hk_prim b) {
  if (a == b) return true;
  return hk_prim_is_float(a) && hk_prim_is_float(b);
}

static bool compat(const hk_shape *a, const hk_shape *b, bool ignore_fp) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (a->elem != b->elem &&
      !(ignore_fp && ana_same_elem_ignoring_fp((hk_prim)a->elem, (hk_prim)b->elem)))
    return false;
  if (a->elem == HK_TUPLE) {
    if (a->n_tuple != b->n_tuple) return false;
    for (int k = 0; k < a->n_tuple; k++)
      if (!compat(a->tuple[k], b->tuple[k], ignore_fp)) return false;
    return true;
  }
  if (!hk_prim_is_array((hk_prim)a->elem)) return true;
  return ana_same_dims(a, b);
}

bool ana_compatible(const hk_shape *a, const hk_shape *b) { return compat(a, b, false); }
bool ana_compatible_ignoring_fp(const hk_shape *a, const hk_shape *b) {
  return compat(a, b, true);
}

bool ana_same_dims(const hk_shape *a, const hk_shape *b) {
  if (!hk_shape_is_array(a) || !hk_shape_is_array(b)) return false;
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

bool ana_is_scalar(const hk_shape *s) { return hk_shape_is_array(s) && s->rank == 0; }

/* ---- construction ------------------------------------------------------ */

const hk_shape *ana_array(hk_module *m, hk_prim elem, int rank,
                          const int64_t *dims, const bool *dyn) {
  hk_shape t;
  memset(&t, 0, sizeof t);
  t.elem = (uint8_t)elem;
  t.rank = (uint8_t)rank;
  t.dims = dims;
  bool any = false;
  for (int d = 0; dyn && d < rank; d++) any |= dyn[d];
  t.dynamic = any ? dyn : NULL;
  return hk_shape_intern(m, &t);
}

const hk_shape *ana_scalar(hk_module *m, hk_prim elem) {
  return ana_array(m, elem, 0, NULL, NULL);
}

const hk_shape *ana_tuple(hk_module *m, int n, const hk_shape *const *elems) {
  return hk_shape_tuple(m, n, elems);
}

const hk_shape *ana_single_or_tuple(hk_module *m, int n,
                                    const hk_shape *const *elems) {
  return n == 1 ? elems[0] : ana_tuple(m, n, elems);
}

const char *ana_raw_attr(const hk_instr *i, const char *name) {
  if (!i->attrs) return NULL;
  for (int k = 0; k < i->attrs->n_raw; k++)
    if (strcmp(i->attrs->raw[k].name, name) == 0) return i->attrs->raw[k].value;
  return NULL;
}

int ana_raw_dims(const hk_instr *i, const char *name, int64_t *out, int cap) {
  const char *v = ana_raw_attr(i, name);
  int n = 0;
  while (v && *v && n < cap) {
    char *end;
    if ((*v >= '0' && *v <= '9') || *v == '-') {
      out[n++] = strtoll(v, &end, 10);
      v = end;
    } else {
      v++;
    }
  }
  return n;
}

/* ---- arity --------------------------------------------------------------- */

int ana_opcode_arity(hk_opcode op) {
  switch (op) {
    case HK_OP_CONSTANT: case HK_OP_IOTA: case HK_OP_PARAMETER:
    case HK_OP_PARTITION_ID: case HK_OP_REPLICA_ID:
    case HK_OP_RNG_GET_AND_UPDATE_STATE:
      return 0;
    case HK_OP_ABS: case HK_OP_ALL_GATHER_DONE: case HK_OP_ALL_REDUCE_DONE:
    case HK_OP_ASYNC_DONE: case HK_OP_ASYNC_UPDATE: case HK_OP_BITCAST:
    case HK_OP_BITCAST_CONVERT: case HK_OP_BROADCAST: case HK_OP_CBRT:
    case HK_OP_CEIL: case HK_OP_CHOLESKY: case HK_OP_CLZ:
    case HK_OP_COLLECTIVE_PERMUTE_DONE: case HK_OP_CONVERT: case HK_OP_COPY:
    case HK_OP_COPY_DONE: case HK_OP_COPY_START: case HK_OP_COS:
    case HK_OP_DOMAIN: case HK_OP_ERF: case HK_OP_EXP: case HK_OP_EXPM1:
    case HK_OP_FFT: case HK_OP_FLOOR: case HK_OP_GET_DIMENSION_SIZE:
    case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_IMAG: case HK_OP_INFEED:
    case HK_OP_IS_FINITE: case HK_OP_LOG: case HK_OP_LOG1P:
    case HK_OP_LOGISTIC: case HK_OP_NEGATE: case HK_OP_NOT:
    case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_POPCNT: case HK_OP_REAL:
    case HK_OP_RECV: case HK_OP_RECV_DONE: case HK_OP_REDUCE_PRECISION:
    case HK_OP_RESHAPE: case HK_OP_REVERSE: case HK_OP_RNG_BIT_GENERATOR:
    case HK_OP_ROUND_NEAREST_AFZ: case HK_OP_ROUND_NEAREST_EVEN:
    case HK_OP_RSQRT: case HK_OP_SEND_DONE: case HK_OP_SIGN: case HK_OP_SIN:
    case HK_OP_SLICE: case HK_OP_SQRT: case HK_OP_TAN: case HK_OP_TANH:
    case HK_OP_TOPK: case HK_OP_TRANSPOSE: case HK_OP_WHILE:
      return 1;
    case HK_OP_ADD: case HK_OP_ADD_DEPENDENCY: case HK_OP_AND: case HK_OP_ATAN2:
    case HK_OP_COMPARE: case HK_OP_COMPLEX: case HK_OP_CONVOLUTION:
    case HK_OP_DIVIDE: case HK_OP_GATHER: case HK_OP_MAXIMUM:
    case HK_OP_MINIMUM: case HK_OP_MULTIPLY: case HK_OP_OR: case HK_OP_OUTFEED:
    case HK_OP_PAD: case HK_OP_POWER: case HK_OP_REMAINDER: case HK_OP_RNG:
    case HK_OP_SEND: case HK_OP_SET_DIMENSION_SIZE: case HK_OP_SHIFT_LEFT:
    case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL:
    case HK_OP_STOCHASTIC_CONVERT: case HK_OP_SUBTRACT:
    case HK_OP_TRIANGULAR_SOLVE: case HK_OP_XOR:
      return 2;
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_CLAMP: case HK_OP_RAGGED_DOT:
    case HK_OP_SELECT: case HK_OP_SELECT_AND_SCATTER:
      return 3;
    case HK_OP_BATCH_NORM_GRAD: case HK_OP_BATCH_NORM_INFERENCE:
      return 5;
    case HK_OP_RAGGED_ALL_TO_ALL:
      return 6;
    default:
      return -1;
  }
}

/* ---- dispatch ------------------------------------------------------------ */

typedef hk_status *(*family_fn)(ana_ctx *, bool *, const hk_shape **);

hk_status *ana_infer(ana_ctx *c, const hk_shape **out) {
  const hk_instr *i = c->i;
  *out = NULL;
  if (i->opcode >= HK_OPCODE_COUNT)
    return ana_fail(i, "unknown opcode %d", (int)i->opcode);
  int arity = ana_opcode_arity((hk_opcode)i->opcode);
  if (arity >= 0 && i->n_operands != arity)
    return ana_fail(i, "expected %d operands for %s, has %d", arity,
                    hk_opcode_name((hk_opcode)i->opcode), (int)i->n_operands);
  static const family_fn families[] = {
      ana_infer_elementwise, ana_infer_data,    ana_infer_reduce,
      ana_infer_contract,    ana_infer_control, ana_infer_collective,
  };
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    bool handled = false;
    hk_status *st = families[f](c, &handled, out);
    if (st || handled) return st;
  }
  return ana_fail_code(HK_UNIMPLEMENTED, i, "shape inference for %s is not implemented",
                       hk_opcode_name((hk_opcode)i->opcode));
}

hk_status *hk_infer_shape(hk_module *m, const hk_instr *i, const hk_shape **out) {
  ana_ctx c = {m, i, false};
  return ana_infer(&c, out);
}

/* numeric_limits<T>::max_exponent and ::digits of a floating type. */
static void float_range(hk_prim p, int *max_exp, int *digits) {
  switch (p) {
    case HK_F16: *max_exp = 16, *digits = 11; return;
    case HK_BF16: *max_exp = 128, *digits = 8; return;
    case HK_F32: *max_exp = 128, *digits = 24; return;
    case HK_F64: *max_exp = 1024, *digits = 53; return;
    case HK_F8E5M2: case HK_F8E5M2FNUZ: *max_exp = 16, *digits = 3; return;
    case HK_F8E4M3: case HK_F8E4M3FNUZ: *max_exp = 8, *digits = 4; return;
    case HK_F8E4M3FN: *max_exp = 9, *digits = 4; return;
    case HK_F8E4M3B11FNUZ: *max_exp = 5, *digits = 4; return;
    case HK_F8E3M4: *max_exp = 4, *digits = 5; return;
    case HK_F4E2M1FN: *max_exp = 3, *digits = 2; return;
    case HK_F8E8M0FNU: *max_exp = 128, *digits = 1; return;
    default: *max_exp = -1, *digits = -1; return;
  }
}

/* XLA's primitive_util::HigherPrecisionType: complex first, then more float
 * range, more float precision, more bits, signed over unsigned. */
hk_prim ana_higher_precision(hk_prim a, hk_prim b) {
  int ka[5], kb[5];
  hk_prim t[2] = {a, b};
  int *k[2] = {ka, kb};
  for (int j = 0; j < 2; j++) {
    hk_prim p = t[j];
    bool cplx = hk_prim_is_complex(p);
    hk_prim comp = p == HK_C64 ? HK_F32 : p == HK_C128 ? HK_F64 : p;
    k[j][0] = cplx;
    float_range(comp, &k[j][1], &k[j][2]);
    k[j][3] = hk_prim_bits(comp);
    k[j][4] = hk_prim_is_signed_int(comp);
  }
  for (int i = 0; i < 5; i++)
    if (ka[i] != kb[i]) return ka[i] > kb[i] ? a : b;
  return a;
}
