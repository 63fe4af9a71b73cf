/* testutil.h - shared helpers for the Check suites. */
#ifndef HK_TESTUTIL_H
#define HK_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#endif
