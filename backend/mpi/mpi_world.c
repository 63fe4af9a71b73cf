/* mpi_world.c - the Open MPI world hlokit runs in: start and stop, rank 0
 * writing every rank's output in order, combining figures over the ranks,
 * stopping every rank on a failure; and the table hlokit loads. */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static int world_rank = -1, world_size = 0;
static bool thread_multiple;

int hk_mpi_rank(void) { return world_rank; }
bool hk_mpi_thread_multiple(void) { return thread_multiple; }

static hk_status *mpi_init(int *rank, int *size) {
  int started = 0;
  MPI_Initialized(&started);
  if (!started) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return hk_error(HK_FAILED_PRECONDITION, "MPI_Init_thread failed");
    thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  *rank = world_rank;
  *size = world_size;
  return NULL;
}

void hk_mpi_fail(const char *msg, int code) {
  fprintf(stderr, "hlokit: rank %d: %s\n", world_rank, msg);
  fflush(stderr);
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, code);
  _Exit(code);
}

enum { TAG_TEXT = 1 };

static void write_in_rank_order(const char *data, size_t len, FILE *f) {
  if (len > (size_t)INT32_MAX) hk_mpi_fail("output of one rank above 2 GiB", 2);
  if (world_rank != 0) {
    MPI_Send(data, (int)len, MPI_BYTE, 0, TAG_TEXT, MPI_COMM_WORLD);
    return;
  }
  fwrite(data, 1, len, f);
  for (int r = 1; r < world_size; r++) {
    MPI_Status s;
    int n = 0;
    MPI_Probe(r, TAG_TEXT, MPI_COMM_WORLD, &s);
    MPI_Get_count(&s, MPI_BYTE, &n);
    char *buf = malloc((size_t)n + 1);
    if (!buf) hk_out_of_memory();
    MPI_Recv(buf, n, MPI_BYTE, r, TAG_TEXT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fwrite(buf, 1, (size_t)n, f);
    free(buf);
  }
  fflush(f);
}

static MPI_Op op_of(hk_dist_op op) {
  return op == HK_DIST_SUM ? MPI_SUM : op == HK_DIST_MAX ? MPI_MAX : MPI_MIN;
}

static void allreduce_i64(int64_t *v, int n, hk_dist_op op) {
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, op_of(op), MPI_COMM_WORLD);
}

static void allreduce_f64(double *v, int n, hk_dist_op op) {
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op_of(op), MPI_COMM_WORLD);
}

static void mpi_finalize(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

static const hk_dist_api api = {
    HK_DIST_API_VERSION, "mpi", mpi_init, hk_mpi_backend_new, write_in_rank_order,
    allreduce_i64, allreduce_f64, hk_mpi_fail, mpi_finalize,
};

/* The one symbol hlokit looks up (dlsym): exported although the tree is
 * compiled with -fvisibility=hidden. */
__attribute__((visibility("default"))) const hk_dist_api *hk_dist_api_get(void);
const hk_dist_api *hk_dist_api_get(void) { return &api; }
