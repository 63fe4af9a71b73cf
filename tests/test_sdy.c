/* test_sdy.c - Check tests of the sdy plugin: known answers for each Shardy
 * construct the import reads (mesh, axis, sub-axis, device ids, maximal
 * mesh, open dim, priority, manual computation, per-value, result sharding,
 * group), its errors, the export's identity on round-tripped attribute
 * text, and the fixtures through import -> propagation -> partitioning ->
 * check. */
#include <limits.h>
#include <unistd.h>

#include "hlokit/text.h"
#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;
static void load(void) { reg = hk_test_registry_with("sdy"); }
static void unload(void) { hk_registry_free(reg); }

static hk_module *import_parts(int parts, const char *meshes, const char *entry) {
  char t[8192];
  snprintf(t, sizeof t, "HloModule m, num_partitions=%d, frontend_attributes={xla.sdy.meshes={%s}}\n\n%s",
           parts, meshes, entry);
  hk_module *m = hk_test_parse(t);
  /* keep=true: several tests export afterwards */
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", "keep=true"));
  return m;
}

static hk_module *import_text(const char *meshes, const char *entry) {
  return import_parts(8, meshes, entry);
}

static void assert_sharding(hk_module *m, const char *name, const char *want) {
  const hk_instr *i = hk_test_find(m, name);
  ck_assert_msg(i->sharding, "%s has no sharding", name);
  char *got = hk_sharding_to_string(i->sharding);
  ck_assert_str_eq(got, want);
  free(got);
}

static bool sdy_is_custom_call_named(const hk_instr *i, const char *target) {
  return i->opcode == HK_OP_CUSTOM_CALL && !strcmp(i->attrs->custom_call_target, target);
}

static const char *sdy_attr(const hk_instr *i, const char *key) {
  for (int k = 0; i->attrs && k < i->attrs->n_frontend_attributes; k++)
    if (!strcmp(i->attrs->frontend_attributes[k].key, key)) return i->attrs->frontend_attributes[k].value;
  return "";
}

/* One parameter p of shape SHAPE with Shardy sharding TEXT. */
static const char *param_sharded(const char *shape, const char *text) {
  static char e[2048];
  snprintf(e, sizeof e, "ENTRY e {\n  ROOT p = %s parameter(0), frontend_attributes={xla.sdy.sharding=\"%s\"}\n}\n",
           shape, text);
  return e;
}

/* Imports one parameter with Shardy sharding TEXT (quotes escaped for
 * HLO) over MESHES on `parts` devices and checks its HloSharding. */
static void assert_param(int parts, const char *meshes, const char *shape, const char *text,
                         const char *want) {
  hk_module *m = import_parts(parts, meshes, param_sharded(shape, text));
  assert_sharding(m, "p", want);
  hk_module_free(m);
}

START_TEST(mesh_axes_give_iota_tiles) {
  assert_param(8, "mesh = #sdy.mesh<[\"x\"=4, \"y\"=2]>", "f32[8,16]",
               "#sdy.sharding<@mesh, [{\\\"x\\\"}, {\\\"y\\\"}]>", "{devices=[4,2]<=[8]}");
  assert_param(8, "mesh = #sdy.mesh<[\"x\"=4, \"y\"=2]>", "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"y\\\"}, {}]>",
               "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}");
  /* two axes on one dim, minor axis first */
  assert_param(8, "mesh = #sdy.mesh<[\"x\"=2, \"y\"=4]>", "f32[8,16]", "#sdy.sharding<@mesh, [{\\\"y\\\", \\\"x\\\"}, {}]>",
               "{devices=[8,1]<=[2,4]T(1,0)}");
}
END_TEST

/* Known answers from XLA's own test of its Shardy -> HloSharding export
 * (xla/service/spmd/shardy/test/mhlo_export_pipeline.mlir). */
