/* prop.h - internals of the sharding-propagation plugin: the working tile
 * form the sharding algebra runs on, the pass state, and the per-op rules. */
#ifndef HLOKIT_PLUGIN_PROP_H
#define HLOKIT_PLUGIN_PROP_H

#include <stdbool.h>
#include <stdint.h>

#include "hlokit/hlokit.h"
#include "hlokit/propagation.h"

/* ---- tiles: a mutable tile assignment --------------------------------------
 * n dims: data dims first (data_rank of them), then typed trailing dims
 * (HK_SUBGROUP_REPLICATED / HK_SUBGROUP_MANUAL).  devices row-major.  Only
 * tiled shardings have a tile form. */
typedef struct pt_tiles {
  int n, data_rank;
  int64_t dims[HK_MAX_RANK];
  uint8_t sub[HK_MAX_RANK];        /* type of trailing dim data_rank + k */
  int64_t *dev;                    /* prod(dims) ids, malloc'ed */
} pt_tiles;

bool pt_from_sharding(const hk_sharding *s, pt_tiles *t);
void pt_free(pt_tiles *t);
int64_t pt_count(const pt_tiles *t);
/* Interned canonical sharding for t with s's metadata (s may be NULL). */
const hk_sharding *pt_to_sharding(hk_module *m, const pt_tiles *t, const hk_sharding *meta);
/* Same devices, new dims (row-major reshape); data_rank and sub given. */
void pt_reshape(pt_tiles *t, int n, const int64_t *dims, int data_rank, const uint8_t *sub);
/* The device array of t viewed as nf dims of sizes fsize (row-major,
 * product = device count), transposed by order[] (out dim k = dim
 * order[k]); malloc'ed. */
int64_t *pt_permute(const pt_tiles *t, int nf, const int64_t *fsize, const int *order);

/* ---- algebra (XLA's hlo_sharding_util, on our own terms) ------------------ */
/* Replicated, maximal, manual: no tiles. */
bool sa_tile_maximal(const hk_sharding *s);
/* XLA's IsTileMaximal: replicated or on one device (tuples: every
 * element); manual is not. */
bool sa_xla_tile_maximal(const hk_sharding *s);
/* Spatially partitioned (tiled, replicated, manual; tuples: any element). */
bool sa_spatial(const hk_sharding *s);
int64_t sa_num_tiles(const hk_sharding *s);
bool sa_partial(const hk_sharding *s);       /* has a replicated trailing dim */
bool sa_manual_subgroup(const hk_sharding *s);
int64_t sa_dim(const hk_sharding *s, int d);  /* tiles along data dim d */
bool sa_more_specific(const hk_sharding *a, const hk_sharding *b);
/* XLA's MergeSharding(old, &cand, may_combine): true when *cand (maybe
 * refined by merging with old) should replace old. */
bool sa_merge(hk_module *m, const hk_sharding *old, const hk_sharding **cand, bool may_combine);
/* MergeShardingIfCompatible(to_merge, minimum_tiles, &dst). */
bool sa_merge_compatible(hk_module *m, const hk_sharding *to_merge, int64_t min_tiles,
                         const hk_sharding **dst);
/* Replicates every data dim (kept: manual subgroups), rank changed to
 * data_rank (-1 = same). */
const hk_sharding *sa_replicate_all_data(hk_module *m, const hk_sharding *s, int data_rank);
/* TransposeShardingWithCollapsedDims: src_to_tgt has src data_rank entries,
 * tgt_to_src tgt_rank entries (-1 = none).  NULL if a dropped dim is tiled. */
const hk_sharding *sa_transpose_collapsed(hk_module *m, const hk_sharding *s, int src_rank,
                                          const int64_t *src_to_tgt, int tgt_rank,
                                          const int64_t *tgt_to_src);
/* XLA's PropagateShardingThroughReshape (reshape.c): the sharding of the
 * reshaped value, replicated when no dim keeps its tiling. */
const hk_sharding *sa_reshape(hk_module *m, const hk_shape *from, const hk_shape *to,
                              const hk_sharding *s);
/* Tuple helpers. */
const hk_sharding *sa_tuple_of(hk_module *m, const hk_shape *shape, const hk_sharding *s);
const hk_sharding *sa_element(hk_module *m, const hk_sharding *s, const hk_shape *shape, int64_t i);

/* ---- pass state -------------------------------------------------------------- */
typedef struct pi_info {              /* per instruction, in instr->scratch */
  hk_instr *instr;                    /* the instruction in this slot (NULL: removed) */
  bool provided;                      /* sharded by the user: never changed */
  bool fwd_done, bwd_done;            /* XLA's already_inferred caches */
  int32_t n_unspec;
  int64_t *unspec;                    /* Sharding custom-call unspecified_dims */
  int64_t shard_group;                /* -1 none */
  uint8_t shard_group_kind;
  /* provenance of the current sharding */
  const hk_instr *src;
  const char *rule;
  int8_t level;
  int8_t dir;                         /* HK_PROP_DIR_* */
} pi_info;

