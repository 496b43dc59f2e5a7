/* Reductions: sum, mean, prod over dims (one, a list, or all), max/min
 * (all, or over a dim with 1-based indices), argmax/argmin. */
#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

typedef lt_status (*reduce_fn)(const lt_tensor *, const int *, int, bool, lt_tensor **);

static bool opt_keepdim(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return false;
  if (!lua_isboolean(L, idx))
    ltb_error(L, "%s: keepdim must be a boolean, got %s", op, luaL_typename(L, idx));
  return lua_toboolean(L, idx);
}

/* t:sum() / t:sum(d, keepdim) / t:sum({d1, d2}, keepdim) */
static int reduce(lua_State *L, const char *op, reduce_fn fn) {
  lt_tensor *t = ltb_check_tensor(L, 1, op), *out = NULL;
  int dims[LT_MAX_DIMS], n = 0;
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, 2);
    if (len > LT_MAX_DIMS) return ltb_error(L, "%s: too many dimensions (%I)", op, len);
    for (int i = 0; i < (int)len; i++) {
      lua_rawgeti(L, 2, i + 1);
      lua_Integer d = ltb_check_integer(L, -1, op, "a dimension");
      dims[n] = ltb_wrap_dim(L, d, t->ndim, op);
      for (int j = 0; j < n; j++)
        if (dims[j] == dims[n]) return ltb_error(L, "%s: dimension %I appears twice", op, d);
      n++;
      lua_pop(L, 1);
    }
    if (n == 0) return ltb_error(L, "%s: the list of dimensions is empty", op);
  } else if (!lua_isnoneornil(L, 2)) {
    dims[n++] = ltb_check_dim(L, 2, t->ndim, op);
  }
  bool keepdim = opt_keepdim(L, 3, op);
  lua_settop(L, 3);
  lt_status st = fn(t, dims, n, keepdim, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_sum(lua_State *L) { return reduce(L, "sum", lt_sum); }
static int tensor_mean(lua_State *L) { return reduce(L, "mean", lt_mean); }
static int tensor_prod(lua_State *L) { return reduce(L, "prod", lt_prod); }

/* t:max() -> 0-dim; t:max(d, keepdim) -> values, indices (1-based);
 * t:max(other) -> elementwise maximum, as torch.max(a, b). */
static int extreme(lua_State *L, bool is_max) {
  const char *op = is_max ? "max" : "min";
  lt_tensor *t = ltb_check_tensor(L, 1, op), *out = NULL, *indices = NULL;
  if (lua_isnoneornil(L, 2)) {
    lt_status st = is_max ? lt_max_all(t, &out) : lt_min_all(t, &out);
    return ltb_push_result(L, st, out);
  }
  lt_tensor *other = ltb_test_tensor(L, 2);
  if (other) {
    lt_status st = lt_binary(is_max ? LT_OP_MAXIMUM : LT_OP_MINIMUM, t, other, &out);
    return ltb_push_result(L, st, out);
  }
  int dim = ltb_check_dim(L, 2, t->ndim, op);
  bool keepdim = opt_keepdim(L, 3, op);
  lua_settop(L, 3);
  ltb_handle *hv = ltb_new_handle(L);
  ltb_handle *hi = ltb_new_handle(L);
  lt_status st = is_max ? lt_max_dim(t, dim, keepdim, 1, &out, &indices)
                        : lt_min_dim(t, dim, keepdim, 1, &out, &indices);
  if (st != LT_OK) return ltb_raise(L, st);
  ltb_finish(L, hv, st, out);
  ltb_finish(L, hi, st, indices);
  return 2;
}

static int tensor_max(lua_State *L) { return extreme(L, true); }
static int tensor_min(lua_State *L) { return extreme(L, false); }

/* t:argmax() -> 1-based position in the flattened tensor; t:argmax(d, keepdim). */
static int arg_extreme(lua_State *L, bool is_max) {
  const char *op = is_max ? "argmax" : "argmin";
  lt_tensor *t = ltb_check_tensor(L, 1, op), *out = NULL;
  bool all = lua_isnoneornil(L, 2);
  int dim = all ? 0 : ltb_check_dim(L, 2, t->ndim, op);
  bool keepdim = opt_keepdim(L, 3, op);
  lua_settop(L, 3);
  lt_status st = is_max ? lt_argmax(t, dim, all, keepdim, 1, &out)
                        : lt_argmin(t, dim, all, keepdim, 1, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_argmax(lua_State *L) { return arg_extreme(L, true); }
static int tensor_argmin(lua_State *L) { return arg_extreme(L, false); }

void ltb_open_tensor_reduce(lua_State *L, int methods_idx, int core_idx) {
  static const luaL_Reg methods[] = {
      {"sum", tensor_sum}, {"mean", tensor_mean},     {"prod", tensor_prod},
      {"max", tensor_max}, {"min", tensor_min},       {"argmax", tensor_argmax},
      {"argmin", tensor_argmin}, {NULL, NULL},
  };
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  (void)core_idx;
}
