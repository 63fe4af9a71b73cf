/* combiners.c - hilo-all-reduce-combiner and hilo-all-gather-combiner: the
 * two passes over the combining engine, each with the rule for which of its
 * collectives may share one instruction. */
#include <string.h>

#include "combine.h"

static bool same_common(const hk_instr *a, const hk_instr *b) {
  const hk_attrs *x = a->attrs, *y = b->attrs;
  bool xc = x && x->channel_id, yc = y && y->channel_id;
  if (xc != yc) return false;
  if ((x && x->use_global_device_ids) != (y && y->use_global_device_ids)) return false;
  if ((x && x->constrain_layout) || (y && y->constrain_layout)) return false;
  return hilo_same_replica_groups(x ? x->replica_groups : NULL, y ? y->replica_groups : NULL);
}

static bool same_all_reduce(const hk_instr *a, const hk_instr *b) {
  if (a->shape->elem != b->shape->elem) return false;
  if (a->n_called != 1 || b->n_called != 1) return false;
  return same_common(a, b) && hilo_same_reduction(a->called[0], b->called[0]);
}

static bool same_all_gather(const hk_instr *a, const hk_instr *b) {
  if (a->n_dims != 1 || b->n_dims != 1 || a->dims[0] != b->dims[0]) return false;
  return same_common(a, b);
}

static hk_status *run_combiner(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                               bool *changed, hk_opcode op, hilo_same_kind_fn same) {
  hilo_pass *p = (hilo_pass *)self;
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (hk_exec_threads_include(threads, c))
      *changed |= hilo_combine(c, op, same, p->num[0], p->num[1]);
  }
  return NULL;
}

static hk_status *ar_run(hk_pass *self, hk_module *m, const hk_exec_threads *t, bool *changed) {
  return run_combiner(self, m, t, changed, HK_OP_ALL_REDUCE, same_all_reduce);
}

static hk_status *ag_run(hk_pass *self, hk_module *m, const hk_exec_threads *t, bool *changed) {
  return run_combiner(self, m, t, changed, HK_OP_ALL_GATHER, same_all_gather);
}

static const hk_pass_vtable ar_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-all-reduce-combiner",
    .run = ar_run, .destroy = hk_pass_free};
static const hk_pass_vtable ag_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-all-gather-combiner",
    .run = ag_run, .destroy = hk_pass_free};

static hk_pass *combiner_create(const hk_pass_vtable *vt, const hk_option_values *opts,
                                hk_status **err) {
  int64_t bytes = hk_opt_int(opts, "combine_threshold_bytes");
  int64_t count = hk_opt_int(opts, "combine_threshold_count");
  if (bytes < 0 || count < 1) {
    *err = hk_error(HK_INVALID_ARGUMENT,
                    "%s: combine_threshold_bytes must be >= 0 and combine_threshold_count >= 1",
                    vt->name);
    return NULL;
  }
  hk_pass *p = hk_pass_alloc(vt, sizeof(hilo_pass), err);
  if (p) {
    ((hilo_pass *)p)->num[0] = bytes;
    ((hilo_pass *)p)->num[1] = count;
  }
  return p;
}

static hk_pass *ar_create(const hk_option_values *o, hk_registry *r, hk_status **err) {
  (void)r;
  return combiner_create(&ar_vtable, o, err);
}

static hk_pass *ag_create(const hk_option_values *o, hk_registry *r, hk_status **err) {
  (void)r;
  return combiner_create(&ag_vtable, o, err);
}

static const hk_option_decl combiner_options[] = {
    {"combine_threshold_bytes", HK_OPT_INT, "31457280",
     "largest combined collective, in bytes of its result", NULL},
    {"combine_threshold_count", HK_OPT_INT, "256", "most collectives merged into one", NULL},
};

const hk_pass_desc hilo_all_reduce_combiner_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-all-reduce-combiner",
    .summary = "merges independent all-reduces with the same groups and reduction",
    .options = combiner_options, .n_options = 2, .create = ar_create};

const hk_pass_desc hilo_all_gather_combiner_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-all-gather-combiner",
    .summary = "merges independent all-gathers with the same groups and dimension",
    .options = combiner_options, .n_options = 2, .create = ag_create};
