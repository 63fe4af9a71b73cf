/* eval.c - the evaluator's core: per-module plan, computation walk, dispatch. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "eval/eval_internal.h"
#include "ir/ptr_table.h"

/* ---- pointer -> index map (built once, read by every device thread) ---- */
typedef hk_ptr_map ptr_map;

static void ptr_map_put(ptr_map *m, const void *k, int64_t v) {
  hk_ptr_map_put(m, k, (void *)(intptr_t)(v + 1));   /* NULL stays "absent" */
}

/* The index put for k, -1 when there is none. */
static int64_t ptr_map_get(const ptr_map *m, const void *k) {
  return (int64_t)(intptr_t)hk_ptr_map_get(m, k) - 1;
}

/* ---- the plan ------------------------------------------------------------ */
typedef struct comp_plan {
  const hk_computation *comp;
  int64_t n;
  hk_instr **order;          /* post order */
  int32_t *op_start, *op_slot;
  int32_t *free_start, *free_slot;
  int64_t root_slot;
  int64_t base;              /* global index of order[0] */
} comp_plan;

struct hk_eval_plan {
  const hk_module *m;
  int32_t n_comps;
  comp_plan *comps;
  int64_t n_instrs;
  ptr_map index;             /* instr -> global index; computation -> plan */
  hk_value **constants;      /* by global index, made once */
};

int64_t hk_eval_plan_instr_index(const hk_eval_plan *p, const hk_instr *i) {
  return ptr_map_get(&p->index, i);
}

static const comp_plan *plan_of(const hk_eval_plan *p, const hk_computation *c) {
  int64_t k = ptr_map_get(&p->index, c);
  return k < 0 ? NULL : &p->comps[k];
}

static void build_free_lists(comp_plan *cp, ptr_map *local) {
  int64_t n = cp->n;
  int64_t *last = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  if (!last) hk_out_of_memory();
  for (int64_t k = 0; k < n; k++) last[k] = k;     /* unused: free at once */
  for (int64_t k = 0; k < n; k++)
    for (int32_t j = cp->op_start[k]; j < cp->op_start[k + 1]; j++)
      if (last[cp->op_slot[j]] < k) last[cp->op_slot[j]] = k;
  if (cp->root_slot >= 0) last[cp->root_slot] = n;  /* never freed */
  cp->free_start = calloc((size_t)n + 1, sizeof(int32_t));
  cp->free_slot = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  if (!cp->free_start || !cp->free_slot) hk_out_of_memory();
  for (int64_t k = 0; k < n; k++)
    if (last[k] < n) cp->free_start[last[k] + 1]++;
  for (int64_t k = 0; k < n; k++) cp->free_start[k + 1] += cp->free_start[k];
  int32_t *fill = calloc((size_t)n + 1, sizeof(int32_t));
  if (!fill) hk_out_of_memory();
  for (int64_t k = 0; k < n; k++)
    if (last[k] < n) cp->free_slot[cp->free_start[last[k]] + fill[last[k]]++] = (int32_t)k;
  free(fill);
  free(last);
  (void)local;
}

static hk_status *build_comp_plan(hk_eval_plan *p, comp_plan *cp,
                                  const hk_computation *c, int64_t base) {
  cp->comp = c;
  cp->base = base;
  cp->order = hk_computation_post_order(c, &cp->n);
  int64_t n = cp->n, total_ops = 0;
  ptr_map local;
  hk_ptr_map_init(&local, (size_t)n);
  for (int64_t k = 0; k < n; k++) {
    ptr_map_put(&local, cp->order[k], k);
    ptr_map_put(&p->index, cp->order[k], base + k);
    total_ops += cp->order[k]->n_operands;
  }
  cp->op_start = malloc((size_t)(n + 1) * sizeof(int32_t));
  cp->op_slot = malloc((size_t)(total_ops ? total_ops : 1) * sizeof(int32_t));
  if (!cp->op_start || !cp->op_slot) hk_out_of_memory();
  int32_t w = 0;
  hk_status *st = NULL;
  for (int64_t k = 0; k < n; k++) {
    cp->op_start[k] = w;
    const hk_instr *ins = cp->order[k];
    for (int j = 0; j < ins->n_operands; j++) {
      int64_t s = ptr_map_get(&local, ins->operands[j]);
      if (s < 0 && !st)
        st = hk_error(HK_INTERNAL, "%s: operand %d is not in computation %s",
                      ins->name, j, c->name);
      cp->op_slot[w++] = (int32_t)(s < 0 ? 0 : s);
    }
  }
  cp->op_start[n] = w;
  cp->root_slot = c->root ? ptr_map_get(&local, c->root) : -1;
  if (!st && cp->root_slot < 0)
    st = hk_error(HK_INVALID_ARGUMENT, "computation %s has no root", c->name);
  build_free_lists(cp, &local);
  free(local.keys);
  free(local.vals);
  return st;
}

