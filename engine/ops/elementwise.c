/* Binary and unary elementwise ops: validation, result dtype, dispatch. */
#include <math.h>
#include <stdio.h>

#include "ops/autocast_internal.h"
#include "ops/op_table.h"
#include "ops/ops_internal.h"

static const char *binary_inplace_name(lt_binary_op op) { return lt_binary_op_inplace_name(op); }
static const char *unary_inplace_name(lt_unary_op op) { return lt_unary_op_inplace_name(op); }

static bool autocast_float32(lt_binary_op op) {
  const ops_binary_row *row = ops_binary_row_of(op);
  return row && row->autocast_float32;
}

/* The dtype a binary op computes in, and its result dtype, from the inputs'
 * promoted dtype. */
static lt_status binary_types(const char *name, lt_binary_op op, lt_dtype common,
                              lt_dtype *compute, lt_dtype *result) {
  const ops_binary_row *row = ops_binary_row_of(op);
  if (!row) return lt_error(LT_ERR_ARG, "%s: unknown binary op %d", name, (int)op);
  if (op == LT_OP_SUB && common == LT_BOOL)
    return lt_error(LT_ERR_DTYPE,
                    "%s: subtraction, the `-` operator, with two bool tensors is not supported; "
                    "use logical_xor() instead",
                    name);
  if (row->kind == OPS_BINARY_INTEGRAL && common == LT_BOOL)
    return lt_error(LT_ERR_DTYPE, "%s: not implemented for bool tensors", name);
  if (row->kind == OPS_BINARY_GRAD && !lt_dtype_is_floating(common))
    return lt_error(LT_ERR_DTYPE, "%s: expected floating point tensors, got %s", name,
                    lt_dtype_name(common));
  *compute = common;
  *result = common;
  if (row->kind == OPS_BINARY_DIVIDE && !lt_dtype_is_floating(common)) /* true division */
    *compute = *result = LT_FLOAT32;
  if (row->kind == OPS_BINARY_COMPARE) *result = LT_BOOL;
  return LT_OK;
}

/* PyTorch raises ZeroDivisionError for an integer remainder or floor
 * division by zero on the CPU. On a GPU neither it nor lt checks (that would
 * wait for the device); lt's kernels give 0 there instead of trapping. */
static bool is_int_division(lt_binary_op op, lt_dtype compute) {
  const ops_binary_row *row = ops_binary_row_of(op);
  return row && row->kind == OPS_BINARY_INTEGRAL && !lt_dtype_is_floating(compute);
}

static lt_status zero_divisor(const char *name) {
  return lt_error(LT_ERR_ARG, "%s: integer division by zero (ZeroDivisionError)", name);
}

static lt_status check_scalar_divisor(const char *name, lt_binary_op op, lt_dtype compute,
                                      double s) {
  return is_int_division(op, compute) && s == 0.0 ? zero_divisor(name) : LT_OK;
}

static lt_status check_tensor_divisor(const char *name, lt_binary_op op, lt_dtype compute,
                                      const lt_tensor *d) {
  if (!is_int_division(op, compute) || d->storage->device.type != LT_DEVICE_CPU) return LT_OK;
  lt_tensor *is_zero = NULL, *zeros = NULL;
  int64_t count = 0;
  lt_status st = lt_binary_scalar(LT_OP_EQ, d, 0.0, true, false, &is_zero);
  if (st == LT_OK) st = lt_sum(is_zero, NULL, 0, false, &zeros);
  if (st == LT_OK) st = lt_item_int64(zeros, &count);
  if (is_zero) lt_tensor_release(is_zero);
  if (zeros) lt_tensor_release(zeros);
  if (st != LT_OK) return st;
  return count > 0 ? zero_divisor(name) : LT_OK;
}

static lt_status check_tensor_pair(const char *name, const lt_tensor *a, const lt_tensor *b) {
  LT_TRY(ops_check_live(name, a));
  LT_TRY(ops_check_live(name, b));
  return ops_check_same_device(name, a, b);
}

