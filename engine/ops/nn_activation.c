/* gelu and dropout (torch.nn.functional): checks and dispatch. */
#include "lt/rng.h"
#include "ops/nn_internal.h"

static lt_status check_approx(const char *op, lt_gelu_approx approx) {
  if (approx == LT_GELU_NONE || approx == LT_GELU_TANH) return LT_OK;
  return lt_error(LT_ERR_ARG, "%s: approximate must be 'none' or 'tanh', got %d", op, (int)approx);
}

static lt_status gelu_forward(const lt_tensor *x, lt_gelu_approx approx, lt_tensor **out) {
  const char *op = "gelu";
  *out = NULL;
  LT_TRY(nn_check_float(op, "input", x));
  LT_TRY(check_approx(op, approx));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_pointwise_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = be->gelu(r, xc, approx);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

lt_status lt_gelu(const lt_tensor *x, lt_gelu_approx approx, lt_tensor **out) {
  *out = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = gelu_forward(x, approx, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_gelu(x, approx, *out);
  return nn_settle(st, out, NULL);
}

lt_status lt_gelu_backward(const lt_tensor *grad_out, const lt_tensor *x, lt_gelu_approx approx,
                           lt_tensor **grad_input) {
  const char *op = "gelu_backward";
  *grad_input = NULL;
  LT_TRY(nn_check_float(op, "input", x));
  LT_TRY(check_approx(op, approx));
  if (!grad_out) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, x, x->dtype));
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, x->shape, x->ndim)) {
    char sg[OPS_SHAPE_BUF], sx[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(sx, x->shape, x->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_pointwise_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *xc, *r;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = be->gelu_backward(r, goc, xc, approx);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, grad_input);
  nn_scope_end(&s);
  return st;
}

/* out = x * mask * scale in x's dtype. */
static lt_status masked_scale(const char *op, const lt_tensor *x, const lt_tensor *mask,
                              double scale, lt_tensor **out) {
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_pointwise_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *mc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, mask, LT_BOOL, &mc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = be->masked_scale(r, xc, mc, scale);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

/* 1 / (1 - p), and 0 when p is 1: every element is dropped then. */
static double keep_scale(double p) { return p < 1.0 ? 1.0 / (1.0 - p) : 0.0; }

static lt_status check_dropout(const char *op, const lt_tensor *x, double p) {
  LT_TRY(nn_check_float(op, "input", x));
  if (!(p >= 0.0 && p <= 1.0))
    return lt_error(LT_ERR_ARG, "%s: probability has to be between 0 and 1, but got %g", op, p);
  return LT_OK;
}

/* *mask: a new bool tensor of x's shape, each element true with
 * probability 1 - p, from lt's generator. */
static lt_status draw_keep_mask(const lt_tensor *x, double p, lt_tensor **mask) {
  lt_tensor *m = NULL;
  LT_TRY(lt_empty(x->shape, x->ndim, LT_BOOL, x->storage->device, &m));
  lt_status st = lt_bernoulli_(m, 1.0 - p);
  if (st != LT_OK) {
    lt_tensor_release(m);
    m = NULL;
  }
  *mask = m;
  return st;
}

static lt_status dropout_forward(const lt_tensor *x, double p, bool training, lt_tensor **out,
                                 lt_tensor **mask) {
  const char *op = "dropout";
  *out = NULL;
  if (mask) *mask = NULL;
  LT_TRY(check_dropout(op, x, p));
  if (!training || p == 0.0) return lt_alias(x, out);
  lt_tensor *m = NULL;
  lt_status st = draw_keep_mask(x, p, &m);
  if (st == LT_OK) st = masked_scale(op, x, m, keep_scale(p), out);
  if (st == LT_OK && mask)
    *mask = m;
  else
    lt_tensor_release(m);
  return st;
}

lt_status lt_dropout(const lt_tensor *x, double p, bool training, lt_tensor **out,
                     lt_tensor **mask) {
  *out = NULL;
  lt_tensor *m = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = dropout_forward(x, p, training, out, &m);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_dropout(x, m, p, *out);
  nn_hand_over(st, m, mask);
  return nn_settle(st, out, NULL);
}

/* x = x * mask * scale, written into x. The masked_scale kernels are
 * elementwise over contiguous operands, each element read before it is
 * written, so x can be its own output when it is contiguous and in a dtype
 * the kernel takes (16-bit ones where half_pointwise): no temporary of x's
 * size. Other layouts go through masked_scale's result and a copy back. */
static lt_status masked_scale_into(const char *op, lt_tensor *x, const lt_tensor *mask,
                                   double scale) {
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, x->storage->device, &be));
  if (lt_is_contiguous(x) && nn_pointwise_dtype(be, x->dtype) == x->dtype) {
    return be->masked_scale(x, x, mask, scale);
  }
  lt_tensor *r = NULL;
  LT_TRY(masked_scale(op, x, mask, scale, &r));
  lt_status st = lt_copy_(x, r);
  lt_tensor_release(r);
  return st;
}

lt_status lt_dropout_(lt_tensor *x, double p, bool training, lt_tensor **mask) {
  const char *op = "dropout_";
  if (mask) *mask = NULL;
  LT_TRY(check_dropout(op, x, p));
  /* As PyTorch's dropout_: nothing to write, so no in-place checks either. */
  if (!training || p == 0.0) return LT_OK;
  LT_TRY(ops_check_writable(op, x));
  lt_tensor *old = NULL; /* the backward needs only the mask, never x's old values */
  LT_TRY(ag_inplace_begin(op, x, NULL, false, &old));
  lt_tensor *m = NULL;
  LT_TRY(draw_keep_mask(x, p, &m));
  /* Off while the write runs: a copy back must not record history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = masked_scale_into(op, x, m, keep_scale(p));
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) {
    ops_bump_version(x, op);
    /* x is both the node's input (its history so far) and its result. */
    st = ag_record_dropout(x, m, p, x);
  }
  nn_hand_over(st, m, mask);
  return st;
}

lt_status lt_dropout_backward(const lt_tensor *grad_out, const lt_tensor *mask, double p,
                              lt_tensor **grad_input) {
  const char *op = "dropout_backward";
  *grad_input = NULL;
  LT_TRY(nn_check_float(op, "grad_output", grad_out));
  if (!(p >= 0.0 && p <= 1.0))
    return lt_error(LT_ERR_ARG, "%s: probability has to be between 0 and 1, but got %g", op, p);
  if (!mask) return lt_alias(grad_out, grad_input);
  LT_TRY(ops_check_live(op, mask));
  LT_TRY(ops_check_same_device(op, grad_out, mask));
  if (mask->dtype != LT_BOOL)
    return lt_error(LT_ERR_DTYPE, "%s: expected a bool mask, got %s", op, lt_dtype_name(mask->dtype));
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, mask->shape, mask->ndim)) {
    char sg[OPS_SHAPE_BUF], sm[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: grad_output %s and mask %s differ in shape", op,
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim),
                    ops_shape_str(sm, mask->shape, mask->ndim));
  }
  return masked_scale(op, grad_out, mask, keep_scale(p), grad_input);
}
