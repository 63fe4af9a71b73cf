/* all_reduce_promotion.c - all-reduce-promotion: XLA's AllReducePromotion.
 * All-reduces over small integer types (which some collective libraries
 * cannot reduce) run in a wider type: the operand is converted up, the
 * reduction computation is rebuilt for the wider type, and the result is
 * converted back.  The pairs are an option ("u8->u32,s8->s32,..."). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stock.h"

/* A copy of reduction `red` (a single binary op on its two parameters)
 * computing in type t; NULL when red is not of that form. */
static hk_computation *reduction_in_type(hk_module *m, const hk_computation *red, hk_prim t) {
  const hk_instr *root = red->root;
  if (!root || root->n_operands != 2 || red->n_params != 2) return NULL;
  for (int k = 0; k < 2; k++)
    if (root->operands[k]->opcode != HK_OP_PARAMETER) return NULL;
  char name[256];
  snprintf(name, sizeof name, "%s.promoted", red->name);
  hk_computation *c = hk_computation_new(m, name);
  const hk_shape *s = hk_shape_scalar(m, t);
  hk_instr *params[2];
  for (int k = 0; k < 2; k++) {
    params[k] = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, k ? "y" : "x");
    hk_instr_attrs(params[k])->parameter_number = k;
    hk_computation_register_param(c, params[k]);
  }
  hk_instr *ops[2] = {params[hk_instr_parameter_number(root->operands[0])],
                      params[hk_instr_parameter_number(root->operands[1])]};
  hk_instr *r = hk_instr_new(c, (hk_opcode)root->opcode, s, 2, ops, NULL);
  hk_computation_set_root(c, r);
  return c;
}

static bool promote(hk_instr *ar, const stock_type_pair *pairs, int n_pairs) {
  if (ar->opcode != HK_OP_ALL_REDUCE || ar->n_operands != 1 || ar->n_called != 1 ||
      !hk_shape_is_array(ar->shape))
    return false;
  hk_prim to = stock_type_pair_lookup(pairs, n_pairs, (hk_prim)ar->shape->elem);
  if (to == HK_PRIM_INVALID) return false;
  hk_module *m = ar->parent->module;
  hk_computation *red = reduction_in_type(m, ar->called[0], to);
  if (!red) return false;
  hk_instr *wide_in = stock_convert_before(ar, ar->operands[0], to);
  hk_instr *wide = hk_instr_clone(ar->parent, ar, hk_shape_with_elem(m, ar->shape, to), 1,
                                  &wide_in, NULL);
  hk_instr_set_called(wide, 1, &red);
  hk_instr *back = hk_instr_new(ar->parent, HK_OP_CONVERT, ar->shape, 1, &wide, NULL);
  hk_instr_set_sharding(back, ar->sharding);
  hk_instr_replace_all_uses(ar, back);
  hk_instr_remove_control_deps(ar);
  hk_status *st = hk_instr_remove(ar);
  if (st) hk_status_free(st);
  return true;
}

static hk_status *arp_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  stock_pass *p = (stock_pass *)self;
  stock_type_pair pairs[STOCK_MAX_TYPE_PAIRS];
  int n_pairs = 0;
  HK_TRY(stock_parse_type_pairs("all-reduce-promotion", "types", p->str[0], pairs, &n_pairs));
  *changed = false;
  int32_t n_comps = m->n_computations;  /* promoted reductions are appended */
  for (int32_t k = 0; k < n_comps; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      *changed |= promote(i, pairs, n_pairs);
    }
  }
  if (*changed) stock_remove_unreachable_computations(m);
  return NULL;
}

static const hk_pass_vtable arp_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "all-reduce-promotion",
    .run = arp_run, .destroy = stock_pass_destroy};

static hk_pass *arp_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  stock_type_pair pairs[STOCK_MAX_TYPE_PAIRS];
  int n = 0;
  const char *types = hk_opt_string(opts, "types");
  if ((*err = stock_parse_type_pairs("all-reduce-promotion", "types", types, pairs, &n))) return NULL;
  hk_pass *pass = hk_pass_alloc(&arp_vtable, sizeof(stock_pass), err);
  if (pass) ((stock_pass *)pass)->str[0] = strdup(types);
  return pass;
}

static const hk_option_decl arp_options[] = {
    {"types", HK_OPT_STRING, "u8->u32,s8->s32,u16->u32,s16->s32",
     "element types to promote, as from->to pairs", NULL},
};

const hk_pass_desc stock_all_reduce_promotion_desc = {
    .size = sizeof(hk_pass_desc), .name = "all-reduce-promotion",
    .summary = "runs all-reduces over small integer types in a wider type",
    .options = arp_options, .n_options = 1, .create = arp_create};
