/* ir.h - the HLO IR: modules, computations, instructions, literals.
 *
 * Memory: everything belongs to its module and lives in the module's arena
 * (hk_alloc); nothing is freed individually, hk_module_free() releases it
 * all.  Names, shapes and shardings are interned per module.
 *
 * Threads: any number of threads may read a module at once (and call
 * hk_computation_post_order); changing it, including allocating, interning
 * and naming, needs one thread at a time.  One exception the partitioner
 * uses: while one thread only sets instructions' `sharding` fields (and
 * interns shardings), others may read every other field and call
 * hk_computation_post_order, which never reads a sharding.
 *
 * Structs are transparent so passes read fields directly on hot paths.  The
 * ABI rule that makes this safe across versions: the host allocates every
 * struct here, and new fields are only ever appended at the end, so a
 * plugin compiled against an older header sees a valid prefix.  Mutate
 * through the functions (they keep operand/user lists, names and ids
 * consistent); reading fields is always fine.
 *
 * Called computations per opcode (instr->called[]):
 *   while: [condition, body]   conditional: branches (pred: [true, false])
 *   call/fusion/map/reduce/reduce-window/all-reduce/reduce-scatter/scatter/
 *   sort/async-start/custom-call: [to_apply|calls|comparator|...]
 *   select-and-scatter: [select, scatter] */
#ifndef HLOKIT_IR_H
#define HLOKIT_IR_H

#include "export.h"

#include "shape.h"
#include "sharding.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

typedef struct hk_module hk_module;
typedef struct hk_computation hk_computation;
typedef struct hk_instr hk_instr;

/* ---- small attribute types ------------------------------------------ */

typedef struct hk_i64s {           /* a length-prefixed list of int64 */
  int32_t n;
  const int64_t *v;
} hk_i64s;
/* Where x first stands among v[0..n) (a list of dimensions, say), or -1.
 * The one "is d in this list" of the tree.  Inline: no symbol. */
static inline int32_t hk_i64_index(const int64_t *v, int64_t n, int64_t x) {
  for (int64_t k = 0; k < n; k++)
    if (v[k] == x) return (int32_t)k;
  return -1;
}
/* Whether x is in list l. */
static inline bool hk_i64s_has(hk_i64s l, int64_t x) { return hk_i64_index(l.v, l.n, x) >= 0; }

typedef struct hk_kv {             /* key="value" pairs, kept in order */
  const char *key;
  const char *value;
} hk_kv;

typedef struct hk_metadata {
  const char *op_type;             /* NULL when absent */
  const char *op_name;
  const char *source_file;
  int64_t source_line;             /* 0 when absent */
  /* Other metadata fields (profile_type, deduplicated_name, ...) printed
   * verbatim, in order, after the known ones; NULL if none. */
  const char *extra;
} hk_metadata;

typedef struct hk_window_dim {
  int64_t size, stride, pad_lo, pad_hi, base_dilation, window_dilation;
  bool reversal;
} hk_window_dim;

typedef struct hk_window {
  int32_t n_dims;
  const hk_window_dim *dims;
} hk_window;

/* dim_labels=b01f_01io->b01f */
typedef struct hk_conv_dnums {
  int64_t input_batch, input_feature;
  int64_t kernel_input_feature, kernel_output_feature;
  int64_t output_batch, output_feature;
  int32_t n_spatial;
  const int64_t *input_spatial, *kernel_spatial, *output_spatial;
} hk_conv_dnums;

typedef struct hk_dot_dnums {
  hk_i64s lhs_batch, rhs_batch, lhs_contracting, rhs_contracting;
} hk_dot_dnums;

typedef struct hk_gather_dnums {
  hk_i64s offset_dims, collapsed_slice_dims, start_index_map,
      operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim;
} hk_gather_dnums;

typedef struct hk_scatter_dnums {
  hk_i64s update_window_dims, inserted_window_dims,
      scatter_dims_to_operand_dims, input_batching_dims,
      scatter_indices_batching_dims;
  int64_t index_vector_dim;
} hk_scatter_dnums;

typedef struct hk_slice_dim { int64_t start, limit, stride; } hk_slice_dim;
typedef struct hk_pad_dim { int64_t lo, hi, interior; } hk_pad_dim;

