/* Filling, copying, dtype/device conversion and reading single values. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "core/known_range.h"
#include "lt/cuda.h"
#include "ops/ops_internal.h"

/* PyTorch refuses a fill value the dtype cannot represent (300 into uint8,
 * 1e5 into float16) instead of silently wrapping it. */
lt_status ops_check_fill_value(const char *name, double v, lt_dtype dt) {
  double lo = 0, hi = 0;
  switch (dt) {
    case LT_BOOL: case LT_FLOAT64: return LT_OK;
    case LT_FLOAT32: lo = -FLT_MAX, hi = FLT_MAX; break;
    case LT_FLOAT16: lo = -65504.0, hi = 65504.0; break;
    case LT_BFLOAT16: lo = -0x1.fep127, hi = 0x1.fep127; break;
    case LT_INT64: lo = -0x1p63, hi = 0x1p63; break;
    case LT_INT32: lo = -0x1p31, hi = 0x1p31 - 1; break;
    case LT_UINT8: lo = 0, hi = 255; break;
    default: break;
  }
  bool fits;
  if (lt_dtype_is_floating(dt))
    fits = !isfinite(v) || (v >= lo && v <= hi);
  else if (dt == LT_INT64)
    fits = v >= lo && v < hi; /* 2^63 itself is out */
  else
    fits = v >= lo && v <= hi;
  if (fits) return LT_OK;
  return lt_error(LT_ERR_ARG, "%s: value %g cannot be converted to type %s without overflow", name,
                  v, lt_dtype_name(dt));
}

lt_status lt_fill_(lt_tensor *t, double value) {
  LT_TRY(ops_check_live("fill_", t));
  LT_TRY(ops_check_fill_value("fill_", value, t->dtype));
  LT_TRY(ops_check_writable("fill_", t));
  lt_tensor *no_old = NULL; /* the old values get no gradient: nothing kept */
  LT_TRY(ag_inplace_begin("fill_", t, NULL, false, &no_old));
  const lt_backend *be;
  LT_TRY(ops_backend("fill_", t->storage->device, &be));
  LT_TRY(be->fill(t, value));
  ops_bump_version(t, "fill_");
  return ag_record_fill_("FillBackward", t);
}

lt_status lt_zero_(lt_tensor *t) {
  LT_TRY(ops_check_live("zero_", t));
  LT_TRY(ops_check_writable("zero_", t));
  lt_tensor *no_old = NULL; /* the old values get no gradient: nothing kept */
  LT_TRY(ag_inplace_begin("zero_", t, NULL, false, &no_old));
  const lt_backend *be;
  LT_TRY(ops_backend("zero_", t->storage->device, &be));
  LT_TRY(be->fill(t, 0.0));
  ops_bump_version(t, "zero_");
  return ag_record_fill_("ZeroBackward", t);
}

/* A copy between two devices runs on the one that is not the CPU (its
 * backend moves data both ways); otherwise both are the same device. */
static lt_status copy_backend(const char *name, const lt_tensor *dst, const lt_tensor *src,
                              const lt_backend **out) {
  lt_device dd = dst->storage->device, sd = src->storage->device;
  if (lt_device_eq(dd, sd)) return ops_backend(name, dd, out);
  if (dd.type != LT_DEVICE_CPU && sd.type != LT_DEVICE_CPU && dd.type != sd.type)
    return ops_check_same_device(name, dst, src);
  return ops_backend(name, dd.type != LT_DEVICE_CPU ? dd : sd, out);
}

/* r, an int64 copy of t, gets t's known range; a copy from the host to a
 * device notes the range of the elements it sent (core/known_range.h), so
 * that labels moved with :to are range-checked without reading them back. */
static void note_copied_range(const lt_tensor *r, const lt_tensor *t) {
  if (t->storage->device.type == LT_DEVICE_CPU && r->storage->device.type != LT_DEVICE_CPU &&
      lt_is_contiguous(t) && !lt_estimating())
    lt_known_range_scan(r, lt_data(t), lt_numel(t));
  else
    lt_known_range_inherit(r, t);
}

/* copy_ once src is known not to overlap dst (or to be dst element for element). */
static lt_status copy_into(lt_tensor *dst, const lt_tensor *src) {
  lt_tensor *no_old = NULL;
  LT_TRY(ag_inplace_begin("copy_", dst, src, false, &no_old));
  const lt_backend *be;
  LT_TRY(copy_backend("copy_", dst, src, &be));
  LT_TRY(be->copy(dst, src));
  ops_bump_version(dst, "copy_");
  /* Labels copied into a buffer kept on a device: noted as :to notes them
   * (after the bump, which the note is keyed to). */
  if (dst->dtype == LT_INT64 && src->dtype == LT_INT64 && lt_numel(dst) == lt_numel(src))
    note_copied_range(dst, src);
  return ag_record_copy_(dst, src);
}

lt_status lt_copy_(lt_tensor *dst, const lt_tensor *src) {
  LT_TRY(ops_check_live("copy_", dst));
  LT_TRY(ops_check_live("copy_", src));
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  bool fits = src->ndim <= dst->ndim &&
              lt_broadcast_shapes("copy_", dst->shape, dst->ndim, src->shape, src->ndim, shape,
                                  &ndim) == LT_OK;
  for (int d = 0; fits && d < ndim; d++) fits = shape[d] == dst->shape[d];
  if (!fits) {
    char sd[OPS_SHAPE_BUF], ss[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "copy_: source shape %s cannot be broadcast to destination shape %s",
                    ops_shape_str(ss, src->shape, src->ndim), ops_shape_str(sd, dst->shape, dst->ndim));
  }
  LT_TRY(ops_check_writable("copy_", dst));
  /* x:copy_(x:t()) is a correct transpose: the source is read first. */
  lt_tensor *src_copy;
  LT_TRY(ops_inplace_input("copy_", dst, src, false, &src, &src_copy));
  lt_status st = copy_into(dst, src);
  if (src_copy) lt_tensor_release(src_copy);
  return st;
}

