/* sdy.h - the sdy plugin's private model of Shardy's round-trip attributes
 * (meshes, axis refs, tensor shardings, manual axes) and the functions the
 * import and export passes share. */
#ifndef HLOKIT_PLUGIN_SDY_H
#define HLOKIT_PLUGIN_SDY_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "hlokit/hlokit.h"
#include "hlokit/pass.h"
#include "hlokit/text.h"

/* Frontend attribute keys XLA's sdy round trip writes (xla/service/spmd/
 * shardy/constants.h). */
#define SDY_MESHES "xla.sdy.meshes"
#define SDY_SHARDING "xla.sdy.sharding"
#define SDY_SHARDING_RULE "xla.sdy.sharding_rule"
#define SDY_IN_SHARDINGS "xla.sdy.in_shardings"
#define SDY_OUT_SHARDINGS "xla.sdy.out_shardings"
#define SDY_MANUAL_AXES "xla.sdy.manual_axes"
#define SDY_GROUP_ID "xla.sdy.sharding_group_id"
#define SDY_BODY_PREFIX "xla.sdy.manual_computation_body"
#define SDY_GLOBAL_TO_LOCAL "xla.sdy.GlobalToLocalShape"
#define SDY_LOCAL_TO_GLOBAL "xla.sdy.LocalToGlobalShape"
#define SDY_FUNC_RESULT "xla.sdy.FuncResultSharding"
#define SDY_GROUP "xla.sdy.ShardingGroup"
#define SDY_USE_TUPLE_ARGS "xla.sdy.use_tuple_args"
#define SDY_IMPORT_MHLO "xla.sdy.import_mhlo_shardings"

/* What the import keeps so the export (or a later pass reading priorities
 * and open dims) can give the Shardy form back: the attribute texts as
 * they came, under our own keys so nothing re-imports them. */
#define KEEP_PREFIX "hlokit.sdy."
#define KEEP_MESHES "hlokit.sdy.meshes"
#define KEEP_TUPLE_ARGS "hlokit.sdy.use_tuple_args"

#define SDY_MAX_AXES 16
#define SDY_MAX_DIMS 16
#define SDY_MAX_MESHES 16
#define SDY_MAX_VALUES 1024      /* operands/results of one manual computation */

typedef struct sdy_axis {          /* a mesh axis "x"=4 */
  char name[64];
  int64_t size;
} sdy_axis;

typedef struct sdy_mesh {
  char name[64];                   /* symbol name; "" for an inline mesh */
  int n_axes;
  sdy_axis axes[SDY_MAX_AXES];
  int n_devices;                   /* explicit device_ids, 0 = iota */
  int64_t *devices;                /* malloc'ed */
} sdy_mesh;

typedef struct sdy_axis_ref {      /* "x" or the sub-axis "x":(pre)size */
  char name[64];
  bool sub;
  int64_t pre_size, size;          /* size = the whole axis when !sub */
} sdy_axis_ref;

typedef struct sdy_dim {           /* {"x", "y", ?}p1 */
  int n_axes;
  sdy_axis_ref axes[SDY_MAX_AXES];
  bool open;
  int64_t priority;                /* -1 = none */
} sdy_dim;

typedef struct sdy_sharding {      /* <@mesh, [dims], replicated={..}> */
  char mesh_name[64];              /* "" when the mesh is inline */
  sdy_mesh inline_mesh;            /* used when mesh_name is "" */
  int rank;
  sdy_dim dims[SDY_MAX_DIMS];
  int n_replicated;
  sdy_axis_ref replicated[SDY_MAX_AXES];
  int n_unreduced;
  sdy_axis_ref unreduced[SDY_MAX_AXES];
} sdy_sharding;

typedef struct sdy_per_value {     /* #sdy.sharding_per_value<[<...>, ...]> */
  int n;
  sdy_sharding *v;                 /* malloc'ed */
} sdy_per_value;

typedef struct sdy_manual_axes {   /* #sdy<manual_axes{"x", "y"}> */
  int n;
  char names[SDY_MAX_AXES][64];
} sdy_manual_axes;

typedef struct sdy_meshes {        /* the module's xla.sdy.meshes dictionary */
  int n;
  sdy_mesh m[SDY_MAX_MESHES];
} sdy_meshes;

/* ---- attr_parse.c: strict parsers; errors say "at offset N: ..." ---- */
hk_status *sdy_parse_meshes(const char *text, sdy_meshes *out);
hk_status *sdy_parse_sharding(const char *text, sdy_sharding *out);
hk_status *sdy_parse_per_value(const char *text, sdy_per_value *out);
hk_status *sdy_parse_manual_axes(const char *text, sdy_manual_axes *out);
/* "12 : i64" or "12" */
hk_status *sdy_parse_group_id(const char *text, int64_t *out);
void sdy_meshes_free(sdy_meshes *ms);
void sdy_per_value_free(sdy_per_value *pv);
void sdy_sharding_free(sdy_sharding *s);

