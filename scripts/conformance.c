/* conformance.c - scores hlokit against the conformance corpus (../shared/conformance, JSON lines).
 *
 * Usage: hk-conformance [--dir=DIR] [--suite=NAME[,NAME]] [--list=FILE]
 *                       [--filter=SUBSTR] [--hlokit=PATH] [--timeout=S] [--jobs=N]
 *                       [--no-fork] [-v]
 *
 * Each suite is one function that walks its .jsonl files and hands every
 * case to run_case(), which runs the case's check in a child process (so a
 * crash or a hang is a failed case with a reason, not a dead runner) and
 * tallies the result under "suite", "suite/kind" and any extra group.
 * Output: one line per tally with its pass rate, every failing case with a
 * one-line reason (stdout, or the --list file), machine-readable
 * "rate NAME R" lines that scripts/conformance.sh compares with the floors,
 * and a closing "N passed, N failed".
 *
 * Adding a suite: write `static void suite_foo(runner *r)` that calls
 * run_case() per case, and add it to SUITES at the bottom. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hlokit/hlokit.h"

#define REASON_CAP 512
#define MAX_TALLIES 64
#define MAX_JOBS 64

/* ---- runner state -------------------------------------------------------- */

typedef struct tally {
  char name[64];
  int passed, failed;
  int sampled;               /* passes `hlokit check` made on sampled elements */
  int measured;              /* cases that reported bytes moved */
  int64_t bytes_moved;       /* sum of their bytes_moved_per_device */
  int remat_cases;           /* cases with a full rematerialization */
  int64_t remats;            /* sum of their full rematerializations */
} tally;

/* What a case measured besides its verdict (-1: not measured). */
typedef struct case_metrics {
  int64_t bytes_moved;       /* bytes_moved_per_device of the partitioned program */
  int64_t remats;            /* full rematerializations the partitioner reported */
} case_metrics;

/* A passing case's reason starts with this when its check ran sampled. */
#define SAMPLED_MARK "(sampled)"

/* A case running in a child process. */
typedef struct pending {
  pid_t pid;                 /* 0: free slot */
  int fd;                    /* read end of the result pipe */
  char suite[32], kind[48], group[32], name[256];
} pending;

typedef struct runner {
  const char *dir;           /* conformance folder */
  const char *filter;        /* only cases whose name contains this */
  const char *hlokit;        /* the CLI, for suites that run passes */
  FILE *list;                /* failing cases go here */
  bool fork_cases;
  bool verbose;
  int timeout_s;             /* per case */
  const char *export_dir;    /* --export: write the spmd cases there, run nothing */
  int jobs;                  /* cases running at once */
  int n_running;
  pending running[MAX_JOBS];
  int n_tallies;
  tally tallies[MAX_TALLIES];
  case_metrics metrics;      /* the running case's, set by its case_fn */
  int passed, failed;
} runner;

/* A case check: fills reason and returns false on failure. */
typedef bool (*case_fn)(runner *r, json_object *c, char *reason, size_t cap);

static tally *tally_get(runner *r, const char *name) {
  for (int i = 0; i < r->n_tallies; i++)
    if (strcmp(r->tallies[i].name, name) == 0) return &r->tallies[i];
  if (r->n_tallies == MAX_TALLIES) return NULL;
  tally *t = &r->tallies[r->n_tallies++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  return t;
}

static void tally_add(runner *r, const char *name, bool pass) {
  tally *t = tally_get(r, name);
  if (!t) return;
  if (pass) t->passed++;
  else t->failed++;
}

/* ---- small helpers ------------------------------------------------------- */

static void set_reason(char *reason, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_reason(char *reason, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, cap, fmt, ap);
  va_end(ap);
}

/* Takes the status's message as the reason (with a prefix) and frees it. */
static bool fail_status(char *reason, size_t cap, const char *what, hk_status *st) {
  set_reason(reason, cap, "%s: %s", what, st && st->message ? st->message : "(no message)");
  hk_status_free(st);
  return false;
}

/* Newlines and tabs become visible escapes so a reason stays on one line. */
static void one_line(char *s) {
  char out[REASON_CAP];
  size_t o = 0;
  for (const char *p = s; *p && o + 3 < sizeof out; p++) {
    if (*p == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
    else if (*p == '\t') { out[o++] = '\\'; out[o++] = 't'; }
    else if ((unsigned char)*p < 0x20) out[o++] = '?';
    else out[o++] = *p;
  }
  out[o] = 0;
  memcpy(s, out, o + 1);
}

static const char *jstr(json_object *c, const char *key) {
  json_object *v;
  if (!json_object_object_get_ex(c, key, &v) || json_object_is_type(v, json_type_null)) return NULL;
  return json_object_get_string(v);
}

static bool jbool(json_object *c, const char *key, bool dflt) {
  json_object *v;
  if (!json_object_object_get_ex(c, key, &v) || json_object_is_type(v, json_type_null)) return dflt;
  return json_object_get_boolean(v);
}

static int64_t jint(json_object *c, const char *key, int64_t dflt) {
  json_object *v;
  if (!json_object_object_get_ex(c, key, &v) || json_object_is_type(v, json_type_null)) return dflt;
  return json_object_get_int64(v);
}

/* [start, end) of s without leading and trailing whitespace. */
static void trim(const char *s, size_t len, const char **start, size_t *n) {
  size_t a = 0, b = len;
  while (a < b && isspace((unsigned char)s[a])) a++;
  while (b > a && isspace((unsigned char)s[b - 1])) b--;
  *start = s + a;
  *n = b - a;
}

/* Copies line number `line` (1-based) of s into out, truncated. */
static void line_of(const char *s, size_t len, int line, char *out, size_t cap) {
  const char *p = s, *end = s + len;
  for (int l = 1; l < line && p < end; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  size_t n = (size_t)((nl ? nl : end) - p);
  if (n >= cap) n = cap - 1;
  memcpy(out, p, n);
  out[n] = 0;
}

/* Compares texts after trimming surrounding whitespace, as XLA's tests do;
 * on a difference the reason shows the first differing line of each. */
static bool texts_match(const char *want, size_t wn, const char *got, size_t gn,
                        const char *what, char *reason, size_t cap) {
  const char *w, *g;
  size_t wl, gl;
  trim(want, wn, &w, &wl);
  trim(got, gn, &g, &gl);
  if (wl == gl && memcmp(w, g, wl) == 0) return true;
  size_t i = 0;
  int line = 1;
  while (i < wl && i < gl && w[i] == g[i]) {
    if (w[i] == '\n') line++;
    i++;
  }
  char lw[160], lg[160];
  line_of(w, wl, line, lw, sizeof lw);
  line_of(g, gl, line, lg, sizeof lg);
  set_reason(reason, cap, "%s differs at line %d: want `%s` got `%s`", what, line, lw, lg);
  return false;
}

/* True when msg contains "LINE:COL" (digits ':' digits). */
static bool has_line_col(const char *msg) {
  for (const char *p = msg; *p; p++) {
    if (!isdigit((unsigned char)*p) || (p > msg && isdigit((unsigned char)p[-1]))) continue;
    const char *q = p;
    while (isdigit((unsigned char)*q)) q++;
    if (*q == ':' && isdigit((unsigned char)q[1])) return true;
  }
  return false;
}

static hk_status *verify(const hk_module *m) {
  hk_verify_options o = hk_verify_defaults();
  return hk_verify_module(m, &o);
}

/* print(m) in the given form, malloc'ed. */
static char *print_module(const hk_module *m, hk_print_form form, size_t *len) {
  hk_buf b;
  hk_buf_init(&b);
  hk_print_module(m, form, &b);
  hk_buf_put(&b, "", 1); /* NUL, not counted */
  *len = b.len - 1;
  return b.data;
}

/* ---- running one case ---------------------------------------------------- */

/* Adds a case's measurements to its suite's totals. */
static void tally_metrics(runner *r, const char *suite, const case_metrics *m) {
  tally *t = tally_get(r, suite);
  if (!t) return;
  if (m->bytes_moved >= 0) {
    t->measured++;
    t->bytes_moved += m->bytes_moved;
  }
  if (m->remats > 0) {
    t->remat_cases++;
    t->remats += m->remats;
  }
}

static void record(runner *r, const char *suite, const char *kind, const char *group,
                   const char *name, bool pass, const char *reason, const case_metrics *m) {
  char key[128];
  r->passed += pass;
  r->failed += !pass;
  tally_add(r, suite, pass);
  if (m) tally_metrics(r, suite, m);
  bool sampled = pass && strncmp(reason, SAMPLED_MARK, strlen(SAMPLED_MARK)) == 0;
  tally *st = sampled ? tally_get(r, suite) : NULL;
  if (st) st->sampled++;
  snprintf(key, sizeof key, "%s/%s", suite, kind);
  tally_add(r, key, pass);
  if (group) {
    snprintf(key, sizeof key, "%s/%s", suite, group);
    tally_add(r, key, pass);
  }
  if (!pass) fprintf(r->list, "FAIL %s/%s %s: %s\n", suite, kind, name, reason);
  else if (r->verbose) fprintf(r->list, "pass %s/%s %s%s\n", suite, kind, name, sampled ? " " SAMPLED_MARK : "");
}

static void describe_exit(int status, int timeout_s, char *reason, size_t cap, bool said_pass) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM) set_reason(reason, cap, "timed out after %d s", timeout_s);
    else set_reason(reason, cap, "crashed: signal %d (%s)", sig, strsignal(sig));
  } else if (said_pass) {
    set_reason(reason, cap, "passed, then exit status %d (sanitizer or leak report on stderr)",
               WEXITSTATUS(status));
  } else {
    set_reason(reason, cap, "exit status %d before reporting a result (crash or sanitizer report on stderr)", WEXITSTATUS(status));
  }
}

