/* Tensor operations. Each op validates its inputs (shapes, dtypes, devices,
 * freed storages), computes the result dtype by PyTorch's type promotion and
 * dispatches to the backend of the tensors' device. Out-of-place ops return a
 * new tensor in *out; in-place ops (suffix _) write into their first argument
 * and bump its storage version. */
#ifndef LT_OPS_H
#define LT_OPS_H

#include "lt/api.h"

#include "lt/tensor.h"

/* ---- elementwise ---- */
typedef enum lt_binary_op {
  LT_OP_ADD = 0,
  LT_OP_SUB,
  LT_OP_MUL,
  LT_OP_DIV, /* true division: integer inputs give float32 */
  LT_OP_POW,
  LT_OP_MAXIMUM,
  LT_OP_MINIMUM,
  LT_OP_EQ, /* comparisons give bool */
  LT_OP_NE,
  LT_OP_LT,
  LT_OP_LE,
  LT_OP_GT,
  LT_OP_GE,
  /* Python's % and //: the remainder takes the divisor's sign and the
   * quotient is floored. Integer tensors stay integer; an integer divisor of
   * 0 is an error on the CPU (PyTorch's ZeroDivisionError). */
  LT_OP_REMAINDER,
  LT_OP_FLOOR_DIVIDE,
  /* Not a tensor method (ops past LT_NBINARY_METHODS are the engine's own):
   * ReLU's gradient, a where b > 0 and 0 where b <= 0 (PyTorch's
   * threshold_backward at 0: a NaN b passes a), floating dtypes only. One
   * pass, without the bool mask that where() would need at the peak of a
   * backward. */
  LT_OP_RELU_GRAD,
  LT_NBINARY
} lt_binary_op;

#define LT_NBINARY_METHODS LT_OP_RELU_GRAD

/* eq, ne, lt, le, gt, ge: results are bool. */
static inline bool lt_binary_is_comparison(lt_binary_op op) {
  return op >= LT_OP_EQ && op <= LT_OP_GE;
}

typedef enum lt_unary_op {
  LT_OP_NEG = 0,
  LT_OP_EXP,
  LT_OP_LOG,
  LT_OP_SQRT,
  LT_OP_RSQRT,
  LT_OP_ABS,
  LT_OP_RELU,
  LT_OP_SIGMOID,
  LT_OP_TANH,
  LT_OP_SIN,
  LT_OP_COS,
  LT_OP_RECIPROCAL,
  LT_OP_SQUARE,
  LT_OP_SIGN,
  LT_OP_FLOOR,
  LT_OP_CEIL,
  LT_OP_ROUND,
  LT_OP_LOGICAL_NOT,
  LT_NUNARY
} lt_unary_op;

LT_API const char *lt_binary_op_name(lt_binary_op op); /* "add", ... */
LT_API const char *lt_unary_op_name(lt_unary_op op);

/* a op b with broadcasting. */
LT_API lt_status lt_binary(lt_binary_op op, const lt_tensor *a, const lt_tensor *b, lt_tensor **out);
/* a op s (or s op a when scalar_first): a Lua number takes part as PyTorch's
 * wrapped scalar (int tensor + 2.5 -> float32; float16 tensor + 2.0 -> float16).
 * is_integer says whether s was an integer in the script. */
LT_API lt_status lt_binary_scalar(lt_binary_op op, const lt_tensor *a, double s, bool is_integer,
                           bool scalar_first, lt_tensor **out);
/* a = a op b (b broadcast to a's shape; the result cast to a's dtype, which
 * must be able to hold it: float into an int tensor is an error, as PyTorch). */
LT_API lt_status lt_binary_(lt_binary_op op, lt_tensor *a, const lt_tensor *b);
LT_API lt_status lt_binary_scalar_(lt_binary_op op, lt_tensor *a, double s, bool is_integer);
LT_API lt_status lt_unary(lt_unary_op op, const lt_tensor *a, lt_tensor **out);
LT_API lt_status lt_unary_(lt_unary_op op, lt_tensor *a);
/* lo/hi: has_lo/has_hi false means no bound on that side. */
LT_API lt_status lt_clamp(const lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi,
                   lt_tensor **out);
LT_API lt_status lt_clamp_(lt_tensor *a, bool has_lo, double lo, bool has_hi, double hi);
/* where(cond, a, b) with broadcasting. */
LT_API lt_status lt_where(const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b,
                   lt_tensor **out);

