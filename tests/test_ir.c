/* test_ir.c - Check suite for host/ir: modules, names, operands/users, post order,
 * shapes, literals and small-float conversions, cloning. */
#include <math.h>

#include "testutil.h"
#include "ir/intern.h"
#include "ir/irpriv.h"
#include "eval/eval_internal.h"
#include <pthread.h>
#include <stdatomic.h>

static const int64_t kDims23[] = {2, 3};

static hk_computation *new_comp(hk_module *m, const char *name) {
  return hk_computation_new(m, name);
}

static hk_instr *binary(hk_computation *c, hk_opcode op, hk_instr *a, hk_instr *b) {
  hk_instr *ops[2] = {a, b};
  return hk_instr_new(c, op, a->shape, 2, ops, NULL);
}

static hk_instr *unary(hk_computation *c, hk_opcode op, hk_instr *a) {
  return hk_instr_new(c, op, a->shape, 1, &a, NULL);
}

static int user_index(const hk_instr *op, const hk_instr *user) {
  for (int k = 0; k < op->n_users; k++)
    if (op->users[k] == user) return k;
  return -1;
}

static int count_user(const hk_instr *op, const hk_instr *user) {
  int n = 0;
  for (int k = 0; k < op->n_users; k++) n += op->users[k] == user;
  return n;
}

/* ---- status, types, buf ---------------------------------------------------- */

START_TEST(status_messages) {
  hk_status *st = hk_error(HK_INVALID_ARGUMENT, "bad %d", 7);
  ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
  ck_assert_str_eq(st->message, "bad 7");
  hk_status_prefix(st, "file.hlo:%d", 3);
  ck_assert_str_eq(st->message, "file.hlo:3: bad 7");
  ck_assert_str_eq(hk_code_name(st->code), "INVALID_ARGUMENT");
  hk_status_free(st);
  ck_assert_ptr_null(hk_status_prefix(NULL, "x"));
}
END_TEST

static hk_status *ret_check_fails(int x) {
  HK_RET_CHECK(x > 1, "x was %d", x);
  return NULL;
}

START_TEST(status_ret_check) {
  ck_assert_ptr_null(ret_check_fails(2));
  hk_status *st = ret_check_fails(0);
  ck_assert_int_eq(st->code, HK_INTERNAL);
  ck_assert_ptr_nonnull(strstr(st->message, "RET_CHECK failure (x > 1)"));
  ck_assert_ptr_nonnull(strstr(st->message, "x was 0"));
  hk_status_free(st);
}
END_TEST

START_TEST(type_tables) {
  ck_assert_str_eq(hk_prim_name(HK_F32), "f32");
  ck_assert_str_eq(hk_prim_name((hk_prim)200), "invalid");
  ck_assert_int_eq(hk_prim_from_name("bf16", 4), HK_BF16);
  ck_assert_int_eq(hk_prim_from_name("f8e4m3fnuzX", 10), HK_F8E4M3FNUZ);
  ck_assert_int_eq(hk_prim_from_name("f8e4m3fnuz", 6), HK_F8E4M3);
  ck_assert_int_eq(hk_prim_from_name("f31", 3), HK_PRIM_INVALID);
  ck_assert_int_eq(hk_prim_from_name("", 0), HK_PRIM_INVALID);
  for (int p = 0; p < HK_PRIM_COUNT; p++) {
    const char *n = hk_prim_name((hk_prim)p);
    ck_assert_int_eq(hk_prim_from_name(n, strlen(n)), p);
  }
  for (int op = 0; op < HK_OPCODE_COUNT; op++) {
    const char *n = hk_opcode_name((hk_opcode)op);
    ck_assert_int_eq(hk_opcode_from_name(n, strlen(n)), op);
  }
  ck_assert_int_eq(hk_opcode_from_name("add-dependency", 3), HK_OP_ADD);
  ck_assert_int_eq(hk_opcode_from_name("addx", 4), HK_OPCODE_COUNT);
  ck_assert_str_eq(hk_opcode_name(HK_OP_CLZ), "count-leading-zeros");
  ck_assert_int_eq(hk_prim_storage_bytes(HK_S4), 1);
  ck_assert_int_eq(hk_prim_storage_bytes(HK_C128), 16);
  ck_assert_int_eq(hk_prim_storage_bytes(HK_BF16), 2);
  ck_assert_int_eq(hk_prim_storage_bytes(HK_TUPLE), 0);
  ck_assert_int_eq(hk_prim_bits(HK_F4E2M1FN), 4);
  ck_assert(hk_prim_is_float(HK_F8E8M0FNU));
  ck_assert(!hk_prim_is_float(HK_C64));
  ck_assert(hk_prim_is_complex(HK_C64));
  ck_assert(hk_prim_is_integral(HK_U2) && !hk_prim_is_integral(HK_PRED));
  ck_assert(hk_prim_is_signed_int(HK_S4) && hk_prim_is_unsigned_int(HK_U64));
  ck_assert(hk_prim_is_array(HK_PRED) && !hk_prim_is_array(HK_TOKEN));
  ck_assert(hk_opcode_is_elementwise(HK_OP_ADD));
  ck_assert(hk_opcode_is_elementwise(HK_OP_SELECT));
  ck_assert(!hk_opcode_is_elementwise(HK_OP_DOT));
}
END_TEST

START_TEST(buf_growth) {
  hk_buf b;
  hk_buf_init(&b);
  for (int k = 0; k < 1000; k++) hk_buf_printf(&b, "%d,", k % 10);
  ck_assert_uint_eq(b.len, 2000);
  ck_assert(strncmp(b.data, "0,1,2,", 6) == 0);
  char big[600];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  hk_buf_printf(&b, "[%s]", big);
  ck_assert_uint_eq(b.len, 2000 + 601);
  ck_assert_int_eq(b.data[b.len - 1], ']');
  ck_assert_int_eq(b.data[b.len], 0);
  hk_buf_puts(&b, "end");
  ck_assert_str_eq(b.data + b.len - 3, "end");
  hk_buf_free(&b);
  ck_assert_ptr_null(b.data);
}
END_TEST

/* The one "is d in this list": the first place, -1 when absent or empty. */
START_TEST(dims_in_list) {
  const int64_t v[] = {3, 0, 3, 7};
  ck_assert_int_eq(hk_i64_index(v, 4, 3), 0);
  ck_assert_int_eq(hk_i64_index(v, 4, 7), 3);
  ck_assert_int_eq(hk_i64_index(v, 4, 1), -1);
  ck_assert_int_eq(hk_i64_index(v, 3, 7), -1);   /* past n is not looked at */
  ck_assert_int_eq(hk_i64_index(NULL, 0, 0), -1);
  hk_i64s l = {2, v + 1};
  ck_assert(hk_i64s_has(l, 0) && hk_i64s_has(l, 3) && !hk_i64s_has(l, 7));
  ck_assert(!hk_i64s_has((hk_i64s){0, NULL}, 0));
}
END_TEST

/* ---- module, names ------------------------------------------------------------- */

START_TEST(module_basics) {
  hk_module *m = hk_module_new("m");
  ck_assert_str_eq(m->name, "m");
  ck_assert_int_eq(m->config.num_partitions, 1);
  ck_assert_int_eq(m->config.replica_count, 1);
  char *p = hk_alloc(m, 40);
  ck_assert_uint_eq((uintptr_t)p % 16, 0);
  for (int k = 0; k < 40; k++) ck_assert_int_eq(p[k], 0);
  const char *a = hk_intern(m, "hello world", 5);
  ck_assert_str_eq(a, "hello");
  ck_assert_ptr_eq(a, hk_intern_cstr(m, "hello"));
  ck_assert_ptr_ne(a, hk_intern_cstr(m, "hellO"));
  hk_computation *c = new_comp(m, "main");
  hk_computation *c2 = new_comp(m, "main");
  ck_assert_str_eq(c->name, "main");
  ck_assert_str_eq(c2->name, "main.1");
  ck_assert_ptr_eq(hk_module_find_computation(m, "main.1"), c2);
  ck_assert_ptr_null(hk_module_find_computation(m, "nope"));
  hk_module_set_entry(m, c2);
  ck_assert(c2->is_entry && m->entry == c2);
  hk_module_set_entry(m, c);
  ck_assert(!c2->is_entry && c->is_entry);
  ck_assert_int_eq(m->n_computations, 2);
  hk_module_remove_computation(m, c2);
  ck_assert_int_eq(m->n_computations, 1);
  ck_assert_ptr_null(hk_module_find_computation(m, "main.1"));
  ck_assert_int_eq(c->index, 0);
  ck_assert_uint_gt(hk_module_memory(m), 40);
  hk_module_free(m);
}
END_TEST

START_TEST(unique_names) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *a0 = binary(c, HK_OP_ADD, p, p);
  hk_instr *a1 = binary(c, HK_OP_ADD, p, p);
  hk_instr *a2 = binary(c, HK_OP_ADD, p, p);
  ck_assert_str_eq(a0->name, "add");
  ck_assert_str_eq(a1->name, "add.1");
  ck_assert_str_eq(a2->name, "add.2");
  /* An explicit numbered name registers its number. */
  hk_instr *x = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "add.7");
  ck_assert_str_eq(x->name, "add.7");
  hk_instr *y = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "add.7");
  ck_assert_str_eq(y->name, "add.3");
  hk_instr *z = binary(c, HK_OP_ADD, p, p);
  ck_assert_str_eq(z->name, "add.4");
  /* XLA's sanitizing: bad characters, "__" prefix, type names. */
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "a/b c")->name, "a_b_c");
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "__x")->name, "a_x");
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "f32")->name, "f32_");
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "9lives")->name, "_lives");
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "x.0")->name, "x.0");
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "x")->name, "x.1");
  /* Reserved names are handed to their first owner; removed names stay used. */
  const char *u = hk_module_unique_name(m, "add");
  ck_assert_str_eq(u, "add.5");
  ck_assert_str_eq(hk_module_unique_name(m, "add"), "add.6");
  hk_instr *w = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, u);
  ck_assert_str_eq(w->name, "add.5");
  ck_assert_ptr_eq(hk_computation_find_instr(c, "add.5"), w);
  ck_assert_ok(hk_instr_remove(w));
  ck_assert_ptr_null(hk_computation_find_instr(c, "add.5"));
  ck_assert_str_eq(hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "add.5")->name, "add.8");
  hk_instr_set_name(a0, "renamed");
  ck_assert_str_eq(a0->name, "renamed");
  ck_assert_ptr_eq(hk_computation_find_instr(c, "renamed"), a0);
  ck_assert_ptr_null(hk_computation_find_instr(c, "add"));
  ck_assert_str_eq(binary(c, HK_OP_ADD, p, p)->name, "add.9");
  /* Ids are sequential. */
  ck_assert_int_eq(a1->id, a0->id + 1);
  ck_assert_int_eq(m->next_id, z->id + 1 + 6 + 1 + 1 + 1);
  hk_module_free(m);
}
END_TEST

