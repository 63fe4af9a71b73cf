/* test_walks.c - Check suite for the whole-module walks: post order (both DFSes against a reference), calling instructions, computation order, call graph, next channel id. */
#include <pthread.h>

#include "testutil.h"

/* ---- a reference post order: XLA's MakeInstructionPostOrder, recursive -------- */
/* Visits control predecessors (last first), operands in order, then, unless
 * x starts the DFS, the earlier collectives of x's channel (latest first). */

typedef struct ref_walk {
  const hk_computation *c;
  hk_instr **list;          /* list order */
  int64_t n;
  uint8_t *state;           /* by list position: 0 new, 1 active, 2 done */
  hk_instr **out;
  int64_t n_out;
} ref_walk;

/* List positions are kept in scratch (pos + 1) while the reference runs. */
static int64_t ref_pos(const ref_walk *w, const hk_instr *i) {
  (void)w;
  return (int64_t)(intptr_t)i->scratch - 1;
}

static bool ref_channel_collective(const hk_instr *i) {
  switch ((hk_opcode)i->opcode) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_RAGGED_ALL_TO_ALL: case HK_OP_REDUCE_SCATTER:
      return hk_instr_channel_id(i) != 0;
    default:
      return false;
  }
}

static void ref_visit(ref_walk *w, hk_instr *x, bool start);

static void ref_visit_pred(ref_walk *w, hk_instr *y) {
  if (y->parent != w->c) return;
  int64_t p = ref_pos(w, y);
  if (w->state[p] == 0) ref_visit(w, y, false);
}

static void ref_visit(ref_walk *w, hk_instr *x, bool start) {
  int64_t p = ref_pos(w, x);
  w->state[p] = 1;
  if (x->attrs)
    for (int32_t k = x->attrs->n_control_preds; k-- > 0;) ref_visit_pred(w, x->attrs->control_preds[k]);
  for (int32_t k = 0; k < x->n_operands; k++) ref_visit_pred(w, x->operands[k]);
  if (!start && ref_channel_collective(x))
    for (int64_t q = p; q-- > 0;) {
      hk_instr *y = w->list[q];
      if (ref_channel_collective(y) && hk_instr_channel_id(y) == hk_instr_channel_id(x))
        ref_visit_pred(w, y);
    }
  w->state[p] = 2;
  w->out[w->n_out++] = x;
}

static hk_instr **ref_post_order(const hk_computation *c, int64_t *n) {
  ref_walk w = {.c = c, .n = c->n_instrs};
  w.list = malloc((size_t)(w.n + 1) * sizeof *w.list);
  w.state = calloc((size_t)w.n + 1, 1);
  w.out = malloc((size_t)(w.n + 1) * sizeof *w.out);
  int64_t k = 0;
  for (hk_instr *i = c->first; i; i = i->next) {
    i->scratch = (void *)(intptr_t)(k + 1);
    w.list[k++] = i;
  }
  for (k = 0; k < w.n; k++)
    if (!w.list[k]->n_users && !w.state[k]) ref_visit(&w, w.list[k], true);
  for (k = 0; k < w.n; k++)
    if (!w.state[k]) ref_visit(&w, w.list[k], true);
  for (k = 0; k < w.n; k++) w.list[k]->scratch = NULL;
  free(w.list);
  free(w.state);
  *n = w.n_out;
  return w.out;
}

static void assert_same_as_reference(const hk_computation *c) {
  int64_t n = 0, rn = 0;
  hk_instr **got = hk_computation_post_order(c, &n);
  hk_instr **want = ref_post_order(c, &rn);
  ck_assert_int_eq(n, rn);
  ck_assert_int_eq(n, c->n_instrs);
  for (int64_t k = 0; k < n; k++)
    ck_assert_msg(got[k] == want[k], "position %lld: got %s, want %s", (long long)k,
                  got[k]->name, want[k]->name);
  free(got);
  free(want);
}

/* ---- random computations ------------------------------------------------------------ */

