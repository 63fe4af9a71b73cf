/* test_eval.c - known-answer tests of the evaluator: every op family, XLA's
 * edge semantics, and collectives on 2, 4 and 8 simulated devices. */
#include <json-c/json.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

static hk_module *parse(const char *text) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, strlen(text), "test", &m));
  return m;
}

static hk_value *arr(hk_prim p, int rank, const int64_t *dims, const double *vals) {
  hk_value *v = hk_value_new_array(p, rank, dims);
  for (int64_t i = 0; i < v->n; i++) hk_value_set_f64(v, i, vals[i]);
  return v;
}

static hk_value *vec(hk_prim p, int64_t n, const double *vals) { return arr(p, 1, &n, vals); }

/* Evaluates the module on one device; the args are released. */
static hk_value *eval_n(const char *text, int n, hk_value **args) {
  hk_module *m = parse(text);
  hk_value *r = NULL;
  ck_assert_ok(hk_eval_module(m, args, n, &r, NULL, NULL));
  for (int i = 0; i < n; i++) hk_value_release(args[i]);
  hk_module_free(m);
  return r;
}

static hk_status *eval_status(const char *text) {
  hk_module *m = parse(text);
  hk_value *r = NULL;
  hk_status *st = hk_eval_module(m, NULL, 0, &r, NULL, NULL);
  hk_value_release(r);
  hk_module_free(m);
  return st;
}

static void expect_vals(const hk_value *v, int64_t n, const double *want) {
  ck_assert_int_eq(v->n, n);
  for (int64_t i = 0; i < n; i++) {
    double got = hk_value_get_f64(v, i);
    if (isnan(want[i])) ck_assert_msg(isnan(got), "element %lld: want nan, got %g", (long long)i, got);
    else ck_assert_msg(got == want[i], "element %lld: want %.9g, got %.9g", (long long)i, want[i], got);
  }
}

static void expect_ints(const hk_value *v, int64_t n, const int64_t *want) {
  ck_assert_int_eq(v->n, n);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(hk_value_get_i64(v, i) == want[i], "element %lld: want %lld, got %lld", (long long)i,
                  (long long)want[i], (long long)hk_value_get_i64(v, i));
}

/* ---- elementwise ------------------------------------------------------------- */

START_TEST(test_integer_division_semantics) {
  hk_value *a[2] = {vec(HK_S32, 5, (double[]){7, -7, 5, -2147483648.0, 9}),
                    vec(HK_S32, 5, (double[]){2, 2, 0, -1, -4})};
  hk_value *r = eval_n("HloModule m\nENTRY e {\n p0 = s32[5] parameter(0)\n p1 = s32[5] parameter(1)\n"
                       " ROOT d = s32[5] divide(p0, p1)\n}\n", 2, a);
  expect_ints(r, 5, (int64_t[]){3, -3, -1, INT32_MIN, -2});
  hk_value_release(r);
  hk_value *b[2] = {vec(HK_S32, 5, (double[]){7, -7, 5, -2147483648.0, 9}),
                    vec(HK_S32, 5, (double[]){2, 2, 0, -1, -4})};
  r = eval_n("HloModule m\nENTRY e {\n p0 = s32[5] parameter(0)\n p1 = s32[5] parameter(1)\n"
             " ROOT d = s32[5] remainder(p0, p1)\n}\n", 2, b);
  expect_ints(r, 5, (int64_t[]){1, -1, 5, 0, 1});
  hk_value_release(r);
  hk_value *c[2] = {vec(HK_U8, 2, (double[]){200, 7}), vec(HK_U8, 2, (double[]){0, 2})};
  r = eval_n("HloModule m\nENTRY e {\n p0 = u8[2] parameter(0)\n p1 = u8[2] parameter(1)\n"
             " ROOT d = u8[2] divide(p0, p1)\n}\n", 2, c);
  expect_ints(r, 2, (int64_t[]){255, 3});
  hk_value_release(r);
}
END_TEST

START_TEST(test_shifts_and_wrap) {
  const char *mod = "HloModule m\nENTRY e {\n p0 = s32[4] parameter(0)\n p1 = s32[4] parameter(1)\n"
                    " a = s32[4] shift-left(p0, p1)\n b = s32[4] shift-right-arithmetic(p0, p1)\n"
                    " c = s32[4] shift-right-logical(p0, p1)\n d = s32[4] add(p0, p0)\n"
                    " ROOT t = (s32[4], s32[4], s32[4], s32[4]) tuple(a, b, c, d)\n}\n";
  hk_value *a[2] = {vec(HK_S32, 4, (double[]){1, -8, -8, 2147483647}),
                    vec(HK_S32, 4, (double[]){31, 1, 40, 32})};
  hk_value *r = eval_n(mod, 2, a);
  ck_assert_int_eq(r->n_elems, 4);
  expect_ints(r->elems[0], 4, (int64_t[]){INT32_MIN, -16, 0, 0});
  expect_ints(r->elems[1], 4, (int64_t[]){0, -4, -1, 0});
  expect_ints(r->elems[2], 4, (int64_t[]){0, 0x7FFFFFFC, 0, 0});
  expect_ints(r->elems[3], 4, (int64_t[]){2, -16, -16, -2});
  hk_value_release(r);
}
END_TEST

START_TEST(test_nan_min_max_compare) {
  const char *mod =
      "HloModule m\nENTRY e {\n p0 = f32[3] parameter(0)\n p1 = f32[3] parameter(1)\n"
      " mx = f32[3] maximum(p0, p1)\n mn = f32[3] minimum(p0, p1)\n"
      " eq = pred[3] compare(p0, p1), direction=EQ\n ne = pred[3] compare(p0, p1), direction=NE\n"
      " lt = pred[3] compare(p0, p1), direction=LT\n"
      " to = pred[3] compare(p0, p1), direction=LT, type=TOTALORDER\n"
      " ROOT t = (f32[3], f32[3], pred[3], pred[3], pred[3], pred[3]) tuple(mx, mn, eq, ne, lt, to)\n}\n";
  hk_value *a[2] = {vec(HK_F32, 3, (double[]){NAN, 1, -0.0}), vec(HK_F32, 3, (double[]){1, NAN, 0.0})};
  hk_value *r = eval_n(mod, 2, a);
  expect_vals(r->elems[0], 3, (double[]){NAN, NAN, 0});
  expect_vals(r->elems[1], 3, (double[]){NAN, NAN, 0});
  expect_ints(r->elems[2], 3, (int64_t[]){0, 0, 1});
  expect_ints(r->elems[3], 3, (int64_t[]){1, 1, 0});
  expect_ints(r->elems[4], 3, (int64_t[]){0, 0, 0});
  expect_ints(r->elems[5], 3, (int64_t[]){0, 1, 1});   /* +nan > 1; 1 < +nan; -0 < +0 */
  hk_value_release(r);
}
END_TEST

START_TEST(test_convert_and_rounding) {
  const char *mod = "HloModule m\nENTRY e {\n p0 = f32[6] parameter(0)\n c = s32[6] convert(p0)\n"
                    " e = f32[6] round-nearest-even(p0)\n a = f32[6] round-nearest-afz(p0)\n"
                    " ROOT t = (s32[6], f32[6], f32[6]) tuple(c, e, a)\n}\n";
  hk_value *a[1] = {vec(HK_F32, 6, (double[]){1e10, -1e10, NAN, 2.5, -2.5, 3.5})};
  hk_value *r = eval_n(mod, 1, a);
  expect_ints(r->elems[0], 6, (int64_t[]){INT32_MAX, INT32_MIN, 0, 2, -2, 3});
  expect_vals(r->elems[1], 6, (double[]){1e10, -1e10, NAN, 2, -2, 4});
  expect_vals(r->elems[2], 6, (double[]){1e10, -1e10, NAN, 3, -3, 4});
  hk_value_release(r);
  hk_value *b[1] = {vec(HK_S32, 3, (double[]){300, -1, 255})};
  r = eval_n("HloModule m\nENTRY e {\n p0 = s32[3] parameter(0)\n ROOT c = u8[3] convert(p0)\n}\n", 1, b);
  expect_ints(r, 3, (int64_t[]){44, 255, 255});
  hk_value_release(r);
}
END_TEST

START_TEST(test_select_clamp_iota_bitcast_convert) {
  const char *mod =
      "HloModule m\nENTRY e {\n i = s32[4] iota(), iota_dimension=0\n two = s32[] constant(2)\n"
      " b = s32[4] broadcast(two), dimensions={}\n p = pred[4] compare(i, b), direction=LT\n"
      " n = s32[4] negate(i)\n s = s32[4] select(p, i, n)\n lo = s32[] constant(-2)\n"
      " hi = s32[] constant(1)\n c = s32[4] clamp(lo, s, hi)\n one = f32[] constant(1)\n"
      " bc = s32[] bitcast-convert(one)\n ROOT t = (s32[4], s32[4], s32[]) tuple(s, c, bc)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 4, (int64_t[]){0, 1, -2, -3});
  expect_ints(r->elems[1], 4, (int64_t[]){0, 1, -2, -2});
  expect_ints(r->elems[2], 1, (int64_t[]){0x3F800000});
  hk_value_release(r);
}
END_TEST

/* ---- data movement --------------------------------------------------------------- */

START_TEST(test_dynamic_slice_clamps) {
  const char *mod = "HloModule m\nENTRY e {\n i = s32[5] iota(), iota_dimension=0\n"
                    " s1 = s32[] constant(4)\n s2 = s32[] constant(-3)\n"
                    " a = s32[2] dynamic-slice(i, s1), dynamic_slice_sizes={2}\n"
                    " b = s32[2] dynamic-slice(i, s2), dynamic_slice_sizes={2}\n"
                    " u = s32[2] constant({7, 8})\n s3 = s32[] constant(10)\n"
                    " c = s32[5] dynamic-update-slice(i, u, s3)\n"
                    " ROOT t = (s32[2], s32[2], s32[5]) tuple(a, b, c)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 2, (int64_t[]){3, 4});
  expect_ints(r->elems[1], 2, (int64_t[]){0, 1});
  expect_ints(r->elems[2], 5, (int64_t[]){0, 1, 2, 7, 8});
  hk_value_release(r);
}
END_TEST

START_TEST(test_pad_negative_interior) {
  const char *mod = "HloModule m\nENTRY e {\n a = s32[3] constant({1, 2, 3})\n z = s32[] constant(0)\n"
                    " ROOT p = s32[6] pad(a, z), padding=-1_2_1\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r, 6, (int64_t[]){0, 2, 0, 3, 0, 0});
  hk_value_release(r);
  const char *mod2 = "HloModule m\nENTRY e {\n a = s32[2,2] constant({{1, 2}, {3, 4}})\n"
                     " z = s32[] constant(9)\n ROOT p = s32[3,4] pad(a, z), padding=1_0_0x0_2_0\n}\n";
  r = eval_n(mod2, 0, NULL);
  expect_ints(r, 12, (int64_t[]){9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9});
  hk_value_release(r);
  /* negative edges without interior padding: rows and columns cut off */
  const char *mod3 = "HloModule m\nENTRY e {\n a = s32[3,4] constant({{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}})\n"
                     " z = s32[] constant(0)\n ROOT p = s32[3,3] pad(a, z), padding=-1_1_0x-1_0_0\n}\n";
  r = eval_n(mod3, 0, NULL);
  expect_ints(r, 9, (int64_t[]){6, 7, 8, 10, 11, 12, 0, 0, 0});
  hk_value_release(r);
  const char *mod4 = "HloModule m\nENTRY e {\n a = s32[4] constant({1, 2, 3, 4})\n"
                     " z = s32[] constant(7)\n ROOT p = s32[3] pad(a, z), padding=1_-2_0\n}\n";
  r = eval_n(mod4, 0, NULL);
  expect_ints(r, 3, (int64_t[]){7, 1, 2});
  hk_value_release(r);
}
END_TEST

START_TEST(test_transpose_slice_concat_reverse_broadcast) {
  const char *mod =
      "HloModule m\nENTRY e {\n a = s32[2,3] constant({{0, 1, 2}, {3, 4, 5}})\n"
      " t = s32[3,2] transpose(a), dimensions={1,0}\n"
      " s = s32[2,2] slice(a), slice={[0:2], [0:3:2]}\n"
      " c = s32[2,5] concatenate(a, s), dimensions={1}\n"
      " r = s32[2,3] reverse(a), dimensions={0,1}\n"
      " v = s32[2] constant({7, 8})\n b = s32[2,3] broadcast(v), dimensions={0}\n"
      " ROOT o = (s32[3,2], s32[2,2], s32[2,5], s32[2,3], s32[2,3]) tuple(t, s, c, r, b)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 6, (int64_t[]){0, 3, 1, 4, 2, 5});
  expect_ints(r->elems[1], 4, (int64_t[]){0, 2, 3, 5});
  expect_ints(r->elems[2], 10, (int64_t[]){0, 1, 2, 0, 2, 3, 4, 5, 3, 5});
  expect_ints(r->elems[3], 6, (int64_t[]){5, 4, 3, 2, 1, 0});
  expect_ints(r->elems[4], 6, (int64_t[]){7, 7, 7, 8, 8, 8});
  hk_value_release(r);
}
END_TEST

/* ---- dot and convolution --------------------------------------------------------- */

START_TEST(test_dot_general) {
  const char *mod =
      "HloModule m\nENTRY e {\n a = f32[2,2,3] parameter(0)\n b = f32[2,3,2] parameter(1)\n"
      " ROOT d = f32[2,2,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
      " rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n";
  double av[12], bv[12];
  for (int i = 0; i < 12; i++) {
    av[i] = i;
    bv[i] = i % 5;
  }
  hk_value *args[2] = {arr(HK_F32, 3, (int64_t[]){2, 2, 3}, av), arr(HK_F32, 3, (int64_t[]){2, 3, 2}, bv)};
  hk_value *r = eval_n(mod, 2, args);
  /* batch 0: [[0,1,2],[3,4,5]] x [[0,1],[2,3],[4,0]]; batch 1: [[6,7,8],[9,10,11]] x [[1,2],[3,4],[0,1]] */
  expect_vals(r, 8, (double[]){10, 3, 28, 15, 27, 48, 39, 69});
  hk_value_release(r);
  /* contracting dim 0 on both sides: a^T b */
  const char *mod2 = "HloModule m\nENTRY e {\n a = s32[3,2] constant({{1, 2}, {3, 4}, {5, 6}})\n"
                     " b = s32[3,1] constant({{1}, {1}, {2}})\n"
                     " ROOT d = s32[2,1] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n";
  r = eval_n(mod2, 0, NULL);
  expect_ints(r, 2, (int64_t[]){14, 18});
  hk_value_release(r);
}
END_TEST