START_TEST(xla_export_known_answers) {
  static const struct {
    int parts;
    const char *mesh, *shape, *sharding, *want;
  } cases[] = {
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,8]", "[{\"axis_2\"}, {\"axis_0\", \"axis_1\"}]",
       "{devices=[4,8]<=[8,4]T(1,0)}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,8]", "[{}, {\"axis_0\"}]",
       "{devices=[1,2,16]<=[32] last_tile_dim_replicate}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,16]", "[{\"axis_1\"}, {\"axis_2\"}]",
       "{devices=[4,4,2]<=[2,16]T(1,0) last_tile_dim_replicate}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,8]", "[{}, {\"axis_0\", \"axis_2\"}]",
       "{devices=[1,8,4]<=[2,4,4]T(0,2,1) last_tile_dim_replicate}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,16]", "[{}, {\"axis_1\"}]",
       "{devices=[1,4,8]<=[2,4,4]T(1,0,2) last_tile_dim_replicate}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,16]", "[{\"axis_0\", \"axis_1\"}, {\"axis_2\"}]",
       "{devices=[8,4]<=[32]}"},
      {32, "[\"axis_0\"=2, \"axis_1\"=4, \"axis_2\"=4]", "f32[8,8]", "[{\"axis_1\",\"axis_0\"}, {}]",
       "{devices=[8,1,4]<=[2,4,4]T(1,0,2) last_tile_dim_replicate}"},
      {32, "[\"x\"=8, \"y\"=4]", "f32[8,8]", "[{\"y\"}, {}]",
       "{devices=[4,1,8]<=[8,4]T(1,0) last_tile_dim_replicate}"},
      {32, "[\"x\"=8, \"y\"=4]", "f32[8,8]", "[{\"y\"}, {\"x\":(2)2}]",
       "{devices=[4,2,4]<=[2,2,2,4]T(3,1,0,2) last_tile_dim_replicate}"},
      {32, "[\"x\"=8, \"y\"=4]", "f32[8,16]", "[{\"x\":(1)2}, {\"x\":(2)4}]",
       "{devices=[2,4,4]<=[32] last_tile_dim_replicate}"},
      {32, "[\"x\"=8, \"y\"=4]", "f32[8,16]", "[{\"x\":(1)2, \"x\":(4)2}, {}]",
       "{devices=[4,1,8]<=[2,2,2,4]T(0,2,1,3) last_tile_dim_replicate}"},
      {16, "[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2]", "f32[8,16]", "[{\"a\", ?}, {\"b\", ?}]",
       "{devices=[2,2,4]<=[16] last_tile_dim_replicate}"},
      {16, "[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2]", "f32[16,32]", "[{\"b\", ?}, {?}]",
       "{devices=[2,1,8]<=[2,2,4]T(1,0,2) last_tile_dim_replicate}"},
      {8, "[\"axis_0\"=2, \"axis_1\"=2, \"axis_2\"=2], device_ids=[0,2,4,6,1,3,5,7]", "f32[8,8]",
       "[{\"axis_2\"}, {\"axis_0\", \"axis_1\"}]", "{devices=[2,4]0,4,1,5,2,6,3,7}"},
      {8, "[\"axis_0\"=2, \"axis_1\"=2, \"axis_2\"=2], device_ids=[0,2,4,6,1,3,5,7]", "f32[8,8]",
       "[{}, {\"axis_0\", \"axis_2\"}]", "{devices=[1,4,2]0,4,2,6,1,5,3,7 last_tile_dim_replicate}"},
      {8, "[\"axis_0\"=2, \"axis_1\"=2, \"axis_2\"=2], device_ids=[0,2,4,6,1,3,5,7]", "f32[8,16]",
       "[{}, {\"axis_1\"}]", "{devices=[1,2,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"},
      {8, "[\"axis_0\"=2, \"axis_1\"=2, \"axis_2\"=2], device_ids=[0,2,4,6,1,3,5,7]", "f32[8,8]",
       "[{\"axis_1\",\"axis_0\"}, {}]", "{devices=[4,1,2]0,2,1,3,4,6,5,7 last_tile_dim_replicate}"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char meshes[256], text[512], escaped[1024];
    snprintf(meshes, sizeof meshes, "mesh = #sdy.mesh<%s>", cases[k].mesh);
    snprintf(text, sizeof text, "#sdy.sharding<@mesh, %s>", cases[k].sharding);
    size_t w = 0;                  /* quotes escaped for the HLO string */
    for (const char *q = text; *q && w + 2 < sizeof escaped; q++) {
      if (*q == '"') escaped[w++] = '\\';
      escaped[w++] = *q;
    }
    escaped[w] = 0;
    assert_param(cases[k].parts, meshes, cases[k].shape, escaped, cases[k].want);
  }
}
END_TEST

/* Unreduced axes: newer XLA's V3ToV2Sharding known answers
 * (hlo_sharding_test.cc: Unreduced, and the mixed subgroup case). */
START_TEST(unreduced_axes_known_answers) {
  hk_module *m = import_parts(4, "mesh = #sdy.mesh<[\"a\"=2, \"b\"=2]>",
                              param_sharded("f32[6,6]", "#sdy.sharding<@mesh, [{\\\"a\\\"}, {}], unreduced={\\\"b\\\"}>"));
  assert_sharding(m, "p", "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}");
  hk_module_free(m);
  m = import_parts(4, "mesh = #sdy.mesh<[\"a\"=2, \"b\"=2]>",
                   param_sharded("f32[6,6]", "#sdy.sharding<@mesh, [{}, {}], unreduced={\\\"b\\\"}>"));
  assert_sharding(m, "p", "{devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dims={unreduced, replicated}}");
  hk_module_free(m);
}
END_TEST

/* XLA's sharding_in_manual_computation_body: the shardings of a partly
 * manual region (mesh a,b,c,d; manual a,b), from the same test file. */
START_TEST(xla_manual_region_known_answers) {
  hk_module *m = import_parts(
      16, "mesh_3 = #sdy.mesh<[\"a\"=2, \"b\"=2, \"c\"=2, \"d\"=2]>",
      "xla.sdy.manual_computation_body.3 {\n  p0 = f32[4,8] parameter(0)\n  p1 = f32[8,32] parameter(1)\n"
      "  add = f32[4,8] add(p0, p0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh_3, [{\\\"c\\\"}, {}]>]>\"}\n"
      "  addc = f32[4,8] custom-call(add), custom_call_target=\"Sharding\", "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh_3, [{\\\"c\\\"}, {}]>]>\"}\n"
      "  dot = f32[4,32] dot(addc, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  dotc = f32[4,32] custom-call(dot), custom_call_target=\"Sharding\", "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh_3, [{\\\"c\\\"}, {\\\"d\\\"}]>]>\"}\n"
      "  ROOT sine = f32[4,32] sine(dotc)\n}\n\n"
      "ENTRY e {\n  x = f32[8,16] parameter(0)\n  y = f32[16,32] parameter(1)\n"
      "  g = (f32[4,8], f32[8,32]) custom-call(x, y), custom_call_target=\"xla.sdy.GlobalToLocalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<@mesh_3, [{\\\"b\\\"}, {\\\"a\\\"}]>, <@mesh_3, [{\\\"b\\\"}, {}], replicated={\\\"a\\\"}>]>\","
      "xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"a\\\", \\\"b\\\"}>\"}\n"
      "  g0 = f32[4,8] get-tuple-element(g), index=0\n  g1 = f32[8,32] get-tuple-element(g), index=1\n"
      "  c = f32[4,32] call(g0, g1), to_apply=xla.sdy.manual_computation_body.3\n"
      "  ROOT l = f32[8,32] custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"a\\\", \\\"b\\\"}>\","
      "xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh_3, [{\\\"a\\\"}, {}], replicated={\\\"b\\\"}>]>\"}\n}\n");
  assert_sharding(m, "copy", "{devices=[2,2,4]<=[2,2,4]T(1,0,2) last_tile_dim_replicate}");
  assert_sharding(m, "g.1", "{devices=[1,1,4,4]<=[16] last_tile_dims={manual, replicated}}");
  assert_sharding(m, "copy.1", "{devices=[2,1,8]<=[2,2,4]T(1,0,2) last_tile_dim_replicate}");
  /* an add's own xla.sdy.sharding is dropped, as XLA's import drops it */
  assert_sharding(m, "add.1", "{devices=[1,1,4,4]<=[16] last_tile_dims={manual, replicated}}");
  assert_sharding(m, "addc.1", "{devices=[2,1,4,2]<=[4,2,2]T(1,0,2) last_tile_dims={manual, replicated}}");
  assert_sharding(m, "dotc.1", "{devices=[2,2,4]<=[4,4]T(1,0) last_tile_dims={manual}}");
  assert_sharding(m, "sine.1", "{devices=[1,1,4,4]<=[16] last_tile_dims={manual, replicated}}");
  assert_sharding(m, "copy.2", "{devices=[1,1,4,4]<=[16] last_tile_dims={manual, replicated}}");
  assert_sharding(m, "l.1", "{devices=[2,1,8]<=[16] last_tile_dim_replicate}");
  /* the export outlines the body again with the shardings it came with */
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  hk_instr *dot = hk_test_last_op(m, HK_OP_DOT)->users[0];
  ck_assert_ptr_null(dot->sharding);
  ck_assert(strstr(dot->parent->name, "xla.sdy.manual_computation_body") == dot->parent->name);
  ck_assert_str_eq(sdy_attr(dot, "xla.sdy.sharding"),
                   "#sdy.sharding_per_value<[<@mesh_3, [{\"c\"}, {\"d\"}]>]>");
  hk_module_free(m);
}
END_TEST

START_TEST(sub_axis_splits_the_axis) {
  assert_param(8, "mesh = #sdy.mesh<[\"data\"=2, \"model\"=4]>", "f32[64]", "#sdy.sharding<@mesh, [{\\\"model\\\":(1)2}]>",
               "{devices=[2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}");
  assert_param(8, "mesh = #sdy.mesh<[\"x\"=8]>", "f32[8,8]", "#sdy.sharding<@mesh, [{\\\"x\\\":(2)4}, {\\\"x\\\":(1)2}]>",
               "{devices=[4,2]<=[2,4]T(1,0)}");
}
END_TEST

START_TEST(device_ids_and_maximal_mesh) {
  assert_param(8, "mesh = #sdy.mesh<[\"x\"=2, \"y\"=4], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>", "f32[8,4]", "#sdy.sharding<@mesh, [{\\\"y\\\"}, {\\\"x\\\"}]>",
               "{devices=[4,2]7,3,6,2,5,1,4,0}");
  assert_param(8, "maximal_mesh_0 = #sdy.mesh<[], device_ids=[5]>", "f32[4]", "#sdy.sharding<@maximal_mesh_0, [{}]>",
               "{maximal device=5}");
}
END_TEST

START_TEST(open_dims_priorities_and_replicated_axes) {
  /* a fully open sharding leaves the value to propagation */
  hk_module *m = import_text("mesh = #sdy.mesh<[\"x\"=8]>",
                             param_sharded("f32[8,8]", "#sdy.sharding<@mesh, [{?}, {?}]>"));
  ck_assert_ptr_null(hk_test_find(m, "p")->sharding);
  hk_module_free(m);
  m = import_text("mesh = #sdy.mesh<[\"x\"=4, \"y\"=2]>",
                  param_sharded("f32[8,8]", "#sdy.sharding<@mesh, [{\\\"x\\\"}p1, {}], replicated={\\\"y\\\"}>"));
  assert_sharding(m, "p", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}");
  /* the priority is kept with the text for later passes */
  ck_assert_ptr_nonnull(strstr(hk_instr_attrs(hk_test_find(m, "p"))->frontend_attributes[0].value, "}p1"));
  hk_module_free(m);
  /* a Sharding constraint's open dims become unspecified_dims */
  m = import_text("mesh = #sdy.mesh<[\"x\"=8]>",
                  "ENTRY e {\n  p = f32[8,8] parameter(0)\n"
                  "  ROOT s = f32[8,8] custom-call(p), custom_call_target=\"Sharding\", sharding={replicated}, "
                  "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {?}]>]>\"}\n}\n");
  assert_sharding(m, "s", "{devices=[8,1]<=[8]}");
  ck_assert_str_eq(hk_test_find(m, "s")->attrs->backend_config, "\"unspecified_dims=[1]\"");
  hk_module_free(m);
  /* dims the custom call already leaves open stay open */
  m = import_text("mesh = #sdy.mesh<[\"x\"=8]>",
                  "ENTRY e {\n  p = f32[8,8,8] parameter(0)\n"
                  "  ROOT s = f32[8,8,8] custom-call(p), custom_call_target=\"Sharding\", backend_config=\"unspecified_dims=[0]\", "
                  "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{}, {\\\"x\\\"}, {?}]>]>\"}\n}\n");
  ck_assert_str_eq(hk_test_find(m, "s")->attrs->backend_config, "\"unspecified_dims=[0,2]\"");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  ck_assert_str_eq(hk_test_find(m, "s")->attrs->backend_config, "\"unspecified_dims=[0]\"");
  ck_assert_ptr_null(hk_test_find(m, "p")->sharding);   /* mhlo shardings dropped, as XLA */
  hk_module_free(m);
}
END_TEST

START_TEST(per_value_and_result_shardings) {
  hk_module *m = import_text(
      "mesh = #sdy.mesh<[\"x\"=8]>",
      "ENTRY e {\n  p = f32[8] parameter(0)\n  q = f32[16] parameter(1)\n"
      "  t = (f32[8], f32[16]) custom-call(p, q), custom_call_target=\"xla_ffi_python_cpu_callback\", "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}]>, <@mesh, [{}]>]>\"}\n"
      "  a = f32[8] get-tuple-element(t), index=0\n"
      "  r = f32[8] custom-call(a), custom_call_target=\"xla.sdy.FuncResultSharding\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}]>]>\"}\n"
      "  ROOT out = (f32[8], f32[8]) tuple(r, p)\n}\n");
  assert_sharding(m, "t", "{{devices=[8]<=[8]}, {replicated}}");
  assert_sharding(m, "out", "{{devices=[8]<=[8]}, {replicated}}");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 1);   /* the result call is gone */
  ck_assert_ptr_null(hk_test_find(m, "a")->sharding);
  ck_assert_ptr_eq(m->entry->root->operands[0], hk_test_find(m, "a"));
  hk_module_free(m);
  /* a nested tuple takes one sharding per leaf, depth first */
  m = import_text(
      "mesh = #sdy.mesh<[\"x\"=8]>",
      "ENTRY e {\n  p = f32[8] parameter(0)\n"
      "  ROOT t = ((f32[8], f32[8]), f32[8]) custom-call(p), custom_call_target=\"xla_python_cpu_callback\", "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{}]>, <@mesh, [{\\\"x\\\"}]>, <@mesh, [{?}]>]>\"}\n}\n");
  assert_sharding(m, "t", "{{replicated}, {devices=[8]<=[8]}, {replicated}}");
  hk_module_free(m);
}
END_TEST

/* XLA's TestMaximalShardingNoResults: a callback without results (shape
 * ()) takes its one per-value sharding as a one-element tuple sharding;
 * and WhileShardingOnlyOnFreeVariables: a fully open Sharding constraint
 * stays a constraint that constrains nothing ({replicated}, every dim in
 * unspecified_dims). */
START_TEST(empty_tuple_and_fully_open_constraint) {
  hk_module *m = import_parts(
      1, "maximal_mesh_0 = #sdy.mesh<[], device_ids=[0]>",
      "ENTRY e {\n  ROOT a = s64[2] parameter(0)\n"
      "  cc = () custom-call(a), custom_call_target=\"xla_ffi_python_cpu_callback\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@maximal_mesh_0, []>]>\"}, sharding={{maximal device=0}}\n}\n");
  assert_sharding(m, "cc", "{{maximal device=0}}");
  hk_module_free(m);
  m = import_parts(4, "mesh = #sdy.mesh<[\"x\"=4]>",
                   "ENTRY e {\n  p = f32[32,96] parameter(0)\n"
                   "  ROOT s = f32[32,96] custom-call(p), custom_call_target=\"Sharding\", sharding={replicated}, "
                   "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{?}, {?}]>]>\"}\n}\n");
  assert_sharding(m, "s", "{replicated}");
  ck_assert_str_eq(hk_test_find(m, "s")->attrs->backend_config, "\"unspecified_dims=[0,1]\"");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));   /* the open text comes back */
  ck_assert_str_eq(sdy_attr(hk_test_find(m, "s"), "xla.sdy.sharding"),
                   "#sdy.sharding_per_value<[<@mesh, [{?}, {?}]>]>");
  hk_module_free(m);
}
END_TEST

