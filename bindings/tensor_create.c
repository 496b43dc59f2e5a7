/* Creating tensors: lt.tensor from nested tables, zeros/ones/empty/full,
 * random tensors, arange and the *_like family. Sizes come as varargs or one
 * table, then an optional options table {dtype=, device=, requires_grad=}. */
#include <math.h>
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

static const unsigned CREATE_OPTIONS = LTB_OPT_DTYPE | LTB_OPT_DEVICE | LTB_OPT_REQUIRES_GRAD;

static void no_more_arguments(lua_State *L, int idx, const char *op) {
  if (!lua_isnone(L, idx))
    ltb_error(L, "%s: unexpected %s after the options table", op, luaL_typename(L, idx));
}

/* Finishes a creation: requires_grad is set on the new tensor. */
static int finish_created(lua_State *L, lt_status st, lt_tensor *out, const ltb_options *o) {
  if (st == LT_OK && o->requires_grad) out->requires_grad = true;
  return ltb_push_result(L, st, out);
}

static void check_options_dtype(lua_State *L, const ltb_options *o, lt_dtype dt, const char *op) {
  if (o->requires_grad) ltb_check_grad_dtype(L, dt, op);
}

/* ---- lt.tensor ---- */

enum value_kind { KIND_NONE = 0, KIND_BOOL, KIND_INT, KIND_FLOAT };

typedef struct nested {
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  int64_t numel;
  enum value_kind kind;
  int64_t path[LT_MAX_DIMS]; /* 1-based position being walked, for messages */
  void *buffer;              /* NULL while checking, the values when storing */
  int64_t count;
} nested;

/* Pushes "[2][1]" for the first depth levels of the walked position. */
static const char *push_position(lua_State *L, const nested *n, int depth) {
  if (depth == 0) return lua_pushliteral(L, "the top level");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < depth; i++) {
    char item[32];
    snprintf(item, sizeof item, "[%lld]", (long long)n->path[i]);
    luaL_addstring(&b, item);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* The shape, read down the first elements. */
static void infer_shape(lua_State *L, int idx, nested *n) {
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (n->ndim == LT_MAX_DIMS)
      ltb_error(L, "tensor: nested tables deeper than %d dimensions", LT_MAX_DIMS);
    lua_Unsigned len = lua_rawlen(L, -1);
    n->shape[n->ndim++] = (int64_t)len;
    if (len == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  n->numel = 1;
  for (int i = 0; i < n->ndim; i++) {
    if (n->shape[i] > 0 && n->numel > ((int64_t)1 << 40) / n->shape[i])
      ltb_error(L, "tensor: too many elements");
    n->numel *= n->shape[i];
  }
}

static void store_value(lua_State *L, nested *n) {
  int64_t i = n->count++;
  int type = lua_type(L, -1);
  if (n->kind == KIND_FLOAT)
    ((double *)n->buffer)[i] = type == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tonumber(L, -1);
  else if (n->kind == KIND_INT)
    ((int64_t *)n->buffer)[i] = type == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tointeger(L, -1);
  else
    ((unsigned char *)n->buffer)[i] = (unsigned char)lua_toboolean(L, -1);
}

/* The table on the stack top holds nothing but its list 1..len: a key such
 * as x = 3, or a hole ({[1] = 1, [3] = 2}, length 1), would be dropped. */
static void check_list_keys(lua_State *L, const nested *n, int depth, int64_t len) {
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    int is_int;
    lua_Integer k = lua_tointegerx(L, -1, &is_int);
    if (!is_int || lua_type(L, -1) != LUA_TNUMBER || k < 1 || k > len) {
      const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -1))
                                                        : luaL_tolstring(L, -1, NULL);
      ltb_error(L, "tensor: the table at %s has key %s, which is not part of a list (1..%I)",
                 push_position(L, n, depth), key, (lua_Integer)len);
    }
  }
}

/* Checks the value on the stack top against the shape (first pass, which
 * also finds the kind of the values) or stores it (second pass). */
