/* Input checks and error text shared by every op. */
#include <stdio.h>

#include "ops/ops_internal.h"

char *ops_shape_str(char *buf, const int64_t *shape, int ndim) {
  return lt_format_shape(buf, OPS_SHAPE_BUF, shape, ndim);
}

lt_status ops_check_live(const char *op, const lt_tensor *t) {
  if (!t) return lt_error(LT_ERR_ARG, "%s: expected a tensor, got nothing", op);
  if (!t->storage || t->refcount <= 0)
    return lt_error(LT_ERR_FREED, "%s: attempt to use a freed tensor", op);
  return LT_OK;
}

lt_status ops_check_same_device(const char *op, const lt_tensor *a, const lt_tensor *b) {
  if (lt_device_eq(a->storage->device, b->storage->device)) return LT_OK;
  char da[16], db[16];
  return lt_error(LT_ERR_DEVICE,
                  "%s: expected all tensors to be on the same device, but found %s and %s", op,
                  lt_device_name(a->storage->device, da), lt_device_name(b->storage->device, db));
}

lt_status ops_backend(const char *op, lt_device dev, const lt_backend **out) {
  const lt_backend *b = lt_backend_for(dev);
  if (!b) {
    char name[16];
    return lt_error(LT_ERR_DEVICE, "%s: no kernels for device %s (lt was built without its backend)",
                    op, lt_device_name(dev, name));
  }
  *out = b;
  return LT_OK;
}

lt_status ops_check_writable(const char *op, const lt_tensor *t) {
  for (int d = 0; d < t->ndim; d++) {
    if (t->stride[d] == 0 && t->shape[d] > 1)
      return lt_error(LT_ERR_ARG,
                      "%s: unsupported operation: more than one element of the written-to tensor "
                      "refers to a single memory location (clone it first)",
                      op);
  }
  return LT_OK;
}

void ops_view_narrow(lt_tensor *view, int dim, int64_t start, int64_t length) {
  view->offset += start * view->stride[dim];
  view->shape[dim] = length;
}

void ops_view_select(lt_tensor *view, int dim, int64_t index) {
  view->offset += index * view->stride[dim];
  for (int d = dim; d + 1 < view->ndim; d++) {
    view->shape[d] = view->shape[d + 1];
    view->stride[d] = view->stride[d + 1];
  }
  view->ndim--;
}

lt_tensor ops_view_as_1d(const lt_tensor *t) {
  lt_tensor v = *t;
  if (v.ndim == 0) {
    v.ndim = 1;
    v.shape[0] = 1;
    v.stride[0] = 1;
  }
  return v;
}

lt_status ops_finish_pair(lt_status st, lt_tensor *v, lt_tensor *i, lt_tensor **values,
                          lt_tensor **indices) {
  if (st != LT_OK || !indices) {
    if (i) lt_tensor_release(i);
    i = NULL;
  }
  if (st != LT_OK) {
    if (v) lt_tensor_release(v);
    return st;
  }
  if (values) *values = v;
  else if (v) lt_tensor_release(v);
  if (indices) *indices = i;
  return LT_OK;
}

void ops_view_expand(lt_tensor *view, const int64_t *shape, int ndim) {
  int64_t vs[LT_MAX_DIMS], vt[LT_MAX_DIMS];
  const int lead = ndim - view->ndim;
  for (int d = 0; d < ndim; d++) {
    const int src = d - lead;
    const bool broadcast = src < 0 || view->shape[src] != shape[d];
    vs[d] = shape[d];
    vt[d] = broadcast ? 0 : view->stride[src];
  }
  for (int d = 0; d < ndim; d++) {
    view->shape[d] = vs[d];
    view->stride[d] = vt[d];
  }
  view->ndim = ndim;
}
