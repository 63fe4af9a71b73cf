/* types.c - primitive type and opcode name tables and their fast lookups. */
#include <pthread.h>
#include <string.h>

#include "hlokit/types.h"

typedef struct prim_info {
  const char *name;
  int bits;
  char kind;
} prim_info;

static const prim_info kPrims[HK_PRIM_COUNT] = {
#define HK_X_(e, n, b, k) {n, b, k},
    HK_PRIM_LIST(HK_X_)
#undef HK_X_
};

static const char *const kOpNames[HK_OPCODE_COUNT] = {
#define HK_X_(e, n) n,
    HK_OPCODE_LIST(HK_X_)
#undef HK_X_
};

/* ---- name -> value lookup: open-addressed tables built once ------------- */

#define OP_SLOTS 512    /* power of two, > 3x the opcode count */
#define PRIM_SLOTS 128  /* power of two, > 3x the type count */

static uint16_t op_slots[OP_SLOTS];     /* opcode + 1; 0 = empty */
static uint8_t prim_slots[PRIM_SLOTS];  /* prim + 1; 0 = empty */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static bool tables_built;

static uint32_t name_hash(const char *s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
  return h ^ (h >> 15);
}

static void build_tables_once(void);

/* Built when the library loads; lookups before that (other constructors)
 * fall back to pthread_once. */
__attribute__((constructor)) static void build_tables_at_load(void) {
  pthread_once(&tables_once, build_tables_once);
}

static inline void ensure_tables(void) {
  if (!__atomic_load_n(&tables_built, __ATOMIC_ACQUIRE))
    pthread_once(&tables_once, build_tables_once);
}

static void build_tables_once(void) {
  for (int op = 0; op < HK_OPCODE_COUNT; op++) {
    uint32_t h = name_hash(kOpNames[op], strlen(kOpNames[op]));
    while (op_slots[h & (OP_SLOTS - 1)]) h++;
    op_slots[h & (OP_SLOTS - 1)] = (uint16_t)(op + 1);
  }
  for (int p = 0; p < HK_PRIM_COUNT; p++) {
    uint32_t h = name_hash(kPrims[p].name, strlen(kPrims[p].name));
    while (prim_slots[h & (PRIM_SLOTS - 1)]) h++;
    prim_slots[h & (PRIM_SLOTS - 1)] = (uint8_t)(p + 1);
  }
  __atomic_store_n(&tables_built, true, __ATOMIC_RELEASE);
}

static bool name_is(const char *name, const char *s, size_t len) {
  return strncmp(name, s, len) == 0 && name[len] == 0;
}

hk_opcode hk_opcode_from_name(const char *s, size_t len) {
  ensure_tables();
  for (uint32_t h = name_hash(s, len);; h++) {
    int v = op_slots[h & (OP_SLOTS - 1)];
    if (!v) return HK_OPCODE_COUNT;
    if (name_is(kOpNames[v - 1], s, len)) return (hk_opcode)(v - 1);
  }
}

hk_prim hk_prim_from_name(const char *s, size_t len) {
  ensure_tables();
  for (uint32_t h = name_hash(s, len);; h++) {
    int v = prim_slots[h & (PRIM_SLOTS - 1)];
    if (!v) return HK_PRIM_INVALID;
    if (name_is(kPrims[v - 1].name, s, len)) return (hk_prim)(v - 1);
  }
}

/* ---- primitive types ------------------------------------------------------ */

static bool prim_valid(hk_prim p) { return (unsigned)p < HK_PRIM_COUNT; }

const char *hk_prim_name(hk_prim p) { return prim_valid(p) ? kPrims[p].name : "invalid"; }

int hk_prim_bits(hk_prim p) { return prim_valid(p) ? kPrims[p].bits : 0; }

int hk_prim_storage_bytes(hk_prim p) {
  if (!prim_valid(p) || !hk_prim_is_array(p)) return 0;
  int bits = kPrims[p].bits;
  return bits <= 8 ? 1 : bits / 8;
}

static char prim_kind(hk_prim p) { return prim_valid(p) ? kPrims[p].kind : 0; }

bool hk_prim_is_float(hk_prim p) { return prim_kind(p) == 'F'; }
bool hk_prim_is_complex(hk_prim p) { return prim_kind(p) == 'C'; }
bool hk_prim_is_signed_int(hk_prim p) { return prim_kind(p) == 'S'; }
bool hk_prim_is_unsigned_int(hk_prim p) { return prim_kind(p) == 'U'; }
bool hk_prim_is_integral(hk_prim p) {
  char k = prim_kind(p);
  return k == 'S' || k == 'U';
}
bool hk_prim_is_array(hk_prim p) {
  char k = prim_kind(p);
  return k == 'P' || k == 'S' || k == 'U' || k == 'F' || k == 'C';
}

/* ---- opcodes ---------------------------------------------------------------- */

const char *hk_opcode_name(hk_opcode op) {
  return (unsigned)op < HK_OPCODE_COUNT ? kOpNames[op] : "invalid";
}

bool hk_opcode_is_collective(hk_opcode op) {
  switch (op) {
    case HK_OP_ALL_REDUCE: case HK_OP_ALL_GATHER: case HK_OP_ALL_TO_ALL:
    case HK_OP_RAGGED_ALL_TO_ALL: case HK_OP_COLLECTIVE_PERMUTE:
    case HK_OP_COLLECTIVE_BROADCAST: case HK_OP_REDUCE_SCATTER:
    case HK_OP_ALL_REDUCE_START: case HK_OP_ALL_GATHER_START:
    case HK_OP_COLLECTIVE_PERMUTE_START:
      return true;
    default:
      return false;
  }
}

bool hk_opcode_is_elementwise(hk_opcode op) {
  switch (op) {
    /* unary */
    case HK_OP_ABS: case HK_OP_BITCAST_CONVERT: case HK_OP_CBRT:
    case HK_OP_CEIL: case HK_OP_CLZ: case HK_OP_CONVERT: case HK_OP_COPY:
    case HK_OP_COS: case HK_OP_ERF: case HK_OP_EXP: case HK_OP_EXPM1:
    case HK_OP_FLOOR: case HK_OP_IMAG: case HK_OP_IS_FINITE: case HK_OP_LOG:
    case HK_OP_LOG1P: case HK_OP_LOGISTIC: case HK_OP_NEGATE: case HK_OP_NOT:
    case HK_OP_POPCNT: case HK_OP_REAL: case HK_OP_REDUCE_PRECISION:
    case HK_OP_ROUND_NEAREST_AFZ: case HK_OP_ROUND_NEAREST_EVEN:
    case HK_OP_RSQRT: case HK_OP_SIGN: case HK_OP_SIN: case HK_OP_SQRT:
    case HK_OP_TAN: case HK_OP_TANH:
    /* binary */
    case HK_OP_ADD: case HK_OP_AND: case HK_OP_ATAN2: case HK_OP_COMPARE:
    case HK_OP_COMPLEX: case HK_OP_DIVIDE: case HK_OP_MAXIMUM:
    case HK_OP_MINIMUM: case HK_OP_MULTIPLY: case HK_OP_OR: case HK_OP_POWER:
    case HK_OP_REMAINDER: case HK_OP_SHIFT_LEFT:
    case HK_OP_SHIFT_RIGHT_ARITHMETIC: case HK_OP_SHIFT_RIGHT_LOGICAL:
    case HK_OP_STOCHASTIC_CONVERT: case HK_OP_SUBTRACT: case HK_OP_XOR:
    /* ternary */
    case HK_OP_CLAMP: case HK_OP_SELECT:
      return true;
    default:
      return false;
  }
}
