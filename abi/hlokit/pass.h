/* pass.h - the plugin ABI: plugin entry point, passes, typed options,
 * the pass registry and the custom-call partitioner registry.
 *
 * ---- A plugin ---------------------------------------------------------
 * A plugin is a shared object exporting ONE symbol, hlokit_plugin_info, a
 * function returning a pointer to a const hk_plugin_info (LLVM's
 * llvmGetPassPluginInfo, SQLite's extension entry point).  Its FIRST member
 * is abi_version: the host reads it before anything else and refuses a
 * plugin whose major version differs from its own (or whose minor is newer
 * than the host's), naming the file and both versions.  Then the host calls
 * register_fn, which adds passes and custom-call partitioners:
 *
 *     static const hk_pass_desc my_pass = {
 *       .size = sizeof(hk_pass_desc), .name = "my-pass",
 *       .summary = "one line", .options = my_opts, .n_options = 2,
 *       .create = my_pass_create };
 *     static hk_status *register_passes(hk_registry *reg) {
 *       return hk_registry_add_pass(reg, &my_pass);
 *     }
 *     HK_PLUGIN("my-plugin", "1.0", register_passes)
 *
 * Descriptors, option declarations and vtables must stay valid while the
 * plugin is loaded (make them static const); the registry keeps pointers.
 *
 * ---- Versioning -------------------------------------------------------
 * Every struct a plugin hands to the host that may grow (hk_pass_desc,
 * hk_pass_vtable, hk_custom_call_partitioner_vtable) starts with a `size`
 * member set to sizeof() as the plugin saw it.  New members are only ever
 * appended within a major ABI version; the host reads a member only when
 * `size` covers it (HK_HAS_MEMBER), so an older plugin keeps working with a
 * newer host.
 *
 * ---- Passes and subclassing -------------------------------------------
 * A pass (XLA's HloPassInterface) is any struct whose FIRST member is a
 * pointer to a const hk_pass_vtable; hk_pass is that first member alone.
 * A pipeline is itself a pass (hk_pipeline_new).
 *
 * Subclassing is struct embedding plus a vtable that overrides some slots
 * and calls the base's vtable for the rest:
 *
 *     typedef struct base_pass { hk_pass pass; int threshold; } base_pass;
 *     typedef struct derived_pass { base_pass base; uint64_t seed; } derived_pass;
 *
 *     static hk_status *derived_run(hk_pass *self, hk_module *m,
 *                                   const hk_exec_threads *t, bool *changed) {
 *       derived_pass *d = (derived_pass *)self;   // valid: first member chain
 *       ... extra work ...
 *       return base_vtable.run(self, m, t, changed);  // "call the base"
 *     }
 *     static const hk_pass_vtable derived_vtable = {
 *       .size = sizeof(hk_pass_vtable), .name = "derived",
 *       .run = derived_run, .destroy = base_destroy };   // inherited slot
 *
 * A pass that exposes more hooks than run/destroy (the SPMD partitioner's
 * create_visitor, preprocess_sharding,
 * can_side_effecting_have_replicated_sharding, collective-ops creator)
 * publishes an EXTENSION VTABLE whose first member is the hk_pass_vtable:
 *
 *     typedef struct hk_spmd_partitioner_vtable {
 *       hk_pass_vtable pass;          // first: it is a pass vtable too
 *       size_t ext_size;              // sizeof this extension, for growth
 *       hk_status *(*preprocess_sharding)(...);
 *       ...
 *     } hk_spmd_partitioner_vtable;
 *
 * The base implementation's hooks read the vtable through self->vt (cast to
 * the extension type), never by calling their own functions directly, so a
 * derived vtable that overrides preprocess_sharding is seen by the base's
 * run.  A derived vtable copies the base vtable's slots it does not
 * override.  Code outside the defining plugin finds an extension through
 * get_extension(self, interface_name) (NULL when the pass has none), since
 * plugins are loaded RTLD_LOCAL and cannot see each other's symbols; a
 * derived pass in another plugin creates its base with
 * hk_registry_create_pass() and wraps it.
 *
 * ---- How plugins reach the IR -----------------------------------------
 * By linking against libhlokit.so (see hlokit.h): hk_* functions are plain
 * exported symbols the dynamic linker resolves when the host loads a
 * plugin.  Chosen over a table of function pointers because passes call IR
 * functions on hot paths and the IR is already append-only-versioned. */
#ifndef HLOKIT_PASS_H
#define HLOKIT_PASS_H

#include "export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ir.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

/* True when a struct starting with `size` was built with member m. */
#define HK_HAS_MEMBER(ptr, type, m) \
  ((ptr)->size >= offsetof(type, m) + sizeof(((type *)0)->m))

typedef struct hk_registry hk_registry;

