/* Neural-network ops: layers, normalisation, activations and losses, each as a
 * forward and the backward(s) autograd calls. They follow PyTorch's
 * semantics (torch.nn.functional) and validate like every other op: a bad
 * shape, dtype, device or index returns an error naming the op and the
 * values. Every result is a new tensor the caller owns (one reference).
 *
 * Backward functions take exactly what their forward saved (inputs, the
 * extra results such as indices or statistics, the options) plus the
 * upstream gradient, and compute only the gradients flagged as needed; the
 * others are left NULL.
 *
 * dtypes: float32 and float64 natively; float16 and bfloat16 compute in
 * float32 and round the results once. All floating operands of one op share
 * a dtype (normalisation parameters may be float32 for a 16-bit input).
 * Index tensors (targets, argmax indices, embedding indices) are int64.
 *
 * Class labels and embedding indices are given with an index_base: the Lua
 * layer passes 1 (its users count from 1), engine callers 0. */
#ifndef LT_NN_H
#define LT_NN_H

#include "lt/api.h"

#include <stdbool.h>
#include <stdint.h>

#include "lt/tensor.h"

/* ---- linear: y = x W^T + b ---- */

/* x [..., in], weight [out, in], bias [out] or NULL -> [..., out]. */
LT_API lt_status lt_linear(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                    lt_tensor **out);
/* grad_x [..., in], grad_weight [out, in], grad_bias [out]. */
LT_API lt_status lt_linear_backward(const lt_tensor *grad_out, const lt_tensor *x,
                             const lt_tensor *weight, bool need_x, bool need_weight,
                             bool need_bias, lt_tensor **grad_x, lt_tensor **grad_weight,
                             lt_tensor **grad_bias);

/* Gradients that already exist (a leaf's .grad) for lt_linear_backward_into
 * to add the new ones into in place, without a temporary the size of the
 * weight: each used when it can be written as the op computes (float32 or
 * float64 like x, contiguous, the parameter's shape and device, sharing no
 * memory with the operands). *_added says which were; their grad_* out is
 * then NULL. NULL targets: none. */
typedef struct lt_linear_targets {
  lt_tensor *weight, *bias;
  bool weight_added, bias_added;
} lt_linear_targets;

LT_API lt_status lt_linear_backward_into(const lt_tensor *grad_out, const lt_tensor *x,
                                  const lt_tensor *weight, bool need_x, bool need_weight,
                                  bool need_bias, lt_tensor **grad_x, lt_tensor **grad_weight,
                                  lt_tensor **grad_bias, lt_linear_targets *targets);

/* ---- conv2d ---- */

typedef struct lt_conv2d_opts {
  int64_t stride[2];   /* height, width */
  int64_t padding[2];  /* zeros on both sides */
  int64_t dilation[2];
  int64_t groups;
} lt_conv2d_opts;

/* stride 1, padding 0, dilation 1, groups 1. */
LT_API lt_conv2d_opts lt_conv2d_default_opts(void);
/* The options' own checks (positive stride, dilation and groups, padding not
 * negative, sizes within the engine's window limit), as lt_conv2d makes them,
 * for a module that checks its options when made: op names it ("Conv2d"). */
LT_API lt_status lt_conv2d_check_opts(const char *op, const lt_conv2d_opts *o);

/* x [N, C, H, W], weight [O, C / groups, kh, kw], bias [O] or NULL ->
 * [N, O, Ho, Wo] with Ho = (H + 2 pad - dil (kh - 1) - 1) / stride + 1. */
LT_API lt_status lt_conv2d(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                    const lt_conv2d_opts *o, lt_tensor **out);
LT_API lt_status lt_conv2d_backward(const lt_tensor *grad_out, const lt_tensor *x,
                             const lt_tensor *weight, const lt_conv2d_opts *o, bool need_input,
                             bool need_weight, bool need_bias, lt_tensor **grad_input,
                             lt_tensor **grad_weight, lt_tensor **grad_bias);

/* ---- pooling (input [N, C, H, W] or [C, H, W]) ---- */

typedef struct lt_pool2d_opts {
  int64_t kernel[2];
  int64_t stride[2];   /* the kernel size by default (PyTorch's) */
  int64_t padding[2];  /* at most half the kernel */
  int64_t dilation[2]; /* max_pool2d only */
  bool ceil_mode;      /* round the output size up (the last window must
                          still start inside the input or its left padding) */
  bool count_include_pad;   /* avg_pool2d: padded zeros count in the divisor */
  int64_t divisor_override; /* avg_pool2d: 0 for none */
} lt_pool2d_opts;

