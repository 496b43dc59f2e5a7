/* The tensor handle (after liolib.c's file handle): check, push, release and
 * the metatable. One idempotent release serves __gc, __close, t:free() and
 * lt.del; a released handle's pointer is NULL and any use raises
 * "attempt to use a freed tensor".
 *
 * Fast paths: the metatable is found under a private registry key (a pointer
 * lookup, no string hashing); __index finds methods with one rawget in a table
 * held as an upvalue; fields go through a small name -> number table. */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "memory.h"
#include "tensor_handle.h"

static const char tensor_mt_key = 0;


ltb_handle *ltb_test_handle(lua_State *L, int idx) {
  ltb_handle *h = lua_touserdata(L, idx);
  if (h == NULL || !lua_getmetatable(L, idx)) return NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
  int same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same ? h : NULL;
}

/* The running C function's name and whether it was called as a method
 * (t:op(...)), as luaL_argerror finds them. */
static const char *called_as(lua_State *L, bool *method) {
  lua_Debug ar;
  *method = false;
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "n", &ar) || ar.name == NULL) return NULL;
  /* t.shape reaches __index with t as its first argument: self too. */
  *method = ar.namewhat != NULL &&
            (strcmp(ar.namewhat, "method") == 0 || strcmp(ar.namewhat, "metamethod") == 0);
  return ar.name;
}

/* "add: attempt to use a freed tensor (argument #2)": the op (the running
 * function's name when not given) and which argument; idx 1 of a method
 * call is self. A negative idx is a value taken from a table argument. */
static int freed_error(lua_State *L, int idx, const char *op) {
  bool method;
  const char *name = called_as(L, &method);
  if (op == NULL) op = name ? name : "?";
  if (idx < 0) return ltb_error(L, "%s: attempt to use a freed tensor", op);
  if (method && idx == 1) return ltb_error(L, "%s: attempt to use a freed tensor (self)", op);
  return ltb_error(L, "%s: attempt to use a freed tensor (argument #%d)", op, method ? idx - 1 : idx);
}

/* A tensor made inside lt.memory.estimate holds no data: once the estimate
 * is over no op may use it. */
static void check_not_estimated(lua_State *L, const lt_tensor *t, const char *op) {
  if (!t->storage->meta || lt_estimating()) return;
  if (op == NULL) {
    bool method;
    op = called_as(L, &method);
  }
  ltb_error(L, "%s: this tensor was made inside lt.memory.estimate and holds no data (an "
               "estimate allocates nothing); use tensors made outside it", op ? op : "?");
}

lt_tensor *ltb_test_tensor(lua_State *L, int idx) {
  ltb_handle *h = ltb_test_handle(L, idx);
  if (h == NULL) return NULL;
  if (h->tensor == NULL) freed_error(L, idx, NULL);
  check_not_estimated(L, h->tensor, NULL);
  return h->tensor;
}

lt_tensor *ltb_check_tensor(lua_State *L, int idx, const char *op) {
  ltb_handle *h = ltb_test_handle(L, idx);
  if (h != NULL && h->tensor == NULL) freed_error(L, idx, op);
  if (h != NULL) {
    check_not_estimated(L, h->tensor, op);
    return h->tensor;
  }
  bool method;
  const char *name = called_as(L, &method);
  /* t.backward() with a dot passes no self: say how to call a method. */
  if (idx == 1 && !method && name != NULL && strcmp(name, op) == 0)
    ltb_error(L, "%s: expected a tensor, got %s as self (argument #1); call a tensor method with a "
                  "colon: t:%s(...)",
               op, luaL_typename(L, idx), op);
  ltb_error(L, "%s: expected a tensor, got %s", op, luaL_typename(L, idx));
  return NULL;
}

lt_tensor *ltb_list_tensor(lua_State *L, const char *op, lua_Integer i) {
  ltb_handle *h = ltb_test_handle(L, -1);
  if (h == NULL)
    ltb_error(L, "%s: element %I of the list is a %s, expected a tensor", op, i, luaL_typename(L, -1));
  if (h->tensor == NULL) ltb_error(L, "%s: attempt to use a freed tensor (element %I of the list)", op, i);
  check_not_estimated(L, h->tensor, op);
  return h->tensor;
}

ltb_handle *ltb_new_handle(lua_State *L) {
  /* One user value caches the handle of t.grad, so that t.grad == t.grad. */
  ltb_handle *h = lua_newuserdatauv(L, sizeof *h, 1);
  h->tensor = NULL;
  h->watch = 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
  lua_setmetatable(L, -2);
  return h;
}

