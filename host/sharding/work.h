/* work.h - a tiled sharding as mutable arrays, for the normalisations and the sharding algebra (host-private). */
#ifndef HK_SHARDING_WORK_H
#define HK_SHARDING_WORK_H

#include "sharding/sharding_impl.h"

/* A tiled sharding being normalised: dims, an explicit device list and
 * the types of the trailing subgroup dims (replicate flag included). */
typedef struct work {
  int nd;
  int64_t dims[HK_MAX_RANK];
  int nsub;
  uint8_t sub[HK_MAX_RANK];
  int64_t n;
  int64_t *dev;                 /* malloc'ed, n entries */
  uint8_t kind;                 /* result kind: TILED or a collapsed kind */
  bool flag;                    /* result uses last_tile_dim_replicate */
} work;

/* Loads a tiled sharding (the replicate flag becomes a trailing
 * REPLICATED subgroup); w->dev is malloc'ed. */
void hk_shw_load(work *w, const hk_sharding *s);
/* Transposes the device array by perm (new dim i = old dim perm[i]);
 * subgroup types are not moved (callers fix w->sub). */
void hk_shw_transpose(work *w, const int *perm);
/* XLA's Subgroup/PartialTile normalisation; `semantic` also maps a
 * one-device tiling to replicated. */
void hk_shw_normalise(work *w, bool semantic);
/* Interns the work as a sharding with like's metadata and shard group,
 * in iota form if keep_iota and the devices are one; frees w->dev. */
const hk_sharding *hk_shw_intern(hk_module *m, work *w, const hk_sharding *like, bool keep_iota);

#endif
