/* dot.c - the dot handler: XLA's windowed einsum when its gate says so
 * (over all devices, or within groups of the dot grouped on
 * non-contracting or contracting dims),
 * then XLA's base-case rules (fully tiled shardings), else the cheapest of
 * three plans - operands resharded to match the output's tiling (batch /
 * non-contracting dims), or the lhs (rhs) kept as it is with the other
 * operand matched to it on the contracting dims, local dot, all-reduce of
 * the partial sums (or a reduce-scatter straight into the output's sharding
 * when that splits the result across the summing devices) - priced by the
 * planned_collective_cost hook. */
#include "spmd_internal.h"

typedef struct dot_dims {
  int rl, rr, ro;
  int lhs_to_out[HK_MAX_RANK];     /* -1: contracting */
  int rhs_to_out[HK_MAX_RANK];
  int lhs_contract_of_rhs[HK_MAX_RANK]; /* rhs contracting dim -> lhs dim (-1 otherwise) */
  int rhs_contract_of_lhs[HK_MAX_RANK];
  int out_from_lhs[HK_MAX_RANK];   /* out dim -> lhs dim or -1 */
  int out_from_rhs[HK_MAX_RANK];
  int n_whole;                     /* convolution: spatial dims, never partitioned */
  int whole_lhs[HK_MAX_RANK], whole_rhs[HK_MAX_RANK], whole_out[HK_MAX_RANK];
  /* Convolution: spatial dims that are dot dims in disguise, as XLA's
   * ParseConvolutionDimsInfo (spmd_conv_dim_role_of): window sc_window[i]
   * of the local convolution is refitted to operand dim sc_dim[i] (lhs
   * for a batch or contracting dim, rhs for an rhs non-contracting one). */
  int n_spatial_contract;
  int sc_role[HK_MAX_RANK], sc_dim[HK_MAX_RANK], sc_window[HK_MAX_RANK];
} dot_dims;

static void map_dims(const hk_instr *dot, dot_dims *m) {
  const hk_dot_dnums *dn = dot->attrs->dot;
  m->n_whole = 0;
  m->n_spatial_contract = 0;
  m->rl = dot->operands[0]->shape->rank;
  m->rr = dot->operands[1]->shape->rank;
  m->ro = dot->shape->rank;
  for (int i = 0; i < m->ro; i++) m->out_from_lhs[i] = m->out_from_rhs[i] = -1;
  for (int i = 0; i < m->rl; i++) m->rhs_contract_of_lhs[i] = -1;
  for (int i = 0; i < m->rr; i++) m->lhs_contract_of_rhs[i] = -1;
  int nb = dn->lhs_batch.n, o = nb;
  for (int i = 0; i < m->rl; i++) {
    int at;
    if ((at = hk_i64_index(dn->lhs_batch.v, dn->lhs_batch.n, i)) >= 0) m->lhs_to_out[i] = at;
    else if ((at = hk_i64_index(dn->lhs_contracting.v, dn->lhs_contracting.n, i)) >= 0) {
      m->lhs_to_out[i] = -1;
      m->rhs_contract_of_lhs[i] = (int)dn->rhs_contracting.v[at];
    } else m->lhs_to_out[i] = o++;
  }
  for (int i = 0; i < m->rr; i++) {
    int at;
    if ((at = hk_i64_index(dn->rhs_batch.v, dn->rhs_batch.n, i)) >= 0) m->rhs_to_out[i] = at;
    else if ((at = hk_i64_index(dn->rhs_contracting.v, dn->rhs_contracting.n, i)) >= 0) {
      m->rhs_to_out[i] = -1;
      m->lhs_contract_of_rhs[i] = (int)dn->lhs_contracting.v[at];
    } else m->rhs_to_out[i] = o++;
  }
  for (int i = 0; i < m->rl; i++)
    if (m->lhs_to_out[i] >= 0) m->out_from_lhs[m->lhs_to_out[i]] = i;
  for (int i = 0; i < m->rr; i++)
    if (m->rhs_to_out[i] >= 0) m->out_from_rhs[m->rhs_to_out[i]] = i;
}

static bool plain_tiled(const hk_sharding *s) {
  return s && s->kind == HK_SHARDING_TILED && !spmd_is_subgroup_manual(s) &&
         s->n_subgroups == 0;
}

typedef struct dot_plan {
  const hk_sharding *lhs, *rhs, *out;   /* operand targets, result sharding */
  int n_reduce;                         /* tile dims of `driver` summed over */
  int64_t reduce_dims[HK_MAX_RANK];
  const hk_sharding *driver;
  int driver_side;                      /* 0 lhs, 1 rhs */
  int64_t cost;
  bool ok;
} dot_plan;

/* Operands matched to the output's tiling. */
static void plan_output(spmd_visitor *v, const dot_dims *dm, const hk_sharding *o, dot_plan *p) {
  memset(p, 0, sizeof *p);
  hk_module *m = v->m;
  if (!plain_tiled(o) || !hk_sharding_is_tiled(o)) {
    p->lhs = p->rhs = hk_sharding_replicated(m);
    p->out = hk_sharding_is_maximal(o) ? hk_sharding_replicated(m) : hk_sharding_replicated(m);
    p->ok = true;
    return;
  }
  bool repl = o->replicate_on_last_tile_dim;
  int gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][HK_MAX_RANK + 1];
  const int *groups[HK_MAX_RANK + 1];
  for (int side = 0; side < 2; side++) {
    int r = side ? dm->rr : dm->rl;
    const int *to_out = side ? dm->rhs_to_out : dm->lhs_to_out;
    const int *other_from = side ? dm->out_from_lhs : dm->out_from_rhs;
    const int *own_from = side ? dm->out_from_rhs : dm->out_from_lhs;
    for (int i = 0; i < r; i++) {
      gsz[i] = 0;
      if (to_out[i] >= 0) gbuf[i][gsz[i]++] = to_out[i];
      groups[i] = gbuf[i];
    }
    gsz[r] = 0;
    for (int od = 0; od < dm->ro; od++)
      if (other_from[od] >= 0 && own_from[od] < 0) gbuf[r][gsz[r]++] = od;
    if (repl) gbuf[r][gsz[r]++] = dm->ro;
    groups[r] = gbuf[r];
    const hk_sharding *s = spmd_regroup_memo(v, o, r + 1, gsz, groups, true);
    if (side) p->rhs = s;
    else p->lhs = s;
  }
  p->out = o;
  p->ok = true;
}

/* The `side` operand (0 lhs, 1 rhs) keeps its sharding d; the other is
 * matched on batch and contracting dims; partial sums all-reduced. */
static void plan_operand(spmd_visitor *v, const dot_dims *dm,
                         const hk_sharding *d, int side, dot_plan *p) {
  memset(p, 0, sizeof *p);
  if (!plain_tiled(d)) return;
  int rd = side ? dm->rr : dm->rl, ro_other = side ? dm->rl : dm->rr;
  const int *drv_to_out = side ? dm->rhs_to_out : dm->lhs_to_out;
  const int *oth_to_out = side ? dm->lhs_to_out : dm->rhs_to_out;
  const int *oth_contract = side ? dm->rhs_contract_of_lhs : dm->lhs_contract_of_rhs;
  const int *out_from_drv = side ? dm->out_from_rhs : dm->out_from_lhs;
  for (int i = 0; i < rd; i++)
    if (drv_to_out[i] < 0) {
      /* Uneven splits too: the padding is zeroed before the local dot. */
      if (hk_sharding_dim_partitions(d, i) > 1) p->reduce_dims[p->n_reduce++] = i;
    }
  if (!p->n_reduce) return;
  bool repl = d->replicate_on_last_tile_dim;
  int gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][HK_MAX_RANK + 1];
  const int *groups[HK_MAX_RANK + 1];
  /* The other operand. */
  for (int j = 0; j < ro_other; j++) {
    gsz[j] = 0;
    groups[j] = gbuf[j];
    if (oth_contract[j] >= 0) gbuf[j][gsz[j]++] = oth_contract[j];
    else if (oth_to_out[j] >= 0 && out_from_drv[oth_to_out[j]] >= 0)
      gbuf[j][gsz[j]++] = out_from_drv[oth_to_out[j]];
  }
  gsz[ro_other] = 0;
  groups[ro_other] = gbuf[ro_other];
  for (int i = 0; i < rd; i++) {
    int od = drv_to_out[i];
    bool batch = od >= 0 && (side ? dm->out_from_lhs[od] : dm->out_from_rhs[od]) >= 0;
    if (od >= 0 && !batch) gbuf[ro_other][gsz[ro_other]++] = i;
  }
  if (repl) gbuf[ro_other][gsz[ro_other]++] = rd;
  const hk_sharding *other = spmd_regroup_memo(v, d, ro_other + 1, gsz, groups, true);
  /* The result. */
  for (int od = 0; od < dm->ro; od++) {
    gsz[od] = 0;
    groups[od] = gbuf[od];
    if (out_from_drv[od] >= 0) gbuf[od][gsz[od]++] = out_from_drv[od];
  }
  gsz[dm->ro] = 0;
  groups[dm->ro] = gbuf[dm->ro];
  for (int i = 0; i < rd; i++)
    if (drv_to_out[i] < 0) gbuf[dm->ro][gsz[dm->ro]++] = i;
  if (repl) gbuf[dm->ro][gsz[dm->ro]++] = rd;
  p->out = spmd_regroup_memo(v, d, dm->ro + 1, gsz, groups, true);
  p->driver = d;
  p->driver_side = side;
  p->lhs = side ? other : d;
  p->rhs = side ? d : other;
  p->ok = true;
}

static int64_t plan_cost(spmd_visitor *v, const hk_instr *dot, const dot_dims *dm,
                         const hk_sharding *lc, const hk_sharding *rc, const hk_sharding *o,
                         const dot_plan *p) {
  (void)dm;
  int64_t c = spmd_reshard_cost(v, dot->operands[0]->shape, lc, p->lhs);
  c += spmd_reshard_cost(v, dot->operands[1]->shape, rc, p->rhs);
  if (p->n_reduce) {   /* the partial sums, all-reduced over the contracting splits */
    int64_t group = 1;
    for (int k = 0; k < p->n_reduce; k++) group *= hk_sharding_dim_partitions(p->driver, (int)p->reduce_dims[k]);
    c += spmd_plan_cost(v->p, HK_COLL_ALL_REDUCE,
                        hk_shape_byte_size(spmd_local_shape(v, p->out, dot->shape)), group);
  }
  c += spmd_reshard_cost(v, dot->shape, p->out, o);
  return c;
}

