/* test_parser_xla.c - XLA parser rules (hlo_parser.cc) on modules written here, and the fuzz regressions of tests/fuzz_regressions/. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------------ */

/* Parses text; returns the error message (malloc'd) or NULL on success. */
static char *parse_error(const char *text) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, strlen(text), "t", &m);
  if (!st) {
    hk_module_free(m);
    return NULL;
  }
  char *msg = strdup(st->message ? st->message : "");
  hk_status_free(st);
  return msg;
}

/* text must fail to parse with `where` (e.g. "t:4:3:") and `what` in the message. */
static void expect_error(const char *text, const char *where, const char *what) {
  char *msg = parse_error(text);
  ck_assert_msg(msg, "parsed without error: %s", text);
  if (where) ck_assert_msg(strstr(msg, where), "want %s in: %s", where, msg);
  if (what) ck_assert_msg(strstr(msg, what), "want \"%s\" in: %s", what, msg);
  free(msg);
}

/* text parses; the module printed in form contains `want`. */
static void expect_print_has(const char *text, hk_print_form form, const char *want) {
  hk_module *m = hk_test_parse(text);
  char *out = hk_module_to_string(m, form);
  ck_assert_msg(strstr(out, want), "want \"%s\" in:\n%s", want, out);
  free(out);
  hk_module_free(m);
}

/* Parse, print both forms, reparse each print: what the fuzz harness does. */
static void parse_print_reparse(const char *text, size_t len) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, len, "regression", &m);
  if (st) {
    ck_assert_ptr_nonnull(st->message);
    hk_status_free(st);
    return;
  }
  for (int form = HK_PRINT_LONG; form <= HK_PRINT_SHORT; form++) {
    char *out = hk_module_to_string(m, (hk_print_form)form);
    hk_module *again = NULL;
    hk_status *st2 = hk_parse_module(out, strlen(out), "reprint", &again);
    ck_assert_msg(!st2, "the print of a parsed module does not parse: %s\n%s",
                  st2 ? st2->message : "", out);
    hk_module_free(again);
    free(out);
  }
  hk_module_free(m);
}

/* ---- fuzz regressions ---------------------------------------------------------- */

START_TEST(test_fuzz_regressions) {
  DIR *d = opendir("tests/fuzz_regressions");
  ck_assert_msg(d, "tests/fuzz_regressions is missing (run from the repository root)");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "tests/fuzz_regressions/%s", e->d_name);
    hk_file_bytes fb;
    ck_assert_ok(hk_file_bytes_open(path, &fb));
    parse_print_reparse(fb.data, fb.len);
    hk_file_bytes_close(&fb);
    n++;
  }
  closedir(d);
  ck_assert_int_ge(n, 2);
}
END_TEST

/* A bare element fills a shape of any size (XLA's rule): a shape past the
 * machine's memory is an error at the literal, not
 * an abort in the out-of-memory policy; a small one still parses. */
START_TEST(test_literal_past_memory_is_an_error) {
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = f32[699999999999999,3] constant(1)\n}\n",
               "t:4:", "larger than this machine's memory");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = f64[1000000000000000,2] constant(1)\n}\n",
               "t:4:", "larger than this machine's memory");
  ck_assert_ptr_null(parse_error("HloModule m\n\nENTRY e {\n  ROOT c = f32[4,3] constant(1)\n}\n"));
}
END_TEST

/* Resident bytes of this process now (/proc/self/statm), or -1. */
static long long resident_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long long size = 0, res = -1;
  if (fscanf(f, "%lld %lld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * 4096;
}

/* A bare element fills a 1 GiB literal: its storage is taken but not made
 * present (fuzzer: f16[699999999,3] constant(0) made 4 GB resident), so
 * the process stays far below the literal's size; the values read back. */
START_TEST(test_bare_element_literal_stays_lazy) {
  long long before = resident_bytes();
  hk_module *m = hk_test_parse("HloModule m\n\nENTRY e {\n  ROOT c = f32[268435456] constant(3)\n}\n");
  long long after = resident_bytes();
  const hk_literal *l = m->entry->root->attrs->literal;
  ck_assert_int_eq(l->nbytes, (int64_t)1 << 30);
  ck_assert(hk_literal_get_f64(l, 0) == 3.0);
  ck_assert(hk_literal_get_f64(l, 268435455) == 0.0);
  if (before >= 0 && after >= 0)
    ck_assert_msg(after - before < (128ll << 20), "resident grew by %lld bytes", after - before);
  hk_module_free(m);
}
END_TEST

/* anonymous operands of a single instruction become parameters named
 * "parameter", numbered in order */
START_TEST(test_anonymous_operands) {
  const char *t = "f32[2,4]{1,0} multiply(f32[2,4]{1,0}, f32[2,4]{1,0})";
  hk_module *m = hk_test_parse(t);
  hk_computation *c = m->entry;
  ck_assert_int_eq(c->n_params, 2);
  ck_assert_int_eq(c->root->opcode, HK_OP_MULTIPLY);
  ck_assert_ptr_ne(c->params[0], c->params[1]);
  ck_assert_int_eq(c->params[1]->attrs->parameter_number, 1);
  hk_module_free(m);
}
END_TEST


/* names are scoped per computation; the module then makes them unique as
 * XLA's NameUniquer does: y.0 after a y elsewhere becomes y.1, y.1 -> y.2 */
START_TEST(test_names_unique_module_wide) {
  const char *t =
      "HloModule m\n\n"
      "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  y.0 = f32[4] negate(p)\n  y.1 = f32[4] negate(y.0)\n"
      "  z = f32[] constant(0)\n  ROOT r = f32[] reduce(y.1, z), dimensions={0}, to_apply=sum\n}\n";
  hk_module *m = hk_test_parse(t);
  hk_instr *r = m->entry->root;
  ck_assert_str_eq(r->operands[0]->name, "y.2");
  ck_assert_str_eq(r->operands[0]->operands[0]->name, "y.1");
  ck_assert_int_eq(r->operands[0]->operands[0]->operands[0]->opcode, HK_OP_PARAMETER);
  hk_module_free(m);
  /* a name the IR gave a renamed instruction is not a source name: y.1
   * (the IR name of the text's y.0) used before the text defines y.1 */
  expect_error("HloModule m\n\nsum {\n  y = f32[] parameter(0)\n  ROOT n = f32[] negate(y)\n}\n\n"
               "ENTRY e {\n  y.0 = f32[] parameter(0)\n  ROOT r = f32[] negate(y.1)\n}\n",
               "t:10:25:", "instruction does not exist: y.1");
  /* the same name twice in one computation is still an error */
  expect_error("HloModule m\n\nENTRY e {\n  a = f32[] parameter(0)\n  a = f32[] negate(a)\n}\n",
               "t:5:3:", "instruction already exists: a");
}
END_TEST

/* Found by the parser fuzzer: a literal of a shape with a '?' dim sized
 * its buffer from INT64_MIN; it is an error at the literal. */
START_TEST(test_literal_with_unbounded_dim) {
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = s32[?] constant({1})\n}\n", "t:4:28:",
               "a literal cannot have an unbounded dynamic dimension");
  /* the shape itself is fine where no literal holds it */
  hk_module *m = hk_test_parse("HloModule m\n\nENTRY e {\n  ROOT p = s32[?,2] parameter(0)\n}\n");
  hk_module_free(m);
}
END_TEST

/* the signature's result shape must be compatible with the root's */
START_TEST(test_signature_result_matches_root) {
  expect_error("HloModule m\n\nENTRY %e () -> f32[2] {\n  ROOT %c = f32[3]{0} constant({1, 2, 3})\n}\n",
               "t:3:16:",
               "Shape of computation e, f32[2], is not compatible with that of its root "
               "instruction c, f32[3]");
  hk_module_free(hk_test_parse(
      "HloModule m\n\nENTRY %e () -> f32[3] {\n  ROOT %c = f32[3]{0} constant({1, 2, 3})\n}\n"));
}
END_TEST

/* NaN payloads: a type with them takes a payload that fits; the others
 * take only the quiet NaN; the fnuz NaN prints as -nan */
START_TEST(test_nan_literals) {
  const char *head = "HloModule m\n\nENTRY e {\n  ROOT c = ";
  char t[512];
  snprintf(t, sizeof t, "%sf16[2] constant({nan(0x3), -nan})\n}\n", head);
  expect_print_has(t, HK_PRINT_SHORT, "constant({nan(0x3), -nan})");
  snprintf(t, sizeof t, "%sf8e5m2[2] constant({nan(0x1), nan})\n}\n", head);
  expect_print_has(t, HK_PRINT_SHORT, "constant({nan(0x1), nan})");
  snprintf(t, sizeof t, "%sf8e5m2[1] constant({nan(0x4)})\n}\n", head);
  expect_error(t, "t:4:32:",
               "tries to set NaN payload 0x4 to a literal in shape f8e5m2[1] at linear index 0, "
               "but the NaN payload is out of range (0x3)");
  snprintf(t, sizeof t, "%sf8e4m3fn[2] constant({1, nan(0x1)})\n}\n", head);
  expect_error(t, "t:4:37:", "but f8e4m3fn does not support payloads");
  snprintf(t, sizeof t, "%sf8e4m3fnuz[2] constant({nan, 2})\n}\n", head);
  expect_print_has(t, HK_PRINT_SHORT, "constant({-nan, 2})");
}
END_TEST

/* bf16 and the narrow types print max_digits10 digits (bf16: 4) */
START_TEST(test_small_float_digits) {
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = bf16[2] constant({500, 0.1})\n}\n",
                   HK_PRINT_SHORT, "constant({500, 0.1001})");
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = f8e5m2[1] constant({0.0234})\n}\n",
                   HK_PRINT_SHORT, "constant({0.023})");
}
END_TEST

