/* test_propagation.c - Check tests of the sharding-propagation plugin:
 * known answers per rule family, shard groups, manual regions, barriers
 * (through test-registered custom-call partitioners), options and the
 * explain extension. */
#include <sys/wait.h>

#include "hlokit/propagation.h"
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

/* ---- XLA's shard barrier partitioners, registered by the test ----------- */

static bool barrier_shardable(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  (void)cc;
  return true;
}

static bool barrier_replicated_ok(const hk_custom_call_partitioner *self) {
  (void)self;
  return true;
}

static const hk_sharding *from_blocks(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  (void)cc;
  return NULL;
}

static const hk_sharding *from_passes(const hk_custom_call_partitioner *self, const hk_instr *cc) {
  (void)self;
  return cc->operands[0]->sharding;
}

static const hk_sharding *user_passes(const hk_custom_call_partitioner *self, const hk_instr *cc,
                                      const hk_instr *user, const hk_sharding *s) {
  (void)self;
  (void)cc;
  (void)user;
  return s;
}

static const hk_sharding *user_blocks(const hk_custom_call_partitioner *self, const hk_instr *cc,
                                      const hk_instr *user, const hk_sharding *s) {
  (void)self;
  (void)user;
  (void)s;
  return hk_sharding_replicated(cc->parent->module);
}

static const hk_custom_call_partitioner_vtable barrier_from_vt = {
    .size = sizeof(hk_custom_call_partitioner_vtable), .is_shardable = barrier_shardable,
    .infer_sharding_from_operands = from_blocks, .propagate_user_sharding = user_passes,
    .can_side_effecting_have_replicated_sharding = barrier_replicated_ok};
static const hk_custom_call_partitioner_vtable barrier_to_vt = {
    .size = sizeof(hk_custom_call_partitioner_vtable), .is_shardable = barrier_shardable,
    .infer_sharding_from_operands = from_passes, .propagate_user_sharding = user_blocks,
    .can_side_effecting_have_replicated_sharding = barrier_replicated_ok};
static hk_custom_call_partitioner barrier_from = {&barrier_from_vt};
static hk_custom_call_partitioner barrier_to = {&barrier_to_vt};

static void load_plugin(void) {
  char path[4096];
  hk_test_plugin_path("propagation", path, sizeof path);
  reg = hk_registry_new();
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
  ck_assert_ok(hk_registry_add_custom_call_partitioner(reg, "ShardBarrierFrom", &barrier_from));
  ck_assert_ok(hk_registry_add_custom_call_partitioner(reg, "ShardBarrierTo", &barrier_to));
}

static void unload_plugin(void) { hk_registry_free(reg); }

/* ---- helpers --------------------------------------------------------------- */

static bool propagate(hk_module *m, const char *opts) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "sharding-propagation", opts, &err);
  ck_assert_ok(err);
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  hk_pass_destroy(p);
  return changed;
}


/* name's sharding means `want` (NULL: unsharded). */
static void expect(hk_module *m, const char *name, const char *want) {
  hk_instr *i = hk_test_find(m, name);
  char *got = i->sharding ? hk_sharding_to_string(i->sharding) : NULL;
  if (!want) {
    ck_assert_msg(!i->sharding, "%s: expected no sharding, got %s", name, got);
    return;
  }
  const hk_sharding *w = NULL;
  ck_assert_ok(hk_sharding_parse(m, want, strlen(want), &w, NULL));
  w = hk_sharding_for_shape(m, hk_sharding_canonical(m, w), i->shape);
  bool ok = i->sharding && hk_sharding_equivalent(w, hk_sharding_for_shape(m, i->sharding, i->shape));
  ck_assert_msg(ok, "%s: expected %s, got %s", name, want, got ? got : "none");
  free(got);
}

static hk_module *run_text(const char *text, const char *opts) {
  hk_module *m = hk_test_parse(text);
  propagate(m, opts);
  return m;
}

/* ---- elementwise, broadcast, transpose, reshape, reduce ---------------------- */

START_TEST(elementwise_both_directions) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[4,8] parameter(0), sharding={devices=[2,2]0,1,2,3}\n"
      "  p1 = f32[4,8] parameter(1)\n"
      "  a = f32[4,8] add(p0, p1)\n  ROOT c = f32[4,8] copy(a)\n}\n",
      "is_spmd=true");
  expect(m, "a", "{devices=[2,2]0,1,2,3}");
  expect(m, "p1", NULL);       /* entry parameters are not sharded by default */
  expect(m, "c", NULL);        /* nor the entry root */
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[4,8] parameter(0)\n  n = f32[4,8] negate(p0)\n"
      "  ROOT c = f32[4,8] copy(n), sharding={devices=[1,4]0,1,2,3}\n}\n",
      "is_spmd=true");
  expect(m, "n", "{devices=[1,4]0,1,2,3}");
  hk_module_free(m);
}
END_TEST

