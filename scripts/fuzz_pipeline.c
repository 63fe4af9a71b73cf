/* fuzz_pipeline.c - libFuzzer harness for the whole pipeline: parse, verify,
 * mutate shardings, propagate, partition, verify again and evaluate the global
 * and the partitioned program (dense and sampled) under tight limits.
 *
 * Input: HLO text, optionally after one control byte (a byte below 0x20
 * other than tab/newline/return; without one the control comes from a hash
 * of the text, so plain .hlo seeds work).  Control bits 0-1 pick the number
 * of partitions (1, 2, 4, 8), bits 2-4 how many instructions get a new
 * sharding (chosen, with the sharding, from a hash of the text), bit 5 turns
 * propagation's is_spmd off, bit 6 lets it shard the entry's parameters and
 * root.  Plugins are dlopen'ed from HK_FUZZ_PLUGINS (default: plugins/ next
 * to the executable), built with the same sanitizers and coverage.
 *
 * Errors from any stage are fine (bad input gets an error); a crash,
 * sanitizer report or hang is a bug.  With HK_FUZZ_ABORT_ON_DIFF=1 a
 * partitioned program that computes other integer/pred values than the
 * global one also aborts; with HK_FUZZ_ABORT_ON_DIFF=all, so does one whose
 * floating-point values differ past check's default tolerances. */
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlokit/hlokit.h"
#include "pipeline/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static hk_registry *g_reg;

/* Loads every plugin .so of dir into the registry (once, before fuzzing, so
 * their coverage counters are registered). */
static void load_plugins(const char *dir) {
  g_reg = hk_registry_new();
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "fuzz_pipeline: no plugin folder %s (set HK_FUZZ_PLUGINS)\n", dir);
    exit(2);
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".so")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    hk_status *st = hk_plugin_load(g_reg, path, HK_ORIGIN_EXPLICIT);
    if (st) {
      fprintf(stderr, "fuzz_pipeline: %s: %s\n", path, st->message);
      exit(2);
    }
  }
  closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  const char *dir = getenv("HK_FUZZ_PLUGINS");
  char buf[4096];
  if (!dir) {
    snprintf(buf, sizeof buf, "%s", (*argv)[0]);
    char *slash = strrchr(buf, '/');
    if (slash) strcpy(slash, "/plugins");
    else strcpy(buf, "plugins");
    dir = buf;
  }
  load_plugins(dir);
  return 0;
}

/* ---- sharding mutation -------------------------------------------------------- */

static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A sharding for an array of rank r on `parts` devices: replicated,
 * maximal, manual, tiled along one or two dims, or partially replicated. */
static const hk_sharding *random_array_sharding(hk_module *m, int rank, int64_t parts, uint64_t *rs) {
  int64_t tiles[HK_MAX_RANK] = {0};
  switch (mix(rs) % 6) {
  case 0: return hk_sharding_replicated(m);
  case 1: return hk_sharding_maximal(m, (int64_t)(mix(rs) % (uint64_t)parts));
  case 2: return hk_sharding_manual(m);
  default: break;
  }
  if (rank == 0 || parts == 1) return hk_sharding_replicated(m);
  bool partial = mix(rs) % 3 == 0 && parts > 1;
  int n = rank + (partial ? 1 : 0);
  for (int k = 0; k < n; k++) tiles[k] = 1;
  int64_t left = parts;
  if (partial) {
    tiles[rank] = 2;
    left /= 2;
  }
  while (left > 1) {
    int d = (int)(mix(rs) % (uint64_t)rank);
    tiles[d] *= 2;
    left /= 2;
  }
  return hk_sharding_tiled_iota(m, n, tiles, partial);
}

static const hk_sharding *random_sharding(hk_module *m, const hk_shape *s, int64_t parts, uint64_t *rs) {
  if (hk_shape_is_tuple(s)) {
    if (s->n_tuple > 64) return NULL;
    const hk_sharding *elems[64];
    for (int32_t k = 0; k < s->n_tuple; k++) {
      elems[k] = random_sharding(m, s->tuple[k], parts, rs);
      if (!elems[k]) return NULL;
    }
    return hk_sharding_tuple(m, s->n_tuple, elems);
  }
  if (!hk_shape_is_array(s)) return hk_sharding_replicated(m);
  return random_array_sharding(m, s->rank, parts, rs);
}

