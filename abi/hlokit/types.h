/* types.h - primitive element types and the HLO opcode list.
 *
 * Both lists are X-macros so that the enum, the name table and any switch a
 * pass needs are generated from one place.  Opcodes follow XLA's
 * HloOpcode list (xla/hlo/ir/hlo_opcode.h) and its text spellings.  New
 * entries are only ever appended, so enum values stay stable across minor
 * ABI versions. */
#ifndef HLOKIT_TYPES_H
#define HLOKIT_TYPES_H

#include "export.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

/* X(ENUM, "text name", bit width, kind)   kind: P pred, S signed, U unsigned,
 * F float, C complex, T tuple, K token, O opaque */
#define HK_PRIM_LIST(X)                      \
  X(PRED, "pred", 8, 'P')                    \
  X(S2, "s2", 2, 'S')                        \
  X(S4, "s4", 4, 'S')                        \
  X(S8, "s8", 8, 'S')                        \
  X(S16, "s16", 16, 'S')                     \
  X(S32, "s32", 32, 'S')                     \
  X(S64, "s64", 64, 'S')                     \
  X(U2, "u2", 2, 'U')                        \
  X(U4, "u4", 4, 'U')                        \
  X(U8, "u8", 8, 'U')                        \
  X(U16, "u16", 16, 'U')                     \
  X(U32, "u32", 32, 'U')                     \
  X(U64, "u64", 64, 'U')                     \
  X(F16, "f16", 16, 'F')                     \
  X(BF16, "bf16", 16, 'F')                   \
  X(F32, "f32", 32, 'F')                     \
  X(F64, "f64", 64, 'F')                     \
  X(C64, "c64", 64, 'C')                     \
  X(C128, "c128", 128, 'C')                  \
  X(F8E5M2, "f8e5m2", 8, 'F')                \
  X(F8E4M3, "f8e4m3", 8, 'F')                \
  X(F8E4M3FN, "f8e4m3fn", 8, 'F')            \
  X(F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8, 'F')  \
  X(F8E5M2FNUZ, "f8e5m2fnuz", 8, 'F')        \
  X(F8E4M3FNUZ, "f8e4m3fnuz", 8, 'F')        \
  X(F8E3M4, "f8e3m4", 8, 'F')                \
  X(F4E2M1FN, "f4e2m1fn", 4, 'F')            \
  X(F8E8M0FNU, "f8e8m0fnu", 8, 'F')          \
  X(TUPLE, "tuple", 0, 'T')                  \
  X(TOKEN, "token", 0, 'K')                  \
  X(OPAQUE, "opaque", 0, 'O')

typedef enum hk_prim {
#define HK_X_(e, n, b, k) HK_##e,
  HK_PRIM_LIST(HK_X_)
#undef HK_X_
  HK_PRIM_COUNT,
  HK_PRIM_INVALID = 255
} hk_prim;

