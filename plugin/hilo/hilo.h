/* hilo.h - shared pieces of the hilo collective passes (post-partition
 * passes that lower and optimise the collectives the partitioner emitted):
 * descriptors, the generic pass object, and collective-graph utilities. */
#ifndef HLOKIT_HILO_H
#define HLOKIT_HILO_H

#include "hlokit/hlokit.h"

typedef struct hilo_pass {
  hk_pass base;
  int64_t num[2];
} hilo_pass;



/* Collective depth: for each instruction of c (in the returned post order),
 * the largest number of collectives on any path from a computation input
 * to it, the instruction itself excluded.  Two collectives with the same
 * depth never depend on each other, which is what lets the stream
 * assignment run them side by side and the combiners merge them.
 * Returns the post order (malloc'ed); depth[k] belongs to order[k] and is
 * also left in order[k]->scratch as (intptr_t)(depth + 1) until
 * hilo_clear_scratch(). */
hk_instr **hilo_collective_depths(hk_computation *c, int64_t *n, int64_t **depth);
void hilo_clear_scratch(hk_instr **order, int64_t n);

/* The instructions of c with opcode op, in list order (malloc'ed; *n gets
 * the count).  Passes that remove what they rewrite iterate over this
 * snapshot instead of the live list. */
hk_instr **hilo_collect(hk_computation *c, hk_opcode op, int64_t *n);

/* Same groups (both absent, or the same lists). */
bool hilo_same_replica_groups(const hk_replica_groups *a, const hk_replica_groups *b);
/* Two reduction computations that compute the same binary op on their two
 * parameters (e.g. both `add(p0, p1)`), or the same computation. */
bool hilo_same_reduction(const hk_computation *a, const hk_computation *b);

extern const hk_pass_desc hilo_unique_channel_id_desc;
extern const hk_pass_desc hilo_collective_stream_id_desc;
extern const hk_pass_desc hilo_reduce_scatter_creator_desc;
extern const hk_pass_desc hilo_all_reduce_combiner_desc;
extern const hk_pass_desc hilo_all_gather_combiner_desc;
extern const hk_pass_desc hilo_cp_cycle_decomposer_desc;

#endif