/* Names already canonical take a shortcut in the uniquer; these are the
 * borderline spellings it must still hand to the general rules. */
START_TEST(canonical_name_edges) {
  static const char *const cases[][2] = {
      {"y.01", "y.1"}, {"y.+2", "y._2"}, {"y.-3", "y.-3"}, {"z.", "z."}, {"w.12x", "w.12x"},
      {"v.123456789012345678", "v.123456789012345678"},
      {"v.1234567890123456789", "v.1234567890123456789"},
      {"q.0", "q.0"}, {"q", "q.1"}, {"q.00", "q.2"}, {"pred", "pred_"}, {"s32.1", "s32.1"},
      {"t-1.5", "t-1.5"}, {"u.7", "u.7"}, {"u.7", "u.0"}, {"f32.0", "f32.0"}, {"_a.3", "_a.3"},
      {"__xla_b", "__xla_b"}, {"Z9.2", "Z9.2"},
  };
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    hk_instr *i = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, cases[k][0]);
    ck_assert_str_eq(i->name, cases[k][1]);
    ck_assert_ptr_eq(hk_computation_find_instr(c, cases[k][1]), i);
  }
  hk_module_free(m);
}
END_TEST

/* Taken names get the next free id of their root: past a dense run of ids
 * at once, one by one through gaps. */
START_TEST(colliding_names_dense_and_sparse) {
  static const char *const cases[][2] = {
      {"r.0", "r.0"}, {"r.1", "r.1"}, {"r.2", "r.2"}, {"r.3", "r.3"}, {"r.1", "r.4"},
      {"r", "r.5"},   {"r.7", "r.7"}, {"r.5", "r.6"}, {"r.2", "r.8"}, {"s.0", "s.0"},
      {"s.2", "s.2"}, {"s.05", "s.5"}, {"s", "s.1"},  {"s.2", "s.3"}, {"s.0", "s.4"},
      {"s", "s.6"},   {"s.9", "s.9"}, {"s.1", "s.7"}, {"t", "t"},     {"t", "t.1"},
  };
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    hk_instr *i = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, cases[k][0]);
    ck_assert_str_eq(i->name, cases[k][1]);
  }
  hk_module_free(m);
}
END_TEST

START_TEST(name_suffixes) {
  hk_module *m = hk_module_new("m");
  ck_assert_str_eq(hk_name_with_suffix(m, "foo", "clone"), "foo.clone");
  ck_assert_str_eq(hk_name_with_suffix(m, "foo.clone", "clone"), "foo.clone2");
  ck_assert_str_eq(hk_name_with_suffix(m, "foo.clone2", "clone"), "foo.clone3");
  ck_assert_str_eq(hk_name_with_suffix(m, "foo.clone.1", "clone"), "foo.clone.1.clone");
  ck_assert_str_eq(hk_name_with_suffix(m, "foo.clonex", "clone"), "foo.clonex.clone");
  ck_assert_str_eq(hk_name_with_suffix(m, "a.clone.b.clone9", "clone"), "a.clone.b.clone10");
  hk_module_free(m);
}
END_TEST

START_TEST(many_unique_names) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *last = NULL;
  for (int k = 0; k < 20000; k++) last = unary(c, HK_OP_NEGATE, p);
  ck_assert_str_eq(last->name, "negate.19999");
  ck_assert_ptr_eq(hk_computation_find_instr(c, "negate.12345")->parent, c);
  ck_assert_int_eq(p->n_users, 20000);
  hk_module_free(m);
}
END_TEST

/* The text parser announces each name (hk_module_prefetch_instr_name)
 * before it creates the instruction from a copy; the announced hash is used
 * only for that very name, so a different or stale announcement changes
 * nothing and every name stays findable. */
START_TEST(announced_names) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  static const char *const cases[][3] = {
      /* announced, created from, gets */
      {"pre.5", "pre.5", "pre.5"}, {"pre.5", "pre.6", "pre.6"}, {"pre.5", "pre.5", "pre.0"},
      {"pre.8", "x/y", "x_y"},     {"q", "q", "q"},             {"q.9", "q", "q.1"},
      {"", "", "name"},            {"f32", "f32", "f32_"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char copy[64];
    snprintf(copy, sizeof copy, "%s", cases[k][1]);
    hk_module_prefetch_instr_name(m, cases[k][0], strlen(cases[k][0]));
    hk_instr *i = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, copy);
    ck_assert_str_eq(i->name, cases[k][2]);
    ck_assert_ptr_eq(hk_computation_find_instr(c, cases[k][2]), i);
  }
  /* an announcement left over in a module freed since is not used */
  hk_module_prefetch_instr_name(m, "stale.1", 7);
  hk_module_free(m);
  m = hk_module_new("m2");
  c = new_comp(m, "e");
  s = hk_shape_scalar(m, HK_F32);
  hk_instr *i = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, "stale.1");
  ck_assert_ptr_eq(hk_computation_find_instr(c, "stale.1"), i);
  /* a long name is not announced, and still found */
  char longname[200];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  hk_module_prefetch_instr_name(m, longname, strlen(longname));
  i = hk_instr_new(c, HK_OP_PARAMETER, s, 0, NULL, longname);
  ck_assert_ptr_eq(hk_computation_find_instr(c, longname), i);
  hk_module_free(m);
}
END_TEST

/* ---- operands and users -------------------------------------------------------------- */

START_TEST(operands_users) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_array(m, HK_F32, 2, kDims23);
  hk_instr *p0 = hk_test_param(c, 0, s, NULL), *p1 = hk_test_param(c, 1, s, NULL);
  ck_assert_str_eq(p0->name, "parameter");
  ck_assert_str_eq(p1->name, "parameter.1");
  hk_instr *sq = binary(c, HK_OP_MULTIPLY, p0, p0);
  ck_assert_int_eq(p0->n_users, 1);
  ck_assert_int_eq(count_user(p0, sq), 1);
  hk_instr *add = binary(c, HK_OP_ADD, sq, p1);
  hk_computation_set_root(c, add);
  ck_assert(hk_instr_is_root(add));
  hk_instr_set_operand(sq, 0, p1);   /* p0 still used by operand 1 */
  ck_assert_int_eq(count_user(p0, sq), 1);
  ck_assert_int_eq(count_user(p1, sq), 1);
  ck_assert_int_eq(user_index(p1, add), 0);
  ck_assert_int_eq(user_index(p1, sq), 1);
  hk_instr_set_operand(sq, 1, p1);   /* now p0 unused */
  ck_assert_int_eq(p0->n_users, 0);
  ck_assert_int_eq(count_user(p1, sq), 1);
  hk_instr_append_operand(add, p0);
  ck_assert_int_eq(add->n_operands, 3);
  ck_assert_ptr_eq(add->operands[2], p0);
  ck_assert_int_eq(count_user(p0, add), 1);
  /* replace_all_uses: users move over, root follows. */
  hk_instr *neg = unary(c, HK_OP_NEGATE, add);
  hk_instr *alt = binary(c, HK_OP_SUBTRACT, p0, p1);
  hk_instr_replace_all_uses(add, alt);
  ck_assert_int_eq(add->n_users, 0);
  ck_assert_ptr_eq(neg->operands[0], alt);
  ck_assert_ptr_eq(c->root, alt);
  ck_assert_int_eq(count_user(alt, neg), 1);
  /* a user of both old and new appears once */
  hk_instr *both = binary(c, HK_OP_ADD, sq, p0);
  hk_instr_replace_all_uses(sq, p0);
  ck_assert_ptr_eq(both->operands[0], p0);
  ck_assert_int_eq(count_user(p0, both), 1);
  /* a replacement that uses the old value keeps that use */
  hk_instr *wrap = unary(c, HK_OP_COPY, alt);
  hk_instr_replace_all_uses(alt, wrap);
  ck_assert_ptr_eq(wrap->operands[0], alt);
  ck_assert_int_eq(alt->n_users, 1);
  ck_assert_ptr_eq(c->root, wrap);
  ck_assert_ptr_eq(neg->operands[0], wrap);
  /* remove: refuses users and roots, then unlinks */
  hk_status *st = hk_instr_remove(alt);
  ck_assert_ptr_nonnull(st);
  ck_assert_int_eq(st->code, HK_FAILED_PRECONDITION);
  hk_status_free(st);
  st = hk_instr_remove(wrap);
  ck_assert_ptr_nonnull(st);
  hk_status_free(st);
  int64_t n_before = c->n_instrs;
  ck_assert_ok(hk_instr_remove(neg));
  ck_assert_int_eq(c->n_instrs, n_before - 1);
  ck_assert_int_eq(count_user(wrap, neg), 0);
  for (hk_instr *i = c->first; i; i = i->next) ck_assert_ptr_ne(i, neg);
  ck_assert_ok(hk_instr_remove(both));
  ck_assert_int_eq(count_user(p0, both), 0);
  /* XLA's RemoveUser: the last user takes the removed one's slot */
  hk_instr *q = hk_test_param(c, 2, s, "q");
  hk_instr *u1 = unary(c, HK_OP_NEGATE, q), *u2 = unary(c, HK_OP_NEGATE, q);
  hk_instr *u3 = unary(c, HK_OP_NEGATE, q);
  ck_assert_ok(hk_instr_remove(u1));
  ck_assert_int_eq(q->n_users, 2);
  ck_assert_ptr_eq(q->users[0], u3);
  ck_assert_ptr_eq(q->users[1], u2);
  hk_module_free(m);
}
END_TEST

