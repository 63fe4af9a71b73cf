/* batch_norm.c - batch-norm-training, -inference and -grad with the
 * semantics of XLA's BatchNormExpander (HloEvaluator itself leaves them to
 * that expander): statistics over every dim but feature_index, in double,
 * rounded to the element type at the end. */
#include <math.h>
#include <stdio.h>

#include "analysis/analysis_internal.h"
#include "eval/eval_internal.h"

typedef struct bn_attrs {
  double epsilon;
  int64_t feature;                 /* feature_index */
  int64_t n_feat, inner;           /* features; elements after the feature dim */
  int64_t per_feature;             /* elements per feature (N) */
} bn_attrs;

static hk_status *bn_read(const hk_instr *ins, const hk_value *x, bn_attrs *a) {
  const char *e = ana_raw_attr(ins, "epsilon"), *f = ana_raw_attr(ins, "feature_index");
  char *end;
  a->epsilon = e ? strtod(e, &end) : 0;
  a->feature = f ? strtoll(f, &end, 10) : -1;
  if (x->elem == HK_TUPLE || a->feature < 0 || a->feature >= x->rank)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "feature_index %lld is not a dimension of the operand",
                         (long long)a->feature);
  a->n_feat = x->dims[a->feature];
  a->inner = 1;
  for (int d = (int)a->feature + 1; d < x->rank; d++) a->inner *= x->dims[d];
  a->per_feature = a->n_feat ? x->n / a->n_feat : 0;
  return NULL;
}

/* The feature of linear element i. */
static int64_t feature_of(const bn_attrs *a, int64_t i) { return (i / a->inner) % a->n_feat; }

static hk_status *check_feature_vectors(const hk_instr *ins, hk_value *const *ops, int from, int to,
                                        const bn_attrs *a) {
  for (int k = from; k < to; k++)
    if (ops[k]->elem == HK_TUPLE || ops[k]->n != a->n_feat)
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d must have one element per feature (%lld)", k,
                           (long long)a->n_feat);
  return NULL;
}

/* Mean and variance (E[x^2] - E[x]^2, as the expander computes it). */
static void feature_moments(const hk_value *x, const bn_attrs *a, double *mean, double *var) {
  for (int64_t f = 0; f < a->n_feat; f++) mean[f] = var[f] = 0;
  for (int64_t i = 0; i < x->n; i++) {
    double v = hk_value_get_f64(x, i);
    int64_t f = feature_of(a, i);
    mean[f] += v;
    var[f] += v * v;
  }
  for (int64_t f = 0; f < a->n_feat; f++) {
    double n = (double)(a->per_feature ? a->per_feature : 1);
    mean[f] /= n;
    var[f] = var[f] / n - mean[f] * mean[f];
  }
}

static void normalise(const hk_value *x, const bn_attrs *a, const double *mean, const double *var,
                      const hk_value *scale, const hk_value *offset, hk_value *out) {
  for (int64_t i = 0; i < x->n; i++) {
    int64_t f = feature_of(a, i);
    double y = (hk_value_get_f64(x, i) - mean[f]) / sqrt(var[f] + a->epsilon);
    hk_value_set_f64(out, i, y * hk_value_get_f64(scale, f) + hk_value_get_f64(offset, f));
  }
}

static hk_value *feature_vector(const hk_value *like, const double *v, int64_t n) {
  hk_value *r = hk_value_new_array((hk_prim)like->elem, 1, &n);
  for (int64_t f = 0; f < n; f++) hk_value_set_f64(r, f, v[f]);
  return r;
}

static double *scratch(int64_t n, int k) {
  double *p = calloc((size_t)(n ? n : 1) * (size_t)k, sizeof(double));
  if (!p) hk_out_of_memory();
  return p;
}

/* (output, batch mean, batch variance). */
static hk_status *bn_training(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  bn_attrs a;
  HK_TRY(bn_read(ins, ops[0], &a));
  HK_TRY(check_feature_vectors(ins, ops, 1, 3, &a));
  double *mean = scratch(a.n_feat, 2), *var = mean + a.n_feat;
  feature_moments(ops[0], &a, mean, var);
  hk_value *y = hk_value_clone(ops[0]);
  normalise(ops[0], &a, mean, var, ops[1], ops[2], y);
  hk_value *e[3] = {y, feature_vector(ops[0], mean, a.n_feat), feature_vector(ops[0], var, a.n_feat)};
  *out = hk_value_new_tuple(3, e);
  free(mean);
  return NULL;
}

