/* sdy_auto_import.c - a module from a Shardy-based frontend (JAX) carries
 * its shardings as Shardy round-trip attributes; like XLA, which runs its
 * SdyRoundTripImportPipeline whenever a module has xla.sdy.meshes, the CLI
 * runs sdy-round-trip-import on such a module as it is read, and says so. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "pipeline/pipeline.h"

static bool has_sdy_meshes(const hk_module *m) {
  for (int32_t k = 0; k < m->config.n_frontend_attributes; k++)
    if (strcmp(m->config.frontend_attributes[k].key, "xla.sdy.meshes") == 0) return true;
  return false;
}

/* Does the command's pipeline give the Shardy form back?  Then the import
 * keeps the texts the export writes (otherwise it removes them, as XLA's). */
static bool pipeline_exports(const hk_cli_common *c) {
  static const char kExport[] = "sdy-round-trip-export";
  if (c->passes && strstr(c->passes, kExport)) return true;
  if (!c->pipeline_file) return false;
  hk_file_bytes f;
  hk_status *st = hk_file_bytes_open(c->pipeline_file, &f);
  if (st) {                        /* the pipeline reader reports it */
    hk_status_free(st);
    return false;
  }
  bool found = memmem(f.data, f.len, kExport, sizeof kExport - 1) != NULL;
  hk_file_bytes_close(&f);
  return found;
}

/* The pass comes from the command's own plugin sources (hk_cli_load_plugins),
 * so --load-pass-plugin / --plugin-dir / --no-default-plugins apply: a
 * user's replacement import is the one that runs. */
hk_status *hk_cli_sdy_auto_import(const hk_cli_common *c, hk_module *m, const char *name) {
  if (!has_sdy_meshes(m)) return NULL;
  hk_registry *reg = NULL;
  hk_status *st = hk_cli_load_plugins(c, &reg);
  hk_pass *pass = NULL;
  if (!st) pass = hk_registry_create_pass(reg, "sdy-round-trip-import",
                                          pipeline_exports(c) ? "keep=true" : NULL, &st);
  if (!st) {
    fprintf(stderr, "hlokit: %s has xla.sdy.meshes (Shardy round-trip attributes): "
                    "running sdy-round-trip-import\n", name);
    bool changed = false;
    hk_exec_threads all = {0, NULL};
    st = hk_pass_run(pass, m, &all, &changed);
  }
  hk_pass_destroy(pass);
  hk_registry_free(reg);
  return st ? hk_status_prefix(st, "%s: sdy-round-trip-import", name) : NULL;
}
