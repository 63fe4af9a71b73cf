/* named.c - reads newer XLA's named (mesh) shardings and mesh replica groups
 * (hlo_parser.cc ParseMesh, ParseAxisRef, ParseSingleSharding(NamedSharding),
 * ParseCollectiveDeviceListBase) and converts them to hlokit's classic forms
 * by XLA's own rules: HloSharding::V3ToV2Sharding (hlo_sharding.cc) for
 * shardings, MeshAxesReplicaGroupList::flattened_replica_groups
 * (replica_group.cc) for replica groups.  The sharding rule is
 * hk_sharding_from_mesh (mesh.c), the one plugin/sdy applies to
 * #sdy.sharding; here are the parser's checks, at their tokens. */
#include <stdlib.h>
#include <string.h>

#include "sharding/named.h"
#include "sharding/sharding_impl.h"

#define NM_MAX_AXES 16
#define NM_MAX_REFS (4 * NM_MAX_AXES)
#define NM_MAX_DEVICES (1ll << 26)

typedef struct nm_mesh {
  int n_axes;
  const char *name[NM_MAX_AXES];
  size_t name_len[NM_MAX_AXES];
  int64_t size[NM_MAX_AXES];
  int64_t total;
  bool maximal;
  int64_t device;                /* maximal */
  int64_t *devices;              /* malloc'ed; NULL = iota order */
  bool devices_from_iota;        /* device_ids=([..]T(..)): */
  int n_rdims;
  int64_t rdims[HK_MAX_RANK];
  int32_t perm[HK_MAX_RANK];
  size_t at, end;                /* its text, for messages */
} nm_mesh;

typedef struct nm_ref {
  int axis;
  bool sub;
  int64_t pre, size;
  size_t at;
} nm_ref;

typedef struct nm_refs {
  int n;
  nm_ref r[NM_MAX_REFS];
} nm_refs;

typedef struct nm_sharding {
  int rank;
  nm_refs dims[HK_MAX_RANK];
  nm_refs replicated, unreduced, manual;
  int n_metadata, cap_metadata;
  hk_metadata *metadata;         /* malloc'ed */
} nm_sharding;

bool hk_named_sharding_next(hk_cursor *c) {
  size_t save = c->i;
  bool yes = hk_cur_eat_word(c, "mesh") || hk_cur_eat_word(c, "maximal_mesh");
  c->i = save;
  return yes;
}

/* ---- the mesh ----------------------------------------------------------- */

/* A quoted name ('...' or "..."), its raw inner text. */
static hk_status *quoted(hk_cursor *c, const char **s, size_t *len) {
  char q = hk_cur_peek(c);
  if (q != '\'' && q != '"') return hk_cur_error(c, "expects string");
  size_t start = ++c->i;
  while (c->i < c->n && c->s[c->i] != q) c->i += c->s[c->i] == '\\' ? 2 : 1;
  if (c->i >= c->n) return hk_cur_error_at(start - 1, "unterminated string");
  *s = c->s + start;
  *len = c->i - start;
  c->i++;
  return NULL;
}

static hk_status *mesh_total(hk_cursor *c, nm_mesh *mesh) {
  mesh->total = 1;
  for (int k = 0; k < mesh->n_axes; k++) {
    if (mesh->size[k] <= 0) return hk_cur_error_at(mesh->at, "mesh axis sizes must be positive");
    if (mesh->total > NM_MAX_DEVICES / mesh->size[k]) return hk_cur_error_at(mesh->at, "mesh too large");
    mesh->total *= mesh->size[k];
  }
  (void)c;
  return NULL;
}

