/* plugin.c - entry point of the hilo plugin: the post-partition collective
 * passes (channel ids, stream ids, reduce-scatter creation, combiners,
 * collective-permute cycle decomposition). */
#include "hilo.h"

static const hk_pass_desc *const hilo_passes[] = {
    &hilo_unique_channel_id_desc,    &hilo_collective_stream_id_desc,
    &hilo_reduce_scatter_creator_desc, &hilo_all_reduce_combiner_desc,
    &hilo_all_gather_combiner_desc,  &hilo_cp_cycle_decomposer_desc,
};

static hk_status *hilo_register(hk_registry *reg) {
  return hk_registry_add_passes(reg, hilo_passes, sizeof hilo_passes / sizeof hilo_passes[0]);
}

HK_PLUGIN("hilo", HK_VERSION_STRING, hilo_register)
