/* stateful_rng.c - stateful-rng-spmd-partitioning: XLA's
 * StatefulRngSpmdPartitioner as a subclass of the stock spmd-partitioning
 * pass through its extension vtable (abi/hlokit/spmd.h), not a copy.
 *
 * The base pass is created by name from the registry; a derived vtable (a
 * copy of the base's with three slots overridden) is installed on it with
 * the base's set_vtable, so the base driver sees the overrides:
 *   preprocess_sharding   - an unannotated rng-get-and-update-state gets
 *                           {replicated}, then the base's PreprocessSharding;
 *   can_side_effecting_have_replicated_sharding
 *                         - true for rng-get-and-update-state, else the base;
 *   handle_instruction    - the visitor's HandleRngGetAndUpdateState: a
 *                           single-device state stays on its device (the
 *                           base's handling); a replicated one is cloned on
 *                           every partition (the state is a compile-time
 *                           constant, so every partition draws the same
 *                           numbers); any other sharding is an error.
 * The derived vtable lives in a per-instance block whose address the
 * overrides recover from self->vt (container of the embedded vtable), so
 * two instances never share state and no global is written.  Consequence:
 * a further subclass must not install a copy of this vtable on the pass
 * (our hooks would look for the block beside the copy); it should wrap the
 * pass and call its hooks through hk_pass_extension() instead. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"
#include "hlokit/spmd.h"

#define STATEFUL_NAME "stateful-rng-spmd-partitioning"

typedef struct stateful_ext {
  const hk_spmd_partitioner_vtable *base_vt;   /* the stock partitioner's */
  hk_spmd_partitioner_vtable vt;               /* derived: LAST, may grow */
} stateful_ext;

static stateful_ext *ext_of(const hk_pass *self) {
  const hk_spmd_partitioner_vtable *vt = (const hk_spmd_partitioner_vtable *)self->vt;
  return (stateful_ext *)((char *)vt - offsetof(stateful_ext, vt));
}

/* ---- overrides ------------------------------------------------------------- */

static hk_status *stateful_preprocess_sharding(hk_pass *self, hk_module *m,
                                               const hk_exec_threads *threads) {
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first; i; i = i->next)
      if (i->opcode == HK_OP_RNG_GET_AND_UPDATE_STATE && !i->sharding)
        hk_instr_set_sharding(i, hk_sharding_replicated(m));
  }
  return ext_of(self)->base_vt->preprocess_sharding(self, m, threads);
}

static bool stateful_can_side_effecting_have_replicated_sharding(hk_pass *self,
                                                                 const hk_instr *i) {
  if (i->opcode == HK_OP_RNG_GET_AND_UPDATE_STATE) return true;
  return ext_of(self)->base_vt->can_side_effecting_have_replicated_sharding(self, i);
}

static hk_status *handle_rng_get_and_update_state(hk_spmd_partition_ctx *ctx, hk_instr *orig) {
  const hk_sharding *s = orig->sharding;
  if (s && hk_sharding_unique_device(s) >= 0) return ctx->ops->default_handle(ctx, orig);
  if (!s || !hk_sharding_is_replicated(s)) {
    char *t = s ? hk_sharding_to_string(s) : NULL;
    hk_status *st = hk_status_prefix(
        hk_error(HK_FAILED_PRECONDITION, "rng-get-and-update-state '%s' must be replicated or on "
                 "one device, not %s", orig->name, t ? t : "unsharded"),
        "%s:%d: RET_CHECK failure (hlo->sharding().IsReplicated())", __FILE__, __LINE__);
    free(t);
    return st;
  }
  hk_instr *clone = hk_instr_clone(ctx->ops->builder(ctx), orig, orig->shape, 0, NULL, NULL);
  ctx->ops->set_partitioned(ctx, orig, clone, s);
  return NULL;
}

static hk_status *stateful_handle_instruction(hk_pass *self, hk_spmd_partition_ctx *ctx,
                                              hk_instr *orig) {
  if (orig->opcode == HK_OP_RNG_GET_AND_UPDATE_STATE)
    return handle_rng_get_and_update_state(ctx, orig);
  return ext_of(self)->base_vt->handle_instruction(self, ctx, orig);
}

/* Destroys the base object, then the derived block (read first). */
static void stateful_destroy(hk_pass *self) {
  stateful_ext *x = ext_of(self);
  x->base_vt->pass.destroy(self);
  free(x);
}

/* ---- options: XLA's constructor arguments, XLA's defaults ---------------------- */

static const hk_option_decl stateful_options[] = {
    {"num_partitions", HK_OPT_INT, "0", "partitions (0 = the module config's)", NULL},
    {"num_replicas", HK_OPT_INT, "0", "replicas (0 = the module config's)", NULL},
    {"threshold_for_windowed_einsum_mib", HK_OPT_INT, "100000",
     "operand size (MiB) above which a windowed einsum is considered", NULL},
    {"windowed_einsum_use_multiple_streams", HK_OPT_BOOL, "false",
     "unroll windowed-einsum loops (the base's unroll_windowed_einsum)", NULL},
    {"skip_checking_windowed_einsum_users", HK_OPT_BOOL, "false",
     "do not inspect users before a windowed einsum", NULL},
    {"disable_ag_rewrite_for_multiple_consumers", HK_OPT_BOOL, "false",
     "keep an all-gather with several consumers", NULL},
    {"total_bytes_windowed_einsum_threshold", HK_OPT_INT, "-1",
     "operand bytes above which windowed einsum is enabled (-1 = unset)", NULL},
};

