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

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  *len = fread(b, 1, (size_t)n, f);
  b[*len] = 0;
  fclose(f);
  return b;
}

START_TEST(test_fuzz_regressions) {
  DIR *d = opendir("tests/fuzz_regressions");
  ck_assert_msg(d, "tests/fuzz_regressions is missing (run from the repository root)");
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "tests/fuzz_regressions/%s", e->d_name);
    size_t len = 0;
    char *text = slurp(path, &len);
    ck_assert_msg(text, "cannot read %s", path);
    parse_print_reparse(text, len);
    free(text);
    n++;
  }
  closedir(d);
  ck_assert_int_ge(n, 2);
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

static Suite *parser_xla_suite(void) {
  Suite *s = suite_create("parser_xla");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_fuzz_regressions);
  tcase_add_test(tc, test_anonymous_operands);
  tcase_add_test(tc, test_names_unique_module_wide);
  tcase_add_test(tc, test_signature_result_matches_root);
  tcase_add_test(tc, test_nan_literals);
  tcase_add_test(tc, test_small_float_digits);
  tcase_add_test(tc, test_integer_ranges);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(parser_xla_suite)
