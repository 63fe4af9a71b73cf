/* cmd_ab.c - `hlokit ab`: run two pipelines (A and B) over the same module,
 * check each partitioned program against the global one with the same
 * inputs, and show their numerics, communication, memory and time side by
 * side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "check_dist.h"
#include "check_eval.h"
#include "commands.h"
#include "ir/ptr_table.h"
#include "pass_counters.h"

static const char usage[] =
    "hlokit ab IN --a=PIPELINE --b=PIPELINE --num-partitions=N [--num-replicas=R]\n"
    "          [--seed=S] [--atol=A] [--rtol=R] [--json] [--backend=threads|mpi] [--timeout=S]\n"
    "  A PIPELINE is a --passes string (e.g. 'sharding-propagation{is_spmd=true},spmd-partitioning',\n"
    "  '@preset') or the path of a JSON pipeline file.  Runs both on IN, evaluates each result on\n"
    "  R x N devices against the global program with the same inputs, and prints equal-or-not,\n"
    "  collectives (count and bytes per device), full rematerializations, instruction counts,\n"
    "  per-device peak memory and pass wall time side by side.  --json prints {\"a\": {...},\n"
    "  \"b\": {...}}.  Exit 0 both equal, 1 either differs, 2 error.\n"
    "  Under --backend=mpi each side is checked as `check --backend=mpi` checks (positions inside\n"
    "  each device's output pieces; per-device figures are maxima); rank 0 prints.\n"
    HK_CLI_BACKEND_USAGE;

typedef struct ab_opts {
  const char *pipe[2];
  hk_check_opts eval;
  hk_cli_backend_opts backend;
  const hk_cli_dist *dist;
} ab_opts;

/* One side's results. */
typedef struct ab_side {
  const char *label, *pipeline;
  hk_check_report rep;
  int32_t n_stats;
  hk_pass_stat *stats;             /* names point at static pass names */
  double seconds;
  int64_t remats;
  int64_t remats_reported;         /* the passes' own count; -1: none reports one */
} ab_side;

/* ---- full rematerializations, counted from the partitioned module -------------- */
/* Used when no pass of the side reports the count itself (a third-party
 * partitioner without the "hlokit.counters" interface). */
/* A reshard that goes through replication leaves an all-gather whose result a
 * dynamic-slice cuts again by the partition's offset.  This counts such
 * dynamic-slices: data operand reached from an all-gather, offsets computed
 * from partition-id, through any non-collective instructions. */

/* True when i is, or is computed without another collective from, an
 * instruction of opcode `want`. */
static bool reaches(const hk_instr *i, hk_opcode want, hk_ptr_set *seen) {
  if (i->opcode == want) return true;
  if (hk_opcode_is_collective(i->opcode) || !hk_ptr_set_add(seen, i)) return false;
  for (int32_t k = 0; k < i->n_operands; k++)
    if (reaches(i->operands[k], want, seen)) return true;
  return false;
}

static bool reaches_fresh(const hk_instr *i, hk_opcode want, hk_ptr_set *seen) {
  hk_ptr_set_clear(seen);
  return reaches(i, want, seen);
}

static bool is_remat_slice(const hk_instr *ds, hk_ptr_set *seen) {
  if (ds->opcode != HK_OP_DYNAMIC_SLICE || ds->n_operands < 2) return false;
  const hk_instr *data = ds->operands[0];
  if (data->opcode != HK_OP_ALL_GATHER && !reaches_fresh(data, HK_OP_ALL_GATHER, seen))
    return false;
  for (int32_t k = 1; k < ds->n_operands; k++)
    if (reaches_fresh(ds->operands[k], HK_OP_PARTITION_ID, seen)) return true;
  return false;
}

static int64_t count_full_remats(const hk_module *m) {
  int64_t n = 0;
  for (int32_t c = 0; c < m->n_computations; c++) {
    const hk_computation *comp = m->computations[c];
    hk_ptr_set seen;
    hk_ptr_set_init(&seen, (size_t)comp->n_instrs);
    for (const hk_instr *i = comp->first; i; i = i->next) n += is_remat_slice(i, &seen);
    hk_ptr_set_free(&seen);
  }
  return n;
}