static void walk(lua_State *L, nested *n, int depth) {
  int type = lua_type(L, -1);
  if (depth < n->ndim) {
    if (type != LUA_TTABLE)
      ltb_error(L, "tensor: ragged nested table: expected a table at %s, got %s",
                 push_position(L, n, depth), luaL_typename(L, -1));
    int64_t len = (int64_t)lua_rawlen(L, -1);
    if (len != n->shape[depth])
      ltb_error(L, "tensor: ragged nested table: %I elements at %s, expected %I", (lua_Integer)len,
                 push_position(L, n, depth), (lua_Integer)n->shape[depth]);
    if (!n->buffer) check_list_keys(L, n, depth, len);
    for (int64_t i = 1; i <= len; i++) {
      n->path[depth] = i;
      lua_rawgeti(L, -1, (lua_Integer)i);
      walk(L, n, depth + 1);
      lua_pop(L, 1);
    }
    return;
  }
  if (n->buffer) {
    store_value(L, n);
    return;
  }
  enum value_kind k;
  if (type == LUA_TNUMBER) k = lua_isinteger(L, -1) ? KIND_INT : KIND_FLOAT;
  else if (type == LUA_TBOOLEAN) k = KIND_BOOL;
  else if (type == LUA_TTABLE)
    return (void)ltb_error(L, "tensor: ragged nested table: expected a number at %s, got a table",
                            push_position(L, n, depth));
  else
    return (void)ltb_error(L, "tensor: expected a number or a boolean at %s, got %s",
                            push_position(L, n, depth), luaL_typename(L, -1));
  if (k > n->kind) n->kind = k;
}

static int copy_tensor(lua_State *L, lt_tensor *src, const ltb_options *o) {
  lt_dtype dt = o->has_dtype ? o->dtype : src->dtype;
  check_options_dtype(L, o, dt, "tensor");
  lt_tensor *moved = NULL, *out = NULL;
  lt_status st = lt_to_dtype(src, dt, true, &moved);
  if (st == LT_OK && o->has_device && !lt_device_eq(o->device, moved->storage->device)) {
    st = lt_to_device(moved, o->device, &out);
    lt_tensor_release(moved);
  } else {
    out = moved;
  }
  return finish_created(L, st, out, o);
}

static int lt_tensor_fn(lua_State *L) {
  ltb_options o;
  ltb_read_options(L, 2, "tensor", CREATE_OPTIONS, &o);
  no_more_arguments(L, 3, "tensor");
  lt_tensor *src = ltb_test_tensor(L, 1);
  if (src) return copy_tensor(L, src, &o);
  int type = lua_type(L, 1);
  if (type != LUA_TTABLE && type != LUA_TNUMBER && type != LUA_TBOOLEAN)
    return ltb_error(L, "tensor: expected a number, a boolean or nested tables of them, got %s",
                      luaL_typename(L, 1));
  luaL_checkstack(L, 2 * LT_MAX_DIMS + 8, "tensor");
  nested n;
  memset(&n, 0, sizeof n);
  infer_shape(L, 1, &n);
  lua_pushvalue(L, 1);
  walk(L, &n, 0); /* check the shape and find the kind of the values */
  static const lt_dtype default_dtype[] = {LT_FLOAT32, LT_BOOL, LT_INT64, LT_FLOAT32};
  static const lt_dtype buffer_dtype[] = {LT_FLOAT64, LT_BOOL, LT_INT64, LT_FLOAT64};
  static const size_t buffer_size[] = {8, 1, 8, 8};
  if (n.kind == KIND_NONE) n.kind = KIND_FLOAT; /* no values: float32, as PyTorch */
  lt_dtype dt = o.has_dtype ? o.dtype : default_dtype[n.kind];
  check_options_dtype(L, &o, dt, "tensor");
  /* The values go to a buffer owned by Lua, so that an error cannot leak it. */
  n.buffer = lua_newuserdatauv(L, (size_t)(n.numel > 0 ? n.numel : 1) * buffer_size[n.kind], 0);
  lua_insert(L, -2);
  walk(L, &n, 0);
  lua_pop(L, 1);
  lt_tensor *out = NULL;
  lt_status st = lt_from_buffer(n.buffer, buffer_dtype[n.kind], n.shape, n.ndim, dt, o.device, &out);
  return finish_created(L, st, out, &o);
}

/* ---- zeros, ones, empty, rand, randn ---- */

