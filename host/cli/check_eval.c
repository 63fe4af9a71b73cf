/* check_eval.c - the evaluation `hlokit check` and `hlokit ab` share: the
 * global module on one device, the partitioned one on N devices with the
 * same inputs, outputs gathered and compared, figures per device. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"

int64_t hk_check_count_instrs(const hk_module *m) {
  int64_t n = 0;
  for (int32_t i = 0; i < m->n_computations; i++) n += m->computations[i]->n_instrs;
  return n;
}

static hk_status *scatter_inputs(const hk_module *g, const hk_module *p, hk_value *const *in,
                                 int64_t parts, int64_t n, hk_value ***dev) {
  int np = p->entry->n_params;
  if (np != g->entry->n_params)
    return hk_error(HK_INVALID_ARGUMENT, "the partitioned entry takes %d parameters, the global one %d",
                    np, g->entry->n_params);
  for (int64_t d = 0; d < n; d++) {
    dev[d] = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
    if (!dev[d]) hk_out_of_memory();
    for (int i = 0; i < np; i++) {
      hk_status *st = hk_value_shard(in[i], hk_spmd_parameter_sharding(g, p, i), g->entry->params[i]->shape,
                                     d % parts, p->entry->params[i]->shape, &dev[d][i]);
      if (st) return hk_status_prefix(st, "parameter %d, device %lld", i, (long long)d);
    }
  }
  return NULL;
}

/* Gathers replica 0's outputs; other replicas must match it exactly. */
static hk_status *gather_outputs(const hk_module *g, const hk_module *p, hk_value *const *res,
                                 int64_t parts, int64_t n, hk_value **out, char **disagree) {
  HK_TRY(hk_value_unshard(res, parts, hk_spmd_result_sharding(g, p), g->entry->root->shape, out, disagree));
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

/* True when s is manual or has a manual subgroup (tuples: any element). */
static bool sharding_has_manual(const hk_sharding *s) {
  if (!s) return false;
  if (s->kind == HK_SHARDING_MANUAL) return true;
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int32_t i = 0; i < s->n_elems; i++)
      if (sharding_has_manual(s->elems[i])) return true;
    return false;
  }
  for (int32_t i = 0; s->kind == HK_SHARDING_TILED && i < s->n_subgroups; i++)
    if (s->subgroups[i] == HK_SUBGROUP_MANUAL) return true;
  return false;
}

static bool is_manual_transition(const hk_instr *i) {
  const char *t = i->opcode == HK_OP_CUSTOM_CALL && i->attrs ? i->attrs->custom_call_target : NULL;
  return t && (!strcmp(t, "SPMDFullToShardShape") || !strcmp(t, "SPMDShardToFullShape"));
}

/* A collective with a channel combines partitions: the module holding it
 * is already a program per partition, whatever its shardings say. */
static bool is_cross_partition_collective(const hk_instr *i) {
  return hk_opcode_is_collective((hk_opcode)i->opcode) && hk_instr_channel_id(i) > 0;
}

bool hk_check_has_manual_regions(const hk_module *m) {
  for (int32_t c = 0; c < m->n_computations; c++)
    for (const hk_instr *i = m->computations[c]->first; i; i = i->next)
      if (is_manual_transition(i) || sharding_has_manual(i->sharding) || is_cross_partition_collective(i))
        return true;
  return false;
}

/* Devices a and b hold the same tile of s (same index on every data dim). */
static bool same_tile(const hk_sharding *s, int64_t a, int64_t b) {
  int64_t ia[HK_MAX_RANK], ib[HK_MAX_RANK];
  if (!hk_sharding_tile_index(s, a, ia) || !hk_sharding_tile_index(s, b, ib)) return false;
  return !memcmp(ia, ib, (size_t)hk_sharding_data_rank(s) * sizeof(int64_t));
}

/* A collective inside a partially manual region combines the values of
 * whole manual groups, so each of its replica groups must pair devices
 * holding the same tile; one that mixes tiles of a group has no meaning
 * in the global program (XLA's partitioner rejects it). */
