/* sample_eval.c - the demand-driven evaluator's core: boxes, the memo,
 * frames (device, call path, loop iteration), routing through tuples,
 * calls, conditionals and while loops, and the dispatch to op families. */
#include <time.h>

#include "eval/sample_internal.h"

/* ---- boxes and values ------------------------------------------------------ */

int64_t se_box_count(const se_box *b) {
  int64_t n = 1;
  for (int d = 0; d < b->rank; d++) n *= b->n[d];
  return n;
}

void se_box_full(se_box *b, const hk_shape *s) {
  b->rank = s->rank;
  for (int d = 0; d < s->rank; d++) {
    b->lo[d] = 0;
    b->n[d] = s->dims[d];
  }
}

void se_box_point(se_box *b, int rank, const int64_t *idx) {
  b->rank = rank;
  for (int d = 0; d < rank; d++) {
    b->lo[d] = idx[d];
    b->n[d] = 1;
  }
}

const hk_shape *se_leaf_shape(const hk_shape *s, int leaf) {
  if (s->elem != HK_TUPLE) return leaf == 0 ? s : NULL;
  for (int i = 0; i < s->n_tuple; i++) {
    int64_t n = hk_shape_leaf_count(s->tuple[i]);
    if (leaf < n) return se_leaf_shape(s->tuple[i], leaf);
    leaf -= (int)n;
  }
  return NULL;
}

int se_leaf_offset(const hk_shape *s, int64_t index) {
  int off = 0;
  for (int64_t i = 0; s->elem == HK_TUPLE && i < index && i < s->n_tuple; i++)
    off += (int)hk_shape_leaf_count(s->tuple[i]);
  return off;
}

const hk_shape *se_box_shape(se_ctx *x, hk_prim elem, const se_box *b) {
  return hk_shape_array_no_layout(x->scratch, elem, b->rank, b->n);
}

hk_value *se_value_of_box(hk_prim elem, const se_box *b) {
  return hk_value_new_array(elem, b->rank, b->n);
}

