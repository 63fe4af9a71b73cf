/* halo.c - neighbour exchanges along a partitioned dimension: the
 * SPMDInternal_RotateRight custom call that PreprocessHlos creates (on an
 * evenly sharded dimension each shard is rebuilt from two neighbours'
 * pieces moved by collective-permutes; otherwise the dimension is made
 * whole, rotated locally and resliced), and XLA's ExchangeHalo /
 * ExchangeHaloAndGetValidData: each shard receives the edges of as many
 * neighbours as its window reaches, padded, sliced to its valid window and
 * masked outside the data (windowed.c builds the halo sizes). */
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


/* Piece [start, limit) of x along d, x itself when that is all of it. */
static hk_instr *piece_of(spmd_visitor *v, hk_instr *x, int64_t d, int64_t start, int64_t limit) {
  if (start == 0 && limit == x->shape->dims[d]) return x;
  return spmd_slice_dim(v, x, d, start, limit);
}

static hk_instr *concat_pieces(spmd_visitor *v, hk_instr **pieces, int n, int64_t d) {
  if (n == 1) return pieces[0];
  const hk_shape *s = pieces[0]->shape;
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < s->rank; i++) dims[i] = s->dims[i];
  dims[d] = 0;
  for (int k = 0; k < n; k++) dims[d] += pieces[k]->shape->dims[d];
  hk_instr *c = hk_instr_new(v->comp, HK_OP_CONCATENATE, hk_shape_with_dims(v->m, s, s->rank, dims),
                             n, pieces, NULL);
  hk_instr_set_dims(c, 1, &d);
  return c;
}

/* Rotation of a value whose dim is whole on every partition. */
static hk_instr *rotate_local(spmd_visitor *v, hk_instr *h, int64_t dim, int64_t amount) {
  int64_t n = h->shape->dims[dim];
  amount = n ? ((amount % n) + n) % n : 0;
  if (!amount) return h;
  hk_instr *pieces[2] = {spmd_slice_dim(v, h, dim, n - amount, n), spmd_slice_dim(v, h, dim, 0, n - amount)};
  return concat_pieces(v, pieces, 2, dim);
}

/* The tile index along a dim of the target of trimmed shard j (ring.c). */
static int64_t ring_tile(const spmd_halo_ring *ring, int64_t j) {
  return ring->skip_from >= 0 && j >= ring->skip_from ? j + ring->skip : j;
}

/* One collective-permute along tile dim `dim` of s: tile src[k] sends to
 * tile dst[k] (k < n), at every position of the other tile dims. */