START_TEST(test_dot_large_blocked) {
  enum { M = 70, K = 300, N = 530 };
  static double av[M * K], bv[K * N];
  for (int i = 0; i < M * K; i++) av[i] = (i % 7) - 3;
  for (int i = 0; i < K * N; i++) bv[i] = (i % 5) - 2;
  hk_value *args[2] = {arr(HK_F32, 2, (int64_t[]){M, K}, av), arr(HK_F32, 2, (int64_t[]){K, N}, bv)};
  hk_value *r = eval_n("HloModule m\nENTRY e {\n a = f32[70,300] parameter(0)\n b = f32[300,530] parameter(1)\n"
                       " ROOT d = f32[70,530] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
                       2, args);
  for (int i = 0; i < M; i += 13)
    for (int j = 0; j < N; j += 37) {
      double s = 0;
      for (int k = 0; k < K; k++) s += av[i * K + k] * bv[k * N + j];
      ck_assert_msg(hk_value_get_f64(r, i * N + j) == s, "(%d,%d)", i, j);
    }
  hk_value_release(r);
}
END_TEST

/* Thin dots (fewer rows than a register block: a sampled position's
 * matrix-vector product) against a plain sum: an f32 rhs whose
 * contracting dim follows its free one (read in place, transposed), one
 * in [K][N] order, an f64 rhs (packed), a batch dim and K not a multiple
 * of the vector width. */
START_TEST(test_dot_thin_kernels) {
  enum { B = 2, M = 3, K = 203, N = 37 };
  static double av[B * M * K], bv[B * N * K];
  for (int i = 0; i < B * M * K; i++) av[i] = (double)((i * 7) % 11) - 5 + 0.25;
  for (int i = 0; i < B * N * K; i++) bv[i] = (double)((i * 5) % 13) - 6 + 0.5;
  static const char *const rhs_forms[] = {
      "f32[2,37,203] parameter(1)\n ROOT d = f32[2,3,37] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
      " rhs_batch_dims={0}, rhs_contracting_dims={2}",
      "f32[2,203,37] parameter(1)\n ROOT d = f32[2,3,37] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
      " rhs_batch_dims={0}, rhs_contracting_dims={1}",
      "f64[2,37,203] parameter(1)\n ROOT d = f64[2,3,37] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},"
      " rhs_batch_dims={0}, rhs_contracting_dims={2}",
  };
  for (int form = 0; form < 3; form++) {
    char mod[512];
    snprintf(mod, sizeof mod, "HloModule m\nENTRY e {\n a = f32[2,3,203] parameter(0)\n b = %s\n}\n", rhs_forms[form]);
    bool nk = form != 1;
    hk_value *args[2] = {arr(HK_F32, 3, (int64_t[]){B, M, K}, av),
                         arr(form == 2 ? HK_F64 : HK_F32, 3, nk ? (int64_t[]){B, N, K} : (int64_t[]){B, K, N}, bv)};
    hk_value *r = eval_n(mod, 2, args);
    for (int b = 0; b < B; b++)
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          double s = 0;
          for (int k = 0; k < K; k++)
            s += av[(b * M + i) * K + k] * bv[nk ? (b * N + j) * K + k : (b * K + k) * N + j];
          ck_assert_msg(hk_value_get_f64(r, (b * M + i) * N + j) == s, "form %d (%d,%d,%d): %g != %g", form, b, i, j,
                        hk_value_get_f64(r, (b * M + i) * N + j), s);
        }
    hk_value_release(r);
  }
}
END_TEST

/* 2:4 sparse lhs: 8 stored values of a logical row of 16, placed by one
 * u16 of 2-bit positions (group 0: 0,3; 1: 1,2; 2: 0,1; 3: 2,3). */
START_TEST(test_sparse_dot) {
  const char *mod =
      "HloModule m\nENTRY e {\n a = f32[1,8] constant({{1, 2, 3, 4, 5, 6, 7, 8}})\n"
      " i = s32[16,1] iota(), iota_dimension=0\n b = f32[16,1] convert(i)\n"
      " meta = u16[1,1] constant({{58524}})\n"
      " ROOT d = f32[1,1] dot(a, b, meta), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
      " sparsity=L.1@2:4\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  /* positions 0,3,5,6,8,9,14,15 */
  expect_vals(r, 1, (double[]){1 * 0 + 2 * 3 + 3 * 5 + 4 * 6 + 5 * 8 + 6 * 9 + 7 * 14 + 8 * 15});
  hk_value_release(r);
}
END_TEST

static hk_value *conv1d(const char *attrs, int64_t n_out) {
  char mod[1024];
  snprintf(mod, sizeof mod,
           "HloModule m\nENTRY e {\n x = f32[1,1,5] constant({{{1, 2, 3, 4, 5}}})\n"
           " k = f32[1,1,2] constant({{{1, 10}}})\n"
           " ROOT c = f32[1,1,%lld] convolution(x, k), %s, dim_labels=bf0_oi0->bf0\n}\n",
           (long long)n_out, attrs);
  return eval_n(mod, 0, NULL);
}

START_TEST(test_convolution_windows) {
  hk_value *r = conv1d("window={size=2 pad=1_1}", 6);
  expect_vals(r, 6, (double[]){10, 21, 32, 43, 54, 5});
  hk_value_release(r);
  r = conv1d("window={size=2 rhs_dilate=2}", 3);
  expect_vals(r, 3, (double[]){31, 42, 53});
  hk_value_release(r);
  r = conv1d("window={size=2 lhs_dilate=2}", 8);
  expect_vals(r, 8, (double[]){1, 20, 2, 30, 3, 40, 4, 50});
  hk_value_release(r);
  r = conv1d("window={size=2 stride=2}", 2);
  expect_vals(r, 2, (double[]){21, 43});
  hk_value_release(r);
  r = conv1d("window={size=2 rhs_reversal=1}", 4);
  expect_vals(r, 4, (double[]){12, 23, 34, 45});
  hk_value_release(r);
}
END_TEST

START_TEST(test_convolution_groups) {
  hk_value *r = eval_n(
      "HloModule m\nENTRY e {\n x = f32[1,2,3] constant({{{1, 2, 3}, {10, 20, 30}}})\n"
      " k = f32[2,1,1] constant({{{2}}, {{3}}})\n"
      " ROOT c = f32[1,2,3] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0,"
      " feature_group_count=2\n}\n", 0, NULL);
  expect_vals(r, 6, (double[]){2, 4, 6, 30, 60, 90});
  hk_value_release(r);
  r = eval_n(
      "HloModule m\nENTRY e {\n x = f32[2,1,3] constant({{{1, 2, 3}}, {{10, 20, 30}}})\n"
      " k = f32[2,1,1] constant({{{2}}, {{3}}})\n"
      " ROOT c = f32[1,2,3] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0,"
      " batch_group_count=2\n}\n", 0, NULL);
  expect_vals(r, 6, (double[]){2, 4, 6, 30, 60, 90});
  hk_value_release(r);
  /* 2D, NHWC-style labels with a 2x2 kernel summing a window */
  r = eval_n(
      "HloModule m\nENTRY e {\n x = f32[1,3,3,1] constant({{{{1},{2},{3}},{{4},{5},{6}},{{7},{8},{9}}}})\n"
      " k = f32[2,2,1,1] constant({{{{1}},{{1}}},{{{1}},{{1}}}})\n"
      " ROOT c = f32[1,2,2,1] convolution(x, k), window={size=2x2}, dim_labels=b01f_01io->b01f\n}\n",
      0, NULL);
  expect_vals(r, 4, (double[]){12, 16, 24, 28});
  hk_value_release(r);
  /* batch groups with a window: output feature 0 reads batch 0, feature 1 batch 1 */
  r = eval_n(
      "HloModule m\nENTRY e {\n x = f32[2,1,3] constant({{{1, 2, 3}}, {{10, 20, 30}}})\n"
      " k = f32[2,1,2] constant({{{1, 1}}, {{1, -1}}})\n"
      " ROOT c = f32[1,2,2] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0,"
      " batch_group_count=2\n}\n", 0, NULL);
  expect_vals(r, 4, (double[]){3, 5, -10, -10});
  hk_value_release(r);
  /* no spatial dims: a matmul */
  r = eval_n(
      "HloModule m\nENTRY e {\n x = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})\n"
      " k = f32[3,2] constant({{1, 0}, {0, 1}, {1, 1}})\n"
      " ROOT c = f32[2,2] convolution(x, k), dim_labels=bf_io->bf\n}\n", 0, NULL);
  expect_vals(r, 4, (double[]){4, 5, 10, 11});
  hk_value_release(r);
}
END_TEST


/* The f32 fast path against the f64 reference loop on the same data. */
static void conv_paths_agree(const char *lhs_shape, const char *rhs_shape, const char *out_shape,
                             const char *attrs) {
  char mod[2048];
  snprintf(mod, sizeof mod,
           "HloModule m\nENTRY e {\n a = f32%s parameter(0)\n b = f32%s parameter(1)\n"
           " c32 = f32%s convolution(a, b), %s\n a64 = f64%s convert(a)\n b64 = f64%s convert(b)\n"
           " c64 = f64%s convolution(a64, b64), %s\n c = f32%s convert(c64)\n"
           " ROOT t = (f32%s, f32%s) tuple(c32, c)\n}\n",
           lhs_shape, rhs_shape, out_shape, attrs, lhs_shape, rhs_shape, out_shape, attrs, out_shape,
           out_shape, out_shape);
  hk_module *m = parse(mod);
  hk_value *args[2] = {hk_value_random(m->entry->params[0]->shape, 1, 0),
                       hk_value_random(m->entry->params[1]->shape, 1, 1)};
  hk_value *r = NULL;
  ck_assert_ok(hk_eval_module(m, args, 2, &r, NULL, NULL));
  hk_compare_result cr;
  hk_value_compare(r->elems[1], r->elems[0], -1, -1, &cr);
  ck_assert_msg(cr.equal, "%s: max abs error %g", attrs, cr.max_abs_error);
  ck_assert(r->elems[0]->n > 0);
  hk_compare_result_free(&cr);
  hk_value_release(r);
  hk_value_release(args[0]);
  hk_value_release(args[1]);
  hk_module_free(m);
}

/* The im2col + dot kernel path (groups wide enough for it) against a
 * plain loop: 2D, stride, padding, kernel dilation, two feature groups. */
START_TEST(test_convolution_im2col_matches_loop) {
  enum { B = 2, H = 7, W = 6, F = 8, KH = 3, KW = 2, IFG = 4, O = 16, OH = 4, OW = 5 };
  hk_module *m = parse(
      "HloModule m\nENTRY e {\n a = f32[2,7,6,8] parameter(0)\n k = f32[3,2,4,16] parameter(1)\n"
      " ROOT c = f32[2,4,5,16] convolution(a, k), window={size=3x2 stride=2x1 pad=1_1x0_1 rhs_dilate=1x2},"
      " dim_labels=b01f_01io->b01f, feature_group_count=2\n}\n");
  hk_value *args[2] = {hk_value_random(m->entry->params[0]->shape, 7, 0),
                       hk_value_random(m->entry->params[1]->shape, 7, 1)};
  hk_value *r = NULL;
  ck_assert_ok(hk_eval_module(m, args, 2, &r, NULL, NULL));
  hk_value *want = hk_value_new_array(HK_F32, 4, (int64_t[]){B, OH, OW, O});
  for (int b = 0; b < B; b++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++)
        for (int o = 0; o < O; o++) {
          double s = 0;
          int g = o / (O / 2);
          for (int ky = 0; ky < KH; ky++)
            for (int kx = 0; kx < KW; kx++) {
              int iy = oy * 2 - 1 + ky, ix = ox + kx * 2;
              if (iy < 0 || iy >= H || ix >= W) continue;
              for (int z = 0; z < IFG; z++)
                s += hk_value_get_f64(args[0], ((b * H + iy) * W + ix) * F + g * IFG + z) *
                     hk_value_get_f64(args[1], ((ky * KW + kx) * IFG + z) * O + o);
            }
          hk_value_set_f64(want, ((b * OH + oy) * OW + ox) * O + o, s);
        }
  hk_compare_result cr;
  hk_value_compare(want, r, -1, -1, &cr);
  ck_assert_msg(cr.equal, "max abs error %g", cr.max_abs_error);
  hk_compare_result_free(&cr);
  hk_value_release(want);
  hk_value_release(r);
  hk_value_release(args[0]);
  hk_value_release(args[1]);
  hk_module_free(m);
}
END_TEST

START_TEST(test_convolution_fast_path_matches_reference) {
  conv_paths_agree("[2,5,6,4]", "[3,3,4,6]", "[2,3,3,6]",
                   "window={size=3x3 stride=2x2 pad=1_1x1_0}, dim_labels=b01f_01io->b01f");
  conv_paths_agree("[2,4,7,7]", "[6,2,2,3]", "[2,6,5,14]",
                   "window={size=2x3 pad=1_1x1_1 lhs_dilate=2x1 rhs_dilate=1x2 rhs_reversal=1x0},"
                   " dim_labels=bf01_oi01->bf10, feature_group_count=2");
  conv_paths_agree("[3,9,2]", "[2,2,5]", "[3,4,5]",
                   "window={size=2 stride=2 pad=0_0}, dim_labels=b0f_0io->b0f");
}
END_TEST

/* ---- reductions ------------------------------------------------------------------- */

START_TEST(test_reduce_variadic_argmax) {
  const char *mod =
      "HloModule m\n"
      "amax {\n v0 = f32[] parameter(0)\n i0 = s32[] parameter(1)\n v1 = f32[] parameter(2)\n"
      " i1 = s32[] parameter(3)\n gt = pred[] compare(v0, v1), direction=GE\n"
      " v = f32[] select(gt, v0, v1)\n i = s32[] select(gt, i0, i1)\n ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
      "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n x = f32[2,3] constant({{1, 7, 3}, {9, 2, 4}})\n ix = s32[2,3] iota(), iota_dimension=1\n"
      " ninf = f32[] constant(-inf)\n z = s32[] constant(0)\n"
      " am = (f32[2], s32[2]) reduce(x, ix, ninf, z), dimensions={1}, to_apply=amax\n"
      " zf = f32[] constant(0)\n s = f32[3] reduce(x, zf), dimensions={0}, to_apply=add\n"
      " all = f32[] reduce(x, zf), dimensions={0,1}, to_apply=add\n"
      " g0 = f32[2] get-tuple-element(am), index=0\n g1 = s32[2] get-tuple-element(am), index=1\n"
      " ROOT t = (f32[2], s32[2], f32[3], f32[]) tuple(g0, g1, s, all)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_vals(r->elems[0], 2, (double[]){7, 9});
  expect_ints(r->elems[1], 2, (int64_t[]){1, 0});
  expect_vals(r->elems[2], 3, (double[]){10, 9, 7});
  expect_vals(r->elems[3], 1, (double[]){26});
  hk_value_release(r);
}
END_TEST

