/* common.c - shared pieces of the propagation rules: setting a sharding
 * with its provenance, XLA's MaybeImproveInstructionSharding, which ops may
 * be partitioned, and the aggressiveness gate. */
#include <string.h>

#include "prop.h"

bool prop_set(prop_ctx *cx, hk_instr *i, const hk_sharding *s, const hk_instr *src,
              const char *rule) {
  if (!s || i->sharding == s) return false;
  hk_instr_set_sharding(i, s);
  pi_info *p = pi(i);
  if (p) {
    p->src = src;
    p->rule = rule;
    p->level = (int8_t)cx->level;
    p->dir = (int8_t)cx->cur_dir;
  }
  return true;
}

const hk_sharding *prop_manual_from(hk_module *m, const hk_sharding *from) {
  if (!from || from->kind == HK_SHARDING_TUPLE || from->n_metadata == 0) return hk_sharding_manual(m);
  hk_sharding t;
  memset(&t, 0, sizeof t);
  t.kind = HK_SHARDING_MANUAL;
  t.n_metadata = from->n_metadata;
  t.metadata = from->metadata;
  return hk_sharding_intern(m, &t);
}

int64_t prop_non_root_users(const hk_instr *i) {
  int64_t n = i->n_users;
  for (int32_t k = 0; k < i->n_users; k++)
    if (i->users[k] == i->parent->root) n--;
  return n;
}

/* XLA's IsSubTilingOrEqualSharding: every device's tile under cand lies
 * inside its tile under old, so taking cand needs no data movement. */
/* XLA's IsSubTilingOrEqualSharding: every device's tile under cand lies
 * inside its tile under old, so taking cand needs no data movement. */
static bool refines_without_reshard(const hk_shape *shape, const hk_sharding *old,
                                    const hk_sharding *cand) {
  if (cand->kind != HK_SHARDING_TILED || old->kind != HK_SHARDING_TILED) return false;
  if (sa_manual_subgroup(cand) || sa_manual_subgroup(old)) return hk_sharding_equivalent(cand, old);
  int64_t n = 1;
  for (int k = 0; k < cand->n_tile_dims; k++) n *= cand->tile_dims[k];
  int64_t co[HK_MAX_RANK], cl[HK_MAX_RANK], oo[HK_MAX_RANK], ol[HK_MAX_RANK];
  for (int64_t k = 0; k < n; k++) {
    int64_t dev = cand->devices[k];
    if (!hk_sharding_tile_offset(cand, shape, dev, co) ||
        !hk_sharding_tile_limit(cand, shape, dev, cl) ||
        !hk_sharding_tile_offset(old, shape, dev, oo) ||
        !hk_sharding_tile_limit(old, shape, dev, ol))
      return false;
    for (int d = 0; d < shape->rank; d++)
      if (cl[d] > co[d] && (co[d] < oo[d] || cl[d] > ol[d])) return false;
  }
  return true;
}

bool prop_accept(prop_ctx *cx, const hk_shape *shape, const hk_sharding *old,
                 const hk_sharding **cand, bool may_combine, bool aggressive) {
  int64_t tiles = sa_num_tiles(*cand);
  if (!sa_merge(cx->m, old, cand, may_combine)) return false;
  if (!aggressive && hk_shape_is_array(shape) && old->kind == HK_SHARDING_TILED &&
      sa_num_tiles(*cand) == tiles && !refines_without_reshard(shape, old, *cand))
    return false;
  return !hk_sharding_equivalent(*cand, old);
}

bool prop_improve(prop_ctx *cx, hk_instr *i, const hk_sharding *s, bool may_combine,
                  bool aggressive, const hk_instr *src, const char *rule) {
  if (!s || !sa_spatial(s)) return false;
  s = sa_tuple_of(cx->m, i->shape, s);
  if (!i->sharding) return prop_set(cx, i, s, src, rule);
  const hk_sharding *cand = s;
  if (!prop_accept(cx, i->shape, i->sharding, &cand, may_combine, aggressive)) return false;
  return prop_set(cx, i, cand, src, rule);
}

bool prop_is_cc(const hk_instr *i, const char *target) {
  return i->opcode == HK_OP_CUSTOM_CALL && i->attrs && i->attrs->custom_call_target &&
         strcmp(i->attrs->custom_call_target, target) == 0;
}

const hk_custom_call_partitioner *prop_cc_partitioner(const prop_ctx *cx, const hk_instr *i) {
  if (i->opcode != HK_OP_CUSTOM_CALL || !cx->reg || !i->attrs || !i->attrs->custom_call_target)
    return NULL;
  return hk_registry_find_custom_call_partitioner(cx->reg, i->attrs->custom_call_target);
}

bool prop_is_elementwise(const hk_instr *i) {
  return hk_opcode_is_elementwise((hk_opcode)i->opcode) || i->opcode == HK_OP_RNG ||
         i->opcode == HK_OP_MAP;
}

