/* intern.c - interning shardings per module (hash-consed), constructors, import, and the device -> tile inverse map. */
#include <stdlib.h>
#include <string.h>

#include "ir/intern.h"
#include "ir/irpriv.h"
#include "sharding/sharding_impl.h"

/* ---- hashing and equality over every field ------------------------------ */

static uint64_t hash_i64s(uint64_t h, int n, const int64_t *v) {
  h = hk_hash_combine(h, (uint64_t)n);
  return n ? hk_hash_combine(h, hk_hash_bytes(v, sizeof(int64_t) * (size_t)n, 0x2545f491u)) : h;
}

static uint64_t sharding_hash(const hk_sharding *s) {
  uint64_t h = hk_hash_combine(0xcbf29ce484222325ull, s->kind);
  h = hk_hash_combine(h, s->replicate_on_last_tile_dim);
  h = hk_hash_combine(h, s->shard_group_kind);
  h = hk_hash_combine(h, (uint64_t)s->shard_group_id);
  h = hk_hash_combine(h, (uint64_t)s->device);
  h = hash_i64s(h, s->n_tile_dims, s->tile_dims);
  if (s->kind == HK_SHARDING_TILED) h = hash_i64s(h, (int)hk_shard_num_devices(s), s->devices);
  h = hk_hash_combine(h, s->iota != NULL);
  if (s->iota) {
    h = hash_i64s(h, s->iota->n_reshape_dims, s->iota->reshape_dims);
    h = hk_hash_combine(h, hk_hash_bytes(s->iota->perm, sizeof(int32_t) * (size_t)s->iota->n_reshape_dims, 7));
  }
  h = hk_hash_combine(h, (uint64_t)s->n_subgroups);
  if (s->n_subgroups) h = hk_hash_combine(h, hk_hash_bytes(s->subgroups, (size_t)s->n_subgroups, 3));
  h = hk_hash_combine(h, (uint64_t)s->n_elems);
  for (int i = 0; i < s->n_elems; i++) h = hk_hash_combine(h, (uint64_t)(uintptr_t)s->elems[i]);
  h = hk_hash_combine(h, (uint64_t)s->n_metadata);
  for (int i = 0; i < s->n_metadata; i++) h = hk_metadata_hash(&s->metadata[i], h);
  return h;
}

