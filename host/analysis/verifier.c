/* verifier.c - hk_verify_module: structure, operand counts, called computations, shapes, shardings and the entry layout. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"
#include "ir/ptr_table.h"

hk_verify_options hk_verify_defaults(void) {
  hk_verify_options o = {.check_shapes = true, .check_shardings = true,
                         .layout_sensitive = false};
  return o;
}

/* ---- the name set (string keys; instruction maps use ir/ptr_table.h) ------ */

typedef struct ptr_set {
  const void **keys;
  uint32_t *vals;
  size_t cap;
} ptr_set;

static size_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return (size_t)h;
}

static void set_init(ptr_set *s, size_t n) {
  s->cap = 16;
  while (s->cap < n * 2 + 16) s->cap *= 2;
  s->keys = hk_check_alloc(calloc(s->cap, sizeof(void *)));
  s->vals = hk_check_alloc(calloc(s->cap, sizeof(uint32_t)));
}

static void set_free(ptr_set *s) {
  free(s->keys);
  free(s->vals);
}

/* Slot of string key, whose hash_str is hash: the set keeps each key's
 * hash in vals, so a probe reads a stored key (a cache miss apiece in a
 * big module) only when the hashes agree. */
static size_t set_slot_str(const ptr_set *s, const char *key, size_t hash) {
  size_t h = hash & (s->cap - 1);
  while (s->keys[h] && (s->vals[h] != (uint32_t)hash || strcmp(s->keys[h], key) != 0))
    h = (h + 1) & (s->cap - 1);
  return h;
}

/* ---- messages ------------------------------------------------------------- */

static hk_status *comp_fail(const hk_computation *c, const char *what) {
  return hk_error(HK_INVALID_ARGUMENT, "computation '%s': %s", c->name ? c->name : "?", what);
}

/* ---- structure ------------------------------------------------------------- */

static hk_status *check_operands(const hk_instr *i) {
  for (int k = 0; k < i->n_operands; k++) {
    const hk_instr *op = i->operands[k];
    if (!op) return ana_fail(i, "operand %d is null", k);
    if (op->parent != i->parent)
      return ana_fail(i, "operand %d ('%s') is in a different computation ('%s')", k, op->name,
                      op->parent && op->parent->name ? op->parent->name : "?");
  }
  const hk_attrs *a = i->attrs;
  for (int k = 0; a && k < a->n_control_preds; k++)
    if (!a->control_preds[k] || a->control_preds[k]->parent != i->parent)
      return ana_fail(i, "control predecessor %d is not in the same computation", k);
  for (int k = 0; k < i->n_called; k++)
    if (!i->called[k] || i->called[k]->module != i->parent->module)
      return ana_fail(i, "called computation %d is not in this module", k);
  return NULL;
}

/* Parameters numbered 0..n-1, each once, and the computation's table. */
static hk_status *check_parameters(const hk_computation *c) {
  int64_t n = 0;
  for (const hk_instr *i = c->first; i; i = i->next) n += i->opcode == HK_OP_PARAMETER;
  const hk_instr **by_num = calloc((size_t)n + 1, sizeof(*by_num));
  if (!by_num) return hk_error(HK_INTERNAL, "out of memory");
  hk_status *st = NULL;
  for (const hk_instr *i = c->first; i && !st; i = i->next) {
    if (i->opcode != HK_OP_PARAMETER) continue;
    int64_t p = hk_instr_parameter_number(i);
    if (p < 0 || p >= n)
      st = ana_fail(i, "parameter number %lld is out of range: the computation has %lld "
                    "parameters", (long long)p, (long long)n);
    else if (by_num[p])
      st = ana_fail(i, "duplicate parameter number %lld (also '%s')", (long long)p,
                    by_num[p]->name);
    else
      by_num[p] = i;
  }
  free(by_num);
  if (st) return st;
  if (c->n_params != n) return comp_fail(c, "parameter table does not match its parameters");
  for (int32_t k = 0; k < c->n_params; k++)
    if (!c->params[k] || c->params[k]->parent != c ||
        hk_instr_parameter_number(c->params[k]) != k)
      return comp_fail(c, "parameter table does not match its parameters");
  return NULL;
}

/* A list in topological order has no cycle (hk_computation_list_is_topological,
 * the usual case); otherwise depth-first over operands and control
 * predecessors, where a back edge is a cycle.  `state` maps instruction ->
 * 1 (on stack) / 2 (done). */
