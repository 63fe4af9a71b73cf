/* visitor.c - PartitionComputation: walks a computation in post order,
 * keeps each instruction's partitioned form (PartitionedHlo) in a side
 * table, dispatches every instruction through the partitioner's
 * handle_instruction hook, and builds the per-partition computation. */
#include "spmd_internal.h"

/* ---- the side table ------------------------------------------------------ */

/* A block of values; a visitor's blocks are sized for its computation, a
 * further block is only needed if handlers record more than that. */
struct spmd_value_block {
  struct spmd_value_block *next;
  int64_t n, cap;
  spmd_value v[];
};

static size_t block_bytes(int64_t cap) {
  return sizeof(struct spmd_value_block) + sizeof(spmd_value) * (size_t)cap;
}

/* A block for cap values, filled from the start: its pages are made present
 * on the host's helper thread meanwhile (hk_alloc_block). */
static struct spmd_value_block *new_block(int64_t cap, struct spmd_value_block *next) {
  struct spmd_value_block *b = hk_alloc_block(block_bytes(cap));
  b->next = next;
  b->n = 0;
  b->cap = cap;
  return b;
}

/* The value orig->scratch points at, if it is one of ours and orig's
 * (scratch may hold anything another pass left there). */
spmd_value *spmd_lookup(spmd_visitor *v, const hk_instr *orig) {
  uintptr_t p = (uintptr_t)orig->scratch;
  for (struct spmd_value_block *b = v->values; b; b = b->next) {
    uintptr_t lo = (uintptr_t)b->v, hi = (uintptr_t)(b->v + b->n);
    if (p < lo || p >= hi || (p - lo) % sizeof(spmd_value)) continue;
    spmd_value *val = (spmd_value *)orig->scratch;
    return val->orig == orig ? val : NULL;
  }
  return NULL;
}

void spmd_free_cache(spmd_cache_entry *e) {
  while (e) {
    spmd_cache_entry *nx = e->next;
    free(e);
    e = nx;
  }
}

spmd_value *spmd_set(spmd_visitor *v, const hk_instr *orig, hk_instr *hlo, const hk_sharding *s) {
  spmd_value *val = spmd_lookup(v, orig);
  if (val) spmd_free_cache(val->cache);
  else {
    if (v->values->n == v->values->cap) v->values = new_block(v->values->cap, v->values);
    val = &v->values->v[v->values->n++];
    ((hk_instr *)orig)->scratch = val;   /* the visitor's own mark on the input */
  }
  val->orig = orig;
  val->hlo = hlo;
  val->sharding = s;
  val->base_shape = orig->shape;
  val->cache = NULL;
  return val;
}

hk_instr *spmd_clone(spmd_visitor *v, hk_instr *orig, const hk_shape *shape, int n_operands,
                     hk_instr *const *operands) {
  /* A handler may clone orig more than once before recording its form
   * (variadic reduce): only the first takes the name. */
  if (v->named == orig || spmd_lookup(v, orig))
    return hk_instr_clone(v->comp, orig, shape, n_operands, operands, NULL);
  v->named = orig;
  return hk_instr_clone_taking_name(v->comp, orig, shape, n_operands, operands);
}

static void visitor_free(spmd_visitor *v) {
  for (struct spmd_value_block *b = v->values; b;) {
    struct spmd_value_block *nx = b->next;
    for (int64_t i = 0; i < b->n; i++) spmd_free_cache(b->v[i].cache);
    hk_free_block(b, block_bytes(b->cap));
    b = nx;
  }
}

/* ---- the context ops ------------------------------------------------------ */

static spmd_visitor *V(hk_spmd_partition_ctx *ctx) { return (spmd_visitor *)ctx; }
static hk_module *ctx_module(hk_spmd_partition_ctx *ctx) { return V(ctx)->m; }
static hk_computation *ctx_builder(hk_spmd_partition_ctx *ctx) { return V(ctx)->comp; }
static int64_t ctx_num_partitions(hk_spmd_partition_ctx *ctx) { return V(ctx)->p->num_partitions; }
static const hk_spmd_options *ctx_options(hk_spmd_partition_ctx *ctx) { return &V(ctx)->p->options; }
static const hk_spmd_collective_ops *ctx_collectives(hk_spmd_partition_ctx *ctx) {
  return &V(ctx)->p->collectives;
}
static int64_t *ctx_next_channel_id(hk_spmd_partition_ctx *ctx) {
  return &V(ctx)->p->next_channel_id;
}

static hk_instr *ctx_operand(hk_spmd_partition_ctx *ctx, hk_instr *orig, const hk_sharding *s,
                             hk_status **err) {
  spmd_value *val = spmd_lookup(V(ctx), orig);
  if (!val) {
    *err = hk_error(HK_INTERNAL, "instruction '%s' has not been partitioned yet", orig->name);
    return NULL;
  }
  hk_instr *out = NULL;
  *err = spmd_reshard(V(ctx), val, s, &out);
  return *err ? NULL : out;
}

static void ctx_set_partitioned(hk_spmd_partition_ctx *ctx, hk_instr *orig, hk_instr *local,
                                const hk_sharding *s) {
  spmd_set(V(ctx), orig, local, s);
}

