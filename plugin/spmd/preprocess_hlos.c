/* preprocess_hlos.c - phase A's PreprocessHlos: rewrites HLO patterns into
 * partition-friendly forms before partitioning (slice(pad(x)) merged into
 * one pad; concatenate(slice(x), slice(x)) into a rotate-right custom call;
 * concatenate(slice(x), x, slice(x)) "pad with wrap" into pad + rotates +
 * selects), as XLA's SpmdPartitioner::PreprocessHlos does. */
#include "spmd_internal.h"

/* ---- small helpers ------------------------------------------------------- */

/* Follows single-use copies down from op; NULL if the result has more
 * than one user and check_single_use is set (XLA's SkipCopyOperands). */
static hk_instr *skip_copy_operands(hk_instr *op, bool check_single_use) {
  while (op->n_users == 1 && op->opcode == HK_OP_COPY) op = op->operands[0];
  if (check_single_use && op->n_users != 1) return NULL;
  return op;
}

static bool same_sharding(const hk_sharding *a, const hk_sharding *b) {
  if (!a || !b) return a == b;
  return a == b || hk_sharding_equivalent(a, b);
}

/* Tile-maximal (replicated, maximal, unknown, one tile), manual or tuple
 * shardings are left alone. */
static bool worth_preprocessing(const hk_instr *i) {
  const hk_sharding *s = i->sharding;
  return s && s->kind == HK_SHARDING_TILED && hk_sharding_is_tiled(s) &&
         !spmd_is_subgroup_manual(s) && hk_shape_is_array(i->shape);
}

static bool removable(const hk_instr *i) {
  return i->n_users == 0 && !hk_instr_is_root(i) && i->opcode != HK_OP_PARAMETER &&
         !hk_instr_has_side_effect(i) && !(i->attrs && i->attrs->n_control_succs);
}

/* XLA's RemoveInstructionAndUnusedOperands. */
static void remove_with_unused_operands(hk_instr *i) {
  if (!removable(i)) return;
  int n = i->n_operands;
  hk_instr **ops = malloc(sizeof(hk_instr *) * (size_t)(n + 1));
  if (!ops) hk_out_of_memory();
  for (int k = 0; k < n; k++) ops[k] = i->operands[k];
  hk_status *st = hk_instr_remove(i);
  if (st) {
    hk_status_free(st);
    free(ops);
    return;
  }
  for (int k = 0; k < n; k++) {
    bool seen = false;
    for (int j = 0; j < k; j++) seen = seen || ops[j] == ops[k];
    if (!seen) remove_with_unused_operands(ops[k]);
  }
  free(ops);
}

static void replace_and_remove(hk_instr *old, hk_instr *new_) {
  hk_instr_replace_all_uses(old, new_);
  remove_with_unused_operands(old);
}

static hk_instr *new_pad(hk_instr *before, const hk_shape *shape, hk_instr *x, hk_instr *value,
                         const hk_pad_dim *pads) {
  hk_instr *ops[2] = {x, value};
  hk_instr *p = hk_instr_new_before(before, HK_OP_PAD, shape, 2, ops, NULL);
  hk_attrs *a = hk_instr_attrs(p);
  a->n_pad = shape->rank;
  a->pad = hk_memdup(before->parent->module, pads, sizeof *pads * (size_t)(shape->rank ? shape->rank : 1));
  return p;
}

/* ---- slice(pad(x)) -> pad(x) ------------------------------------------------ */

/* Merges a slice of a pad (both sharded alike) into one pad when a
 * sharded dim is both padded and sliced (two halo exchanges otherwise). */
