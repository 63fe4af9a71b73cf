/* collective_threads.c - the default collective back end: simulated devices
 * are threads of this process meeting at mutex/condvar rendezvous points
 * keyed by (instruction, execution sequence, first device of the group). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "eval/eval_internal.h"

typedef struct slot {
  const hk_instr *instr;
  int64_t seq, first;
  int32_t size, arrived, copied, left;
  int32_t copying;              /* devices reading bufs right now */
  const void **bufs;
  struct slot *next;
} slot;

typedef struct threads_backend {
  hk_collective_backend base;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  slot *slots;
  int64_t num_devices, timeout_ms;
  bool aborted;
  char why[256];
} threads_backend;

typedef hk_status *(*exchange_fn)(void *ctx, const hk_collective_op *op, const void *const *bufs);

static slot *find_slot(threads_backend *t, const hk_collective_op *op) {
  for (slot *s = t->slots; s; s = s->next)
    if (s->instr == op->instr && s->seq == op->sequence && s->first == op->group[0]) return s;
  slot *s = calloc(1, sizeof *s);
  if (!s) hk_out_of_memory();
  s->instr = op->instr;
  s->seq = op->sequence;
  s->first = op->group[0];
  s->size = op->group_size;
  s->bufs = calloc((size_t)op->group_size, sizeof(void *));
  if (!s->bufs) hk_out_of_memory();
  s->next = t->slots;
  t->slots = s;
  return s;
}

static void drop_slot(threads_backend *t, slot *s) {
  for (slot **p = &t->slots; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s->bufs);
  free(s);
}

static void deadline_in(struct timespec *ts, int64_t ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000;
  }
}

/* Waits (mutex held) until *counter reaches target; error on abort or timeout. */
static hk_status *wait_for_locked(threads_backend *t, const hk_collective_op *op,
                                  int32_t *counter, int32_t target) {
  struct timespec ts;
  deadline_in(&ts, t->timeout_ms);
  while (*counter < target && !t->aborted) {
    int rc = pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    if (rc == ETIMEDOUT && *counter < target) {
      t->aborted = true;
      snprintf(t->why, sizeof t->why, "%s: rendezvous timed out on device %lld: %d of %d devices arrived",
               op->instr->name, (long long)op->device, *counter, target);
      pthread_cond_broadcast(&t->cv);
      return hk_error(HK_FAILED_PRECONDITION, "%s", t->why);
    }
  }
  if (t->aborted) return hk_error(HK_FAILED_PRECONDITION, "aborted: %s", t->why);
  return NULL;
}

/* wait_for_locked without the device's CPU slot: the devices it waits
 * for may need it.  The slot is taken back with the mutex released (a
 * device holding a slot may be on its way to this rendezvous). */
static hk_status *wait_for(threads_backend *t, const hk_collective_op *op, int32_t *counter,
                           int32_t target) {
  if (*counter >= target || t->aborted) return wait_for_locked(t, op, counter, target);
  hk_cpu_slot_pause();
  hk_status *st = wait_for_locked(t, op, counter, target);
  pthread_mutex_unlock(&t->mu);
  hk_cpu_slot_resume();
  pthread_mutex_lock(&t->mu);
  return st;
}

static hk_status *rendezvous(hk_collective_backend *b, const hk_collective_op *op,
                             const void *in, exchange_fn fn, void *ctx) {
  threads_backend *t = (threads_backend *)b;
  pthread_mutex_lock(&t->mu);
  slot *s = find_slot(t, op);
  hk_status *st = NULL;
  if (s->size != op->group_size || op->rank < 0 || op->rank >= s->size || s->bufs[op->rank]) {
    st = hk_error(HK_INVALID_ARGUMENT, "%s: devices disagree on the participants (group of %d vs %d)",
                  op->instr->name, s->size, op->group_size);
    t->aborted = true;
    snprintf(t->why, sizeof t->why, "%s", st->message);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return st;
  }
  s->bufs[op->rank] = in;
  s->arrived++;
  pthread_cond_broadcast(&t->cv);
  st = wait_for(t, op, &s->arrived, s->size);
  /* wait_for may have let the mutex go: after an abort the devices no
   * longer wait for each other's copies, so read the buffers only when
   * nothing aborted, and count the readers (see below). */
  if (!st && t->aborted) st = hk_error(HK_FAILED_PRECONDITION, "aborted: %s", t->why);
  bool reads = !st && fn;
  if (reads) s->copying++;
  pthread_mutex_unlock(&t->mu);
  if (reads) st = fn(ctx, op, s->bufs);
  pthread_mutex_lock(&t->mu);
  if (reads && --s->copying == 0) pthread_cond_broadcast(&t->cv);
  s->copied++;
  pthread_cond_broadcast(&t->cv);
  hk_status *st2 = wait_for(t, op, &s->copied, s->size);
  if (!st) st = st2;
  else hk_status_free(st2);
  /* This device's buffer may still be read by a device copying when an
   * abort released the barrier above: it must outlive their copies. */
  while (s->copying > 0) pthread_cond_wait(&t->cv, &t->mu);
  if (++s->left == s->size) drop_slot(t, s);
  else if (t->aborted && s->left == s->arrived) drop_slot(t, s);
  pthread_mutex_unlock(&t->mu);
  return st;
}

