/* post_order.c - XLA's instruction post order (MakeInstructionPostOrder): a DFS over list positions for big computations, over instruction marks otherwise. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"
#include "ptr_table.h"
#include "walk.h"

/* Both walks give the same order: a DFS from each instruction without
 * users, in list order, that visits an instruction's control predecessors
 * (last first), then its operands in order, then the earlier collectives
 * of its channel (latest first; not for the DFS start itself), skipping
 * instructions of other computations, and emits an instruction when all of
 * those are done.  Instructions left over (only reachable through a cycle)
 * start DFSes of their own, in list order. */

bool hk_instr_is_channel_collective(const hk_instr *i) {
  switch ((hk_opcode)i->opcode) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_RAGGED_ALL_TO_ALL: case HK_OP_REDUCE_SCATTER:
      return i->attrs && i->attrs->channel_id != 0;
    default:
      return false;
  }
}

/* ==== the DFS over instruction marks (small or unusual computations) ========== */

enum { VISIT_NEW = 0, VISIT_ACTIVE = 1, VISIT_DONE = 2 };

/* The visit marks live in instr->flags; one marking walk at a time. */
static pthread_mutex_t post_order_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned visit_state(const hk_instr *i) { return i->flags & HK_IFLAG_VISIT_MASK; }
static void set_visit_state(hk_instr *i, unsigned s) {
  i->flags = (uint16_t)((i->flags & ~HK_IFLAG_VISIT_MASK) | s);
}

typedef struct ptr_stack {
  hk_instr **v;
  size_t n, cap;
  const hk_computation *c;   /* instructions of other computations are skipped */
} ptr_stack;

static void stack_push(ptr_stack *s, hk_instr *i) {
  if (i->parent != s->c || visit_state(i) == VISIT_DONE) return;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) hk_out_of_memory();
  }
  s->v[s->n++] = i;
}

/* Collectives sharing a channel id run together (XLA's
 * ComputeChannelDependencies): each depends on the earlier ones of its
 * channel.  They are kept sorted by (channel, list position) with a
 * pointer map (index + 1) to find an instruction's place. */
typedef struct channel_entry {
  hk_instr *instr;
  int64_t channel, pos;
} channel_entry;

typedef struct channel_deps {
  channel_entry *v;      /* sorted by channel, then list position */
  int64_t n;
  hk_ptr_map index;      /* instruction -> its index in v, plus one */
} channel_deps;