/* integers read as int64; an unsigned type compares the bits as uint64 */
START_TEST(test_integer_ranges) {
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = u64[] constant(-1)\n}\n", HK_PRINT_SHORT,
                   "constant(18446744073709551615)");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = u32[] constant(-1)\n}\n", "t:4:27:",
               "value -1 is out of range for literal's primitive type U32 namely [0, 4294967295].");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = s4[] constant(8)\n}\n", "t:4:26:",
               "value 8 is out of range for literal's primitive type S4 namely [-8, 7].");
}
END_TEST

/* shapes XLA infers when the text leaves them out (dot, sparse dot, unary,
 * broadcast of a scalar without dimensions); the others are refused */
START_TEST(test_inferred_shapes) {
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  a = f32[3,4,5]{2,1,0} parameter(0)\n  b = f32[3,5,6]{2,1,0} parameter(1)\n"
      "  ROOT d = dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
      "rhs_contracting_dims={1}\n}\n");
  char *s = hk_shape_to_string(m->entry->root->shape);
  ck_assert_str_eq(s, "f32[3,4,6]{2,1,0}");
  free(s);
  hk_module_free(m);
  m = hk_test_parse("HloModule m\n\nENTRY e {\n  a = f32[2,3]{0,1} parameter(0)\n  ROOT t = tanh(a)\n}\n");
  s = hk_shape_to_string(m->entry->root->shape);
  ck_assert_str_eq(s, "f32[2,3]{0,1}");
  free(s);
  hk_module_free(m);
  expect_print_has("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n"
                   "  ROOT b = f32[2,2] broadcast(p)\n}\n",
                   HK_PRINT_SHORT, "broadcast(p), dimensions={}");
  /* shape-less broadcast: XLA reads dimensions as new major sizes */
  expect_print_has("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT b = broadcast(p), dimensions={}\n}\n",
                   HK_PRINT_SHORT, "b = f32[] broadcast(p), dimensions={}");
  expect_print_has("HloModule m\n\nENTRY e {\n  p = f32[4,6] parameter(0)\n  q = f32[4,2] parameter(1)\n"
                   "  c = concatenate(p, q), dimensions={1}\n  ROOT k = topk(c), k=3, largest=true\n}\n",
                   HK_PRINT_SHORT, "k = (f32[4,3]{1,0}, s32[4,3]{1,0}) topk(c)");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT b = f32[2,2] broadcast(p)\n}\n",
               "t:5:21:", "attribute dimensions is expected but not seen");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = reshape(p)\n}\n",
               "t:5:19:", "cannot infer shape for opcode: reshape");
  expect_error("HloModule m\n\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[4,5] parameter(1)\n"
               "  ROOT d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
               NULL, "failed to infer shape for opcode: dot");
}
END_TEST

/* dim_labels as XLA's lexer and parser read them; '?' keeps a dimension
 * unnamed and prints back in place */
START_TEST(test_dim_labels) {
  const char *pre = "HloModule m\n\nENTRY e {\n  ROOT r = f32[4]{0} custom-call(), custom_call_target=\"t\", dim_labels=";
  char t[512];
  snprintf(t, sizeof t, "%s?b01f_0?1io->b01?f\n}\n", pre);
  expect_print_has(t, HK_PRINT_SHORT, "dim_labels=?b01f_0?1io->b01?f");
  snprintf(t, sizeof t, "%sbf00_01io->bf01\n}\n", pre);
  expect_error(t, "t:4:72:", "expects unique lhs dimension numbers, but sees bf00");
  snprintf(t, sizeof t, "%sb0f_01io->bf01\n}\n", pre);
  expect_error(t, "t:4:72:",
               "input, kernel, and output must have same number of spatial dimensions, but got 1, 2, 2");
  snprintf(t, sizeof t, "%sb3f_0io->bf0\n}\n", pre);
  expect_error(t, "t:4:72:", "expects [0-2bf?] in lhs dimension numbers");
  snprintf(t, sizeof t, "%sbf0_i->bf0\n}\n", pre);
  expect_error(t, "t:4:72:", "expects dim labels pattern");
}
END_TEST

/* a while prints its body before its condition (XLA's called order) */
START_TEST(test_while_computation_order) {
  const char *t =
      "HloModule m\n\ncond {\n  c = s32[] parameter(0)\n  z = s32[] constant(5)\n"
      "  ROOT lt = pred[] compare(c, z), direction=LT\n}\n\n"
      "body {\n  b = s32[] parameter(0)\n  one = s32[] constant(1)\n  ROOT n = s32[] add(b, one)\n}\n\n"
      "ENTRY e {\n  i = s32[] constant(0)\n  ROOT w = s32[] while(i), condition=cond, body=body\n}\n";
  hk_module *m = hk_test_parse(t);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  char *b = strstr(out, "\nbody "), *c = strstr(out, "\ncond ");
  ck_assert_msg(b && c && b < c, "body should print first:\n%s", out);
  free(out);
  hk_module_free(m);
}
END_TEST

/* async-update/done may repeat the chain's thread and computation, not others */
START_TEST(test_async_chain_attributes) {
  const char *pre =
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
      "  s = ((f32[4]), f32[4], s32[]) custom-call-start(p), custom_call_target=\"foo\"\n";
  char t[1024];
  snprintf(t, sizeof t, "%s  ROOT d = f32[4] custom-call-done(s), async_execution_thread=\"other\"\n}\n", pre);
  expect_error(t, "t:7:1:", "Expect async_execution_thread to be main, but got other");
  snprintf(t, sizeof t, "%s  ROOT d = f32[4] custom-call-done(s), async_execution_thread=\"main\"\n}\n", pre);
  hk_module_free(hk_test_parse(t));
  snprintf(t, sizeof t, "%s  ROOT d = f32[4] custom-call-done(p)\n}\n", pre);
  expect_error(t, "t:6:3:", "AsyncUpdate and AsyncDone expect a single operand in the form of");
  expect_error(
      "HloModule m\n\nw0 {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n\n"
      "w1 {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  s = ((f32[4]), f32[4], s32[]) async-start(p), calls=w0\n"
      "  ROOT d = f32[4] async-done(s), calls=w1\n}\n",
      "t:17:1:", "Expect async_wrapped_computation to be w0, but got w1");
}
END_TEST

/* result_accuracy only on XLA's unary ops with it; mode or tolerance */
START_TEST(test_result_accuracy) {
  const char *pre = "HloModule m\n\nENTRY e {\n  x = f32[] parameter(0)\n  ROOT r = f32[] ";
  char t[512];
  snprintf(t, sizeof t, "%sexponential(x), result_accuracy={mode=HIGHEST}\n}\n", pre);
  expect_print_has(t, HK_PRINT_SHORT, "result_accuracy={mode=highest}");
  snprintf(t, sizeof t, "%sexponential(x), result_accuracy={mode=default}\n}\n", pre);
  hk_module *m = hk_test_parse(t);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_null(strstr(out, "result_accuracy"));
  free(out);
  hk_module_free(m);
  snprintf(t, sizeof t, "%sexponential(x), result_accuracy={mode=fast}\n}\n", pre);
  expect_error(t, "t:5:56:", "expects ResultAccuracy type but sees: fast");
  snprintf(t, sizeof t, "%sexponential(x), result_accuracy={1}\n}\n", pre);
  expect_error(t, "t:5:51:", "expects attribute name");
  snprintf(t, sizeof t, "%sexponential(x), result_accuracy={tolerance={ulps=1, bar=2}}\n}\n", pre);
  expect_error(t, "t:5:74:", "invalid attribute name: bar");
  snprintf(t, sizeof t, "%snegate(x), result_accuracy={mode=highest}\n}\n", pre);
  expect_error(t, "t:5:29:", "unexpected attribute \"result_accuracy\"");
}
END_TEST

/* an original value needs the shape written out */
START_TEST(test_origin_needs_shape) {
  expect_error("HloModule m\n\nENTRY e {\n  a = f32[2] parameter(0), origin={{\"a\"}}\n"
               "  ROOT v = abs(a), origin={{\"v\"}}\n}\n",
               "t:5:27:", "expects instruction shape");
}
END_TEST

/* the verifier takes what XLA's HloVerifier takes: dots and convolutions
 * of any operand types (bf16 x s8), the declared result type; and refuses
 * mixed precision elsewhere */
static hk_status *verify_text(const char *t) {
  hk_module *m = hk_test_parse(t);
  hk_verify_options o = hk_verify_defaults();
  hk_status *st = hk_verify_module(m, &o);
  hk_module_free(m);
  return st;
}

START_TEST(test_verifier_mixed_precision) {
  ck_assert_ok(verify_text(
      "HloModule m\n\nENTRY e {\n  a = bf16[2,3] parameter(0)\n  b = s8[3,4] parameter(1)\n"
      "  d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  x = bf16[1,4,2] parameter(2)\n  k = s8[2,2,3] parameter(3)\n"
      "  ROOT c = f32[1,4,3] convolution(x, k), window={size=2 pad=0_1}, dim_labels=b0f_0io->b0f\n}\n"));
  ck_assert_ok(verify_text(
      "HloModule m\n\nENTRY e {\n  a = s8[2,3] parameter(0)\n  b = s32[3,4] parameter(1)\n"
      "  ROOT d = s8[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"));
  hk_status *st = verify_text(
      "HloModule m\n\nENTRY e {\n  a = f32[2] parameter(0)\n  b = bf16[2] parameter(1)\n"
      "  ROOT s = f32[2] add(a, b)\n}\n");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "mixed precision is disallowed"), "%s", st->message);
  hk_status_free(st);
  /* a shape-less dot of two types takes the higher-precision one */
  hk_module *m = hk_test_parse(
      "HloModule m\n\nENTRY e {\n  a = bf16[2,3] parameter(0)\n  b = s32[3,4] parameter(1)\n"
      "  ROOT d = dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  ck_assert_int_eq(m->entry->root->shape->elem, HK_BF16);
  hk_module_free(m);
}
END_TEST

