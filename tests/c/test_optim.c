/* The engine's optimizer steps: validation messages (the Lua layer cannot
 * reach some of them: t.grad refuses a mismatched gradient), a
 * non-contiguous gradient, the float64 path against a hand computation, and
 * the multi-tensor steps against the single ones (bit for bit), their
 * refusals (nothing written), operands that share memory, and GradScaler's
 * unscale_many. */
#include <math.h>
#include <stdbool.h>
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

/* ---- multi-tensor steps ---- */

#define NT 4

static lt_tensor *randn(int64_t n, lt_dtype dt) {
  lt_tensor *t = NULL, *f = NULL;
  int64_t s[] = {n};
  CHECK(lt_zeros(s, 1, LT_FLOAT32, lt_cpu(), &f) == LT_OK);
  CHECK(lt_normal_(f, 0.0, 1.0) == LT_OK);
  CHECK(lt_to_dtype(f, dt, true, &t) == LT_OK);
  lt_tensor_release(f);
  return t;
}

static lt_tensor *clone(const lt_tensor *t) {
  lt_tensor *c = NULL;
  CHECK(lt_clone(t, &c) == LT_OK);
  return c;
}

static bool same_bytes(const lt_tensor *a, const lt_tensor *b) {
  return lt_nbytes(a) == lt_nbytes(b) && memcmp(lt_data(a), lt_data(b), lt_nbytes(a)) == 0;
}

static const int64_t many_sizes[NT] = {5, 40000, 1, 3};
static const lt_dtype many_dtypes[NT] = {LT_FLOAT32, LT_FLOAT64, LT_BFLOAT16, LT_FLOAT32};

static void test_many_equal_single(void) {
  lt_manual_seed(11);
  lt_tensor *p[2][NT], *g[NT], *m[2][NT], *v[2][NT], *x[2][NT];
  for (int i = 0; i < NT; i++) {
    p[0][i] = randn(many_sizes[i], many_dtypes[i]);
    g[i] = randn(many_sizes[i], many_dtypes[i]);
    m[0][i] = randn(many_sizes[i], many_dtypes[i]);
    v[0][i] = randn(many_sizes[i], many_dtypes[i]);
    CHECK(lt_binary_(LT_OP_MUL, v[0][i], v[0][i]) == LT_OK); /* exp_avg_sq is never negative */
    x[0][i] = clone(v[0][i]);
    p[1][i] = clone(p[0][i]);
    m[1][i] = clone(m[0][i]);
    v[1][i] = clone(v[0][i]);
    x[1][i] = clone(x[0][i]);
  }
  const int64_t steps[NT] = {1, 7, 3, 2};
  lt_adam_options o = {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1,
                       .amsgrad = true, .maximize = true};
  for (int i = 0; i < NT; i++)
    CHECK(lt_adam_step_(NULL, p[0][i], g[i], m[0][i], v[0][i], x[0][i], steps[i], &o) == LT_OK);
  CHECK(lt_adam_step_many_(NULL, NT, p[1], g, m[1], v[1], x[1], steps, &o) == LT_OK);
  for (int i = 0; i < NT; i++) {
    CHECK(same_bytes(p[0][i], p[1][i]));
    CHECK(same_bytes(m[0][i], m[1][i]));
    CHECK(same_bytes(v[0][i], v[1][i]));
    CHECK(same_bytes(x[0][i], x[1][i]));
  }
  /* SGD with nesterov momentum: the first step initialises the buffers
   * (m as momentum buffers here), the second decays them. */
  lt_sgd_options so = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  for (int k = 0; k < 2; k++) {
    const bool init[NT] = {k == 0, k == 0, k == 0, k == 0};
    for (int i = 0; i < NT; i++)
      CHECK(lt_sgd_step_("SGD", p[0][i], g[i], m[0][i], init[i], &so) == LT_OK);
    CHECK(lt_sgd_step_many_("SGD", NT, p[1], g, m[1], init, &so) == LT_OK);
  }
  for (int i = 0; i < NT; i++) {
    CHECK(same_bytes(p[0][i], p[1][i]));
    CHECK(same_bytes(m[0][i], m[1][i]));
  }
  for (int i = 0; i < NT; i++) {
    lt_tensor_release(g[i]);
    for (int k = 0; k < 2; k++) {
      lt_tensor_release(p[k][i]);
      lt_tensor_release(m[k][i]);
      lt_tensor_release(v[k][i]);
      lt_tensor_release(x[k][i]);
    }
  }
}

