/* test_variants.c - partitioner variants and extension points: the
 * custom-call partitioners of plugin/barriers (shard barriers honoured by
 * the real sharding-propagation pass, partitioned as identities), the
 * stateful-rng-spmd-partitioning subclass, and the third-party example
 * variant under plugin/examples. */
#include <json-c/json.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hlokit/spmd.h"
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

static void load(const char *name) {
  char path[4096];
  hk_test_plugin_path(name, path, sizeof path);
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
}

static void load_plugins(void) {
  reg = hk_registry_new();
  load("stock");
  load("propagation");
  load("spmd");
  load("barriers");
  load("stateful_rng");
}

static void unload_plugins(void) { hk_registry_free(reg); }

/* Runs a pipeline given in --passes syntax over m. */
static hk_status *run_passes(hk_module *m, const char *passes) {
  hk_pipeline_spec spec;
  HK_TRY(hk_pipeline_spec_parse(passes, &m->config, &spec));
  hk_pass *pl = NULL;
  hk_status *st = hk_pipeline_build(reg, &spec, "test", &pl);
  hk_pipeline_spec_free(&spec);
  bool changed = false;
  if (!st) st = hk_pass_run(pl, m, NULL, &changed);
  hk_pass_destroy(pl);
  return st;
}

static hk_instr *find(hk_module *m, const char *name) {
  for (int32_t k = 0; k < m->n_computations; k++)
    for (hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (strcmp(i->name, name) == 0) return i;
  ck_abort_msg("no instruction '%s'", name);
  return NULL;
}

static const hk_sharding *parse_sharding(hk_module *m, const char *text) {
  const hk_sharding *s = NULL;
  size_t used = 0;
  ck_assert_ok(hk_sharding_parse(m, text, strlen(text), &s, &used));
  return s;
}

/* True when the module still has an instruction called name. */
static bool has_instr(const hk_module *m, const char *name) {
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (strcmp(i->name, name) == 0) return true;
  return false;
}

/* True when instruction `name` ends with a sharding equivalent to `want`. */
static bool has_sharding(hk_module *m, const char *name, const char *want) {
  const hk_sharding *s = find(m, name)->sharding;
  return s && hk_sharding_equivalent(s, parse_sharding(m, want));
}

/* True when `name` ends with a tiled sharding (any). */
static bool is_tiled(hk_module *m, const char *name) {
  const hk_sharding *s = find(m, name)->sharding;
  return s && hk_sharding_is_tiled(s);
}

/* ---- shard barriers in sharding propagation --------------------------------- */

/* A tiled parameter flows forward through the barrier into `neg`. */
static char *forward_module(const char *target) {
  char *t;
  ck_assert_int_gt(asprintf(&t,
                            "HloModule fwd, num_partitions=4\n"
                            "ENTRY e {\n"
                            "  p0 = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                            "  c0 = f32[8,4] copy(p0), sharding={devices=[4,1]<=[4]}\n"
                            "  barrier = f32[8,4] custom-call(c0), custom_call_target=\"%s\", "
                            "custom_call_has_side_effect=true\n"
                            "  neg = f32[8,4] negate(barrier)\n"
                            "  ROOT out = f32[8,4] copy(neg)\n"
                            "}\n",
                            target),
                   0);
  return t;
}

/* A tiled root flows backward through the barrier into `c0`. */
static char *backward_module(const char *target) {
  char *t;
  ck_assert_int_gt(asprintf(&t,
                            "HloModule bwd, num_partitions=4\n"
                            "ENTRY e {\n"
                            "  p0 = f32[8,4] parameter(0)\n"
                            "  c0 = f32[8,4] copy(p0)\n"
                            "  barrier = f32[8,4] custom-call(c0), custom_call_target=\"%s\", "
                            "custom_call_has_side_effect=true\n"
                            "  neg = f32[8,4] negate(barrier), sharding={devices=[1,4]<=[4]}\n"
                            "  ROOT out = f32[8,4] copy(neg), sharding={devices=[1,4]<=[4]}\n"
                            "}\n",
                            target),
                   0);
  return t;
}

static hk_module *propagated(char *text) {
  hk_module *m = hk_test_parse(text);
  free(text);
  ck_assert_ok(run_passes(m, "sharding-propagation{is_spmd=true}"));
  return m;
}

/* As in XLA, propagation removes the barriers once it is done with them. */
START_TEST(test_barrier_from_blocks_forward) {
  hk_module *m = propagated(forward_module("ShardBarrierFrom"));
  ck_assert(!has_instr(m, "barrier"));
  ck_assert(!is_tiled(m, "neg"));
  hk_module_free(m);
}
END_TEST

START_TEST(test_barrier_to_lets_forward_through) {
  hk_module *m = propagated(forward_module("ShardBarrierTo"));
  ck_assert(!has_instr(m, "barrier"));
  ck_assert(has_sharding(m, "neg", "{devices=[4,1]<=[4]}"));
  hk_module_free(m);
}
END_TEST

START_TEST(test_barrier_to_blocks_backward) {
  hk_module *m = propagated(backward_module("ShardBarrierTo"));
  /* XLA's ShardBarrierTo answers a user's sharding with {replicated}:
   * the tiling never reaches the operand. */
  ck_assert(!is_tiled(m, "c0"));
  ck_assert(has_sharding(m, "c0", "{replicated}"));
  hk_module_free(m);
}
END_TEST

START_TEST(test_barrier_from_lets_backward_through) {
  hk_module *m = propagated(backward_module("ShardBarrierFrom"));
  ck_assert(!has_instr(m, "barrier"));
  ck_assert(has_sharding(m, "c0", "{devices=[1,4]<=[4]}"));
  hk_module_free(m);
}
END_TEST

START_TEST(test_registry_hooks) {
  static const char *const shardable[] = {"ShardBarrierFrom", "ShardBarrierTo", "Sharding"};
  hk_module *m = hk_test_parse(
      "HloModule h\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  ROOT b = f32[4] custom-call(p), custom_call_target=\"ShardBarrierFrom\"\n}\n");
  for (size_t k = 0; k < 3; k++) {
    const hk_custom_call_partitioner *p = hk_registry_find_custom_call_partitioner(reg, shardable[k]);
    ck_assert_ptr_nonnull(p);
    ck_assert(p->vt->is_shardable(p, m->entry->root));
    ck_assert_ptr_nonnull(p->vt->partition);
  }
  for (size_t k = 0; k < 2; k++) {
    const hk_custom_call_partitioner *p = hk_registry_find_custom_call_partitioner(reg, shardable[k]);
    ck_assert(p->vt->can_side_effecting_have_replicated_sharding(p));
  }
  static const char *const manual[] = {"SPMDFullToShardShape", "SPMDShardToFullShape"};
  for (size_t k = 0; k < 2; k++) {
    const hk_custom_call_partitioner *p = hk_registry_find_custom_call_partitioner(reg, manual[k]);
    ck_assert_ptr_nonnull(p);
    ck_assert(!p->vt->is_shardable(p, m->entry->root));
    ck_assert_ptr_nonnull(p->vt->partition);
  }
  /* Registering a target twice is refused (the registry's duplicate rule). */
  const hk_custom_call_partitioner *from = hk_registry_find_custom_call_partitioner(reg, "ShardBarrierFrom");
  hk_status *st = hk_registry_add_custom_call_partitioner(reg, "ShardBarrierFrom",
                                                          (hk_custom_call_partitioner *)from);
  ck_assert_ptr_nonnull(st);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* ---- a custom-call partitioner from a third party's own .so ------------------------ */

/* Registers "MyScale" (x * 2, elementwise): shardable, takes its operand's
 * sharding, partitioned as a multiply of the local shard. */
static const char *my_cc_src =
    "#include \"hlokit/hlokit.h\"\n"
    "#include \"hlokit/spmd.h\"\n"
    "static bool shardable(const hk_custom_call_partitioner *p, const hk_instr *cc)\n"
    "{ (void)p; (void)cc; return true; }\n"
    "static const hk_sharding *infer(const hk_custom_call_partitioner *p, const hk_instr *cc)\n"
    "{ (void)p; return cc->operands[0]->sharding; }\n"
    "static hk_status *part(const hk_custom_call_partitioner *p, hk_spmd_partition_ctx *ctx,\n"
    "                       hk_instr *cc) {\n"
    "  (void)p; hk_status *err = NULL;\n"
    "  hk_instr *x = ctx->ops->operand(ctx, cc->operands[0], cc->sharding, &err);\n"
    "  if (!x) return err;\n"
    "  hk_computation *b = ctx->ops->builder(ctx);\n"
    "  hk_instr *two = hk_instr_new(b, HK_OP_CONSTANT, hk_shape_scalar(b->module, HK_F32), 0, 0, 0);\n"
    "  hk_literal *l = hk_literal_new(b->module, two->shape); hk_literal_set_f64(l, 0, 2.0);\n"
    "  hk_instr_attrs(two)->literal = l;\n"
    "  hk_instr *bc = hk_instr_new(b, HK_OP_BROADCAST, x->shape, 1, &two, 0);\n"
    "  hk_instr *ops[2] = {x, bc};\n"
    "  ctx->ops->set_partitioned(ctx, cc, hk_instr_new(b, HK_OP_MULTIPLY, x->shape, 2, ops, 0),\n"
    "                            cc->sharding);\n"
    "  return NULL; }\n"
    "static const hk_custom_call_partitioner_vtable vt = {sizeof vt, shardable, infer, 0, 0, part, 0};\n"
    "static const hk_custom_call_partitioner my = {&vt};\n"
    "static hk_status *reg(hk_registry *r)\n"
    "{ return hk_registry_add_custom_call_partitioner(r, \"MyScale\", (hk_custom_call_partitioner *)&my); }\n"
    "HK_PLUGIN(\"my-cc\", \"1.0\", reg)\n";

static const char *my_cc_module =
    "HloModule cc, num_partitions=4\n"
    "ENTRY e {\n"
    "  p0 = f32[8,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  c0 = f32[8,4] copy(p0), sharding={devices=[4,1]<=[4]}\n"
    "  s = f32[8,4] custom-call(c0), custom_call_target=\"MyScale\"\n"
    "  n = f32[8,4] negate(s)\n"
    "  ROOT out = f32[8,4] copy(n)\n"
    "}\n";

START_TEST(test_third_party_custom_call_partitioner) {
  char root[PATH_MAX], dir[] = "/tmp/hk_mycc.XXXXXX", *src, *so, *cmd;
  ck_assert_ptr_nonnull(realpath(".", root));
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_int_gt(asprintf(&src, "%s/my_cc.c", dir), 0);
  ck_assert_int_gt(asprintf(&so, "%s/my_cc.so", dir), 0);
  FILE *f = fopen(src, "w");
  ck_assert_ptr_nonnull(f);
  fputs(my_cc_src, f);
  fclose(f);
  ck_assert_int_gt(asprintf(&cmd, "cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -I'%s/abi' -o '%s' '%s'",
                            root, so, src), 0);
  ck_assert_msg(system(cmd) == 0, "building the custom-call plugin failed");
  free(cmd);
  /* Without the plugin, propagation does not see through MyScale. */
  hk_module *m = hk_test_parse(my_cc_module);
  ck_assert_ok(run_passes(m, "sharding-propagation{is_spmd=true}"));
  ck_assert(!is_tiled(m, "n"));
  hk_module_free(m);
  ck_assert_ok(hk_plugin_load(reg, so, HK_ORIGIN_EXPLICIT));
  /* With it, the operand's tiling flows through the custom call ... */
  m = hk_test_parse(my_cc_module);
  ck_assert_ok(run_passes(m, "sharding-propagation{is_spmd=true}"));
  ck_assert(has_sharding(m, "s", "{devices=[4,1]<=[4]}"));
  ck_assert(has_sharding(m, "n", "{devices=[4,1]<=[4]}"));
  /* ... and the partitioner calls its partition hook. */
  ck_assert_ok(run_passes(m, "spmd-partitioning{allow_module_signature_change=true}"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_MULTIPLY), 1);
  for (hk_instr *i = m->entry->first; i; i = i->next)
    if (i->opcode == HK_OP_MULTIPLY) ck_assert_int_eq(i->shape->dims[0], 2);   /* the local shard */
  hk_module_free(m);
  ck_assert_int_gt(asprintf(&cmd, "rm -rf '%s'", dir), 0);
  ck_assert_int_eq(system(cmd), 0);
  free(cmd);
  free(src);
  free(so);
}
END_TEST

/* ---- barriers through the SPMD partitioner ------------------------------------ */

/* The evaluator's verdict on IN partitioned by PASSES on N devices
 * (`hlokit check`, the build's own binary and plugins). */
static int check_cli(const char *text, const char *passes, int n) {
  char exe[PATH_MAX], path[] = "/tmp/hk_variants_XXXXXX.hlo", *cmd;
  hk_test_build_path("hlokit", exe, sizeof exe);
  int fd = mkstemps(path, 4);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  ck_assert_int_gt(asprintf(&cmd, "'%s' check '%s' --passes='%s' --num-partitions=%d "
                            ">/dev/null 2>&1", exe, path, passes, n), 0);
  int rc = system(cmd);
  free(cmd);
  unlink(path);
  ck_assert(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

START_TEST(test_barriers_partition_as_identity) {
  static const char *const targets[] = {"ShardBarrierFrom", "ShardBarrierTo"};
  for (int k = 0; k < 2; k++) {
    char *fwd = forward_module(targets[k]), *bwd = backward_module(targets[k]);
    const char *passes = "sharding-propagation{is_spmd=true},"
                         "spmd-partitioning{allow_module_signature_change=true}";
    ck_assert_int_eq(check_cli(fwd, passes, 4), 0);
    ck_assert_int_eq(check_cli(bwd, passes, 4), 0);
    /* In-process: the barrier leaves no custom-call behind, and a
     * replicated side-effecting barrier is accepted. */
    hk_module *m = hk_test_parse(fwd);
    ck_assert_ok(run_passes(m, passes));
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 0);
    hk_module_free(m);
    free(fwd);
    free(bwd);
  }
  hk_module *m = hk_test_parse(
      "HloModule r, num_partitions=2\nENTRY e {\n"
      "  p = f32[4] parameter(0), sharding={replicated}\n"
      "  b = f32[4] custom-call(p), custom_call_target=\"ShardBarrierTo\", "
      "custom_call_has_side_effect=true, sharding={replicated}\n"
      "  ROOT n = f32[4] negate(b), sharding={replicated}\n}\n");
  ck_assert_ok(run_passes(m, "spmd-partitioning"));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 0);
  hk_module_free(m);
}
END_TEST

/* ---- stateful-rng-spmd-partitioning ------------------------------------------------ */

/* rng-get-and-update-state feeding rng-bit-generator (what rng-expander
 * emits), its bits added to a tiled parameter.  STATE_SHARDING is the
 * state's annotation ("" for none). */
static char *rng_module(const char *state_sharding) {
  char *t;
  ck_assert_int_gt(asprintf(&t,
                            "HloModule rng, num_partitions=2\n"
                            "ENTRY e {\n"
                            "  state = u64[2] rng-get-and-update-state(), delta=8%s\n"
                            "  rbg = (u64[2], u32[8]) rng-bit-generator(state), algorithm=rng_default, "
                            "sharding={{replicated}, {replicated}}\n"
                            "  bits = u32[8] get-tuple-element(rbg), index=1, sharding={replicated}\n"
                            "  f = f32[8] convert(bits), sharding={replicated}\n"
                            "  p = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
                            "  ROOT a = f32[8] add(f, p), sharding={devices=[2]0,1}\n"
                            "}\n",
                            state_sharding),
                   0);
  return t;
}

static hk_status *partition_rng(const char *state_sharding, const char *passes, hk_module **out) {
  char *text = rng_module(state_sharding);
  hk_module *m = hk_test_parse(text);
  free(text);
  hk_status *st = run_passes(m, passes);
  if (out && !st) *out = m;
  else hk_module_free(m);
  return st;
}

static void expect_message(hk_status *st, const char *msg) {
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, msg), "message '%s' lacks '%s'", st->message, msg);
  hk_status_free(st);
}

