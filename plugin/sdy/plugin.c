/* plugin.c - the sdy plugin: XLA's Shardy round trip (sdy-round-trip-import,
 * sdy-round-trip-export). */
#include "sdy.h"

static hk_status *sdy_register(hk_registry *reg) {
  HK_TRY(hk_registry_add_pass(reg, &sdy_import_desc));
  HK_TRY(hk_registry_add_pass(reg, &sdy_export_desc));
  return NULL;
}

HK_PLUGIN("sdy", HK_VERSION_STRING, sdy_register)