enum fill_kind { FILL_EMPTY, FILL_ZEROS, FILL_ONES, FILL_RAND, FILL_RANDN };
static const char *const fill_names[] = {"empty", "zeros", "ones", "rand", "randn"};
static const char *const fill_like_names[] = {"empty_like", "zeros_like", "ones_like", "rand_like",
                                              "randn_like"};

/* Errors name op, the function the user called (ones, randn_like). */
static lt_status make_filled(const char *op, enum fill_kind kind, const int64_t *shape, int ndim,
                             lt_dtype dt, lt_device dev, lt_tensor **out) {
  switch (kind) {
    case FILL_ZEROS: return lt_full_named(op, shape, ndim, 0.0, dt, dev, out);
    case FILL_ONES: return lt_full_named(op, shape, ndim, 1.0, dt, dev, out);
    default: break;
  }
  LT_TRY(lt_empty_named(op, shape, ndim, dt, dev, out));
  lt_status st = LT_OK;
  if (kind == FILL_RAND) st = lt_uniform_(*out, 0.0, 1.0);
  else if (kind == FILL_RANDN) st = lt_normal_(*out, 0.0, 1.0);
  if (st != LT_OK) {
    lt_tensor_release(*out);
    *out = NULL;
    return st;
  }
  if (kind != FILL_EMPTY) (*out)->storage->version = 0; /* filling a fresh tensor is no user write */
  return LT_OK;
}

static void check_random_dtype(lua_State *L, enum fill_kind kind, lt_dtype dt, const char *op) {
  if ((kind == FILL_RAND || kind == FILL_RANDN) && !lt_dtype_is_floating(dt))
    ltb_error(L, "%s: expected a floating point dtype, got %s", op, lt_dtype_name(dt));
}

static int create_filled(lua_State *L) {
  enum fill_kind kind = (enum fill_kind)lua_tointeger(L, lua_upvalueindex(1));
  const char *op = fill_names[kind];
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  int next = ltb_check_sizes(L, 1, op, false, shape, &ndim);
  ltb_options o;
  ltb_read_options(L, next, op, CREATE_OPTIONS, &o);
  no_more_arguments(L, next + 1, op);
  lt_dtype dt = o.has_dtype ? o.dtype : LT_FLOAT32;
  check_options_dtype(L, &o, dt, op);
  check_random_dtype(L, kind, dt, op);
  lt_tensor *out = NULL;
  lt_status st = make_filled(op, kind, shape, ndim, dt, o.device, &out);
  return finish_created(L, st, out, &o);
}

/* zeros_like(t, opts) and friends: t's shape, dtype and device by default. */
static int create_filled_like(lua_State *L) {
  enum fill_kind kind = (enum fill_kind)lua_tointeger(L, lua_upvalueindex(1));
  const char *op = fill_like_names[kind];
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  ltb_options o;
  ltb_read_options(L, 2, op, CREATE_OPTIONS, &o);
  no_more_arguments(L, 3, op);
  lt_dtype dt = o.has_dtype ? o.dtype : t->dtype;
  lt_device dev = o.has_device ? o.device : t->storage->device;
  check_options_dtype(L, &o, dt, op);
  check_random_dtype(L, kind, dt, op);
  lt_tensor *out = NULL;
  lt_status st = make_filled(op, kind, t->shape, t->ndim, dt, dev, &out);
  return finish_created(L, st, out, &o);
}

/* ---- full ---- */

/* The dtype a Lua value gives a tensor: int64, float32 or bool. */
static lt_dtype scalar_dtype(lua_State *L, int idx, const char *op, double *v) {
  int type = lua_type(L, idx);
  if (type == LUA_TBOOLEAN) {
    *v = lua_toboolean(L, idx);
    return LT_BOOL;
  }
  if (type != LUA_TNUMBER)
    ltb_error(L, "%s: expected a number or a boolean for the value, got %s", op,
               luaL_typename(L, idx));
  *v = lua_tonumber(L, idx);
  return lua_isinteger(L, idx) ? LT_INT64 : LT_FLOAT32;
}

