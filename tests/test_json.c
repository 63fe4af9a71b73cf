/* test_json.c - Check suite for the JSON form of modules: known answers, lossless round trips, errors, fuzzing, conformance. */
#include <json-c/json.h>
#include <math.h>

#include "testutil.h"

/* ---- helpers ----------------------------------------------------------------- */

static char *to_json(const hk_module *m, bool pretty) {
  hk_buf b;
  hk_buf_init(&b);
  hk_module_to_json(m, pretty, &b);
  return b.data;   /* NUL-terminated, caller frees */
}

static json_object *export_doc(const hk_module *m) {
  char *text = to_json(m, false);
  json_object *doc = json_tokener_parse(text);
  free(text);
  ck_assert_ptr_nonnull(doc);
  return doc;
}

/* doc at a path like "computations/1/instructions/0/shape" ('/' separated). */
static json_object *at(json_object *doc, const char *path) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  json_object *v = doc;
  for (char *seg = strtok(buf, "/"); seg && v; seg = strtok(NULL, "/")) {
    if (json_object_is_type(v, json_type_array))
      v = json_object_array_get_idx(v, (size_t)atoi(seg));
    else if (!json_object_object_get_ex(v, seg, &v))
      v = NULL;
  }
  ck_assert_msg(v != NULL, "no value at %s", path);
  return v;
}

static const char *str_at(json_object *doc, const char *path) {
  return json_object_get_string(at(doc, path));
}

/* The JSON text of the value at path, compact (e.g. "[1,0]"). */
static const char *text_at(json_object *doc, const char *path) {
  return json_object_to_json_string_ext(at(doc, path),
                                        JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Imports JSON text and expects an error whose message contains `want`. */
static void expect_error(const char *json, const char *want) {
  hk_module *m = NULL;
  hk_status *st = hk_module_from_json(json, strlen(json), "bad.json", &m);
  ck_assert_msg(st != NULL, "no error for %s", json);
  ck_assert_ptr_null(m);
  ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
  ck_assert_msg(strstr(st->message, want), "message '%s' lacks '%s'", st->message, want);
  hk_status_free(st);
}

/* ---- a module built with the IR API --------------------------------------------- */

static hk_instr *parameter(hk_computation *c, int64_t n, const hk_shape *s, const char *name) {
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, name);
  hk_instr_attrs(p)->parameter_number = n;
  hk_computation_register_param(c, p);
  return p;
}

static hk_module *build_api_module(void) {
  hk_module *m = hk_module_new("known");
  const hk_shape *scalar = hk_shape_scalar(m, HK_F32);
  hk_computation *add = hk_computation_new(m, "add");
  hk_instr *x = parameter(add, 0, scalar, "x"), *y = parameter(add, 1, scalar, "y");
  hk_instr *xy[] = {x, y};
  hk_computation_set_root(add, hk_instr_new(add, HK_OP_ADD, scalar, 2, xy, "sum"));

  hk_computation *main_c = hk_computation_new(m, "main");
  int64_t dims[] = {4, 8};
  hk_instr *p0 = parameter(main_c, 0, hk_shape_array(m, HK_F32, 2, dims), "p0");
  const hk_sharding *sh;
  ck_assert_ok(hk_sharding_parse(m, "{devices=[2,1]0,1}", 18, &sh, NULL));
  p0->sharding = sh;
  hk_metadata *md = hk_alloc(m, sizeof *md);
  md->op_name = hk_intern_cstr(m, "jit(f)/x");
  md->source_line = 7;
  hk_instr_attrs(p0)->metadata = md;

  int64_t three = 3;
  hk_instr *k = hk_instr_new(main_c, HK_OP_CONSTANT, hk_shape_array(m, HK_F32, 1, &three), 0, NULL, "k");
  hk_literal *lit = hk_literal_new(m, k->shape);
  hk_literal_set_f64(lit, 0, 1.5);
  hk_literal_set_f64(lit, 1, -0.0);
  hk_literal_set_f64(lit, 2, NAN);
  hk_instr_attrs(k)->literal = lit;

  hk_instr *zero = hk_instr_new(main_c, HK_OP_CONSTANT, scalar, 0, NULL, "zero");
  hk_instr_attrs(zero)->literal = hk_literal_new(m, scalar);
  hk_instr *ops[] = {p0, zero};
  hk_instr *red = hk_instr_new(main_c, HK_OP_REDUCE, hk_shape_array(m, HK_F32, 1, dims), 2, ops, "red");
  int64_t one = 1;
  hk_instr_set_dims(red, 1, &one);
  hk_instr_set_called(red, 1, &add);
  hk_instr_add_control_dep(k, red);
  hk_computation_set_root(main_c, red);
  hk_module_set_entry(m, main_c);
  m->config.num_partitions = 2;
  m->config.use_spmd_partitioning = true;
  return m;
}

START_TEST(test_export_known_answer) {
  hk_module *m = build_api_module();
  json_object *doc = export_doc(m);
  ck_assert_str_eq(str_at(doc, "name"), "known");
  ck_assert_str_eq(str_at(doc, "entry"), "main");
  ck_assert_int_eq(json_object_get_int(at(doc, "config/num_partitions")), 2);
  ck_assert(json_object_get_boolean(at(doc, "config/use_spmd_partitioning")));
  ck_assert_str_eq(str_at(doc, "computations/0/name"), "add");
  ck_assert(!json_object_get_boolean(at(doc, "computations/0/is_entry")));
  ck_assert_str_eq(str_at(doc, "computations/0/root"), "sum");
  ck_assert_str_eq(text_at(doc, "computations/0/instructions/2/operands"), "[\"x\",\"y\"]");
  ck_assert(json_object_get_boolean(at(doc, "computations/1/is_entry")));
  ck_assert_str_eq(str_at(doc, "computations/1/instructions/0/opcode"), "parameter");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/0/shape"),
                   "{\"element_type\":\"f32\",\"dims\":[4,8],\"layout\":{\"minor_to_major\":[1,0]}}");
  ck_assert_int_eq(json_object_get_int(at(doc, "computations/1/instructions/0/parameter_number")), 0);
  ck_assert_str_eq(str_at(doc, "computations/1/instructions/0/sharding"), "{devices=[2,1]0,1}");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/0/metadata"),
                   "{\"op_name\":\"jit(f)/x\",\"source_line\":7}");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/1/literal"), "[1.5,-0.0,\"nan\"]");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/2/literal"), "0");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/3/dimensions"), "[1]");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/3/called_computations"), "[\"add\"]");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/3/control_predecessors"), "[\"k\"]");
  ck_assert_str_eq(text_at(doc, "computations/1/instructions/3/shape/dims"), "[4]");
  json_object_put(doc);
  hk_module_free(m);
}
END_TEST

