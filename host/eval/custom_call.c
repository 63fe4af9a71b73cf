/* custom_call.c - custom-call targets the evaluator knows: TopK, identities
 * (Sharding, barriers, ...), the manual-partitioning transitions
 * SPMDFullToShardShape / SPMDShardToFullShape run on several devices, and
 * (on request) unknown targets as opaque pure functions. */
#include <stdio.h>

#include "eval/eval_internal.h"

/* annotate_device_placement is JAX's memory-kind annotation; XLA rewrites
 * it to MoveToHost / MoveToDevice (ConvertMemoryPlacementToInternal-
 * Annotations), so its value is its operand's too. */
bool hk_eval_identity_custom_call(const char *t) {
  static const char *const names[] = {
      "Sharding", "ShardBarrierFrom", "ShardBarrierTo", "MoveToHost", "MoveToDevice",
      "LayoutConstraint", "AllocateBuffer", "annotate_device_placement"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (t && !strcmp(t, names[i])) return true;
  return false;
}

/* HostExecute runs its computation on the host: XLA's HostOffloadingPrepare
 * makes it from a call, so its value is the call's. */
bool hk_eval_is_host_execute(const hk_instr *ins) {
  const char *t = ins->attrs ? ins->attrs->custom_call_target : NULL;
  return t && !strcmp(t, "HostExecute") && ins->n_called == 1 &&
         ins->called[0]->n_params == ins->n_operands;
}

/* The operand itself when it has the result's shape, or its elements
 * under the result's dims when only the dims differ. */
static hk_status *identity(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  if (ins->n_operands == 1 && hk_value_matches_shape(ops[0], ins->shape)) {
    *out = hk_value_retain(ops[0]);
    return NULL;
  }
  if (ins->n_operands == 1 && ops[0]->elem == ins->shape->elem && ops[0]->elem != HK_TUPLE &&
      ops[0]->n == hk_shape_elements(ins->shape)) {
    hk_value *v = hk_value_for_shape_dims(ins->shape);
    memcpy(v->data, ops[0]->data, (size_t)v->nbytes);
    *out = v;
    return NULL;
  }
  return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand does not have the result's shape");
}

/* ---- manual partitioning ------------------------------------------------------
 * In a global module with manual regions every device holds the value of
 * its manual group: outside manual regions the whole value (the same on
 * every device), inside them what the program computes for that device.
 * Shardings name partitions, so device ids here are partition ids. */

static bool has_data_tiling(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && hk_sharding_num_tiles(s) > 1;
}

/* The tile shape of shape under s (ceil division over the data dims). */
static void tile_dims(const hk_sharding *s, const hk_shape *shape, int64_t *dims) {
  for (int j = 0; j < shape->rank; j++) {
    int64_t p = hk_sharding_dim_partitions(s, j);
    dims[j] = p > 1 ? (shape->dims[j] + p - 1) / p : shape->dims[j];
  }
}

/* This device's tile of v (a value of `shape`) under s, shaped `dims`. */
static hk_status *local_tile(const hk_value *v, const hk_sharding *s, const hk_shape *shape,
                             int64_t partition, const int64_t *dims, hk_value **out) {
  hk_shape local = *shape;
  local.dims = dims;
  return hk_value_shard(v, s, shape, partition, &local, out);
}

/* The devices of partition's manual group under s (those whose tile
 * indices differ only in data and replicated dims); returns the count. */
static int64_t manual_group(const hk_sharding *s, int64_t partition, int64_t n_devices,
                            int64_t *members) {
  int64_t dims[HK_MAX_RANK];
  int n = 0, data = hk_sharding_data_rank(s);
  for (int j = 0; j < s->n_tile_dims; j++) {
    bool manual = j >= data && j - data < s->n_subgroups && s->subgroups[j - data] == HK_SUBGROUP_MANUAL;
    if (!manual) dims[n++] = j;
  }
  int64_t *all = malloc((size_t)n_devices * sizeof(int64_t));
  if (!all) hk_out_of_memory();
  int64_t gs = hk_sharding_device_groups(s, n, dims, all), count = 0;
  for (int64_t g = 0; gs > 0 && g + gs <= n_devices && !count; g += gs)
    for (int64_t k = g; k < g + gs; k++)
      if (all[k] == partition) {
        memcpy(members, all + g, (size_t)gs * sizeof(int64_t));
        count = gs;
      }
  free(all);
  return count;
}

/* The value of this device's manual group under the result's
 * subgroup-manual sharding r: XLA gives each device its tile of the
 * operand under the operand's sharding as its local shard of the result
 * under r, so the group's value is its members' tiles, each at the
 * member's offset under r (the full operand is on every device: no
 * exchange). */
static hk_status *manual_group_value(hk_device_ctx *d, const hk_instr *ins, const hk_value *full,
                                     hk_value **out) {
  const hk_sharding *s = ins->operands[0]->sharding, *r = ins->sharding;
  int64_t P = d->num_partitions > 0 ? d->num_partitions : 1, tdims[HK_MAX_RANK];
  tile_dims(r, ins->shape, tdims);
  int64_t *members = malloc((size_t)P * sizeof(int64_t));
  if (!members) hk_out_of_memory();
  int64_t n = manual_group(r, d->partition, P, members);
  hk_value *v = hk_value_for_shape_dims(ins->shape);
  hk_status *st = n > 0 ? NULL : hk_eval_error(ins, HK_INVALID_ARGUMENT, "partition %lld is not in the sharding",
                                               (long long)d->partition);
  for (int64_t k = 0; k < n && !st; k++) {
    int64_t off[HK_MAX_RANK];
    hk_value *t = NULL;
    if (!hk_sharding_tile_offset(r, ins->shape, members[k], off)) {
      st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "device %lld is not in the result's sharding",
                         (long long)members[k]);
      break;
    }
    st = local_tile(full, s, ins->operands[0]->shape, members[k], tdims, &t);
    if (!st) hk_value_paste_box(v, t, off);
    hk_value_release(t);
  }
  free(members);
  if (st) {
    hk_value_release(v);
    return hk_status_prefix(st, "%s", ins->name);
  }
  *out = v;
  return NULL;
}

