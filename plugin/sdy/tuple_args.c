/* tuple_args.c - xla.sdy.use_tuple_args: XLA's ShardyXLA converts such a
 * module back to HLO with use_tuple_args, so the entry takes one tuple
 * parameter of the flattened parameters (each sharding an element of its
 * tuple sharding), the entry layout and the input_output_alias /
 * buffer_donor parameter numbers follow ((N, {i}) -> (0, {N, i})), and the
 * attribute is removed.  The export undoes it for a module the import
 * kept the attribute of (hlokit.sdy.use_tuple_args): the parameters
 * flat again, with their names, shardings and kept Shardy texts. */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

/* A decimal at *p (spaces around it skipped); false when none is there. */
static bool parse_index(const char **p, long *out) {
  while (**p == ' ') (*p)++;
  char *end;
  *out = strtol(*p, &end, 10);
  if (end == *p) return false;
  *p = end;
  while (**p == ' ') (*p)++;
  return true;
}

/* At "(N, {": the text from N on rewritten; false when p is no such pair. */
static bool renumber_pair(hk_buf *b, const char **p, bool wrap) {
  const char *q = *p + 1;
  long n, i;
  if (!parse_index(&q, &n) || *q != ',') return false;
  q++;
  while (*q == ' ') q++;
  if (*q != '{') return false;
  const char *s = q + 1;
  while (*s == ' ') s++;
  if (wrap) {
    hk_buf_printf(b, "(0, {%ld%s", n, *s == '}' ? "" : ", ");
  } else {
    if (n != 0 || !parse_index(&s, &i)) return false;
    if (*s == ',') s++;
    while (*s == ' ') s++;
    hk_buf_printf(b, "(%ld, {", i);
  }
  *p = s;
  return true;
}

/* (N, {i...}) -> (0, {N, i...}) in an input_output_alias / buffer_donor
 * text (wrap), or back (!wrap: (0, {N, i...}) -> (N, {i...})); the rest is
 * copied.  The parser checked the text's form. */
static const char *renumber(hk_module *m, const char *text, bool wrap) {
  hk_buf b;
  hk_buf_init(&b);
  for (const char *p = text; *p;)
    if (*p != '(' || !renumber_pair(&b, &p, wrap)) hk_buf_put(&b, p++, 1);
  hk_buf_put(&b, "", 1);
  const char *out = hk_intern_cstr(m, b.data);
  hk_buf_free(&b);
  return out;
}

static void renumber_config(hk_module *m, bool wrap) {
  hk_raw_attr *raw = hk_alloc(m, sizeof *raw * (size_t)(m->config.n_raw + 1));
  for (int32_t k = 0; k < m->config.n_raw; k++) {
    raw[k] = m->config.raw[k];
    if (!strcmp(raw[k].name, "input_output_alias") || !strcmp(raw[k].name, "buffer_donor"))
      raw[k].value = renumber(m, raw[k].value, wrap);
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

/* The Shardy texts the import kept on `from` (hlokit.sdy.*), onto `to`. */
static void move_kept(hk_instr *to, hk_instr *from) {
  if (!from->attrs) return;
  for (int32_t k = 0; k < from->attrs->n_frontend_attributes; k++) {
    const hk_kv kv = from->attrs->frontend_attributes[k];
    if (strncmp(kv.key, KEEP_PREFIX, strlen(KEEP_PREFIX)) == 0) sdy_instr_attr_set(to, kv.key, kv.value);
  }
}

hk_status *sdy_use_tuple_args(hk_module *m, bool keep) {
  const char *flag = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                  SDY_USE_TUPLE_ARGS);
  if (!flag) return NULL;
  if (keep)
    sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes,
               KEEP_TUPLE_ARGS, flag);
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
    move_kept(gte, old[k]);
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
  renumber_config(m, true);
  return NULL;
}

/* The entry layout's one tuple parameter as its elements again. */
static void flat_layout(hk_module *m) {
  hk_program_shape *ps = &m->config.entry_layout;
  if (ps->n_params != 1 || !hk_shape_is_tuple(ps->params[0])) return;
  const hk_shape *t = ps->params[0];
  ps->n_params = t->n_tuple;
  ps->params = t->tuple;
  ps->param_names = NULL;
}

/* The first get-tuple-element of `arg` at index k (the import's, which
 * took the parameter's name), or NULL. */
static hk_instr *element_user(hk_instr *arg, int32_t k) {
  for (int32_t u = 0; u < arg->n_users; u++) {
    hk_instr *g = arg->users[u];
    if (g->opcode == HK_OP_GET_TUPLE_ELEMENT && hk_instr_tuple_index(g) == k) return g;
  }
  return NULL;
}

/* Parameter k of the flat entry, before `arg`, taking the name, sharding
 * and kept texts of its get-tuple-element (if any), and its uses. */
static hk_instr *flat_param(hk_instr *arg, int32_t k) {
  const hk_shape *shape = arg->shape->tuple[k];
  hk_instr *p = hk_instr_new_before(arg, HK_OP_PARAMETER, shape, 0, NULL, "param");
  hk_instr_attrs(p)->parameter_number = k;
  hk_instr *g = element_user(arg, k);
  const hk_sharding *s = arg->sharding;
  if (g) {                         /* the parameter's stand-in: its sharding is the parameter's */
    hk_instr_take_name(p, g);
    move_kept(p, g);
    hk_instr_set_sharding(p, g->sharding);
  } else if (s && hk_sharding_is_tuple(s) && k < s->n_elems) {
    hk_instr_set_sharding(p, s->elems[k]);
  } else if (s && !hk_sharding_is_tuple(s)) {
    hk_instr_set_sharding(p, s);
  }
  for (hk_instr *e; (e = element_user(arg, k));) {
    hk_instr_replace_all_uses(e, p);
    hk_status *st = hk_instr_remove(e);
    hk_status_free(st);            /* no users and no root now: never an error */
  }
  return p;
}

hk_status *sdy_restore_tuple_args(hk_module *m) {
  const char *flag = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                  KEEP_TUPLE_ARGS);
  if (!flag) return NULL;
  hk_computation *c = m->entry;
  hk_instr *arg = c->n_params == 1 ? c->params[0] : NULL;
  if (!arg || !hk_shape_is_tuple(arg->shape))
    return hk_error(HK_FAILED_PRECONDITION,
                    "%s: the entry no longer takes one tuple parameter", SDY_USE_TUPLE_ARGS);
  int32_t n = arg->shape->n_tuple;
  hk_instr **ps = hk_alloc(m, sizeof *ps * (size_t)(n + 1));
  for (int32_t k = 0; k < n; k++) ps[k] = flat_param(arg, k);
  if (arg->n_users || hk_instr_is_root(arg)) {   /* a whole-tuple use left */
    hk_instr *t = hk_instr_new_before(arg, HK_OP_TUPLE, arg->shape, n, ps, NULL);
    hk_instr_replace_all_uses(arg, t);
  }
  HK_TRY(hk_instr_remove(arg));
  c->n_params = 0;
  for (int32_t k = 0; k < n; k++) hk_computation_register_param(c, ps[k]);
  if (m->config.has_entry_layout) flat_layout(m);
  renumber_config(m, false);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes,
             SDY_USE_TUPLE_ARGS, flag);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes,
             KEEP_TUPLE_ARGS, NULL);
  return NULL;
}
