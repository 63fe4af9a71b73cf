/* forward.c - forward propagation (XLA's InferShardingFromOperands): the
 * sharding an instruction gets from its operands, per opcode. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

#define AGGR(i) (prop_non_root_users(i) == 1)

/* XLA's PickRepresentativeOperand. */
static const hk_instr *representative_operand(const hk_instr *i) {
  switch (i->opcode) {
    case HK_OP_MAP: case HK_OP_PAD: case HK_OP_POWER: case HK_OP_OPTIMIZATION_BARRIER:
    case HK_OP_REVERSE: case HK_OP_SLICE: case HK_OP_SHIFT_LEFT:
    case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL:
      return i->operands[0]->sharding ? i->operands[0] : NULL;
    case HK_OP_CUSTOM_CALL:
      return prop_passthrough_cc(i) && i->n_operands > 0 ? i->operands[0] : NULL;
    case HK_OP_ALL_GATHER: case HK_OP_ALL_REDUCE: case HK_OP_REDUCE_SCATTER:
    case HK_OP_ALL_TO_ALL: case HK_OP_COLLECTIVE_PERMUTE: case HK_OP_CONCATENATE:
    case HK_OP_SORT: case HK_OP_WHILE: case HK_OP_BITCAST_CONVERT:
      break;
    default:
      if (!prop_is_elementwise(i) || i->opcode == HK_OP_RNG) return NULL;
  }
  const hk_instr *best = NULL;
  for (int32_t k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    if (op->sharding && (!best || sa_more_specific(op->sharding, best->sharding))) best = op;
  }
  return best;
}

/* Manual shardings flow through unchanged (not through tuples that merely
 * group independent values). */
static bool forward_manual(prop_ctx *cx, hk_instr *i, bool *changed) {
  bool correlated = i->opcode == HK_OP_REDUCE || i->opcode == HK_OP_SORT ||
                    i->opcode == HK_OP_REDUCE_WINDOW || i->opcode == HK_OP_CUSTOM_CALL ||
                    i->opcode == HK_OP_ASYNC_START || i->opcode == HK_OP_ASYNC_DONE ||
                    i->opcode == HK_OP_ASYNC_UPDATE;
  if ((i->sharding && !sa_xla_tile_maximal(i->sharding)) ||
      !(hk_shape_is_array(i->shape) || correlated))
    return false;
  for (int32_t k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    if (!op->sharding || !hk_sharding_is_manual(op->sharding)) continue;
    /* the manual region ends here: nothing is inferred from its operand */
    if (prop_is_cc(i, "SPMDShardToFullShape")) {
      *changed = false;
      return true;
    }
    if (cx->level == 0 &&
        (i->opcode == HK_OP_CONCATENATE || i->opcode == HK_OP_DYNAMIC_SLICE)) {
      *changed = false;
      return true;
    }
    const hk_sharding *man = prop_manual_from(cx->m, op->sharding);
    *changed = prop_set(cx, i, sa_tuple_of(cx->m, i->shape, man), op, "manual");
    return true;
  }
  return false;
}

/* An op that cannot be partitioned is replicated when an operand is. */
static bool forward_unsupported(prop_ctx *cx, hk_instr *i, bool may_combine) {
  if (hk_shape_is_tuple(i->shape) || i->n_operands == 0 || i->parent->root == i ||
      hk_instr_has_side_effect(i))
    return false;
  for (int32_t k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    if (op->sharding && op->sharding->kind == HK_SHARDING_REPLICATED)
      return prop_improve(cx, i, op->sharding, may_combine, false, op, "replicated-operand");
  }
  return false;
}

static bool forward_gte(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[0];
  if (!sa_spatial(op->sharding)) return false;
  const hk_sharding *s = sa_element(cx->m, op->sharding, op->shape, hk_instr_tuple_index(i));
  if (!s) return false;
  if (hk_sharding_is_manual(s)) return prop_set(cx, i, s, op, "get-tuple-element");
  return prop_improve(cx, i, s, may_combine, AGGR(i), op, "get-tuple-element");
}

