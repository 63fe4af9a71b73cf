/* cmd_check.c - `hlokit check`: evaluate a module globally and partitioned
 * on N simulated devices with the same inputs, and compare. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

static const char usage[] =
    "hlokit check IN --num-partitions=N (--passes=... | --pipeline=FILE.json | --partitioned=FILE)\n"
    "             [--num-replicas=R] [--seed=S] [--atol=A] [--rtol=R] [-o OUT] [--json]\n"
    "  Evaluates IN as a global program, partitions it with the pipeline (or takes the\n"
    "  given partitioned module), runs that on R x N devices with the inputs scattered by\n"
    "  the recorded spmd_parameters_shardings, gathers the outputs by spmd_output_sharding\n"
    "  (replicated when none is recorded) and compares.  Exit 0 equal, 1 differ, 2 error.";

typedef struct check_opts {
  uint64_t seed;
  double atol, rtol;
  const char *partitioned;
} check_opts;

typedef struct check_report {
  hk_compare_result cmp;
  char *disagree;
  char *root_shape;
  hk_eval_stats global_stats;
  hk_eval_stats *dev_stats;
  int64_t n_devices;
  int64_t instrs_before, instrs_after;
} check_report;

static int64_t count_instrs(const hk_module *m) {
  int64_t n = 0;
  for (int32_t i = 0; i < m->n_computations; i++) n += m->computations[i]->n_instrs;
  return n;
}

/* ---- the partitioned module --------------------------------------------------- */

static hk_status *partition_with_pipeline(const hk_cli_common *c, const hk_module *global,
                                          hk_module **out) {
  hk_registry *reg;
  HK_TRY(hk_cli_load_plugins(c, &reg));
  hk_module *m = hk_module_clone(global);
  hk_cli_apply_config(c, m);
  hk_pass *pipeline = NULL;
  hk_status *st = hk_cli_build_pipeline(c, reg, m, &pipeline);
  bool changed = false;
  if (!st) st = hk_cli_run_pipeline(c, pipeline, m, &changed);
  hk_pass_destroy(pipeline);
  hk_registry_free(reg);
  if (st) {
    hk_module_free(m);
    return st;
  }
  *out = m;
  return NULL;
}

/* Sharding of entry parameter i: recorded, else the parameter's own when
 * the partitioned shape differs from the global one, else replicated. */
static const hk_sharding *param_sharding(const hk_module *g, const hk_module *p, int i) {
  const hk_module_config *cfg = &p->config;
  if (cfg->n_spmd_parameters_shardings == p->entry->n_params && cfg->spmd_parameters_shardings)
    return cfg->spmd_parameters_shardings[i];
  const hk_shape *gs = g->entry->params[i]->shape, *ps = p->entry->params[i]->shape;
  if (!hk_shape_compatible(gs, ps))
    return p->entry->params[i]->sharding ? p->entry->params[i]->sharding : g->entry->params[i]->sharding;
  return NULL;
}

static const hk_sharding *output_sharding(const hk_module *g, const hk_module *p) {
  if (p->config.spmd_output_sharding) return p->config.spmd_output_sharding;
  if (!hk_shape_compatible(g->entry->root->shape, p->entry->root->shape))
    return p->entry->root->sharding ? p->entry->root->sharding : g->entry->root->sharding;
  return NULL;
}

/* ---- evaluation ---------------------------------------------------------------- */

static hk_status *scatter_inputs(const hk_module *g, const hk_module *p, hk_value *const *in,
                                 int64_t parts, int64_t n, hk_value ***dev) {
  int np = p->entry->n_params;
  if (np != g->entry->n_params)
    return hk_error(HK_INVALID_ARGUMENT, "the partitioned entry takes %d parameters, the global one %d",
                    np, g->entry->n_params);
  for (int64_t d = 0; d < n; d++) {
    dev[d] = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
    if (!dev[d]) abort();
    for (int i = 0; i < np; i++) {
      hk_status *st = hk_value_shard(in[i], param_sharding(g, p, i), g->entry->params[i]->shape,
                                     d % parts, p->entry->params[i]->shape, &dev[d][i]);
      if (st) return hk_status_prefix(st, "parameter %d, device %lld", i, (long long)d);
    }
  }
  return NULL;
}

