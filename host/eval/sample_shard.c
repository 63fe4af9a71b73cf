/* sample_shard.c - one device's share of a distributed check: its entry
 * parameters made as the sampled evaluator makes them (a pure function of
 * the global index, so no process builds a global value), and its output
 * piece compared with the global program at positions inside that piece
 * (the whole piece when it is small enough): evaluated on demand, or
 * densely when the global module is small (or, not too big, uses an op
 * the on-demand evaluator lacks or is too slow for it). */
#include <math.h>
#include <time.h>

#include "eval/sample_internal.h"

enum { DENSE_PIECE_ELEMENTS = 1 << 18, DEFAULT_PIECE_SAMPLES = 1024 };
/* A global module this small is evaluated densely (once per device):
 * cheaper than on demand, and every op of the dense evaluator is there. */
#define SMALL_GLOBAL_MACS 1e7
#define SMALL_GLOBAL_ELEMENTS ((int64_t)1 << 20)

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- inputs ------------------------------------------------------------------------ */

/* The value of entry parameter ins on the device of frame f (tuples
 * recursively; *leaf counts array leaves). */
static hk_status *param_value(se_ctx *x, se_frame *f, const hk_instr *ins, const hk_shape *s,
                              int *leaf, hk_value **out) {
  if (s->elem == HK_TUPLE) {
    hk_value **e = calloc((size_t)(s->n_tuple ? s->n_tuple : 1), sizeof *e);
    if (!e) hk_out_of_memory();
    hk_status *st = NULL;
    for (int i = 0; i < s->n_tuple && !st; i++) st = param_value(x, f, ins, s->tuple[i], leaf, &e[i]);
    if (st) {
      for (int i = 0; i < s->n_tuple; i++) hk_value_release(e[i]);
      free(e);
      return st;
    }
    *out = hk_value_new_tuple(s->n_tuple, e);
    free(e);
    return NULL;
  }
  if (!hk_shape_is_array(s)) {
    *out = hk_value_new_token();
    return NULL;
  }
  se_box b;
  se_box_full(&b, s);
  return se_op_parameter_entry(x, f, ins, (*leaf)++, &b, out);
}

/* The entry parameters of m (g itself, or its partitioned program) on
 * device. */
static hk_status *inputs_of(const hk_module *g, const hk_module *p, bool partitioned, int64_t num_partitions,
                            int64_t num_replicas, int64_t device, uint64_t seed, hk_value ***out,
                            int *n_out) {
  se_ctx x;
  HK_TRY(se_ctx_init(&x, p, g, partitioned, num_partitions, num_replicas, seed));
  int np = p->entry->n_params;
  hk_value **v = calloc((size_t)(np ? np : 1), sizeof *v);
  if (!v) hk_out_of_memory();
  hk_status *st = NULL;
  se_frame *f = se_entry_frame(&x, device);
  for (int i = 0; i < np && !st; i++) {
    int leaf = 0;
    st = param_value(&x, f, p->entry->params[i], p->entry->params[i]->shape, &leaf, &v[i]);
    if (st) st = hk_status_prefix(st, "parameter %d", i);
  }
  se_ctx_free(&x);
  if (st) {
    for (int i = 0; i < np; i++) hk_value_release(v[i]);
    free(v);
    return st;
  }
  *out = v;
  *n_out = np;
  return NULL;
}

hk_status *hk_eval_sampled_inputs(const hk_module *g, const hk_module *p, int64_t num_partitions,
                                  int64_t num_replicas, int64_t device, uint64_t seed,
                                  hk_value ***out, int *n_out) {
  if (device < 0 || device >= num_partitions * num_replicas)
    return hk_error(HK_INVALID_ARGUMENT, "device %lld is not in the grid", (long long)device);
  if (!p->entry || !g->entry || p->entry->n_params != g->entry->n_params)
    return hk_error(HK_INVALID_ARGUMENT, "the partitioned entry does not take the global one's parameters");
  return inputs_of(g, p, true, num_partitions, num_replicas, device, seed, out, n_out);
}

/* ---- comparing one device's piece --------------------------------------------------- */

typedef struct piece {
  int leaf;
  const hk_shape *gs;              /* global leaf shape */
  const hk_value *local;           /* the device's leaf */
  se_box box;                      /* what is compared, in global coordinates */
  int64_t off[SE_MAX_RANK];        /* the device's tile offset: local = global - off */
  const hk_value *dense;           /* the global leaf evaluated densely, or NULL: on demand */
} piece;

