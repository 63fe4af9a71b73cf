/* linalg.c - dot (general dimension numbers, cache-blocked kernel, N:M sparse operands) and
 * convolution (windows, dilation, padding, feature and batch groups).
 * Floats (f64, f32, f16, bf16, f8) accumulate in double and round once to
 * the result type; integers accumulate in int64 (wrapped to the result
 * type). */
#include <stdio.h>

#include "eval/eval_internal.h"

typedef enum { ACC_F64, ACC_INT } acc_kind;

static acc_kind acc_of(hk_prim out, hk_prim a, hk_prim b) {
  if (hk_prim_is_float(out) || hk_prim_is_float(a) || hk_prim_is_float(b)) return ACC_F64;
  return ACC_INT;
}

/* Offsets (in elements of v) of every combination of the listed dims,
 * row-major over that list. */
static int64_t *dim_offsets(const hk_value *v, int n, const int64_t *dims, int64_t *count) {
  int64_t st[HK_MAX_RANK];
  hk_strides(v->rank, v->dims, st);
  int64_t c = 1;
  for (int i = 0; i < n; i++) c *= v->dims[dims[i]];
  int64_t *off = malloc((size_t)(c ? c : 1) * sizeof(int64_t));
  if (!off) abort();
  int64_t idx[HK_MAX_RANK] = {0};
  for (int64_t k = 0; k < c; k++) {
    int64_t o = 0;
    for (int i = 0; i < n; i++) o += idx[i] * st[dims[i]];
    off[k] = o;
    for (int i = n - 1; i >= 0; i--) {
      if (++idx[i] < v->dims[dims[i]]) break;
      idx[i] = 0;
    }
  }
  *count = c;
  return off;
}

/* Dims of v not in either list, in order. */
static int free_dims(const hk_value *v, hk_i64s a, hk_i64s b, int64_t *out) {
  int n = 0;
  for (int d = 0; d < v->rank; d++) {
    bool used = false;
    for (int i = 0; i < a.n; i++) used |= a.v[i] == d;
    for (int i = 0; i < b.n; i++) used |= b.v[i] == d;
    if (!used) out[n++] = d;
  }
  return n;
}

/* Element i of v as a double (f32 read directly: the hot case). */
static inline double elem_f64(const hk_value *v, int64_t i) {
  return v->elem == HK_F32 ? (double)((const float *)v->data)[i] : hk_value_get_f64(v, i);
}

/* Packs v into [B][R][C] of doubles or int64 (by kind). */
static void *pack3(const hk_value *v, const int64_t *ob, int64_t nb, const int64_t *orr,
                   int64_t nr, const int64_t *oc, int64_t nc, acc_kind k) {
  void *p = malloc((size_t)(nb * nr * nc > 0 ? nb * nr * nc : 1) * 8);
  if (!p) abort();
  int64_t w = 0;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t r = 0; r < nr; r++)
      for (int64_t c = 0; c < nc; c++, w++) {
        int64_t i = ob[b] + orr[r] + oc[c];
        if (k == ACC_F64) ((double *)p)[w] = elem_f64(v, i);
        else ((int64_t *)p)[w] = hk_value_get_i64(v, i);
      }
  return p;
}

enum { BLK_I = 64, BLK_K = 256, BLK_J = 512 };

/* c[j0..j1) += a * b[j0..j1), unrolled by 8 so the compiler's basic-block
 * vectorizer turns it into SIMD at -O2. */
static inline void axpy_f64(double *restrict c, const double *restrict b, double a, int64_t j0,
                            int64_t j1) {
  int64_t j = j0;
  for (; j + 8 <= j1; j += 8) {
    c[j] += a * b[j];
    c[j + 1] += a * b[j + 1];
    c[j + 2] += a * b[j + 2];
    c[j + 3] += a * b[j + 3];
    c[j + 4] += a * b[j + 4];
    c[j + 5] += a * b[j + 5];
    c[j + 6] += a * b[j + 6];
    c[j + 7] += a * b[j + 7];
  }
  for (; j < j1; j++) c[j] += a * b[j];
}

