/* clone.c - deep copies: whole modules, single instructions, attributes, config. */
#include <stdlib.h>
#include <string.h>

#include "irpriv.h"
#include "ptr_table.h"

/* Resolved from host/sharding when it is linked in (it interns the copy);
 * otherwise shardings are deep-copied here without interning. */
#pragma weak hk_sharding_import

/* Instructions map through a dense array indexed by id when the source ids
 * are unique and below next_id (always, unless someone rewrote ids), else
 * through the pointer map. */
typedef struct clone_map {
  hk_ptr_map ptrs;          /* computations, and instructions when !by_id */
  hk_instr **by_id;
  int64_t n_ids;
} clone_map;

static bool ids_dense(const hk_module *src) {
  if (src->next_id <= 0) return false;
  uint8_t *seen = calloc((size_t)src->next_id, 1);
  if (!seen) hk_out_of_memory();
  bool ok = true;
  for (int32_t k = 0; ok && k < src->n_computations; k++)
    for (const hk_instr *i = src->computations[k]->first; ok && i; i = i->next) {
      if (i->id < 0 || i->id >= src->next_id || seen[i->id]) ok = false;
      else seen[i->id] = 1;
    }
  free(seen);
  return ok;
}

static void clone_map_init(clone_map *cm, const hk_module *src, size_t n_instrs) {
  cm->by_id = NULL;
  cm->n_ids = 0;
  if (ids_dense(src)) {
    cm->n_ids = src->next_id;
    cm->by_id = calloc((size_t)cm->n_ids, sizeof *cm->by_id);
    if (!cm->by_id) hk_out_of_memory();
    n_instrs = 0;
  }
  hk_ptr_map_init(&cm->ptrs, n_instrs + (size_t)src->n_computations);
}

static void clone_map_free(clone_map *cm) {
  free(cm->by_id);
  hk_ptr_map_free(&cm->ptrs);
}

static void map_put_instr(clone_map *cm, const hk_instr *src, hk_instr *copy) {
  if (cm->by_id) cm->by_id[src->id] = copy;
  else hk_ptr_map_put(&cm->ptrs, src, copy);
}

static hk_instr *map_instr(const clone_map *cm, const hk_instr *src) {
  if (!cm || !src) return NULL;
  if (!cm->by_id) return hk_ptr_map_get(&cm->ptrs, src);
  return src->id >= 0 && src->id < cm->n_ids ? cm->by_id[src->id] : NULL;
}

/* ---- small value copies ------------------------------------------------------------- */

static const char *str_copy(hk_module *m, const char *s) { return hk_intern_cstr(m, s); }

/* Copies n items; a present but empty array stays present (non-NULL), as
 * printers tell "slice={}" from no attribute that way. */
static void *arr_copy(hk_module *m, const void *p, size_t n, size_t elem) {
  if (!p) return NULL;
  return n ? hk_memdup(m, p, n * elem) : hk_alloc_aligned(m, 8, 8);
}

static hk_i64s i64s_copy(hk_module *m, hk_i64s v) {
  hk_i64s c = {v.n, arr_copy(m, v.v, (size_t)v.n, sizeof(int64_t))};
  return c;
}

static const hk_iota *iota_copy(hk_module *m, const hk_iota *io) {
  if (!io) return NULL;
  hk_iota *c = hk_alloc(m, sizeof *c);
  *c = *io;
  c->dims = arr_copy(m, io->dims, (size_t)io->n_dims, sizeof(int64_t));
  c->reshape_dims = arr_copy(m, io->reshape_dims, (size_t)io->n_reshape_dims, sizeof(int64_t));
  c->perm = arr_copy(m, io->perm, (size_t)io->n_reshape_dims, sizeof(int32_t));
  return c;
}

static void metadata_fill(hk_module *m, hk_metadata *c, const hk_metadata *md) {
  *c = *md;
  c->op_type = str_copy(m, md->op_type);
  c->op_name = str_copy(m, md->op_name);
  c->source_file = str_copy(m, md->source_file);
  c->extra = str_copy(m, md->extra);
}

