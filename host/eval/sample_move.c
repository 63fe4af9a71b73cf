/* sample_move.c - the sampled evaluator's data-movement ops (broadcast,
 * reshape, bitcast, transpose, slice, dynamic-slice, dynamic-update-slice,
 * pad, concatenate, reverse, gather) as index maps, and scatter.
 *
 * An index map sends each result index to (operand, operand index) or to
 * "zero".  A box of results is served by fetching, per operand, the
 * bounding box of the indices it maps to; when that box is much larger
 * than the elements needed (a reshape that scatters a row), the result box
 * is split in two and each half is served on its own. */
#include "eval/sample_internal.h"

typedef struct se_move {
  se_ctx *x;
  se_frame *f;
  const hk_instr *ins;
  int rank;                        /* result rank */
  int64_t starts[SE_MAX_RANK];     /* dynamic-(update-)slice, clamped */
  int64_t *concat_off;             /* concatenate: n_operands + 1 offsets */
  /* reshape / bitcast: linearisation of result and operand */
  int64_t out_st[SE_MAX_RANK], in_dims[SE_MAX_RANK], in_st[SE_MAX_RANK];
  int in_order[SE_MAX_RANK];       /* operand dims, major to minor (bitcast: physical) */
  /* gather: the indices fetched for the whole result box */
  hk_value *gidx;
  se_box gidx_box;
} se_move;

/* ---- index maps -------------------------------------------------------------- */

static int map_reshape(const se_move *mv, const int64_t *o, int64_t *in) {
  int64_t lin = 0;
  for (int d = 0; d < mv->rank; d++) lin += o[d] * mv->out_st[d];
  const hk_shape *os = mv->ins->operands[0]->shape;
  for (int j = os->rank - 1; j >= 0; j--) {
    int d = mv->in_order[j];
    in[d] = lin % os->dims[d];
    lin /= os->dims[d];
  }
  return 0;
}

static int map_pad(const se_move *mv, const int64_t *o, int64_t *in) {
  const hk_attrs *at = mv->ins->attrs;
  const hk_shape *os = mv->ins->operands[0]->shape;
  for (int d = 0; d < mv->rank; d++) {
    const hk_pad_dim *p = &at->pad[d];
    int64_t q = o[d] - p->lo;
    if (q < 0 || q % (p->interior + 1)) return 1;
    q /= p->interior + 1;
    if (q >= os->dims[d]) return 1;
    in[d] = q;
  }
  return 0;
}

static int map_concat(const se_move *mv, const int64_t *o, int64_t *in) {
  int c = (int)mv->ins->dims[0], k = 0;
  while (k + 1 < mv->ins->n_operands && o[c] >= mv->concat_off[k + 1]) k++;
  for (int d = 0; d < mv->rank; d++) in[d] = o[d];
  in[c] -= mv->concat_off[k];
  return k;
}

static int map_dus(const se_move *mv, const int64_t *o, int64_t *in) {
  const hk_shape *us = mv->ins->operands[1]->shape;
  bool inside = true;
  for (int d = 0; d < mv->rank; d++) inside &= o[d] >= mv->starts[d] && o[d] < mv->starts[d] + us->dims[d];
  for (int d = 0; d < mv->rank; d++) in[d] = inside ? o[d] - mv->starts[d] : o[d];
  return inside ? 1 : 0;
}

static int map_gather(const se_move *mv, const int64_t *o, int64_t *in);

/* Operand number the result index o reads (in: its index there), or -1
 * for a zero element. */