/* C[M][N] = A[M][K] * B[K][N] in double, cache-blocked (k, j, i blocks);
 * every C element still sums over k in order. */
static void matmul_f64(const double *restrict A, const double *restrict B, double *restrict C,
                       int64_t M, int64_t K, int64_t N) {
  memset(C, 0, (size_t)(M * N) * sizeof(double));
  for (int64_t k0 = 0; k0 < K; k0 += BLK_K) {
    int64_t k1 = k0 + BLK_K < K ? k0 + BLK_K : K;
    for (int64_t j0 = 0; j0 < N; j0 += BLK_J) {
      int64_t j1 = j0 + BLK_J < N ? j0 + BLK_J : N;
      for (int64_t i0 = 0; i0 < M; i0 += BLK_I) {
        int64_t i1 = i0 + BLK_I < M ? i0 + BLK_I : M;
        for (int64_t i = i0; i < i1; i++) {
          double *restrict c = C + i * N;
          for (int64_t k = k0; k < k1; k++) axpy_f64(c, B + k * N, A[i * K + k], j0, j1);
        }
      }
    }
  }
}

static void matmul_int(const int64_t *A, const int64_t *B, int64_t *C, int64_t M, int64_t K,
                       int64_t N) {
  memset(C, 0, (size_t)(M * N) * sizeof(int64_t));
  for (int64_t i = 0; i < M; i++)
    for (int64_t k = 0; k < K; k++) {
      uint64_t a = (uint64_t)A[i * K + k];
      for (int64_t j = 0; j < N; j++)
        C[i * N + j] = (int64_t)((uint64_t)C[i * N + j] + a * (uint64_t)B[k * N + j]);
    }
}

static hk_status *check_dot(const hk_instr *ins, const hk_value *l, const hk_value *r,
                            const hk_dot_dnums *dn) {
  if (l->elem == HK_TUPLE || r->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "dot of a tuple");
  if (hk_prim_is_complex((hk_prim)l->elem) || hk_prim_is_complex((hk_prim)ins->shape->elem))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "complex dot is not supported");
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "dimension numbers do not pair up");
  for (int i = 0; i < dn->lhs_batch.n; i++)
    if (l->dims[dn->lhs_batch.v[i]] != r->dims[dn->rhs_batch.v[i]])
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "batch dimension %d sizes differ", i);
  for (int i = 0; i < dn->lhs_contracting.n; i++)
    if (l->dims[dn->lhs_contracting.v[i]] != r->dims[dn->rhs_contracting.v[i]])
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "contracting dimension %d sizes differ", i);
  return NULL;
}

/* res[o0 + i] = C[i] for n elements, rounded once to the result type. */
static void store_block(hk_value *res, int64_t o0, const void *C, int64_t n, acc_kind k) {
  if (k == ACC_INT) {
    for (int64_t i = 0; i < n; i++) hk_value_set_i64(res, o0 + i, ((const int64_t *)C)[i]);
  } else if (res->elem == HK_F32) {
    float *o = (float *)res->data + o0;
    for (int64_t i = 0; i < n; i++) o[i] = (float)((const double *)C)[i];
  } else {
    for (int64_t i = 0; i < n; i++) hk_value_set_f64(res, o0 + i, ((const double *)C)[i]);
  }
}

/* ---- structured (N:M) sparse dot -------------------------------------------------
 * sparsity=L.d@N:M (or R.d@N:M): operand L (R) holds, along its dimension d,
 * only N of every M consecutive elements of the logical operand; the third
 * operand (u16 metadata, the sparse operand's shape with dimension d
 * divided by N * G) says which.  Following the metadata format of XLA's
 * sparse dot (JAX's nm_pack): each u16 describes G = 16 / (N * log2 M)
 * groups of M logical elements, its kept elements in order, the j-th
 * one's position inside its group in bits [j*log2 M, (j+1)*log2 M). */
