/* concatenate.c - XLA's HandleConcatenate along a partitioned dim: every
 * operand takes the output's sharding with its padding zeroed, each
 * partition writes its shards into a zero buffer as long as the whole
 * (padded) concatenated dim at the place they hold in the result, the
 * buffers are summed by an all-reduce among the devices splitting that
 * dim, and each partition slices its own tile out.  One collective, where
 * moving the partitions off the dim costs an all-to-all per operand and
 * one more for the result. */
#include "spmd_internal.h"

static bool concat_dim_partitioned(const hk_instr *orig, const hk_sharding *s, int64_t *dim) {
  if (orig->n_dims != 1 || !hk_shape_is_array(orig->shape) || orig->shape->elem == HK_PRED ||
      s->kind != HK_SHARDING_TILED || s->n_subgroups || spmd_is_subgroup_manual(s))
    return false;
  *dim = orig->dims[0];
  return hk_sharding_dim_partitions(s, (int)*dim) > 1;
}

hk_status *spmd_handle_concatenate(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int64_t d;
  if (!concat_dim_partitioned(orig, s, &d)) return NULL;
  int n = orig->n_operands, r = orig->shape->rank;
  int64_t parts = hk_sharding_dim_partitions(s, (int)d);
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  /* The buffer holds every operand's shards at their places: as long as
   * the padded result, or longer where an operand's padding reaches past
   * it (a dynamic-update-slice out of bounds would be moved back). */
  int64_t len = ls->dims[d] * parts, off = 0;
  for (int k = 0; k < n; k++) {
    const hk_shape *os = orig->operands[k]->shape;
    int64_t per = spmd_local_shape(v, s, os)->dims[d];
    if (off + per * parts > len) len = off + per * parts;
    off += os->dims[d];
  }
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = ls->dims[i];
  dims[d] = len;
  const hk_shape *buf_shape = hk_shape_array(v->m, (hk_prim)orig->shape->elem, r, dims);
  hk_instr *buf = spmd_zeros(v, buf_shape);
  int64_t *starts = malloc(sizeof(int64_t) * (size_t)parts);
  if (!starts) hk_out_of_memory();
  off = 0;
  hk_status *st = NULL;
  for (int k = 0; k < n && !st; k++) {
    spmd_value *val = spmd_lookup(v, orig->operands[k]);
    const hk_shape *os = orig->operands[k]->shape;
    hk_instr *x;
    st = val ? spmd_reshard(v, val, s, &x)
             : hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
    if (st) break;
    x = spmd_zero_padding(v, s, os, (int)d, x);
    int64_t per = x->shape->dims[d];
    for (int64_t t = 0; t < parts; t++) starts[t] = off + t * per;
    buf = spmd_update_at_tiles(v, buf, x, s, d, starts);
    off += os->dims[d];
  }
  if (!st) {
    int64_t n_groups, gsize;
    int64_t *groups = spmd_groups(v, s, 1, &d, &n_groups, &gsize);
    const hk_spmd_collective_ops *c = &v->p->collectives;
    hk_computation *add = spmd_reducer(v->m, (hk_prim)orig->shape->elem, HK_OP_ADD);
    hk_instr *sum = c->all_reduce(c->state, v->comp, buf, add, n_groups, gsize, groups,
                                  &v->p->next_channel_id);
    v->p->collectives_emitted++;
    free(groups);
    hk_instr *mine = spmd_dynamic_slice_dim(v, sum, d, spmd_tile_offset(v, s, orig->shape, (int)d),
                                            ls->dims[d]);
    spmd_set(v, orig, mine, s);
    *handled = true;
  }
  free(starts);
  return st;
}
