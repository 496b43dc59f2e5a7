/* Argument translation: 1-based dims and positions, sizes, options tables,
 * dtype and device names; engine errors as Lua errors. */
#include <stdarg.h>
#include <string.h>

#include "args.h"
#include "memory.h"

/* The registry key of lt.user_where's where(): the one rule that places an
 * error at the user's line, written once, in Lua (it reads the library's
 * frames and, for a forward that tail-called, the forward's source). */
static const char WHERE_KEY[] = "lt.error_where";

int ltb_store_function(lua_State *L, const char *key) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, key);
  return 0;
}

int ltb_set_error_where(lua_State *L) { return ltb_store_function(L, WHERE_KEY); }

/* Pushes "chunk:line: " of the innermost caller outside lt's Lua library and
 * outside C functions: an op that F.cross_entropy or a module's forward calls
 * for the script is reported at the script's line, not inside the library,
 * and pcall(lt.zeros, "a") at the line that called pcall. Without the Lua
 * library (lt.core alone) the innermost Lua line. */
static void push_user_where(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, WHERE_KEY) == LUA_TFUNCTION &&
      lua_pcall(L, 0, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
    return;
  lua_pop(L, 1); /* not set, or its error */
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "l", &ar)) break;
    if (ar.currentline <= 0) continue; /* a C function */
    lua_getinfo(L, "S", &ar);
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
    return;
  }
  lua_pushliteral(L, "");
}

int ltb_error(lua_State *L, const char *fmt, ...) {
  push_user_where(L);
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_concat(L, 2);
  return lua_error(L);
}

int ltb_raise(lua_State *L, lt_status st) {
  /* Copy the engine's message first: listing the largest tensors must not
   * overwrite it. */
  push_user_where(L);
  lua_pushstring(L, lt_last_error());
  if (st != LT_ERR_OOM) {
    lua_concat(L, 2);
    return lua_error(L);
  }
  ltb_push_oom_details(L);
  lua_concat(L, 3);
  return lua_error(L);
}

static const char *value_text(lua_State *L, int arg) {
  if (lua_type(L, arg) == LUA_TNUMBER) return luaL_tolstring(L, arg, NULL); /* a copy */
  return luaL_typename(L, arg);
}

lua_Integer ltb_check_integer(lua_State *L, int arg, const char *op, const char *what) {
  int is_int;
  lua_Integer v = lua_tointegerx(L, arg, &is_int);
  if (!is_int || lua_type(L, arg) != LUA_TNUMBER)
    ltb_error(L, "%s: expected an integer for %s, got %s", op, what, value_text(L, arg));
  return v;
}

lua_Integer ltb_opt_integer(lua_State *L, int arg, const char *op, const char *what,
                            lua_Integer def) {
  return lua_isnoneornil(L, arg) ? def : ltb_check_integer(L, arg, op, what);
}

double ltb_check_number(lua_State *L, int arg, const char *op, const char *what) {
  if (lua_type(L, arg) != LUA_TNUMBER)
    ltb_error(L, "%s: expected a number for %s, got %s", op, what, luaL_typename(L, arg));
  return lua_tonumber(L, arg);
}

int ltb_wrap_dim(lua_State *L, lua_Integer dim, int ndim, const char *op) {
  int out;
  if (dim == 0) {
    int n = ndim > 0 ? ndim : 1;
    return ltb_error(L, "%s: dimension 0 out of range (expected 1 to %d, or -%d to -1)", op, n, n);
  }
  /* The engine takes 0-based dims and negative ones counted from the end. */
  lt_status st = lt_wrap_dim(op, dim > 0 ? dim - 1 : dim, ndim, &out);
  if (st != LT_OK) ltb_raise(L, st);
  return out;
}

int ltb_check_dim(lua_State *L, int arg, int ndim, const char *op) {
  return ltb_wrap_dim(L, ltb_check_integer(L, arg, op, "a dimension"), ndim, op);
}

/* A table holds sizes when it has an array part or is empty; a table with
 * only named keys is an options table. */
static bool is_list_table(lua_State *L, int idx) {
  if (lua_rawlen(L, idx) > 0) return true;
  lua_pushnil(L);
  if (lua_next(L, idx) == 0) return true;
  lua_pop(L, 2);
  return false;
}

static int64_t read_size(lua_State *L, int idx, const char *op, int position, bool allow_infer) {
  int is_int;
  lua_Integer v = lua_tointegerx(L, idx, &is_int);
  if (!is_int || lua_type(L, idx) != LUA_TNUMBER)
    ltb_error(L, "%s: size %d must be an integer, got %s", op, position, value_text(L, idx));
  if (v < 0 && !(allow_infer && v == -1))
    ltb_error(L, "%s: invalid size %I in dimension %d", op, v, position);
  return (int64_t)v;
}

