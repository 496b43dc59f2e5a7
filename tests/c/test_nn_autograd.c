/* Autograd through the nn ops (lt/nn.h) and index_select: every
 * differentiable input of every op against central finite differences in
 * float64 (eps 1e-6) through lt_backward, the node names, the graph's memory
 * given back by backward, a saved tensor written in place, and nothing
 * recorded in no_grad mode. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lt/index.h"
#include "lt/lt.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* ---- inputs ---- */

static uint64_t rng_state = 2024;
static double draw(void) { /* uniform in [0, 1) */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / (double)(1ULL << 53);
}

/* A float64 tensor with values in [lo, hi). */
static lt_tensor *uniform(const int64_t *shape, int ndim, double lo, double hi, bool grad) {
  lt_tensor *t = NULL;
  if (lt_empty(shape, ndim, LT_FLOAT64, lt_cpu(), &t) != LT_OK) return NULL;
  double *p = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++) p[i] = lo + (hi - lo) * draw();
  if (grad) lt_requires_grad_(t, true);
  return t;
}

static lt_tensor *randn_like_range(const int64_t *shape, int ndim, bool grad) {
  return uniform(shape, ndim, -1.0, 1.0, grad);
}

static lt_tensor *labels(const int64_t *shape, int ndim, const int64_t *values) {
  lt_tensor *t = NULL;
  lt_from_buffer(values, LT_INT64, shape, ndim, LT_INT64, lt_cpu(), &t);
  return t;
}

static size_t allocated(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return (size_t)s.allocated_bytes[LT_POOL_ALL].current;
}

static size_t activation_bytes(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return (size_t)s.category_bytes[LT_CAT_ACTIVATION].current;
}

static void release(lt_tensor **ts, int n) {
  for (int i = 0; i < n; i++)
    if (ts[i]) lt_tensor_release(ts[i]), ts[i] = NULL;
}

/* ---- linear and conv2d ---- */

static lt_status f_linear(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  return lt_linear(in[0], in[1], in[2], out);
}

static void test_linear(void) {
  lt_tensor *in[3] = {randn_like_range(SHAPE(3, 4), 2, true),
                      randn_like_range(SHAPE(5, 4), 2, true), randn_like_range(SHAPE(5), 1, true)};
  CHECK(gradcheck("linear", "LinearBackward", f_linear, in, 3, NULL));
  release(in, 3);
  /* batched input, no bias; only the weight requires grad */
  lt_tensor *in2[3] = {randn_like_range(SHAPE(2, 3, 4), 3, false),
                       randn_like_range(SHAPE(2, 4), 2, true), NULL};
  CHECK(gradcheck("linear 3-D, weight only", "LinearBackward", f_linear, in2, 3, NULL));
  release(in2, 3);
  lt_tensor *in3[3] = {randn_like_range(SHAPE(2, 4), 2, true),
                       randn_like_range(SHAPE(3, 4), 2, false), randn_like_range(SHAPE(3), 1, true)};
  CHECK(gradcheck("linear, input and bias", NULL, f_linear, in3, 3, NULL));
  release(in3, 3);
}

static lt_status f_conv2d(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_conv2d(in[0], in[1], in[2], ctx, out);
}