static hk_instr *permute_tiles(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                               int64_t n, const int64_t *src, const int64_t *dst) {
  int64_t total = 1, stride = 1, kt = s->tile_dims[dim];
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  for (int i = (int)dim + 1; i < s->n_tile_dims; i++) stride *= s->tile_dims[i];
  /* tile -> its destination (-1: sends nothing) */
  int64_t *to = malloc(sizeof(int64_t) * (size_t)kt);
  hk_pair *pairs = malloc(sizeof(hk_pair) * (size_t)total);
  if (!pairs || !to) hk_out_of_memory();
  for (int64_t t = 0; t < kt; t++) to[t] = -1;
  for (int64_t k = 0; k < n; k++) to[src[k]] = dst[k];
  int64_t np = 0;
  for (int64_t pos = 0; pos < total; pos++) {
    int64_t tc = (pos / stride) % kt;
    if (to[tc] >= 0) pairs[np++] = (hk_pair){s->devices[pos], s->devices[pos + (to[tc] - tc) * stride]};
  }
  free(to);
  const hk_spmd_collective_ops *ops = &v->p->collectives;
  hk_instr *cp = ops->collective_permute(ops->state, v->comp, h, np, pairs, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(pairs);
  return cp;
}

/* Moves every shard's value `shift` shards further along tile dim `dim`
 * of s, among the shards of `ring` (NULL: every tile; tiles outside it
 * neither send nor receive): cyclically with wrap, else shards with no
 * source receive zeros. */
static hk_instr *shift_tiles_in(spmd_visitor *v, hk_instr *h, const hk_sharding *s, int64_t dim,
                                int64_t shift, bool wrap, const spmd_halo_ring *ring) {
  int64_t k = ring ? ring->n : s->tile_dims[dim];
  if (wrap) shift = ((shift % k) + k) % k;
  if (!shift) return h;
  int64_t *src = malloc(sizeof(int64_t) * (size_t)(2 * k)), *dst = src + k, n = 0;
  if (!src) hk_out_of_memory();
  for (int64_t c = 0; c < k; c++) {
    int64_t to = wrap ? (c + shift) % k : c + shift;
    if (to < 0 || to >= k) continue;
    src[n] = ring ? ring_tile(ring, c) : c;
    dst[n++] = ring ? ring_tile(ring, to) : to;
  }
  hk_instr *cp = permute_tiles(v, h, s, dim, n, src, dst);
  free(src);
  return cp;
}

/* ---- ExchangeHalo ------------------------------------------------------------ */

static int64_t max_in(const int64_t *f, int64_t from, int64_t to) {
  int64_t m = f[from];
  for (int64_t j = from + 1; j < to; j++)
    if (f[j] > m) m = f[j];
  return m;
}

/* XLA's ExchangeHalo: x (the local shard, size s along d) extended by
 * left[j] elements of the shards before shard j and right[j] of those
 * after it (negative: that much of its own edge dropped), one
 * collective-permute per neighbour distance.  NULL when a halo reaches
 * past the neighbour and the exchange would move about as much as
 * gathering the dim. */
static hk_instr *exchange_halo(spmd_visitor *v, hk_instr *x, const hk_sharding *t, int64_t d,
                               const spmd_halo *h) {
  int64_t s = x->shape->dims[d], n = h->ring.n;
  int64_t max_left = n > 1 ? max_in(h->left, 1, n) : 0;
  int64_t max_right = n > 1 ? max_in(h->right, 0, n - 1) : 0;
  if (s <= 0 || (max_left + max_right + s >= s * n && (max_left > s || max_right > s))) return NULL;
  int64_t left_bound = -max_in(h->left, 0, n), right_bound = s + max_in(h->right, 0, n);
  if (left_bound >= right_bound) return NULL;
  int cap = (int)(spmd_ceil_div(max_left > 0 ? max_left : 0, s) + spmd_ceil_div(max_right > 0 ? max_right : 0, s) + 1);
  hk_instr **pieces = malloc(sizeof(hk_instr *) * (size_t)cap);
  if (!pieces) hk_out_of_memory();
  int np = 0;
  /* Left halos, the farthest neighbour's first. */
  for (int64_t i = spmd_ceil_div(max_left, s) - 1; i >= 0 && (-i - 1) * s < right_bound; i--) {
    int64_t with_skips = max_left - s * i < s ? max_left - s * i : s;
    int64_t right_skips = -i * s - right_bound > 0 ? -i * s - right_bound : 0;
    hk_instr *src = piece_of(v, x, d, s - with_skips, s - right_skips);
    pieces[np++] = shift_tiles_in(v, src, t, d, i + 1, false, &h->ring);
  }
  if (left_bound < s && right_bound > 0)
    pieces[np++] = piece_of(v, x, d, left_bound > 0 ? left_bound : 0, right_bound < s ? right_bound : s);
  int64_t skipped = left_bound - s > 0 ? left_bound - s : 0;
  if (skipped > (max_right > 0 ? max_right : 0)) skipped = max_right > 0 ? max_right : 0;
  for (int64_t i = skipped / s; i < spmd_ceil_div(max_right, s); i++) {
    int64_t with_skips = max_right - s * i < s ? max_right - s * i : s;
    int64_t left_skips = left_bound - (i + 1) * s > 0 ? left_bound - (i + 1) * s : 0;
    hk_instr *src = piece_of(v, x, d, left_skips, with_skips);
    pieces[np++] = shift_tiles_in(v, src, t, d, -(i + 1), false, &h->ring);
  }
  hk_instr *c = np ? concat_pieces(v, pieces, np, d) : NULL;
  free(pieces);
  return c;
}

hk_instr *spmd_pad_along(spmd_visitor *v, hk_instr *x, hk_instr *pv, int64_t d, int64_t lo, int64_t hi) {
  int r = x->shape->rank;
  hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)(r ? r : 1));
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < r; i++) {
    pd[i] = i == d ? (hk_pad_dim){lo, hi, 0} : (hk_pad_dim){0, 0, 0};
    dims[i] = x->shape->dims[i] + (i == d ? lo + hi : 0);
  }
  hk_instr *ops[2] = {x, pv};
  hk_instr *p = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, x->shape, r, dims), 2, ops, NULL);
  hk_attrs *a = hk_instr_attrs(p);
  a->n_pad = r;
  a->pad = pd;
  return p;
}