/* Sizes as one table or one integer at idx. */
static void one_arg_sizes(lua_State *L, int idx, const char *op, int64_t *shape, int *ndim) {
  if (lua_type(L, idx) != LUA_TTABLE && lua_type(L, idx) != LUA_TNUMBER)
    ltb_error(L, "%s: expected sizes as a table or an integer, got %s", op, luaL_typename(L, idx));
  lua_pushvalue(L, idx);
  int top = lua_gettop(L);
  ltb_check_sizes(L, top, op, false, shape, ndim);
  lua_pop(L, 1);
}

static int lt_full_fn(lua_State *L) {
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  one_arg_sizes(L, 1, "full", shape, &ndim);
  double v;
  lt_dtype inferred = scalar_dtype(L, 2, "full", &v);
  ltb_options o;
  ltb_read_options(L, 3, "full", CREATE_OPTIONS, &o);
  no_more_arguments(L, 4, "full");
  lt_dtype dt = o.has_dtype ? o.dtype : inferred;
  check_options_dtype(L, &o, dt, "full");
  lt_tensor *out = NULL;
  lt_status st = lt_full_named("full", shape, ndim, v, dt, o.device, &out);
  return finish_created(L, st, out, &o);
}

static int lt_full_like_fn(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "full_like");
  double v;
  scalar_dtype(L, 2, "full_like", &v);
  ltb_options o;
  ltb_read_options(L, 3, "full_like", CREATE_OPTIONS, &o);
  lt_dtype dt = o.has_dtype ? o.dtype : t->dtype;
  lt_device dev = o.has_device ? o.device : t->storage->device;
  check_options_dtype(L, &o, dt, "full_like");
  lt_tensor *out = NULL;
  lt_status st = lt_full_named("full_like", t->shape, t->ndim, v, dt, dev, &out);
  return finish_created(L, st, out, &o);
}

/* ---- randint ---- */

/* randint(low, high, sizes..., opts): integers in [low, high], inclusive. */
static int lt_randint_fn(lua_State *L) {
  lua_Integer low = ltb_check_integer(L, 1, "randint", "low");
  lua_Integer high = ltb_check_integer(L, 2, "randint", "high");
  if (high < low) return ltb_error(L, "randint: high %I is less than low %I", high, low);
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  int next = ltb_check_sizes(L, 3, "randint", false, shape, &ndim);
  ltb_options o;
  ltb_read_options(L, next, "randint", CREATE_OPTIONS, &o);
  no_more_arguments(L, next + 1, "randint");
  lt_dtype dt = o.has_dtype ? o.dtype : LT_INT64;
  check_options_dtype(L, &o, dt, "randint");
  lt_tensor *out = NULL;
  lt_status st = lt_empty_named("randint", shape, ndim, dt, o.device, &out);
  if (st == LT_OK) {
    st = lt_randint_(out, low, high);
    if (st != LT_OK) lt_tensor_release(out);
    else out->storage->version = 0;
  }
  return finish_created(L, st, out, &o);
}

/* ---- arange ---- */

/* arange(end) / arange(start, end) / arange(start, end, step), then opts:
 * start, start + step, ... up to but excluding end, as PyTorch. Integers give
 * int64, any float gives float32. */
