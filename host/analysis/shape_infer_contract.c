/* shape_infer_contract.c - shape inference for dot, convolution, gather and scatter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

#define OPND(c, k) ((c)->i->operands[k]->shape)

static hk_prim elem_of(const hk_shape *s) { return (hk_prim)s->elem; }

/* Every entry in [0, rank) and no entry twice (also across `other`). */
static hk_status *check_dim_list(ana_ctx *c, const char *what, hk_i64s l, int rank,
                                 hk_i64s other, bool sorted) {
  for (int k = 0; k < l.n; k++) {
    if (l.v[k] < 0 || l.v[k] >= rank)
      return ana_fail(c->i, "%s entry %lld is out of range for rank %d", what,
                      (long long)l.v[k], rank);
    for (int j = 0; j < k; j++)
      if (l.v[j] == l.v[k])
        return ana_fail(c->i, "%s repeats dimension %lld", what, (long long)l.v[k]);
    if (hk_i64s_has(other, l.v[k]))
      return ana_fail(c->i, "%s dimension %lld is used twice", what, (long long)l.v[k]);
    if (sorted && k > 0 && l.v[k] < l.v[k - 1])
      return ana_fail(c->i, "%s must be sorted", what);
  }
  return NULL;
}

static const hk_i64s no_dims = {0, NULL};

/* Batching dims of the indices: distinct dims of the indices other than
 * the index vector dim (XLA's gather/scatter dimension-number checks). */
static hk_status *check_index_batching_dims(ana_ctx *c, const char *what, hk_i64s l, int rank,
                                            int64_t index_vector_dim) {
  HK_TRY(check_dim_list(c, what, l, rank, no_dims, false));
  if (hk_i64s_has(l, index_vector_dim))
    return ana_fail(c->i, "%s must not contain index_vector_dim %lld", what, (long long)index_vector_dim);
  return NULL;
}

/* ---- dot ------------------------------------------------------------------ */

/* XLA's InferDotOpShape / InferConvolveShape: any operand element types
 * (mixed precision, int x float); the result takes the declared type, or
 * the higher-precision operand type when the shape is being inferred. */
static hk_status *dot_result_type(ana_ctx *c, hk_prim l, hk_prim r, hk_prim *out) {
  hk_prim pref = elem_of(c->i->shape);
  *out = hk_prim_is_array(pref) ? pref : ana_higher_precision(l, r);
  return NULL;
}

/* A sparse operand (sparsity=L.2@2:4, descriptors joined by '_') stores
 * n of every m elements along its sparse dimension: the logical size is
 * the stored one times m/n. */
static hk_status *apply_sparsity(ana_ctx *c, const hk_shape **l, const hk_shape **r) {
  const char *sp = ana_raw_attr(c->i, "sparsity");
  while (sp && *sp) {
    char side;
    long long dim, n, m;
    int used = 0;
    if (sscanf(sp, "%c.%lld@%lld:%lld%n", &side, &dim, &n, &m, &used) != 4 || n <= 0 ||
        (side != 'L' && side != 'R'))
      return ana_fail(c->i, "cannot read sparsity descriptor '%s'", sp);
    const hk_shape **s = side == 'L' ? l : r;
    if (dim < 0 || dim >= (*s)->rank)
      return ana_fail(c->i, "sparsity dimension %lld is out of range", dim);
    int64_t dims[HK_MAX_RANK];
    ana_copy_dims(dims, (*s));
    dims[dim] = dims[dim] * m / n;
    *s = ana_array(c->m, (hk_prim)(*s)->elem, (*s)->rank, dims, NULL);
    sp += used;
    if (*sp == '_') sp++;
  }
  return NULL;
}

/* XLA's dot dimension-number checks (dot and ragged-dot): as many lhs as
 * rhs dims of each kind, every list in range and disjoint, and paired
 * dims of equal size. */
