/* shape.c - shapes and layouts: interning, constructors, equality, sizes. */
#include <string.h>

#include "irpriv.h"

/* ---- interning ------------------------------------------------------------ */

static bool dynamic_any(const hk_shape *s) {
  if (!s->dynamic) return false;
  for (int d = 0; d < s->rank; d++)
    if (s->dynamic[d]) return true;
  return false;
}

static uint64_t layout_hash(const hk_layout *l) {
  if (!l) return 0x51ull;
  uint64_t h = hk_hash_bytes(l->minor_to_major, (size_t)l->n_minor_to_major * 8,
                             (uint64_t)l->n_minor_to_major);
  for (int t = 0; t < l->n_tiles; t++)
    h = hk_hash_combine(h, hk_hash_bytes(l->tiles[t].dims, (size_t)l->tiles[t].n_dims * 8,
                                         (uint64_t)l->tiles[t].n_dims + 77));
  h = hk_hash_combine(h, (uint64_t)l->element_size_bits);
  h = hk_hash_combine(h, (uint64_t)l->memory_space);
  if (l->extra) h = hk_hash_combine(h, hk_hash_bytes(l->extra, strlen(l->extra), 3));
  return h;
}

/* Hash of a shape whose tuple elements are interned (hashed by address). */
static uint64_t shape_hash(const hk_shape *s) {
  uint64_t h = hk_hash_combine(s->elem, s->rank);
  if (s->rank) h = hk_hash_combine(h, hk_hash_bytes(s->dims, (size_t)s->rank * 8, 0));
  if (dynamic_any(s)) h = hk_hash_combine(h, hk_hash_bytes(s->dynamic, s->rank, 1));
  h = hk_hash_combine(h, layout_hash(s->layout));
  if (s->elem == HK_TUPLE) {
    h = hk_hash_combine(h, (uint64_t)s->n_tuple);
    for (int k = 0; k < s->n_tuple; k++) h = hk_hash_combine(h, (uint64_t)(uintptr_t)s->tuple[k]);
  }
  return h;
}

