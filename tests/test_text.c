/* test_text.c - Check suite for the HLO text parser and printer (host/text). */
#include "testutil.h"

/* Parses text, prints it in `form`, and checks the print equals `expect`. */
static void check_print(const char *text, hk_print_form form, const char *expect) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, strlen(text), "t.hlo", &m));
  char *out = hk_module_to_string(m, form);
  ck_assert_str_eq(out, expect);
  /* the print parses again and is a fixed point */
  hk_module *m2 = NULL;
  ck_assert_ok(hk_parse_module(out, strlen(out), "again.hlo", &m2));
  char *out2 = hk_module_to_string(m2, form);
  ck_assert_str_eq(out2, out);
  free(out2);
  hk_module_free(m2);
  free(out);
  hk_module_free(m);
}

static void roundtrip(const char *text, hk_print_form form) { check_print(text, form, text); }

/* Parsing must fail; the message must name file:line:col and contain `sub`. */
static void check_error(const char *text, const char *loc, const char *sub) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, strlen(text), "bad.hlo", &m);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_null(m);
  if (loc && !strstr(st->message, loc)) ck_abort_msg("no %s in: %s", loc, st->message);
  if (sub && !strstr(st->message, sub)) ck_abort_msg("no '%s' in: %s", sub, st->message);
  hk_status_free(st);
}

static const char *kSmall =
    "HloModule axpy\n"
    "\n"
    "ENTRY axpy {\n"
    "  alpha = f32[] parameter(0)\n"
    "  b = f32[2,4] broadcast(alpha), dimensions={}\n"
    "  x = f32[2,4]{1,0} parameter(1)\n"
    "  ROOT m = f32[2,4]{1,0} multiply(b, x)\n"
    "}\n";

START_TEST(test_short_and_long_forms) {
  check_print(kSmall, HK_PRINT_SHORT,
              "HloModule axpy, entry_computation_layout={(f32[], f32[2,4]{1,0})->f32[2,4]{1,0}}\n"
              "\n"
              "ENTRY axpy {\n"
              "  alpha = f32[] parameter(0)\n"
              "  b = f32[2,4]{1,0} broadcast(alpha), dimensions={}\n"
              "  x = f32[2,4]{1,0} parameter(1)\n"
              "  ROOT m = f32[2,4]{1,0} multiply(b, x)\n"
              "}\n\n");
  check_print(kSmall, HK_PRINT_LONG,
              "HloModule axpy, entry_computation_layout={(f32[], f32[2,4]{1,0})->f32[2,4]{1,0}}\n"
              "\n"
              "ENTRY %axpy (alpha: f32[], x: f32[2,4]) -> f32[2,4] {\n"
              "  %alpha = f32[] parameter(0)\n"
              "  %b = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}\n"
              "  %x = f32[2,4]{1,0} parameter(1)\n"
              "  ROOT %m = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %b, f32[2,4]{1,0} %x)\n"
              "}\n\n");
}
END_TEST

START_TEST(test_instr_and_shape_strings) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(kSmall, strlen(kSmall), NULL, &m));
  hk_instr *root = m->entry->root;
  char *s = hk_instr_to_string(root, HK_PRINT_SHORT);
  ck_assert_str_eq(s, "m = f32[2,4]{1,0} multiply(b, x)");
  free(s);
  s = hk_instr_to_string(root, HK_PRINT_LONG);
  ck_assert_str_eq(s, "%m = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %b, f32[2,4]{1,0} %x)");
  free(s);
  const hk_shape *sh = NULL;
  const char *t = "(f32[<=4,?]{1,0:T(8,128)S(1)}, token[], /*index=2*/ u8[])";
  ck_assert_ok(hk_parse_shape(m, t, strlen(t), &sh));
  s = hk_shape_to_string(sh);
  ck_assert_str_eq(s, "(f32[<=4,?]{1,0:T(8,128)S(1)}, token[], u8[])");
  free(s);
  ck_assert_int_eq(sh->n_tuple, 3);
  ck_assert(sh->tuple[0]->dynamic[0]);
  ck_assert_int_eq(sh->tuple[0]->dims[0], 4);
  ck_assert_int_eq(sh->tuple[0]->layout->memory_space, 1);
  ck_assert_int_eq(sh->tuple[0]->layout->n_tiles, 1);
  hk_module_free(m);
}
END_TEST

