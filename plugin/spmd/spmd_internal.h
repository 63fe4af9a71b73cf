/* spmd_internal.h - private types of the SPMD partitioner plugin: the pass
 * object, the per-computation visitor, partitioned values and helpers. */
#ifndef HK_SPMD_INTERNAL_H
#define HK_SPMD_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"
#include "hlokit/spmd.h"

/* A per-run memo of sharding algebra (memo.c). */
typedef struct spmd_memo {
  struct spmd_memo_slot *slots;
  size_t mask, n;
} spmd_memo;

/* The phase clock of a run (phase_times.c). */
typedef struct spmd_phase_clock {
  bool on;       /* HLOKIT_SPMD_TIMES is set */
  double last;      /* when the previous phase ended (wall) */
  double last_cpu;  /* ... and on the process CPU clock */
} spmd_phase_clock;

void spmd_phase_clock_start(spmd_phase_clock *c);
void spmd_phase_done(spmd_phase_clock *c, const char *phase);

/* The entry's post order made on a second thread (early_order.c). */
typedef struct spmd_early_order {
  const hk_computation *c;
  uint64_t at;                     /* hk_module_changes when it was started */
  pthread_t thread;
  bool running;
  hk_instr **order;                /* malloc'ed; NULL when none */
  int64_t n;
} spmd_early_order;

/* Starts computing c's post order on a second thread, when c is big and a
 * second core can run it; a no-op otherwise. */
void spmd_early_order_start(spmd_early_order *e, const hk_computation *c);
/* Waits for the thread, if one runs. */
void spmd_early_order_join(spmd_early_order *e);
/* The order made for c (the caller frees it), or NULL: none was made, or
 * it was dropped. */
hk_instr **spmd_early_order_take(spmd_early_order *e, const hk_computation *c, int64_t *n);
/* Waits for the thread and throws its order away. */
void spmd_early_order_drop(spmd_early_order *e);
/* Drops the order if the module's graph was edited since it was started
 * (hk_module_changes moved): called before the partitioner edits it. */
void spmd_early_order_drop_if_stale(spmd_early_order *e);

/* The pass object (SpmdPartitioner). */
typedef struct spmd_partitioner {
  hk_pass pass;                    /* FIRST: vt is a hk_spmd_partitioner_vtable */
  hk_spmd_options options;
  int64_t num_partitions_override; /* 0 = from the module config */
  int64_t num_replicas_override;
  hk_registry *reg;
  /* Per-run state. */
  int64_t num_partitions, num_replicas;
  int64_t next_channel_id;
  hk_spmd_collective_ops collectives;
  int64_t full_rematerializations;
  hk_buf remat_notes;              /* one line per full rematerialization */
  hk_buf fallback_notes;           /* one line per replicated fallback */
  int64_t replicated_fallbacks;     /* instructions the fallback partitioned */
  int64_t collectives_emitted;
  /* Replica groups made this run, shared by every collective over the
   * same groups (collectives.c; emptied when the run starts). */
  const hk_replica_groups *group_cache[16];
  int32_t n_group_cache;
  spmd_memo memo;                  /* emptied when a run starts */
  hk_computation **new_comps;      /* partitioned computations ... */
  hk_computation **orig_comps;     /* ... and the originals they replace */
  int64_t n_new_comps, cap_new_comps;
  char *before_report;             /* malloc'ed */
  char *after_report;
  spmd_phase_clock clock;
  spmd_early_order early_order;    /* the entry's order, made while preprocessing */
  /* What the base PreprocessSharding walk saw on the way, so later phases
   * need not walk again: facts of the graph, true while the module's
   * change count (hk_module_changes) is the one they were taken at. */
  struct spmd_walk_notes {
    bool taken;                    /* this run's walk took them */
    uint64_t at;                   /* hk_module_changes(m) then */
    int64_t next_channel_id;       /* past every channel id in the module */
    bool control_calls;            /* some instruction calls in a control-flow context */
    bool *has_candidate;           /* by computation index: PreprocessHlos work */
    int32_t n;
  } notes;
} spmd_partitioner;

static inline const hk_spmd_partitioner_vtable *spmd_vt(const spmd_partitioner *p) {
  return (const hk_spmd_partitioner_vtable *)p->pass.vt;
}

