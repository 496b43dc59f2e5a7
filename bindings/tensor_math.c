/* Elementwise math, comparisons, in-place ops, filling, matmul, joining and
 * padding.
 * One closure per op code (the code in an upvalue) instead of one C function
 * per op: the dispatch is the engine's, the binding only unpacks operands. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "nn_options.h"
#include "tensor_handle.h"

/* A Lua number (or boolean, as 0/1) taking part in an op as a scalar. */
static bool to_scalar(lua_State *L, int idx, double *v, bool *is_integer) {
  switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
      *is_integer = lua_isinteger(L, idx);
      *v = lua_tonumber(L, idx);
      return true;
    case LUA_TBOOLEAN:
      *is_integer = true;
      *v = lua_toboolean(L, idx);
      return true;
    default: return false;
  }
}

static int operand_error(lua_State *L, int idx, const char *op) {
  return ltb_error(L, "%s: expected a tensor or a number, got %s", op, luaL_typename(L, idx));
}

/* a op b, with a number on either side (also the arithmetic metamethods). */
static int binary_call(lua_State *L) {
  lt_binary_op op = (lt_binary_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = lt_binary_op_name(op);
  lt_tensor *a = ltb_test_tensor(L, 1), *b = ltb_test_tensor(L, 2), *out = NULL;
  double s;
  bool is_int;
  lt_status st;
  if (a && b) {
    st = lt_binary(op, a, b, &out);
    return ltb_push_result(L, st, out);
  }
  if (a) {
    if (!to_scalar(L, 2, &s, &is_int)) return operand_error(L, 2, name);
    st = lt_binary_scalar(op, a, s, is_int, false, &out);
    return ltb_push_result(L, st, out);
  }
  if (b) {
    if (!to_scalar(L, 1, &s, &is_int)) return operand_error(L, 1, name);
    st = lt_binary_scalar(op, b, s, is_int, true, &out);
    return ltb_push_result(L, st, out);
  }
  ltb_check_tensor(L, 1, name); /* raises: neither operand is a tensor */
  return 0;
}

static int binary_inplace_call(lua_State *L) {
  lt_binary_op op = (lt_binary_op)lua_tointeger(L, lua_upvalueindex(1));
  const char *name = lt_binary_op_inplace_name(op);
  lt_tensor *a = ltb_check_tensor(L, 1, name), *b = ltb_test_tensor(L, 2);
  double s;
  bool is_int;
  lt_status st;
  if (b) st = lt_binary_(op, a, b);
  else if (to_scalar(L, 2, &s, &is_int)) st = lt_binary_scalar_(op, a, s, is_int);
  else return operand_error(L, 2, name);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_settop(L, 1);
  return 1;
}

static int unary_call(lua_State *L) {
  lt_unary_op op = (lt_unary_op)lua_tointeger(L, lua_upvalueindex(1));
  lt_tensor *a = ltb_check_tensor(L, 1, lt_unary_op_name(op)), *out = NULL;
  const lt_status st = lt_unary(op, a, &out);
  return ltb_push_result(L, st, out);
}

static int unary_inplace_call(lua_State *L) {
  lt_unary_op op = (lt_unary_op)lua_tointeger(L, lua_upvalueindex(1));
  lt_tensor *a = ltb_check_tensor(L, 1, lt_unary_op_inplace_name(op));
  lt_status st = lt_unary_(op, a);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_settop(L, 1);
  return 1;
}

void ltb_push_binary_function(lua_State *L, lt_binary_op op) {
  lua_pushinteger(L, op);
  lua_pushcclosure(L, binary_call, 1);
}

void ltb_push_unary_function(lua_State *L, lt_unary_op op) {
  lua_pushinteger(L, op);
  lua_pushcclosure(L, unary_call, 1);
}

/* ---- clamp ---- */

static void read_bounds(lua_State *L, const char *op, bool *has_lo, double *lo, bool *has_hi,
                        double *hi) {
  *has_lo = !lua_isnoneornil(L, 2);
  *has_hi = !lua_isnoneornil(L, 3);
  if (!*has_lo && !*has_hi) ltb_error(L, "%s: at least one of lo and hi must be given", op);
  *lo = *has_lo ? ltb_check_number(L, 2, op, "lo") : 0.0;
  *hi = *has_hi ? ltb_check_number(L, 3, op, "hi") : 0.0;
}

static int tensor_clamp(lua_State *L) {
  lt_tensor *a = ltb_check_tensor(L, 1, "clamp"), *out = NULL;
  bool has_lo, has_hi;
  double lo, hi;
  read_bounds(L, "clamp", &has_lo, &lo, &has_hi, &hi);
  lua_settop(L, 3);
  lt_status st = lt_clamp(a, has_lo, lo, has_hi, hi, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_clamp_(lua_State *L) {
  lt_tensor *a = ltb_check_tensor(L, 1, "clamp_");
  bool has_lo, has_hi;
  double lo, hi;
  read_bounds(L, "clamp_", &has_lo, &lo, &has_hi, &hi);
  lt_status st = lt_clamp_(a, has_lo, lo, has_hi, hi);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_settop(L, 1);
  return 1;
}

/* ---- filling ---- */

static int finish_inplace(lua_State *L, lt_status st) {
  if (st != LT_OK) return ltb_raise(L, st);
  lua_settop(L, 1);
  return 1;
}

static int tensor_fill_(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "fill_");
  double v;
  bool is_int;
  if (!to_scalar(L, 2, &v, &is_int))
    return ltb_error(L, "fill_: expected a number, got %s", luaL_typename(L, 2));
  return finish_inplace(L, lt_fill_(t, v));
}

static int tensor_zero_(lua_State *L) {
  return finish_inplace(L, lt_zero_(ltb_check_tensor(L, 1, "zero_")));
}

static int tensor_copy_(lua_State *L) {
  lt_tensor *dst = ltb_check_tensor(L, 1, "copy_");
  lt_tensor *src = ltb_check_tensor(L, 2, "copy_");
  return finish_inplace(L, lt_copy_(dst, src));
}

static double opt_number(lua_State *L, int idx, const char *op, const char *what, double def) {
  return lua_isnoneornil(L, idx) ? def : ltb_check_number(L, idx, op, what);
}

static int tensor_uniform_(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "uniform_");
  double lo = opt_number(L, 2, "uniform_", "lo", 0.0), hi = opt_number(L, 3, "uniform_", "hi", 1.0);
  return finish_inplace(L, lt_uniform_(t, lo, hi));
}

static int tensor_normal_(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "normal_");
  double mean = opt_number(L, 2, "normal_", "mean", 0.0);
  double std = opt_number(L, 3, "normal_", "std", 1.0);
  return finish_inplace(L, lt_normal_(t, mean, std));
}

