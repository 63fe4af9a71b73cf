/* data_movement.c - ops that move elements without arithmetic: broadcast,
 * reshape, transpose, slice, dynamic-slice, dynamic-update-slice, pad,
 * concatenate, reverse, iota. */
#include "eval/eval_internal.h"

static inline void copy_elem(uint8_t *dst, const uint8_t *src, int es) {
  switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, (size_t)es);
  }
}

/* dst (dense, out_dims) [i] = src[base + sum_j idx_j * st[j]] (elements). */
static void strided_copy(uint8_t *dst, const uint8_t *src, int rank, const int64_t *out_dims,
                         const int64_t *st, int64_t base, int es) {
  int64_t n = hk_dims_product(rank, out_dims);
  if (n == 0) return;
  if (rank == 0) {
    copy_elem(dst, src + base * es, es);
    return;
  }
  int64_t idx[HK_MAX_RANK] = {0};
  int64_t inner = out_dims[rank - 1], ist = st[rank - 1];
  int64_t off = base;
  for (int64_t o = 0; o < n; o += inner) {
    if (ist == 1) {
      memcpy(dst + o * es, src + off * es, (size_t)(inner * es));
    } else {
      for (int64_t k = 0; k < inner; k++) copy_elem(dst + (o + k) * es, src + (off + k * ist) * es, es);
    }
    for (int j = rank - 2; j >= 0; j--) {
      idx[j]++;
      off += st[j];
      if (idx[j] < out_dims[j]) break;
      off -= st[j] * idx[j];
      idx[j] = 0;
    }
  }
}

static hk_status *need_array(const hk_instr *ins, const hk_value *v) {
  if (v->elem == HK_TUPLE || !hk_prim_is_array((hk_prim)v->elem))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand is not an array");
  return NULL;
}

hk_status *hk_op_broadcast(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                           hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  HK_TRY(need_array(ins, a));
  const hk_shape *s = ins->shape;
  if (ins->n_dims != a->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "dimensions= has %d entries, operand rank %d",
                         ins->n_dims, a->rank);
  int64_t sst[HK_MAX_RANK], st[HK_MAX_RANK] = {0};
  hk_strides(a->rank, a->dims, sst);
  for (int i = 0; i < a->rank; i++) {
    int64_t od = ins->dims[i];
    if (od < 0 || od >= s->rank || s->dims[od] != a->dims[i])
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad broadcast dimension %d", i);
    st[od] = sst[i];
  }
  hk_value *r = hk_value_for_shape_dims(s);
  strided_copy(r->data, a->data, s->rank, s->dims, st, 0, hk_esize(a->elem));
  *out = r;
  return NULL;
}

hk_status *hk_op_reshape(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                         hk_value **out) {
  (void)d;
  HK_TRY(need_array(ins, ops[0]));
  if (ops[0]->n != hk_shape_elements(ins->shape))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "element count changes");
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  memcpy(r->data, ops[0]->data, (size_t)r->nbytes);
  *out = r;
  return NULL;
}

hk_status *hk_op_transpose(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                           hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  HK_TRY(need_array(ins, a));
  if (ins->n_dims != a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad permutation");
  int64_t sst[HK_MAX_RANK], st[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, sst);
  for (int i = 0; i < a->rank; i++) {
    if (ins->dims[i] < 0 || ins->dims[i] >= a->rank)
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad permutation");
    st[i] = sst[ins->dims[i]];
  }
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  strided_copy(r->data, a->data, a->rank, r->dims, st, 0, hk_esize(a->elem));
  *out = r;
  return NULL;
}

hk_status *hk_op_slice(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                       hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  HK_TRY(need_array(ins, a));
  if (!ins->attrs || ins->attrs->n_slice != a->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "slice= does not match the operand rank");
  int64_t sst[HK_MAX_RANK], st[HK_MAX_RANK], base = 0;
  hk_strides(a->rank, a->dims, sst);
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  for (int i = 0; i < a->rank; i++) {
    const hk_slice_dim *sd = &ins->attrs->slice[i];
    int64_t stride = sd->stride ? sd->stride : 1;
    int64_t cnt = sd->limit > sd->start ? (sd->limit - sd->start + stride - 1) / stride : 0;
    if (sd->start < 0 || sd->limit > a->dims[i] || cnt != r->dims[i]) {
      hk_value_release(r);
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "slice dimension %d out of range", i);
    }
    st[i] = sst[i] * stride;
    base += sd->start * sst[i];
  }
  strided_copy(r->data, a->data, a->rank, r->dims, st, base, hk_esize(a->elem));
  *out = r;
  return NULL;
}


