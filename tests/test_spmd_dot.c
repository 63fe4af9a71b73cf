/* test_spmd_dot.c - Check tests of the dot handler's windowed einsum
 * (uneven dims, rings within subgroups, shared reshards), the reshard
 * engine's all-to-alls and its cost hook, and the after-report's
 * involuntary full rematerializations: the collectives, their pairs and
 * bytes, and the partitioned program's values. */
#include <fcntl.h>
#include <unistd.h>

#include "hlokit/spmd.h"
#include "spmd_check.h"

static hk_registry *reg;

static void setup(void) { reg = spmd_check_registry(); }
static void teardown(void) { hk_registry_free(reg); }

/* g partitioned by spmd-partitioning{opts} (a clone; the caller frees). */
static hk_module *partitioned(const hk_module *g, const char *opts) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "spmd-partitioning", opts, &err);
  ck_assert_ok(err);
  hk_module *m = hk_module_clone(g);
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  hk_pass_destroy(p);
  return m;
}

static const char windowed[] = "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0";

/* Bytes the operand of a collective holds on one device. */
static int64_t operand_bytes(const hk_instr *i) { return hk_shape_byte_size(i->operands[0]->shape); }

/* The permute sends within groups of 4 consecutive devices, each device to
 * the next of its group (a ring step). */
static void assert_ring_step_in_groups_of_4(const hk_instr *cp) {
  ck_assert_int_eq(cp->attrs->n_source_target_pairs, 8);
  for (int k = 0; k < 8; k++) {
    hk_pair pr = cp->attrs->source_target_pairs[k];
    ck_assert_int_eq(pr.a / 4, pr.b / 4);
    ck_assert_int_eq(pr.b % 4, (pr.a % 4 + 1) % 4);
  }
}

/* m's root has the local dims given and m computes g's values on n
 * devices; both freed. */
static void check_root_and_values(hk_module *g, hk_module *m, int64_t n, int rank,
                                  const int64_t *dims) {
  ck_assert(spmd_check_root_dims(m, rank, dims));
  spmd_check_same_values(g, m, n);
  hk_module_free(m);
  hk_module_free(g);
}

START_TEST(uneven_gather_window_loops_and_slices_back) {
  /* rhs's non-contracting dim 7 over 2 devices (tiles of 4, the last
   * padded): the loop gathers 2 x 4 columns and the result is cut to 7. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[4,6,8] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  rhs = f32[4,7,8] parameter(1), sharding={devices=[1,2,1]0,1}\n"
      "  ROOT dot = f32[4,6,7] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,2,1]0,1}\n}\n");
  hk_module *m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_ptr_nonnull(cp);
  ck_assert_int_eq(operand_bytes(cp), 4 * 4 * 8 * 4);   /* one rhs tile f32[4,4,8] per step */
  ck_assert_int_eq(m->entry->root->shape->dims[1], 3);
  ck_assert_int_eq(m->entry->root->shape->dims[2], 7);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(uneven_contract_window_zeroes_the_padding) {
  /* rhs split on its contracting dim 7 (tiles 4 + 3 and padding): the
   * padding is zeroed and lhs padded to 8 so the slices line up. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[4,6,7] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  r0 = f32[4,5,7] parameter(1), sharding={devices=[1,1,2]0,1}\n"
      "  rhs = f32[4,5,7] exponential(r0), sharding={devices=[1,1,2]0,1}\n"
      "  ROOT dot = f32[4,6,5] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,2,1]0,1}\n}\n");
  hk_module *m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_ge(hk_test_count_op(m, HK_OP_SELECT), 1);   /* the mask */
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(operand_bytes(cp), 4 * 5 * 4 * 4);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(scatter_window_rings_within_subgroups) {
  /* 8 devices: lhs split 2 (rows) x 4 (contraction), rhs 4 on the
   * contraction and replicated twice, the output 2 x 4 on its columns.
   * XLA groups by the rows and windows within each group of 4: partial
   * sums travel rings {0..3} and {4..7}, no all-reduce. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[4,16] parameter(0), sharding={devices=[2,4]<=[8]}\n"
      "  rhs = f32[16,10] parameter(1), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
      "  ROOT dot = f32[4,10] dot(lhs, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={devices=[2,4]<=[8]}\n}\n");
  hk_module *m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_REDUCE_SCATTER) +
                       hk_test_count_op(m, HK_OP_ALL_GATHER),
                   0);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  assert_ring_step_in_groups_of_4(cp);   /* within a row group, to the next column tile */
  ck_assert_int_eq(operand_bytes(cp), 2 * 3 * 4);     /* one f32[2,3] result tile */
  ck_assert_int_eq(m->entry->root->shape->dims[0], 2);
  ck_assert_int_eq(m->entry->root->shape->dims[1], 3);
  spmd_check_same_values(g, m, 8);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(scatter_window_rings_over_two_output_dims) {
  /* XLA's EinsumLHSWindowedInContractingOutNonContractingPartitioned2 made
   * small: the output's rhs dims 1 and 2 split 2 x 2 together make the
   * ring of 4 the contraction is split in (dim 2, size 3, unevenly: rhs
   * padded to 4 and cut in windows [1,2]); one collective-permute of the
   * f32[2,6,1,2,5] accumulator (480 bytes) per step, nothing else. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[4,6,8] parameter(0), sharding={devices=[2,1,4]<=[8]}\n"
      "  rhs = f32[8,2,3,5] parameter(1), sharding={devices=[4,1,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
      "  ROOT dot = f32[4,6,2,3,5] dot(lhs, rhs), lhs_contracting_dims={2}, rhs_contracting_dims={0},"
      " sharding={devices=[2,1,2,2,1]<=[8]}\n}\n");
  hk_module *m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  ck_assert_int_eq(spmd_check_collectives(m), 1);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_ptr_nonnull(cp);
  ck_assert_int_eq(operand_bytes(cp), 2 * 6 * 1 * 2 * 5 * 4);
  assert_ring_step_in_groups_of_4(cp);   /* within an lhs row group, to the next tile */
  int64_t dims[5] = {2, 6, 1, 2, 5};
  check_root_and_values(g, m, 8, 5, dims);
}
END_TEST

/* The windowed-einsum loop of m (there must be one). */
static hk_instr *the_loop(const hk_module *m) {
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 1);
  return hk_test_last_op(m, HK_OP_WHILE);
}

/* Instructions of opcode op in computation c. */
static int count_in(const hk_computation *c, hk_opcode op) {
  int n = 0;
  for (const hk_instr *i = c->first; i; i = i->next) n += i->opcode == op;
  return n;
}

/* The loop's trip bound: the constant its condition compares i against. */
static int64_t loop_bound(const hk_instr *loop) {
  const hk_instr *cmp = loop->called[0]->root;
  ck_assert_int_eq(cmp->opcode, HK_OP_COMPARE);
  ck_assert_int_eq(cmp->operands[1]->opcode, HK_OP_CONSTANT);
  return hk_literal_get_i64(cmp->operands[1]->attrs->literal, 0);
}

/* The step the body's root adds to the loop counter (its last element). */
static int64_t loop_increment(const hk_instr *loop) {
  const hk_instr *root = loop->called[1]->root;
  const hk_instr *next_i = root->operands[root->n_operands - 1];
  ck_assert_int_eq(next_i->opcode, HK_OP_ADD);
  ck_assert_int_eq(next_i->operands[1]->opcode, HK_OP_CONSTANT);
  return hk_literal_get_i64(next_i->operands[1]->attrs->literal, 0);
}

/* Collective-permutes of c moving each tile `step` devices along the ring
 * of all n devices (device d sends to d + step mod n). */
static int permutes_by(const hk_computation *c, int64_t n, int64_t step) {
  int found = 0;
  for (const hk_instr *i = c->first; i; i = i->next) {
    if (i->opcode != HK_OP_COLLECTIVE_PERMUTE || i->attrs->n_source_target_pairs != n) continue;
    bool all = true;
    for (int k = 0; k < n; k++) {
      hk_pair pr = i->attrs->source_target_pairs[k];
      all = all && pr.b == ((pr.a + step) % n + n) % n;
    }
    found += all;
  }
  return found;
}

/* XLA's loop shapes for one windowed dot over a ring of n devices, by
 * option: rolled (n iterations, one permute each), unrolled (n/2
 * iterations of two steps) and bidirectional (n/4 iterations of two
 * steps, each sending both ways).  `scatter`: the result buffers travel;
 * else the rotating operand does. */
static void assert_loop_variants(const char *text, int64_t n, bool scatter) {
  hk_module *g = hk_test_parse(text);
  hk_module *m = partitioned(g, windowed);
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), n);
  ck_assert_int_eq(loop_increment(loop), 1);
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_COLLECTIVE_PERMUTE), 1);
  spmd_check_same_values(g, m, n);
  hk_module_free(m);

  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "unroll_windowed_einsum=true");
  loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), n);
  ck_assert_int_eq(loop_increment(loop), 2);
  ck_assert_int_eq(loop->shape->n_tuple, scatter ? 5 : 4);   /* scatter: a second buffer */
  /* Two steps: the operand moves down twice; the two result buffers
   * move two up, the second brought home after the loop. */
  ck_assert_int_eq(permutes_by(loop->called[1], n, scatter ? 2 : -1), 2);
  ck_assert_int_eq(permutes_by(m->entry, n, 1), scatter ? 1 : 0);
  spmd_check_same_values(g, m, n);
  hk_module_free(m);

  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "bidirectional_windowed_einsum=true");
  loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), n / 2);
  ck_assert_int_eq(loop_increment(loop), 2);
  ck_assert_int_eq(loop->shape->n_tuple, 5);
  ck_assert_int_eq(permutes_by(loop->called[1], n, 1), 2);    /* both ways, twice */
  ck_assert_int_eq(permutes_by(loop->called[1], n, -1), 2);
  /* Before the loop the operand's copy steps up; after it the second
   * result buffer steps down home. */
  ck_assert_int_eq(permutes_by(m->entry, n, scatter ? -1 : 1), 1);
  spmd_check_same_values(g, m, n);
  hk_module_free(m);
  hk_module_free(g);
}