typedef struct rng64 { uint64_t s; } rng64;
static uint64_t next_rand(rng64 *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static int64_t below(rng64 *r, int64_t n) { return (int64_t)(next_rand(r) % (uint64_t)n); }

typedef struct dag_spec {
  int64_t n;              /* instructions */
  int control_per_mille;  /* chance of a control edge from an earlier instruction */
  int channel_per_mille;  /* chance of an all-reduce with a channel id */
  int64_t n_channels;     /* channel ids are 1..n_channels (few: shared ones) */
  int late_per_mille;     /* chance an instruction is listed before one it uses */
  bool other_comp_operand;   /* one operand from another computation */
} dag_spec;

/* Operands mostly near (like real modules), sometimes far back; a few
 * instructions are left unused so there are several DFS roots. */
static hk_instr *random_operand(rng64 *r, hk_instr **v, int64_t k) {
  if (below(r, 4)) return v[k - 1 - below(r, k < 6 ? k : 6)];
  return v[below(r, k)];
}

static hk_computation *random_dag(hk_module *m, const char *name, const dag_spec *sp, rng64 *r) {
  hk_computation *c = hk_computation_new(m, name);
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr **v = malloc((size_t)sp->n * sizeof *v);
  v[0] = hk_test_param(c, 0, s, "p0");
  v[1] = hk_test_param(c, 1, s, "p1");
  for (int64_t k = 2; k < sp->n; k++) {
    hk_instr *ops[3];
    int n_ops = 1 + (int)below(r, 3);
    for (int j = 0; j < n_ops; j++) ops[j] = random_operand(r, v, k);
    bool channel = below(r, 1000) < sp->channel_per_mille;
    hk_opcode op = channel ? HK_OP_ALL_REDUCE : n_ops == 1 ? HK_OP_NEGATE : HK_OP_TUPLE;
    if (channel) n_ops = 1;
    hk_instr *before = below(r, 1000) < sp->late_per_mille ? ops[0] : NULL;
    v[k] = before ? hk_instr_new_before(before, op, s, n_ops, ops, NULL)
                  : hk_instr_new(c, op, s, n_ops, ops, NULL);
    if (channel) hk_instr_attrs(v[k])->channel_id = 1 + below(r, sp->n_channels);
    if (below(r, 1000) < sp->control_per_mille)   /* one to three control predecessors */
      for (int64_t j = below(r, 3); j >= 0; j--) hk_instr_add_control_dep(v[below(r, k)], v[k]);
  }
  hk_computation_set_root(c, v[sp->n - 1]);
  free(v);
  return c;
}

/* The reference list-is-topological: every operand and control
 * predecessor an instruction of c listed earlier (found by a list scan). */
static bool ref_listed_first(const hk_computation *c, const hk_instr *i, const hk_instr *o) {
  for (const hk_instr *x = c->first; x != i; x = x->next)
    if (x == o) return true;
  return false;
}

static bool ref_list_is_topological(const hk_computation *c) {
  for (const hk_instr *i = c->first; i; i = i->next) {
    for (int32_t k = 0; k < i->n_operands; k++)
      if (!ref_listed_first(c, i, i->operands[k])) return false;
    for (int32_t k = 0; i->attrs && k < i->attrs->n_control_preds; k++)
      if (!ref_listed_first(c, i, i->attrs->control_preds[k])) return false;
  }
  return true;
}

static void check_random(const dag_spec *sp, uint64_t seed, int rounds) {
  rng64 r = {seed};
  for (int round = 0; round < rounds; round++) {
    hk_module *m = hk_module_new("m");
    hk_computation *other = hk_computation_new(m, "other");
    hk_instr *foreign = hk_test_param(other, 0, hk_shape_scalar(m, HK_F32), "foreign");
    hk_computation *c = random_dag(m, "c", sp, &r);
    if (sp->other_comp_operand) {
      hk_instr *ops[2] = {c->root, foreign};
      hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, c->root->shape, 2, ops, "mixed"));
    }
    assert_same_as_reference(c);
    assert_same_as_reference(c);   /* nothing left marked */
    ck_assert_int_eq(hk_computation_list_is_topological(c), ref_list_is_topological(c));
    hk_module_free(m);
  }
}