START_TEST(test_reduce_window) {
  const char *mod =
      "HloModule m\n"
      "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "max {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] maximum(a, b)\n}\n"
      "ENTRY e {\n x = f32[4] constant({1, 2, 3, 4})\n z = f32[] constant(0)\n ninf = f32[] constant(-inf)\n"
      " a = f32[3] reduce-window(x, z), window={size=2}, to_apply=add\n"
      " b = f32[5] reduce-window(x, ninf), window={size=2 pad=1_1}, to_apply=max\n"
      " c = f32[2] reduce-window(x, z), window={size=2 stride=2}, to_apply=add\n"
      " ROOT t = (f32[3], f32[5], f32[2]) tuple(a, b, c)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_vals(r->elems[0], 3, (double[]){3, 5, 7});
  expect_vals(r->elems[1], 5, (double[]){1, 2, 3, 4, 4});
  expect_vals(r->elems[2], 2, (double[]){3, 7});
  hk_value_release(r);
}
END_TEST

START_TEST(test_select_and_scatter) {
  const char *mod =
      "HloModule m\n"
      "ge {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE\n}\n"
      "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n x = f32[6] constant({1, 5, 2, 7, 3, 3})\n s = f32[3] constant({10, 20, 30})\n"
      " z = f32[] constant(0)\n"
      " ROOT r = f32[6] select-and-scatter(x, s, z), window={size=2 stride=2}, select=ge, scatter=add\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_vals(r, 6, (double[]){0, 10, 0, 20, 30, 0});
  hk_value_release(r);
  /* overlapping windows accumulate */
  const char *mod2 =
      "HloModule m\n"
      "ge {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE\n}\n"
      "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
      "ENTRY e {\n x = f32[3] constant({1, 5, 2})\n s = f32[2] constant({10, 20})\n z = f32[] constant(0)\n"
      " ROOT r = f32[3] select-and-scatter(x, s, z), window={size=2}, select=ge, scatter=add\n}\n";
  r = eval_n(mod2, 0, NULL);
  expect_vals(r, 3, (double[]){0, 30, 0});
  hk_value_release(r);
}
END_TEST

/* ---- gather / scatter ------------------------------------------------------------ */

START_TEST(test_gather_clamps) {
  const char *mod =
      "HloModule m\nENTRY e {\n x = s32[3,3] iota(), iota_dimension=0\n y = s32[3,3] iota(), iota_dimension=1\n"
      " three = s32[] constant(3)\n b = s32[3,3] broadcast(three), dimensions={}\n m = s32[3,3] multiply(x, b)\n"
      " o = s32[3,3] add(m, y)\n idx = s32[3,1] constant({{1}, {5}, {-1}})\n"
      " g = s32[3,3] gather(o, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},"
      " index_vector_dim=1, slice_sizes={1,3}\n"
      " idx2 = s32[1,2] constant({{2, 2}})\n"
      " g2 = s32[1,2,2] gather(o, idx2), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1},"
      " index_vector_dim=1, slice_sizes={2,2}\n"
      " ROOT t = (s32[3,3], s32[1,2,2]) tuple(g, g2)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 9, (int64_t[]){3, 4, 5, 6, 7, 8, 0, 1, 2});
  expect_ints(r->elems[1], 4, (int64_t[]){4, 5, 7, 8});
  hk_value_release(r);
}
END_TEST

/* XLA's shape inference lets paired batching dims differ in size (the
 * fuzzer found one reading past the operand): the batch coordinate past
 * the operand's dim is clamped as a start index is. */
START_TEST(test_gather_clamps_batch_coordinates) {
  const char *mod =
      "HloModule m\nENTRY e {\n x = s32[2,3] iota(), iota_dimension=0\n y = s32[2,3] iota(), iota_dimension=1\n"
      " three = s32[] constant(3)\n b = s32[2,3] broadcast(three), dimensions={}\n m = s32[2,3] multiply(x, b)\n"
      " o = s32[2,3] add(m, y)\n idx = s32[3,1] constant({{0}, {1}, {2}})\n"
      " ROOT g = s32[3] gather(o, idx), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1},"
      " operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r, 3, (int64_t[]){0, 4, 5});
  hk_value_release(r);
}
END_TEST

START_TEST(test_scatter_skips_out_of_bounds) {
  const char *mod =
      "HloModule m\n"
      "add {\n a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT s = s32[] add(a, b)\n}\n"
      "set {\n a = s32[] parameter(0)\n ROOT b = s32[] parameter(1)\n}\n"
      "ENTRY e {\n z = s32[5] constant({0, 0, 0, 0, 0})\n idx = s32[4,1] constant({{1}, {4}, {1}, {7}})\n"
      " u = s32[4] constant({10, 20, 30, 40})\n"
      " a = s32[5] scatter(z, idx, u), update_window_dims={}, inserted_window_dims={0},"
      " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
      " idx2 = s32[2,1] constant({{4}, {1}})\n u2 = s32[2,2] constant({{1, 2}, {3, 4}})\n"
      " b = s32[5] scatter(z, idx2, u2), update_window_dims={1}, inserted_window_dims={},"
      " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=set\n"
      " ROOT t = (s32[5], s32[5]) tuple(a, b)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 5, (int64_t[]){0, 40, 0, 0, 20});
  expect_ints(r->elems[1], 5, (int64_t[]){0, 3, 4, 0, 0});
  hk_value_release(r);
}
END_TEST

/* ---- sort ------------------------------------------------------------------------- */

START_TEST(test_sort_stable_multi_operand) {
  const char *mod =
      "HloModule m\n"
      "lt {\n a = s32[] parameter(0)\n b = s32[] parameter(1)\n c = s32[] parameter(2)\n d = s32[] parameter(3)\n"
      " ROOT r = pred[] compare(a, b), direction=LT\n}\n"
      "ENTRY e {\n k = s32[5] constant({3, 1, 2, 1, 0})\n v = s32[5] iota(), iota_dimension=0\n"
      " ROOT s = (s32[5], s32[5]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 5, (int64_t[]){0, 1, 1, 2, 3});
  expect_ints(r->elems[1], 5, (int64_t[]){4, 1, 3, 2, 0});
  hk_value_release(r);
  /* generic comparator (descending through negate), along dim 1 of a matrix */
  const char *mod2 =
      "HloModule m\n"
      "desc {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n na = f32[] negate(a)\n nb = f32[] negate(b)\n"
      " ROOT r = pred[] compare(na, nb), direction=LT\n}\n"
      "ENTRY e {\n k = f32[2,3] constant({{1, 3, 2}, {-1, 5, 0}})\n"
      " ROOT s = f32[2,3] sort(k), dimensions={1}, to_apply=desc\n}\n";
  r = eval_n(mod2, 0, NULL);
  expect_vals(r, 6, (double[]){3, 2, 1, 5, 0, -1});
  hk_value_release(r);
  /* NaN under a total order sorts last */
  const char *mod3 =
      "HloModule m\n"
      "lt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
      " ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}\n"
      "ENTRY e {\n k = f32[4] constant({nan, 2, -inf, -0})\n"
      " ROOT s = f32[4] sort(k), dimensions={0}, to_apply=lt\n}\n";
  r = eval_n(mod3, 0, NULL);
  expect_vals(r, 4, (double[]){-INFINITY, 0, 2, NAN});
  ck_assert(signbit(hk_value_get_f64(r, 1)));
  hk_value_release(r);
}
END_TEST

/* A JAX-style total-order comparator (the float's bits as a signed key,
 * negatives flipped; ties by index) and a lexicographic TOTALORDER one run
 * as compiled scalar programs with per-type kernels: NaNs of either sign
 * and -0 must land where the total order puts them. */
START_TEST(test_sort_total_order_comparator_program) {
  const char *jax =
      "HloModule m\n"
      "gt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n i = s32[] parameter(2)\n j = s32[] parameter(3)\n"
      " ba = s32[] bitcast-convert(a)\n z = s32[] constant(0)\n na = pred[] compare(ba, z), direction=LT\n"
      " m = u32[] constant(2147483647)\n ua = u32[] bitcast-convert(a)\n sa = u32[] subtract(m, ua)\n"
      " ka0 = s32[] bitcast-convert(sa)\n ka = s32[] select(na, ka0, ba)\n"
      " bb = s32[] bitcast-convert(b)\n nb = pred[] compare(bb, z), direction=LT\n"
      " ub = u32[] bitcast-convert(b)\n sb = u32[] subtract(m, ub)\n kb0 = s32[] bitcast-convert(sb)\n"
      " kb = s32[] select(nb, kb0, bb)\n g = pred[] compare(ka, kb), direction=GT\n"
      " h = pred[] compare(kb, ka), direction=GT\n tie = pred[] compare(g, h), direction=EQ\n"
      " li = pred[] compare(i, j), direction=LT\n ROOT r = pred[] select(tie, li, g)\n}\n"
      "ENTRY e {\n k = f32[9] parameter(0)\n v = s32[9] iota(), iota_dimension=0\n"
      " ROOT s = (f32[9], s32[9]) sort(k, v), dimensions={0}, is_stable=true, to_apply=gt\n}\n";
  hk_value *a[1] = {vec(HK_F32, 9, (double[]){NAN, 1, -0.0, 0, -NAN, -INFINITY, 1, -1, INFINITY})};
  hk_value *r = eval_n(jax, 1, a);
  expect_ints(r->elems[1], 9, (int64_t[]){0, 8, 1, 6, 3, 2, 7, 5, 4});
  expect_vals(r->elems[0], 9, (double[]){NAN, INFINITY, 1, 1, 0, 0, -1, -INFINITY, NAN});
  ck_assert(!signbit(hk_value_get_f64(r->elems[0], 0)) && signbit(hk_value_get_f64(r->elems[0], 8)));
  ck_assert(!signbit(hk_value_get_f64(r->elems[0], 4)) && signbit(hk_value_get_f64(r->elems[0], 5)));
  hk_value_release(r);
  /* ascending by the total order, ties (equal bits) by index */
  const char *lex =
      "HloModule m\n"
      "lt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n i = s32[] parameter(2)\n j = s32[] parameter(3)\n"
      " eq = pred[] compare(a, b), direction=EQ, type=TOTALORDER\n"
      " lt0 = pred[] compare(a, b), direction=LT, type=TOTALORDER\n li = pred[] compare(i, j), direction=LT\n"
      " ROOT r = pred[] select(eq, li, lt0)\n}\n"
      "ENTRY e {\n k = f32[8] parameter(0)\n v = s32[8] iota(), iota_dimension=0\n"
      " ROOT s = (f32[8], s32[8]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt\n}\n";
  hk_value *b[1] = {vec(HK_F32, 8, (double[]){NAN, 0, -NAN, -0.0, 1, NAN, -0.0, -INFINITY})};
  r = eval_n(lex, 1, b);
  expect_ints(r->elems[1], 8, (int64_t[]){2, 7, 3, 6, 1, 4, 0, 5});
  ck_assert(signbit(hk_value_get_f64(r->elems[0], 0)) && signbit(hk_value_get_f64(r->elems[0], 2)));
  ck_assert(!signbit(hk_value_get_f64(r->elems[0], 4)));
  hk_value_release(r);
}
END_TEST

/* map(x, y) with a one-op body runs the scalar program's per-type kernel;
 * the same op on the arrays runs the elementwise code: every element of the
 * two must have the same bits, for each kernel type and op. */
static void expect_map_matches_elementwise(hk_prim p, const char *op, const char *res, const double *x,
                                           const double *y, int64_t n) {
  const char *t = hk_prim_name(p);
  char mod[1024];
  snprintf(mod, sizeof mod,
           "HloModule m\nf {\n a = %s[] parameter(0)\n b = %s[] parameter(1)\n ROOT r = %s[] %s\n}\n"
           "ENTRY e {\n x = %s[%lld] parameter(0)\n y = %s[%lld] parameter(1)\n"
           " m = %s[%lld] map(x, y), dimensions={0}, to_apply=f\n a = %s[%lld] copy(x)\n b = %s[%lld] copy(y)\n"
           " r = %s[%lld] %s\n ROOT t = (%s[%lld], %s[%lld]) tuple(m, r)\n}\n",
           t, t, res, op, t, (long long)n, t, (long long)n, res, (long long)n, t, (long long)n, t, (long long)n,
           res, (long long)n, op, res, (long long)n, res, (long long)n);
  hk_value *args[2] = {vec(p, n, x), vec(p, n, y)};
  hk_value *r = eval_n(mod, 2, args);
  ck_assert_int_eq(r->elems[0]->nbytes, r->elems[1]->nbytes);
  ck_assert_msg(!memcmp(r->elems[0]->data, r->elems[1]->data, (size_t)r->elems[0]->nbytes), "%s %s", t, op);
  hk_value_release(r);
}

START_TEST(test_scalar_program_kernels_match_elementwise) {
  static const char *arith[] = {"add(a, b)", "subtract(a, b)", "multiply(a, b)", "divide(a, b)",
                                "remainder(a, b)", "maximum(a, b)", "minimum(a, b)", "power(a, b)",
                                "negate(a)", "abs(a)", "sign(a)", "clamp(b, a, b)"};
  static const char *ints[] = {"and(a, b)", "or(a, b)", "xor(a, b)", "shift-left(a, b)",
                               "shift-right-arithmetic(a, b)", "shift-right-logical(a, b)", "not(a)",
                               "popcnt(a)", "count-leading-zeros(a)"};
  static const char *floats[] = {"atan2(a, b)", "floor(a)", "sqrt(a)", "exponential(a)",
                                 "round-nearest-even(a)"};
  static const char *dirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  const double xi[8] = {-128, 127, 0, -1, 5, 3, 64, -7}, yi[8] = {-1, 2, 0, 3, -5, 0, 7, 9};
  const double xf[8] = {NAN, 1.5, -0.0, 0, -INFINITY, 3, -2.5, 1e30}, yf[8] = {1, NAN, 0, -0.0, 2, -INFINITY, 0.5, 1e-30};
  const hk_prim types[] = {HK_S8, HK_S16, HK_S32, HK_S64, HK_U8, HK_U16, HK_U32, HK_U64, HK_F32, HK_F64};
  char op[96];
  for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
    hk_prim p = types[k];
    bool fl = hk_prim_is_float(p);
    const double *x = fl ? xf : xi, *y = fl ? yf : yi;
    for (size_t j = 0; j < sizeof arith / sizeof *arith; j++)
      expect_map_matches_elementwise(p, arith[j], hk_prim_name(p), x, y, 8);
    for (size_t j = 0; j < (fl ? sizeof floats / sizeof *floats : sizeof ints / sizeof *ints); j++)
      expect_map_matches_elementwise(p, fl ? floats[j] : ints[j], hk_prim_name(p), x, y, 8);
    for (int d = 0; d < 6; d++)
      for (int total = 0; total <= 1; total++) {
        snprintf(op, sizeof op, "compare(a, b), direction=%s%s", dirs[d],
                 total ? (fl ? ", type=TOTALORDER" : hk_prim_is_signed_int(p) ? ", type=UNSIGNED" : "") : "");
        expect_map_matches_elementwise(p, op, "pred", x, y, 8);
      }
  }
  const double xp[4] = {0, 1, 0, 1}, yp[4] = {0, 0, 1, 1};
  static const char *preds[] = {"and(a, b)", "or(a, b)", "xor(a, b)", "not(a)", "compare(a, b), direction=LT",
                                "compare(a, b), direction=EQ", "compare(a, b), direction=GE"};
  for (size_t j = 0; j < sizeof preds / sizeof *preds; j++)
    expect_map_matches_elementwise(HK_PRED, preds[j], "pred", xp, yp, 4);
}
END_TEST