static bool i64s_equal(const int64_t *a, const int64_t *b, int n) {
  return n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static bool layout_identical(const hk_layout *a, const hk_layout *b) {
  if (!a || !b) return a == b;
  if (a->n_minor_to_major != b->n_minor_to_major ||
      !i64s_equal(a->minor_to_major, b->minor_to_major, a->n_minor_to_major))
    return false;
  if (a->n_tiles != b->n_tiles) return false;
  for (int t = 0; t < a->n_tiles; t++)
    if (a->tiles[t].n_dims != b->tiles[t].n_dims ||
        !i64s_equal(a->tiles[t].dims, b->tiles[t].dims, a->tiles[t].n_dims))
      return false;
  if (a->element_size_bits != b->element_size_bits || a->memory_space != b->memory_space)
    return false;
  if (!a->extra || !b->extra) return a->extra == b->extra;
  return strcmp(a->extra, b->extra) == 0;
}

static bool dynamic_equal(const hk_shape *a, const hk_shape *b) {
  for (int d = 0; d < a->rank; d++) {
    bool x = a->dynamic && a->dynamic[d], y = b->dynamic && b->dynamic[d];
    if (x != y) return false;
  }
  return true;
}

/* Exact equality of a stored shape and a key with interned tuple elements. */
static bool shape_identical(const void *stored, const void *key) {
  const hk_shape *a = stored, *b = key;
  if (a->elem != b->elem || a->rank != b->rank || !i64s_equal(a->dims, b->dims, a->rank) ||
      !dynamic_equal(a, b) || !layout_identical(a->layout, b->layout))
    return false;
  if (a->elem != HK_TUPLE) return true;
  if (a->n_tuple != b->n_tuple) return false;
  for (int k = 0; k < a->n_tuple; k++)
    if (a->tuple[k] != b->tuple[k]) return false;
  return true;
}

static void *memdup8(hk_module *m, const void *p, size_t n) {
  void *d = hk_alloc_aligned(m, n, 8);
  memcpy(d, p, n);
  return d;
}

static const hk_layout *layout_copy(hk_module *m, const hk_layout *l) {
  if (!l) return NULL;
  hk_layout *c = hk_alloc(m, sizeof *c);
  *c = *l;
  c->minor_to_major = l->n_minor_to_major
                          ? hk_memdup(m, l->minor_to_major, (size_t)l->n_minor_to_major * 8)
                          : NULL;
  if (l->n_tiles) {
    hk_tile *tiles = hk_alloc(m, (size_t)l->n_tiles * sizeof *tiles);
    for (int t = 0; t < l->n_tiles; t++) {
      tiles[t].n_dims = l->tiles[t].n_dims;
      tiles[t].dims = hk_memdup(m, l->tiles[t].dims, (size_t)l->tiles[t].n_dims * 8);
    }
    c->tiles = tiles;
  } else {
    c->tiles = NULL;
  }
  c->extra = hk_intern_cstr(m, l->extra);
  return c;
}

static const void *shape_copy_into(hk_module *m, const void *key) {
  const hk_shape *s = key;
  hk_shape *c = hk_alloc(m, sizeof *c);
  c->elem = s->elem;
  c->rank = s->rank;
  c->dims = s->rank ? memdup8(m, s->dims, (size_t)s->rank * 8) : NULL;
  c->dynamic = dynamic_any(s) ? hk_memdup(m, s->dynamic, s->rank) : NULL;
  c->layout = layout_copy(m, s->layout);
  if (s->elem == HK_TUPLE) {
    c->n_tuple = s->n_tuple;
    c->tuple = s->n_tuple ? hk_memdup(m, s->tuple, (size_t)s->n_tuple * sizeof *s->tuple) : NULL;
  }
  return c;
}

const hk_shape *hk_shape_intern(hk_module *m, const hk_shape *tmpl) {
  if (!tmpl) return NULL;
  hk_shape key = *tmpl;
  if (key.elem != HK_TUPLE) {
    key.n_tuple = 0;
    key.tuple = NULL;
    return hk_hashcons(m, HK_HC_SHAPE, shape_hash(&key), &key, shape_identical,
                       shape_copy_into);
  }
  key.rank = 0;
  key.dims = NULL;
  key.dynamic = NULL;
  const hk_shape *stack_elems[16];
  const hk_shape **elems = key.n_tuple <= 16 ? stack_elems
                                             : hk_alloc(m, (size_t)key.n_tuple * sizeof *elems);
  for (int k = 0; k < key.n_tuple; k++) elems[k] = hk_shape_intern(m, tmpl->tuple[k]);
  key.tuple = elems;
  return hk_hashcons(m, HK_HC_SHAPE, shape_hash(&key), &key, shape_identical, shape_copy_into);
}

/* ---- constructors ------------------------------------------------------------ */

static void default_minor_to_major(int rank, int64_t *out) {
  for (int d = 0; d < rank; d++) out[d] = rank - 1 - d;
}

const hk_shape *hk_shape_array(hk_module *m, hk_prim elem, int rank, const int64_t *dims) {
  if (rank < 0 || rank > 255) return NULL;
  int64_t m2m[256];
  default_minor_to_major(rank, m2m);
  hk_layout l = {.n_minor_to_major = rank, .minor_to_major = m2m};
  hk_shape s = {.elem = (uint8_t)elem, .rank = (uint8_t)rank, .dims = dims, .layout = &l};
  return hk_shape_intern(m, &s);
}

const hk_shape *hk_shape_array_no_layout(hk_module *m, hk_prim elem, int rank,
                                         const int64_t *dims) {
  hk_shape s = {.elem = (uint8_t)elem, .rank = (uint8_t)rank, .dims = dims};
  return hk_shape_intern(m, &s);
}

const hk_shape *hk_shape_tuple(hk_module *m, int n, const hk_shape *const *elems) {
  hk_shape s = {.elem = HK_TUPLE, .n_tuple = n, .tuple = elems};
  return hk_shape_intern(m, &s);
}

const hk_shape *hk_shape_scalar(hk_module *m, hk_prim elem) {
  return hk_shape_array(m, elem, 0, NULL);
}

const hk_shape *hk_shape_token(hk_module *m) {
  hk_shape s = {.elem = HK_TOKEN};
  return hk_shape_intern(m, &s);
}

const hk_shape *hk_shape_with_dims(hk_module *m, const hk_shape *s, int rank,
                                   const int64_t *dims) {
  if (rank < 0 || rank > 255) return NULL;
  if (!s->layout) return hk_shape_array_no_layout(m, (hk_prim)s->elem, rank, dims);
  int64_t m2m[256];
  default_minor_to_major(rank, m2m);
  hk_layout l = {.n_minor_to_major = rank,
                 .minor_to_major = m2m,
                 .element_size_bits = s->layout->element_size_bits,
                 .memory_space = s->layout->memory_space};
  hk_shape t = {.elem = s->elem, .rank = (uint8_t)rank, .dims = dims, .layout = &l};
  return hk_shape_intern(m, &t);
}

/* XLA's ShapeUtil::ChangeElementType: tuples change every leaf; a packed
 * element size (E(n)) is kept only for sub-byte types. */
const hk_shape *hk_shape_with_elem(hk_module *m, const hk_shape *s, hk_prim elem) {
  if (s->elem == HK_TUPLE) {
    const hk_shape *stack_elems[16];
    const hk_shape **elems = s->n_tuple <= 16 ? stack_elems
                                              : hk_alloc(m, (size_t)s->n_tuple * sizeof *elems);
    for (int k = 0; k < s->n_tuple; k++) elems[k] = hk_shape_with_elem(m, s->tuple[k], elem);
    return hk_shape_tuple(m, s->n_tuple, elems);
  }
  if (!hk_shape_is_array(s)) return hk_shape_intern(m, s);
  hk_shape t = *s;
  t.elem = (uint8_t)elem;
  hk_layout l;
  if (s->layout && s->layout->element_size_bits && hk_prim_bits(elem) >= 8) {
    l = *s->layout;
    l.element_size_bits = 0;
    t.layout = &l;
  }
  return hk_shape_intern(m, &t);
}

/* ---- queries ------------------------------------------------------------------- */

/* An unbounded dim ('?', stored as INT64_MIN) has no static size: such a
 * shape counts no elements, so no caller sizes a buffer from it. */
int64_t hk_shape_elements(const hk_shape *s) {
  if (!hk_shape_is_array(s)) return 0;
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++) {
    if (s->dims[d] == HK_UNBOUNDED_DIM) return 0;
    n *= s->dims[d];
  }
  return n;
}

