/* text_internal.h - shared state of the HLO text parser and printer (host/text only). */
#ifndef HK_TEXT_INTERNAL_H
#define HK_TEXT_INTERNAL_H

#include "hlokit/hlokit.h"

/* Everything declared here is private to libhlokit: direct calls, no PLT. */
#pragma GCC visibility push(hidden)

/* ---- the parser cursor ------------------------------------------------ */

/* One name -> instruction binding of a computation scope; keys point into
 * the source text (no copies). */
typedef struct tx_slot {
  const char *key;
  uint32_t len, hash;
  void *val;
} tx_slot;

typedef struct tx_table {
  tx_slot *slots;
  size_t cap, n;
} tx_table;

/* A growable scratch array of pointers (operand lists, raw attributes). */
typedef struct tx_vec {
  void **v;
  size_t n, cap;
} tx_vec;

typedef struct tx_parser {
  const char *src, *p, *end;
  const char *released;       /* input before this given back (hk_input_release_before) */
  const char *next_name;      /* the next line's name as prefetch_next_name read it, */
  size_t next_name_len;       /* and its hk_str_hash: hashed once for both prefetches */
  uint32_t next_name_hash;
  const char *filename;
  hk_module *m;
  hk_status *err;             /* first error (with later notes appended) */
  tx_table *scope;            /* renamed instructions of the computation being parsed
                                 (source name -> instr when the IR uniquified it) */
  tx_table *renamed;          /* the same instructions by their IR names: an IR name
                                 that is a renamed instruction's is no source name */
  hk_computation *comp;       /* computation being parsed */
  tx_table comps;             /* computations by name */
  tx_vec opstack;             /* operands of instructions being parsed */
  tx_table async_comps;       /* computations already wrapped by an async op, by name */
  tx_vec *params;             /* parameters of the computation being parsed */
  int64_t params_max;         /* their largest number (-1: none yet) */
  tx_table shapes;            /* shape text -> interned shape (array shapes) */
  struct tx_shape_memo {      /* shape texts met lately (slots: tx_memo_index) */
    const char *text;
    uint32_t len;
    const hk_shape *shape;
  } shape_memo[256];
  struct tx_sharding_memo {   /* sharding texts met lately (slots: tx_memo_index) */
    const char *text;
    uint32_t len;
    const hk_sharding *sharding;
  } sharding_memo[256];
  struct tx_recent {          /* recently defined names (operands mostly refer to them) */
    const char *key;
    uint32_t len;
    uint64_t head[2];         /* the first 16 bytes of key, zero padded */
    hk_instr *instr;
  } recent[1024];
  struct tx_op_memo {         /* opcode texts (up to 16 bytes) met lately */
    uint64_t head[2];         /* the text, zero padded */
    uint32_t len;
    int op;
  } op_memo[64];
  struct tx_attr_memo {       /* (opcode, attribute name up to 32 bytes) found allowed lately */
    uint64_t head[4];         /* the name, zero padded */
    uint32_t len;
    int op;                   /* opcode + 1 (0: empty); async sugar is not remembered */
  } attr_memo[64];
  int64_t *ints;              /* scratch integer list */
  size_t n_ints, cap_ints;
  bool single_instr;          /* parsing a lone instruction: unknown operands become parameters */
  int n_auto_params;
  int depth;                  /* nesting of tuples, nested instructions, inline bodies */
} tx_parser;