#define STOCK_SPMD "spmd-partitioning{allow_module_signature_change=true}"
#define STATEFUL "stateful-rng-spmd-partitioning"

START_TEST(test_stateful_defaults_and_extension) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, STATEFUL, NULL, &err);
  ck_assert_ok(err);
  ck_assert_str_eq(hk_pass_name(p), STATEFUL);
  const hk_spmd_partitioner_vtable *vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  ck_assert_ptr_nonnull(vt);
  const hk_spmd_options *o = vt->options(p);
  ck_assert_int_eq(o->threshold_for_windowed_einsum_mib, 100000);
  ck_assert(o->allow_module_signature_change);
  ck_assert(!o->unroll_windowed_einsum);
  ck_assert(!o->has_total_bytes_windowed_einsum_threshold);
  ck_assert(o->cache_all_gather);   /* the rest are the base's defaults */
  hk_pass_destroy(p);
  /* Constructor arguments map onto the base's options. */
  p = hk_registry_create_pass(reg, STATEFUL,
                              "threshold_for_windowed_einsum_mib=7 windowed_einsum_use_multiple_streams=true "
                              "total_bytes_windowed_einsum_threshold=4096", &err);
  ck_assert_ok(err);
  o = ((const hk_spmd_partitioner_vtable *)hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE))->options(p);
  ck_assert_int_eq(o->threshold_for_windowed_einsum_mib, 7);
  ck_assert(o->unroll_windowed_einsum);
  ck_assert(o->has_total_bytes_windowed_einsum_threshold);
  ck_assert_int_eq(o->total_bytes_windowed_einsum_threshold, 4096);
  hk_pass_destroy(p);
  /* Options of the base that XLA's constructor does not take are refused. */
  ck_assert_ptr_null(hk_registry_create_pass(reg, STATEFUL, "cache_all_gather=false", &err));
  expect_message(err, "cache_all_gather");
  /* The stock pass keeps its own defaults (the subclass changed no shared state). */
  p = hk_registry_create_pass(reg, "spmd-partitioning", NULL, &err);
  ck_assert_ok(err);
  o = ((const hk_spmd_partitioner_vtable *)hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE))->options(p);
  ck_assert_int_eq(o->threshold_for_windowed_einsum_mib, 256);
  ck_assert(!o->allow_module_signature_change);
  hk_pass_destroy(p);
}
END_TEST

