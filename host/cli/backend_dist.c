/* backend_dist.c - the collective back end a command runs on: threads of
 * this process, or Open MPI ranks through backend/mpi's shared object,
 * which is dlopened only for --backend=mpi (hlokit needs no MPI
 * otherwise); and the --timeout watchdog. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_dist.h"
#include "commands.h"

int hk_cli_parse_backend_option(hk_cli_backend_opts *o, const char *arg) {
  if (strncmp(arg, "--backend=", 10) == 0) {
    const char *v = arg + 10;
    if (strcmp(v, "threads") && strcmp(v, "mpi")) return -1;
    o->mpi = !strcmp(v, "mpi");
    return 1;
  }
  if (strncmp(arg, "--timeout=", 10) == 0) {
    char *end;
    errno = 0;
    o->timeout_s = strtod(arg + 10, &end);
    return arg[10] && !*end && !errno && o->timeout_s >= 0 ? 1 : -1;
  }
  return 0;
}

static const char mpi_missing[] =
    "the MPI back end (backends/mpi.so) is not built or cannot be loaded (%s); install Open MPI "
    "(scripts/deps.sh as root, or apt-get install libopenmpi-dev openmpi-bin), run make again, "
    "and start hlokit under mpirun";

/* Opens backends/mpi.so: $HLOKIT_MPI_BACKEND, else next to the default
 * plugin folders (build/backends/, PREFIX/lib/hlokit/backends/). */
static void *open_backend(char *why, size_t cap) {
  const char *env = getenv("HLOKIT_MPI_BACKEND");
  /* RTLD_GLOBAL: Open MPI's own components resolve libmpi's symbols. */
  if (env && *env) {
    void *h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
    if (!h) snprintf(why, cap, "%s", dlerror());
    return h;
  }
  char *dirs[2];
  int n = hk_plugin_default_dirs(dirs);
  void *h = NULL;
  snprintf(why, cap, "no backends/mpi.so next to the hlokit binary");
  for (int i = 0; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/../backends/mpi.so", dirs[i]);
    if (!h && access(path, F_OK) == 0) {
      h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
      if (!h) snprintf(why, cap, "%s", dlerror());
    }
    free(dirs[i]);
  }
  return h;
}

hk_status *hk_cli_dist_open(const hk_cli_backend_opts *o, hk_cli_dist *d) {
  memset(d, 0, sizeof *d);
  d->size = 1;
  if (!o->mpi) return NULL;
  char why[512];
  d->handle = open_backend(why, sizeof why);
  if (!d->handle) return hk_error(HK_FAILED_PRECONDITION, mpi_missing, why);
  hk_dist_api_get_fn get = (hk_dist_api_get_fn)dlsym(d->handle, HK_DIST_API_SYMBOL);
  const hk_dist_api *api = get ? get() : NULL;
  if (!api || api->version != HK_DIST_API_VERSION) {
    dlclose(d->handle);
    d->handle = NULL;
    return hk_error(HK_FAILED_PRECONDITION, mpi_missing, "it has no matching " HK_DIST_API_SYMBOL);
  }
  HK_TRY(api->init(&d->rank, &d->size));
  d->api = api;
  return NULL;
}

void hk_cli_dist_close(hk_cli_dist *d) {
  if (d->api) d->api->finalize();
  /* The shared object stays loaded: Open MPI's atexit handlers live in it. */
  memset(d, 0, sizeof *d);
}

hk_status *hk_cli_dist_devices(const hk_cli_dist *d, int64_t n, int64_t *first, int64_t *count) {
  if (n % d->size)
    return hk_error(HK_INVALID_ARGUMENT, "%lld devices do not divide over %d MPI ranks (start mpirun -n N "
                    "with N dividing the device count)", (long long)n, d->size);
  *count = n / d->size;
  *first = (int64_t)d->rank * *count;
  return NULL;
}

static hk_status *name_timeout(hk_status *st);
static void timeout_error_reported(void);

int hk_cli_dist_fail(const hk_cli_dist *d, const char *cmd, hk_status *st) {
  st = name_timeout(st);
  if (!d->api) {
    int rc = hk_cli_fail(cmd, st);
    timeout_error_reported();
    return rc;
  }
  char msg[1200];
  snprintf(msg, sizeof msg, "hlokit %s: error: %s", cmd, st->message);
  hk_status_free(st);
  d->api->fail(msg, HK_EXIT_ERROR);
  return HK_EXIT_ERROR;
}

/* ---- --timeout ------------------------------------------------------------------ */

typedef struct timeout_watch {
  const char *cmd;
  double seconds;
  const hk_dist_api *api;
  int64_t started_ns;
  atomic_bool reported;            /* the command printed its error: exit quietly */
} timeout_watch;

static timeout_watch the_watch;

static void timeout_error_reported(void) { atomic_store(&the_watch.reported, true); }

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A failure after the evaluator's share of --timeout ran out is the
 * timeout's doing (the evaluator only says its budget in ms was spent):
 * the message names the option the user gave. */
static hk_status *name_timeout(hk_status *st) {
  if (!st || the_watch.seconds <= 0) return st;
  int64_t budget_ns = hk_cli_timeout_eval_ms(the_watch.seconds) * 1000000;
  if (monotonic_ns() - the_watch.started_ns < budget_ns) return st;
  hk_status *named = hk_error(st->code, "timed out after %g s (--timeout=%g): %s", the_watch.seconds,
                              the_watch.seconds, st->message);
  hk_status_free(st);
  return named;
}

static void *timeout_main(void *arg) {
  const timeout_watch *w = arg;
  struct timespec t = {(time_t)w->seconds, (long)((w->seconds - (double)(time_t)w->seconds) * 1e9)};
  while (nanosleep(&t, &t) && errno == EINTR) {}
  if (atomic_load(&w->reported)) _exit(HK_EXIT_ERROR);   /* still cleaning up after its error */
  char msg[300];
  snprintf(msg, sizeof msg, "hlokit %s: error: timed out after %g s (--timeout=%g): the run did not finish",
           w->cmd, w->seconds, w->seconds);
  if (w->api) w->api->fail(msg, HK_EXIT_ERROR);
  fprintf(stderr, "%s\n", msg);
  fflush(stdout);
  _exit(HK_EXIT_ERROR);
}

void hk_cli_timeout_start(const char *cmd, double seconds, const hk_cli_dist *d) {
  if (seconds <= 0) return;
  the_watch.cmd = cmd;
  the_watch.seconds = seconds;
  the_watch.api = d ? d->api : NULL;
  the_watch.started_ns = monotonic_ns();
  atomic_init(&the_watch.reported, false);
  pthread_t t;
  if (pthread_create(&t, NULL, timeout_main, &the_watch) == 0) pthread_detach(t);
}

int64_t hk_cli_timeout_eval_ms(double seconds) { return hk_dist_eval_budget_ms(seconds); }
