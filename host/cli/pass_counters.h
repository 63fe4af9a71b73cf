/* pass_counters.h - the counters a pipeline's passes report after a run
 * (interface "hlokit.counters"), collected for `check` and `ab` reports. */
#ifndef HLOKIT_CLI_PASS_COUNTERS_H
#define HLOKIT_CLI_PASS_COUNTERS_H

#include "hlokit/hlokit.h"

typedef struct hk_counter_list {
  int32_t n, cap;
  char **names;                    /* "pass.counter", malloc'ed */
  int64_t *values;
} hk_counter_list;

/* Appends every counter the pipeline's passes report, named
 * "pass.counter" by the pipeline. */
void hk_counter_list_collect(hk_pass *pipeline, hk_counter_list *out);
/* The sum of the counters named `counter` (any pass); -1 when none was
 * reported, so a report can tell "zero" from "not counted". */
int64_t hk_counter_list_sum(const hk_counter_list *l, const char *counter);
/* {"pass.counter": value, ...} */
void hk_counter_list_json(const hk_counter_list *l, hk_buf *b);
void hk_counter_list_free(hk_counter_list *l);

#endif
