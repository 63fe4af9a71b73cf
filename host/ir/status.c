/* status.c - hk_status: heap-allocated error values with formatted messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hlokit/status.h"

static char *vformat(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char *s = malloc((size_t)n + 1);
  if (!s) hk_out_of_memory();
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  return s;
}

hk_status *hk_verror(hk_code code, const char *fmt, va_list ap) {
  hk_status *st = malloc(sizeof *st);
  if (!st) hk_out_of_memory();
  st->code = code == HK_OK ? HK_INTERNAL : code;
  st->message = vformat(fmt ? fmt : "", ap);
  return st;
}

hk_status *hk_error(hk_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = hk_verror(code, fmt, ap);
  va_end(ap);
  return st;
}

hk_status *hk_status_prefix(hk_status *st, const char *fmt, ...) {
  if (!st) return NULL;
  va_list ap;
  va_start(ap, fmt);
  char *prefix = vformat(fmt, ap);
  va_end(ap);
  size_t lp = strlen(prefix), lm = strlen(st->message);
  char *msg = malloc(lp + 2 + lm + 1);
  if (!msg) hk_out_of_memory();
  memcpy(msg, prefix, lp);
  size_t at = lp;
  if (lm) {
    memcpy(msg + at, ": ", 2);
    at += 2;
    memcpy(msg + at, st->message, lm);
    at += lm;
  }
  msg[at] = 0;
  free(prefix);
  free(st->message);
  st->message = msg;
  return st;
}

void hk_status_free(hk_status *st) {
  if (!st) return;
  free(st->message);
  free(st);
}

const char *hk_code_name(hk_code code) {
  switch (code) {
    case HK_OK: return "OK";
    case HK_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case HK_NOT_FOUND: return "NOT_FOUND";
    case HK_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case HK_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case HK_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case HK_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

void hk_out_of_memory(void) {
  static const char msg[] = "hlokit: out of memory\n";
  if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) { /* nothing more to do */ }
  abort();
}
