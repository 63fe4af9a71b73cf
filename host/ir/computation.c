/* computation.c - computations: lookup, root, parameters, program shape. */
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"

hk_instr *hk_computation_find_instr(hk_computation *c, const char *name) {
  if (!name) return NULL;
  hk_instr *i = hk_name_holder_of(&c->module->impl->instr_names, name);
  return i && i->parent == c ? i : NULL;
}

void hk_computation_set_root(hk_computation *c, hk_instr *root) {
  hk_module_note_change(c->module);
  c->root = root;
}

void hk_computation_register_param(hk_computation *c, hk_instr *p) {
  int64_t num = hk_instr_parameter_number(p);
  if (num < 0) return;
  hk_module_note_change(c->module);
  if (num >= c->cap_params) {
    int64_t cap = c->cap_params ? c->cap_params : 4;
    while (cap <= num) cap *= 2;
    hk_instr **params = hk_alloc(c->module, (size_t)cap * sizeof *params);
    if (c->n_params) memcpy(params, c->params, (size_t)c->n_params * sizeof *params);
    c->params = params;
    c->cap_params = (int32_t)cap;
  }
  c->params[num] = p;
  if (num >= c->n_params) c->n_params = (int32_t)num + 1;
}

hk_program_shape hk_computation_program_shape(hk_computation *c) {
  hk_program_shape ps = {0};
  hk_module *m = c->module;
  ps.n_params = c->n_params;
  if (c->n_params) {
    const hk_shape **shapes = hk_alloc(m, (size_t)c->n_params * sizeof *shapes);
    const char **names = hk_alloc(m, (size_t)c->n_params * sizeof *names);
    for (int32_t k = 0; k < c->n_params; k++) {
      hk_instr *p = c->params[k];
      shapes[k] = p ? p->shape : NULL;
      names[k] = p ? p->name : NULL;
    }
    ps.params = shapes;
    ps.param_names = names;
  }
  ps.result = c->root ? c->root->shape : NULL;
  return ps;
}

hk_instr **hk_computation_calling_instrs_visiting(const hk_computation *c, int64_t *n,
                                                 void (*visit)(void *ctx, hk_instr *i),
                                                 void *ctx) {
  hk_instr **v = NULL;
  int64_t len = 0, cap = 0;
  for (hk_instr *i = c->first, *next; i; i = next) {
    hk_instr_prefetch_ahead(i);
    next = i->next;
    if (i->n_called) {
      if (len == cap) {
        cap = cap ? 2 * cap : 8;
        v = realloc(v, (size_t)cap * sizeof *v);
        if (!v) hk_out_of_memory();
      }
      v[len++] = i;
    }
    if (visit) visit(ctx, i);
  }
  *n = len;
  return v;
}

hk_instr **hk_computation_calling_instrs(const hk_computation *c, int64_t *n) {
  return hk_computation_calling_instrs_visiting(c, n, NULL, NULL);
}
