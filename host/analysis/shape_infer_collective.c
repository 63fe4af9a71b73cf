/* shape_infer_collective.c - shape inference and replica-group checks for collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, ...). */
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

#define OPND(c, k) ((c)->i->operands[k]->shape)

/* XLA's CollectiveOpGroupMode. */
typedef enum { GM_CROSS_REPLICA, GM_CROSS_PARTITION, GM_CROSS_REPLICA_AND_PARTITION,
               GM_FLATTENED_ID } group_mode;

static const char *mode_name(group_mode g) {
  switch (g) {
    case GM_CROSS_REPLICA: return "kCrossReplica";
    case GM_CROSS_PARTITION: return "kCrossPartition";
    case GM_CROSS_REPLICA_AND_PARTITION: return "kCrossReplicaAndPartition";
    case GM_FLATTENED_ID: return "kFlattenedID";
  }
  return "?";
}

static int64_t cfg_or_one(int64_t v) { return v > 0 ? v : 1; }
static int64_t num_partitions(ana_ctx *c) { return cfg_or_one(c->m->config.num_partitions); }
static int64_t replica_count(ana_ctx *c) { return cfg_or_one(c->m->config.replica_count); }

/* `flag_optional`: the op has no use_global_device_ids field (all-to-all,
 * collective-permute), so a channel means cross-partition. */
static hk_status *get_group_mode(ana_ctx *c, bool flag_optional, group_mode *g) {
  bool has_channel = hk_instr_has_channel_id(c->i);
  bool global = c->i->attrs && c->i->attrs->use_global_device_ids;
  if (!has_channel) {
    if (global)
      return ana_fail(c->i, "use_global_device_ids=true requires a channel_id");
    *g = GM_CROSS_REPLICA;
  } else if (flag_optional) {
    *g = GM_CROSS_PARTITION;
  } else {
    *g = global ? GM_FLATTENED_ID : GM_CROSS_REPLICA_AND_PARTITION;
  }
  return NULL;
}

static const hk_replica_groups *groups_of(const hk_instr *i) {
  const hk_replica_groups *rg = i->attrs ? i->attrs->replica_groups : NULL;
  return rg && rg->n_groups > 0 ? rg : NULL;
}

static int64_t group_size(const hk_replica_groups *rg, int k) {
  if (rg->group_start) return rg->group_start[k + 1] - rg->group_start[k];
  if (rg->iota && rg->iota->n_dims == 2) return rg->iota->dims[1];
  return 0;
}

static int64_t subgroup_size(ana_ctx *c, group_mode g) {
  const hk_replica_groups *rg = groups_of(c->i);
  switch (g) {
    case GM_CROSS_REPLICA:
    case GM_CROSS_REPLICA_AND_PARTITION: {
      int64_t n = rg ? group_size(rg, 0) : replica_count(c);
      return g == GM_CROSS_REPLICA_AND_PARTITION ? n * num_partitions(c) : n;
    }
    case GM_FLATTENED_ID:
      return rg ? group_size(rg, 0) : 1;
    case GM_CROSS_PARTITION:
      return rg ? group_size(rg, 0) : num_partitions(c);
  }
  return 1;
}

