/* test_ab.c - `hlokit ab`: two pipelines over one module, each checked
 * against the global program; side-by-side figures, JSON form, exit codes. */
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[PATH_MAX];
static char hlokit[PATH_MAX];
static char srcdir[PATH_MAX];
static char plugin[PATH_MAX + 32];
static char *out_text;

/* A pass that negates the entry root: a deliberately wrong "partitioner"
 * step, built against abi/ alone. */
static const char *plugin_src =
    "#include \"hlokit/hlokit.h\"\n"
    "#include <stdlib.h>\n"
    "static hk_status *run(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c) {\n"
    "  (void)s; (void)t;\n"
    "  hk_instr *root = m->entry->root;\n"
    "  hk_instr *neg = hk_instr_new(m->entry, HK_OP_NEGATE, root->shape, 1, &root, \"neg\");\n"
    "  hk_computation_set_root(m->entry, neg);\n"
    "  *c = true; return NULL; }\n"
    "static void destroy(hk_pass *s) { free(s); }\n"
    "static const hk_pass_vtable vt = {sizeof(hk_pass_vtable), \"ab-negate-root\", run, destroy, 0};\n"
    "static hk_pass *create(const hk_option_values *o, hk_registry *r, hk_status **e) {\n"
    "  (void)o; (void)r; (void)e; hk_pass *p = malloc(sizeof *p); p->vt = &vt; return p; }\n"
    "static const hk_pass_desc desc = {sizeof(hk_pass_desc), \"ab-negate-root\",\n"
    "  \"negates the entry root\", NULL, 0, create};\n"
    "static hk_status *reg(hk_registry *r) { return hk_registry_add_pass(r, &desc); }\n"
    "HK_PLUGIN(\"ab-test\", \"1.0\", reg)\n";

static void setup(void) {
  hk_test_build_path("hlokit", hlokit, sizeof hlokit);
  ck_assert_msg(access(hlokit, X_OK) == 0, "%s not built", hlokit);
  ck_assert_ptr_nonnull(realpath(".", srcdir));
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hk_test_ab.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  char src[PATH_MAX + 32], cmd[4 * PATH_MAX];
  snprintf(src, sizeof src, "%s/ab_test.c", tmpdir);
  snprintf(plugin, sizeof plugin, "%s/ab_test.so", tmpdir);
  hk_test_write_file(src, plugin_src);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -shared -fPIC -Wall -Werror -I'%s/abi' -o '%s' '%s'",
           srcdir, plugin, src);
  ck_assert_msg(system(cmd) == 0, "building the test plugin failed");
}

static void teardown(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
  free(out_text);
  out_text = NULL;
}

/* Runs `hlokit SUB ARGS` from the source root; stdout lands in out_text. */
static int run_hlokit(const char *sub, const char *args) {
  char *cmd;
  ck_assert_int_gt(asprintf(&cmd, "cd '%s' && '%s' %s %s >'%s/out.txt' 2>'%s/err.txt'", srcdir,
                            hlokit, sub, args, tmpdir, tmpdir), 0);
  int rc = system(cmd);
  free(cmd);
  char p[PATH_MAX + 32];
  free(out_text);
  snprintf(p, sizeof p, "%s/out.txt", tmpdir);
  out_text = hk_test_slurp(p);
  ck_assert(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

static int ab(const char *args) { return run_hlokit("ab", args); }

static json_object *get(json_object *o, const char *path) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
    json_object *next = NULL;
    ck_assert_msg(json_object_object_get_ex(o, k, &next), "no '%s' in %s", k, path);
    o = next;
  }
  return o;
}

static int64_t get_int(json_object *o, const char *path) { return json_object_get_int64(get(o, path)); }
static bool get_bool(json_object *o, const char *path) { return json_object_get_boolean(get(o, path)); }

#define STOCK "'spmd-partitioning{allow_module_signature_change=true}'"
#define PROPAGATED "'sharding-propagation{is_spmd=true},spmd-partitioning{allow_module_signature_change=true}'"

START_TEST(test_both_correct_side_by_side) {
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=" PROPAGATED " --num-partitions=8"), 0);
  ck_assert_ptr_nonnull(strstr(out_text, "on 8 devices"));
  ck_assert_ptr_nonnull(strstr(out_text, "result"));
  ck_assert_ptr_nonnull(strstr(out_text, "all-reduce (count, bytes)"));
  ck_assert_ptr_nonnull(strstr(out_text, "full rematerializations"));
  ck_assert_ptr_nonnull(strstr(out_text, "pass wall time"));
  ck_assert_ptr_nonnull(strstr(out_text, "b passes: sharding-propagation"));
}
END_TEST

