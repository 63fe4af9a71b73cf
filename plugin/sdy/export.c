/* export.c - sdy-round-trip-export: the module back in the form a
 * Shardy-based frontend writes (XLA's SdyRoundTripExportPipeline output):
 * xla.sdy.meshes on the module, xla.sdy.sharding on parameters and
 * Sharding custom calls, FuncResultSharding custom calls before the root,
 * ShardingGroup custom calls for shard groups, and each lowered manual
 * computation outlined again into GlobalToLocalShape -> call
 * @xla.sdy.manual_computation_body.N -> LocalToGlobalShape.  A sharding
 * is written with the text the import kept while it still means the
 * current HloSharding, else derived from the HloSharding (from_hlo.c). */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

typedef struct export_ctx {
  hk_module *m;
  sdy_meshes meshes;
} export_ctx;

/* Does the kept text still mean sharding h of instruction i? */
static bool kept_matches(export_ctx *cx, hk_instr *i, const char *text, const hk_sharding *h) {
  sdy_import_ctx ic = {cx->m, cx->meshes};
  const hk_sharding *s;
  hk_status *st = sdy_sharding_for_instr(&ic, i, text, 0, NULL, &s);
  if (st) {
    hk_status_free(st);
    return false;
  }
  if (!s || !h) return !s && !h;
  return hk_sharding_equivalent(s, hk_sharding_without_shard_group(cx->m, h));
}

/* The Shardy text for sharding h of a value of shape `shape`, per value
 * (#sdy.sharding_per_value) or not; NULL when the mesh cannot express it. */
/* The mesh a derived sharding is written over: for a single device, the
 * maximal mesh of that device; else the first mesh with axes. */
static const sdy_mesh *mesh_for(const export_ctx *cx, const hk_sharding *h) {
  int64_t dev = hk_sharding_unique_device(h);
  for (int k = 0; k < cx->meshes.n; k++) {
    const sdy_mesh *m = &cx->meshes.m[k];
    if (dev >= 0 ? m->n_axes == 0 && m->n_devices == 1 && m->devices[0] == dev : m->n_axes > 0)
      return m;
  }
  return NULL;
}

static char *derive(export_ctx *cx, const hk_sharding *h, const hk_shape *shape, bool per_value) {
  if (!h) return NULL;
  int n = hk_shape_is_tuple(shape) ? shape->n_tuple : 1;
  sdy_sharding *v = calloc((size_t)n, sizeof *v);
  bool ok = v != NULL && (!hk_shape_is_tuple(shape) || per_value);
  for (int k = 0; ok && k < n; k++) {
    const hk_shape *leaf = hk_shape_is_tuple(shape) ? shape->tuple[k] : shape;
    const hk_sharding *e = hk_sharding_is_tuple(h) ? (k < h->n_elems ? h->elems[k] : NULL) : h;
    const sdy_mesh *mesh = e ? mesh_for(cx, e) : NULL;
    ok = mesh && sdy_from_hlo(cx->m, mesh, mesh->name, e, hk_shape_is_array(leaf) ? leaf->rank : 0,
                              &v[k]);
  }
  char *out = NULL;
  if (ok) {
    hk_buf b;
    hk_buf_init(&b);
    if (per_value) sdy_print_per_value(v, n, &b);
    else sdy_print_sharding(&v[0], &b);
    hk_buf_put(&b, "", 1);
    out = b.data;
  }
  free(v);
  return out;
}

/* Writes xla.sdy.sharding on i for sharding h (kept text or derived). */
static hk_status *write_sharding(export_ctx *cx, hk_instr *i, const char *kept_text,
                                 const hk_sharding *h, bool per_value) {
  /* No sharding to compare with (a body outlined again): the text stands. */
  if (kept_text && (!h || kept_matches(cx, i, kept_text, h))) {
    sdy_instr_attr_set(i, SDY_SHARDING, kept_text);
    return NULL;
  }
  if (!h) return NULL;
  char *text = derive(cx, h, i->shape, per_value);
  if (!text) {
    char *s = hk_sharding_to_string(h);
    hk_status *st = hk_error(HK_UNIMPLEMENTED,
                             "instruction %s: sharding %s is not expressible over the mesh's "
                             "whole axes in mesh order", i->name, s);
    free(s);
    return st;
  }
  sdy_instr_attr_set(i, SDY_SHARDING, text);
  free(text);
  return NULL;
}

/* A custom call placed before `before`, or appended to c when it is NULL. */
static hk_instr *new_custom_call(hk_computation *c, hk_instr *before, const char *target,
                                 const hk_shape *shape, int n, hk_instr **ops, bool side_effect) {
  hk_instr *cc = before ? hk_instr_new_before(before, HK_OP_CUSTOM_CALL, shape, n, ops, "custom-call")
                        : hk_instr_new(c, HK_OP_CUSTOM_CALL, shape, n, ops, "custom-call");
  hk_attrs *a = hk_instr_attrs(cc);
  a->custom_call_target = hk_intern_cstr(c->module, target);
  a->custom_call_has_side_effect = side_effect;
  return cc;
}

/* FuncResultSharding(v) with the result's sharding text. */
static hk_status *result_call(export_ctx *cx, hk_instr *before, hk_instr *v, const char *text,
                              const hk_sharding *h, hk_instr **out) {
  *out = new_custom_call(v->parent, before, SDY_FUNC_RESULT, v->shape, 1, &v, true);
  return write_sharding(cx, *out, text, h, true);
}