/* export -> import -> export gives the same JSON, and the IR agrees. */
START_TEST(test_api_module_json_fixed_point) {
  hk_module *m = build_api_module();
  char *a = to_json(m, true);
  hk_module *m2 = NULL;
  ck_assert_ok(hk_module_from_json(a, strlen(a), "a.json", &m2));
  char *b = to_json(m2, true);
  ck_assert_str_eq(a, b);
  hk_computation *c = m2->entry;
  ck_assert_str_eq(c->name, "main");
  ck_assert_int_eq(c->n_params, 1);
  ck_assert_str_eq(c->params[0]->name, "p0");
  ck_assert_str_eq(c->root->name, "red");
  ck_assert_int_eq(c->root->n_operands, 2);
  ck_assert_ptr_eq(c->root->called[0], m2->computations[0]);
  ck_assert_int_eq(c->first->n_users, 1);
  ck_assert(hk_shape_equal(c->first->shape, m->entry->first->shape));
  const hk_literal *lit = c->first->next->attrs->literal;
  ck_assert(hk_literal_get_f64(lit, 0) == 1.5);
  ck_assert(signbit(hk_literal_get_f64(lit, 1)));
  ck_assert(isnan(hk_literal_get_f64(lit, 2)));
  free(a);
  free(b);
  hk_module_free(m2);
  hk_module_free(m);
}
END_TEST

/* ---- text -> module -> JSON -> module -> text ------------------------------------- */

/* Returns NULL when the round trip is exact, else a malloc'ed description. */
static char *roundtrip_problem(hk_module *m) {
  char *json = to_json(m, true);
  hk_module *m2 = NULL;
  hk_status *st = hk_module_from_json(json, strlen(json), "rt.json", &m2);
  char *problem = NULL;
  if (st) {
    problem = strdup(st->message);
    hk_status_free(st);
    free(json);
    return problem;
  }
  for (int form = HK_PRINT_LONG; form <= HK_PRINT_SHORT && !problem; form++) {
    char *a = hk_module_to_string(m, (hk_print_form)form);
    char *b = hk_module_to_string(m2, (hk_print_form)form);
    if (strcmp(a, b)) {
      size_t k = 0;
      while (a[k] && a[k] == b[k]) k++;
      size_t from = k > 60 ? k - 60 : 0;
      if (asprintf(&problem, "%s form differs at byte %zu:\n  text: %.120s\n  json: %.120s",
                   form == HK_PRINT_LONG ? "long" : "short", k, a + from, b + from) < 0)
        problem = NULL;
    }
    free(a);
    free(b);
  }
  char *again = to_json(m2, true);
  if (!problem && strcmp(json, again)) problem = strdup("JSON export of the import differs");
  free(again);
  free(json);
  hk_module_free(m2);
  return problem;
}

static void check_roundtrip(const char *hlo) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(hlo, strlen(hlo), "t.hlo", &m));
  char *problem = roundtrip_problem(m);
  ck_assert_msg(problem == NULL, "%s\nmodule:\n%s", problem, hlo);
  hk_module_free(m);
}

