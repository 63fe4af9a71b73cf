/* computation.c - computations: lookup, root, parameters, post order, program shape. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"

hk_instr *hk_computation_find_instr(hk_computation *c, const char *name) {
  if (!name) return NULL;
  hk_instr *i = hk_ns_lookup(&c->module->impl->instr_names, name);
  return i && i->parent == c ? i : NULL;
}

void hk_computation_set_root(hk_computation *c, hk_instr *root) { c->root = root; }

void hk_computation_register_param(hk_computation *c, hk_instr *p) {
  int64_t num = hk_instr_parameter_number(p);
  if (num < 0) return;
  if (num >= c->cap_params) {
    int64_t cap = c->cap_params ? c->cap_params : 4;
    while (cap <= num) cap *= 2;
    hk_instr **params = hk_alloc(c->module, (size_t)cap * sizeof *params);
    if (c->n_params) memcpy(params, c->params, (size_t)c->n_params * sizeof *params);
    c->params = params;
    c->cap_params = (int32_t)cap;
  }
  c->params[num] = p;
  if (num >= c->n_params) c->n_params = (int32_t)num + 1;
}

/* ---- post order (XLA's MakeInstructionPostOrder) ------------------------------ */

enum { VISIT_NEW = 0, VISIT_ACTIVE = 1, VISIT_DONE = 2 };

/* The visit marks live in instr->flags; one post order at a time. */
static pthread_mutex_t post_order_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned visit_state(const hk_instr *i) { return i->flags & HK_IFLAG_VISIT_MASK; }
static void set_visit_state(hk_instr *i, unsigned s) {
  i->flags = (uint16_t)((i->flags & ~HK_IFLAG_VISIT_MASK) | s);
}

typedef struct ptr_stack {
  hk_instr **v;
  size_t n, cap;
  const hk_computation *c;   /* instructions of other computations are skipped */
} ptr_stack;

static void stack_push(ptr_stack *s, hk_instr *i) {
  if (i->parent != s->c || visit_state(i) == VISIT_DONE) return;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) abort();
  }
  s->v[s->n++] = i;
}

/* Collectives sharing a channel id run together (XLA's
 * ComputeChannelDependencies): each depends on the earlier ones of its
 * channel.  They are kept sorted by (channel, list position) with an
 * address table to find an instruction's place. */
typedef struct channel_entry {
  hk_instr *instr;
  int64_t channel, pos;
} channel_entry;

typedef struct channel_deps {
  channel_entry *v;      /* sorted by channel, then list position */
  int64_t n;
  int64_t *slot_of;      /* open-addressed: address -> index in v, -1 empty */
  hk_instr **slot_key;
  size_t mask;
} channel_deps;

static bool is_channel_collective(const hk_instr *i) {
  switch ((hk_opcode)i->opcode) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_RAGGED_ALL_TO_ALL: case HK_OP_REDUCE_SCATTER:
      return i->attrs && i->attrs->channel_id != 0;
    default:
      return false;
  }
}

