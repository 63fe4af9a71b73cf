/* run.c - the propagation driver (XLA's ShardingPropagation::Run):
 * preprocessing (metadata, Sharding custom calls, shard groups, entry
 * parameters and outputs), the fixed-point loop over aggressiveness levels
 * 0..3 with forward and backward sweeps, and the post-processing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prop.h"

#define CSE_PREVENTION "_sharding_propagation_cse_prevention"

typedef struct comp_order {
  hk_computation *c;
  hk_instr **order;                   /* operands before users; NULL = removed */
  int64_t n, base;                    /* slots info[base .. base + n) follow order */
  bool has_sharding_cc;
} comp_order;

typedef struct group {
  int64_t id;
  uint8_t kind;
  int32_t n, cap;
  hk_instr **members;
} group;

typedef struct instr_list {
  int64_t n, cap;
  hk_instr **v;
} instr_list;

typedef struct run_state {
  prop_ctx cx;
  int32_t n_comps;
  comp_order *comps;
  int32_t n_groups, cap_groups;
  group *groups;
  instr_list broadcasts, control_flow;
  bool any_changed;
  const hk_sharding *saved_root;      /* entry root sharding as given */
  const hk_sharding **saved_params;   /* entry parameter shardings as given */
} run_state;

static void list_push(instr_list *l, hk_instr *i) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->v = realloc(l->v, sizeof *l->v * (size_t)l->cap);
    if (!l->v) hk_out_of_memory();
  }
  l->v[l->n++] = i;
}

/* ---- setup ----------------------------------------------------------------------- */

/* c's walk order, its list when that is topological (the usual case),
 * else its post order; the instructions get consecutive slots in it. */
static void assign_order(run_state *rs, comp_order *co, int64_t base) {
  co->base = base;
  if (hk_computation_list_is_topological(co->c)) {
    co->n = co->c->n_instrs;
    co->order = hk_check_alloc(malloc(sizeof *co->order * (size_t)(co->n ? co->n : 1)));
    int64_t k = 0;
    for (hk_instr *i = co->c->first; i; i = i->next) co->order[k++] = i;
  } else {
    co->order = hk_computation_post_order(co->c, &co->n);
  }
  for (int64_t k = 0; k < co->n; k++) {
    pi_info *p = &rs->cx.info[base + k];
    p->instr = co->order[k];
    co->order[k]->scratch = p;
  }
}

static void prepare_instr(run_state *rs, comp_order *co, hk_instr *i);

static void alloc_info(run_state *rs, hk_module *m, const hk_exec_threads *threads) {
  int64_t n = 0;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    c->scratch = NULL;
    if (hk_exec_threads_include(threads, c)) n += c->n_instrs;
    else
      for (hk_instr *i = c->first; i; i = i->next) i->scratch = NULL;
  }
  rs->cx.info = calloc((size_t)(n ? n : 1), sizeof(pi_info));
  rs->comps = calloc((size_t)(m->n_computations ? m->n_computations : 1), sizeof(comp_order));
  if (!rs->cx.info || !rs->comps) hk_out_of_memory();
  rs->cx.n_info = n;
  int64_t at = 0;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    comp_order *co = &rs->comps[rs->n_comps++];
    co->c = c;
    assign_order(rs, co, at);
    at += co->n;
    for (int64_t j = 0; j < co->n; j++) prepare_instr(rs, co, co->order[j]);
  }
}

static void free_state(run_state *rs, hk_module *m) {
  (void)m;
  for (int32_t k = 0; k < rs->n_comps; k++) {
    rs->comps[k].c->scratch = NULL;
    free(rs->comps[k].order);
  }
  free(rs->comps);
  for (int64_t k = 0; k < rs->cx.n_info; k++) {
    free(rs->cx.info[k].unspec);
    if (rs->cx.info[k].instr) rs->cx.info[k].instr->scratch = NULL;
  }
  free(rs->cx.info);
  for (int32_t g = 0; g < rs->n_groups; g++) free(rs->groups[g].members);
  free(rs->groups);
  free(rs->broadcasts.v);
  free(rs->control_flow.v);
  free(rs->saved_params);
  for (int32_t k = 0; k < m->n_computations; k++) m->computations[k]->scratch = NULL;
}

/* ---- metadata -------------------------------------------------------------------- */

static bool has_cse_prevention(const hk_sharding *s) {
  return s && s->kind != HK_SHARDING_TUPLE && s->n_metadata == 1 && s->metadata[0].op_name &&
         strcmp(s->metadata[0].op_name, CSE_PREVENTION) == 0;
}

static const hk_sharding *with_metadata(hk_module *m, const hk_sharding *s,
                                        const hk_metadata *md) {
  if (s->kind == HK_SHARDING_TUPLE) {
    const hk_sharding **el = malloc(sizeof *el * (size_t)(s->n_elems ? s->n_elems : 1));
    if (!el) hk_out_of_memory();
    for (int k = 0; k < s->n_elems; k++) el[k] = with_metadata(m, s->elems[k], md);
    const hk_sharding *r = hk_sharding_tuple(m, s->n_elems, el);
    free(el);
    return r;
  }
  if (s->n_metadata > 0) return s;
  hk_sharding t = *s;
  t.n_metadata = 1;
  t.metadata = md;
  return hk_sharding_intern(m, &t);
}

static bool metadata_empty(const hk_metadata *md) {
  return !md->op_type && !md->op_name && !md->source_file && !md->source_line && !md->extra;
}

/* Drops CSE-prevention shardings of earlier runs; keeps or strips
 * metadata as propagate_metadata says. */
