/* luaopen_lt_core: the lt.core table (tensor functions, lt.memory, lt.cuda,
 * threads and seeding) and the tensor metatable. lua/lt/init.lua builds the
 * public lt table on it. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "lt_bindings.h"
#include "memory.h"
#include "tensor_handle.h"

static int lt_manual_seed_fn(lua_State *L) {
  lua_Integer seed = ltb_check_integer(L, 1, "manual_seed", "the seed");
  lt_manual_seed((uint64_t)seed);
  return 0;
}

static int lt_set_num_threads_fn(lua_State *L) {
  lua_Integer n = ltb_check_integer(L, 1, "set_num_threads", "the number of threads");
  if (n < 1 || n > 4096)
    return ltb_error(L, "set_num_threads: expected a number of threads from 1 to 4096, got %I", n);
  lt_status st = lt_set_num_threads((int)n);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static int lt_get_num_threads_fn(lua_State *L) {
  lua_pushinteger(L, lt_get_num_threads());
  return 1;
}

static int lt_is_tensor_fn(lua_State *L) {
  lua_pushboolean(L, ltb_test_handle(L, 1) != NULL);
  return 1;
}

/* ---- lt.cuda ---- */

static int cuda_is_available(lua_State *L) {
  lua_pushboolean(L, lt_cuda_is_available());
  return 1;
}

static int cuda_device_count(lua_State *L) {
  lua_pushinteger(L, lt_cuda_device_count());
  return 1;
}

static void require_cuda(lua_State *L, const char *op) {
  lt_device dev = {LT_DEVICE_CUDA, 0};
  ltb_require_device(L, dev, op);
}

