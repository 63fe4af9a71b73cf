/* gather_scatter.c - gather and scatter rules: operand passthrough dims,
 * index passthrough dims and index-parallel dims (indices built from an
 * iota, or explicit batching dims), as XLA's hlo_sharding_util has them. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

static int64_t operand_index(const hk_instr *user, const hk_instr *i) {
  for (int32_t k = 0; k < user->n_operands; k++)
    if (user->operands[k] == i) return k;
  return -1;
}

/* ---- a uniform view of gather and scatter --------------------------------------- */

typedef struct gs_view {
  const hk_shape *operand, *indices, *batch_shape;  /* batch_shape: gather output / scatter update */
  int64_t ivd;                       /* index_vector_dim */
  const hk_i64s *window_dims;        /* offset_dims / update_window_dims (in batch_shape) */
  const hk_i64s *collapsed;          /* collapsed_slice_dims / inserted_window_dims */
  const hk_i64s *index_map;          /* start_index_map / scatter_dims_to_operand_dims */
  const hk_i64s *operand_batching, *indices_batching;
  int64_t slice[HK_MAX_RANK];        /* slice sizes per operand dim */
} gs_view;

static bool gather_view(const hk_instr *g, gs_view *v) {
  const hk_gather_dnums *d = g->attrs ? g->attrs->gather : NULL;
  if (!d) return false;
  v->operand = g->operands[0]->shape;
  v->indices = g->operands[1]->shape;
  v->batch_shape = g->shape;
  v->ivd = d->index_vector_dim;
  v->window_dims = &d->offset_dims;
  v->collapsed = &d->collapsed_slice_dims;
  v->index_map = &d->start_index_map;
  v->operand_batching = &d->operand_batching_dims;
  v->indices_batching = &d->start_indices_batching_dims;
  for (int k = 0; k < v->operand->rank; k++)
    v->slice[k] = k < g->attrs->gather_slice_sizes.n ? g->attrs->gather_slice_sizes.v[k] : 1;
  return true;
}

static bool scatter_view(const hk_instr *s, gs_view *v) {
  const hk_scatter_dnums *d = s->attrs ? s->attrs->scatter : NULL;
  if (!d || s->n_operands < 3) return false;
  int n = s->n_operands / 2;
  v->operand = s->operands[0]->shape;
  v->indices = s->operands[n]->shape;
  v->batch_shape = s->operands[n + 1]->shape;
  v->ivd = d->index_vector_dim;
  v->window_dims = &d->update_window_dims;
  v->collapsed = &d->inserted_window_dims;
  v->index_map = &d->scatter_dims_to_operand_dims;
  v->operand_batching = &d->input_batching_dims;
  v->indices_batching = &d->scatter_indices_batching_dims;
  /* the slice of the operand an update window covers */
  int w = 0;
  for (int k = 0; k < v->operand->rank; k++) {
    if (hk_i64s_has(*v->collapsed, k) || hk_i64s_has(*v->operand_batching, k)) {
      v->slice[k] = 1;
    } else {
      int64_t wd = w < v->window_dims->n ? v->window_dims->v[w] : -1;
      v->slice[k] = wd >= 0 && wd < v->batch_shape->rank ? v->batch_shape->dims[wd] : 1;
      w++;
    }
  }
  return true;
}

/* Batch (non-window) dims of batch_shape map to indices dims other than
 * the index vector dim, in order. */
static void batch_maps(const gs_view *v, int64_t *b_to_idx, int64_t *idx_to_b) {
  for (int d = 0; d < v->indices->rank; d++) idx_to_b[d] = -1;
  int id = 0;
  for (int d = 0; d < v->batch_shape->rank; d++) {
    b_to_idx[d] = -1;
    if (hk_i64s_has(*v->window_dims, d)) continue;
    if (id == v->ivd) id++;
    if (id < v->indices->rank) {
      b_to_idx[d] = id;
      idx_to_b[id] = d;
    }
    id++;
  }
}

