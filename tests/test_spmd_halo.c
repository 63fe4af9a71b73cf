/* test_spmd_halo.c - Check tests of halo exchange (halo.c, windowed.c) and
 * the ops built on it (window_ops.c, conv.c): reduce-window, pad, slice,
 * reverse and spatially partitioned convolutions.  Each asserts the
 * collectives emitted (collective-permutes, never an all-gather of the
 * data), the halo widths they carry, their source-target pairs, and the
 * values against the global module. */
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }

static void teardown(void) { hk_registry_free(reg); }

/* The permutes of m whose operand has `width` elements along dim d, and
 * whether the first such carries exactly `pairs` (in any order). */
static int64_t permutes_of_width(const hk_module *m, int d, int64_t width) {
  int64_t n = 0;
  const hk_computation *c = m->entry;
  for (hk_instr *i = c->first; i; i = i->next)
    if (i->opcode == HK_OP_COLLECTIVE_PERMUTE && i->shape->dims[d] == width) n++;
  return n;
}

static const hk_instr *permute_of_width(const hk_module *m, int d, int64_t width, int64_t skip) {
  for (hk_instr *i = m->entry->first; i; i = i->next)
    if (i->opcode == HK_OP_COLLECTIVE_PERMUTE && i->shape->dims[d] == width && skip-- == 0) return i;
  return NULL;
}

static bool has_pairs(const hk_instr *cp, int n, const hk_pair *want) {
  if (!cp || cp->attrs->n_source_target_pairs != n) return false;
  for (int k = 0; k < n; k++) {
    bool found = false;
    for (int j = 0; j < n; j++)
      found |= cp->attrs->source_target_pairs[j].a == want[k].a &&
               cp->attrs->source_target_pairs[j].b == want[k].b;
    if (!found) return false;
  }
  return true;
}

/* A permute moving each shard's edge to its right / left neighbour among 4. */
static const hk_pair to_right4[3] = {{0, 1}, {1, 2}, {2, 3}};
static const hk_pair to_left4[3] = {{1, 0}, {2, 1}, {3, 2}};

static void assert_no_gather(const hk_module *m) {
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
}

static const char sum_comp[] =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

/* ---- reduce-window ------------------------------------------------------------ */

START_TEST(reduce_window_one_element_halos) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[16] parameter(0), sharding={devices=[4]<=[4]}\n"
           "  z = f32[] constant(0)\n"
           "  ROOT r = f32[16] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add,\n"
           "    sharding={devices=[4]<=[4]}\n}\n", sum_comp);
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  /* One element from each side: 2 permutes of f32[1] = 4 bytes each. */
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  ck_assert_int_eq(permutes_of_width(p, 0, 1), 2);
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 0), 3, to_right4));
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 1), 3, to_left4));
  ck_assert_int_eq(hk_shape_byte_size(permute_of_width(p, 0, 1, 0)->shape), 4);
  ck_assert_int_eq(p->entry->root->shape->dims[0], 4);
  hk_module_free(p);
}
END_TEST

START_TEST(reduce_window_halo_beyond_neighbour) {
  /* Window 7 over shards of 2: 3 elements each side, from two neighbours
   * (the nearest whole, one element of the next). */
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[16] parameter(0), sharding={devices=[8]<=[8]}\n"
           "  z = f32[] constant(0)\n"
           "  ROOT r = f32[16] reduce-window(x, z), window={size=7 pad=3_3}, to_apply=add,\n"
           "    sharding={devices=[8]<=[8]}\n}\n", sum_comp);
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 4);
  ck_assert_int_eq(permutes_of_width(p, 0, 2), 2);
  ck_assert_int_eq(permutes_of_width(p, 0, 1), 2);
  /* The one-element halo of the left side comes from two shards back. */
  const hk_instr *far = permute_of_width(p, 0, 1, 0);
  ck_assert_int_eq(far->attrs->n_source_target_pairs, 6);
  ck_assert_int_eq(far->attrs->source_target_pairs[0].b - far->attrs->source_target_pairs[0].a, 2);
  hk_module_free(p);
}
END_TEST

