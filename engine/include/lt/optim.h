/* Fused optimizer steps: one pass over a parameter, its gradient and its
 * state buffers, updating all of them in place. The arithmetic follows
 * torch.optim's single-tensor (non-foreach, non-fused) code of PyTorch 1.13
 * operation by operation, so float32 results agree with PyTorch's to a few
 * ulps. float16/bfloat16 parameters and states are read into float32,
 * updated there and rounded once when stored (PyTorch computes every
 * intermediate in 16 bits, where Adam's eps 1e-8 underflows to 0 and the
 * update becomes NaN). float64 computes in double.
 *
 * param, grad and the state buffers must share shape, dtype and device; param
 * and the buffers must be contiguous (grad may be any view). The name given
 * ("SGD", "AdamW") is the op name in error messages. */
#ifndef LT_OPTIM_H
#define LT_OPTIM_H

#include "lt/api.h"

#include <stdbool.h>
#include <stdint.h>

#include "lt/tensor.h"

typedef struct lt_sgd_options {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
} lt_sgd_options;

/* One SGD step. momentum_buffer is NULL when momentum is 0; with
 * init_buffer true (its first step) the buffer is set to the gradient (weight
 * decay included), as PyTorch's clone of d_p, instead of being decayed. */
LT_API lt_status lt_sgd_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                       lt_tensor *momentum_buffer, bool init_buffer, const lt_sgd_options *o);

typedef struct lt_adam_options {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad;
  bool decoupled_weight_decay; /* AdamW: param *= 1 - lr * weight_decay; Adam: L2 on grad */
  bool maximize;
} lt_adam_options;

/* One Adam/AdamW step; step is the step count after this step (1 on the
 * first). max_exp_avg_sq is used (and required) only with amsgrad. */
LT_API lt_status lt_adam_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                        lt_tensor *exp_avg, lt_tensor *exp_avg_sq, lt_tensor *max_exp_avg_sq,
                        int64_t step, const lt_adam_options *o);

/* ---- multi-tensor steps ----
 * The steps above over n parameters at once: the device's kernels are
 * called once (on CUDA a launch covers many tensors), with results
 * bit-identical to the single steps run for index 0, 1, ... in turn.
 * Everything is checked before anything is written: on an error no tensor
 * has changed. Messages name the op and the offending parameter, counted
 * from 1 ("SGD: parameter 2: the gradient has shape ..."). All tensors of a
 * call must be on one device; each index has its own shape and dtype; a
 * parameter must not appear twice. grads[i] may be any view (a contiguous
 * copy is made where needed). */

/* momentum_buffers is NULL when o->momentum is 0; init_buffers[i] as the
 * single step's init_buffer (NULL: none is new). */
LT_API lt_status lt_sgd_step_many_(const char *name, int64_t n, lt_tensor *const *params,
                            lt_tensor *const *grads, lt_tensor *const *momentum_buffers,
                            const bool *init_buffers, const lt_sgd_options *o);

/* steps[i] is parameter i's step count after this step (counts differ when
 * parameters got gradients in different steps); max_exp_avg_sqs is used
 * (and required) only with amsgrad. */
LT_API lt_status lt_adam_step_many_(const char *name, int64_t n, lt_tensor *const *params,
                             lt_tensor *const *grads, lt_tensor *const *exp_avgs,
                             lt_tensor *const *exp_avg_sqs, lt_tensor *const *max_exp_avg_sqs,
                             const int64_t *steps, const lt_adam_options *o);

/* A whole optimizer step over several lists (one per parameter group and
 * device, each with its own options): every list is checked and its
 * temporaries made before the first kernel runs, so an error (a bad option,
 * out of memory) in any list leaves every tensor of every list unchanged.
 * Messages count parameters within their list. */
typedef struct lt_sgd_call {
  int64_t n;
  lt_tensor *const *params, *const *grads, *const *momentum_buffers;
  const bool *init_buffers;
  lt_sgd_options options;
} lt_sgd_call;

typedef struct lt_adam_call {
  int64_t n;
  lt_tensor *const *params, *const *grads, *const *exp_avgs, *const *exp_avg_sqs,
      *const *max_exp_avg_sqs;
  const int64_t *steps;
  lt_adam_options options;
} lt_adam_call;

LT_API lt_status lt_sgd_step_calls_(const char *name, int64_t ncalls, const lt_sgd_call *calls);
LT_API lt_status lt_adam_step_calls_(const char *name, int64_t ncalls, const lt_adam_call *calls);