START_TEST(broadcast_forward_and_backward) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[3,8] parameter(0), sharding={devices=[1,4]0,1,2,3}\n"
      "  b = f32[3,8,5] broadcast(p), dimensions={0,1}\n  ROOT c = f32[3,8,5] copy(b)\n}\n",
      "is_spmd=true");
  expect(m, "b", "{devices=[1,4,1]0,1,2,3}");
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[8] parameter(0)\n  q = f32[8] copy(p)\n"
      "  b = f32[6,8] broadcast(q), dimensions={1}\n"
      "  ROOT c = f32[6,8] copy(b), sharding={devices=[2,2]0,1,2,3}\n}\n",
      "is_spmd=true");
  /* the broadcast dim's partitions become replication of the operand */
  expect(m, "q", "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

START_TEST(transpose_and_reshape) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[4,6,8] parameter(0), sharding={devices=[2,1,4]0,1,2,3,4,5,6,7}\n"
      "  t = f32[8,4,6] transpose(p), dimensions={2,0,1}\n"
      "  r = f32[8,24] reshape(t)\n"
      "  s = f32[2,4,4,6] reshape(t)\n"
      "  ROOT tu = (f32[8,24], f32[2,4,4,6]) tuple(r, s)\n}\n",
      "is_spmd=true");
  expect(m, "t", "{devices=[4,2,1]0,4,1,5,2,6,3,7}");
  expect(m, "r", "{devices=[4,2]0,4,1,5,2,6,3,7}");            /* merge, major sharded */
  expect(m, "s", "{devices=[2,2,2,1]0,4,1,5,2,6,3,7}");        /* split of a sharded dim */
  hk_module_free(m);
  m = run_text(   /* 14 = 7 x 2 cannot keep 4 partitions: they become replication */
      "HloModule m\nENTRY e {\n"
      "  p = f32[14,32] parameter(0), sharding={devices=[4,4]<=[16]}\n"
      "  r = f32[7,2,2,16] reshape(p)\n  ROOT c = f32[7,2,2,16] copy(r)\n}\n",
      "is_spmd=false");
  expect(m, "r", "{devices=[1,1,2,2,4]0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 last_tile_dim_replicate}");
  hk_module_free(m);
  m = run_text(   /* 12x8 -> 8x12: the common major factor 4 keeps the 2 partitions */
      "HloModule m\nENTRY e {\n"
      "  p = f32[12,8] parameter(0), sharding={devices=[2,4]<=[8]}\n"
      "  r = f32[8,12] reshape(p)\n  ROOT c = f32[8,12] copy(r)\n}\n",
      "is_spmd=false");
  expect(m, "r", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

/* XLA's PropagateShardingThroughReshape: a dropped size-1 dim's tiles
 * become replication with the tile assignment reshaped row-major (XLA's
 * device order, not a transpose), both directions; manual subgroups stay. */
START_TEST(reshape_size1_dims_keep_device_order) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,128] parameter(0), sharding={replicated}\n  c = f32[8,128] copy(p)\n"
      "  r = f32[8,1,128] reshape(c), sharding={devices=[1,2,4]<=[8]}\n"
      "  ROOT o = f32[8,1,128] copy(r), sharding={devices=[1,2,4]<=[8]}\n}\n",
      "is_spmd=true");
  expect(m, "c", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}");
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,1,128] parameter(0), sharding={devices=[2,2,2]<=[8]}\n"
      "  r = f32[8,128] reshape(p)\n  ROOT o = f32[8,128] copy(r)\n}\n",
      "is_spmd=true");
  expect(m, "r", "{devices=[2,2,2]<=[8] last_tile_dim_replicate}");
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dims={manual}}\n"
      "  r = f32[8,2,3] reshape(p)\n  ROOT o = f32[8,2,3] copy(r)\n}\n",
      "is_spmd=true");
  expect(m, "r", "{devices=[2,1,1,2]<=[4] last_tile_dims={manual}}");
  hk_module_free(m);
}
END_TEST

/* The error message of a propagation run on text that must fail. */
static char *propagate_error(const char *text, const char *opts) {
  hk_module *m = hk_test_parse(text);
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "sharding-propagation", opts, &err);
  ck_assert_ok(err);
  bool changed = false;
  hk_status *st = hk_pass_run(p, m, NULL, &changed);
  hk_pass_destroy(p);
  hk_module_free(m);
  ck_assert_msg(st != NULL, "propagation accepted a module it must refuse");
  char *msg = strdup(st->message);
  hk_status_free(st);
  return msg;
}

#define WHILE_WITH_RECV(count_sh, data_sh, while_sh)                                          \
  "HloModule m\n"                                                                            \
  "cond {\n  v = (u32[], f32[]) parameter(0)\n  c = u32[] get-tuple-element(v), index=0\n"  \
  "  l = u32[] constant(4)\n  ROOT lt = pred[] compare(c, l), direction=LT\n}\n"            \
  "body {\n  p = (u32[], f32[]) parameter(0)\n"                                             \
  "  n = u32[] get-tuple-element(p), index=0" count_sh "\n"                                 \
  "  tok = token[] after-all()\n"                                                          \
  "  r = (f32[], u32[], token[]) recv(tok), channel_id=3, sharding={maximal device=2}\n"    \
  "  rd = (f32[], token[]) recv-done(r), channel_id=3\n"                                    \
  "  d = f32[] get-tuple-element(rd), index=0" data_sh "\n"                                 \
  "  ROOT t = (u32[], f32[]) tuple(n, d)\n}\n"                                              \
  "ENTRY e {\n  x = f32[] parameter(0)\n  z = u32[] constant(0)\n"                          \
  "  i = (u32[], f32[]) tuple(z, x)\n"                                                       \
  "  w = (u32[], f32[]) while(i), body=body, condition=cond" while_sh "\n"                  \
  "  ROOT o = f32[] get-tuple-element(w), index=1\n}\n"

/* XLA's CheckAndUpdateDeviceAssignmentsInWhileBody: a channel instruction
 * pins the loop to its device; other devices before or after it, or on the
 * while, are errors; the body root goes to the device. */
START_TEST(while_channel_device_conflicts) {
  char *e = propagate_error(WHILE_WITH_RECV(", sharding={maximal device=1}", "", ""), "");
  ck_assert_msg(strstr(e, "Instruction: n is on device: 1, which conflicts with device: 2 of channel instruction: r"), "%s", e);
  free(e);
  e = propagate_error(WHILE_WITH_RECV("", ", sharding={maximal device=0}", ""), "");
  ck_assert_msg(strstr(e, "Instruction: d is on device: 0, which conflicts with device: 2"), "%s", e);
  free(e);
  e = propagate_error(WHILE_WITH_RECV("", "", ", sharding={{maximal device=0}, {maximal device=0}}"), "");
  ck_assert_msg(strstr(e, "Instruction: w is on device: 0, which conflicts with device: 2"), "%s", e);
  free(e);
  hk_module *m = run_text(WHILE_WITH_RECV("", "", ""), "");
  expect(m, "t", "{{maximal device=2}, {maximal device=2}}");
  expect(m, "w", "{{maximal device=2}, {maximal device=2}}");
  hk_module_free(m);
}
END_TEST

/* Manual shardings on single tuple elements: manual beats a replicated
 * element, a tile-maximal instruction takes a manual user's sharding, an
 * operand used twice by a tuple takes its most specific element, and a
 * get-tuple-element's unsharded siblings keep the user's manual subgroup at
 * their own rank. */