START_TEST(reduce_window_strided_uneven) {
  /* 15 elements over 4 (uneven), stride 2: masking of the padded tail and
   * a halo only on the right. */
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[15,3] parameter(0), sharding={devices=[4,1]<=[4]}\n"
           "  z = f32[] constant(0)\n"
           "  ROOT r = f32[7,3] reduce-window(x, z), window={size=3x1 stride=2x1}, to_apply=add,\n"
           "    sharding={devices=[4,1]<=[4]}\n}\n", sum_comp);
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_SELECT), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(reduce_window_base_dilation) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule m\n%s"
           "ENTRY e {\n"
           "  x = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
           "  z = f32[] constant(0)\n"
           "  ROOT r = f32[15] reduce-window(x, z), window={size=2 pad=1_0 lhs_dilate=2},\n"
           "    to_apply=add, sharding={devices=[2]0,1}\n}\n", sum_comp);
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  assert_no_gather(p);
  hk_module_free(p);
}
END_TEST

/* ---- pad, slice, reverse ----------------------------------------------------------- */

START_TEST(pad_by_halo_masks_the_pad_value) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  v = f32[] constant(-1)\n"
      "  ROOT p = f32[12] pad(x, v), padding=2_2, sharding={devices=[4]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  /* Output shards of 3 read [3j-2, 3j+1): the 2 elements left of each shard. */
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_SELECT), 1);
  ck_assert_int_eq(p->entry->root->shape->dims[0], 3);
  hk_module_free(p);
}
END_TEST

START_TEST(pad_interior) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[8] parameter(0), sharding={devices=[2]0,1}\n"
      "  v = f32[] constant(0)\n"
      "  ROOT p = f32[16] pad(x, v), padding=0_1_1, sharding={devices=[2]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  assert_no_gather(p);
  hk_module_free(p);
}
END_TEST

START_TEST(slice_shifts_by_one_neighbour) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[16,2] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT s = f32[12,2] slice(x), slice={[2:14], [0:2]}, sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  /* Output shard j = input [3j+2, 3j+5) against input shard [4j, 4j+4):
   * shard 0 needs one element from the right, shard 3 one from the left. */
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  ck_assert_int_eq(permutes_of_width(p, 0, 1), 2);
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 0), 3, to_right4));
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 1), 3, to_left4));
  hk_module_free(p);
}
END_TEST

START_TEST(slice_to_one_element_moves_nothing) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[16] parameter(0), sharding={devices=[8]<=[8]}\n"
      "  ROOT s = f32[1] slice(x), slice={[1:2]}, sharding={devices=[8]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  /* Only shard 0 holds the element: the others read padding. */
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 0);
  assert_no_gather(p);
  hk_module_free(p);
}
END_TEST

START_TEST(reverse_uneven_by_halo) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[7] parameter(0), sharding={devices=[2]0,1}\n"
      "  ROOT r = f32[7] reverse(x), dimensions={0}, sharding={devices=[2]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  assert_no_gather(p);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(reverse_even_swaps_shards) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[8] parameter(0), sharding={devices=[4]<=[4]}\n"
      "  ROOT r = f32[8] reverse(x), dimensions={0}, sharding={devices=[4]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  const hk_pair swap[4] = {{0, 3}, {1, 2}, {2, 1}, {3, 0}};
  ck_assert(has_pairs(hk_test_last_op(p, HK_OP_COLLECTIVE_PERMUTE), 4, swap));
  hk_module_free(p);
}
END_TEST

/* ---- select-and-scatter ------------------------------------------------------------ */

START_TEST(select_and_scatter_overlapping_windows) {
  /* Windows of 3 at stride 2 overlap: source halos of one window, data
   * halos padded with -inf (a GE select), the local result sliced. */
  const char *text =
      "HloModule m\n"
      "ge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=GE\n}\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n"
      "  x = f32[16,2] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  src = f32[8,2] parameter(1), sharding={devices=[4,1]<=[4]}\n"
      "  z = f32[] constant(0)\n"
      "  ROOT s = f32[16,2] select-and-scatter(x, src, z), window={size=3x1 stride=2x1 pad=1_1x0_0},\n"
      "    select=ge, scatter=add, sharding={devices=[4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  ck_assert_int_eq(p->entry->root->shape->dims[0], 4);
  hk_module_free(p);
}
END_TEST

/* ---- dynamic-update-slice ------------------------------------------------------------ */

