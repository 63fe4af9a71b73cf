/* test_spmd_preprocess.c - Check tests of the partitioner's PreprocessHlos
 * phase and the halo exchanges behind it: slice(pad) merged into one pad,
 * concatenate(slice, slice) rotations, the pad-with-wrap pattern and pad
 * along partitioned dims, each checked for the rewrite it makes and for
 * the values. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

static int64_t count_custom_calls(const hk_module *m) { return hk_test_count_op(m, HK_OP_CUSTOM_CALL); }

/* A pad with this (lo, hi) on dim 0 somewhere in m. */
static bool has_pad(const hk_module *m, int64_t lo, int64_t hi) {
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->opcode == HK_OP_PAD && i->attrs->pad[0].lo == lo && i->attrs->pad[0].hi == hi)
        return true;
  return false;
}

/* ---- slice(pad(x)) ------------------------------------------------------- */

START_TEST(pad_then_slice_merged) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  z = f32[] constant(0)\n"
      "  pad = f32[10] pad(p, z), padding=2_0, sharding={devices=[4]<=[4]}\n"
      "  c = f32[10] copy(pad), sharding={devices=[4]<=[4]}\n"
      "  ROOT s = f32[8] slice(c), slice={[0:8]}, sharding={devices=[4]<=[4]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  /* pad 2_0 then slice [0:8] is one pad 2_-2: one halo exchange (the
   * left neighbour's last two elements), nothing gathered. */
  ck_assert(!has_pad(p, 2, 0));
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  hk_module_free(p);
}
END_TEST

START_TEST(pad_then_slice_kept_when_unsharded_dim) {
  /* Padding and slicing an unsharded dim needs no halo: nothing merged. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[4,8] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  z = f32[] constant(0)\n"
      "  pad = f32[6,8] pad(p, z), padding=2_0x0_0, sharding={devices=[1,4]<=[4]}\n"
      "  ROOT s = f32[5,8] slice(pad), slice={[1:6], [0:8]}, sharding={devices=[1,4]<=[4]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert(has_pad(p, 2, 0));
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  hk_module_free(p);
}
END_TEST

/* ---- rotations ------------------------------------------------------------- */

static const char *rotate_text(int64_t n, int64_t amount, char *buf, size_t cap) {
  snprintf(buf, cap,
           "HloModule m\n"
           "ENTRY e {\n"
           "  p = f32[%lld] parameter(0), sharding={devices=[4]<=[4]}\n"
           "  a = f32[%lld] slice(p), slice={[%lld:%lld]}, sharding={devices=[4]<=[4]}\n"
           "  b = f32[%lld] slice(p), slice={[0:%lld]}, sharding={devices=[4]<=[4]}\n"
           "  ROOT c = f32[%lld] concatenate(a, b), dimensions={0}, sharding={devices=[4]<=[4]}\n"
           "}\n",
           (long long)n, (long long)amount, (long long)(n - amount), (long long)n,
           (long long)(n - amount), (long long)(n - amount), (long long)n);
  return buf;
}

START_TEST(rotate_within_shard) {
  char buf[1024];
  /* 12 over 4 shards of 3, rotate by 2: one neighbour exchange. */
  hk_module *p = spmd_check_partition(reg, rotate_text(12, 2, buf, sizeof buf), 4, NULL);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(count_custom_calls(p), 0);
  int64_t d = 3;
  ck_assert(spmd_check_root_dims(p, 1, &d));
  hk_module_free(p);
}
END_TEST

START_TEST(rotate_across_shards) {
  char buf[1024];
  /* rotate by 7 = 2 shards + 1: two permutes (tail and head). */
  hk_module *p = spmd_check_partition(reg, rotate_text(12, 7, buf, sizeof buf), 4, NULL);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 2}, {HK_OP_ALL_GATHER, 0});
  hk_module_free(p);
}
END_TEST

START_TEST(rotate_whole_shards) {
  char buf[1024];
  /* rotate by 6 = 2 whole shards: the shards only move. */
  hk_module *p = spmd_check_partition(reg, rotate_text(12, 6, buf, sizeof buf), 4, NULL);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_CONCATENATE, 0});
  hk_module_free(p);
}
END_TEST

START_TEST(rotate_uneven) {
  char buf[1024];
  /* 10 over 4 (shards of 3, the last with 2 of padding), as XLA: the
   * rotation by 3 over the padded shards (one whole-shard permute) and the
   * one by 3 + 2 (two pieces from two distances), merged by position;
   * nothing gathered. */
  hk_module *p = spmd_check_partition(reg, rotate_text(10, 3, buf, sizeof buf), 4, NULL);
  ck_assert_int_eq(count_custom_calls(p), 0);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 3}, {HK_OP_ALL_GATHER, 0});
  hk_module_free(p);
}
END_TEST

/* ---- pad with wrap --------------------------------------------------------- */

