/* print_split.c - a big computation (SPLIT_MIN_INSTRS instructions or
 * more) printed on two threads: a worker prints its instruction list from
 * the front while the calling thread computes the print order, then prints
 * lines from the back until the two meet; the output is byte for byte the
 * sequential one.  One worker thread (hk_worker_threads, read at each such
 * print) makes it sequential; so does a worker thread that cannot start. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/print_internal.h"

/* ---- a big computation on two threads -------------------------------------------------- */

/* Computations this big print on two threads.  Measured on 2 cores
 * (median of 8 prints, HLOKIT_THREADS=1 vs two threads): 100K
 * instructions 10.3 vs 12.4 ms, 200K 22 vs 21 ms, 400K 57-71 vs 51 ms,
 * 1M 158-167 vs 103-120 ms: below ~256K the second thread's start, its
 * cold caches and the two walks competing for memory eat the gain. */
#define SPLIT_MIN_INSTRS (1 << 18)
/* The worker prints the list from its start, straight into the output,
 * claiming SPLIT_CHUNK lines at a time.  The caller meanwhile walks the
 * list for the post order (graph and DFS, mostly waiting on memory), then
 * takes SPLIT_TAKE lines at a time from the end of what is left (it has
 * the instructions by position by then: no walk to find them) until the
 * two meet, prints them into a buffer of its own and appends that after
 * the worker's lines.  The split so follows how fast each thread goes (a
 * worker kept off its core leaves the caller all that remains). */
#define SPLIT_CHUNK 1024
#define SPLIT_TAKE 4096
/* How often (in list positions) the caller's walk looks whether the worker gave up. */
#define SPLIT_POLL 4096

/* The worker: list positions 0..limit-1 of c, printed by print_line_at. */
typedef struct split_worker {
  pthread_t thread;
  printer pr;                 /* its own caches and scratch; walk_out is the caller's
                                 output (untouched by the caller until the join, or
                                 until it took all lines before the worker claimed
                                 any), line_at the caller's (the worker notes 0..limit-1) */
  const hk_computation *c;
  uint64_t range;             /* limit << 32 | end of the lines claimed (atomic) */
  int stop;                   /* the caller gave up (atomic) */
  int failed;                 /* the worker gave up: a control edge, a short list (atomic) */
} split_worker;

/* Two threads only where hlokit may use two (HLOKIT_THREADS, the CPUs). */
static bool split_wanted(void) { return hk_worker_threads() > 1; }

static bool split_stopped(split_worker *w) { return __atomic_load_n(&w->stop, __ATOMIC_RELAXED); }
static bool split_failed(split_worker *w) { return __atomic_load_n(&w->failed, __ATOMIC_RELAXED); }

/* The worker claims the lines after end (the end of its last claim): the
 * end of the new claim, end itself when it has reached the limit. */
