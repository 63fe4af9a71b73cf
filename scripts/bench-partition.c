/* bench-partition.c - end-to-end partitioner benchmark: read, parse, run a pass pipeline (spmd-partitioning) and print one HLO module, each phase timed in process.
 *
 * Usage: hk-bench-partition FILE [--passes=PIPELINE] [--runs=R] [--row]
 *
 * The pipeline is built from the default plugin directories exactly as
 * `hlokit opt FILE --passes=PIPELINE --no-verify -o OUT` builds it, and
 * num_partitions comes from the module header.  Each run starts from the
 * file (the pass rewrites the module); the best time of each phase over R
 * runs is kept.  Phases are timed on the wall clock: the library uses the
 * machine's second core (the prefault helper makes fresh pages present
 * there), so wall time is what a user waits for.  The whole run is also
 * timed on the calling thread's CPU clock (its own work, unaffected by
 * other processes taking turns on a busy machine) and on the process CPU
 * clock (all threads).
 * --row prints "instrs out_instrs read_s parse_s pass_s print_s wall_s
 * all_reduce other_collectives rss_bytes_per_instr out_bytes thread_cpu_s
 * process_cpu_s" (each the best over the runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hlokit/hlokit.h"
#include "pipeline/pipeline.h"

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static _Noreturn void die(const char *what, hk_status *st) {
  fprintf(stderr, "hk-bench-partition: %s: %s\n", what, st ? st->message : "failed");
  exit(2);
}


static hk_registry *load_registry(void) {
  hk_registry *reg = hk_registry_new();
  hk_plugin_sources src = {0};
  hk_status *st = hk_plugin_load_all(reg, &src);
  if (st) die("loading plugins", st);
  return reg;
}

static hk_pass *build_pipeline(hk_registry *reg, const char *text, const hk_module_config *cfg) {
  hk_pipeline_spec spec;
  hk_pass *pl = NULL;
  hk_status *st = hk_pipeline_spec_parse(text, cfg, &spec);
  if (!st) st = hk_pipeline_build(reg, &spec, "bench", &pl);
  hk_pipeline_spec_free(&spec);
  if (st) die(text, st);
  return pl;
}

typedef struct counts {
  int64_t instrs, all_reduce, other_collectives;
} counts;

static counts count_module(const hk_module *m) {
  counts c = {0, 0, 0};
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) {
      c.instrs++;
      switch ((hk_opcode)i->opcode) {
        case HK_OP_ALL_REDUCE: c.all_reduce++; break;
        case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL: case HK_OP_COLLECTIVE_PERMUTE:
        case HK_OP_REDUCE_SCATTER: c.other_collectives++; break;
        default: break;
      }
    }
  return c;
}

/* One run's phase times; the module's counts before and after. */
typedef struct run_result {
  double read_s, parse_s, pass_s, print_s, wall_s, thread_cpu_s, process_cpu_s;
  counts in, out;
  size_t out_bytes;
} run_result;

/* A moment on the three clocks. */
typedef struct stamp {
  double wall, thread_cpu, process_cpu;
} stamp;

