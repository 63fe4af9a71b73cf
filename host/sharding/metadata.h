/* metadata.h - OpMetadata text ({op_type="..." op_name="..." source_file="..." source_line=N ...}): parse and print. */
#ifndef HK_SHARDING_METADATA_H
#define HK_SHARDING_METADATA_H

#include "hlokit/ir.h"
#include "hlokit/text.h"

/* Parses `{field=value ...}` starting at text[0] == '{' (blanks, comments
 * and commas between fields allowed).  Known fields fill *out (strings
 * unescaped and interned in m; empty strings and source_line=0 are
 * absent, as XLA treats them); every other field is kept verbatim as
 * `name=value` in out->extra, joined by spaces, ordered as XLA prints
 * them (source_end_line, source_column, source_end_column, profile_type,
 * deduplicated_name, preserve_layout, scheduling_name, stack_frame_id,
 * then unknown fields in input order).  *consumed (may be NULL) gets the
 * bytes up to and including the closing '}'.  Errors: HK_INVALID_ARGUMENT
 * "@OFFSET: what" with OFFSET a byte offset into text. */
hk_status *hk_metadata_parse(hk_module *m, const char *text, size_t len,
                             hk_metadata *out, size_t *consumed);

/* Prints `{...}` as XLA's OpMetadataToString inside braces: op_type,
 * op_name, source_file (C-escaped like absl::CEscape), source_line, then
 * the extra fields; absent fields are skipped; `{}` when empty. */
void hk_metadata_print(const hk_metadata *md, hk_buf *out);
/* The fields only, without the braces (what XLA's OpMetadataToString returns). */
void hk_metadata_print_fields(const hk_metadata *md, hk_buf *out);
/* True when no field is set. */
bool hk_metadata_is_empty(const hk_metadata *md);

#endif
