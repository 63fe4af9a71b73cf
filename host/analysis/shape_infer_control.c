/* shape_infer_control.c - shape inference for tuples, control flow (while, conditional, call, fusion, async) and tokens/send/recv/infeed. */
#include <string.h>

#include "analysis_internal.h"

#define OPND(c, k) ((c)->i->operands[k]->shape)

static const hk_shape *param_shape(const hk_computation *comp, int k) {
  return comp->params && k < comp->n_params && comp->params[k] ? comp->params[k]->shape : NULL;
}

static hk_status *need_called(const hk_instr *i, int k, const char *what,
                              hk_computation **out) {
  *out = k < i->n_called ? i->called[k] : NULL;
  if (!*out) return ana_fail(i, "missing %s computation", what);
  if (!(*out)->root) return ana_fail(i, "%s computation '%s' has no root", what, (*out)->name);
  return NULL;
}

static hk_status *param_count(const hk_instr *i, const hk_computation *comp, int n) {
  if (comp->n_params != n)
    return ana_fail(i, "expected computation '%s' to have %d parameters, has %d", comp->name,
                    n, (int)comp->n_params);
  return NULL;
}

/* Operand k of i has the shape of parameter p of comp. */
static hk_status *operand_matches_param(const hk_instr *i, int k,
                                        const hk_computation *comp, int p) {
  const hk_shape *ps = param_shape(comp, p), *os = i->operands[k]->shape;
  if (!ps || !ana_compatible(os, ps)) {
    char a[160], b[160];
    return ana_fail(i, "operand %d has shape %s, but parameter %d of computation '%s' has %s",
                    k, ana_shape_str(os, a, sizeof a), p, comp->name,
                    ana_shape_str(ps, b, sizeof b));
  }
  return NULL;
}

static bool is_token(const hk_shape *s) { return s && s->elem == HK_TOKEN; }

static hk_status *need_token_operand(ana_ctx *c, int k) {
  if (k < c->i->n_operands && is_token(OPND(c, k))) return NULL;
  char b[128];
  return ana_fail(c->i, "expected operand %d to be token-shaped, has %s", k,
                  k < c->i->n_operands ? ana_shape_str(OPND(c, k), b, sizeof b) : "none");
}

/* ---- tuples ---------------------------------------------------------------- */

static hk_status *infer_tuple(ana_ctx *c, const hk_shape **out) {
  int n = c->i->n_operands;
  const hk_shape *stack[16], **el = stack;
  if (n > 16) el = hk_alloc(c->m, sizeof(*el) * (size_t)n);
  for (int k = 0; k < n; k++) el[k] = OPND(c, k);
  *out = ana_tuple(c->m, n, el);
  return NULL;
}

static hk_status *infer_gte(ana_ctx *c, const hk_shape **out) {
  const hk_shape *t = OPND(c, 0);
  int64_t idx = hk_instr_tuple_index(c->i);
  char b[128];
  if (!hk_shape_is_tuple(t))
    return ana_fail(c->i, "get-tuple-element of a non-tuple %s", ana_shape_str(t, b, sizeof b));
  if (idx < 0 || idx >= t->n_tuple)
    return ana_fail(c->i, "tuple index %lld is out of range for %s", (long long)idx,
                    ana_shape_str(t, b, sizeof b));
  *out = t->tuple[idx];
  return NULL;
}

/* ---- control flow ----------------------------------------------------------- */

static hk_status *infer_while(ana_ctx *c, const hk_shape **out) {
  hk_computation *cond, *body;
  char b[128];
  HK_TRY(need_called(c->i, 0, "condition", &cond));
  HK_TRY(need_called(c->i, 1, "body", &body));
  HK_TRY(param_count(c->i, body, 1));
  HK_TRY(param_count(c->i, cond, 1));
  HK_TRY(operand_matches_param(c->i, 0, body, 0));
  HK_TRY(operand_matches_param(c->i, 0, cond, 0));
  const hk_shape *cs = cond->root->shape;
  if (!ana_is_scalar(cs) || cs->elem != HK_PRED)
    return ana_fail(c->i, "condition computation '%s' must return pred[], returns %s",
                    cond->name, ana_shape_str(cs, b, sizeof b));
  *out = body->root->shape;
  return NULL;
}

