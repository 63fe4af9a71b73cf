/* cli_common.c - what every hlokit subcommand shares: common options,
 * plugin loading, reading a module (text or JSON), building and running
 * the pipeline, and writing output whole or not at all. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"

void hk_cli_common_init(hk_cli_common *c) {
  memset(c, 0, sizeof *c);
  c->num_partitions = -1;
  c->num_replicas = -1;
  c->print_form = HK_PRINT_LONG;
}

void hk_cli_common_free(hk_cli_common *c) {
  free(c->plugin_files);
  free(c->plugin_dirs);
}

bool hk_cli_is_option(const char *arg) { return arg[0] == '-' && arg[1] != '\0'; }

int hk_cli_fail(const char *cmd, hk_status *st) {
  const char *msg = st ? st->message : "unknown error";
  /* Parse errors already read "FILE:LINE:COL: error: ...". */
  fprintf(stderr, "hlokit %s: %s%s\n", cmd, strstr(msg, ": error: ") ? "" : "error: ", msg);
  hk_status_free(st);
  return HK_EXIT_ERROR;
}

int hk_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hlokit %s: error: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nusage: %s\n", usage);
  return HK_EXIT_ERROR;
}

/* ---- option parsing --------------------------------------------------------- */

/* If argv[*i] is `name=VALUE` or `name VALUE`, returns VALUE (advancing *i
 * past a separate value); else NULL.  *missing is set for `name` last. */
static const char *option_value(const char *name, int argc, char **argv, int *i,
                                bool *missing) {
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return NULL;
  if (arg[n] == '=') return arg + n + 1;
  if (arg[n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static void push(const char ***list, int32_t *n, const char *v) {
  *list = hk_check_alloc(realloc(*list, sizeof(char *) * (size_t)(*n + 1)));
  (*list)[(*n)++] = v;
}

static int parse_count(const char *opt, const char *v, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end || !*v || x < 1) {
    fprintf(stderr, "hlokit: error: %s expects a positive integer, got '%s'\n", opt, v);
    return -1;
  }
  *out = x;
  return 1;
}

static int parse_choice(const char *opt, const char *v, const char *a, const char *b,
                        bool *is_b) {
  if (strcmp(v, a) == 0 || strcmp(v, b) == 0) {
    *is_b = strcmp(v, b) == 0;
    return 1;
  }
  fprintf(stderr, "hlokit: error: %s expects %s or %s, got '%s'\n", opt, a, b, v);
  return -1;
}

static int parse_flag(hk_cli_common *c, const char *arg) {
  static const struct { const char *name; size_t off; } flags[] = {
      {"--time-passes", offsetof(hk_cli_common, time_passes)},
      {"--verify-each", offsetof(hk_cli_common, verify_each)},
      {"--no-verify", offsetof(hk_cli_common, no_verify)},
      {"--no-default-plugins", offsetof(hk_cli_common, no_default_plugins)},
      {"--json", offsetof(hk_cli_common, json)},
  };
  for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
    if (strcmp(arg, flags[k].name) == 0) {
      *(bool *)((char *)c + flags[k].off) = true;
      return 1;
    }
  }
  return 0;
}

/* String-valued options stored as-is. */
static int parse_string_option(hk_cli_common *c, int argc, char **argv, int *i, bool *missing) {
  static const struct { const char *name; size_t off; } opts[] = {
      {"--passes", offsetof(hk_cli_common, passes)},
      {"--pipeline", offsetof(hk_cli_common, pipeline_file)},
      {"--dump-after", offsetof(hk_cli_common, dump_after)},
      {"--dump-dir", offsetof(hk_cli_common, dump_dir)},
      {"--execution-threads", offsetof(hk_cli_common, execution_threads)},
      {"-o", offsetof(hk_cli_common, output)},
      {"--output", offsetof(hk_cli_common, output)},
  };
  for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
    const char *v = option_value(opts[k].name, argc, argv, i, missing);
    if (v) {
      *(const char **)((char *)c + opts[k].off) = v;
      return 1;
    }
    if (*missing) return 0;
  }
  return 0;
}