/* X(ENUM, "text name") — XLA's opcode list. */
#define HK_OPCODE_LIST(X)                                   \
  X(ABS, "abs")                                             \
  X(ADD, "add")                                             \
  X(ADD_DEPENDENCY, "add-dependency")                       \
  X(AFTER_ALL, "after-all")                                 \
  X(ALL_GATHER, "all-gather")                               \
  X(ALL_GATHER_DONE, "all-gather-done")                     \
  X(ALL_GATHER_START, "all-gather-start")                   \
  X(ALL_REDUCE, "all-reduce")                               \
  X(ALL_REDUCE_DONE, "all-reduce-done")                     \
  X(ALL_REDUCE_START, "all-reduce-start")                   \
  X(ALL_TO_ALL, "all-to-all")                               \
  X(AND, "and")                                             \
  X(ASYNC_DONE, "async-done")                               \
  X(ASYNC_START, "async-start")                             \
  X(ASYNC_UPDATE, "async-update")                           \
  X(ATAN2, "atan2")                                         \
  X(BATCH_NORM_GRAD, "batch-norm-grad")                     \
  X(BATCH_NORM_INFERENCE, "batch-norm-inference")           \
  X(BATCH_NORM_TRAINING, "batch-norm-training")             \
  X(BITCAST, "bitcast")                                     \
  X(BITCAST_CONVERT, "bitcast-convert")                     \
  X(BROADCAST, "broadcast")                                 \
  X(CALL, "call")                                           \
  X(CBRT, "cbrt")                                           \
  X(CEIL, "ceil")                                           \
  X(CHOLESKY, "cholesky")                                   \
  X(CLAMP, "clamp")                                         \
  X(CLZ, "count-leading-zeros")                             \
  X(COLLECTIVE_BROADCAST, "collective-broadcast")           \
  X(COLLECTIVE_PERMUTE, "collective-permute")               \
  X(COLLECTIVE_PERMUTE_DONE, "collective-permute-done")     \
  X(COLLECTIVE_PERMUTE_START, "collective-permute-start")   \
  X(COMPARE, "compare")                                     \
  X(COMPLEX, "complex")                                     \
  X(CONCATENATE, "concatenate")                             \
  X(CONDITIONAL, "conditional")                             \
  X(CONSTANT, "constant")                                   \
  X(CONVERT, "convert")                                     \
  X(CONVOLUTION, "convolution")                             \
  X(COPY, "copy")                                           \
  X(COPY_DONE, "copy-done")                                 \
  X(COPY_START, "copy-start")                               \
  X(COS, "cosine")                                          \
  X(CUSTOM_CALL, "custom-call")                             \
  X(DIVIDE, "divide")                                       \
  X(DOMAIN, "domain")                                       \
  X(DOT, "dot")                                             \
  X(DYNAMIC_RESHAPE, "dynamic-reshape")                     \
  X(DYNAMIC_SLICE, "dynamic-slice")                         \
  X(DYNAMIC_UPDATE_SLICE, "dynamic-update-slice")           \
  X(ERF, "erf")                                             \
  X(EXP, "exponential")                                     \
  X(EXPM1, "exponential-minus-one")                         \
  X(FFT, "fft")                                             \
  X(FLOOR, "floor")                                         \
  X(FUSION, "fusion")                                       \
  X(GATHER, "gather")                                       \
  X(GET_DIMENSION_SIZE, "get-dimension-size")               \
  X(GET_TUPLE_ELEMENT, "get-tuple-element")                 \
  X(IMAG, "imag")                                           \
  X(INFEED, "infeed")                                       \
  X(IOTA, "iota")                                           \
  X(IS_FINITE, "is-finite")                                 \
  X(LOG, "log")                                             \
  X(LOG1P, "log-plus-one")                                  \
  X(LOGISTIC, "logistic")                                   \
  X(MAP, "map")                                             \
  X(MAXIMUM, "maximum")                                     \
  X(MINIMUM, "minimum")                                     \
  X(MULTIPLY, "multiply")                                   \
  X(NEGATE, "negate")                                       \
  X(NOT, "not")                                             \
  X(OPTIMIZATION_BARRIER, "opt-barrier")                    \
  X(OR, "or")                                               \
  X(OUTFEED, "outfeed")                                     \
  X(PAD, "pad")                                             \
  X(PARAMETER, "parameter")                                 \
  X(PARTITION_ID, "partition-id")                           \
  X(POPCNT, "popcnt")                                       \
  X(POWER, "power")                                         \
  X(RAGGED_ALL_TO_ALL, "ragged-all-to-all")                 \
  X(RAGGED_DOT, "ragged-dot")                               \
  X(REAL, "real")                                           \
  X(RECV, "recv")                                           \
  X(RECV_DONE, "recv-done")                                 \
  X(REDUCE, "reduce")                                       \
  X(REDUCE_PRECISION, "reduce-precision")                   \
  X(REDUCE_SCATTER, "reduce-scatter")                       \
  X(REDUCE_WINDOW, "reduce-window")                         \
  X(REMAINDER, "remainder")                                 \
  X(REPLICA_ID, "replica-id")                               \
  X(RESHAPE, "reshape")                                     \
  X(REVERSE, "reverse")                                     \
  X(RNG, "rng")                                             \
  X(RNG_BIT_GENERATOR, "rng-bit-generator")                 \
  X(RNG_GET_AND_UPDATE_STATE, "rng-get-and-update-state")   \
  X(ROUND_NEAREST_AFZ, "round-nearest-afz")                 \
  X(ROUND_NEAREST_EVEN, "round-nearest-even")               \
  X(RSQRT, "rsqrt")                                         \
  X(SCATTER, "scatter")                                     \
  X(SELECT, "select")                                       \
  X(SELECT_AND_SCATTER, "select-and-scatter")               \
  X(SEND, "send")                                           \
  X(SEND_DONE, "send-done")                                 \
  X(SET_DIMENSION_SIZE, "set-dimension-size")               \
  X(SHIFT_LEFT, "shift-left")                               \
  X(SHIFT_RIGHT_ARITHMETIC, "shift-right-arithmetic")       \
  X(SHIFT_RIGHT_LOGICAL, "shift-right-logical")             \
  X(SIGN, "sign")                                           \
  X(SIN, "sine")                                            \
  X(SLICE, "slice")                                         \
  X(SORT, "sort")                                           \
  X(SQRT, "sqrt")                                           \
  X(STOCHASTIC_CONVERT, "stochastic-convert")               \
  X(SUBTRACT, "subtract")                                   \
  X(TAN, "tan")                                             \
  X(TANH, "tanh")                                           \
  X(TOPK, "topk")                                           \
  X(TRANSPOSE, "transpose")                                 \
  X(TRIANGULAR_SOLVE, "triangular-solve")                   \
  X(TUPLE, "tuple")                                         \
  X(WHILE, "while")                                         \
  X(XOR, "xor")

