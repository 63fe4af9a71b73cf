/* combine.c - the engine behind hilo-all-reduce-combiner and
 * hilo-all-gather-combiner: independent collectives of one kind that agree
 * on everything but their operand become one tuple-shaped collective, read
 * back with get-tuple-element.  "Independent" is decided by collective
 * depth (see hilo.h): only collectives of equal depth are merged, and those
 * never feed one another, so merging cannot create a cycle.  Groups grow in
 * post order up to the byte and count thresholds. */
#include <stdlib.h>

#include "combine.h"

typedef struct group {
  hk_instr **members;
  int32_t n, cap;
  int64_t depth, bytes;
} group;

static bool candidate(const hk_instr *i, hk_opcode op) {
  if (i->opcode != op || i->n_operands != 1 || !hk_shape_is_array(i->shape)) return false;
  if (i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs)) return false;
  return true;
}

static void group_add(group *g, hk_instr *i) {
  if (g->n == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 4;
    g->members = realloc(g->members, (size_t)g->cap * sizeof *g->members);
    if (!g->members) hk_out_of_memory();
  }
  g->members[g->n++] = i;
  g->bytes += hk_shape_byte_size(i->shape);
}

/* Replaces the members of g by one tuple-shaped collective. */
static void merge_group(const group *g) {
  hk_instr *first = g->members[0];
  hk_computation *c = first->parent;  /* first is removed below */
  hk_module *m = c->module;
  const hk_shape **shapes = malloc((size_t)g->n * sizeof *shapes);
  hk_instr **ops = malloc((size_t)g->n * sizeof *ops);
  if (!shapes || !ops) hk_out_of_memory();
  for (int32_t k = 0; k < g->n; k++) {
    shapes[k] = g->members[k]->shape;
    ops[k] = g->members[k]->operands[0];
  }
  const hk_shape *ts = hk_shape_tuple(m, g->n, shapes);
  hk_instr *combined = hk_instr_clone(c, first, ts, g->n, ops, NULL);
  hk_instr_set_sharding(combined, NULL);
  for (int32_t k = 0; k < g->n; k++) {
    hk_instr *member = g->members[k];
    hk_instr *gte = hk_instr_new(c, HK_OP_GET_TUPLE_ELEMENT, member->shape, 1,
                                 &combined, NULL);
    hk_instr_attrs(gte)->tuple_index = k;
    hk_instr_set_sharding(gte, member->sharding);
    hk_instr_replace_all_uses(member, gte);
    hk_status *st = hk_instr_remove(member);
    if (st) hk_status_free(st);
  }
  free(shapes);
  free(ops);
}

bool hilo_combine(hk_computation *c, hk_opcode op, hilo_same_kind_fn same,
                  int64_t threshold_bytes, int64_t threshold_count) {
  int64_t n = 0, *depth = NULL;
  hk_instr **order = hilo_collective_depths(c, &n, &depth);
  group *groups = NULL;
  int32_t n_groups = 0, cap_groups = 0;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    if (!candidate(i, op)) continue;
    int64_t bytes = hk_shape_byte_size(i->shape);
    group *target = NULL;
    for (int32_t g = 0; g < n_groups && !target; g++) {
      group *gr = &groups[g];
      if (gr->depth == depth[k] && gr->n < threshold_count &&
          gr->bytes + bytes <= threshold_bytes && same(gr->members[0], i))
        target = gr;
    }
    if (!target) {
      if (n_groups == cap_groups) {
        cap_groups = cap_groups ? cap_groups * 2 : 8;
        groups = realloc(groups, (size_t)cap_groups * sizeof *groups);
        if (!groups) hk_out_of_memory();
      }
      target = &groups[n_groups++];
      *target = (group){NULL, 0, 0, depth[k], 0};
    }
    group_add(target, i);
  }
  hilo_clear_scratch(order, n);
  bool changed = false;
  for (int32_t g = 0; g < n_groups; g++) {
    if (groups[g].n > 1) {
      merge_group(&groups[g]);
      changed = true;
    }
    free(groups[g].members);
  }
  free(groups);
  free(depth);
  free(order);
  return changed;
}
