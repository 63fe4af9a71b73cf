/* verifier.c - hlo-verifier: XLA's HloVerifier as a pass; fails the
 * pipeline with the verifier's message (naming the instruction). */
#include "stock.h"

static hk_status *verifier_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                               bool *changed) {
  (void)threads;
  stock_pass *p = (stock_pass *)self;
  hk_verify_options o = hk_verify_defaults();
  o.layout_sensitive = p->flag[0];
  o.check_shardings = p->flag[1];
  *changed = false;
  return hk_verify_module(m, &o);
}

static const hk_pass_vtable verifier_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hlo-verifier",
    .run = verifier_run, .destroy = stock_pass_destroy};

static hk_pass *verifier_create(const hk_option_values *opts, hk_registry *reg,
                                hk_status **err) {
  (void)reg;
  hk_pass *pass = hk_pass_alloc(&verifier_vtable, sizeof(stock_pass), err);
  if (pass) {
    ((stock_pass *)pass)->flag[0] = hk_opt_bool(opts, "layout_sensitive");
    ((stock_pass *)pass)->flag[1] = hk_opt_bool(opts, "check_shardings");
  }
  return pass;
}

static const hk_option_decl verifier_options[] = {
    {"layout_sensitive", HK_OPT_BOOL, "false",
     "also compare layouts (entry computation layout vs. the entry)", NULL},
    {"check_shardings", HK_OPT_BOOL, "true",
     "check sharding ranks and device ids against the module config", NULL},
};

const hk_pass_desc stock_verifier_desc = {
    .size = sizeof(hk_pass_desc), .name = "hlo-verifier",
    .summary = "checks shapes, operands, called computations and shardings",
    .options = verifier_options, .n_options = 2, .create = verifier_create};