static int parse_typed_option(hk_cli_common *c, int argc, char **argv, int *i, bool *missing) {
  const char *v;
  bool is_b;
  if ((v = option_value("--load-pass-plugin", argc, argv, i, missing)))
    return push(&c->plugin_files, &c->n_plugin_files, v), 1;
  if ((v = option_value("--plugin-dir", argc, argv, i, missing)))
    return push(&c->plugin_dirs, &c->n_plugin_dirs, v), 1;
  if ((v = option_value("--num-partitions", argc, argv, i, missing)))
    return parse_count("--num-partitions", v, &c->num_partitions);
  if ((v = option_value("--num-replicas", argc, argv, i, missing)))
    return parse_count("--num-replicas", v, &c->num_replicas);
  if ((v = option_value("--print-form", argc, argv, i, missing))) {
    int r = parse_choice("--print-form", v, "long", "short", &is_b);
    c->print_form = is_b ? HK_PRINT_SHORT : HK_PRINT_LONG;
    return r;
  }
  if ((v = option_value("--format", argc, argv, i, missing))) {
    int r = parse_choice("--format", v, "hlo", "json", &is_b);
    c->format_json = is_b;
    return r;
  }
  return 0;
}

int hk_cli_parse_common(hk_cli_common *c, int argc, char **argv, int *i) {
  bool missing = false;
  int r = parse_flag(c, argv[*i]);
  if (!r) r = parse_string_option(c, argc, argv, i, &missing);
  if (!r && !missing) r = parse_typed_option(c, argc, argv, i, &missing);
  if (missing) {
    fprintf(stderr, "hlokit: error: %s needs a value\n", argv[*i]);
    return -1;
  }
  return r;
}

/* ---- plugins -------------------------------------------------------------------- */

hk_status *hk_cli_load_plugins(const hk_cli_common *c, hk_registry **out) {
  hk_registry *reg = hk_registry_new();
  hk_plugin_sources src = {c->n_plugin_dirs, c->plugin_dirs, c->n_plugin_files,
                           c->plugin_files, c->no_default_plugins};
  hk_status *st = hk_plugin_load_all(reg, &src);
  if (st) {
    hk_registry_free(reg);
    return st;
  }
  *out = reg;
  return NULL;
}

/* ---- input ------------------------------------------------------------------------ */

static bool looks_like_json(const char *data, size_t len) {
  for (size_t i = 0; i < len; i++) {
    char ch = data[i];
    if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') continue;
    return ch == '{';
  }
  return false;
}

hk_status *hk_cli_read_module(const hk_cli_common *c, const char *path, hk_module **out) {
  hk_file_bytes f;
  hk_status *st = hk_file_bytes_open(path, &f);
  const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
  if (!st) {
    if (looks_like_json(f.data, f.len))
      st = hk_module_from_json(f.data, f.len, name, out);
    else
      st = hk_parse_module(f.data, f.len, name, out);
    if (!st && (st = hk_cli_sdy_auto_import(c, *out, name))) {
      hk_module_free(*out);
      *out = NULL;
    }
  }
  hk_file_bytes_close(&f);
  return st;
}

void hk_cli_apply_config(const hk_cli_common *c, hk_module *m) {
  if (c->num_partitions > 0) {
    m->config.num_partitions = c->num_partitions;
    if (c->num_partitions > 1) m->config.use_spmd_partitioning = true;
  }
  if (c->num_replicas > 0) m->config.replica_count = c->num_replicas;
}

/* ---- pipeline ------------------------------------------------------------------------ */

static hk_status *pipeline_spec(const hk_cli_common *c, const hk_module *m,
                                hk_pipeline_spec *spec) {
  if (c->passes && c->pipeline_file)
    return hk_error(HK_INVALID_ARGUMENT, "give --passes or --pipeline, not both");
  if (c->pipeline_file) return hk_pipeline_spec_from_file(c->pipeline_file, &m->config, spec);
  return hk_pipeline_spec_parse(c->passes ? c->passes : "", &m->config, spec);
}

