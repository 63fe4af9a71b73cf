/* plugin.c - the sdy plugin: XLA's Shardy round trip (sdy-round-trip-import,
 * sdy-round-trip-export). */
#include <stdlib.h>

#include "sdy.h"

/* Both passes have no state beyond their vtable. */
hk_pass *sdy_pass_new(const hk_pass_vtable *vt) {
  hk_pass *p = calloc(1, sizeof *p);
  if (!p) abort();
  p->vt = vt;
  return p;
}

void sdy_pass_destroy(hk_pass *self) { free(self); }

static hk_status *sdy_register(hk_registry *reg) {
  HK_TRY(hk_registry_add_pass(reg, &sdy_import_desc));
  HK_TRY(hk_registry_add_pass(reg, &sdy_export_desc));
  return NULL;
}

HK_PLUGIN("sdy", HK_VERSION_STRING, sdy_register)
