/* conv2d (torch.nn.functional.conv2d): option and shape checks, output size,
 * dispatch. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

lt_conv2d_opts lt_conv2d_default_opts(void) {
  lt_conv2d_opts o = {{1, 1}, {0, 0}, {1, 1}, 1};
  return o;
}

lt_status lt_conv2d_check_opts(const char *op, const lt_conv2d_opts *o) {
  if (!o) return lt_error(LT_ERR_ARG, "%s: expected options, got nothing", op);
  if (o->groups < 1) return lt_error(LT_ERR_ARG, "%s: groups must be positive, got %lld", op,
                                     (long long)o->groups);
  for (int d = 0; d < 2; d++) {
    if (o->stride[d] < 1)
      return lt_error(LT_ERR_ARG, "%s: stride must be positive, got %lld x %lld", op,
                      (long long)o->stride[0], (long long)o->stride[1]);
    if (o->padding[d] < 0)
      return lt_error(LT_ERR_ARG, "%s: padding must be non-negative, got %lld x %lld", op,
                      (long long)o->padding[0], (long long)o->padding[1]);
    if (o->dilation[d] < 1)
      return lt_error(LT_ERR_ARG, "%s: dilation must be positive, got %lld x %lld", op,
                      (long long)o->dilation[0], (long long)o->dilation[1]);
  }
  LT_TRY(nn_check_window_limit(op, "stride", o->stride));
  LT_TRY(nn_check_window_limit(op, "padding", o->padding));
  return nn_check_window_limit(op, "dilation", o->dilation);
}

/* Validates x, weight, bias and options; the output shape into out_shape. */
static lt_status check_conv2d(const char *op, const lt_tensor *x, const lt_tensor *w,
                              const lt_tensor *b, const lt_conv2d_opts *o, int64_t *out_shape) {
  LT_TRY(nn_check_float(op, "input", x));
  if (!w) return lt_error(LT_ERR_ARG, "%s: expected a weight tensor, got nothing", op);
  LT_TRY(nn_check_operand(op, "weight", w, x, x->dtype));
  LT_TRY(nn_check_operand(op, "bias", b, x, x->dtype));
  LT_TRY(lt_conv2d_check_opts(op, o));
  char sx[OPS_SHAPE_BUF], sw[OPS_SHAPE_BUF];
  if (x->ndim != 4)
    return lt_error(LT_ERR_SHAPE, "%s: expected input with 4 dimensions [N, C, H, W], got %s", op,
                    ops_shape_str(sx, x->shape, x->ndim));
  if (w->ndim != 4)
    return lt_error(LT_ERR_SHAPE,
                    "%s: expected weight with 4 dimensions [O, C/groups, kh, kw], got %s", op,
                    ops_shape_str(sw, w->shape, w->ndim));
  if (w->shape[2] < 1 || w->shape[3] < 1)
    return lt_error(LT_ERR_SHAPE, "%s: weight %s has an empty kernel", op,
                    ops_shape_str(sw, w->shape, w->ndim));
  const int64_t c = x->shape[1], o_ch = w->shape[0], g = o->groups;
  if (c != w->shape[1] * g)
    return lt_error(LT_ERR_SHAPE,
                    "%s: input %s has %lld channels but weight %s expects %lld (groups %lld)", op,
                    ops_shape_str(sx, x->shape, x->ndim), (long long)c,
                    ops_shape_str(sw, w->shape, w->ndim), (long long)(w->shape[1] * g),
                    (long long)g);
  if (o_ch % g != 0)
    return lt_error(LT_ERR_SHAPE,
                    "%s: weight %s has %lld output channels, which groups %lld does not divide", op,
                    ops_shape_str(sw, w->shape, w->ndim), (long long)o_ch, (long long)g);
  LT_TRY(nn_check_vector(op, "bias", b, o_ch));
  int64_t size[2];
  for (int d = 0; d < 2; d++) {
    const int64_t padded = x->shape[2 + d] + 2 * o->padding[d];
    const int64_t span = o->dilation[d] * (w->shape[2 + d] - 1) + 1;
    if (padded < span)
      return lt_error(LT_ERR_SHAPE,
                      "%s: input %s padded to %lld x %lld is smaller than the kernel %lld x %lld "
                      "(dilation %lld x %lld)",
                      op, ops_shape_str(sx, x->shape, x->ndim),
                      (long long)(x->shape[2] + 2 * o->padding[0]),
                      (long long)(x->shape[3] + 2 * o->padding[1]), (long long)w->shape[2],
                      (long long)w->shape[3], (long long)o->dilation[0],
                      (long long)o->dilation[1]);
    size[d] = (padded - span) / o->stride[d] + 1;
  }
  out_shape[0] = x->shape[0];
  out_shape[1] = o_ch;
  out_shape[2] = size[0];
  out_shape[3] = size[1];
  return LT_OK;
}

static lt_status conv2d_forward(const lt_tensor *x, const lt_tensor *weight,
                                const lt_tensor *bias, const lt_conv2d_opts *o, lt_tensor **out) {
  const char *op = "conv2d";
  int64_t shape[4];
  LT_TRY(check_conv2d(op, x, weight, bias, o, shape));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_matmul_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *wc, *bc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, bias, ct, &bc);
  if (st == LT_OK) st = nn_result(&s, shape, 4, ct, dev, &r);
  if (st == LT_OK) st = be->conv2d(r, xc, wc, bc, o);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

lt_status lt_conv2d(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                    const lt_conv2d_opts *o, lt_tensor **out) {
  *out = NULL;
  AC_ENTRY(AC_OP_CONV2D, x, 3, AC_LIST(x, weight, bias), lt_conv2d(ac.t[0], ac.t[1], ac.t[2], o, out));
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = conv2d_forward(x, weight, bias, o, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_conv2d(x, weight, bias, o, *out);
  return nn_settle(st, out, NULL);
}

lt_status lt_conv2d_backward(const lt_tensor *grad_out, const lt_tensor *x,
                             const lt_tensor *weight, const lt_conv2d_opts *o, bool need_input,
                             bool need_weight, bool need_bias, lt_tensor **grad_input,
                             lt_tensor **grad_weight, lt_tensor **grad_bias) {
  const char *op = "conv2d_backward";
  if (grad_input) *grad_input = NULL;
  if (grad_weight) *grad_weight = NULL;
  if (grad_bias) *grad_bias = NULL;
  int64_t shape[4];
  LT_TRY(check_conv2d(op, x, weight, NULL, o, shape));
  if (!grad_out) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, x, x->dtype));
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, shape, 4)) {
    char sg[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(se, shape, 4), ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_matmul_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *xc, *wc, *gx = NULL, *gw = NULL, *gb = NULL;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK && need_input) st = nn_result(&s, x->shape, 4, ct, dev, &gx);
  if (st == LT_OK && need_weight) st = nn_result(&s, weight->shape, 4, ct, dev, &gw);
  if (st == LT_OK && need_bias) st = nn_result(&s, &weight->shape[0], 1, ct, dev, &gb);
  if (st == LT_OK) st = be->conv2d_backward(gx, gw, gb, goc, xc, wc, o);
  if (st == LT_OK) {
    lt_tensor *results[3] = {gx, gw, gb};
    lt_tensor **outs[3] = {grad_input, grad_weight, grad_bias};
    st = nn_deliver_all(x->dtype, 3, results, outs);
  }
  nn_scope_end(&s);
  return st;
}