hk_status *hk_cli_build_pipeline(const hk_cli_common *c, hk_registry *reg,
                                 const hk_module *m, hk_pass **out) {
  if (c->dump_after && !c->dump_dir)
    return hk_error(HK_INVALID_ARGUMENT, "--dump-after needs --dump-dir=DIR");
  hk_pipeline_spec spec;
  HK_TRY(pipeline_spec(c, m, &spec));
  hk_status *st = hk_pipeline_build(reg, &spec, "opt", out);
  hk_pipeline_spec_free(&spec);
  if (st) return st;
  if (c->time_passes || c->verify_each || c->dump_after) {
    hk_pipeline_run_options ro = {c->time_passes, c->verify_each, c->dump_after,
                                  c->dump_dir, c->print_form, stderr};
    hk_pipeline_set_run_options(*out, &ro);
  }
  return NULL;
}

hk_status *hk_cli_run_pipeline(const hk_cli_common *c, hk_pass *pipeline, hk_module *m,
                               bool *changed) {
  hk_exec_threads threads = hk_exec_threads_parse(c->execution_threads);
  hk_status *st = hk_pass_run(pipeline, m, &threads, changed);
  hk_exec_threads_free(&threads);
  return st;
}

hk_status *hk_cli_verify(const hk_module *m, const char *when) {
  hk_verify_options vo = hk_verify_defaults();
  hk_status *st = hk_verify_module(m, &vo);
  return st ? hk_status_prefix(st, "%s", when) : NULL;
}

/* ---- output -------------------------------------------------------------------------- */

void hk_cli_format_module(const hk_cli_common *c, const hk_module *m, hk_buf *out) {
  if (c->format_json) {
    hk_module_to_json(m, true, out);
    if (out->len && out->data[out->len - 1] != '\n') hk_buf_put(out, "\n", 1);
  } else {
    hk_print_module(m, c->print_form, out);
  }
}

/* write(2) at most this much at a time: one 120 MB write to a new file
 * took 0.4-1.3 s of the process, the same bytes a megabyte at a time
 * 0.03-0.35 s (strace -c, 10^6-instruction module, shared 2 cores). */
#define WRITE_CHUNK ((size_t)1 << 20)

static hk_status *write_fd(int fd, const char *path, const char *data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len < WRITE_CHUNK ? len : WRITE_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return hk_error(HK_INVALID_ARGUMENT, "%s: write failed: %s", path, strerror(errno));
    data += n;
    len -= (size_t)n;
  }
  return NULL;
}

/* Mode for a new file: the old file's mode, or 0666 minus the umask. */
static mode_t file_mode(const char *target) {
  struct stat st;
  if (stat(target, &st) == 0) return st.st_mode & 07777;
  mode_t u = umask(0);
  umask(u);
  return 0666 & ~u;
}

/* A temporary file beside target, to be renamed over it. */
static hk_status *open_beside(const char *target, hk_cli_output *o) {
  char *copy = hk_check_alloc(strdup(target)), *base_copy = hk_check_alloc(strdup(target));
  const char *dir = dirname(copy);
  o->tmp = hk_check_alloc(malloc(strlen(dir) + strlen(target) + 32));
  sprintf(o->tmp, "%s/.%s.hlokit-XXXXXX", dir, basename(base_copy));
  free(base_copy);
  free(copy);
  o->fd = mkstemp(o->tmp);
  if (o->fd >= 0) return NULL;
  hk_status *st = hk_error(HK_INVALID_ARGUMENT, "%s: cannot create a temporary file beside it: %s",
                           target, strerror(errno));
  free(o->tmp);
  o->tmp = NULL;
  return st;
}

