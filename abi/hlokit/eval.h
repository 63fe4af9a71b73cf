/* eval.h - the HLO evaluator: values, one-device and multi-device runs.
 *
 * hk_eval_module() runs a module's entry computation on one device.
 * hk_eval_spmd() runs it on num_replicas x num_partitions simulated devices
 * at once (one thread per device); collectives meet through a collective
 * back end (hk_collective_backend), an interface whose default
 * implementation rendezvouses threads in this process, so another back end
 * (e.g. one Open MPI rank per device) slots in without touching the
 * evaluator.  Device ids are XLA's global ids:
 *   device = replica * num_partitions + partition.
 *
 * Manual partitioning: a global module with manual regions is itself an
 * SPMD program inside them, so it runs under hk_eval_spmd too.  Every
 * device then holds the value of its manual group: SPMDFullToShardShape
 * gives the device its tile of the operand under the operand's sharding
 * (zero padding in uneven tiles); SPMDShardToFullShape gathers every
 * device's tile (its operand's tile under the operand's sharding) and
 * assembles, on each device, the value of that device's manual group of
 * the result's sharding (the devices whose tile indices differ only in
 * data and replicated dims).  Collectives and partition-id inside regions
 * run for real.  On one device SPMDShardToFullShape with a tiled sharding
 * is an error.
 *
 * Numerics: elementwise float ops compute in double and round once to the
 * result type (exact for +,-,*,/,sqrt on f32).  dot and convolution
 * accumulate every float type (f64, f32, f16, bf16, f8) in double (partial
 * sums over blocks of the contraction, added in order) and round once to
 * the result type: products of f32 or narrower are exact in double, so a
 * dot and the same dot split into partial sums added afterwards (a
 * partitioned program) agree to within a few ulps of the result type even
 * for long contractions.  Integer dots accumulate in int64 and wrap.
 * Reductions apply the reducer in operand order in the result type.
 * Integer ops follow XLA: x/0 = -1, INT_MIN/-1 = INT_MIN, x%0 = x, shifts
 * by >= the bit width give 0 (or the sign for arithmetic right shifts),
 * float->int converts saturate with NaN -> 0, min/max propagate NaN. */
#ifndef HLOKIT_EVAL_H
#define HLOKIT_EVAL_H

#include "export.h"

#include "ir.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

/* ---- values ---------------------------------------------------------- */
/* A runtime value: a dense array (row-major in logical index order, the
 * hk_literal element encoding), a tuple of values, or a token.  Values are
 * reference counted (atomically: one value may be an input of several
 * devices); hk_value_release() drops a reference. */
typedef struct hk_value {
  uint8_t elem;                    /* hk_prim; HK_TUPLE, HK_TOKEN */
  uint8_t rank;
  int32_t refcount;
  int64_t *dims;                   /* rank entries */
  int64_t n;                       /* element count (arrays) */
  void *data;                      /* n * hk_prim_storage_bytes(elem) bytes */
  int64_t nbytes;
  int32_t n_elems;                 /* tuples */
  struct hk_value **elems;
} hk_value;

/* A zeroed array value. */
hk_value *hk_value_new_array(hk_prim elem, int rank, const int64_t *dims);
/* A tuple; takes over the references in elems[]. */
hk_value *hk_value_new_tuple(int n, hk_value *const *elems);
hk_value *hk_value_new_token(void);
/* A zeroed value of the shape (tuples recursively). */
hk_value *hk_value_of_shape(const hk_shape *s);
/* A copy of a literal's data (tuple literals recursively).  Elided
 * literals are an error. */
hk_status *hk_value_from_literal(const hk_literal *l, hk_value **out);
hk_value *hk_value_retain(hk_value *v);
void hk_value_release(hk_value *v);
/* A deep copy (fresh buffers). */
hk_value *hk_value_clone(const hk_value *v);

/* Element access by linear (row-major) index. get_i64 gives signed ints
 * sign-extended and unsigned ints zero-extended (u64 as its bit pattern);
 * set_* round/wrap to the element type (floats: round to nearest even;
 * ints: wrap; pred: != 0). */
