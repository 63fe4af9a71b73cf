/* registry.c - the pass registry and the custom-call partitioner registry,
 * with the duplicate-name rule and the drop-in exception. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

typedef struct hk_cc_entry {
  char *target;
  hk_custom_call_partitioner *p;
  int32_t plugin;
} hk_cc_entry;

struct hk_registry {
  int32_t n_plugins, cap_plugins;
  hk_plugin_rec *plugins;
  int32_t n_passes, cap_passes;
  hk_pass_entry *passes;
  int32_t n_ccs, cap_ccs;
  hk_cc_entry *ccs;
  int32_t current;         /* plugin that owns new registrations */
  FILE *notices;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Grows *arr (of elem bytes) to hold n+1 entries. */
static void *grow(void *arr, int32_t n, int32_t *cap, size_t elem) {
  if (n < *cap) return arr;
  *cap = *cap ? *cap * 2 : 8;
  void *p = realloc(arr, (size_t)*cap * elem);
  if (!p) hk_out_of_memory();
  return p;
}

static void destroy_partitioner(hk_custom_call_partitioner *p) {
  if (HK_HAS_MEMBER(p->vt, hk_custom_call_partitioner_vtable, destroy) && p->vt->destroy)
    p->vt->destroy(p);
}

hk_registry *hk_registry_new(void) {
  hk_registry *reg = calloc(1, sizeof *reg);
  if (!reg) hk_out_of_memory();
  reg->notices = stderr;
  hk_registry_begin_plugin(reg, "<builtin>", NULL, NULL, HK_ORIGIN_BUILTIN);
  hk_registry_set_plugin_info(reg, 0, "hlokit", HK_VERSION_STRING);
  return reg;
}

void hk_registry_free(hk_registry *reg) {
  if (!reg) return;
  for (int32_t i = 0; i < reg->n_ccs; i++) {
    destroy_partitioner(reg->ccs[i].p);
    free(reg->ccs[i].target);
  }
  for (int32_t i = reg->n_plugins - 1; i >= 0; i--) {
    hk_plugin_rec *r = &reg->plugins[i];
    if (r->handle) dlclose(r->handle);
    free(r->path);
    free(r->real_path);
    free(r->name);
    free(r->version);
  }
  free(reg->ccs);
  free(reg->passes);
  free(reg->plugins);
  free(reg);
}

int32_t hk_registry_begin_plugin(hk_registry *reg, const char *path,
                                 const char *real_path, void *handle,
                                 hk_plugin_origin origin) {
  reg->plugins = grow(reg->plugins, reg->n_plugins, &reg->cap_plugins,
                      sizeof *reg->plugins);
  hk_plugin_rec *r = &reg->plugins[reg->n_plugins];
  memset(r, 0, sizeof *r);
  r->path = dup_or_null(path);
  r->real_path = dup_or_null(real_path);
  r->handle = handle;
  r->origin = origin;
  reg->current = reg->n_plugins;
  return reg->n_plugins++;
}

void hk_registry_end_plugin(hk_registry *reg) { reg->current = 0; }

void hk_registry_set_plugin_info(hk_registry *reg, int32_t plugin,
                                 const char *name, const char *version) {
  hk_plugin_rec *r = &reg->plugins[plugin];
  free(r->name);
  free(r->version);
  r->name = dup_or_null(name);
  r->version = dup_or_null(version);
}

int32_t hk_registry_n_plugins(const hk_registry *reg) { return reg->n_plugins; }
const hk_plugin_rec *hk_registry_plugin(const hk_registry *reg, int32_t i) {
  return &reg->plugins[i];
}
int32_t hk_registry_n_passes(const hk_registry *reg) { return reg->n_passes; }
const hk_pass_entry *hk_registry_pass_at(const hk_registry *reg, int32_t i) {
  return &reg->passes[i];
}
int32_t hk_registry_n_custom_calls(const hk_registry *reg) { return reg->n_ccs; }
const char *hk_registry_custom_call_target(const hk_registry *reg, int32_t i,
                                           int32_t *plugin) {
  if (plugin) *plugin = reg->ccs[i].plugin;
  return reg->ccs[i].target;
}
void hk_registry_set_notice_stream(hk_registry *reg, FILE *f) {
  reg->notices = f ? f : stderr;
}

static int32_t find_pass_index(const hk_registry *reg, const char *name) {
  for (int32_t i = 0; i < reg->n_passes; i++)
    if (strcmp(reg->passes[i].desc->name, name) == 0) return i;
  return -1;
}

static int32_t find_cc_index(const hk_registry *reg, const char *target) {
  for (int32_t i = 0; i < reg->n_ccs; i++)
    if (strcmp(reg->ccs[i].target, target) == 0) return i;
  return -1;
}

