/* named.h - host-private: newer XLA's named (mesh) shardings and mesh replica groups, read and converted to hlokit's classic forms. */
#ifndef HK_SHARDING_NAMED_H
#define HK_SHARDING_NAMED_H

#include <stdbool.h>
#include <stddef.h>

#include "hlokit/ir.h"
#include "hlokit/sharding.h"
#include "hlokit/status.h"
#include "sharding/lex.h"

/* True when the next word at c is `mesh` or `maximal_mesh` (nothing consumed). */
bool hk_named_sharding_next(hk_cursor *c);

/* A named sharding whose '{' is consumed (at offset `at`) and whose next word
 * is mesh/maximal_mesh (XLA's ParseSingleSharding for NamedSharding), up to
 * and including its '}'.  The result is XLA's HloSharding::V3ToV2Sharding of
 * it, in canonical form (tiled with an iota or a device list, subgroups,
 * manual, maximal or replicated), with its metadata.  Errors "@OFFSET: ...". */
hk_status *hk_named_sharding_parse(hk_cursor *c, hk_module *m, size_t at, const hk_sharding **out);

/* A mesh replica group list `mesh[...] {axes}` at text[0] (XLA's
 * MeshAxesReplicaGroupList), as explicit groups, with an iota spelling when
 * the mesh is in iota order.  *consumed is the bytes read.  Errors "@OFFSET: ...". */
hk_status *hk_mesh_replica_groups_parse(hk_module *m, const char *text, size_t len,
                                        const hk_replica_groups **out, size_t *consumed);

#endif
