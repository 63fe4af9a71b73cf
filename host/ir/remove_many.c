/* remove_many.c - hk_instrs_remove: many removals at once, in time linear in the removed instructions and their operands' user counts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "irpriv.h"

/* Batch membership is a mark bit on the instructions.  An operand with a
 * short user list drops a removed user by searching that list, as
 * hk_instr_remove does.  Drops from long lists (a constant shared by a
 * million users) are gathered per operand, in batch order, and replayed
 * through a table of positions keyed by user pointer, so each costs O(1)
 * and reads none of the users' structs (cold, and as many as the list is
 * long): the final lists are exactly those of one removal at a time, since
 * an operand's list depends only on the order of its own drops. */
#define SHORT_USER_LIST 32

/* One operand with a long user list, and where its drops go. */
typedef struct long_op {
  hk_instr *op;
  int64_t n_drops, start;
} long_op;

typedef struct drop {
  int64_t group;        /* index into long_ops.v */
  const hk_instr *user;
} drop;

typedef struct long_ops {
  long_op *v;
  size_t n, cap;
  int64_t *slots;       /* op -> index + 1, open addressing */
  size_t mask;
  drop *drops;
  size_t n_drops, cap_drops;
} long_ops;

static size_t op_slot(const long_ops *t, const hk_instr *op) {
  size_t h = (size_t)hk_hash_combine((uint64_t)(uintptr_t)op, 0x51ed) & t->mask;
  while (t->slots[h] && t->v[t->slots[h] - 1].op != op) h = (h + 1) & t->mask;
  return h;
}

static void slots_grow(long_ops *t) {
  size_t cap = t->slots ? 2 * (t->mask + 1) : 64;
  free(t->slots);
  t->slots = calloc(cap, sizeof *t->slots);
  if (!t->slots) hk_out_of_memory();
  t->mask = cap - 1;
  for (size_t k = 0; k < t->n; k++) t->slots[op_slot(t, t->v[k].op)] = (int64_t)k + 1;
}

static int64_t group_of(long_ops *t, hk_instr *op) {
  if (op->flags & HK_IFLAG_LONG_USERS) return t->slots[op_slot(t, op)] - 1;
  if (2 * (t->n + 1) > (t->slots ? t->mask + 1 : 0)) slots_grow(t);
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 16;
    t->v = realloc(t->v, t->cap * sizeof *t->v);
    if (!t->v) hk_out_of_memory();
  }
  t->v[t->n] = (long_op){op, 0, 0};
  t->slots[op_slot(t, op)] = (int64_t)t->n + 1;
  op->flags |= HK_IFLAG_LONG_USERS;
  return (int64_t)t->n++;
}

static void add_drop(long_ops *t, hk_instr *op, const hk_instr *user) {
  int64_t g = group_of(t, op);
  if (t->n_drops == t->cap_drops) {
    t->cap_drops = t->cap_drops ? 2 * t->cap_drops : 256;
    t->drops = realloc(t->drops, t->cap_drops * sizeof *t->drops);
    if (!t->drops) hk_out_of_memory();
  }
  t->drops[t->n_drops++] = (drop){g, user};
  t->v[g].n_drops++;
}

static bool in_batch(const hk_instr *i) { return i->flags & HK_IFLAG_MARK; }

static void unmark(hk_instr *const *v, int64_t n) {
  for (int64_t k = 0; k < n; k++) v[k]->flags &= (uint16_t)~HK_IFLAG_MARK;
}

/* Whether removing v[0..n) one after another would succeed; marks the
 * batch members (and unmarks them again on failure). */
static hk_status *check_batch(hk_instr *const *v, int64_t n) {
  hk_status *st = NULL;
  int64_t k = 0;
  for (; k < n && !st; k++) {
    hk_instr *i = v[k];
    hk_computation *c = i->parent;
    if (!c)
      st = hk_error(HK_FAILED_PRECONDITION, "instruction %s is not in a computation", i->name);
    else if (in_batch(i))
      st = hk_error(HK_FAILED_PRECONDITION, "instruction %s is listed twice", i->name);
    else if (c->root == i)
      st = hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it is the root of %s", i->name,
                    c->name);
    for (int32_t u = 0; !st && u < i->n_users; u++)
      if (!in_batch(i->users[u]))
        st = hk_error(HK_FAILED_PRECONDITION, "cannot remove %s: it still has %d user(s)",
                      i->name, i->n_users);
    if (!st) i->flags |= HK_IFLAG_MARK;
  }
  if (st) unmark(v, k - 1);   /* v[k - 1] failed and was not marked */
  return st;
}

/* Drops user from a short op->users by searching it, as hk_instr_remove
 * does (absent after a repeated operand's first drop). */
static void drop_listed_user(hk_instr *op, const hk_instr *user) {
  for (int32_t k = op->n_users; k-- > 0;) {
    if (op->users[k] != user) continue;
    op->users[k] = op->users[--op->n_users];
    return;
  }
}

/* Positions in one long user list, keyed by the user pointer: open
 * addressing whose slots hold positions in op->users, so a key is compared
 * by reading the pointer array, never a user's struct. */
typedef struct user_index {
  int32_t *slot;        /* USER_EMPTY, USER_DROPPED or a position */
  size_t cap, mask;
  unsigned shift;       /* 64 - log2(mask + 1) */
} user_index;