/* Reads a finished child's message ("P" or "F", "BYTES REMATS|", reason) and
 * status into a verdict and the case's metrics. */
static bool child_verdict(runner *r, int fd, int status, char *reason, size_t cap,
                          case_metrics *m) {
  char buf[REASON_CAP + 1];
  size_t got = 0;
  ssize_t k;
  while (got < sizeof buf - 1 && (k = read(fd, buf + got, sizeof buf - 1 - got)) != 0) {
    if (k < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += (size_t)k;
  }
  buf[got] = 0;
  bool said_pass = got > 0 && buf[0] == 'P';
  char *bar = got > 0 ? strchr(buf, '|') : NULL;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && bar) {
    long long bytes = -1, remats = -1;
    if (sscanf(buf + 1, "%lld %lld", &bytes, &remats) == 2) *m = (case_metrics){bytes, remats};
    set_reason(reason, cap, "%s", bar + 1);   /* a pass may carry SAMPLED_MARK */
    return said_pass;
  }
  describe_exit(status, r->timeout_s, reason, cap, said_pass);
  return false;
}

/* Waits for any running case to finish and records it. */
static void collect_one(runner *r) {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, 0)) < 0 && errno == EINTR) {}
  if (pid < 0) {
    r->n_running = 0;
    return;
  }
  for (int i = 0; i < MAX_JOBS; i++) {
    pending *p = &r->running[i];
    if (p->pid != pid) continue;
    char reason[REASON_CAP] = "";
    case_metrics m = {-1, -1};
    bool pass = child_verdict(r, p->fd, status, reason, sizeof reason, &m);
    close(p->fd);
    p->pid = 0;
    r->n_running--;
    one_line(reason);
    record(r, p->suite, p->kind, p->group[0] ? p->group : NULL, p->name, pass, reason, &m);
    return;
  }
}

/* Waits for every running case. */
static void collect_all(runner *r) {
  while (r->n_running > 0) collect_one(r);
}

/* The child side: runs fn, writes 'P' or 'F'+reason to fd, exits. */
static void run_child(runner *r, case_fn fn, json_object *c, int fd) {
  for (int i = 0; i < MAX_JOBS; i++)
    if (r->running[i].pid) close(r->running[i].fd);
  alarm((unsigned)r->timeout_s);
  char why[REASON_CAP] = "";
  r->metrics = (case_metrics){-1, -1};
  bool ok = fn(r, c, why, sizeof why);
  char msg[REASON_CAP + 1];
  bool sampled = ok && strncmp(why, SAMPLED_MARK, strlen(SAMPLED_MARK)) == 0;
  int n = snprintf(msg, sizeof msg, "%c%lld %lld|%s", ok ? 'P' : 'F', (long long)r->metrics.bytes_moved,
                   (long long)r->metrics.remats, ok && !sampled ? "" : why);
  if (n > (int)sizeof msg - 1) n = (int)sizeof msg - 1;
  if (write(fd, msg, (size_t)n) < 0) _exit(3);
  close(fd);
  exit(0); /* exit, not _exit: LeakSanitizer checks the case at exit */
}

/* Starts fn in a child process, at most r->jobs at once. */
static void start_case(runner *r, const char *suite, const char *kind, const char *group,
                       const char *name, case_fn fn, json_object *c) {
  while (r->n_running >= r->jobs) collect_one(r);
  int fds[2];
  if (pipe(fds) != 0) {
    record(r, suite, kind, group, name, false, "pipe failed", NULL);
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    record(r, suite, kind, group, name, false, "fork failed", NULL);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    run_child(r, fn, c, fds[1]);
  }
  close(fds[1]);
  for (int i = 0; i < MAX_JOBS; i++) {
    pending *p = &r->running[i];
    if (p->pid) continue;
    p->pid = pid;
    p->fd = fds[0];
    snprintf(p->suite, sizeof p->suite, "%s", suite);
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    snprintf(p->group, sizeof p->group, "%s", group ? group : "");
    snprintf(p->name, sizeof p->name, "%s", name);
    r->n_running++;
    return;
  }
}

/* Runs one case (in a child, in parallel, unless --no-fork) and records it. */
static void run_case(runner *r, const char *suite, const char *kind, const char *group,
                     const char *name, case_fn fn, json_object *c) {
  if (r->filter && !strstr(name, r->filter)) return;
  char key[128];
  tally_get(r, suite); /* tallies print in the order cases start */
  snprintf(key, sizeof key, "%s/%s", suite, kind);
  tally_get(r, key);
  if (group) {
    snprintf(key, sizeof key, "%s/%s", suite, group);
    tally_get(r, key);
  }
  if (r->fork_cases) {
    start_case(r, suite, kind, group, name, fn, c);
    return;
  }
  char reason[REASON_CAP] = "";
  r->metrics = (case_metrics){-1, -1};
  bool pass = fn(r, c, reason, sizeof reason);
  if (pass && strncmp(reason, SAMPLED_MARK, strlen(SAMPLED_MARK)) != 0) reason[0] = 0;
  one_line(reason);
  record(r, suite, kind, group, name, pass, reason, &r->metrics);
}