/* The global program's elements in box b. */
static hk_status *expected_box(se_ctx *gx, se_frame *f, const piece *pc, const se_box *b, hk_value **out) {
  if (!pc->dense) return se_eval(gx, f, gx->m->entry->root, pc->leaf, b, out);
  se_box whole;
  se_box_full(&whole, pc->gs);
  *out = se_value_of_box((hk_prim)pc->dense->elem, b);
  se_copy_box(*out, b, pc->dense, &whole);
  return NULL;
}

static int64_t global_linear(const piece *pc, const int64_t *local_idx) {
  int64_t lin = 0;
  for (int d = 0; d < pc->gs->rank; d++) lin = lin * pc->gs->dims[d] + pc->box.lo[d] + local_idx[d];
  return lin;
}

static void unravel(int rank, const int64_t *dims, int64_t lin, int64_t *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = dims[d] ? lin % dims[d] : 0;
    lin = dims[d] ? lin / dims[d] : 0;
  }
}

/* Folds one comparison (mismatch index mapped to the global one by gidx)
 * into out. */
static void note_compare(hk_sample_result *out, const hk_compare_result *c, int leaf, int64_t device,
                         int64_t gidx) {
  if (c->max_abs_error > out->max_abs_error || isnan(c->max_abs_error)) out->max_abs_error = c->max_abs_error;
  if (c->max_rel_error > out->max_rel_error || isnan(c->max_rel_error)) out->max_rel_error = c->max_rel_error;
  if (c->equal || !out->equal) return;
  out->equal = false;
  out->has_mismatch = c->has_mismatch;
  out->mismatch_leaf = leaf;
  out->mismatch_index = gidx;
  out->mismatch_device = device;
  out->expected = c->expected;
  out->actual = c->actual;
  if (c->message && !out->message) out->message = strdup(c->message);
}

static bool out_of_time(const se_ctx *x, const hk_status *st) {
  return st && st->code == HK_FAILED_PRECONDITION && x->deadline_ns && now_ns() >= x->deadline_ns;
}

/* The elements of box b (inside the piece) compared in one request. */
static hk_status *compare_box(se_ctx *gx, se_frame *f, const piece *pc, const se_box *b, int64_t device,
                              const hk_sample_options *o, hk_sample_result *out) {
  hk_value *want;
  HK_TRY(expected_box(gx, f, pc, b, &want));
  se_box lb = *b, whole = *b;
  for (int d = 0; d < lb.rank; d++) {
    lb.lo[d] -= pc->off[d];
    whole.lo[d] = 0;
    whole.n[d] = pc->local->dims[d];
  }
  hk_value *got = se_value_of_box((hk_prim)pc->local->elem, &lb);
  se_copy_box(got, &lb, pc->local, &whole);
  hk_compare_result c;
  hk_value_compare(want, got, o->atol, o->rtol, &c);
  int64_t idx[SE_MAX_RANK] = {0};
  if (c.has_mismatch) unravel(lb.rank, lb.n, c.mismatch_index, idx);
  for (int d = 0; d < lb.rank; d++) idx[d] += b->lo[d] - pc->box.lo[d];
  note_compare(out, &c, pc->leaf, device, global_linear(pc, idx));
  out->samples += se_box_count(b);
  hk_compare_result_free(&c);
  hk_value_release(want);
  hk_value_release(got);
  return NULL;
}

/* Every element of the piece, in slabs of the outermost dim of about
 * 4096 elements (a time limit then keeps the slabs already compared). */
static hk_status *compare_dense(se_ctx *gx, se_frame *f, const piece *pc, int64_t device,
                                const hk_sample_options *o, hk_sample_result *out) {
  se_box b = pc->box;
  int64_t rows = b.rank ? b.n[0] : 1, per_row = rows ? se_box_count(&b) / rows : 0;
  int64_t step = per_row > 0 && per_row < 4096 ? 4096 / per_row : 1;
  for (int64_t r = 0; r < rows; r += step) {
    if (b.rank) {
      b.lo[0] = pc->box.lo[0] + r;
      b.n[0] = r + step < rows ? step : rows - r;
    }
    hk_status *st = compare_box(gx, f, pc, &b, device, o, out);
    if (out_of_time(gx, st) && out->samples > 0) {
      hk_status_free(st);
      out->timed_out = true;
      return NULL;
    }
    if (st) return st;
    se_ctx_trim(gx);
    if (!b.rank) break;
  }
  return NULL;
}