/* A result sharding on a manual computation's result that differs from
 * its out sharding goes on a copy: the SPMDShardToFullShape keeps the
 * sharding its shard fits, and the export writes the result sharding back. */
START_TEST(result_sharding_on_a_manual_result_goes_on_a_copy) {
  const char *body =
      "xla.sdy.manual_computation_body.2 {\n  p = f32[4,16] parameter(0)\n  ROOT n = f32[4,16] negate(p)\n}\n\n"
      "ENTRY e {\n  x = f32[8,16] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}, {\\\"y\\\"}]>\"}\n"
      "  g = f32[4,16] custom-call(x), custom_call_target=\"xla.sdy.GlobalToLocalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {}]>]>\",xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\"}\n"
      "  c = f32[4,16] call(g), to_apply=xla.sdy.manual_computation_body.2\n"
      "  l = f32[8,16] custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\",xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {}]>]>\"}\n"
      "  ROOT r = f32[8,16] custom-call(l), custom_call_target=\"xla.sdy.FuncResultSharding\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{}, {\\\"y\\\"}]>]>\"}\n}\n";
  hk_module *m = import_text("mesh = #sdy.mesh<[\"x\"=2, \"y\"=4]>", body);
  hk_instr *root = m->entry->root;
  ck_assert_int_eq(root->opcode, HK_OP_COPY);
  ck_assert_str_eq(root->operands[0]->attrs->custom_call_target, "SPMDShardToFullShape");
  assert_sharding(m, root->name, "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  assert_sharding(m, root->operands[0]->name, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  root = m->entry->root;
  ck_assert(sdy_is_custom_call_named(root, "xla.sdy.FuncResultSharding"));
  ck_assert_str_eq(sdy_attr(root, "xla.sdy.sharding"), "#sdy.sharding_per_value<[<@mesh, [{}, {\"y\"}]>]>");
  hk_module_free(m);
}
END_TEST

/* xla.sdy.import_mhlo_shardings: ShardyXLA's mhlo import reads the HLO
 * shardings, not the Shardy texts; the attribute and the meshes go. */
START_TEST(import_mhlo_shardings_keeps_hlo_shardings) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=8, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}, "
      "xla.sdy.import_mhlo_shardings=\"t\"}\n\nENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[1,8]<=[8]}, "
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}, {}]>\"}\n"
      "  ROOT n = f32[8,8] negate(p)\n}\n");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  assert_sharding(m, "p", "{devices=[1,8]<=[8]}");
  ck_assert_int_eq(m->config.n_frontend_attributes, 0);
  hk_module_free(m);
}
END_TEST