/* Window dims of batch_shape map to operand dims that are neither collapsed
 * nor batching, in order. */
static void window_maps(const gs_view *v, int64_t *b_to_op, int64_t *op_to_b) {
  for (int d = 0; d < v->batch_shape->rank; d++) b_to_op[d] = -1;
  int w = 0;
  for (int d = 0; d < v->operand->rank; d++) {
    op_to_b[d] = -1;
    if (hk_i64s_has(*v->collapsed, d) || hk_i64s_has(*v->operand_batching, d)) continue;
    if (w < v->window_dims->n) {
      op_to_b[d] = v->window_dims->v[w];
      b_to_op[v->window_dims->v[w]] = d;
    }
    w++;
  }
}

/* ---- index passthrough ------------------------------------------------------------- */

/* batch-shape sharding (gather output / scatter update) from the indices. */
static const hk_sharding *batch_from_indices(prop_ctx *cx, const gs_view *v, const hk_sharding *s) {
  if (sa_tile_maximal(s)) return s;
  int64_t keep[HK_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < v->indices->rank; d++)
    if (d != v->ivd) keep[nk++] = d;
  s = hk_sharding_replicate_all_except(cx->m, s, nk, keep);
  if (!s || s->kind != HK_SHARDING_TILED) return s;
  int64_t b_to_idx[HK_MAX_RANK], idx_to_b[HK_MAX_RANK];
  batch_maps(v, b_to_idx, idx_to_b);
  return sa_transpose_collapsed(cx->m, s, v->indices->rank, idx_to_b, v->batch_shape->rank, b_to_idx);
}

/* indices sharding from the batch-shape sharding. */
static const hk_sharding *indices_from_batch(prop_ctx *cx, const gs_view *v, const hk_sharding *s) {
  if (sa_tile_maximal(s)) return s;
  int64_t rep[HK_MAX_RANK];
  int nr = 0;
  for (int32_t k = 0; k < v->window_dims->n; k++) rep[nr++] = v->window_dims->v[k];
  s = hk_sharding_replicate_dims(cx->m, s, nr, rep);
  if (!s || s->kind != HK_SHARDING_TILED) return s;
  int64_t b_to_idx[HK_MAX_RANK], idx_to_b[HK_MAX_RANK];
  batch_maps(v, b_to_idx, idx_to_b);
  return sa_transpose_collapsed(cx->m, s, v->batch_shape->rank, b_to_idx, v->indices->rank, idx_to_b);
}

/* ---- operand passthrough ----------------------------------------------------------------- */

static bool passthrough_dim(const gs_view *v, int d) {
  return !hk_i64s_has(*v->collapsed, d) && !hk_i64s_has(*v->operand_batching, d) &&
         v->slice[d] == v->operand->dims[d];
}

static const hk_sharding *batch_from_operand(prop_ctx *cx, const gs_view *v, const hk_sharding *s) {
  if (sa_tile_maximal(s)) return s;
  int64_t keep[HK_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < v->operand->rank; d++)
    if (passthrough_dim(v, d)) keep[nk++] = d;
  s = hk_sharding_replicate_all_except(cx->m, s, nk, keep);
  if (!s || s->kind != HK_SHARDING_TILED) return NULL;
  int64_t b_to_op[HK_MAX_RANK], op_to_b[HK_MAX_RANK];
  window_maps(v, b_to_op, op_to_b);
  for (int d = 0; d < v->operand->rank; d++)
    if (!passthrough_dim(v, d)) op_to_b[d] = -1;
  for (int d = 0; d < v->batch_shape->rank; d++)
    if (b_to_op[d] >= 0 && !passthrough_dim(v, (int)b_to_op[d])) b_to_op[d] = -1;
  return sa_transpose_collapsed(cx->m, s, v->operand->rank, op_to_b, v->batch_shape->rank, b_to_op);
}

