/* test_pipeline.c - the plugin host: loader error paths (with tiny plugins
 * compiled by the test against abi/ alone), the registry's duplicate and
 * drop-in rules, typed options, pipeline text / JSON / presets, and
 * running pipelines. */
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/pipeline.h"
#include "testutil.h"

/* ---- building plugins inside the test ----------------------------------- */

static char tmpdir[PATH_MAX];
static char abi_dir[PATH_MAX];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hk_test_pipeline.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  hk_test_abi_dir(abi_dir);
}

static void teardown(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static char *tmp_path(const char *name) {
  char *p = malloc(strlen(tmpdir) + strlen(name) + 2);
  sprintf(p, "%s/%s", tmpdir, name);
  return p;
}

/* Compiles C source into SUBDIR/NAME.so with only -I on abi/.  Returns the
 * .so path (malloc'ed). */
static char *build_plugin_in(const char *subdir, const char *name, const char *src) {
  char dir[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s/%s", tmpdir, subdir);
  mkdir(dir, 0777);
  char c_path[PATH_MAX + 256], so_path[PATH_MAX + 256];
  snprintf(c_path, sizeof c_path, "%s/%s.c", dir, name);
  snprintf(so_path, sizeof so_path, "%s/%s.so", dir, name);
  hk_test_write_file(c_path, src);
  char cmd[5 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "cc -std=c11 -shared -fPIC -Wall -Werror -I'%s' -o '%s' '%s'",
           abi_dir, so_path, c_path);
  ck_assert_msg(system(cmd) == 0, "compiling %s failed", c_path);
  return strdup(so_path);
}

static char *build_plugin(const char *name, const char *src) {
  return build_plugin_in(".", name, src);
}

/* A plugin registering one pass NAME whose run sets *changed = CHANGED and
 * returns an error with message FAIL when FAIL is non-empty. */
static const char *pass_plugin_fmt =
    "#include \"hlokit/hlokit.h\"\n"
    "#include <stdlib.h>\n"
    "static hk_status *run(hk_pass *s, hk_module *m, const hk_exec_threads *t, bool *c) {\n"
    "  (void)s; (void)m; (void)t; *c = %s;\n"
    "  return \"%s\"[0] ? hk_error(HK_INTERNAL, \"%%s\", \"%s\") : NULL; }\n"
    "static void destroy(hk_pass *s) { free(s); }\n"
    "static const hk_pass_vtable vt = {sizeof(hk_pass_vtable), \"%s\", run, destroy, NULL};\n"
    "static hk_pass *create(const hk_option_values *o, hk_registry *r, hk_status **e) {\n"
    "  (void)o; (void)r; (void)e; hk_pass *p = malloc(sizeof *p); p->vt = &vt; return p; }\n"
    "static const hk_pass_desc desc = {sizeof(hk_pass_desc), \"%s\", \"%s\", NULL, 0, create};\n"
    "static hk_status *reg(hk_registry *r) { return hk_registry_add_pass(r, &desc); }\n"
    "HK_PLUGIN(\"%s\", \"1.0\", reg)\n";

static char *build_pass_plugin_in(const char *subdir, const char *file, const char *pass,
                                  const char *changed, const char *fail, const char *summary) {
  char src[4096];
  snprintf(src, sizeof src, pass_plugin_fmt, changed, fail, fail, pass, pass, summary, file);
  return build_plugin_in(subdir, file, src);
}

static char *build_pass_plugin(const char *file, const char *pass, const char *changed,
                               const char *fail) {
  return build_pass_plugin_in(".", file, pass, changed, fail, "a test pass");
}

/* Asserts st is an error whose message contains every given fragment. */
static void expect_error(hk_status *st, hk_code code, const char *const *frags) {
  ck_assert_msg(st != NULL, "expected an error");
  ck_assert_msg(st->code == code, "code %d, expected %d: %s", st->code, code, st->message);
  for (int i = 0; frags[i]; i++)
    ck_assert_msg(strstr(st->message, frags[i]) != NULL, "'%s' not in message: %s", frags[i],
                  st->message);
  hk_status_free(st);
}
#define EXPECT_ERROR(st, code, ...) \
  expect_error((st), (code), (const char *const[]){__VA_ARGS__, NULL})

static hk_pass *never_create(const hk_option_values *o, hk_registry *r, hk_status **e) {
  (void)o, (void)r;
  *e = hk_error(HK_INTERNAL, "not created in this test");
  return NULL;
}
static const hk_pass_desc log_desc_for_origin = {sizeof(hk_pass_desc), "log", "", NULL, 0,
                                                 never_create};

/* ---- loader error paths ------------------------------------------------------ */

START_TEST(test_missing_file) {
  hk_registry *reg = hk_registry_new();
  char *path = tmp_path("nope.so");
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_NOT_FOUND, path, "not found");
  free(path);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_not_a_shared_object) {
  hk_registry *reg = hk_registry_new();
  char *path = tmp_path("text.so");
  hk_test_write_file(path, "this is not ELF\n");
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_INVALID_ARGUMENT, path,
               "not a shared object");
  free(path);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_no_entry_symbol) {
  hk_registry *reg = hk_registry_new();
  char *path = build_plugin("plain", "int plain_function(void) { return 42; }\n");
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_INVALID_ARGUMENT, path,
               "hlokit_plugin_info", "not an hlokit plugin");
  ck_assert_int_eq(hk_registry_n_plugins(reg), 1);   /* just the builtin */
  free(path);
  hk_registry_free(reg);
}
END_TEST

