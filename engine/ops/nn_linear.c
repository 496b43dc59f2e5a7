/* linear (torch.nn.functional.linear): checks and dispatch. Inputs of any
 * rank fold their leading dims into the GEMM's rows. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

static lt_status check_linear(const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  const char *op = "linear";
  LT_TRY(nn_check_float(op, "input", x));
  LT_TRY(nn_check_operand(op, "weight", w, x, x->dtype));
  if (!w) return lt_error(LT_ERR_ARG, "linear: expected a weight tensor, got nothing");
  LT_TRY(nn_check_operand(op, "bias", b, x, x->dtype));
  char sx[OPS_SHAPE_BUF], sw[OPS_SHAPE_BUF];
  if (w->ndim != 2)
    return lt_error(LT_ERR_SHAPE, "linear: expected weight with 2 dimensions [out, in], got %s",
                    ops_shape_str(sw, w->shape, w->ndim));
  if (x->ndim < 1)
    return lt_error(LT_ERR_SHAPE, "linear: expected input with at least 1 dimension, got []");
  if (x->shape[x->ndim - 1] != w->shape[1])
    return lt_error(LT_ERR_SHAPE,
                    "linear: input %s has %lld features but weight %s expects %lld",
                    ops_shape_str(sx, x->shape, x->ndim), (long long)x->shape[x->ndim - 1],
                    ops_shape_str(sw, w->shape, w->ndim), (long long)w->shape[1]);
  return nn_check_vector(op, "bias", b, w->shape[0]);
}

static lt_status linear_forward(const lt_tensor *x, const lt_tensor *weight,
                                const lt_tensor *bias, lt_tensor **out) {
  LT_TRY(check_linear(x, weight, bias));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend("linear", dev, &be));
  const lt_dtype ct = nn_matmul_dtype(be, x->dtype);
  const int64_t k = weight->shape[1], o = weight->shape[0];
  int64_t rows = 1;
  for (int d = 0; d + 1 < x->ndim; d++) rows *= x->shape[d];
  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->ndim - 1] = o;

  nn_scope s = {0};
  lt_tensor *xc, *wc, *bc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, bias, ct, &bc);
  if (st == LT_OK) st = nn_result(&s, shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) {
    lt_tensor xv, rv;
    const int64_t xs[2] = {rows, k}, rs[2] = {rows, o};
    nn_view(&xv, xc, xs, 2);
    nn_view(&rv, r, rs, 2);
    st = be->linear(&rv, &xv, wc, bc);
  }
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

lt_status lt_linear(const lt_tensor *x, const lt_tensor *weight, const lt_tensor *bias,
                    lt_tensor **out) {
  *out = NULL;
  AC_ENTRY(AC_OP_LINEAR, x, 3, AC_LIST(x, weight, bias), lt_linear(ac.t[0], ac.t[1], ac.t[2], out));
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = linear_forward(x, weight, bias, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_linear(x, weight, bias, *out);
  return nn_settle(st, out, NULL);
}

/* Whether target can take a gradient of shape (ndim dims) computed in ct by
 * adding into it in place: see lt_linear_targets. */
static bool can_add_into(const lt_tensor *target, const int64_t *shape, int ndim, lt_dtype ct,
                         lt_device dev, const lt_tensor *const *operands, int noperands) {
  if (!target || target->dtype != ct || (ct != LT_FLOAT32 && ct != LT_FLOAT64) ||
      !lt_is_contiguous(target) || !nn_same_shape(target->shape, target->ndim, shape, ndim) ||
      !lt_device_eq(target->storage->device, dev))
    return false;
  for (int i = 0; i < noperands; i++)
    if (operands[i] && ops_overlap_of(target, operands[i]) != OPS_OVERLAP_NONE) return false;
  return true;
}