double hk_value_get_f64(const hk_value *v, int64_t i);
int64_t hk_value_get_i64(const hk_value *v, int64_t i);
void hk_value_set_f64(hk_value *v, int64_t i, double x);
void hk_value_set_i64(hk_value *v, int64_t i, int64_t x);
/* Complex elements as (re, im); real types read im = 0 and store re. */
void hk_value_get_c(const hk_value *v, int64_t i, double *re, double *im);
void hk_value_set_c(hk_value *v, int64_t i, double re, double im);

/* True when the value has the shape's element type and dims (tuples
 * recursively; layout ignored). */
bool hk_value_matches_shape(const hk_value *v, const hk_shape *s);
/* "f32[2,3]", "(f32[2], s32[])": a malloc'ed string. */
char *hk_value_shape_string(const hk_value *v);
/* Bytes held by the value's array leaves. */
int64_t hk_value_byte_size(const hk_value *v);
/* Number of array leaves; hk_value_leaf(v, k) is the k-th in order. */
int64_t hk_value_leaf_count(const hk_value *v);
const hk_value *hk_value_leaf(const hk_value *v, int64_t k);

/* Deterministic pseudo-random value for a parameter: floats uniform in
 * [-1, 1], signed ints in [-8, 8], unsigned ints in [0, 8], pred random.
 * The same (seed, stream, shape) always gives the same value. */
hk_value *hk_value_random(const hk_shape *s, uint64_t seed, uint64_t stream);

/* ---- collective back ends -------------------------------------------- */
/* One execution of a collective by one device.  `group` lists the global
 * device ids taking part, in XLA's participant order; `rank` is this
 * device's position in it.  (instr, sequence) identifies the execution: the
 * sequence counts how often this device has run this instruction, so every
 * participant of one execution presents the same key. */
typedef struct hk_collective_op {
  const hk_instr *instr;
  int64_t sequence;
  int64_t device;
  int32_t rank;
  int32_t group_size;
  const int64_t *group;
} hk_collective_op;

/* Folds `in` into `acc` elementwise (n elements); used by all-reduce and
 * reduce-scatter, applied in group order so every device gets the same
 * bits. */
typedef hk_status *(*hk_combine_fn)(void *ctx, void *acc, const void *in,
                                    int64_t n);

typedef struct hk_collective_backend hk_collective_backend;
typedef struct hk_collective_vtable {
  const char *name;
  /* out = concatenation of every participant's `in` (nbytes each), in
   * group order. */
  hk_status *(*all_gather)(hk_collective_backend *b, const hk_collective_op *op,
                           const void *in, int64_t nbytes, void *out);
  /* out = combine over the group (in group order) of n elements of
   * elem_bytes each. */
  hk_status *(*all_reduce)(hk_collective_backend *b, const hk_collective_op *op,
                           const void *in, void *out, int64_t n, int elem_bytes,
                           hk_combine_fn combine, void *ctx);
  /* `in` holds group_size chunks of n elements; out = combine over the
   * group of chunk `rank`. */
  hk_status *(*reduce_scatter)(hk_collective_backend *b, const hk_collective_op *op,
                               const void *in, void *out, int64_t n, int elem_bytes,
                               hk_combine_fn combine, void *ctx);
  /* `in` holds group_size chunks of chunk_bytes; out chunk j = chunk `rank`
   * of participant j. */
  hk_status *(*all_to_all)(hk_collective_backend *b, const hk_collective_op *op,
                           const void *in, int64_t chunk_bytes, void *out);
  /* Sends `in` to device send_to (-1: none); receives into out from
   * recv_from (-1: none; out is left as is).  group = every device named
   * by the op's pairs in this device's id space. */
  hk_status *(*collective_permute)(hk_collective_backend *b,
                                   const hk_collective_op *op, const void *in,
                                   int64_t nbytes, int64_t send_to,
                                   int64_t recv_from, void *out);
  /* Waits until every participant arrived. */
  hk_status *(*barrier)(hk_collective_backend *b, const hk_collective_op *op);
  /* A device failed: wake and fail every waiting participant. */
  void (*abort)(hk_collective_backend *b, const char *why);
  void (*destroy)(hk_collective_backend *b);
} hk_collective_vtable;

struct hk_collective_backend {
  const hk_collective_vtable *vt;
};

