/* test_stock.c - Check tests of the stock passes plugin: each pass's
 * rewrite, and what it must leave alone. */
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

static void load_stock(void) { reg = hk_test_registry_with("stock"); }

static void unload_stock(void) { hk_registry_free(reg); }

/* Runs pass `name` with options; returns changed. */
static bool run_pass(hk_module *m, const char *name, const char *opts) {
  return hk_test_run_pass(reg, m, name, opts);
}

/* text parsed and run through pass `name`, which must change it (the
 * caller frees the module). */
static hk_module *changed_by(const char *name, const char *text) {
  hk_module *m = hk_test_parse(text);
  ck_assert_msg(run_pass(m, name, NULL), "%s changed nothing", name);
  return m;
}

static bool has_instr(hk_module *m, const char *name) {
  for (int32_t k = 0; k < m->n_computations; k++)
    if (hk_computation_find_instr(m->computations[k], name)) return true;
  return false;
}

START_TEST(dce_removes_dead_keeps_side_effects) {
  hk_module *m = changed_by("hlo-dce",
      "HloModule m\n\n"
      "unused {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n"
      "  dead1 = f32[4] add(p, q)\n  dead2 = f32[4] multiply(dead1, p)\n"
      "  cc = f32[4] custom-call(p), custom_call_target=\"foo\", custom_call_has_side_effect=true\n"
      "  ROOT r = f32[4] subtract(p, q)\n}\n");
  ck_assert(!has_instr(m, "dead1"));
  ck_assert(!has_instr(m, "dead2"));
  ck_assert(has_instr(m, "cc"));
  ck_assert(has_instr(m, "q"));  /* parameters stay */
  ck_assert_ptr_null(hk_module_find_computation(m, "unused"));
  ck_assert(!run_pass(m, "hlo-dce", NULL));  /* idempotent */
  hk_module_free(m);
}
END_TEST

/* A collective with a channel id is kept, and XLA's channel_id is
 * optional: a written channel_id=0 is a channel too (has_value()). */
START_TEST(dce_keeps_a_collective_with_channel_id_zero) {
  hk_module *m = changed_by("hlo-dce",
      "HloModule m\n\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n"
      "  zero = f32[4] all-reduce(p), channel_id=0, replica_groups={}, to_apply=add\n"
      "  none = f32[4] all-reduce(p), replica_groups={}, to_apply=add\n"
      "  ROOT r = f32[4] negate(p)\n}\n");
  ck_assert(has_instr(m, "zero"));
  ck_assert(!has_instr(m, "none"));
  hk_module_free(m);
}
END_TEST

START_TEST(tuple_simplifier_folds_both_patterns) {
  hk_module *m = changed_by("tuple-simplifier",
      "HloModule m\n\nENTRY e {\n"
      "  p = f32[4] parameter(0)\n  q = s32[] parameter(1)\n"
      "  t = (f32[4], s32[]) tuple(p, q)\n"
      "  g = s32[] get-tuple-element(t), index=1\n"
      "  w = (f32[4], s32[]) parameter(2)\n"
      "  w0 = f32[4] get-tuple-element(w), index=0\n  w1 = s32[] get-tuple-element(w), index=1\n"
      "  w2 = (f32[4], s32[]) tuple(w0, w1)\n"
      "  ROOT r = ((f32[4], s32[]), s32[]) tuple(w2, g)\n}\n");
  hk_instr *r = m->entry->root;
  ck_assert_str_eq(r->operands[0]->name, "w");
  ck_assert_str_eq(r->operands[1]->name, "q");
  hk_module_free(m);
}
END_TEST

START_TEST(tuple_simplifier_leaves_partial_tuples) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n"
      "  w = (f32[4], s32[], s32[]) parameter(0)\n"
      "  w0 = f32[4] get-tuple-element(w), index=0\n  w1 = s32[] get-tuple-element(w), index=1\n"
      "  ROOT w2 = (f32[4], s32[]) tuple(w0, w1)\n}\n");
  ck_assert(!run_pass(m, "tuple-simplifier", NULL));
  ck_assert_str_eq(m->entry->root->name, "w2");
  hk_module_free(m);
}
END_TEST

static const char *two_calls =
    "HloModule m\n\n"
    "f {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n\n"
    "ENTRY e {\n  p = f32[4] parameter(0)\n"
    "  c1 = f32[4] call(p), to_apply=f\n  c2 = f32[4] call(c1), to_apply=f\n"
    "  ROOT r = f32[4] add(c1, c2)\n}\n";