/* ---- execution threads ------------------------------------------------ */
/* The execution threads a run is scoped to (XLA's execution_threads):
 * n == 0 (or a NULL pointer) means every thread.  A computation's thread is
 * computation->execution_thread, NULL meaning "main". */
typedef struct hk_exec_threads {
  int32_t n;
  const char *const *names;
} hk_exec_threads;

/* True when computation c belongs to one of the threads. */
bool hk_exec_threads_include(const hk_exec_threads *t, const hk_computation *c);

/* ---- worker threads (not XLA's execution threads) ------------------------ */
/* How many CPU threads hlokit's own work may keep busy at once (the host
 * prefaults memory and prints on a second one; a pass may compute ahead on
 * one).  1 (everything on the calling thread, the library starts no
 * thread) until the program asks for more with hk_set_worker_threads
 * (ABI 1.3). */
int hk_worker_threads(void);
/* Asks for worker threads: n >= 1 exactly n; 0 the automatic count
 * (HLOKIT_THREADS when it is set to a number >= 1, else the online CPUs),
 * which the hlokit executable asks for at start.  Threads already started
 * (the prefault helper) stay; n < 0 is ignored.  ABI 1.4. */
void hk_set_worker_threads(int n);

/* ---- passes --------------------------------------------------------------- */
typedef struct hk_pass hk_pass;

typedef struct hk_pass_vtable {
  size_t size;                     /* sizeof(hk_pass_vtable) as built */
  const char *name;                /* the pass name, e.g. "hlo-dce" */
  /* Runs over the computations of m in `threads`; sets *changed when the
   * module was modified.  Errors name what went wrong. */
  hk_status *(*run)(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                    bool *changed);
  void (*destroy)(hk_pass *self);  /* frees the pass */
  /* Optional (may be NULL): the extension vtable for interface `iface`
   * (e.g. "hlokit.spmd-partitioner"), or NULL if this pass has none. */
  const void *(*get_extension)(hk_pass *self, const char *iface);
} hk_pass_vtable;

struct hk_pass {
  const hk_pass_vtable *vt;
};

static inline const char *hk_pass_name(const hk_pass *p) { return p->vt->name; }
static inline hk_status *hk_pass_run(hk_pass *p, hk_module *m,
                                     const hk_exec_threads *threads, bool *changed) {
  return p->vt->run(p, m, threads, changed);
}
static inline void hk_pass_destroy(hk_pass *p) {
  if (p) p->vt->destroy(p);
}
/* The pass object most passes need, header-only (no ABI symbol): `size`
 * zeroed bytes, for a struct whose first member is hk_pass (size >=
 * sizeof(hk_pass)), with vt set.  Out of memory: NULL and *err names the
 * pass.  hk_pass_free is the destroy slot of a pass that owns nothing more:
 *
 *     static const hk_pass_vtable vt = {.size = sizeof vt, .name = "my-pass",
 *                                       .run = my_run, .destroy = hk_pass_free};
 *     static hk_pass *my_create(const hk_option_values *o, hk_registry *r,
 *                               hk_status **err) {
 *       (void)o, (void)r;
 *       return hk_pass_alloc(&vt, sizeof(hk_pass), err);
 *     }
 */
static inline hk_pass *hk_pass_alloc(const hk_pass_vtable *vt, size_t size, hk_status **err) {
  hk_pass *p = (hk_pass *)calloc(1, size < sizeof(hk_pass) ? sizeof(hk_pass) : size);
  if (!p) {
    *err = hk_error(HK_INTERNAL, "%s: out of memory", vt->name);
    return NULL;
  }
  p->vt = vt;
  return p;
}
static inline void hk_pass_free(hk_pass *self) { free(self); }

static inline const void *hk_pass_extension(hk_pass *p, const char *iface) {
  if (!HK_HAS_MEMBER(p->vt, hk_pass_vtable, get_extension) || !p->vt->get_extension)
    return NULL;
  return p->vt->get_extension(p, iface);
}

/* ---- counters: what a pass's last run counted (interface "hlokit.counters") --
 * A pass that counts things worth reporting (the SPMD partitioner's full
 * rematerializations, say) returns an hk_pass_counters_vtable from
 * get_extension(self, HK_COUNTERS_IFACE).  It is an extension, not a new
 * hk_pass_vtable slot, because extension vtables embed hk_pass_vtable by
 * value: growing it would move their members (since ABI 1.1). */
#define HK_COUNTERS_IFACE "hlokit.counters"

/* Receives one counter: `name` is a static string of the pass
 * (lower_snake_case), valid during the call. */
typedef void (*hk_counter_fn)(void *ctx, const char *name, int64_t value);

typedef struct hk_pass_counters_vtable {
  size_t size;                     /* sizeof as built */
  /* Calls emit once per counter of the last run (zero counts included). */
  void (*report)(hk_pass *self, hk_counter_fn emit, void *ctx);
} hk_pass_counters_vtable;

