/* canonical.c - XLA's sharding normalisations (Subgroup / PartialTile), the semantic form, and semantic equivalence. */
#include <stdlib.h>
#include <string.h>

#include "sharding/sharding_impl.h"
#include "sharding/work.h"

/* What the template points into; freed by the caller as one block. */
typedef struct canon_scratch {
  int64_t dims[HK_MAX_RANK];
  uint8_t sub[HK_MAX_RANK];
  int64_t rdims[HK_MAX_RANK];
  int32_t perm[HK_MAX_RANK];
  hk_iota iota;
  int64_t devices[];
} canon_scratch;

void hk_shw_load(work *w, const hk_sharding *s) {
  w->nd = s->n_tile_dims;
  memcpy(w->dims, s->tile_dims, sizeof(int64_t) * (size_t)w->nd);
  w->nsub = s->n_subgroups;
  if (s->n_subgroups) memcpy(w->sub, s->subgroups, (size_t)s->n_subgroups);
  if (s->replicate_on_last_tile_dim) w->sub[w->nsub++] = HK_SUBGROUP_REPLICATED;
  w->n = hk_shard_num_devices(s);
  w->dev = malloc(sizeof(int64_t) * (size_t)(w->n ? w->n : 1));
  memcpy(w->dev, s->devices, sizeof(int64_t) * (size_t)w->n);
  w->kind = HK_SHARDING_TILED;
  w->flag = false;
}

