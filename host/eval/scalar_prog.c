/* scalar_prog.c - scalar computations (comparators, reducers, map bodies)
 * compiled once into flat register programs run without allocation.  Each
 * step's kernel is chosen at compile time for its op and element types
 * (from the bodies of elem_ops.h), so running a step dispatches on
 * nothing; types without a kernel run the elementwise per-element code. */
#include "eval/eval_internal.h"
#include "eval/elem_ops.h"

typedef enum sp_kind {
  SP_UNARY, SP_BINARY, SP_COMPARE, SP_SELECT, SP_CLAMP, SP_CONVERT, SP_BITCAST, SP_MOVE
} sp_kind;

typedef struct sp_step sp_step;
typedef void (*sp_fn)(uint64_t *r, const sp_step *s);

/* One step: r[dst] = op(r[a], r[b], r[c]) on registers. */
struct sp_step {
  sp_fn fn;                        /* the kernel */
  int32_t dst, a, b, c;
  uint16_t opcode;                 /* hk_opcode (unary, binary) */
  uint8_t kind;                    /* sp_kind */
  uint8_t dir, ctype;              /* compare */
  uint8_t pd, pa, pb, pc;          /* hk_prim of dst and operands */
};

/* An argument or result: its register, element type and storage bytes. */
typedef struct sp_port {
  int32_t reg;
  uint8_t prim, bytes;
} sp_port;

struct hk_scalar_prog {
  int32_t n_steps, n_args, n_results;
  uint64_t *regs;                  /* one element each, storage encoding, zero-padded */
  sp_step *steps;
  sp_port *args, *results;
};

/* ---- kernels ---------------------------------------------------------------
 * ld_T / st_T: register <-> the value hk_value_get_* / hk_value_set_* give
 * for an element of type T. */

static inline double ld_F32(uint64_t r) {
  uint32_t b = (uint32_t)r;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
static inline uint64_t st_F32(double x) {
  float f = (float)x;
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}
static inline double ld_F64(uint64_t r) {
  double f;
  memcpy(&f, &r, 8);
  return f;
}
static inline uint64_t st_F64(double x) {
  uint64_t b;
  memcpy(&b, &x, 8);
  return b;
}
#define INT_IO(T, CT, UT)                                                    \
  static inline int64_t ld_##T(uint64_t r) { return (int64_t)(CT)(UT)r; }   \
  static inline uint64_t st_##T(int64_t x) { return (UT)(CT)x; }
INT_IO(S8, int8_t, uint8_t)
INT_IO(S16, int16_t, uint16_t)
INT_IO(S32, int32_t, uint32_t)
INT_IO(S64, int64_t, uint64_t)
INT_IO(U8, uint8_t, uint8_t)
INT_IO(U16, uint16_t, uint16_t)
INT_IO(U32, uint32_t, uint32_t)
INT_IO(U64, uint64_t, uint64_t)
static inline int64_t ld_PRED(uint64_t r) { return (r & 0xff) != 0; }
static inline uint64_t st_PRED(int64_t x) { return x != 0; }

/* Per type T: binop_T, a binary op of elem_ops.h on raw registers (the
 * op a constant in the kernels below, so it folds); ordkey_T, the value
 * whose C comparison is hk_elem_compare's (IEEE for floats: false but for
 * NE when unordered) and for floats totkey_T, the total-order key. */
#define FLOAT_OPS(T)                                                                     \
  static inline uint64_t binop_##T(hk_opcode op, uint64_t x, uint64_t y) {              \
    bool ok = true;                                                                      \
    return st_##T(f_binary(op, ld_##T(x), ld_##T(y), &ok));                              \
  }                                                                                      \
  static void un_##T(uint64_t *r, const sp_step *s) {                                    \
    bool ok = true;                                                                      \
    r[s->dst] = st_##T(f_unary((hk_opcode)s->opcode, ld_##T(r[s->a]), &ok));             \
  }                                                                                      \
  static inline double ordkey_##T(uint64_t r) { return ld_##T(r); }                     \
  static inline uint64_t totkey_##T(uint64_t r) { return total_order_key(ld_##T(r)); }

