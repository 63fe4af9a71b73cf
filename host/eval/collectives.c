/* collectives.c - all-reduce, all-gather, reduce-scatter, all-to-all,
 * collective-permute and collective-broadcast: participant groups as XLA's
 * CollectiveOpGroupMode defines them, data exchanged through the device's
 * collective back end. */
#include <math.h>

#include "eval/eval_internal.h"

static const char *const kind_names[HK_EVAL_NUM_COLLECTIVE_KINDS] = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
    "collective-broadcast"};

const char *hk_collective_kind_name(int kind) {
  return kind >= 0 && kind < HK_EVAL_NUM_COLLECTIVE_KINDS ? kind_names[kind] : "unknown";
}

static bool has_global_ids_attr(hk_opcode op) {
  return op == HK_OP_ALL_REDUCE || op == HK_OP_ALL_REDUCE_START || op == HK_OP_ALL_GATHER ||
         op == HK_OP_ALL_GATHER_START || op == HK_OP_REDUCE_SCATTER;
}

_Static_assert((int)HK_RED_XOR == (int)HK_REDUCE_XOR && (int)HK_RED_ADD == (int)HK_REDUCE_ADD,
               "the ABI's reduce kinds mirror the evaluator's reducer kinds");

hk_reduce_kind hk_collective_reducer(const hk_instr *ins) {
  if (ins->n_called < 1 || !ins->called[0]) return HK_REDUCE_GENERIC;
  return (hk_reduce_kind)hk_reducer_kind_of(ins->called[0]);
}

hk_group_mode hk_collective_group_mode(const hk_instr *ins) {
  bool channel = hk_instr_has_channel_id(ins);
  bool global = ins->attrs && ins->attrs->use_global_device_ids;
  if (!channel) return HK_MODE_CROSS_REPLICA;
  if (!has_global_ids_attr((hk_opcode)ins->opcode)) return HK_MODE_CROSS_PARTITION;
  return global ? HK_MODE_FLATTENED : HK_MODE_CROSS_REPLICA_AND_PARTITION;
}

void hk_id_groups_free(hk_id_groups *g) {
  free(g->start);
  free(g->ids);
}

void hk_collective_id_groups(const hk_instr *ins, hk_group_mode mode, int64_t num_partitions,
                             int64_t num_replicas, hk_id_groups *g) {
  const hk_replica_groups *rg = ins->attrs ? ins->attrs->replica_groups : NULL;
  if (rg && rg->n_groups > 0 && rg->ids && rg->group_start) {
    g->n = rg->n_groups;
    int32_t total = rg->group_start[rg->n_groups];
    g->start = malloc((size_t)(g->n + 1) * sizeof(int32_t));
    g->ids = malloc((size_t)(total ? total : 1) * sizeof(int64_t));
    if (!g->start || !g->ids) hk_out_of_memory();
    memcpy(g->start, rg->group_start, (size_t)(g->n + 1) * sizeof(int32_t));
    memcpy(g->ids, rg->ids, (size_t)total * sizeof(int64_t));
    return;
  }
  if (rg && rg->iota && rg->iota->n_dims == 2) {
    int64_t ng = rg->iota->dims[0], gs = rg->iota->dims[1];
    g->n = (int32_t)ng;
    g->start = malloc((size_t)(ng + 1) * sizeof(int32_t));
    g->ids = malloc((size_t)(ng * gs > 0 ? ng * gs : 1) * sizeof(int64_t));
    if (!g->start || !g->ids) hk_out_of_memory();
    hk_iota_expand(rg->iota, g->ids);
    for (int64_t i = 0; i <= ng; i++) g->start[i] = (int32_t)(i * gs);
    return;
  }
  int64_t n = mode == HK_MODE_CROSS_PARTITION ? num_partitions : num_replicas;
  if (mode == HK_MODE_FLATTENED) n = num_partitions * num_replicas;
  g->n = 1;
  g->start = malloc(2 * sizeof(int32_t));
  g->ids = malloc((size_t)n * sizeof(int64_t));
  if (!g->start || !g->ids) hk_out_of_memory();
  g->start[0] = 0;
  g->start[1] = (int32_t)n;
  for (int64_t i = 0; i < n; i++) g->ids[i] = i;
}

