/* test_ir_take_name.c - Check suite for names handed to replacements
 * (hk_instr_take_name, hk_instr_clone_taking_name) and the cheap clone and
 * computation removal built around them. */
#include "testutil.h"

/* old: p = parameter(0); add = add(p, p); neg = negate(add) (root). */
typedef struct rebuilt {
  hk_module *m;
  hk_computation *old, *fresh;
  hk_instr *p, *add, *neg;        /* in old */
  hk_instr *p2, *add2, *neg2;     /* in fresh, names taken */
} rebuilt;

static void build_old(rebuilt *r) {
  r->m = hk_module_new("m");
  r->old = hk_computation_new(r->m, "old");
  const hk_shape *s = hk_shape_scalar(r->m, HK_F32);
  r->p = hk_instr_new(r->old, HK_OP_PARAMETER, s, 0, NULL, "p");
  hk_instr_attrs(r->p)->parameter_number = 0;
  hk_computation_register_param(r->old, r->p);
  hk_instr *pp[2] = {r->p, r->p};
  r->add = hk_instr_new(r->old, HK_OP_ADD, s, 2, pp, "add");
  r->neg = hk_instr_new(r->old, HK_OP_NEGATE, s, 1, &r->add, "neg");
  hk_computation_set_root(r->old, r->neg);
  hk_module_set_entry(r->m, r->old);
}

/* fresh rebuilds old instruction by instruction, each taking its name. */
static void rebuild(rebuilt *r) {
  r->fresh = hk_computation_new(r->m, "fresh");
  r->p2 = hk_instr_clone_taking_name(r->fresh, r->p, NULL, 0, NULL);
  hk_computation_register_param(r->fresh, r->p2);
  hk_instr *pp[2] = {r->p2, r->p2};
  r->add2 = hk_instr_clone_taking_name(r->fresh, r->add, NULL, 2, pp);
  r->neg2 = hk_instr_clone_taking_name(r->fresh, r->neg, NULL, 1, &r->add2);
  hk_computation_set_root(r->fresh, r->neg2);
  hk_module_set_entry(r->m, r->fresh);
}

START_TEST(clone_taking_name_shares_names) {
  rebuilt r;
  build_old(&r);
  rebuild(&r);
  ck_assert_str_eq(r.p2->name, "p");
  ck_assert_str_eq(r.add2->name, "add");
  ck_assert_str_eq(r.neg2->name, "neg");
  ck_assert_ptr_eq(r.add2->name, r.add->name);   /* the very same string */
  ck_assert_str_eq(r.add->name, "add");          /* the old one still reads it */
  ck_assert_int_eq(hk_instr_parameter_number(r.p2), 0);
  ck_assert_ptr_eq(r.add2->operands[0], r.p2);
  ck_assert_int_eq(r.p2->n_users, 1);
  ck_assert_int_eq(r.p->n_users, 1);             /* old edges untouched */
  /* Lookups find the new instructions. */
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), r.add2);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "p"), r.p2);
  ck_assert_ptr_null(hk_computation_find_instr(r.old, "add"));
  /* The old computation goes; the names stay with the new instructions. */
  hk_module_remove_computation(r.m, r.old);
  ck_assert_int_eq(r.m->n_computations, 1);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), r.add2);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "neg"), r.neg2);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "p"), r.p2);
  /* A later request for the same name still gets a fresh one. */
  hk_instr *pp[2] = {r.p2, r.p2};
  hk_instr *more = hk_instr_new(r.fresh, HK_OP_ADD, r.p2->shape, 2, pp, "add");
  ck_assert_str_eq(more->name, "add.1");
  ck_assert_str_eq(hk_module_unique_name(r.m, "neg"), "neg.1");
  ck_assert_str_eq(hk_instr_new(r.fresh, HK_OP_ADD, r.p2->shape, 2, pp, NULL)->name, "add.2");
  hk_module_free(r.m);
}
END_TEST

