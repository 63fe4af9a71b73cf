/* gather_scatter.c - GSPMD partitioning of gather and scatter.  Plans,
 * chosen by the gather/scatter_partition_method option and by how many
 * tiles each keeps:
 *   operand-driven: the operand keeps its partitions on passthrough dims
 *     (whole windows), batch dims (explicit, or parallel to an iota in the
 *     indices) and trivially sliced dims (size-1 windows: indices shifted
 *     by the shard offset and masked, then an all-reduce for gather);
 *     indices and updates follow on the paired dims;
 *   index-driven: the indices keep their partitions on batch dims (index
 *     passthrough and batch pairs), the operand follows on its paired
 *     batch dims and is otherwise replicated; a scatter combines the
 *     partitions' updates with an all-reduce of its (associative) combiner;
 *   merged: operand passthrough and index passthrough at once when the two
 *     shardings' devices form one grid; or index passthrough with the
 *     operand trivially sliced within each index group (gather).
 * Anything else goes through the replicate fallback. */
#include <math.h>

#include "spmd_internal.h"

/* Dimension correspondences.  "out" is the gather's result or the
 * scatter's updates; a window dim of out copies an operand dim, a batch dim
 * of out follows an indices dim. */
typedef struct gs_dims {
  int op_rank, idx_rank, out_rank;
  int64_t ivd;                              /* index_vector_dim */
  int64_t window[HK_MAX_RANK];              /* operand dim -> window size */
  int64_t out_of_operand[HK_MAX_RANK];      /* operand dim -> out window dim or -1 */
  int64_t out_of_index[HK_MAX_RANK + 1];    /* indices dim -> out batch dim or -1 */
  int64_t index_of_batch[HK_MAX_RANK];      /* operand batching dim -> indices dim or -1 */
  bool parallel[HK_MAX_RANK];               /* batch pair found from an iota in the indices */
  hk_i64s index_map;                        /* component k -> operand dim */
} gs_dims;

static void map_batch_dims(gs_dims *g, const hk_shape *out, hk_i64s window_dims) {
  int64_t o = 0;
  for (int j = 0; j < g->idx_rank; j++) {
    g->out_of_index[j] = -1;
    if (j == g->ivd) continue;
    while (o < out->rank && hk_i64s_has(window_dims, o)) o++;
    g->out_of_index[j] = o++;
  }
}

static void map_window_dims(gs_dims *g, hk_i64s dropped, hk_i64s batching, hk_i64s window_dims) {
  int k = 0;
  for (int d = 0; d < g->op_rank; d++) {
    g->out_of_operand[d] = -1;
    g->index_of_batch[d] = -1;
    g->parallel[d] = false;
    if (!hk_i64s_has(dropped, d) && !hk_i64s_has(batching, d) && k < window_dims.n)
      g->out_of_operand[d] = window_dims.v[k++];
  }
}

static const hk_instr *skip_copies(const hk_instr *i) {
  while (i->opcode == HK_OP_COPY) i = i->operands[0];
  return i;
}

/* The dim an iota counts along: iota(), or broadcast of a constant
 * 0, 1, ..., n-1; -1 otherwise. */
static int64_t iota_dim(const hk_instr *i) {
  if (i->opcode == HK_OP_IOTA && i->n_dims == 1) return i->dims[0];
  if (i->opcode != HK_OP_BROADCAST || i->n_dims != 1) return -1;
  const hk_instr *c = i->operands[0];
  const hk_literal *l = c->opcode == HK_OP_CONSTANT && c->attrs ? c->attrs->literal : NULL;
  if (!l || !l->data || c->shape->rank != 1 || !hk_prim_is_integral((hk_prim)c->shape->elem))
    return -1;
  for (int64_t e = 0; e < c->shape->dims[0]; e++)
    if (hk_literal_get_i64(l, e) != e) return -1;
  return i->dims[0];
}

/* Component k of the indices is iota(...) along indices dim j and indexes
 * operand dim d of the same size with a size-1 window: then d and j are
 * parallel (implicit batch) dims (XLA's GetGatherScatterBatchParallelDims). */
static void pair_parallel(gs_dims *g, const hk_shape *op, const hk_shape *idx, int64_t k,
                          const hk_instr *piece) {
  piece = skip_copies(piece);
  int64_t j = iota_dim(piece), d = k < g->index_map.n ? g->index_map.v[k] : -1;
  if (j < 0 || d < 0) return;
  if (j == g->ivd || g->window[d] != 1 || g->index_of_batch[d] >= 0 || op->dims[d] != idx->dims[j])
    return;
  for (int e = 0; e < g->op_rank; e++)
    if (g->index_of_batch[e] == j) return;
  g->index_of_batch[d] = j;
  g->parallel[d] = true;
}

static void find_parallel_dims(gs_dims *g, const hk_shape *op, const hk_instr *indices) {
  const hk_instr *c = skip_copies(indices);
  if (g->ivd == g->idx_rank) {
    pair_parallel(g, op, indices->shape, 0, c);
    return;
  }
  if (c->opcode != HK_OP_CONCATENATE || c->n_dims != 1 || c->dims[0] != g->ivd) return;
  int64_t k = 0;
  for (int i = 0; i < c->n_operands; i++) {
    int64_t w = c->operands[i]->shape->dims[g->ivd];
    if (w == 1) pair_parallel(g, op, indices->shape, k, c->operands[i]);
    k += w;
  }
}

static bool gather_dims(const hk_instr *g_, gs_dims *g) {
  const hk_attrs *a = g_->attrs;
  if (!a || !a->gather || g_->n_operands != 2) return false;
  const hk_gather_dnums *dn = a->gather;
  const hk_shape *op = g_->operands[0]->shape, *idx = g_->operands[1]->shape;
  g->op_rank = op->rank;
  g->idx_rank = idx->rank;
  g->out_rank = g_->shape->rank;
  g->ivd = dn->index_vector_dim;
  if (a->gather_slice_sizes.n != op->rank) return false;
  map_window_dims(g, dn->collapsed_slice_dims, dn->operand_batching_dims, dn->offset_dims);
  for (int d = 0; d < op->rank; d++) g->window[d] = a->gather_slice_sizes.v[d];
  for (int i = 0; i < dn->operand_batching_dims.n; i++)
    g->index_of_batch[dn->operand_batching_dims.v[i]] = dn->start_indices_batching_dims.v[i];
  map_batch_dims(g, g_->shape, dn->offset_dims);
  g->index_map = dn->start_index_map;
  find_parallel_dims(g, op, g_->operands[1]);
  return true;
}

