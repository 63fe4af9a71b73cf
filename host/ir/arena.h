/* arena.h - chunked bump allocator: zeroed memory freed all at once (host-private). */
#ifndef HLOKIT_IR_ARENA_H
#define HLOKIT_IR_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hlokit/hlokit.h"

typedef struct hk_arena_chunk hk_arena_chunk;

typedef struct hk_arena {
  hk_arena_chunk *chunks;  /* newest first */
  char *cur, *end;         /* free space in the newest chunk */
  size_t next_size;        /* size of the next chunk */
  size_t bytes;            /* total bytes of all chunks */
} hk_arena;

void hk_arena_init(hk_arena *a);
void hk_arena_release(hk_arena *a);
/* n zeroed bytes aligned to `align` (a power of two, at most 16). */
void *hk_arena_alloc(hk_arena *a, size_t n, size_t align);
/* The same; the common case (room in the current chunk) inline. */
static inline void *hk_arena_take(hk_arena *a, size_t n, size_t align) {
  uintptr_t p = ((uintptr_t)a->cur + (align - 1)) & ~(uintptr_t)(align - 1);
  if (n && a->cur && p + n <= (uintptr_t)a->end) {
    a->cur = (char *)(p + n);
    return (void *)p;
  }
  return hk_arena_alloc(a, n, align);
}
size_t hk_arena_bytes(const hk_arena *a);
/* For an arena that only ever holds items of one size (a multiple of their
 * alignment, so they lie packed from each chunk's start): gives the pages
 * lying wholly inside runs of items dead(item) says are unused back to the
 * system; they read as zeros afterwards.  Returns the bytes given back. */
size_t hk_arena_release_items(hk_arena *a, size_t item, bool (*dead)(const void *item));

/* Blocks this big are mapped directly and their pages made present
 * (hk_populate: by the prefault helper while the caller starts filling the
 * block from its start, or in one call here): cheaper than a page fault
 * per 4 KiB page first touched, the main cost of fresh memory here.
 * (Transparent huge pages were measured too: fast when a process reuses
 * them, but several times slower than 4 KiB pages for the first use in a
 * process.) */
#define HK_BIG_BLOCK_MIN ((size_t)1 << 20)
#define HK_POPULATE_MAX ((size_t)256 << 20)   /* bigger blocks are not made present at once */

/* Big tables and chunks come from hk_alloc_block / hk_free_block (the
 * ABI's, ir.h): the one place that decides how big blocks are obtained
 * (blocks of 1 MiB and more are mapped, their pages made present ahead of
 * use; see arena.c). */
/* hk_alloc_block for a hash table probed at random: big ones get huge pages
 * where the kernel allows (freed with hk_free_block, the same size). */
void *hk_table_alloc(size_t n);
/* Asks for the pages of [from, to) to be made present, when that is 1 MiB
 * or more, instead of a page fault per 4 KiB page first written (for
 * malloc'ed blocks about to be filled from the start): the prefault helper
 * does it while the caller goes on, or (without the helper) it is done in
 * one call here; a no-op where the kernel cannot.  A hint only: the range
 * may be freed at any time after. */
void hk_populate(void *from, void *to);
/* A reader of text (from its start) is done with the pages before at: if
 * text is a file hk_file_bytes_open mapped, they are given back (reading
 * them again reads the file).  Anything else: nothing happens. */
void hk_input_release_before(const char *text, const char *at);
/* A zeroed block of n bytes made present ahead of time by a helper thread
 * (freed with hk_free_block), or NULL when none is ready: the helper starts
 * on the first call and from then on serves blocks of that call's size. */
void *hk_prefault_take(size_t n);

#endif