/* Participants (global device ids, XLA's order) of this device's group. */
static hk_status *participants(const hk_instr *ins, const hk_device_ctx *d, int64_t **out,
                               int32_t *n_out, int32_t *rank) {
  hk_group_mode mode = hk_collective_group_mode(ins);
  hk_id_groups g;
  hk_collective_id_groups(ins, mode, d->num_partitions, d->num_replicas, &g);
  int64_t me = d->replica * d->num_partitions + d->partition;
  int64_t key = mode == HK_MODE_CROSS_PARTITION ? d->partition
              : mode == HK_MODE_FLATTENED     ? me
                                           : d->replica;
  int32_t gi = -1;
  for (int32_t i = 0; i < g.n && gi < 0; i++)
    for (int32_t j = g.start[i]; j < g.start[i + 1]; j++)
      if (g.ids[j] == key) gi = i;
  if (gi < 0) {
    hk_id_groups_free(&g);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "device %lld (replica %lld, partition %lld) is in no replica group",
                         (long long)me, (long long)d->replica, (long long)d->partition);
  }
  int32_t gs = g.start[gi + 1] - g.start[gi];
  int64_t mult = mode == HK_MODE_CROSS_REPLICA_AND_PARTITION ? d->num_partitions : 1;
  int64_t *p = malloc((size_t)(gs * mult) * sizeof(int64_t));
  if (!p) hk_out_of_memory();
  int32_t n = 0;
  hk_status *st = NULL;
  for (int32_t j = g.start[gi]; j < g.start[gi + 1]; j++) {
    int64_t id = g.ids[j];
    for (int64_t q = 0; q < mult; q++) {
      int64_t dev = mode == HK_MODE_CROSS_REPLICA ? id * d->num_partitions + d->partition
                  : mode == HK_MODE_CROSS_PARTITION ? d->replica * d->num_partitions + id
                  : mode == HK_MODE_FLATTENED ? id
                                           : id * d->num_partitions + q;
      if (!st && (dev < 0 || dev >= d->num_partitions * d->num_replicas))   /* the first one only */
        st = hk_eval_error(ins, HK_FAILED_PRECONDITION,
                           "replica group id %lld names a device that does not run (%lld replicas x %lld partitions)",
                           (long long)id, (long long)d->num_replicas, (long long)d->num_partitions);
      if (dev == me) *rank = n;
      p[n++] = dev;
    }
  }
  hk_id_groups_free(&g);
  if (st) {
    free(p);
    return st;
  }
  *out = p;
  *n_out = n;
  return NULL;
}

/* ---- combining -------------------------------------------------------------------- */

typedef struct combine_ctx {
  hk_device_ctx *d;
  const hk_computation *c;
  hk_reducer_kind kind;
  hk_prim p;
  hk_scalar_prog *prog;            /* generic reducer compiled, or NULL */
} combine_ctx;

static combine_ctx combine_ctx_of(hk_device_ctx *d, const hk_computation *c, hk_prim p) {
  combine_ctx cc = {d, c, hk_reducer_kind_of(c), p, NULL};
  if (cc.kind == HK_RED_GENERIC || hk_prim_is_complex(p) || (hk_prim_is_float(p) && cc.kind >= HK_RED_AND))
    cc.prog = hk_scalar_prog_compile_typed(c, 2, (hk_prim[]){p, p}, 1, &p);
  return cc;
}