/* replica_groups={{0,1},{2,3}} or replica_groups=[2,2]<=[4] */
typedef struct hk_replica_groups {
  int32_t n_groups;
  const int32_t *group_start;      /* n_groups + 1 offsets into ids */
  const int64_t *ids;
  const hk_iota *iota;             /* non-NULL when spelled in iota form */
} hk_replica_groups;

typedef struct hk_pair { int64_t a, b; } hk_pair;

typedef enum hk_cmp_dir { HK_CMP_NONE, HK_CMP_EQ, HK_CMP_NE, HK_CMP_LT, HK_CMP_LE, HK_CMP_GT, HK_CMP_GE } hk_cmp_dir;
typedef enum hk_cmp_type { HK_CMPT_DEFAULT, HK_CMPT_FLOAT, HK_CMPT_TOTALORDER, HK_CMPT_SIGNED, HK_CMPT_UNSIGNED } hk_cmp_type;

/* An attribute kept verbatim: name=value exactly as written. */
typedef struct hk_raw_attr {
  const char *name;
  const char *value;
} hk_raw_attr;

/* ---- literals --------------------------------------------------------- */
/* Dense row-major data in logical index order (layout does not matter),
 * hk_prim_storage_bytes() per element: pred/s2/s4/u2/u4/f4/f8 one byte,
 * f16/bf16 raw 16-bit patterns, c64 two floats, c128 two doubles. */
typedef struct hk_literal {
  const hk_shape *shape;
  void *data;                      /* NULL for tuples and elided constants */
  int64_t nbytes;
  int32_t n_elems;                 /* tuple literal */
  struct hk_literal **elems;
  bool elided;                     /* printed as {...}: values unknown */
} hk_literal;

hk_literal *hk_literal_new(hk_module *m, const hk_shape *shape); /* zeroed */
double hk_literal_get_f64(const hk_literal *l, int64_t linear_index);
int64_t hk_literal_get_i64(const hk_literal *l, int64_t linear_index);
void hk_literal_set_f64(hk_literal *l, int64_t linear_index, double v);
void hk_literal_set_i64(hk_literal *l, int64_t linear_index, int64_t v);
/* f16/bf16/f8 conversions used by literals and the evaluator. */
float hk_half_to_float(uint16_t h);
uint16_t hk_float_to_half(float f);
float hk_bf16_to_float(uint16_t h);
uint16_t hk_float_to_bf16(float f);     /* round to nearest even */
double hk_small_float_decode(hk_prim p, uint8_t bits);    /* f8/f4 types */
uint8_t hk_small_float_encode(hk_prim p, double v);

/* ---- rarer instruction attributes ------------------------------------- */
/* Allocated on demand by hk_instr_attrs(); zero means "absent" for every
 * field (counts 0, pointers NULL, ids 0, flags false). */
typedef struct hk_attrs {
  hk_literal *literal;             /* constant */
  int64_t parameter_number;        /* parameter */
  int64_t tuple_index;             /* get-tuple-element: index= */
  uint8_t cmp_dir, cmp_type;       /* compare: direction=, type= */
  const hk_window *window;         /* conv, reduce-window, select-and-scatter */
  const hk_conv_dnums *conv;       /* dim_labels= */
  int64_t feature_group_count;     /* 0 = default (1) */
  int64_t batch_group_count;       /* 0 = default (1) */
  const hk_dot_dnums *dot;
  const hk_gather_dnums *gather;
  hk_i64s gather_slice_sizes;      /* gather slice_sizes= */
  const hk_scatter_dnums *scatter;
  bool indices_are_sorted, unique_indices;
  int32_t n_slice;                 /* slice={[a:b:c], ...} */
  const hk_slice_dim *slice;
  hk_i64s dynamic_slice_sizes;     /* dynamic-slice */
  int32_t n_pad;                   /* pad padding=lo_hi_interior x ... */
  const hk_pad_dim *pad;
  const hk_replica_groups *replica_groups;
  int32_t n_source_target_pairs;
  const hk_pair *source_target_pairs;
  int64_t channel_id;              /* 0 = none */
  bool use_global_device_ids, constrain_layout, is_host_transfer;
  const char *custom_call_target;
  bool custom_call_has_side_effect;
  const char *backend_config;      /* verbatim text of the value, quotes included */
  int32_t api_version;             /* 0 = unset / API_VERSION_ORIGINAL default */
  const char *fusion_kind;         /* kLoop, kInput, kOutput, kCustom */
  bool is_stable;                  /* sort */
  const char *rng_distribution;    /* rng: rng_uniform / rng_normal */
  const char *rng_algorithm;       /* rng-bit-generator: rng_default, ... */
  int64_t rng_delta;               /* rng-get-and-update-state delta= */
  const hk_metadata *metadata;
  int32_t n_frontend_attributes;
  const hk_kv *frontend_attributes;
  int32_t n_control_preds;
  hk_instr **control_preds;
  int32_t n_control_succs;
  hk_instr **control_succs;
  int32_t n_operand_precision;     /* operand_precision={high,default} */
  const char *const *operand_precision;
  int32_t n_parameter_replication;
  const bool *parameter_replication;
  int64_t exponent_bits, mantissa_bits;   /* reduce-precision */
  const char *infeed_config;       /* infeed/outfeed config string */
  int64_t k; bool largest;         /* topk */
  const char *fft_type; hk_i64s fft_length;
  bool is_composite;               /* call */
  const char *async_execution_thread;
  /* Every other attribute, name=value verbatim, in the order written. */
  int32_t n_raw;
  const hk_raw_attr *raw;
} hk_attrs;