START_TEST(test_roundtrip_header_config) {
  check_roundtrip(
      "HloModule cfg, is_scheduled=true, "
      "entry_computation_layout={(f32[2,4]{1,0}, s32[])->(f32[2,4]{0,1}, s32[])}, "
      "allow_spmd_sharding_propagation_to_parameters={true,false}, "
      "allow_spmd_sharding_propagation_to_output={true}, num_partitions=4, replica_count=2, "
      "frontend_attributes={attr_a=\"x\", attr_b=\"y\"}\n\n"
      "ENTRY %main (a: f32[2,4], b: s32[]) -> (f32[2,4], s32[]) {\n"
      "  %a = f32[2,4]{1,0} parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  %b = s32[] parameter(1), sharding={replicated}\n"
      "  %c = f32[2,4]{0,1} copy(f32[2,4]{1,0} %a)\n"
      "  ROOT %t = (f32[2,4]{0,1}, s32[]) tuple(f32[2,4]{0,1} %c, s32[] %b)\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_constants) {
  check_roundtrip(
      "HloModule consts\n\n"
      "ENTRY %main () -> (f32[6], f16[3], bf16[2], c64[2], pred[3], s4[2], u64[2], f64[2], s8[2,0,2], f8e4m3fn[2]) {\n"
      "  %f = f32[6]{0} constant({nan, 7, -nan, -1.5, inf, -inf})\n"
      "  %h = f16[3]{0} constant({0.1, -0, 65504})\n"
      "  %bf = bf16[2]{0} constant({1.5, -3.25})\n"
      "  %c = c64[2]{0} constant({(1, 2), (-0.5, inf)})\n"
      "  %p = pred[3]{0} constant({true, false, true})\n"
      "  %s = s4[2]{0} constant({-8, 7})\n"
      "  %u = u64[2]{0} constant({18446744073709551615, 0})\n"
      "  %d = f64[2]{0} constant({0.1, 1e-300})\n"
      "  %e = s8[2,0,2]{2,1,0} constant({ { /*i0=0*/ }, { /*i0=1*/ } })\n"
      "  %q = f8e4m3fn[2]{0} constant({448, -0.125})\n"
      "  ROOT %t = (f32[6]{0}, f16[3]{0}, bf16[2]{0}, c64[2]{0}, pred[3]{0}, s4[2]{0}, u64[2]{0}, f64[2]{0}, s8[2,0,2]{2,1,0}, f8e4m3fn[2]{0}) "
      "tuple(%f, %h, %bf, %c, %p, %s, %u, %d, %e, %q)\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_shapes_and_layouts) {
  check_roundtrip(
      "HloModule shapes\n\n"
      "ENTRY %main (p: f32[<=4,8], q: (s32[2], token[]), r: bf16[8,128]) -> f32[<=4,8] {\n"
      "  %p = f32[<=4,8]{1,0} parameter(0)\n"
      "  %q = (s32[2]{0}, token[]) parameter(1)\n"
      "  %r = bf16[8,128]{1,0:T(8,128)(2,1)S(1)} parameter(2)\n"
      "  %g = s32[2]{0} get-tuple-element((s32[2]{0}, token[]) %q), index=0\n"
      "  ROOT %n = f32[<=4,8]{1,0} negate(f32[<=4,8]{1,0} %p)\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_windows_and_dnums) {
  check_roundtrip(
      "HloModule conv\n\n"
      "%max (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %m = f32[] maximum(f32[] %x, f32[] %y)\n"
      "}\n\n"
      "ENTRY %main (in: f32[1,8,8,4], k: f32[3,3,4,8], a: f32[2,3,4], b: f32[2,4,5]) -> f32[2,3,5] {\n"
      "  %in = f32[1,8,8,4]{3,2,1,0} parameter(0)\n"
      "  %k = f32[3,3,4,8]{3,2,1,0} parameter(1)\n"
      "  %conv = f32[1,8,8,8]{3,2,1,0} convolution(f32[1,8,8,4]{3,2,1,0} %in, f32[3,3,4,8]{3,2,1,0} %k), "
      "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=1\n"
      "  %init = f32[] constant(-inf)\n"
      "  %rw = f32[1,4,4,8]{3,2,1,0} reduce-window(f32[1,8,8,8]{3,2,1,0} %conv, f32[] %init), "
      "window={size=1x2x2x1 stride=1x2x2x1}, to_apply=%max\n"
      "  %a = f32[2,3,4]{2,1,0} parameter(2)\n"
      "  %b = f32[2,4,5]{2,1,0} parameter(3)\n"
      "  ROOT %dot = f32[2,3,5]{2,1,0} dot(f32[2,3,4]{2,1,0} %a, f32[2,4,5]{2,1,0} %b), "
      "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, "
      "operand_precision={high,default}\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_gather_scatter_slices) {
  check_roundtrip(
      "HloModule gs\n\n"
      "%add (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(f32[] %x, f32[] %y)\n"
      "}\n\n"
      "ENTRY %main (op: f32[8,4], idx: s32[3,1], upd: f32[3,4]) -> f32[8,4] {\n"
      "  %op = f32[8,4]{1,0} parameter(0)\n"
      "  %idx = s32[3,1]{1,0} parameter(1)\n"
      "  %upd = f32[3,4]{1,0} parameter(2)\n"
      "  %g = f32[3,4]{1,0} gather(f32[8,4]{1,0} %op, s32[3,1]{1,0} %idx), offset_dims={1}, "
      "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}, indices_are_sorted=true\n"
      "  %sl = f32[4,2]{1,0} slice(f32[8,4]{1,0} %op), slice={[0:8:2], [1:3]}\n"
      "  %zero = f32[] constant(0)\n"
      "  %pd = f32[10,8]{1,0} pad(f32[8,4]{1,0} %op, f32[] %zero), padding=1_1_0x0_1_1\n"
      "  %i0 = s32[] constant(1)\n"
      "  %ds = f32[2,4]{1,0} dynamic-slice(f32[8,4]{1,0} %op, s32[] %i0, s32[] %i0), dynamic_slice_sizes={2,4}\n"
      "  ROOT %sc = f32[8,4]{1,0} scatter(f32[8,4]{1,0} %op, s32[3,1]{1,0} %idx, f32[3,4]{1,0} %upd), "
      "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
      "unique_indices=true, to_apply=%add\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_collectives) {
  check_roundtrip(
      "HloModule coll, num_partitions=4\n\n"
      "%add (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(f32[] %x, f32[] %y)\n"
      "}\n\n"
      "ENTRY %main (p: f32[8]) -> f32[8] {\n"
      "  %p = f32[8]{0} parameter(0)\n"
      "  %ar = f32[8]{0} all-reduce(f32[8]{0} %p), channel_id=1, replica_groups={{0,1},{2,3}}, "
      "use_global_device_ids=true, to_apply=%add\n"
      "  %ag = f32[16]{0} all-gather(f32[8]{0} %ar), channel_id=2, replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}, use_global_device_ids=true\n"
      "  %rs = f32[8]{0} reduce-scatter(f32[16]{0} %ag), channel_id=3, replica_groups=[2,2]<=[4], dimensions={0}, to_apply=%add\n"
      "  %cp = f32[8]{0} collective-permute(f32[8]{0} %rs), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"
      "  %pid = u32[] partition-id()\n"
      "  ROOT %a2a = f32[8]{0} all-to-all(f32[8]{0} %cp), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={0}\n"
      "}\n\n");
}
END_TEST

START_TEST(test_roundtrip_control_flow_and_misc) {
  check_roundtrip(
      "HloModule cf\n\n"
      "%cond (s: (s32[], f32[4])) -> pred[] {\n"
      "  %s = (s32[], f32[4]{0}) parameter(0)\n"
      "  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %s), index=0\n"
      "  %n = s32[] constant(10)\n"
      "  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT\n"
      "}\n\n"
      "%body (s: (s32[], f32[4])) -> (s32[], f32[4]) {\n"
      "  %s = (s32[], f32[4]{0}) parameter(0)\n"
      "  %i = s32[] get-tuple-element((s32[], f32[4]{0}) %s), index=0\n"
      "  %v = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %s), index=1\n"
      "  %one = s32[] constant(1)\n"
      "  %i2 = s32[] add(s32[] %i, s32[] %one)\n"
      "  ROOT %t = (s32[], f32[4]{0}) tuple(s32[] %i2, f32[4]{0} %v)\n"
      "}\n\n"
      "%lt_f (a: f32[], b: f32[]) -> pred[] {\n"
      "  %a = f32[] parameter(0)\n"
      "  %b = f32[] parameter(1)\n"
      "  ROOT %c = pred[] compare(f32[] %a, f32[] %b), direction=LT, type=TOTALORDER\n"
      "}\n\n"
      "ENTRY %main (p: f32[4]) -> f32[4] {\n"
      "  %p = f32[4]{0} parameter(0), metadata={op_type=\"Add\" op_name=\"jit(f)/add\" source_file=\"f.py\" source_line=3}\n"
      "  %zero = s32[] constant(0)\n"
      "  %init = (s32[], f32[4]{0}) tuple(s32[] %zero, f32[4]{0} %p)\n"
      "  %w = (s32[], f32[4]{0}) while((s32[], f32[4]{0}) %init), condition=%cond, body=%body, "
      "frontend_attributes={_xla_unroll=\"2\"}\n"
      "  %v = f32[4]{0} get-tuple-element((s32[], f32[4]{0}) %w), index=1\n"
      "  %sorted = f32[4]{0} sort(f32[4]{0} %v), dimensions={0}, is_stable=true, to_apply=%lt_f\n"
      "  %cc = f32[4]{0} custom-call(f32[4]{0} %sorted), custom_call_target=\"Sharding\", "
      "sharding={devices=[2]0,1}, backend_config=\"cfg\", control-predecessors={%v}\n"
      "  %it = s32[4]{0} iota(), iota_dimension=0\n"
      "  %c0 = f32[] constant(0)\n"
      "  %c1 = f32[] constant(1)\n"
      "  %rng = f32[4]{0} rng(f32[] %c0, f32[] %c1), distribution=rng_uniform\n"
      "  ROOT %r = f32[4]{0} add(f32[4]{0} %cc, f32[4]{0} %rng)\n"
      "}\n\n");
}
END_TEST

/* Fusion, conditional, custom-call, topk, rng-bit-generator, elided and
 * tuple constants, infeed/outfeed, select-and-scatter, fft, raw attributes,
 * recorded SPMD shardings in the header.  Also the fuzz tests' seed. */
static const char kRarerOps[] =
      "HloModule more, entry_computation_layout={(f32[8]{0}, pred[])->f32[8]{0}}, spmd_parameters_shardings={{devices=[2]<=[2]},{replicated}}, spmd_output_sharding={devices=[2]<=[2]}, num_partitions=2, input_output_alias={ {}: (0, {}, may-alias) }\n"
      "\n"
      "%fused (fp: f32[8]) -> f32[8] {\n"
      "  %fp = f32[8]{0} parameter(0)\n"
      "  ROOT %fe = f32[8]{0} exponential(f32[8]{0} %fp)\n"
      "}\n"
      "\n"
      "%t_branch (tp: f32[8]) -> f32[8] {\n"
      "  %tp = f32[8]{0} parameter(0)\n"
      "  ROOT %tn = f32[8]{0} negate(f32[8]{0} %tp)\n"
      "}\n"
      "\n"
      "%f_branch (fq: f32[8]) -> f32[8] {\n"
      "  %fq = f32[8]{0} parameter(0)\n"
      "  ROOT %fc = f32[8]{0} copy(f32[8]{0} %fq)\n"
      "}\n"
      "\n"
      "%ge (a: f32[], b: f32[]) -> pred[] {\n"
      "  %a = f32[] parameter(0)\n"
      "  %b = f32[] parameter(1)\n"
      "  ROOT %c = pred[] compare(f32[] %a, f32[] %b), direction=GE\n"
      "}\n"
      "\n"
      "%add (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(f32[] %x, f32[] %y)\n"
      "}\n"
      "\n"
      "ENTRY %main (p: f32[8], c: pred[]) -> f32[8] {\n"
      "  %p = f32[8]{0} parameter(0), sharding={devices=[2]<=[2]}, parameter_replication={false}\n"
      "  %c = pred[] parameter(1), sharding={replicated}\n"
      "  %fu = f32[8]{0} fusion(f32[8]{0} %p), kind=kLoop, calls=%fused, metadata={op_name=\"fusion\" deduplicated_name=\"x\"}\n"
      "  %cond = f32[8]{0} conditional(pred[] %c, f32[8]{0} %fu, f32[8]{0} %fu), true_computation=%t_branch, false_computation=%f_branch\n"
      "  %rp = f32[8]{0} reduce-precision(f32[8]{0} %cond), exponent_bits=5, mantissa_bits=10\n"
      "  %cc = f32[8]{0} custom-call(f32[8]{0} %rp), custom_call_target=\"foo\", custom_call_has_side_effect=true, api_version=API_VERSION_STATUS_RETURNING, backend_config={\"a\":1}\n"
      "  %tk = (f32[2]{0}, s32[2]{0}) topk(f32[8]{0} %cc), k=2, largest=true\n"
      "  %k = u64[2]{0} constant({1, 2})\n"
      "  %rbg = (u64[2]{0}, u32[4]{0}) rng-bit-generator(u64[2]{0} %k), algorithm=rng_philox\n"
      "  %big = f32[64]{0} constant({...})\n"
      "  %tc = (f32[], s32[]) constant((1.5, 2))\n"
      "  %tok = token[] after-all()\n"
      "  %inf = ((f32[8]{0}), token[]) infeed(token[] %tok), infeed_config=\"cfg\"\n"
      "  %zero = f32[] constant(0)\n"
      "  %two = f32[4]{0} constant({1, 2, 3, 4})\n"
      "  %sas = f32[8]{0} select-and-scatter(f32[8]{0} %p, f32[4]{0} %two, f32[] %zero), window={size=2 stride=2}, select=%ge, scatter=%add\n"
      "  %out = token[] outfeed(f32[8]{0} %p, token[] %tok), outfeed_config=\"oc\"\n"
      "  %cplx = c64[8]{0} constant({...})\n"
      "  %fft = c64[8]{0} fft(c64[8]{0} %cplx), fft_type=FFT, fft_length={8}\n"
      "  ROOT %r = f32[8]{0} add(f32[8]{0} %cc, f32[8]{0} %cond), statistics={visualizing_index=1,stat-1=33}\n"
      "}\n";

START_TEST(test_roundtrip_rarer_ops) { check_roundtrip(kRarerOps); }
END_TEST

START_TEST(test_roundtrip_async_send_recv_domain) {
  check_roundtrip(
      "HloModule async_mod, is_scheduled=true\n"
      "\n"
      "%async_comp (ap: f32[8]) -> f32[8] {\n"
      "  %ap = f32[8]{0} parameter(0)\n"
      "  ROOT %an = f32[8]{0} negate(f32[8]{0} %ap)\n"
      "}, execution_thread=\"thread_b\"\n"
      "\n"
      "ENTRY %main (p: f32[8], q: s4[16]) -> (f32[8], f32[8], s4[16]) {\n"
      "  %p = f32[8]{0} parameter(0), sharding={{devices=[2]0,1}}\n"
      "  %q = s4[16]{0:E(4)S(2)} parameter(1)\n"
      "  %st = ((f32[8]{0}), f32[8]{0}, s32[]) async-start(f32[8]{0} %p), async_execution_thread=\"thread_b\", calls=%async_comp\n"
      "  %dn = f32[8]{0} async-done(((f32[8]{0}), f32[8]{0}, s32[]) %st)\n"
      "  %tok = token[] after-all()\n"
      "  %snd = (f32[8]{0}, u32[], token[]) send(f32[8]{0} %dn, token[] %tok), channel_id=7, is_host_transfer=true\n"
      "  %sd = token[] send-done((f32[8]{0}, u32[], token[]) %snd), channel_id=7, is_host_transfer=true\n"
      "  %rcv = (f32[8]{0}, u32[], token[]) recv(token[] %tok), channel_id=8\n"
      "  %rd = (f32[8]{0}, token[]) recv-done((f32[8]{0}, u32[], token[]) %rcv), channel_id=8\n"
      "  %rv = f32[8]{0} get-tuple-element((f32[8]{0}, token[]) %rd), index=0\n"
      "  %dom = f32[8]{0} domain(f32[8]{0} %rv), domain={kind=\"sharding\", entry={maximal device=0}, exit={replicated}}\n"
      "  %ags = (f32[8]{0}, f32[16]{0}) all-gather-start(f32[8]{0} %dom), channel_id=9, replica_groups={{0,1}}, dimensions={0}\n"
      "  %agd = f32[16]{0} all-gather-done((f32[8]{0}, f32[16]{0}) %ags)\n"
      "  %sl = f32[8]{0} slice(f32[16]{0} %agd), slice={[0:8]}\n"
      "  %bc = f32[2,8]{1,0} broadcast(f32[8]{0} %sl), dimensions={1}\n"
      "  %tr = f32[8,2]{0,1} transpose(f32[2,8]{1,0} %bc), dimensions={1,0}\n"
      "  %rs = f32[16]{0} reshape(f32[8,2]{0,1} %tr)\n"
      "  %cat = f32[24]{0} concatenate(f32[16]{0} %rs, f32[8]{0} %dn), dimensions={0}\n"
      "  %gds = s32[] get-dimension-size(f32[24]{0} %cat), dimensions={0}\n"
      "  ROOT %t = (f32[8]{0}, f32[8]{0}, s4[16]{0:E(4)S(2)}) tuple(f32[8]{0} %dn, f32[8]{0} %rv, s4[16]{0:E(4)S(2)} %q), sharding={{devices=[2]0,1}, {maximal device=1}, {replicated}}\n"
      "}\n");
}
END_TEST

/* NaN payloads and signs, extremes and subnormals of every float type. */
static const char kFloatSpecials[] =
    "HloModule nans\n"
    "\n"
    "ENTRY %main () -> (f32[4], f16[3], bf16[3], f64[3], f8e5m2[4], f8e4m3fn[3], f8e4m3fnuz[2], c128[2], f8e8m0fnu[2], f4e2m1fn[2]) {\n"
    "  %a = f32[4]{0} constant({nan(0x1), -nan(0x7fffff), 3.4028235e+38, 1.17549435e-38})\n"
    "  %b = f16[3]{0} constant({nan(0x1), -nan, 6e-08})\n"
    "  %c = bf16[3]{0} constant({-nan, nan(0x3), 1e-40})\n"
    "  %d = f64[3]{0} constant({nan(0x8000000000001), 5e-324, 1.7976931348623157e+308})\n"
    "  %e = f8e5m2[4]{0} constant({nan, -nan, inf, -57344})\n"
    "  %f = f8e4m3fn[3]{0} constant({nan, -nan, -0})\n"
    "  %g = f8e4m3fnuz[2]{0} constant({nan, 0.5})\n"
    "  %h = c128[2]{0} constant({(nan, -inf), (0.1, -0.2)})\n"
    "  %i = f8e8m0fnu[2]{0} constant({nan, 1})\n"
    "  %j = f4e2m1fn[2]{0} constant({-6, 0.5})\n"
    "  ROOT %t = (f32[4]{0}, f16[3]{0}, bf16[3]{0}, f64[3]{0}, f8e5m2[4]{0}, f8e4m3fn[3]{0}, f8e4m3fnuz[2]{0}, c128[2]{0}, f8e8m0fnu[2]{0}, f4e2m1fn[2]{0}) tuple(%a, %b, %c, %d, %e, %f, %g, %h, %i, %j)\n"
    "}\n";

START_TEST(test_float_literals_known_answer) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(kFloatSpecials, strlen(kFloatSpecials), "f.hlo", &m));
  json_object *doc = export_doc(m);
  const char *base = "computations/0/instructions/%d/literal";
  static const char *const want[] = {
      "[\"nan(0x1)\",\"-nan(0x7fffff)\",3.4028235e+38,1.1754944e-38]",
      "[\"nan(0x1)\",\"-nan\",6e-08]",
      "[\"-nan\",\"nan(0x3)\",9e-41]",
      "[\"nan(0x8000000000001)\",5e-324,1.7976931348623157e+308]",
      "[\"nan\",\"-nan\",\"inf\",-6e+04]",
      "[\"nan\",\"-nan\",-0.0]",
      "[\"nan\",0.5]",
      "[[\"nan\",\"-inf\"],[0.1,-0.2]]",
  };
  for (int k = 0; k < 8; k++) {
    char path[64];
    snprintf(path, sizeof path, base, k);
    ck_assert_str_eq(text_at(doc, path), want[k]);
  }
  json_object_put(doc);
  char *problem = roundtrip_problem(m);
  ck_assert_msg(problem == NULL, "%s", problem);
  hk_module_free(m);
}
END_TEST

/* ---- import errors ------------------------------------------------------------------- */

#define SHAPE_F32_2 "{\"element_type\":\"f32\",\"dims\":[2]}"
#define MODULE_WITH(instrs)                                                                  \
  "{\"name\":\"m\",\"computations\":[{\"name\":\"main\",\"is_entry\":true,\"instructions\":[" \
  instrs "]}]}"
#define PARAM_P "{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":" SHAPE_F32_2 ",\"operands\":[],\"parameter_number\":0}"

#define PARAM_Q "{\"name\":\"q\",\"opcode\":\"parameter\",\"shape\":" SHAPE_F32_2 "}"

START_TEST(test_import_errors_name_the_path) {
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"]},{\"name\":\"a\",\"opcode\":\"add\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\",\"x\"]}"),
               "bad.json: computations[0].instructions[2].operands[1]: unknown instruction 'x'");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"],\"id\":3},{\"name\":\"o\",\"opcode\":\"negate\",\"shape\":"
                           SHAPE_F32_2 ",\"operands\":[\"p\"],\"id\":3}"),
               "bad.json: instructions 'n' and 'o' have the same id 3");
  expect_error(MODULE_WITH("{\"name\":\"q\",\"opcode\":\"parameter\",\"shape\":" SHAPE_F32_2 ",\"parameter_number\":2000000000}"),
               "instructions[0]: parameter number 2000000000 is out of range for a computation of 1 instructions");
  expect_error(MODULE_WITH(PARAM_P "," PARAM_Q), "computations[0].instructions[1]: parameter number 0 is also used by 'p'");
  expect_error(MODULE_WITH("{\"name\":\"q\",\"opcode\":\"parameter\",\"shape\":" SHAPE_F32_2 ",\"parameter_number\":1},"
                           "{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2 ",\"operands\":[\"q\"]}"),
               "computations[0]: no parameter number 0 (parameters 0..1 are used)");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negat\",\"shape\":" SHAPE_F32_2 "}"),
               "computations[0].instructions[1].opcode: unknown opcode 'negat'");
  expect_error(MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":{\"element_type\":\"f33\",\"dims\":[]}}"),
               "computations[0].instructions[0].shape.element_type: unknown element type 'f33'");
  expect_error(MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":\"f32[2\"}"),
               "computations[0].instructions[0].shape: bad shape 'f32[2'");
  expect_error(MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":{\"element_type\":\"f32\",\"dims\":[2,-1]}}"),
               "instructions[0].shape.dims[1]: negative dimension size");
  expect_error(MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":{\"element_type\":\"f32\",\"dims\":[2,3],"
                           "\"layout\":{\"minor_to_major\":[0,0]}}}"),
               "shape.layout.minor_to_major: is not a permutation");
  expect_error(MODULE_WITH("{\"name\":\"k\",\"opcode\":\"constant\",\"shape\":" SHAPE_F32_2 ",\"literal\":[1,2,3]}"),
               "instructions[0].literal: has 3 entries, dimension 0 of the shape has 2");
  expect_error(MODULE_WITH("{\"name\":\"k\",\"opcode\":\"constant\",\"shape\":" SHAPE_F32_2 ",\"literal\":[1,\"x\"]}"),
               "instructions[0].literal[1]: expected a number, \"inf\", \"-inf\" or \"nan\"");
  expect_error(MODULE_WITH("{\"name\":\"k\",\"opcode\":\"constant\",\"shape\":{\"element_type\":\"s8\",\"dims\":[1]},\"literal\":[300]}"),
               "instructions[0].literal[0]: 300 is out of range [-128, 127]");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"p\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2 ",\"operands\":[\"p\"]}"),
               "computations[0].instructions[1].name: instruction name 'p' is not unique");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2 ",\"dimension\":[0]}"),
               "computations[0].instructions[1]: unknown key 'dimension'");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"],\"sharding\":\"{devices=[2]0,\"}"),
               "computations[0].instructions[1].sharding: bad sharding");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"call\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"],\"called_computations\":[\"nowhere\"]}"),
               "instructions[1].called_computations[0]: unknown computation 'nowhere'");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"],\"window\":[{\"size\":\"3\"}]}"),
               "instructions[1].window[0].size: expected an integer, got string");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"compare\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\",\"p\"],\"comparison\":{\"direction\":\"LESS\"}}"),
               "instructions[1].comparison.direction: unknown value 'LESS'");
  expect_error(MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"all-reduce\",\"shape\":" SHAPE_F32_2
                           ",\"operands\":[\"p\"],\"replica_groups\":{\"groups\":[[0,1]],\"iota\":{\"dims\":[2,2]}}}"),
               "instructions[1].replica_groups.groups: does not match the groups of 'iota'");
}
END_TEST