/* parameter numbers are unique per computation (XLA: at the parameter) */
START_TEST(test_duplicate_parameter_number) {
  expect_error("HloModule m\n\nENTRY e {\n  a = s8[] parameter(0)\n  b = s8[] parameter(0)\n"
               "  ROOT a = s8[] add(a, b)\n}\n",
               "t:5:23:", "Duplicate parameter number 0");
  hk_module_free(hk_test_parse("HloModule m\n\nENTRY e {\n  b = s8[] parameter(1)\n  a = s8[] parameter(0)\n"
                               "  ROOT s = s8[] add(a, b)\n}\n"));
}
END_TEST

/* padding dimensions may mix lo_hi and lo_hi_interior; all print with
 * interior once one has it */
START_TEST(test_padding_mixed_forms) {
  expect_print_has("HloModule m\n\nENTRY e {\n  p = f32[2,3] parameter(0)\n  z = f32[] constant(0)\n"
                   "  ROOT q = f32[3,10] pad(p, z), padding=0_1x2_3_1\n}\n",
                   HK_PRINT_SHORT, "padding=0_1_0x2_3_1");
}
END_TEST

/* a dense dimension is unique and ordered (D+ and D~ are refused) */
START_TEST(test_dim_level_types) {
  const hk_shape *s;
  hk_module *m = hk_module_new("m");
  const char *bad = "f32[4]{0:D(D~)}";
  hk_status *st = hk_parse_shape(m, bad, strlen(bad), &s);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "invalid DimLevelType/unique/ordered combination in shape"),
                "%s", st->message);
  hk_status_free(st);
  const char *ok = "f32[4]{0:D(C+~)}";
  ck_assert_ok(hk_parse_shape(m, ok, strlen(ok), &s));
  const char *m2m = "f32[2,3]{0}";
  st = hk_parse_shape(m, m2m, strlen(m2m), &s);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "Dimensions size is 2, but minor to major size is 1."), "%s",
                st->message);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* literal elements as XLA reads them: true/false for 1/0 in any real type,
 * pred only 0 or 1, no decimals for integer types */
START_TEST(test_literal_elements) {
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = (s32[2], f32[2]) constant(({true, 2}, {false, 1.5}))\n}\n",
                   HK_PRINT_SHORT, "constant(( {1, 2}, {0, 1.5} ))");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = pred[2] constant({1, 2})\n}\n", "t:4:33:",
               "value 2 is out of range for literal's primitive type PRED namely [0, 1].");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = s32[] constant(1.5)\n}\n", "t:4:27:",
               "expects integer for primitive type: S32");
  /* every narrow float type prints with its own digits */
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = f8e5m2[2] constant({57344, inf})\n}\n",
                   HK_PRINT_SHORT, "constant({5.7e+04, inf})");
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = f8e4m3fn[2] constant({inf, 448})\n}\n",
                   HK_PRINT_SHORT, "constant({nan, 448})");
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = f4e2m1fn[3] constant({0.5, 6, -0})\n}\n",
                   HK_PRINT_SHORT, "constant({0.5, 6, -0})");
}
END_TEST

/* Shardy round-trip attributes are strings with escaped quotes inside
 * frontend_attributes; they print back unchanged */
START_TEST(test_shardy_frontend_attributes) {
  const char *attr =
      "frontend_attributes={xla.sdy.sharding=\"#sdy.sharding_per_value<[<@mesh, [{\\\"x\\\", ?}, "
      "{\\\"y\\\":(1)2}]>]>\"}";
  char t[1024];
  snprintf(t, sizeof t, "HloModule m\n\nENTRY e {\n  ROOT p = f32[8,16] parameter(0), %s\n}\n", attr);
  expect_print_has(t, HK_PRINT_SHORT, attr);
}
END_TEST

/* a bare element for an array literal is element 0 (XLA ignores its own
 * nesting complaint); one element too many is an error */
START_TEST(test_bare_array_literal) {
  expect_print_has("HloModule m\n\nENTRY e {\n  ROOT c = s8[3] constant(7)\n}\n", HK_PRINT_SHORT,
                   "constant({7, 0, 0})");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = f32[2] constant({1, 2, 3})\n}\n", "t:4:35:",
               "tries to set value 3 to a literal in shape f32[2] at linear index 2, but the index is out of range");
  expect_error("HloModule m\n\nENTRY e {\n  ROOT c = f32[0] constant(1)\n}\n", "t:4:28:",
               "index is out of range");
}
END_TEST

/* shape rules XLA's verifier applies: FFT/IFFT keep the operand shape
 * whatever fft_length says; a tuple-returning reducer gives a tuple */
START_TEST(test_verifier_fft_and_tuple_reducer) {
  ck_assert_ok(verify_text("HloModule m\n\nENTRY e {\n  p = c64[1,1,4] parameter(0)\n"
                           "  ROOT f = c64[1,1,4] fft(p), fft_type=FFT, fft_length={0}\n}\n"));
  hk_status *st = verify_text("HloModule m\n\nENTRY e {\n  p = f32[1,8] parameter(0)\n"
                              "  ROOT f = c64[1,5] fft(p), fft_type=RFFT, fft_length={4}\n}\n");
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "RFFT requires innermost dimensions match fft_length"), "%s",
                st->message);
  hk_status_free(st);
  ck_assert_ok(verify_text(
      "HloModule m\n\nfn {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  s = f32[] add(a, b)\n"
      "  ROOT t = (f32[]) tuple(s)\n}\n\nENTRY e {\n  p = f32[4,3] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = (f32[3]) reduce(p, z), dimensions={0}, to_apply=fn\n}\n"));
}
END_TEST

/* enumerated attribute values and window sub-attributes as XLA checks them */
START_TEST(test_enums_and_windows) {
  const char *pre =
      "HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
      "ENTRY e {\n  p = f32[4,4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = ";
  char t[1024];
  snprintf(t, sizeof t, "%sf32[4,4] fusion(p), kind=kBogus, calls=add\n}\n", pre);
  expect_error(t, "t:12:37:", "expects fusion kind but sees: kBogus");
  snprintf(t, sizeof t, "%sf32[4,4] rng(z, z), distribution=RNG_UNIFORM\n}\n", pre);
  expect_print_has(t, HK_PRINT_SHORT, "distribution=rng_uniform");
  snprintf(t, sizeof t, "%sc64[4,4] fft(p), fft_type=fft, fft_length={4}\n}\n", pre);
  expect_error(t, "t:12:38:", "expects fft type but sees: fft");
  snprintf(t, sizeof t, "%sf32[2,2] reduce-window(p, z), window={size=2x2 stride=2x2 stride=2x2}, to_apply=add\n}\n", pre);
  expect_error(t, "t:12:77:", "sub-attribute 'stride=' already exists");
  snprintf(t, sizeof t, "%sf32[4,4] reduce-window(p, z), window={size=1x1 pad=0_0}, to_apply=add\n}\n", pre);
  expect_error(t, "t:12:49:", "expects 'pad=' has the same size as 'size='");
  snprintf(t, sizeof t, "%sf32[4,4] reduce-window(p, z), window={size=1x1 bogus=1}, to_apply=add\n}\n", pre);
  expect_error(t, "t:12:59:", "unexpected attribute name: bogus");
}
END_TEST


/* Every error reads as XLA words it ("was parsing L:C: error: ..."), after
 * the FILE:LINE:COL of the first; a later one (the definition a duplicate
 * clashes with) follows in the same form. */
START_TEST(test_error_wording) {
  expect_error("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), calls=e\n}\n", "t:3:32: ",
               "t:3:32: was parsing 3:32: error: unexpected attribute \"calls\"");
  expect_error("HloModule m\nc {\n  ROOT a = f32[] constant(1)\n}\nENTRY e {\n  b = f32[] parameter(0)\n"
               "  ROOT g = f32[] add(b, q)\n}\n",
               NULL, "was parsing 7:25: error: instruction does not exist: q\n  ROOT g = f32[] add(b, q)\n"
                     "                        ^");
}
END_TEST

/* Inside a nested computation an instruction needs its name, and an operand
 * with a shape needs a name too: only the single instruction itself may
 * have anonymous operands (XLA's ParseName, "expects name"). */
START_TEST(test_nested_needs_names) {
  const char *no_lhs = "r = f32[] reduce(f32[10], f32[]), dimensions={0}, to_apply=\n{\n"
                       "  f32[] add(f32[] x, f32[] y)\n}";
  expect_error(no_lhs, "t:3:3:", "expects name");
  const char *no_operand_name = "r = f32[] reduce(f32[10], f32[]), dimensions={0}, to_apply=\n{\n"
                                "  s = f32[] add(f32[], f32[])\n}";
  expect_error(no_operand_name, "t:3:17:",
               "cannot parse as an instruction name or as a nested instruction:\n");
  expect_error(no_operand_name, NULL, "was parsing 3:22: error: expects name");
  /* the single instruction itself takes anonymous operands */
  ck_assert_ptr_null(parse_error("r = f32[] add(f32[], f32[])"));
}
END_TEST

