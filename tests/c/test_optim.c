/* The engine's optimizer steps: validation messages (the Lua layer cannot
 * reach some of them: t.grad refuses a mismatched gradient), a
 * non-contiguous gradient, and the float64 path against a hand computation. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "lt/lt.h"
#include "lt/optim.h"

static lt_tensor *filled(const int64_t *shape, int ndim, lt_dtype dt, double v) {
  lt_tensor *t = NULL;
  CHECK(lt_full(shape, ndim, v, dt, lt_cpu(), &t) == LT_OK);
  return t;
}

static void test_sgd_validation(void) {
  int64_t s23[] = {2, 3}, s32[] = {3, 2};
  lt_tensor *p = filled(s23, 2, LT_FLOAT32, 1.0), *g = filled(s32, 2, LT_FLOAT32, 1.0);
  lt_sgd_options o = {.lr = 0.1};
  CHECK(lt_sgd_step_("SGD", p, g, NULL, false, &o) == LT_ERR_SHAPE);
  CHECK_EQ_STR(lt_last_error(), "SGD: the gradient has shape [3, 2] but the parameter has shape [2, 3]");
  lt_tensor *g64 = filled(s23, 2, LT_FLOAT64, 1.0);
  CHECK(lt_sgd_step_("SGD", p, g64, NULL, false, &o) == LT_ERR_DTYPE);
  CHECK_EQ_STR(lt_last_error(), "SGD: the gradient has dtype float64 but the parameter has dtype float32");
  o.lr = -1;
  CHECK(lt_sgd_step_("SGD", p, g, NULL, false, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "SGD: invalid learning rate: -1");
  o.lr = 0.1;
  o.momentum = 0.9;
  lt_tensor *g23 = filled(s23, 2, LT_FLOAT32, 1.0);
  CHECK(lt_sgd_step_("SGD", p, g23, NULL, false, &o) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "needs a momentum buffer") != NULL);
  o.momentum = 0;
  o.nesterov = true;
  CHECK(lt_sgd_step_("SGD", p, g, NULL, false, &o) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "SGD: nesterov momentum requires a momentum") != NULL);
  lt_tensor_release(p);
  lt_tensor_release(g);
  lt_tensor_release(g64);
  lt_tensor_release(g23);
}

static void test_sgd_transposed_grad(void) {
  /* p [2, 3] = 0; grad = transpose of [[1, 2], [3, 4], [5, 6]] */
  int64_t s23[] = {2, 3}, s32[] = {3, 2};
  float data[] = {1, 2, 3, 4, 5, 6};
  lt_tensor *p = filled(s23, 2, LT_FLOAT32, 0.0), *base = NULL, *g = NULL;
  CHECK(lt_from_buffer(data, LT_FLOAT32, s32, 2, LT_FLOAT32, lt_cpu(), &base) == LT_OK);
  CHECK(lt_transpose(base, 0, 1, &g) == LT_OK);
  lt_sgd_options o = {.lr = 1.0};
  CHECK(lt_sgd_step_("SGD", p, g, NULL, false, &o) == LT_OK);
  const float *pd = lt_data(p);
  const float expected[] = {-1, -3, -5, -2, -4, -6};
  for (int i = 0; i < 6; i++) CHECK(pd[i] == expected[i]);
  lt_tensor_release(p);
  lt_tensor_release(g);
  lt_tensor_release(base);
}

static void test_adam_float64(void) {
  int64_t s[] = {4};
  lt_tensor *p = filled(s, 1, LT_FLOAT64, 1.0), *g = filled(s, 1, LT_FLOAT64, 0.5);
  lt_tensor *m = filled(s, 1, LT_FLOAT64, 0.0), *v = filled(s, 1, LT_FLOAT64, 0.0);
  lt_adam_options o = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  CHECK(lt_adam_step_(NULL, p, g, m, v, NULL, 1, &o) == LT_OK);
  /* first step: m = 0.05, v = 0.00025; update = lr * (m/0.1) / (sqrt(v/0.001) + eps) */
  double mh = 0.05 / (1 - 0.9), vh = sqrt(0.00025) / sqrt(1 - 0.999);
  double expected = 1.0 - 0.1 * mh / (vh + 1e-8);
  CHECK(fabs(((double *)lt_data(p))[0] - expected) < 1e-15);
  CHECK(fabs(((double *)lt_data(m))[3] - 0.05) < 1e-16);
  o.beta2 = 1.0;
  CHECK(lt_adam_step_(NULL, p, g, m, v, NULL, 2, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "Adam: invalid beta parameter at index 2: 1");
  o.beta2 = 0.999;
  o.amsgrad = true;
  o.decoupled_weight_decay = true;
  CHECK(lt_adam_step_(NULL, p, g, m, v, NULL, 2, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "AdamW: amsgrad needs a max_exp_avg_sq buffer");
  int64_t s5[] = {5};
  lt_tensor *bad = filled(s5, 1, LT_FLOAT64, 0.0);
  CHECK(lt_adam_step_(NULL, p, g, m, v, bad, 2, &o) == LT_ERR_SHAPE);
  CHECK_EQ_STR(lt_last_error(), "AdamW: max_exp_avg_sq has shape [5] but the parameter has shape [4]");
  lt_tensor *ints = NULL;
  CHECK(lt_zeros(s, 1, LT_INT64, lt_cpu(), &ints) == LT_OK);
  CHECK(lt_adam_step_(NULL, ints, g, m, v, NULL, 1, &o) == LT_ERR_DTYPE);
  CHECK(strstr(lt_last_error(), "parameters must be floating point, got int64") != NULL);
  lt_tensor_release(p);
  lt_tensor_release(g);
  lt_tensor_release(m);
  lt_tensor_release(v);
  lt_tensor_release(bad);
  lt_tensor_release(ints);
}

int main(void) {
  test_sgd_validation();
  test_sgd_transposed_grad();
  test_adam_float64();
  return check_summary("test_optim");
}
