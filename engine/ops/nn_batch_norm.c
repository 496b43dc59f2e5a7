/* batch_norm (torch.nn.functional.batch_norm): checks, the in-place running
 * statistics update, dispatch. x [N, C, ...] is seen as [N, C, S].
 *
 * Dtypes, as PyTorch: out and grad_input have x's dtype; the saved
 * statistics are float32 for float16/bfloat16 x (x's dtype otherwise); the
 * running statistics and the weight and bias gradients keep their own
 * dtype. Batch norm is on no autocast list, so under autocast it runs in
 * the dtype of the input it gets (16-bit after a lowered conv) with the
 * module's float32 parameters. The per-channel tensors always reach the
 * kernels in nn_compute_dtype (float32 for 16-bit x); x and grad_output
 * stay 16-bit where the backend says half_batch_norm (cuDNN's mixed
 * precision batch norm) and are converted to float32 otherwise. */
#include <math.h>
#include <string.h>

#include "ops/nn_internal.h"

/* The dtype be's kernels take x, out, grad_output and grad_input in. */
static lt_dtype data_dtype(const lt_nn_backend *be, lt_dtype dt) {
  return be->half_batch_norm ? dt : nn_compute_dtype(dt);
}

static int64_t spatial_size(const lt_tensor *x) {
  int64_t s = 1;
  for (int d = 2; d < x->ndim; d++) s *= x->shape[d];
  return s;
}

static lt_status check_input(const char *op, const lt_tensor *x) {
  LT_TRY(nn_check_float(op, "input", x));
  if (x->ndim < 2) {
    char sx[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected input with at least 2 dimensions [N, C, ...], got %s",
                    op, ops_shape_str(sx, x->shape, x->ndim));
  }
  return LT_OK;
}

static lt_status check_channel_param(const char *op, const char *role, const lt_tensor *t,
                                     const lt_tensor *x) {
  LT_TRY(nn_check_param(op, role, t, x));
  return nn_check_vector(op, role, t, x->shape[1]);
}

/* Writes the updated statistics back when the kernel worked on a copy. */
static lt_status store_running(lt_tensor *running, lt_tensor *updated) {
  if (!running) return LT_OK;
  if (running == updated) {
    ops_bump_version(running, "batch_norm");
    return LT_OK;
  }
  return lt_copy_(running, updated);
}

static lt_status batch_norm_forward(const lt_tensor *x, lt_tensor *running_mean,
                                    lt_tensor *running_var, const lt_tensor *weight,
                                    const lt_tensor *bias, bool training, double momentum,
                                    double eps, lt_tensor **out, lt_tensor **save_mean,
                                    lt_tensor **save_invstd) {
  const char *op = "batch_norm";
  *out = NULL;
  if (save_mean) *save_mean = NULL;
  if (save_invstd) *save_invstd = NULL;
  LT_TRY(check_input(op, x));
  LT_TRY(check_channel_param(op, "running_mean", running_mean, x));
  LT_TRY(check_channel_param(op, "running_var", running_var, x));
  LT_TRY(check_channel_param(op, "weight", weight, x));
  LT_TRY(check_channel_param(op, "bias", bias, x));
  char sx[OPS_SHAPE_BUF];
  if (!training && (!running_mean || !running_var))
    return lt_error(LT_ERR_ARG, "%s: running_mean and running_var must be given in evaluation mode",
                    op);
  if (training && x->shape[0] * spatial_size(x) == 1)
    return lt_error(LT_ERR_SHAPE,
                    "%s: expected more than 1 value per channel when training, got input %s", op,
                    ops_shape_str(sx, x->shape, x->ndim));
  if (!(eps >= 0.0)) return lt_error(LT_ERR_ARG, "%s: eps must be non-negative, got %g", op, eps);
  if (training) {
    if (running_mean) LT_TRY(ops_check_writable(op, running_mean));
    if (running_var) LT_TRY(ops_check_writable(op, running_var));
    /* The statistics are written while the other operands are read. */
    const lt_tensor *read[] = {x, weight, bias, running_var};
    const char *read_names[] = {"input", "weight", "bias", "running_var"};
    for (int i = 0; i < 4; i++) {
      LT_TRY(ops_check_disjoint(op, running_mean, "running_mean", read[i], read_names[i]));
      if (i < 3) LT_TRY(ops_check_disjoint(op, running_var, "running_var", read[i], read_names[i]));
    }
  }
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(x->dtype), xt = data_dtype(be, x->dtype);
  const int64_t c = x->shape[1];
  nn_scope s = {0};
  lt_tensor *xc, *rm = NULL, *rv = NULL, *wc, *bc, *r, *mean, *invstd;
  lt_status st = nn_prepare(&s, x, xt, &xc);
  if (st == LT_OK) st = nn_prepare(&s, running_mean, ct, &rm);
  if (st == LT_OK) st = nn_prepare(&s, running_var, ct, &rv);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, bias, ct, &bc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, xt, dev, &r);
  if (st == LT_OK) st = nn_result(&s, &c, 1, ct, dev, &mean);
  if (st == LT_OK) st = nn_result(&s, &c, 1, ct, dev, &invstd);
  if (st == LT_OK && lt_numel(x) > 0) {
    const int64_t shape[3] = {x->shape[0], c, spatial_size(x)};
    lt_tensor xv, rview;
    nn_view(&xv, xc, shape, 3);
    nn_view(&rview, r, shape, 3);
    st = be->batch_norm(&rview, mean, invstd, &xv, rm, rv, wc, bc, training, momentum, eps);
    if (st == LT_OK && training) st = store_running(running_mean, rm);
    if (st == LT_OK && training) st = store_running(running_var, rv);
  }
  if (st == LT_OK && lt_numel(x) == 0) { /* statistics of no values */
    st = lt_fill_(mean, NAN);
    if (st == LT_OK) st = lt_fill_(invstd, NAN);
  }
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  if (st == LT_OK) {
    if (save_mean) lt_tensor_retain(mean), *save_mean = mean;
    if (save_invstd) lt_tensor_retain(invstd), *save_invstd = invstd;
  } else if (*out) {
    lt_tensor_release(*out), *out = NULL;
  }
  nn_scope_end(&s);
  return st;
}

