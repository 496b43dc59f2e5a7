/* layer_norm (torch.nn.functional.layer_norm): checks and dispatch. x is
 * seen as [M, D] with D the product of the normalised (last) dims. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

static lt_status check_layer_norm(const char *op, const lt_tensor *x, const int64_t *nshape,
                                  int nndim, const lt_tensor *w, const lt_tensor *b) {
  LT_TRY(nn_check_float(op, "input", x));
  char sx[OPS_SHAPE_BUF], sn[OPS_SHAPE_BUF], sw[OPS_SHAPE_BUF];
  if (nndim < 1 || nndim > x->ndim || !nshape)
    return lt_error(LT_ERR_SHAPE,
                    "%s: normalized_shape must have between 1 and %d dimensions (input %s), got %d",
                    op, x->ndim, ops_shape_str(sx, x->shape, x->ndim), nndim);
  const int lead = x->ndim - nndim;
  if (!nn_same_shape(x->shape + lead, nndim, nshape, nndim))
    return lt_error(LT_ERR_SHAPE, "%s: input %s does not end with normalized_shape %s", op,
                    ops_shape_str(sx, x->shape, x->ndim), ops_shape_str(sn, nshape, nndim));
  const lt_tensor *params[2] = {w, b};
  const char *roles[2] = {"weight", "bias"};
  for (int i = 0; i < 2; i++) {
    if (!params[i]) continue;
    LT_TRY(nn_check_param(op, roles[i], params[i], x));
    if (!nn_same_shape(params[i]->shape, params[i]->ndim, nshape, nndim))
      return lt_error(LT_ERR_SHAPE, "%s: expected %s of shape %s (normalized_shape), got %s", op,
                      roles[i], ops_shape_str(sn, nshape, nndim),
                      ops_shape_str(sw, params[i]->shape, params[i]->ndim));
  }
  return LT_OK;
}

/* Rows and row length; the shape of the statistics (normalised dims 1). */
static void row_geometry(const lt_tensor *x, int nndim, int64_t *m, int64_t *d,
                         int64_t *stat_shape) {
  *m = 1, *d = 1;
  for (int k = 0; k < x->ndim; k++) {
    const bool normalised = k >= x->ndim - nndim;
    if (normalised)
      *d *= x->shape[k];
    else
      *m *= x->shape[k];
    stat_shape[k] = normalised ? 1 : x->shape[k];
  }
}

static lt_status layer_norm_forward(const lt_tensor *x, const int64_t *normalized_shape,
                                    int normalized_ndim, const lt_tensor *weight,
                                    const lt_tensor *bias, double eps, lt_tensor **out,
                                    lt_tensor **mean, lt_tensor **rstd) {
  const char *op = "layer_norm";
  *out = NULL;
  if (mean) *mean = NULL;
  if (rstd) *rstd = NULL;
  LT_TRY(check_layer_norm(op, x, normalized_shape, normalized_ndim, weight, bias));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(x->dtype);
  int64_t m, d, stat_shape[LT_MAX_DIMS];
  row_geometry(x, normalized_ndim, &m, &d, stat_shape);
  nn_scope s = {0};
  lt_tensor *xc, *wc, *bc, *r, *mu, *rs;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, bias, ct, &bc);
  if (st == LT_OK) st = nn_result(&s, x->shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = nn_result(&s, stat_shape, x->ndim, ct, dev, &mu);
  if (st == LT_OK) st = nn_result(&s, stat_shape, x->ndim, ct, dev, &rs);
  if (st == LT_OK && m > 0) {
    const int64_t shape[2] = {m, d};
    lt_tensor xv, rv, wv, bv, muv, rsv;
    nn_view(&xv, xc, shape, 2);
    nn_view(&rv, r, shape, 2);
    nn_view(&muv, mu, &m, 1);
    nn_view(&rsv, rs, &m, 1);
    if (wc) nn_view(&wv, wc, &d, 1);
    if (bc) nn_view(&bv, bc, &d, 1);
    st = be->layer_norm(&rv, &muv, &rsv, &xv, wc ? &wv : NULL, bc ? &bv : NULL, eps);
  }
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  if (st == LT_OK) {
    if (mean) lt_tensor_retain(mu), *mean = mu;
    if (rstd) lt_tensor_retain(rs), *rstd = rs;
  }
  nn_scope_end(&s);
  return st;
}

