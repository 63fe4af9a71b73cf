/* shape_infer_data.c - shape inference for data movement (broadcast, reshape, slice, pad, concat, ...) and leaf ops. */
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

#define OPND(c, k) ((c)->i->operands[k]->shape)

static hk_prim elem_of(const hk_shape *s) { return (hk_prim)s->elem; }

static hk_status *need_array_shape(ana_ctx *c, const hk_shape *s, const char *what) {
  if (hk_shape_is_array(s)) return NULL;
  char b[128];
  return ana_fail(c->i, "%s must be an array, has shape %s", what,
                  ana_shape_str(s, b, sizeof b));
}

static hk_status *need_declared_array(ana_ctx *c) {
  return need_array_shape(c, c->i->shape, "the declared shape");
}

static hk_status *need_operand_array(ana_ctx *c, int k) {
  return need_array_shape(c, OPND(c, k), k == 0 ? "operand 0" : "the operand");
}

/* ---- broadcast / reshape / transpose ----------------------------------- */

static hk_status *infer_broadcast(ana_ctx *c, const hk_shape **out) {
  const hk_instr *i = c->i;
  const hk_shape *op = OPND(c, 0), *decl = i->shape;
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(need_declared_array(c));
  if (op->elem != decl->elem)
    return ana_fail(i, "broadcast changes the element type from %s to %s",
                    hk_prim_name(elem_of(op)), hk_prim_name(elem_of(decl)));
  if (i->n_dims != op->rank)
    return ana_fail(i, "broadcast has %d dimensions but its operand has rank %d",
                    (int)i->n_dims, (int)op->rank);
  for (int d = 0; d < op->rank; d++) {
    int64_t od = i->dims[d];
    if (od < 0 || od >= decl->rank || decl->dims[od] != op->dims[d])
      return ana_fail(i, "broadcast dimension %d maps operand dimension of size %lld "
                      "to output dimension %lld which does not match",
                      d, (long long)op->dims[d], (long long)od);
  }
  *out = ana_array(c->m, elem_of(decl), decl->rank, decl->dims, decl->dynamic);
  return NULL;
}

static hk_status *infer_reshape(ana_ctx *c, const hk_shape **out) {
  if (c->i->n_operands < 1) return ana_fail(c->i, "reshape needs an operand");
  const hk_shape *op = OPND(c, 0), *decl = c->i->shape;
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(need_declared_array(c));
  if (op->elem != decl->elem)
    return ana_fail(c->i, "reshape changes the element type from %s to %s",
                    hk_prim_name(elem_of(op)), hk_prim_name(elem_of(decl)));
  if (hk_shape_elements(op) != hk_shape_elements(decl)) {
    char a[128], b[128];
    return ana_fail(c->i, "reshape from %s to %s changes the number of elements",
                    ana_shape_str(op, a, sizeof a), ana_shape_str(decl, b, sizeof b));
  }
  if (c->i->opcode == HK_OP_DYNAMIC_RESHAPE) {
    if (c->i->n_operands != decl->rank + 1)
      return ana_fail(c->i, "dynamic-reshape needs %d size operands, has %d",
                      (int)decl->rank, (int)c->i->n_operands - 1);
    for (int k = 1; k < c->i->n_operands; k++)
      if (OPND(c, k)->elem != HK_S32)
        return ana_fail(c->i, "dynamic-reshape size operand %d must be s32", k);
  }
  *out = ana_array(c->m, elem_of(decl), decl->rank, decl->dims, decl->dynamic);
  return NULL;
}

static hk_status *check_permutation(ana_ctx *c, int rank) {
  bool seen[HK_MAX_RANK] = {false};
  if (c->i->n_dims != rank)
    return ana_fail(c->i, "transpose dimensions have %d entries for rank %d",
                    (int)c->i->n_dims, rank);
  for (int d = 0; d < rank; d++) {
    int64_t p = c->i->dims[d];
    if (p < 0 || p >= rank || seen[p])
      return ana_fail(c->i, "transpose dimensions are not a permutation");
    seen[p] = true;
  }
  return NULL;
}

static hk_status *infer_transpose(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(check_permutation(c, op->rank));
  int64_t dims[HK_MAX_RANK];
  bool dyn[HK_MAX_RANK];
  for (int d = 0; d < op->rank; d++) {
    dims[d] = op->dims[c->i->dims[d]];
    dyn[d] = op->dynamic && op->dynamic[c->i->dims[d]];
  }
  *out = ana_array(c->m, elem_of(op), op->rank, dims, dyn);
  return NULL;
}

