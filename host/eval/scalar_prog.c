/* scalar_prog.c - scalar computations (comparators, reducers, map bodies)
 * compiled once into flat register programs run without allocation. */
#include "eval/eval_internal.h"

typedef enum sp_kind {
  SP_UNARY, SP_BINARY, SP_COMPARE, SP_SELECT, SP_CLAMP, SP_CONVERT, SP_BITCAST, SP_MOVE
} sp_kind;

/* One step: dst = op(a, b, c) on registers. */
typedef struct sp_step {
  uint8_t kind;                    /* sp_kind */
  uint8_t dir, ctype;              /* compare */
  uint16_t opcode;                 /* hk_opcode (unary, binary) */
  int32_t dst, a, b, c;
} sp_step;

struct hk_scalar_prog {
  int32_t param_base, n_steps, n_results;
  uint64_t *regs;                  /* one element each, storage encoding */
  uint8_t *prims;                  /* hk_prim per register */
  sp_step *steps;
  int32_t *results;                /* registers of the results */
  hk_value *views;                 /* rank-0 value headers over regs, one per register */
};

/* A scalar array shape (the only kind a program holds). */
static bool scalar_shape(const hk_shape *s) {
  return s && s->elem != HK_TUPLE && s->rank == 0 && hk_prim_is_array((hk_prim)s->elem) &&
         !hk_prim_is_complex((hk_prim)s->elem) && hk_prim_storage_bytes((hk_prim)s->elem) <= 8;
}

static bool unary_supported(hk_opcode op) {
  switch (op) {
    case HK_OP_ABS: case HK_OP_NEGATE: case HK_OP_NOT: case HK_OP_SIGN: case HK_OP_COPY:
    case HK_OP_CEIL: case HK_OP_FLOOR: case HK_OP_EXP: case HK_OP_EXPM1: case HK_OP_LOG:
    case HK_OP_LOG1P: case HK_OP_SQRT: case HK_OP_RSQRT: case HK_OP_TANH: case HK_OP_LOGISTIC:
    case HK_OP_IS_FINITE: case HK_OP_ROUND_NEAREST_AFZ: case HK_OP_ROUND_NEAREST_EVEN:
    case HK_OP_POPCNT: case HK_OP_CLZ: case HK_OP_COS: case HK_OP_SIN:
      return true;
    default: return false;
  }
}

static bool binary_supported(hk_opcode op) {
  switch (op) {
    case HK_OP_ADD: case HK_OP_SUBTRACT: case HK_OP_MULTIPLY: case HK_OP_DIVIDE:
    case HK_OP_REMAINDER: case HK_OP_MAXIMUM: case HK_OP_MINIMUM: case HK_OP_AND:
    case HK_OP_OR: case HK_OP_XOR: case HK_OP_POWER: case HK_OP_SHIFT_LEFT:
    case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL: case HK_OP_ATAN2:
      return true;
    default: return false;
  }
}

/* The step that computes ins from its operands' registers; false when the
 * program does not cover the op. */
static bool step_of(const hk_instr *ins, const int32_t *opr, sp_step *s) {
  hk_opcode op = (hk_opcode)ins->opcode;
  int n = ins->n_operands;
  *s = (sp_step){.opcode = (uint16_t)op, .a = n > 0 ? opr[0] : -1, .b = n > 1 ? opr[1] : -1,
                 .c = n > 2 ? opr[2] : -1};
  if (op == HK_OP_COMPARE && n == 2 && ins->attrs && ins->attrs->cmp_dir != HK_CMP_NONE) {
    s->kind = SP_COMPARE;
    s->dir = (uint8_t)ins->attrs->cmp_dir;
    s->ctype = (uint8_t)ins->attrs->cmp_type;
  } else if (op == HK_OP_SELECT && n == 3) {
    s->kind = SP_SELECT;
  } else if (op == HK_OP_CLAMP && n == 3) {
    s->kind = SP_CLAMP;
  } else if (op == HK_OP_CONVERT && n == 1) {
    s->kind = SP_CONVERT;
  } else if (op == HK_OP_BITCAST_CONVERT && n == 1) {
    s->kind = SP_BITCAST;
  } else if ((op == HK_OP_COPY || op == HK_OP_BITCAST || op == HK_OP_RESHAPE) && n == 1) {
    s->kind = SP_MOVE;
  } else if (n == 1 && unary_supported(op)) {
    s->kind = SP_UNARY;
  } else if (n == 2 && binary_supported(op)) {
    s->kind = SP_BINARY;
  } else {
    return false;
  }
  return true;
}

