/* Gradients of gelu, softmax, log_softmax and dropout. */
#include "autograd/formulas_nn.h"

enum { SAVED_0 = 0 };

/* ---- gelu: p.op the approximation; saves x ---- */

static lt_status gelu_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_gelu_backward(grad_out[0], ag_saved_tensor(n, SAVED_0), (lt_gelu_approx)n->p.op,
                          &grad_in[0]);
}

lt_status ag_record_gelu(const lt_tensor *x, lt_gelu_approx approx, lt_tensor *r) {
  const lt_tensor *ins[1] = {x};
  lt_status st;
  ag_node *n = ag_nn_node("GeluBackward", gelu_backward, ins, 1, r, &st);
  if (!n) return st;
  n->p.op = (int)approx;
  st = ag_nn_save(n, st, SAVED_0, x);
  return ag_nn_finish(n, st, r);
}

/* ---- softmax, log_softmax: p.i[0] the dim; save the output (an alias
 * without autograd metadata, so no cycle) ---- */

static lt_status softmax_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_softmax_backward(grad_out[0], ag_saved_tensor(n, SAVED_0), n->p.i[0], &grad_in[0]);
}

static lt_status log_softmax_backward(ag_node *n, lt_tensor *const *grad_out,
                                      lt_tensor **grad_in) {
  return lt_log_softmax_backward(grad_out[0], ag_saved_tensor(n, SAVED_0), n->p.i[0],
                                 &grad_in[0]);
}

lt_status ag_record_softmax(const lt_tensor *x, int64_t dim, bool log, lt_tensor *r) {
  const lt_tensor *ins[1] = {x};
  lt_status st;
  ag_node *n = log ? ag_nn_node("LogSoftmaxBackward", log_softmax_backward, ins, 1, r, &st)
                   : ag_nn_node("SoftmaxBackward", softmax_backward, ins, 1, r, &st);
  if (!n) return st;
  n->p.i[0] = dim;
  n->p.ni = 1;
  st = ag_nn_save(n, st, SAVED_0, r);
  return ag_nn_finish(n, st, r);
}

/* ---- dropout: p.s[0] the probability; saves the mask (none when the
 * output is the input's values) ---- */

static lt_status dropout_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_dropout_backward(grad_out[0], ag_saved_tensor(n, SAVED_0), n->p.s[0], &grad_in[0]);
}

lt_status ag_record_dropout(const lt_tensor *x, const lt_tensor *mask, double p, lt_tensor *r) {
  const lt_tensor *ins[1] = {x};
  lt_status st;
  ag_node *n = ag_nn_node("NativeDropoutBackward", dropout_backward, ins, 1, r, &st);
  if (!n) return st;
  n->p.s[0] = p;
  st = ag_nn_save(n, st, SAVED_0, mask);
  return ag_nn_finish(n, st, r);
}
