/* cpu_slots.c - how many simulated devices compute at once: every device
 * has its own thread (devices block at collectives, so they cannot share
 * one), but only hk_worker_threads() of them hold a CPU slot at a time; a
 * device gives its slot up while it waits at a rendezvous. */
#include <pthread.h>

#include "eval/eval_internal.h"

struct hk_cpu_slots {
  pthread_mutex_t mu;
  pthread_cond_t freed;
  int free;
};

/* The slots the device running on this thread holds one of (NULL: none). */
static _Thread_local hk_cpu_slots *held;

hk_cpu_slots *hk_cpu_slots_new(void) {
  hk_cpu_slots *s = hk_check_alloc(calloc(1, sizeof *s));
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->freed, NULL);
  s->free = hk_worker_threads();
  return s;
}

void hk_cpu_slots_free(hk_cpu_slots *s) {
  if (!s) return;
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->freed);
  free(s);
}

static void take(hk_cpu_slots *s) {
  pthread_mutex_lock(&s->mu);
  while (s->free == 0) pthread_cond_wait(&s->freed, &s->mu);
  s->free--;
  pthread_mutex_unlock(&s->mu);
}

static void give(hk_cpu_slots *s) {
  pthread_mutex_lock(&s->mu);
  s->free++;
  pthread_cond_signal(&s->freed);
  pthread_mutex_unlock(&s->mu);
}

/* s NULL: the device computes unbounded (its waits are not rendezvous
 * this process sees, e.g. MPI's, so it could not give a slot up). */
void hk_cpu_slot_enter(hk_cpu_slots *s) {
  if (s) take(s);
  held = s;
}

void hk_cpu_slot_leave(void) {
  if (held) give(held);
  held = NULL;
}

void hk_cpu_slot_pause(void) {
  if (held) give(held);
}

void hk_cpu_slot_resume(void) {
  if (held) take(held);
}
