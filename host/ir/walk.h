/* walk.h - what the host's instruction-order walks share (host/ir/post_order.c):
 * XLA's rule for channel dependencies. */
#ifndef HLOKIT_HOST_IR_WALK_H
#define HLOKIT_HOST_IR_WALK_H

#include <stddef.h>

#include "hlokit/hlokit.h"

/* A collective with a channel id: XLA's post order (ComputeChannelDependencies)
 * makes it depend on the earlier collectives of the same channel. */
bool hk_instr_is_channel_collective(const hk_instr *i);
/* True when no two of the n channel ids are equal (then there are no
 * channel edges at all); sorts ids. */
bool hk_channel_ids_distinct(int64_t *ids, size_t n);

#endif
