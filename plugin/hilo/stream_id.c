/* stream_id.c - hilo-collective-stream-id: assigns each collective a stream
 * id, recorded as the frontend attribute `_hilo_stream_id`, so that
 * collectives with no dependency between them can run on different
 * streams.
 *
 * The assignment: within a computation, a collective's depth is the
 * largest number of collectives on any path leading to it.  Collectives of
 * equal depth never depend on one another, so they are spread over the
 * streams round-robin in post order: stream = (rank among collectives of
 * that depth) mod num_streams.  Collectives of different depths may share
 * a stream; a stream runs in order, which respects their dependency.  The
 * result depends only on the module, so it is deterministic, and re-running
 * the pass rewrites the same values (changed=false). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hilo.h"

#define STREAM_ATTR "_hilo_stream_id"

/* Sets key=value in i's frontend attributes; returns true if it changed. */
static bool set_frontend_attr(hk_instr *i, const char *key, const char *value) {
  hk_module *m = i->parent->module;
  hk_attrs *a = hk_instr_attrs(i);
  for (int32_t k = 0; k < a->n_frontend_attributes; k++)
    if (strcmp(a->frontend_attributes[k].key, key) == 0) {
      if (strcmp(a->frontend_attributes[k].value, value) == 0) return false;
      hk_kv *kv = hk_memdup(m, a->frontend_attributes, (size_t)a->n_frontend_attributes * sizeof *kv);
      kv[k].value = hk_intern_cstr(m, value);
      a->frontend_attributes = kv;
      return true;
    }
  hk_kv *kv = hk_alloc(m, ((size_t)a->n_frontend_attributes + 1) * sizeof *kv);
  if (a->n_frontend_attributes)
    memcpy(kv, a->frontend_attributes, (size_t)a->n_frontend_attributes * sizeof *kv);
  kv[a->n_frontend_attributes].key = hk_intern_cstr(m, key);
  kv[a->n_frontend_attributes].value = hk_intern_cstr(m, value);
  a->frontend_attributes = kv;
  a->n_frontend_attributes++;
  return true;
}

static bool assign_streams(hk_computation *c, int64_t num_streams) {
  int64_t n = 0, *depth = NULL;
  hk_instr **order = hilo_collective_depths(c, &n, &depth);
  int64_t *rank_at_depth = calloc((size_t)n + 1, sizeof *rank_at_depth);
  if (!rank_at_depth) hk_out_of_memory();
  bool changed = false;
  for (int64_t k = 0; k < n; k++) {
    if (!hk_opcode_is_collective(order[k]->opcode)) continue;
    int64_t stream = rank_at_depth[depth[k]]++ % num_streams;
    char value[32];
    snprintf(value, sizeof value, "%lld", (long long)stream);
    changed |= set_frontend_attr(order[k], STREAM_ATTR, value);
  }
  hilo_clear_scratch(order, n);
  free(rank_at_depth);
  free(depth);
  free(order);
  return changed;
}

static hk_status *stream_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                             bool *changed) {
  int64_t num_streams = ((hilo_pass *)self)->num[0];
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (hk_exec_threads_include(threads, c)) *changed |= assign_streams(c, num_streams);
  }
  return NULL;
}

static const hk_pass_vtable stream_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "hilo-collective-stream-id",
    .run = stream_run, .destroy = hk_pass_free};

static hk_pass *stream_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  int64_t n = hk_opt_int(opts, "num_streams");
  if (n < 1) {
    *err = hk_error(HK_INVALID_ARGUMENT,
                    "hilo-collective-stream-id: option num_streams must be >= 1, got %lld",
                    (long long)n);
    return NULL;
  }
  hk_pass *p = hk_pass_alloc(&stream_vtable, sizeof(hilo_pass), err);
  if (p) ((hilo_pass *)p)->num[0] = n;
  return p;
}

static const hk_option_decl stream_options[] = {
    {"num_streams", HK_OPT_INT, "2", "number of collective streams to spread over", NULL},
};

const hk_pass_desc hilo_collective_stream_id_desc = {
    .size = sizeof(hk_pass_desc), .name = "hilo-collective-stream-id",
    .summary = "assigns independent collectives to different streams (" STREAM_ATTR ")",
    .options = stream_options, .n_options = 1, .create = stream_create};