START_TEST(test_stateful_side_effect_rules) {
  /* Replicated state: the stock partitioner refuses it, the stateful one
   * overrides CanSideEffectingHaveReplicatedSharding. */
  expect_message(partition_rng(", sharding={replicated}", STOCK_SPMD, NULL),
                 "side-effect HLO cannot have a replicated sharding");
  hk_module *m = NULL;
  ck_assert_ok(partition_rng(", sharding={replicated}", STATEFUL, &m));
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_RNG_GET_AND_UPDATE_STATE), 1);
  hk_instr *state = NULL;
  for (hk_instr *i = m->entry->first; i; i = i->next)
    if (i->opcode == HK_OP_RNG_GET_AND_UPDATE_STATE) state = i;
  ck_assert_int_eq(state->attrs->rng_delta, 8);
  ck_assert_int_eq(state->shape->dims[0], 2);
  hk_module_free(m);
  /* Unannotated state: the stock partitioner wants a sharding, the
   * stateful PreprocessSharding gives it {replicated}. */
  expect_message(partition_rng("", STOCK_SPMD, NULL), "Side-effect HLO must have sharding");
  ck_assert_ok(partition_rng("", STATEFUL, NULL));
  /* One device: the base's single-device handling. */
  ck_assert_ok(partition_rng(", sharding={maximal device=1}", STATEFUL, NULL));
  /* Tiled state makes no sense: refused with the RET_CHECK. */
  expect_message(partition_rng(", sharding={devices=[2]0,1}", STATEFUL, NULL),
                 "must be replicated or on one device");
}
END_TEST

