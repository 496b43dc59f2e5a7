/* Float64 central finite differences against lt_backward, shared by the
 * autograd tests (tests/c/test_autograd.c, tests/c/test_nn_autograd.c).
 *
 * The checked function is sum(f(in) * w) for a fixed pseudo-random w: its
 * gradient is f's whole vector-Jacobian product, not only sums of columns
 * (which vanish for softmax). */
#ifndef LT_TEST_GRADCHECK_H
#define LT_TEST_GRADCHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lt/lt.h"

/* An op under test: in[] are its float64 inputs (some requiring grad, some
 * NULL for optional arguments), ctx holds everything else. */
typedef lt_status (*op_fn)(lt_tensor *const *in, const void *ctx, lt_tensor **out);

/* One element of t (any dtype, any layout) as a double. */
static inline double gc_element(const lt_tensor *t, int64_t i) {
  lt_tensor *c = NULL;
  if (lt_contiguous(t, &c) != LT_OK) return NAN;
  double v = lt_load_double((const char *)lt_data(c) + i * (int64_t)lt_dtype_size(c->dtype),
                            c->dtype);
  lt_tensor_release(c);
  return v;
}

/* The projection weights: values in [-1, 1) from a fixed sequence, so a
 * failure reproduces. */
static inline lt_tensor *gc_weights(const int64_t *shape, int ndim) {
  static uint64_t state = 88172645463325252ULL;
  lt_tensor *w = NULL;
  if (lt_empty(shape, ndim, LT_FLOAT64, lt_cpu(), &w) != LT_OK) return NULL;
  double *p = lt_data(w);
  for (int64_t i = 0; i < lt_numel(w); i++) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = 2.0 * (double)(state >> 11) / (double)(1ULL << 53) - 1.0;
  }
  return w;
}

static inline lt_status gc_projected(op_fn f, lt_tensor *const *in, const void *ctx, lt_tensor **w,
                                     lt_tensor **loss) {
  lt_tensor *y = NULL, *yd = NULL, *prod = NULL;
  LT_TRY(f(in, ctx, &y));
  if (!*w) *w = gc_weights(y->shape, y->ndim);
  lt_status st = lt_to_dtype(y, LT_FLOAT64, false, &yd); /* some outputs are float32 */
  if (st == LT_OK) st = lt_binary(LT_OP_MUL, yd, *w, &prod);
  if (st == LT_OK) st = lt_sum(prod, NULL, 0, false, loss);
  lt_tensor_release(y);
  if (yd) lt_tensor_release(yd);
  if (prod) lt_tensor_release(prod);
  return st;
}

static inline double gc_projected_value(op_fn f, lt_tensor *const *in, const void *ctx,
                                        lt_tensor **w) {
  const bool mode = lt_set_grad_enabled(false);
  lt_tensor *loss = NULL;
  double v = NAN;
  if (gc_projected(f, in, ctx, w, &loss) == LT_OK) lt_item(loss, &v);
  if (loss) lt_tensor_release(loss);
  lt_set_grad_enabled(mode);
  return v;
}

/* Backward's gradient of every input that requires grad against central
 * differences (eps 1e-6, tolerance 1e-6 relative to 1 + |numeric|); a
 * missing gradient counts as zeros. Checks the output's grad_fn name when
 * expect_node is given. Inputs are contiguous float64 leaves. */
static inline bool gradcheck(const char *name, const char *expect_node, op_fn f,
                             lt_tensor *const *in, int nin, const void *ctx) {
  for (int k = 0; k < nin; k++)
    if (in[k] && in[k]->grad) lt_tensor_release(in[k]->grad), in[k]->grad = NULL;
  if (expect_node) {
    lt_tensor *y = NULL;
    if (f(in, ctx, &y) != LT_OK) {
      fprintf(stderr, "%s: %s\n", name, lt_last_error());
      return false;
    }
    const char *node = lt_grad_fn_name(y);
    bool named = node && strcmp(node, expect_node) == 0;
    if (!named)
      fprintf(stderr, "%s: grad_fn %s, expected %s\n", name, node ? node : "(none)", expect_node);
    lt_tensor_release(y);
    if (!named) return false;
  }
  lt_tensor *w = NULL, *loss = NULL;
  lt_status st = gc_projected(f, in, ctx, &w, &loss);
  if (st == LT_OK) st = lt_backward(loss, NULL, false);
  if (loss) lt_tensor_release(loss);
  if (st != LT_OK) {
    fprintf(stderr, "%s: %s\n", name, lt_last_error());
    if (w) lt_tensor_release(w);
    return false;
  }
  const double eps = 1e-6, tol = 1e-6;
  bool ok = true;
  for (int k = 0; k < nin && ok; k++) {
    if (!in[k] || !in[k]->requires_grad) continue;
    double *p = lt_data(in[k]);
    for (int64_t i = 0; i < lt_numel(in[k]) && ok; i++) {
      const double orig = p[i];
      p[i] = orig + eps;
      const double up = gc_projected_value(f, in, ctx, &w);
      p[i] = orig - eps;
      const double down = gc_projected_value(f, in, ctx, &w);
      p[i] = orig;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = in[k]->grad ? gc_element(in[k]->grad, i) : 0.0;
      if (!(fabs(numeric - analytic) <= tol * (1 + fabs(numeric)))) {
        fprintf(stderr, "%s: d/d input %d [%lld]: backward %.12g, finite differences %.12g\n",
                name, k + 1, (long long)i, analytic, numeric);
        ok = false;
      }
    }
  }
  lt_tensor_release(w);
  return ok;
}

#endif
