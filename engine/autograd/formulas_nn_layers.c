/* Gradients of linear, conv2d and the 2-D poolings: each node hands its
 * saved tensors and options to the matching lt_*_backward of lt/nn.h. */
#include "autograd/formulas_nn.h"

enum { SAVED_X = 0, SAVED_WEIGHT = 1, SAVED_INDICES = 0 };
enum { IN_X = 0, IN_WEIGHT = 1, IN_BIAS = 2 };

/* ---- linear ---- */

/* A weight (and bias) that already has a gradient gets the new one added by
 * the GEMM itself (beta = 1), as gradient accumulation over micro-batches
 * does: no temporary the size of the weight. */
static lt_status linear_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  lt_linear_targets targets = {.weight = ag_grad_target(n, IN_WEIGHT),
                               .bias = ag_grad_target(n, IN_BIAS)};
  lt_status st = lt_linear_backward_into(
      grad_out[0], ag_saved_tensor(n, SAVED_X), ag_saved_tensor(n, SAVED_WEIGHT),
      ag_needs(n, IN_X), ag_needs(n, IN_WEIGHT), ag_needs(n, IN_BIAS), &grad_in[IN_X],
      &grad_in[IN_WEIGHT], &grad_in[IN_BIAS], &targets);
  if (targets.weight_added) n->added_in_place |= 1u << IN_WEIGHT;
  if (targets.bias_added) n->added_in_place |= 1u << IN_BIAS;
  return st;
}

lt_status ag_record_linear(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                           lt_tensor *r) {
  const lt_tensor *ins[3] = {x, weight, bias};
  lt_status st;
  ag_node *n = ag_nn_node("LinearBackward", linear_backward, ins, 3, r, &st);
  if (!n) return st;
  /* The backward reads both shapes whichever gradient it computes. */
  st = ag_nn_save(n, st, SAVED_X, x);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight);
  return ag_nn_finish(n, st, r);
}

/* ---- conv2d: options in p.i as stride, padding, dilation (h, w each), groups ---- */

static void store_conv_opts(ag_params *p, const lt_conv2d_opts *o) {
  for (int d = 0; d < 2; d++) {
    p->i[d] = o->stride[d];
    p->i[2 + d] = o->padding[d];
    p->i[4 + d] = o->dilation[d];
  }
  p->i[6] = o->groups;
  p->ni = 7;
}

static lt_conv2d_opts load_conv_opts(const ag_params *p) {
  lt_conv2d_opts o;
  for (int d = 0; d < 2; d++) {
    o.stride[d] = p->i[d];
    o.padding[d] = p->i[2 + d];
    o.dilation[d] = p->i[4 + d];
  }
  o.groups = p->i[6];
  return o;
}

static lt_status conv2d_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_conv2d_opts o = load_conv_opts(&n->p);
  return lt_conv2d_backward(grad_out[0], ag_saved_tensor(n, SAVED_X),
                            ag_saved_tensor(n, SAVED_WEIGHT), &o, ag_needs(n, IN_X),
                            ag_needs(n, IN_WEIGHT), ag_needs(n, IN_BIAS), &grad_in[IN_X],
                            &grad_in[IN_WEIGHT], &grad_in[IN_BIAS]);
}

lt_status ag_record_conv2d(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                           const lt_conv2d_opts *o, lt_tensor *r) {
  const lt_tensor *ins[3] = {x, weight, bias};
  lt_status st;
  ag_node *n = ag_nn_node("ConvolutionBackward", conv2d_backward, ins, 3, r, &st);
  if (!n) return st;
  store_conv_opts(&n->p, o);
  st = ag_nn_save(n, st, SAVED_X, x);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight);
  return ag_nn_finish(n, st, r);
}

/* ---- max_pool2d: the argmax indices are all backward needs ---- */

static lt_status max_pool2d_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const ag_input *in = &n->inputs[0];
  return lt_max_pool2d_backward(grad_out[0], ag_saved_tensor(n, SAVED_INDICES), in->shape,
                                in->ndim, &grad_in[0]);
}

lt_status ag_record_max_pool2d(const lt_tensor *x, const lt_tensor *indices, lt_tensor *r) {
  const lt_tensor *ins[1] = {x};
  lt_status st;
  ag_node *n = ag_nn_node("MaxPool2DBackward", max_pool2d_backward, ins, 1, r, &st);
  if (!n) return st;
  st = ag_nn_save(n, st, SAVED_INDICES, indices);
  return ag_nn_finish(n, st, r);
}

/* ---- avg_pool2d: nothing saved; options in p.i as kernel, stride, padding
 * (h, w each), divisor_override; flags ceil_mode, count_include_pad ---- */

static lt_status avg_pool2d_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const ag_params *p = &n->p;
  lt_pool2d_opts o = lt_pool2d_default_opts(p->i[0], p->i[1]);
  for (int d = 0; d < 2; d++) {
    o.stride[d] = p->i[2 + d];
    o.padding[d] = p->i[4 + d];
  }
  o.divisor_override = p->i[6];
  o.ceil_mode = p->flag[0];
  o.count_include_pad = p->flag[1];
  const ag_input *in = &n->inputs[0];
  return lt_avg_pool2d_backward(grad_out[0], in->shape, in->ndim, &o, &grad_in[0]);
}

lt_status ag_record_avg_pool2d(const lt_tensor *x, const lt_pool2d_opts *o, lt_tensor *r) {
  const lt_tensor *ins[1] = {x};
  lt_status st;
  ag_node *n = ag_nn_node("AvgPool2DBackward", avg_pool2d_backward, ins, 1, r, &st);
  if (!n) return st;
  ag_params *p = &n->p;
  for (int d = 0; d < 2; d++) {
    p->i[d] = o->kernel[d];
    p->i[2 + d] = o->stride[d];
    p->i[4 + d] = o->padding[d];
  }
  p->i[6] = o->divisor_override;
  p->ni = 7;
  p->flag[0] = o->ceil_mode;
  p->flag[1] = o->count_include_pad;
  return ag_nn_finish(n, st, r);
}
