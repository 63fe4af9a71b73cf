/* intern.c - hashing, string maps, string interning and per-module hash-consing. */
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"

/* ---- hashing (a small wyhash-style multiply-mix) -------------------------- */

static const uint64_t kP0 = 0xa0761d6478bd642full, kP1 = 0xe7037ed1a0b428dbull,
                      kP2 = 0x8ebc6af09c88c6e3ull, kP3 = 0x589965cc75374cc3ull;

static inline uint64_t mix(uint64_t a, uint64_t b) {
  __uint128_t r = (__uint128_t)a * b;
  return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline uint64_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

uint64_t hk_hash_bytes(const void *data, size_t n, uint64_t seed) {
  const uint8_t *p = data;
  uint64_t h = seed ^ mix(seed ^ kP0, kP1);
  uint64_t a, b;
  if (n <= 16) {
    if (n >= 4) {
      a = (rd32(p) << 32) | rd32(p + ((n >> 3) << 2));
      b = (rd32(p + n - 4) << 32) | rd32(p + n - 4 - ((n >> 3) << 2));
    } else if (n > 0) {
      a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    size_t i = n;
    while (i > 16) {
      h = mix(rd64(p) ^ kP1, rd64(p + 8) ^ h);
      p += 16;
      i -= 16;
    }
    a = rd64(p + i - 16);
    b = rd64(p + i - 8);
  }
  return mix(kP1 ^ n, mix(a ^ kP1, b ^ h) ^ kP2);
}

uint64_t hk_hash_combine(uint64_t h, uint64_t v) {
  return mix(h ^ kP3, v ^ kP2);
}

uint32_t hk_str_hash(const char *s, size_t len) {
  uint64_t h = hk_hash_bytes(s, len, 0x9e3779b97f4a7c15ull);
  return (uint32_t)(h ^ (h >> 32));
}

const char *hk_str_new(hk_arena *a, const char *s, size_t len, uint32_t hash) {
  char *mem = hk_arena_alloc(a, sizeof(hk_strhdr) + len + 1, 4);
  hk_strhdr hdr = {hash, (uint32_t)len};
  memcpy(mem, &hdr, sizeof hdr);
  if (len) memcpy(mem + sizeof hdr, s, len);
  return mem + sizeof hdr;   /* NUL from the zeroed arena */
}

/* ---- string maps ------------------------------------------------------------ */

static size_t strmap_size(uint32_t cap) { return (size_t)cap * sizeof(hk_strmap_entry); }

void hk_strmap_free(hk_strmap *t) {
  if (t->slots) hk_free_block(t->slots, strmap_size(t->mask + 1));
  t->slots = NULL;
  t->mask = 0;
  t->count = 0;
}

static bool entry_matches(const hk_strmap_entry *e, const char *s, size_t len, uint32_t hash) {
  if (hk_strmap_hash(e) != hash) return false;
  const char *key = hk_strmap_key(e);
  return hk_str_hdr(key)->len == len && memcmp(key, s, len) == 0;
}

static hk_strmap_entry *strmap_probe(const hk_strmap *t, const char *s, size_t len,
                                     uint32_t hash) {
  for (uint32_t i = hash & t->mask;; i = (i + 1) & t->mask) {
    hk_strmap_entry *e = &t->slots[i];
    if (!e->kt || entry_matches(e, s, len, hash)) return e;
  }
}

hk_strmap_entry *hk_strmap_find(const hk_strmap *t, const char *s, size_t len,
                                uint32_t hash) {
  if (!t->slots) return NULL;
  hk_strmap_entry *e = strmap_probe(t, s, len, hash);
  return e->kt ? e : NULL;
}

static hk_strmap_entry *strmap_place(hk_strmap_entry *slots, uint32_t mask, uint32_t hash) {
  for (uint32_t i = hash & mask;; i = (i + 1) & mask)
    if (!slots[i].kt) return &slots[i];
}

/* Rehashes t into a table of cap slots (a power of two above its count). */
static void strmap_resize(hk_strmap *t, uint32_t cap) {
  hk_strmap_entry *slots = hk_table_alloc(strmap_size(cap));
  if (t->slots) {
    for (uint32_t i = 0; i <= t->mask; i++)
      if (t->slots[i].kt)
        *strmap_place(slots, cap - 1, hk_strmap_hash(&t->slots[i])) = t->slots[i];
    hk_free_block(t->slots, strmap_size(t->mask + 1));
  }
  t->slots = slots;
  t->mask = cap - 1;
}

static void strmap_grow(hk_strmap *t) { strmap_resize(t, t->slots ? (t->mask + 1) * 2 : 16); }

/* Keeps the load factor at most 3/4. */
static void strmap_reserve_one(hk_strmap *t) {
  if (!t->slots || (uint64_t)(t->count + 1) * 4 > (uint64_t)(t->mask + 1) * 3) strmap_grow(t);
}

/* Sized once for n entries: no intermediate tables are made and filled. */
void hk_strmap_reserve(hk_strmap *t, size_t n) {
  if (n > (size_t)1 << 30) n = (size_t)1 << 30;
  uint64_t cap = t->slots ? (uint64_t)t->mask + 1 : 16;
  while ((uint64_t)n * 4 > cap * 3) cap *= 2;
  if (!t->slots || cap > (uint64_t)t->mask + 1) strmap_resize(t, (uint32_t)cap);
}

hk_strmap_entry *hk_strmap_slot(hk_strmap *t, const char *s, size_t len, uint32_t hash) {
  strmap_reserve_one(t);
  return strmap_probe(t, s, len, hash);
}

void hk_strmap_prefetch_slot(const hk_strmap *t, uint32_t hash) {
  if (t->slots) __builtin_prefetch(&t->slots[hash & t->mask]);
}

void hk_strmap_prefetch(hk_strmap *t, uint32_t hash) {
  strmap_reserve_one(t);
  hk_strmap_prefetch_slot(t, hash);
}

void hk_strmap_fill(hk_strmap *t, hk_strmap_entry *slot, const char *key, void *value) {
  uint32_t h = hk_str_hdr(key)->hash;
  if ((uintptr_t)key & ~HK_STRMAP_PTR_MASK) abort();   /* not a user-space address */
  slot->kt = (uintptr_t)key | (uintptr_t)(h >> 16) << HK_STRMAP_PTR_BITS;
  slot->vt = (uintptr_t)(h & 0xffff) << HK_STRMAP_PTR_BITS;
  hk_strmap_set_value(slot, value);
  t->count++;
}

hk_strmap_entry *hk_strmap_add(hk_strmap *t, const char *key, void *value) {
  strmap_reserve_one(t);
  hk_strmap_entry *e = strmap_place(t->slots, t->mask, hk_str_hdr(key)->hash);
  hk_strmap_fill(t, e, key, value);
  return e;
}

size_t hk_strmap_bytes(const hk_strmap *t) {
  return t->slots ? (size_t)(t->mask + 1) * sizeof(hk_strmap_entry) : 0;
}

/* ---- string interning ------------------------------------------------------- */

const char *hk_intern(hk_module *m, const char *s, size_t len) {
  uint32_t hash = hk_str_hash(s, len);
  hk_strmap_entry *e = hk_strmap_slot(&m->impl->strings, s, len, hash);
  if (e->kt) return hk_strmap_key(e);
  const char *key = hk_str_new(&m->impl->arena, s, len, hash);
  hk_strmap_fill(&m->impl->strings, e, key, NULL);
  return key;
}

const char *hk_intern_cstr(hk_module *m, const char *s) {
  return s ? hk_intern(m, s, strlen(s)) : NULL;
}

/* ---- hash-consing ------------------------------------------------------------ */

static hk_hc_entry *hc_place(hk_hc_entry *slots, size_t mask, uint64_t hash) {
  for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask)
    if (!slots[i].ptr) return &slots[i];
}

static void hc_grow(hk_hctab *t) {
  size_t cap = t->slots ? (t->mask + 1) * 2 : 64;
  hk_hc_entry *slots = hk_table_alloc(cap * sizeof *slots);
  if (t->slots) {
    for (size_t i = 0; i <= t->mask; i++)
      if (t->slots[i].ptr) *hc_place(slots, cap - 1, t->slots[i].hash) = t->slots[i];
    hk_free_block(t->slots, (t->mask + 1) * sizeof *slots);
  }
  t->slots = slots;
  t->mask = cap - 1;
}

const void *hk_hashcons(hk_module *m, hk_hc_table which, uint64_t hash, const void *key,
                        bool (*eq)(const void *stored, const void *key),
                        const void *(*copy_into)(hk_module *m, const void *key)) {
  hk_hctab *t = &m->impl->hc[which];
  if (t->slots) {
    for (size_t i = (size_t)hash & t->mask;; i = (i + 1) & t->mask) {
      hk_hc_entry *e = &t->slots[i];
      if (!e->ptr) break;
      if (e->hash == hash && eq(e->ptr, key)) return e->ptr;
    }
  }
  /* copy_into may itself hash-cons (nested values) and grow this table, so
   * the slot is found only after the copy exists. */
  const void *stored = copy_into(m, key);
  if (!t->slots || (t->count + 1) * 4 > (t->mask + 1) * 3) hc_grow(t);
  hk_hc_entry *e = hc_place(t->slots, t->mask, hash);
  e->hash = hash;
  e->ptr = stored;
  t->count++;
  return stored;
}

void hk_hashcons_each(const hk_module *m, hk_hc_table which,
                      void (*fn)(const void *entry, uint64_t hash, void *ctx), void *ctx) {
  const hk_hctab *t = &m->impl->hc[which];
  if (!t->slots) return;
  for (size_t i = 0; i <= t->mask; i++)
    if (t->slots[i].ptr) fn(t->slots[i].ptr, t->slots[i].hash, ctx);
}
