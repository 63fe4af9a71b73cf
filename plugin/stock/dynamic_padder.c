/* dynamic_padder.c - dynamic-padder: XLA's DynamicPadder.  Dynamic
 * dimensions (f32[<=8]) become static at their bounds; the real sizes are
 * tracked as s32 scalars through the ops that carry them, and where an op
 * would read the padding past a real size its operand is masked first:
 *   reduce over a dynamic dim   padding set to the init value
 *   dot contracting a dynamic dim  padding set to zero on both sides
 * get-dimension-size becomes the tracked size (the bound when the size
 * comes from outside, e.g. an entry parameter: inputs are taken as full),
 * set-dimension-size becomes its operand with the size recorded. */
#include <stdlib.h>
#include <string.h>

#include "stock.h"

/* Per-instruction sizes: one s32[] instruction per dim, NULL = full. */
typedef struct dyn_sizes {
  int rank;
  hk_instr *size[HK_MAX_RANK];
} dyn_sizes;

static dyn_sizes *sizes_of(const hk_instr *i) { return (dyn_sizes *)i->scratch; }

static dyn_sizes *sizes_new(hk_instr *i) {
  dyn_sizes *s = calloc(1, sizeof *s);
  if (!s) hk_out_of_memory();
  s->rank = hk_shape_is_array(i->shape) ? i->shape->rank : 0;
  i->scratch = s;
  return s;
}

static hk_instr *size_const(hk_instr *before, int64_t v) {
  return hk_build_constant_i64(before->parent, before, HK_S32, v);
}

/* select(iota_d < size, x, pad) inserted before `before`. */
static hk_instr *mask_dim(hk_instr *before, hk_instr *x, int d, hk_instr *size, hk_instr *pad) {
  hk_module *m = before->parent->module;
  const hk_shape *is = hk_shape_with_elem(m, x->shape, HK_S32);
  hk_instr *iota = hk_instr_new_before(before, HK_OP_IOTA, is, 0, NULL, NULL);
  int64_t dd = d;
  hk_instr_set_dims(iota, 1, &dd);
  hk_instr *bs = hk_build_broadcast_scalar(before->parent, before, size, is);
  hk_instr *cmp_ops[2] = {iota, bs};
  hk_instr *lt = hk_instr_new_before(before, HK_OP_COMPARE, hk_shape_with_elem(m, x->shape, HK_PRED),
                                     2, cmp_ops, NULL);
  hk_instr_attrs(lt)->cmp_dir = HK_CMP_LT;
  hk_instr *bp = hk_build_broadcast_scalar(before->parent, before, pad, x->shape);
  hk_instr *sel_ops[3] = {lt, x, bp};
  return hk_instr_new_before(before, HK_OP_SELECT, x->shape, 3, sel_ops, NULL);
}

static bool dynamic_dim(const hk_instr *x, int d) {
  return hk_shape_is_array(x->shape) && x->shape->dynamic && x->shape->dynamic[d];
}

/* Masks operand k of i along each dim listed whose size is tracked. */
static bool mask_operand(hk_instr *i, int k, const int64_t *dims, int n, hk_instr *pad) {
  hk_instr *x = i->operands[k];
  dyn_sizes *s = sizes_of(x);
  bool changed = false;
  for (int j = 0; j < n; j++) {
    int d = (int)dims[j];
    if (!s || !s->size[d]) continue;
    x = mask_dim(i, x, d, s->size[d], pad);
    changed = true;
  }
  if (changed) hk_instr_set_operand(i, k, x);
  return changed;
}