static bool i64s_eq(int n, const int64_t *a, const int64_t *b) {
  return n == 0 || memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

static bool iota_eq(const hk_iota *a, const hk_iota *b) {
  if (!a || !b) return a == b;
  return a->n_reshape_dims == b->n_reshape_dims &&
         i64s_eq(a->n_reshape_dims, a->reshape_dims, b->reshape_dims) &&
         memcmp(a->perm, b->perm, sizeof(int32_t) * (size_t)a->n_reshape_dims) == 0;
}

bool hk_sharding_struct_equal(const hk_sharding *a, const hk_sharding *b) {
  if (a == b) return true;
  if (a->kind != b->kind || a->replicate_on_last_tile_dim != b->replicate_on_last_tile_dim ||
      a->shard_group_kind != b->shard_group_kind || a->shard_group_id != b->shard_group_id ||
      a->device != b->device || a->n_tile_dims != b->n_tile_dims ||
      a->n_subgroups != b->n_subgroups || a->n_elems != b->n_elems ||
      a->n_metadata != b->n_metadata)
    return false;
  if (!i64s_eq(a->n_tile_dims, a->tile_dims, b->tile_dims)) return false;
  if (a->kind == HK_SHARDING_TILED &&
      !i64s_eq((int)hk_shard_num_devices(a), a->devices, b->devices))
    return false;
  if (!iota_eq(a->iota, b->iota)) return false;
  if (a->n_subgroups && memcmp(a->subgroups, b->subgroups, (size_t)a->n_subgroups) != 0) return false;
  for (int i = 0; i < a->n_elems; i++)
    if (a->elems[i] != b->elems[i]) return false;
  for (int i = 0; i < a->n_metadata; i++)
    if (!hk_metadata_equal(&a->metadata[i], &b->metadata[i])) return false;
  return true;
}

/* The table also holds parse.c's text-cache entries (first byte 0xff). */
static bool stored_eq(const void *stored, const void *key) {
  if (*(const uint8_t *)stored == 0xff) return false;
  return hk_sharding_struct_equal((const hk_sharding *)stored, (const hk_sharding *)key);
}

/* ---- copying into the arena ------------------------------------------- */

static void *dup_n(hk_module *m, const void *p, size_t n) {
  return n ? hk_memdup(m, p, n) : NULL;
}

static const hk_iota *copy_iota(hk_module *m, const hk_iota *src, const int64_t *dims) {
  hk_iota *io = hk_alloc(m, sizeof *io);
  io->n_dims = src->n_dims;
  io->dims = dims;
  io->n_reshape_dims = src->n_reshape_dims;
  io->reshape_dims = dup_n(m, src->reshape_dims, sizeof(int64_t) * (size_t)src->n_reshape_dims);
  io->perm = dup_n(m, src->perm, sizeof(int32_t) * (size_t)src->n_reshape_dims);
  return io;
}

static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Builds the device -> flat position map: dense when ids are compact. */
static void build_inverse(hk_module *m, hk_sharding_impl *p) {
  int64_t n = hk_shard_num_devices(&p->pub);
  const int64_t *d = p->pub.devices;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int64_t i = 0; i < n; i++) {
    if (d[i] < lo) lo = d[i];
    if (d[i] > hi) hi = d[i];
  }
  if (n == 0) return;
  if (lo >= 0 && hi < 4 * n + 64 && n < INT32_MAX) {
    int32_t *t = hk_alloc(m, sizeof(int32_t) * (size_t)(hi + 1));
    memset(t, 0xff, sizeof(int32_t) * (size_t)(hi + 1));
    for (int64_t i = n - 1; i >= 0; i--) t[d[i]] = (int32_t)i;
    p->inv_dense = t;
    p->inv_n = hi + 1;
    return;
  }
  int64_t *pairs = hk_alloc(m, sizeof(int64_t) * 2 * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    pairs[2 * i] = d[i];
    pairs[2 * i + 1] = i;
  }
  qsort(pairs, (size_t)n, 2 * sizeof(int64_t), cmp_pair);
  p->inv_pairs = pairs;
}

/* Data rank, tile count and replication factor of a tiled sharding. */
static void fill_tiled_facts(hk_sharding_impl *p) {
  const hk_sharding *s = &p->pub;
  p->data_rank = hk_shard_data_rank(s);
  p->num_tiles = hk_shard_product(p->data_rank < 0 ? 0 : p->data_rank, s->tile_dims);
  p->replication = 1;
  if (s->replicate_on_last_tile_dim) p->replication = s->tile_dims[s->n_tile_dims - 1];
  int first_sub = s->n_tile_dims - s->n_subgroups;
  for (int i = 0; i < s->n_subgroups; i++)
    if (s->subgroups[i] == HK_SUBGROUP_REPLICATED) p->replication *= s->tile_dims[first_sub + i];
}