typedef struct prop_opts {
  bool is_spmd, propagate_metadata, cse_prevention_only;
  int32_t n_out, n_params;
  bool out[64], params[64];
} prop_opts;

typedef struct prop_ctx {
  hk_module *m;
  const hk_registry *reg;
  prop_opts o;
  bool allow_out_any, allow_params_any;
  int level;
  pi_info *info;                      /* one per instruction */
  int64_t n_info;
  hk_instr *cur_src;                  /* provenance of the next set */
  const char *cur_rule;
  int cur_dir;
} prop_ctx;

static inline pi_info *pi(const hk_instr *i) { return (pi_info *)i->scratch; }
/* The computation's caller when it is a while body/cond, conditional branch
 * or call target (computation->scratch), else NULL. */
static inline hk_instr *prop_caller(const hk_computation *c) { return (hk_instr *)c->scratch; }

/* Sets i's sharding (recording provenance); true if it changed. */
bool prop_set(prop_ctx *cx, hk_instr *i, const hk_sharding *s, const hk_instr *src,
              const char *rule);
/* XLA's MaybeImproveInstructionSharding. */
bool prop_improve(prop_ctx *cx, hk_instr *i, const hk_sharding *s, bool may_combine,
                  bool aggressive, const hk_instr *src, const char *rule);
/* The merge-and-compare part of prop_improve for a value of `shape` now
 * sharded `old`: true (and *cand updated) when *cand should replace it. */
bool prop_accept(prop_ctx *cx, const hk_shape *shape, const hk_sharding *old,
                 const hk_sharding **cand, bool may_combine, bool aggressive);
int64_t prop_non_root_users(const hk_instr *i);
/* {manual} with the metadata of `from` (XLA's HloSharding::Manual(metadata)). */
const hk_sharding *prop_manual_from(hk_module *m, const hk_sharding *from);
bool prop_is_cc(const hk_instr *i, const char *target);
const hk_custom_call_partitioner *prop_cc_partitioner(const prop_ctx *cx, const hk_instr *i);
bool prop_can_at_level(const hk_instr *i, int level);
bool prop_passthrough_cc(const hk_instr *i);
bool prop_param_leaf_allowed(const prop_ctx *cx, const hk_computation *e, int64_t k, int64_t leaf);
bool prop_param_allowed(const prop_ctx *cx, const hk_computation *e, int64_t k);
bool prop_is_elementwise(const hk_instr *i);
bool prop_supports_spatial(const prop_ctx *cx, const hk_instr *i, bool allow_out);

/* rules */
bool prop_infer_from_operands(prop_ctx *cx, hk_instr *i);
bool prop_infer_from_users(prop_ctx *cx, hk_instr *i);
const hk_sharding *prop_sharding_from_user(prop_ctx *cx, const hk_instr *i,
                                           const hk_instr *user, const char **rule);
/* gather / scatter (gather_scatter.c) */
bool prop_gather_forward(prop_ctx *cx, hk_instr *i, bool may_combine);
bool prop_scatter_forward(prop_ctx *cx, hk_instr *i, bool may_combine);
const hk_sharding *prop_gather_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                        bool may_combine);
const hk_sharding *prop_scatter_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                         bool may_combine);
/* dot / convolution (dot.c) */
bool prop_dot_forward(prop_ctx *cx, hk_instr *i, bool may_combine);
bool prop_conv_forward(prop_ctx *cx, hk_instr *i, bool may_combine);
const hk_sharding *prop_dot_backward(prop_ctx *cx, const hk_instr *i, const hk_instr *user,
                                     bool may_combine);

/* XLA's RefineManualAutoShardingFromAuto / FromManual (manual_refine.c):
 * the auto and manual shardings of an annotation and its manual conversion
 * refined by to_merge along the unspecified dims; false (nothing written)
 * when they cannot be. */
bool prop_refine_from_auto(hk_module *m, const hk_sharding *to_merge, int n_unspec,
                           const int64_t *unspec, const hk_sharding **auto_s,
                           const hk_sharding **manual_s);
bool prop_refine_from_manual(hk_module *m, const hk_sharding *to_merge, int n_unspec,
                             const int64_t *unspec, const hk_sharding **auto_s,
                             const hk_sharding **manual_s);

/* XLA's CheckAndUpdateDeviceAssignmentsInWhileBody (while_devices.c). */
hk_status *prop_check_while_devices(hk_module *m, hk_instr *w);

/* the driver (run.c) */
hk_status *prop_run(hk_module *m, const hk_registry *reg, const prop_opts *o,
                    const hk_exec_threads *threads, bool *changed, hk_prop_record **rec,
                    int64_t *n_rec);

#endif
