/* call_inliner.c - call-inliner: XLA's CallInliner.  Every `call` is
 * replaced by a copy of its callee's body in the caller (parameters bound
 * to the call's operands); callees nothing calls any more are removed.
 * Calls inside inlined bodies are inlined too, until none is left. */
#include <stdlib.h>

#include "stock.h"

/* Counts call sites per computation (by index) over the module. */
static int32_t *count_call_sites(const hk_module *m) {
  int32_t *n = calloc((size_t)m->n_computations + 1, sizeof *n);
  if (!n) hk_out_of_memory();
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      for (int32_t j = 0; j < i->n_called; j++) n[i->called[j]->index]++;
  return n;
}

/* Copies callee's body into call's computation; returns the copy of the
 * callee's root.  Source instructions map to copies through scratch. */
static hk_instr *inline_body(hk_instr *call) {
  hk_computation *callee = call->called[0];
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(callee, &n);
  hk_instr **ops = NULL;
  int32_t ops_cap = 0;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k];
    if (s->opcode == HK_OP_PARAMETER) {
      s->scratch = call->operands[hk_instr_parameter_number(s)];
      continue;
    }
    if (s->n_operands > ops_cap) {
      ops_cap = s->n_operands * 2;
      ops = realloc(ops, (size_t)ops_cap * sizeof *ops);
      if (!ops) hk_out_of_memory();
    }
    for (int32_t j = 0; j < s->n_operands; j++) ops[j] = s->operands[j]->scratch;
    hk_instr *c = hk_instr_clone(call->parent, s, s->shape, s->n_operands, ops, s->name);
    if (c->attrs) {
      c->attrs->n_control_preds = c->attrs->n_control_succs = 0;
      c->attrs->control_preds = c->attrs->control_succs = NULL;
    }
    s->scratch = c;
  }
  for (int64_t k = 0; k < n; k++) {  /* control edges among the copies */
    hk_instr *s = order[k];
    if (!s->attrs || s->opcode == HK_OP_PARAMETER) continue;
    for (int32_t j = 0; j < s->attrs->n_control_preds; j++)
      if (s->attrs->control_preds[j]->opcode != HK_OP_PARAMETER)
        hk_instr_add_control_dep(s->attrs->control_preds[j]->scratch, s->scratch);
  }
  /* The call's own control predecessors now order the whole body. */
  if (call->attrs)
    for (int32_t j = 0; j < call->attrs->n_control_preds; j++)
      for (int64_t k = 0; k < n; k++)
        if (order[k]->opcode != HK_OP_PARAMETER)
          hk_instr_add_control_dep(call->attrs->control_preds[j], order[k]->scratch);
  hk_instr *root = callee->root->scratch;
  for (int64_t k = 0; k < n; k++) order[k]->scratch = NULL;
  free(ops);
  free(order);
  return root;
}

static bool inline_one_round(hk_module *m, const hk_exec_threads *threads, bool single_site) {
  int32_t *sites = count_call_sites(m);
  bool changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      if (i->opcode != HK_OP_CALL || i->n_called != 1) continue;
      if (i->attrs && i->attrs->is_composite) continue;
      if (single_site && sites[i->called[0]->index] > 1) continue;
      if (i->attrs && i->attrs->n_control_succs) continue;  /* would lose ordering */
      hk_instr *root = inline_body(i);
      hk_instr_replace_all_uses(i, root);
      hk_instr_remove_control_deps(i);
      hk_status *st = hk_instr_remove(i);
      if (st) hk_status_free(st);
      changed = true;
    }
  }
  free(sites);
  return changed;
}

static hk_status *call_inliner_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                                   bool *changed) {
  stock_pass *p = (stock_pass *)self;
  bool any = false;
  while (inline_one_round(m, threads, p->flag[0])) any = true;
  if (any) stock_remove_unreachable_computations(m);
  *changed = any;
  return NULL;
}

static const hk_pass_vtable call_inliner_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "call-inliner",
    .run = call_inliner_run, .destroy = stock_pass_destroy};

static hk_pass *call_inliner_create(const hk_option_values *opts, hk_registry *reg,
                                    hk_status **err) {
  (void)reg;
  hk_pass *pass = hk_pass_alloc(&call_inliner_vtable, sizeof(stock_pass), err);
  if (pass) ((stock_pass *)pass)->flag[0] = hk_opt_bool(opts, "single_call_site");
  return pass;
}

static const hk_option_decl call_inliner_options[] = {
    {"single_call_site", HK_OPT_BOOL, "false",
     "only inline computations called from exactly one place", NULL},
};

const hk_pass_desc stock_call_inliner_desc = {
    .size = sizeof(hk_pass_desc), .name = "call-inliner",
    .summary = "inlines call instructions into their callers",
    .options = call_inliner_options, .n_options = 1, .create = call_inliner_create};
