/* shape_infer_reduce.c - shape inference for ops applying a computation: reduce, reduce-window, select-and-scatter, map, sort. */
#include <string.h>

#include "analysis_internal.h"

#define OPND(c, k) ((c)->i->operands[k]->shape)

static hk_prim elem_of(const hk_shape *s) { return (hk_prim)s->elem; }

static hk_computation *called(const hk_instr *i, int k) {
  return k < i->n_called ? i->called[k] : NULL;
}

static hk_status *need_called(const hk_instr *i, int k, const char *what,
                              hk_computation **out) {
  *out = called(i, k);
  if (!*out) return ana_fail(i, "missing %s computation", what);
  if (!(*out)->root) return ana_fail(i, "%s computation '%s' has no root", what, (*out)->name);
  return NULL;
}

static const hk_shape *param_shape(const hk_computation *comp, int k) {
  return comp->params && comp->params[k] ? comp->params[k]->shape : NULL;
}

/* ---- reducers -------------------------------------------------------------- */

static bool scalar_of(const hk_shape *s, hk_prim e, bool ignore_fp) {
  if (!s || !ana_is_scalar(s)) return false;
  return ignore_fp ? ana_same_elem_ignoring_fp(elem_of(s), e) : s->elem == e;
}

hk_status *ana_check_reducer(const hk_instr *i, const hk_computation *comp,
                             int n, const hk_shape *const *init,
                             const hk_prim *in_elem, hk_prim *acc) {
  char b[128];
  if (comp->n_params != 2 * n)
    return ana_fail(i, "reduction computation '%s' must take %d parameters, but takes %d",
                    comp->name, 2 * n, (int)comp->n_params);
  const hk_shape *res = comp->root->shape;
  int n_acc = hk_shape_is_tuple(res) ? res->n_tuple : 1;
  if (n_acc != n)
    return ana_fail(i, "reduction computation '%s' must produce %d values, produces %s",
                    comp->name, n, ana_shape_str(res, b, sizeof b));
  for (int k = 0; k < n; k++) {
    const hk_shape *a = hk_shape_is_tuple(res) ? res->tuple[k] : res;
    if (!ana_is_scalar(a))
      return ana_fail(i, "reduction computation '%s' must produce scalars, produces %s",
                      comp->name, ana_shape_str(a, b, sizeof b));
    acc[k] = elem_of(a);
    if (!scalar_of(param_shape(comp, k), acc[k], false) ||
        !scalar_of(param_shape(comp, n + k), acc[k], false))
      return ana_fail(i, "reduction computation '%s' parameters must be %s[] scalars like "
                      "its result", comp->name, hk_prim_name(acc[k]));
    if (init && init[k] && !scalar_of(init[k], acc[k], true))
      return ana_fail(i, "init value %d has shape %s, but reduction computation '%s' "
                      "accumulates %s[]", k, ana_shape_str(init[k], b, sizeof b),
                      comp->name, hk_prim_name(acc[k]));
    if (in_elem && !ana_same_elem_ignoring_fp(in_elem[k], elem_of(param_shape(comp, n + k))))
      return ana_fail(i, "input %d of type %s cannot be passed to reduction computation '%s'",
                      k, hk_prim_name(in_elem[k]), comp->name);
  }
  return NULL;
}

/* XLA's verifier without mixed precision: operand k has the element type
 * of to_apply parameter k. */
static hk_status *same_types_as_params(ana_ctx *c, const hk_computation *comp, int n) {
  if (!c->for_verifier) return NULL;
  for (int k = 0; k < n && k < comp->n_params; k++) {
    const hk_shape *p = param_shape(comp, k), *o = OPND(c, k);
    if (p && hk_shape_is_array(o) && p->elem != o->elem)
      return ana_fail(c->i, "operand %d has element type %s but to_apply computation '%s' "
                      "parameter %d has %s", k, hk_prim_name(elem_of(o)), comp->name, k,
                      hk_prim_name(elem_of(p)));
  }
  return NULL;
}