/* Big computations take the position DFS, small ones the marking DFS; both
 * must give the reference order. */
START_TEST(post_order_random_big) {
  dag_spec sp = {.n = 3000, .control_per_mille = 20, .channel_per_mille = 20, .n_channels = 1000000};
  check_random(&sp, 0x9e3779b97f4a7c15ull, hk_test_iterations(6));
}
END_TEST

START_TEST(post_order_random_small) {
  dag_spec sp = {.n = 60, .control_per_mille = 30, .channel_per_mille = 50, .n_channels = 1000000};
  check_random(&sp, 12345, hk_test_iterations(40));
}
END_TEST

/* Shared channels and instructions listed before their operands make the
 * big case fall back to the marking DFS; operands of other computations
 * are skipped by both. */
START_TEST(post_order_random_fallbacks) {
  dag_spec shared = {.n = 2000, .channel_per_mille = 30, .n_channels = 5};
  check_random(&shared, 777, hk_test_iterations(3));
  dag_spec late = {.n = 2000, .late_per_mille = 5};
  check_random(&late, 4242, hk_test_iterations(3));
  dag_spec foreign = {.n = 2000, .control_per_mille = 10, .other_comp_operand = true};
  check_random(&foreign, 99, hk_test_iterations(3));
}
END_TEST

/* A copy of c with its instructions listed in c's post order (control
 * edges copied too): its list then is its own post order. */
static hk_computation *relisted(hk_computation *c) {
  hk_computation *d = hk_computation_new(c->module, "relisted");
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  for (int64_t k = 0; k < n; k++) {
    hk_instr *s = order[k], *ops[3];
    for (int32_t j = 0; j < s->n_operands; j++) ops[j] = s->operands[j]->scratch;
    hk_instr *x = hk_instr_clone(d, s, NULL, s->n_operands, ops, NULL);
    if (x->attrs) {
      x->attrs->n_control_preds = x->attrs->n_control_succs = 0;
      x->attrs->control_preds = x->attrs->control_succs = NULL;
    }
    if (s->opcode == HK_OP_PARAMETER) hk_computation_register_param(d, x);
    s->scratch = x;
  }
  for (int64_t k = 0; k < n; k++)
    if (order[k]->attrs)
      for (int32_t j = 0; j < order[k]->attrs->n_control_preds; j++)
        hk_instr_add_control_dep(order[k]->attrs->control_preds[j]->scratch, order[k]->scratch);
  hk_computation_set_root(d, c->root->scratch);
  for (int64_t k = 0; k < n; k++) order[k]->scratch = NULL;
  free(order);
  return d;
}

/* hk_computation_list_is_topological against the reference on small
 * computations of a module whose ids run far past their count (the proof
 * by a set of pointers, not by ids) and on big ones (by ids), with
 * operands and control predecessors listed late; the relisted copy of a
 * computation always is topological. */
START_TEST(list_is_topological_both_ways) {
  rng64 r = {31337};
  int topo = 0, not_topo = 0, rounds = hk_test_iterations(30);
  if (rounds < 6) rounds = 6;   /* every kind of round, under valgrind too */
  for (int round = 0; round < rounds; round++) {
    hk_module *m = hk_module_new("m");
    m->next_id = round % 2 ? 1000000 : 0;
    dag_spec sp = {.n = round % 2 ? 40 : 1200, .control_per_mille = 40, .late_per_mille = round % 3 ? 8 : 0};
    hk_computation *c = random_dag(m, "c", &sp, &r);
    bool want = ref_list_is_topological(c);
    ck_assert_int_eq(hk_computation_list_is_topological(c), want);
    if (want) topo++;
    else not_topo++;
    hk_computation *d = relisted(c);
    ck_assert(hk_computation_list_is_topological(d));
    hk_module_free(m);
  }
  ck_assert(topo > 0 && not_topo > 0);
}
END_TEST

/* When the list already is the post order, the big case returns it as it
 * is (no DFS); it must still be the reference order. */