START_TEST(unrolled_and_bidirectional_gather_window) {
  /* rhs's non-contracting dim 7 over 4 devices (tiles of 2, padded): rhs
   * rotates and fills the result's columns. */
  assert_loop_variants(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[4,8,6] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
      "  rhs = f32[4,7,6] parameter(1), sharding={devices=[1,4,1]<=[4]}\n"
      "  ROOT dot = f32[4,8,7] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,4,1]<=[4]}\n}\n",
      4, false);
}
END_TEST

START_TEST(unrolled_and_bidirectional_contract_window) {
  /* rhs split on its contracting dim 7 over 4 devices (padding made 1 by
   * exp, so it must be zeroed): rhs rotates, each step multiplies the
   * matching slice of lhs. */
  assert_loop_variants(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[4,8,7] parameter(0), sharding={devices=[1,4,1]<=[4]}\n"
      "  r0 = f32[4,5,7] parameter(1), sharding={devices=[1,1,4]<=[4]}\n"
      "  rhs = f32[4,5,7] exponential(r0), sharding={devices=[1,1,4]<=[4]}\n"
      "  ROOT dot = f32[4,8,5] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,4,1]<=[4]}\n}\n",
      4, false);
}
END_TEST

START_TEST(unrolled_and_bidirectional_scatter_window) {
  /* Both operands split 4 ways on the contraction, the result on its
   * columns (10, tiles of 3, padded): the partial sums travel. */
  assert_loop_variants(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[4,16] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  rhs = f32[16,10] parameter(1), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT dot = f32[4,10] dot(lhs, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={devices=[1,4]<=[4]}\n}\n",
      4, true);
}
END_TEST

/* Every collective-permute of c sends within the groups `group` tells
 * apart (group(a) == group(b)), one pair per device; how many there are. */
static int permutes_within(const hk_computation *c, int64_t n, int64_t (*group)(int64_t)) {
  int found = 0;
  for (const hk_instr *i = c->first; i; i = i->next) {
    if (i->opcode != HK_OP_COLLECTIVE_PERMUTE) continue;
    ck_assert_int_eq(i->attrs->n_source_target_pairs, n);
    for (int k = 0; k < n; k++) {
      hk_pair pr = i->attrs->source_target_pairs[k];
      ck_assert_int_ne(pr.a, pr.b);
      ck_assert_int_eq(group(pr.a), group(pr.b));
    }
    found++;
  }
  return found;
}

static int64_t odd_even(int64_t d) { return d % 2; }
static int64_t pairs(int64_t d) { return d / 2; }

/* A dot like XLA's WindowedEinsumPreferMemoryFootprint made small: lhs
 * [M, K1, K2] split 4 (M) x 2 (K1), rhs [K1, K2, N] split 2 x 2 x 2, the
 * output [M, N] 4 x 2.  Both operands match the output on their
 * non-contracting dims, so XLA groups the dot on one and windows the
 * contraction within each group. */
