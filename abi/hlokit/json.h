/* json.h - the module as structured JSON (json-c), both directions.
 *
 * Lossless: hk_module_to_json() then hk_module_from_json() prints the same
 * HLO text (both print forms), and exporting again gives the same JSON.
 * The schema is documented in host/json/README.md: a document
 * {"name", "entry", "config", "computations": [{"name", "is_entry", "root",
 * "instructions": [{"name", "opcode", "shape", "operands", ...attributes
 * keyed by XLA's names}]}]}, shapes structured, shardings as XLA text,
 * literals as nested arrays. */
#ifndef HLOKIT_JSON_H
#define HLOKIT_JSON_H

#include "export.h"

#include "ir.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

/* Appends the module's JSON text to out: pretty (one key per line, small
 * objects and plain arrays on one line, trailing newline) or compact. */
void hk_module_to_json(const hk_module *m, bool pretty, hk_buf *out);
/* Parses and validates JSON text (filename, may be NULL, for messages) and
 * builds the module.  Errors are HK_INVALID_ARGUMENT naming the file and
 * the JSON path of the bad value ("f.json: computations[0].instructions[3]
 * .operands[1]: unknown instruction 'x' in computation 'main'"), or
 * "f.json:LINE:COL: error: invalid JSON: ..." for syntax errors; *out is
 * NULL on error. */
hk_status *hk_module_from_json(const char *text, size_t len, const char *filename,
                               hk_module **out);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
