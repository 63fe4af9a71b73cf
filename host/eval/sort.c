/* sort.c - sort: multi-operand, custom comparator, always stable (merge sort). */
#include <math.h>

#include "eval/eval_internal.h"

typedef struct sort_ctx {
  hk_device_ctx *d;
  const hk_computation *cmp;
  int N;
  hk_value *const *ops;
  int64_t base, stride;            /* current row */
  int fast_dir;                    /* 0: generic; else HK_CMP_LT / HK_CMP_GT */
  bool total_order;
  hk_status *err;
  const hk_instr *ins;
  uint64_t calls;
  uint64_t *keys;                  /* fast path: order-preserving keys of the row, or NULL */
  hk_scalar_prog *prog;            /* the comparator compiled, or NULL */
  /* comparator compare(f(x), f(y)) on operand key_operand: f compiled */
  hk_scalar_prog *key_prog;
  int key_operand, key_dir;        /* key_dir: HK_CMP_LT / HK_CMP_GT for keys */
  bool key_total;
  hk_value *key_val;               /* scratch: one key */
} sort_ctx;

static uint64_t total_key(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
}

static hk_value *scalar_at(const hk_value *v, int64_t i) {
  hk_value *s = hk_value_new_array((hk_prim)v->elem, 0, NULL);
  int es = hk_esize(v->elem);
  memcpy(s->data, (const uint8_t *)v->data + i * es, (size_t)es);
  return s;
}

static bool fast_less(const sort_ctx *c, int64_t x, int64_t y) {
  const hk_value *v = c->ops[0];
  int64_t ix = c->base + x * c->stride, iy = c->base + y * c->stride;
  int r;
  if (hk_prim_is_float((hk_prim)v->elem)) {
    double a = hk_value_get_f64(v, ix), b = hk_value_get_f64(v, iy);
    if (c->total_order) {
      uint64_t ka = total_key(a), kb = total_key(b);
      r = (ka > kb) - (ka < kb);
    } else {
      if (isnan(a) || isnan(b)) return false;
      r = (a > b) - (a < b);
    }
  } else if (hk_prim_is_signed_int((hk_prim)v->elem)) {
    int64_t a = hk_value_get_i64(v, ix), b = hk_value_get_i64(v, iy);
    r = (a > b) - (a < b);
  } else {
    uint64_t a = (uint64_t)hk_value_get_i64(v, ix), b = (uint64_t)hk_value_get_i64(v, iy);
    r = (a > b) - (a < b);
  }
  return c->fast_dir == HK_CMP_LT ? r < 0 : r > 0;
}

static bool generic_less(sort_ctx *c, int64_t x, int64_t y) {
  if (c->err) return false;
  if (c->prog)
    return hk_scalar_prog_compare(c->prog, c->ops, c->N, c->base + x * c->stride, c->base + y * c->stride);
  hk_value *args[32];
  for (int k = 0; k < c->N; k++) {
    args[2 * k] = scalar_at(c->ops[k], c->base + x * c->stride);
    args[2 * k + 1] = scalar_at(c->ops[k], c->base + y * c->stride);
  }
  hk_value *r = NULL;
  c->err = hk_eval_scalar_call(c->d, c->cmp, args, 2 * c->N, &r);
  for (int k = 0; k < 2 * c->N; k++) hk_value_release(args[k]);
  bool less = !c->err && hk_value_get_i64(r, 0) != 0;
  hk_value_release(r);
  return less;
}

static bool less(sort_ctx *c, int64_t x, int64_t y) {
  if (c->keys) return c->key_dir == HK_CMP_LT ? c->keys[x] < c->keys[y] : c->keys[x] > c->keys[y];
  if (!c->err && (++c->calls & 4095) == 0) c->err = hk_eval_poll(c->d, c->ins);
  if (c->err) return false;
  return c->fast_dir ? fast_less(c, x, y) : generic_less(c, x, y);
}

/* Stable insertion sort of a short run. */
static void insertion_sort(sort_ctx *c, int64_t *a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    int64_t x = a[i], j = i;
    while (j > 0 && less(c, x, a[j - 1])) {
      a[j] = a[j - 1];
      j--;
    }
    a[j] = x;
  }
}

