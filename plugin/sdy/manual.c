/* manual.c - a round-tripped manual computation (shard_map) lowered the
 * way XLA's export of sdy.manual_computation does (mhlo_round_trip/
 * shard_map_export.cc): for each operand a copy with the in sharding and
 * an SPMDFullToShardShape to the local shape, the body inlined with manual
 * (subgroup) shardings, and for each result a copy and an
 * SPMDShardToFullShape with the out sharding.  The round-trip form read
 * is xla.sdy.GlobalToLocalShape -> call @xla.sdy.manual_computation_body.N
 * -> xla.sdy.LocalToGlobalShape, the in/out shardings and manual axes on
 * the custom calls (or, in older dumps, on the call). */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

typedef struct manual_info {
  hk_instr *call, *g2l, *l2g;
  sdy_per_value in, out;
  sdy_manual_axes axes;
  const sdy_mesh *mesh;
  int n_region;                    /* manual axes inside: this one's + the parents' */
  char region[SDY_MAX_AXES][64];
  int n_parent;
  char (*parent)[64];
} manual_info;

/* The custom call feeding the call's operands (directly or through
 * get-tuple-elements), NULL when the call has no operands. */
static hk_instr *find_g2l(const hk_instr *call) {
  if (!call->n_operands) return NULL;
  hk_instr *o = call->operands[0];
  if (o->opcode == HK_OP_GET_TUPLE_ELEMENT) o = o->operands[0];
  return sdy_is_custom_call(o, SDY_GLOBAL_TO_LOCAL) ? o : NULL;
}

static hk_instr *find_l2g(const hk_instr *call) {
  for (int32_t k = 0; k < call->n_users; k++) {
    hk_instr *u = call->users[k];
    if (sdy_is_custom_call(u, SDY_LOCAL_TO_GLOBAL)) return u;
    if (u->opcode == HK_OP_GET_TUPLE_ELEMENT && u->n_users && sdy_is_custom_call(u->users[0], SDY_LOCAL_TO_GLOBAL))
      return u->users[0];
  }
  return NULL;
}

/* An attribute of the manual computation: on the custom call (today's
 * XLA) or on the call (older XLA). */
static const char *manual_attr(const manual_info *mi, hk_instr *cc, const char *key,
                               hk_instr **where) {
  const char *v = cc ? sdy_instr_attr(cc, key) : NULL;
  *where = cc;
  if (!v) v = sdy_instr_attr(mi->call, key), *where = mi->call;
  return v;
}

static int rank_of(const hk_shape *s) { return hk_shape_is_array(s) ? s->rank : 0; }

/* Every in/out sharding is valid over the one mesh of the computation
 * (Shardy requires one), for its value's rank; the manual axes are the
 * mesh's. */