/* Reads a whole file into a malloc'ed NUL-terminated buffer; NULL on error
 * (errno says why). */
static char *slurp(const char *path, size_t *len) {
  hk_buf b;
  hk_buf_init(&b);
  hk_status *st = hk_buf_read_file(&b, path);
  if (st) {
    hk_status_free(st);
    hk_buf_free(&b);
    return NULL;
  }
  *len = b.len;
  if (!b.data) {   /* an empty file */
    b.data = calloc(1, 1);
    if (!b.data) abort();
  }
  return b.data;
}

/* Calls each(r, obj, index) for every JSON line of DIR/file; false if the
 * file cannot be read.  The file is read whole first: no stream is open
 * while cases fork (a child's exit would move the shared file offset). */
typedef void (*line_fn)(runner *r, json_object *c, int index);
static bool for_each_line(runner *r, const char *file, line_fn each) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", r->dir, file);
  size_t len;
  char *text = slurp(path, &len);
  if (!text) {
    fprintf(stderr, "hk-conformance: cannot read %s: %s\n", path, strerror(errno));
    return false;
  }
  int index = 0, lineno = 0;
  for (char *line = text; line < text + len;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    lineno++;
    if (*line) {
      json_object *c = json_tokener_parse(line);
      if (c) {
        each(r, c, index++);
        json_object_put(c);
      } else {
        fprintf(stderr, "hk-conformance: %s:%d: not JSON\n", path, lineno);
      }
    }
    if (!nl) break;
    line = nl + 1;
  }
  free(text);
  return true;
}

/* A failure counted against a suite when its data is missing. */
static void record_missing(runner *r, const char *suite, const char *file) {
  char reason[256];
  snprintf(reason, sizeof reason, "cannot read %s/%s", r->dir, file);
  record(r, suite, "data", NULL, file, false, reason, NULL);
}

/* ---- suite: parser --------------------------------------------------------- */

/* Parses c's "hlo" as a module; runs the verifier when the case says so. */
static hk_status *parse_case_module(json_object *c, hk_module **out) {
  const char *hlo = jstr(c, "hlo");
  if (!hlo) return hk_error(HK_INVALID_ARGUMENT, "case has no hlo");
  hk_status *st = hk_parse_module(hlo, strlen(hlo), "<case>", out);
  if (st) return st;
  if (jbool(c, "verify", true)) {
    st = verify(*out);
    if (st) {
      hk_module_free(*out);
      *out = NULL;
      return hk_status_prefix(st, "verifier");
    }
  }
  return NULL;
}

static hk_print_form case_form(json_object *c) {
  const char *f = jstr(c, "print_form");
  return f && strcmp(f, "short") == 0 ? HK_PRINT_SHORT : HK_PRINT_LONG;
}

/* print(parse(text)) reparses and prints the same text again. */
static bool check_fixed_point(const char *text, size_t len, hk_print_form form,
                              char *reason, size_t cap) {
  hk_module *m2 = NULL;
  hk_status *st = hk_parse_module(text, len, "<print>", &m2);
  if (st) return fail_status(reason, cap, "the print does not parse again", st);
  size_t n2;
  char *again = print_module(m2, form, &n2);
  bool ok = texts_match(text, len, again, n2, "second print", reason, cap);
  free(again);
  hk_module_free(m2);
  return ok;
}

/* roundtrip: print in print_form == input; non_roundtrip: == expected_output. */
static bool case_parser_print(runner *r, json_object *c, char *reason, size_t cap) {
  (void)r;
  hk_module *m = NULL;
  hk_status *st = parse_case_module(c, &m);
  if (st) return fail_status(reason, cap, "parse", st);
  hk_print_form form = case_form(c);
  size_t n;
  char *text = print_module(m, form, &n);
  const char *want = jstr(c, "expected_output");
  if (!want) want = jstr(c, "hlo");
  bool ok = texts_match(want, strlen(want), text, n, "print", reason, cap) &&
            check_fixed_point(text, n, form, reason, cap);
  free(text);
  hk_module_free(m);
  return ok;
}

/* Parses c's "hlo" as input_kind; the result is only checked for success. */
static hk_status *parse_piece(json_object *c) {
  const char *kind = jstr(c, "input_kind");
  const char *hlo = jstr(c, "hlo");
  if (!hlo) return hk_error(HK_INVALID_ARGUMENT, "case has no hlo");
  size_t len = strlen(hlo);
  if (!kind || strcmp(kind, "module") == 0) {
    hk_module *m = NULL;
    hk_status *st = parse_case_module(c, &m);
    hk_module_free(m);
    return st;
  }
  hk_module *m = hk_module_new("piece");
  hk_status *st = NULL;
  if (strcmp(kind, "shape") == 0) {
    const hk_shape *s = NULL;
    st = hk_parse_shape(m, hlo, len, &s);
  } else if (strcmp(kind, "sharding") == 0) {
    const hk_sharding *s = NULL;
    size_t used = 0;
    st = hk_sharding_parse(m, hlo, len, &s, &used);
    if (!st && used != len)
      st = hk_error(HK_INVALID_ARGUMENT, "sharding parse stopped at byte %zu of %zu", used, len);
  } else if (strcmp(kind, "convolution_dimension_numbers") == 0) {
    const hk_conv_dnums *d = NULL;
    st = hk_parse_conv_dnums(m, hlo, len, &d);
  } else if (strcmp(kind, "padding_config") == 0) {
    const hk_pad_dim *pads = NULL;
    int32_t n = 0;
    st = hk_parse_padding_config(m, hlo, len, &n, &pads);
  } else if (strcmp(kind, "window") == 0) {
    const hk_window *w = NULL;
    st = hk_parse_window(m, hlo, len, &w);
  } else if (strcmp(kind, "frontend_attributes") == 0) {
    const hk_kv *kv = NULL;
    int32_t n = 0;
    st = hk_parse_frontend_attributes(m, hlo, len, &n, &kv);
  } else if (strcmp(kind, "replica_groups") == 0) {
    const hk_replica_groups *g = NULL;
    st = hk_parse_replica_groups(m, hlo, len, &g);
  } else {
    st = hk_error(HK_UNIMPLEMENTED, "no public API parses a lone %s (text.h)", kind);
  }
  hk_module_free(m);
  return st;
}

static bool case_parser_parse_ok(runner *r, json_object *c, char *reason, size_t cap) {
  (void)r;
  hk_status *st = parse_piece(c);
  if (st) return fail_status(reason, cap, "parse", st);
  return true;
}

/* error: parsing fails with "LINE:COL" in the message (and error_substring).
 * For verify:true cases XLA ran its verifier as part of parsing, so a
 * verifier rejection with the substring also counts. */
static bool case_parser_error(runner *r, json_object *c, char *reason, size_t cap) {
  (void)r;
  hk_status *st = parse_piece(c);
  if (!st) {
    set_reason(reason, cap, "parsed without error");
    return false;
  }
  const char *msg = st->message ? st->message : "";
  const char *want = jstr(c, "error_substring");
  bool from_verifier = strncmp(msg, "verifier", 8) == 0;
  bool ok = true;
  if (!from_verifier && !has_line_col(msg)) {
    set_reason(reason, cap, "error has no LINE:COL: %s", msg);
    ok = false;
  } else if (want && !strstr(msg, want)) {
    set_reason(reason, cap, "error lacks \"%s\": %s", want, msg);
    ok = false;
  }
  hk_status_free(st);
  return ok;
}

