/* shape.h - shapes and layouts.
 *
 * Shapes are immutable and interned per module: two instructions with the
 * same shape share one hk_shape, so equality of interned shapes from the same
 * module is pointer equality and a million instructions cost one pointer
 * each.  To make a new shape, fill an hk_shape on the stack (or use the
 * helpers) and call hk_shape_intern(), which copies it into the module. */
#ifndef HLOKIT_SHAPE_H
#define HLOKIT_SHAPE_H

#include "export.h"

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_ABI_BEGIN

struct hk_module;

#define HK_MAX_RANK 64

/* A layout tile, e.g. T(8,128); a dim of HK_TILE_COMBINE prints as '*'. */
#define HK_TILE_COMBINE INT64_MIN
typedef struct hk_tile {
  int32_t n_dims;
  const int64_t *dims;
} hk_tile;

typedef struct hk_layout {
  int32_t n_minor_to_major;
  const int64_t *minor_to_major;
  int32_t n_tiles;
  const hk_tile *tiles;             /* T(..)(..) */
  int64_t element_size_bits;        /* E(n); 0 = unset */
  int64_t memory_space;             /* S(n); 0 = default */
  /* Any other layout annotation (#(s32), *(u32), M(n), SC(...), D(..)),
   * printed verbatim after the known ones; NULL if none. */
  const char *extra;
} hk_layout;

typedef struct hk_shape {
  uint8_t elem;                     /* hk_prim */
  uint8_t rank;                     /* arrays only */
  const int64_t *dims;              /* rank entries; bound if dynamic,
                                       HK_UNBOUNDED_DIM for '?' */
  const bool *dynamic;              /* rank entries, or NULL if all static */
  const hk_layout *layout;          /* NULL when the text gave none */
  int32_t n_tuple;                  /* tuples only */
  const struct hk_shape *const *tuple;
} hk_shape;

/* Interns a shape described by *tmpl (deep copy into the module arena). */
const hk_shape *hk_shape_intern(struct hk_module *m, const hk_shape *tmpl);
/* An array shape with a default (descending minor-to-major) layout. */
const hk_shape *hk_shape_array(struct hk_module *m, hk_prim elem, int rank,
                               const int64_t *dims);
/* The same shape without any layout. */
const hk_shape *hk_shape_array_no_layout(struct hk_module *m, hk_prim elem,
                                         int rank, const int64_t *dims);
const hk_shape *hk_shape_tuple(struct hk_module *m, int n,
                               const hk_shape *const *elems);
const hk_shape *hk_shape_scalar(struct hk_module *m, hk_prim elem);
const hk_shape *hk_shape_token(struct hk_module *m);
/* Same element type/layout kind as s, new dims (layout reset to default
 * if s had one). */
const hk_shape *hk_shape_with_dims(struct hk_module *m, const hk_shape *s,
                                   int rank, const int64_t *dims);
/* Same dims as s, new element type. */
const hk_shape *hk_shape_with_elem(struct hk_module *m, const hk_shape *s,
                                   hk_prim elem);
/* Imports a shape from another module (or a stack template). */
#define hk_shape_copy hk_shape_intern

static inline bool hk_shape_is_tuple(const hk_shape *s) { return s->elem == HK_TUPLE; }
static inline bool hk_shape_is_array(const hk_shape *s) { return hk_prim_is_array((hk_prim)s->elem); }
/* The size of an unbounded dynamic dim ('?'): it has no bound. */
#define HK_UNBOUNDED_DIM INT64_MIN
/* Any array of s (tuple leaves included) has a '?' dim (XLA's
 * Shape::is_unbounded_dynamic); header-only. */
static inline bool hk_shape_is_unbounded_dynamic(const hk_shape *s) {
  if (hk_shape_is_tuple(s)) {
    for (int k = 0; k < s->n_tuple; k++)
      if (hk_shape_is_unbounded_dynamic(s->tuple[k])) return true;
    return false;
  }
  for (int d = 0; hk_shape_is_array(s) && d < s->rank; d++)
    if (s->dims[d] == HK_UNBOUNDED_DIM) return true;
  return false;
}
int64_t hk_shape_elements(const hk_shape *s);        /* 1 for scalars; 0 for tuples and unbounded ('?') dims */
int64_t hk_shape_byte_size(const hk_shape *s);       /* sum over tuple leaves */
/* incl. layout; a missing layout counts as the default (descending) one */
bool hk_shape_equal(const hk_shape *a, const hk_shape *b);
bool hk_shape_compatible(const hk_shape *a, const hk_shape *b);   /* ignoring layout */
/* Dimensions + minor_to_major only (XLA's Equal().MinorToMajorOnlyInLayout()). */
bool hk_shape_equal_minor_to_major(const hk_shape *a, const hk_shape *b);
/* Subshape at a tuple index path; NULL if the path is invalid. */
const hk_shape *hk_shape_subshape(const hk_shape *s, int n, const int64_t *index);
/* Number of array leaves (1 for arrays). */
int64_t hk_shape_leaf_count(const hk_shape *s);

HK_ABI_END

#ifdef __cplusplus
}
#endif
#endif