static int map_index(const se_move *mv, const int64_t *o, int64_t *in) {
  const hk_instr *ins = mv->ins;
  const hk_shape *os = ins->operands[0]->shape;
  switch ((hk_opcode)ins->opcode) {
    case HK_OP_BROADCAST:
      for (int i = 0; i < ins->n_dims; i++) in[i] = o[ins->dims[i]];
      return 0;
    case HK_OP_TRANSPOSE:
      for (int i = 0; i < mv->rank; i++) in[ins->dims[i]] = o[i];
      return 0;
    case HK_OP_RESHAPE: case HK_OP_BITCAST: return map_reshape(mv, o, in);
    case HK_OP_SLICE:
      for (int d = 0; d < mv->rank; d++) {
        const hk_slice_dim *s = &ins->attrs->slice[d];
        in[d] = s->start + o[d] * (s->stride ? s->stride : 1);
      }
      return 0;
    case HK_OP_REVERSE:
      for (int d = 0; d < mv->rank; d++) in[d] = o[d];
      for (int i = 0; i < ins->n_dims; i++) in[ins->dims[i]] = os->dims[ins->dims[i]] - 1 - o[ins->dims[i]];
      return 0;
    case HK_OP_PAD: return map_pad(mv, o, in);
    case HK_OP_CONCATENATE: return map_concat(mv, o, in);
    case HK_OP_DYNAMIC_SLICE:
      for (int d = 0; d < mv->rank; d++) in[d] = o[d] + mv->starts[d];
      return 0;
    case HK_OP_DYNAMIC_UPDATE_SLICE: return map_dus(mv, o, in);
    case HK_OP_GATHER: return map_gather(mv, o, in);
    default: return -1;
  }
}

/* ---- the engine --------------------------------------------------------------- */

static void next_index(int64_t *idx, const se_box *b) {
  for (int d = b->rank - 1; d >= 0; d--) {
    if (++idx[d] < b->lo[d] + b->n[d]) return;
    idx[d] = b->lo[d];
  }
}

typedef struct op_span {
  int64_t lo[SE_MAX_RANK], hi[SE_MAX_RANK], count;
} op_span;

/* Bounding boxes of what each operand is read at for results in sub. */
static void spans_of(const se_move *mv, const se_box *sub, op_span *sp) {
  int nops = mv->ins->n_operands;
  for (int k = 0; k < nops; k++) sp[k].count = 0;
  int64_t o[SE_MAX_RANK], in[SE_MAX_RANK];
  for (int d = 0; d < sub->rank; d++) o[d] = sub->lo[d];
  int64_t n = se_box_count(sub);
  for (int64_t i = 0; i < n; i++, next_index(o, sub)) {
    int k = map_index(mv, o, in);
    if (k < 0) continue;
    op_span *s = &sp[k];
    int r = mv->ins->operands[k]->shape->rank;
    for (int d = 0; d < r; d++) {
      if (!s->count || in[d] < s->lo[d]) s->lo[d] = in[d];
      if (!s->count || in[d] > s->hi[d]) s->hi[d] = in[d];
    }
    s->count++;
  }
}

static bool spans_dense(const se_move *mv, const op_span *sp) {
  for (int k = 0; k < mv->ins->n_operands; k++) {
    if (!sp[k].count) continue;
    double vol = 1;
    for (int d = 0; d < mv->ins->operands[k]->shape->rank; d++) vol *= (double)(sp[k].hi[d] - sp[k].lo[d] + 1);
    if (vol > 2.0 * (double)sp[k].count + 64) return false;
  }
  return true;
}

static hk_status *move_fill(se_move *mv, const se_box *top, const se_box *sub, const op_span *sp,
                            hk_value **vals, hk_value *out) {
  int es = hk_esize(out->elem);
  int64_t tst[SE_MAX_RANK], o[SE_MAX_RANK], in[SE_MAX_RANK];
  hk_strides(top->rank, top->n, tst);
  for (int d = 0; d < sub->rank; d++) o[d] = sub->lo[d];
  int64_t n = se_box_count(sub);
  for (int64_t i = 0; i < n; i++, next_index(o, sub)) {
    int k = map_index(mv, o, in);
    if (k < 0) continue;
    const hk_value *v = vals[k];
    int64_t src = 0, dst = 0;
    for (int d = 0; d < v->rank; d++) src = src * v->dims[d] + (in[d] - sp[k].lo[d]);
    for (int d = 0; d < top->rank; d++) dst += (o[d] - top->lo[d]) * tst[d];
    memcpy((uint8_t *)out->data + dst * es, (const uint8_t *)v->data + src * es, (size_t)es);
  }
  return NULL;
}