lt_status lt_binary(lt_binary_op op, const lt_tensor *a, const lt_tensor *b, lt_tensor **out) {
  /* Autocast: the rows marked FLOAT32 (pow) run in float32 in a CUDA region. */
  if (autocast_float32(op) && ac_float32_wanted(a))
    AC_REDISPATCH(AC_FLOAT32, 2, AC_LIST(a, b), lt_binary(op, ac.t[0], ac.t[1], out));
  const char *name = lt_binary_op_name(op);
  LT_TRY(check_tensor_pair(name, a, b));
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  LT_TRY(lt_broadcast_shapes(name, a->shape, a->ndim, b->shape, b->ndim, shape, &ndim));
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  ops_rt_add_tensor(&rt, b);
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(binary_types(name, op, ops_rt_result(&rt), &compute, &result));
  LT_TRY(check_tensor_divisor(name, op, compute, b));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named(name, shape, ndim, result, a->storage->device, &r));
  lt_scalar none = {0, 0};
  lt_status st = be->binary(op, compute, r, a, b, none, false);
  if (st == LT_OK) st = ag_record_binary(op, a, b, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

/* PyTorch refuses an integer tensor to a negative integer scalar power (the
 * result would be a fraction truncated to 0). */
static lt_status check_int_pow(const char *name, lt_binary_op op, lt_dtype compute, double s,
                               bool scalar_first) {
  if (op == LT_OP_POW && !scalar_first && !lt_dtype_is_floating(compute) && s < 0)
    return lt_error(LT_ERR_ARG, "%s: integers to negative integer powers are not allowed (%g)",
                    name, s);
  return LT_OK;
}

lt_status lt_binary_scalar(lt_binary_op op, const lt_tensor *a, double s, bool is_integer,
                           bool scalar_first, lt_tensor **out) {
  if (autocast_float32(op) && ac_float32_wanted(a))
    AC_REDISPATCH(AC_FLOAT32, 1, AC_LIST(a),
                  lt_binary_scalar(op, ac.t[0], s, is_integer, scalar_first, out));
  const char *name = lt_binary_op_name(op);
  LT_TRY(ops_check_live(name, a));
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  ops_rt_add_scalar(&rt, is_integer);
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(binary_types(name, op, ops_rt_result(&rt), &compute, &result));
  LT_TRY(check_int_pow(name, op, compute, s, scalar_first));
  LT_TRY(scalar_first ? check_tensor_divisor(name, op, compute, a)
                      : check_scalar_divisor(name, op, compute, s));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named(name, a->shape, a->ndim, result, a->storage->device, &r));
  lt_status st = be->binary(op, compute, r, a, NULL, ops_scalar(s), scalar_first);
  if (st == LT_OK) st = ag_record_binary_scalar(op, a, s, scalar_first, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_binary_(lt_binary_op op, lt_tensor *a, const lt_tensor *b) {
  const char *name = binary_inplace_name(op);
  LT_TRY(check_tensor_pair(name, a, b));
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  LT_TRY(lt_broadcast_shapes(name, a->shape, a->ndim, b->shape, b->ndim, shape, &ndim));
  bool same = ndim == a->ndim;
  for (int d = 0; same && d < ndim; d++) same = shape[d] == a->shape[d];
  if (!same) {
    char sa[OPS_SHAPE_BUF], sb[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: output with shape %s doesn't match the broadcast shape %s",
                    name, ops_shape_str(sa, a->shape, a->ndim), ops_shape_str(sb, shape, ndim));
  }
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  ops_rt_add_tensor(&rt, b);
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(binary_types(name, op, ops_rt_result(&rt), &compute, &result));
  LT_TRY(ops_check_cast(name, result, a->dtype));
  LT_TRY(ops_check_writable(name, a));
  LT_TRY(check_tensor_divisor(name, op, compute, b));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *b_copy;
  LT_TRY(ops_inplace_input(name, a, b, true, &b, &b_copy));
  lt_tensor *old = NULL;
  lt_status st = ag_inplace_begin(name, a, b, ag_binary_needs_old(op, a, b), &old);
  if (st == LT_OK) {
    lt_scalar none = {0, 0};
    st = be->binary(op, compute, a, a, b, none, false);
  }
  if (st == LT_OK) {
    ops_bump_version(a, name);
    st = ag_record_binary_(op, a, b, old);
  }
  if (old) lt_tensor_release(old);
  if (b_copy) lt_tensor_release(b_copy);
  return st;
}

lt_status lt_binary_scalar_(lt_binary_op op, lt_tensor *a, double s, bool is_integer) {
  const char *name = binary_inplace_name(op);
  LT_TRY(ops_check_live(name, a));
  ops_result_type rt;
  ops_rt_init(&rt);
  ops_rt_add_tensor(&rt, a);
  ops_rt_add_scalar(&rt, is_integer);
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(binary_types(name, op, ops_rt_result(&rt), &compute, &result));
  LT_TRY(check_int_pow(name, op, compute, s, false));
  LT_TRY(check_scalar_divisor(name, op, compute, s));
  LT_TRY(ops_check_cast(name, result, a->dtype));
  LT_TRY(ops_check_writable(name, a));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *old = NULL;
  LT_TRY(ag_inplace_begin(name, a, NULL, ag_binary_needs_old(op, a, NULL), &old));
  lt_status st = be->binary(op, compute, a, a, NULL, ops_scalar(s), false);
  if (st == LT_OK) {
    ops_bump_version(a, name);
    st = ag_record_binary_scalar_(op, a, s, old);
  }
  if (old) lt_tensor_release(old);
  return st;
}

/* ---- unary ---- */

/* As PyTorch: math functions turn integers into float32; neg, abs, relu,
 * sign and rounding keep the dtype; square of bool is int64; logical_not
 * gives bool; negating a bool is an error. */
static lt_status unary_types(const char *name, lt_unary_op op, lt_dtype in, lt_dtype *compute,
                             lt_dtype *result) {
  const ops_unary_row *row = ops_unary_row_of(op);
  if (!row) return lt_error(LT_ERR_ARG, "%s: unknown unary op %d", name, (int)op);
  if (op == LT_OP_NEG && in == LT_BOOL)
    return lt_error(LT_ERR_DTYPE,
                    "%s: negation, the `-` operator, on a bool tensor is not supported; "
                    "use logical_not() instead",
                    name);
  *compute = *result = in;
  if (row->float_only && !lt_dtype_is_floating(in)) *compute = *result = LT_FLOAT32;
  if (op == LT_OP_SQUARE && in == LT_BOOL) *compute = *result = LT_INT64;
  if (op == LT_OP_LOGICAL_NOT) *result = LT_BOOL;
  return LT_OK;
}

lt_status lt_unary(lt_unary_op op, const lt_tensor *a, lt_tensor **out) {
  /* Autocast: the rows marked FLOAT32 (exp, log, the reciprocals) run in float32 in a CUDA region. */
  const ops_unary_row *row = ops_unary_row_of(op);
  if (row && row->autocast_float32 && ac_float32_wanted(a))
    AC_REDISPATCH(AC_FLOAT32, 1, AC_LIST(a), lt_unary(op, ac.t[0], out));
  const char *name = lt_unary_op_name(op);
  LT_TRY(ops_check_live(name, a));
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(unary_types(name, op, a->dtype, &compute, &result));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *r;
  LT_TRY(lt_empty_named(name, a->shape, a->ndim, result, a->storage->device, &r));
  lt_status st = be->unary(op, compute, r, a);
  if (st == LT_OK) st = ag_record_unary(op, a, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_unary_(lt_unary_op op, lt_tensor *a) {
  const char *name = unary_inplace_name(op);
  LT_TRY(ops_check_live(name, a));
  lt_dtype compute = LT_FLOAT32, result = LT_FLOAT32;
  LT_TRY(unary_types(name, op, a->dtype, &compute, &result));
  LT_TRY(ops_check_cast(name, result, a->dtype));
  LT_TRY(ops_check_writable(name, a));
  const lt_backend *be;
  LT_TRY(ops_backend(name, a->storage->device, &be));
  lt_tensor *old = NULL;
  LT_TRY(ag_inplace_begin(name, a, NULL, ag_unary_needs_old(op), &old));
  /* logical_not_ writes 0/1 in a's own dtype, computing in it too. */
  lt_status st = be->unary(op, op == LT_OP_LOGICAL_NOT ? a->dtype : compute, a, a);
  if (st == LT_OK) {
    ops_bump_version(a, name);
    st = ag_record_unary_(op, a, old);
  }
  if (old) lt_tensor_release(old);
  return st;
}
