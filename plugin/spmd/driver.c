/* driver.c - SpmdPartitioner::Run, the seed's six phases: preprocess
 * (shardings, HLOs), reports and RecordInputsOutputsSharding, call-graph
 * flattening with its RET_CHECK, PartitionComputation over the entry,
 * relayout-and-verify of the entry signature, then the after-report,
 * cleanup and shardings cleared. */
#include "spmd_internal.h"

/* ---- phase A: PreprocessSharding ------------------------------------------ */

static bool has_replicated_sharding(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (hk_sharding_is_replicated(s->elems[i])) return true;
    return false;
  }
  return hk_sharding_is_replicated(s);
}

static bool base_can_side_effecting_have_replicated_sharding(hk_pass *self, const hk_instr *i) {
  spmd_partitioner *p = (spmd_partitioner *)self;
  if (i->opcode == HK_OP_CUSTOM_CALL) {
    const char *t = i->attrs ? i->attrs->custom_call_target : NULL;
    const hk_custom_call_partitioner *cp =
        t && p->reg ? hk_registry_find_custom_call_partitioner(p->reg, t) : NULL;
    return cp && cp->vt->can_side_effecting_have_replicated_sharding &&
           cp->vt->can_side_effecting_have_replicated_sharding(cp);
  }
  return i->opcode == HK_OP_INFEED || i->opcode == HK_OP_OUTFEED;
}

static bool has_custom_call_partitioner(spmd_partitioner *p, const hk_instr *i) {
  const char *t = i->attrs ? i->attrs->custom_call_target : NULL;
  return t && p->reg && hk_registry_find_custom_call_partitioner(p->reg, t);
}

static hk_status *check_side_effect(spmd_partitioner *p, hk_instr *i) {
  if (!hk_instr_has_side_effect(i) || i->opcode == HK_OP_RNG ||
      (i->opcode == HK_OP_CUSTOM_CALL && has_custom_call_partitioner(p, i)))
    return NULL;
  char *text = hk_instr_to_string(i, HK_PRINT_SHORT);
  hk_status *st = NULL;
  if (!i->sharding)
    st = hk_status_prefix(hk_error(HK_FAILED_PRECONDITION, "Side-effect HLO must have sharding: %s", text),
                          "%s:%d: RET_CHECK failure (hlo->has_sharding())", __FILE__, __LINE__);
  else if (has_replicated_sharding(i->sharding) &&
           !spmd_vt(p)->can_side_effecting_have_replicated_sharding(&p->pass, i))
    st = hk_status_prefix(
        hk_error(HK_FAILED_PRECONDITION, "side-effect HLO cannot have a replicated sharding: %s", text),
        "%s:%d: RET_CHECK failure (!HasReplicatedSharding(hlo->sharding()) || "
        "CanSideEffectingHaveReplicatedSharding(hlo))",
        __FILE__, __LINE__);
  free(text);
  return st;
}

static bool root_ok(const hk_sharding *s) {
  if (s->kind == HK_SHARDING_TUPLE) {
    for (int i = 0; i < s->n_elems; i++)
      if (!hk_sharding_is_replicated(s->elems[i]) && !hk_sharding_is_manual(s->elems[i]))
        return false;
    return true;
  }
  return hk_sharding_is_replicated(s) || hk_sharding_is_manual(s);
}

static hk_status *check_entry_contract(spmd_partitioner *p, hk_module *m) {
  hk_computation *e = m->entry;
  for (int k = 0; k < e->n_params; k++) {
    const hk_sharding *s = e->params[k]->sharding;
    if (!hk_sharding_is_replicated(s) && hk_sharding_unique_device(s) < 0) {
      char *t = hk_sharding_to_string(s);
      hk_status *st = hk_status_prefix(
          hk_error(HK_FAILED_PRECONDITION, "Unsupported entry parameter sharding:%s", t),
          "%s:%d: RET_CHECK failure (param->sharding().IsReplicated() || "
          "param->sharding().UniqueDevice().has_value())",
          __FILE__, __LINE__);
      free(t);
      return st;
    }
  }
  if (!root_ok(e->root->sharding)) {
    char *t = hk_sharding_to_string(e->root->sharding);
    hk_status *st = hk_status_prefix(
        hk_error(HK_FAILED_PRECONDITION, "Unsupported entry root sharding: %s", t),
        "%s:%d: RET_CHECK failure (root sharding is replicated or manual)", __FILE__, __LINE__);
    free(t);
    return st;
  }
  (void)p;
  return NULL;
}