static void merge_pad_slice(hk_instr *slice) {
  hk_instr *pad = skip_copy_operands(slice->operands[0], true);
  if (!pad || pad->opcode != HK_OP_PAD || !same_sharding(pad->sharding, slice->sharding)) return;
  const hk_attrs *sa = slice->attrs, *pa = pad->attrs;
  int r = slice->shape->rank;
  if (!sa || !pa || sa->n_slice != r || pa->n_pad != r) return;
  hk_pad_dim merged[HK_MAX_RANK];
  bool multi_halo = false;
  for (int d = 0; d < r; d++) {
    const hk_pad_dim *pd = &pa->pad[d];
    if (pd->interior || sa->slice[d].stride != 1) return;
    if (hk_sharding_dim_partitions(slice->sharding, d) > 1 && (pd->lo || pd->hi) &&
        slice->shape->dims[d] != pad->shape->dims[d])
      multi_halo = true;
    merged[d].lo = pd->lo - sa->slice[d].start;
    merged[d].hi = sa->slice[d].limit - (pad->shape->dims[d] - pd->hi);
    merged[d].interior = 0;
  }
  if (!multi_halo) return;
  hk_instr *np = new_pad(slice, slice->shape, pad->operands[0], pad->operands[1], merged);
  if (pa->metadata) hk_instr_attrs(np)->metadata = pa->metadata;
  hk_instr_set_sharding(np, slice->sharding);
  replace_and_remove(slice, np);
}

/* ---- concatenate patterns ------------------------------------------------------ */

static bool slice_stride1(const hk_instr *s, int64_t dim) {
  return s->opcode == HK_OP_SLICE && s->attrs && s->attrs->n_slice > dim &&
         s->attrs->slice[dim].stride == 1;
}

/* concatenate(slice(x)[a:n], slice(x)[0:a]) along dim: rotate right by
 * n - a... returns the amount, or -1 (XLA's FindRotateRightPattern). */
static int64_t find_rotate_right(const hk_instr *concat) {
  if (concat->n_operands != 2 || concat->n_dims != 1) return -1;
  hk_instr *lhs = skip_copy_operands(concat->operands[0], true);
  hk_instr *rhs = skip_copy_operands(concat->operands[1], true);
  int64_t dim = concat->dims[0];
  if (!lhs || !rhs || !slice_stride1(lhs, dim) || !slice_stride1(rhs, dim) ||
      lhs->operands[0] != rhs->operands[0])
    return -1;
  const hk_instr *x = lhs->operands[0];
  if (!hk_shape_compatible(x->shape, concat->shape) || !same_sharding(concat->sharding, x->sharding))
    return -1;
  if (lhs->attrs->slice[dim].start != rhs->attrs->slice[dim].limit) return -1;
  return lhs->shape->dims[dim];
}

/* The SPMDInternal_RotateRight custom call (rotates x right by amount
 * along dim: out[i] = x[(i - amount) mod n]). */
static hk_instr *new_rotate_right(hk_instr *before, hk_instr *x, int64_t dim, int64_t amount,
                                  const hk_sharding *s) {
  hk_module *m = before->parent->module;
  hk_instr *r = hk_instr_new_before(before, HK_OP_CUSTOM_CALL, x->shape, 1, &x, NULL);
  hk_attrs *a = hk_instr_attrs(r);
  a->custom_call_target = hk_intern_cstr(m, SPMD_ROTATE_RIGHT_TARGET);
  char cfg[96];
  snprintf(cfg, sizeof cfg, "\"dimension=%lld,amount=%lld\"", (long long)dim, (long long)amount);
  a->backend_config = hk_intern_cstr(m, cfg);
  if (before->attrs) a->metadata = before->attrs->metadata;
  hk_instr_set_sharding(r, s);
  return r;
}

static void rewrite_rotate_right(hk_instr *concat, int64_t amount) {
  hk_instr *lhs = skip_copy_operands(concat->operands[0], true);
  hk_instr *rot = new_rotate_right(concat, lhs->operands[0], concat->dims[0], amount,
                                   concat->sharding);
  replace_and_remove(concat, rot);
}

typedef struct pad_wrap {
  hk_instr *lhs, *mid, *rhs;       /* the slices and the wrapped value */
  int n_lhs_mods, n_rhs_mods;      /* elementwise ops applied to the slices, outermost first */
  hk_instr *lhs_mods[16], *rhs_mods[16];
} pad_wrap;

/* Skips single-use unary elementwise ops (recording all but copies). */
static hk_instr *skip_modifiers(hk_instr *i, hk_instr **mods, int *n) {
  *n = 0;
  while (hk_opcode_is_elementwise((hk_opcode)i->opcode) && i->n_operands == 1 && i->n_users == 1 &&
         hk_shape_is_array(i->shape)) {
    if (i->opcode != HK_OP_COPY) {
      if (*n == 16) return NULL;
      mods[(*n)++] = i;
    }
    i = i->operands[0];
  }
  return i;
}