static hk_status *combine_generic(combine_ctx *c, void *acc, const void *in, int64_t n) {
  int es = hk_esize(c->p);
  if (c->prog) {
    hk_value va = {.elem = (uint8_t)c->p, .n = n, .data = acc};
    hk_value vb = {.elem = (uint8_t)c->p, .n = n, .data = (void *)in};
    for (int64_t i = 0; i < n; i++) {
      hk_scalar_prog_set_arg(c->prog, 0, &va, i);
      hk_scalar_prog_set_arg(c->prog, 1, &vb, i);
      hk_scalar_prog_run(c->prog);
      hk_scalar_prog_get_result(c->prog, 0, &va, i);
    }
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    hk_value *a = hk_value_new_array(c->p, 0, NULL), *b = hk_value_new_array(c->p, 0, NULL);
    memcpy(a->data, (uint8_t *)acc + i * es, (size_t)es);
    memcpy(b->data, (const uint8_t *)in + i * es, (size_t)es);
    hk_value *args[2] = {a, b}, *r = NULL;
    hk_status *st = hk_eval_scalar_call(c->d, c->c, args, 2, &r);
    hk_value_release(a);
    hk_value_release(b);
    if (st) return st;
    memcpy((uint8_t *)acc + i * es, r->data, (size_t)es);
    hk_value_release(r);
  }
  return NULL;
}

static hk_status *combine(void *ctx, void *acc, const void *in, int64_t n) {
  combine_ctx *c = ctx;
  if (c->kind == HK_RED_GENERIC || hk_prim_is_complex(c->p) ||
      (hk_prim_is_float(c->p) && c->kind >= HK_RED_AND))
    return combine_generic(c, acc, in, n);
  if (c->p == HK_F32 && c->kind == HK_RED_ADD) {
    float *a = acc;
    const float *b = in;
    for (int64_t i = 0; i < n; i++) a[i] += b[i];
    return NULL;
  }
  hk_value va = {.elem = (uint8_t)c->p, .n = n, .data = acc};
  hk_value vb = {.elem = (uint8_t)c->p, .n = n, .data = (void *)in};
  bool fl = hk_prim_is_float(c->p), sgn = hk_prim_is_signed_int(c->p);
  for (int64_t i = 0; i < n; i++) {
    if (fl) {
      double x = hk_value_get_f64(&va, i), y = hk_value_get_f64(&vb, i), r;
      switch (c->kind) {
        case HK_RED_ADD: r = x + y; break;
        case HK_RED_MUL: r = x * y; break;
        case HK_RED_MAX: r = isnan(x) || isnan(y) ? NAN : x > y ? x : y; break;
        default: r = isnan(x) || isnan(y) ? NAN : x < y ? x : y; break;
      }
      hk_value_set_f64(&va, i, r);
    } else {
      int64_t x = hk_value_get_i64(&va, i), y = hk_value_get_i64(&vb, i), r;
      uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
      switch (c->kind) {
        case HK_RED_ADD: r = (int64_t)(ux + uy); break;
        case HK_RED_MUL: r = (int64_t)(ux * uy); break;
        case HK_RED_MAX: r = sgn ? (x > y ? x : y) : (int64_t)(ux > uy ? ux : uy); break;
        case HK_RED_MIN: r = sgn ? (x < y ? x : y) : (int64_t)(ux < uy ? ux : uy); break;
        case HK_RED_AND: r = x & y; break;
        case HK_RED_OR: r = x | y; break;
        default: r = x ^ y; break;
      }
      hk_value_set_i64(&va, i, r);
    }
  }
  return NULL;
}

/* ---- per-op ------------------------------------------------------------------------- */

typedef struct coll {
  hk_device_ctx *d;
  const hk_instr *ins;
  hk_collective_op op;
  int64_t *group;
} coll;

static hk_status *need_backend(coll *c) {
  if (c->op.group_size > 1 && !c->d->backend)
    return hk_eval_error(c->ins, HK_FAILED_PRECONDITION,
                         "needs %d devices; run it on several devices (--num-partitions/--num-replicas)",
                         c->op.group_size);
  return NULL;
}

static void count(coll *c, int kind, int64_t bytes) {
  c->d->stats.collective_count[kind]++;
  c->d->stats.collective_bytes[kind] += bytes;
}