static const hk_sharding *operand_from_batch(prop_ctx *cx, const gs_view *v, const hk_sharding *s) {
  if (sa_tile_maximal(s)) return s;
  int64_t b_to_op[HK_MAX_RANK], op_to_b[HK_MAX_RANK];
  window_maps(v, b_to_op, op_to_b);
  for (int d = 0; d < v->operand->rank; d++)
    if (!passthrough_dim(v, d)) op_to_b[d] = -1;
  int64_t keep[HK_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < v->batch_shape->rank; d++) {
    if (b_to_op[d] >= 0 && !passthrough_dim(v, (int)b_to_op[d])) b_to_op[d] = -1;
    if (b_to_op[d] >= 0) keep[nk++] = d;
  }
  s = hk_sharding_replicate_all_except(cx->m, s, nk, keep);
  if (!s || s->kind != HK_SHARDING_TILED) return NULL;
  return sa_transpose_collapsed(cx->m, s, v->batch_shape->rank, b_to_op, v->operand->rank, op_to_b);
}

/* ---- index-parallel dims ------------------------------------------------------------------ */

typedef struct par_dims {
  int n;
  int64_t idx[HK_MAX_RANK];     /* indices dims (sorted) */
  int64_t op[HK_MAX_RANK];      /* the operand dim aligned with idx[k] */
} par_dims;

/* The dim an iota (or a broadcast of one) counts along; -1 if none. */
static int64_t iota_dim(const hk_instr *i) {
  if (i->opcode == HK_OP_IOTA) return i->n_dims > 0 ? i->dims[0] : 0;
  if (i->opcode == HK_OP_BROADCAST) {
    int64_t d = iota_dim(i->operands[0]);
    return d >= 0 && d < i->n_dims ? i->dims[d] : -1;
  }
  if (i->opcode == HK_OP_CONVERT || i->opcode == HK_OP_COPY ||
      (i->opcode == HK_OP_RESHAPE && i->operands[0]->shape->rank == i->shape->rank))
    return iota_dim(i->operands[0]);
  return -1;
}

static void add_parallel(par_dims *p, int64_t idx_dim, int64_t op_dim) {
  for (int k = 0; k < p->n; k++)
    if (p->idx[k] == idx_dim) return;
  int at = p->n++;
  while (at > 0 && p->idx[at - 1] > idx_dim) {
    p->idx[at] = p->idx[at - 1];
    p->op[at] = p->op[at - 1];
    at--;
  }
  p->idx[at] = idx_dim;
  p->op[at] = op_dim;
}

static bool parallel_dims(const gs_view *v, const hk_instr *indices, par_dims *p) {
  memset(p, 0, sizeof *p);
  if (v->operand_batching->n > 0) {   /* explicit batching dims are the parallel dims */
    for (int32_t k = 0; k < v->operand_batching->n && k < v->indices_batching->n; k++)
      add_parallel(p, v->indices_batching->v[k], v->operand_batching->v[k]);
    return p->n > 0;
  }
  int64_t n_idx = v->index_map->n;
  int64_t in_dim[HK_MAX_RANK];
  for (int k = 0; k < n_idx && k < HK_MAX_RANK; k++) in_dim[k] = -1;
  if (indices->opcode == HK_OP_CONCATENATE && indices->n_dims > 0 && indices->dims[0] == v->ivd) {
    int64_t at = 0;
    for (int32_t k = 0; k < indices->n_operands; k++) {
      const hk_instr *op = indices->operands[k];
      int64_t cnt = v->ivd < op->shape->rank ? op->shape->dims[v->ivd] : 1;
      int64_t d = iota_dim(op);
      if (d >= 0 && d != v->ivd)
        for (int64_t j = 0; j < cnt && at + j < n_idx; j++) in_dim[at + j] = d;
      at += cnt;
    }
  } else {
    int64_t d = iota_dim(indices);
    if (d >= 0 && d != v->ivd)
      for (int64_t j = 0; j < n_idx; j++) in_dim[j] = d;
  }
  for (int k = 0; k < n_idx && k < HK_MAX_RANK; k++) {
    if (in_dim[k] < 0) continue;
    for (int j = 0; j < p->n; j++)
      if (p->idx[j] == in_dim[k]) return false;
    int64_t od = v->index_map->v[k];
    if (v->slice[od] == 1) add_parallel(p, in_dim[k], od);
  }
  return p->n > 0;
}

