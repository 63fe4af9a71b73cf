/* arena.c - chunked bump allocator: each module's memory, zeroed, freed at once. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

struct hk_arena_chunk {
  hk_arena_chunk *next;
  size_t size;
  /* data follows, 16-byte aligned */
  _Alignas(16) char data[];
};

#define ARENA_FIRST_CHUNK 4096
#define ARENA_MAX_CHUNK ((size_t)4 << 20)


void *hk_alloc_block(size_t n) {
  if (n >= HK_BIG_BLOCK_MIN) {
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) hk_out_of_memory();
    /* a block past HK_POPULATE_MAX is seldom written whole at once (a
     * literal one bare element fills: fuzzer, 4 GB made present for
     * f16[699999999,3] constant(0)); its pages come as they are touched */
    if (n <= HK_POPULATE_MAX) hk_populate(p, p + n);
    return p;
  }
  void *p = calloc(1, n);
  if (!p) hk_out_of_memory();
  return p;
}

/* A table probed at random (a name map) takes a TLB miss per probe once
 * it spans thousands of 4 KiB pages; in 2 MiB pages it stays in the TLB.
 * Tables of HUGE_TABLE_MIN and more (powers of two, so whole huge pages)
 * are mapped 2 MiB-aligned and asked for huge pages; where the kernel has
 * none to give they are ordinary pages, still made present at once. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_TABLE_MIN ((size_t)4 << 20)

static void *map_huge_aligned(size_t n) {
  char *raw = mmap(NULL, n + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) hk_out_of_memory();
  char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (p > raw) munmap(raw, (size_t)(p - raw));
  size_t tail = (size_t)(raw + n + HUGE_PAGE - (p + n));
  if (tail) munmap(p + n, tail);
#ifdef MADV_HUGEPAGE
  madvise(p, n, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
  madvise(p, n, MADV_POPULATE_WRITE);
#endif
  return p;
}

void *hk_table_alloc(size_t n) {
  if (n >= HUGE_TABLE_MIN && n % HUGE_PAGE == 0) return map_huge_aligned(n);
  return hk_alloc_block(n);
}

void hk_free_block(void *p, size_t n) {
  if (!p) return;
  if (n >= HK_BIG_BLOCK_MIN) munmap(p, n);
  else free(p);
}

void hk_arena_init(hk_arena *a) {
  a->chunks = NULL;
  a->cur = a->end = NULL;
  a->next_size = ARENA_FIRST_CHUNK;
  a->bytes = 0;
}

void hk_arena_release(hk_arena *a) {
  hk_arena_chunk *c = a->chunks;
  while (c) {
    hk_arena_chunk *next = c->next;
    hk_free_block(c, sizeof *c + c->size);
    c = next;
  }
  hk_arena_init(a);
}

static hk_arena_chunk *chunk_new(hk_arena *a, size_t size) {
  hk_arena_chunk *c = NULL;
  if (size == ARENA_MAX_CHUNK) c = hk_prefault_take(sizeof *c + size);
  if (!c) c = hk_alloc_block(sizeof *c + size);
  c->size = size;
  a->bytes += size;
  return c;
}

/* A big request gets its own chunk, linked behind the current one so the
 * current chunk's free space is kept for later small requests. */
static void *arena_alloc_dedicated(hk_arena *a, size_t n) {
  hk_arena_chunk *c = chunk_new(a, (n + 15) & ~(size_t)15);
  if (a->chunks) {
    c->next = a->chunks->next;
    a->chunks->next = c;
  } else {
    c->next = NULL;
    a->chunks = c;
  }
  return c->data;
}

static void arena_new_current(hk_arena *a) {
  hk_arena_chunk *c = chunk_new(a, a->next_size);
  c->next = a->chunks;
  a->chunks = c;
  a->cur = c->data;
  a->end = c->data + c->size;
  if (a->next_size < ARENA_MAX_CHUNK) a->next_size *= 2;
}

void *hk_arena_alloc(hk_arena *a, size_t n, size_t align) {
  if (n == 0) n = 1;
  uintptr_t p = ((uintptr_t)a->cur + (align - 1)) & ~(uintptr_t)(align - 1);
  if (a->cur && p + n <= (uintptr_t)a->end) {
    a->cur = (char *)(p + n);
    return (void *)p;
  }
  if (n > a->next_size / 4) return arena_alloc_dedicated(a, n);
  arena_new_current(a);
  p = (uintptr_t)a->cur;
  a->cur = (char *)(p + n);
  return (void *)p;
}

size_t hk_arena_bytes(const hk_arena *a) { return a->bytes; }

/* Gives back the whole pages inside [from, to). */
static size_t release_pages(char *from, char *to) {
  const uintptr_t page = 4096;
  uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), e = (uintptr_t)to & ~(page - 1);
  if (e <= a) return 0;
  if (madvise((void *)a, e - a, MADV_DONTNEED) != 0) return 0;
  return e - a;
}

/* The first item (packed from data) starting at or after the page
 * boundary that follows the live item at p: no page up to there can be
 * given back, so the items before it need not be read. */
static char *past_live_page(char *data, char *p, size_t item) {
  const uintptr_t page = 4096;
  uintptr_t next = ((uintptr_t)(p + item) + page - 1) & ~(page - 1);
  return data + ((size_t)(next - (uintptr_t)data) + item - 1) / item * item;
}

/* The items of one chunk: packed from its start up to `used` bytes. */
static size_t release_chunk_items(char *data, size_t used, size_t item,
                                  bool (*dead)(const void *item)) {
  size_t released = 0;
  char *run = NULL;   /* start of the current run of dead items */
  char *end = data + used / item * item;
  for (char *p = data; p < end;) {
    if (dead(p)) {
      if (!run) run = p;
      p += item;
      continue;
    }
    if (run) released += release_pages(run, p);
    run = NULL;
    p = past_live_page(data, p, item);
  }
  if (run) released += release_pages(run, end);
  return released;
}

size_t hk_arena_release_items(hk_arena *a, size_t item, bool (*dead)(const void *item)) {
  size_t released = 0;
  for (hk_arena_chunk *c = a->chunks; c; c = c->next) {
    bool current = c == a->chunks && a->cur >= c->data && a->cur <= c->data + c->size;
    size_t used = current ? (size_t)(a->cur - c->data) : c->size;
    released += release_chunk_items(c->data, used, item, dead);
  }
  return released;
}
