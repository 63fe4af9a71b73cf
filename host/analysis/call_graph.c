/* call_graph.c - the call graph of a module: call sites, call contexts and XLA's flattened check. */
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

hk_call_context hk_opcode_call_context(hk_opcode op) {
  switch (op) {
    case HK_OP_CALL: case HK_OP_CONDITIONAL: case HK_OP_WHILE:
    case HK_OP_ASYNC_START: case HK_OP_ASYNC_UPDATE: case HK_OP_ASYNC_DONE:
      return HK_CALL_CONTROL_FLOW;
    case HK_OP_ALL_REDUCE: case HK_OP_REDUCE_SCATTER: case HK_OP_ALL_REDUCE_START:
    case HK_OP_MAP: case HK_OP_REDUCE: case HK_OP_REDUCE_WINDOW: case HK_OP_SCATTER:
    case HK_OP_SELECT_AND_SCATTER: case HK_OP_SORT: case HK_OP_TOPK:
    case HK_OP_FUSION: case HK_OP_CUSTOM_CALL:
      return HK_CALL_EMBEDDED;
    default:
      return HK_CALL_NONE;
  }
}

hk_call_graph_node *hk_call_graph_node_of(hk_call_graph *g, const hk_computation *c) {
  if (!g || !c) return NULL;
  if (c->index >= 0 && c->index < g->n_nodes && g->nodes[c->index].comp == c)
    return &g->nodes[c->index];
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].comp == c) return &g->nodes[k];
  return NULL;
}

/* A node's call sites, from its computation's calling instructions (one
 * walk of its list): one site per called computation (XLA records a caller
 * call site per callee, so a computation named twice by one conditional
 * has two). */
static bool record_callees(hk_call_graph_node *n) {
  int64_t n_calls = 0;
  hk_instr **calls = hk_computation_calling_instrs(n->comp, &n_calls);
  size_t n_sites = 0;
  for (int64_t r = 0; r < n_calls; r++) n_sites += (size_t)calls[r]->n_called;
  n->callees = n_sites < INT32_MAX ? malloc((n_sites + 1) * sizeof(hk_call_site)) : NULL;
  bool ok = n->callees != NULL;
  for (int64_t r = 0; r < n_calls && ok; r++) {
    hk_instr *i = calls[r];
    hk_call_context ctx = hk_opcode_call_context((hk_opcode)i->opcode);
    for (int j = 0; j < i->n_called; j++)
      n->callees[n->n_callees++] = (hk_call_site){i, i->called[j], ctx};
  }
  free(calls);
  return ok;
}

/* Every callee's callers, in the order of the callers' call sites. */
static bool record_callers(hk_call_graph *g) {
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t s = 0; s < g->nodes[k].n_callees; s++) {
      hk_call_graph_node *callee = hk_call_graph_node_of(g, g->nodes[k].callees[s].callee);
      if (callee) callee->n_callers++;
    }
  for (int32_t k = 0; k < g->n_nodes; k++) {
    hk_call_graph_node *n = &g->nodes[k];
    n->callers = calloc((size_t)n->n_callers + 1, sizeof(hk_call_site));
    if (!n->callers) return false;
    n->n_callers = 0;
  }
  for (int32_t k = 0; k < g->n_nodes; k++)
    for (int32_t s = 0; s < g->nodes[k].n_callees; s++) {
      const hk_call_site *site = &g->nodes[k].callees[s];
      hk_call_graph_node *callee = hk_call_graph_node_of(g, site->callee);
      if (callee) callee->callers[callee->n_callers++] = *site;
    }
  return true;
}

static uint8_t union_context(uint8_t a, uint8_t b) {
  if (a == HK_CALL_NONE) return b;
  if (b == HK_CALL_NONE || a == b) return a;
  return HK_CALL_BOTH;
}

/* XLA's SetCallContexts: computations nobody calls run in a control-flow
 * context; embedded call sites make their callees embedded, control-flow
 * call sites pass the caller's context on. */
static bool set_contexts(hk_call_graph *g) {
  int32_t *work = malloc(sizeof(int32_t) * ((size_t)g->n_nodes * 4 + 4));
  if (!work) return false;
  int64_t cap = (int64_t)g->n_nodes * 4 + 4, head = 0, tail = 0;
  for (int32_t k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].n_callers == 0) {
      g->nodes[k].context = HK_CALL_CONTROL_FLOW;
      work[tail++ % cap] = k;
    }
  while (head < tail) {
    hk_call_graph_node *n = &g->nodes[work[head++ % cap]];
    for (int32_t s = 0; s < n->n_callees; s++) {
      hk_call_site *site = &n->callees[s];
      hk_call_graph_node *callee = hk_call_graph_node_of(g, site->callee);
      if (!callee) continue;
      uint8_t add = site->context == HK_CALL_EMBEDDED ? HK_CALL_EMBEDDED : n->context;
      uint8_t nc = union_context(add, callee->context);
      if (nc != callee->context) {
        callee->context = nc;
        if (tail - head < cap) work[tail++ % cap] = (int32_t)(callee - g->nodes);
      }
    }
  }
  free(work);
  return true;
}

hk_call_graph *hk_call_graph_build(hk_module *m) {
  hk_call_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->n_nodes = m ? m->n_computations : 0;
  g->nodes = calloc((size_t)g->n_nodes + 1, sizeof(hk_call_graph_node));
  if (!g->nodes) {
    free(g);
    return NULL;
  }
  for (int32_t k = 0; k < g->n_nodes; k++) g->nodes[k].comp = m->computations[k];
  bool ok = true;
  for (int32_t k = 0; k < g->n_nodes && ok; k++) ok = record_callees(&g->nodes[k]);
  if (!ok || !record_callers(g) || !set_contexts(g)) {
    hk_call_graph_free(g);
    return NULL;
  }
  return g;
}

void hk_call_graph_free(hk_call_graph *g) {
  if (!g) return;
  for (int32_t k = 0; k < g->n_nodes; k++) {
    free(g->nodes[k].callers);
    free(g->nodes[k].callees);
  }
  free(g->nodes);
  free(g);
}

static bool is_async_computation(const hk_call_graph_node *n) {
  for (int32_t s = 0; s < n->n_callers; s++) {
    hk_opcode op = (hk_opcode)n->callers[s].instr->opcode;
    if (op == HK_OP_ASYNC_START || op == HK_OP_ASYNC_UPDATE || op == HK_OP_ASYNC_DONE)
      return true;
  }
  return false;
}

bool hk_call_graph_is_flattened(const hk_call_graph *g) {
  for (int32_t k = 0; k < g->n_nodes; k++) {
    const hk_call_graph_node *n = &g->nodes[k];
    if (n->context == HK_CALL_BOTH) return false;
    if (n->context == HK_CALL_CONTROL_FLOW && n->n_callers > 1 && !is_async_computation(n))
      return false;
  }
  return true;
}
