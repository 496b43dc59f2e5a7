/* gather, scatter and scatter_add along a dim: PyTorch's shape rules, the
 * index values checked (on the host, unless their range is already known:
 * core/known_range.h) before anything is allocated or written, then the
 * backend's walk over the index (core/backend.h). */
#include "autograd/record_sort.h"
#include "core/known_range.h"
#include "lt/sort.h"
#include "ops/ops_internal.h"


/* The shape rules of gather (src NULL) and scatter: index int64 with self's
 * number of dims, no larger than self in the dims other than dim and no
 * larger than src in any dim; src of self's dtype; one device. */
static lt_status check_shapes(const char *op, const lt_tensor *t, int dim, const lt_tensor *index,
                              const lt_tensor *src) {
  LT_TRY(ops_check_live(op, t));
  LT_TRY(ops_check_live(op, index));
  if (src) LT_TRY(ops_check_live(op, src));
  const int ndim = t->ndim > 0 ? t->ndim : 1;
  if (dim < 0 || dim >= ndim)
    return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range for a %d-dimensional tensor",
                    op, LT_USER_INDEX(dim), t->ndim);
  if (index->dtype != LT_INT64)
    return lt_error(LT_ERR_DTYPE, "%s: expected an int64 index tensor, got %s", op,
                    lt_dtype_name(index->dtype));
  if (index->ndim != t->ndim)
    return lt_error(LT_ERR_SHAPE, "%s: index has %d dimensions, self has %d (they must match)",
                    op, index->ndim, t->ndim);
  if (src && src->ndim != t->ndim)
    return lt_error(LT_ERR_SHAPE, "%s: src has %d dimensions, self has %d (they must match)", op,
                    src->ndim, t->ndim);
  for (int d = 0; d < t->ndim; d++) {
    if (d != dim && index->shape[d] > t->shape[d])
      return lt_error(LT_ERR_SHAPE, "%s: index is %lld in dimension %lld, larger than self's %lld",
                      op, (long long)index->shape[d], LT_USER_INDEX(d), (long long)t->shape[d]);
    if (src && index->shape[d] > src->shape[d])
      return lt_error(LT_ERR_SHAPE, "%s: index is %lld in dimension %lld, larger than src's %lld",
                      op, (long long)index->shape[d], LT_USER_INDEX(d), (long long)src->shape[d]);
  }
  LT_TRY(ops_check_same_device(op, t, index));
  if (src) {
    LT_TRY(ops_check_same_device(op, t, src));
    if (src->dtype != t->dtype)
      return lt_error(LT_ERR_DTYPE, "%s: src has dtype %s and self %s (they must match)", op,
                      lt_dtype_name(src->dtype), lt_dtype_name(t->dtype));
  }
  return LT_OK;
}

/* "[2, 3]": the 1-based position of element k (row-major) of shape. */
static char *position_str(char *buf, int64_t k, const int64_t *shape, int ndim) {
  int64_t pos[LT_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    pos[d] = k % shape[d] + 1;
    k /= shape[d];
  }
  return ops_shape_str(buf, pos, ndim);
}

/* Every value of index lies in [base, base + size): read on the host unless
 * the storage's known range says so; a range read here is noted, so that
 * the same index in the backward reads nothing. */
static lt_status check_values(const char *op, const lt_tensor *index, int dim, int64_t size,
                              int64_t base) {
  const int64_t n = lt_numel(index);
  if (n == 0 || (size > 0 && lt_known_range_within(index, base, base + (size - 1)))) return LT_OK;
  lt_tensor *host = NULL;
  if (index->storage->device.type == LT_DEVICE_CPU) {
    LT_TRY(lt_contiguous(index, &host));
  } else {
    lt_tensor *moved = NULL;
    LT_TRY(lt_to_device(index, lt_cpu(), &moved));
    lt_status st = lt_contiguous(moved, &host);
    lt_tensor_release(moved);
    LT_TRY(st);
  }
  if (lt_estimating()) { /* the copy was made as in a real run; there is nothing to read */
    lt_tensor_release(host);
    return LT_OK;
  }
  const int64_t *v = lt_data(host);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  lt_status st = LT_OK;
  for (int64_t k = 0; k < n; k++) {
    /* Compared before subtracting, so that no value can overflow. */
    if (v[k] < base || v[k] - base >= size) {
      char buf[OPS_SHAPE_BUF];
      st = lt_error(LT_ERR_INDEX, "%s: index value %lld at position %s is out of range for "
                    "dimension %lld of size %lld (expected %lld to %lld)", op, (long long)v[k],
                    position_str(buf, k, index->shape, index->ndim), LT_USER_INDEX(dim),
                    (long long)size, (long long)base, (long long)(base + size - 1));
      break;
    }
    if (v[k] < lo) lo = v[k];
    if (v[k] > hi) hi = v[k];
  }
  lt_tensor_release(host);
  if (st == LT_OK) lt_known_range_note(index, lo, hi);
  return st;
}

/* ---- gather ---- */