enum { USER_EMPTY = -1, USER_DROPPED = -2 };

/* A few drops cost less by searching the list than by indexing it. */
#define INDEX_MIN_DROPS 4

/* Fibonacci hashing: spreads the fixed stride of arena-allocated
 * instructions over the whole table. */
static size_t user_hash(const user_index *x, const hk_instr *u) {
  return (size_t)(((uint64_t)(uintptr_t)u * 0x9E3779B97F4A7C15ull) >> x->shift);
}

/* The slot holding user u of op, or SIZE_MAX when u is not listed (any
 * more).  Live slots hold distinct current positions, so the first slot
 * whose position lists u is u's. */
static size_t find_user(const user_index *x, const hk_instr *op, const hk_instr *u) {
  for (size_t h = user_hash(x, u);; h = (h + 1) & x->mask) {
    int32_t p = x->slot[h];
    if (p == USER_EMPTY) return SIZE_MAX;
    if (p >= 0 && op->users[p] == u) return h;
  }
}

/* Indexes op->users (the table at most half full); false when a user is
 * listed twice, which the one-at-a-time replay then handles. */
static bool index_users(user_index *x, const hk_instr *op) {
  size_t cap = 64;
  unsigned bits = 6;
  while (cap < 2 * (size_t)op->n_users) cap *= 2, bits++;
  if (cap > x->cap) {
    free(x->slot);
    x->slot = malloc(cap * sizeof *x->slot);
    if (!x->slot) hk_out_of_memory();
    x->cap = cap;
  }
  memset(x->slot, 0xff, cap * sizeof *x->slot);   /* USER_EMPTY */
  x->mask = cap - 1;
  x->shift = 64 - bits;
  for (int32_t u = 0; u < op->n_users; u++) {
    const hk_instr *user = op->users[u];
    size_t h = user_hash(x, user);
    for (; x->slot[h] != USER_EMPTY; h = (h + 1) & x->mask)
      if (op->users[x->slot[h]] == user) return false;
    x->slot[h] = u;
  }
  return true;
}

/* Replays op's drops (users[0..n), in batch order) as hk_instr_remove
 * would: the last user takes the freed slot. */
static void replay_drops(hk_instr *op, const hk_instr *const *users, int64_t n, user_index *x) {
  if (n < INDEX_MIN_DROPS || !index_users(x, op)) {
    for (int64_t k = 0; k < n; k++) drop_listed_user(op, users[k]);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    size_t s = find_user(x, op, users[k]);
    if (s == SIZE_MAX) continue;   /* dropped already: a repeated operand */
    int32_t p = x->slot[s];
    int32_t last = --op->n_users;
    x->slot[s] = USER_DROPPED;
    if (p == last) continue;
    hk_instr *moved = op->users[last];
    x->slot[find_user(x, op, moved)] = p;
    op->users[p] = moved;
  }
}

/* Replays every long list's drops, grouped per operand (counting sort). */
static void replay_long_lists(long_ops *t) {
  if (!t->n) return;
  const hk_instr **sorted = malloc(t->n_drops * sizeof *sorted);
  if (!sorted) hk_out_of_memory();
  int64_t at = 0;
  for (size_t g = 0; g < t->n; g++) {
    t->v[g].start = at;
    at += t->v[g].n_drops;
    t->v[g].n_drops = 0;
  }
  for (size_t k = 0; k < t->n_drops; k++) {
    long_op *g = &t->v[t->drops[k].group];
    sorted[g->start + g->n_drops++] = t->drops[k].user;
  }
  user_index x = {0};
  for (size_t g = 0; g < t->n; g++) {
    replay_drops(t->v[g].op, sorted + t->v[g].start, t->v[g].n_drops, &x);
    t->v[g].op->flags &= (uint16_t)~HK_IFLAG_LONG_USERS;
  }
  free(x.slot);
  free(sorted);
}

static void long_ops_free(long_ops *t) {
  free(t->v);
  free(t->slots);
  free(t->drops);
}

/* Takes batch member i out of its operands' user lists (long ones are
 * only noted, for the replay) and out of its computation, in one visit.
 * Its users come earlier in the batch and are gone already, so nothing
 * after this asks whether i is in the batch. */
static void remove_member(long_ops *t, hk_instr *i) {
  for (int32_t j = 0; j < i->n_operands; j++) {
    hk_instr *op = i->operands[j];
    if (in_batch(op)) continue;
    if ((op->flags & HK_IFLAG_LONG_USERS) || op->n_users > SHORT_USER_LIST) add_drop(t, op, i);
    else drop_listed_user(op, i);
  }
  i->n_users = 0;   /* its users were all removed with it */
  i->flags &= (uint16_t)~HK_IFLAG_MARK;
  hk_instr_detach(i);
}

hk_status *hk_instrs_remove(hk_instr *const *v, int64_t n) {
  if (n <= 0) return NULL;
  if (n == 1) return hk_instr_remove(v[0]);
  hk_status *st = check_batch(v, n);
  if (st) return st;
  long_ops t = {0};
  for (int64_t k = 0; k < n; k++) remove_member(&t, v[k]);
  replay_long_lists(&t);
  long_ops_free(&t);
  return NULL;
}