/* Inputs 0..n-1 are arrays of one dimension list; inits n..2n-1. */
static hk_status *check_variadic_inputs(ana_ctx *c, int n, hk_prim *in_elem,
                                        const hk_shape **init) {
  char a[128], b[128];
  for (int k = 0; k < n; k++) {
    const hk_shape *s = OPND(c, k);
    if (!hk_shape_is_array(s))
      return ana_fail(c->i, "operand %d must be an array, has shape %s", k,
                      ana_shape_str(s, a, sizeof a));
    if (k > 0 && !ana_same_dims(s, OPND(c, 0)))
      return ana_fail(c->i, "all inputs must have the same dimensions: %s vs %s",
                      ana_shape_str(OPND(c, 0), a, sizeof a), ana_shape_str(s, b, sizeof b));
    in_elem[k] = elem_of(s);
    init[k] = OPND(c, n + k);
  }
  return NULL;
}

static hk_status *half_operands(ana_ctx *c, int *n) {
  if (c->i->n_operands < 2 || c->i->n_operands % 2 != 0)
    return ana_fail(c->i, "expected an even number (>= 2) of operands, has %d",
                    (int)c->i->n_operands);
  *n = c->i->n_operands / 2;
  if (*n > HK_MAX_RANK) return ana_fail(c->i, "too many operands");
  return NULL;
}

/* XLA: a reducer returning a tuple gives a tuple result (one of one
 * element too); a scalar reducer the array itself. */
static const hk_shape *reducer_result(ana_ctx *c, const hk_computation *comp, int n,
                                      const hk_shape *const *res) {
  if (comp->root && hk_shape_is_tuple(comp->root->shape)) return ana_tuple(c->m, n, res);
  return ana_single_or_tuple(c->m, n, res);
}

static hk_status *infer_reduce(ana_ctx *c, const hk_shape **out) {
  int n = 0;
  hk_computation *comp;
  HK_TRY(half_operands(c, &n));
  HK_TRY(need_called(c->i, 0, "to_apply", &comp));
  hk_prim in_elem[HK_MAX_RANK], acc[HK_MAX_RANK];
  const hk_shape *init[HK_MAX_RANK];
  HK_TRY(check_variadic_inputs(c, n, in_elem, init));
  HK_TRY(ana_check_reducer(c->i, comp, n, init, in_elem, acc));
  HK_TRY(same_types_as_params(c, comp, c->i->n_operands));
  const hk_shape *in = OPND(c, 0);
  bool reduced[HK_MAX_RANK] = {false};
  for (int k = 0; k < c->i->n_dims; k++) {
    int64_t d = c->i->dims[k];
    if (d < 0 || d >= in->rank)
      return ana_fail(c->i, "reduction dimension %lld is out of range for rank %d",
                      (long long)d, (int)in->rank);
    if (reduced[d]) return ana_fail(c->i, "duplicate reduction dimension %lld", (long long)d);
    reduced[d] = true;
  }
  int64_t dims[HK_MAX_RANK];
  bool dyn[HK_MAX_RANK];
  int r = 0;
  for (int d = 0; d < in->rank; d++)
    if (!reduced[d]) {
      dyn[r] = in->dynamic && in->dynamic[d];
      dims[r++] = in->dims[d];
    }
  const hk_shape *res[HK_MAX_RANK];
  for (int k = 0; k < n; k++) res[k] = ana_array(c->m, acc[k], r, dims, dyn);
  *out = reducer_result(c, comp, n, res);
  return NULL;
}

/* ---- windows ------------------------------------------------------------- */

static int64_t dilated(int64_t bound, int64_t dilation) {
  return bound <= 0 ? 0 : (bound - 1) * dilation + 1;
}

/* Zero strides/dilations read as XLA's default of 1 (an unset field). */
static int64_t or_one(int64_t v) { return v == 0 ? 1 : v; }

