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

void stock_pass_destroy(hk_pass *self);

/* Buffers stock_post_order reuses across the computations of one run. */
typedef struct stock_order_ws {
  uint32_t *pos_by_id;   /* order position by instruction id (checked, never trusted) */
  size_t n_ids;
} stock_order_ws;
void stock_order_ws_free(stock_order_ws *w);
/* Makes room in w->pos_by_id for ids below n_ids. */
void stock_order_ws_reserve(stock_order_ws *w, int64_t n_ids);
/* hk_computation_post_order(c, n) (a malloc'ed array), with w->pos_by_id
 * sized for the module's ids.  The caller's walk records positions itself
 * (stock_order_note) as it reaches them, which costs no read of an
 * instruction the walk does not make anyway; entries of ids not noted yet
 * are stale, so check order[pos] before trusting one.  w starts zeroed
 * (list_order.c). */
hk_instr **stock_post_order(const hk_computation *c, stock_order_ws *w, int64_t *n);
/* Records that i is at position pos of the order (ids below zero are not
 * recorded; ids beyond the module's next id, set from outside, grow the
 * table). */
static inline void stock_order_note(stock_order_ws *w, const hk_instr *i, int64_t pos) {
  if (i->id < 0) return;
  if ((size_t)i->id >= w->n_ids) stock_order_ws_reserve(w, i->id + 1);
  w->pos_by_id[i->id] = (uint32_t)pos;
}

/* Deep-copies computation src (and nothing it calls) into the same module
 * under a unique name derived from src's; instruction names get a
 * ".clone" suffix made unique. */
hk_computation *stock_clone_computation(hk_computation *src);
/* Removes computations not reachable from the entry through called
 * computations.  Returns true when any was removed. */
bool stock_remove_unreachable_computations(hk_module *m);
/* The computations one computation calls, in call-site order. */
typedef struct stock_callees {
  hk_computation **v;
  int32_t n, cap;
} stock_callees;
/* The same, reading computation c's callees from calls[c->index] (indexed
 * by computation index) instead of walking its instructions again. */
bool stock_remove_unreachable_by_callees(hk_module *m, const stock_callees *calls);

/* Removes i and then every operand that became dead (no users, not root,
 * no side effect, not a parameter, no control edges). */
void stock_remove_with_dead_operands(hk_instr *i);
/* True when i can be removed once it has no users. */
bool stock_is_removable(const hk_instr *i);

/* A "from->to" element-type rewrite, parsed from "bf16->f32,s8->s32". */
typedef struct stock_type_pair {
  hk_prim from, to;
} stock_type_pair;
#define STOCK_MAX_TYPE_PAIRS 16
/* Parses a pair list; errors name the pass and option. */
hk_status *stock_parse_type_pairs(const char *pass, const char *option, const char *text,
                                  stock_type_pair *out, int *n);
/* The `to` type for `from`, or HK_PRIM_INVALID. */
hk_prim stock_type_pair_lookup(const stock_type_pair *pairs, int n, hk_prim from);
/* convert(x) to element type t inserted before `before` (x itself if it
 * already has that type). */
hk_instr *stock_convert_before(hk_instr *before, hk_instr *x, hk_prim t);

/* Recomputes i in type `to` where it uses type `from`: operands of type
 * `from` converted to `to`, a result of type `from` computed as `to` and
 * converted back; i is replaced and removed.  False (nothing done) for
 * tuple-shaped ops, ops calling computations, or when nothing is `from`. */
bool stock_widen(hk_instr *i, hk_prim from, hk_prim to);

/* Whether op is named in a comma-separated opcode list ("dot,convolution"). */
bool stock_opcode_listed(const char *list, hk_opcode op);
/* Checks every name of such a list is an opcode; errors name pass and option. */
hk_status *stock_check_opcode_list(const char *pass, const char *option, const char *list);

extern const hk_pass_desc stock_verifier_desc;
extern const hk_pass_desc stock_dce_desc;
extern const hk_pass_desc stock_tuple_simplifier_desc;
extern const hk_pass_desc stock_flatten_call_graph_desc;
extern const hk_pass_desc stock_cse_desc;
extern const hk_pass_desc stock_call_inliner_desc;
extern const hk_pass_desc stock_rng_expander_desc;
extern const hk_pass_desc stock_comparison_expander_desc;
extern const hk_pass_desc stock_all_reduce_promotion_desc;
extern const hk_pass_desc stock_float_normalization_desc;
extern const hk_pass_desc stock_dynamic_padder_desc;
extern const hk_pass_desc stock_change_op_data_type_desc;

#endif