static hk_status *check_dot_dnums(ana_ctx *c, const hk_shape *l, const hk_shape *r, hk_dot_dnums dn) {
  if (dn.lhs_batch.n != dn.rhs_batch.n)
    return ana_fail(c->i, "dot must have as many lhs as rhs batch dimensions");
  if (dn.lhs_contracting.n != dn.rhs_contracting.n)
    return ana_fail(c->i, "dot must have as many lhs as rhs contracting dimensions");
  HK_TRY(check_dim_list(c, "lhs_batch_dims", dn.lhs_batch, l->rank, no_dims, false));
  HK_TRY(check_dim_list(c, "rhs_batch_dims", dn.rhs_batch, r->rank, no_dims, false));
  HK_TRY(check_dim_list(c, "lhs_contracting_dims", dn.lhs_contracting, l->rank, dn.lhs_batch, false));
  HK_TRY(check_dim_list(c, "rhs_contracting_dims", dn.rhs_contracting, r->rank, dn.rhs_batch, false));
  for (int k = 0; k < dn.lhs_contracting.n; k++)
    if (l->dims[dn.lhs_contracting.v[k]] != r->dims[dn.rhs_contracting.v[k]])
      return ana_fail(c->i, "contracting dimension sizes differ: lhs %lld vs rhs %lld",
                      (long long)l->dims[dn.lhs_contracting.v[k]],
                      (long long)r->dims[dn.rhs_contracting.v[k]]);
  for (int k = 0; k < dn.lhs_batch.n; k++)
    if (l->dims[dn.lhs_batch.v[k]] != r->dims[dn.rhs_batch.v[k]])
      return ana_fail(c->i, "batch dimension sizes differ: lhs %lld vs rhs %lld",
                      (long long)l->dims[dn.lhs_batch.v[k]],
                      (long long)r->dims[dn.rhs_batch.v[k]]);
  return NULL;
}

static hk_status *infer_dot(ana_ctx *c, const hk_shape **out) {
  const hk_shape *l = OPND(c, 0), *r = OPND(c, 1);
  if (!hk_shape_is_array(l) || !hk_shape_is_array(r))
    return ana_fail(c->i, "dot operands must be arrays");
  HK_TRY(apply_sparsity(c, &l, &r));
  hk_dot_dnums dn = {no_dims, no_dims, no_dims, no_dims};
  if (c->i->attrs && c->i->attrs->dot) dn = *c->i->attrs->dot;
  HK_TRY(check_dot_dnums(c, l, r, dn));
  hk_prim e;
  HK_TRY(dot_result_type(c, elem_of(l), elem_of(r), &e));
  int64_t dims[HK_MAX_RANK];
  bool dyn[HK_MAX_RANK];
  int n = 0;
  for (int k = 0; k < dn.lhs_batch.n; k++, n++) {
    dims[n] = l->dims[dn.lhs_batch.v[k]];
    dyn[n] = l->dynamic && l->dynamic[dn.lhs_batch.v[k]];
  }
  for (int d = 0; d < l->rank; d++)
    if (!hk_i64s_has(dn.lhs_batch, d) && !hk_i64s_has(dn.lhs_contracting, d) && n < HK_MAX_RANK) {
      dyn[n] = l->dynamic && l->dynamic[d];
      dims[n++] = l->dims[d];
    }
  for (int d = 0; d < r->rank; d++)
    if (!hk_i64s_has(dn.rhs_batch, d) && !hk_i64s_has(dn.rhs_contracting, d) && n < HK_MAX_RANK) {
      dyn[n] = r->dynamic && r->dynamic[d];
      dims[n++] = r->dims[d];
    }
  *out = ana_array(c->m, e, n, dims, dyn);
  return NULL;
}

/* ---- convolution ------------------------------------------------------------ */