/* ---- slices ----------------------------------------------------------------- */

static hk_status *infer_slice(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  const hk_attrs *a = c->i->attrs;
  HK_TRY(need_operand_array(c, 0));
  int n = a ? a->n_slice : 0;
  if (n != op->rank)
    return ana_fail(c->i, "slice has %d dimensions for an operand of rank %d", n,
                    (int)op->rank);
  int64_t dims[HK_MAX_RANK];
  for (int d = 0; d < n; d++) {
    hk_slice_dim s = a->slice[d];
    if (s.stride <= 0 || s.start < 0 || s.start > s.limit || s.limit > op->dims[d])
      return ana_fail(c->i, "slice [%lld:%lld:%lld] is out of bounds for dimension %d of size %lld",
                      (long long)s.start, (long long)s.limit, (long long)s.stride, d,
                      (long long)op->dims[d]);
    dims[d] = (s.limit - s.start + s.stride - 1) / s.stride;
  }
  *out = ana_array(c->m, elem_of(op), n, dims, op->dynamic);
  return NULL;
}

/* Checks the start-index operands from `first` on, as XLA's
 * InferDynamicSliceShape does: a rank-1 first index is the legacy form (one
 * integral vector with an entry per operand dimension, even for a rank-1
 * operand), anything else one integral scalar per dimension. */
static hk_status *check_start_indices(ana_ctx *c, int first, int rank) {
  int n = c->i->n_operands - first;
  const hk_shape *v = n >= 1 ? OPND(c, first) : NULL;
  if (v && hk_shape_is_array(v) && v->rank == 1) {
    if (n != 1)
      return ana_fail(c->i, "a start index vector must be the only index operand, has %d", n);
    if (!hk_prim_is_integral(elem_of(v)))
      return ana_fail(c->i, "start indices must be of integral type");
    if (v->dims[0] != rank)
      return ana_fail(c->i, "start index vector has %lld entries for rank %d",
                      (long long)v->dims[0], rank);
    return NULL;
  }
  if (n != rank)
    return ana_fail(c->i, "expected %d start indices, got %d", rank, n);
  hk_prim t = HK_PRIM_INVALID;
  for (int k = first; k < c->i->n_operands; k++) {
    const hk_shape *s = OPND(c, k);
    if (!ana_is_scalar(s) || !hk_prim_is_integral(elem_of(s)))
      return ana_fail(c->i, "start index operand %d must be an integral scalar", k);
    if (t != HK_PRIM_INVALID && elem_of(s) != t)
      return ana_fail(c->i, "start indices must all have the same type");
    t = elem_of(s);
  }
  return NULL;
}

static hk_status *infer_dynamic_slice(ana_ctx *c, const hk_shape **out) {
  if (c->i->n_operands < 1) return ana_fail(c->i, "dynamic-slice needs an operand");
  const hk_shape *op = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(check_start_indices(c, 1, op->rank));
  hk_i64s sizes = c->i->attrs ? c->i->attrs->dynamic_slice_sizes : (hk_i64s){0, NULL};
  if (sizes.n != op->rank)
    return ana_fail(c->i, "dynamic_slice_sizes has %d entries for rank %d", (int)sizes.n,
                    (int)op->rank);
  for (int d = 0; d < sizes.n; d++)
    if (sizes.v[d] < 0 || sizes.v[d] > op->dims[d])
      return ana_fail(c->i, "slice size %lld is out of range for dimension %d of size %lld",
                      (long long)sizes.v[d], d, (long long)op->dims[d]);
  *out = ana_array(c->m, elem_of(op), sizes.n, sizes.v, NULL);
  return NULL;
}