static char *build_versioned_plugin(const char *name, unsigned major, unsigned minor) {
  char src[1024];
  snprintf(src, sizeof src,
           "#include \"hlokit/hlokit.h\"\n"
           "static hk_status *reg(hk_registry *r) { (void)r; return NULL; }\n"
           "static const hk_plugin_info info = {(%uu << 16) | %uu, \"v\", \"1\", reg};\n"
           "const hk_plugin_info *hlokit_plugin_info(void) { return &info; }\n",
           major, minor);
  return build_plugin(name, src);
}

START_TEST(test_abi_major_mismatch) {
  hk_registry *reg = hk_registry_new();
  char *path = build_versioned_plugin("future", HK_ABI_MAJOR + 1, 0);
  char theirs[32], ours[32];
  snprintf(theirs, sizeof theirs, "%d.0", HK_ABI_MAJOR + 1);
  snprintf(ours, sizeof ours, "%d.%d", HK_ABI_MAJOR, HK_ABI_MINOR);
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_FAILED_PRECONDITION, path,
               theirs, ours, "major versions differ");
  free(path);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_abi_newer_minor_refused_older_accepted) {
  hk_registry *reg = hk_registry_new();
  char *newer = build_versioned_plugin("newer", HK_ABI_MAJOR, HK_ABI_MINOR + 1);
  EXPECT_ERROR(hk_plugin_load(reg, newer, HK_ORIGIN_EXPLICIT), HK_FAILED_PRECONDITION, newer,
               "needs a newer hlokit");
  char *same = build_versioned_plugin("same", HK_ABI_MAJOR, HK_ABI_MINOR);
  ck_assert_ok(hk_plugin_load(reg, same, HK_ORIGIN_EXPLICIT));
  ck_assert_int_eq(hk_registry_n_plugins(reg), 2);
  ck_assert_str_eq(hk_registry_plugin(reg, 1)->name, "v");
  free(newer);
  free(same);
  hk_registry_free(reg);
}
END_TEST

/* A plugin built against a newer minor that calls a function this host
 * does not have: dlopen alone would fail with "undefined symbol"; the
 * loader reads the recorded version from the file first and names both. */
START_TEST(test_abi_newer_minor_refused_before_dlopen) {
  hk_registry *reg = hk_registry_new();
  char src[1024];
  snprintf(src, sizeof src,
           "#include \"hlokit/hlokit.h\"\n"
           "#undef HK_ABI_MINOR\n"
           "#define HK_ABI_MINOR %d\n"
           "int hk_function_from_a_newer_abi(void);\n"
           "static hk_status *reg(hk_registry *r) {\n"
           "  (void)r; return hk_function_from_a_newer_abi() ? NULL : NULL; }\n"
           "HK_PLUGIN(\"newer-abi\", \"1\", reg)\n",
           HK_ABI_MINOR + 1);
  char *path = build_plugin("newer_abi", src);
  char theirs[32], ours[32];
  snprintf(theirs, sizeof theirs, "ABI version %d.%d", HK_ABI_MAJOR, HK_ABI_MINOR + 1);
  snprintf(ours, sizeof ours, "ABI version %d.%d", HK_ABI_MAJOR, HK_ABI_MINOR);
  hk_status *st = hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT);
  ck_assert_msg(st && !strstr(st->message, "undefined symbol"), "%s",
                st ? st->message : "loaded");
  EXPECT_ERROR(st, HK_FAILED_PRECONDITION, path, theirs, ours, "needs a newer hlokit");
  ck_assert_int_eq(hk_registry_n_plugins(reg), 1);   /* just the builtin */
  free(path);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_register_callback_fails) {
  hk_registry *reg = hk_registry_new();
  char *path = build_plugin(
      "failing",
      "#include \"hlokit/hlokit.h\"\n"
      "static hk_status *reg(hk_registry *r) { (void)r;\n"
      "  return hk_error(HK_FAILED_PRECONDITION, \"needs a GPU\"); }\n"
      "HK_PLUGIN(\"failing\", \"0.1\", reg)\n");
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_FAILED_PRECONDITION, path,
               "failing", "failed to register", "needs a GPU");
  free(path);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_duplicate_pass_name) {
  hk_registry *reg = hk_registry_new();
  char *a = build_pass_plugin("first", "dup-pass", "false", "");
  char *b = build_pass_plugin("second", "dup-pass", "false", "");
  ck_assert_ok(hk_plugin_load(reg, a, HK_ORIGIN_PLUGIN_DIR));
  EXPECT_ERROR(hk_plugin_load(reg, b, HK_ORIGIN_PLUGIN_DIR), HK_ALREADY_EXISTS, a, b,
               "pass 'dup-pass' is already registered");
  /* An explicit plugin may not replace one from --plugin-dir either. */
  char *c = build_pass_plugin("third", "dup-pass", "false", "");
  EXPECT_ERROR(hk_plugin_load(reg, c, HK_ORIGIN_EXPLICIT), HK_ALREADY_EXISTS, c, a);
  free(a);
  free(b);
  free(c);
  hk_registry_free(reg);
}
END_TEST

/* Runs the pass `name` from reg on an empty module; returns *changed. */
static bool run_registered(hk_registry *reg, const char *name) {
  hk_status *err;
  hk_pass *p = hk_registry_create_pass(reg, name, NULL, &err);
  ck_assert_ok(err);
  hk_module *m = hk_module_new("m");
  bool changed = false;
  ck_assert_ok(hk_pass_run(p, m, NULL, &changed));
  hk_pass_destroy(p);
  hk_module_free(m);
  return changed;
}

