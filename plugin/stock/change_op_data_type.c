/* change_op_data_type.c - change-op-data-type: XLA's ChangeOpDataType.
 * Instructions of the chosen opcodes whose operands are all of a `from`
 * type compute in the paired `to` type instead: operands converted up, the
 * op re-created with a `to` result, the result converted back to the
 * original type.  Options: types ("s8->s32,bf16->f32") and ops ("dot"). */
#include <string.h>

#include "stock.h"

static bool change_type(hk_instr *i, const stock_type_pair *pairs, int n_pairs) {
  if (i->n_operands == 0 || i->n_called || !hk_shape_is_array(i->shape)) return false;
  hk_prim from = (hk_prim)i->operands[0]->shape->elem;
  for (int32_t k = 1; k < i->n_operands; k++)
    if (i->operands[k]->shape->elem != from) return false;
  hk_prim to = stock_type_pair_lookup(pairs, n_pairs, from);
  return to != HK_PRIM_INVALID && stock_widen(i, from, to);
}

static hk_status *codt_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                           bool *changed) {
  stock_pass *p = (stock_pass *)self;
  stock_type_pair pairs[STOCK_MAX_TYPE_PAIRS];
  int n_pairs = 0;
  HK_TRY(stock_parse_type_pairs("change-op-data-type", "types", p->str[0], pairs, &n_pairs));
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      if (stock_opcode_listed(p->str[1], (hk_opcode)i->opcode) && i->shape->elem != HK_TUPLE)
        *changed |= change_type(i, pairs, n_pairs);
    }
  }
  return NULL;
}

static const hk_pass_vtable codt_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "change-op-data-type",
    .run = codt_run, .destroy = stock_pass_destroy};

static hk_pass *codt_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  stock_type_pair pairs[STOCK_MAX_TYPE_PAIRS];
  int n = 0;
  const char *types = hk_opt_string(opts, "types");
  const char *ops = hk_opt_string(opts, "ops");
  if ((*err = stock_parse_type_pairs("change-op-data-type", "types", types, pairs, &n))) return NULL;
  if ((*err = stock_check_opcode_list("change-op-data-type", "ops", ops))) return NULL;
  hk_pass *pass = hk_pass_alloc(&codt_vtable, sizeof(stock_pass), err);
  if (pass) {
    ((stock_pass *)pass)->str[0] = strdup(types);
    ((stock_pass *)pass)->str[1] = strdup(ops);
  }
  return pass;
}

static const hk_option_decl codt_options[] = {
    {"types", HK_OPT_STRING, "", "from->to element types, e.g. \"s8->s32,bf16->f32\"", NULL},
    {"ops", HK_OPT_STRING, "dot", "comma-separated opcodes the rewrite applies to", NULL},
};

const hk_pass_desc stock_change_op_data_type_desc = {
    .size = sizeof(hk_pass_desc), .name = "change-op-data-type",
    .summary = "computes chosen ops in a wider element type",
    .options = codt_options, .n_options = 2, .create = codt_create};
