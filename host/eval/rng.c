/* rng.c - deterministic rng, rng-bit-generator and rng-get-and-update-state.
 * Values depend only on the seed, the instruction, how often this device
 * ran it and (for rng-bit-generator) the state operand; they are not
 * bit-identical to XLA's Philox/ThreeFry streams. */
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

hk_status *hk_op_rng_bit_generator(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                                   hk_value **out) {
  (void)d;
  const hk_shape *s = ins->shape;
  if (s->elem != HK_TUPLE || s->n_tuple != 2 || ops[0]->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "rng-bit-generator returns (state, bits)");
  const hk_value *state = ops[0];
  uint64_t seed = 0x5851F42D4C957F2DULL;
  for (int64_t i = 0; i < state->n; i++) seed = mix64(seed ^ (uint64_t)hk_value_get_i64(state, i));
  hk_value *ns = hk_value_clone(state);
  for (int64_t i = 0; i < ns->n; i++) hk_value_set_i64(ns, i, (int64_t)mix64(seed + (uint64_t)i + 1));
  hk_value *bits = hk_value_for_shape_dims(s->tuple[1]);
  int es = hk_esize(bits->elem);
  uint8_t *p = bits->data;
  for (int64_t i = 0; i < bits->n; i++) {
    uint64_t x = mix64(seed ^ mix64((uint64_t)i + 0x1234567));
    memcpy(p + i * es, &x, (size_t)(es <= 8 ? es : 8));
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
