/* cmd_check.c - `hlokit check`: evaluate a module globally and partitioned
 * on N simulated devices with the same inputs, and compare. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_dist.h"
#include "check_eval.h"
#include "check_sampled.h"
#include "commands.h"
#include "pass_counters.h"

static const char usage[] =
    "hlokit check IN --num-partitions=N (--passes=... | --pipeline=FILE.json | --partitioned=FILE)\n"
    "             [--num-replicas=R] [--seed=S] [--atol=A] [--rtol=R] [-o OUT] [--json] [--no-verify]\n"
    "             [--mode=auto|dense|sampled] [--samples=K] [--sample-seconds=S]\n"
    "             [--backend=threads|mpi] [--timeout=S]\n"
    "  Evaluates IN as a global program, partitions it with the pipeline (or takes the\n"
    "  given partitioned module), runs that on R x N devices with the inputs scattered by\n"
    "  the recorded spmd_parameters_shardings, gathers the outputs by spmd_output_sharding\n"
    "  (replicated when none is recorded) and compares.  The input and the partitioned module are\n"
    "  verified first (--no-verify skips both).  Exit 0 equal, 1 differ, 2 error.\n"
    "  --mode=dense compares every element; --mode=sampled computes only K output\n"
    "  positions (default 1024: corners, shard boundaries, random) on demand, for modules\n"
    "  too big to evaluate densely, stopping after S seconds (default 10, 0: no limit);\n"
    "  auto (the default) samples when a value exceeds 2^24 elements (2^27 over all devices\n"
    "  together for a partitioned one) or the dots and\n"
    "  convolutions need more than 2e9 multiply-adds.\n"
    "  Under --backend=mpi each rank makes its devices' inputs, runs them on MPI and compares\n"
    "  each output piece with the global program evaluated on demand inside it (every position\n"
    "  of a piece up to 2^18 elements, else K of them); rank 0 reports the positions per rank.\n"
    HK_CLI_BACKEND_USAGE;

typedef struct check_opts {
  hk_check_opts eval;
  const char *partitioned;
  int mode;                        /* 0 auto, 1 dense, 2 sampled */
  int64_t samples;
  double sample_seconds;
  hk_cli_backend_opts backend;
} check_opts;

/* The evaluation and its figures are shared with `hlokit ab` (check_eval.c). */
typedef hk_check_report check_report;

/* ---- the partitioned module --------------------------------------------------- */

static hk_status *partition_with_pipeline(const hk_cli_common *c, const hk_module *global,
                                          hk_module **out, hk_counter_list *counters) {
  hk_registry *reg;
  HK_TRY(hk_cli_load_plugins(c, &reg));
  hk_module *m = hk_module_clone(global);
  hk_cli_apply_config(c, m);
  hk_pass *pipeline = NULL;
  hk_status *st = hk_cli_build_pipeline(c, reg, m, &pipeline);
  bool changed = false;
  if (!st) st = hk_cli_run_pipeline(c, pipeline, m, &changed);
  /* A partitioned program counts only if it is a valid module. */
  if (!st && !c->no_verify) st = hk_cli_verify(m, "partitioned module fails verification");
  if (!st) hk_counter_list_collect(pipeline, counters);
  hk_pass_destroy(pipeline);
  hk_registry_free(reg);
  if (st) {
    hk_module_free(m);
    return st;
  }
  *out = m;
  return NULL;
}

/* ---- reporting ------------------------------------------------------------------ */

/* `, "full_rematerializations": N, "counters": {...}`: reshards that went
 * through full replication as the passes counted them (null when no pass
 * counts them, e.g. with --partitioned), and every counter. */
static void put_counters_json(const hk_counter_list *counters, hk_buf *b) {
  int64_t remats = hk_counter_list_sum(counters, "full_rematerializations");
  hk_buf_puts(b, ", \"full_rematerializations\": ");
  if (remats < 0) hk_buf_puts(b, "null");
  else hk_buf_printf(b, "%lld", (long long)remats);
  hk_buf_puts(b, ", \"counters\": ");
  hk_counter_list_json(counters, b);
}