static hk_status *move_box(se_move *mv, const se_box *top, const se_box *sub, hk_value *out) {
  int nops = mv->ins->n_operands;
  op_span *sp = calloc((size_t)nops, sizeof *sp);
  hk_value **vals = calloc((size_t)nops, sizeof *vals);
  if (!sp || !vals) hk_out_of_memory();
  spans_of(mv, sub, sp);
  hk_status *st = NULL;
  if (!spans_dense(mv, sp) && se_box_count(sub) > 1) {
    int split = 0;
    for (int d = 1; d < sub->rank; d++)
      if (sub->n[d] > sub->n[split]) split = d;
    se_box a = *sub, b = *sub;
    a.n[split] = sub->n[split] / 2;
    b.lo[split] = sub->lo[split] + a.n[split];
    b.n[split] = sub->n[split] - a.n[split];
    st = move_box(mv, top, &a, out);
    if (!st) st = move_box(mv, top, &b, out);
  } else {
    for (int k = 0; k < nops && !st; k++) {
      if (!sp[k].count) continue;
      se_box kb;
      kb.rank = mv->ins->operands[k]->shape->rank;
      for (int d = 0; d < kb.rank; d++) {
        kb.lo[d] = sp[k].lo[d];
        kb.n[d] = sp[k].hi[d] - sp[k].lo[d] + 1;
      }
      st = se_operand(mv->x, mv->f, mv->ins, k, &kb, &vals[k]);
    }
    if (!st) st = move_fill(mv, top, sub, sp, vals, out);
  }
  for (int k = 0; k < nops; k++) hk_value_release(vals[k]);
  free(vals);
  free(sp);
  return st;
}

/* ---- per-op set-up -------------------------------------------------------------- */

/* Dims of s from major to minor: physical order for bitcast (layout), else
 * logical. */
static void major_to_minor(const hk_shape *s, bool physical, int *order) {
  bool use = physical && s->layout && s->layout->n_minor_to_major == s->rank;
  for (int j = 0; j < s->rank; j++)
    order[j] = use ? (int)s->layout->minor_to_major[s->rank - 1 - j] : j;
}

static void setup_reshape(se_move *mv) {
  bool phys = mv->ins->opcode == HK_OP_BITCAST;
  const hk_shape *rs = mv->ins->shape;
  int order[SE_MAX_RANK];
  major_to_minor(rs, phys, order);
  int64_t st = 1;
  for (int j = rs->rank - 1; j >= 0; j--) {
    mv->out_st[order[j]] = st;
    st *= rs->dims[order[j]];
  }
  major_to_minor(mv->ins->operands[0]->shape, phys, mv->in_order);
}

/* Clamped start indices of a dynamic slice of `size` from a value of
 * `dims`, read from operands first.. (scalars, or one index vector). */
static hk_status *dynamic_starts(se_move *mv, int first, const int64_t *dims, const int64_t *size) {
  const hk_instr *ins = mv->ins;
  int r = mv->rank;
  bool vector = ins->n_operands == first + 1 && ins->operands[first]->shape->rank == 1 && r != 1;
  hk_value *vec = NULL;
  if (vector) {
    se_box vb;
    se_box_full(&vb, ins->operands[first]->shape);
    HK_TRY(se_operand(mv->x, mv->f, ins, first, &vb, &vec));
  } else if (ins->n_operands != first + r) {
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "%d start indices for rank %d", ins->n_operands - first, r);
  }
  hk_status *st = NULL;
  for (int d = 0; d < r && !st; d++) {
    int64_t s = 0;
    if (vector) s = hk_value_get_i64(vec, d);
    else st = se_scalar_i64(mv->x, mv->f, ins, first + d, &s);
    int64_t hi = dims[d] - size[d];
    mv->starts[d] = s < 0 ? 0 : s > hi ? hi : s;
  }
  hk_value_release(vec);
  return st;
}