static hk_status *make_constants(hk_eval_plan *p) {
  for (int32_t ci = 0; ci < p->n_comps; ci++) {
    comp_plan *cp = &p->comps[ci];
    for (int64_t k = 0; k < cp->n; k++) {
      const hk_instr *ins = cp->order[k];
      if (ins->opcode != HK_OP_CONSTANT) continue;
      if (!ins->attrs || !ins->attrs->literal)
        return hk_eval_error(ins, HK_INVALID_ARGUMENT, "constant without a literal");
      hk_status *st = hk_value_from_literal(ins->attrs->literal, &p->constants[cp->base + k]);
      if (st) return hk_status_prefix(st, "%s", ins->name);
    }
  }
  return NULL;
}

/* Refuses instructions whose value has no static size (an unbounded '?'
 * dim) or would exceed the byte limit. */
static hk_status *check_sizes(const hk_module *m, int64_t limit) {
  if (limit == 0) limit = INT64_C(2) << 30;
  for (int32_t i = 0; i < m->n_computations; i++)
    for (const hk_instr *ins = m->computations[i]->first; ins; ins = ins->next) {
      if (hk_shape_is_unbounded_dynamic(ins->shape))
        return hk_eval_error(ins, HK_UNIMPLEMENTED,
                             "a value with an unbounded dynamic dimension ('?') cannot be evaluated");
      if (limit < 0) continue;
      int64_t b = hk_shape_byte_size(ins->shape);
      if (b > limit)
        return hk_eval_error(ins, HK_FAILED_PRECONDITION,
                             "value of %lld bytes exceeds the evaluator's limit of %lld bytes",
                             (long long)b, (long long)limit);
    }
  return NULL;
}

hk_status *hk_eval_plan_build_checked(const hk_module *m, const hk_eval_options *opts,
                                      hk_eval_plan **out) {
  *out = NULL;
  HK_TRY(check_sizes(m, opts ? opts->max_value_bytes : 0));
  return hk_eval_plan_build(m, out);
}

hk_status *hk_eval_check_sizes(const hk_module *m, const hk_eval_options *opts) {
  return check_sizes(m, opts ? opts->max_value_bytes : 0);
}

hk_status *hk_eval_plan_build(const hk_module *m, hk_eval_plan **out) {
  *out = NULL;
  if (!m->entry) return hk_error(HK_INVALID_ARGUMENT, "module %s has no entry computation", m->name);
  hk_eval_plan *p = calloc(1, sizeof *p);
  if (!p) hk_out_of_memory();
  p->m = m;
  p->n_comps = m->n_computations;
  p->comps = hk_check_alloc(calloc((size_t)(p->n_comps ? p->n_comps : 1), sizeof(comp_plan)));
  int64_t total = 0;
  for (int32_t i = 0; i < m->n_computations; i++) total += m->computations[i]->n_instrs;
  hk_ptr_map_init(&p->index, (size_t)(total + m->n_computations));
  hk_status *st = NULL;
  int64_t base = 0;
  for (int32_t i = 0; i < m->n_computations && !st; i++) {
    ptr_map_put(&p->index, m->computations[i], i);
    st = build_comp_plan(p, &p->comps[i], m->computations[i], base);
    base += p->comps[i].n;
  }
  p->n_instrs = base;
  p->constants = calloc((size_t)(base ? base : 1), sizeof(hk_value *));
  if (!st) st = make_constants(p);
  if (st) {
    hk_eval_plan_free(p);
    return st;
  }
  *out = p;
  return NULL;
}

