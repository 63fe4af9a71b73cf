/* test_stock_cse.c - hlo-cse against a reference on random modules: the
 * pass (list-order post order when the list is one, lookups through first
 * operands' users and a table) must keep the same twins and leave the same
 * user lists as XLA's plain algorithm, whether or not the list is already
 * the post order. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"
#include "testutil.h"

static hk_registry *reg;

static void load_stock(void) { reg = hk_test_registry_with("stock"); }

static void unload_stock(void) { hk_registry_free(reg); }

/* ---- random modules --------------------------------------------------------- */

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* An entry computation of n elementwise f32[4] ops over three parameters,
 * in creation order (operands before users, rarely the post order).  Few
 * ops over few values make many twins, some of them dead; the root is a
 * tuple of the last three values. */
static char *random_module(uint64_t seed, int n) {
  static const char *const unary[] = {"negate", "exponential"};
  static const char *const binary[] = {"add", "multiply", "maximum"};
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "HloModule r\n\nENTRY e {\n");
  for (int k = 0; k < 3; k++) hk_buf_printf(&b, "  v%d = f32[4] parameter(%d)\n", k, k);
  for (int k = 3; k < n + 3; k++) {
    /* operands mostly among the first values, so expressions repeat */
    int span = (int)(next_random(&s) % 4) == 0 ? k : (k < 8 ? k : 8);
    int a = (int)(next_random(&s) % (uint64_t)span), c = (int)(next_random(&s) % (uint64_t)span);
    if (next_random(&s) % 3 == 0)
      hk_buf_printf(&b, "  v%d = f32[4] %s(v%d)\n", k, unary[next_random(&s) % 2], a);
    else
      hk_buf_printf(&b, "  v%d = f32[4] %s(v%d, v%d)\n", k, binary[next_random(&s) % 3], a, c);
  }
  hk_buf_printf(&b, "  ROOT r = (f32[4], f32[4], f32[4]) tuple(v%d, v%d, v%d)\n}\n", n, n + 1,
                n + 2);
  return b.data;
}

/* ---- the reference: XLA's HloCSE over these ops ----------------------------- */

/* Equal for the ops these modules hold: attribute-free ops with the same
 * operands, and scalar constants of the same value. */
static bool twins(const hk_instr *a, const hk_instr *b) {
  if (a->opcode != b->opcode || a->shape != b->shape || a->n_operands != b->n_operands)
    return false;
  if (a->opcode == HK_OP_CONSTANT)
    return hk_literal_get_f64(a->attrs->literal, 0) == hk_literal_get_f64(b->attrs->literal, 0);
  if (a->attrs || b->attrs) return false;
  for (int32_t k = 0; k < a->n_operands; k++)
    if (a->operands[k] != b->operands[k]) return false;
  return true;
}

/* In post order, each instruction free of side effects is replaced by the
 * first earlier kept twin; the replaced ones are removed together
 * afterwards. */
static void reference_cse(hk_module *m) {
  int64_t n = 0;
  hk_instr **order = hk_computation_post_order(m->entry, &n);
  hk_instr **kept = malloc((size_t)n * sizeof *kept), **dead = malloc((size_t)n * sizeof *dead);
  ck_assert(kept && dead);
  int64_t n_kept = 0, n_dead = 0;
  for (int64_t k = 0; k < n; k++) {
    hk_instr *i = order[k], *twin = NULL;
    if (i->opcode == HK_OP_PARAMETER || hk_instr_has_side_effect(i)) continue;
    for (int64_t j = 0; j < n_kept && !twin; j++)
      if (twins(kept[j], i)) twin = kept[j];
    if (!twin) {
      kept[n_kept++] = i;
      continue;
    }
    hk_instr_replace_all_uses(i, twin);
    if (!i->n_users && !hk_instr_is_root(i)) dead[n_dead++] = i;
  }
  ck_assert_ok(hk_instrs_remove(dead, n_dead));
  free(kept);
  free(dead);
  free(order);
}

/* Same printed module, and every instruction has the same users in the
 * same order. */
static void assert_same_modules(hk_module *want, hk_module *got) {
  char *a = hk_module_to_string(want, HK_PRINT_SHORT), *b = hk_module_to_string(got, HK_PRINT_SHORT);
  ck_assert_str_eq(a, b);
  free(a);
  free(b);
  ck_assert_int_eq(want->entry->n_instrs, got->entry->n_instrs);
  for (hk_instr *i = want->entry->first; i; i = i->next) {
    hk_instr *j = hk_computation_find_instr(got->entry, i->name);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(i->n_users, j->n_users);
    for (int32_t u = 0; u < i->n_users; u++) ck_assert_str_eq(i->users[u]->name, j->users[u]->name);
  }
}

/* Runs the reference and the pass on two parses of text and compares;
 * prepare (may be NULL) first changes the pass's copy as it likes
 * (seed passed on). */