START_TEST(sharding_group_becomes_shard_as) {
  hk_module *m = import_text(
      "mesh = #sdy.mesh<[\"x\"=8]>",
      "ENTRY e {\n  p = f32[8] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}]>\"}\n"
      "  ROOT n = f32[8] negate(p)\n"
      "  g0 = () custom-call(p), custom_call_target=\"xla.sdy.ShardingGroup\", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding_group_id=\"3 : i64\"}\n"
      "  g1 = () custom-call(n), custom_call_target=\"xla.sdy.ShardingGroup\", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding_group_id=\"3 : i64\"}\n}\n");
  assert_sharding(m, "p", "{devices=[8]<=[8] shard_as 3}");
  assert_sharding(m, "n", "{unknown shard_as 3}");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), 0);
  hk_module_free(m);
}
END_TEST

static char fixture_dir[] = "fixtures", hlokit[PATH_MAX];   /* tests run from the top of the tree */

static void find_fixtures(void) { hk_test_build_path("hlokit", hlokit, sizeof hlokit); }

static hk_module *read_fixture(const char *name) {
  find_fixtures();
  char path[PATH_MAX + 128];
  snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
  char *t = hk_test_slurp(path);
  ck_assert_ptr_nonnull(t);
  hk_module *m = hk_test_parse(t);
  free(t);
  return m;
}

START_TEST(manual_computation_lowered) {
  hk_module *m = read_fixture("sdy_shard_map.hlo");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  ck_assert_ptr_null(hk_module_find_computation(m, "xla.sdy.manual_computation_body.1"));
  int f2s = 0, s2f = 0;
  for (hk_instr *i = m->entry->first; i; i = i->next) {
    if (i->opcode != HK_OP_CUSTOM_CALL) continue;
    const char *t = i->attrs->custom_call_target;
    char *s = hk_sharding_to_string(i->sharding);
    if (!strcmp(t, "SPMDFullToShardShape")) {
      f2s++;
      ck_assert_str_eq(s, "{manual}");   /* all mesh axes are manual */
      ck_assert_int_eq(i->operands[0]->opcode, HK_OP_COPY);
    } else {
      ck_assert_str_eq(t, "SPMDShardToFullShape");
      s2f++;
      ck_assert_str_eq(s, "{devices=[4,1,2]<=[8] last_tile_dim_replicate}");
      ck_assert_int_eq(i->shape->dims[0], 8);
    }
    free(s);
  }
  ck_assert_int_eq(f2s, 2);
  ck_assert_int_eq(s2f, 1);
  assert_sharding(m, "dot.0", "{manual}");
  assert_sharding(m, "copy", "{devices=[4,2]<=[8]}");
  hk_module_free(m);
}
END_TEST

START_TEST(partly_manual_computation_has_subgroups) {
  hk_module *m = import_text(
      "mesh = #sdy.mesh<[\"x\"=2, \"y\"=4]>",
      "body.1 {\n  a = f32[4,8] parameter(0)\n  ROOT n = f32[4,8] negate(a)\n}\n\n"
      "xla.sdy.manual_computation_body.7 {\n  a = f32[4,8] parameter(0)\n  ROOT n = f32[4,8] negate(a)\n}\n\n"
      "ENTRY e {\n  p = f32[8,8] parameter(0)\n"
      "  g = f32[4,8] custom-call(p), custom_call_target=\"xla.sdy.GlobalToLocalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {\\\"y\\\"}]>]>\",xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\"}\n"
      "  c = f32[4,8] call(g), to_apply=xla.sdy.manual_computation_body.7\n"
      "  ROOT l = f32[8,8] custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", custom_call_has_side_effect=true, "
      "frontend_attributes={xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\",xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {}]>]>\"}\n}\n");
  /* in the body: "y" still shards dim 1, "x" is the manual subgroup */
  assert_sharding(m, "g.1", "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}");
  assert_sharding(m, "n.2", "{devices=[1,1,2,4]<=[8] last_tile_dims={manual, replicated}}");
  hk_module_free(m);
}
END_TEST

