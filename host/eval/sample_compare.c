/* sample_compare.c - hk_eval_compare_sampled: chooses output positions
 * (corners, shard boundaries, random), reads each from the global module
 * and from a device of the partitioned one that holds it, and compares;
 * also the dense-evaluation cost estimate that picks dense or sampled. */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "eval/sample_internal.h"

enum { DEFAULT_SAMPLES = 1024, MAX_EVERY_DEVICE = 4096 };

typedef struct sample_run {
  const hk_module *g, *p;
  int64_t parts, reps;
  hk_sample_options o;
  hk_sample_result *out;
  hk_status *st;
  int64_t deadline_ns;
} sample_run;

/* One position: a global index of a leaf, read on one device at a local
 * index. */
typedef struct position {
  int leaf;
  int64_t global[SE_MAX_RANK];
  int64_t local[SE_MAX_RANK];
  int64_t device;
} position;

typedef struct plan {
  position *v;
  int64_t n, cap;
} plan;

static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void plan_push(plan *pl, const position *p) {
  if (pl->n == pl->cap) {
    pl->cap = pl->cap ? pl->cap * 2 : 256;
    pl->v = realloc(pl->v, (size_t)pl->cap * sizeof *pl->v);
    if (!pl->v) hk_out_of_memory();
  }
  pl->v[pl->n++] = *p;
}

/* ---- where a global element lives -------------------------------------------- */

static const hk_sharding *output_sharding(const hk_module *g, const hk_module *p, int leaf) {
  const hk_sharding *s = hk_spmd_result_sharding(g, p);
  s = hk_eval_leaf_sharding(s, leaf);
  return s;
}

/* Devices (partitions) holding global index gi of a leaf of shape gs under
 * s: writes up to cap of them and returns how many there are; off gets the
 * tile offset (the same for all of them). */
static int64_t holders(const hk_sharding *s, const hk_shape *gs, const int64_t *gi, int64_t parts,
                       int64_t *devs, int64_t cap, int64_t *off) {
  for (int d = 0; d < gs->rank; d++) off[d] = 0;
  if (s && s->kind == HK_SHARDING_MAXIMAL) {
    if (cap > 0) devs[0] = s->device;
    return 1;
  }
  if (!s || s->kind != HK_SHARDING_TILED || hk_sharding_data_rank(s) != gs->rank) {
    for (int64_t k = 0; k < parts && k < cap; k++) devs[k] = k;
    return parts;
  }
  int64_t st[HK_MAX_RANK], base = 0;
  hk_strides(s->n_tile_dims, s->tile_dims, st);
  for (int d = 0; d < gs->rank; d++) {
    int64_t chunk = (gs->dims[d] + s->tile_dims[d] - 1) / s->tile_dims[d];
    int64_t t = chunk ? gi[d] / chunk : 0;
    off[d] = t * chunk;
    base += t * st[d];
  }
  int64_t extra = 1;
  for (int d = gs->rank; d < s->n_tile_dims; d++) extra *= s->tile_dims[d];
  for (int64_t k = 0; k < extra && k < cap; k++) devs[k] = s->devices[base + k];
  return extra;
}

/* Adds position gi of leaf, read on the `pick`-th holder (rotating over
 * replicas too), or on every holder when pick < 0. */
static void add_position(const sample_run *r, plan *pl, int leaf, const hk_shape *gs,
                         const int64_t *gi, int64_t pick) {
  const hk_sharding *s = output_sharding(r->g, r->p, leaf);
  int64_t devs[MAX_EVERY_DEVICE], off[SE_MAX_RANK];
  int64_t n = holders(s, gs, gi, r->parts, devs, MAX_EVERY_DEVICE, off);
  if (n > MAX_EVERY_DEVICE) n = MAX_EVERY_DEVICE;
  position p = {.leaf = leaf};
  for (int d = 0; d < gs->rank; d++) {
    p.global[d] = gi[d];
    p.local[d] = gi[d] - off[d];
  }
  if (pick >= 0) {
    p.device = ((pick / n) % r->reps) * r->parts + devs[pick % n];
    plan_push(pl, &p);
    return;
  }
  for (int64_t q = 0; q < r->reps; q++)
    for (int64_t k = 0; k < n && pl->n < MAX_EVERY_DEVICE * 4; k++) {
      p.device = q * r->parts + devs[k];
      plan_push(pl, &p);
    }
}