/* ParseFrontendAttributes and ParseReplicaGroupsOnly as pieces. */
START_TEST(test_attribute_pieces) {
  hk_module *m = hk_module_new("piece");
  const char *fa = "{attr_a=\"test_a\",attr_b=\"b\",attr_d=\"a/b\"}";
  const hk_kv *kv = NULL;
  int32_t n = 0;
  ck_assert_ok(hk_parse_frontend_attributes(m, fa, strlen(fa), &n, &kv));
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(kv[0].key, "attr_a");
  ck_assert_str_eq(kv[2].value, "a/b");
  hk_status *st = hk_parse_frontend_attributes(m, "{a=\"b\"} x", 9, &n, &kv);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, ":1:9:"), "%s", st->message);
  hk_status_free(st);
  const hk_replica_groups *g = NULL;
  ck_assert_ok(hk_parse_replica_groups(m, "{{0,1},{2,3}}", 13, &g));
  ck_assert_int_eq(g->n_groups, 2);
  ck_assert_int_eq(g->ids[g->group_start[1]], 2);
  ck_assert_ok(hk_parse_replica_groups(m, "[2,2]<=[4]", 10, &g));
  ck_assert_int_eq(g->n_groups, 2);
  st = hk_parse_replica_groups(m, "{{0,1}", 6, &g);
  ck_assert_ptr_nonnull(st);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* XLA's lexer skips blanks between a shape's tokens: "s32 [4]" and
 * "f32[2,3] {0, 1}" are shapes with their layouts; a '{' not followed by an
 * integer or ':' is no layout (a signature's result before its body). */
START_TEST(test_spaced_shapes) {
  const char *t = "HloModule m\nENTRY e (a: s32 [4]) -> f32[2, 3] {\n  a = s32 [4] parameter(0)\n"
                  "  c = f32[2,3] {0, 1} constant({{1,2,3},{4,5,6}})\n"
                  "  ROOT b = f32[2, 3] {1, 0} copy(f32[2,3] {0,1} c)\n}\n";
  expect_print_has(t, HK_PRINT_SHORT, "c = f32[2,3]{0,1} constant(");
  expect_print_has(t, HK_PRINT_SHORT, "ROOT b = f32[2,3]{1,0} copy(c)");
  expect_print_has(t, HK_PRINT_SHORT, "a = s32[4]{0} parameter(0)");
  hk_module *m = hk_module_new("piece");
  const hk_shape *sh = NULL;
  ck_assert_ok(hk_parse_shape(m, "f32[2,3] { 0, 1 }", 17, &sh));
  ck_assert_int_eq(sh->layout->minor_to_major[0], 0);
  hk_status *st = hk_parse_shape(m, "f32[2] {x}", 10, &sh);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, ":1:8:"), "%s", st->message);
  hk_status_free(st);
  hk_module_free(m);
}
END_TEST

/* XLA's InferSelectShape: a scalar predicate selects whole operands; any
 * other predicate has the operands' dimensions. */
START_TEST(test_select_scalar_predicate) {
  const char *pre = "HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n";
  char t[512];
  snprintf(t, sizeof t, "%s  p = pred[] parameter(2)\n  ROOT s = f32[4] select(p, a, b)\n}\n", pre);
  ck_assert_ok(verify_text(t));
  snprintf(t, sizeof t, "%s  p = pred[] parameter(2)\n  ROOT s = select(p, a, b)\n}\n", pre);
  hk_module *m = hk_test_parse(t);
  ck_assert_int_eq(m->entry->root->shape->dims[0], 4);
  hk_module_free(m);
  snprintf(t, sizeof t, "%s  p = pred[2] parameter(2)\n  ROOT s = f32[4] select(p, a, b)\n}\n", pre);
  hk_status *st = verify_text(t);
  ck_assert_ptr_nonnull(st);
  ck_assert_msg(strstr(st->message, "must have the same dimensions"), "%s", st->message);
  hk_status_free(st);
}
END_TEST

/* JAX dumps carry stack frame tables for metadata's stack_frame_id: read
 * before or after the computations, kept, printed after the header line. */
START_TEST(test_stack_frame_tables) {
  const char *body = "ENTRY e {\n  ROOT p = f32[] parameter(0), metadata={op_name=\"x\" stack_frame_id=1}\n}\n";
  const char *tables = "FileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n"
                       "1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}\n\n"
                       "StackFrames\n1 {file_location_id=1 parent_frame_id=0}\n\n";
  char after[1024], before[1024];
  snprintf(after, sizeof after, "HloModule m\n\n%s\n%s", body, tables);
  snprintf(before, sizeof before, "HloModule m\n\n%s\n%s", tables, body);
  for (int k = 0; k < 2; k++) {
    hk_module *m = hk_test_parse(k ? before : after);
    char *out = hk_module_to_string(m, HK_PRINT_SHORT);
    char want[1024];
    snprintf(want, sizeof want, "HloModule m, entry_computation_layout={(f32[])->f32[]}\n\n%s\n", tables);
    ck_assert_msg(!strncmp(out, want, strlen(want)), "got:\n%s", out);
    hk_module *again = hk_test_parse(out);
    char *out2 = hk_module_to_string(again, HK_PRINT_SHORT);
    ck_assert_str_eq(out, out2);
    free(out2);
    hk_module_free(again);
    free(out);
    hk_module_free(m);
  }
  /* a computation may still be named like a table */
  hk_module_free(hk_test_parse("HloModule m\nStackFrames {\n  ROOT p = f32[] parameter(0)\n}\n"));
  expect_error("HloModule m\nFileNames\n1 a\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n", "t:3:3:",
               "expects string");
  expect_error("HloModule m\nStackFrames\n1 {parent=x}\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
               "t:3:11:", NULL);
  expect_error("HloModule m\nFileNames\nFileNames\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n", "t:3:1:",
               "FileNames is defined twice");
}
END_TEST

/* XLA's InferDynamicSliceShape: a rank-1 first start index is the legacy
 * form, one integral index vector with an entry per operand dimension (also
 * for a rank-1 operand); it must be the only index operand. */
START_TEST(test_dynamic_slice_index_vector) {
  ck_assert_ok(verify_text(
      "HloModule m\n\nENTRY e {\n  p = f32[20]{0} parameter(0)\n  i = s32[1]{0} parameter(1)\n"
      "  ROOT d = f32[1]{0} dynamic-slice(p, i), dynamic_slice_sizes={1}\n}\n"));
  ck_assert_ok(verify_text(
      "HloModule m\n\nENTRY e {\n  p = f32[20,20] parameter(0)\n  i = s32[2] parameter(1)\n"
      "  u = f32[2,1] parameter(2)\n  ROOT d = f32[20,20] dynamic-update-slice(p, u, i)\n}\n"));
  const char *bad[] = {
      /* a float index vector */
      "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  c = f32[1] constant({1})\n"
      "  ROOT d = f32[4] dynamic-update-slice(p, c, c)\n}\n",
      /* a vector beside another index */
      "HloModule m\n\nENTRY e {\n  p = f32[4,4] parameter(0)\n  i = s32[1] parameter(1)\n"
      "  j = s32[] parameter(2)\n  ROOT d = f32[1,1] dynamic-slice(p, i, j), dynamic_slice_sizes={1,1}\n}\n",
      /* a vector of the wrong length */
      "HloModule m\n\nENTRY e {\n  p = f32[4,4] parameter(0)\n  i = s32[3] parameter(1)\n"
      "  ROOT d = f32[1,1] dynamic-slice(p, i), dynamic_slice_sizes={1,1}\n}\n",
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    hk_status *st = verify_text(bad[k]);
    ck_assert_msg(st, "verified: %s", bad[k]);
    hk_status_free(st);
  }
}
END_TEST

/* XLA's channel_id is optional (hlo_parser.cc: an optional int64 attribute,
 * printed when it has a value): channel_id=0 is present, prints back, and
 * counts as a channel (use_global_device_ids needs one); absent stays absent. */
START_TEST(test_channel_id_zero) {
  const char *t =
      "HloModule m\n\nENTRY e {\n  p = s32[1,8] parameter(0)\n"
      "  ROOT ag = s32[2,8] all-gather(p), replica_groups={{0,1}}, dimensions={0}, channel_id=0, "
      "use_global_device_ids=true\n}\n";
  expect_print_has(t, HK_PRINT_SHORT, "all-gather(p), channel_id=0, replica_groups={{0,1}}");
  hk_module *m = hk_test_parse(t);
  ck_assert(hk_instr_has_channel_id(m->entry->root));
  ck_assert_int_eq(hk_instr_channel_id(m->entry->root), 0);
  m->config.num_partitions = 2;
  hk_verify_options o = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &o));
  /* a real id given later replaces the written 0 */
  hk_instr_attrs(m->entry->root)->channel_id = 7;
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_msg(strstr(out, "channel_id=7") && !strstr(out, "channel_id=0"), "%s", out);
  free(out);
  hk_module_free(m);
  m = hk_test_parse("HloModule m\n\nENTRY e {\n  p = s32[8] parameter(0)\n"
                    "  ROOT n = s32[8] negate(p)\n}\n");
  ck_assert(!hk_instr_has_channel_id(m->entry->root));
  hk_module_free(m);
  /* send/recv require channel_id; a 0 is one */
  expect_print_has("HloModule m\n\nENTRY e {\n  t = token[] after-all()\n  c = f32[] constant(1)\n"
                   "  s = (f32[], u32[], token[]) send(c, t), channel_id=0\n"
                   "  ROOT d = token[] send-done(s), channel_id=0\n}\n",
                   HK_PRINT_SHORT, "send-done(s), channel_id=0");
}
END_TEST

/* XLA's ParseAttributeHelper: an attribute the opcode does not take is an
 * error at its name, `unexpected attribute "NAME"`, unknown names too (also
 * on custom-call, which takes any attribute XLA knows); ragged-dot's and
 * reshape's own attributes are known. */
START_TEST(test_unknown_attribute) {
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
               "  ROOT n = f32[8] negate(p), foo=bar\n}\n",
               "t:5:30:", "unexpected attribute \"foo\"");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
               "  ROOT n = f32[8] custom-call(p), custom_call_target=\"x\", new_thing={1}\n}\n",
               "t:5:59:", "unexpected attribute \"new_thing\"");
  expect_print_has("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
                   "  ROOT n = f32[2,4] reshape(p), inferred_dimension=0\n}\n",
                   HK_PRINT_SHORT, "reshape(p), inferred_dimension=0");
  expect_print_has("HloModule m\n\nENTRY e {\n  a = f32[6,4] parameter(0)\n  b = f32[2,4,3] parameter(1)\n"
                   "  g = s64[2] parameter(2)\n  ROOT d = f32[6,3] ragged-dot(a, b, g), lhs_contracting_dims={1}, "
                   "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n}\n",
                   HK_PRINT_SHORT, "lhs_ragged_dims={0}, rhs_group_dims={0}");
}
END_TEST

