/* iota.c - iota tile assignments: expansion, XLA's canonical reshape dims, and detection from a device list. */
#include <stdlib.h>
#include <string.h>

#include "sharding/sharding_impl.h"

int64_t hk_shard_product(int n, const int64_t *dims) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= dims[i];
  return p;
}

/* out[j] for the transposed array: walk the transposed index in row-major
 * order and accumulate the source offset through the permuted strides. */
void hk_iota_expand_raw(int nr, const int64_t *rdims, const int32_t *perm, int64_t *out) {
  int64_t stride[HK_MAX_RANK], tdims[HK_MAX_RANK], tstride[HK_MAX_RANK], idx[HK_MAX_RANK];
  int64_t s = 1;
  for (int i = nr - 1; i >= 0; i--) {
    stride[i] = s;
    s *= rdims[i];
  }
  for (int i = 0; i < nr; i++) {
    tdims[i] = rdims[perm[i]];
    tstride[i] = stride[perm[i]];
    idx[i] = 0;
  }
  int64_t total = s, v = 0;
  for (int64_t j = 0; j < total; j++) {
    out[j] = v;
    for (int i = nr - 1; i >= 0; i--) {
      idx[i]++;
      v += tstride[i];
      if (idx[i] < tdims[i]) break;
      v -= tstride[i] * tdims[i];
      idx[i] = 0;
    }
  }
}

void hk_iota_expand(const hk_iota *iota, int64_t *out) {
  hk_iota_expand_raw(iota->n_reshape_dims, iota->reshape_dims, iota->perm, out);
}

/* Removes reshape dims of size one, renumbering perm. */
static void iota_drop_ones(int32_t *n, int64_t *dims, int32_t *perm) {
  int32_t old_to_new[HK_MAX_RANK];
  int32_t k = 0;
  for (int32_t i = 0; i < *n; i++) old_to_new[i] = dims[i] == 1 ? -1 : k++;
  if (k == *n) return;
  int32_t np = 0;
  for (int32_t i = 0; i < *n; i++) {
    if (old_to_new[i] >= 0) dims[old_to_new[i]] = dims[i];
    int32_t q = old_to_new[perm[i]];
    if (q >= 0) perm[np++] = q;
  }
  *n = k;
}

void hk_iota_canonicalize_dims(int32_t *n, int64_t *dims, int32_t *perm) {
  if (*n > 1) {
    for (;;) {
      iota_drop_ones(n, dims, perm);
      bool changed = false;
      for (int32_t i = 1, base = 0; i < *n; i++) {
        if (perm[base] + (i - base) == perm[i]) {
          dims[perm[base]] *= dims[perm[i]];
          dims[perm[i]] = 1;
          changed = true;
        } else {
          base = i;
        }
      }
      if (!changed) break;
    }
  }
  if (*n == 0) {
    *n = 1;
    dims[0] = 1;
    perm[0] = 0;
  }
}

/* One level of the detected structure: `size` steps of `stride`. */
typedef struct iota_level { int64_t size, stride; } iota_level;

/* Longest run L (dividing n / block) such that every block of `block`
 * entries k blocks on is the first block shifted by k * stride. */
static int64_t iota_run_length(int64_t n, const int64_t *d, int64_t block, int64_t stride) {
  int64_t L = 1;
  while ((L + 1) * block <= n) {
    const int64_t *blk = d + L * block;
    for (int64_t j = 0; j < block; j++)
      if (blk[j] != d[j] + L * stride) goto done;
    L++;
  }
done:
  while (L > 1 && (n / block) % L) L--;
  return L;
}

static int cmp_level_stride_desc(const void *a, const void *b) {
  const iota_level *x = a, *y = b;
  return x->stride < y->stride ? 1 : x->stride > y->stride ? -1 : 0;
}

int hk_iota_detect(int64_t n, const int64_t *d, int64_t *rdims, int32_t *perm) {
  if (n <= 0 || d[0] != 0) return 0;
  iota_level lv[HK_MAX_RANK];       /* minor to major */
  int nl = 0;
  for (int64_t block = 1; block < n;) {
    int64_t stride = d[block] - d[0];
    if (stride <= 0 || nl == HK_MAX_RANK) return 0;
    int64_t L = iota_run_length(n, d, block, stride);
    if (L < 2) return 0;
    lv[nl].size = L;
    lv[nl].stride = stride;
    nl++;
    block *= L;
  }
  if (nl == 0) {
    rdims[0] = 1;
    perm[0] = 0;
    return 1;
  }
  /* Major-to-minor order of the transposed array, then reshape order by
   * stride; each stride must be the product of the smaller levels. */
  iota_level major[HK_MAX_RANK], sorted[HK_MAX_RANK];
  for (int i = 0; i < nl; i++) sorted[i] = major[i] = lv[nl - 1 - i];
  qsort(sorted, (size_t)nl, sizeof(iota_level), cmp_level_stride_desc);
  int64_t expect = 1;
  for (int i = nl - 1; i >= 0; i--) {
    if (sorted[i].stride != expect) return 0;
    expect *= sorted[i].size;
  }
  for (int i = 0; i < nl; i++) rdims[i] = sorted[i].size;
  for (int i = 0; i < nl; i++)
    for (int j = 0; j < nl; j++)
      if (sorted[j].stride == major[i].stride) perm[i] = j;
  int32_t nr = nl;
  hk_iota_canonicalize_dims(&nr, rdims, perm);
  /* Verify: the levels fixed the structure, but be exact. */
  int64_t *chk = malloc(sizeof(int64_t) * (size_t)n);
  if (!chk) return 0;
  hk_iota_expand_raw(nr, rdims, perm, chk);
  bool same = memcmp(chk, d, sizeof(int64_t) * (size_t)n) == 0;
  free(chk);
  return same ? nr : 0;
}
