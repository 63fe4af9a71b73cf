/* value.c - evaluator values: allocation, reference counts, element access. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "eval/eval_internal.h"

static _Thread_local hk_mem_counter *tl_mem;

void hk_eval_set_mem_counter(hk_mem_counter *c) { tl_mem = c; }

void hk_eval_mem_charge(int64_t bytes) {
  if (!tl_mem) return;
  tl_mem->live += bytes;
  if (tl_mem->live > tl_mem->peak) tl_mem->peak = tl_mem->live;
  if (tl_mem->limit && tl_mem->live > tl_mem->limit) tl_mem->over = true;
}

int64_t hk_eval_memory_budget(const hk_eval_options *opts, int64_t n_devices) {
  int64_t b = opts ? opts->max_live_bytes : 0;
  if (b < 0) return 0;
  if (b > 0) return b;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return (int64_t)pages * page / 2 / (n_devices > 0 ? n_devices : 1);
}

int64_t hk_dims_product(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  return n;
}

void hk_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

static hk_value *value_alloc(int rank) {
  hk_value *v = calloc(1, sizeof(hk_value) + (size_t)(rank ? rank : 1) * sizeof(int64_t));
  if (!v) hk_out_of_memory();
  v->dims = (int64_t *)(v + 1);
  v->refcount = 1;
  return v;
}

/* Scalars (the values comparators, reducers and map computations make per
 * element) live in one block with their data, recycled through a small
 * per-thread free list while an evaluation runs on the thread. */
typedef struct scalar_block {
  hk_value v;
  int64_t dims[1];
  _Alignas(16) uint8_t data[16];
} scalar_block;

enum { SCALAR_CACHE_MAX = 1024 };
static _Thread_local scalar_block *tl_free[SCALAR_CACHE_MAX];
static _Thread_local int tl_nfree;

static bool is_scalar_block(const hk_value *v) {
  return v->data == ((const scalar_block *)v)->data;
}

static hk_value *scalar_new(hk_prim elem) {
  scalar_block *b = tl_nfree ? tl_free[--tl_nfree] : malloc(sizeof(scalar_block));
  if (!b) hk_out_of_memory();
  memset(b, 0, sizeof *b);
  b->v.elem = (uint8_t)elem;
  b->v.refcount = 1;
  b->v.dims = b->dims;
  b->v.n = 1;
  b->v.nbytes = hk_esize(elem);
  b->v.data = b->data;
  hk_eval_mem_charge(b->v.nbytes);
  return &b->v;
}

static void scalar_free(hk_value *v) {
  hk_eval_mem_charge(-v->nbytes);
  if (tl_mem && tl_nfree < SCALAR_CACHE_MAX) tl_free[tl_nfree++] = (scalar_block *)v;
  else free(v);
}

void hk_eval_release_thread_cache(void) {
  while (tl_nfree) free(tl_free[--tl_nfree]);
}

hk_value *hk_value_new_array(hk_prim elem, int rank, const int64_t *dims) {
  if (rank == 0 && hk_esize(elem) <= 16) return scalar_new(elem);
  hk_value *v = value_alloc(rank);
  v->elem = (uint8_t)elem;
  v->rank = (uint8_t)rank;
  if (rank) memcpy(v->dims, dims, (size_t)rank * sizeof(int64_t));
  v->n = hk_dims_product(rank, dims);
  v->nbytes = v->n * hk_esize(elem);
  v->data = calloc(1, v->nbytes ? (size_t)v->nbytes : 1);
  if (!v->data) hk_out_of_memory();
  hk_eval_mem_charge(v->nbytes);
  return v;
}

hk_value *hk_value_new_tuple(int n, hk_value *const *elems) {
  hk_value *v = value_alloc(0);
  v->elem = HK_TUPLE;
  v->n_elems = n;
  v->elems = calloc(n ? (size_t)n : 1, sizeof(hk_value *));
  if (!v->elems) hk_out_of_memory();
  for (int i = 0; i < n; i++) v->elems[i] = elems[i];
  return v;
}

hk_value *hk_value_new_token(void) {
  hk_value *v = value_alloc(0);
  v->elem = HK_TOKEN;
  return v;
}