static hk_status *check_shardings(sdy_import_ctx *cx, const manual_info *mi) {
  int n_results = !mi->l2g ? 0 : hk_shape_is_tuple(mi->l2g->shape) ? mi->l2g->shape->n_tuple : 1;
  if (mi->out.n != n_results)
    return sdy_error_at(mi->l2g ? mi->l2g : mi->call, NULL,
                        hk_error(HK_INVALID_ARGUMENT, "%d out shardings for %d results", mi->out.n,
                                 n_results));
  if (!mi->mesh)
    return mi->axes.n ? sdy_error_at(mi->call, NULL,
                                     hk_error(HK_INVALID_ARGUMENT, "manual axes without in or out "
                                                                   "shardings: no mesh to take them from"))
                      : NULL;
  for (int k = 0; k < mi->in.n + mi->out.n; k++) {
    bool in = k < mi->in.n;
    const sdy_sharding *sh = in ? &mi->in.v[k] : &mi->out.v[k - mi->in.n];
    const hk_instr *at = in ? mi->g2l : mi->l2g;
    int j = in ? k : k - mi->in.n;
    const hk_shape *v = in ? at->operands[j]->shape
                           : hk_shape_is_tuple(at->shape) ? at->shape->tuple[j] : at->shape;
    hk_status *st = NULL;
    if (sdy_find_mesh(&cx->meshes, sh) != mi->mesh)
      st = hk_error(HK_INVALID_ARGUMENT, "%s sharding %d is on another mesh", in ? "in" : "out", j);
    else
      st = sdy_check_sharding(mi->mesh, sh, rank_of(v));
    if (!st) sdy_to_hlo(cx->m, mi->mesh, sh, 0, NULL, &st);   /* its axes form a sharding */
    if (!st) st = sdy_check_free_of(sh, mi->n_parent, mi->parent);
    if (st) return sdy_error_at(at, in ? SDY_IN_SHARDINGS : SDY_OUT_SHARDINGS, st);
  }
  for (int k = 0; k < mi->axes.n; k++) {
    bool found = false;
    for (int a = 0; a < mi->mesh->n_axes; a++) found |= !strcmp(mi->mesh->axes[a].name, mi->axes.names[k]);
    for (int j = 0; j < k; j++) found &= strcmp(mi->axes.names[j], mi->axes.names[k]) != 0;
    if (!found)
      return sdy_error_at(mi->g2l ? mi->g2l : mi->l2g, SDY_MANUAL_AXES,
                          hk_error(HK_INVALID_ARGUMENT, "manual axis \"%s\" is not a distinct axis of "
                                                        "the mesh", mi->axes.names[k]));
  }
  for (int k = 0; k < mi->n_parent; k++)
    for (int j = 0; j < mi->axes.n; j++)
      if (!strcmp(mi->parent[k], mi->axes.names[j]))
        return sdy_error_at(mi->g2l ? mi->g2l : mi->l2g, SDY_MANUAL_AXES,
                            hk_error(HK_INVALID_ARGUMENT, "manual axis \"%s\" is manual in the "
                                                          "enclosing computation already",
                                     mi->parent[k]));
  return NULL;
}

static hk_status *read_attrs(sdy_import_ctx *cx, manual_info *mi) {
  hk_instr *w;
  const char *in = manual_attr(mi, mi->g2l, SDY_IN_SHARDINGS, &w);
  hk_status *st = in ? sdy_parse_per_value(in, &mi->in) : NULL;
  if (st) return sdy_error_at(w, SDY_IN_SHARDINGS, st);
  const char *out = manual_attr(mi, mi->l2g, SDY_OUT_SHARDINGS, &w);
  st = out ? sdy_parse_per_value(out, &mi->out) : NULL;
  if (st) return sdy_error_at(w, SDY_OUT_SHARDINGS, st);
  const char *axes = manual_attr(mi, mi->g2l ? mi->g2l : mi->l2g, SDY_MANUAL_AXES, &w);
  st = axes ? sdy_parse_manual_axes(axes, &mi->axes) : NULL;
  if (st) return sdy_error_at(w, SDY_MANUAL_AXES, st);
  /* Without operands (results) there is no GlobalToLocalShape
   * (LocalToGlobalShape) and its shardings may be absent: none. */
  if ((!in && mi->call->n_operands) || (!out && mi->l2g) || (!axes && (mi->g2l || mi->l2g)))
    return sdy_error_at(mi->call, NULL,
                        hk_error(HK_INVALID_ARGUMENT,
                                 "a manual computation needs %s, %s and %s", SDY_IN_SHARDINGS,
                                 SDY_OUT_SHARDINGS, SDY_MANUAL_AXES));
  if (mi->in.n > SDY_MAX_VALUES || mi->out.n > SDY_MAX_VALUES)
    return sdy_error_at(mi->call, NULL, hk_error(HK_UNIMPLEMENTED, "a manual computation with more "
                                                                   "than %d operands or results",
                                                 SDY_MAX_VALUES));
  int n_in = mi->g2l ? mi->g2l->n_operands : 0;
  if (mi->in.n != n_in || mi->in.n != mi->call->n_operands)
    return sdy_error_at(mi->call, NULL, hk_error(HK_INVALID_ARGUMENT,
                                                 "%d in shardings for %d operands", mi->in.n,
                                                 mi->call->n_operands));
  const sdy_sharding *first = mi->in.n ? &mi->in.v[0] : mi->out.n ? &mi->out.v[0] : NULL;
  mi->mesh = first ? sdy_find_mesh(&cx->meshes, first) : NULL;
  if (first && !mi->mesh)
    return sdy_error_at(mi->call, NULL,
                        hk_error(HK_INVALID_ARGUMENT, "unknown mesh @%s", first->mesh_name));
  HK_TRY(check_shardings(cx, mi));
  for (int k = 0; k < mi->axes.n; k++) memcpy(mi->region[mi->n_region++], mi->axes.names[k], 64);
  for (int k = 0; k < mi->n_parent; k++) memcpy(mi->region[mi->n_region++], mi->parent[k], 64);
  return NULL;
}