START_TEST(manual_tuple_elements) {
  hk_module *m = run_text(
      "HloModule m\n"
      "cond {\n  v = (s32[], s32[], s32[]) parameter(0)\n  c = s32[] get-tuple-element(v), index=0\n"
      "  l = s32[] constant(5)\n  ROOT lt = pred[] compare(c, l), direction=LT\n}\n"
      "body {\n  p = (s32[], s32[], s32[]) parameter(0)\n  a = s32[] get-tuple-element(p), index=0\n"
      "  b = s32[] get-tuple-element(p), index=1\n  c = s32[] get-tuple-element(p), index=2\n"
      "  s = s32[] multiply(b, c)\n  ROOT t = (s32[], s32[], s32[]) tuple(a, b, s)\n}\n"
      "ENTRY e {\n  k = s32[] constant(1)\n  x = s32[] parameter(0), sharding={manual}\n"
      "  i = (s32[], s32[], s32[]) tuple(k, k, x)\n"
      "  w = (s32[], s32[], s32[]) while(i), body=body, condition=cond\n"
      "  ROOT o = (s32[], s32[], s32[]) copy(w)\n}\n",
      "is_spmd=true");
  expect(m, "b", "{manual}");
  expect(m, "k", "{manual}");
  expect(m, "w", "{{manual}, {manual}, {manual}}");
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  q = pred[4,8] parameter(0)\n"
      "  z = s32[] constant(0)\n  i = (s32[], pred[4,8]) tuple(z, q)\n"
      "  g = pred[4,8] get-tuple-element(i), index=1\n"
      "  n = pred[4,8] not(g), sharding={devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}\n"
      "  ROOT o = (s32[], pred[4,8]) tuple(z, n)\n}\n",
      "is_spmd=true");
  expect(m, "i", "{{replicated}, {devices=[1,1,2,2]<=[4] last_tile_dims={manual, replicated}}}");
  hk_module_free(m);
}
END_TEST

/* XLA's RefineManualAutoShardingFromAuto: an annotation with unspecified
 * dims feeding SPMDFullToShardShape with the same unspecified dims is
 * refined together with it: the operand's tiling of dim 1 joins both the
 * auto annotation and the manual conversion. */
START_TEST(unspecified_dims_across_manual_conversion) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[4,8] parameter(0)\n"
      "  c = f32[4,8] copy(p), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  a = f32[4,8] custom-call(c), custom_call_target=\"Sharding\", backend_config=\"unspecified_dims=[1]\",\n"
      "    sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  mn = f32[2,8] custom-call(a), custom_call_target=\"SPMDFullToShardShape\", backend_config=\"unspecified_dims=[1]\",\n"
      "    sharding={devices=[1,1,2,2]0,2,1,3 last_tile_dims={replicated, manual}}\n"
      "  ROOT r = f32[2,8] copy(mn)\n}\n",
      "is_spmd=true");
  /* the annotation became a copy: the conversion's operand */
  expect(m, hk_test_find(m, "mn")->operands[0]->name, "{devices=[2,2]<=[4]}");
  expect(m, "mn", "{devices=[1,2,2]0,2,1,3 last_tile_dims={manual}}");
  hk_module_free(m);
  /* different unspecified dims on the conversion: nothing is refined */
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[4,8] parameter(0)\n"
      "  c = f32[4,8] copy(p), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  a = f32[4,8] custom-call(c), custom_call_target=\"Sharding\", backend_config=\"unspecified_dims=[1]\",\n"
      "    sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  mn = f32[2,8] custom-call(a), custom_call_target=\"SPMDFullToShardShape\",\n"
      "    sharding={devices=[1,1,2,2]0,2,1,3 last_tile_dims={replicated, manual}}\n"
      "  ROOT r = f32[2,8] copy(mn)\n}\n",
      "is_spmd=true");
  expect(m, "mn", "{devices=[1,1,2,2]0,2,1,3 last_tile_dims={replicated, manual}}");
  hk_module_free(m);
}
END_TEST

/* XLA's InferConvolutionShardingFromOperands with a kernel as large as the
 * output: only the lhs batch dim keeps its tiling (data parallelism). */
START_TEST(convolution_large_kernel_keeps_batch) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[8,16,6,6] parameter(0), sharding={devices=[2,1,2,1]<=[4]}\n"
      "  p1 = f32[16,1,6,6] parameter(1), sharding={replicated}\n"
      "  c = f32[8,16,1,1] convolution(p0, p1), window={size=6x6}, dim_labels=bf01_oi01->bf01, feature_group_count=16\n"
      "  ROOT o = f32[8,16,1,1] copy(c)\n}\n",
      "is_spmd=true");
  expect(m, "c", "{devices=[2,1,1,1,2]<=[4] last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

/* Shardings into and out of call computations: the call's sharding
 * reaches its target's root, its parameter and from there the call's
 * operand (XLA's related instructions of a call and of its parameter);
 * an operand's sharding reaches the target and comes out of the call. */
START_TEST(call_computations_both_ways) {
  const char *callee =
      "HloModule m\n"
      "f {\n  q = f32[8,4] parameter(0)\n  n = f32[8,4] negate(q)\n  ROOT t = (f32[8,4]) tuple(n)\n}\n";
  char text[1024];
  snprintf(text, sizeof text, "%s%s", callee,
           "ENTRY e {\n  x = f32[8,4] parameter(0)\n  a = f32[8,4] add(x, x)\n"
           "  ROOT c = (f32[8,4]) call(a), to_apply=f, sharding={{devices=[2,1]<=[2]}}\n}\n");
  hk_module *m = run_text(text, "is_spmd=true");
  expect(m, "n", "{devices=[2,1]<=[2]}");
  expect(m, "q", "{devices=[2,1]<=[2]}");
  expect(m, "a", "{devices=[2,1]<=[2]}");
  hk_module_free(m);
  snprintf(text, sizeof text, "%s%s", callee,
           "ENTRY e {\n  x = f32[8,4] parameter(0)\n  a = f32[8,4] copy(x), sharding={devices=[1,2]<=[2]}\n"
           "  c = (f32[8,4]) call(a), to_apply=f\n  g = f32[8,4] get-tuple-element(c), index=0\n"
           "  ROOT o = f32[8,4] copy(g)\n}\n");
  m = run_text(text, "is_spmd=true");
  expect(m, "n", "{devices=[1,2]<=[2]}");
  expect(m, "g", "{devices=[1,2]<=[2]}");
  hk_module_free(m);
}
END_TEST

/* Uneven shardings of a tuple root propagated to the output become
 * replicated only when allow_spmd_sharding_propagation_to_output names
 * every element (XLA checks evenness per listed element only). */
START_TEST(uneven_output_replicated_only_per_element) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[5,8] parameter(0), sharding={devices=[2,2]<=[4]}\n"
      "  a = f32[5,8] negate(p)\n  b = f32[5,8] abs(p)\n"
      "  ROOT t = (f32[5,8], f32[5,8]) tuple(a, b)\n}\n";
  hk_module *m = run_text(text, "is_spmd=true allow_spmd_sharding_propagation_to_output=[true]");
  expect(m, "t", "{{devices=[2,2]<=[4]}, {devices=[2,2]<=[4]}}");
  hk_module_free(m);
  m = run_text(text, "is_spmd=true allow_spmd_sharding_propagation_to_output=[true,true]");
  expect(m, "t", "{{replicated}, {replicated}}");
  hk_module_free(m);
}
END_TEST

