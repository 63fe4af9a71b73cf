/* linalg.c - dot (general dimension numbers, cache-blocked kernel, N:M sparse operands) and
 * convolution (windows, dilation, padding, feature and batch groups).
 * Floats (f64, f32, f16, bf16, f8) accumulate in double and round once to
 * the result type; integers accumulate in int64 (wrapped to the result
 * type). */
#include <stdio.h>

#include "analysis/analysis_internal.h"
#include "eval/eval_internal.h"

typedef enum { ACC_F64, ACC_INT } acc_kind;

static acc_kind acc_of(hk_prim out, hk_prim a, hk_prim b) {
  if (hk_prim_is_float(out) || hk_prim_is_float(a) || hk_prim_is_float(b)) return ACC_F64;
  return ACC_INT;
}

/* Significant bits of an element type's values (an upper bound). */
static int significant_bits(hk_prim p) {
  if (p == HK_F64) return 53;
  if (hk_prim_is_float(p)) return 24;
  return p == HK_PRED ? 1 : hk_prim_bits(p);
}

/* True when every product of an a and a b element is exact in double. */
static bool exact_products(hk_prim a, hk_prim b) {
  return significant_bits(a) + significant_bits(b) <= 53;
}

/* Offsets (in elements of v) of every combination of the listed dims,
 * row-major over that list. */
