/* test_sharding.c - Check suite for host/sharding: parse/print in XLA's spellings, interning, equivalence, canonical forms, tiles, validation, conformance texts. */
#include <json-c/json.h>

#include "testutil.h"
#include "sharding/metadata.h"

static hk_module *M;

static void setup(void) { M = hk_module_new("sharding_test"); }
static void teardown(void) { hk_module_free(M); }

/* Parses the whole text (fails the test on error or leftovers). */
static const hk_sharding *P(const char *text) {
  const hk_sharding *s = NULL;
  size_t used = 0;
  ck_assert_ok(hk_sharding_parse(M, text, strlen(text), &s, &used));
  ck_assert_uint_eq(used, strlen(text));
  return s;
}

static void assert_prints(const hk_sharding *s, const char *want) {
  char *t = hk_sharding_to_string(s);
  ck_assert_str_eq(t, want);
  free(t);
}

/* Parse failure whose message starts with "@OFFSET: " and contains sub. */
static void assert_parse_error(const char *text, size_t offset, const char *sub) {
  const hk_sharding *s = NULL;
  hk_status *st = hk_sharding_parse(M, text, strlen(text), &s, NULL);
  ck_assert_msg(st != NULL, "expected an error for %s", text);
  ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
  char prefix[32];
  snprintf(prefix, sizeof prefix, "@%zu: ", offset);
  ck_assert_msg(strncmp(st->message, prefix, strlen(prefix)) == 0, "message '%s' for %s, want prefix %s",
                st->message, text, prefix);
  ck_assert_msg(strstr(st->message, sub), "message '%s' lacks '%s'", st->message, sub);
  hk_status_free(st);
}

static const hk_shape *array_shape(int rank, const int64_t *dims) {
  return hk_shape_array_no_layout(M, HK_F32, rank, dims);
}

/* ---- round trips ---------------------------------------------------------- */

static const char *const kRoundTrip[] = {
    "{replicated}",
    "{manual}",
    "{unknown}",
    "{unreduced}",
    "{maximal device=3}",
    "{maximal device=0}",
    "{devices=[2,2]0,1,2,3}",
    "{devices=[2,2]<=[4]}",
    "{devices=[4,2]<=[2,4]T(1,0)}",
    "{devices=[2,2]3,2,1,0}",
    "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}",
    "{devices=[1,2,2]<=[4] last_tile_dims={manual}}",
    "{devices=[2,2,2,2]0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 last_tile_dims={manual, replicated}}",
    "{devices=[2,2,2,2]<=[16] last_tile_dims={manual, replicated} shard_like 1}",
    "{devices=[8,1,1,4]<=[2,4,4]T(2,1,0) last_tile_dim_replicate}",
    "{{replicated}, {devices=[2]0,1}}",
    "{{maximal device=0}}",
    "{}",
    "{{replicated}, {manual}, {maximal device=1}, {devices=[2]0,1}, {unknown}, /*index=5*/{replicated}}",
    "{unknown shard_as 1}",
    "{replicated shard_like 2}",
    "{devices=[2]0,1 shard_as 3 metadata={op_name=\"x\"}}",
    "{replicated metadata={op_name=\"x\" source_file=\"f\" source_line=3}}",
    "{replicated metadata={op_type=\"Add\" op_name=\"a/b\" source_file=\"f.py\" source_line=12}}",
    "{maximal device=1 metadata={{op_name=\"a\"}, {op_name=\"b\"}}}",
    "{{devices=[1,4]0,1,2,3 metadata={op_name=\"d\"}}, {devices=[1,2,2]0,1,2,3 last_tile_dim_replicate "
    "metadata={op_name=\"e\"}}}",
    "{devices=[2,2]0,1,2,3 last_tile_dim_replicate metadata={op_name=\"q\\\"z\\n\"}}",
};

START_TEST(test_round_trip) {
  for (size_t i = 0; i < sizeof kRoundTrip / sizeof *kRoundTrip; i++) assert_prints(P(kRoundTrip[i]), kRoundTrip[i]);
}
END_TEST

START_TEST(test_spellings_accepted) {
  assert_prints(P("{devices=[2, 2] 0, 1, 2, 3}"), "{devices=[2,2]0,1,2,3}");
  assert_prints(P("{ maximal  device=0 }"), "{maximal device=0}");
  assert_prints(P("{device=0 maximal}"), "{maximal device=0}");
  assert_prints(P("{{manual},{manual}}"), "{{manual}, {manual}}");
  assert_prints(P("{devices=[1,1,2,2]<=[4] last_tile_dims={replicated,manual}}"),
                "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}");
  assert_prints(P("{devices=[8,1,1,4]0,16,24,8,2,18,26,10,4,20,28,12,6,22,30,14,7,23,\n"
                  "    31,15,5,21,29,13,3,19,27,11,1,17,25,9}"),
                "{devices=[8,1,1,4]0,16,24,8,2,18,26,10,4,20,28,12,6,22,30,14,7,23,"
                "31,15,5,21,29,13,3,19,27,11,1,17,25,9}");
  /* iota reshape dims are canonicalised as XLA always does */
  assert_prints(P("{devices=[2,2]<=[2,2]}"), "{devices=[2,2]<=[4]}");
  assert_prints(P("{devices=[4,2]<=[2,1,4]T(2,1,0)}"), "{devices=[4,2]<=[2,4]T(1,0)}");
  /* metadata printed in XLA's field order, escapes as CEscape */
  assert_prints(P("{replicated metadata={source_line=3 op_name=\"it's\" op_type=\"T\"}}"),
                "{replicated metadata={op_type=\"T\" op_name=\"it\\'s\" source_line=3}}");
  /* an explicit list stays a list even when it is an iota */
  assert_prints(P("{devices=[2,2]0,1,2,3}"), "{devices=[2,2]0,1,2,3}");
  /* consumed stops at the closing brace */
  const hk_sharding *s;
  size_t used;
  const char *t = "{replicated}, metadata={}";
  ck_assert_ok(hk_sharding_parse(M, t, strlen(t), &s, &used));
  ck_assert_uint_eq(used, 12);
}
END_TEST

