/* check_dist.c - `hlokit check --backend=mpi`: every rank makes its own
 * devices' inputs (a pure function of the global index, no global tensor),
 * runs them on the MPI back end, compares each output piece with the
 * global program evaluated on demand at positions inside it, and the ranks
 * combine verdicts, positions and figures for rank 0 to print. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_dist.h"
#include "check_eval.h"
#include "check_sampled.h"

/* Figures combined over the ranks (maxima per device). */
enum { F_COUNT = 0, F_BYTES = HK_EVAL_NUM_COLLECTIVE_KINDS, F_MOVED = 2 * HK_EVAL_NUM_COLLECTIVE_KINDS,
       F_PEAK, F_N };

static void device_figures(const hk_eval_stats *s, int64_t *f) {
  int64_t moved = 0;
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++) {
    if (s->collective_count[k] > f[F_COUNT + k]) f[F_COUNT + k] = s->collective_count[k];
    if (s->collective_bytes[k] > f[F_BYTES + k]) f[F_BYTES + k] = s->collective_bytes[k];
    moved += s->collective_bytes[k];
  }
  if (moved > f[F_MOVED]) f[F_MOVED] = moved;
  if (s->peak_live_bytes > f[F_PEAK]) f[F_PEAK] = s->peak_live_bytes;
}

/* Folds device result r into the rank's acc (first mismatch: lowest device). */
static void merge(hk_sample_result *acc, hk_sample_result *r) {
  acc->samples += r->samples;
  acc->samples_planned += r->samples_planned;
  acc->timed_out |= r->timed_out;
  if (r->max_abs_error > acc->max_abs_error) acc->max_abs_error = r->max_abs_error;
  if (r->max_rel_error > acc->max_rel_error) acc->max_rel_error = r->max_rel_error;
  if (!r->equal && acc->equal) {
    char *msg = acc->message;
    *acc = (hk_sample_result){.equal = false, .samples = acc->samples, .samples_planned = acc->samples_planned,
                              .timed_out = acc->timed_out, .max_abs_error = acc->max_abs_error,
                              .max_rel_error = acc->max_rel_error, .has_mismatch = r->has_mismatch,
                              .mismatch_leaf = r->mismatch_leaf, .mismatch_index = r->mismatch_index,
                              .mismatch_device = r->mismatch_device, .expected = r->expected,
                              .actual = r->actual, .message = r->message};
    r->message = msg;
  }
  hk_sample_result_free(r);
}

/* Manual regions: the global module runs on the same devices (on MPI,
 * each device given the whole inputs, as the thread check does) and each
 * device's result is compared with its tile of the global one. */
static hk_status *compare_manual(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                 int64_t first, int64_t count, const hk_cli_dist *dist,
                                 const hk_sample_options *so, double timeout_s, hk_value *const *res,
                                 hk_sample_result *acc) {
  HK_TRY(hk_check_manual_collectives(g));
  hk_value **gin = NULL, **gres = calloc((size_t)count, sizeof *gres);
  hk_value *const **gargs = calloc((size_t)count, sizeof *gargs);
  if (!gres || !gargs) hk_out_of_memory();
  int gn = 0;
  hk_status *st = hk_eval_sampled_inputs(g, g, 1, 1, 0, so->seed, &gin, &gn);
  if (!st) {
    for (int64_t k = 0; k < count; k++) gargs[k] = gin;
    hk_eval_options eo = {.seed = so->seed, .opaque_custom_calls = true,
                          .time_limit_ms = hk_cli_timeout_eval_ms(timeout_s)};
    eo.backend = dist->api->backend_new(parts * reps, count, (int64_t)(timeout_s * 1000));
    st = hk_eval_spmd_devices(g, parts, reps, first, count, gargs, gn, gres, &eo, NULL);
    eo.backend->vt->destroy(eo.backend);
    if (st) st = hk_status_prefix(st, "global module");
  }
  hk_check_opts co = {so->seed, so->atol, so->rtol};
  for (int64_t k = 0; k < count && !st; k++) {
    hk_compare_result c;
    hk_check_compare_device(g, p, gres[k], res[k], first + k, parts, &co, &c);
    int64_t elements = 0;
    for (int64_t j = 0; j < hk_value_leaf_count(res[k]); j++) elements += hk_value_leaf(res[k], j)->n;
    hk_sample_result r = {.equal = c.equal, .samples = elements, .samples_planned = elements,
                          .max_abs_error = c.max_abs_error, .max_rel_error = c.max_rel_error,
                          .has_mismatch = c.has_mismatch, .mismatch_leaf = c.mismatch_leaf,
                          .mismatch_index = c.mismatch_index, .mismatch_device = first + k,
                          .expected = c.expected, .actual = c.actual, .message = c.message};
    c.message = NULL;
    hk_compare_result_free(&c);
    merge(acc, &r);
  }
  for (int i = 0; i < gn; i++) hk_value_release(gin[i]);
  free(gin);
  for (int64_t k = 0; k < count; k++) hk_value_release(gres[k]);
  free(gres);
  free(gargs);
  return st;
}