/* ---- running one side --------------------------------------------------------------- */

static bool names_a_file(const char *text) {
  struct stat st;
  size_t n = strlen(text);
  return (stat(text, &st) == 0 && S_ISREG(st.st_mode)) ||
         (n > 5 && strcmp(text + n - 5, ".json") == 0);
}

static hk_status *side_spec(const char *text, const hk_module *m, hk_pipeline_spec *spec) {
  if (names_a_file(text)) return hk_pipeline_spec_from_file(text, &m->config, spec);
  return hk_pipeline_spec_parse(text, &m->config, spec);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void keep_stats(ab_side *s, const hk_pass *pipeline) {
  int32_t n = 0;
  const hk_pass_stat *st = hk_pipeline_stats(pipeline, &n);
  s->stats = calloc((size_t)(n ? n : 1), sizeof *s->stats);
  if (!s->stats) hk_out_of_memory();
  if (n) memcpy(s->stats, st, sizeof *st * (size_t)n);
  s->n_stats = n;
}

/* Full rematerializations two ways: read off the partitioned module (the
 * same yardstick for any two pipelines, whoever wrote them) and as the
 * passes counted them (interface "hlokit.counters"; a variant that gathers
 * in its own handler does not go through the reshard engine's count). */
static void keep_remats(ab_side *s, hk_pass *pipeline, const hk_module *partitioned) {
  hk_counter_list counters = {0};
  hk_counter_list_collect(pipeline, &counters);
  s->remats_reported = hk_counter_list_sum(&counters, "full_rematerializations");
  s->remats = count_full_remats(partitioned);
  hk_counter_list_free(&counters);
}

/* Runs the side's pipeline over a copy of g; *out gets the result. */
static hk_status *partition_side(const hk_cli_common *c, hk_registry *reg, const hk_module *g,
                                 ab_side *s, hk_module **out) {
  hk_module *m = hk_module_clone(g);
  hk_cli_apply_config(c, m);
  hk_pipeline_spec spec;
  hk_pass *pl = NULL;
  hk_status *st = side_spec(s->pipeline, m, &spec);
  if (!st) {
    st = hk_pipeline_build(reg, &spec, s->label, &pl);
    hk_pipeline_spec_free(&spec);
  }
  if (!st) {
    /* Instrumented: per-pass wall time is recorded (and printed to stderr
     * only with --time-passes). */
    hk_pipeline_run_options ro = {c->time_passes, c->verify_each, NULL, NULL, HK_PRINT_LONG, stderr};
    hk_pipeline_set_run_options(pl, &ro);
    bool changed = false;
    double t0 = now_seconds();
    st = hk_cli_run_pipeline(c, pl, m, &changed);
    s->seconds = now_seconds() - t0;
    keep_stats(s, pl);
    if (!st) keep_remats(s, pl, m);
  }
  hk_pass_destroy(pl);
  if (st) {
    hk_module_free(m);
    return hk_status_prefix(st, "pipeline %s", s->label);
  }
  *out = m;
  return NULL;
}

static hk_status *run_side(const hk_cli_common *c, const ab_opts *o, hk_registry *reg,
                           const hk_module *g, ab_side *s) {
  hk_module *p = NULL;
  HK_TRY(partition_side(c, reg, g, s, &p));
  int64_t parts = c->num_partitions > 0 ? c->num_partitions : p->config.num_partitions;
  int64_t reps = c->num_replicas > 0 ? c->num_replicas : p->config.replica_count;
  parts = parts > 0 ? parts : 1;
  reps = reps > 0 ? reps : 1;
  hk_sample_options so = {o->eval.seed, 0, o->eval.atol, o->eval.rtol, 0};
  hk_status *st = o->dist->api ? hk_check_distributed_report(g, p, parts, reps, o->dist, &so, o->backend.timeout_s,
                                                             &s->rep)
                               : hk_check_evaluate(g, p, &o->eval, parts, reps, &s->rep);
  hk_module_free(p);
  return st ? hk_status_prefix(st, "pipeline %s", s->label) : NULL;
}

/* ---- reporting -------------------------------------------------------------------------- */

static void side_json_mismatch(const hk_check_report *r, hk_buf *b) {
  if (!r->cmp.has_mismatch) {
    hk_buf_puts(b, "null");
    return;
  }
  hk_buf_printf(b, "{\"output\": %lld, \"index\": %lld, \"expected\": ", (long long)r->cmp.mismatch_leaf,
                (long long)r->cmp.mismatch_index);
  hk_check_put_json_number(b, r->cmp.expected);
  hk_buf_puts(b, ", \"actual\": ");
  hk_check_put_json_number(b, r->cmp.actual);
  hk_buf_puts(b, "}");
}

static void side_json_collectives(const hk_check_report *r, hk_buf *b) {
  hk_buf_puts(b, "{");
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    hk_buf_printf(b, "%s\"%s\": {\"count\": %lld, \"bytes_per_device\": %lld}", k ? ", " : "",
                  hk_collective_kind_name(k),
                  (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_COUNT, k),
                  (long long)hk_check_max_over(r, HK_CHECK_COLLECTIVE_BYTES, k));
  hk_buf_puts(b, "}");
}

static void side_json_passes(const ab_side *s, hk_buf *b) {
  hk_buf_puts(b, "[");
  for (int32_t i = 0; i < s->n_stats; i++) {
    hk_buf_printf(b, "%s{\"pass\": ", i ? ", " : "");
    hk_check_put_json_string(b, s->stats[i].name);
    hk_buf_printf(b, ", \"seconds\": %.6f, \"changed\": %s}", s->stats[i].seconds,
                  s->stats[i].changed ? "true" : "false");
  }
  hk_buf_puts(b, "]");
}

static void side_json(const ab_side *s, hk_buf *b) {
  const hk_check_report *r = &s->rep;
  hk_buf_puts(b, "{\"pipeline\": ");
  hk_check_put_json_string(b, s->pipeline);
  hk_buf_printf(b, ", \"equal\": %s, \"max_abs_error\": ", hk_check_report_equal(r) ? "true" : "false");
  hk_check_put_json_number(b, r->cmp.max_abs_error);
  hk_buf_puts(b, ", \"max_rel_error\": ");
  hk_check_put_json_number(b, r->cmp.max_rel_error);
  hk_buf_puts(b, ", \"first_mismatch\": ");
  side_json_mismatch(r, b);
  const char *msg = r->cmp.message ? r->cmp.message : r->disagree;
  hk_buf_puts(b, ", \"message\": ");
  if (msg) hk_check_put_json_string(b, msg);
  else hk_buf_puts(b, "null");
  hk_buf_puts(b, ", \"partitioned_root_shape\": ");
  hk_check_put_json_string(b, r->root_shape ? r->root_shape : "");
  hk_buf_puts(b, ", \"collectives\": ");
  side_json_collectives(r, b);
  hk_buf_printf(b, ", \"bytes_moved_per_device\": %lld",
                (long long)hk_check_max_over(r, HK_CHECK_BYTES_MOVED, 0));
  hk_buf_printf(b, ", \"full_rematerializations\": %lld, \"full_rematerializations_reported\": ",
                (long long)s->remats);
  if (s->remats_reported < 0) hk_buf_puts(b, "null");
  else hk_buf_printf(b, "%lld", (long long)s->remats_reported);
  hk_buf_printf(b, ", \"instructions_before\": %lld, \"instructions_after\": %lld",
                (long long)r->instrs_before, (long long)r->instrs_after);
  hk_buf_printf(b, ", \"peak_live_bytes_global\": %lld, \"peak_live_bytes_per_device\": %lld",
                (long long)r->global_stats.peak_live_bytes,
                (long long)hk_check_max_over(r, HK_CHECK_PEAK_LIVE_BYTES, 0));
  hk_buf_printf(b, ", \"num_devices\": %lld, \"pass_wall_seconds\": %.6f, \"passes\": ",
                (long long)r->n_devices, s->seconds);
  side_json_passes(s, b);
  hk_buf_puts(b, "}");
}

static void report_json(const ab_side *sides) {
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "{\"a\": ");
  side_json(&sides[0], &b);
  hk_buf_puts(&b, ", \"b\": ");
  side_json(&sides[1], &b);
  hk_buf_puts(&b, "}\n");
  fwrite(b.data, 1, b.len, stdout);
  hk_buf_free(&b);
}