START_TEST(test_print_snprintf) {
  const hk_sharding *s = P("{devices=[2,2]<=[4]}");
  char buf[8];
  size_t n = hk_sharding_print(s, buf, sizeof buf);
  ck_assert_uint_eq(n, strlen("{devices=[2,2]<=[4]}"));
  ck_assert_str_eq(buf, "{device");
  ck_assert_uint_eq(hk_sharding_print(s, NULL, 0), n);
  hk_buf b;
  hk_buf_init(&b);
  hk_buf_puts(&b, "sharding=");
  hk_sharding_print_buf(s, &b);
  ck_assert_int_eq((int)b.len, (int)strlen("sharding={devices=[2,2]<=[4]}"));
  ck_assert(memcmp(b.data, "sharding={devices=[2,2]<=[4]}", b.len) == 0);
  hk_buf_free(&b);
}
END_TEST

/* ---- errors ------------------------------------------------------------------- */

START_TEST(test_parse_errors) {
  assert_parse_error("{devices=[2,2]0,1,2}", 0, "sharding device count 3 does not match the tile assignment size 4");
  assert_parse_error("{replicated", 11, "expected '}'");
  assert_parse_error("{devices=[2,2", 13, "expected ']'");
  assert_parse_error("{maximal}", 0, "maximal shardings should have exactly one device assigned");
  assert_parse_error("{replicated device=1}", 0, "replicated shardings should not have any devices assigned");
  assert_parse_error("{devices=[2]0}", 0, "must have more than one device");
  assert_parse_error("{devices=[2]0}", 0, "must have more than one device");  /* again, via the text cache */
  assert_parse_error("{maximal device=x}", 16, "device= attribute must be an integer");
  assert_parse_error("{devices=[2,0]<=[0]}", 14, "must be positive");
  assert_parse_error("{devices=[2]0,1 last_tile_dim_replicate last_tile_dims={manual}}", 0, "cannot both be given");
  assert_parse_error("{devices=[2]0,1 last_tile_dims={manual, manual}}", 0, "2 trailing subgroup dims");
  char big[512] = "{devices=[";
  for (int i = 0; i < 70; i++) strcat(big, "1,");
  strcat(big, "1]<=[1]}");
  assert_parse_error(big, 136, "too many dimensions");
  assert_parse_error("{devices=[4]<=[2,2]T(0,2)}", 20, "Out of range iota");
  assert_parse_error("{devices=[4]<=[8]}", 0, "iota tile assignment size 8 does not match");
  assert_parse_error("{bogus}", 1, "unexpected token");
  assert_parse_error("{last_tile_dim_replicate}", 0, "must have a tile assignment");
  assert_parse_error("{replicated metadata={op_name=\"x}}", 30, "unterminated string");
  assert_parse_error("{{replicated}, {manual}", 23, "expected '}' to end tuple sharding");
  assert_parse_error("replicated", 0, "expected '{'");
  assert_parse_error("{devices=[2]0,1 last_tile_dims={bogus}}", 32, "sharding type");
}
END_TEST

/* ---- interning ---------------------------------------------------------------- */

START_TEST(test_interning) {
  const hk_sharding *a = P("{devices=[2,2]0,1,2,3}");
  ck_assert_ptr_eq(a, P("{devices=[2, 2]0,1,2,3}"));
  int64_t dims[] = {2, 2}, devs[] = {0, 1, 2, 3};
  ck_assert_ptr_eq(a, hk_sharding_tiled(M, 2, dims, devs, false));
  const hk_sharding *io = hk_sharding_tiled_iota(M, 2, dims, false);
  ck_assert_ptr_eq(io, P("{devices=[2,2]<=[4]}"));
  ck_assert_ptr_ne(io, a);               /* spelling is part of identity */
  ck_assert(hk_sharding_equivalent(io, a));
  ck_assert_ptr_eq(hk_sharding_replicated(M), P("{replicated}"));
  ck_assert_ptr_eq(hk_sharding_manual(M), P("{manual}"));
  ck_assert_ptr_eq(hk_sharding_maximal(M, 3), P("{maximal device=3}"));
  const hk_sharding *md = P("{replicated metadata={op_name=\"x\"}}");
  ck_assert_ptr_ne(md, hk_sharding_replicated(M));
  ck_assert_ptr_eq(hk_sharding_without_metadata(M, md), hk_sharding_replicated(M));
  ck_assert_ptr_eq(md, P("{replicated metadata={op_name=\"x\"}}"));
  const hk_sharding *elems[] = {hk_sharding_replicated(M), a};
  ck_assert_ptr_eq(hk_sharding_tuple(M, 2, elems), P("{{replicated}, {devices=[2,2]0,1,2,3}}"));
  ck_assert_ptr_eq(hk_sharding_without_shard_group(M, P("{unknown shard_as 1}")), P("{unknown}"));
  /* import into another module: same meaning, that module's pointer */
  hk_module *m2 = hk_module_new("other");
  const hk_sharding *b = hk_sharding_import(m2, md);
  ck_assert_ptr_ne(b, md);
  assert_prints(b, "{replicated metadata={op_name=\"x\"}}");
  ck_assert(hk_sharding_equivalent(b, hk_sharding_replicated(M)));
  hk_module_free(m2);
}
END_TEST

/* ---- equivalence and canonical form ------------------------------------------ */