/* Whether the sharding walk's notes still describe m: taken this run and
 * nothing has edited the graph since. */
static inline bool spmd_notes_hold(const spmd_partitioner *p, const hk_module *m) {
  return p->notes.taken && p->notes.at == hk_module_changes(m) &&
         p->notes.n == m->n_computations;
}

/* A cached reshard of a partitioned value. */
typedef struct spmd_cache_entry {
  const hk_sharding *sharding;
  hk_instr *hlo;
  struct spmd_cache_entry *next;
} spmd_cache_entry;
/* Frees a chain of cached reshards. */
void spmd_free_cache(spmd_cache_entry *e);

/* PartitionedHlo: an original instruction's per-partition form. */
typedef struct spmd_value {
  const hk_instr *orig;
  hk_instr *hlo;                   /* in the new computation */
  const hk_sharding *sharding;
  const hk_shape *base_shape;      /* global shape */
  spmd_cache_entry *cache;
} spmd_value;

/* The visitor over one computation. */
typedef struct spmd_visitor {
  hk_spmd_partition_ctx ctx;       /* FIRST: ctx->ops */
  spmd_partitioner *p;
  hk_module *m;
  hk_computation *orig, *comp;
  /* orig instr -> value: the values live in blocks that never move, and
   * orig->scratch points at its value (checked before use). */
  struct spmd_value_block *values;
  const hk_instr *named;           /* the last original whose name was taken */
  hk_instr *partition_id;          /* cached per computation */
  hk_instr *zero_index;            /* s32[] 0, the start of unsliced dims */
  /* The partition's tile offsets made in this computation (reshard.c). */
  struct spmd_offset_entry {
    const hk_sharding *sharding;
    int64_t dim, dim_size;
    hk_instr *offset;
  } offsets[8];
  int32_t n_offsets;
  hk_call_graph *cg;
} spmd_visitor;

/* ---- options.c ---- */
#define SPMD_N_OPTIONS 18
extern const hk_option_decl spmd_option_decls[SPMD_N_OPTIONS];
extern const int32_t spmd_n_option_decls;
hk_spmd_options spmd_options_default(void);
void spmd_options_from_values(const hk_option_values *v, hk_spmd_options *o);

/* ---- collectives.c ---- */
void spmd_default_collective_ops(hk_pass *self, int64_t num_partitions, int64_t num_replicas,
                                 hk_spmd_collective_ops *out);
hk_computation *spmd_reducer(hk_module *m, hk_prim elem, hk_opcode op);
int64_t spmd_communication_cost(hk_pass *self, const hk_instr *collective);
int64_t spmd_memory_cost(hk_pass *self, const hk_instr *i);
int64_t spmd_planned_collective_cost(hk_pass *self, int kind, int64_t operand_bytes,
                                     int64_t group_size);
/* The planned_collective_cost hook of p's current vtable (the base's when
 * the vtable predates it). */
int64_t spmd_plan_cost(const spmd_partitioner *p, int kind, int64_t operand_bytes,
                       int64_t group_size);

/* ---- memo.c: the sharding algebra the partitioner repeats per
 * instruction, memoized per run (interned shardings: keyed by pointer) ---- */
void spmd_memo_clear(spmd_memo *t);
/* The memo for callers' own pure functions of interned pointers and up to
 * 48 integers: `kind` (0..63) names the function; values are not owned. */
enum { SPMD_MEMO_DOT_PLAN = 0 };
bool spmd_memo_find(spmd_visitor *v, int kind, const void *a, const void *b, int32_t n,
                    const int64_t *args, const void **value);
void spmd_memo_put(spmd_visitor *v, int kind, const void *a, const void *b, int32_t n,
                   const int64_t *args, const void *value);
const hk_sharding *spmd_canonical(spmd_partitioner *p, hk_module *m, const hk_sharding *s);
/* hk_sharding_validate against num_partitions, each (sharding, shape) once. */
hk_status *spmd_validate_sharding(spmd_partitioner *p, const hk_sharding *s,
                                  const hk_shape *shape);
const hk_sharding *spmd_replicate_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                       const int64_t *dims);
const hk_sharding *spmd_remove_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                    const int64_t *dims);
const hk_sharding *spmd_insert_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                    const int64_t *at);
/* hk_sharding_device_groups(s, n, dims) as {group_size, ids...} (arena);
 * NULL if s is not tiled. */
