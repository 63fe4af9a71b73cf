/* window_ops.c - ops partitioned through the windowed-input reshard
 * (windowed.c), as XLA's handlers do: reduce-window, pad (a size-1 window
 * whose padding is the pad's and whose base dilation is its interior
 * padding + 1), slice (a size-1 window striding like the slice, negative
 * padding cutting off the rest) and reverse (the shards reversed, the
 * uneven padding moved to the left by a halo exchange).  Each returns
 * *handled false, nothing built, when its window cannot be partitioned. */
#include <math.h>

#include "spmd_internal.h"

/* The window's result size along one dim of an input of size n. */
static int64_t window_out_dim(int64_t n, const hk_window_dim *w) {
  int64_t padded = (n > 0 ? (n - 1) * w->base_dilation + 1 : 0) + w->pad_lo + w->pad_hi;
  int64_t dilated = (w->size - 1) * w->window_dilation + 1;
  return padded < dilated ? 0 : (padded - dilated) / w->stride + 1;
}

static const hk_shape *windowed_shape(spmd_visitor *v, const hk_shape *in, const hk_window_dim *w) {
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < in->rank; i++) dims[i] = window_out_dim(in->dims[i], &w[i]);
  return hk_shape_with_dims(v->m, in, in->rank, dims);
}

static hk_window *window_of(spmd_visitor *v, const hk_window_dim *dims, int rank) {
  hk_window *w = hk_alloc(v->m, sizeof *w);
  w->n_dims = rank;
  w->dims = dims;
  return w;
}

/* x dynamic-sliced at `starts` to the local shape ls when the windowed
 * reshard asked for it. */
static hk_instr *slice_result(spmd_visitor *v, hk_instr *x, hk_instr **starts, const hk_shape *ls) {
  return starts ? spmd_dynamic_slice(v, x, starts, ls) : x;
}

static bool tiled_target(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && hk_sharding_is_tiled(s) && !spmd_is_subgroup_manual(s) &&
         !s->n_subgroups;
}

static spmd_value *operand_value(spmd_visitor *v, const hk_instr *orig, int k) {
  return spmd_lookup(v, orig->operands[k]);
}

static hk_status *replicated_scalar(spmd_visitor *v, const hk_instr *orig, int k, hk_instr **out) {
  spmd_value *val = operand_value(v, orig, k);
  if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
  return spmd_reshard(v, val, hk_sharding_for_shape(v->m, hk_sharding_replicated(v->m), orig->operands[k]->shape), out);
}

/* ---- reduce-window ------------------------------------------------------------ */

hk_status *spmd_handle_reduce_window(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_attrs *a = orig->attrs;
  int n = orig->n_operands / 2;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  if (!a || !a->window || n < 1 || orig->n_operands != 2 * n || n > 8) return NULL;
  const hk_sharding *es[8];
  for (int k = 0; k < n; k++) {
    int64_t idx = k;
    es[k] = hk_shape_is_tuple(orig->shape) ? hk_sharding_subsharding_shape(v->m, s, orig->shape, 1, &idx) : s;
    if (!tiled_target(es[k])) return NULL;
  }
  hk_instr *ops[16];
  spmd_windowed_input in[8];
  for (int k = 0; k < n; k++) {
    spmd_value *val = operand_value(v, orig, k);
    if (!val) return hk_error(HK_INTERNAL, "operand %d of '%s' not partitioned", k, orig->name);
    HK_TRY(replicated_scalar(v, orig, n + k, &ops[n + k]));
    bool ok;
    HK_TRY(spmd_reshard_as_windowed_input(v, val, a->window->dims, es[k], ops[n + k], true, &ok, &in[k]));
    if (!ok) return NULL;
    ops[k] = in[k].hlo;
  }
  const hk_shape *outs[8], *locals[8];
  for (int k = 0; k < n; k++) {
    outs[k] = windowed_shape(v, in[k].hlo->shape, in[0].window);
    const hk_shape *gs = hk_shape_is_tuple(orig->shape) ? orig->shape->tuple[k] : orig->shape;
    locals[k] = spmd_local_shape(v, es[k], gs);
    if (!in[0].out_offsets && !hk_shape_compatible(outs[k], locals[k])) return NULL;
  }
  const hk_shape *rs = hk_shape_is_tuple(orig->shape) ? hk_shape_tuple(v->m, n, outs) : outs[0];
  hk_instr *rw = spmd_clone(v, orig, rs, orig->n_operands, ops);
  hk_instr_attrs(rw)->window = window_of(v, in[0].window, orig->operands[0]->shape->rank);
  hk_instr *res = rw;
  if (in[0].out_offsets) {
    if (hk_shape_is_tuple(orig->shape)) {
      hk_instr *parts[8];
      for (int k = 0; k < n; k++)
        parts[k] = slice_result(v, spmd_gte(v->comp, rw, k), in[0].out_offsets, locals[k]);
      res = hk_instr_new(v->comp, HK_OP_TUPLE, hk_shape_tuple(v->m, n, locals), n, parts, NULL);
    } else {
      res = slice_result(v, rw, in[0].out_offsets, locals[0]);
    }
  }
  spmd_set(v, orig, res, s);
  *handled = true;
  return NULL;
}