/* A new contiguous tensor of t's shape on dev with dtype dt holding t's
 * values (dev lt_pinned_pool(): a pinned CPU tensor). */
static lt_status converted_copy_ex(const char *name, const lt_tensor *t, lt_dtype dt,
                                   lt_device dev, bool non_blocking, lt_tensor **out) {
  if ((unsigned)dt >= LT_NDTYPES) return lt_error(LT_ERR_DTYPE, "%s: unknown dtype %d", name, (int)dt);
  lt_tensor *r;
  LT_TRY(lt_empty_named(name, t->shape, t->ndim, dt, dev, &r));
  dev = r->storage->device;
  const lt_backend *be;
  lt_status st = copy_backend(name, r, t, &be);
  if (st == LT_OK)
    st = non_blocking && be->copy_non_blocking ? be->copy_non_blocking(r, t) : be->copy(r, t);
  if (st == LT_OK && dt == LT_INT64 && t->dtype == LT_INT64) note_copied_range(r, t);
  if (st == LT_OK)
    st = ag_record_identity(dt != t->dtype || !lt_device_eq(dev, t->storage->device)
                                ? "ToCopyBackward"
                                : "CloneBackward",
                            t, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

static lt_status converted_copy(const char *name, const lt_tensor *t, lt_dtype dt, lt_device dev,
                                lt_tensor **out) {
  return converted_copy_ex(name, t, dt, dev, false, out);
}

lt_status lt_to_dtype(const lt_tensor *t, lt_dtype dt, bool copy, lt_tensor **out) {
  LT_TRY(ops_check_live("to", t));
  if (dt == t->dtype && !copy) {
    lt_tensor_retain((lt_tensor *)t);
    *out = (lt_tensor *)t;
    return LT_OK;
  }
  return converted_copy("to", t, dt, t->storage->device, out);
}

lt_status lt_to_device_ex(const lt_tensor *t, lt_device dev, bool non_blocking, lt_tensor **out) {
  LT_TRY(ops_check_live("to", t));
  if (lt_device_eq(dev, t->storage->device)) {
    lt_tensor_retain((lt_tensor *)t);
    *out = (lt_tensor *)t;
    return LT_OK;
  }
  const lt_backend *be;
  LT_TRY(ops_backend("to", dev, &be)); /* fail before allocating on an absent device */
  return converted_copy_ex("to", t, t->dtype, dev, non_blocking, out);
}

lt_status lt_to_device(const lt_tensor *t, lt_device dev, lt_tensor **out) {
  return lt_to_device_ex(t, dev, false, out);
}

bool lt_is_pinned(const lt_tensor *t) { return t && t->storage && t->storage->pinned; }

lt_status lt_pin_memory(const lt_tensor *t, lt_tensor **out) {
  LT_TRY(ops_check_live("pin_memory", t));
  if (t->storage->device.type != LT_DEVICE_CPU) {
    char name[16];
    return lt_error(LT_ERR_DEVICE, "pin_memory: only CPU tensors can be pinned, got a tensor on %s",
                    lt_device_name(t->storage->device, name));
  }
  if (lt_is_pinned(t)) {
    lt_tensor_retain((lt_tensor *)t);
    *out = (lt_tensor *)t;
    return LT_OK;
  }
  /* Page-locking is the CUDA driver's service: without a device, PyTorch
   * fails the same way. */
  if (!lt_cuda_is_available())
    return lt_error(LT_ERR_DEVICE, "pin_memory: pinned memory needs a CUDA device, and none was found");
  return converted_copy_ex("pin_memory", t, t->dtype, lt_pinned_pool(), false, out);
}

lt_status lt_clone(const lt_tensor *t, lt_tensor **out) {
  LT_TRY(ops_check_live("clone", t));
  return converted_copy("clone", t, t->dtype, t->storage->device, out);
}

/* The bytes of a one-element tensor, on the host. */
static lt_status read_single(const char *name, const lt_tensor *t, unsigned char bytes[8]) {
  LT_TRY(ops_check_live(name, t));
  int64_t n = lt_numel(t);
  if (n != 1)
    return lt_error(LT_ERR_ARG, "%s: a tensor with %lld elements cannot be converted to a number",
                    name, (long long)n);
  const lt_backend *be;
  LT_TRY(ops_backend(name, t->storage->device, &be));
  memset(bytes, 0, 8);
  return be->read_element(t, bytes);
}

lt_status lt_item(const lt_tensor *t, double *out) {
  unsigned char bytes[8];
  LT_TRY(read_single("item", t, bytes));
  *out = lt_load_double(bytes, t->dtype);
  return LT_OK;
}

lt_status lt_item_int64(const lt_tensor *t, int64_t *out) {
  unsigned char bytes[8];
  LT_TRY(read_single("item", t, bytes));
  *out = lt_load_int64(bytes, t->dtype);
  return LT_OK;
}
