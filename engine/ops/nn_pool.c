/* max_pool2d and avg_pool2d: option checks, PyTorch's output size rule
 * (pooling_output_shape), and dispatch over the input's planes. Inputs are
 * [N, C, H, W] or [C, H, W]. */
#include <string.h>

#include "core/known_range.h"
#include "ops/nn_internal.h"

lt_pool2d_opts lt_pool2d_default_opts(int64_t kh, int64_t kw) {
  lt_pool2d_opts o = {{kh, kw}, {kh, kw}, {0, 0}, {1, 1}, false, true, 0};
  return o;
}

/* Floor (or ceil) of (size + 2 pad - span) / stride + 1; in ceil mode the
 * last window must start inside the input or its left padding. */
static int64_t pooled_size(int64_t size, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                           bool ceil_mode) {
  const int64_t num = size + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= size + pad) out--;
  return out;
}

/* The options checked, avg_pool2d's dilation set to 1 (it has none). */
static lt_status resolve_opts(const char *op, const lt_pool2d_opts *in, bool is_max,
                              lt_pool2d_opts *o) {
  LT_TRY(lt_pool2d_check_opts(op, in, is_max));
  *o = *in;
  if (!is_max) o->dilation[0] = o->dilation[1] = 1; /* avg_pool2d has none */
  return LT_OK;
}

lt_status lt_pool2d_check_opts(const char *op, const lt_pool2d_opts *o, bool is_max) {
  if (!o) return lt_error(LT_ERR_ARG, "%s: expected options, got nothing", op);
  LT_TRY(nn_check_window_limit(op, "kernel size", o->kernel));
  LT_TRY(nn_check_window_limit(op, "stride", o->stride));
  if (is_max) LT_TRY(nn_check_window_limit(op, "dilation", o->dilation));
  if (o->kernel[0] < 1 || o->kernel[1] < 1)
    return lt_error(LT_ERR_ARG, "%s: kernel size must be positive, got %lld x %lld", op,
                    (long long)o->kernel[0], (long long)o->kernel[1]);
  if (o->stride[0] < 1 || o->stride[1] < 1)
    return lt_error(LT_ERR_ARG, "%s: stride must be positive, got %lld x %lld", op,
                    (long long)o->stride[0], (long long)o->stride[1]);
  if (is_max && (o->dilation[0] < 1 || o->dilation[1] < 1))
    return lt_error(LT_ERR_ARG, "%s: dilation must be positive, got %lld x %lld", op,
                    (long long)o->dilation[0], (long long)o->dilation[1]);
  for (int d = 0; d < 2; d++)
    if (o->padding[d] < 0 || o->padding[d] > o->kernel[d] / 2)
      return lt_error(LT_ERR_ARG,
                      "%s: padding should be between 0 and half the kernel size, got padding "
                      "%lld x %lld for kernel %lld x %lld",
                      op, (long long)o->padding[0], (long long)o->padding[1],
                      (long long)o->kernel[0], (long long)o->kernel[1]);
  if (o->divisor_override < 0)
    return lt_error(LT_ERR_ARG, "%s: divisor_override must be positive, got %lld", op,
                    (long long)o->divisor_override);
  return LT_OK;
}

/* Output shape for an input shape (3-D or 4-D); planes = all but H, W. */
static lt_status pooled_shape(const char *op, const int64_t *in, int ndim, const lt_pool2d_opts *o,
                              int64_t *out, int64_t *planes) {
  char s[OPS_SHAPE_BUF];
  if (ndim != 3 && ndim != 4)
    return lt_error(LT_ERR_SHAPE, "%s: expected input with 3 or 4 dimensions ([C, H, W] or "
                    "[N, C, H, W]), got %s", op, ops_shape_str(s, in, ndim));
  memcpy(out, in, (size_t)ndim * sizeof *out);
  *planes = 1;
  for (int d = 0; d < ndim - 2; d++) *planes *= in[d];
  for (int d = 0; d < 2; d++) {
    out[ndim - 2 + d] = pooled_size(in[ndim - 2 + d], o->kernel[d], o->padding[d], o->stride[d],
                                    o->dilation[d], o->ceil_mode);
  }
  if (out[ndim - 2] < 1 || out[ndim - 1] < 1 || in[ndim - 3] < 0)
    return lt_error(LT_ERR_SHAPE,
                    "%s: input %s is too small for kernel %lld x %lld (output size %lld x %lld)",
                    op, ops_shape_str(s, in, ndim), (long long)o->kernel[0],
                    (long long)o->kernel[1], (long long)out[ndim - 2], (long long)out[ndim - 1]);
  return LT_OK;
}

