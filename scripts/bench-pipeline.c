/* bench-pipeline.c - what pass dispatch costs: a pipeline of K no-op passes
 * (each walks every instruction) over an N-instruction module, against the
 * same K walks called directly.
 *
 * Usage: hk-bench-pipeline [--instructions=N] [--passes=K] [--runs=R] [--row]
 *
 * The pass is registered, created by name from a --passes string and run
 * through the pipeline's vtable loop, exactly as `hlokit opt` does.  On a
 * busy machine the end-to-end A/B of two memory-bound loops varies by a few
 * percent run to run, far more than dispatch costs, so the dispatch cost is
 * also measured on its own: the same pipeline over a one-instruction module
 * (many times), minus the same number of direct calls, per pass.  The
 * overhead is that cost times K over the direct time at N instructions.
 * --row prints "instrs passes direct_s pipeline_s ab_pct dispatch_ns
 * overhead_pct". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hlokit/hlokit.h"
#include "pipeline/pipeline.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The passes' own work: read every instruction's opcode. */
static volatile uint64_t sink;

__attribute__((noinline)) static void walk(const hk_module *m) {
  uint64_t acc = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) acc += i->opcode;
  sink += acc;
}

static hk_status *walk_run(hk_pass *self, hk_module *m, const hk_exec_threads *t, bool *changed) {
  (void)self, (void)t;
  walk(m);
  *changed = false;
  return NULL;
}
static void walk_destroy(hk_pass *self) { free(self); }
static const hk_pass_vtable walk_vt = {sizeof(hk_pass_vtable), "walk", walk_run, walk_destroy,
                                       NULL};
static hk_pass *walk_create(const hk_option_values *o, hk_registry *r, hk_status **e) {
  (void)o, (void)r, (void)e;
  hk_pass *p = malloc(sizeof *p);
  p->vt = &walk_vt;
  return p;
}
static const hk_pass_desc walk_desc = {sizeof(hk_pass_desc), "walk", "no-op walk", NULL, 0,
                                       walk_create};

/* An entry computation: one parameter and a chain of n-1 adds. */
static hk_module *chain_module(int64_t n) {
  hk_module *m = hk_module_new("bench");
  hk_computation *c = hk_computation_new(m, "main");
  const int64_t dims[1] = {16};
  const hk_shape *s = hk_shape_array(m, HK_F32, 1, dims);
  hk_instr *prev = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, "p0");
  hk_instr *p0 = prev;
  for (int64_t k = 1; k < n; k++) {
    hk_instr *ops[2] = {prev, p0};
    prev = hk_instr_new(c, HK_OP_ADD, s, 2, ops, "add");
  }
  hk_computation_set_root(c, prev);
  hk_module_set_entry(m, c);
  return m;
}

static double time_direct(const hk_module *m, int passes) {
  double t0 = now();
  for (int k = 0; k < passes; k++) walk(m);   /* the same function the pass calls */
  return now() - t0;
}

static double time_pipeline(hk_pass *pl, hk_module *m) {
  bool changed;
  double t0 = now();
  hk_status *st = hk_pass_run(pl, m, NULL, &changed);
  double t = now() - t0;
  if (st) {
    fprintf(stderr, "hk-bench-pipeline: %s\n", st->message);
    exit(2);
  }
  return t;
}

/* Nanoseconds the pipeline adds per pass (tiny module, many repeats). */
static double dispatch_ns(hk_pass *pl, int passes) {
  hk_module *tiny = chain_module(1);
  const int reps = 2000;
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double tp = 0, td = 0;
    for (int k = 0; k < reps; k++) tp += time_pipeline(pl, tiny);
    for (int k = 0; k < reps; k++) td += time_direct(tiny, passes);
    double ns = (tp - td) / reps / passes * 1e9;
    if (ns < best) best = ns;
  }
  hk_module_free(tiny);
  return best < 0 ? 0 : best;
}

static hk_pass *build_pipeline(hk_registry *reg, int passes) {
  hk_buf text;
  hk_buf_init(&text);
  for (int k = 0; k < passes; k++) hk_buf_printf(&text, "%swalk", k ? "," : "");
  hk_buf_put(&text, "", 1);
  hk_pipeline_spec spec;
  hk_pass *pl = NULL;
  hk_status *st = hk_pipeline_spec_parse(text.data, NULL, &spec);
  if (!st) st = hk_pipeline_build(reg, &spec, "bench", &pl);
  hk_pipeline_spec_free(&spec);
  hk_buf_free(&text);
  if (st) {
    fprintf(stderr, "hk-bench-pipeline: %s\n", st->message);
    exit(2);
  }
  return pl;
}

static long arg_long(const char *arg, const char *name, long dflt) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && arg[n] == '=' ? atol(arg + n + 1) : dflt;
}

int main(int argc, char **argv) {
  long n = 100000, passes = 1000, runs = 5;
  bool row = false;
  for (int i = 1; i < argc; i++) {
    n = arg_long(argv[i], "--instructions", n);
    passes = arg_long(argv[i], "--passes", passes);
    runs = arg_long(argv[i], "--runs", runs);
    row |= strcmp(argv[i], "--row") == 0;
  }
  hk_registry *reg = hk_registry_new();
  hk_status *st = hk_registry_add_pass(reg, &walk_desc);
  if (st) return fprintf(stderr, "%s\n", st->message), 2;
  hk_module *m = chain_module(n);
  hk_pass *pl = build_pipeline(reg, (int)passes);
  double best_direct = 1e30, best_pipe = 1e30;
  for (long r = 0; r < runs; r++) {   /* interleaved so drift hits both */
    double d = time_direct(m, (int)passes), p = time_pipeline(pl, m);
    if (d < best_direct) best_direct = d;
    if (p < best_pipe) best_pipe = p;
  }
  double ab = 100.0 * (best_pipe - best_direct) / best_direct;
  double ns = dispatch_ns(pl, (int)passes);
  double pct = 100.0 * ns * 1e-9 * (double)passes / best_direct;
  if (row)
    printf("%ld\t%ld\t%.6f\t%.6f\t%.3f\t%.1f\t%.5f\n", n, passes, best_direct, best_pipe, ab,
           ns, pct);
  else
    printf("%ld no-op passes over %ld instructions (best of %ld): direct %.4f s, "
           "pipeline %.4f s (A/B %+.2f%%, noise-bound)\n"
           "dispatch: %.1f ns per pass -> %.5f%% of the passes' own work\n",
           passes, n, runs, best_direct, best_pipe, ab, ns, pct);
  hk_pass_destroy(pl);
  hk_module_free(m);
  hk_registry_free(reg);
  return 0;
}
