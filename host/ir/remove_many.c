/* remove_many.c - hk_instrs_remove: many removals at once, in time linear in the removed instructions and their operands' user counts. */
#include <stdlib.h>

#include "intern.h"
#include "irpriv.h"

/* One (a, b) -> position map for the whole batch.  Keys:
 *   (instr, IN_BATCH)  the instruction is in the batch;
 *   (op, INDEXED)      op's users are indexed;
 *   (op, user)         user's position in op->users (-1 once dropped). */
#define IN_BATCH ((const void *)1)
#define INDEXED ((const void *)2)

typedef struct pair_slot {
  const void *a, *b;   /* a == NULL: empty */
  int64_t pos;
} pair_slot;

typedef struct pair_map {
  pair_slot *slots;
  size_t mask, n;
} pair_map;

static size_t pair_hash(const void *a, const void *b) {
  return (size_t)hk_hash_combine(hk_hash_combine((uint64_t)(uintptr_t)a, 0x9e37),
                                 (uint64_t)(uintptr_t)b);
}

static pair_slot *pair_find(const pair_map *m, const void *a, const void *b) {
  for (size_t h = pair_hash(a, b) & m->mask;; h = (h + 1) & m->mask) {
    pair_slot *s = &m->slots[h];
    if (!s->a || (s->a == a && s->b == b)) return s;
  }
}

static void pair_init(pair_map *m, size_t expect) {
  size_t cap = 64;
  while (cap < 2 * expect) cap *= 2;
  m->slots = calloc(cap, sizeof *m->slots);
  if (!m->slots) abort();
  m->mask = cap - 1;
  m->n = 0;
}

static void pair_put(pair_map *m, const void *a, const void *b, int64_t pos);

static void pair_grow(pair_map *m) {
  pair_map bigger;
  pair_init(&bigger, 2 * (m->mask + 1));
  for (size_t k = 0; k <= m->mask; k++)
    if (m->slots[k].a) pair_put(&bigger, m->slots[k].a, m->slots[k].b, m->slots[k].pos);
  free(m->slots);
  *m = bigger;
}

static void pair_put(pair_map *m, const void *a, const void *b, int64_t pos) {
  if (2 * (m->n + 1) > m->mask + 1) pair_grow(m);
  pair_slot *s = pair_find(m, a, b);
  if (!s->a) {
    s->a = a;
    s->b = b;
    m->n++;
  }
  s->pos = pos;
}

static bool pair_has(const pair_map *m, const void *a, const void *b) {
  return pair_find(m, a, b)->a != NULL;
}

/* Whether removing v[0..n) one after another would succeed; records the
 * batch members in m. */
static hk_status *check_batch(pair_map *m, hk_instr *const *v, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = v[k];
    hk_computation *c = i->parent;
    if (!c)
      return hk_error(HK_FAILED_PRECONDITION, "instruction %s is not in a computation", i->name);
    if (pair_has(m, i, IN_BATCH))
      return hk_error(HK_FAILED_PRECONDITION, "instruction %s is listed twice", i->name);
    if (c->root == i)
      return hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it is the root of %s", i->name,
                      c->name);
    for (int32_t u = 0; u < i->n_users; u++)
      if (!pair_has(m, i->users[u], IN_BATCH))
        return hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it still has %d user(s)",
                        i->name, i->n_users);
    pair_put(m, i, IN_BATCH, 0);
  }
  return NULL;
}

static void index_users(pair_map *m, const hk_instr *op) {
  if (pair_has(m, op, INDEXED)) return;
  pair_put(m, op, INDEXED, 0);
  for (int32_t u = 0; u < op->n_users; u++) pair_put(m, op, op->users[u], u);
}

/* Drops user from op->users as hk_instr_remove does (the last user takes
 * its slot), in O(1) through the index; a repeated operand is dropped once. */
static void drop_user(pair_map *m, hk_instr *op, const hk_instr *user) {
  index_users(m, op);
  pair_slot *s = pair_find(m, op, user);
  if (!s->a || s->pos < 0) return;
  int64_t pos = s->pos;
  s->pos = -1;
  hk_instr *last = op->users[--op->n_users];
  if (last != user) {
    op->users[pos] = last;
    pair_find(m, op, last)->pos = pos;
  }
}

hk_status *hk_instrs_remove(hk_instr *const *v, int64_t n) {
  if (n <= 0) return NULL;
  if (n == 1) return hk_instr_remove(v[0]);
  pair_map m;
  pair_init(&m, (size_t)n + 64);   /* grows with the indexed user lists */
  hk_status *st = check_batch(&m, v, n);
  if (st) {
    free(m.slots);
    return st;
  }
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = v[k];
    for (int32_t j = 0; j < i->n_operands; j++) {
      hk_instr *op = i->operands[j];
      if (!pair_has(&m, op, IN_BATCH)) drop_user(&m, op, i);
    }
  }
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = v[k];
    i->n_users = 0;   /* its users were all removed with it */
    hk_instr_detach(i);
  }
  free(m.slots);
  return NULL;
}