static hk_status *check_acyclic(const hk_computation *c) {
  if (hk_computation_list_is_topological(c)) return NULL;
  enum { ON_STACK = 1, DONE = 2 };
  hk_ptr_map st;
  hk_ptr_map_init(&st, (size_t)c->n_instrs);
  size_t cap = (size_t)c->n_instrs + 1;
  const hk_instr **stack = hk_check_alloc(malloc(sizeof(*stack) * cap));
  int32_t *next = hk_check_alloc(malloc(sizeof(int32_t) * cap));
  hk_status *err = NULL;
  for (const hk_instr *root = c->first; root && !err; root = root->next) {
    if (hk_ptr_map_get(&st, root)) continue;
    hk_ptr_map_put(&st, root, (void *)(uintptr_t)ON_STACK);
    size_t sp = 0;
    stack[sp] = root;
    next[sp++] = 0;
    while (sp && !err) {
      const hk_instr *i = stack[sp - 1];
      int32_t k = next[sp - 1]++;
      int32_t n_ctl = i->attrs ? i->attrs->n_control_preds : 0;
      if (k >= i->n_operands + n_ctl) {
        hk_ptr_map_put(&st, i, (void *)(uintptr_t)DONE);
        sp--;
        continue;
      }
      const hk_instr *op = k < i->n_operands ? i->operands[k]
                                              : i->attrs->control_preds[k - i->n_operands];
      uintptr_t state = (uintptr_t)hk_ptr_map_get(&st, op);
      if (state == ON_STACK) {
        err = ana_fail(i, "is part of a cycle through '%s'", op->name);
      } else if (!state && sp < cap) {
        hk_ptr_map_put(&st, op, (void *)(uintptr_t)ON_STACK);
        stack[sp] = op;
        next[sp++] = 0;
      }
    }
  }
  free(stack);
  free(next);
  hk_ptr_map_free(&st);
  return err;
}

/* hash_str(name), its slot in names starting to load; a NULL name hashes
 * to 0 (its instruction fails before the hash is used). */
static size_t prefetch_name_slot(const ptr_set *names, const char *name) {
  if (!name) return 0;
  size_t hash = hash_str(name);
  __builtin_prefetch(&names->keys[hash & (names->cap - 1)]);
  __builtin_prefetch(&names->vals[hash & (names->cap - 1)]);
  return hash;
}

static hk_status *check_computation(const hk_module *m, const hk_computation *c,
                                    ptr_set *names) {
  if (c->module != m) return comp_fail(c, "belongs to another module");
  if (!c->root) return comp_fail(c, "has no root instruction");
  if (c->root->parent != c) return comp_fail(c, "root instruction is not in the computation");
  int64_t count = 0;
  /* The name set is probed at random: the slot of the name NAME_AHEAD
   * instructions on starts loading now (its hash kept in a ring). */
  enum { NAME_AHEAD = 8 };
  size_t ring[NAME_AHEAD];
  const hk_instr *ahead = c->first;
  int64_t n_ahead = 0;
  for (; ahead && n_ahead < NAME_AHEAD; ahead = ahead->next, n_ahead++)
    ring[n_ahead] = prefetch_name_slot(names, ahead->name);
  for (const hk_instr *i = c->first; i; i = i->next, count++) {
    if (i->parent != c) return ana_fail(i, "parent pointer does not name its computation");
    if (!i->name) return comp_fail(c, "has an instruction without a name");
    size_t hash = ring[count % NAME_AHEAD];
    if (ahead) {
      ring[count % NAME_AHEAD] = prefetch_name_slot(names, ahead->name);
      ahead = ahead->next;
    }
    size_t h = set_slot_str(names, i->name, hash);
    if (names->keys[h])
      return ana_fail(i, "name is not unique within the module");
    names->keys[h] = i->name;
    names->vals[h] = (uint32_t)hash;
    HK_TRY(check_operands(i));
  }
  if (count != c->n_instrs) return comp_fail(c, "instruction count does not match its list");
  HK_TRY(check_parameters(c));
  return check_acyclic(c);
}

/* Computations call each other without recursion (a cycle would make
 * every later walk of the call graph loop).  state: 0 new, 1 on the
 * stack, 2 done; by position in m->computations. */