/* Integer types of BITS bits; SGN: signed.  Unsigned values are masked to
 * their width as hk_elem_binary does; pred adds by or, multiplies by and. */
#define INT_OPS(T, BITS, SGN, KEY)                                                       \
  static inline uint64_t binop_##T(hk_opcode op, uint64_t rx, uint64_t ry) {            \
    bool ok = true;                                                                      \
    int64_t x = ld_##T(rx), y = ld_##T(ry);                                              \
    if (SGN) return st_##T(s_binary(op, x, y, BITS, &ok));                               \
    uint64_t m = BITS >= 64 ? UINT64_MAX : (UINT64_C(1) << (BITS & 63)) - 1;            \
    uint64_t ux = (uint64_t)x & m, uy = (uint64_t)y & m, v = u_binary(op, ux, uy, BITS, &ok); \
    if (BITS == 1 && (op == HK_OP_ADD || op == HK_OP_MULTIPLY)) v = op == HK_OP_ADD ? (ux | uy) : (ux & uy); \
    return st_##T((int64_t)(v & m));                                                     \
  }                                                                                      \
  static void un_##T(uint64_t *r, const sp_step *s) {                                    \
    bool ok = true;                                                                      \
    hk_opcode op = (hk_opcode)s->opcode;                                                 \
    int64_t x = ld_##T(r[s->a]);                                                         \
    if (op == HK_OP_CEIL || op == HK_OP_FLOOR || op == HK_OP_ROUND_NEAREST_AFZ ||        \
        op == HK_OP_ROUND_NEAREST_EVEN)                                                  \
      r[s->dst] = st_##T(x);                                                             \
    else                                                                                 \
      r[s->dst] = st_##T(int_unary(op, x, BITS, SGN, BITS == 1, &ok));                   \
  }                                                                                      \
  static inline KEY ordkey_##T(uint64_t r) { return (KEY)ld_##T(r); }

FLOAT_OPS(F32)
FLOAT_OPS(F64)
INT_OPS(S8, 8, true, int64_t)
INT_OPS(S16, 16, true, int64_t)
INT_OPS(S32, 32, true, int64_t)
INT_OPS(S64, 64, true, int64_t)
INT_OPS(U8, 8, false, uint64_t)
INT_OPS(U16, 16, false, uint64_t)
INT_OPS(U32, 32, false, uint64_t)
INT_OPS(U64, 64, false, uint64_t)
INT_OPS(PRED, 1, false, uint64_t)

#define ALL_TYPES(X, A) X(F32, A) X(F64, A) X(S8, A) X(S16, A) X(S32, A) X(S64, A) X(U8, A) X(U16, A) \
  X(U32, A) X(U64, A) X(PRED, A)
/* The types with kernels, in the order of the tables below. */
typedef enum { TI_F32, TI_F64, TI_S8, TI_S16, TI_S32, TI_S64, TI_U8, TI_U16, TI_U32, TI_U64, TI_PRED, TI_N } sp_type;

/* Binary ops with a kernel per type; the rest take the op from the step. */
#define FAST_BINARY(X, T) X(T, ADD) X(T, SUBTRACT) X(T, MULTIPLY) X(T, MAXIMUM) X(T, MINIMUM) X(T, AND) \
  X(T, OR) X(T, XOR)
enum { FB_ADD, FB_SUBTRACT, FB_MULTIPLY, FB_MAXIMUM, FB_MINIMUM, FB_AND, FB_OR, FB_XOR, FB_N };
#define BIN_FN(T, OP)                                                                    \
  static void bin_##OP##_##T(uint64_t *r, const sp_step *s) {                            \
    r[s->dst] = binop_##T(HK_OP_##OP, r[s->a], r[s->b]);                                 \
  }
