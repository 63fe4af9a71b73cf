/* test_abi.c - libhlokit.so exports exactly the functions the ABI headers
 * declare, each in the version node of the minor it came in. */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>

#include "testutil.h"

typedef struct name_list {
  int n, cap;
  char **v;
} name_list;

static void add_name(name_list *l, const char *s, size_t len) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->v = realloc(l->v, sizeof *l->v * (size_t)l->cap);
    ck_assert_ptr_nonnull(l->v);
  }
  l->v[l->n++] = strndup(s, len);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(name_list *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
}

static const char *find_name(const name_list *l, const char *name) {
  char *const *hit = bsearch(&name, l->v, (size_t)l->n, sizeof *l->v, compare_names);
  return hit ? *hit : NULL;
}

/* The exported functions, "name@VERSION" as nm shows them (sorted). */
static name_list exported_functions(void) {
  char lib[PATH_MAX + 32], cmd[PATH_MAX + 64];
  hk_test_build_path("libhlokit.so", lib, sizeof lib);
  snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", lib);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  name_list l = {0};
  char line[1024], type[8], sym[900];
  while (fgets(line, sizeof line, p))
    if (sscanf(line, "%*s %7s %899s", type, sym) == 2 && strchr("TW", type[0]))
      add_name(&l, sym, strlen(sym));
  ck_assert_int_eq(pclose(p), 0);
  qsort(l.v, (size_t)l.n, sizeof *l.v, compare_names);
  return l;
}

/* Every non-inline function an abi/hlokit header declares, by the
 * compiler's own prototype listing (-aux-info) of a file including them all. */
static name_list declared_functions(const char *abi, const char *tmp) {
  char c_path[PATH_MAX + 16], aux_path[PATH_MAX + 16];
  snprintf(c_path, sizeof c_path, "%s/all.c", tmp);
  snprintf(aux_path, sizeof aux_path, "%s/all.aux", tmp);
  FILE *c = fopen(c_path, "w");
  ck_assert_ptr_nonnull(c);
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/hlokit", abi);
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  int headers = 0;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n > 2 && strcmp(e->d_name + n - 2, ".h") == 0) {
      fprintf(c, "#include \"hlokit/%s\"\n", e->d_name);
      headers++;
    }
  }
  closedir(d);
  fclose(c);
  ck_assert_int_gt(headers, 10);
  char cmd[4 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -fsyntax-only -I'%s' -aux-info '%s' '%s'",
           abi, aux_path, c_path);
  ck_assert_int_eq(system(cmd), 0);
  FILE *a = fopen(aux_path, "r");
  ck_assert_ptr_nonnull(a);
  name_list l = {0};
  char line[4096];
  while (fgets(line, sizeof line, a)) {
    /* A prototype line: "/\* PATH:LINE:NC *\/ extern RET NAME (ARGS);". */
    const char *end = strstr(line, "*/ ");
    if (!strstr(line, "/hlokit/") || !end || strncmp(end + 3, "static ", 7) == 0) continue;
    const char *paren = strstr(end, " (");
    ck_assert_ptr_nonnull(paren);
    const char *s = paren;
    while (s > end && (s[-1] == '_' || isalnum((unsigned char)s[-1]))) s--;
    add_name(&l, s, (size_t)(paren - s));
  }
  fclose(a);
  qsort(l.v, (size_t)l.n, sizeof *l.v, compare_names);
  return l;
}

static char tmpdir[PATH_MAX];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/hk_test_abi.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

/* The minor of "name@HLOKIT_1.N" (or @@), -1 when it has no such version. */
static int version_minor(const char *sym) {
  const char *at = strstr(sym, "@HLOKIT_1.");
  if (!at) at = strstr(sym, "@@HLOKIT_1.");
  if (!at) return -1;
  return atoi(strchr(at, '.') + 1);
}

START_TEST(test_exports_are_the_declarations) {
  char abi[PATH_MAX];
  hk_test_abi_dir(abi);
  name_list decl = declared_functions(abi, tmpdir);
  name_list exp = exported_functions();
  ck_assert_int_gt(decl.n, 200);
  name_list bare = {0};
  for (int i = 0; i < exp.n; i++) {
    size_t len = strcspn(exp.v[i], "@");
    add_name(&bare, exp.v[i], len);
    char *name = bare.v[bare.n - 1];
    ck_assert_msg(find_name(&decl, name), "%s is exported but no ABI header declares it", name);
    int minor = version_minor(exp.v[i]);
    ck_assert_msg(minor >= 0 && minor <= HK_ABI_MINOR + 1,
                  "%s: version node is not HLOKIT_1.0..HLOKIT_1.%d", exp.v[i], HK_ABI_MINOR + 1);
  }
  qsort(bare.v, (size_t)bare.n, sizeof *bare.v, compare_names);
  for (int i = 0; i < decl.n; i++)
    ck_assert_msg(find_name(&bare, decl.v[i]), "%s is declared by an ABI header but not exported",
                  decl.v[i]);
  ck_assert_int_eq(bare.n, decl.n);
  free_names(&bare);
  free_names(&decl);
  free_names(&exp);
}
END_TEST

/* A function sits in the node of the minor that brought it. */
START_TEST(test_version_nodes_follow_the_minors) {
  name_list exp = exported_functions();
  static const struct { const char *name; int minor; } known[] = {
      {"hk_parse_module", 0}, {"hk_error", 0},           {"hk_pipeline_get", 1},
      {"hk_instrs_remove", 1}, {"hk_buf_read_file", 2},  {"hk_instr_take_name", 2},
      {"hk_worker_threads", 3}, {"hk_alloc_block", 3},   {"hk_instr_set_sharding", 4},
      {"hk_eval_spmd_devices", 4}, {"hk_plugin_load", 4},
      {"hk_print_module_stream", 5}, {"hk_parse_replica_groups", 5},
      {"hk_instr_has_channel_id", 6}, {"hk_computation_list_is_topological", 6},
      {"hk_metadata_equal", 6}, {"hk_module_changes", 7}, {"hk_sharding_from_mesh", 8},
  };
  for (size_t k = 0; k < sizeof known / sizeof *known; k++) {
    int found = -1;
    for (int i = 0; i < exp.n; i++) {
      size_t len = strcspn(exp.v[i], "@");
      if (len == strlen(known[k].name) && strncmp(exp.v[i], known[k].name, len) == 0)
        found = version_minor(exp.v[i]);
    }
    ck_assert_msg(found == known[k].minor, "%s: in HLOKIT_1.%d, expected HLOKIT_1.%d",
                  known[k].name, found, known[k].minor);
  }
  free_names(&exp);
}
END_TEST

static Suite *abi_suite(void) {
  Suite *s = suite_create("abi");
  TCase *t = tcase_create("exports");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, test_exports_are_the_declarations);
  tcase_add_test(t, test_version_nodes_follow_the_minors);
  suite_add_tcase(s, t);
  return s;
}

HK_TEST_MAIN(abi_suite)