START_TEST(test_attribute_families) {
  roundtrip(
      "HloModule attrs, entry_computation_layout={(f32[4,8]{1,0}, s32[2]{0}, f32[8,4]{1,0})->(f32[8,4]{0,1}, f32[2,4]{1,0}, f32[2,8]{1,0}, f32[6,8]{1,0}, f32[4]{0}, /*index=5*/f32[4,8]{1,0}, f32[8,8]{1,0}, f32[4,8]{1,0}, f32[2,8]{1,0}, pred[4,8]{1,0}, /*index=10*/f32[4,8]{1,0}, f32[2,8]{1,0}, f32[4,4]{1,0})}, replica_count=2, num_partitions=4\n"
      "\n"
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n"
      "}\n"
      "\n"
      "ENTRY main {\n"
      "  p = f32[4,8]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}\n"
      "  t = f32[8,4]{0,1} transpose(p), dimensions={1,0}\n"
      "  sl = f32[2,4]{1,0} slice(p), slice={[0:4:2], [0:4:1]}\n"
      "  c0 = s32[] constant(0)\n"
      "  ds = f32[2,8]{1,0} dynamic-slice(p, c0, c0), dynamic_slice_sizes={2,8}\n"
      "  z = f32[] constant(0)\n"
      "  pd = f32[6,8]{1,0} pad(p, z), padding=1_1x0_0\n"
      "  r = f32[4]{0} reduce(p, z), dimensions={1}, to_apply=add\n"
      "  ar = f32[4,8]{1,0} all-reduce(p), channel_id=1, replica_groups=[2,2]<=[4], use_global_device_ids=true, to_apply=add\n"
      "  ag = f32[8,8]{1,0} all-gather(p), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={0}\n"
      "  cp = f32[4,8]{1,0} collective-permute(p), channel_id=3, source_target_pairs={{0,1},{1,0}}\n"
      "  i = s32[2]{0} parameter(1)\n"
      "  g = f32[2,8]{1,0} gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}, indices_are_sorted=true\n"
      "  cmp = pred[4,8]{1,0} compare(p, p), direction=LT, type=TOTALORDER\n"
      "  cc = f32[4,8]{1,0} custom-call(p), custom_call_target=\"foo\\\"bar\", custom_call_has_side_effect=true, backend_config={\"k\": 1}\n"
      "  rw = f32[2,8]{1,0} reduce-window(p, z), window={size=2x1 stride=2x1 pad=1_0x0_0}, to_apply=add\n"
      "  w = f32[8,4]{1,0} parameter(2), metadata={op_name=\"w\" source_line=3}\n"
      "  d = f32[4,4]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,default}, frontend_attributes={a=\"1\",b={x}}, control-predecessors={cp}\n"
      "  ROOT tup = (f32[8,4]{0,1}, f32[2,4]{1,0}, f32[2,8]{1,0}, f32[6,8]{1,0}, f32[4]{0}, /*index=5*/f32[4,8]{1,0}, f32[8,8]{1,0}, f32[4,8]{1,0}, f32[2,8]{1,0}, pred[4,8]{1,0}, /*index=10*/f32[4,8]{1,0}, f32[2,8]{1,0}, f32[4,4]{1,0}) tuple(t, sl, ds, pd, r, ar, ag, cp, g, cmp, cc, rw, d)\n"
      "}\n\n",
      HK_PRINT_SHORT);
  roundtrip(
      "HloModule conv, entry_computation_layout={(f32[1,2,1]{2,1,0}, f32[1,1,1]{2,1,0})->f32[1,2,1]{2,1,0}}\n"
      "\n"
      "ENTRY %conv (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,2,1] {\n"
      "  %input = f32[1,2,1]{2,1,0} parameter(0)\n"
      "  %filter = f32[1,1,1]{2,1,0} parameter(1)\n"
      "  ROOT %convolution = f32[1,2,1]{2,1,0} convolution(f32[1,2,1]{2,1,0} %input, f32[1,1,1]{2,1,0} %filter), window={size=1 pad=1_0 rhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=2\n"
      "}\n\n",
      HK_PRINT_LONG);
}
END_TEST