/* Comparators, map bodies and select-and-scatter selectors run as compiled
 * scalar programs: convert, bitcast-convert, unsigned arithmetic, select,
 * clamp and constants must give the evaluator's elementwise answers. */
START_TEST(test_scalar_programs) {
  /* TopK's comparator: descending by the float's bits, so 0 sorts above -0 */
  const char *mod =
      "HloModule m\n"
      "gt {\n a = bf16[] parameter(0)\n b = bf16[] parameter(1)\n i = s32[] parameter(2)\n j = s32[] parameter(3)\n"
      " fa = f32[] convert(a)\n ba = s32[] bitcast-convert(fa)\n z = s32[] constant(0)\n"
      " na = pred[] compare(ba, z), direction=LT\n m = u32[] constant(2147483647)\n"
      " ua = u32[] bitcast-convert(fa)\n sa = u32[] subtract(m, ua)\n ka0 = s32[] bitcast-convert(sa)\n"
      " ka = s32[] select(na, ka0, ba)\n"
      " fb = f32[] convert(b)\n bb = s32[] bitcast-convert(fb)\n nb = pred[] compare(bb, z), direction=LT\n"
      " ub = u32[] bitcast-convert(fb)\n sb = u32[] subtract(m, ub)\n kb0 = s32[] bitcast-convert(sb)\n"
      " kb = s32[] select(nb, kb0, bb)\n ROOT r = pred[] compare(ka, kb), direction=GT\n}\n"
      "ENTRY e {\n k = bf16[6] constant({0.5, -1, 2, -0, 0, 3})\n v = s32[6] iota(), iota_dimension=0\n"
      " ROOT s = (bf16[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=gt\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_vals(r->elems[0], 6, (double[]){3, 2, 0.5, 0, 0, -1});
  expect_ints(r->elems[1], 6, (int64_t[]){5, 2, 0, 4, 3, 1});
  hk_value_release(r);
  /* a key comparator (compare(-x, -y)) on a row with a NaN falls back to
   * calling the comparator: NaN compares false both ways, so the stable
   * sort keeps this row as it is */
  const char *mod1 =
      "HloModule m\n"
      "desc {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n na = f32[] negate(a)\n nb = f32[] negate(b)\n"
      " ROOT r = pred[] compare(na, nb), direction=LT\n}\n"
      "ENTRY e {\n k = f32[2,3] constant({{1, nan, 3}, {1, 2, 3}})\n"
      " ROOT s = f32[2,3] sort(k), dimensions={1}, to_apply=desc\n}\n";
  r = eval_n(mod1, 0, NULL);
  expect_vals(r, 6, (double[]){1, NAN, 3, 3, 2, 1});
  hk_value_release(r);
  /* map: clamp(-2, x * 3, 5) for x < 0, else x - 1, in s8 (wrapping) */
  const char *mod2 =
      "HloModule m\n"
      "f {\n x = s8[] parameter(0)\n z = s8[] constant(0)\n lo = s8[] constant(-2)\n hi = s8[] constant(5)\n"
      " t = s8[] constant(3)\n one = s8[] constant(1)\n neg = pred[] compare(x, z), direction=LT\n"
      " x3 = s8[] multiply(x, t)\n c = s8[] clamp(lo, x3, hi)\n d = s8[] subtract(x, one)\n"
      " ROOT r = s8[] select(neg, c, d)\n}\n"
      "ENTRY e {\n k = s8[5] constant({-100, -1, 0, 7, -128})\n"
      " ROOT m = s8[5] map(k), dimensions={0}, to_apply=f\n}\n";
  r = eval_n(mod2, 0, NULL);
  /* -100*3 wraps to -44 -> -2; -1*3 = -3 -> -2; 0 -> -1; 7 -> 6; -128*3 wraps to -128 -> -2 */
  expect_ints(r, 5, (int64_t[]){-2, -2, -1, 6, -2});
  hk_value_release(r);
  /* a variadic reducer with a tuple root: (max, index of the max, first on ties) */
  const char *mod3 =
      "HloModule m\n"
      "amax {\n v0 = f32[] parameter(0)\n i0 = s32[] parameter(1)\n v1 = f32[] parameter(2)\n i1 = s32[] parameter(3)\n"
      " gt = pred[] compare(v1, v0), direction=GT\n eq = pred[] compare(v1, v0), direction=EQ\n"
      " lt = pred[] compare(i1, i0), direction=LT\n tie = pred[] and(eq, lt)\n take = pred[] or(gt, tie)\n"
      " v = f32[] select(take, v1, v0)\n i = s32[] select(take, i1, i0)\n ROOT t = (f32[], s32[]) tuple(v, i)\n}\n"
      "ENTRY e {\n x = f32[2,4] constant({{1, 7, 7, 2}, {-3, -1, -2, -1}})\n n = s32[2,4] iota(), iota_dimension=1\n"
      " a = f32[] constant(-inf)\n b = s32[] constant(-1)\n"
      " ROOT r = (f32[2], s32[2]) reduce(x, n, a, b), dimensions={1}, to_apply=amax\n}\n";
  r = eval_n(mod3, 0, NULL);
  expect_vals(r->elems[0], 2, (double[]){7, -1});
  expect_ints(r->elems[1], 2, (int64_t[]){1, 1});
  hk_value_release(r);
}
END_TEST

/* topk over long rows (the one-pass selection) and short ones (a sort):
 * best first, ties by lower index. */
START_TEST(test_topk_selection) {
  /* row of 200: x[i] = i % 7 (ties), -5 at 150; k = 3 largest -> 6 at 6, 13, 20 */
  const char *mod =
      "HloModule m\nENTRY e {\n i = s32[2,200] iota(), iota_dimension=1\n"
      " seven = s32[] constant(7)\n sv = s32[2,200] broadcast(seven), dimensions={}\n"
      " r = s32[2,200] remainder(i, sv)\n x = f32[2,200] convert(r)\n"
      " ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_vals(r->elems[0], 6, (double[]){6, 6, 6, 6, 6, 6});
  expect_ints(r->elems[1], 6, (int64_t[]){6, 13, 20, 6, 13, 20});
  hk_value_release(r);
  const char *mod2 =
      "HloModule m\nENTRY e {\n i = s32[200] iota(), iota_dimension=0\n seven = s32[] constant(7)\n"
      " sv = s32[200] broadcast(seven), dimensions={}\n r = s32[200] remainder(i, sv)\n"
      " x = f32[200] convert(r)\n ROOT t = (f32[2], s32[2]) topk(x), k=2, largest=false\n}\n";
  r = eval_n(mod2, 0, NULL);
  expect_vals(r->elems[0], 2, (double[]){0, 0});
  expect_ints(r->elems[1], 2, (int64_t[]){0, 7});
  hk_value_release(r);
}
END_TEST

/* Cholesky: the classic 3x3 factor, the upper form its transpose, the
 * unread triangle ignored, and a matrix that is not positive definite all
 * NaN (XLA's expander); complex: A = L L^H. */
START_TEST(test_cholesky_known_answers) {
  hk_value *r = eval_n(
      "HloModule m\nENTRY e {\n"
      " a = f64[2,3,3] constant({{{4, 99, 99}, {12, 37, 99}, {-16, -43, 98}}, {{1, 0, 0}, {0, -1, 0}, {0, 0, 1}}})\n"
      " at = f64[2,3,3] transpose(a), dimensions={0,2,1}\n"
      " l = f64[2,3,3] cholesky(a), lower=true\n u = f64[2,3,3] cholesky(at), lower=false\n"
      " c = c64[2,2] constant({{(4,0), (0,0)}, {(2,2), (6,0)}})\n"
      " lc = c64[2,2] cholesky(c), lower=true\n"
      " ROOT t = (f64[2,3,3], f64[2,3,3], c64[2,2]) tuple(l, u, lc)\n}\n", 0, NULL);
  double n = NAN;
  double want_l[18] = {2, 0, 0, 6, 1, 0, -8, 5, 3, n, n, n, n, n, n, n, n, n};
  double want_u[18] = {2, 6, -8, 0, 1, 5, 0, 0, 3, n, n, n, n, n, n, n, n, n};
  expect_vals(r->elems[0], 18, want_l);
  expect_vals(r->elems[1], 18, want_u);
  /* L = [[2, 0], [1+i, 2]]: (1+i)(1-i) + 4 = 6 */
  double want_re[4] = {2, 0, 1, 2}, want_im[4] = {0, 0, 1, 0};
  for (int k = 0; k < 4; k++) {
    double re, im;
    hk_value_get_c(r->elems[2], k, &re, &im);
    ck_assert_msg(fabs(re - want_re[k]) < 1e-6 && fabs(im - want_im[k]) < 1e-6, "lc[%d] = (%g,%g)", k, re, im);
  }
  hk_value_release(r);
}
END_TEST

/* Triangular solve in every form: op(a) x = b (left) or x op(a) = b
 * (right) for a's lower or upper triangle (the other one holds garbage
 * that must not be read), op = none / transpose / adjoint, with and
 * without a unit diagonal; checked by multiplying back. */
START_TEST(test_triangular_solve_every_form) {
  static const double A[9] = {2, 7, -9, 1, 3, 5, -1, 4, 5};   /* both triangles used by some form */
  static const double B[6] = {1, 2, 3, 4, 5, 6};
  static const char *const ops[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  for (int form = 0; form < 24; form++) {
    bool left = form & 1, lower = form & 2, unit = form & 4;
    int op = form / 8;
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule m\nENTRY e {\n a = f64[3,3] parameter(0)\n b = f64[%s] parameter(1)\n"
             " ROOT x = f64[%s] triangular-solve(a, b), left_side=%s, lower=%s, unit_diagonal=%s, transpose_a=%s\n}\n",
             left ? "3,2" : "2,3", left ? "3,2" : "2,3", left ? "true" : "false", lower ? "true" : "false",
             unit ? "true" : "false", ops[op]);
    int64_t ad[2] = {3, 3}, bd[2] = {left ? 3 : 2, left ? 2 : 3};
    hk_value *args[2] = {arr(HK_F64, 2, ad, A), arr(HK_F64, 2, bd, B)};
    hk_value *x = eval_n(text, 2, args);
    /* T = op(the triangle of A), then T x or x T */
    double T[9];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        int si = op ? j : i, sj = op ? i : j;   /* element of A that T(i,j) is */
        bool in = lower ? si >= sj : si <= sj;
        T[i * 3 + j] = si == sj && unit ? 1 : in ? A[si * 3 + sj] : 0;
      }
    for (int r = 0; r < (left ? 3 : 2); r++)
      for (int c = 0; c < (left ? 2 : 3); c++) {
        double acc = 0;
        for (int k = 0; k < 3; k++)
          acc += left ? T[r * 3 + k] * hk_value_get_f64(x, k * 2 + c)
                      : hk_value_get_f64(x, r * 3 + k) * T[k * 3 + c];
        int cols = left ? 2 : 3;
        ck_assert_msg(fabs(acc - B[r * cols + c]) < 1e-9, "form %d: (%d,%d) = %g, want %g", form, r, c, acc,
                      B[r * cols + c]);
      }
    hk_value_release(x);
  }
}
END_TEST

/* Ragged dot in its three forms: rows grouped onto their own rhs (rows
 * past the sizes' sum zero), a contracting dim grouped into a leading
 * result dim, a batch dim grouped (batches in no group zero); ints too. */
START_TEST(test_ragged_dot_forms) {
  hk_value *r = eval_n(
      "HloModule m\nENTRY e {\n"
      " l = f32[5,2] constant({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}})\n"
      " r = f32[3,2,2] constant({{{1, 0}, {0, 1}}, {{2, 0}, {0, 2}}, {{0, 1}, {1, 0}}})\n"
      " g = s32[3] constant({1, 2, 1})\n"
      " a = f32[5,2] ragged-dot(l, r, g), lhs_contracting_dims={1}, rhs_contracting_dims={1},"
      " lhs_ragged_dims={0}, rhs_group_dims={0}\n"
      " r2 = f32[2,3] constant({{1, 1, 1}, {2, 2, 2}})\n g2 = s32[2] constant({1, 1})\n"
      " b = f32[2,5,3] ragged-dot(l, r2, g2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}\n"
      " lb = s32[3,1,2] constant({{{1, 2}}, {{3, 4}}, {{5, 6}}})\n rb = s32[3,2,1] constant({{{1}, {1}}, {{2}, {2}}, {{3}, {3}}})\n"
      " g3 = s64[2] constant({1, 1})\n"
      " c = s32[3,1,1] ragged-dot(lb, rb, g3), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},"
      " rhs_contracting_dims={1}, lhs_ragged_dims={0}\n"
      " ROOT t = (f32[5,2], f32[2,5,3], s32[3,1,1]) tuple(a, b, c)\n}\n", 0, NULL);
  expect_vals(r->elems[0], 10, (double[]){1, 2, 6, 8, 10, 12, 8, 7, 0, 0});
  double want_b[30];
  for (int row = 0; row < 5; row++)
    for (int j = 0; j < 3; j++) {
      want_b[row * 3 + j] = 2 * row + 1;                /* group 0: column 0 of l times 1 */
      want_b[15 + row * 3 + j] = 2 * (2 * row + 2);     /* group 1: column 1 times 2 */
    }
  expect_vals(r->elems[1], 30, want_b);
  expect_ints(r->elems[2], 3, (int64_t[]){3, 14, 0});
  hk_value_release(r);
}
END_TEST

/* Group sizes whose running sum passes INT64_MAX saturate: every row is
 * in the first group (UBSan flags the overflow this once was). */
START_TEST(test_ragged_dot_huge_group_sizes) {
  hk_value *r = eval_n(
      "HloModule m\nENTRY e {\n"
      " l = f32[2,2] constant({{1, 2}, {3, 4}})\n"
      " r = f32[2,2,1] constant({{{1}, {1}}, {{5}, {5}}})\n"
      " g = s64[2] constant({9223372036854775807, 9223372036854775807})\n"
      " ROOT a = f32[2,1] ragged-dot(l, r, g), lhs_contracting_dims={1}, rhs_contracting_dims={1},"
      " lhs_ragged_dims={0}, rhs_group_dims={0}\n}\n", 0, NULL);
  expect_vals(r, 2, (double[]){3, 7});
  hk_value_release(r);
}
END_TEST