static const hk_metadata *metadata_copy(hk_module *m, const hk_metadata *md) {
  if (!md) return NULL;
  hk_metadata *c = hk_alloc(m, sizeof *c);
  metadata_fill(m, c, md);
  return c;
}

static const hk_kv *kvs_copy(hk_module *m, const hk_kv *kv, int32_t n) {
  if (!kv || !n) return arr_copy(m, kv, 0, sizeof *kv);
  hk_kv *c = hk_alloc(m, (size_t)n * sizeof *c);
  for (int32_t k = 0; k < n; k++) {
    c[k].key = str_copy(m, kv[k].key);
    c[k].value = str_copy(m, kv[k].value);
  }
  return c;
}

static const hk_raw_attr *raws_copy(hk_module *m, const hk_raw_attr *r, int32_t n) {
  if (!r || !n) return arr_copy(m, r, 0, sizeof *r);
  hk_raw_attr *c = hk_alloc(m, (size_t)n * sizeof *c);
  for (int32_t k = 0; k < n; k++) {
    c[k].name = str_copy(m, r[k].name);
    c[k].value = str_copy(m, r[k].value);
  }
  return c;
}

/* ---- shardings --------------------------------------------------------------------------- */

static const hk_sharding *sharding_raw_copy(hk_module *m, const hk_sharding *s) {
  hk_sharding *c = hk_alloc(m, sizeof *c);
  *c = *s;
  int64_t n_dev = 0;
  if (s->devices && s->n_tile_dims) {
    n_dev = 1;
    for (int32_t d = 0; d < s->n_tile_dims; d++) n_dev *= s->tile_dims[d];
  }
  c->tile_dims = arr_copy(m, s->tile_dims, (size_t)s->n_tile_dims, sizeof(int64_t));
  c->devices = arr_copy(m, s->devices, (size_t)n_dev, sizeof(int64_t));
  c->iota = iota_copy(m, s->iota);
  c->subgroups = arr_copy(m, s->subgroups, (size_t)s->n_subgroups, 1);
  if (s->n_elems) {
    const hk_sharding **elems = hk_alloc(m, (size_t)s->n_elems * sizeof *elems);
    for (int32_t k = 0; k < s->n_elems; k++) elems[k] = sharding_raw_copy(m, s->elems[k]);
    c->elems = elems;
  }
  if (s->n_metadata) {
    hk_metadata *md = hk_alloc(m, (size_t)s->n_metadata * sizeof *md);
    for (int32_t k = 0; k < s->n_metadata; k++) metadata_fill(m, &md[k], &s->metadata[k]);
    c->metadata = md;
  }
  return c;
}

static const hk_sharding *sharding_copy(hk_module *m, const hk_sharding *s) {
  if (!s) return NULL;
  if (hk_sharding_import) return hk_sharding_import(m, s);
  return sharding_raw_copy(m, s);
}

/* ---- attributes ---------------------------------------------------------------------------- */

static const hk_window *window_copy(hk_module *m, const hk_window *w) {
  if (!w) return NULL;
  hk_window *c = hk_alloc(m, sizeof *c);
  c->n_dims = w->n_dims;
  c->dims = arr_copy(m, w->dims, (size_t)w->n_dims, sizeof *w->dims);
  return c;
}

static const hk_conv_dnums *conv_copy(hk_module *m, const hk_conv_dnums *d) {
  if (!d) return NULL;
  hk_conv_dnums *c = hk_alloc(m, sizeof *c);
  *c = *d;
  size_t n = (size_t)d->n_spatial;
  c->input_spatial = arr_copy(m, d->input_spatial, n, sizeof(int64_t));
  c->kernel_spatial = arr_copy(m, d->kernel_spatial, n, sizeof(int64_t));
  c->output_spatial = arr_copy(m, d->output_spatial, n, sizeof(int64_t));
  return c;
}

static const hk_dot_dnums *dot_copy(hk_module *m, const hk_dot_dnums *d) {
  if (!d) return NULL;
  hk_dot_dnums *c = hk_alloc(m, sizeof *c);
  c->lhs_batch = i64s_copy(m, d->lhs_batch);
  c->rhs_batch = i64s_copy(m, d->rhs_batch);
  c->lhs_contracting = i64s_copy(m, d->lhs_contracting);
  c->rhs_contracting = i64s_copy(m, d->rhs_contracting);
  return c;
}