static void test_conv2d(void) {
  lt_conv2d_opts plain = lt_conv2d_default_opts();
  lt_tensor *in[3] = {randn_like_range(SHAPE(2, 3, 5, 4), 4, true),
                      randn_like_range(SHAPE(4, 3, 3, 2), 4, true),
                      randn_like_range(SHAPE(4), 1, true)};
  CHECK(gradcheck("conv2d", "ConvolutionBackward", f_conv2d, in, 3, &plain));
  release(in, 3);

  lt_conv2d_opts o = {{2, 1}, {1, 2}, {2, 1}, 2}; /* stride, padding, dilation, groups */
  lt_tensor *in2[3] = {randn_like_range(SHAPE(2, 4, 7, 5), 4, true),
                       randn_like_range(SHAPE(6, 2, 3, 2), 4, true),
                       randn_like_range(SHAPE(6), 1, true)};
  CHECK(gradcheck("conv2d stride/padding/dilation/groups", NULL, f_conv2d, in2, 3, &o));
  release(in2, 3);

  lt_conv2d_opts depthwise = {{1, 2}, {1, 1}, {1, 1}, 3};
  lt_tensor *in3[3] = {randn_like_range(SHAPE(1, 3, 4, 5), 4, false),
                       randn_like_range(SHAPE(3, 1, 2, 3), 4, true), NULL};
  CHECK(gradcheck("conv2d depthwise, weight only", NULL, f_conv2d, in3, 3, &depthwise));
  release(in3, 3);
}

/* ---- pooling ---- */

static lt_status f_max_pool(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  lt_tensor *idx = NULL;
  lt_status st = lt_max_pool2d(in[0], ctx, out, &idx);
  if (idx) lt_tensor_release(idx);
  return st;
}

static lt_status f_avg_pool(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_avg_pool2d(in[0], ctx, out);
}

static void test_pooling(void) {
  lt_pool2d_opts o[4] = {lt_pool2d_default_opts(2, 2), lt_pool2d_default_opts(3, 3),
                         lt_pool2d_default_opts(3, 2), lt_pool2d_default_opts(2, 2)};
  o[1].stride[0] = o[1].stride[1] = 2;
  o[1].padding[0] = o[1].padding[1] = 1;
  o[2].stride[0] = 2, o[2].stride[1] = 1;
  o[2].ceil_mode = true;
  o[2].count_include_pad = false;
  o[2].padding[0] = 1;
  o[3].dilation[0] = o[3].dilation[1] = 2;
  o[3].divisor_override = 3;
  for (int k = 0; k < 4; k++) {
    char name[64];
    lt_tensor *in[1] = {uniform(SHAPE(2, 2, 6, 5), 4, -1.0, 1.0, true)};
    snprintf(name, sizeof name, "max_pool2d config %d", k);
    CHECK(gradcheck(name, k == 0 ? "MaxPool2DBackward" : NULL, f_max_pool, in, 1, &o[k]));
    snprintf(name, sizeof name, "avg_pool2d config %d", k);
    CHECK(gradcheck(name, k == 0 ? "AvgPool2DBackward" : NULL, f_avg_pool, in, 1, &o[k]));
    release(in, 1);
  }
  lt_tensor *in3[1] = {uniform(SHAPE(3, 4, 4), 3, -1.0, 1.0, true)}; /* unbatched */
  CHECK(gradcheck("max_pool2d 3-D", NULL, f_max_pool, in3, 1, &o[0]));
  CHECK(gradcheck("avg_pool2d 3-D", NULL, f_avg_pool, in3, 1, &o[1]));
  release(in3, 1);
}

/* ---- normalisation ---- */

typedef struct bn_ctx {
  lt_tensor *running_mean, *running_var;
  bool training;
} bn_ctx;

static lt_status f_batch_norm(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const bn_ctx *c = vctx;
  return lt_batch_norm(in[0], c->running_mean, c->running_var, in[1], in[2], c->training, 0.1,
                       1e-5, out, NULL, NULL);
}