static int64_t *dim_offsets(const hk_value *v, int n, const int64_t *dims, int64_t *count) {
  int64_t st[HK_MAX_RANK];
  hk_strides(v->rank, v->dims, st);
  int64_t c = 1;
  for (int i = 0; i < n; i++) c *= v->dims[dims[i]];
  int64_t *off = malloc((size_t)(c ? c : 1) * sizeof(int64_t));
  if (!off) hk_out_of_memory();
  int64_t idx[HK_MAX_RANK] = {0}, o = 0;
  for (int64_t k = 0; k < c; k++) {
    off[k] = o;
    for (int i = n - 1; i >= 0; i--) {
      o += st[dims[i]];
      if (++idx[i] < v->dims[dims[i]]) break;
      o -= idx[i] * st[dims[i]];
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

/* A packed operand: floats when every value of the source type is a
 * float (halving the memory of big operands), else doubles; read as
 * doubles.  off is the first element.  A right-hand matrix [K][N] with t
 * set is held as [N][K] (an f32 operand whose contracting dims follow its
 * free ones, read in place; pack_b then reads its rows contiguously). */
typedef struct mat {
  const void *p;
  bool f32;
  int64_t off;
  bool t;
} mat;

static inline double mat_at(mat m, int64_t i) {
  return m.f32 ? (double)((const float *)m.p)[m.off + i] : ((const double *)m.p)[m.off + i];
}

static bool fits_float(hk_prim p) {
  return p != HK_F64 && significant_bits(p) <= 24;
}

/* Packs v into [B][R][C] of floats/doubles (mat rules) or int64 (ACC_INT);
 * *f32 says which float width. */
static void *pack3(const hk_value *v, const int64_t *ob, int64_t nb, const int64_t *orr,
                   int64_t nr, const int64_t *oc, int64_t nc, acc_kind k, bool *f32) {
  *f32 = k == ACC_F64 && fits_float((hk_prim)v->elem);
  void *p = malloc((size_t)(nb * nr * nc > 0 ? nb * nr * nc : 1) * (*f32 ? 4 : 8));
  if (!p) hk_out_of_memory();
  int64_t w = 0;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t r = 0; r < nr; r++)
      for (int64_t c = 0; c < nc; c++, w++) {
        int64_t i = ob[b] + orr[r] + oc[c];
        if (*f32) ((float *)p)[w] = (float)elem_f64(v, i);
        else if (k == ACC_F64) ((double *)p)[w] = elem_f64(v, i);
        else ((int64_t *)p)[w] = hk_value_get_i64(v, i);
      }
  return p;
}

/* A list of v's dims: a dot operand's batch, free or contracting ones. */
typedef struct dimlist {
  int n;
  const int64_t *v;
} dimlist;

static int64_t dims_count(const hk_value *v, dimlist l) {
  int64_t c = 1;
  for (int i = 0; i < l.n; i++) c *= v->dims[l.v[i]];
  return c;
}

/* True when the [a][b][c] order (every dim of v in one of the lists) is
 * v's own row-major order: its dims longer than 1 come in increasing
 * order. */
static bool in_place(const hk_value *v, dimlist a, dimlist b, dimlist c) {
  const dimlist ls[3] = {a, b, c};
  int64_t last = -1;
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < ls[k].n; i++) {
      int64_t d = ls[k].v[i];
      if (v->dims[d] == 1) continue;
      if (d < last) return false;
      last = d;
    }
  return true;
}

/* A dot operand as pack3 packs it into [B][R][C]; an f32 operand already
 * in that order is read in place (*owned false): no copy of a
 * weight-sized operand per dot and device.  With t given (the right-hand
 * side), an f32 operand in [B][C][R] order is read in place too, *t set.
 * The offset tables are made only for a copy. */
static void *operand_matrix(const hk_value *v, dimlist lb, dimlist lr, dimlist lc, acc_kind k, bool *f32,
                            bool *owned, bool *t) {
  bool f32_acc = k == ACC_F64 && v->elem == HK_F32, straight = in_place(v, lb, lr, lc);
  if (t) *t = f32_acc && !straight && in_place(v, lb, lc, lr);
  *owned = !(f32_acc && ((t && *t) || straight));
  if (!*owned) {
    *f32 = true;
    return v->data;
  }
  int64_t nb, nr, nc;
  int64_t *ob = dim_offsets(v, lb.n, lb.v, &nb), *orr = dim_offsets(v, lr.n, lr.v, &nr);
  int64_t *oc = dim_offsets(v, lc.n, lc.v, &nc);
  void *p = pack3(v, ob, nb, orr, nr, oc, nc, k, f32);
  free(ob);
  free(orr);
  free(oc);
  return p;
}

enum { BLK_I = 64, BLK_K = 256, BLK_J = 512, MR = 4, NR = 4 };

/* Two doubles: GCC/Clang vector extension, SIMD where the target has it. */
typedef double v2d __attribute__((vector_size(16)));

/* Copies rows r0..r0+nr (of length ld, columns c0..c0+nc) of M into
 * strips of `w` rows: P[strip][c - c0][w], zero past nr. */
static void pack_strips(mat M, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc, int w,
                        double *P) {
  for (int64_t s = 0; s < nr; s += w)
    for (int64_t c = 0; c < nc; c++)
      for (int r = 0; r < w; r++)
        *P++ = s + r < nr ? mat_at(M, (r0 + s + r) * ld + c0 + c) : 0.0;
}

/* B's block rows k0..k0+nk, columns j0..j0+nj as column strips:
 * P[strip][k][NR], zero past nj.  A transposed B (t) is read along its
 * rows, K apart. */
static void pack_b(mat B, int64_t K, int64_t N, int64_t k0, int64_t nk, int64_t j0, int64_t nj, double *P) {
  if (B.t) {
    for (int64_t s = 0; s < nj; s += NR, P += nk * NR)
      for (int c = 0; c < NR; c++) {
        const float *row = (const float *)B.p + B.off + (j0 + s + c) * K + k0;
        for (int64_t k = 0; k < nk; k++) P[k * NR + c] = s + c < nj ? (double)row[k] : 0.0;
      }
    return;
  }
  for (int64_t s = 0; s < nj; s += NR)
    for (int64_t k = 0; k < nk; k++)
      for (int c = 0; c < NR; c++)
        *P++ = s + c < nj ? mat_at(B, (k0 + k) * N + j0 + s + c) : 0.0;
}

/* C[MR][NR] block (rows mr, cols nr valid, row stride ldc) += a * b over
 * nk: a is [nk][MR], b is [nk][NR]; the block's sums stay in registers. */
static void micro_kernel(const double *restrict a, const double *restrict b, int64_t nk,
                         double *restrict C, int64_t ldc, int mr, int nr) {
  v2d c00 = {0, 0}, c01 = {0, 0}, c10 = {0, 0}, c11 = {0, 0};
  v2d c20 = {0, 0}, c21 = {0, 0}, c30 = {0, 0}, c31 = {0, 0};
  for (int64_t k = 0; k < nk; k++, a += MR, b += NR) {
    v2d b0, b1;
    memcpy(&b0, b, sizeof b0);
    memcpy(&b1, b + 2, sizeof b1);
    v2d a0 = {a[0], a[0]}, a1 = {a[1], a[1]}, a2 = {a[2], a[2]}, a3 = {a[3], a[3]};
    c00 += a0 * b0; c01 += a0 * b1;
    c10 += a1 * b0; c11 += a1 * b1;
    c20 += a2 * b0; c21 += a2 * b1;
    c30 += a3 * b0; c31 += a3 * b1;
  }
  double acc[MR][NR];
  memcpy(&acc[0][0], &c00, 16); memcpy(&acc[0][2], &c01, 16);
  memcpy(&acc[1][0], &c10, 16); memcpy(&acc[1][2], &c11, 16);
  memcpy(&acc[2][0], &c20, 16); memcpy(&acc[2][2], &c21, 16);
  memcpy(&acc[3][0], &c30, 16); memcpy(&acc[3][2], &c31, 16);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) C[i * ldc + j] += acc[i][j];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HK_HAVE_AVX2_KERNEL 1
typedef double v4d __attribute__((vector_size(32)));

/* The AVX2 variant: an 8 x 4 register block of 4-wide doubles (no FMA, so
 * every product and sum rounds as in micro_kernel: the same bits). */
__attribute__((target("avx2"))) static void micro_kernel_avx2(const double *restrict a,
                                                                const double *restrict b,
                                                                int64_t nk, double *restrict C,
                                                                int64_t ldc, int mr, int nr) {
  v4d c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0}, c6 = {0}, c7 = {0};
  for (int64_t k = 0; k < nk; k++, a += 8, b += NR) {
    v4d bk;
    memcpy(&bk, b, sizeof bk);
    c0 += (v4d){a[0], a[0], a[0], a[0]} * bk;
    c1 += (v4d){a[1], a[1], a[1], a[1]} * bk;
    c2 += (v4d){a[2], a[2], a[2], a[2]} * bk;
    c3 += (v4d){a[3], a[3], a[3], a[3]} * bk;
    c4 += (v4d){a[4], a[4], a[4], a[4]} * bk;
    c5 += (v4d){a[5], a[5], a[5], a[5]} * bk;
    c6 += (v4d){a[6], a[6], a[6], a[6]} * bk;
    c7 += (v4d){a[7], a[7], a[7], a[7]} * bk;
  }
  v4d c[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
  double acc[8][NR];
  memcpy(acc, c, sizeof acc);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) C[i * ldc + j] += acc[i][j];
}

