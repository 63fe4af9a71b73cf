/* rng_expander.c - rng-expander: XLA's RngExpander.  Lowers `rng` (the
 * stateless-looking distribution op) to explicit random-bit generation:
 * rng-get-and-update-state supplies a u64[2] Philox state, rng-bit-generator
 * produces raw bits, and elementwise ops turn bits into the distribution:
 *   uniform float: mantissa bits under exponent 0 give [1,2), minus 1
 *   uniform int:   bits mod (b - a), plus a
 *   normal float:  Box-Muller over two uniforms, mu + sigma * z
 * The result carries the rng's sharding, so partitioning sees the same
 * annotation it would have seen on the rng. */
#include <math.h>
#include <string.h>

#include "stock.h"

typedef struct rng_builder {
  hk_computation *c;
  hk_instr *before;        /* new instructions go right before the rng */
  const hk_shape *shape;   /* the rng's shape */
} rng_builder;

static hk_module *mod(const rng_builder *b) { return b->c->module; }

static hk_instr *emit(rng_builder *b, hk_opcode op, const hk_shape *s, int n, hk_instr *a0,
                      hk_instr *a1) {
  hk_instr *ops[2] = {a0, a1};
  return hk_instr_new_before(b->before, op, s, n, ops, NULL);
}

static const hk_shape *dims_of(rng_builder *b, hk_prim elem) {
  return hk_shape_with_elem(mod(b), b->shape, elem);
}

/* Broadcast of a scalar to the rng's dims. */
static hk_instr *splat(rng_builder *b, hk_instr *scalar) {
  return hk_build_broadcast_scalar(b->c, b->before, scalar, b->shape);
}

/* A constant of type elem broadcast to the rng's dims: floats take f,
 * integers i (kept apart so 64-bit bit patterns stay exact). */
static hk_instr *splat_const(rng_builder *b, hk_prim elem, double f, int64_t i) {
  hk_instr *k = hk_prim_is_float(elem) ? hk_build_constant_f64(b->c, b->before, elem, f)
                                       : hk_build_constant_i64(b->c, b->before, elem, i);
  return splat(b, k);
}

/* (new state, bits) from a state: rng-bit-generator with the default
 * algorithm. */
static hk_instr *random_bits(rng_builder *b, hk_instr **state, hk_prim bits_type) {
  const hk_shape *parts[2] = {(*state)->shape, dims_of(b, bits_type)};
  const hk_shape *ts = hk_shape_tuple(mod(b), 2, parts);
  hk_instr *gen = emit(b, HK_OP_RNG_BIT_GENERATOR, ts, 1, *state, NULL);
  hk_instr_attrs(gen)->rng_algorithm = hk_intern_cstr(mod(b), "rng_default");
  hk_instr *next = emit(b, HK_OP_GET_TUPLE_ELEMENT, parts[0], 1, gen, NULL);
  hk_instr_attrs(next)->tuple_index = 0;
  hk_instr *bits = emit(b, HK_OP_GET_TUPLE_ELEMENT, parts[1], 1, gen, NULL);
  hk_instr_attrs(bits)->tuple_index = 1;
  *state = next;
  return bits;
}

/* Uniform [0, 1) in f32 or f64 from fresh bits. */
static hk_instr *unit_uniform(rng_builder *b, hk_instr **state, hk_prim ft) {
  bool wide = ft == HK_F64;
  hk_prim ut = wide ? HK_U64 : HK_U32;
  hk_instr *bits = random_bits(b, state, ut);
  hk_instr *mant = emit(b, HK_OP_SHIFT_RIGHT_LOGICAL, bits->shape, 2, bits,
                        splat_const(b, ut, 0, wide ? 12 : 9));
  hk_instr *one_bits = splat_const(b, ut, 0, wide ? 0x3FF0000000000000ll : 0x3F800000ll);
  hk_instr *in12 = emit(b, HK_OP_OR, bits->shape, 2, mant, one_bits);
  hk_instr *f = emit(b, HK_OP_BITCAST_CONVERT, dims_of(b, ft), 1, in12, NULL);
  return emit(b, HK_OP_SUBTRACT, f->shape, 2, f, splat_const(b, ft, 1.0, 0));
}

static hk_instr *to_type(rng_builder *b, hk_instr *x, hk_prim t) {
  if (x->shape->elem == t) return x;
  hk_instr *s = x->shape->rank == 0 && hk_shape_elements(b->shape) != 1
                    ? emit(b, HK_OP_CONVERT, hk_shape_scalar(mod(b), t), 1, x, NULL)
                    : emit(b, HK_OP_CONVERT, hk_shape_with_elem(mod(b), x->shape, t), 1, x, NULL);
  return s;
}

static hk_instr *expand_uniform_float(rng_builder *b, hk_instr *lo, hk_instr *hi, hk_instr **state) {
  hk_prim out = (hk_prim)b->shape->elem;
  hk_prim ft = out == HK_F64 ? HK_F64 : HK_F32;
  hk_instr *u = unit_uniform(b, state, ft);
  hk_instr *a = splat(b, to_type(b, lo, ft));
  hk_instr *span = splat(b, emit(b, HK_OP_SUBTRACT, hk_shape_scalar(mod(b), ft), 2,
                                 to_type(b, hi, ft), to_type(b, lo, ft)));
  hk_instr *r = emit(b, HK_OP_ADD, u->shape, 2, a, emit(b, HK_OP_MULTIPLY, u->shape, 2, u, span));
  return to_type(b, r, out);
}