/* Corners, shard boundaries along sharded dims, then random positions. */
static void plan_leaf(const sample_run *r, plan *pl, int leaf, const hk_shape *gs, int64_t budget,
                      uint64_t *rng) {
  int rank = gs->rank;
  int64_t gi[SE_MAX_RANK] = {0};
  int64_t start = pl->n, pick = 0;
  if (rank == 0) {
    add_position(r, pl, leaf, gs, gi, -1);   /* on every device */
    return;
  }
  int corner_bits = rank < 6 ? rank : 6;
  for (int64_t mask = 0; mask < (1 << corner_bits); mask++) {
    for (int d = 0; d < rank; d++) gi[d] = d < corner_bits && (mask >> d & 1) ? gs->dims[d] - 1 : 0;
    add_position(r, pl, leaf, gs, gi, pick++);
  }
  const hk_sharding *s = output_sharding(r->g, r->p, leaf);
  for (int d = 0; s && s->kind == HK_SHARDING_TILED && d < rank && d < s->n_tile_dims; d++) {
    int64_t parts = s->tile_dims[d], chunk = (gs->dims[d] + parts - 1) / parts;
    int64_t step = parts > 16 ? parts / 16 : 1;
    for (int64_t j = 0; j < parts && parts > 1; j += step)
      for (int end = 0; end < 2; end++) {
        for (int e = 0; e < rank; e++) gi[e] = (int64_t)(next_random(rng) % (uint64_t)gs->dims[e]);
        int64_t first = j * chunk, last = (j + 1) * chunk < gs->dims[d] ? (j + 1) * chunk - 1 : gs->dims[d] - 1;
        if (first > last) continue;
        gi[d] = end ? last : first;
        add_position(r, pl, leaf, gs, gi, pick++);
      }
  }
  /* Random positions in clusters of 4 that share all but the last index,
   * so a row (of a dot, a sort, a reduction) serves several of them. */
  while (pl->n - start < budget) {
    for (int d = 0; d < rank; d++) gi[d] = (int64_t)(next_random(rng) % (uint64_t)gs->dims[d]);
    for (int k = 0; k < 4 && pl->n - start < budget; k++) {
      if (k) gi[rank - 1] = (int64_t)(next_random(rng) % (uint64_t)gs->dims[rank - 1]);
      add_position(r, pl, leaf, gs, gi, pick++);
    }
  }
  for (int d = 0; d < rank; d++) gi[d] = 0;
  add_position(r, pl, leaf, gs, gi, -1);   /* position 0 on every holder, last */
}

static hk_status *check_leaves(const sample_run *r, int64_t *n_leaves) {
  const hk_shape *gs = r->g->entry->root->shape, *ps = r->p->entry->root->shape;
  int64_t n = hk_shape_leaf_count(gs);
  if (n != hk_shape_leaf_count(ps))
    return hk_error(HK_INVALID_ARGUMENT, "the global result has %lld leaves, the partitioned one %lld",
                    (long long)n, (long long)hk_shape_leaf_count(ps));
  for (int k = 0; k < n; k++) {
    const hk_shape *a = se_leaf_shape(gs, k), *b = se_leaf_shape(ps, k);
    if (!hk_shape_is_array(a) || !hk_shape_is_array(b) || a->rank != b->rank || a->elem != b->elem)
      return hk_error(HK_INVALID_ARGUMENT, "result leaf %d: global %s[rank %d], partitioned %s[rank %d]", k,
                      hk_prim_name((hk_prim)a->elem), a->rank, hk_prim_name((hk_prim)b->elem), b->rank);
    if (a->rank > SE_MAX_RANK) return hk_error(HK_UNIMPLEMENTED, "result rank above %d", SE_MAX_RANK);
  }
  *n_leaves = n;
  return NULL;
}

/* ---- comparing ------------------------------------------------------------------ */

static hk_status *read_point(se_ctx *x, int64_t device, int leaf, const int64_t *idx, hk_value **out) {
  const hk_instr *root = x->m->entry->root;
  const hk_shape *ls = se_leaf_shape(root->shape, leaf);
  for (int d = 0; d < ls->rank; d++)
    if (idx[d] < 0 || idx[d] >= ls->dims[d])
      return hk_error(HK_INVALID_ARGUMENT, "result leaf %d: local index %lld of dim %d is outside the partitioned shape",
                      leaf, (long long)idx[d], d);
  se_box b;
  se_box_point(&b, ls->rank, idx);
  return se_eval(x, se_entry_frame(x, device), root, leaf, &b, out);
}

static int64_t linear_of(const hk_shape *s, const int64_t *idx) {
  int64_t lin = 0;
  for (int d = 0; d < s->rank; d++) lin = lin * s->dims[d] + idx[d];
  return lin;
}

/* Compares one position.  With the default atol the slack for summation
 * order is taken from leaf_rms, the scale of the leaf's expected samples
 * (a one-element value has no scale of its own). */