START_TEST(post_order_list_already_in_order) {
  rng64 r = {2024};
  for (int round = 0; round < hk_test_iterations(4); round++) {
    hk_module *m = hk_module_new("m");
    dag_spec sp = {.n = 3000, .control_per_mille = 20, .channel_per_mille = 20,
                   .n_channels = 1000000};
    hk_computation *d = relisted(random_dag(m, "c", &sp, &r));
    assert_same_as_reference(d);
    int64_t n = 0, k = 0;
    hk_instr **po = hk_computation_post_order(d, &n);
    for (hk_instr *i = d->first; i; i = i->next, k++) ck_assert_ptr_eq(po[k], i);
    ck_assert_int_eq(k, n);
    free(po);
    hk_module_free(m);
  }
}
END_TEST

/* The proof that the list is the order takes the id table's memory for its
 * own array: with ids exactly 0..n-1 (the table no bigger than the list),
 * a list in order is returned as it is, and one whose operands are
 * visited out of list order (the proof fails after using the table) still
 * gets the reference order. */
START_TEST(post_order_id_table_as_big_as_list) {
  for (int swapped = 0; swapped < 2; swapped++) {
    hk_module *m = hk_module_new("m");
    hk_computation *c = hk_computation_new(m, "c");
    const hk_shape *s = hk_shape_scalar(m, HK_F32);
    enum { N = 1200 };
    hk_instr *x[N];
    x[0] = hk_test_param(c, 0, s, "p");
    x[1] = hk_instr_new(c, HK_OP_NEGATE, s, 1, &x[0], NULL);
    for (int k = 2; k < N; k++) {
      /* add(previous, the one before): operands in list order, or swapped */
      hk_instr *ops[2] = {x[k - 1 - swapped], x[k - 2 + swapped]};
      x[k] = hk_instr_new(c, HK_OP_ADD, s, 2, ops, NULL);
    }
    hk_computation_set_root(c, x[N - 1]);
    ck_assert_int_eq(m->next_id, N);
    int64_t n = 0;
    hk_instr **po = hk_computation_post_order(c, &n);
    ck_assert_int_eq(n, N);
    if (!swapped)
      for (int k = 0; k < N; k++) ck_assert_ptr_eq(po[k], x[k]);
    free(po);
    assert_same_as_reference(c);
    hk_module_free(m);
  }
}
END_TEST

/* A big chain listed backwards (each instruction uses the one listed after
 * it): operands come late, the marking DFS runs, same order. */
START_TEST(post_order_big_reversed_list) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = hk_computation_new(m, "c");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  enum { N = 1000 };
  hk_instr *x[N];
  for (int k = 0; k < N; k++) x[k] = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, NULL);
  for (int k = 0; k + 1 < N; k++) hk_instr_set_operand(x[k], 0, x[k + 1]);
  hk_computation_set_root(c, x[0]);
  int64_t n = 0;
  hk_instr **po = hk_computation_post_order(c, &n);
  ck_assert_int_eq(n, N + 1);
  ck_assert_ptr_eq(po[0], p);
  for (int k = 0; k < N; k++) ck_assert_ptr_eq(po[1 + k], x[N - 1 - k]);
  free(po);
  assert_same_as_reference(c);
  hk_module_free(m);
}
END_TEST

/* The position DFS takes no lock: two threads at once get the same order. */
typedef struct po_job {
  const hk_computation *c;
  hk_instr **order;
  int64_t n;
} po_job;

static void *run_post_order(void *arg) {
  po_job *j = arg;
  for (int k = 0; k < 5; k++) {
    free(j->order);
    j->order = hk_computation_post_order(j->c, &j->n);
  }
  return NULL;
}

