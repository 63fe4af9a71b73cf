/* test_spmd_manual.c - Check tests of manual regions, single-device
 * shardings and outfeed in the SPMD partitioner: the collectives each
 * module partitions to (kind, count, bytes sent per device) and, where
 * the global module can be evaluated, the values against it. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

/* Partitions without evaluating: the single-device evaluator cannot run a
 * global module leaving a manual region (`hlokit check` runs it on the
 * devices and says equal for the manual modules below). */
static hk_module *partition_only(const char *text, int64_t n) {
  hk_module *p = hk_test_parse(text);
  p->config.num_partitions = n;
  hk_test_run_pass(reg, p, "spmd-partitioning", "allow_module_signature_change=true");
  return p;
}

/* ---- manual regions --------------------------------------------------------- */

START_TEST(manual_mixed_operands) {
  /* A manual element of a mixed tuple is read in place; a tiled operand of
   * a manual op is replicated whole first (one all-gather of its 2x1 f32
   * shard); the manual values themselves never move. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = (f32[8,2], f32[4,2]) parameter(0), sharding={{devices=[2,1]0,1},{manual}}\n"
      "  p0 = f32[8,2] get-tuple-element(p), index=0, sharding={devices=[2,1]0,1}\n"
      "  p1 = f32[4,2] get-tuple-element(p), index=1, sharding={manual}\n"
      "  q = f32[4,2] parameter(1), sharding={devices=[1,2]0,1}\n"
      "  s = f32[4,2] custom-call(p0), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n"
      "  a = f32[4,2] add(s, p1), sharding={manual}\n"
      "  b = f32[4,2] multiply(a, q), sharding={manual}\n"
      "  ROOT f = f32[8,2] custom-call(b), custom_call_target=\"SPMDShardToFullShape\",\n"
      "    sharding={devices=[2,1]0,1}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 4 * 1 * 4);
  int64_t dims[2] = {4, 2};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(manual_uneven_full_to_shard) {
  /* f32[7,4] split in two: the manual shard is the padded f32[4,4] tile,
   * its padding row zeroed (XLA's PadWithValue), so the manual reduce
   * sums only real rows. */
  const char *text =
      "HloModule m\n"
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT c = f32[] add(a, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[7,4] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  m = f32[4,4] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n"
      "  z = f32[] constant(0), sharding={manual}\n"
      "  r = f32[4] reduce(m, z), dimensions={0}, to_apply=add, sharding={manual}\n"
      "  ROOT f = f32[8] custom-call(r), custom_call_target=\"SPMDShardToFullShape\",\n"
      "    sharding={devices=[2]0,1}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_SELECT), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(manual_subgroup_full_to_shard) {
  /* Manual along dim 0 (two groups), dim 1 tiled within each group: the
   * manual shape is the group's f32[8,16], whose tile is the operand's
   * f32[8,8] shard (accepted as XLA does; it was refused before). */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[16,16] parameter(0), sharding={devices=[2,2]<=[4]}\n"
      "  m = f32[8,16] custom-call(p), custom_call_target=\"SPMDFullToShardShape\",\n"
      "    sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}\n"
      "  n = f32[8,16] negate(m), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}\n"
      "  ROOT f = f32[16,16] custom-call(n), custom_call_target=\"SPMDShardToFullShape\",\n"
      "    sharding={devices=[2,2]<=[4]}\n"
      "}\n";
  hk_module *p = partition_only(text, 4);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[2] = {8, 8};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_NEGATE), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(manual_full_to_shard_shape_refused) {
  /* A manual shape that is not the operand's shard is an error, not a
   * wrong program. */
  hk_module *m = hk_test_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8,2] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  ROOT s = f32[2,2] custom-call(p), custom_call_target=\"SPMDFullToShardShape\",\n"
      "    sharding={manual}\n"
      "}\n");
  m->config.num_partitions = 2;
  hk_status *err = NULL;
  hk_pass *pass = hk_registry_create_pass(reg, "spmd-partitioning", "allow_module_signature_change=true", &err);
  ck_assert_ok(err);
  bool changed = false;
  hk_status *st = hk_pass_run(pass, m, NULL, &changed);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "SPMDFullToShardShape"));
  hk_status_free(st);
  hk_pass_destroy(pass);
  hk_module_free(m);
}
END_TEST