static hk_status *call_cycle_from(const hk_module *m, int32_t k, uint8_t *state) {
  state[k] = 1;
  const hk_computation *c = m->computations[k];
  for (const hk_instr *i = c->first; i; i = i->next)
    for (int32_t j = 0; j < i->n_called; j++) {
      const hk_computation *callee = i->called[j];
      int32_t ck = callee && callee->index >= 0 && callee->index < m->n_computations &&
                           m->computations[callee->index] == callee ? callee->index : -1;
      for (int32_t q = 0; q < m->n_computations && ck < 0; q++)
        if (m->computations[q] == callee) ck = q;
      if (ck < 0 || state[ck] == 2) continue;
      if (state[ck] == 1)
        return ana_fail(i, "calls computation '%s', which is already being called: the call graph has a cycle",
                        callee->name);
      HK_TRY(call_cycle_from(m, ck, state));
    }
  state[k] = 2;
  return NULL;
}

static hk_status *check_call_graph_acyclic(const hk_module *m) {
  uint8_t *state = calloc((size_t)m->n_computations + 1, 1);
  if (!state) return hk_error(HK_INTERNAL, "out of memory");
  hk_status *st = NULL;
  for (int32_t k = 0; k < m->n_computations && !st; k++)
    if (!state[k]) st = call_cycle_from(m, k, state);
  free(state);
  return st;
}

static hk_status *check_structure(const hk_module *m) {
  if (!m->entry) return hk_error(HK_INVALID_ARGUMENT, "module '%s' has no entry computation",
                                 m->name ? m->name : "?");
  size_t total = 0;
  for (int32_t k = 0; k < m->n_computations; k++) total += (size_t)m->computations[k]->n_instrs;
  ptr_set names;
  set_init(&names, total);
  hk_status *st = NULL;
  bool entry_found = false;
  for (int32_t k = 0; k < m->n_computations && !st; k++) {
    entry_found |= m->computations[k] == m->entry;
    st = check_computation(m, m->computations[k], &names);
  }
  set_free(&names);
  if (!st && !entry_found)
    st = hk_error(HK_INVALID_ARGUMENT, "entry computation is not in the module");
  if (!st) st = check_call_graph_acyclic(m);
  return st;
}

/* ---- per-instruction checks ------------------------------------------------ */

static hk_status *check_called_count(const hk_instr *i) {
  int n = i->n_called;
  switch ((hk_opcode)i->opcode) {
    case HK_OP_WHILE: case HK_OP_SELECT_AND_SCATTER:
      return n == 2 ? NULL : ana_fail(i, "expects 2 called computations, has %d", n);
    case HK_OP_CALL: case HK_OP_FUSION: case HK_OP_MAP: case HK_OP_REDUCE:
    case HK_OP_REDUCE_WINDOW: case HK_OP_SCATTER: case HK_OP_SORT:
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START: case HK_OP_REDUCE_SCATTER:
    case HK_OP_ASYNC_START:
      return n == 1 ? NULL : ana_fail(i, "expects 1 called computation, has %d", n);
    case HK_OP_ASYNC_UPDATE: case HK_OP_ASYNC_DONE:
      return n <= 1 ? NULL : ana_fail(i, "expects at most 1 called computation, has %d", n);
    case HK_OP_CONDITIONAL: case HK_OP_CUSTOM_CALL: case HK_OP_TOPK:
      return NULL;
    default:
      return n == 0 ? NULL : ana_fail(i, "called computations specified for a non-caller "
                                      "instruction");
  }
}

/* XLA's CheckFusionInstruction: in the fused computation the root has no
 * users and every other instruction has one. */
static hk_status *check_fused_users(const hk_instr *i) {
  if (i->opcode != HK_OP_FUSION || i->n_called != 1 || !i->called[0]) return NULL;
  const hk_computation *f = i->called[0];
  for (const hk_instr *x = f->first; x; x = x->next) {
    if (x == f->root && x->n_users)
      return ana_fail(i, "root '%s' of the fused computation '%s' may not have users", x->name,
                      f->name);
    if (x != f->root && !x->n_users)
      return ana_fail(i, "non-root instruction '%s' of the fused computation '%s' must have users",
                      x->name, f->name);
  }
  return NULL;
}

/* XLA's allow list, plus the variadic reduce and scatter: their inputs may
 * legitimately have different types (XLA's parser tests verify a tuple
 * scatter of f32 and bf16); each input is still checked against its
 * to_apply parameter. */