static hk_status *conv_counts(ana_ctx *c, const hk_shape *l, const hk_shape *r,
                              const hk_conv_dnums *dn, int64_t fgc, int64_t bgc) {
  int64_t in_batch = l->dims[dn->input_batch], in_feat = l->dims[dn->input_feature];
  int64_t k_in = r->dims[dn->kernel_input_feature], k_out = r->dims[dn->kernel_output_feature];
  if (fgc <= 0 || bgc <= 0)
    return ana_fail(c->i, "feature_group_count and batch_group_count must be positive");
  if (fgc > 1 && bgc > 1)
    return ana_fail(c->i, "feature_group_count and batch_group_count cannot both exceed 1");
  if (in_batch % bgc != 0)
    return ana_fail(c->i, "input batch %lld is not a multiple of batch_group_count %lld",
                    (long long)in_batch, (long long)bgc);
  if (in_feat % fgc != 0 || in_feat / fgc != k_in)
    return ana_fail(c->i, "input features %lld / feature_group_count %lld must equal the "
                    "kernel input features %lld", (long long)in_feat, (long long)fgc,
                    (long long)k_in);
  if (k_out % fgc != 0 || k_out % bgc != 0)
    return ana_fail(c->i, "kernel output features %lld must be a multiple of the group counts",
                    (long long)k_out);
  return NULL;
}

static hk_status *conv_dims_valid(ana_ctx *c, const hk_conv_dnums *dn, int rank) {
  int64_t all[3][HK_MAX_RANK + 2];
  int64_t fixed[3][2] = {{dn->input_batch, dn->input_feature},
                         {dn->kernel_input_feature, dn->kernel_output_feature},
                         {dn->output_batch, dn->output_feature}};
  const int64_t *sp[3] = {dn->input_spatial, dn->kernel_spatial, dn->output_spatial};
  for (int t = 0; t < 3; t++) {
    int n = 0;
    all[t][n++] = fixed[t][0];
    all[t][n++] = fixed[t][1];
    for (int k = 0; k < dn->n_spatial; k++) all[t][n++] = sp[t][k];
    for (int k = 0; k < n; k++) {
      if (all[t][k] < 0 || all[t][k] >= rank)
        return ana_fail(c->i, "convolution dimension number %lld is out of range for rank %d",
                        (long long)all[t][k], rank);
      for (int j = 0; j < k; j++)
        if (all[t][j] == all[t][k])
          return ana_fail(c->i, "convolution dimension numbers repeat dimension %lld",
                          (long long)all[t][k]);
    }
  }
  return NULL;
}

static hk_status *infer_convolution(ana_ctx *c, const hk_shape **out) {
  const hk_shape *l = OPND(c, 0), *r = OPND(c, 1);
  const hk_attrs *a = c->i->attrs;
  if (!hk_shape_is_array(l) || !hk_shape_is_array(r))
    return ana_fail(c->i, "convolution operands must be arrays");
  if (!a || !a->conv) return ana_fail(c->i, "convolution is missing dim_labels");
  const hk_conv_dnums *dn = a->conv;
  int rank = dn->n_spatial + 2;
  if (l->rank != rank || r->rank != rank)
    return ana_fail(c->i, "convolution with %d spatial dimensions needs rank-%d operands, "
                    "got %d and %d", (int)dn->n_spatial, rank, (int)l->rank, (int)r->rank);
  HK_TRY(conv_dims_valid(c, dn, rank));
  int64_t fgc = a->feature_group_count ? a->feature_group_count : 1;
  int64_t bgc = a->batch_group_count ? a->batch_group_count : 1;
  HK_TRY(conv_counts(c, l, r, dn, fgc, bgc));
  int nw = a->window ? a->window->n_dims : 0;
  if (nw != dn->n_spatial)
    return ana_fail(c->i, "window has %d dimensions for %d spatial dimensions", nw,
                    (int)dn->n_spatial);
  int64_t in_sp[HK_MAX_RANK], out_sp[HK_MAX_RANK];
  for (int k = 0; k < dn->n_spatial; k++) {
    if (a->window->dims[k].size != r->dims[dn->kernel_spatial[k]])
      return ana_fail(c->i, "window size %lld does not match kernel spatial dimension %lld",
                      (long long)a->window->dims[k].size,
                      (long long)r->dims[dn->kernel_spatial[k]]);
    in_sp[k] = l->dims[dn->input_spatial[k]];
  }
  if (dn->n_spatial)
    HK_TRY(ana_window_output(c->i, a->window, dn->n_spatial, in_sp, out_sp));
  hk_prim e;
  HK_TRY(dot_result_type(c, elem_of(l), elem_of(r), &e));
  int64_t dims[HK_MAX_RANK];
  dims[dn->output_batch] = l->dims[dn->input_batch] / bgc;
  dims[dn->output_feature] = r->dims[dn->kernel_output_feature];
  for (int k = 0; k < dn->n_spatial; k++) dims[dn->output_spatial[k]] = out_sp[k];
  *out = ana_array(c->m, e, rank, dims, NULL);
  return NULL;
}

