/* outfeed.c - outfeed as XLA's HandleOutfeed: each partition outfeeds its
 * own shard of the data (no collective); when the data does not split
 * evenly, a conditional with one branch per distinct shard shape slices
 * the padding off first.  On one device it runs there alone
 * (single_device.c); manual, it is cloned as it is. */
#include "spmd_internal.h"

/* The data's sharding: the outfeed's, without the element XLA's sharding
 * may carry for the token result (b/260756663). */
static const hk_sharding *data_sharding(spmd_visitor *v, const hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  const hk_shape *ds = orig->operands[0]->shape;
  int64_t leaves = hk_shape_leaf_count(ds);
  if (s->kind != HK_SHARDING_TUPLE || s->n_elems != leaves + 1) return s;
  if (!hk_shape_is_tuple(ds)) return s->elems[0];
  return hk_sharding_tuple(v->m, (int)leaves, s->elems);
}

/* The array leaves of shape, in order, appended to out. */
static void leaves_of(const hk_shape *shape, const hk_shape **out, int64_t *n) {
  if (!hk_shape_is_tuple(shape)) {
    out[(*n)++] = shape;
    return;
  }
  for (int i = 0; i < shape->n_tuple; i++) leaves_of(shape->tuple[i], out, n);
}

/* outfeed_shape's text with the k-th "[...]" holding the dims of the k-th
 * leaf of `shape`: the shard's dims, the text's layouts. */
static const char *with_leaf_dims(spmd_visitor *v, const char *text, const hk_shape *shape) {
  int64_t n = 0, k = 0;
  const hk_shape **leaves = malloc(sizeof(hk_shape *) * (size_t)(hk_shape_leaf_count(shape) + 1));
  if (!leaves) hk_out_of_memory();
  leaves_of(shape, leaves, &n);
  hk_buf b;
  hk_buf_init(&b);
  for (const char *p = text; *p; p++) {
    const char *q = *p == '[' && k < n ? strchr(p, ']') : NULL;
    if (!q) {
      hk_buf_put(&b, p, 1);
      continue;
    }
    hk_buf_put(&b, "[", 1);
    for (int d = 0; d < leaves[k]->rank; d++)
      hk_buf_printf(&b, "%s%lld", d ? "," : "", (long long)leaves[k]->dims[d]);
    hk_buf_put(&b, "]", 1);
    p = q;
    k++;
  }
  const char *r = hk_intern(v->m, b.data ? b.data : "", b.len);
  hk_buf_free(&b);
  free(leaves);
  return r;
}

/* An outfeed of data and token in c, its outfeed_shape (if written) made
 * the data's shape. */
static hk_instr *outfeed_in(spmd_visitor *v, hk_computation *c, const hk_instr *orig,
                            hk_instr *data, hk_instr *token) {
  hk_instr *ops[2] = {data, token};
  hk_instr *o = c == v->comp ? spmd_clone(v, (hk_instr *)orig, orig->shape, 2, ops)
                             : hk_instr_clone(c, orig, orig->shape, 2, ops, NULL);
  hk_instr_set_sharding(o, NULL);
  hk_attrs *a = o->attrs;
  for (int32_t i = 0; a && i < a->n_raw; i++) {
    if (strcmp(a->raw[i].name, "outfeed_shape")) continue;
    hk_raw_attr *raw = hk_alloc(v->m, sizeof *raw * (size_t)a->n_raw);
    memcpy(raw, a->raw, sizeof *raw * (size_t)a->n_raw);
    raw[i].value = with_leaf_dims(v, raw[i].value, data->shape);
    a->raw = raw;
    break;
  }
  return o;
}

/* Whether every partition's tile of array shape under s is whole. */
static bool evenly_partitions(const hk_shape *shape, const hk_sharding *s) {
  if (!s || s->kind != HK_SHARDING_TILED) return true;
  for (int d = 0; d < shape->rank; d++)
    if (shape->dims[d] % hk_sharding_dim_partitions(s, d)) return false;
  return true;
}