#define TYPE_OPS(T, _)                                                                   \
  FAST_BINARY(BIN_FN, T)                                                                 \
  static void bin_##T(uint64_t *r, const sp_step *s) {                                   \
    r[s->dst] = binop_##T((hk_opcode)s->opcode, r[s->a], r[s->b]);                       \
  }                                                                                      \
  static void clamp_##T(uint64_t *r, const sp_step *s) { /* min(max(lo, x), hi) */      \
    r[s->dst] = binop_##T(HK_OP_MINIMUM, binop_##T(HK_OP_MAXIMUM, r[s->a], r[s->b]), r[s->c]); \
  }
ALL_TYPES(TYPE_OPS, _)

/* Compares, one kernel per direction (hk_cmp_dir order, from EQ). */
#define DIRS(X, T, K) X(T, K, EQ, ==) X(T, K, NE, !=) X(T, K, LT, <) X(T, K, LE, <=) X(T, K, GT, >) X(T, K, GE, >=)
#define CMP_FN(T, K, D, OP)                                                              \
  static void K##_##D##_##T(uint64_t *r, const sp_step *s) {                             \
    r[s->dst] = K##key_##T(r[s->a]) OP K##key_##T(r[s->b]);                              \
  }
#define CMP_ENTRY(T, K, D, OP) K##_##D##_##T,
#define ORD_CMPS(T, _) DIRS(CMP_FN, T, ord)
ALL_TYPES(ORD_CMPS, _)
DIRS(CMP_FN, F32, tot)
DIRS(CMP_FN, F64, tot)

#define ROW(T, K) {DIRS(CMP_ENTRY, T, K)},
static const sp_fn ord_cmp_fns[TI_N][6] = {ALL_TYPES(ROW, ord)};
static const sp_fn tot_cmp_fns[2][6] = {ROW(F32, tot) ROW(F64, tot)};
#define ONE_ENTRY(T, NAME) NAME##_##T,
static const sp_fn bin_fns[TI_N] = {ALL_TYPES(ONE_ENTRY, bin)};
static const sp_fn un_fns[TI_N] = {ALL_TYPES(ONE_ENTRY, un)};
static const sp_fn clamp_fns[TI_N] = {ALL_TYPES(ONE_ENTRY, clamp)};
#define BIN_ENTRY(T, OP) bin_##OP##_##T,
#define BIN_ROW(T, _) {FAST_BINARY(BIN_ENTRY, T)},
static const sp_fn bin_op_fns[TI_N][FB_N] = {ALL_TYPES(BIN_ROW, _)};

static int fast_binary_index(hk_opcode op) {
  switch (op) {
    case HK_OP_ADD: return FB_ADD;
    case HK_OP_SUBTRACT: return FB_SUBTRACT;
    case HK_OP_MULTIPLY: return FB_MULTIPLY;
    case HK_OP_MAXIMUM: return FB_MAXIMUM;
    case HK_OP_MINIMUM: return FB_MINIMUM;
    case HK_OP_AND: return FB_AND;
    case HK_OP_OR: return FB_OR;
    case HK_OP_XOR: return FB_XOR;
    default: return -1;
  }
}

static int type_index(hk_prim p) {
  switch (p) {
    case HK_F32: return TI_F32;
    case HK_F64: return TI_F64;
    case HK_S8: return TI_S8;
    case HK_S16: return TI_S16;
    case HK_S32: return TI_S32;
    case HK_S64: return TI_S64;
    case HK_U8: return TI_U8;
    case HK_U16: return TI_U16;
    case HK_U32: return TI_U32;
    case HK_U64: return TI_U64;
    case HK_PRED: return TI_PRED;
    default: return -1;
  }
}

static hk_value reg_view(uint64_t *r, int32_t k, uint8_t e) {
  return (hk_value){.elem = e, .rank = 0, .refcount = 1, .n = 1, .data = k >= 0 ? &r[k] : NULL,
                    .nbytes = hk_prim_storage_bytes((hk_prim)e)};
}

/* The elementwise per-element code on rank-0 views of the registers: the
 * kernel of types (and ops) without one of their own. */
