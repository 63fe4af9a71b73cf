/* import.c - sdy-round-trip-import: XLA's SdyRoundTripImportPipeline read
 * into HloShardings.  The module's xla.sdy.meshes give the meshes; the
 * xla.sdy.sharding of the instructions XLA reads it on (sdy_takes_sharding)
 * becomes their sharding, and every other `sharding=` is dropped (but on
 * infeed / outfeed), as XLA's import drops mhlo.sharding: the Shardy
 * attributes are the source of truth; FuncResultSharding custom
 * calls go onto the root; ShardingGroup custom calls become shard_as
 * groups; open dims of a Sharding custom call become its unspecified_dims;
 * manual computations are lowered in manual.c.  Like XLA's import, it
 * leaves no round-trip attribute behind; with keep=true the texts stay
 * under hlokit.sdy.* (KEEP_PREFIX) for sdy-round-trip-export. */
#include <stdlib.h>
#include <string.h>

#include "sdy.h"

static bool is_manual_body_call(const hk_instr *i) {
  return i->opcode == HK_OP_CALL && i->n_called == 1 &&
         strstr(i->called[0]->name, SDY_BODY_PREFIX) != NULL;
}

void sdy_keep_attrs(hk_instr *i) { sdy_rename_attrs(i, "xla.sdy.", KEEP_PREFIX); }

/* One value's sharding: sh over the value's shape. */
static hk_status *convert_one(sdy_import_ctx *cx, const sdy_sharding *sh, const hk_shape *shape,
                              int n_manual, char (*manual)[64], const hk_sharding **out) {
  const sdy_mesh *mesh = sdy_find_mesh(&cx->meshes, sh);
  if (!mesh) return hk_error(HK_INVALID_ARGUMENT, "unknown mesh @%s", sh->mesh_name);
  int rank = hk_shape_is_array(shape) ? shape->rank : 0;
  HK_TRY(sdy_check_sharding(mesh, sh, rank));
  HK_TRY(sdy_check_free_of(sh, n_manual, manual));
  hk_status *st;
  *out = sdy_to_hlo(cx->m, mesh, sh, n_manual, manual, &st);
  return st;
}

/* The array leaves of a shape, depth first (a tuple sharding's order). */
static void collect_leaves(const hk_shape *s, const hk_shape **out, int *n) {
  if (!hk_shape_is_tuple(s)) {
    out[(*n)++] = s;
    return;
  }
  for (int32_t k = 0; k < s->n_tuple; k++) collect_leaves(s->tuple[k], out, n);
}

static hk_status *sharding_for_instr(sdy_import_ctx *cx, hk_instr *i, const char *text,
                                     int n_manual, char (*manual)[64], const hk_sharding **out);

/* The HloSharding of `text` (#sdy.sharding or #sdy.sharding_per_value)
 * for instruction i: one sharding per value, a tuple sharding over a
 * tuple's leaves ({replicated} for a fully open one among others).  A
 * fully open Sharding constraint still needs a sharding in HLO:
 * {replicated}, every dim in unspecified_dims (mark_open_dims), which
 * constrains nothing. */
hk_status *sdy_sharding_for_instr(sdy_import_ctx *cx, hk_instr *i, const char *text,
                                  int n_manual, char (*manual)[64], const hk_sharding **out) {
  HK_TRY(sharding_for_instr(cx, i, text, n_manual, manual, out));
  if (!*out && sdy_is_custom_call(i, "Sharding")) *out = hk_sharding_replicated(cx->m);
  return NULL;
}

