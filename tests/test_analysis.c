/* test_analysis.c - Check suite for shape inference, the verifier and the call graph (host/analysis/). */
#include <json-c/json.h>

#include "testutil.h"

/* ---- helpers ------------------------------------------------------------ */

static hk_module *parse_or_die(const char *text) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, strlen(text), "test", &m);
  if (st) ck_abort_msg("parse failed: %s\n%s", st->message, text);
  return m;
}

/* Names are unique per module (the parser renames later clashes), so the
 * tests give every instruction they look up a module-wide unique name.
 * Infers `name`'s shape and compares it (layout-free) with `want`. */
static void expect_infer(const char *text, const char *name, const char *want) {
  hk_module *m = parse_or_die(text);
  const hk_shape *got = NULL, *exp = NULL;
  ck_assert_ok(hk_infer_shape(m, hk_test_find(m, name), &got));
  ck_assert_ok(hk_parse_shape(m, want, strlen(want), &exp));
  char *gs = hk_shape_to_string(got);
  ck_assert_msg(hk_shape_compatible(got, exp), "%s: inferred %s, expected %s", name, gs, want);
  free(gs);
  hk_module_free(m);
}

/* Verifies text with default options; the error must contain each needle. */
static void expect_verify_error(hk_module *m, const char *n1, const char *n2) {
  hk_verify_options o = hk_verify_defaults();
  hk_status *st = hk_verify_module(m, &o);
  ck_assert_msg(st != NULL, "verifier accepted a bad module (wanted '%s')", n1);
  ck_assert_msg(strstr(st->message, n1), "message '%s' lacks '%s'", st->message, n1);
  if (n2) ck_assert_msg(strstr(st->message, n2), "message '%s' lacks '%s'", st->message, n2);
  hk_status_free(st);
}

static void expect_text_verify_error(const char *text, const char *n1, const char *n2) {
  hk_module *m = parse_or_die(text);
  expect_verify_error(m, n1, n2);
  hk_module_free(m);
}

static void expect_verifies(const char *text) {
  hk_module *m = parse_or_die(text);
  hk_verify_options o = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &o));
  hk_module_free(m);
}

#define ADD_COMP                                        \
  "add_f32 {\n"                                         \
  "  a = f32[] parameter(0)\n"                          \
  "  b = f32[] parameter(1)\n"                          \
  "  ROOT s = f32[] add(a, b)\n"                        \
  "}\n"

/* ---- shape inference: known answers per family ---------------------------- */

START_TEST(infer_elementwise) {
  const char *t =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[2,3] parameter(0)\n"
      "  q = f32[2,3] parameter(1)\n"
      "  c = c64[4] parameter(2)\n"
      "  i = s32[4] parameter(3)\n"
      "  add = f32[2,3] add(p, q)\n"
      "  cmp = pred[2,3] compare(p, q), direction=LT\n"
      "  cvt = s32[2,3] convert(p)\n"
      "  abs = f32[4] abs(c)\n"
      "  fin = pred[2,3] is-finite(p)\n"
      "  bc = u8[2,3,4] bitcast-convert(p)\n"
      "  cx = c64[2,3] complex(p, q)\n"
      "  sel = f32[2,3] select(cmp, p, q)\n"
      "  lo = f32[] constant(0)\n"
      "  cl = f32[2,3] clamp(lo, p, lo)\n"
      "  sh = s32[4] shift-left(i, i)\n"
      "  ROOT t = (f32[2,3]) tuple(add)\n"
      "}\n";
  expect_infer(t, "add", "f32[2,3]");
  expect_infer(t, "cmp", "pred[2,3]");
  expect_infer(t, "cvt", "s32[2,3]");
  expect_infer(t, "abs", "f32[4]");
  expect_infer(t, "fin", "pred[2,3]");
  expect_infer(t, "bc", "u8[2,3,4]");
  expect_infer(t, "cx", "c64[2,3]");
  expect_infer(t, "sel", "f32[2,3]");
  expect_infer(t, "cl", "f32[2,3]");
  expect_infer(t, "sh", "s32[4]");
  expect_infer(t, "t", "(f32[2,3])");
}
END_TEST

START_TEST(infer_data_movement) {
  const char *t =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[2,3] parameter(0)\n"
      "  v = f32[3] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  u = f32[1,2] parameter(3)\n"
      "  z = f32[] constant(0)\n"
      "  b = f32[4,2,3] broadcast(p), dimensions={1,2}\n"
      "  bv = f32[2,3] broadcast(v), dimensions={1}\n"
      "  r = f32[3,2] reshape(p)\n"
      "  tr = f32[3,2] transpose(p), dimensions={1,0}\n"
      "  sl = f32[1,2] slice(p), slice={[1:2], [0:3:2]}\n"
      "  ds = f32[1,2] dynamic-slice(p, i, i), dynamic_slice_sizes={1,2}\n"
      "  dus = f32[2,3] dynamic-update-slice(p, u, i, i)\n"
      "  pd = f32[8] pad(v, z), padding=1_2_1\n"
      "  cc = f32[2,6] concatenate(p, p), dimensions={1}\n"
      "  rv = f32[2,3] reverse(p), dimensions={0}\n"
      "  io = s32[4,5] iota(), iota_dimension=1\n"
      "  gds = s32[] get-dimension-size(p), dimensions={1}\n"
      "  pid = u32[] partition-id()\n"
      "  ROOT t = (f32[2,3]) tuple(p)\n"
      "}\n";
  expect_infer(t, "b", "f32[4,2,3]");
  expect_infer(t, "bv", "f32[2,3]");
  expect_infer(t, "r", "f32[3,2]");
  expect_infer(t, "tr", "f32[3,2]");
  expect_infer(t, "sl", "f32[1,2]");
  expect_infer(t, "ds", "f32[1,2]");
  expect_infer(t, "dus", "f32[2,3]");
  expect_infer(t, "pd", "f32[8]");
  expect_infer(t, "cc", "f32[2,6]");
  expect_infer(t, "rv", "f32[2,3]");
  expect_infer(t, "io", "s32[4,5]");
  expect_infer(t, "gds", "s32[]");
  expect_infer(t, "pid", "u32[]");
}
END_TEST

