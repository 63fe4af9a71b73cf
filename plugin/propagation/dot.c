/* dot.c - dot and convolution rules: operand and output dims mapped through
 * the dimension numbers (XLA's dot_as_convolution_util view: batch,
 * contracting, lhs/rhs non-contracting and spatial dims). */
#include <string.h>

#include "prop.h"

typedef struct dim3 { int64_t lhs, rhs, out; } dim3;

typedef struct dot_dims {
  int nb, nc, nl, nr, ns;
  dim3 batch[HK_MAX_RANK], contr[HK_MAX_RANK], lnc[HK_MAX_RANK], rnc[HK_MAX_RANK],
      spatial[HK_MAX_RANK];
} dot_dims;

static void dot_dims_of_dot(const hk_instr *i, dot_dims *dd) {
  dd->nb = dd->nc = dd->nl = dd->nr = dd->ns = 0;
  const hk_dot_dnums *dn = i->attrs ? i->attrs->dot : NULL;
  static const hk_dot_dnums none;
  if (!dn) dn = &none;
  int64_t out = 0;
  for (int32_t k = 0; k < dn->lhs_batch.n; k++)
    dd->batch[dd->nb++] = (dim3){dn->lhs_batch.v[k], dn->rhs_batch.v[k], out++};
  for (int32_t k = 0; k < dn->lhs_contracting.n; k++)
    dd->contr[dd->nc++] = (dim3){dn->lhs_contracting.v[k], dn->rhs_contracting.v[k], -1};
  const hk_shape *l = i->operands[0]->shape, *r = i->operands[1]->shape;
  for (int d = 0; d < l->rank; d++)
    if (!hk_i64s_has(dn->lhs_batch, d) && !hk_i64s_has(dn->lhs_contracting, d))
      dd->lnc[dd->nl++] = (dim3){d, -1, out++};
  for (int d = 0; d < r->rank; d++)
    if (!hk_i64s_has(dn->rhs_batch, d) && !hk_i64s_has(dn->rhs_contracting, d))
      dd->rnc[dd->nr++] = (dim3){-1, d, out++};
}

/* XLA's ParseConvolutionDimsInfo: spatial dims that are really batch,
 * contracting or non-contracting dims of a dot are classified as such. */
static void classify_spatial(dot_dims *dd, int64_t ld, int64_t rd, int64_t od, int64_t lsize,
                             int64_t rsize, const hk_window_dim *wd) {
  hk_window_dim one = {1, 1, 0, 0, 1, 1, false};
  if (!wd) wd = &one;
  int64_t bd = wd->base_dilation < 1 ? 1 : wd->base_dilation;
  int64_t wdl = wd->window_dilation < 1 ? 1 : wd->window_dilation;
  int64_t st = wd->stride < 1 ? 1 : wd->stride;
  bool no_pad = wd->pad_lo == 0 && wd->pad_hi == 0 && !wd->reversal;
  int64_t m1 = lsize - 1 > 1 ? lsize - 1 : 1;
  dim3 d = {ld, rd, od};
  if (lsize == wd->size && lsize == bd && ((m1 == st && wdl == 1) || (m1 == wdl && st == 1)) &&
      no_pad) {
    dd->batch[dd->nb++] = d;
  } else if (lsize == wd->size && bd == 1 && wdl == 1 && no_pad) {
    dd->contr[dd->nc++] = d;
  } else if (st == 1 && wdl == 1 && bd == 1) {
    if (rsize == 1 && wd->size == 1 && no_pad)
      dd->lnc[dd->nl++] = d;
    else if (lsize == 1 && wd->size == rsize && wd->pad_hi == rsize - 1 &&
             wd->pad_lo == rsize - 1 && wd->reversal)
      dd->rnc[dd->nr++] = d;
    else
      dd->spatial[dd->ns++] = d;
  } else {
    dd->spatial[dd->ns++] = d;
  }
}

static void dot_dims_of_conv(const hk_instr *i, dot_dims *dd) {
  dd->nb = dd->nc = dd->nl = dd->nr = dd->ns = 0;
  const hk_conv_dnums *c = i->attrs ? i->attrs->conv : NULL;
  if (!c) return;
  const hk_shape *l = i->operands[0]->shape, *r = i->operands[1]->shape;
  dd->lnc[dd->nl++] = (dim3){c->input_batch, -1, c->output_batch};
  dd->rnc[dd->nr++] = (dim3){-1, c->kernel_output_feature, c->output_feature};
  dd->contr[dd->nc++] = (dim3){c->input_feature, c->kernel_input_feature, -1};
  const hk_window *w = i->attrs->window;
  for (int32_t k = 0; k < c->n_spatial; k++) {
    int64_t ld = c->input_spatial[k], rd = c->kernel_spatial[k], od = c->output_spatial[k];
    const hk_window_dim *wd = w && k < w->n_dims ? &w->dims[k] : NULL;
    classify_spatial(dd, ld, rd, od, l->dims[ld], r->dims[rd], wd);
  }
}

static int64_t side(const dim3 *d, int k) { return k == 0 ? d->lhs : d->rhs; }