START_TEST(test_json_figures) {
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=" PROPAGATED " --num-partitions=8 --json"), 0);
  json_object *j = json_tokener_parse(out_text);
  ck_assert_ptr_nonnull(j);
  static const char *const sides[] = {"a", "b"};
  for (int w = 0; w < 2; w++) {
    json_object *s = get(j, sides[w]);
    ck_assert(get_bool(s, "equal"));
    /* The Megatron MLP: one all-reduce of f32[16,64] per layer, nothing else. */
    ck_assert_int_eq(get_int(s, "collectives.all-reduce.count"), 2);
    ck_assert_int_eq(get_int(s, "collectives.all-reduce.bytes_per_device"), 2 * 16 * 64 * 4);
    ck_assert_int_eq(get_int(s, "collectives.all-gather.count"), 0);
    ck_assert_int_eq(get_int(s, "bytes_moved_per_device"), 8192);
    ck_assert_int_eq(get_int(s, "full_rematerializations"), 0);
    /* The partitioner's own count agrees with the module scan. */
    ck_assert_int_eq(get_int(s, "full_rematerializations_reported"), 0);
    ck_assert_int_eq(get_int(s, "instructions_before"), 47);
    ck_assert_int_gt(get_int(s, "instructions_after"), 0);
    ck_assert_int_eq(get_int(s, "num_devices"), 8);
    ck_assert_int_lt(get_int(s, "peak_live_bytes_per_device"), get_int(s, "peak_live_bytes_global"));
    ck_assert(json_object_is_type(get(s, "first_mismatch"), json_type_null));
    ck_assert(json_object_get_double(get(s, "pass_wall_seconds")) >= 0);
  }
  json_object *pb = get(j, "b.passes");
  ck_assert_int_eq((int)json_object_array_length(pb), 2);
  ck_assert_str_eq(json_object_get_string(get(json_object_array_get_idx(pb, 0), "pass")),
                   "sharding-propagation");
  ck_assert_str_eq(json_object_get_string(get(j, "a.pipeline")),
                   "spmd-partitioning{allow_module_signature_change=true}");
  json_object_put(j);
}
END_TEST

START_TEST(test_check_json_counts_full_rematerializations) {
  /* An fft over its sharded dimension goes through the replicate fallback. */
  char path[PATH_MAX + 32], *args;
  snprintf(path, sizeof path, "%s/fft.hlo", tmpdir);
  hk_test_write_file(path, "HloModule m, num_partitions=2\n\nENTRY e {\n"
                   "  p = c64[4,8] parameter(0), sharding={devices=[1,2]0,1}\n"
                   "  ROOT r = c64[4,8] fft(p), fft_type=FFT, fft_length={8}, "
                   "sharding={devices=[1,2]0,1}\n}\n");
  ck_assert_int_gt(asprintf(&args, "'%s' --num-partitions=2 --json --passes=" STOCK, path), 0);
  ck_assert_int_eq(run_hlokit("check", args), 0);
  free(args);
  json_object *j = json_tokener_parse(out_text);
  ck_assert_ptr_nonnull(j);
  ck_assert(get_bool(j, "equal"));
  ck_assert_int_eq(get_int(j, "full_rematerializations"), 1);
  json_object *n = NULL;   /* counter names hold a dot: "pass.counter" */
  ck_assert(json_object_object_get_ex(get(j, "counters"), "spmd-partitioning.full_rematerializations", &n));
  ck_assert_int_eq(json_object_get_int64(n), 1);
  json_object_put(j);
}
END_TEST

START_TEST(test_hilo_combiners_merge_parallel_all_reduces) {
  /* Two parallel MLP branches: the partitioner gives each an all-reduce;
   * @hilo-collectives merges the two into one tuple-shaped all-reduce
   * moving the same bytes, and the numbers stay the same. */
  ck_assert_int_eq(ab("fixtures/mlp_parallel.hlo --a=" PROPAGATED " --b=" PROPAGATED
                      "',@hilo-collectives' --num-partitions=8 --json"), 0);
  json_object *j = json_tokener_parse(out_text);
  ck_assert_ptr_nonnull(j);
  ck_assert(get_bool(j, "a.equal"));
  ck_assert(get_bool(j, "b.equal"));
  ck_assert_int_eq(get_int(j, "a.collectives.all-reduce.count"), 2);
  ck_assert_int_eq(get_int(j, "b.collectives.all-reduce.count"), 1);
  ck_assert_int_eq(get_int(j, "a.collectives.all-reduce.bytes_per_device"),
                   get_int(j, "b.collectives.all-reduce.bytes_per_device"));
  json_object_put(j);
}
END_TEST