void se_copy_box(hk_value *dst, const se_box *db, const hk_value *src, const se_box *sb) {
  int r = db->rank;
  int64_t lo[SE_MAX_RANK] = {0}, n[SE_MAX_RANK] = {0}, dst_st[SE_MAX_RANK], src_st[SE_MAX_RANK];
  for (int d = 0; d < r; d++) {
    lo[d] = db->lo[d] > sb->lo[d] ? db->lo[d] : sb->lo[d];
    int64_t hi_d = db->lo[d] + db->n[d], hi_s = sb->lo[d] + sb->n[d];
    n[d] = (hi_d < hi_s ? hi_d : hi_s) - lo[d];
    if (n[d] <= 0) return;
  }
  hk_strides(r, db->n, dst_st);
  hk_strides(r, sb->n, src_st);
  /* Trailing dims both boxes hold whole are one contiguous run with the
   * dim before them. */
  int k = r;
  int64_t inner = 1;
  while (k > 0) {
    k--;
    inner *= n[k];
    if (n[k] != db->n[k] || n[k] != sb->n[k]) break;
  }
  int es = hk_esize(dst->elem);
  int64_t total = 1, idx[SE_MAX_RANK] = {0};
  for (int d = 0; d < k; d++) total *= n[d];
  for (int64_t j = 0; j < total; j++) {
    int64_t od = 0, os = 0;
    for (int d = 0; d < r; d++) {
      int64_t i = d < k ? idx[d] : 0;
      od += (lo[d] + i - db->lo[d]) * dst_st[d];
      os += (lo[d] + i - sb->lo[d]) * src_st[d];
    }
    memcpy((uint8_t *)dst->data + od * es, (const uint8_t *)src->data + os * es, (size_t)(inner * es));
    for (int d = k - 1; d >= 0; d--) {
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
    }
  }
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

hk_status *se_check_time(se_ctx *x, const hk_instr *ins) {
  if (!x->deadline_ns || (++x->polls & 63)) return NULL;
  if (now_ns() < x->deadline_ns) return NULL;
  return hk_eval_error(ins, HK_FAILED_PRECONDITION, "sampled evaluation ran out of time");
}

/* ---- the memo --------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t request_hash(int64_t frame, const hk_instr *ins, int leaf, const se_box *b) {
  uint64_t h = mix(mix(mix(0, (uint64_t)frame), (uint64_t)(uintptr_t)ins), (uint64_t)leaf);
  for (int d = 0; d < b->rank; d++) h = mix(mix(h, (uint64_t)b->lo[d]), (uint64_t)b->n[d]);
  return h ? h : 1;
}

static bool entry_matches(const se_entry *e, uint64_t h, int64_t frame, const hk_instr *ins,
                          int leaf, const se_box *b) {
  if (e->hash != h || e->frame != frame || e->ins != ins || e->leaf != leaf || e->key[0] != b->rank)
    return false;
  for (int d = 0; d < b->rank; d++)
    if (e->key[1 + d] != b->lo[d] || e->key[1 + b->rank + d] != b->n[d]) return false;
  return true;
}

static se_entry *memo_find(se_memo *m, uint64_t h, int64_t frame, const hk_instr *ins, int leaf,
                           const se_box *b) {
  if (!m->cap) return NULL;
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    se_entry *e = &m->e[i];
    if (!e->hash) return NULL;
    if (entry_matches(e, h, frame, ins, leaf, b)) return e;
  }
}

static void memo_place(se_memo *m, se_entry *src) {
  for (size_t i = src->hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
    if (!m->e[i].hash) {
      m->e[i] = *src;
      return;
    }
}

static void memo_grow(se_memo *m) {
  size_t old = m->cap;
  se_entry *e = m->e;
  m->cap = old ? old * 2 : 4096;
  m->e = calloc(m->cap, sizeof *m->e);
  if (!m->e) hk_out_of_memory();
  for (size_t i = 0; i < old; i++)
    if (e[i].hash) memo_place(m, &e[i]);
  free(e);
}

static void memo_put(se_memo *m, uint64_t h, int64_t frame, const hk_instr *ins, int leaf,
                     const se_box *b, hk_value *v) {
  if ((m->n + 1) * 2 > m->cap) memo_grow(m);
  se_entry e = {h, frame, ins, leaf, malloc((size_t)(1 + 2 * b->rank) * sizeof(int64_t)),
                hk_value_retain(v)};
  if (!e.key) hk_out_of_memory();
  e.key[0] = b->rank;
  for (int d = 0; d < b->rank; d++) {
    e.key[1 + d] = b->lo[d];
    e.key[1 + b->rank + d] = b->n[d];
  }
  memo_place(m, &e);
  m->n++;
  /* A value another entry already holds (a pass-through) costs no memory. */
  m->bytes += (v->refcount <= 2 ? v->nbytes : 0) + 96;
}

void se_memo_store(se_ctx *x, const se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                   hk_value *v) {
  int64_t fid = ins->opcode == HK_OP_CONSTANT ? -1 : f->id;
  uint64_t h = request_hash(fid, ins, leaf, b);
  if (!memo_find(&x->memo, h, fid, ins, leaf, b)) memo_put(&x->memo, h, fid, ins, leaf, b, v);
}

/* Drops every entry of m, keeping its table. */
static void memo_empty(se_memo *m) {
  if (!m->n) return;
  for (size_t i = 0; i < m->cap; i++)
    if (m->e[i].hash) {
      hk_value_release(m->e[i].v);
      free(m->e[i].key);
    }
  memset(m->e, 0, m->cap * sizeof *m->e);
  m->n = 0;
  m->bytes = 0;
}

/* Drops every entry of m and its table. */
static void memo_clear(se_memo *m) {
  memo_empty(m);
  free(m->e);
  memset(m, 0, sizeof *m);
}

void se_part_begin(se_ctx *x) { x->transient++; }

void se_part_end(se_ctx *x) {
  if (--x->transient == 0) memo_empty(&x->part_memo);
}

void se_ctx_trim(se_ctx *x) {
  if (x->memo.bytes > x->memo_limit) memo_clear(&x->memo);
}