START_TEST(dus_inside_one_shard) {
  /* Update of 2 columns at 60 of 64 over 2 shards of 32: only the update
   * (replicated: 128x2 s32 = 1 KiB, half of it gathered) moves. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = s32[128,64] parameter(0), sharding={devices=[1,2]0,1}\n"
      "  i = s32[] parameter(1)\n"
      "  c = s32[] constant(60)\n"
      "  u = s32[128,2] parameter(2), sharding={devices=[1,2]0,1}\n"
      "  ROOT d = s32[128,64] dynamic-update-slice(x, u, i, c), sharding={devices=[1,2]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_int_eq(hk_shape_byte_size(ag->shape), 128 * 2 * 4);
  ck_assert_int_eq(p->entry->root->shape->dims[1], 32);
  hk_module_free(p);
  /* Straddling the shards' boundary (30..33): the dims are made whole instead. */
  char text2[1024];
  snprintf(text2, sizeof text2, "%s", text);
  memcpy(strstr(text2, "u = s32[128,2]"), "u = s32[128,4]", 14);
  memcpy(strstr(text2, "constant(60)"), "constant(30)", 12);
  p = spmd_check_partition(reg, text2, 2, NULL);
  hk_module_free(p);
}
END_TEST

/* ---- convolution ----------------------------------------------------------------------- */

static const char conv_tiled_output[] =
    "HloModule m\nENTRY e {\n"
    "  x = f32[2,16,3] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
    "  k = f32[3,3,5] parameter(1), sharding={replicated}\n"
    "  ROOT c = f32[2,16,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f,\n"
    "    sharding={devices=[1,4,1]<=[4]}\n}\n";

START_TEST(conv_spatial_output_tiled) {
  hk_module *p = spmd_check_partition(reg, conv_tiled_output, 4, NULL);
  assert_no_gather(p);
  /* One row of halo on each side: f32[2,1,3] = 24 bytes per permute. */
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  ck_assert_int_eq(permutes_of_width(p, 1, 1), 2);
  ck_assert_int_eq(hk_shape_byte_size(permute_of_width(p, 1, 1, 0)->shape), 24);
  ck_assert(has_pairs(permute_of_width(p, 1, 1, 0), 3, to_right4));
  ck_assert(has_pairs(permute_of_width(p, 1, 1, 1), 3, to_left4));
  hk_module_free(p);
}
END_TEST