static const char grouped_dot[] =
    "HloModule m, num_partitions=8\n\nENTRY e {\n"
    "  lhs = f32[8,4,4] parameter(0), sharding={devices=[4,2,1]<=[8]}\n"
    "  r0 = f32[4,4,6] parameter(1), sharding={devices=[2,2,2]<=[8]}\n"
    "  rhs = f32[4,4,6] exponential(r0), sharding={devices=[2,2,2]<=[8]}\n"
    "  ROOT dot = f32[8,6] dot(lhs, rhs), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1},"
    " sharding={devices=[4,2]<=[8]}\n}\n";

START_TEST(window_within_groups_prefers_memory_footprint) {
  /* By default the operand whose grouping replicates less of the other
   * (rhs: 4 x 48 bytes of rhs against 2 x 64 of lhs would be more, so rhs
   * is matched) rotates: rhs's contraction tiles K1 x K2 ring round the 4
   * devices of one N column {d : d % 2 fixed}; lhs is gathered along K1
   * once, before the loop (its only all-gather); no all-reduce. */
  hk_module *g = hk_test_parse(grouped_dot);
  hk_module *m = partitioned(g, windowed);
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 4);
  ck_assert_int_eq(loop_increment(loop), 1);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, odd_even), 1);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(operand_bytes(cp), 2 * 2 * 3 * 4);   /* one rhs tile f32[2,2,3] */
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_REDUCE_SCATTER), 0);
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_ALL_GATHER), 0);
  /* lhs f32[2,2,4] tiles, gathered to f32[2,4,4] */
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_ALL_GATHER), 2 * 2 * 4 * 4);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 3});
  /* Unrolled (two steps an iteration) and bidirectional (both ways round
   * each group's ring) loops within the groups too. */
  g = hk_test_parse(grouped_dot);
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "unroll_windowed_einsum=true");
  ck_assert_int_eq(loop_increment(the_loop(m)), 2);
  ck_assert_int_eq(permutes_within(the_loop(m)->called[1], 8, odd_even), 2);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 3});
  g = hk_test_parse(grouped_dot);
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "bidirectional_windowed_einsum=true");
  ck_assert_int_eq(loop_bound(the_loop(m)), 2);
  ck_assert_int_eq(permutes_within(the_loop(m)->called[1], 8, odd_even), 4);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 3});
}
END_TEST

START_TEST(window_within_groups_prefers_fewer_iterations) {
  /* choose_faster_windowed_einsum_over_mem: the grouping whose loop runs
   * fewer iterations - lhs matched (groups of 2 along M), its K1 tiles
   * ring round each pair {2k, 2k+1}: 2 iterations; rhs is gathered along
   * its contraction before the loop. */
  hk_module *g = hk_test_parse(grouped_dot);
  hk_module *m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                                "choose_faster_windowed_einsum_over_mem=true");
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 2);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, pairs), 1);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(operand_bytes(cp), 2 * 2 * 4 * 4);   /* one lhs tile f32[2,2,4] */
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_REDUCE_SCATTER), 0);
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_ALL_GATHER), 0);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 3});
}
END_TEST

START_TEST(window_within_groups_of_a_dot_like_convolution) {
  /* XLA's WindowedEinsumPreferMemoryFootprint convolution, small: its
   * spatial dims are dot dims (two contracting, one lhs and two rhs
   * non-contracting); each local convolution in the loop has its windows
   * refitted to the rotating rhs tile.  Default: rhs rotates round groups
   * of 4 (4 iterations); faster: lhs round pairs (2). */
  static const char conv[] =
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[8,2,4,4,6,1,1] parameter(0), sharding={devices=[4,1,2,1,1,1,1]<=[8]}\n"
      "  r0 = f32[4,4,6,4,3,5,1] parameter(1), sharding={devices=[2,2,1,2,1,1,1]<=[8]}\n"
      "  rhs = f32[4,4,6,4,3,5,1] exponential(r0), sharding={devices=[2,2,1,2,1,1,1]<=[8]}\n"
      "  ROOT conv = f32[8,2,4,3,5,1,1] convolution(lhs, rhs),"
      " window={size=1x4x3x4x4 pad=0_0x3_3x2_2x0_0x0_0 rhs_reversal=0x1x1x0x0},"
      " dim_labels=0b34f12_34i12o0->0b12f34, sharding={devices=[4,1,2,1,1,1,1]<=[8]}\n}\n";
  hk_module *g = hk_test_parse(conv);
  hk_module *m = partitioned(g, windowed);
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 4);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, odd_even), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  check_root_and_values(g, m, 8, 7, (int64_t[]){2, 2, 2, 3, 5, 1, 1});
  g = hk_test_parse(conv);
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "choose_faster_windowed_einsum_over_mem=true");
  loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 2);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, pairs), 1);
  check_root_and_values(g, m, 8, 7, (int64_t[]){2, 2, 2, 3, 5, 1, 1});
}
END_TEST

START_TEST(window_within_contracting_groups_then_all_reduce) {
  /* XLA's WindowedEinsumPreferNumberIterations2 made small: both operands
   * split 4 ways along K (the groups, devices {2g, 2g+1}) and 2 along
   * their non-contracting dim, the output's N split across the groups.
   * choose_faster_windowed_einsum_over_mem: a loop within non-contracting
   * groups would run 4 iterations, more than the 2 partitions of a
   * contracting group, so XLA groups on K: rhs's N tiles ring round each
   * pair (2 iterations), the partial sums are all-reduced over the 4
   * groups, and the output's slice is cut locally. */
  static const char text[] =
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[8,4] parameter(0), sharding={devices=[4,2]<=[8]}\n"
      "  rhs = f32[8,8] parameter(1), sharding={devices=[4,2]<=[8]}\n"
      "  ROOT dot = f32[4,8] dot(lhs, rhs), lhs_contracting_dims={0}, rhs_contracting_dims={0},"
      " sharding={devices=[2,4]<=[4,2]T(1,0)}\n}\n";
  hk_module *g = hk_test_parse(text);
  hk_module *m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                                "choose_faster_windowed_einsum_over_mem=true");
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 2);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, pairs), 1);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(operand_bytes(cp), 2 * 4 * 4);   /* one rhs tile f32[2,4] */
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 1);
  hk_instr *ar = hk_test_last_op(m, HK_OP_ALL_REDUCE);
  ck_assert_int_eq(operand_bytes(ar), 2 * 8 * 4);    /* the partial sums f32[2,8] */
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_ALL_REDUCE), 0);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 2});
}
END_TEST