/* Spatial dims must stay whole in a plan's shardings. */
static bool whole_ok(const dot_dims *dm, const dot_plan *p) {
  for (int k = 0; k < dm->n_whole; k++)
    if ((hk_sharding_is_tiled(p->lhs) && hk_sharding_dim_partitions(p->lhs, dm->whole_lhs[k]) > 1) ||
        (hk_sharding_is_tiled(p->rhs) && hk_sharding_dim_partitions(p->rhs, dm->whole_rhs[k]) > 1) ||
        (hk_sharding_is_tiled(p->out) && hk_sharding_dim_partitions(p->out, dm->whole_out[k]) > 1))
      return false;
  return true;
}

/* s (of the lhs, rhs or output: side 0, 1, 2) with the spatial dims
 * that must stay whole replicated, so a plan it drives keeps its other
 * splits (a convolution tiled on a dot dim and a spatial dim keeps the
 * dot dim split, not everything gathered). */
static const hk_sharding *whole_dims_replicated(spmd_visitor *v, const dot_dims *dm,
                                                const hk_sharding *s, int side) {
  if (!dm->n_whole || !s || !hk_sharding_is_tiled(s)) return s;
  const int *whole = side == 0 ? dm->whole_lhs : side == 1 ? dm->whole_rhs : dm->whole_out;
  int64_t dims[HK_MAX_RANK];
  int n = 0;
  for (int k = 0; k < dm->n_whole; k++)
    if (hk_sharding_dim_partitions(s, whole[k]) > 1) dims[n++] = whole[k];
  return n ? spmd_replicate_dims(v, s, n, dims) : s;
}

/* The one data dim along which `o` splits `from`'s tiles further, each
 * tile into `parts` even pieces (-1 if o is not such a refinement). */
static int refined_dim(const hk_sharding *from, const hk_sharding *o, const hk_shape *global,
                       int64_t parts) {
  int k = -1;
  for (int d = 0; d < global->rank; d++) {
    int64_t a = hk_sharding_is_tiled(from) ? hk_sharding_dim_partitions(from, d) : 1;
    int64_t b = hk_sharding_dim_partitions(o, d);
    if (a == b) continue;
    if (k >= 0 || b != a * parts || global->dims[d] % b) return -1;
    k = d;
  }
  return k;
}

/* The reduce groups reordered so the device at rank r of a group holds
 * piece r of the group's common `from` tile along dim k of o (malloc'ed);
 * NULL when the groups are not exactly o's split of dim k. */
static int64_t *groups_in_split_order(const hk_sharding *from, const hk_sharding *o, int rank,
                                      int k, int64_t n_groups, int64_t gsize,
                                      const int64_t *groups) {
  int64_t ti[HK_MAX_RANK], to[HK_MAX_RANK];
  int64_t *out = malloc(sizeof *out * (size_t)(n_groups * gsize));
  if (!out) hk_out_of_memory();
  for (int64_t i = 0; i < n_groups * gsize; i++) out[i] = -1;
  for (int64_t g = 0; g < n_groups; g++)
    for (int64_t r = 0; r < gsize; r++) {
      int64_t dev = groups[g * gsize + r];
      bool ok = hk_sharding_tile_index(o, dev, to);
      if (ok && hk_sharding_is_tiled(from)) ok = hk_sharding_tile_index(from, dev, ti);
      else if (ok) memset(ti, 0, sizeof ti);
      for (int d = 0; ok && d < rank; d++)
        if (d != k && to[d] != ti[d]) ok = false;
      int64_t piece = ok ? to[k] - ti[k] * gsize : -1;
      if (piece < 0 || piece >= gsize || out[g * gsize + piece] >= 0) {
        free(out);
        return NULL;
      }
      out[g * gsize + piece] = dev;
    }
  return out;
}

/* The partial sums of `d` (sharded `from`), summed over the reduce groups
 * and scattered straight into sharding o with one reduce-scatter when o
 * only splits one dim of `from` across exactly those groups; NULL if not. */
static hk_instr *reduce_scatter_into(spmd_visitor *v, hk_instr *orig, hk_instr *d,
                                     const hk_sharding *from, const hk_sharding *o,
                                     int64_t n_groups, int64_t gsize, const int64_t *groups) {
  if (!plain_tiled(o) || !hk_sharding_is_tiled(o) || gsize < 2) return NULL;
  const hk_spmd_collective_ops *c = &v->p->collectives;
  if (!HK_HAS_MEMBER(c, hk_spmd_collective_ops, reduce_scatter) || !c->reduce_scatter) return NULL;
  int k = refined_dim(from, o, orig->shape, gsize);
  int64_t *ordered = k < 0 ? NULL
                           : groups_in_split_order(from, o, orig->shape->rank, k, n_groups, gsize,
                                                   groups);
  if (!ordered) return NULL;
  hk_prim e = (hk_prim)orig->shape->elem;
  hk_instr *rs = c->reduce_scatter(c->state, v->comp, d, spmd_reducer(v->m, e, HK_OP_ADD),
                                   spmd_local_shape(v, o, orig->shape), k, n_groups, gsize,
                                   ordered, &v->p->next_channel_id);
  free(ordered);
  return rs;
}

/* A dim's role: batch (in both operands and the output), contracting, or
 * non-contracting (one operand and the output). */
enum { ROLE_BATCH, ROLE_CONTRACTING, ROLE_NON_CONTRACTING };

static int dim_role(const dot_dims *dm, int side, int d) {
  int od = side ? dm->rhs_to_out[d] : dm->lhs_to_out[d];
  if (od < 0) return ROLE_CONTRACTING;
  return (side ? dm->out_from_lhs[od] : dm->out_from_rhs[od]) >= 0 ? ROLE_BATCH : ROLE_NON_CONTRACTING;
}

/* XLA's GetPartitionsForDims: the partitions of operand `side`'s dims of
 * one role. */
static int64_t role_partitions(const dot_dims *dm, const hk_sharding *s, int side, int role) {
  int64_t n = 1;
  for (int d = 0; d < (side ? dm->rr : dm->rl); d++)
    if (dim_role(dm, side, d) == role) n *= hk_sharding_dim_partitions(s, d);
  return n;
}

/* The output's partitions along the dims operand `side` brings alone. */
static int64_t output_non_contracting_partitions(const dot_dims *dm, const hk_sharding *o, int side) {
  int64_t n = 1;
  for (int od = 0; od < dm->ro; od++) {
    int own = side ? dm->out_from_rhs[od] : dm->out_from_lhs[od];
    int other = side ? dm->out_from_lhs[od] : dm->out_from_rhs[od];
    if (own >= 0 && other < 0) n *= hk_sharding_dim_partitions(o, od);
  }
  return n;
}

/* ---- windowed einsum: when and which operand rotates ---------------------- */

/* XLA's size test: the operand that would be gathered (side >= 0) or the
 * result that would be reduce-scattered is at least
 * threshold_for_windowed_einsum_mib; when total_bytes_windowed_einsum_
 * threshold is set, the seed's gate on both operands' bytes decides. */
static bool windowed_worth_it(const spmd_visitor *v, const hk_instr *dot, int side, bool scatter) {
  const hk_spmd_options *o = &v->p->options;
  if (scatter ? !o->enable_windowed_einsum_for_reduce_scatter
              : !o->enable_windowed_einsum_for_all_gather)
    return false;
  if (o->has_total_bytes_windowed_einsum_threshold)
    return hk_spmd_should_enable_windowed_einsum_with_threshold(
        o, dot->operands[0], dot->operands[1], o->threshold_for_windowed_einsum_mib);
  const hk_shape *s = side >= 0 ? dot->operands[side]->shape : dot->shape;
  return hk_shape_byte_size(s) >= o->threshold_for_windowed_einsum_mib * 1024 * 1024;
}

/* One tile per partition, no replication. */
static bool one_tile_per_partition(const spmd_visitor *v, const hk_sharding *s) {
  return plain_tiled(s) && hk_sharding_is_tiled(s) && !s->replicate_on_last_tile_dim &&
         hk_sharding_num_tiles(s) == v->p->num_partitions;
}

/* The sharding user u asks of its operand x, as far as it is plain: a dot
 * wants x matched to its output's tiling, an elementwise op its own
 * sharding; NULL otherwise (XLA's GetShardingFromUser, for the cases the
 * windowed-einsum test needs). */
static const hk_sharding *sharding_from_user(spmd_visitor *v, const hk_instr *u, const hk_instr *x) {
  if (!u->sharding) return NULL;
  if (hk_opcode_is_elementwise(u->opcode) && hk_shape_equal(u->shape, x->shape)) return u->sharding;
  if (u->opcode != HK_OP_DOT || !u->attrs || !u->attrs->dot || u->n_operands != 2) return NULL;
  int side = u->operands[0] == x ? 0 : u->operands[1] == x ? 1 : -1;
  if (side < 0) return NULL;
  dot_dims dm;
  dot_plan p;
  map_dims(u, &dm);
  plan_output(v, &dm, u->sharding, &p);
  return side ? p.rhs : p.lhs;
}

/* XLA's check_users_sharding: true when another user of x would reshard it
 * to the same sharding the loop avoids (`ideal`), so the reshard is shared
 * and a windowed loop would not save it. */
static bool users_share_reshard(spmd_visitor *v, const hk_instr *dot, const hk_instr *x,
                                const hk_sharding *ideal) {
  if (v->p->options.skip_checking_windowed_einsum_users || x->n_users <= 1 || !ideal) return false;
  const hk_sharding *have = spmd_sharding_of(v, x);
  for (int32_t k = 0; k < x->n_users; k++) {
    const hk_instr *u = x->users[k];
    const hk_sharding *from = u == dot ? NULL : sharding_from_user(v, u, x);
    if (!from || hk_sharding_equivalent(from, have)) continue;
    if (hk_sharding_equivalent(from, ideal)) return true;
  }
  return false;
}

/* Gather / contract windows: the rotating operand (side w) is sharded along
 * one dim only, evenly: a non-contracting dim, or a contracting dim the
 * kept operand has whole; the output is sharded along the kept operand's
 * non-contracting dims only and the kept operand already matches it. */