typedef struct sparsity {
  int operand;                     /* 0: lhs, 1: rhs */
  int64_t dim, n, m;
} sparsity;

static hk_status *parse_sparsity(const hk_instr *ins, sparsity *sp) {
  const char *v = NULL;
  for (int32_t i = 0; ins->attrs && i < ins->attrs->n_raw; i++)
    if (!strcmp(ins->attrs->raw[i].name, "sparsity")) v = ins->attrs->raw[i].value;
  char side, tail;
  long long dim, n, m;
  if (!v || sscanf(v, "%c.%lld@%lld:%lld%c", &side, &dim, &n, &m, &tail) != 4 ||
      (side != 'L' && side != 'R'))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "sparse dot needs one sparsity=L.d@N:M or R.d@N:M descriptor (got \"%s\")",
                         v ? v : "");
  int bits = 0;
  while ((1LL << bits) < m) bits++;
  if (n < 1 || m <= n || (1LL << bits) != m || 16 % (n * bits))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "sparsity %lld:%lld is not supported", n, m);
  *sp = (sparsity){side == 'L' ? 0 : 1, dim, n, m};
  return NULL;
}

/* The logical (dense) operand of a sparse one: zeros except the kept
 * elements, placed by the metadata. */
static hk_status *densify(const hk_instr *ins, const sparsity *sp, const hk_value *v,
                          const hk_value *meta, hk_value **out) {
  int bits = 0;
  while ((1LL << bits) < sp->m) bits++;
  int64_t G = 16 / (sp->n * bits), kept = sp->n * G;   /* kept elements per u16 */
  if (sp->dim < 0 || sp->dim >= v->rank || v->elem == HK_TUPLE || meta->elem != HK_U16 ||
      meta->rank != v->rank || v->dims[sp->dim] % kept)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "sparse operand or metadata does not match the descriptor");
  int64_t C = v->dims[sp->dim], outer = 1, inner = 1;
  for (int j = 0; j < v->rank; j++) {
    if (j != sp->dim && meta->dims[j] != v->dims[j])
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "metadata shape does not match the sparse operand");
    if (j < sp->dim) outer *= v->dims[j];
    if (j > sp->dim) inner *= v->dims[j];
  }
  if (meta->dims[sp->dim] != C / kept)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "metadata has %lld entries along dimension %lld, want %lld",
                         (long long)meta->dims[sp->dim], (long long)sp->dim, (long long)(C / kept));
  int64_t dims[HK_MAX_RANK], L = C / sp->n * sp->m;
  memcpy(dims, v->dims, (size_t)v->rank * sizeof(int64_t));
  dims[sp->dim] = L;
  hk_value *r = hk_value_new_array((hk_prim)v->elem, v->rank, dims);
  int es = hk_esize(v->elem);
  const uint16_t *md = meta->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t j = c % kept;
        uint16_t word = md[(o * (C / kept) + c / kept) * inner + i];
        int64_t pos = (c / kept) * sp->m * G + (j / sp->n) * sp->m + ((word >> (bits * j)) & (sp->m - 1));
        memcpy((uint8_t *)r->data + ((o * L + pos) * inner + i) * es,
               (const uint8_t *)v->data + ((o * C + c) * inner + i) * es, (size_t)es);
      }
  *out = r;
  return NULL;
}

static hk_status *dot_dense(hk_device_ctx *d, const hk_instr *ins, const hk_value *l,
                            const hk_value *r, hk_value **out);

hk_status *hk_op_dot(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                     hk_value **out) {
  if (ins->n_operands == 2) return dot_dense(d, ins, ops[0], ops[1], out);
  if (ins->n_operands != 3)
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "dot with %d operands", ins->n_operands);
  sparsity sp = {0};
  hk_value *dense = NULL;
  HK_TRY(parse_sparsity(ins, &sp));
  HK_TRY(densify(ins, &sp, ops[sp.operand], ops[2], &dense));
  hk_status *st = sp.operand == 0 ? dot_dense(d, ins, dense, ops[1], out) : dot_dense(d, ins, ops[0], dense, out);
  hk_value_release(dense);
  return st;
}