START_TEST(instr_new_before_and_attrs) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_S32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *r = unary(c, HK_OP_NEGATE, p);
  hk_instr *b = hk_instr_new_before(r, HK_OP_ABS, s, 1, &p, "mid");
  ck_assert_ptr_eq(p->next, b);
  ck_assert_ptr_eq(b->next, r);
  ck_assert_ptr_eq(r->prev, b);
  ck_assert_int_eq(c->n_instrs, 3);
  hk_instr *first = hk_instr_new_before(p, HK_OP_CONSTANT, s, 0, NULL, NULL);
  ck_assert_ptr_eq(c->first, first);
  ck_assert_ptr_null(first->attrs);
  hk_attrs *a = hk_instr_attrs(first);
  ck_assert_ptr_eq(a, hk_instr_attrs(first));
  ck_assert_int_eq(a->channel_id, 0);
  ck_assert_int_eq(hk_instr_channel_id(first), 0);
  ck_assert_ptr_nonnull(hk_instr_metadata(first));
  ck_assert_ptr_null(hk_instr_metadata(first)->op_name);
  int64_t dims[] = {1, 0};
  hk_instr_set_dims(first, 2, dims);
  dims[0] = 9;
  ck_assert_int_eq(first->dims[0], 1);
  ck_assert_int_eq(c->n_params, 1);
  ck_assert_ptr_eq(c->params[0], p);
  hk_instr *p3 = hk_test_param(c, 3, s, "p3");
  ck_assert_int_eq(c->n_params, 4);
  ck_assert_ptr_eq(c->params[3], p3);
  ck_assert_ptr_null(c->params[1]);
  ck_assert_int_eq(hk_instr_parameter_number(p3), 3);
  hk_module_free(m);
}
END_TEST

/* Every graph edit moves hk_module_changes; shardings and names do not. */
#define CK_EDITS(stmt)                             \
  do {                                             \
    uint64_t before_ = hk_module_changes(m);       \
    stmt;                                          \
    ck_assert(hk_module_changes(m) > before_);     \
  } while (0)
#define CK_NO_EDIT(stmt)                           \
  do {                                             \
    uint64_t before_ = hk_module_changes(m);       \
    stmt;                                          \
    ck_assert(hk_module_changes(m) == before_);    \
  } while (0)
START_TEST(change_count) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = NULL, *d = NULL;
  CK_EDITS(c = new_comp(m, "e"));
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = NULL, *a = NULL, *b = NULL;
  CK_EDITS(p = hk_test_param(c, 0, s, "p"));
  CK_EDITS(a = unary(c, HK_OP_NEGATE, p));
  CK_EDITS(b = unary(c, HK_OP_EXP, a));
  CK_EDITS(hk_computation_set_root(c, b));
  CK_EDITS(hk_instr_set_operand(b, 0, p));
  CK_EDITS(hk_instr_replace_all_uses(p, a));
  CK_EDITS(hk_instr_append_operand(b, p));
  CK_EDITS(hk_instr_add_control_dep(a, b));
  CK_EDITS(hk_instr_remove_control_deps(b));
  CK_EDITS(hk_instr_attrs(a)->channel_id = 3);
  int64_t dims[1] = {0};
  CK_EDITS(hk_instr_set_dims(a, 1, dims));
  CK_EDITS(d = new_comp(m, "f"));
  CK_EDITS(hk_instr_set_called(a, 1, &d));
  CK_EDITS(hk_module_set_entry(m, c));
  CK_EDITS(hk_module_sort_computations(m));
  hk_instr *x = NULL;
  CK_EDITS(x = unary(c, HK_OP_COPY, p));
  CK_EDITS(ck_assert_ok(hk_instr_remove(x)));
  CK_EDITS(hk_module_remove_computation(m, d));
  CK_NO_EDIT(hk_instr_set_sharding(a, hk_sharding_replicated(m)));
  CK_NO_EDIT(hk_instr_set_name(a, "renamed"));
  CK_NO_EDIT(hk_instr_set_operand(b, 0, b->operands[0]));   /* the same operand */
  hk_module *copy = hk_module_clone(m);
  CK_NO_EDIT(hk_computation_set_root(copy->entry, copy->entry->first));   /* another module */
  hk_module_free(copy);
  hk_module_free(m);
}
END_TEST
#undef CK_EDITS
#undef CK_NO_EDIT

START_TEST(control_deps) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *a = unary(c, HK_OP_NEGATE, p), *b = unary(c, HK_OP_EXP, p);
  hk_instr_add_control_dep(a, b);
  hk_instr_add_control_dep(a, b);
  ck_assert_int_eq(a->attrs->n_control_succs, 1);
  ck_assert_int_eq(b->attrs->n_control_preds, 1);
  ck_assert_ptr_eq(b->attrs->control_preds[0], a);
  hk_instr_remove_control_deps(b);
  ck_assert_int_eq(a->attrs->n_control_succs, 0);
  ck_assert_int_eq(b->attrs->n_control_preds, 0);
  hk_instr_add_control_dep(b, a);
  ck_assert_ok(hk_instr_remove(b));
  ck_assert_int_eq(a->attrs->n_control_preds, 0);
  hk_module_free(m);
}
END_TEST

/* ---- post order ------------------------------------------------------------------------- */

static void assert_order(hk_computation *c, const char *const *names, int n) {
  int64_t got = 0;
  hk_instr **po = hk_computation_post_order(c, &got);
  ck_assert_int_eq(got, n);
  for (int k = 0; k < n; k++) ck_assert_str_eq(po[k]->name, names[k]);
  free(po);
}

START_TEST(post_order_diamond) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  /* list order a, b but root uses b first: XLA visits operands in order. */
  hk_instr *a = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "a");
  hk_instr *b = hk_instr_new(c, HK_OP_EXP, s, 1, &p, "b");
  hk_instr *ops[2] = {b, a};
  hk_instr *r = hk_instr_new(c, HK_OP_ADD, s, 2, ops, "r");
  hk_computation_set_root(c, r);
  static const char *const want[] = {"p", "b", "a", "r"};
  assert_order(c, want, 4);
  /* a control predecessor is visited before the operands */
  hk_instr_add_control_dep(a, r);
  static const char *const want2[] = {"p", "a", "b", "r"};
  assert_order(c, want2, 4);
  /* an unused instruction is a DFS root in list order */
  hk_instr *dead = hk_instr_new_before(a, HK_OP_COS, s, 1, &p, "dead");
  (void)dead;
  static const char *const want3[] = {"p", "dead", "a", "b", "r"};
  assert_order(c, want3, 5);
  /* the marks are cleared: a second call gives the same */
  assert_order(c, want3, 5);
  hk_module_free(m);
}
END_TEST

START_TEST(post_order_channels) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *ar1 = hk_instr_new(c, HK_OP_ALL_REDUCE, s, 1, &p, "ar1");
  hk_instr_attrs(ar1)->channel_id = 5;
  hk_instr *n = hk_instr_new(c, HK_OP_NEGATE, s, 1, &p, "n");
  hk_instr *ar2 = hk_instr_new(c, HK_OP_ALL_REDUCE, s, 1, &n, "ar2");
  hk_instr_attrs(ar2)->channel_id = 5;
  hk_instr *ops[2] = {ar2, ar1};
  hk_instr *r = hk_instr_new(c, HK_OP_TUPLE, s, 2, ops, "r");
  hk_computation_set_root(c, r);
  /* ar2 depends on ar1 through the shared channel. */
  static const char *const want[] = {"p", "n", "ar1", "ar2", "r"};
  assert_order(c, want, 5);
  ck_assert_int_eq(hk_module_next_channel_id(m), 6);
  hk_module_free(m);
}
END_TEST

START_TEST(post_order_channel_group) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *ar[3];
  const char *names[3] = {"ar1", "ar2", "ar3"};
  for (int k = 0; k < 3; k++) {
    ar[k] = hk_instr_new(c, HK_OP_ALL_REDUCE, s, 1, &p, names[k]);
    hk_instr_attrs(ar[k])->channel_id = 9;
  }
  hk_instr *other = hk_instr_new(c, HK_OP_ALL_REDUCE, s, 1, &p, "other");
  hk_instr_attrs(other)->channel_id = 4;
  hk_instr *ops[4] = {ar[2], other, ar[1], ar[0]};
  hk_computation_set_root(c, hk_instr_new(c, HK_OP_TUPLE, s, 4, ops, "r"));
  static const char *const want[] = {"p", "ar1", "ar2", "ar3", "other", "r"};
  assert_order(c, want, 6);
  for (int k = 0; k < 3; k++) hk_instr_attrs(ar[k])->channel_id = 10 + k;
  static const char *const want2[] = {"p", "ar3", "other", "ar2", "ar1", "r"};
  assert_order(c, want2, 6);
  hk_module_free(m);
}
END_TEST

START_TEST(post_order_long_chain) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *x = hk_test_param(c, 0, s, "p");
  enum { N = 100000 };
  for (int k = 0; k < N; k++) x = unary(c, HK_OP_NEGATE, x);
  hk_computation_set_root(c, x);
  int64_t n = 0;
  hk_instr **po = hk_computation_post_order(c, &n);
  ck_assert_int_eq(n, N + 1);
  ck_assert_str_eq(po[0]->name, "p");
  ck_assert_ptr_eq(po[N], x);
  for (int64_t k = 1; k <= N; k++) ck_assert_ptr_eq(po[k]->operands[0], po[k - 1]);
  free(po);
  hk_module_free(m);
}
END_TEST