static hk_instr *nth_instr(hk_module *m, uint64_t k) {
  int64_t total = 0;
  for (int32_t c = 0; c < m->n_computations; c++) total += m->computations[c]->n_instrs;
  if (!total) return NULL;
  k %= (uint64_t)total;
  for (int32_t c = 0; c < m->n_computations; c++)
    for (hk_instr *i = m->computations[c]->first; i; i = i->next)
      if (!k--) return i;
  return NULL;
}

static void mutate_shardings(hk_module *m, int count, int64_t parts, uint64_t seed) {
  for (int n = 0; n < count; n++) {
    hk_instr *i = nth_instr(m, mix(&seed));
    if (!i) return;
    if (mix(&seed) % 4 == 0) hk_instr_set_sharding(i, NULL);
    else hk_instr_set_sharding(i, random_sharding(m, i->shape, parts, &seed));
  }
}

/* ---- evaluation --------------------------------------------------------------- */

static const hk_eval_options limits = {
    .seed = 7, .max_while_iterations = 64, .max_value_bytes = 1 << 20,
    .time_limit_ms = 1000, .max_live_bytes = 16 << 20, .opaque_custom_calls = true};

static bool integral_leaves(const hk_value *v) {
  for (int64_t k = 0; k < hk_value_leaf_count(v); k++) {
    hk_prim e = (hk_prim)hk_value_leaf(v, k)->elem;
    if (hk_prim_is_float(e) || hk_prim_is_complex(e)) return false;
  }
  return true;
}

/* XLA's reduce asks that the init value be the identity of the reducer
 * (jax.lax.reduce: "if violated the result is undefined"): a partitioned
 * reduce applies it once per shard.  False for a non-constant, or a
 * constant that is not the identity of an add, multiply, maximum, minimum,
 * and or or reducer. */
static bool init_is_identity(const hk_instr *init, const hk_computation *reducer) {
  if (init->opcode != HK_OP_CONSTANT || !init->attrs || !init->attrs->literal) return false;
  double v = hk_literal_get_f64(init->attrs->literal, 0);
  switch (reducer->root->opcode) {
  case HK_OP_ADD: case HK_OP_OR: return v == 0;
  case HK_OP_MULTIPLY: case HK_OP_AND: return v == 1 || (v != 0 && init->shape->elem == HK_PRED);
  case HK_OP_MAXIMUM: return v == -INFINITY || v <= -2147483648.0 || init->shape->elem == HK_PRED;
  case HK_OP_MINIMUM: return v == INFINITY || v >= 2147483647.0 || init->shape->elem == HK_PRED;
  default: return true;   /* a reducer this check does not know */
  }
}

/* StableHLO asks paired batching dims of a gather or scatter to have one
 * size (XLA's shape inference does not check it); where they differ, what
 * the op reads is undefined and may change with the sharding. */
static bool batching_dims_pair(const hk_shape *operand, const hk_i64s od, const hk_shape *indices,
                               const hk_i64s id) {
  if (od.n != id.n) return false;
  for (int32_t k = 0; k < od.n; k++)
    if (operand->dims[od.v[k]] != indices->dims[id.v[k]]) return false;
  return true;
}

/* False for an instruction that leaves the program without one right
 * answer to compare: rng draws from the device, the instruction and how
 * often it ran (a sharded rng draws other numbers, as in XLA, where rng is
 * nondeterministic); partition-id / replica-id name the device; a
 * collective of the global program spans other devices once partitioned;
 * a reduce from a non-identity and a gather/scatter with unpaired
 * batching dims are undefined. */
