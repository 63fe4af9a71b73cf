/* coarsen.c - reshards that coarsen tiles: a data dim split fp ways becomes
 * split tp ways (tp divides fp), each new tile the union of k = fp / tp
 * consecutive old ones, by an all-gather within each group of k devices
 * that hold them (XLA's ReshardToPartialReplicateWithAllGather), not by
 * gathering the dim whole and slicing it again.  The k devices of a group
 * then hold the same tile: the factor k joins the replication.  Where
 * uneven tiles do not line up, a halo exchange first moves each old
 * shard's window to where its part of the new tile begins. */
#include "spmd_internal.h"

/* Whether dim d of global size n goes from fp to tp tiles by merging k =
 * fp / tp consecutive ones. */
static bool dim_coarsens(int64_t fp, int64_t tp) { return tp < fp && fp % tp == 0; }

/* Uneven dims: k old tiles of F hold more than one new tile of T, so the
 * merged tiles would not start where the new ones do.  Old shard i (in
 * new tile t = i / k) first takes the window starting t (kF - T) earlier
 * (XLA's TileToPartialReplicateHaloExchange): left halo that long, right
 * edge dropped as much; NULL when the halos reach too far. */
static hk_instr *realign(spmd_visitor *v, hk_instr *x, const hk_shape *gs, const hk_sharding *from,
                         int d, int64_t k) {
  int64_t fp = hk_sharding_dim_partitions(from, d), tp = fp / k, n = gs->dims[d];
  int64_t F = spmd_ceil_div(n, fp), T = spmd_ceil_div(n, tp);
  if (k * F == T) return x;
  int64_t *tab = malloc(sizeof(int64_t) * (size_t)(3 * fp));
  if (!tab) hk_out_of_memory();
  for (int64_t i = 0; i < fp; i++) {
    tab[i] = (i / k) * (k * F - T);
    tab[fp + i] = -tab[i];
    tab[2 * fp + i] = F * i;
  }
  spmd_halo h = {.ring = {fp, -1, 0}, .left = tab, .right = tab + fp, .explicit_left = 0,
                 .padded_full = F * fp, .base_dim = n, .shard_with_halo = F,
                 .offset_on_padded = tab + 2 * fp, .mask = false};
  x = spmd_exchange_halo_valid(v, x, from, d, &h, spmd_constant_scalar(v, (hk_prim)gs->elem, 0));
  free(tab);
  return x;
}

/* Devices of s (tiled, no subgroups) with data dim d's tiles merged k at
 * a time, the factor k appended to the replication dim. */
static const hk_sharding *coarsen_dim(spmd_visitor *v, const hk_sharding *s, int rank, int d,
                                      int64_t k) {
  int nt = s->n_tile_dims;
  int64_t rf = hk_sharding_replication_factor(s), total = hk_sharding_num_tiles(s) * rf;
  int64_t dims[HK_MAX_RANK + 1];
  for (int i = 0; i < rank; i++) dims[i] = s->tile_dims[i];
  dims[d] /= k;
  dims[rank] = rf * k;
  int64_t *devs = malloc(sizeof(int64_t) * (size_t)total);
  if (!devs) hk_out_of_memory();
  /* Source index (f_0..f_{r-1}, jr): new index f_d / k on dim d, and
   * replica (f_d % k) * rf + jr. */
  int64_t idx[HK_MAX_RANK + 1] = {0};
  for (int64_t src = 0; src < total; src++) {
    int64_t lin = 0;
    for (int i = 0; i < rank; i++) lin = lin * dims[i] + (i == d ? idx[i] / k : idx[i]);
    int64_t jr = nt > rank ? idx[rank] : 0;
    lin = lin * dims[rank] + (idx[d] % k) * rf + jr;
    devs[lin] = s->devices[src];
    for (int i = nt - 1; i >= 0; i--) {
      if (++idx[i] < s->tile_dims[i]) break;
      idx[i] = 0;
    }
  }
  const hk_sharding *r = hk_sharding_tiled(v->m, rank + 1, dims, devs, true);
  free(devs);
  return hk_sharding_canonical(v->m, r);
}

/* The groups of k devices of s whose tiles along d merge, each ordered by
 * its tile index along d ({n_groups * k} device ids). */
