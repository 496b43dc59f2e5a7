/* Views: new geometry over the same storage, never a copy (except reshape and
 * contiguous, which copy only when the strides cannot express the result). */
#include <stdlib.h>
#include <string.h>

#include "autograd/record.h"
#include "lt/autograd.h"
#include "lt/ops.h"
#include "lt/tensor.h"

#define SHAPE_BUF 160

static lt_status contiguous_geometry(const lt_tensor *t, lt_tensor **out);

/* A header sharing t's storage, with t's geometry to be edited by the caller. */
static lt_status share(const lt_tensor *t, lt_tensor **out) {
  lt_tensor *v = malloc(sizeof *v);
  if (!v) return lt_error(LT_ERR_OOM, "out of host memory for a tensor header");
  *v = *t;
  v->refcount = 1;
  v->requires_grad = false;
  v->grad = NULL;
  v->autograd = NULL;
  v->is_view = true;
  lt_storage_retain(v->storage);
  *out = v;
  return LT_OK;
}

/* detach: shares the storage but is no view for autograd (nothing flows
 * back through it, so in-place writes to it need no check). */
lt_status lt_alias(const lt_tensor *t, lt_tensor **out) {
  LT_TRY(share(t, out));
  (*out)->is_view = false;
  return LT_OK;
}

/* Resolves a single -1 in shape against numel; checks the product matches. */
static lt_status infer_shape(const char *op, const lt_tensor *t, const int64_t *shape, int ndim,
                             int64_t *resolved) {
  if (ndim > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "%s: %d dimensions requested, lt supports at most %d", op, ndim,
                    LT_MAX_DIMS);
  int64_t numel = lt_numel(t), known = 1;
  int infer = -1;
  bool zero = false, too_big = false; /* a size 0; a product past INT64_MAX */
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0) return lt_error(LT_ERR_SHAPE, "%s: only one dimension can be inferred (-1)", op);
      infer = i;
    } else if (shape[i] < 0) {
      return lt_error(LT_ERR_SHAPE, "%s: invalid size %lld in dimension %lld", op,
                      (long long)shape[i], LT_USER_INDEX(i));
    } else {
      zero = zero || shape[i] == 0;
      too_big = too_big || __builtin_mul_overflow(known, shape[i], &known);
    }
    resolved[i] = shape[i];
  }
  if (zero) known = 0;
  char buf[SHAPE_BUF];
  if (too_big && !zero)
    return lt_error(LT_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", op,
                    lt_format_shape(buf, sizeof buf, shape, ndim), (long long)numel);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return lt_error(LT_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", op,
                      lt_format_shape(buf, sizeof buf, shape, ndim), (long long)numel);
    resolved[infer] = numel / known;
  } else if (known != numel) {
    return lt_error(LT_ERR_SHAPE, "%s: shape %s is invalid for input of size %lld", op,
                    lt_format_shape(buf, sizeof buf, shape, ndim), (long long)numel);
  }
  return LT_OK;
}

/* Strides for viewing t as shape without copying, or false when impossible.
 * Walks t's dims in chunks that are contiguous among themselves and matches
 * them to groups of new dims with the same element count (PyTorch's
 * computeStride). */
