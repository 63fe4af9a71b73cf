/* check_sampled.c - `hlokit check` on sampled positions: picks dense or
 * sampled checking (auto mode), runs hk_eval_compare_sampled and prints
 * its report, saying how many positions were compared. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"
#include "check_sampled.h"

bool hk_check_dense_too_costly(const hk_module *g, const hk_module *p, int64_t n_devices) {
  hk_eval_options limits = {0};
  hk_status *st = hk_eval_check_sizes(g, &limits);
  if (!st) st = hk_eval_check_sizes(p, &limits);
  if (st) {
    hk_status_free(st);
    return true;
  }
  hk_eval_cost cg = hk_eval_estimate_cost(g), cp = hk_eval_estimate_cost(p);
  const int64_t max_elements = (int64_t)1 << 24;
  /* Every simulated device holds its own values in this one process, so
   * the devices' largest values together count too (a replicated output
   * gathered on 256 devices is 256 copies). */
  const double max_all_devices = (double)((int64_t)1 << 27);
  return cg.macs > 2e9 || cp.macs * (double)n_devices > 2e9 || cg.largest_elements > max_elements ||
         cp.largest_elements > max_elements ||
         (double)cp.largest_elements * (double)n_devices > max_all_devices;
}

static void put_mismatch(const hk_sample_result *r, hk_buf *b) {
  if (!r->has_mismatch) {
    hk_buf_puts(b, "null");
    return;
  }
  hk_buf_printf(b, "{\"output\": %lld, \"index\": %lld, \"device\": %lld, \"expected\": ",
                (long long)r->mismatch_leaf, (long long)r->mismatch_index, (long long)r->mismatch_device);
  hk_check_put_json_number(b, r->expected);
  hk_buf_puts(b, ", \"actual\": ");
  hk_check_put_json_number(b, r->actual);
  hk_buf_puts(b, "}");
}

void hk_check_sampled_report(const hk_sample_result *r, const hk_module *g, const hk_module *p, int64_t n,
                             const char *mode, const char *extra_json, const char *extra_text, bool json,
                             hk_buf *b) {
  if (!json) {
    hk_buf_printf(b, "%s (%s %lld positions%s)\n", r->equal ? "equal" : "DIFFERENT",
                  strcmp(mode, "sampled") ? "compared" : "sampled", (long long)r->samples,
                  r->timed_out ? ", stopped by the time limit" : "");
    if (r->message) hk_buf_printf(b, "  %s\n", r->message);
    if (r->has_mismatch)
      hk_buf_printf(b, "  first mismatch: output %lld index %lld (device %lld): expected %.9g, got %.9g\n",
                    (long long)r->mismatch_leaf, (long long)r->mismatch_index, (long long)r->mismatch_device,
                    r->expected, r->actual);
    hk_buf_printf(b, "  max abs error %.3g, max rel error %.3g over the %s positions\n", r->max_abs_error,
                  r->max_rel_error, strcmp(mode, "sampled") ? "compared" : "sampled");
    char *shape = hk_shape_to_string(p->entry->root->shape);
    hk_buf_printf(b, "  partitioned root shape %s on %lld devices\n", shape ? shape : "?", (long long)n);
    free(shape);
    if (extra_text) hk_buf_puts(b, extra_text);
    return;
  }
  hk_buf_printf(b, "{\"equal\": %s, \"mode\": \"%s\", \"samples\": %lld, \"samples_planned\": %lld, "
                "\"timed_out\": %s, \"max_abs_error\": ", r->equal ? "true" : "false", mode, (long long)r->samples,
                (long long)r->samples_planned, r->timed_out ? "true" : "false");
  hk_check_put_json_number(b, r->max_abs_error);
  hk_buf_puts(b, ", \"max_rel_error\": ");
  hk_check_put_json_number(b, r->max_rel_error);
  hk_buf_puts(b, ", \"first_mismatch\": ");
  put_mismatch(r, b);
  hk_buf_puts(b, ", \"message\": ");
  if (r->message) hk_check_put_json_string(b, r->message);
  else hk_buf_puts(b, "null");
  char *shape = hk_shape_to_string(p->entry->root->shape);
  hk_buf_puts(b, ", \"partitioned_root_shape\": ");
  hk_check_put_json_string(b, shape ? shape : "");
  free(shape);
  if (extra_json) hk_buf_puts(b, extra_json);
  hk_buf_printf(b, ", \"num_devices\": %lld, \"instructions_before\": %lld, \"instructions_after\": %lld}\n",
                (long long)n, (long long)hk_check_count_instrs(g), (long long)hk_check_count_instrs(p));
}

hk_status *hk_check_sampled(const hk_module *g, const hk_module *p, int64_t parts, int64_t reps,
                            const hk_sample_options *so, bool json, const char *extra_json,
                            bool *equal) {
  hk_sample_result r;
  HK_TRY(hk_eval_compare_sampled(g, p, parts, reps, so, &r));
  hk_buf b;
  hk_buf_init(&b);
  hk_check_sampled_report(&r, g, p, parts * reps, "sampled", extra_json, NULL, json, &b);
  fwrite(b.data, 1, b.len, stdout);
  hk_buf_free(&b);
  *equal = r.equal;
  hk_sample_result_free(&r);
  return NULL;
}
