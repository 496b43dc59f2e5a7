/* The backend table: the kernels of one device type, with the same shape for
 * cpu/ and cuda/. ops/ validates, picks the result dtype, allocates the
 * result and then calls one of these through lt_backend_for(device); kernels
 * never validate. Every tensor handed to a kernel is live, on the backend's
 * device, and already has the shape the kernel is documented to expect.
 *
 * "compute" dtypes: elementwise kernels convert every input to the op's
 * common dtype (PyTorch's result_type of the inputs), compute, and convert the
 * result to the output's dtype once. float16/bfloat16 compute in float32 and
 * round once, integers and bool compute in int64 with two's complement wrap. */
#ifndef LT_CORE_BACKEND_H
#define LT_CORE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/ops.h"
#include "lt/tensor.h"

/* A number taking part in an op: f for floating compute dtypes, i for
 * integer/bool ones (both always set, so kernels pick by compute dtype). */
typedef struct lt_scalar {
  double f;
  int64_t i;
} lt_scalar;

typedef enum lt_reduce_op { LT_REDUCE_SUM = 0, LT_REDUCE_MEAN, LT_REDUCE_PROD } lt_reduce_op;

typedef struct lt_backend {
  const char *name;

  /* out = a op b elementwise. a and b broadcast to out's shape (missing
   * leading dims and size-1 dims repeat). b NULL: the scalar s takes b's
   * place, or a's when scalar_first. Integer pow with a negative exponent
   * gives PyTorch's values (1, +-1 or 0); integer division by zero gives 0. */
  lt_status (*binary)(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                      const lt_tensor *b, lt_scalar s, bool scalar_first);
  /* out = op(a); a has out's shape (out may be a itself). */
  lt_status (*unary)(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a);
  /* out = min(max(a, lo), hi), NaN kept; a has out's shape. */
  lt_status (*clamp)(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                     lt_scalar lo, bool has_hi, lt_scalar hi);
  /* out = cond ? a : b, all three broadcast to out's shape; cond is bool. */
  lt_status (*where)(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                     const lt_tensor *b);

  /* dst = src, src broadcast to dst's shape and converted to dst's dtype.
   * A non-CPU backend also copies between its device and the CPU. */
  lt_status (*copy)(lt_tensor *dst, const lt_tensor *src);
  /* copy, allowed to return before the copy is done when the host side is
   * pinned (lt_to_device_ex's non_blocking); NULL where every copy blocks. */
  lt_status (*copy_non_blocking)(lt_tensor *dst, const lt_tensor *src);
  /* Every element of dst = value (already checked to fit dst's dtype). */
  lt_status (*fill)(lt_tensor *dst, double value);
  /* The bytes of t's first element into host memory (item). */
  lt_status (*read_element)(const lt_tensor *t, void *host_dst);

  /* Reduces the dims of in flagged in reduced[] (in->ndim entries) into the
   * contiguous out, whose elements follow the kept dims in order. Sums of
   * floats accumulate in double, blocked by a fixed partition, so the result
   * never depends on the thread count. An empty reduction gives 0 (sum),
   * 1 (prod) or NaN (mean). */
  lt_status (*reduce)(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced);
  /* max (is_max) or min over dim (or over every element, row-major, when dim
   * is -1) into the contiguous values (in's dtype) and/or indices (int64, with
   * index_base added); either may be NULL. NaN wins; the first of equal values
   * wins. The reduced extent is never empty. */
  lt_status (*reduce_index)(bool is_max, lt_tensor *values, lt_tensor *indices,
                            const lt_tensor *in, int dim, int64_t index_base);

  /* out[..., n, m] = a[..., n, k] @ b[..., k, m]: a, b and out have the same
   * ndim (at least 2) and batch shape (a and b broadcast by stride 0); out is
   * contiguous; a and b share out's dtype (float32, float64 or an integer
   * type). Float operands whose matrices are neither row- nor column-major
   * must be made contiguous by the caller. */
  lt_status (*matmul)(lt_tensor *out, const lt_tensor *a, const lt_tensor *b);

  /* index_select: out's k-th slice along dim = in's slice rows[k] - base.
   * in and out are contiguous, of one dtype (any), with equal sizes except
   * along dim, where out's is n; rows holds n int64 values in the backend's
   * memory, already checked to lie in [base, base + in's size along dim). */
  lt_status (*index_select)(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                            int64_t n, int64_t base);

  /* sort: the first k (0 <= k <= size of dim) of each slice of in along dim
   * in ascending or descending order into values (in's dtype) and indices
   * (int64, positions plus index_base), whose shape is in's with k along
   * dim: the whole sort when k is the size, topk otherwise. Stable: equal
   * elements keep their order; NaN is greater than every number and -0.0
   * equals 0.0. in, values and indices are contiguous (at least one dim);
   * either output may be NULL. */
  lt_status (*sort)(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                    bool descending, int64_t k, int64_t index_base);

  /* gather and scatter along dim through index (int64, any strides, its
   * values already checked to lie in [base, base + size of dim)); every
   * tensor has index's number of dims and any strides. gather: out (index's
   * shape) at p = in at p with p[dim] = index[p] - base. scatter: for every
   * position p of index, out at p with p[dim] = index[p] - base gets src at
   * p (add: increased by it), or value when src is NULL; out and src share a
   * dtype, out's elements do not overlap, and a repeated target is written
   * in index's row-major order (the last write wins; adds in that order), so
   * the result never depends on the device or the thread count. */
  lt_status (*gather)(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                      int64_t base);
  lt_status (*scatter)(bool add, lt_tensor *out, int dim, const lt_tensor *index, int64_t base,
                       const lt_tensor *src, lt_scalar value);
} lt_backend;

/* The kernels for dev's type, or NULL when that device type has no backend
 * (CUDA without the toolkit). */
const lt_backend *lt_backend_for(lt_device dev);
/* Installed by a device backend when it starts (the CPU's is built in). */

extern const lt_backend lt_cpu_backend;

#endif
