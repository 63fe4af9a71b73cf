/* attr_rules.c - which attributes each opcode takes and requires, so the parser rejects what XLA's parser rejects. */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* Attributes every instruction may carry. */
static const char *const kCommon[] = {
    "backend_config", "control-predecessors", "frontend_attributes", "metadata",
    "origin", "result_accuracy", "sharding", "statistics",
};

/* Every opcode-specific attribute name XLA's parser knows (sorted, for
 * bsearch).  Like XLA, a name outside every list is an error. */
static const char *const kKnown[] = {
    "algorithm", "api_version", "async_execution_thread", "batch_group_count", "block_scaling_config", "body",
    "branch_computations", "called_computations", "calls", "channel_id",
    "collapsed_slice_dims", "condition", "constrain_layout", "convolution_kind", "cross_program_prefetch_index",
    "custom_call_has_side_effect", "custom_call_schedule", "custom_call_target", "delta",
    "dim_labels", "dimensions", "distribution", "domain", "dynamic_slice_sizes", "epsilon",
    "exponent_bits", "false_computation", "feature_group_count", "feature_index",
    "fft_length", "fft_type", "has_dynamic_root", "index", "index_vector_dim", "indices_are_sorted",
    "infeed_config", "inferred_dimension", "input_batching_dims", "inserted_window_dims", "iota_dimension",
    "is_composite", "is_host_transfer", "is_stable", "k", "kind", "largest", "left_side",
    "lhs_batch_dims", "lhs_contracting_dims", "lhs_ragged_dims", "literal", "lower", "mantissa_bits", "mode",
    "offset_dims", "operand_batching_dims", "operand_layout_constraints",
    "operand_precision", "outfeed_config", "outfeed_shape", "output_to_operand_aliasing",
    "padding", "padding_type", "parameter_replication", "replica_groups", "rhs_batch_dims",
    "rhs_contracting_dims", "rhs_group_dims", "scatter", "scatter_dims_to_operand_dims",
    "scatter_indices_batching_dims", "schedule", "select", "slice", "slice_sizes",
    "source_target_pairs", "sparsity", "sparsity_config", "start_index_map", "start_indices_batching_dims",
    "to_apply", "transpose_a", "true_computation", "type", "unique_indices",
    "unit_diagonal", "update_window_dims", "use_global_device_ids", "window",
};

typedef struct name_ref {
  const char *s;
  size_t len;
} name_ref;

static int cmp_name(const void *key, const void *elem) {
  const name_ref *k = key;
  const char *e = *(const char *const *)elem;
  int c = strncmp(k->s, e, k->len);
  if (c) return c;
  return e[k->len] ? -1 : 0;
}

static bool in_list(const char *const *list, size_t n, const char *s, size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
  return false;
}