/* ---- frames ------------------------------------------------------------------ */

static se_frame *frame_new(se_ctx *x, int64_t replica, int64_t partition, const hk_computation *c) {
  se_frame *f = calloc(1, sizeof *f);
  if (!f) hk_out_of_memory();
  f->id = x->next_frame_id++;
  f->replica = replica;
  f->partition = partition;
  f->comp = c;
  return f;
}

se_frame *se_entry_frame(se_ctx *x, int64_t device) {
  if (!x->entry[device])
    x->entry[device] = frame_new(x, device / x->num_partitions, device % x->num_partitions, x->m->entry);
  return x->entry[device];
}

se_frame *se_child_frame(se_ctx *x, se_frame *parent, const hk_instr *site,
                         const hk_computation *comp, int64_t iter) {
  for (se_frame *c = parent->children; c; c = c->next_sibling)
    if (c->site == site && c->comp == comp && c->iter == iter) return c;
  se_frame *c = frame_new(x, parent->replica, parent->partition, comp);
  c->parent = parent;
  c->site = site;
  c->iter = iter;
  c->next_sibling = parent->children;
  parent->children = c;
  return c;
}

se_frame *se_peer_frame(se_ctx *x, const se_frame *f, int64_t device) {
  if (!f->parent) return se_entry_frame(x, device);
  return se_child_frame(x, se_peer_frame(x, f->parent, device), f->site, f->comp, f->iter);
}

static void frame_free(se_frame *f) {
  while (f) {
    se_frame *next = f->next_sibling;
    frame_free(f->children);
    for (se_trip *t = f->trips; t;) {
      se_trip *n = t->next;
      free(t);
      t = n;
    }
    free(f);
    f = next;
  }
}

/* ---- context ------------------------------------------------------------------- */

hk_status *se_ctx_init(se_ctx *x, const hk_module *m, const hk_module *global, bool partitioned,
                       int64_t num_partitions, int64_t num_replicas, uint64_t seed) {
  memset(x, 0, sizeof *x);
  if (!m->entry || !global->entry) return hk_error(HK_INVALID_ARGUMENT, "module without an entry computation");
  if (m->entry->n_params != global->entry->n_params)
    return hk_error(HK_INVALID_ARGUMENT, "the partitioned entry takes %d parameters, the global one %d",
                    m->entry->n_params, global->entry->n_params);
  x->m = m;
  x->global = global;
  x->partitioned = partitioned;
  x->num_partitions = num_partitions;
  x->num_replicas = num_replicas;
  x->seed = seed;
  x->memo_limit = (int64_t)768 << 20;
  x->request_limit = (int64_t)1 << 26;
  x->param_sharding = calloc((size_t)(m->entry->n_params + 1), sizeof *x->param_sharding);
  x->entry = calloc((size_t)(num_partitions * num_replicas), sizeof *x->entry);
  if (!x->param_sharding || !x->entry) hk_out_of_memory();
  for (int i = 0; partitioned && i < m->entry->n_params; i++) x->param_sharding[i] = hk_spmd_parameter_sharding(global, m, i);
  x->scratch = hk_module_new("sample_scratch");
  HK_TRY(hk_eval_plan_build(m, &x->plan));
  HK_TRY(hk_device_ctx_init(&x->dev, x->plan, &x->dev_opts));
  x->dev.num_partitions = num_partitions;
  x->dev.num_replicas = num_replicas;
  return NULL;
}

void se_ctx_free(se_ctx *x) {
  memo_clear(&x->memo);
  memo_clear(&x->part_memo);
  for (int64_t d = 0; x->entry && d < x->num_partitions * x->num_replicas; d++) frame_free(x->entry[d]);
  while (x->groups) {
    se_groups *g = x->groups;
    x->groups = g->next;
    free(g->group_of);
    free(g->rank_of);
    free(g->start);
    free(g->members);
    free(g);
  }
  if (x->plan) hk_device_ctx_free(&x->dev);
  hk_eval_plan_free(x->plan);
  hk_module_free(x->scratch);
  free(x->entry);
  free(x->param_sharding);
  memset(x, 0, sizeof *x);
}

