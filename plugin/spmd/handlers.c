/* handlers.c - per-op partitioning (the SpmdPartitioningVisitor handlers):
 * elementwise, broadcast, transpose, reduce, ops that leave some dims alone
 * (slice, pad, concatenate, reverse, dynamic-slice/update, sort), tuples,
 * custom calls, manual regions, and the replicate-compute-reshard fallback
 * that makes every other op correct. */
#include "spmd_internal.h"

static bool is_tiled_plain(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && !spmd_is_subgroup_manual(s);
}

static bool is_manual(const hk_sharding *s) { return s && hk_sharding_is_manual(s); }

/* Operand k of orig resharded to s. */
static hk_status *operand_as(spmd_visitor *v, hk_instr *orig, int k, const hk_sharding *s,
                             hk_instr **out) {
  spmd_value *val = spmd_lookup(v, orig->operands[k]);
  if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
  return spmd_reshard(v, val, s, out);
}

static const hk_sharding *replicated_for(spmd_visitor *v, const hk_shape *shape) {
  return hk_sharding_for_shape(v->m, hk_sharding_replicated(v->m), shape);
}

/* Clones orig with local operands and a local shape; records it. */
static hk_instr *clone_local(spmd_visitor *v, hk_instr *orig, const hk_shape *shape,
                             hk_instr **ops, const hk_sharding *s) {
  hk_instr *c = spmd_clone(v, orig, shape, orig->n_operands, ops);
  spmd_set(v, orig, c, s);
  return c;
}

enum { OPS_ON_STACK = 8 };

/* Room for orig's new operands: buf (OPS_ON_STACK long) when they fit, as
 * they nearly always do, else the heap; ops_free gives it back. */
static hk_instr **ops_array(const hk_instr *orig, hk_instr **buf) {
  if (orig->n_operands <= OPS_ON_STACK) {
    memset(buf, 0, sizeof(hk_instr *) * OPS_ON_STACK);
    return buf;
  }
  hk_instr **ops = calloc((size_t)(orig->n_operands + 1), sizeof(hk_instr *));
  if (!ops) hk_out_of_memory();
  return ops;
}

static void ops_free(hk_instr **ops, hk_instr **buf) {
  if (ops != buf) free(ops);
}

/* ---- fallback: replicate operands, compute globally ------------------------ */

hk_status *spmd_handle_fallback(spmd_visitor *v, hk_instr *orig) {
  hk_instr *ops_buf[OPS_ON_STACK];
  hk_instr **ops = ops_array(orig, ops_buf);
  bool remat = false;
  for (int k = 0; k < orig->n_operands; k++) {
    spmd_value *val = spmd_lookup(v, orig->operands[k]);
    const hk_sharding *rep = spmd_replicated_like(v, val ? val->sharding : NULL,
                                                  orig->operands[k]->shape);
    bool sharded = val && val->sharding && !hk_sharding_is_replicated(val->sharding) &&
                   !hk_sharding_is_maximal(val->sharding);
    hk_status *st = operand_as(v, orig, k, rep, &ops[k]);
    if (st) {
      ops_free(ops, ops_buf);
      return st;
    }
    /* The operand made whole for an op without a handler. */
    if (sharded && ops[k] != val->hlo)
      spmd_note_full_remat(v, val->hlo, ops[k], orig->operands[k]->shape, val->sharding, rep);
    remat = remat || sharded;
  }
  const hk_sharding *s = spmd_sharding_of(v, orig);
  if (hk_sharding_is_tiled(s)) remat = remat || orig->n_operands > 0;
  /* Counted when something was sharded: replicated code needs no handler. */
  if (remat || hk_sharding_is_tiled(s)) {
    v->p->replicated_fallbacks++;
    hk_buf_printf(&v->p->fallback_notes, "  replicated fallback: %s %%%s\n",
                  hk_opcode_name((hk_opcode)orig->opcode), orig->name);
  }
  const hk_sharding *out = hk_sharding_is_maximal(s) ? s : spmd_replicated_like(v, s, orig->shape);
  clone_local(v, orig, orig->shape, ops, out);
  ops_free(ops, ops_buf);
  return NULL;
}

/* ---- elementwise ------------------------------------------------------------- */

