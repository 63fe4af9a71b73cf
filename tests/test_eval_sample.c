/* test_eval_sample.c - the sampled (demand-driven) checker: hand-written
 * partitioned modules that are right (equal) or wrong (caught), a 2^30-
 * element dot that is never materialised, while loops, and clean errors
 * for ops it does not support. */
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

static hk_sample_result compare(const char *global, const char *part, int64_t parts,
                                int64_t samples) {
  hk_module *g = hk_test_parse(global), *p = hk_test_parse(part);
  hk_sample_options o = {.seed = 7, .samples = samples, .atol = -1, .rtol = -1};
  hk_sample_result r;
  ck_assert_ok(hk_eval_compare_sampled(g, p, parts, 1, &o, &r));
  hk_module_free(g);
  hk_module_free(p);
  return r;
}

/* The partitioned module gives exactly the global one's values. */
static void expect_exactly_equal(const char *global, const char *part, int64_t parts, int64_t samples) {
  hk_sample_result r = compare(global, part, parts, samples);
  ck_assert(r.equal);
  ck_assert(r.max_abs_error == 0);
  hk_sample_result_free(&r);
}

/* ---- a contracting-dim-partitioned dot ------------------------------------- */

static const char *dot_global =
    "HloModule g\n"
    "ENTRY e {\n"
    "  a = f32[8,16] parameter(0)\n"
    "  b = f32[16,4] parameter(1)\n"
    "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

/* Each device holds half of the contracting dim; %s is the all-reduce's
 * replica groups. */
static const char *dot_part_fmt =
    "HloModule p, num_partitions=2, spmd_output_sharding={replicated}, "
    "spmd_parameters_shardings={{devices=[1,2]0,1},{devices=[2,1]0,1}}\n"
    "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  a = f32[8,8] parameter(0)\n"
    "  b = f32[8,4] parameter(1)\n"
    "  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT r = f32[8,4] all-reduce(d), channel_id=1, replica_groups=%s, use_global_device_ids=true, to_apply=add\n"
    "}\n";

START_TEST(test_dot_all_reduce_equal) {
  char part[2048];
  snprintf(part, sizeof part, dot_part_fmt, "{{0,1}}");
  hk_sample_result r = compare(dot_global, part, 2, 64);
  ck_assert(r.equal);
  ck_assert_int_ge(r.samples, 64);
  ck_assert(!r.has_mismatch);
  ck_assert(r.max_abs_error < 1e-5);
  hk_sample_result_free(&r);
}
END_TEST

START_TEST(test_wrong_replica_groups_caught) {
  char part[2048];
  snprintf(part, sizeof part, dot_part_fmt, "{{0},{1}}");
  hk_sample_result r = compare(dot_global, part, 2, 64);
  ck_assert(!r.equal);
  ck_assert(r.has_mismatch);
  ck_assert_int_eq(r.mismatch_leaf, 0);
  ck_assert(r.max_abs_error > 1e-3);
  hk_sample_result_free(&r);
}
END_TEST

START_TEST(test_missing_all_reduce_caught) {
  const char *part =
      "HloModule p, num_partitions=2, spmd_output_sharding={replicated}, "
      "spmd_parameters_shardings={{devices=[1,2]0,1},{devices=[2,1]0,1}}\n"
      "ENTRY e {\n"
      "  a = f32[8,8] parameter(0)\n"
      "  b = f32[8,4] parameter(1)\n"
      "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  hk_sample_result r = compare(dot_global, part, 2, 32);
  ck_assert(!r.equal);
  ck_assert(r.has_mismatch);
  hk_sample_result_free(&r);
}
END_TEST

/* ---- all-gather, reduce-scatter, all-to-all, collective-permute -------------- */

START_TEST(test_all_gather_and_slices_equal) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[8,6] parameter(0)\n"
      "  t = f32[6,8] transpose(a), dimensions={1,0}\n"
      "  ROOT n = f32[6,8] negate(t)\n"
      "}\n";
  /* Rows of a are sharded; each device negates its piece, the pieces are
   * gathered and transposed. */
  const char *p =
      "HloModule p, num_partitions=4, spmd_output_sharding={replicated}, "
      "spmd_parameters_shardings={{devices=[4,1]0,1,2,3}}\n"
      "ENTRY e {\n"
      "  a = f32[2,6] parameter(0)\n"
      "  n = f32[2,6] negate(a)\n"
      "  g = f32[8,6] all-gather(n), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true\n"
      "  ROOT t = f32[6,8] transpose(g), dimensions={1,0}\n"
      "}\n";
  hk_sample_result r = compare(g, p, 4, 64);
  ck_assert(r.equal);
  ck_assert_int_ge(r.samples, 64);
  ck_assert(r.max_abs_error == 0);
  hk_sample_result_free(&r);
}
END_TEST

START_TEST(test_reduce_scatter_tiled_output_equal) {
  const char *g =
      "HloModule g\n"
      "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
      "ENTRY e {\n"
      "  a = f32[8,12] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[8] reduce(a, z), dimensions={1}, to_apply=add\n"
      "}\n";
  /* Columns sharded: local sums, then reduce-scatter leaves each device a
   * quarter of the rows. */
  const char *p =
      "HloModule p, num_partitions=4, spmd_output_sharding={devices=[4]0,1,2,3}, "
      "spmd_parameters_shardings={{devices=[1,4]0,1,2,3}}\n"
      "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
      "ENTRY e {\n"
      "  a = f32[8,3] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[8] reduce(a, z), dimensions={1}, to_apply=add\n"
      "  ROOT s = f32[2] reduce-scatter(r), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, to_apply=add\n"
      "}\n";
  hk_sample_result r = compare(g, p, 4, 32);
  ck_assert(r.equal);
  ck_assert(r.max_abs_error < 1e-5);
  hk_sample_result_free(&r);
}
END_TEST

