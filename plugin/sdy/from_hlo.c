/* from_hlo.c - an HloSharding written back as a Shardy sharding over a
 * mesh, for the export: the assignment of the mesh's whole axes to the
 * value's dims (each dim taking its axes in mesh order) or to replication
 * whose HloSharding (to_hlo.c) is the same sharding.  Sub-axes and
 * out-of-mesh-order axis lists come back only through the texts the import
 * kept. */
#include <string.h>

#include "sdy.h"

static void build(const sdy_mesh *mesh, const char *mesh_name, const int *where, int rank,
                  sdy_sharding *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->mesh_name, sizeof s->mesh_name, "%s", mesh_name);
  s->rank = rank;
  for (int d = 0; d < rank; d++) s->dims[d].priority = -1;
  for (int a = 0; a < mesh->n_axes; a++) {
    if (where[a] >= rank) continue;   /* replicated (implicitly) */
    sdy_axis_ref *r = &s->dims[where[a]].axes[s->dims[where[a]].n_axes++];
    snprintf(r->name, sizeof r->name, "%s", mesh->axes[a].name);
    r->size = mesh->axes[a].size;
  }
}

/* s over mesh, NULL when it is none (open, or its axes form no sharding). */
static const hk_sharding *to_hlo(hk_module *m, const sdy_mesh *mesh, const sdy_sharding *s) {
  hk_status *st;
  const hk_sharding *r = sdy_to_hlo(m, mesh, s, 0, NULL, &st);
  hk_status_free(st);
  return r;
}

bool sdy_from_hlo(hk_module *m, const sdy_mesh *mesh, const char *mesh_name,
                  const hk_sharding *h, int rank, sdy_sharding *out) {
  int where[SDY_MAX_AXES] = {0};
  int64_t tries = 0;
  if (mesh->n_axes == 0) {          /* a maximal mesh: every dim closed and empty */
    build(mesh, mesh_name, where, rank, out);
    const hk_sharding *got = to_hlo(m, mesh, out);
    return hk_sharding_equivalent(got, hk_sharding_without_shard_group(m, h));
  }
  for (;;) {
    build(mesh, mesh_name, where, rank, out);
    const hk_sharding *got = to_hlo(m, mesh, out);
    if (got && hk_sharding_equivalent(got, hk_sharding_without_shard_group(m, h))) return true;
    int a = 0;                     /* next assignment, odometer style */
    while (a < mesh->n_axes && ++where[a] > rank) where[a++] = 0;
    if (a == mesh->n_axes || ++tries > 1000000) return false;
  }
}