static hk_status *dot_dense(hk_device_ctx *d, const hk_instr *ins, const hk_value *l,
                            const hk_value *r, hk_value **out) {
  static const hk_dot_dnums empty;
  const hk_dot_dnums *dn = ins->attrs && ins->attrs->dot ? ins->attrs->dot : &empty;
  HK_TRY(check_dot(ins, l, r, dn));
  int64_t lfree[HK_MAX_RANK], rfree[HK_MAX_RANK];
  int nlf = free_dims(l, dn->lhs_batch, dn->lhs_contracting, lfree);
  int nrf = free_dims(r, dn->rhs_batch, dn->rhs_contracting, rfree);
  int64_t B, B2, M, N, K, K2;
  int64_t *lb = dim_offsets(l, dn->lhs_batch.n, dn->lhs_batch.v, &B);
  int64_t *lm = dim_offsets(l, nlf, lfree, &M);
  int64_t *lk = dim_offsets(l, dn->lhs_contracting.n, dn->lhs_contracting.v, &K);
  int64_t *rb = dim_offsets(r, dn->rhs_batch.n, dn->rhs_batch.v, &B2);
  int64_t *rk = dim_offsets(r, dn->rhs_contracting.n, dn->rhs_contracting.v, &K2);
  int64_t *rn = dim_offsets(r, nrf, rfree, &N);
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  hk_status *st = NULL;
  if (res->n != B * M * N) {
    st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "result has %lld elements, dot gives %lld",
                       (long long)res->n, (long long)(B * M * N));
  } else {
    acc_kind k = acc_of((hk_prim)res->elem, (hk_prim)l->elem, (hk_prim)r->elem);
    void *A = pack3(l, lb, B, lm, M, lk, K, k);
    void *Bm = pack3(r, rb, B, rk, K, rn, N, k);
    void *C = malloc((size_t)(M * N > 0 ? M * N : 1) * 8);
    if (!C) abort();
    for (int64_t b = 0; b < B && !st; b++) {
      const char *Ab = (const char *)A + (size_t)(b * M * K) * 8;
      const char *Bb = (const char *)Bm + (size_t)(b * K * N) * 8;
      for (int64_t i0 = 0; i0 < M && !st; i0 += 256) {
        int64_t rows = M - i0 < 256 ? M - i0 : 256;
        const char *Ar = Ab + (size_t)(i0 * K) * 8;
        char *Cr = (char *)C + (size_t)(i0 * N) * 8;
        if (k == ACC_F64) matmul_f64((const double *)Ar, (const double *)Bb, (double *)Cr, rows, K, N);
        else matmul_int((const int64_t *)Ar, (const int64_t *)Bb, (int64_t *)Cr, rows, K, N);
        st = hk_eval_poll(d, ins);
      }
      store_block(res, b * M * N, C, M * N, k);
    }
    free(A);
    free(Bm);
    free(C);
  }
  free(lb); free(lm); free(lk); free(rb); free(rk); free(rn);
  if (st) {
    hk_value_release(res);
    return st;
  }
  *out = res;
  return NULL;
}

/* ---- convolution ------------------------------------------------------------ */

typedef struct conv_geom {
  const hk_conv_dnums *dn;
  const hk_window *win;
  int ns;                          /* spatial dims */
  int64_t G, BG, IZ, OZ, IFG, OFG, out_batch;
} conv_geom;