static void prepare_metadata(run_state *rs, hk_instr *i) {
  hk_module *m = rs->cx.m;
  const hk_sharding *s = i->sharding;
  if (!s) return;
  if (!rs->cx.o.cse_prevention_only && has_cse_prevention(s)) {
    hk_instr_set_sharding(i, NULL);
    rs->any_changed = true;
    return;
  }
  if (rs->cx.o.propagate_metadata) {
    const hk_metadata *md = hk_instr_metadata(i);
    if (!metadata_empty(md)) s = with_metadata(m, s, md);
  } else if (s->kind == HK_SHARDING_TUPLE || s->n_metadata > 0) {
    s = hk_sharding_without_metadata(m, s);
  }
  if (s != i->sharding) {
    hk_instr_set_sharding(i, s);
    rs->any_changed = true;
  }
}

/* ---- shard groups -------------------------------------------------------------- */

static group *group_get(run_state *rs, int64_t id, uint8_t kind) {
  for (int32_t g = 0; g < rs->n_groups; g++)
    if (rs->groups[g].id == id && rs->groups[g].kind == kind) return &rs->groups[g];
  if (rs->n_groups == rs->cap_groups) {
    rs->cap_groups = rs->cap_groups ? rs->cap_groups * 2 : 4;
    rs->groups = realloc(rs->groups, sizeof *rs->groups * (size_t)rs->cap_groups);
    if (!rs->groups) hk_out_of_memory();
  }
  group *g = &rs->groups[rs->n_groups++];
  memset(g, 0, sizeof *g);
  g->id = id;
  g->kind = kind;
  return g;
}

static void group_add(run_state *rs, hk_instr *i, int64_t id, uint8_t kind) {
  group *g = group_get(rs, id, kind);
  for (int32_t k = 0; k < g->n; k++)
    if (g->members[k] == i) return;
  if (g->n == g->cap) {
    g->cap = g->cap ? g->cap * 2 : 4;
    g->members = realloc(g->members, sizeof *g->members * (size_t)g->cap);
    if (!g->members) hk_out_of_memory();
  }
  g->members[g->n++] = i;
  pi(i)->shard_group = id;
  pi(i)->shard_group_kind = kind;
}

/* A removed instruction's group memberships pass to its replacement. */
static void group_replace(run_state *rs, const hk_instr *old, hk_instr *new_) {
  for (int32_t g = 0; g < rs->n_groups; g++)
    for (int32_t k = 0; k < rs->groups[g].n; k++)
      if (rs->groups[g].members[k] == old) {
        rs->groups[g].members[k] = new_;
        if (pi(new_)) {
          pi(new_)->shard_group = rs->groups[g].id;
          pi(new_)->shard_group_kind = rs->groups[g].kind;
        }
      }
}

/* Records i's shard group and strips it from the sharding ({unknown} means
 * "no sharding, only the group"). */
static void take_shard_group(run_state *rs, hk_instr *i) {
  const hk_sharding *s = i->sharding;
  if (!s || s->kind == HK_SHARDING_TUPLE || s->shard_group_kind == HK_SHARD_GROUP_NONE) return;
  group_add(rs, i, s->shard_group_id, s->shard_group_kind);
  hk_instr_set_sharding(i, s->kind == HK_SHARDING_UNKNOWN ? NULL
                                                       : hk_sharding_without_shard_group(rs->cx.m, s));
}

/* ---- Sharding custom calls ------------------------------------------------------ */

/* unspecified_dims=[a,b] in the backend config. */
static int parse_unspecified(const hk_instr *i, int64_t *out) {
  const char *bc = i->attrs ? i->attrs->backend_config : NULL;
  const char *p = bc ? strstr(bc, "unspecified_dims=[") : NULL;
  if (!p) return 0;
  p += strlen("unspecified_dims=[");
  int n = 0;
  while (*p && *p != ']' && n < HK_MAX_RANK) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p) break;
    out[n++] = v;
    p = end;
    while (*p == ',' || *p == ' ') p++;
  }
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      if (out[b] < out[a]) {
        int64_t t = out[a];
        out[a] = out[b];
        out[b] = t;
      }
  return n;
}

/* The folded annotation either leaves some dims open (unspecified_dims,
 * refined later) or, fully specified, also annotates an unsharded operand. */
static void record_unspecified(run_state *rs, hk_instr *ann, hk_instr *op, int nu,
                               const int64_t *unspec) {
  pi_info *p = pi(ann);
  take_shard_group(rs, ann);
  if (nu > 0) {
    p->unspec = malloc(sizeof(int64_t) * (size_t)nu);
    if (!p->unspec) hk_out_of_memory();
    memcpy(p->unspec, unspec, sizeof(int64_t) * (size_t)nu);
    p->n_unspec = nu;
  } else if (!op->sharding && ann->sharding && pi(op)) {
    hk_instr_set_sharding(op, ann->sharding);
    pi(op)->src = ann;
    pi(op)->rule = "sharding-custom-call";
  }
}

static hk_status *fold_sharding_cc(run_state *rs, hk_instr *cc) {
  hk_instr *op = cc->operands[0];
  const hk_sharding *s = cc->sharding;
  if (!s) return hk_error(HK_INVALID_ARGUMENT, "Sharding instruction '%s' must have a sharding attribute",
                          cc->name);
  bool unknown = s->kind == HK_SHARDING_UNKNOWN;
  if (unknown && s->shard_group_kind != HK_SHARD_GROUP_NONE) {
    /* {unknown shard_as N}: the operand joins the group, the call goes */
    group_add(rs, op, s->shard_group_id, s->shard_group_kind);
    bool was_root = cc->parent->root == cc;
    group_replace(rs, cc, op);
    hk_instr_replace_all_uses(cc, op);
    if (was_root) hk_computation_set_root(cc->parent, op);
    HK_TRY(hk_instr_remove(cc));
    pi(cc)->instr = NULL;
    cc->scratch = NULL;
    return NULL;
  }
  hk_instr *copy = cc;
  int64_t unspec[HK_MAX_RANK];
  int nu = parse_unspecified(cc, unspec);
  if (!rs->cx.o.cse_prevention_only) {
    copy = hk_instr_new_before(cc, HK_OP_COPY, cc->shape, 1, &op, NULL);
    copy->scratch = cc->scratch;
    pi(copy)->instr = copy;
    cc->scratch = NULL;
    hk_instr_set_sharding(copy, s);
    if (cc->attrs && cc->attrs->metadata) hk_instr_attrs(copy)->metadata = cc->attrs->metadata;
    bool was_root = cc->parent->root == cc;
    group_replace(rs, cc, copy);
    hk_instr_replace_all_uses(cc, copy);
    if (was_root) hk_computation_set_root(cc->parent, copy);
    HK_TRY(hk_instr_remove(cc));
    rs->any_changed = true;
  }
  record_unspecified(rs, copy, op, nu, unspec);
  return NULL;
}

