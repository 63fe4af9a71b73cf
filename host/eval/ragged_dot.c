/* ragged_dot.c - ragged-dot: a dot whose lhs ragged dimension is cut into
 * consecutive groups by group_sizes.  Ragged in a non-contracting dim:
 * each group's rows meet their own rhs slice along the rhs group dim.
 * Ragged in a contracting dim: the result gains a leading group dim, each
 * group contracting only its own range.  Ragged in a batch dim: the dot,
 * each batch entry in its group.  Entries in no group (past the sizes'
 * sum) are zero.  group_sizes [g] holds one set of sizes; [prefix..., g]
 * one per position of the lhs dims ana_ragged_dot_prefix names.  Floats accumulate in double (complex in double complex),
 * integers in int64, rounded or wrapped once to the result type, like dot.
 * One kernel computes any box of the result from operand boxes, so the
 * sampled evaluator runs it on just what a sample reads. */
#include <complex.h>

#include "analysis/analysis_internal.h"
#include "eval/cplx.h"
#include "eval/eval_internal.h"

static bool in_range(hk_i64s l, int rank) {
  for (int k = 0; k < l.n; k++)
    if (l.v[k] < 0 || l.v[k] >= rank) return false;
  return true;
}

/* group_sizes [g] serves every lhs position (one row); [prefix..., g]
 * gives each position of the prefix dims its own row of sizes. */
static hk_status *group_rows(const hk_instr *ins, const hk_shape *l, const hk_shape *g, hk_ragged_dot *f) {
  int64_t pre[HK_MAX_RANK];
  int np = g->rank == 1 ? 0 : ana_ragged_dot_prefix(&f->dn, f->ragged, l->rank, pre);
  if (g->rank != np + 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-dot group_sizes of rank %d, expected 1 or %d", g->rank,
                         np + 1);
  f->n_rows = 1;
  for (int k = np - 1; k >= 0; k--) {
    if (g->dims[k] != l->dims[pre[k]])
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-dot group_sizes dim %d is %lld, lhs dim %lld is %lld", k,
                           (long long)g->dims[k], (long long)pre[k], (long long)l->dims[pre[k]]);
    f->row_stride[pre[k]] = f->n_rows;
    f->n_rows *= g->dims[k];
  }
  f->n_groups = g->dims[g->rank - 1];
  return NULL;
}