/* Comma-separated allowed names of an opcode; NULL = no restriction. */
static const char *allowed_for(hk_opcode op) {
  switch (op) {
    case HK_OP_PARAMETER: return "parameter_replication";
    case HK_OP_IOTA: return "iota_dimension";
    case HK_OP_COMPARE: return "direction,type";
    case HK_OP_ALL_GATHER: case HK_OP_ALL_GATHER_START:
      return "replica_groups,constrain_layout,channel_id,dimensions,use_global_device_ids";
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: case HK_OP_REDUCE_SCATTER:
      return "replica_groups,to_apply,channel_id,constrain_layout,use_global_device_ids,dimensions,"
             "mode"; /* mode: read and dropped, as XLA does */
    case HK_OP_ALL_TO_ALL: return "replica_groups,constrain_layout,channel_id,dimensions";
    case HK_OP_RAGGED_ALL_TO_ALL: return "replica_groups,channel_id,constrain_layout";
    case HK_OP_COLLECTIVE_BROADCAST: /* has_dynamic_root: XLA since 2026 */
      return "replica_groups,channel_id,constrain_layout,has_dynamic_root";
    case HK_OP_COLLECTIVE_PERMUTE: case HK_OP_COLLECTIVE_PERMUTE_START:
      return "source_target_pairs,channel_id,slice_sizes";
    case HK_OP_ASYNC_START: case HK_OP_ASYNC_UPDATE:
      return "calls,async_execution_thread,output_to_operand_aliasing";
    case HK_OP_ASYNC_DONE: return "calls,async_execution_thread";
    case HK_OP_COPY_START: return "cross_program_prefetch_index";
    case HK_OP_REDUCE: return "dimensions,to_apply";
    case HK_OP_REVERSE: case HK_OP_TRANSPOSE: case HK_OP_BROADCAST: case HK_OP_CONCATENATE:
    case HK_OP_GET_DIMENSION_SIZE: case HK_OP_SET_DIMENSION_SIZE:
      return "dimensions";
    case HK_OP_MAP: return "to_apply,dimensions";
    case HK_OP_SORT: return "dimensions,is_stable,to_apply";
    case HK_OP_GET_TUPLE_ELEMENT: return "index";
    case HK_OP_CALL: return "to_apply,is_composite";
    case HK_OP_WHILE: return "condition,body";
    case HK_OP_SEND: case HK_OP_SEND_DONE: case HK_OP_RECV: case HK_OP_RECV_DONE:
      return "channel_id,is_host_transfer";
    case HK_OP_REDUCE_WINDOW: return "window,to_apply";
    case HK_OP_CONVOLUTION:
      return "window,dim_labels,feature_group_count,batch_group_count,operand_precision,"
             "algorithm,convolution_kind,sparsity_config,block_scaling_config";
    case HK_OP_FFT: return "fft_type,fft_length";
    case HK_OP_TRIANGULAR_SOLVE: return "left_side,lower,unit_diagonal,transpose_a";
    case HK_OP_CHOLESKY: return "lower";
    case HK_OP_SELECT_AND_SCATTER: return "window,select,scatter";
    case HK_OP_SLICE: return "slice";
    case HK_OP_DYNAMIC_SLICE: return "dynamic_slice_sizes";
    case HK_OP_PAD: return "padding";
    case HK_OP_FUSION: return "kind,calls,output_to_operand_aliasing";
    case HK_OP_INFEED: return "infeed_config";
    case HK_OP_OUTFEED: return "outfeed_shape,outfeed_config";
    case HK_OP_RNG: return "distribution";
    case HK_OP_RNG_BIT_GENERATOR: return "algorithm";
    case HK_OP_RNG_GET_AND_UPDATE_STATE: return "delta";
    case HK_OP_REDUCE_PRECISION: return "exponent_bits,mantissa_bits";
    case HK_OP_CONDITIONAL: return "true_computation,false_computation,branch_computations";
    case HK_OP_DOT:
      return "lhs_batch_dims,lhs_contracting_dims,rhs_batch_dims,rhs_contracting_dims,"
             "operand_precision,algorithm,sparsity";
    case HK_OP_RAGGED_DOT:
      return "lhs_batch_dims,lhs_contracting_dims,rhs_batch_dims,rhs_contracting_dims,"
             "lhs_ragged_dims,rhs_group_dims,operand_precision";
    case HK_OP_RESHAPE: return "inferred_dimension";
    case HK_OP_GATHER:
      return "offset_dims,collapsed_slice_dims,start_index_map,operand_batching_dims,"
             "start_indices_batching_dims,index_vector_dim,slice_sizes,indices_are_sorted";
    case HK_OP_SCATTER:
      return "update_window_dims,inserted_window_dims,scatter_dims_to_operand_dims,"
             "input_batching_dims,scatter_indices_batching_dims,index_vector_dim,to_apply,"
             "indices_are_sorted,unique_indices";
    case HK_OP_DOMAIN: return "domain";
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_BATCH_NORM_INFERENCE: case HK_OP_BATCH_NORM_GRAD:
      return "epsilon,feature_index";
    case HK_OP_TOPK: return "k,largest,is_stable,to_apply"; /* is_stable: XLA since 2026-06 */
    case HK_OP_CUSTOM_CALL:
      return NULL; /* custom calls carry a wide, growing set */
    default:
      return "";
  }
}

static bool listed(const char *list, const char *s, size_t len) {
  for (const char *p = list; *p;) {
    size_t k = 0;
    while (k < len && p[k] == s[k]) k++;
    if (k == len && (p[k] == ',' || p[k] == 0)) return true;
    p += k;
    while (*p && *p != ',') p++;
    if (*p) p++;
  }
  return false;
}

/* The unary ops XLA gives a result accuracy. */
static bool takes_result_accuracy(hk_opcode op) {
  switch (op) {
    case HK_OP_EXPM1: case HK_OP_LOG: case HK_OP_LOG1P: case HK_OP_LOGISTIC: case HK_OP_SQRT:
    case HK_OP_CBRT: case HK_OP_RSQRT: case HK_OP_TANH: case HK_OP_ERF: case HK_OP_SIN:
    case HK_OP_COS: case HK_OP_TAN: case HK_OP_EXP:
      return true;
    default:
      return false;
  }
}