START_TEST(window_within_groups_scatters_when_the_other_keeps_its_contraction) {
  /* The module above without choose_faster_windowed_einsum_over_mem: XLA
   * groups on lhs's M (devices {d : d % 2 fixed}); the groups tell rhs's
   * N tiles apart, so rhs is replicated along N there and keeps its K
   * split: both split 4 ways along K within a group, XLA's reduce-scatter
   * configuration - the partial sums (f32[2,2] tiles of the output) ring
   * round each group of 4, no all-reduce. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[8,4] parameter(0), sharding={devices=[4,2]<=[8]}\n"
      "  rhs = f32[8,8] parameter(1), sharding={devices=[4,2]<=[8]}\n"
      "  ROOT dot = f32[4,8] dot(lhs, rhs), lhs_contracting_dims={0}, rhs_contracting_dims={0},"
      " sharding={devices=[2,4]<=[4,2]T(1,0)}\n}\n");
  hk_module *m = partitioned(g, windowed);
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 4);
  ck_assert_int_eq(permutes_within(loop->called[1], 8, odd_even), 1);
  hk_instr *cp = hk_test_last_op(m, HK_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq(operand_bytes(cp), 2 * 2 * 4);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_REDUCE_SCATTER), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 1);   /* rhs along N */
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_ALL_GATHER), 2 * 4 * 4);
  check_root_and_values(g, m, 8, 2, (int64_t[]){2, 2});
}
END_TEST

START_TEST(loop_variants_need_a_ring_they_divide) {
  /* A ring of 2: bidirectional needs a multiple of 4, so it falls back to
   * unrolled when that is asked too, else to the rolled loop; a ring of 3
   * is never unrolled. */
  static const char two[] =
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[4,6,8] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  rhs = f32[4,7,8] parameter(1), sharding={devices=[1,2,1]0,1}\n"
      "  ROOT dot = f32[4,6,7] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,2,1]0,1}\n}\n";
  hk_module *g = hk_test_parse(two);
  hk_module *m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                                "bidirectional_windowed_einsum=true");
  ck_assert_int_eq(loop_increment(the_loop(m)), 1);
  hk_module_free(m);
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "bidirectional_windowed_einsum=true unroll_windowed_einsum=true");
  ck_assert_int_eq(loop_increment(the_loop(m)), 2);
  ck_assert_int_eq(loop_bound(the_loop(m)), 2);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
  g = hk_test_parse(
      "HloModule m, num_partitions=3\n\nENTRY e {\n"
      "  lhs = f32[4,6,8] parameter(0), sharding={devices=[1,3,1]0,1,2}\n"
      "  rhs = f32[4,7,8] parameter(1), sharding={devices=[1,3,1]0,1,2}\n"
      "  ROOT dot = f32[4,6,7] dot(lhs, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,3,1]0,1,2}\n}\n");
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "unroll_windowed_einsum=true");
  ck_assert_int_eq(loop_increment(the_loop(m)), 1);
  spmd_check_same_values(g, m, 3);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(bidirectional_scatter_rings_within_subgroups) {
  /* The subgroup ring of scatter_window_rings_within_subgroups, both ways:
   * every permute stays inside its group of 4. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[4,16] parameter(0), sharding={devices=[2,4]<=[8]}\n"
      "  rhs = f32[16,10] parameter(1), sharding={devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}\n"
      "  ROOT dot = f32[4,10] dot(lhs, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={devices=[2,4]<=[8]}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                                "bidirectional_windowed_einsum=true");
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(loop_bound(loop), 2);
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_COLLECTIVE_PERMUTE), 4);
  for (const hk_instr *i = loop->called[1]->first; i; i = i->next)
    if (i->opcode == HK_OP_COLLECTIVE_PERMUTE)
      for (int k = 0; k < i->attrs->n_source_target_pairs; k++)
        ck_assert_int_eq(i->attrs->source_target_pairs[k].a / 4, i->attrs->source_target_pairs[k].b / 4);
  ck_assert_int_eq(spmd_check_collectives(m), 5);
  spmd_check_same_values(g, m, 8);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(scatter_window_realigns_the_smaller_operand) {
  /* XLA's WindowedEinsumTwoContractingDimsLhsReshard made small: lhs split
   * on contracting dim 2, rhs on contracting dim 0 (lhs dim 1's partner).
   * The smaller lhs moves its split to dim 1 (one all-to-all of its
   * f32[8,2,12] shard) and the partial sums travel the ring: no
   * reduce-scatter.  With _xla_collective_matmul="none" no loop. */
  static const char text[] =
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[8,2,24] parameter(0), sharding={devices=[1,1,2]0,1}\n"
      "  rhs = f32[2,24,12] parameter(1), sharding={devices=[2,1,1]0,1}\n"
      "  ROOT dot = f32[8,12] dot(lhs, rhs), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1},"
      " sharding={devices=[1,2]0,1}%s\n}\n";
  char buf[1024];
  snprintf(buf, sizeof buf, text, "");
  hk_module *g = hk_test_parse(buf);
  hk_module *m = partitioned(g, windowed);
  hk_instr *loop = the_loop(m);
  ck_assert_int_eq(count_in(loop->called[1], HK_OP_COLLECTIVE_PERMUTE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_ALL_TO_ALL), 8 * 2 * 12 * 4);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_REDUCE_SCATTER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
  snprintf(buf, sizeof buf, text, ", frontend_attributes={_xla_collective_matmul=\"none\"}");
  g = hk_test_parse(buf);
  m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 0);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(reshape_past_a_size_one_dim_stays_local) {
  /* A dot operand reshaped [1,32,8] -> [4,8,8] with the 32 split 4 ways
   * on its major half: the size-1 dim carries nothing, so each shard
   * reshapes locally (XLA's WindowedEinsumKeepBatchDimensionsSorted made
   * small: its p1 was made whole here), and the merge back too. */
  hk_module *p = spmd_check_partition(
      reg,
      "HloModule m\nENTRY e {\n"
      "  p = f32[1,32,8] parameter(0), sharding={devices=[1,4,2]<=[8]}\n"
      "  r = f32[4,8,8] reshape(p), sharding={devices=[4,1,2]<=[8]}\n"
      "  ROOT b = f32[1,32,8] reshape(r), sharding={devices=[1,4,2]<=[8]}\n}\n",
      8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 0);
  int64_t dims[3] = {1, 8, 4};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(conv_spatial_dot_dims_partition_like_a_dot) {
  /* XLA's EinsumNonContractingDimPartitionOnTwoDims made small: spatial
   * dim 0 (a size-1 window over a size-1 kernel dim) is an lhs
   * non-contracting dim, spatial dim 1 (one window over the whole input)
   * a contracting one.  As XLA, the lhs keeps its split on both, the
   * smaller rhs is gathered on its output features inside each group (48
   * bytes), the partial sums go straight to the output's split by one
   * reduce-scatter (the f32[2,4,4,1] partial, 128 bytes): no operand is
   * made whole. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  lhs = f32[8,4,2,6] parameter(0), sharding={devices=[4,1,2,1]<=[8]}\n"
      "  rhs = f32[2,6,4,1] parameter(1), sharding={devices=[2,1,2,1,2]0,4,2,6,1,5,3,7 last_tile_dim_replicate}\n"
      "  ROOT conv = f32[8,4,4,1] convolution(lhs, rhs), window={size=1x2}, dim_labels=0b1f_1io0->0bf1,"
      " sharding={devices=[4,1,2,1]<=[8]}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  ck_assert_int_eq(spmd_check_collectives(m), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_ALL_GATHER), 1 * 6 * 2 * 1 * 4);
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_REDUCE_SCATTER), 2 * 4 * 4 * 1 * 4);
  int64_t dims[4] = {2, 4, 2, 1};
  check_root_and_values(g, m, 8, 4, dims);
}
END_TEST

START_TEST(conv_rhs_non_contracting_spatial_dim_stays_split) {
  /* A size-1 input dim, the window the whole (uneven, 7) kernel dim padded
   * by 6 and reversed: an rhs non-contracting dim.  The kernel's split
   * passes to the output's and the local convolution's window is refitted
   * to the local kernel (size 4, padding 3): no collective. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  lhs = f32[4,1,3] parameter(0), sharding={replicated}\n"
      "  rhs = f32[7,3,5] parameter(1), sharding={devices=[2,1,1]0,1}\n"
      "  ROOT c = f32[4,7,5] convolution(lhs, rhs), window={size=7 pad=6_6 rhs_reversal=1},"
      " dim_labels=b0f_0io->b0f, sharding={devices=[1,2,1]0,1}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  ck_assert_int_eq(spmd_check_collectives(m), 0);
  hk_instr *c = hk_test_last_op(m, HK_OP_CONVOLUTION);
  ck_assert_ptr_nonnull(c);
  ck_assert_int_eq(c->attrs->window->dims[0].size, 4);
  ck_assert_int_eq(c->attrs->window->dims[0].pad_lo, 3);
  int64_t dims[3] = {4, 4, 5};
  check_root_and_values(g, m, 2, 3, dims);
}
END_TEST

START_TEST(conv_batch_spatial_dim_splits_like_a_batch_dim) {
  /* Spatial dim 0 is a batch dim in disguise (XLA's SpatialIsBatch: the
   * whole dim as the window, base dilation its size, stride one less):
   * position j of the lhs meets position j of the kernel only.  Split on
   * both operands and the output, each device convolves its own pieces
   * with the window refitted to them (size 3, stride 2, base dilation 3):
   * no collective.  The window-dilated spelling of the same batch dim
   * (stride 1, window dilation 5) splits the same way. */
  static const char *const windows[] = {"size=6x3 stride=5x1 lhs_dilate=6x1",
                                        "size=6x3 lhs_dilate=6x1 rhs_dilate=5x1"};
  for (int w = 0; w < 2; w++) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule m, num_partitions=2\n\nENTRY e {\n"
             "  lhs = f32[6,8,4,3] parameter(0), sharding={devices=[2,1,1,1]0,1}\n"
             "  rhs = f32[6,3,3,5] parameter(1), sharding={devices=[2,1,1,1]0,1}\n"
             "  ROOT c = f32[6,6,4,5] convolution(lhs, rhs), window={%s},"
             " dim_labels=01bf_01io->01bf, sharding={devices=[2,1,1,1]0,1}\n}\n",
             windows[w]);
    hk_module *g = hk_test_parse(text);
    hk_module *m = partitioned(g, "allow_module_signature_change=true");
    ck_assert_int_eq(spmd_check_collectives(m), 0);
    hk_instr *c = hk_test_last_op(m, HK_OP_CONVOLUTION);
    ck_assert_ptr_nonnull(c);
    const hk_window_dim *d = &c->attrs->window->dims[0];
    ck_assert_int_eq(d->size, 3);
    ck_assert_int_eq(d->base_dilation, 3);
    ck_assert_int_eq(w ? d->window_dilation : d->stride, 2);
    int64_t dims[4] = {3, 6, 4, 5};
    check_root_and_values(g, m, 2, 4, dims);
  }
}
END_TEST