static const void *copy_into(hk_module *m, const void *key) {
  const hk_sharding *t = key;
  hk_sharding_impl *p = hk_alloc(m, sizeof *p);
  hk_sharding *s = &p->pub;
  *s = *t;
  s->tile_dims = dup_n(m, t->tile_dims, sizeof(int64_t) * (size_t)t->n_tile_dims);
  if (t->kind == HK_SHARDING_TILED)
    s->devices = dup_n(m, t->devices, sizeof(int64_t) * (size_t)hk_shard_num_devices(t));
  else
    s->devices = NULL;
  s->iota = t->iota ? copy_iota(m, t->iota, s->tile_dims) : NULL;
  s->subgroups = dup_n(m, t->subgroups, (size_t)t->n_subgroups);
  s->elems = dup_n(m, t->elems, sizeof(*t->elems) * (size_t)t->n_elems);
  if (t->n_metadata) {
    hk_metadata *md = hk_alloc(m, sizeof(hk_metadata) * (size_t)t->n_metadata);
    memcpy(md, t->metadata, sizeof(hk_metadata) * (size_t)t->n_metadata);  /* strings pre-interned */
    s->metadata = md;
  }
  p->hash = sharding_hash(t);
  if (s->kind == HK_SHARDING_TILED) {
    fill_tiled_facts(p);
    build_inverse(m, p);
  }
  return p;
}

/* ---- preparing a template -------------------------------------------- */

/* Scratch owned by one intern call. */
typedef struct prep {
  hk_sharding t;
  hk_iota iota;
  int64_t rdims[HK_MAX_RANK];
  int32_t perm[HK_MAX_RANK];
  int64_t *devices;              /* malloc'ed expansion, or NULL */
  const hk_sharding **elems;     /* malloc'ed interned elements, or NULL */
  hk_metadata *metadata;         /* malloc'ed copies with interned strings */
} prep;

static void prep_free(prep *p) {
  free(p->devices);
  free(p->elems);
  free(p->metadata);
}

/* Canonical iota reshape dims and an expanded device list. */
static void prep_tiled(prep *p) {
  hk_sharding *t = &p->t;
  int64_t n = hk_shard_num_devices(t);
  const hk_iota *src = t->iota;
  if (!src && t->devices) return;
  int32_t nr = 1;
  if (src) {
    nr = src->n_reshape_dims;
    memcpy(p->rdims, src->reshape_dims, sizeof(int64_t) * (size_t)nr);
    memcpy(p->perm, src->perm, sizeof(int32_t) * (size_t)nr);
  } else {
    p->rdims[0] = n;
    p->perm[0] = 0;
  }
  hk_iota_canonicalize_dims(&nr, p->rdims, p->perm);
  p->iota = (hk_iota){t->n_tile_dims, t->tile_dims, nr, p->rdims, p->perm};
  t->iota = &p->iota;
  p->devices = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  hk_iota_expand_raw(nr, p->rdims, p->perm, p->devices);
  t->devices = p->devices;
}

static void prep_metadata(prep *p, hk_module *m) {
  hk_sharding *t = &p->t;
  if (!t->n_metadata) {
    t->metadata = NULL;
    return;
  }
  p->metadata = malloc(sizeof(hk_metadata) * (size_t)t->n_metadata);
  for (int i = 0; i < t->n_metadata; i++) hk_metadata_copy_into(m, &p->metadata[i], &t->metadata[i]);
  t->metadata = p->metadata;
}

static void prep_tuple(prep *p, hk_module *m, int depth) {
  hk_sharding *t = &p->t;
  if (!t->n_elems) return;
  p->elems = malloc(sizeof(*p->elems) * (size_t)t->n_elems);
  for (int i = 0; i < t->n_elems; i++) p->elems[i] = hk_sharding_intern_depth(m, t->elems[i], depth);
  t->elems = p->elems;
}

/* Clears the fields a kind does not use so equal shardings hash alike. */
static void prep_clear_unused(hk_sharding *t) {
  if (t->kind != HK_SHARDING_TILED) {
    t->n_tile_dims = 0;
    t->tile_dims = NULL;
    t->devices = NULL;
    t->iota = NULL;
    t->n_subgroups = 0;
    t->subgroups = NULL;
    t->replicate_on_last_tile_dim = false;
  }
  if (t->kind != HK_SHARDING_MAXIMAL) t->device = 0;
  if (t->kind != HK_SHARDING_TUPLE) {
    t->n_elems = 0;
    t->elems = NULL;
  } else {
    t->n_metadata = 0;
  }
  if (t->shard_group_kind == HK_SHARD_GROUP_NONE) t->shard_group_id = 0;
}