static bool instr_has_one_answer(const hk_instr *i) {
  hk_opcode op = (hk_opcode)i->opcode;
  const hk_attrs *a = i->attrs;
  if (op == HK_OP_RNG || op == HK_OP_PARTITION_ID || op == HK_OP_REPLICA_ID || hk_opcode_is_collective(op))
    return false;
  if ((op == HK_OP_REDUCE || op == HK_OP_REDUCE_WINDOW) && i->n_called == 1)
    for (int32_t k = i->n_operands / 2; k < i->n_operands; k++)
      if (!init_is_identity(i->operands[k], i->called[0])) return false;
  if (op == HK_OP_GATHER && a && a->gather)
    return batching_dims_pair(i->operands[0]->shape, a->gather->operand_batching_dims, i->operands[1]->shape,
                              a->gather->start_indices_batching_dims);
  if (op == HK_OP_SCATTER && a && a->scatter)
    return batching_dims_pair(i->operands[0]->shape, a->scatter->input_batching_dims,
                              i->operands[(i->n_operands - 1) / 2]->shape,
                              a->scatter->scatter_indices_batching_dims);
  return true;
}

static bool has_one_right_answer(const hk_module *m) {
  for (int32_t c = 0; c < m->n_computations; c++)
    for (const hk_instr *i = m->computations[c]->first; i; i = i->next)
      if (!instr_has_one_answer(i)) return false;
  return true;
}

static void free_args(hk_value **a, int n) {
  for (int k = 0; a && k < n; k++) hk_value_release(a[k]);
  free(a);
}

/* Runs g on one device and p on `parts`, inputs scattered and the output
 * gathered as `hlokit check` does; aborts on a difference when asked. */
static void evaluate(const hk_module *g, const hk_module *p, int64_t parts) {
  int np = g->entry->n_params;
  if (p->entry->n_params != np) return;
  /* as check does before it makes inputs: a value with no static size or
   * over the limit is refused, not built */
  hk_status *sz = hk_eval_check_sizes(g, &limits);
  if (!sz) sz = hk_eval_check_sizes(p, &limits);
  if (sz) {
    hk_status_free(sz);
    return;
  }
  hk_value **in = calloc((size_t)np + 1, sizeof *in);
  for (int k = 0; k < np; k++) in[k] = hk_value_random(g->entry->params[k]->shape, 7, (uint64_t)k);
  hk_value *gres = NULL, *pres_all = NULL;
  /* A custom call the evaluator does not know runs as an opaque function
   * of its operands' whole values, which a shard does not hold: such a
   * module is evaluated (for coverage) but not compared. */
  hk_eval_options known = limits;
  known.opaque_custom_calls = false;
  hk_status *st = hk_eval_module(g, in, np, &gres, &known, NULL);
  bool opaque = st && st->code == HK_UNIMPLEMENTED;
  if (opaque) {
    hk_status_free(st);
    st = hk_eval_module(g, in, np, &gres, &limits, NULL);
  }
  hk_value ***dev = calloc((size_t)parts, sizeof *dev);
  hk_value **res = calloc((size_t)parts, sizeof *res);
  for (int64_t d = 0; d < parts && !st; d++) {
    dev[d] = calloc((size_t)np + 1, sizeof **dev);
    for (int k = 0; k < np && !st; k++)
      st = hk_value_shard(in[k], hk_spmd_parameter_sharding(g, p, k), g->entry->params[k]->shape, d,
                          p->entry->params[k]->shape, &dev[d][k]);
  }
  if (!st) st = hk_eval_spmd(p, parts, 1, (hk_value *const *const *)dev, np, res, &limits, NULL);
  char *disagree = NULL;
  if (!st) st = hk_value_unshard(res, parts, hk_spmd_result_sharding(g, p), g->entry->root->shape, &pres_all, &disagree);
  if (!st) {
    hk_compare_result r;
    hk_value_compare(gres, pres_all, -1, -1, &r);
    const char *abort_on = getenv("HK_FUZZ_ABORT_ON_DIFF");
    bool compared = abort_on && !opaque && (integral_leaves(gres) || strcmp(abort_on, "all") == 0);
    if (!r.equal && compared && has_one_right_answer(g)) {
      fprintf(stderr, "fuzz_pipeline: partitioned program differs: %s\n", r.message ? r.message : "values");
      abort();
    }
    hk_compare_result_free(&r);
  }
  free(disagree);
  if (st) hk_status_free(st);
  hk_value_release(gres);
  hk_value_release(pres_all);
  for (int64_t d = 0; d < parts; d++) {
    free_args(dev[d], np);
    hk_value_release(res[d]);
  }
  free(dev);
  free(res);
  free_args(in, np);
}

