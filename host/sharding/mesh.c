/* mesh.c - hk_sharding_from_mesh: a mesh (named) sharding as a classic tile assignment (XLA's HloSharding::V3ToV2Sharding, Shardy's export); used by the text parser (named.c) and plugin/sdy. */
#include <stdlib.h>
#include <string.h>

#include "sharding/sharding_impl.h"

#define MS_MAX_DEVICES (1ll << 31)
#define MS_MAX_REFS (4 * HK_MAX_RANK * HK_MAX_RANK)

/* One piece of the mesh: a whole axis or a sub-axis, its [lo, hi) range in
 * pre-size units. */
typedef struct piece {
  int axis;
  int64_t lo, hi;
} piece;

typedef struct refs_view {
  int n;
  const hk_mesh_axis_ref *r[MS_MAX_REFS];
} refs_view;

static void ref_range(const hk_mesh *mesh, const hk_mesh_axis_ref *r, int64_t *lo, int64_t *hi) {
  *lo = r->size ? r->pre_size : 1;
  *hi = r->size ? r->pre_size * r->size : mesh->axis_sizes[r->axis];
}

static hk_status *check_mesh(const hk_mesh *mesh, int64_t *total) {
  *total = 1;
  if (mesh->n_axes < 0 || mesh->n_axes > HK_MAX_RANK)
    return hk_error(HK_INVALID_ARGUMENT, "mesh has %d axes (at most %d)", (int)mesh->n_axes, HK_MAX_RANK);
  for (int a = 0; a < mesh->n_axes; a++) {
    int64_t n = mesh->axis_sizes[a];
    if (n <= 0) return hk_error(HK_INVALID_ARGUMENT, "mesh axis %d has size %lld (must be positive)", a, (long long)n);
    if (*total > MS_MAX_DEVICES / n) return hk_error(HK_INVALID_ARGUMENT, "mesh too large");
    *total *= n;
  }
  return NULL;
}

/* An axis index in range and, for a sub-axis, XLA's AxisRef::Validate. */
static hk_status *check_ref(const hk_mesh *mesh, const hk_mesh_axis_ref *r) {
  if (r->axis < 0 || r->axis >= mesh->n_axes)
    return hk_error(HK_INVALID_ARGUMENT, "axis index %d is out of range for a mesh of %d axes", (int)r->axis,
                    (int)mesh->n_axes);
  int64_t full = mesh->axis_sizes[r->axis];
  if (!r->size) return NULL;
  if (r->pre_size < 1 || r->size < 2 || r->size >= full || full % r->pre_size ||
      full / r->pre_size % r->size)
    return hk_error(HK_INVALID_ARGUMENT, "sub-axis %d:(%lld)%lld is not a sub-axis of an axis of size %lld",
                    (int)r->axis, (long long)r->pre_size, (long long)r->size, (long long)full);
  return NULL;
}

static hk_status *add_refs(refs_view *v, const hk_mesh_axis_refs *l) {
  if (l->n < 0 || l->n > MS_MAX_REFS - v->n) return hk_error(HK_INVALID_ARGUMENT, "too many axis refs");
  for (int k = 0; k < l->n; k++) v->r[v->n++] = &l->refs[k];
  return NULL;
}

/* Every ref of s, each valid and no two overlapping. */
static hk_status *collect_refs(const hk_mesh *mesh, const hk_mesh_sharding *s, refs_view *v) {
  v->n = 0;
  if (s->rank < 0 || s->rank + 3 > HK_MAX_RANK - 1)
    return hk_error(HK_INVALID_ARGUMENT, "too many dimensions in mesh sharding (%d)", (int)s->rank);
  for (int d = 0; d < s->rank; d++) HK_TRY(add_refs(v, &s->dims[d]));
  HK_TRY(add_refs(v, &s->manual));
  HK_TRY(add_refs(v, &s->unreduced));
  HK_TRY(add_refs(v, &s->replicated));
  for (int k = 0; k < v->n; k++) {
    HK_TRY(check_ref(mesh, v->r[k]));
    for (int j = 0; j < k; j++) {
      int64_t alo, ahi, blo, bhi;
      if (v->r[j]->axis != v->r[k]->axis) continue;
      ref_range(mesh, v->r[j], &alo, &ahi);
      ref_range(mesh, v->r[k], &blo, &bhi);
      if (alo < bhi && blo < ahi)
        return hk_error(HK_INVALID_ARGUMENT, "axis %d is used twice (overlapping refs)", (int)v->r[k]->axis);
    }
  }
  return NULL;
}

