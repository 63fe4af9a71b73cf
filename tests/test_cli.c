/* test_cli.c - the hlokit executable as a user runs it: exit codes, error
 * messages, input forms, output written whole or not at all, plugins and
 * pipeline options on the command line. */
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[PATH_MAX];
static char hlokit[PATH_MAX];
static char abi_dir[PATH_MAX];
static char plugin[PATH_MAX + 32];

/* The executable beside this test's build folder: BUILD/tests/.. */
static void find_hlokit(void) {
  hk_test_build_path("hlokit", hlokit, sizeof hlokit);
  ck_assert_msg(access(hlokit, X_OK) == 0, "%s not built", hlokit);
}

static void find_abi_dir(void) {
  const char *env = getenv("HLOKIT_ABI_DIR");
  if (env && realpath(env, abi_dir)) return;
  ck_assert_msg(realpath("abi", abi_dir) != NULL, "run from the source root or set HLOKIT_ABI_DIR");
}

/* Test passes, built against abi/ alone: cli-noop, cli-fail (errors),
 * cli-break (gives the root a wrong shape), cli-rename (renames the
 * module, changed). */
static const char *plugin_src =
    "#include \"hlokit/hlokit.h\"\n"
    "#include <stdlib.h>\n"
    "static hk_status *noop(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c)\n"
    "{ (void)s; (void)m; (void)t; *c = false; return NULL; }\n"
    "static hk_status *fail(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c)\n"
    "{ (void)s; (void)m; (void)t; *c = false;\n"
    "  return hk_error(HK_INTERNAL, \"deliberate failure\"); }\n"
    "static hk_status *brk(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c)\n"
    "{ (void)s; (void)t; m->entry->root->shape = hk_shape_scalar(m, HK_S32);\n"
    "  *c = true; return NULL; }\n"
    "static hk_status *ren(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c)\n"
    "{ (void)s; (void)t; m->name = hk_intern_cstr(m, \"renamed_module\"); *c = true;\n"
    "  return NULL; }\n"
    "static void destroy(hk_pass *s) { free(s); }\n"
    "#define PASS(ID, NAME, RUN) \\\n"
    "  static const hk_pass_vtable ID##_vt = {sizeof(hk_pass_vtable), NAME, RUN, destroy, 0};\\\n"
    "  static hk_pass *ID##_create(const hk_option_values *o, hk_registry *r, hk_status **e)\\\n"
    "  { (void)o; (void)r; (void)e; hk_pass *p = malloc(sizeof *p); p->vt = &ID##_vt;\\\n"
    "    return p; }\\\n"
    "  static const hk_pass_desc ID##_desc = {sizeof(hk_pass_desc), NAME, \"test \" NAME,\\\n"
    "    ID##_opts, sizeof ID##_opts / sizeof ID##_opts[0], ID##_create};\n"
    "static const hk_option_decl noop_opts[] = {{\"level\", HK_OPT_INT, \"3\", \"how much\", 0}};\n"
    "static const hk_option_decl fail_opts[] = {{\"loud\", HK_OPT_BOOL, 0, \"\", 0}};\n"
    "static const hk_option_decl brk_opts[] = {{\"x\", HK_OPT_BOOL, 0, \"\", 0}};\n"
    "static const hk_option_decl ren_opts[] = {{\"x\", HK_OPT_BOOL, 0, \"\", 0}};\n"
    "PASS(noop, \"cli-noop\", noop)\n"
    "PASS(fail, \"cli-fail\", fail)\n"
    "PASS(brk, \"cli-break\", brk)\n"
    "PASS(ren, \"cli-rename\", ren)\n"
    "static hk_status *reg(hk_registry *r) {\n"
    "  HK_TRY(hk_registry_add_pass(r, &noop_desc));\n"
    "  HK_TRY(hk_registry_add_pass(r, &fail_desc));\n"
    "  HK_TRY(hk_registry_add_pass(r, &brk_desc));\n"
    "  return hk_registry_add_pass(r, &ren_desc); }\n"
    "HK_PLUGIN(\"cli-test\", \"1.0\", reg)\n";