bool tx_attr_allowed(hk_opcode op, bool async_sugar, const char *s, size_t len) {
  if (len == 8 && memcmp(s, "sharding", 8) == 0) return true;
  if (len == 15 && memcmp(s, "result_accuracy", 15) == 0) return takes_result_accuracy(op);
  /* the usual case first: an attribute of the opcode's own list */
  const char *list = allowed_for(op);
  if (list && listed(list, s, len)) return true;
  if (in_list(kCommon, sizeof kCommon / sizeof *kCommon, s, len)) return true;
  if (!list) { /* custom-call: any attribute XLA's parser knows */
    name_ref k = {s, len};
    return bsearch(&k, kKnown, sizeof kKnown / sizeof *kKnown, sizeof *kKnown, cmp_name) != NULL;
  }
  return async_sugar && ((len == 22 && memcmp(s, "async_execution_thread", 22) == 0) ||
                         (len == 26 && memcmp(s, "output_to_operand_aliasing", 26) == 0));
}

/* A written channel_id=0 (kept raw, the field staying 0). */
static bool has_raw(const tx_pending *pi, const char *name) {
  for (int k = 0; k < pi->n_raw; k++)
    if (!strcmp(pi->raw[k].name, name)) return true;
  return false;
}

/* The first required attribute the instruction lacks, or NULL. */
const char *tx_missing_required(const tx_pending *pi) {
  const hk_attrs *a = &pi->a;
  switch (pi->op) {
    case HK_OP_SEND: case HK_OP_RECV: case HK_OP_SEND_DONE: case HK_OP_RECV_DONE:
      return a->channel_id || a->is_host_transfer || has_raw(pi, "channel_id") ? NULL : "channel_id";
    case HK_OP_REDUCE:
      if (!pi->seen_dims) return "dimensions";
      return pi->to_apply ? NULL : "to_apply";
    case HK_OP_TRANSPOSE: case HK_OP_CONCATENATE: case HK_OP_REVERSE:
      return pi->seen_dims ? NULL : "dimensions";
    case HK_OP_MAP: case HK_OP_CALL: case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START:
    case HK_OP_REDUCE_SCATTER: case HK_OP_REDUCE_WINDOW:
      return pi->to_apply || pi->n_list ? NULL : "to_apply";
    case HK_OP_SORT:
      return pi->seen_dims ? NULL : "dimensions";
    case HK_OP_SLICE: return pi->seen_slice ? NULL : "slice";
    case HK_OP_PAD: return pi->seen_padding ? NULL : "padding";
    case HK_OP_IOTA: return pi->seen_dims ? NULL : "iota_dimension";
    case HK_OP_FUSION:
      if (!a->fusion_kind) return "kind";
      return pi->to_apply || pi->n_list ? NULL : "calls";
    case HK_OP_CUSTOM_CALL: return a->custom_call_target ? NULL : "custom_call_target";
    case HK_OP_CONVOLUTION: return pi->seen_dim_labels ? NULL : "dim_labels";
    case HK_OP_FFT:
      if (!a->fft_type) return "fft_type";
      return a->fft_length.n ? NULL : "fft_length";
    case HK_OP_RNG: return a->rng_distribution ? NULL : "distribution";
    case HK_OP_RNG_BIT_GENERATOR: return a->rng_algorithm ? NULL : "algorithm";
    case HK_OP_SELECT_AND_SCATTER:
      if (!pi->select) return "select";
      return pi->scatter ? NULL : "scatter";
    case HK_OP_GATHER:
      return a->gather ? NULL : "offset_dims";
    case HK_OP_SCATTER:
      if (!a->scatter) return "update_window_dims";
      return pi->to_apply ? NULL : "to_apply";
    default: return NULL;
  }
}