static hk_status *process_sharding_ccs(run_state *rs) {
  for (int32_t k = 0; k < rs->n_comps; k++) {
    comp_order *co = &rs->comps[k];
    if (!co->has_sharding_cc) continue;
    hk_status *st = NULL;
    for (int64_t j = co->n - 1; j >= 0 && !st; j--) {
      hk_instr *cc = co->order[j];
      if (!cc || !prop_is_cc(cc, "Sharding")) continue;
      pi_info *slot = pi(cc);
      st = fold_sharding_cc(rs, cc);
      co->order[j] = slot->instr;        /* the copy, or NULL if removed */
    }
    if (st) return st;
  }
  return NULL;
}

/* ---- preparation ------------------------------------------------------------------ */

/* Canonical shardings, tuple shardings spread over tuple shapes, shard
 * groups taken out (Sharding custom calls keep theirs until folded). */
static void normalise_sharding(run_state *rs, hk_instr *i) {
  hk_module *m = rs->cx.m;
  if (!i->sharding) return;
  const hk_sharding *s = hk_sharding_canonical(m, i->sharding);
  if (hk_shape_is_tuple(i->shape) && s->kind != HK_SHARDING_TUPLE &&
      s->shard_group_kind == HK_SHARD_GROUP_NONE)
    s = hk_sharding_for_shape(m, s, i->shape);
  hk_instr_set_sharding(i, s);
  if (!prop_is_cc(i, "Sharding") || rs->cx.o.cse_prevention_only) take_shard_group(rs, i);
}

static void prepare_instr(run_state *rs, comp_order *co, hk_instr *i) {
  pi(i)->shard_group = -1;
  prepare_metadata(rs, i);
  normalise_sharding(rs, i);
  if (i->opcode == HK_OP_BROADCAST) list_push(&rs->broadcasts, i);
  if (i->opcode == HK_OP_WHILE || i->opcode == HK_OP_CONDITIONAL || i->opcode == HK_OP_CALL)
    list_push(&rs->control_flow, i);
  if (i->opcode == HK_OP_CUSTOM_CALL && prop_is_cc(i, "Sharding")) co->has_sharding_cc = true;
}

static bool output_allowed(const prop_ctx *cx, int64_t k) {
  if (cx->o.n_out == 1) return cx->o.out[0];
  return k < cx->o.n_out && cx->o.out[k];
}

/* Marks user annotations as provided (never changed), except entry
 * parameters and outputs propagation may refine. */
static void mark_provided(run_state *rs, hk_module *m) {
  for (int64_t k = 0; k < rs->cx.n_info; k++) {
    if (rs->cx.info[k].dir != HK_PROP_DIR_COMPUTATION) rs->cx.info[k].dir = HK_PROP_DIR_NONE;
    rs->cx.info[k].level = -1;
  }
  for (int64_t k = 0; k < rs->cx.n_info; k++) {
    pi_info *p = &rs->cx.info[k];
    if (!p->instr || !p->instr->sharding) continue;
    /* XLA never counts a parameter as provided (entry ones follow below) */
    p->provided = p->instr->opcode != HK_OP_PARAMETER;
    if (p->dir == HK_PROP_DIR_COMPUTATION) continue;   /* copied from a related instruction */
    p->dir = HK_PROP_DIR_PROVIDED;
    p->rule = "annotation";
  }
  hk_computation *e = m->entry;
  if (!e || !pi(e->root)) return;
  rs->saved_root = e->root->sharding;
  rs->saved_params = calloc((size_t)(e->n_params ? e->n_params : 1), sizeof *rs->saved_params);
  if (!rs->saved_params) hk_out_of_memory();
  for (int32_t k = 0; k < e->n_params; k++) {
    if (!e->params[k]) continue;
    rs->saved_params[k] = e->params[k]->sharding;
    pi(e->params[k])->provided = e->params[k]->sharding && !prop_param_allowed(&rs->cx, e, k);
  }
  if (rs->cx.allow_out_any) pi(e->root)->provided = false;
  else pi(e->root)->provided = true;
}

/* ---- computations: while / conditional / call --------------------------------------- */

static int related(hk_instr *ci, hk_instr **out) {
  int n = 0;
  out[n++] = ci;
  if (ci->opcode == HK_OP_WHILE && ci->n_called == 2) {
    out[n++] = ci->called[1]->root;
    if (ci->called[1]->n_params > 0) out[n++] = ci->called[1]->params[0];
    if (ci->called[0]->n_params > 0) out[n++] = ci->called[0]->params[0];
  } else if (ci->opcode == HK_OP_CONDITIONAL) {
    for (int32_t b = 0; b < ci->n_called && n < 62; b++) out[n++] = ci->called[b]->root;
  } else if (ci->opcode == HK_OP_CALL && ci->n_called == 1) {
    out[n++] = ci->called[0]->root;
  }
  return n;
}