static bool forward_tuple(prop_ctx *cx, hk_instr *i) {
  bool any = false;
  for (int32_t k = 0; k < i->n_operands; k++) any |= sa_spatial(i->operands[k]->sharding);
  if (!any) return false;
  int64_t leaves = hk_shape_leaf_count(i->shape);
  const hk_sharding **sub = malloc(sizeof *sub * (size_t)(leaves ? leaves : 1));
  if (!sub) hk_out_of_memory();
  const hk_sharding *cur = i->sharding ? sa_tuple_of(cx->m, i->shape, i->sharding) : NULL;
  for (int64_t l = 0; l < leaves; l++)
    sub[l] = cur && cur->kind == HK_SHARDING_TUPLE ? cur->elems[l] : hk_sharding_replicated(cx->m);
  int64_t at = 0;
  const hk_instr *src = NULL;
  for (int32_t k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    int64_t n = hk_shape_leaf_count(op->shape);
    if (op->sharding) {
      const hk_sharding *os = sa_tuple_of(cx->m, op->shape, op->sharding);
      for (int64_t l = 0; l < n; l++) {
        const hk_sharding *e = os->kind == HK_SHARDING_TUPLE ? os->elems[l] : os;
        /* a manual operand beats the replicated placeholder */
        bool manual_over_placeholder = e->kind == HK_SHARDING_MANUAL &&
                                       sub[at + l]->kind == HK_SHARDING_REPLICATED;
        if (!i->sharding || sa_more_specific(e, sub[at + l]) || manual_over_placeholder) {
          sub[at + l] = e;
          src = op;
        }
      }
    }
    at += n;
  }
  const hk_sharding *t = hk_shape_is_tuple(i->shape) ? hk_sharding_tuple(cx->m, (int)leaves, sub)
                                                     : sub[0];
  free(sub);
  if (i->sharding && hk_sharding_equivalent(t, i->sharding)) return false;
  return prop_set(cx, i, t, src, "tuple");
}

static bool forward_reduce(prop_ctx *cx, hk_instr *i, bool may_combine) {
  bool changed = false;
  int n_inputs = i->n_operands / 2;
  for (int k = 0; k < n_inputs; k++) {
    hk_instr *op = i->operands[k];
    if (!sa_spatial(op->sharding)) continue;
    const hk_sharding *os = op->sharding, *r;
    bool reduces_tiled = false;
    for (int32_t d = 0; d < i->n_dims; d++) reduces_tiled |= sa_dim(os, (int)i->dims[d]) > 1;
    const hk_shape *leaf = hk_shape_is_tuple(i->shape) ? i->shape->tuple[0] : i->shape;
    if (os->kind == HK_SHARDING_REPLICATED || (!cx->o.is_spmd && reduces_tiled)) {
      r = sa_replicate_all_data(cx->m, os, leaf->rank);
    } else if (os->kind != HK_SHARDING_TILED) {
      r = os;
    } else {
      r = hk_sharding_remove_dims(cx->m, os, i->n_dims, i->dims);
    }
    if (!r) continue;
    changed |= prop_improve(cx, i, sa_tuple_of(cx->m, i->shape, r), may_combine, AGGR(i), op,
                            "reduce");
  }
  return changed;
}

static bool forward_broadcast(prop_ctx *cx, hk_instr *i, bool may_combine) {
  if (cx->level < 3) return false;
  const hk_instr *op = i->operands[0];
  if (!sa_spatial(op->sharding) || op->sharding->kind == HK_SHARDING_REPLICATED) return false;
  if (op->sharding->kind != HK_SHARDING_TILED) return false;
  int64_t map[HK_MAX_RANK];
  for (int d = 0; d < i->shape->rank; d++) map[d] = -1;
  for (int32_t k = 0; k < i->n_dims; k++) map[i->dims[k]] = k;
  const hk_sharding *s = sa_transpose_collapsed(cx->m, op->sharding, op->shape->rank, NULL,
                                                i->shape->rank, map);
  return prop_improve(cx, i, s, may_combine, AGGR(i), op, "broadcast");
}

/* Only pass through a concat at level 0 for params in repeated layers
 * (param/gte -> reshape -> concat), sharded off the concat dim. */