lt_status lt_batch_norm(const lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                        const lt_tensor *weight, const lt_tensor *bias, bool training,
                        double momentum, double eps, lt_tensor **out, lt_tensor **save_mean,
                        lt_tensor **save_invstd) {
  *out = NULL;
  lt_tensor *mean = NULL, *invstd = NULL;
  /* Off while the operands are converted and the running statistics are
   * written: neither is differentiable. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = batch_norm_forward(x, running_mean, running_var, weight, bias, training, momentum,
                                    eps, out, &mean, &invstd);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_batch_norm(x, weight, bias, mean, invstd, training, *out);
  nn_hand_over(st, mean, save_mean);
  nn_hand_over(st, invstd, save_invstd);
  return nn_settle(st, out, NULL);
}

lt_status lt_batch_norm_backward(const lt_tensor *grad_out, const lt_tensor *x,
                                 const lt_tensor *weight, const lt_tensor *save_mean,
                                 const lt_tensor *save_invstd, bool training, bool need_input,
                                 bool need_weight, bool need_bias, lt_tensor **grad_input,
                                 lt_tensor **grad_weight, lt_tensor **grad_bias) {
  const char *op = "batch_norm_backward";
  if (grad_input) *grad_input = NULL;
  if (grad_weight) *grad_weight = NULL;
  if (grad_bias) *grad_bias = NULL;
  LT_TRY(check_input(op, x));
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, x, x->dtype));
  if (!grad_out || !save_mean || !save_invstd)
    return lt_error(LT_ERR_ARG, "%s: expected grad_output, save_mean and save_invstd", op);
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, x->shape, x->ndim)) {
    char sg[OPS_SHAPE_BUF], sx[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(sx, x->shape, x->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  LT_TRY(check_channel_param(op, "weight", weight, x));
  LT_TRY(check_channel_param(op, "save_mean", save_mean, x));
  LT_TRY(check_channel_param(op, "save_invstd", save_invstd, x));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(x->dtype), xt = data_dtype(be, x->dtype);
  const int64_t c = x->shape[1];
  nn_scope s = {0};
  lt_tensor *goc, *xc, *wc, *mc, *ic, *gx = NULL, *gw = NULL, *gb = NULL;
  lt_status st = nn_prepare(&s, grad_out, xt, &goc);
  if (st == LT_OK) st = nn_prepare(&s, x, xt, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, save_mean, ct, &mc);
  if (st == LT_OK) st = nn_prepare(&s, save_invstd, ct, &ic);
  if (st == LT_OK && need_input) st = nn_result(&s, x->shape, x->ndim, xt, dev, &gx);
  if (st == LT_OK && need_weight) st = nn_result(&s, &c, 1, ct, dev, &gw);
  if (st == LT_OK && need_bias) st = nn_result(&s, &c, 1, ct, dev, &gb);
  if (st == LT_OK) {
    const int64_t shape[3] = {x->shape[0], c, spatial_size(x)};
    lt_tensor gov, xv, gxv;
    nn_view(&gov, goc, shape, 3);
    nn_view(&xv, xc, shape, 3);
    if (gx) nn_view(&gxv, gx, shape, 3);
    st = be->batch_norm_backward(gx ? &gxv : NULL, gw, gb, &gov, &xv, wc, mc, ic, training);
  }
  if (st == LT_OK) {
    st = nn_deliver_norm_grads(x->dtype, weight, gx, gw, gb, grad_input, grad_weight, grad_bias);
  }
  nn_scope_end(&s);
  return st;
}
