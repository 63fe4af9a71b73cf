/* mpi_backend.c - the evaluator's collective back end on Open MPI: devices
 * are spread over ranks (devices_per_rank consecutive ones each).  With one
 * device per rank every replica group gets its own communicator (created
 * once, cached) and the collectives are MPI's: MPI_Allgather, MPI_Alltoall,
 * and MPI_Allreduce / MPI_Reduce_scatter_block with MPI's predefined
 * operations where they give the bits the evaluator gives whatever the
 * order (integer and pred add / multiply / max / min / and / or / xor).
 * Other reducers (floats, whose sums depend on the order, and reducer
 * computations) run the evaluator's reducer over the gathered operands in
 * group order, so every back end computes the same bits.  With several
 * devices per rank (threads inside the rank) the same exchanges go point
 * to point. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

/* ---- communicators ------------------------------------------------------------- */

/* The communicator of op's group (ranks = positions in the group); one
 * device per rank only. */
static MPI_Comm comm_of(hk_mpi_backend *b, const hk_collective_op *op) {
  for (mpi_comm_entry *e = b->comms; e; e = e->next)
    if (e->n == op->group_size && !memcmp(e->members, op->group, sizeof(int64_t) * (size_t)e->n))
      return e->comm;
  int *ranks = malloc(sizeof(int) * (size_t)op->group_size);
  mpi_comm_entry *e = calloc(1, sizeof *e);
  if (!ranks || !e) hk_out_of_memory();
  for (int32_t i = 0; i < op->group_size; i++) ranks[i] = hk_mpi_rank_of(b, op->group[i]);
  MPI_Group world, g;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, op->group_size, ranks, &g);
  MPI_Comm_create_group(MPI_COMM_WORLD, g, 0, &e->comm);
  MPI_Group_free(&g);
  MPI_Group_free(&world);
  free(ranks);
  e->n = op->group_size;
  e->members = malloc(sizeof(int64_t) * (size_t)e->n);
  if (!e->members) hk_out_of_memory();
  memcpy(e->members, op->group, sizeof(int64_t) * (size_t)e->n);
  e->next = b->comms;
  b->comms = e;
  return e->comm;
}

static bool use_comms(const hk_mpi_backend *b) { return b->per_rank == 1; }

/* ---- moving data: MPI collectives or point to point ------------------------------ */

/* Point to point: out chunk j (chunk bytes) comes from member j, which
 * sends its in + rank * in_stride (in_stride 0: the same bytes to all). */
static hk_status *p2p_each(hk_mpi_backend *b, const hk_collective_op *op, xkind kind, const void *in,
                           int64_t in_stride, int64_t chunk, void *out) {
  int G = op->group_size;
  peer_msg *s = malloc(sizeof *s * (size_t)G), *r = malloc(sizeof *r * (size_t)G);
  if (!s || !r) hk_out_of_memory();
  int n = 0;
  for (int j = 0; j < G; j++) {
    if (j == op->rank) continue;
    s[n] = (peer_msg){op->group[j], (uint8_t *)in + j * in_stride, chunk};
    r[n++] = (peer_msg){op->group[j], (uint8_t *)out + j * chunk, chunk};
  }
  memcpy((uint8_t *)out + op->rank * chunk, (const uint8_t *)in + op->rank * in_stride, (size_t)chunk);
  hk_status *st = hk_mpi_p2p_exchange(b, op, kind, s, n, r, n);
  free(s);
  free(r);
  return st;
}

/* out = every member's nbytes of in, in group order. */
static hk_status *gather(hk_mpi_backend *b, const hk_collective_op *op, xkind kind, const void *in,
                         int64_t nbytes, void *out) {
  if (!use_comms(b)) return p2p_each(b, op, kind, in, 0, nbytes, out);
  MPI_Comm c = comm_of(b, op);
  HK_TRY(hk_mpi_comm_check(b, c, op, kind, nbytes));
  MPI_Allgather(in, (int)nbytes, MPI_BYTE, out, (int)nbytes, MPI_BYTE, c);
  return NULL;
}

/* out chunk j = chunk `rank` of member j's in (chunk bytes each). */
static hk_status *all_to_all(hk_mpi_backend *b, const hk_collective_op *op, xkind kind,
                             const void *in, int64_t chunk, void *out) {
  if (!use_comms(b)) return p2p_each(b, op, kind, in, chunk, chunk, out);
  MPI_Comm c = comm_of(b, op);
  HK_TRY(hk_mpi_comm_check(b, c, op, kind, chunk));
  MPI_Alltoall(in, (int)chunk, MPI_BYTE, out, (int)chunk, MPI_BYTE, c);
  return NULL;
}

/* ---- MPI's own reductions where they are exact ------------------------------------ */

/* The one element type of every leaf of the instruction's result, or
 * HK_PRIM_INVALID. */