/* Gathers replica 0's outputs; other replicas must match it exactly. */
static hk_status *gather_outputs(const hk_module *g, const hk_module *p, hk_value *const *res,
                                 int64_t parts, int64_t n, hk_value **out, char **disagree) {
  HK_TRY(hk_value_unshard(res, parts, output_sharding(g, p), g->entry->root->shape, out, disagree));
  for (int64_t d = parts; d < n && !*disagree; d++) {
    hk_compare_result r;
    hk_value_compare(res[d % parts], res[d], 0, 0, &r);
    if (!r.equal) {
      char buf[160];
      snprintf(buf, sizeof buf, "replica %lld computes other values than replica 0 (partition %lld)",
               (long long)(d / parts), (long long)(d % parts));
      *disagree = strdup(buf);
    }
    hk_compare_result_free(&r);
  }
  return NULL;
}

static hk_status *evaluate_both(const hk_module *g, const hk_module *p, const check_opts *o,
                                int64_t parts, int64_t reps, check_report *rep) {
  int np = g->entry->n_params;
  hk_value **in = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
  if (!in) abort();
  for (int i = 0; i < np; i++) in[i] = hk_value_random(g->entry->params[i]->shape, o->seed, (uint64_t)i);
  hk_eval_options eo = {.seed = o->seed};
  hk_value *expected = NULL, *actual = NULL;
  int64_t n = parts * reps;
  hk_value ***dev = calloc((size_t)n, sizeof(hk_value **));
  hk_value **res = calloc((size_t)n, sizeof(hk_value *));
  rep->dev_stats = calloc((size_t)n, sizeof(hk_eval_stats));
  rep->n_devices = n;
  if (!dev || !res || !rep->dev_stats) abort();
  hk_status *st = hk_eval_module(g, in, np, &expected, &eo, &rep->global_stats);
  if (st) st = hk_status_prefix(st, "global module");
  if (!st) st = scatter_inputs(g, p, in, parts, n, dev);
  if (!st) {
    st = hk_eval_spmd(p, parts, reps, (hk_value *const *const *)dev, p->entry->n_params, res, &eo,
                      rep->dev_stats);
    if (st) st = hk_status_prefix(st, "partitioned module");
  }
  if (!st) st = gather_outputs(g, p, res, parts, n, &actual, &rep->disagree);
  if (!st) hk_value_compare(expected, actual, o->atol, o->rtol, &rep->cmp);
  for (int64_t d = 0; d < n; d++) {
    for (int i = 0; dev[d] && i < p->entry->n_params; i++) hk_value_release(dev[d][i]);
    free(dev[d]);
    hk_value_release(res[d]);
  }
  for (int i = 0; i < np; i++) hk_value_release(in[i]);
  free(in);
  free(dev);
  free(res);
  hk_value_release(expected);
  hk_value_release(actual);
  return st;
}

/* ---- reporting ------------------------------------------------------------------ */

static void put_num(hk_buf *b, double x) {
  if (isnan(x)) hk_buf_puts(b, "\"nan\"");
  else if (isinf(x)) hk_buf_puts(b, x > 0 ? "\"inf\"" : "\"-inf\"");
  else hk_buf_printf(b, "%.9g", x);
}

static void put_json_string(hk_buf *b, const char *s) {
  hk_buf_puts(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') hk_buf_printf(b, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) hk_buf_printf(b, "\\u%04x", *s);
    else hk_buf_put(b, s, 1);
  }
  hk_buf_puts(b, "\"");
}

static int64_t max_over(const check_report *r, int64_t (*f)(const hk_eval_stats *, int), int k) {
  int64_t m = 0;
  for (int64_t d = 0; d < r->n_devices; d++)
    if (f(&r->dev_stats[d], k) > m) m = f(&r->dev_stats[d], k);
  return m;
}
static int64_t st_count(const hk_eval_stats *s, int k) { return s->collective_count[k]; }
static int64_t st_bytes(const hk_eval_stats *s, int k) { return s->collective_bytes[k]; }
static int64_t st_moved(const hk_eval_stats *s, int k) {
  (void)k;
  int64_t t = 0;
  for (int i = 0; i < HK_EVAL_NUM_COLLECTIVE_KINDS; i++) t += s->collective_bytes[i];
  return t;
}
static int64_t st_peak(const hk_eval_stats *s, int k) {
  (void)k;
  return s->peak_live_bytes;
}