static hk_status *infer_dynamic_update_slice(ana_ctx *c, const hk_shape **out) {
  if (c->i->n_operands < 2) return ana_fail(c->i, "dynamic-update-slice needs an operand and an update");
  const hk_shape *op = OPND(c, 0), *up = OPND(c, 1);
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(need_array_shape(c, up, "the update"));
  HK_TRY(check_start_indices(c, 2, op->rank));
  char a[128], b[128];
  if (up->rank != op->rank)
    return ana_fail(c->i, "update %s and operand %s differ in rank",
                    ana_shape_str(up, a, sizeof a), ana_shape_str(op, b, sizeof b));
  if (!ana_same_elem_ignoring_fp(elem_of(op), elem_of(up)))
    return ana_fail(c->i, "update element type %s differs from operand's %s",
                    hk_prim_name(elem_of(up)), hk_prim_name(elem_of(op)));
  for (int d = 0; d < op->rank; d++)
    if (up->dims[d] > op->dims[d])
      return ana_fail(c->i, "update %s is larger than operand %s in dimension %d",
                      ana_shape_str(up, a, sizeof a), ana_shape_str(op, b, sizeof b), d);
  *out = op;
  return NULL;
}

/* ---- pad / concatenate / reverse / iota ---------------------------------- */

static hk_status *infer_pad(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0), *pv = OPND(c, 1);
  const hk_attrs *a = c->i->attrs;
  HK_TRY(need_operand_array(c, 0));
  if (!ana_is_scalar(pv))
    return ana_fail(c->i, "pad value must be a scalar");
  if (!ana_same_elem_ignoring_fp(elem_of(op), elem_of(pv)))
    return ana_fail(c->i, "pad value type %s differs from operand type %s",
                    hk_prim_name(elem_of(pv)), hk_prim_name(elem_of(op)));
  int n = a ? a->n_pad : 0;
  if (n != op->rank)
    return ana_fail(c->i, "padding config has %d dimensions for rank %d", n, (int)op->rank);
  int64_t dims[HK_MAX_RANK];
  for (int d = 0; d < n; d++) {
    hk_pad_dim p = a->pad[d];
    if (p.interior < 0)
      return ana_fail(c->i, "interior padding cannot be negative: %lld", (long long)p.interior);
    int64_t sz = op->dims[d];
    dims[d] = p.lo + p.hi + sz + (sz > 0 ? (sz - 1) * p.interior : 0);
    if (dims[d] < 0)
      return ana_fail(c->i, "padding results in a negative size for dimension %d", d);
  }
  *out = ana_array(c->m, elem_of(op), n, dims, op->dynamic);
  return NULL;
}

static hk_status *infer_concatenate(ana_ctx *c, const hk_shape **out) {
  const hk_instr *i = c->i;
  if (i->n_operands < 1) return ana_fail(i, "concatenate needs at least one operand");
  if (i->n_dims != 1) return ana_fail(i, "concatenate needs exactly one dimension");
  const hk_shape *first = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  int64_t cd = i->dims[0];
  if (cd < 0 || cd >= first->rank)
    return ana_fail(i, "concatenate dimension %lld is out of range for rank %d",
                    (long long)cd, (int)first->rank);
  int64_t dims[HK_MAX_RANK];
  ana_copy_dims(dims, first);
  char a[128], b[128];
  for (int k = 1; k < i->n_operands; k++) {
    const hk_shape *s = OPND(c, k);
    bool ok = hk_shape_is_array(s) && s->rank == first->rank &&
              ana_same_elem_ignoring_fp(elem_of(s), elem_of(first));
    for (int d = 0; ok && d < s->rank; d++)
      if (d != cd && s->dims[d] != first->dims[d]) ok = false;
    if (!ok)
      return ana_fail(i, "operand %d %s cannot be concatenated with %s along dimension %lld",
                      k, ana_shape_str(s, a, sizeof a), ana_shape_str(first, b, sizeof b),
                      (long long)cd);
    dims[cd] += s->dims[cd];
  }
  *out = ana_array(c->m, elem_of(first), first->rank, dims, NULL);
  return NULL;
}

static hk_status *infer_reverse(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  bool seen[HK_MAX_RANK] = {false};
  for (int k = 0; k < c->i->n_dims; k++) {
    int64_t d = c->i->dims[k];
    if (d < 0 || d >= op->rank || seen[d])
      return ana_fail(c->i, "reverse dimension %lld is invalid for rank %d", (long long)d,
                      (int)op->rank);
    seen[d] = true;
  }
  *out = op;
  return NULL;
}

