/* prefault.c - fresh memory made present ahead of need by a helper thread:
 * arena chunks mapped and populated before they are asked for, and ranges
 * about to be filled (a print buffer) populated while the filling starts.
 * The kernel's zeroing of fresh pages (a fifth to a half of a big module's
 * parse and partition time, measured with perf) so runs on another core. */
#include "arena.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/* Chunks kept ready: enough to cover a burst of allocation while the
 * helper catches up, little enough that an idle process holds 16 MiB. */
#define READY_MAX 4
/* Ranges waiting to be populated; more than that are populated in place. */
#define RANGES_MAX 8

typedef struct range {
  uintptr_t from, to;
} range;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_work = PTHREAD_COND_INITIALIZER;
static void *ready[READY_MAX];
static int n_ready;
static size_t chunk_bytes;   /* the one chunk size served, set by the first take */
static range ranges[RANGES_MAX];
static int n_ranges;
static enum { POOL_UNDECIDED, POOL_ON, POOL_OFF } pool_state;

static void *map_present(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Makes [from, to) present as if written.  The range may have been freed
 * (or even mapped again for another use) since it was queued: populating
 * then fails or prefaults memory its owner will write anyway, and never
 * changes what it holds. */
static void populate_now(uintptr_t from, uintptr_t to) {
#ifdef MADV_POPULATE_WRITE
  madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
  (void)from;
  (void)to;
#endif
}

static bool has_work_locked(void) {
  return n_ranges > 0 || (chunk_bytes && n_ready < READY_MAX);
}

/* The helper: ranges first (someone is filling them now), then chunks. */
static void *helper_loop(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&pool_mu);
    while (!has_work_locked()) pthread_cond_wait(&pool_work, &pool_mu);
    if (n_ranges > 0) {
      range r = ranges[0];
      memmove(ranges, ranges + 1, (size_t)--n_ranges * sizeof *ranges);
      pthread_mutex_unlock(&pool_mu);
      populate_now(r.from, r.to);
      continue;
    }
    size_t n = chunk_bytes;
    pthread_mutex_unlock(&pool_mu);
    void *p = map_present(n);
    pthread_mutex_lock(&pool_mu);
    if (p && n == chunk_bytes) ready[n_ready++] = p;
    else if (p) munmap(p, n);
    if (!p) chunk_bytes = 0;   /* out of memory: idle until the next take asks again */
    pthread_mutex_unlock(&pool_mu);
  }
  return NULL;
}

/* A child forked while the helper held the lock would wait on it forever;
 * holding it across fork() avoids that.  The child has no helper thread:
 * it keeps the ready chunks (copies) and starts its own on next need, with
 * a fresh condition (the copy may still count the parent's helper as a
 * waiter, which would swallow a wakeup). */
static void fork_prepare(void) { pthread_mutex_lock(&pool_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool_mu); }
static void fork_child(void) {
  if (pool_state == POOL_ON) pool_state = POOL_UNDECIDED;
  n_ranges = 0;
  pool_work = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
  pthread_mutex_unlock(&pool_mu);
}

/* Starts the helper once the program has asked for a second thread
 * (hk_set_worker_threads; until then the library starts none), once per
 * process and once more in a forked child; true if it runs. */
static bool helper_on_locked(void) {
  if (pool_state != POOL_UNDECIDED) return pool_state == POOL_ON;
  if (hk_worker_threads() < 2) return false;
  pool_state = POOL_OFF;
  static bool fork_handlers;
  if (!fork_handlers) fork_handlers = pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
  pthread_attr_t attr;
  pthread_t t;
  if (!fork_handlers || pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, helper_loop, NULL) == 0) pool_state = POOL_ON;
  pthread_attr_destroy(&attr);
  return pool_state == POOL_ON;
}

void *hk_prefault_take(size_t n) {
  void *p = NULL;
  pthread_mutex_lock(&pool_mu);
  if (helper_on_locked()) {
    if (!chunk_bytes) chunk_bytes = n;
    if (n == chunk_bytes && n_ready > 0) p = ready[--n_ready];
    pthread_cond_signal(&pool_work);
  }
  pthread_mutex_unlock(&pool_mu);
  return p;
}

void hk_populate(void *from, void *to) {
  const uintptr_t page = 4096;
  uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), e = (uintptr_t)to & ~(page - 1);
  if (e <= a || e - a < HK_BIG_BLOCK_MIN) return;   /* a fault a page costs little here */
  pthread_mutex_lock(&pool_mu);
  bool queued = helper_on_locked() && n_ranges < RANGES_MAX;
  if (queued) {
    ranges[n_ranges++] = (range){a, e};
    pthread_cond_signal(&pool_work);
  }
  pthread_mutex_unlock(&pool_mu);
  if (!queued) populate_now(a, e);
}
