/* print_lines.c - a computation's lines, in the order they print, into the
 * printer's output: sequentially, or for a big computation on two threads
 * that print blocks of lines and hand them over in order.  The output is
 * byte for byte the sequential one.  One worker thread (hk_worker_threads,
 * read at each such print) makes it sequential; so does a worker thread
 * that cannot start. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/print_internal.h"

/* Computations this big print on two threads (below, the second thread's
 * start and its cold caches eat the gain: measured for the printer this
 * replaced, 2 cores, 200K instructions 22 vs 21 ms). */
#ifndef SPLIT_MIN_INSTRS   /* -D to measure without the second thread */
#define SPLIT_MIN_INSTRS (1 << 18)
#endif
/* Lines a thread claims at a time (~0.5 MB of text: stays in cache until
 * it is handed over). */
#define BLOCK_LINES 4096

/* Sequentially, handing the output on whenever it holds a megabyte. */
static void print_lines_sequential(printer *pr, const tx_lines *l, hk_buf *out) {
  for (size_t k = 0; k < l->n; k++) {
    if (k + TX_PREFETCH_AHEAD < l->n) tx_prefetch_parts(tx_line_instr(l, k + TX_PREFETCH_AHEAD));
    tx_emit(pr, tx_line_instr(l, k), out);
    if (out->len >= TX_FLUSH_BYTES) tx_flush(pr, out);
  }
}

/* Two threads claim blocks of lines in turn, each prints its block into
 * a buffer of its own, then hands it over when every earlier block has
 * been (turn): a thread kept off its core delays the other by one block
 * at most. */
typedef struct block_print {
  printer *pr;                /* the caller's: output, sink */
  hk_buf *out;
  const tx_lines *l;
  size_t n_blocks;
  size_t next;                /* the next block to claim (atomic) */
  size_t turn;                /* the block to hand over next (under mu) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  hk_print_form form;
} block_print;

static void print_block(printer *own, const tx_lines *l, size_t b, hk_buf *buf) {
  size_t from = b * BLOCK_LINES, to = from + BLOCK_LINES < l->n ? from + BLOCK_LINES : l->n;
  buf->len = 0;
  for (size_t k = from; k < to; k++) {
    if (k + 2 * TX_PREFETCH_AHEAD < to) __builtin_prefetch(tx_line_instr(l, k + 2 * TX_PREFETCH_AHEAD));
    if (k + TX_PREFETCH_AHEAD < to) tx_prefetch_parts(tx_line_instr(l, k + TX_PREFETCH_AHEAD));
    tx_emit(own, tx_line_instr(l, k), buf);
  }
}

/* Claims, prints and hands over blocks until none are left. */
static void run_blocks(block_print *bp, printer *own, hk_buf *buf) {
  for (;;) {
    size_t b = __atomic_fetch_add(&bp->next, 1, __ATOMIC_RELAXED);
    if (b >= bp->n_blocks) return;
    print_block(own, bp->l, b, buf);
    pthread_mutex_lock(&bp->mu);
    while (bp->turn != b) pthread_cond_wait(&bp->cv, &bp->mu);
    tx_deliver(bp->pr, bp->out, buf->data, buf->len);
    /* a sink that failed: nothing more to print */
    if (bp->pr->sink_err) __atomic_store_n(&bp->next, bp->n_blocks, __ATOMIC_RELAXED);
    bp->turn++;
    pthread_cond_broadcast(&bp->cv);
    pthread_mutex_unlock(&bp->mu);
  }
}

static void *worker_main(void *arg) {
  block_print *bp = arg;
  printer own;   /* its own caches and scratch */
  tx_printer_init(&own, bp->form);
  hk_buf buf;
  hk_buf_init(&buf);
  run_blocks(bp, &own, &buf);
  hk_buf_free(&buf);
  tx_printer_free(&own);
  return NULL;
}

/* On two threads; false (nothing printed) when the worker cannot start. */
static bool print_lines_split(printer *pr, const tx_lines *l, hk_buf *out) {
  block_print bp = {.pr = pr, .out = out, .l = l,
                    .n_blocks = (l->n + BLOCK_LINES - 1) / BLOCK_LINES,
                    .form = pr->lng ? HK_PRINT_LONG : HK_PRINT_SHORT};
  pthread_mutex_init(&bp.mu, NULL);
  pthread_cond_init(&bp.cv, NULL);
  pthread_t worker;
  bool started = pthread_create(&worker, NULL, worker_main, &bp) == 0;
  if (started) {
    run_blocks(&bp, pr, &pr->block);
    pthread_join(worker, NULL);
  }
  pthread_cond_destroy(&bp.cv);
  pthread_mutex_destroy(&bp.mu);
  return started;
}

void tx_print_lines(printer *pr, const tx_lines *l, hk_buf *out) {
  if (l->n >= SPLIT_MIN_INSTRS && hk_worker_threads() > 1 && print_lines_split(pr, l, out))
    return;
  print_lines_sequential(pr, l, out);
}