hk_status *hk_cli_output_open(const char *path, hk_cli_output *o) {
  memset(o, 0, sizeof *o);
  if (!path || strcmp(path, "-") == 0) {
    fflush(stdout);
    o->fd = STDOUT_FILENO;
    o->name = hk_check_alloc(strdup("<stdout>"));
    return NULL;
  }
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    o->name = hk_check_alloc(strdup(path));
    o->fd = open(path, O_WRONLY);
    if (o->fd >= 0) return NULL;
    hk_status *s = hk_error(HK_INVALID_ARGUMENT, "%s: cannot open: %s", path, strerror(errno));
    free(o->name);
    o->name = NULL;
    return s;
  }
  struct stat lst;
  char *real = NULL;
  if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) real = realpath(path, NULL);
  o->name = real ? real : hk_check_alloc(strdup(path));
  hk_status *s = open_beside(o->name, o);
  if (s) {
    free(o->name);
    o->name = NULL;
  }
  return s;
}

hk_status *hk_cli_output_write(hk_cli_output *o, const char *data, size_t len) {
  return write_fd(o->fd, o->name, data, len);
}

hk_status *hk_cli_output_close(hk_cli_output *o, hk_status *st) {
  const char *target = o->name;
  if (!st && o->tmp && fchmod(o->fd, file_mode(target)) != 0)
    st = hk_error(HK_INVALID_ARGUMENT, "%s: chmod failed: %s", target, strerror(errno));
  if (o->fd != STDOUT_FILENO && close(o->fd) != 0 && !st)
    st = hk_error(HK_INVALID_ARGUMENT, "%s: write failed: %s", target, strerror(errno));
  if (!st && o->tmp && rename(o->tmp, target) != 0)
    st = hk_error(HK_INVALID_ARGUMENT, "%s: cannot replace: %s", target, strerror(errno));
  if (st && o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->name);
  memset(o, 0, sizeof *o);
  return st;
}

hk_status *hk_cli_write_output(const char *path, const char *data, size_t len) {
  hk_cli_output o;
  HK_TRY(hk_cli_output_open(path, &o));
  return hk_cli_output_close(&o, hk_cli_output_write(&o, data, len));
}

/* hk_print_module_stream's sink: the text into the output file; stops
 * the print at the first failure (kept in st). */
typedef struct print_sink {
  hk_cli_output *o;
  hk_status *st;
} print_sink;

static int write_printed(void *ctx, const char *data, size_t len) {
  print_sink *s = ctx;
  s->st = hk_cli_output_write(s->o, data, len);
  return s->st != NULL;
}

hk_status *hk_cli_write_module(const hk_cli_common *c, const hk_module *m) {
  if (c->format_json) {
    hk_buf out;
    hk_buf_init(&out);
    hk_cli_format_module(c, m, &out);
    hk_status *st = hk_cli_write_output(c->output, out.data ? out.data : "", out.len);
    hk_buf_free(&out);
    return st;
  }
  hk_cli_output o;
  HK_TRY(hk_cli_output_open(c->output, &o));
  print_sink s = {&o, NULL};
  hk_print_module_stream(m, c->print_form, write_printed, &s);
  return hk_cli_output_close(&o, s.st);
}

int hk_cli_parse_args(const char *cmd, const char *usage, int argc, char **argv,
                      hk_cli_common *c, hk_cli_own_option_fn own, void *ctx,
                      const char **in, bool *help) {
  *in = NULL;
  *help = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: %s\n", usage);
      *help = true;
      return HK_EXIT_OK;
    }
    int r = own ? own(ctx, argv[i]) : 0;
    if (r < 0) return hk_cli_usage_error(cmd, usage, "bad value in '%s'", argv[i]);
    if (r == 0 && hk_cli_is_option(argv[i])) r = hk_cli_parse_common(c, argc, argv, &i);
    if (r < 0) return HK_EXIT_ERROR;
    if (r == 0 && hk_cli_is_option(argv[i]))
      return hk_cli_usage_error(cmd, usage, "unknown option '%s'", argv[i]);
    if (r == 0 && *in)
      return hk_cli_usage_error(cmd, usage, "more than one input ('%s' and '%s')", *in, argv[i]);
    if (r == 0) *in = argv[i];
  }
  if (!*in) return hk_cli_usage_error(cmd, usage, "no input module");
  return HK_EXIT_OK;
}