static bool rotating_plan(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                          spmd_windowed_dot *out) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const int *out_from_k = w ? dm->out_from_lhs : dm->out_from_rhs;
  const int *out_from_w = w ? dm->out_from_rhs : dm->out_from_lhs;
  const int *w_to_out = w ? dm->rhs_to_out : dm->lhs_to_out;
  if (dm->n_whole || !one_tile_per_partition(v, o)) return false;
  for (int od = 0; od < dm->ro; od++)
    if (hk_sharding_dim_partitions(o, od) > 1 && (out_from_k[od] < 0 || out_from_w[od] >= 0))
      return false;
  spmd_value *kv = spmd_lookup(v, orig->operands[1 - w]), *wv = spmd_lookup(v, orig->operands[w]);
  dot_plan p;
  plan_output(v, dm, o, &p);
  const hk_sharding *kept_target = w ? p.lhs : p.rhs;
  if (!kv->sharding || !kept_target || !hk_sharding_equivalent(kv->sharding, kept_target))
    return false;
  const hk_sharding *ws = wv->sharding;
  if (!one_tile_per_partition(v, ws)) return false;
  const hk_shape *wshape = orig->operands[w]->shape;
  int wd = spmd_only_tiled_dim(ws, wshape->rank);
  if (wd < 0 || !windowed_worth_it(v, orig, w, false) ||
      users_share_reshard(v, orig, orig->operands[w], w ? p.rhs : p.lhs))
    return false;
  *out = (spmd_windowed_dot){.side = w, .dim = wd, .ring = ws, .ring_dim = wd,
                             .ring_size = v->p->num_partitions, .out = o,
                             .lhs_sharding = w ? kv->sharding : ws, .rhs_sharding = w ? ws : kv->sharding};
  if (w_to_out[wd] >= 0) {
    /* A non-contracting dim (not batch): each step fills a slice. */
    if (out_from_k[w_to_out[wd]] >= 0) return false;
    out->kind = SPMD_WINDOW_GATHER;
    out->out_dim = w_to_out[wd];
    return true;
  }
  /* A contracting dim whose kept-side partner the kept operand has whole. */
  int kd = w ? dm->lhs_contract_of_rhs[wd] : dm->rhs_contract_of_lhs[wd];
  if (kd < 0 || hk_sharding_dim_partitions(kv->sharding, kd) > 1) return false;
  out->kind = SPMD_WINDOW_CONTRACT;
  out->n_win = 1;
  out->win_dims[0] = wd;
  out->win_other[0] = kd;
  out->win_parts[0] = out->ring_size;
  out->rot_sharding = ws;
  return true;
}

/* The one sharded contracting dim of operand `side` (-1: none or several). */
static int only_sharded_contracting(const hk_sharding *s, const dot_dims *dm, int side) {
  int rank = side ? dm->rr : dm->rl, k = -1;
  const int *to_out = side ? dm->rhs_to_out : dm->lhs_to_out;
  for (int d = 0; d < rank; d++)
    if (to_out[d] < 0 && hk_sharding_dim_partitions(s, d) > 1) {
      if (k >= 0) return -1;
      k = d;
    }
  return k;
}

/* The output dims the scatter ring runs along (XLA's reduce-scatter
 * window over the output's non-contracting partitions): the output dims
 * one operand alone feeds (not batch), split in the output and whole in
 * that operand, together split in k like the contraction; a single such
 * dim split in k is taken first.  Returns how many (0: none), the output
 * dims in `ring` (increasing), and the operand side in *side. */
static int scatter_ring_dims(const dot_dims *dm, const hk_sharding *o, const hk_sharding *l,
                             const hk_sharding *r, int64_t k, int *ring, int *side) {
  for (int od = 0; od < dm->ro; od++) {
    int fl = dm->out_from_lhs[od], fr = dm->out_from_rhs[od];
    if (hk_sharding_dim_partitions(o, od) != k || (fl >= 0) == (fr >= 0)) continue;
    if (hk_sharding_dim_partitions(fl >= 0 ? l : r, fl >= 0 ? fl : fr) == 1) {
      ring[0] = od;
      *side = fl >= 0 ? 0 : 1;
      return 1;
    }
  }
  for (int s = 0; s < 2; s++) {
    const int *own = s ? dm->out_from_rhs : dm->out_from_lhs;
    const int *other = s ? dm->out_from_lhs : dm->out_from_rhs;
    int n = 0;
    int64_t prod = 1;
    for (int od = 0; od < dm->ro; od++) {
      int64_t parts = hk_sharding_dim_partitions(o, od);
      if (own[od] < 0 || other[od] >= 0 || parts == 1 ||
          hk_sharding_dim_partitions(s ? r : l, own[od]) != 1)
        continue;
      ring[n++] = od;
      prod *= parts;
    }
    if (n > 1 && prod == k) {
      *side = s;
      return n;
    }
  }
  return 0;
}

static bool in_ring(const int *ring, int n, int od) {
  for (int i = 0; i < n; i++)
    if (ring[i] == od) return true;
  return false;
}

/* Every output dim off the ring split as the operand dims it comes from. */
static bool other_dims_match(const dot_dims *dm, const hk_sharding *o, const hk_sharding *l,
                             const hk_sharding *r, const int *ring, int n_ring) {
  for (int e = 0; e < dm->ro; e++) {
    if (in_ring(ring, n_ring, e)) continue;
    int64_t parts = hk_sharding_dim_partitions(o, e);
    if ((dm->out_from_lhs[e] >= 0 && hk_sharding_dim_partitions(l, dm->out_from_lhs[e]) != parts) ||
        (dm->out_from_rhs[e] >= 0 && hk_sharding_dim_partitions(r, dm->out_from_rhs[e]) != parts))
      return false;
  }
  return true;
}

/* Device for device: the operands hold the same contraction slice, the
 * output tile the local dot makes (off the ring), and each ring (devices
 * differing only along the ring dims) holds every slice once. */
static bool scatter_devices_agree(spmd_visitor *v, const dot_dims *dm, const hk_sharding *o,
                                  const hk_sharding *l, const hk_sharding *r, int ld, int rd,
                                  const int *ring_dims, int n_ring, int64_t k) {
  int64_t n = v->p->num_partitions, a[HK_MAX_RANK + 1], b[HK_MAX_RANK + 1], c[HK_MAX_RANK + 1];
  bool *seen = calloc((size_t)n, 1), ok = seen != NULL;
  for (int64_t dev = 0; dev < n && ok; dev++) {
    ok = hk_sharding_tile_index(l, dev, a) && hk_sharding_tile_index(r, dev, b) &&
         hk_sharding_tile_index(o, dev, c) && a[ld] == b[rd];
    int64_t ring = 0;
    for (int e = 0; ok && e < dm->ro; e++) {
      if (in_ring(ring_dims, n_ring, e)) continue;
      if (dm->out_from_lhs[e] >= 0 && c[e] != a[dm->out_from_lhs[e]]) ok = false;
      if (dm->out_from_rhs[e] >= 0 && c[e] != b[dm->out_from_rhs[e]]) ok = false;
      ring = ring * hk_sharding_dim_partitions(o, e) + c[e];
    }
    if (ok && (ring * k + a[ld] >= n || seen[ring * k + a[ld]])) ok = false;
    if (ok) seen[ring * k + a[ld]] = true;
  }
  free(seen);
  return ok;
}

/* o's tile array with the ring dims merged into its last dim (row-major
 * in their order): the ring's order of devices. */
static const hk_sharding *ring_of(spmd_visitor *v, const hk_sharding *o, const int *ring, int n_ring) {
  if (n_ring == 1) return o;
  int gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][HK_MAX_RANK + 1], n_new = 0;
  const int *groups[HK_MAX_RANK + 1];
  for (int t = 0; t < o->n_tile_dims; t++) {
    if (in_ring(ring, n_ring, t)) continue;
    gsz[n_new] = 1;
    gbuf[n_new][0] = t;
    groups[n_new] = gbuf[n_new];
    n_new++;
  }
  gsz[n_new] = n_ring;
  for (int i = 0; i < n_ring; i++) gbuf[n_new][i] = ring[i];
  groups[n_new] = gbuf[n_new];
  return spmd_regroup_memo(v, o, n_new + 1, gsz, groups, false);
}

/* s with the split of dim `from` moved to dim `to` (whole in s), each
 * device keeping its tile index: *dim becomes `to`.  NULL when `to` is
 * split already. */
static const hk_sharding *moved_split(spmd_visitor *v, const hk_sharding *s, int from, int to,
                                      int *dim) {
  if (to < 0 || hk_sharding_dim_partitions(s, to) > 1) return NULL;
  int n = s->n_tile_dims, gsz[HK_MAX_RANK + 1], gbuf[HK_MAX_RANK + 1][1];
  const int *groups[HK_MAX_RANK + 1];
  for (int t = 0; t < n; t++) {
    gsz[t] = 1;
    gbuf[t][0] = t == from ? to : t == to ? from : t;
    groups[t] = gbuf[t];
  }
  *dim = to;
  return spmd_regroup_memo(v, s, n, gsz, groups, s->replicate_on_last_tile_dim);
}

/* The scatter window (XLA's reduce-scatter windowed einsum): both operands
 * split along one pair of matching contracting dims in k pieces (either
 * may be partially replicated); the output split in k along the
 * non-contracting dims of one operand that operand has whole (the ring),
 * its other dims split as the local dot makes them (the devices differing
 * only along the ring form one, a subgroup when k < N, as XLA's
 * partitioning of the dot within groups reaches it). */
static bool scatter_plan_for(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                             const hk_sharding *l, const hk_sharding *r, spmd_windowed_dot *out) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  if (dm->n_whole || !plain_tiled(o) || !hk_sharding_is_tiled(o) || o->replicate_on_last_tile_dim ||
      hk_sharding_num_tiles(o) != v->p->num_partitions || !plain_tiled(l) || !plain_tiled(r) ||
      !hk_sharding_is_tiled(l) || !hk_sharding_is_tiled(r))
    return false;
  int ld = only_sharded_contracting(l, dm, 0), rd = only_sharded_contracting(r, dm, 1);
  if (ld < 0 || rd < 0) return false;
  if (dm->rhs_contract_of_lhs[ld] != rd) {
    /* Split on different contracting pairs: as XLA, the smaller operand's
     * split moves to the partner of the other's (one all-to-all). */
    int side = hk_shape_byte_size(orig->operands[0]->shape) < hk_shape_byte_size(orig->operands[1]->shape) ? 0 : 1;
    if (side == 0) l = moved_split(v, l, ld, dm->lhs_contract_of_rhs[rd], &ld);
    else r = moved_split(v, r, rd, dm->rhs_contract_of_lhs[ld], &rd);
    if (!l || !r) return false;
  }
  int64_t k = hk_sharding_dim_partitions(l, ld);
  if (k != hk_sharding_dim_partitions(r, rd)) return false;
  int ring[HK_MAX_RANK], side = 0;
  int n_ring = scatter_ring_dims(dm, o, l, r, k, ring, &side);
  if (!n_ring || !other_dims_match(dm, o, l, r, ring, n_ring) ||
      !scatter_devices_agree(v, dm, o, l, r, ld, rd, ring, n_ring, k) ||
      !windowed_worth_it(v, orig, -1, true))
    return false;
  *out = (spmd_windowed_dot){.kind = SPMD_WINDOW_SCATTER, .side = side,
                             .ring = ring_of(v, o, ring, n_ring),
                             .ring_dim = n_ring == 1 ? ring[0] : o->n_tile_dims - n_ring,
                             .ring_size = k, .out = o, .lhs_sharding = l, .rhs_sharding = r,
                             .lhs_contract = ld, .rhs_contract = rd, .n_win = n_ring};
  for (int i = 0; i < n_ring; i++) {
    out->win_out[i] = ring[i];
    out->win_dims[i] = side ? dm->out_from_rhs[ring[i]] : dm->out_from_lhs[ring[i]];
    out->win_parts[i] = hk_sharding_dim_partitions(o, ring[i]);
  }
  return true;
}