/* Canonicalises i's sharding to XLA's normal form and spreads a non-tuple
 * sharding over a tuple-shaped instruction, so handlers see one spelling. */
static void canonicalize_sharding(spmd_partitioner *p, hk_module *m, hk_instr *i) {
  if (i->sharding)
    hk_instr_set_sharding(i, hk_sharding_for_shape(m, spmd_canonical(p, m, i->sharding), i->shape));
}

/* Computations the partitioner rewrites: those not only called as embedded
 * (reducers, comparators keep their scalar shapes).  Their call contexts
 * (XLA's SetCallContexts) come from the call edges the canonicalising walk
 * records, so the module is walked once; modules with very many
 * computations use the call graph instead. */
enum { EDGE_CONTROL = 1, EDGE_EMBEDDED = 2, MAX_EDGE_MATRIX = 256 };

typedef struct call_contexts {
  int32_t n;
  uint8_t *edges;   /* n x n, caller-major: EDGE_* bits; NULL with a graph */
  uint8_t *ctx;     /* per computation index: hk_call_context */
  bool *called;
} call_contexts;

static void contexts_init(call_contexts *cc, hk_module *m) {
  cc->n = m->n_computations;
  size_t n = (size_t)cc->n;
  cc->ctx = calloc(n + 1, 1);
  cc->called = calloc(n + 1, sizeof *cc->called);
  cc->edges = cc->n <= MAX_EDGE_MATRIX ? calloc(n * n + 1, 1) : NULL;
  if (!cc->ctx || !cc->called || (cc->n <= MAX_EDGE_MATRIX && !cc->edges)) hk_out_of_memory();
}

static void contexts_free(call_contexts *cc) {
  free(cc->edges);
  free(cc->ctx);
  free(cc->called);
}

static bool in_module(const hk_module *m, const hk_computation *c) {
  return c && c->index >= 0 && c->index < m->n_computations && m->computations[c->index] == c;
}

static void record_call_edges(call_contexts *cc, const hk_module *m, int32_t caller,
                              const hk_instr *i) {
  if (!cc->edges || !i->n_called) return;
  uint8_t bit = hk_opcode_call_context((hk_opcode)i->opcode) == HK_CALL_EMBEDDED ? EDGE_EMBEDDED
                                                                               : EDGE_CONTROL;
  for (int j = 0; j < i->n_called; j++) {
    const hk_computation *callee = i->called[j];
    if (!in_module(m, callee)) continue;
    cc->edges[(size_t)caller * (size_t)cc->n + (size_t)callee->index] |= bit;
    cc->called[callee->index] = true;
  }
}

static uint8_t union_context(uint8_t a, uint8_t b) {
  if (a == HK_CALL_NONE) return b;
  if (b == HK_CALL_NONE || a == b) return a;
  return HK_CALL_BOTH;
}

/* Uncalled computations run in a control-flow context; embedded edges make
 * callees embedded, control-flow edges pass the caller's context on. */