START_TEST(infer_reductions) {
  const char *t =
      "HloModule m\n" ADD_COMP
      "argmax {\n"
      "  a = f32[] parameter(0)\n"
      "  ai = s32[] parameter(1)\n"
      "  b = f32[] parameter(2)\n"
      "  bi = s32[] parameter(3)\n"
      "  g = pred[] compare(a, b), direction=GE\n"
      "  m = f32[] select(g, a, b)\n"
      "  mi = s32[] select(g, ai, bi)\n"
      "  ROOT r = (f32[], s32[]) tuple(m, mi)\n"
      "}\n"
      "ge {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT g = pred[] compare(a, b), direction=GE\n"
      "}\n"
      "sortcmp {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  c = s32[] parameter(2)\n"
      "  d = s32[] parameter(3)\n"
      "  ROOT l = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4,6] parameter(0)\n"
      "  i = s32[4,6] parameter(1)\n"
      "  z = f32[] constant(0)\n"
      "  zi = s32[] constant(0)\n"
      "  red = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32\n"
      "  red2 = (f32[6], s32[6]) reduce(p, i, z, zi), dimensions={0}, to_apply=argmax\n"
      "  rw = f32[2,3] reduce-window(p, z), window={size=2x2 stride=2x2}, to_apply=add_f32\n"
      "  rwp = f32[4,6] reduce-window(p, z), window={size=3x3 pad=1_1x1_1}, to_apply=add_f32\n"
      "  src = f32[2,3] parameter(2)\n"
      "  sas = f32[4,6] select-and-scatter(p, src, z), window={size=2x2 stride=2x2}, select=ge, scatter=add_f32\n"
      "  mp = f32[4,6] map(p, p), dimensions={0,1}, to_apply=add_f32\n"
      "  srt = (f32[4,6], s32[4,6]) sort(p, i), dimensions={1}, to_apply=sortcmp\n"
      "  ROOT out = (f32[4]) tuple(red)\n"
      "}\n";
  expect_infer(t, "red", "f32[4]");
  expect_infer(t, "red2", "(f32[6], s32[6])");
  expect_infer(t, "rw", "f32[2,3]");
  expect_infer(t, "rwp", "f32[4,6]");
  expect_infer(t, "sas", "f32[4,6]");
  expect_infer(t, "mp", "f32[4,6]");
  expect_infer(t, "srt", "(f32[4,6], s32[4,6])");
  expect_verifies(t);
}
END_TEST

START_TEST(infer_dot_conv) {
  const char *t =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3,4] parameter(0)\n"
      "  b = f32[2,4,5] parameter(1)\n"
      "  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
      "  x = f32[7,4] parameter(2)\n"
      "  y = f32[4,9,2] parameter(3)\n"
      "  d2 = f32[7,9,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  i8 = s8[7,4] parameter(4)\n"
      "  j8 = s8[4,3] parameter(5)\n"
      "  d3 = s32[7,3] dot(i8, j8), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  in = f32[1,5,5,2] parameter(6)\n"
      "  k = f32[3,3,2,4] parameter(7)\n"
      "  c1 = f32[1,3,3,4] convolution(in, k), window={size=3x3}, dim_labels=b01f_01io->b01f\n"
      "  c2 = f32[1,5,5,4] convolution(in, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f\n"
      "  c3 = f32[1,2,2,4] convolution(in, k), window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f\n"
      "  kg = f32[3,3,1,4] parameter(8)\n"
      "  c4 = f32[1,3,3,4] convolution(in, kg), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=2\n"
      "  ROOT t = (f32[2,3,5]) tuple(d)\n"
      "}\n";
  expect_infer(t, "d", "f32[2,3,5]");
  expect_infer(t, "d2", "f32[7,9,2]");
  expect_infer(t, "d3", "s32[7,3]");
  expect_infer(t, "c1", "f32[1,3,3,4]");
  expect_infer(t, "c2", "f32[1,5,5,4]");
  expect_infer(t, "c3", "f32[1,2,2,4]");
  expect_infer(t, "c4", "f32[1,3,3,4]");
  expect_verifies(t);
}
END_TEST

START_TEST(infer_gather_scatter) {
  const char *t =
      "HloModule m\n" ADD_COMP
      "ENTRY e {\n"
      "  op = f32[5,7] parameter(0)\n"
      "  idx = s32[3,1] parameter(1)\n"
      "  g = f32[3,7] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,7}\n"
      "  idx2 = s32[4,2] parameter(2)\n"
      "  g2 = f32[4,2,3] gather(op, idx2), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,3}\n"
      "  up = f32[3,7] parameter(3)\n"
      "  sc = f32[5,7] scatter(op, idx, up), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32\n"
      "  ROOT out = (f32[3,7]) tuple(g)\n"
      "}\n";
  expect_infer(t, "g", "f32[3,7]");
  expect_infer(t, "g2", "f32[4,2,3]");
  expect_infer(t, "sc", "f32[5,7]");
  expect_verifies(t);
}
END_TEST

/* Found by the pipeline fuzzer: batching dims of the indices that are
 * missing (the partitioner read past them) or name the index vector dim. */
START_TEST(gather_scatter_index_batching_dims_checked) {
  const char *scatter =
      "HloModule m\n" ADD_COMP
      "ENTRY e {\n"
      "  op = f32[10,6,14,4] parameter(0)\n"
      "  idx = s32[14,10,6,2] parameter(1)\n"
      "  up = f32[14,10,6,2] parameter(2)\n"
      "  ROOT sc = f32[10,6,14,4] scatter(op, idx, up), update_window_dims={3}, inserted_window_dims={1},\n"
      "    scatter_dims_to_operand_dims={1,3}, input_batching_dims={0,2}, index_vector_dim=3, to_apply=add_f32\n"
      "}\n";
  expect_text_verify_error(scatter, "'sc'", "input_batching_dims and scatter_indices_batching_dims differ");
  const char *gather =
      "HloModule m\n"
      "ENTRY e {\n"
      "  op = f32[4,8] parameter(0)\n"
      "  idx = s32[4,1] parameter(1)\n"
      "  ROOT g = f32[4] gather(op, idx), offset_dims={}, collapsed_slice_dims={1}, operand_batching_dims={0},\n"
      "    start_indices_batching_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={1,1}\n"
      "}\n";
  expect_text_verify_error(gather, "'g'", "must not contain index_vector_dim");
}
END_TEST

/* Found by the pipeline fuzzer: a computation calling itself made the
 * partitioner's walks loop; the verifier refuses call graph cycles. */