START_TEST(test_drop_in_replacement) {
  hk_registry *reg = hk_registry_new();
  FILE *notices = tmpfile();
  hk_registry_set_notice_stream(reg, notices);
  char *stock = build_pass_plugin_in("default", "stock", "my-dce", "false", "", "stock dce");
  char *mine = build_pass_plugin_in("mine", "mine", "my-dce", "true", "", "my dce");
  ck_assert_ok(hk_plugin_load(reg, stock, HK_ORIGIN_DEFAULT_DIR));
  ck_assert(!run_registered(reg, "my-dce"));
  ck_assert_ok(hk_plugin_load(reg, mine, HK_ORIGIN_EXPLICIT));
  /* One entry, now from the explicit plugin, and it is its code that runs. */
  ck_assert_int_eq(hk_registry_n_passes(reg), 1);
  const hk_pass_entry *e = hk_registry_pass_entry(reg, "my-dce");
  ck_assert_str_eq(hk_registry_plugin(reg, e->plugin)->path, mine);
  ck_assert_str_eq(e->desc->summary, "my dce");
  ck_assert(run_registered(reg, "my-dce"));
  char msg[1024] = {0};
  rewind(notices);
  ck_assert_ptr_nonnull(fgets(msg, sizeof msg, notices));
  ck_assert_ptr_nonnull(strstr(msg, "my-dce"));
  ck_assert_ptr_nonnull(strstr(msg, mine));
  ck_assert_ptr_nonnull(strstr(msg, stock));
  ck_assert_ptr_nonnull(strstr(msg, "replaces"));
  fclose(notices);
  free(stock);
  free(mine);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_load_dir_in_name_order_and_once) {
  hk_registry *reg = hk_registry_new();
  char *b = build_pass_plugin_in("dir", "b_plugin", "pass-b", "false", "", "b");
  char *a = build_pass_plugin_in("dir", "a_plugin", "pass-a", "false", "", "a");
  char *dir = tmp_path("dir");
  char *readme = tmp_path("dir/readme.txt");
  hk_test_write_file(readme, "not a plugin\n");
  free(readme);
  ck_assert_ok(hk_plugin_load_dir(reg, dir, HK_ORIGIN_PLUGIN_DIR, false));
  ck_assert_int_eq(hk_registry_n_passes(reg), 2);
  ck_assert_str_eq(hk_registry_pass_at(reg, 0)->desc->name, "pass-a");
  ck_assert_str_eq(hk_registry_pass_at(reg, 1)->desc->name, "pass-b");
  /* The same file again (another route to it) is not a duplicate. */
  ck_assert_ok(hk_plugin_load(reg, a, HK_ORIGIN_EXPLICIT));
  ck_assert_int_eq(hk_registry_n_plugins(reg), 3);
  /* What the host registers after loading is its own, not the last plugin's. */
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc_for_origin));
  ck_assert_int_eq(hk_registry_pass_entry(reg, "log")->plugin, 0);
  ck_assert_str_eq(hk_registry_plugin(reg, 0)->path, "<builtin>");
  char *missing = tmp_path("no-such-dir");
  EXPECT_ERROR(hk_plugin_load_dir(reg, missing, HK_ORIGIN_PLUGIN_DIR, false), HK_NOT_FOUND,
               missing, "--plugin-dir");
  ck_assert_ok(hk_plugin_load_dir(reg, missing, HK_ORIGIN_DEFAULT_DIR, true));
  free(missing);
  free(a);
  free(b);
  free(dir);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_load_all_order_and_env_path) {
  char *envd = build_pass_plugin_in("envdir", "env_plugin", "env-pass", "false", "", "e");
  char *expl = build_pass_plugin_in("expl", "explicit_plugin", "explicit-pass", "false", "", "x");
  char *envdir = tmp_path("envdir");
  setenv("HLOKIT_PLUGIN_PATH", envdir, 1);
  hk_registry *reg = hk_registry_new();
  const char *files[] = {expl};
  hk_plugin_sources src = {0, NULL, 1, files, false};
  ck_assert_ok(hk_plugin_load_all(reg, &src));
  const hk_pass_entry *e = hk_registry_pass_entry(reg, "env-pass");
  ck_assert_ptr_nonnull(e);
  ck_assert_int_eq(hk_registry_plugin(reg, e->plugin)->origin, HK_ORIGIN_ENV_PATH);
  e = hk_registry_pass_entry(reg, "explicit-pass");
  ck_assert_int_eq(hk_registry_plugin(reg, e->plugin)->origin, HK_ORIGIN_EXPLICIT);
  unsetenv("HLOKIT_PLUGIN_PATH");
  hk_registry_free(reg);
  free(envd);
  free(expl);
  free(envdir);
}
END_TEST

/* ---- custom-call partitioners ------------------------------------------------- */

START_TEST(test_custom_call_partitioners) {
  hk_registry *reg = hk_registry_new();
  char *path = build_plugin(
      "ccp",
      "#include \"hlokit/hlokit.h\"\n"
      "#include <stdlib.h>\n"
      "static bool shardable(const hk_custom_call_partitioner *s, const hk_instr *i)\n"
      "{ (void)s; (void)i; return true; }\n"
      "static bool side(const hk_custom_call_partitioner *s) { (void)s; return true; }\n"
      "static void destroy(hk_custom_call_partitioner *s) { free(s); }\n"
      "static const hk_custom_call_partitioner_vtable vt = {\n"
      "  .size = sizeof vt, .is_shardable = shardable,\n"
      "  .can_side_effecting_have_replicated_sharding = side, .destroy = destroy };\n"
      "static hk_status *reg(hk_registry *r) {\n"
      "  hk_custom_call_partitioner *p = malloc(sizeof *p); p->vt = &vt;\n"
      "  HK_TRY(hk_registry_add_custom_call_partitioner(r, \"ShardBarrierFrom\", p));\n"
      "  hk_custom_call_partitioner *q = malloc(sizeof *q); q->vt = &vt;\n"
      "  hk_status *st = hk_registry_add_custom_call_partitioner(r, \"ShardBarrierFrom\", q);\n"
      "  if (st) free(q);\n"
      "  return st; }\n"
      "HK_PLUGIN(\"ccp\", \"1\", reg)\n");
  EXPECT_ERROR(hk_plugin_load(reg, path, HK_ORIGIN_EXPLICIT), HK_ALREADY_EXISTS,
               "custom-call partitioner 'ShardBarrierFrom' is already registered");
  const hk_custom_call_partitioner *p =
      hk_registry_find_custom_call_partitioner(reg, "ShardBarrierFrom");
  ck_assert_ptr_nonnull(p);
  ck_assert(p->vt->is_shardable(p, NULL));
  ck_assert(p->vt->can_side_effecting_have_replicated_sharding(p));
  ck_assert_ptr_null(p->vt->partition);
  ck_assert_ptr_null(hk_registry_find_custom_call_partitioner(reg, "ShardBarrierTo"));
  ck_assert_int_eq(hk_registry_n_custom_calls(reg), 1);
  free(path);
  hk_registry_free(reg);   /* destroys the partitioner (valgrind checks) */
}
END_TEST

