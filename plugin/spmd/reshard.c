/* reshard.c - the reshard engine (PartitionedHlo::Reshard): moves a
 * partitioned value from one sharding to another with collectives
 * (all-gather per partitioned dim, local dynamic-slice by the partition's
 * offset, all-reduce of a masked value for single-device shardings), plus
 * the small builders the handlers share. */
#include "spmd_internal.h"

hk_instr *spmd_partition_id(spmd_visitor *v) {
  if (!v->partition_id) {
    const hk_spmd_collective_ops *ops = &v->p->collectives;
    v->partition_id = ops->partition_id(ops->state, v->comp);
  }
  return v->partition_id;
}

hk_instr *spmd_gte(hk_computation *c, hk_instr *tuple, int64_t k) {
  hk_instr *g = hk_instr_new(c, HK_OP_GET_TUPLE_ELEMENT, tuple->shape->tuple[k], 1, &tuple, NULL);
  hk_instr_attrs(g)->tuple_index = k;
  return g;
}

hk_instr *spmd_constant_scalar(spmd_visitor *v, hk_prim elem, double value) {
  return hk_build_constant_f64(v->comp, NULL, elem, value);
}

static hk_instr *broadcast_scalar(spmd_visitor *v, hk_instr *scalar, const hk_shape *shape) {
  return hk_build_broadcast_scalar(v->comp, NULL, scalar, shape);
}

hk_instr *spmd_zeros(spmd_visitor *v, const hk_shape *shape) {
  return broadcast_scalar(v, spmd_constant_scalar(v, (hk_prim)shape->elem, 0), shape);
}

int spmd_only_tiled_dim(const hk_sharding *s, int rank) {
  int dim = -1;
  for (int d = 0; d < rank; d++)
    if (hk_sharding_dim_partitions(s, d) > 1) {
      if (dim >= 0) return -1;
      dim = d;
    }
  return dim;
}

bool spmd_is_subgroup_manual(const hk_sharding *s) {
  if (!s) return false;
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (spmd_is_subgroup_manual(s->elems[i])) return true;
    return false;
  }
  if (s->kind != HK_SHARDING_TILED) return false;
  for (int i = 0; i < s->n_subgroups; i++)
    if (s->subgroups[i] != HK_SUBGROUP_REPLICATED) return true;
  return false;
}

int64_t spmd_manual_factor(const hk_sharding *s) {
  int64_t f = 1;
  if (!s || s->kind != HK_SHARDING_TILED) return s && s->kind == HK_SHARDING_MANUAL ? -1 : 1;
  int first = s->n_tile_dims - s->n_subgroups;
  for (int i = 0; i < s->n_subgroups; i++)
    if (s->subgroups[i] == HK_SUBGROUP_MANUAL) f *= s->tile_dims[first + i];
  return f;
}

const hk_sharding *spmd_replicated_like(spmd_visitor *v, const hk_sharding *s,
                                        const hk_shape *shape) {
  if (s && s->kind == HK_SHARDING_TUPLE) {
    const hk_sharding **e = malloc(sizeof(hk_sharding *) * (size_t)(s->n_elems + 1));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < s->n_elems; i++) e[i] = spmd_replicated_like(v, s->elems[i], NULL);
    const hk_sharding *t = hk_sharding_tuple(v->m, s->n_elems, e);
    free(e);
    return t;
  }
  if (spmd_is_subgroup_manual(s)) return hk_sharding_replicate_all_except(v->m, s, 0, NULL);
  const hk_sharding *r = hk_sharding_replicated(v->m);
  return shape ? hk_sharding_for_shape(v->m, r, shape) : r;
}

int64_t *spmd_groups(spmd_visitor *v, const hk_sharding *s, int n, const int64_t *dims,
                     int64_t *n_groups, int64_t *group_size) {
  int64_t total = 1;
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  int64_t *out = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  if (!out) hk_out_of_memory();
  const int64_t *g = spmd_device_groups(v, s, n, dims);
  *group_size = g ? g[0] : -1;
  *n_groups = g ? total / g[0] : 0;
  if (g) memcpy(out, g + 1, sizeof(int64_t) * (size_t)total);
  return out;
}

/* All partitions as one group. */
static int64_t *all_partitions(spmd_visitor *v) {
  int64_t n = v->p->num_partitions;
  int64_t *g = malloc(sizeof(int64_t) * (size_t)n);
  if (!g) hk_out_of_memory();
  for (int64_t i = 0; i < n; i++) g[i] = i;
  return g;
}

/* A per-partition s32 scalar in c: values[this partition's tile index
 * along dim d of s] (0 on a partition outside the tile grid), read from a
 * constant table over partitions by partition id. */
hk_instr *spmd_per_tile_scalar_in(spmd_visitor *v, hk_computation *c, const hk_sharding *s,
                                  int64_t d, const int64_t *values) {
  int64_t n = v->p->num_partitions, idx[HK_MAX_RANK];
  const hk_shape *ts = hk_shape_array(v->m, HK_S32, 1, &n);
  hk_literal *l = hk_literal_new(v->m, ts);
  for (int64_t dev = 0; dev < n; dev++)
    hk_literal_set_i64(l, dev, hk_sharding_tile_index(s, dev, idx) ? values[idx[d]] : 0);
  hk_instr *table = hk_instr_new(c, HK_OP_CONSTANT, ts, 0, NULL, NULL);
  hk_instr_attrs(table)->literal = l;
  const hk_spmd_collective_ops *co = &v->p->collectives;
  hk_instr *pid = c == v->comp ? spmd_partition_id(v) : co->partition_id(co->state, c);
  hk_instr *ops[2] = {table, pid};
  int64_t one = 1;
  hk_instr *ds = hk_instr_new(c, HK_OP_DYNAMIC_SLICE, hk_shape_array(v->m, HK_S32, 1, &one), 2,
                              ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = 1;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, &one, sizeof one);
  return hk_instr_new(c, HK_OP_RESHAPE, hk_shape_scalar(v->m, HK_S32), 1, &ds, NULL);
}

hk_instr *spmd_per_tile_scalar(spmd_visitor *v, const hk_sharding *s, int64_t d,
                               const int64_t *values) {
  return spmd_per_tile_scalar_in(v, v->comp, s, d, values);
}

/* The offset of the partition's tile along data dim d of s (s32[]):
 * tile t begins at t * ceil(dim / parts). */
static hk_instr *make_tile_offset(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs,
                                  int d) {
  int64_t parts = hk_sharding_dim_partitions(s, d);
  int64_t per = (gs->dims[d] + parts - 1) / parts;
  int64_t *starts = malloc(sizeof *starts * (size_t)parts);
  if (!starts) hk_out_of_memory();
  for (int64_t t = 0; t < parts; t++) starts[t] = t * per;
  hk_instr *off = spmd_per_tile_scalar(v, s, d, starts);   /* the table copies them */
  free(starts);
  return off;
}

/* make_tile_offset, made once per computation for each (sharding, dim,
 * dim size): the table has one entry per partition, so making it for
 * every reshard would cost num_partitions per instruction. */
hk_instr *spmd_tile_offset(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d) {
  int32_t n = v->n_offsets, cap = (int32_t)(sizeof v->offsets / sizeof v->offsets[0]);
  for (int32_t k = 0; k < n; k++) {
    struct spmd_offset_entry *e = &v->offsets[n - 1 - k];   /* newest first */
    if (e->sharding == s && e->dim == d && e->dim_size == gs->dims[d]) return e->offset;
  }
  hk_instr *off = make_tile_offset(v, s, gs, d);
  if (n == cap) {   /* the oldest goes */
    memmove(v->offsets, v->offsets + 1, sizeof v->offsets[0] * (size_t)(cap - 1));
    n--;
  }
  v->offsets[n] = (struct spmd_offset_entry){s, d, gs->dims[d], off};
  v->n_offsets = n + 1;
  return off;
}

/* Slices h down to `dims` (a prefix slice of every dim). */
static hk_instr *slice_to(spmd_visitor *v, hk_instr *h, const int64_t *dims) {
  const hk_shape *s = h->shape;
  bool same = true;
  for (int i = 0; i < s->rank; i++) same = same && s->dims[i] == dims[i];
  if (same) return h;
  hk_instr *sl = hk_instr_new(v->comp, HK_OP_SLICE, hk_shape_with_dims(v->m, s, s->rank, dims), 1,
                              &h, NULL);
  hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)(s->rank ? s->rank : 1));
  for (int i = 0; i < s->rank; i++) sd[i] = (hk_slice_dim){0, dims[i], 1};
  hk_attrs *a = hk_instr_attrs(sl);
  a->n_slice = s->rank;
  a->slice = sd;
  return sl;
}

