/* check_sampled.h - `hlokit check --mode=sampled|auto`: choosing dense or
 * sampled checking, running the sampled comparison and reporting it. */
#ifndef HLOKIT_CLI_CHECK_SAMPLED_H
#define HLOKIT_CLI_CHECK_SAMPLED_H

#include "hlokit/hlokit.h"

/* True when dense evaluation is refused by size or would take too long:
 * a value above 2^24 elements, or dots and convolutions needing more than
 * 2e9 multiply-adds (the partitioned module's counted once per device). */
bool hk_check_dense_too_costly(const hk_module *g, const hk_module *p, int64_t n_devices);

/* Compares p on parts x reps devices with g at sampled positions and
 * prints the report (JSON when json; extra_json, if not NULL, is appended
 * inside the JSON object, e.g. ", \"counters\": {...}").  *equal gets the
 * verdict. */
/* The report of a comparison on positions (mode "sampled", or "mpi" for
 * check --backend=mpi) into b: JSON (extra_json spliced in before
 * num_devices) or text (extra_text appended). */
void hk_check_sampled_report(const hk_sample_result *r, const hk_module *g, const hk_module *p, int64_t n,
                             const char *mode, const char *extra_json, const char *extra_text, bool json,
                             hk_buf *b);
hk_status *hk_check_sampled(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                            const hk_sample_options *so, bool json, const char *extra_json,
                            bool *equal);

#endif