/* A table by tile index along d of t from one by ring shard (tiles
 * outside the ring get 0; malloc'ed). */
static int64_t *by_tile(const hk_sharding *t, int64_t d, const spmd_halo_ring *ring,
                        const int64_t *by_shard) {
  int64_t kt = t->tile_dims[d];
  int64_t *out = calloc((size_t)kt, sizeof(int64_t));
  if (!out) hk_out_of_memory();
  for (int64_t j = 0; j < ring->n; j++) out[ring_tile(ring, j)] = by_shard[j];
  return out;
}

hk_instr *spmd_dynamic_slice(spmd_visitor *v, hk_instr *x, hk_instr *const *starts, const hk_shape *ls) {
  int r = x->shape->rank;
  hk_instr *ops[HK_MAX_RANK + 1];
  ops[0] = x;
  for (int i = 0; i < r; i++) ops[i + 1] = starts[i];
  hk_instr *ds = hk_instr_new(v->comp, HK_OP_DYNAMIC_SLICE, ls, r + 1, ops, NULL);
  hk_attrs *a = hk_instr_attrs(ds);
  a->dynamic_slice_sizes.n = r;
  a->dynamic_slice_sizes.v = hk_memdup(v->m, ls->dims, sizeof(int64_t) * (size_t)(r ? r : 1));
  return ds;
}

hk_instr *spmd_dynamic_slice_dim(spmd_visitor *v, hk_instr *x, int64_t d, hk_instr *start,
                                 int64_t size) {
  int r = x->shape->rank;
  hk_instr *starts[HK_MAX_RANK];
  int64_t sizes[HK_MAX_RANK] = {0};
  for (int i = 0; i < r; i++) {
    starts[i] = i == d ? start : spmd_constant_scalar(v, HK_S32, 0);
    sizes[i] = i == d ? size : x->shape->dims[i];
  }
  return spmd_dynamic_slice(v, x, starts, hk_shape_with_dims(v->m, x->shape, r, sizes));
}

static hk_instr *compare_dir(spmd_visitor *v, hk_instr *a, hk_instr *b, hk_cmp_dir dir) {
  hk_instr *ops[2] = {a, b};
  hk_instr *c = hk_instr_new(v->comp, HK_OP_COMPARE, hk_shape_with_elem(v->m, a->shape, HK_PRED),
                             2, ops, NULL);
  hk_instr_attrs(c)->cmp_dir = (uint8_t)dir;
  return c;
}