static void record(sample_run *r, const position *p, const hk_value *e, const hk_value *a,
                   double leaf_rms) {
  hk_sample_result *out = r->out;
  hk_compare_result c;
  double atol = r->o.atol, dat, drt;
  if (atol < 0 && hk_prim_is_float((hk_prim)e->elem)) {
    hk_default_tolerance((hk_prim)e->elem, &dat, &drt);
    atol = dat + hk_reassociation_slack((hk_prim)e->elem, leaf_rms);
  }
  hk_value_compare(e, a, atol, r->o.rtol, &c);
  if (c.max_abs_error > out->max_abs_error || isnan(c.max_abs_error)) out->max_abs_error = c.max_abs_error;
  if (c.max_rel_error > out->max_rel_error || isnan(c.max_rel_error)) out->max_rel_error = c.max_rel_error;
  if (!c.equal && out->equal) {
    out->equal = false;
    out->has_mismatch = true;
    out->mismatch_leaf = p->leaf;
    out->mismatch_index = linear_of(se_leaf_shape(r->g->entry->root->shape, p->leaf), p->global);
    out->mismatch_device = p->device;
    out->expected = hk_value_get_f64(e, 0);
    out->actual = hk_value_get_f64(a, 0);
    if (c.message) out->message = strdup(c.message);
  }
  hk_compare_result_free(&c);
  out->samples++;
}

static bool timed_out(const hk_status *st, const se_ctx *a, const se_ctx *b) {
  return st && st->code == HK_FAILED_PRECONDITION && ((a->deadline_ns && now_ns() >= a->deadline_ns) ||
                                                      (b->deadline_ns && now_ns() >= b->deadline_ns));
}

/* Root mean square of the finite expected values per leaf among the first
 * n positions: rms[leaf] (n_leaves entries). */
static void leaf_rms(const plan *pl, hk_value *const *es, int64_t n, int64_t n_leaves, double *rms) {
  int64_t *cnt = calloc((size_t)(n_leaves ? n_leaves : 1), sizeof *cnt);
  if (!cnt) hk_out_of_memory();
  for (int64_t k = 0; k < n_leaves; k++) rms[k] = 0;
  for (int64_t i = 0; i < n; i++) {
    int k = pl->v[i].leaf;
    if (!hk_prim_is_float((hk_prim)es[i]->elem)) continue;
    double x = hk_value_get_f64(es[i], 0);
    if (isfinite(x)) {
      rms[k] += x * x;
      cnt[k]++;
    }
  }
  for (int64_t k = 0; k < n_leaves; k++) rms[k] = cnt[k] ? sqrt(rms[k] / (double)cnt[k]) : 0;
  free(cnt);
}

/* Evaluates every position (both programs), then compares them: the
 * tolerance needs the scale of each leaf's samples. */
static hk_status *compare_plan(sample_run *r, se_ctx *gx, se_ctx *px, const plan *pl,
                               int64_t n_leaves) {
  hk_value **es = calloc((size_t)(pl->n ? pl->n : 1), sizeof *es);
  hk_value **as = calloc((size_t)(pl->n ? pl->n : 1), sizeof *as);
  if (!es || !as) hk_out_of_memory();
  int64_t done = 0;
  hk_status *st = NULL;
  for (int64_t i = 0; i < pl->n && !st; i++) {
    const position *p = &pl->v[i];
    st = read_point(gx, 0, p->leaf, p->global, &es[i]);
    if (st) st = hk_status_prefix(st, "global module");
    if (!st) {
      st = read_point(px, p->device, p->leaf, p->local, &as[i]);
      if (st) st = hk_status_prefix(st, "partitioned module, device %lld", (long long)p->device);
    }
    if (!st) done = i + 1;
    if (timed_out(st, gx, px) && done > 0) {
      hk_status_free(st);
      st = NULL;
      r->out->timed_out = true;
      break;
    }
    se_ctx_trim(gx);
    se_ctx_trim(px);
  }
  if (!st && done) {
    double *rms = malloc(sizeof *rms * (size_t)n_leaves);
    if (!rms) hk_out_of_memory();
    leaf_rms(pl, es, done, n_leaves, rms);
    for (int64_t i = 0; i < done; i++) record(r, &pl->v[i], es[i], as[i], rms[pl->v[i].leaf]);
    free(rms);
  }
  for (int64_t i = 0; i < pl->n; i++) {
    hk_value_release(es[i]);
    hk_value_release(as[i]);
  }
  free(es);
  free(as);
  return st;
}