START_TEST(test_stateful_numerics) {
  char *text = rng_module("");
  ck_assert_int_eq(check_cli(text, "sharding-propagation{is_spmd=true}," STATEFUL, 2), 0);
  ck_assert_int_eq(check_cli(text, "sharding-propagation{is_spmd=true}," STOCK_SPMD, 2), 2);
  free(text);
}
END_TEST

/* ---- the third-party variant (plugin/examples/variant_dot_allgather.c) ------------ */

/* Builds the example into a fresh folder with only abi/ on the include
 * path, as a plugin author would; returns its path (malloc'ed). */
static char *build_example_variant(char *dir, size_t cap) {
  char root[PATH_MAX], *cmd, *so;
  ck_assert_ptr_nonnull(realpath(".", root));
  snprintf(dir, cap, "/tmp/hk_variant.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_int_gt(asprintf(&so, "%s/variant_dot_allgather.so", dir), 0);
  ck_assert_int_gt(asprintf(&cmd, "cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -I'%s/abi' "
                            "-o '%s' '%s/plugin/examples/variant_dot_allgather.c'", root, so, root), 0);
  ck_assert_msg(system(cmd) == 0, "building the example variant failed: %s", cmd);
  free(cmd);
  return so;
}

static json_object *ab_json(const char *so) {
  char exe[PATH_MAX], *cmd;
  hk_test_build_path("hlokit", exe, sizeof exe);
  ck_assert_int_gt(asprintf(&cmd, "'%s' ab fixtures/mlp.hlo "
                            "--a='spmd-partitioning{allow_module_signature_change=true}' "
                            "--b='spmd-dot-allgather{allow_module_signature_change=true}' "
                            "--num-partitions=8 --json --load-pass-plugin='%s' 2>&1", exe, so), 0);
  FILE *f = popen(cmd, "r");
  ck_assert_ptr_nonnull(f);
  char buf[1 << 14];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  int rc = pclose(f);
  free(cmd);
  ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "hlokit ab failed: %s", buf);
  json_object *j = json_tokener_parse(buf);
  ck_assert_msg(j != NULL, "not JSON: %s", buf);
  return j;
}