/* A sharding of shape (rank to_rank) from s (rank from_rank) keeping only
 * the parallel dims: from_dims[k] maps to to_dims[k]. */
static const hk_sharding *parallel_map(prop_ctx *cx, const hk_sharding *s, int from_rank,
                                       const int64_t *from_dims, int to_rank,
                                       const int64_t *to_dims, int n) {
  if (sa_tile_maximal(s)) return s;
  s = hk_sharding_replicate_all_except(cx->m, s, n, from_dims);
  if (!s || s->kind != HK_SHARDING_TILED) return s;
  int64_t f2t[HK_MAX_RANK], t2f[HK_MAX_RANK];
  for (int d = 0; d < from_rank; d++) f2t[d] = -1;
  for (int d = 0; d < to_rank; d++) t2f[d] = -1;
  for (int k = 0; k < n; k++) {
    if (from_dims[k] < 0 || to_dims[k] < 0) continue;
    f2t[from_dims[k]] = to_dims[k];
    t2f[to_dims[k]] = from_dims[k];
  }
  return sa_transpose_collapsed(cx->m, s, from_rank, f2t, to_rank, t2f);
}

/* The batch-shape dims aligned with the parallel indices dims. */
static void parallel_batch_dims(const gs_view *v, const par_dims *p, int64_t *out) {
  int64_t b_to_idx[HK_MAX_RANK], idx_to_b[HK_MAX_RANK];
  batch_maps(v, b_to_idx, idx_to_b);
  for (int k = 0; k < p->n; k++) out[k] = idx_to_b[p->idx[k]];
}

/* ---- gather --------------------------------------------------------------------------------- */

bool prop_gather_forward(prop_ctx *cx, hk_instr *i, bool mc) {
  gs_view v;
  if (!gather_view(i, &v)) return false;
  bool changed = false;
  const hk_instr *op = i->operands[0], *idx = i->operands[1];
  if (sa_spatial(idx->sharding))
    changed |= prop_improve(cx, i, batch_from_indices(cx, &v, idx->sharding), mc, false, idx,
                            "gather-index-passthrough");
  if (!cx->o.is_spmd) return changed;
  par_dims p;
  bool has_par = parallel_dims(&v, idx, &p);
  if (has_par) {
    int64_t out_dims[HK_MAX_RANK];
    parallel_batch_dims(&v, &p, out_dims);
    if (sa_spatial(op->sharding))
      changed |= prop_improve(cx, i, parallel_map(cx, op->sharding, v.operand->rank, p.op,
                                                  i->shape->rank, out_dims, p.n),
                              mc, false, op, "gather-parallel");
    if (sa_spatial(idx->sharding))
      changed |= prop_improve(cx, i, parallel_map(cx, idx->sharding, v.indices->rank, p.idx,
                                                  i->shape->rank, out_dims, p.n),
                              mc, false, idx, "gather-parallel");
  }
  if (sa_spatial(op->sharding)) {
    const hk_sharding *s = op->sharding;
    if (has_par) s = hk_sharding_replicate_dims(cx->m, s, p.n, p.op);
    const hk_sharding *o = s ? batch_from_operand(cx, &v, s) : NULL;
    if (o) changed |= prop_improve(cx, i, o, mc, false, op, "gather-operand-passthrough");
  }
  return changed;
}