static hk_status *setup(se_move *mv) {
  const hk_instr *ins = mv->ins;
  const hk_shape *os = ins->n_operands ? ins->operands[0]->shape : NULL;
  if (!os || os->elem == HK_TUPLE) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "needs an array operand");
  switch ((hk_opcode)ins->opcode) {
    case HK_OP_RESHAPE: case HK_OP_BITCAST:
      if (hk_shape_elements(os) != hk_shape_elements(ins->shape))
        return hk_eval_error(ins, HK_INVALID_ARGUMENT, "element count changes");
      setup_reshape(mv);
      return NULL;
    case HK_OP_SLICE:
      if (!ins->attrs || ins->attrs->n_slice != mv->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad slice");
      return NULL;
    case HK_OP_PAD:
      if (!ins->attrs || ins->attrs->n_pad != mv->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad padding");
      return NULL;
    case HK_OP_CONCATENATE:
      if (ins->n_dims != 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad concatenate dimension");
      mv->concat_off = malloc((size_t)(ins->n_operands + 1) * sizeof(int64_t));
      if (!mv->concat_off) hk_out_of_memory();
      mv->concat_off[0] = 0;
      for (int k = 0; k < ins->n_operands; k++)
        mv->concat_off[k + 1] = mv->concat_off[k] + ins->operands[k]->shape->dims[ins->dims[0]];
      return NULL;
    case HK_OP_DYNAMIC_SLICE:
      return dynamic_starts(mv, 1, os->dims, ins->shape->dims);
    case HK_OP_DYNAMIC_UPDATE_SLICE:
      return dynamic_starts(mv, 2, os->dims, ins->operands[1]->shape->dims);
    case HK_OP_BROADCAST: case HK_OP_TRANSPOSE:
      if (ins->n_dims != os->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad dimensions");
      return NULL;
    default:
      return NULL;
  }
}

/* Serves box b through the index map (setup done). */
static hk_status *run_move(se_move *mv, const se_box *b, hk_value **out) {
  hk_value *v = se_value_of_box((hk_prim)mv->ins->shape->elem, b);
  hk_status *st = move_box(mv, b, b, v);
  if (st) {
    hk_value_release(v);
    return st;
  }
  *out = v;
  return NULL;
}

/* ---- whole-box fast paths ---------------------------------------------------------- */

static bool ranges_meet(int64_t lo1, int64_t n1, int64_t lo2, int64_t n2) {
  return lo1 < lo2 + n2 && lo2 < lo1 + n1;
}

/* When every result in b reads one operand k, in the same order, at a
 * shifted box: sets *k and *ob (slice with unit strides, dynamic slice,
 * dynamic-update-slice inside or outside the update, a concatenation
 * piece, a pad without interior padding inside the operand). */
static bool direct_source(const se_move *mv, const se_box *b, int *k, se_box *ob) {
  const hk_instr *ins = mv->ins;
  const hk_attrs *at = ins->attrs;
  *ob = *b;
  *k = 0;
  switch ((hk_opcode)ins->opcode) {
    case HK_OP_SLICE:
      for (int d = 0; d < b->rank; d++) {
        int64_t stride = at->slice[d].stride ? at->slice[d].stride : 1;
        if (b->n[d] > 1 && stride != 1) return false;
        ob->lo[d] = at->slice[d].start + b->lo[d] * stride;
      }
      return true;
    case HK_OP_DYNAMIC_SLICE:
      for (int d = 0; d < b->rank; d++) ob->lo[d] += mv->starts[d];
      return true;
    case HK_OP_DYNAMIC_UPDATE_SLICE: {
      const hk_shape *us = ins->operands[1]->shape;
      bool inside = true, meets = true;
      for (int d = 0; d < b->rank; d++) {
        inside &= b->lo[d] >= mv->starts[d] && b->lo[d] + b->n[d] <= mv->starts[d] + us->dims[d];
        meets &= ranges_meet(b->lo[d], b->n[d], mv->starts[d], us->dims[d]);
      }
      if (inside) {
        *k = 1;
        for (int d = 0; d < b->rank; d++) ob->lo[d] -= mv->starts[d];
      }
      return inside || !meets;
    }
    case HK_OP_CONCATENATE: {
      int c = (int)ins->dims[0];
      for (int j = 0; j < ins->n_operands; j++)
        if (b->lo[c] >= mv->concat_off[j] && b->lo[c] + b->n[c] <= mv->concat_off[j + 1]) {
          *k = j;
          ob->lo[c] -= mv->concat_off[j];
          return true;
        }
      return false;
    }
    case HK_OP_PAD: {
      const hk_shape *os = ins->operands[0]->shape;
      for (int d = 0; d < b->rank; d++) {
        const hk_pad_dim *p = &at->pad[d];
        if (p->interior || b->lo[d] < p->lo || b->lo[d] + b->n[d] > p->lo + os->dims[d]) return false;
        ob->lo[d] -= p->lo;
      }
      return true;
    }
    default:
      return false;
  }
}

/* Transpose and broadcast: the operand box they read, then the dense
 * kernel on it through a box-shaped shadow. */
static hk_status *permuted_source(se_move *mv, const se_box *b, hk_value **out) {
  const hk_instr *ins = mv->ins;
  const hk_shape *os = ins->operands[0]->shape;
  se_box ob;
  ob.rank = os->rank;
  for (int i = 0; i < ins->n_dims; i++) {
    int64_t src = ins->opcode == HK_OP_TRANSPOSE ? ins->dims[i] : i;
    int64_t dst = ins->opcode == HK_OP_TRANSPOSE ? i : ins->dims[i];
    ob.lo[src] = b->lo[dst];
    ob.n[src] = b->n[dst];
  }
  hk_value *v;
  HK_TRY(se_operand(mv->x, mv->f, ins, 0, &ob, &v));
  hk_instr sh = *ins;
  sh.shape = se_box_shape(mv->x, (hk_prim)ins->shape->elem, b);
  hk_status *st = (ins->opcode == HK_OP_TRANSPOSE ? hk_op_transpose : hk_op_broadcast)(&mv->x->dev, &sh, &v, out);
  hk_value_release(v);
  return st;
}

static hk_status *move_op(se_move *mv, const se_box *b, hk_value **out) {
  HK_TRY(setup(mv));
  int k;
  se_box ob;
  if (direct_source(mv, b, &k, &ob)) return se_operand(mv->x, mv->f, mv->ins, k, &ob, out);
  if (mv->ins->opcode == HK_OP_TRANSPOSE || mv->ins->opcode == HK_OP_BROADCAST)
    return permuted_source(mv, b, out);
  return run_move(mv, b, out);
}

hk_status *se_op_move(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                      hk_value **out) {
  (void)leaf;
  if (b->rank > SE_MAX_RANK || ins->operands[0]->shape->rank > SE_MAX_RANK)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "rank above %d", SE_MAX_RANK);
  se_move mv = {.x = x, .f = f, .ins = ins, .rank = b->rank};
  /* Same dims: a reshape or bitcast that keeps the layout is the identity. */
  if ((ins->opcode == HK_OP_RESHAPE || ins->opcode == HK_OP_BITCAST) &&
      hk_shape_equal(ins->shape, ins->operands[0]->shape))
    return se_operand(x, f, ins, 0, b, out);
  hk_status *st = move_op(&mv, b, out);
  free(mv.concat_off);
  return st;
}

/* ---- gather ------------------------------------------------------------------------ */

/* Indices dim of result batch dim number j (skipping index_vector_dim). */
static int64_t indices_dim(const hk_gather_dnums *g, int j) {
  return j < g->index_vector_dim ? j : j + 1;
}

static int map_gather(const se_move *mv, const int64_t *o, int64_t *in) {
  const hk_instr *ins = mv->ins;
  const hk_gather_dnums *g = ins->attrs->gather;
  const hk_shape *os = ins->operands[0]->shape, *is = ins->operands[1]->shape;
  int64_t ipos[SE_MAX_RANK];   /* position in the indices tensor */
  int nb = 0;
  for (int d = 0; d < mv->rank; d++)
    if (!hk_i64s_has(g->offset_dims, d)) ipos[indices_dim(g, nb++)] = o[d];
  int64_t full[SE_MAX_RANK] = {0};
  for (int k = 0; k < g->start_index_map.n; k++) {
    if (g->index_vector_dim < is->rank) ipos[g->index_vector_dim] = k;
    int64_t lin = 0;
    for (int d = 0; d < is->rank; d++) lin = lin * mv->gidx->dims[d] + (ipos[d] - mv->gidx_box.lo[d]);
    full[g->start_index_map.v[k]] = hk_value_get_i64(mv->gidx, lin);
  }
  for (int i = 0; i < g->operand_batching_dims.n; i++)
    full[g->operand_batching_dims.v[i]] = ipos[g->start_indices_batching_dims.v[i]];
  int noff = 0;
  for (int d = 0; d < os->rank; d++) {
    int64_t size = ins->attrs->gather_slice_sizes.v[d], hi = os->dims[d] - size;
    /* paired batching dims may differ in size: clamped as gather_scatter.c does */
    if (hk_i64s_has(g->operand_batching_dims, d)) hi = os->dims[d] - 1;
    int64_t s = hk_clamp_i64(full[d], 0, hi);
    in[d] = s;
    if (!hk_i64s_has(g->collapsed_slice_dims, d) && !hk_i64s_has(g->operand_batching_dims, d))
      in[d] += o[g->offset_dims.v[noff++]];
  }
  return 0;
}

hk_status *se_op_gather(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                        hk_value **out) {
  (void)leaf;
  const hk_attrs *at = ins->attrs;
  const hk_shape *is = ins->operands[1]->shape;
  if (!at || !at->gather || at->gather_slice_sizes.n != ins->operands[0]->shape->rank || is->rank > SE_MAX_RANK - 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "gather without dimension numbers or slice sizes");
  const hk_gather_dnums *g = at->gather;
  se_move mv = {.x = x, .f = f, .ins = ins, .rank = b->rank};
  /* The indices the result box reads: batch dims from the box, the index
   * vector whole. */
  mv.gidx_box.rank = is->rank;
  int nb = 0;
  for (int d = 0; d < b->rank; d++)
    if (!hk_i64s_has(g->offset_dims, d)) {
      int64_t id = indices_dim(g, nb++);
      mv.gidx_box.lo[id] = b->lo[d];
      mv.gidx_box.n[id] = b->n[d];
    }
  if (g->index_vector_dim < is->rank) {
    mv.gidx_box.lo[g->index_vector_dim] = 0;
    mv.gidx_box.n[g->index_vector_dim] = is->dims[g->index_vector_dim];
  }
  HK_TRY(se_operand(x, f, ins, 1, &mv.gidx_box, &mv.gidx));
  hk_status *st = run_move(&mv, b, out);
  hk_value_release(mv.gidx);
  return st;
}

/* ---- scatter ------------------------------------------------------------------------ */

hk_status *se_combine_elem(se_ctx *x, const hk_computation *c, hk_reducer_kind kind,
                              hk_value *acc, int64_t ai, const hk_value *upd, int64_t ui) {
  hk_prim p = (hk_prim)acc->elem;
  if (kind != HK_RED_GENERIC && !hk_prim_is_complex(p) && kind <= HK_RED_MIN) {
    if (hk_prim_is_float(p)) {
      double a = hk_value_get_f64(acc, ai), u = hk_value_get_f64(upd, ui);
      double r = kind == HK_RED_ADD ? a + u : kind == HK_RED_MUL ? a * u
               : kind == HK_RED_MAX ? (a != a || u != u ? a + u : a > u ? a : u)
                                    : (a != a || u != u ? a + u : a < u ? a : u);
      hk_value_set_f64(acc, ai, r);
      return NULL;
    }
    if (hk_prim_is_signed_int(p) || p == HK_PRED) {
      int64_t a = hk_value_get_i64(acc, ai), u = hk_value_get_i64(upd, ui);
      int64_t r = kind == HK_RED_ADD ? (int64_t)((uint64_t)a + (uint64_t)u)
                : kind == HK_RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)u)
                : kind == HK_RED_MAX ? (a > u ? a : u) : (a < u ? a : u);
      if (p == HK_PRED && kind == HK_RED_ADD) r = a | u;
      hk_value_set_i64(acc, ai, r);
      return NULL;
    }
  }
  int es = hk_esize(p);
  hk_value *args[2] = {hk_value_new_array(p, 0, NULL), hk_value_new_array(p, 0, NULL)}, *r = NULL;
  memcpy(args[0]->data, (uint8_t *)acc->data + ai * es, (size_t)es);
  memcpy(args[1]->data, (const uint8_t *)upd->data + ui * es, (size_t)es);
  hk_status *st = hk_eval_scalar_call(&x->dev, c, args, 2, &r);
  if (!st) memcpy((uint8_t *)acc->data + ai * es, r->data, (size_t)es);
  hk_value_release(r);
  hk_value_release(args[0]);
  hk_value_release(args[1]);
  return st;
}