/* The dimension maps between the output and operand k, through the batch
 * dimensions and k's own non-contracting ones (-1 where none). */
static void out_op_maps(const hk_instr *i, const dot_dims *dd, int k, int64_t *out_to_op,
                        int64_t *op_to_out) {
  for (int d = 0; d < i->shape->rank; d++) out_to_op[d] = -1;
  for (int d = 0; d < i->operands[k]->shape->rank; d++) op_to_out[d] = -1;
  for (int c = 0; c < dd->nb; c++) {
    out_to_op[dd->batch[c].out] = side(&dd->batch[c], k);
    op_to_out[side(&dd->batch[c], k)] = dd->batch[c].out;
  }
  const dim3 *mine = k == 0 ? dd->lnc : dd->rnc;
  int nmine = k == 0 ? dd->nl : dd->nr;
  for (int c = 0; c < nmine; c++) {
    out_to_op[mine[c].out] = side(&mine[c], k);
    op_to_out[side(&mine[c], k)] = mine[c].out;
  }
}

/* The output sharding implied by operand k. */
static const hk_sharding *from_operand(prop_ctx *cx, const hk_instr *i, const dot_dims *dd, int k) {
  const hk_instr *op = i->operands[k];
  const hk_sharding *s = op->sharding;
  if (sa_tile_maximal(s)) return s;
  int64_t rep[HK_MAX_RANK];
  int nrep = 0;
  for (int c = 0; c < dd->nc; c++) rep[nrep++] = side(&dd->contr[c], k);
  const dim3 *other = k == 0 ? dd->rnc : dd->lnc;
  int nother = k == 0 ? dd->nr : dd->nl;
  for (int c = 0; c < nother; c++)
    if (side(&other[c], k) >= 0) rep[nrep++] = side(&other[c], k);
  s = hk_sharding_replicate_dims(cx->m, s, nrep, rep);
  if (!s || s->kind != HK_SHARDING_TILED) return s;
  int64_t out_to_op[HK_MAX_RANK], op_to_out[HK_MAX_RANK];
  out_op_maps(i, dd, k, out_to_op, op_to_out);
  return sa_transpose_collapsed(cx->m, s, op->shape->rank, op_to_out, i->shape->rank, out_to_op);
}

static bool dot_forward_dims(prop_ctx *cx, hk_instr *i, const dot_dims *dd, bool mc) {
  bool changed = false;
  int larger = hk_shape_byte_size(i->operands[0]->shape) >= hk_shape_byte_size(i->operands[1]->shape)
                   ? 0 : 1;
  for (int pass = 0; pass < 2; pass++) {
    int k = pass == 0 ? larger : 1 - larger;
    if (!sa_spatial(i->operands[k]->sharding)) continue;
    changed |= prop_improve(cx, i, from_operand(cx, i, dd, k), mc, false, i->operands[k],
                            i->opcode == HK_OP_DOT ? "dot" : "convolution-as-dot");
  }
  return changed;
}

bool prop_dot_forward(prop_ctx *cx, hk_instr *i, bool mc) {
  dot_dims dd;
  dot_dims_of_dot(i, &dd);
  return dot_forward_dims(cx, i, &dd, mc);
}

static int64_t spatial_partitions(const hk_instr *op, const dot_dims *dd, int k) {
  int64_t p = 1;
  if (!op->sharding || op->sharding->kind != HK_SHARDING_TILED) return 1;
  for (int c = 0; c < dd->ns; c++) p *= sa_dim(op->sharding, (int)side(&dd->spatial[c], k));
  return p;
}

/* XLA's IsConvolutionKernelSmall. */
static bool kernel_small(const hk_instr *i) {
  const hk_conv_dnums *c = i->attrs->conv;
  const hk_shape *r = i->operands[1]->shape;
  int64_t kprod = 1, oprod = 1;
  for (int32_t k = 0; k < c->n_spatial; k++) {
    int64_t kd = r->dims[c->kernel_spatial[k]], od = i->shape->dims[c->output_spatial[k]];
    kprod *= kd;
    oprod *= od;
    if (kd >= od && (k < 2 || kd > 3 || kprod >= oprod)) return false;
  }
  return true;
}

