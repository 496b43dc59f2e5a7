/* sort and topk: validation, the results allocated, the backend's stable
 * sort (core/backend.h), which for topk writes the first k of its order. Both
 * return indices whose range is known (core/known_range.h), so that the
 * backward's scatter through them reads nothing back from a device. */
#include "autograd/record_sort.h"
#include "core/known_range.h"
#include "lt/sort.h"
#include "ops/ops_internal.h"


static lt_status check_dim(const char *op, const lt_tensor *t, int dim) {
  LT_TRY(ops_check_live(op, t));
  const int ndim = t->ndim > 0 ? t->ndim : 1;
  if (dim < 0 || dim >= ndim)
    return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range for a %d-dimensional tensor",
                    op, LT_USER_INDEX(dim), t->ndim);
  return LT_OK;
}

/* The first k of t sorted along dim (values and/or indices, k along dim),
 * nothing recorded. */
static lt_status sort_raw(const char *op, const lt_tensor *t, int dim, bool descending, int64_t k,
                          int64_t index_base, lt_tensor **values, lt_tensor **indices) {
  const lt_device dev = t->storage->device;
  const lt_backend *be;
  LT_TRY(ops_backend(op, dev, &be));
  int64_t shape[LT_MAX_DIMS];
  for (int d = 0; d < t->ndim; d++) shape[d] = d == dim ? k : t->shape[d];
  lt_tensor *src = NULL, *v = NULL, *i = NULL;
  lt_status st = lt_contiguous(t, &src);
  if (st == LT_OK && values) st = lt_empty_named(op, shape, t->ndim, t->dtype, dev, &v);
  if (st == LT_OK && indices) st = lt_empty_named(op, shape, t->ndim, LT_INT64, dev, &i);
  if (st == LT_OK) {
    const lt_tensor s1 = ops_view_as_1d(src);
    lt_tensor v1, i1;
    if (v) v1 = ops_view_as_1d(v);
    if (i) i1 = ops_view_as_1d(i);
    st = be->sort(v ? &v1 : NULL, i ? &i1 : NULL, &s1, dim, descending, k, index_base);
  }
  if (src) lt_tensor_release(src);
  if (st != LT_OK) {
    if (v) lt_tensor_release(v);
    if (i) lt_tensor_release(i);
    return st;
  }
  const int64_t size = t->ndim > 0 ? t->shape[dim] : 1;
  if (i && size > 0) lt_known_range_note(i, index_base, index_base + size - 1);
  if (values) *values = v;
  if (indices) *indices = i;
  return LT_OK;
}

/* sort (k the size of dim) or topk: the first k in order, recorded as node
 * when t takes a gradient. */
static lt_status sort_first_k(const char *op, const char *node, const lt_tensor *t, int dim,
                              bool descending, int64_t k, int64_t index_base,
                              lt_tensor **values, lt_tensor **indices) {
  /* The gradient goes back through the indices: a recorded sort computes
   * them even when the caller does not want them. */
  const bool record = values && ag_will_record(t);
  lt_tensor *v = NULL, *i = NULL;
  const bool grad_mode = lt_set_grad_enabled(false); /* a contiguous copy needs no history */
  lt_status st = sort_raw(op, t, dim, descending, k, index_base, values ? &v : NULL,
                          indices || record ? &i : NULL);
  lt_set_grad_enabled(grad_mode);
  LT_TRY(st);
  if (record) st = ag_record_sort(node, t, dim, index_base, i, v);
  return ops_finish_pair(st, v, i, values, indices);
}

lt_status lt_sort(const lt_tensor *t, int dim, bool descending, int64_t index_base,
                  lt_tensor **values, lt_tensor **indices) {
  const char *op = values ? "sort" : "argsort";
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  LT_TRY(check_dim(op, t, dim));
  const int64_t size = t->ndim > 0 ? t->shape[dim] : 1;
  return sort_first_k(op, "SortBackward", t, dim, descending, size, index_base, values, indices);
}

lt_status lt_topk(const lt_tensor *t, int64_t k, int dim, bool largest, int64_t index_base,
                  lt_tensor **values, lt_tensor **indices) {
  const char *op = "topk";
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  LT_TRY(check_dim(op, t, dim));
  const int64_t size = t->ndim > 0 ? t->shape[dim] : 1;
  if (k < 0 || k > size)
    return lt_error(LT_ERR_INDEX, "%s: k %lld is out of range for dimension %lld of size %lld "
                    "(expected 0 to %lld)", op, (long long)k, LT_USER_INDEX(dim),
                    (long long)size, (long long)size);
  return sort_first_k(op, "TopkBackward", t, dim, largest, k, index_base, values, indices);
}