static bool fully_manual(const manual_info *mi) {
  return mi->mesh && mi->mesh->n_axes == mi->n_region;
}

/* A sharding over the mesh, {replicated} where Shardy's is fully open. */
static const hk_sharding *over_mesh(sdy_import_ctx *cx, const manual_info *mi,
                                    const sdy_sharding *s, int n, char (*axes)[64]) {
  hk_status *st;   /* none: check_shardings has converted s */
  const hk_sharding *h = sdy_to_hlo(cx->m, mi->mesh, s, n, axes, &st);
  hk_status_free(st);
  return h ? h : hk_sharding_replicated(cx->m);
}

/* The body-side sharding of a value: s without the manual axes, with the
 * region's manual axes as a manual subgroup ({manual} when all are). */
static const hk_sharding *local_sharding(sdy_import_ctx *cx, manual_info *mi,
                                         const sdy_sharding *s) {
  if (fully_manual(mi)) return hk_sharding_manual(cx->m);
  sdy_sharding t = *s;
  sdy_drop_axes(&t, mi->n_region, mi->region);
  return over_mesh(cx, mi, &t, mi->n_region, mi->region);
}

/* The number of devices an axis ref spans. */
static int64_t ref_size(const sdy_mesh *mesh, const sdy_axis_ref *r) {
  if (r->sub) return r->size;
  for (int k = 0; k < mesh->n_axes; k++)
    if (!strcmp(mesh->axes[k].name, r->name)) return mesh->axes[k].size;
  return 1;
}

/* Does `local` have the shape of `global` split by the manual axes of s
 * (the region's own axes: parents' are split already)? */
static bool local_shape_fits(const manual_info *mi, const sdy_sharding *s, const hk_shape *global,
                             const hk_shape *local) {
  if (!hk_shape_is_array(global) || !hk_shape_is_array(local)) return true;   /* tokens */
  if (global->rank != local->rank || s->rank != global->rank) return false;
  for (int d = 0; d < s->rank; d++) {
    int64_t parts = 1;
    for (int k = 0; k < s->dims[d].n_axes; k++)
      for (int j = 0; j < mi->axes.n; j++)
        if (!strcmp(s->dims[d].axes[k].name, mi->axes.names[j]))
          parts *= ref_size(mi->mesh, &s->dims[d].axes[k]);
    if (global->dims[d] != local->dims[d] * parts) return false;
  }
  return true;
}

static hk_status *shape_mismatch(const hk_instr *at, const char *what, int k, const hk_shape *global,
                                 const hk_shape *local) {
  char *g = hk_shape_to_string(global), *l = hk_shape_to_string(local);
  hk_status *st = sdy_error_at(at, NULL, hk_error(HK_INVALID_ARGUMENT,
                                                  "%s %d: local shape %s is not global shape %s "
                                                  "split by the manual axes of its sharding",
                                                  what, k, l, g));
  free(g);
  free(l);
  return st;
}

/* Gives every body instruction its manual sharding (nested manual
 * computations lowered first, with this region's axes as their parents). */
