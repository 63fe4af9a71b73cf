/* plugin.c - entry point of the stock passes plugin: registers the XLA
 * namesake passes every pipeline needs (verifier, DCE, CSE, ...). */
#include "stock.h"

static const hk_pass_desc *const stock_passes[] = {
    &stock_verifier_desc,     &stock_dce_desc,           &stock_tuple_simplifier_desc,
    &stock_flatten_call_graph_desc, &stock_cse_desc,     &stock_call_inliner_desc,
    &stock_rng_expander_desc, &stock_comparison_expander_desc,
    &stock_all_reduce_promotion_desc, &stock_float_normalization_desc,
    &stock_dynamic_padder_desc, &stock_change_op_data_type_desc,
};

static hk_status *stock_register(hk_registry *reg) {
  return hk_registry_add_passes(reg, stock_passes, sizeof stock_passes / sizeof stock_passes[0]);
}

HK_PLUGIN("stock", HK_VERSION_STRING, stock_register)
