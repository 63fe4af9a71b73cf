/* sample_ops.c - the sampled evaluator's arithmetic ops: entry parameters
 * (a pure function of the global index), constants, iota, device ids, and
 * elementwise, dot, convolution, reduce, reduce-window and sort computed on
 * a box by the dense evaluator's kernels through a box-shaped "shadow" of
 * the instruction. */
#include "analysis/analysis_internal.h"
#include "eval/sample_internal.h"

/* ---- parameters ----------------------------------------------------------- */

static uint64_t splitmix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* f32 elements base .. base + n - 1 of a parameter's stream into o: the
 * value of index i is splitmix(base + i) scaled to [-1, 1]. */
static void random_f32_row(float *o, int64_t n, uint64_t base) {
  for (int64_t j = 0; j < n; j++)
    o[j] = (float)((double)(splitmix(base + (uint64_t)j) >> 11) * (2.0 / 9007199254740992.0) - 1);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HK_HAVE_AVX512_RANDOM 1
/* random_f32_row eight elements at a time (64-bit multiplies and the
 * unsigned conversion are AVX-512DQ's); the same values bit for bit. */
__attribute__((target("avx512f,avx512dq"))) static void random_f32_row_avx512(float *o, int64_t n,
                                                                              uint64_t base) {
  const __m512i step = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i c0 = _mm512_set1_epi64((long long)0x9e3779b97f4a7c15ULL);
  const __m512i c1 = _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ULL);
  const __m512i c2 = _mm512_set1_epi64((long long)0x94d049bb133111ebULL);
  const __m512d scale = _mm512_set1_pd(2.0 / 9007199254740992.0), one = _mm512_set1_pd(1.0);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m512i z = _mm512_add_epi64(_mm512_add_epi64(_mm512_set1_epi64((long long)(base + (uint64_t)j)), step), c0);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    __m512d u = _mm512_cvtepu64_pd(_mm512_srli_epi64(z, 11));
    _mm256_storeu_ps(o + j, _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_mul_pd(u, scale), one)));
  }
  random_f32_row(o + j, n - j, base + (uint64_t)j);
}
#endif

/* The fill of entry parameters' f32 rows (CPU features read once by
 * libgcc, before main). */
static void fill_f32_row(float *o, int64_t n, uint64_t base) {
#ifdef HK_HAVE_AVX512_RANDOM
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
    random_f32_row_avx512(o, n, base);
    return;
  }
#endif
  random_f32_row(o, n, base);
}

/* Floats uniform in [-1, 1], signed ints in [-8, 8], unsigned in [0, 8],
 * pred random: the ranges hk_value_random uses. */
static void random_element(hk_value *v, int64_t i, uint64_t u) {
  hk_prim p = (hk_prim)v->elem;
  double unit = (double)(u >> 11) * (1.0 / 9007199254740992.0);
  if (p == HK_F32) ((float *)v->data)[i] = (float)(unit * 2 - 1);
  else if (hk_prim_is_complex(p))
    hk_value_set_c(v, i, unit * 2 - 1, (double)(splitmix(u) >> 11) * (2.0 / 9007199254740992.0) - 1);
  else if (hk_prim_is_float(p)) hk_value_set_f64(v, i, unit * 2 - 1);
  else if (hk_prim_is_signed_int(p)) hk_value_set_i64(v, i, (int64_t)(u % 17) - 8);
  else if (p == HK_PRED) hk_value_set_i64(v, i, (int64_t)(u & 1));
  else hk_value_set_i64(v, i, (int64_t)(u % 9));
}

/* Offset of this device's piece of entry parameter num (leaf) in the
 * global value. */
static hk_status *param_offset(se_ctx *x, const se_frame *f, const hk_instr *ins, int num, int leaf,
                               const hk_shape *gs, int64_t *off) {
  for (int d = 0; d < gs->rank; d++) off[d] = 0;
  const hk_sharding *s = x->partitioned ? x->param_sharding[num] : NULL;
  s = hk_eval_leaf_sharding(s, leaf);
  if (!s || s->kind != HK_SHARDING_TILED) return NULL;
  int64_t tmp[HK_MAX_RANK];
  if (!hk_sharding_tile_offset(s, gs, f->partition, tmp))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "parameter sharding does not fit the global shape");
  for (int d = 0; d < gs->rank; d++) off[d] = tmp[d];
  return NULL;
}

hk_status *se_op_parameter_entry(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                 const se_box *b, hk_value **out) {
  int num = (int)hk_instr_parameter_number(ins);
  if (num < 0 || num >= x->global->entry->n_params)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "no global parameter %d", num);
  const hk_shape *gs = se_leaf_shape(x->global->entry->params[num]->shape, leaf);
  const hk_shape *ls = se_leaf_shape(ins->shape, leaf);
  if (!gs || gs->rank != ls->rank || gs->elem != ls->elem)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "parameter %d leaf %d does not match the global one", num, leaf);
  int64_t off[SE_MAX_RANK], gst[SE_MAX_RANK], idx[SE_MAX_RANK] = {0};
  HK_TRY(param_offset(x, f, ins, num, leaf, gs, off));
  hk_strides(gs->rank, gs->dims, gst);
  uint64_t stream = splitmix(x->seed ^ splitmix((uint64_t)num * 0x10001ULL + (uint64_t)leaf + 1));
  hk_value *v = se_value_of_box((hk_prim)ls->elem, b);
  /* Row by row along the last dim (its global stride is 1): entry
   * parameters are made again for every big box a dot reads in slices, so
   * this loop is hot. */
  int last = b->rank - 1;
  int64_t row = b->rank ? b->n[last] : 1, rows = row ? v->n / row : 0;
  for (int64_t r = 0, i = 0; r < rows; r++, i += row) {
    int64_t lin = 0, g_last = b->rank ? off[last] + b->lo[last] : 0;
    bool inside = true;
    for (int d = 0; d < last; d++) {
      int64_t g = off[d] + b->lo[d] + idx[d];
      inside &= g < gs->dims[d];
      lin += g * gst[d];
    }
    int64_t n_in = !inside ? 0 : b->rank == 0 ? 1 : gs->dims[last] - g_last < row ? gs->dims[last] - g_last : row;
    lin += g_last;
    if (v->elem == HK_F32) {
      fill_f32_row((float *)v->data + i, n_in, stream + (uint64_t)lin);
    } else {
      for (int64_t j = 0; j < n_in; j++) random_element(v, i + j, splitmix(stream + (uint64_t)(lin + j)));
    }
    for (int d = last - 1; d >= 0; d--) {
      if (++idx[d] < b->n[d]) break;
      idx[d] = 0;
    }
  }
  *out = v;
  return NULL;
}

