/* test_print_parallel.c - Check suite for printing a big computation (host/text/print_lines.c): the same bytes whatever HLOKIT_THREADS says, buffered or streamed (hk_print_module_stream). */
#include "testutil.h"

/* Under valgrind (every instruction costs ~50x): fewer prints. */
static bool under_valgrind(void) { return hk_test_iterations(20) < 20; }

/* Instructions in a big computation: past the printer's two-thread
 * threshold (2^18). */
static int big_n(void) { return under_valgrind() ? 270000 : 300000; }

/* The module printed with the automatic thread count (what the hlokit
 * executable asks for) and HLOKIT_THREADS set to `threads` (NULL: unset,
 * the CPUs), after `prefix` already in the buffer. */
static char *print_with(const hk_module *m, hk_print_form form, const char *threads,
                        const char *prefix) {
  hk_set_worker_threads(0);
  if (threads) setenv("HLOKIT_THREADS", threads, 1);
  else unsetenv("HLOKIT_THREADS");
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, prefix);
  hk_print_module(m, form, &b);
  unsetenv("HLOKIT_THREADS");
  return b.data;
}

/* hk_print_module_stream's sink for the tests: appends to a buffer,
 * counts the pieces, notes the biggest; returns fail_at's piece number
 * (1-based) once it is reached, and is not to be called after. */
typedef struct pieces {
  hk_buf text;
  size_t n, biggest;
  size_t fail_at;
  bool called_after_failing;
} pieces;

static int collect_piece(void *ctx, const char *data, size_t len) {
  pieces *p = ctx;
  if (p->fail_at && p->n >= p->fail_at) p->called_after_failing = true;
  p->n++;
  if (len > p->biggest) p->biggest = len;
  hk_buf_put(&p->text, data, len);
  return p->fail_at && p->n == p->fail_at ? (int)p->n : 0;
}

/* The module streamed with HLOKIT_THREADS set to `threads` (NULL: unset). */
static void stream_with(const hk_module *m, hk_print_form form, const char *threads, pieces *p) {
  hk_set_worker_threads(0);
  if (threads) setenv("HLOKIT_THREADS", threads, 1);
  else unsetenv("HLOKIT_THREADS");
  hk_buf_init(&p->text);
  p->n = p->biggest = 0;
  p->called_after_failing = false;
  int r = hk_print_module_stream(m, form, collect_piece, p);
  ck_assert_int_eq(r, p->fail_at && p->n >= p->fail_at ? (int)p->fail_at : 0);
  unsetenv("HLOKIT_THREADS");
}

/* The streamed print is the buffered one, handed on in pieces of a few
 * megabytes at most, on one thread and on two. */
static void check_stream_equals(const hk_module *m, hk_print_form form, const char *seq) {
  for (int t = 0; t < (under_valgrind() ? 1 : 2); t++) {
    pieces p = {.fail_at = 0};
    stream_with(m, form, t ? "1" : NULL, &p);
    ck_assert_uint_eq(p.text.len, strlen(seq));
    ck_assert(memcmp(p.text.data, seq, p.text.len) == 0);
    ck_assert_uint_gt(p.n, 1);
    ck_assert_uint_lt(p.biggest, 4u << 20);
    hk_buf_free(&p.text);
  }
}

/* The default (two-thread) print equals the sequential one byte for byte,
 * in both forms and after a prefix; returns the sequential short print. */
static char *check_parallel_equals_sequential(const hk_module *m) {
  char *keep = NULL;
  int n_prefix = under_valgrind() ? 1 : 2;
  for (int f = under_valgrind() ? 1 : 0; f < 2; f++) {
    hk_print_form form = f ? HK_PRINT_SHORT : HK_PRINT_LONG;
    for (int k = 0; k < n_prefix; k++) {
      const char *prefix = k ? "// some text already in the buffer\n" : "";
      char *seq = print_with(m, form, "1", prefix);
      char *par = print_with(m, form, NULL, prefix);
      ck_assert_uint_eq(strlen(par), strlen(seq));
      ck_assert(memcmp(par, seq, strlen(seq)) == 0);
      if (!under_valgrind()) {   /* any other value means two threads too */
        char *two = print_with(m, form, "2", prefix);
        ck_assert(strcmp(two, seq) == 0);
        free(two);
      }
      free(par);
      if (!k) check_stream_equals(m, form, seq);
      if (f && !k) keep = seq;
      else free(seq);
    }
  }
  return keep;
}