void hk_eval_plan_free(hk_eval_plan *p) {
  if (!p) return;
  for (int32_t i = 0; i < p->n_comps; i++) {
    comp_plan *cp = &p->comps[i];
    free(cp->order);
    free(cp->op_start);
    free(cp->op_slot);
    free(cp->free_start);
    free(cp->free_slot);
  }
  if (p->constants)
    for (int64_t k = 0; k < p->n_instrs; k++) hk_value_release(p->constants[k]);
  free(p->constants);
  free(p->comps);
  free(p->index.keys);
  free(p->index.vals);
  free(p);
}

/* ---- device context ---------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

hk_status *hk_eval_poll(hk_device_ctx *d, const hk_instr *ins) {
  if (!d->deadline_ns || now_ns() < d->deadline_ns) return NULL;
  return hk_eval_error(ins, HK_FAILED_PRECONDITION, "time limit of %lld ms exceeded",
                       (long long)(d->opts ? d->opts->time_limit_ms : 0));
}

static hk_status *check_deadline(hk_device_ctx *d, const hk_instr *ins) {
  if (!d->deadline_ns) return NULL;
  if (++d->steps_since_check < 256 && (ins->shape->elem == HK_TUPLE || hk_shape_elements(ins->shape) < 4096))
    return NULL;
  d->steps_since_check = 0;
  if (now_ns() < d->deadline_ns) return NULL;
  return hk_eval_error(ins, HK_FAILED_PRECONDITION, "time limit of %lld ms exceeded",
                       (long long)(d->opts ? d->opts->time_limit_ms : 0));
}

hk_status *hk_device_ctx_init(hk_device_ctx *d, const hk_eval_plan *plan,
                              const hk_eval_options *opts) {
  memset(d, 0, sizeof *d);
  d->plan = plan;
  d->opts = opts;
  d->num_replicas = d->num_partitions = 1;
  d->exec_count = calloc((size_t)(plan->n_instrs ? plan->n_instrs : 1), sizeof(int64_t));
  if (!d->exec_count) hk_out_of_memory();
  d->rng_state = opts ? opts->seed : 0;
  if (opts && opts->time_limit_ms > 0) d->deadline_ns = now_ns() + opts->time_limit_ms * 1000000;
  return NULL;
}

void hk_device_ctx_free(hk_device_ctx *d) {
  free(d->exec_count);
  d->exec_count = NULL;
}

hk_status *hk_eval_error(const hk_instr *ins, hk_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hk_status *st = hk_verror(code, fmt, ap);
  va_end(ap);
  return hk_status_prefix(st, "%s (%s)", ins->name, hk_opcode_name((hk_opcode)ins->opcode));
}

/* ---- control flow and structural ops ----------------------------------------- */

static hk_status *called_comp(const hk_instr *ins, int k, const hk_computation **out) {
  if (ins->n_called <= k || !ins->called[k])
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing called computation %d", k);
  *out = ins->called[k];
  return NULL;
}

static hk_status *pred_of(const hk_instr *ins, const hk_value *v, bool *out) {
  if (v->elem == HK_TUPLE || !hk_prim_is_array((hk_prim)v->elem) || v->n != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "condition is not a scalar");
  *out = hk_value_get_i64(v, 0) != 0;
  return NULL;
}