static hk_status *check_manual_collective(const hk_instr *i) {
  const hk_sharding *s = i->sharding;
  const hk_replica_groups *rg = i->attrs ? i->attrs->replica_groups : NULL;
  if (!rg || !s || s->kind != HK_SHARDING_TILED || !sharding_has_manual(s) || hk_sharding_num_tiles(s) < 2)
    return NULL;
  if (rg->iota && rg->iota->n_dims != 2) return NULL;
  int64_t gs = rg->iota ? rg->iota->dims[1] : 0;
  int64_t n = rg->iota ? rg->iota->dims[0] * gs : rg->group_start ? rg->group_start[rg->n_groups] : 0;
  int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  if (!ids) hk_out_of_memory();
  if (rg->iota) hk_iota_expand(rg->iota, ids);
  else if (n) memcpy(ids, rg->ids, (size_t)n * sizeof(int64_t));
  hk_status *st = NULL;
  int32_t ng = rg->iota ? (int32_t)(gs ? n / gs : 0) : rg->n_groups;
  for (int32_t k = 0; k < ng && !st; k++) {
    int64_t lo = rg->iota ? k * gs : rg->group_start[k], hi = rg->iota ? lo + gs : rg->group_start[k + 1];
    for (int64_t j = lo + 1; j < hi && !st; j++)
      if (!same_tile(s, ids[lo], ids[j]))
        st = hk_error(HK_INVALID_ARGUMENT,
                      "%s: replica group %d pairs devices %lld and %lld, which hold different tiles of "
                      "one manual group: the global program is not defined",
                      i->name, k, (long long)ids[lo], (long long)ids[j]);
  }
  free(ids);
  return st;
}

hk_status *hk_check_manual_collectives(const hk_module *m) {
  for (int32_t c = 0; c < m->n_computations; c++)
    for (const hk_instr *i = m->computations[c]->first; i; i = i->next)
      HK_TRY(check_manual_collective(i));
  return NULL;
}

/* Folds one device's comparison into the running one (first mismatch and
 * message win; errors are maxima). */
static void merge_compare(hk_compare_result *acc, hk_compare_result *r, int64_t d) {
  if (r->max_abs_error > acc->max_abs_error) acc->max_abs_error = r->max_abs_error;
  if (r->max_rel_error > acc->max_rel_error) acc->max_rel_error = r->max_rel_error;
  if (!r->equal && acc->equal) {
    acc->equal = false;
    acc->has_mismatch = r->has_mismatch;
    acc->mismatch_leaf = r->mismatch_leaf;
    acc->mismatch_index = r->mismatch_index;
    acc->expected = r->expected;
    acc->actual = r->actual;
    char buf[512];
    snprintf(buf, sizeof buf, "device %lld%s%s", (long long)d, r->message ? ": " : "",
             r->message ? r->message : "");
    free(acc->message);
    acc->message = strdup(buf);
  }
  hk_compare_result_free(r);
}

/* The global module on parts x reps devices, each given the whole inputs. */
static hk_status *evaluate_global_on_devices(const hk_module *g, hk_value **in, int64_t parts,
                                             int64_t reps, const hk_eval_options *eo, hk_value **gres,
                                             hk_eval_stats *gstats) {
  int64_t n = parts * reps;
  hk_value ***gin = calloc((size_t)n, sizeof(hk_value **));
  if (!gin) hk_out_of_memory();
  for (int64_t d = 0; d < n; d++) gin[d] = in;
  hk_status *st = hk_eval_spmd(g, parts, reps, (hk_value *const *const *)gin, g->entry->n_params, gres, eo, gstats);
  free(gin);
  return st;
}

/* Manual regions: the global module runs on the same devices (each given
 * the whole inputs); device d's partitioned result must equal its tile,
 * under the output sharding, of device d's global result. */
static hk_status *evaluate_manual_global(const hk_module *g, hk_value **in, int64_t parts,
                                         int64_t reps, const hk_eval_options *eo, hk_value **gres,
                                         hk_eval_stats *gstats) {
  HK_TRY(hk_check_manual_collectives(g));
  return evaluate_global_on_devices(g, in, parts, reps, eo, gres, gstats);
}