/* XLA's Mesh checks: distinct axis names; device ids a permutation of iota. */
static hk_status *check_mesh(nm_mesh *mesh) {
  for (int a = 0; a < mesh->n_axes; a++)
    for (int b = 0; b < a; b++)
      if (mesh->name_len[a] == mesh->name_len[b] && !memcmp(mesh->name[a], mesh->name[b], mesh->name_len[a]))
        return hk_cur_error_at(mesh->at, "Mesh has duplicate axis names.");
  if (!mesh->devices) return NULL;
  char *seen = calloc((size_t)mesh->total, 1);
  if (!seen) hk_out_of_memory();
  hk_status *st = NULL;
  for (int64_t k = 0; k < mesh->total && !st; k++) {
    int64_t d = mesh->devices[k];
    if (d < 0 || d >= mesh->total || seen[d]) st = hk_cur_error_at(mesh->at, "Device ids must be a permutation of [0,1,2,3...].");
    else seen[d] = 1;
  }
  free(seen);
  return st;
}

/* device_ids=([r..]T(p..)): the mesh's devices as a transposed iota. */
static hk_status *mesh_iota_ids(hk_cursor *c, nm_mesh *mesh) {
  int64_t *rdims = mesh->rdims;
  int32_t *perm = mesh->perm;
  int nr = 0;
  c->i++;
  do {
    if (nr == HK_MAX_RANK) return hk_cur_error(c, "too many iota_reshape_dims");
    HK_TRY(hk_cur_int(c, &rdims[nr]));
    if (rdims[nr] <= 0) return hk_cur_error(c, "iota_reshape_dims must be positive");
    nr++;
  } while (hk_cur_eat(c, ','));
  HK_TRY(hk_cur_expect(c, ']', "to end sharding iota_reshape_dims"));
  if (nr == 1) {
    perm[0] = 0;
  } else {
    if (!hk_cur_eat_word(c, "T") || !hk_cur_eat(c, '('))
      return hk_cur_error(c, "expected 'T(' to start sharding devices iota_transpose_perm");
    bool seen[HK_MAX_RANK] = {false};
    for (int k = 0; k < nr; k++) {
      int64_t d;
      if (k && !hk_cur_eat(c, ',')) return hk_cur_error(c, "iota_transpose_perm should have %d entries", nr);
      HK_TRY(hk_cur_int(c, &d));
      if (d < 0 || d >= nr || seen[d])
        return hk_cur_error(c, "Out of range iota minor_to_major value %lld, expecting value in range [0, %d)",
                            (long long)d, nr);
      seen[d] = true;
      perm[k] = (int32_t)d;
    }
    HK_TRY(hk_cur_expect(c, ')', "to end sharding devices iota_transpose_perm"));
  }
  HK_TRY(hk_cur_expect(c, ')', "to end device_ids"));
  int64_t p = 1;
  for (int k = 0; k < nr && p <= NM_MAX_DEVICES; k++) p *= rdims[k];
  if (p != mesh->total)
    return hk_cur_error(c, "mesh device_ids iota size %lld does not match the product of the mesh axis sizes %lld",
                        (long long)p, (long long)mesh->total);
  mesh->devices = malloc(sizeof(int64_t) * (size_t)p);
  if (!mesh->devices) hk_out_of_memory();
  hk_iota_expand_raw(nr, rdims, perm, mesh->devices);
  mesh->devices_from_iota = true;
  mesh->n_rdims = nr;
  return NULL;
}

/* device_ids=(d0,d1,...) */
static hk_status *mesh_list_ids(hk_cursor *c, nm_mesh *mesh) {
  int64_t n = 0;
  mesh->devices = malloc(sizeof(int64_t) * (size_t)mesh->total);
  if (!mesh->devices) hk_out_of_memory();
  if (hk_cur_peek(c) != ')') {
    do {
      int64_t d;
      HK_TRY(hk_cur_int(c, &d));
      if (n < mesh->total) mesh->devices[n] = d;
      n++;
    } while (hk_cur_eat(c, ','));
  }
  HK_TRY(hk_cur_expect(c, ')', "to end device_ids"));
  if (n != mesh->total)
    return hk_cur_error(c, "Expected %lld device_ids based on mesh axes, but got %lld", (long long)mesh->total,
                        (long long)n);
  return NULL;
}