/* The group of position v given one row of group sizes (-1: past them). */
static int rd_group(const double *sizes, int groups, int v) {
  for (int g = 0, start = 0; g < groups; g++) {
    int size = sizes[g] > 0 ? (int)sizes[g] : 0;
    if (v >= start && v < start + size) return g;
    start += size;
  }
  return -1;
}

/* Fills n values with small distinct integers (exact in f32 sums). */
static void rd_fill(double *v, int n, int seed) {
  for (int i = 0; i < n; i++) v[i] = (double)((i * 7 + seed) % 11) - 5;
}

/* Ragged non-contracting with group sizes [b, x, g]: lhs [b=2, x=2, m=3,
 * k=2], rhs [g=2, b, k, n=2]; each (b, x) cuts its m rows its own way
 * (a zero size, rows past the sum).  Reference: a plain loop. */
START_TEST(test_ragged_dot_group_rows_non_contracting) {
  double l[24], r[16], gs[8] = {1, 2, 0, 3, 2, 0, 1, 1}, want[24];
  rd_fill(l, 24, 1);
  rd_fill(r, 16, 4);
  for (int b = 0; b < 2; b++)
    for (int x = 0; x < 2; x++)
      for (int m = 0; m < 3; m++)
        for (int n = 0; n < 2; n++) {
          int g = rd_group(gs + (b * 2 + x) * 2, 2, m);
          double acc = 0;
          for (int k = 0; g >= 0 && k < 2; k++) acc += l[((b * 2 + x) * 3 + m) * 2 + k] * r[((g * 2 + b) * 2 + k) * 2 + n];
          want[((b * 2 + x) * 3 + m) * 2 + n] = acc;
        }
  hk_value *a[3] = {arr(HK_F32, 4, (int64_t[]){2, 2, 3, 2}, l), arr(HK_F32, 4, (int64_t[]){2, 2, 2, 2}, r),
                    arr(HK_S32, 3, (int64_t[]){2, 2, 2}, gs)};
  hk_value *v = eval_n("HloModule m\nENTRY e {\n l = f32[2,2,3,2] parameter(0)\n r = f32[2,2,2,2] parameter(1)\n"
                       " g = s32[2,2,2] parameter(2)\n"
                       " ROOT d = f32[2,2,3,2] ragged-dot(l, r, g), lhs_batch_dims={0}, rhs_batch_dims={1},"
                       " lhs_contracting_dims={3}, rhs_contracting_dims={2}, lhs_ragged_dims={2}, rhs_group_dims={0}\n}\n",
                       3, a);
  expect_vals(v, 24, want);
  hk_value_release(v);
}
END_TEST

/* Ragged contracting with group sizes [b, x, g], x the contracting dim
 * listed before the ragged one (lhs_contracting_dims={3,2}, ragged 2):
 * lhs [b=3, m=2, kr=4, kx=2], rhs [b, kx, kr, n=2] -> [g=2, b, m, n]. */
START_TEST(test_ragged_dot_group_rows_contracting) {
  double l[48], r[48], want[24];
  double gs[12] = {1, 3, 2, 2, 0, 4, 4, 0, 3, 0, 1, 1};
  rd_fill(l, 48, 2);
  rd_fill(r, 48, 5);
  for (int g = 0; g < 2; g++)
    for (int b = 0; b < 3; b++)
      for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
          double acc = 0;
          for (int kx = 0; kx < 2; kx++)
            for (int kr = 0; kr < 4; kr++)
              if (rd_group(gs + (b * 2 + kx) * 2, 2, kr) == g)
                acc += l[((b * 2 + m) * 4 + kr) * 2 + kx] * r[((b * 2 + kx) * 4 + kr) * 2 + n];
          want[((g * 3 + b) * 2 + m) * 2 + n] = acc;
        }
  hk_value *a[3] = {arr(HK_F32, 4, (int64_t[]){3, 2, 4, 2}, l), arr(HK_F32, 4, (int64_t[]){3, 2, 4, 2}, r),
                    arr(HK_S64, 3, (int64_t[]){3, 2, 2}, gs)};
  hk_value *v = eval_n("HloModule m\nENTRY e {\n l = f32[3,2,4,2] parameter(0)\n r = f32[3,2,4,2] parameter(1)\n"
                       " g = s64[3,2,2] parameter(2)\n"
                       " ROOT d = f32[2,3,2,2] ragged-dot(l, r, g), lhs_batch_dims={0}, rhs_batch_dims={0},"
                       " lhs_contracting_dims={3,2}, rhs_contracting_dims={1,2}, lhs_ragged_dims={2}\n}\n",
                       3, a);
  expect_vals(v, 24, want);
  hk_value_release(v);
}
END_TEST

/* Ragged batch with group sizes [b0, g] (the batch dims listed before the
 * ragged one): lhs [b0=2, b1=3, m=2, k=2], ragged b1; b0 = 0's sizes
 * leave b1 = 2 in no group (zero), b0 = 1's cover all of b1. */
START_TEST(test_ragged_dot_group_rows_batch) {
  double l[24], r[24], gs[4] = {1, 1, 2, 1}, want[24];
  rd_fill(l, 24, 3);
  rd_fill(r, 24, 6);
  for (int b0 = 0; b0 < 2; b0++)
    for (int b1 = 0; b1 < 3; b1++)
      for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
          double acc = 0;
          for (int k = 0; rd_group(gs + b0 * 2, 2, b1) >= 0 && k < 2; k++)
            acc += l[((b0 * 3 + b1) * 2 + m) * 2 + k] * r[((b0 * 3 + b1) * 2 + k) * 2 + n];
          want[((b0 * 3 + b1) * 2 + m) * 2 + n] = acc;
        }
  hk_value *a[3] = {arr(HK_F32, 4, (int64_t[]){2, 3, 2, 2}, l), arr(HK_F32, 4, (int64_t[]){2, 3, 2, 2}, r),
                    arr(HK_S32, 2, (int64_t[]){2, 2}, gs)};
  hk_value *v = eval_n("HloModule m\nENTRY e {\n l = f32[2,3,2,2] parameter(0)\n r = f32[2,3,2,2] parameter(1)\n"
                       " g = s32[2,2] parameter(2)\n"
                       " ROOT d = f32[2,3,2,2] ragged-dot(l, r, g), lhs_batch_dims={0,1}, rhs_batch_dims={0,1},"
                       " lhs_contracting_dims={3}, rhs_contracting_dims={2}, lhs_ragged_dims={1}\n}\n",
                       3, a);
  expect_vals(v, 24, want);
  for (int i = 8; i < 12; i++) ck_assert(want[i] == 0);   /* (b0 0, b1 2) is in no group */
  hk_value_release(v);
}
END_TEST

/* group_sizes whose leading dims are not XLA's prefix ([b, x, g] =
 * [2, 2, g] here, not [3, g]) are an error, not a read past the sizes. */
START_TEST(test_ragged_dot_group_rows_bad_shape) {
  hk_status *st = eval_status("HloModule m\nENTRY e {\n z = f32[] constant(1)\n i = s32[] constant(1)\n"
                              " l = f32[2,2,3,2] broadcast(z), dimensions={}\n r = f32[2,2,2,2] broadcast(z), dimensions={}\n"
                              " g = s32[3,2] broadcast(i), dimensions={}\n"
                              " ROOT d = f32[2,2,3,2] ragged-dot(l, r, g), lhs_batch_dims={0}, rhs_batch_dims={1},"
                              " lhs_contracting_dims={3}, rhs_contracting_dims={2}, lhs_ragged_dims={2}, rhs_group_dims={0}\n}\n");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "group_sizes"), "%s", st->message);
  hk_status_free(st);
}
END_TEST

START_TEST(test_fft_known_answer_and_round_trips) {
  const char *mod =
      "HloModule m\nENTRY e {\n c = c64[6] constant({(0,0), (1,1), (2,2), (3,3), (4,4), (5,5)})\n"
      " f = c64[6] fft(c), fft_type=FFT, fft_length={6}\n i = c64[6] fft(f), fft_type=IFFT, fft_length={6}\n"
      " r = f32[2,4] constant({{1, 2, 3, 4}, {0, -1, 5, 2}})\n"
      " rf = c64[2,3] fft(r), fft_type=RFFT, fft_length={2,4}\n"
      " ir = f32[2,4] fft(rf), fft_type=IRFFT, fft_length={2,4}\n"
      " ROOT t = (c64[6], c64[6], c64[2,3], f32[2,4]) tuple(f, i, rf, ir)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  double re, im;
  hk_value_get_c(r->elems[0], 0, &re, &im);
  ck_assert(re == 15 && im == 15);
  hk_value_get_c(r->elems[0], 3, &re, &im);
  ck_assert(fabs(re + 3) < 1e-5 && fabs(im + 3) < 1e-5);
  for (int k = 0; k < 6; k++) {
    hk_value_get_c(r->elems[1], k, &re, &im);
    ck_assert_msg(fabs(re - k) < 1e-5 && fabs(im - k) < 1e-5, "ifft(fft(x))[%d] = (%g,%g)", k, re, im);
  }
  hk_value_get_c(r->elems[2], 0, &re, &im);   /* DC term: sum of all elements */
  ck_assert(fabs(re - 16) < 1e-5 && fabs(im) < 1e-5);
  double want[8] = {1, 2, 3, 4, 0, -1, 5, 2};
  for (int k = 0; k < 8; k++) ck_assert(fabs(hk_value_get_f64(r->elems[3], k) - want[k]) < 1e-5);
  hk_value_release(r);
}
END_TEST

/* ---- control flow ------------------------------------------------------------------ */

START_TEST(test_while_conditional_call) {
  const char *mod =
      "HloModule m\n"
      "cond {\n p = (s32[], s32[]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n"
      " n = s32[] constant(10)\n ROOT c = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n p = (s32[], s32[]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n"
      " s = s32[] get-tuple-element(p), index=1\n one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
      " s1 = s32[] add(s, i)\n ROOT t = (s32[], s32[]) tuple(i1, s1)\n}\n"
      "b0 {\n x = s32[] parameter(0)\n ROOT y = s32[] negate(x)\n}\n"
      "b1 {\n x = s32[] parameter(0)\n ROOT y = s32[] multiply(x, x)\n}\n"
      "sq {\n x = s32[] parameter(0)\n ROOT y = s32[] add(x, x)\n}\n"
      "ENTRY e {\n z = s32[] constant(0)\n init = (s32[], s32[]) tuple(z, z)\n"
      " w = (s32[], s32[]) while(init), condition=cond, body=body\n s = s32[] get-tuple-element(w), index=1\n"
      " k = s32[] constant(7)\n c1 = s32[] conditional(k, s, s), branch_computations={b0, b1}\n"
      " t = pred[] constant(true)\n c2 = s32[] conditional(t, s, s), true_computation=b0, false_computation=b1\n"
      " c3 = s32[] call(s), to_apply=sq\n ROOT r = (s32[], s32[], s32[], s32[]) tuple(s, c1, c2, c3)\n}\n";
  hk_value *r = eval_n(mod, 0, NULL);
  expect_ints(r->elems[0], 1, (int64_t[]){45});
  expect_ints(r->elems[1], 1, (int64_t[]){2025});   /* index 7 out of range: last branch */
  expect_ints(r->elems[2], 1, (int64_t[]){-45});
  expect_ints(r->elems[3], 1, (int64_t[]){90});
  hk_value_release(r);
}
END_TEST

START_TEST(test_unsupported_op_is_an_error) {
  hk_status *st = eval_status("HloModule m\nENTRY e {\n a = f32[2] constant({1, 2})\n"
                              " ROOT c = f32[2] custom-call(a), custom_call_target=\"MyKernel\"\n}\n");
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_UNIMPLEMENTED);
  ck_assert_msg(strstr(st->message, "c (custom-call)") && strstr(st->message, "MyKernel"), "%s", st->message);
  hk_status_free(st);
}
END_TEST

START_TEST(test_identity_custom_calls_and_rng_determinism) {
  const char *mod =
      "HloModule m\nENTRY e {\n a = f32[2] constant({1, 2})\n"
      " s = f32[2] custom-call(a), custom_call_target=\"Sharding\", sharding={replicated}\n"
      " lo = f32[] constant(0)\n hi = f32[] constant(1)\n"
      " r = f32[64] rng(lo, hi), distribution=rng_uniform\n ROOT t = (f32[2], f32[64]) tuple(s, r)\n}\n";
  hk_value *r1 = eval_n(mod, 0, NULL), *r2 = eval_n(mod, 0, NULL);
  expect_vals(r1->elems[0], 2, (double[]){1, 2});
  for (int i = 0; i < 64; i++) {
    double x = hk_value_get_f64(r1->elems[1], i);
    ck_assert(x >= 0 && x < 1);
    ck_assert(x == hk_value_get_f64(r2->elems[1], i));
  }
  hk_value_release(r1);
  hk_value_release(r2);
}
END_TEST

/* Unknown custom calls as opaque pure functions (opt-in): the same operands
 * give the same bits, other operands or another target other bits. */
static hk_value *opaque_eval(const char *target, const char *operand) {
  char mod[512];
  snprintf(mod, sizeof mod,
           "HloModule m\nENTRY e {\n a = s32[2,3] constant(%s)\n"
           " ROOT c = (f32[4], s32[2,3]) custom-call(a), custom_call_target=\"%s\"\n}\n", operand, target);
  hk_module *m = parse(mod);
  hk_eval_options o = {.opaque_custom_calls = true};
  hk_value *r = NULL;
  ck_assert_ok(hk_eval_module(m, NULL, 0, &r, &o, NULL));
  hk_module_free(m);
  return r;
}

START_TEST(test_compare_allows_reassociation_slack) {
  /* f32 [1000, 0]: an element that cancels to zero may be off by a few
   * ulps of the leaf's scale (rms ~707: 16 ulps ~1.3e-3), not more. */
  int64_t two = 2;
  hk_value *e = hk_value_new_array(HK_F32, 1, &two), *a = hk_value_new_array(HK_F32, 1, &two);
  hk_value_set_f64(e, 0, 1000);
  hk_value_set_f64(a, 0, 1000);
  hk_value_set_f64(a, 1, 1e-3);
  hk_compare_result r;
  hk_value_compare(e, a, -1, -1, &r);
  ck_assert(r.equal);
  hk_compare_result_free(&r);
  hk_value_set_f64(a, 1, 1e-2);
  hk_value_compare(e, a, -1, -1, &r);
  ck_assert(!r.equal);
  hk_compare_result_free(&r);
  /* An explicit atol means exactly that. */
  hk_value_set_f64(a, 1, 1e-3);
  hk_value_compare(e, a, 1e-5, -1, &r);
  ck_assert(!r.equal);
  hk_compare_result_free(&r);
  hk_value_release(e);
  hk_value_release(a);
}
END_TEST