static const char *module_text =
    "HloModule add_module\n"
    "\n"
    "ENTRY main {\n"
    "  a = f32[2] parameter(0)\n"
    "  b = f32[2] parameter(1)\n"
    "  ROOT sum = f32[2] add(a, b)\n"
    "}\n";

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hk_test_cli.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  find_hlokit();
  find_abi_dir();
  char src[PATH_MAX + 32], cmd[4 * PATH_MAX];
  snprintf(src, sizeof src, "%s/cli_test.c", tmpdir);
  snprintf(plugin, sizeof plugin, "%s/cli_test.so", tmpdir);
  hk_test_write_file(src, plugin_src);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -shared -fPIC -Wall -Werror -I'%s' -o '%s' '%s'",
           abi_dir, plugin, src);
  ck_assert_msg(system(cmd) == 0, "building the test plugin failed");
  char in[PATH_MAX + 32];
  snprintf(in, sizeof in, "%s/in.hlo", tmpdir);
  hk_test_write_file(in, module_text);
}

static void teardown(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

/* Runs `hlokit ARGS` in tmpdir (stdin from STDIN_FILE if given); stdout and
 * stderr land in out/err.  Returns the exit status. */
static char *out_text, *err_text;

static int run(const char *args, const char *stdin_file) {
  char *cmd;
  ck_assert_int_gt(asprintf(&cmd, "cd '%s' && '%s' %s <%s >stdout.txt 2>stderr.txt", tmpdir,
                            hlokit, args, stdin_file ? stdin_file : "/dev/null"), 0);
  int rc = system(cmd);
  free(out_text);
  free(err_text);
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/stdout.txt", tmpdir);
  out_text = hk_test_slurp(p);
  snprintf(p, sizeof p, "%s/stderr.txt", tmpdir);
  err_text = hk_test_slurp(p);
  ck_assert_msg(WIFEXITED(rc), "hlokit did not exit normally: %s", cmd);
  free(cmd);
  return WEXITSTATUS(rc);
}

/* `hlokit ARGS` with only the test plugin loaded. */
static int run_with_plugin(const char *args, const char *stdin_file) {
  char *full;
  ck_assert_int_gt(asprintf(&full, "%s --no-default-plugins --load-pass-plugin=%s", args, plugin), 0);
  int rc = run(full, stdin_file);
  free(full);
  return rc;
}

static char *tmp_file(const char *name) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return hk_test_slurp(p);
}

static bool has(const char *text, const char *frag) { return text && strstr(text, frag); }

#define ASSERT_HAS(text, frag) \
  ck_assert_msg(has((text), (frag)), "'%s' not in: %s", (frag), (text) ? (text) : "(null)")

/* Number of entries in tmpdir (to see that no temp file was left). */
static int dir_entries(void) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", tmpdir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  ck_assert_int_eq(fscanf(p, "%d", &n), 1);
  pclose(p);
  return n;
}

START_TEST(test_usage_and_exit_codes) {
  ck_assert_int_eq(run("", NULL), 2);
  ASSERT_HAS(err_text, "usage: hlokit COMMAND");
  ck_assert_int_eq(run("frobnicate", NULL), 2);
  ASSERT_HAS(err_text, "unknown command 'frobnicate'");
  ck_assert_int_eq(run("--help", NULL), 0);
  ASSERT_HAS(out_text, "opt");
  ASSERT_HAS(out_text, "passes");
  ck_assert_int_eq(run("opt", NULL), 2);
  ASSERT_HAS(err_text, "no input module");
  ck_assert_int_eq(run("opt in.hlo --bogus", NULL), 2);
  ASSERT_HAS(err_text, "unknown option '--bogus'");
  ck_assert_int_eq(run("opt in.hlo --num-partitions=zero", NULL), 2);
  ASSERT_HAS(err_text, "--num-partitions");
  ck_assert_int_eq(run("opt --help", NULL), 0);
  ASSERT_HAS(out_text, "--passes");
}
END_TEST

