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

/* sgd_step(name, param, grad, buf|nil, init_buffer, lr, momentum, dampening,
 *          weight_decay, nesterov, maximize) */
static int optim_sgd_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = ltb_check_tensor(L, 3, name);
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

/* adam_step(name, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, step,
 *           lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, maximize) */
static int optim_adam_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = ltb_check_tensor(L, 3, name);
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
    {NULL, NULL},
};

void ltb_open_optim(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  luaL_newlib(L, optim_functions);
  lua_setfield(L, core_idx, "_optim");
}