static void test_batch_norm(void) {
  for (int training = 1; training >= 0; training--) {
    bn_ctx c = {uniform(SHAPE(3), 1, -0.5, 0.5, false), uniform(SHAPE(3), 1, 0.5, 2.0, false),
                training};
    lt_tensor *in[3] = {randn_like_range(SHAPE(4, 3, 2, 2), 4, true),
                        uniform(SHAPE(3), 1, 0.5, 1.5, true), randn_like_range(SHAPE(3), 1, true)};
    CHECK(gradcheck(training ? "batch_norm training" : "batch_norm eval",
                    "NativeBatchNormBackward", f_batch_norm, in, 3, &c));
    /* the running statistics took part without being differentiated */
    CHECK(!c.running_mean->requires_grad && lt_is_leaf(c.running_mean));
    CHECK(c.running_mean->grad == NULL && c.running_var->grad == NULL);
    release(in, 3);
    /* no affine parameters, a [N, C] input */
    lt_tensor *in2[3] = {randn_like_range(SHAPE(5, 3), 2, true), NULL, NULL};
    CHECK(gradcheck(training ? "batch_norm training, no affine" : "batch_norm eval, no affine",
                    NULL, f_batch_norm, in2, 3, &c));
    release(in2, 3);
    lt_tensor_release(c.running_mean);
    lt_tensor_release(c.running_var);
  }
  /* training without running statistics */
  bn_ctx none = {NULL, NULL, true};
  lt_tensor *in[3] = {randn_like_range(SHAPE(3, 2, 3), 3, true), NULL,
                      randn_like_range(SHAPE(2), 1, true)};
  CHECK(gradcheck("batch_norm without running stats", NULL, f_batch_norm, in, 3, &none));
  release(in, 3);
}

typedef struct ln_ctx {
  int64_t shape[2];
  int ndim;
} ln_ctx;

static lt_status f_layer_norm(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const ln_ctx *c = vctx;
  return lt_layer_norm(in[0], c->shape, c->ndim, in[1], in[2], 1e-5, out, NULL, NULL);
}

static void test_layer_norm(void) {
  ln_ctx two = {{3, 4}, 2}, one = {{4}, 1};
  lt_tensor *in[3] = {randn_like_range(SHAPE(2, 3, 4), 3, true),
                      uniform(SHAPE(3, 4), 2, 0.5, 1.5, true), randn_like_range(SHAPE(3, 4), 2, true)};
  CHECK(gradcheck("layer_norm", "NativeLayerNormBackward", f_layer_norm, in, 3, &two));
  release(in, 3);
  lt_tensor *in2[3] = {randn_like_range(SHAPE(3, 4), 2, true), NULL, NULL};
  CHECK(gradcheck("layer_norm, no affine", NULL, f_layer_norm, in2, 3, &one));
  release(in2, 3);
}

/* ---- activations ---- */

static lt_status f_gelu(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_gelu(in[0], *(const lt_gelu_approx *)ctx, out);
}

typedef struct softmax_ctx {
  int64_t dim;
  bool log;
} softmax_ctx;

static lt_status f_softmax(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const softmax_ctx *c = vctx;
  return c->log ? lt_log_softmax(in[0], c->dim, out) : lt_softmax(in[0], c->dim, out);
}

typedef struct dropout_ctx {
  double p;
  bool training;
} dropout_ctx;

/* The same seed on every call, so that every evaluation draws the same mask. */
static lt_status f_dropout(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const dropout_ctx *c = vctx;
  lt_manual_seed(77);
  return lt_dropout(in[0], c->p, c->training, out, NULL);
}

static void test_activations(void) {
  const lt_gelu_approx approx[2] = {LT_GELU_NONE, LT_GELU_TANH};
  for (int k = 0; k < 2; k++) {
    lt_tensor *in[1] = {uniform(SHAPE(3, 4), 2, -3.0, 3.0, true)};
    CHECK(gradcheck(k ? "gelu tanh" : "gelu", "GeluBackward", f_gelu, in, 1, &approx[k]));
    release(in, 1);
  }
  const softmax_ctx sm[4] = {{1, false}, {-1, false}, {1, true}, {0, true}};
  const char *names[4] = {"softmax dim 1", "softmax dim -1", "log_softmax dim 1",
                          "log_softmax dim 0"};
  for (int k = 0; k < 4; k++) {
    lt_tensor *in[1] = {uniform(SHAPE(3, 4, 2), 3, -2.0, 2.0, true)};
    CHECK(gradcheck(names[k], k == 0 ? "SoftmaxBackward" : k == 2 ? "LogSoftmaxBackward" : NULL,
                    f_softmax, in, 1, &sm[k]));
    release(in, 1);
  }
  const dropout_ctx dr[3] = {{0.4, true}, {0.4, false}, {1.0, true}};
  for (int k = 0; k < 3; k++) {
    lt_tensor *in[1] = {randn_like_range(SHAPE(4, 5), 2, true)};
    CHECK(gradcheck("dropout", k == 0 ? "NativeDropoutBackward" : NULL, f_dropout, in, 1, &dr[k]));
    release(in, 1);
  }
}

