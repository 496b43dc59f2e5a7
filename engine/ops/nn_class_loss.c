/* cross_entropy and nll_loss (torch.nn.functional): shape, dtype, option
 * and label checks, dispatch. Inputs [N, C, d...] are seen as
 * [N, C, inner] with targets [N, inner]; an unbatched [C] input takes a
 * 0-dim target. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/nn_internal.h"

lt_class_loss_opts lt_class_loss_default_opts(void) {
  lt_class_loss_opts o = {LT_REDUCTION_MEAN, -100, 0.0, 0};
  return o;
}

typedef struct class_geom {
  int64_t n, c, inner;
} class_geom;

static lt_status describe_label(const char *op, long long value, long long n, long long base) {
  return lt_error(LT_ERR_INDEX, "%s: target %lld is out of bounds for %lld classes (labels are %lld to %lld)",
                  op, value, n, base, base + n - 1);
}

static lt_status check_reduction(const char *op, lt_reduction r) {
  if (r == LT_REDUCTION_NONE || r == LT_REDUCTION_MEAN || r == LT_REDUCTION_SUM) return LT_OK;
  return lt_error(LT_ERR_ARG, "%s: reduction must be none, mean or sum, got %d", op, (int)r);
}

/* Everything but the label values. */
static lt_status check_class_loss(const char *op, const lt_tensor *input, const lt_tensor *target,
                                  const lt_tensor *weight, const lt_class_loss_opts *o,
                                  class_geom *g) {
  LT_TRY(nn_check_float(op, "input", input));
  LT_TRY(nn_check_index(op, "target (class indices)", target, input));
  LT_TRY(nn_check_operand(op, "weight", weight, input, input->dtype));
  if (!o) return lt_error(LT_ERR_ARG, "%s: expected options, got nothing", op);
  LT_TRY(check_reduction(op, o->reduction));
  if (!(o->label_smoothing >= 0.0 && o->label_smoothing <= 1.0))
    return lt_error(LT_ERR_ARG, "%s: label_smoothing must be between 0 and 1, got %g", op,
                    o->label_smoothing);
  char si[OPS_SHAPE_BUF], st[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
  if (input->ndim == 0)
    return lt_error(LT_ERR_SHAPE, "%s: expected input with 1 or more dimensions [N, C, ...], got []",
                    op);
  int64_t expect[LT_MAX_DIMS];
  int nexpect = 0;
  if (input->ndim == 1) {
    g->n = 1, g->c = input->shape[0], g->inner = 1;
  } else {
    g->n = input->shape[0], g->c = input->shape[1], g->inner = 1;
    expect[nexpect++] = input->shape[0];
    for (int d = 2; d < input->ndim; d++) {
      g->inner *= input->shape[d];
      expect[nexpect++] = input->shape[d];
    }
  }
  if (!nn_same_shape(target->shape, target->ndim, expect, nexpect))
    return lt_error(LT_ERR_SHAPE, "%s: expected target of shape %s for input %s, got %s", op,
                    ops_shape_str(se, expect, nexpect), ops_shape_str(si, input->shape, input->ndim),
                    ops_shape_str(st, target->shape, target->ndim));
  return nn_check_vector(op, "weight", weight, g->c);
}

static lt_status check_grad_loss(const char *op, const lt_tensor *gl, const lt_tensor *input,
                                 const lt_tensor *target, lt_reduction r) {
  if (!gl) return lt_error(LT_ERR_ARG, "%s: expected grad_output, got nothing", op);
  LT_TRY(nn_check_operand(op, "grad_output", gl, input, input->dtype));
  const bool fits = r == LT_REDUCTION_NONE
                        ? nn_same_shape(gl->shape, gl->ndim, target->shape, target->ndim)
                        : lt_numel(gl) == 1;
  if (fits) return LT_OK;
  char sg[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
  return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                  r == LT_REDUCTION_NONE ? ops_shape_str(se, target->shape, target->ndim) : "[]",
                  ops_shape_str(sg, gl->shape, gl->ndim));
}

/* [N, C, inner] and [N, inner] headers for the kernels. */
static void class_views(const class_geom *g, const lt_tensor *in, const lt_tensor *tg,
                        lt_tensor *inv, lt_tensor *tgv) {
  const int64_t ishape[3] = {g->n, g->c, g->inner}, tshape[2] = {g->n, g->inner};
  nn_view(inv, in, ishape, 3);
  nn_view(tgv, tg, tshape, 2);
}

static lt_status class_forward(const char *op, bool fused, const lt_tensor *input,
                               const lt_tensor *target, const lt_tensor *weight,
                               const lt_class_loss_opts *o, lt_tensor **loss,
                               lt_tensor **logsumexp) {
  *loss = NULL;
  if (logsumexp) *logsumexp = NULL;
  class_geom g;
  LT_TRY(check_class_loss(op, input, target, weight, o, &g));
  if (!fused && o->label_smoothing != 0.0)
    return lt_error(LT_ERR_ARG, "%s: label_smoothing is for cross_entropy only", op);
  const lt_device dev = input->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(input->dtype);
  const bool per_element = o->reduction == LT_REDUCTION_NONE;
  nn_scope s = {0};
  lt_tensor *ic, *tc, *wc, *r, *lse = NULL;
  lt_status st = nn_prepare(&s, input, ct, &ic);
  if (st == LT_OK) st = nn_prepare(&s, target, LT_INT64, &tc);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK)
    st = nn_check_index_range(op, tc, g.c, o->index_base, true, o->ignore_index, describe_label);
  if (st == LT_OK)
    st = nn_result(&s, target->shape, per_element ? target->ndim : 0, ct, dev, &r);
  if (st == LT_OK && fused) st = nn_result(&s, target->shape, target->ndim, ct, dev, &lse);
  if (st == LT_OK) {
    lt_tensor iv, tv, rv, lv;
    class_views(&g, ic, tc, &iv, &tv);
    const int64_t eshape[2] = {g.n, g.inner};
    if (per_element)
      nn_view(&rv, r, eshape, 2);
    else
      rv = *r;
    if (fused) {
      nn_view(&lv, lse, eshape, 2);
      st = be->cross_entropy(&rv, &lv, &iv, &tv, wc, o);
    } else {
      st = be->nll_loss(&rv, &iv, &tv, wc, o);
    }
  }
  if (st == LT_OK) st = nn_deliver(r, input->dtype, loss);
  if (st == LT_OK && fused && logsumexp) lt_tensor_retain(lse), *logsumexp = lse;
  nn_scope_end(&s);
  return st;
}