START_TEST(manual_value_read_outside_region) {
  /* A {manual} value read by non-manual instructions (a constant CSE'd
   * between a manual region and the code around it): as in XLA, each
   * device's own value stands as the replicated one, so the replicated
   * copy moves nothing and the tiled copy only slices its tile. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  c = f32[4,2] constant({{1,2},{3,4},{5,6},{7,8}}), sharding={manual}\n"
      "  r = f32[4,2] copy(c), sharding={replicated}\n"
      "  t = f32[4,2] copy(c), sharding={devices=[2,1]0,1}\n"
      "  s = f32[8,2] custom-call(c), custom_call_target=\"SPMDShardToFullShape\",\n"
      "    sharding={devices=[2,1]0,1}\n"
      "  ROOT tu = (f32[4,2], f32[4,2], f32[8,2]) tuple(r, t, s),\n"
      "    sharding={{replicated},{devices=[2,1]0,1},{devices=[2,1]0,1}}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_shape *rs = p->entry->root->shape;
  ck_assert_int_eq(rs->tuple[0]->dims[0], 4);
  ck_assert_int_eq(rs->tuple[1]->dims[0], 2);
  ck_assert_int_eq(rs->tuple[2]->dims[0], 4);
  hk_module_free(p);
}
END_TEST

/* ---- single-device shardings -------------------------------------------------------- */

START_TEST(maximal_ops_stay_on_device) {
  /* Operands and op on device 0: nothing moves (the replicate fallback
   * used to broadcast both init values with all-reduces). */
  const char *text =
      "HloModule m\n"
      "mx {\n"
      "  a = f32[] parameter(0)\n"
      "  ai = s32[] parameter(1)\n"
      "  b = f32[] parameter(2)\n"
      "  bi = s32[] parameter(3)\n"
      "  gt = pred[] compare(a, b), direction=GT\n"
      "  v = f32[] select(gt, a, b)\n"
      "  i = s32[] select(gt, ai, bi)\n"
      "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[6,4] parameter(0), sharding={maximal device=0}\n"
      "  ix = s32[6,4] parameter(1), sharding={maximal device=0}\n"
      "  z = f32[] parameter(2), sharding={maximal device=0}\n"
      "  zi = s32[] parameter(3), sharding={maximal device=0}\n"
      "  ROOT r = (f32[6], s32[6]) reduce(x, ix, z, zi), dimensions={1}, to_apply=mx,\n"
      "    sharding={{maximal device=0}, {maximal device=0}}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(maximal_custom_call_in_conditional) {
  /* A custom call on device 1 runs in a conditional on partition-id == 1;
   * the replicated copy that reads it is one all-reduce of its s32[2,3]. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  c = s32[2,3] parameter(0), sharding={maximal device=1}\n"
      "  cc = s32[2,3] custom-call(c), custom_call_target=\"Sharding\", sharding={maximal device=1}\n"
      "  x = s32[2,3] custom-call(cc), custom_call_target=\"SomeOpaqueCall\", sharding={maximal device=1}\n"
      "  ROOT r = s32[2,3] copy(x), sharding={replicated}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_CONDITIONAL), 1);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 2 * 3 * 4);
  hk_module_free(p);
}
END_TEST

/* ---- outfeed ---------------------------------------------------------------- */

START_TEST(outfeed_tiled_local) {
  /* Every partition outfeeds its own shard; outfeed_shape takes the
   * shard's dims and keeps its layouts. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = token[] after-all()\n"
      "  d = (f32[1024,2], f32[2]) parameter(0), sharding={{devices=[2,1]0,1}, {replicated}}\n"
      "  ROOT o = token[] outfeed(d, t), outfeed_shape=(f32[1024,2]{0,1}, f32[2]{0}),\n"
      "    sharding={{devices=[2,1]0,1}, {replicated}}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_instr *o = hk_test_last_op(p, HK_OP_OUTFEED);
  ck_assert_ptr_nonnull(o);
  ck_assert_int_eq(o->operands[0]->shape->tuple[0]->dims[0], 512);
  const char *shape = NULL;
  for (int32_t i = 0; o->attrs && i < o->attrs->n_raw; i++)
    if (!strcmp(o->attrs->raw[i].name, "outfeed_shape")) shape = o->attrs->raw[i].value;
  ck_assert_str_eq(shape, "(f32[512,2]{0,1}, f32[2]{0})");
  hk_module_free(p);
}
END_TEST

START_TEST(outfeed_uneven_branches) {
  /* f32[1023] and f32[3] over two partitions: shard shapes differ, so a
   * conditional picks one of two branches, the second slicing the
   * padding off; still no collective. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = token[] after-all()\n"
      "  d = (f32[1023,2], f32[3]) parameter(0), sharding={{devices=[2,1]0,1}, {devices=[2]0,1}}\n"
      "  ROOT o = token[] outfeed(d, t), sharding={{devices=[2,1]0,1}, {devices=[2]0,1}}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONDITIONAL);
  ck_assert_ptr_nonnull(c);
  ck_assert_int_eq(c->n_called, 2);
  hk_test_expect_ops(p, {HK_OP_OUTFEED, 2}, {HK_OP_SLICE, 2});
  hk_module_free(p);
}
END_TEST

START_TEST(outfeed_single_device) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  t = token[] after-all()\n"
      "  d = f32[1024] parameter(0), sharding={maximal device=0}\n"
      "  ROOT o = token[] outfeed(d, t), sharding={maximal device=0}\n"
      "}\n";
  hk_module *p = partition_only(text, 2);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_test_expect_ops(p, {HK_OP_CONDITIONAL, 1}, {HK_OP_OUTFEED, 1});
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_manual");
  TCase *t = tcase_create("manual_maximal_outfeed");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, manual_mixed_operands);
  tcase_add_test(t, manual_uneven_full_to_shard);
  tcase_add_test(t, manual_subgroup_full_to_shard);
  tcase_add_test(t, manual_full_to_shard_shape_refused);
  tcase_add_test(t, manual_value_read_outside_region);
  tcase_add_test(t, maximal_ops_stay_on_device);
  tcase_add_test(t, maximal_custom_call_in_conditional);
  tcase_add_test(t, outfeed_tiled_local);
  tcase_add_test(t, outfeed_uneven_branches);
  tcase_add_test(t, outfeed_single_device);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
