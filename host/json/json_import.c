/* json_import.c - hk_module_from_json: validates a JSON document and builds the module it describes. */
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* JSON nesting allowed: a rank-64 literal inside a module is ~70 deep. */
#define HKJ_MAX_DEPTH 256

/* Keys of an instruction that are not attributes: read by this file. */
static const char *const core_keys[] = {"name", "opcode", "shape", "operands", "called_computations",
                                        "control_predecessors", "id", NULL};

static bool is_core_key(const char *key) { return hkj_key_listed(core_keys, key); }

/* Reads obj[key] (required) as a non-empty string, path pushed. */
static hk_status *need_name(hkj_ctx *c, json_object *obj, const char *key, const char **out, size_t *len) {
  json_object *v;
  HK_TRY(hkj_need(c, obj, key, &v));
  size_t saved = hkj_push_key(c, key);
  hk_status *st = hkj_str_raw(c, v, out, len);
  if (!st && *len == 0) st = hkj_err(c, "empty name");
  if (!st && memchr(*out, '\0', *len)) st = hkj_err(c, "name contains a NUL character");
  hkj_pop(c, saved);
  return st;
}

/* ---- phase one: computations and instructions, without references ------------------ */

static hk_status *instr_opcode(hkj_ctx *c, json_object *obj, hk_opcode *op) {
  const char *s;
  size_t len;
  HK_TRY(need_name(c, obj, "opcode", &s, &len));
  *op = hk_opcode_from_name(s, len);
  if (*op == HK_OPCODE_COUNT) return hkj_err_at(c, "opcode", "unknown opcode '%s'", s);
  return NULL;
}

static hk_status *instr_shape(hkj_ctx *c, json_object *obj, const hk_shape **shape) {
  json_object *v;
  HK_TRY(hkj_need(c, obj, "shape", &v));
  size_t saved = hkj_push_key(c, "shape");
  hk_status *st = hkj_shape_from_json(c, v, shape);
  hkj_pop(c, saved);
  return st;
}

static hk_status *instr_id(hkj_ctx *c, json_object *v, hk_instr *i) {
  size_t saved = hkj_push_key(c, "id");
  int64_t id;
  hk_status *st = hkj_i64_range(c, v, 0, INT64_MAX - 1, &id);
  hkj_pop(c, saved);
  if (st) return st;
  i->id = id;
  return NULL;
}

static hk_status *register_parameter(hkj_ctx *c, hk_instr *i) {
  hk_computation *comp = i->parent;
  int64_t num = hk_instr_parameter_number(i);
  if ((uint64_t)num >= c->comp_instrs)   /* also bounds the params array */
    return hkj_err(c, "parameter number %lld is out of range for a computation of %zu instructions",
                   (long long)num, c->comp_instrs);
  if (num < comp->n_params && comp->params[num])
    return hkj_err(c, "parameter number %lld is also used by '%s'", (long long)num,
                   comp->params[num]->name);
  hk_computation_register_param(comp, i);
  return NULL;
}

static hk_status *instr_attrs_from_json(hkj_ctx *c, json_object *obj, hk_instr *i) {
  json_object_object_foreach(obj, key, val) {
    if (is_core_key(key)) continue;
    if (!hkj_is_attr_key(key)) return hkj_err(c, "unknown key '%s'", key);
    HK_TRY(hkj_attr_from_json(c, i, key, val));
  }
  if (i->opcode == HK_OP_PARAMETER) HK_TRY(register_parameter(c, i));
  json_object *id = hkj_get(obj, "id");
  if (id) return instr_id(c, id, i);
  i->id = -1;   /* assigned by finish_ids() */
  return NULL;
}

static hk_status *instr_create(hkj_ctx *c, hk_computation *comp, json_object *obj) {
  HK_TRY(hkj_object(c, obj));
  const char *name;
  size_t len;
  HK_TRY(need_name(c, obj, "name", &name, &len));
  hk_opcode op;
  HK_TRY(instr_opcode(c, obj, &op));
  const hk_shape *shape;
  HK_TRY(instr_shape(c, obj, &shape));
  hk_instr *i = hk_instr_new(comp, op, shape, 0, NULL, name);
  if (strcmp(i->name, name) != 0)
    return hkj_err_at(c, "name", "instruction name '%s' is not unique in the module (or not a valid name)", name);
  return instr_attrs_from_json(c, obj, i);
}

