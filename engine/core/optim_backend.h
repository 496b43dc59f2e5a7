/* The optimizer kernel table of one device type, with the same shape for
 * cpu/ and cuda/ (apart from core/backend.h, as the nn table is, so that the
 * tables grow independently). ops/optim.c validates and computes the scalars
 * of the step; kernels see live tensors of one shape and dtype (float32,
 * float64, float16 or bfloat16), param and state buffers contiguous, and never
 * validate. */
#ifndef LT_CORE_OPTIM_BACKEND_H
#define LT_CORE_OPTIM_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/optim.h"

/* An Adam step's scalars, computed once per parameter in double as
 * torch.optim.Adam computes them in Python. */
typedef struct lt_adam_scalars {
  double beta1, beta2, eps;
  double weight_decay;          /* L2 term added to the gradient (Adam), else 0 */
  double param_scale;           /* AdamW's 1 - lr * weight_decay, else 1 */
  double step_size;             /* lr / (1 - beta1^step) */
  double bias_correction2_sqrt; /* sqrt(1 - beta2^step) */
  bool amsgrad, maximize;
} lt_adam_scalars;

typedef struct lt_optim_backend {
  const char *name;
  /* The updates over n tensors in one call (one launch per batch of tensors
   * on CUDA); a single tensor's step is a call with n = 1. Each index has
   * its own shape and dtype; the tensors of one call share a device, and
   * ops/optim.c has checked that no parameter appears twice, so the order of
   * the updates does not matter.
   * bufs NULL without momentum; init_buffers[i]: bufs[i] = d_p on its first
   * step. */
  lt_status (*sgd_many)(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                        lt_tensor *const *bufs, const bool *init_buffers,
                        const lt_sgd_options *o);
  /* s[i] holds index i's scalars (step counts differ per parameter);
   * max_exp_avg_sqs NULL unless s[0].amsgrad (all share amsgrad). */
  lt_status (*adam_many)(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                         lt_tensor *const *exp_avgs, lt_tensor *const *exp_avg_sqs,
                         lt_tensor *const *max_exp_avg_sqs, const lt_adam_scalars *s);
  /* grads[i] *= inv_scale in place (computed in float, in double for
   * float64, as mul_ with a number), and *found_inf (a float32 element on the
   * same device) = 1.0f when any element was inf or NaN before scaling. The
   * kernel only ever sets found_inf, so one flag can gather several calls
   * (PyTorch's _amp_foreach_non_finite_check_and_unscale_). grads contiguous
   * and pairwise distinct. */
  lt_status (*unscale_many)(int64_t n, lt_tensor *const *grads, float inv_scale,
                            lt_tensor *found_inf);
  /* RMSprop (see lt/optim.h): bufs NULL without momentum, grad_avgs NULL
   * unless o->centered; every buffer already initialised (zeros). */
  lt_status (*rmsprop_many)(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                            lt_tensor *const *square_avgs, lt_tensor *const *bufs,
                            lt_tensor *const *grad_avgs, const lt_rmsprop_options *o);
  /* Adagrad: clrs[i] is index i's learning rate after lr_decay (its step
   * counts differ per parameter); o->lr and o->lr_decay are not read. */
  lt_status (*adagrad_many)(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                            lt_tensor *const *sums, const double *clrs,
                            const lt_adagrad_options *o);
  /* lt_foreach_norm's kernel: out (0-dim, ts[0]'s dtype) = the p-norm of
   * every element of ts (contiguous, floating, dtypes may differ; empty
   * ones allowed), p > 0 or INFINITY, summed in double. */
  lt_status (*norm_many)(int64_t n, lt_tensor *const *ts, double p, lt_tensor *out);
  /* lt_foreach_mul_'s kernel: ts[i] *= the value of scalar (one element, a
   * floating dtype, read on the device) for contiguous, distinct ts. */
  lt_status (*scale_many)(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar);
} lt_optim_backend;

/* The optimizer kernels for dev's type, or NULL when it has none. */
const lt_optim_backend *lt_optim_backend_for(lt_device dev);

extern const lt_optim_backend lt_cpu_optim_backend;

#endif
