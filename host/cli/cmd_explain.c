/* cmd_explain.c - `hlokit explain`: run a pipeline and print how one
 * instruction got its sharding: the chain of instructions and propagation
 * rules back to a user annotation, with direction and aggressiveness level
 * (from the sharding-propagation pass's explain extension). */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "hlokit/propagation.h"

static const char usage[] =
    "hlokit explain IN --passes=P1,P2{key=value},... | --pipeline=FILE.json --instr=NAME [--json]\n"
    "               [--num-partitions=N] [--num-replicas=R] [--load-pass-plugin=PATH]...\n"
    "  Runs the passes over IN and explains the sharding NAME ended with, as the last\n"
    "  pass exposing \"" HK_PROP_EXPLAIN_IFACE "\" recorded it.";

typedef struct explain_state {
  hk_pass *passes[256];
  int32_t n_passes;
  hk_pass *tracer;                       /* the last pass with the extension */
  const hk_prop_record *recs;
  const hk_prop_record **by_name;        /* sorted by instruction name */
  int64_t n;
} explain_state;

static hk_status *create_pass(hk_registry *reg, const hk_pass_spec *ps, hk_pass **out) {
  const hk_pass_desc *desc = hk_registry_find_pass(reg, ps->name);
  if (!desc) return hk_error(HK_NOT_FOUND, "unknown pass '%s' (no loaded plugin provides it)", ps->name);
  hk_option_values *vals;
  HK_TRY(hk_option_values_new(desc, ps->n_kvs, ps->kvs, &vals));
  hk_status *err = NULL;
  *out = desc->create(vals, reg, &err);
  hk_option_values_free(vals);
  if (!*out && !err) err = hk_error(HK_INTERNAL, "create returned no pass and no error");
  return err ? hk_status_prefix(err, "pass '%s'", ps->name) : NULL;
}

/* Runs the spec's passes one by one, keeping each so the tracer's records
 * stay available. */
static hk_status *run_passes(explain_state *es, hk_registry *reg, const hk_pipeline_spec *spec,
                             const hk_cli_common *c, hk_module *m) {
  hk_exec_threads threads = hk_exec_threads_parse(c->execution_threads);
  hk_status *st = NULL;
  for (int32_t k = 0; k < spec->n && !st; k++) {
    if (es->n_passes == (int32_t)(sizeof es->passes / sizeof es->passes[0])) {
      st = hk_error(HK_INVALID_ARGUMENT, "explain runs at most 256 passes");
      break;
    }
    hk_pass *p = NULL;
    st = create_pass(reg, &spec->passes[k], &p);
    if (st) break;
    es->passes[es->n_passes++] = p;
    bool changed = false;
    st = hk_pass_run(p, m, &threads, &changed);
    if (st) st = hk_status_prefix(st, "pass '%s'", hk_pass_name(p));
    else if (hk_pass_extension(p, HK_PROP_EXPLAIN_IFACE)) es->tracer = p;
  }
  hk_exec_threads_free(&threads);
  return st;
}

static int cmp_by_name(const void *a, const void *b) {
  const hk_prop_record *x = *(const hk_prop_record *const *)a, *y = *(const hk_prop_record *const *)b;
  return strcmp(x->instr, y->instr);
}

static void index_records(explain_state *es) {
  const hk_prop_explain_vtable *x = hk_pass_extension(es->tracer, HK_PROP_EXPLAIN_IFACE);
  es->n = x->records(es->tracer, &es->recs);
  es->by_name = malloc(sizeof *es->by_name * (size_t)(es->n ? es->n : 1));
  if (!es->by_name) hk_out_of_memory();
  for (int64_t k = 0; k < es->n; k++) es->by_name[k] = &es->recs[k];
  qsort(es->by_name, (size_t)es->n, sizeof *es->by_name, cmp_by_name);
}

static const hk_prop_record *lookup(const explain_state *es, const char *name) {
  hk_prop_record key;
  memset(&key, 0, sizeof key);
  key.instr = name;
  const hk_prop_record *kp = &key;
  const hk_prop_record *const *r =
      bsearch(&kp, es->by_name, (size_t)es->n, sizeof *es->by_name, cmp_by_name);
  return r ? *r : NULL;
}

static void put_json_string(hk_buf *b, const char *s) {
  if (!s) {
    hk_buf_puts(b, "null");
    return;
  }
  hk_buf_puts(b, "\"");
  for (const char *p = s; *p; p++) {
    if (*p == '"' || *p == '\\') hk_buf_printf(b, "\\%c", *p);
    else if ((unsigned char)*p < 0x20) hk_buf_printf(b, "\\u%04x", *p);
    else hk_buf_put(b, p, 1);
  }
  hk_buf_puts(b, "\"");
}

static void put_step_text(hk_buf *b, const hk_prop_record *r, int depth) {
  char *s = r->sharding ? hk_sharding_to_string(r->sharding) : NULL;
  hk_buf_printf(b, "%*s%s (%s): %s\n", depth * 2, "", r->instr, r->computation, s ? s : "no sharding");
  if (r->dir == HK_PROP_DIR_PROVIDED)
    hk_buf_printf(b, "%*s  annotated in the input\n", depth * 2, "");
  else if (r->dir != HK_PROP_DIR_NONE && r->level >= 0)
    hk_buf_printf(b, "%*s  <- %s, rule %s, level %d, from %s\n", depth * 2, "",
                  hk_prop_dir_name(r->dir), r->rule ? r->rule : "?", r->level,
                  r->source ? r->source : "(none)");
  else if (r->dir != HK_PROP_DIR_NONE)
    hk_buf_printf(b, "%*s  <- %s, rule %s, from %s\n", depth * 2, "", hk_prop_dir_name(r->dir),
                  r->rule ? r->rule : "?", r->source ? r->source : "(none)");
  free(s);
}

