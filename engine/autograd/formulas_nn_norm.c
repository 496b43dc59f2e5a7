/* Gradients of batch_norm and layer_norm from the statistics their forward
 * computed (batch or running statistics; per-row mean and rstd). */
#include "autograd/formulas_nn.h"

enum { SAVED_X = 0, SAVED_WEIGHT = 1, SAVED_MEAN = 2, SAVED_SPREAD = 3 };
enum { IN_X = 0, IN_WEIGHT = 1, IN_BIAS = 2 };

/* ---- batch_norm: flag[0] training ---- */

static lt_status batch_norm_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_batch_norm_backward(grad_out[0], ag_saved_tensor(n, SAVED_X),
                                ag_saved_tensor(n, SAVED_WEIGHT), ag_saved_tensor(n, SAVED_MEAN),
                                ag_saved_tensor(n, SAVED_SPREAD), n->p.flag[0],
                                ag_needs(n, IN_X), ag_needs(n, IN_WEIGHT), ag_needs(n, IN_BIAS),
                                &grad_in[IN_X], &grad_in[IN_WEIGHT], &grad_in[IN_BIAS]);
}

lt_status ag_record_batch_norm(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                               const lt_tensor *save_mean, const lt_tensor *save_invstd,
                               bool training, lt_tensor *r) {
  const lt_tensor *ins[3] = {x, weight, bias};
  lt_status st;
  ag_node *n = ag_nn_node("NativeBatchNormBackward", batch_norm_backward, ins, 3, r, &st);
  if (!n) return st;
  n->p.flag[0] = training;
  st = ag_nn_save(n, st, SAVED_X, x);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight); /* NULL: no affine weight */
  st = ag_nn_save(n, st, SAVED_MEAN, save_mean);
  st = ag_nn_save(n, st, SAVED_SPREAD, save_invstd);
  return ag_nn_finish(n, st, r);
}

/* ---- layer_norm: p.i[0] the number of normalised dims ---- */

static lt_status layer_norm_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_layer_norm_backward(grad_out[0], ag_saved_tensor(n, SAVED_X), (int)n->p.i[0],
                                ag_saved_tensor(n, SAVED_MEAN), ag_saved_tensor(n, SAVED_SPREAD),
                                ag_saved_tensor(n, SAVED_WEIGHT), ag_needs(n, IN_X),
                                ag_needs(n, IN_WEIGHT), ag_needs(n, IN_BIAS), &grad_in[IN_X],
                                &grad_in[IN_WEIGHT], &grad_in[IN_BIAS]);
}

lt_status ag_record_layer_norm(const lt_tensor *x, int normalized_ndim, const lt_tensor *weight,
                               const lt_tensor *bias, const lt_tensor *mean,
                               const lt_tensor *rstd, lt_tensor *r) {
  const lt_tensor *ins[3] = {x, weight, bias};
  lt_status st;
  ag_node *n = ag_nn_node("NativeLayerNormBackward", layer_norm_backward, ins, 3, r, &st);
  if (!n) return st;
  n->p.i[0] = normalized_ndim;
  n->p.ni = 1;
  st = ag_nn_save(n, st, SAVED_X, x);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight);
  st = ag_nn_save(n, st, SAVED_MEAN, mean);
  st = ag_nn_save(n, st, SAVED_SPREAD, rstd);
  return ag_nn_finish(n, st, r);
}
