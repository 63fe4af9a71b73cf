/* spmd.h - the SPMD partitioner's public extension ABI: options POD,
 * collective-ops creator, extension vtable and the partition context that
 * custom-call partitioners and derived partitioners use.
 *
 * The pass registers as "spmd-partitioning" (plugin/spmd).  A variant
 * (e.g. stateful-rng-spmd-partitioning) is built by another plugin as:
 *
 *     hk_pass *base = hk_registry_create_pass(reg, "spmd-partitioning", opts, &err);
 *     const hk_spmd_partitioner_vtable *bvt =
 *         hk_pass_extension(base, HK_SPMD_PARTITIONER_IFACE);
 *     static hk_spmd_partitioner_vtable my_vt;
 *     my_vt = *bvt;                              // inherit every slot
 *     my_vt.handle_instruction = my_handler;     // override some
 *     bvt->set_vtable(base, &my_vt);             // install on the instance
 *
 * The base's run() dispatches every hook through the pass's CURRENT vtable
 * (self->vt cast to hk_spmd_partitioner_vtable), so overrides are seen by
 * the base driver.  A hook override calls the base hook it saved for the
 * cases it does not handle ("call the base"). */
#ifndef HLOKIT_SPMD_H
#define HLOKIT_SPMD_H

#include "export.h"

#include "pass.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

#define HK_SPMD_PARTITIONER_IFACE "hlokit.spmd-partitioner"

/* XLA's GatherScatterPartitioningMethod. */
typedef enum hk_spmd_gs_method {
  HK_SPMD_GS_INDEX_PARALLEL,
  HK_SPMD_GS_EXPLICIT_BATCH,
  HK_SPMD_GS_OPERAND_PASSTHROUGH,
  HK_SPMD_GS_TRIVIAL_SLICED_OPERAND,
  HK_SPMD_GS_INDEX_PASSTHROUGH,
} hk_spmd_gs_method;

/* XLA's SpmdPartitionerOptions, with XLA's defaults
 * (hk_spmd_options_default()).  Every field is a pass option of the same
 * name. */
typedef struct hk_spmd_options {
  bool conv_halo_exchange_always_on_lhs;          /* true */
  int64_t report_instruction_count;               /* 5 */
  int64_t threshold_for_windowed_einsum_mib;      /* 256 */
  bool unroll_windowed_einsum;                    /* false */
  bool bidirectional_windowed_einsum;             /* false */
  bool allow_module_signature_change;             /* false */
  bool cache_all_gather;                          /* true */
  bool choose_faster_windowed_einsum_over_mem;    /* false */
  bool bidirectional_decomposed_all_gather;       /* false */
  bool skip_checking_windowed_einsum_users;       /* false */
  bool enable_windowed_einsum_for_all_gather;     /* true */
  bool enable_windowed_einsum_for_reduce_scatter; /* true */
  bool disable_ag_rewrite_for_multiple_consumers; /* false */
  hk_spmd_gs_method gather_partition_method;      /* kIndexParallel */
  hk_spmd_gs_method scatter_partition_method;     /* kIndexParallel */
  /* std::optional<int64_t>: unset by default. */
  bool has_total_bytes_windowed_einsum_threshold;
  int64_t total_bytes_windowed_einsum_threshold;
} hk_spmd_options;

/* ---- the collective-ops creator (XLA's SPMDCollectiveOpsCreator) ----------
 * Each creator appends a new instruction to computation c and returns it.
 * Device groups are partition ids: n_groups groups of group_size ids each,
 * one after another.  Every collective takes a fresh channel id from
 * *next_channel_id (post-incremented).  state is the table's own. */
typedef struct hk_spmd_collective_ops {
  size_t size;                     /* sizeof as built */
  void *state;
  hk_instr *(*partition_id)(void *state, hk_computation *c);
  hk_instr *(*all_reduce)(void *state, hk_computation *c, hk_instr *operand,
                          hk_computation *reducer, int64_t n_groups,
                          int64_t group_size, const int64_t *groups,
                          int64_t *next_channel_id);
  /* Concatenates the group members' operands along dim (result shape
   * given). */
  hk_instr *(*all_gather)(void *state, hk_computation *c, hk_instr *operand,
                          const hk_shape *result, int64_t dim, int64_t n_groups,
                          int64_t group_size, const int64_t *groups,
                          int64_t *next_channel_id);
  /* Array all-to-all: splits `split_dim` into group_size pieces, piece j
   * going to member j, received pieces concatenated along concat_dim. */
  hk_instr *(*all_to_all)(void *state, hk_computation *c, hk_instr *operand,
                          int64_t split_dim, int64_t concat_dim, int64_t n_groups,
                          int64_t group_size, const int64_t *groups,
                          int64_t *next_channel_id);
  hk_instr *(*collective_permute)(void *state, hk_computation *c, hk_instr *operand,
                                  int64_t n_pairs, const hk_pair *pairs,
                                  int64_t *next_channel_id);
  hk_instr *(*reduce_scatter)(void *state, hk_computation *c, hk_instr *operand,
                              hk_computation *reducer, const hk_shape *result,
                              int64_t dim, int64_t n_groups, int64_t group_size,
                              const int64_t *groups, int64_t *next_channel_id);
} hk_spmd_collective_ops;