hk_status *spmd_handle_elementwise(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  for (int k = 0; k < orig->n_operands; k++) {
    const hk_shape *os = orig->operands[k]->shape;
    if (!hk_shape_is_array(os) || (os->rank != orig->shape->rank && os->rank != 0))
      return spmd_handle_fallback(v, orig);
  }
  hk_instr *ops_buf[OPS_ON_STACK];
  hk_instr **ops = ops_array(orig, ops_buf);
  for (int k = 0; k < orig->n_operands; k++) {
    const hk_shape *os = orig->operands[k]->shape;
    const hk_sharding *t = os->rank == orig->shape->rank ? s : replicated_for(v, os);
    hk_status *st = operand_as(v, orig, k, t, &ops[k]);
    if (st) {
      ops_free(ops, ops_buf);
      return st;
    }
  }
  clone_local(v, orig, spmd_local_shape(v, s, orig->shape), ops, s);
  ops_free(ops, ops_buf);
  return NULL;
}

/* ---- broadcast / transpose -------------------------------------------------- */

static hk_status *handle_broadcast(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int r = orig->shape->rank;
  int64_t added[HK_MAX_RANK];
  int na = 0;
  for (int i = 1; i < orig->n_dims; i++)
    if (orig->dims[i] <= orig->dims[i - 1]) return spmd_handle_fallback(v, orig);
  for (int d = 0; d < r; d++) {
    bool kept = false;
    for (int i = 0; i < orig->n_dims; i++) kept = kept || orig->dims[i] == d;
    if (!kept) added[na++] = d;
  }
  /* The operand takes the output's tiling of the kept dims, replicated
   * across the tiles of the added ones: each partition broadcasts its
   * piece straight into its own tile of the output, whatever the output
   * tiles the added dims by (XLA's HandleBroadcast). */
  const hk_sharding *op_s = na ? spmd_remove_dims(v, s, na, added) : s;
  if (!op_s) return spmd_handle_fallback(v, orig);
  hk_instr *op;
  HK_TRY(operand_as(v, orig, 0, op_s, &op));
  clone_local(v, orig, spmd_local_shape(v, s, orig->shape), &op, s);
  return NULL;
}

static hk_status *handle_transpose(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int64_t inv[HK_MAX_RANK];
  for (int i = 0; i < orig->n_dims; i++) inv[orig->dims[i]] = i;
  const hk_sharding *op_s = hk_sharding_transpose(v->m, s, inv);
  if (!op_s) return spmd_handle_fallback(v, orig);
  hk_instr *op;
  HK_TRY(operand_as(v, orig, 0, op_s, &op));
  clone_local(v, orig, spmd_local_shape(v, s, orig->shape), &op, s);
  return NULL;
}

/* ---- reshape ---------------------------------------------------------------------- */

/* The dims of s in [from, to) longer than 1. */
static int non_unit_dims(const hk_shape *s, int from, int to) {
  int n = 0;
  for (int d = from; d < to; d++) n += s->dims[d] > 1;
  return n;
}

/* The input sharding under which a local reshape yields the output's
 * tiling: reshape groups (input dims <-> output dims of equal product) may
 * be partitioned only on their major output dim, by a count dividing the
 * major input dim too (size-1 dims skipped).  NULL when there is none.
 * With halo non-NULL one group may have a count that divides neither
 * (its rows then misalign: reshape_halo.c exchanges halos): halo[0] and
 * halo[1] are set to its major input and output dims, -1 when no group
 * needed it. */
