/* sharding_impl.h - host-private layout of interned shardings and helpers shared by the files of host/sharding. */
#ifndef HK_SHARDING_IMPL_H
#define HK_SHARDING_IMPL_H

#include "hlokit/ir.h"
#include "hlokit/sharding.h"
#include "hlokit/text.h"

/* The HK_HC_SHARDING hash-cons table holds these and parse.c's text-cache
 * entries, whose first byte is 0xff (never a sharding kind): anything that
 * walks the table must skip entries with that first byte.
 *
 * Every interned sharding is one of these; the public struct comes first so
 * a `const hk_sharding *` handed out by the host can be cast back. */
typedef struct hk_sharding_impl {
  hk_sharding pub;
  uint64_t hash;
  int32_t data_rank;           /* tiled: rank of the data it shards */
  int64_t num_tiles;           /* tiled: product of the data tile dims */
  int64_t replication;         /* tiled: devices sharing each tile */
  /* device -> flat position in the tile assignment: a dense table over
   * [0, inv_n) (-1 = absent) or, when device ids are sparse, sorted
   * (device, position) pairs searched by bisection. */
  int64_t inv_n;
  const int32_t *inv_dense;
  const int64_t *inv_pairs;    /* 2 * n_devices entries when sparse */
  /* The semantic form (canonical, no metadata, explicit device list),
   * interned in the same module: equivalence of two shardings of one
   * module is pointer equality of their `sem`. */
  const struct hk_sharding_impl *sem;
  /* XLA's text of the sharding, printed once at interning. */
  const char *text;
  size_t text_len;
} hk_sharding_impl;

static inline const hk_sharding_impl *hk_shard_impl(const hk_sharding *s) {
  return (const hk_sharding_impl *)s;
}

/* Product of n dims (1 for n == 0). */
int64_t hk_shard_product(int n, const int64_t *dims);
/* Number of devices in a tiled sharding's tile assignment. */
static inline int64_t hk_shard_num_devices(const hk_sharding *s) {
  return hk_shard_product(s->n_tile_dims, s->tile_dims);
}
/* Rank of the data a tiled sharding applies to. */
static inline int hk_shard_data_rank(const hk_sharding *s) {
  return s->n_tile_dims - s->n_subgroups - (s->replicate_on_last_tile_dim ? 1 : 0);
}

/* A tuple sharding's arity fits the shape's leaves (query.c). */
bool hk_shard_tuple_matches(const hk_sharding *s, const hk_shape *shape);

/* Iota helpers (iota.c). */
/* XLA's CanonicalizeIotaDims: drops size-1 reshape dims and merges runs of
 * dims kept in order by the transpose.  Updates *n, dims and perm in place. */
void hk_iota_canonicalize_dims(int32_t *n, int64_t *dims, int32_t *perm);
/* Finds an iota (reshape_dims, perm) that expands to devices[0..n); writes
 * the canonical form into rdims/perm (room for 64 entries) and returns its
 * rank, or 0 if the list is not a transposed iota. */
int hk_iota_detect(int64_t n, const int64_t *devices, int64_t *rdims, int32_t *perm);
/* Expands iota(prod(rdims)) reshaped to rdims and transposed by perm. */
void hk_iota_expand_raw(int nr, const int64_t *rdims, const int32_t *perm, int64_t *out);

/* Prints s afresh (print.c); hk_sharding_print_buf uses the cached text. */
void hk_sharding_format(const hk_sharding *s, hk_buf *out);

/* Metadata parsing at a cursor (offsets relative to the cursor's text). */
struct hk_cursor;
hk_status *hk_metadata_parse_cursor(struct hk_cursor *c, hk_module *m, hk_metadata *out);
/* metadata={...} or {{...}, ...} appended to *arr (malloc'ed; *n used, *cap room) (parse.c). */
hk_status *hk_metadata_list_parse(struct hk_cursor *c, hk_module *m, hk_metadata **arr, int *n, int *cap);

/* Interning with a recursion guard for the semantic form (intern.c). */
const hk_sharding *hk_sharding_intern_depth(hk_module *m, const hk_sharding *tmpl, int depth);
/* The semantic template of an interned sharding: writes a non-tuple
 * template into *t whose arrays live in *scratch (malloc'ed, caller frees)
 * (canonical.c).  Tuples are handled by the caller, element by element. */
void hk_sharding_semantic_template(const hk_sharding *s, hk_sharding *t, void **scratch);
/* Structural equality of two non-interned-or-interned shardings over all
 * fields (tuple elements by pointer). */
bool hk_sharding_struct_equal(const hk_sharding *a, const hk_sharding *b);

/* Metadata hashing (metadata.c; hk_metadata_equal is in the ABI). */
uint64_t hk_metadata_hash(const hk_metadata *md, uint64_t h);
/* Copies a metadata record's strings into module m. */
void hk_metadata_copy_into(hk_module *m, hk_metadata *dst, const hk_metadata *src);

#endif