/* ---- pad -------------------------------------------------------------------------- */

static bool is_zero_constant(const hk_instr *i) {
  return i->opcode == HK_OP_CONSTANT && i->attrs && i->attrs->literal && hk_shape_is_array(i->shape) &&
         i->shape->rank == 0 && hk_literal_get_f64(i->attrs->literal, 0) == 0;
}

hk_status *spmd_handle_pad_windowed(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_attrs *a = orig->attrs;
  int r = orig->shape->rank;
  if (!tiled_target(s) || !a || a->n_pad != r || orig->n_operands != 2) return NULL;
  spmd_value *xv = operand_value(v, orig, 0);
  if (!xv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  hk_instr *pv;
  HK_TRY(replicated_scalar(v, orig, 1, &pv));
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)(r ? r : 1));
  bool zero = is_zero_constant(orig->operands[1]), mask = false;
  const hk_shape *in = orig->operands[0]->shape;
  for (int i = 0; i < r; i++) {
    const hk_pad_dim *p = &a->pad[i];
    wd[i] = (hk_window_dim){1, 1, p->lo, p->hi, p->interior + 1, 1, false};
    int64_t k = hk_sharding_dim_partitions(s, i);
    /* The exchange fills shards with no source with zeros: masking is
     * needed for another pad value or an uneven split. */
    mask = mask || (k > 1 && (p->lo > 0 || p->hi > 0 || p->interior > 0) && (!zero || in->dims[i] % k));
  }
  bool ok;
  spmd_windowed_input w;
  HK_TRY(spmd_reshard_as_windowed_input(v, xv, wd, s, pv, mask, &ok, &w));
  if (!ok) return NULL;
  hk_instr *x = w.hlo;
  bool need = false;
  hk_pad_dim *pd = hk_alloc(v->m, sizeof *pd * (size_t)(r ? r : 1));
  int64_t dims[HK_MAX_RANK];
  for (int i = 0; i < r; i++) {
    pd[i] = (hk_pad_dim){w.window[i].pad_lo, w.window[i].pad_hi, w.window[i].base_dilation - 1};
    need = need || pd[i].lo || pd[i].hi || pd[i].interior;
    int64_t n = x->shape->dims[i];
    dims[i] = pd[i].lo + pd[i].hi + n + (n > 0 ? (n - 1) * pd[i].interior : 0);
  }
  if (need) {
    hk_instr *ops[2] = {x, pv};
    x = hk_instr_new(v->comp, HK_OP_PAD, hk_shape_with_dims(v->m, x->shape, r, dims), 2, ops, NULL);
    hk_attrs *pa = hk_instr_attrs(x);
    pa->n_pad = r;
    pa->pad = pd;
  }
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  x = slice_result(v, x, w.out_offsets, ls);
  if (!hk_shape_compatible(x->shape, ls))
    return hk_error(HK_INTERNAL, "pad '%s': local shape from the windowed reshard differs", orig->name);
  spmd_set(v, orig, x, s);
  *handled = true;
  return NULL;
}