const hk_sharding *spmd_reshape_operand_sharding(spmd_visitor *v, const hk_shape *in,
                                                 const hk_shape *out, const hk_sharding *o,
                                                 int *halo) {
  int ri = in->rank, ro = out->rank, i = 0, j = 0, ng = 0;
  if (halo) halo[0] = halo[1] = -1;
  if (!hk_sharding_is_tiled(o) || o->n_subgroups) return NULL;
  int gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][HK_MAX_RANK + 1];
  const int *groups[HK_MAX_RANK + 1];
  for (int d = 0; d < ri; d++) {
    gsz[d] = 0;
    groups[d] = gbuf[d];
  }
  for (int d = 0; d < ri; d++)
    if (in->dims[d] == 0) return NULL;
  while (i < ri || j < ro) {
    int i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    if (i < ri) pi *= in->dims[i++];
    if (j < ro) pj *= out->dims[j++];
    while (pi != pj) {
      if (pi < pj && i < ri) pi *= in->dims[i++];
      else if (j < ro) pj *= out->dims[j++];
      else return NULL;
    }
    /* Size-1 dims leading a group carry nothing: the major dims are the
     * first ones of size > 1 (bf16[1,4096] -> [32,128] splits the 4096). */
    int major_i = i0, major_j = j0;
    while (major_i + 1 < i && in->dims[major_i] == 1) major_i++;
    while (major_j + 1 < j && out->dims[major_j] == 1) major_j++;
    for (int oj = j0; oj < j; oj++)
      if (oj != major_j && hk_sharding_dim_partitions(o, oj) > 1) return NULL;
    if (j > j0) {
      int64_t k = hk_sharding_dim_partitions(o, major_j);
      /* One dim of size > 1 on each side (equal products: the same dim):
       * any split of it passes, uneven ones padded alike. */
      bool same_dim = i > i0 && non_unit_dims(in, i0, i) == 1 && non_unit_dims(out, j0, j) == 1;
      bool uneven = k > 1 && i > i0 && !same_dim &&
                    (out->dims[major_j] % k || in->dims[major_i] % k);
      if (uneven && halo && halo[0] < 0) {
        halo[0] = major_i;
        halo[1] = major_j;
      } else if (k > 1 && (i == i0 || uneven)) {
        return NULL;
      }
      i0 = major_i;
      if (i > i0)
        for (int oj = j0; oj < j; oj++) gbuf[i0][gsz[i0]++] = oj;
      else if (k > 1) return NULL;
    }
    ng++;
  }
  /* Output tile dims left unassigned (trivial, size 1) and the replication dim. */
  bool used[HK_MAX_RANK + 1] = {false};
  for (int d = 0; d < ri; d++)
    for (int t = 0; t < gsz[d]; t++) used[gbuf[d][t]] = true;
  int last = ri;
  gsz[last] = 0;
  groups[last] = gbuf[last];
  for (int od = 0; od < ro; od++)
    if (!used[od]) {
      if (hk_sharding_dim_partitions(o, od) > 1) return NULL;
      gbuf[last][gsz[last]++] = od;
    }
  if (o->replicate_on_last_tile_dim) gbuf[last][gsz[last]++] = ro;
  return spmd_regroup_memo(v, o, ri + 1, gsz, groups, true);
}

/* The largest part of the operand's tiling s that a local reshape carries
 * to the output (XLA's PropagateShardingThroughReshape, whole dims only):
 * s with the splits of its minor dims replicated one at a time until the
 * reshape groups take the rest; *out_s is then the output's tiling.  NULL
 * when nothing passes. */
static const hk_sharding *reshape_kept_splits(spmd_visitor *v, const hk_instr *orig,
                                              const hk_sharding *s, const hk_sharding **out_s) {
  const hk_shape *in = orig->operands[0]->shape;
  for (int64_t d = in->rank - 1; d >= 0; d--) {
    if (hk_sharding_dim_partitions(s, (int)d) == 1) continue;
    s = spmd_replicate_dims(v, s, 1, &d);
    if (!s || hk_sharding_num_tiles(s) <= 1) return NULL;
    *out_s = spmd_reshape_operand_sharding(v, orig->shape, in, s, NULL);
    if (*out_s) return s;
  }
  return NULL;
}

/* The operand under sharding in (its local reshape giving out). */
static hk_status *reshape_as(spmd_visitor *v, hk_instr *orig, const hk_sharding *in,
                             const hk_sharding *out) {
  hk_instr *op;
  HK_TRY(operand_as(v, orig, 0, in, &op));
  clone_local(v, orig, spmd_local_shape(v, out, orig->shape), &op, out);
  return NULL;
}

/* XLA's HandleReshape: the operand resharded so the output's tiling
 * follows; else the operand as it is tiled, the result resharded; else
 * halos for a split or merged dim; else the part of the operand's tiling
 * the reshape carries, the rest gathered; else replicated. */
