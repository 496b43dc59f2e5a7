/* Options tables of the functional nn ops (see nn_options.h). */
#include <limits.h>
#include <string.h>

#include "args.h"
#include "nn_options.h"
#include "tensor_handle.h"

int ltb_nn_options(lua_State *L, int idx, const char *op, const char *const *known) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_istable(L, idx))
    ltb_error(L, "%s: expected an options table, got %s", op, luaL_typename(L, idx));
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    bool found = false;
    for (int k = 0; key && known[k] && !found; k++) found = strcmp(key, known[k]) == 0;
    if (!found) ltb_unknown_option(L, op, key ? key : luaL_tolstring(L, -1, NULL), known, INT_MAX);
  }
  return idx;
}

/* Pushes opts[key]; false (nothing pushed) when absent. */
static bool get_option(lua_State *L, int opts, const char *key) {
  if (opts == 0) return false;
  if (lua_getfield(L, opts, key) != LUA_TNIL) return true;
  lua_pop(L, 1);
  return false;
}

bool ltb_nn_opt_bool(lua_State *L, int opts, const char *op, const char *key, bool *out) {
  if (!get_option(L, opts, key)) return false;
  if (!lua_isboolean(L, -1))
    ltb_error(L, "%s: %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
  *out = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return true;
}

bool ltb_nn_opt_number(lua_State *L, int opts, const char *op, const char *key, double *out) {
  if (!get_option(L, opts, key)) return false;
  if (lua_type(L, -1) != LUA_TNUMBER)
    ltb_error(L, "%s: %s must be a number, got %s", op, key, luaL_typename(L, -1));
  *out = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return true;
}

static int64_t to_integer(lua_State *L, int idx, const char *op, const char *what) {
  int is_int;
  lua_Integer v = lua_tointegerx(L, idx, &is_int);
  if (!is_int || lua_type(L, idx) != LUA_TNUMBER)
    ltb_error(L, "%s: %s must be an integer, got %s", op, what,
               lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
  return (int64_t)v;
}

bool ltb_nn_opt_integer(lua_State *L, int opts, const char *op, const char *key, int64_t *out) {
  if (!get_option(L, opts, key)) return false;
  *out = to_integer(L, -1, op, key);
  lua_pop(L, 1);
  return true;
}

/* The pair at idx into out. */
static void read_pair(lua_State *L, int idx, const char *op, const char *what, int64_t out[2]) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    out[0] = out[1] = to_integer(L, idx, op, what);
  } else if (lua_istable(L, idx) && luaL_len(L, idx) == 2) {
    for (int d = 0; d < 2; d++) {
      lua_rawgeti(L, idx, d + 1);
      out[d] = to_integer(L, -1, op, what);
      lua_pop(L, 1);
    }
  } else {
    ltb_error(L, "%s: %s must be an integer or a pair {h, w}, got %s", op, what,
               luaL_typename(L, idx));
  }
}

bool ltb_nn_opt_pair(lua_State *L, int opts, const char *op, const char *key, int64_t out[2]) {
  if (!get_option(L, opts, key)) return false;
  read_pair(L, -1, op, key, out);
  lua_pop(L, 1);
  return true;
}

void ltb_nn_check_pair(lua_State *L, int arg, const char *op, const char *what, int64_t out[2]) {
  read_pair(L, arg, op, what, out);
}

bool ltb_nn_opt_reduction(lua_State *L, int opts, const char *op, lt_reduction *out) {
  if (!get_option(L, opts, "reduction")) return false;
  const char *r = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (r && strcmp(r, "mean") == 0)
    *out = LT_REDUCTION_MEAN;
  else if (r && strcmp(r, "sum") == 0)
    *out = LT_REDUCTION_SUM;
  else if (r && strcmp(r, "none") == 0)
    *out = LT_REDUCTION_NONE;
  else
    ltb_error(L, "%s: reduction must be 'mean', 'sum' or 'none', got %s", op,
               r ? r : luaL_typename(L, -1));
  lua_pop(L, 1);
  return true;
}

bool ltb_nn_opt_tensor(lua_State *L, int opts, const char *op, const char *key,
                       lt_tensor **out) {
  if (!get_option(L, opts, key)) return false;
  ltb_handle *h = ltb_test_handle(L, -1);
  if (!h) ltb_error(L, "%s: %s must be a tensor, got %s", op, key, luaL_typename(L, -1));
  if (!h->tensor) ltb_error(L, "%s: attempt to use a freed tensor (option %s)", op, key);
  *out = h->tensor;
  lua_pop(L, 1);
  return true;
}