static hk_module *parse(const char *text) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, strlen(text), "big.hlo", &m));
  return m;
}

/* Line k of a chain: attributes vary, so the printer's caches and pieces
 * get exercised in both threads. */
static void chain_line(hk_buf *b, const char *chain, int k, const char *prev, bool root) {
  hk_buf_printf(b, "  %s%s%d = f32[8]{0} ", root ? "ROOT " : "", chain, k);
  if (k % 997 == 0) hk_buf_printf(b, "call(%s), to_apply=twice", prev);
  else if (k % 7 == 0) hk_buf_printf(b, "add(%s, p), sharding={devices=[2]0,1}", prev);
  else if (k % 11 == 0) hk_buf_printf(b, "negate(%s), metadata={op_name=\"n%d\"}", prev, k);
  else if (k % 13 == 0) hk_buf_printf(b, "multiply(%s, %s)", prev, prev);
  else hk_buf_printf(b, "exponential(%s)", prev);
  hk_buf_puts(b, "\n");
}

static const char *kHeader =
    "HloModule big, entry_computation_layout={(f32[8]{0})->f32[8]{0}}\n\n"
    "twice {\n  x = f32[8]{0} parameter(0)\n  ROOT y = f32[8]{0} add(x, x)\n}\n\n"
    "ENTRY e {\n  p = f32[8]{0} parameter(0)\n";

/* One chain of n instructions (the list is the post order), ROOT at
 * root_at, the instructions after it dead code; `extra` (may be NULL)
 * is appended to line extra_at. */
static char *chain_text(int n, int root_at, int extra_at, const char *extra) {
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, kHeader);
  char prev[32] = "p";
  for (int k = 1; k <= n; k++) {
    chain_line(&b, "a", k, prev, k == root_at);
    if (k == extra_at && extra) {
      b.len--;   /* before the newline */
      hk_buf_puts(&b, extra);
      hk_buf_puts(&b, "\n");
    }
    snprintf(prev, sizeof prev, "a%d", k);
  }
  hk_buf_puts(&b, "}\n\n");
  return b.data;
}

/* Two chains a and b interleaved in the list, joined by the root: the
 * post order prints all of a, then all of b (the list is not the post
 * order, so the lines of both threads are put in order afterwards). */
static char *interleaved_text(int n) {
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, kHeader);
  char pa[32] = "p", pb[32] = "p";
  for (int k = 1; k <= n / 2; k++) {
    chain_line(&b, "a", k, pa, false);
    chain_line(&b, "b", k, pb, false);
    snprintf(pa, sizeof pa, "a%d", k);
    snprintf(pb, sizeof pb, "b%d", k);
  }
  hk_buf_printf(&b, "  ROOT t = f32[8]{0} add(%s, %s)\n}\n\n", pa, pb);
  return b.data;
}

/* Parses text and checks its two-thread print against the one-thread
 * print; returns the one-thread short print. */
static char *print_checked(const char *text) {
  hk_module *m = parse(text);
  char *seq = check_parallel_equals_sequential(m);
  hk_module_free(m);
  return seq;
}

/* A chain in list order prints as it was written (the generator writes
 * XLA's form), ROOT in the middle, on two threads as on one. */
START_TEST(test_chain_root_in_middle) {
  int n = big_n();
  char *text = chain_text(n, n * 3 / 5, 0, NULL);
  char *seq = print_checked(text);
  ck_assert_str_eq(seq, text);
  free(seq);
  free(text);
}
END_TEST