static hk_status *conv_setup(const hk_instr *ins, const hk_value *lhs, const hk_value *rhs,
                             const hk_value *res, conv_geom *g) {
  const hk_attrs *at = ins->attrs;
  if (!at || !at->conv) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "missing dim_labels");
  g->dn = at->conv;
  g->ns = at->conv->n_spatial;
  static const hk_window none;
  g->win = at->window ? at->window : &none;
  if (g->win->n_dims != g->ns)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "window has %d dims, %d spatial dims", g->win->n_dims, g->ns);
  if (lhs->rank != g->ns + 2 || rhs->rank != g->ns + 2 || res->rank != g->ns + 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "ranks do not match dim_labels");
  if (hk_prim_is_complex((hk_prim)lhs->elem))
    return hk_eval_error(ins, HK_UNIMPLEMENTED, "complex convolution is not supported");
  g->G = at->feature_group_count > 0 ? at->feature_group_count : 1;
  g->BG = at->batch_group_count > 0 ? at->batch_group_count : 1;
  g->IZ = lhs->dims[g->dn->input_feature];
  g->OZ = rhs->dims[g->dn->kernel_output_feature];
  g->IFG = g->IZ / g->G;
  g->OFG = g->OZ / g->G;
  g->out_batch = lhs->dims[g->dn->input_batch] / g->BG;
  if (g->IZ % g->G || g->OZ % g->G || g->OZ % g->BG || lhs->dims[g->dn->input_batch] % g->BG ||
      rhs->dims[g->dn->kernel_input_feature] != g->IFG)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "feature/batch group counts do not divide the dims");
  if (res->dims[g->dn->output_batch] != g->out_batch || res->dims[g->dn->output_feature] != g->OZ)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "result batch or feature size does not match the operands");
  return NULL;
}

/* ---- the fast path: im2col + the blocked dot kernel ---------------------- */

/* Source offsets of v's elements visited row-major over dims order[0..n). */
static void order_strides(const hk_value *v, const int64_t *order, int n, int64_t *dims,
                          int64_t *st) {
  int64_t vst[HK_MAX_RANK];
  hk_strides(v->rank, v->dims, vst);
  for (int j = 0; j < n; j++) {
    dims[j] = v->dims[order[j]];
    st[j] = vst[order[j]];
  }
}

/* Advances a row-major index over dims[0..n) and the matching source
 * offset. */
static inline void step_index(int n, const int64_t *dims, const int64_t *st, int64_t *idx,
                              int64_t *off) {
  for (int j = n - 1; j >= 0; j--) {
    *off += st[j];
    if (++idx[j] < dims[j]) return;
    *off -= st[j] * idx[j];
    idx[j] = 0;
  }
}

/* out[i] = v[offset of i-th index row-major over order] as doubles. */
static double *pack_f64(const hk_value *v, const int64_t *order, int n) {
  int64_t dims[HK_MAX_RANK], st[HK_MAX_RANK], idx[HK_MAX_RANK] = {0}, off = 0;
  order_strides(v, order, n, dims, st);
  double *p = malloc((size_t)(v->n ? v->n : 1) * sizeof(double));
  if (!p) abort();
  for (int64_t i = 0; i < v->n; i++) {
    p[i] = elem_f64(v, off);
    step_index(n, dims, st, idx, &off);
  }
  return p;
}

/* The inverse of pack_f64, rounding once to v's type. */
static void unpack_f64(hk_value *v, const int64_t *order, int n, const double *p) {
  int64_t dims[HK_MAX_RANK], st[HK_MAX_RANK], idx[HK_MAX_RANK] = {0}, off = 0;
  order_strides(v, order, n, dims, st);
  bool f32 = v->elem == HK_F32;
  for (int64_t i = 0; i < v->n; i++) {
    if (f32) ((float *)v->data)[off] = (float)p[i];
    else hk_value_set_f64(v, off, p[i]);
    step_index(n, dims, st, idx, &off);
  }
}

/* Linear input position for output os and kernel index k; -1 if padding. */
static int64_t input_pos(const conv_geom *g, const hk_value *lhs, const int64_t *os,
                         const int64_t *k) {
  int64_t lin = 0;
  for (int s = 0; s < g->ns; s++) {
    const hk_window_dim *w = &g->win->dims[s];
    int64_t stride = w->stride ? w->stride : 1, bd = w->base_dilation ? w->base_dilation : 1;
    int64_t wd = w->window_dilation ? w->window_dilation : 1;
    int64_t pos = os[s] * stride - w->pad_lo + k[s] * wd;
    if (pos < 0 || pos % bd) return -1;
    pos /= bd;
    int64_t dim = lhs->dims[g->dn->input_spatial[s]];
    if (pos >= dim) return -1;
    lin = lin * dim + pos;
  }
  return lin;
}

