/* Recording the nn ops (lt/nn.h) and index_select on the tape. The op entry
 * points run their forward with grad mode off (so that the conversions inside
 * leave no throwaway nodes), restore the mode, then call one of these, which
 * decides for itself whether anything is recorded (grad mode on, a floating
 * input that requires grad) and returns LT_OK at once when not.
 *
 * Each node saves exactly what the matching lt_*_backward takes (the extra
 * results such as pooling indices or batch statistics included) and calls it
 * with the ag_needs flags of its inputs. The formulas live in
 * autograd/formulas_nn_*.c and autograd/formulas_index.c. */
#ifndef LT_AUTOGRAD_RECORD_NN_H
#define LT_AUTOGRAD_RECORD_NN_H

#include "lt/attention.h"
#include "lt/nn.h"

/* ---- layers (formulas_nn_layers.c) ---- */
lt_status ag_record_linear(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                           lt_tensor *r);
lt_status ag_record_conv2d(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                           const lt_conv2d_opts *o, lt_tensor *r);
lt_status ag_record_max_pool2d(const lt_tensor *x, const lt_tensor *indices, lt_tensor *r);
lt_status ag_record_avg_pool2d(const lt_tensor *x, const lt_pool2d_opts *o, lt_tensor *r);

/* ---- normalisation (formulas_nn_norm.c) ---- */
/* The running statistics are no inputs: their update is not differentiable. */
lt_status ag_record_batch_norm(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                               const lt_tensor *save_mean, const lt_tensor *save_invstd,
                               bool training, lt_tensor *r);
lt_status ag_record_layer_norm(const lt_tensor *x, int normalized_ndim, const lt_tensor *weight,
                               const lt_tensor *bias, const lt_tensor *mean,
                               const lt_tensor *rstd, lt_tensor *r);

/* ---- activations (formulas_nn_activation.c) ---- */
lt_status ag_record_gelu(const lt_tensor *x, lt_gelu_approx approx, lt_tensor *r);
/* dim 0-based (negative allowed); r is saved (backward takes the output). */
lt_status ag_record_softmax(const lt_tensor *x, int64_t dim, bool log, lt_tensor *r);
/* mask NULL: the output is x's values and the gradient passes through. */
lt_status ag_record_dropout(const lt_tensor *x, const lt_tensor *mask, double p, lt_tensor *r);

/* ---- attention (formulas_nn_attention.c) ---- */
/* Saves q, k, v, the mask, the output r and lse, and the draw: backward
 * recomputes the probabilities from them (no L x S tensor is kept). The mask
 * takes no gradient. */
lt_status ag_record_attention(const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                              const lt_attention_opts *o, lt_attention_draw draw,
                              const lt_tensor *lse, lt_tensor *r);

/* ---- losses (formulas_nn_loss.c) ---- */
/* Only the input (logits, log_probs, a and b) is differentiable: targets are
 * labels and class weights take no gradient, as in PyTorch. */
lt_status ag_record_cross_entropy(const lt_tensor *logits, const lt_tensor *target,
                                  const lt_tensor *weight, const lt_tensor *logsumexp,
                                  const lt_class_loss_opts *o, lt_tensor *r);
lt_status ag_record_nll_loss(const lt_tensor *log_probs, const lt_tensor *target,
                             const lt_tensor *weight, const lt_class_loss_opts *o, lt_tensor *r);
lt_status ag_record_mse_loss(const lt_tensor *a, const lt_tensor *b, lt_reduction reduction,
                             lt_tensor *r);

/* ---- gathers (formulas_index.c) ---- */
lt_status ag_record_embedding(const lt_tensor *weight, const lt_tensor *indices,
                              const lt_embedding_opts *o, lt_tensor *r);
/* dim 0-based; index as lt_index_select took it (int64 or int32, 1-D or 0-dim). */
lt_status ag_record_index_select(const lt_tensor *t, int dim, const lt_tensor *index,
                                 int64_t index_base, lt_tensor *r);

#endif