static void k_generic(uint64_t *r, const sp_step *s) {
  hk_value d = reg_view(r, s->dst, s->pd), a = reg_view(r, s->a, s->pa), b = reg_view(r, s->b, s->pb),
           c = reg_view(r, s->c, s->pc);
  switch ((sp_kind)s->kind) {
    case SP_UNARY: hk_elem_unary((hk_opcode)s->opcode, &a, 0, &d); return;
    case SP_BINARY: hk_elem_binary((hk_opcode)s->opcode, &a, 0, &b, 0, &d, 0); return;
    case SP_COMPARE: hk_elem_compare((hk_cmp_dir)s->dir, (hk_cmp_type)s->ctype, &a, 0, &b, 0, &d, 0); return;
    case SP_CLAMP:
      hk_elem_binary(HK_OP_MAXIMUM, &a, 0, &b, 0, &d, 0);
      hk_elem_binary(HK_OP_MINIMUM, &d, 0, &c, 0, &d, 0);
      return;
    case SP_CONVERT: hk_elem_convert(&a, 0, &d, 0); return;
    case SP_SELECT: case SP_BITCAST: case SP_MOVE: return;   /* have kernels */
  }
}

/* Branch-free: a comparator's selects go either way at random. */
static void k_select(uint64_t *r, const sp_step *s) {
  uint64_t m = 0 - (uint64_t)((r[s->a] & 0xff) != 0);
  r[s->dst] = (r[s->b] & m) | (r[s->c] & ~m);
}

/* A compare's kernel: floats by their order (total or IEEE), signed
 * integers signed unless the comparison type is unsigned, the rest by
 * their unsigned value; hk_elem_compare's rules. */
static sp_fn compare_kernel(const sp_step *s, int t) {
  int d = s->dir - HK_CMP_EQ;
  if (d < 0 || d >= 6) return k_generic;
  if ((t == TI_F32 || t == TI_F64) && s->ctype == HK_CMPT_TOTALORDER) return tot_cmp_fns[t - TI_F32][d];
  if (s->ctype == HK_CMPT_UNSIGNED && t >= TI_S8 && t <= TI_S64) return ord_cmp_fns[t - TI_S8 + TI_U8][d];
  return ord_cmp_fns[t][d];
}

static sp_fn binary_kernel(const sp_step *s, int t) {
  int f = fast_binary_index((hk_opcode)s->opcode);
  return f >= 0 ? bin_op_fns[t][f] : bin_fns[t];
}

/* The kernel of step s: one for its op on its element types, else the
 * generic one. */
static sp_fn pick_kernel(const sp_step *s) {
  int t = type_index((hk_prim)s->pa);
  bool same = s->pd == s->pa;
  switch ((sp_kind)s->kind) {
    case SP_SELECT: return k_select;
    case SP_COMPARE: return t >= 0 && s->pb == s->pa ? compare_kernel(s, t) : k_generic;
    case SP_BINARY: return t >= 0 && same && s->pb == s->pa ? binary_kernel(s, t) : k_generic;
    case SP_CLAMP: return t >= 0 && same && s->pb == s->pa && s->pc == s->pa ? clamp_fns[t] : k_generic;
    case SP_UNARY: {
      hk_opcode op = (hk_opcode)s->opcode;
      bool fl = t == TI_F32 || t == TI_F64;
      if (t < 0 || !same || op == HK_OP_IS_FINITE || (fl && op == HK_OP_NOT)) return k_generic;
      return un_fns[t];
    }
    default: return k_generic;
  }
}

/* A scalar array shape (the only kind a program holds). */
static bool scalar_shape(const hk_shape *s) {
  return s && s->elem != HK_TUPLE && s->rank == 0 && hk_prim_is_array((hk_prim)s->elem) &&
         !hk_prim_is_complex((hk_prim)s->elem) && hk_prim_storage_bytes((hk_prim)s->elem) <= 8;
}

