/* testutil.h - shared helpers for the Check suites. */
#ifndef HK_TESTUTIL_H
#define HK_TESTUTIL_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlokit/hlokit.h"

/* Fails the test with the status message if st is an error. */
#define ck_assert_ok(st)                                                  \
  do {                                                                    \
    hk_status *ck_st_ = (st);                                             \
    if (ck_st_) {                                                         \
      ck_abort_msg("unexpected error: %s", ck_st_->message);              \
    }                                                                     \
  } while (0)

/* main() for a test file whose suite is built by `fn`.  CK_FORK is left to
 * the environment (run-checks.sh sets CK_FORK=no under valgrind). */
#define HK_TEST_MAIN(fn)                                                  \
  int main(void) {                                                        \
    Suite *s_ = fn();                                                     \
    SRunner *r_ = srunner_create(s_);                                     \
    srunner_run_all(r_, CK_NORMAL);                                       \
    int failed_ = srunner_ntests_failed(r_);                              \
    srunner_free(r_);                                                     \
    return failed_ ? EXIT_FAILURE : EXIT_SUCCESS;                         \
  }

/* The conformance corpus folder (../shared/conformance by default). */
static inline const char *hk_test_conformance_dir(void) {
  const char *d = getenv("HLOKIT_CONFORMANCE_DIR");
  return d ? d : "../shared/conformance";
}

/* Path of `rel` in the build folder of the running test binary
 * ($(BUILD)/tests/x -> $(BUILD)/rel: "hlokit", "libhlokit.so", ...). */
static inline void hk_test_build_path(const char *rel, char *out, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ck_assert(n > 0);
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  int w = snprintf(out, cap, "%s/../%s", exe, rel);
  ck_assert(w > 0 && (size_t)w < cap);
}

/* Path of build plugin `name` (e.g. "stock"): $(BUILD)/plugins/name.so. */
static inline void hk_test_plugin_path(const char *name, char *out, size_t cap) {
  char rel[128];
  snprintf(rel, sizeof rel, "plugins/%.64s.so", name);
  hk_test_build_path(rel, out, cap);
}

/* Writes text to path (the test fails if it cannot). */
static inline void hk_test_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

/* The whole of file path, NUL-terminated and malloc'ed; NULL if it cannot
 * be opened. */
static inline char *hk_test_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
  ck_assert_ptr_nonnull(s);
  size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
  s[got] = '\0';
  fclose(f);
  return s;
}

/* The source tree's abi/ folder, resolved into out (PATH_MAX bytes):
 * $HLOKIT_ABI_DIR, ./abi, or ../abi beside this file. */
static inline void hk_test_abi_dir(char *out) {
  const char *env = getenv("HLOKIT_ABI_DIR");
  if (env && realpath(env, out)) return;
  if (realpath("abi", out)) return;
  char guess[4096];
  snprintf(guess, sizeof guess, "%s", __FILE__);
  char *slash = strrchr(guess, '/');
  snprintf(slash ? slash + 1 : guess, sizeof guess - (size_t)(slash ? slash + 1 - guess : 0),
           "../abi");
  ck_assert_msg(realpath(guess, out) != NULL, "cannot find abi/ (set HLOKIT_ABI_DIR)");
}

/* Iterations for a fuzz or sweep loop: n normally, n/20 (at least 1) when
 * scripts/run-checks.sh runs the suite under valgrind (HLOKIT_VALGRIND=1),
 * where every iteration costs ~50x more. */
static inline int hk_test_iterations(int n) {
  const char *v = getenv("HLOKIT_VALGRIND");
  if (!v || !*v || *v == '0') return n;
  return n / 20 > 0 ? n / 20 : 1;
}

/* True in the ASan/UBSan build's run (make test sets HLOKIT_SAN=1) or under
 * valgrind: a sweep over the whole conformance corpus, which the
 * conformance runner covers anyway, can skip or sample itself there. */
static inline bool hk_test_slow_build(void) {
  const char *s = getenv("HLOKIT_SAN"), *v = getenv("HLOKIT_VALGRIND");
  return (s && *s && *s != '0') || (v && *v && *v != '0');
}

