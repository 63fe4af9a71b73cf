/* solve.c - cholesky and triangular-solve over batches of matrices (the
 * two minor dims), in double complex arithmetic rounded once to the result
 * type, with the results XLA's expanders give: cholesky reads one
 * triangle, leaves the other zero and turns a matrix whose factorisation
 * fails (a NaN pivot) into NaNs; triangular-solve reads the triangle of a
 * that `lower` names, with op(a) per transpose_a. */
#include <math.h>

#include "analysis/analysis_internal.h"
#include "eval/cplx.h"
#include "eval/eval_internal.h"

typedef double complex cplx;

static bool attr_true(const hk_instr *ins, const char *name) {
  const char *v = ana_raw_attr(ins, name);
  return v && !strcmp(v, "true");
}

/* Batch count and matrix dims (rows r, columns c) of an array of rank >= 2. */
static bool matrix_dims(const hk_value *v, int64_t *batch, int64_t *r, int64_t *c) {
  if (v->elem == HK_TUPLE || v->rank < 2) return false;
  *r = v->dims[v->rank - 2];
  *c = v->dims[v->rank - 1];
  *batch = hk_dims_product(v->rank - 2, v->dims);
  return true;
}

/* ---- cholesky --------------------------------------------------------------- */

/* One n x n matrix at offset o: L with A = L L^H from the lower triangle
 * of A (lower) or of A^T (upper; the result is then L^T).  False when a
 * pivot's square root is NaN. */
static bool factor(const hk_value *a, int64_t o, int64_t n, bool lower, cplx *L) {
  bool ok = true;
  for (int64_t j = 0; j < n; j++) {
    for (int64_t i = j; i < n; i++) {
      cplx s = hk_cplx_get(a, o + (lower ? i * n + j : j * n + i));
      for (int64_t k = 0; k < j; k++) s -= L[i * n + k] * conj(L[j * n + k]);
      if (i == j) {
        double p = sqrt(creal(s));   /* complex pivots: the real part's root */
        ok &= !isnan(p);
        L[j * n + j] = p;
      } else {
        L[i * n + j] = s / L[j * n + j];
      }
    }
  }
  return ok;
}

static hk_status *op_cholesky(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  const hk_value *a = ops[0];
  int64_t B, n, c;
  if (!matrix_dims(a, &B, &n, &c) || n != c)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "cholesky needs batches of square matrices");
  bool lower = attr_true(ins, "lower");
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  cplx *L = calloc((size_t)(n * n > 0 ? n * n : 1), sizeof *L);
  if (!L) hk_out_of_memory();
  for (int64_t b = 0; b < B; b++) {
    int64_t o = b * n * n;
    memset(L, 0, (size_t)(n * n) * sizeof *L);
    bool ok = factor(a, o, n, lower, L);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        cplx x = ok ? (lower ? L[i * n + j] : L[j * n + i]) : NAN;
        hk_cplx_set(r, o + i * n + j, x);
      }
  }
  free(L);
  *out = r;
  return NULL;
}

/* ---- triangular-solve ------------------------------------------------------- */

typedef enum { TS_NONE, TS_TRANSPOSE, TS_ADJOINT } ts_op;

typedef struct ts_form {
  bool left, lower_t, unit;        /* lower_t: op(a) is lower triangular */
  ts_op op;
  int64_t m;
} ts_form;

/* Element (i, j) of op(a) for the matrix at offset o (inside its triangle). */
static cplx t_at(const hk_value *a, int64_t o, const ts_form *f, int64_t i, int64_t j) {
  if (i == j && f->unit) return 1;
  if (f->op == TS_NONE) return hk_cplx_get(a, o + i * f->m + j);
  cplx x = hk_cplx_get(a, o + j * f->m + i);
  return f->op == TS_ADJOINT ? conj(x) : x;
}

/* Solves op(a) x = b (left) for one column, or x op(a) = b (right) for
 * one row: v holds b on entry and x on return. */
static void substitute(const hk_value *a, int64_t o, const ts_form *f, cplx *v) {
  int64_t m = f->m;
  /* left with lower T, or right with upper T: ascending order */
  bool ascending = f->left == f->lower_t;
  for (int64_t s = 0; s < m; s++) {
    int64_t j = ascending ? s : m - 1 - s;
    cplx acc = v[j];
    for (int64_t t = 0; t < s; t++) {
      int64_t k = ascending ? t : m - 1 - t;
      acc -= (f->left ? t_at(a, o, f, j, k) : t_at(a, o, f, k, j)) * v[k];
    }
    v[j] = acc / t_at(a, o, f, j, j);
  }
}

static hk_status *ts_parse(const hk_instr *ins, ts_form *f) {
  f->left = attr_true(ins, "left_side");
  f->unit = attr_true(ins, "unit_diagonal");
  const char *t = ana_raw_attr(ins, "transpose_a");
  if (!t || !strcmp(t, "NO_TRANSPOSE")) f->op = TS_NONE;
  else if (!strcmp(t, "TRANSPOSE")) f->op = TS_TRANSPOSE;
  else if (!strcmp(t, "ADJOINT")) f->op = TS_ADJOINT;
  else return hk_eval_error(ins, HK_INVALID_ARGUMENT, "transpose_a=%s is not NO_TRANSPOSE, TRANSPOSE or ADJOINT", t);
  f->lower_t = attr_true(ins, "lower") == (f->op == TS_NONE);
  return NULL;
}

static hk_status *op_triangular_solve(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  const hk_value *a = ops[0], *b = ops[1];
  int64_t BA, m, mc, BB, r, c;
  if (!matrix_dims(a, &BA, &m, &mc) || m != mc || !matrix_dims(b, &BB, &r, &c) || BA != BB)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "triangular-solve needs square a and b with a's batch");
  ts_form f;
  HK_TRY(ts_parse(ins, &f));
  f.m = m;
  if ((f.left ? r : c) != m)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "b's %s dimension is not a's size %lld",
                         f.left ? "row" : "column", (long long)m);
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  cplx *v = malloc((size_t)(m > 0 ? m : 1) * sizeof *v);
  if (!v) hk_out_of_memory();
  int64_t lines = f.left ? c : r, stride = f.left ? c : 1, step = f.left ? 1 : c;
  for (int64_t bt = 0; bt < BA; bt++) {
    int64_t oa = bt * m * m, ob = bt * r * c;
    for (int64_t l = 0; l < lines; l++) {
      for (int64_t k = 0; k < m; k++) v[k] = hk_cplx_get(b, ob + l * step + k * stride);
      substitute(a, oa, &f, v);
      for (int64_t k = 0; k < m; k++) hk_cplx_set(res, ob + l * step + k * stride, v[k]);
    }
  }
  free(v);
  *out = res;
  return NULL;
}

hk_status *hk_op_solve(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  (void)d;
  if (!hk_prim_is_float((hk_prim)ins->shape->elem) && !hk_prim_is_complex((hk_prim)ins->shape->elem))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "%s needs a floating-point or complex type",
                         hk_opcode_name((hk_opcode)ins->opcode));
  if (ins->opcode == HK_OP_CHOLESKY) return op_cholesky(ins, ops, out);
  return op_triangular_solve(ins, ops, out);
}
