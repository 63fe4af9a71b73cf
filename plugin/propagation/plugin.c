/* plugin.c - the sharding-propagation plugin: the pass, its options (XLA's
 * ShardingPropagation constructor arguments) and the explain extension. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

typedef struct prop_pass {
  hk_pass base;
  prop_opts o;
  hk_registry *reg;
  hk_prop_record *rec;
  int64_t n_rec;
} prop_pass;

static void free_records(prop_pass *p) {
  free(p->rec);
  p->rec = NULL;
  p->n_rec = 0;
}

static hk_status *prop_pass_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                                bool *changed) {
  prop_pass *p = (prop_pass *)self;
  free_records(p);
  hk_status *st = prop_run(m, p->reg, &p->o, threads, changed, &p->rec, &p->n_rec);
  return st ? hk_status_prefix(st, "sharding-propagation") : NULL;
}

static void prop_pass_destroy(hk_pass *self) {
  prop_pass *p = (prop_pass *)self;
  free_records(p);
  free(p);
}

static int64_t prop_records(hk_pass *self, const hk_prop_record **out) {
  prop_pass *p = (prop_pass *)self;
  *out = p->rec;
  return p->n_rec;
}

static const hk_prop_explain_vtable explain_vtable = {
    .size = sizeof(hk_prop_explain_vtable), .records = prop_records};

static const void *prop_get_extension(hk_pass *self, const char *iface) {
  (void)self;
  return strcmp(iface, HK_PROP_EXPLAIN_IFACE) == 0 ? &explain_vtable : NULL;
}

static const hk_pass_vtable prop_vtable = {
    .size = sizeof(hk_pass_vtable),
    .name = "sharding-propagation",
    .run = prop_pass_run,
    .destroy = prop_pass_destroy,
    .get_extension = prop_get_extension,
};

static int32_t copy_list(const hk_option_values *v, const char *name, bool *out) {
  const bool *vals;
  int32_t n = hk_opt_bool_list(v, name, &vals);
  if (n > 64) n = 64;
  for (int32_t k = 0; k < n; k++) out[k] = vals[k];
  return n;
}

static hk_pass *prop_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  prop_pass *p = (prop_pass *)hk_pass_alloc(&prop_vtable, sizeof *p, err);
  if (!p) return NULL;
  p->reg = reg;
  p->o.is_spmd = hk_opt_bool(opts, "is_spmd");
  p->o.propagate_metadata = hk_opt_bool(opts, "propagate_metadata");
  p->o.cse_prevention_only = hk_opt_bool(opts, "cse_prevention_only");
  p->o.n_out = copy_list(opts, "allow_spmd_sharding_propagation_to_output", p->o.out);
  p->o.n_params = copy_list(opts, "allow_spmd_sharding_propagation_to_parameters", p->o.params);
  return &p->base;
}

static const hk_option_decl prop_options[] = {
    {"is_spmd", HK_OPT_BOOL, "false",
     "propagate for the SPMD partitioner (partial shardings merge, reduce over tiled dims)", NULL},
    {"propagate_metadata", HK_OPT_BOOL, "false",
     "keep sharding metadata (op_name, source) and carry it along", NULL},
    {"allow_spmd_sharding_propagation_to_output", HK_OPT_BOOL_LIST, "[false]",
     "per output tuple element (one value: all): may propagation shard the entry root", NULL},
    {"allow_spmd_sharding_propagation_to_parameters", HK_OPT_BOOL_LIST, "[false]",
     "per entry parameter (one value: all): may propagation shard it", NULL},
    {"cse_prevention_only", HK_OPT_BOOL, "false",
     "only shard scalar broadcasts (marked for CSE prevention), revert everything else", NULL},
};

static const hk_pass_desc prop_desc = {
    .size = sizeof(hk_pass_desc),
    .name = "sharding-propagation",
    .summary = "completes a partially sharded module (XLA's ShardingPropagation, GSPMD)",
    .options = prop_options,
    .n_options = sizeof prop_options / sizeof prop_options[0],
    .create = prop_create,
};

static hk_status *prop_register(hk_registry *reg) { return hk_registry_add_pass(reg, &prop_desc); }

HK_PLUGIN("propagation", HK_VERSION_STRING, prop_register)
