/* t:sort, t:argsort, t:topk, t:gather, t:scatter(_), t:scatter_add(_) and
 * t:multinomial, also as lt.sort, lt.topk, ... with the tensor first.
 * PyTorch's signatures with Lua's conventions: 1-based dims (default -1,
 * the last) and index values, keyword arguments in an options table. */
#include "args.h"
#include "bindings.h"
#include "nn_options.h"
#include "tensor_handle.h"

#include "lt/sort.h"

/* A dim at arg (none or nil: the last; a table there is no dim but the
 * options). Returns where the options (or PyTorch's positional flags) are. */
static int dim_then_options(lua_State *L, int arg, const lt_tensor *t, const char *op, int *dim) {
  if (lua_istable(L, arg) || lua_isnoneornil(L, arg)) {
    *dim = ltb_wrap_dim(L, -1, t->ndim, op);
    return lua_istable(L, arg) ? arg : arg + 1;
  }
  *dim = ltb_check_dim(L, arg, t->ndim, op);
  return arg + 1;
}

/* ---- sort(t, dim = -1, {descending = false, stable = false}) ----
 * Also sort(t, dim, descending), PyTorch's positional form. lt's sort is
 * always stable, so stable = false gives the stable order too. */
static bool sort_options(lua_State *L, int arg, const char *op) {
  bool descending = false;
  if (lua_isboolean(L, arg)) return lua_toboolean(L, arg);
  static const char *const known[] = {"descending", "stable", NULL};
  int opts = ltb_nn_options(L, arg, op, known);
  ltb_nn_opt_bool(L, opts, op, "descending", &descending);
  bool stable = true;
  ltb_nn_opt_bool(L, opts, op, "stable", &stable); /* checked to be a boolean */
  return descending;
}

static int sort_fn(lua_State *L) {
  const char *op = "sort";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  int dim;
  const int arg = dim_then_options(L, 2, t, op, &dim);
  const bool descending = sort_options(L, arg, op);
  lua_settop(L, arg);
  ltb_handle *hv = ltb_new_handle(L), *hi = ltb_new_handle(L);
  lt_tensor *v = NULL, *i = NULL;
  lt_status st = lt_sort(t, dim, descending, 1, &v, &i);
  ltb_finish(L, hv, st, v);
  ltb_finish(L, hi, st, i);
  return 2;
}

static int argsort_fn(lua_State *L) {
  const char *op = "argsort";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  int dim;
  const int arg = dim_then_options(L, 2, t, op, &dim);
  const bool descending = sort_options(L, arg, op);
  lua_settop(L, arg);
  ltb_handle *h = ltb_new_handle(L);
  lt_tensor *i = NULL;
  lt_status st = lt_sort(t, dim, descending, 1, NULL, &i);
  return ltb_finish(L, h, st, i);
}

/* ---- topk(t, k, dim = -1, {largest = true, sorted = true}) ----
 * Also topk(t, k, dim, largest, sorted). The result is always sorted. */
static int topk_fn(lua_State *L) {
  const char *op = "topk";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  const lua_Integer k = ltb_check_integer(L, 2, op, "k");
  int dim;
  const int arg = dim_then_options(L, 3, t, op, &dim);
  bool largest = true, sorted = true;
  if (lua_isboolean(L, arg)) {
    largest = lua_toboolean(L, arg);
    if (!lua_isnoneornil(L, arg + 1) && !lua_isboolean(L, arg + 1))
      return ltb_error(L, "%s: sorted must be a boolean, got %s", op, luaL_typename(L, arg + 1));
  } else {
    static const char *const known[] = {"largest", "sorted", NULL};
    int opts = ltb_nn_options(L, arg, op, known);
    ltb_nn_opt_bool(L, opts, op, "largest", &largest);
    ltb_nn_opt_bool(L, opts, op, "sorted", &sorted);
  }
  lua_settop(L, arg + 1);
  ltb_handle *hv = ltb_new_handle(L), *hi = ltb_new_handle(L);
  lt_tensor *v = NULL, *i = NULL;
  lt_status st = lt_topk(t, (int64_t)k, dim, largest, 1, &v, &i);
  ltb_finish(L, hv, st, v);
  ltb_finish(L, hi, st, i);
  return 2;
}

