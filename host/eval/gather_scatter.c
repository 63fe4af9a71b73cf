/* gather_scatter.c - gather (start indices clamped into bounds) and scatter
 * (update windows that do not fit the operand are skipped whole), with
 * batching dims, as XLA defines them. */
#include "eval/eval_internal.h"

/* The index vector (and batch coordinates) of the indices array for the
 * batch position `g` (one coordinate per non-index-vector dim). */
typedef struct index_reader {
  const hk_value *idx;
  int64_t ivd;                     /* index_vector_dim */
  int64_t st[HK_MAX_RANK];
  int nb;                          /* batch dims of the indices */
  int64_t bdims[HK_MAX_RANK];      /* which indices dim each batch coordinate is */
} index_reader;

static void index_reader_init(index_reader *r, const hk_value *idx, int64_t ivd) {
  r->idx = idx;
  r->ivd = ivd;
  hk_strides(idx->rank, idx->dims, r->st);
  r->nb = 0;
  for (int d = 0; d < idx->rank; d++)
    if (d != ivd) r->bdims[r->nb++] = d;
}

/* Reads component k of the index vector at batch coordinates g. */
static int64_t index_component(const index_reader *r, const int64_t *g, int64_t k) {
  int64_t off = 0;
  for (int i = 0; i < r->nb; i++) off += g[i] * r->st[r->bdims[i]];
  if (r->ivd < r->idx->rank) off += k * r->st[r->ivd];
  int64_t v = hk_value_get_i64(r->idx, off);
  if (r->idx->elem == HK_U64 && v < 0) v = INT64_MAX;
  return v;
}

/* Batch coordinate along indices dim `dim` from g. */
static int64_t batch_coord(const index_reader *r, const int64_t *g, int64_t dim) {
  for (int i = 0; i < r->nb; i++)
    if (r->bdims[i] == dim) return g[i];
  return 0;
}


hk_status *hk_op_gather(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                        hk_value **out) {
  const hk_value *a = ops[0], *idx = ops[1];
  const hk_attrs *at = ins->attrs;
  if (!at || !at->gather || at->gather_slice_sizes.n != a->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing gather dimension numbers or slice_sizes");
  const hk_gather_dnums *g = at->gather;
  const int64_t *ss = at->gather_slice_sizes.v;
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  index_reader ir;
  index_reader_init(&ir, idx, g->index_vector_dim);
  int64_t offmap[HK_MAX_RANK], nwin = 0;  /* operand dim of each offset dim */
  for (int dd = 0; dd < a->rank; dd++)
    if (!hk_i64s_has(g->collapsed_slice_dims, dd) && !hk_i64s_has(g->operand_batching_dims, dd))
      offmap[nwin++] = dd;
  if (nwin != g->offset_dims.n || res->rank != ir.nb + g->offset_dims.n) {
    hk_value_release(res);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "gather dimension numbers do not match the shapes");
  }
  int64_t ast[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, ast);
  int es = hk_esize(a->elem);
  int64_t o[HK_MAX_RANK] = {0};
  for (int64_t i = 0; i < res->n && a->n > 0; i++) {   /* an empty operand: zeros */
    hk_status *pst = (i & 65535) == 65535 ? hk_eval_poll(d, ins) : NULL;
    if (pst) {
      hk_value_release(res);
      return pst;
    }
    int64_t gb[HK_MAX_RANK], nb = 0, start[HK_MAX_RANK] = {0};
    for (int dd = 0; dd < res->rank; dd++)
      if (!hk_i64s_has(g->offset_dims, dd)) gb[nb++] = o[dd];
    for (int k = 0; k < g->start_index_map.n; k++)
      start[g->start_index_map.v[k]] = index_component(&ir, gb, k);
    /* a size-0 slice (allowed on collapsed dims) still reads in bounds */
    for (int k = 0; k < a->rank; k++)
      start[k] = hk_clamp_i64(start[k], 0, a->dims[k] - (ss[k] > 0 ? ss[k] : 1));
    /* XLA's shape inference does not compare the sizes of paired batching
     * dims: a batch coordinate past the operand's is clamped like a start */
    for (int k = 0; k < g->operand_batching_dims.n; k++) {
      int64_t od = g->operand_batching_dims.v[k];
      start[od] = hk_clamp_i64(batch_coord(&ir, gb, g->start_indices_batching_dims.v[k]), 0, a->dims[od] - 1);
    }
    int64_t off = 0;
    for (int k = 0; k < a->rank; k++) off += start[k] * ast[k];
    for (int k = 0; k < g->offset_dims.n; k++) off += o[g->offset_dims.v[k]] * ast[offmap[k]];
    memcpy((uint8_t *)res->data + i * es, (const uint8_t *)a->data + off * es, (size_t)es);
    for (int dd = res->rank - 1; dd >= 0; dd--) {
      if (++o[dd] < res->dims[dd]) break;
      o[dd] = 0;
    }
  }
  *out = res;
  return NULL;
}