/* The FMA variant, only for exact products (operands of 24 or fewer
 * significant bits: f32 and narrower): a*b is exact in double, so fma(a, b,
 * c) rounds exactly as a*b + c does - the same bits as the other kernels. */
__attribute__((target("avx2,fma"))) static void micro_kernel_fma(const double *restrict a,
                                                                   const double *restrict b,
                                                                   int64_t nk, double *restrict C,
                                                                   int64_t ldc, int mr, int nr) {
  __m256d c0 = _mm256_setzero_pd(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (int64_t k = 0; k < nk; k++, a += 8, b += NR) {
    __m256d bk = _mm256_loadu_pd(b);
    c0 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 0), bk, c0);
    c1 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 1), bk, c1);
    c2 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 2), bk, c2);
    c3 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 3), bk, c3);
    c4 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 4), bk, c4);
    c5 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 5), bk, c5);
    c6 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 6), bk, c6);
    c7 = _mm256_fmadd_pd(_mm256_broadcast_sd(a + 7), bk, c7);
  }
  double acc[8][NR];
  _mm256_storeu_pd(acc[0], c0); _mm256_storeu_pd(acc[1], c1);
  _mm256_storeu_pd(acc[2], c2); _mm256_storeu_pd(acc[3], c3);
  _mm256_storeu_pd(acc[4], c4); _mm256_storeu_pd(acc[5], c5);
  _mm256_storeu_pd(acc[6], c6); _mm256_storeu_pd(acc[7], c7);
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) C[i * ldc + j] += acc[i][j];
}