static void parser_case(runner *r, json_object *c, int index) {
  char name[256];
  const char *n = jstr(c, "name");
  snprintf(name, sizeof name, "%s", n ? n : "");
  if (!n) snprintf(name, sizeof name, "#%d", index);
  const char *kind = jstr(c, "kind");
  if (!kind) kind = "unknown";
  const char *ik = jstr(c, "input_kind");
  const char *group = (!ik || strcmp(ik, "module") == 0) ? "module" : "piece";
  case_fn fn = NULL;
  if (strcmp(kind, "roundtrip") == 0 || strcmp(kind, "non_roundtrip") == 0) fn = case_parser_print;
  else if (strcmp(kind, "parse_ok") == 0) fn = case_parser_parse_ok;
  else if (strcmp(kind, "error") == 0) fn = case_parser_error;
  if (!fn) {
    record(r, "parser", kind, group, name, false, "unknown case kind", NULL);
    return;
  }
  run_case(r, "parser", kind, group, name, fn, c);
}

static void suite_parser(runner *r) {
  if (!for_each_line(r, "parser.jsonl", parser_case)) record_missing(r, "parser", "parser.jsonl");
}

/* ---- suite: corpus ---------------------------------------------------------- */

/* parse, verify, print; the print reparses to the same print; JSON export
 * then import prints the same text. */
static bool case_corpus_module(runner *r, json_object *c, char *reason, size_t cap) {
  (void)r;
  const char *hlo = jstr(c, "hlo");
  if (!hlo) {
    set_reason(reason, cap, "case has no hlo");
    return false;
  }
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(hlo, strlen(hlo), "<case>", &m);
  if (st) return fail_status(reason, cap, "parse", st);
  int64_t devices = jint(c, "num_devices", 0);
  if (devices > 0 && m->config.num_partitions <= 1) m->config.num_partitions = devices;
  bool ok = true;
  st = verify(m);
  if (st) ok = fail_status(reason, cap, "verify", st);
  size_t n = 0;
  char *text = ok ? print_module(m, HK_PRINT_LONG, &n) : NULL;
  if (ok) ok = check_fixed_point(text, n, HK_PRINT_LONG, reason, cap);
  if (ok) {
    hk_buf js;
    hk_buf_init(&js);
    hk_module_to_json(m, false, &js);
    hk_module *mj = NULL;
    st = hk_module_from_json(js.data ? js.data : "", js.len, "<json>", &mj);
    if (st) {
      ok = fail_status(reason, cap, "JSON import of the export", st);
    } else {
      size_t nj;
      char *tj = print_module(mj, HK_PRINT_LONG, &nj);
      ok = texts_match(text, n, tj, nj, "print after JSON round trip", reason, cap);
      free(tj);
      hk_module_free(mj);
    }
    hk_buf_free(&js);
  }
  free(text);
  hk_module_free(m);
  return ok;
}

static const char *corpus_kind;

static void corpus_case(runner *r, json_object *c, int index) {
  char name[256];
  const char *n = jstr(c, "name");
  if (n) snprintf(name, sizeof name, "%s", n);
  else snprintf(name, sizeof name, "#%d", index);
  run_case(r, "corpus", corpus_kind, NULL, name, case_corpus_module, c);
}

static void suite_corpus(runner *r) {
  static const char *const files[][2] = {
      {"spmd.jsonl", "spmd"},
      {"propagation.jsonl", "propagation"},
      {"stateful_rng.jsonl", "stateful_rng"},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    corpus_kind = files[i][1];
    if (!for_each_line(r, files[i][0], corpus_case)) record_missing(r, "corpus", files[i][0]);
  }
}

/* ---- helpers for CLI-driven suites (propagation, spmd) ---------------------- */

/* Writes text to a fresh temporary .hlo file; path gets its name. */
__attribute__((unused)) static bool write_temp_hlo(const char *text, char *path, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(path, cap, "%s/hk-conf-XXXXXX.hlo", tmp ? tmp : "/tmp");
  int fd = mkstemps(path, 4);
  if (fd < 0) return false;
  size_t len = strlen(text), off = 0;
  while (off < len) {
    ssize_t k = write(fd, text + off, len - off);
    if (k <= 0) {
      close(fd);
      unlink(path);
      return false;
    }
    off += (size_t)k;
  }
  close(fd);
  return true;
}

/* Runs argv (argv[0] a path), capturing stdout (and stderr, appended) into a
 * malloc'ed *out.  Returns the exit status, or -1 if it could not run;
 * *signal_out gets the terminating signal or 0. */
