/* analysis_internal.h - helpers shared by shape inference, the verifier and the call graph. */
#ifndef HK_ANALYSIS_INTERNAL_H
#define HK_ANALYSIS_INTERNAL_H

#include "hlokit/analysis.h"
#include "hlokit/text.h"

/* One shape-inference request: the module that interns results, the
 * instruction, and whether the verifier asks (then quantities XLA's verifier
 * derives from the declared shape, such as an all-gather's shard count, are
 * taken from it the same way). */
typedef struct ana_ctx {
  hk_module *m;
  const hk_instr *i;
  bool for_verifier;
} ana_ctx;

/* An error naming the instruction and its computation:
 * "instruction 'add.3' in computation 'main': MESSAGE". */
hk_status *ana_fail(const hk_instr *i, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
hk_status *ana_fail_code(hk_code code, const hk_instr *i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A shape as text for messages, in a caller buffer (always NUL-terminated). */
const char *ana_shape_str(const hk_shape *s, char *buf, size_t cap);

/* Compatible as XLA's ShapeUtil::Compatible: layout and dynamic-ness
 * ignored, element types equal. */
bool ana_compatible(const hk_shape *a, const hk_shape *b);
/* As ana_compatible, but any two floating types count as equal. */
bool ana_compatible_ignoring_fp(const hk_shape *a, const hk_shape *b);
/* Same dimensions, element type ignored (arrays only). */
bool ana_same_dims(const hk_shape *a, const hk_shape *b);
bool ana_is_scalar(const hk_shape *s);
bool ana_same_elem_ignoring_fp(hk_prim a, hk_prim b);
/* XLA's primitive_util::HigherPrecisionType. */
hk_prim ana_higher_precision(hk_prim a, hk_prim b);

/* Layout-free interned array shape; dyn may be NULL. */
const hk_shape *ana_array(hk_module *m, hk_prim elem, int rank,
                          const int64_t *dims, const bool *dyn);
const hk_shape *ana_scalar(hk_module *m, hk_prim elem);
const hk_shape *ana_tuple(hk_module *m, int n, const hk_shape *const *elems);
/* Operand shapes as one shape: the shape itself for one, a tuple for more. */
const hk_shape *ana_single_or_tuple(hk_module *m, int n,
                                    const hk_shape *const *elems);

/* Copies a shape's dims into out (safe for rank 0, where dims may be NULL). */
static inline void ana_copy_dims(int64_t *out, const hk_shape *s) {
  for (int d = 0; d < s->rank; d++) out[d] = s->dims[d];
}

/* The value of a verbatim attribute (name=value), or NULL. */
const char *ana_raw_attr(const hk_instr *i, const char *name);
/* A verbatim "{a,b}" list attribute read into out (at most cap); the count. */
int ana_raw_dims(const hk_instr *i, const char *name, int64_t *out, int cap);

/* The lhs dims a ragged-dot's group_sizes of rank > 1 is indexed by, in
 * order, before its group dim (XLA's [b..., x..., g]): the lhs batch dims
 * (in batch mode only those listed before the ragged dim), then the
 * contracting dims listed before a contracting ragged dim, or the
 * non-contracting dims outer to a non-contracting one; the count. */
int ana_ragged_dot_prefix(const hk_dot_dnums *dn, int64_t ragged, int lhs_rank, int64_t *dims);

/* Number of operands XLA fixes for an opcode, or -1 when variadic. */
int ana_opcode_arity(hk_opcode op);

/* Shape inference with the verifier's conventions (see ana_ctx). */
hk_status *ana_infer(ana_ctx *c, const hk_shape **out);

/* Per-family inference entry points (shape_infer_*.c).  Each returns NULL
 * when the opcode is not its family's and leaves *handled false. */
hk_status *ana_infer_elementwise(ana_ctx *c, bool *handled, const hk_shape **out);
hk_status *ana_infer_data(ana_ctx *c, bool *handled, const hk_shape **out);
hk_status *ana_infer_reduce(ana_ctx *c, bool *handled, const hk_shape **out);
hk_status *ana_infer_contract(ana_ctx *c, bool *handled, const hk_shape **out);
hk_status *ana_infer_control(ana_ctx *c, bool *handled, const hk_shape **out);
hk_status *ana_infer_collective(ana_ctx *c, bool *handled, const hk_shape **out);

/* XLA's VerifyReducerShape: `comp` reduces n values whose inits have shapes
 * init[k] and inputs element types in_elem[k].  On success *acc gets the
 * accumulator element types (n entries). */
hk_status *ana_check_reducer(const hk_instr *i, const hk_computation *comp,
                             int n, const hk_shape *const *init,
                             const hk_prim *in_elem, hk_prim *acc);

/* XLA's window output size for one dimension (InferWindowOutputShape). */
hk_status *ana_window_output(const hk_instr *i, const hk_window *w, int rank,
                             const int64_t *in_dims, int64_t *out_dims);

/* The computation an async op wraps (following the operand chain back to
 * async-start if the op itself names none); NULL if none is found. */
hk_computation *ana_async_computation(const hk_instr *i);

#endif
