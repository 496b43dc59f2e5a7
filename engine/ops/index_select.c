/* index_select: validation, the rows checked on the host (or known to be in
 * range, core/known_range.h) and handed to the backend's gather on t's
 * device. */
#include "autograd/record_nn.h"
#include "core/backend.h"
#include "core/known_range.h"
#include "lt/index.h"
#include "lt/ops.h"
#include "ops/ops_internal.h"

static const char *const OP = "index_select";

/* t's elements, contiguous, on the CPU: t itself (one more reference) or a copy. */
static lt_status on_host(const lt_tensor *t, lt_tensor **out) {
  if (t->storage->device.type == LT_DEVICE_CPU) return lt_contiguous(t, out);
  lt_tensor *host = NULL;
  LT_TRY(lt_to_device(t, lt_cpu(), &host));
  lt_status st = lt_contiguous(host, out);
  lt_tensor_release(host);
  return st;
}

static lt_status check_arguments(const lt_tensor *t, int dim, const lt_tensor *index) {
  LT_TRY(ops_check_live(OP, t));
  LT_TRY(ops_check_live(OP, index));
  if (t->ndim == 0)
    return lt_error(LT_ERR_SHAPE, "%s: expected a tensor with at least one dimension, got a "
                    "0-dim tensor", OP);
  if (dim < 0 || dim >= t->ndim)
    return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range for a %d-dimensional tensor",
                    OP, LT_USER_INDEX(dim), t->ndim);
  if (index->dtype != LT_INT64 && index->dtype != LT_INT32)
    return lt_error(LT_ERR_DTYPE, "%s: expected an int64 or int32 index tensor, got %s", OP,
                    lt_dtype_name(index->dtype));
  if (index->ndim > 1) {
    char buf[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected a 1-D index tensor, got shape %s", OP,
                    ops_shape_str(buf, index->shape, index->ndim));
  }
  return LT_OK;
}

/* The index values made 0-based into rows, each checked against size. */
static lt_status read_rows(const lt_tensor *index, int64_t base, int dim, int64_t size,
                           int64_t *rows) {
  lt_tensor *host = NULL;
  LT_TRY(on_host(index, &host));
  if (lt_estimating()) { /* the copy was made as in a real run; there is nothing to read */
    lt_tensor_release(host);
    return LT_OK;
  }
  const char *p = lt_data(host);
  size_t elsize = lt_dtype_size(host->dtype);
  lt_status st = LT_OK;
  for (int64_t k = 0, n = lt_numel(host); k < n && st == LT_OK; k++) {
    int64_t v = lt_load_int64(p + (size_t)k * elsize, host->dtype);
    /* Compared before subtracting, so that no value can overflow. */
    if (v < base || v - base >= size)
      st = lt_error(LT_ERR_INDEX, "%s: index %lld (at position %lld of the index) is out of "
                    "range for dimension %lld of size %lld (expected %lld to %lld)", OP,
                    (long long)v, LT_USER_INDEX(k), LT_USER_INDEX(dim), (long long)size,
                    (long long)base, (long long)(base + size - 1));
    else
      rows[k] = v - base;
  }
  lt_tensor_release(host);
  return st;
}

/* The rows to gather as an int64 tensor on dev, with the base the kernel
 * subtracts. An int64 index already on dev whose range the host saw
 * (core/known_range.h) is used as it is, with no device-to-host copy;
 * otherwise the index is read and checked on the host, and its 0-based rows
 * go to dev. */
static lt_status device_rows(const lt_tensor *index, int64_t base, int dim, int64_t size,
                             lt_device dev, lt_tensor **rows, int64_t *rows_base) {
  if (index->dtype == LT_INT64 && lt_device_eq(index->storage->device, dev) &&
      lt_is_contiguous(index) && size > 0 &&
      lt_known_range_within(index, base, base + (size - 1))) {
    lt_tensor_retain((lt_tensor *)index);
    *rows = (lt_tensor *)index;
    *rows_base = base;
    return LT_OK;
  }
  const int64_t n = lt_numel(index);
  lt_tensor *host = NULL;
  LT_TRY(lt_empty(&n, 1, LT_INT64, lt_cpu(), &host));
  lt_status st = read_rows(index, base, dim, size, lt_data(host));
  *rows_base = 0;
  if (st != LT_OK || dev.type == LT_DEVICE_CPU) {
    if (st == LT_OK) *rows = host;
    else lt_tensor_release(host);
    return st;
  }
  st = lt_to_device(host, dev, rows);
  lt_tensor_release(host);
  return st;
}

static lt_status gather(const lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                        lt_tensor **out) {
  *out = NULL;
  LT_TRY(check_arguments(t, dim, index));
  const lt_device dev = t->storage->device;
  const lt_backend *be;
  LT_TRY(ops_backend(OP, dev, &be));
  lt_tensor *rows = NULL, *src = NULL, *result = NULL;
  int64_t rows_base = 0;
  lt_status st = device_rows(index, index_base, dim, t->shape[dim], dev, &rows, &rows_base);
  if (st == LT_OK) st = lt_contiguous(t, &src);
  if (st == LT_OK) {
    int64_t shape[LT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    shape[dim] = lt_numel(index);
    st = lt_empty_named(OP, shape, t->ndim, t->dtype, dev, &result);
  }
  if (st == LT_OK)
    st = be->index_select(result, src, dim, lt_data(rows), lt_numel(index), rows_base);
  /* The result holds t's elements: a gather of labels keeps their range. */
  if (st == LT_OK) lt_known_range_inherit(result, t);
  if (rows) lt_tensor_release(rows);
  if (src) lt_tensor_release(src);
  if (st != LT_OK && result) lt_tensor_release(result), result = NULL;
  *out = result;
  return st;
}

lt_status lt_index_select(const lt_tensor *t, int dim, const lt_tensor *index,
                          int64_t index_base, lt_tensor **out) {
  /* Off while the operands are prepared: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = gather(t, dim, index, index_base, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_index_select(t, dim, index, index_base, *out);
  if (st != LT_OK && *out) lt_tensor_release(*out), *out = NULL;
  return st;
}