int64_t hk_shape_byte_size(const hk_shape *s) {
  if (s->elem == HK_TUPLE) {
    int64_t n = 0;
    for (int k = 0; k < s->n_tuple; k++) n += hk_shape_byte_size(s->tuple[k]);
    return n;
  }
  if (!hk_shape_is_array(s)) return 0;
  int64_t elems = hk_shape_elements(s);
  if (s->layout && s->layout->element_size_bits > 0)
    return (elems * s->layout->element_size_bits + 7) / 8;
  return elems * hk_prim_storage_bytes((hk_prim)s->elem);
}

/* minor_to_major of an array shape, the default one when it has no layout. */
static const int64_t *effective_m2m(const hk_shape *s, int64_t *buf) {
  if (s->layout) return s->layout->minor_to_major;
  default_minor_to_major(s->rank, buf);
  return buf;
}

typedef enum eq_mode { EQ_ALL, EQ_NO_LAYOUT, EQ_MINOR_TO_MAJOR } eq_mode;

static bool layouts_equal(const hk_shape *a, const hk_shape *b, eq_mode mode) {
  int64_t ba[256], bb[256];
  const hk_layout *la = a->layout, *lb = b->layout;
  int na = la ? la->n_minor_to_major : a->rank, nb = lb ? lb->n_minor_to_major : b->rank;
  if (na != nb || !i64s_equal(effective_m2m(a, ba), effective_m2m(b, bb), na)) return false;
  if (mode == EQ_MINOR_TO_MAJOR) return true;
  hk_layout none = {0};
  if (!la) la = &none;
  if (!lb) lb = &none;
  hk_layout x = *la, y = *lb;
  x.n_minor_to_major = y.n_minor_to_major = 0;
  return layout_identical(&x, &y);
}

static bool shapes_equal(const hk_shape *a, const hk_shape *b, eq_mode mode) {
  if (a == b) return true;
  if (a->elem != b->elem) return false;
  if (a->elem == HK_TUPLE) {
    if (a->n_tuple != b->n_tuple) return false;
    for (int k = 0; k < a->n_tuple; k++)
      if (!shapes_equal(a->tuple[k], b->tuple[k], mode)) return false;
    return true;
  }
  if (!hk_shape_is_array(a)) return true;
  if (a->rank != b->rank || !i64s_equal(a->dims, b->dims, a->rank)) return false;
  if (mode == EQ_NO_LAYOUT) return true;
  return dynamic_equal(a, b) && layouts_equal(a, b, mode);
}

bool hk_shape_equal(const hk_shape *a, const hk_shape *b) { return shapes_equal(a, b, EQ_ALL); }

bool hk_shape_compatible(const hk_shape *a, const hk_shape *b) {
  return shapes_equal(a, b, EQ_NO_LAYOUT);
}

bool hk_shape_equal_minor_to_major(const hk_shape *a, const hk_shape *b) {
  return shapes_equal(a, b, EQ_MINOR_TO_MAJOR);
}

const hk_shape *hk_shape_subshape(const hk_shape *s, int n, const int64_t *index) {
  for (int k = 0; k < n; k++) {
    if (!s || s->elem != HK_TUPLE || index[k] < 0 || index[k] >= s->n_tuple) return NULL;
    s = s->tuple[index[k]];
  }
  return s;
}

int64_t hk_shape_leaf_count(const hk_shape *s) {
  if (s->elem != HK_TUPLE) return 1;
  int64_t n = 0;
  for (int k = 0; k < s->n_tuple; k++) n += hk_shape_leaf_count(s->tuple[k]);
  return n;
}
