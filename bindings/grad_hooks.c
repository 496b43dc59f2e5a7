/* The C half of t:register_post_accumulate_grad_hook (lua/lt/grad_hooks.lua
 * keeps the Lua functions): core._grad_hook_add(t) registers an engine hook
 * whose user data is only its id; when it fires, the trampoline calls the
 * dispatcher that lua/lt/grad_hooks.lua installed, with that id, on the
 * thread of the running t:backward. The engine holds no Lua reference, so a
 * tensor with hooks is collected like any other, and a Lua error in a hook
 * comes back as the backward's error (raised at the backward's line). */
#include <stdint.h>
#include <stdlib.h>

#include "args.h"
#include "autograd.h"
#include "tensor_handle.h"

static const char dispatcher_key = 'd'; /* registry[&dispatcher_key]: dispatcher(id) */

typedef struct hook_ud {
  uint64_t id;
} hook_ud;

/* Runs protected: (id). */
static int call_dispatcher(lua_State *L) {
  lua_Integer id = lua_tointeger(L, 1);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &dispatcher_key) != LUA_TFUNCTION) return 0;
  lua_pushinteger(L, id);
  lua_call(L, 1, 0);
  return 0;
}

static lt_status run_hook(void *ud, lt_tensor *leaf) {
  (void)leaf; /* the dispatcher knows its tensor's handle */
  lua_State *L = ltb_backward_thread();
  if (!L) return LT_OK; /* a backward started outside Lua: no Lua hook can run */
  if (!lua_checkstack(L, 4))
    return lt_error(LT_ERR_OOM, "backward: no Lua stack left for a post accumulate grad hook");
  const int top = lua_gettop(L);
  lua_pushcfunction(L, call_dispatcher);
  lua_pushinteger(L, (lua_Integer)((hook_ud *)ud)->id);
  lt_status st = LT_OK;
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    st = lt_error(LT_ERR_AUTOGRAD, "backward: post accumulate grad hook: %s",
                  msg ? msg : "(the error object is not a string)");
  }
  lua_settop(L, top);
  return st;
}

/* core._grad_hook_add(t) -> id */
static int grad_hook_add(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "register_post_accumulate_grad_hook");
  hook_ud *ud = malloc(sizeof *ud);
  if (!ud) return ltb_error(L, "register_post_accumulate_grad_hook: out of host memory");
  uint64_t id = 0;
  lt_status st = lt_autograd_add_post_accumulate_hook(t, run_hook, ud, free, &id);
  if (st != LT_OK) return ltb_raise(L, st); /* ud was freed */
  ud->id = id;
  lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

/* core._grad_hook_remove(t, id) -> whether it was there (false for a freed t) */
static int grad_hook_remove(lua_State *L) {
  ltb_handle *h = ltb_test_handle(L, 1);
  if (!h) return ltb_error(L, "remove: expected a tensor, got %s", luaL_typename(L, 1));
  lua_Integer id = ltb_check_integer(L, 2, "remove", "a hook id");
  lua_pushboolean(L, h->tensor && lt_autograd_remove_post_accumulate_hook(h->tensor, (uint64_t)id));
  return 1;
}

/* core._grad_hook_dispatcher(fn) */
static int grad_hook_dispatcher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &dispatcher_key);
  return 0;
}

/* core._graph_reaches(outputs, params) -> {bool...}: whether backward from
 * the outputs would reach each parameter (find_unused_parameters). */
static int graph_reaches(lua_State *L) {
  static const char op[] = "_graph_reaches";
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  const lua_Integer nroots = luaL_len(L, 1), nleaves = luaL_len(L, 2);
  if (nroots > INT32_MAX || nleaves > INT32_MAX) return ltb_error(L, "%s: too many tensors", op);
  /* Scratch in a userdata: a Lua error cannot leak it. */
  lt_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(nroots + nleaves + 1), 0);
  bool *reached = lua_newuserdatauv(L, sizeof *reached * (size_t)(nleaves + 1), 0);
  for (lua_Integer i = 1; i <= nroots; i++) {
    lua_rawgeti(L, 1, i);
    ts[i - 1] = ltb_list_tensor(L, op, i);
    lua_pop(L, 1);
  }
  for (lua_Integer i = 1; i <= nleaves; i++) {
    lua_rawgeti(L, 2, i);
    ts[nroots + i - 1] = ltb_list_tensor(L, op, i);
    lua_pop(L, 1);
  }
  lt_status st = lt_autograd_reaches(ts, (int)nroots, ts + nroots, (int)nleaves, reached);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_createtable(L, (int)nleaves, 0);
  for (lua_Integer i = 1; i <= nleaves; i++) {
    lua_pushboolean(L, reached[i - 1]);
    lua_rawseti(L, -2, i);
  }
  return 1;
}

/* core._grad_is(p, t): whether p.grad is the tensor t holds (not a copy):
 * DistributedDataParallel checks that a gradient still is its bucket's view. */
static int grad_is(lua_State *L) {
  lt_tensor *p = ltb_check_tensor(L, 1, "_grad_is");
  lt_tensor *t = ltb_check_tensor(L, 2, "_grad_is");
  lua_pushboolean(L, p->grad != NULL && p->grad == t);
  return 1;
}

static const luaL_Reg grad_hook_functions[] = {
    {"_grad_is", grad_is},
    {"_graph_reaches", graph_reaches},
    {"_grad_hook_add", grad_hook_add},
    {"_grad_hook_remove", grad_hook_remove},
    {"_grad_hook_dispatcher", grad_hook_dispatcher},
    {NULL, NULL},
};

void ltb_open_grad_hooks(lua_State *L, int core_idx) {
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, grad_hook_functions, 0);
  lua_pop(L, 1);
}