/* An optional `, device_ids=(...)` after the axes. */
static hk_status *mesh_device_ids(hk_cursor *c, nm_mesh *mesh) {
  size_t save = c->i;
  if (!hk_cur_eat(c, ',') || !hk_cur_eat_word(c, "device_ids") || !hk_cur_eat(c, '=')) {
    c->i = save;
    return NULL;
  }
  HK_TRY(hk_cur_expect(c, '(', "for device_ids"));
  if (hk_cur_peek(c) == '[') return mesh_iota_ids(c, mesh);
  return mesh_list_ids(c, mesh);
}

static hk_status *parse_maximal_mesh(hk_cursor *c, nm_mesh *mesh) {
  HK_TRY(hk_cur_expect(c, '[', "after maximal_mesh"));
  if (!hk_cur_eat_word(c, "device_id") || !hk_cur_eat(c, '='))
    return hk_cur_error(c, "expected device_id= attribute in maximal_mesh");
  HK_TRY(hk_cur_int(c, &mesh->device));
  HK_TRY(hk_cur_expect(c, ']', "to end maximal_mesh"));
  mesh->maximal = true;
  return NULL;
}

/* mesh['a'=2,...](, device_ids=(...))? or maximal_mesh[device_id=N] */
static hk_status *parse_mesh(hk_cursor *c, nm_mesh *mesh) {
  memset(mesh, 0, sizeof *mesh);
  mesh->at = (hk_cur_peek(c), c->i);
  if (hk_cur_eat_word(c, "maximal_mesh")) {
    HK_TRY(parse_maximal_mesh(c, mesh));
  } else {
    if (!hk_cur_eat_word(c, "mesh")) return hk_cur_error(c, "Expected 'mesh' or 'maximal_mesh'");
    HK_TRY(hk_cur_expect(c, '[', "after mesh"));
    if (hk_cur_peek(c) != ']') {
      do {
        if (mesh->n_axes == NM_MAX_AXES) return hk_cur_error(c, "too many mesh axes (at most %d)", NM_MAX_AXES);
        int k = mesh->n_axes++;
        HK_TRY(quoted(c, &mesh->name[k], &mesh->name_len[k]));
        HK_TRY(hk_cur_expect(c, '=', "after axis name"));
        HK_TRY(hk_cur_int(c, &mesh->size[k]));
      } while (hk_cur_eat(c, ','));
    }
    HK_TRY(hk_cur_expect(c, ']', "to end mesh axes"));
    HK_TRY(mesh_total(c, mesh));
    if (mesh->n_axes) HK_TRY(mesh_device_ids(c, mesh));
  }
  mesh->end = c->i;
  return check_mesh(mesh);
}

/* ---- axis refs ------------------------------------------------------------ */

static int axis_by_name(const nm_mesh *mesh, const char *s, size_t len) {
  for (int k = 0; k < mesh->n_axes; k++)
    if (mesh->name_len[k] == len && !memcmp(mesh->name[k], s, len)) return k;
  if (len == 0 || len > 9) return -2;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -2;
    v = v * 10 + (s[i] - '0');
  }
  return v < mesh->n_axes ? v : -1;
}

/* XLA's AxisRef::Validate, plus that a sub-axis tiles its axis. */
static hk_status *check_ref(const nm_mesh *mesh, const nm_ref *r) {
  if (!r->sub) return NULL;
  int64_t full = mesh->size[r->axis];
  if (r->pre < 1) return hk_cur_error_at(r->at, "sub-axis pre-size must be >= 1");
  if (r->size < 2) return hk_cur_error_at(r->at, "sub-axis size must be > 1");
  if (full % r->pre || full % r->size || full % (r->pre * r->size))
    return hk_cur_error_at(r->at, "Pre-size and size must divide the full axis size.");
  if (r->size >= full) return hk_cur_error_at(r->at, "Sub-axis size must be strictly less than the full axis size.");
  return NULL;
}