/* ---- filling and copying ---- */
LT_API lt_status lt_fill_(lt_tensor *t, double value);
LT_API lt_status lt_zero_(lt_tensor *t);
/* dst = src, src broadcast to dst's shape, converted to dst's dtype. */
LT_API lt_status lt_copy_(lt_tensor *dst, const lt_tensor *src);
/* A copy converted to dtype (t itself, one more reference, when the dtype is
 * the same and copy is false). */
LT_API lt_status lt_to_dtype(const lt_tensor *t, lt_dtype dt, bool copy, lt_tensor **out);
LT_API lt_status lt_to_device(const lt_tensor *t, lt_device dev, lt_tensor **out);
/* lt_to_device; non_blocking lets a copy between pinned host memory and a GPU
 * return before it is done (torch's non_blocking=True): the GPU's later work
 * is ordered after it, and host code must lt_cuda_synchronize before reading
 * a pinned destination. Other copies ignore the flag. */
LT_API lt_status lt_to_device_ex(const lt_tensor *t, lt_device dev, bool non_blocking, lt_tensor **out);
/* t in page-locked host memory (t itself when it already is), for fast and
 * asynchronous copies to a GPU (torch's pin_memory). t must be on the CPU;
 * fails with LT_ERR_DEVICE when no CUDA device is there to pin for. */
LT_API lt_status lt_pin_memory(const lt_tensor *t, lt_tensor **out);
LT_API bool lt_is_pinned(const lt_tensor *t);
LT_API lt_status lt_clone(const lt_tensor *t, lt_tensor **out);

/* ---- reductions ----
 * dims: a list of ndims dims to reduce (0-based, already wrapped); ndims 0
 * reduces every dim. sum of bool/integers gives int64; mean needs a floating
 * dtype (as PyTorch). */
LT_API lt_status lt_sum(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out);
LT_API lt_status lt_mean(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out);
LT_API lt_status lt_prod(const lt_tensor *t, const int *dims, int ndims, bool keepdim, lt_tensor **out);
/* max/min over one dim: values and int64 indices; index values start at
 * index_base (1 for Lua users, 0 inside the engine). First occurrence wins;
 * NaN propagates as PyTorch. */
LT_API lt_status lt_max_dim(const lt_tensor *t, int dim, bool keepdim, int64_t index_base,
                     lt_tensor **values, lt_tensor **indices);
LT_API lt_status lt_min_dim(const lt_tensor *t, int dim, bool keepdim, int64_t index_base,
                     lt_tensor **values, lt_tensor **indices);
/* max/min of every element: a 0-dim tensor; an empty tensor is an error. */
LT_API lt_status lt_max_all(const lt_tensor *t, lt_tensor **out);
LT_API lt_status lt_min_all(const lt_tensor *t, lt_tensor **out);
/* argmax/argmin over a dim, or over the flattened tensor when all is true. */
LT_API lt_status lt_argmax(const lt_tensor *t, int dim, bool all, bool keepdim, int64_t index_base,
                    lt_tensor **out);
LT_API lt_status lt_argmin(const lt_tensor *t, int dim, bool all, bool keepdim, int64_t index_base,
                    lt_tensor **out);

/* ---- linear algebra ---- */
/* torch.matmul: 1-D x 1-D dot, 2-D mm, batched with broadcasting of batch
 * dims, 1-D operands promoted and the added dim removed. Floating dtypes go
 * through BLAS; integers through a plain loop. */
LT_API lt_status lt_matmul(const lt_tensor *a, const lt_tensor *b, lt_tensor **out);

/* ---- joining ---- */
LT_API lt_status lt_cat(lt_tensor *const *ts, int n, int dim, lt_tensor **out);
LT_API lt_status lt_stack(lt_tensor *const *ts, int n, int dim, lt_tensor **out);

/* ---- padding ----
 * torch.constant_pad_nd (F.pad's "constant" mode): pad holds npad values,
 * (before, after) pairs for the last dim first, then the one before it, ...
 * A negative value crops. The result is one new tensor of x's dtype and
 * device; its gradient is the matching part of the output's gradient. */
LT_API lt_status lt_constant_pad_nd(const lt_tensor *x, const int64_t *pad, int npad, double value,
                             lt_tensor **out);

/* ---- scalar access ---- */
/* The single element of a one-element tensor as double (or exact int64). */
LT_API lt_status lt_item(const lt_tensor *t, double *out);
LT_API lt_status lt_item_int64(const lt_tensor *t, int64_t *out);

#endif
