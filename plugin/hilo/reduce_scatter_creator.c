/* reduce_scatter_creator.c - hilo-reduce-scatter-creator: an all-reduce
 * whose only use is a dynamic-slice that keeps, on every device, exactly
 * the chunk a reduce-scatter would give it becomes that reduce-scatter.
 *
 * The slice's offsets are evaluated for every device (a small evaluator of
 * the scalar index arithmetic partitioners emit: partition-id, replica-id,
 * constants, offset tables indexed with dynamic-slice, convert, reshape and
 * integer arithmetic); the rewrite happens only when one dimension d is cut
 * into group-size chunks and each device's offset is its rank in its
 * all-reduce group times the chunk size. */
#include <stdlib.h>

#include "hilo.h"

typedef struct device { int64_t partition, replica; } device;

/* Scalar integer value of `i` on device dv; false if not computable. */
static bool eval_index(const hk_instr *i, device dv, int depth, int64_t *out) {
  if (depth > 32) return false;
  int64_t a = 0, b = 0;
  bool scalarish = hk_shape_is_array(i->shape) && hk_shape_elements(i->shape) == 1;
  if (!scalarish && i->opcode != HK_OP_DYNAMIC_SLICE) return false;
  switch (i->opcode) {
    case HK_OP_PARTITION_ID: *out = dv.partition; return true;
    case HK_OP_REPLICA_ID: *out = dv.replica; return true;
    case HK_OP_CONSTANT:
      if (!i->attrs || !i->attrs->literal || !i->attrs->literal->data) return false;
      *out = hk_literal_get_i64(i->attrs->literal, 0);
      return true;
    case HK_OP_CONVERT: case HK_OP_RESHAPE: case HK_OP_BITCAST: case HK_OP_COPY:
      if (!hk_prim_is_integral((hk_prim)i->shape->elem)) return false;
      return eval_index(i->operands[0], dv, depth + 1, out);
    case HK_OP_DYNAMIC_SLICE: {
      /* table[idx] with a constant 1-D table and a slice of size 1 */
      const hk_instr *t = i->operands[0];
      if (!scalarish || i->n_operands != 2 || t->opcode != HK_OP_CONSTANT || t->shape->rank != 1 ||
          !t->attrs || !t->attrs->literal || !t->attrs->literal->data)
        return false;
      if (!eval_index(i->operands[1], dv, depth + 1, &a)) return false;
      int64_t n = t->shape->dims[0];
      if (a < 0) a = 0;
      if (a > n - 1) a = n - 1;
      *out = hk_literal_get_i64(t->attrs->literal, a);
      return true;
    }
    case HK_OP_ADD: case HK_OP_SUBTRACT: case HK_OP_MULTIPLY: case HK_OP_DIVIDE:
    case HK_OP_REMAINDER: case HK_OP_MINIMUM: case HK_OP_MAXIMUM:
      if (!eval_index(i->operands[0], dv, depth + 1, &a) ||
          !eval_index(i->operands[1], dv, depth + 1, &b))
        return false;
      switch (i->opcode) {
        case HK_OP_ADD: *out = a + b; return true;
        case HK_OP_SUBTRACT: *out = a - b; return true;
        case HK_OP_MULTIPLY: *out = a * b; return true;
        case HK_OP_DIVIDE: if (!b) return false; *out = a / b; return true;
        case HK_OP_REMAINDER: if (!b) return false; *out = a % b; return true;
        case HK_OP_MINIMUM: *out = a < b ? a : b; return true;
        default: *out = a > b ? a : b; return true;
      }
    default:
      return false;
  }
}

/* Rank of device dv in its group of the all-reduce `ar` and the group's
 * size; false if dv takes no part. */
