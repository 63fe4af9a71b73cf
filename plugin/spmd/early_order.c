/* early_order.c - the entry's instruction post order, computed on a second
 * thread while the PreprocessSharding walk runs.  Both only read the graph
 * (the walk writes shardings, which the order never reads), so the visitor
 * finds its order ready: at 10^6 instructions that is ~50 ms of memory
 * traffic taken off the calling thread.  The order is kept only while
 * the module's change count is the one it was started at. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "spmd_internal.h"

/* Below this the order is cheap and a thread is not worth starting. */
enum { EARLY_ORDER_MIN_INSTRS = 1 << 16 };

static void *compute_order(void *arg) {
  spmd_early_order *e = arg;
  e->order = hk_computation_post_order(e->c, &e->n);
  return NULL;
}

void spmd_early_order_start(spmd_early_order *e, const hk_computation *c) {
  memset(e, 0, sizeof *e);
  e->c = c;
  e->at = hk_module_changes(c->module);
  if (c->n_instrs < EARLY_ORDER_MIN_INSTRS || hk_worker_threads() < 2) return;
  e->running = pthread_create(&e->thread, NULL, compute_order, e) == 0;
}

void spmd_early_order_join(spmd_early_order *e) {
  if (!e->running) return;
  pthread_join(e->thread, NULL);
  e->running = false;
}

hk_instr **spmd_early_order_take(spmd_early_order *e, const hk_computation *c, int64_t *n) {
  spmd_early_order_join(e);
  if (!e->order || e->c != c) return NULL;
  hk_instr **order = e->order;
  *n = e->n;
  e->order = NULL;
  return order;
}

void spmd_early_order_drop(spmd_early_order *e) {
  spmd_early_order_join(e);
  free(e->order);
  e->order = NULL;
}

void spmd_early_order_drop_if_stale(spmd_early_order *e) {
  if (e->c && hk_module_changes(e->c->module) != e->at) spmd_early_order_drop(e);
}