START_TEST(recursive_call_graph_rejected) {
  expect_text_verify_error(
      "HloModule m\n"
      "f {\n  p = f32[4] parameter(0)\n  ROOT c = f32[4] call(p), to_apply=f\n}\n"
      "ENTRY e {\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] call(x), to_apply=f\n}\n",
      "the call graph has a cycle", NULL);
}
END_TEST

START_TEST(infer_control_flow) {
  const char *t =
      "HloModule m\n"
      "cond {\n"
      "  p = (s32[], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(10)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n"
      "}\n"
      "body {\n"
      "  p = (s32[], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  v = f32[4] get-tuple-element(p), index=1\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  ROOT t = (s32[], f32[4]) tuple(i2, v)\n"
      "}\n"
      "neg {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT n = f32[4] negate(x)\n"
      "}\n"
      "ident {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT c = f32[4] copy(x)\n"
      "}\n"
      "fused {\n"
      "  x = f32[4] parameter(0)\n"
      "  y = f32[4] parameter(1)\n"
      "  ROOT m = f32[4] multiply(x, y)\n"
      "}\n"
      "ENTRY e {\n"
      "  v = f32[4] parameter(0)\n"
      "  z = s32[] constant(0)\n"
      "  init = (s32[], f32[4]) tuple(z, v)\n"
      "  w = (s32[], f32[4]) while(init), condition=cond, body=body\n"
      "  g = f32[4] get-tuple-element(w), index=1\n"
      "  b = pred[] constant(true)\n"
      "  cd = f32[4] conditional(b, g, g), true_computation=neg, false_computation=ident\n"
      "  cl = f32[4] call(cd), to_apply=neg\n"
      "  f = f32[4] fusion(cl, g), kind=kLoop, calls=fused\n"
      "  ROOT out = (f32[4], s32[]) tuple(f, z)\n"
      "}\n";
  expect_infer(t, "w", "(s32[], f32[4])");
  expect_infer(t, "g", "f32[4]");
  expect_infer(t, "cd", "f32[4]");
  expect_infer(t, "cl", "f32[4]");
  expect_infer(t, "f", "f32[4]");
  expect_infer(t, "out", "(f32[4], s32[])");
  expect_verifies(t);
}
END_TEST

START_TEST(infer_collectives) {
  const char *t =
      "HloModule m, replica_count=1, num_partitions=4\n" ADD_COMP
      "ENTRY e {\n"
      "  p = f32[2,8] parameter(0)\n"
      "  ar = f32[2,8] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add_f32\n"
      "  ag = f32[4,8] all-gather(p), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true\n"
      "  rs = f32[2,2] reduce-scatter(p), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={1}, use_global_device_ids=true, to_apply=add_f32\n"
      "  a2a = f32[2,8] all-to-all(p), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={1}\n"
      "  cp = f32[2,8] collective-permute(p), channel_id=5, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}\n"
      "  ags = (f32[2,8], f32[8,8]) all-gather-start(p), channel_id=6, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true\n"
      "  agd = f32[8,8] all-gather-done(ags)\n"
      "  ROOT t = (f32[2,8]) tuple(ar)\n"
      "}\n";
  expect_infer(t, "ar", "f32[2,8]");
  expect_infer(t, "ag", "f32[4,8]");
  expect_infer(t, "rs", "f32[2,2]");
  expect_infer(t, "a2a", "f32[2,8]");
  expect_infer(t, "cp", "f32[2,8]");
  expect_infer(t, "ags", "(f32[2,8], f32[8,8])");
  expect_infer(t, "agd", "f32[8,8]");
  expect_verifies(t);
}
END_TEST

START_TEST(infer_misc) {
  const char *t =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  r = f32[3,4] rng(a, b), distribution=rng_uniform\n"
      "  st = u64[2] parameter(2)\n"
      "  rb = (u64[2], u32[8]) rng-bit-generator(st), algorithm=rng_default\n"
      "  tok = token[] after-all()\n"
      "  inf = ((f32[2]), token[]) infeed(tok)\n"
      "  x = f32[4,10] parameter(3)\n"
      "  tk = (f32[4,3], s32[4,3]) topk(x), k=3, largest=true\n"
      "  ROOT t = (f32[3,4]) tuple(r)\n"
      "}\n";
  expect_infer(t, "r", "f32[3,4]");
  expect_infer(t, "rb", "(u64[2], u32[8])");
  expect_infer(t, "tok", "token[]");
  expect_infer(t, "inf", "((f32[2]), token[])");
  expect_infer(t, "tk", "(f32[4,3], s32[4,3])");
}
END_TEST

START_TEST(infer_rare_ops) {
  const char *t =
      "HloModule m\n"
      "ENTRY e {\n"
      "  f = f32[2,4] parameter(0)\n"
      "  c = c64[2,4] parameter(1)\n"
      "  u = u32[2,4] parameter(2)\n"
      "  s = s32[] parameter(3)\n"
      "  sq = f32[4,4] parameter(4)\n"
      "  feat = f32[4] parameter(5)\n"
      "  re = f32[2,4] real(c)\n"
      "  im = f32[2,4] imag(c)\n"
      "  at = f32[2,4] atan2(f, f)\n"
      "  nt = u32[2,4] not(u)\n"
      "  pc = u32[2,4] popcnt(u)\n"
      "  sr = u32[2,4] shift-right-logical(u, u)\n"
      "  rp = f32[2,4] reduce-precision(f), exponent_bits=5, mantissa_bits=10\n"
      "  ob = f32[2,4] opt-barrier(f)\n"
      "  sc = bf16[2,4] stochastic-convert(f, u)\n"
      "  sds = f32[<=2,4] set-dimension-size(f, s), dimensions={0}\n"
      "  dr = f32[8] dynamic-reshape(f, s)\n"
      "  ch = f32[4,4] cholesky(sq), lower=true\n"
      "  ts = f32[4,4] triangular-solve(sq, sq), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n"
      "  ff = c64[2,3] fft(f), fft_type=RFFT, fft_length={4}\n"
      "  iff = f32[2,4] fft(ff), fft_type=IRFFT, fft_length={4}\n"
      "  st = u64[2] rng-get-and-update-state(), delta=1\n"
      "  bn = f32[2,4] batch-norm-inference(f, feat, feat, feat, feat), epsilon=0.001, feature_index=1\n"
      "  bnt = (f32[2,4], f32[4], f32[4]) batch-norm-training(f, feat, feat), epsilon=0.001, feature_index=1\n"
      "  cs = (f32[2,4], f32[2,4], u32[]) copy-start(f)\n"
      "  cd = f32[2,4] copy-done(cs)\n"
      "  lhs = f32[6,4] parameter(6)\n"
      "  rhs = f32[3,4,5] parameter(7)\n"
      "  gs = s32[3] parameter(8)\n"
      "  rd = f32[6,5] ragged-dot(lhs, rhs, gs), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n"
      "  ROOT out = (f32[2,4]) tuple(cd)\n"
      "}\n";
  expect_infer(t, "re", "f32[2,4]");
  expect_infer(t, "im", "f32[2,4]");
  expect_infer(t, "at", "f32[2,4]");
  expect_infer(t, "nt", "u32[2,4]");
  expect_infer(t, "pc", "u32[2,4]");
  expect_infer(t, "sr", "u32[2,4]");
  expect_infer(t, "rp", "f32[2,4]");
  expect_infer(t, "ob", "f32[2,4]");
  expect_infer(t, "sc", "bf16[2,4]");
  expect_infer(t, "sds", "f32[<=2,4]");
  expect_infer(t, "dr", "f32[8]");
  expect_infer(t, "ch", "f32[4,4]");
  expect_infer(t, "ts", "f32[4,4]");
  expect_infer(t, "ff", "c64[2,3]");
  expect_infer(t, "iff", "f32[2,4]");
  expect_infer(t, "st", "u64[2]");
  expect_infer(t, "bn", "f32[2,4]");
  expect_infer(t, "bnt", "(f32[2,4], f32[4], f32[4])");
  expect_infer(t, "cs", "(f32[2,4], f32[2,4], u32[])");
  expect_infer(t, "cd", "f32[2,4]");
  expect_infer(t, "rd", "f32[6,5]");
}
END_TEST