const int64_t *spmd_device_groups(spmd_visitor *v, const hk_sharding *s, int n,
                                  const int64_t *dims);
/* spmd_regroup, memoized. */
const hk_sharding *spmd_regroup_memo(spmd_visitor *v, const hk_sharding *s, int n_new,
                                     const int *group_sizes, const int *const *groups,
                                     bool last_repl);

/* ---- visitor.c ---- */
spmd_value *spmd_lookup(spmd_visitor *v, const hk_instr *orig);
spmd_value *spmd_set(spmd_visitor *v, const hk_instr *orig, hk_instr *hlo, const hk_sharding *s);
/* hk_instr_clone of orig into the partitioned computation.  The first
 * instruction made for orig (before orig has a partitioned form) takes
 * orig's name, so names survive partitioning at one name-map probe; later
 * ones get fresh names. */
hk_instr *spmd_clone(spmd_visitor *v, hk_instr *orig, const hk_shape *shape, int n_operands,
                     hk_instr *const *operands);
hk_status *spmd_partition_computation(spmd_partitioner *p, hk_computation *orig,
                                      int n_params, const hk_sharding *const *param_shardings,
                                      const hk_sharding *root_sharding, hk_call_graph *cg,
                                      hk_computation **out);
hk_status *spmd_default_handle(spmd_visitor *v, hk_instr *orig);
hk_status *spmd_handle_dispatch(hk_spmd_partition_ctx *ctx, hk_instr *orig);

/* ---- handlers.c ---- */
hk_status *spmd_handle_op(spmd_visitor *v, hk_instr *orig);
hk_status *spmd_handle_fallback(spmd_visitor *v, hk_instr *orig);
/* Operands of the output's rank take its sharding, scalars replicated. */
hk_status *spmd_handle_elementwise(spmd_visitor *v, hk_instr *orig);

/* ---- custom_call.c, manual.c, single_device.c, outfeed.c ---- */
hk_status *spmd_handle_custom_call(spmd_visitor *v, hk_instr *orig);
/* An instruction sharded {manual}: cloned as written, manual operands as
 * they are, others replicated whole. */
hk_status *spmd_handle_manual(spmd_visitor *v, hk_instr *orig);
/* An all-reduce in a manual subgroup whose replica groups mix data tiles
 * is an error (NULL otherwise). */
hk_status *spmd_check_subgroup_manual_all_reduce(const hk_instr *orig, const hk_sharding *s);
/* Sharded on one device: operands moved there, the op cloned. */
hk_status *spmd_handle_on_device(spmd_visitor *v, hk_instr *orig);
/* The same run in a conditional on that partition only (side effects). */
hk_status *spmd_handle_single_device(spmd_visitor *v, hk_instr *orig);
/* Zeros of shape (tuples of zeros, after-all for tokens), in c. */
hk_instr *spmd_zero_of(hk_computation *c, const hk_shape *shape);
hk_status *spmd_handle_outfeed(spmd_visitor *v, hk_instr *orig);

/* ---- dot.c ---- */
hk_status *spmd_handle_dot(spmd_visitor *v, hk_instr *orig, bool *handled);
hk_status *spmd_handle_conv(spmd_visitor *v, hk_instr *orig, bool *handled);

