/* reduce.c - reduce (variadic), reduce-window, select-and-scatter and map.
 * Reducers recognised as a single add/mul/max/min/and/or/xor run on a fast
 * path; any other computation is evaluated element by element.  Elements
 * are folded in row-major order starting from the init value, rounding to
 * the element type at every step, as XLA's evaluator does. */
#include <math.h>

#include "eval/eval_internal.h"

/* A rank-0 copy of element i of v. */
static hk_value *scalar_at(const hk_value *v, int64_t i) {
  hk_value *s = hk_value_new_array((hk_prim)v->elem, 0, NULL);
  int es = hk_esize(v->elem);
  memcpy(s->data, (const uint8_t *)v->data + i * es, (size_t)es);
  return s;
}

static void store_scalar(hk_value *dst, int64_t i, const hk_value *s) {
  int es = hk_esize(dst->elem);
  memcpy((uint8_t *)dst->data + i * es, s->data, (size_t)es);
}

/* acc[k] = c(acc..., x...) for N accumulators. */
static hk_status *apply_generic(hk_device_ctx *d, const hk_computation *c, hk_value **acc,
                                hk_value *const *x, int N) {
  hk_value *args[16];
  if (2 * N > 16) return hk_error(HK_UNIMPLEMENTED, "reducer with more than 8 operands");
  for (int k = 0; k < N; k++) {
    args[k] = acc[k];
    args[N + k] = x[k];
  }
  hk_value *r = NULL;
  HK_TRY(hk_eval_scalar_call(d, c, args, 2 * N, &r));
  if (N == 1 && r->elem != HK_TUPLE) {
    hk_value_release(acc[0]);
    acc[0] = r;
    return NULL;
  }
  if (r->elem != HK_TUPLE || r->n_elems != N) {
    hk_value_release(r);
    return hk_error(HK_INVALID_ARGUMENT, "reducer %s returned the wrong arity", c->name);
  }
  for (int k = 0; k < N; k++) {
    hk_value_release(acc[k]);
    acc[k] = hk_value_retain(r->elems[k]);
  }
  hk_value_release(r);
  return NULL;
}

/* ---- fast scalar folds ------------------------------------------------------ */

static double fold_f(hk_reducer_kind k, hk_prim p, double a, double b) {
  double r;
  switch (k) {
    case HK_RED_ADD: r = a + b; break;
    case HK_RED_MUL: r = a * b; break;
    case HK_RED_MAX: r = isnan(a) || isnan(b) ? NAN : a > b ? a : b; break;
    default: r = isnan(a) || isnan(b) ? NAN : a < b ? a : b; break;
  }
  return hk_round_to_type(p, r);
}

static int64_t fold_i(hk_reducer_kind k, hk_prim p, int64_t a, int64_t b) {
  bool u = !hk_prim_is_signed_int(p);
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t r;
  switch (k) {
    case HK_RED_ADD: r = (int64_t)(ua + ub); break;
    case HK_RED_MUL: r = (int64_t)(ua * ub); break;
    case HK_RED_MAX: r = u ? (int64_t)(ua > ub ? ua : ub) : (a > b ? a : b); break;
    case HK_RED_MIN: r = u ? (int64_t)(ua < ub ? ua : ub) : (a < b ? a : b); break;
    case HK_RED_AND: r = a & b; break;
    case HK_RED_OR: r = a | b; break;
    default: r = a ^ b; break;
  }
  return hk_wrap_int(p, r);
}

static bool fast_ok(hk_reducer_kind k, hk_prim p) {
  if (k == HK_RED_GENERIC || hk_prim_is_complex(p)) return false;
  if (hk_prim_is_float(p)) return k == HK_RED_ADD || k == HK_RED_MUL || k == HK_RED_MAX || k == HK_RED_MIN;
  return true;
}

/* ---- reduce ----------------------------------------------------------------- */

typedef struct fold_state {
  hk_device_ctx *d;
  const hk_computation *c;
  hk_reducer_kind kind;
  int N;
  hk_value *const *in;        /* N input arrays */
  hk_value **acc;             /* generic: N scalars */
  double accf;                /* fast float */
  int64_t acci;               /* fast int */
  bool fast, isf;
  hk_scalar_prog *prog;       /* the reducer compiled (else evaluated per element) */
  uint64_t pacc[8];           /* prog: accumulators in storage encoding */
} fold_state;

