/* A small calculator for backward formulas: every helper computes one op on
 * tensors it holds until ag_calc_end, and after the first failure every later
 * helper does nothing and returns NULL, so a formula reads as a straight line
 * of math with one error check at its end. */
#ifndef LT_AUTOGRAD_GRAD_CALC_H
#define LT_AUTOGRAD_GRAD_CALC_H

#include "autograd/node.h"

#define AG_CALC_MAX 24

typedef struct ag_calc {
  lt_status st;
  int n;
  lt_tensor *held[AG_CALC_MAX];
} ag_calc;

void ag_calc_init(ag_calc *c);
/* Releases every held tensor; returns the first failure (or LT_OK). */
lt_status ag_calc_end(ag_calc *c);
/* Hands t to the caller as a new reference (for grad_in[i]); NULL after a
 * failure. */
lt_tensor *ag_out(ag_calc *c, const lt_tensor *t);
/* Holds t, the result of a call made outside these helpers that returned st
 * (recorded as the failure when not LT_OK); returns t or NULL. */
lt_tensor *ag_keep(ag_calc *c, lt_status st, lt_tensor *t);

lt_tensor *ag_bin(ag_calc *c, lt_binary_op op, const lt_tensor *a, const lt_tensor *b);
lt_tensor *ag_bin_s(ag_calc *c, lt_binary_op op, const lt_tensor *a, double s); /* a op s */
lt_tensor *ag_s_bin(ag_calc *c, lt_binary_op op, double s, const lt_tensor *a); /* s op a */
lt_tensor *ag_un(ag_calc *c, lt_unary_op op, const lt_tensor *a);
lt_tensor *ag_cast(ag_calc *c, const lt_tensor *a, lt_dtype dt);
lt_tensor *ag_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a, const lt_tensor *b);
/* where(cond, a, 0) and where(cond, 0, a): masks that keep NaN out of the
 * zeroed places (a product with a 0/1 mask would turn inf into NaN). */
lt_tensor *ag_keep_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a);
lt_tensor *ag_zero_where(ag_calc *c, const lt_tensor *cond, const lt_tensor *a);
lt_tensor *ag_sum(ag_calc *c, const lt_tensor *a, const int *dims, int ndims, bool keepdim);
lt_tensor *ag_prod(ag_calc *c, const lt_tensor *a, const int *dims, int ndims, bool keepdim);
lt_tensor *ag_matmul(ag_calc *c, const lt_tensor *a, const lt_tensor *b);
lt_tensor *ag_reshape(ag_calc *c, const lt_tensor *a, const int64_t *shape, int ndim);
lt_tensor *ag_expand(ag_calc *c, const lt_tensor *a, const int64_t *shape, int ndim);
lt_tensor *ag_transpose(ag_calc *c, const lt_tensor *a, int d0, int d1);
lt_tensor *ag_permute(ag_calc *c, const lt_tensor *a, const int *dims, int ndim);
lt_tensor *ag_unsqueeze(ag_calc *c, const lt_tensor *a, int dim);
lt_tensor *ag_squeeze(ag_calc *c, const lt_tensor *a, int dim);
lt_tensor *ag_narrow(ag_calc *c, const lt_tensor *a, int dim, int64_t start, int64_t length);
lt_tensor *ag_select(ag_calc *c, const lt_tensor *a, int dim, int64_t index);
/* A 0-dim tensor holding v. */
lt_tensor *ag_scalar(ag_calc *c, double v, lt_dtype dt, lt_device dev);
lt_tensor *ag_zeros(ag_calc *c, const int64_t *shape, int ndim, lt_dtype dt, lt_device dev);
/* Zeros of shape without memory per element: a 0-dim zero expanded. */
lt_tensor *ag_zeros_expanded(ag_calc *c, const int64_t *shape, int ndim, lt_dtype dt,
                             lt_device dev);
/* [base, base + n) as int64, shaped with n in dim and 1 elsewhere (ndim dims). */
lt_tensor *ag_arange_along(ag_calc *c, int64_t n, int64_t base, int dim, int ndim,
                           lt_device dev);
void ag_copy_into(ag_calc *c, lt_tensor *dst, const lt_tensor *src);

/* The gradient of a reduced tensor with the reduced dims (flags) put back as
 * size 1 when the reduction dropped them. */
lt_tensor *ag_unreduce(ag_calc *c, const lt_tensor *g, const bool *reduced, int ndim,
                       bool keepdim);

/* g summed down to shape (PyTorch's sum_to: leading dims, and dims that are 1
 * in shape). An error when g's shape does not broadcast to shape. */
lt_status ag_sum_to(const char *who, const lt_tensor *g, const int64_t *shape, int ndim,
                    lt_tensor **out);

#endif