/* After the loop XLA aligns every shard_as group on one sharding: the
 * members' merged sharding when compatible, else the first sharded
 * member's, annotations included (XLA's group order is unspecified); a
 * ShardBarrierFrom member hands the group's sharding to its operand, and
 * barriers are removed. */
START_TEST(shard_as_groups_aligned_after_the_loop) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[8,8] parameter(0)\n  p1 = f32[8,8] parameter(1)\n"
      "  a = f32[8,8] copy(p0), sharding={devices=[2,1]<=[2]}\n"
      "  sa = f32[8,8] custom-call(a), custom_call_target=\"Sharding\", sharding={unknown shard_as 0}\n"
      "  b = f32[8,8] copy(p1), sharding={devices=[1,2]<=[2]}\n"
      "  sb = f32[8,8] custom-call(b), custom_call_target=\"Sharding\", sharding={unknown shard_as 0}\n"
      "  ROOT t = (f32[8,8], f32[8,8]) tuple(sa, sb)\n}\n",
      "is_spmd=true");
  /* incompatible: one member's sharding for all (which one XLA leaves open) */
  ck_assert(hk_sharding_equivalent(hk_test_find(m, "a")->sharding, hk_test_find(m, "b")->sharding));
  ck_assert(hk_sharding_is_tiled(hk_test_find(m, "a")->sharding));
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[8,8] parameter(0)\n  p1 = f32[8,8] parameter(1)\n"
      "  a = f32[8,8] copy(p0)\n"
      "  f = f32[8,8] custom-call(a), custom_call_target=\"ShardBarrierFrom\", custom_call_has_side_effect=true\n"
      "  sa = f32[8,8] custom-call(f), custom_call_target=\"Sharding\", sharding={unknown shard_as 1}\n"
      "  b = f32[8,8] copy(p1), sharding={devices=[4,1]<=[4]}\n"
      "  sb = f32[8,8] custom-call(b), custom_call_target=\"Sharding\", sharding={unknown shard_as 1}\n"
      "  ROOT t = (f32[8,8], f32[8,8]) tuple(sa, sb)\n}\n",
      "is_spmd=true");
  expect(m, "a", "{devices=[4,1]<=[4]}");
  ck_assert_int_eq(hk_test_find(m, "t")->operands[0]->opcode, HK_OP_COPY);   /* barrier gone */
  hk_module_free(m);
}
END_TEST

/* A variadic (tuple) reduce's operand takes its element's sharding with
 * the reduced dims put back, merged with the other inputs' where
 * compatible (XLA's GetShardingFromUser for kReduce). */
START_TEST(tuple_reduce_backward_merges_other_inputs) {
  hk_module *m = run_text(
      "HloModule m\n"
      "mm {\n  a0 = f32[] parameter(0)\n  b0 = f32[] parameter(1)\n  a1 = f32[] parameter(2)\n"
      "  b1 = f32[] parameter(3)\n  x = f32[] maximum(a0, a1)\n  y = f32[] minimum(b0, b1)\n"
      "  ROOT t = (f32[], f32[]) tuple(x, y)\n}\n"
      "ENTRY e {\n  pa = f32[8,6] parameter(0)\n  pb = f32[8,6] parameter(1)\n"
      "  a = f32[8,6] copy(pa)\n"
      "  b = f32[8,6] copy(pb), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  z = f32[] constant(0)\n"
      "  r = (f32[8], f32[8]) reduce(a, b, z, z), dimensions={1}, to_apply=mm,\n"
      "    sharding={{devices=[2,2]<=[4] last_tile_dim_replicate}, {devices=[2,2]<=[4] last_tile_dim_replicate}}\n"
      "  ROOT o = (f32[8], f32[8]) copy(r)\n}\n",
      "is_spmd=true");
  expect(m, "a", "{devices=[2,2]<=[4]}");
  hk_module_free(m);
}
END_TEST

/* XLA never counts a parameter as user-provided (only unrefinable entry
 * parameters are): a callee parameter annotated replicated still takes the
 * tiled sharding of the operand it receives. */
START_TEST(callee_parameters_are_not_provided) {
  hk_module *m = run_text(
      "HloModule m\n"
      "f {\n  q = f32[8,4] parameter(0), sharding={replicated}\n  ROOT n = f32[8,4] negate(q)\n}\n"
      "ENTRY e {\n  x = f32[8,4] parameter(0), sharding={devices=[2,1]<=[2]}\n"
      "  a = f32[8,4] copy(x)\n  c = f32[8,4] call(a), to_apply=f\n  ROOT o = f32[8,4] copy(c)\n}\n",
      "is_spmd=true");
  expect(m, "q", "{devices=[2,1]<=[2]}");
  expect(m, "x", "{devices=[2,1]<=[2]}");
  hk_module_free(m);
}
END_TEST

START_TEST(reduce_keeps_other_dims) {
  hk_module *m = run_text(
      "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n"
      "  p = f32[4,8,16] parameter(0), sharding={devices=[2,2,2]<=[8]}\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[4,16] reduce(p, z), dimensions={1}, to_apply=add\n"
      "  ROOT c = f32[4,16] copy(r)\n}\n",
      "is_spmd=true");
  expect(m, "r", "{devices=[2,2,2]0,2,1,3,4,6,5,7 last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

/* ---- dot and convolution ------------------------------------------------------- */

START_TEST(megatron_dots) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  x = f32[16,64] parameter(0), sharding={replicated}\n"
      "  w1 = f32[64,256] parameter(1), sharding={devices=[1,8]<=[8]}\n"
      "  w2 = f32[256,64] parameter(2), sharding={devices=[8,1]<=[8]}\n"
      "  d1 = f32[16,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  r = f32[16,256] maximum(d1, d1)\n"
      "  d2 = f32[16,64] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT o = f32[16,64] add(d2, x), sharding={replicated}\n}\n",
      "is_spmd=true");
  expect(m, "d1", "{devices=[1,8]<=[8]}");
  expect(m, "r", "{devices=[1,8]<=[8]}");
  expect(m, "d2", "{replicated}");
  hk_module_free(m);
}
END_TEST