static void merge_sort(sort_ctx *c, int64_t *a, int64_t *tmp, int64_t n) {
  if (n <= 16) {
    insertion_sort(c, a, n);
    return;
  }
  int64_t h = n / 2;
  merge_sort(c, a, tmp, h);
  merge_sort(c, a + h, tmp, n - h);
  if (!less(c, a[h], a[h - 1])) return;   /* already in order */
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) tmp[k++] = less(c, a[j], a[i]) ? a[j++] : a[i++];
  while (i < h) tmp[k++] = a[i++];
  while (j < n) tmp[k++] = a[j++];
  memcpy(a, tmp, (size_t)n * sizeof(int64_t));
}

/* An unsigned key whose order is the comparison's order on element i of
 * v; false for a NaN under a partial (non-total) float order. */
static bool order_key(const hk_value *v, int64_t i, bool total, uint64_t *key) {
  hk_prim p = (hk_prim)v->elem;
  if (hk_prim_is_float(p)) {
    double x = hk_value_get_f64(v, i);
    if (!total && isnan(x)) return false;
    *key = total_key(!total && x == 0 ? 0.0 : x);
  } else if (hk_prim_is_signed_int(p)) {
    *key = (uint64_t)hk_value_get_i64(v, i) ^ (UINT64_C(1) << 63);
  } else {
    *key = (uint64_t)hk_value_get_i64(v, i);
  }
  return true;
}

/* Fills c->keys for the current row so that key order is the comparator's
 * order (from operand 0 itself, or f of the key operand); leaves it NULL
 * when a NaN makes a float order partial. */
static void row_keys(sort_ctx *c, uint64_t *buf, int64_t n) {
  c->keys = NULL;
  for (int64_t i = 0; i < n; i++) {
    int64_t at = c->base + i * c->stride;
    bool ok;
    if (c->key_prog) {
      hk_scalar_prog_set_arg(c->key_prog, 0, c->ops[c->key_operand], at);
      hk_scalar_prog_run(c->key_prog);
      hk_scalar_prog_get_result(c->key_prog, 0, c->key_val, 0);
      ok = order_key(c->key_val, 0, c->key_total, &buf[i]);
    } else {
      ok = order_key(c->ops[0], at, c->total_order, &buf[i]);
    }
    if (!ok) return;
  }
  c->keys = buf;
}

static void detect_fast(sort_ctx *c) {
  const hk_instr *r = c->cmp->root;
  c->fast_dir = 0;
  if (r->opcode != HK_OP_COMPARE || r->n_operands != 2 || !r->attrs) return;
  const hk_instr *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != HK_OP_PARAMETER || b->opcode != HK_OP_PARAMETER) return;
  if (hk_instr_parameter_number(a) != 0 || hk_instr_parameter_number(b) != 1) return;
  if (r->attrs->cmp_dir != HK_CMP_LT && r->attrs->cmp_dir != HK_CMP_GT) return;
  if (hk_prim_is_complex((hk_prim)c->ops[0]->elem)) return;
  c->fast_dir = c->key_dir = r->attrs->cmp_dir;
  c->total_order = r->attrs->cmp_type == HK_CMPT_TOTALORDER;
}

/* A comparator of the form compare(f(x), f(y)) with LT/GT on keys the
 * plain orders cover: its key program (else c->key_prog stays NULL). */
