/* eval_internal.h - shared declarations of the evaluator's own files. */
#ifndef HK_EVAL_INTERNAL_H
#define HK_EVAL_INTERNAL_H

#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"

/* ---- memory accounting (per device thread) ---------------------------- */
typedef struct hk_mem_counter {
  int64_t live, peak;
  int64_t limit;                       /* 0 = none */
  bool over;                           /* live went above limit */
} hk_mem_counter;
/* The live-bytes budget per device for opts and n devices (0 = none). */
int64_t hk_eval_memory_budget(const hk_eval_options *opts, int64_t n_devices);
/* The counter array allocations and frees of this thread are charged to
 * (NULL: none). */
void hk_eval_set_mem_counter(hk_mem_counter *c);
void hk_eval_mem_charge(int64_t bytes);
/* Frees this thread's cache of scalar values (call when a device ends). */
void hk_eval_release_thread_cache(void);

/* ---- CPU slots: how many device threads compute at once (cpu_slots.c) ---- */
typedef struct hk_cpu_slots hk_cpu_slots;
/* hk_worker_threads() slots. */
hk_cpu_slots *hk_cpu_slots_new(void);
void hk_cpu_slots_free(hk_cpu_slots *s);
/* A device thread takes a slot before it computes and leaves it when done. */
void hk_cpu_slot_enter(hk_cpu_slots *s);
void hk_cpu_slot_leave(void);
/* Around a wait for other devices (a rendezvous); no-ops off a device thread. */
void hk_cpu_slot_pause(void);
void hk_cpu_slot_resume(void);

/* ---- element helpers --------------------------------------------------- */
static inline int hk_esize(int elem) { return hk_prim_storage_bytes((hk_prim)elem); }
static inline int64_t hk_clamp_i64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }
/* The sharding of array leaf `leaf` (depth-first) of a value sharded by s:
 * a tuple sharding is flat over the leaves, as XLA's; a non-tuple one
 * applies to every leaf; NULL (whole) past a tuple sharding's end. */
static inline const hk_sharding *hk_eval_leaf_sharding(const hk_sharding *s, int64_t leaf) {
  if (!s || s->kind != HK_SHARDING_TUPLE) return s;
  return leaf < s->n_elems ? s->elems[leaf] : NULL;
}
/* Wraps x to the bit width of an integer type (sign- or zero-extended). */
int64_t hk_wrap_int(hk_prim p, int64_t x);
/* Rounds a double to the precision of float type p (the value it would
 * read back as). */
double hk_round_to_type(hk_prim p, double x);
/* Row-major strides of a dims list (elements). */
void hk_strides(int rank, const int64_t *dims, int64_t *strides);
int64_t hk_dims_product(int rank, const int64_t *dims);
/* An array value shaped like the instruction's (array) shape. */
hk_value *hk_value_for_shape_dims(const hk_shape *s);
/* Copies array l into g at offset off (per dim; the part outside g is
 * dropped). */
void hk_value_paste_box(hk_value *g, const hk_value *l, const int64_t *off);

/* ---- comparing (value_io.c) ---------------------------------------------- */
/* The default atol and rtol of float type p (hk_value_compare's). */
void hk_default_tolerance(hk_prim p, double *atol, double *rtol);
/* Root mean square of the finite elements (complex parts counted apart). */
double hk_value_rms(const hk_value *v);
/* What default tolerances add for summation order: a few ulps of `rms`
 * in type p's precision. */
double hk_reassociation_slack(hk_prim p, double rms);

/* ---- collective groups (collectives.c) ------------------------------------ */
/* XLA's CollectiveOpGroupMode of a collective instruction. */
typedef enum { HK_MODE_CROSS_REPLICA, HK_MODE_CROSS_PARTITION, HK_MODE_CROSS_REPLICA_AND_PARTITION,
               HK_MODE_FLATTENED } hk_group_mode;
hk_group_mode hk_collective_group_mode(const hk_instr *ins);
/* The replica groups as id lists (iota form expanded; none: one group of
 * every id of the mode). */
typedef struct hk_id_groups {
  int32_t n;
  int32_t *start;                  /* n + 1 */
  int64_t *ids;
} hk_id_groups;
void hk_collective_id_groups(const hk_instr *ins, hk_group_mode mode, int64_t num_partitions,
                             int64_t num_replicas, hk_id_groups *g);
void hk_id_groups_free(hk_id_groups *g);

/* ---- the per-device evaluator ------------------------------------------ */
typedef struct hk_eval_plan hk_eval_plan;
typedef struct hk_device_ctx hk_device_ctx;

hk_status *hk_eval_plan_build(const hk_module *m, hk_eval_plan **out);
/* As hk_eval_plan_build, after refusing values above opts->max_value_bytes. */
hk_status *hk_eval_plan_build_checked(const hk_module *m, const hk_eval_options *opts,
                                      hk_eval_plan **out);