/* The scatter window for the operands as they are. */
static bool scatter_plan(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, spmd_windowed_dot *out) {
  return scatter_plan_for(v, orig, dm, spmd_lookup(v, orig->operands[0])->sharding,
                          spmd_lookup(v, orig->operands[1])->sharding, out);
}

/* ---- windows within groups (XLA's dot grouped on non-contracting dims) ---- */

/* Operand `side` (sharding s) tiles each of its non-contracting dims as
 * the output o tiles the dim it becomes, device for device. */
static bool nc_tiles_agree(spmd_visitor *v, const dot_dims *dm, const hk_sharding *s, int side,
                           const hk_sharding *o) {
  int64_t a[HK_MAX_RANK + 1], c[HK_MAX_RANK + 1];
  const int *to_out = side ? dm->rhs_to_out : dm->lhs_to_out;
  for (int64_t dev = 0; dev < v->p->num_partitions; dev++) {
    if (!hk_sharding_tile_index(s, dev, a) || !hk_sharding_tile_index(o, dev, c)) return false;
    for (int d = 0; d < (side ? dm->rr : dm->rl); d++)
      if (dim_role(dm, side, d) == ROLE_NON_CONTRACTING && a[d] != c[to_out[d]]) return false;
  }
  return true;
}

/* The output group of each device: its output tile along the dims that
 * operand w's non-contracting dims become, row-major (malloc'ed). */
static int64_t *output_groups_of(spmd_visitor *v, const dot_dims *dm, const hk_sharding *o, int w) {
  int64_t n = v->p->num_partitions, c[HK_MAX_RANK + 1];
  int64_t *g = malloc(sizeof *g * (size_t)n);
  if (!g) hk_out_of_memory();
  const int *out_from_w = w ? dm->out_from_rhs : dm->out_from_lhs;
  const int *out_from_k = w ? dm->out_from_lhs : dm->out_from_rhs;
  for (int64_t dev = 0; dev < n; dev++) {
    g[dev] = 0;
    if (!hk_sharding_tile_index(o, dev, c)) continue;
    for (int od = 0; od < dm->ro; od++)
      if (out_from_w[od] >= 0 && out_from_k[od] < 0) g[dev] = g[dev] * hk_sharding_dim_partitions(o, od) + c[od];
  }
  return g;
}

/* Whether tile dim t of s is the same on every device of each group. */
static bool constant_in_groups(spmd_visitor *v, const hk_sharding *s, int t, const int64_t *group,
                               int64_t n_groups) {
  int64_t n = v->p->num_partitions, idx[HK_MAX_RANK + 1];
  int64_t *first = malloc(sizeof *first * (size_t)n_groups);
  if (!first) hk_out_of_memory();
  for (int64_t k = 0; k < n_groups; k++) first[k] = -1;
  bool ok = true;
  for (int64_t dev = 0; dev < n && ok; dev++) {
    ok = hk_sharding_tile_index(s, dev, idx) && group[dev] < n_groups;
    if (ok && first[group[dev]] < 0) first[group[dev]] = idx[t];
    else if (ok) ok = first[group[dev]] == idx[t];
  }
  free(first);
  return ok;
}

/* The dims along which XLA replicates the other operand k (sharding ks)
 * when the dot is grouped on operand w's non-contracting dims
 * (GetNonContractingPartitionGroupedShardingForOtherOperand, for a tiled
 * ks without replication): the dims the groups already tell apart, else
 * its contracting dims when they split like the groups and its
 * non-contracting dims like the output (if both would do, when k is no
 * bigger than an output tile), else its non-contracting dims when those
 * split like the groups and the contractions alike.  Sets in[d] for each;
 * false when none. */
static bool other_group_dims(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                             int64_t groups, bool *in) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *ks = spmd_lookup(v, orig->operands[1 - w])->sharding;
  const hk_sharding *ws = spmd_lookup(v, orig->operands[w])->sharding;
  int k = 1 - w, rank = k ? dm->rr : dm->rl;
  memset(in, 0, sizeof(bool) * (size_t)rank);
  if (!plain_tiled(ks) || !hk_sharding_is_tiled(ks) || ks->replicate_on_last_tile_dim) return false;
  int64_t *group = output_groups_of(v, dm, o, w), found = 1;
  for (int d = 0; d < rank; d++)
    if (hk_sharding_dim_partitions(ks, d) > 1 && constant_in_groups(v, ks, d, group, groups)) {
      in[d] = true;
      found *= hk_sharding_dim_partitions(ks, d);
    }
  free(group);
  if (found == groups) return true;
  int64_t kc = role_partitions(dm, ks, k, ROLE_CONTRACTING), knc = role_partitions(dm, ks, k, ROLE_NON_CONTRACTING);
  bool contracting = kc == groups && knc == output_non_contracting_partitions(dm, o, k);
  bool non_contracting = groups == knc && role_partitions(dm, ws, w, ROLE_CONTRACTING) == kc;
  if (contracting && non_contracting &&
      hk_shape_byte_size(orig->operands[k]->shape) > hk_shape_byte_size(spmd_local_shape(v, o, orig->shape)))
    contracting = false;
  if (!contracting && !non_contracting) return false;
  for (int d = 0; d < rank; d++)
    in[d] = hk_sharding_dim_partitions(ks, d) > 1 &&
            dim_role(dm, k, d) == (contracting ? ROLE_CONTRACTING : ROLE_NON_CONTRACTING);
  return true;
}

/* The other operand k within the groups (replicated along in[]) splits
 * as the output does there: its non-contracting and batch dims as the
 * output dims they become, its contraction whole. */
static bool other_matches_output_in_groups(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int k,
                                           const bool *in) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *ks = spmd_lookup(v, orig->operands[k])->sharding;
  const int *to_out = k ? dm->rhs_to_out : dm->lhs_to_out;
  for (int d = 0; d < (k ? dm->rr : dm->rl); d++) {
    int64_t have = in[d] ? 1 : hk_sharding_dim_partitions(ks, d);
    if (have != (to_out[d] >= 0 ? hk_sharding_dim_partitions(o, to_out[d]) : 1)) return false;
  }
  return true;
}

/* How many iterations XLA estimates a window within the groups of the
 * dot grouped on operand w's non-contracting dims would run (0: none),
 * as EstimateWindowedEinsumIterationsForNonContractingPartitioning:
 * XLA's windowed-einsum configuration on the groups - the other operand
 * windowed against w matched to the output, w windowed (its contraction)
 * against the other matched to the output, or both windowed along the
 * contraction with the result split - with the partition counts it
 * passes and the gates on the operand or result sizes it passes. */
static int64_t xla_grouped_iterations(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w) {
  const hk_spmd_options *opt = &v->p->options;
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *ws = spmd_lookup(v, orig->operands[w])->sharding;
  const hk_sharding *ks = spmd_lookup(v, orig->operands[1 - w])->sharding;
  int k = 1 - w;
  int64_t wnc = role_partitions(dm, ws, w, ROLE_NON_CONTRACTING), n = v->p->num_partitions / wnc;
  bool in[HK_MAX_RANK];
  if (!other_group_dims(v, orig, dm, w, wnc, in)) return 0;
  int64_t wc = role_partitions(dm, ws, w, ROLE_CONTRACTING), wb = role_partitions(dm, ws, w, ROLE_BATCH);
  int64_t kc = role_partitions(dm, ks, k, ROLE_CONTRACTING), knc = role_partitions(dm, ks, k, ROLE_NON_CONTRACTING);
  int64_t kb = role_partitions(dm, ks, k, ROLE_BATCH);
  int64_t out_w = output_non_contracting_partitions(dm, o, w), out_k = output_non_contracting_partitions(dm, o, k);
  int64_t t = opt->threshold_for_windowed_einsum_mib * 1024 * 1024;
  bool ag = opt->enable_windowed_einsum_for_all_gather;
  /* The other operand windowed: w within a group matched to the output
   * (nothing but batch dims split, as the output's). */
  if (ag && out_w == n && wc == 1 && hk_shape_byte_size(orig->operands[k]->shape) >= t &&
      (kc == n || knc == n || kb == n))
    return n;
  if (ag && out_k == n && other_matches_output_in_groups(v, orig, dm, k, in) &&
      hk_shape_byte_size(orig->operands[w]->shape) / wnc >= t && (wc == n || wb == n))
    return n;
  if (opt->enable_windowed_einsum_for_reduce_scatter && wc == kc && wc == n && (out_w == n || out_k == n) &&
      hk_shape_byte_size(orig->shape) / wnc >= t)
    return n;
  return 0;
}

/* The contract window within groups: operand w is split along its
 * non-contracting dims exactly as the output (the groups, one per output
 * tile of those dims) and along contracting dims (the ring within a
 * group, row-major over them); the output is split along those dims and
 * the other operand's non-contracting dims only.  The other operand is
 * resharded as the output asks (whole contracting dims, replicated over
 * the groups), when that is how XLA reshards it before partitioning
 * within groups (other_matches_output_in_groups). */