lt_status lt_layer_norm(const lt_tensor *x, const int64_t *normalized_shape, int normalized_ndim,
                        const lt_tensor *weight, const lt_tensor *bias, double eps,
                        lt_tensor **out, lt_tensor **mean, lt_tensor **rstd) {
  *out = NULL;
  AC_ENTRY(AC_OP_LAYER_NORM, x, 3, AC_LIST(x, weight, bias),
           lt_layer_norm(ac.t[0], normalized_shape, normalized_ndim, ac.t[1], ac.t[2], eps, out, mean, rstd));
  lt_tensor *mu = NULL, *rs = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = layer_norm_forward(x, normalized_shape, normalized_ndim, weight, bias, eps, out,
                                    &mu, &rs);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_layer_norm(x, normalized_ndim, weight, bias, mu, rs, *out);
  nn_hand_over(st, mu, mean);
  nn_hand_over(st, rs, rstd);
  return nn_settle(st, out, NULL);
}

lt_status lt_layer_norm_backward(const lt_tensor *grad_out, const lt_tensor *x,
                                 int normalized_ndim, const lt_tensor *mean,
                                 const lt_tensor *rstd, const lt_tensor *weight,
                                 bool need_input, bool need_weight, bool need_bias,
                                 lt_tensor **grad_input, lt_tensor **grad_weight,
                                 lt_tensor **grad_bias) {
  const char *op = "layer_norm_backward";
  if (grad_input) *grad_input = NULL;
  if (grad_weight) *grad_weight = NULL;
  if (grad_bias) *grad_bias = NULL;
  LT_TRY(nn_check_float(op, "input", x));
  if (normalized_ndim < 1 || normalized_ndim > x->ndim)
    return lt_error(LT_ERR_SHAPE, "%s: normalized_ndim must be between 1 and %d, got %d", op,
                    x->ndim, normalized_ndim);
  const int64_t *nshape = x->shape + x->ndim - normalized_ndim;
  LT_TRY(check_layer_norm(op, x, nshape, normalized_ndim, weight, NULL));
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, x, x->dtype));
  if (!grad_out || !mean || !rstd)
    return lt_error(LT_ERR_ARG, "%s: expected grad_output, mean and rstd", op);
  int64_t m, d, stat_shape[LT_MAX_DIMS];
  row_geometry(x, normalized_ndim, &m, &d, stat_shape);
  char sg[OPS_SHAPE_BUF], sx[OPS_SHAPE_BUF];
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, x->shape, x->ndim))
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(sx, x->shape, x->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  LT_TRY(nn_check_param(op, "mean", mean, x));
  LT_TRY(nn_check_param(op, "rstd", rstd, x));
  if (lt_numel(mean) != m || lt_numel(rstd) != m)
    return lt_error(LT_ERR_SHAPE, "%s: expected mean and rstd of shape %s, got %s and %s", op,
                    ops_shape_str(sx, stat_shape, x->ndim),
                    ops_shape_str(sg, mean->shape, mean->ndim),
                    ops_shape_str((char[OPS_SHAPE_BUF]){0}, rstd->shape, rstd->ndim));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(x->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *xc, *wc, *mc, *rc, *gx = NULL, *gw = NULL, *gb = NULL;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, mean, ct, &mc);
  if (st == LT_OK) st = nn_prepare(&s, rstd, ct, &rc);
  if (st == LT_OK && need_input) st = nn_result(&s, x->shape, x->ndim, ct, dev, &gx);
  if (st == LT_OK && need_weight && weight)
    st = nn_result(&s, nshape, normalized_ndim, ct, dev, &gw);
  if (st == LT_OK && need_bias) st = nn_result(&s, nshape, normalized_ndim, ct, dev, &gb);
  if (st == LT_OK && m > 0) {
    const int64_t shape[2] = {m, d};
    lt_tensor gov, xv, gxv, wv, mv, rv, gwv, gbv;
    nn_view(&gov, goc, shape, 2);
    nn_view(&xv, xc, shape, 2);
    nn_view(&mv, mc, &m, 1);
    nn_view(&rv, rc, &m, 1);
    if (gx) nn_view(&gxv, gx, shape, 2);
    if (wc) nn_view(&wv, wc, &d, 1);
    if (gw) nn_view(&gwv, gw, &d, 1);
    if (gb) nn_view(&gbv, gb, &d, 1);
    st = be->layer_norm_backward(gx ? &gxv : NULL, gw ? &gwv : NULL, gb ? &gbv : NULL, &gov, &xv,
                                 &mv, &rv, wc ? &wv : NULL);
  } else if (st == LT_OK) { /* no rows: parameter gradients are empty sums */
    if (gw) st = lt_zero_(gw);
    if (st == LT_OK && gb) st = lt_zero_(gb);
  }
  if (st == LT_OK) {
    st = nn_deliver_norm_grads(x->dtype, weight, gx, gw, gb, grad_input, grad_weight, grad_bias);
  }
  nn_scope_end(&s);
  return st;
}