START_TEST(conv_batch_and_spatial_dims_split_keeps_the_batch_split) {
  /* XLA's ConvWithParallelDimAndNonParallelSpatialDimPartitioned made
   * small: tiled on a batch-like spatial dim and on a real convolution
   * dim.  The convolution dim is gathered within each batch group only
   * (lhs f32[4,2,3,3] and kernel f32[4,1,2,3] pieces, one all-gather each)
   * and the batch dim stays split: no value is made whole and nothing
   * falls back to replication. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[8,4,3,3] parameter(0), sharding={devices=[2,2,1,1]<=[4]}\n"
      "  rhs = f32[8,2,3,3] parameter(1), sharding={devices=[2,2,1,1]<=[4]}\n"
      "  ROOT c = f32[8,3,3,3] convolution(lhs, rhs), window={size=8x2 stride=7x1 lhs_dilate=8x1},"
      " dim_labels=01bf_01io->01bf, sharding={devices=[2,2,1,1]<=[4]}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  ck_assert_int_eq(spmd_check_collectives(m), 2);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(m, HK_OP_ALL_GATHER), (4 * 2 * 3 * 3 + 4 * 1 * 3 * 3) * 4);
  int64_t dims[4] = {4, 2, 3, 3};
  check_root_and_values(g, m, 4, 4, dims);
}
END_TEST

START_TEST(shared_operand_reshard_keeps_the_gather) {
  /* Two dots want rhs gathered the same way: XLA's check_users_sharding
   * keeps one all-gather both use instead of a loop each. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=2\n\nENTRY e {\n"
      "  a = f32[4,6,8] parameter(0), sharding={devices=[1,2,1]0,1}\n"
      "  b = f32[4,6,8] parameter(1), sharding={devices=[1,2,1]0,1}\n"
      "  rhs = f32[4,10,8] parameter(2), sharding={devices=[1,2,1]0,1}\n"
      "  d1 = f32[4,6,10] dot(a, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,2,1]0,1}\n"
      "  d2 = f32[4,6,10] dot(b, rhs), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={2}, sharding={devices=[1,2,1]0,1}\n"
      "  ROOT t = (f32[4,6,10], f32[4,6,10]) tuple(d1, d2), sharding={{devices=[1,2,1]0,1}, {devices=[1,2,1]0,1}}\n}\n");
  hk_module *m = partitioned(g, windowed);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 1);
  ck_assert_int_eq(operand_bytes(hk_test_last_op(m, HK_OP_ALL_GATHER)), 4 * 5 * 8 * 4);
  hk_module_free(m);
  /* Told to skip the check, each dot loops. */
  m = partitioned(g, "allow_module_signature_change=true threshold_for_windowed_einsum_mib=0 "
                     "skip_checking_windowed_einsum_users=true");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_WHILE), 2);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  spmd_check_same_values(g, m, 2);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(uneven_contraction_zeroes_the_padding) {
  /* The contracting dim 15 over 4 devices (tiles of 4, the last with one
   * padded row): exp makes the padding 1, so it must be zeroed on both
   * sides before the local dot; then one all-reduce of f32[8,6]. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  a0 = f32[8,15] parameter(0), sharding={devices=[1,4]<=[4]}\n"
      "  a = f32[8,15] exponential(a0), sharding={devices=[1,4]<=[4]}\n"
      "  b0 = f32[15,6] parameter(1), sharding={devices=[4,1]<=[4]}\n"
      "  b = f32[15,6] exponential(b0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT d = f32[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sharding={replicated}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(operand_bytes(hk_test_last_op(m, HK_OP_ALL_REDUCE)), 8 * 6 * 4);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_SELECT), 2);   /* one mask per operand */
  spmd_check_same_values(g, m, 4);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(sparse_dot_metadata_follows_its_operand) {
  /* A 2:4 sparse lhs batch-split like the output: the metadata (lhs's
   * dims) is split alike, rhs sliced locally from its replicas: no
   * collective. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  lhs = f32[2,4,16] parameter(0), sharding={devices=[2,2,1]<=[4]}\n"
      "  rhs = f32[2,32,6] parameter(1), sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}\n"
      "  meta = u16[2,4,2] parameter(2), sharding={devices=[2,2,1]<=[4]}\n"
      "  ROOT dot = f32[2,4,6] dot(lhs, rhs, meta), lhs_batch_dims={0}, rhs_batch_dims={0},"
      " lhs_contracting_dims={2}, rhs_contracting_dims={1}, sparsity=L.2@2:4,"
      " sharding={devices=[2,2,1]<=[4]}\n}\n");
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE) +
                       hk_test_count_op(m, HK_OP_ALL_TO_ALL) + hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE),
                   0);
  hk_instr *dot = hk_test_last_op(m, HK_OP_DOT);
  ck_assert_int_eq(dot->n_operands, 3);
  ck_assert_int_eq(dot->operands[2]->shape->dims[1], 2);   /* meta u16[1,2,2] */
  ck_assert_int_eq(dot->shape->dims[1], 2);
  spmd_check_same_values(g, m, 4);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

/* ---- the planned_collective_cost hook ----------------------------------------- */

static hk_spmd_partitioner_vtable pricey_vt;

/* All-to-alls priced a thousand times what the base says. */
static int64_t pricey_all_to_all(hk_pass *self, int kind, int64_t bytes, int64_t group) {
  (void)self;
  int64_t g = group > 1 ? group : 1;
  int64_t moved = kind == HK_COLL_ALL_GATHER ? (g - 1) * bytes : (g - 1) * bytes / g;
  return kind == HK_COLL_ALL_TO_ALL ? 1000 * moved : moved;
}

/* m partitioned by spmd-partitioning, with the cost hook overridden when
 * `pricey`. */
static void partition_priced(hk_module *m, bool pricey) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, "spmd-partitioning", "allow_module_signature_change=true", &err);
  ck_assert_ok(err);
  const hk_spmd_partitioner_vtable *vt = hk_pass_extension(p, HK_SPMD_PARTITIONER_IFACE);
  ck_assert_ptr_nonnull(vt);
  ck_assert_ptr_nonnull(vt->planned_collective_cost);
  if (pricey) {
    pricey_vt = *vt;
    pricey_vt.planned_collective_cost = pricey_all_to_all;
    vt->set_vtable(p, &pricey_vt);
  }
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  hk_pass_destroy(p);
}