/* ---- the operations ------------------------------------------------------------ */

typedef struct xfer {
  void *out;
  int64_t nbytes, n;
  int elem_bytes;
  hk_combine_fn combine;
  void *cctx;
  int64_t recv_from;
} xfer;

static hk_status *do_gather(void *c, const hk_collective_op *op, const void *const *bufs) {
  xfer *x = c;
  for (int j = 0; j < op->group_size; j++)
    memcpy((uint8_t *)x->out + j * x->nbytes, bufs[j], (size_t)x->nbytes);
  return NULL;
}

static hk_status *do_reduce_chunk(xfer *x, const hk_collective_op *op, const void *const *bufs,
                                  int64_t chunk) {
  int64_t cb = x->n * x->elem_bytes;
  memcpy(x->out, (const uint8_t *)bufs[0] + chunk * cb, (size_t)cb);
  for (int j = 1; j < op->group_size; j++)
    HK_TRY(x->combine(x->cctx, x->out, (const uint8_t *)bufs[j] + chunk * cb, x->n));
  return NULL;
}

static hk_status *do_reduce(void *c, const hk_collective_op *op, const void *const *bufs) {
  return do_reduce_chunk(c, op, bufs, 0);
}

static hk_status *do_reduce_scatter(void *c, const hk_collective_op *op, const void *const *bufs) {
  return do_reduce_chunk(c, op, bufs, op->rank);
}

static hk_status *do_all_to_all(void *c, const hk_collective_op *op, const void *const *bufs) {
  xfer *x = c;
  for (int j = 0; j < op->group_size; j++)
    memcpy((uint8_t *)x->out + j * x->nbytes, (const uint8_t *)bufs[j] + op->rank * x->nbytes,
           (size_t)x->nbytes);
  return NULL;
}

static hk_status *do_permute(void *c, const hk_collective_op *op, const void *const *bufs) {
  xfer *x = c;
  if (x->recv_from < 0) return NULL;
  for (int j = 0; j < op->group_size; j++)
    if (op->group[j] == x->recv_from) {
      memcpy(x->out, bufs[j], (size_t)x->nbytes);
      return NULL;
    }
  return hk_error(HK_INTERNAL, "%s: source device %lld is not in the group", op->instr->name,
                  (long long)x->recv_from);
}

static hk_status *t_all_gather(hk_collective_backend *b, const hk_collective_op *op,
                               const void *in, int64_t nbytes, void *out) {
  xfer x = {.out = out, .nbytes = nbytes};
  return rendezvous(b, op, in, do_gather, &x);
}

static hk_status *t_all_reduce(hk_collective_backend *b, const hk_collective_op *op,
                               const void *in, void *out, int64_t n, int elem_bytes,
                               hk_combine_fn combine, void *ctx) {
  xfer x = {.out = out, .n = n, .elem_bytes = elem_bytes, .combine = combine, .cctx = ctx};
  return rendezvous(b, op, in, do_reduce, &x);
}

static hk_status *t_reduce_scatter(hk_collective_backend *b, const hk_collective_op *op,
                                   const void *in, void *out, int64_t n, int elem_bytes,
                                   hk_combine_fn combine, void *ctx) {
  xfer x = {.out = out, .n = n, .elem_bytes = elem_bytes, .combine = combine, .cctx = ctx};
  return rendezvous(b, op, in, do_reduce_scatter, &x);
}

static hk_status *t_all_to_all(hk_collective_backend *b, const hk_collective_op *op,
                               const void *in, int64_t chunk_bytes, void *out) {
  xfer x = {.out = out, .nbytes = chunk_bytes};
  return rendezvous(b, op, in, do_all_to_all, &x);
}

static hk_status *t_permute(hk_collective_backend *b, const hk_collective_op *op,
                            const void *in, int64_t nbytes, int64_t send_to,
                            int64_t recv_from, void *out) {
  (void)send_to;
  xfer x = {.out = out, .nbytes = nbytes, .recv_from = recv_from};
  return rendezvous(b, op, in, do_permute, &x);
}

static hk_status *t_barrier(hk_collective_backend *b, const hk_collective_op *op) {
  return rendezvous(b, op, NULL, NULL, NULL);
}

static void t_abort(hk_collective_backend *b, const char *why) {
  threads_backend *t = (threads_backend *)b;
  pthread_mutex_lock(&t->mu);
  if (!t->aborted) {
    t->aborted = true;
    snprintf(t->why, sizeof t->why, "%s", why);
  }
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static void t_destroy(hk_collective_backend *b) {
  threads_backend *t = (threads_backend *)b;
  while (t->slots) drop_slot(t, t->slots);
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

static const hk_collective_vtable threads_vtable = {
    "threads", t_all_gather, t_all_reduce, t_reduce_scatter, t_all_to_all,
    t_permute, t_barrier, t_abort, t_destroy,
};

hk_collective_backend *hk_collective_threads_new(int64_t num_devices, int64_t timeout_ms) {
  threads_backend *t = calloc(1, sizeof *t);
  if (!t) hk_out_of_memory();
  t->base.vt = &threads_vtable;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->num_devices = num_devices;
  t->timeout_ms = timeout_ms > 0 ? timeout_ms : 120000;
  return &t->base;
}