static lt_status class_backward(const char *op, bool fused, const lt_tensor *grad_loss,
                                const lt_tensor *input, const lt_tensor *target,
                                const lt_tensor *weight, const lt_tensor *logsumexp,
                                const lt_class_loss_opts *o, lt_tensor **grad_input) {
  *grad_input = NULL;
  class_geom g;
  LT_TRY(check_class_loss(op, input, target, weight, o, &g));
  LT_TRY(check_grad_loss(op, grad_loss, input, target, o->reduction));
  if (fused) {
    if (!logsumexp) return lt_error(LT_ERR_ARG, "%s: expected the saved logsumexp", op);
    LT_TRY(nn_check_param(op, "logsumexp", logsumexp, input));
    if (!nn_same_shape(logsumexp->shape, logsumexp->ndim, target->shape, target->ndim)) {
      char sl[OPS_SHAPE_BUF], st[OPS_SHAPE_BUF];
      return lt_error(LT_ERR_SHAPE, "%s: expected logsumexp of shape %s, got %s", op,
                      ops_shape_str(st, target->shape, target->ndim),
                      ops_shape_str(sl, logsumexp->shape, logsumexp->ndim));
    }
  }
  const lt_device dev = input->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(input->dtype);
  nn_scope s = {0};
  lt_tensor *ic = NULL, *tc, *wc, *glc, *lc = NULL, *r;
  lt_status st = nn_prepare(&s, target, LT_INT64, &tc);
  if (st == LT_OK && fused) st = nn_prepare(&s, input, ct, &ic);
  if (st == LT_OK) st = nn_prepare(&s, weight, ct, &wc);
  if (st == LT_OK) st = nn_prepare(&s, grad_loss, ct, &glc);
  if (st == LT_OK) st = nn_prepare(&s, logsumexp, ct, &lc);
  if (st == LT_OK)
    st = nn_check_index_range(op, tc, g.c, o->index_base, true, o->ignore_index, describe_label);
  if (st == LT_OK) st = nn_result(&s, input->shape, input->ndim, ct, dev, &r);
  if (st == LT_OK) {
    lt_tensor rv, tv, iv, glv = *glc, lv;
    class_views(&g, r, tc, &rv, &tv);
    const int64_t eshape[2] = {g.n, g.inner};
    if (o->reduction == LT_REDUCTION_NONE) nn_view(&glv, glc, eshape, 2);
    if (fused) {
      class_views(&g, ic, tc, &iv, &tv);
      nn_view(&lv, lc, eshape, 2);
      st = be->cross_entropy_backward(&rv, &glv, &iv, &tv, wc, &lv, o);
    } else {
      st = be->nll_loss_backward(&rv, &glv, &tv, wc, o);
    }
  }
  if (st == LT_OK) st = nn_deliver(r, input->dtype, grad_input);
  nn_scope_end(&s);
  return st;
}