/* ---- scatter ------------------------------------------------------------------- */

typedef struct scatter_ctx {
  hk_device_ctx *d;
  const hk_instr *ins;
  int N;
  hk_value **res;                  /* N results (copies of the operands) */
  hk_value *const *upd;            /* N updates */
  hk_reducer_kind kind;
  hk_scalar_prog *prog;            /* to_apply compiled, or NULL */
} scatter_ctx;

static hk_value *scalar_at(const hk_value *v, int64_t i) {
  hk_value *s = hk_value_new_array((hk_prim)v->elem, 0, NULL);
  int es = hk_esize(v->elem);
  memcpy(s->data, (const uint8_t *)v->data + i * es, (size_t)es);
  return s;
}

static hk_status *combine_one(scatter_ctx *c, int64_t at, int64_t ui) {
  hk_prim p = (hk_prim)c->res[0]->elem;
  if (c->N == 1 && c->kind == HK_RED_ADD && hk_prim_is_float(p)) {
    hk_value_set_f64(c->res[0], at, hk_value_get_f64(c->res[0], at) + hk_value_get_f64(c->upd[0], ui));
    return NULL;
  }
  const hk_instr *root = c->ins->called[0]->root;
  if (c->N == 1 && root->opcode == HK_OP_PARAMETER && hk_instr_parameter_number(root) == 1) {
    int es = hk_esize(p);   /* overwrite */
    memcpy((uint8_t *)c->res[0]->data + at * es, (const uint8_t *)c->upd[0]->data + ui * es, (size_t)es);
    return NULL;
  }
  if (c->prog) {
    for (int k = 0; k < c->N; k++) {
      hk_scalar_prog_set_arg(c->prog, k, c->res[k], at);
      hk_scalar_prog_set_arg(c->prog, c->N + k, c->upd[k], ui);
    }
    hk_scalar_prog_run(c->prog);
    for (int k = 0; k < c->N; k++) hk_scalar_prog_get_result(c->prog, k, c->res[k], at);
    return NULL;
  }
  hk_value *args[16];
  for (int k = 0; k < c->N; k++) {
    args[k] = scalar_at(c->res[k], at);
    args[c->N + k] = scalar_at(c->upd[k], ui);
  }
  hk_value *r = NULL;
  hk_status *st = hk_eval_scalar_call(c->d, c->ins->called[0], args, 2 * c->N, &r);
  for (int k = 0; k < 2 * c->N; k++) hk_value_release(args[k]);
  if (st) return st;
  for (int k = 0; k < c->N; k++) {
    const hk_value *v = r->elem == HK_TUPLE ? r->elems[k] : r;
    int es = hk_esize(c->res[k]->elem);
    memcpy((uint8_t *)c->res[k]->data + at * es, v->data, (size_t)es);
  }
  hk_value_release(r);
  return NULL;
}