typedef struct scatter_job {
  se_ctx *x;
  se_frame *f;
  const hk_instr *ins;
  const hk_scatter_dnums *s;
  const se_box *b;
  hk_value *out, *idx;
  hk_reducer_kind kind;
} scatter_job;

/* Applies the update window at scatter position upos (update index with
 * window dims 0) to the part of the result box it covers. */
static hk_status *scatter_window(scatter_job *j, const int64_t *upos, const int64_t *start) {
  const hk_shape *os = j->ins->operands[0]->shape, *us = j->ins->operands[2]->shape;
  const hk_scatter_dnums *s = j->s;
  se_box ub;   /* the update elements that land in the box */
  ub.rank = us->rank;
  int64_t wpos = 0;
  for (int d = 0; d < us->rank; d++) {
    ub.lo[d] = upos[d];
    ub.n[d] = 1;
  }
  int64_t od_of_w[SE_MAX_RANK];
  for (int d = 0; d < os->rank; d++) {
    if (hk_i64s_has(s->inserted_window_dims, d) || hk_i64s_has(s->input_batching_dims, d)) {
      if (start[d] < j->b->lo[d] || start[d] >= j->b->lo[d] + j->b->n[d]) return NULL;
      continue;
    }
    int64_t ud = s->update_window_dims.v[wpos++];
    od_of_w[ud] = d;
    int64_t lo = j->b->lo[d] - start[d], hi = j->b->lo[d] + j->b->n[d] - start[d];
    if (lo < 0) lo = 0;
    if (hi > us->dims[ud]) hi = us->dims[ud];
    if (lo >= hi) return NULL;
    ub.lo[ud] = lo;
    ub.n[ud] = hi - lo;
  }
  hk_value *u;
  HK_TRY(se_operand(j->x, j->f, j->ins, 2, &ub, &u));
  int64_t ost[SE_MAX_RANK], idx[SE_MAX_RANK];
  hk_strides(j->b->rank, j->b->n, ost);
  for (int d = 0; d < us->rank; d++) idx[d] = ub.lo[d];
  hk_status *st = NULL;
  for (int64_t i = 0; i < u->n && !st; i++, next_index(idx, &ub)) {
    int64_t lin = 0;
    for (int d = 0; d < os->rank; d++) {
      int64_t t = start[d];
      for (int w = 0; w < s->update_window_dims.n; w++)
        if (od_of_w[s->update_window_dims.v[w]] == d) t += idx[s->update_window_dims.v[w]];
      lin += (t - j->b->lo[d]) * ost[d];
    }
    st = se_combine_elem(j->x, j->ins->called[0], j->kind, j->out, lin, u, i);
  }
  hk_value_release(u);
  return st;
}