/* XLA's CheckReplicaGroups (only run for the verifier). */
static hk_status *check_replica_groups(ana_ctx *c, group_mode g, bool uniform) {
  if (!c->for_verifier) return NULL;
  const hk_replica_groups *rg = groups_of(c->i);
  if (!rg) {
    if (g == GM_FLATTENED_ID)
      return ana_fail(c->i, "replica groups must be specified in flattened-id mode");
    return NULL;
  }
  if (!rg->group_start || !rg->ids) return NULL;
  int64_t total = rg->group_start[rg->n_groups];
  uint8_t *seen = calloc((size_t)(total > 0 ? total : 1), 1);
  hk_status *st = NULL;
  for (int k = 0; k < rg->n_groups && !st; k++) {
    if (group_size(rg, k) == 0)
      st = ana_fail(c->i, "instruction cannot have an empty replica group");
    else if (uniform && group_size(rg, k) != group_size(rg, 0))
      st = ana_fail(c->i, "replica groups expected to be of uniform size");
    for (int32_t j = rg->group_start[k]; j < rg->group_start[k + 1] && !st; j++) {
      int64_t id = rg->ids[j];
      if (id < 0 || id >= total)
        st = ana_fail(c->i, "replica %lld is out of range: replica groups name %lld ids",
                      (long long)id, (long long)total);
      else if (seen[id]++)
        st = ana_fail(c->i, "replica %lld is repeated in replica-groups", (long long)id);
    }
  }
  free(seen);
  if (st) return st;
  int64_t want = g == GM_CROSS_PARTITION ? num_partitions(c)
                 : g == GM_FLATTENED_ID ? replica_count(c) * num_partitions(c)
                                        : replica_count(c);
  if (want != 1 && total != want)
    return ana_fail(c->i, "in %s mode, replica groups should contain %lld ids, but found %lld",
                    mode_name(g), (long long)want, (long long)total);
  return NULL;
}

static hk_status *need_arrays(ana_ctx *c) {
  if (c->i->n_operands < 1) return ana_fail(c->i, "expected at least one operand");
  for (int k = 0; k < c->i->n_operands; k++)
    if (!hk_shape_is_array(OPND(c, k)))
      return ana_fail(c->i, "operand %d must be an array", k);
  return NULL;
}

static const hk_shape **operand_shapes(ana_ctx *c) {
  const hk_shape **s = hk_alloc(c->m, sizeof(*s) * (size_t)(c->i->n_operands + 1));
  for (int k = 0; k < c->i->n_operands; k++) s[k] = OPND(c, k);
  return s;
}

static const hk_shape *all_operands(ana_ctx *c) {
  return ana_single_or_tuple(c->m, c->i->n_operands, operand_shapes(c));
}

/* ---- all-reduce ------------------------------------------------------------- */

static hk_status *infer_all_reduce(ana_ctx *c, const hk_shape **out) {
  group_mode g = GM_CROSS_REPLICA;
  HK_TRY(get_group_mode(c, false, &g));
  HK_TRY(check_replica_groups(c, g, false));
  HK_TRY(need_arrays(c));
  if (c->i->n_called < 1 || !c->i->called[0])
    return ana_fail(c->i, "missing to_apply computation");
  *out = all_operands(c);
  return NULL;
}

/* ---- all-gather / reduce-scatter ------------------------------------------ */

static hk_status *collective_dim(ana_ctx *c, int64_t *d) {
  if (c->i->n_dims != 1) return ana_fail(c->i, "expects exactly one dimension");
  *d = c->i->dims[0];
  for (int k = 0; k < c->i->n_operands; k++)
    if (*d < 0 || *d >= OPND(c, k)->rank)
      return ana_fail(c->i, "dimension %lld is out of range for operand %d", (long long)*d, k);
  return NULL;
}

/* The declared output array for operand k (all-gather-start wraps it). */
static const hk_shape *declared_output(ana_ctx *c, int k) {
  const hk_shape *s = c->i->shape;
  if (c->i->opcode == HK_OP_ALL_GATHER_START)
    s = hk_shape_is_tuple(s) && s->n_tuple >= 2 ? s->tuple[1] : NULL;
  if (s && c->i->n_operands > 1) s = hk_shape_is_tuple(s) && k < s->n_tuple ? s->tuple[k] : NULL;
  return s;
}

/* XLA's verifier reads the shard count off the declared shape and checks
 * it against the group size; inference uses the group size. */
