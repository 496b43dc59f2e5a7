/* Storages and tensors. A tensor is a view (shape, strides, offset, dtype) over
 * a refcounted storage that lives on one device. Both are refcounted: every
 * function that returns a tensor through an out-parameter hands the caller one
 * reference, which lt_tensor_release drops.
 *
 * Dimensions and positions are 0-based in the engine; the Lua bindings turn the
 * user's 1-based ones into these. */
#ifndef LT_TENSOR_H
#define LT_TENSOR_H

#include "lt/api.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lt/alloc.h"
#include "lt/device.h"
#include "lt/dtype.h"
#include "lt/error.h"

#define LT_MAX_DIMS 8
/* The most elements a tensor (or a view) may have: their bytes, in any
 * dtype, stay well within int64 and size_t. */
#define LT_MAX_NUMEL (INT64_MAX / 16)

/* Bounds of an int64 storage's elements (core/known_range.h): every element
 * lies in [lo, hi]; every element other than lo lies in [rest_lo[0],
 * rest_hi[0]], and every one other than hi in [rest_lo[1], rest_hi[1]] (an
 * empty rest has rest_lo > rest_hi). The rests let a check skip one special
 * value at either end: ignore_index -100 below the labels, or 255 above. */
typedef struct lt_index_bounds {
  int64_t lo, hi;
  int64_t rest_lo[2], rest_hi[2];
} lt_index_bounds;

typedef struct lt_storage {
  int64_t refcount;
  void *data;
  size_t nbytes; /* bytes asked for */
  lt_device device;
  lt_block *block; /* the allocator's handle */
  uint64_t version; /* bumped by every in-place write (autograd checks it) */
  const char *last_inplace_op; /* the op of the latest write ("relu_"), a static
                                  string, for autograd's messages; NULL if none */
  /* Aliases of this storage that graphs keep for backward (lt_autograd_save),
   * and whether those made it an activation (then the last one's release
   * makes it "other" again). */
  int64_t saved_count;
  bool saved_as_activation;
  bool pinned;        /* host memory from the pinned pool (device stays the CPU) */
  void *pending_copy; /* a device backend's marker (a CUDA event) of an
                         asynchronous copy still reading or writing these
                         bytes; the release waits for it. NULL if none */
  /* Bounds of an int64 storage's elements, noted when the host saw every
   * element or an op knows what it wrote (core/known_range.h), so that
   * range checks of indices need not read them (on a device: no copy to
   * the host). Valid while version is range_version. */
  bool range_known;
  lt_index_bounds range;
  uint64_t range_version;
  /* Made while an estimate ran (lt_alloc_estimate_begin): its bytes are
   * address space only, never to be read or written. */
  bool meta;
} lt_storage;

/* A tensor's autograd metadata (engine/autograd: grad_fn, views; NULL if
 * none). Its struct begins with this header, whose free releases the metadata
 * and the graph behind it: core, below autograd, frees a tensor's history
 * through it without knowing autograd. */
struct lt_autograd_meta;
typedef struct lt_autograd_meta_header {
  size_t (*free)(struct lt_autograd_meta *meta);
} lt_autograd_meta_header;

typedef struct lt_tensor {
  int64_t refcount;
  lt_storage *storage;
  int64_t offset; /* in elements */
  int64_t shape[LT_MAX_DIMS];
  int64_t stride[LT_MAX_DIMS]; /* in elements */
  int ndim;
  lt_dtype dtype;
  bool requires_grad;
  struct lt_tensor *grad;
  struct lt_autograd_meta *autograd;
  bool is_view; /* made by a view op over another tensor's storage (not by
                   lt_alias): autograd refuses in-place writes that it cannot
                   propagate to the base */
} lt_tensor;

/* Storage. dev lt_pinned_pool() (lt/alloc.h) gives a pinned CPU storage. */
LT_API lt_status lt_storage_new(lt_device dev, size_t nbytes, lt_category cat, lt_storage **out);
/* Installed by a device backend: waits for and discards a storage's
 * pending_copy marker (a release must not hand out bytes a copy still uses). */
LT_API void lt_storage_set_pending_wait(void (*wait)(void *marker));
LT_API void lt_storage_retain(lt_storage *s);
/* Marks s as used by work queued on stream (a CUDA stream other than the one
 * it was allocated on), so that its bytes are not reused before that work is
 * done: torch.Tensor.record_stream. */
LT_API lt_status lt_storage_record_stream(lt_storage *s, lt_stream_id stream);
/* Drops a reference; returns the bytes given back to the allocator (0 while
 * other references remain). */
