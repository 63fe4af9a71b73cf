/* collectives.c - the default collective-ops creator (XLA's
 * GetDefaultCollectiveOpsCreator): partition-id, all-reduce, all-gather,
 * all-to-all, collective-permute and reduce-scatter over partition groups,
 * each with a fresh channel id; reducer computations; cost hooks. */
#include "spmd_internal.h"

/* The iota form of groups ids[g * size + k] when they have one of the
 * shapes the partitioner makes: [G,S]<=[G*S] (consecutive ids), or
 * partition groups strided across the devices, [G,S]<=[S,G]T(1,0) and,
 * repeated per replica (G = nr * G0), [G,S]<=[nr,S,G0]T(0,2,1).  NULL
 * otherwise (the groups stay a list). */
static const hk_iota *groups_iota(hk_module *m, int64_t n_groups, int64_t size, int64_t nr,
                                  const int64_t *ids) {
  int64_t total = n_groups * size, g0 = nr > 0 && n_groups % nr == 0 ? n_groups / nr : 0;
  bool consecutive = true, strided = g0 > 0;
  for (int64_t k = 0; k < total && (consecutive || strided); k++) {
    int64_t g = k / size, s = k % size, r = g0 ? g / g0 : 0;
    consecutive = consecutive && ids[k] == k;
    strided = strided && ids[k] == r * size * g0 + s * g0 + g % g0;
  }
  if (!consecutive && !strided) return NULL;
  hk_iota *io = hk_alloc(m, sizeof *io);
  int64_t *dims = hk_alloc(m, 5 * sizeof *dims);
  int32_t *perm = hk_alloc(m, 3 * sizeof *perm);
  dims[0] = n_groups;
  dims[1] = size;
  io->n_dims = 2;
  io->dims = dims;
  io->reshape_dims = dims + 2;
  io->perm = perm;
  if (consecutive) {
    io->n_reshape_dims = 1;
    dims[2] = total;
    perm[0] = 0;
  } else if (nr == 1) {
    io->n_reshape_dims = 2;
    dims[2] = size;
    dims[3] = g0;
    perm[0] = 1, perm[1] = 0;
  } else {
    io->n_reshape_dims = 3;
    dims[2] = nr, dims[3] = size, dims[4] = g0;
    perm[0] = 0, perm[1] = 2, perm[2] = 1;
  }
  return io;
}

static const hk_replica_groups *new_groups(hk_module *m, int64_t n_groups, int64_t group_size,
                                           int64_t nr, const int64_t *groups) {
  hk_replica_groups *g = hk_alloc(m, sizeof *g);
  int32_t *start = hk_alloc(m, sizeof(int32_t) * (size_t)(n_groups + 1));
  for (int64_t i = 0; i <= n_groups; i++) start[i] = (int32_t)(i * group_size);
  g->n_groups = (int32_t)n_groups;
  g->group_start = start;
  g->ids = hk_memdup(m, groups, sizeof(int64_t) * (size_t)(n_groups * group_size));
  g->iota = groups_iota(m, n_groups, group_size, nr, groups);
  return g;
}

static bool same_groups(const hk_replica_groups *g, int64_t n_groups, int64_t group_size,
                        const int64_t *ids) {
  return g->n_groups == n_groups && g->group_start[1] == group_size &&
         memcmp(g->ids, ids, sizeof(int64_t) * (size_t)(n_groups * group_size)) == 0;
}

/* Replica groups (nr: replicas the partition groups are repeated over),
 * shared with the earlier collectives of this run over the same groups:
 * a module with 10^5 collectives over 1024 devices keeps one id list. */
static const hk_replica_groups *make_groups(spmd_partitioner *p, hk_module *m, int64_t n_groups,
                                            int64_t group_size, int64_t nr,
                                            const int64_t *groups) {
  if (n_groups < 1 || group_size < 1) return new_groups(m, n_groups, group_size, nr, groups);
  int32_t n = p ? p->n_group_cache : 0;
  for (int32_t k = 0; k < n; k++) {
    const hk_replica_groups *g = p->group_cache[n - 1 - k];   /* newest first */
    if (same_groups(g, n_groups, group_size, groups)) return g;
  }
  const hk_replica_groups *g = new_groups(m, n_groups, group_size, nr, groups);
  if (!p) return g;
  int32_t cap = (int32_t)(sizeof p->group_cache / sizeof p->group_cache[0]);
  if (n == cap) {   /* the oldest goes */
    memmove(p->group_cache, p->group_cache + 1, sizeof p->group_cache[0] * (size_t)(cap - 1));
    n--;
  }
  p->group_cache[n] = g;
  p->n_group_cache = n + 1;
  return g;
}