/* CPU features (libgcc reads them once, before main). */
static bool use_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static bool use_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* Row i of A (K long) as doubles into a. */
static void row_f64(mat A, int64_t i, int64_t K, double *restrict a) {
  if (A.f32) {
    const float *p = (const float *)A.p + A.off + i * K;
    for (int64_t k = 0; k < K; k++) a[k] = (double)p[k];
  } else {
    memcpy(a, (const double *)A.p + A.off + i * K, (size_t)K * sizeof(double));
  }
}

/* Sum over k of a[k] * b[k]: four double sums. */
static double dot_row(const double *restrict a, const float *restrict b, int64_t K) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    s0 += a[k] * (double)b[k];
    s1 += a[k + 1] * (double)b[k + 1];
    s2 += a[k + 2] * (double)b[k + 2];
    s3 += a[k + 3] * (double)b[k + 3];
  }
  for (; k < K; k++) s0 += a[k] * (double)b[k];
  return (s0 + s1) + (s2 + s3);
}

#ifdef HK_HAVE_AVX2_KERNEL
/* dot_row with eight double sums in two AVX registers; fused
 * multiply-adds only where products are exact in double (fma). */
__attribute__((target("avx2,fma"))) static double dot_row_avx2(const double *restrict a, const float *restrict b,
                                                               int64_t K, bool fma) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256d b0 = _mm256_cvtps_pd(_mm_loadu_ps(b + k)), b1 = _mm256_cvtps_pd(_mm_loadu_ps(b + k + 4));
    __m256d a0 = _mm256_loadu_pd(a + k), a1 = _mm256_loadu_pd(a + k + 4);
    if (fma) {
      s0 = _mm256_fmadd_pd(a0, b0, s0);
      s1 = _mm256_fmadd_pd(a1, b1, s1);
    } else {
      s0 = _mm256_add_pd(s0, _mm256_mul_pd(a0, b0));
      s1 = _mm256_add_pd(s1, _mm256_mul_pd(a1, b1));
    }
  }
  double t[4];
  _mm256_storeu_pd(t, _mm256_add_pd(s0, s1));
  double s = (t[0] + t[1]) + (t[2] + t[3]);
  for (; k < K; k++) s += a[k] * (double)b[k];
  return s;
}
#endif

/* C = A * B for fewer rows than a register block (a dot that is a
 * matrix-vector product: a sampled position's row): no panels, B read
 * once along its contiguous dim.  Transposed B: one dot product of two
 * contiguous rows per element, four double sums; else rows of B added
 * into C's row in contraction order. */
static void matmul_thin(mat A, mat B, double *restrict C, int64_t M, int64_t K, int64_t N, bool exact) {
#ifdef HK_HAVE_AVX2_KERNEL
  bool avx2 = use_avx2(), fma = exact && use_fma();
#else
  (void)exact;
#endif
  double *a = malloc((size_t)(K ? K : 1) * sizeof(double));
  if (!a) hk_out_of_memory();
  memset(C, 0, (size_t)(M * N) * sizeof(double));
  for (int64_t i = 0; i < M; i++) {
    row_f64(A, i, K, a);
    double *restrict c = C + i * N;
    if (B.t) {
      for (int64_t j = 0; j < N; j++) {
        const float *b = (const float *)B.p + B.off + j * K;
#ifdef HK_HAVE_AVX2_KERNEL
        if (avx2) {
          c[j] = dot_row_avx2(a, b, K, fma);
          continue;
        }
#endif
        c[j] = dot_row(a, b, K);
      }
      continue;
    }
    for (int64_t k = 0; k < K; k++) {
      double x = a[k];
      if (B.f32) {
        const float *b = (const float *)B.p + B.off + k * N;
        for (int64_t j = 0; j < N; j++) c[j] += x * (double)b[j];
      } else {
        const double *b = (const double *)B.p + B.off + k * N;
        for (int64_t j = 0; j < N; j++) c[j] += x * b[j];
      }
    }
  }
  free(a);
}

/* C[M][N] = A[M][K] * B[K][N] in double: blocks of BLK_K contraction
 * steps, packed panels, register blocks (MR x NR, or 8 x NR with AVX2).
 * Every C element adds its blocks' partial sums in contraction order. */