static hk_instr *expand_uniform_int(rng_builder *b, hk_instr *lo, hk_instr *hi, hk_instr **state) {
  hk_prim out = (hk_prim)b->shape->elem;
  hk_prim ut = hk_prim_bits(out) > 32 ? HK_U64 : HK_U32;
  hk_instr *bits = random_bits(b, state, ut);
  hk_instr *range = emit(b, HK_OP_SUBTRACT, lo->shape, 2, hi, lo);
  hk_instr *urange = splat(b, to_type(b, range, ut));
  hk_instr *r = emit(b, HK_OP_REMAINDER, bits->shape, 2, bits, urange);
  return emit(b, HK_OP_ADD, b->shape, 2, to_type(b, r, out), splat(b, lo));
}

static hk_instr *expand_normal(rng_builder *b, hk_instr *mu, hk_instr *sigma, hk_instr **state) {
  hk_prim out = (hk_prim)b->shape->elem;
  hk_prim ft = out == HK_F64 ? HK_F64 : HK_F32;
  hk_instr *u1 = unit_uniform(b, state, ft);
  hk_instr *u2 = unit_uniform(b, state, ft);
  const hk_shape *s = u1->shape;
  /* 1 - u1 lies in (0, 1], so its log is finite. */
  hk_instr *pos = emit(b, HK_OP_SUBTRACT, s, 2, splat_const(b, ft, 1.0, 0), u1);
  hk_instr *radius = emit(b, HK_OP_SQRT, s, 1,
                          emit(b, HK_OP_MULTIPLY, s, 2, splat_const(b, ft, -2.0, 0),
                               emit(b, HK_OP_LOG, s, 1, pos, NULL)),
                          NULL);
  hk_instr *angle = emit(b, HK_OP_MULTIPLY, s, 2, splat_const(b, ft, 2.0 * M_PI, 0), u2);
  hk_instr *z = emit(b, HK_OP_MULTIPLY, s, 2, radius, emit(b, HK_OP_COS, s, 1, angle, NULL));
  hk_instr *r = emit(b, HK_OP_ADD, s, 2, splat(b, to_type(b, mu, ft)),
                     emit(b, HK_OP_MULTIPLY, s, 2, splat(b, to_type(b, sigma, ft)), z));
  return to_type(b, r, out);
}

static hk_status *expand_rng(hk_instr *rng, bool *changed) {
  const char *dist = rng->attrs ? rng->attrs->rng_distribution : NULL;
  hk_prim t = (hk_prim)rng->shape->elem;
  bool normal = dist && strcmp(dist, "rng_normal") == 0;
  if (!hk_shape_is_array(rng->shape) || rng->n_operands != 2)
    return hk_error(HK_INVALID_ARGUMENT, "rng-expander: %s: expected an array rng with 2 operands",
                    rng->name);
  if (normal && !hk_prim_is_float(t))
    return hk_error(HK_UNIMPLEMENTED, "rng-expander: %s: rng_normal of %s", rng->name,
                    hk_prim_name(t));
  if (!hk_prim_is_float(t) && !hk_prim_is_integral(t))
    return hk_error(HK_UNIMPLEMENTED, "rng-expander: %s: rng of %s", rng->name, hk_prim_name(t));
  rng_builder b = {rng->parent, rng, rng->shape};
  int64_t two = 2;
  const hk_shape *state_shape = hk_shape_array(mod(&b), HK_U64, 1, &two);
  hk_instr *state = emit(&b, HK_OP_RNG_GET_AND_UPDATE_STATE, state_shape, 0, NULL, NULL);
  hk_instr_attrs(state)->rng_delta = hk_shape_elements(rng->shape) * (normal ? 2 : 1);
  hk_instr *lo = rng->operands[0], *hi = rng->operands[1];
  hk_instr *r = normal ? expand_normal(&b, lo, hi, &state)
                : hk_prim_is_float(t) ? expand_uniform_float(&b, lo, hi, &state)
                                      : expand_uniform_int(&b, lo, hi, &state);
  hk_instr_set_sharding(r, rng->sharding);
  if (rng->attrs && rng->attrs->metadata) hk_instr_attrs(r)->metadata = rng->attrs->metadata;
  hk_instr_replace_all_uses(rng, r);
  hk_instr_remove_control_deps(rng);
  hk_status *st = hk_instr_remove(rng);
  if (st) hk_status_free(st);
  *changed = true;
  return NULL;
}

static hk_status *rng_expander_run(hk_pass *self, hk_module *m, const hk_exec_threads *threads,
                                   bool *changed) {
  (void)self;
  *changed = false;
  for (int32_t k = 0; k < m->n_computations; k++) {
    hk_computation *c = m->computations[k];
    if (!hk_exec_threads_include(threads, c)) continue;
    for (hk_instr *i = c->first, *next; i; i = next) {
      next = i->next;
      if (i->opcode == HK_OP_RNG) HK_TRY(expand_rng(i, changed));
    }
  }
  return NULL;
}

static const hk_pass_vtable rng_expander_vtable = {
    .size = sizeof(hk_pass_vtable), .name = "rng-expander",
    .run = rng_expander_run, .destroy = stock_pass_destroy};

static hk_pass *rng_expander_create(const hk_option_values *opts, hk_registry *reg,
                                    hk_status **err) {
  (void)opts;
  (void)reg;
  return hk_pass_alloc(&rng_expander_vtable, sizeof(stock_pass), err);
}

const hk_pass_desc stock_rng_expander_desc = {
    .size = sizeof(hk_pass_desc), .name = "rng-expander",
    .summary = "lowers rng to rng-get-and-update-state + rng-bit-generator",
    .options = NULL, .n_options = 0, .create = rng_expander_create};