/* Global-device-id groups: each partition group repeated per replica. */
static const hk_replica_groups *global_groups(void *state, hk_module *m, int64_t n_groups,
                                              int64_t group_size, const int64_t *groups) {
  spmd_partitioner *p = state;
  int64_t np = p ? p->num_partitions : 0, nr = p && p->num_replicas > 1 ? p->num_replicas : 1;
  if (nr == 1) return make_groups(p, m, n_groups, group_size, 1, groups);
  int64_t total = n_groups * group_size;
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)(total * nr + 1));
  if (!ids) hk_out_of_memory();
  for (int64_t r = 0; r < nr; r++)
    for (int64_t k = 0; k < total; k++) ids[r * total + k] = r * np + groups[k];
  const hk_replica_groups *g = make_groups(p, m, n_groups * nr, group_size, nr, ids);
  free(ids);
  return g;
}

static void set_channel(hk_instr *i, int64_t *next_channel_id) {
  hk_instr_attrs(i)->channel_id = (*next_channel_id)++;
}

static hk_instr *create_partition_id(void *state, hk_computation *c) {
  (void)state;
  return hk_instr_new(c, HK_OP_PARTITION_ID, hk_shape_scalar(c->module, HK_U32), 0, NULL, NULL);
}

static hk_instr *create_all_reduce(void *state, hk_computation *c, hk_instr *operand,
                                   hk_computation *reducer, int64_t n_groups, int64_t group_size,
                                   const int64_t *groups, int64_t *next_channel_id) {
  (void)state;
  hk_instr *ar = hk_instr_new(c, HK_OP_ALL_REDUCE, operand->shape, 1, &operand, NULL);
  hk_instr_set_called(ar, 1, &reducer);
  hk_instr_attrs(ar)->replica_groups = global_groups(state, c->module, n_groups, group_size, groups);
  hk_instr_attrs(ar)->use_global_device_ids = true;
  set_channel(ar, next_channel_id);
  return ar;
}

static hk_instr *create_all_gather(void *state, hk_computation *c, hk_instr *operand,
                                   const hk_shape *result, int64_t dim, int64_t n_groups,
                                   int64_t group_size, const int64_t *groups,
                                   int64_t *next_channel_id) {
  (void)state;
  hk_instr *ag = hk_instr_new(c, HK_OP_ALL_GATHER, result, 1, &operand, NULL);
  hk_instr_set_dims(ag, 1, &dim);
  hk_instr_attrs(ag)->replica_groups = global_groups(state, c->module, n_groups, group_size, groups);
  hk_instr_attrs(ag)->use_global_device_ids = true;
  set_channel(ag, next_channel_id);
  return ag;
}

/* split_dim == concat_dim: one array all-to-all.  Otherwise the split dim
 * is broken into (group, rest), the group dim exchanged as dim 0 and then
 * merged in front of concat_dim. */