LT_API size_t lt_storage_release(lt_storage *s);

/* Creation (shape of ndim sizes; ndim 0 is a scalar tensor) */
/* The element count of a new contiguous tensor of shape, or an error naming
 * op and the shape: too many dimensions, a negative size, more than
 * LT_MAX_NUMEL elements ("numel: integer multiplication overflow" past
 * int64), or contiguous strides past int64 (a size 0 does not stop the
 * other sizes' strides: "Stride calculation overflowed", as PyTorch). */
LT_API lt_status lt_check_shape(const char *op, const int64_t *shape, int ndim, lt_dtype dt,
                         int64_t *numel);
/* lt_empty and lt_full whose errors name op: the creation the user called
 * ("ones", "randn", "Linear"), not the engine's "empty". */
LT_API lt_status lt_empty_named(const char *op, const int64_t *shape, int ndim, lt_dtype dt,
                         lt_device dev, lt_tensor **out);
LT_API lt_status lt_full_named(const char *op, const int64_t *shape, int ndim, double value, lt_dtype dt,
                        lt_device dev, lt_tensor **out);
LT_API lt_status lt_empty(const int64_t *shape, int ndim, lt_dtype dt, lt_device dev, lt_tensor **out);
LT_API lt_status lt_zeros(const int64_t *shape, int ndim, lt_dtype dt, lt_device dev, lt_tensor **out);
LT_API lt_status lt_full(const int64_t *shape, int ndim, double value, lt_dtype dt, lt_device dev,
                  lt_tensor **out);
/* A new tensor with the same shape, dtype and device as t (contents unset). */
LT_API lt_status lt_empty_like(const lt_tensor *t, lt_tensor **out);
/* A tensor of shape over a copy of count elements of type src_dt at data. */
LT_API lt_status lt_from_buffer(const void *data, lt_dtype src_dt, const int64_t *shape, int ndim,
                         lt_dtype dt, lt_device dev, lt_tensor **out);

LT_API void lt_tensor_retain(lt_tensor *t);
/* Drops a reference; returns the bytes given back to the allocator. */
LT_API size_t lt_tensor_release(lt_tensor *t);

/* Geometry */
LT_API int64_t lt_numel(const lt_tensor *t);
LT_API bool lt_is_contiguous(const lt_tensor *t);
LT_API size_t lt_nbytes(const lt_tensor *t); /* numel * element size */
/* Address of the first element of the view. */
LT_API void *lt_data(const lt_tensor *t);
/* Normalises a possibly negative dim (-1 = last) against ndim; on error names op. */
LT_API lt_status lt_wrap_dim(const char *op, int64_t dim, int ndim, int *out);

/* Views: share the storage; never copy. view fails when the strides cannot
 * express the new shape (as PyTorch: "use reshape"); reshape copies then.
 * A -1 in a shape is inferred. */
LT_API lt_status lt_view(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out);
LT_API lt_status lt_reshape(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out);
LT_API lt_status lt_transpose(const lt_tensor *t, int d0, int d1, lt_tensor **out);
LT_API lt_status lt_permute(const lt_tensor *t, const int *dims, int ndim, lt_tensor **out);
LT_API lt_status lt_narrow(const lt_tensor *t, int dim, int64_t start, int64_t length, lt_tensor **out);
LT_API lt_status lt_select(const lt_tensor *t, int dim, int64_t index, lt_tensor **out);
LT_API lt_status lt_expand(const lt_tensor *t, const int64_t *shape, int ndim, lt_tensor **out);
LT_API lt_status lt_squeeze(const lt_tensor *t, int dim, lt_tensor **out);   /* one dim */
LT_API lt_status lt_squeeze_all(const lt_tensor *t, lt_tensor **out);
LT_API lt_status lt_unsqueeze(const lt_tensor *t, int dim, lt_tensor **out);
LT_API lt_status lt_flatten(const lt_tensor *t, int start, int end, lt_tensor **out);
/* t itself (one more reference) when contiguous, else a contiguous copy. */
LT_API lt_status lt_contiguous(const lt_tensor *t, lt_tensor **out);
/* A new tensor sharing t's storage and geometry (detach's engine half). */
LT_API lt_status lt_alias(const lt_tensor *t, lt_tensor **out);

/* Broadcasting: the broadcast shape of a and b (PyTorch's rules), or an error
 * naming op and both shapes. */
LT_API lt_status lt_broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                              int nb, int64_t *out, int *nout);

#endif
