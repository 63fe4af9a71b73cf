/* host.h - the embedding ABI: what a program that drives hlokit (the
 * hlokit executable, the tools, a back-end) uses to make a registry, load
 * plugins, build a pipeline from a spec and run it instrumented.  Plugins
 * do not need it (hlokit.h does not include it).  Since ABI 1.4. */
#ifndef HLOKIT_HOST_H
#define HLOKIT_HOST_H

#include "export.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pass.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

/* ---- registry ---------------------------------------------------------- */
/* Where a plugin came from; decides the drop-in rule. */
typedef enum hk_plugin_origin {
  HK_ORIGIN_BUILTIN,       /* registered by host code, no file */
  HK_ORIGIN_DEFAULT_DIR,   /* plugins/ beside the binary */
  HK_ORIGIN_ENV_PATH,      /* $HLOKIT_PLUGIN_PATH */
  HK_ORIGIN_PLUGIN_DIR,    /* --plugin-dir=DIR */
  HK_ORIGIN_EXPLICIT,      /* --load-pass-plugin=PATH */
} hk_plugin_origin;

typedef struct hk_plugin_rec {
  char *path;              /* as given ("<builtin>" for host code) */
  char *real_path;         /* resolved, to skip loading a file twice */
  char *name, *version;
  void *handle;            /* dlopen handle, NULL for builtin */
  hk_plugin_origin origin;
} hk_plugin_rec;

typedef struct hk_pass_entry {
  const hk_pass_desc *desc;
  int32_t plugin;          /* index into hk_registry_plugins() */
} hk_pass_entry;
hk_registry *hk_registry_new(void);
void hk_registry_free(hk_registry *reg);  /* destroys partitioners, dlcloses */
int32_t hk_registry_n_plugins(const hk_registry *reg);
const hk_plugin_rec *hk_registry_plugin(const hk_registry *reg, int32_t i);
/* Passes in registration order. */
int32_t hk_registry_n_passes(const hk_registry *reg);
const hk_pass_entry *hk_registry_pass_at(const hk_registry *reg, int32_t i);
const hk_pass_entry *hk_registry_pass_entry(const hk_registry *reg, const char *name);
int32_t hk_registry_n_custom_calls(const hk_registry *reg);
const char *hk_registry_custom_call_target(const hk_registry *reg, int32_t i,
                                           int32_t *plugin);
/* Where drop-in notices go (stderr by default; tests capture them). */
void hk_registry_set_notice_stream(hk_registry *reg, FILE *f);

/* ---- plugin loader -------------------------------------------------------- */
/* Loads one plugin file: dlopen(RTLD_NOW|RTLD_LOCAL), ABI check, register.
 * Every error names the file. */
hk_status *hk_plugin_load(hk_registry *reg, const char *path,
                          hk_plugin_origin origin);
/* Loads every *.so in dir, in name order.  A missing dir is an error unless
 * missing_ok. */
hk_status *hk_plugin_load_dir(hk_registry *reg, const char *dir,
                              hk_plugin_origin origin, bool missing_ok);
typedef struct hk_plugin_sources {
  int32_t n_dirs;              /* --plugin-dir, in order */
  const char *const *dirs;
  int32_t n_files;             /* --load-pass-plugin, in order */
  const char *const *files;
  bool no_default;             /* skip the default dirs and the env path */
} hk_plugin_sources;

/* Loads the default dirs, $HLOKIT_PLUGIN_PATH, then src's dirs and files. */
hk_status *hk_plugin_load_all(hk_registry *reg, const hk_plugin_sources *src);

/* ---- option values -------------------------------------------------------- */
/* One `key=value` as written: a scalar, or a [list]. */
typedef struct hk_option_kv {
  char *key;
  char *value;             /* scalar text (NULL for a list) */
  bool is_list;
  int32_t n_elems;
  char **elems;
} hk_option_kv;
/* Values for desc's options from kvs (unknown key, ill-typed value: errors
 * naming the pass, the option and the accepted options). */
hk_status *hk_option_values_new(const hk_pass_desc *desc, int32_t n_kvs,
                                const hk_option_kv *kvs, hk_option_values **out);
void hk_option_values_free(hk_option_values *v);
/* The text of an option's default as `hlokit passes` shows it. */
const char *hk_option_default_text(const hk_option_decl *d);

/* ---- pipeline specs -------------------------------------------------------- */
typedef struct hk_pass_spec {
  char *name;
  int32_t n_kvs;
  hk_option_kv *kvs;
} hk_pass_spec;

typedef struct hk_pipeline_spec {
  int32_t n, cap;
  hk_pass_spec *passes;
  int32_t n_presets;       /* presets expanded into it (checked whole) */
  char **presets;
} hk_pipeline_spec;

void hk_pipeline_spec_free(hk_pipeline_spec *s);
/* "a,b{k=v k2=[true,false]},c" or "@preset" (the preset needs the module
 * config for its gated blocks; pass NULL to include every block). */
hk_status *hk_pipeline_spec_parse(const char *text, const hk_module_config *cfg,
                                  hk_pipeline_spec *out);
/* A JSON array of {"pass": NAME, "options": {...}} (text of a file). */
hk_status *hk_pipeline_spec_from_json(const char *text, size_t len,
                                      const char *filename,
                                      const hk_module_config *cfg,
                                      hk_pipeline_spec *out);
hk_status *hk_pipeline_spec_from_file(const char *path, const hk_module_config *cfg,
                                      hk_pipeline_spec *out);
/* Creates the pipeline pass from a spec: first checks every preset it
 * used and every pass name (listing all that are missing), then creates
 * the passes; errors name the pass. */
hk_status *hk_pipeline_build(hk_registry *reg, const hk_pipeline_spec *spec,
                             const char *name, hk_pass **out);

/* ---- instrumented run ------------------------------------------------------- */
typedef struct hk_pipeline_run_options {
  bool time_passes;        /* per-pass wall time and changed, to report */
  bool verify_each;        /* hk_verify_module after every pass */
  const char *dump_after;  /* NULL, "all", or a comma list of pass names */
  const char *dump_dir;    /* where dumps go (required with dump_after) */
  hk_print_form dump_form;
  FILE *report;            /* where --time-passes goes (stderr if NULL) */
} hk_pipeline_run_options;

/* Per-pass record of the last run (for --time-passes and reports). */
typedef struct hk_pass_stat {
  const char *name;
  double seconds;
  bool changed;
} hk_pass_stat;

/* Sets instrumentation on a pipeline made by hk_pipeline_new (copied;
 * strings must outlive the pipeline).  NULL turns it off. */
void hk_pipeline_set_run_options(hk_pass *pipeline, const hk_pipeline_run_options *ro);
/* The stats of the last run (one per pass), NULL if not timed. */
const hk_pass_stat *hk_pipeline_stats(const hk_pass *pipeline, int32_t *n);
bool hk_is_pipeline(const hk_pass *p);

/* Splits "a,b" into an exec-threads set (malloc'ed; free with _free). */
hk_exec_threads hk_exec_threads_parse(const char *text);
void hk_exec_threads_free(hk_exec_threads *t);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