hk_instr *spmd_mask_outside(spmd_visitor *v, hk_instr *x, int64_t d, hk_instr *first, int64_t lo,
                            int64_t hi, hk_instr *pv) {
  const hk_shape *is = hk_shape_with_elem(v->m, x->shape, HK_S32);
  hk_instr *iota = hk_instr_new(v->comp, HK_OP_IOTA, is, 0, NULL, NULL);
  hk_instr_set_dims(iota, 1, &d);
  hk_instr *ops[3] = {iota, hk_build_broadcast_scalar(v->comp, NULL, first, is), NULL};
  hk_instr *pos = hk_instr_new(v->comp, HK_OP_ADD, is, 2, ops, NULL);
  hk_instr *ok = NULL, *below = NULL;
  if (lo != INT64_MIN) {
    hk_instr *b = hk_build_broadcast_scalar(v->comp, NULL, spmd_constant_scalar(v, HK_S32, (double)lo), is);
    ok = compare_dir(v, pos, b, HK_CMP_GE);
  }
  if (hi != INT64_MAX) {
    hk_instr *b = hk_build_broadcast_scalar(v->comp, NULL, spmd_constant_scalar(v, HK_S32, (double)hi), is);
    below = compare_dir(v, pos, b, HK_CMP_LT);
  }
  if (ok && below) {
    ops[0] = ok;
    ops[1] = below;
    ok = hk_instr_new(v->comp, HK_OP_AND, ok->shape, 2, ops, NULL);
  } else if (!ok) {
    ok = below;
  }
  if (!ok) return x;
  if (pv->shape->elem != x->shape->elem)
    pv = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_with_elem(v->m, pv->shape, x->shape->elem), 1,
                      &pv, NULL);
  ops[0] = ok;
  ops[1] = x;
  ops[2] = hk_build_broadcast_scalar(v->comp, NULL, pv, x->shape);
  return hk_instr_new(v->comp, HK_OP_SELECT, x->shape, 3, ops, NULL);
}

/* A shard's window c with the positions outside the data set to pv, when
 * h asks for it. */
static hk_instr *mask_window(spmd_visitor *v, hk_instr *c, const hk_sharding *t, int64_t d,
                             const spmd_halo *h, hk_instr *pv) {
  if (!h->mask) return c;
  int64_t right_pad = h->padded_full - h->base_dim - h->explicit_left;
  if (h->explicit_left <= 0 && right_pad <= 0) return c;
  hk_instr *first = spmd_per_tile_scalar(v, t, d, h->offset_on_padded);
  return spmd_mask_outside(v, c, d, first, h->explicit_left > 0 ? h->explicit_left : INT64_MIN,
                           right_pad > 0 ? h->base_dim + h->explicit_left : INT64_MAX, pv);
}

/* ---- compact exchange (XLA's ExchangeHaloCompact) ----------------------------- */

/* A piece of one shard's window that another shard holds. */
typedef struct halo_transfer {
  int64_t src, dst;              /* ring shards */
  int64_t start, limit;          /* in the source's local shard */
  int64_t at;                    /* where it lands in the window */
  int64_t permute;               /* which collective-permute carries it */
} halo_transfer;

/* The pieces of every shard's window [s j - left[j], + w) held by other
 * shards; positions outside [0, base) are padding, not sent.  *n set. */
static halo_transfer *plan_transfers(const spmd_halo *h, int64_t s, int64_t *n) {
  int64_t cap = 8, nt = 0;
  halo_transfer *t = malloc(sizeof *t * (size_t)cap);
  if (!t) hk_out_of_memory();
  int64_t bound = h->base_dim < s * h->ring.n ? h->base_dim : s * h->ring.n;
  for (int64_t j = 0; j < h->ring.n; j++) {
    int64_t w0 = s * j - h->left[j], p = w0 > 0 ? w0 : 0, end = w0 + h->shard_with_halo;
    if (end > bound) end = bound;
    while (p < end) {
      int64_t src = p / s, lim = (src + 1) * s < end ? (src + 1) * s : end;
      if (src != j) {
        if (nt == cap) {
          cap *= 2;
          t = realloc(t, sizeof *t * (size_t)cap);
          if (!t) hk_out_of_memory();
        }
        t[nt++] = (halo_transfer){src, j, p - src * s, lim - src * s, p - w0, -1};
      }
      p = lim;
    }
  }
  *n = nt;
  return t;
}

/* Shares collective-permutes among transfers of the same piece of their
 * sources, each shard sending and receiving at most once in each. */
