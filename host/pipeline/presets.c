/* presets.c - named pipelines (--passes=@NAME): the seed's seats, with the
 * SPMD block gated by the module's use_spmd_partitioning. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

typedef struct preset_pass {
  const char *name;
  const char *options;   /* pipeline option syntax, NULL for defaults */
  bool spmd_block;       /* only when the module uses SPMD partitioning */
} preset_pass;

typedef struct preset {
  const char *name;
  const preset_pass *passes;
  int n;
} preset;

/* xla::cpu::CpuCompiler::RunHloPassesThroughLayoutAssn, in its order: the
 * verifier, then (gated) ShardingPropagation(is_spmd) and SpmdPartitioner
 * with the windowed-einsum threshold patched to 100000 MiB, then the
 * post-SPMD legalisation passes. */
static const preset_pass pre_layout_assignment[] = {
    {"hlo-verifier", NULL, false},
    {"sharding-propagation", "is_spmd=true", true},
    {"spmd-partitioning", "threshold_for_windowed_einsum_mib=100000", true},
    {"comparison-expander", NULL, false},
    {"all-reduce-promotion", NULL, false},
    {"float-normalization", NULL, false},
    {"dynamic-padder", NULL, false},
    {"tuple-simplifier", NULL, false},
    {"flatten-call-graph", NULL, false},
    {"hlo-dce", NULL, false},
    {"change-op-data-type", NULL, false},
};

/* The hilo collective passes, after partitioning: patterns are matched
 * first (reduce-scatter creation), then collectives merged (combiners),
 * then cycles split for devices that cannot run them; channel ids are made
 * unique once nothing duplicates them any more, stream ids assigned last on
 * the final collective graph, and the dead pieces removed. */
static const preset_pass hilo_collectives[] = {
    {"hilo-reduce-scatter-creator", NULL, false},
    {"hilo-all-gather-combiner", NULL, false},
    {"hilo-all-reduce-combiner", NULL, false},
    {"hilo-collective-permute-cycle-decomposer", NULL, false},
    {"hilo-unique-channel-id", NULL, false},
    {"hilo-collective-stream-id", NULL, false},
    {"hlo-dce", NULL, false},
};

/* XLA's ShardyXLA seat before the partitioner: the Shardy round-trip
 * import, then sharding propagation over the imported shardings. */
static const preset_pass sdy_import[] = {
    {"sdy-round-trip-import", NULL, false},
    {"sharding-propagation", "is_spmd=true", false},
};

static const preset presets[] = {
    {"pre-layout-assignment", pre_layout_assignment,
     (int)(sizeof pre_layout_assignment / sizeof pre_layout_assignment[0])},
    {"hilo-collectives", hilo_collectives,
     (int)(sizeof hilo_collectives / sizeof hilo_collectives[0])},
    {"sdy-import", sdy_import, (int)(sizeof sdy_import / sizeof sdy_import[0])},
};
static const int n_presets = (int)(sizeof presets / sizeof presets[0]);

const char *const *hk_pipeline_preset_names(void) {
  static const char *names[sizeof presets / sizeof presets[0] + 1];
  for (int i = 0; i < n_presets; i++) names[i] = presets[i].name;
  names[n_presets] = NULL;
  return names;
}

static const preset *find_preset(const char *name) {
  for (int i = 0; i < n_presets; i++)
    if (strcmp(presets[i].name, name) == 0) return &presets[i];
  return NULL;
}

static hk_status *unknown_preset(const char *name) {
  hk_buf b;
  hk_buf_init(&b);
  for (int i = 0; i < n_presets; i++) hk_buf_printf(&b, "%s@%s", i ? ", " : "", presets[i].name);
  hk_buf_put(&b, "", 1);
  hk_status *st = hk_error(HK_NOT_FOUND, "unknown preset '@%s'; presets: %s", name, b.data);
  hk_buf_free(&b);
  return st;
}

/* The seed's gate: config.use_spmd_partitioning(), which a module header
 * with num_partitions > 1 (or --num-partitions) turns on. */
static bool spmd_enabled(const hk_module_config *cfg) {
  return !cfg || cfg->use_spmd_partitioning || cfg->num_partitions > 1;
}

static hk_status *append_pass(hk_pipeline_spec *out, const preset_pass *pp) {
  if (out->n == out->cap) {
    out->cap = out->cap ? out->cap * 2 : 16;
    out->passes = realloc(out->passes, sizeof *out->passes * (size_t)out->cap);
  }
  hk_pass_spec *p = &out->passes[out->n++];
  memset(p, 0, sizeof *p);
  p->name = strdup(pp->name);
  if (!pp->options) return NULL;
  return hk_option_kvs_parse(pp->options, strlen(pp->options), &p->n_kvs, &p->kvs);
}

static void note_preset(hk_pipeline_spec *out, const char *name) {
  out->presets = realloc(out->presets, sizeof(char *) * (size_t)(out->n_presets + 1));
  out->presets[out->n_presets++] = strdup(name);
}

hk_status *hk_pipeline_preset(const char *name, const hk_module_config *cfg,
                              hk_pipeline_spec *out) {
  memset(out, 0, sizeof *out);
  const preset *p = find_preset(name);
  if (!p) return unknown_preset(name);
  bool spmd = spmd_enabled(cfg);
  for (int i = 0; i < p->n; i++) {
    if (p->passes[i].spmd_block && !spmd) continue;
    hk_status *st = append_pass(out, &p->passes[i]);
    if (st) {
      hk_pipeline_spec_free(out);
      return st;
    }
  }
  note_preset(out, name);
  return NULL;
}

hk_status *hk_pipeline_preset_check(const hk_registry *reg, const char *name) {
  const preset *p = find_preset(name);
  if (!p) return unknown_preset(name);
  hk_buf missing;
  hk_buf_init(&missing);
  int n_missing = 0;
  for (int i = 0; i < p->n; i++)
    if (!hk_registry_find_pass(reg, p->passes[i].name))
      hk_buf_printf(&missing, "%s%s", n_missing++ ? ", " : "", p->passes[i].name);
  hk_status *st = NULL;
  if (n_missing)
    st = hk_error(HK_NOT_FOUND, "preset '@%s' needs %d pass%s no loaded plugin provides: %s",
                  name, n_missing, n_missing == 1 ? "" : "es", missing.data);
  hk_buf_free(&missing);
  return st;
}