START_TEST(test_collective_permute_wrong_pairs_caught) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[8] parameter(0)\n"
      "  ROOT r = f32[8] reverse(a), dimensions={0}\n"
      "}\n";
  /* Reversing a 2-way sharded vector: each device reverses its half and
   * swaps halves with the other; %s are the source-target pairs. */
  const char *fmt =
      "HloModule p, num_partitions=2, spmd_output_sharding={devices=[2]0,1}, "
      "spmd_parameters_shardings={{devices=[2]0,1}}\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  r = f32[4] reverse(a), dimensions={0}\n"
      "  ROOT c = f32[4] collective-permute(r), channel_id=1, source_target_pairs=%s\n"
      "}\n";
  char right[1024], wrong[1024];
  snprintf(right, sizeof right, fmt, "{{0,1},{1,0}}");
  snprintf(wrong, sizeof wrong, fmt, "{{0,1}}");
  hk_sample_result r = compare(g, right, 2, 16);
  ck_assert(r.equal);
  hk_sample_result_free(&r);
  r = compare(g, wrong, 2, 16);
  ck_assert(!r.equal);   /* device 0 receives nothing: zeros */
  ck_assert_int_eq(r.mismatch_device, 0);
  ck_assert(r.actual == 0);
  hk_sample_result_free(&r);
}
END_TEST

START_TEST(test_all_to_all_equal) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[4,8] parameter(0)\n"
      "  ROOT c = f32[4,8] copy(a)\n"
      "}\n";
  /* Resharding rows -> columns with an all-to-all on a [1,4]-reshaped
   * view: device d holds rows 2d..2d+1 and ends with columns 4d..4d+3. */
  const char *p =
      "HloModule p, num_partitions=2, spmd_output_sharding={devices=[1,2]0,1}, "
      "spmd_parameters_shardings={{devices=[2,1]0,1}}\n"
      "ENTRY e {\n"
      "  a = f32[2,8] parameter(0)\n"
      "  r = f32[2,2,4] reshape(a)\n"
      "  t = f32[2,2,4] transpose(r), dimensions={1,0,2}\n"
      "  x = f32[2,2,4] all-to-all(t), channel_id=1, replica_groups={{0,1}}, dimensions={0}\n"
      "  ROOT o = f32[4,4] reshape(x)\n"
      "}\n";
  expect_exactly_equal(g, p, 2, 32);
}
END_TEST

/* Ragged all-to-all (two updates per peer) against the global permutation
 * it makes of an [8] value sharded over 2 devices. */
START_TEST(test_ragged_all_to_all_equal) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[8] parameter(0)\n"
      "  s0 = f32[1] slice(a), slice={[0:1]}\n  s1 = f32[2] slice(a), slice={[4:6]}\n"
      "  s2 = f32[3] slice(a), slice={[1:4]}\n  s3 = f32[2] slice(a), slice={[6:8]}\n"
      "  ROOT c = f32[8] concatenate(s0, s1, s2, s3), dimensions={0}\n"
      "}\n";
  const char *p =
      "HloModule p, num_partitions=2, spmd_output_sharding={devices=[2]0,1}, "
      "spmd_parameters_shardings={{devices=[2]0,1}}\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  pid = u32[] partition-id()\n  z = u32[] constant(0)\n  is0 = pred[] compare(pid, z), direction=EQ\n"
      "  b0 = pred[4] broadcast(is0), dimensions={}\n"
      "  io0 = s32[4] constant({0, 1, 2, 0})\n  io1 = s32[4] constant({0, 0, 2, 0})\n  io = s32[4] select(b0, io0, io1)\n"
      "  ss0 = s32[4] constant({1, 1, 2, 0})\n  ss1 = s32[4] constant({2, 0, 2, 0})\n  ss = s32[4] select(b0, ss0, ss1)\n"
      "  oo0 = s32[4] constant({0, 3, 0, 0})\n  oo1 = s32[4] constant({1, 0, 2, 0})\n  oo = s32[4] select(b0, oo0, oo1)\n"
      "  m1 = f32[] constant(-1)\n  o = f32[4] broadcast(m1), dimensions={}\n"
      "  ROOT r = f32[4] ragged-all-to-all(a, o, io, ss, oo, ss), channel_id=1, replica_groups={{0,1}}\n"
      "}\n";
  expect_exactly_equal(g, p, 2, 32);
}
END_TEST

/* An update whose input offset plus size overflows int64 is refused by
 * name, not summed (the offsets are the program's data). */
START_TEST(test_ragged_all_to_all_offset_overflow) {
  hk_module *g = hk_test_parse("HloModule g\nENTRY e {\n  a = f32[8] parameter(0)\n  ROOT c = f32[8] copy(a)\n}\n");
  hk_module *p = hk_test_parse(
      "HloModule p, num_partitions=2, spmd_output_sharding={devices=[2]0,1}, "
      "spmd_parameters_shardings={{devices=[2]0,1}}\nENTRY e {\n" HK_TEST_RAGGED_OVERFLOW_BODY("  in = f32[4] parameter(0)\n"));
  hk_sample_options o = {.seed = 7, .samples = 8, .atol = -1, .rtol = -1};
  hk_sample_result r;
  hk_status *st = hk_eval_compare_sampled(g, p, 2, 1, &o, &r);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "out of bounds"));
  hk_status_free(st);
  hk_module_free(g);
  hk_module_free(p);
}
END_TEST