static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* k-th position of the piece (local index): its corners first, then random. */
static void pick_position(const piece *pc, int64_t k, uint64_t *rng, int64_t *idx) {
  int rank = pc->box.rank, bits = rank < 6 ? rank : 6;
  for (int d = 0; d < rank; d++) {
    if (k < (1 << bits)) idx[d] = d < bits && (k >> d & 1) ? pc->box.n[d] - 1 : 0;
    else idx[d] = (int64_t)(next_random(rng) % (uint64_t)pc->box.n[d]);
  }
}

/* Sampled positions of a big piece, compared together (the tolerance's
 * scale comes from all of them). */
static hk_status *compare_sampled(se_ctx *gx, se_frame *f, const piece *pc, int64_t device,
                                  const hk_sample_options *o, hk_sample_result *out) {
  int64_t want_n = o->samples > 0 ? o->samples : DEFAULT_PIECE_SAMPLES;
  int64_t *gl = malloc(sizeof *gl * (size_t)want_n);
  hk_value *want = hk_value_new_array((hk_prim)pc->local->elem, 1, &want_n);
  hk_value *got = hk_value_new_array((hk_prim)pc->local->elem, 1, &want_n);
  if (!gl) hk_out_of_memory();
  uint64_t rng = o->seed ^ (uint64_t)device * 0x9e3779b97f4a7c15ULL ^ (uint64_t)pc->leaf;
  int es = hk_prim_storage_bytes((hk_prim)pc->local->elem);
  int64_t lst[SE_MAX_RANK], done = 0;
  hk_strides(pc->local->rank, pc->local->dims, lst);
  hk_status *st = NULL;
  for (; done < want_n && !st; done++) {
    int64_t idx[SE_MAX_RANK], li = 0;
    pick_position(pc, done, &rng, idx);
    se_box b = pc->box;
    for (int d = 0; d < b.rank; d++) {
      b.lo[d] += idx[d];
      b.n[d] = 1;
      li += (pc->box.lo[d] - pc->off[d] + idx[d]) * lst[d];
    }
    hk_value *e;
    st = expected_box(gx, f, pc, &b, &e);
    if (out_of_time(gx, st) && done) {
      hk_status_free(st);
      st = NULL;
      out->timed_out = true;
      break;
    }
    if (st) break;
    memcpy((uint8_t *)want->data + done * es, e->data, (size_t)es);
    memcpy((uint8_t *)got->data + done * es, (const uint8_t *)pc->local->data + li * es, (size_t)es);
    gl[done] = global_linear(pc, idx);
    hk_value_release(e);
    se_ctx_trim(gx);
  }
  if (!st && done) {
    want->dims[0] = got->dims[0] = want->n = got->n = done;
    want->nbytes = got->nbytes = done * es;
    hk_compare_result c;
    hk_value_compare(want, got, o->atol, o->rtol, &c);
    note_compare(out, &c, pc->leaf, device, c.has_mismatch ? gl[c.mismatch_index] : 0);
    hk_compare_result_free(&c);
    out->samples += done;
  }
  free(gl);
  hk_value_release(want);
  hk_value_release(got);
  return st;
}

static const hk_sharding *leaf_sharding(const hk_module *g, const hk_module *p, int leaf) {
  const hk_sharding *s = hk_spmd_result_sharding(g, p);
  s = hk_eval_leaf_sharding(s, leaf);
  return s;
}

/* Where device `partition` is among the partitions holding the same tile
 * of s as it (*index of *count; replicated: every partition). */
static void holder_position(const hk_sharding *s, int64_t partition, int64_t num_partitions,
                            int64_t *index, int64_t *count) {
  *index = partition;
  *count = num_partitions;
  if (!s || s->kind != HK_SHARDING_TILED) return;
  int rank = hk_sharding_data_rank(s);
  int64_t mine[HK_MAX_RANK], other[HK_MAX_RANK];
  if (!hk_sharding_tile_index(s, partition, mine)) return;
  *index = 0;
  *count = 0;
  for (int64_t q = 0; q < num_partitions; q++)
    if (hk_sharding_tile_index(s, q, other) && !memcmp(mine, other, sizeof(int64_t) * (size_t)rank)) {
      if (q < partition) (*index)++;
      (*count)++;
    }
}

/* Of a piece held by `count` devices, holder `index` compares one slice
 * along the outermost dim longer than 1 (a holder left without rows
 * compares the piece's first element), so the positions compared grow
 * with the devices instead of every holder repeating them. */
static void take_slice(se_box *b, int64_t index, int64_t count) {
  int d = 0;
  while (d < b->rank && b->n[d] <= 1) d++;
  if (d == b->rank || count <= 1) return;
  int64_t n = b->n[d], lo = index * n / count, hi = (index + 1) * n / count;
  if (hi > lo) {
    b->lo[d] += lo;
    b->n[d] = hi - lo;
    return;
  }
  for (int e = 0; e < b->rank; e++) b->n[e] = 1;
}