/* ---- instructions ------------------------------------------------------ */
struct hk_instr {
  uint16_t opcode;                 /* hk_opcode */
  uint16_t flags;                  /* host-private bits; do not touch */
  int32_t n_operands, cap_operands;
  int32_t n_users, cap_users;
  int32_t n_dims;                  /* dimensions=, iota_dimension= (1 entry) */
  int32_t n_called;
  int64_t id;                      /* unique in the module */
  const char *name;                /* interned, unique in the module */
  const hk_shape *shape;
  hk_computation *parent;
  hk_instr *prev, *next;           /* order within the computation */
  hk_instr **operands;
  hk_instr **users;                /* each user once: appended on first use; a
                                      removed user's slot takes the last one (XLA) */
  int64_t *dims;
  hk_computation **called;
  const hk_sharding *sharding;     /* NULL = no sharding */
  hk_attrs *attrs;                 /* NULL = none of the rarer attributes */
  void *scratch;                   /* free for the running pass */
};

/* For a walk down an instruction list (reading a field or two per
 * instruction, so bound by memory): the structs lie mostly in list order
 * in memory, so the one 12 structs on is the one the walk needs soon;
 * loading both its lines keeps the memory busy.  A hint, never
 * dereferenced.  A walk of the 850K-instruction partitioned MLP: 27 ms
 * with one line 4 ahead, 17 ms like this.  ABI 1.4 (inline: no
 * symbol). */
static inline void hk_instr_prefetch_ahead(const hk_instr *i) {
  const char *ahead = (const char *)i + 12 * sizeof *i;
  __builtin_prefetch(ahead);
  __builtin_prefetch(ahead + 64);
}

/* ---- computations ------------------------------------------------------ */
struct hk_computation {
  const char *name;                /* interned */
  hk_module *module;
  hk_instr *first, *last;          /* instruction list, in print order */
  int64_t n_instrs;
  hk_instr *root;
  int32_t n_params;
  hk_instr **params;               /* by parameter number */
  bool is_entry;
  const char *execution_thread;    /* NULL = "main" */
  int32_t index;                   /* position in module->computations */
  void *scratch;
  int32_t cap_params;              /* allocated length of params */
};

/* ---- modules ------------------------------------------------------------ */
typedef struct hk_program_shape {
  int32_t n_params;
  const hk_shape *const *params;
  const char *const *param_names;  /* may be NULL */
  const hk_shape *result;
} hk_program_shape;

typedef struct hk_module_config {
  int64_t num_partitions;          /* 1 by default */
  int64_t replica_count;           /* 1 by default */
  bool use_spmd_partitioning;
  bool is_scheduled;
  bool has_entry_layout;           /* entry_computation_layout={...} given */
  hk_program_shape entry_layout;
  int32_t n_allow_prop_to_output;  /* allow_spmd_sharding_propagation_to_output={...} */
  const bool *allow_prop_to_output;
  int32_t n_allow_prop_to_params;
  const bool *allow_prop_to_params;
  int32_t n_frontend_attributes;
  const hk_kv *frontend_attributes;
  /* Recorded by the SPMD partitioner (RecordInputsOutputsSharding). */
  int32_t n_spmd_parameters_shardings;
  const hk_sharding *const *spmd_parameters_shardings;
  const hk_sharding *spmd_output_sharding;
  /* Other header attributes (input_output_alias=, buffer_donor=, ...),
   * verbatim and in order. */
  int32_t n_raw;
  const hk_raw_attr *raw;
} hk_module_config;