/* The parameters of u's callees that receive operand i (conditional
 * branches, call targets) read i too: look at them again. */
static void clear_callee_params(const hk_instr *u, const hk_instr *i) {
  for (int32_t k = 0; k < u->n_operands; k++) {
    if (u->operands[k] != i) continue;
    const hk_computation *c = NULL;
    int64_t pn = k;
    if (u->opcode == HK_OP_CALL && u->n_called > 0) c = u->called[0];
    if (u->opcode == HK_OP_CONDITIONAL && k >= 1 && k - 1 < u->n_called) {
      c = u->called[k - 1];
      pn = 0;
    }
    if (c && pn < c->n_params && c->params[pn] && pi(c->params[pn]))
      pi(c->params[pn])->fwd_done = false;
  }
}

static void clear_cache(hk_instr *i) {
  for (int32_t k = 0; k < i->n_operands; k++)
    if (pi(i->operands[k])) pi(i->operands[k])->bwd_done = false;
  for (int32_t k = 0; k < i->n_users; k++) {
    hk_instr *u = i->users[k];
    if (pi(u)) pi(u)->fwd_done = false;
    if (u->opcode == HK_OP_CONDITIONAL || u->opcode == HK_OP_CALL) clear_callee_params(u, i);
  }
}

static void computation_propagation(run_state *rs, hk_instr *i, int depth);

/* XLA's MaybeComputationPropagation over one related set: every member
 * not annotated by the user takes from's sharding. */
static void propagate_among(run_state *rs, hk_instr **rel, int n, hk_instr *from, const char *rule,
                            int depth) {
  bool member = false;
  for (int k = 0; k < n; k++) member |= rel[k] == from;
  if (!member || !from->sharding) return;
  for (int k = 0; k < n; k++) {
    hk_instr *r = rel[k];
    if (r == from || !pi(r) || pi(r)->provided || r->sharding == from->sharding) continue;
    int saved = rs->cx.cur_dir;
    rs->cx.cur_dir = HK_PROP_DIR_COMPUTATION;
    prop_set(&rs->cx, r, sa_tuple_of(rs->cx.m, r->shape, from->sharding), from, rule);
    rs->cx.cur_dir = saved;
    clear_cache(r);
    computation_propagation(rs, r, depth + 1);
  }
}

static void propagate_to_related(run_state *rs, hk_instr *ci, hk_instr *from, int depth) {
  hk_instr *rel[64];
  int n = related(ci, rel);
  propagate_among(rs, rel, n, from, hk_opcode_name((hk_opcode)ci->opcode), depth);
}

/* A parameter of a call target or conditional branch and the caller's
 * operand it receives (XLA's GetRelatedInstructions of a parameter). */
static void propagate_param_operand(run_state *rs, hk_instr *param, hk_instr *caller, int depth) {
  int64_t k = -1;
  if (caller->opcode == HK_OP_CALL) {
    k = hk_instr_parameter_number(param);
  } else {
    for (int32_t b = 0; b < caller->n_called && k < 0; b++)
      if (caller->called[b] == param->parent) k = b + 1;
  }
  if (k < 0 || k >= caller->n_operands) return;
  hk_instr *rel[2] = {param, caller->operands[k]};
  propagate_among(rs, rel, 2, param, "called-parameter", depth);
}

static void computation_propagation(run_state *rs, hk_instr *i, int depth) {
  if (depth > 16) return;
  if (i->opcode == HK_OP_WHILE || i->opcode == HK_OP_CONDITIONAL || i->opcode == HK_OP_CALL)
    propagate_to_related(rs, i, i, depth);
  if (i->opcode == HK_OP_PARAMETER || i->parent->root == i) {
    hk_instr *caller = prop_caller(i->parent);
    if (!caller) return;
    propagate_to_related(rs, caller, i, depth);
    if (i->opcode == HK_OP_PARAMETER &&
        (caller->opcode == HK_OP_CALL || caller->opcode == HK_OP_CONDITIONAL))
      propagate_param_operand(rs, i, caller, depth);
  }
}

static void map_computations(run_state *rs) {
  for (int64_t k = 0; k < rs->control_flow.n; k++) {
    hk_instr *i = rs->control_flow.v[k];
    {
      if (i->opcode == HK_OP_WHILE && i->n_called == 2) {
        i->called[1]->scratch = i;
        if (!i->called[0]->scratch) i->called[0]->scratch = i;
      } else {
        for (int32_t b = 0; b < i->n_called; b++) i->called[b]->scratch = i;
      }
      hk_instr *rel[64];
      int n = related(i, rel);
      const hk_instr *sharded = NULL;
      for (int r = 0; r < n && !sharded; r++)
        if (rel[r]->sharding) sharded = rel[r];
      if (!sharded) continue;
      for (int r = 0; r < n; r++) {
        if (rel[r] == sharded || !pi(rel[r])) continue;
        hk_instr_set_sharding(rel[r], sa_tuple_of(rs->cx.m, rel[r]->shape, sharded->sharding));
        pi(rel[r])->src = sharded;   /* explain: copied, not annotated */
        pi(rel[r])->rule = hk_opcode_name((hk_opcode)i->opcode);
        pi(rel[r])->dir = HK_PROP_DIR_COMPUTATION;
      }
    }
  }
}

/* ---- unspecified dims (Sharding custom calls with unspecified_dims) ------------------- */