static int64_t *merge_groups(const hk_sharding *s, int rank, int d, int64_t k, int64_t *n_groups) {
  int nt = s->n_tile_dims;
  int64_t total = hk_sharding_num_tiles(s) * hk_sharding_replication_factor(s);
  int64_t *g = malloc(sizeof(int64_t) * (size_t)total);
  if (!g) hk_out_of_memory();
  int64_t idx[HK_MAX_RANK + 1] = {0};
  for (int64_t src = 0; src < total; src++) {
    int64_t key = 0;   /* every source coordinate but f_d % k */
    for (int i = 0; i < nt; i++) {
      int64_t extent = i == d ? s->tile_dims[i] / k : s->tile_dims[i];
      key = key * extent + (i == d ? idx[i] / k : idx[i]);
    }
    g[key * k + idx[d] % k] = s->devices[src];
    for (int i = nt - 1; i >= 0; i--) {
      if (++idx[i] < s->tile_dims[i]) break;
      idx[i] = 0;
    }
  }
  *n_groups = total / k;
  (void)rank;
  return g;
}

bool spmd_coarsen_plan(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                       const hk_sharding *to, spmd_coarsening *c) {
  c->n = 0;
  if (!from || !to || from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED ||
      from->n_subgroups || to->n_subgroups)
    return false;
  bool finer_kept = false;   /* some merged dim stays split: else a plain gather */
  const hk_sharding *cur = from;
  c->steps[0] = from;
  for (int d = 0; d < gs->rank; d++) {
    int64_t fp = hk_sharding_dim_partitions(from, d), tp = hk_sharding_dim_partitions(to, d);
    if (tp > fp) return false;
    if (tp == fp) continue;
    if (!dim_coarsens(fp, tp)) return false;
    if (cur->kind != HK_SHARDING_TILED) return false;
    c->dims[c->n] = d;
    c->k[c->n] = fp / tp;
    finer_kept = finer_kept || tp > 1;
    cur = c->steps[++c->n] = coarsen_dim(v, cur, gs->rank, d, fp / tp);
  }
  c->inter = cur;
  return finer_kept;
}

int64_t spmd_coarsen_cost(spmd_visitor *v, const hk_shape *gs, const spmd_coarsening *c) {
  int64_t cost = 0;
  for (int i = 0; i < c->n; i++) {
    int64_t n = gs->dims[c->dims[i]], fp = hk_sharding_dim_partitions(c->steps[0], c->dims[i]);
    int64_t local = hk_shape_byte_size(spmd_local_shape(v, c->steps[i], gs));
    if (c->k[i] * spmd_ceil_div(n, fp) != spmd_ceil_div(n, fp / c->k[i]))   /* realigned first */
      cost += spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local, 2);
    cost += spmd_plan_cost(v->p, HK_COLL_ALL_GATHER, local, c->k[i]);
  }
  return cost;
}

hk_instr *spmd_coarsen(spmd_visitor *v, hk_instr *h, const hk_shape *gs, const spmd_coarsening *c) {
  const hk_sharding *from = c->steps[0];
  for (int i = 0; i < c->n && h; i++) h = realign(v, h, gs, from, c->dims[i], c->k[i]);
  if (!h) return NULL;
  const hk_spmd_collective_ops *co = &v->p->collectives;
  for (int i = 0; i < c->n; i++) {
    int d = c->dims[i];
    int64_t k = c->k[i], n_groups, dims[HK_MAX_RANK];
    int64_t *groups = merge_groups(c->steps[i], gs->rank, d, k, &n_groups);
    for (int j = 0; j < h->shape->rank; j++) dims[j] = h->shape->dims[j];
    dims[d] *= k;
    const hk_shape *rs = hk_shape_with_dims(v->m, h->shape, h->shape->rank, dims);
    h = co->all_gather(co->state, v->comp, h, rs, d, n_groups, k, groups, &v->p->next_channel_id);
    v->p->collectives_emitted++;
    free(groups);
    /* Realigned uneven dims hold k F >= T positions: the new tile's T. */
    int64_t T = spmd_ceil_div(gs->dims[d], hk_sharding_dim_partitions(c->steps[i + 1], d));
    if (h->shape->dims[d] != T) h = spmd_slice_dim(v, h, d, 0, T);
  }
  return h;
}