/* kernel k x k, stride = kernel, no padding, dilation 1, floor mode,
 * count_include_pad true. */
LT_API lt_pool2d_opts lt_pool2d_default_opts(int64_t kh, int64_t kw);
/* The options' own checks, as lt_max_pool2d (is_max) or lt_avg_pool2d make
 * them, for a module that checks its options when made. */
LT_API lt_status lt_pool2d_check_opts(const char *op, const lt_pool2d_opts *o, bool is_max);

/* out and indices (int64, the argmax's flat position h * W + w within its
 * input plane, 0-based) of the pooled shape. NaN wins, as in PyTorch. */
LT_API lt_status lt_max_pool2d(const lt_tensor *x, const lt_pool2d_opts *o, lt_tensor **out,
                        lt_tensor **indices);
/* Scatters grad_out to the saved indices: grad_input has input_shape. */
LT_API lt_status lt_max_pool2d_backward(const lt_tensor *grad_out, const lt_tensor *indices,
                                 const int64_t *input_shape, int input_ndim,
                                 lt_tensor **grad_input);
LT_API lt_status lt_avg_pool2d(const lt_tensor *x, const lt_pool2d_opts *o, lt_tensor **out);
LT_API lt_status lt_avg_pool2d_backward(const lt_tensor *grad_out, const int64_t *input_shape,
                                 int input_ndim, const lt_pool2d_opts *o,
                                 lt_tensor **grad_input);

/* ---- batch_norm (x [N, C, ...]) ---- */

/* training: normalises with the batch's mean and biased variance and, when
 * running stats are given, updates them in place (running = (1 - momentum)
 * running + momentum batch, with the unbiased variance). eval: normalises
 * with the running stats (required then). weight, bias: [C] or NULL.
 * save_mean and save_invstd ([C]) are what backward needs: the batch's
 * statistics in training, the running ones in eval. */
LT_API lt_status lt_batch_norm(const lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                        const lt_tensor *weight, const lt_tensor *bias, bool training,
                        double momentum, double eps, lt_tensor **out, lt_tensor **save_mean,
                        lt_tensor **save_invstd);
LT_API lt_status lt_batch_norm_backward(const lt_tensor *grad_out, const lt_tensor *x,
                                 const lt_tensor *weight, const lt_tensor *save_mean,
                                 const lt_tensor *save_invstd, bool training, bool need_input,
                                 bool need_weight, bool need_bias, lt_tensor **grad_input,
                                 lt_tensor **grad_weight, lt_tensor **grad_bias);

/* ---- layer_norm over the last normalized_ndim dims ---- */

/* weight, bias: normalized_shape or NULL. mean and rstd have x's shape with
 * the normalised dims set to 1. */
LT_API lt_status lt_layer_norm(const lt_tensor *x, const int64_t *normalized_shape, int normalized_ndim,
                        const lt_tensor *weight, const lt_tensor *bias, double eps,
                        lt_tensor **out, lt_tensor **mean, lt_tensor **rstd);
LT_API lt_status lt_layer_norm_backward(const lt_tensor *grad_out, const lt_tensor *x,
                                 int normalized_ndim, const lt_tensor *mean,
                                 const lt_tensor *rstd, const lt_tensor *weight,
                                 bool need_input, bool need_weight, bool need_bias,
                                 lt_tensor **grad_input, lt_tensor **grad_weight,
                                 lt_tensor **grad_bias);

/* ---- activations ---- */

typedef enum lt_gelu_approx { LT_GELU_NONE = 0, LT_GELU_TANH } lt_gelu_approx;

LT_API lt_status lt_gelu(const lt_tensor *x, lt_gelu_approx approx, lt_tensor **out);
LT_API lt_status lt_gelu_backward(const lt_tensor *grad_out, const lt_tensor *x, lt_gelu_approx approx,
                           lt_tensor **grad_input);

/* Over dim (0-based, negative counts from the end). Backward takes the
 * forward's output. */
LT_API lt_status lt_softmax(const lt_tensor *x, int64_t dim, lt_tensor **out);
LT_API lt_status lt_softmax_backward(const lt_tensor *grad_out, const lt_tensor *out, int64_t dim,
                              lt_tensor **grad_input);
LT_API lt_status lt_log_softmax(const lt_tensor *x, int64_t dim, lt_tensor **out);
LT_API lt_status lt_log_softmax_backward(const lt_tensor *grad_out, const lt_tensor *out, int64_t dim,
                                  lt_tensor **grad_input);

