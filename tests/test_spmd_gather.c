/* test_spmd_gather.c - Check tests of gather and scatter partitioning:
 * operand passthrough, index passthrough, trivially sliced operand (with
 * out-of-range and negative indices), explicit batch dims, the method
 * option, scatter combiners; each checked for the collectives it emits
 * and for the values against the global module. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

/* ---- gather -------------------------------------------------------------- */

START_TEST(gather_operand_passthrough) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[2,9] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  indices = s32[3] constant({1, 0, 5}), sharding={replicated}\n"
      "  ROOT g = f32[3,9] gather(input, indices), offset_dims={1}, collapsed_slice_dims={0},\n"
      "    start_index_map={0}, index_vector_dim=1, slice_sizes={1,9}, sharding={devices=[1,2]0,1}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[2] = {3, 5};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_GATHER), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(gather_index_passthrough) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[2,9,8] parameter(0), sharding={replicated}\n"
      "  indices = s32[4,2,4] parameter(1), sharding={devices=[2,1,2]<=[4]}\n"
      "  ROOT g = f32[8,4,4] gather(input, indices), offset_dims={0}, collapsed_slice_dims={0,1},\n"
      "    start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1,8},\n"
      "    sharding={devices=[1,2,2]<=[4]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[3] = {8, 2, 2};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

static const char *trivial_gather =
    "HloModule m\n"
    "ENTRY e {\n"
    "  input = f32[17,9] parameter(0), sharding={devices=[2,1]0,1}\n"
    "  indices = s32[2,3] constant({{0, 16, -3}, {9, 8, 20}}), sharding={replicated}\n"
    "  ROOT g = f32[2,3,9] gather(input, indices), offset_dims={2}, collapsed_slice_dims={0},\n"
    "    start_index_map={0}, index_vector_dim=2, slice_sizes={1,9}, sharding={replicated}\n"
    "}\n";