/* ---- slice ------------------------------------------------------------------------- */

hk_status *spmd_handle_slice_windowed(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_attrs *a = orig->attrs;
  int r = orig->shape->rank;
  if (!tiled_target(s) || !a || a->n_slice != r) return NULL;
  spmd_value *xv = operand_value(v, orig, 0);
  if (!xv) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  const hk_shape *in = orig->operands[0]->shape;
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)(r ? r : 1));
  for (int i = 0; i < r; i++) {
    const hk_slice_dim *sd = &a->slice[i];
    wd[i] = (hk_window_dim){1, sd->stride, -sd->start, sd->limit - in->dims[i], 1, 1, false};
  }
  bool ok;
  spmd_windowed_input w;
  hk_instr *zero = spmd_constant_scalar(v, (hk_prim)in->elem, 0);
  HK_TRY(spmd_reshard_as_windowed_input(v, xv, wd, s, zero, false, &ok, &w));
  if (!ok || w.out_offsets) return NULL;
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)(r ? r : 1));
  bool need = false;
  for (int i = 0; i < r; i++) {
    sd[i] = (hk_slice_dim){-w.window[i].pad_lo, w.hlo->shape->dims[i] + w.window[i].pad_hi, a->slice[i].stride};
    need = need || sd[i].start || sd[i].stride != 1 || sd[i].limit != w.hlo->shape->dims[i];
  }
  hk_instr *x = w.hlo;
  if (need) {
    x = hk_instr_new(v->comp, HK_OP_SLICE, ls, 1, &x, NULL);
    hk_attrs *sa = hk_instr_attrs(x);
    sa->n_slice = r;
    sa->slice = sd;
  } else {
    x = hk_instr_new(v->comp, HK_OP_COPY, x->shape, 1, &x, NULL);
  }
  if (!hk_shape_compatible(x->shape, ls))
    return hk_error(HK_INTERNAL, "slice '%s': local shape from the windowed reshard differs", orig->name);
  spmd_set(v, orig, x, s);
  *handled = true;
  return NULL;
}

/* ---- reverse ------------------------------------------------------------------------ */

const hk_sharding *spmd_reverse_sharding(spmd_visitor *v, const hk_sharding *s, const int64_t *rd, int n) {
  int64_t total = hk_sharding_num_tiles(s) * hk_sharding_replication_factor(s);
  int64_t *dev = malloc(sizeof(int64_t) * (size_t)total);
  if (!dev) hk_out_of_memory();
  int nt = s->n_tile_dims;
  for (int64_t pos = 0; pos < total; pos++) {
    int64_t rem = pos, src = 0, stride = 1;
    int64_t idx[HK_MAX_RANK + 2];
    for (int i = nt - 1; i >= 0; i--) {
      idx[i] = rem % s->tile_dims[i];
      rem /= s->tile_dims[i];
    }
    for (int k = 0; k < n; k++) idx[rd[k]] = s->tile_dims[rd[k]] - 1 - idx[rd[k]];
    for (int i = nt - 1; i >= 0; i--) {
      src += idx[i] * stride;
      stride *= s->tile_dims[i];
    }
    dev[pos] = s->devices[src];
  }
  const hk_sharding *r = hk_sharding_tiled(v->m, nt, s->tile_dims, dev, s->replicate_on_last_tile_dim);
  free(dev);
  return r;
}