START_TEST(removing_old_instr_keeps_taken_name) {
  rebuilt r;
  build_old(&r);
  rebuild(&r);
  hk_computation_set_root(r.old, r.add);
  ck_assert_ok(hk_instr_remove(r.neg));   /* lent its name: not retired */
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "neg"), r.neg2);
  /* Removing the owner retires the name for good. */
  hk_computation_set_root(r.fresh, r.add2);
  ck_assert_ok(hk_instr_remove(r.neg2));
  ck_assert_ptr_null(hk_computation_find_instr(r.fresh, "neg"));
  hk_instr *x = hk_instr_new(r.fresh, HK_OP_NEGATE, r.add2->shape, 1, &r.add2, "neg");
  ck_assert_str_eq(x->name, "neg.1");
  hk_module_free(r.m);
}
END_TEST

START_TEST(batch_removal_keeps_taken_names) {
  rebuilt r;
  build_old(&r);
  rebuild(&r);
  hk_computation_set_root(r.old, r.p);
  hk_instr *dead[2] = {r.neg, r.add};
  ck_assert_ok(hk_instrs_remove(dead, 2));
  ck_assert_int_eq(r.old->n_instrs, 1);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), r.add2);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "neg"), r.neg2);
  hk_module_free(r.m);
}
END_TEST

/* A computation whose instructions still own some names retires exactly
 * those on removal. */
START_TEST(removal_retires_only_owned_names) {
  rebuilt r;
  build_old(&r);
  r.fresh = hk_computation_new(r.m, "fresh");
  hk_instr *q = hk_instr_new(r.fresh, HK_OP_PARAMETER, r.p->shape, 0, NULL, "q");
  hk_instr_take_name(q, r.add);   /* "q" retired, "add" now q's */
  ck_assert_str_eq(q->name, "add");
  ck_assert_ptr_null(hk_computation_find_instr(r.fresh, "q"));
  ck_assert_str_eq(hk_instr_new(r.fresh, HK_OP_PARAMETER, r.p->shape, 0, NULL, "q")->name, "q.1");
  hk_module_set_entry(r.m, r.fresh);
  hk_module_remove_computation(r.m, r.old);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), q);
  ck_assert_ptr_null(hk_module_find_computation(r.m, "old"));
  /* p and neg were retired with old: asking for them gives new names. */
  ck_assert_str_eq(hk_instr_new(r.fresh, HK_OP_NEGATE, q->shape, 1, &q, "neg")->name, "neg.1");
  ck_assert_str_eq(hk_instr_new(r.fresh, HK_OP_NEGATE, q->shape, 1, &q, "p")->name, "p.1");
  hk_module_free(r.m);
}
END_TEST

/* Taking a name twice moves it on; renaming a lender leaves the owner alone. */
START_TEST(take_name_chains_and_renames) {
  rebuilt r;
  build_old(&r);
  rebuild(&r);
  hk_instr *again = hk_instr_clone_taking_name(r.fresh, r.add, NULL, 2,
                                               (hk_instr *[]){r.p2, r.p2});
  ck_assert_str_eq(again->name, "add");
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), again);
  hk_instr_set_name(r.add, "old_add");               /* a lender renamed */
  ck_assert_str_eq(r.add->name, "old_add");
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "add"), again);
  hk_instr_take_name(r.add2, r.add2);                 /* no-op */
  ck_assert_str_eq(r.add2->name, "add");
  hk_module_free(r.m);
}
END_TEST

/* A module copy made while two instructions share a name keeps the
 * ownership: the copy of the taker owns it. */
/* Removals before any lookup (the namespace not settled): a removed taker
 * retires its name, a live one keeps it once the old computation goes. */