/* Tuple-aware: every leaf evenly split by its element of s. */
static bool evenly(spmd_visitor *v, const hk_shape *shape, const hk_sharding *s) {
  if (!hk_shape_is_tuple(shape)) return evenly_partitions(shape, s);
  for (int i = 0; i < shape->n_tuple; i++) {
    int64_t idx = i;
    if (!evenly(v, shape->tuple[i], hk_sharding_subsharding_shape(v->m, s, shape, 1, &idx)))
      return false;
  }
  return true;
}

/* The unpadded shape of device dev's tile of shape under s (XLA's
 * MakeNonPaddedShapeForGivenPartition). */
static const hk_shape *unpadded_tile(spmd_visitor *v, const hk_shape *shape, const hk_sharding *s,
                                     int64_t dev) {
  if (hk_shape_is_tuple(shape)) {
    const hk_shape **e = malloc(sizeof(hk_shape *) * (size_t)(shape->n_tuple + 1));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < shape->n_tuple; i++) {
      int64_t idx = i;
      e[i] = unpadded_tile(v, shape->tuple[i],
                           hk_sharding_subsharding_shape(v->m, s, shape, 1, &idx), dev);
    }
    const hk_shape *t = hk_shape_tuple(v->m, shape->n_tuple, e);
    free(e);
    return t;
  }
  const hk_shape *ls = spmd_local_shape(v, s, shape);
  int64_t off[HK_MAX_RANK], dims[HK_MAX_RANK];
  if (!hk_shape_is_array(shape) || !hk_sharding_tile_offset(s, shape, dev, off)) return ls;
  for (int d = 0; d < shape->rank; d++) {
    int64_t left = shape->dims[d] - off[d];
    dims[d] = left < 0 ? 0 : left < ls->dims[d] ? left : ls->dims[d];
  }
  return hk_shape_with_dims(v->m, ls, shape->rank, dims);
}

/* x (in c) sliced down to `to`, leaf by leaf. */
static hk_instr *slice_down(spmd_visitor *v, hk_computation *c, hk_instr *x, const hk_shape *to) {
  if (hk_shape_compatible(x->shape, to)) return x;
  if (hk_shape_is_tuple(to)) {
    hk_instr **e = malloc(sizeof(hk_instr *) * (size_t)(to->n_tuple + 1));
    const hk_shape **es = malloc(sizeof(hk_shape *) * (size_t)(to->n_tuple + 1));
    if (!e || !es) hk_out_of_memory();
    for (int i = 0; i < to->n_tuple; i++) {
      e[i] = slice_down(v, c, spmd_gte(c, x, i), to->tuple[i]);
      es[i] = e[i]->shape;
    }
    hk_instr *t = hk_instr_new(c, HK_OP_TUPLE, hk_shape_tuple(v->m, to->n_tuple, es), to->n_tuple,
                               e, NULL);
    free(e);
    free(es);
    return t;
  }
  hk_instr *sl = hk_instr_new(c, HK_OP_SLICE, hk_shape_with_dims(v->m, x->shape, to->rank, to->dims),
                              1, &x, NULL);
  hk_slice_dim *sd = hk_alloc(v->m, sizeof *sd * (size_t)(to->rank ? to->rank : 1));
  for (int d = 0; d < to->rank; d++) sd[d] = (hk_slice_dim){0, to->dims[d], 1};
  hk_attrs *a = hk_instr_attrs(sl);
  a->n_slice = to->rank;
  a->slice = sd;
  return sl;
}