static void fold_init(fold_state *f, hk_value *const *inits) {
  if (f->fast) {
    if (f->isf) f->accf = hk_value_get_f64(inits[0], 0);
    else f->acci = hk_value_get_i64(inits[0], 0);
  } else if (f->prog) {
    for (int k = 0; k < f->N; k++) {
      f->pacc[k] = 0;
      memcpy(&f->pacc[k], inits[k]->data, (size_t)hk_esize(inits[k]->elem));
    }
  } else {
    for (int k = 0; k < f->N; k++) f->acc[k] = hk_value_clone(inits[k]);
  }
}

static hk_status *fold_elem(fold_state *f, int64_t i) {
  const hk_value *v = f->in[0];
  if (f->fast) {
    if (f->isf) {
      double x = v->elem == HK_F32 ? ((const float *)v->data)[i] : hk_value_get_f64(v, i);
      f->accf = fold_f(f->kind, (hk_prim)v->elem, f->accf, x);
    } else {
      f->acci = fold_i(f->kind, (hk_prim)v->elem, f->acci, hk_value_get_i64(v, i));
    }
    return NULL;
  }
  if (f->prog) {
    for (int k = 0; k < f->N; k++) {
      hk_scalar_prog_set_arg_raw(f->prog, k, f->pacc[k]);
      hk_scalar_prog_set_arg(f->prog, f->N + k, f->in[k], i);
    }
    hk_scalar_prog_run(f->prog);
    for (int k = 0; k < f->N; k++) f->pacc[k] = hk_scalar_prog_result_raw(f->prog, k);
    return NULL;
  }
  hk_value *x[8];
  for (int k = 0; k < f->N; k++) x[k] = scalar_at(f->in[k], i);
  hk_status *st = apply_generic(f->d, f->c, f->acc, x, f->N);
  for (int k = 0; k < f->N; k++) hk_value_release(x[k]);
  return st;
}

static void fold_store(fold_state *f, hk_value **res, int64_t o) {
  if (f->fast) {
    if (f->isf) hk_value_set_f64(res[0], o, f->accf);
    else hk_value_set_i64(res[0], o, f->acci);
    return;
  }
  if (f->prog) {
    for (int k = 0; k < f->N; k++) {
      int es = hk_esize(res[k]->elem);
      memcpy((uint8_t *)res[k]->data + o * es, &f->pacc[k], (size_t)es);
    }
    return;
  }
  for (int k = 0; k < f->N; k++) {
    store_scalar(res[k], o, f->acc[k]);
    hk_value_release(f->acc[k]);
    f->acc[k] = NULL;
  }
}

static void fold_clear(fold_state *f) {
  hk_scalar_prog_free(f->prog);
  f->prog = NULL;
  if (f->fast) return;
  for (int k = 0; k < f->N; k++) {
    hk_value_release(f->acc[k]);
    f->acc[k] = NULL;
  }
}

/* The reducer as a scalar program over (accumulators..., inputs...) when
 * the init values (in[N..2N)) and accumulators share their types; else NULL. */
static hk_scalar_prog *compile_reducer(const hk_computation *c, int N, hk_value *const *in) {
  hk_prim args[16], res[8];
  for (int k = 0; k < N; k++) {
    if (in[N + k]->elem == HK_TUPLE || in[N + k]->n != 1) return NULL;
    args[k] = res[k] = (hk_prim)in[N + k]->elem;
    args[N + k] = (hk_prim)in[k]->elem;
  }
  return hk_scalar_prog_compile_typed(c, 2 * N, args, N, res);
}

static hk_status *fold_setup(fold_state *f, hk_device_ctx *d, const hk_instr *ins, int N,
                             hk_value *const *in, hk_value **accbuf) {
  memset(f, 0, sizeof *f);
  if (N < 1 || N > 8) return hk_eval_error(ins, HK_UNIMPLEMENTED, "%d reduced operands", N);
  if (ins->n_called < 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing to_apply");
  f->d = d;
  f->c = ins->called[0];
  f->N = N;
  f->in = in;
  f->acc = accbuf;
  f->kind = hk_reducer_kind_of(f->c);
  f->fast = N == 1 && fast_ok(f->kind, (hk_prim)in[0]->elem) &&
            f->c->root->shape->elem == in[0]->elem;
  f->isf = hk_prim_is_float((hk_prim)in[0]->elem);
  for (int k = 0; k < N; k++)
    if (in[k]->elem == HK_TUPLE) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "tuple operand");
  if (!f->fast) f->prog = compile_reducer(f->c, N, in);
  return NULL;
}

