/* backward.c - backward propagation (XLA's InferShardingFromUsers and
 * GetShardingFromUser): the sharding an operand should have given how its
 * users are sharded. */
#include <stdlib.h>
#include <string.h>

#include "prop.h"

static int64_t operand_index(const hk_instr *user, const hk_instr *i) {
  for (int32_t k = 0; k < user->n_operands; k++)
    if (user->operands[k] == i) return k;
  return -1;
}

/* XLA's InferBroadcastOperandSharding. */
static const hk_sharding *from_broadcast(prop_ctx *cx, const hk_instr *user) {
  const hk_sharding *s = user->sharding;
  if (s->kind != HK_SHARDING_TILED) return s;
  int64_t rep[HK_MAX_RANK];
  int n = 0;
  bool needs = false;
  for (int d = 0; d < user->shape->rank; d++) {
    bool kept = false;
    for (int32_t k = 0; k < user->n_dims; k++) kept |= user->dims[k] == d;
    if (kept) continue;
    rep[n++] = d;
    needs |= sa_dim(s, d) > 1;
  }
  if (!cx->o.is_spmd && needs) return NULL;
  return hk_sharding_remove_dims(cx->m, s, n, rep);
}

/* Non-SPMD: an operand of a concat sharded along the concat dim lives on
 * the devices whose tiles its data falls into. */
static const hk_sharding *concat_operand_tiles(prop_ctx *cx, const hk_instr *i,
                                               const hk_instr *user, int64_t cdim) {
  const hk_sharding *s = user->sharding;
  int64_t start = 0;
  for (int32_t k = 0; k < user->n_operands && user->operands[k] != i; k++)
    start += user->operands[k]->shape->dims[cdim];
  int64_t parts = s->tile_dims[cdim];
  int64_t tile = (user->shape->dims[cdim] + parts - 1) / parts;
  int64_t lo = start / tile, hi = (start + i->shape->dims[cdim] + tile - 1) / tile;
  if (hi > parts) hi = parts;
  pt_tiles t, o;
  pt_from_sharding(s, &t);
  o = t;
  o.dims[cdim] = hi - lo;
  o.dev = malloc(sizeof(int64_t) * (size_t)pt_count(&o));
  if (!o.dev) hk_out_of_memory();
  int64_t idx[HK_MAX_RANK] = {0}, n = pt_count(&o);
  for (int64_t f = 0; f < n; f++) {
    int64_t src = 0;
    for (int d = 0; d < t.n; d++) src = src * t.dims[d] + idx[d] + (d == cdim ? lo : 0);
    o.dev[f] = t.dev[src];
    for (int d = t.n - 1; d >= 0; d--) {
      if (++idx[d] < o.dims[d]) break;
      idx[d] = 0;
    }
  }
  const hk_sharding *r = n == 1 ? hk_sharding_maximal(cx->m, o.dev[0]) : pt_to_sharding(cx->m, &o, s);
  pt_free(&t);
  pt_free(&o);
  return r;
}

static const hk_sharding *from_concat(prop_ctx *cx, const hk_instr *i, const hk_instr *user) {
  if (cx->level == 0) return NULL;
  const hk_sharding *s = user->sharding;
  if (s->kind != HK_SHARDING_TILED || user->n_dims < 1) return s;
  int64_t cdim = user->dims[0];
  if (sa_dim(s, (int)cdim) == 1 || cx->o.is_spmd) return s;
  return concat_operand_tiles(cx, i, user, cdim);
}

static const hk_sharding *from_dynamic_slice(prop_ctx *cx, const hk_instr *i,
                                             const hk_instr *user) {
  if (cx->level == 0) return NULL;
  const hk_sharding *s = user->sharding;
  if (s->kind == HK_SHARDING_REPLICATED) return s;
  if (user->opcode == HK_OP_DYNAMIC_UPDATE_SLICE && user->operands[0] == i) return s;
  const hk_instr *op = user->operands[user->opcode == HK_OP_DYNAMIC_SLICE ? 0 : 1];
  if (op != i) return NULL;
  if (s->kind != HK_SHARDING_TILED) return s;
  int64_t dims[HK_MAX_RANK];
  int n = 0;
  for (int d = 0; d < user->shape->rank; d++)
    if (user->shape->dims[d] != op->shape->dims[d]) dims[n++] = d;
  return n ? hk_sharding_replicate_dims(cx->m, s, n, dims) : s;
}