hk_value *hk_value_of_shape(const hk_shape *s) {
  if (s->elem == HK_TUPLE) {
    hk_value **e = calloc(s->n_tuple ? (size_t)s->n_tuple : 1, sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < s->n_tuple; i++) e[i] = hk_value_of_shape(s->tuple[i]);
    hk_value *t = hk_value_new_tuple(s->n_tuple, e);
    free(e);
    return t;
  }
  if (!hk_prim_is_array((hk_prim)s->elem)) return hk_value_new_token();
  return hk_value_new_array((hk_prim)s->elem, s->rank, s->dims);
}

hk_value *hk_value_for_shape_dims(const hk_shape *s) {
  return hk_value_new_array((hk_prim)s->elem, s->rank, s->dims);
}

hk_status *hk_value_from_literal(const hk_literal *l, hk_value **out) {
  const hk_shape *s = l->shape;
  if (s->elem == HK_TUPLE) {
    hk_value **e = calloc(l->n_elems ? (size_t)l->n_elems : 1, sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < l->n_elems; i++) {
      hk_status *st = hk_value_from_literal(l->elems[i], &e[i]);
      if (st) {
        for (int j = 0; j < i; j++) hk_value_release(e[j]);
        free(e);
        return st;
      }
    }
    *out = hk_value_new_tuple(l->n_elems, e);
    free(e);
    return NULL;
  }
  if (!hk_prim_is_array((hk_prim)s->elem)) {
    *out = hk_value_new_token();
    return NULL;
  }
  if (l->elided || !l->data)
    return hk_error(HK_UNIMPLEMENTED, "constant value is elided ({...}): cannot evaluate");
  hk_value *v = hk_value_new_array((hk_prim)s->elem, s->rank, s->dims);
  if (l->nbytes != v->nbytes) {
    hk_value_release(v);
    return hk_error(HK_INTERNAL, "literal holds %lld bytes, shape needs %lld",
                    (long long)l->nbytes, (long long)v->nbytes);
  }
  memcpy(v->data, l->data, (size_t)v->nbytes);
  *out = v;
  return NULL;
}

hk_value *hk_value_retain(hk_value *v) {
  if (v) __atomic_add_fetch(&v->refcount, 1, __ATOMIC_RELAXED);
  return v;
}