/* ---- losses ---- */

typedef struct class_ctx {
  lt_tensor *target, *weight;
  lt_class_loss_opts o;
} class_ctx;

static lt_status f_cross_entropy(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const class_ctx *c = vctx;
  return lt_cross_entropy(in[0], c->target, c->weight, &c->o, out, NULL);
}

static lt_status f_nll_loss(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const class_ctx *c = vctx;
  return lt_nll_loss(in[0], c->target, c->weight, &c->o, out);
}

static void test_class_losses(void) {
  const lt_reduction reductions[3] = {LT_REDUCTION_MEAN, LT_REDUCTION_SUM, LT_REDUCTION_NONE};
  lt_tensor *weight = uniform(SHAPE(5), 1, 0.5, 2.0, false);
  for (int r = 0; r < 3; r++) {
    for (int variant = 0; variant < 3; variant++) {
      /* 0: plain; 1: class weights and an ignored label; 2: smoothing, labels from 1 */
      class_ctx c = {NULL, variant == 1 ? weight : NULL, lt_class_loss_default_opts()};
      c.o.reduction = reductions[r];
      if (variant == 1) c.o.ignore_index = -100;
      if (variant == 2) c.o.label_smoothing = 0.1, c.o.index_base = 1;
      const int64_t v0[4] = {3, 0, 4, 1}, v1[4] = {3, -100, 4, 0}, v2[4] = {4, 1, 5, 2};
      c.target = labels(SHAPE(4), 1, variant == 0 ? v0 : variant == 1 ? v1 : v2);
      lt_tensor *in[1] = {uniform(SHAPE(4, 5), 2, -2.0, 2.0, true)};
      char name[80];
      snprintf(name, sizeof name, "cross_entropy reduction %d variant %d", (int)reductions[r],
               variant);
      CHECK(gradcheck(name, "CrossEntropyLossBackward", f_cross_entropy, in, 1, &c));
      if (variant < 2) {
        snprintf(name, sizeof name, "nll_loss reduction %d variant %d", (int)reductions[r],
                 variant);
        CHECK(gradcheck(name, "NllLossBackward", f_nll_loss, in, 1, &c));
      }
      release(in, 1);
      lt_tensor_release(c.target);
    }
  }
  /* [N, C, d] logits with [N, d] labels, weighted and smoothed */
  class_ctx k = {labels(SHAPE(2, 3), 2, (const int64_t[]){0, 2, 4, 1, 3, 0}), weight,
                 lt_class_loss_default_opts()};
  k.o.label_smoothing = 0.2;
  lt_tensor *in[1] = {uniform(SHAPE(2, 5, 3), 3, -2.0, 2.0, true)};
  CHECK(gradcheck("cross_entropy [N, C, d]", NULL, f_cross_entropy, in, 1, &k));
  CHECK(gradcheck("nll_loss [N, C, d]", NULL, f_nll_loss, in, 1,
                  &(class_ctx){k.target, weight, lt_class_loss_default_opts()}));
  release(in, 1);
  lt_tensor_release(k.target);
  lt_tensor_release(weight);
}

static lt_status f_mse(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  return lt_mse_loss(in[0], in[1], *(const lt_reduction *)ctx, out);
}