/* Operand count of fixed-arity opcodes, -1 if variable. */
int tx_opcode_arity(hk_opcode op) {
  switch (op) {
    case HK_OP_SELECT: case HK_OP_CLAMP:
      return 3;
    case HK_OP_ADD: case HK_OP_ATAN2: case HK_OP_COMPLEX: case HK_OP_DIVIDE:
    case HK_OP_MAXIMUM: case HK_OP_MINIMUM: case HK_OP_MULTIPLY: case HK_OP_POWER:
    case HK_OP_REMAINDER: case HK_OP_AND: case HK_OP_OR: case HK_OP_XOR:
    case HK_OP_SHIFT_LEFT: case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL:
    case HK_OP_SUBTRACT: case HK_OP_COMPARE: case HK_OP_STOCHASTIC_CONVERT:
    case HK_OP_ADD_DEPENDENCY: case HK_OP_SET_DIMENSION_SIZE: case HK_OP_PAD:
    case HK_OP_TRIANGULAR_SOLVE:
      return 2;
    case HK_OP_ABS: case HK_OP_CEIL: case HK_OP_CBRT: case HK_OP_CLZ: case HK_OP_COPY:
    case HK_OP_COS: case HK_OP_ERF: case HK_OP_EXP: case HK_OP_EXPM1: case HK_OP_FLOOR:
    case HK_OP_IMAG: case HK_OP_IS_FINITE: case HK_OP_LOG: case HK_OP_LOG1P:
    case HK_OP_LOGISTIC: case HK_OP_NOT: case HK_OP_NEGATE: case HK_OP_POPCNT: case HK_OP_REAL:
    case HK_OP_REDUCE_PRECISION: case HK_OP_ROUND_NEAREST_AFZ: case HK_OP_ROUND_NEAREST_EVEN:
    case HK_OP_RSQRT: case HK_OP_SIGN: case HK_OP_SIN: case HK_OP_SQRT: case HK_OP_TAN:
    case HK_OP_TANH: case HK_OP_BITCAST: case HK_OP_BITCAST_CONVERT: case HK_OP_CONVERT:
    case HK_OP_RESHAPE: case HK_OP_TRANSPOSE: case HK_OP_BROADCAST: case HK_OP_REVERSE:
    case HK_OP_SLICE: case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_GET_DIMENSION_SIZE:
    case HK_OP_CHOLESKY: case HK_OP_FFT: case HK_OP_COPY_DONE:
      return 1;
    case HK_OP_REPLICA_ID: case HK_OP_PARTITION_ID: case HK_OP_IOTA:
      return 0;
    default:
      return -1;
  }
}

/* XLA's CanInferShape: the opcodes whose shape may be left out of the text. */
bool tx_can_infer_shape(hk_opcode op) {
  switch (op) {
    case HK_OP_ABS: case HK_OP_ADD: case HK_OP_ADD_DEPENDENCY: case HK_OP_AFTER_ALL:
    case HK_OP_ATAN2: case HK_OP_BATCH_NORM_GRAD: case HK_OP_BATCH_NORM_INFERENCE:
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_BROADCAST: case HK_OP_CALL: case HK_OP_CEIL:
    case HK_OP_CHOLESKY: case HK_OP_CLAMP: case HK_OP_CLZ: case HK_OP_COMPARE:
    case HK_OP_COMPLEX: case HK_OP_CONCATENATE: case HK_OP_CONDITIONAL: case HK_OP_CONVOLUTION:
    case HK_OP_COPY: case HK_OP_COS: case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_DIVIDE:
    case HK_OP_DOMAIN: case HK_OP_DOT: case HK_OP_ERF: case HK_OP_EXP: case HK_OP_EXPM1:
    case HK_OP_FFT: case HK_OP_FLOOR: case HK_OP_GATHER: case HK_OP_GET_DIMENSION_SIZE:
    case HK_OP_SET_DIMENSION_SIZE: case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_IMAG:
    case HK_OP_IS_FINITE: case HK_OP_LOG: case HK_OP_LOG1P: case HK_OP_LOGISTIC: case HK_OP_AND:
    case HK_OP_NOT: case HK_OP_OR: case HK_OP_XOR: case HK_OP_MAP: case HK_OP_MAXIMUM:
    case HK_OP_MINIMUM: case HK_OP_MULTIPLY: case HK_OP_NEGATE: case HK_OP_PAD:
    case HK_OP_PARTITION_ID: case HK_OP_POPCNT: case HK_OP_POWER:
    case HK_OP_RAGGED_DOT: case HK_OP_REAL: case HK_OP_REDUCE: case HK_OP_REMAINDER:
    case HK_OP_REPLICA_ID: case HK_OP_REVERSE: case HK_OP_ROUND_NEAREST_AFZ:
    case HK_OP_ROUND_NEAREST_EVEN: case HK_OP_RSQRT: case HK_OP_SCATTER: case HK_OP_SELECT:
    case HK_OP_SHIFT_LEFT: case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL:
    case HK_OP_SIGN: case HK_OP_SIN: case HK_OP_SQRT: case HK_OP_CBRT: case HK_OP_REDUCE_WINDOW:
    case HK_OP_SELECT_AND_SCATTER: case HK_OP_SORT: case HK_OP_SUBTRACT: case HK_OP_TAN:
    case HK_OP_TANH: case HK_OP_TRANSPOSE: case HK_OP_TRIANGULAR_SOLVE: case HK_OP_TUPLE:
    case HK_OP_WHILE: case HK_OP_TOPK:
      return true;
    default:
      return false;
  }
}