static const hk_gather_dnums *gather_copy(hk_module *m, const hk_gather_dnums *d) {
  if (!d) return NULL;
  hk_gather_dnums *c = hk_alloc(m, sizeof *c);
  c->offset_dims = i64s_copy(m, d->offset_dims);
  c->collapsed_slice_dims = i64s_copy(m, d->collapsed_slice_dims);
  c->start_index_map = i64s_copy(m, d->start_index_map);
  c->operand_batching_dims = i64s_copy(m, d->operand_batching_dims);
  c->start_indices_batching_dims = i64s_copy(m, d->start_indices_batching_dims);
  c->index_vector_dim = d->index_vector_dim;
  return c;
}

static const hk_scatter_dnums *scatter_copy(hk_module *m, const hk_scatter_dnums *d) {
  if (!d) return NULL;
  hk_scatter_dnums *c = hk_alloc(m, sizeof *c);
  c->update_window_dims = i64s_copy(m, d->update_window_dims);
  c->inserted_window_dims = i64s_copy(m, d->inserted_window_dims);
  c->scatter_dims_to_operand_dims = i64s_copy(m, d->scatter_dims_to_operand_dims);
  c->input_batching_dims = i64s_copy(m, d->input_batching_dims);
  c->scatter_indices_batching_dims = i64s_copy(m, d->scatter_indices_batching_dims);
  c->index_vector_dim = d->index_vector_dim;
  return c;
}

static const hk_replica_groups *groups_copy(hk_module *m, const hk_replica_groups *g) {
  if (!g) return NULL;
  hk_replica_groups *c = hk_alloc(m, sizeof *c);
  *c = *g;
  if (g->group_start) {
    c->group_start = arr_copy(m, g->group_start, (size_t)g->n_groups + 1, sizeof(int32_t));
    c->ids = arr_copy(m, g->ids, (size_t)g->group_start[g->n_groups], sizeof(int64_t));
  }
  c->iota = iota_copy(m, g->iota);
  return c;
}

static const char *const *strs_copy(hk_module *m, const char *const *v, int32_t n) {
  if (!v || !n) return arr_copy(m, v, 0, sizeof *v);
  const char **c = hk_alloc(m, (size_t)n * sizeof *c);
  for (int32_t k = 0; k < n; k++) c[k] = str_copy(m, v[k]);
  return c;
}

/* Control edges are mapped through map, or dropped when map is NULL. */
static void control_copy(hk_module *m, hk_instr ***dst, int32_t *n, hk_instr *const *src,
                         int32_t n_src, const clone_map *map) {
  *dst = NULL;
  *n = 0;
  if (!map || !n_src) return;
  hk_instr **v = hk_alloc(m, (size_t)n_src * sizeof *v);
  for (int32_t k = 0; k < n_src; k++) {
    hk_instr *x = map_instr(map, src[k]);
    if (x) v[(*n)++] = x;
  }
  *dst = v;
}