/* ---- module-level: sort, channel ids, side effects ---------------------------------------- */

/* Counts the instructions a sort's walk visits and clears their shardings. */
typedef struct sort_visits {
  int n;
  const char *names[8];
} sort_visits;

static void note_and_clear(void *ctx, hk_instr *i) {
  sort_visits *v = ctx;
  if (v->n < 8) v->names[v->n] = i->name;
  v->n++;
  i->sharding = NULL;
}

START_TEST(sort_computations_visiting) {
  hk_module *m = hk_module_new("m");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_computation *entry = new_comp(m, "entry");
  hk_computation *add = new_comp(m, "add");
  hk_instr *p = hk_test_param(entry, 0, s, "p");
  hk_instr *r = hk_instr_new(entry, HK_OP_ALL_REDUCE, s, 1, &p, "r");
  hk_instr_set_called(r, 1, &add);
  hk_test_param(add, 0, s, "x");
  hk_module_set_entry(m, entry);
  p->sharding = r->sharding = hk_sharding_replicated(m);
  sort_visits v = {0};
  hk_module_sort_computations_visiting(m, note_and_clear, &v);
  /* sorted as hk_module_sort_computations sorts; every instruction seen
   * once, in the order before the sort */
  ck_assert_str_eq(m->computations[0]->name, "add");
  ck_assert_str_eq(m->computations[1]->name, "entry");
  ck_assert_int_eq(v.n, 3);
  ck_assert_str_eq(v.names[0], "p");
  ck_assert_str_eq(v.names[1], "r");
  ck_assert_str_eq(v.names[2], "x");
  ck_assert_ptr_null(p->sharding);
  ck_assert_ptr_null(r->sharding);
  /* one computation: nothing to sort, still visited */
  hk_module *one = hk_module_new("one");
  hk_computation *c = new_comp(one, "c");
  hk_test_param(c, 0, hk_shape_scalar(one, HK_F32), "q");
  sort_visits w = {0};
  hk_module_sort_computations_visiting(one, note_and_clear, &w);
  ck_assert_int_eq(w.n, 1);
  ck_assert_str_eq(w.names[0], "q");
  hk_module_free(one);
  hk_module_free(m);
}
END_TEST

START_TEST(sort_computations) {
  hk_module *m = hk_module_new("m");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_computation *entry = new_comp(m, "entry");
  hk_computation *body = new_comp(m, "body");
  hk_computation *cond = new_comp(m, "cond");
  hk_computation *add = new_comp(m, "add");
  new_comp(m, "unused");
  hk_instr *p = hk_test_param(entry, 0, s, "p");
  hk_instr *w = hk_instr_new(entry, HK_OP_WHILE, s, 1, &p, "w");
  hk_computation *wc[2] = {cond, body};
  hk_instr_set_called(w, 2, wc);
  hk_instr *bp = hk_test_param(body, 0, s, "bp");
  hk_instr *red = hk_instr_new(body, HK_OP_ALL_REDUCE, s, 1, &bp, "red");
  hk_instr_set_called(red, 1, &add);
  hk_test_param(cond, 0, s, "cp");
  hk_test_param(add, 0, s, "x");
  hk_module_set_entry(m, entry);
  hk_module_sort_computations(m);
  const char *want[] = {"cond", "add", "body", "entry", "unused"};
  ck_assert_int_eq(m->n_computations, 5);
  for (int k = 0; k < 5; k++) {
    ck_assert_str_eq(m->computations[k]->name, want[k]);
    ck_assert_int_eq(m->computations[k]->index, k);
  }
  ck_assert_int_eq(hk_module_next_channel_id(m), 1);
  hk_instr_attrs(red)->channel_id = 3;
  ck_assert_int_eq(hk_module_next_channel_id(m), 4);
  /* side effects */
  ck_assert(hk_instr_has_side_effect(red));
  ck_assert(hk_instr_has_side_effect(w));   /* through its body */
  m->config.use_spmd_partitioning = true;
  ck_assert(!hk_instr_has_side_effect(red));
  hk_instr_attrs(red)->constrain_layout = true;
  ck_assert(hk_instr_has_side_effect(red));
  ck_assert(!hk_instr_has_side_effect(p));
  hk_instr *cc = hk_instr_new(entry, HK_OP_CUSTOM_CALL, s, 0, NULL, "cc");
  ck_assert(!hk_instr_has_side_effect(cc));
  hk_instr_attrs(cc)->custom_call_has_side_effect = true;
  ck_assert(hk_instr_has_side_effect(cc));
  ck_assert(hk_instr_has_side_effect(hk_instr_new(entry, HK_OP_RNG, s, 0, NULL, NULL)));
  ck_assert(hk_instr_has_side_effect(hk_instr_new(entry, HK_OP_SEND, s, 0, NULL, NULL)));
  ck_assert(!hk_instr_has_side_effect(hk_instr_new(entry, HK_OP_AFTER_ALL, s, 0, NULL, NULL)));
  hk_module_free(m);
}
END_TEST

/* ---- shapes ------------------------------------------------------------------------------------ */

START_TEST(shape_interning) {
  hk_module *m = hk_module_new("m");
  const hk_shape *a = hk_shape_array(m, HK_F32, 2, kDims23);
  int64_t d2[] = {2, 3};
  const hk_shape *b = hk_shape_array(m, HK_F32, 2, d2);
  ck_assert_ptr_eq(a, b);
  ck_assert_int_eq(a->layout->n_minor_to_major, 2);
  ck_assert_int_eq(a->layout->minor_to_major[0], 1);
  ck_assert_int_eq(a->layout->minor_to_major[1], 0);
  const hk_shape *nl = hk_shape_array_no_layout(m, HK_F32, 2, kDims23);
  ck_assert_ptr_ne(a, nl);
  ck_assert_ptr_null(nl->layout);
  ck_assert(hk_shape_equal(a, nl));   /* no layout means the default one */
  const hk_shape *sc = hk_shape_scalar(m, HK_F32);
  ck_assert_int_eq(sc->rank, 0);
  ck_assert_ptr_nonnull(sc->layout);
  ck_assert_int_eq(sc->layout->n_minor_to_major, 0);
  const hk_shape *elems[2] = {a, sc};
  const hk_shape *t1 = hk_shape_tuple(m, 2, elems);
  /* a tuple template whose elements are not interned */
  bool dyn[2] = {false, false};
  hk_shape stack_a = {.elem = HK_F32, .rank = 2, .dims = d2, .dynamic = dyn, .layout = a->layout};
  const hk_shape *e2[2] = {&stack_a, sc};
  hk_shape tt = {.elem = HK_TUPLE, .n_tuple = 2, .tuple = e2};
  ck_assert_ptr_eq(hk_shape_intern(m, &tt), t1);
  ck_assert_ptr_eq(t1->tuple[0], a);
  ck_assert_ptr_eq(hk_shape_token(m), hk_shape_token(m));
  /* another module: same value, other pointer, equal */
  hk_module *m2 = hk_module_new("m2");
  const hk_shape *t2 = hk_shape_copy(m2, t1);
  ck_assert_ptr_ne(t1, t2);
  ck_assert(hk_shape_equal(t1, t2));
  ck_assert_ptr_eq(hk_shape_tuple(m2, 2, (const hk_shape *const[]){
                                        hk_shape_array(m2, HK_F32, 2, kDims23),
                                        hk_shape_scalar(m2, HK_F32)}),
                   t2);
  hk_module_free(m2);
  /* with_dims / with_elem */
  int64_t d3[] = {6};
  const hk_shape *r = hk_shape_with_dims(m, a, 1, d3);
  ck_assert_int_eq(r->rank, 1);
  ck_assert_int_eq(r->dims[0], 6);
  ck_assert_int_eq(r->layout->minor_to_major[0], 0);
  ck_assert_ptr_eq(r, hk_shape_array(m, HK_F32, 1, d3));
  const hk_shape *i = hk_shape_with_elem(m, a, HK_S8);
  ck_assert_int_eq(i->elem, HK_S8);
  ck_assert_ptr_eq(i, hk_shape_array(m, HK_S8, 2, kDims23));
  const hk_shape *ti = hk_shape_with_elem(m, t1, HK_S32);
  ck_assert_ptr_eq(ti->tuple[0], hk_shape_array(m, HK_S32, 2, kDims23));
  ck_assert_ptr_eq(ti->tuple[1], hk_shape_scalar(m, HK_S32));
  int64_t m2m1[] = {0};
  hk_layout e4 = {.n_minor_to_major = 1, .minor_to_major = m2m1, .element_size_bits = 4};
  hk_shape packed = {.elem = HK_S4, .rank = 1, .dims = d3, .layout = &e4};
  const hk_shape *ps = hk_shape_intern(m, &packed);
  ck_assert_int_eq(hk_shape_with_elem(m, ps, HK_U4)->layout->element_size_bits, 4);
  ck_assert_ptr_eq(hk_shape_with_elem(m, ps, HK_F32), hk_shape_array(m, HK_F32, 1, d3));
  hk_module_free(m);
}
END_TEST