static void too_many_dims(lua_State *L, const char *op, lua_Integer n) {
  ltb_error(L, "%s: %I dimensions requested, lt supports at most %d", op, n, LT_MAX_DIMS);
}

int ltb_check_sizes(lua_State *L, int first, const char *op, bool allow_infer, int64_t *shape,
                    int *ndim) {
  if (lua_type(L, first) == LUA_TTABLE && is_list_table(L, first)) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, first);
    if (len > LT_MAX_DIMS) too_many_dims(L, op, len);
    for (int i = 0; i < (int)len; i++) {
      lua_rawgeti(L, first, i + 1);
      shape[i] = read_size(L, -1, op, i + 1, allow_infer);
      lua_pop(L, 1);
    }
    *ndim = (int)len;
    return first + 1;
  }
  int top = lua_gettop(L), n = 0, i = first;
  for (; i <= top && lua_type(L, i) == LUA_TNUMBER; i++, n++) {
    if (n == LT_MAX_DIMS) too_many_dims(L, op, top - first + 1);
    shape[n] = read_size(L, i, op, n + 1, allow_infer);
  }
  if (i <= top && !lua_isnil(L, i) && !lua_istable(L, i))
    ltb_error(L, "%s: expected sizes as integers or a table, got %s", op, luaL_typename(L, i));
  *ndim = n;
  return i;
}

int ltb_check_dims(lua_State *L, int first, int ndim, const char *op, int *dims, int *count) {
  int n = 0;
  if (lua_type(L, first) == LUA_TTABLE) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, first);
    if (len > LT_MAX_DIMS) too_many_dims(L, op, len);
    for (int i = 0; i < (int)len; i++) {
      lua_rawgeti(L, first, i + 1);
      dims[n++] = ltb_wrap_dim(L, ltb_check_integer(L, -1, op, "a dimension"), ndim, op);
      lua_pop(L, 1);
    }
    *count = n;
    return first + 1;
  }
  int top = lua_gettop(L), i = first;
  for (; i <= top && lua_type(L, i) == LUA_TNUMBER; i++) {
    if (n == LT_MAX_DIMS) too_many_dims(L, op, top - first + 1);
    dims[n++] = ltb_check_dim(L, i, ndim, op);
  }
  if (i <= top && !lua_isnil(L, i))
    ltb_error(L, "%s: expected dimensions as integers or a table, got %s", op,
               luaL_typename(L, i));
  *count = n;
  return i;
}

lt_dtype ltb_check_dtype(lua_State *L, int idx, const char *op) {
  lt_dtype dt;
  const char *name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  if (!name) ltb_error(L, "%s: expected a dtype name, got %s", op, luaL_typename(L, idx));
  if (!lt_dtype_parse(name, &dt))
    ltb_error(L,
               "%s: unknown dtype '%s' (expected float32, float64, float16, bfloat16, int64, "
               "int32, uint8 or bool)",
               op, name);
  return dt;
}

void ltb_require_device(lua_State *L, lt_device dev, const char *op) {
  if (dev.type != LT_DEVICE_CUDA) return;
  if (!lt_cuda_compiled())
    ltb_error(L, "%s: CUDA is not available: lt was built without the CUDA backend", op);
  int count = lt_cuda_device_count();
  if (dev.index >= count)
    ltb_error(L, "%s: CUDA is not available: no device cuda:%d (%d CUDA device%s found)", op,
               (int)dev.index, count, count == 1 ? "" : "s");
}

lt_device ltb_parse_device(lua_State *L, const char *name, const char *op) {
  lt_device dev;
  if (!lt_device_parse(name, &dev))
    ltb_error(L, "%s: unknown device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")", op, name);
  return dev;
}

const char *ltb_check_path(lua_State *L, int idx, const char *op) {
  size_t len;
  const char *path = luaL_checklstring(L, idx, &len);
  /* The C library would stop at the NUL and open another file. */
  if (strlen(path) != len) ltb_error(L, "%s: the path contains a NUL character", op);
  return path;
}

lt_device ltb_check_device(lua_State *L, int idx, const char *op) {
  if (lua_type(L, idx) != LUA_TSTRING)
    ltb_error(L, "%s: expected a device name, got %s", op, luaL_typename(L, idx));
  lt_device dev = ltb_parse_device(L, lua_tostring(L, idx), op);
  ltb_require_device(L, dev, op);
  return dev;
}