static int tensor_bernoulli_(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "bernoulli_");
  return finish_inplace(L, lt_bernoulli_(t, opt_number(L, 2, "bernoulli_", "p", 0.5)));
}

/* ---- where, matmul ---- */

/* where(c, a, b): a and b may be numbers; they become 0-dim tensors of the
 * other operand's dtype (a number's own kind when both are numbers), held by
 * handles on the stack so that an error cannot leak them. */
static lt_tensor *where_operand(lua_State *L, int idx, const lt_tensor *other,
                                const lt_tensor *cond) {
  lt_tensor *t = ltb_test_tensor(L, idx);
  if (t) return t;
  double v = 0.0;
  bool is_int = false;
  if (!to_scalar(L, idx, &v, &is_int)) operand_error(L, idx, "where");
  /* As PyTorch's wrapped scalars: the tensor's dtype, unless a float meets
   * an integer tensor. */
  lt_dtype dt = is_int ? LT_INT64 : LT_FLOAT32;
  if (other && (is_int || lt_dtype_is_floating(other->dtype))) dt = other->dtype;
  ltb_handle *h = ltb_new_handle(L);
  lt_status st = lt_full(NULL, 0, v, dt, cond->storage->device, &t);
  if (st != LT_OK) ltb_raise(L, st);
  h->tensor = t;
  return t;
}