START_TEST(dot_operand_from_output) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  a = f32[8,16] parameter(0)\n  b = f32[16,32] parameter(1)\n"
      "  ac = f32[8,16] copy(a)\n  bc = f32[16,32] copy(b)\n"
      "  d = f32[8,32] dot(ac, bc), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT c = f32[8,32] copy(d), sharding={devices=[2,2]0,1,2,3}\n}\n",
      "is_spmd=true");
  expect(m, "d", "{devices=[2,2]0,1,2,3}");
  expect(m, "ac", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  expect(m, "bc", "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

START_TEST(convolution_as_batch_dot) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  lhs = f32[32,24,64] parameter(0)\n"
      "  lc = f32[32,24,64] copy(lhs), sharding={devices=[2,1,1]0,1}\n"
      "  rhs = f32[32,39296,64] parameter(1)\n  rc = f32[32,39296,64] copy(rhs)\n"
      "  conv = f32[32,24,39296] convolution(lc, rc), dim_labels=0bf_0oi->0bf,"
      " window={size=32 stride=31 lhs_dilate=32}\n"
      "  ROOT c = f32[32,24,39296] copy(conv)\n}\n",
      "is_spmd=false");
  expect(m, "conv", "{devices=[2,1,1]0,1}");
  expect(m, "rc", "{devices=[2,1,1]0,1}");
  hk_module_free(m);
}
END_TEST

/* ---- data movement ---------------------------------------------------------------- */

START_TEST(slice_pad_concat_dynamic_slice) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,16] parameter(0), sharding={devices=[2,2]0,1,2,3}\n"
      "  s = f32[4,16] slice(p), slice={[0:4], [0:16]}\n"
      "  z = f32[] constant(0)\n"
      "  pd = f32[10,16] pad(p, z), padding=1_1x0_0\n"
      "  i = s32[] parameter(1)\n"
      "  ds = f32[8,4] dynamic-slice(p, i, i), dynamic_slice_sizes={8,4}\n"
      "  cc = f32[16,16] concatenate(p, p), dimensions={0}\n"
      "  ROOT t = (f32[4,16], f32[10,16], f32[8,4], f32[16,16]) tuple(s, pd, ds, cc)\n}\n",
      "is_spmd=true");
  expect(m, "s", "{devices=[2,2]0,1,2,3}");
  expect(m, "pd", "{devices=[2,2]0,1,2,3}");
  expect(m, "ds", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");   /* sliced dim replicated */
  expect(m, "cc", "{devices=[2,2]0,1,2,3}");
  hk_module_free(m);
}
END_TEST

START_TEST(gather_and_scatter) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  input = f32[2,2,9] parameter(0), sharding={replicated}\n"
      "  indices = s32[2,3,4] parameter(1), sharding={devices=[1,2,1]0,1}\n"
      "  g = f32[3,4,9] gather(input, indices), offset_dims={2}, collapsed_slice_dims={0,1},"
      " start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1,9}\n"
      "  ROOT c = f32[3,4,9] copy(g)\n}\n",
      "is_spmd=false");
  expect(m, "g", "{devices=[2,1,1]0,1}");   /* index passthrough */
  hk_module_free(m);
  m = run_text(
      "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n"
      "  input = f32[2,9] parameter(0), sharding={replicated}\n"
      "  indices = s32[3] parameter(1), sharding={replicated}\n"
      "  updates = f32[3,9] parameter(2), sharding={devices=[1,2]0,1}\n"
      "  sc = f32[2,9] scatter(input, indices, updates), to_apply=add, update_window_dims={1},"
      " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1\n"
      "  ROOT c = f32[2,9] copy(sc)\n}\n",
      "is_spmd=true");
  expect(m, "sc", "{devices=[1,2]0,1}");     /* update window passthrough */
  hk_module_free(m);
}
END_TEST

/* ---- tuples and control flow -------------------------------------------------------- */

START_TEST(while_state_agrees) {
  hk_module *m = run_text(
      "HloModule m\ncond {\n  cp = (f32[8], s32[]) parameter(0)\n"
      "  ci = s32[] get-tuple-element(cp), index=1\n  lim = s32[] constant(4)\n"
      "  ROOT lt = pred[] compare(ci, lim), direction=LT\n}\n"
      "body {\n  bp = (f32[8], s32[]) parameter(0)\n"
      "  bx = f32[8] get-tuple-element(bp), index=0\n  bi = s32[] get-tuple-element(bp), index=1\n"
      "  nx = f32[8] negate(bx)\n  one = s32[] constant(1)\n  ni = s32[] add(bi, one)\n"
      "  ROOT bt = (f32[8], s32[]) tuple(nx, ni)\n}\n"
      "ENTRY e {\n  x = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
      "  z = s32[] constant(0)\n  t = (f32[8], s32[]) tuple(x, z)\n"
      "  w = (f32[8], s32[]) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[8] get-tuple-element(w), index=0\n}\n",
      "is_spmd=true");
  expect(m, "bx", "{devices=[4]0,1,2,3}");
  expect(m, "nx", "{devices=[4]0,1,2,3}");
  expect(m, "w", "{{devices=[4]0,1,2,3}, {replicated}}");
  expect(m, "bp", "{{devices=[4]0,1,2,3}, {replicated}}");
  expect(m, "cp", "{{devices=[4]0,1,2,3}, {replicated}}");
  hk_module_free(m);
}
END_TEST

/* ---- annotations: Sharding custom calls, shard groups, manual regions ----------- */

START_TEST(sharding_custom_call_unspecified_dims) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[6,3] parameter(0)\n"
      "  c = f32[6,3] copy(p), sharding={devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}\n"
      "  a = f32[6,3] custom-call(c), custom_call_target=\"Sharding\","
      " backend_config=\"unspecified_dims=[1]\", sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  c2 = f32[6,3] copy(a)\n  ROOT c3 = f32[6,3] copy(c2)\n}\n",
      "is_spmd=true");
  expect(m, "c2", "{devices=[2,2]0,2,1,3}");   /* the open dim refined from the operand */
  hk_module_free(m);
}
END_TEST

