/* outline.c - the export of a lowered manual computation: the
 * SPMDFullToShardShape / SPMDShardToFullShape pairs manual.c made (they
 * carry hlokit.sdy.body) and the instructions between them go back into
 * a computation @xla.sdy.manual_computation_body.N called between an
 * xla.sdy.GlobalToLocalShape and an xla.sdy.LocalToGlobalShape, with the
 * in/out shardings and manual axes on the custom calls (today's XLA form). */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

typedef struct region {
  const char *body;
  int n_in, n_out;
  hk_instr *f2s[SDY_MAX_VALUES], *s2f[SDY_MAX_VALUES];
  hk_instr *in_copy[SDY_MAX_VALUES], *out_copy[SDY_MAX_VALUES];   /* their copies */
} region;

/* The first region in c: every pair naming the first body found. */
static bool find_region(hk_computation *c, region *r) {
  memset(r, 0, sizeof *r);
  for (hk_instr *i = c->first; i; i = i->next) {
    const char *body = sdy_kept(i, "body");
    if (!body || (r->body && strcmp(body, r->body) != 0)) continue;
    r->body = body;
    const char *in = sdy_kept(i, "operand"), *out = sdy_kept(i, "result");
    int k = atoi(in ? in : out ? out : "0");
    if (k < 0 || k >= SDY_MAX_VALUES) continue;
    if (in) r->f2s[k] = i, r->n_in = r->n_in > k + 1 ? r->n_in : k + 1;
    if (out) r->s2f[k] = i, r->n_out = r->n_out > k + 1 ? r->n_out : k + 1;
  }
  return r->body != NULL;
}

/* Marks (scratch = 1) what the results compute from the region's
 * arguments, stopping at the SPMDFullToShardShape calls. */
static void mark(hk_instr *v, const region *r) {
  for (int k = 0; k < r->n_in; k++)
    if (v == r->f2s[k]) return;
  if (v->scratch) return;
  v->scratch = (void *)1;
  for (int32_t k = 0; k < v->n_operands; k++) mark(v->operands[k], r);
}

static hk_instr *tuple_or_one(hk_computation *c, hk_instr *before, int n, hk_instr **v) {
  if (n == 1) return v[0];
  const hk_shape *shapes[SDY_MAX_VALUES];
  for (int k = 0; k < n; k++) shapes[k] = v[k]->shape;
  const hk_shape *t = hk_shape_tuple(c->module, n, shapes);
  return before ? hk_instr_new_before(before, HK_OP_TUPLE, t, n, v, "tuple")
                : hk_instr_new(c, HK_OP_TUPLE, t, n, v, "tuple");
}

static hk_instr *element(hk_instr *before, hk_instr *t, int n, int k) {
  if (n == 1) return t;
  hk_instr *g = hk_instr_new_before(before, HK_OP_GET_TUPLE_ELEMENT, t->shape->tuple[k], 1, &t, NULL);
  hk_instr_attrs(g)->tuple_index = k;
  return g;
}

static hk_instr *sdy_call(hk_instr *before, const char *target, int n, hk_instr **ops,
                          const hk_shape *shape) {
  hk_instr *cc = hk_instr_new_before(before, HK_OP_CUSTOM_CALL, shape, n, ops, "custom-call");
  hk_attrs *a = hk_instr_attrs(cc);
  a->custom_call_target = hk_intern_cstr(before->parent->module, target);
  a->custom_call_has_side_effect = true;
  return cc;
}

/* Clones the marked instructions of c into body (parameters for the
 * region's arguments); returns the clones of the results. */
static void clone_body(hk_computation *c, hk_computation *body, const region *r, hk_instr **res) {
  for (int k = 0; k < r->n_in; k++) {
    hk_instr *p = hk_instr_new(body, HK_OP_PARAMETER, r->f2s[k]->shape, 0, NULL, r->f2s[k]->name);
    hk_instr_attrs(p)->parameter_number = k;
    hk_computation_register_param(body, p);
    r->f2s[k]->scratch = p;
  }
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  hk_instr *ops[64];
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k];
    if (s->scratch != (void *)1 || s->n_operands > 64) continue;
    for (int32_t j = 0; j < s->n_operands; j++) ops[j] = s->operands[j]->scratch;
    hk_instr *cl = hk_instr_clone(body, s, s->shape, s->n_operands, ops, s->name);
    hk_instr_set_sharding(cl, NULL);           /* the round-trip body carries none */
    if (cl->attrs) cl->attrs->n_control_preds = cl->attrs->n_control_succs = 0;
    sdy_keep_attrs(cl);
    s->scratch = cl;
  }
  for (int j = 0; j < r->n_out; j++) res[j] = r->s2f[j]->operands[0]->operands[0]->scratch;
  free(order);
}