/* The full start of the window for update scatter position upos; false
 * when the window does not fit in the operand (XLA skips it). */
static bool scatter_start(const scatter_job *j, const int64_t *upos, int64_t *start) {
  const hk_shape *os = j->ins->operands[0]->shape, *is = j->ins->operands[1]->shape;
  const hk_shape *us = j->ins->operands[2]->shape;
  const hk_scatter_dnums *s = j->s;
  int64_t ipos[SE_MAX_RANK];
  int n = 0;
  for (int d = 0; d < us->rank; d++)
    if (!hk_i64s_has(s->update_window_dims, d)) {
      int64_t id = n < s->index_vector_dim ? n : n + 1;
      ipos[id] = upos[d];
      n++;
    }
  for (int d = 0; d < os->rank; d++) start[d] = 0;
  for (int k = 0; k < s->scatter_dims_to_operand_dims.n; k++) {
    if (s->index_vector_dim < is->rank) ipos[s->index_vector_dim] = k;
    int64_t lin = 0;
    for (int d = 0; d < is->rank; d++) lin = lin * is->dims[d] + ipos[d];
    start[s->scatter_dims_to_operand_dims.v[k]] = hk_value_get_i64(j->idx, lin);
  }
  for (int i = 0; i < s->input_batching_dims.n; i++)
    start[s->input_batching_dims.v[i]] = ipos[s->scatter_indices_batching_dims.v[i]];
  int wpos = 0;
  for (int d = 0; d < os->rank; d++) {
    int64_t size = 1;
    if (!hk_i64s_has(s->inserted_window_dims, d) && !hk_i64s_has(s->input_batching_dims, d))
      size = us->dims[s->update_window_dims.v[wpos++]];
    if (start[d] < 0 || start[d] + size > os->dims[d]) return false;
  }
  return true;
}

