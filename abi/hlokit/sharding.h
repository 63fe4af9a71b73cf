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
 *
 * Tuple shardings are flat over the tuple shape's array leaves, as XLA's
 * (elems[i] belongs to leaf i in depth-first order); an empty tuple shape
 * may carry {} or one element.  Elements are never tuples and a tuple
 * sharding itself carries no metadata (each element has its own).
 *
 * Interned shardings carry host-private data after the public struct (the
 * device -> tile inverse map, the semantic form), so only pointers returned
 * by these functions may be passed to the queries; a stack template is only
 * ever an input to hk_sharding_intern().
 */
#ifndef HLOKIT_SHARDING_H
#define HLOKIT_SHARDING_H

#include "export.h"

#include "shape.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

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
  HK_SHARDING_UNREDUCED,           /* {unreduced} (newer XLA) */
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
/* A tiled template needs 1..HK_MAX_RANK-1 tile dims (NULL otherwise); when
 * its iota is set the devices field is ignored (re-expanded from it), and
 * when both are NULL the devices are in iota order 0..n-1.  Tuple elements
 * and metadata strings may belong to another module: they are copied. */
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
/* Copies a sharding into module m (e.g. from another module, or a stack
 * template: same as hk_sharding_intern). */
const hk_sharding *hk_sharding_import(struct hk_module *m, const hk_sharding *s);
/* XLA's normal form (HloSharding::Subgroup / PartialTile, as XLA's parser
 * applies them), metadata and shard group kept:
 *   - a tiling with one tile on the data dims whose trailing dims are all
 *     replicated (or all manual) -> {replicated} (or {manual});
 *   - last_tile_dims={replicated} -> last_tile_dim_replicate; a trailing
 *     replication dim of size 1 is dropped;
 *   - subgroup dims of size 1 dropped, dims of one type merged, types
 *     ordered manual, unreduced, replicated (devices transposed to match);
 *   - devices sorted within each replication group;
 *   - an iota spelling stays iota where the result is one (a list stays a
 *     list: no iota detection for lists). */
const hk_sharding *hk_sharding_canonical(struct hk_module *m, const hk_sharding *s);
/* The same sharding without metadata (tuple elements too). */
const hk_sharding *hk_sharding_without_metadata(struct hk_module *m, const hk_sharding *s);

/* ---- text ------------------------------------------------------------ */
/* Parses a sharding starting at text[0] == '{' (XLA's ParseSharding: every
 * spelling XLA's parser accepts, whitespace and comments such as
 * /\*index=5*\/ anywhere between tokens).  On success *out is interned in m
 * and *consumed (may be NULL) is the number of bytes up to and including
 * the closing '}'.  The spelling is kept as written (an explicit list stays
 * a list; only iota reshape dims are canonicalised, as XLA always does), so
 * printing gives back XLA's text; apply hk_sharding_canonical() to get the
 * normalised sharding XLA's parser builds (and, for an instruction,
 * hk_sharding_for_shape(): XLA's parser spreads a non-tuple sharding over
 * a tuple-shaped instruction's leaves).  The module caches text ->
 * sharding, so parsing a text seen before costs one hash lookup.
 * Errors are HK_INVALID_ARGUMENT with a message "@OFFSET: what", OFFSET
 * being the byte offset into text of the offending token; the HLO text
 * parser turns it into line:col. */
hk_status *hk_sharding_parse(struct hk_module *m, const char *text, size_t len,
                             const hk_sharding **out, size_t *consumed);
/* Prints in XLA's spelling (HloSharding::ToString) into buf (always
 * NUL-terminated when cap > 0, truncated to cap); returns the length it
 * needed, excluding the NUL (like snprintf). */
size_t hk_sharding_print(const hk_sharding *s, char *buf, size_t cap);
/* Convenience: a malloc'ed string the caller frees. */
char *hk_sharding_to_string(const hk_sharding *s);

/* ---- queries --------------------------------------------------------- */
/* Queries are O(1) (facts are computed once at interning) unless noted. */
bool hk_sharding_is_replicated(const hk_sharding *s);  /* incl. all-replicated tuples and trivial tilings */
bool hk_sharding_is_manual(const hk_sharding *s);      /* incl. all-manual tuples */
/* Single-device ({maximal device=N}, or a non-empty tuple of them); unlike
 * XLA's IsTileMaximal this is false for {replicated}. */
bool hk_sharding_is_maximal(const hk_sharding *s);
bool hk_sharding_is_tiled(const hk_sharding *s);       /* tiled with >1 tile on some data dim */
bool hk_sharding_is_tuple(const hk_sharding *s);
/* The unique device of a maximal sharding (or a tuple all maximal on the
 * same device); -1 if none. */
