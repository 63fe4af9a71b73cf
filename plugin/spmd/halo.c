/* halo.c - neighbour exchanges along a partitioned dimension: the
 * SPMDInternal_RotateRight custom call that PreprocessHlos creates (on an
 * evenly sharded dimension each shard is rebuilt from two neighbours'
 * pieces moved by collective-permutes; otherwise the dimension is made
 * whole, rotated locally and resliced), and pad along partitioned
 * dimensions by halo exchange (each shard receives the edges of its
 * neighbours, masks what lies outside the operand with the pad value and
 * slices out its output window). */
#include "spmd_internal.h"

static bool parse_rotate_config(const hk_instr *orig, int64_t *dim, int64_t *amount) {
  const char *cfg = orig->attrs ? orig->attrs->backend_config : NULL;
  if (!cfg) return false;
  if (*cfg == '"') cfg++;
  long long d, a;
  if (sscanf(cfg, "dimension=%lld,amount=%lld", &d, &a) != 2) return false;
  *dim = d;
  *amount = a;
  return d >= 0 && d < orig->shape->rank;
}

hk_instr *spmd_slice_dim(spmd_visitor *v, hk_instr *h, int64_t dim, int64_t start, int64_t limit) {
  const hk_shape *s = h->shape;
  int r = s->rank;
  int64_t dims[HK_MAX_RANK];
  hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)(r ? r : 1));
  for (int d = 0; d < r; d++) {
    dims[d] = d == dim ? limit - start : s->dims[d];
    sd[d] = d == dim ? (hk_slice_dim){start, limit, 1} : (hk_slice_dim){0, s->dims[d], 1};
  }
  hk_instr *sl = hk_instr_new(v->comp, HK_OP_SLICE, hk_shape_with_dims(v->m, s, r, dims), 1, &h, NULL);
  hk_attrs *a = hk_instr_attrs(sl);
  a->n_slice = r;
  a->slice = sd;
  return sl;
}

static hk_instr *concat_dim(spmd_visitor *v, hk_instr *a, hk_instr *b, int64_t dim) {
  const hk_shape *s = a->shape;
  int64_t dims[HK_MAX_RANK];
  for (int d = 0; d < s->rank; d++) dims[d] = s->dims[d] + (d == dim ? b->shape->dims[d] : 0);
  hk_instr *ops[2] = {a, b};
  hk_instr *c = hk_instr_new(v->comp, HK_OP_CONCATENATE, hk_shape_with_dims(v->m, s, s->rank, dims),
                             2, ops, NULL);
  hk_instr_set_dims(c, 1, &dim);
  return c;
}

/* Rotation of a value whose dim is whole on every partition. */
static hk_instr *rotate_local(spmd_visitor *v, hk_instr *h, int64_t dim, int64_t amount) {
  int64_t n = h->shape->dims[dim];
  amount = n ? ((amount % n) + n) % n : 0;
  if (!amount) return h;
  return concat_dim(v, spmd_slice_dim(v, h, dim, n - amount, n),
                    spmd_slice_dim(v, h, dim, 0, n - amount), dim);
}

/* Moves every partition's value to the partition `shift` tiles further
 * along tile dim `dim` of s: cyclically with wrap, else partitions with no
 * source receive zeros. */