static hk_status *shard_body(sdy_import_ctx *cx, manual_info *mi, hk_computation *body) {
  for (hk_instr *i = body->first, *next; i; i = next) {
    next = i->next;
    if (i->opcode == HK_OP_CALL && i->n_called == 1 && strstr(i->called[0]->name, SDY_BODY_PREFIX)) {
      HK_TRY(sdy_import_manual(cx, i, mi->n_region, mi->region));
      next = body->first;
    }
  }
  for (hk_instr *i = body->first; i; i = i->next) {
    if (i->sharding || !mi->mesh) continue;
    const char *text = sdy_takes_sharding(i) ? sdy_instr_attr(i, SDY_SHARDING) : NULL;
    const hk_sharding *s = NULL;
    if (fully_manual(mi)) {
      s = hk_sharding_for_shape(cx->m, hk_sharding_manual(cx->m), i->shape);
    } else if (text) {
      hk_status *st = sdy_sharding_for_instr(cx, i, text, mi->n_region, mi->region, &s);
      if (st) return sdy_error_at(i, SDY_SHARDING, st);
    } else {
      int n = hk_shape_is_tuple(i->shape) ? i->shape->n_tuple : 1;
      const hk_sharding *elems[SDY_MAX_VALUES];
      if (n > SDY_MAX_VALUES)
        return sdy_error_at(i, NULL, hk_error(HK_UNIMPLEMENTED, "a tuple of more than %d values in a "
                                                                "manual computation", SDY_MAX_VALUES));
      for (int k = 0; k < n; k++) {
        const hk_shape *leaf = hk_shape_is_tuple(i->shape) ? i->shape->tuple[k] : i->shape;
        sdy_sharding open;
        sdy_open_sharding(&open, "", hk_shape_is_array(leaf) ? leaf->rank : 0);
        elems[k] = over_mesh(cx, mi, &open, mi->n_region, mi->region);
      }
      s = hk_shape_is_tuple(i->shape) ? hk_sharding_tuple(cx->m, n, elems) : elems[0];
    }
    hk_instr_set_sharding(i, s);
    sdy_keep_attrs(i);
  }
  return NULL;
}

static hk_instr *custom_call(hk_instr *before, const char *target, const hk_shape *shape,
                             hk_instr *operand, const char *name) {
  hk_instr *cc = hk_instr_new_before(before, HK_OP_CUSTOM_CALL, shape, 1, &operand, name);
  hk_instr_attrs(cc)->custom_call_target = hk_intern_cstr(before->parent->module, target);
  return cc;
}

static hk_instr *copy_of(hk_instr *before, hk_instr *v, const hk_sharding *s) {
  hk_instr *c = hk_instr_new_before(before, HK_OP_COPY, v->shape, 1, &v, NULL);
  hk_instr_set_sharding(c, s);
  return c;
}

/* Copies the body into the call's computation before the call, its
 * parameters bound to args; returns the copy of the body's root. */
static hk_instr *inline_body(hk_instr *call, hk_instr **args) {
  hk_computation *body = call->called[0];
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(body, &n);
  hk_instr *ops[64], **big = NULL;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k];
    if (s->opcode == HK_OP_PARAMETER) {
      s->scratch = args[hk_instr_parameter_number(s)];
      continue;
    }
    hk_instr **o = ops;
    if (s->n_operands > 64 && !(o = big = realloc(big, sizeof *big * (size_t)s->n_operands))) hk_out_of_memory();
    for (int32_t j = 0; j < s->n_operands; j++) o[j] = s->operands[j]->scratch;
    hk_instr *c = hk_instr_new_before(call, (hk_opcode)s->opcode, s->shape, s->n_operands, o, s->name);
    if (s->attrs) {
      hk_attrs *a = hk_instr_attrs(c);
      *a = *s->attrs;
      a->n_control_preds = a->n_control_succs = 0;
      a->control_preds = a->control_succs = NULL;
    }
    if (s->n_dims) hk_instr_set_dims(c, s->n_dims, s->dims);
    if (s->n_called) hk_instr_set_called(c, s->n_called, s->called);
    hk_instr_set_sharding(c, s->sharding);
    s->scratch = c;
  }
  hk_instr *root = body->root->scratch;
  for (int64_t k = 0; k < n; k++) order[k]->scratch = NULL;
  free(order);
  free(big);
  return root;
}