/* Runs this rank's devices and compares their pieces into acc. */
static hk_status *run_and_compare(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                  const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                  hk_sample_result *acc, int64_t *fig) {
  int64_t n = parts * reps, first, count;
  HK_TRY(hk_cli_dist_devices(dist, n, &first, &count));
  hk_value ***args = calloc((size_t)count, sizeof *args);
  hk_value **res = calloc((size_t)count, sizeof *res);
  hk_eval_stats *stats = calloc((size_t)count, sizeof *stats);
  int *n_args = calloc((size_t)count, sizeof *n_args);
  if (!args || !res || !stats || !n_args) hk_out_of_memory();
  hk_status *st = NULL;
  for (int64_t k = 0; k < count && !st; k++)
    st = hk_eval_sampled_inputs(g, p, parts, reps, first + k, so->seed, &args[k], &n_args[k]);
  if (!st) {
    hk_eval_options eo = {.seed = so->seed, .opaque_custom_calls = true,
                          .time_limit_ms = hk_cli_timeout_eval_ms(timeout_s)};
    eo.backend = dist->api->backend_new(n, count, (int64_t)(timeout_s * 1000));
    st = hk_eval_spmd_devices(p, parts, reps, first, count, (hk_value *const *const *)args,
                              p->entry->n_params, res, &eo, stats);
    eo.backend->vt->destroy(eo.backend);
    if (st) st = hk_status_prefix(st, "partitioned module");
  }
  bool manual = hk_check_has_manual_regions(g);
  if (!st && manual) st = compare_manual(g, p, parts, reps, first, count, dist, so, timeout_s, res, acc);
  for (int64_t k = 0; k < count && !st; k++) {
    hk_sample_result r;
    if (!manual) st = hk_eval_compare_piece(g, p, parts, reps, first + k, res[k], so, &r);
    if (!st && !manual) merge(acc, &r);
    device_figures(&stats[k], fig);
  }
  for (int64_t k = 0; k < count; k++) {
    for (int i = 0; args[k] && i < n_args[k]; i++) hk_value_release(args[k][i]);
    free(args[k]);
    hk_value_release(res[k]);
  }
  free(args);
  free(res);
  free(stats);
  free(n_args);
  return st;
}

/* Every rank's verdict, positions, errors and first mismatch into r (on
 * every rank); by_rank gets each rank's positions. */
static void combine_ranks(const hk_cli_dist *dist, hk_sample_result *r, int64_t *by_rank, int64_t *fig) {
  const hk_dist_api *api = dist->api;
  for (int k = 0; k < dist->size; k++) by_rank[k] = k == dist->rank ? r->samples : 0;
  api->allreduce_i64(by_rank, dist->size, HK_DIST_SUM);
  int64_t v[4] = {r->equal ? 0 : 1, r->timed_out, r->samples, r->samples_planned};
  api->allreduce_i64(v, 4, HK_DIST_SUM);
  double e[2] = {r->max_abs_error, r->max_rel_error};
  api->allreduce_f64(e, 2, HK_DIST_MAX);
  api->allreduce_i64(fig, F_N, HK_DIST_MAX);
  int64_t owner = r->equal ? INT64_MAX : r->mismatch_device;
  api->allreduce_i64(&owner, 1, HK_DIST_MIN);
  bool mine = !r->equal && r->mismatch_device == owner;
  int64_t mi[3] = {mine ? r->mismatch_leaf : 0, mine ? r->mismatch_index : 0, mine && r->has_mismatch};
  double mv[2] = {mine ? r->expected : 0, mine ? r->actual : 0};
  api->allreduce_i64(mi, 3, HK_DIST_SUM);
  api->allreduce_f64(mv, 2, HK_DIST_SUM);
  if (!mine) {
    free(r->message);
    r->message = NULL;
    if (v[0] && owner != INT64_MAX) {
      char buf[160];
      snprintf(buf, sizeof buf, "device %lld differs (details on its rank)", (long long)owner);
      r->message = strdup(buf);
    }
  }
  r->equal = v[0] == 0;
  r->timed_out = v[1] != 0;
  r->samples = v[2];
  r->samples_planned = v[3];
  r->max_abs_error = e[0];
  r->max_rel_error = e[1];
  r->has_mismatch = mi[2] != 0;
  r->mismatch_leaf = mi[0];
  r->mismatch_index = mi[1];
  r->mismatch_device = owner == INT64_MAX ? 0 : owner;
  r->expected = mv[0];
  r->actual = mv[1];
}