static hk_status *handle_reshape(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_sharding *in_s =
      spmd_reshape_operand_sharding(v, orig->operands[0]->shape, orig->shape, s, NULL);
  if (in_s) return reshape_as(v, orig, in_s, s);
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  const hk_sharding *have = val && val->sharding && is_tiled_plain(val->sharding) ? val->sharding : NULL;
  const hk_sharding *out_s =
      have ? spmd_reshape_operand_sharding(v, orig->shape, orig->operands[0]->shape, have, NULL) : NULL;
  if (out_s) return reshape_as(v, orig, have, out_s);
  bool handled = false;
  HK_TRY(spmd_reshape_by_halo(v, orig, &handled));
  if (handled) return NULL;
  const hk_sharding *kept = have ? reshape_kept_splits(v, orig, have, &out_s) : NULL;
  if (kept) return reshape_as(v, orig, kept, out_s);
  return spmd_handle_fallback(v, orig);
}

/* ---- reduce -------------------------------------------------------------------- */

/* ---- ops that act on some dims only ----------------------------------------- */

/* Marks in touched[] the dims the op acts on; false if not such an op. */
static bool touched_dims(const hk_instr *orig, bool *touched) {
  int r = orig->shape->rank;
  for (int d = 0; d < r; d++) touched[d] = false;
  const hk_attrs *a = orig->attrs;
  switch ((hk_opcode)orig->opcode) {
    case HK_OP_SLICE:
      for (int d = 0; d < r && a && d < a->n_slice; d++)
        touched[d] = a->slice[d].start != 0 || a->slice[d].stride != 1 ||
                     a->slice[d].limit != orig->operands[0]->shape->dims[d];
      return a && a->n_slice == r;
    case HK_OP_PAD:
      for (int d = 0; d < r && a && d < a->n_pad; d++)
        touched[d] = a->pad[d].lo || a->pad[d].hi || a->pad[d].interior;
      return a && a->n_pad == r;
    case HK_OP_CONCATENATE:
    case HK_OP_REVERSE:
    case HK_OP_SORT:
      for (int i = 0; i < orig->n_dims; i++) touched[orig->dims[i]] = true;
      return true;
    case HK_OP_DYNAMIC_SLICE:
    case HK_OP_DYNAMIC_UPDATE_SLICE: {
      const hk_shape *src = orig->opcode == HK_OP_DYNAMIC_SLICE ? orig->shape
                                                                : orig->operands[1]->shape;
      for (int d = 0; d < r; d++) touched[d] = src->dims[d] != orig->operands[0]->shape->dims[d];
      return true;
    }
    default:
      return false;
  }
}

/* s with the partitions of every touched dim moved to an untouched whole
 * dim that they divide evenly (dims sized as in `shape`), so an op that
 * needs the touched dims whole runs on 1/N of the data after an
 * all-to-all; touched dims with no such partner are replicated. */
static const hk_sharding *move_off_touched(spmd_visitor *v, const hk_sharding *s,
                                           const hk_shape *shape, const bool *touched) {
  int r = shape->rank;
  int gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][2];
  const int *groups[HK_MAX_RANK + 1];
  int64_t rep[HK_MAX_RANK];
  int nr = 0;
  bool taken[HK_MAX_RANK];
  for (int d = 0; d < r; d++) {
    groups[d] = gbuf[d];
    taken[d] = hk_sharding_dim_partitions(s, d) > 1;
    gsz[d] = taken[d] && !touched[d];
    gbuf[d][0] = d;
  }
  for (int d = 0; d < r; d++) {
    int64_t p = hk_sharding_dim_partitions(s, d);
    if (!touched[d] || p == 1) continue;
    int e = -1;
    for (int c = 0; c < r && e < 0; c++)
      if (!touched[c] && !taken[c] && shape->dims[c] % p == 0 && shape->dims[c] >= p) e = c;
    if (e < 0) {
      rep[nr++] = d;
      gsz[d] = 1;   /* stays here, then replicated below */
      continue;
    }
    taken[e] = true;
    gbuf[e][0] = d;
    gsz[e] = 1;
  }
  groups[r] = gbuf[r];
  gsz[r] = 0;
  if (s->replicate_on_last_tile_dim) gbuf[r][gsz[r]++] = s->n_tile_dims - 1;
  const hk_sharding *moved = spmd_regroup_memo(v, s, r + 1, gsz, groups, true);
  return nr ? spmd_replicate_dims(v, moved, nr, rep) : moved;
}

/* The bytes handle_dim_local moves running orig under sp: its rank-r
 * operands to sp (nothing for those rebuilt) and the result back to s. */
