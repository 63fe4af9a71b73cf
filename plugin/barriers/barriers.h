/* barriers.h - the custom-call partitioners of plugin/barriers: the shard
 * barriers (ShardBarrierFrom, ShardBarrierTo) and the partitioner's own
 * targets (SPMDFullToShardShape, SPMDShardToFullShape, Sharding). */
#ifndef HK_PLUGIN_BARRIERS_H
#define HK_PLUGIN_BARRIERS_H

#include "hlokit/hlokit.h"
#include "hlokit/spmd.h"

extern const hk_custom_call_partitioner barrier_from_partitioner;
extern const hk_custom_call_partitioner barrier_to_partitioner;
extern const hk_custom_call_partitioner full_to_shard_partitioner;
extern const hk_custom_call_partitioner shard_to_full_partitioner;
extern const hk_custom_call_partitioner sharding_partitioner;

/* Hooks the partitioners share (shard_targets.c). */
bool barriers_always(const hk_custom_call_partitioner *self, const hk_instr *cc);
bool barriers_side_effect_ok(const hk_custom_call_partitioner *self);
/* The operand's sharding, or NULL when it has none. */
const hk_sharding *barriers_operand_sharding(const hk_custom_call_partitioner *self,
                                             const hk_instr *cc);

#endif