/* Parses text or fails the test. */
static inline hk_module *hk_test_parse(const char *text) {
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, strlen(text), "test", &m));
  return m;
}

/* The instruction named `name` in any computation of m (names are unique
 * per module), or fails the test. */
static inline hk_instr *hk_test_find(hk_module *m, const char *name) {
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_instr *i = hk_computation_find_instr(m->computations[k], name);
    if (i) return i;
  }
  ck_abort_msg("no instruction %s", name);
  return NULL;
}

/* Parameter num of c, registered as such. */
static inline hk_instr *hk_test_param(hk_computation *c, int64_t num, const hk_shape *s,
                                      const char *name) {
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, name);
  hk_instr_attrs(p)->parameter_number = num;
  hk_computation_register_param(c, p);
  return p;
}

/* The last instruction of opcode op (computations in module order), NULL
 * if there is none. */
static inline hk_instr *hk_test_last_op(const hk_module *m, hk_opcode op) {
  hk_instr *found = NULL;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->opcode == op) found = i;
  return found;
}

/* Number of instructions with opcode op in the whole module. */
static inline int64_t hk_test_count_op(const hk_module *m, hk_opcode op) {
  int64_t n = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) n += i->opcode == op;
  return n;
}

/* How many instructions of an opcode a test expects. */
typedef struct hk_test_op_count {
  hk_opcode op;
  int64_t n;
} hk_test_op_count;

/* Asserts each {opcode, count} of the list, naming the opcode that is off:
 * hk_test_expect_ops(m, {HK_OP_ALL_GATHER, 0}, {HK_OP_ALL_TO_ALL, 1}). */
#define hk_test_expect_ops(m, ...) \
  hk_test_expect_ops_((m), (const hk_test_op_count[]){__VA_ARGS__}, \
                      sizeof((const hk_test_op_count[]){__VA_ARGS__}) / sizeof(hk_test_op_count))
static inline void hk_test_expect_ops_(const hk_module *m, const hk_test_op_count *c, size_t n) {
  for (size_t k = 0; k < n; k++) {
    int64_t got = hk_test_count_op(m, c[k].op);
    ck_assert_msg(got == c[k].n, "%s: %lld instructions, expected %lld", hk_opcode_name(c[k].op),
                  (long long)got, (long long)c[k].n);
  }
}

#ifdef HLOKIT_HOST_PIPELINE_H
/* A registry holding build plugin `name` (tests that include
 * pipeline/pipeline.h before this header). */
static inline hk_registry *hk_test_registry_with(const char *name) {
  char path[4096];
  hk_test_plugin_path(name, path, sizeof path);
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT));
  return reg;
}
#endif

/* Runs registered pass `name` (options in pipeline syntax, NULL for the
 * defaults) over m, checks the result verifies, returns `changed`. */
static inline bool hk_test_run_pass(hk_registry *reg, hk_module *m, const char *name,
                                    const char *opts) {
  hk_status *err = NULL;
  hk_pass *p = hk_registry_create_pass(reg, name, opts, &err);
  ck_assert_ok(err);
  ck_assert_ptr_nonnull(p);
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  hk_pass_destroy(p);
  hk_verify_options vo = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(m, &vo));
  return changed;
}

/* The rest of an entry (after its first line `in_decl`) whose
 * ragged-all-to-all on 2 devices sends an update whose input offset plus
 * size overflows int64 (test_eval, test_eval_sample). */
#define HK_TEST_RAGGED_OVERFLOW_BODY(in_decl)                                                    \
  in_decl                                                                                          \
  "  io = s64[4] constant({9223372036854775807, 0, 0, 0})\n  ss = s64[4] constant({1, 0, 0, 0})\n" \
  "  oo = s64[4] constant({0, 0, 0, 0})\n  m1 = f32[] constant(-1)\n"                              \
  "  o = f32[4] broadcast(m1), dimensions={}\n"                                                    \
  "  ROOT r = f32[4] ragged-all-to-all(in, o, io, ss, oo, ss), channel_id=1, replica_groups={{0,1}}\n}\n"

#endif
