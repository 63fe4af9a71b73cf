/* list_order.c - stock_post_order: a computation's post order
 * (hk_computation_post_order, which takes the list itself when the list
 * already is that order) and, for hlo-cse, a table of positions in it by
 * instruction id that the caller's walk fills as it goes, kept in buffers
 * reused across the computations of one run. */
#include <stdlib.h>
#include <string.h>

#include "stock.h"

void stock_order_ws_free(stock_order_ws *w) {
  free(w->pos_by_id);
  memset(w, 0, sizeof *w);
}

/* Room for ids below n_ids; new entries zeroed (stale or zero entries are
 * never trusted: readers check order[pos]). */
void stock_order_ws_reserve(stock_order_ws *w, int64_t n_ids) {
  if (n_ids <= 0 || (size_t)n_ids <= w->n_ids) return;
  /* ids set from outside may keep exceeding the size: grow geometrically */
  size_t want = w->n_ids && 2 * w->n_ids > (size_t)n_ids ? 2 * w->n_ids : (size_t)n_ids;
  w->pos_by_id = realloc(w->pos_by_id, want * sizeof *w->pos_by_id);
  if (!w->pos_by_id) hk_out_of_memory();
  memset(w->pos_by_id + w->n_ids, 0, (want - w->n_ids) * sizeof *w->pos_by_id);
  w->n_ids = want;
}

hk_instr **stock_post_order(const hk_computation *c, stock_order_ws *w, int64_t *n) {
  stock_order_ws_reserve(w, c->module->next_id);
  return hk_computation_post_order(c, n);
}