static hk_status *infer_conditional(ana_ctx *c, const hk_shape **out) {
  const hk_instr *i = c->i;
  char a[160], b[160];
  if (i->n_operands < 1) return ana_fail(i, "conditional needs a branch index operand");
  const hk_shape *p = OPND(c, 0);
  if (!ana_is_scalar(p))
    return ana_fail(i, "the first operand of conditional must be a scalar, has %s",
                    ana_shape_str(p, a, sizeof a));
  int nb = i->n_called;
  if (p->elem == HK_PRED) {
    if (nb != 2) return ana_fail(i, "a pred conditional needs 2 branches, has %d", nb);
  } else if (p->elem != HK_S32) {
    return ana_fail(i, "the first operand of conditional must be a scalar of PRED or S32, got %s",
                    hk_prim_name((hk_prim)p->elem));
  } else if (nb < 1) {
    return ana_fail(i, "an indexed conditional needs at least one branch");
  }
  if (i->n_operands != nb + 1)
    return ana_fail(i, "conditional with %d branches needs %d operands, has %d", nb, nb + 1,
                    (int)i->n_operands);
  const hk_shape *res = NULL;
  for (int k = 0; k < nb; k++) {
    hk_computation *br;
    HK_TRY(need_called(i, k, "branch", &br));
    HK_TRY(param_count(i, br, 1));
    HK_TRY(operand_matches_param(i, k + 1, br, 0));
    if (res && !ana_compatible(res, br->root->shape))
      return ana_fail(i, "branch '%s' returns %s but branch 0 returns %s", br->name,
                      ana_shape_str(br->root->shape, a, sizeof a), ana_shape_str(res, b, sizeof b));
    if (!res) res = br->root->shape;
  }
  *out = res;
  return NULL;
}

static hk_status *infer_call(ana_ctx *c, const hk_shape **out) {
  hk_computation *comp;
  HK_TRY(need_called(c->i, 0, c->i->opcode == HK_OP_FUSION ? "fused" : "to_apply", &comp));
  if (c->i->n_called != 1)
    return ana_fail(c->i, "expected exactly one called computation, has %d", (int)c->i->n_called);
  if (c->i->opcode == HK_OP_CALL) {
    HK_TRY(param_count(c->i, comp, c->i->n_operands));
  } else if (comp->n_params > c->i->n_operands) {
    return ana_fail(c->i, "fused parameter count (%d) is greater than the number of operands (%d)",
                    (int)comp->n_params, (int)c->i->n_operands);
  }
  for (int k = 0; k < comp->n_params; k++) HK_TRY(operand_matches_param(c->i, k, comp, k));
  *out = comp->root->shape;
  return NULL;
}

/* ---- async ---------------------------------------------------------------- */

hk_computation *ana_async_computation(const hk_instr *i) {
  for (int guard = 0; i && guard < 1000; guard++) {
    if (i->n_called > 0) return i->called[0];
    if (i->opcode != HK_OP_ASYNC_DONE && i->opcode != HK_OP_ASYNC_UPDATE) return NULL;
    if (i->n_operands < 1) return NULL;
    i = i->operands[0];
  }
  return NULL;
}

/* ((params...), result, context...) as the wrapped computation implies. */
static hk_status *check_async_shape(ana_ctx *c, const hk_computation *comp,
                                    const hk_shape *s) {
  char a[200], b[200];
  const char *form = "AsyncStart and AsyncUpdate expect the op shape to be in the form of "
                     "((async-operands), async-outputs, state).";
  if (!hk_shape_is_tuple(s) || s->n_tuple < 2 || !hk_shape_is_tuple(s->tuple[0]))
    return ana_fail(c->i, "%s Found %s", form, ana_shape_str(s, a, sizeof a));
  const hk_shape *ops = s->tuple[0];
  bool ok = ops->n_tuple == comp->n_params;
  for (int k = 0; ok && k < ops->n_tuple; k++)
    ok = ana_compatible(ops->tuple[k], param_shape(comp, k));
  if (!ok)
    return ana_fail(c->i, "async shape at index {0} %s does not match the parameters of "
                    "computation '%s'", ana_shape_str(ops, a, sizeof a), comp->name);
  if (!ana_compatible(s->tuple[1], comp->root->shape))
    return ana_fail(c->i, "async shape at index {1} %s does not match the root of '%s' (%s)",
                    ana_shape_str(s->tuple[1], a, sizeof a), comp->name,
                    ana_shape_str(comp->root->shape, b, sizeof b));
  return NULL;
}

static hk_status *async_comp(ana_ctx *c, hk_computation **comp) {
  *comp = ana_async_computation(c->i);
  if (!*comp || !(*comp)->root)
    return ana_fail(c->i, "cannot find the computation this async op wraps");
  return NULL;
}

static hk_status *need_async_operand(ana_ctx *c) {
  const hk_instr *op = c->i->operands[0];
  if (op->opcode != HK_OP_ASYNC_START && op->opcode != HK_OP_ASYNC_UPDATE)
    return ana_fail(c->i, "AsyncUpdate and AsyncDone expect their operand to be the previous "
                    "async op, found %s", hk_opcode_name((hk_opcode)op->opcode));
  return NULL;
}

