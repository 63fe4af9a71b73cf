/* float_normalization.c - float-normalization: XLA's FloatNormalization.
 * Ops the target cannot run in the low-precision type (bf16 by default)
 * compute in f32 instead: low-precision operands converted up, the result
 * converted back.  Which ops are unsupported is an option (the target's
 * FloatSupport in XLA); by default the ones a CPU back end runs in f32:
 * dot, convolution and the transcendental elementwise ops. */
#include <string.h>

#include "stock.h"

static hk_status *fn_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                         bool *changed) {
  stock_pass *p = (stock_pass *)self;
  hk_prim low = hk_prim_from_name(p->str[1], strlen(p->str[1]));
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      if (stock_opcode_listed(p->str[0], (hk_opcode)i->opcode)) *changed |= stock_widen(i, low, HK_F32);
    }
  }
  return NULL;
}

static const hk_pass_vtable fn_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "float-normalization",
    .run = fn_run, .destroy = stock_pass_destroy};

static hk_pass *fn_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  const char *ops = hk_opt_string(opts, "unsupported_ops");
  const char *low = hk_opt_string(opts, "low_precision_type");
  hk_prim lt = hk_prim_from_name(low, strlen(low));
  if (!hk_prim_is_float(lt) || hk_prim_bits(lt) >= 32) {
    *err = hk_error(HK_INVALID_ARGUMENT,
                    "float-normalization: option low_precision_type: expected a float type "
                    "narrower than f32 (bf16, f16, f8...), got \"%s\"", low);
    return NULL;
  }
  if ((*err = stock_check_opcode_list("float-normalization", "unsupported_ops", ops))) return NULL;
  hk_pass *pass = hk_pass_alloc(&fn_vtable, sizeof(stock_pass), err);
  if (pass) {
    ((stock_pass *)pass)->str[0] = strdup(ops);
    ((stock_pass *)pass)->str[1] = strdup(low);
  }
  return pass;
}

static const hk_option_decl fn_options[] = {
    {"unsupported_ops", HK_OPT_STRING,
     "dot,convolution,exponential,log,tanh,logistic,sqrt,rsqrt,power,divide",
     "comma-separated opcodes the target cannot compute in the low-precision type", NULL},
    {"low_precision_type", HK_OPT_STRING, "bf16", "the low-precision float type", NULL},
};

const hk_pass_desc stock_float_normalization_desc = {
    .size = sizeof(hk_pass_desc), .name = "float-normalization",
    .summary = "computes ops the target cannot run in bf16 in f32",
    .options = fn_options, .n_options = 2, .create = fn_create};
