/* test_ir_remove.c - Check suite for hk_instrs_remove (host/ir/remove_many.c): many removals at once leave the IR exactly as the same removals one by one. */
#include "testutil.h"

/* ENTRY: a constant k and parameter p; a0..a9 = add(k, p) (k's users in
 * that order), d = multiply(a3, a3), r = the root, a sum over a0..a9. */
static const char *kModule =
    "HloModule m\n\nENTRY e {\n"
    "  p = f32[4] parameter(0)\n  k = f32[4] constant({1, 2, 3, 4})\n"
    "  a0 = f32[4] add(k, p)\n  a1 = f32[4] add(k, p)\n  a2 = f32[4] add(k, p)\n"
    "  a3 = f32[4] add(k, p)\n  a4 = f32[4] add(k, p)\n  a5 = f32[4] add(k, p)\n"
    "  a6 = f32[4] add(k, p)\n  a7 = f32[4] add(k, p)\n  a8 = f32[4] add(k, p)\n"
    "  a9 = f32[4] add(k, p)\n  d = f32[4] multiply(a3, a3)\n"
    "  ROOT r = f32[4] add(p, p)\n}\n";

static hk_instr *find(hk_module *m, const char *name) {
  return hk_computation_find_instr(m->entry, name);
}

/* "name name ..." of i's users, in order. */
static void users_text(const hk_instr *i, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int32_t k = 0; k < i->n_users && n < cap; k++)
    n += (size_t)snprintf(out + n, cap - n, "%s%s", k ? " " : "", i->users[k]->name);
}

static void list_text(const hk_computation *c, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (const hk_instr *i = c->first; i && n < cap; i = i->next)
    n += (size_t)snprintf(out + n, cap - n, "%s ", i->name);
}

/* one and many end alike: the user lists of k and p, and the entry's list. */
static void assert_same_lists(hk_module *one, hk_module *many) {
  char a[2048], b[2048];
  static const char *const names[] = {"k", "p"};
  for (int n = 0; n < 2; n++) {
    users_text(find(one, names[n]), a, sizeof a);
    users_text(find(many, names[n]), b, sizeof b);
    ck_assert_str_eq(a, b);
  }
  list_text(one->entry, a, sizeof a);
  list_text(many->entry, b, sizeof b);
  ck_assert_str_eq(a, b);
}

static const char *const kDead[] = {"d", "a7", "a3", "a0", "a9", "a5"};
enum { kNDead = sizeof kDead / sizeof kDead[0] };

START_TEST(batch_matches_one_by_one) {
  hk_module *one = hk_test_parse(kModule), *many = hk_test_parse(kModule);
  hk_instr *v[kNDead];
  for (int k = 0; k < kNDead; k++) {
    ck_assert_ok(hk_instr_remove(find(one, kDead[k])));
    v[k] = find(many, kDead[k]);
  }
  ck_assert_ok(hk_instrs_remove(v, kNDead));
  assert_same_lists(one, many);
  char b[512];
  users_text(find(many, "k"), b, sizeof b);
  ck_assert_str_eq(b, "a6 a1 a2 a8 a4");   /* XLA's order: the last user takes a freed slot */
  ck_assert_int_eq(many->entry->n_instrs, one->entry->n_instrs);
  ck_assert_int_eq(many->entry->n_instrs, 14 - kNDead);
  for (int k = 0; k < kNDead; k++) {
    ck_assert_ptr_null(v[k]->parent);
    ck_assert_ptr_null(find(many, kDead[k]));   /* the name is retired */
  }
  hk_verify_options vo = hk_verify_defaults();
  ck_assert_ok(hk_verify_module(many, &vo));
  hk_module_free(one);
  hk_module_free(many);
}
END_TEST

/* An instruction whose user comes later in the list (or stays) is
 * refused, and so are roots and repeats; nothing is removed then. */
START_TEST(refuses_and_removes_nothing) {
  hk_module *m = hk_test_parse(kModule);
  hk_instr *a3 = find(m, "a3"), *d = find(m, "d"), *r = find(m, "r"), *a1 = find(m, "a1");
  hk_instr *users_late[2] = {a3, d};
  hk_instr *root[2] = {a1, r};
  hk_instr *twice[3] = {d, a1, d};
  hk_status *st[3] = {hk_instrs_remove(users_late, 2), hk_instrs_remove(root, 2),
                      hk_instrs_remove(twice, 3)};
  for (int k = 0; k < 3; k++) {
    ck_assert_ptr_nonnull(st[k]);
    ck_assert_int_eq(st[k]->code, HK_FAILED_PRECONDITION);
    hk_status_free(st[k]);
  }
  ck_assert_int_eq(m->entry->n_instrs, 14);
  ck_assert_int_eq(find(m, "k")->n_users, 10);
  ck_assert_int_eq(a3->n_users, 1);
  ck_assert_ptr_eq(d->parent, m->entry);
  hk_module_free(m);
}
END_TEST

/* The case it exists for: a value shared by very many instructions that
 * all die together. */
START_TEST(shared_operand_many_users) {
  hk_module *m = hk_module_new("m");
  hk_computation *c = hk_computation_new(m, "e");
  const hk_shape *s = hk_shape_scalar(m, HK_F32);
  hk_instr *k = hk_build_constant_f64(c, NULL, HK_F32, 1.0);
  enum { N = 20000 };
  hk_instr **v = malloc(sizeof *v * N);
  ck_assert_ptr_nonnull(v);
  for (int i = 0; i < N; i++) v[i] = hk_instr_new(c, HK_OP_NEGATE, s, 1, &k, "n");
  hk_instr *keep = v[N / 2];
  hk_computation_set_root(c, keep);
  hk_module_set_entry(m, c);
  v[N / 2] = v[N - 1];
  ck_assert_ok(hk_instrs_remove(v, N - 1));
  ck_assert_int_eq(k->n_users, 1);
  ck_assert_ptr_eq(k->users[0], keep);
  ck_assert_int_eq(c->n_instrs, 2);
  ck_assert_ptr_eq(c->first, k);
  ck_assert_ptr_eq(c->last, keep);
  free(v);
  hk_module_free(m);
}
END_TEST