static hk_status *op_while(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                           hk_value **out) {
  const hk_computation *cond = NULL, *body = NULL;
  HK_TRY(called_comp(ins, 0, &cond));
  HK_TRY(called_comp(ins, 1, &body));
  hk_value *state = hk_value_retain(ops[0]);
  int64_t limit = d->opts ? d->opts->max_while_iterations : 0;
  for (int64_t it = 0;; it++) {
    hk_value *c = NULL;
    hk_status *st = hk_eval_computation(d, cond, &state, 1, &c);
    bool go = false;
    if (!st) st = pred_of(ins, c, &go);
    hk_value_release(c);
    if (!st && go && limit > 0 && it >= limit)
      st = hk_eval_error(ins, HK_FAILED_PRECONDITION,
                         "while loop exceeded %lld iterations", (long long)limit);
    if (st || !go) {
      if (st) {
        hk_value_release(state);
        return st;
      }
      break;
    }
    hk_value *next = NULL;
    st = hk_eval_computation(d, body, &state, 1, &next);
    hk_value_release(state);
    if (st) return st;
    state = next;
  }
  *out = state;
  return NULL;
}

static hk_status *op_conditional(hk_device_ctx *d, const hk_instr *ins,
                                 hk_value *const *ops, hk_value **out) {
  const hk_value *sel = ops[0];
  int64_t b;
  if (sel->elem == HK_PRED) {
    b = hk_value_get_i64(sel, 0) ? 0 : 1;
  } else {
    b = hk_value_get_i64(sel, 0);
    if (b < 0 || b >= ins->n_called) b = ins->n_called - 1;
  }
  if (ins->n_called < 1 || b >= ins->n_called || ins->n_operands < b + 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "branch %lld has no computation/operand", (long long)b);
  return hk_eval_computation(d, ins->called[b], &ops[1 + b], 1, out);
}

static hk_status *op_call(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                          hk_value **out) {
  const hk_computation *c = NULL;
  HK_TRY(called_comp(ins, 0, &c));
  return hk_eval_computation(d, c, ops, ins->n_operands, out);
}

/* XLA's HandleAsyncStart: ((operands...), the wrapped computation's
 * result, context...) with the context zeroed; update passes the tuple on,
 * done takes element 1. */
static hk_status *op_async_start(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                 hk_value **out) {
  const hk_shape *s = ins->shape;
  if (s->elem != HK_TUPLE || s->n_tuple < 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "async-start returns (operands, result, ...)");
  hk_value *res = NULL;
  HK_TRY(op_call(d, ins, ops, &res));
  int n = s->n_tuple;
  hk_value **e = malloc((size_t)n * sizeof *e);
  hk_value **args = malloc((size_t)(ins->n_operands ? ins->n_operands : 1) * sizeof *args);
  if (!e || !args) hk_out_of_memory();
  for (int k = 0; k < ins->n_operands; k++) args[k] = hk_value_retain(ops[k]);
  e[0] = hk_value_new_tuple(ins->n_operands, args);
  e[1] = res;
  for (int k = 2; k < n; k++) e[k] = hk_value_of_shape(s->tuple[k]);
  *out = hk_value_new_tuple(n, e);
  free(args);
  free(e);
  return NULL;
}

static hk_status *op_async_done(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  if (ops[0]->elem != HK_TUPLE || ops[0]->n_elems < 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "async-done takes the (operands, result, ...) tuple");
  *out = hk_value_retain(ops[0]->elems[1]);
  return NULL;
}

static hk_status *op_tuple(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  hk_value **e = malloc((size_t)(ins->n_operands ? ins->n_operands : 1) * sizeof(hk_value *));
  if (!e) hk_out_of_memory();
  for (int i = 0; i < ins->n_operands; i++) e[i] = hk_value_retain(ops[i]);
  *out = hk_value_new_tuple(ins->n_operands, e);
  free(e);
  return NULL;
}

static hk_status *op_gte(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  int64_t k = hk_instr_tuple_index(ins);
  if (ops[0]->elem != HK_TUPLE || k < 0 || k >= ops[0]->n_elems)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "tuple index %lld out of range", (long long)k);
  *out = hk_value_retain(ops[0]->elems[k]);
  return NULL;
}

static hk_status *op_id_scalar(const hk_instr *ins, int64_t id, hk_value **out) {
  hk_value *v = hk_value_for_shape_dims(ins->shape);
  if (v->n != 1) {
    hk_value_release(v);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "expected a scalar shape");
  }
  hk_value_set_i64(v, 0, id);
  *out = v;
  return NULL;
}

