/* Gradient of constant_pad_nd: the input's part of the output's gradient.
 * The padded border got a constant, so its gradient goes nowhere; a cropped
 * part of the input never reached the output, so its gradient is zero. */
#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"

static lt_status constant_pad_backward(ag_node *n, lt_tensor *const *grad_out,
                                       lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0];
  const ag_input *in = &n->inputs[0];
  ag_calc c;
  ag_calc_init(&c);
  bool cropped = false;
  for (int d = 0; d < in->ndim; d++) {
    const int64_t before = n->p.i[d], after = g->shape[d] - in->shape[d] - before;
    cropped = cropped || before < 0 || after < 0;
  }
  lt_tensor *gi = (lt_tensor *)g;
  if (!cropped) {
    /* Only padding: the gradient is a view of g, nothing copied. */
    for (int d = 0; d < in->ndim; d++)
      if (g->shape[d] != in->shape[d]) gi = ag_narrow(&c, gi, d, n->p.i[d], in->shape[d]);
  } else {
    /* The inverse padding: crops what was padded, pads with zeros what was
     * cropped (PyTorch's formula). */
    int64_t pad[2 * LT_MAX_DIMS];
    for (int k = 0; k < in->ndim; k++) {
      const int d = in->ndim - 1 - k;
      const int64_t before = n->p.i[d];
      pad[2 * k] = -before;
      pad[2 * k + 1] = -(g->shape[d] - in->shape[d] - before);
    }
    lt_tensor *r = NULL;
    lt_status st = lt_constant_pad_nd(g, pad, 2 * in->ndim, 0.0, &r);
    gi = ag_keep(&c, st, r);
  }
  grad_in[0] = ag_out(&c, gi);
  return ag_calc_end(&c);
}

lt_status ag_record_constant_pad(const lt_tensor *x, const int64_t *before, lt_tensor *r) {
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(&x, 1)) return LT_OK;
  ag_node *n = ag_node_new("ConstantPadNdBackward", constant_pad_backward, 1);
  if (!n) return LT_ERR_OOM;
  for (int d = 0; d < x->ndim; d++) n->p.i[d] = before[d];
  n->p.ni = x->ndim;
  ag_node_set_input(n, 0, x);
  lt_status st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}
