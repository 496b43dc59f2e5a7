/* Tensor methods: geometry queries, views (1-based dims), conversions
 * (to, float, cuda, ...), copies, and reading values back (item, totable). */
#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

/* ---- geometry ---- */

static int tensor_size(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "size");
  if (lua_isnoneornil(L, 2)) {
    ltb_push_shape(L, t);
    return 1;
  }
  int d = ltb_check_dim(L, 2, t->ndim, "size");
  lua_pushinteger(L, t->ndim == 0 ? 1 : (lua_Integer)t->shape[d]);
  return 1;
}

static int tensor_stride(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "stride");
  if (lua_isnoneornil(L, 2)) {
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
      lua_pushinteger(L, (lua_Integer)t->stride[i]);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  int d = ltb_check_dim(L, 2, t->ndim, "stride");
  lua_pushinteger(L, t->ndim == 0 ? 1 : (lua_Integer)t->stride[d]);
  return 1;
}

static int tensor_dim(lua_State *L) {
  lua_pushinteger(L, ltb_check_tensor(L, 1, "dim")->ndim);
  return 1;
}

static int tensor_numel(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_numel(ltb_check_tensor(L, 1, "numel")));
  return 1;
}

static int tensor_element_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_dtype_size(ltb_check_tensor(L, 1, "element_size")->dtype));
  return 1;
}

static int tensor_nbytes(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_nbytes(ltb_check_tensor(L, 1, "nbytes")));
  return 1;
}

static int tensor_is_contiguous(lua_State *L) {
  lua_pushboolean(L, lt_is_contiguous(ltb_check_tensor(L, 1, "is_contiguous")));
  return 1;
}

static int tensor_requires_grad_(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "requires_grad_");
  bool on = true;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_isboolean(L, 2))
      return ltb_error(L, "requires_grad_: expected a boolean, got %s", luaL_typename(L, 2));
    on = lua_toboolean(L, 2);
  }
  ltb_set_requires_grad(L, t, on, "requires_grad_");
  lua_settop(L, 1);
  return 1;
}

/* ---- views ---- */