/* Pads h with zeros at the high end up to `dims`. */
hk_instr *spmd_pad_to(spmd_visitor *v, hk_instr *h, const int64_t *dims) {
  const hk_shape *s = h->shape;
  bool same = true;
  for (int i = 0; i < s->rank; i++) same = same && s->dims[i] == dims[i];
  if (same) return h;
  hk_instr *ops[2] = {h, spmd_constant_scalar(v, (hk_prim)s->elem, 0)};
  hk_instr *p = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, s, s->rank, dims), 2,
                             ops, NULL);
  hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)(s->rank ? s->rank : 1));
  for (int i = 0; i < s->rank; i++) pd[i] = (hk_pad_dim){0, dims[i] - s->dims[i], 0};
  hk_attrs *a = hk_instr_attrs(p);
  a->n_pad = s->rank;
  a->pad = pd;
  return p;
}

/* See spmd_internal.h. */
hk_instr *spmd_mask_padding(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d,
                            hk_instr *x, hk_instr *fill) {
  const hk_shape *ls = x->shape;
  const hk_shape *is = hk_shape_with_elem(v->m, ls, HK_S32);
  int64_t dim = d;
  hk_instr *iota = hk_instr_new(v->comp, HK_OP_IOTA, is, 0, NULL, NULL);
  hk_instr_set_dims(iota, 1, &dim);
  hk_instr *ops[3] = {iota, hk_build_broadcast_scalar(v->comp, NULL,
                                                      spmd_tile_offset(v, s, gs, d), is)};
  hk_instr *index = hk_instr_new(v->comp, HK_OP_ADD, is, 2, ops, NULL);
  ops[0] = index;
  ops[1] = hk_build_broadcast_scalar(
      v->comp, NULL, hk_build_constant_i64(v->comp, NULL, HK_S32, gs->dims[d]), is);
  hk_instr *inside = hk_instr_new(v->comp, HK_OP_COMPARE, hk_shape_with_elem(v->m, ls, HK_PRED),
                                  2, ops, NULL);
  hk_instr_attrs(inside)->cmp_dir = HK_CMP_LT;
  ops[0] = inside;
  ops[1] = x;
  ops[2] = hk_build_broadcast_scalar(v->comp, NULL, fill, ls);
  return hk_instr_new(v->comp, HK_OP_SELECT, ls, 3, ops, NULL);
}

/* The all-gather that made h whole: h itself or under the slices that cut
 * an uneven dim's padding off. */
static const hk_instr *gathering_instr(const hk_instr *h) {
  while (h->opcode == HK_OP_SLICE && h->n_operands == 1) h = h->operands[0];
  return h;
}

void spmd_note_full_remat(spmd_visitor *v, const hk_instr *value, const hk_instr *whole,
                          const hk_shape *gs, const hk_sharding *from, const hk_sharding *to) {
  char *a = from ? hk_sharding_to_string(from) : NULL, *b = to ? hk_sharding_to_string(to) : NULL;
  const hk_instr *ag = gathering_instr(whole);
  hk_buf_printf(&v->p->remat_notes,
                "  involuntary full rematerialization: %s made whole by %s %%%s (%lld bytes per "
                "device) going from %s to %s\n",
                value->name, hk_opcode_name(ag->opcode), ag->name, (long long)hk_shape_byte_size(gs),
                a ? a : "{replicated}", b ? b : "{replicated}");
  free(a);
  free(b);
  v->p->full_rematerializations++;
}

hk_instr *spmd_zero_padding(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs, int d,
                            hk_instr *x) {
  if (gs->dims[d] % hk_sharding_dim_partitions(s, d) == 0) return x;
  return spmd_mask_padding(v, s, gs, d, x, spmd_constant_scalar(v, (hk_prim)x->shape->elem, 0));
}

/* maximal(k) -> replicated: all-reduce of the value masked to device k. */
static hk_instr *maximal_to_replicated(spmd_visitor *v, hk_instr *h, int64_t device) {
  hk_module *m = v->m;
  hk_instr *pid = spmd_partition_id(v);
  hk_instr *k = spmd_constant_scalar(v, HK_U32, (double)device);
  hk_instr *ops[3] = {pid, k, NULL};
  hk_instr *eq = hk_instr_new(v->comp, HK_OP_COMPARE, hk_shape_scalar(m, HK_PRED), 2, ops, NULL);
  hk_instr_attrs(eq)->cmp_dir = HK_CMP_EQ;
  ops[0] = broadcast_scalar(v, eq, h->shape);
  ops[1] = h;
  ops[2] = spmd_zeros(v, h->shape);
  hk_instr *sel = hk_instr_new(v->comp, HK_OP_SELECT, h->shape, 3, ops, NULL);
  hk_prim e = (hk_prim)h->shape->elem;
  hk_computation *red = spmd_reducer(m, e, e == HK_PRED ? HK_OP_OR : HK_OP_ADD);
  int64_t *g = all_partitions(v);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  hk_instr *ar = c->all_reduce(c->state, v->comp, sel, red, 1, v->p->num_partitions, g,
                               &v->p->next_channel_id);
  free(g);
  v->p->collectives_emitted++;
  return ar;
}

/* All-gathers data dim d of a value sharded by s; returns the value with
 * dim d whole (padding sliced off) and *s_out the remaining sharding. */
static hk_instr *gather_dim(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *s, int d, const hk_sharding **s_out) {
  int64_t parts = hk_sharding_dim_partitions(s, d), n_groups, gsize, dd = d;
  int64_t *groups = spmd_groups(v, s, 1, &dd, &n_groups, &gsize);
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < h->shape->rank; i++) dims[i] = h->shape->dims[i];
  dims[d] *= parts;
  const hk_shape *rs = hk_shape_with_dims(v->m, h->shape, h->shape->rank, dims);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  hk_instr *ag = c->all_gather(c->state, v->comp, h, rs, d, n_groups, gsize, groups,
                               &v->p->next_channel_id);
  free(groups);
  v->p->collectives_emitted++;
  dims[d] = gs->dims[d];
  *s_out = spmd_replicate_dims(v, s, 1, &dd);
  return slice_to(v, ag, dims);
}

/* s32[] 0, made once per computation. */
static hk_instr *zero_index(spmd_visitor *v) {
  if (!v->zero_index) v->zero_index = spmd_constant_scalar(v, HK_S32, 0);
  return v->zero_index;
}

/* Local dynamic-slice of the dims in `dims` (whole in h) to the tiles of to. */
static hk_instr *slice_dims(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *to, int n, const int *dims) {
  int r = h->shape->rank;
  int64_t padded[HK_MAX_RANK], sizes[HK_MAX_RANK];
  const hk_shape *ls = spmd_local_shape(v, to, gs);
  for (int i = 0; i < r; i++) {
    padded[i] = h->shape->dims[i];
    sizes[i] = h->shape->dims[i];
  }
  for (int k = 0; k < n; k++) {
    int d = dims[k];
    int64_t parts = hk_sharding_dim_partitions(to, d);
    padded[d] = parts * ls->dims[d];
    sizes[d] = ls->dims[d];
  }
  hk_instr *p = spmd_pad_to(v, h, padded);
  hk_instr **ops = malloc(sizeof(hk_instr *) * (size_t)(r + 1));
  if (!ops) hk_out_of_memory();
  ops[0] = p;
  for (int i = 0; i < r; i++) {
    bool sliced = false;
    for (int k = 0; k < n; k++) sliced = sliced || dims[k] == i;
    if (sliced) ops[i + 1] = spmd_tile_offset(v, to, gs, i);
    else ops[i + 1] = zero_index(v);
  }
  hk_instr *ds = hk_instr_new(v->comp, HK_OP_DYNAMIC_SLICE,
                              hk_shape_with_dims(v->m, h->shape, r, sizes), r + 1, ops, NULL);
  free(ops);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = r;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, sizes, sizeof(int64_t) * (size_t)(r ? r : 1));
  return ds;
}

/* Same partition count on every data dim (device order may differ). */
static bool same_partition_counts(const hk_sharding *a, const hk_sharding *b, int rank) {
  for (int d = 0; d < rank; d++)
    if (hk_sharding_dim_partitions(a, d) != hk_sharding_dim_partitions(b, d)) return false;
  return hk_sharding_replication_factor(a) == hk_sharding_replication_factor(b);
}

/* Linear index of a tile (index idx over the data dims of s). */
static int64_t tile_linear(const hk_sharding *s, int rank, const int64_t *idx) {
  int64_t lin = 0;
  for (int k = 0; k < rank; k++) lin = lin * hk_sharding_dim_partitions(s, k) + idx[k];
  return lin;
}

/* The devices holding each tile of s, bucketed by tile (counting sort,
 * devices ascending within a tile): holders[start[t] .. start[t+1]). */