static hk_value *pack_results(hk_value **res, int N) {
  if (N == 1) return res[0];
  return hk_value_new_tuple(N, res);
}

static const hk_shape *result_leaf(const hk_instr *ins, int k) {
  return ins->shape->elem == HK_TUPLE ? ins->shape->tuple[k] : ins->shape;
}

hk_status *hk_op_reduce(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                        hk_value **out) {
  int N = ins->n_operands / 2;
  hk_value *accbuf[8] = {0};
  fold_state f;
  HK_TRY(fold_setup(&f, d, ins, N, ops, accbuf));
  const hk_value *a = ops[0];
  bool reduced[HK_MAX_RANK] = {0};
  for (int i = 0; i < ins->n_dims; i++) {
    if (ins->dims[i] < 0 || ins->dims[i] >= a->rank) {
      fold_clear(&f);
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad reduce dimension");
    }
    reduced[ins->dims[i]] = true;
  }
  int64_t st[HK_MAX_RANK], kd[HK_MAX_RANK], rd[HK_MAX_RANK];
  int nk = 0, nr = 0;
  hk_strides(a->rank, a->dims, st);
  for (int i = 0; i < a->rank; i++) {
    if (reduced[i]) rd[nr++] = i;
    else kd[nk++] = i;
  }
  hk_value *res[8];
  for (int k = 0; k < N; k++) res[k] = hk_value_for_shape_dims(result_leaf(ins, k));
  int64_t nred = 1;
  for (int i = 0; i < nr; i++) nred *= a->dims[rd[i]];
  int64_t *roff = malloc((size_t)(nred ? nred : 1) * sizeof(int64_t));
  if (!roff) hk_out_of_memory();
  int64_t idx[HK_MAX_RANK] = {0};
  for (int64_t j = 0; j < nred; j++) {
    int64_t o = 0;
    for (int i = 0; i < nr; i++) o += idx[i] * st[rd[i]];
    roff[j] = o;
    for (int i = nr - 1; i >= 0; i--) {
      if (++idx[i] < a->dims[rd[i]]) break;
      idx[i] = 0;
    }
  }
  hk_status *stt = NULL;
  int64_t kidx[HK_MAX_RANK] = {0};
  for (int64_t o = 0; o < res[0]->n && !stt; o++) {
    if ((o & 1023) == 1023) stt = hk_eval_poll(d, ins);
    int64_t base = 0;
    for (int i = 0; i < nk; i++) base += kidx[i] * st[kd[i]];
    fold_init(&f, ops + N);
    for (int64_t j = 0; j < nred && !stt; j++) stt = fold_elem(&f, base + roff[j]);
    if (!stt) fold_store(&f, res, o);
    for (int i = nk - 1; i >= 0; i--) {
      if (++kidx[i] < a->dims[kd[i]]) break;
      kidx[i] = 0;
    }
  }
  fold_clear(&f);
  free(roff);
  if (stt) {
    for (int k = 0; k < N; k++) hk_value_release(res[k]);
    return hk_status_prefix(stt, "%s", ins->name);
  }
  *out = pack_results(res, N);
  return NULL;
}

/* ---- windows -------------------------------------------------------------------- */

/* Operand position of window element w for output index o along one dim;
 * -1 when it falls in padding or between dilated elements. */
static int64_t window_pos(const hk_window_dim *w, int64_t o, int64_t k, int64_t dim) {
  int64_t stride = w->stride ? w->stride : 1, bd = w->base_dilation ? w->base_dilation : 1;
  int64_t wd = w->window_dilation ? w->window_dilation : 1;
  int64_t p = o * stride - w->pad_lo + k * wd;
  if (p < 0 || p % bd) return -1;
  p /= bd;
  return p < dim ? p : -1;
}

/* Operand offset of window element kidx for output oidx, -1 if none. */
static int64_t window_offset(const hk_window *win, const hk_value *a, const int64_t *st,
                             const int64_t *oidx, const int64_t *kidx) {
  int64_t off = 0;
  for (int j = 0; j < a->rank; j++) {
    int64_t p = window_pos(&win->dims[j], oidx[j], kidx[j], a->dims[j]);
    if (p < 0) return -1;
    off += p * st[j];
  }
  return off;
}

static bool next_index(int64_t *idx, const int64_t *dims, int rank) {
  for (int j = rank - 1; j >= 0; j--) {
    if (++idx[j] < dims[j]) return true;
    idx[j] = 0;
  }
  return false;
}

static void window_sizes(const hk_window *win, int rank, int64_t *wdims) {
  for (int j = 0; j < rank; j++) wdims[j] = win->dims[j].size;
}

