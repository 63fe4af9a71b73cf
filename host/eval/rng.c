/* rng.c - rng (deterministic: the seed, the instruction and how often this
 * device ran it; not XLA's stream), rng-bit-generator (XLA's ThreeFry and
 * Philox, bit for bit) and rng-get-and-update-state. */
#include <math.h>

#include "eval/eval_internal.h"

static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static double unit(uint64_t r) { return (double)(r >> 11) * (1.0 / 9007199254740992.0); }

hk_status *hk_op_rng(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                     hk_value **out) {
  const char *dist = ins->attrs ? ins->attrs->rng_distribution : NULL;
  bool normal = dist && strstr(dist, "normal");
  if (ins->n_operands != 2 || ops[0]->n != 1 || ops[1]->n != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "rng takes two scalar operands");
  int64_t gidx = hk_eval_plan_instr_index(d->plan, ins);
  uint64_t s = mix64((d->opts ? d->opts->seed : 0) ^ mix64((uint64_t)gidx) ^
                     mix64((uint64_t)d->exec_count[gidx] * 7919 + 1));
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  bool fl = hk_prim_is_float((hk_prim)r->elem);
  if (normal && !fl) {
    hk_value_release(r);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "rng_normal needs a float type");
  }
  for (int64_t i = 0; i < r->n; i++) {
    uint64_t x = mix64(s + (uint64_t)i);
    if (normal) {
      double u1 = unit(x), u2 = unit(mix64(x));
      double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(2 * M_PI * u2);
      hk_value_set_f64(r, i, hk_value_get_f64(ops[0], 0) + z * hk_value_get_f64(ops[1], 0));
    } else if (fl) {
      double a = hk_value_get_f64(ops[0], 0), b = hk_value_get_f64(ops[1], 0);
      double v = a + (b - a) * unit(x);
      if (v >= b && b > a) v = nextafter(b, a);
      hk_value_set_f64(r, i, v);
    } else {
      int64_t a = hk_value_get_i64(ops[0], 0), b = hk_value_get_i64(ops[1], 0);
      uint64_t span = b > a ? (uint64_t)(b - a) : 1;
      hk_value_set_i64(r, i, a + (int64_t)(x % span));
    }
  }
  *out = r;
  return NULL;
}

/* ---- rng-bit-generator: XLA's RngBitGeneratorExpander, bit for bit -------- */

static uint32_t rotl32(uint32_t v, int d) { return (v << d) | (v >> (32 - d)); }

/* Threefry2x32 with 20 rounds (XLA's prng.cc). */
static void threefry2x32(uint32_t x[2], const uint32_t key[2]) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  x[0] += ks[0];
  x[1] += ks[1];
  for (int block = 0; block < 5; block++) {
    for (int r = 0; r < 4; r++) {
      x[0] += x[1];
      x[1] = rotl32(x[1], rot[(block % 2) * 4 + r]);
      x[1] ^= x[0];
    }
    x[0] += ks[(block + 1) % 3];
    x[1] += ks[(block + 2) % 3] + (uint32_t)(block + 1);
  }
}

/* Philox4x32 with 10 rounds (XLA's prng.cc). */
static void philox4x32(uint32_t x[4], const uint32_t key_in[2]) {
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)x[0] * 0xD2511F53u, p1 = (uint64_t)x[2] * 0xCD9E8D57u;
    uint32_t y[4] = {(uint32_t)(p1 >> 32) ^ x[1] ^ k0, (uint32_t)p1, (uint32_t)(p0 >> 32) ^ x[3] ^ k1,
                     (uint32_t)p0};
    memcpy(x, y, sizeof y);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

typedef enum { RBG_THREEFRY, RBG_PHILOX } rbg_algo;

/* The bit width the generator makes: 64 for 64-bit types, else 32 (narrower
 * types take the low bits of 32). */
static int rbg_width(int elem) { return hk_esize(elem) == 8 ? 64 : 32; }

static void rbg_store(hk_value *bits, int64_t i, uint64_t x) {
  int es = hk_esize(bits->elem);
  memcpy((uint8_t *)bits->data + i * es, &x, (size_t)(es <= 8 ? es : 8));   /* little endian: low bits */
}

/* Threefry: the counter is state[1] plus the row-major index in the
 * generated shape (32-bit results: the shape halved along its first even
 * dim, or its largest, each counter giving two neighbours there). */