START_TEST(test_opt_prints_module) {
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-noop --print-form=short", NULL), 0);
  ASSERT_HAS(out_text, "HloModule add_module");
  ASSERT_HAS(out_text, "ROOT sum = f32[2]");
  char *stdout_version = strdup(out_text);
  ck_assert_int_eq(run_with_plugin("opt in.hlo --print-form=short -o out.hlo", NULL), 0);
  ck_assert_str_eq(out_text, "");
  char *file = tmp_file("out.hlo");
  ck_assert_str_eq(file, stdout_version);
  free(file);
  /* stdin and -o - */
  ck_assert_int_eq(run_with_plugin("opt - --print-form=short -o -", "in.hlo"), 0);
  ck_assert_str_eq(out_text, stdout_version);
  free(stdout_version);
  /* A pass that changes the module. */
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-rename", NULL), 0);
  ASSERT_HAS(out_text, "HloModule renamed_module");
}
END_TEST

START_TEST(test_parse_error_names_file_line_col) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/bad.hlo", tmpdir);
  hk_test_write_file(p, "HloModule bad\n\nENTRY main {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] "
                "frobnicate(a)\n}\n");
  ck_assert_int_eq(run_with_plugin("opt bad.hlo", NULL), 2);
  ASSERT_HAS(err_text, "bad.hlo:5:");
  ck_assert_int_eq(run_with_plugin("opt missing.hlo", NULL), 2);
  ASSERT_HAS(err_text, "missing.hlo");
}
END_TEST

START_TEST(test_failed_run_leaves_output_untouched) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/out.hlo", tmpdir);
  hk_test_write_file(p, "precious\n");
  ck_assert_int_eq(run("--version", NULL), 0);   /* creates stdout.txt, stderr.txt */
  int before = dir_entries();
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-noop,cli-fail -o out.hlo", NULL), 2);
  ASSERT_HAS(err_text, "pass 'cli-fail'");
  ASSERT_HAS(err_text, "deliberate failure");
  char *after = tmp_file("out.hlo");
  ck_assert_str_eq(after, "precious\n");
  free(after);
  ck_assert_int_eq(dir_entries(), before);   /* no temporary left behind */
  /* Bad options fail before anything is written too. */
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-noop{level=high} -o out.hlo", NULL), 2);
  ASSERT_HAS(err_text, "pass 'cli-noop'");
  ASSERT_HAS(err_text, "option 'level'");
  ASSERT_HAS(err_text, "accepted options: level (int)");
  after = tmp_file("out.hlo");
  ck_assert_str_eq(after, "precious\n");
  free(after);
}
END_TEST

/* The module is written as it is printed: a write that fails stops the
 * command with the device's error, exit status 2. */
START_TEST(test_write_failure_exits_2) {
  if (access("/dev/full", W_OK) != 0) return;
  ck_assert_int_eq(run_with_plugin("opt in.hlo -o /dev/full", NULL), 2);
  ASSERT_HAS(err_text, "/dev/full: write failed");
}
END_TEST