/* ---- typed options (a pass registered by the test itself) ------------------------ */

typedef struct opt_pass {
  hk_pass base;
  bool flag;
  int64_t n;
  char s[64];
  int mode;
  int32_t n_list;
  bool list[8];
} opt_pass;

static hk_status *opt_pass_run(hk_pass *self, hk_module *m, const hk_exec_threads *t,
                               bool *changed) {
  (void)self, (void)m, (void)t;
  *changed = false;
  return NULL;
}
static void opt_pass_destroy(hk_pass *self) { free(self); }
static const hk_pass_vtable opt_pass_vt = {sizeof(hk_pass_vtable), "opt-pass", opt_pass_run,
                                           opt_pass_destroy, NULL};

static hk_pass *opt_pass_create(const hk_option_values *o, hk_registry *reg, hk_status **err) {
  (void)reg, (void)err;
  opt_pass *p = calloc(1, sizeof *p);
  p->base.vt = &opt_pass_vt;
  p->flag = hk_opt_bool(o, "flag");
  p->n = hk_opt_int(o, "n");
  snprintf(p->s, sizeof p->s, "%s", hk_opt_string(o, "s"));
  p->mode = hk_opt_enum_index(o, "mode");
  const bool *l;
  p->n_list = hk_opt_bool_list(o, "l", &l);
  for (int32_t i = 0; i < p->n_list && i < 8; i++) p->list[i] = l[i];
  return &p->base;
}

static const char *const modes[] = {"fast", "slow", NULL};
static const hk_option_decl opt_decls[] = {
    {"flag", HK_OPT_BOOL, "true", "a flag", NULL},
    {"n", HK_OPT_INT, "7", "a count", NULL},
    {"s", HK_OPT_STRING, NULL, "a string", NULL},
    {"mode", HK_OPT_ENUM, "slow", "a mode", modes},
    {"l", HK_OPT_BOOL_LIST, "[false,true]", "a list", NULL},
};
static const hk_pass_desc opt_desc = {sizeof(hk_pass_desc), "opt-pass", "options", opt_decls, 5,
                                      opt_pass_create};

static opt_pass *create_opt_pass(hk_registry *reg, const char *options, hk_status **err) {
  return (opt_pass *)hk_registry_create_pass(reg, "opt-pass", options, err);
}

