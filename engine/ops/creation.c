/* Tensors made with their contents: filled with a value or converted from a
 * host buffer. Above core (engine/core/tensor.c makes empty ones) since the
 * filling is an op and the copy to a device goes through the ops. */
#include <string.h>

#include "lt/alloc.h"
#include "lt/ops.h"
#include "lt/tensor.h"

lt_status lt_zeros(const int64_t *shape, int ndim, lt_dtype dt, lt_device dev, lt_tensor **out) {
  return lt_full(shape, ndim, 0.0, dt, dev, out);
}

lt_status lt_full(const int64_t *shape, int ndim, double value, lt_dtype dt, lt_device dev,
                  lt_tensor **out) {
  return lt_full_named("full", shape, ndim, value, dt, dev, out);
}

lt_status lt_full_named(const char *op, const int64_t *shape, int ndim, double value, lt_dtype dt,
                        lt_device dev, lt_tensor **out) {
  lt_tensor *t;
  LT_TRY(lt_empty_named(op, shape, ndim, dt, dev, &t));
  lt_status st = lt_fill_(t, value);
  if (st != LT_OK) {
    lt_tensor_release(t);
    return st;
  }
  t->storage->version = 0; /* a fresh tensor: its filling is not a user's write */
  *out = t;
  return LT_OK;
}

/* n elements of src_dt at src into dst as dt. */
static void convert_into(char *dst, lt_dtype dt, const char *src, lt_dtype src_dt, int64_t n) {
  size_t src_size = lt_dtype_size(src_dt), dst_size = lt_dtype_size(dt);
  if (src_dt == dt) {
    if (n > 0) memcpy(dst, src, (size_t)n * src_size);
  } else if (!lt_dtype_is_floating(src_dt) && !lt_dtype_is_floating(dt)) {
    for (int64_t i = 0; i < n; i++) /* integers stay exact above 2^53 */
      lt_store_int64(dst + i * dst_size, dt, lt_load_int64(src + i * src_size, src_dt));
  } else {
    for (int64_t i = 0; i < n; i++)
      lt_store_double(dst + i * dst_size, dt, lt_load_double(src + i * src_size, src_dt));
  }
}

lt_status lt_from_buffer(const void *data, lt_dtype src_dt, const int64_t *shape, int ndim,
                         lt_dtype dt, lt_device dev, lt_tensor **out) {
  lt_tensor *t;
  LT_TRY(lt_empty(shape, ndim, dt, lt_cpu(), &t));
  /* While estimating a tensor is a shape without data. */
  if (!lt_estimating()) convert_into(lt_data(t), dt, data, src_dt, lt_numel(t));
  if (dev.type == LT_DEVICE_CPU) {
    *out = t;
    return LT_OK;
  }
  lt_status st = lt_to_device(t, dev, out);
  lt_tensor_release(t);
  return st;
}