lt_device ltb_opt_device(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) {
    /* lt.default_device (set by `lt --device cuda`), else the CPU: under
     * --device cuda, lt.memory.max_allocated() means the GPU, as
     * torch.cuda.max_memory_allocated() means the current CUDA device. */
    const int top = lua_gettop(L);
    lt_device dev = lt_cpu();
    if (lua_getglobal(L, "lt") == LUA_TTABLE && lua_getfield(L, -1, "default_device") == LUA_TSTRING)
      dev = ltb_parse_device(L, lua_tostring(L, -1), op);
    lua_settop(L, top);
    return dev;
  }
  if (lua_type(L, idx) != LUA_TSTRING)
    ltb_error(L, "%s: expected a device name, got %s", op, luaL_typename(L, idx));
  lt_device dev = ltb_parse_device(L, lua_tostring(L, idx), op);
  /* Where CUDA runs, a device it does not have is an error (PyTorch's
   * "Invalid device argument"); without CUDA every CUDA device reads as
   * empty, as torch.cuda's statistics do before CUDA is initialised. */
  if (dev.type == LT_DEVICE_CUDA && lt_cuda_compiled() && lt_cuda_device_count() > 0)
    ltb_require_device(L, dev, op);
  return dev;
}

static bool read_flag(lua_State *L, int idx, const char *op, const char *key) {
  if (!lua_isboolean(L, idx))
    ltb_error(L, "%s: option '%s' must be a boolean, got %s", op, key, luaL_typename(L, idx));
  return lua_toboolean(L, idx);
}

static void unknown_option(lua_State *L, const char *op, const char *key, unsigned allowed) {
  static const struct { unsigned bit; const char *name; } all[] = {
      {LTB_OPT_DTYPE, "dtype"}, {LTB_OPT_DEVICE, "device"}, {LTB_OPT_REQUIRES_GRAD, "requires_grad"},
      {LTB_OPT_COPY, "copy"}, {LTB_OPT_NON_BLOCKING, "non_blocking"}};
  const char *names[sizeof all / sizeof all[0]];
  int n = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (allowed & all[i].bit) names[n++] = all[i].name;
  ltb_unknown_option(L, op, key, names, n);
}

void ltb_read_options(lua_State *L, int idx, const char *op, unsigned allowed, ltb_options *o) {
  memset(o, 0, sizeof *o);
  o->device = lt_cpu();
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx))
    ltb_error(L, "%s: expected an options table, got %s", op, luaL_typename(L, idx));
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    unsigned which = 0;
    if (key && strcmp(key, "dtype") == 0) which = LTB_OPT_DTYPE;
    else if (key && strcmp(key, "device") == 0) which = LTB_OPT_DEVICE;
    else if (key && strcmp(key, "requires_grad") == 0) which = LTB_OPT_REQUIRES_GRAD;
    else if (key && strcmp(key, "copy") == 0) which = LTB_OPT_COPY;
    else if (key && strcmp(key, "non_blocking") == 0) which = LTB_OPT_NON_BLOCKING;
    if (!(which & allowed)) {
      if (key) unknown_option(L, op, key, allowed);
      ltb_error(L, "%s: unexpected %s key in the options table", op, luaL_typename(L, -2));
    }
    switch (which) {
      case LTB_OPT_DTYPE:
        o->dtype = ltb_check_dtype(L, -1, op);
        o->has_dtype = true;
        break;
      case LTB_OPT_DEVICE:
        o->device = ltb_check_device(L, -1, op);
        o->has_device = true;
        break;
      case LTB_OPT_REQUIRES_GRAD: o->requires_grad = read_flag(L, -1, op, key); break;
      case LTB_OPT_NON_BLOCKING: o->non_blocking = read_flag(L, -1, op, key); break;
      default: o->copy = read_flag(L, -1, op, key); break;
    }
    lua_pop(L, 1);
  }
}

void ltb_push_dtype(lua_State *L, lt_dtype dt) {
  /* Static names: Lua's string cache finds them by address, no hashing. */
  lua_pushstring(L, lt_dtype_name(dt));
}

void ltb_push_device(lua_State *L, lt_device dev) {
  static const char *const cuda_names[LT_MAX_DEVICES] = {
      "cuda:0", "cuda:1", "cuda:2",  "cuda:3",  "cuda:4",  "cuda:5",  "cuda:6",  "cuda:7",
      "cuda:8", "cuda:9", "cuda:10", "cuda:11", "cuda:12", "cuda:13", "cuda:14", "cuda:15"};
  if (dev.type == LT_DEVICE_CPU || dev.index < 0 || dev.index >= LT_MAX_DEVICES)
    lua_pushstring(L, dev.type == LT_DEVICE_CPU ? "cpu" : "cuda");
  else
    lua_pushstring(L, cuda_names[(int)dev.index]);
}

void ltb_check_grad_dtype(lua_State *L, lt_dtype dt, const char *op) {
  if (!lt_dtype_is_floating(dt))
    ltb_error(L, "%s: only floating point tensors can require gradients, got %s", op,
               lt_dtype_name(dt));
}

void ltb_register_guard(lua_State *L, const char *name, lua_CFunction close,
                        lua_CFunction tostring) {
  if (luaL_newmetatable(L, name)) {
    lua_pushcfunction(L, close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
    lua_newtable(L);
    lua_pushcfunction(L, close);
    lua_setfield(L, -2, "close");
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}
