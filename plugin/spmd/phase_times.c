/* phase_times.c - the driver's phase clock: with HLOKIT_SPMD_TIMES set,
 * each phase of a run (and each cleanup pass) prints its wall and process
 * CPU time and the process's resident memory after it to stderr, so where
 * partitioning time and memory go is a measurement, not a guess (CPU time
 * is the steadier one on a shared machine). */
#include <time.h>

#include "spmd_internal.h"

static double seconds(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Resident memory in MiB (0 where /proc is not there). */
static double resident_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (double)resident * 4096.0 / (1024.0 * 1024.0);
}

/* Peak resident memory so far in MiB (VmHWM; 0 where /proc is not there):
 * a phase's transient arrays show here, not in the resident column. */
static double peak_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  long kb = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
  if (f) fclose(f);
  return (double)kb / 1024.0;
}

void spmd_phase_clock_start(spmd_phase_clock *c) {
  const char *e = getenv("HLOKIT_SPMD_TIMES");
  c->on = e && *e && strcmp(e, "0") != 0;
  c->last = c->on ? seconds(CLOCK_MONOTONIC) : 0;
  c->last_cpu = c->on ? seconds(CLOCK_PROCESS_CPUTIME_ID) : 0;
}

void spmd_phase_done(spmd_phase_clock *c, const char *phase) {
  if (!c->on) return;
  double now = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
  fprintf(stderr, "spmd-partitioning: %-26s %9.3f ms wall %9.3f ms cpu %8.1f MiB %8.1f MiB peak\n",
          phase, (now - c->last) * 1e3, (cpu - c->last_cpu) * 1e3, resident_mib(), peak_mib());
  c->last = now;
  c->last_cpu = cpu;
}