static void detect_key(sort_ctx *c) {
  int k;
  hk_cmp_dir dir;
  hk_cmp_type type;
  hk_scalar_prog *p = hk_scalar_prog_compile_key(c->cmp, &k, &dir, &type);
  if (!p) return;
  hk_prim kt = hk_scalar_prog_result_type(p, 0);
  bool type_ok = hk_prim_is_float(kt) ? type != HK_CMPT_SIGNED && type != HK_CMPT_UNSIGNED
               : hk_prim_is_signed_int(kt) ? type == HK_CMPT_DEFAULT || type == HK_CMPT_SIGNED
                                           : type == HK_CMPT_DEFAULT || type == HK_CMPT_UNSIGNED;
  if ((dir != HK_CMP_LT && dir != HK_CMP_GT) || !type_ok || k >= c->N ||
      hk_scalar_prog_arg_type(p, 0) != c->ops[k]->elem) {
    hk_scalar_prog_free(p);
    return;
  }
  c->key_prog = p;
  c->key_operand = k;
  c->key_dir = dir;
  c->key_total = type == HK_CMPT_TOTALORDER;
  c->key_val = hk_value_new_array(kt, 0, NULL);
}

/* The comparator as a scalar program when its parameters take the
 * operands' element types and it returns one pred; else NULL. */
static hk_scalar_prog *compile_comparator(const hk_computation *cmp, int N, hk_value *const *ops) {
  if (cmp->n_params != 2 * N || cmp->root->shape->elem != HK_PRED) return NULL;
  for (int k = 0; k < 2 * N; k++)
    if (!cmp->params[k] || cmp->params[k]->shape->elem != ops[k / 2]->elem) return NULL;
  hk_scalar_prog *p = hk_scalar_prog_compile(cmp);
  if (p && hk_scalar_prog_n_results(p) != 1) {
    hk_scalar_prog_free(p);
    return NULL;
  }
  return p;
}

