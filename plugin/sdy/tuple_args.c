/* tuple_args.c - xla.sdy.use_tuple_args: XLA's ShardyXLA converts such a
 * module back to HLO with use_tuple_args, so the entry takes one tuple
 * parameter of the flattened parameters (each sharding an element of its
 * tuple sharding), the entry layout and the input_output_alias /
 * buffer_donor parameter numbers follow ((N, {i}) -> (0, {N, i})), and the
 * attribute is removed. */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

/* (N, {i...}) -> (0, {N, i...}) in an input_output_alias / buffer_donor
 * text; the rest is copied.  The parser checked the text's form. */
static const char *renumber(hk_module *m, const char *text) {
  hk_buf b;
  hk_buf_init(&b);
  for (const char *p = text; *p;) {
    char *end;
    if (*p == '(') {
      const char *q = p + 1;
      while (*q == ' ') q++;
      long n = strtol(q, &end, 10);
      const char *r = end;
      while (*r == ' ') r++;
      if (end != q && *r == ',') {
        r++;
        while (*r == ' ') r++;
        if (*r == '{') {
          const char *s = r + 1;
          while (*s == ' ') s++;
          hk_buf_printf(&b, "(0, {%ld%s", n, *s == '}' ? "" : ", ");
          p = s;
          continue;
        }
      }
    }
    hk_buf_put(&b, p++, 1);
  }
  hk_buf_put(&b, "", 1);
  const char *out = hk_intern_cstr(m, b.data);
  hk_buf_free(&b);
  return out;
}

static void renumber_config(hk_module *m) {
  hk_raw_attr *raw = hk_alloc(m, sizeof *raw * (size_t)(m->config.n_raw + 1));
  for (int32_t k = 0; k < m->config.n_raw; k++) {
    raw[k] = m->config.raw[k];
    if (!strcmp(raw[k].name, "input_output_alias") || !strcmp(raw[k].name, "buffer_donor"))
      raw[k].value = renumber(m, raw[k].value);
  }
  m->config.raw = raw;
}

/* The entry layout's parameters as one tuple. */
static void tuple_layout(hk_module *m) {
  hk_program_shape *ps = &m->config.entry_layout;
  const hk_shape **one = hk_alloc(m, sizeof *one);
  one[0] = hk_shape_tuple(m, ps->n_params, ps->params);
  ps->n_params = 1;
  ps->params = one;
  ps->param_names = NULL;
}

hk_status *sdy_use_tuple_args(hk_module *m) {
  const char *flag = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                  SDY_USE_TUPLE_ARGS);
  if (!flag) return NULL;
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes,
             SDY_USE_TUPLE_ARGS, NULL);
  hk_computation *c = m->entry;
  int32_t n = c->n_params;
  const hk_shape **shapes = hk_alloc(m, sizeof *shapes * (size_t)(n + 1));
  const hk_sharding **shs = hk_alloc(m, sizeof *shs * (size_t)(n + 1));
  bool any = false;
  for (int32_t k = 0; k < n; k++) {
    if (!c->params[k]) return hk_error(HK_INVALID_ARGUMENT, "entry parameter %d is missing", k);
    shapes[k] = c->params[k]->shape;
    shs[k] = c->params[k]->sharding;
    any |= shs[k] != NULL;
    if (hk_shape_is_tuple(shapes[k]))
      return hk_error(HK_UNIMPLEMENTED, "%s with a tuple entry parameter", SDY_USE_TUPLE_ARGS);
  }
  hk_instr **old = malloc(sizeof *old * (size_t)(n + 1));
  if (!old) hk_out_of_memory();
  memcpy(old, c->params, sizeof *old * (size_t)n);
  hk_instr *arg = hk_instr_new_before(c->first, HK_OP_PARAMETER, hk_shape_tuple(m, n, shapes), 0,
                                      NULL, "arg_tuple");
  for (int32_t k = 0; k < n; k++) {
    hk_instr *gte = hk_instr_new_before(old[k], HK_OP_GET_TUPLE_ELEMENT, shapes[k], 1, &arg, NULL);
    hk_instr_attrs(gte)->tuple_index = k;
    hk_instr_set_sharding(gte, shs[k]);
    if (!shs[k]) shs[k] = hk_sharding_replicated(m);
    hk_instr_replace_all_uses(old[k], gte);
    hk_instr_take_name(gte, old[k]);
    hk_status *st = hk_instr_remove(old[k]);
    if (st) {
      free(old);
      return st;
    }
  }
  free(old);
  c->n_params = 0;
  hk_instr_attrs(arg)->parameter_number = 0;
  hk_computation_register_param(c, arg);
  if (any) hk_instr_set_sharding(arg, hk_sharding_tuple(m, n, shs));
  if (m->config.has_entry_layout) tuple_layout(m);
  renumber_config(m);
  return NULL;
}
