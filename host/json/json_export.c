/* json_export.c - hk_module_to_json: the module, its config, computations and instructions as a JSON document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_internal.h"

/* ---- shared shape objects ------------------------------------------------------------ */
/* Shapes are interned, so instructions of one shape share one JSON object
 * (json-c reference counts): a big module costs one shape object per
 * distinct shape, not per instruction. */

typedef struct shape_cache {
  const hk_shape **keys;
  json_object **vals;
  size_t mask, count;   /* capacity - 1 (a power of two), entries */
} shape_cache;

static void cache_init(shape_cache *sc) {
  sc->mask = 255;
  sc->count = 0;
  sc->keys = calloc(sc->mask + 1, sizeof *sc->keys);
  sc->vals = calloc(sc->mask + 1, sizeof *sc->vals);
}

static void cache_free(shape_cache *sc) {
  for (size_t k = 0; k <= sc->mask; k++) json_object_put(sc->vals[k]);
  free(sc->keys);
  free(sc->vals);
}

static size_t cache_slot(const shape_cache *sc, const hk_shape *s) {
  size_t h = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull;
  for (size_t k = h & sc->mask;; k = (k + 1) & sc->mask)
    if (!sc->keys[k] || sc->keys[k] == s) return k;
}

static void cache_grow(shape_cache *sc) {
  shape_cache big = {calloc(2 * (sc->mask + 1), sizeof *big.keys),
                     calloc(2 * (sc->mask + 1), sizeof *big.vals), 2 * sc->mask + 1, sc->count};
  for (size_t k = 0; k <= sc->mask; k++)
    if (sc->keys[k]) {
      size_t slot = cache_slot(&big, sc->keys[k]);
      big.keys[slot] = sc->keys[k];
      big.vals[slot] = sc->vals[k];
    }
  free(sc->keys);
  free(sc->vals);
  *sc = big;
}

/* A new reference to the JSON object of shape s. */
static json_object *shape_json(shape_cache *sc, const hk_shape *s) {
  size_t slot = cache_slot(sc, s);
  if (!sc->keys[slot]) {
    if (2 * (sc->count + 1) > sc->mask + 1) {
      cache_grow(sc);
      slot = cache_slot(sc, s);
    }
    sc->keys[slot] = s;
    sc->vals[slot] = hkj_shape_to_json(s);
    sc->count++;
  }
  return json_object_get(sc->vals[slot]);
}

/* ---- instructions --------------------------------------------------------------- */

static json_object *instr_names(int n, hk_instr *const *instrs) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, json_object_new_string(instrs[k]->name));
  return a;
}

static json_object *computation_names(int n, hk_computation *const *comps) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, json_object_new_string(comps[k]->name));
  return a;
}

static json_object *instr_to_json(shape_cache *sc, const hk_instr *i) {
  json_object *o = json_object_new_object();
  hkj_put(o, "name", json_object_new_string(i->name));
  hkj_put(o, "opcode", json_object_new_string(hk_opcode_name((hk_opcode)i->opcode)));
  hkj_put(o, "shape", shape_json(sc, i->shape));
  hkj_put(o, "operands", instr_names(i->n_operands, i->operands));
  if (i->n_called) hkj_put(o, "called_computations", computation_names(i->n_called, i->called));
  if (i->attrs && i->attrs->n_control_preds)
    hkj_put(o, "control_predecessors", instr_names(i->attrs->n_control_preds, i->attrs->control_preds));
  hkj_put(o, "id", json_object_new_int64(i->id));
  hkj_attrs_to_json(i, o);
  return o;
}

/* ---- computations ------------------------------------------------------------------ */

static json_object *computation_to_json(shape_cache *sc, const hk_computation *c) {
  json_object *o = json_object_new_object();
  hkj_put(o, "name", json_object_new_string(c->name));
  hkj_put(o, "is_entry", json_object_new_boolean(c->is_entry));
  if (c->execution_thread) hkj_put(o, "execution_thread", json_object_new_string(c->execution_thread));
  if (c->root) hkj_put(o, "root", json_object_new_string(c->root->name));
  json_object *instrs = json_object_new_array_ext((int)c->n_instrs);
  for (const hk_instr *i = c->first; i; i = i->next) json_object_array_add(instrs, instr_to_json(sc, i));
  hkj_put(o, "instructions", instrs);
  return o;
}