static hk_status *bn_inference(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  bn_attrs a;
  HK_TRY(bn_read(ins, ops[0], &a));
  HK_TRY(check_feature_vectors(ins, ops, 1, 5, &a));
  double *mean = scratch(a.n_feat, 2), *var = mean + a.n_feat;
  for (int64_t f = 0; f < a.n_feat; f++) {
    mean[f] = hk_value_get_f64(ops[3], f);
    var[f] = hk_value_get_f64(ops[4], f);
  }
  hk_value *y = hk_value_clone(ops[0]);
  normalise(ops[0], &a, mean, var, ops[1], ops[2], y);
  *out = y;
  free(mean);
  return NULL;
}

/* (grad operand, grad scale, grad offset) from operand, scale, mean,
 * variance and grad output:
 *   grad_offset = sum(dy), grad_scale = sum(dy * (x - mean)) * rsqrt(var + eps),
 *   dx = scale * rsqrt(var + eps) / N * (N * dy - sum(dy) - (x - mean) * sum(dy * (x - mean)) / (var + eps)). */
static hk_status *bn_grad(const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  bn_attrs a;
  HK_TRY(bn_read(ins, ops[0], &a));
  HK_TRY(check_feature_vectors(ins, ops, 1, 4, &a));
  if (ops[4]->elem == HK_TUPLE || ops[4]->n != ops[0]->n)
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "grad_output must have the operand's shape");
  const hk_value *x = ops[0], *dy = ops[4];
  double *sum_dy = scratch(a.n_feat, 3), *sum_dyx = sum_dy + a.n_feat, *gscale = sum_dyx + a.n_feat;
  for (int64_t i = 0; i < x->n; i++) {
    int64_t f = feature_of(&a, i);
    double g = hk_value_get_f64(dy, i);
    sum_dy[f] += g;
    sum_dyx[f] += g * (hk_value_get_f64(x, i) - hk_value_get_f64(ops[2], f));
  }
  double n = (double)(a.per_feature ? a.per_feature : 1);
  hk_value *dx = hk_value_clone(x);
  for (int64_t i = 0; i < x->n; i++) {
    int64_t f = feature_of(&a, i);
    double ve = hk_value_get_f64(ops[3], f) + a.epsilon, rs = 1.0 / sqrt(ve);
    double xm = hk_value_get_f64(x, i) - hk_value_get_f64(ops[2], f);
    double g = n * hk_value_get_f64(dy, i) - sum_dy[f] - xm * sum_dyx[f] / ve;
    hk_value_set_f64(dx, i, hk_value_get_f64(ops[1], f) * rs / n * g);
  }
  for (int64_t f = 0; f < a.n_feat; f++)
    gscale[f] = sum_dyx[f] / sqrt(hk_value_get_f64(ops[3], f) + a.epsilon);
  hk_value *e[3] = {dx, feature_vector(x, gscale, a.n_feat), feature_vector(x, sum_dy, a.n_feat)};
  *out = hk_value_new_tuple(3, e);
  free(sum_dy);
  return NULL;
}

hk_status *hk_op_batch_norm(hk_device_ctx *d, const hk_instr *ins, hk_value *const *ops, hk_value **out) {
  (void)d;
  static const int arity[3] = {3, 5, 5};
  int kind = ins->opcode == HK_OP_BATCH_NORM_TRAINING ? 0 : ins->opcode == HK_OP_BATCH_NORM_INFERENCE ? 1 : 2;
  if (ins->n_operands != arity[kind])
    return hk_eval_error(ins, HK_INVALID_ARGUMENT, "expects %d operands", arity[kind]);
  for (int k = 0; k < ins->n_operands; k++)
    if (ops[k]->elem == HK_TUPLE || !hk_prim_is_float((hk_prim)ops[k]->elem))
      return hk_eval_error(ins, HK_INVALID_ARGUMENT, "operand %d must be a floating-point array", k);
  if (kind == 0) return bn_training(ins, ops, out);
  if (kind == 1) return bn_inference(ins, ops, out);
  return bn_grad(ins, ops, out);
}
