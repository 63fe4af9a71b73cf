/* comparison_expander.c - comparison-expander: XLA's ComparisonExpander.
 * A floating-point compare with type=TOTALORDER becomes an integer compare
 * of the values' bit patterns, remapped so that signed-integer order is the
 * IEEE total order (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN):
 *     i = bitcast-convert(x) to sN;  key = i < 0 ? i ^ INT_MAX : i
 * Non-negative floats keep their pattern; negative ones have every bit but
 * the sign flipped, which reverses their order as total order wants. */
#include "stock.h"

static hk_prim int_of_width(int bits) {
  switch (bits) {
    case 8: return HK_S8;
    case 16: return HK_S16;
    case 32: return HK_S32;
    case 64: return HK_S64;
    default: return HK_PRIM_INVALID;
  }
}

/* The total-order key of float value x, as an sN array. */
static hk_instr *total_order_key(hk_instr *cmp, hk_instr *x, hk_prim it) {
  hk_module *m = cmp->parent->module;
  const hk_shape *is = hk_shape_with_elem(m, x->shape, it);
  const hk_shape *ps = hk_shape_with_elem(m, x->shape, HK_PRED);
  int bits = hk_prim_bits(it);
  int64_t max = bits == 64 ? INT64_MAX : (int64_t)((1ull << (bits - 1)) - 1);
  hk_instr *i = hk_instr_new_before(cmp, HK_OP_BITCAST_CONVERT, is, 1, &x, NULL);
  hk_instr *zero = hk_build_broadcast_scalar(cmp->parent, cmp, hk_build_constant_i64(cmp->parent, cmp, it, 0), is);
  hk_instr *lt_ops[2] = {i, zero};
  hk_instr *neg = hk_instr_new_before(cmp, HK_OP_COMPARE, ps, 2, lt_ops, NULL);
  hk_instr_attrs(neg)->cmp_dir = HK_CMP_LT;
  hk_instr_attrs(neg)->cmp_type = HK_CMPT_SIGNED;
  hk_instr *xor_ops[2] = {i, hk_build_broadcast_scalar(cmp->parent, cmp, hk_build_constant_i64(cmp->parent, cmp, it, max), is)};
  hk_instr *flipped = hk_instr_new_before(cmp, HK_OP_XOR, is, 2, xor_ops, NULL);
  hk_instr *sel_ops[3] = {neg, flipped, i};
  return hk_instr_new_before(cmp, HK_OP_SELECT, is, 3, sel_ops, NULL);
}

static bool expand(hk_instr *cmp) {
  if (cmp->opcode != HK_OP_COMPARE || !cmp->attrs || cmp->attrs->cmp_type != HK_CMPT_TOTALORDER)
    return false;
  hk_prim ft = (hk_prim)cmp->operands[0]->shape->elem;
  if (!hk_prim_is_float(ft)) return false;
  hk_prim it = int_of_width(hk_prim_bits(ft));
  if (it == HK_PRIM_INVALID) return false;
  hk_instr *ops[2] = {total_order_key(cmp, cmp->operands[0], it),
                      total_order_key(cmp, cmp->operands[1], it)};
  hk_instr *r = hk_instr_new_before(cmp, HK_OP_COMPARE, cmp->shape, 2, ops, NULL);
  hk_instr_attrs(r)->cmp_dir = cmp->attrs->cmp_dir;
  hk_instr_attrs(r)->cmp_type = HK_CMPT_SIGNED;
  hk_instr_set_sharding(r, cmp->sharding);
  hk_instr_attrs(r)->metadata = cmp->attrs->metadata;
  hk_instr_replace_all_uses(cmp, r);
  if (stock_is_removable(cmp)) {
    hk_status *st = hk_instr_remove(cmp);
    if (st) hk_status_free(st);
  }
  return true;
}

static hk_status *cmp_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  (void)self;
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      *changed |= expand(i);
    }
  }
  return NULL;
}

static const hk_pass_vtable cmp_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "comparison-expander",
    .run = cmp_run, .destroy = stock_pass_destroy};

static hk_pass *cmp_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&cmp_vtable, sizeof(stock_pass), err);
}

const hk_pass_desc stock_comparison_expander_desc = {
    .size = sizeof(hk_pass_desc), .name = "comparison-expander",
    .summary = "lowers total-order float compares to integer compares",
    .options = NULL, .n_options = 0, .create = cmp_create};