static void tile_holders(const hk_sharding *s, int rank, int64_t n, int64_t n_tiles,
                         int64_t *start, int64_t *holders) {
  int64_t idx[HK_MAX_RANK];
  for (int64_t t = 0; t <= n_tiles; t++) start[t] = 0;
  for (int64_t dev = 0; dev < n; dev++)
    if (hk_sharding_tile_index(s, dev, idx)) start[tile_linear(s, rank, idx) + 1]++;
  for (int64_t t = 0; t < n_tiles; t++) start[t + 1] += start[t];
  int64_t *fill = malloc(sizeof(int64_t) * (size_t)(n_tiles + 1));
  if (!fill) hk_out_of_memory();
  memcpy(fill, start, sizeof(int64_t) * (size_t)(n_tiles + 1));
  for (int64_t dev = 0; dev < n; dev++)
    if (hk_sharding_tile_index(s, dev, idx)) holders[fill[tile_linear(s, rank, idx)]++] = dev;
  free(fill);
}

/* The source for device d among the unused holders of its tile: d itself
 * if it holds the tile, else the lowest-numbered holder; -1 if none. */
static int64_t pick_source(const int64_t *holders, int64_t lo, int64_t hi, const bool *used,
                           int64_t d) {
  int64_t src = -1;
  for (int64_t k = lo; k < hi; k++) {
    int64_t s = holders[k];
    if (used[s]) continue;
    if (s == d) return d;
    if (src < 0) src = s;
  }
  return src;
}

/* A device-order change: every device receives the tile it needs from one
 * holder (collective-permute); false when that is not a permutation.  The
 * holders are bucketed by tile first, so this costs the device count times
 * the replication, not the device count squared. */
static bool try_permute(spmd_visitor *v, hk_instr *h, const hk_shape *gs, const hk_sharding *from,
                        const hk_sharding *to, hk_instr **out) {
  int64_t n = v->p->num_partitions, r = gs->rank, n_tiles = hk_sharding_num_tiles(from);
  if (!same_partition_counts(from, to, (int)r) || n_tiles < 1) return false;
  hk_pair *pairs = malloc(sizeof(hk_pair) * (size_t)n);
  bool *used = calloc((size_t)n, 1);
  int64_t *start = malloc(sizeof(int64_t) * (size_t)(n_tiles + 1));
  int64_t *holders = malloc(sizeof(int64_t) * (size_t)n);
  if (!pairs || !used || !start || !holders) hk_out_of_memory();
  tile_holders(from, (int)r, n, n_tiles, start, holders);
  int64_t np = 0;
  bool ok = true;
  for (int64_t d = 0; d < n && ok; d++) {
    int64_t want[HK_MAX_RANK];
    if (!hk_sharding_tile_index(to, d, want)) continue;
    int64_t t = tile_linear(to, (int)r, want);
    int64_t src = t < n_tiles ? pick_source(holders, start[t], start[t + 1], used, d) : -1;
    if (src < 0) ok = false;
    else {
      used[src] = true;
      pairs[np++] = (hk_pair){src, d};
    }
  }
  if (ok) {
    const hk_spmd_collective_ops *c = &v->p->collectives;
    *out = c->collective_permute(c->state, v->comp, h, np, pairs, &v->p->next_channel_id);
    v->p->collectives_emitted++;
  }
  free(pairs);
  free(used);
  free(start);
  free(holders);
  return ok;
}

/* ---- all-to-all: partitions moving between dims ---------------------------- */

typedef struct factor_move {
  int a, b;                        /* k partitions leave dim a for dim b */
  int64_t k;
} factor_move;

static int64_t gcd64(int64_t x, int64_t y) {
  while (y) {
    int64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}

/* Whether moving k of dim a's fa partitions to dim b (fb of them) keeps
 * every tile where the target tiling puts it: the pieces of b's tiles must
 * be the target's tiles (or b was whole, padded to k pieces), and the
 * concatenated a tiles the target's (or a becomes whole, cut back). */
static bool move_aligned(const hk_shape *gs, int a, int64_t fa, int b, int64_t fb, int64_t k) {
  int64_t la = (gs->dims[a] + fa - 1) / fa, ta = fa / k;
  int64_t lb = (gs->dims[b] + fb - 1) / fb, tb = (gs->dims[b] + fb * k - 1) / (fb * k);
  if (fb > 1 && lb != tb * k) return false;
  return ta == 1 || la * k == (gs->dims[a] + ta - 1) / ta;
}

/* The moves taking the partition counts cur (updated) to to's, each
 * checked aligned; -1 when the counts cannot be reached so. */
static int plan_moves(const hk_shape *gs, int64_t *cur, const hk_sharding *to, factor_move *moves,
                      int cap) {
  int r = gs->rank, n = 0;
  for (;;) {
    int a = -1, b = -1;
    for (int d = 0; d < r; d++) {
      int64_t t = hk_sharding_dim_partitions(to, d);
      if (a < 0 && cur[d] > t) a = d;
      if (b < 0 && cur[d] < t) b = d;
    }
    if (a < 0 && b < 0) return n;
    if (a < 0 || b < 0 || n == cap) return -1;
    int64_t ta = hk_sharding_dim_partitions(to, a), tb = hk_sharding_dim_partitions(to, b);
    if (cur[a] % ta || tb % cur[b]) return -1;
    int64_t k = gcd64(cur[a] / ta, tb / cur[b]);
    if (k < 2 || !move_aligned(gs, a, cur[a], b, cur[b], k)) return -1;
    moves[n++] = (factor_move){a, b, k};
    cur[a] /= k;
    cur[b] *= k;
  }
}

/* The sharding after one move: the minor factor k of dim a's tile index
 * becomes the minor factor of dim b's (the devices keep their data along
 * every other dim). */
static const hk_sharding *after_move(spmd_visitor *v, const hk_sharding *s, factor_move mv) {
  int nt = s->n_tile_dims;
  int64_t dims[HK_MAX_RANK] = {0}, total = 1, c[HK_MAX_RANK];
  for (int i = 0; i < nt; i++) total *= dims[i] = s->tile_dims[i];
  dims[mv.a] /= mv.k;
  dims[mv.b] *= mv.k;
  int64_t *devs = malloc(sizeof *devs * (size_t)total);
  if (!devs) hk_out_of_memory();
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t x = lin;
    for (int i = nt - 1; i >= 0; i--) {
      c[i] = x % s->tile_dims[i];
      x /= s->tile_dims[i];
    }
    int64_t lo = c[mv.a] % mv.k;
    c[mv.a] /= mv.k;
    c[mv.b] = c[mv.b] * mv.k + lo;
    int64_t to = 0;
    for (int i = 0; i < nt; i++) to = to * dims[i] + c[i];
    devs[to] = s->devices[lin];
  }
  bool repl = s->replicate_on_last_tile_dim;
  if (repl && dims[nt - 1] == 1) {   /* the replication is all used */
    nt--;
    repl = false;
  }
  const hk_sharding *t = hk_sharding_tiled(v->m, nt, dims, devs, repl);
  free(devs);
  return hk_sharding_canonical(v->m, t);
}

/* The slices taking replication (a factor of from's) into dims `to`
 * splits and cur (the counts, updated) has whole, major dims first or
 * minor first: moves whose dim a is the replication dim; -1 when the
 * replication to shed cannot go so. */
static int plan_replica_slices(const hk_shape *gs, int64_t *cur, int64_t repl, int repl_dim,
                               const hk_sharding *to, bool minor_first, factor_move *moves,
                               int cap) {
  int64_t want = hk_sharding_replication_factor(to);
  int n = 0;
  if (repl < want || repl % want) return -1;
  for (int i = 0; i < gs->rank && repl > want; i++) {
    int d = minor_first ? gs->rank - 1 - i : i;
    int64_t t = hk_sharding_dim_partitions(to, d);
    if (cur[d] != 1 || t == 1) continue;
    int64_t k = gcd64(repl / want, t);
    if (k < 2 || n == cap) continue;
    moves[n++] = (factor_move){repl_dim, d, k};
    cur[d] = k;
    repl /= k;
  }
  return repl == want ? n : -1;
}

/* The all-to-all groups of a move: devices of s differing only in the
 * minor factor k of dim a's tile index, ordered by it (malloc'ed). */
static int64_t *move_groups(const hk_sharding *s, factor_move mv, int64_t *n_groups) {
  int nt = s->n_tile_dims;
  int64_t total = 1, stride = 1;
  for (int i = 0; i < nt; i++) total *= s->tile_dims[i];
  for (int i = mv.a + 1; i < nt; i++) stride *= s->tile_dims[i];
  int64_t *g = malloc(sizeof *g * (size_t)total), n = 0;
  if (!g) hk_out_of_memory();
  for (int64_t lin = 0; lin < total; lin++)
    if (lin / stride % s->tile_dims[mv.a] % mv.k == 0)
      for (int64_t j = 0; j < mv.k; j++) g[n++] = s->devices[lin + j * stride];
  *n_groups = total / mv.k;
  return g;
}

/* One move: dim b split into k pieces sent to the group's members, the
 * pieces received concatenated along a.  Uneven dims: b padded to k
 * pieces when it was whole, a cut back to its size when it becomes whole. */
