/* list_order.c - stock_post_order: a computation's post order (XLA's
 * MakeInstructionPostOrder, as hk_computation_post_order gives it) taken
 * from the instruction list itself when one walk over the list proves the
 * list already is that order, which is how builders append instructions.
 * The proof is checked on list positions, so it never chases instruction
 * pointers a second time; any doubt (control edges, channel ids that could
 * tie collectives together, an operand listed late or elsewhere) falls
 * back to hk_computation_post_order. */
#include <stdlib.h>
#include <string.h>

#include "stock.h"

#define UNSET UINT32_MAX

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap : 64;
  while (n < need) n *= 2;
  p = realloc(p, n * elem);
  if (!p) abort();
  *cap = n;
  return p;
}

void stock_order_ws_free(stock_order_ws *w) {
  free(w->pos_by_id);
  free(w->first);
  free(w->low);
  free(w->ops);
  free(w->roots);
  memset(w, 0, sizeof *w);
}

/* Room for ids below n_ids (new entries zeroed: stale or zero entries are
 * never trusted, see operand_position) and for n instructions. */
static void reserve(stock_order_ws *w, int64_t n_ids, size_t n) {
  if (n_ids > 0 && (size_t)n_ids > w->n_ids) {   /* clones keep adding ids: grow geometrically */
    size_t want = w->n_ids && 2 * w->n_ids > (size_t)n_ids ? 2 * w->n_ids : (size_t)n_ids;
    w->pos_by_id = realloc(w->pos_by_id, want * sizeof *w->pos_by_id);
    if (!w->pos_by_id) abort();
    memset(w->pos_by_id + w->n_ids, 0, (want - w->n_ids) * sizeof *w->pos_by_id);
    w->n_ids = want;
  }
  size_t c1 = w->cap, c2 = w->cap, c3 = w->cap;
  w->first = grow(w->first, &c1, n + 1, sizeof *w->first);
  w->low = grow(w->low, &c2, n + 1, sizeof *w->low);
  w->roots = grow(w->roots, &c3, n + 1, sizeof *w->roots);
  w->cap = c1;
}

/* Opcodes whose channel id could make the post order visit another
 * collective of the same channel first. */
static bool may_share_channel(hk_opcode op) {
  switch (op) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_GATHER:
    case HK_OP_ALL_GATHER_START: case HK_OP_ALL_TO_ALL: case HK_OP_RAGGED_ALL_TO_ALL:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_COLLECTIVE_PERMUTE_START: case HK_OP_REDUCE_SCATTER: case HK_OP_SEND:
    case HK_OP_RECV: case HK_OP_SEND_DONE: case HK_OP_RECV_DONE:
      return true;
    default:
      return false;
  }
}

/* The list position of operand o of the instruction at position p, or
 * UNSET when o is not listed before it in this walk. */
static uint32_t operand_position(const stock_order_ws *w, hk_instr *const *at,
                                 const hk_instr *o, uint32_t p) {
  if (o->id < 0 || (size_t)o->id >= w->n_ids) return UNSET;
  uint32_t q = w->pos_by_id[o->id];
  return q < p && at[q] == o ? q : UNSET;
}

/* Starts loading what the walk reads of x beyond x itself: the memory
 * latency of the next step overlaps this one. */
static void prefetch_parts(const hk_instr *x) {
  if (!x) return;
  if (x->attrs) __builtin_prefetch(&x->attrs->n_control_preds);
  if (x->n_operands) __builtin_prefetch(x->operands);
}

/* One walk: at[] (the list), each instruction's operand positions and the
 * instructions without users.  False when the list cannot be the post
 * order or the DFS would follow edges this check does not model: control
 * edges, two channel instructions that may share a channel id (ids must
 * rise strictly along the list), an operand listed late or in another
 * computation. */
static bool walk_list(const hk_computation *c, stock_order_ws *w, hk_instr **at, size_t n) {
  size_t n_ops = 0;
  uint32_t p = 0;
  int64_t last_channel = 0;
  w->n_roots = 0;
  for (hk_instr *x = c->first; x; x = x->next, p++) {
    prefetch_parts(x->next);
    stock_prefetch_list(x);
    if (p >= n || x->id < 0 || (size_t)x->id >= w->n_ids) return false;
    if (x->attrs) {
      if (x->attrs->n_control_preds || x->attrs->n_control_succs) return false;
      if (may_share_channel((hk_opcode)x->opcode) && x->attrs->channel_id) {
        if (x->attrs->channel_id <= last_channel) return false;
        last_channel = x->attrs->channel_id;
      }
    }
    at[p] = x;
    w->first[p] = (uint32_t)n_ops;
    w->ops = grow(w->ops, &w->cap_ops, n_ops + (size_t)x->n_operands + 1, sizeof *w->ops);
    for (int32_t k = 0; k < x->n_operands; k++) {
      uint32_t q = operand_position(w, at, x->operands[k], p);
      if (q == UNSET) return false;
      w->ops[n_ops++] = q;
    }
    if (!x->n_users) w->roots[w->n_roots++] = p;
    w->pos_by_id[x->id] = p;
  }
  if (p != n) return false;
  w->first[n] = (uint32_t)n_ops;
  return true;
}

/* Whether the DFS (from each instruction without users in list order, then
 * operands in order) emits exactly the list.  Working back from the end,
 * each instruction's block of the DFS output is [low, its position]: the
 * roots' blocks tile the list, and an instruction's block is the blocks of
 * its operands not emitted before it (those at or after low) laid end to
 * end, then itself.  Every instruction must get its block start exactly
 * once; then, by induction over positions, the DFS output is the list. */
static bool list_is_post_order(stock_order_ws *w, size_t n) {
  if (!n) return true;
  uint32_t *low = w->low;
  memset(low, 0xff, n * sizeof *low);
  uint32_t next = 0;
  for (size_t k = 0; k < w->n_roots; k++) {
    low[w->roots[k]] = next;
    next = w->roots[k] + 1;
  }
  if (next != n) return false;
  for (size_t p = n; p-- > 0;) {
    uint32_t cur = low[p];
    if (cur == UNSET) return false;
    for (uint32_t k = w->first[p]; k < w->first[p + 1]; k++) {
      uint32_t q = w->ops[k];
      if (q < cur) continue;   /* emitted before this block */
      if (low[q] != UNSET) return false;
      low[q] = cur;
      cur = q + 1;
    }
    if (cur != p) return false;
  }
  return true;
}

/* pos_by_id for an order the DFS made. */
static void note_positions(stock_order_ws *w, hk_instr *const *order, int64_t n) {
  int64_t max_id = 0;
  for (int64_t k = 0; k < n; k++)
    if (order[k]->id >= max_id) max_id = order[k]->id + 1;
  reserve(w, max_id, 0);
  for (int64_t k = 0; k < n; k++)
    if (order[k]->id >= 0) w->pos_by_id[order[k]->id] = (uint32_t)k;
}

hk_instr **stock_post_order(const hk_computation *c, stock_order_ws *w, int64_t *n) {
  size_t len = c->n_instrs > 0 ? (size_t)c->n_instrs : 0;
  hk_instr **at = malloc((len + 1) * sizeof *at);
  if (!at) abort();
  if (len < UNSET) {
    reserve(w, c->module->next_id, len);
    if (walk_list(c, w, at, len) && list_is_post_order(w, len)) {
      *n = (int64_t)len;
      w->from_list = true;
      return at;
    }
  }
  free(at);
  w->from_list = false;
  hk_instr **order = hk_computation_post_order(c, n);
  note_positions(w, order, *n);
  return order;
}