/* A [planes, H, W] header over a contiguous tensor of a pooling shape. */
static void plane_view(lt_tensor *v, const lt_tensor *t, int64_t planes) {
  const int64_t shape[3] = {planes, t->shape[t->ndim - 2], t->shape[t->ndim - 1]};
  nn_view(v, t, shape, 3);
}

static lt_status max_pool2d_forward(const lt_tensor *x, const lt_pool2d_opts *opts,
                                    lt_tensor **out, lt_tensor **indices) {
  const char *op = "max_pool2d";
  lt_pool2d_opts o;
  int64_t shape[4], planes;
  LT_TRY(nn_check_float(op, "input", x));
  LT_TRY(resolve_opts(op, opts, true, &o));
  LT_TRY(pooled_shape(op, x->shape, x->ndim, &o, shape, &planes));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = be->half_max_pool ? x->dtype : nn_compute_dtype(x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *r, *idx;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_result(&s, shape, x->ndim, ct, dev, &r);
  if (st == LT_OK) st = nn_result(&s, shape, x->ndim, LT_INT64, dev, &idx);
  if (st == LT_OK && planes > 0) {
    lt_tensor xv, rv, iv;
    plane_view(&xv, xc, planes);
    plane_view(&rv, r, planes);
    plane_view(&iv, idx, planes);
    st = be->max_pool2d(&rv, &iv, &xv, &o);
  }
  /* Every index points into its input plane: noted, so that the backward's
   * check of these indices reads none of them (core/known_range.h). */
  if (st == LT_OK && planes > 0)
    lt_known_range_note(idx, 0, x->shape[x->ndim - 2] * x->shape[x->ndim - 1] - 1);
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  if (st == LT_OK) {
    lt_tensor_retain(idx);
    *indices = idx;
  }
  nn_scope_end(&s);
  return st;
}

lt_status lt_max_pool2d(const lt_tensor *x, const lt_pool2d_opts *opts, lt_tensor **out,
                        lt_tensor **indices) {
  *out = NULL;
  *indices = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = max_pool2d_forward(x, opts, out, indices);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_max_pool2d(x, *indices, *out);
  return nn_settle(st, out, indices);
}

static lt_status describe_pool_index(const char *op, long long value, long long n,
                                     long long base) {
  (void)base;
  return lt_error(LT_ERR_INDEX, "%s: index %lld is out of range for an input plane of %lld elements",
                  op, value, n);
}

lt_status lt_max_pool2d_backward(const lt_tensor *grad_out, const lt_tensor *indices,
                                 const int64_t *input_shape, int input_ndim,
                                 lt_tensor **grad_input) {
  const char *op = "max_pool2d_backward";
  *grad_input = NULL;
  LT_TRY(nn_check_float(op, "grad_output", grad_out));
  LT_TRY(nn_check_index(op, "indices", indices, grad_out));
  char sg[OPS_SHAPE_BUF], si[OPS_SHAPE_BUF], sx[OPS_SHAPE_BUF];
  if (!input_shape || (input_ndim != 3 && input_ndim != 4))
    return lt_error(LT_ERR_SHAPE, "%s: expected an input shape of 3 or 4 dimensions", op);
  bool fits = nn_same_shape(grad_out->shape, grad_out->ndim, indices->shape, indices->ndim) &&
              grad_out->ndim == input_ndim;
  for (int d = 0; fits && d < input_ndim - 2; d++) fits = grad_out->shape[d] == input_shape[d];
  if (!fits)
    return lt_error(LT_ERR_SHAPE,
                    "%s: grad_output %s, indices %s and input %s do not fit together", op,
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim),
                    ops_shape_str(si, indices->shape, indices->ndim),
                    ops_shape_str(sx, input_shape, input_ndim));
  int64_t planes = 1;
  for (int d = 0; d < input_ndim - 2; d++) planes *= input_shape[d];
  const int64_t plane = input_shape[input_ndim - 2] * input_shape[input_ndim - 1];
  const lt_device dev = grad_out->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = be->half_max_pool ? grad_out->dtype : nn_compute_dtype(grad_out->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *ic, *gx;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, indices, LT_INT64, &ic);
  /* The CPU kernel scatters through the indices, so a bad one must be an
   * error. The CUDA kernel gathers and ignores indices outside the plane
   * (cuda_nn_pool.cu): no bad index can make it write out of bounds, and a
   * check there would copy every index to the host and wait for the device
   * on every backward (8 MiB per step for the Fashion CNN), for indices that
   * autograd, the one caller, takes from the forward itself. */
  if (st == LT_OK && dev.type == LT_DEVICE_CPU)
    st = nn_check_index_range(op, ic, plane, 0, false, 0, describe_pool_index);
  if (st == LT_OK) st = nn_result(&s, input_shape, input_ndim, ct, dev, &gx);
  if (st == LT_OK && planes > 0) {
    lt_tensor gov, iv, gxv;
    plane_view(&gov, goc, planes);
    plane_view(&iv, ic, planes);
    plane_view(&gxv, gx, planes);
    st = be->max_pool2d_backward(&gxv, &gov, &iv);
  }
  if (st == LT_OK) st = nn_deliver(gx, grad_out->dtype, grad_input);
  nn_scope_end(&s);
  return st;
}