static void test_mse(void) {
  const lt_reduction reductions[3] = {LT_REDUCTION_MEAN, LT_REDUCTION_SUM, LT_REDUCTION_NONE};
  for (int r = 0; r < 3; r++) {
    lt_tensor *in[2] = {randn_like_range(SHAPE(3, 4), 2, true),
                        randn_like_range(SHAPE(3, 4), 2, true)};
    CHECK(gradcheck("mse_loss", "MseLossBackward", f_mse, in, 2, &reductions[r]));
    release(in, 2);
  }
  lt_tensor *in[2] = {randn_like_range(SHAPE(3, 4), 2, true), randn_like_range(SHAPE(4), 1, true)};
  CHECK(gradcheck("mse_loss broadcast target", NULL, f_mse, in, 2, &reductions[0]));
  release(in, 2);
}

/* ---- gathers ---- */

typedef struct gather_ctx {
  lt_tensor *indices;
  lt_embedding_opts o;
  int dim;
} gather_ctx;

static lt_status f_embedding(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const gather_ctx *c = vctx;
  return lt_embedding(in[0], c->indices, &c->o, out);
}

static lt_status f_index_select(lt_tensor *const *in, const void *vctx, lt_tensor **out) {
  const gather_ctx *c = vctx;
  return lt_index_select(in[0], c->dim, c->indices, c->o.index_base, out);
}

static void test_gathers(void) {
  gather_ctx e = {labels(SHAPE(2, 3), 2, (const int64_t[]){1, 3, 1, 0, 5, 3}), {0, false, 0}, 0};
  lt_tensor *in[1] = {randn_like_range(SHAPE(6, 3), 2, true)};
  CHECK(gradcheck("embedding", "EmbeddingBackward", f_embedding, in, 1, &e));
  /* padding_idx 3 (1-based labels 2, 4, ...): its row gets no gradient */
  gather_ctx p = {labels(SHAPE(4), 1, (const int64_t[]){2, 4, 4, 6}), {1, true, 4}, 0};
  lt_tensor *y = NULL, *loss = NULL;
  lt_tensor_release(in[0]->grad);
  in[0]->grad = NULL;
  CHECK(lt_embedding(in[0], p.indices, &p.o, &y) == LT_OK);
  CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  for (int64_t j = 0; j < 3; j++) {
    CHECK(gc_element(in[0]->grad, 3 * 3 + j) == 0.0); /* row 4 (1-based): padding */
    CHECK(gc_element(in[0]->grad, 1 * 3 + j) == 1.0); /* row 2: once */
    CHECK(gc_element(in[0]->grad, 5 * 3 + j) == 1.0); /* row 6: once */
  }
  release(&y, 1);
  release(&loss, 1);
  release(in, 1);
  lt_tensor_release(e.indices);
  lt_tensor_release(p.indices);

  gather_ctx s = {labels(SHAPE(3), 1, (const int64_t[]){3, 1, 3}), {1, false, 0}, 1};
  lt_tensor *t[1] = {randn_like_range(SHAPE(2, 4, 3), 3, true)};
  CHECK(gradcheck("index_select dim 2 (1-based)", "IndexSelectBackward", f_index_select, t, 1, &s));
  s.dim = 2;
  CHECK(gradcheck("index_select last dim", NULL, f_index_select, t, 1, &s));
  s.dim = 0;
  s.o.index_base = 0;
  lt_tensor_release(s.indices);
  s.indices = labels(SHAPE(3), 1, (const int64_t[]){1, 1, 0});
  CHECK(gradcheck("index_select dim 1", NULL, f_index_select, t, 1, &s));
  release(t, 1);
  lt_tensor_release(s.indices);
}

/* ---- memory, in-place writes, no_grad ---- */