static bool unary_supported(hk_opcode op) {
  switch (op) {
    case HK_OP_ABS: case HK_OP_NEGATE: case HK_OP_NOT: case HK_OP_SIGN: case HK_OP_COPY:
    case HK_OP_CEIL: case HK_OP_FLOOR: case HK_OP_EXP: case HK_OP_EXPM1: case HK_OP_LOG:
    case HK_OP_LOG1P: case HK_OP_SQRT: case HK_OP_RSQRT: case HK_OP_TANH: case HK_OP_LOGISTIC:
    case HK_OP_IS_FINITE: case HK_OP_ROUND_NEAREST_AFZ: case HK_OP_ROUND_NEAREST_EVEN:
    case HK_OP_POPCNT: case HK_OP_CLZ: case HK_OP_COS: case HK_OP_SIN:
      return true;
    default: return false;
  }
}

static bool binary_supported(hk_opcode op) {
  switch (op) {
    case HK_OP_ADD: case HK_OP_SUBTRACT: case HK_OP_MULTIPLY: case HK_OP_DIVIDE:
    case HK_OP_REMAINDER: case HK_OP_MAXIMUM: case HK_OP_MINIMUM: case HK_OP_AND:
    case HK_OP_OR: case HK_OP_XOR: case HK_OP_POWER: case HK_OP_SHIFT_LEFT:
    case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL: case HK_OP_ATAN2:
      return true;
    default: return false;
  }
}

/* The step that computes ins from its operands' registers; false when the
 * program does not cover the op. */
static bool step_of(const hk_instr *ins, const int32_t *opr, sp_step *s) {
  hk_opcode op = (hk_opcode)ins->opcode;
  int n = ins->n_operands;
  *s = (sp_step){.opcode = (uint16_t)op, .a = n > 0 ? opr[0] : -1, .b = n > 1 ? opr[1] : -1,
                 .c = n > 2 ? opr[2] : -1};
  if (op == HK_OP_COMPARE && n == 2 && ins->attrs && ins->attrs->cmp_dir != HK_CMP_NONE) {
    s->kind = SP_COMPARE;
    s->dir = (uint8_t)ins->attrs->cmp_dir;
    s->ctype = (uint8_t)ins->attrs->cmp_type;
  } else if (op == HK_OP_SELECT && n == 3) {
    s->kind = SP_SELECT;
  } else if (op == HK_OP_CLAMP && n == 3) {
    s->kind = SP_CLAMP;
  } else if (op == HK_OP_CONVERT && n == 1) {
    s->kind = SP_CONVERT;
  } else if (op == HK_OP_BITCAST_CONVERT && n == 1) {
    s->kind = SP_BITCAST;
  } else if ((op == HK_OP_COPY || op == HK_OP_BITCAST || op == HK_OP_RESHAPE) && n == 1) {
    s->kind = SP_MOVE;
  } else if (n == 1 && unary_supported(op)) {
    s->kind = SP_UNARY;
  } else if (n == 2 && binary_supported(op)) {
    s->kind = SP_BINARY;
  } else {
    return false;
  }
  return true;
}

/* The index of instruction x in the build order (a linear search: scalar
 * computations are small). */
static int32_t index_of(hk_instr *const *order, int64_t n, const hk_instr *x) {
  for (int64_t k = 0; k < n; k++)
    if (order[k] == x) return (int32_t)k;
  return -1;
}

/* What a program is built from: instructions in an order where operands
 * come first, the parameter instructions (by argument number) and the
 * result instructions.  A tuple is allowed only as `tuple_root`.  While
 * building, reg[k] is the register of instruction k: k itself, or the
 * register of its operand for a move (copy, bitcast, reshape, a
 * same-size bitcast-convert), which needs no step. */
typedef struct build_spec {
  hk_instr *const *order;
  int64_t n;
  const hk_instr *const *params;
  int n_params;
  const hk_instr *const *results;
  int n_results;
  const hk_instr *tuple_root;
  int32_t *reg;
} build_spec;

static bool load_constant(hk_scalar_prog *p, const hk_instr *ins, int32_t r) {
  hk_value *v = NULL;
  if (!ins->attrs || !ins->attrs->literal) return false;
  hk_status *st = hk_value_from_literal(ins->attrs->literal, &v);
  if (st) {
    hk_status_free(st);
    return false;
  }
  bool ok = v->elem == ins->shape->elem && v->n == 1;
  if (ok) memcpy(&p->regs[r], v->data, (size_t)hk_esize(v->elem));
  hk_value_release(v);
  return ok;
}