static hk_status *infer_async(ana_ctx *c, const hk_shape **out) {
  hk_computation *comp;
  HK_TRY(async_comp(c, &comp));
  const hk_instr *i = c->i;
  if (i->opcode == HK_OP_ASYNC_START) {
    HK_TRY(check_async_shape(c, comp, i->shape));
    if (i->n_operands != comp->n_params)
      return ana_fail(i, "async-start has %d operands for %d parameters of '%s'",
                      (int)i->n_operands, (int)comp->n_params, comp->name);
    for (int k = 0; k < i->n_operands; k++) HK_TRY(operand_matches_param(i, k, comp, k));
    *out = i->shape;
    return NULL;
  }
  HK_TRY(need_async_operand(c));
  HK_TRY(check_async_shape(c, comp, OPND(c, 0)));
  *out = i->opcode == HK_OP_ASYNC_UPDATE ? OPND(c, 0) : OPND(c, 0)->tuple[1];
  return NULL;
}

/* ---- tokens, feeds, send/recv, copies ------------------------------------ */

static hk_status *tuple3(ana_ctx *c, const hk_shape *a, const hk_shape *b,
                         const hk_shape *d, const hk_shape **out) {
  const hk_shape *el[3] = {a, b, d};
  *out = ana_tuple(c->m, d ? 3 : 2, el);
  return NULL;
}

static hk_status *declared_element(ana_ctx *c, int k, const hk_shape **el) {
  const hk_shape *s = c->i->shape;
  char b[128];
  if (!hk_shape_is_tuple(s) || s->n_tuple <= k)
    return ana_fail(c->i, "%s must have a tuple shape, has %s",
                    hk_opcode_name((hk_opcode)c->i->opcode), ana_shape_str(s, b, sizeof b));
  *el = s->tuple[k];
  return NULL;
}

static hk_status *infer_io(ana_ctx *c, const hk_shape **out) {
  hk_module *m = c->m;
  const hk_shape *tok = hk_shape_token(m), *u32 = ana_scalar(m, HK_U32), *el;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_AFTER_ALL: case HK_OP_SEND_DONE:
      *out = tok;
      return NULL;
    case HK_OP_OUTFEED:
      HK_TRY(need_token_operand(c, 1));
      *out = tok;
      return NULL;
    case HK_OP_ADD_DEPENDENCY:
      HK_TRY(need_token_operand(c, 1));
      *out = OPND(c, 0);
      return NULL;
    case HK_OP_INFEED:
      HK_TRY(need_token_operand(c, 0));
      HK_TRY(declared_element(c, 0, &el));
      return tuple3(c, el, tok, NULL, out);
    case HK_OP_SEND:
      return tuple3(c, OPND(c, 0), u32, tok, out);
    case HK_OP_RECV:
      HK_TRY(declared_element(c, 0, &el));
      return tuple3(c, el, u32, tok, out);
    case HK_OP_RECV_DONE:
      if (!hk_shape_is_tuple(OPND(c, 0)) || OPND(c, 0)->n_tuple < 1)
        return ana_fail(c->i, "recv-done expects a recv operand");
      return tuple3(c, OPND(c, 0)->tuple[0], tok, NULL, out);
    case HK_OP_COPY_START:
      return tuple3(c, OPND(c, 0), OPND(c, 0), u32, out);
    case HK_OP_COPY_DONE:
      if (!hk_shape_is_tuple(OPND(c, 0)) || OPND(c, 0)->n_tuple < 2)
        return ana_fail(c->i, "copy-done expects a copy-start operand");
      *out = OPND(c, 0)->tuple[0];
      return NULL;
    default:
      return ana_fail(c->i, "not a token/feed op");
  }
}

hk_status *ana_infer_control(ana_ctx *c, bool *handled, const hk_shape **out) {
  *handled = true;
  switch ((hk_opcode)c->i->opcode) {
    case HK_OP_TUPLE: return infer_tuple(c, out);
    case HK_OP_GET_TUPLE_ELEMENT: return infer_gte(c, out);
    case HK_OP_WHILE: return infer_while(c, out);
    case HK_OP_CONDITIONAL: return infer_conditional(c, out);
    case HK_OP_CALL: case HK_OP_FUSION: return infer_call(c, out);
    case HK_OP_ASYNC_START: case HK_OP_ASYNC_UPDATE: case HK_OP_ASYNC_DONE:
      return infer_async(c, out);
    case HK_OP_AFTER_ALL: case HK_OP_SEND_DONE: case HK_OP_OUTFEED:
    case HK_OP_ADD_DEPENDENCY: case HK_OP_INFEED: case HK_OP_SEND:
    case HK_OP_RECV: case HK_OP_RECV_DONE: case HK_OP_COPY_START:
    case HK_OP_COPY_DONE:
      return infer_io(c, out);
    default:
      *handled = false;
      return NULL;
  }
}