/* ---- windowed_einsum.c ---- */
/* A dot computed by a loop around a ring of devices (see the file). */
typedef enum spmd_window_kind {
  SPMD_WINDOW_GATHER,              /* operand `side` rotates; dim -> result dim out_dim */
  SPMD_WINDOW_CONTRACT,            /* operand `side` rotates along contracting dims win_dims */
  SPMD_WINDOW_SCATTER,             /* the result rotates; operand `side`'s dim -> out_dim */
} spmd_window_kind;
typedef struct spmd_windowed_dot {
  spmd_window_kind kind;
  int side, dim, out_dim;
  hk_instr *lhs, *rhs;                  /* local operands */
  const hk_sharding *ring;              /* its tiles along ring_dim order the ring */
  int ring_dim;
  int64_t ring_size;                    /* tiles along ring_dim: the loop's trip count */
  const hk_sharding *out;               /* the result's sharding */
  /* Scatter: the operands' shardings and their (partnered) contracting
   * dims, for zeroing uneven padding. */
  const hk_sharding *lhs_sharding, *rhs_sharding;
  int lhs_contract, rhs_contract;
  /* Scatter: the ring runs along n_win dims of the result (win_out, split
   * win_parts ways, row-major; their product is ring_size), the dims
   * win_dims of operand `side` they come from.  Contract: the rotating
   * operand's contracting dims win_dims (split win_parts ways, row-major
   * along the ring), win_other their partners in the kept operand;
   * rot_sharding the rotating operand's sharding (its padding zeroed). */
  int n_win;
  int win_dims[HK_MAX_RANK], win_out[HK_MAX_RANK], win_other[HK_MAX_RANK];
  int64_t win_parts[HK_MAX_RANK];
  const hk_sharding *rot_sharding;
  /* Called on each local dot/convolution the loop builds (a convolution's
   * windows refitted to its local operands); NULL: nothing to do. */
  void (*fit_local)(spmd_visitor *v, hk_instr *local, const void *ctx);
  const void *fit_ctx;
} spmd_windowed_dot;
/* The loop; returns the partitioned result (local shape under w->out). */
hk_instr *spmd_emit_windowed_dot(spmd_visitor *v, hk_instr *orig, const spmd_windowed_dot *w);

/* ---- creation.c, reduce.c ---- */
hk_status *spmd_handle_iota(spmd_visitor *v, hk_instr *orig);
hk_status *spmd_handle_constant(spmd_visitor *v, hk_instr *orig);
hk_status *spmd_handle_reduce(spmd_visitor *v, hk_instr *orig);
/* ---- sort_topk.c: a sort(values, iota) read as its first k; *handled
 * false (nothing built) when orig is not one ---- */
hk_status *spmd_handle_sort_topk(spmd_visitor *v, hk_instr *orig, bool *handled);
/* ---- topk.c ---- */
hk_status *spmd_handle_topk(spmd_visitor *v, hk_instr *orig);

/* ---- control.c ---- */
hk_status *spmd_handle_control_flow(spmd_visitor *v, hk_instr *orig);

/* ---- rebuild.c ---- */
/* Whether x (an original instruction) is iotas, constants and replicated
 * values under a few pure ops, and small enough to build whole. */
bool spmd_rebuildable(spmd_visitor *v, const hk_instr *x);
/* x (spmd_rebuildable) computed whole in the partitioned computation. */
hk_instr *spmd_rebuild(spmd_visitor *v, const hk_instr *x);
/* val built under `to` by local ops instead of resharded, when its
 * original is a pure function of replicated inputs and the reshard would
 * move bytes; false (nothing built that is used) otherwise. */
bool spmd_rebuild_as(spmd_visitor *v, spmd_value *val, const hk_sharding *to, hk_instr **out);
/* spmd_reshard's price for val to `to`: 0 where it would rebuild. */
int64_t spmd_value_reshard_cost(spmd_visitor *v, const spmd_value *val, const hk_sharding *to);

/* ---- reshard.c ---- */
hk_status *spmd_reshard(spmd_visitor *v, spmd_value *val, const hk_sharding *target,
                        hk_instr **out);
/* Local (tile) shape of global shape under s. */
const hk_shape *spmd_local_shape(spmd_visitor *v, const hk_sharding *s, const hk_shape *global);
hk_instr *spmd_partition_id(spmd_visitor *v);
/* The offset (s32[]) of this partition's tile along dim d of global shape
 * gs under tiled sharding s, made once per computation. */
hk_instr *spmd_tile_offset(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d);
/* A per-partition s32 scalar: values[this partition's tile index along
 * dim d of s], read from a constant table by partition id. */
hk_instr *spmd_per_tile_scalar(spmd_visitor *v, const hk_sharding *s, int64_t d,
                               const int64_t *values);
/* The same in computation c (which may be a new loop body). */
hk_instr *spmd_per_tile_scalar_in(spmd_visitor *v, hk_computation *c, const hk_sharding *s,
                                  int64_t d, const int64_t *values);
/* Records an involuntary full rematerialization (counted, and named in the
 * after-report): the value `value` (local instruction) made whole by the
 * all-gather `whole` (or what holds it) while going from `from` to `to`;
 * gs is its global shape (the bytes each device then holds). */
