/* cmd_run.c - `hlokit run`: evaluate a module on one or several simulated devices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_dist.h"
#include "commands.h"

static const char usage[] =
    "hlokit run IN [--num-partitions=N] [--num-replicas=R] [--seed=S] [--inputs=FILE.json] [--json]\n"
    "           [--time-limit=MS] [--max-live-bytes=N] [--backend=threads|mpi] [--timeout=S]\n"
    "  Evaluates IN (HLO text or JSON) on R x N simulated devices (default: the module's\n"
    "  num_partitions and replica_count).  Parameters come from --inputs (a JSON array with\n"
    "  one {\"shape\": S, \"values\": [...]} per parameter, {\"tuple\": [...]} for tuples) or are\n"
    "  generated from the seed (floats uniform in [-1,1], small integers, random pred); every\n"
    "  device gets the same parameter values.\n"
    HK_CLI_BACKEND_USAGE;

typedef struct run_opts {
  uint64_t seed;
  const char *inputs;
  int64_t time_limit_ms, max_live_bytes;
  hk_cli_backend_opts backend;
} run_opts;

/* Parameter values from --inputs or from the seed (one per parameter). */
static hk_status *make_inputs(const hk_module *m, const run_opts *o, hk_value ***out, int *n) {
  if (o->inputs) {
    hk_buf b;
    hk_buf_init(&b);
    hk_status *st = hk_buf_read_file(&b, o->inputs);
    if (!st) st = hk_values_from_json(m, b.data ? b.data : "", b.len, out, n);
    hk_buf_free(&b);
    return st ? hk_status_prefix(st, "%s", o->inputs) : NULL;
  }
  const hk_computation *e = m->entry;
  *n = e->n_params;
  *out = calloc((size_t)(e->n_params ? e->n_params : 1), sizeof(hk_value *));
  if (!*out) hk_out_of_memory();
  for (int i = 0; i < e->n_params; i++) (*out)[i] = hk_value_random(e->params[i]->shape, o->seed, (uint64_t)i);
  return NULL;
}

static void put_leaf_summary(hk_buf *b, const hk_value *v, int64_t k) {
  char *s = hk_value_shape_string(v);
  hk_buf_printf(b, "  output %lld: %s", (long long)k, s);
  free(s);
  int64_t shown = v->n < 8 ? v->n : 8;
  hk_buf_puts(b, " = [");
  for (int64_t i = 0; i < shown; i++) {
    if (hk_prim_is_float((hk_prim)v->elem) || hk_prim_is_complex((hk_prim)v->elem))
      hk_buf_printf(b, "%s%g", i ? ", " : "", hk_value_get_f64(v, i));
    else
      hk_buf_printf(b, "%s%lld", i ? ", " : "", (long long)hk_value_get_i64(v, i));
  }
  hk_buf_printf(b, "%s]\n", v->n > shown ? ", ..." : "");
}

/* The report of devices first .. first + count - 1 (res[k] of device
 * first + k) among n: the whole report is the pieces of every device range
 * in order, so ranks print their own devices and rank 0 writes them out. */
static void put_results(hk_buf *b, hk_value *const *res, int64_t first, int64_t count, int64_t n,
                        int64_t parts, bool json) {
  if (json && first == 0) hk_buf_puts(b, "{\"devices\": [");
  for (int64_t k = 0; k < count; k++) {
    int64_t d = first + k;
    int64_t nl = hk_value_leaf_count(res[k]);
    if (json) {
      hk_buf_printf(b, "%s{\"replica\": %lld, \"partition\": %lld, \"outputs\": [", d ? ", " : "",
                    (long long)(d / parts), (long long)(d % parts));
      for (int64_t j = 0; j < nl; j++) {
        if (j) hk_buf_puts(b, ", ");
        hk_value_leaf_to_json(hk_value_leaf(res[k], j), b);
      }
      hk_buf_puts(b, "]}");
    } else {
      hk_buf_printf(b, "device %lld (replica %lld, partition %lld):\n", (long long)d, (long long)(d / parts),
                    (long long)(d % parts));
      for (int64_t j = 0; j < nl; j++) put_leaf_summary(b, hk_value_leaf(res[k], j), j);
    }
  }
  if (json && first + count == n) hk_buf_puts(b, "]}\n");
}