#define AB_COL 28

static void row(const char *label, const char *a, const char *b) {
  printf("  %-30s %-*s %s\n", label, AB_COL, a, b);
}

static void row_i64(const char *label, int64_t a, int64_t b) {
  char x[32], y[32];
  snprintf(x, sizeof x, "%lld", (long long)a);
  snprintf(y, sizeof y, "%lld", (long long)b);
  row(label, x, y);
}

static void mismatch_text(const hk_check_report *r, char *out, size_t cap) {
  if (r->cmp.has_mismatch)
    snprintf(out, cap, "out %lld [%lld]: %.4g vs %.4g", (long long)r->cmp.mismatch_leaf,
             (long long)r->cmp.mismatch_index, r->cmp.expected, r->cmp.actual);
  else snprintf(out, cap, "%s", hk_check_report_equal(r) ? "-" : "(shape or replicas)");
}

static void text_collectives(const ab_side *s) {
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++) {
    int64_t ca = hk_check_max_over(&s[0].rep, HK_CHECK_COLLECTIVE_COUNT, k);
    int64_t cb = hk_check_max_over(&s[1].rep, HK_CHECK_COLLECTIVE_COUNT, k);
    if (!ca && !cb) continue;
    char label[64], x[64], y[64];
    snprintf(label, sizeof label, "%s (count, bytes)", hk_collective_kind_name(k));
    snprintf(x, sizeof x, "%lld, %lld B", (long long)ca,
             (long long)hk_check_max_over(&s[0].rep, HK_CHECK_COLLECTIVE_BYTES, k));
    snprintf(y, sizeof y, "%lld, %lld B", (long long)cb,
             (long long)hk_check_max_over(&s[1].rep, HK_CHECK_COLLECTIVE_BYTES, k));
    row(label, x, y);
  }
}