static int64_t jget(json_object *j, const char *side, const char *kind, const char *field) {
  json_object *s, *c, *k, *v;
  ck_assert(json_object_object_get_ex(j, side, &s));
  if (!kind) {
    ck_assert(json_object_object_get_ex(s, field, &v));
    return json_object_get_int64(v);
  }
  ck_assert(json_object_object_get_ex(s, "collectives", &c));
  ck_assert(json_object_object_get_ex(c, kind, &k));
  ck_assert(json_object_object_get_ex(k, field, &v));
  return json_object_get_int64(v);
}

START_TEST(test_example_variant_against_stock) {
  char dir[PATH_MAX];
  char *so = build_example_variant(dir, sizeof dir);
  json_object *j = ab_json(so);
  json_object *a, *b, *eq;
  ck_assert(json_object_object_get_ex(j, "a", &a) && json_object_object_get_ex(j, "b", &b));
  ck_assert(json_object_object_get_ex(a, "equal", &eq) && json_object_get_boolean(eq));
  ck_assert(json_object_object_get_ex(b, "equal", &eq) && json_object_get_boolean(eq));
  /* Stock: one all-reduce of f32[16,64] per layer, nothing else. */
  ck_assert_int_eq(jget(j, "a", "all-reduce", "count"), 2);
  ck_assert_int_eq(jget(j, "a", "all-gather", "count"), 0);
  ck_assert_int_eq(jget(j, "a", NULL, "full_rematerializations"), 0);
  /* Variant: per layer two all-gathers (the w1 and w2 shards: 8192 +
   * 8192 bytes sent per device), no all-reduce.  The relu of the first
   * dot's replicated result is rebuilt whole for the second dot (a pure
   * function of a replicated value) rather than sliced and gathered. */
  ck_assert_int_eq(jget(j, "b", "all-reduce", "count"), 0);
  ck_assert_int_eq(jget(j, "b", "all-gather", "count"), 4);
  ck_assert_int_eq(jget(j, "b", "all-gather", "bytes_per_device"), 2 * (8192 + 8192));
  ck_assert_int_eq(jget(j, "b", NULL, "full_rematerializations"), 0);
  ck_assert_int_gt(jget(j, "b", NULL, "bytes_moved_per_device"), jget(j, "a", NULL, "bytes_moved_per_device"));
  ck_assert_int_gt(jget(j, "b", NULL, "peak_live_bytes_per_device"),
                   jget(j, "a", NULL, "peak_live_bytes_per_device"));
  json_object_put(j);
  /* In-process: it is a subclass (the spmd extension, its own name). */
  hk_registry *r = hk_registry_new();
  char path[4096];
  hk_test_plugin_path("stock", path, sizeof path);
  ck_assert_ok(hk_plugin_load(r, path, HK_ORIGIN_EXPLICIT));
  hk_test_plugin_path("spmd", path, sizeof path);
  ck_assert_ok(hk_plugin_load(r, path, HK_ORIGIN_EXPLICIT));
  ck_assert_ok(hk_plugin_load(r, so, HK_ORIGIN_EXPLICIT));
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(r, "spmd-dot-allgather", NULL, &err);
  ck_assert_ok(err);
  ck_assert_str_eq(hk_pass_name(p), "spmd-dot-allgather");
  const hk_spmd_partitioner_vtable *vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  ck_assert_ptr_nonnull(vt);
  ck_assert(!vt->options(p)->allow_module_signature_change);
  hk_pass_destroy(p);
  hk_registry_free(r);
  char *rm;
  ck_assert_int_gt(asprintf(&rm, "rm -rf '%s'", dir), 0);
  ck_assert_int_eq(system(rm), 0);
  free(rm);
  free(so);
}
END_TEST

