/* The optimizer kernels seen from Lua (lt.core._optim): one fused step per
 * parameter; lua/lt/optim keeps the state and the parameter groups. Arguments
 * are positional so that a step does no string work in the binding. */
#include "args.h"
#include "bindings.h"
#include "lt/optim.h"
#include "tensor_handle.h"

static lt_tensor *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : ltb_check_tensor(L, idx, op);
}

/* The gradient argument: a tensor, or `true` for the parameter's own .grad
 * read here in C. The optimizers pass `true`, so a step creates no Lua handle
 * for the gradient: zero_grad's `p.grad = nil` then frees its memory at once
 * instead of when the collector finds the handle. */
static lt_tensor *grad_arg(lua_State *L, int idx, const lt_tensor *param, const char *op) {
  if (lua_isboolean(L, idx)) {
    if (param->grad == NULL) luaL_error(L, "%s: the parameter has no gradient", op);
    return param->grad;
  }
  return ltb_check_tensor(L, idx, op);
}

/* has_grad(param): whether param.grad is set, without making a handle for it. */
static int optim_has_grad(lua_State *L) {
  lt_tensor *param = ltb_check_tensor(L, 1, "has_grad");
  lua_pushboolean(L, param->grad != NULL);
  return 1;
}

/* sgd_step(name, param, grad|true, buf|nil, init_buffer, lr, momentum, dampening,
 *          weight_decay, nesterov, maximize) */
static int optim_sgd_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = grad_arg(L, 3, param, name);
  lt_tensor *buf = opt_tensor(L, 4, name);
  bool init_buffer = lua_toboolean(L, 5);
  lt_sgd_options o;
  o.lr = ltb_check_number(L, 6, name, "lr");
  o.momentum = ltb_check_number(L, 7, name, "momentum");
  o.dampening = ltb_check_number(L, 8, name, "dampening");
  o.weight_decay = ltb_check_number(L, 9, name, "weight_decay");
  o.nesterov = lua_toboolean(L, 10);
  o.maximize = lua_toboolean(L, 11);
  lt_status st = lt_sgd_step_(name, param, grad, buf, init_buffer, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* adam_step(name, param, grad|true, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, step,
 *           lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, maximize) */
static int optim_adam_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = grad_arg(L, 3, param, name);
  lt_tensor *exp_avg = ltb_check_tensor(L, 4, name);
  lt_tensor *exp_avg_sq = ltb_check_tensor(L, 5, name);
  lt_tensor *max_exp_avg_sq = opt_tensor(L, 6, name);
  int64_t step = (int64_t)ltb_check_integer(L, 7, name, "step");
  lt_adam_options o;
  o.lr = ltb_check_number(L, 8, name, "lr");
  o.beta1 = ltb_check_number(L, 9, name, "beta1");
  o.beta2 = ltb_check_number(L, 10, name, "beta2");
  o.eps = ltb_check_number(L, 11, name, "eps");
  o.weight_decay = ltb_check_number(L, 12, name, "weight_decay");
  o.amsgrad = lua_toboolean(L, 13);
  o.decoupled_weight_decay = lua_toboolean(L, 14);
  o.maximize = lua_toboolean(L, 15);
  lt_status st = lt_adam_step_(name, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static const luaL_Reg optim_functions[] = {
    {"sgd_step", optim_sgd_step},
    {"adam_step", optim_adam_step},
    {"has_grad", optim_has_grad},
    {NULL, NULL},
};

void ltb_open_optim(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  luaL_newlib(L, optim_functions);
  lua_setfield(L, core_idx, "_optim");
}