/* The global program with replicas: every replica runs it on the same
 * inputs (its cross-replica collectives combine them); *out gets replica
 * 0's result. */
static hk_status *evaluate_global(const hk_module *g, hk_value **in, int64_t reps,
                                  const hk_eval_options *eo, hk_value **out, hk_eval_stats *stats) {
  if (reps <= 1) return hk_eval_module(g, in, g->entry->n_params, out, eo, stats);
  hk_value **gres = calloc((size_t)reps, sizeof(hk_value *));
  hk_eval_stats *gstats = calloc((size_t)reps, sizeof(hk_eval_stats));
  if (!gres || !gstats) hk_out_of_memory();
  hk_status *st = evaluate_global_on_devices(g, in, 1, reps, eo, gres, gstats);
  if (!st) {
    *out = gres[0];
    gres[0] = NULL;
    *stats = gstats[0];
  }
  for (int64_t r = 0; r < reps; r++) hk_value_release(gres[r]);
  free(gres);
  free(gstats);
  return st;
}

void hk_check_compare_device(const hk_module *g, const hk_module *p, const hk_value *global_result,
                             const hk_value *result, int64_t device, int64_t parts, const hk_check_opts *o,
                             hk_compare_result *out) {
  hk_value *want = NULL;
  memset(out, 0, sizeof *out);
  hk_status *st = hk_value_shard(global_result, hk_spmd_result_sharding(g, p), g->entry->root->shape,
                                 device % parts, p->entry->root->shape, &want);
  if (st) {
    out->equal = false;
    out->message = strdup(st->message);
    hk_status_free(st);
  } else {
    hk_value_compare(want, result, o->atol, o->rtol, out);
  }
  hk_value_release(want);
}

static void compare_per_device(const hk_module *g, const hk_module *p, hk_value *const *gres,
                               hk_value *const *res, int64_t parts, int64_t n,
                               const hk_check_opts *o, hk_compare_result *out) {
  memset(out, 0, sizeof *out);
  out->equal = true;
  for (int64_t d = 0; d < n; d++) {
    hk_compare_result r;
    hk_check_compare_device(g, p, gres[d], res[d], d, parts, o, &r);
    merge_compare(out, &r, d);
  }
}

hk_status *hk_check_evaluate(const hk_module *g, const hk_module *p, const hk_check_opts *o,
                             int64_t parts, int64_t reps, hk_check_report *rep) {
  rep->instrs_before = hk_check_count_instrs(g);
  rep->instrs_after = hk_check_count_instrs(p);
  free(rep->root_shape);
  rep->root_shape = hk_shape_to_string(p->entry->root->shape);
  int np = g->entry->n_params;
  hk_eval_options limits = {.seed = o->seed};
  HK_TRY(hk_eval_check_sizes(g, &limits));   /* before making huge inputs */
  HK_TRY(hk_eval_check_sizes(p, &limits));
  hk_value **in = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
  if (!in) hk_out_of_memory();
  for (int i = 0; i < np; i++) in[i] = hk_value_random(g->entry->params[i]->shape, o->seed, (uint64_t)i);
  hk_eval_options eo = {.seed = o->seed, .opaque_custom_calls = true};
  hk_value *expected = NULL, *actual = NULL;
  int64_t n = parts * reps;
  bool manual = hk_check_has_manual_regions(g);
  hk_value **gres = manual ? calloc((size_t)n, sizeof(hk_value *)) : NULL;
  hk_eval_stats *gstats = manual ? calloc((size_t)n, sizeof(hk_eval_stats)) : NULL;
  if (manual && (!gres || !gstats)) hk_out_of_memory();
  hk_value ***dev = calloc((size_t)n, sizeof(hk_value **));
  hk_value **res = calloc((size_t)n, sizeof(hk_value *));
  free(rep->dev_stats);
  rep->dev_stats = calloc((size_t)n, sizeof(hk_eval_stats));
  rep->n_devices = n;
  if (!dev || !res || !rep->dev_stats) hk_out_of_memory();
  hk_status *st = manual ? evaluate_manual_global(g, in, parts, reps, &eo, gres, gstats)
                         : evaluate_global(g, in, reps, &eo, &expected, &rep->global_stats);
  if (st) st = hk_status_prefix(st, "global module");
  if (manual && !st) rep->global_stats = gstats[0];
  if (!st) st = scatter_inputs(g, p, in, parts, n, dev);
  if (!st) {
    st = hk_eval_spmd(p, parts, reps, (hk_value *const *const *)dev, p->entry->n_params, res, &eo,
                      rep->dev_stats);
    if (st) st = hk_status_prefix(st, "partitioned module");
  }
  if (!st && manual) compare_per_device(g, p, gres, res, parts, n, o, &rep->cmp);
  if (!st && !manual) st = gather_outputs(g, p, res, parts, n, &actual, &rep->disagree);
  if (!st && !manual) hk_value_compare(expected, actual, o->atol, o->rtol, &rep->cmp);
  for (int64_t d = 0; d < n; d++) {
    for (int i = 0; dev[d] && i < p->entry->n_params; i++) hk_value_release(dev[d][i]);
    free(dev[d]);
    hk_value_release(res[d]);
    if (gres) hk_value_release(gres[d]);
  }
  free(gres);
  free(gstats);
  for (int i = 0; i < np; i++) hk_value_release(in[i]);
  free(in);
  free(dev);
  free(res);
  hk_value_release(expected);
  hk_value_release(actual);
  return st;
}