static int lt_arange_fn(lua_State *L) {
  const char *op = "arange";
  int nnum = 0;
  while (nnum < 3 && lua_type(L, nnum + 1) == LUA_TNUMBER) nnum++;
  if (nnum == 0)
    return ltb_error(L, "%s: expected an end, or a start, an end and a step, got %s", op,
                      luaL_typename(L, 1));
  ltb_options o;
  ltb_read_options(L, nnum + 1, op, CREATE_OPTIONS, &o);
  no_more_arguments(L, nnum + 2, op);
  bool all_int = true;
  for (int i = 1; i <= nnum; i++) all_int = all_int && lua_isinteger(L, i);
  lt_dtype dt = o.has_dtype ? o.dtype : (all_int ? LT_INT64 : LT_FLOAT32);
  check_options_dtype(L, &o, dt, op);
  int64_t count;
  void *buffer;
  lt_dtype src;
  if (all_int) {
    lua_Integer start = nnum > 1 ? lua_tointeger(L, 1) : 0;
    lua_Integer end = nnum > 1 ? lua_tointeger(L, 2) : lua_tointeger(L, 1);
    lua_Integer step = nnum > 2 ? lua_tointeger(L, 3) : 1;
    if (step == 0) return ltb_error(L, "%s: step must not be 0", op);
    if ((step > 0 && end < start) || (step < 0 && end > start))
      return ltb_error(L, "%s: end %I cannot be reached from start %I with step %I", op, end,
                        start, step);
    /* Unsigned: the span of two int64 values (say math.mininteger to
     * math.maxinteger) and the elements' offsets can pass INT64_MAX, although
     * every element lies between start and end. */
    const lua_Unsigned span = step > 0 ? (lua_Unsigned)end - (lua_Unsigned)start
                                       : (lua_Unsigned)start - (lua_Unsigned)end;
    const lua_Unsigned s = step > 0 ? (lua_Unsigned)step : 0u - (lua_Unsigned)step;
    const lua_Unsigned n = span / s + (span % s != 0);
    if (n > (lua_Unsigned)1e12)
      return ltb_error(L, "%s: too many elements (%I to %I by %I)", op, start, end, step);
    count = (int64_t)n;
    buffer = lua_newuserdatauv(L, (size_t)(count > 0 ? count : 1) * sizeof(int64_t), 0);
    for (int64_t i = 0; i < count; i++)
      ((int64_t *)buffer)[i] =
          (int64_t)((lua_Unsigned)start + (lua_Unsigned)i * (lua_Unsigned)step);
    src = LT_INT64;
  } else {
    double start = nnum > 1 ? lua_tonumber(L, 1) : 0.0;
    double end = nnum > 1 ? lua_tonumber(L, 2) : lua_tonumber(L, 1);
    double step = nnum > 2 ? lua_tonumber(L, 3) : 1.0;
    if (step == 0.0) return ltb_error(L, "%s: step must not be 0", op);
    double n = ceil((end - start) / step);
    if (!(n >= 0.0))
      return ltb_error(L, "%s: end %f cannot be reached from start %f with step %f", op,
                        (lua_Number)end, (lua_Number)start, (lua_Number)step);
    if (n > 1e12) return ltb_error(L, "%s: too many elements (%f)", op, (lua_Number)n);
    count = (int64_t)n;
    buffer = lua_newuserdatauv(L, (size_t)(count > 0 ? count : 1) * sizeof(double), 0);
    for (int64_t i = 0; i < count; i++) ((double *)buffer)[i] = start + (double)i * step;
    src = LT_FLOAT64;
  }
  lt_tensor *out = NULL;
  lt_status st = lt_from_buffer(buffer, src, &count, 1, dt, o.device, &out);
  return finish_created(L, st, out, &o);
}

/* core._check_shape(op, sizes): raises what creating a tensor of sizes would,
 * under op's name (a module constructor: "Linear: shape [...] has too many
 * elements"), before the module creates its parameters. */
static int check_shape_fn(lua_State *L) {
  const char *op = luaL_checkstring(L, 1);
  int64_t shape[LT_MAX_DIMS], numel;
  int ndim;
  ltb_check_sizes(L, 2, op, false, shape, &ndim);
  lt_status st = lt_check_shape(op, shape, ndim, LT_FLOAT32, &numel);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

void ltb_open_tensor_create(lua_State *L, int methods_idx, int core_idx) {
  (void)methods_idx;
  core_idx = lua_absindex(L, core_idx);
  static const luaL_Reg functions[] = {
      {"tensor", lt_tensor_fn},   {"full", lt_full_fn},     {"full_like", lt_full_like_fn},
      {"randint", lt_randint_fn}, {"arange", lt_arange_fn}, {"_check_shape", check_shape_fn},
      {NULL, NULL},
  };
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  for (int kind = FILL_EMPTY; kind <= FILL_RANDN; kind++) {
    lua_pushinteger(L, kind);
    lua_pushcclosure(L, create_filled, 1);
    lua_setfield(L, -2, fill_names[kind]);
    lua_pushinteger(L, kind);
    lua_pushcclosure(L, create_filled_like, 1);
    lua_setfield(L, -2, fill_like_names[kind]);
  }
  lua_pop(L, 1);
}
