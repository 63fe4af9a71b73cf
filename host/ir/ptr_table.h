/* ptr_table.h - the host's one pointer map (pointer -> pointer) and one
 * pointer set: open addressing, sized once for the expected count (they
 * grow past half full), keys never NULL.  Header-only, so the hlokit
 * executable uses the same code as the library (it sees only the ABI). */
#ifndef HLOKIT_HOST_PTR_TABLE_H
#define HLOKIT_HOST_PTR_TABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/status.h"

static inline size_t hk_ptr_hash(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  x ^= x >> 33;
  return (size_t)x;
}

/* Slot of key k in keys[0..mask]: where it is, or the empty slot it would take. */
static inline size_t hk_ptr_slot(const void *const *keys, size_t mask, const void *k) {
  size_t i = hk_ptr_hash(k) & mask;
  while (keys[i] && keys[i] != k) i = (i + 1) & mask;
  return i;
}

static inline size_t hk_ptr_table_cap(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n + 2) cap *= 2;
  return cap;
}

/* ---- map ---------------------------------------------------------------- */
typedef struct hk_ptr_map {
  const void **keys;
  void **vals;
  size_t mask, n;
} hk_ptr_map;

static inline void hk_ptr_map_init(hk_ptr_map *m, size_t expected) {
  size_t cap = hk_ptr_table_cap(expected);
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = calloc(cap, sizeof *m->vals);
  if (!m->keys || !m->vals) hk_out_of_memory();
  m->mask = cap - 1;
  m->n = 0;
}

static inline void hk_ptr_map_free(hk_ptr_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static inline void hk_ptr_map_put(hk_ptr_map *m, const void *k, void *v);

static inline void hk_ptr_map_grow(hk_ptr_map *m) {
  hk_ptr_map old = *m;
  hk_ptr_map_init(m, old.mask + 1);
  for (size_t i = 0; i <= old.mask; i++)
    if (old.keys[i]) hk_ptr_map_put(m, old.keys[i], old.vals[i]);
  hk_ptr_map_free(&old);
}

static inline void hk_ptr_map_put(hk_ptr_map *m, const void *k, void *v) {
  size_t i = hk_ptr_slot(m->keys, m->mask, k);
  if (!m->keys[i]) {
    if (2 * (m->n + 1) > m->mask + 1) {
      hk_ptr_map_grow(m);
      i = hk_ptr_slot(m->keys, m->mask, k);
    }
    m->keys[i] = k;
    m->n++;
  }
  m->vals[i] = v;
}

/* The value put for k, NULL when there is none. */
static inline void *hk_ptr_map_get(const hk_ptr_map *m, const void *k) {
  if (!k || !m->keys) return NULL;
  size_t i = hk_ptr_slot(m->keys, m->mask, k);
  return m->keys[i] ? m->vals[i] : NULL;
}

/* ---- set ------------------------------------------------------------------ */
typedef struct hk_ptr_set {
  const void **keys;
  size_t mask, n;
} hk_ptr_set;

static inline void hk_ptr_set_init(hk_ptr_set *s, size_t expected) {
  size_t cap = hk_ptr_table_cap(expected);
  s->keys = calloc(cap, sizeof *s->keys);
  if (!s->keys) hk_out_of_memory();
  s->mask = cap - 1;
  s->n = 0;
}

static inline void hk_ptr_set_free(hk_ptr_set *s) {
  free(s->keys);
  memset(s, 0, sizeof *s);
}

static inline void hk_ptr_set_clear(hk_ptr_set *s) {
  memset(s->keys, 0, (s->mask + 1) * sizeof *s->keys);
  s->n = 0;
}

/* Adds p; false when it was there already. */
static inline bool hk_ptr_set_add(hk_ptr_set *s, const void *p) {
  size_t i = hk_ptr_slot(s->keys, s->mask, p);
  if (s->keys[i]) return false;
  if (2 * (s->n + 1) > s->mask + 1) {
    hk_ptr_set old = *s;
    hk_ptr_set_init(s, old.mask + 1);
    for (size_t k = 0; k <= old.mask; k++)
      if (old.keys[k]) hk_ptr_set_add(s, old.keys[k]);
    hk_ptr_set_free(&old);
    i = hk_ptr_slot(s->keys, s->mask, p);
  }
  s->keys[i] = p;
  s->n++;
  return true;
}

static inline bool hk_ptr_set_has(const hk_ptr_set *s, const void *p) {
  return s->keys[hk_ptr_slot(s->keys, s->mask, p)] != NULL;
}

#endif