static size_t split_claim(split_worker *w, size_t end) {
  uint64_t v = __atomic_load_n(&w->range, __ATOMIC_ACQUIRE);
  for (;;) {
    size_t limit = (size_t)(v >> 32);
    if (end >= limit) return end;
    size_t next = limit - end > SPLIT_CHUNK ? end + SPLIT_CHUNK : limit;
    if (__atomic_compare_exchange_n(&w->range, &v, (uint64_t)limit << 32 | next, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return next;
  }
}

/* The caller takes up to SPLIT_TAKE of the last lines the worker has not
 * claimed: [*from, *to), false when none are left. */
static bool split_take(split_worker *w, size_t *from, size_t *to) {
  uint64_t v = __atomic_load_n(&w->range, __ATOMIC_ACQUIRE);
  for (;;) {
    size_t limit = (size_t)(v >> 32), end = (size_t)(v & 0xffffffffu);
    if (limit <= end) return false;
    size_t first = limit - end > SPLIT_TAKE ? limit - SPLIT_TAKE : end;
    if (__atomic_compare_exchange_n(&w->range, &v, (uint64_t)first << 32 | end, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      *from = first;
      *to = limit;
      return true;
    }
  }
}

static void *split_run(void *arg) {
  split_worker *w = arg;
  const hk_instr *x = w->c->first, *ahead = x;
  for (int k = 0; k < TX_PREFETCH_AHEAD && ahead; k++) ahead = ahead->next;
  size_t pos = 0, end = 0;
  for (;; x = x->next, pos++) {
    if (pos == end && (split_stopped(w) || (end = split_claim(w, pos)) == pos)) break;
    ahead = tx_prefetch_ahead(ahead);
    if (!x || !tx_print_line_at(&w->pr, x, pos)) {
      __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
      break;
    }
  }
  return NULL;
}

static void split_free(split_worker *w) {
  w->pr.line_at = NULL;   /* the caller's */
  tx_printer_free(&w->pr);
  free(w);
}

/* A worker started on c's n instructions, printing into out (from its
 * end); NULL when c is small, one thread is wanted or none can start. */
split_worker *tx_split_start(printer *pr, const hk_computation *c, size_t n, hk_buf *out) {
  if (n < SPLIT_MIN_INSTRS || !split_wanted()) return NULL;
  split_worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  tx_printer_init(&w->pr, out, pr->lng ? HK_PRINT_LONG : HK_PRINT_SHORT);
  w->c = c;
  w->range = (uint64_t)n << 32;
  w->pr.line_at = pr->line_at;
  w->pr.walk_out = out;
  w->pr.walk_start = out->len;
  w->pr.walk_n = n;           /* out is sized for all of c: the caller's lines follow */
  if (pthread_create(&w->thread, NULL, split_run, w) != 0) {
    split_free(w);
    return NULL;
  }
  return w;
}

/* Waits for the worker (asking it to stop first when the caller gave up);
 * true if it printed all the lines up to its limit. */
static bool split_join(split_worker *w, bool stop) {
  if (stop) __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
  pthread_join(w->thread, NULL);
  return !split_failed(w);
}

/* tx_list_post_order's visitor while a worker prints: adds x's callees to
 * the call graph (in list order); gives up soon after the worker did.
 * Control edges are looked at by whichever thread prints x. */
static bool walk_beside_worker(void *ctx, const hk_instr *x, uint32_t pos) {
  printer *pr = ctx;
  if (x->n_called && pr->g) tx_callgraph_add_calls(pr->g, pr->gm, x);
  return pos % SPLIT_POLL || !split_failed(pr->worker);
}

/* The caller's lines of list positions from..to-1, at offset off of split_out. */
typedef struct tail_chunk {
  size_t from, to, off;
} tail_chunk;

/* Prints list positions from..to-1 (their instructions from po.at) into
 * walk_out; false at a control edge. */
static bool print_positions(printer *pr, size_t from, size_t to) {
  hk_instr *const *at = pr->po.at;
  for (size_t pos = from; pos < to; pos++) {
    if (pos + 2 * TX_PREFETCH_AHEAD < to) __builtin_prefetch(at[pos + 2 * TX_PREFETCH_AHEAD]);
    if (pos + TX_PREFETCH_AHEAD < to) tx_prefetch_parts(at[pos + TX_PREFETCH_AHEAD]);
    if (!tx_print_line_at(pr, at[pos], pos)) return false;
  }
  return true;
}

/* Prints list positions from..to-1 into split_out as one more chunk. */
static bool print_chunk(printer *pr, size_t from, size_t to) {
  if (pr->n_chunks == pr->cap_chunks) {
    pr->cap_chunks = pr->cap_chunks ? 2 * pr->cap_chunks : 64;
    pr->chunks = realloc(pr->chunks, pr->cap_chunks * sizeof *pr->chunks);
    if (!pr->chunks) abort();
  }
  pr->chunks[pr->n_chunks++] = (tail_chunk){from, to, pr->split_out.len};
  return print_positions(pr, from, to);
}

/* Takes all n lines from a worker that has not claimed any yet (kept off
 * its core all along): it will touch nothing more.  False if it has. */
static bool split_take_all(split_worker *w, size_t n) {
  uint64_t v = (uint64_t)n << 32;
  return __atomic_compare_exchange_n(&w->range, &v, 0, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE);
}

/* The caller's share: chunks from the end until it meets the worker;
 * false at a control edge, or when the worker gave up. */
static bool print_tail(printer *pr, split_worker *w) {
  pr->split_out.len = 0;
  pr->n_chunks = 0;
  pr->walk_out = &pr->split_out;
  pr->walk_start = 0;
  pr->walk_n = 0;             /* no sizing ahead: chunks come in no one order */
  size_t from, to;
  while (split_take(w, &from, &to))
    if (!print_chunk(pr, from, to) || split_failed(w)) return false;
  return true;
}

/* Appends the caller's chunks after the worker's lines, in list order;
 * their line offsets too, when the lines are to be put in post order. */
static void append_tail(printer *pr, hk_buf *out) {
  for (size_t k = pr->n_chunks; k-- > 0;) {
    const tail_chunk *ch = &pr->chunks[k];
    size_t end = k + 1 < pr->n_chunks ? pr->chunks[k + 1].off : pr->split_out.len;
    size_t base = out->len;
    tx_put(out, pr->split_out.data + ch->off, end - ch->off);
    if (!pr->po.listed)
      for (size_t p = ch->from; p < ch->to; p++) pr->line_at[p] = pr->line_at[p] - ch->off + base;
  }
}

/* c's lines with a worker (printing into out from start): true when all
 * are in out, in list order, their offsets in line_at; false (out to be
 * cut back) when the instructions must be walked instead. */
bool tx_print_list_split(printer *pr, split_worker *w, const hk_computation *c, hk_buf *out,
                         size_t start) {
  pr->worker = w;
  bool ok = tx_list_post_order(c, &pr->po, walk_beside_worker, pr);
  if (ok && split_take_all(w, c->n_instrs)) {
    /* straight into out, in list order, as if alone */
    pr->n_chunks = 0;
    pr->walk_out = out;
    pr->walk_start = start;
    pr->walk_n = (size_t)c->n_instrs;
    ok = print_positions(pr, 0, (size_t)c->n_instrs);
  } else {
    ok = ok && print_tail(pr, w);
  }
  ok = split_join(w, !ok) && ok;
  pr->worker = NULL;
  split_free(w);
  if (ok) append_tail(pr, out);
  return ok;
}

