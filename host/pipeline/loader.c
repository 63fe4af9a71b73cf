/* loader.c - the plugin loader: the ABI check (the file's note before
 * dlopen, hlokit_plugin_info after), dlopen(RTLD_NOW|RTLD_LOCAL),
 * the register callback, and the search order (default dirs, then
 * $HLOKIT_PLUGIN_PATH, then --plugin-dir, then --load-pass-plugin). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/pipeline.h"

static const char *origin_name(hk_plugin_origin o) {
  switch (o) {
    case HK_ORIGIN_BUILTIN: return "builtin";
    case HK_ORIGIN_DEFAULT_DIR: return "default plugin directory";
    case HK_ORIGIN_ENV_PATH: return "HLOKIT_PLUGIN_PATH";
    case HK_ORIGIN_PLUGIN_DIR: return "--plugin-dir";
    case HK_ORIGIN_EXPLICIT: return "--load-pass-plugin";
  }
  return "?";
}

/* Is the file an ELF object?  Distinguishes "not a shared object" from
 * other dlopen failures (missing dependencies, undefined symbols). */
static bool looks_like_elf(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  unsigned char magic[4] = {0};
  ssize_t n = read(fd, magic, 4);
  close(fd);
  return n == 4 && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

static hk_status *check_file(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0)
    return hk_error(HK_NOT_FOUND, "%s: plugin file not found: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return hk_error(HK_INVALID_ARGUMENT, "%s: plugin is not a regular file", path);
  if (!looks_like_elf(path))
    return hk_error(HK_INVALID_ARGUMENT, "%s: not a shared object (no ELF header)", path);
  return NULL;
}

static hk_status *open_library(const char *path, void **handle) {
  dlerror();
  /* dlopen searches the library path for names without '/'; a plugin named
   * on the command line is a file, so make it a path. */
  char *p = strchr(path, '/') ? strdup(path) : NULL;
  if (!p) {
    p = malloc(strlen(path) + 3);
    strcpy(p, "./");
    strcat(p, path);
  }
  *handle = dlopen(p, RTLD_NOW | RTLD_LOCAL);
  free(p);
  if (*handle) return NULL;
  const char *why = dlerror();
  return hk_error(HK_INVALID_ARGUMENT, "%s: cannot load plugin: %s", path,
                  why ? why : "unknown dlopen error");
}

static hk_status *plugin_info(const char *path, void *handle, const hk_plugin_info **out) {
  dlerror();
  void *sym = dlsym(handle, HK_PLUGIN_ENTRY_SYMBOL);
  if (!sym || dlerror())
    return hk_error(HK_INVALID_ARGUMENT,
                    "%s: not an hlokit plugin: no '%s' symbol (declare it with HK_PLUGIN)",
                    path, HK_PLUGIN_ENTRY_SYMBOL);
  hk_plugin_info_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  const hk_plugin_info *info = fn();
  if (!info)
    return hk_error(HK_INVALID_ARGUMENT, "%s: %s() returned NULL", path, HK_PLUGIN_ENTRY_SYMBOL);
  *out = info;
  return NULL;
}

/* The GCC-style version gate: same major, minor no newer than ours. */
static hk_status *check_abi(const char *path, uint32_t v) {
  uint32_t major = v >> 16, minor = v & 0xffff;
  if (major == HK_ABI_MAJOR && minor <= HK_ABI_MINOR) return NULL;
  return hk_error(HK_FAILED_PRECONDITION,
                  "%s: plugin ABI version %u.%u is incompatible with this hlokit's ABI "
                  "version %u.%u (%s)",
                  path, major, minor, (unsigned)HK_ABI_MAJOR, (unsigned)HK_ABI_MINOR,
                  major != HK_ABI_MAJOR ? "major versions differ; rebuild the plugin"
                                        : "the plugin needs a newer hlokit");
}

static bool already_loaded(const hk_registry *reg, const char *real) {
  for (int32_t i = 0; i < hk_registry_n_plugins(reg); i++) {
    const hk_plugin_rec *r = hk_registry_plugin(reg, i);
    if (r->real_path && strcmp(r->real_path, real) == 0) return true;
  }
  return false;
}

static hk_status *register_plugin(hk_registry *reg, const char *path, void *handle,
                                  const char *real, hk_plugin_origin origin) {
  const hk_plugin_info *info = NULL;
  hk_status *st = plugin_info(path, handle, &info);
  if (!st) st = check_abi(path, info->abi_version);
  if (!st && !info->register_fn)
    st = hk_error(HK_INVALID_ARGUMENT, "%s: plugin has no register callback", path);
  if (st) {
    dlclose(handle);
    return st;
  }
  /* From here the registry owns the handle: descriptors may point into it. */
  int32_t idx = hk_registry_begin_plugin(reg, path, real, handle, origin);
  hk_registry_set_plugin_info(reg, idx, info->name, info->version);
  st = info->register_fn(reg);
  hk_registry_end_plugin(reg);
  if (st)
    return hk_status_prefix(st, "%s: plugin '%s' (from %s) failed to register",
                            path, info->name ? info->name : "?", origin_name(origin));
  return NULL;
}

hk_status *hk_plugin_load(hk_registry *reg, const char *path, hk_plugin_origin origin) {
  HK_TRY(check_file(path));
  /* The recorded version first: dlopen of a plugin newer than this host
   * would fail on the symbols (or symbol versions) it does not have, with
   * a message that names neither version. */
  uint32_t recorded;
  if (hk_plugin_file_abi(path, &recorded)) HK_TRY(check_abi(path, recorded));
  char *real = realpath(path, NULL);
  if (real && already_loaded(reg, real)) {
    free(real);
    return NULL;
  }
  void *handle;
  hk_status *st = open_library(path, &handle);
  if (!st) st = register_plugin(reg, path, handle, real, origin);
  free(real);
  return st;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_so_name(const char *name) {
  size_t n = strlen(name);
  return name[0] != '.' && n > 3 && strcmp(name + n - 3, ".so") == 0;
}

/* The *.so file names in dir, sorted. */
static int list_plugins(DIR *d, char ***out) {
  int n = 0, cap = 0;
  char **names = NULL;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_so_name(e->d_name)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      names = realloc(names, sizeof(char *) * (size_t)cap);
    }
    names[n++] = strdup(e->d_name);
  }
  if (n) qsort(names, (size_t)n, sizeof(char *), compare_names);
  *out = names;
  return n;
}

