/* plugin.c - the barriers plugin: registers the custom-call partitioners
 * for ShardBarrierFrom, ShardBarrierTo, SPMDFullToShardShape,
 * SPMDShardToFullShape and Sharding.  They are static (destroy = NULL), so
 * the registry may hold the const objects. */
#include "barriers.h"

static hk_status *barriers_register(hk_registry *reg) {
  static const struct {
    const char *target;
    const hk_custom_call_partitioner *p;
  } table[] = {
      {"ShardBarrierFrom", &barrier_from_partitioner},
      {"ShardBarrierTo", &barrier_to_partitioner},
      {"SPMDFullToShardShape", &full_to_shard_partitioner},
      {"SPMDShardToFullShape", &shard_to_full_partitioner},
      {"Sharding", &sharding_partitioner},
  };
  for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
    HK_TRY(hk_registry_add_custom_call_partitioner(reg, table[k].target,
                                                   (hk_custom_call_partitioner *)table[k].p));
  return NULL;
}

HK_PLUGIN("barriers", HK_VERSION_STRING, barriers_register)