static hk_status *all_reduce_one(coll *c, const hk_value *in, hk_value **out) {
  combine_ctx cc = combine_ctx_of(c->d, c->ins->called[0], (hk_prim)in->elem);
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, in->dims);
  hk_status *st = NULL;
  if (c->op.group_size == 1) memcpy(r->data, in->data, (size_t)in->nbytes);
  else st = c->d->backend->vt->all_reduce(c->d->backend, &c->op, in->data, r->data, in->n,
                                          hk_esize(in->elem), combine, &cc);
  hk_scalar_prog_free(cc.prog);
  if (st) {
    hk_value_release(r);
    return st;
  }
  count(c, HK_COLL_ALL_REDUCE, in->nbytes);
  *out = r;
  return NULL;
}

/* Applies f to every operand; a tuple result when the op has several. */
static hk_status *per_operand(coll *c, hk_value *const *ops,
                              hk_status *(*f)(coll *, const hk_value *, hk_value **),
                              hk_value **out) {
  int n = c->ins->n_operands;
  if (n == 1 && ops[0]->elem != HK_TUPLE && c->ins->shape->elem != HK_TUPLE) return f(c, ops[0], out);
  const hk_value *const *in = (const hk_value *const *)ops;
  if (n == 1 && ops[0]->elem == HK_TUPLE) {
    in = (const hk_value *const *)ops[0]->elems;
    n = ops[0]->n_elems;
  }
  hk_value **r = calloc((size_t)(n ? n : 1), sizeof(hk_value *));
  if (!r) hk_out_of_memory();
  hk_status *st = NULL;
  int64_t before[HK_EVAL_NUM_COLLECTIVE_KINDS];
  memcpy(before, c->d->stats.collective_count, sizeof before);
  for (int k = 0; k < n && !st; k++) {
    c->op.sequence = c->op.sequence * 64 + k;   /* distinct key per operand */
    st = f(c, in[k], &r[k]);
    c->op.sequence = (c->op.sequence - k) / 64;
  }
  /* A tuple-shaped (combined) collective is one collective, whatever the
   * number of operands; its bytes are the sum over them. */
  for (int k = 0; k < HK_EVAL_NUM_COLLECTIVE_KINDS; k++)
    if (c->d->stats.collective_count[k] > before[k]) c->d->stats.collective_count[k] = before[k] + 1;
  if (st) {
    for (int k = 0; k < n; k++) hk_value_release(r[k]);
    free(r);
    return st;
  }
  *out = hk_value_new_tuple(n, r);
  free(r);
  return NULL;
}

static hk_status *get_dim(coll *c, const hk_value *in, int64_t *dim) {
  if (c->ins->n_dims != 1 || c->ins->dims[0] < 0 || c->ins->dims[0] >= in->rank)
    return hk_eval_error(c->ins, HK_INVALID_ARGUMENT, "bad dimensions=");
  *dim = c->ins->dims[0];
  return NULL;
}

static hk_status *all_gather_one(coll *c, const hk_value *in, hk_value **out) {
  int64_t dim = 0;
  HK_TRY(get_dim(c, in, &dim));
  int G = c->op.group_size;
  int64_t dims[HK_MAX_RANK];
  memcpy(dims, in->dims, (size_t)in->rank * sizeof(int64_t));
  dims[dim] *= G;
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, dims);
  uint8_t *all = malloc((size_t)(in->nbytes * G > 0 ? in->nbytes * G : 1));
  if (!all) hk_out_of_memory();
  hk_status *st = NULL;
  if (G == 1) memcpy(all, in->data, (size_t)in->nbytes);
  else st = c->d->backend->vt->all_gather(c->d->backend, &c->op, in->data, in->nbytes, all);
  if (!st) {
    int64_t outer = hk_dims_product((int)dim, in->dims);
    int64_t blk = in->n ? in->nbytes / (outer ? outer : 1) : 0;
    for (int64_t o = 0; o < outer; o++)
      for (int g = 0; g < G; g++)
        memcpy((uint8_t *)r->data + (o * G + g) * blk, all + g * in->nbytes + o * blk, (size_t)blk);
    count(c, HK_COLL_ALL_GATHER, in->nbytes);
  }
  free(all);
  if (st) {
    hk_value_release(r);
    return st;
  }
  *out = r;
  return NULL;
}

