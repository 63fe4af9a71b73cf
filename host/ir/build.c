/* build.c - builders for the instructions rewrites create most often
 * (scalar constants and their broadcasts), so passes do not each spell out
 * shape, literal and attribute plumbing again. */
#include "irpriv.h"

static hk_instr *place(hk_computation *c, hk_instr *before, hk_opcode op, const hk_shape *s,
                       int n, hk_instr *const *ops, const char *name) {
  return before ? hk_instr_new_before(before, op, s, n, ops, name)
                : hk_instr_new(c, op, s, n, ops, name);
}

static hk_instr *constant_with(hk_computation *c, hk_instr *before, hk_prim t, hk_literal **lit) {
  hk_module *m = c->module;
  const hk_shape *s = hk_shape_scalar(m, t);
  hk_instr *k = place(c, before, HK_OP_CONSTANT, s, 0, NULL, "constant");
  *lit = hk_literal_new(m, s);
  hk_instr_attrs(k)->literal = *lit;
  return k;
}

hk_instr *hk_build_constant_i64(hk_computation *c, hk_instr *before, hk_prim t, int64_t v) {
  hk_literal *lit;
  hk_instr *k = constant_with(c, before, t, &lit);
  hk_literal_set_i64(lit, 0, v);
  return k;
}

hk_instr *hk_build_constant_f64(hk_computation *c, hk_instr *before, hk_prim t, double v) {
  hk_literal *lit;
  hk_instr *k = constant_with(c, before, t, &lit);
  if (hk_prim_is_float(t) || hk_prim_is_complex(t)) hk_literal_set_f64(lit, 0, v);
  else hk_literal_set_i64(lit, 0, (int64_t)v);
  return k;
}

hk_instr *hk_build_broadcast_scalar(hk_computation *c, hk_instr *before, hk_instr *scalar,
                                    const hk_shape *shape) {
  if (shape->rank == 0) return scalar;
  const hk_shape *s = hk_shape_with_elem(c->module, shape, (hk_prim)scalar->shape->elem);
  hk_instr *b = place(c, before, HK_OP_BROADCAST, s, 1, &scalar, NULL);
  hk_instr_set_dims(b, 0, NULL);
  return b;
}