hk_status *ana_window_output(const hk_instr *i, const hk_window *w, int rank,
                             const int64_t *in_dims, int64_t *out_dims) {
  int n = w ? w->n_dims : 0;
  if (n != rank)
    return ana_fail(i, "window has %d dimensions, expected %d", n, rank);
  for (int d = 0; d < rank; d++) {
    hk_window_dim wd = w->dims[d];
    int64_t stride = or_one(wd.stride), bd = or_one(wd.base_dilation),
            wdil = or_one(wd.window_dilation);
    if (wd.size <= 0 || stride <= 0 || bd <= 0 || wdil <= 0)
      return ana_fail(i, "window dimension %d has a non-positive size, stride or dilation", d);
    int64_t padded = wd.pad_lo + dilated(in_dims[d], bd) + wd.pad_hi;
    int64_t win = dilated(wd.size, wdil);
    out_dims[d] = padded < win ? 0 : (padded - win) / stride + 1;
  }
  return NULL;
}

static hk_status *infer_reduce_window(ana_ctx *c, const hk_shape **out) {
  int n = 0;
  hk_computation *comp;
  HK_TRY(half_operands(c, &n));
  HK_TRY(need_called(c->i, 0, "to_apply", &comp));
  hk_prim in_elem[HK_MAX_RANK], acc[HK_MAX_RANK];
  const hk_shape *init[HK_MAX_RANK];
  HK_TRY(check_variadic_inputs(c, n, in_elem, init));
  HK_TRY(ana_check_reducer(c->i, comp, n, init, in_elem, acc));
  HK_TRY(same_types_as_params(c, comp, c->i->n_operands));
  const hk_shape *in = OPND(c, 0);
  int64_t dims[HK_MAX_RANK];
  HK_TRY(ana_window_output(c->i, c->i->attrs ? c->i->attrs->window : NULL, in->rank,
                           in->dims, dims));
  const hk_shape *res[HK_MAX_RANK];
  for (int k = 0; k < n; k++) res[k] = ana_array(c->m, acc[k], in->rank, dims, NULL);
  *out = reducer_result(c, comp, n, res);
  return NULL;
}

static hk_status *check_select_computation(ana_ctx *c, const hk_computation *sel,
                                           hk_prim e) {
  char b[128];
  if (sel->n_params != 2)
    return ana_fail(c->i, "select computation '%s' must take 2 parameters, takes %d",
                    sel->name, (int)sel->n_params);
  if (!scalar_of(sel->root->shape, HK_PRED, false))
    return ana_fail(c->i, "select computation '%s' must return pred[], returns %s",
                    sel->name, ana_shape_str(sel->root->shape, b, sizeof b));
  for (int k = 0; k < 2; k++)
    if (!scalar_of(param_shape(sel, k), e, true))
      return ana_fail(c->i, "select computation '%s' parameter %d must be a %s[] scalar",
                      sel->name, k, hk_prim_name(e));
  return NULL;
}

static hk_status *infer_select_and_scatter(ana_ctx *c, const hk_shape **out) {
  const hk_shape *op = OPND(c, 0), *src = OPND(c, 1), *init = OPND(c, 2);
  hk_computation *sel, *scat;
  char a[128], b[128];
  if (!hk_shape_is_array(op) || !hk_shape_is_array(src))
    return ana_fail(c->i, "select-and-scatter needs array operand and source");
  HK_TRY(need_called(c->i, 0, "select", &sel));
  HK_TRY(need_called(c->i, 1, "scatter", &scat));
  HK_TRY(check_select_computation(c, sel, elem_of(op)));
  hk_prim in_elem = elem_of(src), acc;
  HK_TRY(ana_check_reducer(c->i, scat, 1, &init, &in_elem, &acc));
  int64_t dims[HK_MAX_RANK];
  HK_TRY(ana_window_output(c->i, c->i->attrs ? c->i->attrs->window : NULL, op->rank,
                           op->dims, dims));
  const hk_shape *want = ana_array(c->m, elem_of(src), op->rank, dims, NULL);
  if (!ana_same_dims(want, src))
    return ana_fail(c->i, "source shape %s does not match the window-reduced operand %s",
                    ana_shape_str(src, a, sizeof a), ana_shape_str(want, b, sizeof b));
  *out = op;
  return NULL;
}

/* ---- map / sort --------------------------------------------------------------- */

