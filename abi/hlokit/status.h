/* status.h - hk_status: a code and a message, returned by every fallible call.
 *
 * A status is a pointer: NULL means OK, anything else is a heap-allocated
 * error the caller owns and frees with hk_status_free().  This keeps the
 * success path free of allocation and lets errors carry arbitrary text
 * (file:line:col for parse errors, the pass and instruction for a failing
 * pass).  HK_RET_CHECK records the failing condition, file and line, the way
 * XLA's RET_CHECK does. */
#ifndef HLOKIT_STATUS_H
#define HLOKIT_STATUS_H

#include "export.h"

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

typedef enum hk_code {
  HK_OK = 0,
  HK_INVALID_ARGUMENT = 3,   /* bad input: text, options, module */
  HK_NOT_FOUND = 5,
  HK_ALREADY_EXISTS = 6,
  HK_FAILED_PRECONDITION = 9,
  HK_UNIMPLEMENTED = 12,
  HK_INTERNAL = 13,          /* RET_CHECK failures */
} hk_code;

typedef struct hk_status {
  hk_code code;
  char *message;   /* NUL-terminated, owned by the status */
} hk_status;

/* Creates an error status with a printf-style message. */
hk_status *hk_error(hk_code code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
hk_status *hk_verror(hk_code code, const char *fmt, va_list ap);
/* Prepends "prefix: " to an error's message (returns the same status). */
hk_status *hk_status_prefix(hk_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hk_status_free(hk_status *st);
const char *hk_code_name(hk_code code);

/* Out of memory, the one policy: hlokit stops the process.  A failed
 * allocation is never turned into a status (a status says what the input
 * or the caller got wrong, and every caller would have to unwind a
 * half-built IR for a condition it cannot fix); the library calls
 * hk_out_of_memory, which writes "hlokit: out of memory" to stderr and
 * aborts.  Check an allocation with hk_check_alloc(malloc(n)); plugins
 * follow the same rule.  ABI 1.4. */
_Noreturn void hk_out_of_memory(void);
static inline void *hk_check_alloc(void *p) {
  if (!p) hk_out_of_memory();
  return p;
}

/* Return early with the status of an expression that failed. */
#define HK_TRY(expr)                      \
  do {                                    \
    hk_status *hk_try_st_ = (expr);       \
    if (hk_try_st_) return hk_try_st_;    \
  } while (0)

/* RET_CHECK: an internal invariant.  The message names the condition, the
 * file and the line, followed by an optional explanation. */
#define HK_RET_CHECK(cond, ...)                                             \
  do {                                                                      \
    if (!(cond))                                                            \
      return hk_status_prefix(hk_error(HK_INTERNAL, "" __VA_ARGS__),        \
                              "%s:%d: RET_CHECK failure (%s)", __FILE__,    \
                              __LINE__, #cond);                             \
  } while (0)

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