static hk_status *infer_iota(ana_ctx *c, const hk_shape **out) {
  const hk_shape *s = c->i->shape;
  HK_TRY(need_declared_array(c));
  if (s->rank == 0) return ana_fail(c->i, "iota does not support scalars");
  int64_t d = c->i->n_dims ? c->i->dims[0] : 0;
  if (d < 0 || d >= s->rank)
    return ana_fail(c->i, "iota dimension %lld is out of range for rank %d", (long long)d,
                    (int)s->rank);
  hk_prim e = elem_of(s);
  if (!hk_prim_is_integral(e) && !hk_prim_is_float(e) && !hk_prim_is_complex(e))
    return ana_fail(c->i, "iota of type %s is not supported", hk_prim_name(e));
  *out = s;
  return NULL;
}

/* ---- dynamic dimensions ------------------------------------------------- */

static hk_status *dimension_attr(ana_ctx *c, int rank, int64_t *d) {
  if (c->i->n_dims != 1) return ana_fail(c->i, "expects one dimension attribute");
  *d = c->i->dims[0];
  if (*d < 0 || *d >= rank)
    return ana_fail(c->i, "dimension %lld is out of range for rank %d", (long long)*d, rank);
  return NULL;
}

static hk_status *infer_dimension_size(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  int64_t d = 0;
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(dimension_attr(c, op->rank, &d));
  if (c->i->opcode == HK_OP_GET_DIMENSION_SIZE) {
    *out = ana_scalar(c->m, HK_S32);
    return NULL;
  }
  const hk_shape *v = OPND(c, 1);
  if (!ana_is_scalar(v) || v->elem != HK_S32)
    return ana_fail(c->i, "set-dimension-size value must be an s32 scalar");
  bool dyn[HK_MAX_RANK];
  for (int k = 0; k < op->rank; k++) dyn[k] = (op->dynamic && op->dynamic[k]) || k == d;
  *out = ana_array(c->m, elem_of(op), op->rank, op->dims, dyn);
  return NULL;
}

/* ---- leaves and random numbers ------------------------------------------ */

static hk_status *infer_rng(ana_ctx *c, const hk_shape **out) {
  const hk_shape *a = OPND(c, 0), *b = OPND(c, 1);
  if (!ana_is_scalar(a) || !ana_is_scalar(b))
    return ana_fail(c->i, "rng expects scalar operands");
  hk_prim e = elem_of(a);
  if (e != elem_of(b) || e != elem_of(c->i->shape))
    return ana_fail(c->i, "rng expects the result and both operands to have one element type");
  const char *dist = c->i->attrs ? c->i->attrs->rng_distribution : NULL;
  if (dist && strcmp(dist, "rng_normal") == 0 && !hk_prim_is_float(e))
    return ana_fail(c->i, "rng_normal needs a floating point type, got %s", hk_prim_name(e));
  if (!hk_prim_is_float(e) && !hk_prim_is_integral(e) && e != HK_PRED)
    return ana_fail(c->i, "rng of type %s is not supported", hk_prim_name(e));
  *out = c->i->shape;
  return NULL;
}

static hk_status *infer_rng_bit_generator(ana_ctx *c, const hk_shape **out) {
  const hk_shape *s = c->i->shape;
  if (hk_shape_is_tuple(s)) {
    if (s->n_tuple != 2)
      return ana_fail(c->i, "rng-bit-generator must return a 2-tuple");
    if (!ana_compatible(OPND(c, 0), s->tuple[0]))
      return ana_fail(c->i, "rng-bit-generator state shape differs between input and output");
  }
  *out = s;
  return NULL;
}

static hk_status *infer_topk(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  int64_t k = c->i->attrs ? c->i->attrs->k : 0;
  if (op->rank < 1) return ana_fail(c->i, "topk needs an operand of rank >= 1");
  if (k < 0 || op->dims[op->rank - 1] < k)
    return ana_fail(c->i, "topk k=%lld exceeds the last dimension %lld", (long long)k,
                    (long long)op->dims[op->rank - 1]);
  int64_t dims[HK_MAX_RANK];
  ana_copy_dims(dims, op);
  dims[op->rank - 1] = k;
  const hk_shape *el[2] = {ana_array(c->m, elem_of(op), op->rank, dims, NULL),
                           ana_array(c->m, HK_S32, op->rank, dims, NULL)};
  *out = ana_tuple(c->m, 2, el);
  return NULL;
}

/* ---- linear algebra -------------------------------------------------------- */