static bool scatter_dims(const hk_instr *s, gs_dims *g) {
  const hk_attrs *a = s->attrs;
  int n = (s->n_operands - 1) / 2;
  if (!a || !a->scatter || n < 1 || s->n_operands != 2 * n + 1) return false;
  const hk_scatter_dnums *dn = a->scatter;
  const hk_shape *op = s->operands[0]->shape, *idx = s->operands[n]->shape,
                 *upd = s->operands[n + 1]->shape;
  g->op_rank = op->rank;
  g->idx_rank = idx->rank;
  g->out_rank = upd->rank;
  g->ivd = dn->index_vector_dim;
  map_window_dims(g, dn->inserted_window_dims, dn->input_batching_dims, dn->update_window_dims);
  for (int d = 0; d < op->rank; d++)
    g->window[d] = g->out_of_operand[d] >= 0 ? upd->dims[g->out_of_operand[d]] : 1;
  for (int i = 0; i < dn->input_batching_dims.n; i++)
    g->index_of_batch[dn->input_batching_dims.v[i]] = dn->scatter_indices_batching_dims.v[i];
  map_batch_dims(g, upd, dn->update_window_dims);
  g->index_map = dn->scatter_dims_to_operand_dims;
  find_parallel_dims(g, op, s->operands[n]);
  return true;
}

static bool plain_tiled(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && hk_sharding_is_tiled(s) && !spmd_is_subgroup_manual(s);
}

/* ---- the two plans ---------------------------------------------------------- */

typedef struct gs_plan {
  bool operand_driven;
  const hk_sharding *op_s, *idx_s, *out_s;   /* targets */
  int64_t tiles;                             /* partitions kept */
  int n_trivial;                             /* operand dims sliced to size 1 (operand-driven) */
  int64_t trivial[HK_MAX_RANK];
  int n_shift;                               /* dims whose index values get the shard offset */
  int64_t shift[HK_MAX_RANK];                /* subtracted: trivial dims and iota-parallel dims */
  int n_idx_batch;                           /* index passthrough dims (index-driven) */
  int64_t idx_batch[HK_MAX_RANK];
  const hk_sharding *reduce_s;               /* scatter: partitions whose updates meet ... */
  int n_reduce;                              /* ... differ only in these tile dims of reduce_s */
  int64_t reduce_dims[HK_MAX_RANK];
  int64_t passthrough[HK_MAX_RANK];          /* operand dims whose window is whole and sharded */
  int n_passthrough;
} gs_plan;

/* A sharding of rank n_new whose data dim i takes src's tile dim src_of[i]
 * (-1: unpartitioned); all other tile dims of src become replication. */
static const hk_sharding *derive(hk_module *m, const hk_sharding *src, int n_new,
                                 const int64_t *src_of) {
  if (!src || src->kind != HK_SHARDING_TILED) return hk_sharding_replicated(m);
  int sizes[HK_MAX_RANK + 1], buf[HK_MAX_RANK + 1][HK_MAX_RANK + 1];
  const int *groups[HK_MAX_RANK + 1];
  bool used[HK_MAX_RANK + 1] = {false};
  for (int i = 0; i <= n_new; i++) {
    sizes[i] = 0;
    groups[i] = buf[i];
  }
  for (int i = 0; i < n_new; i++)
    if (src_of[i] >= 0) {
      buf[i][sizes[i]++] = (int)src_of[i];
      used[src_of[i]] = true;
    }
  for (int t = 0; t < src->n_tile_dims; t++)
    if (!used[t]) buf[n_new][sizes[n_new]++] = t;
  return spmd_regroup(m, src, n_new + 1, sizes, groups, true);
}

static int64_t kept_tiles(const hk_sharding *s, int n, const int64_t *dims) {
  int64_t t = 1;
  for (int i = 0; i < n; i++) t *= hk_sharding_dim_partitions(s, (int)dims[i]);
  return t;
}

/* Index values move into the shard: trivial dims and partitioned
 * iota-parallel dims. */
static void find_shifts(const gs_dims *g, gs_plan *pl) {
  pl->n_shift = 0;
  for (int i = 0; i < pl->n_trivial; i++) pl->shift[pl->n_shift++] = pl->trivial[i];
  for (int d = 0; d < g->op_rank; d++)
    if (g->parallel[d] && pl->op_s->kind == HK_SHARDING_TILED &&
        hk_sharding_dim_partitions(pl->op_s, d) > 1)
      pl->shift[pl->n_shift++] = d;
}

static bool is_index_batch_dim(const gs_dims *g, int64_t j) {
  for (int d = 0; d < g->op_rank; d++)
    if (g->index_of_batch[d] == j) return true;
  return false;
}

/* The operand keeps passthrough, explicit batch and trivially sliced dims. */
static bool plan_operand_driven(spmd_visitor *v, const gs_dims *g, const hk_shape *op,
                                const hk_sharding *so, gs_plan *pl) {
  memset(pl, 0, sizeof *pl);
  pl->operand_driven = true;
  if (!plain_tiled(so)) return false;
  int64_t keep[HK_MAX_RANK];
  int nk = 0;
  for (int d = 0; d < g->op_rank; d++) {
    if (hk_sharding_dim_partitions(so, d) == 1) continue;
    if (g->out_of_operand[d] >= 0 && g->window[d] == op->dims[d]) {
      pl->passthrough[pl->n_passthrough++] = d;
      keep[nk++] = d;
    } else if (g->index_of_batch[d] >= 0) {
      keep[nk++] = d;
    } else if (g->window[d] == 1 && hk_i64s_has(g->index_map, d)) {
      pl->trivial[pl->n_trivial++] = d;
      keep[nk++] = d;
    }
  }
  if (!nk) return false;
  pl->op_s = hk_sharding_replicate_all_except(v->m, so, nk, keep);
  if (!plain_tiled(pl->op_s)) return false;
  pl->tiles = kept_tiles(pl->op_s, nk, keep);
  int64_t idx_of[HK_MAX_RANK + 1], out_of[HK_MAX_RANK];
  for (int j = 0; j < g->idx_rank; j++) idx_of[j] = -1;
  for (int o = 0; o < g->out_rank; o++) out_of[o] = -1;
  for (int d = 0; d < g->op_rank; d++) {
    if (hk_sharding_dim_partitions(pl->op_s, d) == 1) continue;
    if (g->index_of_batch[d] >= 0) {
      idx_of[g->index_of_batch[d]] = d;
      out_of[g->out_of_index[g->index_of_batch[d]]] = d;
    } else if (g->out_of_operand[d] >= 0 && g->window[d] == op->dims[d]) {
      out_of[g->out_of_operand[d]] = d;
    }
  }
  pl->idx_s = derive(v->m, pl->op_s, g->idx_rank, idx_of);
  pl->out_s = derive(v->m, pl->op_s, g->out_rank, out_of);
  find_shifts(g, pl);
  return true;
}