START_TEST(test_import_errors_document_level) {
  expect_error("", "bad.json:1:1: error: invalid JSON");
  expect_error("{\"name\":\"m\",\n \"computations\": [}", "bad.json:2:");
  expect_error("{\"name\":\"m\",\"computations\":[]} x", "bad.json:1:32: error: invalid JSON");
  expect_error("[]", "bad.json: expected an object, got array");
  expect_error("null", "expected an object, got null");
  expect_error("{\"computations\":[]}", "missing key 'name'");
  expect_error("{\"name\":\"m\",\"computations\":[]}", "computations: a module needs at least one computation");
  expect_error("{\"name\":\"m\",\"computations\":[],\"extra\":1}", "unknown key 'extra'");
  expect_error("{\"name\":\"m\",\"entry\":\"zz\",\"computations\":[{\"name\":\"main\",\"instructions\":[" PARAM_P "]}]}",
               "entry: unknown computation 'zz'");
  expect_error("{\"name\":\"m\",\"computations\":[{\"name\":\"main\",\"root\":\"q\",\"instructions\":[" PARAM_P "]}]}",
               "computations[0].root: unknown instruction 'q'");
  expect_error("{\"name\":\"m\",\"computations\":[{\"name\":\"a\",\"instructions\":[" PARAM_P
               "]},{\"name\":\"b\",\"instructions\":[{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
               ",\"operands\":[\"p\"]}]}]}",
               "computations[1].instructions[0].operands[0]: instruction 'p' is in computation 'a', not in 'b'");
  expect_error("{\"name\":\"m\",\"computations\":[{\"name\":\"main\",\"instructions\":[]}]}",
               "computations[0].instructions: a computation needs at least one instruction");
  expect_error("{\"name\":\"m\",\"config\":{\"num_partitions\":0},\"computations\":[{\"name\":\"main\",\"instructions\":[" PARAM_P "]}]}",
               "config.num_partitions: 0 is out of range");
  expect_error("{\"name\":\"m\",\"config\":{\"spmd_output_sharding\":\"{bogus}\"},\"computations\":[{\"name\":\"main\",\"instructions\":[" PARAM_P "]}]}",
               "config.spmd_output_sharding: bad sharding");
  expect_error("{\"name\":\"m\",\"computations\":[{\"name\":\"a\",\"is_entry\":true,\"instructions\":[" PARAM_P
               "]},{\"name\":\"b\",\"is_entry\":true,\"instructions\":[" PARAM_Q "]}]}",
               "computations[1].is_entry: more than one entry computation");
}
END_TEST