const hk_sharding *prop_gather_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                        bool mc) {
  gs_view v;
  if (!gather_view(user, &v)) return NULL;
  const hk_sharding *s = user->sharding;
  if (user->operands[1] == i) return indices_from_batch(cx, &v, s);
  if (!cx->o.is_spmd || user->operands[0] != i) return NULL;
  par_dims p;
  const hk_sharding *par = NULL;
  if (parallel_dims(&v, user->operands[1], &p)) {
    int64_t out_dims[HK_MAX_RANK];
    parallel_batch_dims(&v, &p, out_dims);
    par = parallel_map(cx, s, user->shape->rank, out_dims, v.operand->rank, p.op, p.n);
  }
  const hk_sharding *pass = operand_from_batch(cx, &v, s);
  if (!par || par->kind != HK_SHARDING_TILED) return pass ? pass : par;
  if (pass && pass->kind == HK_SHARDING_TILED) sa_merge_compatible(cx->m, pass, sa_num_tiles(par) + 1, &par);
  (void)mc;
  return par;
}

/* ---- scatter ------------------------------------------------------------------------------------
 * A variadic scatter has one output (tuple element) per operand/update
 * pair; element k follows operand k and update k, the indices are shared. */

static const hk_shape *scatter_out_leaf(const hk_instr *i, int64_t k) {
  return hk_shape_is_tuple(i->shape) ? i->shape->tuple[k] : i->shape;
}

/* MaybeImproveInstructionSubSharding: improves tuple element k only. */
static bool improve_element(prop_ctx *cx, hk_instr *i, int64_t k, const hk_sharding *s, bool mc,
                            const hk_instr *src, const char *rule) {
  if (!hk_shape_is_tuple(i->shape)) return prop_improve(cx, i, s, mc, false, src, rule);
  if (!s || !sa_spatial(s)) return false;
  int n = i->shape->n_tuple;
  const hk_sharding *cur = i->sharding ? sa_tuple_of(cx->m, i->shape, i->sharding) : NULL;
  const hk_sharding *el = cur ? cur->elems[k] : NULL, *cand = s;
  if (el && !prop_accept(cx, i->shape->tuple[k], el, &cand, mc, false)) return false;
  const hk_sharding **v = malloc(sizeof *v * (size_t)n);
  if (!v) hk_out_of_memory();
  for (int j = 0; j < n; j++) v[j] = cur ? cur->elems[j] : hk_sharding_replicated(cx->m);
  v[k] = cand;
  const hk_sharding *t = hk_sharding_tuple(cx->m, n, v);
  free(v);
  return prop_set(cx, i, t, src, rule);
}

static bool scatter_parallel_forward(prop_ctx *cx, hk_instr *i, const gs_view *v, bool mc) {
  int n = i->n_operands / 2;
  const hk_instr *idx = i->operands[n];
  par_dims p;
  if (!parallel_dims(v, idx, &p)) return false;
  int64_t upd_dims[HK_MAX_RANK];
  parallel_batch_dims(v, &p, upd_dims);
  bool changed = false;
  for (int k = 0; k < n; k++) {
    const hk_instr *op = i->operands[k];
    if (sa_spatial(op->sharding))
      changed |= improve_element(cx, i, k, parallel_map(cx, op->sharding, v->operand->rank, p.op,
                                                        scatter_out_leaf(i, k)->rank, p.op, p.n),
                                 mc, op, "scatter-parallel");
  }
  if (sa_spatial(idx->sharding)) {
    const hk_sharding *s = parallel_map(cx, idx->sharding, v->indices->rank, p.idx,
                                        scatter_out_leaf(i, 0)->rank, p.op, p.n);
    for (int k = 0; k < n; k++) changed |= improve_element(cx, i, k, s, mc, idx, "scatter-parallel");
  }
  for (int k = 0; k < n; k++) {
    const hk_instr *upd = i->operands[n + 1 + k];
    if (sa_spatial(upd->sharding))
      changed |= improve_element(cx, i, k, parallel_map(cx, upd->sharding, v->batch_shape->rank,
                                                        upd_dims, scatter_out_leaf(i, k)->rank,
                                                        p.op, p.n),
                                 mc, upd, "scatter-parallel");
  }
  return changed;
}

