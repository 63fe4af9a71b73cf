/* count_ops.c - an example third-party plugin: the `count-ops` pass reports
 * how many instructions of each opcode a module has (to stderr), and never
 * changes the module.  Built against abi/ alone; see ../../README.md
 * "Writing a plugin". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"

/* The pass object: hk_pass first, then the options it was created with. */
typedef struct count_ops_pass {
  hk_pass base;
  bool per_computation;
  int64_t min_count;
} count_ops_pass;

static void count_computation(const hk_computation *c, int64_t *counts) {
  for (const hk_instr *i = c->first; i; i = i->next) counts[i->opcode]++;
}

static void report(const char *title, const int64_t *counts, int64_t min_count) {
  int64_t total = 0;
  for (int op = 0; op < HK_OPCODE_COUNT; op++) total += counts[op];
  fprintf(stderr, "count-ops: %s: %lld instructions\n", title, (long long)total);
  for (int op = 0; op < HK_OPCODE_COUNT; op++)
    if (counts[op] > 0 && counts[op] >= min_count)
      fprintf(stderr, "  %-28s %lld\n", hk_opcode_name((hk_opcode)op), (long long)counts[op]);
}

static hk_status *count_ops_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                                bool *changed) {
  const count_ops_pass *p = (const count_ops_pass *)self;
  int64_t total[HK_OPCODE_COUNT] = {0};
  for (int32_t k = 0; k < m->n_computations; k++) {
    const hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    int64_t counts[HK_OPCODE_COUNT] = {0};
    count_computation(c, counts);
    for (int op = 0; op < HK_OPCODE_COUNT; op++) total[op] += counts[op];
    if (p->per_computation) report(c->name, counts, p->min_count);
  }
  report(m->name, total, p->min_count);
  *changed = false;
  return NULL;
}

static const hk_pass_vtable count_ops_vtable = {
    .size = sizeof(hk_pass_vtable),
    .name = "count-ops",
    .run = count_ops_run,
    .destroy = hk_pass_free,
};

static hk_pass *count_ops_create(const hk_option_values *opts, hk_registry *reg,
                                 hk_status **err) {
  (void)reg;
  int64_t min_count = hk_opt_int(opts, "min_count");
  if (min_count < 0) {
    *err = hk_error(HK_INVALID_ARGUMENT, "min_count must be >= 0, got %lld",
                    (long long)min_count);
    return NULL;
  }
  count_ops_pass *p = (count_ops_pass *)hk_pass_alloc(&count_ops_vtable, sizeof *p, err);
  if (!p) return NULL;
  p->per_computation = hk_opt_bool(opts, "per_computation");
  p->min_count = min_count;
  return &p->base;
}

static const hk_option_decl count_ops_options[] = {
    {"per_computation", HK_OPT_BOOL, "false", "also report each computation", NULL},
    {"min_count", HK_OPT_INT, "1", "only list opcodes seen at least this often", NULL},
};

static const hk_pass_desc count_ops_desc = {
    .size = sizeof(hk_pass_desc),
    .name = "count-ops",
    .summary = "report instruction counts per opcode to stderr (example plugin)",
    .options = count_ops_options,
    .n_options = 2,
    .create = count_ops_create,
};

static hk_status *register_count_ops(hk_registry *reg) {
  return hk_registry_add_pass(reg, &count_ops_desc);
}

HK_PLUGIN("count-ops-example", "1.0", register_count_ops)