/* The default back end: devices are threads of this process.  A
 * rendezvous that waits longer than timeout_ms (0: 120000) fails, naming
 * the instruction and who arrived. */
hk_collective_backend *hk_collective_threads_new(int64_t num_devices,
                                                 int64_t timeout_ms);

/* ---- running ---------------------------------------------------------- */
typedef struct hk_eval_options {
  uint64_t seed;                   /* rng, rng-bit-generator state */
  int64_t max_while_iterations;    /* 0: unlimited */
  hk_collective_backend *backend;  /* hk_eval_spmd: NULL = threads */
  /* Largest value (bytes, tuples summed) any instruction may produce;
   * a module with a larger one is refused before it runs.  0: 2 GiB;
   * negative: no limit. */
  int64_t max_value_bytes;
  /* Wall-clock budget per device in milliseconds (0: none); checked
   * between instructions, so one huge op may overrun it. */
  int64_t time_limit_ms;
  /* Budget for the bytes of values alive at once on one device; going
   * over it stops the run with an error instead of exhausting memory.
   * 0: half the physical memory divided by the number of devices;
   * negative: no limit. */
  int64_t max_live_bytes;
  /* Unknown custom-call targets run as opaque pure functions: the result
   * is hk_value_random() of the call's shape, seeded by a hash of (target
   * name, every operand's element types, dims and bytes).  A partitioned
   * program reproduces the global result only if it feeds the call the
   * same full operands.  false (the default): unknown targets are an
   * HK_UNIMPLEMENTED error. */
  bool opaque_custom_calls;
} hk_eval_options;

enum { HK_EVAL_NUM_COLLECTIVE_KINDS = 6 };
/* Collective kinds counted in hk_eval_stats, by index. */
typedef enum hk_collective_kind {
  HK_COLL_ALL_REDUCE, HK_COLL_ALL_GATHER, HK_COLL_REDUCE_SCATTER,
  HK_COLL_ALL_TO_ALL, HK_COLL_COLLECTIVE_PERMUTE, HK_COLL_COLLECTIVE_BROADCAST,
} hk_collective_kind;
const char *hk_collective_kind_name(int kind);   /* "all-reduce", ... */

typedef struct hk_eval_stats {
  int64_t peak_live_bytes;         /* array buffers alive at once, incl. inputs */
  int64_t instructions_executed;
  int64_t collective_count[HK_EVAL_NUM_COLLECTIVE_KINDS];
  int64_t collective_bytes[HK_EVAL_NUM_COLLECTIVE_KINDS];   /* operand bytes sent */
} hk_eval_stats;

/* The size check hk_eval_module / hk_eval_spmd make before running:
 * an error naming the first instruction whose value exceeds
 * opts->max_value_bytes. */
hk_status *hk_eval_check_sizes(const hk_module *m, const hk_eval_options *opts);

/* Runs the entry computation with args (one per entry parameter; the
 * callee does not take the references).  *result gets a new reference.
 * stats may be NULL.  Replica and partition id are 0. */
hk_status *hk_eval_module(const hk_module *m, hk_value *const *args, int n_args,
                          hk_value **result, const hk_eval_options *opts,
                          hk_eval_stats *stats);

/* Runs the entry computation on every device at once.  args[d] holds the
 * n_args parameters of device d (device = replica * num_partitions +
 * partition); results[d] gets device d's result; stats (may be NULL) has
 * one entry per device.  On error every device is stopped and no result
 * is returned. */
hk_status *hk_eval_spmd(const hk_module *m, int64_t num_partitions,
                        int64_t num_replicas, hk_value *const *const *args,
                        int n_args, hk_value **results,
                        const hk_eval_options *opts, hk_eval_stats *stats);


/* ---- values and shardings ------------------------------------------------ */
/* The piece of a global value that `device` holds under sharding s (tuple
 * shardings per element; replicated, manual or unknown: the whole value;
 * maximal: the whole value).  local is the per-device shape (its dims
 * decide the piece's size; the part beyond the global bounds, the padding
 * of uneven tiles, is zero). */
hk_status *hk_value_shard(const hk_value *global, const hk_sharding *s,
                          const hk_shape *global_shape, int64_t device,
                          const hk_shape *local, hk_value **out);