static hk_instr *create_all_to_all(void *state, hk_computation *c, hk_instr *operand,
                                   int64_t split_dim, int64_t concat_dim, int64_t n_groups,
                                   int64_t group_size, const int64_t *groups,
                                   int64_t *next_channel_id) {
  (void)state;
  hk_module *m = c->module;
  const hk_shape *s = operand->shape;
  int r = s->rank;
  if (split_dim == concat_dim) {
    hk_instr *a = hk_instr_new(c, HK_OP_ALL_TO_ALL, s, 1, &operand, NULL);
    hk_instr_set_dims(a, 1, &split_dim);
    hk_instr_attrs(a)->replica_groups = make_groups(state, m, n_groups, group_size, 1, groups);
    set_channel(a, next_channel_id);
    return a;
  }
  int64_t g = group_size, perm[HK_MAX_RANK + 1], d2[HK_MAX_RANK + 1];
  /* split_dim moved to the front first, so the reshape splits it there. */
  int64_t p0[HK_MAX_RANK] = {0}, t0[HK_MAX_RANK] = {0};
  p0[0] = split_dim;
  for (int i = 0, k = 1; i < r; i++)
    if (i != split_dim) p0[k++] = i;
  for (int i = 0; i < r; i++) t0[i] = s->dims[p0[i]];
  hk_instr *rs = hk_instr_new(c, HK_OP_TRANSPOSE, hk_shape_with_dims(m, s, r, t0), 1, &operand, NULL);
  hk_instr_set_dims(rs, r, p0);
  /* [G, split/G, others...] */
  int64_t d0[HK_MAX_RANK + 1];
  d0[0] = g;
  d0[1] = s->dims[split_dim] / g;
  for (int i = 1; i < r; i++) d0[i + 1] = t0[i];
  hk_instr *rh = hk_instr_new(c, HK_OP_RESHAPE, hk_shape_array(m, (hk_prim)s->elem, r + 1, d0), 1,
                              &rs, NULL);
  int64_t zero = 0;
  hk_instr *a = hk_instr_new(c, HK_OP_ALL_TO_ALL, rh->shape, 1, &rh, NULL);
  hk_instr_set_dims(a, 1, &zero);
  hk_instr_attrs(a)->replica_groups = make_groups(state, m, n_groups, group_size, 1, groups);
  set_channel(a, next_channel_id);
  /* Back to the original dim order with G in front of concat_dim: the
   * current dims are [G, split/G, others in order without split_dim]. */
  int n = 0;
  int64_t pos_of[HK_MAX_RANK];   /* original dim -> current position */
  pos_of[split_dim] = 1;
  for (int i = 0, k = 2; i < r; i++)
    if (i != split_dim) pos_of[i] = k++;
  for (int i = 0; i < r; i++) {
    if (i == concat_dim) perm[n++] = 0;
    perm[n++] = pos_of[i];
  }
  for (int i = 0; i <= r; i++) d2[i] = d0[perm[i]];
  hk_instr *t = hk_instr_new(c, HK_OP_TRANSPOSE, hk_shape_array(m, (hk_prim)s->elem, r + 1, d2), 1,
                             &a, NULL);
  hk_instr_set_dims(t, r + 1, perm);
  int64_t out[HK_MAX_RANK];
  for (int i = 0; i < r; i++)
    out[i] = i == concat_dim ? s->dims[i] * g : (i == split_dim ? s->dims[i] / g : s->dims[i]);
  return hk_instr_new(c, HK_OP_RESHAPE, hk_shape_with_dims(m, s, r, out), 1, &t, NULL);
}

static hk_instr *create_collective_permute(void *state, hk_computation *c, hk_instr *operand,
                                           int64_t n_pairs, const hk_pair *pairs,
                                           int64_t *next_channel_id) {
  (void)state;
  hk_instr *cp = hk_instr_new(c, HK_OP_COLLECTIVE_PERMUTE, operand->shape, 1, &operand, NULL);
  hk_attrs *a = hk_instr_attrs(cp);
  a->n_source_target_pairs = (int32_t)n_pairs;
  a->source_target_pairs = hk_memdup(c->module, pairs, sizeof(hk_pair) * (size_t)(n_pairs ? n_pairs : 1));
  set_channel(cp, next_channel_id);
  return cp;
}

static hk_instr *create_reduce_scatter(void *state, hk_computation *c, hk_instr *operand,
                                       hk_computation *reducer, const hk_shape *result,
                                       int64_t dim, int64_t n_groups, int64_t group_size,
                                       const int64_t *groups, int64_t *next_channel_id) {
  (void)state;
  hk_instr *rs = hk_instr_new(c, HK_OP_REDUCE_SCATTER, result, 1, &operand, NULL);
  hk_instr_set_dims(rs, 1, &dim);
  hk_instr_set_called(rs, 1, &reducer);
  hk_instr_attrs(rs)->replica_groups = global_groups(state, c->module, n_groups, group_size, groups);
  hk_instr_attrs(rs)->use_global_device_ids = true;
  set_channel(rs, next_channel_id);
  return rs;
}

