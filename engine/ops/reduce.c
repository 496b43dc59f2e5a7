/* Reductions: sum, mean, prod over dims; max/min/argmax/argmin. */
#include <string.h>

#include "ops/autocast_internal.h"
#include "ops/ops_internal.h"

/* Turns the dims list into per-dim flags (ndims 0: every dim) and gives the
 * output shape. */
static lt_status reduce_shape(const char *name, const lt_tensor *t, const int *dims, int ndims,
                              bool keepdim, bool *reduced, int64_t *shape, int *ndim) {
  if (ndims < 0 || (ndims > 0 && !dims))
    return lt_error(LT_ERR_ARG, "%s: bad list of %d dims", name, ndims);
  for (int d = 0; d < LT_MAX_DIMS; d++) reduced[d] = ndims == 0;
  for (int i = 0; i < ndims; i++) {
    int d = dims[i];
    if (t->ndim == 0 && (d == 0 || d == -1)) continue; /* a scalar reduces to itself */
    if (d < 0 || d >= t->ndim)
      return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range for a %d-dimensional tensor",
                      name, LT_USER_INDEX(d), t->ndim);
    if (reduced[d])
      return lt_error(LT_ERR_ARG, "%s: dimension %lld appears multiple times in the list of dims",
                      name, LT_USER_INDEX(d));
    reduced[d] = true;
  }
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (!reduced[d])
      shape[n++] = t->shape[d];
    else if (keepdim)
      shape[n++] = 1;
  }
  *ndim = n;
  return LT_OK;
}

static lt_status reduce_op(const char *name, lt_reduce_op op, const lt_tensor *t, const int *dims,
                           int ndims, bool keepdim, lt_tensor **out) {
  LT_TRY(ops_check_live(name, t));
  lt_dtype result = t->dtype;
  if (!lt_dtype_is_floating(t->dtype)) {
    if (op == LT_REDUCE_MEAN)
      return lt_error(LT_ERR_DTYPE,
                      "%s: could not infer output dtype. Input dtype must be either a floating "
                      "point or complex dtype. Got: %s",
                      name, lt_dtype_name(t->dtype));
    result = LT_INT64; /* sum/prod of bool and integers, as PyTorch */
  }
  bool reduced[LT_MAX_DIMS];
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  LT_TRY(reduce_shape(name, t, dims, ndims, keepdim, reduced, shape, &ndim));
  const lt_backend *be;
  LT_TRY(ops_backend(name, t->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named(name, shape, ndim, result, t->storage->device, &r));
  lt_status st = be->reduce(op, r, t, reduced);
  if (st == LT_OK) st = ag_record_reduce(op, t, reduced, keepdim, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_sum(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out) {
  AC_ENTRY(AC_OP_SUM, t, 1, AC_LIST(t), lt_sum(ac.t[0], dims, ndims, keepdim, out));
  return reduce_op("sum", LT_REDUCE_SUM, t, dims, ndims, keepdim, out);
}

lt_status lt_mean(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out) {
  return reduce_op("mean", LT_REDUCE_MEAN, t, dims, ndims, keepdim, out);
}

lt_status lt_prod(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out) {
  AC_ENTRY(AC_OP_PROD, t, 1, AC_LIST(t), lt_prod(ac.t[0], dims, ndims, keepdim, out));
  return reduce_op("prod", LT_REDUCE_PROD, t, dims, ndims, keepdim, out);
}

/* ---- max/min with indices ---- */

/* values and/or indices of the max/min over dim (all: every element). */
static lt_status index_reduce(const char *name, bool is_max, const lt_tensor *t, int dim,
                              bool all, bool keepdim, int64_t index_base, lt_tensor **values,
                              lt_tensor **indices) {
  LT_TRY(ops_check_live(name, t));
  bool reduced[LT_MAX_DIMS];
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0, kernel_dim = -1;
  if (all) {
    if (lt_numel(t) == 0)
      return lt_error(LT_ERR_SHAPE, "%s: cannot reduce an empty tensor (shape %s) over all dims",
                      name, ops_shape_str((char[OPS_SHAPE_BUF]){0}, t->shape, t->ndim));
    LT_TRY(reduce_shape(name, t, NULL, 0, keepdim, reduced, shape, &ndim));
  } else {
    int d = dim;
    LT_TRY(reduce_shape(name, t, &d, 1, keepdim, reduced, shape, &ndim));
    if (t->ndim > 0) {
      kernel_dim = dim;
      if (t->shape[dim] == 0)
        return lt_error(LT_ERR_SHAPE, "%s: expected reduction dim %lld to have non-zero size",
                        name, LT_USER_INDEX(dim));
    }
  }
  const lt_backend *be;
  LT_TRY(ops_backend(name, t->storage->device, &be));
  lt_tensor *v = NULL, *i = NULL;
  lt_status st = LT_OK;
  /* The gradient of max over a dim goes to the index, so a recorded max
   * computes the indices even when the caller does not want them. */
  const bool record = values && ag_will_record(t);
  if (values) st = lt_empty_named(name, shape, ndim, t->dtype, t->storage->device, &v);
  if (st == LT_OK && (indices || (record && !all)))
    st = lt_empty_named(name, shape, ndim, LT_INT64, t->storage->device, &i);
  if (st == LT_OK) st = be->reduce_index(is_max, v, i, t, kernel_dim, index_base);
  if (st == LT_OK && record)
    st = all ? ag_record_reduce_all(is_max, t, v)
             : ag_record_index_reduce(is_max, t, dim, keepdim, index_base, v, i);
  return ops_finish_pair(st, v, i, values, indices);
}

lt_status lt_max_dim(const lt_tensor *t, int dim, bool keepdim, int64_t index_base,
                     lt_tensor **values, lt_tensor **indices) {
  return index_reduce("max", true, t, dim, false, keepdim, index_base, values, indices);
}

lt_status lt_min_dim(const lt_tensor *t, int dim, bool keepdim, int64_t index_base,
                     lt_tensor **values, lt_tensor **indices) {
  return index_reduce("min", false, t, dim, false, keepdim, index_base, values, indices);
}

lt_status lt_max_all(const lt_tensor *t, lt_tensor **out) {
  return index_reduce("max", true, t, 0, true, false, 0, out, NULL);
}

lt_status lt_min_all(const lt_tensor *t, lt_tensor **out) {
  return index_reduce("min", false, t, 0, true, false, 0, out, NULL);
}

lt_status lt_argmax(const lt_tensor *t, int dim, bool all, bool keepdim, int64_t index_base,
                    lt_tensor **out) {
  return index_reduce("argmax", true, t, dim, all, keepdim, index_base, NULL, out);
}

lt_status lt_argmin(const lt_tensor *t, int dim, bool all, bool keepdim, int64_t index_base,
                    lt_tensor **out) {
  return index_reduce("argmin", false, t, dim, all, keepdim, index_base, NULL, out);
}