START_TEST(shard_as_group) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[16,16] parameter(0)\n"
      "  p1 = f32[16,16] parameter(1), sharding={devices=[4,2]<=[8]}\n"
      "  a1 = f32[16,16] add(p0, p0)\n"
      "  s1 = f32[16,16] custom-call(a1), custom_call_target=\"Sharding\", sharding={unknown shard_as 0}\n"
      "  a2 = f32[16,16] add(p1, p1)\n"
      "  s2 = f32[16,16] custom-call(a2), custom_call_target=\"Sharding\", sharding={unknown shard_as 0}\n"
      "  ROOT m = f32[16,16] multiply(s1, s2)\n}\n",
      "is_spmd=true");
  expect(m, "a2", "{devices=[4,2]<=[8]}");
  expect(m, "a1", "{devices=[4,2]<=[8]}");     /* same group: same sharding */
  hk_module_free(m);
}
END_TEST

START_TEST(manual_region) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8,4] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
      "  c = f32[8,4] copy(p)\n"
      "  a = f32[8,4] custom-call(c), custom_call_target=\"Sharding\", sharding={devices=[4,1]0,1,2,3}\n"
      "  f = f32[2,4] custom-call(a), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n"
      "  n = f32[2,4] negate(f)\n"
      "  b = f32[2,4] custom-call(n), custom_call_target=\"Sharding\", sharding={manual}\n"
      "  ROOT s = f32[8,4] custom-call(b), custom_call_target=\"SPMDShardToFullShape\","
      " sharding={devices=[4,1]0,1,2,3}\n}\n",
      "is_spmd=true");
  expect(m, "n", "{manual}");
  expect(m, "c", "{devices=[4,1]0,1,2,3}");
  hk_module_free(m);
}
END_TEST

/* ---- barriers (partitioners registered above) ------------------------------------- */

START_TEST(barrier_from_blocks_forward_only) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
      "  c = f32[8] copy(p)\n"
      "  b = f32[8] custom-call(c), custom_call_target=\"ShardBarrierFrom\", custom_call_has_side_effect=true\n"
      "  n = f32[8] negate(b)\n  ROOT r = f32[8] copy(n)\n}\n",
      "is_spmd=true");
  expect(m, "c", "{devices=[4]0,1,2,3}");
  expect(m, "n", NULL);             /* nothing crossed forward */
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n  c = f32[8] copy(p)\n"
      "  b = f32[8] custom-call(c), custom_call_target=\"ShardBarrierFrom\", custom_call_has_side_effect=true\n"
      "  n = f32[8] negate(b)\n  ROOT r = f32[8] copy(n), sharding={devices=[4]0,1,2,3}\n}\n",
      "is_spmd=true");
  expect(m, "c", "{devices=[4]0,1,2,3}");   /* backward crosses */
  hk_module_free(m);
}
END_TEST

START_TEST(barrier_to_blocks_backward_only) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0)\n  c = f32[8] copy(p)\n"
      "  b = f32[8] custom-call(c), custom_call_target=\"ShardBarrierTo\", custom_call_has_side_effect=true\n"
      "  n = f32[8] negate(b)\n  ROOT r = f32[8] copy(n), sharding={devices=[4]0,1,2,3}\n}\n",
      "is_spmd=true");
  expect(m, "n", "{devices=[4]0,1,2,3}");
  expect(m, "c", "{replicated}");           /* only the barrier's replicated sharding */
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}\n"
      "  c = f32[8] copy(p)\n"
      "  b = f32[8] custom-call(c), custom_call_target=\"ShardBarrierTo\", custom_call_has_side_effect=true\n"
      "  n = f32[8] negate(b)\n  ROOT r = f32[8] copy(n)\n}\n",
      "is_spmd=true");
  expect(m, "n", "{devices=[4]0,1,2,3}");   /* forward crosses */
  hk_module_free(m);
}
END_TEST

/* ---- options ---------------------------------------------------------------------------- */

START_TEST(partial_shardings_merge_only_in_spmd) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[8,8] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}\n"
      "  p1 = f32[8,8] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  a = f32[8,8] add(p0, p1)\n  ROOT c = f32[8,8] copy(a)\n}\n";
  hk_module *m = run_text(text, "is_spmd=true");
  expect(m, "a", "{devices=[2,2]0,1,2,3}");
  hk_module_free(m);
  m = run_text(text, "is_spmd=false");
  expect(m, "a", "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

START_TEST(propagation_to_output_and_parameters) {
  const char *text =
      "HloModule m\nENTRY e {\n  p0 = f32[4] parameter(0)\n  p1 = f32[4] parameter(1)\n"
      "  a = f32[4] add(p0, p1), sharding={devices=[4]0,1,2,3}\n  ROOT n = f32[4] negate(a)\n}\n";
  hk_module *m = run_text(text, "is_spmd=true");
  expect(m, "n", NULL);
  expect(m, "p0", NULL);
  hk_module_free(m);
  m = run_text(text,
               "is_spmd=true allow_spmd_sharding_propagation_to_output=[true] "
               "allow_spmd_sharding_propagation_to_parameters=[false,true]");
  expect(m, "n", "{devices=[4]0,1,2,3}");
  expect(m, "p0", NULL);
  expect(m, "p1", "{devices=[4]0,1,2,3}");
  hk_module_free(m);
  m = run_text(   /* not evenly divisible: the output stays replicated */
      "HloModule m\nENTRY e {\n  p = f32[4] parameter(0), sharding={devices=[4]0,1,2,3}\n"
      "  c = f32[4] copy(p)\n  ROOT s = f32[3] slice(c), slice={[0:3]}\n}\n",
      "is_spmd=true allow_spmd_sharding_propagation_to_output=[true]");
  expect(m, "s", "{replicated}");
  hk_module_free(m);
}
END_TEST

/* The allow_* options are XLA's whatever is_spmd says: without SPMD the
 * root and an allowed parameter take propagated shardings too. */
START_TEST(output_and_parameter_options_without_spmd) {
  const char *text =
      "HloModule m\nENTRY e {\n  p0 = f32[4,8] parameter(0)\n"
      "  a = f32[4,8] negate(p0), sharding={devices=[2,1]0,1}\n  ROOT c = f32[4,8] copy(a)\n}\n";
  hk_module *m = run_text(text, "is_spmd=false");
  expect(m, "c", NULL);
  expect(m, "p0", NULL);
  hk_module_free(m);
  m = run_text(text,
               "is_spmd=false allow_spmd_sharding_propagation_to_output=[true] "
               "allow_spmd_sharding_propagation_to_parameters=[true]");
  expect(m, "c", "{devices=[2,1]0,1}");
  expect(m, "p0", "{devices=[2,1]0,1}");
  hk_module_free(m);
}
END_TEST

/* An rng-bit-generator's state operand is replicated, not tiled like its
 * other users or its operands (XLA's InferShardingFromUsers). */
START_TEST(rng_bit_generator_state_replicated) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = u64[2,2] parameter(0), sharding={devices=[2,2]<=[4]}\n"
      "  c = u64[2,2] copy(p)\n  s = u64[1,2] slice(c), slice={[0:1], [0:2]}\n"
      "  seed = u64[2] reshape(s)\n"
      "  r = (u64[2], u32[16,8]) rng-bit-generator(seed), algorithm=rng_default\n"
      "  g = u32[16,8] get-tuple-element(r), index=1\n"
      "  ROOT o = u32[16,8] copy(g), sharding={devices=[2,2]<=[4]}\n}\n",
      "is_spmd=true");
  expect(m, "seed", "{replicated}");
  hk_module_free(m);
}
END_TEST