static int64_t dim_local_cost(spmd_visitor *v, const hk_instr *orig, const hk_sharding *sp,
                              const hk_sharding *s) {
  int64_t c = spmd_reshard_cost(v, orig->shape, sp, s);
  for (int k = 0; k < orig->n_operands; k++) {
    spmd_value *val = spmd_lookup(v, orig->operands[k]);
    if (val && orig->operands[k]->shape->rank == orig->shape->rank)
      c += spmd_value_reshard_cost(v, val, sp);
  }
  return c;
}

static hk_status *handle_dim_local(spmd_visitor *v, hk_instr *orig) {
  bool touched[HK_MAX_RANK];
  const hk_sharding *s = spmd_sharding_of(v, orig);
  if (hk_shape_is_tuple(orig->shape) || !touched_dims(orig, touched) || is_manual(s))
    return spmd_handle_fallback(v, orig);
  int r = orig->shape->rank;
  const hk_sharding *sp = s;
  if (is_tiled_plain(s)) {
    /* Every rank-r operand must share the untouched dims a move uses. */
    bool same = true;
    for (int k = 0; k < orig->n_operands; k++) {
      const hk_shape *os = orig->operands[k]->shape;
      for (int d = 0; os->rank == r && d < r; d++)
        same = same && (touched[d] || os->dims[d] == orig->shape->dims[d]);
    }
    int64_t rep[HK_MAX_RANK];
    int nr = 0;
    for (int d = 0; d < r; d++)
      if (touched[d] && hk_sharding_dim_partitions(s, d) > 1) rep[nr++] = d;
    const hk_sharding *replicated = nr ? spmd_replicate_dims(v, s, nr, rep) : s;
    sp = same ? move_off_touched(v, s, orig->shape, touched) : replicated;
    /* Moving the partitions costs two all-to-alls; replicating the touched
     * dims costs the gathers in, the way out is free slices.  Replicated
     * wins only when it moves fewer bytes (its tiles hold more). */
    if (sp != replicated && dim_local_cost(v, orig, replicated, s) < dim_local_cost(v, orig, sp, s))
      sp = replicated;
  }
  if (sp->kind == HK_SHARDING_TILED) {
    /* Untouched partitioned dims must have the same size everywhere. */
    for (int k = 0; k < orig->n_operands; k++) {
      const hk_shape *os = orig->operands[k]->shape;
      if (os->rank != r) continue;
      for (int d = 0; d < r; d++)
        if (hk_sharding_dim_partitions(sp, d) > 1 && os->dims[d] != orig->shape->dims[d])
          return spmd_handle_fallback(v, orig);
    }
  }
  hk_instr *ops_buf[OPS_ON_STACK];
  hk_instr **ops = ops_array(orig, ops_buf);
  for (int k = 0; k < orig->n_operands; k++) {
    const hk_shape *os = orig->operands[k]->shape;
    const hk_sharding *t = os->rank == r && r > 0 ? sp : replicated_for(v, os);
    hk_status *st = operand_as(v, orig, k, t, &ops[k]);
    if (st) {
      ops_free(ops, ops_buf);
      return st;
    }
  }
  const hk_shape *ls = spmd_local_shape(v, sp, orig->shape);
  hk_instr *c = clone_local(v, orig, ls, ops, sp);
  ops_free(ops, ops_buf);
  hk_attrs *a = c->attrs;
  if (c->opcode == HK_OP_SLICE && !hk_shape_equal(ls, orig->shape)) {
    hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)r);
    for (int d = 0; d < r; d++)
      sd[d] = touched[d] ? a->slice[d] : (hk_slice_dim){0, ls->dims[d], 1};
    a->slice = sd;
  } else if (c->opcode == HK_OP_DYNAMIC_SLICE) {
    a->dynamic_slice_sizes.v = hk_memdup(v->m, ls->dims, sizeof(int64_t) * (size_t)(r ? r : 1));
    a->dynamic_slice_sizes.n = r;
  }
  return NULL;
}

/* A handler that may decline (window_ops.c, dynamic_update_slice.c),
 * else the dims the op touches made whole. */
static hk_status *windowed_or_dim_local(spmd_visitor *v, hk_instr *orig,
                                        hk_status *(*windowed)(spmd_visitor *, hk_instr *, bool *)) {
  bool handled = false;
  HK_TRY(windowed(v, orig, &handled));
  return handled ? NULL : handle_dim_local(v, orig);
}