START_TEST(infer_error_names_instruction) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  q = f32[3] parameter(1)\n"
      "  ROOT add.3 = f32[2] add(p, q)\n}\n");
  const hk_shape *s = NULL;
  hk_status *st = hk_infer_shape(m, hk_test_find(m, "add.3"), &s);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "add.3") && strstr(st->message, "main") &&
                    strstr(st->message, "f32[3]"),
                "message: %s", st->message);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* Ragged-dot group sizes of rank > 1 are XLA's [batch..., outer..., g]:
 * the lhs batch dims, then in each mode its own outer dims; [g] still
 * serves every position, and any other leading dims are an error. */
START_TEST(infer_ragged_dot_group_rows) {
#define RD_MOD(GS, RD)                                                                                           \
  "HloModule m\nENTRY e {\n  l = f32[2,5,3,4] parameter(0)\n  r = f32[6,2,4,7] parameter(1)\n  c = f32[2,4,3,7] parameter(2)\n" \
  "  g = s32[" GS "] parameter(3)\n  ROOT " RD "\n}\n"
  const char *nc = "d = f32[2,5,3,7] ragged-dot(l, r, g), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={3},"
                   " rhs_contracting_dims={2}, lhs_ragged_dims={2}, rhs_group_dims={0}";
  char text[1024];
  snprintf(text, sizeof text, RD_MOD("2,5,6", "%s"), nc);
  expect_infer(text, "d", "f32[2,5,3,7]");
  snprintf(text, sizeof text, RD_MOD("6", "%s"), nc);
  expect_infer(text, "d", "f32[2,5,3,7]");
  /* contracting, ragged 3 after contracting 1 in the list: [b, dim 1, g] */
  const char *ct = "d = f32[6,2,5,7] ragged-dot(l, c, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2,3},"
                   " rhs_contracting_dims={2,1}, lhs_ragged_dims={3}";
  snprintf(text, sizeof text, RD_MOD("2,3,6", "%s"), ct);
  expect_infer(text, "d", "f32[6,2,5,7]");
  /* batch: only the batch dims listed before the ragged one */
  snprintf(text, sizeof text, RD_MOD("6", "d = f32[2,5,7] ragged-dot(l, c, g), lhs_batch_dims={0}, rhs_batch_dims={0},"
                                          " lhs_contracting_dims={2,3}, rhs_contracting_dims={2,1}, lhs_ragged_dims={0}"));
  expect_infer(text, "d", "f32[2,5,7]");
  snprintf(text, sizeof text, RD_MOD("5,6", "%s"), nc);
  expect_text_verify_error(text, "group_sizes", "[2, 5, g]");
  snprintf(text, sizeof text, RD_MOD("2,4,6", "%s"), ct);
  expect_text_verify_error(text, "group_sizes", "[2, 3, g]");
#undef RD_MOD
}
END_TEST

/* ---- verifier ------------------------------------------------------------------ */

START_TEST(verify_wrong_operand_count) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n");
  hk_instr *n = hk_test_find(m, "n");
  hk_instr_append_operand(n, hk_test_find(m, "p"));
  expect_verify_error(m, "'n'", "expected 1 operands");
  hk_module_free(m);
}
END_TEST

START_TEST(verify_bad_shape) {
  expect_text_verify_error(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(1)\n"
      "  ROOT add.3 = f32[3] add(p, q)\n}\n",
      "instruction 'add.3' in computation 'main'", "f32[3]");
  expect_text_verify_error(
      "HloModule m\nENTRY main {\n  p = f32[2,3] parameter(0)\n"
      "  ROOT b = f32[2,4] broadcast(p), dimensions={0,1}\n}\n",
      "'b'", "broadcast");
  expect_text_verify_error(
      "HloModule m\nENTRY main {\n  p = f32[2,3] parameter(0)\n"
      "  ROOT d = f32[2,2] dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      "'d'", "contracting");
}
END_TEST

START_TEST(verify_bad_to_apply) {
  expect_text_verify_error(
      "HloModule m\nbad {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  c = f32[] parameter(2)\n  ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY main {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=bad\n}\n",
      "'r'", "must take 2 parameters");
  expect_text_verify_error(
      "HloModule m\ncond {\n  p = f32[] parameter(0)\n  ROOT c = f32[] copy(p)\n}\n"
      "body {\n  p = f32[] parameter(0)\n  ROOT c = f32[] copy(p)\n}\n"
      "ENTRY main {\n  p = f32[] parameter(0)\n"
      "  ROOT w = f32[] while(p), condition=cond, body=body\n}\n",
      "'w'", "pred[]");
}
END_TEST

START_TEST(verify_bad_sharding) {
  expect_text_verify_error(
      "HloModule m\nENTRY main {\n"
      "  ROOT p = f32[4] parameter(0), sharding={devices=[2,2]0,1,2,3}\n}\n",
      "'p'", "sharding");
  expect_text_verify_error(
      "HloModule m, num_partitions=2\nENTRY main {\n"
      "  ROOT p = f32[4] parameter(0), sharding={devices=[2]0,3}\n}\n",
      "'p'", "sharding");
  /* Without SPMD partitioning XLA does not range-check device ids. */
  expect_verifies("HloModule m\nENTRY main {\n"
                  "  ROOT p = f32[4] parameter(0), sharding={maximal device=7}\n}\n");
}
END_TEST

START_TEST(verify_duplicate_parameter) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(1)\n"
      "  ROOT a = f32[2] add(p, q)\n}\n");
  hk_instr_attrs(hk_test_find(m, "q"))->parameter_number = 0;
  expect_verify_error(m, "duplicate parameter number 0", "'main'");
  hk_module_free(m);
}
END_TEST