static int64_t assign_permutes(halo_transfer *t, int64_t n, int64_t shards) {
  bool *busy = malloc(sizeof(bool) * (size_t)(2 * shards));
  if (!busy) hk_out_of_memory();
  int64_t np = 0;
  for (int64_t a = 0; a < n; a++) {
    if (t[a].permute >= 0) continue;
    memset(busy, 0, sizeof(bool) * (size_t)(2 * shards));
    for (int64_t b = a; b < n; b++) {
      if (t[b].permute >= 0 || t[b].start != t[a].start || t[b].limit != t[a].limit ||
          busy[t[b].src] || busy[shards + t[b].dst])
        continue;
      t[b].permute = np;
      busy[t[b].src] = busy[shards + t[b].dst] = true;
    }
    np++;
  }
  free(busy);
  return np;
}

hk_instr *spmd_update_at_tiles(spmd_visitor *v, hk_instr *y, hk_instr *piece, const hk_sharding *t, int64_t d,
                               const int64_t *by_tile_offset) {
  int r = y->shape->rank;
  hk_instr *ops[HK_MAX_RANK + 2];
  ops[0] = y;
  ops[1] = piece;
  for (int i = 0; i < r; i++)
    ops[i + 2] = i == d ? spmd_per_tile_scalar(v, t, d, by_tile_offset) : spmd_constant_scalar(v, HK_S32, 0);
  return hk_instr_new(v->comp, HK_OP_DYNAMIC_UPDATE_SLICE, y->shape, r + 2, ops, NULL);
}

/* Each shard's window built exactly: a buffer of the pad value with a
 * margin of one shard on each side; the shard's own data written where
 * it falls (in the margin when it falls outside), then every piece from
 * another shard by the permute that carries it (non-receivers write into
 * the margin).  Only the needed pieces move, however far. */
static hk_instr *exchange_compact(spmd_visitor *v, hk_instr *x, const hk_sharding *t, int64_t d,
                                  const spmd_halo *h, hk_instr *pv) {
  int64_t s = x->shape->dims[d], w = h->shard_with_halo, kt = t->tile_dims[d], n = h->ring.n;
  int r = x->shape->rank;
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = i == d ? w + 2 * s : x->shape->dims[i];
  if (pv->shape->elem != x->shape->elem)
    pv = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_with_elem(v->m, pv->shape, x->shape->elem), 1, &pv, NULL);
  hk_instr *y = hk_build_broadcast_scalar(v->comp, NULL, pv, hk_shape_with_dims(v->m, x->shape, r, dims));
  int64_t *off = malloc(sizeof(int64_t) * (size_t)(kt + 2 * n));
  if (!off) hk_out_of_memory();
  int64_t *src = off + kt, *dst = src + n;
  for (int64_t k = 0; k < kt; k++) off[k] = w + s;
  bool own = false;
  for (int64_t j = 0; j < n; j++) {
    bool overlaps = h->left[j] < w && h->left[j] + s > 0 && s * j < h->base_dim;
    if (overlaps) off[ring_tile(&h->ring, j)] = s + h->left[j];
    own = own || overlaps;
  }
  if (own) y = spmd_update_at_tiles(v, y, x, t, d, off);
  int64_t nt;
  halo_transfer *tr = plan_transfers(h, s, &nt);
  int64_t np = assign_permutes(tr, nt, n);
  for (int64_t k = 0; k < np; k++) {
    int64_t m = 0, start = 0, limit = 0;
    for (int64_t q = 0; q < kt; q++) off[q] = w + s;
    for (int64_t a = 0; a < nt; a++) {
      if (tr[a].permute != k) continue;
      start = tr[a].start;
      limit = tr[a].limit;
      src[m] = ring_tile(&h->ring, tr[a].src);
      dst[m++] = ring_tile(&h->ring, tr[a].dst);
      off[ring_tile(&h->ring, tr[a].dst)] = s + tr[a].at;
    }
    hk_instr *cp = permute_tiles(v, piece_of(v, x, d, start, limit), t, d, m, src, dst);
    y = spmd_update_at_tiles(v, y, cp, t, d, off);
  }
  free(tr);
  free(off);
  return spmd_slice_dim(v, y, d, s, s + w);
}

