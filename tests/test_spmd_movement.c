/* test_spmd_movement.c - Check tests of the data-movement ops along
 * partitioned dims (concatenate.c, the reshard engine's halo exchanges,
 * reshape): each asserts the collectives XLA's partitioner would choose,
 * their bytes, and the values against the global module. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }


/* The first instruction of opcode op in m's entry. */
static const hk_instr *first_of(const hk_module *m, hk_opcode op) {
  for (const hk_instr *i = m->entry->first; i; i = i->next)
    if (i->opcode == op) return i;
  return NULL;
}

/* Only collective-permutes (at least `min` of them): halos, no gather. */
static void assert_halos_only(const hk_module *m, int64_t min) {
  hk_test_expect_ops(m, {HK_OP_ALL_GATHER, 0}, {HK_OP_ALL_TO_ALL, 0}, {HK_OP_ALL_REDUCE, 0});
  ck_assert_int_ge(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), min);
}

/* ---- concatenate ------------------------------------------------------------ */

START_TEST(concat_uneven_by_one_all_reduce) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  a = f32[3,13] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  b = f32[3,6] parameter(1), sharding={devices=[1,4]<=[4]}\n"
      "  ROOT c = f32[3,19] concatenate(a, b), dimensions={1}, sharding={devices=[1,4]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  /* Shards written in place, summed once: b's shards of 2 from 13 on reach
   * 21, one past the padded result (4 x 5). */
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *ar = first_of(p, HK_OP_ALL_REDUCE);
  ck_assert_ptr_nonnull(ar);
  ck_assert_int_eq(ar->shape->dims[1], 21);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 3 * 21 * 4);
  ck_assert_int_eq(p->entry->root->shape->dims[1], 5);
  hk_module_free(p);
}
END_TEST

START_TEST(concat_small_operands_buffer_holds_their_padding) {
  /* Operands of 1 and 1 element over 4 shards each take 4 slots: the
   * buffer grows past the padded result (8) to hold the second's. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  a = f32[1,2] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  b = f32[1,2] parameter(1), sharding={devices=[4,1]<=[4]}\n"
      "  d = f32[6,2] parameter(2), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT c = f32[8,2] concatenate(a, b, d), dimensions={0}, sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *ar = first_of(p, HK_OP_ALL_REDUCE);
  ck_assert_ptr_nonnull(ar);
  ck_assert_int_eq(ar->shape->dims[0], 10);   /* 2 + 4 x 2 */
  hk_module_free(p);
}
END_TEST

START_TEST(concat_sums_within_groups_of_the_dim) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  a = f32[4,6] parameter(0), sharding={devices=[2,2]<=[4]}\n"
      "  b = f32[4,2] parameter(1), sharding={devices=[2,2]<=[4]}\n"
      "  ROOT c = f32[4,8] concatenate(a, b), dimensions={1}, sharding={devices=[2,2]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *ar = first_of(p, HK_OP_ALL_REDUCE);
  ck_assert_ptr_nonnull(ar);
  /* Devices {0,1} and {2,3} split dim 1: the sums stay within them. */
  ck_assert_int_eq(ar->shape->dims[0], 2);
  ck_assert_int_eq(ar->shape->dims[1], 8);
  hk_module_free(p);
}
END_TEST