__attribute__((unused)) static int run_command(char *const argv[], char **out, int *signal_out) {
  int fds[2];
  *out = NULL;
  *signal_out = 0;
  if (pipe(fds) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execv(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  ssize_t k;
  while (buf && (k = read(fds[0], buf + len, cap - len - 1)) != 0) {
    if (k < 0) {
      if (errno == EINTR) continue;
      break;
    }
    len += (size_t)k;
    if (cap - len < 2) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
  }
  if (buf) buf[len] = 0;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  *out = buf;
  if (WIFSIGNALED(status)) {
    *signal_out = WTERMSIG(status);
    return -1;
  }
  return WEXITSTATUS(status);
}

/* ---- suite: spmd ------------------------------------------------------------- */

/* The case's SpmdPartitionerOptions as pass options (upstream test names
 * mapped to ours; the gather and scatter methods' "PartitioningMethod::"
 * prefix dropped). */
static void spmd_pass_spec(json_object *c, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "spmd-partitioning{allow_module_signature_change=%s",
                              jbool(c, "allow_module_signature_change", true) ? "true" : "false");
  json_object *opts;
  if (json_object_object_get_ex(c, "options", &opts) && json_object_is_type(opts, json_type_object)) {
    json_object_object_foreach(opts, key, val) {
      const char *name = key, *v = json_object_get_string(val);
      if (!strcmp(key, "choose_faster_windowed_einsum")) name = "choose_faster_windowed_einsum_over_mem";
      if (!strcmp(key, "gather_method") || !strcmp(key, "scatter_method")) {
        name = key[0] == 'g' ? "gather_partition_method" : "scatter_partition_method";
        const char *colon = strrchr(v, ':');
        if (colon) v = colon + 1;
      }
      if (json_object_is_type(val, json_type_boolean)) v = json_object_get_boolean(val) ? "true" : "false";
      if (n < cap) n += (size_t)snprintf(out + n, cap - n, " %s=%s", name, v);
    }
  }
  if (n < cap) snprintf(out + n, cap - n, "}");
}

/* stateful_rng.jsonl cases: XLA's harness ran RngExpander and
 * ShardingPropagation(is_spmd) before StatefulRngSpmdPartitioner; the
 * case's options that are constructor arguments of the stateful
 * partitioner become its pass options (debug_options etc. are not). */
static void stateful_rng_pass_spec(json_object *c, char *out, size_t cap) {
  static const char *const ctor_args[] = {
      "threshold_for_windowed_einsum_mib", "windowed_einsum_use_multiple_streams",
      "skip_checking_windowed_einsum_users", "disable_ag_rewrite_for_multiple_consumers",
      "total_bytes_windowed_einsum_threshold"};
  size_t n = (size_t)snprintf(out, cap, "rng-expander,sharding-propagation{is_spmd=true},"
                              "stateful-rng-spmd-partitioning{");
  json_object *opts;
  bool first = true;
  if (json_object_object_get_ex(c, "options", &opts) && json_object_is_type(opts, json_type_object)) {
    json_object_object_foreach(opts, key, val) {
      bool known = false;
      for (size_t k = 0; k < sizeof ctor_args / sizeof ctor_args[0]; k++) known |= !strcmp(key, ctor_args[k]);
      if (!known || json_object_is_type(val, json_type_null)) continue;
      const char *v = json_object_is_type(val, json_type_boolean)
                          ? (json_object_get_boolean(val) ? "true" : "false")
                          : json_object_get_string(val);
      if (n < cap) n += (size_t)snprintf(out + n, cap - n, "%s%s=%s", first ? "" : " ", key, v);
      first = false;
    }
  }
  if (n < cap) snprintf(out + n, cap - n, "}");
}

/* "f32[2,3]{1,0}" -> "f32[2,3]": layouts dropped, for comparing root shapes. */
static void strip_layouts(const char *in, char *out, size_t cap) {
  size_t o = 0;
  int depth = 0;
  for (const char *p = in; *p && o + 1 < cap; p++) {
    if (*p == '{') depth++;
    else if (*p == '}') depth--;
    else if (depth == 0 && *p != ' ') out[o++] = *p;
  }
  out[o] = 0;
}

/* Seconds one spmd case may take (partitioning and checking). */
#define SPMD_CASE_SECONDS 20

/* A judgement of the partitioned module a case wrote (after check said equal). */
typedef bool (*module_check_fn)(json_object *c, const hk_module *m, char *reason, size_t cap);

/* Parses the partitioned module at path and applies fn to it. */
static bool judge_partitioned(json_object *c, const char *path, module_check_fn fn, char *reason,
                              size_t cap) {
  size_t len = 0;
  char *text = slurp(path, &len);
  if (!text) {
    set_reason(reason, cap, "no partitioned module written");
    return false;
  }
  hk_module *m = NULL;
  hk_status *st = hk_parse_module(text, len, path, &m);
  free(text);
  if (st) {
    set_reason(reason, cap, "partitioned module does not parse: %.200s", st->message);
    hk_status_free(st);
    return false;
  }
  bool ok = fn(c, m, reason, cap);
  hk_module_free(m);
  return ok;
}

/* True when every collective of m carries a channel id no other collective
 * has (send/recv pair up by sharing one, so they are not counted). */
static bool channel_ids_unique(json_object *c, const hk_module *m, char *reason, size_t cap) {
  (void)c;
  bool ok = true;
  int64_t n_seen = 0, cap_seen = 64;
  int64_t *seen = malloc((size_t)cap_seen * sizeof *seen);
  for (int32_t k = 0; k < m->n_computations && ok; k++)
    for (const hk_instr *i = m->computations[k]->first; i && ok; i = i->next) {
      int64_t id = hk_instr_channel_id(i);
      if (!id || i->opcode == HK_OP_SEND || i->opcode == HK_OP_RECV ||
          i->opcode == HK_OP_SEND_DONE || i->opcode == HK_OP_RECV_DONE)
        continue;
      for (int64_t j = 0; j < n_seen && ok; j++)
        if (seen[j] == id) {
          set_reason(reason, cap, "channel id %lld used twice (again by %s)", (long long)id, i->name);
          ok = false;
        }
      if (n_seen == cap_seen) seen = realloc(seen, (size_t)(cap_seen *= 2) * sizeof *seen);
      seen[n_seen++] = id;
    }
  free(seen);
  return ok;
}

/* ---- spmd_quality: the collective kinds XLA's test names ---------------------- */

/* The collective kinds, as bits (index = hk_collective_kind). */
static unsigned collective_kind_bit(hk_opcode op) {
  switch (op) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: return 1u << HK_COLL_ALL_REDUCE;
    case HK_OP_ALL_GATHER: case HK_OP_ALL_GATHER_START: return 1u << HK_COLL_ALL_GATHER;
    case HK_OP_REDUCE_SCATTER: return 1u << HK_COLL_REDUCE_SCATTER;
    case HK_OP_ALL_TO_ALL: case HK_OP_RAGGED_ALL_TO_ALL: return 1u << HK_COLL_ALL_TO_ALL;
    case HK_OP_COLLECTIVE_PERMUTE: case HK_OP_COLLECTIVE_PERMUTE_START:
      return 1u << HK_COLL_COLLECTIVE_PERMUTE;
    case HK_OP_COLLECTIVE_BROADCAST: return 1u << HK_COLL_COLLECTIVE_BROADCAST;
    default: return 0;
  }
}

/* The kinds the case's xla_collectives names; widened, an all-reduce also
 * names all-gather and reduce-scatter (XLA's harness builds those as
 * all-reduces). */
static unsigned named_kinds(json_object *c, bool widen) {
  json_object *list;
  unsigned bits = 0;
  if (!json_object_object_get_ex(c, "xla_collectives", &list) || !json_object_is_type(list, json_type_array))
    return 0;
  for (size_t k = 0; k < json_object_array_length(list); k++) {
    const char *name = json_object_get_string(json_object_array_get_idx(list, k));
    for (int kind = 0; kind < HK_EVAL_NUM_COLLECTIVE_KINDS; kind++)
      if (name && !strcmp(name, hk_collective_kind_name(kind))) bits |= 1u << kind;
  }
  if (widen && (bits & (1u << HK_COLL_ALL_REDUCE))) bits |= 1u << HK_COLL_ALL_GATHER | 1u << HK_COLL_REDUCE_SCATTER;
  return bits;
}

/* "all-gather,all-to-all" for the kinds in bits ("none" when empty). */
static void kinds_text(unsigned bits, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int kind = 0; kind < HK_EVAL_NUM_COLLECTIVE_KINDS && n < cap; kind++)
    if (bits & (1u << kind)) n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? "," : "", hk_collective_kind_name(kind));
  if (!n) snprintf(out, cap, "none");
}

/* True when every collective kind in m is one the case's xla_collectives
 * names; the reason lists the kinds emitted and the kinds named. */
static bool collectives_as_xla(json_object *c, const hk_module *m, char *reason, size_t cap) {
  json_object *list;
  if (!json_object_object_get_ex(c, "xla_collectives", &list) || !json_object_is_type(list, json_type_array))
    return true;   /* the test names no op: nothing to hold the module to */
  unsigned emitted = 0, named = named_kinds(c, true);
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) emitted |= collective_kind_bit(i->opcode);
  if (!(emitted & ~named)) return true;
  char e[160], w[160];
  kinds_text(emitted, e, sizeof e);
  kinds_text(named_kinds(c, false), w, sizeof w);
  set_reason(reason, cap, "emits %s; XLA's test names %s", e, w);
  return false;
}

static bool spmd_case_with(runner *r, json_object *c, const char *extra_passes, module_check_fn after,
                           char *reason, size_t cap);

static bool spmd_case(runner *r, json_object *c, char *reason, size_t cap) {
  return spmd_case_with(r, c, NULL, NULL, reason, cap);
}

/* The spmd case with the @hilo-collectives passes appended: still equal,
 * and every channel id unique afterwards. */
static bool spmd_hilo_case(runner *r, json_object *c, char *reason, size_t cap) {
  return spmd_case_with(r, c, "@hilo-collectives", channel_ids_unique, reason, cap);
}