/* concatenate(f(slice(x)), x, g(slice(x))) along dim (XLA's
 * FindPadWithWrapPattern). */
static bool find_pad_wrap(hk_instr *concat, pad_wrap *pw) {
  if (concat->n_operands != 3 || concat->n_dims != 1) return false;
  hk_instr *lhs = skip_copy_operands(concat->operands[0], true);
  hk_instr *mid = skip_copy_operands(concat->operands[1], false);
  hk_instr *rhs = skip_copy_operands(concat->operands[2], true);
  if (!lhs || !mid || !rhs) return false;
  lhs = skip_modifiers(lhs, pw->lhs_mods, &pw->n_lhs_mods);
  rhs = skip_modifiers(rhs, pw->rhs_mods, &pw->n_rhs_mods);
  int64_t dim = concat->dims[0];
  if (!lhs || !rhs || !slice_stride1(lhs, dim) || !slice_stride1(rhs, dim) ||
      lhs->operands[0] != mid || rhs->operands[0] != mid ||
      !same_sharding(lhs->sharding, mid->sharding) || !same_sharding(rhs->sharding, mid->sharding) ||
      !same_sharding(lhs->sharding, concat->sharding))
    return false;
  pw->lhs = lhs;
  pw->mid = mid;
  pw->rhs = rhs;
  return true;
}

/* Re-applies the skipped modifiers (innermost first) to x. */
static hk_instr *apply_modifiers(hk_instr *before, hk_instr *x, hk_instr *const *mods, int n) {
  hk_module *m = before->parent->module;
  for (int k = n - 1; k >= 0; k--) {
    const hk_shape *s = hk_shape_with_elem(m, x->shape, (hk_prim)mods[k]->shape->elem);
    x = hk_instr_clone(before->parent, mods[k], s, 1, &x, NULL);
  }
  return x;
}

static hk_instr *select_by_iota(hk_instr *before, hk_instr *iota, int64_t limit, hk_cmp_dir dir,
                                hk_instr *on_true, hk_instr *on_false) {
  hk_module *m = before->parent->module;
  hk_computation *c = before->parent;
  const hk_sharding *s = before->sharding;
  hk_instr *k = hk_build_constant_i64(c, before, HK_U32, limit);
  hk_instr_set_sharding(k, hk_sharding_replicated(m));
  hk_instr *kb = hk_build_broadcast_scalar(c, before, k, iota->shape);
  hk_instr_set_sharding(kb, s);
  hk_instr *ops[3] = {iota, kb, NULL};
  hk_instr *cmp = hk_instr_new_before(before, HK_OP_COMPARE,
                                      hk_shape_with_elem(m, iota->shape, HK_PRED), 2, ops, NULL);
  hk_instr_attrs(cmp)->cmp_dir = (uint8_t)dir;
  hk_instr_set_sharding(cmp, s);
  ops[0] = cmp;
  ops[1] = on_true;
  ops[2] = on_false;
  hk_instr *sel = hk_instr_new_before(before, HK_OP_SELECT, before->shape, 3, ops, NULL);
  hk_instr_set_sharding(sel, s);
  return sel;
}

/* pad(mid) to the concat's size, two rotations of it that bring the
 * wrapped slices into place, and selects that merge the three. */