void hk_value_release(hk_value *v) {
  if (!v) return;
  if (__atomic_sub_fetch(&v->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (v->elem != HK_TUPLE && v->data && is_scalar_block(v)) {
    scalar_free(v);
    return;
  }
  for (int i = 0; i < v->n_elems; i++) hk_value_release(v->elems[i]);
  free(v->elems);
  if (v->data) hk_eval_mem_charge(-v->nbytes);
  free(v->data);
  free(v);
}

hk_value *hk_value_clone(const hk_value *v) {
  if (v->elem == HK_TUPLE) {
    hk_value **e = calloc(v->n_elems ? (size_t)v->n_elems : 1, sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < v->n_elems; i++) e[i] = hk_value_clone(v->elems[i]);
    hk_value *t = hk_value_new_tuple(v->n_elems, e);
    free(e);
    return t;
  }
  if (v->elem == HK_TOKEN || v->elem == HK_OPAQUE) return hk_value_new_token();
  hk_value *c = hk_value_new_array((hk_prim)v->elem, v->rank, v->dims);
  memcpy(c->data, v->data, (size_t)v->nbytes);
  return c;
}

/* ---- element access ----------------------------------------------------- */

double hk_round_to_type(hk_prim p, double x) {
  switch (p) {
    case HK_F32: return (float)x;
    case HK_F64: return x;
    case HK_F16: return hk_half_to_float(hk_float_to_half((float)x));
    case HK_BF16: return hk_bf16_to_float(hk_float_to_bf16((float)x));
    default:
      if (hk_prim_is_float(p)) return hk_small_float_decode(p, hk_small_float_encode(p, x));
      return x;
  }
}

int64_t hk_wrap_int(hk_prim p, int64_t x) {
  int bits = hk_prim_bits(p);
  if (p == HK_PRED) return x != 0;
  if (bits >= 64) return x;
  uint64_t mask = (UINT64_C(1) << bits) - 1;
  uint64_t u = (uint64_t)x & mask;
  if (hk_prim_is_signed_int(p) && (u >> (bits - 1)) & 1) u |= ~mask;
  return (int64_t)u;
}

double hk_value_get_f64(const hk_value *v, int64_t i) {
  const void *d = v->data;
  switch ((hk_prim)v->elem) {
    case HK_PRED: return ((const uint8_t *)d)[i] != 0;
    case HK_S2: case HK_S4: return (double)hk_wrap_int((hk_prim)v->elem, ((const int8_t *)d)[i]);
    case HK_S8: return ((const int8_t *)d)[i];
    case HK_S16: return ((const int16_t *)d)[i];
    case HK_S32: return ((const int32_t *)d)[i];
    case HK_S64: return (double)((const int64_t *)d)[i];
    case HK_U2: case HK_U4: return (double)hk_wrap_int((hk_prim)v->elem, ((const uint8_t *)d)[i]);
    case HK_U8: return ((const uint8_t *)d)[i];
    case HK_U16: return ((const uint16_t *)d)[i];
    case HK_U32: return ((const uint32_t *)d)[i];
    case HK_U64: return (double)((const uint64_t *)d)[i];
    case HK_F16: return hk_half_to_float(((const uint16_t *)d)[i]);
    case HK_BF16: return hk_bf16_to_float(((const uint16_t *)d)[i]);
    case HK_F32: return ((const float *)d)[i];
    case HK_F64: return ((const double *)d)[i];
    case HK_C64: return ((const float *)d)[2 * i];
    case HK_C128: return ((const double *)d)[2 * i];
    default:
      if (hk_prim_is_float((hk_prim)v->elem))
        return hk_small_float_decode((hk_prim)v->elem, ((const uint8_t *)d)[i]);
      return 0;
  }
}

static int64_t float_to_i64_sat(double x) {
  if (isnan(x)) return 0;
  if (x >= 9223372036854775807.0) return INT64_MAX;
  if (x <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)x;
}

/* x truncated toward zero and clamped to the range of integer type p. */
static int64_t saturate_to(hk_prim p, double x) {
  if (isnan(x)) return 0;
  int bits = hk_prim_bits(p);
  double lo, hi;
  if (hk_prim_is_signed_int(p)) {
    lo = -ldexp(1.0, bits - 1);
    hi = ldexp(1.0, bits - 1) - 1;
  } else {
    lo = 0;
    hi = ldexp(1.0, bits) - 1;
  }
  if (x <= lo) return bits >= 64 ? INT64_MIN : (int64_t)lo;
  if (x >= hi) return bits >= 64 ? INT64_MAX : (int64_t)hi;
  return (int64_t)x;
}

int64_t hk_value_get_i64(const hk_value *v, int64_t i) {
  const void *d = v->data;
  switch ((hk_prim)v->elem) {
    case HK_PRED: return ((const uint8_t *)d)[i] != 0;
    case HK_S2: case HK_S4: return hk_wrap_int((hk_prim)v->elem, ((const int8_t *)d)[i]);
    case HK_S8: return ((const int8_t *)d)[i];
    case HK_S16: return ((const int16_t *)d)[i];
    case HK_S32: return ((const int32_t *)d)[i];
    case HK_S64: return ((const int64_t *)d)[i];
    case HK_U2: case HK_U4: return hk_wrap_int((hk_prim)v->elem, ((const uint8_t *)d)[i]);
    case HK_U8: return ((const uint8_t *)d)[i];
    case HK_U16: return ((const uint16_t *)d)[i];
    case HK_U32: return ((const uint32_t *)d)[i];
    case HK_U64: return (int64_t)((const uint64_t *)d)[i];
    default: return float_to_i64_sat(hk_value_get_f64(v, i));
  }
}

void hk_value_set_i64(hk_value *v, int64_t i, int64_t x) {
  void *d = v->data;
  hk_prim p = (hk_prim)v->elem;
  switch (p) {
    case HK_PRED: ((uint8_t *)d)[i] = x != 0; return;
    case HK_S2: case HK_S4: case HK_S8: ((int8_t *)d)[i] = (int8_t)hk_wrap_int(p, x); return;
    case HK_U2: case HK_U4: case HK_U8: ((uint8_t *)d)[i] = (uint8_t)hk_wrap_int(p, x); return;
    case HK_S16: ((int16_t *)d)[i] = (int16_t)x; return;
    case HK_U16: ((uint16_t *)d)[i] = (uint16_t)x; return;
    case HK_S32: ((int32_t *)d)[i] = (int32_t)x; return;
    case HK_U32: ((uint32_t *)d)[i] = (uint32_t)x; return;
    case HK_S64: ((int64_t *)d)[i] = x; return;
    case HK_U64: ((uint64_t *)d)[i] = (uint64_t)x; return;
    default: hk_value_set_f64(v, i, (double)x); return;
  }
}

void hk_value_set_f64(hk_value *v, int64_t i, double x) {
  void *d = v->data;
  hk_prim p = (hk_prim)v->elem;
  switch (p) {
    case HK_F32: ((float *)d)[i] = (float)x; return;
    case HK_F64: ((double *)d)[i] = x; return;
    case HK_F16: ((uint16_t *)d)[i] = hk_float_to_half((float)x); return;
    case HK_BF16: ((uint16_t *)d)[i] = hk_float_to_bf16((float)x); return;
    case HK_C64: ((float *)d)[2 * i] = (float)x; ((float *)d)[2 * i + 1] = 0; return;
    case HK_C128: ((double *)d)[2 * i] = x; ((double *)d)[2 * i + 1] = 0; return;
    case HK_PRED: ((uint8_t *)d)[i] = x != 0; return;
    default:
      if (hk_prim_is_float(p)) {
        ((uint8_t *)d)[i] = hk_small_float_encode(p, x);
        return;
      }
      if (p == HK_U64) {
        uint64_t u = isnan(x) || x <= 0 ? 0 : x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)x;
        ((uint64_t *)d)[i] = u;
        return;
      }
      hk_value_set_i64(v, i, saturate_to(p, x));
  }
}

void hk_value_get_c(const hk_value *v, int64_t i, double *re, double *im) {
  if (v->elem == HK_C64) {
    *re = ((const float *)v->data)[2 * i];
    *im = ((const float *)v->data)[2 * i + 1];
  } else if (v->elem == HK_C128) {
    *re = ((const double *)v->data)[2 * i];
    *im = ((const double *)v->data)[2 * i + 1];
  } else {
    *re = hk_value_get_f64(v, i);
    *im = 0;
  }
}

void hk_value_set_c(hk_value *v, int64_t i, double re, double im) {
  if (v->elem == HK_C64) {
    ((float *)v->data)[2 * i] = (float)re;
    ((float *)v->data)[2 * i + 1] = (float)im;
  } else if (v->elem == HK_C128) {
    ((double *)v->data)[2 * i] = re;
    ((double *)v->data)[2 * i + 1] = im;
  } else {
    hk_value_set_f64(v, i, re);
  }
}

/* ---- shape queries -------------------------------------------------------- */

bool hk_value_matches_shape(const hk_value *v, const hk_shape *s) {
  if (s->elem == HK_TUPLE) {
    if (v->elem != HK_TUPLE || v->n_elems != s->n_tuple) return false;
    for (int i = 0; i < s->n_tuple; i++)
      if (!hk_value_matches_shape(v->elems[i], s->tuple[i])) return false;
    return true;
  }
  if (v->elem != s->elem) return false;
  if (!hk_prim_is_array((hk_prim)s->elem)) return true;
  if (v->rank != s->rank) return false;
  for (int i = 0; i < s->rank; i++)
    if (v->dims[i] != s->dims[i]) return false;
  return true;
}

static void shape_string(const hk_value *v, char **buf, size_t *len, size_t *cap) {
  char tmp[64];
#define PUT(s)                                                   \
  do {                                                           \
    size_t l_ = strlen(s);                                       \
    while (*len + l_ + 1 > *cap) {                               \
      *cap = *cap ? *cap * 2 : 64;                               \
      *buf = realloc(*buf, *cap);                                \
      if (!*buf) hk_out_of_memory();                             \
    }                                                            \
    memcpy(*buf + *len, s, l_ + 1);                              \
    *len += l_;                                                  \
  } while (0)
  if (v->elem == HK_TUPLE) {
    PUT("(");
    for (int i = 0; i < v->n_elems; i++) {
      if (i) PUT(", ");
      shape_string(v->elems[i], buf, len, cap);
    }
    PUT(")");
    return;
  }
  PUT(hk_prim_name((hk_prim)v->elem));
  if (!hk_prim_is_array((hk_prim)v->elem)) return;
  PUT("[");
  for (int i = 0; i < v->rank; i++) {
    snprintf(tmp, sizeof tmp, i ? ",%lld" : "%lld", (long long)v->dims[i]);
    PUT(tmp);
  }
  PUT("]");
#undef PUT
}

char *hk_value_shape_string(const hk_value *v) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  shape_string(v, &buf, &len, &cap);
  return buf;
}

