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

/* Number of call sites of each computation, by computation->index; kept
 * up to date as clones are made. */
typedef struct use_counts {
  int32_t *n;
  size_t cap;
} use_counts;

static int32_t *use_slot(use_counts *u, int32_t index) {
  if ((size_t)index >= u->cap) {
    size_t nc = (size_t)index * 2 + 16;
    u->n = realloc(u->n, nc * sizeof *u->n);
    if (!u->n) abort();
    for (size_t s = u->cap; s < nc; s++) u->n[s] = 0;
    u->cap = nc;
  }
  return &u->n[index];
}

static void count_calls_in(use_counts *u, const hk_computation *c, int32_t delta) {
  for (const hk_instr *i = c->first; i; i = i->next)
    for (int32_t j = 0; j < i->n_called; j++) *use_slot(u, i->called[j]->index) += delta;
}

/* Gives every control-flow call in computation `caller` its own callee
 * when the callee is shared.  Returns true if anything was cloned. */
static bool flatten_calls_in(use_counts *u, hk_computation *caller) {
  bool changed = false;
  for (hk_instr *i = caller->first; i; i = i->next) {
    if (!is_control_flow((hk_opcode)i->opcode)) continue;
    for (int32_t j = 0; j < i->n_called; j++) {
      hk_computation *callee = i->called[j];
      if (*use_slot(u, callee->index) <= 1) continue;
      hk_computation *copy = stock_clone_computation(callee);
      i->called[j] = copy;
      (*use_slot(u, callee->index))--;
      *use_slot(u, copy->index) = 1;
      count_calls_in(u, copy, +1);
      changed = true;
    }
  }
  return changed;
}

static hk_status *flatten_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                              bool *changed) {
  (void)self;
  bool any = false;
  if (!m->entry) {
    *changed = false;
    return NULL;
  }
  /* Breadth-first from the entry: a computation is visited after the
   * caller that owns it, and clones made on the way are appended to the
   * module, so they are visited too. */
  hk_computation **queue = malloc(sizeof *queue * 16);
  size_t cap = 16, head = 0, tail = 0;
  char *seen = NULL;
  size_t seen_cap = 0;
  if (!queue) abort();
  use_counts uses = {NULL, 0};
  for (int32_t k = 0; k < m->n_computations; k++) count_calls_in(&uses, m->computations[k], +1);
  queue[tail++] = m->entry;
  while (head < tail) {
    hk_computation *c = queue[head++];
    if (hk_exec_threads_include(threads, c)) any |= flatten_calls_in(&uses, c);
    for (hk_instr *i = c->first; i; i = i->next)
      for (int32_t j = 0; j < i->n_called; j++) {
        hk_computation *callee = i->called[j];
        if ((size_t)callee->index >= seen_cap) {
          size_t nc = (size_t)m->n_computations * 2 + 16;
          seen = realloc(seen, nc);
          if (!seen) abort();
          for (size_t s = seen_cap; s < nc; s++) seen[s] = 0;
          seen_cap = nc;
        }
        if (seen[callee->index]) continue;
        seen[callee->index] = 1;
        if (tail == cap) {
          cap *= 2;
          queue = realloc(queue, cap * sizeof *queue);
          if (!queue) abort();
        }
        queue[tail++] = callee;
      }
  }
  free(queue);
  free(seen);
  free(uses.n);
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
  return stock_pass_new(&flatten_vtable, err);
}

const hk_pass_desc stock_flatten_call_graph_desc = {
    .size = sizeof(hk_pass_desc), .name = "flatten-call-graph",
    .summary = "clones computations so each control-flow callee has one caller",
    .options = NULL, .n_options = 0, .create = flatten_create};