static bool concat_operand_passes_early(const hk_instr *op) {
  return sa_spatial(op->sharding) && sa_num_tiles(op->sharding) > 1 &&
         op->opcode == HK_OP_RESHAPE &&
         (op->operands[0]->opcode == HK_OP_PARAMETER ||
          op->operands[0]->opcode == HK_OP_GET_TUPLE_ELEMENT);
}

static bool forward_concat(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = representative_operand(i);
  if (!op || !sa_spatial(op->sharding)) return false;
  if (cx->level == 0) {
    for (int32_t k = 0; k < i->n_operands; k++) {
      const hk_instr *c = i->operands[k];
      if (!concat_operand_passes_early(c)) return false;
      if (i->n_dims > 0 && sa_dim(c->sharding, (int)i->dims[0]) > 1) return false;
    }
  }
  return prop_improve(cx, i, op->sharding, may_combine, AGGR(i), op, "concatenate");
}

static bool forward_transpose(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[0];
  if (!sa_spatial(op->sharding)) return false;
  const hk_sharding *s = op->sharding;
  if (s->kind == HK_SHARDING_TILED) s = hk_sharding_transpose(cx->m, s, i->dims);
  return prop_improve(cx, i, s, may_combine, AGGR(i), op, "transpose");
}

static bool has_dilation(const hk_instr *i, bool base_only) {
  const hk_window *w = i->attrs ? i->attrs->window : NULL;
  if (!w) return false;
  for (int32_t d = 0; d < w->n_dims; d++)
    if (w->dims[d].base_dilation > 1 || (!base_only && w->dims[d].window_dilation > 1))
      return true;
  return false;
}

static bool forward_reduce_window(prop_ctx *cx, hk_instr *i, bool may_combine) {
  if (has_dilation(i, false)) return false;
  bool changed = false;
  for (int k = 0; k < i->n_operands / 2; k++) {
    const hk_instr *op = i->operands[k];
    if (!sa_spatial(op->sharding)) continue;
    changed |= prop_improve(cx, i, sa_tuple_of(cx->m, i->shape, op->sharding), may_combine,
                            AGGR(i), op, "reduce-window");
  }
  return changed;
}

static bool forward_reshape(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[0];
  if (!sa_spatial(op->sharding)) return false;
  const hk_sharding *s = sa_reshape(cx->m, op->shape, i->shape, op->sharding);
  if (s) return prop_improve(cx, i, s, may_combine, AGGR(i), op, "reshape");
  if (i->sharding) return false;
  return prop_set(cx, i, sa_replicate_all_data(cx->m, op->sharding, i->shape->rank), op,
                  "reshape-replicated");
}

static bool forward_reverse(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[0];
  if (!sa_spatial(op->sharding)) return false;
  /* Reversing a dim reverses the order of its tiles. */
  const hk_sharding *s = op->sharding;
  if (s->kind == HK_SHARDING_TILED) {
    pt_tiles t;
    pt_from_sharding(s, &t);
    int64_t total = pt_count(&t);
    int64_t *nd = malloc(sizeof(int64_t) * (size_t)total);
    if (!nd) hk_out_of_memory();
    int64_t idx[HK_MAX_RANK] = {0};
    for (int64_t f = 0; f < total; f++) {
      int64_t src = 0;
      for (int k = 0; k < t.n; k++) {
        int64_t x = idx[k];
        for (int32_t r = 0; r < i->n_dims; r++)
          if (i->dims[r] == k) x = t.dims[k] - 1 - x;
        src = src * t.dims[k] + x;
      }
      nd[f] = t.dev[src];
      for (int k = t.n - 1; k >= 0; k--) {
        if (++idx[k] < t.dims[k]) break;
        idx[k] = 0;
      }
    }
    free(t.dev);
    t.dev = nd;
    s = pt_to_sharding(cx->m, &t, op->sharding);
    pt_free(&t);
  }
  return prop_improve(cx, i, s, may_combine, AGGR(i), op, "reverse");
}

