/* parse.c - the HLO text parser: module header, computations, instructions (nested and async sugar), single-instruction text. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlokit/analysis.h"
#include "ir/irpriv.h"
#include "text/text_internal.h"

static bool parse_rhs(tx_parser *P, hk_computation *c, tx_pending *pi, hk_instr **out);

static void pending_init(tx_pending *pi, tx_parser *P) {
  memset(pi, 0, sizeof *pi);
  pi->op_base = P->opstack.n;
}

static void pending_free(tx_pending *pi) {
  free(pi->raw);
  free(pi->ctrl);
  pi->raw = NULL;
  pi->ctrl = NULL;
}

/* The operands parsed so far for pi (NULL while the operand stack was
 * never used: no pointer arithmetic on a null pointer). */
static hk_instr **pending_operands(tx_parser *P, const tx_pending *pi) {
  return P->opstack.v ? (hk_instr **)P->opstack.v + pi->op_base : NULL;
}

static const char *cstr(tx_parser *P, const char *s, size_t len) {
  return hk_intern(P->m, s, len);
}

/* ---- computation references ------------------------------------------------ */

bool tx_computation_ref(tx_parser *P, hk_computation **out) {
  if (tx_peek(P) == '{') {
    hk_computation *c = hk_computation_new(P->m, "computation");
    const char *open = P->p;
    if (!tx_enter(P)) return false;
    bool ok = tx_parse_computation_body(P, c, open);
    tx_leave(P);
    if (!ok) return false;
    *out = c;
    return true;
  }
  const char *s;
  size_t l;
  const char *at = P->p;
  if (!tx_ident(P, &s, &l)) return tx_error_at(P, at, "expects a computation name");
  hk_computation *c = tx_table_get(&P->comps, s, l);
  if (!c) return tx_error_at(P, at, "computation does not exist: %.*s", (int)l, s);
  *out = c;
  return true;
}

/* ---- name keys ------------------------------------------------------------- */

/* The first 16 bytes of a name, zero padded: compared instead of the name
 * (whose defining line is far back in the text, mostly) and hashed.  Reads
 * 16 bytes at s when the text has them (the tail is masked off). */
typedef struct name_key {
  uint64_t w[2];
  uint32_t len;
} name_key;

static inline name_key make_key(const char *s, size_t len, const char *end) {
  name_key k = {{0, 0}, (uint32_t)len};
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (end - s >= 16) {
    memcpy(k.w, s, 16);
    if (len < 8) {
      k.w[0] &= ((uint64_t)1 << (8 * len)) - 1;
      k.w[1] = 0;
    } else if (len < 16) {
      k.w[1] &= ((uint64_t)1 << (8 * (len - 8))) - 1;
    }
    return k;
  }
#endif
  (void)end;
  memcpy(k.w, s, len < 16 ? len : 16);
  return k;
}

static inline uint32_t recent_slot(const name_key *k, const char *s) {
  uint64_t h = (k->w[0] * 0x9e3779b97f4a7c15ull) ^ (k->w[1] * 0xc2b2ae3d27d4eb4full) ^ k->len;
  if (k->len > 16) {
    uint64_t t;
    memcpy(&t, s + k->len - 8, 8);
    h ^= t * 0xff51afd7ed558ccdull;
  }
  return (uint32_t)(h >> 54);   /* 1024 slots */
}

/* ---- opcodes --------------------------------------------------------------- */

/* The opcode spelled s[0..len), or HK_OPCODE_COUNT: a memo of the
 * opcode texts met lately saves hashing the name and comparing it with
 * the opcode table's strings. */
static hk_opcode opcode_of(tx_parser *P, const char *s, size_t len) {
  if (len > 16) return hk_opcode_from_name(s, len);
  name_key k = make_key(s, len, P->end);
  struct tx_op_memo *e = &P->op_memo[recent_slot(&k, s) & 63];
  if (e->len == len && e->head[0] == k.w[0] && e->head[1] == k.w[1]) return (hk_opcode)e->op;
  hk_opcode op = hk_opcode_from_name(s, len);
  if (op != HK_OPCODE_COUNT)
    *e = (struct tx_op_memo){{k.w[0], k.w[1]}, (uint32_t)len, (int)op};
  return op;
}

/* tx_attr_allowed for an opcode's attribute s[0..len), through a memo of
 * the (opcode, name) pairs allowed lately: the rule reads the opcode's
 * list of names, and the same few pairs come on every line. */
static bool attr_allowed(tx_parser *P, hk_opcode op, bool async_sugar, const char *s, size_t len) {
  if (async_sugar || len > 32) return tx_attr_allowed(op, async_sugar, s, len);
  name_key a = make_key(s, len < 16 ? len : 16, P->end);
  name_key b = len > 16 ? make_key(s + 16, len - 16, P->end) : (name_key){{0, 0}, 0};
  uint32_t h = (recent_slot(&a, s) ^ (uint32_t)(b.w[0] * 0x9e3779b97f4a7c15ull >> 58) ^
                (uint32_t)op * 7u) & 63;
  struct tx_attr_memo *e = &P->attr_memo[h];
  if (e->op == (int)op + 1 && e->len == len && e->head[0] == a.w[0] && e->head[1] == a.w[1] &&
      e->head[2] == b.w[0] && e->head[3] == b.w[1])
    return true;
  if (!tx_attr_allowed(op, false, s, len)) return false;
  *e = (struct tx_attr_memo){{a.w[0], a.w[1], b.w[0], b.w[1]}, (uint32_t)len, (int)op + 1};
  return true;
}

/* Opcode at the cursor: a plain opcode, or async sugar `<op>-start|update|done`. */
static bool parse_opcode(tx_parser *P, tx_pending *pi) {
  const char *s;
  size_t l;
  pi->op_at = P->p;
  if (!tx_ident(P, &s, &l)) return tx_error_at(P, P->p, "expects opcode");
  hk_opcode op = opcode_of(P, s, l);
  if (op != HK_OPCODE_COUNT) {
    pi->op = op;
    return true;
  }
  static const struct { const char *suffix; int kind; } sugar[] = {
      {"-start", HK_OP_ASYNC_START}, {"-update", HK_OP_ASYNC_UPDATE}, {"-done", HK_OP_ASYNC_DONE}};
  for (int k = 0; k < 3; k++) {
    size_t sl = strlen(sugar[k].suffix);
    if (l > sl && memcmp(s + l - sl, sugar[k].suffix, sl) == 0) {
      hk_opcode w = hk_opcode_from_name(s, l - sl);
      if (w != HK_OPCODE_COUNT) {
        pi->op = w;
        pi->async_kind = sugar[k].kind;
        return true;
      }
    }
  }
  if (l == 1 && *s == 'b' && P->p < P->end && *P->p == '(')
    return tx_error_at(P, pi->op_at, "buffer shapes b(...) (newer XLA) are not supported: "
                                     "hlokit's shapes have no buffer kind");
  /* opcodes newer XLA has and hlokit's opcode list (its ABI) does not */
  static const char *const kNewer[] = {"acos", "acosh", "asin", "asinh", "atanh",
                                       "collective-reduce", "scaled-dot", "scan"};
  for (size_t k = 0; k < sizeof kNewer / sizeof *kNewer; k++)
    if (strlen(kNewer[k]) == l && !memcmp(kNewer[k], s, l))
      return tx_error_at(P, pi->op_at, "opcode %s (newer XLA) is not supported: hlokit's opcode list has no %s",
                         kNewer[k], kNewer[k]);
  return tx_error_at(P, pi->op_at, "unknown opcode: %.*s", (int)l, s);
}

/* ---- names ------------------------------------------------------------------- */

/* Names are looked up in the IR's name table; the few instructions the IR
 * had to rename (a name used in two computations, a name that spells a
 * type) are found through P->scope by their source name. */
/* Binds the name s[0..len) (text ending at end) to i among the recent names. */
static void remember(tx_parser *P, hk_instr *i, const char *s, size_t len, const char *end) {
  name_key k = make_key(s, len, end);
  struct tx_recent *r = &P->recent[recent_slot(&k, s)];
  r->key = s;
  r->len = k.len;
  r->head[0] = k.w[0];
  r->head[1] = k.w[1];
  r->instr = i;
}

/* i got another name than the text gave it (the module's names are unique). */
static bool is_renamed(tx_parser *P, const hk_instr *i) {
  return P->renamed->n && tx_table_get(P->renamed, i->name, strlen(i->name)) == i;
}