START_TEST(verify_cycle) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  n = f32[2] negate(p)\n"
      "  ROOT a = f32[2] abs(n)\n}\n");
  hk_instr_set_operand(hk_test_find(m, "n"), 0, hk_test_find(m, "a"));
  expect_verify_error(m, "cycle", NULL);
  hk_module_free(m);
}
END_TEST

/* An operand listed after its user is no cycle: the list-order shortcut
 * fails and the DFS decides; a real cycle through a later operand is
 * still found. */
START_TEST(verify_operand_listed_later) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  n = f32[2] negate(p)\n"
      "  a = f32[2] abs(n)\n  b = f32[2] negate(p)\n  ROOT t = (f32[2], f32[2]) tuple(a, b)\n}\n");
  hk_instr_set_operand(hk_test_find(m, "n"), 0, hk_test_find(m, "b"));
  ck_assert_ok(hk_verify_module(m, NULL));
  hk_instr_set_operand(hk_test_find(m, "b"), 0, hk_test_find(m, "a"));   /* b -> a -> n -> b */
  expect_verify_error(m, "cycle", NULL);
  hk_module_free(m);
}
END_TEST

START_TEST(verify_entry_layout) {
  expect_text_verify_error(
      "HloModule m, entry_computation_layout={(f32[3])->f32[3]}\nENTRY main {\n"
      "  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n",
      "entry computation", "f32[3]");
}
END_TEST

/* XLA's InferDotOpShape / InferConvolveShape take any operand element
 * types (the result type is the declared one) and dot and convolution are
 * on CheckMixedPrecisionOperands' allow list: bf16 x s8, s8 x bf16 -> f32,
 * f8 x f8 -> bf16, even pred, all verify.  HandleDot / HandleConvolution
 * refuse one packed_nibble operand, and two on other than 8-bit integers
 * (and on a grouped convolution). */
static void dot_conv_text(char *out, size_t cap, const char *lhs, const char *rhs, const char *res,
                          const char *extra, bool conv) {
  if (conv)
    snprintf(out, cap, "HloModule m\nENTRY e {\n  a = %s[1,4,4,2] parameter(0)\n  b = %s[2,2,2,3] parameter(1)\n"
             "  ROOT r = %s[1,3,3,3] convolution(a, b), window={size=2x2}, dim_labels=b01f_01io->b01f%s\n}\n",
             lhs, rhs, res, extra);
  else
    snprintf(out, cap, "HloModule m\nENTRY e {\n  a = %s[4,8] parameter(0)\n  b = %s[8,3] parameter(1)\n"
             "  ROOT r = %s[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}%s\n}\n",
             lhs, rhs, res, extra);
}

START_TEST(verify_mixed_precision_dot_and_convolution) {
  static const char *const ok[][3] = {
      {"bf16", "s8", "bf16"}, {"s8", "bf16", "f32"}, {"f32", "bf16", "bf16"}, {"u8", "s8", "s32"},
      {"f8e4m3fn", "f8e5m2", "bf16"}, {"s4", "bf16", "bf16"}, {"bf16", "s8", "s8"}, {"pred", "f32", "f32"}};
  char t[1024];
  for (int conv = 0; conv < 2; conv++) {
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
      dot_conv_text(t, sizeof t, ok[k][0], ok[k][1], ok[k][2], "", conv);
      expect_verifies(t);
    }
  }
}
END_TEST

/* XLA's HandleDot / HandleConvolution packed_nibble rules: both operands
 * or neither, 8-bit integers only, a convolution without groups. */
START_TEST(verify_packed_nibble) {
#define DOT_OF(lt, rt, prec)                                                               \
  "HloModule m\nENTRY main {\n  p = " lt "[2,8] parameter(0)\n  q = " rt "[8,4] parameter(1)\n" \
  "  ROOT d = s32[2,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "       \
  "operand_precision={" prec "}\n}\n"
  expect_verifies(DOT_OF("s8", "u8", "packed_nibble,packed_nibble"));
  expect_verifies(DOT_OF("f32", "f32", "high,default"));
  expect_text_verify_error(DOT_OF("s8", "s8", "packed_nibble,default"), "'d'",
                           "Dot cannot have a single packed nibble argument");
  expect_text_verify_error(DOT_OF("s8", "s16", "packed_nibble,packed_nibble"), "'d'",
                           "8 bit integers. RHS is q");
  expect_text_verify_error(DOT_OF("pred", "s8", "packed_nibble,packed_nibble"), "'d'",
                           "8 bit integers. LHS is p");
#undef DOT_OF
  const char *conv =
      "HloModule m\nENTRY main {\n  p = s8[1,4,4] parameter(0)\n  q = s8[1,2,2] parameter(1)\n"
      "  ROOT c = s32[1,4,2] convolution(p, q), window={size=1}, dim_labels=b0f_0io->b0f, "
      "feature_group_count=2, operand_precision={packed_nibble,packed_nibble}\n}\n";
  expect_text_verify_error(conv, "'c'", "does not support feature group count");
  expect_verifies(
      "HloModule m\nENTRY main {\n  p = s8[1,4,4] parameter(0)\n  q = s8[1,4,2] parameter(1)\n"
      "  ROOT c = s32[1,4,2] convolution(p, q), window={size=1}, dim_labels=b0f_0io->b0f, "
      "operand_precision={packed_nibble,packed_nibble}\n}\n");
}
END_TEST