static void report_json(const check_report *r, const hk_counter_list *counters, hk_buf *b) {
  hk_buf_printf(b, "{\"equal\": %s, \"mode\": \"dense\", \"max_abs_error\": ",
                hk_check_report_equal(r) ? "true" : "false");
  hk_check_put_json_number(b, r->cmp.max_abs_error);
  hk_buf_puts(b, ", \"max_rel_error\": ");
  hk_check_put_json_number(b, r->cmp.max_rel_error);
  hk_buf_puts(b, ", \"first_mismatch\": ");
  if (r->cmp.has_mismatch) {
    hk_buf_printf(b, "{\"output\": %lld, \"index\": %lld, \"expected\": ", (long long)r->cmp.mismatch_leaf,
                  (long long)r->cmp.mismatch_index);
    hk_check_put_json_number(b, r->cmp.expected);
    hk_buf_puts(b, ", \"actual\": ");
    hk_check_put_json_number(b, r->cmp.actual);
    hk_buf_puts(b, "}");
  } else {
    hk_buf_puts(b, "null");
  }
  const char *msg = r->cmp.message ? r->cmp.message : r->disagree;
  hk_buf_puts(b, ", \"message\": ");
  if (msg) hk_check_put_json_string(b, msg);
  else hk_buf_puts(b, "null");
  hk_buf_puts(b, ", \"partitioned_root_shape\": ");
  hk_check_put_json_string(b, r->root_shape ? r->root_shape : "");
  hk_buf_puts(b, ", \"collectives\": {");
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    hk_buf_printf(b, "%s\"%s\": {\"count\": %lld, \"bytes_per_device\": %lld}", k ? ", " : "",
                  hk_collective_kind_name(k), (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_COUNT, k),
                  (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_BYTES, k));
  hk_buf_printf(b, "}, \"bytes_moved_per_device\": %lld", (long long)hk_check_max_over(r, HK_CHECK_BYTES_MOVED, 0));
  hk_buf_printf(b, ", \"peak_live_bytes_global\": %lld", (long long)r->global_stats.peak_live_bytes);
  hk_buf_printf(b, ", \"peak_live_bytes_per_device\": %lld", (long long)hk_check_max_over(r, HK_CHECK_PEAK_LIVE_BYTES, 0));
  hk_buf_puts(b, ", \"peak_live_bytes_by_device\": [");
  for (int64_t d = 0; d < r->n_devices; d++)
    hk_buf_printf(b, "%s%lld", d ? ", " : "", (long long)r->dev_stats[d].peak_live_bytes);
  hk_buf_puts(b, "]");
  put_counters_json(counters, b);
  hk_buf_printf(b, ", \"num_devices\": %lld, \"instructions_before\": %lld, \"instructions_after\": %lld}\n",
                (long long)r->n_devices, (long long)r->instrs_before, (long long)r->instrs_after);
}

static void report_text(const check_report *r, const hk_counter_list *counters) {
  printf("%s\n", hk_check_report_equal(r) ? "equal" : "DIFFERENT");
  if (r->cmp.message) printf("  %s\n", r->cmp.message);
  if (r->disagree) printf("  %s\n", r->disagree);
  if (r->cmp.has_mismatch)
    printf("  first mismatch: output %lld index %lld: expected %.9g, got %.9g\n",
           (long long)r->cmp.mismatch_leaf, (long long)r->cmp.mismatch_index, r->cmp.expected, r->cmp.actual);
  printf("  max abs error %.3g, max rel error %.3g\n", r->cmp.max_abs_error, r->cmp.max_rel_error);
  printf("  partitioned root shape %s on %lld devices\n", r->root_shape ? r->root_shape : "?",
         (long long)r->n_devices);
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    if (hk_check_max_over(r, HK_CHECK_COLLECTIVE_COUNT, k))
      printf("  %-20s %lld per device, %lld bytes\n", hk_collective_kind_name(k),
             (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_COUNT, k), (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_BYTES, k));
  printf("  peak live bytes: global %lld, per device %lld\n", (long long)r->global_stats.peak_live_bytes,
         (long long)hk_check_max_over(r, HK_CHECK_PEAK_LIVE_BYTES, 0));
  printf("  instructions: %lld before, %lld after\n", (long long)r->instrs_before, (long long)r->instrs_after);
  int64_t remats = hk_counter_list_sum(counters, "full_rematerializations");
  if (remats >= 0) printf("  full rematerializations: %lld\n", (long long)remats);
}

/* ---- driver --------------------------------------------------------------------------- */