START_TEST(metadata_kept_only_when_asked) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[8] parameter(0), sharding={devices=[2]0,1 metadata={op_name=\"x\"}}\n"
      "  n = f32[8] negate(p)\n  ROOT c = f32[8] copy(n)\n}\n";
  hk_module *m = run_text(text, "propagate_metadata=true");
  ck_assert_int_eq(hk_test_find(m, "n")->sharding->n_metadata, 1);
  ck_assert_str_eq(hk_test_find(m, "n")->sharding->metadata[0].op_name, "x");
  hk_module_free(m);
  m = run_text(text, "propagate_metadata=false");
  ck_assert_int_eq(hk_test_find(m, "n")->sharding->n_metadata, 0);
  ck_assert_int_eq(hk_test_find(m, "p")->sharding->n_metadata, 0);
  hk_module_free(m);
}
END_TEST

/* Metadata follows XLA: merging two partial shardings keeps both sources'
 * metadata (the incoming candidate's first, then the old one's), and a manual sharding passed on keeps
 * its source's metadata. */
START_TEST(metadata_of_merges_and_manual) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n"
      "  p0 = f32[8,8] parameter(0), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate metadata={op_name=\"a\"}}\n"
      "  p1 = f32[8,8] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate metadata={op_name=\"b\"}}\n"
      "  x = f32[8,8] add(p0, p1)\n  ROOT c = f32[8,8] copy(x)\n}\n",
      "is_spmd=true propagate_metadata=true");
  const hk_sharding *x = hk_test_find(m, "x")->sharding;
  expect(m, "x", "{devices=[2,2]0,1,2,3}");
  ck_assert_int_eq(x->n_metadata, 2);
  ck_assert_str_eq(x->metadata[0].op_name, "b");
  ck_assert_str_eq(x->metadata[1].op_name, "a");
  hk_module_free(m);
  m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0), sharding={manual metadata={op_name=\"m\"}}\n"
      "  n = f32[8] negate(p)\n  ROOT c = f32[8] copy(n)\n}\n",
      "is_spmd=true propagate_metadata=true");
  const hk_sharding *n = hk_test_find(m, "n")->sharding;
  ck_assert(n && n->kind == HK_SHARDING_MANUAL);
  ck_assert_int_eq(n->n_metadata, 1);
  ck_assert_str_eq(n->metadata[0].op_name, "m");
  hk_module_free(m);
}
END_TEST

/* SPMDShardToFullShape ends a manual region: its manual operand is not
 * passed on to it, even when the root may take propagated shardings. */
START_TEST(manual_not_passed_to_shard_to_full) {
  hk_module *m = run_text(
      "HloModule m\nENTRY e {\n  p = f32[2,3] parameter(0), sharding={replicated}\n"
      "  s = f32[2,3] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n"
      "  n = f32[2,3] negate(s)\n"
      "  ROOT f = f32[16,3] custom-call(n), custom_call_target=\"SPMDShardToFullShape\", sharding={replicated}\n}\n",
      "is_spmd=true allow_spmd_sharding_propagation_to_output=[true]");
  expect(m, "n", "{manual}");
  const hk_sharding *f = hk_test_find(m, "f")->sharding;
  ck_assert(!f || f->kind != HK_SHARDING_MANUAL);
  hk_module_free(m);
}
END_TEST

START_TEST(unchanged_module_reports_no_change) {
  hk_module *m = hk_test_parse(
      "HloModule m\nENTRY e {\n  p = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
      "  ROOT n = f32[8] negate(p), sharding={devices=[2]0,1}\n}\n");
  ck_assert(!propagate(m, "is_spmd=true"));
  hk_module_free(m);
}
END_TEST

/* ---- explain --------------------------------------------------------------------------- */

static const hk_prop_record *record_of(const hk_prop_record *r, int64_t n, const char *name) {
  for (int64_t k = 0; k < n; k++)
    if (strcmp(r[k].instr, name) == 0) return &r[k];
  ck_abort_msg("no record for %s", name);
  return NULL;
}

START_TEST(explain_records_the_chain) {
  hk_module *m = hk_test_parse(
      "HloModule m\nENTRY e {\n  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  n = f32[8,4] negate(p)\n  t = f32[4,8] transpose(n), dimensions={1,0}\n"
      "  ROOT c = f32[4,8] copy(t)\n}\n");
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "sharding-propagation", "is_spmd=true", &err);
  ck_assert_ok(err);
  bool changed;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  const hk_prop_explain_vtable *x = hk_pass_extension(p, HK_PROP_EXPLAIN_IFACE);
  ck_assert_ptr_nonnull(x);
  const hk_prop_record *r;
  int64_t n = x->records(p, &r);
  const hk_prop_record *t = record_of(r, n, "t");
  ck_assert_str_eq(t->source, "n");
  ck_assert_str_eq(t->rule, "transpose");
  ck_assert_int_eq(t->dir, HK_PROP_DIR_FORWARD);
  ck_assert_int_eq(t->level, 0);
  const hk_prop_record *nn = record_of(r, n, "n");
  ck_assert_str_eq(nn->source, "p");
  ck_assert_int_eq(record_of(r, n, "p")->dir, HK_PROP_DIR_PROVIDED);
  ck_assert_int_eq(record_of(r, n, "c")->dir, HK_PROP_DIR_NONE);
  hk_pass_destroy(p);
  hk_module_free(m);
}
END_TEST