static hk_status *computation_instrs(hkj_ctx *c, hk_computation *comp, json_object *obj) {
  json_object *instrs;
  HK_TRY(hkj_need(c, obj, "instructions", &instrs));
  size_t saved = hkj_push_key(c, "instructions"), n;
  hk_status *st = hkj_array(c, instrs, &n);
  if (!st && n == 0) st = hkj_err(c, "a computation needs at least one instruction");
  c->comp_instrs = n;
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = instr_create(c, comp, json_object_array_get_idx(instrs, k));
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  for (int k = 0; !st && k < comp->n_params; k++)
    if (!comp->params[k]) st = hkj_err(c, "no parameter number %d (parameters 0..%d are used)", k, comp->n_params - 1);
  return st;
}

static hk_status *computation_create(hkj_ctx *c, json_object *obj) {
  static const char *const keys[] = {"name", "is_entry", "execution_thread", "root", "instructions", NULL};
  HK_TRY(hkj_object(c, obj));
  HK_TRY(hkj_known_keys(c, obj, keys));
  const char *name;
  size_t len;
  HK_TRY(need_name(c, obj, "name", &name, &len));
  hk_computation *comp = hk_computation_new(c->m, name);
  if (strcmp(comp->name, name) != 0)
    return hkj_err_at(c, "name", "computation name '%s' is not unique (or not a valid name)", name);
  json_object *v = hkj_get(obj, "execution_thread");
  if (v) {
    size_t saved = hkj_push_key(c, "execution_thread");
    hk_status *st = hkj_str(c, v, &comp->execution_thread);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return computation_instrs(c, comp, obj);
}

/* ---- phase two: operands, callees, control edges, roots ------------------------------ */

static hk_status *find_instr(hkj_ctx *c, hk_computation *comp, json_object *v, hk_instr **out) {
  const char *name;
  size_t len;
  HK_TRY(hkj_str_raw(c, v, &name, &len));
  *out = memchr(name, '\0', len) ? NULL : hk_computation_find_instr(comp, name);
  if (*out) return NULL;
  for (int k = 0; k < c->m->n_computations; k++)   /* error path: say where it is */
    if (hk_computation_find_instr(c->m->computations[k], name))
      return hkj_err(c, "instruction '%s' is in computation '%s', not in '%s'", name,
                     c->m->computations[k]->name, comp->name);
  return hkj_err(c, "unknown instruction '%s' in computation '%s'", name, comp->name);
}

/* Calls add(c, i, target) for each name in the array obj[key]. */
typedef void (*link_fn)(hk_instr *i, hk_instr *target);

static void link_operand(hk_instr *i, hk_instr *op) { hk_instr_append_operand(i, op); }
static void link_control(hk_instr *i, hk_instr *pred) { hk_instr_add_control_dep(pred, i); }

static hk_status *link_instrs(hkj_ctx *c, json_object *obj, const char *key, hk_instr *i, link_fn fn) {
  json_object *arr = hkj_get(obj, key);
  if (!arr) return NULL;
  size_t saved = hkj_push_key(c, key), n;
  hk_status *st = hkj_array(c, arr, &n);
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    hk_instr *target;
    st = find_instr(c, i->parent, json_object_array_get_idx(arr, k), &target);
    if (!st) fn(i, target);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  return st;
}

static hk_status *find_computation(hkj_ctx *c, json_object *v, hk_computation **out) {
  const char *name;
  size_t len;
  HK_TRY(hkj_str_raw(c, v, &name, &len));
  *out = memchr(name, '\0', len) ? NULL : hk_module_find_computation(c->m, name);
  if (!*out) return hkj_err(c, "unknown computation '%s'", name);
  return NULL;
}

static hk_status *link_called(hkj_ctx *c, json_object *obj, hk_instr *i) {
  json_object *arr = hkj_get(obj, "called_computations");
  if (!arr) return NULL;
  size_t saved = hkj_push_key(c, "called_computations"), n = 0;
  hk_status *st = hkj_array(c, arr, &n);
  if (!st && n > INT32_MAX) st = hkj_err(c, "array too long");
  hk_computation **called = st ? NULL : malloc((n + 1) * sizeof *called);
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = find_computation(c, json_object_array_get_idx(arr, k), &called[k]);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  if (!st) hk_instr_set_called(i, (int)n, called);
  free(called);
  return st;
}

static hk_status *instr_link(hkj_ctx *c, json_object *obj, hk_instr *i) {
  HK_TRY(link_instrs(c, obj, "operands", i, link_operand));
  HK_TRY(link_called(c, obj, i));
  return link_instrs(c, obj, "control_predecessors", i, link_control);
}

static hk_status *computation_root(hkj_ctx *c, json_object *obj, hk_computation *comp) {
  json_object *v = hkj_get(obj, "root");
  if (!v) {   /* XLA's default: the last instruction */
    hk_computation_set_root(comp, comp->last);
    return NULL;
  }
  size_t saved = hkj_push_key(c, "root");
  hk_instr *root;
  hk_status *st = find_instr(c, comp, v, &root);
  hkj_pop(c, saved);
  if (!st) hk_computation_set_root(comp, root);
  return st;
}

static hk_status *computation_link(hkj_ctx *c, json_object *obj, hk_computation *comp) {
  json_object *instrs = hkj_get(obj, "instructions");
  size_t saved = hkj_push_key(c, "instructions"), k = 0;
  hk_status *st = NULL;
  for (hk_instr *i = comp->first; i && !st; i = i->next, k++) {
    size_t s2 = hkj_push_index(c, k);
    st = instr_link(c, json_object_array_get_idx(instrs, k), i);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  return st ? st : computation_root(c, obj, comp);
}

/* ---- instruction ids ------------------------------------------------------------------ */

typedef struct id_entry {
  int64_t id;
  const hk_instr *instr;
} id_entry;

static int id_cmp(const void *a, const void *b) {
  int64_t x = ((const id_entry *)a)->id, y = ((const id_entry *)b)->id;
  return (x > y) - (x < y);
}

/* Instructions imported without an id get fresh ones after the largest
 * given id; then every id must be unique. */
static hk_status *finish_ids(hkj_ctx *c) {
  hk_module *m = c->m;
  int64_t next = 0, n = 0;
  for (int k = 0; k < m->n_computations; k++) {
    n += m->computations[k]->n_instrs;
    for (hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->id >= next) next = i->id + 1;
  }
  id_entry *ids = malloc(((size_t)n + 1) * sizeof *ids);
  size_t at = 0;
  for (int k = 0; k < m->n_computations; k++)
    for (hk_instr *i = m->computations[k]->first; i; i = i->next) {
      if (i->id < 0) i->id = next++;
      ids[at++] = (id_entry){i->id, i};
    }
  m->next_id = next;
  qsort(ids, at, sizeof *ids, id_cmp);
  hk_status *st = NULL;
  for (size_t k = 1; k < at && !st; k++)
    if (ids[k].id == ids[k - 1].id)
      st = hkj_err(c, "instructions '%s' and '%s' have the same id %lld", ids[k - 1].instr->name,
                   ids[k].instr->name, (long long)ids[k].id);
  free(ids);
  return st;
}

/* ---- the entry computation --------------------------------------------------------------- */

static hk_status *flagged_entry(hkj_ctx *c, json_object *comps, hk_computation **out) {
  *out = NULL;
  size_t saved = hkj_push_key(c, "computations");
  hk_status *st = NULL;
  for (size_t k = 0; !st && k < json_object_array_length(comps); k++) {
    json_object *v = hkj_get(json_object_array_get_idx(comps, k), "is_entry");
    if (!v) continue;
    size_t s2 = hkj_push_index(c, k);
    hkj_push_key(c, "is_entry");
    bool flag;
    st = hkj_bool(c, v, &flag);
    if (!st && flag && *out) st = hkj_err(c, "more than one entry computation");
    if (!st && flag) *out = c->m->computations[k];
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  return st;
}

static hk_status *module_entry(hkj_ctx *c, json_object *doc, json_object *comps) {
  hk_computation *flagged, *entry;
  HK_TRY(flagged_entry(c, comps, &flagged));
  json_object *v = hkj_get(doc, "entry");
  if (v) {
    size_t saved = hkj_push_key(c, "entry");
    hk_status *st = find_computation(c, v, &entry);
    if (!st && flagged && flagged != entry)
      st = hkj_err(c, "'%s' is not the computation marked is_entry ('%s')", entry->name, flagged->name);
    hkj_pop(c, saved);
    if (st) return st;
  } else {
    entry = flagged ? flagged : c->m->computations[c->m->n_computations - 1];
  }
  hk_module_set_entry(c->m, entry);
  return NULL;
}

/* ---- module config ------------------------------------------------------------------------- */

static hk_status *program_shape(hkj_ctx *c, json_object *v, hk_program_shape *ps) {
  static const char *const keys[] = {"params", "param_names", "result", NULL};
  HK_TRY(hkj_object(c, v));
  HK_TRY(hkj_known_keys(c, v, keys));
  json_object *params, *f;
  HK_TRY(hkj_need(c, v, "params", &params));
  size_t saved = hkj_push_key(c, "params"), n = 0;
  hk_status *st = hkj_array(c, params, &n);
  if (!st && n > INT32_MAX) st = hkj_err(c, "array too long");
  const hk_shape **shapes = st ? NULL : hk_alloc(c->m, (n + 1) * sizeof *shapes);
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = hkj_shape_from_json(c, json_object_array_get_idx(params, k), &shapes[k]);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  if (st) return st;
  ps->n_params = (int32_t)n;
  ps->params = shapes;
  if ((f = hkj_get(v, "param_names"))) {
    saved = hkj_push_key(c, "param_names");
    size_t nn = 0;
    st = hkj_array(c, f, &nn);
    if (!st && nn != n) st = hkj_err(c, "has %zu entries for %zu params", nn, n);
    const char **names = st ? NULL : hk_alloc(c->m, (n + 1) * sizeof *names);
    for (size_t k = 0; !st && k < n; k++) {
      size_t s2 = hkj_push_index(c, k);
      json_object *e = json_object_array_get_idx(f, k);
      if (e) st = hkj_str(c, e, &names[k]);
      hkj_pop(c, s2);
    }
    hkj_pop(c, saved);
    if (st) return st;
    ps->param_names = names;
  }
  if ((f = hkj_get(v, "result"))) {
    saved = hkj_push_key(c, "result");
    st = hkj_shape_from_json(c, f, &ps->result);
    hkj_pop(c, saved);
  }
  return st;
}

static hk_status *sharding_list(hkj_ctx *c, json_object *v, int32_t *n_out,
                                const hk_sharding *const **out) {
  size_t n;
  HK_TRY(hkj_array(c, v, &n));
  if (n > INT32_MAX) return hkj_err(c, "array too long");
  const hk_sharding **s = hk_alloc(c->m, (n + 1) * sizeof *s);
  for (size_t k = 0; k < n; k++) {
    size_t saved = hkj_push_index(c, k);
    hk_status *st = hkj_sharding(c, json_object_array_get_idx(v, k), &s[k]);
    hkj_pop(c, saved);
    if (st) return st;
  }
  *n_out = (int32_t)n;
  *out = s;
  return NULL;
}

/* One config key; the path already names it. */
static hk_status *config_field(hkj_ctx *c, const char *key, json_object *v, hk_module_config *cfg) {
  if (!strcmp(key, "num_partitions")) return hkj_i64_range(c, v, 1, INT32_MAX, &cfg->num_partitions);
  if (!strcmp(key, "replica_count")) return hkj_i64_range(c, v, 1, INT32_MAX, &cfg->replica_count);
  if (!strcmp(key, "use_spmd_partitioning")) return hkj_bool(c, v, &cfg->use_spmd_partitioning);
  if (!strcmp(key, "is_scheduled")) return hkj_bool(c, v, &cfg->is_scheduled);
  if (!strcmp(key, "entry_computation_layout")) {
    cfg->has_entry_layout = true;
    return program_shape(c, v, &cfg->entry_layout);
  }
  if (!strcmp(key, "allow_spmd_sharding_propagation_to_output"))
    return hkj_bools(c, v, &cfg->n_allow_prop_to_output, &cfg->allow_prop_to_output);
  if (!strcmp(key, "allow_spmd_sharding_propagation_to_parameters"))
    return hkj_bools(c, v, &cfg->n_allow_prop_to_params, &cfg->allow_prop_to_params);
  if (!strcmp(key, "frontend_attributes"))
    return hkj_kvs(c, v, &cfg->n_frontend_attributes, &cfg->frontend_attributes);
  if (!strcmp(key, "spmd_parameters_shardings"))
    return sharding_list(c, v, &cfg->n_spmd_parameters_shardings, &cfg->spmd_parameters_shardings);
  if (!strcmp(key, "spmd_output_sharding")) return hkj_sharding(c, v, &cfg->spmd_output_sharding);
  if (!strcmp(key, "raw")) return hkj_raw_attrs(c, v, &cfg->n_raw, &cfg->raw);
  return hkj_err(c, "unknown key");
}

static hk_status *config_from_json(hkj_ctx *c, json_object *v) {
  HK_TRY(hkj_object(c, v));
  json_object_object_foreach(v, key, val) {
    size_t saved = hkj_push_key(c, key);
    hk_status *st = config_field(c, key, val, &c->m->config);
    hkj_pop(c, saved);
    if (st) return st;
  }
  return NULL;
}

/* ---- the document -------------------------------------------------------------------------- */

static hk_status *computations_from_json(hkj_ctx *c, json_object *comps) {
  size_t saved = hkj_push_key(c, "computations"), n;
  hk_status *st = hkj_array(c, comps, &n);
  if (!st && n == 0) st = hkj_err(c, "a module needs at least one computation");
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = computation_create(c, json_object_array_get_idx(comps, k));
    hkj_pop(c, s2);
  }
  for (size_t k = 0; !st && k < n; k++) {
    size_t s2 = hkj_push_index(c, k);
    st = computation_link(c, json_object_array_get_idx(comps, k), c->m->computations[k]);
    hkj_pop(c, s2);
  }
  hkj_pop(c, saved);
  return st;
}

static hk_status *module_from_doc(hkj_ctx *c, json_object *doc, hk_module **out) {
  static const char *const keys[] = {"name", "entry", "config", "computations", NULL};
  HK_TRY(hkj_object(c, doc));
  HK_TRY(hkj_known_keys(c, doc, keys));
  const char *name;
  size_t len;
  HK_TRY(need_name(c, doc, "name", &name, &len));
  json_object *comps, *cfg;
  HK_TRY(hkj_need(c, doc, "computations", &comps));
  c->m = hk_module_new(name);
  hk_status *st = computations_from_json(c, comps);
  if (!st) st = finish_ids(c);
  if (!st) st = module_entry(c, doc, comps);
  if (!st && (cfg = hkj_get(doc, "config"))) {
    size_t saved = hkj_push_key(c, "config");
    st = config_from_json(c, cfg);
    hkj_pop(c, saved);
  }
  if (st) {
    hk_module_free(c->m);
    return st;
  }
  *out = c->m;
  return NULL;
}

/* Line and column (1-based) of byte offset `at`. */
static void line_col(const char *text, size_t at, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t k = 0; k < at; k++) {
    if (text[k] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

static hk_status *syntax_error(const char *file, const char *text, size_t at, const char *what) {
  int line, col;
  line_col(text, at, &line, &col);
  return hk_error(HK_INVALID_ARGUMENT, "%s:%d:%d: error: invalid JSON: %s", file, line, col, what);
}

static hk_status *parse_document(const char *text, size_t len, const char *file, json_object **doc) {
  if (len > (size_t)INT32_MAX) return hk_error(HK_INVALID_ARGUMENT, "%s: JSON text too large", file);
  json_tokener *tok = json_tokener_new_ex(HKJ_MAX_DEPTH);
  if (!tok) return hk_error(HK_INTERNAL, "%s: out of memory", file);
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  *doc = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error err = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok);
  if (err == json_tokener_continue) {   /* a NUL ends a pending top-level number */
    *doc = json_tokener_parse_ex(tok, "", 1);
    err = json_tokener_get_error(tok);
    end = len;
  }
  json_tokener_free(tok);
  if (err != json_tokener_success) {
    json_object_put(*doc);
    *doc = NULL;
    if (err == json_tokener_continue) return syntax_error(file, text, len, "unexpected end of input");
    return syntax_error(file, text, end, json_tokener_error_desc(err));
  }
  for (size_t k = end; k < len; k++)
    if (!strchr(" \t\r\n", text[k])) {
      json_object_put(*doc);
      *doc = NULL;
      return syntax_error(file, text, k, "unexpected text after the document");
    }
  return NULL;
}

hk_status *hk_module_from_json(const char *text, size_t len, const char *filename, hk_module **out) {
  *out = NULL;
  const char *file = filename ? filename : "<input>";
  json_object *doc;
  HK_TRY(parse_document(text, len, file, &doc));
  hkj_ctx c = {.file = file};
  hk_status *st = module_from_doc(&c, doc, out);
  json_object_put(doc);
  return st;
}