typedef enum hk_opcode {
#define HK_X_(e, n) HK_OP_##e,
  HK_OPCODE_LIST(HK_X_)
#undef HK_X_
  HK_OPCODE_COUNT
} hk_opcode;

/* Name tables and lookups (implemented in host/ir/types.c). */
const char *hk_prim_name(hk_prim p);          /* "f32"; "invalid" if out of range */
hk_prim hk_prim_from_name(const char *s, size_t len); /* HK_PRIM_INVALID if unknown */
int hk_prim_bits(hk_prim p);                  /* logical bit width, 0 for tuple/token/opaque */
int hk_prim_storage_bytes(hk_prim p);         /* bytes per element in a literal buffer */
bool hk_prim_is_float(hk_prim p);             /* real floating point (incl. f8, bf16) */
bool hk_prim_is_complex(hk_prim p);
bool hk_prim_is_signed_int(hk_prim p);
bool hk_prim_is_unsigned_int(hk_prim p);
bool hk_prim_is_integral(hk_prim p);          /* signed or unsigned int (not pred) */
bool hk_prim_is_array(hk_prim p);             /* not tuple/token/opaque */

const char *hk_opcode_name(hk_opcode op);
/* Returns HK_OPCODE_COUNT when the name is unknown. */
hk_opcode hk_opcode_from_name(const char *s, size_t len);
/* Elementwise unary/binary/ternary ops (abs, add, select, clamp, compare,
 * convert, ...): the per-element ops the partitioner and propagation treat
 * alike. */
bool hk_opcode_is_elementwise(hk_opcode op);
/* XLA's collective communication ops (hlo_query::IsCollectiveCommunicationOp):
 * all-reduce, all-gather, all-to-all, ragged-all-to-all, collective-permute,
 * collective-broadcast, reduce-scatter and the all-reduce-start,
 * all-gather-start and collective-permute-start forms.  ABI 1.4. */
bool hk_opcode_is_collective(hk_opcode op);
/* Ops with side effects XLA never removes (send, recv, infeed, outfeed,
 * rng, custom-call with has_side_effect, collectives with channels, ...)
 * are judged per instruction: see hk_instr_has_side_effect(). */

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