bool prop_can_at_level(const hk_instr *i, int level) {
  if (level < 1 && !(prop_is_elementwise(i) || prop_is_cc(i, "Sharding"))) {
    switch (i->opcode) {
      case HK_OP_TRANSPOSE: case HK_OP_RESHAPE: case HK_OP_TUPLE:
      case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_WHILE: case HK_OP_DYNAMIC_SLICE:
      case HK_OP_DYNAMIC_UPDATE_SLICE:
      case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_CONCATENATE: case HK_OP_CALL:
      case HK_OP_COPY:
        break;
      default:
        return false;
    }
  }
  if (level < 2 && i->opcode == HK_OP_BROADCAST) return false;
  return true;
}

bool prop_passthrough_cc(const hk_instr *i) {
  if (prop_is_cc(i, "Sharding") || prop_is_cc(i, "X64Combine")) return true;
  if (i->n_operands != 1 || !hk_shape_is_array(i->shape) ||
      !hk_shape_is_array(i->operands[0]->shape) || i->operands[0]->shape->rank != i->shape->rank)
    return false;
  static const char *const names[] = {"ResizeNearest", "ResizeBilinear", "ResizeNearestGrad",
                                      "ResizeBilinearGrad", "Cholesky", "LayoutConstraint",
                                      "MoveToHost", "MoveToDevice"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (prop_is_cc(i, names[k])) return true;
  return false;
}

/* allow_spmd_sharding_propagation_to_parameters for leaf `leaf` of entry
 * parameter k: one value for all, one per parameter, or (a single tuple
 * parameter) one per leaf. */
bool prop_param_leaf_allowed(const prop_ctx *cx, const hk_computation *e, int64_t k, int64_t leaf) {
  if (!cx->allow_params_any) return false;
  if (cx->o.n_params == 1) return cx->o.params[0];
  if (e->n_params == 1 && k == 0 && cx->o.n_params != 1 && e->params[0] &&
      hk_shape_is_tuple(e->params[0]->shape) &&
      cx->o.n_params == hk_shape_leaf_count(e->params[0]->shape))
    return leaf < cx->o.n_params && cx->o.params[leaf];
  return k < cx->o.n_params && cx->o.params[k];
}

bool prop_param_allowed(const prop_ctx *cx, const hk_computation *e, int64_t k) {
  int64_t leaves = e->params[k] ? hk_shape_leaf_count(e->params[k]->shape) : 1;
  for (int64_t l = 0; l < (leaves ? leaves : 1); l++)
    if (prop_param_leaf_allowed(cx, e, k, l)) return true;
  return false;
}

static bool entry_param_allowed(const prop_ctx *cx, const hk_instr *i) {
  if (!i->parent->is_entry) return false;
  return prop_param_allowed(cx, i->parent, hk_instr_parameter_number(i));
}

bool prop_supports_spatial(const prop_ctx *cx, const hk_instr *i, bool allow_out) {
  const hk_computation *c = i->parent;
  bool is_entry_root = c->is_entry && c->root == i;
  if (c->root == i && !prop_caller(c) && !(is_entry_root && allow_out)) return false;
  if (prop_is_elementwise(i) && (i->opcode != HK_OP_RNG || cx->o.is_spmd)) return true;
  switch (i->opcode) {
    case HK_OP_BROADCAST: case HK_OP_CONCATENATE: case HK_OP_CONDITIONAL:
    case HK_OP_CONSTANT: case HK_OP_CONVOLUTION: case HK_OP_OPTIMIZATION_BARRIER:
    case HK_OP_DOT: case HK_OP_DYNAMIC_SLICE: case HK_OP_DYNAMIC_UPDATE_SLICE:
    case HK_OP_GATHER: case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_INFEED: case HK_OP_IOTA:
    case HK_OP_PAD: case HK_OP_REDUCE_WINDOW: case HK_OP_RESHAPE: case HK_OP_SCATTER:
    case HK_OP_SELECT_AND_SCATTER: case HK_OP_SLICE: case HK_OP_SORT: case HK_OP_TRANSPOSE:
    case HK_OP_TUPLE: case HK_OP_WHILE: case HK_OP_REDUCE: case HK_OP_RNG_BIT_GENERATOR:
    case HK_OP_CALL: case HK_OP_COPY: case HK_OP_BITCAST:
      return true;
    case HK_OP_ALL_REDUCE: case HK_OP_REDUCE_SCATTER:
      return !hk_instr_has_channel_id(i) || !cx->o.is_spmd;
    case HK_OP_PARAMETER:
      return prop_caller(c) != NULL || entry_param_allowed(cx, i);
    case HK_OP_REVERSE:
      return cx->o.is_spmd;
    case HK_OP_CUSTOM_CALL: {
      if (!cx->o.is_spmd) return false;
      const hk_custom_call_partitioner *p = prop_cc_partitioner(cx, i);
      if (p) return p->vt->is_shardable && p->vt->is_shardable(p, i);
      return prop_passthrough_cc(i);
    }
    default:
      return false;
  }
}