START_TEST(test_output_naming_the_input) {
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-fail -o in.hlo", NULL), 2);
  char *text = tmp_file("in.hlo");
  ck_assert_str_eq(text, module_text);
  free(text);
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-rename -o in.hlo", NULL), 0);
  text = tmp_file("in.hlo");
  ASSERT_HAS(text, "HloModule renamed_module");
  ASSERT_HAS(text, "add(");
  free(text);
  /* The replaced file is still a readable module. */
  ck_assert_int_eq(run_with_plugin("opt in.hlo -o /dev/null", NULL), 0);
  struct stat st;
  ck_assert_int_eq(stat("/dev/null", &st), 0);
  ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

START_TEST(test_plugin_errors_exit_2) {
  ck_assert_int_eq(run("opt in.hlo --no-default-plugins --load-pass-plugin=nope.so", NULL), 2);
  ASSERT_HAS(err_text, "nope.so");
  ASSERT_HAS(err_text, "not found");
  ck_assert_int_eq(run("passes --no-default-plugins --load-pass-plugin=in.hlo", NULL), 2);
  ASSERT_HAS(err_text, "in.hlo: not a shared object");
  ck_assert_int_eq(run("passes --no-default-plugins --plugin-dir=nodir", NULL), 2);
  ASSERT_HAS(err_text, "nodir");
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-noop,nonesuch", NULL), 2);
  ASSERT_HAS(err_text, "unknown pass 'nonesuch'");
  ASSERT_HAS(err_text, "cli-noop");
}
END_TEST

START_TEST(test_passes_lists_plugin_passes) {
  ck_assert_int_eq(run_with_plugin("passes", NULL), 0);
  ASSERT_HAS(out_text, "4 passes registered");
  ASSERT_HAS(out_text, "cli-noop");
  ASSERT_HAS(out_text, plugin);
  ASSERT_HAS(out_text, "test cli-noop");
  ASSERT_HAS(out_text, "level: int = 3");
  ASSERT_HAS(out_text, "loud: bool = false");
  ck_assert_int_eq(run_with_plugin("passes --json", NULL), 0);
  ASSERT_HAS(out_text, "\"name\": \"cli-break\"");
  ASSERT_HAS(out_text, "\"default\": \"3\"");
}
END_TEST

START_TEST(test_pipeline_file_and_instrumentation) {
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/pipe.json", tmpdir);
  hk_test_write_file(p, "[{\"pass\": \"cli-noop\", \"options\": {\"level\": 5}}, \"cli-rename\"]");
  ck_assert_int_eq(run_with_plugin("opt in.hlo --pipeline=pipe.json --time-passes "
                                   "--dump-after=cli-rename --dump-dir=dumps", NULL), 0);
  ASSERT_HAS(out_text, "HloModule renamed_module");
  ASSERT_HAS(err_text, "cli-noop");
  ASSERT_HAS(err_text, "wall ms");
  char *dump = tmp_file("dumps/renamed_module.0002.after_cli-rename.hlo");
  ck_assert_ptr_nonnull(dump);
  ASSERT_HAS(dump, "HloModule renamed_module");
  free(dump);
  hk_test_write_file(p, "[{\"pass\": \"cli-noop\", \"options\": {\"level\": true}}]");
  ck_assert_int_eq(run_with_plugin("opt in.hlo --pipeline=pipe.json", NULL), 2);
  ASSERT_HAS(err_text, "option 'level'");
  ck_assert_int_eq(run_with_plugin("opt in.hlo --pipeline=pipe.json --passes=cli-noop", NULL), 2);
  ASSERT_HAS(err_text, "not both");
}
END_TEST

START_TEST(test_verify_each_names_the_pass) {
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-noop,cli-break,cli-noop "
                                   "--verify-each", NULL), 2);
  ASSERT_HAS(err_text, "pass 'cli-break'");
  ASSERT_HAS(err_text, "#2");
  /* Without --verify-each the final verification still catches it. */
  ck_assert_int_eq(run_with_plugin("opt in.hlo --passes=cli-break", NULL), 2);
  ASSERT_HAS(err_text, "after the pipeline");
}
END_TEST

START_TEST(test_num_partitions_and_json_round_trip) {
  ck_assert_int_eq(run_with_plugin("opt in.hlo --num-partitions=4 --num-replicas=2 "
                                   "--format=json -o m.json", NULL), 0);
  char *json = tmp_file("m.json");
  ck_assert_ptr_nonnull(json);
  ck_assert_int_eq(json[0], '{');
  free(json);
  ck_assert_int_eq(run_with_plugin("opt m.json --print-form=short", NULL), 0);
  ASSERT_HAS(out_text, "HloModule add_module");
  ASSERT_HAS(out_text, "num_partitions=4");
  ASSERT_HAS(out_text, "replica_count=2");
  ASSERT_HAS(out_text, "ROOT sum = f32[2]");
}
END_TEST

/* The example plugin, compiled against abi/ alone, loads and runs. */
START_TEST(test_example_plugin_runs) {
  char so[PATH_MAX + 32], cmd[4 * PATH_MAX], src[PATH_MAX];
  ck_assert_ptr_nonnull(realpath("plugin/examples/count_ops.c", src));
  snprintf(so, sizeof so, "%s/count_ops.so", tmpdir);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -shared -fPIC -Wall -Werror -I'%s' -o '%s' '%s'",
           abi_dir, so, src);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(run("opt in.hlo --no-default-plugins --load-pass-plugin=count_ops.so "
                       "--passes='count-ops{per_computation=true min_count=1}'", NULL), 0);
  ASSERT_HAS(err_text, "count-ops: add_module: 3 instructions");
  ASSERT_HAS(err_text, "count-ops: main: 3 instructions");
  ASSERT_HAS(err_text, "parameter                    2");
  ASSERT_HAS(err_text, "add                          1");
  ASSERT_HAS(out_text, "HloModule add_module");
  ck_assert_int_eq(run("opt in.hlo --no-default-plugins --load-pass-plugin=count_ops.so "
                       "--passes=count-ops{min_count=-1}", NULL), 2);
  ASSERT_HAS(err_text, "pass 'count-ops': min_count must be >= 0");
}
END_TEST