/* RMSprop and Adagrad, as torch.optim.RMSprop / torch.optim.Adagrad
 * (single-tensor code, foreach=False), in the multi-tensor form only: the
 * optimizers of lua/lt/optim call them once per step.
 *
 * RMSprop, per element: g = maximize ? -grad : grad; g += weight_decay * p;
 * square_avg = square_avg * alpha + (1 - alpha) * g * g; centered:
 * grad_avg = lerp(grad_avg, g, 1 - alpha), avg = sqrt(square_avg -
 * grad_avg^2) + eps, else avg = sqrt(square_avg) + eps; momentum:
 * buf = buf * momentum + g / avg, p += -lr * buf; else p += -lr * g / avg.
 * momentum_buffers is used (and required) only when momentum is not 0,
 * grad_avgs only when centered; new buffers are zero-filled by the caller,
 * as PyTorch's zeros_like. */
typedef struct lt_rmsprop_options {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
} lt_rmsprop_options;

typedef struct lt_rmsprop_call {
  int64_t n;
  lt_tensor *const *params, *const *grads, *const *square_avgs, *const *momentum_buffers,
      *const *grad_avgs;
  lt_rmsprop_options options;
} lt_rmsprop_call;

LT_API lt_status lt_rmsprop_step_calls_(const char *name, int64_t ncalls,
                                        const lt_rmsprop_call *calls);

/* Adagrad, per element: g = maximize ? -grad : grad; g += weight_decay * p;
 * sum += g * g; p += -clr * g / (sqrt(sum) + eps), with
 * clr = lr / (1 + (step - 1) * lr_decay) computed in double per parameter
 * from steps[i], its step count after this step (1 on the first). A new sum
 * is filled by the caller with initial_accumulator_value. */
typedef struct lt_adagrad_options {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
} lt_adagrad_options;

typedef struct lt_adagrad_call {
  int64_t n;
  lt_tensor *const *params, *const *grads, *const *sums;
  const int64_t *steps;
  lt_adagrad_options options;
} lt_adagrad_call;

LT_API lt_status lt_adagrad_step_calls_(const char *name, int64_t ncalls,
                                        const lt_adagrad_call *calls);

/* GradScaler's unscale: grads[i] *= inv_scale in place (a float32 value;
 * float for float32/float16/bfloat16 gradients, double for float64, as
 * mul_), and found_inf (a one-element float32 tensor on the gradients'
 * device) set to 1 when any element was inf or NaN before scaling. found_inf
 * is never reset here: the caller zeroes it, and may gather several calls
 * in it. On CUDA nothing waits for the device. Gradients must be writable
 * (not expanded) and distinct. As PyTorch's
 * torch._amp_foreach_non_finite_check_and_unscale_. */
LT_API lt_status lt_amp_unscale_many_(int64_t n, lt_tensor *const *grads, lt_tensor *found_inf,
                               float inv_scale);

/* The unscale of several lists (one per device, each with its found_inf):
 * all are checked and prepared before any gradient is written, so an error
 * leaves every gradient and flag as it was. */
typedef struct lt_unscale_call {
  int64_t n;
  lt_tensor *const *grads;
  lt_tensor *found_inf;
} lt_unscale_call;

LT_API lt_status lt_amp_unscale_calls_(int64_t ncalls, const lt_unscale_call *calls, float inv_scale);

/* ---- foreach ops over a list of tensors (clip_grad_norm_'s two steps) ----
 * Tensors of one call share a device (lists over several devices are split by
 * the caller, as PyTorch groups them); their floating dtypes may differ. */

/* *out = the p-norm of all elements of the n tensors taken together (the
 * norm of their norms, as torch._foreach_norm then vector_norm): p > 0, or
 * INFINITY for the largest magnitude (NaN wins, as max). A new 0-dim tensor
 * of ts[0]'s dtype on their device, 0 when every tensor is empty; the sums
 * are taken in double (float32 lanes widened every 1024 elements on the
 * CPU), so a 16-bit list does not overflow below its own range. Nothing is
 * recorded for autograd. On CUDA nothing waits for the device. */
LT_API lt_status lt_foreach_norm(int64_t n, lt_tensor *const *ts, double p, lt_tensor **out);

/* ts[i] *= scalar in place for every i, as torch._foreach_mul_(ts, scalar):
 * scalar a one-element floating tensor on the tensors' device (read there:
 * on CUDA no host synchronisation), the product in float for float32 and
 * the 16-bit types (rounded once) and in double for float64, as mul_.
 * Every tensor is checked before any is written; each must be writable and
 * none may share memory with scalar. The tensors must be distinct (not
 * checked: one listed twice would be scaled twice on the CPU and race on
 * CUDA); clip_grad_norm_ passes each parameter once. Records nothing for
 * autograd. */
LT_API lt_status lt_foreach_mul_(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar);

#endif