/* The spmd case, and no collective kind XLA's test does not name. */
static bool spmd_quality_case(runner *r, json_object *c, char *reason, size_t cap) {
  return spmd_case_with(r, c, NULL, collectives_as_xla, reason, cap);
}

/* Partitions the case with its options (then extra_passes), checks it with
 * `hlokit check`, and, when after is given, judges the written partitioned
 * module with it; the case's bytes moved and full rematerializations go to
 * r->metrics. */
static bool spmd_case_with(runner *r, json_object *c, const char *extra_passes, module_check_fn after,
                           char *reason, size_t cap) {
  const char *hlo = jstr(c, "hlo");
  char path[4096], spec[2048], nparts[64], timeout_s[32];
  if (!hlo || !write_temp_hlo(hlo, path, sizeof path)) {
    set_reason(reason, cap, "cannot write the case's module");
    return false;
  }
  if (!strcmp(jstr(c, "partitioner") ? jstr(c, "partitioner") : "", "stateful_rng"))
    stateful_rng_pass_spec(c, spec, sizeof spec);
  else
    spmd_pass_spec(c, spec, sizeof spec);
  snprintf(nparts, sizeof nparts, "--num-partitions=%lld", (long long)jint(c, "num_devices", 1));
  /* Evaluation-bound cases are cut at SPMD_CASE_SECONDS (or the runner's
   * timeout if shorter) so the suite stays a few minutes long. */
  int limit = r->timeout_s > 5 ? r->timeout_s - 5 : r->timeout_s;
  if (limit > SPMD_CASE_SECONDS) limit = SPMD_CASE_SECONDS;
  snprintf(timeout_s, sizeof timeout_s, "%d", limit);
  char passes[2200], out_path[4200];
  snprintf(passes, sizeof passes, "--passes=%s%s%s", spec, extra_passes ? "," : "",
           extra_passes ? extra_passes : "");
  snprintf(out_path, sizeof out_path, "%s.out.hlo", path);
  /* With a judgement the result is also written (-o) to judge it; without,
   * the NULL ends argv before "-o". */
  char *argv[] = {"/usr/bin/timeout", "-s", "KILL", timeout_s, (char *)r->hlokit, "check",
                  path, nparts, passes, "--json", after ? "-o" : NULL, out_path, NULL};
  char *out = NULL;
  int sig = 0;
  int rc = run_command(argv, &out, &sig);
  unlink(path);
  bool expect_error = jbool(c, "expect_error", false);
  bool ok = false;
  if (rc == 137 || sig) set_reason(reason, cap, "timed out or killed (signal %d)", sig ? sig : 9);
  else if (expect_error) {
    ok = rc == 2;
    if (!ok) set_reason(reason, cap, "expected a clean error, got exit %d", rc);
  } else {
    const char *j = out ? strstr(out, "{\"equal\"") : NULL;
    json_object *res = j ? json_tokener_parse(j) : NULL;
    if (!res) {
      const char *msg = out ? out : "";
      set_reason(reason, cap, "exit %d: %.300s", rc, msg);
    } else {
      bool equal = jbool(res, "equal", false);
      r->metrics = (case_metrics){jint(res, "bytes_moved_per_device", -1), jint(res, "full_rematerializations", -1)};
      const char *mode = jstr(res, "mode");
      bool sampled = mode && !strcmp(mode, "sampled");
      const char *want = jstr(c, "root_shape"), *got = jstr(res, "partitioned_root_shape");
      char a[512], b[512];
      strip_layouts(want ? want : "", a, sizeof a);
      strip_layouts(got ? got : "", b, sizeof b);
      if (!equal) {
        const char *msg = jstr(res, "message");
        set_reason(reason, cap, "%spartitioned result differs (max abs error %s)%s%.200s",
                   sampled ? SAMPLED_MARK " " : "", jstr(res, "max_abs_error") ? jstr(res, "max_abs_error") : "?",
                   msg ? ": " : "", msg ? msg : "");
      } else if (want && strcmp(a, b)) {
        set_reason(reason, cap, "root shape %s, expected %s", b, a);
      } else {
        ok = !after || judge_partitioned(c, out_path, after, reason, cap);
        if (ok && sampled) set_reason(reason, cap, SAMPLED_MARK " %s of %s positions", jstr(res, "samples"),
                                      jstr(res, "samples_planned"));
      }
      json_object_put(res);
    }
  }
  if (after) unlink(out_path);
  free(out);
  return ok;
}

static void spmd_each(runner *r, json_object *c, int index) {
  (void)index;
  const char *name = jstr(c, "name");
  run_case(r, "spmd", jbool(c, "expect_error", false) ? "error" : "module", NULL,
           name ? name : "?", spmd_case, c);
}

static void suite_spmd(runner *r) {
  if (!for_each_line(r, "spmd.jsonl", spmd_each)) record_missing(r, "spmd", "spmd.jsonl");
}

/* --export=DIR: each spmd case expected to partition becomes DIR/NNNN.hlo
 * and a line "NNNN NUM_DEVICES --passes=SPEC NAME" (tab-separated) of DIR/cases.txt, for scripts
 * that run the partitioned programs another way (scripts/test-mpi.sh). */
static void export_each(runner *r, json_object *c, int index) {
  const char *hlo = jstr(c, "hlo"), *name = jstr(c, "name");
  if (!hlo || jbool(c, "expect_error", false) || (r->filter && (!name || !strstr(name, r->filter)))) return;
  if (strcmp(jstr(c, "partitioner") ? jstr(c, "partitioner") : "spmd", "spmd")) return;
  char path[4200], spec[2048];
  snprintf(path, sizeof path, "%s/%04d.hlo", r->export_dir, index);
  FILE *f = fopen(path, "w");
  snprintf(path, sizeof path, "%s/cases.txt", r->export_dir);
  FILE *list = fopen(path, "a");
  if (f && list) {
    spmd_pass_spec(c, spec, sizeof spec);
    fputs(hlo, f);
    fprintf(list, "%04d\t%lld\t--passes=%s\t%s\n", index, (long long)jint(c, "num_devices", 1),
            spec, name ? name : "?");
  }
  if (f) fclose(f);
  if (list) fclose(list);
}

static void spmd_hilo_each(runner *r, json_object *c, int index) {
  (void)index;
  const char *name = jstr(c, "name");
  run_case(r, "spmd_hilo", jbool(c, "expect_error", false) ? "error" : "module", NULL,
           name ? name : "?", spmd_hilo_case, c);
}

static void suite_spmd_hilo(runner *r) {
  if (!for_each_line(r, "spmd.jsonl", spmd_hilo_each))
    record_missing(r, "spmd_hilo", "spmd.jsonl");
}

/* Cases whose test names no op at all (xla_collectives null) have nothing
 * to be held to: they are tallied apart, as spmd_quality_unnamed, and pass
 * when check says equal; the spmd_quality rate is over the cases that name
 * ops, as the issue measures it. */
static void spmd_quality_each(runner *r, json_object *c, int index) {
  (void)index;
  const char *name = jstr(c, "name");
  json_object *list;
  bool named = json_object_object_get_ex(c, "xla_collectives", &list) && json_object_is_type(list, json_type_array);
  run_case(r, named ? "spmd_quality" : "spmd_quality_unnamed", jbool(c, "expect_error", false) ? "error" : "module",
           NULL, name ? name : "?", spmd_quality_case, c);
}