static Suite *variants_suite(void) {
  Suite *s = suite_create("variants");
  TCase *b = tcase_create("barriers");
  tcase_set_timeout(b, 120);
  tcase_add_unchecked_fixture(b, load_plugins, unload_plugins);
  tcase_add_test(b, test_barrier_from_blocks_forward);
  tcase_add_test(b, test_barrier_to_lets_forward_through);
  tcase_add_test(b, test_barrier_to_blocks_backward);
  tcase_add_test(b, test_barrier_from_lets_backward_through);
  tcase_add_test(b, test_registry_hooks);
  tcase_add_test(b, test_barriers_partition_as_identity);
  tcase_add_test(b, test_third_party_custom_call_partitioner);
  suite_add_tcase(s, b);
  TCase *r = tcase_create("stateful_rng");
  tcase_set_timeout(r, 120);
  tcase_add_unchecked_fixture(r, load_plugins, unload_plugins);
  tcase_add_test(r, test_stateful_defaults_and_extension);
  tcase_add_test(r, test_stateful_side_effect_rules);
  tcase_add_test(r, test_stateful_numerics);
  suite_add_tcase(s, r);
  TCase *e = tcase_create("example");
  tcase_set_timeout(e, 120);
  tcase_add_test(e, test_example_variant_against_stock);
  suite_add_tcase(s, e);
  return s;
}

HK_TEST_MAIN(variants_suite)