/* How `hlokit check` maps a global program's entry onto its partitioned
 * one: the sharding of entry parameter i (the recorded
 * spmd_parameters_shardings, else the parameter's own when the partitioned
 * shape differs from the global one, else NULL: the whole value) and of the
 * result (spmd_output_sharding, likewise). */
const hk_sharding *hk_spmd_parameter_sharding(const hk_module *global,
                                              const hk_module *partitioned, int i);
const hk_sharding *hk_spmd_result_sharding(const hk_module *global,
                                           const hk_module *partitioned);
/* Reassembles a global value of global_shape from one value per device
 * under sharding s: tiles are placed at their offsets; replicated values
 * come from device 0, maximal ones from their device.  Devices that hold
 * the same elements must agree bit for bit: otherwise *disagree (if not
 * NULL) gets a malloc'ed description, first one only, and the value of
 * the lowest device is kept. */
hk_status *hk_value_unshard(hk_value *const *per_device, int64_t n_devices,
                            const hk_sharding *s, const hk_shape *global_shape,
                            hk_value **out, char **disagree);

/* ---- comparing ------------------------------------------------------------- */
typedef struct hk_compare_result {
  bool equal;
  double max_abs_error, max_rel_error;
  bool has_mismatch;               /* first mismatch: */
  int64_t mismatch_leaf, mismatch_index;
  double expected, actual;
  char *message;                   /* malloc'ed; shape/type mismatch or NULL */
} hk_compare_result;
/* Compares actual against expected leaf by leaf: integers and pred
 * exactly, floats within atol + rtol * |expected| (NaN equals NaN; a
 * negative atol/rtol picks the type's default: f32 1e-5/1e-4, f64
 * 1e-9/1e-8, f16/bf16 and f8 looser; with the default atol an element may
 * also be off by 16 ulps of the leaf's root-mean-square magnitude, the
 * rounding a reassociated sum (partial sums added in another order) can
 * leave on an element that cancels to near zero). */
void hk_value_compare(const hk_value *expected, const hk_value *actual, double atol,
                      double rtol, hk_compare_result *out);
void hk_compare_result_free(hk_compare_result *r);

/* ---- JSON ----------------------------------------------------------------- */
/* Appends {"shape": "f32[2]", "values": [...]} for one array value
 * (floats as numbers; "inf", "-inf", "nan" as strings; pred as true/false). */
void hk_value_leaf_to_json(const hk_value *v, hk_buf *out);
/* Reads entry-parameter values from JSON: an array (or {"inputs": [...]})
 * with one entry per parameter: {"shape": S, "values": [...]} or
 * {"tuple": [...]} for tuple parameters. */
hk_status *hk_values_from_json(const hk_module *m, const char *text, size_t len,
                               hk_value ***out, int *n_out);

/* ---- sampled comparison (appended: host/eval/sample_*.c) -------------------
 * For modules too big to evaluate densely: a demand-driven evaluator
 * computes single output elements, reading only the operand elements they
 * need (a dot element reads one row and one column; collectives read the
 * same box on the devices of their group), memoising shared requests.
 * Entry parameters are a pure function of (seed, parameter, leaf, GLOBAL
 * index) (floats uniform in [-1, 1], ints small, as hk_value_random), so
 * nothing is materialised; on a device of the partitioned module the
 * element at local index i is the global one at the device's tile offset
 * (spmd_parameters_shardings) + i, and 0 in the padding of uneven tiles.
 * Positions compared, chosen from the seed for every output leaf: corners,
 * the first and last element of shards along every sharded dimension of
 * the recorded output sharding, then uniform random ones; each is read
 * from a device holding it (rotating among replicas of it), and position 0
 * on every holding device.  An op the evaluator lacks is an
 * HK_UNIMPLEMENTED error naming the instruction, never a guess. */
typedef struct hk_sample_options {
  uint64_t seed;
  int64_t samples;                 /* positions to compare; 0: 1024 */
  double atol, rtol;               /* negative: the type's default (hk_value_compare) */
  /* Stop sampling after this many ms (0: none); the result then says how
   * many positions were compared. */
  int64_t time_limit_ms;
} hk_sample_options;