static bool grouped_contract_plan(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                                  spmd_windowed_dot *out) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *ws = spmd_lookup(v, orig->operands[w])->sharding;
  const int *w_to_out = w ? dm->rhs_to_out : dm->lhs_to_out;
  const int *out_from_w = w ? dm->out_from_rhs : dm->out_from_lhs;
  const int *out_from_k = w ? dm->out_from_lhs : dm->out_from_rhs;
  if (dm->n_whole || !one_tile_per_partition(v, o) || !one_tile_per_partition(v, ws)) return false;
  int n_c = 0, c_dims[HK_MAX_RANK], k_dims[HK_MAX_RANK];
  int64_t groups = 1;
  for (int d = 0; d < (w ? dm->rr : dm->rl); d++) {
    int64_t parts = hk_sharding_dim_partitions(ws, d);
    if (parts == 1) continue;
    int role = dim_role(dm, w, d);
    if (role == ROLE_BATCH) return false;
    if (role == ROLE_NON_CONTRACTING) {
      if (hk_sharding_dim_partitions(o, w_to_out[d]) != parts) return false;
      groups *= parts;
      continue;
    }
    int kd = w ? dm->lhs_contract_of_rhs[d] : dm->rhs_contract_of_lhs[d];
    if (kd < 0) return false;
    c_dims[n_c] = d;
    k_dims[n_c++] = kd;
  }
  if (!n_c || groups == 1) return false;   /* no ring, or no groups (rotating_plan's case) */
  for (int od = 0; od < dm->ro; od++)
    if (hk_sharding_dim_partitions(o, od) > 1 && out_from_w[od] >= 0 && out_from_k[od] >= 0) return false;
  bool in[HK_MAX_RANK];
  if (output_non_contracting_partitions(dm, o, w) != groups || !nc_tiles_agree(v, dm, ws, w, o) ||
      !other_group_dims(v, orig, dm, w, groups, in) || !other_matches_output_in_groups(v, orig, dm, 1 - w, in))
    return false;
  dot_plan p;
  plan_output(v, dm, o, &p);
  const hk_sharding *kept = w ? p.lhs : p.rhs;
  if (!p.ok || !kept) return false;
  int64_t ring_size = v->p->num_partitions / groups;
  *out = (spmd_windowed_dot){.kind = SPMD_WINDOW_CONTRACT, .side = w,
                             .ring = ring_of(v, ws, c_dims, n_c),
                             .ring_dim = n_c == 1 ? c_dims[0] : ws->n_tile_dims - n_c,
                             .ring_size = ring_size, .out = o,
                             .lhs_sharding = w ? kept : ws, .rhs_sharding = w ? ws : kept,
                             .n_win = n_c, .rot_sharding = ws};
  for (int j = 0; j < n_c; j++) {
    out->win_dims[j] = c_dims[j];
    out->win_other[j] = k_dims[j];
    out->win_parts[j] = hk_sharding_dim_partitions(ws, c_dims[j]);
  }
  return true;
}

/* XLA's size gate for a window within groups: the rotating operand's
 * share of one group (the ring w->ring_size devices hold it) at least
 * threshold_for_windowed_einsum_mib. */
static bool grouped_worth_it(const spmd_visitor *v, const hk_instr *dot, const spmd_windowed_dot *w) {
  const hk_spmd_options *o = &v->p->options;
  if (!o->enable_windowed_einsum_for_all_gather) return false;
  if (o->has_total_bytes_windowed_einsum_threshold)
    return hk_spmd_should_enable_windowed_einsum_with_threshold(
        o, dot->operands[0], dot->operands[1], o->threshold_for_windowed_einsum_mib);
  int64_t groups = v->p->num_partitions / w->ring_size;
  return hk_shape_byte_size(dot->operands[w->side]->shape) / groups >=
         o->threshold_for_windowed_einsum_mib * 1024 * 1024;
}

/* The sharding the dot asks of operand `side` (matched to the output). */
static const hk_sharding *output_matched(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int side) {
  dot_plan p;
  plan_output(v, dm, spmd_sharding_of(v, orig), &p);
  return side ? p.rhs : p.lhs;
}

/* The contract window within groups for operand w, gated; the loop's
 * trip count (0: none). */
static int64_t grouped_iterations(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                                  spmd_windowed_dot *out) {
  if (!grouped_contract_plan(v, orig, dm, w, out) || !grouped_worth_it(v, orig, out) ||
      users_share_reshard(v, orig, orig->operands[w], output_matched(v, orig, dm, w)))
    return 0;
  return out->ring_size;
}

/* The scatter window within the groups of the dot grouped on operand w's
 * non-contracting dims: the other operand replicated along
 * other_group_dims (one all-gather, as XLA's grouping), then both split
 * along the contraction within each group and the partial sums ringing
 * round it - XLA's reduce-scatter configuration on the groups. */
static bool grouped_scatter_plan(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                                 spmd_windowed_dot *out) {
  const hk_sharding *ws = spmd_lookup(v, orig->operands[w])->sharding;
  const hk_sharding *ks = spmd_lookup(v, orig->operands[1 - w])->sharding;
  int64_t groups = role_partitions(dm, ws, w, ROLE_NON_CONTRACTING), dims[HK_MAX_RANK];
  bool in[HK_MAX_RANK];
  if (!v->p->options.enable_windowed_einsum_for_reduce_scatter ||
      hk_shape_byte_size(orig->shape) / groups < v->p->options.threshold_for_windowed_einsum_mib * 1024 * 1024 ||
      !other_group_dims(v, orig, dm, w, groups, in))
    return false;
  int n = 0;
  for (int d = 0; d < (w ? dm->rl : dm->rr); d++)
    if (in[d]) dims[n++] = d;
  const hk_sharding *kept = spmd_replicate_dims(v, ks, n, dims);
  return scatter_plan_for(v, orig, dm, w ? kept : ws, w ? ws : kept, out) &&
         out->ring_size == v->p->num_partitions / groups;
}

/* Which operand XLA groups the dot on when both match the output on their
 * non-contracting dims (LhsIsBestMatchForNonContractingPartitioning,
 * without a cost model): by default the one whose grouping replicates
 * less of the other operand; with choose_faster_windowed_einsum_over_mem
 * the one whose windowed loop within groups runs fewer iterations.  The
 * iterations it_l / it_r are XLA's estimates (0: no loop). */
static bool lhs_is_best_match(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, bool may_l,
                              bool may_r, int64_t it_l, int64_t it_r) {
  const hk_sharding *lc = spmd_lookup(v, orig->operands[0])->sharding;
  const hk_sharding *rc = spmd_lookup(v, orig->operands[1])->sharding;
  int64_t lnc = role_partitions(dm, lc, 0, ROLE_NON_CONTRACTING);
  int64_t rnc = role_partitions(dm, rc, 1, ROLE_NON_CONTRACTING);
  if (may_l && may_r && v->p->options.choose_faster_windowed_einsum_over_mem)
    return it_l && it_r ? it_l < it_r : it_l > 0;
  int64_t lb = hk_shape_byte_size(spmd_local_shape(v, lc, orig->operands[0]->shape));
  int64_t rb = hk_shape_byte_size(spmd_local_shape(v, rc, orig->operands[1]->shape));
  return may_l && (!may_r || lnc * rb < rnc * lb);
}

/* XLA's PrioritizeContractingDimensionsPartitioning, without a cost
 * model: with choose_faster_windowed_einsum_over_mem and the contracting
 * dims split alike, grouping on them wins when the loops within
 * non-contracting groups would run more iterations than the partitions
 * left within a contracting group. */
static bool contracting_grouping_first(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                       int64_t it_l, int64_t it_r) {
  const hk_sharding *lc = spmd_lookup(v, orig->operands[0])->sharding;
  const hk_sharding *rc = spmd_lookup(v, orig->operands[1])->sharding;
  int64_t lk = role_partitions(dm, lc, 0, ROLE_CONTRACTING), rk = role_partitions(dm, rc, 1, ROLE_CONTRACTING);
  if (!v->p->options.choose_faster_windowed_einsum_over_mem || lk != rk || lk < 2 || (!it_l && !it_r))
    return false;
  int64_t fewest = it_l && it_r ? (it_l < it_r ? it_l : it_r) : (it_l ? it_l : it_r);
  return fewest > v->p->num_partitions / lk;
}

/* Operands lc and rc split their contracting dims alike, device for
 * device (the same contraction slice on every device). */
static bool contracting_tiles_agree(spmd_visitor *v, const dot_dims *dm, const hk_sharding *lc,
                                    const hk_sharding *rc) {
  int64_t a[HK_MAX_RANK + 1], b[HK_MAX_RANK + 1];
  for (int64_t dev = 0; dev < v->p->num_partitions; dev++) {
    if (!hk_sharding_tile_index(lc, dev, a) || !hk_sharding_tile_index(rc, dev, b)) return false;
    for (int d = 0; d < dm->rl; d++) {
      int r = dm->rhs_contract_of_lhs[d];
      if (r >= 0 && (hk_sharding_dim_partitions(lc, d) != hk_sharding_dim_partitions(rc, r) || a[d] != b[r]))
        return false;
    }
  }
  return true;
}

/* The gather window within contracting groups (XLA's dot grouped on its
 * contracting dims, choose_faster_windowed_einsum_over_mem's path): both
 * operands split alike along the contraction (the groups); within a
 * group operand k is split along its non-contracting dims as the output,
 * and operand w along one non-contracting dim that rotates round the
 * group, filling slices of the partial sums, all-reduced over the groups
 * after the loop.  *sum the plan whose result and reduce groups those are. */
static bool contracting_groups_gather_plan(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, int w,
                                           spmd_windowed_dot *out, dot_plan *sum) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *lc = spmd_lookup(v, orig->operands[0])->sharding;
  const hk_sharding *rc = spmd_lookup(v, orig->operands[1])->sharding;
  const hk_sharding *ws = w ? rc : lc, *ks = w ? lc : rc;
  int64_t groups = role_partitions(dm, ws, w, ROLE_CONTRACTING);
  if (dm->n_whole || !one_tile_per_partition(v, ws) || !one_tile_per_partition(v, ks) || groups < 2 ||
      !contracting_tiles_agree(v, dm, lc, rc))
    return false;
  int64_t ring = v->p->num_partitions / groups;
  int wd = -1;
  for (int d = 0; d < (w ? dm->rr : dm->rl); d++) {
    if (hk_sharding_dim_partitions(ws, d) == 1 || dim_role(dm, w, d) == ROLE_CONTRACTING) continue;
    if (wd >= 0 || dim_role(dm, w, d) != ROLE_NON_CONTRACTING) return false;
    wd = d;
  }
  if (wd < 0 || hk_sharding_dim_partitions(ws, wd) != ring ||
      role_partitions(dm, ks, 1 - w, ROLE_BATCH) > 1 ||
      role_partitions(dm, ks, 1 - w, ROLE_NON_CONTRACTING) != ring ||
      output_non_contracting_partitions(dm, o, 1 - w) != ring || !nc_tiles_agree(v, dm, ks, 1 - w, o))
    return false;
  plan_operand(v, dm, ks, 1 - w, sum);
  if (!sum->ok || !sum->out) return false;
  const int *w_to_out = w ? dm->rhs_to_out : dm->lhs_to_out;
  *out = (spmd_windowed_dot){.kind = SPMD_WINDOW_GATHER, .side = w, .dim = wd, .ring = ws,
                             .ring_dim = wd, .ring_size = ring, .out = sum->out,
                             .out_dim = w_to_out[wd], .lhs_sharding = lc, .rhs_sharding = rc};
  return true;
}