hk_status *hk_op_reduce_window(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                               hk_value **out) {
  int N = ins->n_operands / 2;
  hk_value *accbuf[8] = {0};
  fold_state f;
  HK_TRY(fold_setup(&f, d, ins, N, ops, accbuf));
  const hk_value *a = ops[0];
  const hk_window *win = ins->attrs ? ins->attrs->window : NULL;
  if (!win || win->n_dims != a->rank) {
    fold_clear(&f);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "window rank");
  }
  int64_t st[HK_MAX_RANK], wdims[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, st);
  window_sizes(win, a->rank, wdims);
  int64_t nwin = hk_dims_product(a->rank, wdims);
  hk_value *res[8];
  for (int k = 0; k < N; k++) res[k] = hk_value_for_shape_dims(result_leaf(ins, k));
  hk_status *stt = NULL;
  int64_t oidx[HK_MAX_RANK] = {0};
  for (int64_t o = 0; o < res[0]->n && !stt; o++) {
    if ((o & 1023) == 1023) stt = hk_eval_poll(d, ins);
    fold_init(&f, ops + N);
    int64_t kidx[HK_MAX_RANK] = {0};
    for (int64_t w = 0; w < nwin && !stt; w++) {
      int64_t off = window_offset(win, a, st, oidx, kidx);
      if (off >= 0) stt = fold_elem(&f, off);
      next_index(kidx, wdims, a->rank);
    }
    if (!stt) fold_store(&f, res, o);
    next_index(oidx, res[0]->dims, res[0]->rank);
  }
  fold_clear(&f);
  if (stt) {
    for (int k = 0; k < N; k++) hk_value_release(res[k]);
    return hk_status_prefix(stt, "%s", ins->name);
  }
  *out = pack_results(res, N);
  return NULL;
}

/* select(a, b): true keeps a.  Recognises compare(p0, p1) roots. */
static hk_status *select_keep(hk_device_ctx *d, const hk_computation *sel, hk_scalar_prog *prog,
                              const hk_value *a, int64_t ia, int64_t ib, bool *keep) {
  const hk_instr *r = sel->root;
  if (r->opcode == HK_OP_COMPARE && r->n_operands == 2 && r->operands[0]->opcode == HK_OP_PARAMETER &&
      r->operands[1]->opcode == HK_OP_PARAMETER && r->attrs &&
      hk_instr_parameter_number(r->operands[0]) == 0 && hk_instr_parameter_number(r->operands[1]) == 1 &&
      hk_prim_is_float((hk_prim)a->elem) && r->attrs->cmp_type != HK_CMPT_TOTALORDER) {
    double x = hk_value_get_f64(a, ia), y = hk_value_get_f64(a, ib);
    switch (r->attrs->cmp_dir) {
      case HK_CMP_GE: *keep = x >= y; return NULL;
      case HK_CMP_GT: *keep = x > y; return NULL;
      case HK_CMP_LE: *keep = x <= y; return NULL;
      case HK_CMP_LT: *keep = x < y; return NULL;
      default: break;
    }
  }
  if (prog) {
    hk_value *ops[1] = {(hk_value *)a};
    *keep = hk_scalar_prog_compare(prog, ops, 1, ia, ib);
    return NULL;
  }
  hk_value *args[2] = {scalar_at(a, ia), scalar_at(a, ib)};
  hk_value *res = NULL;
  hk_status *st = hk_eval_scalar_call(d, sel, args, 2, &res);
  hk_value_release(args[0]);
  hk_value_release(args[1]);
  if (st) return st;
  *keep = hk_value_get_i64(res, 0) != 0;
  hk_value_release(res);
  return NULL;
}

static hk_status *scatter_into(hk_device_ctx *d, const hk_computation *sc, hk_scalar_prog *prog,
                               hk_value *res, int64_t at, const hk_value *src, int64_t is) {
  hk_reducer_kind k = hk_reducer_kind_of(sc);
  hk_prim p = (hk_prim)res->elem;
  if (fast_ok(k, p)) {
    if (hk_prim_is_float(p))
      hk_value_set_f64(res, at, fold_f(k, p, hk_value_get_f64(res, at), hk_value_get_f64(src, is)));
    else
      hk_value_set_i64(res, at, fold_i(k, p, hk_value_get_i64(res, at), hk_value_get_i64(src, is)));
    return NULL;
  }
  if (prog) {
    hk_scalar_prog_set_arg(prog, 0, res, at);
    hk_scalar_prog_set_arg(prog, 1, src, is);
    hk_scalar_prog_run(prog);
    hk_scalar_prog_get_result(prog, 0, res, at);
    return NULL;
  }
  hk_value *acc = scalar_at(res, at), *x = scalar_at(src, is);
  hk_status *st = apply_generic(d, sc, &acc, &x, 1);
  if (!st) store_scalar(res, at, acc);
  hk_value_release(acc);
  hk_value_release(x);
  return st;
}