int64_t hk_sharding_unique_device(const hk_sharding *s);
/* Rank of the data the tiled sharding applies to (0 when not tiled). */
int hk_sharding_data_rank(const hk_sharding *s);
/* Number of partitions along data dim d (1 for non-tiled). */
int64_t hk_sharding_dim_partitions(const hk_sharding *s, int d);
int64_t hk_sharding_num_tiles(const hk_sharding *s);     /* product over data dims */
int64_t hk_sharding_replication_factor(const hk_sharding *s); /* last_tile_dim_replicate / REPLICATED subgroup */
/* Semantic equality (metadata ignored; shard groups compared): equal
 * hk_sharding_semantic() forms, i.e. the same kind, tile dims, device
 * order and replication however spelled (list or iota, subgroup dims of
 * size 1, last_tile_dims={replicated} vs last_tile_dim_replicate, device
 * order inside a replication group, a one-device or all-replicated
 * tiling vs {replicated}).  Tuples compare elementwise; a tuple equals a
 * non-tuple when every element does.  Works across modules; within one
 * module it is a pointer comparison. */
bool hk_sharding_equivalent(const hk_sharding *a, const hk_sharding *b);
/* Tile shape of a shape under s (ceil division, layout kept); tuple-aware
 * (a tuple s maps its elements to the shape's leaves in order, a
 * non-tuple s applies to every leaf).  Non-tiled kinds give the shape
 * itself; NULL if the ranks or leaf counts do not match. */
const hk_shape *hk_sharding_tile_shape(struct hk_module *m, const hk_sharding *s,
                                       const hk_shape *shape);
/* Tile index of `device` along each data dim (out has data_rank entries);
 * returns false if s is not tiled or the device does not appear.  O(rank)
 * through the inverse map built at interning. */
bool hk_sharding_tile_index(const hk_sharding *s, int64_t device, int64_t *out);
/* Offset of device's tile in each data dim: min(index * ceil(dim / parts),
 * dim), as XLA's TileOffsetForDevice.  Maximal and replicated shardings
 * give zeros; false if s is another non-tiled kind, the ranks differ or
 * the device is absent. */
bool hk_sharding_tile_offset(const hk_sharding *s, const hk_shape *shape,
                             int64_t device, int64_t *out);
/* Sub-sharding of a tuple sharding for a one-level index path ({i}:
 * elems[i]); a non-tuple sharding is returned as is for any path; NULL if
 * out of range.  Nested tuple shapes need hk_sharding_subsharding_shape. */
const hk_sharding *hk_sharding_subsharding(const hk_sharding *s, int n, const int64_t *index);
/* Checks a sharding against a shape (XLA's HloSharding::Validate): tile
 * rank (minus replication/subgroup dims) matches rank, device ids in
 * [0, num_devices), each device exactly once, all num_devices used, more
 * than one device in a tiling, tuple arity = number of array leaves of
 * the shape, maximal device in range.  Tokens accept anything.  A
 * non-tuple sharding on a tuple shape is checked against every leaf (what
 * XLA's parser turns it into with NormalizeTupleSharding).
 * num_devices < 0 skips the range and count checks.  Errors are
 * HK_INVALID_ARGUMENT naming the sharding and the shape. */
hk_status *hk_sharding_validate(const hk_sharding *s, const hk_shape *shape,
                                int64_t num_devices);

/* Expands an iota to an explicit list of prod(dims) ids (out must hold that
 * many). */
void hk_iota_expand(const hk_iota *iota, int64_t *out);

/* ---- appended (host/sharding) ------------------------------------------ */
struct hk_buf;
/* Appends XLA's spelling to a growable buffer (see text.h). */
void hk_sharding_print_buf(const hk_sharding *s, struct hk_buf *out);
/* Sub-sharding for an index path into a (possibly nested) tuple shape:
 * a leaf's element, or a tuple sharding over the leaves of a tuple
 * subshape; a non-tuple s applies to every leaf.  NULL if the path is not
 * in shape or s does not match it. */
const hk_sharding *hk_sharding_subsharding_shape(struct hk_module *m,
                                                 const hk_sharding *s,
                                                 const hk_shape *shape, int n,
                                                 const int64_t *index);
/* A non-tuple sharding spread over every leaf of a tuple shape (XLA's
 * NormalizeTupleSharding); s itself when shape is not a tuple or s is. */
const hk_sharding *hk_sharding_for_shape(struct hk_module *m, const hk_sharding *s,
                                         const hk_shape *shape);
/* The same sharding without a shard group (tuple elements too). */
const hk_sharding *hk_sharding_without_shard_group(struct hk_module *m,
                                                   const hk_sharding *s);
/* Flat position of device in the tile assignment (row-major index into
 * s->devices), -1 if absent; O(1) (uses the interned inverse map). */
int64_t hk_sharding_device_position(const hk_sharding *s, int64_t device);
/* End of device's tile in each data dim: min((index+1)*ceil(dim/parts), dim).
 * For maximal shardings the offsets are 0 and the limits the dims. */
bool hk_sharding_tile_limit(const hk_sharding *s, const hk_shape *shape,
                            int64_t device, int64_t *out);
/* Semantic form used by hk_sharding_equivalent (canonical, no metadata,
 * explicit device list), interned in the same module as s. */
