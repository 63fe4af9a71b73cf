/* bench-parse.c - times HLO text parse and print of one file against the floor of reading its bytes.
 *
 * Usage: hk-bench-parse FILE [--runs=K] [--form=long|short] [--row]
 *
 * Reports, for K runs each: parse and print time (best and median, CLOCK_MONOTONIC),
 * instructions/s and MB/s; their best CPU time (user + system, steady when
 * the machine is shared); the floor (read the file + memchr over every
 * byte); peak RSS (getrusage ru_maxrss) above the resident input, per
 * instruction; and hk_module_memory() per instruction.  --row prints one tab-separated
 * line instead (for scripts/bench.sh):
 *   instrs bytes parse_best parse_median print_best print_median floor_best
 *   rss_bytes_per_instr module_bytes_per_instr out_bytes parse_cpu print_cpu */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hlokit/hlokit.h"

#define MAX_RUNS 1000

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* CPU time of this process (user + system), immune to other load on the machine. */
static double cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts t[0..n) and returns the median. */
static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* The floor: read the bytes and touch every one of them (count lines). */
static double time_floor(const char *path, long *lines) {
  double t0 = now();
  hk_buf b;
  hk_buf_init(&b);
  hk_status *st = hk_buf_read_file(&b, path);
  if (st) hk_status_free(st);
  const char *buf = b.data;
  long n = 0;
  for (const char *p = buf, *end = buf + (buf ? b.len : 0); p < end; n++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) break;
    p = nl + 1;
  }
  double t = now() - t0;
  hk_buf_free(&b);
  *lines = n;
  return t;
}

/* Resident set size now, in bytes (from /proc/self/statm). */
static long rss_now(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
}

static long peak_rss(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss * 1024L;
}

static int64_t count_instrs(const hk_module *m) {
  int64_t n = 0;
  for (int32_t i = 0; i < m->n_computations; i++) n += m->computations[i]->n_instrs;
  return n;
}

typedef struct result {
  int64_t instrs;
  size_t bytes, out_bytes;
  double parse_best, parse_median, print_best, print_median, floor_best;
  double parse_cpu, print_cpu;     /* best CPU time (user + system) */
  double rss_per_instr, module_per_instr;
} result;

/* K parses (each module freed) then K prints of one parsed module. */
static int run(const char *path, int runs, hk_print_form form, result *r) {
  hk_buf file;
  hk_buf_init(&file);
  hk_status *rst = hk_buf_read_file(&file, path);
  if (rst) {
    fprintf(stderr, "hk-bench-parse: %s\n", rst->message);
    hk_status_free(rst);
    return 2;
  }
  char *text = file.data;
  size_t len = file.len;
  r->bytes = len;
  double tp[MAX_RUNS], tq[MAX_RUNS], tf[MAX_RUNS], cp[MAX_RUNS], cq[MAX_RUNS];
  long base_rss = rss_now();
  hk_module *m = NULL;
  for (int i = 0; i < runs; i++) {
    if (m) hk_module_free(m);
    m = NULL;
    double c0 = cpu_now(), t0 = now();
    hk_status *st = hk_parse_module(text, len, path, &m);
    tp[i] = now() - t0;
    cp[i] = cpu_now() - c0;
    if (st) {
      fprintf(stderr, "%s\n", st->message);
      hk_status_free(st);
      free(text);
      return 2;
    }
    if (i == 0) {
      long peak = peak_rss();
      r->instrs = count_instrs(m);
      r->rss_per_instr = r->instrs ? (double)(peak - base_rss) / (double)r->instrs : 0;
      r->module_per_instr = r->instrs ? (double)hk_module_memory(m) / (double)r->instrs : 0;
    }
  }
  for (int i = 0; i < runs; i++) {
    hk_buf out;
    hk_buf_init(&out);
    double c0 = cpu_now(), t0 = now();
    hk_print_module(m, form, &out);
    tq[i] = now() - t0;
    cq[i] = cpu_now() - c0;
    r->out_bytes = out.len;
    hk_buf_free(&out);
  }
  hk_module_free(m);
  free(text);
  for (int i = 0; i < runs; i++) {
    long lines;
    tf[i] = time_floor(path, &lines);
  }
  r->parse_median = median(tp, runs);
  r->parse_best = tp[0];
  r->print_median = median(tq, runs);
  r->print_best = tq[0];
  median(tf, runs);
  median(cp, runs);
  median(cq, runs);
  r->parse_cpu = cp[0];
  r->print_cpu = cq[0];
  r->floor_best = tf[0];
  return 0;
}

static void report(const char *path, int runs, const result *r) {
  double mb = (double)r->bytes / 1e6, n = (double)r->instrs;
  printf("%s: %lld instructions, %.1f MB, %d runs\n", path, (long long)r->instrs, mb, runs);
  printf("  parse  best %8.4f s  median %8.4f s  %7.2f M instr/s  %7.1f MB/s\n", r->parse_best,
         r->parse_median, n / r->parse_best / 1e6, mb / r->parse_best);
  printf("  print  best %8.4f s  median %8.4f s  %7.2f M instr/s  %7.1f MB/s (%.1f MB out)\n",
         r->print_best, r->print_median, n / r->print_best / 1e6,
         (double)r->out_bytes / 1e6 / r->print_best, (double)r->out_bytes / 1e6);
  printf("  cpu    parse best %8.4f s  print best %8.4f s  parse+print %7.2f M instr/s\n",
         r->parse_cpu, r->print_cpu, n / (r->parse_cpu + r->print_cpu) / 1e6);
  printf("  floor  best %8.4f s (read + memchr)                  %7.1f MB/s\n", r->floor_best,
         mb / r->floor_best);
  printf("  memory peak RSS above input %.0f B/instr, module %.0f B/instr\n", r->rss_per_instr,
         r->module_per_instr);
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int runs = 3, row = 0;
  hk_print_form form = HK_PRINT_LONG;
  hk_set_worker_threads(0);   /* as the hlokit executable: the CPUs (HLOKIT_THREADS) */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--runs=", 7) == 0) runs = atoi(a + 7);
    else if (strcmp(a, "--form=long") == 0) form = HK_PRINT_LONG;
    else if (strcmp(a, "--form=short") == 0) form = HK_PRINT_SHORT;
    else if (strcmp(a, "--row") == 0) row = 1;
    else if (a[0] != '-' && !path) path = a;
    else {
      fprintf(stderr, "usage: hk-bench-parse FILE [--runs=K] [--form=long|short] [--row]\n");
      return 2;
    }
  }
  if (!path || runs < 1 || runs > MAX_RUNS) {
    fprintf(stderr, "usage: hk-bench-parse FILE [--runs=K (1..%d)] [--form=long|short] [--row]\n",
            MAX_RUNS);
    return 2;
  }
  result r = {0};
  int rc = run(path, runs, form, &r);
  if (rc) return rc;
  if (row)
    printf("%lld\t%zu\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%.1f\t%.1f\t%zu\t%.6f\t%.6f\n",
           (long long)r.instrs, r.bytes, r.parse_best, r.parse_median, r.print_best,
           r.print_median, r.floor_best, r.rss_per_instr, r.module_per_instr, r.out_bytes,
           r.parse_cpu, r.print_cpu);
  else report(path, runs, &r);
  return 0;
}