static hk_status *export_results(export_ctx *cx, hk_computation *c) {
  hk_instr *root = c->root;
  const char *whole = sdy_kept(root, "result_sharding");
  if (whole) {
    sdy_unkeep(root, "result_sharding");
    hk_instr *cc;
    HK_TRY(result_call(cx, NULL, root, whole, root->sharding, &cc));
    hk_computation_set_root(c, cc);
    return NULL;
  }
  if (root->opcode != HK_OP_TUPLE) return NULL;
  for (int32_t k = 0; k < root->n_operands; k++) {
    char what[48];
    snprintf(what, sizeof what, "result_sharding.%d", k);
    const char *text = sdy_kept(root, what);
    if (!text) continue;
    sdy_unkeep(root, what);
    int64_t idx = k;
    const hk_sharding *h = root->sharding ? hk_sharding_subsharding(root->sharding, 1, &idx) : NULL;
    hk_instr *cc;
    HK_TRY(result_call(cx, root, root->operands[k], text, h, &cc));
    hk_instr_set_operand(root, k, cc);
  }
  return NULL;
}

/* ShardingGroup custom calls for i's shard group (ids the import kept, or
 * the group of its sharding). */
static void export_group(export_ctx *cx, hk_instr *i) {
  const char *ids = sdy_kept(i, "sharding_group_id");
  char own[40];
  if (!ids && i->sharding && i->sharding->shard_group_kind != HK_SHARD_GROUP_NONE) {
    snprintf(own, sizeof own, "%lld : i64", (long long)i->sharding->shard_group_id);
    ids = own;
  }
  if (!ids) return;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", ids);
  sdy_unkeep(i, "sharding_group_id");
  for (char *save = NULL, *id = strtok_r(buf, ";", &save); id; id = strtok_r(NULL, ";", &save)) {
    hk_instr *v = i;
    hk_instr *cc = new_custom_call(i->parent, i->next, SDY_GROUP, hk_shape_tuple(cx->m, 0, NULL), 1,
                                   &v, true);
    sdy_instr_attr_set(cc, SDY_GROUP_ID, id);
  }
  if (i->sharding) {
    const hk_sharding *s = hk_sharding_without_shard_group(cx->m, i->sharding);
    hk_instr_set_sharding(i, s->kind == HK_SHARDING_UNKNOWN ? NULL : s);
  }
}

static hk_status *export_computation(export_ctx *cx, hk_computation *c) {
  if (c->is_entry) HK_TRY(export_results(cx, c));
  for (hk_instr *i = c->first, *next; i; i = next) {
    next = i->next;
    if (sdy_instr_attr(i, KEEP_PREFIX "body")) continue;   /* manual.c's pattern: outline.c */
    const char *text = sdy_kept(i, "sharding");
    bool param = i->opcode == HK_OP_PARAMETER && c->is_entry;
    if (text || (param && i->sharding)) {
      sdy_unkeep(i, "sharding");
      HK_TRY(write_sharding(cx, i, text, i->sharding,
                            text ? strncmp(text, "#sdy.sharding_per_value", 23) == 0 : false));
    }
    const char *bc = sdy_kept(i, "backend_config");
    if (bc) {
      hk_instr_attrs(i)->backend_config = *bc ? bc : NULL;
      sdy_unkeep(i, "backend_config");
    }
    export_group(cx, i);
    sdy_rename_attrs(i, KEEP_PREFIX, "xla.sdy.");   /* the other kept texts (sharding rules, ...) */
  }
  return NULL;
}


/* The module attribute `key` moved to the end of the list (the order the
 * import found them in: XLA prints them sorted). */
static void move_last(hk_module *m, const char *key) {
  const char *v = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes, key);
  if (!v) return;
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, key, NULL);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, key, v);
}

static hk_status *export_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                             bool *changed) {
  (void)self;
  (void)threads;
  *changed = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                          KEEP_TUPLE_ARGS) != NULL;
  HK_TRY(sdy_restore_tuple_args(m));   /* first: the parameters carry the kept texts */
  const char *meshes = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                    KEEP_MESHES);
  if (!meshes) return NULL;        /* nothing imported from Shardy */
  export_ctx cx = {m, {0}};
  HK_TRY(sdy_parse_meshes(meshes, &cx.meshes));
  hk_status *st = sdy_outline_manual(m);
  for (int32_t k = 0; !st && k < m->n_computations; k++)
    st = export_computation(&cx, m->computations[k]);
  sdy_meshes_free(&cx.meshes);
  if (st) return st;
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, SDY_MESHES, meshes);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, KEEP_MESHES, NULL);
  move_last(m, SDY_USE_TUPLE_ARGS);
  *changed = true;
  return NULL;
}

static const hk_pass_vtable export_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "sdy-round-trip-export", .run = export_run,
    .destroy = hk_pass_free};

static hk_pass *export_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&export_vtable, sizeof(hk_pass), err);
}

const hk_pass_desc sdy_export_desc = {
    .size = sizeof(hk_pass_desc), .name = "sdy-round-trip-export",
    .summary = "write the module back with Shardy round-trip attributes (xla.sdy.*), as XLA's "
               "SdyRoundTripExportPipeline (of a module sdy-round-trip-import{keep=true} read)",
    .create = export_create};
