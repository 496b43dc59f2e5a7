/* Gradients of cross_entropy, nll_loss and mse_loss. Class-loss options
 * live in the node's params: p.op the reduction, p.i[0] ignore_index,
 * p.i[1] index_base, p.s[0] label_smoothing. */
#include "autograd/formulas_nn.h"

enum { SAVED_INPUT = 0, SAVED_TARGET = 1, SAVED_WEIGHT = 2, SAVED_LSE = 3 };
enum { SAVED_A = 0, SAVED_B = 1 };

static void store_class_opts(ag_params *p, const lt_class_loss_opts *o) {
  p->op = (int)o->reduction;
  p->i[0] = o->ignore_index;
  p->i[1] = o->index_base;
  p->ni = 2;
  p->s[0] = o->label_smoothing;
}

static lt_class_loss_opts load_class_opts(const ag_params *p) {
  lt_class_loss_opts o = lt_class_loss_default_opts();
  o.reduction = (lt_reduction)p->op;
  o.ignore_index = p->i[0];
  o.index_base = p->i[1];
  o.label_smoothing = p->s[0];
  return o;
}

/* ---- cross_entropy: saves the logits, labels, class weights and the
 * logsumexp the softmax is rebuilt from ---- */

static lt_status cross_entropy_backward(ag_node *n, lt_tensor *const *grad_out,
                                        lt_tensor **grad_in) {
  const lt_class_loss_opts o = load_class_opts(&n->p);
  return lt_cross_entropy_backward(grad_out[0], ag_saved_tensor(n, SAVED_INPUT),
                                   ag_saved_tensor(n, SAVED_TARGET),
                                   ag_saved_tensor(n, SAVED_WEIGHT),
                                   ag_saved_tensor(n, SAVED_LSE), &o, &grad_in[0]);
}

lt_status ag_record_cross_entropy(const lt_tensor *logits, const lt_tensor *target,
                                  const lt_tensor *weight, const lt_tensor *logsumexp,
                                  const lt_class_loss_opts *o, lt_tensor *r) {
  const lt_tensor *ins[1] = {logits};
  lt_status st;
  ag_node *n = ag_nn_node("CrossEntropyLossBackward", cross_entropy_backward, ins, 1, r, &st);
  if (!n) return st;
  store_class_opts(&n->p, o);
  st = ag_nn_save(n, st, SAVED_INPUT, logits);
  st = ag_nn_save(n, st, SAVED_TARGET, target);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight);
  st = ag_nn_save(n, st, SAVED_LSE, logsumexp);
  return ag_nn_finish(n, st, r);
}

/* ---- nll_loss: the backward reads log_probs' shape only; saving it costs
 * nothing in the usual graph, where log_softmax saved the same storage ---- */

static lt_status nll_loss_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_class_loss_opts o = load_class_opts(&n->p);
  return lt_nll_loss_backward(grad_out[0], ag_saved_tensor(n, SAVED_INPUT),
                              ag_saved_tensor(n, SAVED_TARGET), ag_saved_tensor(n, SAVED_WEIGHT),
                              &o, &grad_in[0]);
}

lt_status ag_record_nll_loss(const lt_tensor *log_probs, const lt_tensor *target,
                             const lt_tensor *weight, const lt_class_loss_opts *o, lt_tensor *r) {
  const lt_tensor *ins[1] = {log_probs};
  lt_status st;
  ag_node *n = ag_nn_node("NllLossBackward", nll_loss_backward, ins, 1, r, &st);
  if (!n) return st;
  store_class_opts(&n->p, o);
  st = ag_nn_save(n, st, SAVED_INPUT, log_probs);
  st = ag_nn_save(n, st, SAVED_TARGET, target);
  st = ag_nn_save(n, st, SAVED_WEIGHT, weight);
  return ag_nn_finish(n, st, r);
}

/* ---- mse_loss: p.op the reduction ---- */

static lt_status mse_loss_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  return lt_mse_loss_backward(grad_out[0], ag_saved_tensor(n, SAVED_A),
                              ag_saved_tensor(n, SAVED_B), (lt_reduction)n->p.op, ag_needs(n, 0),
                              ag_needs(n, 1), &grad_in[0], &grad_in[1]);
}

lt_status ag_record_mse_loss(const lt_tensor *a, const lt_tensor *b, lt_reduction reduction,
                             lt_tensor *r) {
  const lt_tensor *ins[2] = {a, b};
  lt_status st;
  ag_node *n = ag_nn_node("MseLossBackward", mse_loss_backward, ins, 2, r, &st);
  if (!n) return st;
  n->p.op = (int)reduction;
  st = ag_nn_save(n, st, SAVED_A, a);
  st = ag_nn_save(n, st, SAVED_B, b);
  return ag_nn_finish(n, st, r);
}