/* ---- routing through tuples and computations ---------------------------------- */

hk_status *se_operand(se_ctx *x, se_frame *f, const hk_instr *ins, int k, const se_box *b,
                      hk_value **out) {
  return se_eval(x, f, ins->operands[k], 0, b, out);
}

hk_status *se_scalar_i64(se_ctx *x, se_frame *f, const hk_instr *ins, int k, int64_t *out) {
  const hk_instr *o = ins->operands[k];
  if (o->shape->elem == HK_TUPLE || o->shape->rank != 0)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d is not a scalar", k);
  se_box b = {0};
  hk_value *v;
  HK_TRY(se_eval(x, f, o, 0, &b, &v));
  *out = hk_value_get_i64(v, 0);
  hk_value_release(v);
  return NULL;
}

static hk_status *route_tuple(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                              const se_box *b, hk_value **out) {
  for (int k = 0; k < ins->n_operands; k++) {
    int n = (int)hk_shape_leaf_count(ins->operands[k]->shape);
    if (leaf < n) return se_eval(x, f, ins->operands[k], leaf, b, out);
    leaf -= n;
  }
  return hk_eval_error(ins, HK_INTERNAL, "tuple leaf out of range");
}

static hk_status *route_gte(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                            const se_box *b, hk_value **out) {
  int64_t idx = ins->attrs ? ins->attrs->tuple_index : 0;
  const hk_instr *t = ins->operands[0];
  return se_eval(x, f, t, leaf + se_leaf_offset(t->shape, idx), b, out);
}

static hk_status *trip_count(se_ctx *x, se_frame *f, const hk_instr *loop, int64_t *out) {
  for (se_trip *t = f->trips; t; t = t->next)
    if (t->site == loop) {
      *out = t->count;
      return NULL;
    }
  const hk_computation *cond = loop->called[0];
  se_box scalar = {0};
  int64_t k = 0;
  for (;; k++) {
    if (k > 1000000) return hk_eval_error(loop, HK_UNIMPLEMENTED, "more than 10^6 iterations");
    hk_value *p;
    HK_TRY(se_eval(x, se_child_frame(x, f, loop, cond, k), cond->root, 0, &scalar, &p));
    bool go = hk_value_get_i64(p, 0) != 0;
    hk_value_release(p);
    if (!go) break;
  }
  se_trip *t = calloc(1, sizeof *t);
  if (!t) hk_out_of_memory();
  *t = (se_trip){loop, k, f->trips};
  f->trips = t;
  *out = k;
  return NULL;
}

static hk_status *route_while(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                              const se_box *b, hk_value **out) {
  if (ins->n_called < 2) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "while without condition and body");
  int64_t n;
  HK_TRY(trip_count(x, f, ins, &n));
  if (n == 0) return se_eval(x, f, ins->operands[0], leaf, b, out);
  const hk_computation *body = ins->called[1];
  return se_eval(x, se_child_frame(x, f, ins, body, n - 1), body->root, leaf, b, out);
}

static hk_status *route_conditional(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                    const se_box *b, hk_value **out) {
  int64_t sel;
  HK_TRY(se_scalar_i64(x, f, ins, 0, &sel));
  int64_t branch;
  if (ins->operands[0]->shape->elem == HK_PRED) branch = sel ? 0 : 1;
  else branch = sel < 0 || sel >= ins->n_called ? ins->n_called - 1 : sel;
  if (branch < 0 || branch >= ins->n_called) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "no branch");
  const hk_computation *c = ins->called[branch];
  return se_eval(x, se_child_frame(x, f, ins, c, branch), c->root, leaf, b, out);
}

static hk_status *route_call(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                             const se_box *b, hk_value **out) {
  if (ins->n_called < 1) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "no called computation");
  const hk_computation *c = ins->called[0];
  return se_eval(x, se_child_frame(x, f, ins, c, 0), c->root, leaf, b, out);
}

/* async-done: the result of the computation its async-start wraps (through
 * any async-update), evaluated in a frame of that start. */