hk_status *spmd_handle_reverse_windowed(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  int r = orig->shape->rank;
  if (!tiled_target(s)) return NULL;
  spmd_value *xv = operand_value(v, orig, 0);
  if (!xv) return hk_error(HK_INTERNAL, "operand of '%s' not partitioned", orig->name);
  const hk_sharding *rs = spmd_reverse_sharding(v, s, orig->dims, orig->n_dims);
  const hk_shape *in = orig->operands[0]->shape;
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)(r ? r : 1));
  for (int i = 0; i < r; i++) {
    int64_t lo = 0, k = hk_sharding_dim_partitions(rs, i);
    for (int j = 0; j < orig->n_dims; j++)
      if (orig->dims[j] == i) lo = (in->dims[i] + k - 1) / k * k - in->dims[i];
    wd[i] = (hk_window_dim){1, 1, lo, 0, 1, 1, false};
  }
  bool ok;
  spmd_windowed_input w;
  hk_instr *zero = spmd_constant_scalar(v, (hk_prim)in->elem, 0);
  HK_TRY(spmd_reshard_as_windowed_input(v, xv, wd, rs, zero, false, &ok, &w));
  if (!ok || w.out_offsets) return NULL;
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  if (!hk_shape_compatible(w.hlo->shape, ls)) return NULL;
  hk_instr *x = w.hlo;
  spmd_set(v, orig, spmd_clone(v, orig, ls, 1, &x), s);
  *handled = true;
  return NULL;
}

/* ---- select-and-scatter ------------------------------------------------------------- */

/* The value padding the data so the select never picks it: -inf for a
 * "greater" select, +inf for a "less" one (parameters swapped: the
 * opposite); false when the select is not one compare of the two. */
static bool select_pad_value(const hk_instr *orig, double *pad) {
  if (orig->n_called < 1) return false;
  const hk_instr *root = orig->called[0]->root;
  if (!root || root->opcode != HK_OP_COMPARE || root->n_operands != 2 || !root->attrs ||
      root->operands[0]->opcode != HK_OP_PARAMETER || root->operands[1]->opcode != HK_OP_PARAMETER ||
      hk_instr_parameter_number(root->operands[0]) + hk_instr_parameter_number(root->operands[1]) != 1)
    return false;
  bool first = hk_instr_parameter_number(root->operands[0]) == 0;
  switch ((hk_cmp_dir)root->attrs->cmp_dir) {
    case HK_CMP_GE: case HK_CMP_GT: *pad = first ? -INFINITY : INFINITY; return true;
    case HK_CMP_LE: case HK_CMP_LT: *pad = first ? INFINITY : -INFINITY; return true;
    default: return false;
  }
}

/* Windows and halos of one partitioned dim (XLA's HandleSelectAndScatter). */
typedef struct sas_dim {
  int64_t *first, *limit;          /* by shard: first window touching it, first past it */
  int64_t *src_left, *src_right, *data_left, *data_right, *data_first;
  int64_t max_windows;
} sas_dim;

static void sas_plan(sas_dim *p, int64_t k, int64_t ss, int64_t src_ss, hk_window_dim wd) {
  if (wd.stride > wd.size) wd.size = wd.stride;   /* gaps between windows stay */
  int64_t *buf = malloc(sizeof(int64_t) * (size_t)(7 * k));
  if (!buf) hk_out_of_memory();
  p->first = buf;
  p->limit = buf + k;
  p->src_left = buf + 2 * k;
  p->src_right = buf + 3 * k;
  p->data_left = buf + 4 * k;
  p->data_right = buf + 5 * k;
  p->data_first = buf + 6 * k;
  p->max_windows = 0;
  for (int64_t j = 0; j < k; j++) {
    p->first[j] = (ss * j + wd.pad_lo - wd.size + wd.stride) / wd.stride;
    p->limit[j] = (ss * j + ss + wd.pad_lo + wd.stride - 1) / wd.stride;
    p->src_left[j] = src_ss * j - p->first[j];
    p->src_right[j] = p->limit[j] - (src_ss * j + src_ss);
    p->data_left[j] = ss * j + wd.pad_lo - p->first[j] * wd.stride;
    p->data_right[j] = p->limit[j] * wd.stride - (ss * j + ss + wd.stride + wd.pad_lo - wd.size);
    p->data_first[j] = p->first[j] * wd.stride;
    if (p->limit[j] - p->first[j] > p->max_windows) p->max_windows = p->limit[j] - p->first[j];
  }
}