static hk_status *remove_marked(hk_computation *c, const region *r) {
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  hk_status *st = NULL;
  for (int64_t k = n - 1; !st && k >= 0; k--) {   /* users first */
    hk_instr *s = order[k];
    bool ours = s->scratch != NULL;   /* marked: scratch holds its clone */
    for (int j = 0; j < r->n_in; j++) ours |= s == r->f2s[j] || s == r->in_copy[j];
    for (int j = 0; j < r->n_out; j++) ours |= s == r->s2f[j] || s == r->out_copy[j];
    if (ours && !s->n_users) st = hk_instr_remove(s);
  }
  for (int64_t k = 0; k < n; k++) order[k]->scratch = NULL;
  free(order);
  return st;
}

static hk_status *outline(hk_module *m, hk_computation *c, region *r) {
  for (int k = 0; k < r->n_in; k++)
    if (!r->f2s[k] || r->f2s[k]->operands[0]->opcode != HK_OP_COPY)
      return hk_error(HK_INVALID_ARGUMENT, "manual computation %s: operand %d's SPMDFullToShardShape "
                                           "is missing or no longer follows its copy", r->body, k);
  for (int k = 0; k < r->n_out; k++)
    if (!r->s2f[k] || r->s2f[k]->operands[0]->opcode != HK_OP_COPY)
      return hk_error(HK_INVALID_ARGUMENT, "manual computation %s: result %d's SPMDShardToFullShape "
                                           "is missing or no longer follows its copy", r->body, k);
  for (hk_instr *i = c->first; i; i = i->next) i->scratch = NULL;
  for (int k = 0; k < r->n_in; k++) r->in_copy[k] = r->f2s[k]->operands[0];
  for (int j = 0; j < r->n_out; j++) r->out_copy[j] = r->s2f[j]->operands[0];
  for (int j = 0; j < r->n_out; j++) mark(r->out_copy[j]->operands[0], r);
  hk_computation *body = hk_computation_new(m, r->body);
  hk_instr *res[SDY_MAX_VALUES], *ops[SDY_MAX_VALUES];
  clone_body(c, body, r, res);
  hk_computation_set_root(body, tuple_or_one(body, NULL, r->n_out, res));
  hk_instr *at = r->s2f[0];
  const hk_shape *shapes[SDY_MAX_VALUES];
  for (int k = 0; k < r->n_in; k++) ops[k] = r->f2s[k]->operands[0]->operands[0], shapes[k] = r->f2s[k]->shape;
  hk_instr *args[SDY_MAX_VALUES];
  if (r->n_in) {
    hk_instr *first = r->f2s[0];
    const hk_shape *ls = r->n_in == 1 ? shapes[0] : hk_shape_tuple(m, r->n_in, shapes);
    hk_instr *g2l = sdy_call(at, SDY_GLOBAL_TO_LOCAL, r->n_in, ops, ls);
    sdy_instr_attr_set(g2l, SDY_IN_SHARDINGS, sdy_kept(first, "in_shardings"));
    sdy_instr_attr_set(g2l, SDY_MANUAL_AXES, sdy_kept(first, "manual_axes"));
    for (int k = 0; k < r->n_in; k++) args[k] = element(at, g2l, r->n_in, k);
  }
  hk_instr *call = hk_instr_new_before(at, HK_OP_CALL, body->root->shape, r->n_in, args, "call");
  hk_instr_set_called(call, 1, &body);
  sdy_instr_attr_set(call, "inlineable", sdy_kept(r->s2f[0], "call_inlineable"));
  for (int j = 0; j < r->n_out; j++) {
    ops[j] = element(at, call, r->n_out, j);
    shapes[j] = r->s2f[j]->shape;
  }
  const hk_shape *gs = r->n_out == 1 ? shapes[0] : hk_shape_tuple(m, r->n_out, shapes);
  hk_instr *l2g = sdy_call(at, SDY_LOCAL_TO_GLOBAL, r->n_out, ops, gs);
  sdy_instr_attr_set(l2g, SDY_MANUAL_AXES, sdy_kept(r->s2f[0], "manual_axes"));
  sdy_instr_attr_set(l2g, SDY_OUT_SHARDINGS, sdy_kept(r->s2f[0], "out_shardings"));
  for (int j = 0; j < r->n_out; j++) hk_instr_replace_all_uses(r->s2f[j], element(at, l2g, r->n_out, j));
  return remove_marked(c, r);
}

hk_status *sdy_outline_manual(hk_module *m) {
  for (int32_t k = 0; k < m->n_computations; k++) {   /* new bodies are visited too: nesting */
    hk_computation *c = m->computations[k];
    region r;
    while (find_region(c, &r)) {
      const char *body = r.body;
      HK_TRY(outline(m, c, &r));
      if (find_region(c, &r) && r.body == body)
        return hk_error(HK_INVALID_ARGUMENT, "manual computation %s: a value of its body is used "
                                             "outside it", body);
    }
  }
  hk_module_sort_computations(m);
  return NULL;
}
