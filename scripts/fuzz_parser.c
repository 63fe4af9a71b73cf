/* fuzz_parser.c - libFuzzer harness for the HLO text parser: parse, print both forms, reparse, free. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes of a literal and its tuple elements. */
static int64_t literal_bytes(const hk_literal *l) {
  if (!l) return 0;
  int64_t n = l->data ? l->nbytes : 0;
  for (int32_t k = 0; k < l->n_elems; k++) n += literal_bytes(l->elems[k]);
  return n;
}

/* The constants' bytes: a bare element fills a shape of any size (XLA's
 * rule), so a few bytes of input can hold a literal of gigabytes, whose
 * print is as big again. Parsing one is the parser's to survive; printing
 * it is bounded by the output, not a parser fault, so such modules are
 * only parsed (the limit is the fuzzer's -rss_limit_mb, 2 GB by default). */
static int64_t constant_bytes(const hk_module *m) {
  int64_t n = 0;
  for (int32_t c = 0; c < m->n_computations; c++)
    for (const hk_instr *i = m->computations[c]->first; i; i = i->next)
      if (i->opcode == HK_OP_CONSTANT && i->attrs) n += literal_bytes(i->attrs->literal);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module((const char *)data, size, "fuzz", &m);
  if (st) {
    hk_status_free(st);
    return 0;
  }
  if (constant_bytes(m) > ((int64_t)16 << 20)) {
    hk_module_free(m);
    return 0;
  }
  for (int form = HK_PRINT_LONG; form <= HK_PRINT_SHORT; form++) {
    char *text = hk_module_to_string(m, (hk_print_form)form);
    hk_module *again = NULL;
    hk_status *st2 = hk_parse_module(text, strlen(text), "fuzz-reprint", &again);
    if (st2) hk_status_free(st2);
    else hk_module_free(again);
    free(text);
  }
  hk_module_free(m);
  return 0;
}