static bool mixed_precision_allowed(hk_opcode op) {
  switch (op) {
    case HK_OP_REDUCE: case HK_OP_SCATTER:
    case HK_OP_CALL: case HK_OP_CONDITIONAL: case HK_OP_CONSTANT:
    case HK_OP_CONVOLUTION: case HK_OP_DOT: case HK_OP_ALL_REDUCE:
    case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_REDUCE_DONE: case HK_OP_ALL_GATHER:
    case HK_OP_ALL_GATHER_START: case HK_OP_ALL_GATHER_DONE: case HK_OP_ASYNC_DONE:
    case HK_OP_ASYNC_UPDATE: case HK_OP_ASYNC_START: case HK_OP_COPY_DONE:
    case HK_OP_COPY_START: case HK_OP_CUSTOM_CALL: case HK_OP_DOMAIN: case HK_OP_FUSION:
    case HK_OP_GET_TUPLE_ELEMENT: case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_INFEED:
    case HK_OP_OUTFEED: case HK_OP_PARAMETER: case HK_OP_RECV: case HK_OP_RECV_DONE:
    case HK_OP_REDUCE_PRECISION: case HK_OP_REDUCE_WINDOW: case HK_OP_SEND:
    case HK_OP_SEND_DONE: case HK_OP_SORT: case HK_OP_TUPLE: case HK_OP_WHILE:
      return true;
    default:
      return false;
  }
}

static hk_prim first_float(const hk_shape *s, hk_prim seen, bool *mixed) {
  if (hk_shape_is_tuple(s)) {
    for (int k = 0; k < s->n_tuple; k++) seen = first_float(s->tuple[k], seen, mixed);
    return seen;
  }
  if (!hk_prim_is_float((hk_prim)s->elem)) return seen;
  if (seen != HK_PRIM_INVALID && seen != s->elem) *mixed = true;
  return seen == HK_PRIM_INVALID ? (hk_prim)s->elem : seen;
}

/* XLA's CheckMixedPrecisionOperands (mixed precision is not allowed). */
static hk_status *check_mixed_precision(const hk_instr *i) {
  if (mixed_precision_allowed((hk_opcode)i->opcode)) return NULL;
  hk_prim seen = HK_PRIM_INVALID;
  bool mixed = false;
  for (int k = 0; k < i->n_operands; k++) seen = first_float(i->operands[k]->shape, seen, &mixed);
  if (mixed)
    return ana_fail(i, "seen floating point types of different precisions, but mixed "
                    "precision is disallowed");
  return NULL;
}

/* XLA's comparison-type rule: float operands compare as FLOAT or
 * TOTALORDER, others with their default (signed/unsigned). */
static hk_status *check_compare_type(const hk_instr *i) {
  if (i->opcode != HK_OP_COMPARE || !i->attrs || i->n_operands < 2) return NULL;
  uint8_t t = i->attrs->cmp_type;
  if (t == HK_CMPT_DEFAULT) return NULL;
  hk_prim e = (hk_prim)i->operands[1]->shape->elem;
  bool ok;
  if (hk_prim_is_float(e)) ok = t == HK_CMPT_FLOAT || t == HK_CMPT_TOTALORDER;
  else if (hk_prim_is_complex(e)) ok = t == HK_CMPT_FLOAT;
  else if (hk_prim_is_signed_int(e)) ok = t == HK_CMPT_SIGNED;
  else ok = t == HK_CMPT_UNSIGNED;
  return ok ? NULL : ana_fail(i, "comparison type does not suit operands of type %s",
                              hk_prim_name(e));
}

/* XLA's ShapeVerifier::HandleDot / HandleConvolution: packed_nibble
 * precision on both operands or neither, only on 8-bit integers, and for a
 * convolution only without feature or batch groups. */