START_TEST(gather_trivial_sliced_operand) {
  /* Each partition gathers the rows it holds (indices clamped globally,
   * shifted, masked), one all-reduce sums them; the operand stays put. */
  hk_module *p = spmd_check_partition(reg, trivial_gather, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  int64_t dims[3] = {2, 3, 9};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

static const char *both_sharded_gather =
    "HloModule m\n"
    "ENTRY e {\n"
    "  input = f32[16,9] parameter(0), sharding={devices=[2,1]0,1}\n"
    "  indices = s32[6,1] parameter(1), sharding={devices=[2,1]0,1}\n"
    "  ROOT g = f32[6,9] gather(input, indices), offset_dims={1}, collapsed_slice_dims={0},\n"
    "    start_index_map={0}, index_vector_dim=1, slice_sizes={1,9}, sharding={devices=[2,1]0,1}\n"
    "}\n";

START_TEST(gather_method_option) {
  /* Equal tiles on both sides: by default the indices keep theirs (no
   * masking); kTrivialSlicedOperand keeps the operand's and all-reduces. */
  hk_module *p = spmd_check_partition(reg, both_sharded_gather, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
  p = spmd_check_partition(reg, both_sharded_gather, 2,
                           "gather_partition_method=kTrivialSlicedOperand");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  hk_module_free(p);
  p = spmd_check_partition(reg, both_sharded_gather, 2, "gather_partition_method=kIndexPassthrough");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(gather_explicit_batch) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[10,3,14,4] parameter(0),\n"
      "    sharding={devices=[1,1,2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  indices = s32[14,10,6,2] parameter(1), sharding={devices=[2,1,2,1]<=[4]}\n"
      "  ROOT g = f32[14,10,6,2] gather(input, indices), offset_dims={3},\n"
      "    collapsed_slice_dims={1}, operand_batching_dims={0,2},\n"
      "    start_indices_batching_dims={1,0}, start_index_map={1,3},\n"
      "    index_vector_dim=3, slice_sizes={1,1,1,2}, sharding={devices=[2,1,2,1]<=[4]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[4] = {7, 10, 3, 2};
  ck_assert(spmd_check_root_dims(p, 4, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(gather_merged_passthroughs) {
  /* Operand tiles and indices tiles form one 2x2 grid over the devices:
   * every device gathers its own output tile, nothing moves. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[7,12] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  indices = s32[16,2] parameter(1), sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  ROOT g = f32[16,1,12] gather(input, indices), offset_dims={1,2}, collapsed_slice_dims={},\n"
      "    start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,12},\n"
      "    sharding={devices=[2,1,2]0,2,1,3}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[3] = {8, 1, 6};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(gather_trivial_within_index_groups) {
  /* Indices split in two on their batch dim, the operand's rows split in
   * four within each half (XLA's index passthrough recursing into a
   * trivially sliced operand): the indices stay put, each device gathers
   * the rows it holds and one all-reduce of its f32[4,2,4] output tile
   * (128 bytes) sums the four within its half. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[16,4] parameter(0), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
      "  indices = s32[8,2,1] parameter(1), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT g = f32[8,2,4] gather(input, indices), offset_dims={2}, collapsed_slice_dims={0},\n"
      "    start_index_map={0}, index_vector_dim=2, slice_sizes={1,4},\n"
      "    sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 4 * 2 * 4 * 4);
  int64_t dims[3] = {4, 2, 4};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(gather_trivial_sliced_recursing_into_index_groups) {
  /* kTrivialSlicedOperand with the operand's rows split in four and its
   * (whole-window) columns in two, the indices split in two on their batch
   * dim: as XLA's trivial-slice method recursing into index passthrough,
   * the indices stay put, the operand's columns are gathered inside each
   * row group (one all-gather of its f32[2,4] tile, 32 bytes), and one
   * all-reduce of the f32[2,6,8] output tile (384 bytes) sums the four row
   * tiles of each index half: nothing is gathered from the indices and no
   * reshard follows. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  input = f32[8,8] parameter(0), sharding={devices=[4,2]<=[2,4]T(1,0)}\n"
      "  indices = s32[4,6,1] parameter(1), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT g = f32[4,6,8] gather(input, indices), offset_dims={2}, collapsed_slice_dims={0},\n"
      "    start_index_map={0}, index_vector_dim=2, slice_sizes={1,8},\n"
      "    sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, "gather_partition_method=kTrivialSlicedOperand");
  ck_assert_int_eq(spmd_check_collectives(p), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_GATHER), 2 * 4 * 4);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 2 * 6 * 8 * 4);
  ck_assert_int_eq(p->entry->root->opcode, HK_OP_ALL_REDUCE);
  int64_t dims[3] = {2, 6, 8};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

/* ---- scatter ---------------------------------------------------------------- */

START_TEST(scatter_merged_passthroughs) {
  /* Operand tiles (dim 1) x indices tiles: each device scatters its
   * updates into its operand tile; the two index tiles are summed. */
  const char *text =
      "HloModule m\n"
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  in = f32[4,8] parameter(0), sharding={devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}\n"
      "  idx = s32[6,1] constant({{0}, {3}, {0}, {2}, {3}, {9}}),\n"
      "    sharding={devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  u = f32[6,8] parameter(1), sharding={devices=[2,2]0,2,1,3}\n"
      "  ROOT s = f32[4,8] scatter(in, idx, u), to_apply=add, update_window_dims={1},\n"
      "    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
      "    sharding={devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  int64_t dims[2] = {4, 4};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(gather_iota_parallel) {
  /* Indices built from iotas make operand dims 0 and 1 parallel to the
   * indices' dims: with matching tilings each device gathers locally,
   * its index values shifted by its shard offset. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = s32[8,4,2,2] parameter(0), sharding={devices=[4,1,2,1]<=[8]}\n"
      "  i0 = s32[1,8,4] iota(), iota_dimension=2, sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
      "  i1 = s32[1,8,4] iota(), iota_dimension=1, sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
      "  c = s32[2,8,4] concatenate(i0, i1), dimensions={0},\n"
      "    sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n"
      "  ROOT g = s32[8,4,2,2] gather(p, c), offset_dims={2,3}, collapsed_slice_dims={0,1},\n"
      "    start_index_map={1,0}, index_vector_dim=0, slice_sizes={1,1,2,2},\n"
      "    sharding={devices=[4,1,2,1]<=[8]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[4] = {2, 4, 1, 2};
  ck_assert(spmd_check_root_dims(p, 4, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_operand_passthrough_variadic) {
  const char *text =
      "HloModule m\n"
      "comb {\n"
      "  a0 = f32[] parameter(0)\n"
      "  a1 = f32[] parameter(1)\n"
      "  b0 = f32[] parameter(2)\n"
      "  b1 = f32[] parameter(3)\n"
      "  s = f32[] add(a0, b0)\n"
      "  x = f32[] maximum(a1, b1)\n"
      "  ROOT t = (f32[], f32[]) tuple(s, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  in0 = f32[2,9] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  in1 = f32[2,9] parameter(1), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  idx = s32[3] constant({1, 0, 1}), sharding={replicated}\n"
      "  u0 = f32[3,9] parameter(2), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  u1 = f32[3,9] parameter(3), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  ROOT s = (f32[2,9], f32[2,9]) scatter(in0, in1, idx, u0, u1), to_apply=comb,\n"
      "    update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},\n"
      "    index_vector_dim=1, sharding={{devices=[1,2,2]<=[4] last_tile_dim_replicate},\n"
      "    {devices=[1,2,2]<=[4] last_tile_dim_replicate}}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_variadic_operands_take_the_first_operands_split) {
  /* The operands are split differently (in1 on its window dim, in0 on
   * the dim the indices address): as XLA, in1 is resharded to in0's
   * split and the scatter runs on f32[1,9] pieces, the out-of-range rows
   * of each piece's replicated updates skipped; nothing falls back to
   * making every operand whole (was: 4 all-gathers before the scatter,
   * each device scattering into the whole f32[2,9] operands). */
  const char *text =
      "HloModule m\n"
      "comb {\n"
      "  a0 = f32[] parameter(0)\n"
      "  a1 = f32[] parameter(1)\n"
      "  b0 = f32[] parameter(2)\n"
      "  b1 = f32[] parameter(3)\n"
      "  s = f32[] add(a0, b0)\n"
      "  x = f32[] add(a1, b1)\n"
      "  ROOT t = (f32[], f32[]) tuple(s, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  in0 = f32[2,9] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}\n"
      "  in1 = f32[2,9] parameter(1), sharding={devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}\n"
      "  idx = s32[3] constant({1, 0, 1}), sharding={replicated}\n"
      "  u0 = f32[3,9] parameter(2), sharding={replicated}\n"
      "  u1 = f32[3,9] parameter(3), sharding={replicated}\n"
      "  ROOT s = (f32[2,9], f32[2,9]) scatter(in0, in1, idx, u0, u1), to_apply=comb,\n"
      "    update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},\n"
      "    index_vector_dim=1, sharding={{devices=[2,1,2]<=[4] last_tile_dim_replicate},\n"
      "    {devices=[2,1,2]<=[4] last_tile_dim_replicate}}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  hk_instr *sc = hk_test_last_op(p, HK_OP_SCATTER);
  ck_assert_ptr_nonnull(sc);
  for (int k = 0; k < 2; k++) {
    ck_assert_int_eq(sc->operands[k]->shape->dims[0], 1);
    ck_assert_int_eq(sc->operands[k]->shape->dims[1], 9);
  }
  /* in1 alone moves: one collective, no gather of in0 or the updates */
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_with_replicated_operand_follows_the_updates_split) {
  /* Neither the operand (replicated) nor the indices (replicated) give a
   * plan: the operand is driven by the updates' window split instead
   * (its slice of the passthrough dim cut locally), each device scatters
   * its columns, and the result goes to the scatter's row split by one
   * all-to-all (was: the updates gathered, 60 bytes sent, and the
   * scatter run whole on every device). */
  const char *text =
      "HloModule m\n"
      "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[] add(a, b) }\n"
      "ENTRY e {\n"
      "  in = f32[2,10] parameter(0), sharding={replicated}\n"
      "  idx = s32[3] constant({1, 0, 1}), sharding={replicated}\n"
      "  u = f32[3,10] parameter(1), sharding={devices=[1,2]0,1}\n"
      "  ROOT s = f32[2,10] scatter(in, idx, u), to_apply=add, update_window_dims={1},\n"
      "    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
      "    sharding={devices=[2,1]0,1}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 1);
  hk_instr *sc = hk_test_last_op(p, HK_OP_SCATTER);
  ck_assert_ptr_nonnull(sc);
  ck_assert_int_eq(sc->operands[2]->shape->dims[1], 5);   /* the updates stay split */
  hk_module_free(p);
}
END_TEST

static const char *index_scatter_fmt =
    "HloModule m\n"
    "comb {\n"
    "  a = f32[] parameter(0)\n"
    "  b = f32[] parameter(1)\n"
    "  ROOT r = f32[] %s\n"
    "}\n"
    "ENTRY e {\n"
    "  in = f32[4,6] parameter(0), sharding={replicated}\n"
    "  idx = s32[4,1] constant({{0}, {3}, {%d}, {7}}), sharding={devices=[2,1]0,1}\n"
    "  u = f32[4,6] parameter(1), sharding={devices=[2,1]0,1}\n"
    "  ROOT s = f32[4,6] scatter(in, idx, u), to_apply=comb, update_window_dims={1},\n"
    "    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,\n"
    "    sharding={replicated}\n"
    "}\n";

/* The module above with element type `type` instead of f32. */
static hk_module *index_scatter_typed(const char *root, int third_index, const char *type) {
  char text[2048], typed[4096];
  snprintf(text, sizeof text, index_scatter_fmt, root, third_index);
  size_t o = 0, tl = strlen(type);
  for (const char *c = text; *c && o + tl + 1 < sizeof typed; c++) {
    if (!strncmp(c, "f32", 3)) {
      memcpy(typed + o, type, tl);
      o += tl;
      c += 2;
    } else {
      typed[o++] = *c;
    }
  }
  typed[o] = 0;
  return spmd_check_partition(reg, typed, 2, NULL);
}

static hk_module *index_scatter(const char *root, int third_index) {
  return index_scatter_typed(root, third_index, "f32");
}

START_TEST(scatter_index_passthrough_combiners) {
  /* Row 0 is updated from both partitions: the combiner's all-reduce
   * merges them (identity-filled local scatters). */
  const char *roots[] = {"add(a, b)", "minimum(a, b)", "maximum(b, a)", "multiply(a, b)"};
  for (size_t k = 0; k < sizeof roots / sizeof roots[0]; k++) {
    hk_module *p = index_scatter(roots[k], 0);
    ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
    ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
    hk_module_free(p);
  }
}
END_TEST

START_TEST(scatter_overwrite_not_index_passthrough) {
  /* An overwriting combiner cannot merge partitions: no all-reduce of
   * partial scatters (unique indices keep the result deterministic). */
  hk_module *p = index_scatter("add(b, b)", 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
  p = index_scatter("copy(b)", 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_bf16_sum_not_reordered) {
  /* Summing bf16 partial scatters would round differently from the
   * global sequential accumulation: the updates stay in order. */
  hk_module *p = index_scatter_typed("add(a, b)", 0, "bf16");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
  p = index_scatter_typed("maximum(a, b)", 0, "bf16");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_trivial_sliced_operand) {
  const char *text =
      "HloModule m\n"
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  in = f32[17,9] parameter(0), sharding={devices=[2,1]0,1}\n"
      "  idx = s32[2,3] constant({{0, 16, -3}, {9, 8, 17}}), sharding={replicated}\n"
      "  u = f32[2,3,9] parameter(1), sharding={replicated}\n"
      "  ROOT s = f32[17,9] scatter(in, idx, u), to_apply=add, update_window_dims={2},\n"
      "    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=2,\n"
      "    sharding={devices=[2,1]0,1}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[2] = {9, 9};
  ck_assert(spmd_check_root_dims(p, 2, dims));
  hk_module_free(p);
}
END_TEST

/* Parallel dims whose indices (iotas) are split on other dims than the
 * operand's: the indices are rebuilt on every device and sliced to the
 * operand's split, so only the result's all-gathers move data. */
static const char iota_indices[] =
    "  i0 = s32[1,8,4] iota(), iota_dimension=1, sharding={devices=[1,8,1]<=[8]}\n"
    "  i1 = s32[1,8,4] iota(), iota_dimension=2, sharding={devices=[1,8,1]<=[8]}\n"
    "  idx = s32[2,8,4] concatenate(i0, i1), dimensions={0}, sharding={devices=[1,8,1]<=[8]}\n";

/* Only the two all-gathers making the (replicated) result whole. */
static void assert_only_result_gathers(const hk_module *p) {
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 2);
}

START_TEST(gather_parallel_dims_rebuild_iota_indices) {
  char text[2048];
  snprintf(text, sizeof text,
           "HloModule m\nENTRY e {\n"
           "  x = s32[8,4,2] parameter(0), sharding={devices=[4,2,1]<=[8]}\n%s"
           "  ROOT g = s32[8,4,2] gather(x, idx), offset_dims={2}, collapsed_slice_dims={0,1},\n"
           "    start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1,2}, sharding={replicated}\n"
           "}\n", iota_indices);
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_only_result_gathers(p);
  /* The local gather reads the operand's own shard with 2 x 2 indices. */
  const hk_instr *g = hk_test_last_op(p, HK_OP_GATHER);
  ck_assert_int_eq(g->operands[0]->opcode, HK_OP_PARAMETER);
  ck_assert_int_eq(g->shape->dims[0], 2);
  ck_assert_int_eq(g->shape->dims[1], 2);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_parallel_dims_rebuild_iota_indices) {
  char text[2048];
  snprintf(text, sizeof text,
           "HloModule m\n"
           "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n"
           "ENTRY e {\n"
           "  x = s32[8,4,2] parameter(0), sharding={devices=[4,2,1]<=[8]}\n%s"
           "  u = s32[8,4,2] parameter(1), sharding={devices=[4,2,1]<=[8]}\n"
           "  ROOT s = s32[8,4,2] scatter(x, idx, u), to_apply=add, update_window_dims={2},\n"
           "    inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=0,\n"
           "    sharding={replicated}\n"
           "}\n", iota_indices);
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_only_result_gathers(p);
  hk_module_free(p);
}
END_TEST

/* The largest value any instruction of m holds, in bytes. */
static int64_t largest_value(const hk_module *m) {
  int64_t most = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (hk_shape_is_array(i->shape) && hk_shape_byte_size(i->shape) > most) most = hk_shape_byte_size(i->shape);
  return most;
}

START_TEST(gather_indices_from_a_big_iota_are_not_rebuilt) {
  /* Small indices sliced out of 1 MiB iotas, split 8 ways, needed
   * replicated by the operand passthrough: rebuilding them would hold the
   * 2 MiB concatenate whole on every device, so they are resharded (each
   * device keeps its 256 KiB of it). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = s32[8,4,64] parameter(0), sharding={devices=[1,1,8]<=[8]}\n"
      "  i0 = s32[1,8,4,8192] iota(), iota_dimension=1, sharding={devices=[1,8,1,1]<=[8]}\n"
      "  i1 = s32[1,8,4,8192] iota(), iota_dimension=2, sharding={devices=[1,8,1,1]<=[8]}\n"
      "  c = s32[2,8,4,8192] concatenate(i0, i1), dimensions={0}, sharding={devices=[1,8,1,1]<=[8]}\n"
      "  s = s32[2,8,4,1] slice(c), slice={[0:2], [0:8], [0:4], [0:1]}, sharding={devices=[1,8,1,1]<=[8]}\n"
      "  idx = s32[2,8,4] reshape(s), sharding={devices=[1,8,1]<=[8]}\n"
      "  ROOT g = s32[8,4,64] gather(x, idx), offset_dims={2}, collapsed_slice_dims={0,1},\n"
      "    start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1,64}, sharding={devices=[1,1,8]<=[8]}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_le(largest_value(p), 2 * 1 * 4 * 8192 * 4);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(gather_parameter_indices_still_move) {
  /* The same gather with the indices a parameter: nothing to rebuild, the
   * indices are resharded by a collective. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = s32[8,4,2] parameter(0), sharding={devices=[4,2,1]<=[8]}\n"
      "  idx = s32[2,8,4] parameter(1), sharding={devices=[1,8,1]<=[8]}\n"
      "  ROOT g = s32[8,4,2] gather(x, idx), offset_dims={2}, collapsed_slice_dims={0,1},\n"
      "    start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1,2}, sharding={replicated}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_gt(hk_test_count_op(p, HK_OP_ALL_TO_ALL) + hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE) +
                       hk_test_count_op(p, HK_OP_ALL_GATHER),
                   0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_IOTA), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_index_passthrough_keeps_update_window_split) {
  /* Indices split 8 ways on their batch dim, updates 8 x 2 (batch x
   * window), the operand split on its scattered dim: the operand follows
   * the updates' window split (XLA's index passthrough recursing into
   * operand passthrough), the updates stay put and one all-reduce per
   * operand column half combines the 8 index groups. */
  const char *text =
      "HloModule m\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = f32[64,16] parameter(0), sharding={devices=[2,4,2]<=[2,4,2]T(2,1,0) last_tile_dim_replicate}\n"
      "  idx = s32[256,1] parameter(1), sharding={devices=[8,1,2]<=[16] last_tile_dim_replicate}\n"
      "  u = f32[256,16] parameter(2), sharding={devices=[8,2]<=[16]}\n"
      "  ROOT s = f32[64,16] scatter(x, idx, u), update_window_dims={1}, inserted_window_dims={0},\n"
      "    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add,\n"
      "    sharding={devices=[2,4,2]<=[2,4,2]T(2,1,0) last_tile_dim_replicate}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 16, NULL);
  const hk_instr *sc = hk_test_last_op(p, HK_OP_SCATTER);
  ck_assert_int_eq(sc->operands[2]->opcode, HK_OP_PARAMETER);
  ck_assert_int_eq(sc->operands[2]->shape->dims[0], 32);
  ck_assert_int_eq(sc->operands[2]->shape->dims[1], 8);
  ck_assert_int_eq(sc->operands[1]->opcode, HK_OP_PARAMETER);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  const hk_instr *ar = hk_test_last_op(p, HK_OP_ALL_REDUCE);
  ck_assert_int_eq(ar->shape->dims[0], 64);
  ck_assert_int_eq(ar->shape->dims[1], 8);
  hk_module_free(p);
}
END_TEST

START_TEST(scatter_uneven_index_rows_skipped) {
  /* 3 index rows split 2 ways: the second shard's padding row (zero after
   * the reshard, a real row) must not scatter its padding update; the
   * partitions' maxima meet in one all-reduce of the operand. */
  const char *text =
      "HloModule m\n"
      "mx {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] maximum(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = f32[8,8] parameter(0), sharding={replicated}\n"
      "  i0 = s32[3,1] parameter(1), sharding={replicated}\n"
      "  i = s32[3,1] clamp(s32[] constant(1), i0, s32[] constant(7)), sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}\n"
      "  u = f32[3,8] parameter(2), sharding={replicated}\n"
      "  ROOT s = f32[8,8] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0},\n"
      "    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=mx, sharding={replicated}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_REDUCE), 8 * 8 * 4);
  hk_module_free(p);
}
END_TEST

START_TEST(gather_of_replicated_inputs_rebuilt_for_a_replicated_user) {
  /* The gather's operands are copies of replicated parameters: its
   * replicated reader computes it whole on each device instead of
   * all-gathering the partitioned result. */
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4,6] parameter(0), sharding={replicated}\n"
      "  j = s32[5] parameter(1), sharding={replicated}\n"
      "  x = f32[4,6] copy(a), sharding={devices=[1,2,2]1,0,3,2 last_tile_dim_replicate}\n"
      "  i = s32[5] copy(j), sharding={devices=[2,2]1,2,3,0 last_tile_dim_replicate}\n"
      "  g = f32[5,6] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},\n"
      "    index_vector_dim=1, slice_sizes={1,6}, sharding={devices=[2,2]<=[4]}\n"
      "  ROOT r = f32[5,6] copy(g), sharding={replicated}\n"
      "}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_instr *g = hk_test_last_op(p, HK_OP_GATHER);
  ck_assert_int_eq(g->shape->dims[0], 5);
  ck_assert_int_eq(g->shape->dims[1], 6);
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_gather");
  TCase *t = tcase_create("gather_scatter");
  tcase_add_test(t, scatter_uneven_index_rows_skipped);
  tcase_add_test(t, gather_of_replicated_inputs_rebuilt_for_a_replicated_user);
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, gather_operand_passthrough);
  tcase_add_test(t, gather_index_passthrough);
  tcase_add_test(t, gather_trivial_sliced_operand);
  tcase_add_test(t, gather_method_option);
  tcase_add_test(t, gather_explicit_batch);
  tcase_add_test(t, gather_merged_passthroughs);
  tcase_add_test(t, gather_iota_parallel);
  tcase_add_test(t, gather_trivial_within_index_groups);
  tcase_add_test(t, gather_trivial_sliced_recursing_into_index_groups);
  tcase_add_test(t, scatter_merged_passthroughs);
  tcase_add_test(t, scatter_operand_passthrough_variadic);
  tcase_add_test(t, scatter_variadic_operands_take_the_first_operands_split);
  tcase_add_test(t, scatter_with_replicated_operand_follows_the_updates_split);
  tcase_add_test(t, scatter_index_passthrough_combiners);
  tcase_add_test(t, scatter_overwrite_not_index_passthrough);
  tcase_add_test(t, scatter_bf16_sum_not_reordered);
  tcase_add_test(t, scatter_trivial_sliced_operand);
  tcase_add_test(t, gather_parallel_dims_rebuild_iota_indices);
  tcase_add_test(t, scatter_parallel_dims_rebuild_iota_indices);
  tcase_add_test(t, gather_parameter_indices_still_move);
  tcase_add_test(t, gather_indices_from_a_big_iota_are_not_rebuilt);
  tcase_add_test(t, scatter_index_passthrough_keeps_update_window_split);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
