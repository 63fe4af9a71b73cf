/* module.c - hk_module: creation, arena, computations list, names and ordering. */
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"

hk_module *hk_module_new(const char *name) {
  hk_module *m = calloc(1, sizeof *m);
  if (!m) hk_out_of_memory();
  m->impl = calloc(1, sizeof *m->impl);
  if (!m->impl) hk_out_of_memory();
  hk_arena_init(&m->impl->arena);
  hk_arena_init(&m->impl->instr_arena);
  m->name = hk_intern_cstr(m, name ? name : "module");
  m->config.num_partitions = 1;
  m->config.replica_count = 1;
  return m;
}

void hk_module_free(hk_module *m) {
  if (!m) return;
  struct hk_module_impl *impl = m->impl;
  hk_strmap_free(&impl->strings);
  hk_ns_free(&impl->instr_names);
  hk_ns_free(&impl->comp_names);
  for (int t = 0; t < HK_HC_COUNT; t++)
    if (impl->hc[t].slots) hk_free_block(impl->hc[t].slots, (impl->hc[t].mask + 1) * sizeof(hk_hc_entry));
  hk_arena_release(&impl->arena);
  hk_arena_release(&impl->instr_arena);
  free(m->computations);
  free(impl);
  free(m);
}

void *hk_alloc(hk_module *m, size_t n) { return hk_arena_take(&m->impl->arena, n, 16); }

void *hk_memdup(hk_module *m, const void *p, size_t n) {
  if (!p) return NULL;
  void *d = hk_arena_alloc(&m->impl->arena, n, 16);
  if (n) memcpy(d, p, n);
  return d;
}

uint64_t hk_module_changes(const hk_module *m) { return m->impl->changes; }

size_t hk_module_memory(const hk_module *m) {
  const struct hk_module_impl *impl = m->impl;
  size_t n = sizeof *m + sizeof *impl + hk_arena_bytes(&impl->arena);
  n += hk_arena_bytes(&impl->instr_arena);   /* the instruction structs */
  n += hk_strmap_bytes(&impl->strings);
  n += hk_strmap_bytes(&impl->instr_names.names) + hk_strmap_bytes(&impl->instr_names.counters);
  n += hk_strmap_bytes(&impl->comp_names.names) + hk_strmap_bytes(&impl->comp_names.counters);
  for (int t = 0; t < HK_HC_COUNT; t++)
    if (impl->hc[t].slots) n += (impl->hc[t].mask + 1) * sizeof(hk_hc_entry);
  n += (size_t)m->cap_computations * sizeof(hk_computation *);
  return n;
}

/* ---- computations ------------------------------------------------------------ */

hk_computation *hk_module_find_computation(hk_module *m, const char *name) {
  return name ? hk_ns_lookup(&m->impl->comp_names, name) : NULL;
}

static void computations_append(hk_module *m, hk_computation *c) {
  if (m->n_computations == m->cap_computations) {
    int32_t cap = m->cap_computations ? m->cap_computations * 2 : 8;
    hk_computation **a = realloc(m->computations, (size_t)cap * sizeof *a);
    if (!a) hk_out_of_memory();
    m->computations = a;
    m->cap_computations = cap;
  }
  c->index = m->n_computations;
  m->computations[m->n_computations++] = c;
  hk_module_note_change(m);
}

hk_computation *hk_computation_new(hk_module *m, const char *name) {
  hk_computation *c = hk_alloc(m, sizeof *c);
  c->module = m;
  const char *want = name ? name : "computation";
  c->name = hk_ns_unique(m, &m->impl->comp_names, want, strlen(want), c);
  computations_append(m, c);
  return c;
}

void hk_module_set_entry(hk_module *m, hk_computation *c) {
  hk_module_note_change(m);
  if (m->entry) m->entry->is_entry = false;
  m->entry = c;
  if (c) c->is_entry = true;
}

void hk_module_remove_computation(hk_module *m, hk_computation *c) {
  int32_t at = -1;
  if (c->index >= 0 && c->index < m->n_computations && m->computations[c->index] == c)
    at = c->index;
  for (int32_t i = 0; at < 0 && i < m->n_computations; i++)
    if (m->computations[i] == c) at = i;
  if (at < 0) return;
  hk_module_note_change(m);
  memmove(m->computations + at, m->computations + at + 1,
          (size_t)(m->n_computations - at - 1) * sizeof *m->computations);
  m->n_computations--;
  for (int32_t i = at; i < m->n_computations; i++) m->computations[i]->index = i;
  /* Its instructions' names stay taken; lookups skip removed holders. */
  hk_ns_retire(&m->impl->comp_names, c->name);
  if (m->entry == c) m->entry = NULL;
  c->index = -1;
}

/* Removed: taken out of its computation, or its computation taken out of
 * the module (a released struct reads as zeros: removed too). */
static bool instr_struct_removed(const void *p) {
  const hk_instr *i = p;
  return !i->parent || i->parent->index < 0;
}

size_t hk_module_release_removed(hk_module *m) {
  hk_ns_settle_taken(&m->impl->instr_names);   /* it may point at removed ones */
  return hk_arena_release_items(&m->impl->instr_arena, sizeof(hk_instr), instr_struct_removed);
}

const char *hk_module_unique_name(hk_module *m, const char *prefix) {
  const char *p = prefix ? prefix : "";
  return hk_ns_unique(m, &m->impl->instr_names, p, strlen(p), HK_NAME_RESERVED);
}