static bool view_strides(const lt_tensor *t, const int64_t *shape, int ndim, int64_t *stride) {
  if (lt_numel(t) == 0 || t->ndim == 0) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      stride[i] = s;
      /* No element is ever addressed: a stride that would overflow stays. */
      int64_t next;
      if (!__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &next)) s = next;
    }
    return true;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->stride[t->ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    /* end of a contiguous chunk of t's dims */
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = t->stride[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

static lt_status view_geometry(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  int64_t resolved[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  LT_TRY(infer_shape("view", t, shape, ndim, resolved));
  if (!view_strides(t, resolved, ndim, stride)) {
    char buf[SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE,
                    "view: size %s is not compatible with the input's strides (at least one "
                    "dimension spans two contiguous subspaces); use reshape instead",
                    lt_format_shape(buf, sizeof buf, resolved, ndim));
  }
  LT_TRY(share(t, out));
  (*out)->ndim = ndim;
  memcpy((*out)->shape, resolved, (size_t)ndim * sizeof(int64_t));
  memcpy((*out)->stride, stride, (size_t)ndim * sizeof(int64_t));
  return LT_OK;
}

static lt_status reshape_geometry(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  int64_t resolved[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  LT_TRY(infer_shape("reshape", t, shape, ndim, resolved));
  if (view_strides(t, resolved, ndim, stride)) return view_geometry(t, resolved, ndim, out);
  lt_tensor *c;
  LT_TRY(contiguous_geometry(t, &c));
  lt_status st = view_geometry(c, resolved, ndim, out);
  lt_tensor_release(c);
  if (st == LT_OK) (*out)->is_view = false; /* over a copy nobody else holds */
  return st;
}

static lt_status check_dim(const char *op, int d, int ndim) {
  if (d < 0 || d >= ndim)
    return lt_error(LT_ERR_INDEX, "%s: dimension %lld out of range for a tensor of %d dimension%s",
                    op, LT_USER_INDEX(d), ndim, ndim == 1 ? "" : "s");
  return LT_OK;
}

static lt_status transpose_geometry(const lt_tensor *t, int d0, int d1, lt_tensor **out) {
  if (t->ndim == 0 && (d0 == 0 || d0 == -1) && (d1 == 0 || d1 == -1)) return share(t, out);
  LT_TRY(check_dim("transpose", d0, t->ndim));
  LT_TRY(check_dim("transpose", d1, t->ndim));
  LT_TRY(share(t, out));
  lt_tensor *v = *out;
  int64_t s = v->shape[d0], st = v->stride[d0];
  v->shape[d0] = v->shape[d1];
  v->stride[d0] = v->stride[d1];
  v->shape[d1] = s;
  v->stride[d1] = st;
  return LT_OK;
}

static lt_status permute_geometry(const lt_tensor *t, const int *dims, int ndim, lt_tensor **out) {
  if (ndim != t->ndim)
    return lt_error(LT_ERR_SHAPE, "permute: %d dimensions given for a tensor of %d", ndim, t->ndim);
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < ndim; i++) {
    LT_TRY(check_dim("permute", dims[i], ndim));
    if (seen[dims[i]])
      return lt_error(LT_ERR_ARG, "permute: dimension %lld repeats", LT_USER_INDEX(dims[i]));
    seen[dims[i]] = true;
  }
  LT_TRY(share(t, out));
  for (int i = 0; i < ndim; i++) {
    (*out)->shape[i] = t->shape[dims[i]];
    (*out)->stride[i] = t->stride[dims[i]];
  }
  return LT_OK;
}

/* offset + steps * stride. Past INT64_MAX only in a view with no element
 * (sizes and strides of any product): its offset addresses nothing, so it
 * stays. */
static int64_t moved_offset(int64_t offset, int64_t steps, int64_t stride) {
  int64_t step, moved;
  if (__builtin_mul_overflow(steps, stride, &step) || __builtin_add_overflow(offset, step, &moved))
    return offset;
  return moved;
}

static lt_status narrow_geometry(const lt_tensor *t, int dim, int64_t start, int64_t length, lt_tensor **out) {
  LT_TRY(check_dim("narrow", dim, t->ndim));
  int64_t size = t->shape[dim];
  if (start < 0) start += size;
  /* length > size - start, not start + length > size: the sum can pass INT64_MAX */
  if (start < 0 || start > size || length < 0 || length > size - start)
    return lt_error(LT_ERR_INDEX,
                    "narrow: start %lld and length %lld do not fit size %lld of dimension %lld",
                    LT_USER_INDEX(start), (long long)length, (long long)size, LT_USER_INDEX(dim));
  LT_TRY(share(t, out));
  (*out)->offset = moved_offset(t->offset, start, t->stride[dim]);
  (*out)->shape[dim] = length;
  return LT_OK;
}

static lt_status select_geometry(const lt_tensor *t, int dim, int64_t index, lt_tensor **out) {
  if (t->ndim == 0)
    return lt_error(LT_ERR_INDEX, "select: cannot index a 0-dim tensor (it holds one number: use item)");
  LT_TRY(check_dim("select", dim, t->ndim));
  int64_t size = t->shape[dim];
  if (index < -size || index >= size)
    return lt_error(LT_ERR_INDEX, "index %lld is out of bounds for dimension %lld with size %lld",
                    index >= 0 ? LT_USER_INDEX(index) : (long long)index, LT_USER_INDEX(dim),
                    (long long)size);
  if (index < 0) index += size;
  LT_TRY(share(t, out));
  lt_tensor *v = *out;
  v->offset = moved_offset(t->offset, index, t->stride[dim]);
  for (int i = dim; i < t->ndim - 1; i++) {
    v->shape[i] = t->shape[i + 1];
    v->stride[i] = t->stride[i + 1];
  }
  v->ndim--;
  return LT_OK;
}

static lt_status expand_geometry(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  char bt[SHAPE_BUF], bs[SHAPE_BUF];
  if (ndim < t->ndim || ndim > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "expand: the shape %s has fewer dimensions than the tensor's %s",
                    lt_format_shape(bs, sizeof bs, shape, ndim < 0 ? 0 : ndim),
                    lt_format_shape(bt, sizeof bt, t->shape, t->ndim));
  int64_t nshape[LT_MAX_DIMS], nstride[LT_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int j = i - lead; /* t's dim, or <0 for a new leading dim */
    int64_t want = shape[i];
    if (j < 0) {
      if (want < 0)
        return lt_error(LT_ERR_SHAPE, "expand: -1 is not allowed in a new leading dimension (%lld)",
                        LT_USER_INDEX(i));
      nshape[i] = want;
      nstride[i] = 0;
    } else if (want == -1 || want == t->shape[j]) {
      nshape[i] = t->shape[j];
      nstride[i] = t->stride[j];
    } else if (t->shape[j] == 1 && want >= 0) {
      nshape[i] = want;
      nstride[i] = 0;
    } else {
      return lt_error(LT_ERR_SHAPE,
                      "expand: the size of the tensor %s must match the requested %s in dimension "
                      "%lld (or be 1)",
                      lt_format_shape(bt, sizeof bt, t->shape, t->ndim),
                      lt_format_shape(bs, sizeof bs, shape, ndim), LT_USER_INDEX(i));
    }
  }
  /* Stride 0 costs no memory, but numel and every loop over the elements
   * must stay countable: [2^32, 2^32] would wrap to 0 elements. */
  int64_t numel = 1;
  bool wrapped = false, any_zero = false;
  for (int i = 0; i < ndim; i++) {
    any_zero = any_zero || nshape[i] == 0;
    wrapped = wrapped || __builtin_mul_overflow(numel, nshape[i], &numel);
  }
  if (!any_zero && (wrapped || numel > LT_MAX_NUMEL))
    return lt_error(LT_ERR_SHAPE, "expand: the shape %s has too many elements (%s)",
                    lt_format_shape(bs, sizeof bs, nshape, ndim),
                    wrapped ? "numel: integer multiplication overflow" : "more than lt's limit");
  LT_TRY(share(t, out));
  (*out)->ndim = ndim;
  memcpy((*out)->shape, nshape, (size_t)ndim * sizeof(int64_t));
  memcpy((*out)->stride, nstride, (size_t)ndim * sizeof(int64_t));
  return LT_OK;
}

static lt_status squeeze_geometry(const lt_tensor *t, int dim, lt_tensor **out) {
  if (t->ndim == 0) return share(t, out);
  LT_TRY(check_dim("squeeze", dim, t->ndim));
  if (t->shape[dim] != 1) return share(t, out); /* as PyTorch: a no-op */
  return select_geometry(t, dim, 0, out);
}

static lt_status squeeze_all_geometry(const lt_tensor *t, lt_tensor **out) {
  LT_TRY(share(t, out));
  lt_tensor *v = *out;
  int n = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 1) continue;
    v->shape[n] = t->shape[i];
    v->stride[n] = t->stride[i];
    n++;
  }
  v->ndim = n;
  return LT_OK;
}

static lt_status unsqueeze_geometry(const lt_tensor *t, int dim, lt_tensor **out) {
  if (dim < 0 || dim > t->ndim)
    return lt_error(LT_ERR_INDEX, "unsqueeze: dimension %lld out of range (expected 1 to %d)",
                    LT_USER_INDEX(dim), t->ndim + 1);
  if (t->ndim >= LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "unsqueeze: lt supports at most %d dimensions", LT_MAX_DIMS);
  LT_TRY(share(t, out));
  lt_tensor *v = *out;
  for (int i = t->ndim; i > dim; i--) {
    v->shape[i] = t->shape[i - 1];
    v->stride[i] = t->stride[i - 1];
  }
  v->shape[dim] = 1;
  /* A size-1 dim's stride addresses nothing; a tensor with no element may
   * have sizes and strides whose product passes INT64_MAX: then 1. */
  int64_t stride = 1;
  if (dim < t->ndim && __builtin_mul_overflow(t->shape[dim], t->stride[dim], &stride)) stride = 1;
  v->stride[dim] = stride;
  v->ndim++;
  return LT_OK;
}

static lt_status flatten_geometry(const lt_tensor *t, int start, int end, lt_tensor **out) {
  if (t->ndim == 0) {
    int64_t one = 1;
    return reshape_geometry(t, &one, 1, out);
  }
  LT_TRY(check_dim("flatten", start, t->ndim));
  LT_TRY(check_dim("flatten", end, t->ndim));
  if (start > end)
    return lt_error(LT_ERR_ARG, "flatten: start dimension %lld comes after end dimension %lld",
                    LT_USER_INDEX(start), LT_USER_INDEX(end));
  int64_t shape[LT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < start; i++) shape[n++] = t->shape[i];
  int64_t merged = 1;
  bool wrapped = false, any_zero = false;
  for (int i = start; i <= end; i++) {
    any_zero = any_zero || t->shape[i] == 0;
    wrapped = wrapped || __builtin_mul_overflow(merged, t->shape[i], &merged);
  }
  if (any_zero) merged = 0;
  else if (wrapped) { /* only where another dim is 0: else numel bounds the product */
    char buf[SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE,
                    "flatten: dimensions %lld to %lld of %s hold too many elements for one "
                    "dimension (numel: integer multiplication overflow)",
                    LT_USER_INDEX(start), LT_USER_INDEX(end),
                    lt_format_shape(buf, sizeof buf, t->shape, t->ndim));
  }
  shape[n++] = merged;
  for (int i = end + 1; i < t->ndim; i++) shape[n++] = t->shape[i];
  return reshape_geometry(t, shape, n, out);
}

static lt_status contiguous_geometry(const lt_tensor *t, lt_tensor **out) {
  if (lt_is_contiguous(t)) {
    lt_tensor_retain((lt_tensor *)t);
    *out = (lt_tensor *)t;
    return LT_OK;
  }
  lt_tensor *c;
  LT_TRY(lt_empty_like(t, &c));
  lt_status st = lt_copy_(c, t);
  if (st != LT_OK) {
    lt_tensor_release(c);
    return st;
  }
  c->storage->version = 0;
  *out = c;
  return LT_OK;
}

/* The last line of defence of every view: the elements it can address lie
 * in its storage. The geometry functions check their arguments; this catches
 * any sum or product they got wrong, before a kernel writes past the bytes. */
static lt_status in_storage(const char *op, lt_status st, lt_tensor **out) {
  if (st != LT_OK) return st;
  const lt_tensor *v = *out;
  if (lt_numel(v) == 0) return LT_OK;
  const int64_t elements = (int64_t)(v->storage->nbytes / lt_dtype_size(v->dtype));
  int64_t lo = v->offset, hi = v->offset;
  bool wrapped = false;
  for (int i = 0; i < v->ndim; i++) {
    int64_t reach;
    wrapped = wrapped || __builtin_mul_overflow(v->shape[i] - 1, v->stride[i], &reach);
    wrapped = wrapped || __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi);
  }
  if (!wrapped && lo >= 0 && hi < elements) return LT_OK;
  char bs[SHAPE_BUF], bt[SHAPE_BUF];
  st = lt_error(LT_ERR_INDEX,
                "%s: the view of shape %s (strides %s, offset %lld) reaches outside its storage "
                "of %lld elements",
                op, lt_format_shape(bs, sizeof bs, v->shape, v->ndim),
                lt_format_shape(bt, sizeof bt, v->stride, v->ndim), (long long)v->offset,
                (long long)elements);
  lt_tensor_release(*out);
  *out = NULL;
  return st;
}

