/* creation.c - values made from nothing.  A sharded iota is made locally:
 * the local iota, plus the partition's tile offset when the iota runs along
 * a tiled dim.  A sharded constant stays whole; its users cut it by the
 * partition's offsets (a local dynamic-slice), as in XLA. */
#include "spmd_internal.h"

hk_status *spmd_handle_iota(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  if (!hk_sharding_is_tiled(s) || !hk_shape_is_array(orig->shape) || orig->n_dims != 1 ||
      spmd_is_subgroup_manual(s))
    return spmd_handle_fallback(v, orig);
  const hk_shape *local = spmd_local_shape(v, s, orig->shape);
  hk_instr *iota = spmd_clone(v, orig, local, 0, NULL);
  int d = (int)orig->dims[0];
  if (hk_sharding_dim_partitions(s, d) > 1) {
    hk_instr *off = spmd_tile_offset(v, s, orig->shape, d);
    hk_prim e = (hk_prim)orig->shape->elem;
    if (e != HK_S32)
      off = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_scalar(v->m, e), 1, &off, NULL);
    hk_instr *ops[2] = {iota, hk_build_broadcast_scalar(v->comp, NULL, off, local)};
    iota = hk_instr_new(v->comp, HK_OP_ADD, local, 2, ops, NULL);
  }
  spmd_set(v, orig, iota, s);
  return NULL;
}

hk_status *spmd_handle_constant(spmd_visitor *v, hk_instr *orig) {
  /* Kept whole: each user cuts the piece it needs (a local slice, cached
   * per sharding), so a user that wants it replicated pays nothing. */
  const hk_sharding *whole = spmd_replicated_like(v, spmd_sharding_of(v, orig), orig->shape);
  spmd_set(v, orig, spmd_clone(v, orig, orig->shape, 0, NULL), whole);
  return NULL;
}