static void evaluate_sampled(const hk_module *g, const hk_module *p, int64_t parts) {
  hk_sample_options so = {.seed = 3, .samples = 8, .atol = -1, .rtol = -1, .time_limit_ms = 500};
  hk_sample_result r;
  memset(&r, 0, sizeof r);
  hk_status *st = hk_eval_compare_sampled(g, p, parts, 1, &so, &r);
  if (st) hk_status_free(st);
  else hk_sample_result_free(&r);
}

/* ---- the pipeline --------------------------------------------------------------- */

static hk_status *run_passes(hk_module *m, const char *text) {
  hk_pipeline_spec spec;
  HK_TRY(hk_pipeline_spec_parse(text, &m->config, &spec));
  hk_pass *pl = NULL;
  hk_status *st = hk_pipeline_build(g_reg, &spec, "fuzz", &pl);
  hk_pipeline_spec_free(&spec);
  bool changed = false;
  hk_exec_threads threads = {0};
  if (!st) st = hk_pass_run(pl, m, &threads, &changed);
  if (pl) hk_pass_destroy(pl);
  return st;
}

/* Small modules only: evaluation cost is bounded by the limits above, but
 * big shapes would make every run slow. */
static bool small_enough(const hk_module *m) {
  hk_eval_cost c = hk_eval_estimate_cost(m);
  return c.macs < 1e6 && c.largest_elements <= 1 << 14;
}

/* With HK_FUZZ_DUMP=FILE, the module as mutated is written there (with its
 * partition count), to replay a finding with `hlokit check`. */
static void dump_mutated(const hk_module *m, int64_t parts) {
  const char *path = getenv("HK_FUZZ_DUMP");
  FILE *f = path ? fopen(path, "w") : NULL;
  if (!f) return;
  hk_buf b;
  hk_buf_init(&b);
  hk_print_module(m, HK_PRINT_LONG, &b);
  fprintf(f, "/* num_partitions=%lld */\n%.*s", (long long)parts, (int)b.len, b.data);
  hk_buf_free(&b);
  fclose(f);
}

static bool is_control_byte(uint8_t b) { return b < 0x20 && b != '\t' && b != '\n' && b != '\r'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  bool has_ctl = is_control_byte(data[0]);
  const char *text = (const char *)data + (has_ctl ? 1 : 0);
  size_t len = size - (has_ctl ? 1 : 0);
  uint64_t seed = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < len; k++) seed = (seed ^ (uint8_t)text[k]) * 0x100000001b3ull;
  uint8_t ctl = has_ctl ? data[0] : (uint8_t)(seed >> 56);
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, len, "fuzz", &m);
  if (st) {
    hk_status_free(st);
    return 0;
  }
  int64_t parts = (int64_t)1 << (ctl & 3);
  mutate_shardings(m, (ctl >> 2) & 7, parts, seed);
  dump_mutated(m, parts);
  hk_verify_options vo = hk_verify_defaults();
  st = hk_verify_module(m, &vo);
  if (!st && small_enough(m)) {
    m->config.num_partitions = parts;
    m->config.use_spmd_partitioning = true;
    hk_module *g = hk_module_clone(m);
    char passes[256];
    const char *out = (ctl & 64) ? "true" : "false";
    snprintf(passes, sizeof passes,
             "sharding-propagation{is_spmd=%s allow_spmd_sharding_propagation_to_output=[%s] "
             "allow_spmd_sharding_propagation_to_parameters=[%s]},"
             "spmd-partitioning{allow_module_signature_change=true}",
             (ctl & 32) ? "false" : "true", out, out);
    st = run_passes(m, passes);
    if (!st) st = hk_verify_module(m, &vo);
    if (!st) {
      evaluate(g, m, parts);
      evaluate_sampled(g, m, parts);
    }
    hk_module_free(g);
  }
  if (st) hk_status_free(st);
  hk_module_free(m);
  return 0;
}
