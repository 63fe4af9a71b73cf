/* backend_dist.h - `--backend=threads|mpi` and `--timeout=S` of run, check
 * and ab: loading the MPI back end's shared object (only when asked), the
 * rank's share of the devices, and the watchdog that bounds a whole run. */
#ifndef HLOKIT_CLI_BACKEND_DIST_H
#define HLOKIT_CLI_BACKEND_DIST_H

#include "eval/dist_api.h"
#include "hlokit/hlokit.h"

typedef struct hk_cli_backend_opts {
  bool mpi;                        /* --backend=mpi (default threads) */
  double timeout_s;                /* --timeout=S; 0: none */
} hk_cli_backend_opts;

#define HK_CLI_BACKEND_USAGE                                                                   \
  "  --backend=mpi runs the devices on Open MPI ranks (under mpirun -n N; N divides the\n"    \
  "  device count, each rank runs its share as threads); rank 0 prints.  --timeout=S stops\n" \
  "  the whole run after S seconds with exit 2 and a message (a loop that never ends).\n"

/* --backend= and --timeout=: 1 consumed, 0 not one of them, -1 bad value. */
int hk_cli_parse_backend_option(hk_cli_backend_opts *o, const char *arg);

/* The MPI world of this process (rank 0 of 1 with the thread back end). */
typedef struct hk_cli_dist {
  const hk_dist_api *api;          /* NULL: threads */
  void *handle;
  int rank, size;
} hk_cli_dist;

/* Loads and starts the MPI back end when o asks for it (else leaves d as
 * one rank); the error says how to get Open MPI when it is missing. */
hk_status *hk_cli_dist_open(const hk_cli_backend_opts *o, hk_cli_dist *d);
void hk_cli_dist_close(hk_cli_dist *d);
/* This rank's devices of n: [*first, *first + *count); an error when the
 * ranks do not divide n. */
hk_status *hk_cli_dist_devices(const hk_cli_dist *d, int64_t n, int64_t *first, int64_t *count);
/* Reports a command's error: on MPI every rank stops (exit 2); else as
 * hk_cli_fail.  Returns the exit status. */
int hk_cli_dist_fail(const hk_cli_dist *d, const char *cmd, hk_status *st);

/* Starts the --timeout watchdog (nothing when seconds is 0): once the time
 * is up, "hlokit CMD: error: ..." and exit 2 (every rank on MPI). */
void hk_cli_timeout_start(const char *cmd, double seconds, const hk_cli_dist *d);
/* The evaluator's own budget for a run under --timeout (ms; 0: none): it
 * stops between instructions, naming the one it is in, a little before the
 * watchdog. */
int64_t hk_cli_timeout_eval_ms(double seconds);

#endif