/* 'name' or 'index', optionally :(pre_size)size */
static hk_status *parse_ref(hk_cursor *c, const nm_mesh *mesh, nm_ref *r) {
  const char *s;
  size_t len;
  memset(r, 0, sizeof *r);
  r->at = (hk_cur_peek(c), c->i);
  HK_TRY(quoted(c, &s, &len));
  int a = axis_by_name(mesh, s, len);
  if (a == -2)
    return hk_cur_error_at(r->at, "axis '%.*s' is not a valid axis name or index in mesh %.*s", (int)len, s,
                           (int)(mesh->end - mesh->at), c->s + mesh->at);
  if (a < 0)
    return hk_cur_error_at(r->at, "axis index %.*s is out of bounds for mesh %.*s which has %d axes", (int)len, s,
                           (int)(mesh->end - mesh->at), c->s + mesh->at, mesh->n_axes);
  r->axis = a;
  if (!hk_cur_eat(c, ':')) return NULL;
  HK_TRY(hk_cur_expect(c, '(', "before pre_size in sub axis"));
  HK_TRY(hk_cur_int(c, &r->pre));
  HK_TRY(hk_cur_expect(c, ')', "after pre_size in sub axis"));
  HK_TRY(hk_cur_int(c, &r->size));
  r->sub = true;
  return check_ref(mesh, r);
}

static hk_status *push_ref(hk_cursor *c, const nm_mesh *mesh, nm_refs *l) {
  if (l->n == NM_MAX_REFS) return hk_cur_error(c, "too many axes");
  return parse_ref(c, mesh, &l->r[l->n++]);
}

/* '{' ref (',' ref)* '}'; with allow_open a trailing '?' (an open dim). */
static hk_status *parse_ref_list(hk_cursor *c, const nm_mesh *mesh, nm_refs *l, bool allow_open) {
  bool open = false;
  HK_TRY(hk_cur_expect(c, '{', "to start the axis list"));
  if (hk_cur_eat(c, '}')) return NULL;
  do {
    if (open) return hk_cur_error(c, "Saw axis ref after '?'");
    if (allow_open && hk_cur_eat(c, '?')) open = true;
    else HK_TRY(push_ref(c, mesh, l));
  } while (hk_cur_eat(c, ','));
  return hk_cur_expect(c, '}', "to end the axis list");
}

static void all_axes(const nm_mesh *mesh, nm_refs *l) {
  l->n = mesh->n_axes;
  for (int k = 0; k < mesh->n_axes; k++) l->r[k] = (nm_ref){k, false, 1, mesh->size[k], 0};
}

static void ref_range(const nm_mesh *mesh, const nm_ref *r, int64_t *lo, int64_t *hi) {
  *lo = r->sub ? r->pre : 1;
  *hi = r->sub ? r->pre * r->size : mesh->size[r->axis];
}

/* No two refs overlap (VerifyNamedSharding, ValidateSpanOfAxes). */
static hk_status *check_disjoint(const nm_mesh *mesh, const nm_ref *const *all, int n) {
  for (int k = 0; k < n; k++)
    for (int j = 0; j < k; j++) {
      if (all[j]->axis != all[k]->axis) continue;
      int64_t alo, ahi, blo, bhi;
      ref_range(mesh, all[j], &alo, &ahi);
      ref_range(mesh, all[k], &blo, &bhi);
      if (alo < bhi && blo < ahi)
        return hk_cur_error_at(all[k]->at, "axis '%.*s' overlaps another use of it: axes cannot coexist or overlap",
                               (int)mesh->name_len[all[k]->axis], mesh->name[all[k]->axis]);
    }
  return NULL;
}

/* ---- conversion (hk_sharding_from_mesh, mesh.c) --------------------------- */