void spmd_default_collective_ops(hk_pass *self, int64_t num_partitions, int64_t num_replicas,
                                 hk_spmd_collective_ops *out) {
  (void)num_partitions;
  (void)num_replicas;
  ((spmd_partitioner *)self)->n_group_cache = 0;   /* a new run: groups of another module */
  memset(out, 0, sizeof *out);
  out->size = sizeof *out;
  out->state = self;
  out->partition_id = create_partition_id;
  out->all_reduce = create_all_reduce;
  out->all_gather = create_all_gather;
  out->all_to_all = create_all_to_all;
  out->collective_permute = create_collective_permute;
  out->reduce_scatter = create_reduce_scatter;
}

/* "spmd.OP.TYPE" into out (96 bytes); asked once per collective, so no
 * printf. */
static void reducer_name(char *out, hk_prim elem, hk_opcode op) {
  const char *parts[3] = {"spmd.", hk_opcode_name(op), hk_prim_name(elem)};
  size_t n = 0;
  for (int k = 0; k < 3; k++) {
    size_t len = strlen(parts[k]);
    if (n + len + 2 > 96) len = 96 - n - 2;
    memcpy(out + n, parts[k], len);
    n += len;
    if (k == 1) out[n++] = '.';
  }
  out[n] = 0;
}

/* A scalar reducer computation (op over elem), made once per module and
 * appended to it; only the partitioner calls it. */
hk_computation *spmd_reducer(hk_module *m, hk_prim elem, hk_opcode op) {
  char name[96];
  reducer_name(name, elem, op);
  hk_computation *c = hk_module_find_computation(m, name);
  if (c) return c;
  c = hk_computation_new(m, name);
  const hk_shape *s = hk_shape_scalar(m, elem);
  hk_instr *p[2];
  for (int i = 0; i < 2; i++) {
    p[i] = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, i ? "rhs" : "lhs");
    hk_instr_attrs(p[i])->parameter_number = i;
    hk_computation_register_param(c, p[i]);
  }
  hk_computation_set_root(c, hk_instr_new(c, op, s, 2, p, NULL));
  /* Not sorted into place here (a walk of the whole module): the driver
   * sorts the computations once partitioning is done. */
  return c;
}

int64_t spmd_communication_cost(hk_pass *self, const hk_instr *collective) {
  (void)self;
  switch ((hk_opcode)collective->opcode) {
    case HK_OP_ALL_REDUCE: return 2 * hk_shape_byte_size(collective->shape);
    case HK_OP_ALL_GATHER:
    case HK_OP_ALL_TO_ALL:
    case HK_OP_COLLECTIVE_PERMUTE: return hk_shape_byte_size(collective->shape);
    case HK_OP_REDUCE_SCATTER: return hk_shape_byte_size(collective->operands[0]->shape);
    default: return 0;
  }
}

int64_t spmd_planned_collective_cost(hk_pass *self, int kind, int64_t operand_bytes,
                                     int64_t group_size) {
  (void)self;
  int64_t g = group_size > 1 ? group_size : 1, b = operand_bytes;
  switch (kind) {
    case HK_COLL_ALL_GATHER: return (g - 1) * b;
    case HK_COLL_ALL_REDUCE: return 2 * (g - 1) * b / g;
    case HK_COLL_REDUCE_SCATTER:
    case HK_COLL_ALL_TO_ALL: return (g - 1) * b / g;
    case HK_COLL_COLLECTIVE_PERMUTE: return b;
    default: return b;
  }
}

int64_t spmd_plan_cost(const spmd_partitioner *p, int kind, int64_t operand_bytes,
                       int64_t group_size) {
  const hk_spmd_partitioner_vtable *vt = spmd_vt(p);
  bool has = vt->ext_size >= offsetof(hk_spmd_partitioner_vtable, planned_collective_cost) +
                                 sizeof vt->planned_collective_cost;
  if (!has || !vt->planned_collective_cost)
    return spmd_planned_collective_cost((hk_pass *)&p->pass, kind, operand_bytes, group_size);
  return vt->planned_collective_cost((hk_pass *)&p->pass, kind, operand_bytes, group_size);
}

int64_t spmd_memory_cost(hk_pass *self, const hk_instr *i) {
  (void)self;
  return hk_shape_byte_size(i->shape);
}