/* XLA's CheckFusionInstruction: every non-root fused instruction (a
 * parameter too) has a user; a fusion with operands to spare is fine. */
START_TEST(verify_fused_users) {
  expect_verifies("HloModule m\nfc {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n"
                  "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT f = f32[4] fusion(p, p), kind=kLoop, calls=fc\n}\n");
  expect_text_verify_error(
      "HloModule m\nfc {\n  a = f32[4] parameter(0)\n  b = f32[4] negate(a)\n  ROOT n = f32[4] negate(a)\n}\n"
      "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT f = f32[4] fusion(p), kind=kLoop, calls=fc\n}\n",
      "'f'", "non-root instruction 'b' of the fused computation 'fc' must have users");
  expect_text_verify_error(
      "HloModule m\nfc {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n  ROOT n = f32[4] negate(a)\n}\n"
      "ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT f = f32[4] fusion(p, p), kind=kLoop, calls=fc\n}\n",
      "'f'", "non-root instruction 'b'");
}
END_TEST

START_TEST(verify_more_rejections) {
  /* Mixed precision is not allowed for elementwise ops. */
  expect_text_verify_error(
      "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  q = bf16[2] parameter(1)\n"
      "  ROOT a = f32[2] add(p, q)\n}\n",
      "'a'", "mixed precision");
  /* All-gather output does not match the replica group size. */
  expect_text_verify_error(
      "HloModule m, num_partitions=4\nENTRY main {\n  p = f32[2] parameter(0)\n"
      "  ROOT ag = f32[4] all-gather(p), channel_id=1, replica_groups={{0,1,2,3}}, "
      "dimensions={0}, use_global_device_ids=true\n}\n",
      "'ag'", "shard_count = 2, subgroup_size = 4");
  /* Replica ids repeated. */
  expect_text_verify_error(
      "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\nENTRY main {\n  p = f32[2] parameter(0)\n"
      "  ROOT ar = f32[2] all-reduce(p), replica_groups={{0,0}}, to_apply=add\n}\n",
      "'ar'", "repeated");
  /* While and its body disagree on sharding. */
  expect_text_verify_error(
      "HloModule m\ncond {\n  p = f32[4] parameter(0)\n  ROOT t = pred[] constant(false)\n}\n"
      "body {\n  p = f32[4] parameter(0), sharding={replicated}\n"
      "  ROOT n = f32[4] negate(p), sharding={replicated}\n}\n"
      "ENTRY main {\n  v = f32[4] parameter(0)\n"
      "  ROOT w = f32[4] while(v), condition=cond, body=body, sharding={maximal device=0}\n}\n",
      "'w'", "inconsistent while sharding");
  /* Conditional branch parameter does not match its operand. */
  expect_text_verify_error(
      "HloModule m\nb0 {\n  x = f32[3] parameter(0)\n  ROOT n = f32[3] negate(x)\n}\n"
      "b1 {\n  y = f32[2] parameter(0)\n  ROOT z = f32[3] broadcast(f32[] constant(1)), dimensions={}\n}\n"
      "ENTRY main {\n  i = s32[] parameter(0)\n  v = f32[3] parameter(1)\n"
      "  ROOT c = f32[3] conditional(i, v, v), branch_computations={b0, b1}\n}\n",
      "'c'", "parameter 0 of computation 'b1'");
  /* Sort comparator must return pred[]. */
  expect_text_verify_error(
      "HloModule m\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n}\nENTRY main {\n  p = f32[4] parameter(0)\n"
      "  ROOT so = f32[4] sort(p), dimensions={0}, to_apply=cmp\n}\n",
      "'so'", "pred[]");
}
END_TEST

START_TEST(verify_conditional_predicate_type) {
  /* XLA's parser rejects this text, so build it by retyping the index. */
  hk_module *m = parse_or_die(
      "HloModule m\nb0 {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] ceil(x)\n}\n"
      "b1 {\n  y = f32[4] parameter(0)\n  ROOT z = f32[4] floor(y)\n}\n"
      "ENTRY main {\n  v = f32[4] parameter(0)\n  i = s32[] parameter(1)\n"
      "  ROOT c = f32[4] conditional(i, v, v), branch_computations={b0, b1}\n}\n");
  ck_assert_ok(hk_verify_module(m, NULL));
  hk_test_find(m, "i")->shape = hk_shape_scalar(m, HK_F32);
  expect_verify_error(m, "'c'", "must be a scalar of PRED or S32");
  hk_module_free(m);
}
END_TEST

START_TEST(verify_layout_sensitive_bitcast) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  c = f32[2] constant({0, 0})\n"
      "  ROOT b = f32[3] bitcast(c)\n}\n");
  hk_verify_options o = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &o)); /* XLA checks sizes only when layout-sensitive */
  o.layout_sensitive = true;
  hk_status *st = hk_verify_module(m, &o);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "'b'") && strstr(st->message, "(12)") &&
                    strstr(st->message, "(8)"), "message: %s", st->message);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

START_TEST(verify_parameter_replication_count) {
  hk_module *m = parse_or_die(
      "HloModule m\nENTRY main {\n  p = (f32[], f32[]) parameter(0)\n"
      "  ROOT g = f32[] get-tuple-element(p), index=0\n}\n");
  static const bool three[3] = {true, false, true};
  hk_attrs *a = hk_instr_attrs(hk_test_find(m, "p"));
  a->n_parameter_replication = 3;
  a->parameter_replication = three;
  expect_verify_error(m, "'p'", "2 leaf buffers, but parameter_replication has 3");
  hk_module_free(m);
}
END_TEST

/* ---- call graph ---------------------------------------------------------------- */

static const char *kWhileModule =
    "HloModule m\n" ADD_COMP
    "cond {\n  p = f32[4] parameter(0)\n  ROOT t = pred[] constant(false)\n}\n"
    "body {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
    "  r = f32[] reduce(p, z), dimensions={0}, to_apply=add_f32\n"
    "  ROOT b = f32[4] broadcast(r), dimensions={}\n}\n"
    "ENTRY e {\n  v = f32[4] parameter(0)\n"
    "  ROOT w = f32[4] while(v), condition=cond, body=body\n}\n";