static void propagate_contexts(call_contexts *cc) {
  for (int32_t k = 0; k < cc->n; k++) cc->ctx[k] = cc->called[k] ? HK_CALL_NONE : HK_CALL_CONTROL_FLOW;
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t a = 0; a < cc->n; a++) {
      if (cc->ctx[a] == HK_CALL_NONE) continue;
      for (int32_t b = 0; b < cc->n; b++) {
        uint8_t e = cc->edges[(size_t)a * (size_t)cc->n + (size_t)b], nc = cc->ctx[b];
        if (e & EDGE_EMBEDDED) nc = union_context(HK_CALL_EMBEDDED, nc);
        if (e & EDGE_CONTROL) nc = union_context(cc->ctx[a], nc);
        if (nc != cc->ctx[b]) cc->ctx[b] = nc, changed = true;
      }
    }
  }
}

static void contexts_from_graph(call_contexts *cc, hk_module *m) {
  hk_call_graph *cg = hk_call_graph_build(m);
  for (int32_t k = 0; k < cc->n; k++) {
    hk_call_graph_node *n = hk_call_graph_node_of(cg, m->computations[k]);
    cc->ctx[k] = n ? n->context : HK_CALL_NONE;
  }
  hk_call_graph_free(cg);
}

static bool partitioned_computation(const call_contexts *cc, const hk_computation *c) {
  return c->is_entry || (cc->ctx[c->index] & HK_CALL_CONTROL_FLOW);
}

/* The checks and the default sharding for one instruction of a computation
 * the partitioner rewrites. */
static hk_status *check_and_default(spmd_partitioner *p, hk_module *m, hk_instr *i) {
  hk_status *st = check_side_effect(p, i);
  if (!st && i->sharding) {
    st = spmd_validate_sharding(p, i->sharding, i->shape);
    if (st) st = hk_status_prefix(st, "instruction '%s'", i->name);
  }
  if (st || i->sharding) return st;
  hk_instr_set_sharding(i, i->opcode == HK_OP_RNG
                               ? hk_sharding_maximal(m, 0)
                               : hk_sharding_for_shape(m, hk_sharding_replicated(m), i->shape));
  return NULL;
}

static hk_status *check_computation(spmd_partitioner *p, hk_module *m, hk_computation *c) {
  for (hk_instr *i = c->first; i; i = i->next) HK_TRY(check_and_default(p, m, i));
  return NULL;
}

/* Starts the notes of the walk below (sized for the module). */
static void notes_reset(struct spmd_walk_notes *w, int32_t n) {
  free(w->has_candidate);
  w->has_candidate = calloc((size_t)n + 1, sizeof *w->has_candidate);
  if (!w->has_candidate) hk_out_of_memory();
  w->n = n;
  w->next_channel_id = 1;
  w->control_calls = false;
  w->taken = false;
}

/* What later phases want to know of i: its channel id, whether it calls
 * in a control-flow context, and whether PreprocessHlos has work in its
 * computation (k). */
static void note_instr(struct spmd_walk_notes *w, int32_t k, const hk_instr *i) {
  if (i->n_called && hk_opcode_call_context((hk_opcode)i->opcode) != HK_CALL_EMBEDDED)
    w->control_calls = true;
  if (i->attrs && i->attrs->channel_id >= w->next_channel_id)
    w->next_channel_id = i->attrs->channel_id + 1;
  if (!w->has_candidate[k] && spmd_preprocess_candidate(i)) w->has_candidate[k] = true;
}

/* Walk 1: every sharding canonicalised, call edges recorded, and the entry
 * checked on the way (its first error kept); the notes taken.  Returns the
 * entry's error. */
static hk_status *canonicalize_all(spmd_partitioner *p, hk_module *m,
                                   const hk_exec_threads *threads, call_contexts *cc) {
  hk_status *entry_st = NULL;
  notes_reset(&p->notes, m->n_computations);
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    bool included = hk_exec_threads_include(threads, c), entry = included && c->is_entry;
    for (hk_instr *i = c->first; i; i = i->next) {
      record_call_edges(cc, m, k, i);
      if (included) {
        canonicalize_sharding(p, m, i);
        if (entry && !entry_st) entry_st = check_and_default(p, m, i);
      }
      note_instr(&p->notes, k, i);
    }
  }
  return entry_st;
}