static void text_passes(const ab_side *s) {
  for (int w = 0; w < 2; w++) {
    printf("  %s passes:", s[w].label);
    for (int32_t i = 0; i < s[w].n_stats; i++)
      printf("%s %s %.3f ms", i ? "," : "", s[w].stats[i].name, s[w].stats[i].seconds * 1e3);
    printf("\n");
  }
}

static void report_text(const char *in, const ab_side *s) {
  char x[160], y[160];
  printf("hlokit ab %s on %lld devices\n", in, (long long)s[0].rep.n_devices);
  printf("  a = %s\n  b = %s\n\n", s[0].pipeline, s[1].pipeline);
  row("", "a", "b");
  row("result", hk_check_report_equal(&s[0].rep) ? "equal" : "DIFFERS",
      hk_check_report_equal(&s[1].rep) ? "equal" : "DIFFERS");
  if (!hk_check_report_equal(&s[0].rep) || !hk_check_report_equal(&s[1].rep)) {
    mismatch_text(&s[0].rep, x, sizeof x);
    mismatch_text(&s[1].rep, y, sizeof y);
    row("first mismatch (want vs got)", x, y);
  }
  snprintf(x, sizeof x, "%.3g", s[0].rep.cmp.max_abs_error);
  snprintf(y, sizeof y, "%.3g", s[1].rep.cmp.max_abs_error);
  row("max abs error", x, y);
  row("partitioned root shape", s[0].rep.root_shape, s[1].rep.root_shape);
  text_collectives(s);
  row_i64("bytes moved per device", hk_check_max_over(&s[0].rep, HK_CHECK_BYTES_MOVED, 0),
          hk_check_max_over(&s[1].rep, HK_CHECK_BYTES_MOVED, 0));
  row_i64("full rematerializations", s[0].remats, s[1].remats);
  row_i64("instructions before", s[0].rep.instrs_before, s[1].rep.instrs_before);
  row_i64("instructions after", s[0].rep.instrs_after, s[1].rep.instrs_after);
  row_i64("peak live bytes, global", s[0].rep.global_stats.peak_live_bytes,
          s[1].rep.global_stats.peak_live_bytes);
  row_i64("peak live bytes per device", hk_check_max_over(&s[0].rep, HK_CHECK_PEAK_LIVE_BYTES, 0),
          hk_check_max_over(&s[1].rep, HK_CHECK_PEAK_LIVE_BYTES, 0));
  snprintf(x, sizeof x, "%.3f", s[0].seconds * 1e3);
  snprintf(y, sizeof y, "%.3f", s[1].seconds * 1e3);
  row("pass wall time (ms)", x, y);
  text_passes(s);
}