START_TEST(test_structured_fields) {
  const char *t =
      "HloModule s, num_partitions=2\n"
      "cond {\n  p = (s32[]) parameter(0)\n  v = s32[] get-tuple-element(p), index=0\n"
      "  k = s32[] constant(3)\n  ROOT lt = pred[] compare(v, k), direction=LT\n}\n"
      "body {\n  p = (s32[]) parameter(0)\n  ROOT t = (s32[]) tuple(p)\n}\n"
      "ENTRY e {\n  a = (s32[]) parameter(0)\n"
      "  ROOT w = (s32[]) while(a), body=body, condition=cond\n}\n";
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(t, strlen(t), NULL, &m));
  ck_assert(m->config.use_spmd_partitioning);
  ck_assert_int_eq(m->config.num_partitions, 2);
  hk_instr *w = m->entry->root;
  ck_assert_int_eq(w->opcode, HK_OP_WHILE);
  ck_assert_int_eq(w->n_called, 2);
  ck_assert_str_eq(w->called[0]->name, "cond");
  ck_assert_str_eq(w->called[1]->name, "body");
  hk_computation *cond = w->called[0];
  ck_assert_int_eq(cond->root->attrs->cmp_dir, HK_CMP_LT);
  char *s = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_nonnull(strstr(s, "while(a), condition=cond, body=body"));
  ck_assert_ptr_nonnull(strstr(s, "index=0"));
  free(s);
  hk_module_free(m);
}
END_TEST

START_TEST(test_literals) {
  roundtrip(
      "HloModule lits, entry_computation_layout={()->c64[2]{0}}\n"
      "\n"
      "ENTRY lits {\n"
      "  a = f32[6]{0} constant({nan, 7, -nan, -1, inf, -inf})\n"
      "  b = bf16[2]{0} constant({-3.39e+38, 3.39e+38})\n"
      "  c = f16[2]{0} constant({-65504, 500})\n"
      "  d = f32[2,3]{1,0} constant({ { 1, 2.5, 3 }, { 4, 5, 6 } })\n"
      "  e = s4[2]{0} constant({-8, 7})\n"
      "  f = u64[] constant(18446744073709551615)\n"
      "  g = pred[] constant(true)\n"
      "  h = f32[2,1,1,2]{3,2,1,0} constant({ { /*i0=0*/ { /*i1=0*/ { 1, 2 } } }, { /*i0=1*/ { /*i1=0*/ { 3, 4 } } } })\n"
      "  i = f8e4m3fn[2]{0} constant({nan, 7})\n"
      "  j = f32[] constant(3.14)\n"
      "  k = f64[] constant(0.001)\n"
      "  l = f32[67,89]{1,0} constant({...})\n"
      "  m = (f32[2,1]{1,0}, f32[2]{0}) constant(( { {1}, {2} }, {2, 42} ))\n"
      "  n = bf16[2]{0} constant({-nan(0x7f), nan(0x3f)})\n"
      "  ROOT cx = c64[2]{0} constant({(1, 2), (-inf, nan)})\n"
      "}\n\n",
      HK_PRINT_SHORT);
  check_error("HloModule m\nENTRY e {\n  ROOT c = u4[] constant(16)\n}\n", "bad.hlo:3:",
              "is out of range for literal's primitive type U4");
  check_error("HloModule m\nENTRY e {\n  ROOT c = f16[] constant(-65520)\n}\n", ":3:",
              "is out of range for literal's primitive type F16");
  check_error("HloModule m\nENTRY e {\n  ROOT c = f32[2,3] constant({1, 2, 3, 4, 5, 6})\n}\n",
              ":3:", "expects nested array in rank 2, but sees 1");
  check_error("HloModule m\nENTRY e {\n  ROOT c = bf16[1] constant({nan(0x3ff)})\n}\n", ":3:",
              "tries to set NaN payload 0x3ff");
}
END_TEST

START_TEST(test_nested_instructions) {
  check_print(
      "HloModule test\n\nENTRY test {\n"
      "    ROOT root = add(f32[10] parameter(0), multiply(f32[10] parameter(1), f32[10] parameter(2)))\n}",
      HK_PRINT_SHORT,
      "HloModule test, entry_computation_layout={(f32[10]{0}, f32[10]{0}, f32[10]{0})->f32[10]{0}}\n"
      "\n"
      "ENTRY test {\n"
      "  parameter.anon = f32[10]{0} parameter(0)\n"
      "  parameter.anon.1 = f32[10]{0} parameter(1)\n"
      "  parameter.anon.2 = f32[10]{0} parameter(2)\n"
      "  multiply.anon = f32[10]{0} multiply(parameter.anon.1, parameter.anon.2)\n"
      "  ROOT root = f32[10]{0} add(parameter.anon, multiply.anon)\n"
      "}\n\n");
}
END_TEST

