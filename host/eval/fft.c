/* fft.c - fft (FFT, IFFT, RFFT, IRFFT) over the trailing fft_length dims, as
 * direct O(n^2) discrete Fourier transforms in double precision. */
#include <math.h>

#include "eval/cplx.h"
#include "eval/eval_internal.h"

/* In-place DFT of buf (dims, rank) along axis; inverse scales by 1/n. */
static void dft_axis(double complex *buf, int rank, const int64_t *dims, int axis, bool inverse) {
  int64_t st[HK_MAX_RANK];
  hk_strides(rank, dims, st);
  int64_t n = dims[axis], total = hk_dims_product(rank, dims);
  if (n <= 1) return;
  double complex *line = malloc((size_t)n * sizeof(double complex));
  double complex *out = malloc((size_t)n * sizeof(double complex));
  if (!line || !out) hk_out_of_memory();
  double sign = inverse ? 1.0 : -1.0;
  for (int64_t base = 0; base < total; base++) {
    if ((base / st[axis]) % n) continue;           /* visit each line once */
    for (int64_t i = 0; i < n; i++) line[i] = buf[base + i * st[axis]];
    for (int64_t k = 0; k < n; k++) {
      double complex s = 0;
      for (int64_t i = 0; i < n; i++) s += line[i] * cexp(sign * 2.0 * M_PI * I * (double)((k * i) % n) / (double)n);
      out[k] = inverse ? s / (double)n : s;
    }
    for (int64_t i = 0; i < n; i++) buf[base + i * st[axis]] = out[i];
  }
  free(line);
  free(out);
}

/* The operand as complex doubles with dims; the last dim padded/cut to n_last. */
static double complex *load_complex(const hk_value *a, int64_t n_last, int64_t *dims) {
  memcpy(dims, a->dims, (size_t)a->rank * sizeof(int64_t));
  dims[a->rank - 1] = n_last;
  int64_t total = hk_dims_product(a->rank, dims), in_last = a->dims[a->rank - 1];
  double complex *b = calloc((size_t)(total ? total : 1), sizeof(double complex));
  if (!b) hk_out_of_memory();
  for (int64_t i = 0; i < total; i++) {
    int64_t row = i / n_last, col = i % n_last;
    if (col >= in_last) continue;
    b[i] = hk_cplx_get(a, row * in_last + col);
  }
  return b;
}

hk_status *hk_op_fft(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  (void)d;
  const hk_value *a = ops[0];
  const char *type = ins->attrs ? ins->attrs->fft_type : NULL;
  int nf = ins->attrs ? ins->attrs->fft_length.n : 0;
  if (!type || nf < 1 || nf > a->rank || a->elem == HK_TUPLE)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "needs fft_type and fft_length");
  const int64_t *len = ins->attrs->fft_length.v;
  int rank = a->rank, first = rank - nf;
  bool inverse = !strcmp(type, "IFFT") || !strcmp(type, "IRFFT");
  bool real_out = !strcmp(type, "IRFFT"), real_in = !strcmp(type, "RFFT");
  int64_t dims[HK_MAX_RANK];
  int64_t n_last = real_in ? len[nf - 1] : a->dims[rank - 1];
  double complex *b = load_complex(a, n_last, dims);
  int last_axis = real_out ? rank - 1 : rank;
  for (int ax = first; ax < last_axis; ax++) dft_axis(b, rank, dims, ax, inverse);
  if (real_out) {      /* irfft along the last axis: rebuild it by Hermitian symmetry */
    int64_t h = n_last, n = len[nf - 1], rows = h ? hk_dims_product(rank, dims) / h : 0;
    double complex *e = calloc((size_t)(rows * n > 0 ? rows * n : 1), sizeof(double complex));
    if (!e) hk_out_of_memory();
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < n; c++)
        e[r * n + c] = c < h ? b[r * h + c] : (n - c < h ? conj(b[r * h + (n - c)]) : 0);
    free(b);
    b = e;
    n_last = n;
    dims[rank - 1] = n;
    dft_axis(b, rank, dims, rank - 1, true);
  }
  hk_value *r = hk_value_for_shape_dims(ins->shape);
  int64_t out_last = r->rank ? r->dims[r->rank - 1] : 1;
  for (int64_t i = 0; i < r->n; i++) {
    hk_cplx_set(r, i, b[(i / out_last) * n_last + i % out_last]);
  }
  free(b);
  *out = r;
  return NULL;
}