/* XLA's choice: the compact exchange where the halos reach past two
 * windows (the neighbour exchange would send mostly padding); neither
 * when a window covers half the dim (a gather is as cheap). */
static bool compact_halos(const spmd_halo *h, int64_t s) {
  int64_t n = h->ring.n, w = h->shard_with_halo;
  /* The plan pairs pieces quadratically: bounded so that a window over
   * hundreds of shards of a thousand devices gathers instead. */
  if (n < 2 || 2 * w >= n * s || (w / s + 2) * n > 8192) return false;
  int64_t far = 0;
  for (int64_t j = 0; j < n; j++) {
    if (j > 0 && h->left[j] > far) far = h->left[j];
    if (j < n - 1 && h->right[j] > far) far = h->right[j];
  }
  return far > 2 * w || (far > s && 2 * far + s >= s * n);
}

hk_instr *spmd_exchange_halo_valid(spmd_visitor *v, hk_instr *x, const hk_sharding *t, int64_t d,
                                   const spmd_halo *h, hk_instr *pv) {
  int64_t n = h->ring.n;
  if (x->shape->dims[d] > 0 && compact_halos(h, x->shape->dims[d]))
    return mask_window(v, exchange_compact(v, x, t, d, h, pv), t, d, h, pv);
  hk_instr *c = exchange_halo(v, x, t, d, h);
  if (!c) return NULL;
  int64_t max_left = n > 1 ? max_in(h->left, 1, n) : 0;
  int64_t max_lp = max_left > h->explicit_left ? max_left : h->explicit_left;
  if (n < 1) return NULL;
  int64_t *start = calloc((size_t)n, sizeof(int64_t));
  if (!start) hk_out_of_memory();
  bool constant = true;
  for (int64_t j = 0; j < n; j++) {
    start[j] = max_lp - h->left[j];
    constant = constant && h->left[j] == h->left[0];
  }
  int64_t extra_left = max_lp - (max_left > 0 ? max_left : 0);
  if (extra_left < 0) extra_left = 0;
  int64_t extra_right = max_in(start, 0, n) + h->shard_with_halo - c->shape->dims[d] - extra_left;
  if (extra_right < 0) extra_right = 0;
  if (extra_left > 0 || extra_right > 0) c = spmd_pad_along(v, c, pv, d, extra_left, extra_right);
  if (h->shard_with_halo != c->shape->dims[d]) {
    if (constant && h->left[0] == h->explicit_left) {
      c = spmd_slice_dim(v, c, d, 0, h->shard_with_halo);
    } else {
      int64_t *tab = by_tile(t, d, &h->ring, start);
      c = spmd_dynamic_slice_dim(v, c, d, spmd_per_tile_scalar(v, t, d, tab), h->shard_with_halo);
      free(tab);
    }
  }
  free(start);
  return mask_window(v, c, t, d, h, pv);
}

/* ---- rotate right (XLA's HandleCustomCallSPMDInternal_RotateRight) ---------- */

/* x (shards of t along dim, the first n holding data) rotated right by
 * `amount` as if the padding of the last shard were data: each piece of
 * the result comes from the shard `distance` shards back. */
static hk_instr *rotate_with_padding(spmd_visitor *v, hk_instr *x, const hk_sharding *s, int64_t dim,
                                     int64_t amount, int64_t n) {
  int64_t t = x->shape->dims[dim], cur = 0;
  spmd_halo_ring ring = {n, -1, 0};
  hk_instr **pieces = malloc(sizeof(hk_instr *) * (size_t)(t + 1));
  if (!pieces) hk_out_of_memory();
  int np = 0;
  while (cur < t) {
    int64_t distance = spmd_ceil_div(amount - cur, t);
    int64_t offset = distance * t - amount + cur;
    int64_t size = t - offset < t - cur ? t - offset : t - cur;
    hk_instr *piece = piece_of(v, x, dim, offset, offset + size);
    pieces[np++] = distance ? shift_tiles_in(v, piece, s, dim, distance, true, &ring) : piece;
    cur += size;
  }
  hk_instr *c = concat_pieces(v, pieces, np, dim);
  free(pieces);
  return c;
}

