/* newer_attrs.c - grammar checks for attribute values newer XLA (2025-26) writes and hlokit keeps verbatim: origin values, convolution's sparsity and block scaling configs, the module's origin_recovery_table and debug_attributes. */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

static bool word_is(const char *s, size_t l, const char *w) {
  return strlen(w) == l && memcmp(s, w, l) == 0;
}

static bool fail(tx_parser *P, const char *msg) {
  return tx_error_at(P, (tx_skip(P), P->p), "%s", msg);
}

static bool expect(tx_parser *P, char c, const char *msg) {
  return tx_accept(P, c) || fail(P, msg);
}

static bool check_int(tx_parser *P) {
  int64_t v;
  tx_skip(P);
  return tx_int(P, &v) || fail(P, "expects integer");
}

/* {} | {"name"} | {"name" {i, j, ...}}: XLA's ParseOriginalArray. */
static bool check_original_array(tx_parser *P) {
  if (!expect(P, '{', "Expects '{'")) return false;
  if (tx_peek(P) == '"') {
    const char *s;
    size_t l;
    if (!tx_quoted_raw(P, &s, &l)) return false;
    if (tx_accept(P, '{') && !tx_accept(P, '}')) {
      do {
        if (!check_int(P)) return false;
      } while (tx_accept(P, ','));
      if (!expect(P, '}', "Expects '}' at the end of ShapeIndex")) return false;
    }
  }
  return expect(P, '}', "Expects '} at end of OriginalArray'");
}

/* origin={[synthetic_call]} or {tree [, ["call/hierarchy"]]}, the tree of
 * original arrays nested in (...): XLA's ParseOriginalValueImpl. */
bool tx_check_origin(tx_parser *P) {
  if (!expect(P, '{', "Expects '{' to start original value")) return false;
  if (tx_accept(P, '[')) {
    if (!tx_accept_word(P, "synthetic_call"))
      return fail(P, "Expects 'synthetic_call' after '[' for a synthetic_call value.");
    if (!expect(P, ']', "Expects ']' to end '[synthetic_call]'")) return false;
    return expect(P, '}', "Expects '}' to end original value");
  }
  int depth = 0;
  bool hierarchy = false;
  for (int c; (c = tx_peek(P)) != '}';) {
    if (c == '(' || c == ')') {
      if (c == ')' && depth == 0) break;
      depth += c == '(' ? 1 : -1;
      if (depth > TX_MAX_DEPTH) return fail(P, "maximum recursion depth exceeded");
      P->p++;
    } else if (c == ',') {
      P->p++;
      if (tx_peek(P) != '[') continue;
      if (hierarchy) return fail(P, "Duplicate call_hierarchy in original_value.");
      hierarchy = true;
      P->p++;
      const char *s;
      size_t l;
      if (tx_peek(P) != '"') return fail(P, "Expects a string for call_hierarchy.");
      if (!tx_quoted_raw(P, &s, &l)) return false;
      if (!expect(P, ']', "Expects ']' to end call_hierarchy")) return false;
    } else if (c == '{') {
      if (!check_original_array(P)) return false;
    } else {
      break;
    }
  }
  if (depth || tx_peek(P) != '}')
    return fail(P, "Expects a tuple tree of original arrays in original_value field.");
  P->p++;
  return true;
}

/* N or NxMx...: XLA's ParseDxD; *n gets the count. */
static bool check_dxd(tx_parser *P, int *n, const char *msg) {
  int64_t v[HK_MAX_RANK * 3];
  tx_skip(P);
  if (P->p >= P->end || *P->p < '0' || *P->p > '9') return tx_error_at(P, P->p, "%s", msg);
  return tx_x_list(P, v, n, 'x', 1, "dims");
}

/* One tensor's {key=value ...} (blank separated) of a sparsity or block
 * scaling config. */
static bool check_tensor_config(tx_parser *P, bool sparsity) {
  const char *what = sparsity ? "TensorSparsityConfig" : "TensorBlockScalingConfig";
  if (!tx_accept(P, '{')) return tx_error_at(P, (tx_skip(P), P->p), "expected '{' to start %s", what);
  while (tx_peek(P) != '}') {
    const char *s;
    size_t l;
    int n;
    if (!tx_attr_name(P, &s, &l)) return false;
    if (sparsity && word_is(s, l, "sparsity")) {
      const char *at = (tx_skip(P), P->p);
      if (!check_dxd(P, &n, "expects string")) return false;
      if (n != 2) return tx_error_at(P, at, "expects 'num_non_zero:block_size'");
    } else if (!sparsity && (word_is(s, l, "strides") || word_is(s, l, "steps"))) {
      if (!check_dxd(P, &n, word_is(s, l, "steps") ? "expects steps in form NxMxK"
                                                     : "expects strides in form NxMxK"))
        return false;
    } else if (sparsity ? word_is(s, l, "dimension") || word_is(s, l, "stride") || word_is(s, l, "idx")
                        : word_is(s, l, "scale_idx") || word_is(s, l, "zero_idx")) {
      int64_t v;
      tx_skip(P);
      if (!tx_int(P, &v)) return fail(P, "expects int64_t");
    } else {
      return tx_error_at(P, s, "unknown attribute");
    }
  }
  P->p++;
  return true;
}

