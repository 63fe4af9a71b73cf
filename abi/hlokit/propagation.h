/* propagation.h - the sharding-propagation pass's explain extension: how
 * each instruction got its sharding (for `hlokit explain`).
 *
 * Provenance is kept in a side table owned by the pass, not in the module
 * (no frontend attributes are added, so the output module is exactly what
 * XLA's pass would give).  After run(), a caller that holds the pass gets
 * the table through
 *     const hk_prop_explain_vtable *x =
 *         hk_pass_extension(pass, HK_PROP_EXPLAIN_IFACE);
 *     const hk_prop_record *recs; int64_t n = x->records(pass, &recs);
 * One record per instruction of the computations the run covered.  The
 * table is owned by the pass and valid until its next run() or destroy();
 * names and shardings point into the module (interned), so they stay
 * valid while the module lives, even if later passes remove instructions.
 * A record's `source` names the instruction the sharding came from; follow
 * the chain of sources back to a user annotation (dir PROVIDED). */
#ifndef HLOKIT_PROPAGATION_H
#define HLOKIT_PROPAGATION_H

#include "export.h"

#include <stdint.h>

#include "pass.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

#define HK_PROP_EXPLAIN_IFACE "hlokit.sharding-propagation.explain"

typedef enum hk_prop_dir {
  HK_PROP_DIR_NONE,         /* no sharding */
  HK_PROP_DIR_PROVIDED,     /* annotated in the input */
  HK_PROP_DIR_FORWARD,      /* from an operand */
  HK_PROP_DIR_BACKWARD,     /* from a user */
  HK_PROP_DIR_COMPUTATION,  /* while/conditional/call: shared with a related instruction */
  HK_PROP_DIR_GROUP,        /* shard_as / shard_like group */
  HK_PROP_DIR_PREPROCESS,   /* Sharding custom call folded, tuple spread, ... */
} hk_prop_dir;

typedef struct hk_prop_record {
  const char *instr;        /* instruction name */
  const char *computation;  /* its computation */
  const char *source;       /* where the sharding came from, NULL if none */
  const char *rule;         /* e.g. "elementwise", "dot-operand", "reshape" */
  int32_t level;            /* aggressiveness level 0..3 (-1: not in the loop) */
  int32_t dir;              /* hk_prop_dir */
  const hk_sharding *sharding; /* final sharding, NULL if none */
} hk_prop_record;

typedef struct hk_prop_explain_vtable {
  size_t size;              /* sizeof as built */
  int64_t (*records)(hk_pass *self, const hk_prop_record **out);
} hk_prop_explain_vtable;

static inline const char *hk_prop_dir_name(int32_t d) {
  switch (d) {
    case HK_PROP_DIR_PROVIDED: return "provided";
    case HK_PROP_DIR_FORWARD: return "forward";
    case HK_PROP_DIR_BACKWARD: return "backward";
    case HK_PROP_DIR_COMPUTATION: return "computation";
    case HK_PROP_DIR_GROUP: return "shard-group";
    case HK_PROP_DIR_PREPROCESS: return "preprocess";
    default: return "none";
  }
}

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