void spmd_note_full_remat(spmd_visitor *v, const hk_instr *value, const hk_instr *whole,
                          const hk_shape *gs, const hk_sharding *from, const hk_sharding *to);
/* The price (by the planned_collective_cost hook) of the collectives the
 * reshard engine would build to take an array of global shape gs from
 * `from` to `to`; nothing is built. */
int64_t spmd_reshard_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                          const hk_sharding *to);
/* Reshards a local value h (global shape gs) from sharding `from` to `to`. */
hk_status *spmd_reshard_hlo(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to, hk_instr **out);
/* Element k of a tuple-shaped instruction, in c. */
hk_instr *spmd_gte(hk_computation *c, hk_instr *tuple, int64_t k);
hk_instr *spmd_constant_scalar(spmd_visitor *v, hk_prim elem, double value);
hk_instr *spmd_zeros(spmd_visitor *v, const hk_shape *shape);
/* h padded with zeros at the high end of every dim up to `dims`. */
hk_instr *spmd_pad_to(spmd_visitor *v, hk_instr *h, const int64_t *dims);
/* x (a local tile under s of global shape gs) with the elements past the
 * global bound of dim d (the padding of an uneven tile) replaced by `fill`
 * (a scalar). */
hk_instr *spmd_mask_padding(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d,
                            hk_instr *x, hk_instr *fill);
/* spmd_mask_padding with zero, when dim d is split unevenly (x itself
 * otherwise): what a contraction over d must not add. */
hk_instr *spmd_zero_padding(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d,
                            hk_instr *x);
/* Groups (partition ids) of devices of s differing only in the listed
 * tile dims; *group_size set; malloc'ed. */
int64_t *spmd_groups(spmd_visitor *v, const hk_sharding *s, int n, const int64_t *dims,
                     int64_t *n_groups, int64_t *group_size);
/* Sharding used for a value whose sharding annotation is absent. */
const hk_sharding *spmd_sharding_of(spmd_visitor *v, const hk_instr *i);
bool spmd_is_subgroup_manual(const hk_sharding *s);
/* The one dim of a rank-`rank` value that s splits, -1 when none or several. */
int spmd_only_tiled_dim(const hk_sharding *s, int rank);
/* Devices per manual group (product of manual subgroup dims); -1 for
 * {manual}, 1 without manual subgroups. */
int64_t spmd_manual_factor(const hk_sharding *s);
/* {replicated}, or replicated within the manual groups of a subgroup-manual
 * sharding (tuple-aware). */
const hk_sharding *spmd_replicated_like(spmd_visitor *v, const hk_sharding *s,
                                        const hk_shape *shape);
/* Rebuilds a tiled sharding whose tile array is s's array with its dims
 * regrouped: new dim j = product of src dims groups[j][0..sizes[j]) in that
 * order (every src dim in exactly one group).  last_repl: the last new dim
 * is a replication dim. */
const hk_sharding *spmd_regroup(hk_module *m, const hk_sharding *s, int n_new,
                                const int *group_sizes, const int *const *groups,
                                bool last_repl);

/* ---- preprocess_hlos.c (phase A, after PreprocessSharding) ---- */
hk_status *spmd_preprocess_hlos(spmd_partitioner *p, hk_module *m, const hk_exec_threads *threads);
/* Whether i (its sharding canonical) is one PreprocessHlos may rewrite. */
bool spmd_preprocess_candidate(const hk_instr *i);
/* The rotate-right custom call PreprocessHlos creates; backend_config
 * "dimension=D,amount=A": out[i] = x[(i - A) mod n] along D. */
#define SPMD_ROTATE_RIGHT_TARGET "SPMDInternal_RotateRight"

/* ---- halo.c ---- */
/* x padded along d by lo / hi elements of the scalar pv. */
hk_instr *spmd_pad_along(spmd_visitor *v, hk_instr *x, hk_instr *pv, int64_t d, int64_t lo, int64_t hi);
/* h sliced to [start, limit) along dim (whole along every other dim). */
hk_instr *spmd_slice_dim(spmd_visitor *v, hk_instr *h, int64_t dim, int64_t start, int64_t limit);
hk_status *spmd_handle_rotate_right(spmd_visitor *v, hk_instr *orig);
/* The shards of a dim taking part in a halo exchange: shards 0..n-1, shard
 * j at tile j, or j + skip from shard skip_from on (skip_from -1: none). */
