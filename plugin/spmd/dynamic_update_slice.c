/* dynamic_update_slice.c - XLA's HandleDynamicUpdateSlice for an update
 * along a partitioned dim at a constant offset (or of size 1): the update
 * lies in one shard, so it is replicated (along the sliced dims only) and
 * each shard updates its own piece at the index made local, keeping its
 * input where the update is not its own.  The big operand never moves.
 * Other cases (*handled false) make the touched dims whole (handlers.c). */
#include "spmd_internal.h"

static hk_instr *binary(spmd_visitor *v, hk_opcode op, const hk_shape *s, hk_instr *a, hk_instr *b) {
  hk_instr *ops[2] = {a, b};
  return hk_instr_new(v->comp, op, s, 2, ops, NULL);
}

static hk_instr *compare(spmd_visitor *v, hk_instr *a, hk_instr *b, hk_cmp_dir dir) {
  hk_instr *c = binary(v, HK_OP_COMPARE, hk_shape_with_elem(v->m, a->shape, HK_PRED), a, b);
  hk_instr_attrs(c)->cmp_dir = (uint8_t)dir;
  return c;
}

static hk_instr *select3(spmd_visitor *v, hk_instr *p, hk_instr *a, hk_instr *b) {
  hk_instr *ops[3] = {p, a, b};
  return hk_instr_new(v->comp, HK_OP_SELECT, a->shape, 3, ops, NULL);
}

/* Whether the update along partitioned dim d (shards of `per`) fits in one
 * shard: size 1, or a constant start whose first and last land alike. */
static bool update_in_one_shard(const hk_instr *orig, int d, int64_t per) {
  int64_t size = orig->operands[1]->shape->dims[d];
  if (size == 1) return true;
  const hk_instr *idx = orig->operands[d + 2];
  if (idx->opcode != HK_OP_CONSTANT || !idx->attrs || !idx->attrs->literal || per <= 0) return false;
  int64_t off = hk_literal_get_i64(idx->attrs->literal, 0);
  int64_t full = orig->shape->dims[d];
  if (off < 0) off = 0;
  if (off > full - size) off = full - size;   /* XLA clamps the start */
  return off / per == (off + size - 1) / per;
}

hk_status *spmd_handle_dus_in_shard(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int r = orig->shape->rank;
  if (s->kind != HK_SHARDING_TILED || !hk_sharding_is_tiled(s) || s->n_subgroups ||
      spmd_is_subgroup_manual(s) || orig->n_operands != r + 2 || !hk_shape_is_array(orig->shape))
    return NULL;
  const hk_shape *us = orig->operands[1]->shape, *ls = spmd_local_shape(v, s, orig->shape);
  int64_t sliced[HK_MAX_RANK];
  int ns = 0, n_part_sliced = 0;
  bool part_other = false;
  for (int d = 0; d < r; d++) {
    bool slice = us->dims[d] != orig->shape->dims[d];
    int64_t k = hk_sharding_dim_partitions(s, d);
    if (orig->operands[d + 2]->shape->elem != HK_S32) return NULL;
    if (slice) sliced[ns++] = d;
    if (slice && k > 1) {
      if (orig->shape->dims[d] % k || !update_in_one_shard(orig, d, ls->dims[d])) return NULL;
      n_part_sliced++;
    }
    if (!slice && k > 1) part_other = true;
  }
  if (!n_part_sliced) return NULL;
  spmd_value *iv = spmd_lookup(v, orig->operands[0]), *uv = spmd_lookup(v, orig->operands[1]);
  if (!iv || !uv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  hk_instr *input, *update;
  HK_TRY(spmd_reshard(v, iv, s, &input));
  const hk_sharding *us_s = part_other ? spmd_replicate_dims(v, s, ns, sliced) : hk_sharding_replicated(v->m);
  HK_TRY(spmd_reshard(v, uv, us_s, &update));
  hk_instr **ops = malloc(sizeof(hk_instr *) * (size_t)(r + 2));
  if (!ops) hk_out_of_memory();
  ops[0] = input;
  ops[1] = update;
  hk_instr *zero = spmd_constant_scalar(v, HK_S32, 0), *all = NULL;
  hk_status *st = NULL;
  for (int d = 0; d < r && !st; d++) {
    if (us->dims[d] == orig->shape->dims[d]) {
      ops[d + 2] = zero;
      continue;
    }
    spmd_value *xv = spmd_lookup(v, orig->operands[d + 2]);
    st = xv ? spmd_reshard(v, xv, hk_sharding_replicated(v->m), &ops[d + 2])
            : hk_error(HK_INTERNAL, "index %d of '%s' not partitioned", d, orig->name);
    if (st || hk_sharding_dim_partitions(s, d) == 1) continue;
    /* The update's start made local, where it lands in this shard. */
    hk_instr *cl[3] = {zero, ops[d + 2],
                       spmd_constant_scalar(v, HK_S32, (double)(orig->shape->dims[d] - us->dims[d]))};
    hk_instr *idx = hk_instr_new(v->comp, HK_OP_CLAMP, cl[1]->shape, 3, cl, NULL);   /* as DUS clamps */
    hk_instr *off = spmd_tile_offset(v, s, orig->shape, d);
    hk_instr *per = spmd_constant_scalar(v, HK_S32, (double)ls->dims[d]);
    hk_instr *end = binary(v, HK_OP_ADD, off->shape, off, per);
    hk_instr *mine = binary(v, HK_OP_AND, hk_shape_with_elem(v->m, idx->shape, HK_PRED),
                            compare(v, idx, off, HK_CMP_GE), compare(v, idx, end, HK_CMP_LT));
    all = all ? binary(v, HK_OP_AND, mine->shape, all, mine) : mine;
    ops[d + 2] = select3(v, mine, binary(v, HK_OP_SUBTRACT, idx->shape, idx, off), zero);
  }
  if (!st) {
    hk_instr *dus = spmd_clone(v, orig, input->shape, r + 2, ops);
    hk_instr *mask = hk_build_broadcast_scalar(v->comp, NULL, all, hk_shape_with_elem(v->m, dus->shape, HK_PRED));
    spmd_set(v, orig, select3(v, mask, dus, input), s);
    *handled = true;
  }
  free(ops);
  return st;
}