hk_status *spmd_handle_select_and_scatter(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_attrs *a = orig->attrs;
  int r = orig->shape->rank;
  double padv;
  if (!tiled_target(s) || !a || !a->window || a->window->n_dims != r || orig->n_operands != 3 ||
      (orig->shape->elem != HK_F32 && orig->shape->elem != HK_BF16) || !select_pad_value(orig, &padv))
    return NULL;
  spmd_value *dv = operand_value(v, orig, 0), *sv = operand_value(v, orig, 1);
  if (!dv || !sv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  hk_instr *data, *src, *init;
  HK_TRY(spmd_reshard(v, dv, s, &data));
  HK_TRY(spmd_reshard(v, sv, s, &src));
  HK_TRY(replicated_scalar(v, orig, 2, &init));
  hk_instr *pv = spmd_constant_scalar(v, (hk_prim)orig->shape->elem, padv);
  sas_dim plans[HK_MAX_RANK] = {{0}};
  hk_window_dim *wd = hk_alloc(v->m, sizeof *wd * (size_t)r);
  bool ok = true;
  for (int i = 0; i < r && ok; i++) {
    wd[i] = a->window->dims[i];
    int64_t k = hk_sharding_dim_partitions(s, i);
    if (k == 1) continue;
    hk_window_dim w = a->window->dims[i];
    sas_plan(&plans[i], k, data->shape->dims[i], src->shape->dims[i], w);
    sas_dim *p = &plans[i];
    if (w.stride > w.size) w.size = w.stride;
    spmd_halo hs = {.ring = {k, -1, 0}, .left = p->src_left, .right = p->src_right, .explicit_left = 0,
                    .padded_full = p->limit[k - 1], .base_dim = orig->operands[1]->shape->dims[i],
                    .shard_with_halo = p->max_windows, .offset_on_padded = p->first, .mask = true};
    src = spmd_exchange_halo_valid(v, src, s, i, &hs, init);
    spmd_halo hd = {.ring = {k, -1, 0}, .left = p->data_left, .right = p->data_right,
                    .explicit_left = w.pad_lo, .padded_full = (p->limit[k - 1] - 1) * w.stride + w.size,
                    .base_dim = orig->shape->dims[i], .shard_with_halo = (p->max_windows - 1) * w.stride + w.size,
                    .offset_on_padded = p->data_first, .mask = true};
    data = src ? spmd_exchange_halo_valid(v, data, s, i, &hd, pv) : NULL;
    ok = data != NULL;
    wd[i].pad_lo = wd[i].pad_hi = 0;
  }
  hk_instr *res = NULL;
  const hk_shape *ls = spmd_local_shape(v, s, orig->shape);
  if (ok) {
    hk_instr *ops[3] = {data, src, init};
    res = spmd_clone(v, orig, data->shape, 3, ops);
    hk_instr_attrs(res)->window = window_of(v, wd, r);
    if (!hk_shape_compatible(res->shape, ls)) {
      hk_instr *starts[HK_MAX_RANK];
      for (int i = 0; i < r; i++) {
        int64_t k = hk_sharding_dim_partitions(s, i);
        if (k == 1) {
          starts[i] = spmd_constant_scalar(v, HK_S32, 0);
          continue;
        }
        /* Shard 0's halo is its low padding, which the data never had. */
        plans[i].data_left[0] = a->window->dims[i].pad_lo;
        starts[i] = spmd_per_tile_scalar(v, s, i, plans[i].data_left);
      }
      res = slice_result(v, res, starts, ls);
    }
  }
  for (int i = 0; i < r; i++) free(plans[i].first);
  if (!res) return NULL;
  spmd_set(v, orig, res, s);
  *handled = true;
  return NULL;
}