static bool forward_parameter(prop_ctx *cx, hk_instr *i, bool may_combine) {
  hk_instr *caller = prop_caller(i->parent);
  if (!caller) return false;
  int64_t pn = hk_instr_parameter_number(i);
  if (caller->opcode == HK_OP_CONDITIONAL) {
    for (int32_t b = 0; b < caller->n_called; b++) {
      if (caller->called[b] != i->parent) continue;
      const hk_instr *op = caller->operands[b + 1];
      return op->sharding && prop_improve(cx, i, op->sharding, may_combine, false, op,
                                          "conditional-branch-parameter");
    }
    return false;
  }
  if (caller->opcode == HK_OP_CALL && pn < caller->n_operands) {
    const hk_instr *op = caller->operands[pn];
    return op->sharding && prop_improve(cx, i, op->sharding, may_combine, false, op,
                                        "call-parameter");
  }
  return false;
}

static bool forward_sort(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = representative_operand(i);
  if (!op || !sa_spatial(op->sharding)) return false;
  if (op->sharding->kind == HK_SHARDING_TILED && i->n_dims > 0 &&
      sa_dim(op->sharding, (int)i->dims[0]) != 1) {
    /* sharded along the sort dim: only if a free dim can take it later */
    bool movable = false;
    const hk_shape *sh = op->shape;
    for (int d = 0; d < sh->rank; d++)
      movable |= d != i->dims[0] && sa_dim(op->sharding, d) == 1 && sh->dims[d] > 1;
    if (!movable) return false;
  }
  return prop_improve(cx, i, sa_tuple_of(cx->m, i->shape, op->sharding), may_combine, AGGR(i),
                      op, "sort");
}

/* The operand's sharding, unless a sliced dim is partitioned. */
static bool slice_dim_is_sharded(const hk_instr *i, const hk_instr *op) {
  if (!sa_spatial(op->sharding) || sa_num_tiles(op->sharding) == 1) return false;
  for (int d = 0; d < i->shape->rank && d < op->shape->rank; d++)
    if (sa_dim(op->sharding, d) > 1 && i->shape->dims[d] != op->shape->dims[d]) return true;
  return false;
}

/* The dims a (dynamic-)slice cuts: sizes of slice and operand differ. */
static int sliced_dims(const hk_shape *a, const hk_shape *b, int64_t *out) {
  int n = 0;
  for (int d = 0; d < a->rank && d < b->rank; d++)
    if (a->dims[d] != b->dims[d]) out[n++] = d;
  return n;
}

static bool forward_dynamic_slice(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[i->opcode == HK_OP_DYNAMIC_SLICE ? 0 : 1];
  if (cx->level == 0 && slice_dim_is_sharded(i, op)) return false;
  bool changed = false;
  if (sa_spatial(op->sharding)) {
    int64_t dims[HK_MAX_RANK];
    int n = sliced_dims(i->shape, op->shape, dims);
    const hk_sharding *s = op->sharding;
    if (s->kind == HK_SHARDING_TILED && n > 0) s = hk_sharding_replicate_dims(cx->m, s, n, dims);
    changed |= prop_improve(cx, i, s, may_combine, AGGR(i), op, "dynamic-slice");
  }
  if (i->opcode == HK_OP_DYNAMIC_UPDATE_SLICE && sa_spatial(i->operands[0]->sharding))
    changed |= prop_improve(cx, i, i->operands[0]->sharding, may_combine, false, i->operands[0],
                            "dynamic-update-slice-base");
  return changed;
}

static bool forward_while(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_instr *op = i->operands[0];
  if (!op->sharding) return false;
  const hk_sharding *s = sa_tuple_of(cx->m, i->shape, op->sharding);
  if (i->sharding) sa_merge(cx->m, i->sharding, &s, may_combine);
  return prop_improve(cx, i, s, may_combine, false, op, "while");
}

static bool forward_custom_call(prop_ctx *cx, hk_instr *i, bool may_combine) {
  const hk_custom_call_partitioner *p = prop_cc_partitioner(cx, i);
  const hk_sharding *s = NULL;
  const hk_instr *src = i->n_operands ? i->operands[0] : NULL;
  if (p && p->vt->is_shardable && p->vt->is_shardable(p, i)) {
    if (!p->vt->infer_sharding_from_operands) return false;
    s = p->vt->infer_sharding_from_operands(p, i);
    if (!s) return false;
  } else {
    const hk_instr *op = representative_operand(i);
    if (!op || !sa_spatial(op->sharding)) return false;
    s = op->sharding;
    src = op;
  }
  return prop_improve(cx, i, s, may_combine, AGGR(i), src, "custom-call");
}