/* The slice of leaf k's piece this device compares: false when it holds
 * none. */
static hk_status *find_piece(const hk_module *g, const hk_module *p, int64_t device, int64_t num_partitions,
                             int64_t num_replicas, int leaf, const hk_value *local, piece *pc, bool *holds) {
  const hk_shape *gs = se_leaf_shape(g->entry->root->shape, leaf);
  int64_t partition = device % num_partitions, replica = device / num_partitions;
  *holds = false;
  if (gs && !hk_shape_is_array(gs) && !hk_prim_is_array((hk_prim)local->elem)) return NULL;   /* tokens */
  if (!gs || !hk_shape_is_array(gs) || gs->rank != local->rank || gs->elem != local->elem ||
      gs->rank > SE_MAX_RANK) {
    char *a = gs ? hk_shape_to_string(gs) : strdup("?"), *b = hk_value_shape_string(local);
    hk_status *st = hk_error(HK_INVALID_ARGUMENT, "result leaf %d: the device's %s does not fit the global %s",
                             leaf, b, a);
    free(a);
    free(b);
    return st;
  }
  const hk_sharding *s = leaf_sharding(g, p, leaf);
  int64_t off[HK_MAX_RANK] = {0}, index = 0, count = 1;
  if (s && s->kind == HK_SHARDING_MAXIMAL && s->device != partition) return NULL;
  bool tiled = s && s->kind == HK_SHARDING_TILED && hk_sharding_data_rank(s) == gs->rank;
  if (tiled && !hk_sharding_tile_offset(s, gs, partition, off)) return NULL;
  if (!s || s->kind != HK_SHARDING_MAXIMAL) holder_position(tiled ? s : NULL, partition, num_partitions, &index, &count);
  pc->leaf = leaf;
  pc->gs = gs;
  pc->local = local;
  pc->box.rank = gs->rank;
  for (int d = 0; d < gs->rank; d++) {
    pc->box.lo[d] = pc->off[d] = off[d];
    pc->box.n[d] = local->dims[d] < gs->dims[d] - off[d] ? local->dims[d] : gs->dims[d] - off[d];
    if (pc->box.n[d] <= 0) return NULL;
  }
  take_slice(&pc->box, replica * count + index, count * num_replicas);
  *holds = true;
  return NULL;
}

/* Compares every leaf's piece (dense: the global result evaluated densely,
 * else on demand). */
static hk_status *compare_leaves(const hk_module *g, const hk_module *p, int64_t num_partitions,
                                 int64_t num_replicas, int64_t device, const hk_value *result,
                                 const hk_value *dense, const hk_sample_options *o, hk_sample_result *out,
                                 bool *ran_out) {
  se_ctx gx;
  HK_TRY(se_ctx_init(&gx, g, g, false, 1, num_replicas, o->seed));
  if (o->time_limit_ms > 0) {
    gx.deadline_ns = gx.dev.deadline_ns = now_ns() + o->time_limit_ms * 1000000;
    gx.dev_opts.time_limit_ms = o->time_limit_ms;
  }
  se_frame *f = se_entry_frame(&gx, device / num_partitions);
  hk_status *st = NULL;
  for (int k = 0; k < hk_value_leaf_count(result) && !st && !out->timed_out; k++) {
    piece pc;
    bool holds = false;
    st = find_piece(g, p, device, num_partitions, num_replicas, k, hk_value_leaf(result, k), &pc, &holds);
    if (st || !holds) continue;
    pc.dense = dense ? hk_value_leaf(dense, k) : NULL;
    int64_t count = se_box_count(&pc.box), budget = o->samples > 0 ? o->samples : DEFAULT_PIECE_SAMPLES;
    out->samples_planned += count <= DENSE_PIECE_ELEMENTS ? count : budget;
    int64_t compared_before = out->samples;
    st = count <= DENSE_PIECE_ELEMENTS ? compare_dense(&gx, f, &pc, device, o, out)
                                       : compare_sampled(&gx, f, &pc, device, o, out);
    /* A whole piece whose on-demand box is over the evaluator's request
     * limit (a convolution's input, say) is compared at sampled positions,
     * each of which needs only its own window. */
    if (st && st->code == HK_UNIMPLEMENTED && !pc.dense && count <= DENSE_PIECE_ELEMENTS &&
        out->samples == compared_before) {
      hk_status_free(st);
      se_ctx_trim(&gx);
      out->samples_planned += budget - count;
      st = compare_sampled(&gx, f, &pc, device, o, out);
    }
    se_ctx_trim(&gx);
  }
  *ran_out = out_of_time(&gx, st);
  se_ctx_free(&gx);
  return st;
}