/* The indices keep their batch dims (index passthrough, explicit batch). */
static bool plan_index_driven(spmd_visitor *v, const gs_dims *g, const hk_sharding *si,
                              gs_plan *pl) {
  memset(pl, 0, sizeof *pl);
  if (!plain_tiled(si)) return false;
  int64_t keep[HK_MAX_RANK];
  int nk = 0;
  for (int j = 0; j < g->idx_rank; j++) {
    if (j == g->ivd || hk_sharding_dim_partitions(si, j) == 1) continue;
    keep[nk++] = j;
    if (!is_index_batch_dim(g, j)) pl->idx_batch[pl->n_idx_batch++] = j;
  }
  if (!nk) return false;
  pl->idx_s = hk_sharding_replicate_all_except(v->m, si, nk, keep);
  if (!plain_tiled(pl->idx_s)) return false;
  pl->tiles = kept_tiles(pl->idx_s, nk, keep);
  int64_t op_of[HK_MAX_RANK], out_of[HK_MAX_RANK];
  for (int d = 0; d < g->op_rank; d++) {
    int64_t j = g->index_of_batch[d];
    op_of[d] = j >= 0 && hk_sharding_dim_partitions(pl->idx_s, (int)j) > 1 ? j : -1;
  }
  for (int o = 0; o < g->out_rank; o++) out_of[o] = -1;
  for (int j = 0; j < g->idx_rank; j++)
    if (j != g->ivd && hk_sharding_dim_partitions(pl->idx_s, j) > 1) out_of[g->out_of_index[j]] = j;
  pl->op_s = derive(v->m, pl->idx_s, g->op_rank, op_of);
  pl->out_s = derive(v->m, pl->idx_s, g->out_rank, out_of);
  find_shifts(g, pl);
  pl->reduce_s = pl->idx_s;
  pl->n_reduce = pl->n_idx_batch;
  memcpy(pl->reduce_dims, pl->idx_batch, sizeof(int64_t) * (size_t)pl->n_idx_batch);
  return true;
}

/* Only passthrough dims: no trivial slicing, no batch pairs. */
static bool passthrough_only(const gs_dims *g, const gs_plan *op, const gs_plan *idx) {
  if (op->n_trivial || !op->n_passthrough || !idx->n_idx_batch) return false;
  for (int d = 0; d < g->op_rank; d++)
    if (g->index_of_batch[d] >= 0 && hk_sharding_dim_partitions(op->op_s, d) > 1) return false;
  for (int j = 0; j < g->idx_rank; j++)
    if (j != g->ivd && is_index_batch_dim(g, j) && hk_sharding_dim_partitions(idx->idx_s, j) > 1)
      return false;
  return true;
}

/* Output tile coordinate (row-major over out dims) of a device holding
 * operand tile oi and indices tile ii. */
static int64_t merged_coord(const gs_dims *g, const int64_t *tdims, const int64_t *oi,
                            const int64_t *ii) {
  int64_t lin = 0;
  for (int o = 0; o < g->out_rank; o++) {
    int64_t c = 0;
    for (int d = 0; d < g->op_rank; d++)
      if (g->out_of_operand[d] == o) c = tdims[o] > 1 ? oi[d] : 0;
    for (int j = 0; j < g->idx_rank; j++)
      if (j != g->ivd && g->out_of_index[j] == o && tdims[o] > 1) c = ii[j];
    lin = lin * tdims[o] + c;
  }
  return lin;
}

/* The output sharding of the joint plan: out tile (indices tile, operand
 * tile) on the devices holding both; NULL when the two shardings' devices
 * do not form one grid (or, with unique, when a tile has copies). */
static const hk_sharding *merged_output(spmd_visitor *v, const gs_dims *g, const gs_plan *op,
                                        const gs_plan *idx, bool unique) {
  int64_t tdims[HK_MAX_RANK + 1], prod = 1, n = v->p->num_partitions;
  for (int o = 0; o < g->out_rank; o++) tdims[o] = 1;
  for (int i = 0; i < op->n_passthrough; i++) {
    int64_t d = op->passthrough[i];
    tdims[g->out_of_operand[d]] = hk_sharding_dim_partitions(op->op_s, (int)d);
  }
  for (int i = 0; i < idx->n_idx_batch; i++) {
    int64_t j = idx->idx_batch[i];
    tdims[g->out_of_index[j]] = hk_sharding_dim_partitions(idx->idx_s, (int)j);
  }
  for (int o = 0; o < g->out_rank; o++) prod *= tdims[o];
  if (n % prod || (unique && n != prod)) return NULL;
  int64_t rep = n / prod;
  tdims[g->out_rank] = rep;
  int64_t *fill = calloc((size_t)prod, sizeof(int64_t)), *devs = malloc(sizeof(int64_t) * (size_t)n);
  if (!fill || !devs) hk_out_of_memory();
  bool ok = true;
  for (int64_t dev = 0; dev < n && ok; dev++) {
    int64_t oi[HK_MAX_RANK], ii[HK_MAX_RANK + 1];
    ok = hk_sharding_tile_index(op->op_s, dev, oi) && hk_sharding_tile_index(idx->idx_s, dev, ii);
    int64_t lin = ok ? merged_coord(g, tdims, oi, ii) : 0;
    ok = ok && fill[lin] < rep;
    if (ok) devs[lin * rep + fill[lin]++] = dev;
  }
  const hk_sharding *s =
      ok ? hk_sharding_canonical(v->m, hk_sharding_tiled(v->m, g->out_rank + (rep > 1), tdims, devs,
                                                         rep > 1))
         : NULL;
  free(fill);
  free(devs);
  return s;
}

/* Operand passthrough and index passthrough at once (XLA's merged
 * strategies): the operand keeps its passthrough partitions, the indices
 * their batch partitions, the output is tiled by both. */
static bool plan_merged(spmd_visitor *v, const gs_dims *g, const gs_plan *op, const gs_plan *idx,
                        bool unique, gs_plan *pl) {
  if (!passthrough_only(g, op, idx)) return false;
  const hk_sharding *out = merged_output(v, g, op, idx, unique);
  if (!out) return false;
  *pl = *idx;
  pl->op_s = op->op_s;
  pl->out_s = out;
  pl->tiles = op->tiles * idx->tiles;
  pl->n_passthrough = op->n_passthrough;
  memcpy(pl->passthrough, op->passthrough, sizeof(int64_t) * (size_t)op->n_passthrough);
  pl->n_shift = 0;
  /* Scatter: the partitions holding one operand tile (its replication
   * group, one per indices tile) combine their updates. */
  pl->reduce_s = op->op_s;
  pl->n_reduce = op->op_s->replicate_on_last_tile_dim ? 1 : 0;
  pl->reduce_dims[0] = op->op_s->n_tile_dims - 1;
  return pl->n_reduce > 0 || !unique;
}

