/* manual_refine.c - unspecified dims refined across a manual conversion
 * (XLA's RefineManualAutoShardingFromAuto / ...FromManual): a Sharding
 * annotation with unspecified dims whose only user is SPMDFullToShardShape
 * or SPMDShardToFullShape with the same unspecified dims is refined
 * together with that conversion, the auto side and the manual side each
 * merging the new tiling. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

/* The manual subgroup sharding s viewed with its manual dim as one more
 * data dim (placed last among the data dims), replication last. */
static const hk_sharding *manual_as_data(hk_module *m, const hk_sharding *s) {
  pt_tiles t;
  if (!pt_from_sharding(s, &t)) return NULL;
  int r = t.data_rank, order[HK_MAX_RANK], no = 0, md = -1;
  for (int k = r; k < t.n; k++)
    if (t.sub[k - r] == HK_SUBGROUP_MANUAL) md = k;
  for (int k = 0; k < r; k++) order[no++] = k;
  order[no++] = md;
  for (int k = r; k < t.n; k++)
    if (k != md) order[no++] = k;
  int64_t *dev = pt_permute(&t, t.n, t.dims, order);
  int64_t dims[HK_MAX_RANK];
  for (int k = 0; k < t.n; k++) dims[k] = t.dims[order[k]];
  uint8_t sub[HK_MAX_RANK];
  for (int k = r + 1; k < t.n; k++) sub[k - r - 1] = HK_SUBGROUP_REPLICATED;
  free(t.dev);
  t.dev = dev;
  pt_reshape(&t, t.n, dims, r + 1, sub);
  const hk_sharding *out = pt_to_sharding(m, &t, s);
  pt_free(&t);
  return out;
}

/* The inverse: data dim r (the last) becomes the manual subgroup again. */
static const hk_sharding *data_as_manual(hk_module *m, const hk_sharding *s, int r) {
  pt_tiles t;
  if (!pt_from_sharding(s, &t) || t.data_rank != r + 1) {
    pt_free(&t);
    return NULL;
  }
  uint8_t sub[HK_MAX_RANK];
  sub[0] = HK_SUBGROUP_MANUAL;
  for (int k = r + 1; k < t.n; k++) sub[k - r] = HK_SUBGROUP_REPLICATED;
  int64_t dims[HK_MAX_RANK];
  memcpy(dims, t.dims, sizeof dims);
  pt_reshape(&t, t.n, dims, r, sub);
  const hk_sharding *out = pt_to_sharding(m, &t, s);
  pt_free(&t);
  return out;
}

/* A tiled sharding with a size-1 data dim added after its data dims. */
static const hk_sharding *with_unit_dim(hk_module *m, const hk_sharding *s) {
  pt_tiles t;
  if (!pt_from_sharding(s, &t)) return NULL;
  int r = t.data_rank;
  int64_t dims[HK_MAX_RANK];
  uint8_t sub[HK_MAX_RANK];
  for (int k = 0; k < r; k++) dims[k] = t.dims[k];
  dims[r] = 1;
  for (int k = r; k < t.n; k++) {
    dims[k + 1] = t.dims[k];
    sub[k - r] = t.sub[k - r];
  }
  pt_reshape(&t, t.n + 1, dims, r + 1, sub);
  const hk_sharding *out = pt_to_sharding(m, &t, s);
  pt_free(&t);
  return out;
}

/* A manual sharding the refinement can extend: a manual subgroup plus a
 * replicated one (no nesting). */
static bool refinable_manual(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && sa_manual_subgroup(s) && sa_partial(s) &&
         s->n_subgroups == 2;
}

bool prop_refine_from_auto(hk_module *m, const hk_sharding *to_merge, int n_unspec,
                           const int64_t *unspec, const hk_sharding **auto_s,
                           const hk_sharding **manual_s) {
  if (!refinable_manual(*manual_s) || sa_manual_subgroup(*auto_s)) return false;
  const hk_sharding *partial = hk_sharding_replicate_all_except(m, to_merge, n_unspec, unspec);
  if (!partial || partial->kind != HK_SHARDING_TILED || !sa_partial(partial)) return false;
  const hk_sharding *a = *auto_s;
  if (!sa_merge_compatible(m, partial, sa_num_tiles(a) + 1, &a)) return false;
  int r = hk_sharding_data_rank(partial);
  const hk_sharding *for_manual = with_unit_dim(m, partial);
  const hk_sharding *tmp = manual_as_data(m, *manual_s);
  if (!for_manual || !tmp || !sa_merge_compatible(m, for_manual, sa_num_tiles(tmp) + 1, &tmp))
    return false;
  const hk_sharding *man = data_as_manual(m, tmp, r);
  if (!man) return false;
  *auto_s = a;
  *manual_s = man;
  return true;
}

bool prop_refine_from_manual(hk_module *m, const hk_sharding *to_merge, int n_unspec,
                             const int64_t *unspec, const hk_sharding **auto_s,
                             const hk_sharding **manual_s) {
  if (!sa_manual_subgroup(to_merge) || !refinable_manual(*manual_s) || sa_manual_subgroup(*auto_s))
    return false;
  const hk_sharding *partial = hk_sharding_replicate_all_except(m, to_merge, n_unspec, unspec);
  if (!partial || partial->kind != HK_SHARDING_TILED) return false;
  const hk_sharding *man = *manual_s;
  if (!sa_merge_compatible(m, partial, sa_num_tiles(man) + 1, &man)) return false;
  /* the same tiling with the manual subgroup replicated, for the auto side */
  pt_tiles t;
  pt_from_sharding(partial, &t);
  for (int k = t.data_rank; k < t.n; k++) t.sub[k - t.data_rank] = HK_SUBGROUP_REPLICATED;
  const hk_sharding *for_auto = pt_to_sharding(m, &t, partial);
  pt_free(&t);
  const hk_sharding *a = *auto_s;
  if (!sa_merge_compatible(m, for_auto, sa_num_tiles(a) + 1, &a)) return false;
  *auto_s = a;
  *manual_s = man;
  return true;
}