/* Canonicalises every sharding; in the computations the partitioner
 * rewrites, checks and defaults them.  The first error in module order is
 * reported, as a walk checking computation by computation would. */
static hk_status *base_preprocess_sharding(hk_pass *self, hk_module *m,
                                           const hk_exec_threads *threads) {
  spmd_partitioner *p = (spmd_partitioner *)self;
  call_contexts cc;
  contexts_init(&cc, m);
  hk_status *entry_st = canonicalize_all(p, m, threads, &cc);
  if (cc.edges) propagate_contexts(&cc);
  else contexts_from_graph(&cc, m);
  hk_status *st = NULL;
  for (int32_t k = 0; k < m->n_computations && !st; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    if (c->is_entry) {
      st = entry_st;
      entry_st = NULL;
    } else if (partitioned_computation(&cc, c)) {
      st = check_computation(p, m, c);
    }
  }
  if (entry_st) hk_status_free(entry_st);
  contexts_free(&cc);
  if (!st && !p->options.allow_module_signature_change) st = check_entry_contract(p, m);
  /* Stamped at the end: the walk itself edits shardings only. */
  p->notes.taken = true;
  p->notes.at = hk_module_changes(m);
  return st;
}

/* ---- phase B: reports and RecordInputsOutputsSharding --------------------------- */

static char *report(const hk_module *m, const char *when, int64_t top, const spmd_partitioner *p) {
  int64_t counts[HK_OPCODE_COUNT] = {0}, total = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) {
      counts[i->opcode]++;
      total++;
    }
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_printf(&b, "SPMD partitioning %s: %lld instructions\n", when, (long long)total);
  bool used[HK_OPCODE_COUNT] = {false};
  for (int64_t t = 0; t < top; t++) {
    int best = -1;
    for (int o = 0; o < HK_OPCODE_COUNT; o++)
      if (!used[o] && counts[o] && (best < 0 || counts[o] > counts[best])) best = o;
    if (best < 0) break;
    used[best] = true;
    hk_buf_printf(&b, "  %s: %lld\n", hk_opcode_name((hk_opcode)best), (long long)counts[best]);
  }
  if (p) {
    hk_buf_printf(&b, "  collectives emitted: %lld\n", (long long)p->collectives_emitted);
    hk_buf_printf(&b, "  full rematerialization: %lld\n", (long long)p->full_rematerializations);
    if (p->remat_notes.len) hk_buf_put(&b, p->remat_notes.data, p->remat_notes.len);
    hk_buf_printf(&b, "  replicated fallbacks: %lld\n", (long long)p->replicated_fallbacks);
    if (p->fallback_notes.len) hk_buf_put(&b, p->fallback_notes.data, p->fallback_notes.len);
  }
  hk_buf_put(&b, "", 1);
  return b.data;
}

/* The reports are XLA's VLOG(1) lines: made (a walk over the module) and
 * printed only when HLOKIT_SPMD_REPORT asks for them; *slot keeps the last. */
static void log_report(char **slot, const hk_module *m, const char *when, int64_t top,
                       const spmd_partitioner *with_counts) {
  free(*slot);
  *slot = NULL;
  const char *e = getenv("HLOKIT_SPMD_REPORT");
  if (!e || !*e || !strcmp(e, "0")) return;
  *slot = report(m, when, top, with_counts);
  fputs(*slot, stderr);
}

static void record_inputs_outputs_sharding(hk_module *m) {
  hk_computation *e = m->entry;
  const hk_sharding **ps = hk_alloc(m, sizeof(hk_sharding *) * (size_t)(e->n_params + 1));
  for (int k = 0; k < e->n_params; k++) ps[k] = e->params[k]->sharding;
  m->config.n_spmd_parameters_shardings = e->n_params;
  m->config.spmd_parameters_shardings = ps;
  m->config.spmd_output_sharding = e->root->sharding;
}

