/* Autocast seen from Lua: lt.autocast(opts, fn, ...) runs fn in a region,
 * lt.autocast(opts) returns a guard for `local g <close> = ...`;
 * lt.is_autocast_enabled and lt.get_autocast_dtype; core._autocast_state
 * and core._autocast_cache_size for lt.checkpoint and the tests.
 * opts: {dtype="bfloat16"|"float16", enabled=true, device_type="cpu"|"cuda"};
 * dtype defaults to the device type's (bfloat16 on the CPU, float16 on CUDA). */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "lt/autocast.h"

#define AUTOCAST_GUARD_NAME "lt.AutocastGuard"

typedef struct region_options {
  bool enabled;
  lt_device_type device_type;
  lt_dtype dtype;
} region_options;

static const char *device_type_name(lt_device_type t) { return t == LT_DEVICE_CUDA ? "cuda" : "cpu"; }

static lt_device_type check_device_type(lua_State *L, int idx) {
  const char *name = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
  if (name && strcmp(name, "cpu") == 0) return LT_DEVICE_CPU;
  if (name && strcmp(name, "cuda") == 0) return LT_DEVICE_CUDA;
  return (lt_device_type)ltb_error(L, "autocast: device_type must be \"cpu\" or \"cuda\", got %s",
                                    name ? lua_pushfstring(L, "'%s'", name) : luaL_typename(L, idx));
}

static region_options read_region_options(lua_State *L, int idx) {
  region_options o = {true, LT_DEVICE_CPU, LT_NDTYPES};
  if (lua_isnoneornil(L, idx)) {
    o.dtype = lt_autocast_default_dtype(o.device_type);
    return o;
  }
  luaL_argexpected(L, lua_istable(L, idx), idx, "an options table");
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    if (key && strcmp(key, "enabled") == 0) {
      if (!lua_isboolean(L, -1))
        ltb_error(L, "autocast: enabled must be a boolean, got %s", luaL_typename(L, -1));
      o.enabled = lua_toboolean(L, -1);
    } else if (key && strcmp(key, "dtype") == 0) {
      o.dtype = ltb_check_dtype(L, lua_gettop(L), "autocast");
    } else if (key && strcmp(key, "device_type") == 0) {
      o.device_type = check_device_type(L, lua_gettop(L));
    } else {
      ltb_error(L, "autocast: unknown option '%s' (expected dtype, enabled, device_type)",
                 key ? key : luaL_typename(L, -2));
    }
    lua_pop(L, 1);
  }
  if (o.dtype == LT_NDTYPES) o.dtype = lt_autocast_default_dtype(o.device_type);
  if (o.dtype != LT_FLOAT16 && o.dtype != LT_BFLOAT16)
    ltb_error(L, "autocast: dtype must be \"bfloat16\" or \"float16\", got %s",
               lt_dtype_name(o.dtype));
  return o;
}

/* ---- the guard ---- */

typedef struct autocast_guard {
  lt_autocast_state saved;
  bool closed;
} autocast_guard;

static int guard_close(lua_State *L) {
  autocast_guard *g = luaL_checkudata(L, 1, AUTOCAST_GUARD_NAME);
  if (!g->closed) {
    g->closed = true;
    lt_autocast_exit(&g->saved);
  }
  return 0;
}

static int guard_tostring(lua_State *L) {
  autocast_guard *g = luaL_checkudata(L, 1, AUTOCAST_GUARD_NAME);
  lua_pushfstring(L, "autocast guard (%s)", g->closed ? "closed" : "open");
  return 1;
}