static hk_status *op_infeed(const hk_instr *ins, hk_value **out) {
  /* No host queue is simulated: infeed reads zeros (data, token). */
  *out = hk_value_of_shape(ins->shape);
  return NULL;
}

static hk_status *op_get_dimension_size(const hk_instr *ins, hk_value *const *ops,
                                        hk_value **out) {
  if (ins->n_dims != 1 || ins->dims[0] < 0 || ins->dims[0] >= ops[0]->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad dimension");
  return op_id_scalar(ins, ops[0]->dims[ins->dims[0]], out);
}

/* async pairs: -start produces what the op would, -done unwraps it. */
static hk_status *op_done(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  const hk_value *v = ops[0];
  if (hk_value_matches_shape(v, ins->shape)) {
    *out = hk_value_retain(ops[0]);
    return NULL;
  }
  if (v->elem == HK_TUPLE)
    for (int k = v->n_elems - 1; k >= 0; k--)
      if (hk_value_matches_shape(v->elems[k], ins->shape)) {
        *out = hk_value_retain(v->elems[k]);
        return NULL;
      }
  return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand holds no value of the result shape");
}

static hk_status *op_copy_start(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  if (ins->shape->elem != HK_TUPLE || ins->shape->n_tuple < 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "expected a tuple result");
  hk_value *e[3];
  int n = ins->shape->n_tuple;
  e[0] = hk_value_retain(ops[0]);
  e[1] = hk_value_retain(ops[0]);
  if (n > 2) e[2] = hk_value_of_shape(ins->shape->tuple[2]);
  *out = hk_value_new_tuple(n > 3 ? 3 : n, e);
  return NULL;
}

static hk_status *op_sharded_start(hk_device_ctx *d, const hk_instr *ins,
                                   hk_value *const *ops, hk_value **out) {
  /* all-gather-start / collective-permute-start: (operand, result[, ctx..]) */
  hk_value *res = NULL;
  HK_TRY(hk_op_collective(d, ins, ops, &res));
  if (ins->shape->elem != HK_TUPLE || res->elem == HK_TUPLE) {
    *out = res;
    return NULL;
  }
  int n = ins->shape->n_tuple;
  hk_value **e = calloc((size_t)(n ? n : 1), sizeof(hk_value *));
  if (!e) hk_out_of_memory();
  for (int k = 0; k < n; k++)
    e[k] = k == 0 ? hk_value_retain(ops[0]) : k == 1 ? hk_value_retain(res)
                                                   : hk_value_of_shape(ins->shape->tuple[k]);
  hk_value_release(res);
  *out = hk_value_new_tuple(n, e);
  free(e);
  return NULL;
}

static hk_status *op_reshape_like(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  if (hk_value_matches_shape(ops[0], ins->shape)) {
    *out = hk_value_retain(ops[0]);
    return NULL;
  }
  if (ops[0]->elem == HK_TUPLE || ops[0]->elem != ins->shape->elem ||
      ops[0]->n != hk_shape_elements(ins->shape))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "bitcast changing the element type or count");
  hk_value *v = hk_value_for_shape_dims(ins->shape);
  memcpy(v->data, ops[0]->data, (size_t)v->nbytes);
  *out = v;
  return NULL;
}

/* ---- dispatch ---------------------------------------------------------------- */