/* Names alike in their first 16 bytes (or all but their tail), opcodes of
 * 16 bytes and more, and `, sharding=` with and without its usual spacing
 * all read back as written (the parser keys recent names and opcodes by
 * their first 16 bytes and takes `, sharding=` on a fast path). */
START_TEST(test_names_alike_and_fast_paths) {
  roundtrip("HloModule m, entry_computation_layout={((f32[], f32[]))->f32[]}\n\n"
            "ENTRY e {\n"
            "  p = (f32[], f32[]) parameter(0)\n"
            "  a_very_long_name_prefix_2 = f32[] get-tuple-element(p), index=1\n"
            "  a_very_long_name_1_suffix = f32[] negate(a_very_long_name_prefix_2), sharding={replicated}\n"
            "  a_very_long_name_prefix_1 = f32[] get-tuple-element(p), index=0\n"
            "  a_very_long_name_2_suffix = f32[] negate(a_very_long_name_prefix_1), sharding={maximal device=1}\n"
            "  abcdefghijklmnop = f32[] subtract(a_very_long_name_1_suffix, a_very_long_name_2_suffix)\n"
            "  abcdefghijklmnoq = f32[] add(abcdefghijklmnop, a_very_long_name_prefix_1)\n"
            "  ROOT abcdefghijklmno = f32[] multiply(abcdefghijklmnoq, abcdefghijklmnop)\n"
            "}\n\n",
            HK_PRINT_SHORT);
  check_print("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n"
              "  ROOT n = f32[] negate(p) ,  sharding = {replicated}\n}\n",
              HK_PRINT_SHORT,
              "HloModule m, entry_computation_layout={(f32[])->f32[]}\n\nENTRY e {\n"
              "  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p), sharding={replicated}\n}\n\n");
  hk_module *m = NULL;
  const char *text = "HloModule m\n\nENTRY e {\n  a_very_long_name_prefix_1 = f32[] parameter(0)\n"
                     "  ROOT r = f32[] negate(a_very_long_name_prefix_2)\n}\n";
  hk_status *st = hk_parse_module(text, strlen(text), "t.hlo", &m);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "instruction does not exist: a_very_long_name_prefix_2"));
  hk_status_free(st);
}
END_TEST

START_TEST(test_async_sugar) {
  roundtrip(
      "HloModule AsyncOps, entry_computation_layout={(f32[10]{0})->f32[20]{0}}\n"
      "\n"
      "ENTRY %Entry (p0: f32[10]) -> f32[20] {\n"
      "  %p0 = f32[10]{0} parameter(0)\n"
      "  %async-start = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(f32[10]{0} %p0), async_execution_thread=\"parallel_thread\", custom_call_target=\"foo\"\n"
      "  %async-update = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(((f32[10]{0}), f32[20]{0}, s32[]) %async-start)\n"
      "  ROOT %async-done = f32[20]{0} custom-call-done(((f32[10]{0}), f32[20]{0}, s32[]) %async-update)\n"
      "}\n\n",
      HK_PRINT_LONG);
}
END_TEST

