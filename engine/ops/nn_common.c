/* Shared checks and operand preparation of the nn ops. */
#include <string.h>

#include <stdint.h>

#include "core/known_range.h"
#include "ops/nn_internal.h"

lt_tensor *nn_hold(nn_scope *s, lt_tensor *t) {
  if (t && s->n < NN_SCOPE_MAX) s->held[s->n++] = t;
  return t;
}

void nn_scope_end(nn_scope *s) {
  while (s->n > 0) lt_tensor_release(s->held[--s->n]);
}

lt_dtype nn_compute_dtype(lt_dtype dt) {
  return dt == LT_FLOAT16 || dt == LT_BFLOAT16 ? LT_FLOAT32 : dt;
}

lt_dtype nn_matmul_dtype(const lt_nn_backend *be, lt_dtype dt) {
  return be->half_matmul ? dt : nn_compute_dtype(dt);
}

lt_dtype nn_pointwise_dtype(const lt_nn_backend *be, lt_dtype dt) {
  return be->half_pointwise ? dt : nn_compute_dtype(dt);
}

lt_status nn_check_float(const char *op, const char *role, const lt_tensor *t) {
  if (!t) return lt_error(LT_ERR_ARG, "%s: expected a tensor for %s, got nothing", op, role);
  LT_TRY(ops_check_live(op, t));
  if (!lt_dtype_is_floating(t->dtype))
    return lt_error(LT_ERR_DTYPE, "%s: expected a floating point %s, got %s", op, role,
                    lt_dtype_name(t->dtype));
  return LT_OK;
}

lt_status nn_check_window_limit(const char *op, const char *what, const int64_t v[2]) {
  const int64_t limit = INT32_MAX;
  if (v[0] > limit || v[1] > limit)
    return lt_error(LT_ERR_ARG, "%s: %s must be at most %lld, got %lld x %lld", op, what,
                    (long long)limit, (long long)v[0], (long long)v[1]);
  return LT_OK;
}

lt_status nn_check_index(const char *op, const char *role, const lt_tensor *t,
                         const lt_tensor *ref) {
  if (!t) return lt_error(LT_ERR_ARG, "%s: expected a tensor for %s, got nothing", op, role);
  LT_TRY(ops_check_live(op, t));
  LT_TRY(ops_check_same_device(op, ref, t));
  if (t->dtype != LT_INT64)
    return lt_error(LT_ERR_DTYPE, "%s: expected %s of dtype int64, got %s", op, role,
                    lt_dtype_name(t->dtype));
  return LT_OK;
}

lt_status nn_check_operand(const char *op, const char *role, const lt_tensor *t,
                           const lt_tensor *ref, lt_dtype dt) {
  if (!t) return LT_OK;
  LT_TRY(ops_check_live(op, t));
  LT_TRY(ops_check_same_device(op, ref, t));
  if (t->dtype != dt)
    return lt_error(LT_ERR_DTYPE, "%s: expected %s of dtype %s (as the input), got %s", op, role,
                    lt_dtype_name(dt), lt_dtype_name(t->dtype));
  return LT_OK;
}

lt_status nn_check_param(const char *op, const char *role, const lt_tensor *t,
                         const lt_tensor *x) {
  if (!t) return LT_OK;
  LT_TRY(ops_check_live(op, t));
  LT_TRY(ops_check_same_device(op, x, t));
  if (t->dtype == x->dtype || (t->dtype == nn_compute_dtype(x->dtype) && t->dtype == LT_FLOAT32))
    return LT_OK;
  return lt_error(LT_ERR_DTYPE, "%s: expected %s of dtype %s (as the input), got %s", op, role,
                  lt_dtype_name(x->dtype), lt_dtype_name(t->dtype));
}

lt_status nn_check_vector(const char *op, const char *role, const lt_tensor *t, int64_t n) {
  if (!t || (t->ndim == 1 && t->shape[0] == n)) return LT_OK;
  char s[OPS_SHAPE_BUF];
  return lt_error(LT_ERR_SHAPE, "%s: expected %s of shape [%lld], got %s", op, role, (long long)n,
                  ops_shape_str(s, t->shape, t->ndim));
}

lt_status nn_prepare(nn_scope *s, const lt_tensor *t, lt_dtype dt, lt_tensor **out) {
  *out = NULL;
  if (!t) return LT_OK;
  lt_tensor *converted = NULL, *contiguous = NULL;
  LT_TRY(lt_to_dtype(t, dt, false, &converted));
  lt_status st = lt_contiguous(converted, &contiguous);
  lt_tensor_release(converted);
  if (st != LT_OK) return st;
  *out = nn_hold(s, contiguous);
  return LT_OK;
}

lt_status nn_result(nn_scope *s, const int64_t *shape, int ndim, lt_dtype dt, lt_device dev,
                    lt_tensor **out) {
  *out = NULL;
  LT_TRY(lt_empty(shape, ndim, dt, dev, out));
  nn_hold(s, *out);
  return LT_OK;
}