/* ROOT near either end: in the worker's part and in the caller's. */
START_TEST(test_chain_root_near_ends) {
  int n = big_n();
  int at[2] = {3, n - 2};
  for (int k = 0; k < 2; k++) {
    char *text = chain_text(n, at[k], 0, NULL);
    char *seq = print_checked(text);
    ck_assert_str_eq(seq, text);
    free(seq);
    free(text);
  }
}
END_TEST

/* The list is not the post order: the lines are reordered, the same. */
START_TEST(test_not_post_order) {
  int n = big_n();
  char *text = interleaved_text(n);
  char *seq = print_checked(text);
  /* the post order: a1..a(n/2), then b1..b(n/2), then the root */
  const char *a_last = strstr(seq, "  b1 = ");
  ck_assert_ptr_nonnull(a_last);
  char name[32];
  snprintf(name, sizeof name, "  a%d = ", n / 2);
  const char *a_end = strstr(seq, name);
  ck_assert_ptr_nonnull(a_end);
  ck_assert(a_end < a_last);
  ck_assert_ptr_null(strstr(a_last, "  a1 = "));
  free(seq);
  free(text);
}
END_TEST

/* A control edge (in the worker's part, then in the caller's): the list
 * walk gives up and the instructions are walked instead, the same way. */
START_TEST(test_control_edges_fall_back) {
  int n = big_n();
  int at[2] = {50, n - 50};
  for (int k = 0; k < 2; k++) {
    char extra[64];
    snprintf(extra, sizeof extra, ", control-predecessors={a%d}", at[k] - 2);
    char *text = chain_text(n, n, at[k], extra);
    char *seq = print_checked(text);
    ck_assert_ptr_nonnull(strstr(seq, extra));
    free(seq);
    free(text);
  }
}
END_TEST

/* An operand listed after its user (a rewrite): the post order moves the
 * operand's chain first, through the DFS over the instructions. */
START_TEST(test_operand_listed_late) {
  int n = big_n();
  char *text = interleaved_text(n);
  hk_module *m = parse(text);
  hk_computation *e = m->entry;
  char last_b[32];
  snprintf(last_b, sizeof last_b, "b%d", n / 2);
  hk_instr *a1 = hk_computation_find_instr(e, "a1");
  hk_instr *bn = hk_computation_find_instr(e, last_b);
  ck_assert_ptr_nonnull(a1);
  ck_assert_ptr_nonnull(bn);
  hk_instr_set_operand(a1, 0, bn);
  char *seq = check_parallel_equals_sequential(m);
  /* b's chain now comes first, a1 right after its end */
  char want[64];
  snprintf(want, sizeof want, "  b%d = ", n / 2);
  const char *b_end = strstr(seq, want);
  const char *a_1 = strstr(seq, "  a1 = ");
  ck_assert_ptr_nonnull(b_end);
  ck_assert_ptr_nonnull(a_1);
  ck_assert(b_end < a_1);
  free(seq);
  hk_module_free(m);
  free(text);
}
END_TEST

/* A sink that fails ends the print: its value comes back and it is not
 * called again, on one thread and on two. */
START_TEST(test_stream_stops_at_failing_sink) {
  char *text = chain_text(big_n(), big_n(), 0, NULL);
  hk_module *m = parse(text);
  for (int t = 0; t < 2; t++) {
    pieces p = {.fail_at = 2};
    stream_with(m, HK_PRINT_SHORT, t ? "1" : NULL, &p);
    ck_assert_uint_eq(p.n, 2);
    ck_assert(!p.called_after_failing);
    ck_assert_uint_lt(p.text.len, strlen(text));
    hk_buf_free(&p.text);
  }
  hk_module_free(m);
  free(text);
}
END_TEST

static Suite *print_parallel_suite(void) {
  Suite *s = suite_create("print_parallel");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_chain_root_in_middle);
  tcase_add_test(tc, test_chain_root_near_ends);
  tcase_add_test(tc, test_not_post_order);
  tcase_add_test(tc, test_control_edges_fall_back);
  tcase_add_test(tc, test_operand_listed_late);
  tcase_add_test(tc, test_stream_stops_at_failing_sink);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(print_parallel_suite)