/* ---- constants, iota, ids ---------------------------------------------------- */

static bool box_is_full(const se_box *b, const hk_shape *s) {
  for (int d = 0; d < b->rank; d++)
    if (b->lo[d] != 0 || b->n[d] != s->dims[d]) return false;
  return true;
}

hk_status *se_op_constant(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                          hk_value **out) {
  const hk_shape *ls = se_leaf_shape(ins->shape, leaf);
  if (!box_is_full(b, ls)) {
    se_box full;
    se_box_full(&full, ls);
    hk_value *whole;
    HK_TRY(se_eval(x, f, ins, leaf, &full, &whole));
    hk_value *v = se_value_of_box((hk_prim)ls->elem, b);
    se_copy_box(v, b, whole, &full);
    hk_value_release(whole);
    *out = v;
    return NULL;
  }
  const hk_literal *l = ins->attrs ? ins->attrs->literal : NULL;
  if (l && l->shape->elem == HK_TUPLE) l = leaf < l->n_elems ? l->elems[leaf] : NULL;
  if (!l) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "constant without a literal");
  return hk_value_from_literal(l, out);
}

hk_status *se_op_iota(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                      hk_value **out) {
  (void)x, (void)f, (void)leaf;
  int dim = ins->n_dims == 1 ? (int)ins->dims[0] : -1;
  if (dim < 0 || dim >= b->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad iota dimension");
  hk_value *v = se_value_of_box((hk_prim)ins->shape->elem, b);
  bool fl = hk_prim_is_float((hk_prim)v->elem);
  int64_t idx[SE_MAX_RANK] = {0};
  for (int64_t i = 0; i < v->n; i++) {
    int64_t k = b->lo[dim] + idx[dim];
    if (fl) hk_value_set_f64(v, i, (double)k);
    else hk_value_set_i64(v, i, k);
    for (int d = b->rank - 1; d >= 0; d--) {
      if (++idx[d] < b->n[d]) break;
      idx[d] = 0;
    }
  }
  *out = v;
  return NULL;
}

hk_status *se_op_device_id(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                           hk_value **out) {
  (void)x, (void)leaf;
  hk_value *v = se_value_of_box((hk_prim)ins->shape->elem, b);
  hk_value_set_i64(v, 0, ins->opcode == HK_OP_PARTITION_ID ? f->partition : f->replica);
  *out = v;
  return NULL;
}

/* ---- elementwise ----------------------------------------------------------------- */

/* Runs a dense kernel on box-shaped operands through a shadow of ins whose
 * shape is `shape`. */
static hk_status *run_shadow(se_ctx *x, const hk_instr *ins, const hk_shape *shape, hk_attrs *attrs,
                             hk_op_fn fn, hk_value *const *ops, hk_value **out) {
  hk_instr sh = *ins;
  sh.shape = shape;
  if (attrs) sh.attrs = attrs;
  return fn(&x->dev, &sh, ops, out);
}

static void release_all(hk_value **v, int n) {
  for (int i = 0; i < n; i++) hk_value_release(v[i]);
}

hk_status *se_op_elementwise(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                             const se_box *b, hk_value **out) {
  (void)leaf;
  if (ins->n_operands > 3) return hk_eval_error(ins, HK_UNIMPLEMENTED, "more than 3 operands");
  hk_value *ops[3] = {0};
  se_box scalar = {0};
  hk_status *st = NULL;
  for (int k = 0; k < ins->n_operands && !st; k++) {
    const hk_shape *os = ins->operands[k]->shape;
    if (os->elem == HK_TUPLE) st = hk_eval_error(ins, HK_INVALID_ARGUMENT, "tuple operand");
    else st = se_operand(x, f, ins, k, os->rank == 0 ? &scalar : b, &ops[k]);
  }
  if (!st) {
    const hk_shape *shape = se_box_shape(x, (hk_prim)ins->shape->elem, b);
    hk_op_fn fn = ins->opcode == HK_OP_CONVERT ? hk_op_convert
                  : ins->opcode == HK_OP_STOCHASTIC_CONVERT ? hk_op_stochastic_convert
                  : ins->opcode == HK_OP_BITCAST_CONVERT ? hk_op_bitcast_convert
                                                        : hk_op_elementwise;
    if (ins->opcode == HK_OP_BITCAST_CONVERT && ins->operands[0]->shape->rank != ins->shape->rank)
      st = hk_eval_error(ins, HK_UNIMPLEMENTED, "sampled bitcast-convert between element sizes");
    else st = run_shadow(x, ins, shape, NULL, fn, ops, out);
  }
  release_all(ops, ins->n_operands);
  return st;
}

/* ---- dot ---------------------------------------------------------------------------- */

/* Box of one dot operand: batch dims from the result's leading dims,
 * contracting dims whole, free dims from the result starting at `free0`. */
static void dot_operand_box(const hk_shape *s, hk_i64s batch, hk_i64s contracting, int free0,
                            const se_box *b, se_box *ob) {
  ob->rank = s->rank;
  int nf = 0, pos;
  for (int d = 0; d < s->rank; d++) {
    if ((pos = hk_i64_index(batch.v, batch.n, d)) >= 0) {
      ob->lo[d] = b->lo[pos];
      ob->n[d] = b->n[pos];
    } else if (hk_i64s_has(contracting, d)) {
      ob->lo[d] = 0;
      ob->n[d] = s->dims[d];
    } else {
      ob->lo[d] = b->lo[free0 + nf];
      ob->n[d] = b->n[free0 + nf];
      nf++;
    }
  }
}

/* An operand box above this many elements is read in slices of the
 * largest contracting dim, each folded into double sums and dropped, so a
 * dot never holds a whole weight-sized operand (check's reference on each
 * MPI rank then holds about a slice, not the global weights). */
enum { DOT_CHUNK_ELEMENTS = 1 << 18 };

/* The contracting pair (lhs dim *ld, rhs dim *rd) along which to slice and
 * the indices per slice; 0 when the dot needs no slicing. */
static int64_t dot_chunk_step(const hk_dot_dnums *dn, const se_box *lb, const se_box *rb, int *ld, int *rd) {
  int64_t biggest = se_box_count(lb) > se_box_count(rb) ? se_box_count(lb) : se_box_count(rb);
  if (biggest <= DOT_CHUNK_ELEMENTS || dn->lhs_contracting.n == 0) return 0;
  int best = 0;
  for (int i = 1; i < dn->lhs_contracting.n; i++)
    if (lb->n[dn->lhs_contracting.v[i]] > lb->n[dn->lhs_contracting.v[best]]) best = i;
  *ld = (int)dn->lhs_contracting.v[best];
  *rd = (int)dn->rhs_contracting.v[best];
  int64_t k = lb->n[*ld], per_index = k ? biggest / k : biggest;
  int64_t step = per_index ? DOT_CHUNK_ELEMENTS / per_index : k;
  return step < 1 ? 1 : step >= k ? 0 : step;
}

/* A float dot over slices [lo, lo + step) of the contracting pair, the
 * partial products summed in double and rounded once to the result type. */
static hk_status *dot_in_chunks(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b, const se_box *lb,
                                const se_box *rb, int ld, int rd, int64_t step, hk_value **out) {
  int64_t n = se_box_count(b);
  double *acc = calloc((size_t)(n ? n : 1), sizeof(double));
  if (!acc) hk_out_of_memory();
  hk_status *st = NULL;
  for (int64_t lo = 0; lo < lb->n[ld] && !st; lo += step) {
    se_box lc = *lb, rc = *rb;
    lc.lo[ld] = lb->lo[ld] + lo;
    rc.lo[rd] = rb->lo[rd] + lo;
    lc.n[ld] = rc.n[rd] = lo + step < lb->n[ld] ? step : lb->n[ld] - lo;
    hk_value *ops[2] = {0}, *part = NULL;
    st = se_operand(x, f, ins, 0, &lc, &ops[0]);
    if (!st) st = se_operand(x, f, ins, 1, &rc, &ops[1]);
    if (!st) st = run_shadow(x, ins, se_box_shape(x, HK_F64, b), NULL, hk_op_dot, ops, &part);
    for (int64_t i = 0; !st && i < n; i++) acc[i] += ((const double *)part->data)[i];
    hk_value_release(part);
    release_all(ops, 2);
    se_ctx_trim(x);
  }
  if (!st) {
    *out = se_value_of_box((hk_prim)ins->shape->elem, b);
    for (int64_t i = 0; i < n; i++) hk_value_set_f64(*out, i, acc[i]);
  }
  free(acc);
  return st;
}

/* Operand boxes of a dot's parts stay within this many elements: a part's
 * operands then stay in cache between being made and being multiplied. */
enum { DOT_PART_ELEMENTS = 1 << 16 };

/* The result dim to split b along so that the bigger operand's box of
 * each part stays within DOT_PART_ELEMENTS (-1: none needed or none
 * possible), and the part's extent along it.  The dim is a batch or free
 * dim of the bigger operand (a free dim of the other one leaves the bigger
 * box whole), the widest; each part is then an independent dot over
 * whole contracting rows, computed and rounded exactly as the whole box. */
static int dot_result_split(const hk_dot_dnums *dn, int lfree, const se_box *b, const se_box *lb,
                            const se_box *rb, int64_t *step) {
  int64_t nl = se_box_count(lb), nr = se_box_count(rb), big = nl > nr ? nl : nr;
  if (big <= DOT_PART_ELEMENTS) return -1;
  bool lhs_big = nl >= nr;
  int nb = (int)dn->lhs_batch.n, rfree = b->rank - nb - lfree;
  int lo_free = lhs_big ? nb : nb + lfree, n_free = lhs_big ? lfree : rfree, best = -1;
  for (int d = 0; d < b->rank; d++) {
    bool in_big = d < nb || (d >= lo_free && d < lo_free + n_free);
    if (in_big && b->n[d] > 1 && (best < 0 || b->n[d] > b->n[best])) best = d;
  }
  if (best < 0) return -1;
  int64_t per = big / b->n[best];
  *step = per ? DOT_PART_ELEMENTS / per : b->n[best];
  if (*step < 1) *step = 1;
  return *step >= b->n[best] ? -1 : best;
}

static hk_status *dot_box(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b, hk_value **out);

/* The dot over b as parts along result dim d, each copied into place. */
static hk_status *dot_in_parts(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b, int d,
                               int64_t step, hk_value **out) {
  hk_value *v = se_value_of_box((hk_prim)ins->shape->elem, b);
  hk_status *st = NULL;
  for (int64_t lo = 0; lo < b->n[d] && !st; lo += step) {
    se_box pb = *b;
    pb.lo[d] = b->lo[d] + lo;
    pb.n[d] = lo + step < b->n[d] ? step : b->n[d] - lo;
    hk_value *part = NULL;
    se_part_begin(x);
    st = dot_box(x, f, ins, &pb, &part);
    se_part_end(x);
    if (!st) se_copy_box(v, b, part, &pb);
    hk_value_release(part);
  }
  if (st) hk_value_release(v);
  else *out = v;
  return st;
}

hk_status *se_op_dot(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                     hk_value **out) {
  (void)leaf;
  if (ins->n_operands != 2) return hk_eval_error(ins, HK_UNIMPLEMENTED, "sparse dot");
  return dot_box(x, f, ins, b, out);
}

static hk_status *dot_box(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *b, hk_value **out) {
  static const hk_dot_dnums empty;
  const hk_dot_dnums *dn = ins->attrs && ins->attrs->dot ? ins->attrs->dot : &empty;
  const hk_shape *ls = ins->operands[0]->shape, *rs = ins->operands[1]->shape;
  int lfree = ls->rank - dn->lhs_batch.n - dn->lhs_contracting.n;
  se_box lb, rb;
  dot_operand_box(ls, dn->lhs_batch, dn->lhs_contracting, dn->lhs_batch.n, b, &lb);
  dot_operand_box(rs, dn->rhs_batch, dn->rhs_contracting, dn->rhs_batch.n + lfree, b, &rb);
  int64_t pstep = 0;
  int pd = dot_result_split(dn, lfree, b, &lb, &rb, &pstep);
  if (pd >= 0) return dot_in_parts(x, f, ins, b, pd, pstep, out);
  int ld = 0, rd = 0;
  int64_t step = hk_prim_is_float((hk_prim)ins->shape->elem) ? dot_chunk_step(dn, &lb, &rb, &ld, &rd) : 0;
  if (step) return dot_in_chunks(x, f, ins, b, &lb, &rb, ld, rd, step, out);
  hk_value *ops[2] = {0};
  hk_status *st = se_operand(x, f, ins, 0, &lb, &ops[0]);
  if (!st) st = se_operand(x, f, ins, 1, &rb, &ops[1]);
  /* The dense kernel accumulates every float dot in double and rounds
   * once (the global and the partitioned sums then differ only where the
   * partitioned program rounds partial sums); f32 operands are read in
   * place, not widened: a weight-sized operand is held once, not thrice. */
  if (!st) st = run_shadow(x, ins, se_box_shape(x, (hk_prim)ins->shape->elem, b), NULL, hk_op_dot, ops, out);
  release_all(ops, 2);
  return st;
}

/* ---- windows ------------------------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* The operand range along one dim that outputs [o0, o0 + n) read through
 * window dim w, and the window re-based on it (padding shifted). */
static void window_range(const hk_window_dim *w, int64_t o0, int64_t n, int64_t dim, int64_t *lo,
                         int64_t *cnt, hk_window_dim *shadow) {
  int64_t stride = w->stride ? w->stride : 1, bd = w->base_dilation ? w->base_dilation : 1;
  int64_t wd = w->window_dilation ? w->window_dilation : 1;
  int64_t size = w->size ? w->size : 1;
  int64_t dlo = o0 * stride - w->pad_lo, dhi = (o0 + n - 1) * stride - w->pad_lo + (size - 1) * wd;
  int64_t p0 = ceil_div(dlo, bd), p1 = floor_div(dhi, bd);
  if (p0 < 0) p0 = 0;
  if (p1 > dim - 1) p1 = dim - 1;
  *lo = p0 <= p1 ? p0 : 0;
  *cnt = p0 <= p1 ? p1 - p0 + 1 : 0;
  *shadow = *w;
  shadow->pad_lo = w->pad_lo - o0 * stride + *lo * bd;
}

/* Narrows shadow window dim w (re-based by window_range on an input
 * range of cnt elements, outputs 0 .. n - 1) to the window positions that
 * land on that input for some output, and the kernel's box along that dim
 * (kernel dim of size ksize, box *klo, *kn) to the kernel elements those
 * positions read (reversed windows read them from the far end).  A
 * sampled output row then reads only the taps that touch it (a dot in
 * the guise of a padded convolution reads one tap, not the whole kernel). */
static void kernel_range(hk_window_dim *w, int64_t n, int64_t cnt, int64_t ksize, int64_t *klo, int64_t *kn) {
  if (cnt <= 0 || n <= 0 || ksize <= 0) return;
  int64_t stride = w->stride ? w->stride : 1, bd = w->base_dilation ? w->base_dilation : 1;
  int64_t wd = w->window_dilation ? w->window_dilation : 1;
  /* Position k touches the input when some o in [0, n) has
   * 0 <= o * stride - pad_lo + k * wd <= (cnt - 1) * bd. */
  int64_t k0 = ceil_div(w->pad_lo - (n - 1) * stride, wd), k1 = floor_div((cnt - 1) * bd + w->pad_lo, wd);
  if (k0 < 0) k0 = 0;
  if (k1 > ksize - 1) k1 = ksize - 1;
  if (k0 > k1 || (k0 == 0 && k1 == ksize - 1)) return;
  *klo += w->reversal ? ksize - 1 - k1 : k0;
  *kn = k1 - k0 + 1;
  w->pad_lo -= k0 * wd;
  w->size = *kn;
}

static hk_window *shadow_window(se_ctx *x, const hk_window *w) {
  hk_window *s = hk_alloc(x->scratch, sizeof *s);
  hk_window_dim *d = hk_alloc(x->scratch, sizeof *d * (size_t)(w->n_dims ? w->n_dims : 1));
  if (w->n_dims) memcpy(d, w->dims, sizeof *d * (size_t)w->n_dims);
  s->n_dims = w->n_dims;
  s->dims = d;
  return s;
}

static hk_status *crop(hk_value *whole, const se_box *wb, const se_box *b, hk_value **out) {
  hk_value *v = se_value_of_box((hk_prim)whole->elem, b);
  se_copy_box(v, b, whole, wb);
  hk_value_release(whole);
  *out = v;
  return NULL;
}

hk_status *se_op_convolution(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                             const se_box *b, hk_value **out) {
  (void)leaf;
  const hk_attrs *at = ins->attrs;
  if (!at || !at->conv) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "convolution without dim_labels");
  const hk_conv_dnums *dn = at->conv;
  static const hk_window no_window;   /* no spatial dims */
  const hk_window *window = at->window ? at->window : &no_window;
  if (window->n_dims != dn->n_spatial)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "window has %d dims, %d spatial dims", window->n_dims, dn->n_spatial);
  const hk_shape *is = ins->operands[0]->shape, *ks = ins->operands[1]->shape, *os = ins->shape;
  int64_t G = at->feature_group_count > 0 ? at->feature_group_count : 1;
  int64_t BG = at->batch_group_count > 0 ? at->batch_group_count : 1;
  se_box wb = *b;   /* the result box actually computed */
  if (G > 1 || BG > 1) {
    wb.lo[dn->output_feature] = 0;
    wb.n[dn->output_feature] = os->dims[dn->output_feature];
  }
  if (BG > 1) {
    wb.lo[dn->output_batch] = 0;
    wb.n[dn->output_batch] = os->dims[dn->output_batch];
  }
  se_box ib, kb;
  se_box_full(&ib, is);
  se_box_full(&kb, ks);
  if (BG == 1) {
    ib.lo[dn->input_batch] = wb.lo[dn->output_batch];
    ib.n[dn->input_batch] = wb.n[dn->output_batch];
  }
  if (G == 1 && BG == 1) {
    kb.lo[dn->kernel_output_feature] = wb.lo[dn->output_feature];
    kb.n[dn->kernel_output_feature] = wb.n[dn->output_feature];
  }
  hk_window *win = shadow_window(x, window);
  for (int s = 0; s < dn->n_spatial; s++) {
    int64_t od = dn->output_spatial[s], id = dn->input_spatial[s];
    window_range(&window->dims[s], wb.lo[od], wb.n[od], is->dims[id], &ib.lo[id], &ib.n[id],
                 (hk_window_dim *)&win->dims[s]);
    int64_t kd = dn->kernel_spatial[s];
    kernel_range((hk_window_dim *)&win->dims[s], wb.n[od], ib.n[id], ks->dims[kd], &kb.lo[kd], &kb.n[kd]);
  }
  hk_attrs sa = *at;
  sa.window = win;
  hk_value *ops[2] = {0}, *res = NULL;
  hk_status *st = se_operand(x, f, ins, 0, &ib, &ops[0]);
  if (!st) st = se_operand(x, f, ins, 1, &kb, &ops[1]);
  if (!st) st = run_shadow(x, ins, se_box_shape(x, (hk_prim)os->elem, &wb), &sa, hk_op_convolution, ops, &res);
  release_all(ops, 2);
  if (st) return st;
  return crop(res, &wb, b, out);
}

