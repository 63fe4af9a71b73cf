/* memo.c - per-run memo of sharding algebra: interned shardings are keyed by pointer, so each distinct (op, sharding, args) is computed once, not once per instruction at a cost that grows with the device count. */
#include "spmd_internal.h"

enum { MEMO_MAX_ARGS = 48 };

typedef enum memo_op {
  MEMO_CANONICAL = 1,
  MEMO_VALIDATED,
  MEMO_REPLICATE_DIMS,
  MEMO_REMOVE_DIMS,
  MEMO_INSERT_DIMS,
  MEMO_REGROUP,
  MEMO_GROUPS,
  MEMO_LOCAL_SHAPE,
  MEMO_FIRST_CALLER = 64,          /* spmd_memo_find/put kinds start here */
} memo_op;

struct spmd_memo_slot {
  int32_t op, n;                   /* op 0: empty */
  const void *a, *b;
  int64_t args[MEMO_MAX_ARGS];
  const void *value;
};

static uint64_t memo_hash(int32_t op, const void *a, const void *b, int32_t n,
                          const int64_t *args) {
  uint64_t h = (uint64_t)op * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)a;
  h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull ^ (uint64_t)(uintptr_t)b;
  for (int32_t k = 0; k < n; k++) h = (h ^ (h >> 31)) * 0x94D049BB133111EBull ^ (uint64_t)args[k];
  return h ^ (h >> 32);
}

/* A loop, not memcmp: n is 0 to 3 almost always, and the library call
 * costs more than the compare (measured in the sharding walk). */
static bool same_args(const int64_t *x, const int64_t *y, int32_t n) {
  for (int32_t k = 0; k < n; k++)
    if (x[k] != y[k]) return false;
  return true;
}

static struct spmd_memo_slot *memo_slot(const spmd_memo *t, int32_t op, const void *a,
                                        const void *b, int32_t n, const int64_t *args) {
  for (size_t h = memo_hash(op, a, b, n, args) & t->mask;; h = (h + 1) & t->mask) {
    struct spmd_memo_slot *s = &t->slots[h];
    if (!s->op) return s;
    if (s->op == op && s->a == a && s->b == b && s->n == n && same_args(s->args, args, n))
      return s;
  }
}

static void memo_grow(spmd_memo *t) {
  size_t cap = t->slots ? 2 * (t->mask + 1) : 64;
  spmd_memo bigger = {calloc(cap, sizeof(struct spmd_memo_slot)), cap - 1, 0};
  if (!bigger.slots) hk_out_of_memory();
  for (size_t k = 0; t->slots && k <= t->mask; k++) {
    struct spmd_memo_slot *s = &t->slots[k];
    if (s->op) *memo_slot(&bigger, s->op, s->a, s->b, s->n, s->args) = *s;
  }
  bigger.n = t->n;
  free(t->slots);
  *t = bigger;
}

/* The remembered value: true and *value set if (op, a, b, args) is known. */
static bool memo_find(const spmd_memo *t, int32_t op, const void *a, const void *b, int32_t n,
                      const int64_t *args, const void **value) {
  if (!t->slots || n > MEMO_MAX_ARGS) return false;
  struct spmd_memo_slot *s = memo_slot(t, op, a, b, n, args);
  if (!s->op) return false;
  *value = s->value;
  return true;
}

static void memo_put(spmd_memo *t, int32_t op, const void *a, const void *b, int32_t n,
                     const int64_t *args, const void *value) {
  if (n > MEMO_MAX_ARGS) return;
  if (!t->slots || 2 * (t->n + 1) > t->mask + 1) memo_grow(t);
  struct spmd_memo_slot *s = memo_slot(t, op, a, b, n, args);
  if (!s->op) t->n++;
  s->op = op;
  s->n = n;
  s->a = a;
  s->b = b;
  if (n) memcpy(s->args, args, sizeof(int64_t) * (size_t)n);
  s->value = value;
}

void spmd_memo_clear(spmd_memo *t) {
  free(t->slots);
  t->slots = NULL;
  t->mask = 0;
  t->n = 0;
}

bool spmd_memo_find(spmd_visitor *v, int kind, const void *a, const void *b, int32_t n,
                    const int64_t *args, const void **value) {
  return memo_find(&v->p->memo, MEMO_FIRST_CALLER + kind, a, b, n, args, value);
}

void spmd_memo_put(spmd_visitor *v, int kind, const void *a, const void *b, int32_t n,
                   const int64_t *args, const void *value) {
  memo_put(&v->p->memo, MEMO_FIRST_CALLER + kind, a, b, n, args, value);
}

/* ---- memoized sharding algebra ----------------------------------------------- */