static hk_status *infer_fft(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0);
  const hk_attrs *a = c->i->attrs;
  HK_TRY(need_operand_array(c, 0));
  const char *type = a && a->fft_type ? a->fft_type : "FFT";
  hk_i64s len = a ? a->fft_length : (hk_i64s){0, NULL};
  if (len.n < 1 || len.n > 3) return ana_fail(c->i, "FFT only supports ranks 1-3; got %d.", len.n);
  int base = op->rank - len.n;
  bool real_in = strcmp(type, "RFFT") == 0, real_out = strcmp(type, "IRFFT") == 0;
  hk_prim e = elem_of(op);
  if (real_in ? !(e == HK_F32 || e == HK_F64) : !hk_prim_is_complex(e))
    return ana_fail(c->i, "%s does not accept operands of type %s", type, hk_prim_name(e));
  if (base < 0)
    return ana_fail(c->i, "FFT of rank %d requires input of at least same rank; got input of rank %d",
                    len.n, op->rank);
  /* XLA's InferFftShape: FFT and IFFT keep the operand shape whatever
   * fft_length says; RFFT matches every transformed dimension, IRFFT all
   * but the last, whose size is fft_length/2+1 (unbounded '?' sizes pass) */
  if (!real_in && !real_out) {
    *out = op;
    return NULL;
  }
  int64_t dims[HK_MAX_RANK];
  ana_copy_dims(dims, op);
  int64_t last_len = len.v[len.n - 1];
  for (int k = 0; k < (real_out ? len.n - 1 : len.n); k++)
    if (op->dims[base + k] >= 0 && op->dims[base + k] != len.v[k])
      return ana_fail(c->i, "%s requires innermost dimensions match fft_length but dimension %d is %lld and should be %lld.",
                      type, base + k, (long long)op->dims[base + k], (long long)len.v[k]);
  int64_t last_in = op->dims[op->rank - 1];
  if (real_out && (last_in != 0 || last_len != 0) && last_in >= 0 && last_in != last_len / 2 + 1)
    return ana_fail(c->i, "IRFFT requires innermost dimension matches fft_length/2+1, but dimension %d is %lld and should be %lld.",
                    op->rank - 1, (long long)last_in, (long long)(last_len / 2 + 1));
  hk_prim re;
  if (real_in) {
    re = e == HK_F64 ? HK_C128 : HK_C64;
    if (last_len != 0) dims[op->rank - 1] = last_len / 2 + 1;
  } else {
    re = e == HK_C128 ? HK_F64 : HK_F32;
    dims[op->rank - 1] = last_len;
  }
  *out = ana_array(c->m, re, op->rank, dims, NULL);
  return NULL;
}

static hk_status *infer_cholesky(ana_ctx *c, const hk_shape **out) {
  const hk_shape *a = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  if (!hk_prim_is_float(elem_of(a)) && !hk_prim_is_complex(elem_of(a)))
    return ana_fail(c->i, "cholesky needs a floating point or complex operand");
  if (a->rank < 2 || a->dims[a->rank - 1] != a->dims[a->rank - 2])
    return ana_fail(c->i, "cholesky needs square matrices in the two minor dimensions");
  *out = a;
  return NULL;
}

static bool raw_true(const hk_instr *i, const char *name) {
  const char *v = ana_raw_attr(i, name);
  return v && strcmp(v, "true") == 0;
}

static hk_status *infer_triangular_solve(ana_ctx *c, const hk_shape **out) {
  const hk_shape *a = OPND(c, 0), *b = OPND(c, 1);
  HK_TRY(need_operand_array(c, 0));
  HK_TRY(need_array_shape(c, b, "operand 1"));
  if (a->elem != b->elem || (!hk_prim_is_float(elem_of(a)) && !hk_prim_is_complex(elem_of(a))))
    return ana_fail(c->i, "triangular-solve needs floating point or complex operands of one type");
  if (a->rank < 2 || a->rank != b->rank)
    return ana_fail(c->i, "triangular-solve needs operands of equal rank >= 2");
  int r = a->rank;
  if (a->dims[r - 1] != a->dims[r - 2])
    return ana_fail(c->i, "triangular-solve's a must be square in its minor dimensions");
  for (int d = 0; d < r - 2; d++)
    if (a->dims[d] != b->dims[d])
      return ana_fail(c->i, "triangular-solve batch dimensions differ");
  int64_t want = raw_true(c->i, "left_side") ? b->dims[r - 2] : b->dims[r - 1];
  if (a->dims[r - 1] != want)
    return ana_fail(c->i, "triangular-solve shapes of a and b do not agree");
  *out = b;
  return NULL;
}

