/* phase_times.c - the driver's phase clock: with HLOKIT_SPMD_TIMES set,
 * each phase of a run (and each cleanup pass) prints its wall time to
 * stderr, so where partitioning time goes is a measurement, not a guess. */
#include <time.h>

#include "spmd_internal.h"

static double wall_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void spmd_phase_clock_start(spmd_phase_clock *c) {
  const char *e = getenv("HLOKIT_SPMD_TIMES");
  c->on = e && *e && strcmp(e, "0") != 0;
  c->last = c->on ? wall_seconds() : 0;
}

void spmd_phase_done(spmd_phase_clock *c, const char *phase) {
  if (!c->on) return;
  double now = wall_seconds();
  fprintf(stderr, "spmd-partitioning: %-26s %9.3f ms\n", phase, (now - c->last) * 1e3);
  c->last = now;
}