START_TEST(test_option_defaults_and_values) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &opt_desc));
  hk_status *err;
  opt_pass *p = create_opt_pass(reg, NULL, &err);
  ck_assert_ok(err);
  ck_assert(p->flag);
  ck_assert_int_eq(p->n, 7);
  ck_assert_str_eq(p->s, "");
  ck_assert_int_eq(p->mode, 1);
  ck_assert_int_eq(p->n_list, 2);
  ck_assert(!p->list[0] && p->list[1]);
  hk_pass_destroy(&p->base);
  p = create_opt_pass(reg, "flag=false n=-12 s=\"two words\" mode=fast l=[true,true,false]", &err);
  ck_assert_ok(err);
  ck_assert(!p->flag);
  ck_assert_int_eq(p->n, -12);
  ck_assert_str_eq(p->s, "two words");
  ck_assert_int_eq(p->mode, 0);
  ck_assert_int_eq(p->n_list, 3);
  ck_assert(p->list[0] && p->list[1] && !p->list[2]);
  hk_pass_destroy(&p->base);
  /* A single bool is a one-element list; an empty list is allowed. */
  p = create_opt_pass(reg, "l=true", &err);
  ck_assert_ok(err);
  ck_assert_int_eq(p->n_list, 1);
  hk_pass_destroy(&p->base);
  p = create_opt_pass(reg, "l=[]", &err);
  ck_assert_ok(err);
  ck_assert_int_eq(p->n_list, 0);
  hk_pass_destroy(&p->base);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_option_errors) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &opt_desc));
  hk_status *err;
  const char *accepted =
      "accepted options: flag (bool), n (int), s (string), mode (enum: fast|slow), "
      "l (list of bool)";
  ck_assert_ptr_null(create_opt_pass(reg, "bogus=1", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "pass 'opt-pass'", "unknown option 'bogus'", accepted);
  ck_assert_ptr_null(create_opt_pass(reg, "n=abc", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "pass 'opt-pass'", "option 'n'", "expects an int",
               "got 'abc'", accepted);
  ck_assert_ptr_null(create_opt_pass(reg, "flag=yes", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "option 'flag'", "bool", "got 'yes'");
  ck_assert_ptr_null(create_opt_pass(reg, "mode=medium", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "option 'mode'", "fast|slow", "got 'medium'");
  ck_assert_ptr_null(create_opt_pass(reg, "l=[true,maybe]", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "option 'l'", "list of bool", "got '[true,maybe]'");
  ck_assert_ptr_null(create_opt_pass(reg, "n=[1,2]", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "option 'n'", "not a list");
  ck_assert_ptr_null(create_opt_pass(reg, "n", &err));
  EXPECT_ERROR(err, HK_INVALID_ARGUMENT, "expected key=value");
  ck_assert_ptr_null(hk_registry_create_pass(reg, "no-such-pass", NULL, &err));
  EXPECT_ERROR(err, HK_NOT_FOUND, "unknown pass 'no-such-pass'");
  hk_registry_free(reg);
}
END_TEST

static hk_pass *null_create(const hk_option_values *o, hk_registry *r, hk_status **e) {
  (void)o, (void)r, (void)e;
  return NULL;
}

START_TEST(test_bad_declarations_refused) {
  hk_registry *reg = hk_registry_new();
  static const hk_option_decl bad_default[] = {{"n", HK_OPT_INT, "seven", "", NULL}};
  static const hk_pass_desc d1 = {sizeof(hk_pass_desc), "bad-default", "", bad_default, 1,
                                  null_create};
  EXPECT_ERROR(hk_registry_add_pass(reg, &d1), HK_INVALID_ARGUMENT, "bad-default",
               "default 'seven' of option 'n'");
  static const hk_option_decl no_choices[] = {{"m", HK_OPT_ENUM, NULL, "", NULL}};
  static const hk_pass_desc d2 = {sizeof(hk_pass_desc), "no-choices", "", no_choices, 1,
                                  null_create};
  EXPECT_ERROR(hk_registry_add_pass(reg, &d2), HK_INVALID_ARGUMENT, "enum option 'm'");
  static const hk_pass_desc d3 = {0, "no-size", "", NULL, 0, null_create};
  EXPECT_ERROR(hk_registry_add_pass(reg, &d3), HK_INVALID_ARGUMENT, "sizeof(hk_pass_desc)");
  ck_assert_int_eq(hk_registry_n_passes(reg), 0);
  hk_registry_free(reg);
}
END_TEST

/* ---- pipeline text ----------------------------------------------------------------- */

START_TEST(test_spec_parse_lists_and_nested_braces) {
  hk_pipeline_spec s;
  ck_assert_ok(hk_pipeline_spec_parse(
      " a , b{key=value key2=[true,false]},c{s={devices=[2,1]0,1} t=\"x, y}\" u=f(1,2)}", NULL,
      &s));
  ck_assert_int_eq(s.n, 3);
  ck_assert_str_eq(s.passes[0].name, "a");
  ck_assert_int_eq(s.passes[0].n_kvs, 0);
  ck_assert_str_eq(s.passes[1].name, "b");
  ck_assert_int_eq(s.passes[1].n_kvs, 2);
  ck_assert_str_eq(s.passes[1].kvs[0].key, "key");
  ck_assert_str_eq(s.passes[1].kvs[0].value, "value");
  ck_assert(s.passes[1].kvs[1].is_list);
  ck_assert_int_eq(s.passes[1].kvs[1].n_elems, 2);
  ck_assert_str_eq(s.passes[1].kvs[1].elems[0], "true");
  ck_assert_str_eq(s.passes[1].kvs[1].elems[1], "false");
  ck_assert_str_eq(s.passes[2].name, "c");
  ck_assert_int_eq(s.passes[2].n_kvs, 3);
  ck_assert_str_eq(s.passes[2].kvs[0].value, "{devices=[2,1]0,1}");
  ck_assert_str_eq(s.passes[2].kvs[1].value, "x, y}");
  ck_assert_str_eq(s.passes[2].kvs[2].value, "f(1,2)");
  hk_pipeline_spec_free(&s);
  ck_assert_ok(hk_pipeline_spec_parse("", NULL, &s));
  ck_assert_int_eq(s.n, 0);
  hk_pipeline_spec_free(&s);
}
END_TEST

START_TEST(test_spec_parse_errors) {
  hk_pipeline_spec s;
  EXPECT_ERROR(hk_pipeline_spec_parse("a,b{k=v", NULL, &s), HK_INVALID_ARGUMENT, "--passes",
               "column 4", "never closed");
  EXPECT_ERROR(hk_pipeline_spec_parse("a b", NULL, &s), HK_INVALID_ARGUMENT, "column 3",
               "expected ','");
  EXPECT_ERROR(hk_pipeline_spec_parse("a,,b", NULL, &s), HK_INVALID_ARGUMENT, "column 3",
               "expected a pass name");
  EXPECT_ERROR(hk_pipeline_spec_parse("a{k=[true,false}", NULL, &s), HK_INVALID_ARGUMENT,
               "pass 'a'", "unterminated list");
  EXPECT_ERROR(hk_pipeline_spec_parse("a{k=\"open}", NULL, &s), HK_INVALID_ARGUMENT, "never closed");
  EXPECT_ERROR(hk_pipeline_spec_parse("@no-such-preset", NULL, &s), HK_NOT_FOUND,
               "unknown preset '@no-such-preset'", "@pre-layout-assignment");
}
END_TEST

START_TEST(test_spec_json) {
  const char *text =
      "[{\"pass\": \"a\", \"options\": {\"x\": 1, \"y\": [true, false], \"z\": \"s t\", "
      "\"w\": true}},\n \"b{k=v}\", {\"pass\": \"c\"}]\n";
  hk_pipeline_spec s;
  ck_assert_ok(hk_pipeline_spec_from_json(text, strlen(text), "p.json", NULL, &s));
  ck_assert_int_eq(s.n, 3);
  ck_assert_str_eq(s.passes[0].name, "a");
  ck_assert_int_eq(s.passes[0].n_kvs, 4);
  ck_assert_str_eq(s.passes[0].kvs[0].key, "x");
  ck_assert_str_eq(s.passes[0].kvs[0].value, "1");
  ck_assert(s.passes[0].kvs[1].is_list);
  ck_assert_str_eq(s.passes[0].kvs[1].elems[1], "false");
  ck_assert_str_eq(s.passes[0].kvs[2].value, "s t");
  ck_assert_str_eq(s.passes[0].kvs[3].value, "true");
  ck_assert_str_eq(s.passes[1].name, "b");
  ck_assert_str_eq(s.passes[1].kvs[0].value, "v");
  ck_assert_str_eq(s.passes[2].name, "c");
  hk_pipeline_spec_free(&s);
}
END_TEST

START_TEST(test_spec_json_errors) {
  hk_pipeline_spec s;
  const char *t1 = "{\"pass\": \"a\"}";
  EXPECT_ERROR(hk_pipeline_spec_from_json(t1, strlen(t1), "p.json", NULL, &s),
               HK_INVALID_ARGUMENT, "p.json", "expected a JSON array");
  const char *t2 = "[{\"pass\": \"a\", \"opts\": {}}]";
  EXPECT_ERROR(hk_pipeline_spec_from_json(t2, strlen(t2), "p.json", NULL, &s),
               HK_INVALID_ARGUMENT, "entry 0", "unknown key \"opts\"");
  const char *t3 = "[{\"pass\": \"a\", \"options\": {\"k\": {\"x\": 1}}}]";
  EXPECT_ERROR(hk_pipeline_spec_from_json(t3, strlen(t3), "p.json", NULL, &s),
               HK_INVALID_ARGUMENT, "pass 'a'", "option 'k'");
  const char *t4 = "[{\"pass\": \"a\",]";
  EXPECT_ERROR(hk_pipeline_spec_from_json(t4, strlen(t4), "p.json", NULL, &s),
               HK_INVALID_ARGUMENT, "p.json", "invalid JSON");
  char *missing = tmp_path("missing.json");
  EXPECT_ERROR(hk_pipeline_spec_from_file(missing, NULL, &s), HK_NOT_FOUND, missing);
  free(missing);
  char *file = tmp_path("ok.json");
  hk_test_write_file(file, "[\"x\", \"y\"]");
  ck_assert_ok(hk_pipeline_spec_from_file(file, NULL, &s));
  ck_assert_int_eq(s.n, 2);
  hk_pipeline_spec_free(&s);
  free(file);
}
END_TEST

/* ---- presets -------------------------------------------------------------------------- */

static const char *preset_order[] = {
    "hlo-verifier", "sharding-propagation", "spmd-partitioning", "comparison-expander",
    "all-reduce-promotion", "float-normalization", "dynamic-padder", "tuple-simplifier",
    "flatten-call-graph", "hlo-dce", "change-op-data-type"};

START_TEST(test_preset_spmd_block_gated) {
  hk_module_config cfg = {0};
  cfg.num_partitions = 1;
  hk_pipeline_spec s;
  ck_assert_ok(hk_pipeline_spec_parse("@pre-layout-assignment", &cfg, &s));
  ck_assert_int_eq(s.n, 9);
  ck_assert_str_eq(s.passes[0].name, "hlo-verifier");
  ck_assert_str_eq(s.passes[1].name, "comparison-expander");
  ck_assert_str_eq(s.passes[8].name, "change-op-data-type");
  hk_pipeline_spec_free(&s);
  cfg.num_partitions = 4;   /* a header with num_partitions > 1 turns SPMD on */
  ck_assert_ok(hk_pipeline_spec_parse("@pre-layout-assignment,extra", &cfg, &s));
  ck_assert_int_eq(s.n, 12);
  for (int i = 0; i < 11; i++) ck_assert_str_eq(s.passes[i].name, preset_order[i]);
  ck_assert_str_eq(s.passes[11].name, "extra");
  ck_assert_str_eq(s.passes[1].kvs[0].key, "is_spmd");
  ck_assert_str_eq(s.passes[1].kvs[0].value, "true");
  ck_assert_str_eq(s.passes[2].kvs[0].key, "threshold_for_windowed_einsum_mib");
  ck_assert_str_eq(s.passes[2].kvs[0].value, "100000");
  ck_assert_int_eq(s.n_presets, 1);
  hk_pipeline_spec_free(&s);
  cfg.num_partitions = 1;
  cfg.use_spmd_partitioning = true;
  ck_assert_ok(hk_pipeline_spec_parse("@pre-layout-assignment", &cfg, &s));
  ck_assert_int_eq(s.n, 11);
  hk_pipeline_spec_free(&s);
}
END_TEST

START_TEST(test_preset_lists_missing_passes) {
  hk_registry *reg = hk_registry_new();
  char *dce = build_pass_plugin("dce", "hlo-dce", "false", "");
  ck_assert_ok(hk_plugin_load(reg, dce, HK_ORIGIN_EXPLICIT));
  hk_module_config cfg = {0};
  cfg.num_partitions = 1;
  hk_pipeline_spec s;
  ck_assert_ok(hk_pipeline_spec_parse("@pre-layout-assignment", &cfg, &s));
  hk_pass *pl = NULL;
  EXPECT_ERROR(hk_pipeline_build(reg, &s, "p", &pl), HK_NOT_FOUND, "@pre-layout-assignment",
               "10 passes no loaded plugin provides", "hlo-verifier, sharding-propagation, "
               "spmd-partitioning, comparison-expander");
  ck_assert_ptr_null(pl);
  hk_pipeline_spec_free(&s);
  free(dce);
  hk_registry_free(reg);
}
END_TEST

/* ---- running pipelines ------------------------------------------------------------------ */

/* A builtin pass that appends its tag to a shared log. */
static char run_log[256];
typedef struct log_pass {
  hk_pass base;
  char tag[16];
  bool change;
  bool fail;
} log_pass;

static hk_status *log_run(hk_pass *self, hk_module *m, const hk_exec_threads *t, bool *changed) {
  (void)m, (void)t;
  log_pass *p = (log_pass *)self;
  strcat(run_log, p->tag);
  *changed = p->change;
  return p->fail ? hk_error(HK_INTERNAL, "%s exploded", p->tag) : NULL;
}
static void log_destroy(hk_pass *self) { free(self); }
static const hk_pass_vtable log_vt = {sizeof(hk_pass_vtable), "log", log_run, log_destroy, NULL};

static hk_pass *log_create(const hk_option_values *o, hk_registry *r, hk_status **e) {
  (void)r, (void)e;
  log_pass *p = calloc(1, sizeof *p);
  p->base.vt = &log_vt;
  snprintf(p->tag, sizeof p->tag, "%s", hk_opt_string(o, "tag"));
  p->change = hk_opt_bool(o, "change");
  p->fail = hk_opt_bool(o, "fail");
  return &p->base;
}
static const hk_option_decl log_decls[] = {
    {"tag", HK_OPT_STRING, "x", "", NULL},
    {"change", HK_OPT_BOOL, NULL, "", NULL},
    {"fail", HK_OPT_BOOL, NULL, "", NULL},
};
static const hk_pass_desc log_desc = {sizeof(hk_pass_desc), "log", "", log_decls, 3, log_create};

static hk_status *build_and_run(hk_registry *reg, const char *text, bool *changed,
                                hk_pass **out) {
  hk_pipeline_spec s;
  HK_TRY(hk_pipeline_spec_parse(text, NULL, &s));
  hk_status *st = hk_pipeline_build(reg, &s, "t", out);
  hk_pipeline_spec_free(&s);
  if (st) return st;
  hk_module *m = hk_module_new("m");
  st = hk_pass_run(*out, m, NULL, changed);
  hk_module_free(m);
  return st;
}

START_TEST(test_pipeline_runs_in_order) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc));
  run_log[0] = '\0';
  bool changed = true;
  hk_pass *pl;
  ck_assert_ok(build_and_run(reg, "log{tag=a},log{tag=b},log{tag=c}", &changed, &pl));
  ck_assert_str_eq(run_log, "abc");
  ck_assert(!changed);
  ck_assert(hk_is_pipeline(pl));
  ck_assert_int_eq(hk_pipeline_size(pl), 3);
  hk_pass_destroy(pl);
  run_log[0] = '\0';
  ck_assert_ok(build_and_run(reg, "log{tag=a},log{tag=b change=true},log{tag=c}", &changed, &pl));
  ck_assert(changed);
  hk_pass_destroy(pl);
  run_log[0] = '\0';
  EXPECT_ERROR(build_and_run(reg, "log{tag=a},log{tag=b fail=true},log{tag=c}", &changed, &pl),
               HK_INTERNAL, "pass 'log'", "b exploded");
  ck_assert_str_eq(run_log, "ab");
  hk_pass_destroy(pl);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_pipeline_unknown_pass_and_bad_option) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc));
  bool changed;
  hk_pass *pl = NULL;
  EXPECT_ERROR(build_and_run(reg, "log,nope,nada", &changed, &pl), HK_NOT_FOUND,
               "unknown passes 'nope', 'nada'", "registered passes: log");
  EXPECT_ERROR(build_and_run(reg, "log{tags=a}", &changed, &pl), HK_INVALID_ARGUMENT,
               "pass 'log'", "unknown option 'tags'", "accepted options: tag (string)");
  ck_assert_ptr_null(pl);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_pipeline_time_passes) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc));
  hk_pipeline_spec s;
  ck_assert_ok(hk_pipeline_spec_parse("log{tag=a change=true},log{tag=b}", NULL, &s));
  hk_pass *pl;
  ck_assert_ok(hk_pipeline_build(reg, &s, "t", &pl));
  hk_pipeline_spec_free(&s);
  FILE *report = tmpfile();
  hk_pipeline_run_options ro = {true, false, NULL, NULL, HK_PRINT_SHORT, report};
  hk_pipeline_set_run_options(pl, &ro);
  hk_module *m = hk_module_new("m");
  bool changed;
  ck_assert_ok(hk_pass_run(pl, m, NULL, &changed));
  int32_t n;
  const hk_pass_stat *st = hk_pipeline_stats(pl, &n);
  ck_assert_int_eq(n, 2);
  ck_assert(st[0].changed && !st[1].changed);
  ck_assert(st[0].seconds >= 0);
  char text[2048] = {0};
  rewind(report);
  ck_assert_uint_gt(fread(text, 1, sizeof text - 1, report), 0);
  ck_assert_ptr_nonnull(strstr(text, "wall ms"));
  ck_assert_ptr_nonnull(strstr(text, "yes"));
  ck_assert_ptr_nonnull(strstr(text, "total"));
  fclose(report);
  hk_module_free(m);
  hk_pass_destroy(pl);
  hk_registry_free(reg);
}
END_TEST