static int lt_where_fn(lua_State *L) {
  lt_tensor *c = ltb_check_tensor(L, 1, "where");
  lua_settop(L, 3);
  lt_tensor *a = where_operand(L, 2, ltb_test_tensor(L, 3), c);
  lt_tensor *b = where_operand(L, 3, ltb_test_tensor(L, 2), c);
  lt_tensor *out = NULL;
  lt_status st = lt_where(c, a, b, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_matmul(lua_State *L) {
  lt_tensor *a = ltb_check_tensor(L, 1, "matmul"), *b = ltb_check_tensor(L, 2, "matmul");
  lt_tensor *out = NULL;
  lt_status st = lt_matmul(a, b, &out);
  return ltb_push_result(L, st, out);
}

/* ---- cat, stack ---- */

/* The tensors of the list at idx, in a buffer that lives on the Lua stack. */
static lt_tensor **list_tensors(lua_State *L, int idx, const char *op, int *n) {
  if (!lua_istable(L, idx))
    ltb_error(L, "%s: expected a list of tensors, got %s", op, luaL_typename(L, idx));
  lua_Unsigned len = lua_rawlen(L, idx);
  if (len == 0) ltb_error(L, "%s: expected a non-empty list of tensors", op);
  if (len > 1u << 24) ltb_error(L, "%s: too many tensors (%I)", op, (lua_Integer)len);
  lt_tensor **ts = lua_newuserdatauv(L, (size_t)len * sizeof *ts, 0);
  for (lua_Unsigned i = 0; i < len; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    ts[i] = ltb_list_tensor(L, op, (lua_Integer)i + 1);
    lua_pop(L, 1);
  }
  *n = (int)len;
  return ts;
}

static int join(lua_State *L, bool stack) {
  const char *op = stack ? "stack" : "cat";
  int n;
  lua_settop(L, 2); /* the list's buffer goes above the arguments */
  lt_tensor **ts = list_tensors(L, 1, op, &n);
  int ndim = ts[0]->ndim + (stack ? 1 : 0);
  int dim = lua_isnoneornil(L, 2) ? 0 : ltb_check_dim(L, 2, ndim, op);
  lt_tensor *out = NULL;
  lt_status st = stack ? lt_stack(ts, n, dim, &out) : lt_cat(ts, n, dim, &out);
  return ltb_push_result(L, st, out);
}

static int lt_cat_fn(lua_State *L) { return join(L, false); }
static int lt_stack_fn(lua_State *L) { return join(L, true); }

/* ---- padding ---- */

static const char *const pad_keys[] = {"mode", "value", NULL};

/* F.pad(x, pad, {mode="constant", value=0}): pad is a flat list of
 * (before, after) pairs from the last dim backwards, as torch's F.pad; a
 * negative value crops. lt.nn.functional takes this function as it is. */
static int lt_pad_fn(lua_State *L) {
  const char *op = "pad";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL;
  if (!lua_istable(L, 2))
    return ltb_error(L, "%s: expected a list of paddings {before, after, ...}, got %s", op,
                      luaL_typename(L, 2));
  const lua_Unsigned n = lua_rawlen(L, 2);
  /* The engine says the same of any list longer than 2 per dim; one longer
   * than it could be for any tensor does not fit the buffer. */
  if (n > 2 * LT_MAX_DIMS)
    return ltb_error(L,
                      "%s: the padding list has %I values, more than 2 per dimension of a "
                      "%d-dimensional tensor",
                      op, (lua_Integer)n, x->ndim);
  int64_t pad[2 * LT_MAX_DIMS];
  for (lua_Unsigned i = 0; i < n; i++) {
    lua_rawgeti(L, 2, (lua_Integer)i + 1);
    pad[i] = ltb_check_integer(L, -1, op, "a padding");
    lua_pop(L, 1);
  }
  const int opts = ltb_nn_options(L, 3, op, pad_keys);
  if (opts && lua_getfield(L, opts, "mode") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      return ltb_error(L, "%s: mode must be a string, got %s", op, luaL_typename(L, -1));
    const char *mode = lua_tostring(L, -1);
    if (strcmp(mode, "constant") != 0)
      return ltb_error(L, "%s: mode '%s' is not supported (expected 'constant')", op, mode);
  }
  double value = 0.0;
  ltb_nn_opt_number(L, opts, op, "value", &value);
  lt_status st = lt_constant_pad_nd(x, pad, (int)n, value, &out);
  return ltb_push_result(L, st, out);
}

void ltb_open_tensor_math(lua_State *L, int methods_idx, int core_idx) {
  methods_idx = lua_absindex(L, methods_idx);
  core_idx = lua_absindex(L, core_idx);
  /* One method per row of lt/ops.h's op lists (and its in-place form). */
  for (int op = 0; op < LT_NBINARY; op++) {
    if (!lt_binary_is_method((lt_binary_op)op)) continue;
    ltb_push_binary_function(L, (lt_binary_op)op);
    lua_setfield(L, methods_idx, lt_binary_op_name((lt_binary_op)op));
    /* Every op has its in-place form, comparisons included: a:gt_(b) writes
     * 0/1 in a's own dtype, as PyTorch's. */
    lua_pushinteger(L, op);
    lua_pushcclosure(L, binary_inplace_call, 1);
    lua_setfield(L, methods_idx, lt_binary_op_inplace_name((lt_binary_op)op));
  }
  for (int op = 0; op < LT_NUNARY; op++) {
    ltb_push_unary_function(L, (lt_unary_op)op);
    lua_setfield(L, methods_idx, lt_unary_op_name((lt_unary_op)op));
    lua_pushinteger(L, op);
    lua_pushcclosure(L, unary_inplace_call, 1);
    lua_setfield(L, methods_idx, lt_unary_op_inplace_name((lt_unary_op)op));
  }
  static const luaL_Reg methods[] = {
      {"clamp", tensor_clamp},         {"clamp_", tensor_clamp_},   {"fill_", tensor_fill_},
      {"zero_", tensor_zero_},         {"copy_", tensor_copy_},     {"uniform_", tensor_uniform_},
      {"normal_", tensor_normal_},     {"bernoulli_", tensor_bernoulli_},
      {"matmul", tensor_matmul},       {NULL, NULL},
  };
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);

  static const luaL_Reg functions[] = {
      {"matmul", tensor_matmul}, {"cat", lt_cat_fn},     {"stack", lt_stack_fn},
      {"where", lt_where_fn},    {"clamp", tensor_clamp}, {"_pad", lt_pad_fn},
      {NULL, NULL},
  };
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  ltb_push_binary_function(L, LT_OP_MAXIMUM);
  lua_setfield(L, -2, "maximum");
  ltb_push_binary_function(L, LT_OP_MINIMUM);
  lua_setfield(L, -2, "minimum");
  ltb_push_binary_function(L, LT_OP_REMAINDER);
  lua_setfield(L, -2, "remainder");
  ltb_push_binary_function(L, LT_OP_FLOOR_DIVIDE);
  lua_setfield(L, -2, "floor_divide");
  lua_pop(L, 1);
}