/* ---- a dot over a 2^30-element operand --------------------------------------- */

START_TEST(test_huge_dot_is_fast) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[32768,32768] parameter(0)\n"
      "  b = f32[32768,16] parameter(1)\n"
      "  ROOT d = f32[32768,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  const char *p =
      "HloModule p, num_partitions=4, spmd_output_sharding={devices=[4,1]0,1,2,3}, "
      "spmd_parameters_shardings={{devices=[4,1]0,1,2,3},{replicated}}\n"
      "ENTRY e {\n"
      "  a = f32[8192,32768] parameter(0)\n"
      "  b = f32[32768,16] parameter(1)\n"
      "  ROOT d = f32[8192,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  struct timespec t0, t1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  int64_t want = hk_test_slow_build() ? 16 : 128;
  hk_sample_result r = compare(g, p, 4, want);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  ck_assert(r.equal);
  ck_assert_int_ge(r.samples, want);
  if (!hk_test_slow_build()) ck_assert_msg(s < 1.0, "took %.2f s", s);
  hk_sample_result_free(&r);
}
END_TEST

/* ---- while loops ---------------------------------------------------------------- */

static const char *loop_fmt =
    "HloModule %s%s\n"
    "cond { s = (s32[], f32[%d]) parameter(0)  i = s32[] get-tuple-element(s), index=0\n"
    "       n = s32[] constant(%d)  ROOT lt = pred[] compare(i, n), direction=LT }\n"
    "body { s = (s32[], f32[%d]) parameter(0)  i = s32[] get-tuple-element(s), index=0\n"
    "       x = f32[%d] get-tuple-element(s), index=1  one = s32[] constant(1)\n"
    "       j = s32[] add(i, one)  y = f32[%d] add(x, x)  ROOT t = (s32[], f32[%d]) tuple(j, y) }\n"
    "ENTRY e {\n"
    "  a = f32[%d] parameter(0)  z = s32[] constant(0)\n"
    "  t = (s32[], f32[%d]) tuple(z, a)\n"
    "  w = (s32[], f32[%d]) while(t), condition=cond, body=body\n"
    "  ROOT r = f32[%d] get-tuple-element(w), index=1\n"
    "}\n";

static void loop_text(char *buf, size_t cap, bool partitioned, int trips) {
  int n = partitioned ? 4 : 8;
  snprintf(buf, cap, loop_fmt, partitioned ? "p" : "g",
           partitioned ? ", num_partitions=2, spmd_output_sharding={devices=[2]0,1}, "
                         "spmd_parameters_shardings={{devices=[2]0,1}}"
                       : "",
           n, trips, n, n, n, n, n, n, n, n);
}

START_TEST(test_while_loop) {
  char g[4096], right[4096], wrong[4096];
  loop_text(g, sizeof g, false, 5);
  loop_text(right, sizeof right, true, 5);
  loop_text(wrong, sizeof wrong, true, 6);
  hk_sample_result r = compare(g, right, 2, 16);
  ck_assert(r.equal);
  hk_sample_result_free(&r);
  r = compare(g, wrong, 2, 16);
  ck_assert(!r.equal);
  ck_assert(r.actual == 2 * r.expected);   /* one doubling too many */
  hk_sample_result_free(&r);
}
END_TEST

/* A ring all-gather written as a while loop (the shape windowed einsums
 * take): each iteration puts the chunk in hand into the buffer and passes
 * it to the next device with a collective-permute. */
START_TEST(test_while_ring_all_gather) {
  const char *g = "HloModule g\nENTRY e { a = f32[8] parameter(0)  ROOT c = f32[8] copy(a) }\n";
  const char *fmt =
      "HloModule p, num_partitions=2, spmd_output_sharding={replicated}, "
      "spmd_parameters_shardings={{devices=[2]0,1}}\n"
      "cond { s = (s32[], f32[4], f32[8]) parameter(0)  k = s32[] get-tuple-element(s), index=0\n"
      "       n = s32[] constant(2)  ROOT lt = pred[] compare(k, n), direction=LT }\n"
      "body { s = (s32[], f32[4], f32[8]) parameter(0)\n"
      "  k = s32[] get-tuple-element(s), index=0\n"
      "  c = f32[4] get-tuple-element(s), index=1\n"
      "  b = f32[8] get-tuple-element(s), index=2\n"
      "  pid = u32[] partition-id()  d = s32[] convert(pid)  two = s32[] constant(2)  four = s32[] constant(4)\n"
      "  t = s32[] subtract(two, k)  u = s32[] add(d, t)  v = s32[] remainder(u, two)  off = s32[] multiply(v, four)\n"
      "  b2 = f32[8] dynamic-update-slice(b, c, off)\n"
      "  c2 = f32[4] collective-permute(c), channel_id=1, source_target_pairs=%s\n"
      "  one = s32[] constant(1)  k2 = s32[] add(k, one)\n"
      "  ROOT r = (s32[], f32[4], f32[8]) tuple(k2, c2, b2) }\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)  z = s32[] constant(0)  zf = f32[] constant(0)\n"
      "  buf = f32[8] broadcast(zf), dimensions={}\n"
      "  t = (s32[], f32[4], f32[8]) tuple(z, a, buf)\n"
      "  w = (s32[], f32[4], f32[8]) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[8] get-tuple-element(w), index=2\n"
      "}\n";
  char right[4096], wrong[4096];
  snprintf(right, sizeof right, fmt, "{{0,1},{1,0}}");
  snprintf(wrong, sizeof wrong, fmt, "{{0,1}}");
  hk_sample_result r = compare(g, right, 2, 32);
  ck_assert(r.equal);
  ck_assert(r.max_abs_error == 0);
  hk_sample_result_free(&r);
  r = compare(g, wrong, 2, 32);
  ck_assert(!r.equal);   /* device 0 never receives device 1's half */
  hk_sample_result_free(&r);
}
END_TEST