static int reshape_like(lua_State *L, const char *op, bool view) {
  lt_tensor *t = ltb_check_tensor(L, 1, op), *out = NULL;
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  int next = ltb_check_sizes(L, 2, op, true, shape, &ndim);
  if (!lua_isnone(L, next))
    return ltb_error(L, "%s: unexpected %s after the sizes", op, luaL_typename(L, next));
  lt_status st = view ? lt_view(t, shape, ndim, &out) : lt_reshape(t, shape, ndim, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_view(lua_State *L) { return reshape_like(L, "view", true); }
static int tensor_reshape(lua_State *L) { return reshape_like(L, "reshape", false); }

static int tensor_expand(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "expand"), *out = NULL;
  int64_t shape[LT_MAX_DIMS];
  int ndim;
  int next = ltb_check_sizes(L, 2, "expand", true, shape, &ndim);
  if (!lua_isnone(L, next))
    return ltb_error(L, "expand: unexpected %s after the sizes", luaL_typename(L, next));
  lt_status st = lt_expand(t, shape, ndim, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_expand_as(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "expand_as"), *out = NULL;
  lt_tensor *o = ltb_check_tensor(L, 2, "expand_as");
  lt_status st = lt_expand(t, o->shape, o->ndim, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_view_as(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "view_as"), *out = NULL;
  lt_tensor *o = ltb_check_tensor(L, 2, "view_as");
  lt_status st = lt_view(t, o->shape, o->ndim, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_transpose(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "transpose"), *out = NULL;
  int d0 = ltb_check_dim(L, 2, t->ndim, "transpose");
  int d1 = ltb_check_dim(L, 3, t->ndim, "transpose");
  lt_status st = lt_transpose(t, d0, d1, &out);
  return ltb_push_result(L, st, out);
}

/* t:t(): the transpose of a matrix (a 0-D or 1-D tensor as it is). */
static int tensor_t(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "t"), *out = NULL;
  if (t->ndim > 2)
    return ltb_error(L, "t: expected a tensor of at most 2 dimensions, got %d", t->ndim);
  lt_status st = t->ndim < 2 ? lt_alias(t, &out) : lt_transpose(t, 0, 1, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_permute(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "permute"), *out = NULL;
  int dims[LT_MAX_DIMS], n;
  ltb_check_dims(L, 2, t->ndim, "permute", dims, &n);
  lt_status st = lt_permute(t, dims, n, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_flatten(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "flatten"), *out = NULL;
  lua_Integer s = ltb_opt_integer(L, 2, "flatten", "the start dimension", 1);
  lua_Integer e = ltb_opt_integer(L, 3, "flatten", "the end dimension", -1);
  int start = ltb_wrap_dim(L, s, t->ndim, "flatten"), end = ltb_wrap_dim(L, e, t->ndim, "flatten");
  lt_status st = lt_flatten(t, start, end, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_unsqueeze(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "unsqueeze"), *out = NULL;
  /* A new dim goes anywhere from before the first (1) to after the last
   * (ndim + 1, also -1). */
  int d = ltb_wrap_dim(L, ltb_check_integer(L, 2, "unsqueeze", "a dimension"), t->ndim + 1,
                       "unsqueeze");
  lt_status st = lt_unsqueeze(t, d, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_squeeze(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "squeeze"), *out = NULL;
  bool all = lua_isnoneornil(L, 2);
  int d = all ? 0 : ltb_check_dim(L, 2, t->ndim, "squeeze");
  lt_status st = all ? lt_squeeze_all(t, &out) : lt_squeeze(t, d, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_narrow(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "narrow"), *out = NULL;
  int d = ltb_check_dim(L, 2, t->ndim, "narrow");
  lua_Integer start = ltb_check_integer(L, 3, "narrow", "the start");
  lua_Integer length = ltb_check_integer(L, 4, "narrow", "the length");
  if (start == 0)
    return ltb_error(L, "narrow: start 0 is out of range for dimension %d (positions start at 1)",
                      d + 1);
  lt_status st = lt_narrow(t, d, start > 0 ? start - 1 : start, length, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_select(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "select"), *out = NULL;
  int d = ltb_check_dim(L, 2, t->ndim, "select");
  lua_Integer i = ltb_check_integer(L, 3, "select", "the index");
  lt_status st = ltb_select(t, d, i, &out);
  return ltb_push_result(L, st, out);
}

/* ---- copies and conversions ---- */

static int tensor_clone(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "clone"), *out = NULL;
  lt_status st = lt_clone(t, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_detach(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "detach"), *out = NULL;
  lt_status st = lt_alias(t, &out);
  return ltb_push_result(L, st, out);
}

static int tensor_contiguous(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "contiguous"), *out = NULL;
  lt_status st = lt_contiguous(t, &out);
  return ltb_push_result_or_self(L, st, out, 1);
}

/* How a conversion runs: copy even when nothing changes; non_blocking lets a
 * pinned host <-> GPU copy return before it is done. */
typedef struct convert_flags {
  bool copy, non_blocking;
} convert_flags;

/* The conversion of t at idx 1 to dev then dt; returns t itself when nothing
 * changes and no copy is asked for. */
static int convert_ex(lua_State *L, lt_tensor *t, bool to_device, lt_device dev, bool to_dtype,
                      lt_dtype dt, convert_flags f) {
  lt_tensor *moved = t, *out = NULL;
  lt_status st = LT_OK;
  bool copy = f.copy;
  if (to_device && !lt_device_eq(dev, t->storage->device)) {
    st = lt_to_device_ex(t, dev, f.non_blocking, &moved);
    if (st != LT_OK) return ltb_raise(L, st);
    copy = false; /* already a new tensor */
  } else {
    lt_tensor_retain(t);
  }
  if (!to_dtype) dt = moved->dtype;
  st = lt_to_dtype(moved, dt, copy, &out);
  lt_tensor_release(moved);
  return ltb_push_result_or_self(L, st, out, 1);
}

static int convert(lua_State *L, lt_tensor *t, bool to_device, lt_device dev, bool to_dtype,
                   lt_dtype dt, bool copy) {
  convert_flags f = {copy, false};
  return convert_ex(L, t, to_device, dev, to_dtype, dt, f);
}

/* The flags of an optional {copy=, non_blocking=} table at idx. */
static convert_flags read_convert_flags(lua_State *L, int idx, const char *op) {
  ltb_options o;
  ltb_read_options(L, idx, op, LTB_OPT_COPY | LTB_OPT_NON_BLOCKING, &o);
  convert_flags f = {o.copy, o.non_blocking};
  return f;
}

/* t:to("float16") / t:to("cuda" [, {non_blocking=, copy=}]) / t:to(other) /
 * t:to({dtype=, device=, copy=, non_blocking=}) */
static int tensor_to(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "to");
  lt_tensor *other = ltb_test_tensor(L, 2);
  if (other) return convert(L, t, true, other->storage->device, true, other->dtype, false);
  if (lua_type(L, 2) == LUA_TSTRING) {
    const char *name = lua_tostring(L, 2);
    lt_dtype dt = t->dtype;
    lt_device dev = t->storage->device;
    if (lt_dtype_parse(name, &dt)) return convert(L, t, false, dev, true, dt, false);
    if (lt_device_parse(name, &dev)) {
      ltb_require_device(L, dev, "to");
      return convert_ex(L, t, true, dev, false, dt, read_convert_flags(L, 3, "to"));
    }
    return ltb_error(L, "to: unknown dtype or device '%s'", name);
  }
  if (!lua_istable(L, 2))
    return ltb_error(L, "to: expected a dtype, a device, a tensor or an options table, got %s",
                      luaL_typename(L, 2));
  ltb_options o;
  ltb_read_options(L, 2, "to", LTB_OPT_DTYPE | LTB_OPT_DEVICE | LTB_OPT_COPY | LTB_OPT_NON_BLOCKING,
                   &o);
  convert_flags f = {o.copy, o.non_blocking};
  return convert_ex(L, t, o.has_device, o.device, o.has_dtype, o.dtype, f);
}

/* t:float(), t:half(), ...: the dtype is the closure's upvalue. */
static int tensor_to_dtype(lua_State *L) {
  lt_dtype dt = (lt_dtype)lua_tointeger(L, lua_upvalueindex(1));
  lt_tensor *t = ltb_check_tensor(L, 1, lt_dtype_name(dt));
  lt_device unused = lt_cpu();
  return convert(L, t, false, unused, true, dt, false);
}

/* t:cuda([device] [, {non_blocking=}]) */
static int tensor_cuda(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "cuda");
  lt_device dev;
  if (lua_istable(L, 2)) { /* t:cuda{non_blocking = true}: the options move to 3 */
    lua_pushnil(L);
    lua_insert(L, 2);
  }
  if (lua_isnoneornil(L, 2)) {
    dev.type = LT_DEVICE_CUDA;
    dev.index = 0;
    ltb_require_device(L, dev, "cuda");
    dev.index = (signed char)lt_cuda_current_device();
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    dev.type = LT_DEVICE_CUDA;
    lua_Integer i = ltb_check_integer(L, 2, "cuda", "the device index");
    if (i < 0 || i >= LT_MAX_DEVICES) return ltb_error(L, "cuda: invalid device index %I", i);
    dev.index = (signed char)i;
  } else {
    dev = ltb_check_device(L, 2, "cuda");
  }
  ltb_require_device(L, dev, "cuda");
  return convert_ex(L, t, true, dev, false, t->dtype, read_convert_flags(L, 3, "cuda"));
}

/* t:pin_memory(): t in page-locked host memory (torch's pin_memory). */
static int tensor_pin_memory(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "pin_memory"), *out = NULL;
  lt_status st = lt_pin_memory(t, &out);
  return ltb_push_result_or_self(L, st, out, 1);
}

static int tensor_is_pinned(lua_State *L) {
  lua_pushboolean(L, lt_is_pinned(ltb_check_tensor(L, 1, "is_pinned")));
  return 1;
}

static int tensor_cpu(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "cpu");
  return convert(L, t, true, lt_cpu(), false, t->dtype, false);
}

/* ---- values back to Lua ---- */

static void push_element(lua_State *L, const void *p, lt_dtype dt) {
  if (dt == LT_BOOL) lua_pushboolean(L, lt_load_int64(p, dt) != 0);
  else if (lt_dtype_is_integral(dt)) lua_pushinteger(L, (lua_Integer)lt_load_int64(p, dt));
  else lua_pushnumber(L, (lua_Number)lt_load_double(p, dt));
}

/* Integers for integer dtypes, a boolean for bool, a float otherwise. */
static int tensor_item(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "item");
  lt_status st;
  if (t->dtype == LT_BOOL || lt_dtype_is_integral(t->dtype)) {
    int64_t v;
    st = lt_item_int64(t, &v);
    if (st != LT_OK) return ltb_raise(L, st);
    if (t->dtype == LT_BOOL) lua_pushboolean(L, v != 0);
    else lua_pushinteger(L, (lua_Integer)v);
  } else {
    double v;
    st = lt_item(t, &v);
    if (st != LT_OK) return ltb_raise(L, st);
    lua_pushnumber(L, (lua_Number)v);
  }
  return 1;
}

static void push_nested(lua_State *L, const lt_tensor *t, const char *p, int d, size_t esize) {
  if (d == t->ndim) {
    push_element(L, p, t->dtype);
    return;
  }
  int64_t n = t->shape[d];
  lua_createtable(L, n > 0 && n < (1 << 26) ? (int)n : 0, 0);
  for (int64_t i = 0; i < n; i++) {
    push_nested(L, t, p + (ptrdiff_t)(i * t->stride[d]) * (ptrdiff_t)esize, d + 1, esize);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* Nested tables of the values; a 0-dim tensor gives its number. */
static int tensor_totable(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "totable");
  if (t->storage->meta || lt_estimating())
    return ltb_error(L, "totable: no values inside lt.memory.estimate (its tensors are shapes "
                        "without data)");
  if (t->storage->device.type != LT_DEVICE_CPU) {
    /* Read from a CPU copy owned by a handle, so that an error cannot leak it. */
    ltb_handle *h = ltb_new_handle(L);
    lt_tensor *c = NULL;
    lt_status st = lt_to_device(t, lt_cpu(), &c);
    if (st != LT_OK) return ltb_raise(L, st);
    h->tensor = c;
    t = c;
  }
  luaL_checkstack(L, LT_MAX_DIMS + 4, "totable");
  push_nested(L, t, lt_data(t), 0, lt_dtype_size(t->dtype));
  return 1;
}

void ltb_open_tensor_methods(lua_State *L, int methods_idx, int core_idx) {
  static const luaL_Reg methods[] = {
      {"size", tensor_size},
      {"stride", tensor_stride},
      {"dim", tensor_dim},
      {"numel", tensor_numel},
      {"element_size", tensor_element_size},
      {"nbytes", tensor_nbytes},
      {"is_contiguous", tensor_is_contiguous},
      {"requires_grad_", tensor_requires_grad_},
      {"view", tensor_view},
      {"reshape", tensor_reshape},
      {"expand", tensor_expand},
      {"expand_as", tensor_expand_as},
      {"view_as", tensor_view_as},
      {"transpose", tensor_transpose},
      {"t", tensor_t},
      {"permute", tensor_permute},
      {"flatten", tensor_flatten},
      {"unsqueeze", tensor_unsqueeze},
      {"squeeze", tensor_squeeze},
      {"narrow", tensor_narrow},
      {"select", tensor_select},
      {"clone", tensor_clone},
      {"detach", tensor_detach},
      {"contiguous", tensor_contiguous},
      {"to", tensor_to},
      {"pin_memory", tensor_pin_memory},
      {"is_pinned", tensor_is_pinned},
      {"cuda", tensor_cuda},
      {"cpu", tensor_cpu},
      {"item", tensor_item},
      {"totable", tensor_totable},
      {NULL, NULL},
  };
  methods_idx = lua_absindex(L, methods_idx);
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  static const struct {
    const char *name;
    lt_dtype dtype;
  } casts[] = {{"float", LT_FLOAT32}, {"double", LT_FLOAT64}, {"half", LT_FLOAT16},
               {"bfloat16", LT_BFLOAT16}, {"long", LT_INT64},  {"int", LT_INT32},
               {"byte", LT_UINT8},      {"bool", LT_BOOL}};
  for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
    lua_pushinteger(L, casts[i].dtype);
    lua_pushcclosure(L, tensor_to_dtype, 1);
    lua_setfield(L, -2, casts[i].name);
  }
  lua_pop(L, 1);
  (void)core_idx;
}
