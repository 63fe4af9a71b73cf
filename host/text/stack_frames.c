/* stack_frames.c - the module's stack frame tables (FileNames, FunctionNames, FileLocations, StackFrames) that JAX dumps carry for metadata's stack_frame_id: read, kept as one raw module entry, printed after the header. */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

/* XLA's order; the first two map ids to quoted names, the others to
 * {key=integer ...} records. */
static const char *const kSections[] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
enum { N_SECTIONS = 4, N_NAMED = 2 };

/* The section whose keyword starts the text at P, or -1.  A computation
 * may have such a name: then '{' or '(' follows it, never a table. */
static int section_at(tx_parser *P) {
  const char *s, *after;
  size_t len;
  if (!tx_peek_ident(P, &s, &len, &after) || *s == '%') return -1;
  for (int k = 0; k < N_SECTIONS; k++) {
    if (strlen(kSections[k]) != len || memcmp(s, kSections[k], len) != 0) continue;
    const char *save = P->p;
    P->p = after;
    int next = tx_peek(P);
    P->p = save;
    return next == '{' || next == '(' ? -1 : k;
  }
  return -1;
}

bool tx_at_stack_frames(tx_parser *P) { return section_at(P) >= 0; }

static const char *module_tables(const hk_module *m) {
  const hk_module_config *cf = &m->config;
  for (int k = 0; k < cf->n_raw; k++)
    if (!strcmp(cf->raw[k].name, TX_STACK_FRAMES_RAW)) return cf->raw[k].value;
  return NULL;
}

/* Whether the kept tables already have section k. */
static bool has_section(const char *tables, int k) {
  size_t n = strlen(kSections[k]);
  for (const char *p = tables; p && (p = strstr(p, kSections[k])); p += n)
    if ((p == tables || p[-1] == '\n') && p[n] == '\n') return true;
  return false;
}

/* {key=integer key=integer ...}, appended to b with single blanks. */
static bool parse_record(tx_parser *P, hk_buf *b) {
  if (!tx_expect(P, '{', "at the start of a stack frame record")) return false;
  hk_buf_put(b, "{", 1);
  for (bool first = true; !tx_accept(P, '}'); first = false) {
    const char *key;
    size_t kl;
    int64_t v;
    if (!tx_ident(P, &key, &kl)) return tx_error_at(P, P->p, "expects a field name in a stack frame record");
    if (!tx_expect(P, '=', "after a stack frame record field")) return false;
    tx_skip(P);
    if (!tx_int(P, &v)) return false;
    hk_buf_printf(b, "%s%.*s=%lld", first ? "" : " ", (int)kl, key, (long long)v);
  }
  hk_buf_put(b, "}", 1);
  return true;
}

/* One section: its keyword, then "id value" entries while an id follows. */
static bool parse_section(tx_parser *P, int k, hk_buf *b) {
  tx_skip(P);
  const char *at = P->p;
  tx_accept_word(P, kSections[k]);
  if (has_section(b->data, k)) return tx_error_at(P, at, "%s is defined twice", kSections[k]);
  hk_buf_printf(b, "%s\n", kSections[k]);
  for (int c = tx_peek(P); (c >= '0' && c <= '9') || c == '-'; c = tx_peek(P)) {
    int64_t id;
    tx_skip(P);
    if (!tx_int(P, &id)) return false;
    hk_buf_printf(b, "%lld ", (long long)id);
    if (k < N_NAMED) {
      const char *q;
      size_t ql;
      if (!tx_quoted_raw(P, &q, &ql)) return false;
      hk_buf_put(b, q, ql);
    } else if (!parse_record(P, b)) {
      return false;
    }
    hk_buf_put(b, "\n", 1);
  }
  hk_buf_put(b, "\n", 1);
  return true;
}

bool tx_parse_stack_frames(tx_parser *P) {
  hk_buf b;
  hk_buf_init(&b);
  const char *kept = module_tables(P->m);
  if (kept) hk_buf_puts(&b, kept);
  bool ok = true;
  for (int k; ok && (k = section_at(P)) >= 0;) ok = parse_section(P, k, &b);
  if (ok) {
    const char *v = tx_intern(P, b.data ? b.data : "", b.len);
    hk_module_config *cf = &P->m->config;
    int slot = 0;
    while (slot < cf->n_raw && strcmp(cf->raw[slot].name, TX_STACK_FRAMES_RAW)) slot++;
    if (slot == cf->n_raw) tx_add_module_raw(P, TX_STACK_FRAMES_RAW, strlen(TX_STACK_FRAMES_RAW), v);
    else ((hk_raw_attr *)cf->raw)[slot].value = v; /* arena memory of this module */
  }
  hk_buf_free(&b);
  return ok;
}

void tx_print_stack_frames(const hk_module *m, hk_buf *out) {
  const char *t = module_tables(m);
  if (!t) return;
  hk_buf_puts(out, t);
  hk_buf_put(out, "\n", 1);
}
