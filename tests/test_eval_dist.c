/* test_eval_dist.c - what the MPI back end builds on, without MPI: running
 * a range of the device grid (two ranges meeting through one back end give
 * hk_eval_spmd's results), the reducer kinds a back end may hand to its own
 * reductions, each device's inputs made from the global index, and one
 * device's output piece compared with the global program (right programs
 * equal, wrong ones caught, positions split among the holders). */
#include <pthread.h>

#include "testutil.h"

static const char *dot_global =
    "HloModule g\n"
    "ENTRY e {\n"
    "  a = f32[8,16] parameter(0)\n"
    "  b = f32[16,4] parameter(1)\n"
    "  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

/* Above the size evaluated densely (1e7 multiply-adds): checked on demand. */
static const char *big_global =
    "HloModule g\n"
    "ENTRY e {\n"
    "  a = f32[64,1024] parameter(0)\n"
    "  b = f32[1024,256] parameter(1)\n"
    "  ROOT d = f32[64,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "}\n";

static const char *big_part =
    "HloModule p, num_partitions=4, spmd_output_sharding={devices=[1,4]0,1,2,3}, "
    "spmd_parameters_shardings={{devices=[1,4]0,1,2,3},{devices=[4,1]0,1,2,3}}\n"
    "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  a = f32[64,256] parameter(0)\n"
    "  b = f32[256,256] parameter(1)\n"
    "  d = f32[64,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT r = f32[64,64] reduce-scatter(d), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
    "dimensions={1}, to_apply=add\n"
    "}\n";

/* Contracting dim split over 4 devices; %s is the all-reduce's groups. */
static const char *dot_part_fmt =
    "HloModule p, num_partitions=4, spmd_output_sharding={replicated}, "
    "spmd_parameters_shardings={{devices=[1,4]0,1,2,3},{devices=[4,1]0,1,2,3}}\n"
    "add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  a = f32[8,4] parameter(0)\n"
    "  b = f32[4,4] parameter(1)\n"
    "  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT r = f32[8,4] all-reduce(d), channel_id=1, replica_groups=%s, use_global_device_ids=true, to_apply=add\n"
    "}\n";

static hk_module *dot_part(const char *groups) {
  char text[2048];
  snprintf(text, sizeof text, dot_part_fmt, groups);
  return hk_test_parse(text);
}

/* ---- a range of the grid ------------------------------------------------------------ */

typedef struct range_run {
  const hk_module *m;
  int64_t first, count;
  hk_value *const *const *args;
  hk_value **res;
  const hk_eval_options *eo;
  hk_status *st;
} range_run;

static void *run_range(void *p) {
  range_run *r = p;
  r->st = hk_eval_spmd_devices(r->m, 4, 1, r->first, r->count, r->args, r->m->entry->n_params, r->res, r->eo,
                               NULL);
  return NULL;
}

START_TEST(test_two_ranges_match_whole_grid) {
  hk_module *g = hk_test_parse(dot_global), *p = dot_part("{{0,1,2,3}}");
  hk_value **in[4], *whole[4], *parts[4];
  int n = 0;
  for (int d = 0; d < 4; d++) ck_assert_ok(hk_eval_sampled_inputs(g, p, 4, 1, d, 3, &in[d], &n));
  ck_assert_int_eq(n, 2);
  ck_assert_ok(hk_eval_spmd(p, 4, 1, (hk_value *const *const *)in, n, whole, NULL, NULL));
  hk_collective_backend *be = hk_collective_threads_new(4, 0);
  hk_eval_options eo = {.backend = be};
  range_run r[2] = {{p, 0, 2, (hk_value *const *const *)in, parts, &eo, NULL},
                    {p, 2, 2, (hk_value *const *const *)in + 2, parts + 2, &eo, NULL}};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, run_range, &r[1]), 0);
  run_range(&r[0]);
  pthread_join(t, NULL);
  ck_assert_ok(r[0].st);
  ck_assert_ok(r[1].st);
  for (int d = 0; d < 4; d++) {
    ck_assert_int_eq(whole[d]->nbytes, parts[d]->nbytes);
    ck_assert(!memcmp(whole[d]->data, parts[d]->data, (size_t)whole[d]->nbytes));
    hk_value_release(whole[d]);
    hk_value_release(parts[d]);
    for (int i = 0; i < n; i++) hk_value_release(in[d][i]);
    free(in[d]);
  }
  be->vt->destroy(be);
  hk_module_free(g);
  hk_module_free(p);
}
END_TEST