/* The ABI's view of the mesh and of the refs (storage for all of them). */
typedef struct abi_view {
  hk_mesh mesh;
  hk_iota ids;
  hk_mesh_sharding s;
  hk_mesh_axis_refs dims[HK_MAX_RANK];
  hk_mesh_axis_ref refs[(HK_MAX_RANK + 3) * NM_MAX_REFS];
  int n_refs;
} abi_view;

static hk_mesh_axis_refs abi_refs(abi_view *v, const nm_refs *l) {
  hk_mesh_axis_refs out = {l->n, v->refs + v->n_refs};
  for (int k = 0; k < l->n; k++)
    v->refs[v->n_refs++] =
        (hk_mesh_axis_ref){l->r[k].axis, l->r[k].sub ? l->r[k].pre : 1, l->r[k].sub ? l->r[k].size : 0};
  return out;
}

static void abi_mesh(abi_view *v, const nm_mesh *mesh) {
  v->mesh = (hk_mesh){mesh->n_axes, mesh->size, NULL, NULL};
  if (mesh->maximal) v->mesh.devices = &mesh->device;
  else if (mesh->devices_from_iota) v->ids = (hk_iota){1, &mesh->total, mesh->n_rdims, mesh->rdims, mesh->perm},
                                    v->mesh.device_iota = &v->ids;
  else v->mesh.devices = mesh->devices;
}

/* s over mesh by hk_sharding_from_mesh; its errors at the mesh. */
static hk_status *from_mesh(hk_module *m, const nm_mesh *mesh, const nm_sharding *s, const hk_sharding **out) {
  abi_view *v = calloc(1, sizeof *v);
  if (!v) hk_out_of_memory();
  abi_mesh(v, mesh);
  for (int d = 0; d < s->rank; d++) v->dims[d] = abi_refs(v, &s->dims[d]);
  v->s = (hk_mesh_sharding){s->rank, v->dims, abi_refs(v, &s->replicated), abi_refs(v, &s->unreduced),
                            abi_refs(v, &s->manual)};
  hk_status *st = NULL;
  *out = hk_sharding_from_mesh(m, &v->mesh, &v->s, &st);
  free(v);
  if (!st) return NULL;
  hk_status *e = hk_cur_error_at(mesh->at, "%s", st->message);
  hk_status_free(st);
  return e;
}

/* XLA's parser checks that no two refs overlap, at the ref. */
static hk_status *check_refs_disjoint(const nm_mesh *mesh, const nm_sharding *s) {
  const nm_ref **all = malloc(sizeof *all * (HK_MAX_RANK + 3) * NM_MAX_REFS);
  if (!all) hk_out_of_memory();
  int n = 0;
  for (int d = 0; d < s->rank; d++)
    for (int k = 0; k < s->dims[d].n; k++) all[n++] = &s->dims[d].r[k];
  const nm_refs *lists[3] = {&s->replicated, &s->unreduced, &s->manual};
  for (int j = 0; j < 3; j++)
    for (int k = 0; k < lists[j]->n; k++) all[n++] = &lists[j]->r[k];
  hk_status *st = check_disjoint(mesh, all, n);
  free(all);
  return st;
}

/* s with its metadata. */
static const hk_sharding *with_metadata(hk_module *m, const hk_sharding *r, const nm_sharding *s) {
  if (!s->n_metadata) return r;
  hk_sharding t = *r;
  t.n_metadata = s->n_metadata;
  t.metadata = s->metadata;
  return hk_sharding_intern(m, &t);
}

/* ---- the sharding's text ------------------------------------------------- */

static hk_status *parse_metadata_if_present(hk_cursor *c, hk_module *m, nm_sharding *s) {
  size_t save = c->i;
  if (!hk_cur_eat(c, ',')) return NULL;
  if (!hk_cur_eat_word(c, "metadata") || !hk_cur_eat(c, '=')) {
    c->i = save;
    return hk_cur_error(c, "expected '}' to end sharding attribute");
  }
  return hk_metadata_list_parse(c, m, &s->metadata, &s->n_metadata, &s->cap_metadata);
}