static hk_status *sharding_for_instr(sdy_import_ctx *cx, hk_instr *i, const char *text,
                                     int n_manual, char (*manual)[64], const hk_sharding **out) {
  *out = NULL;
  if (strncmp(text, "#sdy.sharding<", 14) == 0) {
    sdy_sharding sh;
    HK_TRY(sdy_parse_sharding(text, &sh));
    hk_status *st = convert_one(cx, &sh, i->shape, n_manual, manual, out);
    sdy_sharding_free(&sh);
    return st;
  }
  sdy_per_value pv;
  HK_TRY(sdy_parse_per_value(text, &pv));
  bool tuple = hk_shape_is_tuple(i->shape);
  int n = 0;
  const hk_shape **leaves = malloc(sizeof *leaves * (size_t)(hk_shape_leaf_count(i->shape) + 1));
  const hk_sharding **elems = malloc(sizeof *elems * (size_t)(hk_shape_leaf_count(i->shape) + 1));
  if (!leaves || !elems) hk_out_of_memory();
  collect_leaves(i->shape, leaves, &n);
  hk_status *st = NULL;
  /* An empty tuple takes one sharding, as XLA's tuple HloSharding of an
   * empty tuple has one element (a callback without results): its one
   * value read as a scalar's. */
  bool empty = tuple && n == 0 && pv.n == 1;
  if (empty) leaves[n++] = hk_shape_scalar(cx->m, HK_PRED);
  if (pv.n != n)
    st = hk_error(HK_INVALID_ARGUMENT, "%d shardings for %d values", pv.n, n);
  bool any = false;
  for (int k = 0; !st && k < n; k++) {
    st = convert_one(cx, &pv.v[k], leaves[k], n_manual, manual, &elems[k]);
    if (!st) any |= elems[k] != NULL;
  }
  if (!st && any && !tuple) *out = elems[0];
  if (!st && (any || empty) && tuple) {
    for (int k = 0; k < n; k++)
      if (!elems[k]) elems[k] = hk_sharding_replicated(cx->m);
    *out = hk_sharding_tuple(cx->m, n, elems);
  }
  free(leaves);
  free(elems);
  sdy_per_value_free(&pv);
  return st;
}

/* A Sharding custom call's open dims without axes stay open for
 * propagation: backend_config="unspecified_dims=[...]" (XLA's
 * sharding_op_util spelling), joined with the dims it already names, which
 * XLA's import opens too. */
static void mark_open_dims(hk_instr *i, const char *text) {
  sdy_per_value pv;
  hk_status *st = sdy_parse_per_value(text, &pv);
  if (st) {                        /* converted already, so it parses; never reached */
    hk_status_free(st);
    return;
  }
  bool open[SDY_MAX_DIMS] = {false};
  int rank = pv.n == 1 ? pv.v[0].rank : 0;
  for (int d = 0; d < rank; d++) open[d] = pv.v[0].dims[d].open && pv.v[0].dims[d].n_axes == 0;
  const char *bc = i->attrs ? i->attrs->backend_config : NULL;
  const char *had = bc ? strstr(bc, "unspecified_dims=[") : NULL;
  for (const char *q = had ? had + strlen("unspecified_dims=[") : NULL; q && *q && *q != ']';) {
    char *end;
    long d = strtol(q, &end, 10);
    if (end == q) break;
    if (d >= 0 && d < rank) open[d] = true;
    q = *end == ',' ? end + 1 : end;
  }
  hk_buf b;
  hk_buf_init(&b);
  int n = 0;
  for (int d = 0; d < rank; d++)
    if (open[d]) hk_buf_printf(&b, "%s%d", n++ ? "," : "\"unspecified_dims=[", d);
  if (n) {
    hk_buf_puts(&b, "]\"");
    hk_buf_put(&b, "", 1);
    /* the export gives back the config as it came ("" for none) */
    sdy_instr_attr_set(i, KEEP_PREFIX "backend_config", bc ? bc : "");
    hk_instr_attrs(i)->backend_config = hk_intern_cstr(i->parent->module, b.data);
  }
  hk_buf_free(&b);
  sdy_per_value_free(&pv);
}

/* Whether XLA's import reads i's xla.sdy.sharding (import_shardy_attrs.cc):
 * parameters (function arguments), Sharding constraints, Python callbacks,
 * send / recv / after-all (TPU callbacks), and the SPMD shape custom calls
 * an older round trip wrote.  Any other instruction's is dropped: XLA
 * copies frontend attributes onto new instructions whose shapes may differ. */
bool sdy_takes_sharding(const hk_instr *i) {
  static const char *const targets[] = {
      "Sharding", "xla_python_cpu_callback", "xla_python_gpu_callback",
      "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback", "SPMDFullToShardShape",
      "SPMDShardToFullShape"};
  switch (i->opcode) {
    case HK_OP_PARAMETER:
    case HK_OP_SEND:
    case HK_OP_RECV:
    case HK_OP_AFTER_ALL:
      return true;
    case HK_OP_CUSTOM_CALL:
      for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++)
        if (sdy_is_custom_call(i, targets[k])) return true;
      return false;
    default:
      return false;
  }
}