/* sparsity_config={lhs={...} rhs={...}} (XLA's ParseSparsityConfig) or
 * block_scaling_config={...} (ParseBlockScalingConfig): lhs/rhs only. */
bool tx_check_operand_configs(tx_parser *P, bool sparsity) {
  const char *what = sparsity ? "SparsityConfig" : "BlockScalingConfig";
  if (!tx_accept(P, '{')) return tx_error_at(P, (tx_skip(P), P->p), "expected '{' to start %s", what);
  while (tx_peek(P) != '}') {
    const char *s;
    size_t l;
    if (!tx_attr_name(P, &s, &l)) return false;
    if (!word_is(s, l, "lhs") && !word_is(s, l, "rhs")) return tx_error_at(P, s, "unknown attribute");
    if (!check_tensor_config(P, sparsity)) return false;
  }
  P->p++;
  return true;
}

/* {{"a"} : {"b"}, "<module text>" ...}: XLA's ParseOriginalValueRecoveryTable.
 * Entries follow one another unseparated; the quoted text must parse as a
 * module of its own. */
bool tx_check_recovery_table(tx_parser *P) {
  static const char kFormat[] = "Expected format: <original_array>: <original_array>, <HloModule>";
  if (!expect(P, '{', "Expects '{'")) return false;
  while (tx_peek(P) != '}') {
    if (!check_original_array(P) || !expect(P, ':', kFormat) || !check_original_array(P))
      return false;
    if (!tx_accept(P, ',')) continue;
    const char *at = (tx_skip(P), P->p), *text;
    size_t n;
    if (tx_peek(P) != '"') return fail(P, "expects string");
    if (!tx_string(P, &text, &n)) return false;
    hk_module *m;
    hk_status *st = hk_parse_module(text, n, "<recovery module>", &m);
    if (st) {
      const char *msg = st->message ? st->message : "";
      tx_error_at(P, at, "the recovery module does not parse: %.*s", (int)strcspn(msg, "\n"), msg);
      hk_status_free(st);
      return false;
    }
    hk_module_free(m);
  }
  P->p++;
  return true;
}

/* {log_mode=default|fusion_debugger, callback_id=N, partitioned=B, op_id=N}. */
static bool check_debug_entry(tx_parser *P) {
  if (!expect(P, '{', "Expects '{' to start debug attributes")) return false;
  do {
    const char *s, *v;
    size_t l, vl;
    if (!tx_attr_name(P, &s, &l)) return false;
    if (word_is(s, l, "log_mode")) {
      const char *at = (tx_skip(P), P->p);
      if (!tx_ident(P, &v, &vl)) return fail(P, "expects name");
      if (!word_is(v, vl, "default") && !word_is(v, vl, "fusion_debugger"))
        return tx_error_at(P, at, "Invalid debug_log_mode value: %.*s", (int)vl, v);
    } else if (word_is(s, l, "callback_id") || word_is(s, l, "op_id")) {
      if (!check_int(P)) return false;
    } else if (word_is(s, l, "partitioned")) {
      bool b;
      if (!tx_bool(P, &b)) return fail(P, "expects true or false");
    } else {
      return tx_error_at(P, s, "Unknown debug attribute: %.*s", (int)l, s);
    }
  } while (tx_accept(P, ','));
  return expect(P, '}', "Expects '}' to end debug attributes");
}

/* {{"a"}: {...}, {"b"}: ({...}, {...})}: XLA's ParseDebugAttributesTable. */
bool tx_check_debug_attributes(tx_parser *P) {
  if (!expect(P, '{', "Expects '{' to start debug_attributes")) return false;
  if (tx_accept(P, '}')) return true;
  do {
    if (!check_original_array(P) || !expect(P, ':', "Expects ':' in debug_attributes entry"))
      return false;
    if (tx_accept(P, '(')) {
      if (!tx_accept(P, ')')) {
        do {
          if (!check_debug_entry(P)) return false;
        } while (tx_accept(P, ','));
        if (!expect(P, ')', "Expects ')' after list of debug_attributes")) return false;
      }
    } else if (!check_debug_entry(P)) {
      return false;
    }
  } while (tx_accept(P, ','));
  return expect(P, '}', "Expects '}' to end debug_attributes");
}