static hk_status *ctx_default_handle(hk_spmd_partition_ctx *ctx, hk_instr *orig) {
  return spmd_default_handle(V(ctx), orig);
}

static const hk_spmd_ctx_ops ctx_ops = {
    .size = sizeof(hk_spmd_ctx_ops),
    .module = ctx_module,
    .builder = ctx_builder,
    .num_partitions = ctx_num_partitions,
    .options = ctx_options,
    .collectives = ctx_collectives,
    .next_channel_id = ctx_next_channel_id,
    .operand = ctx_operand,
    .set_partitioned = ctx_set_partitioned,
    .default_handle = ctx_default_handle,
};

/* ---- handling -------------------------------------------------------------- */

hk_status *spmd_default_handle(spmd_visitor *v, hk_instr *orig) {
  hk_status *st = spmd_handle_op(v, orig);
  if (st) return hk_status_prefix(st, "partitioning '%s'", orig->name);
  return NULL;
}

/* A new parameter with the local shape of sharding s. */
static hk_instr *new_param(spmd_visitor *v, hk_instr *orig, const hk_sharding *s) {
  const hk_shape *ls = s && s->kind == HK_SHARDING_MANUAL ? orig->shape
                                                          : spmd_local_shape(v, s, orig->shape);
  hk_instr *p = hk_instr_new(v->comp, HK_OP_PARAMETER, ls, 0, NULL, NULL);
  hk_instr_take_name(p, orig);
  v->named = orig;
  hk_attrs *a = hk_instr_attrs(p);
  a->parameter_number = hk_instr_parameter_number(orig);
  if (orig->attrs) {
    a->metadata = orig->attrs->metadata;
    a->n_parameter_replication = orig->attrs->n_parameter_replication;
    a->parameter_replication = orig->attrs->parameter_replication;
    a->n_frontend_attributes = orig->attrs->n_frontend_attributes;
    a->frontend_attributes = orig->attrs->frontend_attributes;
  }
  hk_computation_register_param(v->comp, p);
  return p;
}

static hk_status *visit_all(spmd_visitor *v, int n_params, const hk_sharding *const *param_shardings) {
  int64_t n = 0;
  hk_instr **order = spmd_early_order_take(&v->p->early_order, v->orig, &n);
  if (!order) order = hk_computation_post_order(v->orig, &n);
  hk_status *st = NULL;
  const hk_spmd_partitioner_vtable *vt = spmd_vt(v->p);
  for (int64_t k = 0; k < n && !st; k++) {
    hk_instr *i = order[k];
    if (i->opcode == HK_OP_PARAMETER) {
      int64_t pn = hk_instr_parameter_number(i);
      const hk_sharding *s = pn < n_params && param_shardings && param_shardings[pn]
                                 ? param_shardings[pn]
                                 : spmd_sharding_of(v, i);
      spmd_set(v, i, new_param(v, i, s), s);
      continue;
    }
    st = vt->handle_instruction(&v->p->pass, &v->ctx, i);
    if (!st && !spmd_lookup(v, i))
      st = hk_error(HK_INTERNAL, "handler left '%s' without a partitioned form", i->name);
  }
  free(order);
  return st;
}

/* Records which original a new computation replaces (its name is given
 * back once the original is gone). */
static void remember_replacement(spmd_partitioner *p, hk_computation *c, hk_computation *orig) {
  if (p->n_new_comps == p->cap_new_comps) {
    p->cap_new_comps = p->cap_new_comps ? 2 * p->cap_new_comps : 8;
    p->new_comps = realloc(p->new_comps, sizeof *p->new_comps * (size_t)p->cap_new_comps);
    p->orig_comps = realloc(p->orig_comps, sizeof *p->orig_comps * (size_t)p->cap_new_comps);
    if (!p->new_comps || !p->orig_comps) hk_out_of_memory();
  }
  p->new_comps[p->n_new_comps] = c;
  p->orig_comps[p->n_new_comps++] = orig;
}

hk_status *spmd_partition_computation(spmd_partitioner *p, hk_computation *orig, int n_params,
                                      const hk_sharding *const *param_shardings,
                                      const hk_sharding *root_sharding, hk_call_graph *cg,
                                      hk_computation **out) {
  spmd_visitor v;
  memset(&v, 0, sizeof v);
  v.ctx.ops = &ctx_ops;
  v.p = p;
  v.m = orig->module;
  v.orig = orig;
  v.cg = cg;
  v.values = new_block(orig->n_instrs + 16, NULL);
  v.comp = hk_computation_new(v.m, orig->name);
  remember_replacement(p, v.comp, orig);
  v.comp->execution_thread = orig->execution_thread;
  hk_status *st = visit_all(&v, n_params, param_shardings);
  if (!st) {
    spmd_value *rv = spmd_lookup(&v, orig->root);
    hk_instr *root = NULL;
    st = spmd_reshard(&v, rv, root_sharding ? root_sharding : rv->sharding, &root);
    if (!st) hk_computation_set_root(v.comp, root);
  }
  visitor_free(&v);
  if (st) return st;
  *out = v.comp;
  return NULL;
}

hk_status *spmd_handle_dispatch(hk_spmd_partition_ctx *ctx, hk_instr *orig) {
  return spmd_default_handle(V(ctx), orig);
}