/* The leaf of a (possibly tuple) result value; takes over r. */
static hk_value *take_leaf(hk_value *r, int leaf) {
  if (r->elem != HK_TUPLE) return r;
  hk_value *v = hk_value_retain(r->elems[leaf]);
  hk_value_release(r);
  return v;
}

/* Result shape of a variadic op over box b: a tuple when ins has one. */
static const hk_shape *variadic_shape(se_ctx *x, const hk_instr *ins, const se_box *b) {
  if (ins->shape->elem != HK_TUPLE) return se_box_shape(x, (hk_prim)ins->shape->elem, b);
  const hk_shape *e[16];
  int n = ins->shape->n_tuple < 16 ? ins->shape->n_tuple : 16;
  for (int i = 0; i < n; i++) e[i] = se_box_shape(x, (hk_prim)ins->shape->tuple[i]->elem, b);
  return hk_shape_tuple(x->scratch, n, e);
}

hk_status *se_op_reduce_window(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                               const se_box *b, hk_value **out) {
  int N = ins->n_operands / 2;
  const hk_window *w = ins->attrs ? ins->attrs->window : NULL;
  if (N < 1 || N > 8 || !w || w->n_dims != b->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad reduce-window operands or window");
  const hk_shape *is = ins->operands[0]->shape;
  se_box ib;
  ib.rank = is->rank;
  hk_window *sw = shadow_window(x, w);
  for (int d = 0; d < is->rank; d++)
    window_range(&w->dims[d], b->lo[d], b->n[d], is->dims[d], &ib.lo[d], &ib.n[d], (hk_window_dim *)&sw->dims[d]);
  hk_attrs sa = *ins->attrs;
  sa.window = sw;
  hk_value *ops[16] = {0}, *res = NULL;
  se_box scalar = {0};
  hk_status *st = NULL;
  for (int k = 0; k < 2 * N && !st; k++) st = se_operand(x, f, ins, k, k < N ? &ib : &scalar, &ops[k]);
  if (!st) st = run_shadow(x, ins, variadic_shape(x, ins, b), &sa, hk_op_reduce_window, ops, &res);
  release_all(ops, 2 * N);
  if (st) return st;
  *out = take_leaf(res, leaf);
  return NULL;
}

/* The source windows (range w0 .. w0 + nw - 1) that cover operand
 * positions [lo, lo + n) along one dim, and the operand range they span. */
static void covering_windows(const hk_window_dim *w, int64_t lo, int64_t n, int64_t n_src, int64_t dim,
                             int64_t *w0, int64_t *nw, int64_t *r0, int64_t *nr) {
  int64_t s = w->stride ? w->stride : 1, wd = w->window_dilation ? w->window_dilation : 1;
  int64_t size = w->size ? w->size : 1;
  int64_t a = ceil_div(lo + w->pad_lo - (size - 1) * wd, s), b = floor_div(lo + n - 1 + w->pad_lo, s);
  if (a < 0) a = 0;
  if (b > n_src - 1) b = n_src - 1;
  *w0 = a <= b ? a : 0;
  *nw = a <= b ? b - a + 1 : 0;
  int64_t p0 = *w0 * s - w->pad_lo, p1 = (*w0 + *nw - 1) * s - w->pad_lo + (size - 1) * wd;
  if (p0 < 0) p0 = 0;
  if (p1 > dim - 1) p1 = dim - 1;
  *r0 = *nw && p0 <= p1 ? p0 : 0;
  *nr = *nw && p0 <= p1 ? p1 - p0 + 1 : 0;
}

/* The result box b gets contributions from the windows covering it; those
 * windows' selections need the operand region they span. */
hk_status *se_op_select_and_scatter(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf,
                                    const se_box *b, hk_value **out) {
  (void)leaf;
  const hk_window *w = ins->attrs ? ins->attrs->window : NULL;
  const hk_shape *os = ins->operands[0]->shape, *ss = ins->operands[1]->shape;
  if (!w || w->n_dims != b->rank || ss->rank != b->rank || ins->n_operands != 3)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad window or operands");
  se_box region, src, scalar = {0};
  region.rank = src.rank = b->rank;
  hk_window *sw = shadow_window(x, w);
  for (int d = 0; d < b->rank; d++) {
    if (w->dims[d].base_dilation > 1)
      return hk_eval_error(ins, HK_UNIMPLEMENTED, "sampled select-and-scatter with base dilation");
    covering_windows(&w->dims[d], b->lo[d], b->n[d], ss->dims[d], os->dims[d], &src.lo[d], &src.n[d],
                     &region.lo[d], &region.n[d]);
    int64_t s = w->dims[d].stride ? w->dims[d].stride : 1;
    ((hk_window_dim *)sw->dims)[d].pad_lo = w->dims[d].pad_lo - src.lo[d] * s + region.lo[d];
  }
  hk_attrs sa = *ins->attrs;
  sa.window = sw;
  hk_value *ops[3] = {0}, *res = NULL;
  hk_status *st = se_operand(x, f, ins, 2, &scalar, &ops[2]);
  bool any = se_box_count(&src) > 0 && se_box_count(&region) > 0;
  if (!st && any) st = se_operand(x, f, ins, 0, &region, &ops[0]);
  if (!st && any) st = se_operand(x, f, ins, 1, &src, &ops[1]);
  if (!st && any)
    st = run_shadow(x, ins, se_box_shape(x, (hk_prim)ins->shape->elem, &region), &sa,
                    hk_op_select_and_scatter, ops, &res);
  if (!st) {
    /* Elements no window reaches keep the init value. */
    hk_value *v = se_value_of_box((hk_prim)ins->shape->elem, b);
    int es = hk_esize(v->elem);
    for (int64_t i = 0; i < v->n; i++) memcpy((uint8_t *)v->data + i * es, ops[2]->data, (size_t)es);
    if (res) se_copy_box(v, b, res, &region);
    *out = v;
  }
  hk_value_release(res);
  release_all(ops, 3);
  return st;
}

/* ---- reduce and sort ------------------------------------------------------------------ */

/* Operand elements one reduce request reads at once; larger reductions
 * (whose operands may themselves be dots over large boxes) go in chunks. */
enum { REDUCE_CHUNK = 4096 };

/* How a reduce (with reduced dims) over operand box ib goes in chunks:
 * along its largest reduced dim (*big), `step` indices of it per chunk, so
 * a chunk holds about REDUCE_CHUNK elements. */
static int64_t reduce_chunk_step(const hk_instr *ins, const se_box *ib, int *big) {
  int d = (int)ins->dims[0];
  for (int i = 1; i < ins->n_dims; i++)
    if (ib->n[ins->dims[i]] > ib->n[d]) d = (int)ins->dims[i];
  *big = d;
  int64_t per_slice = ib->n[d] ? se_box_count(ib) / ib->n[d] : 1;
  int64_t step = REDUCE_CHUNK / (per_slice ? per_slice : 1);
  return step < 1 ? 1 : step;
}

/* Indices [lo, lo + step) of ib along dim big (clipped to ib). */
static se_box reduce_chunk(const se_box *ib, int big, int64_t lo, int64_t step) {
  se_box cb = *ib;
  cb.lo[big] = ib->lo[big] + lo;
  cb.n[big] = lo + step < ib->n[big] ? step : ib->n[big] - lo;
  return cb;
}

/* A reduce with an add/mul/max/min reducer (init taken as its identity)
 * over operand box ib, in chunks along the largest reduced dim, the
 * partial results folded together. */
static hk_status *reduce_in_chunks(se_ctx *x, se_frame *f, const hk_instr *ins, hk_reducer_kind kind,
                                   const se_box *ib, const se_box *b, hk_value **out) {
  int big;
  int64_t step = reduce_chunk_step(ins, ib, &big);
  hk_value *acc = NULL;
  hk_status *st = NULL;
  for (int64_t lo = 0; lo < ib->n[big] && !st; lo += step) {
    se_box cb = reduce_chunk(ib, big, lo, step);
    hk_value *ops[2] = {0}, *part = NULL;
    se_box scalar = {0};
    st = se_operand(x, f, ins, 0, &cb, &ops[0]);
    if (!st) st = se_operand(x, f, ins, 1, &scalar, &ops[1]);
    if (!st) st = run_shadow(x, ins, se_box_shape(x, (hk_prim)ins->shape->elem, b), NULL, hk_op_reduce, ops, &part);
    release_all(ops, 2);
    if (!st && !acc) {
      acc = hk_value_clone(part);
    } else if (!st) {
      for (int64_t i = 0; i < acc->n && !st; i++) st = se_combine_elem(x, ins->called[0], kind, acc, i, part, i);
    }
    hk_value_release(part);
  }
  if (st) {
    hk_value_release(acc);
    return st;
  }
  *out = acc;
  return NULL;
}

/* Adds the operand box cb into acc (one double per element of the result
 * box; reduced dims folded). */
static void accumulate_box(const hk_instr *ins, const hk_value *v, const se_box *cb, double *acc) {
  bool reduced[SE_MAX_RANK] = {0};
  for (int i = 0; i < ins->n_dims; i++) reduced[ins->dims[i]] = true;
  int64_t ost[SE_MAX_RANK] = {0}, st = 1, idx[SE_MAX_RANK] = {0};
  for (int d = cb->rank - 1; d >= 0; d--)
    if (!reduced[d]) {
      ost[d] = st;
      st *= cb->n[d];
    }
  bool f32 = v->elem == HK_F32;
  int64_t o = 0;
  for (int64_t i = 0; i < v->n; i++) {
    acc[o] += f32 ? (double)((const float *)v->data)[i] : hk_value_get_f64(v, i);
    for (int d = cb->rank - 1; d >= 0; d--) {
      o += ost[d];
      if (++idx[d] < cb->n[d]) break;
      o -= ost[d] * idx[d];
      idx[d] = 0;
    }
  }
}

/* An f32 add-reduce summed in double and rounded once (as dots are), in
 * chunks of the largest reduced dim: the global and partitioned sums then
 * differ only by the partitioned program's own roundings. */
static hk_status *reduce_add_wide(se_ctx *x, se_frame *f, const hk_instr *ins, const se_box *ib,
                                  const se_box *b, hk_value **out) {
  int big;
  int64_t step = reduce_chunk_step(ins, ib, &big);
  hk_value *iv;
  se_box scalar = {0};
  HK_TRY(se_operand(x, f, ins, 1, &scalar, &iv));
  double init_value = hk_value_get_f64(iv, 0);
  hk_value_release(iv);
  int64_t n = se_box_count(b);
  double *acc = malloc((size_t)(n ? n : 1) * sizeof(double));
  if (!acc) hk_out_of_memory();
  for (int64_t i = 0; i < n; i++) acc[i] = init_value;
  hk_status *st = NULL;
  for (int64_t lo = 0; lo < ib->n[big] && !st; lo += step) {
    se_box cb = reduce_chunk(ib, big, lo, step);
    hk_value *v;
    st = se_operand(x, f, ins, 0, &cb, &v);
    if (!st) {
      accumulate_box(ins, v, &cb, acc);
      hk_value_release(v);
    }
  }
  if (!st) {
    hk_value *r = se_value_of_box((hk_prim)ins->shape->elem, b);
    for (int64_t i = 0; i < n; i++) hk_value_set_f64(r, i, acc[i]);
    *out = r;
  }
  free(acc);
  return st;
}

hk_status *se_op_reduce(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                        hk_value **out) {
  int N = ins->n_operands / 2;
  if (N < 1 || N > 8) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad reduce operands");
  const hk_shape *is = ins->operands[0]->shape;
  se_box ib;
  ib.rank = is->rank;
  int kept = 0;
  for (int d = 0; d < is->rank; d++) {
    bool reduced = false;
    for (int i = 0; i < ins->n_dims; i++) reduced |= ins->dims[i] == d;
    ib.lo[d] = reduced ? 0 : b->lo[kept];
    ib.n[d] = reduced ? is->dims[d] : b->n[kept];
    kept += !reduced;
  }
  if (kept != b->rank) return hk_eval_error(ins, HK_INVALID_ARGUMENT, "reduce dimensions do not match the result");
  if (N == 1 && ins->n_called > 0 && ins->n_dims > 0 && ins->shape->elem == HK_F32 &&
      ins->operands[0]->shape->elem == HK_F32 && hk_reducer_kind_of(ins->called[0]) == HK_RED_ADD)
    return reduce_add_wide(x, f, ins, &ib, b, out);
  if (N == 1 && ins->n_called > 0 && ins->n_dims > 0 && se_box_count(&ib) > REDUCE_CHUNK) {
    hk_reducer_kind kind = hk_reducer_kind_of(ins->called[0]);
    if (kind != HK_RED_GENERIC && kind <= HK_RED_MIN) return reduce_in_chunks(x, f, ins, kind, &ib, b, out);
  }
  hk_value *ops[16] = {0}, *res = NULL;
  se_box scalar = {0};
  hk_status *st = NULL;
  for (int k = 0; k < 2 * N && !st; k++) st = se_operand(x, f, ins, k, k < N ? &ib : &scalar, &ops[k]);
  if (!st) st = run_shadow(x, ins, variadic_shape(x, ins, b), NULL, hk_op_reduce, ops, &res);
  release_all(ops, 2 * N);
  if (st) return st;
  *out = take_leaf(res, leaf);
  return NULL;
}

hk_status *se_op_sort(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                      hk_value **out) {
  int N = ins->n_operands;
  if (N < 1 || N > 16 || ins->n_dims != 1 || ins->dims[0] < 0 || ins->dims[0] >= b->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad sort operands or dimension");
  int dim = (int)ins->dims[0];
  se_box sb = *b;
  sb.lo[dim] = 0;
  sb.n[dim] = ins->operands[0]->shape->dims[dim];
  if (sb.lo[dim] != b->lo[dim] || sb.n[dim] != b->n[dim]) {
    /* Sort whole rows once (memoised): every position of them reads it. */
    hk_value *rows;
    HK_TRY(se_eval(x, f, ins, leaf, &sb, &rows));
    return crop(rows, &sb, b, out);
  }
  hk_value *ops[16] = {0}, *res = NULL;
  hk_status *st = NULL;
  for (int k = 0; k < N && !st; k++) st = se_operand(x, f, ins, k, &sb, &ops[k]);
  if (!st) st = run_shadow(x, ins, variadic_shape(x, ins, &sb), NULL, hk_op_sort, ops, &res);
  release_all(ops, N);
  if (st) return st;
  for (int k = 0; res->elem == HK_TUPLE && k < res->n_elems; k++)
    if (k != leaf) se_memo_store(x, f, ins, k, &sb, res->elems[k]);
  *out = take_leaf(res, leaf);
  return NULL;
}

/* ---- ragged dot -------------------------------------------------------------- */

/* A box of a ragged-dot reads the operands' matching batch and free
 * entries, all of their contracting dims (and the rhs group dim), and
 * every group size. */
hk_status *se_op_ragged_dot(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                            hk_value **out) {
  (void)leaf;
  hk_ragged_dot rd;
  HK_TRY(hk_ragged_dot_form(ins, &rd));
  se_box ob[3];
  for (int k = 0; k < 3; k++) se_box_full(&ob[k], ins->operands[k]->shape);
  for (int d = 0; d < b->rank; d++) {
    if (rd.out_lhs[d] >= 0) ob[0].lo[rd.out_lhs[d]] = b->lo[d], ob[0].n[rd.out_lhs[d]] = b->n[d];
    if (rd.out_rhs[d] >= 0) ob[1].lo[rd.out_rhs[d]] = b->lo[d], ob[1].n[rd.out_rhs[d]] = b->n[d];
  }
  hk_value *ops[3] = {0};
  hk_status *st = NULL;
  for (int k = 0; k < 3 && !st; k++) st = se_operand(x, f, ins, k, &ob[k], &ops[k]);
  if (!st) {
    int64_t *starts = hk_ragged_dot_starts(&rd, ops[2]);
    *out = se_value_of_box((hk_prim)ins->shape->elem, b);
    hk_ragged_dot_box(&rd, ops[0], ob[0].lo, ops[1], ob[1].lo, starts, b->lo, *out);
    free(starts);
  }
  release_all(ops, 3);
  return st;
}

/* ---- cholesky, triangular-solve ---------------------------------------------- */

/* Every element of a solved matrix depends on the whole matrix: the
 * requested batch entries are solved whole (memoised) and the box cut out. */
hk_status *se_op_solve(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                       hk_value **out) {
  if (b->rank < 2 || ins->n_operands > 2)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "%s needs matrices", hk_opcode_name((hk_opcode)ins->opcode));
  se_box sb = *b;
  for (int d = b->rank - 2; d < b->rank; d++) {
    sb.lo[d] = 0;
    sb.n[d] = ins->shape->dims[d];
  }
  if (sb.lo[b->rank - 2] != b->lo[b->rank - 2] || sb.n[b->rank - 2] != b->n[b->rank - 2] ||
      sb.lo[b->rank - 1] != b->lo[b->rank - 1] || sb.n[b->rank - 1] != b->n[b->rank - 1]) {
    hk_value *whole;
    HK_TRY(se_eval(x, f, ins, leaf, &sb, &whole));
    return crop(whole, &sb, b, out);
  }
  hk_value *ops[2] = {0};
  hk_status *st = NULL;
  for (int k = 0; k < ins->n_operands && !st; k++) {
    se_box ob = sb;   /* a's matrices are square: its box is the batch's */
    const hk_shape *os = ins->operands[k]->shape;
    for (int d = b->rank - 2; d < b->rank && os->rank == b->rank; d++) ob.n[d] = os->dims[d];
    st = se_operand(x, f, ins, k, &ob, &ops[k]);
  }
  if (!st) st = run_shadow(x, ins, se_box_shape(x, (hk_prim)ins->shape->elem, &sb), NULL, hk_op_solve, ops, out);
  release_all(ops, ins->n_operands);
  return st;
}

/* ---- batch norm ------------------------------------------------------------- */

/* The statistics of a feature need every element of it: the slab of the
 * operand over the requested features (all of every other dim) is
 * evaluated, the dense kernel runs on it, and the requested box is cut out. */
hk_status *se_op_batch_norm(se_ctx *x, se_frame *f, const hk_instr *ins, int leaf, const se_box *b,
                            hk_value **out) {
  const char *fi = ana_raw_attr(ins, "feature_index");
  const hk_shape *xs = ins->operands[0]->shape;
  int64_t feat = fi ? strtoll(fi, NULL, 10) : -1;
  if (feat < 0 || feat >= xs->rank || ins->n_operands > 5 || !hk_shape_is_array(xs))
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "bad feature_index or operands");
  bool vec_box = b->rank == 1 && xs->rank != 1;   /* a per-feature leaf */
  int fd = vec_box ? 0 : (int)feat;
  se_box slab, fv;
  se_box_full(&slab, xs);
  slab.lo[feat] = b->lo[fd];
  slab.n[feat] = b->n[fd];
  fv.rank = 1;
  fv.lo[0] = b->lo[fd];
  fv.n[0] = b->n[fd];
  bool inference = ins->opcode == HK_OP_BATCH_NORM_INFERENCE;
  hk_value *ops[5] = {0}, *res = NULL;
  hk_status *st = NULL;
  for (int k = 0; k < ins->n_operands && !st; k++) {
    bool whole = k == 0 || (k == 4 && ins->opcode == HK_OP_BATCH_NORM_GRAD);
    /* inference reads elements one by one: the operand in the box suffices */
    const se_box *bk = whole ? (inference ? b : &slab) : &fv;
    st = se_operand(x, f, ins, k, bk, &ops[k]);
  }
  if (!st) st = hk_op_batch_norm(&x->dev, ins, ops, &res);
  release_all(ops, ins->n_operands);
  if (st) return st;
  hk_value *v = take_leaf(res, leaf);
  if (inference || vec_box) {
    *out = v;
    return NULL;
  }
  hk_value *cut = se_value_of_box((hk_prim)v->elem, b);
  se_copy_box(cut, b, v, &slab);
  hk_value_release(v);
  *out = cut;
  return NULL;
}
