/* pipeline.c - the pass pipeline (itself a pass): a plain loop over its
 * passes, plus optional instrumentation (--time-passes, --verify-each,
 * --dump-after) and creating a pipeline from a spec. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pipeline/pipeline.h"

typedef struct hk_pipeline {
  hk_pass pass;
  char *name;
  int32_t n, cap;
  hk_pass **passes;
  bool instrumented;
  hk_pipeline_run_options ro;
  hk_pass_stat *stats;     /* n entries after an instrumented run */
  int32_t n_stats;
} hk_pipeline;

static hk_status *pipeline_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                               bool *changed);
static void pipeline_destroy(hk_pass *self);
static const void *pipeline_get_extension(hk_pass *self, const char *iface);

static const hk_pass_vtable pipeline_vtable = {
    .size = sizeof(hk_pass_vtable),
    .name = "pipeline",
    .run = pipeline_run,
    .destroy = pipeline_destroy,
    .get_extension = pipeline_get_extension,
};

bool hk_is_pipeline(const hk_pass *p) { return p && p->vt == &pipeline_vtable; }

hk_pass *hk_pipeline_new(const char *name) {
  hk_pipeline *pl = calloc(1, sizeof *pl);
  if (!pl) hk_out_of_memory();
  pl->pass.vt = &pipeline_vtable;
  pl->name = strdup(name ? name : "pipeline");
  return &pl->pass;
}

void hk_pipeline_add(hk_pass *pipeline, hk_pass *pass) {
  hk_pipeline *pl = (hk_pipeline *)pipeline;
  if (pl->n == pl->cap) {
    pl->cap = pl->cap ? pl->cap * 2 : 8;
    pl->passes = realloc(pl->passes, sizeof *pl->passes * (size_t)pl->cap);
    if (!pl->passes) hk_out_of_memory();
  }
  pl->passes[pl->n++] = pass;
}

int32_t hk_pipeline_size(const hk_pass *pipeline) {
  return ((const hk_pipeline *)pipeline)->n;
}

hk_pass *hk_pipeline_get(hk_pass *pipeline, int32_t i) {
  hk_pipeline *pl = (hk_pipeline *)pipeline;
  return i >= 0 && i < pl->n ? pl->passes[i] : NULL;
}

static void pipeline_destroy(hk_pass *self) {
  hk_pipeline *pl = (hk_pipeline *)self;
  for (int32_t i = 0; i < pl->n; i++) hk_pass_destroy(pl->passes[i]);
  free(pl->passes);
  free(pl->stats);
  free(pl->name);
  free(pl);
}

void hk_pipeline_set_run_options(hk_pass *pipeline, const hk_pipeline_run_options *ro) {
  hk_pipeline *pl = (hk_pipeline *)pipeline;
  pl->instrumented = ro != NULL;
  if (ro) pl->ro = *ro;
}

const hk_pass_stat *hk_pipeline_stats(const hk_pass *pipeline, int32_t *n) {
  const hk_pipeline *pl = (const hk_pipeline *)pipeline;
  *n = pl->n_stats;
  return pl->stats;
}

/* ---- counters: every member's, named "pass.counter" -------------------------- */

typedef struct prefixed_emit {
  const char *pass;
  hk_counter_fn emit;
  void *ctx;
} prefixed_emit;

static void emit_prefixed(void *ctx, const char *name, int64_t value) {
  const prefixed_emit *pe = ctx;
  char full[256];
  snprintf(full, sizeof full, "%s.%s", pe->pass, name);
  pe->emit(pe->ctx, full, value);
}

static void pipeline_report_counters(hk_pass *self, hk_counter_fn emit, void *ctx) {
  hk_pipeline *pl = (hk_pipeline *)self;
  for (int32_t i = 0; i < pl->n; i++) {
    hk_pass *p = pl->passes[i];
    /* A nested pipeline's members already carry their pass names. */
    if (hk_is_pipeline(p)) {
      hk_pass_report_counters(p, emit, ctx);
      continue;
    }
    prefixed_emit pe = {hk_pass_name(p), emit, ctx};
    hk_pass_report_counters(p, emit_prefixed, &pe);
  }
}

static const hk_pass_counters_vtable pipeline_counters = {
    .size = sizeof(hk_pass_counters_vtable),
    .report = pipeline_report_counters,
};

static const void *pipeline_get_extension(hk_pass *self, const char *iface) {
  (void)self;
  return iface && !strcmp(iface, HK_COUNTERS_IFACE) ? &pipeline_counters : NULL;
}

/* ---- the plain loop --------------------------------------------------------- */

