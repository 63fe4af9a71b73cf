/* cplx.h - complex elements as C's double complex: the one accessor the
 * evaluator's complex arithmetic (elementwise, fft, solve, ragged-dot)
 * reads and writes values through. */
#ifndef HK_EVAL_CPLX_H
#define HK_EVAL_CPLX_H

#include <complex.h>

#include "hlokit/eval.h"

/* Element i of v (any element type; a real one has imaginary part 0). */
static inline double complex hk_cplx_get(const hk_value *v, int64_t i) {
  double re, im;
  hk_value_get_c(v, i, &re, &im);
  return re + im * I;   /* not CMPLX: clang 14 lacks the builtin glibc defines it with */
}

static inline void hk_cplx_set(hk_value *v, int64_t i, double complex x) {
  hk_value_set_c(v, i, creal(x), cimag(x));
}

#endif