/* The register of instruction x: its position in the build order (a
 * linear search: scalar computations are small). */
static int32_t reg_of(hk_instr *const *order, int64_t n, const hk_instr *x) {
  for (int64_t k = 0; k < n; k++)
    if (order[k] == x) return (int32_t)k;
  return -1;
}

static void set_prim(hk_scalar_prog *p, int32_t r, hk_prim e) {
  p->prims[r] = (uint8_t)e;
  p->views[r] = (hk_value){.elem = (uint8_t)e, .rank = 0, .refcount = 1, .n = 1,
                           .data = &p->regs[r], .nbytes = hk_prim_storage_bytes(e)};
}

/* What a program is built from: instructions in an order where operands
 * come first, the parameter instructions (by argument number) and the
 * result instructions.  A tuple is allowed only as `tuple_root`. */
typedef struct build_spec {
  hk_instr *const *order;
  int64_t n;
  const hk_instr *const *params;
  int n_params;
  const hk_instr *const *results;
  int n_results;
  const hk_instr *tuple_root;
} build_spec;

static bool compile_instr(hk_scalar_prog *p, const build_spec *b, int64_t k) {
  const hk_instr *ins = b->order[k];
  int32_t r = (int32_t)k;
  if (ins->opcode == HK_OP_TUPLE) return ins == b->tuple_root;
  if (!scalar_shape(ins->shape)) return false;
  set_prim(p, r, (hk_prim)ins->shape->elem);
  if (ins->opcode == HK_OP_PARAMETER) return true;
  if (ins->opcode == HK_OP_CONSTANT) {
    hk_value *v = NULL;
    if (!ins->attrs || !ins->attrs->literal) return false;
    hk_status *st = hk_value_from_literal(ins->attrs->literal, &v);
    if (st) {
      hk_status_free(st);
      return false;
    }
    bool ok = v->elem == p->prims[r] && v->n == 1;
    if (ok) memcpy(&p->regs[r], v->data, (size_t)hk_esize(v->elem));
    hk_value_release(v);
    return ok;
  }
  int32_t opr[3];
  if (ins->n_operands > 3) return false;
  for (int j = 0; j < ins->n_operands; j++)
    if ((opr[j] = reg_of(b->order, b->n, ins->operands[j])) < 0 || b->order[opr[j]]->opcode == HK_OP_TUPLE)
      return false;
  sp_step s;
  if (!step_of(ins, opr, &s)) return false;
  s.dst = r;
  if (s.kind == SP_BITCAST && hk_esize(p->prims[r]) != hk_esize(p->prims[opr[0]])) return false;
  p->steps[p->n_steps++] = s;
  return true;
}

/* Parameter k arrives in register param_base + k; a move puts it in the
 * register of its instruction. */
static bool bind_params(hk_scalar_prog *p, const build_spec *b) {
  p->param_base = (int32_t)b->n;
  for (int32_t k = 0; k < b->n_params; k++) {
    const hk_instr *x = b->params[k];
    int32_t r = x ? reg_of(b->order, b->n, x) : -1;
    if (r < 0 || !scalar_shape(x->shape)) return false;
    set_prim(p, p->param_base + k, (hk_prim)x->shape->elem);
    p->steps[p->n_steps++] = (sp_step){.kind = SP_MOVE, .dst = r, .a = p->param_base + k, .b = -1, .c = -1};
  }
  return true;
}

static bool bind_results(hk_scalar_prog *p, const build_spec *b) {
  p->results = malloc((size_t)(b->n_results ? b->n_results : 1) * sizeof(int32_t));
  if (!p->results) hk_out_of_memory();
  p->n_results = b->n_results;
  for (int k = 0; k < b->n_results; k++) {
    const hk_instr *x = b->results[k];
    if ((p->results[k] = reg_of(b->order, b->n, x)) < 0 || x->opcode == HK_OP_TUPLE) return false;
  }
  return true;
}