static int64_t kernel_pos(const conv_geom *g, const hk_value *rhs, const int64_t *k) {
  int64_t lin = 0;
  for (int s = 0; s < g->ns; s++) {
    const hk_window_dim *w = &g->win->dims[s];
    int64_t dim = rhs->dims[g->dn->kernel_spatial[s]];
    lin = lin * dim + (w->reversal ? dim - 1 - k[s] : k[s]);
  }
  return lin;
}

/* Splits linear index lin over dims[0..n) row-major. */
static void unlinear(int64_t lin, int n, const int64_t *dims, int64_t *idx) {
  for (int s = n - 1; s >= 0; s--) {
    idx[s] = dims[s] ? lin % dims[s] : 0;
    lin = dims[s] ? lin / dims[s] : 0;
  }
}

/* The packed operands and sizes of one im2col convolution. */
typedef struct im2col {
  const conv_geom *g;
  const hk_value *lhs, *rhs;
  const double *L;                 /* [B][input spatial][IZ] */
  const double *K;                 /* [kernel spatial][IFG][OZ] */
  int64_t osd[HK_MAX_RANK], ksd[HK_MAX_RANK];
  int64_t in_sp, out_sp, k_sp, KK;  /* KK = k_sp * IFG */
  int64_t groups, ocols;           /* feature or batch groups; output features of one */
} im2col;

/* Kernel of group fg (a feature or a batch group) as a [k_sp * IFG][ocols]
 * matrix, rows in kernel index order (reversal applied). */
static double *group_kernel(const im2col *c, int64_t fg) {
  const conv_geom *g = c->g;
  double *Kg = malloc((size_t)(c->KK * c->ocols > 0 ? c->KK * c->ocols : 1) * sizeof(double));
  if (!Kg) abort();
  int64_t k[HK_MAX_RANK];
  for (int64_t kp = 0; kp < c->k_sp; kp++) {
    unlinear(kp, g->ns, c->ksd, k);
    const double *src = c->K + kernel_pos(g, c->rhs, k) * g->IFG * g->OZ + fg * c->ocols;
    for (int64_t z = 0; z < g->IFG; z++)
      memcpy(Kg + (kp * g->IFG + z) * c->ocols, src + z * g->OZ, (size_t)c->ocols * sizeof(double));
  }
  return Kg;
}

/* Rows r0..r0+rows of the im2col matrix of group fg into A. */
static void fill_columns(const im2col *c, int64_t fg, int64_t r0, int64_t rows, double *A) {
  const conv_geom *g = c->g;
  int64_t os[HK_MAX_RANK], k[HK_MAX_RANK];
  int64_t feat0 = g->G > 1 ? fg * g->IFG : 0, batch0 = g->BG > 1 ? fg * g->out_batch : 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t b = batch0 + (r0 + r) / c->out_sp;
    unlinear((r0 + r) % c->out_sp, g->ns, c->osd, os);
    double *row = A + r * c->KK;
    for (int64_t kp = 0; kp < c->k_sp; kp++) {
      unlinear(kp, g->ns, c->ksd, k);
      int64_t ip = input_pos(g, c->lhs, os, k);
      double *dst = row + kp * g->IFG;
      if (ip < 0) memset(dst, 0, (size_t)g->IFG * sizeof(double));
      else memcpy(dst, c->L + (b * c->in_sp + ip) * g->IZ + feat0, (size_t)g->IFG * sizeof(double));
    }
  }
}

/* O[B * out_sp][OZ] = the convolution, group by group, in row chunks
 * (B: the output batch). */
