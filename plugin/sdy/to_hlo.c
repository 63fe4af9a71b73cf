/* to_hlo.c - a Shardy tensor sharding as an HloSharding, the way XLA's
 * convertToHloSharding (xla/service/spmd/shardy/mhlo_round_trip/
 * export_shardings.cc) builds it: the mesh's axes, split into the sub-axes
 * the sharding uses, form the reshape dims of an iota (or of the mesh's
 * device list); sharded axes come first in dim order, then the manual
 * axes, then the unreduced axes (as newer XLA's V3ToV2Sharding), then
 * every other axis as one replicated subgroup dim. */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

const sdy_mesh *sdy_find_mesh(const sdy_meshes *ms, const sdy_sharding *s) {
  if (!s->mesh_name[0]) return &s->inline_mesh;
  for (int k = 0; k < ms->n; k++)
    if (strcmp(ms->m[k].name, s->mesh_name) == 0) return &ms->m[k];
  return NULL;
}

static int axis_index(const sdy_mesh *mesh, const char *name) {
  for (int k = 0; k < mesh->n_axes; k++)
    if (strcmp(mesh->axes[k].name, name) == 0) return k;
  return -1;
}

/* The [lo, hi) range of the axis a ref covers, in pre-size units. */
static void ref_range(const sdy_mesh *mesh, const sdy_axis_ref *r, int64_t *lo, int64_t *hi) {
  int64_t full = mesh->axes[axis_index(mesh, r->name)].size;
  *lo = r->sub ? r->pre_size : 1;
  *hi = r->sub ? r->pre_size * r->size : full;
}

static hk_status *check_ref(const sdy_mesh *mesh, const sdy_axis_ref *r) {
  int a = axis_index(mesh, r->name);
  if (a < 0) return hk_error(HK_INVALID_ARGUMENT, "axis \"%s\" is not in the mesh", r->name);
  int64_t full = mesh->axes[a].size;
  if (r->sub && (full % (r->pre_size * r->size) != 0 || (r->pre_size == 1 && r->size == full)))
    return hk_error(HK_INVALID_ARGUMENT,
                    "sub-axis \"%s\":(%lld)%lld does not divide axis \"%s\" of size %lld", r->name,
                    (long long)r->pre_size, (long long)r->size, r->name, (long long)full);
  return NULL;
}