START_TEST(test_errors_have_positions) {
  check_error("HloModule m\n\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT y = f32[] le(x, x)\n}\n",
              "bad.hlo:5:18:", "unknown opcode");
  check_error("HloModule m\nENTRY e {\n  pow = s32[] constant(42)\n  ROOT v = (s32[]) tuple(power)\n}\n",
              "bad.hlo:4:", "instruction does not exist");
  check_error("HloModule m\nENTRY e {\n  x = g32[] parameter(0)\n}\n", "bad.hlo:3:", NULL);
  check_error("HloModule m\nc {\n  a = f32[] constant(1)\n}\nc {\n  b = f32[] constant(2)\n}\n",
              "bad.hlo:5:1:", "was parsing 2:1: error: computation previously defined here\nc {\n^");
  check_error("HloModule m\nENTRY e {\n/* open\n  ROOT a = f32[] constant(1)\n}\n", ":3:1:",
              "/* open\n^");
  check_error("HloModule m\nENTRY e {\n  ROOT a = f32[2] add(f32[2] parameter(0), f32[3] parameter(1)), \n}\n",
              NULL, NULL);
  check_error("HloModule m\nENTRY e {\n  t = token[] after-all()\n  c = f32[] constant(1)\n"
              "  s = (f32[], u32[], token[]) send(c, t), channel_id=16, calls=e\n"
              "  ROOT d = token[] send-done(s), channel_id=16\n}\n",
              "bad.hlo:5:58:", "unexpected attribute \"calls\"");
  check_error("HloModule m\nENTRY e {\n  t = token[] after-all()\n  c = f32[] constant(1)\n"
              "  s = (f32[], u32[], token[]) send(c, t)\n  ROOT d = token[] send-done(s), channel_id=16\n}\n",
              "bad.hlo:5:", "attribute channel_id is expected but not seen");
  check_error("HloModule m\nENTRY e {\n  a = f32[] constant(1)\n  ROOT b = f32[] negate(a), control-predecessors={zz}\n}\n",
              "bad.hlo:4:", "'zz' is not defined");
  check_error("", NULL, NULL);
  check_error("HloModule", NULL, NULL);
  check_error("HloModule m\nENTRY e {\n  p = f32[2,2] parameter(0)\n  ROOT a = f32[2,2] add(f32[2,2] p, f32[2,5] p)\n}\n",
              ":4:", "The declared operand shape f32[2,5]{1,0} is not compatible with the shape of the operand instruction f32[2,2]{1,0}.");
}
END_TEST

START_TEST(test_header_attributes) {
  roundtrip(
      "HloModule h, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias) }, entry_computation_layout={(f32[2]{0})->f32[2]{0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true,false}, frontend_attributes={x=\"y\"}, num_partitions=2\n"
      "\n"
      "ENTRY e {\n"
      "  p = f32[2]{0} parameter(0)\n"
      "  ROOT n = f32[2]{0} negate(p)\n"
      "}, execution_thread=\"side\"\n\n",
      HK_PRINT_SHORT);
}
END_TEST

START_TEST(test_pieces) {
  hk_module *m = hk_module_new("pieces");
  const hk_window *w = NULL;
  const char *wt = "size=2x3 stride=1x2 pad=0_1x1_1 rhs_reversal=0x1";
  ck_assert_ok(hk_parse_window(m, wt, strlen(wt), &w));
  ck_assert_int_eq(w->n_dims, 2);
  ck_assert_int_eq(w->dims[1].size, 3);
  ck_assert_int_eq(w->dims[1].stride, 2);
  ck_assert_int_eq(w->dims[0].pad_hi, 1);
  ck_assert(w->dims[1].reversal);
  ck_assert_int_eq(w->dims[0].base_dilation, 1);
  const hk_conv_dnums *d = NULL;
  const char *dt = "b0?f_?0?io->?b?0?f";
  ck_assert_ok(hk_parse_conv_dnums(m, dt, strlen(dt), &d));
  ck_assert_int_eq(d->input_batch, 0);
  ck_assert_int_eq(d->input_feature, 3);
  ck_assert_int_eq(d->kernel_output_feature, 4);
  ck_assert_int_eq(d->output_spatial[0], 3);
  int32_t n = 0;
  const hk_pad_dim *pd = NULL;
  ck_assert_ok(hk_parse_padding_config(m, "0_1_0x2_3_4", 11, &n, &pd));
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(pd[1].interior, 4);
  hk_status *st = hk_parse_padding_config(m, "0_1_0x2", 7, &n, &pd);
  ck_assert_ptr_nonnull(st);
  hk_status_free(st);
  const hk_shape *sh = NULL;
  st = hk_parse_shape(m, "f32[123,456]{foo}", 17, &sh);
  ck_assert_ptr_nonnull(st);
  /* '{' then a letter starts no layout (XLA's lookahead): the shape ends at 13 */
  ck_assert_ptr_nonnull(strstr(st->message, "1:13"));
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

START_TEST(test_single_instruction_text) {
  const char *t = "%multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0}, f32[2,4]{1,0})";
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(t, strlen(t), NULL, &m));
  ck_assert_int_eq(m->entry->n_params, 2);
  ck_assert_int_eq(m->entry->root->opcode, HK_OP_MULTIPLY);
  hk_module_free(m);
  check_error("multiply(f32[2,4]{1,0} %a, f32[2,4]{1,0} %b)", "1:", "expects '=' in instruction");
  check_error("%m = f32[2,4]{1,0} multiply(%a, %b)", "1:", "Operand had no shape in HLO text");
  check_error("a = f32[2] parameter(0)\nb = f32[2] negate(a)\n", "2:1:", "Expected eof");
}
END_TEST

