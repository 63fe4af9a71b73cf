/* unique_channel_id.c - hilo-unique-channel-id: every collective carrying a
 * channel id gets one no other collective in the module has.  Duplicates
 * (left by cloning, flattening or merged modules) are re-stamped with fresh
 * ids above the module's largest, visiting computations in module order and
 * instructions in post order, so the result is deterministic and a second
 * run changes nothing.  The first holder of an id keeps it.
 * Send/recv and their -done ops are left alone: a send and a recv share a
 * channel id on purpose (that is how they pair up). */
#include <stdlib.h>

#include "hilo.h"

typedef struct id_set {
  int64_t *slots;
  size_t mask, count;
} id_set;

/* Inserts id; returns false if it was already there. */
static bool id_set_add(id_set *s, int64_t id) {
  if (2 * (s->count + 1) > s->mask + 1) {
    size_t old_cap = s->mask + 1, cap = old_cap * 2;
    int64_t *old = s->slots;
    s->slots = calloc(cap, sizeof *s->slots);
    if (!s->slots) hk_out_of_memory();
    s->mask = cap - 1;
    s->count = 0;
    for (size_t k = 0; k < old_cap; k++)
      if (old[k]) id_set_add(s, old[k]);
    free(old);
  }
  size_t k = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull >> 20) & s->mask;
  while (s->slots[k]) {
    if (s->slots[k] == id) return false;
    k = (k + 1) & s->mask;
  }
  s->slots[k] = id;
  s->count++;
  return true;
}

static hk_status *unique_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                             bool *changed) {
  (void)self;
  id_set seen = {calloc(64, sizeof(int64_t)), 63, 0};
  if (!seen.slots) hk_out_of_memory();
  int64_t next = hk_module_next_channel_id(m);
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    int64_t n = 0;
    hk_instr **order = hk_computation_post_order(c, &n);
    for (int64_t j = 0; j < n; j++) {
      hk_instr *i = order[j];
      if (!hk_opcode_is_collective(i->opcode) || hk_instr_channel_id(i) == 0) continue;
      if (id_set_add(&seen, i->attrs->channel_id)) continue;
      i->attrs->channel_id = next++;
      id_set_add(&seen, i->attrs->channel_id);
      *changed = true;
    }
    free(order);
  }
  free(seen.slots);
  return NULL;
}

static const hk_pass_vtable unique_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-unique-channel-id",
    .run = unique_run, .destroy = hk_pass_free};

static hk_pass *unique_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&unique_vtable, sizeof(hilo_pass), err);
}

const hk_pass_desc hilo_unique_channel_id_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-unique-channel-id",
    .summary = "gives every collective a channel id no other collective has",
    .options = NULL, .n_options = 0, .create = unique_create};