void hk_eval_plan_free(hk_eval_plan *p);

struct hk_device_ctx {
  const hk_eval_plan *plan;
  const hk_eval_options *opts;
  int64_t replica, partition, num_replicas, num_partitions;
  hk_collective_backend *backend;      /* NULL on a single device */
  int64_t *exec_count;                 /* per instruction (plan index) */
  uint64_t rng_state;                  /* rng-get-and-update-state */
  uint64_t rng_counter;                /* rng */
  hk_mem_counter mem;
  hk_eval_stats stats;
  int64_t deadline_ns;                 /* CLOCK_MONOTONIC; 0 = none */
  uint32_t steps_since_check;
};

hk_status *hk_device_ctx_init(hk_device_ctx *d, const hk_eval_plan *plan,
                              const hk_eval_options *opts);
void hk_device_ctx_free(hk_device_ctx *d);
/* Runs computation c with args; *out gets a new reference. */
hk_status *hk_eval_computation(hk_device_ctx *d, const hk_computation *c,
                               hk_value *const *args, int n_args, hk_value **out);
/* Error once the device's time budget is spent (call from long loops). */
hk_status *hk_eval_poll(hk_device_ctx *d, const hk_instr *ins);
int64_t hk_eval_plan_instr_index(const hk_eval_plan *p, const hk_instr *i);

/* Scalar computation as a binary reducer: fast kinds are recognised,
 * anything else is evaluated per element. */
typedef enum hk_reducer_kind {
  HK_RED_GENERIC, HK_RED_ADD, HK_RED_MUL, HK_RED_MAX, HK_RED_MIN,
  HK_RED_AND, HK_RED_OR, HK_RED_XOR
} hk_reducer_kind;
hk_reducer_kind hk_reducer_kind_of(const hk_computation *c);

/* ---- op families (each returns a new value in *out) --------------------- */
typedef hk_status *(*hk_op_fn)(hk_device_ctx *d, const hk_instr *ins,
                               hk_value *const *ops, hk_value **out);

