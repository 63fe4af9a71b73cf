/* test_files.c - Check suite for reading input files: hk_buf_read_file and
 * hk_file_bytes (mapped regular files, read-in pipes, errors). */
#include <errno.h>

#include "testutil.h"

/* Writes text to a fresh temporary file; returns its path (static). */
static const char *temp_file_with(const char *text, size_t len) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/hk-test-files-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
  close(fd);
  return path;
}

static const char kModule[] =
    "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n";

START_TEST(buf_read_file_appends_and_terminates) {
  const char *path = temp_file_with(kModule, sizeof kModule - 1);
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, ">>");
  ck_assert_ok(hk_buf_read_file(&b, path));
  ck_assert_uint_eq(b.len, 2 + sizeof kModule - 1);
  ck_assert_int_eq(memcmp(b.data + 2, kModule, sizeof kModule - 1), 0);
  ck_assert_int_eq(b.data[b.len], 0);
  hk_buf_free(&b);
  unlink(path);
}
END_TEST

START_TEST(file_bytes_maps_a_regular_file) {
  const char *path = temp_file_with(kModule, sizeof kModule - 1);
  hk_file_bytes f;
  ck_assert_ok(hk_file_bytes_open(path, &f));
  ck_assert_uint_eq(f.len, sizeof kModule - 1);
  ck_assert_int_eq(memcmp(f.data, kModule, f.len), 0);
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(f.data, f.len, path, &m));   /* parsed in place */
  hk_file_bytes_close(&f);
  ck_assert_ptr_null(f.data);
  ck_assert_str_eq(m->entry->root->name, "n");   /* the module owns its strings */
  hk_module_free(m);
  unlink(path);
}
END_TEST

START_TEST(file_bytes_of_an_empty_file) {
  const char *path = temp_file_with("", 0);
  hk_file_bytes f;
  ck_assert_ok(hk_file_bytes_open(path, &f));
  ck_assert_uint_eq(f.len, 0);
  ck_assert_ptr_nonnull(f.data);
  hk_file_bytes_close(&f);
  unlink(path);
}
END_TEST

START_TEST(file_bytes_reads_a_pipe) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  ck_assert_int_eq(write(fds[1], kModule, sizeof kModule - 1), (ssize_t)(sizeof kModule - 1));
  close(fds[1]);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fds[0]);
  hk_file_bytes f;
  ck_assert_ok(hk_file_bytes_open(path, &f));
  ck_assert_uint_eq(f.len, sizeof kModule - 1);
  ck_assert_int_eq(memcmp(f.data, kModule, f.len), 0);
  hk_file_bytes_close(&f);
  close(fds[0]);
}
END_TEST

START_TEST(missing_file_is_not_found) {
  hk_file_bytes f;
  hk_status *st = hk_file_bytes_open("/nonexistent/hk-test.hlo", &f);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_NOT_FOUND);
  ck_assert_ptr_nonnull(strstr(st->message, "/nonexistent/hk-test.hlo"));
  hk_status_free(st);
  hk_buf b;
  hk_buf_init(&b);
  st = hk_buf_read_file(&b, "/nonexistent/hk-test.hlo");
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_NOT_FOUND);
  hk_status_free(st);
  hk_buf_free(&b);
}
END_TEST

/* A mapped file of n chain instructions (~20 MB at 500K: the parser gives
 * back the pages it has gone past), line `bad_line` broken when not 0. */
static char *big_chain(int n, int bad_line) {
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "HloModule big\n\nENTRY e {\n  a0 = f32[8]{0} parameter(0)\n");
  for (int k = 1; k <= n; k++) {
    if (k + 4 == bad_line) hk_buf_printf(&b, "  a%d = f32[8]{0} negate(a%d, nope)\n", k, k - 1);
    else hk_buf_printf(&b, "  %sa%d = f32[8]{0} exponential(a%d)\n", k == n ? "ROOT " : "", k, k - 1);
  }
  hk_buf_puts(&b, "}\n\n");
  return b.data;
}

/* What the parser read past and gave back reads the same again: a big
 * mapped module parses to what it says, and an error near its end is
 * placed on its line (the location is counted from the start). */
START_TEST(file_bytes_parsed_past_reads_again) {
  int n = hk_test_iterations(20) < 20 ? 250000 : 500000;
  char *text = big_chain(n, 0);
  const char *path = temp_file_with(text, strlen(text));
  hk_file_bytes f;
  ck_assert_ok(hk_file_bytes_open(path, &f));
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(f.data, f.len, path, &m));
  ck_assert_int_eq(memcmp(f.data, text, f.len), 0);   /* the bytes are all still there */
  hk_file_bytes_close(&f);
  ck_assert_int_eq(m->entry->n_instrs, n + 1);
  char *printed = hk_module_to_string(m, HK_PRINT_SHORT);
  ck_assert_ptr_nonnull(strstr(printed, "ROOT a"));
  free(printed);
  hk_module_free(m);
  unlink(path);
  free(text);

  int bad = n;   /* a line in the last megabytes */
  text = big_chain(n, bad);
  path = temp_file_with(text, strlen(text));
  ck_assert_ok(hk_file_bytes_open(path, &f));
  hk_status *st = hk_parse_module(f.data, f.len, path, &m);
  ck_assert_ptr_nonnull(st);
  char want[64];
  snprintf(want, sizeof want, ":%d:", bad);
  ck_assert_msg(strstr(st->message, want), "%s", st->message);
  hk_status_free(st);
  hk_file_bytes_close(&f);
  unlink(path);
  free(text);
}
END_TEST

static Suite *files_suite(void) {
  Suite *s = suite_create("files");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, buf_read_file_appends_and_terminates);
  tcase_add_test(tc, file_bytes_maps_a_regular_file);
  tcase_add_test(tc, file_bytes_of_an_empty_file);
  tcase_add_test(tc, file_bytes_reads_a_pipe);
  tcase_add_test(tc, missing_file_is_not_found);
  tcase_add_test(tc, file_bytes_parsed_past_reads_again);
  tcase_set_timeout(tc, 300);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(files_suite)