/* Adds cut c to the sorted, distinct cuts[0..*n); false when full. */
static bool add_cut(int64_t *cuts, int *n, int cap, int64_t c) {
  int i = 0;
  while (i < *n && cuts[i] < c) i++;
  if (i < *n && cuts[i] == c) return true;
  if (*n == cap) return false;
  memmove(cuts + i + 1, cuts + i, sizeof *cuts * (size_t)(*n - i));
  cuts[i] = c;
  (*n)++;
  return true;
}

/* The pieces of axis a: the axis cut at every sub-axis boundary. */
static hk_status *axis_pieces(const hk_mesh *mesh, int a, const refs_view *v, piece *out, int *np) {
  int64_t cuts[HK_MAX_RANK + 2] = {1};
  int nc = 1, cap = HK_MAX_RANK + 2;
  bool ok = add_cut(cuts, &nc, cap, mesh->axis_sizes[a]);
  for (int k = 0; k < v->n && ok; k++)
    if (v->r[k]->axis == a && v->r[k]->size)
      ok = add_cut(cuts, &nc, cap, v->r[k]->pre_size) && add_cut(cuts, &nc, cap, v->r[k]->pre_size * v->r[k]->size);
  if (!ok) return hk_error(HK_INVALID_ARGUMENT, "mesh sharding has too many sub-axes");
  if (nc == 1) cuts[nc++] = 1;  /* a size-1 axis: one piece */
  for (int i = 0; i + 1 < nc; i++) {
    if (cuts[i + 1] % cuts[i])
      return hk_error(HK_INVALID_ARGUMENT, "sub-axes of axis %d cannot coexist (they do not nest)", a);
    if (*np == HK_MAX_RANK) return hk_error(HK_INVALID_ARGUMENT, "mesh sharding has too many sub-axes");
    out[(*np)++] = (piece){a, cuts[i], cuts[i + 1]};
  }
  return NULL;
}

static int find_piece(const hk_mesh *mesh, const piece *p, int np, const hk_mesh_axis_ref *r) {
  int64_t lo, hi;
  ref_range(mesh, r, &lo, &hi);
  for (int k = 0; k < np; k++)
    if (p[k].axis == r->axis && p[k].lo == lo && p[k].hi == hi) return k;
  return -1;
}

/* The tile dims, subgroup types and the iota (reshape dims = the pieces in
 * mesh order, perm = their order in the tile assignment) of the result. */
typedef struct tiling {
  int nt, ntypes, np;
  int64_t tile[HK_MAX_RANK];
  uint8_t types[3];
  int64_t rdims[HK_MAX_RANK];
  int32_t perm[HK_MAX_RANK];
  int pos_of[HK_MAX_RANK];
  int pos;
  piece p[HK_MAX_RANK];
} tiling;

/* One tile dim made of the refs of l (in their order). */
static void add_dim(tiling *t, const hk_mesh *mesh, const hk_mesh_axis_refs *l) {
  t->tile[t->nt] = 1;
  for (int k = 0; k < l->n; k++) {
    int q = find_piece(mesh, t->p, t->np, &l->refs[k]);
    t->tile[t->nt] *= t->p[q].hi / t->p[q].lo;
    t->pos_of[q] = t->pos++;
  }
  t->nt++;
}

static void add_group(tiling *t, const hk_mesh *mesh, const hk_mesh_axis_refs *l, uint8_t type) {
  if (!l->n) return;
  add_dim(t, mesh, l);
  t->types[t->ntypes++] = type;
}