/* Start indices from scalar operands first..first+rank-1 (or one vector
 * operand), clamped so that size fits. */
static hk_status *start_indices(const hk_instr *ins, hk_value *const *ops, int first,
                                const hk_value *a, const int64_t *size, int64_t *start) {
  int n_idx = ins->n_operands - first;
  if (n_idx == 1 && ops[first]->rank == 1 && a->rank != 1) {
    if (ops[first]->n != a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "index vector size");
    for (int i = 0; i < a->rank; i++) start[i] = hk_value_get_i64(ops[first], i);
  } else {
    if (n_idx != a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "expected %d start indices", a->rank);
    for (int i = 0; i < a->rank; i++) {
      const hk_value *iv = ops[first + i];
      if (iv->n != 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "start index %d is not a scalar", i);
      int64_t x = hk_value_get_i64(iv, 0);
      if (iv->elem == HK_U64 && x < 0) x = INT64_MAX;
      start[i] = x;
    }
  }
  for (int i = 0; i < a->rank; i++) {
    if (size[i] > a->dims[i] || size[i] < 0)
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "slice size %lld exceeds dimension %d",
                           (long long)size[i], i);
    start[i] = hk_clamp_i64(start[i], 0, a->dims[i] - size[i]);
  }
  return NULL;
}

hk_status *hk_op_dynamic_slice(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                               hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  HK_TRY(need_array(ins, a));
  const hk_shape *s = ins->shape;
  if (s->rank != a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "rank mismatch");
  int64_t start[HK_MAX_RANK], st[HK_MAX_RANK], base = 0;
  HK_TRY(start_indices(ins, ops, 1, a, s->dims, start));
  hk_strides(a->rank, a->dims, st);
  for (int i = 0; i < a->rank; i++) base += start[i] * st[i];
  hk_value *r = hk_value_for_shape_dims(s);
  strided_copy(r->data, a->data, a->rank, r->dims, st, base, hk_esize(a->elem));
  *out = r;
  return NULL;
}

/* Copies src (dense, dims) into dst (dst_strides) at base. */
static void strided_paste(uint8_t *dst, const uint8_t *src, int rank, const int64_t *dims,
                          const int64_t *dst_st, int64_t base, int es) {
  int64_t n = hk_dims_product(rank, dims);
  int64_t idx[HK_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = base;
    for (int j = 0; j < rank; j++) off += idx[j] * dst_st[j];
    copy_elem(dst + off * es, src + i * es, es);
    for (int j = rank - 1; j >= 0; j--) {
      if (++idx[j] < dims[j]) break;
      idx[j] = 0;
    }
  }
}

hk_status *hk_op_dynamic_update_slice(hk_device_ctx *d, const hk_instr *ins,
                                      hk_value *const *ops, hk_value **out) {
  (void)d;
  const hk_value *a = ops[0], *u = ops[1];
  HK_TRY(need_array(ins, a));
  HK_TRY(need_array(ins, u));
  if (u->rank != a->rank || u->elem != a->elem)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "update does not match the operand");
  int64_t start[HK_MAX_RANK], st[HK_MAX_RANK], base = 0;
  HK_TRY(start_indices(ins, ops, 2, a, u->dims, start));
  hk_value *r = hk_value_clone(a);
  hk_strides(a->rank, a->dims, st);
  for (int i = 0; i < a->rank; i++) base += start[i] * st[i];
  strided_paste(r->data, u->data, u->rank, u->dims, st, base, hk_esize(a->elem));
  *out = r;
  return NULL;
}

/* n copies of one element of es bytes at dst (doubling memcpy). */
static void fill_elems(uint8_t *dst, const void *elem, int es, int64_t n) {
  if (n <= 0) return;
  memcpy(dst, elem, (size_t)es);
  for (int64_t have = 1; have < n;) {
    int64_t k = have < n - have ? have : n - have;
    memcpy(dst + have * es, dst, (size_t)(k * es));
    have += k;
  }
}

/* Copies one row (the operand's last dimension) of a pad: a contiguous
 * run when there is no interior padding on that dimension. */
static void pad_row(uint8_t *rd, int64_t off, int64_t rdim, const hk_pad_dim *pd, const uint8_t *src,
                    int64_t n, int es) {
  if (pd->interior == 0) {
    int64_t lo = pd->lo < 0 ? -pd->lo : 0, hi = rdim - pd->lo < n ? rdim - pd->lo : n;
    if (hi > lo) memcpy(rd + (off + pd->lo + lo) * es, src + lo * es, (size_t)((hi - lo) * es));
    return;
  }
  for (int64_t j = 0; j < n; j++) {
    int64_t p = pd->lo + j * (pd->interior + 1);
    if (p >= 0 && p < rdim) copy_elem(rd + (off + p) * es, src + j * es, es);
  }
}