static hk_prim result_elem(const hk_instr *ins) {
  const hk_shape *s = ins->shape;
  if (s->elem != HK_TUPLE) return (hk_prim)s->elem;
  hk_prim p = HK_PRIM_INVALID;
  for (int i = 0; i < s->n_tuple; i++) {
    if (s->tuple[i]->elem == HK_TUPLE) return HK_PRIM_INVALID;
    if (i && (hk_prim)s->tuple[i]->elem != p) return HK_PRIM_INVALID;
    p = (hk_prim)s->tuple[i]->elem;
  }
  return p;
}

static MPI_Datatype int_type(int bytes, bool is_signed) {
  switch (bytes) {
    case 1: return is_signed ? MPI_INT8_T : MPI_UINT8_T;
    case 2: return is_signed ? MPI_INT16_T : MPI_UINT16_T;
    case 4: return is_signed ? MPI_INT32_T : MPI_UINT32_T;
    default: return is_signed ? MPI_INT64_T : MPI_UINT64_T;
  }
}

/* MPI's predefined operation and type computing exactly what the
 * evaluator's reducer computes, in any order; false when there is none. */
static bool predefined_op(const hk_collective_op *op, int elem_bytes, MPI_Op *mop, MPI_Datatype *type) {
  hk_prim p = result_elem(op->instr);
  if (p == HK_PRIM_INVALID || hk_prim_storage_bytes(p) != elem_bytes) return false;
  bool pred = p == HK_PRED;
  if (!pred && !(hk_prim_is_integral(p) && hk_prim_bits(p) == 8 * elem_bytes)) return false;
  bool sgn = hk_prim_is_signed_int(p);
  /* Sums and products wrap: done on the unsigned type of the width.  On
   * pred (0/1) the evaluator's add is or, its multiply and. */
  switch (hk_collective_reducer(op->instr)) {
    case HK_REDUCE_ADD: *mop = pred ? MPI_BOR : MPI_SUM; *type = int_type(elem_bytes, false); return true;
    case HK_REDUCE_MUL: *mop = pred ? MPI_BAND : MPI_PROD; *type = int_type(elem_bytes, false); return true;
    case HK_REDUCE_MAX: *mop = MPI_MAX; *type = int_type(elem_bytes, sgn); return true;
    case HK_REDUCE_MIN: *mop = MPI_MIN; *type = int_type(elem_bytes, sgn); return true;
    case HK_REDUCE_AND: *mop = MPI_BAND; *type = int_type(elem_bytes, false); return true;
    case HK_REDUCE_OR: *mop = MPI_BOR; *type = int_type(elem_bytes, false); return true;
    case HK_REDUCE_XOR: *mop = MPI_BXOR; *type = int_type(elem_bytes, false); return true;
    default: return false;
  }
}

/* out = chunks[0] combined with chunks[1..G) in group order. */
static hk_status *fold(const uint8_t *chunks, int G, int64_t cb, void *out, int64_t n,
                       hk_combine_fn combine, void *ctx) {
  memcpy(out, chunks, (size_t)cb);
  for (int j = 1; j < G; j++) HK_TRY(combine(ctx, out, chunks + j * cb, n));
  return NULL;
}

/* ---- the vtable ----------------------------------------------------------------------- */

#define WATCHED(b, op, call)                 \
  do {                                       \
    hk_mpi_watch_begin(b, op);               \
    hk_status *st_ = (call);                 \
    hk_mpi_watch_end(b, op);                 \
    return st_;                              \
  } while (0)

static hk_status *m_all_gather(hk_collective_backend *base, const hk_collective_op *op,
                               const void *in, int64_t nbytes, void *out) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  WATCHED(b, op, gather(b, op, XK_GATHER, in, nbytes, out));
}

/* All-reduce (kind XK_REDUCE: out = the combination of every member's n
 * elements) or reduce-scatter (XK_REDUCE_SCATTER: in holds group_size
 * chunks, out = the combination of chunk `rank`). */
static hk_status *reduce(hk_mpi_backend *b, const hk_collective_op *op, xkind kind, const void *in,
                         void *out, int64_t n, int elem_bytes, hk_combine_fn combine, void *ctx) {
  int64_t cb = n * elem_bytes;
  MPI_Op mop;
  MPI_Datatype type;
  if (use_comms(b) && predefined_op(op, elem_bytes, &mop, &type)) {
    MPI_Comm c = comm_of(b, op);
    HK_TRY(hk_mpi_comm_check(b, c, op, kind, cb));
    if (kind == XK_REDUCE) MPI_Allreduce(in, out, (int)n, type, mop, c);
    else MPI_Reduce_scatter_block(in, out, (int)n, type, mop, c);
    return NULL;
  }
  /* Every member's chunk, then the evaluator's reducer in group order. */
  uint8_t *chunks = malloc((size_t)(cb * op->group_size > 0 ? cb * op->group_size : 1));
  if (!chunks) hk_out_of_memory();
  hk_status *st = kind == XK_REDUCE ? gather(b, op, kind, in, cb, chunks)
                                    : all_to_all(b, op, kind, in, cb, chunks);
  if (!st) st = fold(chunks, op->group_size, cb, out, n, combine, ctx);
  free(chunks);
  return st;
}