/* Multi-operand sort: every operand (same dims) sharded alike, the sort
 * dim whole; each partition sorts its own rows. */
static hk_status *handle_sort_tuple(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int n = orig->n_operands, r = orig->operands[0]->shape->rank;
  if (n < 1 || orig->n_dims != 1 || orig->shape->n_tuple != n) return spmd_handle_fallback(v, orig);
  int64_t zero = 0, sd = orig->dims[0];
  const hk_sharding *s0 = hk_sharding_subsharding_shape(v->m, s, orig->shape, 1, &zero);
  if (!s0 || !is_tiled_plain(s0)) return spmd_handle_fallback(v, orig);
  bool touched[HK_MAX_RANK] = {false};
  touched[sd] = true;
  const hk_sharding *sp = hk_sharding_dim_partitions(s0, (int)sd) > 1
                              ? move_off_touched(v, s0, orig->operands[0]->shape, touched)
                              : s0;
  hk_instr *ops_buf[OPS_ON_STACK];
  hk_instr **ops = ops_array(orig, ops_buf);
  const hk_shape **ls = calloc((size_t)n, sizeof(hk_shape *));
  const hk_sharding **es = calloc((size_t)n, sizeof(hk_sharding *));
  if (!ls || !es) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < n && !st; k++) {
    if (orig->operands[k]->shape->rank != r) st = hk_error(HK_INVALID_ARGUMENT, "sort operand ranks differ");
    else st = operand_as(v, orig, k, sp, &ops[k]);
    if (!st) {
      ls[k] = ops[k]->shape;
      es[k] = sp;
    }
  }
  if (!st)
    clone_local(v, orig, hk_shape_tuple(v->m, n, ls), ops, hk_sharding_tuple(v->m, n, es));
  ops_free(ops, ops_buf);
  free(ls);
  free(es);
  return st;
}

/* ---- tuples ---------------------------------------------------------------------- */

static hk_status *handle_tuple(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  hk_instr *ops_buf[OPS_ON_STACK];
  hk_instr **ops = ops_array(orig, ops_buf);
  const hk_shape **ss = calloc((size_t)(orig->n_operands + 1), sizeof(hk_shape *));
  if (!ss) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < orig->n_operands && !st; k++) {
    int64_t idx = k;
    const hk_sharding *t = hk_sharding_subsharding_shape(v->m, s, orig->shape, 1, &idx);
    st = operand_as(v, orig, k, t, &ops[k]);
    if (!st) ss[k] = ops[k]->shape;
  }
  if (!st) {
    hk_instr *t = hk_instr_new(v->comp, HK_OP_TUPLE, hk_shape_tuple(v->m, orig->n_operands, ss),
                               orig->n_operands, ops, orig->name);
    spmd_set(v, orig, t, s);
  }
  ops_free(ops, ops_buf);
  free(ss);
  return st;
}

static hk_status *handle_gte(spmd_visitor *v, hk_instr *orig) {
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  int64_t idx = hk_instr_tuple_index(orig);
  const hk_sharding *es =
      val->sharding ? hk_sharding_subsharding_shape(v->m, val->sharding, val->base_shape, 1, &idx)
                    : NULL;
  hk_instr *op = val->hlo;
  hk_instr *g = spmd_clone(v, orig, op->shape->tuple[idx], 1, &op);
  /* The element's global shape is the tuple value's (a TopK sort's is
   * its shrunk candidates). */
  spmd_set(v, orig, g, es)->base_shape = val->base_shape->tuple[idx];
  return NULL;
}

/* ---- dispatch ---------------------------------------------------------------------- */