/* ---- phase C/D: flatten, partition ------------------------------------------------ */

/* Runs the registry's pass `name` on m; *changed (when not NULL) says
 * whether it changed m. */
static hk_status *run_pass_changed(spmd_partitioner *p, const char *name, hk_module *m,
                                   const hk_exec_threads *threads, bool *changed) {
  bool ignored;
  if (!changed) changed = &ignored;
  *changed = false;
  if (!p->reg) return hk_error(HK_FAILED_PRECONDITION, "spmd-partitioning needs pass '%s'", name);
  hk_status *err = NULL;
  hk_pass *pass = hk_registry_create_pass(p->reg, name, NULL, &err);
  if (!pass) return hk_status_prefix(err, "spmd-partitioning");
  hk_status *st = hk_pass_run(pass, m, threads, changed);
  hk_pass_destroy(pass);
  return st;
}

/* Drops the originals the partitioned computations replaced.  None is
 * still called: the entry is replaced, and every other partitioned
 * computation was called in a control-flow context from exactly one
 * callsite (the flattened RET_CHECK), inside a computation that was
 * itself replaced.  Other computations nothing calls any more (a reducer
 * whose users were rewritten) go with the cleanup's hlo-dce. */
static void remove_replaced(spmd_partitioner *p, hk_module *m) {
  for (int64_t k = 0; k < p->n_new_comps; k++)
    if (p->orig_comps[k]->index >= 0) hk_module_remove_computation(m, p->orig_comps[k]);
}

/* Gives the partitioned computations their original names back. */
static void restore_names(spmd_partitioner *p, hk_module *m) {
  for (int64_t k = 0; k < p->n_new_comps; k++) {
    hk_computation *c = p->new_comps[k];
    const char *name = p->orig_comps[k]->name;
    if (c->index < 0 || !strcmp(c->name, name)) continue;
    if (!hk_module_find_computation(m, name)) c->name = hk_intern_cstr(m, name);
  }
  p->n_new_comps = 0;
}

/* ---- phase E: relayout and verify ---------------------------------------------------- */

static hk_status *relayout_and_verify(spmd_partitioner *p, hk_module *m,
                                      const hk_program_shape *saved) {
  hk_program_shape now = hk_computation_program_shape(m->entry);
  if (p->options.allow_module_signature_change) {
    m->config.entry_layout = now;
    m->config.has_entry_layout = true;
    return NULL;
  }
  HK_RET_CHECK(saved->n_params == now.n_params, "Parameter count changed for the entry computation");
  for (int k = 0; k < now.n_params; k++)
    HK_RET_CHECK(hk_shape_equal_minor_to_major(saved->params[k], now.params[k]) ||
                     (hk_shape_compatible(saved->params[k], now.params[k]) &&
                      (!saved->params[k]->layout || !now.params[k]->layout)),
                 "Parameter shape changed for the entry computation");
  HK_RET_CHECK(hk_shape_equal_minor_to_major(saved->result, now.result) ||
                   (hk_shape_compatible(saved->result, now.result) &&
                    (!saved->result->layout || !now.result->layout)),
               "Result shape changed for the entry computation");
  /* The saved (original) layouts stay the entry layout. */
  m->config.entry_layout = *saved;
  return NULL;
}

/* ---- phase F: cleanup ------------------------------------------------------------------ */

/* What the sort's walk does on the way: clears every sharding and notes
 * whether some instruction calls in a control-flow context (only those
 * give flatten-call-graph work). */
static void clear_sharding_note_calls(void *ctx, hk_instr *i) {
  bool *control_calls = ctx;
  hk_instr_set_sharding(i, NULL);
  if (i->n_called && hk_opcode_call_context((hk_opcode)i->opcode) == HK_CALL_CONTROL_FLOW)
    *control_calls = true;
}

/* Runs cleanup pass `name` if the registry has it; *dirty notes dead code
 * it may have left (leaves_dead_code). */