hk_instr *tx_lookup(tx_parser *P, const char *s, size_t len) {
  name_key k = make_key(s, len, P->end);
  struct tx_recent *r = &P->recent[recent_slot(&k, s)];
  if (r->key && r->len == len && r->head[0] == k.w[0] && r->head[1] == k.w[1] &&
      r->instr->parent == P->comp && (len <= 16 || tx_bytes_equal(r->key, s, len)))
    return r->instr;
  if (P->scope->n) {
    hk_instr *i = tx_table_get(P->scope, s, len);
    if (i) return i;
  }
  char stackbuf[128];
  char *buf = len < sizeof stackbuf ? stackbuf : hk_check_alloc(malloc(len + 1));
  memcpy(buf, s, len);
  buf[len] = 0;
  hk_instr *i = hk_computation_find_instr(P->comp, buf);
  if (buf != stackbuf) free(buf);
  if (i && is_renamed(P, i)) i = NULL;   /* its IR name is not what the text called it */
  /* used again, likely */
  if (i && strlen(i->name) == len) remember(P, i, i->name, len, i->name + len);
  return i;
}

/* name (NUL-terminated) spells s[0..len)?  Byte by byte: name was just
 * written, and wide loads of fresh stores stall. */
static bool spells(const char *name, const char *s, size_t len) {
  for (size_t k = 0; k < len; k++)
    if (name[k] != s[k]) return false;
  return name[len] == 0;
}

/* Records the source name of a new instruction; false if the computation
 * already defines it. */
static bool define_name(tx_parser *P, hk_instr *i, const char *s, size_t len) {
  remember(P, i, s, len, P->end);
  if (spells(i->name, s, len)) return true;
  bool existed;
  tx_slot *slot = tx_table_claim(P->scope, s, len, &existed);
  if (existed) return false;
  slot->val = i;
  tx_table_put(P->renamed, i->name, strlen(i->name), i);
  char stackbuf[128];
  char *buf = len < sizeof stackbuf ? stackbuf : hk_check_alloc(malloc(len + 1));
  memcpy(buf, s, len);
  buf[len] = 0;
  /* an instruction of this computation the text named s already (one the
   * IR renamed to s was named otherwise) */
  hk_instr *prev = hk_computation_find_instr(P->comp, buf);
  if (buf != stackbuf) free(buf);
  return !(prev && prev != i && !is_renamed(P, prev));
}

/* ---- operands ---------------------------------------------------------------- */

static hk_instr *auto_parameter(tx_parser *P, hk_computation *c, const hk_shape *s,
                                const char *name, size_t len) {
  char buf[256];
  /* an anonymous operand (or one whose name does not fit) is named
   * "parameter"; only a name from the text is recorded as a source name
   * (define_name reads its key from the text) */
  bool named = len > 0 && len < sizeof buf;
  if (named) {
    memcpy(buf, name, len);
    buf[len] = 0;
  } else {
    snprintf(buf, sizeof buf, "parameter");
  }
  hk_instr *p = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, buf);
  int64_t num = P->n_auto_params++;
  hk_instr_attrs(p)->parameter_number = num;
  if (P->params) tx_vec_push(P->params, p);
  if (num > P->params_max) P->params_max = num;
  if (named) define_name(P, p, name, len);
  return p;
}

static bool at_nested_instr(tx_parser *P, const char *after) {
  const char *q = after;
  while (q < P->end && (*q == ' ' || *q == '\t')) q++;
  return q < P->end && *q == '(';
}

/* name#i#j...: XLA's compact get-tuple-element operand.  Each prefix
 * (p#0, then p#0#1) is one get-tuple-element of the computation, made at
 * its first use, named with '_' for '#', and found again by its text. */
static bool compact_gte(tx_parser *P, hk_computation *c, const char *s, const char *at,
                        hk_instr **io) {
  hk_instr *cur = *io;
  while (P->p < P->end && *P->p == '#') {
    P->p++;
    int64_t idx;
    if (!tx_int(P, &idx)) return tx_error_at(P, P->p, "expects integer");
    if (!hk_shape_is_tuple(cur->shape) || idx < 0 || idx >= cur->shape->n_tuple) {
      char *h = tx_human_shape(cur->shape);
      if (!hk_shape_is_tuple(cur->shape))
        tx_error_at(P, at, "GTE operand must be tuple, but has shape: %s", h);
      else
        tx_error_at(P, at, "GTE index %lld out of bounds for shape: %s", (long long)idx, h);
      free(h);
      return false;
    }
    size_t kl = (size_t)(P->p - s);
    hk_instr *g = tx_lookup(P, s, kl);
    if (!g) {
      char *nm = hk_check_alloc(malloc(kl + 1));
      for (size_t k = 0; k < kl; k++) nm[k] = s[k] == '#' ? '_' : s[k];
      nm[kl] = 0;
      g = hk_instr_new(c, HK_OP_GET_TUPLE_ELEMENT, cur->shape->tuple[idx], 1, &cur, nm);
      free(nm);
      hk_instr_attrs(g)->tuple_index = idx;
      define_name(P, g, s, kl);
    }
    cur = g;
  }
  *io = cur;
  return true;
}

/* Where the operand whose name ends at e starts: after the '(' or ','
 * before it at its own nesting depth (a shape's layout and tuple hold
 * commas), blanks skipped. */
