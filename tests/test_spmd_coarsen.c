/* test_spmd_coarsen.c - Check tests of reshards that merge tiles (coarsen.c):
 * a dim split fp ways going to tp | fp ways is all-gathered within the
 * groups of fp / tp devices whose tiles merge, never made whole and sliced
 * again (uneven tiles realigned by a halo exchange first); each test asserts the collectives, their groups and bytes, and the
 * values against the global module. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

/* Asserts group g of the collective c is exactly `ids` (n of them). */
static void assert_group(const hk_instr *c, int g, int n, const int64_t *ids) {
  const hk_replica_groups *rg = c->attrs->replica_groups;
  ck_assert_ptr_nonnull(rg);
  ck_assert_int_eq(rg->group_start[g + 1] - rg->group_start[g], n);
  for (int k = 0; k < n; k++) ck_assert_int_eq(rg->ids[rg->group_start[g] + k], ids[k]);
}

START_TEST(rows_merge_within_groups_of_four) {
  /* 8 row tiles to 2 replicated 4 ways: one all-gather of the f32[8,8]
   * tile within {0..3} and {4..7}. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[64,8] parameter(0), sharding={devices=[8,1]<=[8]}\n"
      "  ROOT c = f32[64,8] copy(p), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_ptr_nonnull(ag);
  ck_assert_int_eq(ag->attrs->replica_groups->n_groups, 2);
  assert_group(ag, 0, 4, (const int64_t[]){0, 1, 2, 3});
  assert_group(ag, 1, 4, (const int64_t[]){4, 5, 6, 7});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 8 * 8 * 4);
  ck_assert(spmd_check_root_dims(p, 2, (const int64_t[]){32, 8}));
  hk_module_free(p);
}
END_TEST

START_TEST(merge_follows_the_device_order) {
  /* Devices in transposed order: row tile t of 4 is on {t, t + 4}; the
   * target's tile 0 on {0, 1, 4, 5} is tiles 0 and 1 merged, so pairs
   * {0, 1}, {4, 5}, {2, 3}, {6, 7} gather and no permute follows. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[16,4] parameter(0), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
      "  ROOT c = f32[16,4] copy(p), sharding={devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 1}, {HK_OP_ALL_TO_ALL, 0}, {HK_OP_COLLECTIVE_PERMUTE, 0},
                     {HK_OP_ALL_REDUCE, 0});
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_int_eq(ag->attrs->replica_groups->n_groups, 4);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 4 * 4 * 4);
  hk_module_free(p);
}
END_TEST

START_TEST(uneven_dim_merges_when_tiles_line_up) {
  /* 7 rows in 4 tiles of 2 (the last padded) to 2 tiles of 4: pairs of
   * tiles fill new ones exactly, so pairs gather. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[7,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT c = f32[7,3] copy(p), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_int_eq(ag->attrs->replica_groups->n_groups, 2);
  assert_group(ag, 1, 2, (const int64_t[]){2, 3});
  ck_assert(spmd_check_root_dims(p, 2, (const int64_t[]){4, 3}));
  hk_module_free(p);
}
END_TEST

START_TEST(misaligned_uneven_dim_realigns_by_halo) {
  /* 10 rows in tiles of 3 to tiles of 5: a pair of old tiles holds 6, so
   * the second pair's shards first shift their windows left by one (one
   * collective-permute of the halo row), then pairs gather and keep 5. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[10,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT c = f32[10,3] copy(p), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 1}, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_TO_ALL, 0},
                     {HK_OP_ALL_REDUCE, 0});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 1 * 3 * 4);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 3 * 3 * 4);
  ck_assert(spmd_check_root_dims(p, 2, (const int64_t[]){5, 3}));
  hk_module_free(p);
}
END_TEST

START_TEST(tiles_past_the_data_realign_from_far_shards) {
  /* XLA's TileToPartialReplicateHaloExchangeWithPadding: 2 rows over 8
   * shards to 2 tiles replicated 4 ways; row 1 (shard 1) reaches the
   * second group by a permute, no device holds the whole value. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[2,123] parameter(0), sharding={devices=[8,1]<=[8]}\n"
      "  ROOT c = f32[2,123] copy(p), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 1}, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_TO_ALL, 0},
                     {HK_OP_ALL_REDUCE, 0});
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_int_eq(ag->attrs->replica_groups->n_groups, 2);
  ck_assert(spmd_check_root_dims(p, 2, (const int64_t[]){1, 123}));
  hk_module_free(p);
}
END_TEST

START_TEST(two_dims_merge_by_one_gather_each) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[16,16] parameter(0), sharding={devices=[4,4]<=[16]}\n"
      "  ROOT c = f32[16,16] copy(p), sharding={devices=[2,2,4]<=[2,2,2,2]T(0,2,1,3) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 16, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 2}, {HK_OP_ALL_TO_ALL, 0}, {HK_OP_COLLECTIVE_PERMUTE, 0},
                     {HK_OP_ALL_REDUCE, 0});
  /* f32[4,4] then f32[8,4] (or [4,8]) sent. */
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), (16 + 32) * 4);
  ck_assert(spmd_check_root_dims(p, 2, (const int64_t[]){8, 8}));
  hk_module_free(p);
}
END_TEST

START_TEST(dot_gathers_the_cheaper_operand_within_groups) {
  /* XLA's PartiallyReplicateRHS at 16 devices: the lhs [4 contracting, 4
   * non-contracting] stays; the rhs, split 16 ways on the contracting dim,
   * is gathered within groups of 4 to the lhs's split; a local dot; the
   * partial sums all-reduced over the 4 contracting shards. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  lhs = f32[64,32] parameter(0), sharding={devices=[4,4]<=[16]}\n"
      "  rhs = f32[64,16] parameter(1), sharding={devices=[16,1]<=[16]}\n"
      "  ROOT dot = f32[32,16] dot(lhs, rhs), lhs_contracting_dims={0}, rhs_contracting_dims={0},"
      " sharding={devices=[4,1,4]<=[4,4]T(1,0) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 16, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_GATHER, 1}, {HK_OP_ALL_REDUCE, 1}, {HK_OP_ALL_TO_ALL, 0},
                     {HK_OP_COLLECTIVE_PERMUTE, 0});
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  assert_group(ag, 0, 4, (const int64_t[]){0, 1, 2, 3});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 4 * 16 * 4);
  const hk_instr *ar = hk_test_last_op(p, HK_OP_ALL_REDUCE);
  assert_group(ar, 0, 4, (const int64_t[]){0, 4, 8, 12});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 8 * 16 * 4);
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_coarsen");
  TCase *t = tcase_create("coarsen");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, rows_merge_within_groups_of_four);
  tcase_add_test(t, merge_follows_the_device_order);
  tcase_add_test(t, uneven_dim_merges_when_tiles_line_up);
  tcase_add_test(t, misaligned_uneven_dim_realigns_by_halo);
  tcase_add_test(t, tiles_past_the_data_realign_from_far_shards);
  tcase_add_test(t, two_dims_merge_by_one_gather_each);
  tcase_add_test(t, dot_gathers_the_cheaper_operand_within_groups);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
