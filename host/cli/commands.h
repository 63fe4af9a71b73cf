/* commands.h - the hlokit subcommands and the helpers they share.
 *
 * Adding a command is adding one file (host/cli/cmd_NAME.c defining
 * `int hk_cmd_NAME(int argc, char **argv)`, argv[0] being the command name)
 * and one line to HK_COMMAND_LIST below.  Exit status: 0 success,
 * 1 "differs" (check, ab), 2 any error. */
#ifndef HLOKIT_CLI_COMMANDS_H
#define HLOKIT_CLI_COMMANDS_H

#include "hlokit/hlokit.h"
#include "pipeline/pipeline.h"

/* X(name, function, one-line summary) */
#define HK_COMMAND_LIST(X)                                                       \
  X("opt", hk_cmd_opt, "run a pass pipeline over a module and print the result") \
  X("passes", hk_cmd_passes, "list registered passes with their plugin and options") \
  X("run", hk_cmd_run, "evaluate a module on one or several simulated devices")        \
  X("check", hk_cmd_check, "compare a global module with its partitioned program") \
  X("ab", hk_cmd_ab, "compare two pipelines on one module: numerics, collectives, memory, time")         \
  X("explain", hk_cmd_explain, "show how an instruction got its sharding (propagation provenance)")

#define HK_X_(name, fn, summary) int fn(int argc, char **argv);
HK_COMMAND_LIST(HK_X_)
#undef HK_X_

enum { HK_EXIT_OK = 0, HK_EXIT_DIFFERS = 1, HK_EXIT_ERROR = 2 };

/* ---- options every command understands ------------------------------------- */
typedef struct hk_cli_common {
  /* plugins: --load-pass-plugin=PATH, --plugin-dir=DIR (repeatable),
   * --no-default-plugins */
  int32_t n_plugin_files, n_plugin_dirs;
  const char **plugin_files, **plugin_dirs;
  bool no_default_plugins;
  /* module config: --num-partitions=N, --num-replicas=R (-1 = keep) */
  int64_t num_partitions, num_replicas;
  /* pipeline: --passes=..., --pipeline=FILE, --time-passes, --verify-each,
   * --dump-after=PASS|all, --dump-dir=DIR, --execution-threads=a,b */
  const char *passes, *pipeline_file;
  bool time_passes, verify_each;
  const char *dump_after, *dump_dir, *execution_threads;
  /* input/output: --no-verify, -o OUT, --print-form=short|long,
   * --format=hlo|json, --json */
  bool no_verify, json;
  const char *output;
  hk_print_form print_form;
  bool format_json;
} hk_cli_common;

void hk_cli_common_init(hk_cli_common *c);
void hk_cli_common_free(hk_cli_common *c);
/* Consumes argv[*i] (and its value) if it is a common option: returns 1
 * when consumed, 0 when not a common option, -1 after printing an error. */
int hk_cli_parse_common(hk_cli_common *c, int argc, char **argv, int *i);
/* True if argv[i] looks like an option (starts with '-' and is not "-"). */
bool hk_cli_is_option(const char *arg);

/* A command's own options: 1 when it took arg, 0 when arg is not one of
 * its options, -1 for a bad value. */
typedef int (*hk_cli_own_option_fn)(void *ctx, const char *arg);

/* The argument loop every command shares: --help/-h (prints the usage and
 * sets *help), the command's own options (own may be NULL), the common
 * options, and exactly one input module.  Returns HK_EXIT_OK to go on, or
 * HK_EXIT_ERROR after printing what is wrong. */
int hk_cli_parse_args(const char *cmd, const char *usage, int argc, char **argv,
                      hk_cli_common *c, hk_cli_own_option_fn own, void *ctx,
                      const char **in, bool *help);

/* Prints "hlokit CMD: error: MESSAGE" to stderr, frees st, returns 2. */
int hk_cli_fail(const char *cmd, hk_status *st);
/* Prints a usage error and returns 2. */
int hk_cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Registry with the plugins the options name (and the default ones). */
hk_status *hk_cli_load_plugins(const hk_cli_common *c, hk_registry **out);
/* Reads IN ("-" = stdin): JSON when its first non-space byte is '{', else
 * HLO text.  Parse errors are FILE:LINE:COL. */
hk_status *hk_cli_read_module(const hk_cli_common *c, const char *path, hk_module **out);
/* Runs sdy-round-trip-import on a module with xla.sdy.meshes, saying so on
 * stderr (sdy_auto_import.c). */
hk_status *hk_cli_sdy_auto_import(const hk_cli_common *c, hk_module *m, const char *name);
/* Applies --num-partitions / --num-replicas to the module config
 * (num_partitions > 1 turns use_spmd_partitioning on). */
void hk_cli_apply_config(const hk_cli_common *c, hk_module *m);
/* The pipeline named by --passes / --pipeline with the instrumentation
 * options set; an empty pipeline when neither is given. */
hk_status *hk_cli_build_pipeline(const hk_cli_common *c, hk_registry *reg,
                                 const hk_module *m, hk_pass **out);
/* Runs a pipeline scoped to --execution-threads. */
hk_status *hk_cli_run_pipeline(const hk_cli_common *c, hk_pass *pipeline,
                               hk_module *m, bool *changed);
/* Writes data to path: "-" or NULL is stdout; pipes and devices are written
 * directly; a regular file is replaced atomically (temp file + rename), so a
 * failure never leaves it truncated. */
hk_status *hk_cli_write_output(const char *path, const char *data, size_t len);
/* The same in pieces: open, write (any number of times), close.  close
 * with st NULL makes the output (renames the temporary file over the
 * target); with an error it drops it and returns st. */
typedef struct hk_cli_output {
  int fd;
  char *name;    /* for messages; the target of the rename */
  char *tmp;     /* the temporary file beside it, or NULL */
} hk_cli_output;
hk_status *hk_cli_output_open(const char *path, hk_cli_output *o);
hk_status *hk_cli_output_write(hk_cli_output *o, const char *data, size_t len);
hk_status *hk_cli_output_close(hk_cli_output *o, hk_status *st);
/* The module per --format / --print-form, to --output (-o): HLO text is
 * written as it is printed (hk_print_module_stream), never held whole. */
hk_status *hk_cli_write_module(const hk_cli_common *c, const hk_module *m);
/* The module printed per --format / --print-form. */
void hk_cli_format_module(const hk_cli_common *c, const hk_module *m, hk_buf *out);
/* hk_verify_module with the default options; the error says `when`. */
hk_status *hk_cli_verify(const hk_module *m, const char *when);

#endif