START_TEST(nested_manual_computations_take_parent_axes) {
  hk_module *m = read_fixture("sdy_nested_shard_map.hlo");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  ck_assert_int_eq(m->n_computations, 1);
  /* outer region: "a" manual; inner region: "b" then its parent's "a" */
  assert_sharding(m, "g.3", "{devices=[1,1,2,8]<=[16] last_tile_dims={manual, replicated}}");
  assert_sharding(m, "copy.3", "{devices=[1,2,2,4]<=[2,2,4]T(1,0,2) last_tile_dims={manual, replicated}}");
  assert_sharding(m, "g.4", "{devices=[1,1,4,4]<=[2,2,4]T(1,0,2) last_tile_dims={manual, replicated}}");
  assert_sharding(m, "mul.2", "{devices=[1,1,4,4]<=[2,2,4]T(1,0,2) last_tile_dims={manual, replicated}}");
  assert_sharding(m, "l.4", "{devices=[2,1,8]<=[16] last_tile_dim_replicate}");
  hk_module_free(m);
}
END_TEST

/* Older XLA put the in/out shardings and manual axes on the call; a
 * manual computation without operands has no GlobalToLocalShape. */
START_TEST(manual_computation_without_operands_and_call_attributes) {
  hk_module *m = import_text(
      "mesh_0 = #sdy.mesh<[\"a\"=4, \"b\"=2]>",
      "xla.sdy.manual_computation_body_6 {\n  ROOT c = s64[2] constant({2, 3})\n}\n\n"
      "ENTRY e {\n"
      "  k = s64[2] call(), to_apply=xla.sdy.manual_computation_body_6, "
      "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[]>\",xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"b\\\"}>\","
      "xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh_0, [{\\\"b\\\"}]>]>\"}\n"
      "  ROOT l = s64[4] custom-call(k), custom_call_target=\"xla.sdy.LocalToGlobalShape\", custom_call_has_side_effect=true\n}\n");
  ck_assert_int_eq(m->n_computations, 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_CALL), 0);
  /* the constant is local, replicated over the free axis "a" */
  assert_sharding(m, "c.1", "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dims={manual, replicated}}");
  hk_instr *root = m->entry->root;
  ck_assert_str_eq(root->attrs->custom_call_target, "SPMDShardToFullShape");
  char *s = hk_sharding_to_string(root->sharding);
  ck_assert_str_eq(s, "{devices=[2,4]<=[4,2]T(1,0) last_tile_dim_replicate}");
  free(s);
  hk_module_free(m);
}
END_TEST

static void assert_import_fails(const char *meshes, const char *entry, const char *needle) {
  char t[4096];
  snprintf(t, sizeof t, "HloModule m, frontend_attributes={xla.sdy.meshes={%s}}\n\n%s", meshes, entry);
  hk_module *m = hk_test_parse(t);
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "sdy-round-trip-import", NULL, &err);
  bool changed;
  hk_status *st = hk_pass_run(p, m, NULL, &changed);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, needle), "message '%s' lacks '%s'", st->message, needle);
  hk_status_free(st);
  hk_pass_destroy(p);
  hk_module_free(m);
}

START_TEST(bad_text_reported_with_instruction_and_offset) {
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]>",
                      param_sharded("f32[8]", "#sdy.sharding<@mesh, [{\\\"x\\\"]>"),
                      "instruction p: xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\"x\"]>\": at offset 26: expected '}'");
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]>",
                      param_sharded("f32[8]", "#sdy.sharding<@mesh, [{\\\"z\\\"}]>"),
                      "axis \"z\" is not in the mesh");
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]>",
                      param_sharded("f32[8]", "#sdy.sharding<@mesh, [{\\\"x\\\":(2)3}]>"),
                      "does not divide");
  /* x:(1)2 and x:(3)2 of a 6 do not overlap, but do not nest (hk_sharding_from_mesh) */
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=6]>",
                      param_sharded("f32[6,6]", "#sdy.sharding<@mesh, [{\\\"x\\\":(1)2}, {\\\"x\\\":(3)2}]>"),
                      "sub-axes of axis 0 cannot coexist");
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]", param_sharded("f32[8]", "#sdy.sharding<@mesh, [{}]>"),
                      "module attribute xla.sdy.meshes");
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]>",
                      param_sharded("f32[8,8]", "#sdy.sharding<@mesh, [{}]>"),
                      "1 dimension shardings for a rank-2 value");
  /* a group custom call must have no users */
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=8]>",
                      "ENTRY e {\n  p = f32[8] parameter(0)\n"
                      "  ROOT g = () custom-call(p), custom_call_target=\"xla.sdy.ShardingGroup\", "
                      "frontend_attributes={xla.sdy.sharding_group_id=\"1 : i64\"}\n}\n",
                      "instruction g: xla.sdy.ShardingGroup CustomCallOp should have no uses.");
  /* a body whose local shape does not fit the sharding */
  assert_import_fails("mesh = #sdy.mesh<[\"x\"=4]>",
                      "xla.sdy.manual_computation_body.1 {\n  ROOT a = f32[8,8] parameter(0)\n}\n\n"
                      "ENTRY e {\n  x = f32[8,8] parameter(0)\n"
                      "  g = f32[8,8] custom-call(x), custom_call_target=\"xla.sdy.GlobalToLocalShape\", "
                      "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\"}, {}]>]>\",xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\"}\n"
                      "  c = f32[8,8] call(g), to_apply=xla.sdy.manual_computation_body.1\n"
                      "  ROOT l = f32[8,8] custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", "
                      "frontend_attributes={xla.sdy.out_shardings=\"#sdy.sharding_per_value<[<@mesh, [{}, {}]>]>\",xla.sdy.manual_axes=\"#sdy<manual_axes{\\\"x\\\"}>\"}\n}\n",
                      "instruction g: operand 0: local shape f32[8,8]{1,0} is not global shape f32[8,8]{1,0} split");
}
END_TEST

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Escapes quotes and backslashes of raw text for an HLO string. */
static void hlo_escape(const char *raw, char *out, size_t cap) {
  size_t w = 0;
  for (const char *q = raw; *q && w + 3 < cap; q++) {
    if (*q == '"' || *q == '\\') out[w++] = '\\';
    out[w++] = *q;
  }
  out[w] = 0;
}