int ltb_finish(lua_State *L, ltb_handle *h, lt_status st, lt_tensor *out) {
  if (st != LT_OK) return ltb_raise(L, st);
  h->tensor = out;
  /* Only a storage nobody else holds was just allocated; views and shared
   * results were charged when their storage was made. */
  if (out->refcount == 1 && out->storage->refcount == 1) ltb_charge(L, out);
  return 1;
}

/* The result whose handle could not be made (a Lua memory error). */
static lt_tensor *orphan;

int ltb_push_result(lua_State *L, lt_status st, lt_tensor *out) {
  if (orphan) {
    lt_tensor *t = orphan;
    orphan = NULL;
    lt_tensor_release(t);
  }
  if (st != LT_OK) return ltb_raise(L, st);
  orphan = out;
  ltb_handle *h = ltb_new_handle(L);
  orphan = NULL;
  return ltb_finish(L, h, LT_OK, out);
}

int ltb_push_result_or_self(lua_State *L, lt_status st, lt_tensor *out, int self_idx) {
  if (st != LT_OK || out != ltb_test_tensor(L, self_idx)) return ltb_push_result(L, st, out);
  lt_tensor_release(out); /* the extra reference: self's handle already holds one */
  lua_pushvalue(L, self_idx);
  return 1;
}

size_t ltb_release(ltb_handle *h) {
  lt_tensor *t = h->tensor;
  if (t == NULL) return 0;
  h->tensor = NULL;
  return lt_tensor_release(t);
}

/* The device of h's tensor (the CPU for a freed handle). */
static lt_device handle_device(const ltb_handle *h) {
  return h->tensor && h->tensor->storage ? h->tensor->storage->device : lt_cpu();
}

size_t ltb_release_at(lua_State *L, int idx, ltb_handle *h) {
  ltb_grad_sweep sw;
  ltb_sweep_begin(&sw);
  ltb_take_grad_handle(L, idx);
  const lt_device dev = handle_device(h);
  size_t bytes = ltb_release(h); /* drops the engine's reference to the gradient too */
  ltb_sweep_add(L, &sw);
  bytes += ltb_sweep_finish(L, &sw);
  ltb_uncharge(dev, bytes);
  return bytes;
}

/* ---- metamethods ---- */

static int tensor_gc(lua_State *L) {
  ltb_handle *h = lua_touserdata(L, 1);
  if (!h) return 0;
  /* Only the collector calls __gc: what this frees was garbage (the memory
   * report draws it as such). */
  lt_memory_history_collecting(true);
  ltb_sweep_note(h, ltb_release(h));
  lt_memory_history_collecting(false);
  return 0;
}

/* __close: the end of a to-be-closed variable's scope, not a collection. */
static int tensor_close(lua_State *L) {
  ltb_handle *h = lua_touserdata(L, 1);
  if (h == NULL) return 0;
  const lt_device dev = handle_device(h);
  const size_t bytes = ltb_release(h);
  ltb_sweep_note(h, bytes);
  ltb_uncharge(dev, bytes);
  return 0;
}

/* t:free(): returns the bytes given back, like lt.del. */
static int tensor_free(lua_State *L) {
  ltb_handle *h = ltb_test_handle(L, 1);
  if (h == NULL) return ltb_error(L, "free: expected a tensor, got %s", luaL_typename(L, 1));
  lua_pushinteger(L, (lua_Integer)ltb_release_at(L, 1, h));
  return 1;
}

/* core._set_data(t, src): t's handle refers to src's tensor from now on, as
 * PyTorch's `t.data = src`: whoever holds t (an optimizer's parameter list,
 * a module's slot) sees src's values, dtype and device. Both must be leaves;
 * t's gradient is dropped (assign it again afterwards). Returns t. */