const hk_sharding *hk_sharding_semantic(const hk_sharding *s);

/* ---- mesh (named) shardings (1.8) ---------------------------------------
 * A sharding over a mesh of named axes (newer XLA's NamedSharding, Shardy's
 * #sdy.sharding), axes given by index.  A ref names a whole axis (size 0)
 * or its sub-axis :(pre_size)size: the size-long slice whose major part,
 * of pre_size, comes before it (pre_size >= 1, size > 1, pre_size * size
 * dividing the axis, size < the axis). */
typedef struct hk_mesh {
  int32_t n_axes;
  const int64_t *axis_sizes;       /* n_axes entries, each > 0 */
  /* The devices in mesh order (prod(axis_sizes) ids; with no axes, one id:
   * a maximal sharding), or else the same ids as an iota, or both NULL
   * for iota order.  Taken as given (hk_sharding_validate checks them). */
  const int64_t *devices;
  const hk_iota *device_iota;
} hk_mesh;

typedef struct hk_mesh_axis_ref {
  int32_t axis;                    /* index into the mesh's axes */
  int64_t pre_size, size;          /* size 0: the whole axis */
} hk_mesh_axis_ref;

typedef struct hk_mesh_axis_refs {
  int32_t n;
  const hk_mesh_axis_ref *refs;
} hk_mesh_axis_refs;

typedef struct hk_mesh_sharding {
  int32_t rank;                    /* data dims, < HK_MAX_RANK - 3 */
  const hk_mesh_axis_refs *dims;   /* rank lists, major to minor */
  hk_mesh_axis_refs replicated, unreduced, manual;
} hk_mesh_sharding;

/* The classic sharding of s over mesh, by XLA's rule (HloSharding::
 * V3ToV2Sharding, Shardy's export): the axes, cut into the sub-axes the
 * refs use, are the reshape dims of the mesh's device order; the dims'
 * axes come first, then a manual subgroup dim, an unreduced one, and the
 * axes left over as a replicated one; the result is canonical
 * (hk_sharding_canonical), in iota form unless the mesh's devices are a
 * list (or an iota whose transposition is none).  No axes: maximal on the
 * one device, else {replicated}.  NULL and *status (HK_INVALID_ARGUMENT)
 * when the refs do not form a sharding: an axis out of range, a bad
 * sub-axis, two refs overlapping, sub-axes of one axis that do not nest,
 * too many dims or sub-axes. */
const hk_sharding *hk_sharding_from_mesh(struct hk_module *m, const hk_mesh *mesh,
                                         const hk_mesh_sharding *s, hk_status **status);

/* ---- algebra (XLA's hlo_sharding_util basics) --------------------------
 * Results are normalised as XLA's Subgroup/PartialTile do, keep s's
 * metadata and shard group, and stay in iota form when s was one and the
 * result is one.  Non-tiled shardings come back unchanged; tuples give
 * NULL (apply per element). */
/* The sharding of transpose(x, dimensions=perm) for x sharded by s: data
 * dim i of the result is data dim perm[i] of s (perm has data_rank
 * entries; subgroup dims stay last).  NULL if perm is not a permutation. */
const hk_sharding *hk_sharding_transpose(struct hk_module *m, const hk_sharding *s,
                                         const int64_t *perm);
/* XLA's PartiallyReplicateTiledShardingOnDims: the listed data dims stop
 * being partitioned and their devices join the replication group (all
 * tiled dims listed and no other subgroup -> {replicated}).  Dims out of
 * range are ignored. */
const hk_sharding *hk_sharding_replicate_dims(struct hk_module *m, const hk_sharding *s, int n,
                                              const int64_t *dims);
/* XLA's PartiallyReplicateTiledShardingOnAllDimsExcept. */
const hk_sharding *hk_sharding_replicate_all_except(struct hk_module *m, const hk_sharding *s,
                                                    int n, const int64_t *keep);
/* The sharding of the value with the listed data dims removed (reduce,
 * ...): they are replicated first (XLA's PartiallyReplicate... followed by
 * RemoveShapeDimensions). */
const hk_sharding *hk_sharding_remove_dims(struct hk_module *m, const hk_sharding *s, int n,
                                           const int64_t *dims);
/* Inserts n unpartitioned data dims that land at output positions at[]
 * (distinct, in [0, data_rank + n)) - e.g. for broadcast.  NULL if the
 * positions are invalid. */
const hk_sharding *hk_sharding_insert_dims(struct hk_module *m, const hk_sharding *s, int n,
                                           const int64_t *at);
/* Devices grouped by the tile assignment dims listed (data or trailing
 * subgroup dims), XLA's GetPartitionGroupsForReplication: the devices
 * whose tile indices differ only in those dims form a group.  Writes all
 * devices into out (groups one after another, ordered by the other dims;
 * members in row-major order) and returns the group size; -1 if s is not
 * tiled. */
int64_t hk_sharding_device_groups(const hk_sharding *s, int n, const int64_t *dims, int64_t *out);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
