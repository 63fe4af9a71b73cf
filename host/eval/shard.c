/* shard.c - scattering a global value to devices by a sharding and
 * gathering per-device values back into the global one. */
#include <stdio.h>

#include "eval/eval_internal.h"

static bool whole_value(const hk_sharding *s) {
  return !s || s->kind == HK_SHARDING_REPLICATED || s->kind == HK_SHARDING_MANUAL ||
         s->kind == HK_SHARDING_UNKNOWN || s->kind == HK_SHARDING_MAXIMAL;
}

/* The sharding of a tuple element whose leaves start at leaf `first`: a
 * nested tuple keeps the whole (flat) list and walks on from `first`. */
static const hk_sharding *leaf_sharding(const hk_sharding *s, int64_t first, const hk_shape *elem) {
  return hk_shape_is_tuple(elem) ? s : hk_eval_leaf_sharding(s, first);
}

/* Copies the box [goff, goff+dims) of g (clipped to g) into l at 0. */
static void copy_box(const hk_value *g, hk_value *l, const int64_t *goff) {
  int es = hk_esize(g->elem);
  int64_t gst[HK_MAX_RANK], lst[HK_MAX_RANK], idx[HK_MAX_RANK] = {0};
  hk_strides(g->rank, g->dims, gst);
  hk_strides(l->rank, l->dims, lst);
  for (int64_t i = 0; i < l->n; i++) {
    bool inside = true;
    int64_t off = 0;
    for (int j = 0; j < l->rank; j++) {
      int64_t p = goff[j] + idx[j];
      if (p < 0 || p >= g->dims[j]) inside = false;
      off += p * gst[j];
    }
    if (inside) memcpy((uint8_t *)l->data + i * es, (const uint8_t *)g->data + off * es, (size_t)es);
    for (int j = l->rank - 1; j >= 0; j--) {
      if (++idx[j] < l->dims[j]) break;
      idx[j] = 0;
    }
  }
}

static hk_status *shard_from(const hk_value *global, const hk_sharding *s, int64_t first_leaf,
                             const hk_shape *global_shape, int64_t device, const hk_shape *local,
                             hk_value **out);

hk_status *hk_value_shard(const hk_value *global, const hk_sharding *s,
                          const hk_shape *global_shape, int64_t device,
                          const hk_shape *local, hk_value **out) {
  return shard_from(global, s, 0, global_shape, device, local, out);
}