const hk_pass_entry *hk_registry_pass_entry(const hk_registry *reg, const char *name) {
  int32_t i = find_pass_index(reg, name);
  return i < 0 ? NULL : &reg->passes[i];
}

const hk_pass_desc *hk_registry_find_pass(const hk_registry *reg, const char *name) {
  const hk_pass_entry *e = hk_registry_pass_entry(reg, name);
  return e ? e->desc : NULL;
}

const hk_custom_call_partitioner *hk_registry_find_custom_call_partitioner(
    const hk_registry *reg, const char *target) {
  int32_t i = find_cc_index(reg, target);
  return i < 0 ? NULL : reg->ccs[i].p;
}

/* The drop-in rule: an explicitly named plugin may replace an entry that
 * came from the default plugin directory. */
static bool may_replace(const hk_registry *reg, int32_t old_plugin) {
  return reg->plugins[reg->current].origin == HK_ORIGIN_EXPLICIT &&
         reg->plugins[old_plugin].origin == HK_ORIGIN_DEFAULT_DIR;
}

/* Decides what to do about `what` named `name` already owned by old_plugin:
 * NULL to replace it (after a notice), or the duplicate error. */
static hk_status *resolve_duplicate(hk_registry *reg, const char *what,
                                    const char *name, int32_t old_plugin) {
  const char *old_path = reg->plugins[old_plugin].path;
  const char *new_path = reg->plugins[reg->current].path;
  if (!may_replace(reg, old_plugin))
    return hk_error(HK_ALREADY_EXISTS,
                    "%s: %s '%s' is already registered by %s", new_path, what,
                    name, old_path);
  fprintf(reg->notices,
          "hlokit: %s '%s' from %s replaces the one from %s (drop-in)\n", what,
          name, new_path, old_path);
  return NULL;
}

static hk_status *check_desc(const hk_registry *reg, const hk_pass_desc *desc) {
  const char *path = reg->plugins[reg->current].path;
  if (!desc || desc->size < offsetof(hk_pass_desc, create) + sizeof desc->create)
    return hk_error(HK_INVALID_ARGUMENT,
                    "%s: pass descriptor has no size (set .size = sizeof(hk_pass_desc))",
                    path);
  if (!desc->name || !desc->name[0] || !desc->create)
    return hk_error(HK_INVALID_ARGUMENT, "%s: pass descriptor without %s", path,
                    desc->create ? "a name" : "a create function");
  if (desc->n_options < 0 || (desc->n_options > 0 && !desc->options))
    return hk_error(HK_INVALID_ARGUMENT, "%s: pass '%s' declares %d options but no array",
                    path, desc->name, (int)desc->n_options);
  hk_status *st = hk_option_decls_check(desc);
  return st ? hk_status_prefix(st, "%s", path) : NULL;
}

hk_status *hk_registry_add_pass(hk_registry *reg, const hk_pass_desc *desc) {
  HK_TRY(check_desc(reg, desc));
  int32_t i = find_pass_index(reg, desc->name);
  if (i >= 0) {
    HK_TRY(resolve_duplicate(reg, "pass", desc->name, reg->passes[i].plugin));
    reg->passes[i].desc = desc;
    reg->passes[i].plugin = reg->current;
    return NULL;
  }
  reg->passes = grow(reg->passes, reg->n_passes, &reg->cap_passes, sizeof *reg->passes);
  reg->passes[reg->n_passes++] = (hk_pass_entry){desc, reg->current};
  return NULL;
}

static hk_status *check_partitioner(const hk_registry *reg, const char *target,
                                    const hk_custom_call_partitioner *p) {
  const char *path = reg->plugins[reg->current].path;
  if (!target || !target[0])
    return hk_error(HK_INVALID_ARGUMENT, "%s: custom-call partitioner without a target", path);
  if (!p || !p->vt || p->vt->size < sizeof(size_t))
    return hk_error(HK_INVALID_ARGUMENT,
                    "%s: custom-call partitioner '%s' has no vtable size", path, target);
  return NULL;
}

hk_status *hk_registry_add_custom_call_partitioner(hk_registry *reg,
                                                   const char *target,
                                                   hk_custom_call_partitioner *p) {
  HK_TRY(check_partitioner(reg, target, p));
  int32_t i = find_cc_index(reg, target);
  if (i >= 0) {
    HK_TRY(resolve_duplicate(reg, "custom-call partitioner", target, reg->ccs[i].plugin));
    destroy_partitioner(reg->ccs[i].p);
    reg->ccs[i].p = p;
    reg->ccs[i].plugin = reg->current;
    return NULL;
  }
  reg->ccs = grow(reg->ccs, reg->n_ccs, &reg->cap_ccs, sizeof *reg->ccs);
  reg->ccs[reg->n_ccs++] = (hk_cc_entry){strdup(target), p, reg->current};
  return NULL;
}
