/* pass_counters.c - collecting and summing the counters passes report. */
#include <stdlib.h>
#include <string.h>

#include "check_eval.h"
#include "pass_counters.h"

static void add_counter(void *ctx, const char *name, int64_t value) {
  hk_counter_list *l = ctx;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 8;
    l->names = realloc(l->names, sizeof *l->names * (size_t)l->cap);
    l->values = realloc(l->values, sizeof *l->values * (size_t)l->cap);
    if (!l->names || !l->values) hk_out_of_memory();
  }
  l->names[l->n] = strdup(name);
  if (!l->names[l->n]) hk_out_of_memory();
  l->values[l->n++] = value;
}

void hk_counter_list_collect(hk_pass *pipeline, hk_counter_list *out) {
  hk_pass_report_counters(pipeline, add_counter, out);
}

int64_t hk_counter_list_sum(const hk_counter_list *l, const char *counter) {
  int64_t sum = -1;
  size_t n = strlen(counter);
  for (int32_t i = 0; i < l->n; i++) {
    const char *dot = strrchr(l->names[i], '.');
    const char *leaf = dot ? dot + 1 : l->names[i];
    if (strlen(leaf) == n && !memcmp(leaf, counter, n)) sum = (sum < 0 ? 0 : sum) + l->values[i];
  }
  return sum;
}

void hk_counter_list_json(const hk_counter_list *l, hk_buf *b) {
  hk_buf_puts(b, "{");
  for (int32_t i = 0; i < l->n; i++) {
    if (i) hk_buf_puts(b, ", ");
    hk_check_put_json_string(b, l->names[i]);
    hk_buf_printf(b, ": %lld", (long long)l->values[i]);
  }
  hk_buf_puts(b, "}");
}

void hk_counter_list_free(hk_counter_list *l) {
  for (int32_t i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  free(l->values);
  memset(l, 0, sizeof *l);
}