START_TEST(conv_strided_window_dilated) {
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,32,2] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
      "  k = f32[3,2,2] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[1,14,2] convolution(x, k), window={size=3 stride=2 rhs_dilate=2},\n"
      "    dim_labels=b0f_0io->b0f, sharding={devices=[1,4,1]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_base_dilation_reversed_kernel) {
  /* Base dilation with a reversed kernel (a transposed convolution): one
   * halo row between the two shards, no gather. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2,8,3] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  k = f32[3,3,4] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[2,16,4] convolution(x, k), window={size=3 pad=1_2 lhs_dilate=2 rhs_reversal=1},\n"
      "    dim_labels=b0f_0io->b0f, sharding={devices=[1,2,1]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_eq(hk_test_last_op(p, HK_OP_COLLECTIVE_PERMUTE)->attrs->n_source_target_pairs, 1);
  ck_assert_int_eq(hk_test_last_op(p, HK_OP_COLLECTIVE_PERMUTE)->shape->dims[1], 1);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_both_tiled_halo_on_lhs) {
  /* Kernel and input split along the spatial dim alike: the lhs gets a
   * right halo, each shard convolves its part of the kernel, and the
   * partial sums are all-reduced. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,16,2] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  k = f32[4,2,3] parameter(1), sharding={devices=[2,1,1]0,1}\n"
      "  ROOT c = f32[1,13,3] convolution(x, k), window={size=4}, dim_labels=b0f_0io->b0f,\n"
      "    sharding={replicated}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  hk_module_free(p);
  /* With the halo on the rhs asked for, the kernel shards would need
   * halos of 6 from shards of 2 (mostly padding): the output-tiled plan
   * (kernel replicated) is taken instead, still correct. */
  p = spmd_check_partition(reg, text, 2, "conv_halo_exchange_always_on_lhs=false");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 0);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_halo_on_rhs_strided_negative_padding) {
  /* Strides and negative low padding (found by random shardings): shard
   * 0's left halo reaches past what its window can hold (cut back to
   * the zeros it does not need), and the low padding the lhs needs is
   * negative on one shard (the lhs is padded, then sliced from inside). */
  const char *cut =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,5,3] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  w = f32[4,3,2] parameter(1), sharding={devices=[2,1,1]1,0}\n"
      "  ROOT c = f32[1,2,2] convolution(x, w), window={size=4 stride=2 pad=-1_3},\n"
      "    dim_labels=b0f_0io->b0f, sharding={replicated}\n}\n";
  hk_module *p = spmd_check_partition(reg, cut, 2, "conv_halo_exchange_always_on_lhs=false");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  hk_module_free(p);
  const char *negative =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,5,2] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  w = f32[2,2,2] parameter(1), sharding={devices=[2,1,1]1,0}\n"
      "  ROOT c = f32[1,1,2] convolution(x, w), window={size=2 stride=2 pad=-1_0 rhs_dilate=2},\n"
      "    dim_labels=b0f_0io->b0f, sharding={replicated}\n}\n";
  p = spmd_check_partition(reg, negative, 2, "conv_halo_exchange_always_on_lhs=false");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert_int_eq(c->operands[0]->opcode, HK_OP_DYNAMIC_SLICE);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_reversed_kernel_halo_on_lhs) {
  /* A reversed kernel of 7 split 4 ways (2, 2, 2, 1) in reverse device
   * order, as the lhs is split forwards: the kernel is padded on the left
   * instead (one element moved to the next shard, the first one masked),
   * each device convolves its tiles with the window still reversed, and
   * the partial sums are all-reduced (XLA's window-reversal case of the
   * halo-on-lhs plan).  Nothing is gathered. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[7,4,3] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
      "  k = f32[7,4,5] parameter(1), sharding={devices=[4,1,1]3,2,1,0}\n"
      "  ROOT c = f32[1,3,5] convolution(x, k), window={size=7 rhs_reversal=1},\n"
      "    dim_labels=0fb_0io->0bf, sharding={replicated}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  /* One kernel element shifted to the next kernel tile: 3 -> 2 -> 1 -> 0. */
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  const hk_pair shift[3] = {{3, 2}, {2, 1}, {1, 0}};
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 0), 3, shift));
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert(c->attrs->window->dims[0].reversal);
  ck_assert_int_eq(c->attrs->window->dims[0].size, 2);
  hk_module_free(p);
  /* The kernel split forwards: the (smaller) lhs follows the kernel's
   * reversed order by one collective-permute, the kernel still shifts. */
  const char *fwd =
      "HloModule m\nENTRY e {\n"
      "  x = f32[7,4,3] parameter(0), sharding={devices=[4,1,1]<=[4]}\n"
      "  k = f32[7,4,5] parameter(1), sharding={devices=[4,1,1]<=[4]}\n"
      "  ROOT c = f32[1,3,5] convolution(x, k), window={size=7 rhs_reversal=1},\n"
      "    dim_labels=0fb_0io->0bf, sharding={replicated}\n}\n";
  p = spmd_check_partition(reg, fwd, 4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  hk_module_free(p);
}
END_TEST

/* The collective-permutes of m carrying `width` elements along dim d. */
static void assert_rhs_halos(const hk_module *m, int d, int64_t width, int64_t n) {
  ck_assert_int_eq(permutes_of_width(m, d, width), n);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), n);
}