START_TEST(cost_hook_changes_the_reshard) {
  /* A dim move [4,1] -> [1,4]: one all-to-all of the f32[2,8] tile by the
   * base prices; priced out, an all-gather of dim 0 and a local slice. */
  static const char text[] =
      "HloModule m, num_partitions=4\n\nENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[4,1]<=[4]}\n"
      "  ROOT c = f32[8,8] copy(p), sharding={devices=[1,4]<=[4]}\n}\n";
  hk_module *g = hk_test_parse(text);
  hk_module *m = hk_module_clone(g);
  partition_priced(m, false);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 1);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(operand_bytes(hk_test_last_op(m, HK_OP_ALL_TO_ALL)), 2 * 8 * 4);
  spmd_check_same_values(g, m, 4);
  hk_module_free(m);
  m = hk_module_clone(g);
  partition_priced(m, true);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 1);
  spmd_check_same_values(g, m, 4);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

START_TEST(all_to_all_into_a_dim_smaller_than_its_split) {
  /* [1,1,4 r2] -> [1,4,1 r2] on f32[5,1,64]: the size-1 dim is padded to
   * 4 rows (each partition's tile one row, three of them padding) and one
   * all-to-all moves the split, as XLA's PartitionConvWithBathGroupAlign*
   * results do; no all-gather. */
  hk_module *p = spmd_check_partition(
      reg,
      "HloModule m\nENTRY e {\n"
      "  p = f32[5,1,64] parameter(0), sharding={devices=[1,1,4,2]<=[8] last_tile_dim_replicate}\n"
      "  ROOT c = f32[5,1,64] copy(p), sharding={devices=[1,4,1,2]<=[8] last_tile_dim_replicate}\n}\n",
      8, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_TO_ALL), 5 * 4 * 16 * 4);
  int64_t dims[3] = {5, 1, 64};
  ck_assert(spmd_check_root_dims(p, 3, dims));
  hk_module_free(p);
}
END_TEST

START_TEST(reshard_to_partial_replication_moves_then_gathers) {
  /* [1,4,2,1] -> [1,1,1,2 r4] (XLA's ComplexReshardToPartialReplicate made
   * ours): dim 2's split goes to dim 3 by one all-to-all within pairs, then
   * dim 1 (15, uneven) is gathered in groups of 4; the value is never
   * whole on a device (gathering first would hold all of f32[4,15,4,16]). */
  hk_module *p = spmd_check_partition(
      reg,
      "HloModule m\nENTRY e {\n"
      "  p = f32[4,15,4,16] parameter(0), sharding={devices=[1,4,2,1]<=[8]}\n"
      "  ROOT c = f32[4,15,4,16] copy(p), sharding={devices=[1,1,1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}\n}\n",
      8, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 1);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_GATHER), 1);
  ck_assert_int_eq(spmd_check_collectives(p), 2);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_ALL_TO_ALL), 4 * 4 * 2 * 16 * 4);
  const hk_instr *ag = hk_test_last_op(p, HK_OP_ALL_GATHER);
  ck_assert_int_eq(hk_shape_byte_size(ag->shape), 4 * 16 * 4 * 8 * 4);   /* half of dim 3 */
  hk_module_free(p);
}
END_TEST