/* Index passthrough with a trivially sliced operand inside each index
 * group (XLA's PartitionGatherIndexPassthroughDimensions recursing into
 * PartitionGatherTrivialSlicedOperandDimensions): the indices keep their
 * batch tiles, the operand its trivial-dim tiles; every device gathers its
 * indices' rows from the operand rows it holds and the all-reduce over the
 * trivial dims sums within one index group.  That needs each all-reduce
 * group (devices differing only in the operand's trivial tile) to hold one
 * index tile. */
static bool plan_trivial_in_index_groups(spmd_visitor *v, const gs_dims *g, const gs_plan *op_in,
                                         const gs_plan *idx, gs_plan *pl) {
  if (!op_in->n_trivial || !idx->n_idx_batch) return false;
  /* Inside a group the operand is whole but for its trivial dims (XLA
   * groups it on them and the inner gather sees the rest replicated). */
  gs_plan trivial_only = *op_in;
  const gs_plan *op = op_in;
  if (op_in->n_passthrough) {
    trivial_only.op_s = hk_sharding_replicate_all_except(v->m, op_in->op_s, op_in->n_trivial,
                                                         op_in->trivial);
    if (!plain_tiled(trivial_only.op_s)) return false;
    trivial_only.n_passthrough = 0;
    trivial_only.tiles = kept_tiles(trivial_only.op_s, op_in->n_trivial, op_in->trivial);
    op = &trivial_only;
  }
  /* No batch pairs split on either side: the operand's rows are indexed by
   * the index values alone. */
  for (int d = 0; d < g->op_rank; d++)
    if (g->index_of_batch[d] >= 0 && hk_sharding_dim_partitions(op->op_s, d) > 1) return false;
  for (int j = 0; j < g->idx_rank; j++)
    if (j != g->ivd && is_index_batch_dim(g, j) && hk_sharding_dim_partitions(idx->idx_s, j) > 1)
      return false;
  int64_t n = v->p->num_partitions;
  int64_t n_groups, gsize;
  int64_t *groups = spmd_groups(v, op->op_s, op->n_trivial, op->trivial, &n_groups, &gsize);
  bool ok = gsize > 0 && n_groups * gsize == n;
  for (int64_t k = 0; ok && k < n_groups; k++) {
    int64_t first[HK_MAX_RANK + 1], other[HK_MAX_RANK + 1];
    ok = hk_sharding_tile_index(idx->idx_s, groups[k * gsize], first);
    for (int64_t j = 1; ok && j < gsize; j++) {
      ok = hk_sharding_tile_index(idx->idx_s, groups[k * gsize + j], other);
      for (int t = 0; ok && t < g->idx_rank; t++) ok = other[t] == first[t];
    }
  }
  free(groups);
  if (!ok) return false;
  *pl = *idx;
  pl->operand_driven = true;   /* the all-reduce of the trivial dims, as operand-driven */
  pl->op_s = op->op_s;
  pl->n_trivial = op->n_trivial;
  memcpy(pl->trivial, op->trivial, sizeof(int64_t) * (size_t)op->n_trivial);
  pl->tiles = op->tiles * idx->tiles;
  find_shifts(g, pl);
  return true;
}

/* A method that does not name one side lets the merged plan win. */
static bool merge_allowed(hk_spmd_gs_method m) {
  return m == HK_SPMD_GS_INDEX_PARALLEL || m == HK_SPMD_GS_EXPLICIT_BATCH;
}

/* Picks a plan: the method option first, then the one keeping more tiles
 * (operand-driven on a tie, unless a gather would need masking). */
static const gs_plan *choose(hk_spmd_gs_method method, bool op_ok, const gs_plan *op,
                             bool idx_ok, const gs_plan *idx, bool masking_costs) {
  if (!op_ok) return idx_ok ? idx : NULL;
  if (!idx_ok) return op;
  if (method == HK_SPMD_GS_INDEX_PASSTHROUGH) return idx;
  if (method == HK_SPMD_GS_OPERAND_PASSTHROUGH || method == HK_SPMD_GS_TRIVIAL_SLICED_OPERAND)
    return op;
  if (op->tiles != idx->tiles) return op->tiles > idx->tiles ? op : idx;
  return op->n_trivial && masking_costs ? idx : op;
}

/* ---- shared builders --------------------------------------------------------- */

static hk_status *operand_as(spmd_visitor *v, const hk_instr *orig, int k, const hk_sharding *s,
                             hk_instr **out) {
  spmd_value *val = spmd_lookup(v, orig->operands[k]);
  if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
  return spmd_reshard(v, val, s, out);
}

/* ---- indices made of iotas and constants ---------------------------------------
 * Indices computed from iotas, constants and replicated values alone (how
 * parallel dims are written) are rebuilt on every device (rebuild.c)
 * rather than resharded, moving nothing where a reshard would move them. */

/* The price of taking the indices (operand k of orig) to s. */
static int64_t indices_cost(spmd_visitor *v, const hk_instr *orig, int k, const hk_sharding *s) {
  const hk_instr *x = orig->operands[k];
  int64_t c = spmd_reshard_cost(v, x->shape, spmd_sharding_of(v, x), s);
  return c > 0 && spmd_rebuildable(v, x) ? spmd_reshard_cost(v, x->shape, hk_sharding_replicated(v->m), s) : c;
}

/* The indices (operand k of orig) under s: rebuilt and sliced where that
 * moves less than resharding them. */
static hk_status *indices_as(spmd_visitor *v, hk_instr *orig, int k, const hk_sharding *s, hk_instr **out) {
  const hk_instr *x = orig->operands[k];
  const hk_sharding *rep = hk_sharding_replicated(v->m);
  if (!spmd_rebuildable(v, x) || spmd_reshard_cost(v, x->shape, spmd_sharding_of(v, x), s) <=
                             spmd_reshard_cost(v, x->shape, rep, s))
    return operand_as(v, orig, k, s, out);
  return spmd_reshard_hlo(v, spmd_rebuild(v, x), x->shape, rep, s, out);
}

static hk_instr *new_op(spmd_visitor *v, hk_opcode op, const hk_shape *s, int n, hk_instr **ops) {
  return hk_instr_new(v->comp, op, s, n, ops, NULL);
}

static hk_instr *compare(spmd_visitor *v, hk_instr *a, hk_instr *b, hk_cmp_dir dir) {
  hk_instr *ops[2] = {a, b};
  hk_instr *c = new_op(v, HK_OP_COMPARE, hk_shape_with_elem(v->m, a->shape, HK_PRED), 2, ops);
  hk_instr_attrs(c)->cmp_dir = (uint8_t)dir;
  return c;
}

static hk_instr *binary(spmd_visitor *v, hk_opcode op, hk_instr *a, hk_instr *b) {
  hk_instr *ops[2] = {a, b};
  return new_op(v, op, a->shape, 2, ops);
}