static void matmul_f64(mat A, mat B, double *restrict C, int64_t M, int64_t K, int64_t N,
                       bool exact_products) {
  if (M < MR) {
    matmul_thin(A, B, C, M, K, N, exact_products);
    return;
  }
  int mr = MR;
#ifdef HK_HAVE_AVX2_KERNEL
  bool fma = exact_products && use_fma();
  if (fma || use_avx2()) mr = 8;
#else
  (void)exact_products;
#endif
  memset(C, 0, (size_t)(M * N) * sizeof(double));
  int64_t kmax = K < BLK_K ? K : BLK_K, jmax = N < BLK_J ? N : BLK_J, imax = M < BLK_I ? M : BLK_I;
  double *Bp = malloc((size_t)(kmax * (jmax + NR) + 1) * sizeof(double));
  double *Ap = malloc((size_t)(kmax * (imax + 8) + 1) * sizeof(double));
  if (!Bp || !Ap) hk_out_of_memory();
  for (int64_t k0 = 0; k0 < K; k0 += BLK_K) {
    int64_t nk = K - k0 < BLK_K ? K - k0 : BLK_K;
    for (int64_t j0 = 0; j0 < N; j0 += BLK_J) {
      int64_t nj = N - j0 < BLK_J ? N - j0 : BLK_J;
      pack_b(B, K, N, k0, nk, j0, nj, Bp);
      for (int64_t i0 = 0; i0 < M; i0 += BLK_I) {
        int64_t ni = M - i0 < BLK_I ? M - i0 : BLK_I;
        pack_strips(A, K, i0, ni, k0, nk, mr, Ap);
        for (int64_t i = 0; i < ni; i += mr)
          for (int64_t j = 0; j < nj; j += NR) {
            int rows = ni - i < mr ? (int)(ni - i) : mr, cols = nj - j < NR ? (int)(nj - j) : NR;
            double *Cb = C + (i0 + i) * N + j0 + j;
#ifdef HK_HAVE_AVX2_KERNEL
            if (fma) {
              micro_kernel_fma(Ap + i * nk, Bp + j * nk, nk, Cb, N, rows, cols);
              continue;
            }
            if (mr == 8) {
              micro_kernel_avx2(Ap + i * nk, Bp + j * nk, nk, Cb, N, rows, cols);
              continue;
            }
#endif
            micro_kernel(Ap + i * nk, Bp + j * nk, nk, Cb, N, rows, cols);
          }
      }
    }
  }
  free(Bp);
  free(Ap);
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
  const char *v = ana_raw_attr(ins, "sparsity");
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
  dimlist lb = {(int)dn->lhs_batch.n, dn->lhs_batch.v}, lm = {nlf, lfree};
  dimlist lk = {(int)dn->lhs_contracting.n, dn->lhs_contracting.v};
  dimlist rb = {(int)dn->rhs_batch.n, dn->rhs_batch.v}, rn = {nrf, rfree};
  dimlist rk = {(int)dn->rhs_contracting.n, dn->rhs_contracting.v};
  int64_t B = dims_count(l, lb), M = dims_count(l, lm), K = dims_count(l, lk), N = dims_count(r, rn);
  hk_value *res = hk_value_for_shape_dims(ins->shape);
  hk_status *st = NULL;
  if (res->n != B * M * N) {
    st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "result has %lld elements, dot gives %lld",
                       (long long)res->n, (long long)(B * M * N));
  } else {
    acc_kind k = acc_of((hk_prim)res->elem, (hk_prim)l->elem, (hk_prim)r->elem);
    bool exact = exact_products((hk_prim)l->elem, (hk_prim)r->elem), af32, bf32, a_own, b_own, bt;
    void *A = operand_matrix(l, lb, lm, lk, k, &af32, &a_own, NULL);
    void *Bm = operand_matrix(r, rb, rk, rn, k, &bf32, &b_own, &bt);
    void *C = malloc((size_t)(M * N > 0 ? M * N : 1) * 8);
    if (!C) hk_out_of_memory();
    for (int64_t b = 0; b < B && !st; b++) {
      for (int64_t i0 = 0; i0 < M && !st; i0 += 256) {
        int64_t rows = M - i0 < 256 ? M - i0 : 256, a0 = b * M * K + i0 * K, b0 = b * K * N;
        if (k == ACC_F64)
          matmul_f64((mat){A, af32, a0, false}, (mat){Bm, bf32, b0, bt}, (double *)C + i0 * N, rows, K, N, exact);
        else
          matmul_int((const int64_t *)A + a0, (const int64_t *)Bm + b0, (int64_t *)C + i0 * N, rows, K, N);
        st = hk_eval_poll(d, ins);
      }
      store_block(res, b * M * N, C, M * N, k);
    }
    if (a_own) free(A);
    if (b_own) free(Bm);
    free(C);
  }
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