static bool refine_unspecified(run_state *rs, hk_instr *i, const hk_sharding *from,
                               const hk_instr *src) {
  pi_info *p = pi(i);
  if (!from || from->kind != HK_SHARDING_TILED || !i->sharding) return false;
  const hk_sharding *partial =
      hk_sharding_replicate_all_except(rs->cx.m, from, p->n_unspec, p->unspec);
  if (!partial || partial->kind != HK_SHARDING_TILED) return false;
  const hk_sharding *s = i->sharding;
  if (!sa_merge_compatible(rs->cx.m, partial, sa_num_tiles(s) + 1, &s)) return false;
  if (hk_sharding_equivalent(s, i->sharding)) return false;
  return prop_set(&rs->cx, i, s, src, "unspecified-dims");
}

/* The manual conversion refined together with annotation i: its only
 * user when that is SPMDFullToShardShape / SPMDShardToFullShape.  false
 * when the conversion's unspecified dims differ (then nothing is refined). */
static bool conversion_after(const hk_instr *i, hk_instr **conv) {
  *conv = NULL;
  if (i->n_users != 1) return true;
  hk_instr *u = i->users[0];
  if (!prop_is_cc(u, "SPMDFullToShardShape") && !prop_is_cc(u, "SPMDShardToFullShape")) return true;
  int64_t dims[HK_MAX_RANK];
  int n = parse_unspecified(u, dims);
  if (n != pi(i)->n_unspec || memcmp(dims, pi(i)->unspec, sizeof(int64_t) * (size_t)n)) return false;
  *conv = u;
  return true;
}

/* Annotation i and conversion conv refined from `from`: from_auto says
 * whether `from` is on the auto side of the pair. */
static bool refine_pair(run_state *rs, hk_instr *i, hk_instr *conv, const hk_sharding *from,
                        bool from_auto, const hk_instr *src) {
  bool to_manual = prop_is_cc(conv, "SPMDFullToShardShape");
  hk_instr *auto_i = to_manual ? i : conv, *man_i = to_manual ? conv : i;
  if (!auto_i->sharding || !man_i->sharding) return false;
  const hk_sharding *a = auto_i->sharding, *mn = man_i->sharding;
  pi_info *p = pi(i);
  bool ok = from_auto ? prop_refine_from_auto(rs->cx.m, from, p->n_unspec, p->unspec, &a, &mn)
                      : prop_refine_from_manual(rs->cx.m, from, p->n_unspec, p->unspec, &a, &mn);
  if (!ok) return false;
  bool changed = false;
  if (!hk_sharding_equivalent(a, auto_i->sharding)) changed |= prop_set(&rs->cx, auto_i, a, src, "unspecified-dims");
  if (!hk_sharding_equivalent(mn, man_i->sharding)) changed |= prop_set(&rs->cx, man_i, mn, src, "unspecified-dims");
  if (changed && pi(conv)) clear_cache(conv);
  return changed;
}

static bool unspecified_from_operand(run_state *rs, hk_instr *i) {
  const hk_instr *op = i->operands[0];
  if (!op->sharding || op->sharding->kind != HK_SHARDING_TILED) return false;
  hk_instr *conv;
  if (!conversion_after(i, &conv)) return false;
  if (!conv) return refine_unspecified(rs, i, op->sharding, op);
  /* the operand is on the annotation's side: auto before SPMDFullToShardShape */
  return refine_pair(rs, i, conv, op->sharding, prop_is_cc(conv, "SPMDFullToShardShape"), op);
}

static bool unspecified_from_users(run_state *rs, hk_instr *i) {
  hk_instr *conv;
  if (!conversion_after(i, &conv)) return false;
  const hk_instr *from = conv ? conv : i;
  bool changed = false;
  for (int32_t k = 0; k < from->n_users; k++) {
    const hk_instr *u = from->users[k];
    if (!u->sharding || u->sharding->kind != HK_SHARDING_TILED) continue;
    const char *rule;
    const hk_sharding *s = prop_sharding_from_user(&rs->cx, from, u, &rule);
    if (!s || s->kind != HK_SHARDING_TILED) continue;
    if (!conv) changed |= refine_unspecified(rs, i, s, u);
    /* users of SPMDShardToFullShape are on the auto side */
    else changed |= refine_pair(rs, i, conv, s, prop_is_cc(conv, "SPMDShardToFullShape"), u);
  }
  return changed;
}

/* ---- shard groups in the loop ------------------------------------------------------- */

static bool sync_group(run_state *rs, group *g) {
  bool changed = false;
  bool mc = rs->cx.o.is_spmd && rs->cx.level > 0;
  int saved = rs->cx.cur_dir;
  rs->cx.cur_dir = HK_PROP_DIR_GROUP;
  for (int32_t a = 0; a < g->n; a++) {
    hk_instr *src = g->members[a];
    if (!sa_spatial(src->sharding)) continue;
    for (int32_t b = 0; b < g->n; b++) {
      hk_instr *dst = g->members[b];
      if (dst == src || pi(dst)->provided) continue;
      if (g->kind == HK_SHARD_GROUP_LIKE && dst->sharding) continue;
      if (!hk_shape_compatible(src->shape, dst->shape) &&
          hk_shape_leaf_count(src->shape) != hk_shape_leaf_count(dst->shape))
        continue;
      if (prop_improve(&rs->cx, dst, src->sharding, mc, true, src,
                       g->kind == HK_SHARD_GROUP_AS ? "shard_as" : "shard_like")) {
        clear_cache(dst);
        computation_propagation(rs, dst, 0);
        changed = true;
      }
    }
  }
  rs->cx.cur_dir = saved;
  return changed;
}

/* ---- the fixed-point loop ------------------------------------------------------------ */