START_TEST(test_equivalent) {
  ck_assert(hk_sharding_equivalent(P("{devices=[2,2]0,1,2,3}"), P("{devices=[2,2]<=[4]}")));
  int64_t one[] = {1, 1}, dev0[] = {0};
  ck_assert(hk_sharding_equivalent(hk_sharding_tiled(M, 2, one, dev0, false), P("{replicated}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[2,2]<=[2,2]T(1,0)}"), P("{devices=[2,2]0,2,1,3}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[4,2]<=[2,4]T(1,0)}"), P("{devices=[4,2]0,4,1,5,2,6,3,7}")));
  ck_assert(!hk_sharding_equivalent(P("{devices=[2,2]0,1,2,3}"), P("{devices=[2,2]0,2,1,3}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[2,2]0,1,2,3 last_tile_dims={replicated}}"),
                                   P("{devices=[2,2]0,1,2,3 last_tile_dim_replicate}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[2,2]1,0,3,2 last_tile_dim_replicate}"),
                                   P("{devices=[2,2]<=[4] last_tile_dim_replicate}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[1,1,4]<=[4] last_tile_dim_replicate}"), P("{replicated}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[1,1,4]<=[4] last_tile_dims={manual}}"), P("{manual}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"),
                                   P("{devices=[2,1,2,1]0,1,2,3 last_tile_dims={replicated, manual}}")));
  ck_assert(hk_sharding_equivalent(P("{devices=[2,1]0,1 metadata={op_name=\"a\"}}"), P("{devices=[2,1]0,1}")));
  ck_assert(!hk_sharding_equivalent(P("{devices=[2,1]0,1 shard_as 1}"), P("{devices=[2,1]0,1}")));
  ck_assert(!hk_sharding_equivalent(P("{devices=[2,1]0,1}"), P("{devices=[1,2]0,1}")));
  ck_assert(!hk_sharding_equivalent(P("{maximal device=0}"), P("{replicated}")));
  ck_assert(!hk_sharding_equivalent(P("{maximal device=0}"), P("{{maximal device=0}, {maximal device=1}}")));
  ck_assert(hk_sharding_equivalent(P("{maximal device=0}"), P("{{maximal device=0}, {maximal device=0}}")));
  ck_assert(hk_sharding_equivalent(P("{{devices=[2]0,1}, {replicated}}"),
                                   P("{{devices=[2]<=[2]}, {devices=[1,2]0,1 last_tile_dim_replicate}}")));
  ck_assert(!hk_sharding_equivalent(P("{{devices=[2]0,1}, {replicated}}"), P("{{devices=[2]1,0}, {replicated}}")));
  ck_assert(!hk_sharding_equivalent(P("{manual}"), P("{replicated}")));
}
END_TEST

static void assert_canonical(const char *in, const char *want) {
  assert_prints(hk_sharding_canonical(M, P(in)), want);
  /* idempotent */
  assert_prints(hk_sharding_canonical(M, hk_sharding_canonical(M, P(in))), want);
}

START_TEST(test_canonical) {
  assert_canonical("{devices=[1,1,2]0,1 last_tile_dim_replicate}", "{replicated}");
  assert_canonical("{devices=[2,2]0,1,2,3 last_tile_dims={replicated}}", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}");
  assert_canonical("{devices=[2,2,1]0,1,2,3 last_tile_dim_replicate}", "{devices=[2,2]0,1,2,3}");
  assert_canonical("{devices=[2,2]3,1,2,0 last_tile_dim_replicate}", "{devices=[2,2]1,3,0,2 last_tile_dim_replicate}");
  assert_canonical("{devices=[1,1,2,2]0,1,2,3 last_tile_dims={replicated, manual} metadata={op_name=\"a\"}}",
                   "{devices=[1,1,2,2]0,2,1,3 last_tile_dims={manual, replicated} metadata={op_name=\"a\"}}");
  assert_canonical("{devices=[2,2,2]<=[8] last_tile_dims={replicated, manual}}",
                   "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}");
  assert_canonical("{devices=[2,1,2]<=[4] last_tile_dims={manual, replicated}}",
                   "{devices=[2,2]<=[4] last_tile_dim_replicate}");
  assert_canonical("{devices=[2,2,1]<=[4] last_tile_dims={manual, replicated}}",
                   "{devices=[2,2]<=[4] last_tile_dims={manual}}");
  assert_canonical("{devices=[2,2,1,2]<=[8] last_tile_dims={manual, manual, replicated}}",
                   "{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}");
  assert_canonical("{devices=[1,4]<=[4] last_tile_dims={manual}}", "{manual}");
  assert_canonical("{devices=[2,2]<=[4] shard_like 2}", "{devices=[2,2]<=[4] shard_like 2}");
  assert_canonical("{devices=[4,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
                   "{devices=[4,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}");
  assert_canonical("{{devices=[1,2]0,1 last_tile_dim_replicate}, {maximal device=0}}", "{{replicated}, {maximal device=0}}");
  assert_canonical("{devices=[2,2]0,1,2,3}", "{devices=[2,2]0,1,2,3}");
}
END_TEST

/* ---- queries ----------------------------------------------------------------- */

START_TEST(test_queries) {
  const hk_sharding *s = P("{devices=[2,3,2]<=[12] last_tile_dim_replicate}");
  ck_assert(hk_sharding_is_tiled(s));
  ck_assert(!hk_sharding_is_replicated(s));
  ck_assert_int_eq(hk_sharding_data_rank(s), 2);
  ck_assert_int_eq(hk_sharding_num_tiles(s), 6);
  ck_assert_int_eq(hk_sharding_replication_factor(s), 2);
  ck_assert_int_eq(hk_sharding_dim_partitions(s, 1), 3);
  ck_assert_int_eq(hk_sharding_dim_partitions(s, 2), 1);
  const hk_sharding *sub = P("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}");
  ck_assert_int_eq(hk_sharding_data_rank(sub), 1);
  ck_assert_int_eq(hk_sharding_replication_factor(sub), 2);
  ck_assert(hk_sharding_is_replicated(P("{devices=[1,1,2]0,1 last_tile_dim_replicate}")));
  ck_assert(!hk_sharding_is_tiled(P("{devices=[1,1,2]0,1 last_tile_dim_replicate}")));
  ck_assert(hk_sharding_is_replicated(P("{{replicated}, {replicated}}")));
  ck_assert(hk_sharding_is_manual(P("{{manual}, {devices=[1,2]0,1 last_tile_dims={manual}}}")));
  ck_assert(hk_sharding_is_maximal(P("{maximal device=2}")));
  ck_assert(!hk_sharding_is_maximal(P("{replicated}")));
  ck_assert(hk_sharding_is_tuple(P("{{replicated}}")));
  ck_assert_int_eq(hk_sharding_unique_device(P("{maximal device=2}")), 2);
  ck_assert_int_eq(hk_sharding_unique_device(P("{{maximal device=2}, {maximal device=2}}")), 2);
  ck_assert_int_eq(hk_sharding_unique_device(P("{{maximal device=2}, {maximal device=1}}")), -1);
  ck_assert_int_eq(hk_sharding_unique_device(P("{replicated}")), -1);
  ck_assert_int_eq(hk_sharding_num_tiles(P("{replicated}")), 1);
}
END_TEST