START_TEST(removal_before_lookup_retires_held_names) {
  rebuilt r;
  build_old(&r);
  rebuild(&r);
  hk_instr *extra = hk_instr_clone_taking_name(r.fresh, r.add2, NULL, 2,
                                               (hk_instr *[]){r.p2, r.p2});
  ck_assert_ptr_eq(extra->name, r.add->name);   /* add2 lent it on */
  hk_instr *dead[1] = {extra};
  ck_assert_ok(hk_instrs_remove(dead, 1));       /* no lookup happened yet */
  hk_module_remove_computation(r.m, r.old);
  ck_assert_ptr_null(hk_computation_find_instr(r.fresh, "add"));   /* retired with extra */
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "neg"), r.neg2);
  ck_assert_ptr_eq(hk_computation_find_instr(r.fresh, "p"), r.p2);
  /* A retired name is never handed out again. */
  hk_instr *again = hk_instr_new(r.fresh, HK_OP_NEGATE, r.p2->shape, 1, &r.p2, "add");
  ck_assert_str_ne(again->name, "add");
  hk_module_free(r.m);
}
END_TEST

START_TEST(module_clone_keeps_owner) {
  for (int order = 0; order < 2; order++) {
    rebuilt r;
    build_old(&r);
    rebuild(&r);
    if (order) hk_module_sort_computations(r.m);
    hk_module *c = hk_module_clone(r.m);
    hk_computation *fresh = hk_module_find_computation(c, "fresh");
    hk_computation *old = hk_module_find_computation(c, "old");
    ck_assert_ptr_nonnull(fresh);
    hk_instr *add2 = hk_computation_find_instr(fresh, "add");
    ck_assert_ptr_nonnull(add2);
    ck_assert_int_eq(add2->opcode, HK_OP_ADD);
    hk_module_remove_computation(c, old);
    ck_assert_ptr_eq(hk_computation_find_instr(fresh, "add"), add2);
    ck_assert_str_eq(hk_module_unique_name(c, "add"), "add.1");
    hk_module_free(c);
    hk_module_free(r.m);
  }
}
END_TEST

/* Into another module there is no name to take: the copy gets its own. */
START_TEST(clone_taking_name_across_modules) {
  rebuilt r;
  build_old(&r);
  hk_module *m2 = hk_module_new("m2");
  hk_computation *c2 = hk_computation_new(m2, "c2");
  hk_instr *x = hk_instr_new(c2, HK_OP_PARAMETER, hk_shape_scalar(m2, HK_F32), 0, NULL, "add");
  hk_instr *y = hk_instr_clone_taking_name(c2, r.add, NULL, 2, (hk_instr *[]){x, x});
  ck_assert_str_eq(y->name, "add.1");
  ck_assert_ptr_eq(hk_computation_find_instr(r.old, "add"), r.add);
  ck_assert_ptr_eq(hk_computation_find_instr(c2, "add.1"), y);
  hk_module_free(m2);
  hk_module_free(r.m);
}
END_TEST

/* A clone in the same module shares the source's const attribute parts,
 * copies its literal and drops control edges; no attributes, no block. */
START_TEST(clone_attrs_in_module) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = hk_computation_new(m, "c");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *k = hk_build_constant_f64(c, NULL, HK_F32, 2.5);
  hk_instr *n = hk_instr_new(c, HK_OP_NEGATE, s, 1, &k, NULL);
  hk_instr_attrs(n)->metadata = &(hk_metadata){.op_name = hk_intern_cstr(m, "neg_op")};
  hk_instr_add_control_dep(k, n);
  hk_instr *n2 = hk_instr_clone(c, n, NULL, 1, &k, NULL);
  ck_assert_str_eq(n2->name, "negate.1");
  ck_assert_ptr_nonnull(n2->attrs);
  ck_assert_ptr_ne(n2->attrs, n->attrs);
  ck_assert_ptr_eq(n2->attrs->metadata, n->attrs->metadata);
  ck_assert_int_eq(n2->attrs->n_control_preds, 0);
  ck_assert_int_eq(n->attrs->n_control_preds, 1);
  hk_instr *k2 = hk_instr_clone(c, k, NULL, 0, NULL, NULL);
  ck_assert_ptr_ne(k2->attrs->literal, k->attrs->literal);
  ck_assert_double_eq(hk_literal_get_f64(k2->attrs->literal, 0), 2.5);
  hk_instr *plain = hk_instr_new(c, HK_OP_ABS, s, 1, &k, NULL);
  ck_assert_ptr_null(hk_instr_clone(c, plain, NULL, 1, &k, NULL)->attrs);
  hk_module_free(m);
}
END_TEST