static int channel_entry_cmp(const void *a, const void *b) {
  const channel_entry *x = a, *y = b;
  if (x->channel != y->channel) return x->channel < y->channel ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static size_t channel_slot(const channel_deps *d, const hk_instr *i) {
  size_t h = (size_t)hk_hash_combine((uint64_t)(uintptr_t)i, 77) & d->mask;
  while (d->slot_key[h] && d->slot_key[h] != i) h = (h + 1) & d->mask;
  return h;
}

static void channel_deps_init(channel_deps *d, const hk_computation *c) {
  memset(d, 0, sizeof *d);
  int64_t pos = 0;
  for (hk_instr *i = c->first; i; i = i->next, pos++) {
    if (!is_channel_collective(i)) continue;
    if ((d->n & (d->n - 1)) == 0) {   /* grow at powers of two */
      d->v = realloc(d->v, (size_t)(d->n ? 2 * d->n : 1) * sizeof *d->v);
      if (!d->v) abort();
    }
    d->v[d->n++] = (channel_entry){i, i->attrs->channel_id, pos};
  }
  if (!d->n) return;
  qsort(d->v, (size_t)d->n, sizeof *d->v, channel_entry_cmp);
  size_t cap = 16;
  while (cap < 2 * (size_t)d->n) cap *= 2;
  d->mask = cap - 1;
  d->slot_key = calloc(cap, sizeof *d->slot_key);
  d->slot_of = malloc(cap * sizeof *d->slot_of);
  if (!d->slot_key || !d->slot_of) abort();
  for (int64_t k = 0; k < d->n; k++) {
    size_t h = channel_slot(d, d->v[k].instr);
    d->slot_key[h] = d->v[k].instr;
    d->slot_of[h] = k;
  }
}

static void channel_deps_free(channel_deps *d) {
  free(d->v);
  free(d->slot_key);
  free(d->slot_of);
}

/* The channel table is built the first time the walk meets a channel
 * collective: modules without one never scan for them. */
typedef struct post_walk {
  ptr_stack s;
  const hk_computation *c;
  channel_deps d;
  bool have_deps;
  hk_instr **out;
  int64_t n_out, cap;
} post_walk;

static void push_channel_deps(post_walk *w, const hk_instr *cur) {
  if (!is_channel_collective(cur)) return;
  if (!w->have_deps) {
    channel_deps_init(&w->d, w->c);
    w->have_deps = true;
  }
  const channel_deps *d = &w->d;
  if (!d->n) return;
  size_t h = channel_slot(d, cur);
  if (d->slot_key[h] != cur) return;
  int64_t k = d->slot_of[h];
  /* earlier members of the channel, in list order */
  int64_t first = k;
  while (first > 0 && d->v[first - 1].channel == d->v[k].channel) first--;
  for (int64_t j = first; j < k; j++) stack_push(&w->s, d->v[j].instr);
}

static void emit(post_walk *w, hk_instr *i) {
  if (w->n_out == w->cap) {   /* only when n_instrs undercounts the list */
    w->cap = w->cap ? 2 * w->cap : 16;
    w->out = realloc(w->out, (size_t)w->cap * sizeof *w->out);
    if (!w->out) abort();
  }
  w->out[w->n_out++] = i;
}

static void dfs_from(post_walk *w, hk_instr *start) {
  ptr_stack *s = &w->s;
  s->n = 0;
  stack_push(s, start);
  while (s->n) {
    hk_instr *cur = s->v[s->n - 1];
    unsigned st = visit_state(cur);
    if (st != VISIT_NEW) {
      s->n--;
      if (st != VISIT_DONE) {
        set_visit_state(cur, VISIT_DONE);
        emit(w, cur);
      }
      continue;
    }
    set_visit_state(cur, VISIT_ACTIVE);
    if (cur != start) push_channel_deps(w, cur);
    for (int32_t k = cur->n_operands; k-- > 0;) stack_push(s, cur->operands[k]);
    if (cur->attrs)
      for (int32_t k = 0; k < cur->attrs->n_control_preds; k++)
        stack_push(s, cur->attrs->control_preds[k]);
  }
}

hk_instr **hk_computation_post_order(const hk_computation *c, int64_t *n) {
  post_walk w = {.s = {.c = c}, .c = c, .cap = c->n_instrs > 0 ? c->n_instrs : 1};
  w.out = malloc((size_t)w.cap * sizeof *w.out);
  if (!w.out) abort();
  pthread_mutex_lock(&post_order_lock);
  for (hk_instr *i = c->first; i; i = i->next)
    if (i->n_users == 0) dfs_from(&w, i);
  /* Instructions only reachable through a cycle (invalid IR) still appear. */
  if (w.n_out < c->n_instrs)
    for (hk_instr *i = c->first; i; i = i->next)
      if (visit_state(i) == VISIT_NEW) dfs_from(&w, i);
  /* every instruction the walk marked is in the output, marked done */
  for (int64_t k = 0; k < w.n_out; k++) set_visit_state(w.out[k], VISIT_NEW);
  pthread_mutex_unlock(&post_order_lock);
  free(w.s.v);
  if (w.have_deps) channel_deps_free(&w.d);
  *n = w.n_out;
  return w.out;
}

hk_program_shape hk_computation_program_shape(hk_computation *c) {
  hk_program_shape ps = {0};
  hk_module *m = c->module;
  ps.n_params = c->n_params;
  if (c->n_params) {
    const hk_shape **shapes = hk_alloc(m, (size_t)c->n_params * sizeof *shapes);
    const char **names = hk_alloc(m, (size_t)c->n_params * sizeof *names);
    for (int32_t k = 0; k < c->n_params; k++) {
      hk_instr *p = c->params[k];
      shapes[k] = p ? p->shape : NULL;
      names[k] = p ? p->name : NULL;
    }
    ps.params = shapes;
    ps.param_names = names;
  }
  ps.result = c->root ? c->root->shape : NULL;
  return ps;
}