static int cuda_synchronize(lua_State *L) {
  require_cuda(L, "cuda.synchronize");
  lt_status st = lt_cuda_synchronize();
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* Device numbers follow the device names ("cuda:0"): they start at 0. */
static int cuda_set_device(lua_State *L) {
  lt_device dev;
  if (lua_type(L, 1) == LUA_TSTRING) {
    dev = ltb_check_device(L, 1, "cuda.set_device");
    if (dev.type != LT_DEVICE_CUDA)
      return ltb_error(L, "cuda.set_device: expected a CUDA device, got '%s'", lua_tostring(L, 1));
  } else {
    lua_Integer i = ltb_check_integer(L, 1, "cuda.set_device", "the device number");
    if (i < 0 || i >= LT_MAX_DEVICES)
      return ltb_error(L, "cuda.set_device: invalid device number %I", i);
    dev.type = LT_DEVICE_CUDA;
    dev.index = (signed char)i;
    ltb_require_device(L, dev, "cuda.set_device");
  }
  lt_status st = lt_cuda_set_device(dev.index);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static int cuda_current_device(lua_State *L) {
  require_cuda(L, "cuda.current_device");
  lua_pushinteger(L, lt_cuda_current_device());
  return 1;
}

/* Empties the cache of every CUDA device (nothing without CUDA); returns bytes. */
static int cuda_empty_cache(lua_State *L) {
  size_t total = 0;
  if (lt_cuda_is_available()) {
    int n = lt_cuda_device_count();
    for (int i = 0; i < n && i < LT_MAX_DEVICES; i++) {
      lt_device dev = {LT_DEVICE_CUDA, (signed char)i};
      total += lt_empty_cache(dev);
    }
  }
  lua_pushinteger(L, (lua_Integer)total);
  return 1;
}

/* allow_tf32{matmul = bool, cudnn = bool}: sets the switches given (either
 * may be left out; they work in every build) and returns a table of both. */
static int cuda_allow_tf32(lua_State *L) {
  const char *op = "cuda.allow_tf32";
  if (!lua_isnoneornil(L, 1)) {
    luaL_argexpected(L, lua_istable(L, 1), 1, "an options table {matmul=, cudnn=}");
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (!key || (strcmp(key, "matmul") != 0 && strcmp(key, "cudnn") != 0))
        return ltb_error(L, "%s: unknown option '%s' (expected matmul or cudnn)", op,
                          key ? key : luaL_typename(L, -2));
      if (!lua_isboolean(L, -1))
        return ltb_error(L, "%s: %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
      if (key[0] == 'm')
        lt_cuda_set_matmul_tf32(lua_toboolean(L, -1));
      else
        lt_cuda_set_cudnn_tf32(lua_toboolean(L, -1));
      lua_pop(L, 1);
    }
  }
  lua_createtable(L, 0, 2);
  lua_pushboolean(L, lt_cuda_matmul_tf32());
  lua_setfield(L, -2, "matmul");
  lua_pushboolean(L, lt_cuda_cudnn_tf32());
  lua_setfield(L, -2, "cudnn");
  return 1;
}

/* mem_get_info([device]) -> free, total: the driver's figures
 * (cudaMemGetInfo), as torch.cuda.mem_get_info. */
static int cuda_mem_get_info(lua_State *L) {
  const char *op = "cuda.mem_get_info";
  lt_device dev = {LT_DEVICE_CUDA, 0};
  if (lua_isnoneornil(L, 1)) {
    require_cuda(L, op);
    dev.index = (signed char)lt_cuda_current_device();
  } else {
    dev = ltb_check_device(L, 1, op);
    if (dev.type != LT_DEVICE_CUDA)
      return ltb_error(L, "%s: expected a CUDA device, got '%s'", op, lua_tostring(L, 1));
    ltb_require_device(L, dev, op);
  }
  size_t dev_free = 0, dev_total = 0;
  if (!lt_device_memory_info(dev, &dev_free, &dev_total)) {
    const char *why = lt_cuda_last_alloc_error();
    return ltb_error(L, "%s: %s", op, why ? why : "cudaMemGetInfo failed");
  }
  lua_pushinteger(L, (lua_Integer)dev_free);
  lua_pushinteger(L, (lua_Integer)dev_total);
  return 2;
}

static const luaL_Reg cuda_functions[] = {
    {"allow_tf32", cuda_allow_tf32},
    {"mem_get_info", cuda_mem_get_info},
    {"is_available", cuda_is_available},
    {"device_count", cuda_device_count},
    {"synchronize", cuda_synchronize},
    {"set_device", cuda_set_device},
    {"current_device", cuda_current_device},
    {"empty_cache", cuda_empty_cache},
    {NULL, NULL},
};

static const luaL_Reg core_functions[] = {
    {"manual_seed", lt_manual_seed_fn},
    {"set_num_threads", lt_set_num_threads_fn},
    {"get_num_threads", lt_get_num_threads_fn},
    {"is_tensor", lt_is_tensor_fn},
    {"_set_data", ltb_set_data},
    {"_set_error_where", ltb_set_error_where},
    {"_set_forward_caller", ltb_set_forward_caller},
    {NULL, NULL},
};

/* Puts the Lua library next to this module on package.path when missing, so
 * that lt.core loaded by any means can reach the Lua files of lua/lt. */
static void add_lua_dir_to_path(lua_State *L) {
#ifdef LT_LUA_DIR
  if (lua_getglobal(L, "package") != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "path");
  const char *path = lua_tostring(L, -1);
  if (path && !strstr(path, LT_LUA_DIR "/?.lua")) {
    lua_pushfstring(L, "%s;%s/?.lua;%s/?/init.lua", path, LT_LUA_DIR, LT_LUA_DIR);
    lua_setfield(L, -3, "path");
  }
  lua_pop(L, 2);
#else
  (void)L;
#endif
}

/* When the Lua state closes: the cached memory goes back to the system. Under
 * plain lua5.4, lua_close then unloads core.so, and blocks that only its
 * statics still pointed to would be lost; an embedder closing states would
 * lose them each time. The sentinel is made before any tensor handle and Lua
 * finalizes in reverse order, so every handle is gone by then. */
static int release_caches(lua_State *L) {
  (void)L;
  lt_empty_cache(lt_cpu());
  lt_empty_cache(lt_pinned_pool());
  int n = lt_cuda_is_available() ? lt_cuda_device_count() : 0;
  for (int i = 0; i < n && i < LT_MAX_DEVICES; i++) {
    lt_device dev = {LT_DEVICE_CUDA, (signed char)i};
    lt_empty_cache(dev);
  }
  return 0;
}

static void release_caches_on_close(lua_State *L) {
  lua_newuserdatauv(L, 0, 0);
  lua_newtable(L);
  lua_pushcfunction(L, release_caches);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "lt.release_caches");
}

int luaopen_lt_core(lua_State *L) {
  /* Generational collection: the peak hook (bindings/memory.c) tries a
   * young collection first, which finds a dropped result or a step's
   * temporaries for a few microseconds, and falls back to a full collection
   * when they are not enough (tensor handles that lived through a training
   * step are old: a young collection does not see them dropped). */
  lua_gc(L, LUA_GCGEN, 0, 0);
  release_caches_on_close(L);
  add_lua_dir_to_path(L);
  luaL_newlib(L, core_functions);
  int core = lua_gettop(L);
  lua_newtable(L); /* the tensor methods, also lt.Tensor for Lua code to extend */
  int methods = lua_gettop(L);
  ltb_open_tensor_methods(L, methods, core);
  ltb_open_tensor_math(L, methods, core);
  ltb_open_tensor_reduce(L, methods, core);
  ltb_open_tensor_create(L, methods, core);
  ltb_open_io(L, methods, core);
  ltb_open_tensor_sort(L, methods, core);
  ltb_open_autograd(L, methods, core);
  ltb_open_tensor_handle(L, methods);
  lua_setfield(L, core, "Tensor");
  ltb_open_memory(L, core);
  ltb_open_nn(L, core);
  ltb_open_autocast(L, core);
  ltb_open_category(L, core);
  ltb_open_grad_handle(L, core);
  ltb_open_slicing(L, core);
  ltb_open_optim(L, core);
  ltb_open_system(L, core);
  ltb_open_distributed(L, core);
  ltb_open_data_io(L, core);
  ltb_open_closest(L, core);
  luaL_newlib(L, cuda_functions);
  lua_getfield(L, core, "Tensor"); /* streams add t:record_stream */
  ltb_open_cuda_stream(L, -1, -2);
  lua_pop(L, 1);
  lua_setfield(L, core, "cuda");
  lua_pushliteral(L, LT_VERSION);
  lua_setfield(L, core, "version");
  return 1;
}