static int channel_entry_cmp(const void *a, const void *b) {
  const channel_entry *x = a, *y = b;
  if (x->channel != y->channel) return x->channel < y->channel ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void channel_deps_init(channel_deps *d, const hk_computation *c) {
  memset(d, 0, sizeof *d);
  int64_t pos = 0;
  for (hk_instr *i = c->first; i; i = i->next, pos++) {
    if (!hk_instr_is_channel_collective(i)) continue;
    if ((d->n & (d->n - 1)) == 0) {   /* grow at powers of two */
      d->v = realloc(d->v, (size_t)(d->n ? 2 * d->n : 1) * sizeof *d->v);
      if (!d->v) hk_out_of_memory();
    }
    d->v[d->n++] = (channel_entry){i, i->attrs->channel_id, pos};
  }
  if (!d->n) return;
  qsort(d->v, (size_t)d->n, sizeof *d->v, channel_entry_cmp);
  hk_ptr_map_init(&d->index, (size_t)d->n);
  for (int64_t k = 0; k < d->n; k++)
    hk_ptr_map_put(&d->index, d->v[k].instr, (void *)(intptr_t)(k + 1));
}

static void channel_deps_free(channel_deps *d) {
  free(d->v);
  hk_ptr_map_free(&d->index);
}

/* The channel table is built the first time the walk meets a channel
 * collective: modules without one never scan for them. */
typedef struct post_walk {
  ptr_stack s;
  const hk_computation *c;
  channel_deps d;
  bool have_deps;
  hk_instr **out;
  int64_t n_out, cap;
} post_walk;

static void push_channel_deps(post_walk *w, const hk_instr *cur) {
  if (!hk_instr_is_channel_collective(cur)) return;
  if (!w->have_deps) {
    channel_deps_init(&w->d, w->c);
    w->have_deps = true;
  }
  const channel_deps *d = &w->d;
  if (!d->n) return;
  int64_t k = (int64_t)(intptr_t)hk_ptr_map_get(&d->index, cur) - 1;
  if (k < 0) return;
  /* earlier members of the channel, in list order */
  int64_t first = k;
  while (first > 0 && d->v[first - 1].channel == d->v[k].channel) first--;
  for (int64_t j = first; j < k; j++) stack_push(&w->s, d->v[j].instr);
}

static void emit(post_walk *w, hk_instr *i) {
  if (w->n_out == w->cap) {   /* only when n_instrs undercounts the list */
    w->cap = w->cap ? 2 * w->cap : 16;
    w->out = realloc(w->out, (size_t)w->cap * sizeof *w->out);
    if (!w->out) hk_out_of_memory();
  }
  w->out[w->n_out++] = i;
}

static void dfs_from(post_walk *w, hk_instr *start) {
  ptr_stack *s = &w->s;
  s->n = 0;
  stack_push(s, start);
  while (s->n) {
    hk_instr *cur = s->v[s->n - 1];
    unsigned st = visit_state(cur);
    if (st != VISIT_NEW) {
      s->n--;
      if (st != VISIT_DONE) {
        set_visit_state(cur, VISIT_DONE);
        emit(w, cur);
      }
      continue;
    }
    set_visit_state(cur, VISIT_ACTIVE);
    if (cur != start) push_channel_deps(w, cur);
    for (int32_t k = cur->n_operands; k-- > 0;) stack_push(s, cur->operands[k]);
    if (cur->attrs)
      for (int32_t k = 0; k < cur->attrs->n_control_preds; k++)
        stack_push(s, cur->attrs->control_preds[k]);
  }
}

static hk_instr **post_order_by_marks(const hk_computation *c, int64_t *n) {
  post_walk w = {.s = {.c = c}, .c = c, .cap = c->n_instrs > 0 ? c->n_instrs : 1};
  w.out = malloc((size_t)w.cap * sizeof *w.out);
  if (!w.out) hk_out_of_memory();
  pthread_mutex_lock(&post_order_lock);
  for (hk_instr *i = c->first; i; i = i->next)
    if (i->n_users == 0) dfs_from(&w, i);
  if (w.n_out < c->n_instrs)
    for (hk_instr *i = c->first; i; i = i->next)
      if (visit_state(i) == VISIT_NEW) dfs_from(&w, i);
  /* every instruction the walk marked is in the output, marked done */
  for (int64_t k = 0; k < w.n_out; k++) set_visit_state(w.out[k], VISIT_NEW);
  pthread_mutex_unlock(&post_order_lock);
  free(w.s.v);
  if (w.have_deps) channel_deps_free(&w.d);
  *n = w.n_out;
  return w.out;
}

/* ==== the DFS over list positions (big computations) ========================= */
/* One forward walk turns the computation into arrays of list positions;
 * the DFS then runs over those few compact arrays instead of chasing
 * instruction pointers through a big module (each instruction is read
 * once, in memory order), needs no marks in the instructions, and so no
 * lock; when a check over the same arrays proves the list already is the
 * order, no DFS runs at all.  It applies when every DFS edge points to an
 * instruction listed earlier (so no cycles) and no two collectives share a
 * channel (so there are no channel edges); otherwise the marking DFS runs. */

typedef struct pos_graph {
  const hk_computation *c;
  uint32_t n;               /* instructions listed */
  hk_instr **at;            /* position -> instruction */
  uint32_t *first;          /* position p's edges: edges[first[p] .. first[p + 1]) */
  uint32_t *edges;          /* positions, in the order the DFS pushes them */
  size_t n_edges, cap_edges;
  uint32_t *roots;          /* positions of the instructions without users */
  uint32_t n_roots;
  uint32_t *pos_of_id;      /* instruction id -> position, checked against at[] */
  int64_t n_ids;
  int64_t *channels;        /* channel ids of the channel collectives */
  size_t n_channels, cap_channels;
} pos_graph;

static void pos_graph_free(pos_graph *g) {
  free(g->at);
  free(g->first);
  free(g->edges);
  free(g->roots);
  free(g->pos_of_id);
  free(g->channels);
}

static void *grow_array(void *p, size_t *cap, size_t elem) {
  *cap = *cap ? 2 * *cap : 64;
  p = realloc(p, *cap * elem);
  if (!p) hk_out_of_memory();
  return p;
}

/* The position of o, an instruction of the computation, which must be
 * listed before position pos; -1 when it is not. */
static int64_t earlier_position(const pos_graph *g, const hk_instr *o, uint32_t pos) {
  if (o->id < 0 || o->id >= g->n_ids) return -1;
  uint32_t p = g->pos_of_id[o->id];
  return p < pos && g->at[p] == o ? (int64_t)p : -1;
}

/* The position of o if it is one of the few instructions listed just
 * before pos (most operands are), found without reading o; else -1. */
static int64_t recent_position(const pos_graph *g, const hk_instr *o, uint32_t pos) {
  for (uint32_t d = 1; d <= 4 && d <= pos; d++)
    if (g->at[pos - d] == o) return pos - d;
  return -1;
}

/* Adds the edge to o (skipped when o belongs to another computation);
 * false if o is listed at or after pos. */
static bool add_edge(pos_graph *g, const hk_instr *o, uint32_t pos) {
  int64_t p = recent_position(g, o, pos);
  if (p < 0) {
    if (o->parent != g->c) return true;
    p = earlier_position(g, o, pos);
    if (p < 0) return false;
  }
  if (g->n_edges == UINT32_MAX - 1) return false;
  if (g->n_edges == g->cap_edges) g->edges = grow_array(g->edges, &g->cap_edges, sizeof *g->edges);
  g->edges[g->n_edges++] = (uint32_t)p;
  return true;
}

static void note_channel(pos_graph *g, const hk_instr *x) {
  if (!hk_instr_is_channel_collective(x)) return;
  if (g->n_channels == g->cap_channels)
    g->channels = grow_array(g->channels, &g->cap_channels, sizeof *g->channels);
  g->channels[g->n_channels++] = x->attrs->channel_id;
}

/* x's edges as the marking DFS pushes them: operands last first, then
 * control predecessors first to last (the top of the stack is visited
 * first). */
static bool add_edges_of(pos_graph *g, const hk_instr *x, uint32_t pos) {
  for (int32_t k = x->n_operands; k-- > 0;)
    if (!add_edge(g, x->operands[k], pos)) return false;
  if (x->attrs)
    for (int32_t k = 0; k < x->attrs->n_control_preds; k++)
      if (!add_edge(g, x->attrs->control_preds[k], pos)) return false;
  return true;
}

static int int64_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

bool hk_channel_ids_distinct(int64_t *ids, size_t n) {
  if (n < 2) return true;
  qsort(ids, n, sizeof *ids, int64_cmp);
  for (size_t k = 1; k < n; k++)
    if (ids[k] == ids[k - 1]) return false;
  return true;
}

/* The forward walk; false when the marking DFS must run instead. */
static bool build_pos_graph(pos_graph *g, const hk_computation *c) {
  size_t cap = (size_t)c->n_instrs;
  g->c = c;
  g->n_ids = c->module->next_id;
  g->at = malloc(cap * sizeof *g->at);
  g->first = malloc((cap + 1) * sizeof *g->first);
  g->roots = malloc(cap * sizeof *g->roots);
  g->pos_of_id = calloc((size_t)g->n_ids, sizeof *g->pos_of_id);
  g->cap_edges = 2 * cap;
  g->edges = malloc(g->cap_edges * sizeof *g->edges);
  if (!g->at || !g->first || !g->roots || !g->pos_of_id || !g->edges) hk_out_of_memory();
  /* filled by the walk below (pos_of_id at the instructions' ids, which
   * use_positions keeps within 16 times their number): their pages are
   * made present on the prefault helper meanwhile (a page fault each cost
   * ~20 ms at 10^6) */
  hk_populate(g->at, g->at + cap);
  hk_populate(g->first, g->first + cap + 1);
  hk_populate(g->edges, g->edges + g->cap_edges);
  hk_populate(g->pos_of_id, g->pos_of_id + g->n_ids);
  uint32_t pos = 0;
  for (const hk_instr *x = c->first; x; x = x->next, pos++) {
    hk_instr_prefetch_ahead(x);
    if (pos == cap || x->id < 0 || x->id >= g->n_ids) return false;
    g->at[pos] = (hk_instr *)x;
    g->first[pos] = (uint32_t)g->n_edges;
    if (!add_edges_of(g, x, pos)) return false;
    if (!x->n_users) g->roots[g->n_roots++] = pos;
    note_channel(g, x);
    g->pos_of_id[x->id] = pos;
  }
  g->n = pos;
  g->first[pos] = (uint32_t)g->n_edges;
  return hk_channel_ids_distinct(g->channels, g->n_channels);
}

/* The DFS from position r (state 1 = visited, 2 = emitted). */
static void dfs_positions(const pos_graph *g, uint32_t r, uint8_t *state, uint32_t *stack,
                          hk_instr **out, int64_t *n_out) {
  size_t sp = 0;
  stack[sp++] = r;
  while (sp) {
    uint32_t cur = stack[sp - 1];
    if (state[cur]) {
      sp--;
      if (state[cur] == 1) {
        state[cur] = 2;
        out[(*n_out)++] = g->at[cur];
      }
      continue;
    }
    state[cur] = 1;
    for (uint32_t k = g->first[cur]; k < g->first[cur + 1]; k++) {
      uint32_t e = g->edges[k];
      if (state[e] != 2) stack[sp++] = e;
    }
  }
}

static hk_instr **post_order_by_positions(const pos_graph *g, int64_t *n) {
  uint8_t *state = calloc((size_t)g->n + 1, 1);
  uint32_t *stack = malloc((g->n_edges + 1) * sizeof *stack);
  hk_instr **out = malloc(((size_t)g->n + 1) * sizeof *out);
  if (!state || !stack || !out) hk_out_of_memory();
  int64_t n_out = 0;
  for (uint32_t k = 0; k < g->n_roots; k++)
    if (!state[g->roots[k]]) dfs_positions(g, g->roots[k], state, stack, out, &n_out);
  for (uint32_t p = 0; n_out < (int64_t)g->n && p < g->n; p++)
    if (!state[p]) dfs_positions(g, p, state, stack, out, &n_out);
  free(state);
  free(stack);
  *n = n_out;
  return out;
}

/* Whether the DFS would emit exactly the list (then no DFS runs: the
 * list is the answer).  Working back from the end, each position's block
 * of the DFS output is [low, position]: the roots' blocks tile the list,
 * and a block is the blocks of the instruction's DFS successors not
 * emitted before it (those at or after low), in visit order, end to end,
 * then the instruction itself.  If every position gets its block start
 * exactly once this way, the DFS output is the list, by induction over
 * positions. */
static bool list_is_post_order(pos_graph *g) {
  uint32_t n = g->n;
  if (!n) return true;
  /* low[] takes the id table's memory (the walk is done with it, and it
   * has an entry per id, so at least n when ids are unique): fresh pages
   * were a third of this proof's cost at 10^6 */
  uint32_t *low = g->n_ids >= (int64_t)n ? g->pos_of_id : malloc((size_t)n * sizeof *low);
  if (!low) hk_out_of_memory();
  memset(low, 0xff, (size_t)n * sizeof *low);
  uint32_t next = 0;
  for (uint32_t k = 0; k < g->n_roots; k++) {
    low[g->roots[k]] = next;
    next = g->roots[k] + 1;
  }
  bool ok = next == n;
  for (uint32_t p = n; ok && p-- > 0;) {
    uint32_t cur = low[p];
    ok = cur != UINT32_MAX;
    /* edges are stored in push order: the last is visited first */
    for (uint32_t k = g->first[p + 1]; ok && k-- > g->first[p];) {
      uint32_t q = g->edges[k];
      if (q < cur) continue;   /* emitted before this block */
      ok = low[q] == UINT32_MAX;
      low[q] = cur;
      cur = q + 1;
    }
    ok = ok && cur == p;
  }
  if (low != g->pos_of_id) free(low);
  return ok;
}

/* Computations this small stay in cache: the marking DFS is as fast. */
enum { POS_DFS_MIN_INSTRS = 512 };

/* Whether the position DFS is worth its id table. */
static bool use_positions(const hk_computation *c) {
  int64_t n = c->n_instrs;
  int64_t ids = c->module->next_id;
  return n >= POS_DFS_MIN_INSTRS && n < (int64_t)UINT32_MAX / 2 && ids > 0 &&
         ids <= 16 * n + (1 << 16);
}

hk_instr **hk_computation_post_order(const hk_computation *c, int64_t *n) {
  if (use_positions(c)) {
    pos_graph g = {0};
    bool ok = build_pos_graph(&g, c);
    hk_instr **out = NULL;
    if (ok && list_is_post_order(&g)) {   /* the usual case: the list is the order */
      out = g.at;
      g.at = NULL;
      *n = g.n;
    } else if (ok) {
      out = post_order_by_positions(&g, n);
    }
    pos_graph_free(&g);
    if (ok) return out;
  }
  return post_order_by_marks(c, n);
}

/* ==== the list-is-topological proof ========================================== */

/* Whether each of i's operands and control predecessors is in `seen`. */
static bool preds_in(const hk_instr *i, const hk_ptr_set *seen) {
  int32_t n_ctl = i->attrs ? i->attrs->n_control_preds : 0;
  for (int32_t e = 0; e < i->n_operands; e++)
    if (!hk_ptr_set_has(seen, i->operands[e])) return false;
  for (int32_t e = 0; e < n_ctl; e++)
    if (!hk_ptr_set_has(seen, i->attrs->control_preds[e])) return false;
  return true;
}

/* The proof by a position per instruction id (checked against the
 * instruction, so odd ids only make the answer false): the usual case,
 * with no pointer-keyed probes (~0.4 s of random probes at 10^6). */
static bool listed_first_by_ids(const hk_computation *c, int64_t n_ids) {
  int64_t n = c->n_instrs;
  uint32_t *pos = calloc((size_t)n_ids, sizeof *pos);   /* list position + 1; 0 = not yet */
  const hk_instr **at = malloc((size_t)n * sizeof *at);
  if (!pos || !at) hk_out_of_memory();
  bool ok = true;
  uint32_t k = 0;
  for (const hk_instr *i = c->first; i && ok; i = i->next, k++) {
    hk_instr_prefetch_ahead(i);
    int32_t n_ctl = i->attrs ? i->attrs->n_control_preds : 0;
    ok = k < n && i->id >= 0 && i->id < n_ids;
    for (int32_t e = 0; ok && e < i->n_operands + n_ctl; e++) {
      const hk_instr *o = e < i->n_operands ? i->operands[e] : i->attrs->control_preds[e - i->n_operands];
      uint32_t p = o->id >= 0 && o->id < n_ids ? pos[o->id] : 0;
      ok = p != 0 && at[p - 1] == o;
    }
    if (!ok) break;
    at[k] = i;
    pos[i->id] = k + 1;
  }
  free(pos);
  free(at);
  return ok;
}

bool hk_computation_list_is_topological(const hk_computation *c) {
  int64_t n_ids = c->module->next_id, n = c->n_instrs;
  if (n <= 0) return true;
  if (n_ids > 0 && n_ids <= 16 * n + 65536 && n < INT32_MAX) return listed_first_by_ids(c, n_ids);
  /* a small computation of a big module: a set of those listed so far */
  hk_ptr_set seen;
  hk_ptr_set_init(&seen, (size_t)n);
  bool ok = true;
  for (const hk_instr *i = c->first; i && ok; i = i->next) {
    ok = preds_in(i, &seen);
    hk_ptr_set_add(&seen, i);
  }
  hk_ptr_set_free(&seen);
  return ok;
}