static void put_extra_json(hk_buf *b, const hk_cli_dist *dist, const int64_t *by_rank, const int64_t *fig,
                           const char *extra) {
  hk_buf_printf(b, ", \"ranks\": %d, \"samples_by_rank\": [", dist->size);
  for (int k = 0; k < dist->size; k++) hk_buf_printf(b, "%s%lld", k ? ", " : "", (long long)by_rank[k]);
  hk_buf_puts(b, "], \"collectives\": {");
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    hk_buf_printf(b, "%s\"%s\": {\"count\": %lld, \"bytes_per_device\": %lld}", k ? ", " : "",
                  hk_collective_kind_name(k), (long long)fig[F_COUNT + k], (long long)fig[F_BYTES + k]);
  hk_buf_printf(b, "}, \"bytes_moved_per_device\": %lld, \"peak_live_bytes_per_device\": %lld",
                (long long)fig[F_MOVED], (long long)fig[F_PEAK]);
  if (extra) hk_buf_puts(b, extra);
}

static void put_extra_text(hk_buf *b, const hk_cli_dist *dist, const int64_t *by_rank, const int64_t *fig) {
  hk_buf_printf(b, "  positions compared per rank (%d ranks):", dist->size);
  for (int k = 0; k < dist->size; k++) hk_buf_printf(b, " %lld", (long long)by_rank[k]);
  hk_buf_puts(b, "\n");
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    if (fig[F_COUNT + k])
      hk_buf_printf(b, "  %-20s %lld per device, %lld bytes\n", hk_collective_kind_name(k),
                    (long long)fig[F_COUNT + k], (long long)fig[F_BYTES + k]);
  hk_buf_printf(b, "  peak live bytes per device %lld\n", (long long)fig[F_PEAK]);
}

/* The verdict and figures of every rank, on every rank (by_rank: size
 * entries; free it). */
static hk_status *distributed_result(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                     const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                     hk_sample_result *r, int64_t **by_rank, int64_t *fig) {
  *r = (hk_sample_result){.equal = true};
  HK_TRY(run_and_compare(g, p, parts, reps, dist, so, timeout_s, r, fig));
  *by_rank = calloc((size_t)dist->size, sizeof **by_rank);
  if (!*by_rank) hk_out_of_memory();
  combine_ranks(dist, r, *by_rank, fig);
  return NULL;
}

hk_status *hk_check_distributed(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                bool json, const char *extra_json, bool *equal) {
  hk_sample_result r;
  int64_t fig[F_N] = {0}, *by_rank = NULL;
  HK_TRY(distributed_result(g, p, parts, reps, dist, so, timeout_s, &r, &by_rank, fig));
  hk_buf extra, b;
  hk_buf_init(&extra);
  hk_buf_init(&b);
  if (json) put_extra_json(&extra, dist, by_rank, fig, extra_json);
  else put_extra_text(&extra, dist, by_rank, fig);
  hk_buf_put(&extra, "", 1);
  if (dist->rank == 0) {
    hk_check_sampled_report(&r, g, p, parts * reps, "mpi", json ? extra.data : NULL, json ? NULL : extra.data,
                            json, &b);
    fwrite(b.data, 1, b.len, stdout);
    fflush(stdout);
  }
  *equal = r.equal;
  hk_buf_free(&extra);
  hk_buf_free(&b);
  free(by_rank);
  hk_sample_result_free(&r);
  return NULL;
}

hk_status *hk_check_distributed_report(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                       const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                       hk_check_report *rep) {
  hk_sample_result r;
  int64_t fig[F_N] = {0}, *by_rank = NULL;
  HK_TRY(distributed_result(g, p, parts, reps, dist, so, timeout_s, &r, &by_rank, fig));
  free(by_rank);
  rep->cmp = (hk_compare_result){.equal = r.equal, .max_abs_error = r.max_abs_error,
                                 .max_rel_error = r.max_rel_error, .has_mismatch = r.has_mismatch,
                                 .mismatch_leaf = r.mismatch_leaf, .mismatch_index = r.mismatch_index,
                                 .expected = r.expected, .actual = r.actual, .message = r.message};
  r.message = NULL;
  rep->root_shape = hk_shape_to_string(p->entry->root->shape);
  rep->instrs_before = hk_check_count_instrs(g);
  rep->instrs_after = hk_check_count_instrs(p);
  rep->n_devices = parts * reps;
  /* Only the maxima over the devices travel between ranks: every device
   * entry holds them (the report shows maxima). */
  rep->dev_stats = calloc((size_t)rep->n_devices, sizeof *rep->dev_stats);
  if (!rep->dev_stats) hk_out_of_memory();
  for (int64_t d = 0; d < rep->n_devices; d++) {
    hk_eval_stats *s = &rep->dev_stats[d];
    for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++) {
      s->collective_count[k] = fig[F_COUNT + k];
      s->collective_bytes[k] = fig[F_BYTES + k];
    }
    s->peak_live_bytes = fig[F_PEAK];
  }
  hk_sample_result_free(&r);
  return NULL;
}
