/* Autograd seen from Lua: t:backward, grad mode (lt.no_grad and
 * lt.enable_grad as a call or as a to-be-closed guard, lt.is_grad_enabled,
 * lt.set_grad_enabled) and the tensor's grad_fn name. lt.autograd.Function
 * has its own file (autograd_function.c). */
#include <string.h>

#include "args.h"
#include "autograd.h"
#include "bindings.h"
#include "tensor_handle.h"

/* ---- t:backward(grad, {retain_graph=}) ---- */

static bool read_retain_graph(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return false;
  if (!lua_istable(L, idx))
    ltb_error(L, "backward: expected an options table, got %s", luaL_typename(L, idx));
  bool retain = false;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    if (!key || strcmp(key, "retain_graph") != 0)
      ltb_error(L, "backward: unknown option '%s' (expected retain_graph)",
                 key ? key : luaL_typename(L, -2));
    if (!lua_isboolean(L, -1))
      ltb_error(L, "backward: retain_graph must be a boolean, got %s", luaL_typename(L, -1));
    retain = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  return retain;
}

static int tensor_backward(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "backward");
  /* t:backward(opts) with no grad is accepted too: tensors are never tables. */
  int opts = 3;
  lt_tensor *grad = NULL;
  if (lua_istable(L, 2) && lua_isnone(L, 3)) {
    opts = 2;
  } else if (!lua_isnil(L, 2) && !lua_isnone(L, 2)) {
    grad = ltb_test_tensor(L, 2);
    if (!grad) return ltb_error(L, "backward: expected a tensor or nil as grad, got %s",
                                 luaL_typename(L, 2));
  }
  bool retain = read_retain_graph(L, opts);
  lt_status st = ltb_run_backward(L, t, grad, retain);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- grad mode ---- */

#define GRAD_GUARD_NAME "lt.GradModeGuard"

/* What a guard restores, and whether it already has. */
typedef struct grad_guard {
  bool previous;
  bool closed;
} grad_guard;

static int guard_close(lua_State *L) {
  grad_guard *g = luaL_checkudata(L, 1, GRAD_GUARD_NAME);
  if (!g->closed) {
    g->closed = true;
    lt_set_grad_enabled(g->previous);
  }
  return 0;
}

static int guard_tostring(lua_State *L) {
  grad_guard *g = luaL_checkudata(L, 1, GRAD_GUARD_NAME);
  lua_pushfstring(L, "grad mode guard (%s)", g->closed ? "closed" : "open");
  return 1;
}

/* lt.no_grad(fn, ...) / lt.enable_grad(fn, ...): fn's results, with grad
 * mode set for the call and restored after it, also when fn fails.
 * lt.no_grad() / lt.enable_grad(): a guard for `local g <close> = ...`. */
static int grad_scope(lua_State *L, bool enabled, const char *name) {
  if (lua_isnoneornil(L, 1)) {
    grad_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->closed = false;
    luaL_setmetatable(L, GRAD_GUARD_NAME);
    g->previous = lt_set_grad_enabled(enabled);
    return 1;
  }
  const int type = lua_type(L, 1);
  if (type != LUA_TFUNCTION && !luaL_getmetafield(L, 1, "__call"))
    return ltb_error(L, "%s: expected a function (or nothing, for a guard), got %s", name,
                      luaL_typename(L, 1));
  if (type != LUA_TFUNCTION) lua_pop(L, 1); /* the __call field */
  const bool previous = lt_set_grad_enabled(enabled);
  const int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  lt_set_grad_enabled(previous);
  if (status != LUA_OK) return lua_error(L); /* the same error value, rethrown */
  return lua_gettop(L);
}

static int lt_no_grad_fn(lua_State *L) { return grad_scope(L, false, "no_grad"); }
static int lt_enable_grad_fn(lua_State *L) { return grad_scope(L, true, "enable_grad"); }

static int lt_is_grad_enabled_fn(lua_State *L) {
  lua_pushboolean(L, lt_is_grad_enabled());
  return 1;
}

/* Returns the previous mode, so that `local prev = lt.set_grad_enabled(false)`
 * can be undone. */
static int lt_set_grad_enabled_fn(lua_State *L) {
  if (!lua_isboolean(L, 1))
    return ltb_error(L, "set_grad_enabled: expected a boolean, got %s", luaL_typename(L, 1));
  lua_pushboolean(L, lt_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

/* ---- registration ---- */

static const luaL_Reg autograd_methods[] = {
    {"backward", tensor_backward},
    {NULL, NULL},
};

static const luaL_Reg autograd_functions[] = {
    {"no_grad", lt_no_grad_fn},
    {"enable_grad", lt_enable_grad_fn},
    {"is_grad_enabled", lt_is_grad_enabled_fn},
    {"set_grad_enabled", lt_set_grad_enabled_fn},
    {NULL, NULL},
};

void ltb_open_autograd(lua_State *L, int methods_idx, int core_idx) {
  methods_idx = lua_absindex(L, methods_idx);
  core_idx = lua_absindex(L, core_idx);
  ltb_register_guard(L, GRAD_GUARD_NAME, guard_close, guard_tostring);
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, autograd_methods, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, autograd_functions, 0);
  lua_pop(L, 1);
  ltb_open_autograd_function(L, core_idx);
  ltb_open_grad_hooks(L, core_idx);
}