static hk_status *import_sharding(sdy_import_ctx *cx, hk_instr *i) {
  const char *text = sdy_instr_attr(i, SDY_SHARDING);
  if (!text || !sdy_takes_sharding(i)) return NULL;
  const hk_sharding *s;
  hk_status *st = sdy_sharding_for_instr(cx, i, text, 0, NULL, &s);
  if (st) return sdy_error_at(i, SDY_SHARDING, st);
  hk_instr_set_sharding(i, s);
  if (sdy_is_custom_call(i, "Sharding")) mark_open_dims(i, text);
  return NULL;
}

/* The result slot of the computation's root that `v` is: -1 for the root
 * itself (or a get-tuple-element of a one-use tuple of v, the JAX form),
 * k for operand k of a root tuple, -2 when v is not a result (XLA ignores
 * those uses). */
static int result_slot(const hk_computation *c, const hk_instr *v) {
  const hk_instr *r = c->root;
  if (r == v) return -1;
  if (r->opcode == HK_OP_GET_TUPLE_ELEMENT && r->operands[0]->opcode == HK_OP_TUPLE &&
      r->operands[0]->operands[hk_instr_tuple_index(r)] == v)
    return -1;
  if (r->opcode == HK_OP_TUPLE)
    for (int32_t k = 0; k < r->n_operands; k++)
      if (r->operands[k] == v) return k;
  return -2;
}

/* Result shardings found so far for the root of one computation. */
typedef struct results {
  const hk_sharding *whole;
  int n;
  const hk_sharding *elems[SDY_MAX_VALUES];
} results;

static hk_status *import_func_result(sdy_import_ctx *cx, hk_instr *cc, results *res) {
  const char *text = sdy_instr_attr(cc, SDY_SHARDING);
  if (!text || cc->n_operands != 1)
    return sdy_error_at(cc, SDY_SHARDING,
                        hk_error(HK_INVALID_ARGUMENT, "%s needs one operand and xla.sdy.sharding",
                                 SDY_FUNC_RESULT));
  const hk_sharding *s;
  hk_status *st = sdy_sharding_for_instr(cx, cc, text, 0, NULL, &s);
  if (st) return sdy_error_at(cc, SDY_SHARDING, st);
  hk_computation *c = cc->parent;
  int slot = result_slot(c, cc);
  hk_instr_replace_all_uses(cc, cc->operands[0]);
  char key[64];
  if (slot == -1) {
    res->whole = s;
    sdy_instr_attr_set(c->root, KEEP_PREFIX "result_sharding", text);
  } else if (slot >= 0 && slot < SDY_MAX_VALUES) {
    res->elems[slot] = s ? s : hk_sharding_replicated(cx->m);
    if (slot >= res->n) res->n = slot + 1;
    snprintf(key, sizeof key, KEEP_PREFIX "result_sharding.%d", slot);
    sdy_instr_attr_set(c->root, key, text);
  }
  return hk_instr_remove(cc);
}

/* The root's sharding from the result shardings: a tuple root takes one
 * per element ({replicated} where none was given). */
static void set_root_sharding(hk_module *m, hk_computation *c, const results *res) {
  if (res->whole) {
    hk_instr *root = c->root;
    /* A root the import gave its own sharding (a manual computation's
     * SPMDShardToFullShape, a parameter, a constraint) keeps it: the result
     * sharding goes on a copy, as a function result's sharding is not its
     * producer's. */
    if (root->sharding && !hk_sharding_equivalent(root->sharding, res->whole)) {
      hk_instr *copy = hk_instr_new(c, HK_OP_COPY, root->shape, 1, &root, NULL);
      const char *kept = sdy_kept(root, "result_sharding");
      if (kept) sdy_instr_attr_set(copy, KEEP_PREFIX "result_sharding", kept);
      sdy_unkeep(root, "result_sharding");
      hk_computation_set_root(c, copy);
      root = copy;
    }
    hk_instr_set_sharding(root, res->whole);
    return;
  }
  if (!res->n || c->root->opcode != HK_OP_TUPLE) return;
  const hk_sharding *elems[SDY_MAX_VALUES];
  int n = c->root->n_operands;
  if (n > SDY_MAX_VALUES) return;
  for (int k = 0; k < n; k++) {
    const hk_shape *leaf = c->root->shape->tuple[k];
    if (hk_shape_is_tuple(leaf)) return;   /* nested tuple results: not written by XLA */
    elems[k] = k < res->n && res->elems[k] ? res->elems[k] : hk_sharding_replicated(m);
  }
  hk_instr_set_sharding(c->root, hk_sharding_tuple(m, n, elems));
}