/* A sharding copied to a call target's root before the loop is explained
 * as coming from the call, not as an annotation. */
START_TEST(explain_names_computation_copies) {
  hk_module *m = hk_test_parse(
      "HloModule m\nf {\n  q = f32[8] parameter(0)\n  ROOT t = (f32[8]) tuple(q)\n}\n"
      "ENTRY e {\n  x = f32[8] parameter(0)\n"
      "  ROOT c = (f32[8]) call(x), to_apply=f, sharding={{devices=[2]<=[2]}}\n}\n");
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "sharding-propagation", "is_spmd=true", &err);
  ck_assert_ok(err);
  bool changed;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  const hk_prop_explain_vtable *x = hk_pass_extension(p, HK_PROP_EXPLAIN_IFACE);
  const hk_prop_record *r;
  int64_t n = x->records(p, &r);
  const hk_prop_record *t = record_of(r, n, "t");
  ck_assert_str_eq(t->source, "c");
  ck_assert_str_eq(t->rule, "call");
  ck_assert_int_eq(t->dir, HK_PROP_DIR_COMPUTATION);
  ck_assert_int_eq(record_of(r, n, "c")->dir, HK_PROP_DIR_PROVIDED);
  hk_pass_destroy(p);
  hk_module_free(m);
}
END_TEST

/* `hlokit explain` prints the same chain, as text and as JSON. */
START_TEST(explain_command_prints_the_chain) {
  char exe[2048], tmp[] = "/tmp/hk-explain-XXXXXX.hlo", cmd[4600];
  hk_test_plugin_path("propagation", exe, sizeof exe);
  char *plugins = strstr(exe, "/../plugins/");
  ck_assert_ptr_nonnull(plugins);
  strcpy(plugins, "/../hlokit");
  int fd = mkstemps(tmp, 4);
  ck_assert_int_ge(fd, 0);
  const char *text =
      "HloModule m\nENTRY e {\n  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  n = f32[8,4] negate(p)\n  t = f32[4,8] transpose(n), dimensions={1,0}\n"
      "  ROOT c = f32[4,8] copy(t)\n}\n";
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  snprintf(cmd, sizeof cmd, "%s explain %s '--passes=sharding-propagation{is_spmd=true}' --instr=t --json",
           exe, tmp);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  char out[4096];
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  ck_assert_int_eq(pclose(f), 0);
  ck_assert_msg(strstr(out, "\"instruction\": \"t\", \"computation\": \"e\", \"sharding\": "
                            "\"{devices=[1,2]0,1}\", \"direction\": \"forward\", \"rule\": "
                            "\"transpose\", \"level\": 0, \"source\": \"n\"") != NULL, "%s", out);
  ck_assert_msg(strstr(out, "\"instruction\": \"p\"") && strstr(out, "\"direction\": \"provided\""),
                "%s", out);
  snprintf(cmd, sizeof cmd, "%s explain %s '--passes=sharding-propagation{is_spmd=true}' --instr=nope 2>&1",
           exe, tmp);
  f = popen(cmd, "r");
  n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  ck_assert_int_eq(WEXITSTATUS(pclose(f)), 2);
  ck_assert_msg(strstr(out, "no instruction 'nope'") != NULL, "%s", out);
  unlink(tmp);
}
END_TEST

static Suite *propagation_suite(void) {
  Suite *s = suite_create("propagation");
  TCase *t = tcase_create("rules");
  tcase_add_unchecked_fixture(t, load_plugin, unload_plugin);
  tcase_add_test(t, elementwise_both_directions);
  tcase_add_test(t, broadcast_forward_and_backward);
  tcase_add_test(t, transpose_and_reshape);
  tcase_add_test(t, reshape_size1_dims_keep_device_order);
  tcase_add_test(t, while_channel_device_conflicts);
  tcase_add_test(t, manual_tuple_elements);
  tcase_add_test(t, unspecified_dims_across_manual_conversion);
  tcase_add_test(t, convolution_large_kernel_keeps_batch);
  tcase_add_test(t, call_computations_both_ways);
  tcase_add_test(t, uneven_output_replicated_only_per_element);
  tcase_add_test(t, shard_as_groups_aligned_after_the_loop);
  tcase_add_test(t, tuple_reduce_backward_merges_other_inputs);
  tcase_add_test(t, callee_parameters_are_not_provided);
  tcase_add_test(t, reduce_keeps_other_dims);
  tcase_add_test(t, megatron_dots);
  tcase_add_test(t, dot_operand_from_output);
  tcase_add_test(t, convolution_as_batch_dot);
  tcase_add_test(t, slice_pad_concat_dynamic_slice);
  tcase_add_test(t, gather_and_scatter);
  tcase_add_test(t, while_state_agrees);
  tcase_add_test(t, sharding_custom_call_unspecified_dims);
  tcase_add_test(t, shard_as_group);
  tcase_add_test(t, manual_region);
  tcase_add_test(t, barrier_from_blocks_forward_only);
  tcase_add_test(t, barrier_to_blocks_backward_only);
  tcase_add_test(t, partial_shardings_merge_only_in_spmd);
  tcase_add_test(t, propagation_to_output_and_parameters);
  tcase_add_test(t, output_and_parameter_options_without_spmd);
  tcase_add_test(t, rng_bit_generator_state_replicated);
  tcase_add_test(t, metadata_kept_only_when_asked);
  tcase_add_test(t, metadata_of_merges_and_manual);
  tcase_add_test(t, manual_not_passed_to_shard_to_full);
  tcase_add_test(t, unchanged_module_reports_no_change);
  tcase_add_test(t, explain_records_the_chain);
  tcase_add_test(t, explain_names_computation_copies);
  tcase_add_test(t, explain_command_prints_the_chain);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(propagation_suite)