/* out[i] = v[offset of i-th index row-major over order], as floats or
 * doubles by the mat rules (out->p is malloc'ed). */
static void pack_ordered(const hk_value *v, const int64_t *order, int n, mat *out) {
  int64_t dims[HK_MAX_RANK], st[HK_MAX_RANK], idx[HK_MAX_RANK] = {0}, off = 0;
  order_strides(v, order, n, dims, st);
  bool f32 = fits_float((hk_prim)v->elem);
  void *p = malloc((size_t)(v->n ? v->n : 1) * (f32 ? sizeof(float) : sizeof(double)));
  if (!p) hk_out_of_memory();
  for (int64_t i = 0; i < v->n; i++) {
    if (f32) ((float *)p)[i] = (float)elem_f64(v, off);
    else ((double *)p)[i] = elem_f64(v, off);
    step_index(n, dims, st, idx, &off);
  }
  *out = (mat){p, f32, 0, false};
}

/* Writes p back in v's order, rounding once to v's type. */
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
  mat L;                           /* [B][input spatial][IZ] */
  mat K;                           /* [kernel spatial][IFG][OZ] */
  int64_t osd[HK_MAX_RANK], ksd[HK_MAX_RANK];
  int64_t in_sp, out_sp, k_sp, KK;  /* KK = k_sp * IFG */
  int64_t groups, ocols;           /* feature or batch groups; output features of one */
  bool exact;                      /* products exact in double (see exact_products) */
} im2col;

/* Kernel of group fg (a feature or a batch group) as a [k_sp * IFG][ocols]
 * matrix, rows in kernel index order (reversal applied). */
static double *group_kernel(const im2col *c, int64_t fg) {
  const conv_geom *g = c->g;
  double *Kg = malloc((size_t)(c->KK * c->ocols > 0 ? c->KK * c->ocols : 1) * sizeof(double));
  if (!Kg) hk_out_of_memory();
  int64_t k[HK_MAX_RANK];
  for (int64_t kp = 0; kp < c->k_sp; kp++) {
    unlinear(kp, g->ns, c->ksd, k);
    int64_t src = kernel_pos(g, c->rhs, k) * g->IFG * g->OZ + fg * c->ocols;
    for (int64_t z = 0; z < g->IFG; z++)
      for (int64_t o = 0; o < c->ocols; o++)
        Kg[(kp * g->IFG + z) * c->ocols + o] = mat_at(c->K, src + z * g->OZ + o);
  }
  return Kg;
}

/* True when the packed kernel already is the [k_sp * IFG][OZ] matrix of
 * the only group (no reversal). */
static bool kernel_as_is(const im2col *c) {
  if (c->groups != 1) return false;
  for (int s = 0; s < c->g->ns; s++)
    if (c->g->win->dims[s].reversal) return false;
  return true;
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
      int64_t src = (b * c->in_sp + ip) * g->IZ + feat0;
      if (ip < 0) memset(dst, 0, (size_t)g->IFG * sizeof(double));
      else if (c->L.f32) for (int64_t z = 0; z < g->IFG; z++) dst[z] = ((const float *)c->L.p)[src + z];
      else memcpy(dst, (const double *)c->L.p + src, (size_t)g->IFG * sizeof(double));
    }
  }
}

/* Rows r0..r0+rows of O (every group) straight from the packed operands,
 * without an im2col matrix: for groups too narrow for the dot kernel
 * (depthwise convolutions).  Sums in the im2col order (kernel position,
 * then input feature), skipping padding. */