void hk_check_report_free(hk_check_report *rep) {
  hk_compare_result_free(&rep->cmp);
  free(rep->disagree);
  free(rep->root_shape);
  free(rep->dev_stats);
  memset(rep, 0, sizeof *rep);
}

bool hk_check_report_equal(const hk_check_report *rep) { return rep->cmp.equal && !rep->disagree; }

static int64_t figure(const hk_eval_stats *s, hk_check_figure what, int kind) {
  int64_t t = 0;
  switch (what) {
    case HK_CHECK_COLLECTIVE_COUNT: return s->collective_count[kind];
    case HK_CHECK_COLLECTIVE_BYTES: return s->collective_bytes[kind];
    case HK_CHECK_BYTES_MOVED:
      for (int i = 0; i < HK_EVAL_NUM_COLLECTIVE_KINDS; i++) t += s->collective_bytes[i];
      return t;
    case HK_CHECK_PEAK_LIVE_BYTES: return s->peak_live_bytes;
  }
  return 0;
}

int64_t hk_check_max_over(const hk_check_report *rep, hk_check_figure what, int kind) {
  int64_t m = 0;
  for (int64_t d = 0; d < rep->n_devices; d++)
    if (figure(&rep->dev_stats[d], what, kind) > m) m = figure(&rep->dev_stats[d], what, kind);
  return m;
}

void hk_check_put_json_number(hk_buf *b, double x) {
  if (isnan(x)) hk_buf_puts(b, "\"nan\"");
  else if (isinf(x)) hk_buf_puts(b, x > 0 ? "\"inf\"" : "\"-inf\"");
  else hk_buf_printf(b, "%.9g", x);
}

void hk_check_put_json_string(hk_buf *b, const char *s) {
  hk_buf_puts(b, "\"");
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') hk_buf_printf(b, "\\%c", *s);
    else if ((unsigned char)*s < 0x20) hk_buf_printf(b, "\\u%04x", *s);
    else hk_buf_put(b, s, 1);
  }
  hk_buf_puts(b, "\"");
}

int hk_check_parse_nonneg(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return *s && !*end && !errno && *out >= 0 ? 1 : -1;
}

int hk_check_parse_option(hk_check_opts *o, const char *arg) {
  if (strncmp(arg, "--seed=", 7) == 0) {
    char *end;
    errno = 0;
    o->seed = strtoull(arg + 7, &end, 0);
    return *end || errno || !arg[7] ? -1 : 1;
  }
  if (strncmp(arg, "--atol=", 7) == 0) return hk_check_parse_nonneg(arg + 7, &o->atol);
  if (strncmp(arg, "--rtol=", 7) == 0) return hk_check_parse_nonneg(arg + 7, &o->rtol);
  return 0;
}
