/* test_hilo.c - Check tests of the hilo collective passes: each rewrite,
 * what each leaves alone, determinism and idempotence. */
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

static void load_hilo(void) { reg = hk_test_registry_with("hilo"); }

static void unload_hilo(void) { hk_registry_free(reg); }

static bool run_pass(hk_module *m, const char *name, const char *opts) {
  return hk_test_run_pass(reg, m, name, opts);
}

static const char *sum_comp =
    "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT z = f32[] add(x, y)\n}\n\n";

static char *with_sum(const char *entry) {
  size_t n = strlen(sum_comp) + strlen(entry) + 32;
  char *t = malloc(n);
  snprintf(t, n, "HloModule m, num_partitions=4\n\n%s%s", sum_comp, entry);
  return t;
}

START_TEST(unique_channel_id_restamps_duplicates) {
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8] parameter(0)\n"
      "  a = f32[8] all-reduce(p), channel_id=3, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  b = f32[8] all-reduce(a), channel_id=3, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  c = f32[8] all-reduce(b), channel_id=7, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  ROOT d = f32[8] all-reduce(c), channel_id=7, replica_groups={{0,1,2,3}}, to_apply=sum\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(run_pass(m, "hilo-unique-channel-id", NULL));
  ck_assert_int_eq(hk_instr_channel_id(hk_computation_find_instr(m->entry, "a")), 3);
  ck_assert_int_eq(hk_instr_channel_id(hk_computation_find_instr(m->entry, "b")), 8);
  ck_assert_int_eq(hk_instr_channel_id(hk_computation_find_instr(m->entry, "c")), 7);
  ck_assert_int_eq(hk_instr_channel_id(hk_computation_find_instr(m->entry, "d")), 9);
  ck_assert(!run_pass(m, "hilo-unique-channel-id", NULL));
  hk_module_free(m);
  free(t);
}
END_TEST

static const char *stream_attr(hk_module *m, const char *name) {
  hk_instr *i = hk_computation_find_instr(m->entry, name);
  for (int32_t k = 0; i->attrs && k < i->attrs->n_frontend_attributes; k++)
    if (strcmp(i->attrs->frontend_attributes[k].key, "_hilo_stream_id") == 0)
      return i->attrs->frontend_attributes[k].value;
  return NULL;
}

START_TEST(stream_id_separates_independent_collectives) {
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8] parameter(0)\n  q = f32[8] parameter(1)\n"
      "  a = f32[8] all-reduce(p), channel_id=1, to_apply=sum\n"
      "  b = f32[8] all-reduce(q), channel_id=2, to_apply=sum\n"
      "  s = f32[8] add(a, b)\n"
      "  c = f32[8] all-reduce(s), channel_id=3, to_apply=sum\n"
      "  ROOT r = f32[8] add(c, s)\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(run_pass(m, "hilo-collective-stream-id", "num_streams=2"));
  ck_assert_str_eq(stream_attr(m, "a"), "0");
  ck_assert_str_eq(stream_attr(m, "b"), "1");  /* independent of a */
  ck_assert_str_eq(stream_attr(m, "c"), "0");  /* depends on both */
  ck_assert_ptr_null(stream_attr(m, "s"));
  ck_assert(!run_pass(m, "hilo-collective-stream-id", "num_streams=2"));
  ck_assert(run_pass(m, "hilo-collective-stream-id", "num_streams=1"));
  ck_assert_str_eq(stream_attr(m, "b"), "0");
  hk_module_free(m);
  free(t);
}
END_TEST

START_TEST(reduce_scatter_creator_matches_partition_slice) {
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8,3] parameter(0)\n"
      "  ar = f32[8,3] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, "
      "use_global_device_ids=true, to_apply=sum\n"
      "  table = s32[4] constant({0, 2, 4, 6})\n  pid = u32[] partition-id()\n"
      "  off = s32[1] dynamic-slice(table, pid), dynamic_slice_sizes={1}\n"
      "  o = s32[] reshape(off)\n  z = s32[] constant(0)\n"
      "  ROOT ds = f32[2,3] dynamic-slice(ar, o, z), dynamic_slice_sizes={2,3}\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(run_pass(m, "hilo-reduce-scatter-creator", NULL));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  hk_instr *r = m->entry->root;
  ck_assert_int_eq(r->opcode, HK_OP_REDUCE_SCATTER);
  ck_assert_int_eq(r->n_dims, 1);
  ck_assert_int_eq(r->dims[0], 0);
  ck_assert_int_eq(r->shape->dims[0], 2);
  hk_module_free(m);
  free(t);
}
END_TEST

START_TEST(reduce_scatter_creator_rejects_wrong_offsets) {
  /* offsets 0,2,4,6 permuted: device 1 would get chunk 2, not its rank's */
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8] parameter(0)\n"
      "  ar = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, "
      "use_global_device_ids=true, to_apply=sum\n"
      "  table = s32[4] constant({0, 4, 2, 6})\n  pid = u32[] partition-id()\n"
      "  off = s32[1] dynamic-slice(table, pid), dynamic_slice_sizes={1}\n"
      "  o = s32[] reshape(off)\n"
      "  ROOT ds = f32[2] dynamic-slice(ar, o), dynamic_slice_sizes={2}\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(!run_pass(m, "hilo-reduce-scatter-creator", NULL));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 1);
  hk_module_free(m);
  free(t);
}
END_TEST

