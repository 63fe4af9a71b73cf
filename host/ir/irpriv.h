/* irpriv.h - internals shared by the files of host/ir (module tables, name maps). */
#ifndef HLOKIT_IR_IRPRIV_H
#define HLOKIT_IR_IRPRIV_H

#include <stdlib.h>

#include "arena.h"
#include "intern.h"

/* ---- strings with a header ---------------------------------------------- */
/* Strings kept in name maps carry their hash and length just before the
 * characters, so tables need not store or recompute them. */
typedef struct hk_strhdr {
  uint32_t hash;
  uint32_t len;
} hk_strhdr;

static inline const hk_strhdr *hk_str_hdr(const char *s) {
  return (const hk_strhdr *)(const void *)(s - sizeof(hk_strhdr));
}
uint32_t hk_str_hash(const char *s, size_t len);
/* A header string in the arena (not registered in any table). */
const char *hk_str_new(hk_arena *a, const char *s, size_t len, uint32_t hash);

/* ---- string map: header string -> value, open addressing ----------------- */
/* Both words keep a pointer in their low 48 bits (user-space addresses fit)
 * and 16 bits of the key's 32-bit hash above it: kt the high half, vt the
 * low half.  Probing compares hashes without touching keys and growing
 * never reads them. */
typedef struct hk_strmap_entry {
  uintptr_t kt;      /* key | hash >> 16 << 48; 0 = empty slot */
  uintptr_t vt;      /* value | (hash & 0xffff) << 48 */
} hk_strmap_entry;

#define HK_STRMAP_PTR_BITS 48
#define HK_STRMAP_PTR_MASK ((((uintptr_t)1) << HK_STRMAP_PTR_BITS) - 1)

static inline const char *hk_strmap_key(const hk_strmap_entry *e) {
  return (const char *)(e->kt & HK_STRMAP_PTR_MASK);
}
static inline void *hk_strmap_value(const hk_strmap_entry *e) {
  return (void *)(e->vt & HK_STRMAP_PTR_MASK);
}
static inline void hk_strmap_set_value(hk_strmap_entry *e, const void *v) {
  if ((uintptr_t)v & ~HK_STRMAP_PTR_MASK) abort();   /* not a user-space address */
  e->vt = (e->vt & ~HK_STRMAP_PTR_MASK) | (uintptr_t)v;
}
static inline uint32_t hk_strmap_hash(const hk_strmap_entry *e) {
  return (uint32_t)((e->kt >> HK_STRMAP_PTR_BITS) << 16 | (e->vt >> HK_STRMAP_PTR_BITS));
}

typedef struct hk_strmap {
  hk_strmap_entry *slots;   /* malloc'ed */
  uint32_t mask;            /* capacity - 1, or 0 when no slots */
  uint32_t count;
} hk_strmap;

void hk_strmap_free(hk_strmap *t);
hk_strmap_entry *hk_strmap_find(const hk_strmap *t, const char *s, size_t len, uint32_t hash);
/* Makes room for one more key, then returns the entry matching s or the
 * empty slot where s belongs (kt == 0); fill that with hk_strmap_fill. */
hk_strmap_entry *hk_strmap_slot(hk_strmap *t, const char *s, size_t len, uint32_t hash);
void hk_strmap_fill(hk_strmap *t, hk_strmap_entry *slot, const char *key, void *value);
/* Makes room for one more key and starts loading the slot for hash, so a
 * later hk_strmap_slot with that hash finds it in cache. */
void hk_strmap_prefetch(hk_strmap *t, uint32_t hash);
/* Starts loading the slot for hash as the table is now (no room made). */
void hk_strmap_prefetch_slot(const hk_strmap *t, uint32_t hash);
/* Grows the table (if needed) so n keys fit without growing again. */
void hk_strmap_reserve(hk_strmap *t, size_t n);
/* Adds key (a header string not yet present); returns its entry. */
hk_strmap_entry *hk_strmap_add(hk_strmap *t, const char *key, void *value);
size_t hk_strmap_bytes(const hk_strmap *t);

/* ---- hash-cons tables ------------------------------------------------------ */
typedef struct hk_hc_entry {
  uint64_t hash;
  const void *ptr;   /* NULL = empty */
} hk_hc_entry;

typedef struct hk_hctab {
  hk_hc_entry *slots;
  size_t mask, count;
} hk_hctab;

/* ---- name spaces (XLA's NameUniquer) --------------------------------------- */
/* Values in a name map: the owner, or one of these. */
#define HK_NAME_RESERVED NULL              /* handed out, not owned yet */
#define HK_NAME_RETIRED ((void *)1)        /* owner removed; never reused */

typedef struct hk_namespace {
  hk_strmap names;      /* every name ever used -> owner */
  hk_strmap counters;   /* root -> next id to try (only roots that collided) */
  hk_strmap roots;      /* root -> hk_root_ids: what ids names with that root use */
  bool has_dot_zero;    /* some name ends in ".0" */
  /* Instructions that took a name (hk_instr_take_name) whose map entry
   * still names an earlier holder: entries are updated in one pass, with
   * the probes overlapped, before anything reads an owner from the map.
   * Uniquing needs no owners (a taken name stays taken either way). */
  struct hk_instr **taken;
  size_t n_taken, cap_taken;
  /* The name last announced by hk_module_prefetch_instr_name, with its
   * hash, until hk_ns_unique registers it (names.c). */
  bool hinted;
  uint32_t hint_len, hint_hash;
  char hint[48];
} hk_namespace;

/* Per root, a summary of the ids its names use ("add.7": root "add", id 7;
 * "add" and "add.0": id 0), so the uniquer need not probe taken ids. */