/* Rearranges in (split in G pieces along dim) into G contiguous chunks. */
static uint8_t *chunk_along(const hk_value *in, int64_t dim, int G, int64_t *chunk_bytes) {
  int64_t outer = hk_dims_product((int)dim, in->dims);
  int64_t rowb = outer ? in->nbytes / outer : 0;     /* one outer slice */
  int64_t pb = rowb / G;                              /* one piece of a slice */
  uint8_t *buf = malloc((size_t)(in->nbytes ? in->nbytes : 1));
  if (!buf) hk_out_of_memory();
  for (int g = 0; g < G; g++)
    for (int64_t o = 0; o < outer; o++)
      memcpy(buf + g * outer * pb + o * pb, (const uint8_t *)in->data + o * rowb + g * pb, (size_t)pb);
  *chunk_bytes = outer * pb;
  return buf;
}

static hk_status *reduce_scatter_one(coll *c, const hk_value *in, hk_value **out) {
  int64_t dim = 0;
  HK_TRY(get_dim(c, in, &dim));
  int G = c->op.group_size;
  if (in->dims[dim] % G)
    return hk_eval_error(c->ins, HK_INVALID_ARGUMENT, "dimension %lld not divisible by %d", (long long)dim, G);
  int64_t dims[HK_MAX_RANK], cb;
  memcpy(dims, in->dims, (size_t)in->rank * sizeof(int64_t));
  dims[dim] /= G;
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, dims);
  uint8_t *chunks = chunk_along(in, dim, G, &cb);
  combine_ctx cc = combine_ctx_of(c->d, c->ins->called[0], (hk_prim)in->elem);
  hk_status *st = NULL;
  if (G == 1) memcpy(r->data, chunks, (size_t)r->nbytes);
  else st = c->d->backend->vt->reduce_scatter(c->d->backend, &c->op, chunks, r->data, r->n,
                                              hk_esize(in->elem), combine, &cc);
  hk_scalar_prog_free(cc.prog);
  free(chunks);
  if (st) {
    hk_value_release(r);
    return st;
  }
  count(c, HK_COLL_REDUCE_SCATTER, in->nbytes);
  *out = r;
  return NULL;
}

static hk_status *all_to_all_array(coll *c, const hk_value *in, hk_value **out) {
  int64_t dim = 0;
  HK_TRY(get_dim(c, in, &dim));
  int G = c->op.group_size;
  if (in->dims[dim] % G)
    return hk_eval_error(c->ins, HK_INVALID_ARGUMENT, "split dimension not divisible by %d", G);
  int64_t cb;
  uint8_t *chunks = chunk_along(in, dim, G, &cb);
  uint8_t *recv = malloc((size_t)(in->nbytes ? in->nbytes : 1));
  if (!recv) hk_out_of_memory();
  hk_status *st = NULL;
  if (G == 1) memcpy(recv, chunks, (size_t)in->nbytes);
  else st = c->d->backend->vt->all_to_all(c->d->backend, &c->op, chunks, cb, recv);
  free(chunks);
  if (st) {
    free(recv);
    return st;
  }
  /* recv holds G chunks (from each participant) to concatenate along dim. */
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, in->dims);
  int64_t outer = hk_dims_product((int)dim, in->dims);
  int64_t pb = outer ? cb / outer : 0, rowb = pb * G;
  for (int g = 0; g < G; g++)
    for (int64_t o = 0; o < outer; o++)
      memcpy((uint8_t *)r->data + o * rowb + g * pb, recv + g * cb + o * pb, (size_t)pb);
  free(recv);
  count(c, HK_COLL_ALL_TO_ALL, in->nbytes);
  *out = r;
  return NULL;
}