/* Transposes the device array by perm (new dim i = old dim perm[i]). */
void hk_shw_transpose(work *w, const int *perm) {
  int64_t stride[HK_MAX_RANK], ndims[HK_MAX_RANK], tstride[HK_MAX_RANK], idx[HK_MAX_RANK];
  int64_t s = 1;
  for (int i = w->nd - 1; i >= 0; i--) {
    stride[i] = s;
    s *= w->dims[i];
  }
  for (int i = 0; i < w->nd; i++) {
    ndims[i] = w->dims[perm[i]];
    tstride[i] = stride[perm[i]];
    idx[i] = 0;
  }
  int64_t *out = malloc(sizeof(int64_t) * (size_t)(w->n ? w->n : 1));
  int64_t src = 0;
  for (int64_t j = 0; j < w->n; j++) {
    out[j] = w->dev[src];
    for (int i = w->nd - 1; i >= 0; i--) {
      idx[i]++;
      src += tstride[i];
      if (idx[i] < ndims[i]) break;
      src -= tstride[i] * ndims[i];
      idx[i] = 0;
    }
  }
  free(w->dev);
  w->dev = out;
  memcpy(w->dims, ndims, sizeof(int64_t) * (size_t)w->nd);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts devices within each group of the last dim (PartialTile). */
static void work_sort_last_groups(work *w) {
  int64_t g = w->dims[w->nd - 1];
  for (int64_t i = 0; g > 1 && i < w->n; i += g) qsort(w->dev + i, (size_t)g, sizeof(int64_t), cmp_i64);
}

/* Order of subgroup types after merging (XLA's kOrderedTypes). */
static const uint8_t kTypeOrder[] = {HK_SUBGROUP_MANUAL, HK_SUBGROUP_UNREDUCED, HK_SUBGROUP_REPLICATED};

/* Drops size-1 subgroup dims, merges dims of one type and orders them. */
static void work_merge_subgroups(work *w) {
  int data = w->nd - w->nsub;
  int perm[HK_MAX_RANK], np = 0, removed[HK_MAX_RANK], nrem = 0, ntypes = 0;
  bool needs = false, seen[3] = {false, false, false};
  for (int i = 0; i < data; i++) perm[np++] = i;
  for (int i = 0; i < w->nsub; i++) {
    if (w->dims[data + i] == 1) {
      removed[nrem++] = data + i;
      needs = true;
    } else if (w->sub[i] < 3) {
      if (seen[w->sub[i]]) needs = true;
      else ntypes++;
      seen[w->sub[i]] = true;
    }
  }
  if (!needs && ntypes <= 1) return;
  int64_t merged[HK_MAX_RANK];
  uint8_t types[HK_MAX_RANK];
  int nm = data, nt = 0;
  memcpy(merged, w->dims, sizeof(int64_t) * (size_t)data);
  for (size_t k = 0; k < sizeof kTypeOrder; k++) {
    int64_t size = 1;
    bool any = false;
    for (int i = 0; i < w->nsub; i++) {
      if (w->sub[i] != kTypeOrder[k] || w->dims[data + i] == 1) continue;
      perm[np++] = data + i;
      size *= w->dims[data + i];
      any = true;
    }
    if (any) {
      merged[nm++] = size;
      types[nt++] = kTypeOrder[k];
    }
  }
  for (int i = 0; i < nrem; i++) perm[np++] = removed[i];
  hk_shw_transpose(w, perm);
  w->nd = nm;
  memcpy(w->dims, merged, sizeof(int64_t) * (size_t)nm);
  w->nsub = nt;
  memcpy(w->sub, types, (size_t)nt);
}

/* XLA's create_sharding after merging (PartialTile and friends). */
static void work_finish(work *w) {
  if (w->nsub == 1 && w->sub[0] == HK_SUBGROUP_REPLICATED) {
    int64_t last = w->dims[w->nd - 1];
    if (w->nd == 1 || last == w->n) {
      w->kind = HK_SHARDING_REPLICATED;
    } else if (last == 1) {
      w->nd--;
      w->nsub = 0;
    } else {
      work_sort_last_groups(w);
      w->nsub = 0;
      w->flag = true;
    }
  } else if (w->nsub == 1 && w->sub[0] == HK_SUBGROUP_MANUAL && w->dims[w->nd - 1] == w->n) {
    w->kind = HK_SHARDING_MANUAL;
  } else if (w->nsub > 0 && w->sub[w->nsub - 1] == HK_SUBGROUP_REPLICATED) {
    work_sort_last_groups(w);
  }
}

/* All subgroups of one type and a single tile on the data dims. */
static void work_collapse_uniform(work *w) {
  if (w->nsub == 0) return;
  for (int i = 1; i < w->nsub; i++)
    if (w->sub[i] != w->sub[0]) return;
  if (hk_shard_product(w->nd - w->nsub, w->dims) != 1) return;
  static const uint8_t kind_of[] = {
      [HK_SUBGROUP_REPLICATED] = HK_SHARDING_REPLICATED,
      [HK_SUBGROUP_MANUAL] = HK_SHARDING_MANUAL,
      [HK_SUBGROUP_UNREDUCED] = HK_SHARDING_UNREDUCED,
  };
  if (w->sub[0] < 3) w->kind = kind_of[w->sub[0]];
}

/* XLA's normalisation; `semantic` also maps a one-device tiling to
 * replicated (XLA's FromProto does; its parser refuses such lists). */
void hk_shw_normalise(work *w, bool semantic) {
  if (w->nsub > 0) {
    work_collapse_uniform(w);
    if (w->kind != HK_SHARDING_TILED) return;
    work_merge_subgroups(w);
    work_finish(w);
  }
  if (semantic && w->kind == HK_SHARDING_TILED && w->nsub == 0 && !w->flag && w->n == 1)
    w->kind = HK_SHARDING_REPLICATED;
}

/* Fills *t (a copy of `like` for kind, metadata and shard group) from the
 * work; the arrays go into a malloc'ed scratch block (*scratch) and
 * w->dev is freed. */
static void work_to_template(work *w, const hk_sharding *like, hk_sharding *t, void **scratch,
                             bool keep_iota) {
  *t = *like;
  *scratch = NULL;
  t->kind = w->kind;
  if (w->kind != HK_SHARDING_TILED) {
    free(w->dev);
    return;
  }
  canon_scratch *cs = malloc(sizeof *cs + sizeof(int64_t) * (size_t)(w->n ? w->n : 1));
  memcpy(cs->dims, w->dims, sizeof(int64_t) * (size_t)w->nd);
  memcpy(cs->sub, w->sub, (size_t)w->nsub);
  memcpy(cs->devices, w->dev, sizeof(int64_t) * (size_t)w->n);
  free(w->dev);
  t->n_tile_dims = w->nd;
  t->tile_dims = cs->dims;
  t->devices = cs->devices;
  t->n_subgroups = w->nsub;
  t->subgroups = w->nsub ? cs->sub : NULL;
  t->replicate_on_last_tile_dim = w->flag;
  t->iota = NULL;
  if (keep_iota) {
    int nr = hk_iota_detect(w->n, cs->devices, cs->rdims, cs->perm);
    if (nr > 0) {
      cs->iota = (hk_iota){w->nd, cs->dims, nr, cs->rdims, cs->perm};
      t->iota = &cs->iota;
    }
  }
  *scratch = cs;
}

const hk_sharding *hk_shw_intern(hk_module *m, work *w, const hk_sharding *like, bool keep_iota) {
  hk_sharding t;
  void *scratch;
  work_to_template(w, like, &t, &scratch, keep_iota);
  const hk_sharding *r = hk_sharding_intern(m, &t);
  free(scratch);
  return r;
}

/* Writes the normalised template of a non-tuple sharding into *t. */
static void canonical_template(const hk_sharding *s, hk_sharding *t, void **scratch, bool keep_iota,
                               bool keep_metadata) {
  hk_sharding like = *s;
  if (!keep_metadata) {
    like.n_metadata = 0;
    like.metadata = NULL;
  }
  if (s->kind != HK_SHARDING_TILED) {
    *t = like;
    *scratch = NULL;
    return;
  }
  work w;
  hk_shw_load(&w, s);
  hk_shw_normalise(&w, !keep_metadata);
  work_to_template(&w, &like, t, scratch, keep_iota && s->iota);
}

void hk_sharding_semantic_template(const hk_sharding *s, hk_sharding *t, void **scratch) {
  canonical_template(s, t, scratch, false, false);
}

const hk_sharding *hk_sharding_canonical(hk_module *m, const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) {
    const hk_sharding **elems = malloc(sizeof(*elems) * (size_t)(s->n_elems ? s->n_elems : 1));
    for (int i = 0; i < s->n_elems; i++) elems[i] = hk_sharding_canonical(m, s->elems[i]);
    const hk_sharding *r = hk_sharding_tuple(m, s->n_elems, elems);
    free(elems);
    if (s->shard_group_kind != HK_SHARD_GROUP_NONE) {
      hk_sharding t = *r;
      t.shard_group_kind = s->shard_group_kind;
      t.shard_group_id = s->shard_group_id;
      r = hk_sharding_intern(m, &t);
    }
    return r;
  }
  hk_sharding t;
  void *scratch;
  canonical_template(s, &t, &scratch, true, true);
  const hk_sharding *r = hk_sharding_intern(m, &t);
  free(scratch);
  return r;
}

/* Every element of tuple t equivalent to the non-tuple s. */
static bool tuple_all_equivalent(const hk_sharding *t, const hk_sharding *s) {
  if (t->n_elems == 0) return false;
  for (int i = 0; i < t->n_elems; i++)
    if (!hk_sharding_equivalent(t->elems[i], s)) return false;
  return true;
}

bool hk_sharding_equivalent(const hk_sharding *a, const hk_sharding *b) {
  if (a == b) return true;
  const hk_sharding *sa = hk_sharding_semantic(a), *sb = hk_sharding_semantic(b);
  if (sa == sb) return true;
  bool ta = a->kind == HK_SHARDING_TUPLE, tb = b->kind == HK_SHARDING_TUPLE;
  if (ta && !tb) return tuple_all_equivalent(a, b);
  if (tb && !ta) return tuple_all_equivalent(b, a);
  if (ta && tb) {
    if (a->n_elems != b->n_elems || a->shard_group_kind != b->shard_group_kind ||
        a->shard_group_id != b->shard_group_id)
      return false;
    for (int i = 0; i < a->n_elems; i++)
      if (!hk_sharding_equivalent(a->elems[i], b->elems[i])) return false;
    return true;
  }
  return hk_sharding_struct_equal(sa, sb);
}
