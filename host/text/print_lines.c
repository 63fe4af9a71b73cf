/* print_lines.c - a computation's lines, in the order they print, into the
 * printer's output, handed on (with a sink) whenever it holds a megabyte.
 *
 * One thread: a second one that printed every other block of 4096 lines
 * and handed the blocks over in turn measured no gain in the whole
 * process (10^6 parse+print, 2 cores, medians of 7 alternating: 2.07 s
 * with it, 1.96 s without), so it went. */
#include "text/print_internal.h"

void tx_print_lines(printer *pr, hk_instr *const *at, size_t n, hk_buf *out) {
  for (size_t k = 0; k < n; k++) {
    if (k + 2 * TX_PREFETCH_AHEAD < n) __builtin_prefetch(at[k + 2 * TX_PREFETCH_AHEAD]);
    if (k + TX_PREFETCH_AHEAD < n) tx_prefetch_parts(at[k + TX_PREFETCH_AHEAD]);
    tx_emit(pr, at[k], out);
    if (out->len >= TX_FLUSH_BYTES) tx_flush(pr, out);
  }
}