hk_status *hk_plugin_load_dir(hk_registry *reg, const char *dir, hk_plugin_origin origin,
                              bool missing_ok) {
  DIR *d = opendir(dir);
  if (!d) {
    if (missing_ok && errno == ENOENT) return NULL;
    return hk_error(HK_NOT_FOUND, "%s: cannot open plugin directory (%s): %s", dir,
                    origin_name(origin), strerror(errno));
  }
  char **names;
  int n = list_plugins(d, &names);
  closedir(d);
  hk_status *st = NULL;
  for (int i = 0; i < n; i++) {
    if (!st) {
      size_t len = strlen(dir) + strlen(names[i]) + 2;
      char *path = malloc(len);
      snprintf(path, len, "%s/%s", dir, names[i]);
      st = hk_plugin_load(reg, path, origin);
      free(path);
    }
    free(names[i]);
  }
  free(names);
  return st;
}

/* dir/rel, resolved (no "..") when it exists. */
static char *join_path(const char *dir, const char *rel) {
  size_t len = strlen(dir) + strlen(rel) + 2;
  char *p = malloc(len);
  snprintf(p, len, "%s/%s", dir, rel);
  char *real = realpath(p, NULL);
  if (!real) return p;
  free(p);
  return real;
}

int hk_plugin_default_dirs(char *out[2]) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 0;
  exe[n] = '\0';
  char *dir = dirname(exe);
  out[0] = join_path(dir, "plugins");
  out[1] = join_path(dir, "../lib/hlokit/plugins");
  return 2;
}

static hk_status *load_default_dirs(hk_registry *reg) {
  char *dirs[2];
  int n = hk_plugin_default_dirs(dirs);
  hk_status *st = NULL;
  for (int i = 0; i < n; i++) {
    if (!st) st = hk_plugin_load_dir(reg, dirs[i], HK_ORIGIN_DEFAULT_DIR, true);
    free(dirs[i]);
  }
  return st;
}

static hk_status *load_env_path(hk_registry *reg) {
  const char *env = getenv("HLOKIT_PLUGIN_PATH");
  if (!env || !*env) return NULL;
  char *copy = strdup(env), *save = NULL;
  hk_status *st = NULL;
  for (char *d = strtok_r(copy, ":", &save); d && !st; d = strtok_r(NULL, ":", &save))
    st = hk_plugin_load_dir(reg, d, HK_ORIGIN_ENV_PATH, false);
  free(copy);
  return st;
}

hk_status *hk_plugin_load_all(hk_registry *reg, const hk_plugin_sources *src) {
  if (!src->no_default) {
    HK_TRY(load_default_dirs(reg));
    HK_TRY(load_env_path(reg));
  }
  for (int32_t i = 0; i < src->n_dirs; i++)
    HK_TRY(hk_plugin_load_dir(reg, src->dirs[i], HK_ORIGIN_PLUGIN_DIR, false));
  for (int32_t i = 0; i < src->n_files; i++)
    HK_TRY(hk_plugin_load(reg, src->files[i], HK_ORIGIN_EXPLICIT));
  return NULL;
}
