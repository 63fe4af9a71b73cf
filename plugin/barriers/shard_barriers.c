/* shard_barriers.c - ShardBarrierFrom and ShardBarrierTo (XLA's
 * ShardBarrierFromPartitioner / ShardBarrierToPartitioner): propagation
 * barriers that are shardable, may carry a replicated sharding although
 * side-effecting, and partition as the identity of their operand.
 *   ShardBarrierFrom: nothing goes forward (no sharding from the operand);
 *                     backward passes (the user's sharding, unchanged).
 *   ShardBarrierTo:   forward passes (the operand's sharding); backward
 *                     gives only {replicated}, so no tiling reaches the
 *                     operand through it. */
#include "barriers.h"

static const hk_sharding *no_forward(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  (void)cc;
  return NULL;
}

static const hk_sharding *pass_backward(const hk_custom_call_partitioner *self,
                                        const hk_instr *cc, const hk_instr *user,
                                        const hk_sharding *user_sharding) {
  (void)self;
  (void)cc;
  (void)user;
  return user_sharding;
}

static const hk_sharding *replicated_backward(const hk_custom_call_partitioner *self,
                                              const hk_instr *cc, const hk_instr *user,
                                              const hk_sharding *user_sharding) {
  (void)self;
  (void)user;
  (void)user_sharding;
  hk_module *m = cc->parent->module;
  return hk_sharding_for_shape(m, hk_sharding_replicated(m), cc->shape);
}

/* The barrier is the identity: its partitioned form is the operand's,
 * resharded to the barrier's sharding. */
static hk_status *partition_identity(const hk_custom_call_partitioner *self,
                                     hk_spmd_partition_ctx *ctx, hk_instr *cc) {
  (void)self;
  const char *target = cc->attrs && cc->attrs->custom_call_target ? cc->attrs->custom_call_target : "?";
  if (cc->n_operands != 1 || !hk_shape_compatible(cc->shape, cc->operands[0]->shape))
    return hk_error(HK_INVALID_ARGUMENT, "%s custom-call '%s' must have one operand of its own shape",
                    target, cc->name);
  if (!HK_HAS_MEMBER(ctx->ops, hk_spmd_ctx_ops, set_partitioned))
    return hk_error(HK_FAILED_PRECONDITION, "%s: the partitioner's context is too old", target);
  hk_module *m = ctx->ops->module(ctx);
  const hk_sharding *s = cc->sharding ? cc->sharding
                                      : hk_sharding_for_shape(m, hk_sharding_replicated(m), cc->shape);
  hk_status *err = NULL;
  hk_instr *local = ctx->ops->operand(ctx, cc->operands[0], s, &err);
  if (!local) return hk_status_prefix(err, "%s '%s'", target, cc->name);
  ctx->ops->set_partitioned(ctx, cc, local, s);
  return NULL;
}

static const hk_custom_call_partitioner_vtable barrier_from_vtable = {
    .size = sizeof(hk_custom_call_partitioner_vtable),
    .is_shardable = barriers_always,
    .infer_sharding_from_operands = no_forward,
    .propagate_user_sharding = pass_backward,
    .can_side_effecting_have_replicated_sharding = barriers_side_effect_ok,
    .partition = partition_identity,
    .destroy = NULL,
};

static const hk_custom_call_partitioner_vtable barrier_to_vtable = {
    .size = sizeof(hk_custom_call_partitioner_vtable),
    .is_shardable = barriers_always,
    .infer_sharding_from_operands = barriers_operand_sharding,
    .propagate_user_sharding = replicated_backward,
    .can_side_effecting_have_replicated_sharding = barriers_side_effect_ok,
    .partition = partition_identity,
    .destroy = NULL,
};

const hk_custom_call_partitioner barrier_from_partitioner = {&barrier_from_vtable};
const hk_custom_call_partitioner barrier_to_partitioner = {&barrier_to_vtable};