static hk_status *eval_instr(hk_device_ctx *d, const hk_instr *ins, int64_t gidx,
                             hk_value *const *ops, hk_value **out) {
  hk_opcode op = (hk_opcode)ins->opcode;
  if (hk_opcode_is_elementwise(op) && op != HK_OP_CONVERT && op != HK_OP_BITCAST_CONVERT &&
      op != HK_OP_STOCHASTIC_CONVERT && op != HK_OP_REDUCE_PRECISION)
    return hk_op_elementwise(d, ins, ops, out);
  switch (op) {
    case HK_OP_CONSTANT:
      *out = hk_value_retain(d->plan->constants[gidx]);
      return NULL;
    case HK_OP_TUPLE: return op_tuple(ins, ops, out);
    case HK_OP_GET_TUPLE_ELEMENT: return op_gte(ins, ops, out);
    case HK_OP_COPY: case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_DOMAIN:
    case HK_OP_ADD_DEPENDENCY: case HK_OP_SET_DIMENSION_SIZE:
    case HK_OP_ALL_REDUCE_DONE:
      *out = hk_value_retain(ops[0]);
      return NULL;
    case HK_OP_BITCAST: return op_reshape_like(ins, ops, out);
    case HK_OP_CONVERT: return hk_op_convert(d, ins, ops, out);
    case HK_OP_STOCHASTIC_CONVERT: return hk_op_stochastic_convert(d, ins, ops, out);
    case HK_OP_REDUCE_PRECISION: return hk_op_elementwise(d, ins, ops, out);
    case HK_OP_BITCAST_CONVERT: return hk_op_bitcast_convert(d, ins, ops, out);
    case HK_OP_BROADCAST: return hk_op_broadcast(d, ins, ops, out);
    case HK_OP_RESHAPE: case HK_OP_DYNAMIC_RESHAPE: return hk_op_reshape(d, ins, ops, out);
    case HK_OP_TRANSPOSE: return hk_op_transpose(d, ins, ops, out);
    case HK_OP_SLICE: return hk_op_slice(d, ins, ops, out);
    case HK_OP_DYNAMIC_SLICE: return hk_op_dynamic_slice(d, ins, ops, out);
    case HK_OP_DYNAMIC_UPDATE_SLICE: return hk_op_dynamic_update_slice(d, ins, ops, out);
    case HK_OP_PAD: return hk_op_pad(d, ins, ops, out);
    case HK_OP_CONCATENATE: return hk_op_concatenate(d, ins, ops, out);
    case HK_OP_REVERSE: return hk_op_reverse(d, ins, ops, out);
    case HK_OP_IOTA: return hk_op_iota(d, ins, ops, out);
    case HK_OP_DOT: return hk_op_dot(d, ins, ops, out);
    case HK_OP_CONVOLUTION: return hk_op_convolution(d, ins, ops, out);
    case HK_OP_REDUCE: return hk_op_reduce(d, ins, ops, out);
    case HK_OP_REDUCE_WINDOW: return hk_op_reduce_window(d, ins, ops, out);
    case HK_OP_SELECT_AND_SCATTER: return hk_op_select_and_scatter(d, ins, ops, out);
    case HK_OP_MAP: return hk_op_map(d, ins, ops, out);
    case HK_OP_GATHER: return hk_op_gather(d, ins, ops, out);
    case HK_OP_SCATTER: return hk_op_scatter(d, ins, ops, out);
    case HK_OP_SORT: return hk_op_sort(d, ins, ops, out);
    case HK_OP_WHILE: return op_while(d, ins, ops, out);
    case HK_OP_CONDITIONAL: return op_conditional(d, ins, ops, out);
    case HK_OP_CALL: case HK_OP_FUSION: return op_call(d, ins, ops, out);
    case HK_OP_ASYNC_START: return op_async_start(d, ins, ops, out);
    case HK_OP_ASYNC_UPDATE: *out = hk_value_retain(ops[0]); return NULL;
    case HK_OP_ASYNC_DONE: return op_async_done(ins, ops, out);
    case HK_OP_CUSTOM_CALL: return hk_op_custom_call(d, ins, ops, out);
    case HK_OP_TOPK: return hk_op_topk(d, ins, ops, out);
    case HK_OP_FFT: return hk_op_fft(d, ins, ops, out);
    case HK_OP_CHOLESKY: case HK_OP_TRIANGULAR_SOLVE: return hk_op_solve(d, ins, ops, out);
    case HK_OP_RAGGED_DOT: return hk_op_ragged_dot(d, ins, ops, out);
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_BATCH_NORM_INFERENCE: case HK_OP_BATCH_NORM_GRAD:
      return hk_op_batch_norm(d, ins, ops, out);
    case HK_OP_AFTER_ALL: *out = hk_value_new_token(); return NULL;
    case HK_OP_OUTFEED: *out = hk_value_new_token(); return NULL;
    case HK_OP_INFEED: return op_infeed(ins, out);
    case HK_OP_PARTITION_ID: return op_id_scalar(ins, d->partition, out);
    case HK_OP_REPLICA_ID: return op_id_scalar(ins, d->replica, out);
    case HK_OP_GET_DIMENSION_SIZE: return op_get_dimension_size(ins, ops, out);
    case HK_OP_RNG: return hk_op_rng(d, ins, ops, out);
    case HK_OP_RNG_BIT_GENERATOR: return hk_op_rng_bit_generator(d, ins, ops, out);
    case HK_OP_RNG_GET_AND_UPDATE_STATE: return hk_op_rng_get_and_update_state(d, ins, ops, out);
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_GATHER:
    case HK_OP_REDUCE_SCATTER: case HK_OP_ALL_TO_ALL: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_RAGGED_ALL_TO_ALL:
      return hk_op_collective(d, ins, ops, out);
    case HK_OP_ALL_GATHER_START: case HK_OP_COLLECTIVE_PERMUTE_START:
      return op_sharded_start(d, ins, ops, out);
    case HK_OP_ALL_GATHER_DONE: case HK_OP_COLLECTIVE_PERMUTE_DONE: case HK_OP_COPY_DONE:
      return op_done(ins, ops, out);
    case HK_OP_COPY_START: return op_copy_start(ins, ops, out);
    default:
      return hk_eval_error(ins, HK_UNIMPLEMENTED, "opcode %s is not supported by the evaluator",
                           hk_opcode_name(op));
  }
}