START_TEST(test_import_minimal_document) {
  const char *json = MODULE_WITH(PARAM_P ",{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2 ",\"operands\":[\"p\"]}");
  hk_module *m = NULL;
  ck_assert_ok(hk_module_from_json(json, strlen(json), "min.json", &m));
  ck_assert_str_eq(m->entry->root->name, "n");   /* default root: the last instruction */
  ck_assert_int_eq(m->entry->root->n_operands, 1);
  ck_assert_int_eq(m->config.num_partitions, 1);
  ck_assert_int_eq(m->entry->n_params, 1);
  ck_assert_int_eq(m->entry->first->id, 0);
  ck_assert_int_eq(m->entry->root->id, 1);
  hk_module_free(m);
  /* Shapes may be written in HLO spelling. */
  const char *short_shapes = MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":\"(f32[2]{0}, s32[<=3])\"}");
  ck_assert_ok(hk_module_from_json(short_shapes, strlen(short_shapes), "s.json", &m));
  char *shape = hk_shape_to_string(m->entry->root->shape);
  ck_assert_str_eq(shape, "(f32[2]{0}, s32[<=3]{0})");   /* ParseShape adds default layouts */
  free(shape);
  hk_module_free(m);
  /* Given ids are kept; missing ones come after the largest. */
  const char *ids = MODULE_WITH("{\"name\":\"p\",\"opcode\":\"parameter\",\"shape\":" SHAPE_F32_2 "},"
                                "{\"name\":\"n\",\"opcode\":\"negate\",\"shape\":" SHAPE_F32_2
                                ",\"operands\":[\"p\"],\"id\":41}");
  ck_assert_ok(hk_module_from_json(ids, strlen(ids), "ids.json", &m));
  ck_assert_int_eq(m->entry->root->id, 41);
  ck_assert_int_eq(m->entry->first->id, 42);
  ck_assert_int_eq(m->next_id, 43);
  hk_module_free(m);
}
END_TEST