/* ---- gather / scatter --------------------------------------------------------- */

/* Index dims with the index vector dim appended when it equals the rank. */
static hk_status *expanded_indices(ana_ctx *c, const hk_shape *idx, int64_t ivd,
                                   int64_t *dims, int *rank) {
  if (!hk_shape_is_array(idx) || !hk_prim_is_integral(elem_of(idx)))
    return ana_fail(c->i, "start indices must be an integral array");
  if (ivd < 0 || ivd > idx->rank)
    return ana_fail(c->i, "index_vector_dim %lld is out of range for indices of rank %d",
                    (long long)ivd, (int)idx->rank);
  *rank = idx->rank;
  ana_copy_dims(dims, idx);
  if (ivd == idx->rank) {
    if (*rank >= HK_MAX_RANK) return ana_fail(c->i, "indices rank too large");
    dims[(*rank)++] = 1;
  }
  return NULL;
}

static hk_status *infer_gather(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0), *idx = OPND(c, 1);
  const hk_attrs *a = c->i->attrs;
  if (!hk_shape_is_array(op)) return ana_fail(c->i, "gather operand must be an array");
  if (!a || !a->gather) return ana_fail(c->i, "gather is missing its dimension numbers");
  const hk_gather_dnums *dn = a->gather;
  int64_t ex[HK_MAX_RANK + 1];
  int ex_rank;
  HK_TRY(expanded_indices(c, idx, dn->index_vector_dim, ex, &ex_rank));
  int n_batch = ex_rank - 1;
  int out_rank = dn->offset_dims.n + n_batch;
  if (out_rank > HK_MAX_RANK) return ana_fail(c->i, "gather output rank too large");
  HK_TRY(check_dim_list(c, "offset_dims", dn->offset_dims, out_rank, no_dims, true));
  HK_TRY(check_dim_list(c, "collapsed_slice_dims", dn->collapsed_slice_dims, op->rank, no_dims, true));
  HK_TRY(check_dim_list(c, "operand_batching_dims", dn->operand_batching_dims, op->rank,
                        dn->collapsed_slice_dims, true));
  HK_TRY(check_dim_list(c, "start_index_map", dn->start_index_map, op->rank, no_dims, false));
  if (dn->start_index_map.n != ex[dn->index_vector_dim])
    return ana_fail(c->i, "start_index_map has %d entries but the index vector has %lld",
                    (int)dn->start_index_map.n, (long long)ex[dn->index_vector_dim]);
  if (dn->operand_batching_dims.n != dn->start_indices_batching_dims.n)
    return ana_fail(c->i, "operand_batching_dims and start_indices_batching_dims differ in size");
  HK_TRY(check_index_batching_dims(c, "start_indices_batching_dims", dn->start_indices_batching_dims,
                                   idx->rank, dn->index_vector_dim));
  hk_i64s ss = a->gather_slice_sizes;
  if (ss.n != op->rank)
    return ana_fail(c->i, "slice_sizes has %d entries for an operand of rank %d", (int)ss.n,
                    (int)op->rank);
  for (int d = 0; d < op->rank; d++) {
    if (ss.v[d] < 0 || ss.v[d] > op->dims[d])
      return ana_fail(c->i, "slice size %lld is out of range for operand dimension %d of size %lld",
                      (long long)ss.v[d], d, (long long)op->dims[d]);
    if ((hk_i64s_has(dn->collapsed_slice_dims, d) || hk_i64s_has(dn->operand_batching_dims, d)) &&
        ss.v[d] > 1)
      return ana_fail(c->i, "collapsed or batching dimension %d must have slice size 0 or 1", d);
  }
  if (dn->offset_dims.n != op->rank - dn->collapsed_slice_dims.n - dn->operand_batching_dims.n)
    return ana_fail(c->i, "offset_dims has %d entries, expected %d", (int)dn->offset_dims.n,
                    (int)(op->rank - dn->collapsed_slice_dims.n - dn->operand_batching_dims.n));
  int64_t dims[HK_MAX_RANK];
  int od = 0, bd = 0;
  for (int k = 0; k < out_rank; k++) {
    if (hk_i64s_has(dn->offset_dims, k)) {
      while (hk_i64s_has(dn->collapsed_slice_dims, od) || hk_i64s_has(dn->operand_batching_dims, od)) od++;
      dims[k] = ss.v[od++];
    } else {
      if (bd == dn->index_vector_dim) bd++;
      dims[k] = ex[bd++];
    }
  }
  *out = ana_array(c->m, elem_of(op), out_rank, dims, NULL);
  return NULL;
}