bool prop_conv_forward(prop_ctx *cx, hk_instr *i, bool mc) {
  dot_dims dd;
  dot_dims_of_conv(i, &dd);
  const hk_conv_dnums *c = i->attrs ? i->attrs->conv : NULL;
  if (!c) return false;
  int64_t fgc = i->attrs->feature_group_count, bgc = i->attrs->batch_group_count;
  if (dd.ns == 0 || (spatial_partitions(i->operands[0], &dd, 0) == 1 &&
                     spatial_partitions(i->operands[1], &dd, 1) == 1 && fgc <= 1 && bgc <= 1))
    return dot_forward_dims(cx, i, &dd, mc);
  const hk_instr *lhs = i->operands[0];
  if (!sa_spatial(lhs->sharding)) return false;
  if (lhs->sharding->kind != HK_SHARDING_TILED)
    return prop_improve(cx, i, lhs->sharding, mc, false, lhs, "convolution");
  if (kernel_small(i)) {
    if (sa_dim(lhs->sharding, (int)c->input_feature) > 1) return false;
    int64_t out_to_lhs[HK_MAX_RANK], lhs_to_out[HK_MAX_RANK];
    out_to_lhs[c->output_batch] = c->input_batch;
    out_to_lhs[c->output_feature] = c->input_feature;
    for (int32_t k = 0; k < c->n_spatial; k++) out_to_lhs[c->output_spatial[k]] = c->input_spatial[k];
    for (int d = 0; d < i->shape->rank; d++) lhs_to_out[out_to_lhs[d]] = d;
    const hk_sharding *s = sa_transpose_collapsed(cx->m, lhs->sharding, lhs->shape->rank,
                                                  lhs_to_out, i->shape->rank, out_to_lhs);
    return prop_improve(cx, i, s, mc, false, lhs, "convolution-small-kernel");
  }
  /* a large kernel (a backward convolution): only the batch dim keeps the
   * lhs tiling (data parallelism), in the lhs's dim numbering as XLA has it */
  int64_t batch = c->input_batch;
  return prop_improve(cx, i, hk_sharding_replicate_all_except(cx->m, lhs->sharding, 1, &batch), mc,
                      false, lhs, "convolution-large-kernel");
}

/* XLA's InferDotOperandSharding: operand k's sharding from the dot's
 * output sharding, merged with what the other operand implies. */
static const hk_sharding *dot_operand_sharding(prop_ctx *cx, const hk_instr *i, const dot_dims *dd,
                                               int k, bool mc) {
  const hk_instr *op = i->operands[k], *other = i->operands[1 - k];
  int64_t out_rep[HK_MAX_RANK], oth_rep[HK_MAX_RANK];
  int nout = 0, noth = 0;
  const dim3 *onc = k == 0 ? dd->rnc : dd->lnc;
  int nonc = k == 0 ? dd->nr : dd->nl;
  for (int c = 0; c < nonc; c++) {
    out_rep[nout++] = onc[c].out;
    oth_rep[noth++] = side(&onc[c], 1 - k);
  }
  for (int c = 0; c < dd->nc; c++)
    if (dd->contr[c].out >= 0) out_rep[nout++] = dd->contr[c].out;
  const dim3 *mine = k == 0 ? dd->lnc : dd->rnc;
  int nmine = k == 0 ? dd->nl : dd->nr;
  for (int c = 0; c < nmine; c++)
    if (side(&mine[c], 1 - k) >= 0) oth_rep[noth++] = side(&mine[c], 1 - k);
  const hk_sharding *s = i->sharding;
  if (s->kind == HK_SHARDING_TILED) {
    s = hk_sharding_replicate_dims(cx->m, s, nout, out_rep);
    int64_t out_to_op[HK_MAX_RANK], op_to_out[HK_MAX_RANK];
    out_op_maps(i, dd, k, out_to_op, op_to_out);
    if (s && s->kind == HK_SHARDING_TILED)
      s = sa_transpose_collapsed(cx->m, s, i->shape->rank, out_to_op, op->shape->rank, op_to_out);
    else if (s)
      s = sa_replicate_all_data(cx->m, s, op->shape->rank);
  }
  if (!s) return NULL;
  if (sa_spatial(other->sharding) && other->sharding->kind == HK_SHARDING_TILED) {
    const hk_sharding *o = hk_sharding_replicate_dims(cx->m, other->sharding, noth, oth_rep);
    int64_t oth_to_op[HK_MAX_RANK], op_to_oth[HK_MAX_RANK];
    for (int d = 0; d < other->shape->rank; d++) oth_to_op[d] = -1;
    for (int d = 0; d < op->shape->rank; d++) op_to_oth[d] = -1;
    for (int c = 0; c < dd->nb; c++) {
      oth_to_op[side(&dd->batch[c], 1 - k)] = side(&dd->batch[c], k);
      op_to_oth[side(&dd->batch[c], k)] = side(&dd->batch[c], 1 - k);
    }
    for (int c = 0; c < dd->nc; c++) {
      oth_to_op[side(&dd->contr[c], 1 - k)] = side(&dd->contr[c], k);
      op_to_oth[side(&dd->contr[c], k)] = side(&dd->contr[c], 1 - k);
    }
    if (o && o->kind == HK_SHARDING_TILED)
      o = sa_transpose_collapsed(cx->m, o, other->shape->rank, oth_to_op, op->shape->rank, op_to_oth);
    if (o && s->kind != HK_SHARDING_TUPLE && o->kind != HK_SHARDING_TUPLE &&
        sa_merge(cx->m, s, &o, mc))
      s = o;
  }
  return s;
}

const hk_sharding *prop_dot_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                     bool mc) {
  dot_dims dd;
  if (user->opcode == HK_OP_DOT) {
    dot_dims_of_dot(user, &dd);
  } else {
    dot_dims_of_conv(user, &dd);
    if (dd.ns > 0) return NULL;
  }
  int k = user->operands[0] == i ? 0 : 1;
  return dot_operand_sharding(cx, user, &dd, k, mc);
}