static hk_attrs *attrs_copy(hk_module *m, const hk_attrs *a, const clone_map *map) {
  if (!a) return NULL;
  hk_attrs *c = hk_alloc(m, sizeof *c);
  *c = *a;
  c->literal = hk_literal_copy(m, a->literal);
  c->window = window_copy(m, a->window);
  c->conv = conv_copy(m, a->conv);
  c->dot = dot_copy(m, a->dot);
  c->gather = gather_copy(m, a->gather);
  c->gather_slice_sizes = i64s_copy(m, a->gather_slice_sizes);
  c->scatter = scatter_copy(m, a->scatter);
  c->slice = arr_copy(m, a->slice, (size_t)a->n_slice, sizeof *a->slice);
  c->dynamic_slice_sizes = i64s_copy(m, a->dynamic_slice_sizes);
  c->pad = arr_copy(m, a->pad, (size_t)a->n_pad, sizeof *a->pad);
  c->replica_groups = groups_copy(m, a->replica_groups);
  c->source_target_pairs =
      arr_copy(m, a->source_target_pairs, (size_t)a->n_source_target_pairs, sizeof(hk_pair));
  c->custom_call_target = str_copy(m, a->custom_call_target);
  c->backend_config = str_copy(m, a->backend_config);
  c->fusion_kind = str_copy(m, a->fusion_kind);
  c->rng_distribution = str_copy(m, a->rng_distribution);
  c->rng_algorithm = str_copy(m, a->rng_algorithm);
  c->metadata = metadata_copy(m, a->metadata);
  c->frontend_attributes = kvs_copy(m, a->frontend_attributes, a->n_frontend_attributes);
  control_copy(m, &c->control_preds, &c->n_control_preds, a->control_preds,
               a->n_control_preds, map);
  control_copy(m, &c->control_succs, &c->n_control_succs, a->control_succs,
               a->n_control_succs, map);
  c->operand_precision = strs_copy(m, a->operand_precision, a->n_operand_precision);
  c->parameter_replication =
      arr_copy(m, a->parameter_replication, (size_t)a->n_parameter_replication, sizeof(bool));
  c->infeed_config = str_copy(m, a->infeed_config);
  c->fft_type = str_copy(m, a->fft_type);
  c->fft_length = i64s_copy(m, a->fft_length);
  c->async_execution_thread = str_copy(m, a->async_execution_thread);
  c->raw = raws_copy(m, a->raw, a->n_raw);
  return c;
}

/* ---- single instruction ---------------------------------------------------------------------- */

/* The attributes of a copy in the same module: what the block points to
 * is const and shared (strings are the module's already), the literal is
 * the copy's own, control edges are not copied. */
static hk_attrs *attrs_copy_local(hk_module *m, const hk_attrs *a) {
  hk_attrs *c = hk_alloc(m, sizeof *c);
  *c = *a;
  c->literal = hk_literal_copy(m, a->literal);
  c->n_control_preds = c->n_control_succs = 0;
  c->control_preds = c->control_succs = NULL;
  return c;
}

/* Everything of src but operands and name, onto i (dims and called
 * lists are the copy's own: passes may change them in place). */
static void clone_fill(hk_module *m, hk_instr *i, const hk_instr *src) {
  bool same_module = src->parent && src->parent->module == m;
  if (src->n_dims) hk_instr_set_dims(i, src->n_dims, src->dims);
  if (src->n_called) hk_instr_set_called(i, src->n_called, src->called);
  if (same_module) {
    i->sharding = src->sharding;
    i->attrs = src->attrs ? attrs_copy_local(m, src->attrs) : NULL;
  } else {
    i->sharding = sharding_copy(m, src->sharding);
    i->attrs = attrs_copy(m, src->attrs, NULL);
  }
}

/* src's shape as one of m's (interned already when src is m's). */
static const hk_shape *shape_in(hk_module *m, const hk_instr *src) {
  bool same_module = src->parent && src->parent->module == m;
  return same_module ? src->shape : hk_shape_intern(m, src->shape);
}

/* A copy of src in c named as hk_instr_create names it (name, or name_from's
 * own name passed on). */
static hk_instr *clone_named(hk_computation *c, const hk_instr *src, const hk_shape *shape,
                             int n_operands, hk_instr *const *operands, const char *name,
                             hk_instr *name_from) {
  hk_module *m = c->module;
  if (!shape) shape = shape_in(m, src);
  hk_instr *i = hk_instr_create(c, NULL, (hk_opcode)src->opcode, shape, n_operands, operands,
                                name, name_from);
  clone_fill(m, i, src);
  return i;
}

hk_instr *hk_instr_clone(hk_computation *c, const hk_instr *src, const hk_shape *shape,
                         int n_operands, hk_instr *const *operands, const char *name) {
  return clone_named(c, src, shape, n_operands, operands, name ? name : src->name, NULL);
}

hk_instr *hk_instr_clone_taking_name(hk_computation *c, hk_instr *src, const hk_shape *shape,
                                     int n_operands, hk_instr *const *operands) {
  return clone_named(c, src, shape, n_operands, operands, NULL, src);
}

/* ---- whole module ------------------------------------------------------------------------------ */

