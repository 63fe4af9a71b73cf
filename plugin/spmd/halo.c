/* halo.c - partitioning of the SPMDInternal_RotateRight custom call that
 * PreprocessHlos creates: on an evenly sharded dimension each shard is
 * rebuilt from two neighbours' pieces moved by collective-permutes;
 * otherwise the dimension is made whole, rotated locally and resliced. */
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

static hk_instr *slice_dim(spmd_visitor *v, hk_instr *h, int64_t dim, int64_t start, int64_t limit) {
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
  return concat_dim(v, slice_dim(v, h, dim, n - amount, n), slice_dim(v, h, dim, 0, n - amount),
                    dim);
}

/* Moves every partition's value to the partition `shift` tiles further
 * along tile dim `dim` of s (cyclically). */
static hk_instr *shift_tiles(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                             int64_t shift) {
  int64_t k = s->tile_dims[dim];
  shift = ((shift % k) + k) % k;
  if (!shift) return h;
  int64_t total = 1, stride = 1;
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  for (int i = (int)dim + 1; i < s->n_tile_dims; i++) stride *= s->tile_dims[i];
  hk_pair *pairs = malloc(sizeof(hk_pair) * (size_t)total);
  if (!pairs) abort();
  for (int64_t pos = 0; pos < total; pos++) {
    int64_t c = (pos / stride) % k, to = (c + shift) % k;
    pairs[pos] = (hk_pair){s->devices[pos], s->devices[pos + (to - c) * stride]};
  }
  const hk_spmd_collective_ops *ops = &v->p->collectives;
  hk_instr *cp = ops->collective_permute(ops->state, v->comp, h, total, pairs,
                                         &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(pairs);
  return cp;
}

/* Evenly sharded dim of k tiles of size t, amount = q*t + r: tile i is
 * the last r elements of tile i-q-1 followed by the first t-r of tile i-q. */
static hk_instr *rotate_sharded(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                                int64_t amount, int64_t n) {
  int64_t t = h->shape->dims[dim];
  amount = ((amount % n) + n) % n;
  int64_t q = amount / t, r = amount % t;
  if (!r) return shift_tiles(v, h, s, dim, q);
  hk_instr *tail = shift_tiles(v, slice_dim(v, h, dim, t - r, t), s, dim, q + 1);
  hk_instr *head = shift_tiles(v, slice_dim(v, h, dim, 0, t - r), s, dim, q);
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
