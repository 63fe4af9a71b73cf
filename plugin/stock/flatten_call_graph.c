/* flatten_call_graph.c - flatten-call-graph: XLA's FlattenCallGraph.
 * Every computation called from a control-flow context (call, while,
 * conditional, async) gets exactly one caller: each further call site gets
 * its own clone, and so does a control-flow call site of a computation that
 * is also used in an embedded context (reduce, map, fusion, ...).  Callers
 * are processed before callees so that clones' callees are flattened too. */
#include <stdlib.h>

#include "stock.h"

static bool is_control_flow(hk_opcode op) {
  return hk_opcode_call_context(op) == HK_CALL_CONTROL_FLOW;
}

/* The instructions of one computation that call computations. */
typedef struct call_sites {
  hk_instr **v;
  int32_t n, cap;
} call_sites;

/* Per computation (by computation->index): its number of call sites and
 * its own calling instructions; kept up to date as clones are made, so
 * each computation's list is walked once. */
typedef struct use_counts {
  int32_t *n;
  call_sites *sites;
  size_t cap;
  bool control_flow;   /* some call site is a control-flow one */
} use_counts;

static void use_reserve(use_counts *u, int32_t index) {
  if ((size_t)index < u->cap) return;
  size_t nc = (size_t)index * 2 + 16;
  u->n = realloc(u->n, nc * sizeof *u->n);
  u->sites = realloc(u->sites, nc * sizeof *u->sites);
  if (!u->n || !u->sites) hk_out_of_memory();
  for (size_t s = u->cap; s < nc; s++) {
    u->n[s] = 0;
    u->sites[s] = (call_sites){NULL, 0, 0};
  }
  u->cap = nc;
}

static int32_t *use_slot(use_counts *u, int32_t index) {
  use_reserve(u, index);
  return &u->n[index];
}

static void add_site(use_counts *u, int32_t index, hk_instr *i) {
  use_reserve(u, index);
  call_sites *cs = &u->sites[index];
  if (cs->n == cs->cap) {
    cs->cap = cs->cap ? 2 * cs->cap : 4;
    cs->v = realloc(cs->v, (size_t)cs->cap * sizeof *cs->v);
    if (!cs->v) hk_out_of_memory();
  }
  cs->v[cs->n++] = i;
}

/* Records c's calling instructions (one walk of its list). */
static void note_sites_in(use_counts *u, hk_computation *c) {
  for (hk_instr *i = c->first; i; i = i->next) {
    hk_instr_prefetch_ahead(i);
    if (!i->n_called) continue;
    add_site(u, c->index, i);
    u->control_flow |= is_control_flow((hk_opcode)i->opcode);
  }
}

/* Counts the calls c's recorded calling instructions make. */
static void count_calls_of(use_counts *u, const hk_computation *c) {
  use_reserve(u, c->index);
  for (int32_t k = 0; k < u->sites[c->index].n; k++) {
    const hk_instr *i = u->sites[c->index].v[k];
    for (int32_t j = 0; j < i->n_called; j++) (*use_slot(u, i->called[j]->index))++;
  }
}

static void use_counts_free(use_counts *u) {
  for (size_t s = 0; s < u->cap; s++) free(u->sites[s].v);
  free(u->sites);
  free(u->n);
}

/* Gives each control-flow call of instruction i its own callee when the
 * callee is shared.  Returns true if anything was cloned. */
static bool flatten_calls_of(use_counts *u, hk_instr *i) {
  if (!is_control_flow((hk_opcode)i->opcode)) return false;
  bool changed = false;
  for (int32_t j = 0; j < i->n_called; j++) {
    hk_computation *callee = i->called[j];
    if (*use_slot(u, callee->index) <= 1) continue;
    hk_computation *copy = stock_clone_computation(callee);
    i->called[j] = copy;
    (*use_slot(u, callee->index))--;
    *use_slot(u, copy->index) = 1;
    note_sites_in(u, copy);
    count_calls_of(u, copy);
    changed = true;
  }
  return changed;
}

/* Breadth-first work list of computations, each queued once. */
typedef struct comp_queue {
  hk_computation **v;
  size_t cap, head, tail;
  char *seen;
  size_t seen_cap;
} comp_queue;

static void queue_push(comp_queue *q, hk_computation *c, int32_t n_computations) {
  if ((size_t)c->index >= q->seen_cap) {
    size_t nc = (size_t)n_computations * 2 + 16;
    if (nc <= (size_t)c->index) nc = (size_t)c->index + 16;
    q->seen = realloc(q->seen, nc);
    if (!q->seen) hk_out_of_memory();
    for (size_t s = q->seen_cap; s < nc; s++) q->seen[s] = 0;
    q->seen_cap = nc;
  }
  if (q->seen[c->index]) return;
  q->seen[c->index] = 1;
  if (q->tail == q->cap) {
    q->cap = q->cap ? 2 * q->cap : 16;
    q->v = realloc(q->v, q->cap * sizeof *q->v);
    if (!q->v) hk_out_of_memory();
  }
  q->v[q->tail++] = c;
}

static hk_status *flatten_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                              bool *changed) {
  (void)self;
  bool any = false;
  *changed = false;
  if (!m->entry) return NULL;
  /* Breadth-first from the entry: a computation is visited after the
   * caller that owns it, and clones made on the way are appended to the
   * module, so they are visited too.  Each computation's instruction list is
   * walked once, to note its calling instructions; what they call is only
   * counted when some call is a control-flow one (only those are cloned). */
  comp_queue q = {0};
  use_counts uses = {0};
  for (int32_t k = 0; k < m->n_computations; k++) note_sites_in(&uses, m->computations[k]);
  if (!uses.control_flow) {
    use_counts_free(&uses);
    return NULL;
  }
  for (int32_t k = 0; k < m->n_computations; k++) count_calls_of(&uses, m->computations[k]);
  queue_push(&q, m->entry, m->n_computations);
  q.seen[m->entry->index] = 0;   /* the entry may be called too: queue it again then */
  while (q.head < q.tail) {
    hk_computation *c = q.v[q.head++];
    bool flatten = hk_exec_threads_include(threads, c);
    use_reserve(&uses, c->index);
    /* By index: cloning may grow (move) the per-computation arrays. */
    for (int32_t k = 0; k < uses.sites[c->index].n; k++) {
      hk_instr *i = uses.sites[c->index].v[k];
      if (flatten) any |= flatten_calls_of(&uses, i);
      for (int32_t j = 0; j < i->n_called; j++) queue_push(&q, i->called[j], m->n_computations);
    }
  }
  free(q.v);
  free(q.seen);
  use_counts_free(&uses);
  if (any) hk_module_sort_computations(m);
  *changed = any;
  return NULL;
}

static const hk_pass_vtable flatten_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "flatten-call-graph",
    .run = flatten_run, .destroy = stock_pass_destroy};

static hk_pass *flatten_create(const hk_option_values *opts, hk_registry *reg,
                               hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&flatten_vtable, sizeof(stock_pass), err);
}

const hk_pass_desc stock_flatten_call_graph_desc = {
    .size = sizeof(hk_pass_desc), .name = "flatten-call-graph",
    .summary = "clones computations so each control-flow callee has one caller",
    .options = NULL, .n_options = 0, .create = flatten_create};