struct hk_module {
  const char *name;
  hk_computation *entry;
  int32_t n_computations, cap_computations;
  hk_computation **computations;   /* in print order (callees first) */
  hk_module_config config;
  int64_t next_id;                 /* next instruction id */
  struct hk_module_impl *impl;     /* host-private: arena, intern tables */
};

/* ---- module ------------------------------------------------------------ */
hk_module *hk_module_new(const char *name);
void hk_module_free(hk_module *m);
/* Arena allocation: zeroed, 16-byte aligned, freed with the module. */
void *hk_alloc(hk_module *m, size_t n);
void *hk_memdup(hk_module *m, const void *p, size_t n);
/* A zeroed block of n bytes outside any module, for a big temporary array
 * a pass fills from its start: its pages are made present on a helper
 * thread while the caller starts filling it (where hk_worker_threads
 * allows one).  Freed with hk_free_block and the same n (ABI 1.3). */
void *hk_alloc_block(size_t n);
void hk_free_block(void *p, size_t n);
/* Interned NUL-terminated copy of s[0..len). */
const char *hk_intern(hk_module *m, const char *s, size_t len);
const char *hk_intern_cstr(hk_module *m, const char *s);
/* Bytes the module holds (arena plus tables), for benchmarks. */
size_t hk_module_memory(const hk_module *m);

hk_computation *hk_module_find_computation(hk_module *m, const char *name);
/* A new empty computation appended to the module (name made unique). */
hk_computation *hk_computation_new(hk_module *m, const char *name);
void hk_module_set_entry(hk_module *m, hk_computation *c);
/* Removes a computation nobody calls any more. */
void hk_module_remove_computation(hk_module *m, hk_computation *c);
/* Reorders module->computations so every callee precedes its callers
 * (stable otherwise), as XLA prints them. */
void hk_module_sort_computations(hk_module *m);
/* The same sort, calling visit(ctx, i) on every instruction of the module
 * (computations in their order before the sort, each list in order) during
 * the walk the sort makes anyway: one walk for a caller that needs both.
 * visit may change the instruction's own fields other than its operands,
 * called computations and list links; it must not add or remove
 * instructions or computations (ABI 1.3). */
void hk_module_sort_computations_visiting(hk_module *m, void (*visit)(void *ctx, hk_instr *i),
                                          void *ctx);
/* A name not yet used in the module: prefix, or prefix.N.
 * Instruction names follow XLA's NameUniquer: characters other than
 * [A-Za-z0-9_.-] become '_', a type name ("f32") gets a trailing '_', a
 * leading "__" becomes "a_"; "root.N" registers N for root, and a taken name
 * gets the root's next free number.  Names of removed instructions are
 * never handed out again.  The returned name is reserved: the first
 * hk_instr_new / hk_instr_set_name asking for exactly it gets it. */
const char *hk_module_unique_name(hk_module *m, const char *prefix);
/* Largest channel id in use + 1 (XLA's hlo_query::NextChannelId). */
int64_t hk_module_next_channel_id(const hk_module *m);
/* A count that grows with every edit of m's graph made through this
 * header: an instruction made, removed or given other operands, uses,
 * control edges, dims, called computations or attributes (hk_instr_attrs
 * counts, as its caller may write), a root, a parameter, a computation
 * added, removed or reordered, the entry set.  Shardings, names and
 * scratch are not edits of the graph; nor is a direct write to a struct
 * field.  A fact computed from the graph stays true while the count is
 * the one it was computed at, so a cache keeps it with the count and
 * recomputes when the count moved (ABI 1.7). */
uint64_t hk_module_changes(const hk_module *m);
/* Deep copy of the whole module. */
hk_module *hk_module_clone(const hk_module *m);

/* ---- computation --------------------------------------------------------- */
hk_instr *hk_computation_find_instr(hk_computation *c, const char *name);
void hk_computation_set_root(hk_computation *c, hk_instr *root);
/* Instructions in XLA's post order (MakeInstructionPostOrder): a DFS from
 * each instruction without users, in list order, visiting control
 * predecessors, then operands in order, then earlier collectives with the
 * same channel id.  Returns a malloc'ed array (caller frees); *n gets the
 * count.  Iterative.  A big computation whose list already has every
 * operand and control predecessor before its user (what the parser and
 * most rewrites make) is walked once in list order and the DFS runs over
 * list positions, or is skipped when the list provably is the order
 * already: about two list walks, no lock.  Otherwise the DFS marks
 * instructions, and such concurrent calls are serialised. */