static hk_status *route_async_done(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                   const se_box *b, hk_value **out) {
  const hk_instr *start = ins->n_operands == 1 ? ins->operands[0] : NULL;
  while (start && start->opcode == HK_OP_ASYNC_UPDATE && start->n_operands == 1) start = start->operands[0];
  if (!start || start->opcode != HK_OP_ASYNC_START || start->n_called < 1)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "sampled async-done needs its async-start");
  const hk_computation *c = start->called[0];
  return se_eval(x, se_child_frame(x, f, start, c, 0), c->root, leaf, b, out);
}

/* A parameter of a callee frame: the call site's operand, or for a while
 * loop the previous iteration's body result. */
static hk_status *route_parameter(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                  const se_box *b, hk_value **out) {
  if (!f->parent) return se_op_parameter_entry(x, f, ins, leaf, b, out);
  const hk_instr *site = f->site;
  int64_t num = hk_instr_parameter_number(ins);
  switch ((hk_opcode)site->opcode) {
    case HK_OP_WHILE:
      if (f->iter == 0) return se_eval(x, f->parent, site->operands[0], leaf, b, out);
      return se_eval(x, se_child_frame(x, f->parent, site, site->called[1], f->iter - 1),
                     site->called[1]->root, leaf, b, out);
    case HK_OP_CONDITIONAL:
      return se_eval(x, f->parent, site->operands[f->iter + 1], leaf, b, out);
    default:
      if (num < 0 || num >= site->n_operands)
        return hk_eval_error(ins, HK_INVALID_ARGUMENT, "parameter %lld of a call with %d operands",
                             (long long)num, site->n_operands);
      return se_eval(x, f->parent, site->operands[num], leaf, b, out);
  }
}

static hk_status *route_same(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                             const se_box *b, hk_value **out) {
  return se_eval(x, f, ins->operands[0], leaf, b, out);
}

/* ---- dispatch -------------------------------------------------------------------- */

/* Identity custom calls (Sharding, barriers, host offloading moves) pass
 * their operand on where it has the result's shape. */
static bool is_identity_custom_call(const hk_instr *ins) {
  const char *t = ins->attrs ? ins->attrs->custom_call_target : NULL;
  return ins->n_operands == 1 && hk_eval_identity_custom_call(t) &&
         hk_shape_compatible(ins->operands[0]->shape, ins->shape);
}

static se_op_fn op_for(const hk_instr *ins) {
  switch ((hk_opcode)ins->opcode) {
    case HK_OP_PARAMETER: return route_parameter;
    case HK_OP_TUPLE: return route_tuple;
    case HK_OP_GET_TUPLE_ELEMENT: return route_gte;
    case HK_OP_WHILE: return route_while;
    case HK_OP_CONDITIONAL: return route_conditional;
    case HK_OP_CALL: case HK_OP_FUSION: return route_call;
    case HK_OP_ASYNC_DONE: return route_async_done;
    case HK_OP_COPY: case HK_OP_OPTIMIZATION_BARRIER: case HK_OP_ADD_DEPENDENCY:
    case HK_OP_DOMAIN: return route_same;
    case HK_OP_CUSTOM_CALL:
      return is_identity_custom_call(ins) ? route_same : hk_eval_is_host_execute(ins) ? route_call : NULL;
    case HK_OP_CONSTANT: return se_op_constant;
    case HK_OP_IOTA: return se_op_iota;
    case HK_OP_PARTITION_ID: case HK_OP_REPLICA_ID: return se_op_device_id;
    case HK_OP_BROADCAST: case HK_OP_RESHAPE: case HK_OP_BITCAST: case HK_OP_TRANSPOSE:
    case HK_OP_SLICE: case HK_OP_DYNAMIC_SLICE: case HK_OP_DYNAMIC_UPDATE_SLICE: case HK_OP_PAD:
    case HK_OP_CONCATENATE: case HK_OP_REVERSE:
      return se_op_move;
    case HK_OP_GATHER: return se_op_gather;
    case HK_OP_SCATTER: return se_op_scatter;
    case HK_OP_DOT: return se_op_dot;
    case HK_OP_RAGGED_DOT: return se_op_ragged_dot;
    case HK_OP_CONVOLUTION: return se_op_convolution;
    case HK_OP_REDUCE: return se_op_reduce;
    case HK_OP_REDUCE_WINDOW: return se_op_reduce_window;
    case HK_OP_SELECT_AND_SCATTER: return se_op_select_and_scatter;
    case HK_OP_SORT: return se_op_sort;
    case HK_OP_CHOLESKY: case HK_OP_TRIANGULAR_SOLVE: return se_op_solve;
    case HK_OP_BATCH_NORM_TRAINING: case HK_OP_BATCH_NORM_INFERENCE: case HK_OP_BATCH_NORM_GRAD:
      return se_op_batch_norm;
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_REDUCE_SCATTER:
    case HK_OP_ALL_TO_ALL: case HK_OP_COLLECTIVE_PERMUTE: case HK_OP_RAGGED_ALL_TO_ALL:
      return se_op_collective;
    case HK_OP_CONVERT: case HK_OP_BITCAST_CONVERT: case HK_OP_REDUCE_PRECISION:
      return se_op_elementwise;
    default:
      return hk_opcode_is_elementwise((hk_opcode)ins->opcode) ? se_op_elementwise : NULL;
  }
}