START_TEST(shape_equality) {
  hk_module *m = hk_module_new("m");
  const hk_shape *a = hk_shape_array(m, HK_F32, 2, kDims23);
  int64_t m2m[] = {0, 1};
  hk_layout l = {.n_minor_to_major = 2, .minor_to_major = m2m};
  hk_shape t = *a;
  t.layout = &l;
  const hk_shape *col = hk_shape_intern(m, &t);
  ck_assert(!hk_shape_equal(a, col));
  ck_assert(hk_shape_compatible(a, col));
  ck_assert(!hk_shape_equal_minor_to_major(a, col));
  /* tiles and memory space count for equal, not for minor_to_major-only */
  int64_t tdims[] = {8, 128};
  hk_tile tile = {2, tdims};
  int64_t dm2m[] = {1, 0};
  hk_layout lt = {.n_minor_to_major = 2, .minor_to_major = dm2m, .n_tiles = 1, .tiles = &tile,
                  .memory_space = 1};
  t.layout = &lt;
  const hk_shape *tiled = hk_shape_intern(m, &t);
  ck_assert(!hk_shape_equal(a, tiled));
  ck_assert(hk_shape_equal_minor_to_major(a, tiled));
  ck_assert(hk_shape_compatible(a, tiled));
  ck_assert_ptr_eq(tiled, hk_shape_intern(m, &t));
  ck_assert_int_eq(tiled->layout->tiles[0].dims[1], 128);
  lt.extra = "#(s32)";
  const hk_shape *ex = hk_shape_intern(m, &t);
  ck_assert_ptr_ne(ex, tiled);
  ck_assert(!hk_shape_equal(ex, tiled));
  ck_assert_str_eq(ex->layout->extra, "#(s32)");
  /* dynamic flags */
  bool dyn[2] = {false, true};
  hk_shape d = *a;
  d.dynamic = dyn;
  const hk_shape *dy = hk_shape_intern(m, &d);
  ck_assert(!hk_shape_equal(a, dy));
  ck_assert(hk_shape_compatible(a, dy));
  ck_assert(dy->dynamic[1]);
  bool nodyn[2] = {false, false};
  d.dynamic = nodyn;
  ck_assert_ptr_eq(hk_shape_intern(m, &d), a);
  /* element type and dims */
  ck_assert(!hk_shape_compatible(a, hk_shape_array(m, HK_F16, 2, kDims23)));
  int64_t d32[] = {3, 2};
  ck_assert(!hk_shape_compatible(a, hk_shape_array(m, HK_F32, 2, d32)));
  /* tuples */
  const hk_shape *ta = hk_shape_tuple(m, 2, (const hk_shape *const[]){a, a});
  const hk_shape *tb = hk_shape_tuple(m, 2, (const hk_shape *const[]){a, col});
  const hk_shape *tc = hk_shape_tuple(m, 1, (const hk_shape *const[]){a});
  ck_assert(!hk_shape_equal(ta, tb));
  ck_assert(hk_shape_compatible(ta, tb));
  ck_assert(!hk_shape_compatible(ta, tc));
  ck_assert(!hk_shape_compatible(a, ta));
  hk_module_free(m);
}
END_TEST

START_TEST(shape_sizes) {
  hk_module *m = hk_module_new("m");
  const hk_shape *f = hk_shape_array(m, HK_F32, 2, kDims23);
  ck_assert_int_eq(hk_shape_elements(f), 6);
  ck_assert_int_eq(hk_shape_byte_size(f), 24);
  int64_t three[] = {3};
  const hk_shape *pr = hk_shape_array(m, HK_PRED, 1, three);
  ck_assert_int_eq(hk_shape_byte_size(pr), 3);
  const hk_shape *sc = hk_shape_scalar(m, HK_C128);
  ck_assert_int_eq(hk_shape_elements(sc), 1);
  ck_assert_int_eq(hk_shape_byte_size(sc), 16);
  const hk_shape *s4 = hk_shape_array(m, HK_S4, 1, three);
  ck_assert_int_eq(hk_shape_byte_size(s4), 3);
  int64_t m2m[] = {0};
  hk_layout packed = {.n_minor_to_major = 1, .minor_to_major = m2m, .element_size_bits = 4};
  hk_shape t = *s4;
  t.layout = &packed;
  ck_assert_int_eq(hk_shape_byte_size(hk_shape_intern(m, &t)), 2);
  const hk_shape *tok = hk_shape_token(m);
  ck_assert_int_eq(hk_shape_byte_size(tok), 0);
  ck_assert_int_eq(hk_shape_elements(tok), 0);
  const hk_shape *inner = hk_shape_tuple(m, 2, (const hk_shape *const[]){f, pr});
  const hk_shape *outer = hk_shape_tuple(m, 3, (const hk_shape *const[]){inner, sc, tok});
  ck_assert_int_eq(hk_shape_byte_size(outer), 24 + 3 + 16);
  ck_assert_int_eq(hk_shape_elements(outer), 0);
  ck_assert_int_eq(hk_shape_leaf_count(outer), 4);
  ck_assert_int_eq(hk_shape_leaf_count(f), 1);
  ck_assert_int_eq(hk_shape_leaf_count(hk_shape_tuple(m, 0, NULL)), 0);
  int64_t path[] = {0, 1};
  ck_assert_ptr_eq(hk_shape_subshape(outer, 2, path), pr);
  ck_assert_ptr_eq(hk_shape_subshape(outer, 0, NULL), outer);
  int64_t bad[] = {0, 2};
  ck_assert_ptr_null(hk_shape_subshape(outer, 2, bad));
  int64_t deep[] = {1, 0};
  ck_assert_ptr_null(hk_shape_subshape(outer, 2, deep));
  hk_module_free(m);
}
END_TEST

/* ---- literals ------------------------------------------------------------------------------------- */

START_TEST(literal_get_set) {
  hk_module *m = hk_module_new("m");
  int64_t four[] = {4};
  hk_literal *s8 = hk_literal_new(m, hk_shape_array(m, HK_S8, 1, four));
  ck_assert_int_eq(s8->nbytes, 4);
  hk_literal_set_i64(s8, 0, -5);
  hk_literal_set_i64(s8, 1, 130);          /* wraps like a cast */
  hk_literal_set_f64(s8, 2, 1000.0);       /* saturates */
  hk_literal_set_f64(s8, 3, -2.7);
  ck_assert_int_eq(hk_literal_get_i64(s8, 0), -5);
  ck_assert_int_eq(hk_literal_get_i64(s8, 1), -126);
  ck_assert_int_eq(hk_literal_get_i64(s8, 2), 127);
  ck_assert_int_eq(hk_literal_get_i64(s8, 3), -2);
  ck_assert(hk_literal_get_f64(s8, 0) == -5.0);
  hk_literal *u64 = hk_literal_new(m, hk_shape_scalar(m, HK_U64));
  hk_literal_set_i64(u64, 0, -1);
  ck_assert(hk_literal_get_f64(u64, 0) == 18446744073709551615.0);
  ck_assert_int_eq(hk_literal_get_i64(u64, 0), -1);
  hk_literal *s4 = hk_literal_new(m, hk_shape_array(m, HK_S4, 1, four));
  hk_literal_set_i64(s4, 0, 7);
  hk_literal_set_i64(s4, 1, 8);   /* wraps to -8 */
  hk_literal_set_i64(s4, 2, -1);
  ck_assert_int_eq(hk_literal_get_i64(s4, 0), 7);
  ck_assert_int_eq(hk_literal_get_i64(s4, 1), -8);
  ck_assert_int_eq(hk_literal_get_i64(s4, 2), -1);
  hk_literal *u4 = hk_literal_new(m, hk_shape_scalar(m, HK_U4));
  hk_literal_set_i64(u4, 0, 17);
  ck_assert_int_eq(hk_literal_get_i64(u4, 0), 1);
  hk_literal *pr = hk_literal_new(m, hk_shape_scalar(m, HK_PRED));
  hk_literal_set_i64(pr, 0, 5);
  ck_assert_int_eq(hk_literal_get_i64(pr, 0), 1);
  hk_literal *f16 = hk_literal_new(m, hk_shape_array(m, HK_F16, 1, four));
  ck_assert_int_eq(f16->nbytes, 8);
  hk_literal_set_f64(f16, 0, 1.5);
  hk_literal_set_f64(f16, 1, 65504.0);
  hk_literal_set_f64(f16, 2, 1e6);
  hk_literal_set_f64(f16, 3, 0x1p-24);
  ck_assert(hk_literal_get_f64(f16, 0) == 1.5);
  ck_assert(hk_literal_get_f64(f16, 1) == 65504.0);
  ck_assert(isinf(hk_literal_get_f64(f16, 2)));
  ck_assert(hk_literal_get_f64(f16, 3) == 0x1p-24);
  uint16_t raw;
  memcpy(&raw, f16->data, 2);
  ck_assert_uint_eq(raw, 0x3e00);
  hk_literal *bf = hk_literal_new(m, hk_shape_scalar(m, HK_BF16));
  hk_literal_set_f64(bf, 0, 3.14159265);
  memcpy(&raw, bf->data, 2);
  ck_assert_uint_eq(raw, 0x4049);
  ck_assert(hk_literal_get_f64(bf, 0) == 3.140625);
  hk_literal *f32 = hk_literal_new(m, hk_shape_scalar(m, HK_F32));
  hk_literal_set_f64(f32, 0, 0.1);
  ck_assert(hk_literal_get_f64(f32, 0) == (double)0.1f);
  hk_literal_set_f64(f32, 0, 1e300);
  ck_assert_int_eq(hk_literal_get_i64(f32, 0), INT64_MAX);
  hk_literal_set_f64(f32, 0, NAN);
  ck_assert_int_eq(hk_literal_get_i64(f32, 0), 0);
  hk_literal *c64 = hk_literal_new(m, hk_shape_array(m, HK_C64, 1, four));
  ck_assert_int_eq(c64->nbytes, 32);
  float parts[2] = {2.5f, -1.0f};
  memcpy((char *)c64->data + 8, parts, 8);
  ck_assert(hk_literal_get_f64(c64, 1) == 2.5);
  hk_literal_set_f64(c64, 2, 4.0);
  memcpy(parts, (char *)c64->data + 16, 8);
  ck_assert(parts[0] == 4.0f && parts[1] == 0.0f);
  /* tuples */
  const hk_shape *ts = hk_shape_tuple(m, 2, (const hk_shape *const[]){
                                          hk_shape_scalar(m, HK_S32), hk_shape_token(m)});
  hk_literal *tl = hk_literal_new(m, ts);
  ck_assert_int_eq(tl->n_elems, 2);
  ck_assert_ptr_null(tl->data);
  ck_assert_int_eq(tl->elems[0]->nbytes, 4);
  ck_assert_ptr_null(tl->elems[1]->data);
  hk_module_free(m);
}
END_TEST

