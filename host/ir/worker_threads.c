/* worker_threads.c - hk_worker_threads: how many CPU threads hlokit's own work may use (HLOKIT_THREADS, else the online CPUs). */
#include <stdlib.h>
#include <unistd.h>

#include "hlokit/hlokit.h"

int hk_worker_threads(void) {
  const char *env = getenv("HLOKIT_THREADS");
  if (env && *env) {
    char *end;
    long n = strtol(env, &end, 10);
    if (*end == 0 && n >= 1) return n > 1024 ? 1024 : (int)n;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > 1024 ? 1024 : (int)cpus;
}