/* The rotation of a dim sharded (maybe unevenly) by s: the padded
 * rotation, and where the padding got in the way a second rotation by
 * the padding more, merged by position. */
static hk_instr *rotate_sharded(spmd_visitor *v, hk_instr *x, const hk_sharding *s, int64_t dim,
                                int64_t amount, const hk_shape *gs) {
  int64_t full = gs->dims[dim], t = x->shape->dims[dim];
  int64_t n = spmd_ceil_div(full, t), right_pad = n * t - full;
  hk_instr *r0 = rotate_with_padding(v, x, s, dim, amount, n);
  if (!right_pad) return r0;
  hk_instr *r1 = rotate_with_padding(v, x, s, dim, (amount + right_pad) % (t * n), n);
  const hk_shape *is = hk_shape_with_elem(v->m, r0->shape, HK_S32);
  hk_instr *iota = hk_instr_new(v->comp, HK_OP_IOTA, is, 0, NULL, NULL);
  hk_instr_set_dims(iota, 1, &dim);
  hk_instr *ops[3] = {spmd_constant_scalar(v, HK_S32, (double)amount), spmd_tile_offset(v, s, gs, (int)dim)};
  hk_instr *bound = hk_instr_new(v->comp, HK_OP_SUBTRACT, ops[0]->shape, 2, ops, NULL);
  hk_instr *pred = compare_dir(v, iota, hk_build_broadcast_scalar(v->comp, NULL, bound, is), HK_CMP_LT);
  ops[0] = pred;
  ops[1] = r1;
  ops[2] = r0;
  return hk_instr_new(v->comp, HK_OP_SELECT, r0->shape, 3, ops, NULL);
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
  amount = n ? ((amount % n) + n) % n : 0;
  int64_t k = s->kind == HK_SHARDING_TILED ? hk_sharding_dim_partitions(s, (int)dim) : 1;
  hk_instr *x;
  HK_TRY(spmd_reshard(v, val, s, &x));
  if (!amount) {
    spmd_set(v, orig, x, s);
    return NULL;
  }
  spmd_set(v, orig, k == 1 ? rotate_local(v, x, dim, amount) : rotate_sharded(v, x, s, dim, amount, orig->shape), s);
  return NULL;
}

/* ---- nested tiles of uneven sizes (XLA's PadFromPartialReplicateShape) ------ */

hk_instr *spmd_align_nested(spmd_visitor *v, hk_instr *x, const hk_shape *gs,
                            const hk_sharding *from, const hk_sharding *to) {
  hk_instr *zero = NULL;
  for (int d = 0; d < gs->rank && x; d++) {
    int64_t f = hk_sharding_dim_partitions(from, d), t = hk_sharding_dim_partitions(to, d);
    if (f == 1 || t == f) continue;
    /* Source shard i holds [S i, S (i + 1)); the t / f target tiles cut
     * from it cover [D i, D (i + 1)): its left edge dropped, the right
     * one filled from the shards after it. */
    int64_t S = spmd_ceil_div(gs->dims[d], f), D = t / f * spmd_ceil_div(gs->dims[d], t);
    if (S == D) continue;
    if (!zero) zero = spmd_constant_scalar(v, (hk_prim)gs->elem, 0);
    int64_t *tab = malloc(sizeof(int64_t) * (size_t)(3 * f));
    if (!tab) hk_out_of_memory();
    for (int64_t i = 0; i < f; i++) {
      tab[i] = (S - D) * i;
      tab[f + i] = (D - S) * (i + 1);
      tab[2 * f + i] = D * i;
    }
    spmd_halo h = {.ring = {f, -1, 0}, .left = tab, .right = tab + f, .explicit_left = 0,
                   .padded_full = D * f, .base_dim = gs->dims[d], .shard_with_halo = D,
                   .offset_on_padded = tab + 2 * f, .mask = false};
    x = spmd_exchange_halo_valid(v, x, from, d, &h, zero);
    free(tab);
  }
  return x;
}