START_TEST(test_tile_shape) {
  int64_t d5[] = {5};
  const hk_shape *s5 = array_shape(1, d5);
  const hk_shape *t = hk_sharding_tile_shape(M, P("{devices=[2]0,1}"), s5);
  ck_assert_int_eq(t->rank, 1);
  ck_assert_int_eq(t->dims[0], 3);
  int64_t d57[] = {5, 7};
  t = hk_sharding_tile_shape(M, P("{devices=[2,3]<=[6]}"), array_shape(2, d57));
  ck_assert_int_eq(t->dims[0], 3);
  ck_assert_int_eq(t->dims[1], 3);
  t = hk_sharding_tile_shape(M, P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), array_shape(2, d57));
  ck_assert_int_eq(t->dims[0], 3);
  ck_assert_int_eq(t->dims[1], 7);
  ck_assert_ptr_eq(hk_sharding_tile_shape(M, P("{replicated}"), s5), s5);
  ck_assert_ptr_null(hk_sharding_tile_shape(M, P("{devices=[2,1]0,1}"), s5));
  const hk_shape *leaves[] = {s5, array_shape(2, d57)};
  const hk_shape *tup = hk_shape_tuple(M, 2, leaves);
  t = hk_sharding_tile_shape(M, P("{{devices=[4]<=[4]}, {replicated}}"), tup);
  ck_assert(hk_shape_is_tuple(t));
  ck_assert_int_eq(t->tuple[0]->dims[0], 2);
  ck_assert_ptr_eq(t->tuple[1], leaves[1]);
  t = hk_sharding_tile_shape(M, P("{devices=[5]<=[5]}"), hk_shape_tuple(M, 1, leaves));
  ck_assert_int_eq(t->tuple[0]->dims[0], 1);
}
END_TEST

