/* rebuild.c - values that are pure functions of replicated inputs (iotas,
 * constants, replicated values, broadcasts and elementwise ops of them)
 * recomputed under the sharding a user wants instead of resharded: no
 * collective, each device builds its own tile. */
#include "spmd_internal.h"

/* Bounds: a few ops, and a whole value built on every device (then sliced)
 * only when it is small enough that holding it costs less than sending it. */
#define REBUILD_MAX_OPS 32
#define REBUILD_MAX_BYTES (1 << 20)

/* A replicated partitioned value of x (whole on every device), or NULL. */
static spmd_value *replicated_value(spmd_visitor *v, const hk_instr *x) {
  spmd_value *val = spmd_lookup(v, x);
  if (!val || !val->hlo || !hk_shape_is_array(x->shape)) return NULL;
  return !val->sharding || hk_sharding_is_replicated(val->sharding) ? val : NULL;
}

/* Ops that compute the same thing from whole operands on every device
 * (indexing ops included: a gather of whole operands reads no other
 * device's data). */
static bool pure_op(const hk_instr *x) {
  switch (x->opcode) {
    case HK_OP_BROADCAST:
    case HK_OP_CONCATENATE:
    case HK_OP_RESHAPE:
    case HK_OP_TRANSPOSE:
    case HK_OP_SLICE:
    case HK_OP_GATHER:
    case HK_OP_DYNAMIC_SLICE:
    case HK_OP_PAD:
    case HK_OP_REVERSE:
      return true;
    default:
      return hk_opcode_is_elementwise(x->opcode) && x->opcode != HK_OP_STOCHASTIC_CONVERT &&
             x->opcode != HK_OP_RNG;
  }
}

/* Whether x's pieces are all iotas, constants, replicated inputs and pure
 * ops.  With max_bytes, every value built whole is bounded, not only the
 * result (a big iota sliced or reshaped down would otherwise be held whole
 * on every device); a replicated input is already whole and costs nothing
 * more.  Without (0), tiles are built, not whole values. */
static bool pure_walk(spmd_visitor *v, const hk_instr *x, int64_t max_bytes, int *budget) {
  if (--*budget < 0 || !hk_shape_is_array(x->shape)) return false;
  if (v && replicated_value(v, x)) return true;
  if (max_bytes && hk_shape_byte_size(x->shape) > max_bytes) return false;
  if (x->opcode == HK_OP_IOTA || x->opcode == HK_OP_CONSTANT) return true;
  if (!pure_op(x)) return false;
  for (int k = 0; k < x->n_operands; k++)
    if (!pure_walk(v, x->operands[k], max_bytes, budget)) return false;
  return true;
}

bool spmd_rebuildable(spmd_visitor *v, const hk_instr *x) {
  int budget = REBUILD_MAX_OPS;
  return pure_walk(v, x, REBUILD_MAX_BYTES, &budget);
}

hk_instr *spmd_rebuild(spmd_visitor *v, const hk_instr *x) {
  spmd_value *val = x->opcode == HK_OP_IOTA || x->opcode == HK_OP_CONSTANT ? NULL : replicated_value(v, x);
  if (val) return val->hlo;
  hk_instr **o = calloc((size_t)x->n_operands + 1, sizeof(hk_instr *));
  if (!o) hk_out_of_memory();
  for (int k = 0; k < x->n_operands; k++) o[k] = spmd_rebuild(v, x->operands[k]);
  hk_instr *c = hk_instr_clone(v->comp, x, x->shape, x->n_operands, o, NULL);
  hk_instr_set_sharding(c, NULL);
  free(o);
  return c;
}

/* ---- built tile by tile ------------------------------------------------------- */

static hk_instr *build_local(spmd_visitor *v, const hk_instr *x, const hk_sharding *to, int *budget);

/* A whole value h (global shape gs) cut to its tiles under `to`: local
 * slices only; NULL should the engine refuse. */
static hk_instr *reshard_whole(spmd_visitor *v, hk_instr *h, const hk_shape *gs, const hk_sharding *to) {
  hk_instr *out = NULL;
  hk_status *st = spmd_reshard_hlo(v, h, gs, hk_sharding_replicated(v->m), to, &out);
  if (!st) return out;
  hk_status_free(st);
  return NULL;
}

/* iota along dim d, this device's tile: a local iota plus the tile's offset. */
static hk_instr *local_iota(spmd_visitor *v, const hk_instr *x, const hk_sharding *to) {
  const hk_shape *ls = spmd_local_shape(v, to, x->shape);
  hk_instr *iota = hk_instr_clone(v->comp, x, ls, 0, NULL, NULL);
  hk_instr_set_sharding(iota, NULL);
  int d = (int)x->dims[0];
  if (hk_sharding_dim_partitions(to, d) == 1) return iota;
  hk_instr *off = spmd_tile_offset(v, to, x->shape, d);
  if (ls->elem != HK_S32)
    off = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_scalar(v->m, (hk_prim)ls->elem), 1, &off, NULL);
  hk_instr *ops[2] = {iota, hk_build_broadcast_scalar(v->comp, NULL, off, ls)};
  return hk_instr_new(v->comp, HK_OP_ADD, ls, 2, ops, NULL);
}

