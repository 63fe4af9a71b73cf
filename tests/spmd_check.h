/* spmd_check.h - test helper shared by the spmd rewrite suites: partition a
 * module, run the global module and the partitioned program on the same
 * seeded inputs, and assert they compute the same values. */
#ifndef HK_TEST_SPMD_CHECK_H
#define HK_TEST_SPMD_CHECK_H

#include "hlokit/eval.h"
#include "pipeline/pipeline.h"
#include "testutil.h"

/* A registry with the stock and spmd plugins of this build. */
static inline hk_registry *spmd_check_registry(void) {
  char path[4096];
  hk_registry *reg = hk_registry_new();
  hk_test_plugin_path("stock", path, sizeof path);
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
  hk_test_plugin_path("spmd", path, sizeof path);
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
  return reg;
}

/* Shards every global argument for `device` by the recorded parameter
 * shardings of the partitioned module p. */
static inline hk_value **spmd_check_device_args(const hk_module *g, const hk_module *p,
                                                hk_value *const *args, int64_t device) {
  int n = g->entry->n_params;
  hk_value **out = calloc((size_t)(n ? n : 1), sizeof(hk_value *));
  ck_assert_ptr_nonnull(out);
  ck_assert_int_eq(p->config.n_spmd_parameters_shardings, n);
  for (int i = 0; i < n; i++)
    ck_assert_ok(hk_value_shard(args[i], p->config.spmd_parameters_shardings[i],
                                g->entry->params[i]->shape, device, p->entry->params[i]->shape,
                                &out[i]));
  return out;
}

/* Evaluates g on one device and p on n devices and asserts equal results. */
static inline void spmd_check_same_values(const hk_module *g, const hk_module *p, int64_t n) {
  int np = g->entry->n_params;
  hk_value **args = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
  ck_assert_ptr_nonnull(args);
  for (int i = 0; i < np; i++) args[i] = hk_value_random(g->entry->params[i]->shape, 7, (uint64_t)i);
  hk_value *expected = NULL;
  ck_assert_ok(hk_eval_module(g, args, np, &expected, NULL, NULL));
  hk_value ***dev = calloc((size_t)n, sizeof(hk_value **));
  hk_value **results = calloc((size_t)n, sizeof(hk_value *));
  ck_assert(dev && results);
  for (int64_t d = 0; d < n; d++) dev[d] = spmd_check_device_args(g, p, args, d);
  ck_assert_ok(hk_eval_spmd(p, n, 1, (hk_value *const *const *)dev, np, results, NULL, NULL));
  hk_value *actual = NULL;
  char *disagree = NULL;
  ck_assert_ok(hk_value_unshard(results, n, p->config.spmd_output_sharding, g->entry->root->shape,
                                &actual, &disagree));
  ck_assert_msg(!disagree, "devices disagree: %s", disagree ? disagree : "");
  hk_compare_result cmp;
  hk_value_compare(expected, actual, -1, -1, &cmp);
  ck_assert_msg(cmp.equal, "partitioned result differs (max abs error %g)", cmp.max_abs_error);
  hk_compare_result_free(&cmp);
  for (int64_t d = 0; d < n; d++) {
    for (int i = 0; i < np; i++) hk_value_release(dev[d][i]);
    free(dev[d]);
    hk_value_release(results[d]);
  }
  for (int i = 0; i < np; i++) hk_value_release(args[i]);
  hk_value_release(expected);
  hk_value_release(actual);
  free(dev);
  free(results);
  free(args);
}

/* Partitions text over n devices with spmd-partitioning{opts} (signature
 * change allowed, as in XLA's tests), checks the values, and returns the
 * partitioned module (the caller frees it). */
static inline hk_module *spmd_check_partition(hk_registry *reg, const char *text, int64_t n,
                                              const char *opts) {
  hk_module *g = hk_test_parse(text);
  g->config.num_partitions = n;
  hk_module *p = hk_module_clone(g);
  char o[512];
  snprintf(o, sizeof o, "allow_module_signature_change=true%s%s", opts ? "," : "", opts ? opts : "");
  hk_test_run_pass(reg, p, "spmd-partitioning", o);
  spmd_check_same_values(g, p, n);
  hk_module_free(g);
  return p;
}

/* Number of collectives (all-reduce, all-gather, all-to-all,
 * collective-permute, reduce-scatter) in m. */
static inline int64_t spmd_check_collectives(const hk_module *m) {
  return hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_ALL_GATHER) +
         hk_test_count_op(m, HK_OP_ALL_TO_ALL) + hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE) +
         hk_test_count_op(m, HK_OP_REDUCE_SCATTER);
}

/* Bytes one device sends through m's collectives of opcode op (their
 * operands' sizes). */
static inline int64_t spmd_check_bytes_sent(const hk_module *m, hk_opcode op) {
  int64_t n = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      for (int j = 0; i->opcode == op && j < i->n_operands; j++)
        n += hk_shape_byte_size(i->operands[j]->shape);
  return n;
}

/* True when m's entry root has exactly these dims. */
static inline bool spmd_check_root_dims(const hk_module *m, int rank, const int64_t *dims) {
  const hk_shape *s = m->entry->root->shape;
  if (s->rank != rank) return false;
  for (int i = 0; i < rank; i++)
    if (s->dims[i] != dims[i]) return false;
  return true;
}

#endif
