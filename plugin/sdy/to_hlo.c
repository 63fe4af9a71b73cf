/* to_hlo.c - a Shardy tensor sharding as an HloSharding, the way XLA's
 * convertToHloSharding (xla/service/spmd/shardy/mhlo_round_trip/
 * export_shardings.cc) builds it: Shardy's checks and names here, the rule
 * itself is the host's hk_sharding_from_mesh (abi/hlokit/sharding.h), the
 * one the text parser uses for XLA's named shardings. */
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

static bool fully_open(const sdy_sharding *s) {
  if (s->n_replicated || s->n_unreduced) return false;
  for (int d = 0; d < s->rank; d++)
    if (!s->dims[d].open || s->dims[d].n_axes) return false;
  return true;
}

/* The ABI's view of a Shardy sharding (storage for every ref). */
typedef struct abi_view {
  int64_t sizes[SDY_MAX_AXES];
  hk_mesh mesh;
  hk_mesh_axis_refs dims[SDY_MAX_DIMS];
  hk_mesh_axis_ref refs[(SDY_MAX_DIMS + 2) * SDY_MAX_AXES];
  int n_refs;
  hk_mesh_sharding s;
} abi_view;

static void add_ref(abi_view *v, const sdy_mesh *mesh, const sdy_axis_ref *r) {
  v->refs[v->n_refs++] = (hk_mesh_axis_ref){axis_index(mesh, r->name), r->sub ? r->pre_size : 1,
                                            r->sub ? r->size : 0};
}

static hk_mesh_axis_refs abi_refs(abi_view *v, const sdy_mesh *mesh, const sdy_axis_ref *r, int n) {
  hk_mesh_axis_refs out = {n, v->refs + v->n_refs};
  for (int k = 0; k < n; k++) add_ref(v, mesh, &r[k]);
  return out;
}

static hk_mesh_axis_refs abi_manual(abi_view *v, const sdy_mesh *mesh, int n, char (*manual)[64]) {
  hk_mesh_axis_refs out = {n, v->refs + v->n_refs};
  for (int k = 0; k < n; k++) v->refs[v->n_refs++] = (hk_mesh_axis_ref){axis_index(mesh, manual[k]), 1, 0};
  return out;
}

/* Replicated axes are left out: they never change the tile assignment
 * (Shardy's checks, sdy_check_sharding, have read them). */
static void abi_view_of(abi_view *v, const sdy_mesh *mesh, const sdy_sharding *s, int n_manual,
                        char (*manual)[64]) {
  for (int k = 0; k < mesh->n_axes; k++) v->sizes[k] = mesh->axes[k].size;
  v->mesh = (hk_mesh){mesh->n_axes, v->sizes, mesh->n_devices ? mesh->devices : NULL, NULL};
  for (int d = 0; d < s->rank; d++) v->dims[d] = abi_refs(v, mesh, s->dims[d].axes, s->dims[d].n_axes);
  v->s = (hk_mesh_sharding){.rank = s->rank, .dims = v->dims};
  v->s.unreduced = abi_refs(v, mesh, s->unreduced, s->n_unreduced);
  v->s.manual = abi_manual(v, mesh, n_manual, manual);
}

const hk_sharding *sdy_to_hlo(hk_module *m, const sdy_mesh *mesh, const sdy_sharding *s,
                              int n_manual, char (*manual)[64], hk_status **st) {
  *st = NULL;
  if (mesh->n_axes && n_manual == mesh->n_axes) return hk_sharding_manual(m);
  if (!n_manual && mesh->n_axes && fully_open(s)) return NULL;
  abi_view *v = calloc(1, sizeof *v);
  if (!v) hk_out_of_memory();
  abi_view_of(v, mesh, s, n_manual, manual);
  const hk_sharding *r = hk_sharding_from_mesh(m, &v->mesh, &v->s, st);
  free(v);
  return r;
}