static hk_scalar_prog *build(const build_spec *b) {
  if (b->n >= 4096) return NULL;
  hk_scalar_prog *p = calloc(1, sizeof *p);
  if (!p) hk_out_of_memory();
  size_t nr = (size_t)(b->n + b->n_params + 1);
  p->regs = calloc(nr, sizeof(uint64_t));
  p->prims = calloc(nr, 1);
  p->views = calloc(nr, sizeof(hk_value));
  p->steps = calloc(nr, sizeof(sp_step));
  if (!p->regs || !p->prims || !p->views || !p->steps) hk_out_of_memory();
  bool ok = bind_params(p, b);
  for (int64_t k = 0; k < b->n && ok; k++) ok = compile_instr(p, b, k);
  if (ok) ok = bind_results(p, b);
  if (!ok) {
    hk_scalar_prog_free(p);
    return NULL;
  }
  return p;
}

hk_scalar_prog *hk_scalar_prog_compile(const hk_computation *c) {
  if (!c || !c->root) return NULL;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  if (!order) return NULL;
  const hk_instr *root = c->root;
  bool tuple = root->opcode == HK_OP_TUPLE;
  build_spec b = {order, n, (const hk_instr *const *)c->params, c->n_params,
                  tuple ? (const hk_instr *const *)root->operands : &root, tuple ? root->n_operands : 1,
                  tuple ? root : NULL};
  hk_scalar_prog *p = build(&b);
  free(order);
  return p;
}

/* ---- key comparators ------------------------------------------------------------ */

/* The parameter number that x depends on when it depends on exactly one
 * (-1: none, -2: several). */
static int only_param(const hk_instr *x, int depth) {
  if (depth > 64) return -2;
  if (x->opcode == HK_OP_PARAMETER) return (int)hk_instr_parameter_number(x);
  int found = -1;
  for (int j = 0; j < x->n_operands; j++) {
    int q = only_param(x->operands[j], depth + 1);
    if (q == -2 || (q >= 0 && found >= 0 && q != found)) return -2;
    if (q >= 0) found = q;
  }
  return found;
}

/* Constants a and b hold the same bytes (their shapes are equal). */
static bool same_literal(const hk_instr *a, const hk_instr *b) {
  const hk_literal *la = a->attrs ? a->attrs->literal : NULL, *lb = b->attrs ? b->attrs->literal : NULL;
  return la && lb && la->data && lb->data && !la->elided && !lb->elided && la->nbytes == lb->nbytes &&
         !memcmp(la->data, lb->data, (size_t)la->nbytes);
}

/* a (over parameter pa) and b (over pb) compute the same function. */
static bool same_function(const hk_instr *a, const hk_instr *b, int pa, int pb, int depth) {
  if (depth > 64 || a->opcode != b->opcode || a->n_operands != b->n_operands ||
      !hk_shape_equal(a->shape, b->shape))
    return false;
  if (a->opcode == HK_OP_PARAMETER)
    return hk_instr_parameter_number(a) == pa && hk_instr_parameter_number(b) == pb;
  if (a->opcode == HK_OP_CONSTANT) return same_literal(a, b);
  if (a->opcode == HK_OP_COMPARE &&
      (!a->attrs || !b->attrs || a->attrs->cmp_dir != b->attrs->cmp_dir || a->attrs->cmp_type != b->attrs->cmp_type))
    return false;
  for (int j = 0; j < a->n_operands; j++)
    if (!same_function(a->operands[j], b->operands[j], pa, pb, depth + 1)) return false;
  return true;
}

/* Post order of the instructions x depends on, x last. */
static void dag_order(const hk_instr *x, hk_instr **order, int64_t *n, int64_t cap) {
  for (int64_t k = 0; k < *n; k++)
    if (order[k] == x) return;
  for (int j = 0; j < x->n_operands; j++) dag_order(x->operands[j], order, n, cap);
  if (*n < cap) order[(*n)++] = (hk_instr *)x;
}

hk_scalar_prog *hk_scalar_prog_compile_key(const hk_computation *c, int *operand, hk_cmp_dir *dir,
                                           hk_cmp_type *type) {
  const hk_instr *r = c ? c->root : NULL;
  if (!r || r->opcode != HK_OP_COMPARE || r->n_operands != 2 || !r->attrs) return NULL;
  const hk_instr *a = r->operands[0], *b = r->operands[1];
  int pa = only_param(a, 0), pb = only_param(b, 0);
  if (pa < 0 || pa % 2 || pb != pa + 1 || !same_function(a, b, pa, pb, 0)) return NULL;
  int64_t cap = c->n_instrs + 1, n = 0;
  hk_instr **order = malloc((size_t)cap * sizeof(hk_instr *));
  if (!order) hk_out_of_memory();
  dag_order(a, order, &n, cap);
  const hk_instr *param = c->params[pa];
  build_spec bs = {order, n, &param, 1, &a, 1, NULL};
  hk_scalar_prog *p = build(&bs);
  free(order);
  if (!p) return NULL;
  *operand = pa / 2;
  *dir = (hk_cmp_dir)r->attrs->cmp_dir;
  *type = (hk_cmp_type)r->attrs->cmp_type;
  return p;
}