/* ---- the public view functions: geometry, then one autograd node ----
 * The geometry runs with recording off, so that a view built from other
 * views (flatten from reshape from view) and reshape's copy leave no nodes
 * of their own; the result then gets the one node that undoes the view. */

static lt_status recorded(lt_status st, const char *name, ag_view_kind kind, const lt_tensor *t,
                          lt_tensor **out, const int64_t *args, int nargs) {
  if (st != LT_OK) return st;
  st = ag_record_view(name, kind, t, *out, args, nargs);
  if (st != LT_OK) {
    lt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}

#define GEOMETRY(op, call)                       \
  do {                                           \
    bool grad_mode_ = lt_set_grad_enabled(false); \
    st = in_storage(op, (call), out);            \
    lt_set_grad_enabled(grad_mode_);             \
  } while (0)

lt_status lt_view(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("view", view_geometry(t, shape, ndim, out));
  return recorded(st, "ViewBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_reshape(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("reshape", reshape_geometry(t, shape, ndim, out));
  return recorded(st, "ViewBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_transpose(const lt_tensor *t, int d0, int d1, lt_tensor **out) {
  lt_status st;
  GEOMETRY("transpose", transpose_geometry(t, d0, d1, out));
  const int64_t args[2] = {d0, d1};
  return recorded(st, "TransposeBackward", AG_VIEW_TRANSPOSE, t, out, args, 2);
}

lt_status lt_permute(const lt_tensor *t, const int *dims, int ndim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("permute", permute_geometry(t, dims, ndim, out));
  int64_t args[LT_MAX_DIMS];
  for (int d = 0; d < ndim && d < LT_MAX_DIMS; d++) args[d] = dims[d];
  return recorded(st, "PermuteBackward", AG_VIEW_PERMUTE, t, out, args, ndim);
}

lt_status lt_narrow(const lt_tensor *t, int dim, int64_t start, int64_t length, lt_tensor **out) {
  lt_status st;
  GEOMETRY("narrow", narrow_geometry(t, dim, start, length, out));
  if (st != LT_OK) return st;
  const int64_t args[3] = {dim, start < 0 ? start + t->shape[dim] : start, length};
  return recorded(st, "NarrowBackward", AG_VIEW_NARROW, t, out, args, 3);
}

lt_status lt_select(const lt_tensor *t, int dim, int64_t index, lt_tensor **out) {
  lt_status st;
  GEOMETRY("select", select_geometry(t, dim, index, out));
  if (st != LT_OK) return st;
  const int64_t args[2] = {dim, index < 0 ? index + t->shape[dim] : index};
  return recorded(st, "SelectBackward", AG_VIEW_SELECT, t, out, args, 2);
}

lt_status lt_expand(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("expand", expand_geometry(t, shape, ndim, out));
  return recorded(st, "ExpandBackward", AG_VIEW_EXPAND, t, out, NULL, 0);
}

lt_status lt_squeeze(const lt_tensor *t, int dim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("squeeze", squeeze_geometry(t, dim, out));
  return recorded(st, "SqueezeBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_squeeze_all(const lt_tensor *t, lt_tensor **out) {
  lt_status st;
  GEOMETRY("squeeze", squeeze_all_geometry(t, out));
  return recorded(st, "SqueezeBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_unsqueeze(const lt_tensor *t, int dim, lt_tensor **out) {
  lt_status st;
  GEOMETRY("unsqueeze", unsqueeze_geometry(t, dim, out));
  return recorded(st, "UnsqueezeBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_flatten(const lt_tensor *t, int start, int end, lt_tensor **out) {
  lt_status st;
  GEOMETRY("flatten", flatten_geometry(t, start, end, out));
  return recorded(st, "ViewBackward", AG_VIEW_RESHAPE, t, out, NULL, 0);
}

lt_status lt_contiguous(const lt_tensor *t, lt_tensor **out) {
  lt_status st;
  GEOMETRY("contiguous", contiguous_geometry(t, out));
  if (st != LT_OK) return st;
  st = ag_record_identity("CloneBackward", t, *out); /* nothing when *out is t */
  if (st != LT_OK) {
    lt_tensor_release(*out);
    *out = NULL;
  }
  return st;
}