/* Prints a freshly interned sharding once into the arena. */
static void set_text(hk_module *m, hk_sharding_impl *p) {
  hk_buf b;
  hk_buf_init(&b);
  hk_sharding_format(&p->pub, &b);
  char *t = hk_alloc(m, b.len + 1);
  memcpy(t, b.data, b.len);
  t[b.len] = 0;
  p->text_len = b.len;
  p->text = t;
  hk_buf_free(&b);
}

/* Computes and records the semantic form of a freshly interned sharding. */
static void set_semantic(hk_module *m, hk_sharding_impl *p, int depth) {
  const hk_sharding *s = &p->pub;
  if (depth > 3) {
    p->sem = p;
    return;
  }
  hk_sharding t;
  void *scratch = NULL;
  const hk_sharding **elems = NULL;
  if (s->kind == HK_SHARDING_TUPLE) {
    t = *s;
    elems = malloc(sizeof(*elems) * (size_t)(s->n_elems ? s->n_elems : 1));
    for (int i = 0; i < s->n_elems; i++) elems[i] = &hk_shard_impl(s->elems[i])->sem->pub;
    t.elems = elems;
  } else {
    hk_sharding_semantic_template(s, &t, &scratch);
  }
  if (hk_sharding_struct_equal(&t, s))
    p->sem = p;
  else
    p->sem = hk_shard_impl(hk_sharding_intern_depth(m, &t, depth + 1));
  free(elems);
  free(scratch);
}

const hk_sharding *hk_sharding_intern_depth(hk_module *m, const hk_sharding *tmpl, int depth) {
  prep p;
  memset(&p, 0, sizeof p);
  p.t = *tmpl;
  prep_clear_unused(&p.t);
  if (p.t.kind == HK_SHARDING_TILED) prep_tiled(&p);
  if (p.t.kind == HK_SHARDING_TUPLE) prep_tuple(&p, m, depth);
  prep_metadata(&p, m);
  uint64_t h = sharding_hash(&p.t);
  hk_sharding_impl *r = (hk_sharding_impl *)hk_hashcons(m, HK_HC_SHARDING, h, &p.t, stored_eq, copy_into);
  prep_free(&p);
  if (!r->text) set_text(m, r);
  if (!r->sem) set_semantic(m, r, depth);
  return &r->pub;
}

/* Tile assignments beyond HK_MAX_RANK dims cannot be represented. */
static bool template_too_big(const hk_sharding *t) {
  if (t->kind != HK_SHARDING_TILED) return false;
  if (t->n_tile_dims < 1 || t->n_tile_dims >= HK_MAX_RANK) return true;
  if (t->n_subgroups < 0 || t->n_subgroups + (t->replicate_on_last_tile_dim ? 1 : 0) > t->n_tile_dims) return true;
  return t->iota && (t->iota->n_reshape_dims < 1 || t->iota->n_reshape_dims > HK_MAX_RANK);
}

const hk_sharding *hk_sharding_intern(hk_module *m, const hk_sharding *tmpl) {
  if (template_too_big(tmpl)) return NULL;
  return hk_sharding_intern_depth(m, tmpl, 0);
}

const hk_sharding *hk_sharding_import(hk_module *m, const hk_sharding *s) {
  return hk_sharding_intern(m, s);
}

/* ---- constructors ----------------------------------------------------- */

static const hk_sharding *simple_kind(hk_module *m, hk_sharding_kind kind) {
  hk_sharding t;
  memset(&t, 0, sizeof t);
  t.kind = (uint8_t)kind;
  return hk_sharding_intern(m, &t);
}