/* Reports p's counters through emit; false when p has none. */
static inline bool hk_pass_report_counters(hk_pass *p, hk_counter_fn emit, void *ctx) {
  const hk_pass_counters_vtable *c =
      (const hk_pass_counters_vtable *)hk_pass_extension(p, HK_COUNTERS_IFACE);
  if (!c || !HK_HAS_MEMBER(c, hk_pass_counters_vtable, report) || !c->report) return false;
  c->report(p, emit, ctx);
  return true;
}

/* ---- typed options ------------------------------------------------------ */
typedef enum hk_option_type {
  HK_OPT_BOOL,        /* true / false */
  HK_OPT_INT,         /* decimal int64 */
  HK_OPT_STRING,      /* any text (quote with "..." to include spaces) */
  HK_OPT_ENUM,        /* one of choices[] */
  HK_OPT_BOOL_LIST,   /* [true,false,...] */
} hk_option_type;

typedef struct hk_option_decl {
  const char *name;
  hk_option_type type;
  /* The default, spelled as a user would write it: "true", "100",
   * "[false,true]", "kLoop"; NULL means false / 0 / "" / the first choice /
   * the empty list.  Checked when the pass is registered. */
  const char *default_value;
  const char *help;
  const char *const *choices;  /* HK_OPT_ENUM: NULL-terminated list */
} hk_option_decl;

/* The values a pass is created with: every declared option, defaulted
 * where the user gave none.  Owned by the host; valid during create(). */
typedef struct hk_option_values hk_option_values;

/* Typed accessors.  `name` must be a declared option of that type; asking
 * for anything else is a plugin bug and aborts with a message naming the
 * pass and the option. */
bool hk_opt_bool(const hk_option_values *v, const char *name);
int64_t hk_opt_int(const hk_option_values *v, const char *name);
const char *hk_opt_string(const hk_option_values *v, const char *name);
const char *hk_opt_enum(const hk_option_values *v, const char *name);
int hk_opt_enum_index(const hk_option_values *v, const char *name);
/* Returns the list length; *out points at the values (owned by v). */
int32_t hk_opt_bool_list(const hk_option_values *v, const char *name,
                         const bool **out);
/* True when the user set the option explicitly (not defaulted). */
bool hk_opt_is_set(const hk_option_values *v, const char *name);
const char *hk_option_type_name(hk_option_type t);

/* ---- pass descriptors (factories registered by name) ---------------------- */
typedef struct hk_pass_desc {
  size_t size;                     /* sizeof(hk_pass_desc) as built */
  const char *name;                /* registry key, e.g. "hlo-dce" */
  const char *summary;             /* one line, for `hlokit passes` */
  const hk_option_decl *options;
  int32_t n_options;
  /* Creates a pass.  reg lets a pass create other passes by name or reach
   * the custom-call partitioners; it outlives every pass it creates.  On
   * failure returns NULL and sets *err. */
  hk_pass *(*create)(const hk_option_values *opts, hk_registry *reg,
                     hk_status **err);
} hk_pass_desc;

/* ---- custom-call partitioners ---------------------------------------------- */
/* The SPMD partitioner's per-instruction context for a custom call (its
 * visitor: partitioned operands, builder, collective creator).  Defined by
 * the SPMD partitioner's own header. */
typedef struct hk_spmd_partition_ctx hk_spmd_partition_ctx;
typedef struct hk_custom_call_partitioner hk_custom_call_partitioner;

/* XLA's CustomCallPartitioner + CustomCallShardingHelper, keyed by
 * custom_call_target.  Shardings returned are interned in the instruction's
 * module.  A NULL slot means the XLA default (noted per slot). */
typedef struct hk_custom_call_partitioner_vtable {
  size_t size;                     /* sizeof as built */
  /* May propagation shard this custom call?  (default: false) */
  bool (*is_shardable)(const hk_custom_call_partitioner *self, const hk_instr *cc);
  /* Sharding for cc from its operands' shardings, or NULL for none. */
  const hk_sharding *(*infer_sharding_from_operands)(
      const hk_custom_call_partitioner *self, const hk_instr *cc);
  /* Sharding operand-side propagation should give cc given that `user`
   * wants `user_sharding` (default: user_sharding). */
  const hk_sharding *(*propagate_user_sharding)(
      const hk_custom_call_partitioner *self, const hk_instr *cc,
      const hk_instr *user, const hk_sharding *user_sharding);
  /* May a side-effecting instance be given a replicated sharding?
   * (default: false) */
  bool (*can_side_effecting_have_replicated_sharding)(
      const hk_custom_call_partitioner *self);
  /* Partitions cc inside the SPMD partitioner. */
  hk_status *(*partition)(const hk_custom_call_partitioner *self,
                          hk_spmd_partition_ctx *ctx, hk_instr *cc);
  void (*destroy)(hk_custom_call_partitioner *self);  /* may be NULL: static */
} hk_custom_call_partitioner_vtable;

