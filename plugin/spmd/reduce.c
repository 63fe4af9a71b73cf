/* reduce.c - the reduce handler, variadic reduces included: each partition
 * reduces its tile (the padding of unevenly split reduced dims masked with
 * the init value first), then the partial results of the devices that split
 * a reduced dim are combined: an all-reduce with the reducer for one
 * output, or, for several (an argmax, say), an all-gather of the partials
 * along a new leading dim reduced once more with the same reducer. */
#include "spmd_internal.h"

/* Combines the partial results `parts` (n outputs) over the device groups
 * splitting the reduced dims `dims` of s. */
static void combine_partials(spmd_visitor *v, hk_instr *orig, const hk_sharding *s, int nd,
                             const int64_t *dims, int n, hk_instr **parts, hk_instr **inits) {
  int64_t n_groups, gsize;
  int64_t *groups = spmd_groups(v, s, nd, dims, &n_groups, &gsize);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  if (n == 1) {
    parts[0] = c->all_reduce(c->state, v->comp, parts[0], orig->called[0], n_groups, gsize, groups,
                             &v->p->next_channel_id);
    v->p->collectives_emitted++;
    free(groups);
    return;
  }
  /* Variadic: gather the partials on a new leading dim, reduce it away. */
  hk_instr *ops[2 * HK_MAX_RANK];
  const hk_shape *shapes[HK_MAX_RANK];
  for (int k = 0; k < n; k++) {
    const hk_shape *ps = parts[k]->shape;
    int64_t d1[HK_MAX_RANK + 1] = {1}, dg[HK_MAX_RANK + 1] = {gsize};
    for (int i = 0; i < ps->rank; i++) d1[i + 1] = dg[i + 1] = ps->dims[i];
    hk_instr *r = hk_instr_new(v->comp, HK_OP_RESHAPE,
                               hk_shape_array(v->m, (hk_prim)ps->elem, ps->rank + 1, d1), 1,
                               &parts[k], NULL);
    ops[k] = c->all_gather(c->state, v->comp, r,
                           hk_shape_array(v->m, (hk_prim)ps->elem, ps->rank + 1, dg), 0, n_groups,
                           gsize, groups, &v->p->next_channel_id);
    v->p->collectives_emitted++;
    ops[n + k] = inits[k];
    shapes[k] = ps;
  }
  free(groups);
  hk_instr *red = spmd_clone(v, orig, hk_shape_tuple(v->m, n, shapes), 2 * n, ops);
  int64_t zero = 0;
  hk_instr_set_dims(red, 1, &zero);
  for (int k = 0; k < n; k++) parts[k] = spmd_gte(v->comp, red, k);
}

hk_status *spmd_handle_reduce(spmd_visitor *v, hk_instr *orig) {
  int n = orig->n_operands / 2;
  spmd_value *val = spmd_lookup(v, orig->operands[0]);
  const hk_sharding *os = val ? val->sharding : NULL;
  if (n < 1 || n > HK_MAX_RANK || !os || hk_sharding_is_tuple(os) ||
      os->kind == HK_SHARDING_MANUAL)
    return spmd_handle_fallback(v, orig);
  const hk_shape *gs = orig->operands[0]->shape;
  int64_t part[HK_MAX_RANK];
  int np = 0;
  if (os->kind == HK_SHARDING_TILED)
    for (int i = 0; i < orig->n_dims; i++)
      if (hk_sharding_dim_partitions(os, (int)orig->dims[i]) > 1) part[np++] = orig->dims[i];
  hk_instr *ins[HK_MAX_RANK], *inits[HK_MAX_RANK], *ops[2 * HK_MAX_RANK];
  for (int k = 0; k < n; k++) {
    HK_TRY(spmd_reshard(v, spmd_lookup(v, orig->operands[k]), os, &ins[k]));
    spmd_value *iv = spmd_lookup(v, orig->operands[n + k]);
    HK_TRY(spmd_reshard(v, iv, spmd_replicated_like(v, iv->sharding, orig->operands[n + k]->shape),
                        &inits[k]));
    for (int j = 0; j < np; j++)
      if (gs->dims[part[j]] % hk_sharding_dim_partitions(os, (int)part[j]))
        ins[k] = spmd_mask_padding(v, os, gs, (int)part[j], ins[k], inits[k]);
    ops[k] = ins[k];
    ops[n + k] = inits[k];
  }
  const hk_sharding *out_s = os->kind == HK_SHARDING_TILED
                                 ? spmd_remove_dims(v, os, orig->n_dims, orig->dims)
                                 : os;
  hk_instr *parts[HK_MAX_RANK];
  if (n == 1) {
    parts[0] = spmd_clone(v, orig, spmd_local_shape(v, out_s, orig->shape), 2, ops);
  } else {
    const hk_shape *shapes[HK_MAX_RANK];
    for (int k = 0; k < n; k++) shapes[k] = spmd_local_shape(v, out_s, orig->shape->tuple[k]);
    hk_instr *red = spmd_clone(v, orig, hk_shape_tuple(v->m, n, shapes), 2 * n, ops);
    for (int k = 0; k < n; k++) parts[k] = spmd_gte(v->comp, red, k);
  }
  if (np) combine_partials(v, orig, os, np, part, n, parts, inits);
  if (n == 1) {
    spmd_set(v, orig, parts[0], out_s);
    return NULL;
  }
  const hk_sharding *elems[HK_MAX_RANK];
  const hk_shape *shapes[HK_MAX_RANK];
  for (int k = 0; k < n; k++) {
    elems[k] = out_s;
    shapes[k] = parts[k]->shape;
  }
  hk_instr *t = hk_instr_new(v->comp, HK_OP_TUPLE, hk_shape_tuple(v->m, n, shapes), n, parts, NULL);
  spmd_set(v, orig, t, hk_sharding_tuple(v->m, n, elems));
  return NULL;
}