static hk_status *cleanup_pass(spmd_partitioner *p, const char *name, hk_module *m,
                               const hk_exec_threads *threads, bool leaves_dead_code,
                               bool *dirty) {
  if (!p->reg || !hk_registry_find_pass(p->reg, name)) return NULL;
  bool changed;
  HK_TRY(run_pass_changed(p, name, m, threads, &changed));
  spmd_phase_done(&p->clock, name);
  *dirty |= changed && leaves_dead_code;
  return NULL;
}

/* DCE, tuple simplification, CSE, flattening, DCE, then the shardings
 * cleared and the computations sorted callees first, as XLA prints them.
 * The clearing and sorting share one walk, done before the flattening:
 * the flattening reads no sharding, sorts again when it changes anything,
 * and the walk tells whether it has anything to do (a call in a
 * control-flow context); none of the cleanup passes depends on the order.
 * The last DCE can only find work the tuple simplifier or the flattening
 * left (hlo-cse removes what it replaces, and its twins keep the operands
 * alive), so it runs only when one of them changed something. */
static hk_status *cleanup(spmd_partitioner *p, hk_module *m, const hk_exec_threads *threads) {
  bool dirty = false, control_calls = false;
  HK_TRY(cleanup_pass(p, "hlo-dce", m, threads, false, &dirty));
  HK_TRY(cleanup_pass(p, "tuple-simplifier", m, threads, true, &dirty));
  HK_TRY(cleanup_pass(p, "hlo-cse", m, threads, false, &dirty));
  hk_module_sort_computations_visiting(m, clear_sharding_note_calls, &control_calls);
  spmd_phase_done(&p->clock, "clear shardings, sort computations");
  if (control_calls) HK_TRY(cleanup_pass(p, "flatten-call-graph", m, threads, true, &dirty));
  if (dirty) HK_TRY(cleanup_pass(p, "hlo-dce", m, threads, false, &dirty));
  return NULL;
}

/* ---- Run ---------------------------------------------------------------------------------- */

/* Whether the module is as the sharding walk saw it with no call in a
 * control-flow context: then every callee is embedded, called only from
 * embedded sites, which is flat by definition, and the graph need not be
 * built to know it. */
static bool flat_by_notes(const spmd_partitioner *p, const hk_module *m) {
  return spmd_notes_hold(p, m) && !p->notes.control_calls;
}

static hk_status *partition_entry(spmd_partitioner *p, hk_module *m) {
  hk_computation *entry = m->entry;
  bool known_flat = flat_by_notes(p, m);
  /* The last moment the graph is as the phases before left it. */
  spmd_early_order_drop_if_stale(&p->early_order);
  const hk_sharding *root_sharding = entry->root->sharding;
  /* A lone computation calls nothing: flat, and no graph is needed. */
  bool check = m->n_computations > 1 && !known_flat;
  hk_call_graph *cg = check ? hk_call_graph_build(m) : NULL;
  if (check && (!cg || !hk_call_graph_is_flattened(cg))) {
    hk_call_graph_free(cg);
    HK_RET_CHECK(false, "call graph is not flattened");
  }
  spmd_phase_done(&p->clock, "flattened call graph check");
  const hk_sharding **ps = calloc((size_t)entry->n_params + 1, sizeof *ps);
  if (!ps) hk_out_of_memory();
  for (int k = 0; k < entry->n_params; k++) ps[k] = entry->params[k]->sharding;
  hk_computation *ne = NULL;
  hk_status *st = spmd_partition_computation(p, entry, entry->n_params, ps, root_sharding, cg, &ne);
  free(ps);
  if (cg) hk_call_graph_free(cg);
  if (st) return st;
  spmd_phase_done(&p->clock, "partition computations");
  hk_module_set_entry(m, ne);
  remove_replaced(p, m);
  restore_names(p, m);   /* the module is sorted at the end of the cleanup */
  spmd_phase_done(&p->clock, "drop replaced computations");
  return NULL;
}