struct hk_custom_call_partitioner {
  const hk_custom_call_partitioner_vtable *vt;
};

/* ---- the registry (implemented by the host) -------------------------------- */
/* Adds a pass factory.  A name already registered is an error
 * (HK_ALREADY_EXISTS naming both plugin files), except the drop-in: a
 * plugin the user named with --load-pass-plugin replaces a pass that came
 * from the default plugin directory, and the host says so on stderr. */
hk_status *hk_registry_add_pass(hk_registry *reg, const hk_pass_desc *desc);
/* Adds n pass factories in order, stopping at the first error: a plugin's
 * register_fn over its table of descriptors (header-only). */
static inline hk_status *hk_registry_add_passes(hk_registry *reg, const hk_pass_desc *const *descs,
                                                size_t n) {
  for (size_t k = 0; k < n; k++) {
    hk_status *st = hk_registry_add_pass(reg, descs[k]);
    if (st) return st;
  }
  return NULL;
}
/* Adds a custom-call partitioner for `target` (same duplicate rule).  The
 * registry owns p once this succeeds and calls p->vt->destroy (if set) when
 * it is freed or replaced; on error the caller keeps p. */
hk_status *hk_registry_add_custom_call_partitioner(hk_registry *reg,
                                                   const char *target,
                                                   hk_custom_call_partitioner *p);
const hk_pass_desc *hk_registry_find_pass(const hk_registry *reg, const char *name);
const hk_custom_call_partitioner *hk_registry_find_custom_call_partitioner(
    const hk_registry *reg, const char *target);
/* Creates a registered pass with options in pipeline syntax
 * ("key=value key2=[true,false]"; NULL or "" for defaults). */
hk_pass *hk_registry_create_pass(hk_registry *reg, const char *name,
                                 const char *options, hk_status **err);

/* ---- pipelines (a pipeline is a pass) -------------------------------------- */
/* An empty pipeline; run() runs its passes in order, changed if any did. */
hk_pass *hk_pipeline_new(const char *name);
/* Appends a pass; the pipeline owns it. */
void hk_pipeline_add(hk_pass *pipeline, hk_pass *pass);
int32_t hk_pipeline_size(const hk_pass *pipeline);
/* The i-th pass (0-based), NULL when out of range (since ABI 1.1). */
hk_pass *hk_pipeline_get(hk_pass *pipeline, int32_t i);

/* ---- the plugin entry point ------------------------------------------------ */
typedef struct hk_plugin_info {
  uint32_t abi_version;            /* HK_ABI_VERSION: FIRST, always */
  const char *name;
  const char *version;
  hk_status *(*register_fn)(hk_registry *reg);
} hk_plugin_info;

typedef const hk_plugin_info *(*hk_plugin_info_fn)(void);
#define HK_PLUGIN_ENTRY_SYMBOL "hlokit_plugin_info"

/* The ABI version a plugin was built against, also as an ELF note (owner
 * "hlokit", type HK_ABI_NOTE_TYPE, the version as a uint32_t): the loader
 * reads it from the file before dlopen binds the plugin's undefined
 * symbols, so a plugin newer than the host is refused with both versions
 * named instead of failing inside dlopen (since ABI 1.4; a plugin without
 * the note is checked through hlokit_plugin_info after dlopen). */
#define HK_ABI_NOTE_OWNER "hlokit"
#define HK_ABI_NOTE_TYPE 0x484b4142u /* "HKAB" */
typedef struct hk_abi_note {
  uint32_t namesz, descsz, type;
  char owner[8];                   /* "hlokit", NUL-padded to 4 bytes */
  uint32_t abi_version;
} hk_abi_note;

/* Defines the plugin's entry point (and its ABI note). */
#define HK_PLUGIN(name_, version_, register_)                              \
  __attribute__((section(".note.hlokit.abi"), aligned(4), used))           \
  static const hk_abi_note hk_abi_note_ = {                                \
      sizeof HK_ABI_NOTE_OWNER, sizeof(uint32_t), HK_ABI_NOTE_TYPE,        \
      HK_ABI_NOTE_OWNER, HK_ABI_VERSION};                                   \
  __attribute__((visibility("default"))) const hk_plugin_info *            \
  hlokit_plugin_info(void);                                                 \
  const hk_plugin_info *hlokit_plugin_info(void) {                          \
    static const hk_plugin_info info_ = {HK_ABI_VERSION, (name_),           \
                                         (version_), (register_)};          \
    return &info_;                                                          \
  }

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
