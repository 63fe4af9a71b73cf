/* check_dist.h - `hlokit check --backend=mpi`: each rank runs its devices
 * of the partitioned program on MPI and compares its output pieces with
 * the global program evaluated on demand inside them; rank 0 reports. */
#ifndef HLOKIT_CLI_CHECK_DIST_H
#define HLOKIT_CLI_CHECK_DIST_H

#include "backend_dist.h"
#include "check_eval.h"
#include "hlokit/hlokit.h"

/* so: seed, tolerances, positions per big piece (samples) and the time
 * budget of the global evaluation.  extra_json is spliced into the JSON
 * report (the passes' counters).  *equal is the verdict of every rank. */
hk_status *hk_check_distributed(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                bool json, const char *extra_json, bool *equal);

/* The same evaluation for `hlokit ab`: the combined verdict and the
 * per-device maxima into rep (which the caller zeroed), on every rank. */
hk_status *hk_check_distributed_report(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                                       const hk_cli_dist *dist, const hk_sample_options *so, double timeout_s,
                                       hk_check_report *rep);

#endif