START_TEST(call_graph_while) {
  hk_module *m = parse_or_die(kWhileModule);
  ck_assert_ok(hk_verify_module(m, NULL));
  hk_call_graph *g = hk_call_graph_build(m);
  ck_assert_ptr_nonnull(g);
  hk_call_graph_node *e = hk_call_graph_node_of(g, m->entry);
  hk_call_graph_node *body = hk_call_graph_node_of(g, hk_module_find_computation(m, "body"));
  hk_call_graph_node *add = hk_call_graph_node_of(g, hk_module_find_computation(m, "add_f32"));
  ck_assert_int_eq(e->context, HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(e->n_callers, 0);
  ck_assert_int_eq(e->n_callees, 2);
  ck_assert_int_eq(body->context, HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(body->n_callers, 1);
  ck_assert_str_eq(body->callers[0].instr->name, "w");
  ck_assert_int_eq(add->context, HK_CALL_EMBEDDED);
  ck_assert_int_eq(add->callers[0].context, HK_CALL_EMBEDDED);
  ck_assert(hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  hk_module_free(m);
}
END_TEST

START_TEST(call_graph_not_flattened) {
  /* One computation called twice by call: not flattened. */
  hk_module *m = parse_or_die(
      "HloModule m\nneg {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n"
      "ENTRY e {\n  v = f32[4] parameter(0)\n  a = f32[4] call(v), to_apply=neg\n"
      "  ROOT b = f32[4] call(a), to_apply=neg\n}\n");
  hk_call_graph *g = hk_call_graph_build(m);
  ck_assert_int_eq(hk_call_graph_node_of(g, hk_module_find_computation(m, "neg"))->n_callers, 2);
  ck_assert(!hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  hk_module_free(m);
  /* Called both from a call and as a map's to_apply: context both. */
  m = parse_or_die(
      "HloModule m\nneg {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"
      "ENTRY e {\n  v = f32[4] parameter(0)\n  s = f32[] parameter(1)\n"
      "  a = f32[4] map(v), dimensions={0}, to_apply=neg\n"
      "  b = f32[] call(s), to_apply=neg\n  ROOT t = (f32[4], f32[]) tuple(a, b)\n}\n");
  g = hk_call_graph_build(m);
  ck_assert_int_eq(hk_call_graph_node_of(g, hk_module_find_computation(m, "neg"))->context,
                   HK_CALL_BOTH);
  ck_assert(!hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  hk_module_free(m);
}
END_TEST

START_TEST(call_graph_fusion_embedded) {
  hk_module *m = parse_or_die(
      "HloModule m\nfused {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n"
      "ENTRY e {\n  v = f32[4] parameter(0)\n  a = f32[4] fusion(v), kind=kLoop, calls=fused\n"
      "  ROOT b = f32[4] fusion(a), kind=kLoop, calls=fused\n}\n");
  hk_call_graph *g = hk_call_graph_build(m);
  hk_call_graph_node *f = hk_call_graph_node_of(g, hk_module_find_computation(m, "fused"));
  ck_assert_int_eq(f->context, HK_CALL_EMBEDDED);
  ck_assert_int_eq(f->n_callers, 2);
  ck_assert(hk_call_graph_is_flattened(g)); /* embedded callees may be shared */
  ck_assert_int_eq(hk_opcode_call_context(HK_OP_WHILE), HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(hk_opcode_call_context(HK_OP_ASYNC_START), HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(hk_opcode_call_context(HK_OP_SORT), HK_CALL_EMBEDDED);
  ck_assert_int_eq(hk_opcode_call_context(HK_OP_ADD), HK_CALL_NONE);
  hk_call_graph_free(g);
  hk_module_free(m);
}
END_TEST

/* ---- conformance corpus -------------------------------------------------------- */

typedef struct corpus_tally {
  int total, parsed, verified;
} corpus_tally;

static bool parser_case_must_verify(json_object *o) {
  json_object *v, *k, *ik;
  if (!json_object_object_get_ex(o, "verify", &v) || !json_object_get_boolean(v)) return false;
  if (!json_object_object_get_ex(o, "input_kind", &ik) ||
      strcmp(json_object_get_string(ik), "module") != 0)
    return false;
  if (!json_object_object_get_ex(o, "kind", &k)) return false;
  const char *kind = json_object_get_string(k);
  return strcmp(kind, "roundtrip") == 0 || strcmp(kind, "parse_ok") == 0 ||
         strcmp(kind, "non_roundtrip") == 0;
}

/* Verifies every module in FILE that XLA verified; prints each rejection. */
static corpus_tally run_corpus(const char *file, bool parser) {
  corpus_tally t = {0, 0, 0};
  char path[512];
  snprintf(path, sizeof path, "%s/%s", hk_test_conformance_dir(), file);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "skipping %s: not found\n", path);
    return t;
  }
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *o = json_tokener_parse(line), *h, *nm;
    if (!o) continue;
    if ((!parser || parser_case_must_verify(o)) && json_object_object_get_ex(o, "hlo", &h)) {
      const char *name = json_object_object_get_ex(o, "name", &nm) ? json_object_get_string(nm) : "?";
      const char *text = json_object_get_string(h);
      hk_module *m = NULL;
      t.total++;
      hk_status *st = hk_parse_module(text, strlen(text), name, &m);
      if (st) {
        fprintf(stderr, "[%s] %s: parse: %.200s\n", file, name, st->message);
      } else {
        t.parsed++;
        st = hk_verify_module(m, NULL);
        if (st) fprintf(stderr, "[%s] %s: verify: %.300s\n", file, name, st->message);
        else t.verified++;
      }
      hk_status_free(st);
      hk_module_free(m);
    }
    json_object_put(o);
  }
  free(line);
  fclose(f);
  fprintf(stderr, "%s: %d modules, %d parsed, %d verified\n", file, t.total, t.parsed,
          t.verified);
  return t;
}

/* parser.jsonl `error` cases: each must be rejected by the parser or, when
 * the parser accepts it, by the verifier.  Returns how many slip through. */
static int run_error_cases(int *by_parser, int *by_verifier) {
  char path[512];
  snprintf(path, sizeof path, "%s/parser.jsonl", hk_test_conformance_dir());
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char *line = NULL;
  size_t cap = 0;
  int slipped = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *o = json_tokener_parse(line), *k, *ik, *h, *nm;
    if (!o) continue;
    if (json_object_object_get_ex(o, "kind", &k) &&
        strcmp(json_object_get_string(k), "error") == 0 &&
        json_object_object_get_ex(o, "input_kind", &ik) &&
        strcmp(json_object_get_string(ik), "module") == 0 &&
        json_object_object_get_ex(o, "hlo", &h)) {
      const char *text = json_object_get_string(h);
      const char *name = json_object_object_get_ex(o, "name", &nm) ? json_object_get_string(nm) : "?";
      hk_module *m = NULL;
      hk_status *st = hk_parse_module(text, strlen(text), name, &m);
      if (st) {
        (*by_parser)++;
      } else if ((st = hk_verify_module(m, NULL)) != NULL) {
        (*by_verifier)++;
        fprintf(stderr, "[parser.jsonl error] %s: rejected by the verifier: %.200s\n", name,
                st->message);
      } else {
        slipped++;
        fprintf(stderr, "[parser.jsonl error] %s: accepted by parser and verifier\n", name);
      }
      hk_status_free(st);
      hk_module_free(m);
    }
    json_object_put(o);
  }
  free(line);
  fclose(f);
  return slipped;
}

START_TEST(conformance_error_cases_rejected) {
  int by_parser = 0, by_verifier = 0;
  int slipped = run_error_cases(&by_parser, &by_verifier);
  fprintf(stderr, "parser.jsonl error cases: %d rejected by the parser, %d by the verifier, "
          "%d accepted\n", by_parser, by_verifier, slipped);
  ck_assert_int_eq(slipped, 0);
}
END_TEST

/* Rewires operand 0 of each instruction to each earlier instruction of its
 * computation: the verifier and inference must answer (accept or reject)
 * without crashing, and the module must verify again once restored. */
static void rewire_all(hk_module *m, int *tries, int *rejected) {
  for (int32_t c = 0; c < m->n_computations; c++) {
    hk_computation *comp = m->computations[c];
    for (hk_instr *i = comp->first; i; i = i->next) {
      if (i->n_operands < 1) continue;
      hk_instr *orig = i->operands[0];
      for (hk_instr *j = comp->first; j && j != i; j = j->next) {
        if (j == orig) continue;
        hk_instr_set_operand(i, 0, j);
        hk_status *st = hk_verify_module(m, NULL);
        (*tries)++;
        *rejected += st != NULL;
        hk_status_free(st);
        const hk_shape *s = NULL;
        hk_status_free(hk_infer_shape(m, i, &s));
        hk_instr_set_operand(i, 0, orig);
      }
    }
  }
}

START_TEST(verify_survives_rewired_operands) {
  char path[512];
  snprintf(path, sizeof path, "%s/parser.jsonl", hk_test_conformance_dir());
  FILE *f = fopen(path, "r");
  if (!f) return;
  char *line = NULL;
  size_t cap = 0;
  int tries = 0, rejected = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *o = json_tokener_parse(line), *h;
    if (o && parser_case_must_verify(o) && json_object_object_get_ex(o, "hlo", &h)) {
      const char *text = json_object_get_string(h);
      hk_module *m = NULL;
      hk_status *st = hk_parse_module(text, strlen(text), "rewire", &m);
      if (!st) {
        rewire_all(m, &tries, &rejected);
        ck_assert_ok(hk_verify_module(m, NULL));
      }
      hk_status_free(st);
      hk_module_free(m);
    }
    json_object_put(o);
  }
  free(line);
  fclose(f);
  fprintf(stderr, "rewired operands: %d variants, %d rejected\n", tries, rejected);
  ck_assert_int_gt(rejected, 0);
}
END_TEST

START_TEST(conformance_corpus_verifies) {
  static const struct { const char *file; bool parser; } files[] = {
      {"spmd.jsonl", false}, {"propagation.jsonl", false}, {"parser.jsonl", true},
      {"stateful_rng.jsonl", false}};
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    corpus_tally t = run_corpus(files[k].file, files[k].parser);
    /* Everything XLA verified must verify here (modules that parse). */
    ck_assert_msg(t.verified == t.parsed, "%s: %d of %d parsed modules rejected", files[k].file,
                  t.parsed - t.verified, t.parsed);
  }
}
END_TEST

static Suite *analysis_suite(void) {
  Suite *s = suite_create("analysis");
  TCase *tc = tcase_create("infer");
  tcase_add_test(tc, infer_elementwise);
  tcase_add_test(tc, infer_data_movement);
  tcase_add_test(tc, infer_reductions);
  tcase_add_test(tc, infer_dot_conv);
  tcase_add_test(tc, verify_mixed_precision_dot_and_convolution);
  tcase_add_test(tc, infer_gather_scatter);
  tcase_add_test(tc, infer_control_flow);
  tcase_add_test(tc, infer_collectives);
  tcase_add_test(tc, infer_misc);
  tcase_add_test(tc, infer_rare_ops);
  tcase_add_test(tc, infer_error_names_instruction);
  tcase_add_test(tc, infer_ragged_dot_group_rows);
  suite_add_tcase(s, tc);
  tc = tcase_create("verify");
  tcase_add_test(tc, verify_wrong_operand_count);
  tcase_add_test(tc, verify_bad_shape);
  tcase_add_test(tc, verify_bad_to_apply);
  tcase_add_test(tc, verify_bad_sharding);
  tcase_add_test(tc, verify_duplicate_parameter);
  tcase_add_test(tc, verify_cycle);
  tcase_add_test(tc, verify_operand_listed_later);
  tcase_add_test(tc, verify_entry_layout);
  tcase_add_test(tc, verify_more_rejections);
  tcase_add_test(tc, verify_packed_nibble);
  tcase_add_test(tc, verify_fused_users);
  tcase_add_test(tc, verify_conditional_predicate_type);
  tcase_add_test(tc, verify_layout_sensitive_bitcast);
  tcase_add_test(tc, verify_parameter_replication_count);
  suite_add_tcase(s, tc);
  tc = tcase_create("call_graph");
  tcase_add_test(tc, call_graph_while);
  tcase_add_test(tc, call_graph_not_flattened);
  tcase_add_test(tc, call_graph_fusion_embedded);
  suite_add_tcase(s, tc);
  tc = tcase_create("conformance");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, conformance_corpus_verifies);
  tcase_add_test(tc, conformance_error_cases_rejected);
  tcase_add_test(tc, verify_survives_rewired_operands);
  tcase_add_test(tc, gather_scatter_index_batching_dims_checked);
  tcase_add_test(tc, recursive_call_graph_rejected);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(analysis_suite)