/* Quoted strings are unescaped by absl's CUnescape rules (XLA's lexer), by
 * one decoder for metadata, attributes and shardings alike: any number of
 * hex digits after \x, a value past 0xff is an error at the string, an
 * unknown escape is an error, \u writes UTF-8. */
START_TEST(test_string_escapes) {
  const char *head = "HloModule m\n\nENTRY e {\n  ROOT p = f32[2] parameter(0), ";
  const char *bad[][3] = {
      {"frontend_attributes={a=\"a\\x555\"}\n}\n", "t:4:56:", "Value of \\x555 exceeds 0xff"},
      {"metadata={op_name=\"a\\x123456789abcdef0123\"}\n}\n", "t:4:51:", "exceeds 0xff"},
      {"frontend_attributes={a=\"\\777\"}\n}\n", "t:4:56:", "Value of \\777 exceeds 0xff"},
      {"frontend_attributes={a=\"\\q\"}\n}\n", "t:4:56:", "Unknown escape sequence: \\q"},
      {"metadata={op_name=\"\\xg\"}\n}\n", "t:4:51:", "\\x cannot be followed by a non-hex digit"},
      {"frontend_attributes={a=\"\\u12\"}\n}\n", "t:4:56:", "\\u must be followed by 4 hex digits"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "%s%s", head, bad[i][0]);
    expect_error(text, bad[i][1], bad[i][2]);
  }
  char text[512];
  snprintf(text, sizeof text, "%s%s", head, "frontend_attributes={a=\"\\101\\x42\\x043\\u00e9\\?\"}\n}\n");
  expect_print_has(text, HK_PRINT_SHORT, "frontend_attributes={a=\"ABC\\303\\251?\"}");
  snprintf(text, sizeof text, "%s%s", head, "metadata={op_name=\"\\x41\\x4\"}\n}\n");
  expect_print_has(text, HK_PRINT_SHORT, "metadata={op_name=\"A\\004\"}");
}
END_TEST

/* topk's is_stable (XLA since 2026-06: HloTopKInstruction prints it after
 * largest); a stable top-k is the one hlokit evaluates, so false and true
 * both read, true prints back, false is the default and prints nothing. */
START_TEST(test_topk_is_stable) {
  const char *head = "HloModule m\n\nENTRY e {\n  p = f32[4,6] parameter(0)\n  ROOT k = (f32[4,2], s32[4,2]) ";
  char text[256];
  snprintf(text, sizeof text, "%stopk(p), k=2, largest=true, is_stable=true\n}\n", head);
  expect_print_has(text, HK_PRINT_SHORT, "topk(p), k=2, largest=true, is_stable=true\n");
  snprintf(text, sizeof text, "%stopk(p), is_stable=false, k=2, largest=false\n}\n", head);
  expect_print_has(text, HK_PRINT_SHORT, "topk(p), k=2, largest=false\n");
  snprintf(text, sizeof text, "%stopk(p), k=2, largest=true, is_stable=1\n}\n", head);
  expect_error(text, "t:5:71:", "expects true or false");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT n = f32[8] negate(p), is_stable=true\n}\n",
               "t:5:30:", "unexpected attribute \"is_stable\"");
}
END_TEST

/* collective-broadcast's has_dynamic_root (XLA since 2026 prints it on every
 * one): false reads as the broadcast it is; true is refused at its value. */
START_TEST(test_collective_broadcast_dynamic_root) {
  const char *head = "HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n"
                     "  ROOT cb = f32[8] collective-broadcast(p), replica_groups={{1,0}}, ";
  char text[256];
  snprintf(text, sizeof text, "%shas_dynamic_root=false\n}\n", head);
  expect_print_has(text, HK_PRINT_SHORT, "collective-broadcast(p), replica_groups={{1,0}}\n");
  snprintf(text, sizeof text, "%shas_dynamic_root=true\n}\n", head);
  expect_error(text, "t:5:86:", "has_dynamic_root=true (a root chosen at run time) is not supported");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT n = f32[8] negate(p), has_dynamic_root=false\n}\n",
               "t:5:30:", "unexpected attribute \"has_dynamic_root\"");
}
END_TEST

/* Opcodes XLA's parser builds from their operands: the declared shape goes
 * (send: (operand, u32[], token[]); recv: element 0 of the declared tuple;
 * recv-done: (data, token[]); send-done, outfeed, after-all: token[];
 * add-dependency: operand 0's), and an outfeed takes its operand's shape as
 * outfeed_shape; a recv declared without a tuple is an error at its line. */
START_TEST(test_shapes_xla_builds) {
  const char *text =
      "HloModule m\nENTRY e {\n  p0 = f32[4,3] parameter(0)\n  token0 = token[] after-all()\n"
      "  send = f32[4,3] send(p0, token0), channel_id=1\n  send-done = s32[] send-done(send), channel_id=1\n"
      "  recv = (f32[2], s8[]) recv(token0), channel_id=2\n  recv-done = f32[7] recv-done(recv), channel_id=2\n"
      "  o = (s32[]) outfeed(p0, token0)\n  ROOT d = f32[9] add-dependency(p0, o)\n}\n";
  hk_module *m = hk_test_parse(text);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  const char *want[] = {
      "send = (f32[4,3]{1,0}, u32[], token[]) send(p0, token0), channel_id=1\n",
      "send-done = token[] send-done(send), channel_id=1\n",
      "recv = (f32[2]{0}, u32[], token[]) recv(token0), channel_id=2\n",
      "recv-done = (f32[2]{0}, token[]) recv-done(recv), channel_id=2\n",
      "o = token[] outfeed(p0, token0), outfeed_shape=f32[4,3]{1,0}\n",
      "ROOT d = f32[4,3]{1,0} add-dependency(p0, o)\n",
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++)
    ck_assert_msg(strstr(out, want[k]), "want \"%s\" in:\n%s", want[k], out);
  free(out);
  hk_module_free(m);
  expect_print_has("HloModule m\nENTRY e {\n  p0 = f32[4,3] parameter(0)\n  t = token[] after-all()\n"
                   "  ROOT o = token[] outfeed(p0, t), outfeed_shape=f32[4,3]{0,1}\n}\n",
                   HK_PRINT_SHORT, "outfeed(p0, t), outfeed_shape=f32[4,3]{0,1}\n");
  expect_error("HloModule m\nENTRY e {\n  t = token[] after-all()\n  ROOT r = f32[2] recv(t), channel_id=2\n}\n",
               "t:4:3:", "recv expects a tuple shape");
}
END_TEST

/* text parses; its short print holds every line of want, and that print
 * parses and prints again the same. */
static void expect_roundtrip(const char *text, const char *const *want, size_t n) {
  hk_module *m = hk_test_parse(text);
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  for (size_t k = 0; k < n; k++) ck_assert_msg(strstr(out, want[k]), "want \"%s\" in:\n%s", want[k], out);
  hk_module *again = hk_test_parse(out);
  char *out2 = hk_module_to_string(again, HK_PRINT_SHORT);
  ck_assert_str_eq(out, out2);
  free(out2);
  free(out);
  hk_module_free(again);
  hk_module_free(m);
}

/* p#0 and p#1#0 (XLA's compact get-tuple-element operands): one
 * get-tuple-element per prefix, made at its first use, named with '_',
 * used again after; a non-tuple or an index out of range is an error at
 * the operand, as is a declared shape that is not the element's. */
START_TEST(test_compact_tuple_access) {
  const char *text = "HloModule m\n\nENTRY e {\n  p = (f32[4], (f32[2], s32[])) parameter(0)\n"
                     "  a = f32[4] negate(p#0)\n  b = f32[2] negate(%p#1#0)\n"
                     "  ROOT t = (f32[4], f32[2], f32[2]) tuple(a, b, f32[2] p#1#0)\n}\n";
  const char *want[] = {
      "  p_0 = f32[4]{0} get-tuple-element(p), index=0\n  a = f32[4]{0} negate(p_0)\n",
      "  p_1 = (f32[2]{0}, s32[]) get-tuple-element(p), index=1\n"
      "  p_1_0 = f32[2]{0} get-tuple-element(p_1), index=0\n  b = f32[2]{0} negate(p_1_0)\n",
      "  ROOT t = (f32[4]{0}, f32[2]{0}, f32[2]{0}) tuple(a, b, p_1_0)\n",
  };
  expect_roundtrip(text, want, sizeof want / sizeof *want);
  const char *head = "HloModule m\n\nENTRY e {\n  p = (f32[4], f32[2]) parameter(0)\n  ROOT a = f32[4] negate(";
  char t[256];
  snprintf(t, sizeof t, "%sp#2)\n}\n", head);
  expect_error(t, "t:5:26:", "GTE index 2 out of bounds for shape: (f32[4], f32[2])");
  snprintf(t, sizeof t, "%sp#0#1)\n}\n", head);
  expect_error(t, "t:5:26:", "GTE operand must be tuple, but has shape: f32[4]");
  snprintf(t, sizeof t, "%sf32[2] p#0)\n}\n", head);
  expect_error(t, "t:5:26:", "operand shape f32[2] does not match instruction shape f32[4]");
  snprintf(t, sizeof t, "%sp#x)\n}\n", head);
  expect_error(t, "t:5:28:", "expects integer");
}
END_TEST

/* convolution's convolution_kind (unset prints nothing), sparsity_config
 * and block_scaling_config (their lhs/rhs sub-attributes checked, kept as
 * written) print after the dimension numbers, in XLA's order. */
