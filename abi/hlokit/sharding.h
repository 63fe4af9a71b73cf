/* sharding.h - the HloSharding model: how a value is laid out over devices.
 *
 * Shardings are immutable and interned per module (like shapes), so the
 * partitioner and propagation compare interned shardings of one module by
 * pointer for exact equality; hk_sharding_equivalent() compares meaning
 * (the same tiling, device order and replication however spelled: explicit
 * device list or iota, trivially sized tile dims, ...).
 *
 * Kinds and their text (XLA's spelling):
 *   {replicated}  {manual}  {unknown}  {maximal device=3}
 *   {devices=[2,2]0,1,2,3}  {devices=[2,2]<=[4]}  {devices=[2,2]<=[2,2]T(1,0)}
 *   {devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}
 *   {devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}
 *   {{replicated}, {maximal device=0}}     (tuple)
 *   ... shard_as 1 / shard_like 2 / metadata={op_name="x"} inside the braces.
 */
#ifndef HLOKIT_SHARDING_H
#define HLOKIT_SHARDING_H

#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hk_module;
struct hk_metadata;

/* An iota tile assignment: iota(prod(reshape_dims)) reshaped to
 * reshape_dims, transposed by perm, reshaped to dims.  Also used for the
 * iota form of replica groups.  ([2,2]<=[4] has reshape_dims=[4], perm=[0].) */
typedef struct hk_iota {
  int32_t n_dims;
  const int64_t *dims;
  int32_t n_reshape_dims;
  const int64_t *reshape_dims;
  const int32_t *perm;             /* n_reshape_dims entries */
} hk_iota;

typedef enum hk_sharding_kind {
  HK_SHARDING_REPLICATED,
  HK_SHARDING_MANUAL,
  HK_SHARDING_MAXIMAL,
  HK_SHARDING_TILED,
  HK_SHARDING_TUPLE,
  HK_SHARDING_UNKNOWN,
} hk_sharding_kind;

/* Types of trailing tile dimensions (last_tile_dims={...}). */
typedef enum hk_subgroup {
  HK_SUBGROUP_REPLICATED,
  HK_SUBGROUP_MANUAL,
  HK_SUBGROUP_UNREDUCED,
} hk_subgroup;

typedef enum hk_shard_group_kind {
  HK_SHARD_GROUP_NONE,
  HK_SHARD_GROUP_AS,
  HK_SHARD_GROUP_LIKE,
} hk_shard_group_kind;

typedef struct hk_sharding {
  uint8_t kind;                    /* hk_sharding_kind */
  bool replicate_on_last_tile_dim; /* last_tile_dim_replicate */
  uint8_t shard_group_kind;        /* hk_shard_group_kind */
  int64_t shard_group_id;
  int64_t device;                  /* maximal */

  /* Tiled: the tile assignment has n_tile_dims dims; the data rank is
   * n_tile_dims - n_subgroups - (replicate_on_last_tile_dim ? 1 : 0). */
  int32_t n_tile_dims;
  const int64_t *tile_dims;
  const int64_t *devices;          /* always expanded: prod(tile_dims) ids, row-major */
  const hk_iota *iota;             /* non-NULL when spelled in iota form */
  int32_t n_subgroups;
  const uint8_t *subgroups;        /* hk_subgroup per trailing dim */

  int32_t n_elems;                 /* tuple */
  const struct hk_sharding *const *elems;

  int32_t n_metadata;
  const struct hk_metadata *metadata;
} hk_sharding;

/* ---- construction (all results interned in m) ---------------------- */
const hk_sharding *hk_sharding_intern(struct hk_module *m, const hk_sharding *tmpl);
const hk_sharding *hk_sharding_replicated(struct hk_module *m);
const hk_sharding *hk_sharding_manual(struct hk_module *m);
const hk_sharding *hk_sharding_maximal(struct hk_module *m, int64_t device);
/* Tiled with an explicit device list (n = prod(tile_dims)). */
const hk_sharding *hk_sharding_tiled(struct hk_module *m, int n_tile_dims,
                                     const int64_t *tile_dims,
                                     const int64_t *devices,
                                     bool last_tile_dim_replicate);