START_TEST(flatten_gives_each_call_its_callee) {
  hk_module *m = hk_test_parse(two_calls);
  hk_call_graph *g = hk_call_graph_build(m);
  ck_assert(!hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  ck_assert(run_pass(m, "flatten-call-graph", NULL));
  ck_assert_int_eq(m->n_computations, 3);
  hk_instr *c1 = hk_computation_find_instr(m->entry, "c1");
  hk_instr *c2 = hk_computation_find_instr(m->entry, "c2");
  ck_assert_ptr_ne(c1->called[0], c2->called[0]);
  g = hk_call_graph_build(m);
  ck_assert(hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  ck_assert(!run_pass(m, "flatten-call-graph", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(flatten_leaves_embedded_reductions_shared) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\n\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=sum\n"
      "  r2 = f32[] reduce(p, z), dimensions={0}, to_apply=sum\n"
      "  ROOT r = f32[] add(r1, r2)\n}\n");
  ck_assert(!run_pass(m, "flatten-call-graph", NULL));
  ck_assert_int_eq(m->n_computations, 2);
  hk_module_free(m);
}
END_TEST

START_TEST(cse_merges_identical_instructions) {
  hk_module *m = changed_by("hlo-cse",
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  a1 = f32[4] add(p, p)\n  a2 = f32[4] add(p, p)\n"
      "  k1 = f32[] constant(2)\n  k2 = f32[] constant(2)\n  k3 = f32[] constant(3)\n"
      "  b1 = f32[4] broadcast(k1), dimensions={}\n  b2 = f32[4] broadcast(k2), dimensions={}\n"
      "  s = f32[4] multiply(a1, b1)\n  t = f32[4] multiply(a2, b2)\n"
      "  b3 = f32[4] broadcast(k3), dimensions={}\n"
      "  ROOT r = (f32[4], f32[4], f32[4]) tuple(s, t, b3)\n}\n");
  hk_instr *r = m->entry->root;
  ck_assert_ptr_eq(r->operands[0], r->operands[1]);
  ck_assert_ptr_ne(r->operands[0], r->operands[2]);
  ck_assert(has_instr(m, "k3"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ADD), 1);
  hk_module_free(m);
}
END_TEST

/* Attributes decide: equal literals and slice sizes merge (compared by
 * value), a different literal, slice size or metadata does not. */
START_TEST(cse_compares_attributes_by_value) {
  hk_module *m = changed_by("hlo-cse",
      "HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  i = s32[] parameter(1)\n"
      "  k1 = s32[4] constant({0, 2, 4, 6})\n  k2 = s32[4] constant({0, 2, 4, 6})\n"
      "  k3 = s32[4] constant({0, 2, 4, 7})\n"
      "  d1 = f32[2] dynamic-slice(p, i), dynamic_slice_sizes={2}\n"
      "  d2 = f32[2] dynamic-slice(p, i), dynamic_slice_sizes={2}\n"
      "  d3 = f32[2] dynamic-slice(p, i), dynamic_slice_sizes={2}, metadata={op_name=\"x\"}\n"
      "  ROOT r = (s32[4], s32[4], s32[4], f32[2], f32[2], f32[2]) tuple(k1, k2, k3, d1, d2, d3)\n}\n");
  hk_instr *r = m->entry->root;
  ck_assert_ptr_eq(r->operands[0], r->operands[1]);
  ck_assert_ptr_ne(r->operands[0], r->operands[2]);
  ck_assert_ptr_eq(r->operands[3], r->operands[4]);
  ck_assert_ptr_ne(r->operands[3], r->operands[5]);
  hk_test_expect_ops(m, {HK_OP_CONSTANT, 2}, {HK_OP_DYNAMIC_SLICE, 2});
  hk_module_free(m);
}
END_TEST

/* Dead chains hanging off one shared value all go, users before operands,
 * and the shared value keeps exactly its live users. */
START_TEST(dce_removes_dead_chains_of_a_shared_value) {
  hk_module *m = changed_by("hlo-dce",
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  k = f32[] constant(1)\n"
      "  b = f32[4] broadcast(k), dimensions={}\n"
      "  x1 = f32[4] add(b, p)\n  y1 = f32[4] negate(x1)\n"
      "  x2 = f32[4] add(b, p)\n  y2 = f32[4] negate(x2)\n"
      "  live = f32[4] multiply(b, p)\n"
      "  x3 = f32[4] add(b, live)\n"
      "  ROOT r = f32[4] negate(live)\n}\n");
  ck_assert_int_eq(m->entry->n_instrs, 5);
  const char *gone[] = {"x1", "y1", "x2", "y2", "x3"};
  for (int k = 0; k < 5; k++) ck_assert(!has_instr(m, gone[k]));
  hk_instr *b = hk_computation_find_instr(m->entry, "b");
  ck_assert_int_eq(b->n_users, 1);
  ck_assert_str_eq(b->users[0]->name, "live");
  ck_assert_int_eq(hk_computation_find_instr(m->entry, "p")->n_users, 1);
  hk_module_free(m);
}
END_TEST

/* Computations are kept when reached through live calls at any depth, and
 * removed when only a removed (dead) call reached them, with theirs. */
START_TEST(dce_removes_computations_only_dead_calls_reach) {
  hk_module *m = changed_by("hlo-dce",
      "HloModule m\n\n"
      "inner {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n\n"
      "outer {\n  b = f32[] parameter(0)\n  ROOT c = f32[] call(b), to_apply=inner\n}\n\n"
      "dead_inner {\n  d = f32[] parameter(0)\n  ROOT e = f32[] exponential(d)\n}\n\n"
      "dead_outer {\n  f = f32[] parameter(0)\n  ROOT g = f32[] call(f), to_apply=dead_inner\n}\n\n"
      "ENTRY e {\n  p = f32[] parameter(0)\n"
      "  unused = f32[] call(p), to_apply=dead_outer\n"
      "  ROOT r = f32[] call(p), to_apply=outer\n}\n");
  ck_assert(!has_instr(m, "unused"));
  ck_assert_ptr_null(hk_module_find_computation(m, "dead_outer"));
  ck_assert_ptr_null(hk_module_find_computation(m, "dead_inner"));
  ck_assert_ptr_nonnull(hk_module_find_computation(m, "outer"));
  ck_assert_ptr_nonnull(hk_module_find_computation(m, "inner"));
  ck_assert_int_eq(m->n_computations, 3);
  ck_assert(!run_pass(m, "hlo-dce", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(cse_keeps_side_effects_apart) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  c1 = f32[4] custom-call(p), custom_call_target=\"x\", custom_call_has_side_effect=true\n"
      "  c2 = f32[4] custom-call(p), custom_call_target=\"x\", custom_call_has_side_effect=true\n"
      "  ROOT r = f32[4] add(c1, c2)\n}\n");
  ck_assert(!run_pass(m, "hlo-cse", NULL));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 2);
  hk_module_free(m);
}
END_TEST

/* The earlier twin is the earlier one in post order, not in the list:
 * here the DFS from the root reaches y (through uy) before x. */
START_TEST(cse_keeps_the_post_order_first_twin) {
  hk_module *m = changed_by("hlo-cse",
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  x = f32[4] negate(p)\n  y = f32[4] negate(p)\n"
      "  uy = f32[4] exponential(y)\n  ux = f32[4] exponential(x)\n"
      "  ROOT r = (f32[4], f32[4]) tuple(uy, ux)\n}\n");
  ck_assert(has_instr(m, "y"));
  ck_assert(!has_instr(m, "x"));
  ck_assert(has_instr(m, "uy"));
  ck_assert(!has_instr(m, "ux"));
  hk_instr *r = m->entry->root;
  ck_assert_str_eq(r->operands[0]->name, "uy");
  ck_assert_ptr_eq(r->operands[0], r->operands[1]);
  ck_assert_int_eq(m->entry->n_instrs, 4);
  hk_module_free(m);
}
END_TEST

/* A list that uses a value before defining it is not a post order: the
 * twin the DFS meets first (e1) stays, though e0 is listed first. */
START_TEST(cse_handles_a_list_that_is_not_topological) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  a1 = f32[4] negate(p)\n"
      "  e1 = f32[4] exponential(a1)\n"
      "  ROOT r = (f32[4], f32[4]) tuple(e1, a1)\n}\n");
  hk_instr *p = hk_computation_find_instr(m->entry, "p");
  hk_instr *a1 = hk_computation_find_instr(m->entry, "a1");
  hk_instr *e0 = hk_instr_new_before(p, HK_OP_EXP, a1->shape, 1, &a1, "e0");
  hk_instr_set_operand(m->entry->root, 1, e0);
  ck_assert_ptr_eq(m->entry->first, e0);
  ck_assert(run_pass(m, "hlo-cse", NULL));
  ck_assert(has_instr(m, "e1"));
  ck_assert(!has_instr(m, "e0"));
  hk_instr *r = m->entry->root;
  ck_assert_str_eq(r->operands[0]->name, "e1");
  ck_assert_ptr_eq(r->operands[0], r->operands[1]);
  ck_assert_int_eq(a1->n_users, 1);
  hk_module_free(m);
}
END_TEST

/* Twins are found through their first operand's users until it has many
 * users, then through the table: here a1 gains the users of its twins
 * a2..a20 one by one, and the exponentials of it must still all merge. */
START_TEST(cse_merges_across_a_first_operand_that_grows_popular) {
  char text[4096];
  int len = snprintf(text, sizeof text, "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n");
  for (int k = 1; k <= 20; k++)
    len += snprintf(text + len, sizeof text - (size_t)len,
                    "  a%d = f32[4] negate(p)\n  b%d = f32[4] exponential(a%d)\n", k, k, k);
  len += snprintf(text + len, sizeof text - (size_t)len, "  ROOT r = (");
  for (int k = 1; k <= 20; k++)
    len += snprintf(text + len, sizeof text - (size_t)len, "%sf32[4]", k > 1 ? ", " : "");
  len += snprintf(text + len, sizeof text - (size_t)len, ") tuple(");
  for (int k = 1; k <= 20; k++)
    len += snprintf(text + len, sizeof text - (size_t)len, "%sb%d", k > 1 ? ", " : "", k);
  snprintf(text + len, sizeof text - (size_t)len, ")\n}\n");
  hk_module *m = changed_by("hlo-cse", text);
  hk_test_expect_ops(m, {HK_OP_NEGATE, 1}, {HK_OP_EXP, 1});
  hk_instr *r = m->entry->root;
  for (int k = 0; k < 20; k++) ck_assert_str_eq(r->operands[k]->name, "b1");
  hk_instr *a1 = hk_computation_find_instr(m->entry, "a1");
  ck_assert_int_eq(a1->n_users, 1);
  ck_assert_int_eq(m->entry->n_instrs, 4);
  ck_assert(!run_pass(m, "hlo-cse", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(call_inliner_inlines_every_call) {
  hk_module *m = changed_by("call-inliner", two_calls);
  hk_test_expect_ops(m, {HK_OP_CALL, 0}, {HK_OP_NEGATE, 2});
  ck_assert_int_eq(m->n_computations, 1);
  /* r = add(negate(p), negate(negate(p))) */
  hk_instr *r = m->entry->root;
  ck_assert_int_eq(r->operands[0]->opcode, HK_OP_NEGATE);
  ck_assert_str_eq(r->operands[0]->operands[0]->name, "p");
  ck_assert_ptr_eq(r->operands[1]->operands[0], r->operands[0]);
  hk_module_free(m);
}
END_TEST

START_TEST(call_inliner_single_call_site_option) {
  hk_module *m = hk_test_parse(two_calls);
  ck_assert(!run_pass(m, "call-inliner", "single_call_site=true"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CALL), 2);
  hk_module_free(m);
}
END_TEST

START_TEST(rng_expander_lowers_rng) {
  hk_module *m = changed_by("rng-expander",
      "HloModule m\n\nENTRY e {\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
      "  ROOT r = f32[8] rng(lo, hi), distribution=rng_uniform, sharding={replicated}\n}\n"
      );
  hk_test_expect_ops(m, {HK_OP_RNG, 0}, {HK_OP_RNG_GET_AND_UPDATE_STATE, 1},
                        {HK_OP_RNG_BIT_GENERATOR, 1});
  ck_assert_int_eq(m->entry->root->shape->elem, HK_F32);
  ck_assert_ptr_nonnull(m->entry->root->sharding);
  ck_assert(!run_pass(m, "rng-expander", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(rng_expander_normal_and_int) {
  hk_module *m = changed_by("rng-expander",
      "HloModule m\n\nENTRY e {\n  mu = f32[] constant(0)\n  sigma = f32[] constant(1)\n"
      "  n = f32[3,2] rng(mu, sigma), distribution=rng_normal\n"
      "  a = s32[] constant(3)\n  b = s32[] constant(9)\n"
      "  i = s32[5] rng(a, b), distribution=rng_uniform\n"
      "  ROOT t = (f32[3,2], s32[5]) tuple(n, i)\n}\n");
  hk_test_expect_ops(m, {HK_OP_RNG, 0}, {HK_OP_RNG_GET_AND_UPDATE_STATE, 2}, {HK_OP_COS, 1});
  hk_module_free(m);
}
END_TEST

START_TEST(verifier_pass_reports_bad_module) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  q = f32[3] parameter(1)\n"
      "  ROOT r = f32[4] add(p, q)\n}\n");
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "hlo-verifier", NULL, &err);
  ck_assert_ok(err);
  bool changed;
  hk_status *st = hk_pass_run(p, m, NULL, &changed);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "r"));
  hk_status_free(st);
  hk_pass_destroy(p);
  hk_module_free(m);
}
END_TEST


START_TEST(comparison_expander_lowers_total_order) {
  hk_module *m = changed_by("comparison-expander",
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  q = f32[4] parameter(1)\n"
      "  t = pred[4] compare(p, q), direction=LT, type=TOTALORDER\n"
      "  u = pred[4] compare(p, q), direction=LT\n"
      "  ROOT r = (pred[4], pred[4]) tuple(t, u)\n}\n");
  hk_instr *t = m->entry->root->operands[0], *u = m->entry->root->operands[1];
  ck_assert_int_eq(t->attrs->cmp_type, HK_CMPT_SIGNED);
  ck_assert_int_eq(t->operands[0]->shape->elem, HK_S32);
  ck_assert_int_eq(t->attrs->cmp_dir, HK_CMP_LT);
  ck_assert_str_eq(u->name, "u");  /* a default-type compare stays */
  ck_assert(!run_pass(m, "comparison-expander", NULL));
  hk_module_free(m);
}
END_TEST

START_TEST(all_reduce_promotion_widens_small_ints) {
  hk_module *m = changed_by("all-reduce-promotion",
      "HloModule m, num_partitions=2\n\nsum {\n  x = s8[] parameter(0)\n  y = s8[] parameter(1)\n"
      "  ROOT z = s8[] add(x, y)\n}\n\n"
      "fsum {\n  fx = f32[] parameter(0)\n  fy = f32[] parameter(1)\n  ROOT fz = f32[] add(fx, fy)\n}\n\n"
      "ENTRY e {\n  p = s8[4] parameter(0)\n  f = f32[4] parameter(1)\n"
      "  a = s8[4] all-reduce(p), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=sum\n"
      "  b = f32[4] all-reduce(f), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=fsum\n"
      "  ROOT r = (s8[4], f32[4]) tuple(a, b)\n}\n");
  hk_instr *a = m->entry->root->operands[0];
  ck_assert_int_eq(a->opcode, HK_OP_CONVERT);
  ck_assert_int_eq(a->shape->elem, HK_S8);
  hk_instr *wide = a->operands[0];
  ck_assert_int_eq(wide->opcode, HK_OP_ALL_REDUCE);
  ck_assert_int_eq(wide->shape->elem, HK_S32);
  ck_assert_int_eq(wide->called[0]->root->shape->elem, HK_S32);
  ck_assert_int_eq(wide->called[0]->root->opcode, HK_OP_ADD);
  ck_assert_str_eq(m->entry->root->operands[1]->name, "b");
  ck_assert_ptr_null(hk_module_find_computation(m, "sum"));  /* no caller left */
  hk_module_free(m);
}
END_TEST

START_TEST(float_normalization_computes_bf16_dot_in_f32) {
  hk_module *m = changed_by("float-normalization",
      "HloModule m\n\nENTRY e {\n  p = bf16[2,3] parameter(0)\n  q = bf16[3,4] parameter(1)\n"
      "  d = bf16[2,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT a = bf16[2,4] add(d, d)\n}\n");
  hk_instr *conv = m->entry->root->operands[0];
  ck_assert_int_eq(conv->opcode, HK_OP_CONVERT);
  ck_assert_int_eq(conv->operands[0]->opcode, HK_OP_DOT);
  ck_assert_int_eq(conv->operands[0]->shape->elem, HK_F32);
  ck_assert_int_eq(conv->operands[0]->operands[0]->shape->elem, HK_F32);
  ck_assert_int_eq(m->entry->root->shape->elem, HK_BF16);  /* add is supported */
  ck_assert(!run_pass(m, "float-normalization", NULL));
  ck_assert(run_pass(m, "float-normalization", "unsupported_ops=add"));
  hk_module_free(m);
}
END_TEST

START_TEST(change_op_data_type_rewrites_chosen_ops) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  p = s8[2,3] parameter(0)\n  q = s8[3,4] parameter(1)\n"
      "  ROOT d = s32[2,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  ck_assert(!run_pass(m, "change-op-data-type", NULL));  /* no pairs: nothing */
  ck_assert(run_pass(m, "change-op-data-type", "types=s8->s32 ops=dot"));
  hk_instr *d = m->entry->root;
  ck_assert_int_eq(d->opcode, HK_OP_DOT);  /* result already s32: no convert back */
  ck_assert_int_eq(d->operands[0]->opcode, HK_OP_CONVERT);
  ck_assert_int_eq(d->operands[0]->shape->elem, HK_S32);
  hk_module_free(m);
}
END_TEST

START_TEST(option_errors_name_pass_and_option) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "change-op-data-type", "types=s8->zz", &err);
  ck_assert_ptr_null(p);
  ck_assert_ptr_nonnull(err);
  ck_assert_ptr_nonnull(strstr(err->message, "change-op-data-type"));
  ck_assert_ptr_nonnull(strstr(err->message, "types"));
  hk_status_free(err);
}
END_TEST

