/* Tensor headers: empty tensors, references and geometry. Core sits below
 * every other part of the engine: tensors filled by ops (lt_full,
 * lt_from_buffer) are made in ops/creation.c, and a tensor's autograd
 * metadata frees itself through the function it carries. */
#include <stdlib.h>
#include <string.h>

#include "lt/alloc.h"
#include "lt/tensor.h"

/* A header with no storage yet: the caller fills geometry and storage. */
static lt_tensor *header_new(lt_dtype dt) {
  lt_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->refcount = 1;
  t->dtype = dt;
  return t;
}

/* lt_check_shape; with_strides false for a shape that needs no strides of
 * its own (a broadcast, which may be an in-place write's or a view's). */
static lt_status count_elements(const char *op, const int64_t *shape, int ndim, bool with_strides,
                                int64_t *numel) {
  /* span: the largest stride, the product of the sizes after the first
   * with 0 counted as 1 (PyTorch's empty_tensor_restride) */
  int64_t n = 1, span = 1;
  bool wrapped = false, stride_wrapped = false, any_zero = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return lt_error(LT_ERR_SHAPE, "%s: negative size %lld in dimension %lld", op,
                      (long long)shape[i], LT_USER_INDEX(i));
    any_zero = any_zero || shape[i] == 0;
    wrapped = wrapped || __builtin_mul_overflow(n, shape[i], &n);
    if (i > 0)
      stride_wrapped = stride_wrapped || __builtin_mul_overflow(span, shape[i] ? shape[i] : 1, &span);
  }
  char buf[160];
  if (any_zero) n = 0; /* a 0 anywhere leaves no element, whatever the other sizes */
  else if (wrapped)
    return lt_error(LT_ERR_SHAPE,
                    "%s: shape %s has too many elements (numel: integer multiplication overflow)",
                    op, lt_format_shape(buf, sizeof buf, shape, ndim));
  if (n > LT_MAX_NUMEL)
    return lt_error(LT_ERR_SHAPE,
                    "%s: shape %s has too many elements (%lld; lt's limit is %lld)",
                    op, lt_format_shape(buf, sizeof buf, shape, ndim),
                    (long long)n, (long long)LT_MAX_NUMEL);
  if (with_strides && (stride_wrapped || span > LT_MAX_NUMEL)) /* kernels step in bytes */
    return lt_error(LT_ERR_SHAPE,
                    "%s: shape %s is too large for its strides (Stride calculation overflowed)",
                    op, lt_format_shape(buf, sizeof buf, shape, ndim));
  *numel = n;
  return LT_OK;
}

lt_status lt_check_shape(const char *op, const int64_t *shape, int ndim, lt_dtype dt,
                         int64_t *numel) {
  if (ndim < 0 || ndim > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "%s: %d dimensions requested, lt supports at most %d", op, ndim,
                    LT_MAX_DIMS);
  if ((unsigned)dt >= LT_NDTYPES) return lt_error(LT_ERR_DTYPE, "%s: unknown dtype %d", op, (int)dt);
  return count_elements(op, shape, ndim, true, numel);
}

/* Cannot overflow: lt_check_shape bounded the products of the sizes. */
static void set_contiguous_strides(lt_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    t->stride[i] = s;
    if (i > 0) s *= t->shape[i] > 0 ? t->shape[i] : 1;
  }
}

lt_status lt_empty_named(const char *op, const int64_t *shape, int ndim, lt_dtype dt,
                         lt_device dev, lt_tensor **out) {
  int64_t numel = 0;
  LT_TRY(lt_check_shape(op, shape, ndim, dt, &numel));
  lt_tensor *t = header_new(dt);
  if (!t) return lt_error(LT_ERR_OOM, "%s: out of host memory for a tensor header", op);
  lt_status st = lt_storage_new(dev, (size_t)numel * lt_dtype_size(dt), LT_CAT_OTHER, &t->storage);
  if (st != LT_OK) {
    free(t);
    return st;
  }
  t->ndim = ndim;
  if (ndim > 0) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  set_contiguous_strides(t);
  *out = t;
  return LT_OK;
}

lt_status lt_empty(const int64_t *shape, int ndim, lt_dtype dt, lt_device dev, lt_tensor **out) {
  return lt_empty_named("empty", shape, ndim, dt, dev, out);
}

lt_status lt_empty_like(const lt_tensor *t, lt_tensor **out) {
  return lt_empty(t->shape, t->ndim, t->dtype, t->storage->device, out);
}

void lt_tensor_retain(lt_tensor *t) { t->refcount++; }

size_t lt_tensor_release(lt_tensor *t) {
  if (!t || --t->refcount > 0) return 0;
  size_t given_back = lt_storage_release(t->storage);
  if (t->grad) given_back += lt_tensor_release(t->grad);
  if (t->autograd) /* and the graph behind t, freed by autograd */
    given_back += ((const lt_autograd_meta_header *)(const void *)t->autograd)->free(t->autograd);
  free(t);
  return given_back;
}

int64_t lt_numel(const lt_tensor *t) {
  /* A view with no element may have sizes whose product passes INT64_MAX
   * (PyTorch allows zeros(0):view(0, 2^62, 2^62)): look for the 0 first. */
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

bool lt_is_contiguous(const lt_tensor *t) {
  if (lt_numel(t) == 0) return true; /* before any product of sizes (see lt_numel) */
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != expected) return false;
    expected *= t->shape[i];
  }
  return true;
}

size_t lt_nbytes(const lt_tensor *t) { return (size_t)lt_numel(t) * lt_dtype_size(t->dtype); }

void *lt_data(const lt_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)lt_dtype_size(t->dtype);
}

lt_status lt_wrap_dim(const char *op, int64_t dim, int ndim, int *out) {
  int64_t n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts dim 0 / -1, as PyTorch */
  if (dim < -n || dim >= n)
    return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range (expected %lld to %lld, or -%lld to -1)",
                    op, dim >= 0 ? LT_USER_INDEX(dim) : (long long)dim, 1LL, (long long)n,
                    (long long)n);
  *out = (int)(dim < 0 ? dim + n : dim);
  return LT_OK;
}

lt_status lt_broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b, int nb,
                              int64_t *out, int *nout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char ba[128], bb[128];
      return lt_error(LT_ERR_SHAPE,
                      "%s: shapes %s and %s cannot be broadcast (size %lld vs %lld in dimension %d)",
                      op, lt_format_shape(ba, sizeof ba, a, na),
                      lt_format_shape(bb, sizeof bb, b, nb), (long long)sa,
                      (long long)sb, i + 1);
    }
    out[i] = sa == 1 ? sb : sa;
  }
  /* [2^32, 1] with [1, 2^32]: each fits, their result would not. */
  int64_t numel;
  LT_TRY(count_elements(op, out, n, false, &numel));
  *nout = n;
  return LT_OK;
}