hk_status *spmd_handle_op(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  hk_opcode op = (hk_opcode)orig->opcode;
  switch (op) {
    case HK_OP_WHILE:
    case HK_OP_CONDITIONAL:
    case HK_OP_CALL:
      return spmd_handle_control_flow(v, orig);
    case HK_OP_CUSTOM_CALL:
      return spmd_handle_custom_call(v, orig);
    case HK_OP_OUTFEED:
      return spmd_handle_outfeed(v, orig);
    case HK_OP_GET_TUPLE_ELEMENT:
      /* An element of the partitioned tuple, manual or not (XLA sees a
       * manual element as placed on one device: nothing to move). */
      return handle_gte(v, orig);
    default:
      break;
  }
  HK_TRY(spmd_check_subgroup_manual_all_reduce(orig, s));
  if (is_manual(s)) return spmd_handle_manual(v, orig);
  /* On one device: XLA's DefaultAction there, or, with side effects,
   * HandleSingleDevice (rng keeps the device-0 pinning it was given). */
  if (hk_sharding_unique_device(s) >= 0 && op != HK_OP_TUPLE && op != HK_OP_RNG &&
      op != HK_OP_PARAMETER)
    return op == HK_OP_INFEED ? spmd_handle_single_device(v, orig) : spmd_handle_on_device(v, orig);
  switch (op) {
    case HK_OP_PARTITION_ID:
      return hk_error(HK_UNIMPLEMENTED,
                      "partition-id '%s' outside a manual region: its meaning after "
                      "partitioning is ambiguous",
                      orig->name);
    case HK_OP_TUPLE: return handle_tuple(v, orig);
    case HK_OP_BROADCAST: return handle_broadcast(v, orig);
    case HK_OP_TRANSPOSE: return handle_transpose(v, orig);
    case HK_OP_RESHAPE: return handle_reshape(v, orig);
    case HK_OP_REDUCE: return spmd_handle_reduce(v, orig);
    case HK_OP_DOT: {
      bool handled = false;
      HK_TRY(spmd_handle_dot(v, orig, &handled));
      return handled ? NULL : spmd_handle_fallback(v, orig);
    }
    case HK_OP_CONVOLUTION: {
      bool handled = false;
      HK_TRY(spmd_handle_convolution(v, orig, &handled));
      return handled ? NULL : spmd_handle_fallback(v, orig);
    }
    case HK_OP_ALL_REDUCE:
      /* Without a channel id it combines replicas, partition by partition;
       * in a manual subgroup its groups join devices of one data tile
       * (checked above): either way elementwise over the tile. */
      if ((!hk_instr_channel_id(orig) || spmd_is_subgroup_manual(s)) && orig->n_operands == 1 &&
          hk_shape_is_array(orig->shape) && !hk_sharding_is_tuple(s))
        return spmd_handle_elementwise(v, orig);
      break;
    case HK_OP_IOTA: return spmd_handle_iota(v, orig);
    case HK_OP_CONSTANT:
      if (hk_shape_is_array(orig->shape) && !hk_sharding_is_tuple(s) && !hk_sharding_is_maximal(s))
        return spmd_handle_constant(v, orig);
      break;
    case HK_OP_GATHER: return spmd_handle_gather(v, orig);
    case HK_OP_SCATTER: return spmd_handle_scatter(v, orig);
    case HK_OP_SORT: {
      bool handled = false;
      HK_TRY(spmd_handle_sort_topk(v, orig, &handled));
      if (handled) return NULL;
      if (hk_shape_is_tuple(orig->shape)) return handle_sort_tuple(v, orig);
      return handle_dim_local(v, orig);
    }
    case HK_OP_PAD:
      return windowed_or_dim_local(v, orig, spmd_handle_pad_windowed);
    case HK_OP_SLICE:
      return windowed_or_dim_local(v, orig, spmd_handle_slice_windowed);
    case HK_OP_REVERSE:
      return windowed_or_dim_local(v, orig, spmd_handle_reverse_windowed);
    case HK_OP_SELECT_AND_SCATTER: {
      bool handled = false;
      HK_TRY(spmd_handle_select_and_scatter(v, orig, &handled));
      return handled ? NULL : spmd_handle_fallback(v, orig);
    }
    case HK_OP_REDUCE_WINDOW: {
      bool handled = false;
      HK_TRY(spmd_handle_reduce_window(v, orig, &handled));
      return handled ? NULL : spmd_handle_fallback(v, orig);
    }
    case HK_OP_DYNAMIC_UPDATE_SLICE:
      return windowed_or_dim_local(v, orig, spmd_handle_dus_in_shard);
    case HK_OP_CONCATENATE:
      return windowed_or_dim_local(v, orig, spmd_handle_concatenate);
    case HK_OP_DYNAMIC_SLICE:
      return handle_dim_local(v, orig);
    default:
      break;
  }
  if (hk_opcode_is_elementwise(op) && !hk_instr_has_side_effect(orig) &&
      hk_shape_is_array(orig->shape) && !hk_sharding_is_tuple(s))
    return spmd_handle_elementwise(v, orig);
  return spmd_handle_fallback(v, orig);
}