START_TEST(conv_both_tiled_halo_on_rhs) {
  /* A kernel-gradient convolution (the window as large as the kernel)
   * over 4 shards with conv_halo_exchange_always_on_lhs=false: the kernel
   * shards of 7 get halos, left 4 - i and right i + 1 (at most 3 each
   * way), the lhs stays put with padding 4 / 5, and the partial sums are
   * all-reduced: no all-gather. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,32,2] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
      "  k = f32[28,2,3] parameter(1), sharding={devices=[4,1,1]<=[4]}\n"
      "  ROOT c = f32[1,5,3] convolution(x, k), window={size=28}, dim_labels=b0f_0io->b0f,\n"
      "    sharding={replicated}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, "conv_halo_exchange_always_on_lhs=false");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  assert_rhs_halos(p, 0, 3, 2);
  ck_assert(has_pairs(permute_of_width(p, 0, 3, 0), 3, to_right4));
  ck_assert(has_pairs(permute_of_width(p, 0, 3, 1), 3, to_left4));
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert_int_eq(c->operands[0]->shape->dims[1], 8);
  ck_assert_int_eq(c->operands[1]->shape->dims[0], 13);
  ck_assert_int_eq(c->attrs->window->dims[0].pad_lo, 4);
  ck_assert_int_eq(c->attrs->window->dims[0].pad_hi, 5);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_halo_on_rhs_dilated_uneven_slices_the_lhs) {
  /* A dilated kernel of 7 over 2 shards (4 and 3, the last padded): the
   * low padding the lhs needs differs between the shards (3, 2), so the
   * lhs is padded by 3 low and 1 high and each shard dynamic-slices 10
   * from its own start; the kernel gets one left halo element. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[1,14,2] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  k = f32[7,2,3] parameter(1), sharding={devices=[2,1,1]0,1}\n"
      "  ROOT c = f32[1,3,3] convolution(x, k), window={size=7 pad=1_0 rhs_dilate=2},\n"
      "    dim_labels=b0f_0io->b0f, sharding={replicated}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, "conv_halo_exchange_always_on_lhs=false");
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_REDUCE), 1);
  assert_rhs_halos(p, 0, 1, 1);
  const hk_pair right2[1] = {{0, 1}};
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 0), 1, right2));
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert_int_eq(c->operands[0]->opcode, HK_OP_DYNAMIC_SLICE);
  ck_assert_int_eq(c->operands[0]->shape->dims[1], 10);
  ck_assert_int_eq(c->operands[0]->operands[0]->opcode, HK_OP_PAD);
  ck_assert_int_eq(c->operands[0]->operands[0]->shape->dims[1], 11);
  ck_assert_int_eq(c->operands[1]->shape->dims[0], 5);
  hk_module_free(p);
}
END_TEST


START_TEST(conv_batch_and_spatial_tiled_exchanges_halos) {
  /* The input batch dim is a non-contracting dim of the dot view: tiled
   * with a spatial dim, the lhs is a windowed input of the output's tiling
   * and only its spatial halos move (within each batch tile). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[4,16,3] parameter(0), sharding={devices=[2,4,1]<=[8]}\n"
      "  k = f32[3,3,5] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[4,16,5] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f,"
      " sharding={devices=[2,4,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  ck_assert_int_eq(permutes_of_width(p, 1, 1), 2);
  ck_assert_int_eq(permute_of_width(p, 1, 1, 0)->shape->dims[0], 2);   /* the local batch */
  hk_module_free(p);
}
END_TEST

START_TEST(conv_wide_dilated_kernel_gathers_spatial_only) {
  /* A kernel dilated past the shards (XLA's PaddedConvReshard): the
   * spatial dim is gathered within each batch tile, the batch stays split. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[4,16,2] parameter(0), sharding={devices=[2,4,1]<=[8]}\n"
      "  k = f32[3,2,2] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[4,16,2] convolution(x, k), window={size=3 pad=8_8 rhs_dilate=8},"
      " dim_labels=b0f_0io->b0f, sharding={devices=[2,4,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  const hk_instr *g = NULL;
  for (const hk_instr *i = p->entry->first; i; i = i->next)
    if (i->opcode == HK_OP_ALL_GATHER) g = i;
  ck_assert_int_eq(g->shape->dims[0], 2);
  ck_assert_int_eq(g->shape->dims[1], 16);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_feature_groups_then_spatial_halos) {
  /* Depthwise (feature_group_count = features) tiled on features and a
   * spatial dim: each device convolves its groups with its slice of the
   * kernel, its spatial halos from the neighbour with the same groups. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2,12,8] parameter(0), sharding={devices=[1,2,2]<=[4]}\n"
      "  k = f32[3,1,8] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[2,12,8] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f,"
      " feature_group_count=8, sharding={devices=[1,2,2]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 2);
  const hk_instr *cp = permute_of_width(p, 1, 1, 0);
  ck_assert_ptr_nonnull(cp);
  ck_assert_int_eq(cp->shape->dims[2], 4);   /* the device's 4 groups */
  static const hk_pair right[2] = {{0, 2}, {1, 3}};
  static const hk_pair left[2] = {{2, 0}, {3, 1}};
  ck_assert(has_pairs(cp, 2, right) || has_pairs(cp, 2, left));
  hk_module_free(p);
}
END_TEST