/* ---- ops against the dense evaluator ---------------------------------------------
 * A global module whose inputs are computed (sines of iotas, no
 * parameters) is evaluated densely; a "partitioned" module holding that
 * result as a constant is then compared with the sampled evaluation of the
 * global one, so every sampled position checks an op's box arithmetic
 * (windows, padding, dilation, gathers, ...) against the dense kernels. */

static hk_module *constant_module(const hk_value *v, const hk_shape *shape) {
  hk_module *m = hk_module_new("dense");
  hk_computation *c = hk_computation_new(m, "e");
  const hk_shape *s = hk_shape_copy(m, shape);
  hk_literal *l = hk_literal_new(m, s);
  memcpy(l->data, v->data, (size_t)v->nbytes);
  hk_instr *k = hk_instr_new(c, HK_OP_CONSTANT, s, 0, NULL, "c");
  hk_instr_attrs(k)->literal = l;
  hk_computation_set_root(c, k);
  hk_module_set_entry(m, c);
  return m;
}

static void check_against_dense(const char *body) {
  char text[8192];
  snprintf(text, sizeof text,
           "HloModule g\n"
           "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
           "max { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] maximum(x, y) }\n"
           "ge { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = pred[] compare(x, y), direction=GE }\n"
           "lt { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = pred[] compare(x, y), direction=LT }\n"
           "wrapped_neg { w = f32[12,10] parameter(0)  ROOT n = f32[12,10] negate(w) }\n"
           "ENTRY e {\n"
           "  i0 = f32[12,10] iota(), iota_dimension=0\n"
           "  i1 = f32[12,10] iota(), iota_dimension=1\n"
           "  k = f32[] constant(3.7)\n"
           "  kb = f32[12,10] broadcast(k), dimensions={}\n"
           "  mm = f32[12,10] multiply(i0, kb)\n"
           "  sm = f32[12,10] add(mm, i1)\n"
           "  a = f32[12,10] sine(sm)\n"
           "%s\n"
           "}\n",
           body);
  hk_module *g = hk_test_parse(text);
  hk_value *dense = NULL;
  hk_eval_options eo = {0};
  ck_assert_ok(hk_eval_module(g, NULL, 0, &dense, &eo, NULL));
  hk_module *p = constant_module(dense, g->entry->root->shape);
  hk_sample_options o = {.seed = 3, .samples = hk_test_slow_build() ? 64 : 512, .atol = -1, .rtol = -1};
  hk_sample_result r;
  ck_assert_ok(hk_eval_compare_sampled(g, p, 1, 1, &o, &r));
  ck_assert_msg(r.equal, "%s: index %lld expected %g, got %g", body, (long long)r.mismatch_index,
                r.expected, r.actual);
  ck_assert_int_ge(r.samples, 16);
  hk_sample_result_free(&r);
  hk_value_release(dense);
  hk_module_free(g);
  hk_module_free(p);
}