hk_instr **hk_computation_post_order(const hk_computation *c, int64_t *n);
/* Whether every operand and control predecessor of each instruction of c
 * is an instruction of c listed before it: the list is then a topological
 * order (any walk in list order sees an instruction after what it
 * depends on) and c has no cycle.  Exact, one list walk; the one proof
 * the verifier and the passes use. */
bool hk_computation_list_is_topological(const hk_computation *c);
/* Computes the program shape (params by number, root shape). */
hk_program_shape hk_computation_program_shape(hk_computation *c);
/* Puts parameter p in c->params at its parameter_number (set in
 * hk_instr_attrs(p) first), growing the array; n_params becomes at least
 * parameter_number + 1. */
void hk_computation_register_param(hk_computation *c, hk_instr *p);

/* ---- instruction ---------------------------------------------------------- */
/* A new instruction appended to c's list, named `name` if unique in the
 * module (else name.N; NULL means the opcode name).  Operands are linked,
 * users updated. */
hk_instr *hk_instr_new(hk_computation *c, hk_opcode op, const hk_shape *shape,
                       int n_operands, hk_instr *const *operands,
                       const char *name);
/* As hk_instr_new but inserted just before `before` in its computation. */
hk_instr *hk_instr_new_before(hk_instr *before, hk_opcode op, const hk_shape *shape,
                              int n_operands, hk_instr *const *operands,
                              const char *name);
/* The attribute block, allocated (zeroed) on first use. */
hk_attrs *hk_instr_attrs(hk_instr *i);
void hk_instr_set_dims(hk_instr *i, int n, const int64_t *dims);
void hk_instr_set_called(hk_instr *i, int n, hk_computation *const *called);
void hk_instr_set_name(hk_instr *i, const char *name);   /* made unique */
/* Sets (NULL: clears) i's sharding: s interned in i's module (what the
 * hk_sharding_* constructors return, or another instruction's sharding of
 * the same module).  The one way a pass changes a sharding, so the IR can
 * later note the change in one place.  ABI 1.4. */
void hk_instr_set_sharding(hk_instr *i, const hk_sharding *s);
void hk_instr_append_operand(hk_instr *i, hk_instr *op);
void hk_instr_set_operand(hk_instr *i, int idx, hk_instr *op);
/* Every use of `old` (operands, and the root if it is one) now uses `new_`.
 * If new_ itself uses old, that use is kept (no self-loop). */
void hk_instr_replace_all_uses(hk_instr *old, hk_instr *new_);
/* Unlinks and removes an instruction without users (operands' user lists
 * updated, control edges dropped).  Returns an error if it still has users
 * or is the root. */
hk_status *hk_instr_remove(hk_instr *i);
void hk_instr_add_control_dep(hk_instr *pred, hk_instr *succ);
void hk_instr_remove_control_deps(hk_instr *i);
/* Copies an instruction (attributes, sharding, dims, called) into
 * computation c with new operands, appended.  shape NULL = src's shape;
 * name NULL = src's name, made unique (XLA's CloneWithNewOperands).
 * Control edges are not copied; called computations are the same pointers
 * (re-point them when cloning into another module). */
hk_instr *hk_instr_clone(hk_computation *c, const hk_instr *src,
                         const hk_shape *shape, int n_operands,
                         hk_instr *const *operands, const char *name);
/* XLA's AddSuffixToInstructionName, for naming clones: "foo" + "clone" is
 * "foo.clone", "foo.clone" gives "foo.clone2", "foo.clone2" gives
 * "foo.clone3".  Returns an interned string; hk_instr_new / hk_instr_clone
 * then make it unique. */
const char *hk_name_with_suffix(hk_module *m, const char *name, const char *suffix);
/* True for ops XLA never removes as dead (side effects). */
bool hk_instr_has_side_effect(const hk_instr *i);
/* Convenience getters with XLA defaults. */
int64_t hk_instr_channel_id(const hk_instr *i);
/* XLA's channel_id().has_value(): true also for a written channel_id=0
 * (kept as the raw attribute channel_id=0, the field staying 0). */