START_TEST(test_one_side_differs_exits_1) {
  char args[4 * PATH_MAX];
  snprintf(args, sizeof args,
           "fixtures/mlp.hlo --a=" STOCK " --b='spmd-partitioning{allow_module_signature_change=true},"
           "ab-negate-root' --num-partitions=8 --json --load-pass-plugin='%s'", plugin);
  ck_assert_int_eq(ab(args), 1);
  json_object *j = json_tokener_parse(out_text);
  ck_assert_ptr_nonnull(j);
  ck_assert(get_bool(j, "a.equal"));
  ck_assert(!get_bool(j, "b.equal"));
  json_object *fm = get(j, "b.first_mismatch");
  ck_assert(json_object_is_type(fm, json_type_object));
  double want = json_object_get_double(get(fm, "expected"));
  double got = json_object_get_double(get(fm, "actual"));
  ck_assert(want != 0 && fabs(got + want) < 1e-4);
  json_object_put(j);
  /* The text form names the mismatch too. */
  snprintf(args, sizeof args,
           "fixtures/mlp.hlo --a='spmd-partitioning{allow_module_signature_change=true},ab-negate-root' "
           "--b=" STOCK " --num-partitions=8 --load-pass-plugin='%s'", plugin);
  ck_assert_int_eq(ab(args), 1);
  ck_assert_ptr_nonnull(strstr(out_text, "DIFFERS"));
  ck_assert_ptr_nonnull(strstr(out_text, "first mismatch (want vs got)"));
  ck_assert_ptr_nonnull(strstr(out_text, " out 0 ["));
}
END_TEST

START_TEST(test_pipeline_file) {
  char path[PATH_MAX + 32], args[4 * PATH_MAX];
  snprintf(path, sizeof path, "%s/b.json", tmpdir);
  hk_test_write_file(path, "[{\"pass\": \"sharding-propagation\", \"options\": {\"is_spmd\": true}},\n"
                   " {\"pass\": \"spmd-partitioning\", \"options\": "
                   "{\"allow_module_signature_change\": true}}]\n");
  snprintf(args, sizeof args, "fixtures/mlp_partial.hlo --a=" PROPAGATED " --b='%s' --num-partitions=8 --json",
           path);
  ck_assert_int_eq(ab(args), 0);
  json_object *j = json_tokener_parse(out_text);
  ck_assert_ptr_nonnull(j);
  ck_assert(get_bool(j, "b.equal"));
  ck_assert_int_eq((int)json_object_array_length(get(j, "b.passes")), 2);
  ck_assert_int_eq(get_int(j, "a.collectives.all-reduce.count"), get_int(j, "b.collectives.all-reduce.count"));
  ck_assert_int_eq(get_int(j, "a.bytes_moved_per_device"), get_int(j, "b.bytes_moved_per_device"));
  json_object_put(j);
}
END_TEST

START_TEST(test_errors_exit_2) {
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --num-partitions=8"), 2);
  ck_assert_int_eq(ab("--a=" STOCK " --b=" STOCK " --num-partitions=8"), 2);
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=no-such-pass --num-partitions=8"), 2);
  ck_assert_int_eq(ab("fixtures/no_such.hlo --a=" STOCK " --b=" STOCK " --num-partitions=8"), 2);
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=/nonexistent/p.json --num-partitions=8"), 2);
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=" STOCK " --passes=hlo-dce"), 2);
  ck_assert_int_eq(ab("fixtures/mlp.hlo --a=" STOCK " --b=" STOCK " --seed=x"), 2);
  /* A pipeline that fails names itself. */
  char args[4 * PATH_MAX], p[PATH_MAX + 32];
  snprintf(args, sizeof args, "fixtures/mlp.hlo --a=" STOCK " --b=spmd-partitioning --num-partitions=8");
  ck_assert_int_eq(ab(args), 2);
  snprintf(p, sizeof p, "%s/err.txt", tmpdir);
  char *err = hk_test_slurp(p);
  ck_assert_ptr_nonnull(strstr(err, "pipeline b"));
  ck_assert_ptr_nonnull(strstr(err, "Unsupported entry parameter sharding"));
  free(err);
  ck_assert_int_eq(ab("--help"), 0);
}
END_TEST

static Suite *ab_suite(void) {
  Suite *s = suite_create("ab");
  TCase *t = tcase_create("cli");
  tcase_set_timeout(t, 120);
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_both_correct_side_by_side);
  tcase_add_test(t, test_json_figures);
  tcase_add_test(t, test_check_json_counts_full_rematerializations);
  tcase_add_test(t, test_one_side_differs_exits_1);
  tcase_add_test(t, test_hilo_combiners_merge_parallel_all_reduces);
  tcase_add_test(t, test_pipeline_file);
  tcase_add_test(t, test_errors_exit_2);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(ab_suite)