static hk_status *build_tiling(const hk_mesh *mesh, const hk_mesh_sharding *s, const refs_view *v, tiling *t) {
  memset(t, 0, sizeof *t);
  for (int a = 0; a < mesh->n_axes; a++) HK_TRY(axis_pieces(mesh, a, v, t->p, &t->np));
  for (int k = 0; k < t->np; k++) t->pos_of[k] = -1;
  for (int d = 0; d < s->rank; d++) add_dim(t, mesh, &s->dims[d]);
  add_group(t, mesh, &s->manual, HK_SUBGROUP_MANUAL);
  add_group(t, mesh, &s->unreduced, HK_SUBGROUP_UNREDUCED);
  int64_t replicated = 1;
  for (int k = 0; k < t->np; k++) {
    t->rdims[k] = t->p[k].hi / t->p[k].lo;
    if (t->pos_of[k] < 0) replicated *= t->rdims[k], t->pos_of[k] = t->pos++;
    t->perm[t->pos_of[k]] = k;
  }
  if (replicated > 1) {
    t->tile[t->nt++] = replicated;
    t->types[t->ntypes++] = HK_SUBGROUP_REPLICATED;
  }
  return NULL;
}

static bool all_replicated(const hk_mesh_sharding *s) {
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d].n) return false;
  return !s->unreduced.n && !s->manual.n;
}

/* The mesh's device ids (mesh order), malloc'ed; NULL for iota order. */
static int64_t *mesh_ids(const hk_mesh *mesh, int64_t total) {
  if (!mesh->devices && !mesh->device_iota) return NULL;
  int64_t *ids = malloc(sizeof *ids * (size_t)total);
  if (!ids) hk_out_of_memory();
  if (mesh->devices) memcpy(ids, mesh->devices, sizeof *ids * (size_t)total);
  else hk_iota_expand(mesh->device_iota, ids);
  return ids;
}

/* Interns the tiling over the mesh's devices: ids arranged as the reshape
 * dims, transposed by perm. */
static const hk_sharding *intern_tiling(hk_module *m, const hk_mesh *mesh, int64_t total, tiling *g) {
  hk_sharding t = {.kind = HK_SHARDING_TILED, .n_tile_dims = g->nt, .tile_dims = g->tile,
                   .n_subgroups = g->ntypes, .subgroups = g->types};
  hk_iota iota = {g->nt, g->tile, g->np, g->rdims, g->perm};
  int64_t rd[HK_MAX_RANK];
  int32_t pm[HK_MAX_RANK];
  int64_t *ids = mesh_ids(mesh, total), *devs = NULL;
  if (ids) {
    devs = malloc(sizeof *devs * (size_t)total);
    if (!devs) hk_out_of_memory();
    hk_iota_expand_raw(g->np, g->rdims, g->perm, devs);
    for (int64_t k = 0; k < total; k++) devs[k] = ids[devs[k]];
    int nr = mesh->devices ? 0 : hk_iota_detect(total, devs, rd, pm);
    if (nr) iota = (hk_iota){g->nt, g->tile, nr, rd, pm}, t.iota = &iota;
    else t.devices = devs;
  } else {
    t.iota = &iota;
  }
  const hk_sharding *r = hk_sharding_canonical(m, hk_sharding_intern(m, &t));
  free(ids);
  free(devs);
  return r;
}

const hk_sharding *hk_sharding_from_mesh(hk_module *m, const hk_mesh *mesh, const hk_mesh_sharding *s,
                                         hk_status **status) {
  int64_t total;
  *status = check_mesh(mesh, &total);
  if (*status) return NULL;
  refs_view *v = malloc(sizeof *v);
  tiling *g = malloc(sizeof *g);
  if (!v || !g) hk_out_of_memory();
  const hk_sharding *r = NULL;
  *status = collect_refs(mesh, s, v);
  if (!*status && mesh->n_axes == 0 && mesh->devices) r = hk_sharding_maximal(m, mesh->devices[0]);
  else if (!*status && all_replicated(s)) r = hk_sharding_replicated(m);
  else if (!*status && !(*status = build_tiling(mesh, s, v, g))) r = intern_tiling(m, mesh, total, g);
  free(v);
  free(g);
  if (*status) hk_status_prefix(*status, "mesh sharding");
  return r;
}