START_TEST(test_opaque_custom_calls) {
  const char *ones = "{{1, 1, 1}, {1, 1, 1}}", *other = "{{1, 1, 1}, {1, 1, 2}}";
  hk_value *a = opaque_eval("SomeCustomCall", ones), *b = opaque_eval("SomeCustomCall", ones);
  hk_value *c = opaque_eval("SomeCustomCall", other), *e = opaque_eval("OtherCall", ones);
  hk_compare_result r;
  hk_value_compare(a, b, 0, 0, &r);
  ck_assert(r.equal);
  hk_compare_result_free(&r);
  hk_value_compare(a, c, 0, 0, &r);
  ck_assert(!r.equal);
  hk_compare_result_free(&r);
  hk_value_compare(a, e, 0, 0, &r);
  ck_assert(!r.equal);
  hk_compare_result_free(&r);
  for (int i = 0; i < 4; i++) {
    double x = hk_value_get_f64(a->elems[0], i);
    ck_assert(x >= -1 && x <= 1);
  }
  hk_value_release(a);
  hk_value_release(b);
  hk_value_release(c);
  hk_value_release(e);
}
END_TEST

/* ---- collectives -------------------------------------------------------------------- */

/* Runs a parameterless module on parts x reps devices; results[d]. */
static void run_spmd(const char *text, int64_t parts, int64_t reps, hk_value **res) {
  hk_module *m = parse(text);
  int64_t n = parts * reps;
  hk_value *const *args[64] = {0};
  ck_assert_ok(hk_eval_spmd(m, parts, reps, (hk_value *const *const *)args, 0, res, NULL, NULL));
  (void)n;
  hk_module_free(m);
}

static void release_all(hk_value **v, int64_t n) {
  for (int64_t i = 0; i < n; i++) hk_value_release(v[i]);
}

#define ADD_COMP "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
#define PID_F32 " p = u32[] partition-id()\n f = f32[] convert(p)\n v = f32[1] reshape(f)\n"

static void all_reduce_case(int64_t n, const char *groups, const double *want) {
  char mod[1024];
  snprintf(mod, sizeof mod,
           "HloModule m\n" ADD_COMP "ENTRY e {\n" PID_F32
           " ROOT r = f32[1] all-reduce(v), channel_id=1, replica_groups=%s, use_global_device_ids=true,"
           " to_apply=add\n}\n", groups);
  hk_value *res[8];
  run_spmd(mod, n, 1, res);
  for (int64_t d = 0; d < n; d++)
    ck_assert_msg(hk_value_get_f64(res[d], 0) == want[d], "%s device %lld: %g", groups, (long long)d,
                  hk_value_get_f64(res[d], 0));
  release_all(res, n);
}

/* A global module with manual regions on 4 devices: each device adds its
 * partition id to its tile of p (full-to-shard under [2,2]); the tiles are
 * reassembled in two steps, through manual groups of 2 (columns) and then
 * into the whole [4,4] value, which every device ends up holding. */
START_TEST(test_manual_regions) {
  const char *mod =
      "HloModule m\nENTRY e {\n"
      " p = s32[4,4] constant({{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}),"
      " sharding={devices=[2,2]<=[4]}\n"
      " m0 = s32[2,2] custom-call(p), custom_call_target=\"SPMDFullToShardShape\", sharding={manual}\n"
      " id = u32[] partition-id(), sharding={manual}\n ids = s32[] convert(id), sharding={manual}\n"
      " b = s32[2,2] broadcast(ids), dimensions={}, sharding={manual}\n"
      " a = s32[2,2] add(m0, b), sharding={manual}\n"
      " m1 = s32[4,2] custom-call(a), custom_call_target=\"SPMDShardToFullShape\","
      " sharding={devices=[2,1,2]<=[4] last_tile_dims={manual}}\n"
      " ROOT f = s32[4,4] custom-call(m1), custom_call_target=\"SPMDShardToFullShape\","
      " sharding={devices=[2,2]<=[4]}\n}\n";
  hk_value *res[4];
  run_spmd(mod, 4, 1, res);
  int64_t want[16];
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 4; c++) want[r * 4 + c] = 4 * r + c + (r / 2) * 2 + c / 2;
  for (int d = 0; d < 4; d++) expect_ints(res[d], 16, want);
  release_all(res, 4);
  /* on one device a tiled shard-to-full cannot gather its tiles */
  hk_status *st = eval_status(mod);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_FAILED_PRECONDITION);
  hk_status_free(st);
}
END_TEST

/* Full-to-shard under a subgroup-manual sharding: manual over the rows
 * (manual index d % 2), auto over the columns; each device holds its
 * manual group's rows, whole, and shard-to-full puts them back. */
START_TEST(test_full_to_shard_manual_subgroup) {
  const char *mod =
      "HloModule m\nENTRY e {\n"
      " p = s32[4,4] constant({{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}),"
      " sharding={devices=[2,2]0,2,1,3}\n"
      " m = s32[2,4] custom-call(p), custom_call_target=\"SPMDFullToShardShape\","
      " sharding={devices=[1,2,2]<=[4] last_tile_dims={manual}}\n"
      " one = s32[] constant(1), sharding={devices=[1,2,2]<=[4] last_tile_dims={manual}}\n"
      " b = s32[2,4] broadcast(one), dimensions={}, sharding={devices=[1,2,2]<=[4] last_tile_dims={manual}}\n"
      " a = s32[2,4] add(m, b), sharding={devices=[1,2,2]<=[4] last_tile_dims={manual}}\n"
      " f = s32[4,4] custom-call(a), custom_call_target=\"SPMDShardToFullShape\", sharding={devices=[2,2]0,2,1,3}\n"
      " ROOT t = (s32[2,4], s32[4,4]) tuple(m, f)\n}\n";
  hk_value *res[4];
  run_spmd(mod, 4, 1, res);
  for (int d = 0; d < 4; d++) {
    int64_t rows[8], full[16];
    for (int k = 0; k < 8; k++) rows[k] = 8 * (d % 2) + k;
    for (int k = 0; k < 16; k++) full[k] = k + 1;
    expect_ints(res[d]->elems[0], 8, rows);
    expect_ints(res[d]->elems[1], 16, full);
  }
  release_all(res, 4);
}
END_TEST

/* Ragged all-to-all on 2 devices with two updates per peer: device d's
 * input is 10d + [0 1 2 3]; device 0 sends row 0 to itself at 0, row 1 to
 * itself at 3 and rows 2-3 to device 1 at 0; device 1 sends rows 0-1 to
 * device 0 at 1 and rows 2-3 to itself at 2 (rows nothing writes keep the
 * output operand's -1). */
START_TEST(test_ragged_all_to_all) {
  const char *mod =
      "HloModule m\nENTRY e {\n"
      "  pid = u32[] partition-id()\n  z = u32[] constant(0)\n  is0 = pred[] compare(pid, z), direction=EQ\n"
      "  b0 = pred[4] broadcast(is0), dimensions={}\n"
      "  io0 = s32[4] constant({0, 1, 2, 0})\n  io1 = s32[4] constant({0, 0, 2, 0})\n  io = s32[4] select(b0, io0, io1)\n"
      "  ss0 = s32[4] constant({1, 1, 2, 0})\n  ss1 = s32[4] constant({2, 0, 2, 0})\n  ss = s32[4] select(b0, ss0, ss1)\n"
      "  oo0 = s32[4] constant({0, 3, 0, 0})\n  oo1 = s32[4] constant({1, 0, 2, 0})\n  oo = s32[4] select(b0, oo0, oo1)\n"
      "  pf = f32[] convert(pid)\n  k = f32[] constant(10)\n  t = f32[] multiply(pf, k)\n"
      "  tb = f32[4] broadcast(t), dimensions={}\n  i = f32[4] iota(), iota_dimension=0\n  in = f32[4] add(i, tb)\n"
      "  m1 = f32[] constant(-1)\n  o = f32[4] broadcast(m1), dimensions={}\n"
      "  ROOT r = f32[4] ragged-all-to-all(in, o, io, ss, oo, ss), channel_id=1, replica_groups={{0,1}}\n}\n";
  hk_value *res[2];
  run_spmd(mod, 2, 1, res);
  expect_vals(res[0], 4, (double[]){0, 10, 11, 1});
  expect_vals(res[1], 4, (double[]){2, 3, 12, 13});
  release_all(res, 2);
}
END_TEST

/* An update whose input offset plus size overflows int64 is refused by
 * name, not summed (the offsets are the program's data). */
START_TEST(test_ragged_all_to_all_offset_overflow) {
  hk_module *m = parse("HloModule m\nENTRY e {\n" HK_TEST_RAGGED_OVERFLOW_BODY("  in = f32[4] iota(), iota_dimension=0\n"));
  hk_value *const *args[2] = {0};
  hk_value *res[2] = {0};
  hk_status *st = hk_eval_spmd(m, 2, 1, (hk_value *const *const *)args, 0, res, NULL, NULL);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_nonnull(strstr(st->message, "out of bounds"));
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* A reducer that is not a single op (a compiled scalar program) in
 * all-reduce and reduce-scatter: the max via compare and select. */
START_TEST(test_collectives_with_generic_reducer) {
  const char *mod =
      "HloModule m\n"
      "mx {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n g = pred[] compare(a, b), direction=GT\n"
      " ROOT s = f32[] select(g, a, b)\n}\n"
      "ENTRY e {\n" PID_F32
      " w = f32[4] broadcast(f), dimensions={}\n"
      " r = f32[1] all-reduce(v), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=mx\n"
      " rs = f32[1] reduce-scatter(w), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true,"
      " dimensions={0}, to_apply=mx\n ROOT t = (f32[1], f32[1]) tuple(r, rs)\n}\n";
  hk_value *res[4];
  run_spmd(mod, 4, 1, res);
  for (int d = 0; d < 4; d++) {
    expect_vals(res[d]->elems[0], 1, (double[]){3});
    expect_vals(res[d]->elems[1], 1, (double[]){3});
  }
  release_all(res, 4);
}
END_TEST

START_TEST(test_all_reduce_groups) {
  all_reduce_case(2, "{{0,1}}", (double[]){1, 1});
  all_reduce_case(4, "{{0,1,2,3}}", (double[]){6, 6, 6, 6});
  all_reduce_case(4, "{{0,1},{2,3}}", (double[]){1, 1, 5, 5});
  all_reduce_case(4, "{{0,2},{1,3}}", (double[]){2, 4, 2, 4});
  all_reduce_case(4, "[2,2]<=[2,2]T(1,0)", (double[]){2, 4, 2, 4});
  all_reduce_case(8, "[1,8]<=[8]", (double[]){28, 28, 28, 28, 28, 28, 28, 28});
  all_reduce_case(8, "[4,2]<=[8]", (double[]){1, 1, 5, 5, 9, 9, 13, 13});
  all_reduce_case(8, "{{0,4},{1,5},{2,6},{3,7}}", (double[]){4, 6, 8, 10, 4, 6, 8, 10});
}
END_TEST

START_TEST(test_all_reduce_replicas_and_partitions) {
  /* 2 replicas x 2 partitions: value = 10*replica + partition */
  const char *body =
      " p = u32[] partition-id()\n r = u32[] replica-id()\n ten = u32[] constant(10)\n"
      " rr = u32[] multiply(r, ten)\n s = u32[] add(rr, p)\n f = f32[] convert(s)\n v = f32[1] reshape(f)\n";
  char mod[1024];
  hk_value *res[4];
  /* no channel: cross-replica, same partition */
  snprintf(mod, sizeof mod, "HloModule m\n" ADD_COMP "ENTRY e {\n%s ROOT a = f32[1] all-reduce(v), to_apply=add\n}\n", body);
  run_spmd(mod, 2, 2, res);
  expect_vals(res[0], 1, (double[]){10});
  expect_vals(res[1], 1, (double[]){12});
  expect_vals(res[2], 1, (double[]){10});
  release_all(res, 4);
  /* channel, no global ids: replica groups x all partitions */
  snprintf(mod, sizeof mod, "HloModule m\n" ADD_COMP "ENTRY e {\n%s ROOT a = f32[1] all-reduce(v), channel_id=1,"
           " replica_groups={{0},{1}}, to_apply=add\n}\n", body);
  run_spmd(mod, 2, 2, res);
  expect_vals(res[0], 1, (double[]){1});
  expect_vals(res[1], 1, (double[]){1});
  expect_vals(res[2], 1, (double[]){21});
  expect_vals(res[3], 1, (double[]){21});
  release_all(res, 4);
  /* all-gather, channel without global ids: order is replica-major, then partition */
  snprintf(mod, sizeof mod, "HloModule m\nENTRY e {\n%s ROOT a = f32[4] all-gather(v), channel_id=1,"
           " replica_groups={{1,0}}, dimensions={0}\n}\n", body);
  run_spmd(mod, 2, 2, res);
  for (int d = 0; d < 4; d++) expect_vals(res[d], 4, (double[]){10, 11, 0, 1});
  release_all(res, 4);
}
END_TEST

START_TEST(test_all_gather_reduce_scatter_all_to_all) {
  hk_value *res[4];
  run_spmd("HloModule m\nENTRY e {\n" PID_F32
           " ROOT g = f32[4] all-gather(v), channel_id=1, replica_groups={{3,2,1,0}}, dimensions={0},"
           " use_global_device_ids=true\n}\n", 4, 1, res);
  for (int d = 0; d < 4; d++) expect_vals(res[d], 4, (double[]){3, 2, 1, 0});
  release_all(res, 4);
  /* 2-D all-gather along dim 1 */
  run_spmd("HloModule m\nENTRY e {\n p = u32[] partition-id()\n f = f32[] convert(p)\n"
           " v = f32[2,1] broadcast(f), dimensions={}\n"
           " ROOT g = f32[2,2] all-gather(v), channel_id=1, replica_groups={{0,1}}, dimensions={1},"
           " use_global_device_ids=true\n}\n", 2, 1, res);
  expect_vals(res[1], 4, (double[]){0, 1, 0, 1});
  release_all(res, 2);
  /* reduce-scatter: device d holds [d, d+10, d+20, d+30]; sums scattered */
  run_spmd("HloModule m\n" ADD_COMP "ENTRY e {\n p = u32[] partition-id()\n f = f32[] convert(p)\n"
           " b = f32[4] broadcast(f), dimensions={}\n i = f32[4] iota(), iota_dimension=0\n"
           " ten = f32[] constant(10)\n t = f32[4] broadcast(ten), dimensions={}\n it = f32[4] multiply(i, t)\n"
           " v = f32[4] add(b, it)\n"
           " ROOT rs = f32[1] reduce-scatter(v), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0},"
           " use_global_device_ids=true, to_apply=add\n}\n", 4, 1, res);
  for (int d = 0; d < 4; d++) expect_vals(res[d], 1, (double[]){6 + 40.0 * d});
  release_all(res, 4);
  /* all-to-all: device d sends element j to device j, value 10*d + j */
  run_spmd("HloModule m\nENTRY e {\n p = u32[] partition-id()\n f = f32[] convert(p)\n ten = f32[] constant(10)\n"
           " m = f32[] multiply(f, ten)\n b = f32[4] broadcast(m), dimensions={}\n i = f32[4] iota(), iota_dimension=0\n"
           " v = f32[4] add(b, i)\n"
           " ROOT a = f32[4] all-to-all(v), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}\n}\n",
           4, 1, res);
  for (int d = 0; d < 4; d++) expect_vals(res[d], 4, (double[]){d, 10 + d, 20 + d, 30 + d});
  release_all(res, 4);
}
END_TEST

START_TEST(test_collective_permute) {
  hk_value *res[8];
  run_spmd("HloModule m\nENTRY e {\n" PID_F32
           " ROOT c = f32[1] collective-permute(v), channel_id=1,"
           " source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}\n}\n", 8, 1, res);
  for (int d = 0; d < 8; d++) expect_vals(res[d], 1, (double[]){(d + 7) % 8});
  release_all(res, 8);
  /* devices that receive nothing get zeros */
  run_spmd("HloModule m\nENTRY e {\n" PID_F32
           " one = f32[1] constant({5})\n w = f32[1] add(v, one)\n"
           " ROOT c = f32[1] collective-permute(w), channel_id=1, source_target_pairs={{0,2}}\n}\n", 4, 1, res);
  expect_vals(res[0], 1, (double[]){0});
  expect_vals(res[2], 1, (double[]){5});
  expect_vals(res[3], 1, (double[]){0});
  release_all(res, 4);
}
END_TEST

START_TEST(test_collectives_in_a_loop) {
  /* all-reduce inside a while body, 3 iterations on 4 devices */
  const char *mod =
      "HloModule m\n" ADD_COMP
      "cond {\n p = (s32[], f32[1]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n"
      " n = s32[] constant(3)\n ROOT c = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n p = (s32[], f32[1]) parameter(0)\n i = s32[] get-tuple-element(p), index=0\n"
      " v = f32[1] get-tuple-element(p), index=1\n one = s32[] constant(1)\n i1 = s32[] add(i, one)\n"
      " r = f32[1] all-reduce(v), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add\n"
      " ROOT t = (s32[], f32[1]) tuple(i1, r)\n}\n"
      "ENTRY e {\n" PID_F32 " z = s32[] constant(0)\n init = (s32[], f32[1]) tuple(z, v)\n"
      " w = (s32[], f32[1]) while(init), condition=cond, body=body\n"
      " ROOT o = f32[1] get-tuple-element(w), index=1\n}\n";
  hk_value *res[4];
  run_spmd(mod, 4, 1, res);
  for (int d = 0; d < 4; d++) expect_vals(res[d], 1, (double[]){6 * 16});
  release_all(res, 4);
}
END_TEST

START_TEST(test_mismatched_collective_fails_cleanly) {
  /* only partition 0 runs the all-reduce: must fail (timeout/abort), not hang or crash */
  const char *mod =
      "HloModule m\n" ADD_COMP
      "yes {\n x = f32[1] parameter(0)\n ROOT r = f32[1] all-reduce(x), channel_id=1, replica_groups={{0,1}},"
      " use_global_device_ids=true, to_apply=add\n}\n"
      "no {\n x = f32[1] parameter(0)\n ROOT r = f32[1] copy(x)\n}\n"
      "ENTRY e {\n" PID_F32 " z = u32[] constant(0)\n c = pred[] compare(p, z), direction=EQ\n"
      " ROOT o = f32[1] conditional(c, v, v), true_computation=yes, false_computation=no\n}\n";
  hk_module *m = parse(mod);
  hk_value *res[2];
  hk_collective_backend *be = hk_collective_threads_new(2, 300);
  hk_eval_options o = {.backend = be};
  hk_value *const *args[2] = {0};
  hk_status *st = hk_eval_spmd(m, 2, 1, (hk_value *const *const *)args, 0, res, &o, NULL);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "timed out"), "%s", st->message);
  hk_status_free(st);
  be->vt->destroy(be);
  hk_module_free(m);
}
END_TEST