/* The contracting-groups gather window (rhs rotating first, as XLA's
 * inner configuration), gated on the rotating operand's share of a group. */
static bool contracting_groups_window(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                      spmd_windowed_dot *out, dot_plan *sum) {
  for (int w = 1; w >= 0; w--)
    if (contracting_groups_gather_plan(v, orig, dm, w, out, sum))
      return grouped_worth_it(v, orig, out) &&
             !users_share_reshard(v, orig, orig->operands[w], output_matched(v, orig, dm, w));
  return false;
}

/* The window within groups XLA builds when no window over all devices
 * applies: the dot grouped on the non-contracting dims of the operand
 * that matches the output best, that operand rotating within a group;
 * or, when XLA prioritizes grouping on the contracting dims, the gather
 * window within those groups (*sum then the all-reduce after the loop). */
static bool window_within_groups(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                 spmd_windowed_dot *out, dot_plan *sum) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  const hk_sharding *lc = spmd_lookup(v, orig->operands[0])->sharding;
  const hk_sharding *rc = spmd_lookup(v, orig->operands[1])->sharding;
  if (!one_tile_per_partition(v, o) || !plain_tiled(lc) || !plain_tiled(rc) ||
      !hk_sharding_is_tiled(lc) || !hk_sharding_is_tiled(rc))
    return false;
  /* XLA groups on batch dims first. */
  if (role_partitions(dm, lc, 0, ROLE_BATCH) > 1 || role_partitions(dm, rc, 1, ROLE_BATCH) > 1)
    return false;
  int64_t lnc = role_partitions(dm, lc, 0, ROLE_NON_CONTRACTING);
  int64_t rnc = role_partitions(dm, rc, 1, ROLE_NON_CONTRACTING);
  bool may_l = lnc > 1 && lnc == output_non_contracting_partitions(dm, o, 0);
  bool may_r = rnc > 1 && rnc == output_non_contracting_partitions(dm, o, 1);
  if (!may_l && !may_r) return false;
  /* XLA's estimates choose the grouping; within it, the matched operand's
   * contraction rotates when the other operand is matched to the output
   * there, else the partial sums do (XLA's configurations in that order;
   * its third, the other operand rotating, is not built here). */
  int64_t it_l = may_l ? xla_grouped_iterations(v, orig, dm, 0) : 0;
  int64_t it_r = may_r ? xla_grouped_iterations(v, orig, dm, 1) : 0;
  if (contracting_grouping_first(v, orig, dm, it_l, it_r))
    return contracting_groups_window(v, orig, dm, out, sum);
  int w = lhs_is_best_match(v, orig, dm, may_l, may_r, it_l, it_r) ? 0 : 1;
  if (!(w ? may_r : may_l)) return false;
  return grouped_iterations(v, orig, dm, w, out) || grouped_scatter_plan(v, orig, dm, w, out);
}

/* Whether any window could pass windowed_worth_it: the cheap test first,
 * since most dots are far below the threshold. */
static bool some_window_big_enough(const spmd_visitor *v, const hk_instr *dot) {
  const hk_spmd_options *o = &v->p->options;
  if (o->has_total_bytes_windowed_einsum_threshold) return true;
  int64_t t = o->threshold_for_windowed_einsum_mib * 1024 * 1024;
  return hk_shape_byte_size(dot->operands[0]->shape) >= t ||
         hk_shape_byte_size(dot->operands[1]->shape) >= t || hk_shape_byte_size(dot->shape) >= t;
}

/* The user turned collective matmul off for this dot (XLA's frontend
 * attribute _xla_collective_matmul="none"). */
static bool windowed_disabled_by_user(const hk_instr *dot) {
  const hk_attrs *a = dot->attrs;
  for (int32_t i = 0; a && i < a->n_frontend_attributes; i++)
    if (!strcmp(a->frontend_attributes[i].key, "_xla_collective_matmul") &&
        !strcmp(a->frontend_attributes[i].value, "none"))
      return true;
  return false;
}

static void local_contracting_windows(spmd_visitor *v, hk_instr *d, const dot_dims *dm);
static void zero_contracted_padding(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                    const dot_plan *p, hk_instr **ops);

/* d, partial sums of plan p, all-reduced over p's contracting splits. */
static hk_instr *all_reduce_partial_sums(spmd_visitor *v, hk_instr *orig, const dot_plan *p, hk_instr *d) {
  int64_t n_groups, gsize;
  int64_t *groups = spmd_groups(v, p->driver, p->n_reduce, p->reduce_dims, &n_groups, &gsize);
  const hk_spmd_collective_ops *c = &v->p->collectives;
  d = c->all_reduce(c->state, v->comp, d, spmd_reducer(v->m, (hk_prim)orig->shape->elem, HK_OP_ADD),
                    n_groups, gsize, groups, &v->p->next_channel_id);
  v->p->collectives_emitted++;
  free(groups);
  return d;
}

/* spmd_windowed_dot's fit_local for a convolution (ctx its dot_dims). */
static void fit_local_windows(spmd_visitor *v, hk_instr *local, const void *ctx) {
  local_contracting_windows(v, local, ctx);
}

/* The windowed loop when a plan applies (rhs rotating first, as XLA; then
 * a window within groups). */
static hk_status *try_windowed(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                               bool *handled) {
  spmd_windowed_dot w;
  dot_plan sum = {0};
  if (!some_window_big_enough(v, orig) || windowed_disabled_by_user(orig)) return NULL;
  if (!rotating_plan(v, orig, dm, 1, &w) && !rotating_plan(v, orig, dm, 0, &w) &&
      !scatter_plan(v, orig, dm, &w) && !window_within_groups(v, orig, dm, &w, &sum))
    return NULL;
  if (dm->n_spatial_contract) {   /* a convolution: its windows fit each local one */
    w.fit_local = fit_local_windows;
    w.fit_ctx = dm;
  }
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  /* The plans' operand shardings: a scatter may realign one, a window
   * within groups reshards the kept operand. */
  HK_TRY(spmd_reshard(v, lv, w.lhs_sharding, &w.lhs));
  HK_TRY(spmd_reshard(v, rv, w.rhs_sharding, &w.rhs));
  if (!sum.ok) {
    spmd_set(v, orig, spmd_emit_windowed_dot(v, orig, &w), w.out);
    *handled = true;
    return NULL;
  }
  hk_instr *ops[2] = {w.lhs, w.rhs};   /* partial sums over contracting groups */
  zero_contracted_padding(v, orig, dm, &sum, ops);
  w.lhs = ops[0];
  w.rhs = ops[1];
  spmd_set(v, orig, all_reduce_partial_sums(v, orig, &sum, spmd_emit_windowed_dot(v, orig, &w)), sum.out);
  *handled = true;
  return NULL;
}

/* ---- XLA's base case: the rules it tries before any cost ------------------- */

static const hk_sharding *implied_output(spmd_visitor *v, const dot_dims *dm,
                                         const hk_sharding *s, int side);

/* Operand `side` (sharding s) tiles exactly as the output o on the dims
 * they share, and o splits nothing else (XLA: s transposed to the output
 * equals o). */
static bool matches_output(const dot_dims *dm, const hk_sharding *s, int side, const hk_sharding *o) {
  for (int d = 0; d < (side ? dm->rr : dm->rl); d++)
    if (dim_role(dm, side, d) == ROLE_CONTRACTING && hk_sharding_dim_partitions(s, d) > 1) return false;
  for (int od = 0; od < dm->ro; od++) {
    int src = side ? dm->out_from_rhs[od] : dm->out_from_lhs[od];
    if (hk_sharding_dim_partitions(o, od) != (src >= 0 ? hk_sharding_dim_partitions(s, src) : 1)) return false;
  }
  return true;
}

/* Fully tiled, one device per tile: where XLA's base case applies. */
static bool base_case_sharding(const spmd_visitor *v, const hk_sharding *s) {
  return plain_tiled(s) && hk_sharding_is_tiled(s) && !s->replicate_on_last_tile_dim &&
         hk_sharding_num_tiles(s) == v->p->num_partitions;
}

/* XLA's PartitionBaseCase, in its order, for dots whose shardings are all
 * fully tiled: operands batch-partitioned alike -> local dot; output
 * batch-partitioned like one operand -> the other matched to it; both
 * operands split over the contracting dims -> the smaller matched to the
 * larger, local dot, partial sums combined; an operand split like the
 * output on its non-contracting dims -> the other replicated.  The plans
 * here keep the operand XLA keeps, whatever the byte count says (XLA's
 * choice is a rule, not a cost). */
static bool xla_base_plan(spmd_visitor *v, const hk_instr *dot, const dot_dims *dm,
                          const hk_sharding *lc, const hk_sharding *rc, const hk_sharding *o,
                          dot_plan *p) {
  int64_t n = v->p->num_partitions;
  if (dm->n_whole || n < 2 || !base_case_sharding(v, lc) || !base_case_sharding(v, rc) ||
      !base_case_sharding(v, o))
    return false;
  int64_t lb = role_partitions(dm, lc, 0, ROLE_BATCH), rb = role_partitions(dm, rc, 1, ROLE_BATCH);
  int64_t lk = role_partitions(dm, lc, 0, ROLE_CONTRACTING), rk = role_partitions(dm, rc, 1, ROLE_CONTRACTING);
  const hk_sharding *implied = implied_output(v, dm, lc, 0);
  dot_plan q;
  if (lb == n && rb == n && implied) {
    plan_output(v, dm, implied, &q);
    if (q.ok && hk_sharding_equivalent(q.lhs, lc) && hk_sharding_equivalent(q.rhs, rc)) {
      *p = q;
      return true;
    }
  }
  for (int side = 0; side < 2; side++) {
    const hk_sharding *s = side ? rc : lc;
    if ((side ? rb : lb) == n && matches_output(dm, s, side, o)) {
      plan_output(v, dm, o, p);
      return p->ok;
    }
  }
  if (lk == n && rk == n) {
    int side = hk_shape_byte_size(dot->operands[0]->shape) < hk_shape_byte_size(dot->operands[1]->shape);
    plan_operand(v, dm, side ? rc : lc, side, p);
    if (p->ok) return true;
  }
  for (int side = 0; side < 2; side++) {
    const hk_sharding *s = side ? rc : lc;
    if (role_partitions(dm, s, side, ROLE_NON_CONTRACTING) == n &&
        output_non_contracting_partitions(dm, o, side) == n && matches_output(dm, s, side, o)) {
      plan_output(v, dm, o, p);
      return p->ok;
    }
  }
  return false;
}