typedef struct hk_root_ids {
  int64_t max;        /* >= every id used (-1: none) */
  int64_t n_exact;    /* distinct ids >= 1 spelled root.id exactly */
  bool zero;          /* id 0 is used */
} hk_root_ids;

/* A unique name for `want` (XLA rules), registered with owner. */
const char *hk_ns_unique(hk_module *m, hk_namespace *ns, const char *want, size_t len,
                         void *owner);
/* Registers an exact name (already known to be free); returns the stored copy. */
const char *hk_ns_claim(hk_module *m, hk_namespace *ns, const char *name, size_t len,
                        void *owner);
void *hk_ns_lookup(hk_namespace *ns, const char *name);
void hk_ns_retire(hk_namespace *ns, const char *name);
/* The map entry of a name the namespace holds (a string it returned, or one
 * sharing its header), found by the hash stored before the characters. */
hk_strmap_entry *hk_ns_entry(const hk_namespace *ns, const char *name);
/* Records that `to` took its name; its map entry is updated later. */
void hk_ns_note_taken(hk_namespace *ns, struct hk_instr *to);
/* Points the map entries of names taken since the last call at their
 * holders (instructions that still hold them). */
void hk_ns_settle_taken(hk_namespace *ns);
/* The live instruction holding name in the instruction namespace ns, or
 * NULL: removing or renaming an instruction leaves its map entry behind
 * (the name stays taken), so an entry counts only while its instruction
 * is live, has not lent the name on, and still carries that very string. */
hk_instr *hk_name_holder_of(hk_namespace *ns, const char *name);
/* Starts loading the map slot where hk_ns_entry(ns, name) begins. */
static inline void hk_ns_prefetch_entry(const hk_namespace *ns, const char *name) {
  if (ns->names.slots) __builtin_prefetch(&ns->names.slots[hk_str_hdr(name)->hash & ns->names.mask]);
}
void hk_ns_free(hk_namespace *ns);

/* Hints from a producer that knows what is coming (the text parser):
 * room for about n instruction names, and start loading the name-map slot
 * of an instruction name that hk_instr_new will soon register. */
void hk_module_reserve_instr_names(hk_module *m, size_t n);
void hk_module_prefetch_instr_name(hk_module *m, const char *name, size_t len);
/* The same with the name's hk_str_hash, known already. */
void hk_module_prefetch_instr_name_hashed(hk_module *m, const char *name, size_t len,
                                          uint32_t hash);
/* Starts loading the name map slot of a name that comes later (the next
 * line's), without announcing it; returns the name's hk_str_hash. */
uint32_t hk_module_prefetch_instr_slot(hk_module *m, const char *name, size_t len);

/* ---- the module's private part --------------------------------------------- */
struct hk_module_impl {
  hk_arena arena;
  hk_arena instr_arena;            /* hk_instr structs only: walks stay sequential */
  hk_strmap strings;              /* hk_intern */
  hk_namespace instr_names;
  hk_namespace comp_names;
  hk_hctab hc[HK_HC_COUNT];
  const struct hk_sharding *replicated;   /* hk_sharding_replicated's answer, once made */
  uint64_t changes;               /* hk_module_changes: bumped by every graph edit */
};

/* A graph edit of m (or of i's module; a detached instruction has none):
 * what hk_module_changes counts. */
static inline void hk_module_note_change(hk_module *m) { m->impl->changes++; }
static inline void hk_instr_note_change(const hk_instr *i) {
  if (i->parent) hk_module_note_change(i->parent->module);
}

static inline hk_arena *hk_module_arena(hk_module *m) { return &m->impl->arena; }

/* Arena allocation with a smaller alignment (pointer arrays, strings). */
static inline void *hk_alloc_aligned(hk_module *m, size_t n, size_t align) {
  return hk_arena_take(&m->impl->arena, n, align);
}

/* hk_computation_calling_instrs, calling visit(ctx, i) (when given) on
 * every instruction of c on the way (hk_module_sort_computations_visiting). */
hk_instr **hk_computation_calling_instrs_visiting(const hk_computation *c, int64_t *n,
                                                 void (*visit)(void *ctx, hk_instr *i),
                                                 void *ctx);

/* The last step of removing i (its users and operand edges already gone):
 * drops its control edges and parameter slot and takes it out of its
 * computation's list; its name stays taken in the map (no probe). */
void hk_instr_detach(hk_instr *i);

/* Creates an instruction (hk_instr_new / hk_instr_new_before when before
 * is non-NULL).  Named from name_from when it is given: it takes that
 * instruction's name (hk_instr_take_name) when both are in one module, and
 * a uniqued copy of it otherwise; else named `name`, uniqued. */
hk_instr *hk_instr_create(hk_computation *c, hk_instr *before, hk_opcode op,
                          const hk_shape *shape, int n_operands, hk_instr *const *operands,
                          const char *name, hk_instr *name_from);

/* Deep copies used by cloning (clone.c). */
hk_literal *hk_literal_copy(hk_module *m, const hk_literal *src);

/* Host-private bits of hk_instr.flags. */
#define HK_IFLAG_VISIT_MASK 3u      /* post-order DFS state */
#define HK_IFLAG_MARK 4u            /* scratch mark inside one mutation */
#define HK_IFLAG_NAME_LENT 8u       /* another instruction took this one's name
                                       (hk_instr_take_name): not its to retire */
#define HK_IFLAG_LONG_USERS 16u     /* inside hk_instrs_remove: drops from this
                                       operand's user list are replayed later */

#endif
