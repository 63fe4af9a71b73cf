/* bench-partition.c - end-to-end partitioner benchmark: read, parse, run a pass pipeline (spmd-partitioning) and print one HLO module, each phase timed in process.
 *
 * Usage: hk-bench-partition FILE [--passes=PIPELINE] [--runs=R] [--row]
 *
 * The pipeline is built from the default plugin directories exactly as
 * `hlokit opt FILE --passes=PIPELINE --no-verify -o OUT` builds it, and
 * num_partitions comes from the module header.  Each run starts from the
 * file (the pass rewrites the module), the best time of each phase over R
 * runs is kept.  Phases are timed on the process CPU clock (the same as
 * wall time on an idle machine, and unaffected by other processes taking
 * turns on a busy one); the whole run is also timed on the wall clock.
 * --row prints "instrs out_instrs read_s parse_s pass_s print_s total_s
 * all_reduce other_collectives rss_bytes_per_instr out_bytes wall_s"
 * (total_s the best whole run, CPU; wall_s the best whole run, wall). */
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

static double now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

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
  double read_s, parse_s, pass_s, print_s, total_s, wall_s;
  counts in, out;
  size_t out_bytes;
} run_result;

static run_result run_once(const char *path, hk_registry *reg, const char *passes) {
  run_result r;
  hk_file_bytes text;
  hk_buf out;
  hk_buf_init(&out);
  hk_module *m = NULL;
  double w0 = clock_s(CLOCK_MONOTONIC), t0 = now();
  hk_status *rst = hk_file_bytes_open(path, &text);   /* as hlokit's CLI reads a module */
  if (rst) die("read", rst);
  double t1 = now();
  hk_status *st = hk_parse_module(text.data, text.len, path, &m);
  if (st) die("parse", st);
  double t2 = now();
  r.in = count_module(m);
  hk_pass *pl = build_pipeline(reg, passes, &m->config);
  double t3 = now();
  bool changed = false;
  st = hk_pass_run(pl, m, NULL, &changed);
  if (st) die(passes, st);
  double t4 = now();
  hk_print_module(m, HK_PRINT_LONG, &out);
  double t5 = now(), w5 = clock_s(CLOCK_MONOTONIC);
  r.out = count_module(m);
  r.out_bytes = out.len;
  r.read_s = t1 - t0;
  r.parse_s = t2 - t1;
  r.pass_s = t4 - t3;
  r.print_s = t5 - t4;
  r.total_s = (t5 - t0) - (t3 - t2);   /* building the pipeline is not the module's cost */
  r.wall_s = w5 - w0;
  hk_pass_destroy(pl);
  hk_module_free(m);
  hk_file_bytes_close(&text);
  hk_buf_free(&out);
  return r;
}

static void keep_best(run_result *best, const run_result *r, bool first) {
  if (first) {
    *best = *r;
    return;
  }
  if (r->read_s < best->read_s) best->read_s = r->read_s;
  if (r->parse_s < best->parse_s) best->parse_s = r->parse_s;
  if (r->pass_s < best->pass_s) best->pass_s = r->pass_s;
  if (r->print_s < best->print_s) best->print_s = r->print_s;
  if (r->total_s < best->total_s) best->total_s = r->total_s;
  if (r->wall_s < best->wall_s) best->wall_s = r->wall_s;
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
    printf("%lld\t%lld\t%.6f\t%.6f\t%.6f\t%.6f\t%.6f\t%lld\t%lld\t%.0f\t%zu\t%.6f\n",
           (long long)best.in.instrs, (long long)best.out.instrs, best.read_s, best.parse_s,
           best.pass_s, best.print_s, best.total_s, (long long)best.out.all_reduce,
           (long long)best.out.other_collectives, rss, best.out_bytes, best.wall_s);
  else
    printf("%s: %lld -> %lld instructions; CPU s: read %.4f, parse %.4f, %s %.4f, print %.4f; "
           "total %.4f s = %.3f M instr/s (wall %.4f s); %lld all-reduce, %lld other "
           "collectives; peak RSS %.0f B/instr\n",
           path, (long long)best.in.instrs, (long long)best.out.instrs, best.read_s,
           best.parse_s, passes, best.pass_s, best.print_s, best.total_s,
           (double)best.in.instrs / best.total_s / 1e6, best.wall_s,
           (long long)best.out.all_reduce, (long long)best.out.other_collectives, rss);
  hk_registry_free(reg);
  return 0;
}