static void direct_rows(const im2col *c, int64_t r0, int64_t rows, double *O) {
  const conv_geom *g = c->g;
  int64_t os[HK_MAX_RANK], k[HK_MAX_RANK];
  for (int64_t r = r0; r < r0 + rows; r++) {
    double *acc = O + r * g->OZ;
    unlinear(r % c->out_sp, g->ns, c->osd, os);
    memset(acc, 0, (size_t)g->OZ * sizeof(double));
    for (int64_t kp = 0; kp < c->k_sp; kp++) {
      unlinear(kp, g->ns, c->ksd, k);
      int64_t ip = input_pos(g, c->lhs, os, k);
      if (ip < 0) continue;
      int64_t kpos = kernel_pos(g, c->rhs, k) * g->IFG * g->OZ;
      for (int64_t fg = 0; fg < c->groups; fg++) {
        int64_t feat0 = g->G > 1 ? fg * g->IFG : 0, b = (g->BG > 1 ? fg * g->out_batch : 0) + r / c->out_sp;
        int64_t src = (b * c->in_sp + ip) * g->IZ + feat0, kb = kpos + fg * c->ocols;
        double *ag = acc + fg * c->ocols;
        for (int64_t z = 0; z < g->IFG; z++) {
          double x = mat_at(c->L, src + z);
          for (int64_t o = 0; o < c->ocols; o++) ag[o] += x * mat_at(c->K, kb + z * g->OZ + o);
        }
      }
    }
  }
}

/* O[R][OZ] = the convolution without im2col (narrow groups). */
static hk_status *direct_run(hk_device_ctx *d, const hk_instr *ins, const im2col *c, int64_t R,
                             double *O) {
  hk_status *st = NULL;
  for (int64_t r0 = 0; r0 < R && !st; r0 += 256) {
    direct_rows(c, r0, R - r0 < 256 ? R - r0 : 256, O);
    st = hk_eval_poll(d, ins);
  }
  return st;
}

/* O[B * out_sp][OZ] = the convolution, group by group, in row chunks
 * (B: the output batch): im2col + the dot kernel, or directly for narrow
 * groups. */
static hk_status *im2col_run(hk_device_ctx *d, const hk_instr *ins, const im2col *c, int64_t B,
                             double *O) {
  const conv_geom *g = c->g;
  int64_t R = B * c->out_sp;
  if (c->ocols < 2 * NR || c->KK < 2 * NR) return direct_run(d, ins, c, R, O);
  int64_t chunk = c->KK > 0 ? ((int64_t)1 << 20) / c->KK : 256;
  chunk = chunk < 16 ? 16 : chunk > 256 ? 256 : chunk;
  double *A = malloc((size_t)(chunk * c->KK > 0 ? chunk * c->KK : 1) * sizeof(double));
  double *Cm = malloc((size_t)(chunk * c->ocols > 0 ? chunk * c->ocols : 1) * sizeof(double));
  if (!A || !Cm) hk_out_of_memory();
  hk_status *st = NULL;
  for (int64_t fg = 0; fg < c->groups && !st; fg++) {
    double *Kg = kernel_as_is(c) ? NULL : group_kernel(c, fg);
    mat Km = Kg ? (mat){Kg, false, 0, false} : c->K;
    for (int64_t r0 = 0; r0 < R && !st; r0 += chunk) {
      int64_t rows = R - r0 < chunk ? R - r0 : chunk;
      fill_columns(c, fg, r0, rows, A);
      matmul_f64((mat){A, false, 0, false}, Km, Cm, rows, c->KK, c->ocols, c->exact);
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
  c.exact = exact_products((hk_prim)lhs->elem, (hk_prim)rhs->elem);
  c.groups = g->G * g->BG;
  c.ocols = g->OZ / c.groups;
  pack_ordered(lhs, lo, ns + 2, &c.L);
  pack_ordered(rhs, ko, ns + 2, &c.K);
  double *O = malloc((size_t)(res->n ? res->n : 1) * sizeof(double));
  if (!O) hk_out_of_memory();
  hk_status *st = im2col_run(d, ins, &c, res->dims[dn->output_batch], O);
  if (!st) unpack_f64(res, oo, ns + 2, O);
  free((void *)c.L.p);
  free((void *)c.K.p);
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