static void rewrite_pad_wrap(hk_instr *concat, const pad_wrap *pw) {
  hk_module *m = concat->parent->module;
  hk_computation *c = concat->parent;
  int64_t dim = concat->dims[0];
  int r = concat->shape->rank;
  int64_t low = concat->operands[0]->shape->dims[dim], high = concat->operands[2]->shape->dims[dim];
  int64_t size = concat->shape->dims[dim];
  hk_pad_dim pads[HK_MAX_RANK];
  for (int d = 0; d < r; d++) pads[d] = (hk_pad_dim){d == dim ? low : 0, d == dim ? high : 0, 0};
  hk_instr *zero = hk_build_constant_i64(c, concat, (hk_prim)concat->shape->elem, 0);
  hk_instr_set_sharding(zero, hk_sharding_replicated(m));
  hk_instr *pad = new_pad(concat, concat->shape, pw->mid, zero, pads);
  hk_instr_set_sharding(pad, concat->sharding);
  int64_t lhs_start = pw->lhs->attrs->slice[dim].start, rhs_start = pw->rhs->attrs->slice[dim].start;
  int64_t amt_l = ((size - (lhs_start + low)) % size + size) % size;
  int64_t amt_r = ((size - (rhs_start + low + high)) % size + size) % size;
  hk_instr *rot_l = new_rotate_right(concat, pad, dim, amt_l, concat->sharding);
  hk_instr *rot_r = new_rotate_right(concat, pad, dim, amt_r, concat->sharding);
  rot_l = apply_modifiers(concat, rot_l, pw->lhs_mods, pw->n_lhs_mods);
  rot_r = apply_modifiers(concat, rot_r, pw->rhs_mods, pw->n_rhs_mods);
  hk_instr *iota = hk_instr_new_before(concat, HK_OP_IOTA,
                                       hk_shape_with_elem(m, concat->shape, HK_U32), 0, NULL, NULL);
  hk_instr_set_dims(iota, 1, &dim);
  hk_instr_set_sharding(iota, concat->sharding);
  hk_instr *merged = select_by_iota(concat, iota, low, HK_CMP_LT, rot_l, pad);
  merged = select_by_iota(concat, iota, size - high, HK_CMP_GE, rot_r, merged);
  replace_and_remove(concat, merged);
}

static void preprocess_concat(hk_instr *concat) {
  if (concat->n_dims != 1 || hk_sharding_dim_partitions(concat->sharding, (int)concat->dims[0]) == 1)
    return;
  int64_t amount = find_rotate_right(concat);
  if (amount >= 0) {
    rewrite_rotate_right(concat, amount);
    return;
  }
  pad_wrap pw;
  if (find_pad_wrap(concat, &pw)) rewrite_pad_wrap(concat, &pw);
}

/* ---- the phase -------------------------------------------------------------------- */

bool spmd_preprocess_candidate(const hk_instr *i) {
  return (i->opcode == HK_OP_SLICE || i->opcode == HK_OP_CONCATENATE) && worth_preprocessing(i);
}

/* One list scan: most computations have nothing to rewrite, and then no
 * post order is built. */
static bool has_candidate(const hk_computation *c) {
  for (const hk_instr *i = c->first; i; i = i->next)
    if (spmd_preprocess_candidate(i)) return true;
  return false;
}

static void preprocess_computation(hk_computation *c, bool known_candidate) {
  if (!known_candidate && !has_candidate(c)) return;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  /* An instruction removed by an earlier rewrite is never visited: rewrites
   * only remove the instruction visited and its (earlier) operands. */
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    if (!spmd_preprocess_candidate(i)) continue;
    if (i->opcode == HK_OP_SLICE) merge_pad_slice(i);
    else if (i->opcode == HK_OP_CONCATENATE) preprocess_concat(i);
  }
  free(order);
}

hk_status *spmd_preprocess_hlos(spmd_partitioner *p, hk_module *m,
                                const hk_exec_threads *threads) {
  int32_t n = m->n_computations;
  hk_computation **comps = malloc(sizeof(hk_computation *) * (size_t)(n + 1));
  if (!comps) hk_out_of_memory();
  memcpy(comps, m->computations, sizeof(hk_computation *) * (size_t)n);
  /* The sharding walk noted which computations hold candidates, true of
   * the graph as this phase finds it when nothing edited it since; this
   * phase's own rewrites stay inside the computation rewritten. */
  const struct spmd_walk_notes *w = &p->notes;
  bool noted = spmd_notes_hold(p, m);
  for (int32_t k = 0; k < n; k++) {
    if (!hk_exec_threads_include(threads, comps[k])) continue;
    if (noted && !w->has_candidate[k]) continue;
    preprocess_computation(comps[k], noted);
  }
  free(comps);
  return NULL;
}