/* Runs the import on a module built from the templates with one raw
 * Shardy text in it: it succeeds or fails with a message, never more. */
static bool import_survives(const char *meshes_raw, const char *sharding_raw, const char *axes_raw) {
  char meshes[512], sharding[1024], axes[512], t[8192];
  hlo_escape(meshes_raw, meshes, sizeof meshes);
  hlo_escape(sharding_raw, sharding, sizeof sharding);
  hlo_escape(axes_raw, axes, sizeof axes);
  snprintf(t, sizeof t,
           "HloModule m, frontend_attributes={xla.sdy.meshes=\"%s\"}\n\n"
           "xla.sdy.manual_computation_body.1 {\n  ROOT a = f32[2,8] parameter(0)\n}\n\n"
           "ENTRY e {\n  x = f32[8,8] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding%s\"}\n"
           "  g = f32[2,8] custom-call(x), custom_call_target=\"xla.sdy.GlobalToLocalShape\", "
           "frontend_attributes={xla.sdy.in_shardings=\"#sdy.sharding_per_value<[%s]>\",xla.sdy.manual_axes=\"%s\"}\n"
           "  c = f32[2,8] call(g), to_apply=xla.sdy.manual_computation_body.1\n"
           "  ROOT l = f32[8,8] custom-call(c), custom_call_target=\"xla.sdy.LocalToGlobalShape\", "
           "frontend_attributes={xla.sdy.out_shardings=\"#sdy.sharding_per_value<[%s]>\",xla.sdy.manual_axes=\"%s\"}\n}\n",
           meshes, sharding, sharding, axes, sharding, axes);
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(t, strlen(t), "mutated", &m);
  if (!st) {
    hk_status *err = NULL;
    hk_pass *p = hk_registry_create_pass(reg, "sdy-round-trip-import", NULL, &err);
    bool changed;
    st = hk_pass_run(p, m, NULL, &changed);
    ck_assert(!st || (st->message && *st->message));
    hk_pass_destroy(p);
  }
  bool ok = !st;
  hk_status_free(st);
  hk_module_free(m);
  return ok;
}

/* Every one-character deletion or replacement of valid texts. */
START_TEST(mutated_texts_never_crash) {
  const char *meshes = "{mesh = #sdy.mesh<[\"x\"=4, \"y\"=4], "
                       "device_ids=[15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]>}";
  const char *sharding = "<@mesh, [{\"x\", ?}p1, {\"y\":(1)2}], replicated={\"y\":(2)2}>";
  const char *axes = "#sdy<manual_axes{\"x\"}>";
  const char repl[] = "{}[]<>,?:()=@p09x\"\\ #";
  const char *texts[3] = {meshes, sharding, axes};
  ck_assert_msg(import_survives(meshes, sharding, axes), "base texts do not import");
  int budget = hk_test_iterations(100000), done = 0;
  for (int w = 0; w < 3; w++) {
    size_t n = strlen(texts[w]);
    for (size_t at = 0; at < n && done < budget; at++)
      for (size_t r = 0; r <= sizeof repl - 1 && done < budget; r++, done++) {
        char mut[512];
        snprintf(mut, sizeof mut, "%s", texts[w]);
        if (r == sizeof repl - 1) memmove(mut + at, mut + at + 1, n - at);   /* delete */
        else mut[at] = repl[r];
        import_survives(w == 0 ? mut : meshes, w == 1 ? mut : sharding, w == 2 ? mut : axes);
      }
  }
  ck_assert_int_gt(done, 0);
}
END_TEST

/* The frontend_attributes={...} of a printed module that hold Shardy
 * text, sorted, one a line (instruction names may differ). */
static char *attr_texts(const hk_module *m) {
  char *t = hk_module_to_string(m, HK_PRINT_LONG);
  char *items[256];
  int n = 0;
  for (char *p = t; (p = strstr(p, "frontend_attributes={")) && n < 256;) {
    char *e = strchr(p, '}');
    while (e[1] == '}') e++;
    if (memmem(p, (size_t)(e - p), "xla.sdy.", 8) || memmem(p, (size_t)(e - p), "inlineable", 10))
      items[n++] = strndup(p, (size_t)(e - p + 1));
    p = e;
  }
  qsort(items, (size_t)n, sizeof *items, cmp_str);
  hk_buf b;
  hk_buf_init(&b);
  for (int k = 0; k < n; k++) {
    hk_buf_printf(&b, "%s\n", items[k]);
    free(items[k]);
  }
  hk_buf_put(&b, "", 1);
  free(t);
  return b.data;
}

static void assert_round_trip(const char *fixture) {
  hk_module *a = read_fixture(fixture), *b = read_fixture(fixture);
  ck_assert(hk_test_run_pass(reg, b, "sdy-round-trip-import", "keep=true"));
  char *imported = hk_module_to_string(b, HK_PRINT_LONG);
  ck_assert(!strstr(imported, "xla.sdy.sharding=") && !strstr(imported, "xla.sdy.meshes"));
  free(imported);
  ck_assert(hk_test_run_pass(reg, b, "sdy-round-trip-export", NULL));
  char *want = attr_texts(a), *got = attr_texts(b);
  ck_assert_int_gt(strlen(want), 0);
  ck_assert_str_eq(got, want);
  free(want);
  free(got);
  hk_module_free(a);
  hk_module_free(b);
}

START_TEST(export_after_import_is_identity_on_attributes) {
  assert_round_trip("sdy_shard_map.hlo");
  assert_round_trip("sdy_mlp.hlo");
  assert_round_trip("sdy_nested_shard_map.hlo");
  assert_round_trip("sdy_two_results.hlo");
}
END_TEST

/* XLA's import removes the round-trip attributes it reads (import_shardy_
 * attrs.cc) and ShardyXLA the module's meshes: by default nothing Shardy is
 * left in the output; keep=true keeps them under hlokit.sdy.* only. */
static void assert_import_leaves_nothing(const char *fixture) {
  hk_module *m = read_fixture(fixture);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  char *out = hk_module_to_string(m, HK_PRINT_LONG);
  ck_assert_msg(!strstr(out, "xla.sdy.") && !strstr(out, "hlokit.sdy."), "%s: %s", fixture, out);
  free(out);
  hk_module_free(m);
  m = read_fixture(fixture);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", "keep=true"));
  out = hk_module_to_string(m, HK_PRINT_LONG);
  ck_assert(strstr(out, "hlokit.sdy.meshes") && !strstr(out, "xla.sdy.meshes"));
  free(out);
  hk_module_free(m);
}

START_TEST(import_removes_round_trip_attributes) {
  assert_import_leaves_nothing("sdy_shard_map.hlo");
  assert_import_leaves_nothing("sdy_mlp.hlo");
  assert_import_leaves_nothing("sdy_nested_shard_map.hlo");
  assert_import_leaves_nothing("sdy_two_results.hlo");
}
END_TEST