static hk_status *scatter_updates(ana_ctx *c, const hk_scatter_dnums *dn, const hk_shape *op,
                                  const hk_shape *up, const int64_t *ex, int ex_rank) {
  char a[128];
  int want_rank = dn->update_window_dims.n + ex_rank - 1;
  if (!hk_shape_is_array(up) || up->rank != want_rank)
    return ana_fail(c->i, "updates %s must have rank %d", ana_shape_str(up, a, sizeof a),
                    want_rank);
  HK_TRY(check_dim_list(c, "update_window_dims", dn->update_window_dims, up->rank, no_dims, true));
  int od = 0, sd = 0;
  for (int k = 0; k < up->rank; k++) {
    if (hk_i64s_has(dn->update_window_dims, k)) {
      while (hk_i64s_has(dn->inserted_window_dims, od) || hk_i64s_has(dn->input_batching_dims, od)) od++;
      if (od >= op->rank || up->dims[k] > op->dims[od])
        return ana_fail(c->i, "update window dimension %d of size %lld exceeds the operand",
                        k, (long long)up->dims[k]);
      od++;
    } else {
      if (sd == dn->index_vector_dim) sd++;
      if (up->dims[k] != ex[sd])
        return ana_fail(c->i, "update scatter dimension %d has size %lld, indices have %lld",
                        k, (long long)up->dims[k], (long long)ex[sd]);
      sd++;
    }
  }
  return NULL;
}

static hk_status *infer_scatter(ana_ctx *c, const hk_shape **out) {
  int n_ops = c->i->n_operands;
  const hk_attrs *a = c->i->attrs;
  if (n_ops < 3 || n_ops % 2 == 0)
    return ana_fail(c->i, "scatter needs 2N+1 operands (N >= 1), has %d", n_ops);
  int n = (n_ops - 1) / 2;
  if (n > HK_MAX_RANK) return ana_fail(c->i, "too many operands");
  if (!a || !a->scatter) return ana_fail(c->i, "scatter is missing its dimension numbers");
  if (c->i->n_called < 1 || !c->i->called[0] || !c->i->called[0]->root)
    return ana_fail(c->i, "scatter is missing its to_apply computation");
  const hk_scatter_dnums *dn = a->scatter;
  const hk_shape *op = OPND(c, 0), *res[HK_MAX_RANK], *init[HK_MAX_RANK];
  hk_prim up_elem[HK_MAX_RANK], acc[HK_MAX_RANK];
  int64_t ex[HK_MAX_RANK + 1];
  int ex_rank;
  HK_TRY(expanded_indices(c, OPND(c, n), dn->index_vector_dim, ex, &ex_rank));
  for (int k = 0; k < n; k++)
    if (!hk_shape_is_array(OPND(c, k)) || !ana_same_dims(OPND(c, k), op))
      return ana_fail(c->i, "scatter inputs must be arrays of one shape");
  HK_TRY(check_dim_list(c, "inserted_window_dims", dn->inserted_window_dims, op->rank, no_dims, true));
  HK_TRY(check_dim_list(c, "input_batching_dims", dn->input_batching_dims, op->rank,
                        dn->inserted_window_dims, true));
  HK_TRY(check_dim_list(c, "scatter_dims_to_operand_dims", dn->scatter_dims_to_operand_dims,
                        op->rank, no_dims, false));
  if (dn->scatter_dims_to_operand_dims.n != ex[dn->index_vector_dim])
    return ana_fail(c->i, "scatter_dims_to_operand_dims has %d entries, the index vector %lld",
                    (int)dn->scatter_dims_to_operand_dims.n, (long long)ex[dn->index_vector_dim]);
  if (dn->input_batching_dims.n != dn->scatter_indices_batching_dims.n)
    return ana_fail(c->i, "input_batching_dims and scatter_indices_batching_dims differ in size");
  HK_TRY(check_index_batching_dims(c, "scatter_indices_batching_dims", dn->scatter_indices_batching_dims,
                                   OPND(c, n)->rank, dn->index_vector_dim));
  if (dn->update_window_dims.n != op->rank - dn->inserted_window_dims.n - dn->input_batching_dims.n)
    return ana_fail(c->i, "update_window_dims has %d entries, expected %d",
                    (int)dn->update_window_dims.n,
                    (int)(op->rank - dn->inserted_window_dims.n - dn->input_batching_dims.n));
  for (int k = 0; k < n; k++) {
    HK_TRY(scatter_updates(c, dn, op, OPND(c, n + 1 + k), ex, ex_rank));
    init[k] = ana_scalar(c->m, elem_of(OPND(c, k)));
    up_elem[k] = elem_of(OPND(c, n + 1 + k));
    res[k] = OPND(c, k);
  }
  HK_TRY(ana_check_reducer(c->i, c->i->called[0], n, init, up_elem, acc));
  *out = ana_single_or_tuple(c->m, n, res);
  return NULL;
}