START_TEST(test_tile_offsets) {
  /* [2,2]<=[2,2]T(1,0) is devices 0,2,1,3 */
  const hk_sharding *s = P("{devices=[2,2]<=[2,2]T(1,0)}");
  int64_t dims[] = {4, 6}, idx[2], off[2], lim[2];
  const hk_shape *sh = array_shape(2, dims);
  static const int64_t want_idx[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  for (int d = 0; d < 4; d++) {
    ck_assert(hk_sharding_tile_index(s, d, idx));
    ck_assert_int_eq(idx[0], want_idx[d][0]);
    ck_assert_int_eq(idx[1], want_idx[d][1]);
    ck_assert(hk_sharding_tile_offset(s, sh, d, off));
    ck_assert_int_eq(off[0], 2 * want_idx[d][0]);
    ck_assert_int_eq(off[1], 3 * want_idx[d][1]);
    ck_assert(hk_sharding_tile_limit(s, sh, d, lim));
    ck_assert_int_eq(lim[0], 2 * want_idx[d][0] + 2);
    ck_assert_int_eq(lim[1], 3 * want_idx[d][1] + 3);
    ck_assert_int_eq(hk_sharding_device_position(s, d), 2 * want_idx[d][0] + want_idx[d][1]);
  }
  ck_assert(!hk_sharding_tile_index(s, 4, idx));
  ck_assert(!hk_sharding_tile_index(s, -1, idx));
  /* uneven: f32[5] over 2 -> [0,3) and [3,5); over 4 -> ceil 2, last tile empty at 5 */
  int64_t d5[] = {5};
  const hk_shape *s5 = array_shape(1, d5);
  ck_assert(hk_sharding_tile_offset(P("{devices=[2]1,0}"), s5, 0, off));
  ck_assert_int_eq(off[0], 3);
  ck_assert(hk_sharding_tile_limit(P("{devices=[2]1,0}"), s5, 0, lim));
  ck_assert_int_eq(lim[0], 5);
  ck_assert(hk_sharding_tile_offset(P("{devices=[4]<=[4]}"), s5, 3, off));
  ck_assert_int_eq(off[0], 5);
  /* partial replication: both replicas of a tile share the offset */
  const hk_sharding *pr = P("{devices=[2,2]<=[4] last_tile_dim_replicate}");
  ck_assert(hk_sharding_tile_offset(pr, s5, 1, off));
  ck_assert_int_eq(off[0], 0);
  ck_assert(hk_sharding_tile_offset(pr, s5, 2, off));
  ck_assert_int_eq(off[0], 3);
  /* sparse device ids use the sorted inverse map */
  const hk_sharding *sp = P("{devices=[3]1000000,5,77}");
  ck_assert(hk_sharding_tile_index(sp, 77, idx));
  ck_assert_int_eq(idx[0], 2);
  ck_assert(hk_sharding_tile_index(sp, 1000000, idx));
  ck_assert_int_eq(idx[0], 0);
  ck_assert(!hk_sharding_tile_index(sp, 6, idx));
  /* maximal: the whole shape */
  ck_assert(hk_sharding_tile_offset(P("{maximal device=1}"), s5, 1, off));
  ck_assert_int_eq(off[0], 0);
}
END_TEST

START_TEST(test_subsharding) {
  const hk_sharding *t = P("{{replicated}, {maximal device=1}, {devices=[2]0,1}}");
  int64_t i1[] = {1}, i5[] = {5};
  assert_prints(hk_sharding_subsharding(t, 1, i1), "{maximal device=1}");
  ck_assert_ptr_null(hk_sharding_subsharding(t, 1, i5));
  const hk_sharding *r = P("{replicated}");
  ck_assert_ptr_eq(hk_sharding_subsharding(r, 1, i1), r);
  int64_t d2[] = {2};
  const hk_shape *a = array_shape(1, d2);
  const hk_shape *inner_e[] = {a, a};
  const hk_shape *inner = hk_shape_tuple(M, 2, inner_e);
  const hk_shape *outer_e[] = {inner, a};
  const hk_shape *outer = hk_shape_tuple(M, 2, outer_e);
  int64_t p0[] = {0}, p01[] = {0, 1}, p1[] = {1};
  assert_prints(hk_sharding_subsharding_shape(M, t, outer, 1, p0), "{{replicated}, {maximal device=1}}");
  assert_prints(hk_sharding_subsharding_shape(M, t, outer, 2, p01), "{maximal device=1}");
  assert_prints(hk_sharding_subsharding_shape(M, t, outer, 1, p1), "{devices=[2]0,1}");
  ck_assert_ptr_null(hk_sharding_subsharding_shape(M, t, outer, 2, (int64_t[]){1, 0}));
  assert_prints(hk_sharding_for_shape(M, r, outer), "{{replicated}, {replicated}, {replicated}}");
  ck_assert_ptr_eq(hk_sharding_for_shape(M, r, a), r);
}
END_TEST

/* ---- algebra ------------------------------------------------------------- */

START_TEST(test_transpose) {
  int64_t p10[] = {1, 0};
  assert_prints(hk_sharding_transpose(M, P("{devices=[2,4]<=[8]}"), p10), "{devices=[4,2]<=[2,4]T(1,0)}");
  assert_prints(hk_sharding_transpose(M, P("{devices=[2,2]0,1,2,3}"), p10), "{devices=[2,2]0,2,1,3}");
  assert_prints(hk_sharding_transpose(M, P("{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"), p10),
                "{devices=[1,2,2]0,1,2,3 last_tile_dim_replicate}");
  assert_prints(hk_sharding_transpose(M, P("{devices=[2,1]0,1 metadata={op_name=\"a\"}}"), p10),
                "{devices=[1,2]0,1 metadata={op_name=\"a\"}}");
  const hk_sharding *r = P("{replicated}");
  ck_assert_ptr_eq(hk_sharding_transpose(M, r, p10), r);
  int64_t bad[] = {0, 0};
  ck_assert_ptr_null(hk_sharding_transpose(M, P("{devices=[2,2]<=[4]}"), bad));
  /* transposing twice gives the original back */
  int64_t p120[] = {1, 2, 0}, p201[] = {2, 0, 1};
  const hk_sharding *s = P("{devices=[2,3,4]<=[24]}");
  ck_assert_ptr_eq(hk_sharding_transpose(M, hk_sharding_transpose(M, s, p120), p201), s);
}
END_TEST

START_TEST(test_replicate_dims) {
  int64_t d0[] = {0}, d1[] = {1}, d01[] = {0, 1};
  const hk_sharding *s = P("{devices=[2,4]<=[8]}");
  assert_prints(hk_sharding_replicate_dims(M, s, 1, d1), "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  assert_prints(hk_sharding_replicate_dims(M, s, 1, d0), "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  assert_prints(hk_sharding_replicate_dims(M, s, 2, d01), "{replicated}");
  assert_prints(hk_sharding_replicate_all_except(M, s, 1, d0), "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  assert_prints(hk_sharding_replicate_dims(M, P("{devices=[2,2,2]<=[8] last_tile_dim_replicate}"), 1, d0),
                "{devices=[1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}");
  assert_prints(hk_sharding_replicate_dims(M, P("{devices=[2,2,2]<=[8] last_tile_dims={manual}}"), 1, d0),
                "{devices=[1,2,2,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}");
  assert_prints(hk_sharding_replicate_dims(M, P("{devices=[2,2]3,2,1,0}"), 1, d1),
                "{devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}");
  const hk_sharding *t = P("{devices=[1,4]<=[4]}");
  ck_assert_ptr_eq(hk_sharding_replicate_dims(M, t, 1, d0), t);     /* dim 0 is not partitioned */
  ck_assert(hk_sharding_equivalent(hk_sharding_replicate_dims(M, P("{devices=[2,4]0,1,2,3,4,5,6,7}"), 1, d1),
                                   hk_sharding_replicate_dims(M, s, 1, d1)));
}
END_TEST

START_TEST(test_remove_insert_dims) {
  int64_t d1[] = {1}, d01[] = {0, 1};
  assert_prints(hk_sharding_remove_dims(M, P("{devices=[2,1,4]<=[8] last_tile_dim_replicate}"), 1, d1),
                "{devices=[2,4]<=[8] last_tile_dim_replicate}");
  assert_prints(hk_sharding_remove_dims(M, P("{devices=[2,4]<=[8]}"), 1, d1),
                "{devices=[2,4]<=[8] last_tile_dim_replicate}");
  assert_prints(hk_sharding_remove_dims(M, P("{devices=[2,4]<=[8]}"), 2, d01), "{replicated}");
  assert_prints(hk_sharding_remove_dims(M, P("{devices=[2,1,3]<=[6]}"), 1, d1), "{devices=[2,3]<=[6]}");
  int64_t at03[] = {0, 3}, at1[] = {1}, at5[] = {5};
  assert_prints(hk_sharding_insert_dims(M, P("{devices=[2,2]0,1,2,3}"), 2, at03), "{devices=[1,2,2,1]0,1,2,3}");
  assert_prints(hk_sharding_insert_dims(M, P("{devices=[2,2]<=[4] last_tile_dim_replicate}"), 1, at1),
                "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  assert_prints(hk_sharding_insert_dims(M, P("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}"), 1, at1),
                "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}");
  ck_assert_ptr_null(hk_sharding_insert_dims(M, P("{devices=[2,2]0,1,2,3}"), 1, at5));
}
END_TEST

START_TEST(test_device_groups) {
  int64_t out[8], d0[] = {0}, d1[] = {1}, d2[] = {2};
  const hk_sharding *s = P("{devices=[2,4]<=[8]}");
  ck_assert_int_eq(hk_sharding_device_groups(s, 1, d1, out), 4);
  for (int i = 0; i < 8; i++) ck_assert_int_eq(out[i], i);
  ck_assert_int_eq(hk_sharding_device_groups(s, 1, d0, out), 2);
  static const int64_t want[] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int i = 0; i < 8; i++) ck_assert_int_eq(out[i], want[i]);
  ck_assert_int_eq(hk_sharding_device_groups(P("{devices=[2,1,2]3,1,2,0 last_tile_dim_replicate}"), 1, d2, out), 2);
  static const int64_t want2[] = {3, 1, 2, 0};
  for (int i = 0; i < 4; i++) ck_assert_int_eq(out[i], want2[i]);
  ck_assert_int_eq(hk_sharding_device_groups(P("{replicated}"), 1, d0, out), -1);
}
END_TEST