static hk_instr *emit_move(spmd_visitor *v, hk_instr *h, const hk_shape *gs, const hk_sharding *s,
                           factor_move mv) {
  int r = gs->rank;
  int64_t dims[HK_MAX_RANK], n_groups;
  memcpy(dims, h->shape->dims, sizeof(int64_t) * (size_t)r);
  dims[mv.b] = (dims[mv.b] + mv.k - 1) / mv.k * mv.k;
  if (dims[mv.b] != h->shape->dims[mv.b]) h = spmd_pad_to(v, h, dims);
  int64_t *groups = move_groups(s, mv, &n_groups);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  hk_instr *moved = c->all_to_all(c->state, v->comp, h, mv.b, mv.a, n_groups, mv.k, groups,
                                  &v->p->next_channel_id);
  free(groups);
  v->p->collectives_emitted++;
  if (hk_sharding_dim_partitions(s, mv.a) / mv.k > 1 || moved->shape->dims[mv.a] == gs->dims[mv.a])
    return moved;
  memcpy(dims, moved->shape->dims, sizeof(int64_t) * (size_t)r);
  dims[mv.a] = gs->dims[mv.a];
  return slice_to(v, moved, dims);
}

/* Partitions moved between dims (XLA's ReshardWithAllToAll, subgroups and
 * partial replication included): replication shed by free local slices
 * into dims `to` splits, one all-to-all per factor that moves (within the
 * groups it moves across), then one collective-permute when the devices
 * end up in another order than `to`'s. */
typedef struct a2a_plan {
  int ns, n;
  factor_move slices[HK_MAX_RANK], moves[2 * HK_MAX_RANK];
} a2a_plan;

/* False when the partition counts differ otherwise or a move would
 * misplace tiles. */
static bool plan_all_to_all(const hk_shape *gs, const hk_sharding *from, const hk_sharding *to,
                            bool minor_first, a2a_plan *pl) {
  if (from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED || from->n_subgroups ||
      to->n_subgroups)
    return false;
  int64_t counts[HK_MAX_RANK];
  for (int d = 0; d < gs->rank; d++) counts[d] = hk_sharding_dim_partitions(from, d);
  pl->ns = from->replicate_on_last_tile_dim
               ? plan_replica_slices(gs, counts, hk_sharding_replication_factor(from),
                                     from->n_tile_dims - 1, to, minor_first, pl->slices, HK_MAX_RANK)
               : hk_sharding_replication_factor(to) == 1 ? 0 : -1;
  pl->n = pl->ns < 0 ? -1
                     : plan_moves(gs, counts, to, pl->moves, (int)(sizeof pl->moves / sizeof pl->moves[0]));
  /* Slices alone: then a permute (the general path would permute the
   * bigger unsliced value). */
  return pl->n > 0 || (pl->n == 0 && pl->ns > 0);
}

static int64_t local_bytes(spmd_visitor *v, const hk_sharding *s, const hk_shape *gs) {
  return hk_shape_byte_size(spmd_local_shape(v, s, gs));
}

/* The plan's price by the cost hook: each all-to-all over the tile it
 * splits, and the permute when the devices end out of order. */
static int64_t all_to_all_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                               const hk_sharding *to, const a2a_plan *pl) {
  const hk_sharding *cur = from;
  int64_t cost = 0;
  for (int k = 0; k < pl->ns; k++) cur = after_move(v, cur, pl->slices[k]);
  for (int k = 0; k < pl->n; k++) {
    cost += spmd_plan_cost(v->p, HK_COLL_ALL_TO_ALL, local_bytes(v, cur, gs), pl->moves[k].k);
    cur = after_move(v, cur, pl->moves[k]);
  }
  if (!hk_sharding_equivalent(cur, to))
    cost += spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, cur, gs), 2);
  return cost;
}

/* The cheaper of the plans shedding replication into major or into minor
 * dims first (which dims the replicas slice decides whether the devices
 * end in `to`'s order or need a permute). */
static bool best_all_to_all(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                            const hk_sharding *to, a2a_plan *pl) {
  a2a_plan alt;
  bool ok = plan_all_to_all(gs, from, to, false, pl);
  if (!from->replicate_on_last_tile_dim || !plan_all_to_all(gs, from, to, true, &alt)) return ok;
  if (!ok || all_to_all_cost(v, gs, from, to, &alt) < all_to_all_cost(v, gs, from, to, pl)) *pl = alt;
  return true;
}

/* The price of reshard_array's general path: an all-gather of every dim
 * whose partition count changes (the slices after are free). */
static int64_t gather_path_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                                const hk_sharding *to) {
  const hk_sharding *cur = from;
  int64_t cost = 0;
  for (int64_t d = 0; d < gs->rank && cur->kind == HK_SHARDING_TILED; d++) {
    int64_t parts = hk_sharding_dim_partitions(cur, (int)d);
    bool keep = to->kind == HK_SHARDING_TILED && hk_sharding_dim_partitions(to, (int)d) == parts;
    if (parts == 1 || keep) continue;
    cost += spmd_plan_cost(v->p, HK_COLL_ALL_GATHER, local_bytes(v, cur, gs), parts);
    cur = spmd_replicate_dims(v, cur, 1, &d);
  }
  return cost;
}

static const hk_sharding *norm(spmd_visitor *v, const hk_sharding *s) {
  if (!s || s->kind == HK_SHARDING_UNKNOWN) return hk_sharding_replicated(v->m);
  if (s->kind == HK_SHARDING_TILED && !hk_sharding_is_tiled(s) && s->n_subgroups == 0)
    return hk_sharding_replicated(v->m);
  return s;
}

/* The general path of a reshard to a tiled `to`: gather the dims whose
 * partition count changes (gdims), slice the dims `to` splits that are
 * whole by then (sdims); `want` is `to` with those dims whole, which the
 * gathered value must match (else its tiles change owners). */
typedef struct general_plan {
  int64_t gdims[HK_MAX_RANK];
  int sdims[HK_MAX_RANK];
  int ng, ns;
  const hk_sharding *inter, *want;
} general_plan;

static void plan_general(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                         const hk_sharding *to, general_plan *g) {
  g->ng = g->ns = 0;
  if (from->kind == HK_SHARDING_TILED)
    for (int d = 0; d < gs->rank; d++)
      if (hk_sharding_dim_partitions(from, d) > 1 &&
          hk_sharding_dim_partitions(from, d) != hk_sharding_dim_partitions(to, d))
        g->gdims[g->ng++] = d;
  g->inter = g->ng ? spmd_replicate_dims(v, from, g->ng, g->gdims) : from;
  int64_t sd64[HK_MAX_RANK];
  for (int d = 0; d < gs->rank; d++)
    if (hk_sharding_dim_partitions(to, d) > 1 &&
        (g->inter->kind != HK_SHARDING_TILED || hk_sharding_dim_partitions(g->inter, d) == 1)) {
      g->sdims[g->ns] = d;
      sd64[g->ns++] = d;
    }
  g->want = g->ns ? spmd_replicate_dims(v, to, g->ns, sd64) : to;
}

/* The sharding `pre` with from's partition counts whose gathers along
 * g->gdims end in g->want's device order (NULL when none is made): the
 * device order then changes by a collective-permute of the small source
 * tiles, before the gathers, instead of the gathered ones after.  Each
 * device keeps its own tile where its group of want allows it. */
