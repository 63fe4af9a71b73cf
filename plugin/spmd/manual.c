/* manual.c - manual regions: an instruction sharded {manual} is kept as
 * written (the user partitioned it), its manual operands used as they
 * are and any other operand replicated whole, as XLA's partitioner does by
 * treating the instruction as placed on one device; an all-reduce inside
 * a manual-subgroup region must combine devices of one data tile only. */
#include "spmd_internal.h"


/* The device ids of every replica group, group after group (iota-spelled
 * groups expanded once into buf, which holds HK_MAX_GROUP ids); *size
 * gets the size of an iota-spelled group (0: not expressible here). */
#define HK_MAX_GROUP 4096
static const int64_t *replica_group_ids(const hk_replica_groups *rg, int64_t *buf,
                                        int64_t *size) {
  *size = 0;
  if (rg->ids) return rg->ids;
  const hk_iota *io = rg->iota;
  if (!io || io->n_dims != 2 || io->dims[0] * io->dims[1] > HK_MAX_GROUP) return buf;
  hk_iota_expand(io, buf);
  *size = io->dims[1];
  return buf;
}

/* An all-reduce inside a manual-subgroup region runs among the devices of
 * one data tile (they differ only in the manual dims); a replica group that
 * mixes tiles is an error, as in XLA. */
hk_status *spmd_check_subgroup_manual_all_reduce(const hk_instr *orig, const hk_sharding *s) {
  const hk_replica_groups *rg = orig->attrs ? orig->attrs->replica_groups : NULL;
  if (orig->opcode != HK_OP_ALL_REDUCE || !rg || !spmd_is_subgroup_manual(s)) return NULL;
  int rank = hk_sharding_data_rank(s);
  int64_t buf[HK_MAX_GROUP], first[HK_MAX_RANK], idx[HK_MAX_RANK], size;
  const int64_t *all = replica_group_ids(rg, buf, &size);
  for (int32_t g = 0; g < rg->n_groups; g++) {
    int64_t n = rg->ids ? rg->group_start[g + 1] - rg->group_start[g] : size;
    const int64_t *ids = all + (rg->ids ? rg->group_start[g] : g * size);
    for (int64_t k = 0; k < n; k++) {
      if (!hk_sharding_tile_index(s, ids[k], k ? idx : first))
        return hk_error(HK_INVALID_ARGUMENT, "all-reduce '%s': device %lld is not in its sharding",
                        orig->name, (long long)ids[k]);
      for (int d = 0; k && d < rank; d++)
        if (idx[d] != first[d])
          return hk_error(HK_INVALID_ARGUMENT,
                          "all-reduce '%s' in a manual subgroup: replica group %d mixes devices "
                          "%lld and %lld of different manual subgroups",
                          orig->name, g, (long long)ids[0], (long long)ids[k]);
    }
  }
  return NULL;
}

/* Operand k's partitioned form for a manual instruction: manual values
 * (manual leaves of a tuple) as they are, every other value replicated
 * whole, as XLA's partitioner sees the instruction on one device. */
static hk_status *manual_operand(spmd_visitor *v, hk_instr *orig, int k, hk_instr **out) {
  spmd_value *val = spmd_lookup(v, orig->operands[k]);
  if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
  const hk_sharding *s = val->sharding;
  const hk_sharding *target = s;
  if (s && s->kind == HK_SHARDING_TUPLE) {
    const hk_sharding **e = malloc(sizeof(hk_sharding *) * (size_t)(s->n_elems + 1));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < s->n_elems; i++)
      e[i] = hk_sharding_is_manual(s->elems[i]) || spmd_is_subgroup_manual(s->elems[i])
                 ? s->elems[i]
                 : spmd_replicated_like(v, s->elems[i], NULL);
    target = hk_sharding_tuple(v->m, s->n_elems, e);
    free(e);
  } else if (!s || (!hk_sharding_is_manual(s) && !spmd_is_subgroup_manual(s))) {
    target = spmd_replicated_like(v, s, orig->operands[k]->shape);
  }
  HK_TRY(spmd_reshard(v, val, target, out));
  if (!hk_shape_compatible((*out)->shape, orig->operands[k]->shape))
    return hk_error(HK_UNIMPLEMENTED,
                    "manual instruction '%s' uses operand '%s' of another shape (a manual "
                    "subgroup it does not share)",
                    orig->name, orig->operands[k]->name);
  return NULL;
}

hk_status *spmd_handle_manual(spmd_visitor *v, hk_instr *orig) {
  hk_instr **ops = calloc((size_t)orig->n_operands + 1, sizeof(hk_instr *));
  if (!ops) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < orig->n_operands && !st; k++) st = manual_operand(v, orig, k, &ops[k]);
  if (!st)
    spmd_set(v, orig, spmd_clone(v, orig, orig->shape, orig->n_operands, ops),
             spmd_sharding_of(v, orig));
  free(ops);
  return st;
}
