/* json.h - the module as structured JSON (json-c), both directions.
 *
 * Lossless: hk_module_to_json() then hk_module_from_json() prints the same
 * HLO text.  The schema is documented in host/json/README.md. */
#ifndef HLOKIT_JSON_H
#define HLOKIT_JSON_H

#include "ir.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the module's JSON text to out (pretty when pretty is true). */
void hk_module_to_json(const hk_module *m, bool pretty, hk_buf *out);
/* Parses JSON text (filename for messages). */
hk_status *hk_module_from_json(const char *text, size_t len, const char *filename,
                               hk_module **out);

#ifdef __cplusplus
}
#endif
#endif