static hk_status *run_check(const hk_cli_common *c, const check_opts *o, const hk_cli_dist *dist,
                            const char *in, bool *equal) {
  hk_module *g = NULL, *p = NULL;
  hk_counter_list counters = {0};
  HK_TRY(hk_cli_read_module(c, in, &g));
  /* passes may assume a valid module (the pipeline fuzzer crashed them on
   * unverified input) */
  hk_status *st = c->no_verify ? NULL : hk_cli_verify(g, "input module fails verification");
  if (!st)
    st = o->partitioned ? hk_cli_read_module(c, o->partitioned, &p)
                        : partition_with_pipeline(c, g, &p, &counters);
  int64_t parts = c->num_partitions > 0 ? c->num_partitions : (p ? p->config.num_partitions : 1);
  int64_t reps = c->num_replicas > 0 ? c->num_replicas : (p ? p->config.replica_count : 1);
  if (parts < 1) parts = 1;
  if (reps < 1) reps = 1;
  check_report rep;
  memset(&rep, 0, sizeof rep);
  if (!st && c->output) st = hk_cli_write_module(c, p);
  bool sampled = !st && !dist->api &&
                 (o->mode == 2 || (o->mode == 0 && hk_check_dense_too_costly(g, p, parts * reps)));
  if (!st && dist->api) {
    hk_sample_options so = {o->eval.seed, o->samples, o->eval.atol, o->eval.rtol, (int64_t)(o->sample_seconds * 1000)};
    hk_buf extra;
    hk_buf_init(&extra);
    put_counters_json(&counters, &extra);
    hk_buf_put(&extra, "", 1);
    st = hk_check_distributed(g, p, parts, reps, dist, &so, o->backend.timeout_s, c->json, extra.data, equal);
    hk_buf_free(&extra);
    sampled = true;   /* reported */
  } else if (sampled) {
    hk_sample_options so = {o->eval.seed, o->samples, o->eval.atol, o->eval.rtol, (int64_t)(o->sample_seconds * 1000)};
    hk_buf extra;   /* what the passes counted, as in the dense report */
    hk_buf_init(&extra);
    put_counters_json(&counters, &extra);
    hk_buf_put(&extra, "", 1);
    st = hk_check_sampled(g, p, parts, reps, &so, c->json, extra.data, equal);
    hk_buf_free(&extra);
  } else if (!st) {
    st = hk_check_evaluate(g, p, &o->eval, parts, reps, &rep);
  }
  if (!st && !sampled) {
    hk_buf b;
    hk_buf_init(&b);
    if (c->json) {
      report_json(&rep, &counters, &b);
      fwrite(b.data, 1, b.len, stdout);
    } else {
      report_text(&rep, &counters);
    }
    hk_buf_free(&b);
    *equal = hk_check_report_equal(&rep);
  }
  hk_check_report_free(&rep);
  hk_counter_list_free(&counters);
  hk_module_free(g);
  hk_module_free(p);
  return st;
}

static int parse_check_option(void *ctx, const char *arg) {
  check_opts *o = ctx;
  int r = hk_check_parse_option(&o->eval, arg);
  if (!r) r = hk_cli_parse_backend_option(&o->backend, arg);
  if (r) return r;
  if (strncmp(arg, "--mode=", 7) == 0) {
    const char *m = arg + 7;
    o->mode = !strcmp(m, "auto") ? 0 : !strcmp(m, "dense") ? 1 : !strcmp(m, "sampled") ? 2 : -1;
    return o->mode < 0 ? -1 : 1;
  }
  if (strncmp(arg, "--samples=", 10) == 0) {
    char *end;
    errno = 0;
    o->samples = strtoll(arg + 10, &end, 10);
    return *end || errno || o->samples < 1 ? -1 : 1;
  }
  if (strncmp(arg, "--sample-seconds=", 17) == 0) return hk_check_parse_nonneg(arg + 17, &o->sample_seconds);
  if (strncmp(arg, "--partitioned=", 14) == 0 && arg[14]) {
    o->partitioned = arg + 14;
    return 1;
  }
  return 0;
}

int hk_cmd_check(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  check_opts o = {{0, -1, -1}, NULL, 0, 1024, 10, {0}};
  const char *in = NULL;
  bool help = false;
  int rc = hk_cli_parse_args("check", usage, argc, argv, &c, parse_check_option, &o, &in, &help);
  if (help) {
    hk_cli_common_free(&c);
    return HK_EXIT_OK;
  }
  if (rc == HK_EXIT_OK && !o.partitioned && !c.passes && !c.pipeline_file)
    rc = hk_cli_usage_error("check", usage, "give --passes, --pipeline or --partitioned");
  if (rc == HK_EXIT_OK) {
    bool equal = false;
    hk_cli_dist dist;
    hk_status *st = hk_cli_dist_open(&o.backend, &dist);
    if (!st) hk_cli_timeout_start("check", o.backend.timeout_s, &dist);
    if (!st) st = run_check(&c, &o, &dist, in, &equal);
    if (st) rc = hk_cli_dist_fail(&dist, "check", st);
    else rc = equal ? HK_EXIT_OK : HK_EXIT_DIFFERS;
    hk_cli_dist_close(&dist);
  }
  hk_cli_common_free(&c);
  return rc;
}