/* SPMDFullToShardShape: this device's tile of the operand under the
 * operand's sharding (zero padding in uneven tiles); the result shape is
 * that tile's.  Under a subgroup-manual result sharding the device holds
 * its manual group's value, which the group's tiles make up. */
static hk_status *full_to_shard(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                hk_value **out) {
  const hk_sharding *s = ins->operands[0]->sharding;
  if (ins->n_operands != 1 || ops[0]->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "SPMDFullToShardShape of a tuple or several operands");
  if (!has_data_tiling(s)) return identity(ins, ops, out);
  if (hk_sharding_data_rank(s) != ins->shape->rank || ins->shape->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand sharding does not match the result rank");
  if (has_data_tiling(ins->sharding) && hk_sharding_data_rank(ins->sharding) == ins->shape->rank)
    return manual_group_value(d, ins, ops[0], out);
  hk_status *st = hk_value_shard(ops[0], s, ins->operands[0]->shape, d->partition, ins->shape, out);
  return st ? hk_status_prefix(st, "%s", ins->name) : NULL;
}

/* Every partition's tile (nbytes each) of this replica, in partition order. */
static hk_status *gather_tiles(hk_device_ctx *d, const hk_instr *ins, const hk_value *tile,
                               uint8_t *all) {
  int64_t P = d->num_partitions;
  int64_t *group = malloc((size_t)P * sizeof(int64_t));
  if (!group) hk_out_of_memory();
  for (int64_t k = 0; k < P; k++) group[k] = d->replica * P + k;
  hk_collective_op op = {.instr = ins, .device = d->replica * P + d->partition,
                         .rank = (int32_t)d->partition, .group_size = (int32_t)P, .group = group};
  op.sequence = d->exec_count[hk_eval_plan_instr_index(d->plan, ins)];
  hk_status *st = d->backend->vt->all_gather(d->backend, &op, tile->data, tile->nbytes, all);
  free(group);
  return st;
}

/* Assembles the value of this device's manual group under s from every
 * partition's tile. */
static hk_status *assemble(hk_device_ctx *d, const hk_instr *ins, const hk_sharding *s,
                           const uint8_t *all, const int64_t *tdims, hk_value **out) {
  int64_t P = d->num_partitions;
  int64_t *members = malloc((size_t)P * sizeof(int64_t));
  if (!members) hk_out_of_memory();
  int64_t n = manual_group(s, d->partition, P, members);
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  hk_value *t = hk_value_new_array((hk_prim)r->elem, r->rank, tdims);
  hk_status *st = n > 0 ? NULL : hk_eval_error(ins, HK_INVALID_ARGUMENT, "partition %lld is not in the sharding",
                                               (long long)d->partition);
  for (int64_t k = 0; k < n && !st; k++) {
    int64_t off[HK_MAX_RANK];
    if (members[k] < 0 || members[k] >= P || !hk_sharding_tile_offset(s, ins->shape, members[k], off)) {
      st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "device %lld of the sharding does not run", (long long)members[k]);
      break;
    }
    memcpy(t->data, all + members[k] * t->nbytes, (size_t)t->nbytes);
    hk_value_paste_box(r, t, off);
  }
  hk_value_release(t);
  free(members);
  if (st) {
    hk_value_release(r);
    return st;
  }
  *out = r;
  return NULL;
}