/* --timeout stops a while loop that never ends (exit 2, a message, within
 * seconds); --backend names a real back end, and mpi without its shared
 * object says how to get Open MPI. */
START_TEST(test_timeout_and_backend_option) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/endless.hlo", tmpdir);
  hk_test_write_file(path,
             "HloModule endless\n"
             "cond { s = (s32[]) parameter(0)  ROOT t = pred[] constant(true) }\n"
             "body { s = (s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0\n"
             "  one = s32[] constant(1)  n = s32[] add(i, one)  ROOT o = (s32[]) tuple(n) }\n"
             "ENTRY main { z = s32[] constant(0)  init = (s32[]) tuple(z)\n"
             "  ROOT w = (s32[]) while(init), condition=cond, body=body }\n");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ck_assert_int_eq(run("run endless.hlo --timeout=1", NULL), 2);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  ck_assert(t1.tv_sec - t0.tv_sec < 10);
  /* The message names the option the user gave, then where the evaluator stopped. */
  ASSERT_HAS(err_text, "hlokit run: error: timed out after 1 s (--timeout=1): ");
  ASSERT_HAS(err_text, "time limit");
  ck_assert_int_eq(run("check endless.hlo --partitioned=endless.hlo --timeout=1", NULL), 2);
  ASSERT_HAS(err_text, "hlokit check: error: timed out after 1 s (--timeout=1)");
  ck_assert_int_eq(run("run in.hlo --timeout=-1", NULL), 2);
  ck_assert_int_eq(run("run in.hlo --backend=gpu", NULL), 2);
  ASSERT_HAS(err_text, "--backend=gpu");
  ck_assert_int_eq(run("run in.hlo --backend=threads --timeout=30", NULL), 0);
  setenv("HLOKIT_MPI_BACKEND", "/nonexistent/mpi.so", 1);
  ck_assert_int_eq(run("run in.hlo --backend=mpi", NULL), 2);
  unsetenv("HLOKIT_MPI_BACKEND");
  ASSERT_HAS(err_text, "install Open MPI");
}
END_TEST

/* Found by the pipeline fuzzer: check ran the partitioner on an input that
 * fails verification (index batching dims missing) and crashed; the input
 * is verified first, as opt does. */
START_TEST(test_check_verifies_its_input) {
  char args[PATH_MAX * 2];
  char *cwd = getcwd(NULL, 0);
  snprintf(args, sizeof args,
           "check '%s/tests/fuzz_regressions/scatter_batching_dims_missing.hlo' --num-partitions=4 "
           "'--passes=spmd-partitioning{allow_module_signature_change=true}'", cwd);
  free(cwd);
  ck_assert_int_eq(run(args, NULL), 2);
  ck_assert_msg(has(err_text, "input module fails verification") &&
                has(err_text, "scatter_indices_batching_dims"), "stderr: %s", err_text);
}
END_TEST

static Suite *cli_suite(void) {
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_usage_and_exit_codes);
  tcase_add_test(tc, test_opt_prints_module);
  tcase_add_test(tc, test_parse_error_names_file_line_col);
  tcase_add_test(tc, test_failed_run_leaves_output_untouched);
  tcase_add_test(tc, test_output_naming_the_input);
  tcase_add_test(tc, test_write_failure_exits_2);
  tcase_add_test(tc, test_plugin_errors_exit_2);
  tcase_add_test(tc, test_passes_lists_plugin_passes);
  tcase_add_test(tc, test_pipeline_file_and_instrumentation);
  tcase_add_test(tc, test_verify_each_names_the_pass);
  tcase_add_test(tc, test_num_partitions_and_json_round_trip);
  tcase_add_test(tc, test_example_plugin_runs);
  tcase_add_test(tc, test_timeout_and_backend_option);
  tcase_add_test(tc, test_check_verifies_its_input);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  Suite *s = cli_suite();
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  free(out_text);
  free(err_text);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