static bool compile_instr(hk_scalar_prog *p, const build_spec *b, int64_t k) {
  const hk_instr *ins = b->order[k];
  int32_t *reg = b->reg;
  reg[k] = (int32_t)k;
  if (ins->opcode == HK_OP_TUPLE) return ins == b->tuple_root;
  if (!scalar_shape(ins->shape)) return false;
  if (ins->opcode == HK_OP_PARAMETER) return true;
  if (ins->opcode == HK_OP_CONSTANT) return load_constant(p, ins, (int32_t)k);
  int32_t opi[3], opr[3];
  if (ins->n_operands > 3) return false;
  for (int j = 0; j < ins->n_operands; j++) {
    if ((opi[j] = index_of(b->order, b->n, ins->operands[j])) < 0 || b->order[opi[j]]->opcode == HK_OP_TUPLE)
      return false;
    opr[j] = reg[opi[j]];
  }
  sp_step s;
  if (!step_of(ins, opr, &s)) return false;
  uint8_t *prims[3] = {&s.pa, &s.pb, &s.pc};
  for (int j = 0; j < ins->n_operands; j++) *prims[j] = (uint8_t)b->order[opi[j]]->shape->elem;
  s.pd = (uint8_t)ins->shape->elem;
  if (s.kind == SP_BITCAST && hk_esize(s.pd) != hk_esize(s.pa)) return false;
  if (s.kind == SP_BITCAST || s.kind == SP_MOVE) {
    reg[k] = opr[0];
    return true;
  }
  s.dst = (int32_t)k;
  s.fn = pick_kernel(&s);
  p->steps[p->n_steps++] = s;
  return true;
}

static sp_port port_of(int32_t reg, const hk_instr *x) {
  return (sp_port){reg, (uint8_t)x->shape->elem, (uint8_t)hk_esize(x->shape->elem)};
}

/* Argument k is written straight into its parameter's register. */
static bool bind_params(hk_scalar_prog *p, const build_spec *b) {
  p->n_args = b->n_params;
  for (int32_t k = 0; k < b->n_params; k++) {
    const hk_instr *x = b->params[k];
    int32_t i = x ? index_of(b->order, b->n, x) : -1;
    if (i < 0 || !scalar_shape(x->shape)) return false;
    p->args[k] = port_of(b->reg[i], x);
  }
  return true;
}

static bool bind_results(hk_scalar_prog *p, const build_spec *b) {
  p->n_results = b->n_results;
  for (int k = 0; k < b->n_results; k++) {
    const hk_instr *x = b->results[k];
    int32_t i = index_of(b->order, b->n, x);
    if (i < 0 || x->opcode == HK_OP_TUPLE) return false;
    p->results[k] = port_of(b->reg[i], x);
  }
  return true;
}

static void *zalloc(size_t n, size_t size) {
  void *q = calloc(n ? n : 1, size);
  if (!q) hk_out_of_memory();
  return q;
}

static hk_scalar_prog *build(build_spec *b) {
  if (b->n >= 4096) return NULL;
  hk_scalar_prog *p = zalloc(1, sizeof *p);
  size_t nr = (size_t)b->n;
  p->regs = zalloc(nr, sizeof(uint64_t));
  p->steps = zalloc(nr, sizeof(sp_step));
  p->args = zalloc((size_t)b->n_params, sizeof(sp_port));
  p->results = zalloc((size_t)b->n_results, sizeof(sp_port));
  b->reg = zalloc(nr, sizeof(int32_t));
  bool ok = true;
  for (int64_t k = 0; k < b->n && ok; k++) ok = compile_instr(p, b, k);
  if (ok) ok = bind_params(p, b) && bind_results(p, b);
  free(b->reg);
  if (!ok) {
    hk_scalar_prog_free(p);
    return NULL;
  }
  return p;
}