/* XLA's base case when it applies, else the cheapest of the three plans
 * (output-driven, lhs-driven, rhs-driven) whose shardings exist and keep
 * spatial dims whole; false if none. */
static bool best_plan(spmd_visitor *v, const hk_instr *dot, const dot_dims *dm,
                      const hk_sharding *lc, const hk_sharding *rc, const hk_sharding *o,
                      dot_plan *best) {
  if (xla_base_plan(v, dot, dm, lc, rc, o, best)) return true;
  dot_plan plans[3];
  plan_output(v, dm, whole_dims_replicated(v, dm, o, 2), &plans[0]);
  plan_operand(v, dm, whole_dims_replicated(v, dm, lc, 0), 0, &plans[1]);
  plan_operand(v, dm, whole_dims_replicated(v, dm, rc, 1), 1, &plans[2]);
  int b = -1;
  for (int k = 0; k < 3; k++) {
    if (!plans[k].ok || !plans[k].lhs || !plans[k].rhs || !plans[k].out) continue;
    if (!whole_ok(dm, &plans[k])) continue;
    plans[k].cost = plan_cost(v, dot, dm, lc, rc, o, &plans[k]);
    if (b < 0 || plans[k].cost < plans[b].cost) b = k;
  }
  if (b >= 0) *best = plans[b];
  return b >= 0;
}

/* The dims map as memo key words: every entry best_plan reads. */
static int32_t plan_key(const dot_dims *dm, const hk_instr *dot, const hk_sharding *rc,
                        int64_t *key) {
  int32_t n = 0;
  key[n++] = (int64_t)(uintptr_t)rc;
  key[n++] = (int64_t)(uintptr_t)dot->operands[0]->shape;
  key[n++] = (int64_t)(uintptr_t)dot->operands[1]->shape;
  key[n++] = (int64_t)(uintptr_t)dot->shape;
  key[n++] = dm->rl | (int64_t)dm->rr << 16 | (int64_t)dm->ro << 32 | (int64_t)dm->n_whole << 48;
  for (int i = 0; i < dm->rl; i++)
    key[n++] = (dm->lhs_to_out[i] + 1) | (int64_t)(dm->rhs_contract_of_lhs[i] + 1) << 16 |
               (int64_t)(i < dm->n_whole ? dm->whole_lhs[i] + 1 : 0) << 32;
  for (int i = 0; i < dm->rr; i++)
    key[n++] = (dm->rhs_to_out[i] + 1) | (int64_t)(dm->lhs_contract_of_rhs[i] + 1) << 16 |
               (int64_t)(i < dm->n_whole ? dm->whole_rhs[i] + 1 : 0) << 32;
  for (int i = 0; i < dm->ro; i++)
    key[n++] = (dm->out_from_lhs[i] + 1) | (int64_t)(dm->out_from_rhs[i] + 1) << 16 |
               (int64_t)(i < dm->n_whole ? dm->whole_out[i] + 1 : 0) << 32;
  return n;
}

/* best_plan, memoized: a stack of identical layers plans each dot kind
 * once.  Plans live in the module's arena (shardings are interned). */
static const dot_plan *memo_best_plan(spmd_visitor *v, const hk_instr *dot, const dot_dims *dm,
                                      const hk_sharding *lc, const hk_sharding *rc,
                                      const hk_sharding *o) {
  int64_t key[4 + 1 + 3 * HK_MAX_RANK + 1];
  int32_t n = plan_key(dm, dot, rc, key);
  const void *r;
  if (spmd_memo_find(v, SPMD_MEMO_DOT_PLAN, o, lc, n, key, &r)) return r;
  dot_plan found, *p = NULL;
  if (best_plan(v, dot, dm, lc, rc, o, &found)) {
    p = hk_alloc(v->m, sizeof *p);
    *p = found;
  }
  spmd_memo_put(v, SPMD_MEMO_DOT_PLAN, o, lc, n, key, p);
  return p;
}

/* A sparse dot's descriptor sparsity=L.d@N:M (R.d@N:M): the sparse
 * operand (0 lhs, 1 rhs) and its compressed dim d; false for a dense dot. */
static bool sparse_operand(const hk_instr *dot, int *side, int *dim) {
  for (int32_t i = 0; dot->attrs && i < dot->attrs->n_raw; i++) {
    char which;
    int d;
    if (strcmp(dot->attrs->raw[i].name, "sparsity") ||
        sscanf(dot->attrs->raw[i].value, "%c.%d@", &which, &d) != 2 || (which != 'L' && which != 'R'))
      continue;
    *side = which == 'R';
    *dim = d;
    return true;
  }
  return false;
}

/* The operands as the plan wants them: a sparse dot's metadata (third
 * operand, the sparse operand's dims) follows the sparse operand; false
 * (nothing to do) when the plan would split the compressed dim. */
/* The padding of the plan's summed contracting dims zeroed in both
 * operands: it must add nothing (XLA's PadWithZero, on both sides: a NaN
 * on one is not cancelled by a zero on the other). */
static void zero_contracted_padding(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                    const dot_plan *p, hk_instr **ops) {
  int s = p->driver_side;
  const hk_sharding *other = s ? p->lhs : p->rhs;
  for (int k = 0; k < p->n_reduce; k++) {
    int i = (int)p->reduce_dims[k], j = s ? dm->lhs_contract_of_rhs[i] : dm->rhs_contract_of_lhs[i];
    ops[s] = spmd_zero_padding(v, p->driver, orig->operands[s]->shape, i, ops[s]);
    if (j >= 0) ops[1 - s] = spmd_zero_padding(v, other, orig->operands[1 - s]->shape, j, ops[1 - s]);
  }
}

static bool plan_operands(spmd_visitor *v, hk_instr *orig, const dot_dims *dm, const dot_plan *p,
                          hk_instr **ops, hk_status **err) {
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  int side, dim;
  if (orig->n_operands == 3) {
    const hk_sharding *t = sparse_operand(orig, &side, &dim) ? (side ? p->rhs : p->lhs) : NULL;
    if (!t || (hk_sharding_is_tiled(t) && hk_sharding_dim_partitions(t, dim) > 1)) return false;
    if ((*err = spmd_reshard(v, spmd_lookup(v, orig->operands[2]), t, &ops[2]))) return true;
  }
  if (!(*err = spmd_reshard(v, lv, p->lhs, &ops[0]))) *err = spmd_reshard(v, rv, p->rhs, &ops[1]);
  if (!*err && p->n_reduce) zero_contracted_padding(v, orig, dm, p, ops);
  return true;
}

/* The local convolution d's windows over spatial dot dims refitted to its
 * local operands (XLA's CreateShardedConvolution): a contracting one
 * covers the local lhs dim (the kernel's is paired with it), an rhs
 * non-contracting one the local kernel dim (padded by its size - 1), a
 * batch one the local lhs dim with its base dilation and its stride (or
 * window dilation) one less. */
static void local_contracting_windows(spmd_visitor *v, hk_instr *d, const dot_dims *dm) {
  hk_attrs *a = hk_instr_attrs(d);
  const hk_window *w = a->window;
  hk_window_dim *wd = hk_memdup(v->m, w->dims, sizeof *wd * (size_t)w->n_dims);
  for (int i = 0; i < dm->n_spatial_contract; i++) {
    hk_window_dim *x = &wd[dm->sc_window[i]];
    int64_t l = d->operands[0]->shape->dims[dm->sc_dim[i]], step = l > 1 ? l - 1 : 1;
    if (dm->sc_role[i] == SPMD_CONV_CONTRACTING) x->size = l;
    if (dm->sc_role[i] == SPMD_CONV_BATCH) *x = (hk_window_dim){l, step, 0, 0, l, 1, false};
    if (dm->sc_role[i] == SPMD_CONV_BATCH_DILATED) *x = (hk_window_dim){l, 1, 0, 0, l, step, false};
    if (dm->sc_role[i] == SPMD_CONV_RHS_NON_CONTRACTING) {
      x->size = d->operands[1]->shape->dims[dm->sc_dim[i]];
      x->pad_lo = x->pad_hi = x->size - 1;
    }
  }
  hk_window *nw = hk_alloc(v->m, sizeof *nw);
  nw->n_dims = w->n_dims;
  nw->dims = wd;
  a->window = nw;
}

static hk_status *partition_contraction(spmd_visitor *v, hk_instr *orig, const dot_dims *dm,
                                        bool *handled) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  if (spmd_is_subgroup_manual(o) || (o->kind == HK_SHARDING_TILED && o->n_subgroups)) return NULL;
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  const hk_sharding *lc = lv->sharding, *rc = rv->sharding;
  if (!lc || !rc || spmd_is_subgroup_manual(lc) || spmd_is_subgroup_manual(rc)) return NULL;
  if (orig->n_operands == 2) HK_TRY(try_windowed(v, orig, dm, handled));
  if (*handled) return NULL;
  const dot_plan *p = memo_best_plan(v, orig, dm, lc, rc, o);
  if (!p) return NULL;
  hk_instr *ops[3];
  hk_status *err = NULL;
  if (!plan_operands(v, orig, dm, p, ops, &err) || err) return err;
  hk_instr *d = spmd_clone(v, orig, spmd_local_shape(v, p->out, orig->shape), orig->n_operands, ops);
  if (dm->n_spatial_contract) local_contracting_windows(v, d, dm);
  if (p->n_reduce) {
    int64_t n_groups, gsize;
    int64_t *groups = spmd_groups(v, p->driver, p->n_reduce, p->reduce_dims, &n_groups, &gsize);
    /* The output is sharded where the partial sums are not: reduce-scatter
     * into it instead of all-reducing and slicing. */
    hk_instr *rs = reduce_scatter_into(v, orig, d, p->out, o, n_groups, gsize, groups);
    if (rs) {
      v->p->collectives_emitted++;
      free(groups);
      spmd_set(v, orig, rs, o);
      *handled = true;
      return NULL;
    }
    hk_prim e = (hk_prim)orig->shape->elem;
    const hk_spmd_collective_ops *c = &v->p->collectives;
    d = c->all_reduce(c->state, v->comp, d, spmd_reducer(v->m, e, HK_OP_ADD), n_groups, gsize,
                      groups, &v->p->next_channel_id);
    v->p->collectives_emitted++;
    free(groups);
  }
  spmd_set(v, orig, d, p->out);
  *handled = true;
  return NULL;
}

