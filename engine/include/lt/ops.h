/* Tensor operations. Each op validates its inputs (shapes, dtypes, devices,
 * freed storages), computes the result dtype by PyTorch's type promotion and
 * dispatches to the backend of the tensors' device. Out-of-place ops return a
 * new tensor in *out; in-place ops (suffix _) write into their first argument
 * and bump its storage version. */
#ifndef LT_OPS_H
#define LT_OPS_H

#include "lt/api.h"

#include "lt/tensor.h"

/* ---- elementwise: one row per op (ORDER OP) ----
 *
 * These rows are the one list of the elementwise ops. The enums below, the
 * names (the Lua methods and their in-place forms, error messages), the
 * autograd nodes' names and every property the ops, their formulas and
 * autocast read (ops/op_table.c) come from them; the kernels and the
 * backward formulas switch over the enums without a default, so that the
 * compiler (-Wswitch) names an op a backend or a formula lacks, and a
 * missed one fails at run time instead of leaving its output unwritten.
 * docs/ARCHITECTURE.md has the add-an-op checklist.
 *
 * LT_BINARY_OPS: X(ID, name, Node, kind, autocast)
 *   kind      ARITH    result in the promoted dtype
 *             DIVIDE   true division: integer inputs give float32
 *             COMPARE  a bool result
 *             INTEGRAL Python's % and //: integers stay integers, bool refused
 *             GRAD     an engine-only op (not a tensor method), floating only
 *   autocast  ANY      runs in its inputs' dtype under autocast
 *             FLOAT32  runs in float32 under CUDA autocast (PyTorch's CUDA fp32 list;
 *                      its CPU list leaves these out: in its inputs' dtype there)
 * LT_UNARY_OPS: X(ID, name, Node, dtype, saves, autocast)
 *   dtype     KEEP     the input's dtype
 *             FLOAT    integer inputs give float32 (math functions)
 *   saves     what the backward keeps: NOTHING, INPUT or RESULT (PyTorch's
 *             choice: a derivative cheapest from the result keeps it) */
#define LT_BINARY_OPS(X)                                                  \
  X(ADD, add, AddBackward, ARITH, ANY)                                    \
  X(SUB, sub, SubBackward, ARITH, ANY)                                    \
  X(MUL, mul, MulBackward, ARITH, ANY)                                    \
  X(DIV, div, DivBackward, DIVIDE, ANY)                                   \
  X(POW, pow, PowBackward, ARITH, FLOAT32)                                \
  X(MAXIMUM, maximum, MaximumBackward, ARITH, ANY)                        \
  X(MINIMUM, minimum, MinimumBackward, ARITH, ANY)                        \
  X(EQ, eq, ComparisonBackward, COMPARE, ANY)                             \
  X(NE, ne, ComparisonBackward, COMPARE, ANY)                             \
  X(LT, lt, ComparisonBackward, COMPARE, ANY)                             \
  X(LE, le, ComparisonBackward, COMPARE, ANY)                             \
  X(GT, gt, ComparisonBackward, COMPARE, ANY)                             \
  X(GE, ge, ComparisonBackward, COMPARE, ANY)                             \
  X(REMAINDER, remainder, RemainderBackward, INTEGRAL, ANY)               \
  X(FLOOR_DIVIDE, floor_divide, FloorDivideBackward, INTEGRAL, ANY)       \
  X(RELU_GRAD, relu_grad, ThresholdBackwardBackward, GRAD, ANY)

#define LT_UNARY_OPS(X)                                                   \
  X(NEG, neg, NegBackward, KEEP, NOTHING, ANY)                            \
  X(EXP, exp, ExpBackward, FLOAT, RESULT, FLOAT32)                        \
  X(LOG, log, LogBackward, FLOAT, INPUT, FLOAT32)                         \
  X(SQRT, sqrt, SqrtBackward, FLOAT, RESULT, ANY)                         \
  X(RSQRT, rsqrt, RsqrtBackward, FLOAT, RESULT, FLOAT32)                  \
  X(ABS, abs, AbsBackward, KEEP, INPUT, ANY)                              \
  X(RELU, relu, ReluBackward, KEEP, RESULT, ANY)                          \
  X(SIGMOID, sigmoid, SigmoidBackward, FLOAT, RESULT, ANY)                \
  X(TANH, tanh, TanhBackward, FLOAT, RESULT, ANY)                         \
  X(SIN, sin, SinBackward, FLOAT, INPUT, ANY)                             \
  X(COS, cos, CosBackward, FLOAT, INPUT, ANY)                             \
  X(RECIPROCAL, reciprocal, ReciprocalBackward, FLOAT, RESULT, FLOAT32)   \
  X(SQUARE, square, PowBackward, KEEP, INPUT, ANY)                        \
  X(SIGN, sign, SignBackward, KEEP, NOTHING, ANY)                         \
  X(FLOOR, floor, FloorBackward, KEEP, NOTHING, ANY)                      \
  X(CEIL, ceil, CeilBackward, KEEP, NOTHING, ANY)                         \
  X(ROUND, round, RoundBackward, KEEP, NOTHING, ANY)                      \
  X(LOGICAL_NOT, logical_not, LogicalNotBackward, KEEP, NOTHING, ANY)    \
  X(ERF, erf, ErfBackward, FLOAT, INPUT, ANY)

#define LT_OP_ENUM_ROW(ID, ...) LT_OP_##ID,

/* a op b. Python's % and // (REMAINDER, FLOOR_DIVIDE): the remainder takes
 * the divisor's sign and the quotient is floored; an integer divisor of 0 is
 * an error on the CPU (PyTorch's ZeroDivisionError). RELU_GRAD is ReLU's
 * gradient, a where b > 0 and 0 where b <= 0 (PyTorch's threshold_backward
 * at 0: a NaN b passes a): one pass, without the bool mask that where()
 * would need at the peak of a backward. */
typedef enum lt_binary_op { LT_BINARY_OPS(LT_OP_ENUM_ROW) LT_NBINARY } lt_binary_op;
typedef enum lt_unary_op { LT_UNARY_OPS(LT_OP_ENUM_ROW) LT_NUNARY } lt_unary_op;

/* "add", "add_" ("unknown" outside the enums). */
LT_API const char *lt_binary_op_name(lt_binary_op op);
LT_API const char *lt_binary_op_inplace_name(lt_binary_op op);
LT_API const char *lt_unary_op_name(lt_unary_op op);
LT_API const char *lt_unary_op_inplace_name(lt_unary_op op);
/* eq, ne, lt, le, gt, ge: results are bool. */
LT_API bool lt_binary_is_comparison(lt_binary_op op);
/* A tensor method (every binary op but the engine's own RELU_GRAD). */
LT_API bool lt_binary_is_method(lt_binary_op op);

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
