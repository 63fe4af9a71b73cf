/* variant_dot_allgather.c - a third-party partitioner variant, built against
 * abi/ alone: the pass `spmd-dot-allgather` is the stock spmd-partitioning
 * with ONE handler overridden: every dot all-gathers its operands (reshards
 * them to replicated), computes the whole product on every partition, and
 * lets its users slice what they need.  Correct, simple, and communication-
 * hungry: compare it with the stock partitioner using `hlokit ab`.
 *
 * How subclassing works (abi/hlokit/pass.h, spmd.h):
 *   1. create the base pass by name:  hk_registry_create_pass(reg,
 *      "spmd-partitioning", options, &err);
 *   2. read its extension vtable:     hk_pass_extension(base,
 *      HK_SPMD_PARTITIONER_IFACE);
 *   3. copy it, override a slot (here handle_instruction), and install the
 *      copy on the base with set_vtable.  The base driver calls every hook
 *      through the installed vtable, so it runs our handler; we call the
 *      base's saved handler for everything that is not a dot. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"
#include "hlokit/spmd.h"

#define VARIANT_NAME "spmd-dot-allgather"

/* Per-instance block: the base's vtable and our derived copy (last, so a
 * base vtable newer than this file is copied whole). */
typedef struct variant {
  const hk_spmd_partitioner_vtable *base_vt;
  hk_spmd_partitioner_vtable vt;
} variant;

/* Our block, found from the vtable installed on the base pass. */
static variant *variant_of(const hk_pass *self) {
  return (variant *)((char *)self->vt - offsetof(variant, vt));
}

static bool is_manual(const hk_sharding *s) { return s && hk_sharding_is_manual(s); }

/* The override: dot = all-gather both operands, multiply locally. */
static hk_status *handle_dot(hk_spmd_partition_ctx *ctx, hk_instr *dot) {
  hk_module *m = ctx->ops->module(ctx);
  const hk_sharding *rep = hk_sharding_replicated(m);
  hk_instr *ops[2];
  for (int k = 0; k < 2; k++) {
    hk_status *err = NULL;
    ops[k] = ctx->ops->operand(ctx, dot->operands[k], rep, &err);   /* all-gather */
    if (!ops[k]) return hk_status_prefix(err, VARIANT_NAME ": operand %d of '%s'", k, dot->name);
  }
  hk_instr *full = hk_instr_clone(ctx->ops->builder(ctx), dot, dot->shape, 2, ops, NULL);
  ctx->ops->set_partitioned(ctx, dot, full, rep);   /* users reshard from replicated */
  return NULL;
}

static hk_status *variant_handle_instruction(hk_pass *self, hk_spmd_partition_ctx *ctx,
                                             hk_instr *orig) {
  bool plain_dot = orig->opcode == HK_OP_DOT && orig->n_operands == 2 &&
                   hk_shape_is_array(orig->shape) && !is_manual(orig->sharding) &&
                   !is_manual(orig->operands[0]->sharding) && !is_manual(orig->operands[1]->sharding);
  if (plain_dot) return handle_dot(ctx, orig);
  return variant_of(self)->base_vt->handle_instruction(self, ctx, orig);   /* call the base */
}

static void variant_destroy(hk_pass *self) {
  variant *v = variant_of(self);
  v->base_vt->pass.destroy(self);
  free(v);
}

/* ---- creating the subclass ------------------------------------------------- */

static hk_pass *variant_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  const char *base_opts = hk_opt_bool(opts, "allow_module_signature_change")
                              ? "allow_module_signature_change=true" : NULL;
  hk_pass *base = hk_registry_create_pass(reg, "spmd-partitioning", base_opts, err);
  if (!base) return NULL;
  const hk_spmd_partitioner_vtable *bvt = hk_pass_extension(base, HK_SPMD_PARTITIONER_IFACE);
  if (!bvt || bvt->ext_size < sizeof(hk_spmd_partitioner_vtable)) {
    hk_pass_destroy(base);
    *err = hk_error(HK_FAILED_PRECONDITION, VARIANT_NAME ": spmd-partitioning has no usable "
                    "extension vtable");
    return NULL;
  }
  size_t extra = bvt->ext_size - sizeof(hk_spmd_partitioner_vtable);
  variant *v = calloc(1, sizeof *v + extra);
  if (!v) {
    hk_pass_destroy(base);
    *err = hk_error(HK_INTERNAL, VARIANT_NAME ": out of memory");
    return NULL;
  }
  v->base_vt = bvt;
  memcpy(&v->vt, bvt, bvt->ext_size);                 /* inherit every slot ... */
  v->vt.pass.name = VARIANT_NAME;
  v->vt.pass.destroy = variant_destroy;
  v->vt.handle_instruction = variant_handle_instruction;   /* ... override one */
  bvt->set_vtable(base, &v->vt);
  return base;
}

static const hk_option_decl variant_options[] = {
    {"allow_module_signature_change", HK_OPT_BOOL, "false",
     "entry parameters and root may be tiled (passed to the base, same default)", NULL},
};

static const hk_pass_desc variant_desc = {
    .size = sizeof(hk_pass_desc),
    .name = VARIANT_NAME,
    .summary = "example variant of spmd-partitioning: dots all-gather their operands",
    .options = variant_options,
    .n_options = 1,
    .create = variant_create,
};

static hk_status *variant_register(hk_registry *reg) { return hk_registry_add_pass(reg, &variant_desc); }

HK_PLUGIN("variant_dot_allgather", "1.0", variant_register)
