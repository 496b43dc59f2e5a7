/* softmax and log_softmax over one dim: checks and dispatch. */
#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

static lt_nn_dim_geom dim_geometry(const lt_tensor *t, int dim) {
  lt_nn_dim_geom g = {1, t->ndim > 0 ? t->shape[dim] : 1, 1};
  for (int d = 0; d < dim; d++) g.outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) g.inner *= t->shape[d];
  return g;
}

/* A 0-dim tensor is a single-element dim 0 / -1, as in PyTorch. */
static lt_status wrap_dim(const char *op, const lt_tensor *t, int64_t dim, int *out) {
  return lt_wrap_dim(op, dim, t->ndim > 0 ? t->ndim : 1, out);
}

static lt_status softmax_forward(const char *op, const lt_tensor *x, int64_t dim, bool log,
                                 lt_tensor **out) {
  *out = NULL;
  LT_TRY(nn_check_float(op, "input", x));
  int d;
  LT_TRY(wrap_dim(op, x, dim, &d));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_pointwise_dtype(be, x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = be->softmax(r, xc, dim_geometry(x, d), log);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

static lt_status softmax_backward(const char *op, const lt_tensor *grad_out, const lt_tensor *y,
                                  int64_t dim, bool log, lt_tensor **grad_input) {
  *grad_input = NULL;
  LT_TRY(nn_check_float(op, "output", y));
  if (!grad_out) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, y, y->dtype));
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, y->shape, y->ndim)) {
    char sg[OPS_SHAPE_BUF], sy[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(sy, y->shape, y->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  int d;
  LT_TRY(wrap_dim(op, y, dim, &d));
  const lt_device dev = y->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_pointwise_dtype(be, y->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *yc, *r;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, y, ct, &yc);
  if (st == LT_OK) st = nn_result(&s, y->shape, y->ndim, ct, dev, &r);
  if (st == LT_OK) st = be->softmax_backward(r, goc, yc, dim_geometry(y, d), log);
  if (st == LT_OK) st = nn_deliver(r, y->dtype, grad_input);
  nn_scope_end(&s);
  return st;
}

/* The forward with grad mode off (the operand conversions need no history),
 * then the record call. */
static lt_status softmax_op(const char *op, const lt_tensor *x, int64_t dim, bool log,
                            lt_tensor **out) {
  *out = NULL;
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = softmax_forward(op, x, dim, log, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_softmax(x, dim, log, *out);
  return nn_settle(st, out, NULL);
}

lt_status lt_softmax(const lt_tensor *x, int64_t dim, lt_tensor **out) {
  AC_ENTRY(AC_OP_SOFTMAX, x, 1, AC_LIST(x), lt_softmax(ac.t[0], dim, out));
  return softmax_op("softmax", x, dim, false, out);
}

lt_status lt_log_softmax(const lt_tensor *x, int64_t dim, lt_tensor **out) {
  AC_ENTRY(AC_OP_LOG_SOFTMAX, x, 1, AC_LIST(x), lt_log_softmax(ac.t[0], dim, out));
  return softmax_op("log_softmax", x, dim, true, out);
}

lt_status lt_softmax_backward(const lt_tensor *grad_out, const lt_tensor *out, int64_t dim,
                              lt_tensor **grad_input) {
  return softmax_backward("softmax_backward", grad_out, out, dim, false, grad_input);
}

lt_status lt_log_softmax_backward(const lt_tensor *grad_out, const lt_tensor *out, int64_t dim,
                                  lt_tensor **grad_input) {
  return softmax_backward("log_softmax_backward", grad_out, out, dim, true, grad_input);
}