/* True when the global module costs at most macs multiply-adds and
 * largest elements in its biggest value. */
static bool global_fits(const hk_module *g, double macs, int64_t largest) {
  hk_eval_options limits = {0};
  hk_status *st = hk_eval_check_sizes(g, &limits);
  if (st) {
    hk_status_free(st);
    return false;
  }
  hk_eval_cost cost = hk_eval_estimate_cost(g);
  return cost.macs <= macs && cost.largest_elements <= largest;
}

/* The global module's result on `replica`, evaluated densely on the same
 * inputs. */
static hk_status *global_dense(const hk_module *g, int64_t num_replicas, int64_t replica, uint64_t seed,
                               hk_value **out) {
  hk_value ***args = calloc((size_t)num_replicas, sizeof *args);
  hk_value **res = calloc((size_t)num_replicas, sizeof *res);
  if (!args || !res) hk_out_of_memory();
  int n = 0;
  hk_status *st = NULL;
  for (int64_t r = 0; r < num_replicas && !st; r++) st = inputs_of(g, g, false, 1, num_replicas, r, seed, &args[r], &n);
  hk_eval_options eo = {.seed = seed, .opaque_custom_calls = true};
  if (!st && num_replicas == 1) st = hk_eval_module(g, args[0], n, &res[0], &eo, NULL);
  else if (!st) st = hk_eval_spmd(g, 1, num_replicas, (hk_value *const *const *)args, n, res, &eo, NULL);
  for (int64_t r = 0; r < num_replicas; r++) {
    for (int i = 0; args[r] && i < n; i++) hk_value_release(args[r][i]);
    free(args[r]);
    if (r == replica && !st) *out = res[r];
    else hk_value_release(res[r]);
  }
  free(args);
  free(res);
  return st;
}

/* Compares against the dense global result. */
static hk_status *compare_with_dense(const hk_module *g, const hk_module *p, int64_t num_partitions,
                                     int64_t num_replicas, int64_t device, const hk_value *result,
                                     const hk_sample_options *o, hk_sample_result *out) {
  hk_value *dense = NULL;
  HK_TRY(global_dense(g, num_replicas, device / num_partitions, o->seed, &dense));
  bool ran_out = false;
  hk_status *st = compare_leaves(g, p, num_partitions, num_replicas, device, result, dense, o, out, &ran_out);
  hk_value_release(dense);
  return st;
}

hk_status *hk_eval_compare_piece(const hk_module *g, const hk_module *p, int64_t num_partitions,
                                 int64_t num_replicas, int64_t device, const hk_value *result,
                                 const hk_sample_options *o, hk_sample_result *out) {
  static const hk_sample_options defaults = {.atol = -1, .rtol = -1};
  if (!o) o = &defaults;
  memset(out, 0, sizeof *out);
  out->equal = true;
  int64_t n_leaves = hk_value_leaf_count(result);
  if (n_leaves != hk_shape_leaf_count(g->entry->root->shape))
    return hk_error(HK_INVALID_ARGUMENT, "device %lld returns %lld leaves, the global program %lld",
                    (long long)device, (long long)n_leaves, (long long)hk_shape_leaf_count(g->entry->root->shape));
  hk_status *st;
  if (global_fits(g, SMALL_GLOBAL_MACS, SMALL_GLOBAL_ELEMENTS)) {
    st = compare_with_dense(g, p, num_partitions, num_replicas, device, result, o, out);
  } else {
    bool ran_out = false;
    st = compare_leaves(g, p, num_partitions, num_replicas, device, result, NULL, o, out, &ran_out);
    /* An op the on-demand evaluator lacks, or not one slab in the time
     * limit: the dense evaluator, when the global module is not too big
     * for it (the thread check's limits). */
    if (st && (st->code == HK_UNIMPLEMENTED || ran_out) && global_fits(g, 2e9, (int64_t)1 << 24)) {
      hk_status_free(st);
      hk_sample_result_free(out);
      memset(out, 0, sizeof *out);
      out->equal = true;
      st = compare_with_dense(g, p, num_partitions, num_replicas, device, result, o, out);
    }
  }
  if (st) hk_sample_result_free(out);
  return st ? hk_status_prefix(st, "global module") : NULL;
}