static void suite_spmd_quality(runner *r) {
  if (!for_each_line(r, "spmd.jsonl", spmd_quality_each)) record_missing(r, "spmd_quality", "spmd.jsonl");
}

/* ---- suite: stateful_rng -------------------------------------------------------- */
/* Run and judged as spmd cases (spmd_case picks the pipeline from the
 * case's "partitioner"). */

static void stateful_rng_each(runner *r, json_object *c, int index) {
  (void)index;
  const char *name = jstr(c, "name");
  run_case(r, "stateful_rng", jbool(c, "expect_error", false) ? "error" : "module", NULL,
           name ? name : "?", spmd_case, c);
}

static void suite_stateful_rng(runner *r) {
  if (!for_each_line(r, "stateful_rng.jsonl", stateful_rng_each))
    record_missing(r, "stateful_rng", "stateful_rng.jsonl");
}

/* ---- suite: propagation -------------------------------------------------------- */

/* The case's params as option text; `parameterized` options take the value
 * of bit `*bit` of combo (and advance *bit). */
static void prop_option(json_object *val, const char *key, int combo, int *bit, char *out,
                        size_t cap, size_t *n) {
  const char *text;
  char buf[256];
  if (json_object_is_type(val, json_type_string) &&
      strcmp(json_object_get_string(val), "parameterized") == 0) {
    bool on = (combo >> (*bit)++) & 1;
    bool list = strstr(key, "allow_spmd") != NULL;
    text = list ? (on ? "[true]" : "[false]") : (on ? "true" : "false");
  } else if (json_object_is_type(val, json_type_boolean)) {
    text = json_object_get_boolean(val) ? "true" : "false";
  } else if (json_object_is_type(val, json_type_array)) {
    size_t b = (size_t)snprintf(buf, sizeof buf, "[");
    for (size_t k = 0; k < json_object_array_length(val) && b < sizeof buf; k++)
      b += (size_t)snprintf(buf + b, sizeof buf - b, "%s%s", k ? "," : "",
                            json_object_get_boolean(json_object_array_get_idx(val, k)) ? "true" : "false");
    if (b < sizeof buf) snprintf(buf + b, sizeof buf - b, "]");
    text = buf;
  } else {
    return;
  }
  if (*n < cap) *n += (size_t)snprintf(out + *n, cap - *n, " %s=%s", key, text);
}

/* Pass spec for one combination of the parameterized options; returns the
 * number of parameterized options through *n_param. */
static void prop_pass_spec(json_object *c, int combo, int *n_param, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "--passes=sharding-propagation{");
  int bit = 0;
  json_object *params;
  if (json_object_object_get_ex(c, "params", &params) && json_object_is_type(params, json_type_object)) {
    json_object_object_foreach(params, key, val) {
      if (strcmp(key, "run_extra_args") == 0) continue;
      prop_option(val, key, combo, &bit, out, cap, &n);
    }
  }
  if (n < cap) snprintf(out + n, cap - n, "}");
  *n_param = bit;
}

static hk_instr *find_instr_named(hk_module *m, const char *name) {
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_instr *i = hk_computation_find_instr(m->computations[k], name);
    if (i) return i;
  }
  return NULL;
}

/* Every unconditional expectation holds in the propagated module. */
static bool prop_check_expected(json_object *c, hk_module *m, char *reason, size_t cap) {
  json_object *exp;
  if (!json_object_object_get_ex(c, "expected", &exp)) return true;
  for (size_t k = 0; k < json_object_array_length(exp); k++) {
    json_object *e = json_object_array_get_idx(exp, k);
    if (jbool(e, "conditional", false)) continue;
    const char *name = jstr(e, "instruction"), *want = jstr(e, "sharding");
    hk_instr *i = name ? find_instr_named(m, name) : NULL;
    if (!i) {
      set_reason(reason, cap, "no instruction '%s' after propagation", name ? name : "?");
      return false;
    }
    char *got = i->sharding ? hk_sharding_to_string(i->sharding) : NULL;
    bool ok;
    if (!want) {
      ok = i->sharding == NULL;
    } else {
      const hk_sharding *ws = NULL;
      hk_status *st = hk_sharding_parse(m, want, strlen(want), &ws, NULL);
      if (st) hk_status_free(st);
      ok = ws && i->sharding &&
           hk_sharding_equivalent(hk_sharding_for_shape(m, hk_sharding_canonical(m, ws), i->shape),
                                  hk_sharding_for_shape(m, i->sharding, i->shape));
    }
    if (!ok) set_reason(reason, cap, "%s: got %s, expected %s", name, got ? got : "none",
                        want ? want : "none");
    free(got);
    if (!ok) return false;
  }
  return true;
}

/* One run of the pass; checks the outcome against the case. */
static bool prop_run_once(runner *r, json_object *c, const char *in, const char *spec,
                          char *reason, size_t cap) {
  char out_path[4200], timeout_s[32];
  snprintf(out_path, sizeof out_path, "%.4096s.out.hlo", in);
  /* Evaluation-bound cases are cut at SPMD_CASE_SECONDS (or the runner's
   * timeout if shorter) so the suite stays a few minutes long. */
  int limit = r->timeout_s > 5 ? r->timeout_s - 5 : r->timeout_s;
  if (limit > SPMD_CASE_SECONDS) limit = SPMD_CASE_SECONDS;
  snprintf(timeout_s, sizeof timeout_s, "%d", limit);
  char *argv[] = {"/usr/bin/timeout", "-s", "KILL", timeout_s, (char *)r->hlokit, "opt", (char *)in,
                  (char *)spec, "--time-passes", "--no-verify", "-o", out_path, NULL};
  char *out = NULL;
  int sig = 0;
  int rc = run_command(argv, &out, &sig);
  bool ok = false;
  if (rc == 137 || sig) {
    set_reason(reason, cap, "timed out or killed (signal %d)", sig ? sig : 9);
  } else if (jbool(c, "expect_error", false)) {
    ok = rc == 2;
    if (!ok) set_reason(reason, cap, "expected a clean error, got exit %d", rc);
  } else if (rc != 0) {
    set_reason(reason, cap, "exit %d: %.300s", rc, out ? out : "");
  } else {
    size_t len = 0;
    char *text = slurp(out_path, &len);
    hk_module *m = NULL;
    hk_status *st = text ? hk_parse_module(text, len, out_path, &m) : NULL;
    if (!text) set_reason(reason, cap, "no output module");
    else if (st) fail_status(reason, cap, "output does not parse", st);
    else ok = prop_check_expected(c, m, reason, cap);
    json_object *ec;
    if (ok && json_object_object_get_ex(c, "expect_changed", &ec) &&
        json_object_is_type(ec, json_type_boolean)) {
      const char *line = out ? strstr(out, "sharding-propagation") : NULL;
      bool changed = line && strstr(line, "yes") && (!strchr(line, '\n') || strstr(line, "yes") < strchr(line, '\n'));
      if (changed != json_object_get_boolean(ec)) {
        ok = false;
        set_reason(reason, cap, "changed=%s, expected %s", changed ? "true" : "false",
                   json_object_get_boolean(ec) ? "true" : "false");
      }
    }
    hk_module_free(m);
    free(text);
  }
  unlink(out_path);
  free(out);
  return ok;
}