/* ---- fuzz-ish inputs -------------------------------------------------------------------- */

static void import_anything(const char *text, size_t len) {
  hk_module *m = NULL;
  hk_status *st = hk_module_from_json(text, len, "fuzz.json", &m);
  if (st) {
    ck_assert_ptr_null(m);
    ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
    hk_status_free(st);
  } else {   /* whatever import accepts must print (hlokit opt --no-verify) */
    char *a = hk_module_to_string(m, HK_PRINT_LONG), *b = hk_module_to_string(m, HK_PRINT_SHORT);
    free(a);
    free(b);
    hk_module_free(m);
  }
}

/* Replaces the target-th node (pre-order, root excluded) of v by repl, or
 * deletes it when del; true once done. */
static bool replace_node(json_object *v, int *counter, int target, json_object *repl, bool del) {
  if (json_object_is_type(v, json_type_array)) {
    for (size_t k = 0; k < json_object_array_length(v); k++) {
      if ((*counter)++ == target) {
        if (del) json_object_array_del_idx(v, k, 1);
        else json_object_array_put_idx(v, k, repl);
        return true;
      }
      if (replace_node(json_object_array_get_idx(v, k), counter, target, repl, del)) return true;
    }
  } else if (json_object_is_type(v, json_type_object)) {
    json_object_object_foreach(v, key, child) {
      if ((*counter)++ == target) {
        if (del) json_object_object_del(v, key);
        else json_object_object_add(v, key, repl);
        return true;
      }
      if (replace_node(child, counter, target, repl, del)) return true;
    }
  }
  return false;
}