const hk_shape *spmd_local_shape(spmd_visitor *v, const hk_sharding *s, const hk_shape *global) {
  if (!s) return global;
  const void *r;
  if (memo_find(&v->p->memo, MEMO_LOCAL_SHAPE, s, global, 0, NULL, &r)) return r;
  const hk_shape *t = hk_sharding_tile_shape(v->m, s, global);
  if (!t) t = global;
  memo_put(&v->p->memo, MEMO_LOCAL_SHAPE, s, global, 0, NULL, t);
  return t;
}

const hk_sharding *spmd_canonical(spmd_partitioner *p, hk_module *m, const hk_sharding *s) {
  const void *r;
  if (memo_find(&p->memo, MEMO_CANONICAL, s, NULL, 0, NULL, &r)) return r;
  const hk_sharding *c = hk_sharding_canonical(m, s);
  memo_put(&p->memo, MEMO_CANONICAL, s, NULL, 0, NULL, c);
  return c;
}

hk_status *spmd_validate_sharding(spmd_partitioner *p, const hk_sharding *s, const hk_shape *shape) {
  const void *r;
  int64_t np = p->num_partitions;
  if (memo_find(&p->memo, MEMO_VALIDATED, s, shape, 1, &np, &r)) return NULL;
  hk_status *st = hk_sharding_validate(s, shape, np);
  if (!st) memo_put(&p->memo, MEMO_VALIDATED, s, shape, 1, &np, s);   /* only successes */
  return st;
}

typedef const hk_sharding *(*dims_op)(hk_module *m, const hk_sharding *s, int n,
                                      const int64_t *dims);

static const hk_sharding *memo_dims_op(spmd_visitor *v, memo_op op, dims_op fn,
                                       const hk_sharding *s, int n, const int64_t *dims) {
  const void *r;
  if (memo_find(&v->p->memo, op, s, NULL, n, dims, &r)) return r;
  const hk_sharding *out = fn(v->m, s, n, dims);
  memo_put(&v->p->memo, op, s, NULL, n, dims, out);
  return out;
}

const hk_sharding *spmd_replicate_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                       const int64_t *dims) {
  return memo_dims_op(v, MEMO_REPLICATE_DIMS, hk_sharding_replicate_dims, s, n, dims);
}

const hk_sharding *spmd_remove_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                    const int64_t *dims) {
  return memo_dims_op(v, MEMO_REMOVE_DIMS, hk_sharding_remove_dims, s, n, dims);
}

const hk_sharding *spmd_insert_dims(spmd_visitor *v, const hk_sharding *s, int n,
                                    const int64_t *at) {
  return memo_dims_op(v, MEMO_INSERT_DIMS, hk_sharding_insert_dims, s, n, at);
}

/* The key of a regroup: n_new, last_repl, the group sizes, the groups. */
static int32_t regroup_key(int n_new, const int *sizes, const int *const *groups,
                           bool last_repl, int64_t *key) {
  int32_t n = 0;
  key[n++] = n_new;
  key[n++] = last_repl;
  for (int j = 0; j < n_new; j++) {
    if (n + 1 + sizes[j] > MEMO_MAX_ARGS) return MEMO_MAX_ARGS + 1;
    key[n++] = sizes[j];
    for (int t = 0; t < sizes[j]; t++) key[n++] = groups[j][t];
  }
  return n;
}

const hk_sharding *spmd_regroup_memo(spmd_visitor *v, const hk_sharding *s, int n_new,
                                     const int *group_sizes, const int *const *groups,
                                     bool last_repl) {
  int64_t key[MEMO_MAX_ARGS + 2];
  int32_t n = regroup_key(n_new, group_sizes, groups, last_repl, key);
  const void *r;
  if (memo_find(&v->p->memo, MEMO_REGROUP, s, NULL, n, key, &r)) return r;
  const hk_sharding *out = spmd_regroup(v->m, s, n_new, group_sizes, groups, last_repl);
  memo_put(&v->p->memo, MEMO_REGROUP, s, NULL, n, key, out);
  return out;
}

/* hk_sharding_device_groups of s over dims, kept in the module's arena as
 * {group_size, ids...}; NULL when s is not tiled. */
const int64_t *spmd_device_groups(spmd_visitor *v, const hk_sharding *s, int n,
                                  const int64_t *dims) {
  const void *r;
  if (memo_find(&v->p->memo, MEMO_GROUPS, s, NULL, n, dims, &r)) return r;
  int64_t total = 1;
  for (int i = 0; i < s->n_tile_dims; i++) total *= s->tile_dims[i];
  int64_t *out = hk_alloc(v->m, sizeof(int64_t) * (size_t)(total + 1));
  out[0] = hk_sharding_device_groups(s, n, dims, out + 1);
  memo_put(&v->p->memo, MEMO_GROUPS, s, NULL, n, dims, out[0] > 0 ? out : NULL);
  return out[0] > 0 ? out : NULL;
}
