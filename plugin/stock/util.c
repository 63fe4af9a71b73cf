/* util.c - IR utilities shared by the stock passes: the pass object,
 * computation cloning, dead-instruction and dead-computation removal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stock.h"

void stock_pass_destroy(hk_pass *self) {
  stock_pass *p = (stock_pass *)self;
  for (int k = 0; k < 2; k++) free((char *)p->str[k]);
  free(p);
}

bool stock_is_removable(const hk_instr *i) {
  if (i->n_users || hk_instr_is_root(i)) return false;
  if (i->opcode == HK_OP_PARAMETER || hk_instr_has_side_effect(i)) return false;
  if (i->attrs && (i->attrs->n_control_preds || i->attrs->n_control_succs)) return false;
  return true;
}

void stock_remove_with_dead_operands(hk_instr *i) {
  /* Worklist of candidates; an instruction is pushed once per operand edge
   * at most, so the list stays linear in the removed region. */
  size_t cap = 16, n = 0;
  hk_instr **work = malloc(cap * sizeof *work);
  if (!work) hk_out_of_memory();
  work[n++] = i;
  while (n) {
    hk_instr *cur = work[--n];
    if (!stock_is_removable(cur)) continue;
    int32_t nops = cur->n_operands;
    hk_instr **ops = malloc((size_t)(nops ? nops : 1) * sizeof *ops);
    if (!ops) hk_out_of_memory();
    memcpy(ops, cur->operands, (size_t)nops * sizeof *ops);
    hk_status *st = hk_instr_remove(cur);
    if (st) {
      hk_status_free(st);
      free(ops);
      continue;
    }
    for (int32_t k = 0; k < nops; k++) {
      if (n == cap) {
        cap *= 2;
        work = realloc(work, cap * sizeof *work);
        if (!work) hk_out_of_memory();
      }
      work[n++] = ops[k];
    }
    free(ops);
  }
  free(work);
}

/* Maps source instructions to clones through the scratch pointer of the
 * source (restored afterwards). */
hk_computation *stock_clone_computation(hk_computation *src) {
  hk_module *m = src->module;
  char cname[512];
  snprintf(cname, sizeof cname, "%s.clone", src->name);
  hk_computation *dst = hk_computation_new(m, cname);
  dst->execution_thread = src->execution_thread;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(src, &n);
  void **saved = malloc((size_t)(n ? n : 1) * sizeof *saved);
  hk_instr **ops = NULL;
  int32_t ops_cap = 0;
  if (!saved) hk_out_of_memory();
  for (int64_t k = 0; k < n; k++) saved[k] = order[k]->scratch;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k];
    if (s->n_operands > ops_cap) {
      ops_cap = s->n_operands * 2;
      ops = realloc(ops, (size_t)ops_cap * sizeof *ops);
      if (!ops) hk_out_of_memory();
    }
    for (int32_t j = 0; j < s->n_operands; j++) ops[j] = s->operands[j]->scratch;
    char name[512];
    snprintf(name, sizeof name, "%s.clone", s->name);
    hk_instr *c = hk_instr_clone(dst, s, s->shape, s->n_operands, ops, name);
    if (c->attrs) {  /* control edges are re-linked below, among clones */
      c->attrs->n_control_preds = c->attrs->n_control_succs = 0;
      c->attrs->control_preds = c->attrs->control_succs = NULL;
    }
    if (s->opcode == HK_OP_PARAMETER) hk_computation_register_param(dst, c);
    s->scratch = c;
  }
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k];
    if (!s->attrs) continue;
    for (int32_t j = 0; j < s->attrs->n_control_preds; j++)
      hk_instr_add_control_dep(s->attrs->control_preds[j]->scratch, s->scratch);
  }
  if (src->root) hk_computation_set_root(dst, src->root->scratch);
  for (int64_t k = 0; k < n; k++) order[k]->scratch = saved[k];
  free(saved);
  free(ops);
  free(order);
  return dst;
}

static void mark_live(bool *live, hk_computation **stack, int32_t *sp, hk_computation *c) {
  if (live[c->index]) return;
  live[c->index] = true;
  stack[(*sp)++] = c;
}

/* The walk behind both entry points: callees come from calls[c->index]
 * when calls is given, else from c's instructions. */
static bool remove_unreachable(hk_module *m, const stock_callees *calls) {
  if (!m->entry) return false;
  int32_t nc = m->n_computations;
  bool *live = calloc((size_t)nc + 1, sizeof *live);
  hk_computation **stack = malloc(((size_t)nc + 1) * sizeof *stack);
  if (!live || !stack) hk_out_of_memory();
  int32_t sp = 0;
  mark_live(live, stack, &sp, m->entry);
  while (sp) {
    hk_computation *c = stack[--sp];
    if (calls) {
      for (int32_t k = 0; k < calls[c->index].n; k++)
        mark_live(live, stack, &sp, calls[c->index].v[k]);
    } else {
      for (hk_instr *i = c->first; i; i = i->next)
        for (int32_t k = 0; k < i->n_called; k++) mark_live(live, stack, &sp, i->called[k]);
    }
  }
  /* Collect first: removal renumbers module->computations. */
  int32_t n_dead = 0;
  for (int32_t k = 0; k < nc; k++)
    if (!live[m->computations[k]->index]) stack[n_dead++] = m->computations[k];
  for (int32_t k = 0; k < n_dead; k++) hk_module_remove_computation(m, stack[k]);
  free(live);
  free(stack);
  return n_dead > 0;
}