static void config_copy(hk_module *m, hk_module_config *c, const hk_module_config *s) {
  *c = *s;
  const hk_program_shape *ps = &s->entry_layout;
  c->entry_layout.params = arr_copy(m, ps->params, 0, sizeof *ps->params);
  c->entry_layout.param_names = arr_copy(m, ps->param_names, 0, sizeof *ps->param_names);
  if (ps->n_params) {
    const hk_shape **shapes = hk_alloc(m, (size_t)ps->n_params * sizeof *shapes);
    for (int32_t k = 0; k < ps->n_params; k++)
      shapes[k] = ps->params && ps->params[k] ? hk_shape_intern(m, ps->params[k]) : NULL;
    c->entry_layout.params = ps->params ? shapes : NULL;
    c->entry_layout.param_names = strs_copy(m, ps->param_names, ps->n_params);
  }
  c->entry_layout.result = ps->result ? hk_shape_intern(m, ps->result) : NULL;
  c->allow_prop_to_output =
      arr_copy(m, s->allow_prop_to_output, (size_t)s->n_allow_prop_to_output, sizeof(bool));
  c->allow_prop_to_params =
      arr_copy(m, s->allow_prop_to_params, (size_t)s->n_allow_prop_to_params, sizeof(bool));
  c->frontend_attributes = kvs_copy(m, s->frontend_attributes, s->n_frontend_attributes);
  c->spmd_parameters_shardings = arr_copy(m, s->spmd_parameters_shardings, 0, sizeof(void *));
  if (s->n_spmd_parameters_shardings && s->spmd_parameters_shardings) {
    const hk_sharding **v = hk_alloc(m, (size_t)s->n_spmd_parameters_shardings * sizeof *v);
    for (int32_t k = 0; k < s->n_spmd_parameters_shardings; k++)
      v[k] = sharding_copy(m, s->spmd_parameters_shardings[k]);
    c->spmd_parameters_shardings = v;
  }
  c->spmd_output_sharding = sharding_copy(m, s->spmd_output_sharding);
  c->raw = raws_copy(m, s->raw, s->n_raw);
}

/* Copies names held by no live object (reserved or retired) and the
 * uniquer counters, so later names come out as they would in src. */
static void namespace_copy(hk_module *m, hk_namespace *dst, const hk_namespace *src) {
  for (uint32_t k = 0; src->names.slots && k <= src->names.mask; k++) {
    const hk_strmap_entry *e = &src->names.slots[k];
    void *v = hk_strmap_value(e);
    if (!e->kt || (v != HK_NAME_RESERVED && v != HK_NAME_RETIRED)) continue;
    const char *key = hk_strmap_key(e);
    uint32_t len = hk_str_hdr(key)->len;
    if (!hk_strmap_find(&dst->names, key, len, hk_str_hdr(key)->hash))
      hk_ns_claim(m, dst, key, len, v);
  }
  for (uint32_t k = 0; src->counters.slots && k <= src->counters.mask; k++) {
    const hk_strmap_entry *e = &src->counters.slots[k];
    if (!e->kt) continue;
    const char *key = hk_strmap_key(e);
    const hk_strhdr *h = hk_str_hdr(key);
    hk_strmap_add(&dst->counters, hk_str_new(&m->impl->arena, key, h->len, h->hash),
                  hk_strmap_value(e));
  }
}

static hk_computation *computation_shell(hk_module *m, const hk_computation *s) {
  hk_computation *c = hk_alloc(m, sizeof *c);
  c->module = m;
  c->name = hk_ns_claim(m, &m->impl->comp_names, s->name, strlen(s->name), c);
  c->is_entry = s->is_entry;
  c->execution_thread = str_copy(m, s->execution_thread);
  return c;
}

/* i gets si's name: registered with i as owner, unless si had lent it to
 * another instruction (that one registers it when its copy is made, or it
 * was retired and namespace_copy brings that over). */
static void instr_name_copy(hk_module *m, hk_instr *i, const hk_instr *si) {
  const hk_strhdr *h = hk_str_hdr(si->name);
  if (si->flags & HK_IFLAG_NAME_LENT) {
    i->name = hk_str_new(&m->impl->arena, si->name, h->len, h->hash);
    i->flags |= HK_IFLAG_NAME_LENT;
    return;
  }
  i->name = hk_ns_claim(m, &m->impl->instr_names, si->name, h->len, i);
}