START_TEST(all_reduce_combiner_merges_independent_ones) {
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8] parameter(0)\n  q = f32[4] parameter(1)\n"
      "  a = f32[8] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  b = f32[4] all-reduce(q), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  c = f32[4] all-reduce(b), channel_id=3, replica_groups={{0,1,2,3}}, to_apply=sum\n"
      "  d = f32[4] all-reduce(q), channel_id=4, replica_groups={{0,1},{2,3}}, to_apply=sum\n"
      "  ROOT r = (f32[8], f32[4], f32[4]) tuple(a, c, d)\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(run_pass(m, "hilo-all-reduce-combiner", NULL));
  /* a and b merge; c depends on b; d has other groups */
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 3);
  hk_instr *r = m->entry->root;
  hk_instr *ga = r->operands[0];
  ck_assert_int_eq(ga->opcode, HK_OP_GET_TUPLE_ELEMENT);
  hk_instr *combined = ga->operands[0];
  ck_assert_int_eq(combined->opcode, HK_OP_ALL_REDUCE);
  ck_assert_int_eq(combined->n_operands, 2);
  ck_assert_ptr_eq(r->operands[1]->operands[0]->operands[0], combined);  /* c(gte(combined)) */
  ck_assert(!run_pass(m, "hilo-all-reduce-combiner", NULL));
  hk_module_free(m);
  free(t);
}
END_TEST

START_TEST(all_reduce_combiner_respects_byte_threshold) {
  char *t = with_sum(
      "ENTRY e {\n  p = f32[8] parameter(0)\n  q = f32[8] parameter(1)\n"
      "  a = f32[8] all-reduce(p), channel_id=1, to_apply=sum\n"
      "  b = f32[8] all-reduce(q), channel_id=2, to_apply=sum\n"
      "  ROOT r = (f32[8], f32[8]) tuple(a, b)\n}\n");
  hk_module *m = hk_test_parse(t);
  ck_assert(!run_pass(m, "hilo-all-reduce-combiner", "combine_threshold_bytes=40"));
  ck_assert(run_pass(m, "hilo-all-reduce-combiner", "combine_threshold_bytes=64"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 1);
  hk_module_free(m);
  free(t);
}
END_TEST

START_TEST(all_gather_combiner_needs_same_dimension) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  p = f32[2,3] parameter(0)\n  q = f32[2,3] parameter(1)\n  s = f32[2,3] parameter(2)\n"
      "  a = f32[4,3] all-gather(p), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true\n"
      "  b = f32[4,3] all-gather(q), channel_id=2, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true\n"
      "  c = f32[2,6] all-gather(s), channel_id=3, replica_groups={{0,1}}, dimensions={1}, use_global_device_ids=true\n"
      "  ROOT r = (f32[4,3], f32[4,3], f32[2,6]) tuple(a, b, c)\n}\n");
  ck_assert(run_pass(m, "hilo-all-gather-combiner", NULL));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 2);
  hk_module_free(m);
}
END_TEST

START_TEST(cycle_decomposer_splits_ring) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
      "  ROOT cp = f32[8] collective-permute(p), channel_id=1, "
      "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n}\n");
  ck_assert(run_pass(m, "hilo-collective-permute-cycle-decomposer", NULL));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), 2);
  hk_instr *sel = m->entry->root;
  ck_assert_int_eq(sel->opcode, HK_OP_SELECT);
  hk_instr *back = sel->operands[1], *rest = sel->operands[2];
  ck_assert_int_eq(back->attrs->n_source_target_pairs, 1);
  ck_assert_int_eq(back->attrs->source_target_pairs[0].a, 3);
  ck_assert_int_eq(back->attrs->source_target_pairs[0].b, 0);
  ck_assert_int_eq(rest->attrs->n_source_target_pairs, 3);
  ck_assert_int_ne(hk_instr_channel_id(back), hk_instr_channel_id(rest));
  ck_assert(!run_pass(m, "hilo-collective-permute-cycle-decomposer", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(cycle_decomposer_leaves_acyclic_alone) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
      "  ROOT cp = f32[8] collective-permute(p), channel_id=1, "
      "source_target_pairs={{0,1},{1,2},{2,3}}\n}\n");
  ck_assert(!run_pass(m, "hilo-collective-permute-cycle-decomposer", NULL));
  hk_module_free(m);
}
END_TEST

static Suite *hilo_suite(void) {
  Suite *s = suite_create("hilo");
  TCase *tc = tcase_create("passes");
  tcase_add_checked_fixture(tc, load_hilo, unload_hilo);
  tcase_add_test(tc, unique_channel_id_restamps_duplicates);
  tcase_add_test(tc, stream_id_separates_independent_collectives);
  tcase_add_test(tc, reduce_scatter_creator_matches_partition_slice);
  tcase_add_test(tc, reduce_scatter_creator_rejects_wrong_offsets);
  tcase_add_test(tc, all_reduce_combiner_merges_independent_ones);
  tcase_add_test(tc, all_reduce_combiner_respects_byte_threshold);
  tcase_add_test(tc, all_gather_combiner_needs_same_dimension);
  tcase_add_test(tc, cycle_decomposer_splits_ring);
  tcase_add_test(tc, cycle_decomposer_leaves_acyclic_alone);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(hilo_suite)