static stamp stamp_now(void) {
  return (stamp){now(), clock_s(CLOCK_THREAD_CPUTIME_ID), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}

static run_result run_once(const char *path, hk_registry *reg, const char *passes) {
  run_result r;
  hk_file_bytes text;
  hk_buf out;
  hk_buf_init(&out);
  hk_module *m = NULL;
  stamp s0 = stamp_now();
  hk_status *rst = hk_file_bytes_open(path, &text);   /* as hlokit's CLI reads a module */
  if (rst) die("read", rst);
  double t1 = now();
  hk_status *st = hk_parse_module(text.data, text.len, path, &m);
  if (st) die("parse", st);
  stamp s2 = stamp_now();
  r.in = count_module(m);
  hk_pass *pl = build_pipeline(reg, passes, &m->config);
  stamp s3 = stamp_now();
  bool changed = false;
  st = hk_pass_run(pl, m, NULL, &changed);
  if (st) die(passes, st);
  double t4 = now();
  hk_print_module(m, HK_PRINT_LONG, &out);
  stamp s5 = stamp_now();
  r.out = count_module(m);
  r.out_bytes = out.len;
  r.read_s = t1 - s0.wall;
  r.parse_s = s2.wall - t1;
  r.pass_s = t4 - s3.wall;
  r.print_s = s5.wall - t4;
  /* counting and building the pipeline are not the module's cost */
  r.wall_s = (s5.wall - s0.wall) - (s3.wall - s2.wall);
  r.thread_cpu_s = (s5.thread_cpu - s0.thread_cpu) - (s3.thread_cpu - s2.thread_cpu);
  r.process_cpu_s = (s5.process_cpu - s0.process_cpu) - (s3.process_cpu - s2.process_cpu);
  hk_pass_destroy(pl);
  hk_module_free(m);
  hk_file_bytes_close(&text);
  hk_buf_free(&out);
  return r;
}

static void keep_min(double *best, double v) {
  if (v < *best) *best = v;
}

static void keep_best(run_result *best, const run_result *r, bool first) {
  if (first) {
    *best = *r;
    return;
  }
  keep_min(&best->read_s, r->read_s);
  keep_min(&best->parse_s, r->parse_s);
  keep_min(&best->pass_s, r->pass_s);
  keep_min(&best->print_s, r->print_s);
  keep_min(&best->wall_s, r->wall_s);
  keep_min(&best->thread_cpu_s, r->thread_cpu_s);
  keep_min(&best->process_cpu_s, r->process_cpu_s);
}

static double peak_rss_bytes(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_maxrss * 1024.0;
}

int main(int argc, char **argv) {
  const char *path = NULL, *passes = "spmd-partitioning";
  long runs = 3;
  bool row = false;
  hk_set_worker_threads(0);   /* as the hlokit executable: the CPUs (HLOKIT_THREADS) */
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--passes=", 9) == 0) passes = argv[i] + 9;
    else if (strncmp(argv[i], "--runs=", 7) == 0) runs = atol(argv[i] + 7);
    else if (strcmp(argv[i], "--row") == 0) row = true;
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      fprintf(stderr, "usage: hk-bench-partition FILE [--passes=PIPELINE] [--runs=R] [--row]\n");
      return 2;
    }
  }
  if (!path) return fprintf(stderr, "hk-bench-partition: no input file\n"), 2;
  hk_registry *reg = load_registry();
  run_result best = {0};
  for (long k = 0; k < (runs < 1 ? 1 : runs); k++) {
    run_result r = run_once(path, reg, passes);
    keep_best(&best, &r, k == 0);
  }
  double rss = peak_rss_bytes() / (double)best.in.instrs;
  if (row)
    printf("%lld\t%lld\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%lld\t%lld\t%.0f\t%zu\t%.6f\t%.6f\n",
           (long long)best.in.instrs, (long long)best.out.instrs, best.read_s, best.parse_s,
           best.pass_s, best.print_s, best.wall_s, (long long)best.out.all_reduce,
           (long long)best.out.other_collectives, rss, best.out_bytes, best.thread_cpu_s,
           best.process_cpu_s);
  else
    printf("%s: %lld -> %lld instructions; wall s: read %.4f, parse %.4f, %s %.4f, "
           "print %.4f; total %.4f s = %.3f M instr/s (CPU s: this thread %.4f, all threads "
           "%.4f); %lld all-reduce, %lld other collectives; peak RSS %.0f B/instr\n",
           path, (long long)best.in.instrs, (long long)best.out.instrs, best.read_s,
           best.parse_s, passes, best.pass_s, best.print_s, best.wall_s,
           (double)best.in.instrs / best.wall_s / 1e6, best.thread_cpu_s, best.process_cpu_s,
           (long long)best.out.all_reduce, (long long)best.out.other_collectives, rss);
  hk_registry_free(reg);
  return 0;
}