/* xla.sdy.ShardingGroup(v) with xla.sdy.sharding_group_id=N: v joins
 * shard group N (HLO's shard_as: every member gets the same sharding). */
static hk_status *import_group(sdy_import_ctx *cx, hk_instr *cc) {
  const char *text = sdy_instr_attr(cc, SDY_GROUP_ID);
  if (!text)
    return sdy_error_at(cc, NULL, hk_error(HK_INVALID_ARGUMENT,
                                           "expected CustomCallOp with a sharding group id."));
  if (cc->n_users || hk_instr_is_root(cc))
    return sdy_error_at(cc, NULL, hk_error(HK_INVALID_ARGUMENT,
                                           "xla.sdy.ShardingGroup CustomCallOp should have no uses."));
  if (cc->n_operands != 1)
    return sdy_error_at(cc, NULL, hk_error(HK_INVALID_ARGUMENT, "expected one operand"));
  int64_t id;
  hk_status *st = sdy_parse_group_id(text, &id);
  if (st) return sdy_error_at(cc, SDY_GROUP_ID, st);
  hk_instr *v = cc->operands[0];
  hk_sharding t = v->sharding ? *v->sharding : (hk_sharding){.kind = HK_SHARDING_UNKNOWN};
  t.shard_group_kind = HK_SHARD_GROUP_AS;
  t.shard_group_id = id;
  hk_instr_set_sharding(v, hk_sharding_intern(cx->m, &t));
  /* Kept for the export: the group ids of v, in order. */
  const char *had = sdy_instr_attr(v, KEEP_PREFIX "sharding_group_id");
  char *both = NULL;
  if (had && asprintf(&both, "%s;%s", had, text) < 0) hk_out_of_memory();
  sdy_instr_attr_set(v, KEEP_PREFIX "sharding_group_id", both ? both : text);
  free(both);
  return hk_instr_remove(cc);
}

static hk_status *import_computation(sdy_import_ctx *cx, hk_computation *c) {
  results res = {0};
  for (hk_instr *i = c->first, *next; i; i = next) {
    next = i->next;
    if (sdy_is_custom_call(i, SDY_FUNC_RESULT)) HK_TRY(import_func_result(cx, i, &res));
  }
  for (hk_instr *i = c->first; i; i = i->next) HK_TRY(import_sharding(cx, i));
  for (hk_instr *i = c->first, *next; i; i = next) {   /* groups join the shardings */
    next = i->next;
    if (sdy_is_custom_call(i, SDY_GROUP)) HK_TRY(import_group(cx, i));
  }
  for (hk_instr *i = c->first; i; i = i->next) sdy_keep_attrs(i);
  set_root_sharding(cx->m, c, &res);
  return NULL;
}

/* XLA's import drops every mhlo.sharding first: the Shardy attributes say
 * it all. */
static void clear_shardings(hk_module *m) {
  for (int32_t k = 0; k < m->n_computations; k++)
    for (hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->opcode != HK_OP_INFEED && i->opcode != HK_OP_OUTFEED)   /* XLA keeps those */
        hk_instr_set_sharding(i, NULL);
}

static hk_status *import_manual_computations(sdy_import_ctx *cx) {
  for (int32_t k = 0; k < cx->m->n_computations; k++) {
    hk_computation *c = cx->m->computations[k];
    if (strstr(c->name, SDY_BODY_PREFIX)) continue;   /* nested ones: with their parent */
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      if (!is_manual_body_call(i)) continue;
      HK_TRY(sdy_import_manual(cx, i, 0, NULL));
      next = c->first;             /* the list changed around i */
    }
  }
  return NULL;
}

/* xla.sdy.import_mhlo_shardings: ShardyXLA reads the module's HLO
 * shardings (its mhlo import pipeline), not the round-trip texts, and drops
 * the attribute and the meshes.  HLO shardings are what hlokit reads
 * anyway: they stay. */