static const hk_sharding *from_reduce(prop_ctx *cx, const hk_instr *i, const hk_instr *user) {
  if (!hk_shape_is_array(i->shape) || i->shape->rank == 0) return NULL;
  int64_t k = operand_index(user, i);
  if (k >= user->n_operands / 2) return NULL;          /* an init value */
  const hk_sharding *s = sa_element(cx->m, user->sharding, user->shape, k);
  if (!s) return NULL;
  if (s->kind == HK_SHARDING_TILED) {
    int64_t at[HK_MAX_RANK];
    for (int32_t d = 0; d < user->n_dims; d++) at[d] = user->dims[d];
    s = hk_sharding_insert_dims(cx->m, s, user->n_dims, at);
    if (!s) return NULL;
  }
  /* the other inputs of a variadic reduce refine it where compatible */
  for (int32_t j = 0; j < user->n_operands / 2; j++) {
    const hk_instr *o = user->operands[j];
    if (o != i && o->sharding && hk_shape_is_array(o->shape) && o->shape->rank == i->shape->rank)
      sa_merge_compatible(cx->m, o->sharding, sa_num_tiles(s) + 1, &s);
  }
  return s;
}

/* The ranks of shape's leaves in order (arrays: their rank; others 0). */
static int64_t leaf_ranks(const hk_shape *s, int *out, int64_t at, int64_t cap) {
  if (!hk_shape_is_tuple(s)) {
    if (at < cap) out[at] = hk_shape_is_array(s) ? s->rank : 0;
    return at + 1;
  }
  for (int32_t k = 0; k < s->n_tuple; k++) at = leaf_ranks(s->tuple[k], out, at, cap);
  return at;
}

static const hk_sharding *from_gte_user(prop_ctx *cx, const hk_instr *i, const hk_instr *user) {
  int64_t idx = hk_instr_tuple_index(user);
  int64_t leaves = hk_shape_leaf_count(i->shape), at = 0;
  for (int64_t t = 0; t < idx && t < i->shape->n_tuple; t++)
    at += hk_shape_leaf_count(i->shape->tuple[t]);
  const hk_sharding *us = sa_tuple_of(cx->m, user->shape, user->sharding);
  int64_t n = hk_shape_is_tuple(user->shape) ? us->n_elems : 1;
  if (hk_shape_is_tuple(user->shape) && n == 0) return NULL;
  const hk_sharding **el = malloc(sizeof *el * (size_t)(leaves ? leaves : 1));
  if (!el) hk_out_of_memory();
  const hk_sharding *cur = i->sharding ? sa_tuple_of(cx->m, i->shape, i->sharding) : NULL;
  const hk_sharding *first = hk_shape_is_tuple(user->shape) ? us->elems[0] : us;
  /* unsharded leaves: replicated, keeping the user's manual subgroups, at
   * each leaf's own rank (XLA's ReplicateAllDataDims) */
  int *ranks = malloc(sizeof *ranks * (size_t)(leaves ? leaves : 1));
  if (!ranks) hk_out_of_memory();
  leaf_ranks(i->shape, ranks, 0, leaves);
  for (int64_t l = 0; l < leaves; l++)
    el[l] = cur && cur->kind == HK_SHARDING_TUPLE ? cur->elems[l]
                                                   : sa_replicate_all_data(cx->m, first, ranks[l]);
  free(ranks);
  for (int64_t l = 0; l < n && at + l < leaves; l++)
    el[at + l] = hk_shape_is_tuple(user->shape) ? us->elems[l] : us;
  const hk_sharding *r = hk_sharding_tuple(cx->m, (int)leaves, el);
  free(el);
  return r;
}

/* The element of the tuple user i is; used several times, the most
 * specific of its elements (XLA's repeated-operand rule). */
