/* test_spmd_sort.c - Check tests of sort and TopK partitioning: a sort
 * that is a TopK (sort(values, iota) read as its first k) and the TopK
 * custom call, split along the sorted dim, evenly or not: each partition
 * keeps its own best k and only those candidates are all-gathered. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

/* XLA's NaN-safe greater-than on f32 keys (the sign-folded bits). */
#define NAN_SAFE_GT                                                         \
  "gt {\n"                                                                  \
  "  a = f32[] parameter(0)\n"                                              \
  "  b = f32[] parameter(1)\n"                                              \
  "  ia = s32[] parameter(2)\n"                                             \
  "  ib = s32[] parameter(3)\n"                                             \
  "  ba = s32[] bitcast-convert(a)\n"                                       \
  "  z = s32[] constant(0)\n"                                               \
  "  na = pred[] compare(ba, z), direction=LT\n"                            \
  "  m = u32[] constant(2147483647)\n"                                      \
  "  ua = u32[] bitcast-convert(a)\n"                                       \
  "  sa = u32[] subtract(m, ua)\n"                                          \
  "  fa = s32[] bitcast-convert(sa)\n"                                      \
  "  ka = s32[] select(na, fa, ba)\n"                                       \
  "  bb = s32[] bitcast-convert(b)\n"                                       \
  "  nb = pred[] compare(bb, z), direction=LT\n"                            \
  "  ub = u32[] bitcast-convert(b)\n"                                       \
  "  sb = u32[] subtract(m, ub)\n"                                          \
  "  fb = s32[] bitcast-convert(sb)\n"                                      \
  "  kb = s32[] select(nb, fb, bb)\n"                                       \
  "  ROOT g = pred[] compare(ka, kb), direction=GT\n"                       \
  "}\n"

static const char *sort_topk_module(void) {
  return "HloModule m\n" NAN_SAFE_GT
         "ENTRY e {\n"
         "  x = f32[2,%d] parameter(0), sharding={devices=[1,2]0,1}\n"
         "  i = s32[2,%d] iota(), iota_dimension=1\n"
         "  s = (f32[2,%d], s32[2,%d]) sort(x, i), dimensions={1}, is_stable=true, to_apply=gt\n"
         "  v = f32[2,%d] get-tuple-element(s), index=0\n"
         "  sv = f32[2,4] slice(v), slice={[0:2], [0:4]}\n"
         "  j = s32[2,%d] get-tuple-element(s), index=1\n"
         "  sj = s32[2,4] slice(j), slice={[0:2], [0:4]}\n"
         "  ROOT t = (f32[2,4], s32[2,4]) tuple(sv, sj), sharding={{replicated}, {replicated}}\n"
         "}\n";
}

static hk_module *partition_sort_topk(int n) {
  char text[4096];
  snprintf(text, sizeof text, sort_topk_module(), n, n, n, n, n, n);
  return spmd_check_partition(reg, text, 2, NULL);
}

START_TEST(sort_topk_even) {
  /* Each partition sorts its f32[2,32] half and sends its first 4 values
   * and indices (2 x 32 bytes); the whole input never moves. */
  hk_module *p = partition_sort_topk(64);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 2);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE) + hk_test_count_op(p, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 2 * (2 * 4 * 4));
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_SORT), 2);
  hk_module_free(p);
}
END_TEST

START_TEST(sort_topk_uneven) {
  /* 63 = 32 + 31: the padding holds -inf and the largest index. */
  hk_module *p = partition_sort_topk(63);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 2 * (2 * 4 * 4));
  hk_module_free(p);
}
END_TEST

START_TEST(sort_topk_sharded_readers_read_the_candidates) {
  /* XLA's SortTopKPropagateBaseShape, small: the sort and its readers
   * sharded along the sort dim like the input.  The readers slice the
   * replicated candidates (8 = 2 partitions x 4), not a whole sort: two
   * all-gathers of the local first 4 and nothing else (the replicated
   * root is read straight off the candidates). */
  char text[4096];
  snprintf(text, sizeof text, "%s",
           "HloModule m\n" NAN_SAFE_GT
           "ENTRY e {\n"
           "  x = f32[2,64] parameter(0), sharding={devices=[1,2]0,1}\n"
           "  i = s32[2,64] iota(), iota_dimension=1, sharding={devices=[1,2]0,1}\n"
           "  s = (f32[2,64], s32[2,64]) sort(x, i), dimensions={1}, is_stable=true, to_apply=gt,"
           " sharding={{devices=[1,2]0,1}, {devices=[1,2]0,1}}\n"
           "  v = f32[2,64] get-tuple-element(s), index=0, sharding={devices=[1,2]0,1}\n"
           "  sv = f32[2,4] slice(v), slice={[0:2], [0:4]}, sharding={devices=[1,2]0,1}\n"
           "  j = s32[2,64] get-tuple-element(s), index=1, sharding={replicated}\n"
           "  sj = s32[2,4] slice(j), slice={[0:2], [0:4]}, sharding={devices=[1,2]0,1}\n"
           "  ROOT t = (f32[2,4], s32[2,4]) tuple(sv, sj), sharding={{replicated}, {replicated}}\n"
           "}\n");
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_SORT), 2);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL) + hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 2 * (2 * 4 * 4));
  hk_module_free(p);
}
END_TEST

START_TEST(sort_not_topk_unchanged) {
  /* A slice that does not start at 0 is no TopK: the sort goes the usual
   * way (its dim made whole), no second sort. */
  char text[4096];
  snprintf(text, sizeof text, "%s",
           "HloModule m\n" NAN_SAFE_GT
           "ENTRY e {\n"
           "  x = f32[2,64] parameter(0), sharding={devices=[1,2]0,1}\n"
           "  i = s32[2,64] iota(), iota_dimension=1\n"
           "  s = (f32[2,64], s32[2,64]) sort(x, i), dimensions={1}, is_stable=true, to_apply=gt\n"
           "  v = f32[2,64] get-tuple-element(s), index=0\n"
           "  ROOT sv = f32[2,4] slice(v), slice={[0:2], [1:5]}, sharding={replicated}\n"
           "}\n");
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_SORT), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(topk_custom_call_uneven) {
  /* f32[6,10] over three partitions (4, 4, 2 columns): each takes its top
   * 2, padding filled with -inf; the candidates' values and indices are
   * gathered (2 x 48 bytes) and sorted once more. */
  const char *text =
      "HloModule m\n"
      "cmp {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[6,10] parameter(0), sharding={devices=[1,3]<=[3]}\n"
      "  ROOT t = (f32[6,2], s32[6,2]) custom-call(p), custom_call_target=\"TopK\",\n"
      "    called_computations={cmp}, sharding={{replicated},{replicated}}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 3, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 2 * (6 * 2 * 4));
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_sort");
  TCase *t = tcase_create("sort_topk");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, sort_topk_even);
  tcase_add_test(t, sort_topk_uneven);
  tcase_add_test(t, sort_topk_sharded_readers_read_the_candidates);
  tcase_add_test(t, sort_not_topk_unchanged);
  tcase_add_test(t, topk_custom_call_uneven);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