static const char *operand_start(const tx_parser *P, const char *e) {
  int depth = 0;
  const char *b = e;
  for (; b > P->src; b--) {
    char ch = b[-1];
    if (ch == ')' || ch == '}' || ch == ']') depth++;
    else if ((ch == '(' || ch == '{' || ch == '[') && depth) depth--;
    else if ((ch == '(' || ch == ',') && !depth) break;
  }
  while (b < e && (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')) b++;
  return b;
}

/* The operand just read (the last on the operand stack) went on with
 * #i...: it becomes the element, checked against the shape written before
 * it.  Found from the text again: this is no common form.  True when a
 * ',' follows (more operands). */
__attribute__((noinline, cold)) static bool gte_suffix(tx_parser *P, hk_computation *c) {
  hk_instr **slot = (hk_instr **)&P->opstack.v[P->opstack.n - 1];
  /* the base's name as written ends at the '#': back to the blank, '%' or
   * shape closer before it (no name holds one) */
  const char *hash = P->p, *s = hash, *at = operand_start(P, hash);
  while (s > at && !strchr(" \t\r\n%]})", s[-1])) s--;
  const hk_shape *os = NULL;
  P->p = at;
  bool ok = !tx_at_shape(P) || tx_parse_shape(P, &os);
  P->p = hash;
  ok = ok && compact_gte(P, c, s, at, slot);
  if (ok && os && !hk_shape_compatible(os, (*slot)->shape)) {
    char *x = tx_human_shape(os), *y = tx_human_shape((*slot)->shape);
    ok = tx_error_at(P, at, "operand shape %s does not match instruction shape %s", x, y);
    free(x);
    free(y);
  }
  if (!ok) P->p = P->end; /* the operand list cannot close after the error */
  return ok && tx_accept(P, ',');
}

static bool parse_operand(tx_parser *P, hk_computation *c, hk_instr **out) {
  tx_skip(P);
  const char *at = P->p;
  const hk_shape *os = NULL;
  const char *s, *after;
  size_t l;
  if (tx_cached_shape(P, &os)) tx_skip(P);
  bool have_ident = tx_peek_ident(P, &s, &l, &after);
  if (!os && ((!have_ident && at < P->end && at[0] == '(') ||
              (have_ident && after < P->end && *after == '[' && tx_at_shape(P)))) {
    if (!tx_parse_shape(P, &os)) return false;
    tx_skip(P);
    have_ident = tx_peek_ident(P, &s, &l, &after);
  }
  if (have_ident) {
    if (at_nested_instr(P, after)) {
      tx_pending sub;
      pending_init(&sub, P);
      sub.shape = os;
      sub.at = at;
      if (!tx_enter(P)) return false;
      bool ok = parse_rhs(P, c, &sub, out);
      tx_leave(P);
      P->opstack.n = sub.op_base;
      pending_free(&sub);
      return ok;
    }
    P->p = after;
    hk_instr *i = tx_lookup(P, s, l);
    if (!i) {
      if (P->single_instr) {
        if (!os || (P->p < P->end && *P->p == '#'))
          return tx_error_at(P, at, "Operand had no shape in HLO text");
        *out = auto_parameter(P, c, os, s, l);
        return true;
      }
      return tx_error_at(P, s, "instruction does not exist: %.*s", (int)l, s);
    }
    /* name#i: the declared shape is the element's (parse_operands) */
    if (os && !hk_shape_compatible(os, i->shape) && !(P->p < P->end && *P->p == '#')) {
      char *a = hk_shape_to_string(os), *b = hk_shape_to_string(i->shape);
      tx_error_at(P, at,
                  "The declared operand shape %s is not compatible with the shape of the "
                  "operand instruction %s.",
                  a, b);
      free(a);
      free(b);
      return false;
    }
    *out = i;
    return true;
  }
  if (os && P->single_instr) {
    *out = auto_parameter(P, c, os, NULL, 0);
    return true;
  }
  /* XLA tries a name, then a nested instruction, and reports both */
  tx_error_at(P, at, "cannot parse as an instruction name or as a nested instruction:");
  tx_note_at(P, P->p, "expects name");
  return false;
}

static bool parse_operands(tx_parser *P, hk_computation *c, tx_pending *pi) {
  if (!tx_expect(P, '(', "at the start of operands")) return false;
  if (tx_accept(P, ')')) return true;
  do {
    hk_instr *o;
    if (!parse_operand(P, c, &o)) return false;
    tx_vec_push(&P->opstack, o);
    pi->n_operands++;
  } while (tx_accept(P, ',') || (P->p < P->end && *P->p == '#' && gte_suffix(P, c)));
  return tx_expect(P, ')', "at the end of operands");
}

/* `, name=` ahead?  Leaves the cursor after '=' when it is. */
static bool next_attr(tx_parser *P, const char **name, size_t *len, const char **at) {
  const char *save = P->p;
  if (!tx_accept(P, ',')) return false;
  const char *s, *after;
  size_t l;
  if (tx_peek_ident(P, &s, &l, &after) && s == P->p) {
    const char *q = after;
    while (q < P->end && (*q == ' ' || *q == '\t')) q++;
    if (q < P->end && *q == '=') {
      *name = s;
      *len = l;
      *at = s;
      P->p = q + 1;
      return true;
    }
  }
  P->p = save;
  return false;
}

/* ---- shape inference for instructions written without a shape ------------------- */

/* The shapes the text's operands give directly; false leaves it to shape
 * inference once the instruction exists (infer_from_instr). */
static bool infer_shape_quick(tx_parser *P, tx_pending *pi) {
  hk_instr **ops = pending_operands(P, pi);
  int n = pi->n_operands;
  hk_opcode op = pi->op;
  if (op == HK_OP_TUPLE) {
    const hk_shape *stack[64] = {0};
    const hk_shape **el = n <= 64 ? stack : hk_check_alloc(malloc(sizeof *el * (size_t)n));
    for (int i = 0; i < n; i++) el[i] = ops[i]->shape;
    pi->shape = hk_shape_tuple(P->m, n, el);
    if (el != stack) free(el);
    return true;
  }
  if (op == HK_OP_GET_TUPLE_ELEMENT && n == 1 && hk_shape_is_tuple(ops[0]->shape) &&
      pi->a.tuple_index >= 0 && pi->a.tuple_index < ops[0]->shape->n_tuple) {
    pi->shape = ops[0]->shape->tuple[pi->a.tuple_index];
    return true;
  }
  if ((op == HK_OP_SELECT || op == HK_OP_CLAMP) && n == 3) {
    pi->shape = ops[1]->shape;
    return true;
  }
  if (op == HK_OP_COMPARE && n == 2) {
    pi->shape = hk_shape_with_elem(P->m, ops[0]->shape, HK_PRED);
    return true;
  }
  if (n >= 1 && hk_opcode_is_elementwise(op) && op != HK_OP_CONVERT &&
      op != HK_OP_BITCAST_CONVERT && op != HK_OP_REAL && op != HK_OP_IMAG &&
      op != HK_OP_COMPLEX && op != HK_OP_IS_FINITE) {
    pi->shape = ops[0]->shape;
    return true;
  }
  if (op == HK_OP_COPY || op == HK_OP_OPTIMIZATION_BARRIER) {
    if (n == 1) {
      pi->shape = ops[0]->shape;
      return true;
    }
  }
  if (op == HK_OP_WHILE && n == 1) {
    pi->shape = ops[0]->shape;
    return true;
  }
  if (op == HK_OP_CALL && pi->to_apply && pi->to_apply->root) {
    pi->shape = pi->to_apply->root->shape;
    return true;
  }
  if (op == HK_OP_CONDITIONAL) {
    hk_computation *b = pi->true_c ? pi->true_c : pi->n_list ? pi->list[0] : NULL;
    if (b && b->root) {
      pi->shape = b->root->shape;
      return true;
    }
  }
  if (op == HK_OP_AFTER_ALL) {
    pi->shape = hk_shape_token(P->m);
    return true;
  }
  if (op == HK_OP_BROADCAST && n == 1 && hk_shape_is_array(ops[0]->shape)) {
    /* XLA's InferBroadcastShape(operand, sizes): without a shape the
     * dimensions attribute lists new major sizes, the operand's follow */
    const hk_shape *o = ops[0]->shape;
    int64_t nd = pi->has_dims ? (int64_t)pi->dims.n : 0;
    if (nd + o->rank > HK_MAX_RANK) return false;
    int64_t dims[HK_MAX_RANK];
    for (int64_t k = 0; k < nd; k++) {
      if (pi->dims.v[k] < 0) return false;
      dims[k] = pi->dims.v[k];
    }
    for (int k = 0; k < o->rank; k++) dims[nd + k] = o->dims[k];
    pi->shape = hk_shape_array(P->m, (hk_prim)o->elem, (int)(nd + o->rank), dims);
    return true;
  }
  return false;
}

/* An inferred shape with XLA's default layouts (ShapeUtil::MakeShape). */
static const hk_shape *with_default_layout(hk_module *m, const hk_shape *s) {
  if (hk_shape_is_tuple(s)) {
    const hk_shape *stack[16] = {0};
    const hk_shape **el =
        s->n_tuple <= 16 ? stack : hk_check_alloc(malloc(sizeof *el * (size_t)s->n_tuple));
    for (int k = 0; k < s->n_tuple; k++) el[k] = with_default_layout(m, s->tuple[k]);
    const hk_shape *t = hk_shape_tuple(m, s->n_tuple, el);
    if (el != stack) free(el);
    return t;
  }
  if (!hk_shape_is_array(s) || s->layout) return s;
  hk_shape tmpl = *s;
  const hk_shape *d = hk_shape_array(m, (hk_prim)s->elem, s->rank, s->dims);
  tmpl.layout = d->layout;
  return hk_shape_intern(m, &tmpl);
}

/* XLA infers the shape of an instruction written without one from its
 * operands and attributes (ShapeInference); i has a placeholder till then. */
static bool infer_from_instr(tx_parser *P, hk_instr *i) {
  const hk_shape *s = NULL;
  hk_status *st = hk_infer_shape(P->m, i, &s);
  if (st) {
    tx_skip(P);
    tx_error_at(P, P->p, "failed to infer shape for opcode: %s, error: %s",
                hk_opcode_name((hk_opcode)i->opcode), st->message ? st->message : "");
    hk_status_free(st);
    return false;
  }
  i->shape = with_default_layout(P->m, s);
  return true;
}

/* ---- checks XLA's parser makes ---------------------------------------------------- */

static bool check_instr(tx_parser *P, tx_pending *pi) {
  hk_instr **ops = pending_operands(P, pi);
  if (!pi->async_kind) {
    int arity = tx_opcode_arity(pi->op);
    if (arity >= 0 && arity != pi->n_operands)
      return tx_error_at(P, pi->op_at, "expects %d operands, but has %d operands", arity,
                         pi->n_operands);
  }
  if (pi->async_kind != HK_OP_ASYNC_UPDATE && pi->async_kind != HK_OP_ASYNC_DONE) {
    const char *miss = tx_missing_required(pi);
    if (miss) return tx_error_at(P, pi->op_at, "attribute %s is expected but not seen", miss);
  }
  switch (pi->op) {
    case HK_OP_BROADCAST:
      /* dimensions may be left out when the operand is a scalar: {} */
      if (!pi->seen_dims && !(pi->n_operands == 1 && hk_shape_is_array(ops[0]->shape) &&
                              ops[0]->shape->rank == 0))
        return tx_error_at(P, pi->op_at, "attribute dimensions is expected but not seen");
      break;
    case HK_OP_GET_TUPLE_ELEMENT:
      if (!pi->seen_index) return tx_error_at(P, pi->op_at, "attribute index is expected but not seen");
      break;
    case HK_OP_COMPARE:
      if (!pi->seen_direction) return tx_error_at(P, pi->op_at, "attribute direction is expected but not seen");
      break;
    case HK_OP_PARAMETER:
      if (pi->a.n_parameter_replication) {
        int64_t leaves = hk_shape_leaf_count(pi->shape);
        if (leaves != pi->a.n_parameter_replication)
          return tx_error_at(P, pi->at,
                             "parameter has %lld leaf buffers, but parameter_replication has %d elements",
                             (long long)leaves, pi->a.n_parameter_replication);
      }
      break;
    case HK_OP_INFEED:
      if (!hk_shape_is_tuple(pi->shape) || pi->shape->n_tuple == 0)
        return tx_error_at(P, pi->at, "infeed must have a non-empty tuple shape");
      break;
    case HK_OP_CONDITIONAL: {
      if (pi->n_operands < 1) return tx_error_at(P, pi->at, "conditional needs operands");
      const hk_shape *s0 = ops[0]->shape;
      bool is_pred = s0->elem == HK_PRED && s0->rank == 0;
      bool is_s32 = s0->elem == HK_S32 && s0->rank == 0;
      if (is_pred && pi->list_is_branches)
        return tx_error_at(P, pi->at, "unexpected attribute \"branch_computations\"");
      if (!is_pred && !is_s32)
        return tx_error_at(P, pi->at, "The first operand must be a scalar of PRED or S32");
      if (is_pred && (!pi->true_c || !pi->false_c))
        return tx_error_at(P, pi->at, "attribute true_computation is expected but not seen");
      if (is_s32 && !pi->list_is_branches)
        return tx_error_at(P, pi->at, "attribute branch_computations is expected but not seen");
      break;
    }
    case HK_OP_WHILE:
      if (!pi->condition || !pi->body)
        return tx_error_at(P, pi->at, "attribute %s is expected but not seen",
                           pi->condition ? "body" : "condition");
      break;
    default:
      break;
  }
  return true;
}

/* ---- creating the instruction ------------------------------------------------------- */

static void set_called(tx_parser *P, hk_instr *i, tx_pending *pi) {
  hk_computation *tmp[4];
  int n = 0;
  hk_computation **v = tmp;
  if (pi->op == HK_OP_WHILE) {
    tmp[n++] = pi->condition;
    tmp[n++] = pi->body;
  } else if (pi->op == HK_OP_SELECT_AND_SCATTER) {
    if (pi->select) tmp[n++] = pi->select;
    if (pi->scatter) tmp[n++] = pi->scatter;
  } else if (pi->true_c || pi->false_c) {
    if (pi->true_c) tmp[n++] = pi->true_c;
    if (pi->false_c) tmp[n++] = pi->false_c;
  } else if (pi->n_list) {
    v = pi->list;
    n = pi->n_list;
    if (pi->to_apply) {
      v = hk_alloc(P->m, sizeof *v * (size_t)(n + 1));
      v[0] = pi->to_apply;
      memcpy(v + 1, pi->list, sizeof *v * (size_t)n);
      n++;
    }
  } else {
    if (pi->to_apply) tmp[n++] = pi->to_apply;
    if (pi->condition) tmp[n++] = pi->condition;
    if (pi->body) tmp[n++] = pi->body;
    if (pi->select) tmp[n++] = pi->select;
    if (pi->scatter) tmp[n++] = pi->scatter;
  }
  if (n) hk_instr_set_called(i, n, v);
}

/* Copies the 8-byte words of src[0..n) that are not zero into dst, which
 * is zeroed (fresh arena memory): a cache line of dst is written only when
 * it gets something, and most of an instruction's attributes are empty. */
static void put_nonzero_words(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  size_t k = 0;
  /* four words a step: most steps are all zero and cost one test */
  for (; k + 32 <= n; k += 32) {
    uint64_t w[4];
    memcpy(w, s + k, 32);
    if (!(w[0] | w[1] | w[2] | w[3])) continue;
    for (int j = 0; j < 4; j++)
      if (w[j]) memcpy(d + k + 8 * j, &w[j], 8);
  }
  for (; k + 8 <= n; k += 8) {
    uint64_t w;
    memcpy(&w, s + k, 8);
    if (w) memcpy(d + k, &w, 8);
  }
  for (; k < n; k++)
    if (s[k]) d[k] = s[k];
}

/* pi's attributes into a (the instruction's block): only the generic ones
 * (metadata, frontend attributes, backend config, thread) or only the
 * opcode's own; fresh: a is new, with no control edges to keep. */
static void copy_attrs(hk_attrs *a, const tx_pending *pi, bool fresh, bool generic_only,
                       bool specific_only) {
  hk_attrs src = pi->a;
  if (generic_only) {
    hk_attrs g;
    memset(&g, 0, sizeof g);
    g.metadata = src.metadata;
    g.n_frontend_attributes = src.n_frontend_attributes;
    g.frontend_attributes = src.frontend_attributes;
    g.backend_config = src.backend_config;
    g.async_execution_thread = pi->async_thread;
    src = g;
  } else if (specific_only) {
    src.metadata = NULL;
    src.n_frontend_attributes = 0;
    src.frontend_attributes = NULL;
    src.backend_config = NULL;
  }
  if (fresh) {
    src.n_control_preds = src.n_control_succs = 0;
    src.control_preds = src.control_succs = NULL;
    put_nonzero_words(a, &src, sizeof src);
  } else {
    int32_t ncp = a->n_control_preds, ncs = a->n_control_succs;
    hk_instr **cp = a->control_preds, **cs = a->control_succs;
    *a = src;
    a->n_control_preds = ncp, a->control_preds = cp;
    a->n_control_succs = ncs, a->control_succs = cs;
  }
}

static void apply_attrs(tx_parser *P, hk_instr *i, tx_pending *pi, bool generic_only,
                        bool specific_only) {
  if (pi->has_attrs || pi->n_raw) {
    bool fresh = !i->attrs;   /* new attributes have no control edges to keep */
    hk_attrs *a = hk_instr_attrs(i);
    if (fresh && !generic_only && !specific_only) {
      /* the usual case: pi->a's words straight into the zeroed block, with
       * no copy of its 440 bytes first; control edges stay empty */
      put_nonzero_words(a, &pi->a, sizeof pi->a);
      a->n_control_preds = a->n_control_succs = 0;
      a->control_preds = a->control_succs = NULL;
    } else {
      copy_attrs(a, pi, fresh, generic_only, specific_only);
    }
    if (!generic_only && pi->n_raw) {
      /* statistics stays with the outer instruction of async sugar; fine */
      a->n_raw = pi->n_raw;
      a->raw = hk_memdup(P->m, pi->raw, sizeof *pi->raw * (size_t)pi->n_raw);
    }
    if (!generic_only && !specific_only && pi->async_thread)
      a->async_execution_thread = pi->async_thread;
  }
  if (!generic_only && pi->has_dims) {
    /* the list is a fresh copy in the module's arena already (tx_int_list,
     * iota_dimension): the instruction takes it as it is */
    i->n_dims = pi->dims.n;
    i->dims = pi->dims.n ? (int64_t *)pi->dims.v : NULL;
  }
  if (!generic_only) set_called(P, i, pi);
  if (!specific_only) {
    i->sharding = pi->sharding;
    for (int k = 0; k < pi->n_ctrl; k++) hk_instr_add_control_dep(pi->ctrl[k], i);
  }
}

static const char *instr_name(tx_parser *P, tx_pending *pi, char *buf, size_t cap) {
  if (pi->name && pi->name_len < cap) {
    memcpy(buf, pi->name, pi->name_len);
    buf[pi->name_len] = 0;
    return buf;
  }
  (void)P;
  const char *base = pi->async_kind == HK_OP_ASYNC_START    ? "async-start"
                     : pi->async_kind == HK_OP_ASYNC_UPDATE ? "async-update"
                     : pi->async_kind == HK_OP_ASYNC_DONE   ? "async-done"
                                                            : hk_opcode_name(pi->op);
  snprintf(buf, cap, "%s.anon", base);
  return buf;
}

static bool async_shape_ok(const hk_shape *s) {
  return hk_shape_is_tuple(s) && s->n_tuple >= 2 && hk_shape_is_tuple(s->tuple[0]);
}

/* The async op `prev` must be a start/update whose wrapped op matches. */
static bool check_async_operand(tx_parser *P, tx_pending *pi, hk_instr **ops, hk_computation **wrapped) {
  if (pi->n_operands != 1 || !async_shape_ok(ops[0]->shape))
    return tx_error_at(P, pi->at,
                       "AsyncUpdate and AsyncDone expect a single operand in the form of "
                       "((async-operands), async-outputs, state).");
  if ((ops[0]->opcode != HK_OP_ASYNC_START &&
                              ops[0]->opcode != HK_OP_ASYNC_UPDATE))
    return tx_error_at(P, pi->at,
                       "AsyncUpdate and AsyncDone expect their operand to be the previous async op.");
  hk_computation *w = ops[0]->n_called ? ops[0]->called[0] : NULL;
  if (pi->async_kind && w && w->root && w->root->opcode != pi->op)
    return tx_error_at(P, pi->op_at, "Expect async wrapped opcode to be %s, but got %s",
                       hk_opcode_name((hk_opcode)w->root->opcode), hk_opcode_name(pi->op));
  *wrapped = w;
  /* threads and computations written on update/done must be the chain's */
  const hk_instr *start = ops[0];
  while (start->opcode == HK_OP_ASYNC_UPDATE && start->n_operands == 1) start = start->operands[0];
  const char *thread = start->attrs && start->attrs->async_execution_thread
                           ? start->attrs->async_execution_thread
                           : "main";
  if (pi->async_thread && strcmp(pi->async_thread, thread) != 0) {
    tx_skip(P);
    return tx_error_at(P, P->p, "Expect async_execution_thread to be %s, but got %s", thread,
                       pi->async_thread);
  }
  hk_computation *calls = pi->n_list ? pi->list[0] : pi->to_apply;
  if (calls && w && calls != w) {
    tx_skip(P);
    return tx_error_at(P, P->p, "Expect async_wrapped_computation to be %s, but got %s", w->name,
                       calls->name);
  }
  return true;
}

static bool mark_async_computation(tx_parser *P, tx_pending *pi, hk_computation *w) {
  if (!tx_table_put(&P->async_comps, w->name, strlen(w->name), w))
    return tx_error_at(P, pi->at, "Computation %s is already referenced by another async op",
                       w->name);
  return true;
}

/* The raw attributes an -update/-done of async sugar keeps itself (there
 * is no wrapped op to take them): its origin, and an update's
 * output_to_operand_aliasing. */
static void keep_own_raw(tx_parser *P, hk_instr *i, const tx_pending *pi) {
  hk_raw_attr own[4];
  int n = 0;
  for (int k = 0; k < pi->n_raw && n < 4; k++)
    if (!strcmp(pi->raw[k].name, "origin") ||
        (pi->async_kind == HK_OP_ASYNC_UPDATE && !strcmp(pi->raw[k].name, "output_to_operand_aliasing")))
      own[n++] = pi->raw[k];
  if (!n) return;
  hk_attrs *a = hk_instr_attrs(i);
  a->n_raw = n;
  a->raw = hk_memdup(P->m, own, sizeof *own * (size_t)n);
}

static bool build_async_sugar(tx_parser *P, hk_computation *c, tx_pending *pi, hk_instr **out) {
  hk_instr **ops = pending_operands(P, pi);
  char nb[300];
  const char *name = instr_name(P, pi, nb, sizeof nb);
  if (pi->async_kind == HK_OP_ASYNC_START) {
    if (!async_shape_ok(pi->shape))
      return tx_error_at(P, pi->at,
                         "AsyncStart and AsyncUpdate expect the op shape to be in the form of "
                         "((async-operands), async-outputs, state).");
    hk_computation *w = hk_computation_new(P->m, "async_wrapped");
    if (pi->async_thread) w->execution_thread = pi->async_thread;
    hk_instr *params[256];
    int n = pi->n_operands < 256 ? pi->n_operands : 256;
    for (int k = 0; k < n; k++) {
      params[k] = hk_instr_new(w, HK_OP_PARAMETER, ops[k]->shape, 0, NULL, "async_param");
      hk_instr_attrs(params[k])->parameter_number = k;
    }
    w->n_params = n;
    w->params = n ? hk_memdup(P->m, params, sizeof *params * (size_t)n) : NULL;
    hk_instr *inner = hk_instr_new(w, pi->op, pi->shape->tuple[1], n, params, hk_opcode_name(pi->op));
    apply_attrs(P, inner, pi, false, true);
    hk_computation_set_root(w, inner);
    tx_table_put(&P->async_comps, w->name, strlen(w->name), w);
    hk_instr *start = hk_instr_new(c, HK_OP_ASYNC_START, pi->shape, pi->n_operands, ops, name);
    hk_computation *wc = w;
    hk_instr_set_called(start, 1, &wc);
    apply_attrs(P, start, pi, true, false);
    *out = start;
    return true;
  }
  hk_computation *w;
  if (!check_async_operand(P, pi, ops, &w)) return false;
  if (pi->async_kind == HK_OP_ASYNC_UPDATE && !async_shape_ok(pi->shape))
    return tx_error_at(P, pi->at,
                       "AsyncStart and AsyncUpdate expect the op shape to be in the form of "
                       "((async-operands), async-outputs, state).");
  hk_instr *i = hk_instr_new(c, (hk_opcode)pi->async_kind, pi->shape, 1, ops, name);
  if (w) hk_instr_set_called(i, 1, &w);
  apply_attrs(P, i, pi, true, false);
  keep_own_raw(P, i, pi);
  *out = i;
  return true;
}

/* XLA's HloComputation::Builder::AddParameter: a number once per
 * computation.  Parameters come in increasing order mostly: only a number
 * not above the largest so far is looked for. */
static bool check_parameter_number(tx_parser *P, tx_pending *pi) {
  if (!P->params) return true;
  int64_t num = pi->a.parameter_number;
  if (num <= P->params_max)
    for (size_t k = 0; k < P->params->n; k++)
      if (((hk_instr *)P->params->v[k])->attrs->parameter_number == num)
        return tx_error_at(P, pi->param_close_at, "Duplicate parameter number %lld", (long long)num);
  if (num > P->params_max) P->params_max = num;
  return true;
}

/* XLA's parser builds these opcodes from their operands (CreateSend,
 * CreateRecv(shape.tuple_shapes(0), ...), CreateRecvDone, CreateSendDone,
 * CreateOutfeed, CreateAfterAll, CreateAddDependency): the declared shape is
 * not kept, the built one is; an outfeed without outfeed_shape takes its
 * operand's shape there. */
static bool xla_built_shape(tx_parser *P, tx_pending *pi) {
  switch (pi->op) {   /* the other opcodes keep their declared shape: no work on the hot path */
    case HK_OP_SEND: case HK_OP_RECV: case HK_OP_RECV_DONE: case HK_OP_OUTFEED:
    case HK_OP_SEND_DONE: case HK_OP_AFTER_ALL: case HK_OP_ADD_DEPENDENCY:
      break;
    default:
      return true;
  }
  hk_instr **ops = pending_operands(P, pi);
  int n = pi->n_operands;
  const hk_shape *el[3];
  switch (pi->op) {
    case HK_OP_SEND:
      if (n != 2) return true;
      el[0] = ops[0]->shape;
      break;
    case HK_OP_RECV:
      if (!hk_shape_is_tuple(pi->shape) || pi->shape->n_tuple < 1)
        return tx_error_at(P, pi->at, "recv expects a tuple shape (data, u32[], token[])");
      el[0] = pi->shape->tuple[0];
      break;
    case HK_OP_RECV_DONE:
      if (n != 1 || !hk_shape_is_tuple(ops[0]->shape) || ops[0]->shape->n_tuple < 1) return true;
      el[0] = ops[0]->shape->tuple[0];
      el[1] = hk_shape_token(P->m);
      pi->shape = hk_shape_tuple(P->m, 2, el);
      return true;
    case HK_OP_OUTFEED:
      if (n == 2) tx_default_outfeed_shape(P, pi, ops[0]->shape);
      /* fall through */
    case HK_OP_SEND_DONE: case HK_OP_AFTER_ALL:
      pi->shape = hk_shape_token(P->m);
      return true;
    case HK_OP_ADD_DEPENDENCY:
      if (n == 2) pi->shape = ops[0]->shape;
      return true;
    default:
      return true;
  }
  el[1] = hk_shape_scalar(P->m, HK_U32);
  el[2] = hk_shape_token(P->m);
  pi->shape = hk_shape_tuple(P->m, 3, el);
  return true;
}

static bool build_instr(tx_parser *P, hk_computation *c, tx_pending *pi, hk_instr **out) {
  if (pi->op == HK_OP_PARAMETER && !pi->async_kind && !check_parameter_number(P, pi)) return false;
  bool infer_later = !pi->shape && !infer_shape_quick(P, pi);
  if (infer_later) pi->shape = hk_shape_tuple(P->m, 0, NULL);
  if (!check_instr(P, pi)) return false;
  if (!pi->async_kind && !xla_built_shape(P, pi)) return false;
  hk_instr *i = NULL;
  if (pi->async_kind) {
    if (!build_async_sugar(P, c, pi, &i)) return false;
  } else {
    hk_instr **ops = pending_operands(P, pi);
    if (pi->op == HK_OP_ASYNC_START || pi->op == HK_OP_ASYNC_UPDATE) {
      if (!async_shape_ok(pi->shape))
        return tx_error_at(P, pi->at,
                           "AsyncStart and AsyncUpdate expect the op shape to be in the form of "
                           "((async-operands), async-outputs, state).");
    }
    hk_computation *wrapped = NULL;
    if (pi->op == HK_OP_ASYNC_UPDATE || pi->op == HK_OP_ASYNC_DONE) {
      if (!check_async_operand(P, pi, ops, &wrapped)) return false;
    }
    if (pi->op == HK_OP_ASYNC_START) {
      hk_computation *w = pi->n_list ? pi->list[0] : pi->to_apply;
      if (!w) return tx_error_at(P, pi->at, "attribute calls is expected but not seen");
      if (!mark_async_computation(P, pi, w)) return false;
    }
    char nb[300];
    i = hk_instr_new(c, pi->op, pi->shape, pi->n_operands, ops, instr_name(P, pi, nb, sizeof nb));
    apply_attrs(P, i, pi, false, false);
    if (wrapped && !i->n_called) hk_instr_set_called(i, 1, &wrapped);
    if (infer_later && !infer_from_instr(P, i)) return false;
  }
  if (pi->name && !define_name(P, i, pi->name, pi->name_len))
    return tx_error_at(P, pi->at, "instruction already exists: %.*s", (int)pi->name_len, pi->name);
  if (i->opcode == HK_OP_PARAMETER && P->params) tx_vec_push(P->params, i);
  *out = i;
  return true;
}

/* `, sharding=` exactly, the attribute every instruction of a sharded
 * module has (any opcode takes it): taken, the cursor left on its value. */
static bool at_sharding_attr(tx_parser *P) {
  if (P->end - P->p < 11 || !tx_bytes_equal(P->p, ", sharding=", 11)) return false;
  P->p += 11;
  return true;
}

/* [shape] opcode(operands) [, attr=value]* */
static bool parse_rhs(tx_parser *P, hk_computation *c, tx_pending *pi, hk_instr **out) {
  tx_skip(P);
  if (!pi->at) pi->at = P->p;
  if (!pi->shape && !tx_cached_shape(P, &pi->shape) && tx_at_shape(P) &&
      !tx_parse_shape(P, &pi->shape))
    return false;
  tx_skip(P);
  if (!parse_opcode(P, pi)) return false;
  if (!pi->shape && (pi->async_kind || !tx_can_infer_shape(pi->op))) {
    tx_skip(P);
    return tx_error_at(P, P->p, "cannot infer shape for opcode: %s",
                       pi->async_kind ? hk_opcode_name((hk_opcode)pi->async_kind)
                                      : hk_opcode_name(pi->op));
  }
  if (pi->op == HK_OP_CONSTANT && !pi->async_kind) {
    if (!pi->shape) return tx_error_at(P, pi->op_at, "constant needs a shape");
    if (!tx_expect(P, '(', "at the start of a constant")) return false;
    if (!tx_parse_literal(P, pi->shape, &pi->a.literal)) return false;
    pi->has_attrs = true;
    if (!tx_expect(P, ')', "at the end of a constant")) return false;
  } else if (pi->op == HK_OP_PARAMETER && !pi->async_kind) {
    int64_t num;
    if (!tx_expect(P, '(', "at the start of a parameter")) return false;
    const char *at = (tx_skip(P), P->p);
    if (!tx_int(P, &num)) return false;
    if (num < 0) return tx_error_at(P, at, "parameter number must be >= 0");
    pi->param_close_at = (tx_skip(P), P->p);
    if (!tx_expect(P, ')', "after the parameter number")) return false;
    pi->a.parameter_number = num;
    pi->has_attrs = true;
    if (!pi->shape) return tx_error_at(P, pi->op_at, "parameter needs a shape");
  } else if (!parse_operands(P, c, pi)) {
    return false;
  }
  const char *an, *aat;
  size_t al;
  for (;;) {
    if (at_sharding_attr(P)) {
      if (!tx_parse_sharding_value(P, &pi->sharding)) return false;
      continue;
    }
    if (!next_attr(P, &an, &al, &aat)) break;
    if (!attr_allowed(P, pi->op, pi->async_kind != 0, an, al))
      return tx_error_at(P, aat, "unexpected attribute \"%.*s\"", (int)al, an);
    if (!tx_parse_attr(P, pi, an, al, aat)) return false;
  }
  return build_instr(P, c, pi, out);
}

/* Starts loading the name map slot of the next line's instruction name: a
 * line's parse is too short for the slot of its own name to arrive from
 * memory in a big module (perf: the probe stalled on it), so each line
 * asks for the next one's.  A guess only: a line that is not an
 * instruction costs a wasted prefetch. */
static void prefetch_next_name(tx_parser *P) {
  const char *nl = memchr(P->p, '\n', (size_t)(P->end - P->p));
  if (!nl) return;
  const char *s = nl + 1;
  while (s < P->end && (*s == ' ' || *s == '\t')) s++;
  if (P->end - s > 5 && memcmp(s, "ROOT ", 5) == 0) s += 5;
  if (s < P->end && *s == '%') s++;
  /* a name longer than 63 characters is not prefetched */
  static const bool kStop[256] = {[' '] = true, ['='] = true, ['\n'] = true};
  const char *e = s, *lim = P->end - s > 64 ? s + 64 : P->end;
  while (e < lim && !kStop[(unsigned char)*e]) e++;
  if (e > s && e < P->end && e - s < 64) {
    P->next_name = s;
    P->next_name_len = (size_t)(e - s);
    P->next_name_hash = hk_module_prefetch_instr_slot(P->m, s, (size_t)(e - s));
  }
}

/* Input this far behind the parse is given back (a mapped file's pages,
 * hk_input_release_before), every RELEASE_STEP bytes; the memos' texts
 * and recent names point into the last lines, well inside RELEASE_LAG. */
#define RELEASE_STEP ((size_t)8 << 20)
#define RELEASE_LAG ((size_t)1 << 20)

static void release_input_behind(tx_parser *P) {
  if ((size_t)(P->p - P->released) < RELEASE_STEP + RELEASE_LAG) return;
  P->released = P->p - RELEASE_LAG;
  hk_input_release_before(P->src, P->released);
}

/* [ROOT] name = rhs */
static bool parse_instruction(tx_parser *P, hk_computation *c, hk_instr **out, bool *is_root) {
  release_input_behind(P);
  tx_skip(P);
  tx_pending pi;
  pending_init(&pi, P);
  pi.at = P->p;
  *is_root = P->p < P->end && *P->p == 'R' && tx_accept_word(P, "ROOT");
  const char *s;
  size_t l;
  tx_skip(P);
  if (P->single_instr && tx_at_shape(P)) {
    /* canonical form without a name */
  } else {
    /* a shape where the name goes: XLA's lexer reads a type, not a name.
     * A name written with '%' cannot be one: the name is scanned once */
    const char *start = P->p;
    bool bad = tx_peek(P) == '(' || !tx_ident(P, &s, &l);
    if (!bad && s == start) {
      P->p = start;
      bad = tx_at_shape(P) || !tx_ident(P, &s, &l);
    }
    if (bad) {
      pending_free(&pi);
      return tx_error_at(P, P->p, "expects name");
    }
    if (!tx_accept(P, '=')) {
      pending_free(&pi);
      return tx_error_at(P, P->p, "expects '=' in instruction");
    }
    pi.name = s;
    pi.name_len = l;
    /* the name map slot is a cache miss in a big module: start it now, it
     * is needed once the right-hand side is parsed */
    if (s == P->next_name && l == P->next_name_len)
      hk_module_prefetch_instr_name_hashed(P->m, s, l, P->next_name_hash);
    else
      hk_module_prefetch_instr_name(P->m, s, l);
    prefetch_next_name(P);
  }
  bool ok = parse_rhs(P, c, &pi, out);
  P->opstack.n = pi.op_base;
  pending_free(&pi);
  return ok;
}

/* ---- computations --------------------------------------------------------------------- */

static bool finish_params(tx_parser *P, hk_computation *c, const char *at) {
  tx_vec *v = P->params;
  int64_t maxn = -1, count = (int64_t)v->n;
  for (size_t k = 0; k < v->n; k++) {
    int64_t n = ((hk_instr *)v->v[k])->attrs->parameter_number;
    if (n > maxn) maxn = n;
  }
  if (count != maxn + 1)
    return tx_error_at(P, at, "computation %s has %lld parameters but the largest parameter number is %lld",
                       c->name, (long long)count, (long long)maxn);
  hk_instr **ps = count ? hk_alloc(P->m, sizeof *ps * (size_t)count) : NULL;
  for (size_t k = 0; k < v->n; k++) {
    hk_instr *i = v->v[k];
    int64_t n = i->attrs->parameter_number;
    if (ps[n]) return tx_error_at(P, at, "parameter number %lld is used twice in computation %s",
                                  (long long)n, c->name);
    ps[n] = i;
  }
  c->n_params = (int32_t)count;
  c->params = ps;
  return true;
}

bool tx_parse_computation_body(tx_parser *P, hk_computation *c, const char *open) {
  if (!tx_expect(P, '{', "at the start of a computation body")) return false;
  tx_table scope, *saved = P->scope, renamed, *saved_renamed = P->renamed;
  bool saved_single = P->single_instr;
  tx_vec params = {0}, *saved_params = P->params;
  int64_t saved_max = P->params_max;
  hk_computation *saved_comp = P->comp;
  tx_table_init(&scope);
  tx_table_init(&renamed);
  P->scope = &scope;
  P->renamed = &renamed;
  P->comp = c;
  P->params = &params;
  P->params_max = -1;
  P->single_instr = false;
  hk_instr *root = NULL, *last = NULL;
  bool ok = true;
  while (ok) {
    int ch = tx_peek(P);
    if (ch == '}') break;
    if (ch == 0) {
      ok = tx_error_at(P, P->p, "expects '}' at the end of the computation");
      break;
    }
    bool is_root;
    hk_instr *i;
    const char *at = P->p;
    if (!(ok = parse_instruction(P, c, &i, &is_root))) break;
    if (is_root) {
      if (root) {
        ok = tx_error_at(P, at, "one computation should have only one ROOT");
        break;
      }
      root = i;
    }
    last = i;
  }
  if (ok) {
    P->p++;
    if (!root) root = last;
    if (root) hk_computation_set_root(c, root);
    else ok = tx_error_at(P, open, "computation %s has no instructions", c->name);
  }
  if (ok) ok = finish_params(P, c, open);
  tx_table_free(&scope);
  tx_table_free(&renamed);
  free(params.v);
  P->scope = saved;
  P->renamed = saved_renamed;
  P->comp = saved_comp;
  P->params = saved_params;
  P->params_max = saved_max;
  P->single_instr = saved_single;
  return ok;
}

/* `(name: shape, ...) -> shape`: the parameter shapes are checked by the
 * instructions; the result shape (and where it is) is returned. */
static bool parse_signature(tx_parser *P, const hk_shape **result, const char **result_at) {
  if (!tx_expect(P, '(', "at the start of a signature")) return false;
  if (!tx_accept(P, ')')) {
    do {
      const char *s;
      size_t l;
      const hk_shape *sh;
      if (!tx_ident(P, &s, &l)) return tx_error_at(P, P->p, "expects a parameter name");
      if (!tx_expect(P, ':', "after a parameter name")) return false;
      if (!tx_parse_shape(P, &sh)) return false;
    } while (tx_accept(P, ','));
    if (!tx_expect(P, ')', "at the end of a signature")) return false;
  }
  tx_skip(P);
  if (P->end - P->p < 2 || P->p[0] != '-' || P->p[1] != '>')
    return tx_error_at(P, P->p, "expects '->' in a computation signature");
  P->p += 2;
  tx_skip(P);
  *result_at = P->p;
  return tx_parse_shape(P, result);
}

/* XLA: the signature's result shape must be compatible with the root's. */
static bool check_signature_result(tx_parser *P, hk_computation *c, const hk_shape *sig,
                                   const char *at) {
  if (hk_shape_compatible(sig, c->root->shape)) return true;
  char *a = tx_human_shape(sig), *b = tx_human_shape(c->root->shape);
  tx_error_at(P, at,
              "Shape of computation %s, %s, is not compatible with that of its root instruction "
              "%s, %s",
              c->name, a, c->root->name, b);
  free(a);
  free(b);
  return false;
}

static bool parse_computation(tx_parser *P, hk_computation **entry, hk_computation **last) {
  tx_skip(P);
  const char *at = P->p;
  bool is_entry = tx_accept_word(P, "ENTRY");
  const char *s;
  size_t l;
  tx_skip(P);
  const char *name_at = P->p;
  if (!tx_ident(P, &s, &l)) return tx_error_at(P, P->p, "expects a computation name");
  const hk_shape *sig = NULL;
  const char *sig_at = NULL;
  if (tx_peek(P) == '(' && !parse_signature(P, &sig, &sig_at)) return false;
  hk_computation *prev = tx_table_get(&P->comps, s, l);
  if (prev) {
    tx_error_at(P, name_at, "computation already exists: %.*s", (int)l, s);
    const char *pat = prev->scratch;
    tx_note_at(P, pat ? pat : P->src, "computation previously defined here");
    return false;
  }
  tx_skip(P);
  const char *open = P->p;
  hk_computation *c = hk_computation_new(P->m, cstr(P, s, l));
  c->scratch = (void *)name_at;
  tx_table_put(&P->comps, s, l, c);
  if (!tx_parse_computation_body(P, c, open)) return false;
  if (sig && !check_signature_result(P, c, sig, sig_at)) return false;
  const char *an, *aat;
  size_t al;
  while (next_attr(P, &an, &al, &aat)) {
    if (al == 16 && !memcmp(an, "execution_thread", 16)) {
      const char *v;
      size_t vl;
      if (!tx_string(P, &v, &vl)) return false;
      c->execution_thread = v;
    } else {
      return tx_error_at(P, aat, "unexpected computation attribute %.*s", (int)al, an);
    }
  }
  if (is_entry) {
    if (*entry) return tx_error_at(P, at, "expects only one ENTRY");
    *entry = c;
  }
  *last = c;
  return true;
}

/* ---- module header -------------------------------------------------------------------- */

static bool parse_program_shape(tx_parser *P, hk_program_shape *ps) {
  if (!tx_expect(P, '{', "at the start of entry_computation_layout") ||
      !tx_expect(P, '(', "at the start of entry_computation_layout parameters"))
    return false;
  tx_vec v = {0};
  bool ok = true;
  if (!tx_accept(P, ')')) {
    do {
      const hk_shape *s;
      if (!(ok = tx_parse_shape(P, &s))) break;
      tx_vec_push(&v, (void *)s);
    } while (tx_accept(P, ','));
    if (ok) ok = tx_expect(P, ')', "at the end of entry_computation_layout parameters");
  }
  if (ok) {
    tx_skip(P);
    if (P->end - P->p < 2 || P->p[0] != '-' || P->p[1] != '>') ok = tx_error_at(P, P->p, "expects '->'");
    else P->p += 2;
  }
  const hk_shape *r = NULL;
  if (ok) ok = tx_parse_shape(P, &r) && tx_expect(P, '}', "at the end of entry_computation_layout");
  if (ok) {
    ps->n_params = (int32_t)v.n;
    const hk_shape **a = hk_alloc(P->m, sizeof *a * (v.n ? v.n : 1));
    for (size_t i = 0; i < v.n; i++) a[i] = v.v[i];
    ps->params = a;
    ps->result = r;
  }
  free(v.v);
  return ok;
}

/* {0}: (0, {0}, must-alias), ... and (0, {1}), ... are checked and kept verbatim. */
static bool check_shape_index(tx_parser *P) {
  if (!tx_accept(P, '{')) return tx_error_at(P, P->p, "Expects '{' at the start of ShapeIndex");
  if (tx_accept(P, '}')) return true;
  do {
    int64_t v;
    tx_skip(P);
    if (!tx_int(P, &v)) return false;
  } while (tx_accept(P, ','));
  if (!tx_accept(P, '}')) return tx_error_at(P, P->p, "Expects '}' at the end of ShapeIndex");
  return true;
}

static bool check_param_and_index(tx_parser *P) {
  if (!tx_expect(P, '(', "at the start of a parameter reference")) return false;
  int64_t v;
  tx_skip(P);
  if (!tx_int(P, &v)) return false;
  if (!tx_expect(P, ',', "after the parameter number")) return false;
  if (!check_shape_index(P)) return false;
  return true;
}

static bool parse_alias_like(tx_parser *P, bool with_output, const char **raw) {
  tx_skip(P);
  const char *st = P->p;
  if (!tx_expect(P, '{', "at the start of the alias description")) return false;
  if (!tx_accept(P, '}')) {
    do {
      if (with_output) {
        if (!check_shape_index(P)) return false;
        if (!tx_expect(P, ':', "after the output index")) return false;
      }
      if (!check_param_and_index(P)) return false;
      if (with_output && tx_accept(P, ',')) {
        const char *k;
        size_t kl;
        if (!tx_ident(P, &k, &kl)) return tx_error_at(P, P->p, "expects alias kind");
      }
      if (!tx_expect(P, ')', "at the end of a parameter reference")) return false;
    } while (tx_accept(P, ','));
    if (!tx_accept(P, '}'))
      return tx_error_at(P, P->p, "Expects '}' at the end of aliasing description");
  }
  *raw = tx_intern(P, st, (size_t)(P->p - st));
  return true;
}

void tx_add_module_raw(tx_parser *P, const char *name, size_t nl, const char *v) {
  hk_module_config *cf = &P->m->config;
  hk_raw_attr *r = hk_alloc(P->m, sizeof *r * (size_t)(cf->n_raw + 1));
  if (cf->n_raw) memcpy(r, cf->raw, sizeof *r * (size_t)cf->n_raw);
  r[cf->n_raw].name = tx_intern(P, name, nl);
  r[cf->n_raw].value = v;
  cf->raw = r;
  cf->n_raw++;
}

static bool parse_bools_or_bool(tx_parser *P, int32_t *n, const bool **out) {
  if (tx_peek(P) == '{') return tx_parse_bool_list(P, n, out);
  bool b;
  if (!tx_bool(P, &b)) return false;
  *n = 1;
  *out = hk_memdup(P->m, &b, sizeof b);
  return true;
}

#define ISN(lit) (nl == sizeof(lit) - 1 && memcmp(n, lit, nl) == 0)

static bool parse_header_attr(tx_parser *P, const char *n, size_t nl, const char *at) {
  hk_module_config *cf = &P->m->config;
  if (ISN("is_scheduled")) return tx_bool(P, &cf->is_scheduled);
  if (ISN("entry_computation_layout")) {
    cf->has_entry_layout = true;
    return parse_program_shape(P, &cf->entry_layout);
  }
  if (ISN("replica_count") || ISN("num_partitions")) {
    int64_t v;
    tx_skip(P);
    if (!tx_int(P, &v)) return false;
    if (v < 1) return tx_error_at(P, at, "%.*s must be positive", (int)nl, n);
    if (ISN("replica_count")) cf->replica_count = v;
    else cf->num_partitions = v, cf->use_spmd_partitioning = v > 1;
    return true;
  }
  if (ISN("allow_spmd_sharding_propagation_to_parameters"))
    return parse_bools_or_bool(P, &cf->n_allow_prop_to_params, &cf->allow_prop_to_params);
  if (ISN("allow_spmd_sharding_propagation_to_output"))
    return parse_bools_or_bool(P, &cf->n_allow_prop_to_output, &cf->allow_prop_to_output);
  if (ISN("frontend_attributes"))
    return tx_parse_kv_list(P, &cf->n_frontend_attributes, &cf->frontend_attributes);
  if (ISN("spmd_output_sharding")) return tx_parse_sharding_value(P, &cf->spmd_output_sharding);
  if (ISN("spmd_parameters_shardings")) {
    if (!tx_expect(P, '{', "at the start of spmd_parameters_shardings")) return false;
    tx_vec v = {0};
    bool ok = true;
    if (!tx_accept(P, '}')) {
      do {
        const hk_sharding *s;
        if (!(ok = tx_parse_sharding_value(P, &s))) break;
        tx_vec_push(&v, (void *)s);
      } while (tx_accept(P, ','));
      if (ok) ok = tx_expect(P, '}', "at the end of spmd_parameters_shardings");
    }
    if (ok) {
      const hk_sharding **a = hk_alloc(P->m, sizeof *a * (v.n ? v.n : 1));
      for (size_t i = 0; i < v.n; i++) a[i] = v.v[i];
      cf->n_spmd_parameters_shardings = (int32_t)v.n;
      cf->spmd_parameters_shardings = a;
    }
    free(v.v);
    return ok;
  }
  const char *raw;
  if (ISN("input_output_alias")) {
    if (!parse_alias_like(P, true, &raw)) return false;
  } else if (ISN("buffer_donor")) {
    if (!parse_alias_like(P, false, &raw)) return false;
  } else if (ISN("origin_recovery_table") || ISN("debug_attributes")) {
    const char *st = (tx_skip(P), P->p);
    if (!(ISN("debug_attributes") ? tx_check_debug_attributes(P) : tx_check_recovery_table(P)))
      return false;
    raw = tx_intern(P, st, (size_t)(P->p - st));
  } else {
    const char *v;
    size_t vl;
    if (!tx_raw_value(P, &v, &vl)) return false;
    raw = tx_intern(P, v, vl);
  }
  tx_add_module_raw(P, n, nl, raw);
  return true;
}

static bool parse_header(tx_parser *P) {
  const char *s;
  size_t l;
  tx_skip(P);
  if (!tx_ident(P, &s, &l)) return tx_error_at(P, P->p, "expects the module name");
  P->m->name = cstr(P, s, l);
  if (P->p < P->end && *P->p == ':') P->p++;
  const char *an, *aat;
  size_t al;
  while (next_attr(P, &an, &al, &aat))
    if (!parse_header_attr(P, an, al, aat)) return false;
  return true;
}

/* ---- entry points ------------------------------------------------------------------------ */

static bool parse_computations(tx_parser *P) {
  hk_computation *entry = NULL, *last = NULL;
  while (tx_peek(P) != 0) {
    if (tx_at_stack_frames(P)) {
      if (!tx_parse_stack_frames(P)) return false;
    } else if (!parse_computation(P, &entry, &last)) {
      return false;
    }
  }
  if (P->err) return false;
  if (!last) return tx_error_at(P, P->p, "expects at least one computation");
  hk_module_set_entry(P->m, entry ? entry : last);
  return true;
}

static bool parse_single_instruction(tx_parser *P) {
  hk_computation *c = hk_computation_new(P->m, "single_instruction");
  tx_table scope, renamed;
  tx_vec params = {0};
  tx_table_init(&scope);
  tx_table_init(&renamed);
  P->scope = &scope;
  P->renamed = &renamed;
  P->comp = c;
  P->params = &params;
  P->params_max = -1;
  P->single_instr = true;
  hk_instr *i;
  bool is_root;
  bool ok = parse_instruction(P, c, &i, &is_root);
  if (ok && tx_peek(P) != 0)
    ok = tx_error_at(P, P->p,
                     "Syntax error:\nExpected eof after parsing single instruction.  Did you "
                     "mean to write an HLO module and forget the \"HloModule\" header?");
  if (ok) {
    hk_computation_set_root(c, i);
    ok = finish_params(P, c, P->src);
  }
  if (ok) hk_module_set_entry(P->m, c);
  tx_table_free(&scope);
  tx_table_free(&renamed);
  free(params.v);
  P->scope = NULL;
  P->renamed = NULL;
  P->params = NULL;
  return ok;
}

static bool looks_like_computation(tx_parser *P) {
  const char *s, *after;
  size_t l;
  if (!tx_peek_ident(P, &s, &l, &after)) return false;
  if (l == 5 && !memcmp(s, "ENTRY", 5)) return true;
  const char *save = P->p;
  P->p = after;
  bool r = tx_peek(P) == '{';
  P->p = save;
  return r;
}

static void parser_init(tx_parser *P, const char *text, size_t len, const char *filename) {
  memset(P, 0, sizeof *P);
  P->src = P->p = P->released = text;
  P->end = text + len;
  P->filename = filename;
  tx_table_init(&P->comps);
  tx_table_init(&P->shapes);
}

static void parser_free(tx_parser *P) {
  tx_table_free(&P->comps);
  tx_table_free(&P->shapes);
  free(P->opstack.v);
  tx_table_free(&P->async_comps);
  free(P->ints);
}

static size_t newlines(const char *p, size_t n) {
  size_t k = 0;
  for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++) k++;
  return k;
}

/* About how many lines a big text has (instructions are one a line), from
 * the sparsest of three samples, so a text that is mostly one big literal
 * does not get a big name map; 0 for a small text. */
static size_t estimate_lines(const char *text, size_t len) {
  const size_t w = (size_t)1 << 16;
  if (!text || len < 4 * w) return 0;
  size_t a = newlines(text, w), b = newlines(text + len / 2, w), c = newlines(text + len - w, w);
  size_t k = a < b ? a : b;
  if (c < k) k = c;
  return k * (len / w);
}

hk_status *hk_parse_module(const char *text, size_t len, const char *filename,
                           hk_module **out) {
  *out = NULL;
  tx_parser P;
  parser_init(&P, text ? text : "", text ? len : 0, filename);
  P.m = hk_module_new("module");
  /* room for a name per line up front saves rehashing a big name map
   * while it fills */
  hk_module_reserve_instr_names(P.m, estimate_lines(text, len));
  if (P.m->config.num_partitions < 1) P.m->config.num_partitions = 1;
  if (P.m->config.replica_count < 1) P.m->config.replica_count = 1;
  bool ok;
  tx_skip(&P);
  if (P.err) ok = false;
  else if (tx_accept_word(&P, "HloModule")) ok = parse_header(&P) && parse_computations(&P);
  else if (looks_like_computation(&P)) ok = parse_computations(&P);
  else ok = parse_single_instruction(&P);
  if (!ok || P.err) {
    hk_status *st = P.err ? P.err : hk_error(HK_INVALID_ARGUMENT, "%s:1:1: error: parse failed",
                                            filename ? filename : "<input>");
    parser_free(&P);
    hk_module_free(P.m);
    return st;
  }
  for (int k = 0; k < P.m->n_computations; k++) P.m->computations[k]->scratch = NULL;
  parser_free(&P);
  *out = P.m;
  return NULL;
}

hk_status *hk_parse_shape(hk_module *m, const char *text, size_t len, const hk_shape **out) {
  tx_parser P;
  parser_init(&P, text, len, NULL);
  P.m = m;
  bool ok = tx_parse_shape(&P, out);
  if (ok && tx_peek(&P) != 0) ok = tx_error_at(&P, P.p, "expects end of shape text");
  hk_status *st = NULL;
  if (!ok || P.err) st = P.err ? P.err : hk_error(HK_INVALID_ARGUMENT, "<input>:1:1: error: bad shape");
  parser_free(&P);
  return st;
}