static json_object *replacement(int kind) {
  switch (kind) {
    case 0: return NULL;
    case 1: return json_object_new_int(-1);
    case 2: return json_object_new_string("x");
    case 3: return json_object_new_array();
    case 4: return json_object_new_object();
    case 5: return json_object_new_double(1e300);
    default: return json_object_new_int64(INT64_MAX);
  }
}

/* Nodes of an exported module replaced by values of other types, and
 * deleted: every node with `kinds` of the 8 mutations (rotating), so that
 * all mutations meet every part of the document. */
static void fuzz_type_confusion(hk_module *m, int kinds, int *imported) {
  json_object *doc = export_doc(m);
  hk_module_free(m);
  for (int target = 0;; target++) {
    bool any = false;
    for (int step = 0; step < kinds; step++) {
      int kind = (target + step) % 8;
      json_object *copy = NULL;
      ck_assert_int_eq(json_object_deep_copy(doc, &copy, NULL), 0);
      int counter = 0;
      json_object *repl = kind < 7 ? replacement(kind) : NULL;
      if (!replace_node(copy, &counter, target, repl, kind == 7)) {
        json_object_put(repl);
        json_object_put(copy);
        break;
      }
      any = true;
      size_t len;
      const char *text = json_object_to_json_string_length(copy, JSON_C_TO_STRING_PLAIN, &len);
      import_anything(text, len);
      json_object_put(copy);
      (*imported)++;
    }
    if (!any) break;
  }
  json_object_put(doc);
}