lt_status nn_deliver(const lt_tensor *r, lt_dtype dt, lt_tensor **out) {
  return lt_to_dtype(r, dt, false, out);
}

lt_status nn_deliver_all(lt_dtype dt, int n, lt_tensor *const *results, lt_tensor **const *outs) {
  lt_status st = LT_OK;
  for (int i = 0; i < n; i++) {
    if (outs[i]) *outs[i] = NULL;
    if (st == LT_OK && results[i] && outs[i]) st = nn_deliver(results[i], dt, outs[i]);
  }
  if (st != LT_OK)
    for (int i = 0; i < n; i++)
      if (outs[i] && *outs[i]) lt_tensor_release(*outs[i]), *outs[i] = NULL;
  return st;
}

lt_status nn_settle(lt_status st, lt_tensor **out, lt_tensor **extra) {
  if (st == LT_OK) return LT_OK;
  if (out && *out) lt_tensor_release(*out), *out = NULL;
  if (extra && *extra) lt_tensor_release(*extra), *extra = NULL;
  return st;
}

void nn_hand_over(lt_status st, lt_tensor *t, lt_tensor **dst) {
  if (dst) *dst = NULL;
  if (st == LT_OK && dst)
    *dst = t;
  else if (t)
    lt_tensor_release(t);
}

lt_status nn_backend(const char *op, lt_device dev, const lt_nn_backend **out) {
  const lt_nn_backend *b = lt_nn_backend_for(dev);
  if (!b) {
    char name[16];
    return lt_error(LT_ERR_DEVICE, "%s: no kernels for device %s (lt was built without its backend)",
                    op, lt_device_name(dev, name));
  }
  *out = b;
  return LT_OK;
}

lt_status nn_check_index_range(const char *op, const lt_tensor *idx, int64_t n, int64_t base,
                               bool has_ignore, int64_t ignore_index, nn_index_error_fn describe) {
  /* A known range (core/known_range.h) settles it without reading the
   * indices: labels moved to a device with :to, indices an op produced. */
  const bool on_device = idx->storage->device.type != LT_DEVICE_CPU;
  if (n > 0 && (has_ignore ? lt_known_range_within_except(idx, base, base + (n - 1), ignore_index)
                            : lt_known_range_within(idx, base, base + (n - 1))))
    return LT_OK;
  /* Otherwise indices on another device are read through a host copy: a bad
   * label must be an error, never an out-of-bounds access in a kernel. */
  lt_tensor *host = NULL;
  if (on_device || !lt_is_contiguous(idx)) {
    lt_tensor *moved = NULL;
    LT_TRY(lt_to_device(idx, lt_cpu(), &moved));
    lt_status st = lt_contiguous(moved, &host);
    lt_tensor_release(moved);
    if (st != LT_OK) return st;
  }
  const lt_tensor *t = host ? host : idx;
  if (lt_estimating()) { /* the copy was made as in a real run; there is nothing to read */
    if (host) lt_tensor_release(host);
    return LT_OK;
  }
  const int64_t *v = lt_data(t);
  const int64_t count = lt_numel(t);
  lt_status st = LT_OK;
  for (int64_t i = 0; i < count; i++) {
    if (has_ignore && v[i] == ignore_index) continue;
    if (v[i] < base || v[i] - base >= n) {
      st = describe(op, (long long)v[i], (long long)n, (long long)base);
      break;
    }
  }
  /* Noted for the next check of the same labels (the backward's). */
  if (st == LT_OK && on_device) lt_known_range_scan(idx, v, count);
  if (host) lt_tensor_release(host);
  return st;
}

void nn_view(lt_tensor *view, const lt_tensor *t, const int64_t *shape, int ndim) {
  *view = *t;
  view->ndim = ndim;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    view->shape[d] = shape[d];
    view->stride[d] = stride;
    stride *= shape[d] > 1 ? shape[d] : 1;
  }
}

bool nn_same_shape(const int64_t *a, int na, const int64_t *b, int nb) {
  if (na != nb) return false;
  for (int d = 0; d < na; d++)
    if (a[d] != b[d]) return false;
  return true;
}

lt_status nn_deliver_norm_grads(lt_dtype x_dtype, const lt_tensor *weight, lt_tensor *gx,
                                lt_tensor *gw, lt_tensor *gb, lt_tensor **grad_input,
                                lt_tensor **grad_weight, lt_tensor **grad_bias) {
  lt_tensor *results[3] = {gx, gw, gb};
  lt_tensor **outs[3] = {grad_input, grad_weight, grad_bias};
  lt_status st = nn_deliver_all(x_dtype, 1, results, outs);
  const lt_dtype pdt = weight ? weight->dtype : x_dtype;
  if (st == LT_OK) st = nn_deliver_all(pdt, 2, results + 1, outs + 1);
  if (st != LT_OK && grad_input && *grad_input) lt_tensor_release(*grad_input), *grad_input = NULL;
  return st;
}
