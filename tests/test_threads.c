/* test_threads.c - a program that links libhlokit.so and parses and prints
 * a 10^6-instruction module runs on one thread unless it asks for more
 * (hk_set_worker_threads); asked, the library does use a second one. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"

/* Every thread the library starts goes through here: this definition in
 * the executable comes before libc's in libhlokit.so's symbol lookup. */
static atomic_int threads_started;
typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

__attribute__((visibility("default"))) int pthread_create(pthread_t *t, const pthread_attr_t *a,
                                                          void *(*fn)(void *), void *arg) {
  static create_fn real;
  if (!real) {
    void *sym = dlsym(RTLD_NEXT, "pthread_create");
    memcpy(&real, &sym, sizeof real);
  }
  atomic_fetch_add(&threads_started, 1);
  return real(t, a, fn, arg);
}

/* Threads of this process now (/proc/self/task). */
static int live_threads(void) {
  DIR *d = opendir("/proc/self/task");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* A chain of n adds over one parameter. */
static char *chain_module(int n, size_t *len) {
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "HloModule chain\n\nENTRY e {\n  a0 = f32[8]{0} parameter(0)\n");
  for (int i = 1; i < n; i++)
    hk_buf_printf(&b, "  %sa%d = f32[8]{0} add(a%d, a%d)\n", i == n - 1 ? "ROOT " : "", i, i - 1,
                  i - 1);
  hk_buf_puts(&b, "}\n");
  *len = b.len;
  return b.data;
}

/* Parses and prints the module; the printed text has every line. */
static void parse_and_print(const char *text, size_t len, int n) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, len, "chain.hlo", &m));
  ck_assert_int_eq(m->entry->n_instrs, n);
  hk_buf out;
  hk_buf_init(&out);
  hk_print_module(m, HK_PRINT_SHORT, &out);
  ck_assert(out.len > (size_t)n * 20);
  hk_buf_free(&out);
  hk_module_free(m);
}

START_TEST(one_thread_unless_asked) {
  unsetenv("HLOKIT_THREADS");
  int n = hk_test_iterations(20) < 20 ? 300000 : 1000000;   /* valgrind: past 2^18 still */
  size_t len;
  char *text = chain_module(n, &len);
  ck_assert_int_eq(hk_worker_threads(), 1);
  ck_assert_int_eq(live_threads(), 1);
  parse_and_print(text, len, n);
  ck_assert_int_eq(atomic_load(&threads_started), 0);
  ck_assert_int_eq(live_threads(), 1);

  /* Asked for two, the same work starts the prefault helper and the
   * printer's second thread (so the count above could have failed). */
  hk_set_worker_threads(2);
  parse_and_print(text, len, n);
  ck_assert_int_gt(atomic_load(&threads_started), 0);
  free(text);
}
END_TEST

static Suite *threads_suite(void) {
  Suite *s = suite_create("threads");
  TCase *t = tcase_create("library");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, one_thread_unless_asked);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(threads_suite)
