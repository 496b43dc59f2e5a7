/* cat and stack: inputs of any dtypes (promoted) on one device, copied into
 * slices of one new tensor. */
#include <string.h>

#include "ops/ops_internal.h"

/* Live inputs on one device; their promoted dtype. */
static lt_status check_inputs(const char *name, lt_tensor *const *ts, int n, lt_dtype *dtype) {
  if (n <= 0 || !ts) return lt_error(LT_ERR_ARG, "%s: expected a non-empty list of tensors", name);
  ops_result_type rt;
  ops_rt_init(&rt);
  for (int i = 0; i < n; i++) {
    LT_TRY(ops_check_live(name, ts[i]));
    LT_TRY(ops_check_same_device(name, ts[0], ts[i]));
    rt.dim = rt.dim == LT_NDTYPES ? ts[i]->dtype : lt_promote_types(rt.dim, ts[i]->dtype);
  }
  *dtype = rt.dim;
  return LT_OK;
}

/* PyTorch's legacy rule: a 1-D tensor of size 0 may sit in any cat and is
 * skipped. */
static bool skipped_in_cat(const lt_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

lt_status lt_cat(lt_tensor *const *ts, int n, int dim, lt_tensor **out) {
  lt_dtype dt = LT_FLOAT32;
  LT_TRY(check_inputs("cat", ts, n, &dt));
  int ref = -1; /* the first tensor that sets the shape */
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim == 0)
      return lt_error(LT_ERR_SHAPE, "cat: zero-dimensional tensor (at position %lld) cannot be "
                      "concatenated", LT_USER_INDEX(i));
    if (ref < 0 && !skipped_in_cat(ts[i])) ref = i;
  }
  if (ref < 0) ref = 0;
  const lt_tensor *r0 = ts[ref];
  int d = 0;
  LT_TRY(lt_wrap_dim("cat", dim, r0->ndim, &d));
  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, r0->shape, sizeof shape);
  shape[d] = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    if (skipped_in_cat(t) && i != ref) continue;
    if (t->ndim != r0->ndim)
      return lt_error(LT_ERR_SHAPE,
                      "cat: tensors must have the same number of dimensions: got %d and %d "
                      "(tensor %lld in the list)", r0->ndim, t->ndim, LT_USER_INDEX(i));
    for (int k = 0; k < t->ndim; k++) {
      if (k != d && t->shape[k] != r0->shape[k])
        return lt_error(LT_ERR_SHAPE,
                        "cat: sizes of tensors must match except in dimension %lld. Expected size "
                        "%lld but got size %lld for tensor number %lld in the list",
                        LT_USER_INDEX(d), (long long)r0->shape[k], (long long)t->shape[k],
                        LT_USER_INDEX(i));
    }
    if (__builtin_add_overflow(shape[d], t->shape[d], &shape[d])) {
      char buf[OPS_SHAPE_BUF];
      return lt_error(LT_ERR_SHAPE,
                      "cat: the sizes in dimension %lld add up past int64 (at tensor %lld, %s)",
                      LT_USER_INDEX(d), LT_USER_INDEX(i), ops_shape_str(buf, t->shape, t->ndim));
    }
  }
  const lt_backend *be;
  LT_TRY(ops_backend("cat", r0->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named("cat", shape, r0->ndim, dt, r0->storage->device, &r));
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    if (t->shape[d] == 0) continue; /* nothing to copy (and skipped 1-D ones) */
    lt_tensor slice = *r;
    ops_view_narrow(&slice, d, at, t->shape[d]);
    lt_status st = be->copy(&slice, t);
    if (st != LT_OK) {
      lt_tensor_release(r);
      return st;
    }
    at += t->shape[d];
  }
  lt_status st = ag_record_cat(ts, n, d, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_stack(lt_tensor *const *ts, int n, int dim, lt_tensor **out) {
  lt_dtype dt = LT_FLOAT32;
  LT_TRY(check_inputs("stack", ts, n, &dt));
  const lt_tensor *t0 = ts[0];
  for (int i = 1; i < n; i++) {
    bool same = ts[i]->ndim == t0->ndim;
    for (int k = 0; same && k < t0->ndim; k++) same = ts[i]->shape[k] == t0->shape[k];
    if (!same) {
      char s0[OPS_SHAPE_BUF], si[OPS_SHAPE_BUF];
      return lt_error(LT_ERR_SHAPE,
                      "stack: expects each tensor to be equal size, but got %s at entry 1 and %s "
                      "at entry %lld",
                      ops_shape_str(s0, t0->shape, t0->ndim),
                      ops_shape_str(si, ts[i]->shape, ts[i]->ndim), LT_USER_INDEX(i));
    }
  }
  if (t0->ndim + 1 > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "stack: the result would have more than %d dims", LT_MAX_DIMS);
  int d = 0;
  LT_TRY(lt_wrap_dim("stack", dim, t0->ndim + 1, &d));
  int64_t shape[LT_MAX_DIMS];
  for (int k = 0, j = 0; k <= t0->ndim; k++) shape[k] = k == d ? n : t0->shape[j++];
  const lt_backend *be;
  LT_TRY(ops_backend("stack", t0->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named("stack", shape, t0->ndim + 1, dt, t0->storage->device, &r));
  for (int i = 0; i < n; i++) {
    lt_tensor slice = *r;
    ops_view_select(&slice, d, i);
    lt_status st = be->copy(&slice, ts[i]);
    if (st != LT_OK) {
      lt_tensor_release(r);
      return st;
    }
  }
  lt_status st = ag_record_stack(ts, n, d, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}