hk_status *hk_op_pad(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                     hk_value **out) {
  (void)d;
  const hk_value *a = ops[0], *pv = ops[1];
  HK_TRY(need_array(ins, a));
  if (!ins->attrs || ins->attrs->n_pad != a->rank || pv->n != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "padding= does not match the operand rank");
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  int es = hk_esize(a->elem);
  uint8_t *rd = r->data;
  fill_elems(rd, pv->data, es, r->n);
  if (a->rank == 0) {
    copy_elem(rd, a->data, es);
    *out = r;
    return NULL;
  }
  int64_t ost[HK_MAX_RANK], idx[HK_MAX_RANK] = {0};
  hk_strides(r->rank, r->dims, ost);
  const hk_pad_dim *pd = ins->attrs->pad;
  int last = a->rank - 1;
  int64_t n = a->dims[last], rows = n ? a->n / n : 0;
  for (int64_t row = 0; row < rows; row++) {
    int64_t off = 0;
    bool inside = true;
    for (int j = 0; j < last && inside; j++) {
      int64_t p = pd[j].lo + idx[j] * (pd[j].interior + 1);
      if (p < 0 || p >= r->dims[j]) inside = false;
      off += p * ost[j];
    }
    if (inside) pad_row(rd, off, r->dims[last], &pd[last], (const uint8_t *)a->data + row * n * es, n, es);
    for (int j = last - 1; j >= 0; j--) {
      if (++idx[j] < a->dims[j]) break;
      idx[j] = 0;
    }
  }
  *out = r;
  return NULL;
}

hk_status *hk_op_concatenate(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                             hk_value **out) {
  (void)d;
  if (ins->n_dims != 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing dimensions=");
  int64_t k = ins->dims[0];
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  if (k < 0 || k >= r->rank) {
    hk_value_release(r);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad concatenate dimension");
  }
  int es = hk_esize(r->elem);
  int64_t outer = hk_dims_product((int)k, r->dims);
  int64_t out_block = hk_dims_product(r->rank - (int)k, r->dims + k) * es;
  int64_t col = 0;
  for (int i = 0; i < ins->n_operands; i++) {
    const hk_value *a = ops[i];
    if (a->rank != r->rank || a->elem != r->elem) {
      hk_value_release(r);
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d does not match", i);
    }
    int64_t blk = hk_dims_product(a->rank - (int)k, a->dims + k) * es;
    for (int64_t o = 0; o < outer; o++)
      memcpy((uint8_t *)r->data + o * out_block + col, (const uint8_t *)a->data + o * blk, (size_t)blk);
    col += blk;
  }
  *out = r;
  return NULL;
}

hk_status *hk_op_reverse(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                         hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  HK_TRY(need_array(ins, a));
  int64_t st[HK_MAX_RANK], base = 0;
  hk_strides(a->rank, a->dims, st);
  for (int i = 0; i < ins->n_dims; i++) {
    int64_t k = ins->dims[i];
    if (k < 0 || k >= a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad dimension");
    if (a->dims[k] == 0) continue;
    base += (a->dims[k] - 1) * st[k];
    st[k] = -st[k];
  }
  hk_value *r = hk_value_new_array((hk_prim)a->elem, a->rank, a->dims);
  strided_copy(r->data, a->data, a->rank, a->dims, st, base, hk_esize(a->elem));
  *out = r;
  return NULL;
}

hk_status *hk_op_iota(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                      hk_value **out) {
  (void)d;
  (void)ops;
  const hk_shape *s = ins->shape;
  if (ins->n_dims != 1 || ins->dims[0] < 0 || ins->dims[0] >= s->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad iota_dimension");
  hk_value *r = hk_value_for_shape_dims(s);
  int64_t st[HK_MAX_RANK];
  hk_strides(s->rank, s->dims, st);
  int64_t k = ins->dims[0];
  bool fl = hk_prim_is_float((hk_prim)s->elem) || hk_prim_is_complex((hk_prim)s->elem);
  for (int64_t i = 0; i < r->n; i++) {
    int64_t v = (i / st[k]) % s->dims[k];
    if (fl) hk_value_set_f64(r, i, (double)v);
    else hk_value_set_i64(r, i, v);
  }
  *out = r;
  return NULL;
}