hk_status *hk_op_select_and_scatter(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                    hk_value **out) {
  const hk_value *a = ops[0], *src = ops[1], *init = ops[2];
  const hk_window *win = ins->attrs ? ins->attrs->window : NULL;
  if (!win || win->n_dims != a->rank || src->rank != a->rank || ins->n_called < 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad window, source or computations");
  hk_value *res = hk_value_new_array((hk_prim)a->elem, a->rank, a->dims);
  for (int64_t i = 0; i < res->n; i++) store_scalar(res, i, init);
  hk_prim pa = (hk_prim)a->elem, ps = (hk_prim)src->elem, pred = HK_PRED;
  hk_scalar_prog *selp = hk_scalar_prog_compile_typed(ins->called[0], 2, (hk_prim[]){pa, pa}, 1, &pred);
  hk_scalar_prog *scp = hk_scalar_prog_compile_typed(ins->called[1], 2, (hk_prim[]){pa, ps}, 1, &pa);
  int64_t st[HK_MAX_RANK], wdims[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, st);
  window_sizes(win, a->rank, wdims);
  int64_t nwin = hk_dims_product(a->rank, wdims);
  hk_status *stt = NULL;
  int64_t sidx[HK_MAX_RANK] = {0};
  for (int64_t s = 0; s < src->n && !stt; s++) {
    if ((s & 1023) == 1023) stt = hk_eval_poll(d, ins);
    int64_t kidx[HK_MAX_RANK] = {0}, sel = -1;
    for (int64_t w = 0; w < nwin && !stt; w++) {
      int64_t off = window_offset(win, a, st, sidx, kidx);
      if (off >= 0) {
        bool keep = false;
        if (sel >= 0) stt = select_keep(d, ins->called[0], selp, a, sel, off, &keep);
        if (sel < 0 || !keep) sel = off;
      }
      next_index(kidx, wdims, a->rank);
    }
    if (!stt && sel >= 0) stt = scatter_into(d, ins->called[1], scp, res, sel, src, s);
    next_index(sidx, src->dims, src->rank);
  }
  hk_scalar_prog_free(selp);
  hk_scalar_prog_free(scp);
  if (stt) {
    hk_value_release(res);
    return hk_status_prefix(stt, "%s", ins->name);
  }
  *out = res;
  return NULL;
}

/* ---- map -------------------------------------------------------------------------- */

hk_status *hk_op_map(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                     hk_value **out) {
  if (ins->n_called < 1 || ins->n_operands > 16)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad map");
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  hk_prim types[16], rt = (hk_prim)res->elem;
  for (int k = 0; k < ins->n_operands; k++) types[k] = (hk_prim)ops[k]->elem;
  hk_scalar_prog *prog = hk_scalar_prog_compile_typed(ins->called[0], ins->n_operands, types, 1, &rt);
  hk_status *st = NULL;
  for (int64_t i = 0; i < res->n && !st; i++) {
    if ((i & 1023) == 1023 && (st = hk_eval_poll(d, ins))) break;
    if (prog) {
      for (int k = 0; k < ins->n_operands; k++) hk_scalar_prog_set_arg(prog, k, ops[k], ops[k]->n == 1 ? 0 : i);
      hk_scalar_prog_run(prog);
      hk_scalar_prog_get_result(prog, 0, res, i);
      continue;
    }
    hk_value *args[16];
    for (int k = 0; k < ins->n_operands; k++) args[k] = scalar_at(ops[k], ops[k]->n == 1 ? 0 : i);
    hk_value *r = NULL;
    st = hk_eval_scalar_call(d, ins->called[0], args, ins->n_operands, &r);
    for (int k = 0; k < ins->n_operands; k++) hk_value_release(args[k]);
    if (!st) {
      if (r->elem != res->elem) st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "map computation type");
      else store_scalar(res, i, r);
    }
    hk_value_release(r);
  }
  hk_scalar_prog_free(prog);
  if (st) {
    hk_value_release(res);
    return st;
  }
  *out = res;
  return NULL;
}