static hk_status *run_sampled(sample_run *r) {
  int64_t n_leaves = 0;
  HK_TRY(check_leaves(r, &n_leaves));
  int64_t want = r->o.samples > 0 ? r->o.samples : DEFAULT_SAMPLES;
  int64_t budget = want / (n_leaves ? n_leaves : 1);
  if (budget < 16) budget = 16;
  plan pl = {0};
  uint64_t rng = r->o.seed ^ 0x5a5a5a5a5a5a5a5aULL;
  for (int k = 0; k < n_leaves; k++) {
    const hk_shape *gs = se_leaf_shape(r->g->entry->root->shape, k);
    if (hk_shape_elements(gs) > 0) plan_leaf(r, &pl, k, gs, budget, &rng);
  }
  r->out->samples_planned = pl.n;
  se_ctx gx, px;
  hk_status *st = se_ctx_init(&gx, r->g, r->g, false, 1, r->reps, r->o.seed);
  if (!st) st = se_ctx_init(&px, r->p, r->g, true, r->parts, r->reps, r->o.seed);
  else memset(&px, 0, sizeof px);
  /* The deadline also stops long kernels (dot, convolution) midway. */
  gx.deadline_ns = px.deadline_ns = gx.dev.deadline_ns = px.dev.deadline_ns = r->deadline_ns;
  gx.dev_opts.time_limit_ms = px.dev_opts.time_limit_ms = r->o.time_limit_ms;
  if (!st) st = compare_plan(r, &gx, &px, &pl, n_leaves);
  se_ctx_free(&gx);
  se_ctx_free(&px);
  free(pl.v);
  return st;
}

static void *sample_thread(void *arg) {
  sample_run *r = arg;
  r->st = run_sampled(r);
  hk_eval_release_thread_cache();
  return NULL;
}

hk_status *hk_eval_compare_sampled(const hk_module *global, const hk_module *partitioned,
                                   int64_t num_partitions, int64_t num_replicas,
                                   const hk_sample_options *o, hk_sample_result *out) {
  memset(out, 0, sizeof *out);
  out->equal = true;
  if (num_partitions < 1 || num_replicas < 1)
    return hk_error(HK_INVALID_ARGUMENT, "%lld partitions x %lld replicas", (long long)num_partitions,
                    (long long)num_replicas);
  if (!global->entry || !partitioned->entry) return hk_error(HK_INVALID_ARGUMENT, "module without an entry computation");
  static const hk_sample_options defaults = {.atol = -1, .rtol = -1};
  sample_run r = {global, partitioned, num_partitions, num_replicas, o ? *o : defaults, out, NULL, 0};
  if (r.o.time_limit_ms > 0) r.deadline_ns = now_ns() + r.o.time_limit_ms * 1000000;
  /* Requests recurse along operand chains: a thread with a deep stack. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)512 << 20);
  pthread_t t;
  if (pthread_create(&t, &attr, sample_thread, &r) != 0) {
    pthread_attr_destroy(&attr);
    sample_thread(&r);
  } else {
    pthread_attr_destroy(&attr);
    pthread_join(t, NULL);
  }
  if (r.st) {
    hk_sample_result_free(out);
    return r.st;
  }
  return NULL;
}

void hk_sample_result_free(hk_sample_result *r) {
  free(r->message);
  r->message = NULL;
}

/* ---- cost estimate ------------------------------------------------------------------ */

static double instr_macs(const hk_instr *i) {
  if (i->shape->elem == HK_TUPLE) return 0;
  double out = (double)hk_shape_elements(i->shape);
  if (i->opcode == HK_OP_DOT && i->n_operands >= 1 && i->attrs && i->attrs->dot) {
    double k = 1;
    const hk_i64s c = i->attrs->dot->lhs_contracting;
    for (int j = 0; j < c.n; j++) k *= (double)i->operands[0]->shape->dims[c.v[j]];
    return out * k;
  }
  if (i->opcode == HK_OP_CONVOLUTION && i->n_operands == 2 && i->attrs && i->attrs->conv) {
    const hk_shape *ks = i->operands[1]->shape;
    double ofeat = (double)ks->dims[i->attrs->conv->kernel_output_feature];
    return ofeat > 0 ? out * (double)hk_shape_elements(ks) / ofeat : 0;
  }
  return 0;
}

static int64_t largest_leaf(const hk_shape *s) {
  if (s->elem != HK_TUPLE) return hk_shape_is_array(s) ? hk_shape_elements(s) : 0;
  int64_t m = 0;
  for (int i = 0; i < s->n_tuple; i++) {
    int64_t e = largest_leaf(s->tuple[i]);
    if (e > m) m = e;
  }
  return m;
}

hk_eval_cost hk_eval_estimate_cost(const hk_module *m) {
  hk_eval_cost c = {0, 0};
  for (int32_t k = 0; k < m->n_computations; k++)
    for (const hk_instr *i = m->computations[k]->first; i; i = i->next) {
      c.macs += instr_macs(i);
      int64_t e = largest_leaf(i->shape);
      if (e > c.largest_elements) c.largest_elements = e;
    }
  return c;
}