/* Creates c's instructions (no operands yet), in list order. */
static void instrs_shell(hk_module *m, hk_computation *c, const hk_computation *s,
                         clone_map *map) {
  for (const hk_instr *si = s->first; si; si = si->next) {
    hk_instr *i = hk_arena_alloc(&m->impl->instr_arena, sizeof *i, 8);
    i->opcode = si->opcode;
    i->id = si->id;
    i->shape = hk_shape_intern(m, si->shape);
    i->parent = c;
    instr_name_copy(m, i, si);
    i->n_dims = si->n_dims;
    i->dims = arr_copy(m, si->dims, (size_t)si->n_dims, sizeof(int64_t));
    i->sharding = sharding_copy(m, si->sharding);
    i->prev = c->last;
    if (c->last) c->last->next = i;
    else c->first = i;
    c->last = i;
    c->n_instrs++;
    map_put_instr(map, si, i);
  }
}

static hk_instr **mapped_instrs(hk_module *m, hk_instr *const *v, int32_t n,
                                const clone_map *map) {
  if (!n) return NULL;
  hk_instr **c = hk_alloc_aligned(m, (size_t)n * sizeof *c, 8);
  for (int32_t k = 0; k < n; k++) c[k] = map_instr(map, v[k]);
  return c;
}

static void instr_links(hk_module *m, const hk_instr *si, const clone_map *map) {
  hk_instr *i = map_instr(map, si);
  i->n_operands = i->cap_operands = si->n_operands;
  i->operands = mapped_instrs(m, si->operands, si->n_operands, map);
  i->n_users = i->cap_users = si->n_users;
  i->users = mapped_instrs(m, si->users, si->n_users, map);
  if (si->n_called) {
    hk_computation **called = hk_alloc(m, (size_t)si->n_called * sizeof *called);
    for (int32_t k = 0; k < si->n_called; k++) {
      hk_computation *x = hk_ptr_map_get(&map->ptrs, si->called[k]);
      called[k] = x ? x : si->called[k];
    }
    i->n_called = si->n_called;
    i->called = called;
  }
  i->attrs = attrs_copy(m, si->attrs, map);
}

static size_t module_instr_count(const hk_module *s) {
  size_t n = (size_t)s->n_computations;
  for (int32_t k = 0; k < s->n_computations; k++) n += (size_t)s->computations[k]->n_instrs;
  return n;
}

hk_module *hk_module_clone(const hk_module *src) {
  hk_module *m = hk_module_new(src->name);
  clone_map map;
  clone_map_init(&map, src, module_instr_count(src));
  for (int32_t k = 0; k < src->n_computations; k++) {
    hk_computation *c = computation_shell(m, src->computations[k]);
    hk_ptr_map_put(&map.ptrs, src->computations[k], c);
    c->index = -1;
    if (m->n_computations == m->cap_computations) {
      m->cap_computations = m->cap_computations ? m->cap_computations * 2 : 8;
      m->computations = realloc(m->computations, (size_t)m->cap_computations * sizeof(void *));
      if (!m->computations) hk_out_of_memory();
    }
    c->index = m->n_computations;
    m->computations[m->n_computations++] = c;
  }
  for (int32_t k = 0; k < src->n_computations; k++)
    instrs_shell(m, m->computations[k], src->computations[k], &map);
  for (int32_t k = 0; k < src->n_computations; k++) {
    const hk_computation *s = src->computations[k];
    hk_computation *c = m->computations[k];
    for (const hk_instr *si = s->first; si; si = si->next) instr_links(m, si, &map);
    c->root = map_instr(&map, s->root);
    c->n_params = c->cap_params = s->n_params;
    c->params = s->n_params ? mapped_instrs(m, s->params, s->n_params, &map) : NULL;
  }
  m->entry = hk_ptr_map_get(&map.ptrs, src->entry);
  m->next_id = src->next_id;
  config_copy(m, &m->config, &src->config);
  namespace_copy(m, &m->impl->instr_names, &src->impl->instr_names);
  namespace_copy(m, &m->impl->comp_names, &src->impl->comp_names);
  clone_map_free(&map);
  return m;
}
