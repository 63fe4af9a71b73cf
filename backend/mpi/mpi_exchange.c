/* mpi_exchange.c - moving bytes between devices on MPI ranks: a header
 * first, so that devices running different collectives (instruction,
 * execution, group, bytes) are caught and reported instead of mixing their
 * data, then the payloads point to point; and the watchdog that turns a
 * collective nobody else joins into an error instead of a hang. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_internal.h"

typedef struct op_header {
  uint64_t group_hash;
  int64_t sequence, nbytes, kind, device;
  char name[64];
} op_header;

static const char *const kind_names[] = {"all-gather", "all-reduce", "reduce-scatter",
                                         "all-to-all", "collective-permute", "barrier"};

static uint64_t hash_group(const hk_collective_op *op) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t i = 0; i < op->group_size; i++) h = (h ^ (uint64_t)op->group[i]) * 1099511628211ULL;
  return h ^ (uint64_t)op->group_size;
}

static void header_of(const hk_collective_op *op, xkind kind, int64_t nbytes, op_header *h) {
  memset(h, 0, sizeof *h);
  h->group_hash = hash_group(op);
  h->sequence = op->sequence;
  h->nbytes = nbytes;
  h->kind = kind;
  h->device = op->device;
  snprintf(h->name, sizeof h->name, "%s", op->instr->name);
}

/* An error when the peer's header is not ours. */
static hk_status *compare_headers(const op_header *mine, const op_header *theirs) {
  if (mine->group_hash == theirs->group_hash && mine->sequence == theirs->sequence &&
      mine->nbytes == theirs->nbytes && mine->kind == theirs->kind && !strcmp(mine->name, theirs->name))
    return NULL;
  int mk = (int)mine->kind, tk = (int)theirs->kind;
  return hk_error(HK_FAILED_PRECONDITION,
                  "%s: devices disagree on a collective: device %lld runs %s %s (execution %lld, %lld bytes, "
                  "group %016llx), device %lld runs %s %s (execution %lld, %lld bytes, group %016llx)",
                  mine->name, (long long)mine->device, kind_names[mk], mine->name, (long long)mine->sequence,
                  (long long)mine->nbytes, (unsigned long long)mine->group_hash, (long long)theirs->device,
                  tk >= 0 && tk <= XK_BARRIER ? kind_names[tk] : "?", theirs->name, (long long)theirs->sequence,
                  (long long)theirs->nbytes, (unsigned long long)theirs->group_hash);
}

static int tag_of(const hk_mpi_backend *b, int64_t src, int64_t dst) {
  return (int)(src * b->num_devices + dst);
}

static hk_status *check_size(const hk_collective_op *op, int64_t nbytes) {
  if (nbytes > INT32_MAX)
    return hk_error(HK_UNIMPLEMENTED, "%s: a message of %lld bytes (above 2 GiB) on MPI", op->instr->name,
                    (long long)nbytes);
  return NULL;
}