/* ---- driver --------------------------------------------------------------------------------- */

static hk_status *run_ab(const hk_cli_common *c, const ab_opts *o, const char *in, bool *equal) {
  hk_module *g = NULL;
  HK_TRY(hk_cli_read_module(c, in, &g));
  hk_registry *reg = NULL;
  hk_status *st = c->no_verify ? NULL : hk_cli_verify(g, "input module fails verification");
  if (!st) st = hk_cli_load_plugins(c, &reg);
  ab_side sides[2];
  memset(sides, 0, sizeof sides);
  sides[0].label = "a";
  sides[1].label = "b";
  for (int w = 0; w < 2; w++) sides[w].pipeline = o->pipe[w];
  for (int w = 0; w < 2 && !st; w++) st = run_side(c, o, reg, g, &sides[w]);
  if (!st && o->dist->rank == 0) {
    if (c->json) report_json(sides);
    else report_text(in, sides);
  }
  if (!st) {
    *equal = hk_check_report_equal(&sides[0].rep) && hk_check_report_equal(&sides[1].rep);
  }
  for (int w = 0; w < 2; w++) {
    hk_check_report_free(&sides[w].rep);
    free(sides[w].stats);
  }
  if (reg) hk_registry_free(reg);
  hk_module_free(g);
  return st;
}

/* 1 consumed, 0 not an ab option, -1 bad value. */
static int parse_ab_option(void *ctx, const char *arg) {
  ab_opts *o = ctx;
  if (strncmp(arg, "--a=", 4) == 0) return (o->pipe[0] = arg + 4), arg[4] ? 1 : -1;
  if (strncmp(arg, "--b=", 4) == 0) return (o->pipe[1] = arg + 4), arg[4] ? 1 : -1;
  int r = hk_cli_parse_backend_option(&o->backend, arg);
  return r ? r : hk_check_parse_option(&o->eval, arg);
}

/* Parses argv; returns HK_EXIT_OK to go on, anything else to stop with. */
static int parse_args(int argc, char **argv, hk_cli_common *c, ab_opts *o, const char **in,
                      bool *help) {
  int rc = hk_cli_parse_args("ab", usage, argc, argv, c, parse_ab_option, o, in, help);
  if (rc != HK_EXIT_OK || *help) return rc;
  if (!o->pipe[0] || !o->pipe[1]) return hk_cli_usage_error("ab", usage, "give both --a and --b");
  if (c->passes || c->pipeline_file || c->output || c->dump_after)
    return hk_cli_usage_error("ab", usage, "--passes, --pipeline, -o and --dump-after do not "
                              "apply to ab: give the pipelines as --a and --b");
  return HK_EXIT_OK;
}

int hk_cmd_ab(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  ab_opts o = {{NULL, NULL}, {0, -1, -1}, {0}, NULL};
  const char *in = NULL;
  bool help = false;
  int rc = parse_args(argc, argv, &c, &o, &in, &help);
  if (rc == HK_EXIT_OK && !help) {
    bool equal = false;
    hk_cli_dist dist;
    hk_status *st = hk_cli_dist_open(&o.backend, &dist);
    o.dist = &dist;
    if (!st) hk_cli_timeout_start("ab", o.backend.timeout_s, &dist);
    if (!st) st = run_ab(&c, &o, in, &equal);
    rc = st ? hk_cli_dist_fail(&dist, "ab", st) : equal ? HK_EXIT_OK : HK_EXIT_DIFFERS;
    hk_cli_dist_close(&dist);
  }
  hk_cli_common_free(&c);
  return rc;
}