/* ---- sharding helpers -------------------------------------------------------------------- */

START_TEST(test_shard_and_unshard) {
  hk_module *m = parse("HloModule m\nENTRY e {\n ROOT p = f32[4,3] parameter(0)\n}\n");
  const hk_sharding *s = NULL;
  const char *txt = "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}";
  size_t used = 0;
  ck_assert_ok(hk_sharding_parse(m, txt, strlen(txt), &s, &used));
  const hk_shape *gs = m->entry->params[0]->shape;
  const hk_shape *ls = hk_shape_array(m, HK_F32, 2, (int64_t[]){2, 3});
  double vals[12];
  for (int i = 0; i < 12; i++) vals[i] = i;
  hk_value *g = arr(HK_F32, 2, (int64_t[]){4, 3}, vals), *pieces[4];
  for (int d = 0; d < 4; d++) ck_assert_ok(hk_value_shard(g, s, gs, d, ls, &pieces[d]));
  expect_vals(pieces[3], 6, (double[]){6, 7, 8, 9, 10, 11});
  expect_vals(pieces[1], 6, (double[]){0, 1, 2, 3, 4, 5});
  hk_value *back = NULL;
  char *dis = NULL;
  ck_assert_ok(hk_value_unshard(pieces, 4, s, gs, &back, &dis));
  ck_assert_ptr_null(dis);
  expect_vals(back, 12, vals);
  hk_value_release(back);
  hk_value_set_f64(pieces[3], 0, 99);   /* replicas disagree */
  ck_assert_ok(hk_value_unshard(pieces, 4, s, gs, &back, &dis));
  ck_assert_ptr_nonnull(dis);
  free(dis);
  hk_value_release(back);
  release_all(pieces, 4);
  hk_value_release(g);
  hk_module_free(m);
}
END_TEST

/* A tuple sharding is flat over the leaves (XLA's): in ((a, b), c) the
 * sharding of c is the third, not the second (the pipeline fuzzer found c
 * read by b's sharding). */
START_TEST(test_shard_nested_tuple_by_leaves) {
  hk_module *m = parse("HloModule m\nENTRY e {\n ROOT p = ((f32[2], f32[2]), f32[4]) parameter(0)\n}\n");
  const hk_sharding *s = NULL;
  const char *txt = "{{replicated}, {replicated}, {devices=[2]0,1}}";
  size_t used = 0;
  ck_assert_ok(hk_sharding_parse(m, txt, strlen(txt), &s, &used));
  const hk_shape *gs = m->entry->params[0]->shape;
  const hk_shape *two = hk_shape_array(m, HK_F32, 1, (int64_t[]){2});
  const hk_shape *inner = hk_shape_tuple(m, 2, (const hk_shape *[]){two, two});
  const hk_shape *ls = hk_shape_tuple(m, 2, (const hk_shape *[]){inner, two});
  hk_value *ab[2] = {vec(HK_F32, 2, (double[]){1, 2}), vec(HK_F32, 2, (double[]){3, 4})};
  hk_value *top[2] = {hk_value_new_tuple(2, ab), vec(HK_F32, 4, (double[]){5, 6, 7, 8})};
  hk_value *g = hk_value_new_tuple(2, top), *pieces[2];
  for (int d = 0; d < 2; d++) ck_assert_ok(hk_value_shard(g, s, gs, d, ls, &pieces[d]));
  expect_vals(pieces[1]->elems[1], 2, (double[]){7, 8});
  expect_vals(pieces[1]->elems[0]->elems[1], 2, (double[]){3, 4});
  hk_value *back = NULL;
  char *dis = NULL;
  ck_assert_ok(hk_value_unshard(pieces, 2, s, gs, &back, &dis));
  ck_assert_msg(!dis, "%s", dis);
  expect_vals(back->elems[1], 4, (double[]){5, 6, 7, 8});
  hk_value_release(back);
  release_all(pieces, 2);
  hk_value_release(g);
  hk_module_free(m);
}
END_TEST

START_TEST(test_compare_tolerances) {
  hk_value *a = vec(HK_F32, 3, (double[]){1, NAN, 100}), *b = vec(HK_F32, 3, (double[]){1.000001, NAN, 100.001});
  hk_compare_result r;
  hk_value_compare(a, b, -1, -1, &r);
  ck_assert(r.equal);
  hk_compare_result_free(&r);
  hk_value_set_f64(b, 2, 101);
  hk_value_compare(a, b, -1, -1, &r);
  ck_assert(!r.equal);
  ck_assert(r.has_mismatch && r.mismatch_index == 2);
  hk_compare_result_free(&r);
  hk_value_release(a);
  hk_value_release(b);
}
END_TEST


/* ---- CLI: hlokit check on hand-written partitioned fixtures ------------------------ */

/* Runs build/hlokit (beside the tests folder) with args; returns its exit status. */
static int hlokit(const char *args) {
  char exe[PATH_MAX], cmd[8192];
  hk_test_build_path("hlokit", exe, sizeof exe);
  snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", exe, args);
  int rc = system(cmd);
  ck_assert(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

#define FX "fixtures/eval/"

START_TEST(test_cli_check_tells_right_from_wrong) {
  ck_assert_int_eq(hlokit("check " FX "matmul.hlo --partitioned=" FX "matmul_spmd_ok.hlo"), 0);
  ck_assert_int_eq(hlokit("check " FX "matmul.hlo --partitioned=" FX "matmul_spmd_missing_all_reduce.hlo"), 1);
  ck_assert_int_eq(hlokit("check " FX "negate_rows.hlo --partitioned=" FX "negate_rows_spmd_ok.hlo --json"), 0);
  ck_assert_int_eq(hlokit("check " FX "negate_rows.hlo --partitioned=" FX "negate_rows_spmd_wrong_offsets.hlo"), 1);
  ck_assert_int_eq(hlokit("check " FX "rotate.hlo --partitioned=" FX "rotate_spmd_ok.hlo --seed=7"), 0);
  ck_assert_int_eq(hlokit("check " FX "rotate.hlo --partitioned=" FX "rotate_spmd_swapped_pairs.hlo"), 1);
  /* With replicas the global program runs on every replica too. */
  ck_assert_int_eq(hlokit("check " FX "cross_replica_all_reduce.hlo --num-partitions=2 --num-replicas=2"
                          " '--passes=spmd-partitioning{allow_module_signature_change=true}'"),
                   0);
}
END_TEST

START_TEST(test_cli_errors_exit_2) {
  ck_assert_int_eq(hlokit("check " FX "matmul.hlo --partitioned=" FX "no_such_file.hlo"), 2);
  ck_assert_int_eq(hlokit("check " FX "matmul.hlo"), 2);
  ck_assert_int_eq(hlokit("check " FX "matmul.hlo --partitioned=" FX "rotate_spmd_ok.hlo"), 2);
  ck_assert_int_eq(hlokit("run " FX "unsupported.hlo"), 2);
  ck_assert_int_eq(hlokit("run " FX "rotate_spmd_ok.hlo --json"), 0);
  ck_assert_int_eq(hlokit("run " FX "matmul.hlo --seed=3 --json"), 0);
}
END_TEST

/* ---- conformance: every spmd.jsonl module as a global program ---------------------- */



typedef struct conf_counts {
  int total, passed, too_big, too_slow, unsupported, multi_device, failed;
} conf_counts;

static void conformance_case(const char *name, const char *hlo, conf_counts *c) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(hlo, strlen(hlo), name, &m);
  hk_value **args = NULL;
  int np = 0;
  if (!st) {
    np = m->entry->n_params;
    args = calloc((size_t)(np ? np : 1), sizeof(hk_value *));
    hk_eval_options o = {.seed = 1, .max_value_bytes = 32 << 20, .time_limit_ms = 500};
    st = hk_eval_check_sizes(m, &o);
    for (int i = 0; i < np && !st; i++) args[i] = hk_value_random(m->entry->params[i]->shape, 1, (uint64_t)i);
    hk_value *r = NULL;
    if (!st) st = hk_eval_module(m, args, np, &r, &o, NULL);
    hk_value_release(r);
  }
  c->total++;
  if (!st) {
    c->passed++;
  } else {
    const char *kind = strstr(st->message, "exceeds the evaluator's limit") ? "too large"
                       : strstr(st->message, "time limit") ? "too slow"
                       : st->code == HK_UNIMPLEMENTED ? "unsupported"
                       : st->code == HK_FAILED_PRECONDITION ? "needs devices" : "FAILED";
    if (!strcmp(kind, "too large")) c->too_big++;
    else if (!strcmp(kind, "too slow")) c->too_slow++;
    else if (!strcmp(kind, "unsupported")) c->unsupported++;
    else if (!strcmp(kind, "needs devices")) c->multi_device++;
    else c->failed++;
    printf("  %-13s %s: %.200s\n", kind, name, st->message);
    fflush(stdout);
    hk_status_free(st);
  }
  for (int i = 0; i < np; i++) hk_value_release(args ? args[i] : NULL);
  free(args);
  hk_module_free(m);
}

START_TEST(test_conformance_spmd_global) {
#if defined(__SANITIZE_ADDRESS__)
  printf("conformance: skipped under AddressSanitizer (minutes of work)\n");
  return;
#endif
  if (getenv("HLOKIT_VALGRIND")) return;   /* minutes under valgrind */
  char path[4096];
  snprintf(path, sizeof path, "%s/spmd.jsonl", hk_test_conformance_dir());
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("conformance: %s not found, skipped\n", path);
    return;
  }
  conf_counts c = {0};
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    json_object *o = json_tokener_parse(line), *h, *n;
    if (o && json_object_object_get_ex(o, "hlo", &h) && json_object_object_get_ex(o, "name", &n))
      conformance_case(json_object_get_string(n), json_object_get_string(h), &c);
    json_object_put(o);
  }
  free(line);
  fclose(f);
  printf("conformance spmd.jsonl as global programs: %d/%d evaluate (%d too large for the 32 MiB"
         " limit, %d over the 0.5 s budget, %d unsupported, %d need several devices, %d failed)\n",
         c.passed, c.total, c.too_big, c.too_slow, c.unsupported, c.multi_device, c.failed);
  fflush(stdout);
  ck_assert_int_eq(c.failed, 0);
  ck_assert_int_ge(c.passed, 190);   /* 207 measured; timing-dependent cases vary with load */
}
END_TEST

/* ---- batch norm (XLA's BatchNormExpander semantics) and async wrappers ---- */