/* An unreduced reduction: sum reads (XLA's default); hlokit's sharding has
 * no field for max or min. */
static hk_status *parse_reduction(hk_cursor *c) {
  size_t at = (hk_cur_peek(c), c->i);
  if (hk_cur_eat_word(c, "sum")) return NULL;
  if (hk_cur_eat_word(c, "max") || hk_cur_eat_word(c, "min"))
    return hk_cur_error_at(at, "unreduced=max/min (newer XLA) is not supported: hlokit's sharding has no "
                               "reduction kind (only sum, the default, reads)");
  return hk_cur_error(c, "expected sum, max, or min for unreduced op");
}

static bool reduction_next(hk_cursor *c) {
  char ch = hk_cur_peek(c);
  return ch == 's' || ch == 'm';
}

/* `unreduced` or `unreduced=op`, then an axis list or (none) every axis. */
static hk_status *parse_unreduced_kw(hk_cursor *c, const nm_mesh *mesh, nm_sharding *s) {
  if (hk_cur_eat(c, '=')) HK_TRY(parse_reduction(c));
  if (hk_cur_peek(c) == '{') return parse_ref_list(c, mesh, &s->unreduced, false);
  all_axes(mesh, &s->unreduced);
  return NULL;
}

/* The attributes after the dim list. */
static hk_status *parse_named_attrs(hk_cursor *c, hk_module *m, const nm_mesh *mesh, nm_sharding *s) {
  while (hk_cur_peek(c) != '}') {
    if (!hk_cur_eat(c, ',')) return hk_cur_error(c, "expected ',' before next attribute");
    size_t at = (hk_cur_peek(c), c->i);
    if (hk_cur_eat_word(c, "replicated") && hk_cur_eat(c, '=')) {
      HK_TRY(parse_ref_list(c, mesh, &s->replicated, false));
    } else if ((c->i = at, hk_cur_eat_word(c, "unreduced")) && hk_cur_eat(c, '=')) {
      if (reduction_next(c)) HK_TRY(parse_reduction(c));
      HK_TRY(parse_ref_list(c, mesh, &s->unreduced, false));
    } else if ((c->i = at, hk_cur_eat_word(c, "manual")) && hk_cur_eat(c, '=')) {
      HK_TRY(parse_ref_list(c, mesh, &s->manual, false));
    } else if ((c->i = at, hk_cur_eat_word(c, "metadata")) && hk_cur_eat(c, '=')) {
      HK_TRY(hk_metadata_list_parse(c, m, &s->metadata, &s->n_metadata, &s->cap_metadata));
    } else {
      return hk_cur_error_at(at, "unknown attribute in named sharding: expected replicated, unreduced, manual or "
                                 "metadata");
    }
  }
  return NULL;
}

/* '[' '{' refs '}' (',' ...)* ']' */
static hk_status *parse_dims(hk_cursor *c, const nm_mesh *mesh, nm_sharding *s) {
  HK_TRY(hk_cur_expect(c, '[', "to start the dimension shardings"));
  if (hk_cur_eat(c, ']')) return NULL;
  do {
    if (s->rank == HK_MAX_RANK - 4) return hk_cur_error(c, "too many dimension shardings");
    HK_TRY(parse_ref_list(c, mesh, &s->dims[s->rank++], true));
  } while (hk_cur_eat(c, ','));
  return hk_cur_expect(c, ']', "to end the dimension shardings");
}