static hk_status *all_to_all_tuple(coll *c, hk_value *const *ops, hk_value **out) {
  int G = c->op.group_size, n = c->ins->n_operands;
  if (n != G) return hk_eval_error(c->ins, HK_INVALID_ARGUMENT, "tuple all-to-all needs %d operands", G);
  int64_t nb = ops[0]->nbytes;
  for (int k = 0; k < n; k++)
    if (ops[k]->nbytes != nb || ops[k]->elem == HK_TUPLE)
      return hk_eval_error(c->ins, HK_UNIMPLEMENTED, "tuple all-to-all with differently sized operands");
  uint8_t *send = malloc((size_t)(nb * G > 0 ? nb * G : 1)), *recv = malloc((size_t)(nb * G > 0 ? nb * G : 1));
  if (!send || !recv) hk_out_of_memory();
  for (int k = 0; k < n; k++) memcpy(send + k * nb, ops[k]->data, (size_t)nb);
  hk_status *st = G == 1 ? (memcpy(recv, send, (size_t)nb), NULL)
                         : c->d->backend->vt->all_to_all(c->d->backend, &c->op, send, nb, recv);
  free(send);
  if (st) {
    free(recv);
    return st;
  }
  hk_value **r = calloc((size_t)n, sizeof(hk_value *));
  if (!r) hk_out_of_memory();
  for (int k = 0; k < n; k++) {
    r[k] = hk_value_new_array((hk_prim)ops[k]->elem, ops[k]->rank, ops[k]->dims);
    memcpy(r[k]->data, recv + k * nb, (size_t)nb);
  }
  free(recv);
  count(c, HK_COLL_ALL_TO_ALL, nb * n);
  *out = hk_value_new_tuple(n, r);
  free(r);
  return NULL;
}

/* ---- collective-permute ---------------------------------------------------------------- */

static hk_status *permute(coll *c, const hk_value *in, hk_value **out) {
  const hk_device_ctx *d = c->d;
  bool cross_partition = hk_instr_has_channel_id(c->ins);
  int64_t me = cross_partition ? d->partition : d->replica;
  int n = c->ins->attrs ? c->ins->attrs->n_source_target_pairs : 0;
  const hk_pair *pairs = n ? c->ins->attrs->source_target_pairs : NULL;
  int64_t *grp = malloc((size_t)(2 * n + 1) * sizeof(int64_t));
  if (!grp) hk_out_of_memory();
  int32_t gs = 0, rank = -1;
  int64_t send_to = -1, recv_from = -1;
  for (int k = 0; k < 2 * n; k++) {
    int64_t id = k % 2 ? pairs[k / 2].b : pairs[k / 2].a;
    int64_t dev = cross_partition ? d->replica * d->num_partitions + id : id * d->num_partitions + d->partition;
    bool seen = false;
    for (int j = 0; j < gs; j++) seen |= grp[j] == dev;
    if (!seen) grp[gs++] = dev;
  }
  for (int j = 1; j < gs; j++)   /* sorted: every participant builds the same list */
    for (int i = j; i > 0 && grp[i - 1] > grp[i]; i--) {
      int64_t t = grp[i]; grp[i] = grp[i - 1]; grp[i - 1] = t;
    }
  int64_t mydev = d->replica * d->num_partitions + d->partition;
  for (int j = 0; j < gs; j++)
    if (grp[j] == mydev) rank = j;
  for (int k = 0; k < n; k++) {
    int64_t sdev = cross_partition ? d->replica * d->num_partitions + pairs[k].a : pairs[k].a * d->num_partitions + d->partition;
    int64_t tdev = cross_partition ? d->replica * d->num_partitions + pairs[k].b : pairs[k].b * d->num_partitions + d->partition;
    if (pairs[k].a == me) send_to = tdev;
    if (pairs[k].b == me) recv_from = sdev;
  }
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, in->dims);
  hk_status *st = NULL;
  if (rank >= 0) {
    c->op.group = grp;
    c->op.group_size = gs;
    c->op.rank = rank;
    if (gs == 1) {
      if (recv_from == mydev) memcpy(r->data, in->data, (size_t)in->nbytes);
    } else if (!d->backend) {
      st = hk_eval_error(c->ins, HK_FAILED_PRECONDITION, "needs %d devices", gs);
    } else {
      st = d->backend->vt->collective_permute(d->backend, &c->op, in->data, in->nbytes, send_to,
                                              recv_from, r->data);
    }
  }
  free(grp);
  if (st) {
    hk_value_release(r);
    return st;
  }
  if (send_to >= 0) count(c, HK_COLL_COLLECTIVE_PERMUTE, in->nbytes);
  else c->d->stats.collective_count[HK_COLL_COLLECTIVE_PERMUTE]++;
  *out = r;
  return NULL;
}