static const hk_sharding *permute_first_target(spmd_visitor *v, const hk_shape *gs,
                                               const hk_sharding *from, const general_plan *g) {
  const hk_sharding *want = norm(v, g->want);
  if (!g->ng || from->kind != HK_SHARDING_TILED || want->kind != HK_SHARDING_TILED ||
      from->n_subgroups || want->n_subgroups || hk_sharding_equivalent(want, norm(v, g->inter)))
    return NULL;
  int r = gs->rank, nt = from->n_tile_dims;
  int64_t n = v->p->num_partitions, combos = 1, rf = hk_sharding_replication_factor(from);
  bool gdim[HK_MAX_RANK] = {false};
  for (int k = 0; k < g->ng; k++) {
    gdim[g->gdims[k]] = true;
    combos *= hk_sharding_dim_partitions(from, (int)g->gdims[k]);
  }
  int64_t n_tiles = hk_sharding_num_tiles(want), total = n_tiles * combos;
  if (n_tiles * combos * rf != n) return NULL;
  int64_t *fill = calloc((size_t)total, sizeof(int64_t)), *devs = malloc(sizeof(int64_t) * (size_t)n);
  int64_t *combo = malloc(sizeof(int64_t) * (size_t)n), *tile = malloc(sizeof(int64_t) * (size_t)n);
  if (!fill || !devs || !combo || !tile) hk_out_of_memory();
  bool ok = true;
  /* Pass 0: devices whose own tile fits their want group keep it; pass 1:
   * the others take the first gathered-dim coordinates left there. */
  for (int64_t dev = 0; dev < n; dev++) combo[dev] = -1;
  for (int pass = 0; pass < 2 && ok; pass++)
    for (int64_t dev = 0; dev < n && ok; dev++) {
      int64_t wi[HK_MAX_RANK], fi[HK_MAX_RANK];
      if (combo[dev] >= 0) continue;
      ok = hk_sharding_tile_index(want, dev, wi) && hk_sharding_tile_index(from, dev, fi);
      if (!ok) break;
      int64_t t = tile_linear(want, r, wi), c = 0;
      bool fits = true;
      for (int d = 0; d < r; d++) {
        if (gdim[d]) c = c * hk_sharding_dim_partitions(from, d) + fi[d];
        else fits = fits && fi[d] == wi[d];
      }
      if (pass == 1)
        for (c = 0; c < combos && fill[t * combos + c] >= rf; c++) {}
      if ((pass == 0 && (!fits || fill[t * combos + c] >= rf)) || c == combos) continue;
      combo[dev] = c;
      tile[dev] = t;
      fill[t * combos + c]++;
    }
  /* The tile array: from's dims, devices placed by (want tile, coordinates). */
  for (int64_t i = 0; i < total; i++) fill[i] = 0;
  for (int64_t dev = 0; dev < n && ok; dev++) {
    int64_t wi[HK_MAX_RANK], idx[HK_MAX_RANK + 1], c = combo[dev], lin = 0;
    ok = c >= 0 && hk_sharding_tile_index(want, dev, wi);
    for (int d = r - 1; ok && d >= 0; d--) {
      int64_t f = hk_sharding_dim_partitions(from, d);
      idx[d] = gdim[d] ? c % f : wi[d];
      if (gdim[d]) c /= f;
    }
    for (int d = 0; ok && d < r; d++) lin = lin * hk_sharding_dim_partitions(from, d) + idx[d];
    if (ok) devs[lin * rf + fill[tile[dev] * combos + combo[dev]]++] = dev;
  }
  const hk_sharding *pre = NULL;
  if (ok) pre = hk_sharding_canonical(v->m, hk_sharding_tiled(v->m, nt, from->tile_dims, devs,
                                                              from->replicate_on_last_tile_dim));
  free(fill);
  free(devs);
  free(combo);
  free(tile);
  if (pre && !hk_sharding_equivalent(norm(v, spmd_replicate_dims(v, pre, g->ng, g->gdims)), want))
    pre = NULL;
  return pre;
}

/* The general path's price: its gathers, and a permute when the gathered
 * tiles have other owners than `to` gives them. */
static int64_t general_path_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                                 const hk_sharding *to) {
  int64_t c = gather_path_cost(v, gs, from, to);
  if (to->kind != HK_SHARDING_TILED) return c;
  general_plan g;
  plan_general(v, gs, from, to, &g);
  if (!hk_sharding_equivalent(norm(v, g.want), norm(v, g.inter))) {
    const hk_sharding *at = permute_first_target(v, gs, from, &g) ? from : g.inter;
    c += spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, at, gs), 2);
  }
  return c;
}

static void emit_all_to_all(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to, const a2a_plan *pl,
                            hk_instr **out, hk_status **err);

/* The all-to-all plan when it applies and costs no more than gathering;
 * *err set if the reshard after the moves fails. */
static bool try_all_to_all(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                           const hk_sharding *from, const hk_sharding *to, hk_instr **out,
                           hk_status **err) {
  a2a_plan pl;
  if (!best_all_to_all(v, gs, from, to, &pl) ||
      all_to_all_cost(v, gs, from, to, &pl) > general_path_cost(v, gs, from, to))
    return false;
  emit_all_to_all(v, h, gs, from, to, &pl, out, err);
  return true;
}

/* The plan pl (best_all_to_all's) built: its slices, its all-to-alls, and
 * a permute when the devices end out of `to`'s order. */
static void emit_all_to_all(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to, const a2a_plan *pl,
                            hk_instr **out, hk_status **err) {
  const hk_sharding *cur = from;
  for (int k = 0; k < pl->ns; k++) {   /* free: each replica keeps its piece */
    const hk_sharding *next = after_move(v, cur, pl->slices[k]);
    int b = pl->slices[k].b;
    h = slice_dims(v, h, gs, next, 1, &b);
    cur = next;
  }
  for (int k = 0; k < pl->n; k++) {
    h = emit_move(v, h, gs, cur, pl->moves[k]);
    cur = after_move(v, cur, pl->moves[k]);
  }
  /* The same counts and replication: a permutation always exists; should
   * it not, the general reshard finishes the job. */
  if (hk_sharding_equivalent(cur, to)) *out = h;
  else if (!try_permute(v, h, gs, cur, to, out)) *err = spmd_reshard_hlo(v, h, gs, cur, to, out);
}

/* ---- one factor moved, then gathers ------------------------------------------ */

/* When `to` replicates more than `from`, gathering every dim whose count
 * changes and slicing `to`'s tiles out makes the value (nearly) whole
 * first.  Moving a factor straight to a dim `to` splits more, by one
 * all-to-all, leaves less to gather (XLA's all-to-all next to the
 * all-gather of a reshard to partial replication, as in
 * ComplexReshardToPartialReplicate).  Each candidate move takes a factor k
 * of a dim with more partitions than `to` gives it to one with fewer, both
 * counts staying divisors/multiples of `to`'s, so a chain of them ends.
 * Returns the cheapest such plan's cost (*best its first move), or -1. */
static int64_t move_first_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                               const hk_sharding *to, factor_move *best) {
  if (from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED || from->n_subgroups ||
      to->n_subgroups)
    return -1;
  int64_t cost = -1;
  for (int a = 0; a < gs->rank; a++) {
    int64_t fa = hk_sharding_dim_partitions(from, a), ta = hk_sharding_dim_partitions(to, a);
    if (fa <= ta || fa % ta) continue;
    for (int b = 0; b < gs->rank; b++) {
      int64_t fb = hk_sharding_dim_partitions(from, b), tb = hk_sharding_dim_partitions(to, b);
      if (b == a || fb >= tb || tb % fb) continue;
      factor_move mv = {a, b, gcd64(fa / ta, tb / fb)};
      if (mv.k < 2 || !move_aligned(gs, a, fa, b, fb, mv.k)) continue;
      int64_t c = spmd_plan_cost(v->p, HK_COLL_ALL_TO_ALL, local_bytes(v, from, gs), mv.k) +
                  spmd_reshard_cost(v, gs, after_move(v, from, mv), to);
      if (cost < 0 || c < cost) {
        cost = c;
        *best = mv;
      }
    }
  }
  return cost;
}

/* The move-first plan when it is cheaper than gathering (see above). */
static bool try_move_first(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                           const hk_sharding *from, const hk_sharding *to, hk_instr **out,
                           hk_status **err) {
  factor_move mv;
  int64_t c = move_first_cost(v, gs, from, to, &mv);
  if (c < 0 || c >= general_path_cost(v, gs, from, to)) return false;
  h = emit_move(v, h, gs, from, mv);
  *err = spmd_reshard_hlo(v, h, gs, after_move(v, from, mv), to, out);
  return true;
}

/* ---- refinement by a local slice --------------------------------------------- */

/* Whether every device's tile under `to` lies inside its tile under
 * `from` (to splits each dim into a multiple of from's pieces, nested,
 * device by device): then a local dynamic-slice reshards, no collective
 * (XLA's grouped dynamic-slice from partial replication). */
static bool nests_in(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                     const hk_sharding *to) {
  if (from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED || from->n_subgroups ||
      to->n_subgroups)
    return false;
  for (int d = 0; d < gs->rank; d++)
    if (hk_sharding_dim_partitions(to, d) % hk_sharding_dim_partitions(from, d)) return false;
  int64_t fi[HK_MAX_RANK], ti[HK_MAX_RANK];
  for (int64_t dev = 0; dev < v->p->num_partitions; dev++) {
    bool hf = hk_sharding_tile_index(from, dev, fi), ht = hk_sharding_tile_index(to, dev, ti);
    if (hf != ht) return false;
    for (int d = 0; hf && d < gs->rank; d++)
      if (ti[d] / (hk_sharding_dim_partitions(to, d) / hk_sharding_dim_partitions(from, d)) != fi[d])
        return false;
  }
  return true;
}

/* Whether nested tiles also nest in size: each of from's shards exactly
 * the t / f tiles of `to` cut from it (uneven dims can make them longer). */
static bool nested_sizes_agree(const hk_shape *gs, const hk_sharding *from, const hk_sharding *to) {
  for (int d = 0; d < gs->rank; d++) {
    int64_t f = hk_sharding_dim_partitions(from, d), t = hk_sharding_dim_partitions(to, d);
    if (f > 1 && t > f && (gs->dims[d] + f - 1) / f != (t / f) * ((gs->dims[d] + t - 1) / t)) return false;
  }
  return true;
}

/* The local slice of a nested refinement: along each dim `to` splits
 * further, the offset of to's tile within from's. */