static hk_status *check_packed_nibble(const hk_instr *i) {
  bool dot = i->opcode == HK_OP_DOT;
  if ((!dot && i->opcode != HK_OP_CONVOLUTION) || !i->attrs || i->n_operands < 2) return NULL;
  const hk_attrs *a = i->attrs;
  int n = 0;
  for (int k = 0; k < a->n_operand_precision; k++)
    if (a->operand_precision[k] && strcmp(a->operand_precision[k], "packed_nibble") == 0) n++;
  if (n == 0) return NULL;
  const char *what = dot ? "Dot" : "Convolution";
  if (n == 1) return ana_fail(i, "%s cannot have a single packed nibble argument", what);
  if (!dot && a->feature_group_count > 1)
    return ana_fail(i, "Packed nibble precision does not support feature group count");
  if (!dot && a->batch_group_count > 1)
    return ana_fail(i, "Packed nibble precision does not support batch group count");
  for (int k = 0; k < 2; k++) {
    const hk_instr *o = i->operands[k];
    hk_prim e = (hk_prim)o->shape->elem;
    if (!hk_shape_is_array(o->shape) || !hk_prim_is_integral(e) || hk_prim_bits(e) != 8)
      return ana_fail(i, "Packed nibble precision can only apply to 8 bit integers. %s is %s",
                      k ? "RHS" : "LHS", o->name ? o->name : "?");
  }
  return NULL;
}

static hk_status *check_shape(const hk_module *m, const hk_instr *i) {
  HK_TRY(check_mixed_precision(i));
  HK_TRY(check_packed_nibble(i));
  HK_TRY(check_compare_type(i));
  ana_ctx c = {(hk_module *)m, i, true};
  const hk_shape *inferred = NULL;
  hk_status *st = ana_infer(&c, &inferred);
  if (st && st->code == HK_UNIMPLEMENTED) {
    hk_status_free(st);
    return NULL;
  }
  if (st) return st;
  if (!ana_compatible(i->shape, inferred)) {
    char a[256], b[256];
    return ana_fail(i, "declared shape %s does not match the inferred shape %s",
                    ana_shape_str(i->shape, a, sizeof a), ana_shape_str(inferred, b, sizeof b));
  }
  return NULL;
}

/* XLA checks device ids only for SPMD modules with num_partitions > 1. */
static int64_t sharding_device_limit(const hk_module *m) {
  if (m->config.use_spmd_partitioning && m->config.num_partitions > 1)
    return m->config.num_partitions;
  return -1;
}

static hk_status *check_sharding(const hk_module *m, const hk_instr *i) {
  if (!i->sharding) return NULL;
  hk_status *st = hk_sharding_validate(i->sharding, i->shape, sharding_device_limit(m));
  if (!st) return NULL;
  char *s = hk_sharding_to_string(i->sharding);
  hk_status *err = ana_fail(i, "invalid sharding %s: %s", s ? s : "?", st->message);
  free(s);
  hk_status_free(st);
  return err;
}

/* XLA's VerifyConsistentSharding: a while, its body root and parameter and
 * its condition parameter (a conditional and its branch roots) carry the
 * same sharding where they carry one. */
static hk_status *check_consistent_sharding(const hk_instr *i) {
  const hk_instr *set[64];
  int n = 0;
  set[n++] = i;
  if (i->opcode == HK_OP_WHILE && i->n_called == 2) {
    const hk_computation *cond = i->called[0], *body = i->called[1];
    set[n++] = body->root;
    if (body->n_params == 1) set[n++] = body->params[0];
    if (cond->n_params == 1) set[n++] = cond->params[0];
  } else if (i->opcode == HK_OP_CONDITIONAL) {
    for (int k = 0; k < i->n_called && n < 64; k++) set[n++] = i->called[k]->root;
  } else {
    return NULL;
  }
  const hk_instr *first = NULL;
  for (int k = 0; k < n; k++) {
    if (!set[k] || !set[k]->sharding) continue;
    if (!first) {
      first = set[k];
    } else if (!hk_sharding_equivalent(first->sharding, set[k]->sharding)) {
      char *a = hk_sharding_to_string(first->sharding), *b = hk_sharding_to_string(set[k]->sharding);
      hk_status *st = ana_fail(i, "inconsistent %s sharding: '%s' has %s but '%s' has %s",
                               hk_opcode_name((hk_opcode)i->opcode), first->name, a ? a : "?",
                               set[k]->name, b ? b : "?");
      free(a);
      free(b);
      return st;
    }
  }
  return NULL;
}

static bool opcode_in(hk_opcode op, const hk_opcode *set, int n) {
  for (int k = 0; k < n; k++)
    if (set[k] == op) return true;
  return false;
}

static hk_status *single_user(const hk_instr *i, const hk_opcode *users, int n) {
  if (i->n_users != 1)
    return ana_fail(i, "the %s instruction requires one consumer, found %d",
                    hk_opcode_name((hk_opcode)i->opcode), (int)i->n_users);
  if (!opcode_in((hk_opcode)i->users[0]->opcode, users, n))
    return ana_fail(i, "the consumer of a %s instruction cannot be a %s",
                    hk_opcode_name((hk_opcode)i->opcode),
                    hk_opcode_name((hk_opcode)i->users[0]->opcode));
  return NULL;
}