START_TEST(dynamic_padder_masks_reduce_and_makes_static) {
  hk_module *m = changed_by("dynamic-padder",
      "HloModule m\n\nsum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
      "  ROOT z = f32[] add(x, y)\n}\n\n"
      "ENTRY e {\n  p = f32[8] parameter(0)\n  n = s32[] parameter(1)\n"
      "  d = f32[<=8] set-dimension-size(p, n), dimensions={0}\n"
      "  e2 = f32[<=8] exponential(d)\n  zero = f32[] constant(0)\n"
      "  s = f32[] reduce(e2, zero), dimensions={0}, to_apply=sum\n"
      "  g = s32[] get-dimension-size(e2), dimensions={0}\n"
      "  ROOT r = (f32[], s32[]) tuple(s, g)\n}\n");
  hk_instr *r = m->entry->root;
  ck_assert_str_eq(r->operands[1]->name, "n");  /* size tracked to the parameter */
  hk_instr *red = r->operands[0];
  ck_assert_int_eq(red->operands[0]->opcode, HK_OP_SELECT);  /* padding masked */
  for (hk_instr *i = m->entry->first; i; i = i->next)
    ck_assert(!hk_shape_is_array(i->shape) || i->shape->dynamic == NULL);
  hk_module_free(m);
}
END_TEST

