/* sample_internal.h - the demand-driven (sampled) evaluator's private types:
 * boxes of elements, evaluation frames (device x call context x loop
 * iteration), the memo, and the op families of sample_*.c.
 *
 * A request is (frame, instruction, leaf, box): the elements of one array
 * leaf of the instruction's value inside a hyper-rectangle, in the frame's
 * context.  Every op maps the box of its result to the boxes of operand
 * elements it needs, so a sampled output element costs only what it reads
 * (a dot element reads one row and one column).  Results are hk_values
 * shaped like the box (the dense evaluator's element encoding), memoised
 * per request; the dense evaluator's op kernels are reused on them through a
 * "shadow" instruction whose shape is the box's. */
#ifndef HK_SAMPLE_INTERNAL_H
#define HK_SAMPLE_INTERNAL_H

#include "eval/eval_internal.h"

#define SE_MAX_RANK 16
/* Entry-parameter boxes above this many elements are made again on each
 * request instead of memoised (sample_eval.c). */
#define SE_REMAKE_ELEMENTS 4096

/* Elements lo[d] .. lo[d] + n[d] - 1 of each dimension. */
typedef struct se_box {
  int rank;
  int64_t lo[SE_MAX_RANK], n[SE_MAX_RANK];
} se_box;

int64_t se_box_count(const se_box *b);
/* The whole of an array shape. */
void se_box_full(se_box *b, const hk_shape *s);
void se_box_point(se_box *b, int rank, const int64_t *idx);

/* Trip counts of while loops run in a frame (lazily found). */
typedef struct se_trip {
  const hk_instr *site;
  int64_t count;
  struct se_trip *next;
} se_trip;

/* A computation invocation on one device.  Entry frames have no parent; a
 * callee frame is identified by (parent, call site, computation, iter) where
 * iter is the while-loop iteration (0 for call and conditional). */
typedef struct se_frame {
  int64_t id;
  int64_t replica, partition;
  const hk_computation *comp;
  struct se_frame *parent;
  const hk_instr *site;
  int64_t iter;
  struct se_frame *children, *next_sibling;
  se_trip *trips;
} se_frame;

typedef struct se_entry {
  uint64_t hash;
  int64_t frame;
  const hk_instr *ins;
  int32_t leaf;
  int64_t *key;                    /* rank, lo[rank], n[rank] */
  hk_value *v;
} se_entry;

typedef struct se_memo {
  se_entry *e;
  size_t cap, n;
  int64_t bytes;
} se_memo;

/* Per collective instruction: every device's group (as an offset into
 * members) and rank. */
typedef struct se_groups {
  const hk_instr *ins;
  int64_t n_devices;
  int32_t *group_of, *rank_of;     /* per device; -1: in no group */
  int32_t *start;                  /* per group: offset into members, n_groups + 1 */
  int64_t *members;
  int32_t n_groups;
  struct se_groups *next;
} se_groups;

typedef struct se_ctx {
  const hk_module *m;
  const hk_module *global;         /* for parameter shapes; == m for the global run */
  bool partitioned;
  int64_t num_partitions, num_replicas;
  uint64_t seed;
  const hk_sharding **param_sharding;   /* per entry parameter; NULL = whole value */
  hk_module *scratch;              /* box shapes, shadow windows */
  hk_eval_plan *plan;              /* scalar calls of comparators/reducers */
  hk_device_ctx dev;
  hk_eval_options dev_opts;
  se_frame **entry;                /* per device, lazily */
  int64_t next_frame_id;
  se_memo memo;
  int64_t memo_limit;              /* bytes kept between samples */
  int64_t request_limit;           /* largest box one request may need (elements) */
  int64_t deadline_ns;             /* 0: none */
  int transient;                   /* > 0: inside a dot's part (se_part_begin) */
  se_memo part_memo;               /* boxes above SE_REMAKE_ELEMENTS made inside a part:
                                      dropped when the part ends */
  uint32_t polls;
  se_groups *groups;
} se_ctx;

hk_status *se_ctx_init(se_ctx *x, const hk_module *m, const hk_module *global, bool partitioned,
                       int64_t num_partitions, int64_t num_replicas, uint64_t seed);
void se_ctx_free(se_ctx *x);
/* Drops memoised values once they hold more than the memo limit. */
void se_ctx_trim(se_ctx *x);
se_frame *se_entry_frame(se_ctx *x, int64_t device);
/* The frame on `device` with the same call path as f. */
se_frame *se_peer_frame(se_ctx *x, const se_frame *f, int64_t device);
se_frame *se_child_frame(se_ctx *x, se_frame *parent, const hk_instr *site,
                         const hk_computation *comp, int64_t iter);
static inline int64_t se_frame_device(const se_ctx *x, const se_frame *f) {
  return f->replica * x->num_partitions + f->partition;
}

/* The elements of leaf `leaf` of ins in box b: a new reference. */
hk_status *se_eval(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                   hk_value **out);
/* Memoises v as leaf `leaf` of ins in box b (for ops that compute several
 * leaves at once). */
void se_memo_store(se_ctx *x, const se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                   hk_value *v);
/* Operand k of ins (leaf 0) in box b. */
hk_status *se_operand(se_ctx *x, se_frame *f, const hk_instr *ins, int k, const se_box *b,
                      hk_value **out);
/* A scalar operand as int64 (dynamic-slice starts, predicates). */
hk_status *se_scalar_i64(se_ctx *x, se_frame *f, const hk_instr *ins, int k, int64_t *out);

/* ---- shapes and values -------------------------------------------------- */
const hk_shape *se_leaf_shape(const hk_shape *s, int leaf);
int se_leaf_offset(const hk_shape *s, int64_t index);   /* first leaf of tuple element */
const hk_shape *se_box_shape(se_ctx *x, hk_prim elem, const se_box *b);
hk_value *se_value_of_box(hk_prim elem, const se_box *b);
/* Copies the part of src (covering box sb) that lies in box db into dst
 * (covering db). */
void se_copy_box(hk_value *dst, const se_box *db, const hk_value *src, const se_box *sb);
hk_status *se_check_time(se_ctx *x, const hk_instr *ins);
/* A dot's part (read once): big boxes made until the matching
 * se_part_end are memoised only until then. */
void se_part_begin(se_ctx *x);
void se_part_end(se_ctx *x);
/* acc[ai] = c(acc[ai], upd[ui]) with reducer c (kind: hk_reducer_kind_of(c),
 * fast for add/mul/max/min, else the computation is called). */
hk_status *se_combine_elem(se_ctx *x, const hk_computation *c, hk_reducer_kind kind,
                           hk_value *acc, int64_t ai, const hk_value *upd, int64_t ui);

/* ---- op families (the result leaf `leaf` of ins in box b) ---------------- */
typedef hk_status *(*se_op_fn)(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                               const se_box *b, hk_value **out);
hk_status *se_op_parameter_entry(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                 const se_box *b, hk_value **out);
hk_status *se_op_elementwise(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_constant(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_iota(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_move(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_gather(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_scatter(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_dot(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_convolution(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_reduce(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_reduce_window(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_select_and_scatter(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_sort(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_collective(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
/* batch-norm-training / -inference / -grad over the slab of the requested features. */
hk_status *se_op_batch_norm(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_ragged_dot(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
/* cholesky / triangular-solve: whole matrices of the requested batch entries. */
hk_status *se_op_solve(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);
hk_status *se_op_device_id(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b, hk_value **out);

#endif