static bool forward_sweep(run_state *rs, comp_order *co, bool may_merge) {
  bool changed = false;
  rs->cx.cur_dir = HK_PROP_DIR_FORWARD;
  for (int64_t k = 0; k < co->n; k++) {
    pi_info *p = &rs->cx.info[co->base + k];
    hk_instr *i = p->instr;
    if (!i || p->fwd_done) continue;
    if (p->provided) {
      if (may_merge && p->n_unspec > 0 && unspecified_from_operand(rs, i)) {
        clear_cache(i);
        p->fwd_done = true;
        changed = true;
      }
      continue;
    }
    p->fwd_done = true;
    if (prop_infer_from_operands(&rs->cx, i)) {
      rs->any_changed = true;
      computation_propagation(rs, i, 0);
      clear_cache(i);
      changed = true;
    }
  }
  return changed;
}

static bool backward_sweep(run_state *rs, comp_order *co, bool may_merge) {
  bool changed = false;
  rs->cx.cur_dir = HK_PROP_DIR_BACKWARD;
  for (int64_t k = co->n - 1; k >= 0; k--) {
    pi_info *p = &rs->cx.info[co->base + k];
    hk_instr *i = p->instr;
    if (!i || p->bwd_done) continue;
    if (p->provided) {
      if (may_merge && p->n_unspec > 0 && unspecified_from_users(rs, i)) {
        clear_cache(i);
        p->bwd_done = true;
        changed = true;
      }
      continue;
    }
    p->bwd_done = true;
    if (prop_infer_from_users(&rs->cx, i)) {
      rs->any_changed = true;
      computation_propagation(rs, i, 0);
      clear_cache(i);
      changed = true;
    }
  }
  return changed;
}

/* Which cached "nothing to infer" results a new level invalidates.  Level
 * 1 turns on merging of partial shardings: everything is looked at again.
 * Levels 2 and 3 only open broadcasts (backward at 2, forward at 3), so
 * only broadcasts and their operands are looked at again; every other rule
 * gives at level 2 and 3 what it gave at level 1 for the same inputs. */
static void reset_caches(run_state *rs, int level) {
  if (level <= 1) {
    for (int64_t k = 0; k < rs->cx.n_info; k++)
      rs->cx.info[k].fwd_done = rs->cx.info[k].bwd_done = false;
    return;
  }
  for (int64_t k = 0; k < rs->broadcasts.n; k++) {
    hk_instr *i = rs->broadcasts.v[k];
    pi(i)->fwd_done = pi(i)->bwd_done = false;
    if (pi(i->operands[0])) pi(i->operands[0])->bwd_done = false;
  }
}

static void run_level(run_state *rs, int level) {
  rs->cx.level = level;
  reset_caches(rs, level);
  bool may_merge = rs->cx.o.is_spmd && level > 0;
  bool changed = true;
  for (int iter = 0; changed && iter < 1000; iter++) {
    changed = false;
    for (int32_t c = 0; c < rs->n_comps; c++) {
      changed |= forward_sweep(rs, &rs->comps[c], may_merge);
      changed |= backward_sweep(rs, &rs->comps[c], may_merge);
    }
    for (int32_t g = 0; g < rs->n_groups; g++) changed |= sync_group(rs, &rs->groups[g]);
    if (changed) rs->any_changed = true;
  }
}

/* ---- shard_as groups and barriers after the loop (XLA's Run) ---------------------------- */

/* XLA's FindCommonSharding: the members' shardings merged when they are all
 * compatible, else the default. */
static const hk_sharding *common_sharding(hk_module *m, const group *g, const hk_sharding *dflt) {
  const hk_sharding *common = NULL;
  for (int32_t k = 0; k < g->n; k++) {
    const hk_sharding *s = g->members[k]->sharding;
    if (!s) continue;
    if (!common) {
      common = s;
      continue;
    }
    if (hk_sharding_equivalent(common, s)) continue;
    if (!sa_merge_compatible(m, s, sa_num_tiles(common), &common)) return dflt;
  }
  return common ? common : dflt;
}

/* Every member of a shard_as group but ShardBarrierTo takes the group's
 * common sharding; the default (if the shardings disagree) is the first
 * sharded member that is not a ShardBarrierFrom. */
static void align_shard_as(run_state *rs, group *g) {
  hk_module *m = rs->cx.m;
  const hk_sharding *dflt = hk_sharding_replicated(m);
  for (int32_t k = 0; k < g->n; k++) {
    const hk_instr *i = g->members[k];
    if (i->sharding && !prop_is_cc(i, "ShardBarrierFrom") && dflt->kind == HK_SHARDING_REPLICATED)
      dflt = i->sharding;
  }
  const hk_sharding *common = common_sharding(m, g, dflt);
  rs->cx.cur_dir = HK_PROP_DIR_GROUP;
  for (int32_t k = 0; k < g->n; k++) {
    hk_instr *i = g->members[k];
    if (prop_is_cc(i, "ShardBarrierTo") || !pi(i)) continue;
    if (prop_set(&rs->cx, i, sa_tuple_of(m, i->shape, common), NULL, "shard_as")) clear_cache(i);
  }
}

static bool in_shard_as_group(const run_state *rs, const hk_instr *i) {
  for (int32_t g = 0; g < rs->n_groups; g++)
    if (rs->groups[g].kind == HK_SHARD_GROUP_AS)
      for (int32_t k = 0; k < rs->groups[g].n; k++)
        if (rs->groups[g].members[k] == i) return true;
  return false;
}

/* A ShardBarrierFrom in a shard_as group hands its sharding (merged with
 * the operand's, where compatible) back to its operand. */
static void relay_barriers(run_state *rs) {
  for (int64_t k = 0; k < rs->cx.n_info; k++) {
    hk_instr *b = rs->cx.info[k].instr;
    if (!b || !prop_is_cc(b, "ShardBarrierFrom") || !b->sharding || !in_shard_as_group(rs, b)) continue;
    hk_instr *op = b->operands[0];
    const hk_sharding *s = b->sharding;
    if (op->sharding && op->sharding->kind == HK_SHARDING_TILED)
      sa_merge_compatible(rs->cx.m, op->sharding, sa_num_tiles(s), &s);
    if (pi(op) && prop_set(&rs->cx, op, s, b, "shard-barrier")) clear_cache(op);
  }
}