/* ---- attr_print.c: Shardy's printed form, as MLIR prints it --------- */
void sdy_print_mesh_body(const sdy_mesh *m, hk_buf *b);     /* <[...]> */
void sdy_print_meshes(const sdy_meshes *ms, hk_buf *b);     /* {a = #sdy.mesh<..>} */
void sdy_print_sharding_body(const sdy_sharding *s, hk_buf *b);  /* <@m, [...]> */
void sdy_print_sharding(const sdy_sharding *s, hk_buf *b);  /* #sdy.sharding<..> */
void sdy_print_per_value(const sdy_sharding *v, int n, hk_buf *b);
void sdy_print_manual_axes(const sdy_manual_axes *ma, hk_buf *b);

/* ---- to_hlo.c: Shardy sharding -> HloSharding (XLA's convertToHloSharding) */
const sdy_mesh *sdy_find_mesh(const sdy_meshes *ms, const sdy_sharding *s);
hk_status *sdy_check_sharding(const sdy_mesh *mesh, const sdy_sharding *s, int rank);
/* The HloSharding of s over mesh with `manual` axes turned into a manual
 * subgroup dim (n_manual 0: none) by hk_sharding_from_mesh; NULL (no
 * sharding) when s is fully open with no axes at all, or NULL and *st when
 * its axes do not form a sharding. */
const hk_sharding *sdy_to_hlo(hk_module *m, const sdy_mesh *mesh, const sdy_sharding *s,
                              int n_manual, char (*manual)[64], hk_status **st);
/* An error when s names one of the (manual) axes `names`. */
hk_status *sdy_check_free_of(const sdy_sharding *s, int n, char (*names)[64]);
/* s with the manual axes removed from its dims (the body-side sharding). */
void sdy_drop_axes(sdy_sharding *s, int n, char (*names)[64]);
/* A fully open sharding of rank `rank` on mesh `mesh_name`. */
void sdy_open_sharding(sdy_sharding *s, const char *mesh_name, int rank);

/* ---- from_hlo.c: HloSharding -> Shardy sharding (export) ------------ */
/* Finds dim shardings over mesh's whole axes whose HloSharding equals h;
 * false when h is not expressible that way. */
bool sdy_from_hlo(hk_module *m, const sdy_mesh *mesh, const char *mesh_name,
                  const hk_sharding *h, int rank, sdy_sharding *out);

/* ---- attrs.c: frontend attribute lists -------------------------------- */
const char *sdy_attr_get(int n, const hk_kv *kvs, const char *key);
const char *sdy_instr_attr(const hk_instr *i, const char *key);
/* Sets (value non-NULL) or removes key in an hk_kv list owned by m. */
void sdy_kv_set(hk_module *m, int32_t *n, const hk_kv **kvs, const char *key,
                const char *value);
void sdy_instr_attr_set(hk_instr *i, const char *key, const char *value);
/* The text the import kept as hlokit.sdy.WHAT, and its removal. */
const char *sdy_kept(const hk_instr *i, const char *what);
void sdy_unkeep(hk_instr *i, const char *what);
/* Whether the import reads i's xla.sdy.sharding, as XLA's (import.c). */
bool sdy_takes_sharding(const hk_instr *i);
/* Renames i's frontend attributes FROM* to TO* (keys kept in order of
 * change); sdy_keep_attrs: xla.sdy.* to hlokit.sdy.* (import.c). */
void sdy_rename_attrs(hk_instr *i, const char *from, const char *to);
void sdy_keep_attrs(hk_instr *i);
bool sdy_is_custom_call(const hk_instr *i, const char *target);
hk_status *sdy_error_at(const hk_instr *i, const char *key, hk_status *st);

/* ---- manual.c: manual computations ------------------------------------ */
typedef struct sdy_import_ctx {
  hk_module *m;
  sdy_meshes meshes;
} sdy_import_ctx;
hk_status *sdy_import_manual(sdy_import_ctx *cx, hk_instr *call, int n_parent,
                             char (*parent)[64]);
hk_status *sdy_sharding_for_instr(sdy_import_ctx *cx, hk_instr *i, const char *text,
                                  int n_manual, char (*manual)[64], const hk_sharding **out);

/* ---- tuple_args.c: xla.sdy.use_tuple_args (ShardyXLA's use_tuple_args) */
/* keep: the attribute stays as KEEP_TUPLE_ARGS (and each parameter's kept
 * texts go with it) so that sdy_restore_tuple_args, the export's, can
 * give the flat entry back. */
hk_status *sdy_use_tuple_args(hk_module *m, bool keep);
hk_status *sdy_restore_tuple_args(hk_module *m);

/* ---- passes (plugin.c: the one pass struct both use) ------------------------ */
/* outline.c: the export of lowered manual computations */
hk_status *sdy_outline_manual(hk_module *m);
extern const hk_pass_desc sdy_import_desc;
extern const hk_pass_desc sdy_export_desc;

#endif