START_TEST(test_convolution_newer_attributes) {
  const char *head = "HloModule m\n\nENTRY e {\n  a = f32[1,4,4,1] parameter(0)\n  b = f32[1,1,1,1] parameter(1)\n"
                     "  ROOT c = f32[1,4,4,1] convolution(a, b), ";
  char t[512];
  snprintf(t, sizeof t, "%sblock_scaling_config={rhs={zero_idx=2 steps=1x1x2} lhs={scale_idx=0}}, "
           "convolution_kind=dgrad, sparsity_config={rhs={idx=1 stride=2 sparsity=2x4}}, "
           "operand_precision={high,default}, window={size=1x1}, dim_labels=b01f_01io->b01f\n}\n", head);
  const char *want[] = {"convolution(a, b), window={size=1x1}, dim_labels=b01f_01io->b01f, convolution_kind=dgrad, "
                        "operand_precision={high,default}, sparsity_config={rhs={idx=1 stride=2 sparsity=2x4}}, "
                        "block_scaling_config={rhs={zero_idx=2 steps=1x1x2} lhs={scale_idx=0}}\n"};
  expect_roundtrip(t, want, 1);
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, convolution_kind=unset\n}\n", head);
  expect_print_has(t, HK_PRINT_SHORT, "convolution(a, b), dim_labels=b01f_01io->b01f\n");
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, convolution_kind=bogus\n}\n", head);
  expect_error(t, "t:6:89:", "expects convolution kind but sees: bogus");
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, sparsity_config={lhs={sparsity=2 dimension=1}}\n}\n", head);
  expect_error(t, "t:6:103:", "expects 'num_non_zero:block_size'");
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, sparsity_config={lhs={sparsity=2x4, dimension=1}}\n}\n", head);
  expect_error(t, "t:6:106:", "expects attribute name");
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, block_scaling_config={mid={}}\n}\n", head);
  expect_error(t, "t:6:94:", "unknown attribute");
  snprintf(t, sizeof t, "%sdim_labels=b01f_01io->b01f, block_scaling_config={rhs={zero_idx=2 steps=q}}\n}\n", head);
  expect_error(t, "t:6:116:", "expects steps in form NxMxK");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT n = f32[8] negate(p), convolution_kind=fprop\n}\n",
               "t:5:30:", "unexpected attribute \"convolution_kind\"");
}
END_TEST

/* mode= on all-reduce, all-reduce-start and reduce-scatter: XLA reads it
 * and keeps nothing, so it prints nothing; its value is checked. */
START_TEST(test_collective_group_mode) {
  const char *head = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[4] parameter(0)\n";
  char t[512];
  snprintf(t, sizeof t, "%s  ROOT c = f32[4] all-reduce(p), replica_groups={}, to_apply=add, mode=cross_replica\n}\n", head);
  const char *want[] = {"  ROOT c = f32[4]{0} all-reduce(p), replica_groups={}, to_apply=add\n"};
  expect_roundtrip(t, want, 1);
  snprintf(t, sizeof t, "%s  ROOT c = f32[2] reduce-scatter(p), channel_id=1, replica_groups={{0,1}}, "
           "use_global_device_ids=true, dimensions={0}, to_apply=add, mode=flattened_id\n}\n", head);
  expect_print_has(t, HK_PRINT_SHORT, "dimensions={0}, to_apply=add\n");
  snprintf(t, sizeof t, "%s  ROOT c = f32[4] all-reduce(p), to_apply=add, mode=sideways\n}\n", head);
  expect_error(t, "t:11:53:", "expects collective op group mode but sees: sideways");
  snprintf(t, sizeof t, "%s  ROOT c = f32[4] negate(p), mode=cross_replica\n}\n", head);
  expect_error(t, "t:11:30:", "unexpected attribute \"mode\"");
}
END_TEST

/* origin= in newer XLA's forms: {[synthetic_call]}, a tuple tree of
 * original arrays and a call hierarchy; checked, kept as written. */
START_TEST(test_origin_forms) {
  const char *text = "HloModule m\n\nENTRY e {\n  p = (f32[4], f32[2]) parameter(0), origin={({\"p\" {0}}, {\"q\"}), [\"call.1/call.2\"]}\n"
                     "  g = f32[4] get-tuple-element(p), index=0, origin={{}}\n"
                     "  ROOT c = f32[4] copy(g), origin={[synthetic_call]}\n}\n";
  const char *want[] = {"parameter(0), origin={({\"p\" {0}}, {\"q\"}), [\"call.1/call.2\"]}\n",
                        "index=0, origin={{}}\n", "copy(g), origin={[synthetic_call]}\n"};
  expect_roundtrip(text, want, sizeof want / sizeof *want);
  const char *head = "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0), origin=";
  char t[256];
  snprintf(t, sizeof t, "%s{[bogus]}\n}\n", head);
  expect_error(t, "t:4:37:", "Expects 'synthetic_call' after '[' for a synthetic_call value.");
  snprintf(t, sizeof t, "%s{{\"p\"}, [\"a\"], [\"b\"]}\n}\n", head);
  expect_error(t, "t:4:50:", "Duplicate call_hierarchy in original_value.");
  snprintf(t, sizeof t, "%s{{\"p\"} 7}\n}\n", head);
  expect_error(t, "t:4:42:", "Expects a tuple tree of original arrays in original_value field.");
  snprintf(t, sizeof t, "%s{{\"p\" 3}}\n}\n", head);
  expect_error(t, "t:4:41:", "Expects '} at end of OriginalArray'");
}
END_TEST

/* The module's origin_recovery_table (entries one after another, the
 * recovery module's text checked by parsing it) and debug_attributes:
 * checked, printed as written. */
START_TEST(test_module_recovery_and_debug_tables) {
  const char *body = "\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT c = f32[4] copy(p)\n}\n";
  const char *ort = "origin_recovery_table={{\"a\"} : {\"b\" {1}}, \"HloModule r\\n\\nENTRY e {\\n  ROOT p = f32[4] parameter(0)\\n}\\n\"\n"
                    "  {\"c\"}: {\"d\"}}";
  const char *dbg = "debug_attributes={{\"p\"}: {log_mode=fusion_debugger, callback_id=3}, "
                    "{\"c\" {0}}: ({partitioned=true}, {op_id=7, log_mode=default})}";
  char t[1024], w1[512], w2[512];
  snprintf(t, sizeof t, "HloModule m, %s, %s%s", ort, dbg, body);
  snprintf(w1, sizeof w1, ", %s", ort);
  snprintf(w2, sizeof w2, ", %s", dbg);
  const char *want[] = {w1, w2};
  expect_roundtrip(t, want, 2);
  snprintf(t, sizeof t, "HloModule m, origin_recovery_table={{\"a\"} {\"b\"}}%s", body);
  expect_error(t, "t:1:43:", "Expected format: <original_array>: <original_array>, <HloModule>");
  snprintf(t, sizeof t, "HloModule m, origin_recovery_table={{\"a\"} : {\"b\"}, \"HloModule r ENTRY {\"}%s", body);
  expect_error(t, "t:1:52:", "the recovery module does not parse: <recovery module>:1:19:");
  snprintf(t, sizeof t, "HloModule m, debug_attributes={{\"p\"}: {log_mode=nope}}%s", body);
  expect_error(t, "t:1:49:", "Invalid debug_log_mode value: nope");
  snprintf(t, sizeof t, "HloModule m, debug_attributes={{\"p\"}: {colour=1}}%s", body);
  expect_error(t, "t:1:40:", "Unknown debug attribute: colour");
  snprintf(t, sizeof t, "HloModule m, debug_attributes={{\"p\"} {op_id=1}}%s", body);
  expect_error(t, "t:1:38:", "Expects ':' in debug_attributes entry");
}
END_TEST

/* async-start and async-update take output_to_operand_aliasing (XLA since
 * 2025); it prints after the operands of the -start/-update sugar and
 * reads back there; async-done takes none. */
START_TEST(test_async_output_aliasing) {
  const char *head = "HloModule m\n\nc {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n\n"
                     "ENTRY e {\n  p = f32[4] parameter(0)\n";
  char t[512];
  snprintf(t, sizeof t, "%s  s = ((f32[4]), f32[4], u32[]) async-start(p), calls=c, output_to_operand_aliasing={{}: (0, {})}\n"
           "  u = ((f32[4]), f32[4], u32[]) async-update(s), output_to_operand_aliasing={{}: (0, {})}\n"
           "  ROOT d = f32[4] async-done(u)\n}\n", head);
  const char *want[] = {"negate-start(p), output_to_operand_aliasing={{}: (0, {})}\n",
                        "negate-update(s), output_to_operand_aliasing={{}: (0, {})}\n", "negate-done(u)\n"};
  expect_roundtrip(t, want, 3);
  snprintf(t, sizeof t, "%s  s = ((f32[4]), f32[4], u32[]) async-start(p), calls=c\n"
           "  ROOT d = f32[4] async-done(s), output_to_operand_aliasing={{}: (0, {})}\n}\n", head);
  expect_error(t, "t:11:34:", "unexpected attribute \"output_to_operand_aliasing\"");
}
END_TEST

/* What newer XLA writes that hlokit cannot hold (its ABI has no form for
 * it) is refused at its place, saying so: buffer shapes, the opcodes
 * hlokit's list lacks, and an unreduced reduction other than sum. */
START_TEST(test_newer_forms_refused) {
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[] parameter(0), sharding={mesh['x'=2,'y'=2], [], unreduced=max{'x'}}\n"
               "  ROOT c = f32[] copy(p)\n}\n",
               "t:4:70:", "unreduced=max/min (newer XLA) is not supported");
  expect_error("HloModule m\n\nENTRY e {\n  p = b(f32[4]) parameter(0)\n  ROOT c = b(f32[4]) copy(p)\n}\n",
               "t:4:7:", "buffer shapes b(...) (newer XLA) are not supported");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT s = f32[4] scan(p), dimensions={0}, num_carries=0\n}\n",
               "t:5:19:", "opcode scan (newer XLA) is not supported: hlokit's opcode list has no scan");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT s = f32[4] acosh(p)\n}\n",
               "t:5:19:", "opcode acosh (newer XLA) is not supported");
  expect_error("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT s = f32[4] frobnicate(p)\n}\n",
               "t:5:19:", "unknown opcode: frobnicate");
}
END_TEST