START_TEST(pad_with_wrap_modifiers) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[1,18] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  s0 = f32[1,2] slice(p), slice={[0:1], [16:18]}, sharding={devices=[1,2]0,1}\n"
      "  m0 = f32[1,2] negate(s0), sharding={devices=[1,2]0,1}\n"
      "  s1 = f32[1,2] slice(p), slice={[0:1], [0:2]}, sharding={devices=[1,2]0,1}\n"
      "  m1 = f16[1,2] convert(s1), sharding={devices=[1,2]0,1}\n"
      "  m2 = f32[1,2] convert(m1), sharding={devices=[1,2]0,1}\n"
      "  ROOT c = f32[1,22] concatenate(m0, p, m2), dimensions={1}, sharding={devices=[1,2]0,1}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  /* two rotations; the pad needs no halo (each output shard reads its own
   * input shard and padding); nothing gathered. */
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 2}, {HK_OP_ALL_GATHER, 0});
  ck_assert_int_eq(count_custom_calls(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(pad_with_wrap_uneven) {
  /* 2 + 18 + 3 = 23 over 2 partitions: the rotations go through the
   * whole dimension, the values stay right. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[1,18] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  s0 = f32[1,2] slice(p), slice={[0:1], [16:18]}, sharding={devices=[1,2]0,1}\n"
      "  s1 = f32[1,3] slice(p), slice={[0:1], [0:3]}, sharding={devices=[1,2]0,1}\n"
      "  ROOT c = f32[1,23] concatenate(s0, p, s1), dimensions={1}, sharding={devices=[1,2]0,1}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(count_custom_calls(p), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_CONCATENATE) >= 2, 1);
  hk_module_free(p);
}
END_TEST

START_TEST(concat_on_unsharded_dim_untouched) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[12,4] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  a = f32[2,4] slice(p), slice={[10:12], [0:4]}, sharding={devices=[1,4]<=[4]}\n"
      "  b = f32[10,4] slice(p), slice={[0:10], [0:4]}, sharding={devices=[1,4]<=[4]}\n"
      "  ROOT c = f32[12,4] concatenate(a, b), dimensions={0}, sharding={devices=[1,4]<=[4]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 0}, {HK_OP_ALL_GATHER, 0},
                        {HK_OP_CONCATENATE, 1});
  hk_module_free(p);
}
END_TEST

/* ---- pad along partitioned dims -------------------------------------------- */

static hk_module *pad_case(const char *in, const char *out, const char *padding,
                           const char *sharding, int64_t n) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n"
           "ENTRY e {\n"
           "  p = %s parameter(0), sharding=%s\n"
           "  v = f32[] constant(-3)\n"
           "  ROOT pad = %s pad(p, v), padding=%s, sharding=%s\n"
           "}\n",
           in, sharding, out, padding, sharding);
  return spmd_check_partition(reg, text, n, NULL);
}

START_TEST(pad_halo_even) {
  /* 257 -> 259 over 2: shard 0 needs one element of shard 1. */
  hk_module *p = pad_case("f32[14,257]", "f32[14,259]", "0_0x0_2", "{devices=[1,2]0,1}", 2);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0});
  int64_t dims[2] = {14, 130};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(pad_halo_both_sides) {
  /* 16 -> 20 (2 low, 2 high) over 4, a non-zero pad value, a second
   * padded dim that is not partitioned, partial replication. */
  hk_module *p = pad_case("f32[16,3]", "f32[20,5]", "2_2x1_1",
                          "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", 8);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 0}, {HK_OP_COLLECTIVE_PERMUTE, 2});
  hk_module_free(p);
}
END_TEST

START_TEST(pad_halo_negative_low) {
  /* Negative low padding (a merged slice) shifts the window right. */
  hk_module *p = pad_case("f32[12]", "f32[12]", "-2_2", "{devices=[4]<=[4]}", 4);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 0}, {HK_OP_COLLECTIVE_PERMUTE, 1});
  hk_module_free(p);
}
END_TEST

START_TEST(pad_halo_two_hops) {
  /* Shifting 8 elements (4 shards of 2) right by 3 reads one whole
   * neighbour shard and the tail of the next one: two hops. */
  hk_module *p = pad_case("f32[8]", "f32[8]", "3_-3", "{devices=[4]<=[4]}", 4);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 2}, {HK_OP_ALL_GATHER, 0});
  hk_module_free(p);
}
END_TEST

START_TEST(pad_too_wide_for_halo) {
  /* 16 -> 32 over 16: output shard j reads input j/2 .. (one element at
   * 2j, 2j + 1), up to 15 shards away: one permute of one element per
   * distance (XLA's compact exchange would merge them), nothing gathered. */
  hk_module *p = pad_case("f32[16]", "f32[32]", "0_16", "{devices=[16]<=[16]}", 16);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_le(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 15);
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_preprocess");
  TCase *t = tcase_create("rewrites");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, pad_then_slice_merged);
  tcase_add_test(t, pad_then_slice_kept_when_unsharded_dim);
  tcase_add_test(t, rotate_within_shard);
  tcase_add_test(t, rotate_across_shards);
  tcase_add_test(t, rotate_whole_shards);
  tcase_add_test(t, rotate_uneven);
  tcase_add_test(t, pad_with_wrap_modifiers);
  tcase_add_test(t, pad_with_wrap_uneven);
  tcase_add_test(t, concat_on_unsharded_dim_untouched);
  tcase_add_test(t, pad_halo_even);
  tcase_add_test(t, pad_halo_both_sides);
  tcase_add_test(t, pad_halo_negative_low);
  tcase_add_test(t, pad_halo_two_hops);
  tcase_add_test(t, pad_too_wide_for_halo);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