START_TEST(half_conversions) {
  ck_assert_uint_eq(hk_float_to_half(1.0f), 0x3c00);
  ck_assert_uint_eq(hk_float_to_half(-2.0f), 0xc000);
  ck_assert_uint_eq(hk_float_to_half(65519.0f), 0x7bff);
  ck_assert_uint_eq(hk_float_to_half(65520.0f), 0x7c00);
  ck_assert_uint_eq(hk_float_to_half(-INFINITY), 0xfc00);
  ck_assert(isnan(hk_half_to_float(hk_float_to_half(NAN))));
  ck_assert_uint_eq(hk_float_to_half(0x1p-25f), 0x0000);       /* tie to even: 0 */
  ck_assert_uint_eq(hk_float_to_half(0x1.8p-24f), 0x0002);     /* tie to even: 2 */
  ck_assert_uint_eq(hk_float_to_half(0x1.ffcp-15f), 0x0400);   /* rounds to min normal */
  ck_assert_uint_eq(hk_float_to_half(1.0f + 0x1p-11f), 0x3c00); /* tie, even */
  ck_assert_uint_eq(hk_float_to_half(1.0f + 0x3p-11f), 0x3c02);
  ck_assert_uint_eq(hk_float_to_half(-0.0f), 0x8000);
  ck_assert(hk_half_to_float(0x0001) == 0x1p-24f);
  ck_assert(hk_half_to_float(0x7bff) == 65504.0f);
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = hk_half_to_float((uint16_t)h);
    if (isnan(f)) continue;
    ck_assert_uint_eq(hk_float_to_half(f), h);
  }
  ck_assert_uint_eq(hk_float_to_bf16(1.0f), 0x3f80);
  ck_assert_uint_eq(hk_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);       /* tie, even */
  ck_assert_uint_eq(hk_float_to_bf16(1.0f + 0x3p-8f), 0x3f82);
  ck_assert_uint_eq(hk_float_to_bf16(-INFINITY), 0xff80);
  ck_assert(isnan(hk_bf16_to_float(hk_float_to_bf16(NAN))));
  ck_assert(hk_bf16_to_float(0x4049) == 3.140625f);
}
END_TEST

/* Every finite pattern decodes and encodes back to itself. */
static void assert_round_trip(hk_prim p, int nbits) {
  for (unsigned b = 0; b < (1u << nbits); b++) {
    double v = hk_small_float_decode(p, (uint8_t)b);
    if (isnan(v)) continue;
    ck_assert_msg(hk_small_float_encode(p, v) == b, "%s: 0x%x -> %g -> 0x%x",
                  hk_prim_name(p), b, v, hk_small_float_encode(p, v));
  }
}

START_TEST(small_float_specials) {
  /* f8e5m2: IEEE-like, inf 0x7c, max 57344 */
  ck_assert(hk_small_float_decode(HK_F8E5M2, 0x7b) == 57344.0);
  ck_assert(isinf(hk_small_float_decode(HK_F8E5M2, 0x7c)));
  ck_assert(isnan(hk_small_float_decode(HK_F8E5M2, 0x7d)));
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, INFINITY), 0x7c);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, -INFINITY), 0xfc);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, 61440.0), 0x7c);   /* tie rounds up to inf */
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, 61439.0), 0x7b);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, -0.0), 0x80);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E5M2, NAN), 0x7e);
  ck_assert(hk_small_float_decode(HK_F8E5M2, 0x01) == 0x1p-16);
  /* f8e4m3: IEEE-like, max 240 */
  ck_assert(hk_small_float_decode(HK_F8E4M3, 0x77) == 240.0);
  ck_assert(isinf(hk_small_float_decode(HK_F8E4M3, 0x78)));
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3, 1e9), 0x78);
  /* f8e4m3fn: no inf; 0x7f / 0xff are NaN; max 448; -0 exists */
  ck_assert(hk_small_float_decode(HK_F8E4M3FN, 0x7e) == 448.0);
  ck_assert(isnan(hk_small_float_decode(HK_F8E4M3FN, 0x7f)));
  ck_assert(isnan(hk_small_float_decode(HK_F8E4M3FN, 0xff)));
  ck_assert(hk_small_float_decode(HK_F8E4M3FN, 0x78) == 256.0);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, INFINITY), 0x7f);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, -INFINITY), 0xff);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, 464.0), 0x7e);   /* tie to even */
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, 465.0), 0x7f);   /* overflow: NaN */
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, -0.0), 0x80);
  ck_assert(hk_small_float_decode(HK_F8E4M3FN, 0x01) == 0x1p-9);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, 0x1p-10), 0x00);  /* tie to even */
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FN, 0x1.8p-10), 0x01);
  /* fnuz: NaN is 0x80, no -0, no inf */
  ck_assert(isnan(hk_small_float_decode(HK_F8E4M3FNUZ, 0x80)));
  ck_assert(hk_small_float_decode(HK_F8E4M3FNUZ, 0x7f) == 240.0);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FNUZ, -0.0), 0x00);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FNUZ, -1e-9), 0x00);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FNUZ, INFINITY), 0x80);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FNUZ, -NAN), 0x80);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3FNUZ, -1.0), 0xc0);
  ck_assert(hk_small_float_decode(HK_F8E4M3FNUZ, 0x40) == 1.0);
  ck_assert(hk_small_float_decode(HK_F8E5M2FNUZ, 0x7f) == 57344.0);
  ck_assert(isnan(hk_small_float_decode(HK_F8E5M2FNUZ, 0x80)));
  ck_assert(hk_small_float_decode(HK_F8E5M2FNUZ, 0x40) == 1.0);
  ck_assert(hk_small_float_decode(HK_F8E4M3B11FNUZ, 0x7f) == 30.0);
  ck_assert(hk_small_float_decode(HK_F8E4M3B11FNUZ, 0x58) == 1.0);
  ck_assert(isnan(hk_small_float_decode(HK_F8E4M3B11FNUZ, 0x80)));
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E4M3B11FNUZ, 31.0), 0x80);  /* overflow */
  /* f8e3m4: IEEE-like, max 15.5 */
  ck_assert(hk_small_float_decode(HK_F8E3M4, 0x6f) == 15.5);
  ck_assert(isinf(hk_small_float_decode(HK_F8E3M4, 0x70)));
  ck_assert(hk_small_float_decode(HK_F8E3M4, 0x30) == 1.0);
  /* f4e2m1fn: no inf or NaN, max 6, saturating */
  const double f4[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int b = 0; b < 8; b++) {
    ck_assert(hk_small_float_decode(HK_F4E2M1FN, (uint8_t)b) == f4[b]);
    ck_assert(hk_small_float_decode(HK_F4E2M1FN, (uint8_t)(b | 8)) == -f4[b]);
  }
  ck_assert_uint_eq(hk_small_float_encode(HK_F4E2M1FN, 100.0), 0x7);
  ck_assert_uint_eq(hk_small_float_encode(HK_F4E2M1FN, -INFINITY), 0xf);
  ck_assert_uint_eq(hk_small_float_encode(HK_F4E2M1FN, 5.0), 0x6);   /* tie to even: 4 */
  ck_assert_uint_eq(hk_small_float_encode(HK_F4E2M1FN, 2.5), 0x4);   /* tie to even: 2 */
  ck_assert_uint_eq(hk_small_float_encode(HK_F4E2M1FN, -0.0), 0x8);
  /* f8e8m0fnu: powers of two; 0xff NaN; no zero or negatives */
  ck_assert(hk_small_float_decode(HK_F8E8M0FNU, 127) == 1.0);
  ck_assert(hk_small_float_decode(HK_F8E8M0FNU, 0) == 0x1p-127);
  ck_assert(hk_small_float_decode(HK_F8E8M0FNU, 0xfe) == 0x1p127);
  ck_assert(isnan(hk_small_float_decode(HK_F8E8M0FNU, 0xff)));
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, 4.0), 129);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, 3.0), 129);   /* 1.5 rounds up */
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, 2.9), 128);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, 0.0), 0xff);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, -1.0), 0xff);
  ck_assert_uint_eq(hk_small_float_encode(HK_F8E8M0FNU, 0x1p200), 0xff);
  assert_round_trip(HK_F8E5M2, 8);
  assert_round_trip(HK_F8E4M3, 8);
  assert_round_trip(HK_F8E4M3FN, 8);
  assert_round_trip(HK_F8E4M3B11FNUZ, 8);
  assert_round_trip(HK_F8E5M2FNUZ, 8);
  assert_round_trip(HK_F8E4M3FNUZ, 8);
  assert_round_trip(HK_F8E3M4, 8);
  assert_round_trip(HK_F4E2M1FN, 4);
  assert_round_trip(HK_F8E8M0FNU, 8);
  /* literal storage uses them */
  hk_module *m = hk_module_new("m");
  hk_literal *l = hk_literal_new(m, hk_shape_scalar(m, HK_F8E4M3FN));
  hk_literal_set_f64(l, 0, -448.0);
  ck_assert_uint_eq(((uint8_t *)l->data)[0], 0xfe);
  ck_assert(hk_literal_get_f64(l, 0) == -448.0);
  hk_module_free(m);
}
END_TEST

/* ---- hash-consing ----------------------------------------------------------------------------------- */

typedef struct pair_val { int64_t a, b; } pair_val;

static bool pair_eq(const void *x, const void *y) {
  const pair_val *p = x, *q = y;
  return p->a == q->a && p->b == q->b;
}

static const void *pair_copy(hk_module *m, const void *key) {
  return hk_memdup(m, key, sizeof(pair_val));
}