/* Phase A's walk, with the entry's post order made on a second thread
 * meanwhile when the base walk runs (it writes only shardings, which the
 * order does not read; an overriding hook may do anything). */
static hk_status *preprocess_sharding_and_order(spmd_partitioner *p, hk_module *m,
                                                const hk_exec_threads *threads) {
  const hk_spmd_partitioner_vtable *vt = spmd_vt(p);
  if (vt->preprocess_sharding == base_preprocess_sharding)
    spmd_early_order_start(&p->early_order, m->entry);
  hk_status *st = vt->preprocess_sharding(&p->pass, m, threads);
  spmd_early_order_join(&p->early_order);
  return st;
}

static hk_status *run_phases(spmd_partitioner *p, hk_module *m, const hk_exec_threads *threads,
                             bool *changed) {
  hk_pass *self = &p->pass;
  const hk_spmd_partitioner_vtable *vt = spmd_vt(p);
  p->num_partitions = p->num_partitions_override > 0 ? p->num_partitions_override
                                                     : m->config.num_partitions;
  p->num_replicas = p->num_replicas_override > 0 ? p->num_replicas_override
                                                 : m->config.replica_count;
  if (p->num_partitions < 1) p->num_partitions = 1;
  if (p->num_replicas < 1) p->num_replicas = 1;
  p->full_rematerializations = p->replicated_fallbacks = p->collectives_emitted = 0;
  hk_buf_free(&p->remat_notes);
  hk_buf_free(&p->fallback_notes);
  hk_buf_init(&p->remat_notes);
  hk_buf_init(&p->fallback_notes);
  p->n_new_comps = 0;
  spmd_memo_clear(&p->memo);   /* shardings of the module run before */
  vt->collective_ops(self, p->num_partitions, p->num_replicas, &p->collectives);
  spmd_phase_clock_start(&p->clock);
  /* Phase A */
  p->notes.taken = false;   /* an overriding hook may not walk */
  HK_TRY(preprocess_sharding_and_order(p, m, threads));
  spmd_phase_done(&p->clock, "preprocess sharding");
  HK_TRY(spmd_preprocess_hlos(p, m, threads));
  spmd_phase_done(&p->clock, "preprocess hlos");
  /* Phase B */
  log_report(&p->before_report, m, "before", p->options.report_instruction_count, NULL);
  record_inputs_outputs_sharding(m);
  /* Phase C */
  /* Flattening clones only computations called in a control-flow context:
   * when the module has none (the walk's notes hold), it has nothing to do. */
  if (!flat_by_notes(p, m)) HK_TRY(run_pass_changed(p, "flatten-call-graph", m, threads, NULL));
  spmd_phase_done(&p->clock, "flatten call graph");
  hk_program_shape saved = hk_computation_program_shape(m->entry);
  p->next_channel_id =
      spmd_notes_hold(p, m) ? p->notes.next_channel_id : hk_module_next_channel_id(m);
  spmd_phase_done(&p->clock, "next channel id");
  /* Phase D */
  HK_TRY(partition_entry(p, m));
  *changed = true;
  /* Phase E */
  HK_TRY(relayout_and_verify(p, m, &saved));
  /* Phase F */
  log_report(&p->after_report, m, "after", p->options.report_instruction_count, p);
  spmd_phase_done(&p->clock, "relayout, verify, report");
  return cleanup(p, m, threads);
}

static hk_status *spmd_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                           bool *changed) {
  spmd_partitioner *p = (spmd_partitioner *)self;
  *changed = false;
  if (!m->entry) return hk_error(HK_INVALID_ARGUMENT, "spmd-partitioning: module has no entry");
  hk_status *st = run_phases(p, m, threads, changed);
  spmd_early_order_drop(&p->early_order);   /* unused when a phase failed */
  return st;
}

/* ---- the pass object and its vtable ---------------------------------------------------- */