/* One sequential walk, loading ahead (hk_instr_prefetch_ahead). */
int64_t hk_module_next_channel_id(const hk_module *m) {
  int64_t next = 1;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) {
      hk_instr_prefetch_ahead(i);
      if (i->attrs && i->attrs->channel_id >= next) next = i->attrs->channel_id + 1;
    }
  return next;
}

/* ---- call-graph order (XLA's MakeComputationPostOrder) ------------------------ */
/* Every computation's list is walked once, for its calling instructions;
 * the order is then made from those alone. */

typedef struct comp_calls {
  hk_instr **v;            /* the computation's calling instructions, in list order */
  int64_t n;
} comp_calls;

typedef struct comp_frame {
  hk_computation *c;
  int64_t next;            /* next calling instruction to look at */
} comp_frame;

typedef struct comp_stack {
  comp_frame *v;
  size_t n, cap;
} comp_stack;

static void comp_stack_push(comp_stack *s, hk_computation *c) {
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->v = realloc(s->v, s->cap * sizeof *s->v);
    if (!s->v) hk_out_of_memory();
  }
  s->v[s->n].c = c;
  s->v[s->n].next = 0;
  s->n++;
}

/* Whether c is one of m's computations (its index is then valid). */
static bool owned(const hk_module *m, const hk_computation *c) {
  return c && c->module == m && c->index >= 0 && c->index < m->n_computations &&
         m->computations[c->index] == c;
}

/* Pushes i's callees not seen yet, last first, so the first is done first. */
static void push_callees(comp_stack *s, const hk_instr *i, uint8_t *seen) {
  for (int32_t k = i->n_called; k-- > 0;) {
    hk_computation *callee = i->called[k];
    if (!owned(i->parent->module, callee) || seen[callee->index]) continue;
    seen[callee->index] = 1;
    comp_stack_push(s, callee);
  }
}

/* XLA's MakeEmbeddedComputationsList for root, appended to out (deduplicated
 * through added[]). */
static void embedded_post_order(hk_computation *root, const comp_calls *calls, uint8_t *seen,
                                uint8_t *added, hk_computation **out, int32_t *n_out,
                                comp_stack *s) {
  s->n = 0;
  const comp_calls *rc = &calls[root->index];
  for (int64_t r = 0; r < rc->n; r++) {
    push_callees(s, rc->v[r], seen);
    while (s->n) {
      comp_frame *f = &s->v[s->n - 1];
      const comp_calls *fc = &calls[f->c->index];
      if (f->next == fc->n) {
        hk_computation *done = f->c;
        s->n--;
        if (!added[done->index]) {
          added[done->index] = 1;
          out[(*n_out)++] = done;
        }
        continue;
      }
      push_callees(s, fc->v[f->next++], seen);   /* may move s->v; f is not used after */
    }
  }
}

/* Each computation's calling instructions; called[k] set for every
 * computation some instruction calls. */
static comp_calls *collect_calls(hk_module *m, uint8_t *called,
                                 void (*visit)(void *ctx, hk_instr *i), void *ctx) {
  int32_t n = m->n_computations;
  comp_calls *calls = calloc((size_t)n, sizeof *calls);
  if (!calls) hk_out_of_memory();
  for (int32_t k = 0; k < n; k++) {
    calls[k].v = hk_computation_calling_instrs_visiting(m->computations[k], &calls[k].n, visit, ctx);
    for (int64_t r = 0; r < calls[k].n; r++) {
      const hk_instr *i = calls[k].v[r];
      for (int32_t j = 0; j < i->n_called; j++)
        if (owned(m, i->called[j])) called[i->called[j]->index] = 1;
    }
  }
  return calls;
}

void hk_module_sort_computations(hk_module *m) { hk_module_sort_computations_visiting(m, NULL, NULL); }

void hk_module_sort_computations_visiting(hk_module *m, void (*visit)(void *ctx, hk_instr *i),
                                          void *ctx) {
  int32_t n = m->n_computations;
  /* One computation is sorted already; a visitor still takes the walk. */
  if (n == 0 || (n == 1 && !visit)) return;
  hk_module_note_change(m);   /* the computations' order and indices */
  for (int32_t k = 0; k < n; k++) m->computations[k]->index = k;
  uint8_t *called = calloc((size_t)n * 3, 1);
  hk_computation **out = malloc((size_t)n * sizeof *out);
  if (!called || !out) hk_out_of_memory();
  uint8_t *seen = called + n, *added = called + 2 * n;
  comp_calls *calls = collect_calls(m, called, visit, ctx);
  comp_stack s = {0};
  int32_t n_out = 0;
  for (int32_t k = 0; k < n; k++) {
    hk_computation *c = m->computations[k];
    if (called[k]) continue;
    memset(seen, 0, (size_t)n);
    embedded_post_order(c, calls, seen, added, out, &n_out, &s);
    if (!added[k]) {
      added[k] = 1;
      out[n_out++] = c;
    }
  }
  /* Computations only reachable through call cycles keep their order. */
  for (int32_t k = 0; k < n; k++)
    if (!added[k]) out[n_out++] = m->computations[k];
  memcpy(m->computations, out, (size_t)n * sizeof *out);
  for (int32_t k = 0; k < n; k++) {
    m->computations[k]->index = k;
    free(calls[k].v);
  }
  free(calls);
  free(s.v);
  free(out);
  free(called);
}