/* Tiled in iota order (devices 0..n-1 row-major). */
const hk_sharding *hk_sharding_tiled_iota(struct hk_module *m, int n_tile_dims,
                                          const int64_t *tile_dims,
                                          bool last_tile_dim_replicate);
const hk_sharding *hk_sharding_tuple(struct hk_module *m, int n,
                                     const hk_sharding *const *elems);
/* Copies a sharding into module m (e.g. from another module). */
const hk_sharding *hk_sharding_import(struct hk_module *m, const hk_sharding *s);
/* The canonical form: trivial tiled -> replicated, a single-device tiling
 * -> maximal?, no: XLA keeps that tiled; iota recognised; metadata kept. */
const hk_sharding *hk_sharding_canonical(struct hk_module *m, const hk_sharding *s);
/* The same sharding without metadata / without shard group. */
const hk_sharding *hk_sharding_without_metadata(struct hk_module *m, const hk_sharding *s);

/* ---- text ------------------------------------------------------------ */
/* Parses a sharding starting at '{'.  On success *end points past the
 * closing '}'.  Errors give the byte offset of the problem in *err_at. */
hk_status *hk_sharding_parse(struct hk_module *m, const char *text, size_t len,
                             const hk_sharding **out, size_t *consumed);
/* Prints in XLA's spelling into buf (always NUL-terminated, truncated to
 * cap); returns the length it needed (like snprintf). */
size_t hk_sharding_print(const hk_sharding *s, char *buf, size_t cap);
/* Convenience: a malloc'ed string the caller frees. */
char *hk_sharding_to_string(const hk_sharding *s);

/* ---- queries --------------------------------------------------------- */
bool hk_sharding_is_replicated(const hk_sharding *s);  /* incl. all-replicated tuples and trivial tilings */
bool hk_sharding_is_manual(const hk_sharding *s);      /* incl. all-manual tuples */
bool hk_sharding_is_maximal(const hk_sharding *s);
bool hk_sharding_is_tiled(const hk_sharding *s);       /* tiled with >1 tile on some data dim */
bool hk_sharding_is_tuple(const hk_sharding *s);
/* The unique device of a maximal sharding (or a tuple all maximal on the
 * same device); -1 if none. */
int64_t hk_sharding_unique_device(const hk_sharding *s);
/* Rank of the data the tiled sharding applies to. */
int hk_sharding_data_rank(const hk_sharding *s);
/* Number of partitions along data dim d (1 for non-tiled). */
int64_t hk_sharding_dim_partitions(const hk_sharding *s, int d);
int64_t hk_sharding_num_tiles(const hk_sharding *s);     /* product over data dims */
int64_t hk_sharding_replication_factor(const hk_sharding *s); /* last_tile_dim_replicate / REPLICATED subgroup */
/* Semantic equality (metadata ignored; shard groups compared). */
bool hk_sharding_equivalent(const hk_sharding *a, const hk_sharding *b);
/* Tile shape of a shape under s (ceil division); tuple-aware. */
const hk_shape *hk_sharding_tile_shape(struct hk_module *m, const hk_sharding *s,
                                       const hk_shape *shape);
/* Tile index of `device` along each data dim (out has data_rank entries);
 * returns false if the device does not appear. */
bool hk_sharding_tile_index(const hk_sharding *s, int64_t device, int64_t *out);
/* Offset of device's tile in each data dim: index * ceil(dim / parts). */
bool hk_sharding_tile_offset(const hk_sharding *s, const hk_shape *shape,
                             int64_t device, int64_t *out);
/* Sub-sharding of a tuple sharding for tuple index path. */
const hk_sharding *hk_sharding_subsharding(const hk_sharding *s, int n, const int64_t *index);
/* Checks a sharding against a shape: tile rank matches rank, device ids
 * in [0, num_devices), each device at most once, tuple arity matches.
 * num_devices < 0 skips the range check. */
hk_status *hk_sharding_validate(const hk_sharding *s, const hk_shape *shape,
                                int64_t num_devices);

/* Expands an iota to an explicit list of prod(dims) ids (out must hold that
 * many). */
void hk_iota_expand(const hk_iota *iota, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