START_TEST(test_fuzz_type_confusion) {
  int imported = 0;
  fuzz_type_confusion(build_api_module(), 8, &imported);
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(kRarerOps, strlen(kRarerOps), "rare.hlo", &m));
  fuzz_type_confusion(m, 1, &imported);
  ck_assert_int_gt(imported, 1000);
}
END_TEST

/* Every prefix of a document, and random byte edits (fixed seed). */
START_TEST(test_fuzz_bytes) {
  hk_module *m = build_api_module();
  char *json = to_json(m, false);
  hk_module_free(m);
  size_t len = strlen(json);
  for (size_t k = 0; k < len; k++) import_anything(json, k);
  uint64_t seed = 12345;
  const char alphabet[] = "{}[]\",:0123456789-.eEtrufalsn \\x";
  for (int iter = 0; iter < 1500; iter++) {
    char *copy = strdup(json);
    for (int edits = 0; edits < 1 + iter % 3; edits++) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      copy[(seed >> 33) % len] = alphabet[(seed >> 17) % (sizeof alphabet - 1)];
    }
    import_anything(copy, len);
    free(copy);
  }
  free(json);
}
END_TEST

/* ---- conformance corpus: every module that parses round-trips through JSON ---------------- */

typedef struct corpus_count {
  int modules, parsed, identical;
} corpus_count;

static bool parser_case_is_module(json_object *c) {
  json_object *kind, *input;
  if (!json_object_object_get_ex(c, "kind", &kind) || !strcmp(json_object_get_string(kind), "error"))
    return false;
  return !json_object_object_get_ex(c, "input_kind", &input) ||
         !strcmp(json_object_get_string(input), "module");
}

static void corpus_case(json_object *c, const char *file, corpus_count *n) {
  json_object *hlo, *name;
  if (!json_object_object_get_ex(c, "hlo", &hlo)) return;
  if (strstr(file, "parser") && !parser_case_is_module(c)) return;
  n->modules++;
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(json_object_get_string(hlo), (size_t)json_object_get_string_len(hlo),
                                  file, &m);
  if (st) {
    hk_status_free(st);
    return;
  }
  n->parsed++;
  char *problem = roundtrip_problem(m);
  if (!problem) {
    n->identical++;
  } else {
    json_object_object_get_ex(c, "name", &name);
    fprintf(stderr, "json round trip: %s %s: %s\n", file, name ? json_object_get_string(name) : "?", problem);
    free(problem);
  }
  hk_module_free(m);
}

static bool corpus_file(const char *file, corpus_count *n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", hk_test_conformance_dir(), file);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *c = json_tokener_parse(line);
    if (c) corpus_case(c, file, n);
    json_object_put(c);
  }
  free(line);
  fclose(f);
  return true;
}

START_TEST(test_conformance_json_roundtrip) {
  static const char *const files[] = {"spmd.jsonl", "propagation.jsonl", "parser.jsonl"};
  int bad = 0;
  for (int k = 0; k < 3; k++) {
    corpus_count n = {0, 0, 0};
    if (!corpus_file(files[k], &n)) {
      printf("json round trip: %s not found under %s, skipped\n", files[k], hk_test_conformance_dir());
      continue;
    }
    printf("json round trip: %s: %d modules, %d parse, %d identical after JSON\n", files[k], n.modules,
           n.parsed, n.identical);
    bad += n.parsed - n.identical;
  }
  ck_assert_msg(bad == 0, "%d parsed modules differ after the JSON round trip", bad);
}
END_TEST

static Suite *json_suite(void) {
  Suite *s = suite_create("json");
  TCase *api = tcase_create("api");
  tcase_add_test(api, test_export_known_answer);
  tcase_add_test(api, test_api_module_json_fixed_point);
  tcase_add_test(api, test_import_minimal_document);
  suite_add_tcase(s, api);
  TCase *rt = tcase_create("roundtrip");
  tcase_add_test(rt, test_roundtrip_header_config);
  tcase_add_test(rt, test_roundtrip_constants);
  tcase_add_test(rt, test_roundtrip_shapes_and_layouts);
  tcase_add_test(rt, test_roundtrip_windows_and_dnums);
  tcase_add_test(rt, test_roundtrip_gather_scatter_slices);
  tcase_add_test(rt, test_roundtrip_collectives);
  tcase_add_test(rt, test_roundtrip_control_flow_and_misc);
  tcase_add_test(rt, test_roundtrip_rarer_ops);
  tcase_add_test(rt, test_roundtrip_async_send_recv_domain);
  tcase_add_test(rt, test_float_literals_known_answer);
  suite_add_tcase(s, rt);
  TCase *err = tcase_create("errors");
  tcase_add_test(err, test_import_errors_name_the_path);
  tcase_add_test(err, test_import_errors_document_level);
  suite_add_tcase(s, err);
  TCase *fuzz_tree = tcase_create("fuzz_tree");
  tcase_set_timeout(fuzz_tree, 300);
  tcase_add_test(fuzz_tree, test_fuzz_type_confusion);
  suite_add_tcase(s, fuzz_tree);
  TCase *fuzz_bytes = tcase_create("fuzz_bytes");
  tcase_set_timeout(fuzz_bytes, 300);
  tcase_add_test(fuzz_bytes, test_fuzz_bytes);
  suite_add_tcase(s, fuzz_bytes);
  TCase *conf = tcase_create("conformance");
  tcase_set_timeout(conf, 300);
  tcase_add_test(conf, test_conformance_json_roundtrip);
  suite_add_tcase(s, conf);
  return s;
}

HK_TEST_MAIN(json_suite)