/* Barriers only steer propagation: they go, their users read the operand. */
static hk_status *remove_barriers(run_state *rs) {
  for (int64_t k = 0; k < rs->cx.n_info; k++) {
    hk_instr *b = rs->cx.info[k].instr;
    if (!b || !(prop_is_cc(b, "ShardBarrierFrom") || prop_is_cc(b, "ShardBarrierTo")) || b->n_operands != 1)
      continue;
    hk_instr *op = b->operands[0];
    bool was_root = b->parent->root == b;
    group_replace(rs, b, op);
    hk_instr_replace_all_uses(b, op);
    if (was_root) hk_computation_set_root(b->parent, op);
    HK_TRY(hk_instr_remove(b));
    rs->cx.info[k].instr = NULL;
    rs->any_changed = true;
  }
  return NULL;
}

/* After the levels: shard_as groups aligned, barriers relayed, one more
 * run at the highest level (the barriers go after the entry is restored,
 * which keeps the list positions the CSE-prevention restore reads). */
static hk_status *finish_groups_and_barriers(run_state *rs) {
  bool any_as = false;
  for (int32_t g = 0; g < rs->n_groups; g++)
    if (rs->groups[g].kind == HK_SHARD_GROUP_AS) {
      align_shard_as(rs, &rs->groups[g]);
      any_as = true;
    }
  relay_barriers(rs);
  if (any_as) run_level(rs, 3);
  relay_barriers(rs);
  return NULL;
}

/* ---- post-processing ------------------------------------------------------------------- */

static bool evenly_divides(const hk_sharding *s, const hk_shape *shape) {
  if (!s) return true;
  if (hk_shape_is_tuple(shape)) {
    for (int32_t k = 0; k < shape->n_tuple; k++) {
      const hk_sharding *e = s->kind == HK_SHARDING_TUPLE && k < s->n_elems ? s->elems[k] : s;
      if (!evenly_divides(e, shape->tuple[k])) return false;
    }
    return true;
  }
  if (s->kind != HK_SHARDING_TILED) return true;
  for (int d = 0; d < shape->rank; d++)
    if (shape->dims[d] % sa_dim(s, d)) return false;
  return true;
}

/* Entry parameters and outputs: only where propagation was allowed, and
 * only shardings that divide the shape evenly. */
/* The final sharding of one leaf of an entry parameter or output: the
 * propagated one where allowed and evenly dividing, else the given one
 * (replicated if none was given). */
static const hk_sharding *entry_leaf(hk_module *m, const hk_sharding *cur, const hk_sharding *old,
                                     const hk_shape *shape, bool allowed, bool check_even) {
  if (allowed && cur && (!check_even || evenly_divides(cur, shape))) return cur;
  if (!allowed) return old;
  return old ? old : hk_sharding_replicated(m);
}

static const hk_sharding *element_or_null(hk_module *m, const hk_sharding *s, const hk_shape *shape,
                                          int64_t k) {
  if (!s) return NULL;
  return sa_element(m, sa_tuple_of(m, shape, s), shape, k);
}

/* XLA replaces an uneven entry sharding by replicated only where the
 * option list names the value itself: one entry per parameter (or per
 * element of a single tuple parameter), one per root tuple element, or a
 * non-tuple root. */
static bool even_check_applies(const run_state *rs, const hk_instr *v, int64_t param) {
  const prop_opts *o = &rs->cx.o;
  const hk_computation *e = rs->cx.m->entry;
  if (param < 0) return !hk_shape_is_tuple(v->shape) || o->n_out == v->shape->n_tuple;
  if (o->n_params == e->n_params) return true;
  return e->n_params == 1 && hk_shape_is_tuple(v->shape) && o->n_params == v->shape->n_tuple;
}

/* Entry values: per leaf, only where propagation was allowed and, where
 * XLA checks it, only shardings that divide the shape evenly. */
static void restore_value(run_state *rs, hk_instr *v, const hk_sharding *saved, int64_t param) {
  hk_module *m = rs->cx.m;
  hk_computation *e = m->entry;
  bool even = even_check_applies(rs, v, param);
  if (!hk_shape_is_tuple(v->shape)) {
    bool ok = param >= 0 ? prop_param_leaf_allowed(&rs->cx, e, param, 0) : output_allowed(&rs->cx, 0);
    hk_instr_set_sharding(v, entry_leaf(m, v->sharding, saved, v->shape, ok, even));
    return;
  }
  int n = v->shape->n_tuple;
  if (hk_shape_leaf_count(v->shape) != n) return;   /* nested tuples: keep */
  const hk_sharding **el = malloc(sizeof *el * (size_t)(n ? n : 1));
  if (!el) hk_out_of_memory();
  bool any = false;
  for (int k = 0; k < n; k++) {
    bool ok = param >= 0 ? prop_param_leaf_allowed(&rs->cx, e, param, k) : output_allowed(&rs->cx, k);
    el[k] = entry_leaf(m, element_or_null(m, v->sharding, v->shape, k),
                       element_or_null(m, saved, v->shape, k), v->shape->tuple[k], ok, even);
    if (!el[k]) el[k] = hk_sharding_replicated(m);
    else any = true;
  }
  hk_instr_set_sharding(v, any || saved ? hk_sharding_tuple(m, n, el) : NULL);
  free(el);
}

static void restore_entry(run_state *rs, hk_module *m) {
  hk_computation *e = m->entry;
  if (!e || !pi(e->root) || !rs->saved_params) return;
  for (int32_t k = 0; k < e->n_params; k++)
    if (e->params[k] && prop_param_allowed(&rs->cx, e, k))
      restore_value(rs, e->params[k], rs->saved_params[k], k);
  if (rs->cx.allow_out_any) restore_value(rs, e->root, rs->saved_root, -1);
}