hk_status *se_op_scatter(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                         hk_value **out) {
  (void)leaf;
  const hk_attrs *at = ins->attrs;
  if (ins->n_operands != 3 || !at || !at->scatter || ins->n_called < 1)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "sampled scatter needs one operand, indices, updates and a combiner");
  const hk_shape *is = ins->operands[1]->shape, *us = ins->operands[2]->shape;
  if (is->rank >= SE_MAX_RANK || us->rank > SE_MAX_RANK) return hk_eval_error(ins, HK_UNIMPLEMENTED, "rank too high");
  scatter_job j = {x, f, ins, at->scatter, b, NULL, NULL, hk_reducer_kind_of(ins->called[0])};
  HK_TRY(se_operand(x, f, ins, 0, b, &j.out));
  hk_value *base = j.out;
  j.out = hk_value_clone(base);
  hk_value_release(base);
  se_box ib;
  se_box_full(&ib, is);
  hk_status *st = se_operand(x, f, ins, 1, &ib, &j.idx);
  /* Every scatter position in order: the update dims that are not window
   * dims, row-major. */
  se_box pos;
  pos.rank = us->rank;
  for (int d = 0; d < us->rank; d++) {
    pos.lo[d] = 0;
    pos.n[d] = hk_i64s_has(at->scatter->update_window_dims, d) ? 1 : us->dims[d];
  }
  int64_t upos[SE_MAX_RANK] = {0}, start[SE_MAX_RANK];
  int64_t n = se_box_count(&pos);
  for (int64_t i = 0; i < n && !st; i++, next_index(upos, &pos)) {
    if ((i & 4095) == 4095) st = se_check_time(x, ins);
    if (!st && scatter_start(&j, upos, start)) st = scatter_window(&j, upos, start);
  }
  hk_value_release(j.idx);
  if (st) {
    hk_value_release(j.out);
    return st;
  }
  *out = j.out;
  return NULL;
}