/* ---- ragged dot ----------------------------------------------------------- */

int ana_ragged_dot_prefix(const hk_dot_dnums *dn, int64_t ragged, int lhs_rank, int64_t *dims) {
  int n = 0;
  bool batch = hk_i64s_has(dn->lhs_batch, ragged), contracting = hk_i64s_has(dn->lhs_contracting, ragged);
  for (int k = 0; k < dn->lhs_batch.n && dn->lhs_batch.v[k] != ragged && n < HK_MAX_RANK; k++)
    dims[n++] = dn->lhs_batch.v[k];
  if (batch) return n;
  if (contracting) {
    for (int k = 0; k < dn->lhs_contracting.n && dn->lhs_contracting.v[k] != ragged && n < HK_MAX_RANK; k++)
      dims[n++] = dn->lhs_contracting.v[k];
    return n;
  }
  for (int d = 0; d < ragged && d < lhs_rank && n < HK_MAX_RANK; d++)
    if (!hk_i64s_has(dn->lhs_batch, d) && !hk_i64s_has(dn->lhs_contracting, d)) dims[n++] = d;
  return n;
}

/* group_sizes is [g] (the same sizes everywhere) or [prefix dims..., g]. */
static hk_status *check_group_sizes(ana_ctx *c, const hk_shape *l, const hk_shape *gs, const hk_dot_dnums *dn,
                                    int64_t ragged) {
  if (gs->rank == 1) return NULL;
  int64_t pre[HK_MAX_RANK];
  int np = ana_ragged_dot_prefix(dn, ragged, l->rank, pre);
  bool ok = gs->rank == np + 1;
  for (int k = 0; ok && k < np; k++) ok = gs->dims[k] == l->dims[pre[k]];
  if (ok) return NULL;
  char want[HK_MAX_RANK * 24] = "";
  for (int k = 0, o = 0; k < np; k++)
    o += snprintf(want + o, sizeof want - (size_t)o, "%lld, ", (long long)l->dims[pre[k]]);
  return ana_fail(c->i, "ragged-dot group_sizes of rank %d: expected [g] or [%sg] (XLA's [batch..., outer..., g])",
                  gs->rank, want);
}

/* XLA's ragged dot: lhs_ragged_dims names one lhs dimension.  Ragged in a
 * non-contracting dimension: rhs has a group dimension that does not
 * appear in the result.  Ragged in a contracting dimension: the result
 * gains a leading group dimension.  Ragged in a batch dimension: the
 * result is the dot's.  group_sizes' last dim counts the groups. */