hk_status *hk_mpi_p2p_exchange(hk_mpi_backend *b, const hk_collective_op *op, xkind kind,
                               const peer_msg *sends, int n_sends, const peer_msg *recvs,
                               int n_recvs) {
  int n = n_sends + n_recvs;
  MPI_Request *rq = malloc(sizeof *rq * (size_t)(n ? n : 1));
  op_header *hs = malloc(sizeof *hs * (size_t)(n ? n : 1));
  if (!rq || !hs) hk_out_of_memory();
  hk_status *st = NULL;
  for (int k = 0; k < n_sends && !st; k++) st = check_size(op, sends[k].len);
  for (int k = 0; k < n_recvs && !st; k++) st = check_size(op, recvs[k].len);
  if (st) goto done;
  /* Headers: ours to every receiver (with the bytes it will get), theirs
   * from every sender. */
  for (int k = 0; k < n_recvs; k++)
    MPI_Irecv(&hs[n_sends + k], (int)sizeof(op_header), MPI_BYTE, hk_mpi_rank_of(b, recvs[k].dev),
              tag_of(b, recvs[k].dev, op->device), b->hdr, &rq[n_sends + k]);
  for (int k = 0; k < n_sends; k++) {
    header_of(op, kind, sends[k].len, &hs[k]);
    MPI_Isend(&hs[k], (int)sizeof(op_header), MPI_BYTE, hk_mpi_rank_of(b, sends[k].dev),
              tag_of(b, op->device, sends[k].dev), b->hdr, &rq[k]);
  }
  MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
  for (int k = 0; k < n_recvs && !st; k++) {
    op_header mine;
    header_of(op, kind, recvs[k].len, &mine);
    st = compare_headers(&mine, &hs[n_sends + k]);
  }
  if (st) goto done;
  for (int k = 0; k < n_recvs; k++)
    MPI_Irecv(recvs[k].buf, (int)recvs[k].len, MPI_BYTE, hk_mpi_rank_of(b, recvs[k].dev),
              tag_of(b, recvs[k].dev, op->device), b->data, &rq[k]);
  for (int k = 0; k < n_sends; k++)
    MPI_Isend(sends[k].buf, (int)sends[k].len, MPI_BYTE, hk_mpi_rank_of(b, sends[k].dev),
              tag_of(b, op->device, sends[k].dev), b->data, &rq[n_recvs + k]);
  MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
done:
  free(rq);
  free(hs);
  return st;
}

hk_status *hk_mpi_comm_check(hk_mpi_backend *b, MPI_Comm comm, const hk_collective_op *op,
                             xkind kind, int64_t nbytes) {
  (void)b;
  HK_TRY(check_size(op, nbytes * op->group_size));
  op_header mine, *all = malloc(sizeof *all * (size_t)op->group_size);
  if (!all) hk_out_of_memory();
  header_of(op, kind, nbytes, &mine);
  MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm);
  hk_status *st = NULL;
  for (int32_t j = 0; j < op->group_size && !st; j++) st = compare_headers(&mine, &all[j]);
  free(all);
  return st;
}

/* ---- the watchdog ---------------------------------------------------------------- */

int64_t hk_mpi_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void hk_mpi_watch_begin(hk_mpi_backend *b, const hk_collective_op *op) {
  pthread_mutex_lock(&b->mu);
  mpi_watch *w = &b->watch[op->device - b->first];
  w->since_ns = hk_mpi_now_ns();
  w->instr = op->instr;
  w->sequence = op->sequence;
  pthread_mutex_unlock(&b->mu);
}

void hk_mpi_watch_end(hk_mpi_backend *b, const hk_collective_op *op) {
  pthread_mutex_lock(&b->mu);
  b->watch[op->device - b->first].since_ns = 0;
  pthread_mutex_unlock(&b->mu);
}

static void *watchdog_main(void *arg) {
  hk_mpi_backend *b = arg;
  pthread_mutex_lock(&b->mu);
  while (!b->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    int64_t now = hk_mpi_now_ns();
    for (int64_t k = 0; k < b->per_rank && !b->stop; k++) {
      const mpi_watch *w = &b->watch[k];
      if (!w->since_ns || now - w->since_ns < b->timeout_ms * 1000000) continue;
      char msg[512];
      snprintf(msg, sizeof msg,
               "device %lld: %s: collective (execution %lld) waited %lld ms for its group: a rank "
               "stopped, runs another collective, or does not reach this one",
               (long long)(b->first + k), w->instr->name, (long long)w->sequence,
               (long long)((now - w->since_ns) / 1000000));
      pthread_mutex_unlock(&b->mu);
      hk_mpi_fail(msg, 2);
    }
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

void hk_mpi_watchdog_start(hk_mpi_backend *b) {
  if (pthread_create(&b->watchdog, NULL, watchdog_main, b)) hk_mpi_fail("cannot start the watchdog thread", 2);
}

void hk_mpi_watchdog_stop(hk_mpi_backend *b) {
  pthread_mutex_lock(&b->mu);
  b->stop = true;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  pthread_join(b->watchdog, NULL);
}