START_TEST(replicas_slice_before_they_permute) {
  /* [1,2 r2] -> [2,2] on other devices: each replica slices its row half
   * first (free), then one permute of the f32[4,4] tile (64 bytes), not
   * of the f32[8,4] it held. */
  hk_module *p = spmd_check_partition(
      reg,
      "HloModule m\nENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
      "  ROOT c = f32[8,8] copy(p), sharding={devices=[2,2]1,0,3,2}\n}\n",
      4, NULL);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  ck_assert_int_eq(spmd_check_bytes_sent(p, HK_OP_COLLECTIVE_PERMUTE), 4 * 4 * 4);
  hk_module_free(p);
}
END_TEST

START_TEST(replicas_slice_the_dim_that_needs_no_permute) {
  /* [2,1,1 r2] -> [1,2,2] (XLA's PartitionDotGroupOnBatchContractingReshard
   * result made small): the replicas (device parity) slice dim 2, which
   * the target splits by parity, and one all-to-all moves dim 0's split to
   * dim 1; slicing dim 1 instead would need a permute after. */
  hk_module *p = spmd_check_partition(
      reg,
      "HloModule m\nENTRY e {\n"
      "  p = f32[4,4,8] parameter(0), sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}\n"
      "  ROOT c = f32[4,4,8] copy(p), sharding={devices=[1,2,2]<=[4]}\n}\n",
      4, NULL);
  ck_assert_int_eq(hk_test_count_op(p, HK_OP_ALL_TO_ALL), 1);
  ck_assert_int_eq(spmd_check_collectives(p), 1);
  hk_module_free(p);
}
END_TEST

START_TEST(all_to_all_moves_a_factor_within_subgroups) {
  /* [2,4] -> [4,2] (XLA's SubgroupAllToAllReshard): half of dim 1's split
   * moves to dim 0 by all-to-alls in pairs, then one permute puts the
   * tiles on the target's devices; no all-gather. */
  hk_module *g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  p = f32[8,8] parameter(0), sharding={devices=[2,4]<=[8]}\n"
      "  ROOT c = f32[8,8] copy(p), sharding={devices=[4,2]0,1,4,5,2,3,6,7}\n}\n");
  hk_module *m = hk_module_clone(g);
  partition_priced(m, false);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 1);
  hk_instr *a2a = hk_test_last_op(m, HK_OP_ALL_TO_ALL);
  ck_assert_int_eq(operand_bytes(a2a), 4 * 2 * 4);   /* the f32[4,2] tile */
  const hk_replica_groups *rg = a2a->attrs->replica_groups;
  ck_assert_ptr_nonnull(rg);
  ck_assert_int_eq(rg->n_groups, 4);   /* pairs */
  ck_assert_int_eq(rg->group_start[1] - rg->group_start[0], 2);
  spmd_check_same_values(g, m, 8);
  hk_module_free(m);
  /* From partial replication: [1,2 r4] -> [8,1]: the replicas slice dim 0
   * locally, one all-to-all moves dim 1's split. */
  hk_module_free(g);
  g = hk_test_parse(
      "HloModule m, num_partitions=8\n\nENTRY e {\n"
      "  p = f32[16,4] parameter(0), sharding={devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}\n"
      "  ROOT c = f32[16,4] copy(p), sharding={devices=[8,1]<=[8]}\n}\n");
  m = hk_module_clone(g);
  partition_priced(m, false);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER) + hk_test_count_op(m, HK_OP_ALL_REDUCE), 0);
  ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 1);
  spmd_check_same_values(g, m, 8);
  hk_module_free(m);
  hk_module_free(g);
}
END_TEST

/* Runs spmd-partitioning on text with HLOKIT_SPMD_REPORT set; returns what
 * it printed to stderr (malloc'ed). */
static char *report_of(const char *text) {
  char path[] = "/tmp/hk-spmd-report-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("HLOKIT_SPMD_REPORT", "1", 1);
  hk_module *g = hk_test_parse(text);
  hk_module *m = partitioned(g, "allow_module_signature_change=true");
  unsetenv("HLOKIT_SPMD_REPORT");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t n = lseek(fd, 0, SEEK_END);
  char *out = calloc((size_t)n + 1, 1);
  ck_assert_ptr_nonnull(out);
  ck_assert_int_eq(pread(fd, out, (size_t)n, 0), n);
  close(fd);
  unlink(path);
  hk_module_free(m);
  hk_module_free(g);
  return out;
}

START_TEST(after_report_names_each_full_rematerialization) {
  /* An fft over its sharded dim has no handler: p is made whole, 8 x 8
   * c64 = 512 bytes on every device. */
  char *r = report_of("HloModule m, num_partitions=2\n\nENTRY e {\n"
                      "  p = c64[8,8] parameter(0), sharding={devices=[1,2]0,1}\n"
                      "  ROOT r = c64[8,8] fft(p), fft_type=FFT, fft_length={8}, sharding={devices=[1,2]0,1}\n}\n");
  ck_assert_msg(strstr(r, "full rematerialization: 1\n"), "%s", r);
  ck_assert_msg(strstr(r, "involuntary full rematerialization: p made whole by all-gather %"), "%s", r);
  ck_assert_msg(strstr(r, "(512 bytes per device) going from {devices=[1,2]0,1} to {replicated}"), "%s", r);
  /* and the fft is named as the instruction that fell back */
  ck_assert_msg(strstr(r, "replicated fallbacks: 1\n  replicated fallback: fft %r\n"), "%s", r);
  free(r);
  /* A dot with a handler makes nothing whole. */
  r = report_of("HloModule m, num_partitions=2\n\nENTRY e {\n"
                "  a = f32[8,16] parameter(0), sharding={devices=[1,2]0,1}\n"
                "  b = f32[16,4] parameter(1), sharding={devices=[2,1]0,1}\n"
                "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
                " sharding={replicated}\n}\n");
  ck_assert_msg(strstr(r, "full rematerialization: 0\n"), "%s", r);
  ck_assert_ptr_null(strstr(r, "involuntary"));
  ck_assert_ptr_null(strstr(r, "replicated fallback:"));
  free(r);
}
END_TEST

