/* spmd.c - runs one module on num_replicas x num_partitions simulated
 * devices at once, one thread per device (hk_worker_threads of them
 * computing at a time: cpu_slots.c). */
#include <pthread.h>
#include <stdio.h>

#include "eval/eval_internal.h"

hk_status *hk_eval_check_args(const hk_module *m, hk_value *const *args, int n_args);

typedef struct device_run {
  const hk_module *m;
  hk_device_ctx ctx;
  hk_value *const *args;
  int n_args;
  hk_value *result;
  hk_status *st;
  hk_cpu_slots *slots;
  pthread_t thread;
} device_run;

static void *device_main(void *p) {
  device_run *r = p;
  hk_device_ctx *d = &r->ctx;
  for (int i = 0; i < r->n_args; i++) d->mem.live += hk_value_byte_size(r->args[i]);
  d->mem.peak = d->mem.live;
  hk_eval_set_mem_counter(&d->mem);
  hk_cpu_slot_enter(r->slots);
  r->st = hk_eval_computation(d, r->m->entry, r->args, r->n_args, &r->result);
  hk_cpu_slot_leave();
  hk_eval_set_mem_counter(NULL);
  hk_eval_release_thread_cache();
  d->stats.peak_live_bytes = d->mem.peak;
  if (r->st) {
    char why[300];
    snprintf(why, sizeof why, "device %lld failed: %.260s",
             (long long)(d->replica * d->num_partitions + d->partition), r->st->message);
    d->backend->vt->abort(d->backend, why);
  }
  return NULL;
}

/* The first error that is not just "aborted because another device failed". */
static hk_status *first_error(device_run *runs, int64_t n) {
  hk_status *pick = NULL;
  for (int64_t i = 0; i < n; i++) {
    if (!runs[i].st) continue;
    if (!pick || (strncmp(pick->message, "aborted", 7) == 0 &&
                  strncmp(runs[i].st->message, "aborted", 7) != 0))
      pick = runs[i].st;
  }
  if (!pick) return NULL;
  int64_t dev = 0;
  for (int64_t i = 0; i < n; i++)
    if (runs[i].st == pick) dev = i;
  hk_status *st = hk_error(pick->code, "device %lld: %s", (long long)dev, pick->message);
  return st;
}

static hk_status *check_device_args(const hk_module *m, hk_value *const *const *args, int n_args,
                                    int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    hk_status *st = hk_eval_check_args(m, args[i], n_args);
    if (st) return hk_status_prefix(st, "device %lld", (long long)i);
  }
  return NULL;
}

hk_status *hk_eval_spmd(const hk_module *m, int64_t num_partitions, int64_t num_replicas,
                        hk_value *const *const *args, int n_args, hk_value **results,
                        const hk_eval_options *opts, hk_eval_stats *stats) {
  int64_t n = num_partitions * num_replicas;
  if (num_partitions < 1 || num_replicas < 1 || n > 4096)
    return hk_error(HK_INVALID_ARGUMENT, "bad device count %lld x %lld", (long long)num_replicas,
                    (long long)num_partitions);
  for (int64_t i = 0; i < n; i++) results[i] = NULL;
  hk_eval_options defaults = {0};
  if (!opts) opts = &defaults;
  HK_TRY(check_device_args(m, args, n_args, n));
  hk_eval_plan *plan;
  HK_TRY(hk_eval_plan_build_checked(m, opts, &plan));
  hk_collective_backend *be = opts->backend ? opts->backend : hk_collective_threads_new(n, 0);
  device_run *runs = calloc((size_t)n, sizeof *runs);
  if (!runs) abort();
  hk_cpu_slots *slots = hk_cpu_slots_new();
  for (int64_t i = 0; i < n; i++) {
    device_run *r = &runs[i];
    r->m = m;
    r->slots = slots;
    r->args = args[i];
    r->n_args = n_args;
    hk_device_ctx_init(&r->ctx, plan, opts);
    r->ctx.replica = i / num_partitions;
    r->ctx.partition = i % num_partitions;
    r->ctx.num_replicas = num_replicas;
    r->ctx.num_partitions = num_partitions;
    r->ctx.backend = be;
    r->ctx.mem.limit = hk_eval_memory_budget(opts, n);
  }
  int64_t started = 0;
  hk_status *st = NULL;
  for (; started < n; started++)
    if (pthread_create(&runs[started].thread, NULL, device_main, &runs[started])) {
      st = hk_error(HK_INTERNAL, "cannot start device thread %lld", (long long)started);
      be->vt->abort(be, "a device thread could not start");
      break;
    }
  for (int64_t i = 0; i < started; i++) pthread_join(runs[i].thread, NULL);
  if (!st) st = first_error(runs, started);
  for (int64_t i = 0; i < n; i++) {
    if (stats) stats[i] = runs[i].ctx.stats;
    if (st) hk_value_release(runs[i].result);
    else results[i] = runs[i].result;
    hk_status_free(runs[i].st);
    hk_device_ctx_free(&runs[i].ctx);
  }
  free(runs);
  hk_cpu_slots_free(slots);
  if (!opts->backend) be->vt->destroy(be);
  hk_eval_plan_free(plan);
  return st;
}