/* SPMDShardToFullShape: each device's tile is its operand's tile under the
 * operand's sharding; the result, on every device of a manual group of the
 * result's sharding, is the value those tiles make up. */
static hk_status *shard_to_full(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                hk_value **out) {
  const hk_sharding *s = ins->sharding;
  if (ins->n_operands != 1 || ops[0]->elem == HK_TUPLE || ins->shape->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "SPMDShardToFullShape of a tuple or several operands");
  if (!has_data_tiling(s)) return identity(ins, ops, out);
  if (hk_sharding_data_rank(s) != ins->shape->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "sharding does not match the result rank");
  if (!d->backend)
    return hk_eval_error(ins, HK_FAILED_PRECONDITION,
                         "needs the devices of its sharding; run it on several devices (--num-partitions)");
  int64_t tdims[HK_MAX_RANK];
  tile_dims(s, ins->shape, tdims);
  const hk_instr *src = ins->operands[0];
  hk_value *tile = NULL;
  hk_status *st;
  if (has_data_tiling(src->sharding) && hk_sharding_data_rank(src->sharding) == src->shape->rank) {
    st = local_tile(ops[0], src->sharding, src->shape, d->partition, tdims, &tile);
  } else {
    for (int j = 0; j < ins->shape->rank; j++)
      if (j >= ops[0]->rank || ops[0]->dims[j] != tdims[j])
        return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand is not one tile of the result's sharding");
    st = local_tile(ops[0], NULL, src->shape, d->partition, tdims, &tile);
  }
  if (st) return hk_status_prefix(st, "%s", ins->name);
  uint8_t *all = malloc((size_t)(tile->nbytes * d->num_partitions > 0 ? tile->nbytes * d->num_partitions : 1));
  if (!all) hk_out_of_memory();
  st = gather_tiles(d, ins, tile, all);
  if (!st) st = assemble(d, ins, s, all, tdims, out);
  free(all);
  hk_value_release(tile);
  return st;
}

/* ---- opaque custom calls -------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + UINT64_C(0x9e3779b97f4a7c15) + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= UINT64_C(0xbf58476d1ce4e5b9);
  return h ^ (h >> 29);
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t w = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < n; i++) w = (w ^ b[i]) * UINT64_C(0x100000001b3);
  return mix(h, w ^ n);
}

/* Hash of a value: element types, dims and bytes of every leaf. */
static uint64_t hash_value(uint64_t h, const hk_value *v) {
  int64_t n = hk_value_leaf_count(v);
  h = mix(h, (uint64_t)n);
  for (int64_t k = 0; k < n; k++) {
    const hk_value *l = hk_value_leaf(v, k);
    h = mix(h, l->elem);
    for (int j = 0; j < l->rank; j++) h = mix(h, (uint64_t)l->dims[j]);
    if (l->data) h = hash_bytes(h, l->data, (size_t)l->nbytes);
  }
  return h;
}

/* An unknown target as a pure function: its result is hk_value_random of
 * its shape, seeded by a hash of (target, operand values). */
static hk_status *opaque_call(const hk_instr *ins, const char *target, hk_value *const *ops,
                              hk_value **out) {
  uint64_t h = hash_bytes(UINT64_C(0x6f70617175652d63), target, strlen(target));
  for (int k = 0; k < ins->n_operands; k++) h = hash_value(mix(h, (uint64_t)k), ops[k]);
  *out = hk_value_random(ins->shape, h, UINT64_C(0x63757374));
  return NULL;
}

hk_status *hk_op_custom_call(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                             hk_value **out) {
  const char *t = ins->attrs ? ins->attrs->custom_call_target : NULL;
  if (t && !strcmp(t, "TopK") && ins->n_operands == 1) return hk_op_topk(d, ins, ops, out);
  if (t && !strcmp(t, "SPMDFullToShardShape")) return full_to_shard(d, ins, ops, out);
  if (t && !strcmp(t, "SPMDShardToFullShape")) return shard_to_full(d, ins, ops, out);
  if (hk_eval_identity_custom_call(t)) return identity(ins, ops, out);
  if (hk_eval_is_host_execute(ins)) return hk_eval_computation(d, ins->called[0], ops, ins->n_operands, out);
  if (t && d->opts && d->opts->opaque_custom_calls) return opaque_call(ins, t, ops, out);
  return hk_eval_error(ins, HK_UNIMPLEMENTED, "custom-call target \"%s\" is not supported by the evaluator",
                       t ? t : "");
}