/* A pass that counts its runs and reports them (interface "hlokit.counters"). */
typedef struct counting_pass {
  hk_pass base;
  int64_t runs;
} counting_pass;

static hk_status *counting_run(hk_pass *self, hk_module *m, const hk_exec_threads *t, bool *changed) {
  (void)m, (void)t;
  ((counting_pass *)self)->runs++;
  *changed = false;
  return NULL;
}
static void counting_report(hk_pass *self, hk_counter_fn emit, void *ctx) {
  emit(ctx, "runs", ((counting_pass *)self)->runs);
}
static const hk_pass_counters_vtable counting_counters = {sizeof(hk_pass_counters_vtable),
                                                          counting_report};
static const void *counting_extension(hk_pass *self, const char *iface) {
  (void)self;
  return !strcmp(iface, HK_COUNTERS_IFACE) ? &counting_counters : NULL;
}
static const hk_pass_vtable counting_vt = {sizeof(hk_pass_vtable), "counting", counting_run,
                                           log_destroy, counting_extension};

static void append_counter(void *ctx, const char *name, int64_t value) {
  char *out = ctx;
  snprintf(out + strlen(out), 256 - strlen(out), "%s=%lld;", name, (long long)value);
}

START_TEST(test_pipeline_reports_member_counters) {
  hk_pass *outer = hk_pipeline_new("outer");
  hk_pass *inner = hk_pipeline_new("inner");
  counting_pass *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  a->base.vt = b->base.vt = &counting_vt;
  hk_pipeline_add(outer, &a->base);
  hk_pipeline_add(inner, &b->base);
  hk_pipeline_add(outer, inner);
  hk_status *err = NULL;
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc));
  hk_pipeline_add(outer, hk_registry_create_pass(reg, "log", "tag=x", &err));  /* none */
  ck_assert_ok(err);
  hk_module *m = hk_module_new("m");
  bool changed;
  ck_assert_ok(hk_pass_run(outer, m, NULL, &changed));
  ck_assert_ok(hk_pass_run(outer, m, NULL, &changed));
  char got[256] = "";
  ck_assert(hk_pass_report_counters(outer, append_counter, got));
  /* Each counter named by its pass; a nested pipeline adds no level. */
  ck_assert_str_eq(got, "counting.runs=2;counting.runs=2;");
  got[0] = '\0';
  ck_assert(!hk_pass_report_counters(hk_pipeline_get(outer, 2), append_counter, got));
  ck_assert_str_eq(got, "");
  hk_module_free(m);
  hk_pass_destroy(outer);
  hk_registry_free(reg);
}
END_TEST