int ltb_set_data(lua_State *L) {
  ltb_handle *h = ltb_test_handle(L, 1);
  if (h == NULL) return ltb_error(L, "_set_data: expected a tensor, got %s", luaL_typename(L, 1));
  if (h->tensor == NULL) return ltb_error(L, "attempt to use a freed tensor");
  lt_tensor *src = ltb_check_tensor(L, 2, "_set_data");
  if (!lt_is_leaf(h->tensor) || !lt_is_leaf(src))
    return ltb_error(L, "_set_data: expected leaf tensors");
  lua_settop(L, 2);
  if (src != h->tensor) {
    /* Hooks belong to the parameter, not its data (PyTorch's t.data = src). */
    lt_status st = lt_autograd_move_hooks(h->tensor, src);
    if (st != LT_OK) return ltb_raise(L, st);
    /* The old tensor goes with its gradient, and the cached t.grad handle
     * with it (given back at once unless the script kept it). */
    ltb_grad_sweep sw;
    ltb_sweep_begin(&sw);
    ltb_take_grad_handle(L, 1);
    lt_tensor *old = h->tensor;
    lt_tensor_retain(src);
    h->tensor = src;
    lt_tensor_release(old);
    ltb_sweep_add(L, &sw);
    ltb_sweep_finish(L, &sw);
  }
  lua_settop(L, 1);
  return 1;
}

static int tensor_is_freed(lua_State *L) {
  ltb_handle *h = ltb_test_handle(L, 1);
  if (h == NULL) return ltb_error(L, "is_freed: expected a tensor, got %s", luaL_typename(L, 1));
  lua_pushboolean(L, h->tensor == NULL);
  return 1;
}

static int tensor_tostring(lua_State *L) {
  ltb_handle *h = ltb_test_handle(L, 1);
  if (h == NULL || h->tensor == NULL) {
    lua_pushliteral(L, "tensor (freed)");
    return 1;
  }
  char *s = lt_tensor_to_string(h->tensor);
  if (s == NULL) return ltb_raise(L, LT_ERR_INTERNAL);
  lua_pushstring(L, s);
  free(s);
  return 1;
}

static int tensor_len(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "len");
  if (t->ndim == 0) return ltb_error(L, "len: a 0-dim tensor has no length (use item)");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

lt_status ltb_select(const lt_tensor *t, int dim, lua_Integer index, lt_tensor **out) {
  if (index == 0 && t->ndim > 0)
    return lt_error(LT_ERR_INDEX, "index 0 is out of bounds for dimension %d with size %lld "
                                  "(indices start at 1)",
                    dim + 1, (long long)t->shape[dim]);
  return lt_select(t, dim, index > 0 ? index - 1 : index, out);
}

static lua_Integer check_index_key(lua_State *L, int idx) {
  int is_int;
  lua_Integer i = lua_tointegerx(L, idx, &is_int);
  if (!is_int || lua_type(L, idx) != LUA_TNUMBER)
    ltb_error(L, "index: a tensor index must be an integer, got %s",
               lua_type(L, idx) == LUA_TNUMBER ? luaL_tolstring(L, idx, NULL)
                                                : luaL_typename(L, idx));
  return i;
}

/* t[i]: the view t:select(1, i). */
static int index_integer(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "index");
  lua_Integer i = check_index_key(L, 2);
  lt_tensor *out = NULL;
  lt_status st = ltb_select(t, 0, i, &out);
  return ltb_push_result(L, st, out);
}

/* t[i] = v: fill or copy into the view t:select(1, i). */
static int assign_integer(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "index assignment");
  lua_Integer i = check_index_key(L, 2);
  int vt = lua_type(L, 3);
  lt_tensor *src = vt == LUA_TUSERDATA ? ltb_test_tensor(L, 3) : NULL;
  if (vt != LUA_TNUMBER && vt != LUA_TBOOLEAN && src == NULL)
    return ltb_error(L, "index assignment: expected a number, a boolean or a tensor, got %s",
                      luaL_typename(L, 3));
  lt_tensor *view = NULL;
  lt_status st = ltb_select(t, 0, i, &view);
  if (st != LT_OK) return ltb_raise(L, st);
  if (src) st = lt_copy_(view, src);
  else st = lt_fill_(view, vt == LUA_TBOOLEAN ? (double)lua_toboolean(L, 3) : lua_tonumber(L, 3));
  lt_tensor_release(view);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- fields ---- */

enum field { F_SHAPE = 1, F_DTYPE, F_DEVICE, F_REQUIRES_GRAD, F_GRAD, F_NDIM, F_IS_LEAF, F_GRAD_FN };

static const struct {
  const char *name;
  enum field field;
} fields[] = {{"shape", F_SHAPE},   {"dtype", F_DTYPE}, {"device", F_DEVICE},
              {"requires_grad", F_REQUIRES_GRAD},       {"grad", F_GRAD},
              {"ndim", F_NDIM},     {"is_leaf", F_IS_LEAF}, {"grad_fn", F_GRAD_FN}};