bool stock_remove_unreachable_computations(hk_module *m) { return remove_unreachable(m, NULL); }

bool stock_remove_unreachable_by_callees(hk_module *m, const stock_callees *calls) {
  return remove_unreachable(m, calls);
}

hk_status *stock_parse_type_pairs(const char *pass, const char *option, const char *text,
                                  stock_type_pair *out, int *n) {
  *n = 0;
  const char *p = text ? text : "";
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    if (!*p) break;
    const char *arrow = strstr(p, "->");
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    if (!arrow || arrow > end || *n == STOCK_MAX_TYPE_PAIRS)
      return hk_error(HK_INVALID_ARGUMENT,
                      "%s: option %s: expected a list like \"bf16->f32,s8->s32\" (at most %d), got \"%s\"",
                      pass, option, STOCK_MAX_TYPE_PAIRS, text);
    hk_prim from = hk_prim_from_name(p, (size_t)(arrow - p));
    hk_prim to = hk_prim_from_name(arrow + 2, (size_t)(end - arrow - 2));
    if (from == HK_PRIM_INVALID || to == HK_PRIM_INVALID || !hk_prim_is_array(from) ||
        !hk_prim_is_array(to))
      return hk_error(HK_INVALID_ARGUMENT, "%s: option %s: unknown element type in \"%.*s\"",
                      pass, option, (int)(end - p), p);
    out[*n].from = from;
    out[*n].to = to;
    (*n)++;
    p = end;
  }
  return NULL;
}

hk_prim stock_type_pair_lookup(const stock_type_pair *pairs, int n, hk_prim from) {
  for (int k = 0; k < n; k++)
    if (pairs[k].from == from) return pairs[k].to;
  return HK_PRIM_INVALID;
}

hk_instr *stock_convert_before(hk_instr *before, hk_instr *x, hk_prim t) {
  if (x->shape->elem == t) return x;
  const hk_shape *s = hk_shape_with_elem(before->parent->module, x->shape, t);
  return hk_instr_new_before(before, HK_OP_CONVERT, s, 1, &x, NULL);
}

bool stock_widen(hk_instr *i, hk_prim from, hk_prim to) {
  if (i->n_called || !hk_shape_is_array(i->shape)) return false;
  bool any = i->shape->elem == from;
  for (int32_t k = 0; k < i->n_operands; k++) {
    if (!hk_shape_is_array(i->operands[k]->shape)) return false;
    any |= i->operands[k]->shape->elem == from;
  }
  if (!any) return false;
  hk_module *m = i->parent->module;
  hk_instr **ops = malloc((size_t)(i->n_operands ? i->n_operands : 1) * sizeof *ops);
  if (!ops) hk_out_of_memory();
  for (int32_t k = 0; k < i->n_operands; k++)
    ops[k] = i->operands[k]->shape->elem == from ? stock_convert_before(i, i->operands[k], to)
                                                 : i->operands[k];
  bool narrow_result = i->shape->elem == from;
  const hk_shape *ws = narrow_result ? hk_shape_with_elem(m, i->shape, to) : i->shape;
  hk_instr *wide = hk_instr_clone(i->parent, i, ws, i->n_operands, ops, NULL);
  free(ops);
  if (wide->attrs) {  /* control edges stay with i until it is removed */
    wide->attrs->n_control_preds = wide->attrs->n_control_succs = 0;
    wide->attrs->control_preds = wide->attrs->control_succs = NULL;
  }
  hk_instr *result = wide;
  if (narrow_result) {
    result = hk_instr_new(i->parent, HK_OP_CONVERT, i->shape, 1, &wide, NULL);
    hk_instr_set_sharding(result, i->sharding);
  }
  hk_instr_replace_all_uses(i, result);
  hk_instr_remove_control_deps(i);
  hk_status *st = hk_instr_remove(i);
  if (st) hk_status_free(st);
  return true;
}

bool stock_opcode_listed(const char *list, hk_opcode op) {
  const char *name = hk_opcode_name(op);
  size_t len = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ',' || *p == ' ') p++;
    size_t n = strcspn(p, ", ");
    if (n == len && strncmp(p, name, len) == 0) return true;
    p += n;
  }
  return false;
}

hk_status *stock_check_opcode_list(const char *pass, const char *option, const char *list) {
  for (const char *p = list; p && *p;) {
    while (*p == ',' || *p == ' ') p++;
    size_t len = strcspn(p, ", ");
    if (len && hk_opcode_from_name(p, len) == HK_OPCODE_COUNT)
      return hk_error(HK_INVALID_ARGUMENT, "%s: option %s: unknown opcode \"%.*s\"", pass, option,
                      (int)len, p);
    p += len;
  }
  return NULL;
}