START_TEST(test_spmd_header) {
  const char *t =
      "HloModule h, entry_computation_layout={(f32[2]{0}, f32[2]{0})->f32[2]{0}}, num_partitions=2, "
      "spmd_output_sharding={devices=[2]<=[2]}, spmd_parameters_shardings={{devices=[2]<=[2]},{replicated}}\n"
      "\n"
      "ENTRY e {\n"
      "  p = f32[2]{0} parameter(0)\n"
      "  q = f32[2]{0} parameter(1)\n"
      "  ROOT n = f32[2]{0} add(p, q)\n"
      "}\n\n";
  roundtrip(t, HK_PRINT_SHORT);
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(t, strlen(t), NULL, &m));
  ck_assert_int_eq(m->config.n_spmd_parameters_shardings, 2);
  ck_assert(hk_sharding_is_replicated(m->config.spmd_parameters_shardings[1]));
  ck_assert_ptr_nonnull(m->config.spmd_output_sharding);
  ck_assert(m->config.has_entry_layout);
  ck_assert_int_eq(m->config.entry_layout.n_params, 2);
  hk_module_free(m);
}
END_TEST

/* Instructions print in XLA's post order (DFS from each instruction
 * without users, in list order, operands in order), whatever the list
 * order; a list already in that order prints as it is. */
START_TEST(test_print_order) {
  check_print("HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
              "  c = f32[] add(b, a)\n  ROOT d = f32[] multiply(c, a)\n}\n",
              HK_PRINT_SHORT,
              "HloModule m, entry_computation_layout={(f32[], f32[])->f32[]}\n\nENTRY e {\n"
              "  b = f32[] parameter(1)\n  a = f32[] parameter(0)\n  c = f32[] add(b, a)\n"
              "  ROOT d = f32[] multiply(c, a)\n}\n\n");
  /* dead code after the root is a second DFS start */
  check_print("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n"
              "  ROOT t = f32[] add(q, p)\n  x = f32[] negate(p)\n}\n",
              HK_PRINT_SHORT,
              "HloModule m, entry_computation_layout={(f32[], f32[])->f32[]}\n\nENTRY e {\n"
              "  q = f32[] parameter(1)\n  p = f32[] parameter(0)\n  ROOT t = f32[] add(q, p)\n"
              "  x = f32[] negate(p)\n}\n\n");
  /* an operand the DFS reaches through an earlier operand first */
  roundtrip("HloModule m, entry_computation_layout={(f32[])->f32[]}\n\nENTRY e {\n"
            "  p = f32[] parameter(0)\n  x = f32[] negate(p)\n  r = f32[] exponential(p)\n"
            "  s = f32[] exponential(r)\n  ROOT t = f32[] add(r, s)\n}\n\n",
            HK_PRINT_SHORT);
  /* an operand listed after its user (after a rewrite) */
  hk_module *m = hk_module_new("m");
  hk_computation *c = hk_computation_new(m, "e");
  hk_module_set_entry(m, c);
  const hk_shape *f = hk_shape_scalar(m, HK_F32);
  hk_instr *a = hk_instr_new(c, HK_OP_PARAMETER, f, 0, NULL, "a");
  hk_instr_attrs(a)->parameter_number = 0;
  hk_computation_register_param(c, a);
  hk_instr *b = hk_instr_new(c, HK_OP_NEGATE, f, 1, &a, "b");
  hk_instr *e = hk_instr_new(c, HK_OP_EXP, f, 1, &a, "c");
  hk_instr_set_operand(b, 0, e);
  hk_computation_set_root(c, b);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_nonnull(strstr(out, "ENTRY e {\n  a = f32[] parameter(0)\n  c = f32[] exponential(a)\n"
                                    "  ROOT b = f32[] negate(c)\n}\n"));
  free(out);
  hk_module_free(m);
}
END_TEST

/* A control predecessor is visited before the operands of its successor,
 * so it can move ahead of an instruction listed (and printed, as the
 * printer walks the list) before it. */