static hk_status *scatter_check(const hk_instr *ins, int N, hk_value *const *ops) {
  if (!ins->attrs || !ins->attrs->scatter || ins->n_called < 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing scatter dimension numbers or to_apply");
  if (N < 1 || N > 8 || ins->n_operands != 2 * N + 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad operand count");
  for (int k = 0; k < 2 * N + 1; k++)
    if (ops[k]->elem == HK_TUPLE) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "tuple operand");
  return NULL;
}

hk_status *hk_op_scatter(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                         hk_value **out) {
  int N = (ins->n_operands - 1) / 2;
  HK_TRY(scatter_check(ins, N, ops));
  const hk_scatter_dnums *sd = ins->attrs->scatter;
  const hk_value *a = ops[0], *idx = ops[N], *u = ops[N + 1];
  hk_value *res[8];
  for (int k = 0; k < N; k++) res[k] = hk_value_clone(ops[k]);
  scatter_ctx c = {d, ins, N, res, ops + N + 1, hk_reducer_kind_of(ins->called[0]), NULL};
  hk_prim types[16];
  for (int k = 0; k < N; k++) {
    types[k] = (hk_prim)ops[k]->elem;
    types[N + k] = (hk_prim)ops[N + 1 + k]->elem;
  }
  c.prog = hk_scalar_prog_compile_typed(ins->called[0], 2 * N, types, N, types);
  index_reader ir;
  index_reader_init(&ir, idx, sd->index_vector_dim);
  int64_t winmap[HK_MAX_RANK], nw = 0, wsize[HK_MAX_RANK];
  for (int dd = 0; dd < a->rank; dd++) {
    wsize[dd] = 1;
    if (!hk_i64s_has(sd->inserted_window_dims, dd) && !hk_i64s_has(sd->input_batching_dims, dd))
      winmap[nw++] = dd;
  }
  hk_status *st = NULL;
  if (nw != sd->update_window_dims.n)
    st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "update_window_dims do not match the operand");
  for (int k = 0; k < nw && !st; k++) wsize[winmap[k]] = u->dims[sd->update_window_dims.v[k]];
  int64_t ast[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, ast);
  int64_t ui[HK_MAX_RANK] = {0};
  for (int64_t i = 0; i < u->n && !st; i++) {
    if ((i & 16383) == 16383 && (st = hk_eval_poll(d, ins))) break;
    int64_t gb[HK_MAX_RANK], nb = 0, start[HK_MAX_RANK] = {0};
    for (int dd = 0; dd < u->rank; dd++)
      if (!hk_i64s_has(sd->update_window_dims, dd)) gb[nb++] = ui[dd];
    for (int k = 0; k < sd->scatter_dims_to_operand_dims.n; k++)
      start[sd->scatter_dims_to_operand_dims.v[k]] = index_component(&ir, gb, k);
    for (int k = 0; k < sd->input_batching_dims.n; k++)
      start[sd->input_batching_dims.v[k]] = batch_coord(&ir, gb, sd->scatter_indices_batching_dims.v[k]);
    bool fits = true;
    for (int k = 0; k < a->rank; k++)
      if (start[k] < 0 || start[k] > a->dims[k] - wsize[k]) fits = false;
    if (fits) {
      int64_t off = 0;
      for (int k = 0; k < a->rank; k++) off += start[k] * ast[k];
      for (int k = 0; k < nw; k++) off += ui[sd->update_window_dims.v[k]] * ast[winmap[k]];
      st = combine_one(&c, off, i);
    }
    for (int dd = u->rank - 1; dd >= 0; dd--) {
      if (++ui[dd] < u->dims[dd]) break;
      ui[dd] = 0;
    }
  }
  hk_scalar_prog_free(c.prog);
  if (st) {
    for (int k = 0; k < N; k++) hk_value_release(res[k]);
    return st;
  }
  *out = N == 1 ? res[0] : hk_value_new_tuple(N, res);
  return NULL;
}