START_TEST(concat_unpartitioned_dim_moves_nothing) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  a = f32[8,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  b = f32[8,5] parameter(1), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT c = f32[8,8] concatenate(a, b), dimensions={1}, sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST


/* ---- partial replication -> finer tiling of an uneven dim (halo) ----------- */

START_TEST(partial_to_tiled_uneven_by_right_halo) {
  /* 6 rows: shards of 3 under [2 (x2 replicas)], of 2 under [4]: the
   * second target tile of shard 0 needs row 3, one halo row from shard 1. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[6,3] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  ROOT c = f32[6,3] copy(x), sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *cp = first_of(p, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_ptr_nonnull(cp);
  ck_assert_int_eq(cp->shape->dims[0], 1);
  ck_assert_int_eq(cp->attrs->n_source_target_pairs, 2);   /* {2,0}, {3,1} */
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_partial_uneven_halo_within_replicas) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[6,3] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[6,3] copy(x), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 3 * 4);
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_halo_past_the_neighbour) {
  /* 10 over [2 (x4)] = shards of 5; over [8] = tiles of 2, 4 per shard =
   * 8: shard 1 needs [8, 16) and holds [5, 10) -- its left 3 dropped, all
   * it reads beyond is padding. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[10,2] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[10,2] copy(x), sharding={devices=[8,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_halos_only(p, 1);
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_two_uneven_dims) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[6,7] parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[6,7] copy(x), sharding={devices=[4,2]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_halos_only(p, 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  hk_module_free(p);
}
END_TEST

/* ---- reshape splitting / merging an unevenly partitioned dim --------------- */

START_TEST(reshape_merging_a_split_minor_dim_gathers_only_that_dim) {
  /* XLA's ReshapeWithReshard3 made small: [2,16] split [2,4] merges into
   * 32 split 8 ways.  No operand tiling gives the output's (8 does not
   * divide 2), dim 1's split cannot go through the merge (device (p,q)'s
   * elements are not contiguous) and no halo fixes it.  As XLA, only dim 1
   * is gathered, within groups of 4 (its f32[1,4] piece sent), the merged
   * dim keeps dim 0's split, and the result is sliced to the 8-way output
   * locally: nothing is made whole (was: both dims gathered). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2,16] parameter(0), sharding={devices=[2,4]<=[8]}\n"
      "  ROOT r = f32[32] reshape(x), sharding={devices=[8]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 1 * 4 * 4);
  const hk_instr *ag = first_of(p, HK_OP_ALL_GATHER);
  ck_assert_ptr_nonnull(ag);
  ck_assert_int_eq(ag->shape->dims[0], 1);
  ck_assert_int_eq(ag->shape->dims[1], 16);
  int64_t root[1] = {4};
  ck_assert(spmd_check_root_dims(p, 1, root));
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_keeps_uneven_splits_of_dims_it_leaves_alone) {
  /* 13 and 5 pass through the reshape as they are, each split unevenly
   * (tiles of 7 and 3, padded alike on both sides); only the last two
   * dims merge.  Every split stays: no collective (was: a fallback that
   * gathered the operand, 3 collectives). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[13,5,4,6] parameter(0), sharding={devices=[2,2,2,1]<=[8]}\n"
      "  ROOT r = f32[13,5,24] reshape(x), sharding={devices=[2,2,2]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t root[3] = {7, 3, 12};
  ck_assert(spmd_check_root_dims(p, 3, root));
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_split_uneven_aligned_moves_nothing) {
  /* 14 rows over 4 = shards of 4; [7,2] over 4 = 2 x 2 rows: the same rows. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[14,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT r = f32[7,2,3] reshape(x), sharding={devices=[4,1,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_split_uneven_by_halo) {
  /* 10 over 4 = shards of 3; [5,2] over 4 = 2 x 2: output shard j reads
   * input [4j, 4j + 4) and holds [3j, 3j + 3). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[10] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  ROOT r = f32[5,2] reshape(x), sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_halos_only(p, 1);
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_merge_uneven_by_left_halo) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = s32[7,10] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  ROOT r = s32[14,5] reshape(x), sharding={devices=[2,1]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  /* Shard 1 needs merged row 7, the last of shard 0's 8: one row of 5. */
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *cp = first_of(p, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_ptr_nonnull(cp);
  ck_assert_int_eq(cp->shape->dims[0], 1);
  ck_assert_int_eq(cp->attrs->n_source_target_pairs, 1);
  ck_assert_int_eq(cp->attrs->source_target_pairs[0].a, 0);
  ck_assert_int_eq(cp->attrs->source_target_pairs[0].b, 1);
  int64_t root[2] = {7, 5};
  ck_assert(spmd_check_root_dims(p, 2, root));
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_merge_uneven_four_ways) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[5,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT r = f32[10,2] reshape(x), sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_halos_only(p, 1);
  hk_module_free(p);
}
END_TEST

/* ---- values rebuilt under the target sharding (rebuild.c) --------------------- */

START_TEST(rebuild_iota_times_broadcast_instead_of_all_to_all) {
  /* a = 1.5 * float(iota) is [2,2]; its user wants [4,1] (an all-to-all
   * before): every device builds its own rows from the iota plus its
   * tile offset, nothing moves. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  z = f32[] constant(1.5)\n"
      "  b = f32[8,6] broadcast(z), dimensions={}, sharding={devices=[2,2]<=[4]}\n"
      "  i = s32[8,6] iota(), iota_dimension=0, sharding={devices=[2,2]<=[4]}\n"
      "  f = f32[8,6] convert(i), sharding={devices=[2,2]<=[4]}\n"
      "  a = f32[8,6] multiply(b, f), sharding={devices=[2,2]<=[4]}\n"
      "  p = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT r = f32[8,6] add(a, p), sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(rebuild_uneven_iota_and_replicated_operand) {
  /* An uneven iota along the split dim plus a replicated parameter,
   * [3,1] -> [1,3] and on to a replicated root: no all-to-all, no
   * all-gather; the tile offsets come from the target's tiles. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  q = s32[7,5] parameter(1), sharding={replicated}\n"
      "  i = s32[7,5] iota(), iota_dimension=1, sharding={devices=[3,1]<=[3]}\n"
      "  a = s32[7,5] add(i, q), sharding={devices=[3,1]<=[3]}\n"
      "  p = s32[7,5] parameter(0), sharding={devices=[1,3]<=[3]}\n"
      "  m = s32[7,5] multiply(a, p), sharding={devices=[1,3]<=[3]}\n"
      "  ROOT t = (s32[7,5], s32[7,5]) tuple(m, a), sharding={{devices=[1,3]<=[3]}, {replicated}}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 3, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(rebuild_zero_broadcast_under_dynamic_update_slice) {
  /* A zero buffer [2,2,1,1] updated across dim 1's shard boundary (rows
   * 6..9 of 16): moving dim 1's partitions away costs an all-to-all of
   * the buffer in and of the result out; with the zeros built under any
   * sharding, replicating dim 1 costs only the update's gather (its
   * [2,2,4,2] tile, 128 bytes) and the way back is a local slice. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  zero = f32[] constant(0)\n"
      "  buf = f32[4,16,16,2] broadcast(zero), dimensions={}, sharding={devices=[2,2,1,1]<=[4]}\n"
      "  u = f32[4,4,4,2] parameter(0), sharding={devices=[2,2,1,1]<=[4]}\n"
      "  c0 = s32[] constant(0)\n"
      "  c6 = s32[] constant(6)\n"
      "  ROOT d = f32[4,16,16,2] dynamic-update-slice(buf, u, c0, c6, c6, c0), sharding={devices=[2,2,1,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 128);
  hk_module_free(p);
  /* The update a function of a replicated parameter too: nothing moves. */
  text = "HloModule m\nENTRY e {\n"
         "  zero = f32[] constant(0)\n"
         "  buf = f32[4,16,16,2] broadcast(zero), dimensions={}, sharding={devices=[2,2,1,1]<=[4]}\n"
         "  q = f32[4,4,4,2] parameter(0), sharding={replicated}\n"
         "  c = f32[4,4,4,2] copy(q), sharding={devices=[2,2,1,1]<=[4]}\n"
         "  u = f32[4,4,4,2] add(c, c), sharding={devices=[2,2,1,1]<=[4]}\n"
         "  c0 = s32[] constant(0)\n"
         "  c6 = s32[] constant(6)\n"
         "  ROOT d = f32[4,16,16,2] dynamic-update-slice(buf, u, c0, c6, c6, c0), sharding={devices=[2,2,1,1]<=[4]}\n}\n";
  p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(rebuild_broadcast_transpose_of_a_replicated_vector) {
  /* exp(transpose(broadcast(q))) of a replicated q, [2,2] -> [1,4]: an
   * all-to-all and permutes before; each device broadcasts its own piece
   * of q (the broadcast's and transpose's operand tilings), nothing moves. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  q = f32[6] parameter(1), sharding={replicated}\n"
      "  b = f32[8,6] broadcast(q), dimensions={1}, sharding={devices=[2,2]<=[4]}\n"
      "  t = f32[6,8] transpose(b), dimensions={1,0}, sharding={devices=[2,2]<=[4]}\n"
      "  e = f32[6,8] exponential(t), sharding={devices=[2,2]<=[4]}\n"
      "  p = f32[6,8] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  ROOT r = f32[6,8] add(e, p), sharding={devices=[1,4]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(reshard_permutes_before_gathering) {
  /* [8,2] to columns split 4 ways over devices in another order: one
   * all-to-all moves a row factor to the columns, the device order is
   * fixed by a collective-permute of the small tiles, then one all-gather
   * makes the rows whole (no permute of the gathered value). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[64,16] parameter(0), sharding={devices=[8,2]<=[16]}\n"
      "  ROOT c = f32[64,16] copy(p), sharding={devices=[1,4,4]<=[2,4,2]T(1,2,0) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 16, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  const hk_instr *cp = hk_test_last_op(p, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(hk_shape_byte_size(cp->shape), 16 * 4 * 4);   /* a source tile */
  ck_assert_ptr_eq(hk_test_last_op(p, HK_OP_ALL_GATHER)->operands[0], cp);
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_halo_with_another_dim_tiled) {
  /* Dim 0 splits alike on both sides (a local reshape); dim 1's 10 rows
   * over 4 (shards of 3) become [5,2] over 4 (2 x 2 rows): each shard's
   * rows come by one collective-permute within its dim-0 group, of
   * [3,3,4] f32 tiles. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[6,10,4] parameter(0), sharding={devices=[2,4,1]<=[8]}\n"
      "  ROOT r = f32[6,5,2,4] reshape(x), sharding={devices=[2,4,1,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_halos_only(p, 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  const hk_instr *cp = first_of(p, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(hk_shape_byte_size(cp->shape), 3 * 3 * 4 * 4);
  for (int64_t k = 0; k < cp->attrs->n_source_target_pairs; k++)   /* within a dim-0 half */
    ck_assert_int_eq(cp->attrs->source_target_pairs[k].a / 4, cp->attrs->source_target_pairs[k].b / 4);
  int64_t root[4] = {3, 2, 2, 4};
  ck_assert(spmd_check_root_dims(p, 4, root));
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_halo_three_neighbours_partially_replicated) {
  /* 14 rows over 4 (shards of 4) split as [2,7] with the 2 over 4: shard
   * 1 holds rows [7, 14), from shards 1, 2 and 3 (XLA's
   * ReshapePartialHaloExchange with another shape): three
   * collective-permutes, dims 0 and 2 local, replicas kept. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[4,14,4] parameter(0), sharding={devices=[2,4,1,2]<=[16] last_tile_dim_replicate}\n"
      "  ROOT r = f32[2,2,2,7,4] reshape(x), sharding={devices=[2,1,4,1,1,2]<=[16] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 16, NULL);
  assert_halos_only(p, 3);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 3);
  ck_assert_int_le(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 2 * 4 * 4 * 4 * 3);
  int64_t root[5] = {1, 2, 1, 7, 4};
  ck_assert(spmd_check_root_dims(p, 5, root));
  hk_module_free(p);
}
END_TEST

START_TEST(reshape_merge_halo_with_another_dim_tiled) {
  /* [5,2] over 4 (2 x 2 rows a shard) merge to 10 over 4 (shards of 3);
   * dim 0 splits alike on both sides: halos only. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[4,5,2,6] parameter(0), sharding={devices=[2,4,1,1]<=[8]}\n"
      "  ROOT r = f32[4,10,6] reshape(x), sharding={devices=[2,4,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_halos_only(p, 1);
  int64_t root[3] = {2, 3, 6};
  ck_assert(spmd_check_root_dims(p, 3, root));
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_all_to_all_then_slice) {
  /* [1,2,4] last_tile_dim_replicate to [2,4]: the 2 partitions move to
   * dim 0 by one all-to-all within pairs (of the [8,4] tile), then each
   * device slices its quarter of dim 1 (XLA's
   * ReshardPartialReplicateWithAllToAll): no all-gather. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[1,2,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[8,8] copy(p), sharding={devices=[2,4]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_TO_ALL, 1}, {HK_OP_ALL_GATHER, 0}, {HK_OP_COLLECTIVE_PERMUTE, 0},
                     {HK_OP_ALL_REDUCE, 0});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_TO_ALL), 8 * 4 * 4);
  const hk_instr *a2a = first_of(p, HK_OP_ALL_TO_ALL);
  const hk_replica_groups *g = a2a->attrs->replica_groups;
  ck_assert_int_eq(g->n_groups, 4);
  ck_assert_int_eq(g->group_start[1] - g->group_start[0], 2);
  int64_t root[2] = {4, 2};
  ck_assert(spmd_check_root_dims(p, 2, root));
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_uneven_all_to_all_then_slice) {
  /* 7 rows and 10 columns: the rows padded to 8 for the all-to-all, the
   * columns (whole after it) padded to 12 and sliced 3 ways. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  p = f32[7,10] parameter(0), sharding={devices=[1,2,3]<=[6] last_tile_dim_replicate}\n"
      "  ROOT c = f32[7,10] copy(p), sharding={devices=[2,3]<=[6]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 6, NULL);
  hk_test_expect_ops(p, {HK_OP_ALL_TO_ALL, 1}, {HK_OP_ALL_GATHER, 0}, {HK_OP_COLLECTIVE_PERMUTE, 0},
                     {HK_OP_ALL_REDUCE, 0});
  int64_t root[2] = {4, 4};
  ck_assert(spmd_check_root_dims(p, 2, root));
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_in_another_order_cuts_then_permutes) {
  /* Column half 0 is on devices {0,1,4,5}, half 1 on {2,3,6,7}; [1,8]
   * wants eighth d on device d, so devices 4,5 and 2,3 hold the wrong
   * half.  Each device cuts an eighth of its own half and one permute
   * delivers them: 64 x 16 floats per device (was: the whole f32[64,128]
   * all-gathered, 16 KB sent per device, a full rematerialization). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[64,128] parameter(0), sharding={devices=[1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}\n"
      "  ROOT c = f32[64,128] copy(x), sharding={devices=[1,8]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  hk_test_expect_ops(p, {HK_OP_COLLECTIVE_PERMUTE, 1}, {HK_OP_ALL_GATHER, 0}, {HK_OP_ALL_TO_ALL, 0});
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 64 * 16 * 4);
  int64_t root[2] = {64, 16};
  ck_assert(spmd_check_root_dims(p, 2, root));
  hk_module_free(p);
}
END_TEST

START_TEST(partial_to_tiled_with_halos_too_wide_ends) {
  /* The all-to-all to [1,2,8,8] leaves dim 2's 8 elements one to a device;
   * the [1,4,32] target wants 4 rows of halo each side, too wide to
   * exchange.  The general path finishes the reshard (was: it resharded
   * back to the source and round again until the stack overflowed). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[32,4,8] parameter(0), sharding={devices=[16,1,1,8]<=[128] last_tile_dim_replicate}\n"
      "  ROOT c = f32[32,4,8] copy(x), sharding={devices=[1,4,32]<=[128]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 128, NULL);
  int64_t root[3] = {32, 1, 1};
  ck_assert(spmd_check_root_dims(p, 3, root));
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_movement");
  TCase *t = tcase_create("movement");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, concat_uneven_by_one_all_reduce);
  tcase_add_test(t, reshard_permutes_before_gathering);
  tcase_add_test(t, concat_small_operands_buffer_holds_their_padding);
  tcase_add_test(t, concat_sums_within_groups_of_the_dim);
  tcase_add_test(t, concat_unpartitioned_dim_moves_nothing);
  tcase_add_test(t, partial_to_tiled_uneven_by_right_halo);
  tcase_add_test(t, partial_to_partial_uneven_halo_within_replicas);
  tcase_add_test(t, partial_to_tiled_halo_past_the_neighbour);
  tcase_add_test(t, partial_to_tiled_two_uneven_dims);
  tcase_add_test(t, reshape_split_uneven_aligned_moves_nothing);
  tcase_add_test(t, reshape_split_uneven_by_halo);
  tcase_add_test(t, reshape_merge_uneven_by_left_halo);
  tcase_add_test(t, reshape_merge_uneven_four_ways);
  tcase_add_test(t, reshape_merging_a_split_minor_dim_gathers_only_that_dim);
  tcase_add_test(t, reshape_keeps_uneven_splits_of_dims_it_leaves_alone);
  tcase_add_test(t, reshape_halo_with_another_dim_tiled);
  tcase_add_test(t, reshape_halo_three_neighbours_partially_replicated);
  tcase_add_test(t, reshape_merge_halo_with_another_dim_tiled);
  tcase_add_test(t, partial_to_tiled_all_to_all_then_slice);
  tcase_add_test(t, partial_to_tiled_uneven_all_to_all_then_slice);
  tcase_add_test(t, partial_to_tiled_with_halos_too_wide_ends);
  tcase_add_test(t, partial_to_tiled_in_another_order_cuts_then_permutes);
  tcase_add_test(t, rebuild_iota_times_broadcast_instead_of_all_to_all);
  tcase_add_test(t, rebuild_uneven_iota_and_replicated_operand);
  tcase_add_test(t, rebuild_zero_broadcast_under_dynamic_update_slice);
  tcase_add_test(t, rebuild_broadcast_transpose_of_a_replicated_vector);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