static bool forward_elementwise(prop_ctx *cx, hk_instr *i, bool may_combine) {
  bool changed = false;
  for (int32_t k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    if (!sa_spatial(op->sharding)) continue;
    if (i->opcode == HK_OP_RNG) {
      changed |= prop_improve(cx, i, sa_replicate_all_data(cx->m, op->sharding, i->shape->rank),
                              may_combine, AGGR(i), op, "rng");
      continue;
    }
    changed |= prop_improve(cx, i, op->sharding, may_combine, i->n_operands == 1 && AGGR(i), op,
                            "elementwise");
  }
  return changed;
}

static bool forward_default(prop_ctx *cx, hk_instr *i, bool may_combine) {
  if (prop_is_elementwise(i) && may_combine) return forward_elementwise(cx, i, may_combine);
  const hk_instr *op = representative_operand(i);
  if (!op || !sa_spatial(op->sharding)) return false;
  const char *rule = prop_is_elementwise(i) ? "elementwise" : hk_opcode_name((hk_opcode)i->opcode);
  return prop_improve(cx, i, op->sharding, may_combine, AGGR(i), op, rule);
}

static bool forward_by_opcode(prop_ctx *cx, hk_instr *i, bool mc) {
  switch (i->opcode) {
    case HK_OP_GET_TUPLE_ELEMENT: return forward_gte(cx, i, mc);
    case HK_OP_TUPLE: return forward_tuple(cx, i);
    case HK_OP_REDUCE: return forward_reduce(cx, i, mc);
    case HK_OP_BROADCAST: return forward_broadcast(cx, i, mc);
    case HK_OP_CONCATENATE: return forward_concat(cx, i, mc);
    case HK_OP_CONVOLUTION: return prop_conv_forward(cx, i, mc);
    case HK_OP_TRANSPOSE: return forward_transpose(cx, i, mc);
    case HK_OP_REDUCE_WINDOW: return forward_reduce_window(cx, i, mc);
    case HK_OP_SELECT_AND_SCATTER: {
      const hk_instr *op = i->operands[0];
      if (!sa_spatial(op->sharding) || has_dilation(i, true)) return false;
      return prop_improve(cx, i, op->sharding, mc, AGGR(i), op, "select-and-scatter");
    }
    case HK_OP_RESHAPE: return forward_reshape(cx, i, mc);
    case HK_OP_REVERSE: return forward_reverse(cx, i, mc);
    case HK_OP_DOT: return prop_dot_forward(cx, i, mc);
    case HK_OP_PARAMETER: return forward_parameter(cx, i, mc);
    case HK_OP_SORT: return forward_sort(cx, i, mc);
    case HK_OP_DYNAMIC_SLICE: case HK_OP_DYNAMIC_UPDATE_SLICE:
      return forward_dynamic_slice(cx, i, mc);
    case HK_OP_GATHER: return prop_gather_forward(cx, i, mc);
    case HK_OP_SCATTER: return prop_scatter_forward(cx, i, mc);
    case HK_OP_WHILE: return forward_while(cx, i, mc);
    case HK_OP_CUSTOM_CALL: return forward_custom_call(cx, i, mc);
    case HK_OP_CALL: {
      const hk_instr *root = i->n_called ? i->called[0]->root : NULL;
      if (!root || !root->sharding) return false;
      return prop_improve(cx, i, root->sharding, mc, false, root, "call-root");
    }
    default: return forward_default(cx, i, mc);
  }
}

bool prop_infer_from_operands(prop_ctx *cx, hk_instr *i) {
  if (i->sharding && hk_sharding_is_manual(i->sharding)) return false;
  bool changed = false;
  if (forward_manual(cx, i, &changed)) return changed;   /* manual flows at every level */
  if (!prop_can_at_level(i, cx->level)) return false;
  bool mc = cx->o.is_spmd && cx->level > 0;
  bool allow_out = cx->allow_out_any;
  if (!prop_supports_spatial(cx, i, allow_out)) return forward_unsupported(cx, i, mc);
  return forward_by_opcode(cx, i, mc);
}