/* hk_value_shard of a value whose leaves start at leaf first_leaf of s. */
static hk_status *shard_from(const hk_value *global, const hk_sharding *s, int64_t first_leaf,
                             const hk_shape *global_shape, int64_t device, const hk_shape *local,
                             hk_value **out) {
  s = leaf_sharding(s, first_leaf, global_shape);
  if (global->elem == HK_TUPLE) {
    if (local->elem != HK_TUPLE || local->n_tuple != global->n_elems ||
        global_shape->elem != HK_TUPLE || global_shape->n_tuple != global->n_elems)
      return hk_error(HK_INVALID_ARGUMENT, "tuple value does not match the partitioned shape");
    hk_value **e = calloc((size_t)(global->n_elems ? global->n_elems : 1), sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    int64_t leaf = first_leaf;
    for (int i = 0; i < global->n_elems; leaf += hk_shape_leaf_count(global_shape->tuple[i++])) {
      hk_status *st = shard_from(global->elems[i], s, leaf, global_shape->tuple[i], device,
                                 local->tuple[i], &e[i]);
      if (st) {
        for (int j = 0; j < i; j++) hk_value_release(e[j]);
        free(e);
        return hk_status_prefix(st, "tuple element %d", i);
      }
    }
    *out = hk_value_new_tuple(global->n_elems, e);
    free(e);
    return NULL;
  }
  if (!hk_prim_is_array((hk_prim)global->elem)) {
    *out = hk_value_new_token();
    return NULL;
  }
  if (local->elem != global->elem || local->rank != global->rank) {
    char *a = hk_value_shape_string(global), *b = hk_shape_to_string(local);
    hk_status *st = hk_error(HK_INVALID_ARGUMENT, "global value %s does not fit partitioned shape %s", a, b);
    free(a);
    free(b);
    return st;
  }
  int64_t off[HK_MAX_RANK] = {0};
  if (!whole_value(s) && s->kind == HK_SHARDING_TILED) {
    if (hk_sharding_data_rank(s) != global->rank)
      return hk_error(HK_INVALID_ARGUMENT, "sharding rank %d does not match value rank %d",
                      hk_sharding_data_rank(s), global->rank);
    if (!hk_sharding_tile_offset(s, global_shape, device, off))
      return hk_error(HK_INVALID_ARGUMENT, "device %lld is not in the sharding", (long long)device);
  }
  hk_value *l = hk_value_new_array((hk_prim)local->elem, local->rank, local->dims);
  copy_box(global, l, off);
  *out = l;
  return NULL;
}

/* ---- gathering ------------------------------------------------------------------------ */

typedef struct unshard_ctx {
  char **disagree;
  int64_t n;
} unshard_ctx;

static void note(unshard_ctx *c, const char *fmt, long long a, long long b) {
  if (!c->disagree || *c->disagree) return;
  char buf[256];
  snprintf(buf, sizeof buf, fmt, a, b);
  *c->disagree = strdup(buf);
}

/* Places local (device dev) at off in g (clipped to g); with a written
 * map, checks elements an earlier device wrote instead of overwriting. */
static void paste_box(unshard_ctx *c, hk_value *g, uint8_t *written, const hk_value *l,
                      const int64_t *off, int64_t dev) {
  int es = hk_esize(g->elem);
  int64_t gst[HK_MAX_RANK], idx[HK_MAX_RANK] = {0};
  hk_strides(g->rank, g->dims, gst);
  for (int64_t i = 0; i < l->n; i++) {
    bool inside = true;
    int64_t o = 0;
    for (int j = 0; j < l->rank; j++) {
      int64_t p = off[j] + idx[j];
      if (p < 0 || p >= g->dims[j]) inside = false;
      o += p * gst[j];
    }
    if (inside) {
      uint8_t *dst = (uint8_t *)g->data + o * es;
      const uint8_t *src = (const uint8_t *)l->data + i * es;
      if (!written) {
        memcpy(dst, src, (size_t)es);
      } else if (!written[o]) {
        memcpy(dst, src, (size_t)es);
        written[o] = 1;
      } else if (memcmp(dst, src, (size_t)es)) {
        note(c, "device %lld disagrees with an earlier device holding the same tile (element %lld)",
             (long long)dev, (long long)o);
      }
    }
    for (int j = l->rank - 1; j >= 0; j--) {
      if (++idx[j] < l->dims[j]) break;
      idx[j] = 0;
    }
  }
}

void hk_value_paste_box(hk_value *g, const hk_value *l, const int64_t *off) {
  paste_box(NULL, g, NULL, l, off, 0);
}

static hk_status *unshard_array(unshard_ctx *c, hk_value *const *pd, const hk_sharding *s,
                                const hk_shape *gs, hk_value **out) {
  hk_value *g = hk_value_new_array((hk_prim)gs->elem, gs->rank, gs->dims);
  for (int64_t d = 0; d < c->n; d++)
    if (pd[d]->elem != gs->elem || pd[d]->rank != gs->rank) {
      hk_value_release(g);
      char *a = hk_value_shape_string(pd[d]), *b = hk_shape_to_string(gs);
      hk_status *st = hk_error(HK_INVALID_ARGUMENT, "device %lld output %s does not fit global shape %s",
                               (long long)d, a, b);
      free(a);
      free(b);
      return st;
    }
  if (whole_value(s)) {
    int64_t src = s && s->kind == HK_SHARDING_MAXIMAL ? s->device : 0;
    if (src < 0 || src >= c->n || pd[src]->n != g->n) {
      hk_value_release(g);
      return hk_error(HK_INVALID_ARGUMENT, "device %lld has no full-size output", (long long)src);
    }
    memcpy(g->data, pd[src]->data, (size_t)g->nbytes);
    if (!s || s->kind != HK_SHARDING_MAXIMAL)
      for (int64_t d = 0; d < c->n; d++)
        if (pd[d]->nbytes != g->nbytes || memcmp(pd[d]->data, g->data, (size_t)g->nbytes)) {
          note(c, "replicated output differs between device %lld and device %lld", (long long)src,
               (long long)d);
          break;
        }
    *out = g;
    return NULL;
  }
  uint8_t *written = calloc((size_t)(g->n ? g->n : 1), 1);
  if (!written) hk_out_of_memory();
  hk_status *st = NULL;
  for (int64_t d = 0; d < c->n && !st; d++) {
    int64_t off[HK_MAX_RANK] = {0};
    if (hk_sharding_data_rank(s) != gs->rank)
      st = hk_error(HK_INVALID_ARGUMENT, "output sharding rank does not match the output rank");
    else if (hk_sharding_tile_offset(s, gs, d, off))
      paste_box(c, g, written, pd[d], off, d);
  }
  for (int64_t i = 0; i < g->n && !st; i++)
    if (!written[i]) {
      note(c, "element %lld of the output is held by no device (%lld devices)", (long long)i,
           (long long)c->n);
      break;
    }
  free(written);
  if (st) {
    hk_value_release(g);
    return st;
  }
  *out = g;
  return NULL;
}

/* Gathers a value whose leaves start at leaf first_leaf of s. */
static hk_status *unshard(unshard_ctx *c, hk_value *const *pd, const hk_sharding *s,
                          int64_t first_leaf, const hk_shape *gs, hk_value **out) {
  s = leaf_sharding(s, first_leaf, gs);
  if (gs->elem != HK_TUPLE) {
    if (!hk_prim_is_array((hk_prim)gs->elem)) {
      *out = hk_value_new_token();
      return NULL;
    }
    return unshard_array(c, pd, s, gs, out);
  }
  int n = gs->n_tuple;
  for (int64_t d = 0; d < c->n; d++)
    if (pd[d]->elem != HK_TUPLE || pd[d]->n_elems != n)
      return hk_error(HK_INVALID_ARGUMENT, "device %lld output is not a %d-tuple", (long long)d, n);
  hk_value **e = calloc((size_t)(n ? n : 1), sizeof(hk_value *));
  hk_value **col = calloc((size_t)c->n, sizeof(hk_value *));
  if (!e || !col) hk_out_of_memory();
  hk_status *st = NULL;
  int64_t leaf = first_leaf;
  for (int i = 0; i < n && !st; leaf += hk_shape_leaf_count(gs->tuple[i++])) {
    for (int64_t d = 0; d < c->n; d++) col[d] = pd[d]->elems[i];
    st = unshard(c, col, s, leaf, gs->tuple[i], &e[i]);
  }
  free(col);
  if (st) {
    for (int i = 0; i < n; i++) hk_value_release(e[i]);
    free(e);
    return st;
  }
  *out = hk_value_new_tuple(n, e);
  free(e);
  return NULL;
}

hk_status *hk_value_unshard(hk_value *const *per_device, int64_t n_devices,
                            const hk_sharding *s, const hk_shape *global_shape,
                            hk_value **out, char **disagree) {
  if (disagree) *disagree = NULL;
  unshard_ctx c = {disagree, n_devices};
  return unshard(&c, per_device, s, 0, global_shape, out);
}

/* ---- the entry contract of a partitioned program ------------------------------ */

const hk_sharding *hk_spmd_parameter_sharding(const hk_module *g, const hk_module *p, int i) {
  const hk_module_config *cfg = &p->config;
  if (cfg->n_spmd_parameters_shardings == p->entry->n_params && cfg->spmd_parameters_shardings)
    return cfg->spmd_parameters_shardings[i];
  const hk_shape *gs = g->entry->params[i]->shape, *ps = p->entry->params[i]->shape;
  if (!hk_shape_compatible(gs, ps))
    return p->entry->params[i]->sharding ? p->entry->params[i]->sharding : g->entry->params[i]->sharding;
  return NULL;
}

const hk_sharding *hk_spmd_result_sharding(const hk_module *g, const hk_module *p) {
  if (p->config.spmd_output_sharding) return p->config.spmd_output_sharding;
  if (!hk_shape_compatible(g->entry->root->shape, p->entry->root->shape))
    return p->entry->root->sharding ? p->entry->root->sharding : g->entry->root->sharding;
  return NULL;
}