static hk_instr *slice_nested(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                              const hk_sharding *from, const hk_sharding *to) {
  int r = gs->rank;
  const hk_shape *ls = spmd_local_shape(v, to, gs);
  hk_instr *ops[1 + HK_MAX_RANK];
  int64_t padded[HK_MAX_RANK];
  for (int d = 0; d < r; d++) {
    int64_t f = hk_sharding_dim_partitions(from, d), t = hk_sharding_dim_partitions(to, d);
    padded[d] = t == f ? h->shape->dims[d] : (t / f) * ls->dims[d];
  }
  ops[0] = spmd_pad_to(v, h, padded);   /* a whole dim (f = 1) split unevenly */
  for (int d = 0; d < r; d++) {
    int64_t f = hk_sharding_dim_partitions(from, d), t = hk_sharding_dim_partitions(to, d);
    if (t == f) {
      ops[1 + d] = zero_index(v);
      continue;
    }
    int64_t *starts = malloc(sizeof *starts * (size_t)t);
    if (!starts) hk_out_of_memory();
    for (int64_t k = 0; k < t; k++) starts[k] = k % (t / f) * ls->dims[d];
    ops[1 + d] = spmd_per_tile_scalar(v, to, d, starts);
    free(starts);
  }
  hk_instr *ds = hk_instr_new(v->comp, HK_OP_DYNAMIC_SLICE, ls, r + 1, ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = r;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, ls->dims, sizeof(int64_t) * (size_t)(r ? r : 1));
  return ds;
}

/* ---- all-to-all, then a local slice ------------------------------------------ */

/* `to` with a factor f[d] of each data dim's partitions (the minor part of
 * its tile index) turned into replication: every device's tile under `to`
 * lies in its tile under the result, so a local slice goes on from it;
 * NULL when to's tile array is not data dims plus replication. */
static const hk_sharding *coarsened(spmd_visitor *v, const hk_sharding *to, int rank,
                                    const int64_t *f) {
  int nt = to->n_tile_dims;
  bool repl = to->replicate_on_last_tile_dim;
  if (to->kind != HK_SHARDING_TILED || to->n_subgroups || nt != rank + (repl ? 1 : 0)) return NULL;
  int64_t dims[HK_MAX_RANK + 1], total = 1, c[HK_MAX_RANK + 1];
  for (int i = 0; i < nt; i++) total *= to->tile_dims[i];
  dims[rank] = repl ? to->tile_dims[rank] : 1;
  for (int d = 0; d < rank; d++) {
    dims[d] = to->tile_dims[d] / f[d];
    dims[rank] *= f[d];
  }
  int64_t *devs = malloc(sizeof *devs * (size_t)total);
  if (!devs) hk_out_of_memory();
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t x = lin, at = 0, r = 0;
    for (int i = nt - 1; i >= 0; i--) {
      c[i] = x % to->tile_dims[i];
      x /= to->tile_dims[i];
    }
    for (int d = 0; d < rank; d++) {
      at = at * dims[d] + c[d] / f[d];
      r = r * f[d] + c[d] % f[d];
    }
    if (repl) r = r * to->tile_dims[rank] + c[rank];
    devs[at * dims[rank] + r] = to->devices[lin];
  }
  const hk_sharding *t = hk_sharding_tiled(v->m, rank + 1, dims, devs, true);
  free(devs);
  return hk_sharding_canonical(v->m, t);
}

/* The price of the local slice from `mid` to `to` (nested): free, or the
 * halos uneven sizes need first. */
static int64_t nested_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *mid,
                           const hk_sharding *to) {
  if (nested_sizes_agree(gs, mid, to)) return 0;
  return spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, mid, gs), 2);
}

typedef struct slice_after_plan {
  const hk_sharding *mid;          /* reached by all-to-all, `to` cut from it */
  a2a_plan pl;
  int64_t cost;                    /* -1: none */
} slice_after_plan;

/* Tries every split f of the replication `from` has and `to` has not
 * (f[d] dividing to's partitions of dim d) from dim d on. */
static void search_coarsened(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                             const hk_sharding *to, int64_t *f, int d, int64_t left,
                             slice_after_plan *best) {
  if (d == gs->rank) {
    const hk_sharding *mid = left == 1 ? coarsened(v, to, gs->rank, f) : NULL;
    a2a_plan pl;
    /* mid == from is no all-to-all: the nested path already had its turn. */
    if (!mid || hk_sharding_equivalent(mid, from) || !nests_in(v, gs, mid, to) ||
        !best_all_to_all(v, gs, from, mid, &pl))
      return;
    int64_t c = all_to_all_cost(v, gs, from, mid, &pl) + nested_cost(v, gs, mid, to);
    if (best->cost < 0 || c < best->cost) *best = (slice_after_plan){mid, pl, c};
    return;
  }
  int64_t t = hk_sharding_dim_partitions(to, d);
  for (int64_t k = 1; k <= t && k <= left; k++)
    if (t % k == 0 && left % k == 0) {
      f[d] = k;
      search_coarsened(v, gs, from, to, f, d + 1, left / k, best);
    }
  f[d] = 1;
}

/* When `from` replicates more than `to` and no all-to-all plan reaches
 * `to` itself: all-to-alls to `to` with some of its partitions replicated
 * instead, then a local slice of to's tile (XLA's
 * ReshardPartialReplicateWithAllToAll: [1,2,3] last_tile_dim_replicate to
 * [2,3] moves the 2 to dim 0 and slices dim 1 three ways). */
static slice_after_plan plan_slice_after(spmd_visitor *v, const hk_shape *gs,
                                         const hk_sharding *from, const hk_sharding *to) {
  slice_after_plan best = {.cost = -1};
  if (from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED || from->n_subgroups ||
      to->n_subgroups || spmd_manual_factor(from) != 1 || spmd_manual_factor(to) != 1)
    return best;
  int64_t rf = hk_sharding_replication_factor(from), rt = hk_sharding_replication_factor(to);
  if (rf <= rt || rf % rt || gs->rank > HK_MAX_RANK) return best;
  int64_t f[HK_MAX_RANK];
  search_coarsened(v, gs, from, to, f, 0, rf / rt, &best);
  return best;
}

static hk_status *reshard_by_gathers(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                                     const hk_sharding *from, const hk_sharding *to,
                                     hk_instr **out);

/* The price of gathering, or of moving a factor first when cheaper: what
 * the all-to-all-then-slice and slice-then-permute plans must beat. */
static int64_t cheapest_other_path(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                                   const hk_sharding *to) {
  factor_move mv;
  int64_t than = general_path_cost(v, gs, from, to), moved = move_first_cost(v, gs, from, to, &mv);
  return moved >= 0 && moved < than ? moved : than;
}

/* The plan above when it costs no more than gathering or moving a factor
 * first. */
static bool try_slice_after(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to, hk_instr **out,
                            hk_status **err) {
  slice_after_plan sp = plan_slice_after(v, gs, from, to);
  if (sp.cost < 0 || sp.cost > cheapest_other_path(v, gs, from, to)) return false;
  hk_instr *mid;
  emit_all_to_all(v, h, gs, from, sp.mid, &sp.pl, &mid, err);
  if (*err) return true;
  hk_instr *aligned = spmd_align_nested(v, mid, gs, sp.mid, to);
  /* Halos too wide to exchange: the general path, not another reshard
   * that could pick this plan back (from -> mid -> from ...). */
  if (aligned) *out = slice_nested(v, aligned, gs, sp.mid, to);
  else *err = reshard_by_gathers(v, mid, gs, sp.mid, to, out);
  return true;
}

/* ---- a local slice, then one permute ------------------------------------------ */

/* `to` with its tiles given to other devices so that it nests in `from`:
 * each tile of `to` goes to a holder of the `from` tile it lies in, the
 * device `to` names when that one holds it.  NULL when to's partitions do
 * not refine from's or from replicates nothing (the permute alone then). */
