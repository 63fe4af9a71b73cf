/* dist_api.h - the table a distributed collective back end (the Open MPI
 * one, backend/mpi/) gives hlokit when it is loaded: start the processes'
 * world, make the collective back end, and what the commands need to
 * combine their ranks' results.  hlokit dlopens the shared object only
 * when --backend=mpi is asked and calls its hk_dist_api_get(). */
#ifndef HK_EVAL_DIST_API_H
#define HK_EVAL_DIST_API_H

#include <stdio.h>

#include "hlokit/hlokit.h"

#define HK_DIST_API_VERSION 1
#define HK_DIST_API_SYMBOL "hk_dist_api_get"

typedef enum { HK_DIST_SUM, HK_DIST_MAX, HK_DIST_MIN } hk_dist_op;

typedef struct hk_dist_api {
  int version;                     /* HK_DIST_API_VERSION */
  const char *name;                /* "mpi" */
  /* Starts the world (thread-safe: device threads call collectives at
   * once); *rank and *size of this process. */
  hk_status *(*init)(int *rank, int *size);
  /* The collective back end of num_devices devices, devices_per_rank
   * consecutive ones on each rank (device d on rank d / devices_per_rank).
   * A collective that waits longer than timeout_ms (0: 120000) stops every
   * rank, naming the instruction. */
  hk_collective_backend *(*backend_new)(int64_t num_devices, int64_t devices_per_rank,
                                        int64_t timeout_ms);
  /* Collective: rank 0 writes every rank's bytes to f in rank order. */
  void (*write_in_rank_order)(const char *data, size_t len, FILE *f);
  /* Collective: v[0..n) combined elementwise over the ranks, on every rank. */
  void (*allreduce_i64)(int64_t *v, int n, hk_dist_op op);
  void (*allreduce_f64)(double *v, int n, hk_dist_op op);
  /* Prints "hlokit: rank R: MSG" to stderr and stops every rank; the run
   * exits with status code. */
  void (*fail)(const char *msg, int code);
  void (*finalize)(void);
} hk_dist_api;

typedef const hk_dist_api *(*hk_dist_api_get_fn)(void);

/* The evaluator's own budget under --timeout=S (ms; 0: none): a margin
 * short of S, so that the evaluator's message (naming the instruction)
 * comes before the watchdog's.  A failure once it is spent is the
 * timeout's: the CLI and the MPI back end then name --timeout. */
static inline int64_t hk_dist_eval_budget_ms(double seconds) {
  if (seconds <= 0) return 0;
  int64_t ms = (int64_t)(seconds * 1000);
  return ms > 400 ? ms - 200 : ms > 1 ? ms / 2 : 1;
}

#endif