/* A per-component vector (one value per index component) broadcast over
 * the indices' shape along the index vector dim. */
static hk_instr *per_component(spmd_visitor *v, const gs_dims *g, hk_instr *vec,
                               const hk_shape *idx_shape) {
  hk_instr *b = hk_instr_new(v->comp, HK_OP_BROADCAST, idx_shape, 1, &vec, NULL);
  if (vec->shape->rank == 1) hk_instr_set_dims(b, 1, &g->ivd);
  return b;
}

static int64_t n_components(const gs_dims *g, const hk_shape *idx) {
  return g->ivd < g->idx_rank ? idx->dims[g->ivd] : 1;
}

/* A constant vector of the components' values (rank 1, or a scalar when
 * the index vector dim is implicit). */
static hk_instr *component_constant(spmd_visitor *v, const gs_dims *g, hk_prim t, int64_t k,
                                    const int64_t *vals) {
  const hk_shape *s = g->ivd < g->idx_rank ? hk_shape_array(v->m, t, 1, &k) : hk_shape_scalar(v->m, t);
  hk_literal *l = hk_literal_new(v->m, s);
  for (int64_t i = 0; i < k; i++) hk_literal_set_i64(l, i, vals[i]);
  hk_instr *c = hk_instr_new(v->comp, HK_OP_CONSTANT, s, 0, NULL, NULL);
  hk_instr_attrs(c)->literal = l;
  return c;
}

/* This partition's shard offsets per component (0 for components not on a
 * shifted dim): a table indexed by partition-id. */
static hk_instr *component_offsets(spmd_visitor *v, const gs_dims *g, const gs_plan *pl, hk_prim t,
                                   int64_t k, const hk_shape *op_shape) {
  int64_t np = v->p->num_partitions, dims[2] = {np, k};
  const hk_shape *ts = hk_shape_array(v->m, t, 2, dims);
  hk_literal *l = hk_literal_new(v->m, ts);
  int64_t off[HK_MAX_RANK];
  for (int64_t dev = 0; dev < np; dev++) {
    if (!hk_sharding_tile_offset(pl->op_s, op_shape, dev, off)) continue;
    for (int64_t c = 0; c < k; c++) {
      int64_t d = g->index_map.v[c];
      bool shifted = false;
      for (int i = 0; i < pl->n_shift; i++) shifted = shifted || pl->shift[i] == d;
      hk_literal_set_i64(l, dev * k + c, shifted ? off[d] : 0);
    }
  }
  hk_instr *table = hk_instr_new(v->comp, HK_OP_CONSTANT, ts, 0, NULL, NULL);
  hk_instr_attrs(table)->literal = l;
  hk_instr *ops[3] = {table, spmd_partition_id(v), hk_build_constant_i64(v->comp, NULL, HK_U32, 0)};
  int64_t one_k[2] = {1, k};
  hk_instr *ds = new_op(v, HK_OP_DYNAMIC_SLICE, hk_shape_array(v->m, t, 2, one_k), 3, ops);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = 2;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, one_k, sizeof one_k);
  const hk_shape *vs = g->ivd < g->idx_rank ? hk_shape_array(v->m, t, 1, &k) : hk_shape_scalar(v->m, t);
  return new_op(v, HK_OP_RESHAPE, vs, 1, &ds);
}

static bool is_trivial_dim(const gs_plan *pl, int64_t d) {
  return hk_i64_index(pl->trivial, pl->n_trivial, d) >= 0;
}

/* Indices in a signed type the arithmetic below can use. */
static hk_instr *signed_indices(spmd_visitor *v, hk_instr *idx) {
  hk_prim t = (hk_prim)idx->shape->elem;
  if (t == HK_S32 || t == HK_S64) return idx;
  hk_prim to = hk_prim_bits(t) > 31 ? HK_S64 : HK_S32;
  return new_op(v, HK_OP_CONVERT, hk_shape_with_elem(v->m, idx->shape, to), 1, &idx);
}

typedef struct shifted_indices {
  hk_instr *idx;     /* local indices */
  hk_instr *valid;   /* gather only: pred of the index batch shape, or NULL */
} shifted_indices;

/* Indices into the local shard of the trivially sliced dims.  Gather: the
 * global clamp first, then the shift, and a mask of the rows this shard
 * holds.  Scatter: the shift, with globally out-of-bounds rows sent to -1
 * so the local scatter skips them as the global one does. */
static shifted_indices shift_indices(spmd_visitor *v, const gs_dims *g, const gs_plan *pl,
                                     hk_instr *idx, const hk_shape *op_shape, bool gather) {
  idx = signed_indices(v, idx);
  hk_prim t = (hk_prim)idx->shape->elem;
  int64_t k = n_components(g, idx->shape);
  int64_t big = t == HK_S32 ? INT32_MAX : INT64_MAX;
  int64_t *hi = malloc(sizeof(int64_t) * (size_t)(2 * k + 1));
  if (!hi) hk_out_of_memory();
  int64_t *lim = hi + k;
  const hk_shape *ls = spmd_local_shape(v, pl->op_s, op_shape);
  for (int64_t c = 0; c < k; c++) {
    int64_t d = g->index_map.v[c];
    bool tr = is_trivial_dim(pl, d);
    hi[c] = tr ? op_shape->dims[d] - 1 : big;
    lim[c] = tr ? ls->dims[d] : big;
  }
  hk_instr *zero = per_component(v, g, hk_build_constant_i64(v->comp, NULL, t, 0), idx->shape);
  hk_instr *hiv = per_component(v, g, component_constant(v, g, t, k, hi), idx->shape);
  hk_instr *offv = per_component(v, g, component_offsets(v, g, pl, t, k, op_shape), idx->shape);
  shifted_indices r = {NULL, NULL};
  if (gather) {
    hk_instr *ops[3] = {zero, idx, hiv};
    hk_instr *cl = new_op(v, HK_OP_CLAMP, idx->shape, 3, ops);
    r.idx = binary(v, HK_OP_SUBTRACT, cl, offv);
    hk_instr *limv = per_component(v, g, component_constant(v, g, t, k, lim), idx->shape);
    hk_instr *ok = binary(v, HK_OP_AND, compare(v, r.idx, zero, HK_CMP_GE),
                          compare(v, r.idx, limv, HK_CMP_LT));
    r.valid = ok;
    if (g->ivd < g->idx_rank) {
      hk_instr *ops2[2] = {ok, hk_build_constant_i64(v->comp, NULL, HK_PRED, 1)};
      int64_t bd[HK_MAX_RANK];
      int nb = 0;
      for (int j = 0; j < g->idx_rank; j++)
        if (j != g->ivd) bd[nb++] = idx->shape->dims[j];
      hk_instr *red = new_op(v, HK_OP_REDUCE, hk_shape_array(v->m, HK_PRED, nb, bd), 2, ops2);
      hk_instr_set_dims(red, 1, &g->ivd);
      hk_computation *and_ = spmd_reducer(v->m, HK_PRED, HK_OP_AND);
      hk_instr_set_called(red, 1, &and_);
      r.valid = red;
    }
  } else {
    hk_instr *ok = binary(v, HK_OP_AND, compare(v, idx, zero, HK_CMP_GE),
                          compare(v, idx, hiv, HK_CMP_LE));
    hk_instr *minus1 = per_component(v, g, hk_build_constant_i64(v->comp, NULL, t, -1), idx->shape);
    hk_instr *ops[3] = {ok, binary(v, HK_OP_SUBTRACT, idx, offv), minus1};
    r.idx = new_op(v, HK_OP_SELECT, idx->shape, 3, ops);
  }
  free(hi);
  return r;
}