static bool propagation_case(runner *r, json_object *c, char *reason, size_t cap) {
  const char *hlo = jstr(c, "hlo");
  char path[4096], spec[2048];
  if (!hlo || !write_temp_hlo(hlo, path, sizeof path)) {
    set_reason(reason, cap, "cannot write the case's module");
    return false;
  }
  int n_param = 0;
  prop_pass_spec(c, 0, &n_param, spec, sizeof spec);
  bool ok = true;
  for (int combo = 0; ok && combo < (1 << n_param); combo++) {
    prop_pass_spec(c, combo, &n_param, spec, sizeof spec);
    ok = prop_run_once(r, c, path, spec, reason, cap);
  }
  unlink(path);
  return ok;
}

static void propagation_each(runner *r, json_object *c, int index) {
  (void)index;
  const char *name = jstr(c, "name");
  run_case(r, "propagation", jbool(c, "expect_error", false) ? "error" : "module", NULL,
           name ? name : "?", propagation_case, c);
}

static void suite_propagation(runner *r) {
  if (!for_each_line(r, "propagation.jsonl", propagation_each))
    record_missing(r, "propagation", "propagation.jsonl");
}

/* ---- driver ------------------------------------------------------------------ */

typedef struct suite {
  const char *name;
  void (*run)(runner *r);
  const char *what;
} suite;

static const suite SUITES[] = {
    {"parser", suite_parser, "parser.jsonl: roundtrip, non_roundtrip, parse_ok, error"},
    {"spmd", suite_spmd,
     "spmd.jsonl: spmd-partitioning then hlokit check (equal values, root shape)"},
    {"spmd_hilo", suite_spmd_hilo,
     "spmd.jsonl: spmd-partitioning,@hilo-collectives then hlokit check; channel ids unique"},
    {"spmd_quality", suite_spmd_quality,
     "spmd.jsonl: as spmd, and every collective kind emitted is one XLA's test names "
     "(all-gather/reduce-scatter named where all-reduce is); cases naming no op "
     "tallied as spmd_quality_unnamed"},
    {"stateful_rng", suite_stateful_rng,
     "stateful_rng.jsonl: rng-expander, sharding-propagation{is_spmd=true}, "
     "stateful-rng-spmd-partitioning, then hlokit check"},
    {"propagation", suite_propagation,
     "propagation.jsonl: sharding-propagation, expected shardings compared semantically"},
    {"corpus", suite_corpus,
     "every spmd/propagation/stateful_rng module parses, verifies, prints to a "
     "fixed point and round-trips through JSON"},
};
#define N_SUITES (sizeof SUITES / sizeof SUITES[0])

static bool suite_selected(const char *list, const char *name) {
  if (!list) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    p += len + (comma ? 1 : 0);
  }
  return false;
}

static void print_tallies(const runner *r) {
  printf("\n%-28s %9s %7s\n", "suite/kind", "passed", "rate");
  for (int i = 0; i < r->n_tallies; i++) {
    const tally *t = &r->tallies[i];
    int total = t->passed + t->failed;
    printf("%-28s %4d/%-4d %6.1f%%\n", t->name, t->passed, total,
           total ? 100.0 * t->passed / total : 0.0);
  }
  for (int i = 0; i < r->n_tallies; i++)
    if (r->tallies[i].sampled)
      printf("%s: %d of %d passes checked on sampled elements\n", r->tallies[i].name,
             r->tallies[i].sampled, r->tallies[i].passed);
  for (int i = 0; i < r->n_tallies; i++) {
    const tally *t = &r->tallies[i];
    if (t->measured || t->remat_cases)
      printf("%s: bytes_moved_per_device total %lld over %d cases; full rematerializations %lld in %d cases\n",
             t->name, (long long)t->bytes_moved, t->measured, (long long)t->remats, t->remat_cases);
  }
  for (int i = 0; i < r->n_tallies; i++) {
    const tally *t = &r->tallies[i];
    int total = t->passed + t->failed;
    printf("rate %s %.4f\n", t->name, total ? (double)t->passed / total : 0.0);
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: hk-conformance [--dir=DIR] [--suite=NAME[,NAME]] [--list=FILE]\n"
          "                      [--filter=SUBSTR] [--hlokit=PATH] [--timeout=SECONDS]\n"
          "                      [--jobs=N] [--no-fork] [-v] [--export=DIR]\n"
          "  DIR defaults to $HLOKIT_CONFORMANCE_DIR or ../shared/conformance\n"
          "  N cases run at once in child processes (default $JOBS or the core count)\n"
          "  --export=DIR writes the spmd cases (DIR/NNNN.hlo, DIR/cases.txt) and runs nothing\n"
          "suites:\n");
  for (size_t i = 0; i < N_SUITES; i++) fprintf(f, "  %-12s %s\n", SUITES[i].name, SUITES[i].what);
}

static const char *opt_value(const char *arg, const char *name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

int main(int argc, char **argv) {
  runner r = {0};
  const char *env_dir = getenv("HLOKIT_CONFORMANCE_DIR");
  r.dir = env_dir && *env_dir ? env_dir : "../shared/conformance";
  r.fork_cases = true;
  r.timeout_s = 60;
  const char *env_jobs = getenv("JOBS");
  r.jobs = env_jobs && atoi(env_jobs) > 0 ? atoi(env_jobs) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  r.list = stdout;
  r.hlokit = "build/hlokit";
  const char *suites = NULL, *list_path = NULL, *v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((v = opt_value(a, "--dir"))) r.dir = v;
    else if ((v = opt_value(a, "--suite"))) suites = v;
    else if ((v = opt_value(a, "--list"))) list_path = v;
    else if ((v = opt_value(a, "--filter"))) r.filter = v;
    else if ((v = opt_value(a, "--hlokit"))) r.hlokit = v;
    else if ((v = opt_value(a, "--timeout"))) r.timeout_s = atoi(v) > 0 ? atoi(v) : 60;
    else if ((v = opt_value(a, "--jobs"))) r.jobs = atoi(v);
    else if ((v = opt_value(a, "--export"))) r.export_dir = v;
    else if (strcmp(a, "--no-fork") == 0) r.fork_cases = false;
    else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) r.verbose = true;
    else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "hk-conformance: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  for (const char *p = suites; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    bool known = false;
    for (size_t i = 0; i < N_SUITES; i++)
      known |= strlen(SUITES[i].name) == len && strncmp(SUITES[i].name, p, len) == 0;
    if (!known) {
      fprintf(stderr, "hk-conformance: unknown suite '%.*s'\n", (int)len, p);
      return 2;
    }
    p += len + (comma ? 1 : 0);
  }
  if (r.jobs < 1) r.jobs = 1;
  if (r.jobs > MAX_JOBS) r.jobs = MAX_JOBS;
  if (list_path && !(r.list = fopen(list_path, "w"))) {
    fprintf(stderr, "hk-conformance: cannot write %s: %s\n", list_path, strerror(errno));
    return 2;
  }
  if (r.export_dir) {
    bool ok = for_each_line(&r, "spmd.jsonl", export_each);
    return ok ? 0 : 2;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (size_t i = 0; i < N_SUITES; i++)
    if (suite_selected(suites, SUITES[i].name)) SUITES[i].run(&r);
  collect_all(&r);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (r.list != stdout) fclose(r.list);
  print_tallies(&r);
  printf("conformance: %.1f s, corpus %s\n",
         (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, r.dir);
  /* Not in the "N passed, N failed" form: failing cases are expected and
   * judged against floors by conformance.sh, which prints the verdict. */
  printf("conformance cases: %d pass, %d fail\n", r.passed, r.failed);
  return r.failed ? 1 : 0;
}