/* Constants do not depend on the device or call path: one memo entry. */
static int64_t memo_frame(const se_frame *f, const hk_instr *ins) {
  return ins->opcode == HK_OP_CONSTANT ? -1 : f->id;
}

hk_status *se_eval(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                   hk_value **out) {
  const hk_shape *ls = se_leaf_shape(ins->shape, leaf);
  if (!ls || !hk_shape_is_array(ls))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "sampled evaluation of a non-array leaf %d", leaf);
  if (b->rank != ls->rank || b->rank > SE_MAX_RANK)
    return hk_eval_error(ins, HK_INTERNAL, "box of rank %d for a rank-%d value", b->rank, ls->rank);
  int64_t count = se_box_count(b);
  if (count == 0) {
    *out = se_value_of_box((hk_prim)ls->elem, b);
    return NULL;
  }
  if (count > x->request_limit)
    return hk_eval_error(ins, HK_UNIMPLEMENTED,
                         "a sampled element needs %lld elements of this value (limit %lld)",
                         (long long)count, (long long)x->request_limit);
  int64_t fid = memo_frame(f, ins);
  uint64_t h = request_hash(fid, ins, leaf, b);
  se_entry *e = memo_find(&x->memo, h, fid, ins, leaf, b);
  if (!e && x->transient) e = memo_find(&x->part_memo, h, fid, ins, leaf, b);
  if (e) {
    *out = hk_value_retain(e->v);
    return NULL;
  }
  HK_TRY(se_check_time(x, ins));
  se_op_fn fn = op_for(ins);
  if (!fn)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "the sampled evaluator does not support %s",
                         hk_opcode_name((hk_opcode)ins->opcode));
  hk_value *v = NULL;
  HK_TRY(fn(x, f, ins, leaf, b, &v));
  if (v->elem != ls->elem || v->n != count) {
    hk_value_release(v);
    return hk_eval_error(ins, HK_INTERNAL, "sampled op gave %lld %s elements, wanted %lld %s",
                         (long long)v->n, hk_prim_name((hk_prim)v->elem), (long long)count,
                         hk_prim_name((hk_prim)ls->elem));
  }
  /* An entry parameter is a pure function of the global index, cheaper to
   * make again than to hold: a big box of one is not kept (a dot reading
   * a weight in slices then never holds the whole weight); a big box made
   * for one part of a dot is kept only until the part ends. */
  if (!(ins->opcode == HK_OP_PARAMETER && !f->parent && count > SE_REMAKE_ELEMENTS))
    memo_put(x->transient && count > SE_REMAKE_ELEMENTS ? &x->part_memo : &x->memo, h, fid, ins, leaf, b, v);
  *out = v;
  return NULL;
}