void ltb_push_shape(lua_State *L, const lt_tensor *t) {
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, (lua_Integer)t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static int get_field(lua_State *L, lt_tensor *t, enum field f) {
  switch (f) {
    case F_SHAPE: ltb_push_shape(L, t); return 1;
    case F_DTYPE: ltb_push_dtype(L, t->dtype); return 1;
    case F_DEVICE: ltb_push_device(L, t->storage->device); return 1;
    case F_REQUIRES_GRAD: lua_pushboolean(L, t->requires_grad); return 1;
    case F_GRAD: return ltb_push_grad(L, 1, t);
    case F_NDIM: lua_pushinteger(L, t->ndim); return 1;
    case F_IS_LEAF: lua_pushboolean(L, lt_is_leaf(t)); return 1;
    case F_GRAD_FN: { /* the node's name ("MulBackward"), nil for a leaf */
      const char *name = lt_grad_fn_name(t);
      if (name) lua_pushstring(L, name);
      else lua_pushnil(L);
      return 1;
    }
  }
  return 0;
}

static void format_shape(char *buf, int n, const lt_tensor *t) {
  lt_format_shape(buf, n, t->shape, t->ndim);
}

void ltb_check_grad_matches(lua_State *L, const lt_tensor *t, const lt_tensor *g) {
  char a[160], b[160];
  if (g == t) ltb_error(L, "grad: a tensor cannot be its own gradient");
  bool same_shape = g->ndim == t->ndim;
  for (int i = 0; same_shape && i < t->ndim; i++) same_shape = g->shape[i] == t->shape[i];
  if (!same_shape) {
    format_shape(a, sizeof a, g);
    format_shape(b, sizeof b, t);
    ltb_error(L, "grad: the assigned gradient has shape %s but the tensor has shape %s", a, b);
  }
  if (g->dtype != t->dtype)
    ltb_error(L, "grad: the assigned gradient has dtype %s but the tensor has dtype %s",
               lt_dtype_name(g->dtype), lt_dtype_name(t->dtype));
  if (!lt_device_eq(g->storage->device, t->storage->device))
    ltb_error(L, "grad: the assigned gradient is on %s but the tensor is on %s",
               lt_device_name(g->storage->device, a), lt_device_name(t->storage->device, b));
}

static void set_grad(lua_State *L, lt_tensor *t) {
  lt_tensor *g = NULL;
  if (!lua_isnil(L, 3)) {
    g = ltb_test_tensor(L, 3);
    if (g == NULL) ltb_error(L, "grad: expected a tensor or nil, got %s", luaL_typename(L, 3));
    ltb_check_grad_matches(L, t, g);
  }
  ltb_set_grad(L, 1, t, g, 3);
}

void ltb_set_requires_grad(lua_State *L, lt_tensor *t, bool on, const char *op) {
  if (on) ltb_check_grad_dtype(L, t->dtype, op);
  /* The engine keeps the rules (a non-leaf cannot stop requiring grad). */
  lt_status st = lt_requires_grad_(t, on);
  if (st != LT_OK) ltb_raise(L, st);
}

/* Torch7's slices, t[{ {}, -1, {2, 4} }] (read and written), are Lua code
 * (lua/lt/slicing.lua), installed by core._set_slicing(get, set): the
 * registry keeps the two functions. */
static const char slice_get_key = 0, slice_set_key = 0;

static int slice_call(lua_State *L, const void *key, int nargs, int nresults) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) != LUA_TFUNCTION)
    return ltb_error(L, "index: a table index needs lt's Lua library (require \"lt\")");
  lua_insert(L, 1);
  lua_call(L, nargs, nresults);
  return nresults;
}

static int set_slicing(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &slice_get_key);
  lua_pushvalue(L, 2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &slice_set_key);
  return 0;
}

void ltb_open_slicing(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  lua_pushcfunction(L, set_slicing);
  lua_setfield(L, core_idx, "_set_slicing");
}

/* t.name for a name that is neither a method nor a field: an error, as
 * PyTorch's AttributeError, naming the closest method or field (t:splt(2)
 * would otherwise say only "attempt to call a nil value (method 'splt')"). */