static const hk_sharding *from_tuple_user(prop_ctx *cx, const hk_instr *i, const hk_instr *user) {
  const hk_sharding *ts = sa_tuple_of(cx->m, user->shape, user->sharding), *best = NULL;
  for (int32_t k = 0; k < user->n_operands; k++) {
    if (user->operands[k] != i) continue;
    const hk_sharding *e = sa_element(cx->m, ts, user->shape, k);
    if (!best || (e && sa_more_specific(e, best))) best = e;
  }
  return best;
}

static const hk_sharding *from_transpose(prop_ctx *cx, const hk_instr *user) {
  if (user->sharding->kind != HK_SHARDING_TILED) return user->sharding;
  int64_t rev[HK_MAX_RANK];
  for (int32_t k = 0; k < user->n_dims; k++) rev[user->dims[k]] = k;
  return hk_sharding_transpose(cx->m, user->sharding, rev);
}

static bool same_dims(const hk_shape *a, const hk_shape *b);

/* An outfeed's sharding covers (operand 0, token) flattened: operand 0
 * takes the leading elements. */
static const hk_sharding *from_outfeed(prop_ctx *cx, const hk_instr *i, const hk_instr *user) {
  if (user->operands[0] != i) return NULL;
  const hk_sharding *s = user->sharding;
  if (s->kind != HK_SHARDING_TUPLE) return sa_tuple_of(cx->m, i->shape, s);
  int64_t n = hk_shape_leaf_count(i->shape);
  if (n > s->n_elems) return NULL;
  if (!hk_shape_is_tuple(i->shape)) return s->elems[0];
  return hk_sharding_tuple(cx->m, (int)n, s->elems);
}

static const hk_sharding *from_custom_call_user(prop_ctx *cx, const hk_instr *i,
                                                const hk_instr *user) {
  (void)cx;
  return same_dims(i->shape, user->shape) ? user->sharding : NULL;
}

static bool same_dims(const hk_shape *a, const hk_shape *b) {
  if (hk_shape_is_tuple(a) || hk_shape_is_tuple(b)) {
    if (!hk_shape_is_tuple(a) || !hk_shape_is_tuple(b) || a->n_tuple != b->n_tuple) return false;
    for (int32_t k = 0; k < a->n_tuple; k++)
      if (!same_dims(a->tuple[k], b->tuple[k])) return false;
    return true;
  }
  return a->rank == b->rank && (a->rank == 0 || !memcmp(a->dims, b->dims, sizeof(int64_t) * a->rank));
}

static const hk_sharding *from_user_by_opcode(prop_ctx *cx, const hk_instr *i,
                                              const hk_instr *user, bool mc, const char **rule) {
  *rule = hk_opcode_name((hk_opcode)user->opcode);
  switch (user->opcode) {
    case HK_OP_BROADCAST: return from_broadcast(cx, user);
    case HK_OP_CONCATENATE: return from_concat(cx, i, user);
    case HK_OP_CONVOLUTION: case HK_OP_DOT:
      *rule = user->opcode == HK_OP_DOT ? "dot-operand" : "convolution-operand";
      return prop_dot_backward(cx, i, user, mc);
    case HK_OP_DYNAMIC_SLICE: case HK_OP_DYNAMIC_UPDATE_SLICE:
      return from_dynamic_slice(cx, i, user);
    case HK_OP_REDUCE_WINDOW: {
      int64_t k = operand_index(user, i);
      if (k >= user->n_operands / 2) return NULL;
      return sa_element(cx->m, user->sharding, user->shape, k);
    }
    case HK_OP_RESHAPE: {
      const hk_sharding *s = sa_reshape(cx->m, user->shape, i->shape, user->sharding);
      return s ? s : sa_replicate_all_data(cx->m, user->sharding, i->shape->rank);
    }
    case HK_OP_PAD:
      return user->operands[0] == i ? user->sharding : NULL;
    case HK_OP_SLICE:
      return user->sharding;
    case HK_OP_TRANSPOSE: return from_transpose(cx, user);
    case HK_OP_TUPLE: return from_tuple_user(cx, i, user);
    case HK_OP_GET_TUPLE_ELEMENT: return from_gte_user(cx, i, user);
    case HK_OP_REDUCE: return from_reduce(cx, i, user);
    case HK_OP_SORT: {
      if (!hk_shape_is_tuple(user->shape)) return user->sharding;
      return sa_element(cx->m, user->sharding, user->shape, operand_index(user, i));
    }
    case HK_OP_REVERSE:
      return user->sharding->kind == HK_SHARDING_TILED ? NULL : user->sharding;
    case HK_OP_GATHER: return prop_gather_backward(cx, i, user, mc);
    case HK_OP_SCATTER: return prop_scatter_backward(cx, i, user, mc);
    case HK_OP_CUSTOM_CALL: return from_custom_call_user(cx, i, user);
    case HK_OP_OUTFEED: return from_outfeed(cx, i, user);
    case HK_OP_CALL: case HK_OP_CONDITIONAL: {
      int64_t k = operand_index(user, i);
      const hk_computation *c = NULL;
      int64_t pn = k;
      if (user->opcode == HK_OP_CALL && user->n_called > 0) c = user->called[0];
      if (user->opcode == HK_OP_CONDITIONAL && k >= 1 && k - 1 < user->n_called) {
        c = user->called[k - 1];
        pn = 0;
      }
      if (!c || pn >= c->n_params || !c->params[pn]) return NULL;
      *rule = "called-parameter";
      return c->params[pn]->sharding;
    }
    default:
      if (same_dims(i->shape, user->shape)) {
        *rule = prop_is_elementwise(user) ? "elementwise" : *rule;
        return user->sharding;
      }
      return NULL;
  }
}

