/* ragged_dot.c - ragged-dot: a dot whose lhs ragged dimension is cut into
 * consecutive groups by group_sizes.  Ragged in a non-contracting dim:
 * each group's rows meet their own rhs slice along the rhs group dim.
 * Ragged in a contracting dim: the result gains a leading group dim, each
 * group contracting only its own range.  Ragged in a batch dim: the dot,
 * each batch entry in its group.  Entries in no group (past the sizes'
 * sum) are zero.  Floats accumulate in double (complex in double complex),
 * integers in int64, rounded or wrapped once to the result type, like dot.
 * One kernel computes any box of the result from operand boxes, so the
 * sampled evaluator runs it on just what a sample reads. */
#include <complex.h>

#include "analysis/analysis_internal.h"
#include "eval/cplx.h"
#include "eval/eval_internal.h"

hk_status *hk_ragged_dot_form(const hk_instr *ins, hk_ragged_dot *f) {
  static const hk_dot_dnums none;
  memset(f, 0, sizeof *f);
  f->dn = ins->attrs && ins->attrs->dot ? *ins->attrs->dot : none;
  int64_t ragged[2], group[2];
  if (ana_raw_dims(ins, "lhs_ragged_dims", ragged, 2) != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ragged-dot needs one lhs_ragged_dims entry");
  int n_group = ana_raw_dims(ins, "rhs_group_dims", group, 2);
  const hk_shape *l = ins->operands[0]->shape, *r = ins->operands[1]->shape, *g = ins->operands[2]->shape;
  if (g->rank != 1)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "ragged-dot with group_sizes of rank %d (only rank 1)", g->rank);
  f->ragged = ragged[0];
  f->group_dim = n_group == 1 ? group[0] : -1;
  f->n_groups = g->dims[0];
  f->kind = hk_i64s_has(f->dn.lhs_contracting, f->ragged) ? HK_RAGGED_CONTRACTING
            : hk_i64s_has(f->dn.lhs_batch, f->ragged)     ? HK_RAGGED_BATCH
                                                           : HK_RAGGED_NON_CONTRACTING;
  if (f->ragged < 0 || f->ragged >= l->rank || (f->kind == HK_RAGGED_NON_CONTRACTING) != (n_group == 1) ||
      (n_group == 1 && (f->group_dim < 0 || f->group_dim >= r->rank)))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad lhs_ragged_dims / rhs_group_dims");
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

/* One result element: the sum over the contracting dims (in group `grp`'s
 * range for a contracting ragged dim); a and b are the element's offsets
 * in the boxes with every contracting index at its box's start. */
static void element(const hk_ragged_dot *f, const rd_box *L, const rd_box *R, const int64_t *starts, int64_t grp,
                    int64_t a, int64_t b, acc_kind k, double complex *sum, int64_t *isum) {
  const hk_i64s lc = f->dn.lhs_contracting, rc = f->dn.rhs_contracting;
  int n = lc.n;
  int64_t cnt[HK_MAX_RANK], pos[HK_MAX_RANK], sa[HK_MAX_RANK], sb[HK_MAX_RANK];
  for (int c = 0; c < n; c++) {
    int ld = (int)lc.v[c], rd = (int)rc.v[c];
    int64_t lo = L->lo[ld], hi = L->lo[ld] + L->v->dims[ld];
    if (f->kind == HK_RAGGED_CONTRACTING && ld == f->ragged) {
      lo = starts[grp] > lo ? starts[grp] : lo;
      hi = starts[grp + 1] < hi ? starts[grp + 1] : hi;
    }
    if (lo >= hi) return;
    a += (lo - L->lo[ld]) * L->st[ld];
    b += (lo - R->lo[rd]) * R->st[rd];
    cnt[c] = hi - lo;
    pos[c] = 0;
    sa[c] = L->st[ld];
    sb[c] = R->st[rd];
  }
  if (n == 0) {
    add_line(L->v, a, 0, R->v, b, 0, 1, k, sum, isum);
    return;
  }
  for (;;) {   /* the innermost contracting dim as a line, the others as an odometer */
    add_line(L->v, a, sa[n - 1], R->v, b, sb[n - 1], cnt[n - 1], k, sum, isum);
    int c = n - 2;
    for (; c >= 0; c--) {
      a += sa[c];
      b += sb[c];
      if (++pos[c] < cnt[c]) break;
      a -= cnt[c] * sa[c];
      b -= cnt[c] * sb[c];
      pos[c] = 0;
    }
    if (c < 0) return;
  }
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
    int64_t grp = 0;
    for (int d = 0; d < out->rank; d++) {
      if (f->out_lhs[d] >= 0) li[f->out_lhs[d]] = idx[d];
      if (f->out_rhs[d] >= 0) ri[f->out_rhs[d]] = idx[d];
      if (f->out_lhs[d] < 0 && f->out_rhs[d] < 0) grp = idx[d];   /* the leading group dim */
    }
    if (f->kind != HK_RAGGED_CONTRACTING) grp = group_of(starts, f->n_groups, li[f->ragged]);
    if (f->group_dim >= 0) ri[f->group_dim] = grp;
    double complex sum = 0;
    int64_t isum = 0;
    if (grp >= 0) element(f, &L, &R, starts, grp, offset_of(&L, li), offset_of(&R, ri), k, &sum, &isum);
    if (k == ACC_INT) hk_value_set_i64(out, o, isum);
    else hk_cplx_set(out, o, sum);
    for (int d = out->rank - 1; d >= 0; d--) {
      if (++idx[d] < olo[d] + out->dims[d]) break;
      idx[d] = olo[d];
    }
  }
}

int64_t *hk_ragged_dot_starts(const hk_ragged_dot *f, const hk_value *sizes) {
  int64_t *s = hk_check_alloc(malloc((size_t)(f->n_groups + 1) * sizeof *s));
  s[0] = 0;
  for (int64_t k = 0; k < f->n_groups; k++) {
    int64_t g = hk_value_get_i64(sizes, k);
    /* sizes are the program's data: saturate rather than overflow */
    s[k + 1] = g <= 0 ? s[k] : g > INT64_MAX - s[k] ? INT64_MAX : s[k] + g;
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