static hk_instr *shift_tiles_by(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                                int64_t shift, bool wrap) {
  int64_t k = s->tile_dims[dim];
  if (wrap) shift = ((shift % k) + k) % k;
  if (!shift) return h;
  int64_t total = 1, stride = 1;
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  for (int i = (int)dim + 1; i < s->n_tile_dims; i++) stride *= s->tile_dims[i];
  hk_pair *pairs = malloc(sizeof(hk_pair) * (size_t)total);
  if (!pairs) abort();
  int64_t np = 0;
  for (int64_t pos = 0; pos < total; pos++) {
    int64_t c = (pos / stride) % k, to = wrap ? (c + shift) % k : c + shift;
    if (to >= 0 && to < k) pairs[np++] = (hk_pair){s->devices[pos], s->devices[pos + (to - c) * stride]};
  }
  const hk_spmd_collective_ops *ops = &v->p->collectives;
  hk_instr *cp = ops->collective_permute(ops->state, v->comp, h, np, pairs,
                                         &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(pairs);
  return cp;
}

static hk_instr *shift_tiles(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                             int64_t shift) {
  return shift_tiles_by(v, h, s, dim, shift, true);
}

/* Evenly sharded dim of k tiles of size t, amount = q*t + r: tile i is
 * the last r elements of tile i-q-1 followed by the first t-r of tile i-q. */
static hk_instr *rotate_sharded(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                                int64_t amount, int64_t n) {
  int64_t t = h->shape->dims[dim];
  amount = ((amount % n) + n) % n;
  int64_t q = amount / t, r = amount % t;
  if (!r) return shift_tiles(v, h, s, dim, q);
  hk_instr *tail = shift_tiles(v, spmd_slice_dim(v, h, dim, t - r, t), s, dim, q + 1);
  hk_instr *head = shift_tiles(v, spmd_slice_dim(v, h, dim, 0, t - r), s, dim, q);
  return concat_dim(v, tail, head, dim);
}

hk_status *spmd_handle_rotate_right(spmd_visitor *v, hk_instr *orig) {
  int64_t dim, amount;
  if (orig->n_operands != 1 || !hk_shape_is_array(orig->shape) ||
      !parse_rotate_config(orig, &dim, &amount))
    return hk_error(HK_INVALID_ARGUMENT, "%s '%s': expected one array operand and "
                    "backend_config \"dimension=D,amount=A\"", SPMD_ROTATE_RIGHT_TARGET, orig->name);
  const hk_sharding *s = spmd_sharding_of(v, orig);
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  if (!val) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  int64_t n = orig->shape->dims[dim];
  int64_t k = s->kind == HK_SHARDING_TILED ? hk_sharding_dim_partitions(s, (int)dim) : 1;
  hk_instr *x, *out;
  if (k == 1 || s->kind != HK_SHARDING_TILED) {
    HK_TRY(spmd_reshard(v, val, s, &x));
    spmd_set(v, orig, rotate_local(v, x, dim, amount), s);
    return NULL;
  }
  if (n % k == 0) {
    HK_TRY(spmd_reshard(v, val, s, &x));
    spmd_set(v, orig, rotate_sharded(v, x, s, dim, amount, n), s);
    return NULL;
  }
  const hk_sharding *whole = hk_sharding_replicate_dims(v->m, s, 1, &dim);
  HK_TRY(spmd_reshard(v, val, whole, &x));
  HK_TRY(spmd_reshard_hlo(v, rotate_local(v, x, dim, amount), orig->shape, whole, s, &out));
  spmd_set(v, orig, out, s);
  return NULL;
}

/* ---- pad by halo exchange ---------------------------------------------------- */

/* The halo one pad dimension needs: shard k of the output (size so)
 * starts at input position k*so - lo, shard k of the input (size si) at
 * k*si; left/right are the most any shard reads before/after its own
 * (from as many neighbours as that takes). */
typedef struct pad_halo {
  int64_t k, si, so, lo, left, right;
} pad_halo;

static bool pad_halo_of(const hk_sharding *s, int d, int64_t n_in, int64_t n_out, int64_t lo,
                        pad_halo *h) {
  h->k = hk_sharding_dim_partitions(s, d);
  h->si = (n_in + h->k - 1) / h->k;
  h->so = (n_out + h->k - 1) / h->k;
  h->lo = lo;
  h->left = h->right = 0;
  for (int64_t t = 0; t < h->k; t++) {
    int64_t start = t * (h->so - h->si) - lo;   /* relative to the own shard */
    if (-start > h->left) h->left = -start;
    if (start + h->so - h->si > h->right) h->right = start + h->so - h->si;
  }
  /* Worth it while the halos move less than gathering the dim would. */
  return h->si > 0 && h->left + h->right < (h->k - 1) * h->si;
}

static hk_instr *compare_dir(spmd_visitor *v, hk_instr *a, hk_instr *b, hk_cmp_dir dir) {
  hk_instr *ops[2] = {a, b};
  hk_instr *c = hk_instr_new(v->comp, HK_OP_COMPARE, hk_shape_with_elem(v->m, a->shape, HK_PRED),
                             2, ops, NULL);
  hk_instr_attrs(c)->cmp_dir = (uint8_t)dir;
  return c;
}

/* Replaces every element of x (dim d extended by the halos) whose input
 * position falls outside [0, n_in) with the pad value. */
static hk_instr *mask_outside(spmd_visitor *v, hk_instr *x, const hk_sharding *s, int64_t d,
                              const pad_halo *h, int64_t n_in, hk_instr *pv) {
  const hk_shape *is = hk_shape_with_elem(v->m, x->shape, HK_S32);
  hk_instr *iota = hk_instr_new(v->comp, HK_OP_IOTA, is, 0, NULL, NULL);
  hk_instr_set_dims(iota, 1, &d);
  int64_t *first = malloc(sizeof(int64_t) * (size_t)h->k);
  if (!first) abort();
  for (int64_t t = 0; t < h->k; t++) first[t] = t * h->si - h->left;
  hk_instr *off = hk_build_broadcast_scalar(v->comp, NULL, spmd_per_tile_scalar(v, s, d, first), is);
  free(first);
  hk_instr *ops[3] = {iota, off, NULL};
  hk_instr *pos = hk_instr_new(v->comp, HK_OP_ADD, is, 2, ops, NULL);
  hk_instr *zero = hk_build_broadcast_scalar(v->comp, NULL, hk_build_constant_i64(v->comp, NULL, HK_S32, 0), is);
  hk_instr *lim = hk_build_broadcast_scalar(v->comp, NULL, hk_build_constant_i64(v->comp, NULL, HK_S32, n_in), is);
  ops[0] = compare_dir(v, pos, zero, HK_CMP_GE);
  ops[1] = compare_dir(v, pos, lim, HK_CMP_LT);
  ops[0] = hk_instr_new(v->comp, HK_OP_AND, ops[0]->shape, 2, ops, NULL);
  ops[1] = x;
  ops[2] = hk_build_broadcast_scalar(v->comp, NULL, pv, x->shape);
  return hk_instr_new(v->comp, HK_OP_SELECT, x->shape, 3, ops, NULL);
}

/* Pads partitioned dim d of the local x: neighbours' edges in, outside
 * masked, this shard's output window sliced out. */
static hk_instr *pad_dim_by_halo(spmd_visitor *v, hk_instr *x, const hk_sharding *s, int64_t d,
                                 const pad_halo *h, int64_t n_in, hk_instr *pv) {
  hk_instr *ext = x;
  /* Left: the nearest neighbour's shard first, the farthest one's tail last. */
  for (int64_t hop = 1, need = h->left; need > 0; hop++, need -= h->si) {
    hk_instr *piece = need >= h->si ? x : spmd_slice_dim(v, x, d, h->si - need, h->si);
    ext = concat_dim(v, shift_tiles_by(v, piece, s, d, hop, false), ext, d);
  }
  for (int64_t hop = 1, need = h->right; need > 0; hop++, need -= h->si) {
    hk_instr *piece = need >= h->si ? x : spmd_slice_dim(v, x, d, 0, need);
    ext = concat_dim(v, ext, shift_tiles_by(v, piece, s, d, -hop, false), d);
  }
  ext = mask_outside(v, ext, s, d, h, n_in, pv);
  int64_t *starts = malloc(sizeof(int64_t) * (size_t)h->k);
  if (!starts) abort();
  for (int64_t t = 0; t < h->k; t++) starts[t] = t * (h->so - h->si) - h->lo + h->left;
  int r = x->shape->rank;
  hk_instr **ops = malloc(sizeof(hk_instr *) * (size_t)(r + 1));
  if (!ops) abort();
  ops[0] = ext;
  hk_instr *zero = hk_build_constant_i64(v->comp, NULL, HK_S32, 0);
  for (int i = 0; i < r; i++) ops[i + 1] = i == d ? spmd_per_tile_scalar(v, s, d, starts) : zero;
  free(starts);
  int64_t sizes[HK_MAX_RANK];
  for (int i = 0; i < r; i++) sizes[i] = i == d ? h->so : x->shape->dims[i];
  hk_instr *ds = hk_instr_new(v->comp, HK_OP_DYNAMIC_SLICE, hk_shape_with_dims(v->m, x->shape, r, sizes),
                              r + 1, ops, NULL);
  free(ops);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = r;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, sizes, sizeof(int64_t) * (size_t)(r ? r : 1));
  return ds;
}

