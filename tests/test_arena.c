/* test_arena.c - Check suite for the module arena's big blocks: chunks made
 * present ahead of need by the prefault helper are zeroed, writable, of the
 * size asked, and arenas built from them read as zeros; HLOKIT_THREADS=1
 * keeps the helper off. */
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "ir/arena.h"
#include "testutil.h"

#define CHUNK ((size_t)1 << 20)

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (p[k]) return false;
  return true;
}

/* The block the helper has made ready by now, waiting up to 10 s. */
static void *take_when_ready(size_t n) {
  for (int k = 0; k < 1000; k++) {
    void *p = hk_prefault_take(n);
    if (p) return p;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  return NULL;
}

/* Runs body in a forked child (the helper is decided once per process, a
 * forked child decides afresh); true if it returned true. */
static bool in_child(bool (*body)(void)) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) _exit(body() ? 0 : 1);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

START_TEST(prefault_serves_zeroed_blocks_of_its_size) {
  unsetenv("HLOKIT_THREADS");
  hk_set_worker_threads(0);   /* the helper runs only when asked for */
  void *first = hk_prefault_take(CHUNK);   /* starts the helper */
  if (first) hk_free_block(first, CHUNK);
  if (hk_worker_threads() < 2) return;   /* no helper on one core */
  for (int round = 0; round < 6; round++) {   /* more than the pool holds at once */
    unsigned char *p = take_when_ready(CHUNK);
    ck_assert_ptr_nonnull(p);
    ck_assert(all_zero(p, CHUNK));
    memset(p, 0xab, CHUNK);
    hk_free_block(p, CHUNK);
  }
  ck_assert_ptr_null(hk_prefault_take(CHUNK / 2));   /* only the first size is served */
}
END_TEST

/* In a child of its own: CK_FORK=no runs every test in one process. */
static bool serves_nothing_when_off(void) {
  setenv("HLOKIT_THREADS", "1", 1);
  bool ok = !hk_prefault_take(CHUNK);
  nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
  return ok && !hk_prefault_take(CHUNK);
}

START_TEST(prefault_off_serves_nothing) { ck_assert(in_child(serves_nothing_when_off)); }
END_TEST

/* Enough to reach the arena's biggest chunks, which come from the pool. */
START_TEST(big_arena_reads_as_zeros) {
  unsetenv("HLOKIT_THREADS");
  hk_arena a;
  hk_arena_init(&a);
  size_t total = 0;
  for (int k = 0; total < ((size_t)48 << 20); k++) {
    size_t n = 1000 + (size_t)(k % 7) * 512;
    unsigned char *p = hk_arena_alloc(&a, n, 16);
    ck_assert(((uintptr_t)p & 15) == 0);
    ck_assert(all_zero(p, n));
    memset(p, 0x5a, n);
    total += n;
    if (k % 1000 == 0) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  ck_assert_uint_ge(hk_arena_bytes(&a), total);
  hk_arena_release(&a);
}
END_TEST

static bool takes_a_zeroed_block(void) {
  void *q = take_when_ready(CHUNK);
  return hk_worker_threads() < 2 || (q && all_zero(q, CHUNK));
}

/* A child forked while the helper runs can still take blocks (its own
 * helper starts) and exits normally. */
START_TEST(prefault_survives_fork) {
  unsetenv("HLOKIT_THREADS");
  hk_set_worker_threads(0);
  void *p = take_when_ready(CHUNK);
  if (p) hk_free_block(p, CHUNK);
  ck_assert(in_child(takes_a_zeroed_block));
}
END_TEST

START_TEST(worker_threads_follow_the_environment) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  hk_set_worker_threads(2);   /* an exact count: the environment is not read */
  setenv("HLOKIT_THREADS", "3", 1);
  ck_assert_int_eq(hk_worker_threads(), 2);
  hk_set_worker_threads(0);   /* the automatic count follows HLOKIT_THREADS */
  setenv("HLOKIT_THREADS", "1", 1);
  ck_assert_int_eq(hk_worker_threads(), 1);
  setenv("HLOKIT_THREADS", "3", 1);
  ck_assert_int_eq(hk_worker_threads(), 3);
  setenv("HLOKIT_THREADS", "0", 1);   /* not a count: the CPUs decide */
  ck_assert_int_eq(hk_worker_threads(), cpus < 1 ? 1 : (int)cpus);
  setenv("HLOKIT_THREADS", "2x", 1);
  ck_assert_int_eq(hk_worker_threads(), cpus < 1 ? 1 : (int)cpus);
  unsetenv("HLOKIT_THREADS");
  ck_assert_int_eq(hk_worker_threads(), cpus < 1 ? 1 : (int)cpus);
  hk_set_worker_threads(1);
  ck_assert_int_eq(hk_worker_threads(), 1);
}
END_TEST

static Suite *arena_suite(void) {
  Suite *s = suite_create("arena");
  TCase *tc = tcase_create("prefault");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, prefault_serves_zeroed_blocks_of_its_size);
  tcase_add_test(tc, big_arena_reads_as_zeros);
  tcase_add_test(tc, prefault_survives_fork);
  suite_add_tcase(s, tc);
  TCase *off = tcase_create("prefault off");
  tcase_add_test(off, prefault_off_serves_nothing);
  tcase_add_test(off, worker_threads_follow_the_environment);
  suite_add_tcase(s, off);
  return s;
}

HK_TEST_MAIN(arena_suite)