static const hk_sharding *nested_owners(spmd_visitor *v, const hk_shape *gs,
                                        const hk_sharding *from, const hk_sharding *to) {
  int r = gs->rank, nt = to->n_tile_dims;
  bool repl = to->replicate_on_last_tile_dim;
  if (from->kind != HK_SHARDING_TILED || to->kind != HK_SHARDING_TILED || from->n_subgroups ||
      to->n_subgroups || spmd_manual_factor(from) != 1 || spmd_manual_factor(to) != 1 ||
      hk_sharding_replication_factor(from) < 2 || nt != r + (repl ? 1 : 0) || r > HK_MAX_RANK)
    return NULL;
  for (int d = 0; d < r; d++)
    if (hk_sharding_dim_partitions(to, d) % hk_sharding_dim_partitions(from, d)) return NULL;
  int64_t n = v->p->num_partitions, n_tiles = hk_sharding_num_tiles(from), total = 1;
  for (int i = 0; i < nt; i++) total *= to->tile_dims[i];
  if (total != n || n_tiles < 1) return NULL;
  int64_t *start = malloc(sizeof(int64_t) * (size_t)(n_tiles + 1));
  int64_t *holders = malloc(sizeof(int64_t) * (size_t)n);
  int64_t *parent = malloc(sizeof(int64_t) * (size_t)n), *devs = malloc(sizeof(int64_t) * (size_t)n);
  bool *used = calloc((size_t)n, 1);
  if (!start || !holders || !parent || !devs || !used) hk_out_of_memory();
  tile_holders(from, r, n, n_tiles, start, holders);
  int64_t c[HK_MAX_RANK + 1], fi[HK_MAX_RANK];
  /* First the devices that keep their own tile, then the others. */
  for (int64_t lin = 0; lin < n; lin++) {
    for (int64_t x = lin, i = nt - 1; i >= 0; i--) {
      c[i] = x % to->tile_dims[i];
      x /= to->tile_dims[i];
    }
    for (int d = 0; d < r; d++)
      c[d] /= hk_sharding_dim_partitions(to, d) / hk_sharding_dim_partitions(from, d);
    parent[lin] = tile_linear(from, r, c);
    int64_t dev = to->devices[lin];
    bool holds = hk_sharding_tile_index(from, dev, fi) && tile_linear(from, r, fi) == parent[lin];
    devs[lin] = holds && !used[dev] ? dev : -1;
    if (devs[lin] >= 0) used[dev] = true;
  }
  bool ok = true;
  for (int64_t lin = 0; lin < n && ok; lin++) {
    if (devs[lin] >= 0) continue;
    devs[lin] = pick_source(holders, start[parent[lin]], start[parent[lin] + 1], used, -1);
    ok = devs[lin] >= 0;
    if (ok) used[devs[lin]] = true;
  }
  const hk_sharding *own = ok ? hk_sharding_tiled(v->m, nt, to->tile_dims, devs, repl) : NULL;
  free(start);
  free(holders);
  free(parent);
  free(devs);
  free(used);
  return own ? hk_sharding_canonical(v->m, own) : NULL;
}

/* Partial replication to a tiling that refines it, its devices in another
 * order: each device cuts a tile of `to` from its own data, then one
 * collective-permute puts every tile on its device.  XLA permutes whole
 * source tiles into a compatible order and cuts after
 * (PartialReplicateReshardCompatibleSharding); cutting first moves 1/k of
 * that. */
static int64_t slice_then_permute_cost(spmd_visitor *v, const hk_shape *gs,
                                       const hk_sharding *from, const hk_sharding *to,
                                       const hk_sharding **owners) {
  const hk_sharding *own = *owners = nested_owners(v, gs, from, to);
  if (!own || hk_sharding_equivalent(own, to) || !nests_in(v, gs, from, own)) return -1;
  return nested_cost(v, gs, from, own) +   /* halos first when the tiles are uneven */
         spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, to, gs), 2);
}

/* The plan above when it costs no more than gathering or moving a factor
 * first. */
static bool try_slice_then_permute(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                                   const hk_sharding *from, const hk_sharding *to,
                                   hk_instr **out) {
  const hk_sharding *own;
  int64_t cost = slice_then_permute_cost(v, gs, from, to, &own);
  if (cost < 0 || cost > cheapest_other_path(v, gs, from, to)) return false;
  hk_instr *aligned = spmd_align_nested(v, h, gs, from, own);
  return aligned && try_permute(v, slice_nested(v, aligned, gs, from, own), gs, own, to, out);
}

/* Whether s splits some data dim (a value under it is not whole anywhere). */
static bool has_split_dim(const hk_sharding *s, int rank) {
  for (int d = 0; s->kind == HK_SHARDING_TILED && d < rank; d++)
    if (hk_sharding_dim_partitions(s, d) > 1) return true;
  return false;
}

static bool coarsen_first(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                          const hk_sharding *to, int64_t direct, spmd_coarsening *c,
                          int64_t *cost);

static hk_status *reshard_array(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                                const hk_sharding *from, const hk_sharding *to, hk_instr **out) {
  from = norm(v, from);
  to = norm(v, to);
  if (hk_sharding_equivalent(from, to) || !hk_shape_is_array(gs)) {
    *out = h;
    return NULL;
  }
  /* A {manual} value read outside the manual region: XLA's partitioner
   * replicates it over its tile assignment, which has no partitioned dim,
   * so each device's own value stands as the replicated one. */
  if (from->kind == HK_SHARDING_MANUAL && to->kind != HK_SHARDING_MANUAL &&
      spmd_manual_factor(to) == 1 && hk_shape_compatible(h->shape, gs))
    from = hk_sharding_replicated(v->m);
  /* A replicated value enters a manual subgroup by slicing its data dims. */
  bool replicated_in = from->kind == HK_SHARDING_REPLICATED && spmd_manual_factor(to) > 1;
  if (from->kind == HK_SHARDING_MANUAL || to->kind == HK_SHARDING_MANUAL ||
      (spmd_manual_factor(from) != spmd_manual_factor(to) && !replicated_in)) {
    char *a = hk_sharding_to_string(from), *b = hk_sharding_to_string(to);
    hk_status *st = hk_error(HK_UNIMPLEMENTED, "reshard from %s to %s (manual) is not supported",
                             a, b);
    free(a);
    free(b);
    return st;
  }
  if (from->kind == HK_SHARDING_MAXIMAL) {
    if (to->kind == HK_SHARDING_MAXIMAL && to->device == from->device) {
      *out = h;
      return NULL;
    }
    h = maximal_to_replicated(v, h, from->device);
    from = hk_sharding_replicated(v->m);
  }
  if (to->kind == HK_SHARDING_MAXIMAL || to->kind == HK_SHARDING_REPLICATED) {
    for (int d = 0; d < gs->rank && from->kind == HK_SHARDING_TILED; d++)
      if (hk_sharding_dim_partitions(from, d) > 1) h = gather_dim(v, h, gs, from, d, &from);
    *out = h;
    return NULL;
  }
  if (spmd_manual_factor(from) == 1 && spmd_manual_factor(to) == 1 && nests_in(v, gs, from, to)) {
    /* Nested tiles, their sizes maybe not (uneven dims): halos first. */
    hk_instr *aligned = spmd_align_nested(v, h, gs, from, to);
    if (aligned) {
      *out = slice_nested(v, aligned, gs, from, to);
      return NULL;
    }
  }
  spmd_coarsening c;
  int64_t via;
  hk_instr *merged;
  if (coarsen_first(v, gs, from, to, -1, &c, &via) && (merged = spmd_coarsen(v, h, gs, &c)))
    return reshard_array(v, merged, gs, c.inter, to, out);
  hk_status *err = NULL;
  if (from->kind == HK_SHARDING_TILED && spmd_manual_factor(from) == 1 &&
      spmd_manual_factor(to) == 1 &&
      (try_permute(v, h, gs, from, to, out) || try_all_to_all(v, h, gs, from, to, out, &err) ||
       try_slice_after(v, h, gs, from, to, out, &err) ||
       try_slice_then_permute(v, h, gs, from, to, out) ||
       try_move_first(v, h, gs, from, to, out, &err)))
    return err;
  return reshard_by_gathers(v, h, gs, from, to, out);
}

/* The general path to a tiled `to`: gather the dims whose partitioning
 * changes, then slice. */
static hk_status *reshard_by_gathers(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                                     const hk_sharding *from, const hk_sharding *to,
                                     hk_instr **out) {
  const hk_sharding *orig_from = from;
  general_plan g;
  plan_general(v, gs, from, to, &g);
  const hk_sharding *pre = permute_first_target(v, gs, from, &g);
  hk_instr *permuted;
  if (pre && try_permute(v, h, gs, from, pre, &permuted)) {
    h = permuted;
    from = pre;
    plan_general(v, gs, from, to, &g);
  }
  const hk_sharding *cur = from;
  int64_t *gdims = g.gdims;
  int *sdims = g.sdims, ng = g.ng, ns = g.ns;
  const hk_sharding *want = g.want;
  hk_instr *before = h;
  for (int k = 0; k < ng; k++) h = gather_dim(v, h, gs, cur, (int)gdims[k], &cur);
  /* Every partitioned dim gathered on the way to a tiled target: the
   * value was whole on each device before the slices cut it again. */
  bool made_whole = ng && ns && !has_split_dim(cur, gs->rank);
  if (made_whole) spmd_note_full_remat(v, before, h, gs, orig_from, to);
  if (!hk_sharding_equivalent(norm(v, want), norm(v, cur))) {
    /* Device orders disagree.  When the tiles left after the gathers are
     * the ones `to` cuts from, only their owners differ: one
     * collective-permute.  Otherwise go through the fully gathered value. */
    hk_instr *moved;
    if (cur->kind == HK_SHARDING_TILED && want->kind == HK_SHARDING_TILED &&
        try_permute(v, h, gs, cur, want, &moved)) {
      h = moved;
    } else {
      hk_instr *partial = h;
      for (int d = 0; d < gs->rank && cur->kind == HK_SHARDING_TILED; d++)
        if (hk_sharding_dim_partitions(cur, d) > 1) h = gather_dim(v, h, gs, cur, d, &cur);
      ns = 0;
      for (int d = 0; d < gs->rank; d++)
        if (hk_sharding_dim_partitions(to, d) > 1) sdims[ns++] = d;
      if (ns && h != partial && !made_whole) spmd_note_full_remat(v, partial, h, gs, orig_from, to);
    }
  }
  *out = ns ? slice_dims(v, h, gs, to, ns, sdims) : h;
  return NULL;
}

