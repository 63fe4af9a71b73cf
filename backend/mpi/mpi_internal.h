/* mpi_internal.h - what the Open MPI back end's files share: the world's
 * rank, stopping every rank, and the collective back end's constructor. */
#ifndef HK_MPI_INTERNAL_H
#define HK_MPI_INTERNAL_H

#include <mpi.h>
#include <pthread.h>

#include "eval/dist_api.h"

/* This process's rank in MPI_COMM_WORLD (valid after init). */
int hk_mpi_rank(void);
/* True when MPI was started with MPI_THREAD_MULTIPLE. */
bool hk_mpi_thread_multiple(void);
/* Prints "hlokit: rank R: MSG" and aborts every rank with status code. */
void hk_mpi_fail(const char *msg, int code);

/* ---- the collective back end (mpi_backend.c, mpi_exchange.c) ------------- */
typedef struct mpi_comm_entry {
  int32_t n;
  int64_t *members;                /* device ids, in group order */
  MPI_Comm comm;
  struct mpi_comm_entry *next;
} mpi_comm_entry;

/* What a device is waiting in (the watchdog reads it). */
typedef struct mpi_watch {
  int64_t since_ns;                /* 0: not in a collective */
  const hk_instr *instr;
  int64_t sequence;
} mpi_watch;

typedef struct hk_mpi_backend {
  hk_collective_backend base;
  MPI_Comm hdr, data;              /* duplicates of the world: headers, payloads */
  int64_t num_devices, per_rank, first;   /* first: this rank's first device */
  int64_t timeout_ms;
  int64_t user_timeout_ms;         /* --timeout (0: none) */
  int64_t created_ns;
  pthread_mutex_t mu;              /* comms, watch, stop */
  pthread_cond_t cv;
  mpi_comm_entry *comms;
  mpi_watch *watch;                /* per device of this rank */
  pthread_t watchdog;
  bool stop;
} hk_mpi_backend;

/* The kinds of exchange a header names, so that devices running different
 * collectives are told apart. */
typedef enum { XK_GATHER, XK_REDUCE, XK_REDUCE_SCATTER, XK_ALL_TO_ALL, XK_PERMUTE, XK_BARRIER } xkind;

/* One message of a point-to-point exchange: to or from device dev. */
typedef struct peer_msg {
  int64_t dev;
  void *buf;
  int64_t len;
} peer_msg;

static inline int hk_mpi_rank_of(const hk_mpi_backend *b, int64_t dev) { return (int)(dev / b->per_rank); }

/* Checks with every peer that it runs the same collective (instruction,
 * execution, group, kind, bytes), then moves the payloads. */
hk_status *hk_mpi_p2p_exchange(hk_mpi_backend *b, const hk_collective_op *op, xkind kind,
                               const peer_msg *sends, int n_sends, const peer_msg *recvs,
                               int n_recvs);
/* The same check over a communicator of the whole group (one device per
 * rank): every member's header is gathered and compared. */
hk_status *hk_mpi_comm_check(hk_mpi_backend *b, MPI_Comm comm, const hk_collective_op *op,
                             xkind kind, int64_t nbytes);
/* CLOCK_MONOTONIC in ns. */
int64_t hk_mpi_now_ns(void);
/* Marks the device of op as waiting in a collective (or done). */
void hk_mpi_watch_begin(hk_mpi_backend *b, const hk_collective_op *op);
void hk_mpi_watch_end(hk_mpi_backend *b, const hk_collective_op *op);
/* Starts the thread that stops every rank when a collective waits too long. */
void hk_mpi_watchdog_start(hk_mpi_backend *b);
void hk_mpi_watchdog_stop(hk_mpi_backend *b);

hk_collective_backend *hk_mpi_backend_new(int64_t num_devices, int64_t devices_per_rank,
                                          int64_t timeout_ms);

#endif