static hk_status *broadcast_one(coll *c, const hk_value *in, hk_value **out) {
  int G = c->op.group_size;
  uint8_t *all = malloc((size_t)(in->nbytes * G > 0 ? in->nbytes * G : 1));
  if (!all) hk_out_of_memory();
  hk_status *st = G == 1 ? (memcpy(all, in->data, (size_t)in->nbytes), NULL)
                         : c->d->backend->vt->all_gather(c->d->backend, &c->op, in->data, in->nbytes, all);
  if (st) {
    free(all);
    return st;
  }
  hk_value *r = hk_value_new_array((hk_prim)in->elem, in->rank, in->dims);
  memcpy(r->data, all, (size_t)in->nbytes);
  free(all);
  count(c, HK_COLL_COLLECTIVE_BROADCAST, c->op.rank == 0 ? in->nbytes : 0);
  *out = r;
  return NULL;
}

/* ---- ragged-all-to-all --------------------------------------------------------------
 * Operands: input, output, input_offsets, send_sizes, output_offsets,
 * recv_sizes.  The offset arrays hold num_peers x k updates: update
 * p * k + u sends rows [input_offsets, + send_sizes) of dim 0 of the input
 * to peer p, written at rows output_offsets of that peer's output; the
 * result is the device's output operand with what it received written in.
 * Each device's input and offsets are gathered, then the chunks addressed
 * to it are copied. */

hk_status *hk_ragged_update_check(const hk_instr *ins, int64_t in_off, int64_t size, int64_t out_off,
                                  int64_t in_rows, int64_t out_rows) {
  /* compared by subtraction: offsets and sizes are the program's data, and
   * a sum of two of them may overflow */
  if (size < 0 || in_off < 0 || out_off < 0 || size > in_rows || in_off > in_rows - size ||
      size > out_rows || out_off > out_rows - size)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT,
                         "update of %lld rows from row %lld to row %lld is out of bounds (%lld input rows, %lld output rows)",
                         (long long)size, (long long)in_off, (long long)out_off, (long long)in_rows, (long long)out_rows);
  return NULL;
}

static hk_status *ragged_chunk(coll *c, const uint8_t *src, int64_t src_rows, int64_t in_off, int64_t size,
                               int64_t out_off, int64_t row_bytes, hk_value *r) {
  HK_TRY(hk_ragged_update_check(c->ins, in_off, size, out_off, src_rows, r->rank ? r->dims[0] : 1));
  memcpy((uint8_t *)r->data + out_off * row_bytes, src + in_off * row_bytes, (size_t)(size * row_bytes));
  return NULL;
}