static hk_status *single_operand(const hk_instr *i, const hk_opcode *ops, int n) {
  if (i->n_operands != 1 || !opcode_in((hk_opcode)i->operands[0]->opcode, ops, n))
    return ana_fail(i, "the operand of a %s instruction must be a %s",
                    hk_opcode_name((hk_opcode)i->opcode), hk_opcode_name(ops[0]));
  return NULL;
}

/* XLA's VerifyAsynchronousInstructionPairs: each start op feeds exactly
 * its done op (through updates for async ops). */
static hk_status *check_async_pair(const hk_instr *i) {
  static const hk_opcode upd_done[] = {HK_OP_ASYNC_UPDATE, HK_OP_ASYNC_DONE};
  static const hk_opcode start_upd[] = {HK_OP_ASYNC_START, HK_OP_ASYNC_UPDATE};
  static const hk_opcode ar_done[] = {HK_OP_ALL_REDUCE_DONE}, ar_start[] = {HK_OP_ALL_REDUCE_START};
  static const hk_opcode cp_done[] = {HK_OP_COPY_DONE}, cp_start[] = {HK_OP_COPY_START};
  static const hk_opcode cpm_done[] = {HK_OP_COLLECTIVE_PERMUTE_DONE};
  static const hk_opcode cpm_start[] = {HK_OP_COLLECTIVE_PERMUTE_START};
  switch ((hk_opcode)i->opcode) {
    case HK_OP_ASYNC_START: return single_user(i, upd_done, 2);
    case HK_OP_ASYNC_UPDATE:
      HK_TRY(single_operand(i, start_upd, 2));
      return single_user(i, upd_done, 2);
    case HK_OP_ASYNC_DONE: return single_operand(i, start_upd, 2);
    case HK_OP_ALL_REDUCE_START: return single_user(i, ar_done, 1);
    case HK_OP_ALL_REDUCE_DONE: return single_operand(i, ar_start, 1);
    case HK_OP_COPY_START: return single_user(i, cp_done, 1);
    case HK_OP_COPY_DONE: return single_operand(i, cp_start, 1);
    case HK_OP_COLLECTIVE_PERMUTE_START: return single_user(i, cpm_done, 1);
    case HK_OP_COLLECTIVE_PERMUTE_DONE: return single_operand(i, cpm_start, 1);
    default: return NULL;
  }
}

/* XLA's VerifyChannels for send/recv: one user, and a done op on the same
 * channel with the same is_host_transfer. */
static hk_status *check_send_recv(const hk_instr *i) {
  if (i->opcode != HK_OP_SEND && i->opcode != HK_OP_RECV) return NULL;
  if (hk_instr_is_root(i)) return NULL; /* wrapped in an async computation */
  if (i->n_users != 1)
    return ana_fail(i, "%s must have exactly one user, has %d",
                    hk_opcode_name((hk_opcode)i->opcode), (int)i->n_users);
  const hk_instr *done = i->users[0];
  hk_opcode want = i->opcode == HK_OP_SEND ? HK_OP_SEND_DONE : HK_OP_RECV_DONE;
  if (done->opcode != want) return NULL;
  if (hk_instr_channel_id(done) != hk_instr_channel_id(i))
    return ana_fail(i, "channel id %lld differs from that of '%s' (%lld)",
                    (long long)hk_instr_channel_id(i), done->name,
                    (long long)hk_instr_channel_id(done));
  bool a = i->attrs && i->attrs->is_host_transfer, b = done->attrs && done->attrs->is_host_transfer;
  if (a != b)
    return ana_fail(i, "is_host_transfer differs from that of '%s'", done->name);
  return NULL;
}

/* parameter_replication has one entry per leaf buffer of the parameter. */
static hk_status *check_parameter_replication(const hk_instr *i) {
  if (i->opcode != HK_OP_PARAMETER || !i->attrs || i->attrs->n_parameter_replication == 0)
    return NULL;
  int64_t leaves = hk_shape_leaf_count(i->shape);
  if (leaves != i->attrs->n_parameter_replication)
    return ana_fail(i, "parameter has %lld leaf buffers, but parameter_replication has %d "
                    "elements", (long long)leaves, (int)i->attrs->n_parameter_replication);
  return NULL;
}