static hk_status *run_plain(hk_pipeline *pl, hk_module *m, const hk_exec_threads *threads,
                            bool *changed) {
  for (int32_t i = 0; i < pl->n; i++) {
    hk_pass *p = pl->passes[i];
    bool c = false;
    hk_status *st = p->vt->run(p, m, threads, &c);
    if (st) return hk_status_prefix(st, "pass '%s'", p->vt->name);
    *changed |= c;
  }
  return NULL;
}

/* ---- instrumentation ----------------------------------------------------------- */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Is `name` in the comma list (or is the list "all")? */
static bool in_list(const char *list, const char *name) {
  if (!list) return false;
  if (strcmp(list, "all") == 0) return true;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

static void sanitize(char *s) {
  for (; *s; s++)
    if (*s == '/' || *s == ' ') *s = '_';
}

static hk_status *dump_module(const hk_pipeline *pl, const hk_module *m, int32_t idx,
                              const char *pass) {
  const char *dir = pl->ro.dump_dir ? pl->ro.dump_dir : ".";
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return hk_error(HK_INVALID_ARGUMENT, "--dump-dir %s: %s", dir, strerror(errno));
  size_t cap = strlen(dir) + strlen(m->name) + strlen(pass) + 64;
  char *path = malloc(cap);
  snprintf(path, cap, "%s/%s.%04d.after_%s.hlo", dir, m->name, (int)idx, pass);
  sanitize(path + strlen(dir) + 1);
  FILE *f = fopen(path, "w");
  hk_status *st = NULL;
  if (!f) {
    st = hk_error(HK_INVALID_ARGUMENT, "%s: cannot write dump: %s", path, strerror(errno));
  } else {
    char *text = hk_module_to_string(m, pl->ro.dump_form);
    fputs(text, f);
    free(text);
    if (fclose(f) != 0)
      st = hk_error(HK_INVALID_ARGUMENT, "%s: cannot write dump: %s", path, strerror(errno));
  }
  free(path);
  return st;
}

static hk_status *verify_after(const hk_module *m, int32_t idx, const char *pass) {
  hk_verify_options vo = hk_verify_defaults();
  hk_status *st = hk_verify_module(m, &vo);
  if (!st) return NULL;
  return hk_status_prefix(st, "--verify-each: pass '%s' (#%d in the pipeline) broke the module",
                          pass, (int)idx + 1);
}

static void report_times(const hk_pipeline *pl) {
  FILE *f = pl->ro.report ? pl->ro.report : stderr;
  double total = 0;
  fprintf(f, "%-4s %-32s %12s  %s\n", "#", "pass", "wall ms", "changed");
  for (int32_t i = 0; i < pl->n_stats; i++) {
    const hk_pass_stat *s = &pl->stats[i];
    total += s->seconds;
    fprintf(f, "%-4d %-32s %12.3f  %s\n", (int)i + 1, s->name, s->seconds * 1e3,
            s->changed ? "yes" : "no");
  }
  fprintf(f, "%-4s %-32s %12.3f\n", "", "total", total * 1e3);
}

static hk_status *after_pass(hk_pipeline *pl, hk_module *m, int32_t i, const char *name) {
  if (pl->ro.verify_each) HK_TRY(verify_after(m, i, name));
  if (in_list(pl->ro.dump_after, name)) HK_TRY(dump_module(pl, m, i + 1, name));
  return NULL;
}

static hk_status *run_instrumented(hk_pipeline *pl, hk_module *m,
                                   const hk_exec_threads *threads, bool *changed) {
  free(pl->stats);
  pl->stats = calloc((size_t)(pl->n ? pl->n : 1), sizeof *pl->stats);
  pl->n_stats = 0;
  hk_status *st = NULL;
  for (int32_t i = 0; i < pl->n && !st; i++) {
    hk_pass *p = pl->passes[i];
    bool c = false;
    double t0 = now_seconds();
    st = p->vt->run(p, m, threads, &c);
    pl->stats[pl->n_stats++] = (hk_pass_stat){p->vt->name, now_seconds() - t0, c};
    if (st) {
      st = hk_status_prefix(st, "pass '%s'", p->vt->name);
      break;
    }
    *changed |= c;
    st = after_pass(pl, m, i, p->vt->name);
  }
  if (pl->ro.time_passes) report_times(pl);
  return st;
}

static hk_status *pipeline_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                               bool *changed) {
  hk_pipeline *pl = (hk_pipeline *)self;
  static const hk_exec_threads all_threads = {0, NULL};
  if (!threads) threads = &all_threads;
  *changed = false;
  if (!pl->instrumented) return run_plain(pl, m, threads, changed);
  return run_instrumented(pl, m, threads, changed);
}

