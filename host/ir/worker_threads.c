/* worker_threads.c - the one knob for every thread the library starts:
 * none unless the caller asks (hk_set_worker_threads); the hlokit
 * executable asks for the automatic count (HLOKIT_THREADS, else the CPUs). */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "hlokit/hlokit.h"

/* What the caller asked for: a count >= 1, or 0 for the automatic count. */
static atomic_int asked = 1;

void hk_set_worker_threads(int n) {
  if (n >= 0) atomic_store_explicit(&asked, n > 1024 ? 1024 : n, memory_order_relaxed);
}

static int automatic_count(void) {
  const char *env = getenv("HLOKIT_THREADS");
  if (env && *env) {
    char *end;
    long n = strtol(env, &end, 10);
    if (*end == 0 && n >= 1) return n > 1024 ? 1024 : (int)n;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > 1024 ? 1024 : (int)cpus;
}

int hk_worker_threads(void) {
  int n = atomic_load_explicit(&asked, memory_order_relaxed);
  return n >= 1 ? n : automatic_count();
}