hk_status *hk_ragged_dot_form(const hk_instr *ins, hk_ragged_dot *f) {
  static const hk_dot_dnums none;
  memset(f, 0, sizeof *f);
  f->dn = ins->attrs && ins->attrs->dot ? *ins->attrs->dot : none;
  int64_t ragged[2], group[2];
  if (ana_raw_dims(ins, "lhs_ragged_dims", ragged, 2) != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-dot needs one lhs_ragged_dims entry");
  int n_group = ana_raw_dims(ins, "rhs_group_dims", group, 2);
  const hk_shape *l = ins->operands[0]->shape, *r = ins->operands[1]->shape, *g = ins->operands[2]->shape;
  f->ragged = ragged[0];
  f->group_dim = n_group == 1 ? group[0] : -1;
  f->kind = hk_i64s_has(f->dn.lhs_contracting, f->ragged) ? HK_RAGGED_CONTRACTING
            : hk_i64s_has(f->dn.lhs_batch, f->ragged)     ? HK_RAGGED_BATCH
                                                           : HK_RAGGED_NON_CONTRACTING;
  if (f->ragged < 0 || f->ragged >= l->rank || (f->kind == HK_RAGGED_NON_CONTRACTING) != (n_group == 1) ||
      (n_group == 1 && (f->group_dim < 0 || f->group_dim >= r->rank)) || g->rank < 1 ||
      !in_range(f->dn.lhs_batch, l->rank) || !in_range(f->dn.lhs_contracting, l->rank) ||
      !in_range(f->dn.rhs_batch, r->rank) || !in_range(f->dn.rhs_contracting, r->rank) ||
      f->dn.lhs_batch.n != f->dn.rhs_batch.n || f->dn.lhs_contracting.n != f->dn.rhs_contracting.n)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad ragged-dot dimension numbers");
  HK_TRY(group_rows(ins, l, g, f));
  /* where each result dim comes from: lhs dim, rhs dim (-1: none) */
  int n = 0;
  if (f->kind == HK_RAGGED_CONTRACTING) f->out_lhs[n] = f->out_rhs[n] = -1, n++;
  for (int k = 0; k < f->dn.lhs_batch.n; k++, n++) {
    f->out_lhs[n] = f->dn.lhs_batch.v[k];
    f->out_rhs[n] = f->dn.rhs_batch.v[k];
  }
  for (int d = 0; d < l->rank; d++)
    if (!hk_i64s_has(f->dn.lhs_batch, d) && !hk_i64s_has(f->dn.lhs_contracting, d))
      f->out_lhs[n] = d, f->out_rhs[n] = -1, n++;
  for (int d = 0; d < r->rank; d++)
    if (!hk_i64s_has(f->dn.rhs_batch, d) && !hk_i64s_has(f->dn.rhs_contracting, d) && d != f->group_dim)
      f->out_lhs[n] = -1, f->out_rhs[n] = d, n++;
  if (n != ins->shape->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-dot result has rank %d, expected %d", ins->shape->rank, n);
  return NULL;
}

/* The group holding position v of the ragged dim (-1: none); starts has
 * n_groups + 1 entries. */
static int64_t group_of(const int64_t *starts, int64_t n_groups, int64_t v) {
  for (int64_t k = 0; k < n_groups; k++)
    if (v >= starts[k] && v < starts[k + 1]) return k;
  return -1;
}

typedef enum { ACC_REAL, ACC_COMPLEX, ACC_INT } acc_kind;

/* A value's box: its data, where it starts in the operand and its
 * row-major strides. */
typedef struct rd_box {
  const hk_value *v;
  const int64_t *lo;
  int64_t st[HK_MAX_RANK];
} rd_box;

/* Offset in x of the operand position idx. */
static int64_t offset_of(const rd_box *x, const int64_t *idx) {
  int64_t o = 0;
  for (int d = 0; d < x->v->rank; d++) o += (idx[d] - x->lo[d]) * x->st[d];
  return o;
}

/* Adds n products lhs[a + j sa] * rhs[b + j sb] to the sums, in order
 * (f32 reads its data directly: this is the multiply-add loop). */
static void add_line(const hk_value *l, int64_t a, int64_t sa, const hk_value *r, int64_t b, int64_t sb,
                     int64_t n, acc_kind k, double complex *sum, int64_t *isum) {
  if (k == ACC_REAL && l->elem == HK_F32 && r->elem == HK_F32) {
    const float *x = (const float *)l->data + a, *y = (const float *)r->data + b;
    double s = creal(*sum);
    for (int64_t j = 0; j < n; j++) s += (double)x[j * sa] * (double)y[j * sb];
    *sum = s;
    return;
  }
  for (int64_t j = 0; j < n; j++, a += sa, b += sb) {
    if (k == ACC_INT) {
      /* wrapping (unsigned) arithmetic: int64 overflow wraps like the result type */
      *isum = (int64_t)((uint64_t)*isum + (uint64_t)hk_value_get_i64(l, a) * (uint64_t)hk_value_get_i64(r, b));
    } else if (k == ACC_COMPLEX) {
      *sum += hk_cplx_get(l, a) * hk_cplx_get(r, b);
    } else {
      *sum += hk_value_get_f64(l, a) * hk_value_get_f64(r, b);
    }
  }
}

/* One result element's operands: the boxes, the group and the element's
 * row of group starts (its batch part; contracting prefix dims add theirs
 * as the sum walks them). */
typedef struct rd_elem {
  const hk_ragged_dot *f;
  const rd_box *L, *R;
  const int64_t *starts;
  int64_t grp;
  acc_kind k;
  double complex sum;
  int64_t isum;
} rd_elem;

/* Adds contracting dims c.. to the sum, lhs / rhs at offsets a / b with
 * dims before c at their positions (row: the row of sizes they give);
 * the innermost dim is a line, a contracting ragged dim only its group's
 * range. */
static void contract(rd_elem *e, int c, int64_t a, int64_t b, int64_t row) {
  const hk_ragged_dot *f = e->f;
  int ld = (int)f->dn.lhs_contracting.v[c], rd = (int)f->dn.rhs_contracting.v[c];
  const rd_box *L = e->L, *R = e->R;
  int64_t lo = L->lo[ld], hi = L->lo[ld] + L->v->dims[ld];
  if (f->kind == HK_RAGGED_CONTRACTING && ld == f->ragged) {
    const int64_t *s = e->starts + row * (f->n_groups + 1);
    lo = s[e->grp] > lo ? s[e->grp] : lo;
    hi = s[e->grp + 1] < hi ? s[e->grp + 1] : hi;
  }
  if (lo >= hi) return;
  a += (lo - L->lo[ld]) * L->st[ld];
  b += (lo - R->lo[rd]) * R->st[rd];
  if (c == f->dn.lhs_contracting.n - 1) {
    add_line(L->v, a, L->st[ld], R->v, b, R->st[rd], hi - lo, e->k, &e->sum, &e->isum);
    return;
  }
  for (int64_t p = lo; p < hi; p++, a += L->st[ld], b += R->st[rd]) contract(e, c + 1, a, b, row + p * f->row_stride[ld]);
}

void hk_ragged_dot_box(const hk_ragged_dot *f, const hk_value *lhs, const int64_t *llo, const hk_value *rhs,
                       const int64_t *rlo, const int64_t *starts, const int64_t *olo, hk_value *out) {
  hk_prim e = (hk_prim)out->elem;
  acc_kind k = hk_prim_is_complex(e) ? ACC_COMPLEX : hk_prim_is_float(e) ? ACC_REAL : ACC_INT;
  rd_box L = {lhs, llo, {0}}, R = {rhs, rlo, {0}};
  hk_strides(lhs->rank, lhs->dims, L.st);
  hk_strides(rhs->rank, rhs->dims, R.st);
  int64_t idx[HK_MAX_RANK], li[HK_MAX_RANK], ri[HK_MAX_RANK];
  for (int d = 0; d < out->rank; d++) idx[d] = olo[d];
  /* dims no result dim sets (contracting, group) start at their box's start */
  memcpy(li, llo, sizeof(int64_t) * (size_t)lhs->rank);
  memcpy(ri, rlo, sizeof(int64_t) * (size_t)rhs->rank);
  for (int64_t o = 0; o < out->n; o++) {
    rd_elem el = {f, &L, &R, starts, 0, k, 0, 0};
    int64_t row = 0;
    for (int d = 0; d < out->rank; d++) {
      if (f->out_lhs[d] >= 0) li[f->out_lhs[d]] = idx[d], row += idx[d] * f->row_stride[f->out_lhs[d]];
      if (f->out_rhs[d] >= 0) ri[f->out_rhs[d]] = idx[d];
      if (f->out_lhs[d] < 0 && f->out_rhs[d] < 0) el.grp = idx[d];   /* the leading group dim */
    }
    if (f->kind != HK_RAGGED_CONTRACTING)
      el.grp = group_of(starts + row * (f->n_groups + 1), f->n_groups, li[f->ragged]);
    if (f->group_dim >= 0) ri[f->group_dim] = el.grp;
    int64_t a = offset_of(&L, li), b = offset_of(&R, ri);
    if (el.grp >= 0 && f->dn.lhs_contracting.n == 0) add_line(lhs, a, 0, rhs, b, 0, 1, k, &el.sum, &el.isum);
    else if (el.grp >= 0) contract(&el, 0, a, b, row);
    if (k == ACC_INT) hk_value_set_i64(out, o, el.isum);
    else hk_cplx_set(out, o, el.sum);
    for (int d = out->rank - 1; d >= 0; d--) {
      if (++idx[d] < olo[d] + out->dims[d]) break;
      idx[d] = olo[d];
    }
  }
}

int64_t *hk_ragged_dot_starts(const hk_ragged_dot *f, const hk_value *sizes) {
  int64_t w = f->n_groups + 1;
  int64_t *s = hk_check_alloc(malloc((size_t)(f->n_rows > 0 ? f->n_rows * w : 1) * sizeof *s));
  for (int64_t row = 0; row < f->n_rows; row++) {
    int64_t *t = s + row * w;
    t[0] = 0;
    for (int64_t k = 0; k < f->n_groups; k++) {
      int64_t g = hk_value_get_i64(sizes, row * f->n_groups + k);
      /* sizes are the program's data: saturate rather than overflow */
      t[k + 1] = g <= 0 ? t[k] : g > INT64_MAX - t[k] ? INT64_MAX : t[k] + g;
    }
  }
  return s;
}

hk_status *hk_op_ragged_dot(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  (void)d;
  hk_ragged_dot f;
  HK_TRY(hk_ragged_dot_form(ins, &f));
  int64_t zero[HK_MAX_RANK] = {0};
  int64_t *starts = hk_ragged_dot_starts(&f, ops[2]);
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  hk_ragged_dot_box(&f, ops[0], zero, ops[1], zero, starts, zero, r);
  free(starts);
  *out = r;
  return NULL;
}
