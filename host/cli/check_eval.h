/* check_eval.h - what `hlokit check` and `hlokit ab` share: evaluate a
 * global module and its partitioned program on the same inputs, compare,
 * and summarise collectives and memory per device. */
#ifndef HLOKIT_CLI_CHECK_EVAL_H
#define HLOKIT_CLI_CHECK_EVAL_H

#include "hlokit/hlokit.h"

typedef struct hk_check_opts {
  uint64_t seed;
  double atol, rtol;               /* negative: the type's default */
} hk_check_opts;

/* Parses a non-negative number (the whole of s): 1, or -1 when bad. */
int hk_check_parse_nonneg(const char *s, double *out);
/* --seed=, --atol=, --rtol= into o: 1 consumed, 0 not one of them, -1 bad value. */
int hk_check_parse_option(hk_check_opts *o, const char *arg);

typedef struct hk_check_report {
  hk_compare_result cmp;
  char *disagree;                  /* devices holding one element disagree */
  char *root_shape;                /* partitioned root shape (malloc'ed) */
  hk_eval_stats global_stats;
  hk_eval_stats *dev_stats;        /* n_devices entries */
  int64_t n_devices;
  int64_t instrs_before, instrs_after;
} hk_check_report;

/* Instructions in every computation of m. */
int64_t hk_check_count_instrs(const hk_module *m);
/* True when m has manual regions (SPMDFullToShardShape/SPMDShardToFullShape
 * or a manual / manual-subgroup sharding) or is already a program per
 * partition (a collective with a channel): hk_check_evaluate then runs
 * the global module on the same devices too and compares device by
 * device (device d's partitioned result against its tile of device d's
 * global result). */
bool hk_check_has_manual_regions(const hk_module *m);

/* An error when a collective inside a partially manual region pairs
 * devices holding different tiles (the global program is not defined). */
hk_status *hk_check_manual_collectives(const hk_module *m);
/* Manual regions, one device: device's partitioned result against its
 * tile (under the output sharding) of device's global result. */
void hk_check_compare_device(const hk_module *g, const hk_module *p, const hk_value *global_result,
                             const hk_value *result, int64_t device, int64_t parts, const hk_check_opts *o,
                             hk_compare_result *out);

/* Runs g on one device and p on parts x reps devices with the same
 * (seeded) inputs scattered by p's recorded parameter shardings, gathers
 * the outputs by the recorded output sharding and compares them into rep
 * (which the caller zeroed; free it with hk_check_report_free). */
hk_status *hk_check_evaluate(const hk_module *g, const hk_module *p, const hk_check_opts *o,
                             int64_t parts, int64_t reps, hk_check_report *rep);
void hk_check_report_free(hk_check_report *rep);
bool hk_check_report_equal(const hk_check_report *rep);

/* The largest value over the devices of one figure. */
typedef enum hk_check_figure {
  HK_CHECK_COLLECTIVE_COUNT,       /* of collective kind `kind` */
  HK_CHECK_COLLECTIVE_BYTES,       /* of collective kind `kind` */
  HK_CHECK_BYTES_MOVED,            /* all kinds */
  HK_CHECK_PEAK_LIVE_BYTES,
} hk_check_figure;
int64_t hk_check_max_over(const hk_check_report *rep, hk_check_figure what, int kind);

/* JSON pieces: a number ("nan", "inf", "-inf" as strings) and a string. */
void hk_check_put_json_number(hk_buf *b, double x);
void hk_check_put_json_string(hk_buf *b, const char *s);

#endif