hk_status *hk_op_sort(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                      hk_value **out) {
  int N = ins->n_operands;
  if (N < 1 || N > 16 || ins->n_called < 1 || ins->n_dims != 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad sort operands, comparator or dimension");
  const hk_value *a = ops[0];
  int64_t dim = ins->dims[0];
  if (dim < 0 || dim >= a->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad sort dimension");
  for (int k = 0; k < N; k++)
    if (ops[k]->elem == HK_TUPLE || ops[k]->n != a->n)
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d does not match", k);
  sort_ctx c = {.d = d, .cmp = ins->called[0], .N = N, .ops = ops, .ins = ins};
  detect_fast(&c);
  if (!c.fast_dir) detect_key(&c);
  if (!c.fast_dir) c.prog = compile_comparator(c.cmp, N, ops);
  int64_t st[HK_MAX_RANK];
  hk_strides(a->rank, a->dims, st);
  int64_t n = a->dims[dim];
  c.stride = st[dim];
  hk_value *res[16];
  for (int k = 0; k < N; k++) res[k] = hk_value_new_array((hk_prim)ops[k]->elem, a->rank, a->dims);
  int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  int64_t *tmp = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof(uint64_t));
  if (!perm || !tmp || !keys) hk_out_of_memory();
  int64_t rows = n ? a->n / n : 0;
  int64_t inner = st[dim];
  for (int64_t r = 0; r < rows && !c.err; r++) {
    c.base = (r / inner) * inner * n + r % inner;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (c.fast_dir || c.key_prog) row_keys(&c, keys, n);
    merge_sort(&c, perm, tmp, n);
    for (int k = 0; k < N; k++) {
      int es = hk_esize(ops[k]->elem);
      for (int64_t i = 0; i < n; i++)
        memcpy((uint8_t *)res[k]->data + (c.base + i * c.stride) * es,
               (const uint8_t *)ops[k]->data + (c.base + perm[i] * c.stride) * es, (size_t)es);
    }
  }
  free(perm);
  free(tmp);
  free(keys);
  hk_scalar_prog_free(c.prog);
  hk_scalar_prog_free(c.key_prog);
  hk_value_release(c.key_val);
  if (c.err) {
    for (int k = 0; k < N; k++) hk_value_release(res[k]);
    return hk_status_prefix(c.err, "%s", ins->name);
  }
  *out = N == 1 && ins->shape->elem != HK_TUPLE ? res[0] : hk_value_new_tuple(N, res);
  return NULL;
}

/* ---- top-k ------------------------------------------------------------------------ */

typedef struct topk_row {
  const uint64_t *keys;
  bool largest;
} topk_row;

static void topk_sort(const topk_row *r, int64_t *a, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  topk_sort(r, a, tmp, h);
  topk_sort(r, a + h, tmp, n - h);
  int64_t i = 0, j = h, k = 0;
  while (i < h && j < n) {
    uint64_t x = r->keys[a[i]], y = r->keys[a[j]];
    bool take_j = r->largest ? y > x : y < x;
    tmp[k++] = take_j ? a[j++] : a[i++];
  }
  while (i < h) tmp[k++] = a[i++];
  while (j < n) tmp[k++] = a[j++];
  memcpy(a, tmp, (size_t)n * sizeof(int64_t));
}

/* The k best of n keys (best first, ties by lower index) into out, by one
 * pass keeping a sorted list of the best so far: O(n) when k is small. */
static void topk_select(const topk_row *r, int64_t n, int64_t k, int64_t *out) {
  int64_t have = 0;
  for (int64_t i = 0; i < n && k > 0; i++) {
    uint64_t x = r->keys[i];
    if (have == k) {
      uint64_t w = r->keys[out[k - 1]];
      if (r->largest ? x <= w : x >= w) continue;
      have--;
    }
    int64_t at = have;
    while (at > 0 && (r->largest ? x > r->keys[out[at - 1]] : x < r->keys[out[at - 1]])) {
      out[at] = out[at - 1];
      at--;
    }
    out[at] = i;
    have++;
  }
}

/* topk and custom-call "TopK": the k largest (or smallest) entries of each
 * row of the last dimension, best first, ties by lower index; returns
 * (values, s32 indices). */
hk_status *hk_op_topk(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                      hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  const hk_shape *s = ins->shape;
  if (s->elem != HK_TUPLE || s->n_tuple != 2 || a->elem == HK_TUPLE || a->rank < 1)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "top-k returns (values, indices) of an array");
  hk_value *vals = hk_value_for_shape_dims(s->tuple[0]), *idx = hk_value_for_shape_dims(s->tuple[1]);
  int64_t n = a->dims[a->rank - 1], k = vals->rank ? vals->dims[vals->rank - 1] : 0;
  if (k > n || vals->elem != a->elem) {
    hk_value_release(vals);
    hk_value_release(idx);
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "k=%lld is larger than the row (%lld)", (long long)k,
                         (long long)n);
  }
  bool largest = ins->opcode == HK_OP_TOPK && ins->attrs ? ins->attrs->largest : true;
  if (ins->opcode == HK_OP_TOPK && ins->attrs && !ins->attrs->largest && ins->attrs->k) largest = false;
  uint64_t *keys = malloc((size_t)(n ? n : 1) * sizeof(uint64_t));
  int64_t *perm = malloc((size_t)(n ? n : 1) * sizeof(int64_t)), *tmp = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  if (!keys || !perm || !tmp) hk_out_of_memory();
  int es = hk_esize(a->elem);
  bool fl = hk_prim_is_float((hk_prim)a->elem), sgn = hk_prim_is_signed_int((hk_prim)a->elem);
  int64_t rows = n ? a->n / n : 0;
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = 0; i < n; i++) {
      int64_t off = r * n + i;
      if (fl) keys[i] = total_key(hk_value_get_f64(a, off));
      else if (sgn) keys[i] = (uint64_t)hk_value_get_i64(a, off) ^ (UINT64_C(1) << 63);
      else keys[i] = (uint64_t)hk_value_get_i64(a, off);
      perm[i] = i;
    }
    topk_row tr = {keys, largest};
    if (k * 64 <= n) topk_select(&tr, n, k, perm);
    else topk_sort(&tr, perm, tmp, n);
    for (int64_t j = 0; j < k; j++) {
      memcpy((uint8_t *)vals->data + (r * k + j) * es, (const uint8_t *)a->data + (r * n + perm[j]) * es, (size_t)es);
      hk_value_set_i64(idx, r * k + j, perm[j]);
    }
  }
  free(keys);
  free(perm);
  free(tmp);
  hk_value *e[2] = {vals, idx};
  *out = hk_value_new_tuple(2, e);
  return NULL;
}
