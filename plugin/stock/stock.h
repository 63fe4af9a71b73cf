/* stock.h - shared pieces of the stock passes plugin: the pass descriptors
 * it registers and the small IR utilities several passes use. */
#ifndef HLOKIT_STOCK_H
#define HLOKIT_STOCK_H

#include "hlokit/hlokit.h"

/* A stock pass: the vtable plus the options it was created with.  Most
 * stock passes need a handful of flags and numbers, so one struct serves
 * them all instead of a struct per pass. */
typedef struct stock_pass {
  hk_pass base;
  bool flag[4];
  int64_t num[2];
  const char *str[2];   /* strdup'ed, freed by stock_pass_destroy */
} stock_pass;

hk_pass *stock_pass_new(const hk_pass_vtable *vt, hk_status **err);
void stock_pass_destroy(hk_pass *self);

/* Deep-copies computation src (and nothing it calls) into the same module
 * under a unique name derived from src's; instruction names get a
 * ".clone" suffix made unique. */
hk_computation *stock_clone_computation(hk_computation *src);
/* Removes computations not reachable from the entry through called
 * computations.  Returns true when any was removed. */
bool stock_remove_unreachable_computations(hk_module *m);
/* Removes i and then every operand that became dead (no users, not root,
 * no side effect, not a parameter, no control edges). */
void stock_remove_with_dead_operands(hk_instr *i);
/* True when i can be removed once it has no users. */
bool stock_is_removable(const hk_instr *i);

extern const hk_pass_desc stock_verifier_desc;
extern const hk_pass_desc stock_dce_desc;
extern const hk_pass_desc stock_tuple_simplifier_desc;
extern const hk_pass_desc stock_flatten_call_graph_desc;
extern const hk_pass_desc stock_cse_desc;
extern const hk_pass_desc stock_call_inliner_desc;
extern const hk_pass_desc stock_rng_expander_desc;

#endif