/* A parameter of `shape` with sharding `named` prints `want` (XLA's
 * V3ToV2Sharding of it, in classic form). */
static void expect_named(const char *shape, const char *named, const char *want) {
  char t[2048], w[1024];
  snprintf(t, sizeof t, "HloModule m\n\nENTRY e {\n  ROOT p = %s parameter(0), sharding=%s\n}\n", shape, named);
  snprintf(w, sizeof w, "sharding=%s\n", want);
  expect_print_has(t, HK_PRINT_LONG, w);
}

/* Named (mesh) shardings of newer XLA, the forms of hlo_parser_test.cc's
 * ParseNamedSharding* tests, each converted as HloSharding::V3ToV2Sharding
 * does: sharded axes in dim order, then manual, unreduced, and the rest of
 * the mesh as one replicated subgroup, over the mesh's reshaped devices. */
START_TEST(test_named_shardings) {
  const char *m4 = "{mesh['a'=2,'b'=4,'c'=3,'d'=8], ";
  char t[512];
#define NAMED(shape, rest, want) (snprintf(t, sizeof t, "%s%s", m4, rest), expect_named(shape, t, want))
  NAMED("f32[8,6]", "[{'a'}, {'b'}]}", "{devices=[2,4,24]<=[192] last_tile_dim_replicate}");
  NAMED("f32[8,6]", "[{'a'}, {'c', 'b'}]}", "{devices=[2,12,8]<=[2,4,3,8]T(0,2,1,3) last_tile_dim_replicate}");
  NAMED("f32[8,6]", "[{'b', 'a'}, {'c', 'd', ?}]}", "{devices=[8,24]<=[2,4,24]T(1,0,2)}");
  NAMED("f32[8,6]", "[{'a'}, {'b':(2)2}]}", "{devices=[2,2,48]<=[2,2,2,24]T(0,2,1,3) last_tile_dim_replicate}");
  NAMED("f32[8,6]", "[{'b':(2)2}, {'d':(4)2, 'c'}]}",
        "{devices=[2,6,16]<=[4,2,3,4,2]T(1,4,2,0,3) last_tile_dim_replicate}");
  NAMED("f32[8,6]", "[{}, {'b'}], unreduced={'d':(4)2}}",
        "{devices=[1,4,2,24]<=[2,4,12,2]T(1,3,0,2) last_tile_dims={unreduced, replicated}}");
  NAMED("f32[8]", "[{'a'}], manual={'d':(4)2}}", "{devices=[2,2,48]<=[2,48,2]T(0,2,1) last_tile_dims={manual, replicated}}");
  NAMED("f32[8]", "[{'a'}], replicated={'c'}, unreduced={'d':(4)2}, manual={'b':(2)2}, "
                  "metadata={{op_name=\"foo\"}, {op_name=\"bar\"}}}",
        "{devices=[2,2,2,24]<=[2,2,2,12,2]T(0,2,4,1,3) last_tile_dims={manual, unreduced, replicated} "
        "metadata={{op_name=\"foo\"}, {op_name=\"bar\"}}}");
#undef NAMED
  expect_named("f32[8]", "{mesh['a'=2,'b'=4,'c'=4,'d'=2], device_ids=([4,16]T(1,0)), [{'a'}]}",
               "{devices=[2,32]<=[4,2,8]T(1,0,2) last_tile_dim_replicate}");
  /* a device list stays a list: mesh [[0,2],[1,3]], x sharded */
  expect_named("f32[8]", "{mesh['x'=2,'y'=2], device_ids=(0,2,1,3), [{'x'}]}",
               "{devices=[2,2]0,2,1,3 last_tile_dim_replicate}");
  expect_named("f32[8]", "{mesh['x'=2,'y'=2], device_ids=(3,1,2,0), [{'y'}]}",
               "{devices=[2,2]2,3,0,1 last_tile_dim_replicate}");
  expect_named("f32[8]", "{mesh[], replicated}", "{replicated}");
  expect_named("f32[8]", "{mesh['a'=2,'b'=4], replicated}", "{replicated}");
  expect_named("f32[8]", "{mesh['a'=2,'b'=4], [{'a'}], replicated={'b'}}", "{devices=[2,4]<=[8] last_tile_dim_replicate}");
  expect_named("f32[8]", "{maximal_mesh[device_id=5]}", "{maximal device=5}");
  expect_named("f32[8,6]", "{mesh['a.b'=2,'<axis> def'=4,'z/w'=2], [{'a.b'}, {'<axis> def':(2)2, 'z/w'}]}",
               "{devices=[2,4,2]<=[2,2,4]T(0,2,1) last_tile_dim_replicate}");
  expect_named("f32[8]", "{mesh['a'=2,'b'=4], unreduced}", "{unreduced}");
  expect_named("f32[8]", "{mesh['a'=2,'b'=4], manual}", "{manual}");
  expect_named("f32[8]", "{mesh['a'=2,'b'=4], replicated, metadata={{op_name=\"foo\"}}}",
               "{replicated metadata={op_name=\"foo\"}}");
  expect_named("f32[8,6]", "{mesh['x'=2,'y'=2], [{'y'}, {}], manual={'x'}}",
               "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual}}");
  expect_named("f32[]", "{mesh['x'=2,'y'=2], [], unreduced=sum{'x'}}",
               "{devices=[2,2]<=[4] last_tile_dims={unreduced, replicated}}");
  expect_named("f32[8]", "{mesh[\"x\"=2,\"y\"=2], [{\"1\"}]}", "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  expect_named("(f32[8,6], f32[8,6], f32[8,6], f32[8,6])",
               "{{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'d', 'c'}, {'a', 'b'}]}, {mesh['a'=2,'b'=4,'c'=3,'d'=8], replicated}, "
               "{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'d':(2)2, 'b'}, {'a', ?}], unreduced={'c'}}, "
               "{mesh['a'=2,'b'=4,'c'=3,'d'=8], [{'d', 'c'}, {'a', 'b'}], metadata={{op_name=\"foo\"}, {op_name=\"bar\"}}}}",
               "{{devices=[24,8]<=[8,3,8]T(2,1,0)}, {replicated}, "
               "{devices=[8,2,3,4]<=[2,4,6,2,2]T(3,1,0,2,4) last_tile_dims={unreduced, replicated}}, "
               "{devices=[24,8]<=[8,3,8]T(2,1,0) metadata={{op_name=\"foo\"}, {op_name=\"bar\"}}}}");
  expect_named("(f32[8], f32[8], f32[8], f32[8])",
               "{{replicated}, {mesh['a'=2,'b'=4], replicated}, {maximal device=5}, {maximal_mesh[device_id=5]}}",
               "{{replicated}, {replicated}, {maximal device=5}, {maximal device=5}}");
  expect_named("(f32[8,6], f32[8])", "{{mesh['a'=2,'b'=2], [{'a'}, {}]}, {devices=[2,2]<=[4] last_tile_dim_replicate}}",
               "{{devices=[2,1,2]<=[4] last_tile_dim_replicate}, {devices=[2,2]<=[4] last_tile_dim_replicate}}");
}
END_TEST

/* The same meshes and shardings as test_sdy's xla_export_known_answers
 * (XLA's convertToHloSharding answers for #sdy.sharding), written as named
 * shardings: both conversions place every tile on the same devices. */