/* Layout-sensitive: a bitcast keeps the byte size. */
static hk_status *check_bitcast_size(const hk_instr *i, const hk_verify_options *o) {
  if (!o->layout_sensitive || i->opcode != HK_OP_BITCAST || i->n_operands != 1) return NULL;
  int64_t out = hk_shape_byte_size(i->shape), in = hk_shape_byte_size(i->operands[0]->shape);
  if (out != in)
    return ana_fail(i, "bitcast cannot have different shape sizes of output (%lld) and "
                    "operand (%lld)", (long long)out, (long long)in);
  return NULL;
}

static hk_status *check_instr(const hk_module *m, const hk_instr *i,
                              const hk_verify_options *o) {
  if (i->opcode >= HK_OPCODE_COUNT) return ana_fail(i, "unknown opcode %d", (int)i->opcode);
  int arity = ana_opcode_arity((hk_opcode)i->opcode);
  if (arity >= 0 && i->n_operands != arity)
    return ana_fail(i, "expected %d operands for %s instruction, has %d", arity,
                    hk_opcode_name((hk_opcode)i->opcode), (int)i->n_operands);
  HK_TRY(check_called_count(i));
  HK_TRY(check_fused_users(i));
  if (!i->shape) return ana_fail(i, "has no shape");
  if (hk_shape_is_array(i->shape) && i->shape->layout &&
      i->shape->layout->n_minor_to_major != i->shape->rank)
    return ana_fail(i, "has mismatched minor-to-major size (%d) and dimension size (%d)",
                    (int)i->shape->layout->n_minor_to_major, (int)i->shape->rank);
  if (o->check_shapes) HK_TRY(check_shape(m, i));
  HK_TRY(check_async_pair(i));
  HK_TRY(check_send_recv(i));
  HK_TRY(check_parameter_replication(i));
  HK_TRY(check_bitcast_size(i, o));
  if (o->check_shardings) {
    HK_TRY(check_sharding(m, i));
    HK_TRY(check_consistent_sharding(i));
  }
  return NULL;
}

/* ---- entry layout ---------------------------------------------------------- */

static bool layout_match(const hk_shape *a, const hk_shape *b, bool sensitive) {
  return sensitive ? hk_shape_equal_minor_to_major(a, b) : ana_compatible(a, b);
}

static hk_status *check_entry_layout(const hk_module *m, const hk_verify_options *o) {
  if (!m->config.has_entry_layout) return NULL;
  const hk_program_shape *ps = &m->config.entry_layout;
  const hk_computation *e = m->entry;
  char a[256], b[256];
  if (ps->result && !layout_match(e->root->shape, ps->result, o->layout_sensitive))
    return hk_error(HK_INVALID_ARGUMENT,
                    "shape of the root instruction of entry computation '%s' (%s) should be "
                    "compatible to the one specified in the module's entry computation "
                    "layout (%s)", e->name, ana_shape_str(e->root->shape, a, sizeof a),
                    ana_shape_str(ps->result, b, sizeof b));
  if (ps->n_params != e->n_params)
    return hk_error(HK_INVALID_ARGUMENT,
                    "number of parameters in entry computation layout (%d) must be the same "
                    "as the number of parameters of entry computation '%s' (%d)",
                    (int)ps->n_params, e->name, (int)e->n_params);
  for (int32_t k = 0; k < e->n_params; k++)
    if (!layout_match(e->params[k]->shape, ps->params[k], o->layout_sensitive))
      return hk_error(HK_INVALID_ARGUMENT,
                      "shape of entry computation '%s' parameter %d is %s, which should be "
                      "compatible to the one specified in the module's entry computation "
                      "layout %s", e->name, k, ana_shape_str(e->params[k]->shape, a, sizeof a),
                      ana_shape_str(ps->params[k], b, sizeof b));
  return NULL;
}

hk_status *hk_verify_module(const hk_module *m, const hk_verify_options *opts) {
  if (!m) return hk_error(HK_INVALID_ARGUMENT, "no module to verify");
  hk_verify_options o = opts ? *opts : hk_verify_defaults();
  HK_TRY(check_structure(m));
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next)
      HK_TRY(check_instr(m, i, &o));
  return check_entry_layout(m, &o);
}