static hk_status *im2col_run(hk_device_ctx *d, const hk_instr *ins, const im2col *c, int64_t B,
                             double *O) {
  const conv_geom *g = c->g;
  int64_t R = B * c->out_sp;
  int64_t chunk = c->KK > 0 ? ((int64_t)1 << 20) / c->KK : 256;
  chunk = chunk < 16 ? 16 : chunk > 256 ? 256 : chunk;
  double *A = malloc((size_t)(chunk * c->KK > 0 ? chunk * c->KK : 1) * sizeof(double));
  double *Cm = malloc((size_t)(chunk * c->ocols > 0 ? chunk * c->ocols : 1) * sizeof(double));
  if (!A || !Cm) abort();
  hk_status *st = NULL;
  for (int64_t fg = 0; fg < c->groups && !st; fg++) {
    double *Kg = group_kernel(c, fg);
    for (int64_t r0 = 0; r0 < R && !st; r0 += chunk) {
      int64_t rows = R - r0 < chunk ? R - r0 : chunk;
      fill_columns(c, fg, r0, rows, A);
      matmul_f64(A, Kg, Cm, rows, c->KK, c->ocols);
      for (int64_t r = 0; r < rows; r++)
        memcpy(O + (r0 + r) * g->OZ + fg * c->ocols, Cm + r * c->ocols, (size_t)c->ocols * sizeof(double));
      st = hk_eval_poll(d, ins);
    }
    free(Kg);
  }
  free(A);
  free(Cm);
  return st;
}

static hk_status *conv_fast(hk_device_ctx *d, const hk_instr *ins, const conv_geom *g,
                            const hk_value *lhs, const hk_value *rhs, hk_value *res) {
  const hk_conv_dnums *dn = g->dn;
  int ns = g->ns;
  int64_t lo[HK_MAX_RANK], ko[HK_MAX_RANK], oo[HK_MAX_RANK];
  lo[0] = dn->input_batch;
  ko[ns] = dn->kernel_input_feature;
  ko[ns + 1] = dn->kernel_output_feature;
  oo[0] = dn->output_batch;
  for (int s = 0; s < ns; s++) {
    lo[1 + s] = dn->input_spatial[s];
    ko[s] = dn->kernel_spatial[s];
    oo[1 + s] = dn->output_spatial[s];
  }
  lo[ns + 1] = dn->input_feature;
  oo[ns + 1] = dn->output_feature;
  im2col c = {.g = g, .lhs = lhs, .rhs = rhs, .in_sp = 1, .out_sp = 1, .k_sp = 1};
  for (int s = 0; s < ns; s++) {
    c.osd[s] = res->dims[dn->output_spatial[s]];
    c.ksd[s] = rhs->dims[dn->kernel_spatial[s]];
    c.in_sp *= lhs->dims[dn->input_spatial[s]];
    c.out_sp *= c.osd[s];
    c.k_sp *= c.ksd[s];
  }
  c.KK = c.k_sp * g->IFG;
  c.groups = g->G * g->BG;
  c.ocols = g->OZ / c.groups;
  double *L = pack_f64(lhs, lo, ns + 2), *K = pack_f64(rhs, ko, ns + 2);
  double *O = malloc((size_t)(res->n ? res->n : 1) * sizeof(double));
  if (!O) abort();
  c.L = L;
  c.K = K;
  hk_status *st = im2col_run(d, ins, &c, res->dims[dn->output_batch], O);
  if (!st) unpack_f64(res, oo, ns + 2, O);
  free(L);
  free(K);
  free(O);
  return st;
}

hk_status *hk_op_convolution(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops,
                             hk_value **out) {
  const hk_value *lhs = ops[0], *rhs = ops[1];
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  conv_geom g;
  hk_status *st = conv_setup(ins, lhs, rhs, res, &g);
  if (!st && g.BG > 1 && g.G > 1)
    st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "feature_group_count and batch_group_count are both > 1");
  if (!st) st = conv_fast(d, ins, &g, lhs, rhs, res);
  if (st) {
    hk_value_release(res);
    return st;
  }
  *out = res;
  return NULL;
}