static Suite *stock_suite(void) {
  Suite *s = suite_create("stock");
  TCase *tc = tcase_create("passes");
  tcase_add_checked_fixture(tc, load_stock, unload_stock);
  tcase_add_test(tc, dce_removes_dead_keeps_side_effects);
  tcase_add_test(tc, dce_keeps_a_collective_with_channel_id_zero);
  tcase_add_test(tc, tuple_simplifier_folds_both_patterns);
  tcase_add_test(tc, tuple_simplifier_leaves_partial_tuples);
  tcase_add_test(tc, flatten_gives_each_call_its_callee);
  tcase_add_test(tc, flatten_leaves_embedded_reductions_shared);
  tcase_add_test(tc, cse_merges_identical_instructions);
  tcase_add_test(tc, cse_keeps_side_effects_apart);
  tcase_add_test(tc, cse_compares_attributes_by_value);
  tcase_add_test(tc, cse_keeps_the_post_order_first_twin);
  tcase_add_test(tc, cse_handles_a_list_that_is_not_topological);
  tcase_add_test(tc, cse_merges_across_a_first_operand_that_grows_popular);
  tcase_add_test(tc, dce_removes_dead_chains_of_a_shared_value);
  tcase_add_test(tc, dce_removes_computations_only_dead_calls_reach);
  tcase_add_test(tc, call_inliner_inlines_every_call);
  tcase_add_test(tc, call_inliner_single_call_site_option);
  tcase_add_test(tc, rng_expander_lowers_rng);
  tcase_add_test(tc, rng_expander_normal_and_int);
  tcase_add_test(tc, verifier_pass_reports_bad_module);
  tcase_add_test(tc, comparison_expander_lowers_total_order);
  tcase_add_test(tc, all_reduce_promotion_widens_small_ints);
  tcase_add_test(tc, float_normalization_computes_bf16_dot_in_f32);
  tcase_add_test(tc, change_op_data_type_rewrites_chosen_ops);
  tcase_add_test(tc, option_errors_name_pass_and_option);
  tcase_add_test(tc, dynamic_padder_masks_reduce_and_makes_static);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(stock_suite)