START_TEST(post_order_concurrent) {
  hk_module *m = hk_module_new("m");
  rng64 r = {31337};
  dag_spec sp = {.n = 5000, .control_per_mille = 5};
  hk_computation *c = random_dag(m, "c", &sp, &r);
  po_job a = {c, NULL, 0}, b = {c, NULL, 0};
  pthread_t ta, tb;
  ck_assert_int_eq(pthread_create(&ta, NULL, run_post_order, &a), 0);
  ck_assert_int_eq(pthread_create(&tb, NULL, run_post_order, &b), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  ck_assert_int_eq(a.n, 5000);
  ck_assert_int_eq(b.n, 5000);
  for (int64_t k = 0; k < a.n; k++) ck_assert_ptr_eq(a.order[k], b.order[k]);
  free(a.order);
  free(b.order);
  hk_module_free(m);
}
END_TEST

/* ---- calling instructions, computation order, call graph, channel ids -------- */

/* entry: p -> reduce(to_apply=add) -> call(f) -> while(cond, body) ;
 * f calls g twice (a conditional with branches g, g); body: all-reduce
 * (to_apply=add, channel 7); unused: calls add. */
typedef struct call_module {
  hk_module *m;
  hk_computation *entry, *f, *g, *cond, *body, *add, *unused;
  hk_instr *red, *call, *w, *cnd, *ar, *unused_red;
} call_module;

static hk_computation *scalar_comp(hk_module *m, const char *name, int n_params) {
  hk_computation *c = hk_computation_new(m, name);
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *ps[2];
  for (int k = 0; k < n_params; k++) {
    char pn[16];
    snprintf(pn, sizeof pn, "%s_p%d", name, k);
    ps[k] = hk_test_param(c, k, s, pn);
  }
  hk_computation_set_root(c, n_params == 2 ? hk_instr_new(c, HK_OP_ADD, s, 2, ps, NULL) : ps[0]);
  return c;
}

static void build_call_module(call_module *cm) {
  hk_module *m = cm->m = hk_module_new("calls");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  cm->unused = scalar_comp(m, "unused", 1);
  cm->entry = hk_computation_new(m, "entry");
  cm->f = scalar_comp(m, "f", 1);
  cm->g = scalar_comp(m, "g", 1);
  cm->body = scalar_comp(m, "body", 1);
  cm->cond = scalar_comp(m, "cond", 1);
  cm->add = scalar_comp(m, "add", 2);
  hk_instr *p = hk_test_param(cm->entry, 0, s, "p");
  hk_instr *ops[2] = {p, p};
  cm->red = hk_instr_new(cm->entry, HK_OP_REDUCE, s, 2, ops, "red");
  hk_instr_set_called(cm->red, 1, &cm->add);
  cm->call = hk_instr_new(cm->entry, HK_OP_CALL, s, 1, &cm->red, "call");
  hk_instr_set_called(cm->call, 1, &cm->f);
  cm->w = hk_instr_new(cm->entry, HK_OP_WHILE, s, 1, &cm->call, "w");
  hk_computation *wc[2] = {cm->cond, cm->body};
  hk_instr_set_called(cm->w, 2, wc);
  hk_computation_set_root(cm->entry, cm->w);
  hk_instr *fp = cm->f->root;
  hk_instr *cops[3] = {fp, fp, fp};
  cm->cnd = hk_instr_new(cm->f, HK_OP_CONDITIONAL, s, 3, cops, "cnd");
  hk_computation *gg[2] = {cm->g, cm->g};
  hk_instr_set_called(cm->cnd, 2, gg);
  hk_computation_set_root(cm->f, cm->cnd);
  cm->ar = hk_instr_new(cm->body, HK_OP_ALL_REDUCE, s, 1, &cm->body->root, "ar");
  hk_instr_set_called(cm->ar, 1, &cm->add);
  hk_instr_attrs(cm->ar)->channel_id = 7;
  hk_computation_set_root(cm->body, cm->ar);
  hk_instr *up = cm->unused->root;
  hk_instr *uops[2] = {up, up};
  cm->unused_red = hk_instr_new(cm->unused, HK_OP_REDUCE, s, 2, uops, "ured");
  hk_instr_set_called(cm->unused_red, 1, &cm->add);
  hk_computation_set_root(cm->unused, cm->unused_red);
  hk_module_set_entry(m, cm->entry);
}

START_TEST(calling_instrs) {
  call_module cm;
  build_call_module(&cm);
  int64_t n = -1;
  hk_instr **v = hk_computation_calling_instrs(cm.entry, &n);
  ck_assert_int_eq(n, 3);
  ck_assert_ptr_eq(v[0], cm.red);
  ck_assert_ptr_eq(v[1], cm.call);
  ck_assert_ptr_eq(v[2], cm.w);
  free(v);
  v = hk_computation_calling_instrs(cm.add, &n);
  ck_assert_int_eq(n, 0);
  ck_assert_ptr_null(v);
  hk_module_free(cm.m);
}
END_TEST

static void assert_comp_order(hk_module *m, const char *const *want, int n) {
  ck_assert_int_eq(m->n_computations, n);
  for (int k = 0; k < n; k++) {
    ck_assert_str_eq(m->computations[k]->name, want[k]);
    ck_assert_int_eq(m->computations[k]->index, k);
  }
}

START_TEST(sort_computations_callees_first) {
  call_module cm;
  build_call_module(&cm);
  hk_module_sort_computations(cm.m);
  /* XLA's MakeComputationPostOrder: per uncalled computation in module
   * order, its callees depth first in call order, then itself. */
  static const char *const want[] = {"add", "unused", "g", "f", "cond", "body", "entry"};
  assert_comp_order(cm.m, want, 7);
  hk_module_sort_computations(cm.m);   /* a fixed point */
  assert_comp_order(cm.m, want, 7);
  hk_module_free(cm.m);
}
END_TEST

/* Computations calling each other in a cycle (invalid) keep their order,
 * after the others. */
START_TEST(sort_computations_cycle) {
  hk_module *m = hk_module_new("m");
  hk_computation *a = scalar_comp(m, "a", 1), *b = scalar_comp(m, "b", 1);
  hk_computation *e = scalar_comp(m, "e", 1);
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *ca = hk_instr_new(a, HK_OP_CALL, s, 1, &a->root, "ca");
  hk_instr_set_called(ca, 1, &b);
  hk_instr *cb = hk_instr_new(b, HK_OP_CALL, s, 1, &b->root, "cb");
  hk_instr_set_called(cb, 1, &a);
  hk_module_set_entry(m, e);
  hk_module_sort_computations(m);
  static const char *const want[] = {"e", "a", "b"};
  assert_comp_order(m, want, 3);
  hk_module_free(m);
}
END_TEST

START_TEST(call_graph_sites_and_contexts) {
  call_module cm;
  build_call_module(&cm);
  hk_call_graph *g = hk_call_graph_build(cm.m);
  ck_assert_ptr_nonnull(g);
  hk_call_graph_node *add = hk_call_graph_node_of(g, cm.add);
  hk_call_graph_node *gn = hk_call_graph_node_of(g, cm.g);
  hk_call_graph_node *entry = hk_call_graph_node_of(g, cm.entry);
  ck_assert_int_eq(add->n_callers, 3);   /* red, ar, ured: in module order */
  ck_assert_ptr_eq(add->callers[0].instr, cm.unused_red);
  ck_assert_ptr_eq(add->callers[1].instr, cm.red);
  ck_assert_ptr_eq(add->callers[2].instr, cm.ar);
  ck_assert_int_eq(add->context, HK_CALL_EMBEDDED);
  ck_assert_int_eq(gn->n_callers, 2);    /* one site per branch */
  ck_assert_int_eq(gn->context, HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(entry->n_callees, 4);
  ck_assert_ptr_eq(entry->callees[3].callee, cm.body);
  ck_assert_int_eq(entry->callees[3].context, HK_CALL_CONTROL_FLOW);
  ck_assert_int_eq(entry->context, HK_CALL_CONTROL_FLOW);
  /* g has two control-flow call sites */
  ck_assert(!hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  /* one branch to a copy: flat */
  hk_computation *g2 = scalar_comp(cm.m, "g2", 1);
  cm.cnd->called[1] = g2;
  g = hk_call_graph_build(cm.m);
  ck_assert(hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  /* f also used as a reducer: both contexts, not flat */
  hk_instr *p = cm.entry->params[0];
  hk_instr *ops[2] = {p, p};
  hk_instr *red2 = hk_instr_new(cm.entry, HK_OP_REDUCE, p->shape, 2, ops, "red2");
  hk_instr_set_called(red2, 1, &cm.f);
  g = hk_call_graph_build(cm.m);
  ck_assert_int_eq(hk_call_graph_node_of(g, cm.f)->context, HK_CALL_BOTH);
  ck_assert_int_eq(hk_call_graph_node_of(g, cm.g)->context, HK_CALL_BOTH);
  ck_assert(!hk_call_graph_is_flattened(g));
  hk_call_graph_free(g);
  hk_module_free(cm.m);
}
END_TEST

START_TEST(next_channel_id_all_computations) {
  call_module cm;
  build_call_module(&cm);
  ck_assert_int_eq(hk_module_next_channel_id(cm.m), 8);   /* channel 7 in body */
  hk_instr_attrs(cm.unused_red)->channel_id = 41;         /* any computation counts */
  ck_assert_int_eq(hk_module_next_channel_id(cm.m), 42);
  hk_module_free(cm.m);
  hk_module *m = hk_module_new("empty");
  ck_assert_int_eq(hk_module_next_channel_id(m), 1);
  hk_module_free(m);
}
END_TEST

/* The printer lists a computation in XLA's post order, channel edges
 * included: c (channel 1) depends on a (channel 1, listed earlier), so a
 * is printed before c although the root names c first. */
START_TEST(printer_follows_channel_edges) {
  static const char text[] =
      "HloModule m\n\n"
      "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n}\n\n"
      "ENTRY e {\n  p = f32[] parameter(0)\n"
      "  a = f32[] all-reduce(p), channel_id=1, to_apply=add\n"
      "  b = f32[] negate(p)\n"
      "  c = f32[] all-reduce(b), channel_id=1, to_apply=add\n"
      "  ROOT t = (f32[], f32[]) tuple(c, a)\n}\n";
  hk_module *m = NULL;
  ck_assert_ok(hk_parse_module(text, strlen(text), "channels.hlo", &m));
  char *out = hk_module_to_string(m, HK_PRINT_SHORT);
  const char *pa = strstr(out, "  a = "), *pb = strstr(out, "  b = "), *pc = strstr(out, "  c = ");
  ck_assert_msg(pa && pb && pc && pb < pa && pa < pc, "order not p, b, a, c, t:\n%s", out);
  int64_t n;
  hk_instr **order = hk_computation_post_order(m->entry, &n);
  const char *at = out;
  for (int64_t k = 0; k < n; k++) {   /* the printed lines follow the IR's post order */
    char line[64];
    snprintf(line, sizeof line, " %s = ", order[k]->name);
    const char *hit = strstr(at, line);
    ck_assert_msg(hit, "%s not after the previous line:\n%s", order[k]->name, out);
    at = hit;
  }
  free(order);
  free(out);
  hk_module_free(m);
}
END_TEST

static Suite *walks_suite(void) {
  Suite *s = suite_create("walks");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, post_order_random_big);
  tcase_add_test(tc, post_order_random_small);
  tcase_add_test(tc, post_order_random_fallbacks);
  tcase_add_test(tc, post_order_list_already_in_order);
  tcase_add_test(tc, list_is_topological_both_ways);
  tcase_add_test(tc, post_order_big_reversed_list);
  tcase_add_test(tc, post_order_id_table_as_big_as_list);
  tcase_add_test(tc, post_order_concurrent);
  tcase_add_test(tc, calling_instrs);
  tcase_add_test(tc, sort_computations_callees_first);
  tcase_add_test(tc, sort_computations_cycle);
  tcase_add_test(tc, call_graph_sites_and_contexts);
  tcase_add_test(tc, next_channel_id_all_computations);
  tcase_add_test(tc, printer_follows_channel_edges);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(walks_suite)