/* ---- building from a spec ------------------------------------------------------- */

static hk_status *unknown_passes(const hk_registry *reg, const hk_pipeline_spec *spec) {
  hk_buf miss;
  hk_buf_init(&miss);
  int n = 0;
  for (int32_t i = 0; i < spec->n; i++)
    if (!hk_registry_find_pass(reg, spec->passes[i].name))
      hk_buf_printf(&miss, "%s'%s'", n++ ? ", " : "", spec->passes[i].name);
  if (!n) {
    hk_buf_free(&miss);
    return NULL;
  }
  hk_buf names;
  hk_buf_init(&names);
  for (int32_t i = 0; i < hk_registry_n_passes(reg); i++)
    hk_buf_printf(&names, "%s%s", i ? ", " : "", hk_registry_pass_at(reg, i)->desc->name);
  hk_buf_put(&names, "", 1);
  hk_status *st = hk_error(HK_NOT_FOUND, "unknown pass%s %s (no loaded plugin provides %s); "
                           "registered passes: %s", n == 1 ? "" : "es", miss.data,
                           n == 1 ? "it" : "them", names.len > 1 ? names.data : "none");
  hk_buf_free(&miss);
  hk_buf_free(&names);
  return st;
}

static hk_status *create_from_spec(hk_registry *reg, const hk_pass_spec *ps, hk_pass **out) {
  const hk_pass_desc *desc = hk_registry_find_pass(reg, ps->name);
  hk_option_values *vals;
  HK_TRY(hk_option_values_new(desc, ps->n_kvs, ps->kvs, &vals));
  hk_status *err = NULL;
  hk_pass *p = desc->create(vals, reg, &err);
  hk_option_values_free(vals);
  if (!p && !err) err = hk_error(HK_INTERNAL, "create returned no pass and no error");
  if (err) return hk_status_prefix(err, "pass '%s'", ps->name);
  *out = p;
  return NULL;
}

hk_status *hk_pipeline_build(hk_registry *reg, const hk_pipeline_spec *spec,
                             const char *name, hk_pass **out) {
  for (int32_t i = 0; i < spec->n_presets; i++)
    HK_TRY(hk_pipeline_preset_check(reg, spec->presets[i]));
  HK_TRY(unknown_passes(reg, spec));
  hk_pass *pl = hk_pipeline_new(name);
  for (int32_t i = 0; i < spec->n; i++) {
    hk_pass *p;
    hk_status *st = create_from_spec(reg, &spec->passes[i], &p);
    if (st) {
      hk_pass_destroy(pl);
      return st;
    }
    hk_pipeline_add(pl, p);
  }
  *out = pl;
  return NULL;
}

hk_pass *hk_registry_create_pass(hk_registry *reg, const char *name, const char *options,
                                 hk_status **err) {
  *err = NULL;
  if (!hk_registry_find_pass(reg, name)) {
    *err = hk_error(HK_NOT_FOUND, "unknown pass '%s'", name);
    return NULL;
  }
  hk_pass_spec ps = {(char *)name, 0, NULL};
  if (options && (*err = hk_option_kvs_parse(options, strlen(options), &ps.n_kvs, &ps.kvs)))
    return NULL;
  hk_pass *p = NULL;
  *err = create_from_spec(reg, &ps, &p);
  hk_option_kvs_free(ps.n_kvs, ps.kvs);
  return p;
}

/* ---- execution threads ------------------------------------------------------------ */

bool hk_exec_threads_include(const hk_exec_threads *t, const hk_computation *c) {
  if (!t || t->n == 0) return true;
  const char *thread = c->execution_thread ? c->execution_thread : "main";
  for (int32_t i = 0; i < t->n; i++)
    if (strcmp(t->names[i], thread) == 0) return true;
  return false;
}

hk_exec_threads hk_exec_threads_parse(const char *text) {
  hk_exec_threads t = {0, NULL};
  if (!text || !*text) return t;
  char **names = NULL;
  for (const char *p = text;;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len) {
      names = realloc(names, sizeof(char *) * (size_t)(t.n + 1));
      names[t.n] = strndup(p, len);
      t.n++;
    }
    if (!e) break;
    p = e + 1;
  }
  t.names = (const char *const *)names;
  return t;
}

void hk_exec_threads_free(hk_exec_threads *t) {
  for (int32_t i = 0; i < t->n; i++) free((char *)t->names[i]);
  free((void *)t->names);
  t->n = 0;
  t->names = NULL;
}