static void cse_prevention_post(run_state *rs, hk_module *m, const hk_sharding **orig) {
  int64_t at = 0;
  for (int32_t k = 0; k < rs->n_comps; k++)
    for (hk_instr *i = rs->comps[k].c->first; i; i = i->next, at++) {
      const hk_sharding *o = orig[at];
      if (!i->sharding) continue;
      bool target = i->opcode == HK_OP_BROADCAST && i->operands[0]->shape->rank == 0;
      if (target) {
        if (!o) {
          hk_metadata md;
          memset(&md, 0, sizeof md);
          md.op_name = CSE_PREVENTION;
          const hk_sharding *s = hk_sharding_without_metadata(m, i->sharding);
          if (s->kind != HK_SHARDING_TUPLE) {
            hk_sharding t = *s;
            t.n_metadata = 1;
            t.metadata = &md;
            hk_instr_set_sharding(i, hk_sharding_intern(m, &t));
          }
        }
        continue;
      }
      hk_instr_set_sharding(i, o);
    }
}

/* ---- provenance records ---------------------------------------------------------------- */

static void make_records(run_state *rs, hk_prop_record **out, int64_t *n_out) {
  int64_t n = rs->cx.n_info;
  hk_prop_record *r = malloc(sizeof *r * (size_t)(n ? n : 1));
  if (!r) hk_out_of_memory();
  int64_t at = 0;
  for (int64_t k = 0; k < n; k++) {
    pi_info *p = &rs->cx.info[k];
    hk_instr *i = p->instr;
    if (!i) continue;
    {
      hk_prop_record *x = &r[at++];
      x->instr = i->name;
      x->computation = i->parent->name;
      x->source = p && p->src ? p->src->name : NULL;
      x->rule = p && p->rule ? p->rule : NULL;
      x->level = p ? p->level : -1;
      x->dir = i->sharding && p ? p->dir : HK_PROP_DIR_NONE;
      x->sharding = i->sharding;
    }
  }
  *out = r;
  *n_out = at;
}

/* ---- entry ------------------------------------------------------------------------------ */

/* Every sharding before the run, in list order (cse_prevention_only). */
static const hk_sharding **save_all(run_state *rs, hk_module *m, const hk_exec_threads *threads) {
  (void)rs;
  int64_t n = 0, at = 0;
  for (int32_t k = 0; k < m->n_computations; k++)
    if (hk_exec_threads_include(threads, m->computations[k])) n += m->computations[k]->n_instrs;
  const hk_sharding **o = calloc((size_t)(n ? n : 1), sizeof *o);
  if (!o) hk_out_of_memory();
  for (int32_t k = 0; k < m->n_computations; k++)
    if (hk_exec_threads_include(threads, m->computations[k]))
      for (hk_instr *i = m->computations[k]->first; i; i = i->next) o[at++] = i->sharding;
  return o;
}

static void merge_module_config(prop_ctx *cx, hk_module *m) {
  const hk_module_config *c = &m->config;
  if (c->n_allow_prop_to_output > 0 && c->n_allow_prop_to_output <= 64) {
    bool any_opt = false;
    for (int k = 0; k < cx->o.n_out; k++) any_opt |= cx->o.out[k];
    if (!any_opt) {
      cx->o.n_out = c->n_allow_prop_to_output;
      for (int k = 0; k < cx->o.n_out; k++) cx->o.out[k] = c->allow_prop_to_output[k];
    }
  }
  if (c->n_allow_prop_to_params > 0 && c->n_allow_prop_to_params <= 64) {
    bool any_opt = false;
    for (int k = 0; k < cx->o.n_params; k++) any_opt |= cx->o.params[k];
    if (!any_opt) {
      cx->o.n_params = c->n_allow_prop_to_params;
      for (int k = 0; k < cx->o.n_params; k++) cx->o.params[k] = c->allow_prop_to_params[k];
    }
  }
  cx->allow_out_any = cx->allow_params_any = false;
  for (int k = 0; k < cx->o.n_out; k++) cx->allow_out_any |= cx->o.out[k];
  for (int k = 0; k < cx->o.n_params; k++) cx->allow_params_any |= cx->o.params[k];
}

hk_status *prop_run(hk_module *m, const hk_registry *reg, const prop_opts *o,
                    const hk_exec_threads *threads, bool *changed, hk_prop_record **rec,
                    int64_t *n_rec) {
  run_state rs;
  memset(&rs, 0, sizeof rs);
  rs.cx.m = m;
  rs.cx.reg = reg;
  rs.cx.o = *o;
  merge_module_config(&rs.cx, m);
  const hk_sharding **orig = o->cse_prevention_only ? save_all(&rs, m, threads) : NULL;
  alloc_info(&rs, m, threads);
  hk_status *st = process_sharding_ccs(&rs);
  for (int64_t k = 0; k < rs.control_flow.n && !st; k++)
    if (rs.control_flow.v[k]->opcode == HK_OP_WHILE) st = prop_check_while_devices(m, rs.control_flow.v[k]);
  if (!st) {
    map_computations(&rs);
    mark_provided(&rs, m);
    for (int level = 0; level < 4; level++) run_level(&rs, level);
    st = finish_groups_and_barriers(&rs);
  }
  if (!st) {
    restore_entry(&rs, m);
    if (orig) cse_prevention_post(&rs, m, orig);
    st = remove_barriers(&rs);
  }
  if (!st) {
    if (rec) make_records(&rs, rec, n_rec);
  }
  free(orig);
  *changed = rs.any_changed;
  free_state(&rs, m);
  return st;
}