START_TEST(test_range_errors) {
  hk_module *p = dot_part("{{0,1,2,3}}");
  hk_value *res[1];
  hk_eval_options none = {0};
  hk_status *st = hk_eval_spmd_devices(p, 4, 1, 0, 1, NULL, 0, res, &none, NULL);
  ck_assert(st && strstr(st->message, "needs a collective back end"));
  hk_status_free(st);
  hk_collective_backend *be = hk_collective_threads_new(4, 0);
  hk_eval_options eo = {.backend = be};
  st = hk_eval_spmd_devices(p, 4, 1, 3, 2, NULL, 0, res, &eo, NULL);
  ck_assert(st && strstr(st->message, "devices 3..4 are not in the 1 x 4 grid"));
  hk_status_free(st);
  be->vt->destroy(be);
  hk_module_free(p);
}
END_TEST

/* ---- reducer kinds ------------------------------------------------------------------ */

START_TEST(test_reducer_kinds) {
  hk_module *m = hk_test_parse(
      "HloModule m, num_partitions=2\n"
      "mx { x = s32[] parameter(0)  y = s32[] parameter(1)  ROOT s = s32[] maximum(y, x) }\n"
      "sq { x = s32[] parameter(0)  y = s32[] parameter(1)  a = s32[] add(x, y)  ROOT s = s32[] multiply(a, a) }\n"
      "ENTRY e {\n"
      "  p = s32[4] parameter(0)\n"
      "  r1 = s32[4] all-reduce(p), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=mx\n"
      "  ROOT r2 = s32[4] all-reduce(r1), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=sq\n"
      "}\n");
  ck_assert_int_eq(hk_collective_reducer(hk_test_find(m, "r1")), HK_REDUCE_MAX);
  ck_assert_int_eq(hk_collective_reducer(hk_test_find(m, "r2")), HK_REDUCE_GENERIC);
  ck_assert_int_eq(hk_collective_reducer(hk_test_find(m, "p")), HK_REDUCE_GENERIC);
  hk_module_free(m);
}
END_TEST

/* ---- inputs from the global index ------------------------------------------------------- */

START_TEST(test_inputs_are_pieces_of_one_global_value) {
  hk_module *g = hk_test_parse(dot_global), *p = dot_part("{{0,1,2,3}}");
  hk_value **whole, **piece;
  int n = 0, m = 0;
  ck_assert_ok(hk_eval_sampled_inputs(g, g, 1, 1, 0, 5, &whole, &n));
  for (int d = 0; d < 4; d++) {
    ck_assert_ok(hk_eval_sampled_inputs(g, p, 4, 1, d, 5, &piece, &m));
    ck_assert_int_eq(piece[0]->dims[0], 8);
    ck_assert_int_eq(piece[0]->dims[1], 4);
    for (int64_t i = 0; i < 8; i++)
      for (int64_t j = 0; j < 4; j++)
        ck_assert(hk_value_get_f64(piece[0], i * 4 + j) == hk_value_get_f64(whole[0], i * 16 + d * 4 + j));
    for (int i = 0; i < m; i++) hk_value_release(piece[i]);
    free(piece);
  }
  for (int i = 0; i < n; i++) hk_value_release(whole[i]);
  free(whole);
  hk_value **bad;
  hk_status *st = hk_eval_sampled_inputs(g, p, 4, 1, 4, 5, &bad, &m);
  ck_assert(st != NULL);
  hk_status_free(st);
  hk_module_free(g);
  hk_module_free(p);
}
END_TEST

/* ---- one device's piece ---------------------------------------------------------------- */

/* Runs p on 4 devices on the sampled inputs and compares every device's
 * piece; *positions gets the total compared. */
