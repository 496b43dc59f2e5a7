/* mse_loss (torch.nn.functional.mse_loss): a and b broadcast to a common
 * shape (as PyTorch, which warns about it); the gradients are summed back
 * over the broadcast dims to each operand's own shape. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

static lt_status check_mse(const char *op, const lt_tensor *a, const lt_tensor *b,
                           lt_reduction r, int64_t *shape, int *ndim) {
  LT_TRY(nn_check_float(op, "input", a));
  if (!b) return lt_error(LT_ERR_ARG, "%s: expected a target tensor, got nothing", op);
  LT_TRY(nn_check_operand(op, "target", b, a, a->dtype));
  if (r != LT_REDUCTION_NONE && r != LT_REDUCTION_MEAN && r != LT_REDUCTION_SUM)
    return lt_error(LT_ERR_ARG, "%s: reduction must be none, mean or sum, got %d", op, (int)r);
  return lt_broadcast_shapes(op, a->shape, a->ndim, b->shape, b->ndim, shape, ndim);
}

/* Both operands expanded to shape and made contiguous in dtype ct. */
static lt_status prepare_pair(nn_scope *s, const lt_tensor *a, const lt_tensor *b,
                              const int64_t *shape, int ndim, lt_dtype ct, lt_tensor **ac,
                              lt_tensor **bc) {
  const lt_tensor *in[2] = {a, b};
  lt_tensor **outs[2] = {ac, bc};
  for (int i = 0; i < 2; i++) {
    lt_tensor *expanded = NULL;
    LT_TRY(lt_expand(in[i], shape, ndim, &expanded));
    lt_status st = nn_prepare(s, expanded, ct, outs[i]);
    lt_tensor_release(expanded);
    if (st != LT_OK) return st;
  }
  return LT_OK;
}

static lt_status mse_forward(const lt_tensor *a, const lt_tensor *b, lt_reduction reduction,
                             lt_tensor **loss) {
  const char *op = "mse_loss";
  *loss = NULL;
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  LT_TRY(check_mse(op, a, b, reduction, shape, &ndim));
  const lt_device dev = a->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(a->dtype);
  nn_scope s = {0};
  lt_tensor *ac, *bc, *r;
  lt_status st = prepare_pair(&s, a, b, shape, ndim, ct, &ac, &bc);
  if (st == LT_OK)
    st = nn_result(&s, shape, reduction == LT_REDUCTION_NONE ? ndim : 0, ct, dev, &r);
  if (st == LT_OK) st = be->mse_loss(r, ac, bc, reduction);
  if (st == LT_OK) st = nn_deliver(r, a->dtype, loss);
  nn_scope_end(&s);
  return st;
}

lt_status lt_mse_loss(const lt_tensor *a, const lt_tensor *b, lt_reduction reduction,
                      lt_tensor **loss) {
  AC_ENTRY(AC_OP_MSE_LOSS, a, 2, AC_LIST(a, b), lt_mse_loss(ac.t[0], ac.t[1], reduction, loss));
  *loss = NULL;
  /* Off while the operands are expanded and converted: no history needed. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = mse_forward(a, b, reduction, loss);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_mse_loss(a, b, reduction, *loss);
  return nn_settle(st, loss, NULL);
}

/* The sum of t (of a broadcast shape) over the dims that broadcasting added
 * to or stretched in shape, viewed as shape. */
static lt_status sum_to_shape(const lt_tensor *t, const int64_t *shape, int ndim,
                              lt_tensor **out) {
  int dims[LT_MAX_DIMS], nd = 0;
  const int lead = t->ndim - ndim;
  for (int d = 0; d < t->ndim; d++)
    if (d < lead || (shape[d - lead] == 1 && t->shape[d] != 1)) dims[nd++] = d;
  if (nd == 0) return lt_reshape(t, shape, ndim, out);
  lt_tensor *summed = NULL;
  LT_TRY(lt_sum(t, dims, nd, true, &summed));
  lt_status st = lt_reshape(summed, shape, ndim, out);
  lt_tensor_release(summed);
  return st;
}

lt_status lt_mse_loss_backward(const lt_tensor *grad_loss, const lt_tensor *a,
                               const lt_tensor *b, lt_reduction reduction, bool need_a,
                               bool need_b, lt_tensor **grad_a, lt_tensor **grad_b) {
  const char *op = "mse_loss_backward";
  if (grad_a) *grad_a = NULL;
  if (grad_b) *grad_b = NULL;
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  LT_TRY(check_mse(op, a, b, reduction, shape, &ndim));
  if (!grad_loss) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  LT_TRY(nn_check_operand(op, "grad_output", grad_loss, a, a->dtype));
  const bool fits = reduction == LT_REDUCTION_NONE
                        ? nn_same_shape(grad_loss->shape, grad_loss->ndim, shape, ndim)
                        : lt_numel(grad_loss) == 1;
  if (!fits) {
    char sg[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    reduction == LT_REDUCTION_NONE ? ops_shape_str(se, shape, ndim) : "[]",
                    ops_shape_str(sg, grad_loss->shape, grad_loss->ndim));
  }
  if (!need_a && !need_b) return LT_OK;
  const lt_device dev = a->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(a->dtype);
  nn_scope s = {0};
  lt_tensor *ac, *bc, *glc, *ga, *gb = NULL, *ra = NULL, *rb = NULL;
  lt_status st = prepare_pair(&s, a, b, shape, ndim, ct, &ac, &bc);
  if (st == LT_OK) st = nn_prepare(&s, grad_loss, ct, &glc);
  if (st == LT_OK) st = nn_result(&s, shape, ndim, ct, dev, &ga);
  if (st == LT_OK) st = be->mse_loss_backward(ga, glc, ac, bc, reduction);
  if (st == LT_OK && need_a) st = sum_to_shape(ga, a->shape, a->ndim, &ra);
  if (st == LT_OK && need_b) st = lt_unary(LT_OP_NEG, ga, &gb);
  if (st == LT_OK && need_b) st = sum_to_shape(nn_hold(&s, gb), b->shape, b->ndim, &rb);
  nn_hold(&s, ra);
  nn_hold(&s, rb);
  if (st == LT_OK) {
    lt_tensor *results[2] = {ra, rb};
    lt_tensor **outs[2] = {grad_a, grad_b};
    st = nn_deliver_all(a->dtype, 2, results, outs);
  }
  nn_scope_end(&s);
  return st;
}