START_TEST(export_derives_changed_shardings) {
  hk_module *m = import_text("mesh = #sdy.mesh<[\"x\"=4, \"y\"=2]>",
                             param_sharded("f32[8,16]", "#sdy.sharding<@mesh, [{\\\"x\\\"}, {}]>"));
  hk_instr *p = hk_test_find(m, "p");
  /* y on dim 0, x on dim 1 */
  p->sharding = hk_sharding_canonical(m, hk_sharding_intern(m, &(hk_sharding){
      .kind = HK_SHARDING_TILED, .n_tile_dims = 2, .tile_dims = (int64_t[]){2, 4},
      .iota = &(hk_iota){2, (int64_t[]){2, 4}, 2, (int64_t[]){4, 2}, (int32_t[]){1, 0}}}));
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  const char *text = sdy_attr(p, "xla.sdy.sharding");
  ck_assert_str_eq(text, "#sdy.sharding<@mesh, [{\"y\"}, {\"x\"}]>");
  hk_module_free(m);
  /* a single-device sharding goes over the maximal mesh of that device */
  m = import_text("mesh = #sdy.mesh<[\"x\"=8]>, maximal_mesh_3 = #sdy.mesh<[], device_ids=[3]>",
                  param_sharded("f32[8]", "#sdy.sharding<@mesh, [{\\\"x\\\"}]>"));
  p = hk_test_find(m, "p");
  p->sharding = hk_sharding_maximal(m, 3);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  ck_assert_str_eq(sdy_attr(p, "xla.sdy.sharding"), "#sdy.sharding<@maximal_mesh_3, [{}]>");
  hk_module_free(m);
  /* a device order the mesh cannot give is refused, naming the instruction */
  m = import_text("mesh = #sdy.mesh<[\"x\"=8]>",
                  param_sharded("f32[8]", "#sdy.sharding<@mesh, [{\\\"x\\\"}]>"));
  p = hk_test_find(m, "p");
  p->sharding = hk_sharding_tiled(m, 1, (int64_t[]){8}, (int64_t[]){7, 6, 5, 4, 3, 2, 1, 0}, false);
  hk_status *err = NULL;
  hk_pass *ex = hk_registry_create_pass(reg, "sdy-round-trip-export", NULL, &err);
  bool changed;
  hk_status *st = hk_pass_run(ex, m, NULL, &changed);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "instruction p: sharding {devices=[8]7,6,5,4,3,2,1,0} is not expressible"));
  hk_status_free(st);
  hk_pass_destroy(ex);
  hk_module_free(m);
}
END_TEST

/* import -> propagation -> partitioning -> check, through the CLI, which
 * imports by itself and says so. */
static void assert_checks_equal(const char *fixture, int parts) {
  find_fixtures();
  char cmd[PATH_MAX * 4];
  snprintf(cmd, sizeof cmd,
           "%s check %s/%s --num-partitions=%d "
           "--passes='@sdy-import,spmd-partitioning{allow_module_signature_change=true}' --json "
           "> %s.out 2> %s.err", hlokit, fixture_dir, fixture, parts, fixture, fixture);
  ck_assert_int_eq(system(cmd), 0);
  char out[PATH_MAX], err[PATH_MAX];
  snprintf(out, sizeof out, "%s.out", fixture);
  snprintf(err, sizeof err, "%s.err", fixture);
  char *o = hk_test_slurp(out), *e = hk_test_slurp(err);
  ck_assert(o && e);
  ck_assert_ptr_nonnull(strstr(o, "\"equal\": true"));
  ck_assert_ptr_nonnull(strstr(e, "running sdy-round-trip-import"));
  free(o);
  free(e);
  unlink(out);
  unlink(err);
}

/* The CLI's own import removes the texts, but keeps them when its pipeline
 * runs sdy-round-trip-export (which then writes the Shardy form back). */
static void assert_cli_output(const char *passes, bool want_shardy) {
  find_fixtures();
  char cmd[PATH_MAX * 4];
  snprintf(cmd, sizeof cmd, "%s opt %s/sdy_shard_map.hlo %s%s > cli_sdy.out 2>/dev/null",
           hlokit, fixture_dir, passes ? "--passes=" : "", passes ? passes : "");
  ck_assert_int_eq(system(cmd), 0);
  char *o = hk_test_slurp("cli_sdy.out");
  ck_assert_ptr_nonnull(o);
  ck_assert_msg(!strstr(o, "hlokit.sdy."), "%s", o);
  ck_assert_msg(!strstr(o, "xla.sdy.meshes") == !want_shardy, "%s", o);
  free(o);
  unlink("cli_sdy.out");
}

START_TEST(cli_import_keeps_texts_only_for_an_export) {
  assert_cli_output(NULL, false);
  assert_cli_output("hlo-dce", false);
  assert_cli_output("hlo-dce,sdy-round-trip-export", true);
}
END_TEST

/* xla.sdy.use_tuple_args (ShardyXLA's use_tuple_args, its TestUseTuplesTrue
 * rule): the entry takes one tuple of the flattened parameters; aliasing,
 * donors and the entry layout follow; the attribute goes. */
START_TEST(use_tuple_args_wraps_the_parameters) {
  hk_module *m = hk_test_parse(
      "HloModule f, buffer_donor={ (1, {}) }, input_output_alias={ {}: (2, {}, must-alias) }, "
      "entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0}, f32[8,4]{1,0})->f32[8,4]{1,0}}, "
      "num_partitions=8, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}, "
      "xla.sdy.use_tuple_args=\"t\"}\n\nENTRY e {\n"
      "  a = f32[8,16] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}, {}]>\"}\n"
      "  b = f32[16,4] parameter(1)\n  c = f32[8,4] parameter(2)\n"
      "  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT r = f32[8,4] add(d, c)\n}\n");
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  ck_assert_int_eq(m->entry->n_params, 1);
  hk_instr *arg = m->entry->params[0];
  ck_assert(hk_shape_is_tuple(arg->shape) && arg->shape->n_tuple == 3);
  assert_sharding(m, hk_test_find(m, "a")->operands[0]->name,
                  "{{devices=[8,1]<=[8]}, {replicated}, {replicated}}");
  ck_assert_int_eq(hk_test_find(m, "c")->opcode, HK_OP_GET_TUPLE_ELEMENT);
  ck_assert_int_eq(hk_instr_tuple_index(hk_test_find(m, "c")), 2);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_msg(strstr(out, "input_output_alias={ {}: (0, {2}, must-alias) }") &&
                    strstr(out, "buffer_donor={ (0, {1}) }") &&
                    strstr(out, "entry_computation_layout={((f32[8,16]{1,0}, f32[16,4]{1,0}, "
                                "f32[8,4]{1,0}))->f32[8,4]{1,0}}") &&
                    !strstr(out, "use_tuple_args"),
                "%s", out);
  free(out);
  hk_module_free(m);
}
END_TEST