/* conv -> max_pool -> linear -> cross_entropy, as a small CNN step. */
static lt_status cnn_loss(lt_tensor *const *p, const lt_tensor *x, const lt_tensor *target,
                          lt_tensor **loss) {
  lt_conv2d_opts co = lt_conv2d_default_opts();
  co.padding[0] = co.padding[1] = 1;
  lt_pool2d_opts po = lt_pool2d_default_opts(2, 2);
  lt_class_loss_opts lo = lt_class_loss_default_opts();
  lt_tensor *c = NULL, *r = NULL, *m = NULL, *idx = NULL, *f = NULL, *z = NULL;
  lt_status st = lt_conv2d(x, p[0], p[1], &co, &c);
  if (st == LT_OK) st = lt_unary(LT_OP_RELU, c, &r);
  if (st == LT_OK) st = lt_max_pool2d(r, &po, &m, &idx);
  if (st == LT_OK) st = lt_flatten(m, 1, 3, &f);
  if (st == LT_OK) st = lt_linear(f, p[2], p[3], &z);
  if (st == LT_OK) st = lt_cross_entropy(z, target, NULL, &lo, loss, NULL);
  lt_tensor *tmp[6] = {c, r, m, idx, f, z};
  release(tmp, 6);
  return st;
}

static void test_graph_memory(void) {
  lt_tensor *p[4] = {randn_like_range(SHAPE(4, 2, 3, 3), 4, true),
                     randn_like_range(SHAPE(4), 1, true),
                     randn_like_range(SHAPE(3, 4 * 3 * 3), 2, true),
                     randn_like_range(SHAPE(3), 1, true)};
  lt_tensor *x = randn_like_range(SHAPE(5, 2, 6, 6), 4, false);
  lt_tensor *target = labels(SHAPE(5), 1, (const int64_t[]){0, 2, 1, 1, 0});
  const size_t start = allocated();
  const size_t start_activation = activation_bytes();

  /* The bytes of one loss tensor, measured rather than assumed. */
  lt_tensor *probe = NULL;
  const int64_t no_dims[1] = {0};
  lt_zeros(no_dims, 0, LT_FLOAT64, lt_cpu(), &probe);
  const size_t loss_bytes = allocated() - start;
  lt_tensor_release(probe);

  lt_tensor *loss = NULL;
  CHECK(cnn_loss(p, x, target, &loss) == LT_OK);
  CHECK_EQ_STR(lt_grad_fn_name(loss), "CrossEntropyLossBackward");
  CHECK(allocated() > start + loss_bytes);              /* the graph holds its saved tensors */
  CHECK(activation_bytes() > start_activation);         /* counted as activations */
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  for (int k = 0; k < 4; k++) CHECK(p[k]->grad != NULL);
  for (int k = 0; k < 4; k++) lt_tensor_release(p[k]->grad), p[k]->grad = NULL;
  /* Backward gave back everything but the loss itself. */
  CHECK_EQ_INT(allocated(), start + loss_bytes);
  lt_tensor_release(loss);
  CHECK_EQ_INT(allocated(), start);

  /* Dropping an unused graph gives its memory back too. */
  CHECK(cnn_loss(p, x, target, &loss) == LT_OK);
  lt_tensor_release(loss);
  CHECK_EQ_INT(allocated(), start);

  /* retain_graph keeps it for a second backward, with equal gradients. */
  CHECK(cnn_loss(p, x, target, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, true) == LT_OK);
  const double first = gc_element(p[0]->grad, 0);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(fabs(gc_element(p[0]->grad, 0) - 2 * first) <= 1e-12 * (1 + fabs(first)));
  CHECK(lt_backward(loss, NULL, false) != LT_OK); /* freed by the second one */
  CHECK(strstr(lt_last_error(), "second time") != NULL);
  lt_tensor_release(loss);
  for (int k = 0; k < 4; k++) lt_tensor_release(p[k]->grad), p[k]->grad = NULL;
  CHECK_EQ_INT(allocated(), start);

  /* In no_grad mode: nothing recorded, nothing saved. */
  const bool mode = lt_set_grad_enabled(false);
  CHECK(cnn_loss(p, x, target, &loss) == LT_OK);
  CHECK(lt_is_leaf(loss) && !loss->requires_grad);
  CHECK_EQ_INT(allocated(), start + loss_bytes);
  lt_tensor_release(loss);
  lt_set_grad_enabled(mode);
  CHECK_EQ_INT(allocated(), start);

  release(p, 4);
  lt_tensor_release(x);
  lt_tensor_release(target);
}