static bool pieces_equal(const char *groups, int64_t *positions, int64_t *first_bad) {
  hk_module *g = hk_test_parse(dot_global), *p = dot_part(groups);
  hk_value **in[4], *res[4];
  int n = 0;
  for (int d = 0; d < 4; d++) ck_assert_ok(hk_eval_sampled_inputs(g, p, 4, 1, d, 9, &in[d], &n));
  ck_assert_ok(hk_eval_spmd(p, 4, 1, (hk_value *const *const *)in, n, res, NULL, NULL));
  hk_sample_options o = {.seed = 9, .atol = -1, .rtol = -1};
  bool equal = true;
  *positions = 0;
  *first_bad = -1;
  for (int d = 0; d < 4; d++) {
    hk_sample_result r;
    ck_assert_ok(hk_eval_compare_piece(g, p, 4, 1, d, res[d], &o, &r));
    /* A replicated 8x4 output: each of the 4 holders compares 2 rows. */
    ck_assert_int_eq(r.samples, 8);
    *positions += r.samples;
    if (!r.equal && *first_bad < 0) *first_bad = r.mismatch_device;
    equal &= r.equal;
    hk_sample_result_free(&r);
    hk_value_release(res[d]);
    for (int i = 0; i < n; i++) hk_value_release(in[d][i]);
    free(in[d]);
  }
  hk_module_free(g);
  hk_module_free(p);
  return equal;
}

START_TEST(test_piece_equal_and_split) {
  int64_t positions, bad;
  ck_assert(pieces_equal("{{0,1,2,3}}", &positions, &bad));
  ck_assert_int_eq(positions, 32);
}
END_TEST

START_TEST(test_piece_wrong_groups_caught) {
  int64_t positions, bad;
  ck_assert(!pieces_equal("{{0,1},{2,3}}", &positions, &bad));
  ck_assert_int_eq(bad, 0);
}
END_TEST

/* The on-demand path: a tiled output, each device compares its whole
 * 64x64 piece; a wrong piece offset is caught. */
START_TEST(test_piece_on_demand) {
  hk_module *g = hk_test_parse(big_global), *p = hk_test_parse(big_part);
  hk_value **in[4], *res[4];
  int n = 0;
  for (int d = 0; d < 4; d++) ck_assert_ok(hk_eval_sampled_inputs(g, p, 4, 1, d, 2, &in[d], &n));
  ck_assert_ok(hk_eval_spmd(p, 4, 1, (hk_value *const *const *)in, n, res, NULL, NULL));
  hk_sample_options o = {.seed = 2, .atol = -1, .rtol = -1};
  for (int d = 0; d < 4; d++) {
    hk_sample_result r;
    ck_assert_ok(hk_eval_compare_piece(g, p, 4, 1, d, res[d], &o, &r));
    ck_assert_msg(r.equal, "device %d: %g vs %g", d, r.expected, r.actual);
    ck_assert_int_eq(r.samples, 64 * 64);
    hk_sample_result_free(&r);
  }
  /* Device 1's result presented as device 2's: its piece is elsewhere. */
  hk_sample_result r;
  ck_assert_ok(hk_eval_compare_piece(g, p, 4, 1, 2, res[1], &o, &r));
  ck_assert(!r.equal && r.has_mismatch);
  ck_assert_int_eq(r.mismatch_device, 2);
  ck_assert_int_ge(r.mismatch_index % 256, 128);
  hk_sample_result_free(&r);
  for (int d = 0; d < 4; d++) {
    hk_value_release(res[d]);
    for (int i = 0; i < n; i++) hk_value_release(in[d][i]);
    free(in[d]);
  }
  hk_module_free(g);
  hk_module_free(p);
}
END_TEST

static Suite *dist_suite(void) {
  Suite *s = suite_create("eval_dist");
  TCase *t = tcase_create("dist");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, test_two_ranges_match_whole_grid);
  tcase_add_test(t, test_range_errors);
  tcase_add_test(t, test_reducer_kinds);
  tcase_add_test(t, test_inputs_are_pieces_of_one_global_value);
  tcase_add_test(t, test_piece_equal_and_split);
  tcase_add_test(t, test_piece_wrong_groups_caught);
  tcase_add_test(t, test_piece_on_demand);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(dist_suite)