bool hk_instr_has_channel_id(const hk_instr *i);
int64_t hk_instr_parameter_number(const hk_instr *i);
int64_t hk_instr_tuple_index(const hk_instr *i);
const hk_metadata *hk_instr_metadata(const hk_instr *i);
/* Field-by-field equality of two metadata records (an empty string
 * equals an absent one); what the sharding interner compares. */
bool hk_metadata_equal(const hk_metadata *a, const hk_metadata *b);
bool hk_instr_is_root(const hk_instr *i);

/* ---- builders -------------------------------------------------------------- */
/* The instructions rewrites create most, placed just before `before` when
 * it is non-NULL, else appended to c. */
/* A scalar constant of type t (the value converted as hk_literal_set_i64 /
 * hk_literal_set_f64 do). */
hk_instr *hk_build_constant_i64(hk_computation *c, hk_instr *before, hk_prim t, int64_t v);
hk_instr *hk_build_constant_f64(hk_computation *c, hk_instr *before, hk_prim t, double v);
/* broadcast(scalar) to shape's dims, keeping scalar's element type;
 * scalar itself when shape has rank 0. */
hk_instr *hk_build_broadcast_scalar(hk_computation *c, hk_instr *before, hk_instr *scalar,
                                    const hk_shape *shape);

/* ---- appended (host/ir/remove_many.c) ---------------------------------------- */
/* Removes v[0..n) as hk_instr_remove() on each in this order would (the
 * same user-list order afterwards), but in time linear in n plus the user
 * counts of their operands, where one removal at a time costs an
 * operand's user count each (a constant shared by a million users).
 * Each instruction's users must all come before it in v; none may be a
 * root or listed twice.  On error nothing is removed. */
hk_status *hk_instrs_remove(hk_instr *const *v, int64_t n);

/* ---- appended (host/ir/instr.c, clone.c): names handed to a replacement ---- */
/* `to` takes `from`'s name exactly (no uniquing, no new string): lookups
 * by that name find `to` from then on.  It costs at most one probe of the
 * name map, and less in a run: the entries of names taken one after
 * another are updated together, probes overlapped, before the next lookup
 * or removal reads them.  `from` keeps pointing at the same string but no
 * longer owns it, so removing `from`, or its whole computation, leaves the
 * name alone (and removing a computation whose names were all taken visits
 * none of its instructions).  to's previous name is retired as
 * hk_instr_set_name would.  For passes that rebuild a computation and want
 * each new instruction to carry the name of the one it replaces: until
 * `from` goes, two instructions share one name, so remove it (or its
 * computation) before printing.  A later request for the same name
 * (hk_instr_new, hk_module_unique_name, ...) still gets a fresh one.  When
 * `from` is in another module (or removed), `to` gets a uniqued copy of
 * its name, as hk_instr_set_name would. */
void hk_instr_take_name(hk_instr *to, hk_instr *from);
/* hk_instr_clone(c, src, shape, n_operands, operands, NULL), except that the
 * copy takes src's name as hk_instr_take_name does instead of getting a
 * uniqued one of its own.  When src is in another module the copy gets a
 * uniqued name as hk_instr_clone would. */
hk_instr *hk_instr_clone_taking_name(hk_computation *c, hk_instr *src, const hk_shape *shape,
                                     int n_operands, hk_instr *const *operands);

/* ---- appended (host/ir/module.c): memory of removed instructions ---------- */
/* An exception to "nothing is freed individually", for a pass that has just
 * dropped a big computation (a partitioner replacing the original one):
 * gives the memory of removed instructions' structs back to the system
 * where whole pages hold nothing else.  Costs a read of every instruction
 * struct the module ever made (about 20 ns each).  Afterwards no removed
 * instruction (hk_instr_remove, hk_instrs_remove, or in a computation
 * removed with hk_module_remove_computation) may be read again: its fields
 * may read as zeros.  Their names, attributes and operand lists stay.
 * Returns the bytes of the pages given back (pages given back by an
 * earlier call count again). */
size_t hk_module_release_removed(hk_module *m);

/* ---- appended (host/ir/computation.c): calling instructions ------------------- */
/* The instructions of c that call computations (n_called > 0), in list
 * order, found in one sequential walk: a malloc'ed array (caller frees;
 * NULL when there are none), *n the count.  For whole-module call-graph
 * scans, which then visit only these. */
hk_instr **hk_computation_calling_instrs(const hk_computation *c, int64_t *n);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
