/* clamp and where: ops that select between values. */
#include <math.h>

#include "ops/ops_internal.h"

/* clamp's bounds are numbers from the script; an integral bound counts as an
 * integer, so clamping an int tensor to (0, 5) keeps it an int tensor (the
 * API carries no is_integer flag for bounds). */
static lt_dtype clamp_result_type(const lt_tensor *a, bool has_lo, double lo, bool has_hi,
                                  double hi) {
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  if (has_lo) ops_rt_add_scalar(&rt, isfinite(lo) && floor(lo) == lo);
  if (has_hi) ops_rt_add_scalar(&rt, isfinite(hi) && floor(hi) == hi);
  return ops_rt_result(&rt);
}

static lt_status check_bounds(const char *name, bool has_lo, bool has_hi) {
  if (!has_lo && !has_hi)
    return lt_error(LT_ERR_ARG, "%s: at least one of min or max must be given", name);
  return LT_OK;
}

lt_status lt_clamp(const lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                   lt_tensor **out) {
  LT_TRY(ops_check_live("clamp", a));
  LT_TRY(check_bounds("clamp", has_lo, has_hi));
  lt_dtype result = clamp_result_type(a, has_lo, lo, has_hi, hi);
  if (result == LT_BOOL)
    return lt_error(LT_ERR_DTYPE, "clamp: not implemented for bool tensors");
  const lt_backend *be;
  LT_TRY(ops_backend("clamp", a->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named("clamp", a->shape, a->ndim, result, a->storage->device, &r));
  lt_status st = be->clamp(result, r, a, has_lo, ops_scalar(lo), has_hi, ops_scalar(hi));
  if (st == LT_OK) st = ag_record_clamp(a, has_lo, lo, has_hi, hi, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_clamp_(lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi) {
  LT_TRY(ops_check_live("clamp_", a));
  LT_TRY(check_bounds("clamp_", has_lo, has_hi));
  lt_dtype result = clamp_result_type(a, has_lo, lo, has_hi, hi);
  if (result == LT_BOOL)
    return lt_error(LT_ERR_DTYPE, "clamp_: not implemented for bool tensors");
  LT_TRY(ops_check_cast("clamp_", result, a->dtype));
  LT_TRY(ops_check_writable("clamp_", a));
  const lt_backend *be;
  LT_TRY(ops_backend("clamp_", a->storage->device, &be));
  lt_tensor *old = NULL; /* the gradient's mask needs the values before clamping */
  LT_TRY(ag_inplace_begin("clamp_", a, NULL, true, &old));
  lt_status st = be->clamp(result, a, a, has_lo, ops_scalar(lo), has_hi, ops_scalar(hi));
  if (st == LT_OK) {
    ops_bump_version(a, "clamp_");
    st = ag_record_clamp_(a, has_lo, lo, has_hi, hi, old);
  }
  if (old) lt_tensor_release(old);
  return st;
}

lt_status lt_where(const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b,
                   lt_tensor **out) {
  LT_TRY(ops_check_live("where", cond));
  LT_TRY(ops_check_live("where", a));
  LT_TRY(ops_check_live("where", b));
  LT_TRY(ops_check_same_device("where", cond, a));
  LT_TRY(ops_check_same_device("where", a, b));
  if (cond->dtype != LT_BOOL)
    return lt_error(LT_ERR_DTYPE,
                    "where: expected condition to be a bool tensor, but got a tensor with dtype %s",
                    lt_dtype_name(cond->dtype));
  int64_t s1[LT_MAX_DIMS], shape[LT_MAX_DIMS];
  int n1 = 0, ndim = 0;
  LT_TRY(lt_broadcast_shapes("where", cond->shape, cond->ndim, a->shape, a->ndim, s1, &n1));
  LT_TRY(lt_broadcast_shapes("where", s1, n1, b->shape, b->ndim, shape, &ndim));
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  ops_rt_add_tensor(&rt, b);
  const lt_backend *be;
  LT_TRY(ops_backend("where", a->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named("where", shape, ndim, ops_rt_result(&rt), a->storage->device, &r));
  lt_status st = be->where(r, cond, a, b);
  if (st == LT_OK) st = ag_record_where(cond, a, b, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}
