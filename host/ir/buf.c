/* buf.c - hk_buf: the growable output buffer every printer writes into. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "hlokit/status.h"
#include "hlokit/text.h"

void hk_buf_init(hk_buf *b) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}

void hk_buf_free(hk_buf *b) {
  free(b->data);
  hk_buf_init(b);
}

/* Ensures room for n more bytes plus a terminating NUL. */
static void buf_reserve(hk_buf *b, size_t n) {
  size_t need = b->len + n + 1;
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap *= 2;
  char *d = hk_check_alloc(realloc(b->data, cap));
  hk_populate(d + b->len, d + cap);   /* a big print writes it all */
  b->data = d;
  b->cap = cap;
}

void hk_buf_put(hk_buf *b, const char *s, size_t n) {
  buf_reserve(b, n);
  if (n) memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

void hk_buf_puts(hk_buf *b, const char *s) { hk_buf_put(b, s, strlen(s)); }

void hk_buf_printf(hk_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    hk_buf_put(b, small, (size_t)n);
    return;
  }
  buf_reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* Reads f to its end into b (room for `expect` more bytes made first). */
static bool read_stream(hk_buf *b, FILE *f, size_t expect) {
  buf_reserve(b, expect ? expect : (size_t)1 << 16);
  for (;;) {
    if (b->cap - b->len < 2) buf_reserve(b, b->cap);
    size_t got = fread(b->data + b->len, 1, b->cap - b->len - 1, f);
    b->len += got;
    b->data[b->len] = 0;
    if (got == 0) return !ferror(f);
  }
}

hk_status *hk_buf_read_file(hk_buf *b, const char *path) {
  bool is_stdin = strcmp(path, "-") == 0;
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) return hk_error(HK_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  size_t expect = !is_stdin && fstat(fileno(f), &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 0;
  bool ok = read_stream(b, f, expect + 1);   /* +1: EOF is seen without growing */
  if (!is_stdin) fclose(f);
  return ok ? NULL : hk_error(HK_INVALID_ARGUMENT, "%s: read error", path);
}

/* ---- mapped inputs: the pages a reader has gone past go back ------------------------- */

/* The files hk_file_bytes_open mapped (a few at once), so that a parser
 * can give back the pages of its input it has gone past
 * (hk_input_release_before).  A private read-only file mapping reads the
 * file again where it is touched after that: nothing is lost but the
 * memory (its pages count in the process's RSS while mapped). */
#define MAPPED_MAX 8
static struct mapped_input {
  const char *base;
  size_t len, released;   /* bytes from base given back */
} mapped_inputs[MAPPED_MAX];
static pthread_mutex_t mapped_mu = PTHREAD_MUTEX_INITIALIZER;

static void note_mapped(const char *base, size_t len, bool add) {
  pthread_mutex_lock(&mapped_mu);
  for (int k = 0; k < MAPPED_MAX; k++) {
    if (add && !mapped_inputs[k].base) {
      mapped_inputs[k] = (struct mapped_input){base, len, 0};
      break;
    }
    if (!add && mapped_inputs[k].base == base) mapped_inputs[k].base = NULL;
  }
  pthread_mutex_unlock(&mapped_mu);
}

void hk_input_release_before(const char *text, const char *at) {
  const uintptr_t page = 4096;
  pthread_mutex_lock(&mapped_mu);
  for (int k = 0; k < MAPPED_MAX; k++) {
    struct mapped_input *mi = &mapped_inputs[k];
    if (!mi->base || text < mi->base || text >= mi->base + mi->len) continue;
    if (at <= mi->base || at > mi->base + mi->len) break;
    size_t upto = (size_t)(((uintptr_t)at & ~(page - 1)) - (uintptr_t)mi->base);
    if (upto > mi->released) {
      madvise((char *)mi->base + mi->released, upto - mi->released, MADV_DONTNEED);
      mi->released = upto;
    }
    break;
  }
  pthread_mutex_unlock(&mapped_mu);
}

/* Maps path when it is a non-empty regular file; false otherwise (the
 * caller reads it instead). */
static bool map_regular_file(const char *path, hk_file_bytes *out) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  struct stat st;
  bool mapped = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      *out = (hk_file_bytes){p, (size_t)st.st_size, p, (size_t)st.st_size};
      note_mapped(p, (size_t)st.st_size, true);
      mapped = true;
    }
  }
  close(fd);
  return mapped;
}

hk_status *hk_file_bytes_open(const char *path, hk_file_bytes *out) {
  *out = (hk_file_bytes){NULL, 0, NULL, 0};
  if (strcmp(path, "-") != 0 && map_regular_file(path, out)) return NULL;
  hk_buf b;
  hk_buf_init(&b);
  hk_status *st = hk_buf_read_file(&b, path);
  if (st) {
    hk_buf_free(&b);
    return st;
  }
  *out = (hk_file_bytes){b.data ? b.data : "", b.len, b.data, 0};
  return NULL;
}

void hk_file_bytes_close(hk_file_bytes *f) {
  if (f->held_len) {
    note_mapped(f->held, f->held_len, false);
    munmap(f->held, f->held_len);
  }
  else free(f->held);
  *f = (hk_file_bytes){NULL, 0, NULL, 0};
}