/* ---- module config -------------------------------------------------------------------- */

static json_object *program_shape_to_json(const hk_program_shape *ps) {
  json_object *o = json_object_new_object();
  json_object *params = json_object_new_array_ext(ps->n_params);
  for (int k = 0; k < ps->n_params; k++) json_object_array_add(params, hkj_shape_to_json(ps->params[k]));
  hkj_put(o, "params", params);
  if (ps->param_names) {
    json_object *names = json_object_new_array_ext(ps->n_params);
    for (int k = 0; k < ps->n_params; k++) json_object_array_add(names, hkj_new_str(ps->param_names[k]));
    hkj_put(o, "param_names", names);
  }
  if (ps->result) hkj_put(o, "result", hkj_shape_to_json(ps->result));
  return o;
}

static json_object *shardings_to_json(int n, const hk_sharding *const *s) {
  json_object *a = json_object_new_array_ext(n);
  for (int k = 0; k < n; k++) json_object_array_add(a, s[k] ? hkj_new_sharding(s[k]) : NULL);
  return a;
}

static json_object *config_to_json(const hk_module_config *cfg) {
  json_object *o = json_object_new_object();
  hkj_put(o, "num_partitions", json_object_new_int64(cfg->num_partitions));
  hkj_put(o, "replica_count", json_object_new_int64(cfg->replica_count));
  hkj_put(o, "use_spmd_partitioning", json_object_new_boolean(cfg->use_spmd_partitioning));
  hkj_put(o, "is_scheduled", json_object_new_boolean(cfg->is_scheduled));
  if (cfg->has_entry_layout)
    hkj_put(o, "entry_computation_layout", program_shape_to_json(&cfg->entry_layout));
  if (cfg->n_allow_prop_to_output || cfg->allow_prop_to_output)
    hkj_put(o, "allow_spmd_sharding_propagation_to_output",
            hkj_new_bools(cfg->n_allow_prop_to_output, cfg->allow_prop_to_output));
  if (cfg->n_allow_prop_to_params || cfg->allow_prop_to_params)
    hkj_put(o, "allow_spmd_sharding_propagation_to_parameters",
            hkj_new_bools(cfg->n_allow_prop_to_params, cfg->allow_prop_to_params));
  if (cfg->n_frontend_attributes || cfg->frontend_attributes)
    hkj_put(o, "frontend_attributes", hkj_new_kvs(cfg->n_frontend_attributes, cfg->frontend_attributes));
  if (cfg->n_spmd_parameters_shardings || cfg->spmd_parameters_shardings)
    hkj_put(o, "spmd_parameters_shardings",
            shardings_to_json(cfg->n_spmd_parameters_shardings, cfg->spmd_parameters_shardings));
  if (cfg->spmd_output_sharding)
    hkj_put(o, "spmd_output_sharding", hkj_new_sharding(cfg->spmd_output_sharding));
  if (cfg->n_raw) hkj_put(o, "raw", hkj_new_raw_attrs(cfg->n_raw, cfg->raw));
  return o;
}

/* ---- module ------------------------------------------------------------------------------ */

static json_object *module_to_json(const hk_module *m) {
  json_object *o = json_object_new_object();
  hkj_put(o, "name", json_object_new_string(m->name));
  if (m->entry) hkj_put(o, "entry", json_object_new_string(m->entry->name));
  hkj_put(o, "config", config_to_json(&m->config));
  json_object *comps = json_object_new_array_ext(m->n_computations);
  shape_cache sc;
  cache_init(&sc);
  for (int k = 0; k < m->n_computations; k++)
    json_object_array_add(comps, computation_to_json(&sc, m->computations[k]));
  cache_free(&sc);
  hkj_put(o, "computations", comps);
  return o;
}

void hk_module_to_json(const hk_module *m, bool pretty, hk_buf *out) {
  json_object *doc = module_to_json(m);
  if (pretty) {
    hkj_write_pretty(doc, out);
  } else {
    size_t len = 0;
    const char *text = json_object_to_json_string_length(
        doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    hk_buf_put(out, text, len);
  }
  json_object_put(doc);
}