typedef struct hk_sample_result {
  bool equal;                      /* every compared position agrees */
  int64_t samples;                 /* positions compared */
  int64_t samples_planned;         /* positions chosen */
  bool timed_out;                  /* stopped by time_limit_ms */
  double max_abs_error, max_rel_error;
  bool has_mismatch;               /* first mismatch: */
  int64_t mismatch_leaf, mismatch_index;   /* global linear index in the leaf */
  int64_t mismatch_device;
  double expected, actual;
  char *message;                   /* malloc'ed: shape mismatch etc., or NULL */
} hk_sample_result;

/* Compares the partitioned module (run on num_replicas x num_partitions
 * devices) against the global one at sampled output positions. */
hk_status *hk_eval_compare_sampled(const hk_module *global, const hk_module *partitioned,
                                   int64_t num_partitions, int64_t num_replicas,
                                   const hk_sample_options *o, hk_sample_result *out);
void hk_sample_result_free(hk_sample_result *r);

/* Dense-evaluation cost figures for choosing dense or sampled checking:
 * multiply-accumulates of every dot and convolution (each computation
 * counted once), and the element count of the largest array value. */
typedef struct hk_eval_cost {
  double macs;
  int64_t largest_elements;
} hk_eval_cost;
hk_eval_cost hk_eval_estimate_cost(const hk_module *m);

/* ---- devices spread over processes (ABI 1.4: the MPI back end) ------------
 * hk_eval_spmd for devices first .. first + count - 1 of the
 * num_replicas x num_partitions grid only: args[k], results[k] and
 * stats[k] (may be NULL) belong to device first + k.  The other devices
 * run elsewhere (other processes) and meet these through opts->backend,
 * which must be given.  Errors name the global device id. */
hk_status *hk_eval_spmd_devices(const hk_module *m, int64_t num_partitions,
                                int64_t num_replicas, int64_t first, int64_t count,
                                hk_value *const *const *args, int n_args,
                                hk_value **results, const hk_eval_options *opts,
                                hk_eval_stats *stats);

/* The reducer (to_apply) of an all-reduce or reduce-scatter when it is one
 * plain binary op of its two scalar parameters (a back end may then use its
 * own reduction); anything else is HK_REDUCE_GENERIC (ABI 1.4). */
typedef enum hk_reduce_kind {
  HK_REDUCE_GENERIC, HK_REDUCE_ADD, HK_REDUCE_MUL, HK_REDUCE_MAX, HK_REDUCE_MIN,
  HK_REDUCE_AND, HK_REDUCE_OR, HK_REDUCE_XOR
} hk_reduce_kind;
hk_reduce_kind hk_collective_reducer(const hk_instr *ins);

/* ---- one device's share of a distributed check (ABI 1.4: host/eval/sample_shard.c)
 * The entry parameters of the partitioned module p on `device`, made as
 * the sampled evaluator makes them: a pure function of (seed, parameter,
 * leaf, GLOBAL index) at the device's tile offset (0 in the padding of
 * uneven tiles), so each process makes only its own devices' pieces.
 * *out gets n_out new references (free the array). */
hk_status *hk_eval_sampled_inputs(const hk_module *global, const hk_module *partitioned,
                                  int64_t num_partitions, int64_t num_replicas,
                                  int64_t device, uint64_t seed, hk_value ***out,
                                  int *n_out);
/* Compares `result`, device's output of the partitioned module run on
 * those inputs, with the global module at positions inside the device's
 * piece of each output leaf (by the recorded output sharding; devices
 * holding the same piece each take a slice of it): every position of a
 * slice of up to 2^18 elements, else o->samples of them (corners, then
 * random).  The global module is evaluated on demand, or densely when it
 * is small (up to 1e7 multiply-adds and 2^20-element values), or uses an
 * op the on-demand evaluator lacks, or gets no slab done in
 * o->time_limit_ms (then up to the thread check's dense limits).  out->samples counts the positions
 * compared; mismatch indices are global. */
hk_status *hk_eval_compare_piece(const hk_module *global, const hk_module *partitioned,
                                 int64_t num_partitions, int64_t num_replicas,
                                 int64_t device, const hk_value *result,
                                 const hk_sample_options *o, hk_sample_result *out);
HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