static void test_many_refusals(void) {
  int64_t s2[] = {2}, s3[] = {3};
  lt_tensor *p[2] = {filled(s2, 1, LT_FLOAT32, 1.0), filled(s3, 1, LT_FLOAT32, 1.0)};
  lt_tensor *g[2] = {filled(s2, 1, LT_FLOAT32, 1.0), filled(s2, 1, LT_FLOAT32, 1.0)};
  lt_sgd_options o = {.lr = 0.5};
  CHECK(lt_sgd_step_many_("SGD", 2, p, g, NULL, NULL, &o) == LT_ERR_SHAPE);
  CHECK_EQ_STR(lt_last_error(),
               "SGD: parameter 2: the gradient has shape [2] but the parameter has shape [3]");
  CHECK(((float *)lt_data(p[0]))[0] == 1.0f); /* parameter 1 was not stepped */
  CHECK(lt_sgd_step_many_("SGD", 0, p, g, NULL, NULL, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "SGD: expected at least one tensor, got an empty list");
  lt_tensor *twice[2] = {p[0], p[0]};
  lt_tensor *g2[2] = {g[0], g[1]};
  CHECK(lt_sgd_step_many_("SGD", 2, twice, g2, NULL, NULL, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(),
               "SGD: parameter 2 (the parameter) and parameter 1 (the parameter) share memory");
  CHECK(((float *)lt_data(p[0]))[1] == 1.0f);
  lt_tensor *m[2] = {filled(s2, 1, LT_FLOAT32, 0.0), filled(s3, 1, LT_FLOAT64, 0.0)};
  lt_tensor *gg[2] = {g[0], filled(s3, 1, LT_FLOAT32, 1.0)};
  lt_adam_options ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  const int64_t steps[2] = {1, 1};
  CHECK(lt_adam_step_many_(NULL, 2, p, gg, m, m, NULL, steps, &ao) == LT_ERR_DTYPE);
  CHECK_EQ_STR(lt_last_error(),
               "Adam: parameter 2: exp_avg has dtype float64 but the parameter has dtype float32");
  CHECK(((float *)lt_data(p[0]))[0] == 1.0f && ((float *)lt_data(m[0]))[0] == 0.0f);
  for (int i = 0; i < 2; i++) {
    lt_tensor_release(p[i]);
    lt_tensor_release(g[i]);
    lt_tensor_release(m[i]);
  }
  lt_tensor_release(gg[1]);
}

/* Several lists in one step: an error in a later list (a bad option, a
 * wrong shape) leaves the earlier lists unstepped. */
static void test_calls_all_or_nothing(void) {
  int64_t s2[] = {2}, s3[] = {3};
  lt_tensor *p1 = filled(s2, 1, LT_FLOAT32, 1.0), *g1 = filled(s2, 1, LT_FLOAT32, 1.0);
  lt_tensor *p2 = filled(s3, 1, LT_FLOAT32, 1.0), *g2 = filled(s3, 1, LT_FLOAT32, 1.0);
  lt_tensor *m1 = filled(s2, 1, LT_FLOAT32, 0.0), *v1 = filled(s2, 1, LT_FLOAT32, 0.0);
  lt_tensor *m2 = filled(s2, 1, LT_FLOAT32, 0.0), *v2 = filled(s3, 1, LT_FLOAT32, 0.0);
  lt_sgd_call sc[2] = {{1, &p1, &g1, NULL, NULL, {.lr = 0.5}},
                       {1, &p2, &g2, NULL, NULL, {.lr = -1.0}}};
  CHECK(lt_sgd_step_calls_("SGD", 2, sc) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "SGD: invalid learning rate: -1");
  CHECK(((float *)lt_data(p1))[0] == 1.0f);
  sc[1].options.lr = 0.25;
  CHECK(lt_sgd_step_calls_("SGD", 2, sc) == LT_OK);
  CHECK(((float *)lt_data(p1))[0] == 0.5f && ((float *)lt_data(p2))[2] == 0.75f);
  const int64_t steps[1] = {1};
  lt_adam_options ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  lt_adam_call ac[2] = {{1, &p1, &g1, &m1, &v1, NULL, steps, ao}, {1, &p2, &g2, &m2, &v2, NULL, steps, ao}};
  CHECK(lt_adam_step_calls_(NULL, 2, ac) == LT_ERR_SHAPE);
  CHECK_EQ_STR(lt_last_error(),
               "Adam: parameter 1: exp_avg has shape [2] but the parameter has shape [3]");
  CHECK(((float *)lt_data(p1))[0] == 0.5f && ((float *)lt_data(m1))[0] == 0.0f);
  CHECK(lt_sgd_step_calls_("SGD", 0, sc) == LT_ERR_ARG);
  lt_tensor *ts[] = {p1, g1, p2, g2, m1, v1, m2, v2};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) lt_tensor_release(ts[i]);
}

static void test_unscale_many(void) {
  int64_t s3[] = {3}, s1[] = {1};
  lt_tensor *a = filled(s3, 1, LT_FLOAT32, 8.0), *b = filled(s3, 1, LT_BFLOAT16, 4.0);
  lt_tensor *found = filled(s1, 1, LT_FLOAT32, 0.0);
  lt_tensor *gs[2] = {a, b};
  CHECK(lt_amp_unscale_many_(2, gs, found, 0.25f) == LT_OK);
  CHECK(((float *)lt_data(a))[2] == 2.0f);
  CHECK(((float *)lt_data(found))[0] == 0.0f);
  ((float *)lt_data(a))[1] = NAN;
  CHECK(lt_amp_unscale_many_(2, gs, found, 0.5f) == LT_OK);
  CHECK(((float *)lt_data(found))[0] == 1.0f);
  CHECK(((float *)lt_data(a))[0] == 1.0f); /* scaled all the same */
  lt_tensor *f64 = filled(s1, 1, LT_FLOAT64, 0.0);
  CHECK(lt_amp_unscale_many_(2, gs, f64, 0.5f) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "unscale_many: found_inf must be a one-element float32 tensor") !=
        NULL);
  CHECK(((float *)lt_data(a))[0] == 1.0f);
  lt_tensor_release(a);
  lt_tensor_release(b);
  lt_tensor_release(found);
  lt_tensor_release(f64);
}