static void check_against_reference_prepared(const char *text, void (*prepare)(hk_module *, int),
                                             int seed) {
  hk_module *want = hk_test_parse(text), *got = hk_test_parse(text);
  if (prepare) prepare(got, seed);
  reference_cse(want);
  hk_test_run_pass(reg, got, "hlo-cse", NULL);
  assert_same_modules(want, got);
  hk_module_free(want);
  hk_module_free(got);
}

static void check_against_reference(const char *text) {
  check_against_reference_prepared(text, NULL, 0);
}

/* Lists in creation order: mostly not the post order (the pass falls back
 * to the DFS), with twins, dead twins and popular operands. */
START_TEST(cse_matches_reference_on_random_lists) {
  int iterations = hk_test_iterations(60);
  for (int seed = 0; seed < iterations; seed++) {
    char *text = random_module((uint64_t)seed, 40 + seed * 3);
    check_against_reference(text);
    free(text);
  }
}
END_TEST

/* The same modules printed and parsed again: the list is the post order,
 * so the pass takes it as it is. */
START_TEST(cse_matches_reference_on_post_order_lists) {
  int iterations = hk_test_iterations(60);
  for (int seed = 0; seed < iterations; seed++) {
    char *text = random_module((uint64_t)seed + 1000, 40 + seed * 3);
    hk_module *m = hk_test_parse(text);
    char *printed = hk_module_to_string(m, HK_PRINT_SHORT);
    hk_module_free(m);
    check_against_reference(printed);
    free(printed);
    free(text);
  }
}
END_TEST

/* Gives m's entry ids far beyond its next id, unrelated to the order. */
static void set_ids_from_outside(hk_module *m, int seed) {
  int64_t n = m->entry->n_instrs, k = 0;
  for (hk_instr *i = m->entry->first; i; i = i->next, k++)
    i->id = m->next_id + 100000 + 7 * (n - k) + seed;
}

/* Ids set from outside (an imported module's): unique, but far beyond the
 * module's next id and in no relation to the order, so the pass's table of
 * positions by id grows as its walk meets them. */
START_TEST(cse_matches_reference_with_ids_set_from_outside) {
  int iterations = hk_test_iterations(20);
  for (int seed = 0; seed < iterations; seed++) {
    char *text = random_module((uint64_t)seed + 2000, 40 + seed * 5);
    check_against_reference_prepared(text, set_ids_from_outside, seed);
    free(text);
  }
}
END_TEST

/* Side effects are asked of an instruction only once it meets a twin, so
 * identical side-effecting instructions must still all stay, whether they
 * are found through their operand's users (few) or the table (many), while
 * their pure neighbours merge. */
START_TEST(cse_keeps_identical_side_effects_among_merges) {
  for (int many = 0; many < 2; many++) {
    int n = many ? 20 : 3;
    hk_buf b;
    hk_buf_init(&b);
    hk_buf_puts(&b, "HloModule s\n\nENTRY e {\n  p = f32[4] parameter(0)\n"
                    "  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n");
    for (int k = 0; k < n; k++)
      hk_buf_printf(&b,
                    "  c%d = f32[4] custom-call(p), custom_call_target=\"x\", "
                    "custom_call_has_side_effect=true\n"
                    "  g%d = f32[4] negate(p)\n  r%d = f32[4] rng(lo, hi), distribution=rng_uniform\n",
                    k, k, k);
    hk_buf_puts(&b, "  ROOT t = (");
    for (int k = 0; k < 3 * n; k++) hk_buf_printf(&b, "%sf32[4]", k ? ", " : "");
    hk_buf_puts(&b, ") tuple(");
    for (int k = 0; k < n; k++) hk_buf_printf(&b, "%sc%d, g%d, r%d", k ? ", " : "", k, k, k);
    hk_buf_puts(&b, ")\n}\n");
    check_against_reference(b.data);
    hk_module *m = hk_test_parse(b.data);
    ck_assert(hk_test_run_pass(reg, m, "hlo-cse", NULL));
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_CUSTOM_CALL), n);
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_RNG), n);
    ck_assert_int_eq(hk_test_count_op(m, HK_OP_NEGATE), 1);
    hk_module_free(m);
    hk_buf_free(&b);
  }
}
END_TEST

static Suite *stock_cse_suite(void) {
  Suite *s = suite_create("stock_cse");
  TCase *tc = tcase_create("reference");
  tcase_add_checked_fixture(tc, load_stock, unload_stock);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, cse_matches_reference_on_random_lists);
  tcase_add_test(tc, cse_matches_reference_on_post_order_lists);
  tcase_add_test(tc, cse_matches_reference_with_ids_set_from_outside);
  tcase_add_test(tc, cse_keeps_identical_side_effects_among_merges);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(stock_cse_suite)