/* Runs this rank's devices [first, first + count) of parts x reps. */
static hk_status *evaluate(const hk_module *m, const hk_cli_dist *dist, int64_t parts, int64_t reps,
                           int64_t first, int64_t count, hk_value **args, int n_args,
                           const hk_eval_options *eo, const run_opts *o, hk_value **res) {
  hk_value *const **dev_args = malloc((size_t)count * sizeof(*dev_args));
  if (!dev_args) hk_out_of_memory();
  for (int64_t k = 0; k < count; k++) dev_args[k] = args;
  hk_status *st;
  if (dist->api) {
    hk_eval_options deo = *eo;
    deo.backend = dist->api->backend_new(parts * reps, count, (int64_t)(o->backend.timeout_s * 1000));
    st = hk_eval_spmd_devices(m, parts, reps, first, count, dev_args, n_args, res, &deo, NULL);
    deo.backend->vt->destroy(deo.backend);
  } else if (parts * reps == 1) {
    st = hk_eval_module(m, args, n_args, &res[0], eo, NULL);
  } else {
    st = hk_eval_spmd(m, parts, reps, dev_args, n_args, res, eo, NULL);
  }
  free(dev_args);
  return st;
}

static hk_status *run_module(const hk_cli_common *c, const run_opts *o, const hk_cli_dist *dist,
                             const char *in) {
  hk_module *m = NULL;
  HK_TRY(hk_cli_read_module(c, in, &m));
  int64_t parts = c->num_partitions > 0 ? c->num_partitions : m->config.num_partitions;
  int64_t reps = c->num_replicas > 0 ? c->num_replicas : m->config.replica_count;
  if (parts < 1) parts = 1;
  if (reps < 1) reps = 1;
  int64_t n = parts * reps, first = 0, count = n;
  hk_value **args = NULL;
  int n_args = 0;
  int64_t limit = o->time_limit_ms, budget = hk_cli_timeout_eval_ms(o->backend.timeout_s);
  if (budget && (!limit || budget < limit)) limit = budget;
  hk_eval_options eo = {.seed = o->seed, .time_limit_ms = limit, .max_live_bytes = o->max_live_bytes};
  hk_status *st = hk_cli_dist_devices(dist, n, &first, &count);
  if (!st) st = hk_eval_check_sizes(m, &eo);   /* before making huge inputs */
  if (!st) st = make_inputs(m, o, &args, &n_args);
  hk_value **res = calloc((size_t)count, sizeof(hk_value *));
  if (!res) hk_out_of_memory();
  if (!st) st = evaluate(m, dist, parts, reps, first, count, args, n_args, &eo, o, res);
  if (!st) {
    hk_buf b;
    hk_buf_init(&b);
    put_results(&b, res, first, count, n, parts, c->json);
    if (dist->api) dist->api->write_in_rank_order(b.data ? b.data : "", b.len, stdout);
    else fwrite(b.data ? b.data : "", 1, b.len, stdout);
    hk_buf_free(&b);
  }
  for (int64_t k = 0; k < count; k++) hk_value_release(res[k]);
  for (int i = 0; i < n_args; i++) hk_value_release(args[i]);
  free(args);
  free(res);
  hk_module_free(m);
  return st;
}

static int parse_i64(const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  *out = v;
  return *s && !*end && !errno && v >= 0 ? 1 : -1;
}

static int parse_run_option(void *ctx, const char *arg) {
  run_opts *o = ctx;
  int r = hk_cli_parse_backend_option(&o->backend, arg);
  if (r) return r;
  if (strncmp(arg, "--time-limit=", 13) == 0) return parse_i64(arg + 13, &o->time_limit_ms);
  if (strncmp(arg, "--max-live-bytes=", 17) == 0) return parse_i64(arg + 17, &o->max_live_bytes);
  if (strncmp(arg, "--seed=", 7) == 0) {
    char *end;
    errno = 0;
    o->seed = strtoull(arg + 7, &end, 0);
    return *end || errno || !arg[7] ? -1 : 1;
  }
  if (strncmp(arg, "--inputs=", 9) == 0 && arg[9]) {
    o->inputs = arg + 9;
    return 1;
  }
  return 0;
}

int hk_cmd_run(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  run_opts o = {0};
  const char *in = NULL;
  bool help = false;
  int rc = hk_cli_parse_args("run", usage, argc, argv, &c, parse_run_option, &o, &in, &help);
  if (help) {
    hk_cli_common_free(&c);
    return HK_EXIT_OK;
  }
  hk_cli_dist dist;
  if (rc == HK_EXIT_OK) {
    hk_status *st = hk_cli_dist_open(&o.backend, &dist);
    if (!st) hk_cli_timeout_start("run", o.backend.timeout_s, &dist);
    if (!st) st = run_module(&c, &o, &dist, in);
    if (st) rc = hk_cli_dist_fail(&dist, "run", st);
    hk_cli_dist_close(&dist);
  }
  hk_cli_common_free(&c);
  return rc;
}