typedef struct spmd_halo_ring {
  int64_t n, skip_from, skip;
} spmd_halo_ring;
/* One dim's halo exchange (XLA's ExchangeHaloAndGetValidData arguments). */
typedef struct spmd_halo {
  spmd_halo_ring ring;
  const int64_t *left, *right;     /* by shard: halo sizes (negative: edge dropped) */
  int64_t explicit_left;           /* padding before the data on the whole dim */
  int64_t padded_full;             /* the padded dim's size */
  int64_t base_dim;                /* the data's size along the dim */
  int64_t shard_with_halo;         /* each shard's result size */
  const int64_t *offset_on_padded; /* by tile: the shard's first position on the padded dim */
  bool mask;                       /* positions outside the data set to the pad value */
} spmd_halo;
/* x (local, sharded along d by t) with its halos: NULL when they reach
 * past the neighbour and would move about as much as a gather. */
hk_instr *spmd_exchange_halo_valid(spmd_visitor *v, hk_instr *x, const hk_sharding *t, int64_t d,
                                   const spmd_halo *h, hk_instr *pad_value);
/* x (local under `from`, global shape gs) with every dim that `to` splits
 * further given the extent of the target tiles cut from its shard: where
 * uneven sizes make them reach past it, by halo exchange along the
 * source shards (XLA's PadFromPartialReplicateShape); x itself when the
 * sizes already nest; NULL when the halos reach too far. */
hk_instr *spmd_align_nested(spmd_visitor *v, hk_instr *x, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to);
/* y dynamic-update-sliced with piece at per-tile offsets along d (tile k
 * of t along d writes at by_tile_offset[k], 0 along the other dims). */
hk_instr *spmd_update_at_tiles(spmd_visitor *v, hk_instr *y, hk_instr *piece, const hk_sharding *t, int64_t d,
                               const int64_t *by_tile_offset);
/* x with positions first + i along d outside [lo, hi) replaced by the
 * scalar pv (INT64_MIN / INT64_MAX: no bound). */
hk_instr *spmd_mask_outside(spmd_visitor *v, hk_instr *x, int64_t d, hk_instr *first, int64_t lo,
                            int64_t hi, hk_instr *pv);
/* x dynamic-sliced at starts (s32 scalars, one per dim) to shape ls. */
hk_instr *spmd_dynamic_slice(spmd_visitor *v, hk_instr *x, hk_instr *const *starts, const hk_shape *ls);
/* x dynamic-sliced to `size` along d from `start` (whole elsewhere). */
hk_instr *spmd_dynamic_slice_dim(spmd_visitor *v, hk_instr *x, int64_t d, hk_instr *start,
                                 int64_t size);

/* ---- windowed.c: XLA's ReshardAsWindowedInput ---- */
typedef struct spmd_windowed_input {
  hk_instr *hlo;                   /* the local input, halos included */
  hk_window_dim *window;           /* the window the local op uses (rank dims) */
  hk_instr **out_offsets;          /* NULL, or starts of the dynamic-slice the local result needs */
} spmd_windowed_input;
/* val resharded so that the local op with out->window computes this
 * shard's part of the windowed op's result under `target`; *ok false
 * (nothing built) when it cannot be. */
hk_status *spmd_reshard_as_windowed_input(spmd_visitor *v, spmd_value *val, const hk_window_dim *wd,
                                          const hk_sharding *target, hk_instr *pad_value,
                                          bool mask, bool *ok, spmd_windowed_input *out);

/* ---- window_ops.c: ops through the windowed reshard; *handled false
 * (nothing built) when their window cannot be partitioned ---- */
hk_status *spmd_handle_reduce_window(spmd_visitor *v, hk_instr *orig, bool *handled);
hk_status *spmd_handle_pad_windowed(spmd_visitor *v, hk_instr *orig, bool *handled);
hk_status *spmd_handle_slice_windowed(spmd_visitor *v, hk_instr *orig, bool *handled);
hk_status *spmd_handle_reverse_windowed(spmd_visitor *v, hk_instr *orig, bool *handled);
/* s (tiled) with its tiles reversed along the n data dims rd (XLA's ReverseSharding). */
const hk_sharding *spmd_reverse_sharding(spmd_visitor *v, const hk_sharding *s, const int64_t *rd, int n);
hk_status *spmd_handle_select_and_scatter(spmd_visitor *v, hk_instr *orig, bool *handled);

