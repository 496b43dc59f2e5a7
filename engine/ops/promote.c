/* Type promotion of op inputs, after PyTorch's ResultTypeState
 * (aten/src/ATen/native/TypeProperties.cpp). */
#include <math.h>

#include "ops/ops_internal.h"

static lt_dtype promote_or_take(lt_dtype have, lt_dtype add) {
  if (have == LT_NDTYPES) return add;
  if (add == LT_NDTYPES) return have;
  return lt_promote_types(have, add);
}

void ops_rt_init(ops_result_type *rt) {
  rt->dim = rt->zero_dim = rt->wrapped = LT_NDTYPES;
}

void ops_rt_add_tensor(ops_result_type *rt, const lt_tensor *t) {
  if (t->ndim > 0)
    rt->dim = promote_or_take(rt->dim, t->dtype);
  else
    rt->zero_dim = promote_or_take(rt->zero_dim, t->dtype);
}

void ops_rt_add_scalar(ops_result_type *rt, bool is_integer) {
  rt->wrapped = promote_or_take(rt->wrapped, is_integer ? LT_INT64 : LT_FLOAT32);
}

/* The higher class wins unless the lower one is of a higher category
 * (a float number next to an int tensor, anything next to bool). */
static lt_dtype combine_categories(lt_dtype higher, lt_dtype lower) {
  if (higher != LT_NDTYPES && lt_dtype_is_floating(higher)) return higher;
  if (higher == LT_BOOL || (lower != LT_NDTYPES && lt_dtype_is_floating(lower)))
    return promote_or_take(higher, lower);
  if (higher != LT_NDTYPES) return higher;
  return lower;
}

lt_dtype ops_rt_result(const ops_result_type *rt) {
  return combine_categories(rt->dim, combine_categories(rt->zero_dim, rt->wrapped));
}

bool ops_can_cast(lt_dtype from, lt_dtype to) {
  if (lt_dtype_is_floating(from) && !lt_dtype_is_floating(to)) return false;
  if (from != LT_BOOL && to == LT_BOOL) return false;
  return true;
}

lt_status ops_check_cast(const char *op, lt_dtype result, lt_dtype dst) {
  if (ops_can_cast(result, dst)) return LT_OK;
  return lt_error(LT_ERR_DTYPE, "%s: result type %s can't be cast to the desired output type %s",
                  op, lt_dtype_name(result), lt_dtype_name(dst));
}

lt_scalar ops_scalar(double v) {
  lt_scalar s;
  s.f = v;
  if (isnan(v))
    s.i = 0;
  else if (v >= 0x1p63)
    s.i = INT64_MAX;
  else if (v < -0x1p63)
    s.i = INT64_MIN;
  else
    s.i = (int64_t)v;
  return s;
}