/* lexing helpers (lex.c) */
void tx_skip_slow(tx_parser *P);
/* Skips blanks and comments. */
static inline void tx_skip(tx_parser *P) {
  const char *p = P->p;
  if (p < P->end && (unsigned char)*p > ' ' && *p != '/') return;
  /* one blank before a token: the common case */
  if (p + 1 < P->end && *p == ' ' && (unsigned char)p[1] > ' ' && p[1] != '/') {
    P->p = p + 1;
    return;
  }
  tx_skip_slow(P);
}
int tx_peek(tx_parser *P);                       /* next char after blanks, 0 at end */
bool tx_accept(tx_parser *P, char c);
bool tx_expect(tx_parser *P, char c, const char *what);
bool tx_accept_word(tx_parser *P, const char *w); /* a whole identifier */
bool tx_ident(tx_parser *P, const char **s, size_t *len);   /* [%]?name */
bool tx_peek_ident(tx_parser *P, const char **s, size_t *len, const char **after);
bool tx_int(tx_parser *P, int64_t *out);
bool tx_uint64(tx_parser *P, uint64_t *out, bool *neg);
bool tx_bool(tx_parser *P, bool *out);
bool tx_string(tx_parser *P, const char **s, size_t *len); /* "..." unescaped, interned */
bool tx_quoted_raw(tx_parser *P, const char **s, size_t *len); /* "..." with quotes, verbatim */
bool tx_int_list(tx_parser *P, char open, char close, hk_i64s *out);
/* Enters one nesting level; false (with an error) past TX_MAX_DEPTH. */
#define TX_MAX_DEPTH 256
bool tx_enter(tx_parser *P);
static inline void tx_leave(tx_parser *P) { P->depth--; }
bool tx_error_at(tx_parser *P, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tx_note_at(tx_parser *P, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Scans a balanced attribute value ending at a top-level ',' or closer. */
bool tx_raw_value(tx_parser *P, const char **s, size_t *len);
const char *tx_intern(tx_parser *P, const char *s, size_t len);

/* a[0..n) == b[0..n), for the short texts memos compare (names, shapes,
 * shardings): 8 bytes at a time, the last 8 overlapping, no call; reads
 * nothing outside the two ranges. */
static inline bool tx_bytes_equal(const char *a, const char *b, size_t n) {
  uint64_t x, y;
  if (n < 8) {
    for (size_t k = 0; k < n; k++)
      if (a[k] != b[k]) return false;
    return true;
  }
  for (size_t k = 0; k + 8 < n; k += 8) {
    __builtin_memcpy(&x, a + k, 8);
    __builtin_memcpy(&y, b + k, 8);
    if (x != y) return false;
  }
  __builtin_memcpy(&x, a + n - 8, 8);
  __builtin_memcpy(&y, b + n - 8, 8);
  return x == y;
}

/* Slot 0..255 of a small memo of texts met lately (shapes, shardings)
 * for the text at p, from its first 16 bytes; -1 when fewer are left.
 * A memo entry is used only when its whole text is at p again. */
int tx_memo_index(const tx_parser *P, const char *p);

/* name tables (lex.c) */
void tx_table_init(tx_table *t);
void tx_table_free(tx_table *t);
void *tx_table_get(const tx_table *t, const char *key, size_t len);
/* Returns false (and leaves the old binding) if key already exists. */
bool tx_table_put(tx_table *t, const char *key, size_t len, void *val);
/* Inserts key with a NULL value (or finds it: *existed); the slot stays
 * valid until the next insertion. */
tx_slot *tx_table_claim(tx_table *t, const char *key, size_t len, bool *existed);
void tx_vec_push(tx_vec *v, void *p);

/* shapes (shape_text.c) */
bool tx_at_shape(tx_parser *P);
bool tx_parse_shape(tx_parser *P, const hk_shape **out);
/* An array shape at the cursor whose exact text was parsed before: taken
 * (cursor moved past it) without lexing; false leaves the cursor. */
bool tx_cached_shape(tx_parser *P, const hk_shape **out);
void tx_print_shape(const hk_shape *s, bool layout, hk_buf *out);
/* The shape without layout (XLA's ShapeUtil::HumanString), malloc'd. */
char *tx_human_shape(const hk_shape *s);

/* literals (literal_text.c) */
bool tx_parse_literal(tx_parser *P, const hk_shape *shape, hk_literal **out);
void tx_print_literal(const hk_literal *l, hk_buf *out);
/* A float value as XLA prints it (shortest round-tripping form). */
void tx_print_float(hk_prim p, const void *elem, hk_buf *out);

/* An instruction being parsed: everything is collected here first, then
 * the instruction is created in one go. */
typedef struct tx_pending {
  const char *name;
  size_t name_len;
  const char *at;             /* start of the instruction (errors) */
  const hk_shape *shape;
  hk_opcode op;
  const char *op_at;
  int async_kind;             /* 0, or HK_OP_ASYNC_START/UPDATE/DONE for sugar */
  size_t op_base;             /* operands are P->opstack.v[op_base..] */
  int n_operands;
  hk_attrs a;
  bool has_attrs;
  hk_i64s dims;
  bool has_dims;
  const hk_sharding *sharding;
  hk_computation *to_apply, *condition, *body, *select, *scatter, *true_c, *false_c;
  int n_list;                 /* branch_computations / called_computations / calls */
  hk_computation **list;
  bool list_is_branches;
  int n_raw, cap_raw;
  hk_raw_attr *raw;
  int n_ctrl, cap_ctrl;
  hk_instr **ctrl;
  const char *async_thread;
  const char *param_close_at; /* the ')' after a parameter number (errors) */
  /* attributes seen (required-attribute checks) */
  bool seen_dims, seen_index, seen_direction, seen_slice, seen_padding, seen_window;
  bool seen_dnums_dot, seen_dim_labels;
  const char *operand_layout_at;
  int n_operand_layouts;
} tx_pending;

/* attributes (parse_attrs.c) */
bool tx_parse_attr(tx_parser *P, tx_pending *pi, const char *name, size_t len,
                   const char *at);

bool tx_parse_sharding_value(tx_parser *P, const hk_sharding **out);
bool tx_parse_kv_list(tx_parser *P, int32_t *n_out, const hk_kv **out);
bool tx_parse_bool_list(tx_parser *P, int32_t *n, const bool **out);
/* `name=` at the cursor: the name, the cursor after '='. */
bool tx_attr_name(tx_parser *P, const char **s, size_t *l);
/* x-separated items of `per` integers joined by sep_inner (1x2, 0_0x1_1). */
bool tx_x_list(tx_parser *P, int64_t *vals, int *n, char sep_inner, int per, const char *what);

/* values newer XLA writes, checked and kept verbatim (newer_attrs.c) */
bool tx_check_origin(tx_parser *P);
/* sparsity_config= (sparsity) or block_scaling_config= of a convolution. */
bool tx_check_operand_configs(tx_parser *P, bool sparsity);
bool tx_check_recovery_table(tx_parser *P);
bool tx_check_debug_attributes(tx_parser *P);

/* attribute rules (attr_rules.c) */
bool tx_attr_allowed(hk_opcode op, bool async_sugar, const char *s, size_t len);
const char *tx_missing_required(const tx_pending *pi);
/* An outfeed written without outfeed_shape: XLA's CreateOutfeed takes its operand's. */
void tx_default_outfeed_shape(tx_parser *P, tx_pending *pi, const hk_shape *s);
int tx_opcode_arity(hk_opcode op);
/* XLA's CanInferShape: op's shape may be left out of the text. */
bool tx_can_infer_shape(hk_opcode op);

/* instructions (parse.c) */
bool tx_parse_computation_body(tx_parser *P, hk_computation *c, const char *open);
bool tx_computation_ref(tx_parser *P, hk_computation **out);
/* The instruction named s[0..len) in the computation being parsed, or NULL. */
hk_instr *tx_lookup(tx_parser *P, const char *s, size_t len);

/* Appends n bytes: the common case without a call. */
static inline void tx_put(hk_buf *b, const char *s, size_t n) {
  if (b->len + n + 1 <= b->cap) {
    __builtin_memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
  } else {
    hk_buf_put(b, s, n);
  }
}
static inline void tx_puts(hk_buf *b, const char *s) { tx_put(b, s, __builtin_strlen(s)); }

/* How many instructions ahead of a walk over a computation's list the
 * parts of an instruction a printer reads (name, operand list,
 * attributes) start loading. */
#define TX_PREFETCH_AHEAD 4

/* Starts loading those parts of x (its struct itself asked for steps before). */
static inline void tx_prefetch_parts(const hk_instr *x) {
  __builtin_prefetch(x->name);
  __builtin_prefetch(x->operands);
  if (x->attrs) __builtin_prefetch(x->attrs);
}

/* The stack frame tables (stack_frames.c): kept in the module's raw header
 * entries under a name no header attribute can have, printed after the
 * header line. */
#define TX_STACK_FRAMES_RAW "stack frames"
/* Appends a raw module header entry (parse.c). */
void tx_add_module_raw(tx_parser *P, const char *name, size_t nl, const char *v);
bool tx_at_stack_frames(tx_parser *P);
bool tx_parse_stack_frames(tx_parser *P);
void tx_print_stack_frames(const hk_module *m, hk_buf *out);

/* printing helpers (print.c) */
/* v in decimal (shape_text.c). */
void tx_put_i64(hk_buf *b, int64_t v);
void tx_print_i64s(hk_buf *b, const int64_t *v, int n);
void tx_print_escaped(hk_buf *b, const char *s);
/* A braced value XLA prints without quotes (balanced {...}). */
bool tx_lexes_as_dict(const char *v);

#pragma GCC visibility pop

#endif