static bool import_mhlo_shardings(hk_module *m) {
  if (!sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes, SDY_IMPORT_MHLO))
    return false;
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, SDY_IMPORT_MHLO, NULL);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, SDY_MESHES, NULL);
  return true;
}

static hk_status *sdy_import_module(hk_module *m, bool *changed) {
  if (import_mhlo_shardings(m)) {
    *changed = true;
    return NULL;
  }
  const char *meshes = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                    SDY_MESHES);
  sdy_import_ctx cx = {m, {0}};
  if (!meshes) return NULL;        /* not a Shardy round-trip module (or imported already) */
  hk_status *st = sdy_parse_meshes(meshes, &cx.meshes);
  if (st) return hk_status_prefix(st, "module attribute %s=%s", SDY_MESHES, meshes);
  clear_shardings(m);
  st = import_manual_computations(&cx);
  for (int32_t k = 0; !st && k < m->n_computations; k++)
    st = import_computation(&cx, m->computations[k]);
  sdy_meshes_free(&cx.meshes);
  if (st) return st;
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, KEEP_MESHES,
             meshes);
  sdy_kv_set(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes, SDY_MESHES, NULL);
  *changed = true;
  return NULL;
}

/* Drops the KEEP_PREFIX entries of one frontend attribute list. */
static void drop_kept_kvs(hk_module *m, int32_t *n, const hk_kv **kvs) {
  int32_t w = 0;
  for (int32_t k = 0; k < *n; k++) w += strncmp((*kvs)[k].key, KEEP_PREFIX, strlen(KEEP_PREFIX)) != 0;
  if (w == *n) return;
  hk_kv *out = w ? hk_alloc(m, sizeof *out * (size_t)w) : NULL;
  w = 0;
  for (int32_t k = 0; k < *n; k++)
    if (strncmp((*kvs)[k].key, KEEP_PREFIX, strlen(KEEP_PREFIX)) != 0) out[w++] = (*kvs)[k];
  *n = w;
  *kvs = out;
}

/* XLA's import removes the round-trip attributes it read (and ShardyXLA
 * the module's meshes): without keep, so does this one. */
static void drop_kept(hk_module *m) {
  drop_kept_kvs(m, &m->config.n_frontend_attributes, &m->config.frontend_attributes);
  for (int32_t k = 0; k < m->n_computations; k++)
    for (hk_instr *i = m->computations[k]->first; i; i = i->next)
      if (i->attrs) drop_kept_kvs(m, &i->attrs->n_frontend_attributes, &i->attrs->frontend_attributes);
}

typedef struct import_pass {
  hk_pass base;
  bool keep;                       /* keep the texts for sdy-round-trip-export */
} import_pass;

static hk_status *import_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                             bool *changed) {
  (void)threads;                   /* the round trip is module-wide, as XLA's */
  *changed = false;
  HK_TRY(sdy_import_module(m, changed));
  if (*changed && !((import_pass *)self)->keep) drop_kept(m);
  bool tuple_args = sdy_attr_get(m->config.n_frontend_attributes, m->config.frontend_attributes,
                                 SDY_USE_TUPLE_ARGS) != NULL;
  if (tuple_args) HK_TRY(sdy_use_tuple_args(m, ((import_pass *)self)->keep));
  *changed |= tuple_args;
  return NULL;
}

static const hk_pass_vtable import_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "sdy-round-trip-import", .run = import_run,
    .destroy = hk_pass_free};

static hk_pass *import_create(const hk_option_values *opts, hk_registry *reg, hk_status **err) {
  (void)reg;
  import_pass *p = (import_pass *)hk_pass_alloc(&import_vtable, sizeof(import_pass), err);
  if (p) p->keep = hk_opt_bool(opts, "keep");
  return &p->base;
}

static const hk_option_decl import_options[] = {
    {"keep", HK_OPT_BOOL, "false",
     "keep the Shardy texts as hlokit.sdy.* frontend attributes for sdy-round-trip-export "
     "(XLA's import removes them)", NULL},
};

const hk_pass_desc sdy_import_desc = {
    .size = sizeof(hk_pass_desc), .name = "sdy-round-trip-import",
    .summary = "read Shardy round-trip attributes (xla.sdy.*) into HloShardings, as XLA's "
               "SdyRoundTripImportPipeline",
    .options = import_options, .n_options = 1, .create = import_create};