START_TEST(test_ops_match_dense) {
  static const char *const bodies[] = {
      "  ROOT t = f32[10,12] transpose(a), dimensions={1,0}",
      "  r = f32[4,3,10] reshape(a)\n  ROOT t = f32[10,4,3] transpose(r), dimensions={2,0,1}",
      "  ROOT r = f32[5,24] reshape(a)",
      "  z = f32[] constant(-1)\n  ROOT p = f32[24,25] pad(a, z), padding=2_-1_1x3_3_1",
      "  ROOT c = f32[12,30] concatenate(a, a, a), dimensions={1}",
      "  ROOT r = f32[12,10] reverse(a), dimensions={0,1}",
      "  ROOT s = f32[5,3] slice(a), slice={[1:11:2], [2:9:3]}",
      "  i = s32[] constant(9)\n  j = s32[] constant(-2)\n  ROOT d = f32[5,4] dynamic-slice(a, i, j), dynamic_slice_sizes={5,4}",
      "  u = f32[3,4] slice(a), slice={[0:3], [0:4]}\n  i = s32[] constant(4)\n  j = s32[] constant(8)\n"
      "  ROOT d = f32[12,10] dynamic-update-slice(a, u, i, j)",
      "  ROOT b = f32[3,12,2,10] broadcast(a), dimensions={1,3}",
      "  z = f32[] constant(0)\n  ROOT r = f32[10] reduce(a, z), dimensions={0}, to_apply=add",
      "  z = f32[] constant(0)\n  bb = f32[12,10,500] broadcast(a), dimensions={0,1}\n"
      "  ROOT r = f32[12] reduce(bb, z), dimensions={1,2}, to_apply=max",
      /* a reduce over no dims asked for a box of more than its chunk size */
      "  z = f32[] constant(0)\n  bb = f32[12,10,500] broadcast(a), dimensions={0,1}\n  rb = f32[12,5000] reshape(bb)\n"
      "  r = f32[12,5000] reduce(rb, z), dimensions={}, to_apply=max\n  one = f32[] constant(1)\n"
      "  ones = f32[5000,2] broadcast(one), dimensions={}\n"
      "  ROOT d = f32[12,2] dot(r, ones), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
      "  z = f32[] constant(0)\n  ROOT r = f32[6,10] reduce-window(a, z), window={size=3x2 stride=2x2 pad=1_2x1_1 lhs_dilate=1x2 rhs_dilate=2x1}, to_apply=add",
      "  z = f32[] constant(0)\n  src = f32[6,5] slice(a), slice={[0:6], [0:5]}\n"
      "  ROOT s = f32[12,10] select-and-scatter(a, src, z), window={size=3x3 stride=2x2 pad=1_1x1_1}, select=ge, scatter=add",
      "  r = f32[1,12,10,1] reshape(a)\n  k9 = f32[9,2] slice(a), slice={[0:9], [0:2]}\n  w = f32[3,3,1,2] reshape(k9)\n"
      "  ROOT c = f32[1,6,8,2] convolution(r, w), window={size=3x3 stride=2x1 pad=1_1x2_0 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f",
      "  r = f32[1,12,10,1] reshape(a)\n  k9 = f32[9,2] slice(a), slice={[0:9], [0:2]}\n  w = f32[3,3,1,2] reshape(k9)\n"
      "  ROOT c = f32[1,12,8,2] convolution(r, w), window={size=3x3 stride=2x1 pad=1_1x0_0 lhs_dilate=2x1}, dim_labels=b01f_01io->b01f",
      /* a dot in the guise of a padded, reversed (and dilated) convolution:
       * a sampled output reads only the kernel taps that touch the input */
      "  s2 = f32[2,10] slice(a), slice={[0:2], [0:10]}\n  x = f32[2,1,10] reshape(s2)\n"
      "  k10 = f32[10,10] slice(a), slice={[2:12], [0:10]}\n  w = f32[5,10,2] reshape(k10)\n"
      "  ROOT c = f32[2,5,2] convolution(x, w), window={size=5 pad=4_4 rhs_reversal=1}, dim_labels=b0f_0io->b0f",
      "  s2 = f32[2,10] slice(a), slice={[0:2], [0:10]}\n  x = f32[2,1,10] reshape(s2)\n"
      "  k10 = f32[10,10] slice(a), slice={[2:12], [0:10]}\n  w = f32[5,10,2] reshape(k10)\n"
      "  ROOT c = f32[2,9,2] convolution(x, w), window={size=5 pad=8_8 rhs_dilate=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f",
      "  s3 = f32[2,10] slice(a), slice={[0:2], [0:10]}\n  x = f32[2,2,5] reshape(s3)\n"
      "  k10 = f32[10,10] slice(a), slice={[2:12], [0:10]}\n  w = f32[5,5,4] reshape(k10)\n"
      "  ROOT c = f32[2,7,4] convolution(x, w), window={size=5 stride=2 pad=7_6 lhs_dilate=3}, dim_labels=b0f_0io->b0f",
      /* a reduce over a dot's free dim: the dot's box is computed in parts
       * (operand boxes past 2^16 elements), an rhs read in place as [N][K] */
      "  i0b = f32[2,4000] iota(), iota_dimension=1\n  i1b = f32[2,4000] iota(), iota_dimension=0\n"
      "  lx = f32[2,4000] add(i0b, i1b)\n  l = f32[2,4000] sine(lx)\n"
      "  j0 = f32[40,4000] iota(), iota_dimension=0\n  j1 = f32[40,4000] iota(), iota_dimension=1\n"
      "  k7 = f32[] constant(0.37)\n  k7b = f32[40,4000] broadcast(k7), dimensions={}\n"
      "  jm = f32[40,4000] multiply(j1, k7b)\n  ja = f32[40,4000] add(jm, j0)\n  rr = f32[40,4000] cosine(ja)\n"
      "  d = f32[2,40] dot(l, rr), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[2] reduce(d, z), dimensions={1}, to_apply=add",
      /* the same with a diamond chain of 16 levels under the parts' rhs:
       * a box made twice within a part is made once (kept until the part
       * ends), not 2^16 times */
      "  j0 = f32[40,4000] iota(), iota_dimension=0\n  j1 = f32[40,4000] iota(), iota_dimension=1\n"
      "  k7 = f32[] constant(0.37)\n  k7b = f32[40,4000] broadcast(k7), dimensions={}\n"
      "  jm = f32[40,4000] multiply(j1, k7b)\n  ja = f32[40,4000] add(jm, j0)\n  c0 = f32[40,4000] cosine(ja)\n"
      "  c1 = f32[40,4000] add(c0, c0)\n  c2 = f32[40,4000] add(c1, c1)\n  c3 = f32[40,4000] add(c2, c2)\n"
      "  c4 = f32[40,4000] add(c3, c3)\n  c5 = f32[40,4000] add(c4, c4)\n  c6 = f32[40,4000] add(c5, c5)\n"
      "  c7 = f32[40,4000] add(c6, c6)\n  c8 = f32[40,4000] add(c7, c7)\n  c9 = f32[40,4000] add(c8, c8)\n"
      "  c10 = f32[40,4000] add(c9, c9)\n  c11 = f32[40,4000] add(c10, c10)\n  c12 = f32[40,4000] add(c11, c11)\n"
      "  c13 = f32[40,4000] add(c12, c12)\n  c14 = f32[40,4000] add(c13, c13)\n  c15 = f32[40,4000] add(c14, c14)\n"
      "  c16 = f32[40,4000] add(c15, c15)\n"
      "  l = f32[2,4000] slice(c0), slice={[0:2], [0:4000]}\n"
      "  d = f32[2,40] dot(l, c16), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[2] reduce(d, z), dimensions={1}, to_apply=add",
      "  ROOT s = f32[12,10] sort(a), dimensions={1}, to_apply=lt",
      "  ix = s32[6,1] iota(), iota_dimension=0\n  c2 = s32[] constant(2)\n  two = s32[6,1] broadcast(c2), dimensions={}\n"
      "  idx = s32[6,1] multiply(ix, two)\n"
      "  ROOT g = f32[6,3] gather(a, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}",
      "  ix = s32[6,1] iota(), iota_dimension=0\n  c4 = s32[] constant(4)\n  four = s32[6,1] broadcast(c4), dimensions={}\n"
      "  idx = s32[6,1] remainder(ix, four)\n  up = f32[6,10] slice(a), slice={[3:9], [0:10]}\n"
      "  ROOT s = f32[12,10] scatter(a, idx, up), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) check_against_dense(bodies[i]);
}
END_TEST

/* Batch norm reads whole features (training and grad: statistics over
 * every other dim); host offloading moves are identities. */
#define BN_INPUTS                                                                          \
  "  r = f32[3,4,10] reshape(a)\n"                                                          \
  "  s1 = f32[1,4] slice(a), slice={[2:3], [1:5]}\n  sc = f32[4] reshape(s1)\n"             \
  "  o1 = f32[1,4] slice(a), slice={[5:6], [3:7]}\n  of = f32[4] reshape(o1)\n"             \
  "  bn = (f32[3,4,10], f32[4], f32[4]) batch-norm-training(r, sc, of), epsilon=0.001, feature_index=1\n"
START_TEST(test_batch_norm_and_host_moves_match_dense) {
  static const char *const bodies[] = {
      BN_INPUTS "  ROOT y = f32[3,4,10] get-tuple-element(bn), index=0",
      BN_INPUTS "  ROOT v = f32[4] get-tuple-element(bn), index=2",
      BN_INPUTS "  mu = f32[4] get-tuple-element(bn), index=1\n  va = f32[4] get-tuple-element(bn), index=2\n"
      "  ROOT y = f32[3,4,10] batch-norm-inference(r, sc, of, mu, va), epsilon=0.01, feature_index=1",
      BN_INPUTS "  mu = f32[4] get-tuple-element(bn), index=1\n  va = f32[4] get-tuple-element(bn), index=2\n"
      "  dy = f32[3,4,10] cosine(r)\n"
      "  g = (f32[3,4,10], f32[4], f32[4]) batch-norm-grad(r, sc, mu, va, dy), epsilon=0.001, feature_index=1\n"
      "  ROOT dx = f32[3,4,10] get-tuple-element(g), index=0",
      BN_INPUTS "  mu = f32[4] get-tuple-element(bn), index=1\n  va = f32[4] get-tuple-element(bn), index=2\n"
      "  dy = f32[3,4,10] cosine(r)\n"
      "  g = (f32[3,4,10], f32[4], f32[4]) batch-norm-grad(r, sc, mu, va, dy), epsilon=0.001, feature_index=1\n"
      "  ROOT ds = f32[4] get-tuple-element(g), index=1",
      "  k9 = f32[] constant(9)\n  kb9 = f32[12,10] broadcast(k9), dimensions={}\n  a9 = f32[12,10] multiply(a, kb9)\n"
      "  bits = u32[12,10] bitcast-convert(a)\n  sc = s32[12,10] stochastic-convert(a9, bits)\n"
      "  ROOT f = f32[12,10] convert(sc)",
      "  st = ((f32[12,10]), f32[12,10], s32[]) async-start(a), calls=wrapped_neg\n"
      "  ROOT d = f32[12,10] async-done(st)",
      "  h = f32[12,10] custom-call(a), custom_call_target=\"MoveToHost\"\n"
      "  ROOT d = f32[12,10] custom-call(h), custom_call_target=\"MoveToDevice\"",
      "  h = f32[12,10] custom-call(a), custom_call_target=\"annotate_device_placement\",\n"
      "    frontend_attributes={_xla_buffer_placement=\"pinned_host\"}\n"
      "  ROOT n = f32[12,10] negate(h)",
      "  h = f32[12,10] custom-call(a), custom_call_target=\"HostExecute\", called_computations={wrapped_neg}\n"
      "  ROOT d = f32[12,10] add(h, sm)",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) check_against_dense(bodies[i]);
}
END_TEST

/* Cholesky and triangular-solve read whole matrices of a batch: a
 * positive definite s s^T + I from the inputs, factored and solved. */
#define SPD_INPUTS                                                                                  \
  "  s = f32[10,10] slice(a), slice={[0:10], [0:10]}\n"                                             \
  "  g = f32[10,10] dot(s, s), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"                \
  "  r0 = s32[10,10] iota(), iota_dimension=0\n  r1 = s32[10,10] iota(), iota_dimension=1\n"        \
  "  eq = pred[10,10] compare(r0, r1), direction=EQ\n  ef = f32[10,10] convert(eq)\n"               \
  "  d = f32[10,10] add(g, ef)\n  bt = f32[3,10,10] broadcast(d), dimensions={1,2}\n"               \
  "  l = f32[3,10,10] cholesky(bt), lower=true\n"                                                   \
  "  b2 = f32[10,4] slice(a), slice={[2:12], [0:4]}\n  b = f32[3,10,4] broadcast(b2), dimensions={1,2}\n"
START_TEST(test_solvers_match_dense) {
  static const char *const bodies[] = {
      SPD_INPUTS "  ROOT u = f32[3,10,10] cholesky(bt), lower=false",
      SPD_INPUTS "  ROOT x = f32[3,10,4] triangular-solve(l, b), left_side=true, lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE",
      SPD_INPUTS "  bb = f32[3,4,10] transpose(b), dimensions={0,2,1}\n"
      "  ROOT x = f32[3,4,10] triangular-solve(l, bb), left_side=false, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) check_against_dense(bodies[i]);
}
END_TEST

/* Ragged dot, non-contracting and contracting: a sample reads its own
 * rows and columns, the group sizes whole. */
START_TEST(test_ragged_dot_matches_dense) {
  static const char *const bodies[] = {
      "  r3 = f32[120] reshape(a)\n  rs = f32[60] slice(r3), slice={[0:60]}\n  rh = f32[3,10,2] reshape(rs)\n"
      "  g = s32[3] constant({4, 5, 2})\n"
      "  ROOT d = f32[12,2] ragged-dot(a, rh, g), lhs_contracting_dims={1}, rhs_contracting_dims={1},"
      " lhs_ragged_dims={0}, rhs_group_dims={0}",
      "  g = s32[3] constant({3, 0, 6})\n  b2 = f32[10,5] slice(a), slice={[1:11], [2:7]}\n"
      "  ROOT d = f32[3,12,5] ragged-dot(a, b2, g), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " lhs_ragged_dims={1}",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) check_against_dense(bodies[i]);
}
END_TEST

/* Ragged dot with group sizes of rank > 1 (one row of sizes per batch /
 * outer position), non-contracting and contracting (a contracting prefix
 * dim walked inside the sum): a sample finds its own row. */
START_TEST(test_ragged_dot_group_rows_match_dense) {
  static const char *const bodies[] = {
      "  l = f32[3,4,10] reshape(a)\n  rh = f32[2,3,10,2] reshape(a)\n  g = s32[3,2] constant({{1, 2}, {0, 4}, {3, 3}})\n"
      "  ROOT d = f32[3,4,2] ragged-dot(l, rh, g), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2},"
      " rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}",
      "  l = f32[2,3,2,10] reshape(a)\n  rh = f32[2,2,10,3] reshape(a)\n"
      "  g = s32[2,2,2] constant({{{3, 5}, {10, 0}}, {{0, 4}, {6, 6}}})\n"
      "  ROOT d = f32[2,2,3,3] ragged-dot(l, rh, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2,3},"
      " rhs_contracting_dims={1,2}, lhs_ragged_dims={3}",
  };
  for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) check_against_dense(bodies[i]);
}
END_TEST

/* ---- the CLI ------------------------------------------------------------------------ */

/* Runs `BUILD/hlokit ARGS` from the source root; *out gets stdout
 * (malloc'ed); returns the exit status. */
static int run_hlokit(const char *args, char **out) {
  char exe[PATH_MAX], cmd[8192];
  hk_test_build_path("hlokit", exe, sizeof exe);
  snprintf(cmd, sizeof cmd, "%s %s", exe, args);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  int st = pclose(p);
  *out = buf;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `hlokit check` of module text on n partitions with propagation and
 * partitioning (extra options after them); asserts exit 0 and returns
 * the output (the caller frees it). */
static char *check_text_ok(const char *text, int n, const char *extra) {
  char path[] = "/tmp/hk_check_textXXXXXX";
  int fd = mkstemp(path);
  ck_assert(fd >= 0);
  FILE *f = fdopen(fd, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  char args[1024], *out;
  snprintf(args, sizeof args,
           "check %s --num-partitions=%d --passes='sharding-propagation{is_spmd=true},"
           "spmd-partitioning{allow_module_signature_change=true}' %s", path, n, extra);
  int rc = run_hlokit(args, &out);
  unlink(path);
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  return out;
}

/* Auto mode also samples when the devices' values together are too big:
 * a 2^20-element output replicated on 256 devices is 2^28 elements. */
START_TEST(test_cli_samples_many_device_copies) {
  char *out = check_text_ok("HloModule m\nENTRY e {\n  p = f32[1048576] parameter(0), sharding={devices=[256]<=[256]}\n"
                            "  ROOT n = f32[1048576] negate(p)\n}\n", 256, "--samples=32 --json");
  ck_assert_ptr_nonnull(strstr(out, "\"mode\": \"sampled\""));
  free(out);
}
END_TEST

/* A global module holding a collective with a channel is already a
 * program per partition: check runs it on every partition (it used to
 * run it on one, where the all-gather's group names a device that does
 * not run). */
START_TEST(test_cli_checks_program_per_partition) {
  char *out = check_text_ok("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
                            "  g = f32[4] all-gather(p), dimensions={0}, replica_groups={{0,1}}, channel_id=1,"
                            " use_global_device_ids=true\n"
                            "  q = f32[4] parameter(1), sharding={devices=[2]0,1}\n"
                            "  ROOT a = f32[4] add(g, q)\n}\n", 2, "");
  ck_assert_ptr_nonnull(strstr(out, "equal"));
  free(out);
}
END_TEST

START_TEST(test_cli_sampled_mode) {
  char *out;
  /* auto mode samples the 2^30-element dot and says so */
  int rc = run_hlokit("check fixtures/eval/sampled_dot.hlo --partitioned=fixtures/eval/sampled_dot_part.hlo "
                      "--num-partitions=4 --samples=32 --json", &out);
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  ck_assert_ptr_nonnull(strstr(out, "\"equal\": true, \"mode\": \"sampled\""));
  ck_assert_ptr_nonnull(strstr(out, "\"samples\": "));
  free(out);
  /* the hand-written partitions of fixtures/eval: right ones equal, wrong
   * ones caught, as the dense check finds */
  static const char *const cases[][3] = {
      {"matmul", "matmul_spmd_ok", "0"},
      {"matmul", "matmul_spmd_missing_all_reduce", "1"},
      {"negate_rows", "negate_rows_spmd_ok", "0"},
      {"negate_rows", "negate_rows_spmd_wrong_offsets", "1"},
      {"rotate", "rotate_spmd_ok", "0"},
      {"rotate", "rotate_spmd_swapped_pairs", "1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[512];
    snprintf(args, sizeof args, "check fixtures/eval/%s.hlo --partitioned=fixtures/eval/%s.hlo --mode=sampled --samples=64",
             cases[i][0], cases[i][1]);
    rc = run_hlokit(args, &out);
    ck_assert_msg(rc == atoi(cases[i][2]), "%s: exit %d: %s", cases[i][1], rc, out);
    ck_assert_ptr_nonnull(strstr(out, "(sampled "));
    free(out);
  }
  /* with replicas the global program runs on every replica, as in dense mode */
  rc = run_hlokit("check fixtures/eval/cross_replica_all_reduce.hlo --num-partitions=2 --num-replicas=2"
                  " '--passes=spmd-partitioning{allow_module_signature_change=true}' --mode=sampled --samples=16",
                  &out);
  ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
  free(out);
  /* dense mode is reported as such */
  rc = run_hlokit("check fixtures/eval/matmul.hlo --partitioned=fixtures/eval/matmul_spmd_ok.hlo --mode=dense --json", &out);
  ck_assert_int_eq(rc, 0);
  ck_assert_ptr_nonnull(strstr(out, "\"mode\": \"dense\""));
  free(out);
  rc = run_hlokit("check fixtures/eval/matmul.hlo --partitioned=fixtures/eval/matmul_spmd_ok.hlo --mode=fast 2>&1", &out);
  ck_assert_int_eq(rc, 2);
  free(out);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------- */

START_TEST(test_unsupported_op_is_a_clean_error) {
  const char *g =
      "HloModule g\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  ROOT t = f32[4] custom-call(a), custom_call_target=\"MyOpaqueKernel\"\n"
      "}\n";
  hk_module *m = hk_test_parse(g), *p = hk_test_parse(g);
  hk_sample_options o = {.seed = 1, .samples = 8, .atol = -1, .rtol = -1};
  hk_sample_result r;
  hk_status *st = hk_eval_compare_sampled(m, p, 1, 1, &o, &r);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_UNIMPLEMENTED);
  ck_assert_ptr_nonnull(strstr(st->message, "t (custom-call)"));
  hk_status_free(st);
  hk_module_free(m);
  hk_module_free(p);
}
END_TEST

START_TEST(test_mismatched_results_are_an_error) {
  const char *g = "HloModule g\nENTRY e { a = f32[4] parameter(0)  ROOT n = f32[4] negate(a) }\n";
  const char *p = "HloModule p\nENTRY e { a = f32[4] parameter(0)  ROOT n = s32[4] convert(a) }\n";
  hk_module *gm = hk_test_parse(g), *pm = hk_test_parse(p);
  hk_sample_result r;
  hk_status *st = hk_eval_compare_sampled(gm, pm, 1, 1, NULL, &r);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
  hk_status_free(st);
  hk_module_free(gm);
  hk_module_free(pm);
}
END_TEST

START_TEST(test_cost_estimate) {
  hk_module *m = hk_test_parse(dot_global);
  hk_eval_cost c = hk_eval_estimate_cost(m);
  ck_assert(c.macs == 8.0 * 4 * 16);
  ck_assert_int_eq(c.largest_elements, 128);
  hk_module_free(m);
}
END_TEST

static Suite *sample_suite(void) {
  Suite *s = suite_create("eval_sample");
  TCase *t = tcase_create("sample");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, test_dot_all_reduce_equal);
  tcase_add_test(t, test_wrong_replica_groups_caught);
  tcase_add_test(t, test_missing_all_reduce_caught);
  tcase_add_test(t, test_all_gather_and_slices_equal);
  tcase_add_test(t, test_reduce_scatter_tiled_output_equal);
  tcase_add_test(t, test_collective_permute_wrong_pairs_caught);
  tcase_add_test(t, test_all_to_all_equal);
  tcase_add_test(t, test_huge_dot_is_fast);
  tcase_add_test(t, test_while_loop);
  tcase_add_test(t, test_while_ring_all_gather);
  tcase_add_test(t, test_ops_match_dense);
  tcase_add_test(t, test_batch_norm_and_host_moves_match_dense);
  tcase_add_test(t, test_solvers_match_dense);
  tcase_add_test(t, test_ragged_dot_matches_dense);
  tcase_add_test(t, test_ragged_dot_group_rows_match_dense);
  tcase_add_test(t, test_ragged_all_to_all_equal);
  tcase_add_test(t, test_ragged_all_to_all_offset_overflow);
  tcase_add_test(t, test_unsupported_op_is_a_clean_error);
  tcase_add_test(t, test_mismatched_results_are_an_error);
  tcase_add_test(t, test_cost_estimate);
  tcase_add_test(t, test_cli_sampled_mode);
  tcase_add_test(t, test_cli_samples_many_device_copies);
  tcase_add_test(t, test_cli_checks_program_per_partition);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(sample_suite)