hk_status *hk_op_elementwise(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_stochastic_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_bitcast_convert(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
/* Converts one value to element type `to` with XLA's convert semantics. */
hk_value *hk_convert_value(const hk_value *v, hk_prim to);

hk_status *hk_op_broadcast(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_reshape(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_transpose(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_slice(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_dynamic_slice(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_dynamic_update_slice(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_pad(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_concatenate(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_reverse(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_iota(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_dot(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_convolution(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_reduce(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_reduce_window(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_select_and_scatter(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_map(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_gather(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_scatter(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_topk(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_fft(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
/* Custom-call targets that pass their operand through (Sharding, shard
 * barriers, MoveToHost / MoveToDevice, LayoutConstraint, ...). */
bool hk_eval_identity_custom_call(const char *target);
/* A HostExecute custom call: its called computation applied to its operands. */
bool hk_eval_is_host_execute(const hk_instr *ins);
/* batch-norm-training / -inference / -grad (batch_norm.c). */
hk_status *hk_op_batch_norm(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
/* ragged-all-to-all (collectives.c): an error unless update rows
 * [in_off, in_off + size) of the input fit at out_off in the output. */
hk_status *hk_ragged_update_check(const hk_instr *ins, int64_t in_off, int64_t size, int64_t out_off,
                                  int64_t in_rows, int64_t out_rows);
/* ragged-dot (ragged_dot.c): the form read from the instruction, and a
 * kernel computing the result box at olo (out's dims) from operand boxes
 * at llo / rlo (the values' dims) and the groups' start offsets.  Group
 * sizes of rank > 1 hold one row of sizes per position of the lhs dims
 * before their last dim; row_stride maps an lhs position to its row. */
typedef enum { HK_RAGGED_NON_CONTRACTING, HK_RAGGED_CONTRACTING, HK_RAGGED_BATCH } hk_ragged_kind;
typedef struct hk_ragged_dot {
  hk_dot_dnums dn;
  hk_ragged_kind kind;
  int64_t ragged, group_dim, n_groups, n_rows;   /* group_dim -1: none */
  int64_t row_stride[HK_MAX_RANK];   /* per lhs dim: its stride in the sizes' rows (0: not an index) */
  int out_lhs[HK_MAX_RANK], out_rhs[HK_MAX_RANK];   /* result dim's source dims (-1: none) */
} hk_ragged_dot;
hk_status *hk_ragged_dot_form(const hk_instr *ins, hk_ragged_dot *f);
/* n_rows rows of n_groups + 1 offsets: group k of row w is
 * [starts[w (n_groups + 1) + k], starts[w (n_groups + 1) + k + 1])
 * (negative sizes count 0). */
int64_t *hk_ragged_dot_starts(const hk_ragged_dot *f, const hk_value *sizes);
void hk_ragged_dot_box(const hk_ragged_dot *f, const hk_value *lhs, const int64_t *llo, const hk_value *rhs,
                       const int64_t *rlo, const int64_t *starts, const int64_t *olo, hk_value *out);
hk_status *hk_op_ragged_dot(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
/* cholesky / triangular-solve (solve.c). */
hk_status *hk_op_solve(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_sort(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_rng(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_rng_bit_generator(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_rng_get_and_update_state(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
hk_status *hk_op_collective(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);
/* custom_call.c: TopK, identity targets, SPMDFullToShardShape /
 * SPMDShardToFullShape, opaque unknown targets (opts->opaque_custom_calls). */
hk_status *hk_op_custom_call(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out);

/* Applies a scalar computation to scalar values (for generic reducers,
 * comparators, map). args are arrays of rank 0. */
hk_status *hk_eval_scalar_call(hk_device_ctx *d, const hk_computation *c,
                               hk_value *const *args, int n, hk_value **out);

/* Names an instruction in an error: "op name: ..." */
hk_status *hk_eval_error(const hk_instr *ins, hk_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- one element of an elementwise op (helper D) ------------------------
 * The per-element bodies of elementwise.c, shared with the scalar
 * programs so both compute the same bits.  Element ia of a, ib of b,
 * result into element i of out; false: op not supported for the type. */
bool hk_elem_binary(hk_opcode op, const hk_value *a, int64_t ia, const hk_value *b, int64_t ib,
                    hk_value *out, int64_t i);
bool hk_elem_unary(hk_opcode op, const hk_value *a, int64_t i, hk_value *out);
void hk_elem_compare(hk_cmp_dir dir, hk_cmp_type ty, const hk_value *a, int64_t ia,
                     const hk_value *b, int64_t ib, hk_value *out, int64_t i);
/* XLA convert of element i of v into element j of r. */
void hk_elem_convert(const hk_value *v, int64_t i, hk_value *r, int64_t j);

/* ---- scalar programs (scalar_prog.c) -------------------------------------
 * A scalar computation (comparator, reducer, map body) compiled once into a
 * flat register program: each register holds one element in its storage
 * encoding (8 bytes); running it allocates nothing.  Not thread-safe: one
 * program per user.  hk_scalar_prog_compile returns NULL when the
 * computation uses something the program does not cover (then evaluate it
 * with hk_eval_scalar_call). */
typedef struct hk_scalar_prog hk_scalar_prog;
hk_scalar_prog *hk_scalar_prog_compile(const hk_computation *c);
void hk_scalar_prog_free(hk_scalar_prog *p);
/* Sets parameter k from element i of v (v's type must be the parameter's). */
void hk_scalar_prog_set_arg(hk_scalar_prog *p, int k, const hk_value *v, int64_t i);
void hk_scalar_prog_run(hk_scalar_prog *p);
/* Number of results (the root's tuple elements, or 1). */
int hk_scalar_prog_n_results(const hk_scalar_prog *p);
/* Stores result k into element i of v (v has the result's type). */
void hk_scalar_prog_get_result(const hk_scalar_prog *p, int k, hk_value *v, int64_t i);
/* A comparator over n operands: arguments 2k and 2k + 1 from elements i
 * and j of ops[k] (of the arguments' types), run; result 0's truth. */
bool hk_scalar_prog_compare(hk_scalar_prog *p, hk_value *const *ops, int n, int64_t i, int64_t j);
/* Element types of result k and of argument k. */
hk_prim hk_scalar_prog_result_type(const hk_scalar_prog *p, int k);
hk_prim hk_scalar_prog_arg_type(const hk_scalar_prog *p, int k);
/* As hk_scalar_prog_compile, when the parameters have exactly the types
 * args[] and the results the types results[]; else NULL. */
hk_scalar_prog *hk_scalar_prog_compile_typed(const hk_computation *c, int n_args,
                                             const hk_prim *args, int n_results,
                                             const hk_prim *results);
/* A comparator compare(f(p[2k]), f(p[2k+1])) - the same pure function of
 * the two elements of operand k, e.g. TopK's float-bits key - as the
 * program of f (one argument: an element of operand k; one result: the
 * key), with k, the direction and the comparison type; NULL otherwise. */
hk_scalar_prog *hk_scalar_prog_compile_key(const hk_computation *c, int *operand, hk_cmp_dir *dir,
                                           hk_cmp_type *type);
/* Registers in their storage encoding (the element's bytes, zero-padded to
 * 8): pass a result straight back as an argument (reducers). */
void hk_scalar_prog_set_arg_raw(hk_scalar_prog *p, int k, uint64_t raw);
uint64_t hk_scalar_prog_result_raw(const hk_scalar_prog *p, int k);

#endif