static hk_status *shard_count(ana_ctx *c, group_mode g, int64_t d, bool gather,
                              int64_t *count) {
  int64_t sub = subgroup_size(c, g);
  if (!c->for_verifier) {
    *count = sub;
    return NULL;
  }
  const hk_shape *o = declared_output(c, 0), *in = OPND(c, 0);
  if (!o || !hk_shape_is_array(o) || d >= o->rank)
    return ana_fail(c->i, "declared shape does not have dimension %lld", (long long)d);
  int64_t num = gather ? o->dims[d] : in->dims[d], den = gather ? in->dims[d] : o->dims[d];
  *count = den > 0 ? (num + den - 1) / den : 0;
  if (sub != 1 && *count != sub)
    return ana_fail(c->i, "shard_count = %lld, subgroup_size = %lld", (long long)*count,
                    (long long)sub);
  return NULL;
}

static hk_status *infer_gather_scatter(ana_ctx *c, const hk_shape **out) {
  group_mode g = GM_CROSS_REPLICA;
  int64_t d = 0, count = 0;
  bool gather = c->i->opcode != HK_OP_REDUCE_SCATTER;
  HK_TRY(get_group_mode(c, false, &g));
  HK_TRY(check_replica_groups(c, g, true));
  HK_TRY(need_arrays(c));
  HK_TRY(collective_dim(c, &d));
  HK_TRY(shard_count(c, g, d, gather, &count));
  if (count <= 0) return ana_fail(c->i, "invalid shard count %lld", (long long)count);
  if (!gather && (c->i->n_called < 1 || !c->i->called[0]))
    return ana_fail(c->i, "missing to_apply computation");
  int n = c->i->n_operands;
  const hk_shape **res = operand_shapes(c);
  for (int k = 0; k < n; k++) {
    const hk_shape *s = res[k];
    int64_t dims[HK_MAX_RANK];
    ana_copy_dims(dims, s);
    if (gather) {
      dims[d] *= count;
    } else {
      if (dims[d] % count != 0)
        return ana_fail(c->i, "scatter dimension size %lld must be divisible by shard_count %lld",
                        (long long)dims[d], (long long)count);
      dims[d] /= count;
    }
    res[k] = ana_array(c->m, (hk_prim)s->elem, s->rank, dims, NULL);
  }
  const hk_shape *outs = ana_single_or_tuple(c->m, n, res);
  if (c->i->opcode == HK_OP_ALL_GATHER_START) {
    const hk_shape *pair[2] = {all_operands(c), outs};
    outs = ana_tuple(c->m, 2, pair);
  }
  *out = outs;
  return NULL;
}

/* ---- all-to-all ----------------------------------------------------------------- */

static hk_status *infer_all_to_all(ana_ctx *c, const hk_shape **out) {
  group_mode g = GM_CROSS_REPLICA;
  HK_TRY(get_group_mode(c, true, &g));
  HK_TRY(check_replica_groups(c, g, true));
  HK_TRY(need_arrays(c));
  int64_t split = subgroup_size(c, g);
  if (c->i->n_dims == 0) {
    if (c->for_verifier && c->i->n_operands != split)
      return ana_fail(c->i, "tuple all-to-all needs %lld operands, has %d", (long long)split,
                      (int)c->i->n_operands);
    *out = ana_tuple(c->m, c->i->n_operands, operand_shapes(c));
    return NULL;
  }
  int64_t d = 0;
  if (c->i->n_operands != 1) return ana_fail(c->i, "array all-to-all takes one operand");
  HK_TRY(collective_dim(c, &d));
  if (split <= 0 || OPND(c, 0)->dims[d] % split != 0)
    return ana_fail(c->i, "all-to-all split dimension size %lld must be divisible by "
                    "split_count %lld", (long long)OPND(c, 0)->dims[d], (long long)split);
  *out = OPND(c, 0);
  return NULL;
}

/* ---- collective-permute ------------------------------------------------------ */

static bool permute_in_place(ana_ctx *c) {
  return c->i->n_operands == 4 && hk_shape_is_tuple(OPND(c, 2));
}