START_TEST(test_print_order_control_edges) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = hk_computation_new(m, "e");
  hk_module_set_entry(m, c);
  const hk_shape *f = hk_shape_scalar(m, HK_F32);
  hk_instr *a = hk_instr_new(c, HK_OP_PARAMETER, f, 0, NULL, "a");
  hk_instr_attrs(a)->parameter_number = 0;
  hk_computation_register_param(c, a);
  hk_instr *x = hk_instr_new(c, HK_OP_NEGATE, f, 1, &a, "x");
  hk_instr *y = hk_instr_new(c, HK_OP_EXP, f, 1, &a, "y");
  hk_instr *xy[2] = {x, y};
  hk_instr *t = hk_instr_new(c, HK_OP_ADD, f, 2, xy, "t");
  hk_computation_set_root(c, t);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_nonnull(strstr(out, "ENTRY e {\n  a = f32[] parameter(0)\n  x = f32[] negate(a)\n"
                                    "  y = f32[] exponential(a)\n  ROOT t = f32[] add(x, y)\n}\n\n"));
  free(out);
  hk_instr_add_control_dep(y, x);
  out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_nonnull(strstr(out, "ENTRY e {\n  a = f32[] parameter(0)\n  y = f32[] exponential(a)\n"
                                    "  x = f32[] negate(a), control-predecessors={y}\n"
                                    "  ROOT t = f32[] add(x, y)\n}\n\n"));
  free(out);
  hk_module_free(m);
}
END_TEST

/* A big computation whose list interleaves two chains prints each chain
 * whole (the DFS from the root follows the first operand's chain first),
 * the printer putting the lines it printed in list order in post order;
 * big enough for it to size its buffer from the first lines. */
START_TEST(test_print_order_big) {
  enum { N = 12000 };
  hk_buf in, want, b_lines;
  hk_buf_init(&in);
  hk_buf_init(&want);
  hk_buf_init(&b_lines);
  hk_buf_puts(&in, "HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n");
  hk_buf_puts(&want, "HloModule m, entry_computation_layout={(f32[])->f32[]}\n\nENTRY e {\n"
                     "  p = f32[] parameter(0)\n");
  for (int k = 1; k <= N; k++) {
    char a[160], b[160], pa[16], pb[16];
    snprintf(pa, sizeof pa, k == 1 ? "p" : "a%d", k - 1);
    snprintf(pb, sizeof pb, k == 1 ? "p" : "b%d", k - 1);
    snprintf(a, sizeof a, "  a%d = f32[] negate(%s)\n", k, pa);
    snprintf(b, sizeof b, "  b%d = f32[] exponential(%s)\n", k, pb);
    hk_buf_puts(&in, a);
    hk_buf_puts(&in, b);
    hk_buf_puts(&want, a);
    hk_buf_puts(&b_lines, b);
  }
  char root[80];
  snprintf(root, sizeof root, "  ROOT t = f32[] add(a%d, b%d)\n}\n", N, N);
  hk_buf_puts(&in, root);
  hk_buf_puts(&want, b_lines.data);
  hk_buf_puts(&want, root);
  hk_buf_puts(&want, "\n");
  check_print(in.data, HK_PRINT_SHORT, want.data);
  hk_buf_free(&in);
  hk_buf_free(&want);
  hk_buf_free(&b_lines);
}
END_TEST

static Suite *text_suite(void) {
  Suite *s = suite_create("text");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_short_and_long_forms);
  tcase_add_test(tc, test_instr_and_shape_strings);
  tcase_add_test(tc, test_attribute_families);
  tcase_add_test(tc, test_structured_fields);
  tcase_add_test(tc, test_literals);
  tcase_add_test(tc, test_nested_instructions);
  tcase_add_test(tc, test_names_alike_and_fast_paths);
  tcase_add_test(tc, test_async_sugar);
  tcase_add_test(tc, test_errors_have_positions);
  tcase_add_test(tc, test_header_attributes);
  tcase_add_test(tc, test_pieces);
  tcase_add_test(tc, test_spmd_header);
  tcase_add_test(tc, test_single_instruction_text);
  tcase_add_test(tc, test_print_order);
  tcase_add_test(tc, test_print_order_control_edges);
  tcase_add_test(tc, test_print_order_big);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(text_suite)