static hk_status *ragged_all_to_all(coll *c, hk_value *const *ops, hk_value **out) {
  const hk_value *in = ops[0], *dst = ops[1];
  int G = c->op.group_size;
  int64_t n = ops[2]->n;
  if (c->ins->n_operands != 6 || in->rank < 1 || dst->rank != in->rank || in->elem != dst->elem ||
      ops[3]->n != n || ops[4]->n != n || n % G)
    return hk_eval_error(c->ins, HK_INVALID_ARGUMENT,
                         "ragged-all-to-all needs input and output of one type and rank, and offset "
                         "arrays of one length, a multiple of the %d peers", G);
  int64_t row_bytes = in->dims[0] ? in->nbytes / in->dims[0] : 0, per = n / G;
  /* packed: the input, then input_offsets, send_sizes, output_offsets as int64 */
  int64_t nb = in->nbytes + 3 * n * (int64_t)sizeof(int64_t);
  uint8_t *mine = malloc((size_t)(nb ? nb : 1)), *all = malloc((size_t)(nb * G > 0 ? nb * G : 1));
  if (!mine || !all) hk_out_of_memory();
  memcpy(mine, in->data, (size_t)in->nbytes);
  for (int k = 0; k < 3; k++)
    for (int64_t i = 0; i < n; i++) {
      int64_t v = hk_value_get_i64(ops[2 + k], i);
      memcpy(mine + in->nbytes + (k * n + i) * (int64_t)sizeof(int64_t), &v, sizeof v);
    }
  hk_status *st = NULL;
  if (G == 1) memcpy(all, mine, (size_t)nb);
  else st = c->d->backend->vt->all_gather(c->d->backend, &c->op, mine, nb, all);
  hk_value *r = st ? NULL : hk_value_clone(dst);
  for (int p = 0; p < G && !st; p++) {
    const uint8_t *src = all + p * nb;
    for (int64_t u = 0; u < per && !st; u++) {
      int64_t idx = c->op.rank * per + u, v[3];
      for (int k = 0; k < 3; k++)   /* unaligned after the input's bytes */
        memcpy(&v[k], src + in->nbytes + (k * n + idx) * (int64_t)sizeof(int64_t), sizeof(int64_t));
      st = ragged_chunk(c, src, in->dims[0], v[0], v[1], v[2], row_bytes, r);
    }
  }
  free(mine);
  free(all);
  if (st) {
    hk_value_release(r);
    return st;
  }
  count(c, HK_COLL_ALL_TO_ALL, in->nbytes);
  *out = r;
  return NULL;
}

hk_status *hk_op_collective(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                            hk_value **out) {
  coll c = {d, ins, {0}, NULL};
  int64_t gidx = hk_eval_plan_instr_index(d->plan, ins);
  c.op.instr = ins;
  c.op.sequence = d->exec_count[gidx];
  c.op.device = d->replica * d->num_partitions + d->partition;
  hk_opcode op = (hk_opcode)ins->opcode;
  for (int k = 0; k < ins->n_operands; k++)
    if (!hk_prim_is_array((hk_prim)ops[k]->elem) && ops[k]->elem != HK_TUPLE)
      return hk_eval_error(ins, HK_UNIMPLEMENTED, "token operands are not supported");
  if (op == HK_OP_COLLECTIVE_PERMUTE || op == HK_OP_COLLECTIVE_PERMUTE_START) {
    if (ops[0]->elem == HK_TUPLE)
      return hk_eval_error(ins, HK_UNIMPLEMENTED, "collective-permute of a tuple");
    return permute(&c, ops[0], out);
  }
  HK_TRY(participants(ins, d, &c.group, &c.op.group_size, &c.op.rank));
  c.op.group = c.group;
  hk_status *st = need_backend(&c);
  if (!st) {
    switch (op) {
      case HK_OP_ALL_REDUCE: case HK_OP_ALL_REDUCE_START:
        if (ins->n_called < 1) st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing to_apply");
        else st = per_operand(&c, ops, all_reduce_one, out);
        break;
      case HK_OP_ALL_GATHER: case HK_OP_ALL_GATHER_START:
        st = per_operand(&c, ops, all_gather_one, out);
        break;
      case HK_OP_REDUCE_SCATTER:
        if (ins->n_called < 1) st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing to_apply");
        else st = per_operand(&c, ops, reduce_scatter_one, out);
        break;
      case HK_OP_ALL_TO_ALL:
        if (ins->n_dims == 1) st = per_operand(&c, ops, all_to_all_array, out);
        else st = all_to_all_tuple(&c, ops, out);
        break;
      case HK_OP_COLLECTIVE_BROADCAST:
        st = per_operand(&c, ops, broadcast_one, out);
        break;
      case HK_OP_RAGGED_ALL_TO_ALL:
        st = ragged_all_to_all(&c, ops, out);
        break;
      default:
        st = hk_eval_error(ins, HK_UNIMPLEMENTED, "not a supported collective");
    }
  }
  free(c.group);
  return st;
}