START_TEST(test_nested_pipelines_and_exec_threads) {
  hk_registry *reg = hk_registry_new();
  ck_assert_ok(hk_registry_add_pass(reg, &log_desc));
  hk_status *err;
  hk_pass *outer = hk_pipeline_new("outer");
  hk_pass *inner = hk_pipeline_new("inner");
  hk_pipeline_add(inner, hk_registry_create_pass(reg, "log", "tag=i", &err));
  ck_assert_ok(err);
  hk_pipeline_add(outer, hk_registry_create_pass(reg, "log", "tag=o", &err));
  hk_pipeline_add(outer, inner);
  run_log[0] = '\0';
  hk_module *m = hk_module_new("m");
  bool changed;
  ck_assert_ok(hk_pass_run(outer, m, NULL, &changed));
  ck_assert_str_eq(run_log, "oi");
  hk_module_free(m);
  hk_pass_destroy(outer);
  hk_registry_free(reg);

  hk_exec_threads t = hk_exec_threads_parse("main,,host");
  ck_assert_int_eq(t.n, 2);
  hk_computation c = {0};
  ck_assert(hk_exec_threads_include(&t, &c));    /* NULL thread is "main" */
  c.execution_thread = "host";
  ck_assert(hk_exec_threads_include(&t, &c));
  c.execution_thread = "device";
  ck_assert(!hk_exec_threads_include(&t, &c));
  hk_exec_threads all = {0, NULL};
  ck_assert(hk_exec_threads_include(&all, &c));
  hk_exec_threads_free(&t);
}
END_TEST