/* ---- dynamic_update_slice.c: an update inside one shard of a
 * partitioned dim; *handled false otherwise ---- */
hk_status *spmd_handle_dus_in_shard(spmd_visitor *v, hk_instr *orig, bool *handled);

/* ---- concatenate.c: along a partitioned dim, XLA's all-reduce of the
 * shards written in place; *handled false otherwise ---- */
hk_status *spmd_handle_concatenate(spmd_visitor *v, hk_instr *orig, bool *handled);

/* ---- reshape_halo.c: a reshape splitting or merging the one partitioned
 * dim of uneven shards, by halo exchange; *handled false otherwise ---- */
hk_status *spmd_reshape_by_halo(spmd_visitor *v, hk_instr *orig, bool *handled);
/* (handlers.c) The input sharding under which a local reshape of `in` to
 * `out` yields o's tiling, NULL if none; with halo non-NULL one reshape
 * group may misalign (uneven counts), its major input / output dims put in
 * halo[0], halo[1] (-1 when none did). */
const hk_sharding *spmd_reshape_operand_sharding(spmd_visitor *v, const hk_shape *in,
                                                 const hk_shape *out, const hk_sharding *o,
                                                 int *halo);

/* ---- conv.c: convolutions, spatially partitioned ones here, the rest
 * through the dot handler; *handled false when neither applies ---- */
hk_status *spmd_handle_convolution(spmd_visitor *v, hk_instr *orig, bool *handled);
/* What spatial dim k of a convolution is (XLA's ParseConvolutionDimsInfo):
 * a dot dim in disguise or a real convolution dim. */
typedef enum spmd_conv_dim_role {
  SPMD_CONV_SPATIAL,               /* a convolution dim: windows slide over it */
  SPMD_CONV_BATCH,                 /* the whole dim as one window over its base
                                      dilation: position j of the lhs meets
                                      position j of the kernel only */
  SPMD_CONV_BATCH_DILATED,         /* the same through window dilation */
  SPMD_CONV_CONTRACTING,           /* one window over the whole dim */
  SPMD_CONV_LHS_NON_CONTRACTING,   /* size-1 windows over a size-1 kernel dim */
  SPMD_CONV_RHS_NON_CONTRACTING,   /* a size-1 lhs dim, the kernel reversed over it */
} spmd_conv_dim_role;
spmd_conv_dim_role spmd_conv_dim_role_of(const hk_instr *conv, int k);

/* (a + b - 1) / b: a dim of a elements over b shards, the tile size. */
static inline int64_t spmd_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- coarsen.c: tiles merged k at a time by grouped all-gathers ---- */
typedef struct spmd_coarsening {
  int n;                            /* dims merged, in order */
  int dims[HK_MAX_RANK];
  int64_t k[HK_MAX_RANK];           /* old tiles per new one */
  const hk_sharding *steps[HK_MAX_RANK + 1];   /* from, then after each merge */
  const hk_sharding *inter;         /* the sharding after the merges (steps[n]) */
} spmd_coarsening;
/* Whether every dim of `to` splits into a divisor of from's split and
 * some merged dim stays split; then
 * c says the merges and the sharding they leave (its devices maybe in
 * another order than to's). */
bool spmd_coarsen_plan(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                       const hk_sharding *to, spmd_coarsening *c);
/* The merges' price by the cost hook. */
int64_t spmd_coarsen_cost(spmd_visitor *v, const hk_shape *gs, const spmd_coarsening *c);
/* The merges built on local value h: a value sharded as c->inter; NULL
 * (nothing built) when uneven tiles need halos that reach too far. */
hk_instr *spmd_coarsen(spmd_visitor *v, hk_instr *h, const hk_shape *gs, const spmd_coarsening *c);

/* ---- gather_scatter.c ---- */
hk_status *spmd_handle_gather(spmd_visitor *v, hk_instr *orig);
hk_status *spmd_handle_scatter(spmd_visitor *v, hk_instr *orig);

#endif