/* ---- the partition context ------------------------------------------------
 * One per computation being partitioned (XLA's SpmdPartitioningVisitor).  A
 * custom-call partitioner or a derived visitor reads the partitioned form of
 * an operand and records the partitioned form of the instruction it
 * handles. */
/* Plugins are loaded RTLD_LOCAL, so the context is reached through a table
 * of functions (its first member), never through exported symbols. */
typedef struct hk_spmd_ctx_ops {
  size_t size;                     /* sizeof as built */
  hk_module *(*module)(hk_spmd_partition_ctx *ctx);
  /* The new (per-partition) computation instructions are built into. */
  hk_computation *(*builder)(hk_spmd_partition_ctx *ctx);
  int64_t (*num_partitions)(hk_spmd_partition_ctx *ctx);
  const hk_spmd_options *(*options)(hk_spmd_partition_ctx *ctx);
  const hk_spmd_collective_ops *(*collectives)(hk_spmd_partition_ctx *ctx);
  int64_t *(*next_channel_id)(hk_spmd_partition_ctx *ctx);
  /* The partitioned form of an (original) instruction, resharded to
   * `sharding` (NULL: as it is); NULL with *err set on failure. */
  hk_instr *(*operand)(hk_spmd_partition_ctx *ctx, hk_instr *orig,
                       const hk_sharding *sharding, hk_status **err);
  /* Records `local` as the partitioned form of orig, with sharding s. */
  void (*set_partitioned)(hk_spmd_partition_ctx *ctx, hk_instr *orig,
                          hk_instr *local, const hk_sharding *s);
  /* The base visitor's handling of orig. */
  hk_status *(*default_handle)(hk_spmd_partition_ctx *ctx, hk_instr *orig);
} hk_spmd_ctx_ops;

struct hk_spmd_partition_ctx {
  const hk_spmd_ctx_ops *ops;      /* FIRST; the rest is private */
};

/* ---- the extension vtable ---------------------------------------------- */
typedef struct hk_spmd_partitioner_vtable {
  hk_pass_vtable pass;             /* FIRST: it is a pass vtable too */
  size_t ext_size;                 /* sizeof(hk_spmd_partitioner_vtable) */
  /* The partitioner's options and partition counts (read-only view). */
  const hk_spmd_options *(*options)(hk_pass *self);
  /* Installs a derived vtable on a base partitioner instance. */
  void (*set_vtable)(hk_pass *self, const struct hk_spmd_partitioner_vtable *vt);
  /* Phase A: canonicalise and validate shardings (seed's PreprocessSharding). */
  hk_status *(*preprocess_sharding)(hk_pass *self, hk_module *m,
                                    const hk_exec_threads *threads);
  bool (*can_side_effecting_have_replicated_sharding)(hk_pass *self, const hk_instr *i);
  /* XLA's CreateVisitor, reduced to its effect: handles one instruction of
   * the computation being partitioned (the base calls
   * hk_spmd_ctx_default_handle). */
  hk_status *(*handle_instruction)(hk_pass *self, hk_spmd_partition_ctx *ctx, hk_instr *orig);
  /* Builds the collective-ops creator for (num_partitions, num_replicas). */
  void (*collective_ops)(hk_pass *self, int64_t num_partitions, int64_t num_replicas,
                         hk_spmd_collective_ops *out);
  /* Cost hooks: bytes a collective moves per device, bytes an instruction
   * keeps live per device. */
  int64_t (*communication_cost)(hk_pass *self, const hk_instr *collective);
  int64_t (*memory_cost)(hk_pass *self, const hk_instr *i);
  /* Appended after memory_cost (ABI minor assigned at merge; read only
   * when ext_size covers it).  The price of a collective the partitioner
   * is weighing before it builds one: `kind` an hk_collective_kind
   * (eval.h), operand_bytes what each device puts in, group_size the
   * devices per group.  The reshard engine (all-to-alls against
   * all-gather + slice) and the dot handler (which operand to reshard)
   * pick the cheaper plan by it, so a variant overriding it changes their
   * choices.  The base prices the bytes a device receives: all-gather
   * (g-1)x, all-reduce 2(g-1)/g x, reduce-scatter and all-to-all (g-1)/g x,
   * collective-permute x.  ABI 1.4 (read when ext_size covers it). */
  int64_t (*planned_collective_cost)(hk_pass *self, int kind, int64_t operand_bytes,
                                     int64_t group_size);
} hk_spmd_partitioner_vtable;

/* The windowed-einsum gate (seed: should_enable_windowed_einsum_with_threshold):
 * false when total_bytes_windowed_einsum_threshold is unset; false ("Overhead
 * outweighs benefit. Skipping windowed einsum") when the operands' bytes are
 * at most that threshold; true otherwise.  `threshold` is the caller's MiB
 * threshold and is not part of the gate.  Implemented in the plugin;
 * reachable as a static inline for other plugins. */
static inline bool hk_spmd_should_enable_windowed_einsum_with_threshold(
    const hk_spmd_options *o, const hk_instr *lhs, const hk_instr *rhs, int64_t threshold) {
  (void)threshold;
  if (!o->has_total_bytes_windowed_einsum_threshold) return false;
  int64_t operand_size = hk_shape_byte_size(lhs->shape) + hk_shape_byte_size(rhs->shape);
  if (operand_size <= o->total_bytes_windowed_einsum_threshold) return false;
  return true;
}

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