static void release_slots(hk_value **slots, int64_t n) {
  for (int64_t k = 0; k < n; k++) hk_value_release(slots[k]);
  free(slots);
}

static hk_status *run_step(hk_device_ctx *d, const comp_plan *cp, int64_t k,
                           hk_value **slots, hk_value *const *args, int n_args) {
  const hk_instr *ins = cp->order[k];
  HK_TRY(check_deadline(d, ins));
  if (ins->opcode == HK_OP_PARAMETER) {
    int64_t pn = hk_instr_parameter_number(ins);
    if (pn < 0 || pn >= n_args)
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "parameter %lld not given (%d arguments)",
                           (long long)pn, n_args);
    slots[k] = hk_value_retain(args[pn]);
    return NULL;
  }
  hk_value *small[8];
  int32_t no = cp->op_start[k + 1] - cp->op_start[k];
  hk_value **ops = no <= 8 ? small : malloc((size_t)no * sizeof(hk_value *));
  if (!ops) hk_out_of_memory();
  for (int32_t j = 0; j < no; j++) ops[j] = slots[cp->op_slot[cp->op_start[k] + j]];
  int64_t gidx = cp->base + k;
  hk_status *st = eval_instr(d, ins, gidx, ops, &slots[k]);
  if (ops != small) free(ops);
  if (!st && d->mem.over)
    st = hk_eval_error(ins, HK_FAILED_PRECONDITION,
                       "live values (%lld bytes) exceed the evaluator's memory budget of %lld bytes",
                       (long long)d->mem.live, (long long)d->mem.limit);
  d->exec_count[gidx]++;
  d->stats.instructions_executed++;
  if (!st && !slots[k]) st = hk_eval_error(ins, HK_INTERNAL, "no value produced");
  return st;
}

hk_status *hk_eval_computation(hk_device_ctx *d, const hk_computation *c,
                               hk_value *const *args, int n_args, hk_value **out) {
  const comp_plan *cp = plan_of(d->plan, c);
  if (!cp) return hk_error(HK_INTERNAL, "computation %s is not in the evaluated module", c->name);
  hk_value **slots = calloc((size_t)(cp->n ? cp->n : 1), sizeof(hk_value *));
  if (!slots) hk_out_of_memory();
  for (int64_t k = 0; k < cp->n; k++) {
    hk_status *st = run_step(d, cp, k, slots, args, n_args);
    if (st) {
      release_slots(slots, cp->n);
      return st;
    }
    for (int32_t j = cp->free_start[k]; j < cp->free_start[k + 1]; j++) {
      hk_value_release(slots[cp->free_slot[j]]);
      slots[cp->free_slot[j]] = NULL;
    }
  }
  *out = slots[cp->root_slot];
  slots[cp->root_slot] = NULL;
  release_slots(slots, cp->n);
  return NULL;
}