/* Removes i's get-tuple-element users (already replaced), then i. */
static hk_status *remove_with_gtes(hk_instr *i) {
  while (i->n_users) {
    hk_instr *u = i->users[0];
    if (u->opcode != HK_OP_GET_TUPLE_ELEMENT || u->n_users || hk_instr_is_root(u))
      return sdy_error_at(u, NULL, hk_error(HK_INVALID_ARGUMENT,
                                            "unexpected use of %s in a manual computation",
                                            i->name));
    HK_TRY(hk_instr_remove(u));
  }
  return hk_instr_remove(i);
}

static void keep_index(hk_instr *i, const char *key, int k) {
  char v[16];
  snprintf(v, sizeof v, "%d", k);
  sdy_instr_attr_set(i, key, v);
}

static hk_status *lower(sdy_import_ctx *cx, manual_info *mi) {
  hk_instr *call = mi->call;
  hk_computation *body = call->called[0];
  hk_instr *args[SDY_MAX_VALUES];
  hk_instr *w;
  const char *in_text = manual_attr(mi, mi->g2l, SDY_IN_SHARDINGS, &w);
  const char *out_text = manual_attr(mi, mi->l2g, SDY_OUT_SHARDINGS, &w);
  const char *axes_text = manual_attr(mi, mi->g2l ? mi->g2l : mi->l2g, SDY_MANUAL_AXES, &w);
  for (int k = 0; k < mi->in.n; k++)
    if (!local_shape_fits(mi, &mi->in.v[k], mi->g2l->operands[k]->shape, body->params[k]->shape))
      return shape_mismatch(mi->g2l, "operand", k, mi->g2l->operands[k]->shape, body->params[k]->shape);
  for (int j = 0; mi->l2g && j < mi->out.n; j++) {
    const hk_shape *global = hk_shape_is_tuple(mi->l2g->shape) ? mi->l2g->shape->tuple[j] : mi->l2g->shape;
    const hk_shape *local = mi->l2g->operands[j]->shape;
    if (!local_shape_fits(mi, &mi->out.v[j], global, local))
      return shape_mismatch(mi->l2g, "result", j, global, local);
  }
  HK_TRY(shard_body(cx, mi, body));
  for (int k = 0; k < mi->in.n; k++) {
    hk_instr *x = mi->g2l->operands[k];
    hk_instr *cp = copy_of(call, x, over_mesh(cx, mi, &mi->in.v[k], mi->n_parent, mi->parent));
    args[k] = custom_call(call, "SPMDFullToShardShape", body->params[k]->shape, cp, mi->g2l->name);
    hk_instr_set_sharding(args[k], local_sharding(cx, mi, &mi->in.v[k]));
    sdy_instr_attr_set(args[k], KEEP_PREFIX "in_shardings", in_text);
    sdy_instr_attr_set(args[k], KEEP_PREFIX "manual_axes", axes_text);
    sdy_instr_attr_set(args[k], KEEP_PREFIX "body", body->name);
    keep_index(args[k], KEEP_PREFIX "operand", k);
  }
  hk_instr *root = inline_body(call, args);
  int n_out = mi->out.n;
  hk_instr *anchor = mi->l2g ? mi->l2g : call;
  for (int j = 0; j < n_out; j++) {
    if (!mi->l2g) break;           /* read_attrs: no LocalToGlobalShape, no out shardings */
    hk_instr *r = root;            /* result j of the body */
    if (root->opcode == HK_OP_TUPLE && hk_shape_is_tuple(call->shape)) {
      r = root->operands[j];
    } else if (hk_shape_is_tuple(call->shape)) {
      r = hk_instr_new_before(anchor, HK_OP_GET_TUPLE_ELEMENT, root->shape->tuple[j], 1, &root, NULL);
      hk_instr_attrs(r)->tuple_index = j;
      hk_instr_set_sharding(r, hk_sharding_subsharding(root->sharding, 1, (int64_t[]){j}));
    }
    const hk_shape *global = hk_shape_is_tuple(mi->l2g->shape) ? mi->l2g->shape->tuple[j]
                                                                : mi->l2g->shape;
    hk_instr *cp = copy_of(anchor, r, local_sharding(cx, mi, &mi->out.v[j]));
    hk_instr *s2f = custom_call(anchor, "SPMDShardToFullShape", global, cp, mi->l2g->name);
    hk_instr_set_sharding(s2f, over_mesh(cx, mi, &mi->out.v[j], mi->n_parent, mi->parent));
    sdy_instr_attr_set(s2f, KEEP_PREFIX "out_shardings", out_text);
    sdy_instr_attr_set(s2f, KEEP_PREFIX "manual_axes", axes_text);
    sdy_instr_attr_set(s2f, KEEP_PREFIX "body", body->name);
    keep_index(s2f, KEEP_PREFIX "result", j);
    /* the call's inlineable="false" (JAX writes it, older XLA did not) */
    sdy_instr_attr_set(s2f, KEEP_PREFIX "call_inlineable", sdy_instr_attr(call, "inlineable"));
    if (!hk_shape_is_tuple(mi->l2g->shape)) {
      hk_instr_replace_all_uses(mi->l2g, s2f);
      continue;
    }
    for (int32_t u = 0; u < mi->l2g->n_users; u++)
      if (mi->l2g->users[u]->opcode == HK_OP_GET_TUPLE_ELEMENT &&
          hk_instr_tuple_index(mi->l2g->users[u]) == j)
        hk_instr_replace_all_uses(mi->l2g->users[u], s2f);
  }
  if (mi->l2g) HK_TRY(remove_with_gtes(mi->l2g));
  if (root->opcode == HK_OP_TUPLE && !root->n_users) HK_TRY(hk_instr_remove(root));
  HK_TRY(remove_with_gtes(call));
  if (mi->g2l) HK_TRY(remove_with_gtes(mi->g2l));
  hk_module_remove_computation(cx->m, body);
  return NULL;
}

