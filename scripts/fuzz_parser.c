/* fuzz_parser.c - libFuzzer harness for the HLO text parser: parse, print both forms, reparse, free. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/hlokit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hk_module *m = NULL;
  hk_status *st = hk_parse_module((const char *)data, size, "fuzz", &m);
  if (st) {
    hk_status_free(st);
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