/* The base pass's options: XLA's GetSpmdPartitionerOptions (module
 * signature changes allowed, the rest from ours). */
static void base_options(const hk_option_values *v, char *out, size_t cap) {
  snprintf(out, cap,
           "allow_module_signature_change=true num_partitions=%lld num_replicas=%lld "
           "threshold_for_windowed_einsum_mib=%lld unroll_windowed_einsum=%s "
           "skip_checking_windowed_einsum_users=%s disable_ag_rewrite_for_multiple_consumers=%s "
           "total_bytes_windowed_einsum_threshold=%lld",
           (long long)hk_opt_int(v, "num_partitions"), (long long)hk_opt_int(v, "num_replicas"),
           (long long)hk_opt_int(v, "threshold_for_windowed_einsum_mib"),
           hk_opt_bool(v, "windowed_einsum_use_multiple_streams") ? "true" : "false",
           hk_opt_bool(v, "skip_checking_windowed_einsum_users") ? "true" : "false",
           hk_opt_bool(v, "disable_ag_rewrite_for_multiple_consumers") ? "true" : "false",
           (long long)hk_opt_int(v, "total_bytes_windowed_einsum_threshold"));
}

/* ---- construction ------------------------------------------------------------- */

static hk_status *check_base(const hk_spmd_partitioner_vtable *bvt) {
  if (!bvt)
    return hk_error(HK_FAILED_PRECONDITION, STATEFUL_NAME ": 'spmd-partitioning' exposes no '%s' "
                    "extension", HK_SPMD_PARTITIONER_IFACE);
  if (bvt->ext_size < sizeof(hk_spmd_partitioner_vtable) || !bvt->set_vtable ||
      !bvt->preprocess_sharding || !bvt->handle_instruction ||
      !bvt->can_side_effecting_have_replicated_sharding)
    return hk_error(HK_FAILED_PRECONDITION, STATEFUL_NAME ": the spmd-partitioning extension is "
                    "older than this plugin (ext_size %zu < %zu)", bvt->ext_size,
                    sizeof(hk_spmd_partitioner_vtable));
  return NULL;
}

/* A derived vtable: every slot of the base's (all ext_size bytes, so
 * members newer than this plugin are kept), three hooks and the name
 * replaced. */
static stateful_ext *derive(const hk_spmd_partitioner_vtable *bvt) {
  size_t extra = bvt->ext_size > sizeof(hk_spmd_partitioner_vtable)
                     ? bvt->ext_size - sizeof(hk_spmd_partitioner_vtable)
                     : 0;
  stateful_ext *x = calloc(1, sizeof *x + extra);
  if (!x) return NULL;
  x->base_vt = bvt;
  memcpy(&x->vt, bvt, bvt->ext_size);
  x->vt.pass.name = STATEFUL_NAME;
  x->vt.pass.destroy = stateful_destroy;
  x->vt.preprocess_sharding = stateful_preprocess_sharding;
  x->vt.can_side_effecting_have_replicated_sharding =
      stateful_can_side_effecting_have_replicated_sharding;
  x->vt.handle_instruction = stateful_handle_instruction;
  return x;
}

static hk_pass *stateful_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  char text[512];
  base_options(opts, text, sizeof text);
  hk_pass *base = hk_registry_create_pass(reg, "spmd-partitioning", text, err);
  if (!base) {
    *err = hk_status_prefix(*err, STATEFUL_NAME ": creating its base");
    return NULL;
  }
  const hk_spmd_partitioner_vtable *bvt = hk_pass_extension(base, HK_SPMD_PARTITIONER_IFACE);
  stateful_ext *x = NULL;
  *err = check_base(bvt);
  if (!*err && !(x = derive(bvt))) *err = hk_error(HK_INTERNAL, STATEFUL_NAME ": out of memory");
  if (*err) {
    hk_pass_destroy(base);
    return NULL;
  }
  bvt->set_vtable(base, &x->vt);
  return base;
}

static const hk_pass_desc stateful_desc = {
    .size = sizeof(hk_pass_desc),
    .name = STATEFUL_NAME,
    .summary = "StatefulRngSpmdPartitioner: spmd-partitioning that partitions "
               "rng-get-and-update-state (windowed-einsum threshold 100000, signature changes allowed)",
    .options = stateful_options,
    .n_options = sizeof stateful_options / sizeof stateful_options[0],
    .create = stateful_create,
};

static hk_status *stateful_register(hk_registry *reg) {
  return hk_registry_add_pass(reg, &stateful_desc);
}

HK_PLUGIN("stateful_rng", HK_VERSION_STRING, stateful_register)