START_TEST(hashcons_table) {
  hk_module *m = hk_module_new("m");
  const void *first[1000];
  for (int k = 0; k < 1000; k++) {
    pair_val v = {k, k * 7};
    uint64_t h = hk_hash_bytes(&v, sizeof v, 0);
    first[k] = hk_hashcons(m, HK_HC_OTHER, h, &v, pair_eq, pair_copy);
  }
  for (int k = 0; k < 1000; k++) {
    pair_val v = {k, k * 7};
    uint64_t h = hk_hash_bytes(&v, sizeof v, 0);
    ck_assert_ptr_eq(hk_hashcons(m, HK_HC_OTHER, h, &v, pair_eq, pair_copy), first[k]);
    ck_assert_int_eq(((const pair_val *)first[k])->b, k * 7);
  }
  ck_assert(hk_hash_bytes("abc", 3, 0) != hk_hash_bytes("abd", 3, 0));
  ck_assert(hk_hash_bytes("abc", 3, 0) != hk_hash_bytes("abc", 3, 1));
  ck_assert(hk_hash_combine(1, 2) != hk_hash_combine(2, 1));
  char long_a[100], long_b[100];
  memset(long_a, 'q', sizeof long_a);
  memcpy(long_b, long_a, sizeof long_b);
  long_b[50] = 'r';
  ck_assert(hk_hash_bytes(long_a, 100, 0) != hk_hash_bytes(long_b, 100, 0));
  hk_module_free(m);
}
END_TEST

/* ---- clone -------------------------------------------------------------------------------------------- */

static hk_module *build_sample(void) {
  hk_module *m = hk_module_new("sample");
  const hk_shape *s = hk_shape_array(m, HK_F32, 2, kDims23);
  const hk_shape *sc = hk_shape_scalar(m, HK_F32);
  hk_computation *add = new_comp(m, "add");
  hk_instr *x = hk_test_param(add, 0, sc, "x"), *y = hk_test_param(add, 1, sc, "y");
  hk_computation_set_root(add, binary(add, HK_OP_ADD, x, y));
  hk_computation *e = new_comp(m, "main");
  hk_instr *p = hk_test_param(e, 0, s, "p");
  hk_instr *k = hk_instr_new(e, HK_OP_CONSTANT, sc, 0, NULL, "k");
  hk_attrs *ka = hk_instr_attrs(k);
  ka->literal = hk_literal_new(m, sc);
  hk_literal_set_f64(ka->literal, 0, 2.5);
  hk_instr *ops[2] = {p, k};
  hk_instr *r = hk_instr_new(e, HK_OP_REDUCE, hk_shape_array(m, HK_F32, 1, kDims23), 2, ops, "r");
  int64_t dims[] = {1};
  hk_instr_set_dims(r, 1, dims);
  hk_instr_set_called(r, 1, &add);
  hk_attrs *ra = hk_instr_attrs(r);
  hk_metadata *md = hk_alloc(m, sizeof *md);
  md->op_name = hk_intern_cstr(m, "jit(f)/reduce");
  md->source_line = 12;
  ra->metadata = md;
  ra->backend_config = hk_intern_cstr(m, "\"{}\"");
  hk_instr *ar = hk_instr_new(e, HK_OP_ALL_REDUCE, r->shape, 1, &r, "ar");
  hk_instr_set_called(ar, 1, &add);
  hk_attrs *aa = hk_instr_attrs(ar);
  aa->channel_id = 2;
  int32_t starts[] = {0, 2, 4};
  int64_t ids[] = {0, 1, 2, 3};
  hk_replica_groups *g = hk_alloc(m, sizeof *g);
  g->n_groups = 2;
  g->group_start = hk_memdup(m, starts, sizeof starts);
  g->ids = hk_memdup(m, ids, sizeof ids);
  aa->replica_groups = g;
  hk_instr_add_control_dep(k, ar);
  hk_computation_set_root(e, ar);
  hk_module_set_entry(m, e);
  m->config.num_partitions = 4;
  m->config.use_spmd_partitioning = true;
  hk_sharding *sh = hk_alloc(m, sizeof *sh);
  sh->kind = HK_SHARDING_MAXIMAL;
  sh->device = 1;
  ar->sharding = sh;
  hk_module_unique_name(m, "reserved");
  return m;
}

static void assert_same_module(const hk_module *a, const hk_module *b) {
  ck_assert_str_eq(a->name, b->name);
  ck_assert_int_eq(a->n_computations, b->n_computations);
  ck_assert_int_eq(a->next_id, b->next_id);
  ck_assert_str_eq(a->entry->name, b->entry->name);
  for (int k = 0; k < a->n_computations; k++) {
    const hk_computation *ca = a->computations[k], *cb = b->computations[k];
    ck_assert_str_eq(ca->name, cb->name);
    ck_assert_int_eq(ca->n_instrs, cb->n_instrs);
    ck_assert_int_eq(ca->n_params, cb->n_params);
    ck_assert_str_eq(ca->root->name, cb->root->name);
    const hk_instr *ia = ca->first, *ib = cb->first;
    for (; ia && ib; ia = ia->next, ib = ib->next) {
      ck_assert_str_eq(ia->name, ib->name);
      ck_assert_int_eq(ia->id, ib->id);
      ck_assert_int_eq(ia->opcode, ib->opcode);
      ck_assert(hk_shape_equal(ia->shape, ib->shape));
      ck_assert_int_eq(ia->n_operands, ib->n_operands);
      for (int j = 0; j < ia->n_operands; j++)
        ck_assert_str_eq(ia->operands[j]->name, ib->operands[j]->name);
      ck_assert_int_eq(ia->n_users, ib->n_users);
      for (int j = 0; j < ia->n_users; j++)
        ck_assert_str_eq(ia->users[j]->name, ib->users[j]->name);
      ck_assert_int_eq(ia->n_called, ib->n_called);
      for (int j = 0; j < ia->n_called; j++)
        ck_assert_str_eq(ia->called[j]->name, ib->called[j]->name);
      ck_assert_int_eq(ia->n_dims, ib->n_dims);
      ck_assert_int_eq(!ia->attrs, !ib->attrs);
      ck_assert_int_eq(!ia->sharding, !ib->sharding);
    }
    ck_assert(!ia && !ib);
  }
}

START_TEST(clone_module) {
  hk_module *m = build_sample();
  hk_module *c = hk_module_clone(m);
  assert_same_module(m, c);
  hk_computation *e = c->entry;
  ck_assert_ptr_eq(e->module, c);
  hk_instr *ar = hk_computation_find_instr(e, "ar");
  hk_instr *k = hk_computation_find_instr(e, "k");
  hk_instr *r = hk_computation_find_instr(e, "r");
  ck_assert_ptr_nonnull(ar);
  ck_assert_ptr_eq(ar->called[0], hk_module_find_computation(c, "add"));
  ck_assert_ptr_eq(ar->attrs->control_preds[0], k);
  ck_assert_ptr_eq(k->attrs->control_succs[0], ar);
  ck_assert_int_eq(ar->attrs->replica_groups->ids[3], 3);
  ck_assert_ptr_ne(ar->attrs->replica_groups->ids,
                   hk_computation_find_instr(m->entry, "ar")->attrs->replica_groups->ids);
  ck_assert(hk_literal_get_f64(k->attrs->literal, 0) == 2.5);
  ck_assert_ptr_ne(k->attrs->literal, hk_computation_find_instr(m->entry, "k")->attrs->literal);
  ck_assert_str_eq(r->attrs->metadata->op_name, "jit(f)/reduce");
  ck_assert_int_eq(r->attrs->metadata->source_line, 12);
  ck_assert_str_eq(r->attrs->backend_config, "\"{}\"");
  ck_assert_int_eq(r->dims[0], 1);
  ck_assert_int_eq(ar->sharding->kind, HK_SHARDING_MAXIMAL);
  ck_assert_int_eq(ar->sharding->device, 1);
  ck_assert_int_eq(c->config.num_partitions, 4);
  ck_assert(c->config.use_spmd_partitioning);
  ck_assert_ptr_eq(e->params[0], hk_computation_find_instr(e, "p"));
  /* the clone's namespace continues like the original's */
  ck_assert_str_eq(hk_module_unique_name(c, "reserved"), "reserved.1");
  ck_assert_str_eq(hk_module_unique_name(m, "reserved"), "reserved.1");
  ck_assert_str_eq(binary(e, HK_OP_ADD, r, r)->name, "add.1");
  /* the clone is independent */
  hk_module_free(m);
  int64_t n = 0;
  hk_instr **po = hk_computation_post_order(e, &n);
  ck_assert_int_eq(n, 5);
  free(po);
  hk_module_free(c);
}
END_TEST

START_TEST(clone_instr) {
  hk_module *m = build_sample();
  hk_computation *e = m->entry;
  hk_instr *r = hk_computation_find_instr(e, "r");
  hk_instr *ops[2] = {r->operands[0], r->operands[1]};
  hk_instr *c = hk_instr_clone(e, r, NULL, 2, ops, NULL);
  ck_assert_str_eq(c->name, "r.1");
  ck_assert_int_eq(c->opcode, HK_OP_REDUCE);
  ck_assert_ptr_eq(c->shape, r->shape);
  ck_assert_ptr_eq(c->called[0], r->called[0]);
  ck_assert_ptr_ne(c->dims, r->dims);
  ck_assert_int_eq(c->dims[0], 1);
  ck_assert_str_eq(c->attrs->metadata->op_name, "jit(f)/reduce");
  ck_assert_int_eq(count_user(ops[0], c), 1);
  hk_instr *ar = hk_computation_find_instr(e, "ar");
  hk_instr *ac = hk_instr_clone(e, ar, NULL, 1, &c, "ar.clone");
  ck_assert_str_eq(ac->name, "ar.clone");
  ck_assert_int_eq(ac->attrs->n_control_preds, 0);   /* control edges are not cloned */
  ck_assert_ptr_eq(ac->sharding, ar->sharding);
  /* into another module */
  hk_module *m2 = hk_module_new("other");
  hk_computation *e2 = new_comp(m2, "e2");
  hk_instr *k2 = hk_instr_clone(e2, hk_computation_find_instr(e, "k"), NULL, 0, NULL, NULL);
  ck_assert_str_eq(k2->name, "k");
  ck_assert(hk_literal_get_f64(k2->attrs->literal, 0) == 2.5);
  ck_assert_ptr_eq(k2->shape, hk_shape_scalar(m2, HK_F32));
  hk_module_free(m);
  ck_assert(hk_literal_get_f64(k2->attrs->literal, 0) == 2.5);
  hk_module_free(m2);
}
END_TEST