START_TEST(test_named_agrees_with_shardy_answers) {
  static const char *const cases[][3] = {
      {"f32[8,8]", "{mesh['axis_0'=2,'axis_1'=4,'axis_2'=4], [{'axis_2'}, {'axis_0', 'axis_1'}]}", "{devices=[4,8]<=[8,4]T(1,0)}"},
      {"f32[8,16]", "{mesh['axis_0'=2,'axis_1'=4,'axis_2'=4], [{'axis_1'}, {'axis_2'}]}",
       "{devices=[4,4,2]<=[2,16]T(1,0) last_tile_dim_replicate}"},
      {"f32[8,8]", "{mesh['axis_0'=2,'axis_1'=4,'axis_2'=4], [{}, {'axis_0', 'axis_2'}]}",
       "{devices=[1,8,4]<=[2,4,4]T(0,2,1) last_tile_dim_replicate}"},
      {"f32[8,8]", "{mesh['x'=8,'y'=4], [{'y'}, {'x':(2)2}]}", "{devices=[4,2,4]<=[2,2,2,4]T(3,1,0,2) last_tile_dim_replicate}"},
      {"f32[8,16]", "{mesh['x'=8,'y'=4], [{'x':(1)2}, {'x':(2)4}]}", "{devices=[2,4,4]<=[32] last_tile_dim_replicate}"},
      {"f32[8,16]", "{mesh['x'=8,'y'=4], [{'x':(1)2, 'x':(4)2}, {}]}",
       "{devices=[4,1,8]<=[2,2,2,4]T(0,2,1,3) last_tile_dim_replicate}"},
      {"f32[16,32]", "{mesh['a'=2,'b'=2,'c'=2,'d'=2], [{'b', ?}, {?}]}", "{devices=[2,1,8]<=[2,2,4]T(1,0,2) last_tile_dim_replicate}"},
      {"f32[8,8]", "{mesh['axis_0'=2,'axis_1'=2,'axis_2'=2], device_ids=(0,2,4,6,1,3,5,7), [{'axis_2'}, {'axis_0', 'axis_1'}]}",
       "{devices=[2,4]0,4,1,5,2,6,3,7}"},
      {"f32[8,8]", "{mesh['axis_0'=2,'axis_1'=2,'axis_2'=2], device_ids=(0,2,4,6,1,3,5,7), [{}, {'axis_0', 'axis_2'}]}",
       "{devices=[1,4,2]0,4,2,6,1,5,3,7 last_tile_dim_replicate}"},
      {"f32[8,8]", "{mesh['axis_0'=2,'axis_1'=2,'axis_2'=2], device_ids=(0,2,4,6,1,3,5,7), [{'axis_1','axis_0'}, {}]}",
       "{devices=[4,1,2]0,2,1,3,4,6,5,7 last_tile_dim_replicate}"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) expect_named(cases[k][0], cases[k][1], cases[k][2]);
}
END_TEST

/* Named sharding errors, at their place, in XLA's words where it has them. */
START_TEST(test_named_sharding_errors) {
  const char *head = "HloModule m\n\nENTRY e {\n  ROOT p = f32[4,8] parameter(0), sharding=";
  char t[512];
#define BAD(sh, where, what) (snprintf(t, sizeof t, "%s%s\n}\n", head, sh), expect_error(t, where, what))
  BAD("{mesh['x'=2,'y'=2], [{'q'}, {}]}", "t:4:66:", "axis 'q' is not a valid axis name or index in mesh mesh['x'=2,'y'=2]");
  BAD("{mesh['x'=2,'y'=2], [{'2'}, {}]}", "t:4:66:", "axis index 2 is out of bounds for mesh mesh['x'=2,'y'=2] which has 2 axes");
  BAD("{mesh['x'=2,'y'=2], device_ids=(0,1,2), [{'x'}, {}]}", "t:4:82:",
      "Expected 4 device_ids based on mesh axes, but got 3");
  BAD("{mesh['x'=2,'y'=2], device_ids=([8]), [{'x'}, {}]}", "t:4:80:",
      "mesh device_ids iota size 8 does not match the product of the mesh axis sizes 4");
  BAD("{mesh['x'=2,'y'=2], device_ids=(0,1,1,3), [{'x'}, {}]}", "t:4:45:", "Device ids must be a permutation");
  BAD("{mesh['x'=2,'x'=2], [{'x'}, {}]}", "t:4:45:", "Mesh has duplicate axis names.");
  BAD("{mesh['x'=2,'y'=2], [{'x'}, {'x'}]}", "t:4:73:", "axis 'x' overlaps another use of it");
  BAD("{mesh['x'=4,'y'=2], [{'x':(1)3}, {}]}", "t:4:66:", "Pre-size and size must divide the full axis size.");
  BAD("{mesh['x'=4,'y'=2], [{'x':(1)4}, {}]}", "t:4:66:", "Sub-axis size must be strictly less than the full axis size.");
  BAD("{mesh['x'=2,'y'=2], [{'x', ?, 'y'}, {}]}", "t:4:74:", "Saw axis ref after '?'");
  BAD("{mesh['x'=2,'y'=2], [{'x'}, {}], foo={'y'}}", "t:4:77:", "unknown attribute in named sharding");
  BAD("{maximal_mesh[device=1]}", "t:4:58:", "expected device_id= attribute in maximal_mesh");
#undef BAD
}
END_TEST

/* Mesh replica groups (MeshAxesReplicaGroupList) as XLA flattens them: the
 * grouped axes (sub-axes split out) transposed minor, the rest in mesh order. */
START_TEST(test_mesh_replica_groups) {
  const char *head = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
                     "ENTRY e {\n  p = f32[8] parameter(0)\n  ROOT c = f32[8] all-reduce(p), channel_id=1, replica_groups=";
  const char *tail = ", use_global_device_ids=true, to_apply=add\n}\n";
  static const char *const cases[][2] = {
      {"mesh['x'=8] {'x'}", "replica_groups=[1,8]<=[8],"},
      {"mesh['axis_0'=2,'axis_1'=2] {'axis_1'}", "replica_groups=[2,2]<=[4],"},
      {"mesh['axis_0'=2,'axis_1'=2] {'axis_0'}", "replica_groups=[2,2]<=[2,2]T(1,0),"},
      {"mesh['a'=8,'b'=2] {'a':(2)2, 'b'}", "replica_groups=[4,4]<=[2,2,2,2]T(0,2,1,3),"},
      {"mesh['a'=8] {'a':(4)2, 'a':(1)2}", "replica_groups=[2,4]<=[2,4]T(1,0),"},
      {"mesh['x'=2,'y'=2], device_ids=(0,2,1,3) {'y'}", "replica_groups={{0,2},{1,3}},"},
  };
  char t[1024];
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    snprintf(t, sizeof t, "%s%s%s", head, cases[k][0], tail);
    expect_print_has(t, HK_PRINT_LONG, cases[k][1]);
  }
  snprintf(t, sizeof t, "%s%s%s", head, "mesh['x'=8] {'y'}", tail);
  expect_error(t, "t:11:76:", "axis 'y' is not a valid axis name or index in mesh mesh['x'=8]");
  snprintf(t, sizeof t, "%s%s%s", head, "mesh['x'=2,'y'=2], device_ids=(0,1) {'y'}", tail);
  expect_error(t, "t:11:99:", "Expected 4 device_ids based on mesh axes, but got 2");
}
END_TEST

/* An -update or -done of async sugar keeps its own origin= (XLA prints it
 * on each op of the chain); the -start's goes with the wrapped op. */
START_TEST(test_async_sugar_origin) {
  const char *text = "HloModule m\n\nENTRY e {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                     "  s = ((s32[], s32[]), s32[], s32[]) add-start(a, b), origin={{\"v3\"}}\n"
                     "  u = ((s32[], s32[]), s32[], s32[]) add-update(s), origin={{\"v3\"}}\n"
                     "  ROOT d = s32[] add-done(u), origin={{\"v3\" {0}}}\n}\n";
  const char *want[] = {"add-start(a, b), origin={{\"v3\"}}\n", "add-update(s), origin={{\"v3\"}}\n",
                        "add-done(u), origin={{\"v3\" {0}}}\n"};
  expect_roundtrip(text, want, 3);
  /* the start's statistics and origin print among its other common
   * attributes, in XLA's order (they were ahead of them all) */
  const char *t2 = "HloModule m\n\nENTRY e {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                   "  s = ((s32[], s32[]), s32[], s32[]) add-start(a, b), backend_config=\"x\", "
                   "metadata={op_name=\"n\"}, frontend_attributes={k=\"v\"}, "
                   "statistics={visualizing_index=1,stat-1=33}, origin={{\"v\"}}, sharding={replicated}\n"
                   "  ROOT d = s32[] add-done(s)\n}\n";
  const char *want2[] = {"add-start(a, b), sharding={replicated}, frontend_attributes={k=\"v\"}, "
                         "statistics={visualizing_index=1,stat-1=33}, origin={{\"v\"}}, metadata={op_name=\"n\"}, "
                         "backend_config=\"x\"\n"};
  expect_roundtrip(t2, want2, 1);
}
END_TEST

static Suite *parser_xla_suite(void) {
  Suite *s = suite_create("parser_xla");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_fuzz_regressions);
  tcase_add_test(tc, test_string_escapes);
  tcase_add_test(tc, test_literal_past_memory_is_an_error);
  tcase_add_test(tc, test_bare_element_literal_stays_lazy);
  tcase_add_test(tc, test_anonymous_operands);
  tcase_add_test(tc, test_names_unique_module_wide);
  tcase_add_test(tc, test_signature_result_matches_root);
  tcase_add_test(tc, test_nan_literals);
  tcase_add_test(tc, test_small_float_digits);
  tcase_add_test(tc, test_integer_ranges);
  tcase_add_test(tc, test_inferred_shapes);
  tcase_add_test(tc, test_dim_labels);
  tcase_add_test(tc, test_while_computation_order);
  tcase_add_test(tc, test_async_chain_attributes);
  tcase_add_test(tc, test_result_accuracy);
  tcase_add_test(tc, test_origin_needs_shape);
  tcase_add_test(tc, test_verifier_mixed_precision);
  tcase_add_test(tc, test_duplicate_parameter_number);
  tcase_add_test(tc, test_padding_mixed_forms);
  tcase_add_test(tc, test_dim_level_types);
  tcase_add_test(tc, test_literal_elements);
  tcase_add_test(tc, test_shardy_frontend_attributes);
  tcase_add_test(tc, test_bare_array_literal);
  tcase_add_test(tc, test_verifier_fft_and_tuple_reducer);
  tcase_add_test(tc, test_enums_and_windows);
  tcase_add_test(tc, test_literal_with_unbounded_dim);
  tcase_add_test(tc, test_error_wording);
  tcase_add_test(tc, test_nested_needs_names);
  tcase_add_test(tc, test_attribute_pieces);
  tcase_add_test(tc, test_spaced_shapes);
  tcase_add_test(tc, test_select_scalar_predicate);
  tcase_add_test(tc, test_stack_frame_tables);
  tcase_add_test(tc, test_dynamic_slice_index_vector);
  tcase_add_test(tc, test_channel_id_zero);
  tcase_add_test(tc, test_unknown_attribute);
  tcase_add_test(tc, test_topk_is_stable);
  tcase_add_test(tc, test_shapes_xla_builds);
  tcase_add_test(tc, test_collective_broadcast_dynamic_root);
  tcase_add_test(tc, test_compact_tuple_access);
  tcase_add_test(tc, test_convolution_newer_attributes);
  tcase_add_test(tc, test_collective_group_mode);
  tcase_add_test(tc, test_origin_forms);
  tcase_add_test(tc, test_module_recovery_and_debug_tables);
  tcase_add_test(tc, test_async_output_aliasing);
  tcase_add_test(tc, test_newer_forms_refused);
  tcase_add_test(tc, test_named_shardings);
  tcase_add_test(tc, test_named_agrees_with_shardy_answers);
  tcase_add_test(tc, test_named_sharding_errors);
  tcase_add_test(tc, test_mesh_replica_groups);
  tcase_add_test(tc, test_async_sugar_origin);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(parser_xla_suite)