/* Local pad of the dims that are not partitioned (partitioned ones left alone). */
static hk_instr *pad_unpartitioned(spmd_visitor *v, hk_instr *x, hk_instr *pv, const hk_sharding *s,
                                   const hk_pad_dim *pads) {
  int r = x->shape->rank;
  hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)(r ? r : 1));
  int64_t dims[HK_MAX_RANK];
  bool any = false;
  for (int i = 0; i < r; i++) {
    bool local = hk_sharding_dim_partitions(s, i) == 1;
    pd[i] = local ? pads[i] : (hk_pad_dim){0, 0, 0};
    any = any || pd[i].lo || pd[i].hi || pd[i].interior;
    int64_t n = x->shape->dims[i];
    dims[i] = pd[i].lo + pd[i].hi + n + (n > 0 ? (n - 1) * pd[i].interior : 0);
  }
  if (!any) return x;
  hk_instr *ops[2] = {x, pv};
  hk_instr *p = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, x->shape, r, dims), 2, ops, NULL);
  hk_attrs *a = hk_instr_attrs(p);
  a->n_pad = r;
  a->pad = pd;
  return p;
}

hk_status *spmd_handle_pad_halo(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_attrs *a = orig->attrs;
  int r = orig->shape->rank;
  if (s->kind != HK_SHARDING_TILED || spmd_is_subgroup_manual(s) || !hk_sharding_is_tiled(s) ||
      !a || a->n_pad != r || orig->n_operands != 2)
    return NULL;
  pad_halo halos[HK_MAX_RANK];
  bool any = false;
  const hk_shape *in = orig->operands[0]->shape;
  for (int d = 0; d < r; d++) {
    const hk_pad_dim *pd = &a->pad[d];
    if (hk_sharding_dim_partitions(s, d) == 1 || (!pd->lo && !pd->hi && !pd->interior)) continue;
    if (pd->interior || !pad_halo_of(s, d, in->dims[d], orig->shape->dims[d], pd->lo, &halos[d]))
      return NULL;
    any = true;
  }
  if (!any) return NULL;
  spmd_value *xv = spmd_lookup(v, orig->operands[0]), *pvv = spmd_lookup(v, orig->operands[1]);
  if (!xv || !pvv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  hk_instr *x, *pv;
  HK_TRY(spmd_reshard(v, xv, s, &x));
  HK_TRY(spmd_reshard(v, pvv, hk_sharding_replicated(v->m), &pv));
  x = pad_unpartitioned(v, x, pv, s, a->pad);
  for (int d = 0; d < r; d++) {
    const hk_pad_dim *pd = &a->pad[d];
    if (hk_sharding_dim_partitions(s, d) > 1 && (pd->lo || pd->hi))
      x = pad_dim_by_halo(v, x, s, d, &halos[d], in->dims[d], pv);
  }
  spmd_set(v, orig, x, s);
  *handled = true;
  return NULL;
}