void hk_scalar_prog_free(hk_scalar_prog *p) {
  if (!p) return;
  free(p->regs);
  free(p->prims);
  free(p->views);
  free(p->steps);
  free(p->results);
  free(p);
}

void hk_scalar_prog_set_arg(hk_scalar_prog *p, int k, const hk_value *v, int64_t i) {
  int es = hk_esize(v->elem);
  memcpy(&p->regs[p->param_base + k], (const uint8_t *)v->data + i * es, (size_t)es);
}

static void run_step(hk_scalar_prog *p, const sp_step *s) {
  hk_value *v = p->views;
  switch ((sp_kind)s->kind) {
    case SP_UNARY: hk_elem_unary((hk_opcode)s->opcode, &v[s->a], 0, &v[s->dst]); return;
    case SP_BINARY: hk_elem_binary((hk_opcode)s->opcode, &v[s->a], 0, &v[s->b], 0, &v[s->dst], 0); return;
    case SP_COMPARE:
      hk_elem_compare((hk_cmp_dir)s->dir, (hk_cmp_type)s->ctype, &v[s->a], 0, &v[s->b], 0, &v[s->dst], 0);
      return;
    case SP_SELECT:
      p->regs[s->dst] = (p->regs[s->a] & 0xff) ? p->regs[s->b] : p->regs[s->c];
      return;
    case SP_CLAMP:   /* min(max(lo, x), hi), as the elementwise op */
      hk_elem_binary(HK_OP_MAXIMUM, &v[s->a], 0, &v[s->b], 0, &v[s->dst], 0);
      hk_elem_binary(HK_OP_MINIMUM, &v[s->dst], 0, &v[s->c], 0, &v[s->dst], 0);
      return;
    case SP_CONVERT: hk_elem_convert(&v[s->a], 0, &v[s->dst], 0); return;
    case SP_BITCAST: case SP_MOVE: p->regs[s->dst] = p->regs[s->a]; return;
  }
}

void hk_scalar_prog_run(hk_scalar_prog *p) {
  for (int32_t k = 0; k < p->n_steps; k++) run_step(p, &p->steps[k]);
}

int hk_scalar_prog_n_results(const hk_scalar_prog *p) { return p->n_results; }

void hk_scalar_prog_get_result(const hk_scalar_prog *p, int k, hk_value *v, int64_t i) {
  int es = hk_esize(v->elem);
  memcpy((uint8_t *)v->data + i * es, &p->regs[p->results[k]], (size_t)es);
}

bool hk_scalar_prog_result_true(const hk_scalar_prog *p, int k) {
  return (p->regs[p->results[k]] & 0xff) != 0;
}

hk_scalar_prog *hk_scalar_prog_compile_typed(const hk_computation *c, int n_args,
                                             const hk_prim *args, int n_results,
                                             const hk_prim *results) {
  if (!c || !c->root || c->n_params != n_args) return NULL;
  for (int k = 0; k < n_args; k++)
    if (!c->params[k] || c->params[k]->shape->elem != args[k]) return NULL;
  hk_scalar_prog *p = hk_scalar_prog_compile(c);
  if (!p) return NULL;
  bool ok = p->n_results == n_results;
  for (int k = 0; k < n_results && ok; k++) ok = p->prims[p->results[k]] == results[k];
  if (!ok) {
    hk_scalar_prog_free(p);
    return NULL;
  }
  return p;
}

void hk_scalar_prog_set_arg_raw(hk_scalar_prog *p, int k, uint64_t raw) {
  p->regs[p->param_base + k] = raw;
}

uint64_t hk_scalar_prog_result_raw(const hk_scalar_prog *p, int k) {
  return p->regs[p->results[k]];
}

hk_prim hk_scalar_prog_result_type(const hk_scalar_prog *p, int k) {
  return (hk_prim)p->prims[p->results[k]];
}

hk_prim hk_scalar_prog_arg_type(const hk_scalar_prog *p, int k) {
  return (hk_prim)p->prims[p->param_base + k];
}