/* Interned shardings live as long as the module: the answer is kept. */
const hk_sharding *hk_sharding_replicated(hk_module *m) {
  if (!m->impl->replicated) m->impl->replicated = simple_kind(m, HK_SHARDING_REPLICATED);
  return m->impl->replicated;
}
const hk_sharding *hk_sharding_manual(hk_module *m) { return simple_kind(m, HK_SHARDING_MANUAL); }

const hk_sharding *hk_sharding_maximal(hk_module *m, int64_t device) {
  hk_sharding t;
  memset(&t, 0, sizeof t);
  t.kind = HK_SHARDING_MAXIMAL;
  t.device = device;
  return hk_sharding_intern(m, &t);
}

const hk_sharding *hk_sharding_tiled(hk_module *m, int n_tile_dims, const int64_t *tile_dims,
                                     const int64_t *devices, bool last_tile_dim_replicate) {
  hk_sharding t;
  memset(&t, 0, sizeof t);
  t.kind = HK_SHARDING_TILED;
  t.n_tile_dims = n_tile_dims;
  t.tile_dims = tile_dims;
  t.devices = devices;
  t.replicate_on_last_tile_dim = last_tile_dim_replicate;
  return hk_sharding_intern(m, &t);
}

const hk_sharding *hk_sharding_tiled_iota(hk_module *m, int n_tile_dims, const int64_t *tile_dims,
                                          bool last_tile_dim_replicate) {
  return hk_sharding_tiled(m, n_tile_dims, tile_dims, NULL, last_tile_dim_replicate);
}

const hk_sharding *hk_sharding_tuple(hk_module *m, int n, const hk_sharding *const *elems) {
  hk_sharding t;
  memset(&t, 0, sizeof t);
  t.kind = HK_SHARDING_TUPLE;
  t.n_elems = n;
  t.elems = elems;
  return hk_sharding_intern(m, &t);
}

/* A copy of s with one field group changed, elementwise for tuples. */
static const hk_sharding *rebuild(hk_module *m, const hk_sharding *s, bool drop_metadata,
                                  bool drop_group) {
  hk_sharding t = *s;
  if (drop_metadata) {
    t.n_metadata = 0;
    t.metadata = NULL;
  }
  if (drop_group) {
    t.shard_group_kind = HK_SHARD_GROUP_NONE;
    t.shard_group_id = 0;
  }
  const hk_sharding **elems = NULL;
  if (s->kind == HK_SHARDING_TUPLE && s->n_elems) {
    elems = malloc(sizeof(*elems) * (size_t)s->n_elems);
    for (int i = 0; i < s->n_elems; i++) elems[i] = rebuild(m, s->elems[i], drop_metadata, drop_group);
    t.elems = elems;
  }
  const hk_sharding *r = hk_sharding_intern(m, &t);
  free(elems);
  return r;
}

const hk_sharding *hk_sharding_without_metadata(hk_module *m, const hk_sharding *s) {
  return rebuild(m, s, true, false);
}

const hk_sharding *hk_sharding_without_shard_group(hk_module *m, const hk_sharding *s) {
  return rebuild(m, s, false, true);
}

const hk_sharding *hk_sharding_semantic(const hk_sharding *s) {
  return &hk_shard_impl(s)->sem->pub;
}

int64_t hk_sharding_device_position(const hk_sharding *s, int64_t device) {
  if (s->kind != HK_SHARDING_TILED) return -1;
  const hk_sharding_impl *p = hk_shard_impl(s);
  if (p->inv_dense) return device >= 0 && device < p->inv_n ? p->inv_dense[device] : -1;
  if (!p->inv_pairs) return -1;
  int64_t lo = 0, hi = hk_shard_num_devices(s);
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (p->inv_pairs[2 * mid] < device) lo = mid + 1;
    else hi = mid;
  }
  int64_t n = hk_shard_num_devices(s);
  return lo < n && p->inv_pairs[2 * lo] == device ? p->inv_pairs[2 * lo + 1] : -1;
}