/* Tracks sizes through i and masks its operands; returns true on change. */
static bool visit(hk_instr *i) {
  dyn_sizes *out = sizes_new(i);
  dyn_sizes *in = i->n_operands ? sizes_of(i->operands[0]) : NULL;
  switch (i->opcode) {
    case HK_OP_SET_DIMENSION_SIZE: {
      if (in) memcpy(out->size, in->size, sizeof out->size);
      out->size[i->dims[0]] = i->operands[1];
      return false;
    }
    case HK_OP_GET_DIMENSION_SIZE: {
      int d = (int)i->dims[0];
      hk_instr *x = i->operands[0];
      hk_instr *r = in && in->size[d] ? in->size[d] : size_const(i, x->shape->dims[d]);
      if (!dynamic_dim(x, d) && !(in && in->size[d])) return false;
      hk_instr_replace_all_uses(i, r);
      return true;
    }
    case HK_OP_BROADCAST:
      for (int j = 0; in && j < i->n_dims; j++) out->size[i->dims[j]] = in->size[j];
      return false;
    case HK_OP_TRANSPOSE:
      for (int j = 0; in && j < i->n_dims; j++) out->size[j] = in->size[i->dims[j]];
      return false;
    case HK_OP_REDUCE: {
      int nin = i->n_operands / 2;
      bool changed = false;
      for (int k = 0; k < nin; k++)
        changed |= mask_operand(i, k, i->dims, i->n_dims, i->operands[nin + k]);
      if (in && out->rank) {
        int o = 0;
        for (int d = 0; d < in->rank; d++) {
          bool reduced = false;
          for (int j = 0; j < i->n_dims; j++) reduced |= i->dims[j] == d;
          if (!reduced && o < out->rank) out->size[o++] = in->size[d];
        }
      }
      return changed;
    }
    case HK_OP_DOT: {
      const hk_dot_dnums *dn = i->attrs ? i->attrs->dot : NULL;
      if (!dn) return false;
      hk_instr *zero = NULL;
      bool changed = false;
      for (int side = 0; side < 2; side++) {
        hk_i64s cd = side ? dn->rhs_contracting : dn->lhs_contracting;
        dyn_sizes *s = sizes_of(i->operands[side]);
        bool need = false;
        for (int j = 0; s && j < cd.n; j++) need |= s->size[cd.v[j]] != NULL;
        if (!need) continue;
        if (!zero) zero = hk_build_constant_i64(i->parent, i, (hk_prim)i->operands[side]->shape->elem, 0);
        changed |= mask_operand(i, side, cd.v, cd.n, zero);
      }
      return changed;
    }
    default:
      break;
  }
  /* Shape-preserving elementwise ops carry sizes dim by dim. */
  if (hk_opcode_is_elementwise((hk_opcode)i->opcode) || i->opcode == HK_OP_COPY ||
      i->opcode == HK_OP_CONVERT) {
    for (int32_t k = 0; k < i->n_operands; k++) {
      dyn_sizes *s = sizes_of(i->operands[k]);
      if (!s || s->rank != out->rank) continue;
      for (int d = 0; d < out->rank; d++)
        if (!out->size[d]) out->size[d] = s->size[d];
    }
  }
  return false;
}

/* The static version of a shape (dynamic flags dropped, tuples too). */
static const hk_shape *static_shape(hk_module *m, const hk_shape *s) {
  if (hk_shape_is_tuple(s)) {
    const hk_shape **e = malloc((size_t)(s->n_tuple ? s->n_tuple : 1) * sizeof *e);
    if (!e) hk_out_of_memory();
    bool same = true;
    for (int32_t k = 0; k < s->n_tuple; k++) same &= (e[k] = static_shape(m, s->tuple[k])) == s->tuple[k];
    const hk_shape *r = same ? s : hk_shape_tuple(m, s->n_tuple, e);
    free(e);
    return r;
  }
  if (!s->dynamic) return s;
  hk_shape t = *s;
  t.dynamic = NULL;
  return hk_shape_intern(m, &t);
}

static bool pad_computation(hk_computation *c) {
  hk_module *m = c->module;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  bool changed = false;
  for (int64_t k = 0; k < n; k++) changed |= visit(order[k]);
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k];
    if (i->opcode == HK_OP_SET_DIMENSION_SIZE && i->parent) {
      hk_instr_replace_all_uses(i, i->operands[0]);
      changed = true;
    }
  }
  for (int64_t k = 0; k < n; k++) {
    free(order[k]->scratch);
    order[k]->scratch = NULL;
  }
  for (hk_instr *i = c->first; i; i = i->next) {
    const hk_shape *s = static_shape(m, i->shape);
    if (s != i->shape) {
      i->shape = s;
      changed = true;
    }
  }
  free(order);
  return changed;
}

static hk_status *dp_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                         bool *changed) {
  (void)self;
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (hk_exec_threads_include(threads, c)) *changed |= pad_computation(c);
  }
  if (m->config.has_entry_layout) {
    hk_program_shape *ps = &m->config.entry_layout;
    const hk_shape **params = hk_alloc(m, (size_t)(ps->n_params ? ps->n_params : 1) * sizeof *params);
    for (int32_t k = 0; k < ps->n_params; k++) params[k] = static_shape(m, ps->params[k]);
    ps->params = params;
    if (ps->result) ps->result = static_shape(m, ps->result);
  }
  return NULL;
}

static const hk_pass_vtable dp_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "dynamic-padder",
    .run = dp_run, .destroy = stock_pass_destroy};

static hk_pass *dp_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&dp_vtable, sizeof(stock_pass), err);
}

const hk_pass_desc stock_dynamic_padder_desc = {
    .size = sizeof(hk_pass_desc), .name = "dynamic-padder",
    .summary = "pads dynamic dimensions to their bounds, masking what ops read",
    .options = NULL, .n_options = 0, .create = dp_create};