static hk_status *all_reduce_over(spmd_visitor *v, hk_instr **h, const hk_sharding *s, int n,
                                  const int64_t *dims, hk_opcode op) {
  int64_t n_groups, gsize;
  int64_t *groups = spmd_groups(v, s, n, dims, &n_groups, &gsize);
  if (gsize < 1) {
    free(groups);
    return hk_error(HK_INTERNAL, "no partition groups for an all-reduce");
  }
  hk_prim e = (hk_prim)(*h)->shape->elem;
  hk_computation *red = spmd_reducer(v->m, e, op);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  *h = c->all_reduce(c->state, v->comp, *h, red, n_groups, gsize, groups, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(groups);
  return NULL;
}

/* ---- gather ------------------------------------------------------------------ */

static hk_status *gather_with_plan(spmd_visitor *v, hk_instr *orig, const gs_dims *g,
                                   const gs_plan *pl) {
  const hk_shape *op_shape = orig->operands[0]->shape;
  hk_instr *ops[2];
  HK_TRY(operand_as(v, orig, 0, pl->op_s, &ops[0]));
  HK_TRY(indices_as(v, orig, 1, pl->idx_s, &ops[1]));
  shifted_indices si = {ops[1], NULL};
  if (pl->n_shift) si = shift_indices(v, g, pl, ops[1], op_shape, true);
  ops[1] = si.idx;
  const hk_shape *ls = spmd_local_shape(v, pl->out_s, orig->shape);
  hk_instr *h = spmd_clone(v, orig, ls, 2, ops);
  hk_instr_set_sharding(h, NULL);
  hk_attrs *a = h->attrs;
  int64_t *sizes = hk_memdup(v->m, a->gather_slice_sizes.v, sizeof(int64_t) * (size_t)g->op_rank);
  for (int i = 0; i < pl->n_passthrough; i++) {
    int64_t d = pl->passthrough[i];
    sizes[d] = ops[0]->shape->dims[d];
  }
  a->gather_slice_sizes.v = sizes;
  if (pl->n_trivial && si.valid) {
    int64_t bd[HK_MAX_RANK];
    int nb = 0;
    for (int j = 0; j < g->idx_rank; j++)
      if (j != g->ivd) bd[nb++] = g->out_of_index[j];
    hk_instr *mask = hk_instr_new(v->comp, HK_OP_BROADCAST, hk_shape_with_elem(v->m, ls, HK_PRED),
                                  1, &si.valid, NULL);
    hk_instr_set_dims(mask, nb, bd);
    hk_instr *sel[3] = {mask, h, spmd_zeros(v, ls)};
    h = new_op(v, HK_OP_SELECT, ls, 3, sel);
    HK_TRY(all_reduce_over(v, &h, pl->op_s, pl->n_trivial, pl->trivial,
                           ls->elem == HK_PRED ? HK_OP_OR : HK_OP_ADD));
  }
  spmd_set(v, orig, h, pl->out_s);
  return NULL;
}

/* The bytes a gather plan moves (planned_collective_cost): the operands'
 * reshards, the all-reduce of a trivially sliced operand's partial
 * results, the result's reshard to the gather's sharding. */
static int64_t gather_plan_cost(spmd_visitor *v, const hk_instr *orig, const gs_plan *pl) {
  int64_t c = spmd_reshard_cost(v, orig->operands[0]->shape, spmd_sharding_of(v, orig->operands[0]),
                                pl->op_s);
  c += indices_cost(v, orig, 1, pl->idx_s);
  if (pl->n_trivial)
    c += spmd_plan_cost(v->p, HK_COLL_ALL_REDUCE,
                        hk_shape_byte_size(spmd_local_shape(v, pl->out_s, orig->shape)),
                        kept_tiles(pl->op_s, pl->n_trivial, pl->trivial));
  return c + spmd_reshard_cost(v, orig->shape, pl->out_s, spmd_sharding_of(v, orig));
}

hk_status *spmd_handle_gather(spmd_visitor *v, hk_instr *orig) {
  gs_dims g;
  if (hk_shape_is_tuple(orig->shape) || !gather_dims(orig, &g)) return spmd_handle_fallback(v, orig);
  gs_plan op_plan, idx_plan;
  /* Planned from the operands' annotations, as XLA does. */
  bool op_ok = plan_operand_driven(v, &g, orig->operands[0]->shape,
                                   spmd_sharding_of(v, orig->operands[0]), &op_plan);
  bool idx_ok = plan_index_driven(v, &g, spmd_sharding_of(v, orig->operands[1]), &idx_plan);
  hk_spmd_gs_method method = v->p->options.gather_partition_method;
  const gs_plan *pl = choose(method, op_ok, &op_plan, idx_ok, &idx_plan, true);
  gs_plan merged;
  if (op_ok && idx_ok && merge_allowed(method) &&
      (plan_merged(v, &g, &op_plan, &idx_plan, false, &merged) ||
       (!op_plan.n_passthrough &&
        plan_trivial_in_index_groups(v, &g, &op_plan, &idx_plan, &merged))))
    pl = &merged;
  else if (op_ok && idx_ok && op_plan.n_passthrough &&
           plan_trivial_in_index_groups(v, &g, &op_plan, &idx_plan, &merged) &&
           (method == HK_SPMD_GS_TRIVIAL_SLICED_OPERAND ||
            gather_plan_cost(v, orig, &merged) < gather_plan_cost(v, orig, pl)))
    /* The trivially sliced operand with the indices left in their groups
     * (XLA's trivial-slice method recursing into index passthrough): the
     * one the method names, else taken when it moves fewer bytes. */
    pl = &merged;
  if (!pl) return spmd_handle_fallback(v, orig);
  return gather_with_plan(v, orig, &g, pl);
}

/* ---- scatter ------------------------------------------------------------------ */

/* The combiner's op when it is op(param0, param1) for an associative,
 * commutative op with an identity; HK_OPCODE_COUNT otherwise. */
static hk_opcode scatter_combiner(const hk_instr *orig) {
  if (orig->n_called != 1) return HK_OPCODE_COUNT;
  const hk_instr *r = orig->called[0]->root;
  if (!r || r->n_operands != 2 || r->operands[0]->opcode != HK_OP_PARAMETER ||
      r->operands[1]->opcode != HK_OP_PARAMETER || r->operands[0] == r->operands[1])
    return HK_OPCODE_COUNT;
  switch ((hk_opcode)r->opcode) {
    case HK_OP_ADD:
    case HK_OP_MULTIPLY:
    case HK_OP_MAXIMUM:
    case HK_OP_MINIMUM:
    case HK_OP_OR:
    case HK_OP_AND:
      return (hk_opcode)r->opcode;
    default:
      return HK_OPCODE_COUNT;
  }
}

/* Whether combining partitions' partial scatters reproduces the global
 * result: always for min/max/and/or and integers; for sums and products
 * of floats only in f32 and wider (a reordered bf16/f16/f8 accumulation
 * differs from the global sequential one far beyond rounding noise). */
static bool combine_reorder_ok(hk_opcode op, hk_prim t) {
  if (op == HK_OP_MINIMUM || op == HK_OP_MAXIMUM || op == HK_OP_AND || op == HK_OP_OR) return true;
  if (!hk_prim_is_float(t) && !hk_prim_is_complex(t)) return true;
  return hk_prim_bits(t) >= 32;
}

/* The identity of op for element type t, as a scalar constant. */
static hk_instr *identity_of(spmd_visitor *v, hk_opcode op, hk_prim t) {
  bool hi = op == HK_OP_MINIMUM, lo = op == HK_OP_MAXIMUM;
  if ((op == HK_OP_MULTIPLY || op == HK_OP_AND) || (t == HK_PRED && hi))
    return hk_build_constant_i64(v->comp, NULL, t, 1);
  if (!hi && !lo) return hk_build_constant_i64(v->comp, NULL, t, 0);
  if (hk_prim_is_float(t)) return hk_build_constant_f64(v->comp, NULL, t, hi ? INFINITY : -INFINITY);
  int bits = hk_prim_bits(t);
  if (hk_prim_is_unsigned_int(t))
    return hk_build_constant_i64(v->comp, NULL, t, lo ? 0 : (bits >= 64 ? -1 : (int64_t)((1ULL << bits) - 1)));
  if (t == HK_PRED) return hk_build_constant_i64(v->comp, NULL, t, 0);
  int64_t mx = bits >= 64 ? INT64_MAX : (int64_t)((1ULL << (bits - 1)) - 1);
  return hk_build_constant_i64(v->comp, NULL, t, hi ? mx : -mx - 1);
}

/* The local indices idx (under s, global shape gs) with the rows in the
 * padding of unevenly split batch dims sent to -1: the padding holds
 * whatever the reshard left there, which could name a real row, and the
 * local scatter skips an out-of-bounds row as the global one would never
 * see it. */
static hk_instr *skip_padding_rows(spmd_visitor *v, const gs_dims *g, const hk_shape *gs,
                                   const hk_sharding *s, hk_instr *idx) {
  if (!plain_tiled(s)) return idx;
  for (int j = 0; j < g->idx_rank; j++) {
    int64_t k = j == g->ivd ? 1 : hk_sharding_dim_partitions(s, j);
    if (k == 1 || gs->dims[j] % k == 0) continue;
    idx = signed_indices(v, idx);
    hk_instr *minus1 = hk_build_constant_i64(v->comp, NULL, (hk_prim)idx->shape->elem, -1);
    idx = spmd_mask_padding(v, s, gs, j, idx, minus1);
  }
  return idx;
}

static hk_status *scatter_with_plan(spmd_visitor *v, hk_instr *orig, const gs_dims *g,
                                    const gs_plan *pl, hk_opcode combiner) {
  int n = (orig->n_operands - 1) / 2;
  const hk_shape *op_shape = orig->operands[0]->shape;
  hk_instr **ops = calloc((size_t)(2 * n + 1), sizeof(hk_instr *));
  const hk_shape **ls = calloc((size_t)n + 1, sizeof(hk_shape *));
  const hk_sharding **es = calloc((size_t)n + 1, sizeof(hk_sharding *));
  if (!ops || !ls || !es) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < 2 * n + 1 && !st; k++) {
    const hk_sharding *t = k < n ? pl->op_s : k == n ? pl->idx_s : pl->out_s;
    st = k == n ? indices_as(v, orig, k, t, &ops[k]) : operand_as(v, orig, k, t, &ops[k]);
  }
  if (!st) {
    if (pl->n_shift) ops[n] = shift_indices(v, g, pl, ops[n], op_shape, false).idx;
    ops[n] = skip_padding_rows(v, g, orig->operands[n]->shape, pl->idx_s, ops[n]);
    bool combine = !pl->operand_driven && pl->n_idx_batch > 0;
    hk_instr *base = ops[0];
    if (combine) ops[0] = hk_build_broadcast_scalar(v->comp, NULL,
                                                    identity_of(v, combiner, (hk_prim)base->shape->elem),
                                                    base->shape);
    for (int k = 0; k < n; k++) {
      ls[k] = ops[k]->shape;
      es[k] = pl->op_s;
    }
    const hk_shape *shape = n == 1 ? ls[0] : hk_shape_tuple(v->m, n, ls);
    hk_instr *h = spmd_clone(v, orig, shape, 2 * n + 1, ops);
    hk_instr_set_sharding(h, NULL);
    /* Rows sent to -1 break sortedness and uniqueness of the index list. */
    if (pl->n_shift) h->attrs->indices_are_sorted = h->attrs->unique_indices = false;
    if (combine) {
      st = all_reduce_over(v, &h, pl->reduce_s, pl->n_reduce, pl->reduce_dims, combiner);
      if (!st) h = binary(v, combiner, base, h);
    }
    if (!st) spmd_set(v, orig, h, n == 1 ? pl->op_s : hk_sharding_tuple(v->m, n, es));
  }
  free(ops);
  free(ls);
  free(es);
  return st;
}