/* A partitioner's pattern at scale: a long chain rebuilt instruction by
 * instruction with taken names, the original dropped, its memory given
 * back; the rebuilt chain is untouched. */
START_TEST(release_removed_after_rebuild) {
  enum { N = 6000 };
  hk_module *m = hk_module_new("m");
  hk_computation *old = hk_computation_new(m, "old");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *x = hk_instr_new(old, HK_OP_PARAMETER, s, 0, NULL, "x");
  hk_computation_register_param(old, x);
  for (int k = 0; k < N; k++) x = hk_instr_new(old, HK_OP_NEGATE, s, 1, &x, "neg");
  hk_computation_set_root(old, x);
  hk_computation *fresh = hk_computation_new(m, "fresh");
  hk_instr *y = NULL;
  for (hk_instr *i = old->first; i; i = i->next)
    y = hk_instr_clone_taking_name(fresh, i, NULL, i->n_operands, y ? &y : NULL);
  hk_computation_set_root(fresh, y);
  hk_module_set_entry(m, fresh);
  hk_module_remove_computation(m, old);
  size_t released = hk_module_release_removed(m);
  ck_assert_uint_ge(released, (size_t)(N - 1000) * sizeof(hk_instr));
  ck_assert_uint_le(released, (size_t)(N + 1) * sizeof(hk_instr));
  ck_assert_int_eq(fresh->n_instrs, N + 1);
  int64_t n = 0;
  for (hk_instr *i = fresh->first; i; i = i->next, n++) {
    ck_assert_ptr_eq(i->parent, fresh);
    ck_assert_int_eq(i->n_operands, n ? 1 : 0);
  }
  ck_assert_int_eq(n, N + 1);
  hk_instr *mid = hk_computation_find_instr(fresh, "neg.4321");
  ck_assert_ptr_nonnull(mid);
  ck_assert_ptr_eq(mid->parent, fresh);
  ck_assert_str_eq(mid->operands[0]->name, "neg.4320");
  ck_assert_ptr_eq(hk_computation_find_instr(fresh, "x"), fresh->first);
  ck_assert_str_eq(hk_instr_new(fresh, HK_OP_NEGATE, s, 1, &y, "neg")->name, "neg.6000");
  ck_assert_uint_eq(hk_module_release_removed(m), released);   /* the same pages again */
  ck_assert_int_eq(fresh->n_instrs, N + 2);
  hk_module *copy = hk_module_clone(m);
  ck_assert_int_eq(copy->entry->n_instrs, N + 2);
  hk_module_free(copy);
  hk_module_free(m);
}
END_TEST

static Suite *take_name_suite(void) {
  Suite *s = suite_create("ir_take_name");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, clone_taking_name_shares_names);
  tcase_add_test(tc, removing_old_instr_keeps_taken_name);
  tcase_add_test(tc, batch_removal_keeps_taken_names);
  tcase_add_test(tc, removal_retires_only_owned_names);
  tcase_add_test(tc, take_name_chains_and_renames);
  tcase_add_test(tc, removal_before_lookup_retires_held_names);
  tcase_add_test(tc, module_clone_keeps_owner);
  tcase_add_test(tc, clone_taking_name_across_modules);
  tcase_add_test(tc, clone_attrs_in_module);
  tcase_add_test(tc, release_removed_after_rebuild);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(take_name_suite)
