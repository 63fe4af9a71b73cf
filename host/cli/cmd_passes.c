/* cmd_passes.c - `hlokit passes`: every registered pass with its plugin
 * file, one-line summary and options (type, default), as text or --json. */
#include <json-c/json.h>
#include <string.h>

#include "commands.h"

static const char usage[] =
    "hlokit passes [--json] [--load-pass-plugin=PATH]... [--plugin-dir=DIR]...\n"
    "              [--no-default-plugins]";

static const char *plugin_label(const hk_registry *reg, int32_t plugin) {
  return hk_registry_plugin(reg, plugin)->path;
}

static void print_option(const hk_option_decl *d, FILE *f) {
  fprintf(f, "      %s: %s", d->name, hk_option_type_name(d->type));
  if (d->type == HK_OPT_ENUM) {
    fputs(" {", f);
    for (int c = 0; d->choices[c]; c++) fprintf(f, "%s%s", c ? "|" : "", d->choices[c]);
    fputs("}", f);
  }
  fprintf(f, " = %s", hk_option_default_text(d));
  if (d->help && d->help[0]) fprintf(f, "  -- %s", d->help);
  fputc('\n', f);
}

static void print_text(const hk_registry *reg, FILE *f) {
  int32_t n = hk_registry_n_passes(reg);
  fprintf(f, "%d pass%s registered\n", (int)n, n == 1 ? "" : "es");
  for (int32_t i = 0; i < n; i++) {
    const hk_pass_entry *e = hk_registry_pass_at(reg, i);
    const hk_pass_desc *d = e->desc;
    fprintf(f, "  %s  [%s]\n", d->name, plugin_label(reg, e->plugin));
    if (d->summary) fprintf(f, "      %s\n", d->summary);
    if (d->n_options) fputs("    options:\n", f);
    for (int32_t k = 0; k < d->n_options; k++) print_option(&d->options[k], f);
  }
  int32_t ncc = hk_registry_n_custom_calls(reg);
  if (ncc) fprintf(f, "%d custom-call partitioner%s registered\n", (int)ncc, ncc == 1 ? "" : "s");
  for (int32_t i = 0; i < ncc; i++) {
    int32_t plugin;
    const char *target = hk_registry_custom_call_target(reg, i, &plugin);
    fprintf(f, "  %s  [%s]\n", target, plugin_label(reg, plugin));
  }
}

static json_object *option_json(const hk_option_decl *d) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "name", json_object_new_string(d->name));
  json_object_object_add(o, "type", json_object_new_string(hk_option_type_name(d->type)));
  json_object_object_add(o, "default", json_object_new_string(hk_option_default_text(d)));
  json_object_object_add(o, "help", json_object_new_string(d->help ? d->help : ""));
  if (d->type == HK_OPT_ENUM) {
    json_object *ch = json_object_new_array();
    for (int c = 0; d->choices[c]; c++)
      json_object_array_add(ch, json_object_new_string(d->choices[c]));
    json_object_object_add(o, "choices", ch);
  }
  return o;
}

static json_object *pass_json(const hk_registry *reg, const hk_pass_entry *e) {
  const hk_plugin_rec *p = hk_registry_plugin(reg, e->plugin);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "name", json_object_new_string(e->desc->name));
  json_object_object_add(o, "plugin", json_object_new_string(p->path));
  json_object_object_add(o, "plugin_name", json_object_new_string(p->name ? p->name : ""));
  json_object_object_add(o, "summary",
                         json_object_new_string(e->desc->summary ? e->desc->summary : ""));
  json_object *opts = json_object_new_array();
  for (int32_t k = 0; k < e->desc->n_options; k++)
    json_object_array_add(opts, option_json(&e->desc->options[k]));
  json_object_object_add(o, "options", opts);
  return o;
}

static void print_json(const hk_registry *reg, FILE *f) {
  json_object *root = json_object_new_object();
  json_object *passes = json_object_new_array();
  for (int32_t i = 0; i < hk_registry_n_passes(reg); i++)
    json_object_array_add(passes, pass_json(reg, hk_registry_pass_at(reg, i)));
  json_object_object_add(root, "passes", passes);
  json_object *ccs = json_object_new_array();
  for (int32_t i = 0; i < hk_registry_n_custom_calls(reg); i++) {
    int32_t plugin;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "target", json_object_new_string(
                                            hk_registry_custom_call_target(reg, i, &plugin)));
    json_object_object_add(o, "plugin", json_object_new_string(plugin_label(reg, plugin)));
    json_object_array_add(ccs, o);
  }
  json_object_object_add(root, "custom_call_partitioners", ccs);
  fprintf(f, "%s\n", json_object_to_json_string_ext(
                    root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                              JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(root);
}

int hk_cmd_passes(int argc, char **argv) {
  hk_cli_common c;
  hk_cli_common_init(&c);
  int rc = HK_EXIT_OK;
  for (int i = 1; i < argc && rc == HK_EXIT_OK; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: %s\n", usage);
      hk_cli_common_free(&c);
      return HK_EXIT_OK;
    }
    int r = hk_cli_parse_common(&c, argc, argv, &i);
    if (r < 0) rc = HK_EXIT_ERROR;
    else if (r == 0) rc = hk_cli_usage_error("passes", usage, "unexpected argument '%s'", argv[i]);
  }
  hk_registry *reg = NULL;
  hk_status *st = rc == HK_EXIT_OK ? hk_cli_load_plugins(&c, &reg) : NULL;
  if (st) rc = hk_cli_fail("passes", st);
  if (reg) {
    if (c.json) print_json(reg, stdout);
    else print_text(reg, stdout);
    hk_registry_free(reg);
  }
  hk_cli_common_free(&c);
  return rc;
}