/* Total bytes of the operands of m's collectives (one device's share). */
static int64_t collective_bytes(const hk_module *m) {
  int64_t total = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->opcode == HK_OP_ALL_GATHER || i->opcode == HK_OP_ALL_REDUCE || i->opcode == HK_OP_ALL_TO_ALL ||
          i->opcode == HK_OP_COLLECTIVE_PERMUTE || i->opcode == HK_OP_REDUCE_SCATTER)
        total += operand_bytes(i);
  return total;
}

/* 2-D dot partitionings on a 2x2 mesh (batch + contracting, rows +
 * contracting, partially replicated operands, batch + non-contracting):
 * the collectives chosen and their bytes, never more than XLA's plan
 * (xla_bytes: the local-dot-then-all-reduce (+ permute) plan of
 * dot_handler.cc, or its one gather), and the values. */
START_TEST(two_d_dot_partitionings_by_bytes) {
  static const struct {
    const char *body;
    int gathers, reduces, permutes;
    int64_t bytes, xla_bytes;
  } cases[] = {
      /* batch x contracting on both sides, output batch-split and replicated
       * over the contracting pair: gathering both contracting halves
       * (16 KiB + 12 KiB) beats all-reducing the 48 KiB output */
      {"  a = f32[8,64,32] parameter(0), sharding={devices=[2,1,2]<=[4]}\n"
       "  b = f32[8,32,48] parameter(1), sharding={devices=[2,2,1]<=[4]}\n"
       "  ROOT d = f32[8,64,48] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},"
       " rhs_contracting_dims={1}, sharding={devices=[2,1,1,2]<=[4] last_tile_dim_replicate}\n",
       2, 0, 0, 4 * 64 * 16 * 4 + 4 * 16 * 48 * 4, 4 * 64 * 48 * 4},
      /* a replicated over one mesh axis, contracting split over the other;
       * b split on both: two gathers and one permute of b's [16,24] tile
       * before its gather (7 KiB) against all-reduce + permute of the
       * [64,24] output (12 KiB) */
      {"  a = f32[64,32] parameter(0), sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n"
       "  b = f32[32,48] parameter(1), sharding={devices=[2,2]<=[4]}\n"
       "  ROOT d = f32[64,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
       " sharding={devices=[1,2,2]<=[4] last_tile_dim_replicate}\n",
       2, 0, 1, 64 * 16 * 4 + 16 * 24 * 4 + 16 * 24 * 4, 2 * 64 * 24 * 4},
      /* batch x rows on the lhs, batch x columns on the rhs, output batch x
       * rows: the rhs columns gathered, as XLA does */
      {"  a = f32[4,64,32] parameter(0), sharding={devices=[2,2,1]<=[4]}\n"
       "  b = f32[4,32,48] parameter(1), sharding={devices=[2,1,2]<=[4]}\n"
       "  ROOT d = f32[4,64,48] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},"
       " rhs_contracting_dims={1}, sharding={devices=[2,2,1]<=[4]}\n",
       1, 0, 0, 2 * 32 * 24 * 4, 2 * 32 * 24 * 4},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char text[2048];
    snprintf(text, sizeof text, "HloModule m, num_partitions=4\n\nENTRY e {\n%s}\n", cases[k].body);
    hk_module *g = hk_test_parse(text);
    hk_module *m = partitioned(g, "allow_module_signature_change=true");
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_GATHER), cases[k].gathers);
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_REDUCE) + hk_test_count_op(m, HK_OP_REDUCE_SCATTER),
                     cases[k].reduces);
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_COLLECTIVE_PERMUTE), cases[k].permutes);
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_ALL_TO_ALL), 0);
    ck_assert_int_eq(collective_bytes(m), cases[k].bytes);
    ck_assert_int_le(collective_bytes(m), cases[k].xla_bytes);
    spmd_check_same_values(g, m, 4);
    hk_module_free(m);
    hk_module_free(g);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("spmd_dot");
  TCase *t = tcase_create("windowed");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, uneven_gather_window_loops_and_slices_back);
  tcase_add_test(t, uneven_contract_window_zeroes_the_padding);
  tcase_add_test(t, scatter_window_rings_within_subgroups);
  tcase_add_test(t, scatter_window_rings_over_two_output_dims);
  tcase_add_test(t, conv_spatial_dot_dims_partition_like_a_dot);
  tcase_add_test(t, conv_rhs_non_contracting_spatial_dim_stays_split);
  tcase_add_test(t, conv_batch_spatial_dim_splits_like_a_batch_dim);
  tcase_add_test(t, conv_batch_and_spatial_dims_split_keeps_the_batch_split);
  tcase_add_test(t, shared_operand_reshard_keeps_the_gather);
  tcase_add_test(t, sparse_dot_metadata_follows_its_operand);
  tcase_add_test(t, uneven_contraction_zeroes_the_padding);
  tcase_add_test(t, unrolled_and_bidirectional_gather_window);
  tcase_add_test(t, unrolled_and_bidirectional_contract_window);
  tcase_add_test(t, unrolled_and_bidirectional_scatter_window);
  tcase_add_test(t, loop_variants_need_a_ring_they_divide);
  tcase_add_test(t, window_within_groups_prefers_memory_footprint);
  tcase_add_test(t, window_within_groups_prefers_fewer_iterations);
  tcase_add_test(t, window_within_groups_of_a_dot_like_convolution);
  tcase_add_test(t, window_within_contracting_groups_then_all_reduce);
  tcase_add_test(t, window_within_groups_scatters_when_the_other_keeps_its_contraction);
  tcase_add_test(t, bidirectional_scatter_rings_within_subgroups);
  tcase_add_test(t, reshape_past_a_size_one_dim_stays_local);
  tcase_add_test(t, scatter_window_realigns_the_smaller_operand);
  suite_add_tcase(s, t);
  TCase *c = tcase_create("reshard");
  tcase_add_checked_fixture(c, setup, teardown);
  tcase_add_test(c, cost_hook_changes_the_reshard);
  tcase_add_test(c, all_to_all_moves_a_factor_within_subgroups);
  tcase_add_test(c, all_to_all_into_a_dim_smaller_than_its_split);
  tcase_add_test(c, reshard_to_partial_replication_moves_then_gathers);
  tcase_add_test(c, replicas_slice_before_they_permute);
  tcase_add_test(c, replicas_slice_the_dim_that_needs_no_permute);
  tcase_add_test(c, two_d_dot_partitionings_by_bytes);
  suite_add_tcase(s, c);
  TCase *r = tcase_create("report");
  tcase_add_checked_fixture(r, setup, teardown);
  tcase_add_test(r, after_report_names_each_full_rematerialization);
  suite_add_tcase(s, r);
  return s;
}

HK_TEST_MAIN(suite)