static Suite *pipeline_suite(void) {
  Suite *s = suite_create("pipeline");
  TCase *loader = tcase_create("loader");
  tcase_add_checked_fixture(loader, setup, teardown);
  tcase_set_timeout(loader, 60);
  tcase_add_test(loader, test_missing_file);
  tcase_add_test(loader, test_not_a_shared_object);
  tcase_add_test(loader, test_no_entry_symbol);
  tcase_add_test(loader, test_abi_major_mismatch);
  tcase_add_test(loader, test_abi_newer_minor_refused_older_accepted);
  tcase_add_test(loader, test_abi_newer_minor_refused_before_dlopen);
  tcase_add_test(loader, test_register_callback_fails);
  tcase_add_test(loader, test_duplicate_pass_name);
  tcase_add_test(loader, test_drop_in_replacement);
  tcase_add_test(loader, test_load_dir_in_name_order_and_once);
  tcase_add_test(loader, test_load_all_order_and_env_path);
  tcase_add_test(loader, test_custom_call_partitioners);
  tcase_add_test(loader, test_preset_lists_missing_passes);
  tcase_add_test(loader, test_spec_json_errors);
  suite_add_tcase(s, loader);
  TCase *opts = tcase_create("options");
  tcase_add_test(opts, test_option_defaults_and_values);
  tcase_add_test(opts, test_option_errors);
  tcase_add_test(opts, test_bad_declarations_refused);
  suite_add_tcase(s, opts);
  TCase *spec = tcase_create("spec");
  tcase_add_test(spec, test_spec_parse_lists_and_nested_braces);
  tcase_add_test(spec, test_spec_parse_errors);
  tcase_add_test(spec, test_spec_json);
  tcase_add_test(spec, test_preset_spmd_block_gated);
  suite_add_tcase(s, spec);
  TCase *run = tcase_create("run");
  tcase_add_test(run, test_pipeline_runs_in_order);
  tcase_add_test(run, test_pipeline_unknown_pass_and_bad_option);
  tcase_add_test(run, test_pipeline_time_passes);
  tcase_add_test(run, test_nested_pipelines_and_exec_threads);
  tcase_add_test(run, test_pipeline_reports_member_counters);
  suite_add_tcase(s, run);
  return s;
}

HK_TEST_MAIN(pipeline_suite)