/* An elementwise op of tiles (scalar operands whole). */
static hk_instr *local_elementwise(spmd_visitor *v, const hk_instr *x, const hk_sharding *to,
                                   int *budget) {
  hk_instr **o = calloc((size_t)x->n_operands + 1, sizeof(hk_instr *));
  if (!o) hk_out_of_memory();
  bool ok = true;
  for (int k = 0; k < x->n_operands && ok; k++) {
    const hk_instr *a = x->operands[k];
    o[k] = a->shape->rank == 0 ? spmd_rebuild(v, a) : build_local(v, a, to, budget);
    ok = o[k] != NULL;
  }
  hk_instr *c = NULL;
  if (ok) {
    c = hk_instr_clone(v->comp, x, spmd_local_shape(v, to, x->shape), x->n_operands, o, NULL);
    hk_instr_set_sharding(c, NULL);
  }
  free(o);
  return c;
}

/* The operand tiling under which a broadcast or transpose x makes its
 * tile of `to` locally (as their handlers ask of their operands); NULL
 * when there is none. */
static const hk_sharding *operand_tiling(spmd_visitor *v, const hk_instr *x, const hk_sharding *to) {
  int r = x->shape->rank;
  int64_t idx[HK_MAX_RANK];
  if (x->opcode == HK_OP_TRANSPOSE) {
    for (int i = 0; i < x->n_dims; i++) idx[x->dims[i]] = i;
    return hk_sharding_transpose(v->m, to, idx);
  }
  int na = 0;
  for (int i = 1; i < x->n_dims; i++)
    if (x->dims[i] <= x->dims[i - 1]) return NULL;
  for (int d = 0; d < r; d++) {
    bool kept = false;
    for (int i = 0; i < x->n_dims; i++) kept = kept || x->dims[i] == d;
    if (!kept) idx[na++] = d;
  }
  return na ? spmd_remove_dims(v, to, na, idx) : to;
}

/* x's tile under `to` (tiled, no manual subgroup), or NULL when some piece
 * cannot be built without the whole value growing past the bound.  Padding
 * of uneven tiles holds whatever the ops compute there, as for any value. */
static hk_instr *build_local(spmd_visitor *v, const hk_instr *x, const hk_sharding *to, int *budget) {
  if (--*budget < 0) return NULL;
  spmd_value *rv = replicated_value(v, x);
  if (rv) return reshard_whole(v, rv->hlo, x->shape, to);   /* already whole: slices */
  if (x->opcode == HK_OP_IOTA && x->n_dims == 1) return local_iota(v, x, to);
  if (x->opcode == HK_OP_BROADCAST && x->operands[0]->shape->rank == 0 &&
      spmd_rebuildable(v, x->operands[0]))
    return hk_build_broadcast_scalar(v->comp, NULL, spmd_rebuild(v, x->operands[0]),
                                     spmd_local_shape(v, to, x->shape));
  if (x->opcode == HK_OP_BROADCAST || x->opcode == HK_OP_TRANSPOSE) {
    const hk_sharding *os = operand_tiling(v, x, to);
    hk_instr *t = os ? build_local(v, x->operands[0], os, budget) : NULL;
    if (!t) return NULL;
    hk_instr *c = hk_instr_clone(v->comp, x, spmd_local_shape(v, to, x->shape), 1, &t, NULL);
    hk_instr_set_sharding(c, NULL);
    return c;
  }
  if (hk_opcode_is_elementwise(x->opcode) && pure_op(x)) return local_elementwise(v, x, to, budget);
  return spmd_rebuildable(v, x) ? reshard_whole(v, spmd_rebuild(v, x), x->shape, to) : NULL;
}

/* Whether val may be built under `to` rather than resharded (manual
 * shardings and single-device targets keep the engine's way). */
static bool may_rebuild(spmd_visitor *v, const spmd_value *val, const hk_sharding *to) {
  const hk_instr *x = val->orig;
  int budget = REBUILD_MAX_OPS;
  return x && to && (to->kind == HK_SHARDING_TILED || to->kind == HK_SHARDING_REPLICATED) &&
         spmd_manual_factor(to) == 1 && spmd_manual_factor(val->sharding) == 1 &&
         !(val->sharding && val->sharding->kind == HK_SHARDING_MANUAL) &&
         hk_shape_is_array(x->shape) && hk_shape_is_array(val->base_shape) &&
         hk_shape_byte_size(x->shape) == hk_shape_byte_size(val->base_shape) &&
         pure_walk(v, x, 0, &budget);
}

int64_t spmd_value_reshard_cost(spmd_visitor *v, const spmd_value *val, const hk_sharding *to) {
  int64_t c = spmd_reshard_cost(v, val->base_shape, val->sharding, to);
  return c > 0 && may_rebuild(v, val, to) ? 0 : c;
}

bool spmd_rebuild_as(spmd_visitor *v, spmd_value *val, const hk_sharding *to, hk_instr **out) {
  /* Chosen by cost: building moves nothing, so any reshard that moves
   * bytes loses to it. */
  if (!may_rebuild(v, val, to) || spmd_reshard_cost(v, val->base_shape, val->sharding, to) <= 0)
    return false;
  int budget = REBUILD_MAX_OPS;
  hk_instr *h = build_local(v, val->orig, to, &budget);
  if (!h) return false;
  *out = h;
  return true;
}