START_TEST(program_shape) {
  hk_module *m = build_sample();
  hk_program_shape ps = hk_computation_program_shape(hk_module_find_computation(m, "add"));
  ck_assert_int_eq(ps.n_params, 2);
  ck_assert_ptr_eq(ps.params[1], hk_shape_scalar(m, HK_F32));
  ck_assert_str_eq(ps.param_names[0], "x");
  ck_assert_ptr_eq(ps.result, hk_shape_scalar(m, HK_F32));
  hk_module_free(m);
}
END_TEST


START_TEST(clone_sparse_ids) {
  hk_module *m = build_sample();
  hk_instr *k = hk_computation_find_instr(m->entry, "k");
  k->id = 1000000;   /* ids no longer dense: the clone maps by pointer */
  hk_module *c = hk_module_clone(m);
  assert_same_module(m, c);
  hk_instr *ar = hk_computation_find_instr(c->entry, "ar");
  ck_assert_ptr_eq(ar->attrs->control_preds[0], hk_computation_find_instr(c->entry, "k"));
  ck_assert_ptr_eq(c->entry->root, ar);
  hk_module_free(m);
  hk_module_free(c);
}
END_TEST

START_TEST(repeated_operands) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = new_comp(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *p = hk_test_param(c, 0, s, "p");
  hk_instr *q = hk_test_param(c, 1, s, "q");
  hk_instr *ops[5] = {p, q, p, p, q};
  hk_instr *t = hk_instr_new(c, HK_OP_TUPLE, s, 5, ops, "t");
  ck_assert_int_eq(p->n_users, 1);
  ck_assert_int_eq(q->n_users, 1);
  hk_instr *u = hk_instr_new(c, HK_OP_TUPLE, s, 5, ops, "u");
  ck_assert_int_eq(p->n_users, 2);
  hk_computation_set_root(c, u);
  static const char *const want[] = {"p", "q", "t", "u"};
  assert_order(c, want, 4);
  ck_assert_ok(hk_instr_remove(t));
  ck_assert_int_eq(p->n_users, 1);
  ck_assert_int_eq(q->n_users, 1);
  ck_assert_ptr_eq(p->users[0], u);
  for (int k = 0; k < 5; k++) hk_instr_set_operand(u, k, q);
  ck_assert_int_eq(p->n_users, 0);
  ck_assert_int_eq(q->n_users, 1);
  hk_module_free(m);
}
END_TEST

START_TEST(sort_shared_callees) {
  hk_module *m = hk_module_new("m");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_computation *a = new_comp(m, "a");       /* root: calls x then y */
  hk_computation *b = new_comp(m, "b");       /* root: calls y */
  hk_computation *x = new_comp(m, "x");       /* calls z */
  hk_computation *y = new_comp(m, "y");
  hk_computation *z = new_comp(m, "z");
  hk_instr *pa = hk_test_param(a, 0, s, "pa");
  hk_instr *ca = hk_instr_new(a, HK_OP_CALL, s, 1, &pa, "ca");
  hk_instr_set_called(ca, 1, &x);
  hk_instr *ca2 = hk_instr_new(a, HK_OP_CALL, s, 1, &pa, "ca2");
  hk_instr_set_called(ca2, 1, &y);
  hk_instr *pb = hk_test_param(b, 0, s, "pb");
  hk_instr *cb = hk_instr_new(b, HK_OP_CALL, s, 1, &pb, "cb");
  hk_instr_set_called(cb, 1, &y);
  hk_instr *px = hk_test_param(x, 0, s, "px");
  hk_instr *cx = hk_instr_new(x, HK_OP_CALL, s, 1, &px, "cx");
  hk_instr_set_called(cx, 1, &z);
  hk_test_param(y, 0, s, "py");
  hk_test_param(z, 0, s, "pz");
  hk_module_sort_computations(m);
  const char *want[] = {"z", "x", "y", "a", "b"};
  for (int k = 0; k < 5; k++) ck_assert_str_eq(m->computations[k]->name, want[k]);
  hk_module_free(m);
}
END_TEST

START_TEST(literal_small_ints) {
  hk_module *m = hk_module_new("m");
  int64_t four[] = {4};
  hk_literal *s2 = hk_literal_new(m, hk_shape_array(m, HK_S2, 1, four));
  hk_literal *u2 = hk_literal_new(m, hk_shape_array(m, HK_U2, 1, four));
  const int64_t in[4] = {1, 2, -3, 5};
  const int64_t want_s2[4] = {1, -2, 1, 1};
  const int64_t want_u2[4] = {1, 2, 1, 1};
  for (int k = 0; k < 4; k++) {
    hk_literal_set_i64(s2, k, in[k]);
    hk_literal_set_i64(u2, k, in[k]);
  }
  for (int k = 0; k < 4; k++) {
    ck_assert_int_eq(hk_literal_get_i64(s2, k), want_s2[k]);
    ck_assert_int_eq(hk_literal_get_i64(u2, k), want_u2[k]);
  }
  hk_literal_set_f64(u2, 0, -7.0);   /* saturates at 0 */
  ck_assert_int_eq(hk_literal_get_i64(u2, 0), 0);
  hk_literal_set_f64(u2, 0, 99.0);   /* and at 3 */
  ck_assert_int_eq(hk_literal_get_i64(u2, 0), 3);
  hk_literal *u64 = hk_literal_new(m, hk_shape_scalar(m, HK_U64));
  hk_literal_set_f64(u64, 0, 1e30);
  ck_assert_int_eq(hk_literal_get_i64(u64, 0), -1);   /* UINT64_MAX */
  hk_literal *f8 = hk_literal_new(m, hk_shape_scalar(m, HK_F8E5M2));
  hk_literal_set_i64(f8, 0, 3);
  ck_assert_int_eq(hk_literal_get_i64(f8, 0), 3);
  ck_assert(hk_small_float_decode(HK_F8E5M2, 0x03) == 0x3p-16);   /* subnormal */
  hk_module_free(m);
}
END_TEST

/* ---- the one thread knob covers the evaluator's device threads ---------------- */

static hk_cpu_slots *slots_under_test;
static atomic_int busy, most_busy;

/* A device's life: take a slot, compute a while, wait at a rendezvous
 * (slot given up), compute again, leave. */
static void *device_like(void *arg) {
  (void)arg;
  hk_cpu_slot_enter(slots_under_test);
  for (int round = 0; round < 2; round++) {
    int now = atomic_fetch_add(&busy, 1) + 1;
    for (int seen = atomic_load(&most_busy); now > seen;)
      if (atomic_compare_exchange_weak(&most_busy, &seen, now)) break;
    usleep(2000);
    atomic_fetch_sub(&busy, 1);
    if (round == 0) {
      hk_cpu_slot_pause();
      usleep(1000);
      hk_cpu_slot_resume();
    }
  }
  hk_cpu_slot_leave();
  return NULL;
}

/* Eight device threads; at most hk_worker_threads() compute at once. */
static int most_computing_at_once(int worker_threads) {
  int asked = hk_worker_threads();
  hk_set_worker_threads(worker_threads);
  slots_under_test = hk_cpu_slots_new();
  hk_set_worker_threads(asked);
  atomic_store(&busy, 0);
  atomic_store(&most_busy, 0);
  pthread_t t[8];
  for (int k = 0; k < 8; k++) ck_assert_int_eq(pthread_create(&t[k], NULL, device_like, NULL), 0);
  for (int k = 0; k < 8; k++) pthread_join(t[k], NULL);
  hk_cpu_slots_free(slots_under_test);
  return atomic_load(&most_busy);
}

START_TEST(device_threads_follow_the_knob) {
  ck_assert_int_eq(most_computing_at_once(1), 1);
  int two = most_computing_at_once(2);
  ck_assert(two >= 1 && two <= 2);
  ck_assert_int_le(most_computing_at_once(8), 8);
}
END_TEST

static Suite *ir_suite(void) {
  Suite *s = suite_create("ir");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, status_messages);
  tcase_add_test(tc, status_ret_check);
  tcase_add_test(tc, type_tables);
  tcase_add_test(tc, buf_growth);
  tcase_add_test(tc, dims_in_list);
  tcase_add_test(tc, module_basics);
  tcase_add_test(tc, unique_names);
  tcase_add_test(tc, many_unique_names);
  tcase_add_test(tc, announced_names);
  tcase_add_test(tc, canonical_name_edges);
  tcase_add_test(tc, colliding_names_dense_and_sparse);
  tcase_add_test(tc, name_suffixes);
  tcase_add_test(tc, operands_users);
  tcase_add_test(tc, instr_new_before_and_attrs);
  tcase_add_test(tc, control_deps);
  tcase_add_test(tc, change_count);
  tcase_add_test(tc, device_threads_follow_the_knob);
  tcase_add_test(tc, post_order_diamond);
  tcase_add_test(tc, post_order_channels);
  tcase_add_test(tc, post_order_channel_group);
  tcase_add_test(tc, post_order_long_chain);
  tcase_add_test(tc, sort_computations);
  tcase_add_test(tc, sort_computations_visiting);
  tcase_add_test(tc, shape_interning);
  tcase_add_test(tc, shape_equality);
  tcase_add_test(tc, shape_sizes);
  tcase_add_test(tc, literal_get_set);
  tcase_add_test(tc, half_conversions);
  tcase_add_test(tc, small_float_specials);
  tcase_add_test(tc, hashcons_table);
  tcase_add_test(tc, clone_module);
  tcase_add_test(tc, clone_instr);
  tcase_add_test(tc, program_shape);
  tcase_add_test(tc, clone_sparse_ids);
  tcase_add_test(tc, repeated_operands);
  tcase_add_test(tc, sort_shared_callees);
  tcase_add_test(tc, literal_small_ints);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(ir_suite)