/* A single step refuses operands that share memory with what it writes. */
static void test_single_step_overlap(void) {
  int64_t s4[] = {4};
  lt_tensor *p = filled(s4, 1, LT_FLOAT32, 1.0), *m = filled(s4, 1, LT_FLOAT32, 0.0);
  lt_sgd_options o = {.lr = 0.1, .momentum = 0.9};
  CHECK(lt_sgd_step_("SGD", p, p, m, true, &o) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "SGD: unsupported operation: the parameter (written) and the gradient "
                                "(read) share memory; clone one of them first");
  CHECK(lt_sgd_step_("SGD", p, m, m, true, &o) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "the momentum buffer (written) and the gradient (read) share memory") != NULL);
  lt_tensor *a = filled(s4, 1, LT_FLOAT32, 0.0), *g = filled(s4, 1, LT_FLOAT32, 1.0);
  lt_adam_options ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  CHECK(lt_adam_step_("Adam", p, g, a, a, NULL, 1, &ao) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "Adam: unsupported operation: exp_avg (written) and exp_avg_sq (read)") != NULL);
  lt_tensor *first;
  double v = 0;
  CHECK(lt_select(p, 0, 0, &first) == LT_OK && lt_item(first, &v) == LT_OK);
  CHECK(v == 1.0); /* nothing written */
  lt_tensor_release(first);
  lt_tensor_release(p);
  lt_tensor_release(m);
  lt_tensor_release(a);
  lt_tensor_release(g);
}

int main(void) {
  test_sgd_validation();
  test_single_step_overlap();
  test_sgd_transposed_grad();
  test_adam_float64();
  test_many_equal_single();
  test_many_refusals();
  test_calls_all_or_nothing();
  test_unscale_many();
  return check_summary("test_optim");
}