hk_status *spmd_handle_dot(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  int side, dim;
  if (!orig->attrs || !orig->attrs->dot || orig->shape->elem == HK_PRED ||
      (orig->n_operands != 2 && (orig->n_operands != 3 || !sparse_operand(orig, &side, &dim))))
    return NULL;
  dot_dims dm;
  map_dims(orig, &dm);
  return partition_contraction(v, orig, &dm, handled);
}

/* A convolution without feature/batch groups is a dot whose spatial dims
 * act as batch dims that must stay whole (no halo exchange here), but for
 * those that are contracting dims in disguise (spatial_contracts). */
static bool map_conv_dims(const hk_instr *conv, bool spatial_contracts, dot_dims *m) {
  const hk_attrs *a = conv->attrs;
  const hk_conv_dnums *cd = a->conv;
  m->rl = conv->operands[0]->shape->rank;
  m->rr = conv->operands[1]->shape->rank;
  m->ro = conv->shape->rank;
  for (int i = 0; i < HK_MAX_RANK; i++) {
    m->lhs_to_out[i] = m->rhs_to_out[i] = -1;
    m->out_from_lhs[i] = m->out_from_rhs[i] = -1;
    m->lhs_contract_of_rhs[i] = m->rhs_contract_of_lhs[i] = -1;
  }
  m->lhs_to_out[cd->input_batch] = (int)cd->output_batch;
  m->rhs_to_out[cd->kernel_output_feature] = (int)cd->output_feature;
  m->rhs_contract_of_lhs[cd->input_feature] = (int)cd->kernel_input_feature;
  m->lhs_contract_of_rhs[cd->kernel_input_feature] = (int)cd->input_feature;
  m->n_whole = m->n_spatial_contract = 0;
  for (int k = 0; k < cd->n_spatial; k++) {
    int l = (int)cd->input_spatial[k], r = (int)cd->kernel_spatial[k];
    int role = spatial_contracts ? (int)spmd_conv_dim_role_of(conv, k) : SPMD_CONV_SPATIAL;
    bool batch = role == SPMD_CONV_BATCH || role == SPMD_CONV_BATCH_DILATED;
    /* A size-1 dim of the other operand (or of the output) maps nowhere:
     * its *_to_out and partner stay -1. */
    if (role == SPMD_CONV_CONTRACTING) {
      m->rhs_contract_of_lhs[l] = r;
      m->lhs_contract_of_rhs[r] = l;
    } else if (batch) {
      m->lhs_to_out[l] = m->rhs_to_out[r] = (int)cd->output_spatial[k];
    } else if (role == SPMD_CONV_LHS_NON_CONTRACTING) {
      m->lhs_to_out[l] = (int)cd->output_spatial[k];
    } else if (role == SPMD_CONV_RHS_NON_CONTRACTING) {
      m->rhs_to_out[r] = (int)cd->output_spatial[k];
    }
    if (role != SPMD_CONV_SPATIAL) {
      m->sc_role[m->n_spatial_contract] = role;
      m->sc_dim[m->n_spatial_contract] = role == SPMD_CONV_RHS_NON_CONTRACTING ? r : l;
      m->sc_window[m->n_spatial_contract++] = k;
      continue;
    }
    m->lhs_to_out[l] = (int)cd->output_spatial[k];
    m->rhs_to_out[r] = (int)cd->output_spatial[k];
    m->whole_lhs[m->n_whole] = l;
    m->whole_rhs[m->n_whole] = r;
    m->whole_out[m->n_whole++] = (int)cd->output_spatial[k];
  }
  for (int i = 0; i < m->rl; i++)
    if (m->lhs_to_out[i] >= 0) m->out_from_lhs[m->lhs_to_out[i]] = i;
  for (int i = 0; i < m->rr; i++)
    if (m->rhs_to_out[i] >= 0) m->out_from_rhs[m->rhs_to_out[i]] = i;
  return true;
}

/* ---- grouped convolutions ------------------------------------------------ */
/* feature_group_count G splits the input features and the kernel's output
 * features into G groups, output feature group g reading input group g;
 * batch_group_count does the same with the input batch.  So the grouped
 * dims act like a batch dim shared by both operands and the output feature
 * dim: partitioned into P pieces (P dividing the group count) each device
 * runs the convolution on its whole groups with a count of G/P. */

/* dm for a grouped convolution: the grouped lhs dim maps to the output
 * feature dim alongside the kernel's output features. */
static void map_grouped_conv_dims(const hk_instr *conv, dot_dims *m) {
  const hk_conv_dnums *cd = conv->attrs->conv;
  map_conv_dims(conv, false, m);
  int grouped;
  if (conv->attrs->feature_group_count > 1) {
    grouped = (int)cd->input_feature;
    /* The kernel's input features are one group's: they stay whole. */
    m->rhs_contract_of_lhs[cd->input_feature] = -1;
    m->lhs_contract_of_rhs[cd->kernel_input_feature] = -1;
  } else {
    grouped = (int)cd->input_batch;
    m->out_from_lhs[cd->output_batch] = -1;   /* the output batch has no source */
  }
  m->lhs_to_out[grouped] = (int)cd->output_feature;
  m->out_from_lhs[cd->output_feature] = grouped;
}

/* The output sharding operand `side`'s sharding s implies (its dims moved
 * to the output dims they map to); NULL when it shards an unmapped dim. */
static const hk_sharding *implied_output(spmd_visitor *v, const dot_dims *dm,
                                         const hk_sharding *s, int side) {
  if (!plain_tiled(s) || !hk_sharding_is_tiled(s)) return NULL;
  int rank = side ? dm->rr : dm->rl;
  const int *to_out = side ? dm->rhs_to_out : dm->lhs_to_out;
  int gsz[HK_MAX_RANK + 1] = {0}, gbuf[HK_MAX_RANK + 1][HK_MAX_RANK + 1];
  const int *groups[HK_MAX_RANK + 1];
  for (int j = 0; j <= dm->ro; j++) groups[j] = gbuf[j];
  for (int i = 0; i < rank; i++) {
    if (hk_sharding_dim_partitions(s, i) == 1) continue;
    if (to_out[i] < 0) return NULL;
    gbuf[to_out[i]][gsz[to_out[i]]++] = i;
  }
  if (s->replicate_on_last_tile_dim) gbuf[dm->ro][gsz[dm->ro]++] = s->n_tile_dims - 1;
  return spmd_regroup_memo(v, s, dm->ro + 1, gsz, groups, true);
}

/* The operand shardings for output sharding c, if c keeps whole groups. */
static bool grouped_plan(spmd_visitor *v, const hk_instr *conv, const dot_dims *dm,
                         const hk_sharding *c, dot_plan *p) {
  const hk_conv_dnums *cd = conv->attrs->conv;
  int64_t groups = conv->attrs->feature_group_count > 1 ? conv->attrs->feature_group_count
                                                        : conv->attrs->batch_group_count;
  if (!c || !plain_tiled(c)) return false;
  int64_t parts = hk_sharding_is_tiled(c) ? hk_sharding_dim_partitions(c, (int)cd->output_feature) : 1;
  if (groups % parts) return false;
  if (conv->attrs->batch_group_count > 1 && hk_sharding_is_tiled(c) &&
      hk_sharding_dim_partitions(c, (int)cd->output_batch) > 1)
    return false;
  plan_output(v, dm, c, p);
  return p->ok && p->lhs && p->rhs && whole_ok(dm, p);
}

static hk_status *partition_grouped_conv(spmd_visitor *v, hk_instr *orig, bool *handled) {
  const hk_sharding *o = spmd_sharding_of(v, orig);
  spmd_value *lv = spmd_lookup(v, orig->operands[0]), *rv = spmd_lookup(v, orig->operands[1]);
  if (!lv->sharding || !rv->sharding || spmd_is_subgroup_manual(o) ||
      spmd_is_subgroup_manual(lv->sharding) || spmd_is_subgroup_manual(rv->sharding))
    return NULL;
  dot_dims dm;
  map_grouped_conv_dims(orig, &dm);
  /* Candidates: the output as annotated, or as either operand implies. */
  const hk_sharding *cands[3] = {o, implied_output(v, &dm, lv->sharding, 0),
                                 implied_output(v, &dm, rv->sharding, 1)};
  dot_plan best = {0}, p;
  for (int k = 0; k < 3; k++) {
    if (!grouped_plan(v, orig, &dm, cands[k], &p)) continue;
    p.cost = plan_cost(v, orig, &dm, lv->sharding, rv->sharding, o, &p);
    if (!best.ok || p.cost < best.cost) best = p;
  }
  if (!best.ok) return NULL;
  hk_instr *ops[2];
  HK_TRY(spmd_reshard(v, lv, best.lhs, &ops[0]));
  HK_TRY(spmd_reshard(v, rv, best.rhs, &ops[1]));
  hk_instr *c = spmd_clone(v, orig, spmd_local_shape(v, best.out, orig->shape), 2, ops);
  int64_t parts = hk_sharding_is_tiled(best.out)
                      ? hk_sharding_dim_partitions(best.out, (int)orig->attrs->conv->output_feature)
                      : 1;
  hk_attrs *a = hk_instr_attrs(c);
  if (a->feature_group_count > 1) a->feature_group_count /= parts;
  else a->batch_group_count /= parts;
  spmd_set(v, orig, c, best.out);
  *handled = true;
  return NULL;
}

hk_status *spmd_handle_conv(spmd_visitor *v, hk_instr *orig, bool *handled) {
  *handled = false;
  const hk_attrs *a = orig->attrs;
  if (!a || !a->conv || orig->n_operands != 2 || orig->shape->elem == HK_PRED) return NULL;
  if (a->feature_group_count > 1 && a->batch_group_count > 1) return NULL;
  if (a->feature_group_count > 1 || a->batch_group_count > 1)
    return partition_grouped_conv(v, orig, handled);
  dot_dims dm;
  if (!map_conv_dims(orig, true, &dm)) return NULL;
  return partition_contraction(v, orig, &dm, handled);
}