/* ---- validation ------------------------------------------------------------ */

static void assert_invalid(const hk_sharding *s, const hk_shape *shape, int64_t n, const char *sub) {
  hk_status *st = hk_sharding_validate(s, shape, n);
  ck_assert_msg(st != NULL, "expected invalid: %s", sub);
  ck_assert_msg(strstr(st->message, sub), "message '%s' lacks '%s'", st->message, sub);
  hk_status_free(st);
}

START_TEST(test_validate) {
  int64_t d48[] = {4, 8}, d4[] = {4};
  const hk_shape *s48 = array_shape(2, d48), *s4 = array_shape(1, d4);
  ck_assert_ok(hk_sharding_validate(P("{devices=[2,2]<=[4]}"), s48, 4));
  ck_assert_ok(hk_sharding_validate(P("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), s48, 4));
  ck_assert_ok(hk_sharding_validate(P("{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}"), s48, 8));
  ck_assert_ok(hk_sharding_validate(P("{replicated}"), s48, 4));
  ck_assert_ok(hk_sharding_validate(P("{maximal device=3}"), s48, 4));
  ck_assert_ok(hk_sharding_validate(P("{devices=[2,2]<=[4]}"), s48, -1));
  assert_invalid(P("{devices=[2,2]<=[4]}"), s4, 4, "different than the input rank");
  assert_invalid(P("{devices=[2,2]0,1,2,7}"), s48, 4, "device 7 >= num_devices (4)");
  assert_invalid(P("{devices=[2,2]0,1,1,3}"), s48, 4, "device 1 is not unique");
  assert_invalid(P("{devices=[2,2]0,1,2,-3}"), s48, -1, "device -3 is negative");
  assert_invalid(P("{devices=[2,2]<=[4]}"), s48, 8, "should have 8 devices but has 4");
  assert_invalid(P("{maximal device=4}"), s48, 4, "device 4 >= num_devices");
  int64_t one[] = {1, 1}, dev0[] = {0};
  assert_invalid(hk_sharding_tiled(M, 2, one, dev0, false), s48, 1, "only contains a single device");
  const hk_shape *leaves[] = {s48, s4};
  const hk_shape *tup = hk_shape_tuple(M, 2, leaves);
  ck_assert_ok(hk_sharding_validate(P("{{devices=[2,2]<=[4]}, {replicated}}"), tup, 4));
  assert_invalid(P("{{replicated}}"), tup, 4, "2 leaf nodes while this sharding has 1");
  assert_invalid(P("{{replicated}, {devices=[2,2]<=[4]}}"), tup, 4, "tuple element 1");
  /* a non-tuple sharding on a tuple shape applies to every leaf (XLA's
   * parser normalises it so; see hk_sharding_for_shape) */
  ck_assert_ok(hk_sharding_validate(P("{replicated}"), tup, 4));
  ck_assert_ok(hk_sharding_validate(P("{maximal device=1}"), tup, 4));
  assert_invalid(P("{devices=[2,2]<=[4]}"), tup, 4, "tuple element 1");
  assert_invalid(P("{{replicated}}"), s4, 4, "tuple-shaped but validation shape is not");
  assert_invalid(P("{devices=[2]0,1}"), s4, 4, "against shape f32[4]");
  ck_assert_ok(hk_sharding_validate(P("{devices=[2]0,1}"), hk_shape_token(M), 2));
  ck_assert_ok(hk_sharding_validate(P("{{replicated}}"), hk_shape_tuple(M, 0, NULL), 2));
}
END_TEST

/* ---- metadata ------------------------------------------------------------- */

START_TEST(test_metadata) {
  const char *t = "{source_end_line=9 op_name=\"a\\tb\" custom=\"z\" source_file=\"x.py\", op_type=\"Dot\" "
                  "profile_type={1,2} source_line=7 deduplicated_name=\"d\" op_name2=5} trailing";
  hk_metadata md;
  size_t used;
  ck_assert_ok(hk_metadata_parse(M, t, strlen(t), &md, &used));
  ck_assert_uint_eq(used, strlen(t) - strlen(" trailing"));
  ck_assert_str_eq(md.op_name, "a\tb");
  ck_assert_str_eq(md.op_type, "Dot");
  ck_assert_str_eq(md.source_file, "x.py");
  ck_assert_int_eq(md.source_line, 7);
  hk_buf b;
  hk_buf_init(&b);
  hk_metadata_print(&md, &b);
  hk_buf_put(&b, "", 1);
  ck_assert_str_eq(b.data, "{op_type=\"Dot\" op_name=\"a\\tb\" source_file=\"x.py\" source_line=7 source_end_line=9 "
                           "profile_type={1,2} deduplicated_name=\"d\" custom=\"z\" op_name2=5}");
  hk_buf_free(&b);
  /* empty strings and zero lines are absent, as XLA treats them */
  ck_assert_ok(hk_metadata_parse(M, "{op_name=\"\" source_line=0}", 26, &md, NULL));
  ck_assert(hk_metadata_is_empty(&md));
  hk_buf_init(&b);
  hk_metadata_print(&md, &b);
  ck_assert_int_eq((int)b.len, 2);
  hk_buf_free(&b);
  /* escapes: octal for control and high bytes */
  ck_assert_ok(hk_metadata_parse(M, "{op_name=\"\\001\\xff\\\\\"}", 23, &md, NULL));
  hk_buf_init(&b);
  hk_metadata_print(&md, &b);
  hk_buf_put(&b, "", 1);
  ck_assert_str_eq(b.data, "{op_name=\"\\001\\377\\\\\"}");
  hk_buf_free(&b);
  hk_status *st = hk_metadata_parse(M, "{op_name=\"a\" source_line=x}", 28, &md, NULL);
  ck_assert_ptr_nonnull(st);
  ck_assert_str_eq(st->message, "@25: expected an integer");
  hk_status_free(st);
}
END_TEST

/* ---- conformance texts ------------------------------------------------------- */

typedef struct corpus_stats {
  int total, exact, blanks_only, respelled, canonical_same;
  int md_total, md_exact;
  char **seen;
  int n_seen, cap_seen;
} corpus_stats;

static bool seen_before(corpus_stats *cs, const char *t, size_t n) {
  for (int i = 0; i < cs->n_seen; i++)
    if (strlen(cs->seen[i]) == n && memcmp(cs->seen[i], t, n) == 0) return true;
  if (cs->n_seen == cs->cap_seen) {
    cs->cap_seen = cs->cap_seen ? cs->cap_seen * 2 : 256;
    cs->seen = realloc(cs->seen, sizeof(char *) * (size_t)cs->cap_seen);
  }
  cs->seen[cs->n_seen++] = strndup(t, n);
  return false;
}

/* Same text once blanks and ", " spacing are ignored. */
static bool equal_ignoring_blanks(const char *a, const char *b, size_t bn) {
  size_t i = 0, j = 0, an = strlen(a);
  for (;;) {
    while (i < an && strchr(" \n\t\r", a[i])) i++;
    while (j < bn && strchr(" \n\t\r", b[j])) j++;
    if (i == an || j == bn) return i == an && j == bn;
    if (a[i++] != b[j++]) return false;
  }
}

static void check_one_sharding(hk_module *m, corpus_stats *cs, const char *text, size_t n) {
  if (seen_before(cs, text, n)) return;
  cs->total++;
  const hk_sharding *s;
  size_t used;
  hk_status *st = hk_sharding_parse(m, text, n, &s, &used);
  if (st) ck_abort_msg("conformance sharding %.*s: %s", (int)n, text, st->message);
  ck_assert_uint_eq(used, n);
  char *p = hk_sharding_to_string(s);
  bool respelled = false;
  if (strlen(p) == n && memcmp(p, text, n) == 0) cs->exact++;
  else if (equal_ignoring_blanks(p, text, n)) cs->blanks_only++;
  else respelled = true, cs->respelled++;
  const hk_sharding *again;
  ck_assert_ok(hk_sharding_parse(m, p, strlen(p), &again, NULL));
  ck_assert_ptr_eq(again, s);                    /* print is a fixed point */
  /* A respelling must be XLA's own (iota reshape dims canonicalised): the
   * original text means the same sharding. */
  if (respelled) {
    ck_assert_msg(strstr(text, "<=[") != NULL, "conformance sharding %.*s printed as %s", (int)n, text, p);
    fprintf(stderr, "respelled as XLA does: %.*s -> %s\n", (int)n, text, p);
  }
  if (hk_sharding_canonical(m, s) == s) cs->canonical_same++;
  else if (getenv("HK_SHOW_NONCANONICAL")) fprintf(stderr, "not canonical: %s\n", p);
  ck_assert(hk_sharding_equivalent(hk_sharding_canonical(m, s), s));
  free(p);
}

/* Finds the end of a balanced {...} starting at t[0] (strings skipped). */
static size_t balanced_len(const char *t) {
  int depth = 0;
  for (size_t i = 0; t[i]; i++) {
    if (t[i] == '"') {
      for (i++; t[i] && t[i] != '"'; i++)
        if (t[i] == '\\' && t[i + 1]) i++;
      if (!t[i]) return 0;
    } else if (t[i] == '{') {
      depth++;
    } else if (t[i] == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

/* Instruction/sharding metadata {field=value ...}: parses and prints back. */
static void check_one_metadata(hk_module *m, corpus_stats *cs, const char *text, size_t n) {
  cs->md_total++;
  hk_metadata md;
  size_t used;
  hk_status *st = hk_metadata_parse(m, text, n, &md, &used);
  if (st) ck_abort_msg("conformance metadata %.*s: %s", (int)n, text, st->message);
  ck_assert_uint_eq(used, n);
  hk_buf b;
  hk_buf_init(&b);
  hk_metadata_print(&md, &b);
  if (b.len == n && memcmp(b.data, text, n) == 0) cs->md_exact++;
  else fprintf(stderr, "metadata reordered as XLA prints it: %.*s -> %.*s\n", (int)n, text, (int)b.len, b.data);
  /* the print is a fixed point */
  hk_metadata again;
  ck_assert_ok(hk_metadata_parse(m, b.data, b.len, &again, NULL));
  hk_buf b2;
  hk_buf_init(&b2);
  hk_metadata_print(&again, &b2);
  ck_assert(b2.len == b.len && memcmp(b2.data, b.data, b.len) == 0);
  hk_buf_free(&b2);
  hk_buf_free(&b);
}

static void scan_string(hk_module *m, corpus_stats *cs, const char *key, const char *v) {
  for (const char *p = strstr(v, "metadata={"); p; p = strstr(p + 1, "metadata={")) {
    if (p[9 + 1] == '{') continue;                 /* a sharding's metadata list */
    size_t n = balanced_len(p + 9);
    if (n) check_one_metadata(m, cs, p + 9, n);
  }
  if (key && strcmp(key, "sharding") == 0 && v[0] == '{') {
    size_t n = balanced_len(v);
    if (n) check_one_sharding(m, cs, v, n);
  }
  for (const char *p = strstr(v, "sharding={"); p; p = strstr(p + 1, "sharding={")) {
    if (p > v && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) continue;  /* e.g. output_sharding= */
    size_t n = balanced_len(p + 9);
    if (n) check_one_sharding(m, cs, p + 9, n);
  }
}

static void scan_json(hk_module *m, corpus_stats *cs, const char *key, json_object *o) {
  switch (json_object_get_type(o)) {
    case json_type_string: scan_string(m, cs, key, json_object_get_string(o)); break;
    case json_type_object: {
      json_object_object_foreach(o, k, v) scan_json(m, cs, k, v);
      break;
    }
    case json_type_array:
      for (size_t i = 0; i < json_object_array_length(o); i++) scan_json(m, cs, key, json_object_array_get_idx(o, i));
      break;
    default: break;
  }
}

START_TEST(test_conformance_shardings) {
  static const char *const files[] = {"parser.jsonl", "propagation.jsonl", "spmd.jsonl", "stateful_rng.jsonl"};
  corpus_stats cs;
  memset(&cs, 0, sizeof cs);
  hk_module *m = hk_module_new("corpus");
  int files_read = 0;
  for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", hk_test_conformance_dir(), files[f]);
    FILE *fp = fopen(path, "r");
    if (!fp) continue;
    files_read++;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, fp) > 0) {
      json_object *o = json_tokener_parse(line);
      if (o) scan_json(m, &cs, NULL, o);
      json_object_put(o);
    }
    free(line);
    fclose(fp);
  }
  hk_module_free(m);
  for (int i = 0; i < cs.n_seen; i++) free(cs.seen[i]);
  free(cs.seen);
  if (files_read == 0) {
    fprintf(stderr, "conformance corpus not found in %s: skipped\n", hk_test_conformance_dir());
    return;
  }
  fprintf(stderr, "conformance shardings: %d distinct, all parse and print to a fixed point; %d print back "
          "byte-identical, %d differ only in blanks, %d iota reshape dims canonicalised as XLA does; %d already "
          "in XLA's canonical (Subgroup/PartialTile) form\n",
          cs.total, cs.exact, cs.blanks_only, cs.respelled, cs.canonical_same);
  fprintf(stderr, "conformance metadata: %d parsed and print to a fixed point, %d byte-identical\n", cs.md_total,
          cs.md_exact);
  ck_assert_int_gt(cs.total, 300);
  ck_assert_int_gt(cs.md_total, 200);
}
END_TEST

/* hk_sharding_from_mesh directly: a sub-axis on a mesh with device ids, the
 * same mesh in iota order, a maximal mesh, and refs that form no sharding. */
static const hk_sharding *from_mesh(const hk_mesh *mesh, int rank, const hk_mesh_axis_refs *dims,
                                    hk_status **st) {
  hk_mesh_sharding s = {.rank = rank, .dims = dims};
  return hk_sharding_from_mesh(M, mesh, &s, st);
}

START_TEST(test_from_mesh) {
  const int64_t sizes[] = {4, 2}, ids[] = {7, 6, 5, 4, 3, 2, 1, 0};
  const hk_mesh_axis_ref xs = {0, 2, 2}, y = {1, 1, 0};
  const hk_mesh_axis_refs dims[] = {{1, &xs}, {1, &y}};
  hk_mesh mesh = {2, sizes, ids, NULL};
  hk_status *st = NULL;
  const hk_sharding *s = from_mesh(&mesh, 2, dims, &st);
  ck_assert_ok(st);
  assert_prints(s, "{devices=[2,2,2]3,7,2,6,1,5,0,4 last_tile_dim_replicate}");
  ck_assert(hk_sharding_equivalent(s, hk_sharding_canonical(M, P("{mesh['x'=4,'y'=2], "
      "device_ids=(7,6,5,4,3,2,1,0), [{'x':(2)2}, {'y'}]}"))));
  mesh.devices = NULL;
  s = from_mesh(&mesh, 2, dims, &st);
  ck_assert_ok(st);
  assert_prints(s, "{devices=[2,2,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  const int64_t one[] = {5};
  hk_mesh maximal = {0, NULL, one, NULL};
  assert_prints(from_mesh(&maximal, 0, NULL, &st), "{maximal device=5}");
  ck_assert_ok(st);
  /* x whole and its sub-axis overlap; x:(1)2 and x:(3)2 of a 6 do not nest;
   * axis 2 is not in the mesh; x:(1)4 is all of x. */
  const int64_t six[] = {6, 2};
  const hk_mesh_axis_ref bad[][2] = {{{0, 1, 0}, {0, 2, 2}}, {{0, 1, 2}, {0, 3, 2}},
                                     {{2, 1, 0}, {1, 1, 0}}, {{0, 1, 4}, {1, 1, 0}}};
  const char *why[] = {"used twice", "cannot coexist", "out of range", "not a sub-axis"};
  for (int k = 0; k < 4; k++) {
    hk_mesh mk = {2, k == 1 ? six : sizes, NULL, NULL};
    const hk_mesh_axis_refs d[] = {{1, &bad[k][0]}, {1, &bad[k][1]}};
    ck_assert_ptr_null(from_mesh(&mk, 2, d, &st));
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(st->code, HK_INVALID_ARGUMENT);
    ck_assert_msg(strstr(st->message, why[k]), "%d: %s", k, st->message);
    hk_status_free(st);
    st = NULL;
  }
}
END_TEST

static Suite *sharding_suite(void) {
  Suite *s = suite_create("sharding");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_round_trip);
  tcase_add_test(tc, test_spellings_accepted);
  tcase_add_test(tc, test_print_snprintf);
  tcase_add_test(tc, test_parse_errors);
  tcase_add_test(tc, test_interning);
  tcase_add_test(tc, test_equivalent);
  tcase_add_test(tc, test_canonical);
  tcase_add_test(tc, test_queries);
  tcase_add_test(tc, test_tile_shape);
  tcase_add_test(tc, test_tile_offsets);
  tcase_add_test(tc, test_subsharding);
  tcase_add_test(tc, test_transpose);
  tcase_add_test(tc, test_replicate_dims);
  tcase_add_test(tc, test_remove_insert_dims);
  tcase_add_test(tc, test_device_groups);
  tcase_add_test(tc, test_validate);
  tcase_add_test(tc, test_metadata);
  tcase_add_test(tc, test_conformance_shardings);
  tcase_add_test(tc, test_from_mesh);
  suite_add_tcase(s, tc);
  return s;
}

HK_TEST_MAIN(sharding_suite)