static void spmd_destroy(hk_pass *self) {
  spmd_partitioner *p = (spmd_partitioner *)self;
  free(p->before_report);
  free(p->after_report);
  hk_buf_free(&p->remat_notes);
  hk_buf_free(&p->fallback_notes);
  free(p->new_comps);
  free(p->orig_comps);
  free(p->notes.has_candidate);
  spmd_memo_clear(&p->memo);
  free(p);
}

/* What the last run counted (interface "hlokit.counters"): `hlokit check
 * --json` and the after-report show them. */
static void spmd_report_counters(hk_pass *self, hk_counter_fn emit, void *ctx) {
  const spmd_partitioner *p = (const spmd_partitioner *)self;
  emit(ctx, "full_rematerializations", p->full_rematerializations);
  emit(ctx, "replicated_fallbacks", p->replicated_fallbacks);
  emit(ctx, "collectives_emitted", p->collectives_emitted);
}

static const hk_pass_counters_vtable spmd_counters = {
    .size = sizeof(hk_pass_counters_vtable),
    .report = spmd_report_counters,
};

static const void *spmd_get_extension(hk_pass *self, const char *iface) {
  if (!iface) return NULL;
  if (!strcmp(iface, HK_SPMD_PARTITIONER_IFACE)) return (const void *)self->vt;
  if (!strcmp(iface, HK_COUNTERS_IFACE)) return &spmd_counters;
  return NULL;
}

static const hk_spmd_options *spmd_options(hk_pass *self) {
  return &((spmd_partitioner *)self)->options;
}

static void spmd_set_vtable(hk_pass *self, const hk_spmd_partitioner_vtable *vt) {
  self->vt = &vt->pass;
}

static hk_status *base_handle_instruction(hk_pass *self, hk_spmd_partition_ctx *ctx,
                                          hk_instr *orig) {
  (void)self;
  return spmd_handle_dispatch(ctx, orig);
}

static const hk_spmd_partitioner_vtable spmd_base_vtable = {
    .pass = {.size = sizeof(hk_pass_vtable),
             .name = "spmd-partitioning",
             .run = spmd_run,
             .destroy = spmd_destroy,
             .get_extension = spmd_get_extension},
    .ext_size = sizeof(hk_spmd_partitioner_vtable),
    .options = spmd_options,
    .set_vtable = spmd_set_vtable,
    .preprocess_sharding = base_preprocess_sharding,
    .can_side_effecting_have_replicated_sharding = base_can_side_effecting_have_replicated_sharding,
    .handle_instruction = base_handle_instruction,
    .collective_ops = spmd_default_collective_ops,
    .communication_cost = spmd_communication_cost,
    .memory_cost = spmd_memory_cost,
    .planned_collective_cost = spmd_planned_collective_cost,
};

static hk_pass *spmd_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  spmd_partitioner *p = calloc(1, sizeof *p);
  if (!p) {
    *err = hk_error(HK_INTERNAL, "spmd-partitioning: out of memory");
    return NULL;
  }
  p->pass.vt = &spmd_base_vtable.pass;
  hk_buf_init(&p->remat_notes);
  hk_buf_init(&p->fallback_notes);
  spmd_options_from_values(opts, &p->options);
  p->num_partitions_override = hk_opt_int(opts, "num_partitions");
  p->num_replicas_override = hk_opt_int(opts, "num_replicas");
  p->reg = reg;
  return &p->pass;
}

static const hk_pass_desc spmd_desc = {
    .size = sizeof(hk_pass_desc),
    .name = "spmd-partitioning",
    .summary = "SpmdPartitioner: rewrites a sharded module into one per-partition program",
    .options = spmd_option_decls,
    .n_options = SPMD_N_OPTIONS,
    .create = spmd_create,
};

static hk_status *spmd_register(hk_registry *reg) { return hk_registry_add_pass(reg, &spmd_desc); }

HK_PLUGIN("spmd", HK_VERSION_STRING, spmd_register)