/* The price of reshard_array's paths other than coarsening first. */
static int64_t direct_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                           const hk_sharding *to) {
  from = norm(v, from);
  to = norm(v, to);
  if (!hk_shape_is_array(gs) || hk_sharding_equivalent(from, to)) return 0;
  if (from->kind == HK_SHARDING_MANUAL || to->kind == HK_SHARDING_MANUAL || spmd_is_subgroup_manual(from) ||
      spmd_is_subgroup_manual(to))
    return hk_shape_byte_size(gs);
  int64_t cost = 0;
  if (from->kind == HK_SHARDING_MAXIMAL) {
    cost += spmd_plan_cost(v->p, HK_COLL_ALL_REDUCE, hk_shape_byte_size(gs), v->p->num_partitions);
    from = hk_sharding_replicated(v->m);
  }
  if (from->kind != HK_SHARDING_TILED) return cost;
  if (nests_in(v, gs, from, to)) {
    if (nested_sizes_agree(gs, from, to)) return cost;   /* slices are free */
    if (spmd_manual_factor(from) == 1)                    /* halos, then slices */
      return cost + spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, from, gs), 2);
  }
  if (to->kind != HK_SHARDING_TILED) return cost + gather_path_cost(v, gs, from, to);
  if (same_partition_counts(from, to, gs->rank))
    return cost + spmd_plan_cost(v->p, HK_COLL_COLLECTIVE_PERMUTE, local_bytes(v, from, gs), 2);
  int64_t gather = general_path_cost(v, gs, from, to);
  a2a_plan pl;
  if (best_all_to_all(v, gs, from, to, &pl)) {
    int64_t a2a = all_to_all_cost(v, gs, from, to, &pl);
    if (a2a < gather) gather = a2a;
  } else if (spmd_manual_factor(from) == 1 && spmd_manual_factor(to) == 1) {
    factor_move mv;
    int64_t moved = move_first_cost(v, gs, from, to, &mv);
    if (moved >= 0 && moved < gather) gather = moved;
    slice_after_plan sp = plan_slice_after(v, gs, from, to);
    /* The order reshard_array tries them in. */
    const hk_sharding *own;
    int64_t cut = slice_then_permute_cost(v, gs, from, to, &own);
    if (sp.cost >= 0 && sp.cost <= gather) gather = sp.cost;
    else if (cut >= 0 && cut < gather) gather = cut;
  }
  return cost + gather;
}

/* Whether merging tiles by grouped all-gathers first (then resharding
 * what they leave) is cheaper than the direct paths; c the merges, *cost
 * the cheaper price.  from and to are normalized.  direct is the direct
 * paths' price when known, else -1: it is priced only when a merge plan
 * exists, so reshards that cannot merge pay nothing for asking. */
static bool coarsen_first(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                          const hk_sharding *to, int64_t direct, spmd_coarsening *c,
                          int64_t *cost) {
  *cost = direct;
  if (!hk_shape_is_array(gs) || spmd_manual_factor(from) != 1 || spmd_manual_factor(to) != 1 ||
      !spmd_coarsen_plan(v, gs, from, to, c))
    return false;
  if (direct < 0) *cost = direct = direct_cost(v, gs, from, to);
  int64_t via = spmd_coarsen_cost(v, gs, c) + direct_cost(v, gs, c->inter, to);
  if (via >= direct) return false;
  *cost = via;
  return true;
}

int64_t spmd_reshard_cost(spmd_visitor *v, const hk_shape *gs, const hk_sharding *from,
                          const hk_sharding *to) {
  from = norm(v, from);
  to = norm(v, to);
  spmd_coarsening c;
  int64_t cost;
  coarsen_first(v, gs, from, to, direct_cost(v, gs, from, to), &c, &cost);
  return cost;
}

hk_status *spmd_reshard_hlo(spmd_visitor *v, hk_instr *h, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to, hk_instr **out) {
  if (!hk_shape_is_tuple(gs)) {
    if (from && from->kind == HK_SHARDING_TUPLE) from = from->n_elems ? from->elems[0] : NULL;
    if (to && to->kind == HK_SHARDING_TUPLE) to = to->n_elems ? to->elems[0] : NULL;
    return reshard_array(v, h, gs, from, to, out);
  }
  if (from == to || (from && to && hk_sharding_equivalent(from, to))) {
    *out = h;
    return NULL;
  }
  int n = gs->n_tuple;
  hk_instr **elems = malloc(sizeof(hk_instr *) * (size_t)(n ? n : 1));
  if (!elems) hk_out_of_memory();
  hk_status *st = NULL;
  for (int i = 0; i < n && !st; i++) {
    int64_t idx = i;
    const hk_sharding *fs = from ? hk_sharding_subsharding_shape(v->m, from, gs, 1, &idx) : NULL;
    const hk_sharding *ts = to ? hk_sharding_subsharding_shape(v->m, to, gs, 1, &idx) : NULL;
    st = spmd_reshard_hlo(v, spmd_gte(v->comp, h, i), gs->tuple[i], fs, ts, &elems[i]);
  }
  if (!st) {
    const hk_shape **ss = malloc(sizeof(hk_shape *) * (size_t)(n ? n : 1));
    if (!ss) hk_out_of_memory();
    for (int i = 0; i < n; i++) ss[i] = elems[i]->shape;
    *out = hk_instr_new(v->comp, HK_OP_TUPLE, hk_shape_tuple(v->m, n, ss), n, elems, NULL);
    free(ss);
  }
  free(elems);
  return st;
}

hk_status *spmd_reshard(spmd_visitor *v, spmd_value *val, const hk_sharding *target,
                        hk_instr **out) {
  if (!target || target == val->sharding) {
    *out = val->hlo;
    return NULL;
  }
  for (spmd_cache_entry *e = val->cache; e; e = e->next)
    if (e->sharding == target) {
      *out = e->hlo;
      return NULL;
    }
  if (!spmd_rebuild_as(v, val, target, out))
    HK_TRY(spmd_reshard_hlo(v, val->hlo, val->base_shape, val->sharding, target, out));
  spmd_cache_entry *e = malloc(sizeof *e);
  if (!e) hk_out_of_memory();
  e->sharding = target;
  e->hlo = *out;
  e->next = val->cache;
  val->cache = e;
  return NULL;
}

const hk_sharding *spmd_sharding_of(spmd_visitor *v, const hk_instr *i) {
  if (!i->sharding) return hk_sharding_for_shape(v->m, hk_sharding_replicated(v->m), i->shape);
  return i->sharding;
}

/* Regroup the tile array of s (see spmd_internal.h). */
const hk_sharding *spmd_regroup(hk_module *m, const hk_sharding *s, int n_new,
                                const int *group_sizes, const int *const *groups,
                                bool last_repl) {
  int k = s->n_tile_dims;
  int64_t total = 1;
  for (int i = 0; i < k; i++) total *= s->tile_dims[i];
  int64_t new_dims[HK_MAX_RANK], src_stride[HK_MAX_RANK];
  for (int j = 0; j < n_new; j++) {
    new_dims[j] = 1;
    for (int t = 0; t < group_sizes[j]; t++) new_dims[j] *= s->tile_dims[groups[j][t]];
  }
  src_stride[k - 1] = 1;
  for (int i = k - 2; i >= 0; i--) src_stride[i] = src_stride[i + 1] * s->tile_dims[i + 1];
  /* Order of src dims in the new array (row-major over the new dims). */
  int order[HK_MAX_RANK], no = 0;
  for (int j = 0; j < n_new; j++)
    for (int t = 0; t < group_sizes[j]; t++) order[no++] = groups[j][t];
  int64_t *devs = malloc(sizeof(int64_t) * (size_t)total);
  if (!devs) hk_out_of_memory();
  int64_t idx[HK_MAX_RANK] = {0};
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t src = 0;
    for (int t = 0; t < no; t++) src += idx[t] * src_stride[order[t]];
    devs[lin] = s->devices[src];
    for (int t = no - 1; t >= 0; t--) {
      if (++idx[t] < s->tile_dims[order[t]]) break;
      idx[t] = 0;
    }
  }
  int nd = n_new;
  if (last_repl && nd > 1 && new_dims[nd - 1] == 1) {
    nd--;
    last_repl = false;
  }
  const hk_sharding *r = hk_sharding_tiled(m, nd, new_dims, devs, last_repl);
  free(devs);
  return hk_sharding_canonical(m, r);
}