static const hk_sharding *first_element(const hk_sharding *s) {
  if (s && s->kind == HK_SHARDING_TUPLE) return s->n_elems ? s->elems[0] : NULL;
  return s;
}

/* The bytes a (single-operand) scatter plan moves (planned_collective_cost):
 * the operand's, indices' and updates' reshards, the all-reduce combining
 * partitions' updates, the result's reshard to the scatter's sharding. */
static int64_t scatter_plan_cost(spmd_visitor *v, const hk_instr *orig, const gs_plan *pl) {
  const hk_instr *op = orig->operands[0], *upd = orig->operands[2];
  int64_t c = spmd_reshard_cost(v, op->shape, spmd_sharding_of(v, op), pl->op_s);
  c += indices_cost(v, orig, 1, pl->idx_s);
  c += spmd_reshard_cost(v, upd->shape, spmd_sharding_of(v, upd), pl->out_s);
  if (!pl->operand_driven && pl->n_idx_batch > 0)
    c += spmd_plan_cost(v->p, HK_COLL_ALL_REDUCE, hk_shape_byte_size(spmd_local_shape(v, pl->op_s, op->shape)),
                        kept_tiles(pl->reduce_s, pl->n_reduce, pl->reduce_dims));
  return c + spmd_reshard_cost(v, orig->shape, pl->op_s, spmd_sharding_of(v, orig));
}