static bool report_equal(const check_report *r) { return r->cmp.equal && !r->disagree; }

static void report_json(const check_report *r, hk_buf *b) {
  hk_buf_printf(b, "{\"equal\": %s, \"max_abs_error\": ", report_equal(r) ? "true" : "false");
  put_num(b, r->cmp.max_abs_error);
  hk_buf_puts(b, ", \"max_rel_error\": ");
  put_num(b, r->cmp.max_rel_error);
  hk_buf_puts(b, ", \"first_mismatch\": ");
  if (r->cmp.has_mismatch) {
    hk_buf_printf(b, "{\"output\": %lld, \"index\": %lld, \"expected\": ", (long long)r->cmp.mismatch_leaf,
                  (long long)r->cmp.mismatch_index);
    put_num(b, r->cmp.expected);
    hk_buf_puts(b, ", \"actual\": ");
    put_num(b, r->cmp.actual);
    hk_buf_puts(b, "}");
  } else {
    hk_buf_puts(b, "null");
  }
  const char *msg = r->cmp.message ? r->cmp.message : r->disagree;
  hk_buf_puts(b, ", \"message\": ");
  if (msg) put_json_string(b, msg);
  else hk_buf_puts(b, "null");
  hk_buf_puts(b, ", \"partitioned_root_shape\": ");
  put_json_string(b, r->root_shape ? r->root_shape : "");
  hk_buf_puts(b, ", \"collectives\": {");
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    hk_buf_printf(b, "%s\"%s\": {\"count\": %lld, \"bytes_per_device\": %lld}", k ? ", " : "",
                  hk_collective_kind_name(k), (long long)max_over(r, st_count, k),
                  (long long)max_over(r, st_bytes, k));
  hk_buf_printf(b, "}, \"bytes_moved_per_device\": %lld", (long long)max_over(r, st_moved, 0));
  hk_buf_printf(b, ", \"peak_live_bytes_global\": %lld", (long long)r->global_stats.peak_live_bytes);
  hk_buf_printf(b, ", \"peak_live_bytes_per_device\": %lld", (long long)max_over(r, st_peak, 0));
  hk_buf_puts(b, ", \"peak_live_bytes_by_device\": [");
  for (int64_t d = 0; d < r->n_devices; d++)
    hk_buf_printf(b, "%s%lld", d ? ", " : "", (long long)r->dev_stats[d].peak_live_bytes);
  hk_buf_printf(b, "], \"num_devices\": %lld, \"instructions_before\": %lld, \"instructions_after\": %lld}\n",
                (long long)r->n_devices, (long long)r->instrs_before, (long long)r->instrs_after);
}

static void report_text(const check_report *r) {
  printf("%s\n", report_equal(r) ? "equal" : "DIFFERENT");
  if (r->cmp.message) printf("  %s\n", r->cmp.message);
  if (r->disagree) printf("  %s\n", r->disagree);
  if (r->cmp.has_mismatch)
    printf("  first mismatch: output %lld index %lld: expected %.9g, got %.9g\n",
           (long long)r->cmp.mismatch_leaf, (long long)r->cmp.mismatch_index, r->cmp.expected, r->cmp.actual);
  printf("  max abs error %.3g, max rel error %.3g\n", r->cmp.max_abs_error, r->cmp.max_rel_error);
  printf("  partitioned root shape %s on %lld devices\n", r->root_shape ? r->root_shape : "?",
         (long long)r->n_devices);
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    if (max_over(r, st_count, k))
      printf("  %-20s %lld per device, %lld bytes\n", hk_collective_kind_name(k),
             (long long)max_over(r, st_count, k), (long long)max_over(r, st_bytes, k));
  printf("  peak live bytes: global %lld, per device %lld\n", (long long)r->global_stats.peak_live_bytes,
         (long long)max_over(r, st_peak, 0));
  printf("  instructions: %lld before, %lld after\n", (long long)r->instrs_before, (long long)r->instrs_after);
}

/* ---- driver --------------------------------------------------------------------------- */

