/* options.c - SpmdPartitionerOptions: the pass option declarations (one per
 * field, same names and XLA's defaults) and their conversion to the POD. */
#include "spmd_internal.h"

static const char *const gs_methods[] = {"kIndexParallel", "kExplicitBatch",
                                         "kOperandPassthrough", "kTrivialSlicedOperand",
                                         "kIndexPassthrough", NULL};

const hk_option_decl spmd_option_decls[SPMD_N_OPTIONS] = {
    {"conv_halo_exchange_always_on_lhs", HK_OPT_BOOL, "true",
     "convolution halo exchange always on the lhs", NULL},
    {"report_instruction_count", HK_OPT_INT, "5",
     "instructions listed per category in the before/after reports", NULL},
    {"threshold_for_windowed_einsum_mib", HK_OPT_INT, "256",
     "operand size (MiB) above which a windowed einsum is considered", NULL},
    {"unroll_windowed_einsum", HK_OPT_BOOL, "false", "unroll windowed-einsum loops", NULL},
    {"bidirectional_windowed_einsum", HK_OPT_BOOL, "false",
     "send windowed-einsum data both ways", NULL},
    {"allow_module_signature_change", HK_OPT_BOOL, "false",
     "entry parameters/root may be tiled; the entry layout becomes the local shapes", NULL},
    {"cache_all_gather", HK_OPT_BOOL, "true", "reuse all-gathers of the same value", NULL},
    {"choose_faster_windowed_einsum_over_mem", HK_OPT_BOOL, "false",
     "prefer the faster windowed-einsum variant over the smaller one", NULL},
    {"bidirectional_decomposed_all_gather", HK_OPT_BOOL, "false",
     "decompose all-gathers into bidirectional permutes", NULL},
    {"skip_checking_windowed_einsum_users", HK_OPT_BOOL, "false",
     "do not inspect users before a windowed einsum", NULL},
    {"enable_windowed_einsum_for_all_gather", HK_OPT_BOOL, "true",
     "windowed einsum may replace an all-gather", NULL},
    {"enable_windowed_einsum_for_reduce_scatter", HK_OPT_BOOL, "true",
     "windowed einsum may replace a reduce-scatter", NULL},
    {"disable_ag_rewrite_for_multiple_consumers", HK_OPT_BOOL, "false",
     "keep an all-gather with several consumers", NULL},
    {"gather_partition_method", HK_OPT_ENUM, "kIndexParallel",
     "preferred gather partitioning method", gs_methods},
    {"scatter_partition_method", HK_OPT_ENUM, "kIndexParallel",
     "preferred scatter partitioning method", gs_methods},
    {"total_bytes_windowed_einsum_threshold", HK_OPT_INT, "-1",
     "operand bytes above which windowed einsum is enabled (-1 = unset)", NULL},
    {"num_partitions", HK_OPT_INT, "0", "partitions (0 = the module config's)", NULL},
    {"num_replicas", HK_OPT_INT, "0", "replicas (0 = the module config's)", NULL},
};
const int32_t spmd_n_option_decls = sizeof spmd_option_decls / sizeof spmd_option_decls[0];

hk_spmd_options spmd_options_default(void) {
  hk_spmd_options o;
  memset(&o, 0, sizeof o);
  o.conv_halo_exchange_always_on_lhs = true;
  o.report_instruction_count = 5;
  o.threshold_for_windowed_einsum_mib = 256;
  o.cache_all_gather = true;
  o.enable_windowed_einsum_for_all_gather = true;
  o.enable_windowed_einsum_for_reduce_scatter = true;
  o.gather_partition_method = HK_SPMD_GS_INDEX_PARALLEL;
  o.scatter_partition_method = HK_SPMD_GS_INDEX_PARALLEL;
  return o;
}

void spmd_options_from_values(const hk_option_values *v, hk_spmd_options *o) {
  *o = spmd_options_default();
  o->conv_halo_exchange_always_on_lhs = hk_opt_bool(v, "conv_halo_exchange_always_on_lhs");
  o->report_instruction_count = hk_opt_int(v, "report_instruction_count");
  o->threshold_for_windowed_einsum_mib = hk_opt_int(v, "threshold_for_windowed_einsum_mib");
  o->unroll_windowed_einsum = hk_opt_bool(v, "unroll_windowed_einsum");
  o->bidirectional_windowed_einsum = hk_opt_bool(v, "bidirectional_windowed_einsum");
  o->allow_module_signature_change = hk_opt_bool(v, "allow_module_signature_change");
  o->cache_all_gather = hk_opt_bool(v, "cache_all_gather");
  o->choose_faster_windowed_einsum_over_mem =
      hk_opt_bool(v, "choose_faster_windowed_einsum_over_mem");
  o->bidirectional_decomposed_all_gather = hk_opt_bool(v, "bidirectional_decomposed_all_gather");
  o->skip_checking_windowed_einsum_users = hk_opt_bool(v, "skip_checking_windowed_einsum_users");
  o->enable_windowed_einsum_for_all_gather =
      hk_opt_bool(v, "enable_windowed_einsum_for_all_gather");
  o->enable_windowed_einsum_for_reduce_scatter =
      hk_opt_bool(v, "enable_windowed_einsum_for_reduce_scatter");
  o->disable_ag_rewrite_for_multiple_consumers =
      hk_opt_bool(v, "disable_ag_rewrite_for_multiple_consumers");
  o->gather_partition_method = (hk_spmd_gs_method)hk_opt_enum_index(v, "gather_partition_method");
  o->scatter_partition_method =
      (hk_spmd_gs_method)hk_opt_enum_index(v, "scatter_partition_method");
  int64_t t = hk_opt_int(v, "total_bytes_windowed_einsum_threshold");
  o->has_total_bytes_windowed_einsum_threshold = t >= 0;
  o->total_bytes_windowed_einsum_threshold = t >= 0 ? t : 0;
}