hk_scalar_prog *hk_scalar_prog_compile(const hk_computation *c) {
  if (!c || !c->root) return NULL;
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(c, &n);
  if (!order) return NULL;
  const hk_instr *root = c->root;
  bool tuple = root->opcode == HK_OP_TUPLE;
  build_spec b = {order, n, (const hk_instr *const *)c->params, c->n_params,
                  tuple ? (const hk_instr *const *)root->operands : &root, tuple ? root->n_operands : 1,
                  tuple ? root : NULL, NULL};
  hk_scalar_prog *p = build(&b);
  free(order);
  return p;
}

/* ---- key comparators ------------------------------------------------------------ */

/* The parameter number that x depends on when it depends on exactly one
 * (-1: none, -2: several). */
static int only_param(const hk_instr *x, int depth) {
  if (depth > 64) return -2;
  if (x->opcode == HK_OP_PARAMETER) return (int)hk_instr_parameter_number(x);
  int found = -1;
  for (int j = 0; j < x->n_operands; j++) {
    int q = only_param(x->operands[j], depth + 1);
    if (q == -2 || (q >= 0 && found >= 0 && q != found)) return -2;
    if (q >= 0) found = q;
  }
  return found;
}

/* Constants a and b hold the same bytes (their shapes are equal). */
static bool same_literal(const hk_instr *a, const hk_instr *b) {
  const hk_literal *la = a->attrs ? a->attrs->literal : NULL, *lb = b->attrs ? b->attrs->literal : NULL;
  return la && lb && la->data && lb->data && !la->elided && !lb->elided && la->nbytes == lb->nbytes &&
         !memcmp(la->data, lb->data, (size_t)la->nbytes);
}

/* a (over parameter pa) and b (over pb) compute the same function. */
static bool same_function(const hk_instr *a, const hk_instr *b, int pa, int pb, int depth) {
  if (depth > 64 || a->opcode != b->opcode || a->n_operands != b->n_operands ||
      !hk_shape_equal(a->shape, b->shape))
    return false;
  if (a->opcode == HK_OP_PARAMETER)
    return hk_instr_parameter_number(a) == pa && hk_instr_parameter_number(b) == pb;
  if (a->opcode == HK_OP_CONSTANT) return same_literal(a, b);
  if (a->opcode == HK_OP_COMPARE &&
      (!a->attrs || !b->attrs || a->attrs->cmp_dir != b->attrs->cmp_dir || a->attrs->cmp_type != b->attrs->cmp_type))
    return false;
  for (int j = 0; j < a->n_operands; j++)
    if (!same_function(a->operands[j], b->operands[j], pa, pb, depth + 1)) return false;
  return true;
}

/* Post order of the instructions x depends on, x last. */
static void dag_order(const hk_instr *x, hk_instr **order, int64_t *n, int64_t cap) {
  for (int64_t k = 0; k < *n; k++)
    if (order[k] == x) return;
  for (int j = 0; j < x->n_operands; j++) dag_order(x->operands[j], order, n, cap);
  if (*n < cap) order[(*n)++] = (hk_instr *)x;
}

hk_scalar_prog *hk_scalar_prog_compile_key(const hk_computation *c, int *operand, hk_cmp_dir *dir,
                                           hk_cmp_type *type) {
  const hk_instr *r = c ? c->root : NULL;
  if (!r || r->opcode != HK_OP_COMPARE || r->n_operands != 2 || !r->attrs) return NULL;
  const hk_instr *a = r->operands[0], *b = r->operands[1];
  int pa = only_param(a, 0), pb = only_param(b, 0);
  if (pa < 0 || pa % 2 || pb != pa + 1 || !same_function(a, b, pa, pb, 0)) return NULL;
  int64_t cap = c->n_instrs + 1, n = 0;
  hk_instr **order = malloc((size_t)cap * sizeof(hk_instr *));
  if (!order) hk_out_of_memory();
  dag_order(a, order, &n, cap);
  const hk_instr *param = c->params[pa];
  build_spec bs = {order, n, &param, 1, &a, 1, NULL, NULL};
  hk_scalar_prog *p = build(&bs);
  free(order);
  if (!p) return NULL;
  *operand = pa / 2;
  *dir = (hk_cmp_dir)r->attrs->cmp_dir;
  *type = (hk_cmp_type)r->attrs->cmp_type;
  return p;
}