static lt_status gather(const lt_tensor *t, int dim, const lt_tensor *index, int64_t base,
                        lt_tensor **out) {
  const char *op = "gather";
  LT_TRY(check_shapes(op, t, dim, index, NULL));
  const lt_device dev = t->storage->device;
  const lt_backend *be;
  LT_TRY(ops_backend(op, dev, &be));
  LT_TRY(check_values(op, index, dim, t->ndim > 0 ? t->shape[dim] : 1, base));
  lt_tensor *r = NULL;
  LT_TRY(lt_empty_named(op, index->shape, index->ndim, t->dtype, dev, &r));
  const lt_tensor r1 = ops_view_as_1d(r), t1 = ops_view_as_1d(t), i1 = ops_view_as_1d(index);
  lt_status st = be->gather((lt_tensor *)&r1, &t1, dim, &i1, base);
  if (st == LT_OK) lt_known_range_inherit(r, t);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_gather(const lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                    lt_tensor **out) {
  *out = NULL;
  LT_TRY(gather(t, dim, index, index_base, out));
  lt_status st = ag_record_gather(t, dim, index, index_base, *out);
  if (st != LT_OK) lt_tensor_release(*out), *out = NULL;
  return st;
}

/* ---- scatter, scatter_add ---- */

/* Checks everything a scatter into t needs, in PyTorch's order of concerns;
 * nothing is allocated or written before it passes. */
static lt_status check_scatter(const char *op, const lt_tensor *t, int dim, const lt_tensor *index,
                               int64_t base, const lt_tensor *src, double value, bool add) {
  LT_TRY(check_shapes(op, t, dim, index, src));
  if (add && !src) return lt_error(LT_ERR_ARG, "%s: expected a src tensor, got a number", op);
  if (!src) LT_TRY(ops_check_fill_value(op, value, t->dtype));
  return check_values(op, index, dim, t->ndim > 0 ? t->shape[dim] : 1, base);
}

static lt_status run_scatter(const lt_backend *be, bool add, lt_tensor *out, int dim,
                             const lt_tensor *index, int64_t base, const lt_tensor *src,
                             double value) {
  const lt_tensor o1 = ops_view_as_1d(out), i1 = ops_view_as_1d(index);
  lt_tensor s1;
  if (src) s1 = ops_view_as_1d(src);
  return be->scatter(add, (lt_tensor *)&o1, dim, &i1, base, src ? &s1 : NULL, ops_scalar(value));
}

lt_status lt_scatter(const lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                     const lt_tensor *src, double value, bool add, lt_tensor **out) {
  *out = NULL;
  const char *op = add ? "scatter_add" : "scatter";
  LT_TRY(check_scatter(op, t, dim, index, index_base, src, value, add));
  const lt_device dev = t->storage->device;
  const lt_backend *be;
  LT_TRY(ops_backend(op, dev, &be));
  lt_tensor *r = NULL;
  LT_TRY(lt_empty_named(op, t->shape, t->ndim, t->dtype, dev, &r));
  lt_status st = be->copy(r, t);
  if (st == LT_OK) st = run_scatter(be, add, r, dim, index, index_base, src, value);
  if (st == LT_OK) st = ag_record_scatter(add, t, dim, index, index_base, src, r);
  if (st != LT_OK) {
    lt_tensor_release(r);
    return st;
  }
  *out = r;
  return LT_OK;
}

lt_status lt_scatter_(lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                      const lt_tensor *src, double value, bool add) {
  const char *op = add ? "scatter_add_" : "scatter_";
  LT_TRY(check_scatter(op, t, dim, index, index_base, src, value, add));
  LT_TRY(ops_check_writable(op, t));
  const lt_backend *be;
  LT_TRY(ops_backend(op, t->storage->device, &be));
  /* src or index sharing t's memory, even element for element, is read
   * from a copy taken before the write: the walk writes other positions
   * than it reads (the copy is recorded, so src still gets its gradient). */
  const lt_tensor *use_src = src, *use_index = index;
  lt_tensor *src_copy = NULL, *index_copy = NULL, *no_old = NULL;
  lt_status st = LT_OK;
  if (src && ops_overlap_of(t, src) != OPS_OVERLAP_NONE) {
    st = lt_clone(src, &src_copy);
    use_src = src_copy;
  }
  if (st == LT_OK && ops_overlap_of(t, index) != OPS_OVERLAP_NONE) {
    st = lt_clone(index, &index_copy);
    use_index = index_copy;
  }
  /* The formula needs only the index: no copy of t's old values. */
  if (st == LT_OK) st = ag_inplace_begin(op, t, src, false, &no_old);
  if (st == LT_OK) st = run_scatter(be, add, t, dim, use_index, index_base, use_src, value);
  if (st == LT_OK) {
    ops_bump_version(t, op);
    st = ag_record_scatter(add, t, dim, index, index_base, src, t);
  }
  if (src_copy) lt_tensor_release(src_copy);
  if (index_copy) lt_tensor_release(index_copy);
  return st;
}
