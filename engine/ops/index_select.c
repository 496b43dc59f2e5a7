/* index_select: validation, the indices brought to the host and made
 * 0-based, then the CPU gather. Tensors on another device take a round trip
 * through the CPU (a data loader's batches start on the CPU anyway); a device
 * kernel can replace it without changing the entry point. */
#include <stdlib.h>

#include "autograd/record_nn.h"
#include "cpu/cpu_index.h"
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

static lt_status gather(const lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                        lt_tensor **out) {
  *out = NULL;
  LT_TRY(check_arguments(t, dim, index));
  int64_t n = lt_numel(index);
  int64_t *rows = malloc((size_t)(n > 0 ? n : 1) * sizeof *rows);
  if (!rows)
    return lt_error(LT_ERR_OOM, "%s: out of host memory for %lld indices", OP, (long long)n);
  lt_tensor *src = NULL, *result = NULL;
  lt_status st = read_rows(index, index_base, dim, t->shape[dim], rows);
  if (st == LT_OK) st = on_host(t, &src);
  if (st == LT_OK) {
    int64_t shape[LT_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
    shape[dim] = n;
    st = lt_empty(shape, t->ndim, t->dtype, lt_cpu(), &result);
  }
  if (st == LT_OK) cpu_index_select(result, src, dim, rows, n);
  free(rows);
  if (src) lt_tensor_release(src);
  if (st != LT_OK) return st;
  if (t->storage->device.type == LT_DEVICE_CPU) {
    *out = result;
    return LT_OK;
  }
  st = lt_to_device(result, t->storage->device, out);
  lt_tensor_release(result);
  return st;
}

lt_status lt_index_select(const lt_tensor *t, int dim, const lt_tensor *index,
                          int64_t index_base, lt_tensor **out) {
  /* Off while t is copied to the host and back: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = gather(t, dim, index, index_base, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_index_select(t, dim, index, index_base, *out);
  if (st != LT_OK && *out) lt_tensor_release(*out), *out = NULL;
  return st;
}
