/* Helpers shared by the op entry points: input checks, error text, type
 * promotion and geometry views that live on the stack (no allocation). */
#ifndef LT_OPS_INTERNAL_H
#define LT_OPS_INTERNAL_H

#include <stdbool.h>

#include "autograd/record.h"
#include "core/backend.h"
#include "lt/ops.h"

#define OPS_SHAPE_BUF 128

/* "[2, 3]" for t's shape into buf (OPS_SHAPE_BUF bytes). */
char *ops_shape_str(char *buf, const int64_t *shape, int ndim);

/* t is present and its storage alive. */
lt_status ops_check_live(const char *op, const lt_tensor *t);
/* Both on the same device (names them otherwise). */
lt_status ops_check_same_device(const char *op, const lt_tensor *a, const lt_tensor *b);
/* The kernels of t's device, or an error naming the op and the device. */
lt_status ops_backend(const char *op, lt_device dev, const lt_backend **out);
/* An in-place destination must not have elements sharing memory (an
 * expanded tensor): the result would depend on the order of writes. */
lt_status ops_check_writable(const char *op, const lt_tensor *t);

/* How an in-place destination shares memory with an input (ops/overlap.c):
 * not at all, element for element (x:add_(x), legal), some elements for
 * certain (PyTorch refuses), or possibly (spans overlap; lt cannot prove the
 * elements disjoint without walking them). */
typedef enum { OPS_OVERLAP_NONE, OPS_OVERLAP_SAME, OPS_OVERLAP_PARTIAL, OPS_OVERLAP_UNKNOWN } ops_overlap;
ops_overlap ops_overlap_of(const lt_tensor *out, const lt_tensor *in);
/* PyTorch's "unsupported operation: some elements of the input tensor and the
 * written-to tensor refer to a single memory location" for op. */
lt_status ops_overlap_error(const char *op);
/* An error naming both unless out, written by op, shares no memory with in
 * (either may be NULL): for outputs written while other operands are read. */
lt_status ops_check_disjoint(const char *op, const lt_tensor *out, const char *out_name,
                             const lt_tensor *in, const char *in_name);
/* The input an in-place op may read while it writes out: in itself, or, when
 * the two may share elements, a copy of in made now (*copy, the caller
 * releases it). With refuse_partial a certain partial overlap is PyTorch's
 * error instead (arithmetic); without it (copy_, slice assignment) the copy
 * makes the write correct. */
lt_status ops_inplace_input(const char *op, const lt_tensor *out, const lt_tensor *in,
                            bool refuse_partial, const lt_tensor **use, lt_tensor **copy);
/* Marks an in-place write by op (a static string such as "relu_"): autograd
 * compares saved versions and names the op in its message. */
static inline void ops_bump_version(lt_tensor *t, const char *op) {
  t->storage->version++;
  t->storage->last_inplace_op = op;
}

/* ---- type promotion (PyTorch's torch.result_type) ---- */

/* Dimensioned tensors outrank 0-dim tensors, which outrank wrapped numbers;
 * a lower class only raises the category (bool < integral < floating). */
typedef struct ops_result_type {
  lt_dtype dim, zero_dim, wrapped; /* LT_NDTYPES: none yet */
} ops_result_type;

void ops_rt_init(ops_result_type *rt);
void ops_rt_add_tensor(ops_result_type *rt, const lt_tensor *t);
/* A number from the script: integers count as int64, others as float32
 * (the default dtype). */
void ops_rt_add_scalar(ops_result_type *rt, bool is_integer);
lt_dtype ops_rt_result(const ops_result_type *rt);

/* PyTorch's can_cast: no floating -> integral, no non-bool -> bool. */
bool ops_can_cast(lt_dtype from, lt_dtype to);
lt_status ops_check_cast(const char *op, lt_dtype result, lt_dtype dst);

/* PyTorch's refusal of a fill value dt cannot represent (300 into uint8,
 * 1e5 into float16): an error naming op, the value and the dtype. */
lt_status ops_check_fill_value(const char *op, double v, lt_dtype dt);

/* A number as it takes part in an op computing in a given dtype. */
lt_scalar ops_scalar(double v);

/* ---- geometry views on the stack ----
 * Copies of a tensor header whose geometry is changed for a kernel; they
 * share the storage without a reference and must not outlive the call. */
void ops_view_narrow(lt_tensor *view, int dim, int64_t start, int64_t length);
void ops_view_select(lt_tensor *view, int dim, int64_t index);
/* Prepends size-1 dims / moves to ndim dims broadcast to shape (stride 0). */
void ops_view_expand(lt_tensor *view, const int64_t *shape, int ndim);
/* t's header with one dim of size 1 when t is 0-dim, so that a kernel always has a
 * dim to walk (sort, scatter and gather take 0-dim tensors as PyTorch does). */
lt_tensor ops_view_as_1d(const lt_tensor *t);

/* The end of an op with two results (values and indices: max(dim), sort, topk): on
 * failure both are released; otherwise *values and *indices (either may be NULL, and
 * an unwanted one is released) receive them. Returns st. */
lt_status ops_finish_pair(lt_status st, lt_tensor *v, lt_tensor *i, lt_tensor **values,
                          lt_tensor **indices);

#endif