static lt_status avg_pool2d_forward(const lt_tensor *x, const lt_pool2d_opts *opts,
                                    lt_tensor **out) {
  const char *op = "avg_pool2d";
  lt_pool2d_opts o;
  int64_t shape[4], planes;
  LT_TRY(nn_check_float(op, "input", x));
  LT_TRY(resolve_opts(op, opts, false, &o));
  LT_TRY(pooled_shape(op, x->shape, x->ndim, &o, shape, &planes));
  const lt_device dev = x->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(x->dtype);
  nn_scope s = {0};
  lt_tensor *xc, *r;
  lt_status st = nn_prepare(&s, x, ct, &xc);
  if (st == LT_OK) st = nn_result(&s, shape, x->ndim, ct, dev, &r);
  if (st == LT_OK && planes > 0) {
    lt_tensor xv, rv;
    plane_view(&xv, xc, planes);
    plane_view(&rv, r, planes);
    st = be->avg_pool2d(&rv, &xv, &o);
  }
  if (st == LT_OK) st = nn_deliver(r, x->dtype, out);
  nn_scope_end(&s);
  return st;
}

lt_status lt_avg_pool2d(const lt_tensor *x, const lt_pool2d_opts *opts, lt_tensor **out) {
  *out = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = avg_pool2d_forward(x, opts, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_avg_pool2d(x, opts, *out);
  return nn_settle(st, out, NULL);
}

lt_status lt_avg_pool2d_backward(const lt_tensor *grad_out, const int64_t *input_shape,
                                 int input_ndim, const lt_pool2d_opts *opts,
                                 lt_tensor **grad_input) {
  const char *op = "avg_pool2d_backward";
  *grad_input = NULL;
  lt_pool2d_opts o;
  int64_t shape[4], planes;
  LT_TRY(nn_check_float(op, "grad_output", grad_out));
  LT_TRY(resolve_opts(op, opts, false, &o));
  if (!input_shape) return lt_error(LT_ERR_ARG, "%s: expected the input's shape", op);
  LT_TRY(pooled_shape(op, input_shape, input_ndim, &o, shape, &planes));
  if (!nn_same_shape(grad_out->shape, grad_out->ndim, shape, input_ndim)) {
    char sg[OPS_SHAPE_BUF], se[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape %s, got %s", op,
                    ops_shape_str(se, shape, input_ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  const lt_device dev = grad_out->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(grad_out->dtype);
  nn_scope s = {0};
  lt_tensor *goc, *gx;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_result(&s, input_shape, input_ndim, ct, dev, &gx);
  if (st == LT_OK && planes > 0) {
    lt_tensor gov, gxv;
    plane_view(&gov, goc, planes);
    plane_view(&gxv, gx, planes);
    st = be->avg_pool2d_backward(&gxv, &gov, &o);
  }
  if (st == LT_OK) st = nn_deliver(gx, grad_out->dtype, grad_input);
  nn_scope_end(&s);
  return st;
}