/* lt.autocast(opts, fn, ...) -> fn's results; lt.autocast(opts) -> a guard. */
static int lt_autocast_fn(lua_State *L) {
  region_options o = read_region_options(L, 1);
  if (lua_isnoneornil(L, 2)) {
    autocast_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->closed = true; /* until the region is entered */
    luaL_setmetatable(L, AUTOCAST_GUARD_NAME);
    lt_status st = lt_autocast_enter(o.enabled, o.device_type, o.dtype, &g->saved);
    if (st != LT_OK) return ltb_raise(L, st);
    g->closed = false;
    return 1;
  }
  const int type = lua_type(L, 2);
  if (type != LUA_TFUNCTION && !luaL_getmetafield(L, 2, "__call"))
    return ltb_error(L, "autocast: expected a function (or nothing, for a guard), got %s",
                      luaL_typename(L, 2));
  if (type != LUA_TFUNCTION) lua_pop(L, 1); /* the __call field */
  lua_remove(L, 1); /* fn and its arguments are left */
  lt_autocast_state saved;
  lt_status st = lt_autocast_enter(o.enabled, o.device_type, o.dtype, &saved);
  if (st != LT_OK) return ltb_raise(L, st);
  const int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  lt_autocast_exit(&saved);
  if (status != LUA_OK) return lua_error(L); /* the same error value, rethrown */
  return lua_gettop(L);
}

/* lt.is_autocast_enabled([device_type]): whether ops (on that device type,
 * or on the region's) are autocast here. */
static int lt_is_autocast_enabled_fn(lua_State *L) {
  lt_autocast_state s = lt_autocast_get();
  lt_device_type t = lua_isnoneornil(L, 1) ? s.device_type : check_device_type(L, 1);
  lua_pushboolean(L, lt_autocast_is_active(t));
  return 1;
}

/* lt.get_autocast_dtype([device_type]): the dtype a region on that device
 * type uses (the default when none is open). */
static int lt_get_autocast_dtype_fn(lua_State *L) {
  lt_autocast_state s = lt_autocast_get();
  lt_device_type t = lua_isnoneornil(L, 1) ? s.device_type : check_device_type(L, 1);
  lua_pushstring(L, lt_dtype_name(s.depth > 0 && s.device_type == t ? s.dtype
                                                                     : lt_autocast_default_dtype(t)));
  return 1;
}

/* core._autocast_state() -> enabled, dtype, device_type of the innermost
 * region (what lt.checkpoint re-enters for its recomputation). */
static int autocast_state_fn(lua_State *L) {
  lt_autocast_state s = lt_autocast_get();
  lua_pushboolean(L, s.depth > 0 && s.enabled);
  lua_pushstring(L, lt_dtype_name(s.depth > 0 ? s.dtype : lt_autocast_default_dtype(s.device_type)));
  lua_pushstring(L, device_type_name(s.device_type));
  return 3;
}

/* core._autocast_ops() -> { {op=, dtype="float32"|"lower", cuda_only=}, ... }:
 * autocast's policy as the engine holds it (tests/lua/amp_spec.lua checks
 * each rule against what the op does). */
static int autocast_ops_fn(lua_State *L) {
  lua_newtable(L);
  lt_autocast_rule rule;
  for (int i = 0; lt_autocast_rule_at(i, &rule); i++) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, rule.op);
    lua_setfield(L, -2, "op");
    lua_pushstring(L, rule.float32 ? "float32" : "lower");
    lua_setfield(L, -2, "dtype");
    lua_pushboolean(L, rule.cuda_only);
    lua_setfield(L, -2, "cuda_only");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int autocast_cache_size_fn(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_autocast_cache_size());
  return 1;
}

void ltb_open_autocast(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  ltb_register_guard(L, AUTOCAST_GUARD_NAME, guard_close, guard_tostring);
  static const luaL_Reg functions[] = {
      {"autocast", lt_autocast_fn},
      {"is_autocast_enabled", lt_is_autocast_enabled_fn},
      {"get_autocast_dtype", lt_get_autocast_dtype_fn},
      {"_autocast_state", autocast_state_fn},
      {"_autocast_cache_size", autocast_cache_size_fn},
      {"_autocast_ops", autocast_ops_fn},
      {NULL, NULL},
  };
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
}
