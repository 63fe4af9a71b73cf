/* intern.h - hashing and per-module hash-consing of immutable values (host-private). */
#ifndef HLOKIT_IR_INTERN_H
#define HLOKIT_IR_INTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlokit/ir.h"

typedef enum hk_hc_table { HK_HC_SHAPE, HK_HC_SHARDING, HK_HC_OTHER, HK_HC_COUNT } hk_hc_table;

/* Fast 64-bit hash of n bytes. */
uint64_t hk_hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t hk_hash_combine(uint64_t h, uint64_t v);

/* Returns the stored entry equal to key (eq(stored, key)), or stores and
 * returns copy_into(m, key). Per-module table, grows as needed. */
const void *hk_hashcons(hk_module *m, hk_hc_table t, uint64_t hash, const void *key,
                        bool (*eq)(const void *stored, const void *key),
                        const void *(*copy_into)(hk_module *m, const void *key));

/* Calls fn(entry, hash, ctx) for every entry stored in table t, in slot order. */
void hk_hashcons_each(const hk_module *m, hk_hc_table t,
                      void (*fn)(const void *entry, uint64_t hash, void *ctx), void *ctx);

#endif