static hk_status *infer_ragged_dot(ana_ctx *c, const hk_shape **out) {
  const hk_shape *l = OPND(c, 0), *r = OPND(c, 1), *gs = OPND(c, 2);
  if (!hk_shape_is_array(l) || !hk_shape_is_array(r) || !hk_shape_is_array(gs) ||
      !hk_prim_is_integral((hk_prim)gs->elem) || gs->rank < 1)
    return ana_fail(c->i, "ragged-dot needs array operands and integral group sizes");
  hk_dot_dnums dn = {no_dims, no_dims, no_dims, no_dims};
  if (c->i->attrs && c->i->attrs->dot) dn = *c->i->attrs->dot;
  int64_t ragged[2], group[2];
  if (ana_raw_dims(c->i, "lhs_ragged_dims", ragged, 2) != 1)
    return ana_fail(c->i, "ragged-dot needs exactly one lhs_ragged_dims entry");
  int n_group = ana_raw_dims(c->i, "rhs_group_dims", group, 2);
  if (ragged[0] < 0 || ragged[0] >= l->rank)
    return ana_fail(c->i, "lhs ragged dimension %lld is out of range", (long long)ragged[0]);
  HK_TRY(check_dot_dnums(c, l, r, dn));
  HK_TRY(check_group_sizes(c, l, gs, &dn, ragged[0]));
  bool contracting = hk_i64s_has(dn.lhs_contracting, ragged[0]);
  bool batch = hk_i64s_has(dn.lhs_batch, ragged[0]);
  int64_t g = gs->dims[gs->rank - 1];
  hk_i64s rhs_excluded = no_dims, rg = {n_group, group};
  if (contracting || batch) {
    if (n_group != 0)
      return ana_fail(c->i, "ragged-dot with a %s ragged dimension takes no rhs_group_dims",
                      contracting ? "contracting" : "batch");
  } else {
    if (n_group != 1 || group[0] < 0 || group[0] >= r->rank || r->dims[group[0]] != g ||
        hk_i64s_has(dn.rhs_batch, group[0]) || hk_i64s_has(dn.rhs_contracting, group[0]))
      return ana_fail(c->i, "ragged-dot needs one rhs group dimension of size %lld, not batch or contracting",
                      (long long)g);
    rhs_excluded = rg;
  }
  hk_prim e;
  HK_TRY(dot_result_type(c, (hk_prim)l->elem, (hk_prim)r->elem, &e));
  int64_t dims[HK_MAX_RANK];
  int n = 0;
  if (contracting) dims[n++] = g;
  for (int k = 0; k < dn.lhs_batch.n && n < HK_MAX_RANK; k++) dims[n++] = l->dims[dn.lhs_batch.v[k]];
  for (int d = 0; d < l->rank && n < HK_MAX_RANK; d++)
    if (!hk_i64s_has(dn.lhs_batch, d) && !hk_i64s_has(dn.lhs_contracting, d)) dims[n++] = l->dims[d];
  for (int d = 0; d < r->rank && n < HK_MAX_RANK; d++)
    if (!hk_i64s_has(dn.rhs_batch, d) && !hk_i64s_has(dn.rhs_contracting, d) && !hk_i64s_has(rhs_excluded, d))
      dims[n++] = r->dims[d];
  *out = ana_array(c->m, e, n, dims, NULL);
  return NULL;
}

hk_status *ana_infer_contract(ana_ctx *c, bool *handled, const hk_shape **out) {
  *handled = true;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_DOT:
      if (c->i->n_operands < 2) return ana_fail(c->i, "dot needs two operands");
      return infer_dot(c, out);
    case HK_OP_CONVOLUTION: return infer_convolution(c, out);
    case HK_OP_GATHER: return infer_gather(c, out);
    case HK_OP_SCATTER: return infer_scatter(c, out);
    case HK_OP_RAGGED_DOT: return infer_ragged_dot(c, out);
    default:
      *handled = false;
      return NULL;
  }
}
