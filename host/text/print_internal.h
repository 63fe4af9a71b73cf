/* print_internal.h - what the printer (print.c) and its line printer
 * (print_lines.c) share: the printer's state and the output's sink. */
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
  bool lng;                 /* long form */
  cache_slot *slots;
  size_t cap, n;
  cache_slot last[3];       /* the last object printed of each kind (a shape */
                            /* with, without layout, a sharding): it repeats */
  hk_buf text;              /* cached strings */
  hk_buf scratch;           /* attribute pieces of one instruction */
  piece *pieces;
  int n_pieces, cap_pieces;
  hk_print_write_fn sink;   /* where the text goes as it is printed (NULL: */
  void *sink_ctx;           /* it stays in the output buffer) */
  int sink_err;             /* the sink's first nonzero return: it gets no more */
  bool scheduled;
} printer;

void tx_printer_init(printer *pr, hk_print_form form);
void tx_printer_free(printer *pr);
/* Prints x's line ("  ", ROOT, the instruction, newline) into out. */
void tx_emit(printer *pr, const hk_instr *x, hk_buf *out);

/* With a sink, the output buffer is handed on (and emptied) once it holds
 * TX_FLUSH_BYTES; tx_flush hands it on now.  Without, both do nothing. */
#define TX_FLUSH_BYTES ((size_t)1 << 20)
void tx_flush(printer *pr, hk_buf *out);

/* ---- a computation's lines in print order (print_lines.c) ---- */

/* Prints the n instructions at[0..n-1] as lines into out. */
void tx_print_lines(printer *pr, hk_instr *const *at, size_t n, hk_buf *out);

#pragma GCC visibility pop

#endif
