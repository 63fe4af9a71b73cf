/* post_order.c - the printer's instruction order (XLA's post order) computed over list positions, so its DFS does not chase instruction pointers through a big module; one forward walk also hands each instruction to the caller (the printer prints it then). */
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/walk.h"
#include "text/text_internal.h"

void tx_post_order_init(tx_post_order *po, int64_t n_ids) {
  memset(po, 0, sizeof *po);
  po->n_ids = n_ids > 0 ? n_ids : 0;
  po->pos_by_id = po->n_ids ? calloc((size_t)po->n_ids, sizeof *po->pos_by_id) : NULL;
  if (!po->pos_by_id) po->n_ids = 0;
}

void tx_post_order_free(tx_post_order *po) {
  free(po->pos_by_id);
  free(po->at);
  free(po->first);
  free(po->ops);
  free(po->roots);
  free(po->stack);
  free(po->state);
  free(po->order);
  free(po->channels);
  memset(po, 0, sizeof *po);
}

/* Room for need elements, doubling; the new part of an array that will be
 * filled (dense) has its pages made present at once (hk_populate): cheaper
 * than a page fault each for a big module. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem, bool dense) {
  if (need <= *cap) return p;
  size_t n = *cap ? *cap : 64;
  while (n < need) n *= 2;
  p = hk_check_alloc(realloc(p, n * elem));
  if (dense) hk_populate((char *)p + *cap * elem, (char *)p + n * elem);
  *cap = n;
  return p;
}

/* Room for n instructions (per-position arrays). */
static void reserve_positions(tx_post_order *po, size_t n) {
  if (n + 1 <= po->cap) return;
  size_t cap = po->cap, c2 = po->cap, c3 = po->cap, c4 = po->cap, c5 = po->cap;
  po->at = grow(po->at, &cap, n + 1, sizeof *po->at, true);
  po->first = grow(po->first, &c2, n + 1, sizeof *po->first, true);
  po->roots = grow(po->roots, &c3, n + 1, sizeof *po->roots, false);
  po->state = grow(po->state, &c4, n + 1, sizeof *po->state, true);
  po->order = grow(po->order, &c5, n + 1, sizeof *po->order, true);
  po->cap = cap;
}

static void add_op(tx_post_order *po, size_t *n_ops, uint32_t p) {
  po->ops = grow(po->ops, &po->cap_ops, *n_ops + 1, sizeof *po->ops, true);
  po->ops[(*n_ops)++] = p;
}

/* The list position of operand o of an instruction at position pos, or -1
 * if o is listed after it (positions are checked, never trusted stale). */
static int64_t operand_position(const tx_post_order *po, const hk_instr *o, uint32_t pos) {
  if (o->id < 0 || o->id >= po->n_ids) return -1;
  uint32_t p = po->pos_by_id[o->id];
  return p < pos && po->at[p] == o ? (int64_t)p : -1;
}

/* Notes x's channel id when it is a channel collective. */
static void note_channel(tx_post_order *po, const hk_instr *x) {
  if (!hk_instr_is_channel_collective(x)) return;
  po->channels = grow(po->channels, &po->cap_channels, po->n_channels + 1, sizeof *po->channels,
                      false);
  po->channels[po->n_channels++] = x->attrs->channel_id;
}

/* Positions, operand positions (operands in c only) and the instructions
 * without users, in one forward walk; false if the DFS must see the
 * instructions themselves (an operand listed late, collectives sharing a
 * channel: XLA's channel edges, which this walk does not add).  Control edges are not
 * looked at (they live in the attributes, a cache miss apiece): the caller
 * checks them. */
static bool build_graph(const hk_computation *c, tx_post_order *po, tx_visit_fn visit,
                        void *ctx) {
  size_t n = (size_t)c->n_instrs, n_ops = 0;
  if (c->n_instrs < 0 || c->n_instrs >= (int64_t)UINT32_MAX) return false;
  reserve_positions(po, n);
  uint32_t pos = 0;
  po->n_roots = 0;
  po->n_channels = 0;
  const hk_instr *ahead = c->first;
  for (int k = 0; k < TX_PREFETCH_AHEAD && ahead; k++) ahead = ahead->next;
  for (const hk_instr *x = c->first; x; x = x->next, pos++) {
    if (pos >= n || x->id < 0 || x->id >= po->n_ids) return false;
    ahead = tx_prefetch_ahead(ahead);
    po->at[pos] = (hk_instr *)x;
    po->first[pos] = (uint32_t)n_ops;
    po->state[pos] = 0;
    for (int k = 0; k < x->n_operands; k++) {
      const hk_instr *o = x->operands[k];
      if (o->parent != c) continue;
      int64_t p = operand_position(po, o, pos);
      if (p < 0) return false;
      add_op(po, &n_ops, (uint32_t)p);
    }
    if (!x->n_users) po->roots[po->n_roots++] = pos;
    note_channel(po, x);
    po->pos_by_id[x->id] = pos;
    if (visit && !visit(ctx, x, pos)) return false;
  }
  if (pos != n || !hk_channel_ids_distinct(po->channels, po->n_channels)) return false;
  po->first[n] = (uint32_t)n_ops;
  po->stack = grow(po->stack, &po->cap_stack, n_ops + 1, sizeof *po->stack, false);
  return true;
}

/* The printer's DFS from r (state 1 = on the stack, 2 = done): operands
 * pushed in reverse so the first is visited first. */
static void dfs_positions(tx_post_order *po, uint32_t r) {
  size_t sp = 0;
  po->stack[sp++] = r;
  while (sp) {
    uint32_t cur = po->stack[sp - 1];
    if (po->state[cur]) {
      sp--;
      if (po->state[cur] == 1) {
        po->state[cur] = 2;
        po->listed &= cur == po->n;
        po->order[po->n++] = cur;
      }
      continue;
    }
    po->state[cur] = 1;
    for (uint32_t k = po->first[cur + 1]; k-- > po->first[cur];) po->stack[sp++] = po->ops[k];
  }
}

bool tx_list_post_order(const hk_computation *c, tx_post_order *po, tx_visit_fn visit,
                        void *ctx) {
  po->n = 0;
  po->listed = true;
  if (!build_graph(c, po, visit, ctx)) return false;
  for (size_t k = 0; k < po->n_roots; k++)
    if (!po->state[po->roots[k]]) dfs_positions(po, po->roots[k]);
  /* only reachable through a cycle: what is left, in list order */
  for (size_t p = 0; po->n < (size_t)c->n_instrs && p < (size_t)c->n_instrs; p++)
    if (po->state[p] != 2) {
      po->state[p] = 2;
      po->listed &= p == po->n;
      po->order[po->n++] = (uint32_t)p;
    }
  return true;
}
