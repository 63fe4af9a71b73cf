/* custom_call.c - custom calls, in XLA's order (HandleCustomCall): the
 * Sharding annotation, the switches into and out of manual partitioning
 * (SPMDFullToShardShape / SPMDShardToFullShape), the partitioner's own
 * rotate, ops on one device, manual ones, TopK, the host-offloading moves,
 * then registered custom-call partitioners (last: the built-in targets
 * above are registered too, by the barriers plugin, and hand back here),
 * else the replicate fallback. */
#include "spmd_internal.h"

static bool is_target(const char *t, const char *name) { return t && !strcmp(t, name); }

/* "<target> '<name>': the <what> <got> is not <want>". */
static hk_status *shape_error(const hk_instr *orig, const char *what, const hk_shape *got,
                              const char *is_not, const hk_shape *want) {
  char *a = hk_shape_to_string(got), *b = hk_shape_to_string(want);
  hk_status *st = hk_error(HK_INVALID_ARGUMENT, "%s '%s': the %s %s is not %s %s",
                           orig->attrs->custom_call_target, orig->name, what, a, is_not, b);
  free(a);
  free(b);
  return st;
}

/* The operand's own shards, padding of uneven dims zeroed (XLA's
 * PadWithValue before SPMDFullToShardShape), copied into the manual
 * shape: the shape of s's tile of the instruction's shape. */
static hk_status *full_to_shard(spmd_visitor *v, hk_instr *orig, const hk_sharding *s) {
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  if (!val) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  hk_instr *op = val->hlo;
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  if (!hk_shape_compatible(op->shape, ls))
    return shape_error(orig, "operand's shard", op->shape, "the manual shard", ls);
  const hk_sharding *os = val->sharding;
  const hk_shape *gs = orig->operands[0]->shape;
  if (os && os->kind == HK_SHARDING_TILED && hk_shape_is_array(gs))
    for (int d = 0; d < gs->rank; d++)
      if (gs->dims[d] % hk_sharding_dim_partitions(os, d))
        op = spmd_mask_padding(v, os, gs, d, op, spmd_constant_scalar(v, (hk_prim)gs->elem, 0));
  spmd_set(v, orig, hk_instr_new(v->comp, HK_OP_COPY, op->shape, 1, &op, NULL), s);
  return NULL;
}

/* The manual shards copied into s's tiles of the full shape. */
static hk_status *shard_to_full(spmd_visitor *v, hk_instr *orig, const hk_sharding *s) {
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  if (!val) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  if (hk_sharding_is_manual(s) || !hk_shape_compatible(ls, val->hlo->shape))
    return shape_error(orig, "manual shard", val->hlo->shape, "its sharding's tile", ls);
  hk_instr *op = val->hlo;
  spmd_set(v, orig, hk_instr_new(v->comp, HK_OP_COPY, ls, 1, &op, NULL), s);
  return NULL;
}

/* MoveToDevice keeps its operand's sharding (the host offloader matches
 * the move as written), then is resharded for its users. */
static hk_status *move_to_device(spmd_visitor *v, hk_instr *orig) {
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  if (!val) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  hk_instr *op = val->hlo;
  const hk_sharding *os = val->sharding ? val->sharding : spmd_sharding_of(v, orig->operands[0]);
  hk_instr *c = spmd_clone(v, orig, op->shape, 1, &op);
  hk_instr *out;
  HK_TRY(spmd_reshard_hlo(v, c, orig->shape, os, spmd_sharding_of(v, orig), &out));
  spmd_set(v, orig, out, spmd_sharding_of(v, orig));
  return NULL;
}

hk_status *spmd_handle_custom_call(spmd_visitor *v, hk_instr *orig) {
  const char *t = orig->attrs ? orig->attrs->custom_call_target : NULL;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  bool manual = hk_sharding_is_manual(s);
  if (is_target(t, "Sharding") && orig->n_operands == 1) {
    if (manual) return spmd_handle_manual(v, orig);
    spmd_value *val = spmd_lookup(v, orig->operands[0]);
    hk_instr *op;
    HK_TRY(spmd_reshard(v, val, s, &op));
    spmd_set(v, orig, op, s);
    return NULL;
  }
  if (is_target(t, "SPMDFullToShardShape") && orig->n_operands == 1) return full_to_shard(v, orig, s);
  if (is_target(t, "SPMDShardToFullShape") && orig->n_operands == 1) return shard_to_full(v, orig, s);
  if (is_target(t, SPMD_ROTATE_RIGHT_TARGET)) return spmd_handle_rotate_right(v, orig);
  if (hk_sharding_unique_device(s) >= 0) return spmd_handle_single_device(v, orig);
  if (manual) return spmd_handle_manual(v, orig);
  if (is_target(t, "TopK") && orig->n_operands == 1) return spmd_handle_topk(v, orig);
  if (is_target(t, "MoveToHost") && orig->n_operands == 1) return spmd_handle_elementwise(v, orig);
  if (is_target(t, "MoveToDevice") && orig->n_operands == 1) return move_to_device(v, orig);
  const hk_custom_call_partitioner *cp =
      t && v->p->reg ? hk_registry_find_custom_call_partitioner(v->p->reg, t) : NULL;
  if (cp && cp->vt->partition) return cp->vt->partition(cp, &v->ctx, orig);
  return spmd_handle_fallback(v, orig);
}
