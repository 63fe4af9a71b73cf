/* spmd.c - runs one module on num_replicas x num_partitions simulated
 * devices at once (or on a range of them, the others elsewhere), one
 * thread per device (hk_worker_threads of them computing at a time:
 * cpu_slots.c). */
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

/* The first error that is not just "aborted because another device failed";
 * runs[i] is device first + i. */
static hk_status *first_error(device_run *runs, int64_t n, int64_t first) {
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
    if (runs[i].st == pick) dev = first + i;
  hk_status *st = hk_error(pick->code, "device %lld: %s", (long long)dev, pick->message);
  return st;
}

static hk_status *check_device_args(const hk_module *m, hk_value *const *const *args, int n_args,
                                    int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    hk_status *st = hk_eval_check_args(m, args[i], n_args);
    if (st) return hk_status_prefix(st, "device %lld", (long long)(first + i));
  }
  return NULL;
}

/* Runs devices first .. first + count - 1, one thread each, on backend be;
 * `bounded`: at most hk_worker_threads() of them compute at once (only for
 * the thread back end, whose rendezvous give the slot up while waiting; a
 * device blocked inside another back end, e.g. MPI, would keep it and
 * starve the devices it waits for). */
static hk_status *run_devices(const hk_module *m, const hk_eval_plan *plan, int64_t num_partitions,
                              int64_t num_replicas, int64_t first, int64_t count,
                              hk_value *const *const *args, int n_args, hk_value **results,
                              const hk_eval_options *opts, hk_collective_backend *be,
                              bool bounded, hk_eval_stats *stats) {
  device_run *runs = calloc((size_t)count, sizeof *runs);
  if (!runs) hk_out_of_memory();
  hk_cpu_slots *slots = bounded ? hk_cpu_slots_new() : NULL;
  for (int64_t k = 0; k < count; k++) {
    device_run *r = &runs[k];
    int64_t i = first + k;
    r->m = m;
    r->slots = slots;
    r->args = args[k];
    r->n_args = n_args;
    hk_device_ctx_init(&r->ctx, plan, opts);
    r->ctx.replica = i / num_partitions;
    r->ctx.partition = i % num_partitions;
    r->ctx.num_replicas = num_replicas;
    r->ctx.num_partitions = num_partitions;
    r->ctx.backend = be;
    /* The budget of the whole grid: ranks sharing a machine then share it
     * as the threads of one process do. */
    r->ctx.mem.limit = hk_eval_memory_budget(opts, num_partitions * num_replicas);
  }
  int64_t started = 0;
  hk_status *st = NULL;
  for (; started < count; started++)
    if (pthread_create(&runs[started].thread, NULL, device_main, &runs[started])) {
      st = hk_error(HK_INTERNAL, "cannot start device thread %lld", (long long)(first + started));
      be->vt->abort(be, "a device thread could not start");
      break;
    }
  for (int64_t k = 0; k < started; k++) pthread_join(runs[k].thread, NULL);
  if (!st) st = first_error(runs, started, first);
  for (int64_t k = 0; k < count; k++) {
    if (stats) stats[k] = runs[k].ctx.stats;
    if (st) hk_value_release(runs[k].result);
    else results[k] = runs[k].result;
    hk_status_free(runs[k].st);
    hk_device_ctx_free(&runs[k].ctx);
  }
  free(runs);
  hk_cpu_slots_free(slots);
  return st;
}

static hk_status *check_grid(int64_t num_partitions, int64_t num_replicas) {
  if (num_partitions < 1 || num_replicas < 1 || num_partitions * num_replicas > 4096)
    return hk_error(HK_INVALID_ARGUMENT, "bad device count %lld x %lld", (long long)num_replicas,
                    (long long)num_partitions);
  return NULL;
}

hk_status *hk_eval_spmd_devices(const hk_module *m, int64_t num_partitions, int64_t num_replicas,
                                int64_t first, int64_t count, hk_value *const *const *args,
                                int n_args, hk_value **results, const hk_eval_options *opts,
                                hk_eval_stats *stats) {
  HK_TRY(check_grid(num_partitions, num_replicas));
  if (first < 0 || count < 1 || first + count > num_partitions * num_replicas)
    return hk_error(HK_INVALID_ARGUMENT, "devices %lld..%lld are not in the %lld x %lld grid",
                    (long long)first, (long long)(first + count - 1), (long long)num_replicas,
                    (long long)num_partitions);
  if (!opts || !opts->backend)
    return hk_error(HK_INVALID_ARGUMENT, "running part of the devices needs a collective back end");
  for (int64_t k = 0; k < count; k++) results[k] = NULL;
  HK_TRY(check_device_args(m, args, n_args, first, count));
  hk_eval_plan *plan;
  HK_TRY(hk_eval_plan_build_checked(m, opts, &plan));
  hk_status *st = run_devices(m, plan, num_partitions, num_replicas, first, count, args, n_args,
                              results, opts, opts->backend, false, stats);
  hk_eval_plan_free(plan);
  return st;
}

hk_status *hk_eval_spmd(const hk_module *m, int64_t num_partitions, int64_t num_replicas,
                        hk_value *const *const *args, int n_args, hk_value **results,
                        const hk_eval_options *opts, hk_eval_stats *stats) {
  HK_TRY(check_grid(num_partitions, num_replicas));
  int64_t n = num_partitions * num_replicas;
  for (int64_t i = 0; i < n; i++) results[i] = NULL;
  hk_eval_options defaults = {0};
  if (!opts) opts = &defaults;
  HK_TRY(check_device_args(m, args, n_args, 0, n));
  hk_eval_plan *plan;
  HK_TRY(hk_eval_plan_build_checked(m, opts, &plan));
  hk_collective_backend *be = opts->backend ? opts->backend : hk_collective_threads_new(n, 0);
  hk_status *st = run_devices(m, plan, num_partitions, num_replicas, 0, n, args, n_args, results,
                              opts, be, true, stats);
  if (!opts->backend) be->vt->destroy(be);
  hk_eval_plan_free(plan);
  return st;
}
