/* pipeline.h - host-side pass manager internals: what the registry, the
 * loader, the option and spec parsers and the presets share inside
 * libhlokit.  What a program driving passes uses is abi/hlokit/host.h. */
#ifndef HLOKIT_HOST_PIPELINE_H
#define HLOKIT_HOST_PIPELINE_H

#include <stdio.h>

#include "hlokit/hlokit.h"
#include "hlokit/host.h"

/* ---- registry ---------------------------------------------------------- */
/* Records a plugin and makes it the owner of what is registered next;
 * returns its index. */
int32_t hk_registry_begin_plugin(hk_registry *reg, const char *path,
                                 const char *real_path, void *handle,
                                 hk_plugin_origin origin);
/* Registrations after this belong to the host again (builtin). */
void hk_registry_end_plugin(hk_registry *reg);
void hk_registry_set_plugin_info(hk_registry *reg, int32_t plugin,
                                 const char *name, const char *version);

/* ---- plugin loader -------------------------------------------------------- */
/* The default plugin directories of the running binary: plugins/ beside it
 * and ../lib/hlokit/plugins (the installed layout).  Returns how many were
 * written to out (each malloc'ed). */
int hk_plugin_default_dirs(char *out[2]);
/* The ABI version a plugin file records in its HK_PLUGIN note, read from
 * the file without loading it; false when it has none (abi_note.c). */
bool hk_plugin_file_abi(const char *path, uint32_t *version);

/* ---- option values -------------------------------------------------------- */
/* Checks a pass's declared defaults (done at registration). */
hk_status *hk_option_decls_check(const hk_pass_desc *desc);
/* Parses "key=value key2=[a,b] key3=\"x y\"" into kvs. */
hk_status *hk_option_kvs_parse(const char *text, size_t len, int32_t *n_out,
                               hk_option_kv **out);
void hk_option_kvs_free(int32_t n, hk_option_kv *kvs);

/* ---- pipeline specs -------------------------------------------------------- */
/* Expands preset `name` (without '@'). */
hk_status *hk_pipeline_preset(const char *name, const hk_module_config *cfg,
                              hk_pipeline_spec *out);
/* Names of the presets, NULL-terminated. */
const char *const *hk_pipeline_preset_names(void);
/* Every pass of a preset (all blocks), for the "what is missing" check. */
hk_status *hk_pipeline_preset_check(const hk_registry *reg, const char *name);

#endif