/* ... and the export undoes it: import{keep=true} -> export gives back the
 * flat entry with its names, shardings, aliasing, donors, layout and the
 * attribute, so the module prints as it came. */
START_TEST(use_tuple_args_round_trips) {
  const char *text =
      "HloModule f, buffer_donor={ (1, {}) }, input_output_alias={ {0}: (2, {}, must-alias), {1}: (0, {}, may-alias) }, "
      "entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0}, f32[8,4]{1,0})->(f32[8,4]{1,0}, f32[8,16]{1,0})}, "
      "num_partitions=8, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=8]>}, "
      "xla.sdy.use_tuple_args=\"t\"}\n\nENTRY e {\n"
      "  a = f32[8,16] parameter(0), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\", ?}, {}]>\"}\n"
      "  b = f32[16,4] parameter(1)\n"
      "  c = f32[8,4] parameter(2), frontend_attributes={xla.sdy.sharding=\"#sdy.sharding<@mesh, [{}, {\\\"x\\\":(1)2}]>\"}\n"
      "  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  r = f32[8,4] add(d, c)\n  ROOT t = (f32[8,4], f32[8,16]) tuple(r, a)\n}\n";
  hk_module *want = hk_test_parse(text), *m = hk_test_parse(text);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", "keep=true"));
  ck_assert_int_eq(m->entry->n_params, 1);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));
  ck_assert_int_eq(m->entry->n_params, 3);
  ck_assert_str_eq(m->entry->params[0]->name, "a");
  ck_assert_str_eq(m->entry->params[2]->name, "c");
  ck_assert_ptr_eq(hk_test_find(m, "r")->operands[1], m->entry->params[2]);
  ck_assert_ptr_null(m->entry->params[1]->sharding);   /* none given, none made up */
  char *a = hk_module_to_string(want, HK_PRINT_SHORT), *b = hk_module_to_string(m, HK_PRINT_SHORT);
  *strchr(a, '\n') = *strchr(b, '\n') = 0;   /* the module line: config and attributes */
  ck_assert_str_eq(b, a);
  free(a);
  free(b);
  a = attr_texts(want);
  b = attr_texts(m);
  ck_assert_str_eq(b, a);
  free(a);
  free(b);
  hk_module_free(want);
  hk_module_free(m);
  /* without keep the attribute is gone, and the export leaves the tuple */
  m = hk_test_parse(text);
  ck_assert(hk_test_run_pass(reg, m, "sdy-round-trip-import", NULL));
  ck_assert(!hk_test_run_pass(reg, m, "sdy-round-trip-export", NULL));   /* nothing kept */
  ck_assert_int_eq(m->entry->n_params, 1);
  hk_module_free(m);
}
END_TEST

START_TEST(fixtures_partition_and_check_equal) {
  assert_checks_equal("sdy_shard_map.hlo", 8);
  assert_checks_equal("sdy_mlp.hlo", 8);
  assert_checks_equal("sdy_nested_shard_map.hlo", 16);
  assert_checks_equal("sdy_two_results.hlo", 4);
}
END_TEST

/* The partitioned MLP's entry takes local shards where Shardy shards a
 * parameter: x [{"data"}, {}] of f32[16,32] over data=2 is f32[8,32],
 * b1 [{"model":(1)2}] of f32[64] is f32[32]. */
START_TEST(partitioned_entry_takes_local_shards) {
  hk_registry *all = hk_registry_new();
  const char *plugins[] = {"sdy", "propagation", "spmd", "barriers"};
  for (int k = 0; k < 4; k++) {
    char path[4096];
    hk_test_plugin_path(plugins[k], path, sizeof path);
    ck_assert_ok(hk_plugin_load(all, path, HK_ORIGIN_EXPLICIT));
  }
  hk_module *m = read_fixture("sdy_mlp.hlo");
  hk_test_run_pass(all, m, "sdy-round-trip-import", NULL);
  hk_test_run_pass(all, m, "sharding-propagation", "is_spmd=true");
  hk_test_run_pass(all, m, "spmd-partitioning", "allow_module_signature_change=true");
  const hk_shape *x = m->entry->params[0]->shape, *b1 = m->entry->params[2]->shape;
  ck_assert_int_eq(x->dims[0], 8);
  ck_assert_int_eq(x->dims[1], 32);
  ck_assert_int_eq(b1->dims[0], 32);
  hk_module_free(m);
  hk_registry_free(all);
}
END_TEST

static Suite *sdy_suite(void) {
  Suite *s = suite_create("sdy");
  TCase *tc = tcase_create("sdy");
  tcase_add_unchecked_fixture(tc, load, unload);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, mesh_axes_give_iota_tiles);
  tcase_add_test(tc, xla_export_known_answers);
  tcase_add_test(tc, xla_manual_region_known_answers);
  tcase_add_test(tc, unreduced_axes_known_answers);
  tcase_add_test(tc, sub_axis_splits_the_axis);
  tcase_add_test(tc, device_ids_and_maximal_mesh);
  tcase_add_test(tc, open_dims_priorities_and_replicated_axes);
  tcase_add_test(tc, per_value_and_result_shardings);
  tcase_add_test(tc, sharding_group_becomes_shard_as);
  tcase_add_test(tc, empty_tuple_and_fully_open_constraint);
  tcase_add_test(tc, import_mhlo_shardings_keeps_hlo_shardings);
  tcase_add_test(tc, result_sharding_on_a_manual_result_goes_on_a_copy);
  tcase_add_test(tc, manual_computation_lowered);
  tcase_add_test(tc, partly_manual_computation_has_subgroups);
  tcase_add_test(tc, nested_manual_computations_take_parent_axes);
  tcase_add_test(tc, manual_computation_without_operands_and_call_attributes);
  tcase_add_test(tc, bad_text_reported_with_instruction_and_offset);
  tcase_add_test(tc, export_after_import_is_identity_on_attributes);
  tcase_add_test(tc, export_derives_changed_shardings);
  tcase_add_test(tc, import_removes_round_trip_attributes);
  tcase_add_test(tc, cli_import_keeps_texts_only_for_an_export);
  tcase_add_test(tc, use_tuple_args_wraps_the_parameters);
  tcase_add_test(tc, use_tuple_args_round_trips);
  tcase_add_test(tc, fixtures_partition_and_check_equal);
  tcase_add_test(tc, partitioned_entry_takes_local_shards);
  tcase_add_test(tc, mutated_texts_never_crash);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(sdy_suite)