int64_t hk_value_byte_size(const hk_value *v) {
  if (v->elem != HK_TUPLE) return v->nbytes;
  int64_t s = 0;
  for (int i = 0; i < v->n_elems; i++) s += hk_value_byte_size(v->elems[i]);
  return s;
}

int64_t hk_value_leaf_count(const hk_value *v) {
  if (v->elem != HK_TUPLE) return 1;
  int64_t s = 0;
  for (int i = 0; i < v->n_elems; i++) s += hk_value_leaf_count(v->elems[i]);
  return s;
}

const hk_value *hk_value_leaf(const hk_value *v, int64_t k) {
  if (v->elem != HK_TUPLE) return k == 0 ? v : NULL;
  for (int i = 0; i < v->n_elems; i++) {
    int64_t c = hk_value_leaf_count(v->elems[i]);
    if (k < c) return hk_value_leaf(v->elems[i], k);
    k -= c;
  }
  return NULL;
}

/* ---- deterministic random values -------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static void fill_random(hk_value *v, uint64_t *state) {
  hk_prim p = (hk_prim)v->elem;
  for (int64_t i = 0; i < v->n; i++) {
    uint64_t r = splitmix64(state);
    if (p == HK_PRED) {
      hk_value_set_i64(v, i, (int64_t)(r & 1));
    } else if (hk_prim_is_signed_int(p)) {
      int64_t lim = hk_prim_bits(p) <= 4 ? (1 << (hk_prim_bits(p) - 1)) - 1 : 8;
      hk_value_set_i64(v, i, (int64_t)(r % (uint64_t)(2 * lim + 1)) - lim);
    } else if (hk_prim_is_unsigned_int(p)) {
      int64_t lim = hk_prim_bits(p) <= 4 ? (1 << hk_prim_bits(p)) - 1 : 8;
      hk_value_set_i64(v, i, (int64_t)(r % (uint64_t)(lim + 1)));
    } else {
      double u = (double)(r >> 11) * (1.0 / 9007199254740992.0);
      double x = 2.0 * u - 1.0;
      if (hk_prim_is_complex(p)) {
        double u2 = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
        hk_value_set_c(v, i, x, 2.0 * u2 - 1.0);
      } else {
        hk_value_set_f64(v, i, x);
      }
    }
  }
}

static hk_value *random_of_shape(const hk_shape *s, uint64_t *state) {
  if (s->elem == HK_TUPLE) {
    hk_value **e = calloc(s->n_tuple ? (size_t)s->n_tuple : 1, sizeof(hk_value *));
    if (!e) hk_out_of_memory();
    for (int i = 0; i < s->n_tuple; i++) e[i] = random_of_shape(s->tuple[i], state);
    hk_value *t = hk_value_new_tuple(s->n_tuple, e);
    free(e);
    return t;
  }
  if (!hk_prim_is_array((hk_prim)s->elem)) return hk_value_new_token();
  hk_value *v = hk_value_new_array((hk_prim)s->elem, s->rank, s->dims);
  fill_random(v, state);
  return v;
}

hk_value *hk_value_random(const hk_shape *s, uint64_t seed, uint64_t stream) {
  uint64_t state = seed * UINT64_C(0x2545F4914F6CDD1D) ^ (stream + 1) * UINT64_C(0x9E3779B97F4A7C15);
  splitmix64(&state);
  return random_of_shape(s, &state);
}