START_TEST(conv_batch_groups_split_on_part_of_the_devices) {
  /* batch_group_count = lhs batch = kernel output feature = 8; the lhs
   * splits its groups 2 ways and its contracting feature 2 ways: the groups
   * stay split, the feature is gathered within each pair, the kernel
   * sliced to the device's groups, the result split like the groups. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2,5,8] parameter(0), sharding={devices=[2,1,2]<=[4]}\n"
      "  k = f32[2,5,8] parameter(1), sharding={replicated}\n"
      "  ROOT c = f32[3,1,8] convolution(x, k), window={size=5 pad=1_1}, dim_labels=f0b_i0o->0bf,"
      " batch_group_count=8, sharding={devices=[1,1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  const hk_instr *g = NULL;
  for (const hk_instr *i = p->entry->first; i; i = i->next)
    if (i->opcode == HK_OP_ALL_GATHER) g = i;
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(g->shape->dims[0], 2);
  ck_assert_int_eq(g->shape->dims[2], 4);   /* the device's groups only */
  hk_module_free(p);
}
END_TEST

START_TEST(conv_feature_groups_follow_the_kernel) {
  /* The kernel splits the feature groups over every device: the lhs moves
   * its split to the features (all-to-all), each device convolves its
   * groups, the result moves to the output's batch split (all-to-all). */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2,8,4] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  k = f32[3,1,4] parameter(1), sharding={devices=[1,1,2]0,1}\n"
      "  ROOT c = f32[2,8,4] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f,"
      " feature_group_count=4, sharding={devices=[2,1,1]0,1}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 2, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 2);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_batch_groups_align_with_output_when_operands_rebuild) {
  /* The operands are copies of replicated parameters split on their
   * features: taking the output's group split (4 of the 8 groups' ways,
   * replicated in pairs) costs nothing for them, so the convolution runs on
   * the output's tiles and nothing is gathered afterwards. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  a = f32[4,7,16] parameter(0)\n"
      "  x = f32[4,7,16] copy(a), sharding={devices=[4,1,2]<=[8]}\n"
      "  b = f32[4,7,16] parameter(1)\n"
      "  k = f32[4,7,16] copy(b), sharding={devices=[4,1,2]<=[8]}\n"
      "  ROOT c = f32[3,1,16] convolution(x, k), window={size=7 pad=1_1}, dim_labels=f0b_i0o->0bf,"
      " batch_group_count=16, sharding={devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert_int_eq(c->shape->dims[2], 4);
  ck_assert_int_eq(c->operands[0]->shape->dims[2], 4);
  ck_assert_int_eq(c->attrs->batch_group_count, 4);
  hk_module_free(p);
}
END_TEST

START_TEST(conv_feature_groups_keep_the_operand_split_when_cheaper) {
  /* Sharded parameters (nothing to rebuild): the lhs's group split wins
   * over moving both operands to the output's, and the result is sliced
   * to the output's finer split locally. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[4,7,16] parameter(0), sharding={devices=[1,1,2,4]<=[8] last_tile_dim_replicate}\n"
      "  k = f32[1,7,16] parameter(1), sharding={devices=[1,1,2,4]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[3,4,16] convolution(x, k), window={size=7 pad=1_1}, dim_labels=b0f_i0o->0bf,"
      " feature_group_count=16, sharding={devices=[1,1,4,2]<=[8] last_tile_dim_replicate}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  const hk_instr *c = hk_test_last_op(p, HK_OP_CONVOLUTION);
  ck_assert_int_eq(c->shape->dims[2], 8);
  hk_module_free(p);
}
END_TEST

START_TEST(pad_dilated_negative_low_from_replicated) {
  /* 10 elements dilated by 3, first position cut: 27 over 4 = windows of
   * 7; the last one reads x[8..9] as a slice of 3 that must not clamp. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[10] parameter(0), sharding={replicated}\n"
      "  v = f32[] constant(-2)\n"
      "  ROOT p = f32[27] pad(x, v), padding=-1_0_2, sharding={devices=[4]<=[4]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  hk_module_free(p);
}
END_TEST

/* ---- compact exchange: only the pieces a window needs, however far -------- */