START_TEST(test_batch_norm_training_inference_grad) {
  /* x = [[1,2],[3,4]], features along dim 1: means 2 and 3, variances 1 */
  const double xs[] = {1, 2, 3, 4}, sc[] = {1, 2}, of[] = {0, 1};
  const int64_t d2[2] = {2, 2};
  hk_value *args[3] = {arr(HK_F32, 2, d2, xs), vec(HK_F32, 2, sc), vec(HK_F32, 2, of)};
  hk_value *r = eval_n("HloModule m\nENTRY e {\n  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n"
                       "  o = f32[2] parameter(2)\n"
                       "  ROOT b = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0, feature_index=1\n}\n",
                       3, args);
  expect_vals(r->elems[0], 4, (const double[]){-1, -1, 1, 3});
  expect_vals(r->elems[1], 2, (const double[]){2, 3});
  expect_vals(r->elems[2], 2, (const double[]){1, 1});
  hk_value_release(r);
  /* inference with given statistics: (x - mean) / sqrt(var + eps) * scale + offset */
  const double mu[] = {1, 0}, var[] = {3, 15};
  hk_value *iargs[5] = {arr(HK_F32, 2, d2, xs), vec(HK_F32, 2, sc), vec(HK_F32, 2, of), vec(HK_F32, 2, mu),
                        vec(HK_F32, 2, var)};
  r = eval_n("HloModule m\nENTRY e {\n  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n"
             "  o = f32[2] parameter(2)\n  m = f32[2] parameter(3)\n  v = f32[2] parameter(4)\n"
             "  ROOT b = f32[2,2] batch-norm-inference(x, s, o, m, v), epsilon=1, feature_index=1\n}\n",
             5, iargs);
  expect_vals(r, 4, (const double[]){0, 2, 1, 3});
  hk_value_release(r);
  /* grad over one feature of x = [0,1,5], mean 2, variance 2, dy = [1,0,0]:
   * grad_offset = 1, grad_scale = -2/sqrt(2), dx = (3dy - 1 + (x - 2)) / (3 sqrt(2)) */
  const int64_t d31[2] = {3, 1};
  const double gx[] = {0, 1, 5}, one[] = {1}, two[] = {2}, m2[] = {2}, dy[] = {1, 0, 0};
  hk_value *gargs[5] = {arr(HK_F32, 2, d31, gx), vec(HK_F32, 1, one), vec(HK_F32, 1, m2), vec(HK_F32, 1, two),
                        arr(HK_F32, 2, d31, dy)};
  r = eval_n("HloModule m\nENTRY e {\n  x = f32[3,1] parameter(0)\n  s = f32[1] parameter(1)\n"
             "  m = f32[1] parameter(2)\n  v = f32[1] parameter(3)\n  g = f32[3,1] parameter(4)\n"
             "  ROOT b = (f32[3,1], f32[1], f32[1]) batch-norm-grad(x, s, m, v, g), epsilon=0, feature_index=1\n}\n",
             5, gargs);
  double k = 1.0 / (3.0 * sqrt(2.0));
  const double want_dx[] = {0, -2 * k, 2 * k};
  for (int i = 0; i < 3; i++)
    ck_assert_double_eq_tol(hk_value_get_f64(r->elems[0], i), want_dx[i], 1e-6);
  ck_assert_double_eq_tol(hk_value_get_f64(r->elems[1], 0), -2 / sqrt(2.0), 1e-6);
  ck_assert_double_eq_tol(hk_value_get_f64(r->elems[2], 0), 1, 1e-6);
  hk_value_release(r);
}
END_TEST

/* XLA's HandleAsyncStart/Done: the wrapped computation runs at the start,
 * done returns its result; a bad feature_index is a clean error. */
START_TEST(test_async_wrapper_and_bad_batch_norm) {
  const double xs[] = {1, -2, 3};
  hk_value *args[1] = {vec(HK_F32, 3, xs)};
  hk_value *r = eval_n("HloModule m\nw {\n  a = f32[3] parameter(0)\n  ROOT n = f32[3] negate(a)\n}\n"
                       "ENTRY e {\n  p = f32[3] parameter(0)\n"
                       "  s = ((f32[3]), f32[3], s32[]) async-start(p), calls=w\n"
                       "  u = ((f32[3]), f32[3], s32[]) async-update(s)\n"
                       "  ROOT d = f32[3] async-done(u)\n}\n",
                       1, args);
  expect_vals(r, 3, (const double[]){-1, 2, -3});
  hk_value_release(r);
  hk_status *st = eval_status("HloModule m\nENTRY e {\n  x = f32[2,2] constant({{1,2},{3,4}})\n"
                              "  s = f32[2] constant({1,1})\n"
                              "  ROOT b = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, s), epsilon=0, feature_index=2\n}\n");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "feature_index"), "%s", st->message);
  hk_status_free(st);
}
END_TEST

/* rng-bit-generator as XLA expands it: the Random123 known answers of
 * Philox4x32-10 and Threefry2x32-20, XLA's counter layout and state update. */
static hk_value *rbg(const char *state, const char *shape, const char *alg) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule m\nENTRY e {\n  s = u64[%s] constant({%s})\n"
           "  ROOT r = (u64[%s], %s) rng-bit-generator(s), algorithm=%s\n}\n",
           strchr(state, ',') == strrchr(state, ',') ? "2" : "3", state,
           strchr(state, ',') == strrchr(state, ',') ? "2" : "3", shape, alg);
  hk_module *m = parse(text);
  hk_value *r = NULL;
  ck_assert_ok(hk_eval_module(m, NULL, 0, &r, NULL, NULL));
  hk_module_free(m);
  return r;
}

START_TEST(test_rng_bit_generator_xla_streams) {
  hk_value *r = rbg("0, 0, 0", "u32[4]", "rng_philox");
  expect_ints(r->elems[1], 4, (const int64_t[]){0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  expect_ints(r->elems[0], 3, (const int64_t[]){0, 1, 0});
  hk_value_release(r);
  r = rbg("18446744073709551615, 18446744073709551615, 18446744073709551615", "u32[4]", "rng_philox");
  expect_ints(r->elems[1], 4, (const int64_t[]){0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  ck_assert_uint_eq(((uint64_t *)r->elems[0]->data)[1], 0);   /* the 128-bit counter carried */
  ck_assert_uint_eq(((uint64_t *)r->elems[0]->data)[2], 0);
  hk_value_release(r);
  /* the default is philox; 64-bit results take two words each */
  r = rbg("0, 0, 0", "u64[2]", "rng_default");
  ck_assert_uint_eq(((uint64_t *)r->elems[1]->data)[0], 0xe169c58d6627e8d5ull);
  ck_assert_uint_eq(((uint64_t *)r->elems[1]->data)[1], 0x9b00dbd8bc57ac4cull);
  hk_value_release(r);
  /* threefry: 64-bit element i counts from state[1] + i */
  r = rbg("0, 0", "u64[3]", "rng_three_fry");
  ck_assert_uint_eq(((uint64_t *)r->elems[1]->data)[0], 0x99ba4efe6b200159ull);
  ck_assert_uint_eq(((uint64_t *)r->elems[0]->data)[1], 3);
  hk_value_release(r);
  /* 32-bit threefry: neighbours along the first even dim share a counter */
  r = rbg("0, 0", "u32[2]", "rng_three_fry");
  expect_ints(r->elems[1], 2, (const int64_t[]){0x6b200159, 0x99ba4efe});
  ck_assert_uint_eq(((uint64_t *)r->elems[0]->data)[1], 1);
  hk_value_release(r);
  /* an array result (XLA's verifier allows it) is the bits alone */
  r = eval_n("HloModule m\nENTRY e {\n  s = u64[3] constant({0, 0, 0})\n"
             "  ROOT r = u32[4] rng-bit-generator(s), algorithm=rng_philox\n}\n",
             0, NULL);
  expect_ints(r, 4, (const int64_t[]){0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  hk_value_release(r);
}
END_TEST

/* XLA's StochasticConvertOp: |x| rounds up when its fraction, as a
 * fixed-point number of the random operand's width, exceeds the bits;
 * saturating at the type's bounds, NaN -> 0. */
START_TEST(test_stochastic_convert) {
  hk_value *r = eval_n("HloModule m\nENTRY e {\n"
                       "  x = f32[6] constant({1.25, -1.5, 2.75, 100000, nan, -inf})\n"
                       "  b = u32[6] constant({0, 4294967295, 2147483648, 7, 0, 0})\n"
                       "  ROOT s = s8[6] stochastic-convert(x, b)\n}\n",
                       0, NULL);
  expect_ints(r, 6, (const int64_t[]){2, -1, 3, 127, 0, -128});
  hk_value_release(r);
}
END_TEST

/* Found by the pipeline fuzzer: a gather slice of size 0 on a collapsed
 * dim read past the operand; its start clamps as a size-1 slice's. */
START_TEST(test_gather_zero_size_slice_in_bounds) {
  const double pv[] = {1, 2, 3, 4};
  const int64_t d2[2] = {2, 2};
  hk_value *args[1] = {arr(HK_F32, 2, d2, pv)};
  hk_value *r = eval_n("HloModule m\nENTRY e {\n  p = f32[2,2] parameter(0)\n  i = s64[3] constant({0, 1, 5})\n"
                       "  ROOT g = f32[3,2] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},"
                       " index_vector_dim=1, slice_sizes={0,2}\n}\n",
                       1, args);
  expect_vals(r, 6, (const double[]){1, 2, 3, 4, 3, 4});
  hk_value_release(r);
}
END_TEST

/* Found by the pipeline fuzzer: a '?' dim (unbounded) overflowed the cost
 * estimate's element count; such a value has no size and is refused
 * before evaluation. */
START_TEST(test_unbounded_dim_is_refused) {
  hk_module *m = parse("HloModule m\nENTRY e {\n  p = f32[?,4] parameter(0)\n"
                       "  ROOT n = f32[?,4] negate(p)\n}\n");
  ck_assert_int_eq(hk_shape_elements(m->entry->root->shape), 0);
  hk_eval_cost c = hk_eval_estimate_cost(m);
  ck_assert_int_eq(c.largest_elements, 0);
  hk_status *st = hk_eval_check_sizes(m, NULL);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "unbounded dynamic dimension"), "%s", st->message);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

static Suite *eval_suite(void) {
  Suite *s = suite_create("eval");
  TCase *t = tcase_create("ops");
  tcase_add_test(t, test_cholesky_known_answers);
  tcase_add_test(t, test_triangular_solve_every_form);
  tcase_add_test(t, test_ragged_dot_forms);
  tcase_add_test(t, test_ragged_dot_huge_group_sizes);
  tcase_add_test(t, test_ragged_dot_group_rows_non_contracting);
  tcase_add_test(t, test_ragged_dot_group_rows_contracting);
  tcase_add_test(t, test_ragged_dot_group_rows_batch);
  tcase_add_test(t, test_ragged_dot_group_rows_bad_shape);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, test_integer_division_semantics);
  tcase_add_test(t, test_shifts_and_wrap);
  tcase_add_test(t, test_nan_min_max_compare);
  tcase_add_test(t, test_convert_and_rounding);
  tcase_add_test(t, test_select_clamp_iota_bitcast_convert);
  tcase_add_test(t, test_dynamic_slice_clamps);
  tcase_add_test(t, test_pad_negative_interior);
  tcase_add_test(t, test_transpose_slice_concat_reverse_broadcast);
  tcase_add_test(t, test_dot_general);
  tcase_add_test(t, test_dot_large_blocked);
  tcase_add_test(t, test_dot_thin_kernels);
  tcase_add_test(t, test_sparse_dot);
  tcase_add_test(t, test_convolution_windows);
  tcase_add_test(t, test_convolution_groups);
  tcase_add_test(t, test_convolution_fast_path_matches_reference);
  tcase_add_test(t, test_convolution_im2col_matches_loop);
  tcase_add_test(t, test_reduce_variadic_argmax);
  tcase_add_test(t, test_reduce_window);
  tcase_add_test(t, test_select_and_scatter);
  tcase_add_test(t, test_gather_clamps);
  tcase_add_test(t, test_gather_clamps_batch_coordinates);
  tcase_add_test(t, test_scatter_skips_out_of_bounds);
  tcase_add_test(t, test_sort_stable_multi_operand);
  tcase_add_test(t, test_sort_total_order_comparator_program);
  tcase_add_test(t, test_scalar_program_kernels_match_elementwise);
  tcase_add_test(t, test_scalar_programs);
  tcase_add_test(t, test_topk_selection);
  tcase_add_test(t, test_while_conditional_call);
  tcase_add_test(t, test_fft_known_answer_and_round_trips);
  tcase_add_test(t, test_unsupported_op_is_an_error);
  tcase_add_test(t, test_identity_custom_calls_and_rng_determinism);
  tcase_add_test(t, test_opaque_custom_calls);
  tcase_add_test(t, test_compare_allows_reassociation_slack);
  tcase_add_test(t, test_compare_tolerances);
  suite_add_tcase(s, t);
  TCase *c = tcase_create("collectives");
  tcase_set_timeout(c, 60);
  tcase_add_test(c, test_manual_regions);
  tcase_add_test(c, test_full_to_shard_manual_subgroup);
  tcase_add_test(c, test_ragged_all_to_all);
  tcase_add_test(c, test_ragged_all_to_all_offset_overflow);
  tcase_add_test(c, test_all_reduce_groups);
  tcase_add_test(c, test_collectives_with_generic_reducer);
  tcase_add_test(c, test_all_reduce_replicas_and_partitions);
  tcase_add_test(c, test_all_gather_reduce_scatter_all_to_all);
  tcase_add_test(c, test_collective_permute);
  tcase_add_test(c, test_collectives_in_a_loop);
  tcase_add_test(c, test_mismatched_collective_fails_cleanly);
  tcase_add_test(c, test_shard_and_unshard);
  tcase_add_test(c, test_shard_nested_tuple_by_leaves);
  suite_add_tcase(s, c);
  TCase *k = tcase_create("cli");
  tcase_set_timeout(k, 60);
  tcase_add_test(k, test_cli_check_tells_right_from_wrong);
  tcase_add_test(k, test_cli_errors_exit_2);
  suite_add_tcase(s, k);
  TCase *f = tcase_create("conformance");
  tcase_set_timeout(f, 600);
  tcase_add_test(f, test_conformance_spmd_global);
  tcase_add_test(f, test_batch_norm_training_inference_grad);
  tcase_add_test(f, test_async_wrapper_and_bad_batch_norm);
  tcase_add_test(f, test_rng_bit_generator_xla_streams);
  tcase_add_test(f, test_stochastic_convert);
  tcase_add_test(f, test_gather_zero_size_slice_in_bounds);
  tcase_add_test(f, test_unbounded_dim_is_refused);
  suite_add_tcase(s, f);
  return s;
}

HK_TEST_MAIN(eval_suite)