static hk_status *m_all_reduce(hk_collective_backend *base, const hk_collective_op *op,
                               const void *in, void *out, int64_t n, int elem_bytes,
                               hk_combine_fn combine, void *ctx) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  WATCHED(b, op, reduce(b, op, XK_REDUCE, in, out, n, elem_bytes, combine, ctx));
}

static hk_status *m_reduce_scatter(hk_collective_backend *base, const hk_collective_op *op,
                                   const void *in, void *out, int64_t n, int elem_bytes,
                                   hk_combine_fn combine, void *ctx) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  WATCHED(b, op, reduce(b, op, XK_REDUCE_SCATTER, in, out, n, elem_bytes, combine, ctx));
}

static hk_status *m_all_to_all(hk_collective_backend *base, const hk_collective_op *op,
                               const void *in, int64_t chunk_bytes, void *out) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  WATCHED(b, op, all_to_all(b, op, XK_ALL_TO_ALL, in, chunk_bytes, out));
}

static hk_status *m_permute(hk_collective_backend *base, const hk_collective_op *op,
                            const void *in, int64_t nbytes, int64_t send_to, int64_t recv_from,
                            void *out) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  peer_msg s = {send_to, (void *)in, nbytes}, r = {recv_from, out, nbytes};
  bool self_send = send_to == op->device, self_recv = recv_from == op->device;
  if (self_recv) memcpy(out, in, (size_t)nbytes);
  int ns = send_to >= 0 && !self_send, nr = recv_from >= 0 && !self_recv;
  WATCHED(b, op, hk_mpi_p2p_exchange(b, op, XK_PERMUTE, &s, ns, &r, nr));
}

static hk_status *m_barrier(hk_collective_backend *base, const hk_collective_op *op) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  uint8_t *none = calloc((size_t)op->group_size, 1);
  if (!none) hk_out_of_memory();
  hk_mpi_watch_begin(b, op);
  hk_status *st = gather(b, op, XK_BARRIER, none, 0, none);
  hk_mpi_watch_end(b, op);
  free(none);
  return st;
}

/* A device of this rank failed: every rank stops (a device of another rank
 * may be waiting for this one). */
static void m_abort(hk_collective_backend *base, const char *why) {
  const hk_mpi_backend *b = (const hk_mpi_backend *)base;
  int64_t budget_ms = hk_dist_eval_budget_ms((double)b->user_timeout_ms / 1000);
  if (budget_ms && hk_mpi_now_ns() - b->created_ns >= budget_ms * 1000000) {
    char msg[600];   /* the evaluator's budget was --timeout's share: name the option */
    snprintf(msg, sizeof msg, "timed out after %g s (--timeout=%g): %s", (double)b->user_timeout_ms / 1000,
             (double)b->user_timeout_ms / 1000, why);
    hk_mpi_fail(msg, 2);
  }
  hk_mpi_fail(why, 2);
}

static void m_destroy(hk_collective_backend *base) {
  hk_mpi_backend *b = (hk_mpi_backend *)base;
  hk_mpi_watchdog_stop(b);
  while (b->comms) {
    mpi_comm_entry *e = b->comms;
    b->comms = e->next;
    MPI_Comm_free(&e->comm);
    free(e->members);
    free(e);
  }
  MPI_Comm_free(&b->hdr);
  MPI_Comm_free(&b->data);
  pthread_mutex_destroy(&b->mu);
  pthread_cond_destroy(&b->cv);
  free(b->watch);
  free(b);
}

static const hk_collective_vtable mpi_vtable = {
    "mpi", m_all_gather, m_all_reduce, m_reduce_scatter, m_all_to_all,
    m_permute, m_barrier, m_abort, m_destroy,
};

hk_collective_backend *hk_mpi_backend_new(int64_t num_devices, int64_t devices_per_rank,
                                          int64_t timeout_ms) {
  int size = 0, *tag_ub = NULL, flag = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (devices_per_rank < 1 || devices_per_rank * size != num_devices)
    hk_mpi_fail("the devices do not divide evenly over the ranks", 2);
  if (devices_per_rank > 1 && !hk_mpi_thread_multiple())
    hk_mpi_fail("several devices per rank need MPI_THREAD_MULTIPLE, which this MPI does not provide", 2);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  if (flag && (int64_t)*tag_ub < num_devices * num_devices)
    hk_mpi_fail("too many devices for this MPI's message tags", 2);
  hk_mpi_backend *b = calloc(1, sizeof *b);
  if (!b) hk_out_of_memory();
  b->base.vt = &mpi_vtable;
  b->num_devices = num_devices;
  b->per_rank = devices_per_rank;
  b->first = (int64_t)hk_mpi_rank() * devices_per_rank;
  b->timeout_ms = timeout_ms > 0 ? timeout_ms : 120000;
  b->user_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
  b->created_ns = hk_mpi_now_ns();
  b->watch = calloc((size_t)devices_per_rank, sizeof *b->watch);
  if (!b->watch) hk_out_of_memory();
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  MPI_Comm_dup(MPI_COMM_WORLD, &b->hdr);
  MPI_Comm_dup(MPI_COMM_WORLD, &b->data);
  hk_mpi_watchdog_start(b);
  return &b->base;
}