/* Everything after the mesh up to (not including) the closing '}'. */
static hk_status *parse_named_body(hk_cursor *c, hk_module *m, const nm_mesh *mesh, nm_sharding *s) {
  if (mesh->maximal) return parse_metadata_if_present(c, m, s);
  hk_cur_eat(c, ',');
  if (hk_cur_eat_word(c, "replicated")) return parse_metadata_if_present(c, m, s);
  if (hk_cur_eat_word(c, "unreduced")) {
    HK_TRY(parse_unreduced_kw(c, mesh, s));
    return parse_metadata_if_present(c, m, s);
  }
  if (hk_cur_eat_word(c, "manual")) {
    all_axes(mesh, &s->manual);
    return parse_metadata_if_present(c, m, s);
  }
  HK_TRY(parse_dims(c, mesh, s));
  return parse_named_attrs(c, m, mesh, s);
}

hk_status *hk_named_sharding_parse(hk_cursor *c, hk_module *m, size_t at, const hk_sharding **out) {
  nm_mesh mesh;
  nm_sharding *s = calloc(1, sizeof *s);
  if (!s) hk_out_of_memory();
  hk_status *st = parse_mesh(c, &mesh);
  if (!st) st = parse_named_body(c, m, &mesh, s);
  if (!st && !hk_cur_eat(c, '}')) st = hk_cur_error(c, "expected '}' to end sharding attribute");
  if (!st) st = check_refs_disjoint(&mesh, s);
  if (!st) st = from_mesh(m, &mesh, s, out);
  if (!st) *out = with_metadata(m, *out, s);
  (void)at;
  free(mesh.devices);
  free(s->metadata);
  free(s);
  return st;
}

/* ---- mesh replica groups (MeshAxesReplicaGroupList) ----------------------- */

/* Devices of the mesh arranged as rdims, transposed by perm, flattened. */
static int64_t *transposed_devices(const nm_mesh *mesh, int nr, const int64_t *rdims, const int32_t *perm) {
  int64_t *out = malloc(sizeof(int64_t) * (size_t)mesh->total);
  if (!out) hk_out_of_memory();
  hk_iota_expand_raw(nr, rdims, perm, out);
  if (mesh->devices)
    for (int64_t k = 0; k < mesh->total; k++) out[k] = mesh->devices[out[k]];
  return out;
}

/* The refs on one mesh axis split the axis into reshape dims; the ones the
 * refs name are grouped (in the order the refs list them). */