/* Is v value k of t: t itself when t has one value, else its
 * get-tuple-element k? */
static bool is_value(const hk_instr *v, const hk_instr *t, int k) {
  if (!hk_shape_is_tuple(t->shape)) return v == t && k == 0;
  return v->opcode == HK_OP_GET_TUPLE_ELEMENT && v->operands[0] == t && hk_instr_tuple_index(v) == k;
}

/* The form the export writes: call operand k is GlobalToLocalShape value
 * k, LocalToGlobalShape operand j is call value j. */
static hk_status *check_wiring(const manual_info *mi) {
  for (int32_t k = 0; mi->g2l && k < mi->call->n_operands; k++)
    if (!is_value(mi->call->operands[k], mi->g2l, k) || mi->call->n_operands != mi->g2l->n_operands)
      return sdy_error_at(mi->call, NULL, hk_error(HK_UNIMPLEMENTED, "operand %d is not value %d of "
                                                                     "%s", k, k, mi->g2l->name));
  for (int32_t j = 0; mi->l2g && j < mi->l2g->n_operands; j++)
    if (!is_value(mi->l2g->operands[j], mi->call, j))
      return sdy_error_at(mi->l2g, NULL, hk_error(HK_UNIMPLEMENTED, "operand %d is not value %d of "
                                                                    "%s", j, j, mi->call->name));
  return NULL;
}

hk_status *sdy_import_manual(sdy_import_ctx *cx, hk_instr *call, int n_parent,
                             char (*parent)[64]) {
  manual_info mi = {0};
  mi.call = call;
  mi.g2l = find_g2l(call);
  mi.l2g = find_l2g(call);
  mi.n_parent = n_parent;
  mi.parent = parent;
  hk_status *st = NULL;
  if (call->n_operands && !mi.g2l)
    st = sdy_error_at(call, NULL, hk_error(HK_INVALID_ARGUMENT, "operands of a manual computation "
                                                                "body call must come from %s",
                                           SDY_GLOBAL_TO_LOCAL));
  else if (!mi.l2g && (call->n_users || hk_instr_is_root(call)))
    st = sdy_error_at(call, NULL, hk_error(HK_INVALID_ARGUMENT, "the results of a manual computation "
                                                              "body call must go to %s",
                                           SDY_LOCAL_TO_GLOBAL));
  if (!st) st = check_wiring(&mi);
  if (!st) st = read_attrs(cx, &mi);
  if (!st) st = lower(cx, &mi);
  sdy_per_value_free(&mi.in);
  sdy_per_value_free(&mi.out);
  return st;
}