lt_status lt_cross_entropy(const lt_tensor *logits, const lt_tensor *target,
                           const lt_tensor *weight, const lt_class_loss_opts *o,
                           lt_tensor **loss, lt_tensor **logsumexp) {
  AC_ENTRY(AC_OP_CROSS_ENTROPY, logits, 3, AC_LIST(logits, target, weight),
           lt_cross_entropy(ac.t[0], ac.t[1], ac.t[2], o, loss, logsumexp));
  lt_tensor *lse = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = class_forward("cross_entropy", true, logits, target, weight, o, loss, &lse);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_cross_entropy(logits, target, weight, lse, o, *loss);
  nn_hand_over(st, lse, logsumexp);
  return nn_settle(st, loss, NULL);
}

lt_status lt_cross_entropy_backward(const lt_tensor *grad_loss, const lt_tensor *logits,
                                    const lt_tensor *target, const lt_tensor *weight,
                                    const lt_tensor *logsumexp, const lt_class_loss_opts *o,
                                    lt_tensor **grad_logits) {
  return class_backward("cross_entropy_backward", true, grad_loss, logits, target, weight,
                        logsumexp, o, grad_logits);
}

lt_status lt_nll_loss(const lt_tensor *log_probs, const lt_tensor *target,
                      const lt_tensor *weight, const lt_class_loss_opts *o, lt_tensor **loss) {
  AC_ENTRY(AC_OP_NLL_LOSS, log_probs, 3, AC_LIST(log_probs, target, weight),
           lt_nll_loss(ac.t[0], ac.t[1], ac.t[2], o, loss));
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = class_forward("nll_loss", false, log_probs, target, weight, o, loss, NULL);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_nll_loss(log_probs, target, weight, o, *loss);
  return nn_settle(st, loss, NULL);
}

lt_status lt_nll_loss_backward(const lt_tensor *grad_loss, const lt_tensor *log_probs,
                               const lt_tensor *target, const lt_tensor *weight,
                               const lt_class_loss_opts *o, lt_tensor **grad_log_probs) {
  return class_backward("nll_loss_backward", false, grad_loss, log_probs, target, weight, NULL, o,
                        grad_log_probs);
}