/* ---- gather(t, dim, index) ---- */

static int gather_fn(lua_State *L) {
  const char *op = "gather";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  const int dim = ltb_check_dim(L, 2, t->ndim, op);
  lt_tensor *index = ltb_check_tensor(L, 3, op);
  lua_settop(L, 3);
  lt_tensor *out = NULL;
  lt_status st = lt_gather(t, dim, index, 1, &out);
  return ltb_push_result(L, st, out);
}

/* ---- scatter(t, dim, index, src | number), scatter_add(t, dim, index, src)
 * and their in-place forms (which return t) ---- */

static int scatter_call(lua_State *L, bool add, bool in_place) {
  const char *op = add ? (in_place ? "scatter_add_" : "scatter_add")
                       : (in_place ? "scatter_" : "scatter");
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  const int dim = ltb_check_dim(L, 2, t->ndim, op);
  lt_tensor *index = ltb_check_tensor(L, 3, op);
  lt_tensor *src = ltb_test_tensor(L, 4);
  double value = 0;
  if (!src) {
    if (add || (lua_type(L, 4) != LUA_TNUMBER && !lua_isboolean(L, 4)))
      return ltb_error(L, "%s: expected a tensor%s as src, got %s", op, add ? "" : " or a number",
                       luaL_typename(L, 4));
    value = lua_isboolean(L, 4) ? (double)lua_toboolean(L, 4) : lua_tonumber(L, 4);
  }
  lua_settop(L, 4);
  if (in_place) {
    lt_status st = lt_scatter_(t, dim, index, 1, src, value, add);
    if (st != LT_OK) return ltb_raise(L, st);
    lua_settop(L, 1);
    return 1;
  }
  lt_tensor *out = NULL;
  lt_status st = lt_scatter(t, dim, index, 1, src, value, add, &out);
  return ltb_push_result(L, st, out);
}

static int scatter_fn(lua_State *L) { return scatter_call(L, false, false); }
static int scatter_inplace_fn(lua_State *L) { return scatter_call(L, false, true); }
static int scatter_add_fn(lua_State *L) { return scatter_call(L, true, false); }
static int scatter_add_inplace_fn(lua_State *L) { return scatter_call(L, true, true); }

/* ---- multinomial(probs, num_samples, {replacement = false, seed = nil}) ----
 * With a seed, from a private generator with that seed (the global one is
 * untouched), as lt.randperm's. */
static int multinomial_fn(lua_State *L) {
  const char *op = "multinomial";
  lt_tensor *probs = ltb_check_tensor(L, 1, op);
  const lua_Integer n = ltb_check_integer(L, 2, op, "num_samples");
  static const char *const known[] = {"replacement", "seed", NULL};
  int opts = ltb_nn_options(L, 3, op, known);
  bool replacement = false;
  ltb_nn_opt_bool(L, opts, op, "replacement", &replacement);
  int64_t seed = 0;
  lt_rng_state gen = {0, 0};
  const bool seeded = ltb_nn_opt_integer(L, opts, op, "seed", &seed);
  gen.seed = (uint64_t)seed;
  lua_settop(L, 3);
  lt_tensor *out = NULL;
  lt_status st = lt_multinomial(probs, (int64_t)n, replacement, 1, seeded ? &gen : NULL, &out);
  return ltb_push_result(L, st, out);
}

void ltb_open_tensor_sort(lua_State *L, int methods_idx, int core_idx) {
  static const luaL_Reg functions[] = {
      {"sort", sort_fn},       {"argsort", argsort_fn},         {"topk", topk_fn},
      {"gather", gather_fn},   {"scatter", scatter_fn},         {"scatter_add", scatter_add_fn},
      {"multinomial", multinomial_fn}, {NULL, NULL},
  };
  static const luaL_Reg in_place[] = {
      {"scatter_", scatter_inplace_fn}, {"scatter_add_", scatter_add_inplace_fn}, {NULL, NULL},
  };
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, functions, 0);
  luaL_setfuncs(L, in_place, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, core_idx); /* torch.sort(t, ...) and friends: lt.sort(t, ...) */
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
}