hk_status *hk_eval_scalar_call(hk_device_ctx *d, const hk_computation *c,
                               hk_value *const *args, int n, hk_value **out) {
  return hk_eval_computation(d, c, args, n, out);
}

/* ---- reducer recognition ------------------------------------------------------ */

hk_reducer_kind hk_reducer_kind_of(const hk_computation *c) {
  const hk_instr *r = c->root;
  if (!r || c->n_params != 2 || r->n_operands != 2) return HK_RED_GENERIC;
  const hk_instr *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != HK_OP_PARAMETER || b->opcode != HK_OP_PARAMETER || a == b) return HK_RED_GENERIC;
  if (r->shape->elem == HK_TUPLE || r->shape->rank != 0) return HK_RED_GENERIC;
  switch (r->opcode) {
    case HK_OP_ADD: return HK_RED_ADD;
    case HK_OP_MULTIPLY: return HK_RED_MUL;
    case HK_OP_MAXIMUM: return HK_RED_MAX;
    case HK_OP_MINIMUM: return HK_RED_MIN;
    case HK_OP_AND: return HK_RED_AND;
    case HK_OP_OR: return HK_RED_OR;
    case HK_OP_XOR: return HK_RED_XOR;
    default: return HK_RED_GENERIC;
  }
}

/* ---- one device -------------------------------------------------------------- */

static hk_status *check_args(const hk_module *m, hk_value *const *args, int n_args) {
  const hk_computation *e = m->entry;
  if (n_args != e->n_params)
    return hk_error(HK_INVALID_ARGUMENT, "entry computation %s takes %d parameters, %d given",
                    e->name, e->n_params, n_args);
  for (int i = 0; i < n_args; i++)
    if (!hk_value_matches_shape(args[i], e->params[i]->shape)) {
      char *have = hk_value_shape_string(args[i]);
      char *want = hk_shape_to_string(e->params[i]->shape);
      hk_status *st = hk_error(HK_INVALID_ARGUMENT, "parameter %d: value %s does not match shape %s",
                               i, have, want);
      free(have);
      free(want);
      return st;
    }
  return NULL;
}

hk_status *hk_eval_module(const hk_module *m, hk_value *const *args, int n_args,
                          hk_value **result, const hk_eval_options *opts,
                          hk_eval_stats *stats) {
  *result = NULL;
  hk_eval_options defaults = {0};
  if (!opts) opts = &defaults;
  hk_eval_plan *plan;
  HK_TRY(hk_eval_plan_build_checked(m, opts, &plan));
  hk_status *st = check_args(m, args, n_args);
  hk_device_ctx d;
  hk_device_ctx_init(&d, plan, opts);
  d.mem.limit = hk_eval_memory_budget(opts, 1);
  for (int i = 0; i < n_args && !st; i++) d.mem.live += hk_value_byte_size(args[i]);
  d.mem.peak = d.mem.live;
  hk_eval_set_mem_counter(&d.mem);
  if (!st) st = hk_eval_computation(&d, m->entry, args, n_args, result);
  hk_eval_set_mem_counter(NULL);
  hk_eval_release_thread_cache();
  d.stats.peak_live_bytes = d.mem.peak;
  if (stats) *stats = d.stats;
  hk_device_ctx_free(&d);
  hk_eval_plan_free(plan);
  return st;
}

hk_status *hk_eval_check_args(const hk_module *m, hk_value *const *args, int n_args);
hk_status *hk_eval_check_args(const hk_module *m, hk_value *const *args, int n_args) {
  return check_args(m, args, n_args);
}