START_TEST(pad_far_moves_only_data) {
  /* f32[2] over 8 (shards of 1, six of padding) padded 5_17 to 24: output
   * shard 1 reads input [-2, 1), shard 2 reads [1, 4): only elements 0 and
   * 1 move, one permute {0->1, 1->2}; the rest is the pad value. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[2] parameter(0), sharding={devices=[8]<=[8]}\n"
      "  v = f32[] constant(2)\n"
      "  ROOT p = f32[24] pad(x, v), padding=5_17, sharding={devices=[8]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_no_gather(p);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  static const hk_pair want[2] = {{0, 1}, {1, 2}};
  ck_assert(has_pairs(permute_of_width(p, 0, 1, 0), 2, want));
  ck_assert_int_eq(p->entry->root->shape->dims[0], 3);
  hk_module_free(p);
}
END_TEST

START_TEST(strided_slice_from_two_shards_away) {
  /* f32[32] over 8 (shards of 4), slice [8:24:2]: output shard j is input
   * 8 + 2j, held by shard 2 + j / 2: up to five shards away. */
  const char *text =
      "HloModule m\nENTRY e {\n"
      "  x = f32[32,2] parameter(0), sharding={devices=[8,1]<=[8]}\n"
      "  ROOT s = f32[8,2] slice(x), slice={[8:24:2], [0:2]}, sharding={devices=[8,1]<=[8]}\n}\n";
  hk_module *p = spmd_check_partition(reg, text, 8, NULL);
  assert_no_gather(p);
  /* Each shard receives one element: at most 8 x 2 floats in all. */
  ck_assert_int_ge(hk_test_count_op(p, HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_le(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 8 * 2 * 4);
  hk_module_free(p);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_halo");
  TCase *t = tcase_create("halo");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, reduce_window_one_element_halos);
  tcase_add_test(t, reduce_window_halo_beyond_neighbour);
  tcase_add_test(t, reduce_window_strided_uneven);
  tcase_add_test(t, reduce_window_base_dilation);
  tcase_add_test(t, pad_by_halo_masks_the_pad_value);
  tcase_add_test(t, pad_interior);
  tcase_add_test(t, slice_shifts_by_one_neighbour);
  tcase_add_test(t, slice_to_one_element_moves_nothing);
  tcase_add_test(t, reverse_uneven_by_halo);
  tcase_add_test(t, reverse_even_swaps_shards);
  tcase_add_test(t, select_and_scatter_overlapping_windows);
  tcase_add_test(t, dus_inside_one_shard);
  tcase_add_test(t, conv_spatial_output_tiled);
  tcase_add_test(t, conv_strided_window_dilated);
  tcase_add_test(t, conv_base_dilation_reversed_kernel);
  tcase_add_test(t, conv_both_tiled_halo_on_lhs);
  tcase_add_test(t, conv_both_tiled_halo_on_rhs);
  tcase_add_test(t, conv_reversed_kernel_halo_on_lhs);
  tcase_add_test(t, conv_halo_on_rhs_strided_negative_padding);
  tcase_add_test(t, conv_halo_on_rhs_dilated_uneven_slices_the_lhs);
  tcase_add_test(t, conv_batch_and_spatial_tiled_exchanges_halos);
  tcase_add_test(t, conv_wide_dilated_kernel_gathers_spatial_only);
  tcase_add_test(t, conv_feature_groups_then_spatial_halos);
  tcase_add_test(t, conv_batch_groups_split_on_part_of_the_devices);
  tcase_add_test(t, conv_feature_groups_follow_the_kernel);
  tcase_add_test(t, conv_batch_groups_align_with_output_when_operands_rebuild);
  tcase_add_test(t, conv_feature_groups_keep_the_operand_split_when_cheaper);
  tcase_add_test(t, pad_dilated_negative_low_from_replicated);
  tcase_add_test(t, pad_far_moves_only_data);
  tcase_add_test(t, strided_slice_from_two_shards_away);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(suite)