static hk_status *write_partitioned(const hk_cli_common *c, const hk_module *p) {
  hk_buf out;
  hk_buf_init(&out);
  hk_cli_format_module(c, p, &out);
  hk_status *st = hk_cli_write_output(c->output, out.data ? out.data : "", out.len);
  hk_buf_free(&out);
  return st;
}

static hk_status *run_check(const hk_cli_common *c, const check_opts *o, const char *in,
                            bool *equal) {
  hk_module *g = NULL, *p = NULL;
  HK_TRY(hk_cli_read_module(in, &g));
  hk_status *st = o->partitioned ? hk_cli_read_module(o->partitioned, &p)
                                 : partition_with_pipeline(c, g, &p);
  int64_t parts = c->num_partitions > 0 ? c->num_partitions : (p ? p->config.num_partitions : 1);
  int64_t reps = c->num_replicas > 0 ? c->num_replicas : (p ? p->config.replica_count : 1);
  if (parts < 1) parts = 1;
  if (reps < 1) reps = 1;
  check_report rep;
  memset(&rep, 0, sizeof rep);
  if (!st && c->output) st = write_partitioned(c, p);
  if (!st) {
    rep.instrs_before = count_instrs(g);
    rep.instrs_after = count_instrs(p);
    rep.root_shape = hk_shape_to_string(p->entry->root->shape);
    st = evaluate_both(g, p, o, parts, reps, &rep);
  }
  if (!st) {
    hk_buf b;
    hk_buf_init(&b);
    if (c->json) {
      report_json(&rep, &b);
      fwrite(b.data, 1, b.len, stdout);
    } else {
      report_text(&rep);
    }
    hk_buf_free(&b);
    *equal = report_equal(&rep);
  }
  hk_compare_result_free(&rep.cmp);
  free(rep.disagree);
  free(rep.root_shape);
  free(rep.dev_stats);
  hk_module_free(g);
  hk_module_free(p);
  return st;
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return *s && !*end && !errno && *out >= 0 ? 1 : -1;
}

static int parse_check_option(check_opts *o, const char *arg) {
  if (strncmp(arg, "--seed=", 7) == 0) {
    char *end;
    errno = 0;
    o->seed = strtoull(arg + 7, &end, 0);
    return *end || errno || !arg[7] ? -1 : 1;
  }
  if (strncmp(arg, "--atol=", 7) == 0) return parse_double(arg + 7, &o->atol);
  if (strncmp(arg, "--rtol=", 7) == 0) return parse_double(arg + 7, &o->rtol);
  if (strncmp(arg, "--partitioned=", 14) == 0 && arg[14]) {
    o->partitioned = arg + 14;
    return 1;
  }
  return 0;
}

int hk_cmd_check(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  check_opts o = {0, -1, -1, NULL};
  const char *in = NULL;
  int rc = HK_EXIT_OK;
  for (int i = 1; i < argc && rc == HK_EXIT_OK; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: %s\n", usage);
      hk_cli_common_free(&c);
      return HK_EXIT_OK;
    }
    int r = parse_check_option(&o, argv[i]);
    if (r < 0) {
      rc = hk_cli_usage_error("check", usage, "bad value in '%s'", argv[i]);
      break;
    }
    if (r == 0 && hk_cli_is_option(argv[i])) r = hk_cli_parse_common(&c, argc, argv, &i);
    if (r < 0) rc = HK_EXIT_ERROR;
    else if (r == 0 && hk_cli_is_option(argv[i]))
      rc = hk_cli_usage_error("check", usage, "unknown option '%s'", argv[i]);
    else if (r == 0 && in)
      rc = hk_cli_usage_error("check", usage, "more than one input ('%s' and '%s')", in, argv[i]);
    else if (r == 0)
      in = argv[i];
  }
  if (rc == HK_EXIT_OK && !in) rc = hk_cli_usage_error("check", usage, "no input module");
  if (rc == HK_EXIT_OK && !o.partitioned && !c.passes && !c.pipeline_file)
    rc = hk_cli_usage_error("check", usage, "give --passes, --pipeline or --partitioned");
  if (rc == HK_EXIT_OK) {
    bool equal = false;
    hk_status *st = run_check(&c, &o, in, &equal);
    if (st) rc = hk_cli_fail("check", st);
    else rc = equal ? HK_EXIT_OK : HK_EXIT_DIFFERS;
  }
  hk_cli_common_free(&c);
  return rc;
}
