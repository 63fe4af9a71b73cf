/* analysis.h - the verifier, shape inference and the call graph.
 *
 * Every verifier failure names the instruction (and computation) and what is
 * wrong, e.g. "instruction 'add.3' in computation 'main': add operands have
 * incompatible shapes f32[2] and f32[3]".  The rules are XLA's HloVerifier
 * (default options: layout-insensitive, no mixed precision) and
 * ShapeInference: operand counts (HloOpcodeArity), called-computation
 * signatures (reducers, comparators, while/conditional/call/fusion/async),
 * parameter numbering, unique names, acyclic computations, declared shape
 * vs. inferred shape (layout and dynamic-ness ignored), replica groups and
 * source-target pairs, start/done pairing, sharding validity and the entry
 * computation layout. */
#ifndef HLOKIT_ANALYSIS_H
#define HLOKIT_ANALYSIS_H

#include "export.h"

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

typedef struct hk_verify_options {
  bool check_shapes;        /* shape inference agrees with declared shapes */
  bool check_shardings;     /* tile rank, device ids in range, while/conditional
                               shardings consistent.  As in XLA, device ids are
                               range-checked against num_partitions only when
                               the module uses SPMD partitioning with
                               num_partitions > 1. */
  bool layout_sensitive;    /* entry layout vs. entry computation compares
                               minor_to_major too (else shapes compatible) */
} hk_verify_options;

/* check_shapes and check_shardings on, layout-insensitive. */
hk_verify_options hk_verify_defaults(void);
/* opts may be NULL (defaults).  The module is not changed, except that
 * inferred shapes are interned into it. */
hk_status *hk_verify_module(const hk_module *m, const hk_verify_options *opts);

/* Shape inference: the shape XLA would give instruction i from its
 * operands and attributes (layout-free; interned in m).  Where the shape
 * is itself an attribute (parameter, constant, custom-call, iota, rng,
 * rng-bit-generator, reshape, broadcast, bitcast) the declared shape is
 * checked for consistency and returned; dot/convolution results take the
 * declared element type (XLA's preferred_element_type), convert its target
 * type.  Errors name the instruction and its computation. */
hk_status *hk_infer_shape(hk_module *m, const hk_instr *i, const hk_shape **out);

/* ---- call graph ---------------------------------------------------------- */
typedef enum hk_call_context {
  HK_CALL_NONE = 0,
  HK_CALL_CONTROL_FLOW = 1,   /* while, conditional, call, async */
  HK_CALL_EMBEDDED = 2,       /* map, reduce, sort, fusion, all-reduce, ... */
  HK_CALL_BOTH = 3,
} hk_call_context;

typedef struct hk_call_site {
  hk_instr *instr;            /* the calling instruction */
  hk_computation *callee;
  hk_call_context context;
} hk_call_site;

typedef struct hk_call_graph_node {
  hk_computation *comp;
  int32_t n_callers;          /* call sites calling this computation */
  hk_call_site *callers;
  int32_t n_callees;
  hk_call_site *callees;
  uint8_t context;            /* hk_call_context, union over callers */
} hk_call_graph_node;

typedef struct hk_call_graph {
  int32_t n_nodes;
  hk_call_graph_node *nodes;  /* indexed by computation->index */
} hk_call_graph;

hk_call_graph *hk_call_graph_build(hk_module *m);
void hk_call_graph_free(hk_call_graph *g);
hk_call_graph_node *hk_call_graph_node_of(hk_call_graph *g, const hk_computation *c);
/* XLA's CallGraph::IsFlattened: every computation called from a control-
 * flow context has exactly one caller site and is not also called in an
 * embedded context. */
bool hk_call_graph_is_flattened(const hk_call_graph *g);
hk_call_context hk_opcode_call_context(hk_opcode op);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