static hk_status *batch_norm_feature(ana_ctx *c, int64_t *f) {
  const hk_shape *op = OPND(c, 0);
  HK_TRY(need_operand_array(c, 0));
  const char *v = ana_raw_attr(c->i, "feature_index");
  *f = v ? strtoll(v, NULL, 10) : 0;
  if (*f < 0 || *f >= op->rank)
    return ana_fail(c->i, "feature_index %lld is out of range for rank %d", (long long)*f,
                    (int)op->rank);
  if (!hk_prim_is_float(elem_of(op)))
    return ana_fail(c->i, "batch norm needs a floating point operand");
  for (int k = 1; k < c->i->n_operands; k++) {
    const hk_shape *s = OPND(c, k);
    bool full = c->i->opcode == HK_OP_BATCH_NORM_GRAD && k == 4;
    bool ok = full ? ana_compatible(s, op)
                   : hk_shape_is_array(s) && s->rank == 1 && s->dims[0] == op->dims[*f] &&
                         s->elem == op->elem;
    if (!ok) {
      char b[128];
      return ana_fail(c->i, "batch norm operand %d has unexpected shape %s", k,
                      ana_shape_str(s, b, sizeof b));
    }
  }
  return NULL;
}

static hk_status *infer_batch_norm(ana_ctx *c, const hk_shape **out) {
  int64_t f = 0;
  HK_TRY(batch_norm_feature(c, &f));
  const hk_shape *op = OPND(c, 0);
  if (c->i->opcode == HK_OP_BATCH_NORM_INFERENCE) {
    *out = op;
    return NULL;
  }
  const hk_shape *feat = ana_array(c->m, elem_of(op), 1, &op->dims[f], NULL);
  const hk_shape *el[3] = {op, feat, feat};
  *out = ana_tuple(c->m, 3, el);
  return NULL;
}

hk_status *ana_infer_data(ana_ctx *c, bool *handled, const hk_shape **out) {
  *handled = true;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_BROADCAST: return infer_broadcast(c, out);
    case HK_OP_RESHAPE: case HK_OP_DYNAMIC_RESHAPE: return infer_reshape(c, out);
    case HK_OP_TRANSPOSE: return infer_transpose(c, out);
    case HK_OP_SLICE: return infer_slice(c, out);
    case HK_OP_DYNAMIC_SLICE: return infer_dynamic_slice(c, out);
    case HK_OP_DYNAMIC_UPDATE_SLICE: return infer_dynamic_update_slice(c, out);
    case HK_OP_PAD: return infer_pad(c, out);
    case HK_OP_CONCATENATE: return infer_concatenate(c, out);
    case HK_OP_REVERSE: return infer_reverse(c, out);
    case HK_OP_IOTA: return infer_iota(c, out);
    case HK_OP_GET_DIMENSION_SIZE: case HK_OP_SET_DIMENSION_SIZE:
      return infer_dimension_size(c, out);
    case HK_OP_RNG: return infer_rng(c, out);
    case HK_OP_RNG_BIT_GENERATOR: return infer_rng_bit_generator(c, out);
    case HK_OP_TOPK: return infer_topk(c, out);
    case HK_OP_FFT: return infer_fft(c, out);
    case HK_OP_CHOLESKY: return infer_cholesky(c, out);
    case HK_OP_TRIANGULAR_SOLVE: return infer_triangular_solve(c, out);
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_BATCH_NORM_INFERENCE:
    case HK_OP_BATCH_NORM_GRAD:
      return infer_batch_norm(c, out);
    case HK_OP_RNG_GET_AND_UPDATE_STATE: {
      int64_t two = 2;
      *out = ana_array(c->m, HK_U64, 1, &two, NULL);
      return NULL;
    }
    case HK_OP_PARTITION_ID: case HK_OP_REPLICA_ID:
      *out = ana_scalar(c->m, HK_U32);
      return NULL;
    case HK_OP_CONSTANT: {
      const hk_literal *l = c->i->attrs ? c->i->attrs->literal : NULL;
      *out = l && l->shape ? l->shape : c->i->shape;
      return NULL;
    }
    /* The declared shape is the definition for these. */
    case HK_OP_PARAMETER: case HK_OP_CUSTOM_CALL: case HK_OP_BITCAST:
      *out = c->i->shape;
      return NULL;
    default:
      *handled = false;
      return NULL;
  }
}