static bool group_rank(const hk_instr *ar, device dv, int64_t num_partitions,
                       int64_t num_replicas, int64_t *rank, int64_t *size) {
  const hk_replica_groups *g = ar->attrs ? ar->attrs->replica_groups : NULL;
  bool channel = hk_instr_has_channel_id(ar);
  bool global = ar->attrs && ar->attrs->use_global_device_ids;
  int64_t id = !channel ? dv.replica : global ? dv.replica * num_partitions + dv.partition
                                              : dv.partition;
  if (!g || g->n_groups == 0) {
    *rank = id;
    *size = !channel ? num_replicas : global ? num_replicas * num_partitions : num_partitions;
    return true;
  }
  for (int32_t k = 0; k < g->n_groups; k++)
    for (int32_t j = g->group_start[k]; j < g->group_start[k + 1]; j++)
      if (g->ids[j] == id) {
        *rank = j - g->group_start[k];
        *size = g->group_start[k + 1] - g->group_start[k];
        return true;
      }
  return false;
}

/* The dimension the slice scatters over, or -1 when ds is not the slice
 * of a reduce-scatter. */
static int scatter_dim(const hk_instr *ar, const hk_instr *ds, int64_t np, int64_t nr) {
  const hk_shape *full = ar->shape, *part = ds->shape;
  int dim = -1;
  for (int d = 0; d < full->rank; d++)
    if (part->dims[d] != full->dims[d]) {
      if (dim >= 0) return -1;
      dim = d;
    }
  if (dim < 0) return -1;
  int64_t chunk = part->dims[dim];
  for (int64_t r = 0; r < nr; r++)
    for (int64_t p = 0; p < np; p++) {
      device dv = {p, r};
      int64_t rank, size, off;
      if (!group_rank(ar, dv, np, nr, &rank, &size)) return -1;
      if (chunk * size != full->dims[dim]) return -1;
      if (!eval_index(ds->operands[1 + dim], dv, 0, &off) || off != rank * chunk) return -1;
    }
  return dim;
}

static bool try_create(hk_instr *ar, int64_t np, int64_t nr) {
  if (ar->opcode != HK_OP_ALL_REDUCE || ar->n_operands != 1 || ar->n_users != 1 ||
      !hk_shape_is_array(ar->shape) || hk_instr_is_root(ar))
    return false;
  hk_instr *ds = ar->users[0];
  if (ds->opcode != HK_OP_DYNAMIC_SLICE || ds->operands[0] != ar) return false;
  for (int32_t k = 1; k < ds->n_operands; k++)
    if (ds->operands[k] == ar) return false;
  int dim = scatter_dim(ar, ds, np, nr);
  if (dim < 0) return false;
  hk_instr *x = ar->operands[0];
  hk_instr *rs = hk_instr_clone(ar->parent, ar, ds->shape, 1, &x, "reduce-scatter");
  rs->opcode = HK_OP_REDUCE_SCATTER;
  int64_t d = dim;
  hk_instr_set_dims(rs, 1, &d);
  hk_instr_set_sharding(rs, ds->sharding);
  hk_instr_replace_all_uses(ds, rs);
  hk_status *st = hk_instr_remove(ds);
  if (st) hk_status_free(st);
  st = hk_instr_remove(ar);
  if (st) hk_status_free(st);
  return true;
}

static hk_status *rsc_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                          bool *changed) {
  (void)self;
  int64_t np = m->config.num_partitions > 0 ? m->config.num_partitions : 1;
  int64_t nr = m->config.replica_count > 0 ? m->config.replica_count : 1;
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    /* A snapshot: a rewrite removes the all-reduce and its slice. */
    int64_t n_ar = 0;
    hk_instr **ars = hilo_collect(c, HK_OP_ALL_REDUCE, &n_ar);
    for (int64_t j = 0; j < n_ar; j++) *changed |= try_create(ars[j], np, nr);
    free(ars);
  }
  return NULL;
}

static const hk_pass_vtable rsc_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-reduce-scatter-creator",
    .run = rsc_run, .destroy = hk_pass_free};

static hk_pass *rsc_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&rsc_vtable, sizeof(hilo_pass), err);
}

const hk_pass_desc hilo_reduce_scatter_creator_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-reduce-scatter-creator",
    .summary = "turns all-reduce + per-device dynamic-slice into reduce-scatter",
    .options = NULL, .n_options = 0, .create = rsc_create};