/* The peak bytes a device holds for one instruction of a (single-operand)
 * scatter plan, as XLA's cost model measures it (the largest of its
 * instructions' operands and result): the local scatter's three operands,
 * or a reshard's source and target tiles together. */
static int64_t scatter_plan_memory(spmd_visitor *v, const hk_instr *orig, const gs_plan *pl) {
  const hk_sharding *to[3] = {pl->op_s, pl->idx_s, pl->out_s};
  int64_t sum = 0, peak = 0;
  for (int k = 0; k < 3; k++) {
    const hk_instr *x = orig->operands[k];
    int64_t b = hk_shape_byte_size(spmd_local_shape(v, to[k], x->shape));
    const hk_sharding *from = spmd_sharding_of(v, x);
    int64_t moved = hk_sharding_equivalent(from, to[k]) ? 0
                    : b + hk_shape_byte_size(spmd_local_shape(v, from, x->shape));
    sum += b;
    if (moved > peak) peak = moved;
  }
  return sum > peak ? sum : peak;
}

/* Whether plan a is cheaper than b as XLA orders scatter methods: memory
 * first, then the bytes moved. */
static bool scatter_plan_cheaper(spmd_visitor *v, const hk_instr *orig, const gs_plan *a,
                                 const gs_plan *b) {
  int64_t ma = scatter_plan_memory(v, orig, a), mb = scatter_plan_memory(v, orig, b);
  if (ma != mb) return ma < mb;
  return scatter_plan_cost(v, orig, a) < scatter_plan_cost(v, orig, b);
}

/* The operand-driven plan for an operand split like the updates su on its
 * passthrough dims: what XLA's index passthrough reaches when it recurses
 * into operand passthrough inside each index group, the updates keeping
 * their window split. */
static bool plan_from_updates(spmd_visitor *v, const gs_dims *g, const hk_shape *op,
                              const hk_sharding *su, gs_plan *pl) {
  if (!plain_tiled(su)) return false;
  int64_t src_of[HK_MAX_RANK];
  for (int d = 0; d < g->op_rank; d++) {
    int64_t o = g->out_of_operand[d];
    src_of[d] = o >= 0 && g->window[d] == op->dims[d] && hk_sharding_dim_partitions(su, (int)o) > 1 ? o : -1;
  }
  return plan_operand_driven(v, g, op, derive(v->m, su, g->op_rank, src_of), pl) &&
         !pl->n_trivial && pl->n_passthrough;
}

/* When neither the operand's nor the indices' split gives a plan: the
 * operand driven by the updates' window split or by the scatter's own
 * sharding (a reshard of the operand, where the fallback would gather
 * every input), the cheaper of the two (memory, then bytes). */
static const gs_plan *plan_from_elsewhere(spmd_visitor *v, const hk_instr *orig, const gs_dims *g,
                                          gs_plan alt[2]) {
  const hk_shape *op = orig->operands[0]->shape;
  int n = (orig->n_operands - 1) / 2;
  bool a = plan_from_updates(v, g, op, first_element(spmd_sharding_of(v, orig->operands[n + 1])), &alt[0]);
  bool b = plan_operand_driven(v, g, op, first_element(spmd_sharding_of(v, orig)), &alt[1]);
  if (a && b) return scatter_plan_cheaper(v, orig, &alt[0], &alt[1]) ? &alt[0] : &alt[1];
  return a ? &alt[0] : b ? &alt[1] : NULL;
}

hk_status *spmd_handle_scatter(spmd_visitor *v, hk_instr *orig) {
  gs_dims g;
  if (!scatter_dims(orig, &g)) return spmd_handle_fallback(v, orig);
  int n = (orig->n_operands - 1) / 2;
  /* Planned from the first operand's annotation: a variadic scatter's
   * other operands are resharded to the plan's sharding with it (XLA's
   * FindCommonSharding when they do not merge; merging compatible ones
   * into a finer sharding is not done here). */
  const hk_sharding *so = first_element(spmd_sharding_of(v, orig->operands[0]));
  hk_opcode combiner = scatter_combiner(orig);
  gs_plan op_plan, idx_plan;
  bool op_ok = plan_operand_driven(v, &g, orig->operands[0]->shape, so, &op_plan);
  /* The index-driven plan needs a combiner when partitions' updates meet. */
  bool idx_ok = n == 1 &&
                plan_index_driven(v, &g, spmd_sharding_of(v, orig->operands[n]), &idx_plan) &&
                (idx_plan.n_idx_batch == 0 ||
                 (combiner != HK_OPCODE_COUNT &&
                  combine_reorder_ok(combiner, (hk_prim)orig->operands[0]->shape->elem)));
  hk_spmd_gs_method method = v->p->options.scatter_partition_method;
  const gs_plan *pl = choose(method, op_ok, &op_plan, idx_ok, &idx_plan, false);
  gs_plan merged;
  if (op_ok && idx_ok && idx_plan.n_idx_batch && merge_allowed(method) &&
      plan_merged(v, &g, &op_plan, &idx_plan, true, &merged))
    pl = &merged;
  /* Index passthrough with the updates' window split kept (the operand
   * follows the updates), taken when it is cheaper (memory, then bytes). */
  gs_plan from_upd, upd_merged;
  if (pl && idx_ok && idx_plan.n_idx_batch && merge_allowed(method) &&
      plan_from_updates(v, &g, orig->operands[0]->shape, spmd_sharding_of(v, orig->operands[2]), &from_upd) &&
      plan_merged(v, &g, &from_upd, &idx_plan, true, &upd_merged) &&
      scatter_plan_cheaper(v, orig, &upd_merged, pl))
    pl = &upd_merged;
  gs_plan alt[2];
  if (!pl) pl = plan_from_elsewhere(v, orig, &g, alt);
  if (!pl) return spmd_handle_fallback(v, orig);
  return scatter_with_plan(v, orig, &g, pl, combiner);
}