lt_status lt_linear_backward(const lt_tensor *grad_out, const lt_tensor *x,
                             const lt_tensor *weight, bool need_x, bool need_weight,
                             bool need_bias, lt_tensor **grad_x, lt_tensor **grad_weight,
                             lt_tensor **grad_bias) {
  return lt_linear_backward_into(grad_out, x, weight, need_x, need_weight, need_bias, grad_x,
                                 grad_weight, grad_bias, NULL);
}

lt_status lt_linear_backward_into(const lt_tensor *grad_out, const lt_tensor *x,
                                  const lt_tensor *weight, bool need_x, bool need_weight,
                                  bool need_bias, lt_tensor **grad_x, lt_tensor **grad_weight,
                                  lt_tensor **grad_bias, lt_linear_targets *targets) {
  const char *op = "linear_backward";
  if (targets) targets->weight_added = targets->bias_added = false;
  if (grad_x) *grad_x = NULL;
  if (grad_weight) *grad_weight = NULL;
  if (grad_bias) *grad_bias = NULL;
  LT_TRY(check_linear(x, weight, NULL));
  LT_TRY(nn_check_operand(op, "grad_output", grad_out, x, x->dtype));
  if (!grad_out) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  const int64_t k = weight->shape[1], o = weight->shape[0];
  int64_t expect[LT_MAX_DIMS];
  memcpy(expect, x->shape, sizeof expect);
  expect[x->ndim - 1] = o;
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, expect, x->ndim)) {
    char sg[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(se, expect, x->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_matmul_dtype(be, x->dtype);
  int64_t rows = 1;
  for (int d = 0; d + 1 < x->ndim; d++) rows *= x->shape[d];

  const lt_tensor *operands[3] = {grad_out, x, weight};
  const bool add_gw = need_weight && targets && ct == x->dtype &&
                      can_add_into(targets->weight, weight->shape, 2, ct, dev, operands, 3);
  const bool add_gb = need_bias && targets && ct == x->dtype &&
                      can_add_into(targets->bias, &weight->shape[0], 1, ct, dev, operands, 3);
  nn_scope s = {0};
  lt_tensor *goc, *xc = NULL, *wc = NULL, *gx = NULL, *gw = NULL, *gb = NULL;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK && need_weight) st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK && need_x) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK && need_x) st = nn_result(&s, x->shape, x->ndim, ct, dev, &gx);
  if (st == LT_OK && need_weight && !add_gw) st = nn_result(&s, weight->shape, 2, ct, dev, &gw);
  if (st == LT_OK && need_bias && !add_gb) st = nn_result(&s, &weight->shape[0], 1, ct, dev, &gb);
  if (add_gw) gw = targets->weight;
  if (add_gb) gb = targets->bias;
  if (st == LT_OK) {
    const int64_t xs[2] = {rows, k}, gs[2] = {rows, o};
    lt_tensor gov, xv, gxv, wshape = *weight;
    nn_view(&gov, goc, gs, 2);
    /* The kernel reads x's and W's shapes even when it needs only one. */
    nn_view(&xv, xc ? xc : goc, xs, 2);
    if (gx) nn_view(&gxv, gx, xs, 2);
    st = be->linear_backward(gx ? &gxv : NULL, gw, gb, &gov, &xv, wc ? wc : &wshape, add_gw,
                             add_gb);
  }
  /* What was added in place is a write to the target. */
  if (st == LT_OK && add_gw) ops_bump_version(targets->weight, "linear_backward");
  if (st == LT_OK && add_gb) ops_bump_version(targets->bias, "linear_backward");
  if (targets && st == LT_OK) {
    targets->weight_added = add_gw;
    targets->bias_added = add_gb;
  }
  if (st == LT_OK) {
    lt_tensor *results[3] = {gx, add_gw ? NULL : gw, add_gb ? NULL : gb};
    lt_tensor **outs[3] = {grad_x, grad_weight, grad_bias};
    st = nn_deliver_all(x->dtype, 3, results, outs);
  }
  nn_scope_end(&s);
  return st;
}