/* Uneven data: branch b outfeeds the shards of shape shapes[b]. */
static hk_instr *outfeed_by_shape(spmd_visitor *v, const hk_instr *orig, const hk_shape *gs,
                                  const hk_sharding *s, hk_instr *data, hk_instr *token) {
  int64_t np = v->p->num_partitions, nb = 0;
  const hk_shape **shapes = malloc(sizeof(hk_shape *) * (size_t)np);
  int64_t *branch_of = malloc(sizeof(int64_t) * (size_t)np);
  if (!shapes || !branch_of) hk_out_of_memory();
  for (int64_t dev = 0; dev < np; dev++) {
    const hk_shape *t = unpadded_tile(v, gs, s, dev);
    int64_t b = 0;
    while (b < nb && !hk_shape_compatible(shapes[b], t)) b++;
    if (b == nb) shapes[nb++] = t;
    branch_of[dev] = b;
  }
  const hk_shape *ps[2] = {data->shape, token->shape};
  const hk_shape *pshape = hk_shape_tuple(v->m, 2, ps);
  hk_instr *args_ops[2] = {data, token};
  hk_instr *args = hk_instr_new(v->comp, HK_OP_TUPLE, pshape, 2, args_ops, NULL);
  hk_computation **branches = malloc(sizeof(hk_computation *) * (size_t)nb);
  hk_instr **cops = malloc(sizeof(hk_instr *) * (size_t)(nb + 1));
  if (!branches || !cops) hk_out_of_memory();
  for (int64_t b = 0; b < nb; b++) {
    char name[48];
    snprintf(name, sizeof name, "outfeed_branch_%lld", (long long)b);
    hk_computation *c = hk_computation_new(v->m, name);
    hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, pshape, 0, NULL, "outfeed_token_param");
    hk_instr_attrs(p)->parameter_number = 0;
    hk_computation_register_param(c, p);
    hk_instr *d = slice_down(v, c, spmd_gte(c, p, 0), shapes[b]);
    hk_computation_set_root(c, outfeed_in(v, c, orig, d, spmd_gte(c, p, 1)));
    branches[b] = c;
    cops[b + 1] = args;
  }
  /* The branch index: partition-id when each partition has its own. */
  hk_instr *index;
  if (nb == np) {
    hk_instr *pid = spmd_partition_id(v);
    index = hk_instr_new(v->comp, HK_OP_CONVERT, hk_shape_scalar(v->m, HK_S32), 1, &pid, NULL);
  } else {
    /* A one-dim tiling over every partition in order: tile index = id. */
    const hk_sharding *by_id = hk_sharding_tiled_iota(v->m, 1, &np, false);
    index = spmd_per_tile_scalar(v, by_id, 0, branch_of);
  }
  cops[0] = index;
  hk_instr *cond = hk_instr_new(v->comp, HK_OP_CONDITIONAL, orig->shape, (int)nb + 1, cops, NULL);
  hk_instr_set_called(cond, (int)nb, branches);
  free(shapes);
  free(branch_of);
  free(branches);
  free(cops);
  return cond;
}

hk_status *spmd_handle_outfeed(spmd_visitor *v, hk_instr *orig) {
  const hk_sharding *s = spmd_sharding_of(v, orig);
  if (orig->n_operands != 2) return spmd_handle_fallback(v, orig);
  if (hk_sharding_unique_device(s) >= 0) return spmd_handle_single_device(v, orig);
  spmd_value *dv = spmd_lookup(v, orig->operands[0]), *tv = spmd_lookup(v, orig->operands[1]);
  if (!dv || !tv) return hk_error(HK_INTERNAL, "operands of '%s' not partitioned", orig->name);
  const hk_sharding *ds = hk_sharding_is_manual(s) ? dv->sharding : data_sharding(v, orig);
  hk_instr *data;
  HK_TRY(spmd_reshard(v, dv, ds, &data));
  const hk_shape *gs = orig->operands[0]->shape;
  hk_instr *o = hk_sharding_is_manual(s) || evenly(v, gs, ds)
                    ? outfeed_in(v, v->comp, orig, data, tv->hlo)
                    : outfeed_by_shape(v, orig, gs, ds, data, tv->hlo);
  spmd_set(v, orig, o, s);
  return NULL;
}
