/* print_internal.h - what the printer (print.c) and its two-thread part
 * (print_split.c) share: the printer's state and the line printer. */
#ifndef HLOKIT_TEXT_PRINT_INTERNAL_H
#define HLOKIT_TEXT_PRINT_INTERNAL_H

#include "text/text_internal.h"

#pragma GCC visibility push(hidden)

/* ---- printer state: cached shape / sharding text per interned pointer ---------- */

typedef struct cache_slot {
  uintptr_t key;
  uint32_t off, len;
} cache_slot;

typedef struct piece {
  int rank;
  uint32_t off, len;
} piece;

typedef struct printer {
  hk_buf *out;
  bool lng;                 /* long form */
  cache_slot *slots;
  size_t cap, n;
  hk_buf text;              /* cached strings */
  hk_buf scratch;           /* attribute pieces of one instruction */
  piece *pieces;
  int n_pieces, cap_pieces;
  tx_post_order po;         /* post order over list positions */
  const hk_computation *calls_of;   /* whose callees the list walk added to g */
  struct callgraph *g;      /* call graph being collected (print_in_module_order) */
  const hk_module *gm;
  size_t *line_at;          /* output offset of each list position's line */
  size_t cap_line_at;
  hk_buf *walk_out;         /* where print_line_at prints, */
  size_t walk_start, walk_n;    /* from where, how many lines (to size walk_out for) */
  struct split_worker *worker;  /* printing the computation's first lines, or NULL */
  hk_buf split_out;         /* the caller's lines meanwhile (the last ones), */
  struct tail_chunk *chunks;    /* in chunks taken from the end backwards */
  size_t n_chunks, cap_chunks;
  bool scheduled;
} printer;

void tx_printer_init(printer *pr, hk_buf *out, hk_print_form form);
void tx_printer_free(printer *pr);
/* Prints x, list position pos, into walk_out, noting where its line
 * starts; false at a control edge (the list order ignored it). */
bool tx_print_line_at(printer *pr, const hk_instr *x, size_t pos);
/* Adds the computations i calls to the call graph being collected. */
void tx_callgraph_add_calls(struct callgraph *g, const hk_module *m, const hk_instr *i);

/* ---- a big computation on two threads (print_split.c) ---- */
struct split_worker;
/* A worker started on c's n instructions, printing into out (from its
 * end); NULL when c is small, one thread is wanted or none can start. */
struct split_worker *tx_split_start(printer *pr, const hk_computation *c, size_t n, hk_buf *out);
/* c's lines with the worker w (printing into out from start): true when
 * all are in out, in list order, their offsets in line_at; false (out to
 * be cut back) when the instructions must be walked instead.  Frees w. */
bool tx_print_list_split(printer *pr, struct split_worker *w, const hk_computation *c,
                         hk_buf *out, size_t start);

#pragma GCC visibility pop

#endif