static bool refs_overlap(const sdy_mesh *mesh, const sdy_axis_ref *a, const sdy_axis_ref *b) {
  if (strcmp(a->name, b->name) != 0) return false;
  int64_t alo, ahi, blo, bhi;
  ref_range(mesh, a, &alo, &ahi);
  ref_range(mesh, b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

hk_status *sdy_check_sharding(const sdy_mesh *mesh, const sdy_sharding *s, int rank) {
  if (s->rank != rank)
    return hk_error(HK_INVALID_ARGUMENT, "sharding has %d dimension shardings for a rank-%d value",
                    s->rank, rank);
  int64_t total = 1;
  for (int k = 0; k < mesh->n_axes; k++) total *= mesh->axes[k].size;
  if (mesh->n_devices && mesh->n_devices != (mesh->n_axes ? total : 1))
    return hk_error(HK_INVALID_ARGUMENT, "mesh has %d device ids for %lld devices",
                    mesh->n_devices, (long long)total);
  const sdy_axis_ref *all[SDY_MAX_DIMS * SDY_MAX_AXES + 2 * SDY_MAX_AXES];
  int n = 0;
  for (int d = 0; d < s->rank; d++)
    for (int k = 0; k < s->dims[d].n_axes; k++) all[n++] = &s->dims[d].axes[k];
  for (int k = 0; k < s->n_replicated; k++) all[n++] = &s->replicated[k];
  for (int k = 0; k < s->n_unreduced; k++) all[n++] = &s->unreduced[k];
  for (int k = 0; k < n; k++) {
    HK_TRY(check_ref(mesh, all[k]));
    for (int j = 0; j < k; j++)
      if (refs_overlap(mesh, all[j], all[k]))
        return hk_error(HK_INVALID_ARGUMENT, "axis \"%s\" is used twice", all[k]->name);
  }
  return NULL;
}

static bool names_one_of(const sdy_axis_ref *r, int n, char (*names)[64]) {
  for (int k = 0; k < n; k++)
    if (!strcmp(r->name, names[k])) return true;
  return false;
}

hk_status *sdy_check_free_of(const sdy_sharding *s, int n, char (*names)[64]) {
  const sdy_axis_ref *bad = NULL;
  for (int d = 0; d < s->rank && !bad; d++)
    for (int k = 0; k < s->dims[d].n_axes && !bad; k++)
      if (names_one_of(&s->dims[d].axes[k], n, names)) bad = &s->dims[d].axes[k];
  for (int k = 0; k < s->n_replicated && !bad; k++)
    if (names_one_of(&s->replicated[k], n, names)) bad = &s->replicated[k];
  for (int k = 0; k < s->n_unreduced && !bad; k++)
    if (names_one_of(&s->unreduced[k], n, names)) bad = &s->unreduced[k];
  return bad ? hk_error(HK_INVALID_ARGUMENT, "axis \"%s\" is manual here", bad->name) : NULL;
}

void sdy_open_sharding(sdy_sharding *s, const char *mesh_name, int rank) {
  memset(s, 0, sizeof *s);
  snprintf(s->mesh_name, sizeof s->mesh_name, "%s", mesh_name);
  s->rank = rank;
  for (int d = 0; d < rank; d++) s->dims[d].open = true, s->dims[d].priority = -1;
}

void sdy_drop_axes(sdy_sharding *s, int n, char (*names)[64]) {
  for (int d = 0; d < s->rank; d++) {
    sdy_dim *dim = &s->dims[d];
    int w = 0;
    for (int k = 0; k < dim->n_axes; k++) {
      bool drop = false;
      for (int j = 0; j < n; j++) drop |= strcmp(dim->axes[k].name, names[j]) == 0;
      if (!drop) dim->axes[w++] = dim->axes[k];
    }
    dim->n_axes = w;
  }
}

/* One piece of the mesh: a whole axis or a sub-axis, in mesh order. */
typedef struct piece {
  int axis;
  int64_t lo, hi;                  /* pre-size range */
} piece;

/* The mesh's axes split at every sub-axis boundary the dims use (XLA's
 * getOrderedAxisRefs).  A sub-axis's pre-size is the product of the
 * pieces before (major to) it, so the pieces of one axis are listed by
 * increasing pre-size. */
static int ordered_pieces(const sdy_mesh *mesh, const sdy_sharding *s, piece *out) {
  int n = 0;
  for (int a = 0; a < mesh->n_axes; a++) {
    int64_t cuts[2 + 2 * (SDY_MAX_DIMS + 1) * SDY_MAX_AXES];
    int nc = 0;
    cuts[nc++] = 1;
    cuts[nc++] = mesh->axes[a].size;
    const sdy_axis_ref *refs[SDY_MAX_DIMS * SDY_MAX_AXES + SDY_MAX_AXES];
    int nr = 0;
    for (int d = 0; d < s->rank; d++)
      for (int k = 0; k < s->dims[d].n_axes; k++) refs[nr++] = &s->dims[d].axes[k];
    for (int k = 0; k < s->n_unreduced; k++) refs[nr++] = &s->unreduced[k];
    for (int k = 0; k < nr; k++) {
      const sdy_axis_ref *r = refs[k];
      if (!r->sub || strcmp(r->name, mesh->axes[a].name) != 0) continue;
      cuts[nc++] = r->pre_size;
      cuts[nc++] = r->pre_size * r->size;
    }
    for (int i = 1; i < nc; i++)   /* sort, dedup */
      for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
        int64_t t = cuts[j];
        cuts[j] = cuts[j - 1];
        cuts[j - 1] = t;
      }
    int u = 1;
    for (int i = 1; i < nc; i++)
      if (cuts[i] != cuts[u - 1]) cuts[u++] = cuts[i];
    if (u == 1) u = 2, cuts[1] = cuts[0];   /* a size-1 axis: one piece */
    for (int i = 0; i + 1 < u; i++) out[n++] = (piece){a, cuts[i], cuts[i + 1]};
  }
  return n;
}

static int find_piece(const piece *p, int n, const sdy_mesh *mesh, const sdy_axis_ref *r) {
  int a = axis_index(mesh, r->name);
  int64_t lo, hi;
  ref_range(mesh, r, &lo, &hi);
  for (int k = 0; k < n; k++)
    if (p[k].axis == a && p[k].lo == lo && p[k].hi == hi) return k;
  return -1;
}

static bool fully_open(const sdy_sharding *s) {
  if (s->n_replicated || s->n_unreduced) return false;
  for (int d = 0; d < s->rank; d++)
    if (!s->dims[d].open || s->dims[d].n_axes) return false;
  return true;
}

/* Devices of the mesh arranged as reshape dims, transposed by perm,
 * flattened: the explicit tile assignment of a mesh with device_ids. */
static int64_t *transposed_devices(const sdy_mesh *mesh, const int64_t *rdims, const int32_t *perm,
                                   int nr, int64_t total) {
  int64_t *out = malloc(sizeof *out * (size_t)total);
  int64_t stride[SDY_MAX_AXES * 4], idx[SDY_MAX_AXES * 4] = {0};
  if (!out) hk_out_of_memory();
  int64_t st = 1;
  for (int k = nr - 1; k >= 0; k--) stride[k] = st, st *= rdims[k];
  for (int64_t o = 0; o < total; o++) {
    int64_t src = 0;
    for (int k = 0; k < nr; k++) src += idx[k] * stride[perm[k]];
    out[o] = mesh->devices[src];
    for (int k = nr - 1; k >= 0; k--) {    /* next index over the permuted dims */
      if (++idx[k] < rdims[perm[k]]) break;
      idx[k] = 0;
    }
  }
  return out;
}

const hk_sharding *sdy_to_hlo(hk_module *m, const sdy_mesh *mesh, const sdy_sharding *s,
                              int n_manual, char (*manual)[64]) {
  if (mesh->n_axes == 0)
    return mesh->n_devices ? hk_sharding_maximal(m, mesh->devices[0]) : hk_sharding_replicated(m);
  if (n_manual == mesh->n_axes) return hk_sharding_manual(m);
  if (!n_manual && fully_open(s)) return NULL;
  piece pieces[SDY_MAX_AXES * 4];
  int np = ordered_pieces(mesh, s, pieces);
  int pos_of_piece[SDY_MAX_AXES * 4];
  for (int k = 0; k < np; k++) pos_of_piece[k] = -1;
  int64_t tile[SDY_MAX_DIMS + 3];
  int nt = s->rank, pos = 0;
  for (int d = 0; d < s->rank; d++) {
    tile[d] = 1;
    for (int k = 0; k < s->dims[d].n_axes; k++) {
      int p = find_piece(pieces, np, mesh, &s->dims[d].axes[k]);
      tile[d] *= pieces[p].hi / pieces[p].lo;
      pos_of_piece[p] = pos++;
    }
  }
  uint8_t types[3];
  int ntypes = 0;
  if (n_manual) {
    tile[nt] = 1;
    for (int j = 0; j < n_manual; j++) {
      sdy_axis_ref r = {0};
      snprintf(r.name, sizeof r.name, "%s", manual[j]);
      int p = find_piece(pieces, np, mesh, &r);
      tile[nt] *= pieces[p].hi / pieces[p].lo;
      pos_of_piece[p] = pos++;
    }
    nt++;
    types[ntypes++] = HK_SUBGROUP_MANUAL;
  }
  if (s->n_unreduced) {            /* newer XLA: an unreduced subgroup after the manual one */
    tile[nt] = 1;
    for (int j = 0; j < s->n_unreduced; j++) {
      int p = find_piece(pieces, np, mesh, &s->unreduced[j]);
      tile[nt] *= pieces[p].hi / pieces[p].lo;
      pos_of_piece[p] = pos++;
    }
    nt++;
    types[ntypes++] = HK_SUBGROUP_UNREDUCED;
  }
  int64_t rdims[SDY_MAX_AXES * 4], replicated = 1;
  int32_t perm[SDY_MAX_AXES * 4];
  int rpos = pos;
  for (int k = 0; k < np; k++) {
    rdims[k] = pieces[k].hi / pieces[k].lo;
    if (pos_of_piece[k] < 0) {
      perm[rpos++] = k;
      replicated *= rdims[k];
    } else {
      perm[pos_of_piece[k]] = k;
    }
  }
  if (replicated > 1) {
    tile[nt++] = replicated;
    types[ntypes++] = HK_SUBGROUP_REPLICATED;
  }
  int64_t total = 1, data = 1;
  for (int k = 0; k < nt; k++) total *= tile[k];
  for (int d = 0; d < s->rank; d++) data *= tile[d];
  if (data == 1 && !n_manual && !s->n_unreduced) return hk_sharding_replicated(m);
  hk_iota iota = {nt, tile, np, rdims, perm};
  hk_sharding t = {.kind = HK_SHARDING_TILED, .n_tile_dims = nt, .tile_dims = tile,
                   .n_subgroups = ntypes, .subgroups = types};
  int64_t *devs = NULL;
  if (mesh->n_devices) t.devices = devs = transposed_devices(mesh, rdims, perm, np, total);
  else t.iota = &iota;
  const hk_sharding *r = hk_sharding_canonical(m, hk_sharding_intern(m, &t));
  free(devs);
  return r;
}