/* Training with 0 < p: mask (bool) ~ Bernoulli(1 - p) from lt's generator,
 * out = x * mask / (1 - p) (zeros when p is 1). Otherwise out shares x's
 * storage and *mask is NULL. */
LT_API lt_status lt_dropout(const lt_tensor *x, double p, bool training, lt_tensor **out,
                     lt_tensor **mask);
/* In place (F.dropout's inplace): the same draw and scaling written into x,
 * whose version is bumped, so no result of x's size is allocated; the mask
 * is still made, and saved for backward. Training false or p 0 leaves x as
 * it is (*mask NULL). In grad mode a leaf that requires grad is refused, as
 * by every in-place op. */
LT_API lt_status lt_dropout_(lt_tensor *x, double p, bool training, lt_tensor **mask);
/* mask NULL: the gradient passes through (a view of grad_out). */
LT_API lt_status lt_dropout_backward(const lt_tensor *grad_out, const lt_tensor *mask, double p,
                              lt_tensor **grad_input);

/* ---- losses ---- */

typedef enum lt_reduction {
  LT_REDUCTION_NONE = 0,
  LT_REDUCTION_MEAN,
  LT_REDUCTION_SUM
} lt_reduction;

/* Class-index losses. Targets are compared with ignore_index as given (in the
 * caller's base); other targets must lie in [index_base, index_base + C). */
typedef struct lt_class_loss_opts {
  lt_reduction reduction;
  int64_t ignore_index;   /* PyTorch's default is -100 */
  double label_smoothing; /* cross_entropy only, in [0, 1] */
  int64_t index_base;
} lt_class_loss_opts;

/* reduction mean, ignore_index -100, no smoothing, base 0. */
LT_API lt_class_loss_opts lt_class_loss_default_opts(void);

/* log_softmax over dim 1 and the negative log likelihood in one pass.
 * logits [N, C] or [N, C, d...] (or [C] with a 0-dim target), target int64
 * [N] / [N, d...], weight [C] or NULL. loss: 0-dim for mean/sum, target's
 * shape for none. logsumexp (target's shape, logits' dtype) is saved for
 * backward, which rebuilds the softmax from it. */
LT_API lt_status lt_cross_entropy(const lt_tensor *logits, const lt_tensor *target,
                           const lt_tensor *weight, const lt_class_loss_opts *o,
                           lt_tensor **loss, lt_tensor **logsumexp);
LT_API lt_status lt_cross_entropy_backward(const lt_tensor *grad_loss, const lt_tensor *logits,
                                    const lt_tensor *target, const lt_tensor *weight,
                                    const lt_tensor *logsumexp, const lt_class_loss_opts *o,
                                    lt_tensor **grad_logits);

/* log_probs as cross_entropy's logits; label_smoothing must be 0. */
LT_API lt_status lt_nll_loss(const lt_tensor *log_probs, const lt_tensor *target,
                      const lt_tensor *weight, const lt_class_loss_opts *o, lt_tensor **loss);
LT_API lt_status lt_nll_loss_backward(const lt_tensor *grad_loss, const lt_tensor *log_probs,
                               const lt_tensor *target, const lt_tensor *weight,
                               const lt_class_loss_opts *o, lt_tensor **grad_log_probs);

/* (a - b)^2 with broadcasting, reduced. Backward gives the gradients of a
 * and b (each in its own shape). */
LT_API lt_status lt_mse_loss(const lt_tensor *a, const lt_tensor *b, lt_reduction reduction,
                      lt_tensor **loss);
LT_API lt_status lt_mse_loss_backward(const lt_tensor *grad_loss, const lt_tensor *a,
                               const lt_tensor *b, lt_reduction reduction, bool need_a,
                               bool need_b, lt_tensor **grad_a, lt_tensor **grad_b);

/* ---- embedding ---- */

/* Rows of weight [n, d] picked by indices (int64, any shape; values in
 * [index_base, index_base + n)) -> indices' shape + [d]. padding_idx (in
 * the indices' base; negative counts from the end as in PyTorch) marks the
 * row whose gradient stays zero; has_padding_idx false for none. */
typedef struct lt_embedding_opts {
  int64_t index_base;
  bool has_padding_idx;
  int64_t padding_idx;
} lt_embedding_opts;

LT_API lt_status lt_embedding(const lt_tensor *weight, const lt_tensor *indices,
                       const lt_embedding_opts *o, lt_tensor **out);
/* The dense [num_weights, d] gradient of the weight. */
LT_API lt_status lt_embedding_backward(const lt_tensor *grad_out, const lt_tensor *indices,
                                int64_t num_weights, const lt_embedding_opts *o,
                                lt_tensor **grad_weight);

#endif
