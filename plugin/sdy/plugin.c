/* plugin.c - the sdy plugin: XLA's Shardy round trip (sdy-round-trip-import,
 * sdy-round-trip-export). */
#include "sdy.h"

static hk_status *sdy_register(hk_registry *reg) {
  static const hk_pass_desc *const passes[] = {&sdy_import_desc, &sdy_export_desc};
  return hk_registry_add_passes(reg, passes, sizeof passes / sizeof passes[0]);
}

HK_PLUGIN("sdy", HK_VERSION_STRING, sdy_register)