const hk_sharding *prop_sharding_from_user(prop_ctx *cx, const hk_instr *i,
                                           const hk_instr *user, const char **rule) {
  if (!prop_can_at_level(user, cx->level)) return NULL;
  bool via_params = user->opcode == HK_OP_CALL || user->opcode == HK_OP_CONDITIONAL;
  if (!via_params && !sa_spatial(user->sharding)) return NULL;
  bool mc = cx->o.is_spmd && cx->level > 0;
  return from_user_by_opcode(cx, i, user, mc, rule);
}

/* An unsharded or tile-maximal instruction takes a manual user's sharding. */
static bool backward_manual(prop_ctx *cx, hk_instr *i, bool *changed) {
  if (i->sharding && !sa_xla_tile_maximal(i->sharding)) return false;
  for (int32_t k = 0; k < i->n_users; k++) {
    const hk_instr *u = i->users[k];
    if (!u->sharding || !hk_sharding_is_manual(u->sharding) || prop_is_cc(u, "SPMDFullToShardShape"))
      continue;
    if (hk_shape_is_array(i->shape)) {
      *changed = prop_set(cx, i, prop_manual_from(cx->m, u->sharding), u, "manual");
    } else {
      const char *rule;
      const hk_sharding *s = prop_sharding_from_user(cx, i, u, &rule);
      *changed = s && prop_set(cx, i, sa_tuple_of(cx->m, i->shape, s), u, "manual");
    }
    return true;
  }
  return false;
}

bool prop_infer_from_users(prop_ctx *cx, hk_instr *i) {
  if (cx->level < 2 && i->opcode == HK_OP_BROADCAST) return false;
  if (i->sharding && hk_sharding_is_manual(i->sharding)) return false;
  bool changed = false;
  if (backward_manual(cx, i, &changed)) return changed;
  if (!prop_supports_spatial(cx, i, false)) return false;
  bool mc = cx->o.is_spmd && cx->level > 0;
  const hk_custom_call_partitioner *p = prop_cc_partitioner(cx, i);
  bool shardable_cc = p && p->vt->is_shardable && p->vt->is_shardable(p, i);
  for (int32_t k = 0; k < i->n_users; k++) {
    const hk_instr *u = i->users[k];
    /* XLA keeps an rng-bit-generator's state whole: its operand is
     * replicated, whatever the other users want. */
    if (u->opcode == HK_OP_RNG_BIT_GENERATOR)
      return prop_set(cx, i, hk_sharding_replicated(cx->m), u, "rng-bit-generator state");
    const char *rule = NULL;
    const hk_sharding *s = prop_sharding_from_user(cx, i, u, &rule);
    if (s && shardable_cc && p->vt->propagate_user_sharding)
      s = p->vt->propagate_user_sharding(p, i, u, s);
    if (s) changed |= prop_improve(cx, i, s, mc, false, u, rule);
  }
  return changed;
}