/* k has more users than a list that is searched (it gets indexed), p
 * fewer; both end exactly as after one removal at a time. */
/* odd_ids: 0 as parsed, 1 users of k share ids, 2 ids beyond next_id
 * (ids set from outside, as an imported module may have them). */
static void long_lists_case(int odd_ids) {
  char text[8192];
  size_t n = (size_t)snprintf(text, sizeof text,
                              "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
                              "  k = f32[4] constant({1, 2, 3, 4})\n");
  for (int a = 0; a < 80; a++)
    n += (size_t)snprintf(text + n, sizeof text - n, "  a%d = f32[4] add(k, %s)\n", a,
                          a % 8 == 0 ? "p" : "k");
  snprintf(text + n, sizeof text - n, "  ROOT r = f32[4] add(p, p)\n}\n");
  hk_module *one = hk_test_parse(text), *many = hk_test_parse(text);
  hk_instr *kk = find(many, "k");
  for (int32_t u = 0; odd_ids && u < kk->n_users; u++)
    kk->users[u]->id = odd_ids == 1 ? 7 + u % 3 : ((int64_t)1 << 40) + u;
  hk_instr *v[40];
  int nv = 0;
  for (int a = 79; a >= 0; a -= 2) {
    char name[16];
    snprintf(name, sizeof name, "a%d", (a * 7) % 80);
    ck_assert_ok(hk_instr_remove(find(one, name)));
    v[nv++] = find(many, name);
  }
  ck_assert_ok(hk_instrs_remove(v, nv));
  assert_same_lists(one, many);
  ck_assert_int_eq(find(many, "k")->n_users, 40);
  for (int k = 0; k < nv; k++) ck_assert_int_eq(v[k]->flags & 4, 0);   /* marks cleared */
  ck_assert_int_eq(kk->flags & 16, 0);
  hk_module_free(one);
  hk_module_free(many);
}

START_TEST(long_and_short_lists_match_one_by_one) {
  long_lists_case(0);
  long_lists_case(1);
  long_lists_case(2);
}
END_TEST

/* k with 40 users a0..a39 (a long list: indexed by user pointer when
 * enough of them go).  Removes the named users of k in one batch from one
 * parse and one at a time from another; returns the batch's module. */
static hk_module *remove_from_long_list(const char *const *dead, int n_dead) {
  char text[4096];
  size_t n = (size_t)snprintf(text, sizeof text,
                              "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
                              "  k = f32[4] constant({1, 2, 3, 4})\n");
  for (int a = 0; a < 40; a++)
    n += (size_t)snprintf(text + n, sizeof text - n, "  a%d = f32[4] add(k, p)\n", a);
  snprintf(text + n, sizeof text - n, "  ROOT r = f32[4] add(p, p)\n}\n");
  hk_module *one = hk_test_parse(text), *many = hk_test_parse(text);
  hk_instr *v[40];
  for (int k = 0; k < n_dead; k++) {
    ck_assert_ok(hk_instr_remove(find(one, dead[k])));
    v[k] = find(many, dead[k]);
  }
  ck_assert_ok(hk_instrs_remove(v, n_dead));
  assert_same_lists(one, many);
  hk_module_free(one);
  return many;
}

/* The known answer for a long list: each removal moves the last user into
 * the freed slot, a39 (moved first) goes last and a35 takes its slot. */
START_TEST(long_list_keeps_one_at_a_time_order) {
  static const char *const dead[] = {"a0", "a1", "a2", "a3", "a39"};
  hk_module *m = remove_from_long_list(dead, 5);
  char want[1024], got[1024];
  size_t n = (size_t)snprintf(want, sizeof want, "a35 a38 a37 a36");
  for (int a = 4; a <= 34; a++) n += (size_t)snprintf(want + n, sizeof want - n, " a%d", a);
  users_text(find(m, "k"), got, sizeof got);
  ck_assert_str_eq(got, want);
  hk_module_free(m);
}
END_TEST

/* A few drops from a long list (searched, not indexed), the last user
 * among them, and every user of it at once. */
START_TEST(long_list_few_and_all_drops_match_one_by_one) {
  static const char *const few[] = {"a39", "a7", "a38"};
  for (int k = 1; k <= 3; k++) hk_module_free(remove_from_long_list(few, k));
  const char *all[40];
  char names[40][8];
  for (int a = 0; a < 40; a++) {
    snprintf(names[a], sizeof names[a], "a%d", (a * 13) % 40);
    all[a] = names[a];
  }
  hk_module *m = remove_from_long_list(all, 40);
  ck_assert_int_eq(find(m, "k")->n_users, 0);
  hk_module_free(m);
}
END_TEST

static Suite *ir_remove_suite(void) {
  Suite *s = suite_create("ir_remove");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, batch_matches_one_by_one);
  tcase_add_test(tc, refuses_and_removes_nothing);
  tcase_add_test(tc, shared_operand_many_users);
  tcase_add_test(tc, long_and_short_lists_match_one_by_one);
  tcase_add_test(tc, long_list_keeps_one_at_a_time_order);
  tcase_add_test(tc, long_list_few_and_all_drops_match_one_by_one);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(ir_remove_suite)