static hk_status *infer_map(ana_ctx *c, const hk_shape **out) {
  hk_computation *comp;
  char a[128];
  if (c->i->n_operands < 1) return ana_fail(c->i, "map needs at least one operand");
  HK_TRY(need_called(c->i, 0, "to_apply", &comp));
  const hk_shape *first = OPND(c, 0);
  for (int k = 0; k < c->i->n_operands; k++) {
    const hk_shape *s = OPND(c, k);
    if (!hk_shape_is_array(s) || !ana_same_dims(s, first))
      return ana_fail(c->i, "map operands must be arrays of one shape; operand %d is %s", k,
                      ana_shape_str(s, a, sizeof a));
  }
  if (comp->n_params != c->i->n_operands)
    return ana_fail(c->i, "map computation '%s' takes %d parameters for %d operands",
                    comp->name, (int)comp->n_params, (int)c->i->n_operands);
  if (!ana_is_scalar(comp->root->shape))
    return ana_fail(c->i, "map computation '%s' must return a scalar, returns %s", comp->name,
                    ana_shape_str(comp->root->shape, a, sizeof a));
  for (int k = 0; k < c->i->n_operands; k++)
    if (!scalar_of(param_shape(comp, k), elem_of(OPND(c, k)), !c->for_verifier))
      return ana_fail(c->i, "map computation '%s' parameter %d must be a %s[] scalar",
                      comp->name, k, hk_prim_name(elem_of(OPND(c, k))));
  *out = ana_array(c->m, elem_of(comp->root->shape), first->rank, first->dims, first->dynamic);
  return NULL;
}

static hk_status *infer_sort(ana_ctx *c, const hk_shape **out) {
  hk_computation *cmp;
  char a[128];
  int n = c->i->n_operands;
  if (n < 1) return ana_fail(c->i, "sort needs at least one operand");
  if (n > HK_MAX_RANK) return ana_fail(c->i, "too many operands");
  HK_TRY(need_called(c->i, 0, "comparator", &cmp));
  if (!ana_compatible(cmp->root->shape, ana_scalar(c->m, HK_PRED)))
    return ana_fail(c->i, "sort comparator '%s' must return pred[], returns %s", cmp->name,
                    ana_shape_str(cmp->root->shape, a, sizeof a));
  if (cmp->n_params != 2 * n)
    return ana_fail(c->i, "sort comparator '%s' must take %d parameters, takes %d",
                    cmp->name, 2 * n, (int)cmp->n_params);
  for (int k = 0; k < 2 * n; k++)
    if (!scalar_of(param_shape(cmp, k), elem_of(OPND(c, k / 2)), true))
      return ana_fail(c->i, "sort comparator '%s' parameter %d must be a %s[] scalar",
                      cmp->name, k, hk_prim_name(elem_of(OPND(c, k / 2))));
  const hk_shape *first = OPND(c, 0), *shapes[HK_MAX_RANK];
  for (int k = 0; k < n; k++) {
    shapes[k] = OPND(c, k);
    if (!hk_shape_is_array(shapes[k]) || !ana_same_dims(shapes[k], first))
      return ana_fail(c->i, "sort operands must have the same dimensions; operand %d is %s",
                      k, ana_shape_str(shapes[k], a, sizeof a));
  }
  int64_t d = c->i->n_dims ? c->i->dims[0] : 0;
  if (d < 0 || d >= first->rank)
    return ana_fail(c->i, "sort dimension %lld is out of range for rank %d", (long long)d,
                    (int)first->rank);
  *out = ana_single_or_tuple(c->m, n, shapes);
  return NULL;
}

hk_status *ana_infer_reduce(ana_ctx *c, bool *handled, const hk_shape **out) {
  *handled = true;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_REDUCE: return infer_reduce(c, out);
    case HK_OP_REDUCE_WINDOW: return infer_reduce_window(c, out);
    case HK_OP_SELECT_AND_SCATTER: return infer_select_and_scatter(c, out);
    case HK_OP_MAP: return infer_map(c, out);
    case HK_OP_SORT: return infer_sort(c, out);
    default:
      *handled = false;
      return NULL;
  }
}
