/* shard_targets.c - the partitioner's own custom-call targets as registered
 * partitioners: SPMDFullToShardShape and SPMDShardToFullShape (manual
 * region boundaries: not shardable by propagation) and Sharding (a
 * pass-through annotation: shardable, takes its operand's sharding).
 * Their partition hooks hand the instruction to the SPMD partitioner's
 * built-in handling (ctx->ops->default_handle), which knows these targets
 * in their one-operand form; other forms are refused, so the built-in and
 * the registry never call each other in a loop. */
#include <string.h>

#include "barriers.h"

bool barriers_always(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  (void)cc;
  return true;
}

static bool never(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  (void)cc;
  return false;
}

bool barriers_side_effect_ok(const hk_custom_call_partitioner *self) {
  (void)self;
  return true;
}

const hk_sharding *barriers_operand_sharding(const hk_custom_call_partitioner *self,
                                             const hk_instr *cc) {
  (void)self;
  return cc->n_operands > 0 ? cc->operands[0]->sharding : NULL;
}

/* Replicated, tiled or manual (a tuple: any element): what a pass-through
 * custom call forwards, as for other pass-through ops. */
static bool spatial(const hk_sharding *s) {
  if (!s) return false;
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (spatial(s->elems[i])) return true;
    return false;
  }
  return s->kind == HK_SHARDING_TILED || s->kind == HK_SHARDING_REPLICATED ||
         s->kind == HK_SHARDING_MANUAL;
}

static const hk_sharding *sharding_from_operand(const hk_custom_call_partitioner *self,
                                                const hk_instr *cc) {
  const hk_sharding *s = barriers_operand_sharding(self, cc);
  return spatial(s) ? s : NULL;
}

static hk_status *partition_builtin(const hk_custom_call_partitioner *self,
                                    hk_spmd_partition_ctx *ctx, hk_instr *cc) {
  (void)self;
  const char *target = cc->attrs && cc->attrs->custom_call_target ? cc->attrs->custom_call_target : "?";
  if (cc->n_operands != 1)
    return hk_error(HK_INVALID_ARGUMENT, "%s custom-call '%s' takes exactly one operand, not %d",
                    target, cc->name, (int)cc->n_operands);
  if (!HK_HAS_MEMBER(ctx->ops, hk_spmd_ctx_ops, default_handle) || !ctx->ops->default_handle)
    return hk_error(HK_FAILED_PRECONDITION, "%s: the partitioner offers no built-in handling", target);
  return ctx->ops->default_handle(ctx, cc);
}

static const hk_custom_call_partitioner_vtable manual_boundary_vtable = {
    .size = sizeof(hk_custom_call_partitioner_vtable),
    .is_shardable = never,
    .infer_sharding_from_operands = NULL,
    .propagate_user_sharding = NULL,
    .can_side_effecting_have_replicated_sharding = NULL,
    .partition = partition_builtin,
    .destroy = NULL,
};

static const hk_custom_call_partitioner_vtable sharding_vtable = {
    .size = sizeof(hk_custom_call_partitioner_vtable),
    .is_shardable = barriers_always,
    .infer_sharding_from_operands = sharding_from_operand,
    .propagate_user_sharding = NULL,
    .can_side_effecting_have_replicated_sharding = NULL,
    .partition = partition_builtin,
    .destroy = NULL,
};

const hk_custom_call_partitioner full_to_shard_partitioner = {&manual_boundary_vtable};
const hk_custom_call_partitioner shard_to_full_partitioner = {&manual_boundary_vtable};
const hk_custom_call_partitioner sharding_partitioner = {&sharding_vtable};