static void axis_reshape(const nm_mesh *mesh, int a, const nm_refs *l, int64_t *rdims, int *nr, int *grouped,
                         int *ng) {
  int idx[NM_MAX_REFS], n = 0;
  for (int k = 0; k < l->n; k++)
    if (l->r[k].axis == a) idx[n++] = k;
  int64_t full = mesh->size[a];
  if (n == 0) {
    rdims[(*nr)++] = full;
    return;
  }
  if (n == 1 && !l->r[idx[0]].sub) {
    grouped[(*ng)++] = *nr;
    rdims[(*nr)++] = full;
    return;
  }
  for (int i = 1; i < n; i++)   /* by pre-size, keeping the listed order in idx's ranks */
    for (int j = i; j > 0 && l->r[idx[j - 1]].pre > l->r[idx[j]].pre; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  int dim_of[NM_MAX_REFS];
  int64_t prefix = 1;
  for (int i = 0; i < n; i++) {
    const nm_ref *r = &l->r[idx[i]];
    if (r->pre != prefix) rdims[(*nr)++] = r->pre / prefix, prefix = r->pre;
    dim_of[idx[i]] = *nr;
    rdims[(*nr)++] = r->size;
    prefix *= r->size;
  }
  if (prefix != full) rdims[(*nr)++] = full / prefix;
  for (int k = 0; k < l->n; k++)
    if (l->r[k].axis == a) grouped[(*ng)++] = dim_of[k];
}

static hk_status *groups_layout(hk_cursor *c, const nm_mesh *mesh, const nm_refs *l, int64_t *rdims, int *nr,
                                int32_t *perm) {
  int grouped[HK_MAX_RANK], ng = 0;
  *nr = 0;
  for (int a = 0; a < mesh->n_axes; a++) {
    if (*nr + 2 * l->n + 1 >= HK_MAX_RANK) return hk_cur_error(c, "mesh replica groups have too many sub-axes");
    axis_reshape(mesh, a, l, rdims, nr, grouped, &ng);
  }
  bool in_group[HK_MAX_RANK] = {false};
  for (int k = 0; k < ng; k++) in_group[grouped[k]] = true;
  int np = 0;
  for (int k = 0; k < *nr; k++)
    if (!in_group[k]) perm[np++] = k;
  for (int k = 0; k < ng; k++) perm[np++] = grouped[k];
  return NULL;
}

static hk_status *check_group_refs(hk_cursor *c, hk_module *m, const nm_mesh *mesh, const nm_refs *l, int64_t *per) {
  const nm_ref *all[NM_MAX_REFS];
  *per = 1;
  for (int k = 0; k < l->n; k++) all[k] = &l->r[k], *per *= l->r[k].sub ? l->r[k].size : mesh->size[l->r[k].axis];
  HK_TRY(check_disjoint(mesh, all, l->n));
  nm_sharding *s = calloc(1, sizeof *s);   /* the groups' axes must form a sharding */
  if (!s) hk_out_of_memory();
  s->rank = 1;
  s->dims[0] = *l;
  const hk_sharding *unused;
  hk_status *st = from_mesh(m, mesh, s, &unused);
  free(s);
  HK_TRY(st);
  if (*per <= 1) return hk_cur_error(c, "mesh replica groups have only one device per replica group");
  return NULL;
}

static const hk_replica_groups *make_groups(hk_module *m, const nm_mesh *mesh, int nr, int64_t *rdims,
                                            int32_t *perm, int64_t per) {
  hk_replica_groups *g = hk_alloc(m, sizeof *g);
  int64_t *tmp = transposed_devices(mesh, nr, rdims, perm);
  int64_t n_groups = mesh->total / per;
  g->n_groups = (int32_t)n_groups;
  g->ids = hk_memdup(m, tmp, sizeof(int64_t) * (size_t)mesh->total);
  int32_t *gs = hk_alloc(m, sizeof(int32_t) * (size_t)(n_groups + 1));
  for (int64_t k = 0; k <= n_groups; k++) gs[k] = (int32_t)(k * per);
  g->group_start = gs;
  free(tmp);
  if (!mesh->devices) {
    hk_iota *io = hk_alloc(m, sizeof *io);
    int64_t *dims = hk_alloc(m, 2 * sizeof(int64_t));
    int32_t n = nr;
    dims[0] = n_groups, dims[1] = per;
    hk_iota_canonicalize_dims(&n, rdims, perm);
    *io = (hk_iota){2, dims, n, hk_memdup(m, rdims, sizeof(int64_t) * (size_t)n),
                    hk_memdup(m, perm, sizeof(int32_t) * (size_t)n)};
    g->iota = io;
  }
  return g;
}

hk_status *hk_mesh_replica_groups_parse(hk_module *m, const char *text, size_t len,
                                        const hk_replica_groups **out, size_t *consumed) {
  hk_cursor c = {text, len, 0};
  nm_mesh mesh;
  nm_refs *l = calloc(1, sizeof *l);
  if (!l) hk_out_of_memory();
  int64_t rdims[HK_MAX_RANK], per = 1;
  int32_t perm[HK_MAX_RANK];
  int nr = 0;
  hk_status *st = parse_mesh(&c, &mesh);
  if (!st && (mesh.maximal || !mesh.n_axes))
    st = hk_cur_error_at(mesh.at, "mesh replica groups need a mesh with axes");
  if (!st) st = parse_ref_list(&c, &mesh, l, false);
  if (!st) st = check_group_refs(&c, m, &mesh, l, &per);
  if (!st) st = groups_layout(&c, &mesh, l, rdims, &nr, perm);
  if (!st) *out = make_groups(m, &mesh, nr, rdims, perm, per);
  if (!st) *consumed = c.i;
  free(mesh.devices);
  free(l);
  return st;
}