static int unknown_member(lua_State *L) {
  const char *name = lua_tostring(L, 2);
  const char *near = ltb_closest_key(L, lua_upvalueindex(1), lua_upvalueindex(2), name);
  if (near)
    return ltb_error(L, "tensor has no method or field '%s' (did you mean '%s'?)", name, near);
  return ltb_error(L, "tensor has no method or field '%s' (the methods are the keys of lt.Tensor)", name);
}

static int tensor_index(lua_State *L) {
  int kt = lua_type(L, 2);
  if (kt == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1; /* a method */
    lua_pushvalue(L, 2);
    lua_Integer f = lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
    if (f == 0) return unknown_member(L);
    /* Fields are metadata: readable on a tensor kept past an estimate. */
    ltb_handle *h = ltb_test_handle(L, 1);
    if (h->tensor == NULL) freed_error(L, 1, "index");
    return get_field(L, h->tensor, (enum field)f);
  }
  if (kt == LUA_TNUMBER) return index_integer(L);
  if (kt == LUA_TTABLE) {
    lua_settop(L, 2);
    return slice_call(L, &slice_get_key, 2, 1);
  }
  return ltb_error(L, "index: a tensor index must be an integer, got %s (or a table of slices: "
                   "t[{ {}, 2, {1, 3} }])", luaL_typename(L, 2));
}

static int tensor_newindex(lua_State *L) {
  int kt = lua_type(L, 2);
  if (kt == LUA_TNUMBER) return assign_integer(L);
  if (kt == LUA_TTABLE) {
    lua_settop(L, 3);
    return slice_call(L, &slice_set_key, 3, 0);
  }
  if (kt != LUA_TSTRING)
    return ltb_error(L, "index assignment: a tensor index must be an integer, got %s",
                      luaL_typename(L, 2));
  lt_tensor *t = ltb_check_tensor(L, 1, "index assignment");
  lua_pushvalue(L, 2);
  lua_Integer f = lua_rawget(L, lua_upvalueindex(1)) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  if (f == F_REQUIRES_GRAD) {
    if (!lua_isboolean(L, 3))
      return ltb_error(L, "requires_grad: expected a boolean, got %s", luaL_typename(L, 3));
    ltb_set_requires_grad(L, t, lua_toboolean(L, 3), "requires_grad");
    return 0;
  }
  if (f == F_GRAD) {
    set_grad(L, t);
    return 0;
  }
  return ltb_error(L, "cannot set field '%s' of a tensor", lua_tostring(L, 2));
}

/* ---- the metatable ---- */

static const luaL_Reg handle_methods[] = {
    {"free", tensor_free},
    {"is_freed", tensor_is_freed},
    {NULL, NULL},
};

static void push_field_table(lua_State *L) {
  int n = (int)(sizeof fields / sizeof fields[0]);
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, fields[i].field);
    lua_setfield(L, -2, fields[i].name);
  }
}

void ltb_open_tensor_handle(lua_State *L, int methods_idx) {
  methods_idx = lua_absindex(L, methods_idx);
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, handle_methods, 0);
  lua_pop(L, 1);

  luaL_newmetatable(L, LTB_TENSOR_NAME); /* sets __name */
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);

  lua_pushvalue(L, methods_idx);
  push_field_table(L);
  lua_pushcclosure(L, tensor_index, 2);
  lua_setfield(L, -2, "__index");
  push_field_table(L);
  lua_pushcclosure(L, tensor_newindex, 1);
  lua_setfield(L, -2, "__newindex");

  static const luaL_Reg meta[] = {
      {"__gc", tensor_gc},   {"__close", tensor_close}, {"__tostring", tensor_tostring},
      {"__len", tensor_len}, {NULL, NULL},
  };
  luaL_setfuncs(L, meta, 0);

  static const struct {
    const char *event;
    lt_binary_op op;
  } arith[] = {{"__add", LT_OP_ADD}, {"__sub", LT_OP_SUB}, {"__mul", LT_OP_MUL},
               {"__div", LT_OP_DIV}, {"__pow", LT_OP_POW}, {"__mod", LT_OP_REMAINDER},
               {"__idiv", LT_OP_FLOOR_DIVIDE}};
  for (size_t i = 0; i < sizeof arith / sizeof arith[0]; i++) {
    ltb_push_binary_function(L, arith[i].op);
    lua_setfield(L, -2, arith[i].event);
  }
  ltb_push_unary_function(L, LT_OP_NEG);
  lua_setfield(L, -2, "__unm");
  lua_pop(L, 1);
}