void hk_scalar_prog_free(hk_scalar_prog *p) {
  if (!p) return;
  free(p->regs);
  free(p->steps);
  free(p->args);
  free(p->results);
  free(p);
}

/* The element at q of `bytes` bytes, zero-padded to a register. */
static inline uint64_t load_elem(const uint8_t *q, int bytes) {
  switch (bytes) {
    case 1: return *q;
    case 2: { uint16_t x; memcpy(&x, q, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, q, 4); return x; }
    default: { uint64_t x; memcpy(&x, q, 8); return x; }
  }
}

static inline void store_elem(uint8_t *q, int bytes, uint64_t r) {
  switch (bytes) {
    case 1: *q = (uint8_t)r; return;
    case 2: { uint16_t x = (uint16_t)r; memcpy(q, &x, 2); return; }
    case 4: { uint32_t x = (uint32_t)r; memcpy(q, &x, 4); return; }
    default: memcpy(q, &r, 8); return;
  }
}

void hk_scalar_prog_set_arg(hk_scalar_prog *p, int k, const hk_value *v, int64_t i) {
  int es = p->args[k].bytes;
  p->regs[p->args[k].reg] = load_elem((const uint8_t *)v->data + i * es, es);
}

void hk_scalar_prog_run(hk_scalar_prog *p) {
  uint64_t *r = p->regs;
  const sp_step *s = p->steps, *end = s + p->n_steps;
  for (; s < end; s++) s->fn(r, s);
}

int hk_scalar_prog_n_results(const hk_scalar_prog *p) { return p->n_results; }

void hk_scalar_prog_get_result(const hk_scalar_prog *p, int k, hk_value *v, int64_t i) {
  int es = p->results[k].bytes;
  store_elem((uint8_t *)v->data + i * es, es, p->regs[p->results[k].reg]);
}

bool hk_scalar_prog_compare(hk_scalar_prog *p, hk_value *const *ops, int n, int64_t i, int64_t j) {
  for (int k = 0; k < n; k++) {
    const uint8_t *d = ops[k]->data;
    int es = p->args[2 * k].bytes;
    p->regs[p->args[2 * k].reg] = load_elem(d + i * es, es);
    p->regs[p->args[2 * k + 1].reg] = load_elem(d + j * es, es);
  }
  hk_scalar_prog_run(p);
  return (p->regs[p->results[0].reg] & 0xff) != 0;
}

hk_scalar_prog *hk_scalar_prog_compile_typed(const hk_computation *c, int n_args,
                                             const hk_prim *args, int n_results,
                                             const hk_prim *results) {
  if (!c || !c->root || c->n_params != n_args) return NULL;
  for (int k = 0; k < n_args; k++)
    if (!c->params[k] || c->params[k]->shape->elem != args[k]) return NULL;
  hk_scalar_prog *p = hk_scalar_prog_compile(c);
  if (!p) return NULL;
  bool ok = p->n_results == n_results;
  for (int k = 0; k < n_results && ok; k++) ok = p->results[k].prim == results[k];
  if (!ok) {
    hk_scalar_prog_free(p);
    return NULL;
  }
  return p;
}

void hk_scalar_prog_set_arg_raw(hk_scalar_prog *p, int k, uint64_t raw) { p->regs[p->args[k].reg] = raw; }

uint64_t hk_scalar_prog_result_raw(const hk_scalar_prog *p, int k) { return p->regs[p->results[k].reg]; }

hk_prim hk_scalar_prog_result_type(const hk_scalar_prog *p, int k) { return (hk_prim)p->results[k].prim; }

hk_prim hk_scalar_prog_arg_type(const hk_scalar_prog *p, int k) { return (hk_prim)p->args[k].prim; }
