/* combine.h - the shared collective-combining engine (combine.c). */
#ifndef HLOKIT_HILO_COMBINE_H
#define HLOKIT_HILO_COMBINE_H

#include "hilo.h"

/* True when a and b may share one combined collective. */
typedef bool (*hilo_same_kind_fn)(const hk_instr *a, const hk_instr *b);

/* Combines the independent `op` collectives of c; returns true if any. */
bool hilo_combine(hk_computation *c, hk_opcode op, hilo_same_kind_fn same,
                  int64_t threshold_bytes, int64_t threshold_count);

#endif