static uint64_t rbg_threefry(hk_value *bits, uint64_t key, uint64_t counter0) {
  const uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
  int r = bits->rank;
  if (rbg_width(bits->elem) == 64) {
    for (int64_t i = 0; i < bits->n; i++) {
      uint64_t c = counter0 + (uint64_t)i;
      uint32_t x[2] = {(uint32_t)c, (uint32_t)(c >> 32)};
      threefry2x32(x, k);
      rbg_store(bits, i, (uint64_t)x[0] | (uint64_t)x[1] << 32);
    }
    return counter0 + (uint64_t)bits->n;
  }
  if (r == 0) {
    uint32_t x[2] = {(uint32_t)counter0, (uint32_t)(counter0 >> 32)};
    threefry2x32(x, k);
    rbg_store(bits, 0, x[0]);
    return counter0 + 1;
  }
  int split = -1;
  for (int d = 0; d < r && split < 0; d++)
    if (bits->dims[d] % 2 == 0) split = d;
  for (int d = 0; d < r && split < 0; d++)
    if (split < 0 || bits->dims[d] > bits->dims[split]) split = d;
  if (split < 0) split = 0;
  int64_t half[HK_MAX_RANK], idx[HK_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) half[d] = d == split ? (bits->dims[d] + 1) / 2 : bits->dims[d];
  int64_t half_n = hk_dims_product(r, half);
  for (int64_t i = 0; i < bits->n; i++) {
    int64_t lin = 0;
    for (int d = 0; d < r; d++) lin = lin * half[d] + (d == split ? idx[d] / 2 : idx[d]);
    uint64_t c = counter0 + (uint64_t)lin;
    uint32_t x[2] = {(uint32_t)c, (uint32_t)(c >> 32)};
    threefry2x32(x, k);
    rbg_store(bits, i, x[idx[split] % 2]);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < bits->dims[d]) break;
      idx[d] = 0;
    }
  }
  return counter0 + (uint64_t)half_n;
}

/* Philox: a 128-bit counter (lo, hi) advanced once per four 32-bit (two
 * 64-bit) results; returns the advanced counter through lo/hi. */
static void rbg_philox(hk_value *bits, uint64_t key, uint64_t *lo, uint64_t *hi) {
  const uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
  bool wide = rbg_width(bits->elem) == 64;
  int per = wide ? 2 : 4;
  int64_t nv = (bits->n + per - 1) / per;
  for (int64_t v = 0; v < nv; v++) {
    uint64_t l = *lo + (uint64_t)v, h = *hi + (l < *lo ? 1 : 0);
    uint32_t x[4] = {(uint32_t)l, (uint32_t)(l >> 32), (uint32_t)h, (uint32_t)(h >> 32)};
    philox4x32(x, k);
    for (int j = 0; j < per && v * per + j < bits->n; j++) {
      uint64_t out = wide ? ((uint64_t)x[2 * j] | (uint64_t)x[2 * j + 1] << 32) : x[j];
      rbg_store(bits, v * per + j, out);
    }
  }
  uint64_t l = *lo + (uint64_t)nv;
  *hi += l < *lo ? 1 : 0;
  *lo = l;
}

/* XLA's RngBitGeneratorExpander: state[0] is the key; threefry counts from
 * state[1]; philox's counter is (state[1], state[2]) for states of three or
 * more, else (state[1], state[0]) as XLA reverses a two-element state, and
 * only the counter's low word goes back.  rng_default is philox, the
 * algorithm XLA's CPU and GPU compilers expand it to.  XLA's verifier also
 * accepts an array result: the bits alone, the new state dropped. */
hk_status *hk_op_rng_bit_generator(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                   hk_value **out) {
  (void)d;
  const hk_shape *s = ins->shape;
  const hk_value *state = ops[0];
  bool tuple = s->elem == HK_TUPLE;
  if ((tuple && s->n_tuple != 2) || state->elem != HK_U64 || state->rank != 1 || state->n < 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT,
                         "rng-bit-generator takes a u64[>=2] state and returns (state, bits) "
                         "or bits");
  const hk_shape *bs = tuple ? s->tuple[1] : s;
  if (!hk_shape_is_array(bs) || bs->elem == HK_PRED || hk_prim_is_complex((hk_prim)bs->elem) ||
      hk_esize(bs->elem) > 8)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "rng-bit-generator cannot make bits of type %s",
                         hk_prim_name((hk_prim)bs->elem));
  const char *alg = ins->attrs ? ins->attrs->rng_algorithm : NULL;
  rbg_algo a = alg && strstr(alg, "three_fry") ? RBG_THREEFRY : RBG_PHILOX;
  const uint64_t *st = state->data;
  hk_value *ns = hk_value_clone(state), *bits = hk_value_for_shape_dims(bs);
  uint64_t *nst = ns->data;
  if (a == RBG_THREEFRY) {
    nst[1] = rbg_threefry(bits, st[0], st[1]);
  } else if (state->n >= 3) {
    uint64_t lo = st[1], hi = st[2];
    rbg_philox(bits, st[0], &lo, &hi);
    nst[1] = lo;
    nst[2] = hi;
  } else {
    uint64_t lo = st[1], hi = st[0];
    rbg_philox(bits, st[0], &lo, &hi);
    nst[1] = lo;
  }
  if (!tuple) {
    hk_value_release(ns);
    *out = bits;
    return NULL;
  }
  hk_value *e[2] = {ns, bits};
  *out = hk_value_new_tuple(2, e);
  return NULL;
}

hk_status *hk_op_rng_get_and_update_state(hk_device_ctx *d, const hk_instr *ins,
                                          hk_value *const *ops, hk_value **out) {
  (void)ops;
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  if (r->elem == HK_TUPLE || r->n < 1) {
    hk_value_release(r);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "expected an array result");
  }
  hk_value_set_i64(r, 0, (int64_t)d->rng_state);
  d->rng_state += (uint64_t)(ins->attrs ? ins->attrs->rng_delta : 0);
  *out = r;
  return NULL;
}