/* Each op in no_grad mode: a leaf result that does not require grad. */
static void test_no_grad_records_nothing(void) {
  lt_tensor *x = randn_like_range(SHAPE(2, 3, 4, 4), 4, true);
  lt_tensor *w = randn_like_range(SHAPE(3, 3, 3, 3), 4, true);
  lt_tensor *v = randn_like_range(SHAPE(3), 1, true);
  lt_tensor *lw = randn_like_range(SHAPE(5, 4), 2, true);
  lt_tensor *target = labels(SHAPE(2, 4, 4), 3, (const int64_t[32]){0});
  lt_tensor *ids = labels(SHAPE(2), 1, (const int64_t[]){1, 0});
  const bool mode = lt_set_grad_enabled(false);
  lt_conv2d_opts co = lt_conv2d_default_opts();
  lt_pool2d_opts po = lt_pool2d_default_opts(2, 2);
  lt_class_loss_opts lo = lt_class_loss_default_opts();
  lt_embedding_opts eo = {0, false, 0};
  const int64_t ln_shape[1] = {4};
  lt_tensor *r[14] = {NULL};
  CHECK(lt_linear(x, lw, NULL, &r[0]) == LT_OK);
  CHECK(lt_conv2d(x, w, v, &co, &r[1]) == LT_OK);
  CHECK(lt_max_pool2d(x, &po, &r[2], &r[3]) == LT_OK);
  CHECK(lt_avg_pool2d(x, &po, &r[4]) == LT_OK);
  CHECK(lt_batch_norm(x, NULL, NULL, v, v, true, 0.1, 1e-5, &r[5], NULL, NULL) == LT_OK);
  CHECK(lt_layer_norm(x, ln_shape, 1, NULL, NULL, 1e-5, &r[6], NULL, NULL) == LT_OK);
  CHECK(lt_gelu(x, LT_GELU_NONE, &r[7]) == LT_OK);
  CHECK(lt_softmax(x, 1, &r[8]) == LT_OK);
  CHECK(lt_log_softmax(x, 1, &r[9]) == LT_OK);
  CHECK(lt_dropout(x, 0.5, true, &r[10], NULL) == LT_OK);
  CHECK(lt_cross_entropy(x, target, NULL, &lo, &r[11], NULL) == LT_OK);
  CHECK(lt_mse_loss(x, x, LT_REDUCTION_MEAN, &r[12]) == LT_OK);
  CHECK(lt_embedding(lw, ids, &eo, &r[13]) == LT_OK);
  lt_set_grad_enabled(mode);
  for (int k = 0; k < 14; k++)
    if (k != 3) CHECK(r[k] && lt_is_leaf(r[k]) && !r[k]->requires_grad);
  release(r, 14);
  lt_tensor *in[6] = {x, w, v, lw, target, ids};
  release(in, 6);
}

/* A saved tensor written in place: backward names the node and the write. */
static void test_inplace_on_saved(void) {
  lt_tensor *x = randn_like_range(SHAPE(2, 3), 2, true), *y = NULL, *loss = NULL;
  CHECK(lt_softmax(x, 1, &y) == LT_OK);
  CHECK(lt_unary_(LT_OP_EXP, y) == LT_OK); /* softmax saved its output */
  CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "SoftmaxBackward") != NULL);
  CHECK(strstr(lt_last_error(), "exp_") != NULL);
  lt_tensor *t[3] = {x, y, loss};
  release(t, 3);
}

int main(void) {
  test_linear();
  test_conv2d();
  test_pooling();
  test_batch_norm();
  test_layer_norm();
  test_activations();
  test_class_losses();
  test_mse();
  test_gathers();
  test_graph_memory();
  test_no_grad_records_nothing();
  test_inplace_on_saved();
  return check_summary("test_nn_autograd");
}