static void put_step_json(hk_buf *b, const hk_prop_record *r) {
  char *s = r->sharding ? hk_sharding_to_string(r->sharding) : NULL;
  hk_buf_puts(b, "{\"instruction\": ");
  put_json_string(b, r->instr);
  hk_buf_puts(b, ", \"computation\": ");
  put_json_string(b, r->computation);
  hk_buf_puts(b, ", \"sharding\": ");
  put_json_string(b, s);
  hk_buf_printf(b, ", \"direction\": \"%s\", \"rule\": ", hk_prop_dir_name(r->dir));
  put_json_string(b, r->dir == HK_PROP_DIR_NONE ? NULL : r->rule);
  hk_buf_printf(b, ", \"level\": %d, \"source\": ", r->level);
  put_json_string(b, r->dir == HK_PROP_DIR_NONE ? NULL : r->source);
  hk_buf_puts(b, "}");
  free(s);
}

/* The chain from NAME back along the recorded sources (cycles cut). */
static void explain_chain(const explain_state *es, const char *name, bool json, hk_buf *out) {
  const hk_prop_record *r = lookup(es, name);
  if (json) hk_buf_puts(out, "{\"instruction\": "), put_json_string(out, name),
      hk_buf_puts(out, ", \"chain\": [");
  for (int depth = 0; r && depth < 10000; depth++) {
    if (json) {
      if (depth) hk_buf_puts(out, ", ");
      put_step_json(out, r);
    } else {
      put_step_text(out, r, depth);
    }
    if (r->dir == HK_PROP_DIR_NONE || r->dir == HK_PROP_DIR_PROVIDED || !r->source) break;
    const hk_prop_record *next = lookup(es, r->source);
    if (next == r) break;
    r = next;
  }
  if (json) hk_buf_puts(out, "]}\n");
}

static hk_status *run_explain(const hk_cli_common *c, const char *in, const char *instr) {
  hk_registry *reg;
  HK_TRY(hk_cli_load_plugins(c, &reg));
  hk_module *m = NULL;
  explain_state es;
  memset(&es, 0, sizeof es);
  hk_pipeline_spec spec;
  memset(&spec, 0, sizeof spec);
  bool have_spec = false;
  hk_buf out;
  hk_buf_init(&out);
  hk_status *st = hk_cli_read_module(c, in, &m);
  if (!st && !c->no_verify) st = hk_cli_verify(m, "input module fails verification");
  if (!st) hk_cli_apply_config(c, m);
  if (!st && c->pipeline_file) st = hk_pipeline_spec_from_file(c->pipeline_file, &m->config, &spec);
  else if (!st) st = hk_pipeline_spec_parse(c->passes ? c->passes : "", &m->config, &spec);
  have_spec = !st;
  if (!st) st = run_passes(&es, reg, &spec, c, m);
  if (!st && !es.tracer)
    st = hk_error(HK_INVALID_ARGUMENT, "no pass in the pipeline records provenance (%s); "
                  "add sharding-propagation", HK_PROP_EXPLAIN_IFACE);
  if (!st) {
    index_records(&es);
    if (!lookup(&es, instr))
      st = hk_error(HK_NOT_FOUND, "no instruction '%s' in the computations propagation ran over", instr);
  }
  if (!st) {
    explain_chain(&es, instr, c->json, &out);
    st = hk_cli_write_output(c->output, out.data ? out.data : "", out.len);
  }
  hk_buf_free(&out);
  free(es.by_name);
  for (int32_t k = 0; k < es.n_passes; k++) hk_pass_destroy(es.passes[k]);
  if (have_spec) hk_pipeline_spec_free(&spec);
  hk_module_free(m);
  hk_registry_free(reg);
  return st;
}

/* --instr=NAME, the one option of explain's own. */
static int parse_instr_option(void *ctx, const char *arg) {
  if (strncmp(arg, "--instr=", 8) != 0) return 0;
  *(const char **)ctx = arg + 8;
  return 1;
}

int hk_cmd_explain(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  const char *in = NULL, *instr = NULL;
  bool help = false;
  int rc = hk_cli_parse_args("explain", usage, argc, argv, &c, parse_instr_option, &instr, &in,
                             &help);
  if (help) {
    hk_cli_common_free(&c);
    return HK_EXIT_OK;
  }
  if (rc == HK_EXIT_OK && (!instr || !*instr))
    rc = hk_cli_usage_error("explain", usage, "--instr=NAME is required");
  if (rc == HK_EXIT_OK && c.passes && c.pipeline_file)
    rc = hk_cli_usage_error("explain", usage, "give --passes or --pipeline, not both");
  if (rc == HK_EXIT_OK) {
    hk_status *st = run_explain(&c, in, instr);
    if (st) rc = hk_cli_fail("explain", st);
  }
  hk_cli_common_free(&c);
  return rc;
}