bool prop_scatter_forward(prop_ctx *cx, hk_instr *i, bool mc) {
  gs_view v;
  if (!scatter_view(i, &v)) return false;
  if (!cx->o.is_spmd)
    return prop_improve(cx, i, hk_sharding_replicated(cx->m), mc, false, NULL, "scatter");
  int n = i->n_operands / 2;
  bool changed = false, any_upd = false;
  for (int k = 0; k < n; k++) {
    const hk_instr *op = i->operands[k];
    if (sa_spatial(op->sharding))
      changed |= improve_element(cx, i, k, op->sharding, mc, op, "scatter-operand");
    any_upd |= sa_spatial(i->operands[n + 1 + k]->sharding);
  }
  if (!sa_spatial(i->operands[n]->sharding) && !any_upd) return changed;
  changed |= scatter_parallel_forward(cx, i, &v, mc);
  for (int k = 0; k < n; k++) {
    const hk_instr *upd = i->operands[n + 1 + k];
    if (!sa_spatial(upd->sharding)) continue;
    const hk_sharding *o = operand_from_batch(cx, &v, upd->sharding);
    if (o) changed |= improve_element(cx, i, k, o, mc, upd, "scatter-update-passthrough");
  }
  return changed;
}

/* Indices from every sharded update: merged where compatible. */
static const hk_sharding *scatter_indices_backward(prop_ctx *cx, const hk_instr *user,
                                                   const gs_view *v) {
  int n = user->n_operands / 2;
  const hk_sharding *common = NULL;
  for (int k = 0; k < n; k++) {
    const hk_instr *upd = user->operands[n + 1 + k];
    if (!sa_spatial(upd->sharding)) continue;
    const hk_sharding *s = indices_from_batch(cx, v, upd->sharding);
    if (!s) continue;
    if (!common) common = s;
    else if (s->kind == HK_SHARDING_TILED && common->kind == HK_SHARDING_TILED)
      sa_merge_compatible(cx->m, s, sa_num_tiles(common) + 1, &common);
  }
  return common;
}

static const hk_sharding *scatter_update_backward(prop_ctx *cx, const hk_instr *user,
                                                  const gs_view *v, int64_t k) {
  int n = user->n_operands / 2;
  const hk_instr *idx = user->operands[n];
  const hk_sharding *from_idx = sa_spatial(idx->sharding) ? batch_from_indices(cx, v, idx->sharding)
                                                          : hk_sharding_replicated(cx->m);
  if (cx->o.is_spmd) {
    const hk_sharding *out = sa_element(cx->m, user->sharding, user->shape, k);
    par_dims p;
    const hk_sharding *from_out = NULL;
    if (out && parallel_dims(v, idx, &p)) {
      int64_t upd_dims[HK_MAX_RANK];
      parallel_batch_dims(v, &p, upd_dims);
      from_out = parallel_map(cx, out, v->operand->rank, p.op, v->batch_shape->rank, upd_dims, p.n);
    }
    const hk_sharding *pass = out ? batch_from_operand(cx, v, out) : NULL;
    if (!from_out || from_out->kind != HK_SHARDING_TILED) from_out = pass;
    else if (pass && pass->kind == HK_SHARDING_TILED)
      sa_merge_compatible(cx->m, pass, sa_num_tiles(from_out) + 1, &from_out);
    if (from_out) {
      if (from_idx && from_idx->kind == HK_SHARDING_TILED)
        sa_merge_compatible(cx->m, from_idx, sa_num_tiles(from_out) + 1, &from_out);
      if (from_out->kind == HK_SHARDING_TILED) return from_out;
    }
  }
  return from_idx && from_idx->kind == HK_SHARDING_TILED ? from_idx : NULL;
}

const hk_sharding *prop_scatter_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                         bool mc) {
  (void)mc;
  gs_view v;
  if (!scatter_view(user, &v)) return NULL;
  int n = user->n_operands / 2;
  int64_t k = operand_index(user, i);
  if (k < n) return sa_element(cx->m, user->sharding, user->shape, k);
  if (k == n) return scatter_indices_backward(cx, user, &v);
  return scatter_update_backward(cx, user, &v, k - n - 1);
}