static hk_status *check_source_target_pairs(ana_ctx *c, group_mode g) {
  if (!c->for_verifier || !c->i->attrs) return NULL;
  int64_t limit = g == GM_CROSS_REPLICA ? replica_count(c) : num_partitions(c);
  int n = c->i->attrs->n_source_target_pairs;
  const hk_pair *p = c->i->attrs->source_target_pairs;
  for (int k = 0; k < n; k++) {
    if (p[k].a < 0 || p[k].b < 0 || (limit != 1 && (p[k].a >= limit || p[k].b >= limit)))
      return ana_fail(c->i, "source-target pair {%lld,%lld} is out of range [0, %lld)",
                      (long long)p[k].a, (long long)p[k].b, (long long)limit);
    if (permute_in_place(c)) continue;
    for (int j = 0; j < k; j++) {
      if (p[j].a == p[k].a)
        return ana_fail(c->i, "source %lld appears more than once in source-target pairs",
                        (long long)p[k].a);
      if (p[j].b == p[k].b)
        return ana_fail(c->i, "target %lld appears more than once in source-target pairs",
                        (long long)p[k].b);
    }
  }
  return NULL;
}

static hk_status *infer_collective_permute(ana_ctx *c, const hk_shape **out) {
  group_mode g = GM_CROSS_REPLICA;
  HK_TRY(get_group_mode(c, true, &g));
  HK_TRY(check_source_target_pairs(c, g));
  if (c->i->n_operands < 1) return ana_fail(c->i, "collective-permute needs an operand");
  bool inplace = permute_in_place(c);
  const hk_shape *res = inplace ? OPND(c, 1) : all_operands(c);
  if (c->i->opcode == HK_OP_COLLECTIVE_PERMUTE) {
    *out = res;
    return NULL;
  }
  const hk_shape *s = c->i->shape;
  int n = hk_shape_is_tuple(s) && s->n_tuple > 2 ? s->n_tuple : 2;
  const hk_shape **el = hk_alloc(c->m, sizeof(*el) * (size_t)n);
  el[0] = inplace ? OPND(c, 0) : res;
  el[1] = res;
  for (int k = 2; k < n; k++) el[k] = s->tuple[k];
  *out = ana_tuple(c->m, n, el);
  return NULL;
}

/* ---- the done halves -------------------------------------------------------------- */

static hk_status *infer_done(ana_ctx *c, const hk_shape **out) {
  const hk_shape *s = OPND(c, 0);
  if (c->i->opcode == HK_OP_ALL_REDUCE_DONE) {
    *out = s;
    return NULL;
  }
  if (!hk_shape_is_tuple(s) || s->n_tuple < 2) {
    char b[128];
    return ana_fail(c->i, "expected a tuple operand from the start op, got %s",
                    ana_shape_str(s, b, sizeof b));
  }
  *out = s->tuple[1];
  return NULL;
}

hk_status *ana_infer_collective(ana_ctx *c, bool *handled, const hk_shape **out) {
  *handled = true;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: return infer_all_reduce(c, out);
    case HK_OP_ALL_GATHER: case HK_OP_ALL_GATHER_START: case HK_OP_REDUCE_SCATTER:
      return infer_gather_scatter(c, out);
    case HK_OP_ALL_TO_ALL: return infer_all_to_all(c, out);
    case HK_OP_COLLECTIVE_PERMUTE: case HK_OP_COLLECTIVE_PERMUTE_START:
      return infer_collective_permute(c, out);
    case HK_OP_ALL_REDUCE_DONE: case HK_OP_ALL_GATHER_DONE:
    case HK_OP_COLLECTIVE_PERMUTE_DONE:
      return infer_done(c, out);
    case HK_OP_COLLECTIVE_BROADCAST:
      HK_TRY(need_arrays(c));
      *out = all_operands(c);
      return NULL;
    case HK_OP_RAGGED_ALL_TO_ALL:
      *out = OPND(c, 1);
      return NULL;
    default:
      *handled = false;
      return NULL;
  }
}
