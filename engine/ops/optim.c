/* Optimizer steps: validation, the step's scalars and dispatch to the
 * device's optimizer kernels. Checks name the optimizer and the values. */
#include <math.h>

#include "core/optim_backend.h"
#include "ops/ops_internal.h"

static const lt_optim_backend *registered[2] = {&lt_cpu_optim_backend, NULL};

void lt_optim_backend_register(lt_device_type type, const lt_optim_backend *backend) {
  if ((unsigned)type < sizeof registered / sizeof registered[0]) registered[type] = backend;
}

const lt_optim_backend *lt_optim_backend_for(lt_device dev) {
  if ((unsigned)dev.type >= sizeof registered / sizeof registered[0]) return NULL;
  return registered[(unsigned)dev.type];
}

static lt_status optim_backend(const char *name, lt_device dev, const lt_optim_backend **out) {
  const lt_optim_backend *b = lt_optim_backend_for(dev);
  if (!b) {
    char dn[16];
    return lt_error(LT_ERR_DEVICE, "%s: no optimizer kernels for device %s", name,
                    lt_device_name(dev, dn));
  }
  *out = b;
  return LT_OK;
}

static bool same_shape(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static lt_status check_param(const char *name, const lt_tensor *param) {
  LT_TRY(ops_check_live(name, param));
  if (param->dtype != LT_FLOAT32 && param->dtype != LT_FLOAT64 && param->dtype != LT_FLOAT16 &&
      param->dtype != LT_BFLOAT16)
    return lt_error(LT_ERR_DTYPE, "%s: parameters must be floating point, got %s", name,
                    lt_dtype_name(param->dtype));
  if (!lt_is_contiguous(param))
    return lt_error(LT_ERR_ARG, "%s: the parameter must be contiguous", name);
  return LT_OK;
}

/* A tensor that must match the parameter exactly: the gradient or a state
 * buffer (what says which in messages). */
static lt_status check_like_param(const char *name, const char *what, const lt_tensor *param,
                                  const lt_tensor *t, bool need_contiguous) {
  LT_TRY(ops_check_live(name, t));
  if (!same_shape(param, t)) {
    char a[OPS_SHAPE_BUF], b[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: %s has shape %s but the parameter has shape %s", name, what,
                    ops_shape_str(a, t->shape, t->ndim),
                    ops_shape_str(b, param->shape, param->ndim));
  }
  if (t->dtype != param->dtype)
    return lt_error(LT_ERR_DTYPE, "%s: %s has dtype %s but the parameter has dtype %s", name,
                    what, lt_dtype_name(t->dtype), lt_dtype_name(param->dtype));
  if (!lt_device_eq(t->storage->device, param->storage->device)) {
    char a[16], b[16];
    return lt_error(LT_ERR_DEVICE, "%s: %s is on %s but the parameter is on %s", name, what,
                    lt_device_name(t->storage->device, a),
                    lt_device_name(param->storage->device, b));
  }
  if (need_contiguous && !lt_is_contiguous(t))
    return lt_error(LT_ERR_ARG, "%s: %s must be contiguous", name, what);
  return LT_OK;
}

static lt_status check_lr(const char *name, double lr) {
  if (!(lr >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid learning rate: %g", name, lr);
  return LT_OK;
}

static lt_status check_weight_decay(const char *name, double wd) {
  if (!(wd >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid weight_decay value: %g", name, wd);
  return LT_OK;
}

static lt_status check_sgd_options(const char *name, const lt_sgd_options *o) {
  LT_TRY(check_lr(name, o->lr));
  LT_TRY(check_weight_decay(name, o->weight_decay));
  if (!(o->momentum >= 0.0))
    return lt_error(LT_ERR_ARG, "%s: invalid momentum value: %g", name, o->momentum);
  if (!isfinite(o->dampening))
    return lt_error(LT_ERR_ARG, "%s: invalid dampening value: %g", name, o->dampening);
  if (o->nesterov && (o->momentum <= 0.0 || o->dampening != 0.0))
    return lt_error(LT_ERR_ARG,
                    "%s: nesterov momentum requires a momentum and zero dampening "
                    "(got momentum %g, dampening %g)",
                    name, o->momentum, o->dampening);
  return LT_OK;
}

/* The gradient as the kernels want it: contiguous (a copy when it is not). */
static lt_status contiguous_grad(const lt_tensor *grad, lt_tensor **out) {
  return lt_contiguous(grad, out);
}

lt_status lt_sgd_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                       lt_tensor *momentum_buffer, bool init_buffer, const lt_sgd_options *o) {
  if (!name) name = "SGD";
  LT_TRY(check_sgd_options(name, o));
  LT_TRY(check_param(name, param));
  LT_TRY(check_like_param(name, "the gradient", param, grad, false));
  if (o->momentum != 0.0 && !momentum_buffer)
    return lt_error(LT_ERR_ARG, "%s: momentum %g needs a momentum buffer", name, o->momentum);
  if (o->momentum == 0.0) momentum_buffer = NULL;
  if (momentum_buffer)
    LT_TRY(check_like_param(name, "the momentum buffer", param, momentum_buffer, true));
  const lt_optim_backend *be = NULL;
  LT_TRY(optim_backend(name, param->storage->device, &be));
  lt_tensor *g;
  LT_TRY(contiguous_grad(grad, &g));
  lt_status st = be->sgd(param, g, momentum_buffer, init_buffer, o);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  ops_bump_version(param, "sgd_step_");
  if (momentum_buffer) ops_bump_version(momentum_buffer, "sgd_step_");
  return LT_OK;
}

static lt_status check_adam_options(const char *name, const lt_adam_options *o, int64_t step) {
  LT_TRY(check_lr(name, o->lr));
  LT_TRY(check_weight_decay(name, o->weight_decay));
  if (!(o->eps >= 0.0)) return lt_error(LT_ERR_ARG, "%s: invalid epsilon value: %g", name, o->eps);
  if (!(o->beta1 >= 0.0 && o->beta1 < 1.0))
    return lt_error(LT_ERR_ARG, "%s: invalid beta parameter at index 1: %g", name, o->beta1);
  if (!(o->beta2 >= 0.0 && o->beta2 < 1.0))
    return lt_error(LT_ERR_ARG, "%s: invalid beta parameter at index 2: %g", name, o->beta2);
  if (step < 1)
    return lt_error(LT_ERR_ARG, "%s: invalid step count %lld (steps count from 1)", name,
                    (long long)step);
  return LT_OK;
}

lt_status lt_adam_step_(const char *name, lt_tensor *param, const lt_tensor *grad,
                        lt_tensor *exp_avg, lt_tensor *exp_avg_sq, lt_tensor *max_exp_avg_sq,
                        int64_t step, const lt_adam_options *o) {
  if (!name) name = o->decoupled_weight_decay ? "AdamW" : "Adam";
  LT_TRY(check_adam_options(name, o, step));
  LT_TRY(check_param(name, param));
  LT_TRY(check_like_param(name, "the gradient", param, grad, false));
  LT_TRY(check_like_param(name, "exp_avg", param, exp_avg, true));
  LT_TRY(check_like_param(name, "exp_avg_sq", param, exp_avg_sq, true));
  if (o->amsgrad) {
    if (!max_exp_avg_sq)
      return lt_error(LT_ERR_ARG, "%s: amsgrad needs a max_exp_avg_sq buffer", name);
    LT_TRY(check_like_param(name, "max_exp_avg_sq", param, max_exp_avg_sq, true));
  } else {
    max_exp_avg_sq = NULL;
  }
  /* As torch.optim.Adam: Python floats (double) for the bias corrections. */
  lt_adam_scalars s;
  s.beta1 = o->beta1;
  s.beta2 = o->beta2;
  s.eps = o->eps;
  s.weight_decay = o->decoupled_weight_decay ? 0.0 : o->weight_decay;
  s.param_scale = o->decoupled_weight_decay ? 1.0 - o->lr * o->weight_decay : 1.0;
  s.step_size = o->lr / (1.0 - pow(o->beta1, (double)step));
  s.bias_correction2_sqrt = sqrt(1.0 - pow(o->beta2, (double)step));
  s.amsgrad = o->amsgrad;
  s.maximize = o->maximize;
  const lt_optim_backend *be = NULL;
  LT_TRY(optim_backend(name, param->storage->device, &be));
  lt_tensor *g;
  LT_TRY(contiguous_grad(grad, &g));
  lt_status st = be->adam(param, g, exp_avg, exp_avg_sq, max_exp_avg_sq, &s);
  lt_tensor_release(g);
  if (st != LT_OK) return st;
  ops_bump_version(param, "adam_step_");
  ops_bump_version(exp_avg, "adam_step_");
  ops_bump_version(exp_avg_sq, "adam_step_");
  if (max_exp_avg_sq) ops_bump_version(max_exp_avg_sq, "adam_step_");
  return LT_OK;
}
