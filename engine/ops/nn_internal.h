/* Helpers shared by the nn op entry points (ops/nn_*.c): operand checks,
 * conversion of operands into what the kernels take (contiguous, float32 or
 * float64) and a scope that releases every temporary on any exit path. */
#ifndef LT_OPS_NN_INTERNAL_H
#define LT_OPS_NN_INTERNAL_H

#include "autograd/record_nn.h"
#include "core/nn_backend.h"
#include "lt/nn.h"
#include "ops/ops_internal.h"

/* Temporaries of one call, released together by nn_scope_end. */
#define NN_SCOPE_MAX 24
typedef struct nn_scope {
  lt_tensor *held[NN_SCOPE_MAX];
  int n;
} nn_scope;

/* Takes over one reference to t (NULL ignored); returns t. */
lt_tensor *nn_hold(nn_scope *s, lt_tensor *t);
void nn_scope_end(nn_scope *s);

/* The dtype kernels compute in for a floating dtype: float16 and bfloat16
 * compute in float32. */
lt_dtype nn_compute_dtype(lt_dtype dt);
/* The dtype linear and conv2d kernels of be compute in: 16-bit floats stay
 * as they are where the backend has tensor-core kernels (half_matmul). */
lt_dtype nn_matmul_dtype(const lt_nn_backend *be, lt_dtype dt);
/* The same for gelu and softmax (half_pointwise). */
lt_dtype nn_pointwise_dtype(const lt_nn_backend *be, lt_dtype dt);

/* t is live and floating. role names it in messages ("input", "weight"). */
lt_status nn_check_float(const char *op, const char *role, const lt_tensor *t);
/* t is live, int64, and on ref's device. */
lt_status nn_check_index(const char *op, const char *role, const lt_tensor *t,
                         const lt_tensor *ref);
/* t (optional when NULL) is live, on ref's device and of dtype dt. */
lt_status nn_check_operand(const char *op, const char *role, const lt_tensor *t,
                           const lt_tensor *ref, lt_dtype dt);
/* A normalisation parameter (weight, bias, running stats; NULL allowed):
 * live, on x's device, of x's dtype or float32 when x is float16/bfloat16. */
lt_status nn_check_param(const char *op, const char *role, const lt_tensor *t,
                         const lt_tensor *x);
/* t (or NULL) is a 1-D tensor of n elements. */
lt_status nn_check_vector(const char *op, const char *role, const lt_tensor *t, int64_t n);
/* A window option pair (what: "stride", "padding", ...) above 2^31 - 1 is an
 * LT_ERR_ARG naming op, what and the values: PyTorch keeps these in an int,
 * and larger ones would overflow the output-size arithmetic. */
lt_status nn_check_window_limit(const char *op, const char *what, const int64_t v[2]);

/* *out: t as a contiguous tensor of dtype dt (t itself when it already is),
 * held by s. NULL stays NULL. */
lt_status nn_prepare(nn_scope *s, const lt_tensor *t, lt_dtype dt, lt_tensor **out);
/* A new contiguous tensor of shape for a result, held by s. */
lt_status nn_result(nn_scope *s, const int64_t *shape, int ndim, lt_dtype dt, lt_device dev,
                    lt_tensor **out);
/* Hands a result computed in dtype to the caller as dtype dt: r itself (one
 * more reference) or a rounded copy. */
lt_status nn_deliver(const lt_tensor *r, lt_dtype dt, lt_tensor **out);

/* *view: a header over contiguous t's storage with another contiguous shape
 * of the same element count (no reference; must not outlive t). */
void nn_view(lt_tensor *view, const lt_tensor *t, const int64_t *shape, int ndim);
/* Whether two shapes are equal. */
bool nn_same_shape(const int64_t *a, int na, const int64_t *b, int nb);

/* For each non-NULL results[i]: *outs[i] = results[i] delivered as dt. On
 * failure none is left delivered (each *outs[i] is NULL). */
lt_status nn_deliver_all(lt_dtype dt, int n, lt_tensor *const *results, lt_tensor **const *outs);
/* A normalisation's gradients: the input's in x_dtype, the weight's and
 * bias's in the weight's dtype (x_dtype without one). On failure nothing is
 * handed out. */
lt_status nn_deliver_norm_grads(lt_dtype x_dtype, const lt_tensor *weight, lt_tensor *gx,
                                lt_tensor *gw, lt_tensor *gb, lt_tensor **grad_input,
                                lt_tensor **grad_weight, lt_tensor **grad_bias);

/* What an op entry point does after its forward (run with grad mode off)
 * and its record call: on failure drops the result (and *extra, when given)
 * so that the caller gets nothing; returns st. */
lt_status nn_settle(lt_status st, lt_tensor **out, lt_tensor **extra);

/* An extra result the op computed for its node (statistics, a mask) given to
 * the caller when st is LT_OK and the caller asked for it (dst not NULL),
 * released otherwise. */
void nn_hand_over(lt_status st, lt_tensor *t, lt_tensor **dst);

/* The kernels of dev or an error naming op. */
lt_status nn_backend(const char *op, lt_device dev, const lt_nn_backend **out);

/* Every value of the int64 tensor idx (CPU) is ignore_index (when
 * has_ignore) or in [base, base + n); otherwise an error from
 * describe(op, value, n, base). */
typedef lt_status (*nn_index_error_fn)(const char *op, long long value, long long n,
                                       long long base);
lt_status nn_check_index_range(const char *op, const lt_tensor *idx, int64_t n, int64_t base,
                               bool has_ignore, int64_t ignore_index, nn_index_error_fn describe);

#endif
