/* Opening lt into the state; see lt_env.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lt/alloc.h"
#include "lt_bindings.h"
#include "lt_env.h"
#include "runner.h"

#ifndef LT_LUA_DIR
#error "LT_LUA_DIR (the source tree's lua/ directory) must be defined by the build"
#endif

/* The directory holding the running executable: /proc/self/exe where there is one, else
 * argv[0] when it names a path. Returns 0 when unknown. */
static int executable_dir(const char *exe_path, char *dir, size_t size) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) {
    path[n] = '\0';
  } else if (exe_path != NULL && strchr(exe_path, '/') != NULL) {
    snprintf(path, sizeof path, "%s", exe_path); /* relative to the working directory */
  } else {
    return 0;
  }
  char *slash = strrchr(path, '/');
  if (slash == NULL || (size_t)(slash - path) >= size) return 0;
  *slash = '\0';
  snprintf(dir, size, "%s", path[0] != '\0' ? path : "/");
  return 1;
}

/* Where the Lua library may sit beside the executable's directory: an installed tree
 * (P/bin/lt, P/share/lua/5.4/lt; cmake/install.cmake), then a side-by-side one. */
static const char *const relative_lua_dirs[] = {"../share/lua/5.4", "../lua"};

/* Pushes the lua directory: the first of relative_lua_dirs that holds lt/init.lua, else
 * the source tree's lua/ the build was configured with (a build directory outside the
 * source tree). */
static void push_lua_dir(lua_State *L, const char *exe_path) {
  char exe_dir[PATH_MAX];
  if (executable_dir(exe_path, exe_dir, sizeof exe_dir)) {
    for (size_t i = 0; i < sizeof relative_lua_dirs / sizeof relative_lua_dirs[0]; i++) {
      const char *dir = lua_pushfstring(L, "%s/%s", exe_dir, relative_lua_dirs[i]);
      const char *probe = lua_pushfstring(L, "%s/lt/init.lua", dir);
      int found = access(probe, R_OK) == 0;
      lua_pop(L, 1);
      if (found) return;
      lua_pop(L, 1);
    }
  }
  lua_pushstring(L, LT_LUA_DIR);
}

/* package.path = "<dir>/?.lua;<dir>/?/init.lua;" .. package.path, dir on the top. */
static void prepend_package_path(lua_State *L) {
  const char *dir = lua_tostring(L, -1);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 3);
}

static void register_core_preload(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_lt_core);
  lua_setfield(L, -2, "lt.core");
  lua_pop(L, 1);
}

int lt_env_open(lua_State *L, const char *exe_path) {
  luaL_openlibs(L);
  register_core_preload(L);
  push_lua_dir(L, exe_path);
  prepend_package_path(L);

  lua_getglobal(L, "require");
  lua_pushliteral(L, "lt");
  int status = runner_call(L, 1, 1);
  if (status != LUA_OK) {
    runner_report(L, status);
    return 0;
  }
  lua_setglobal(L, "lt");
  return 1;
}

/* Pushes lt.<name> (or lt.<table>.<name>), nil when any part is missing. */
static int push_lt_field(lua_State *L, const char *table, const char *name) {
  if (lua_getglobal(L, "lt") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return LUA_TNIL;
  }
  if (table != NULL) {
    if (lua_getfield(L, -1, table) != LUA_TTABLE) {
      lua_pop(L, 2);
      lua_pushnil(L);
      return LUA_TNIL;
    }
    lua_remove(L, -2);
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  return lua_type(L, -1);
}

int lt_env_set_threads(lua_State *L, int threads) {
  if (push_lt_field(L, NULL, "set_num_threads") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    runner_message("--threads: lt.set_num_threads is not available");
    return 0;
  }
  lua_pushinteger(L, threads);
  if (lua_pcall(L, 1, 0, 0) == LUA_OK) return 1;
  /* As a bad --device: the option and the reason (the system cannot start that
   * many threads), no traceback. */
  const char *reason = lua_tostring(L, -1);
  char msg[512];
  snprintf(msg, sizeof msg, "--threads %d: %s", threads, reason != NULL ? reason : "error");
  lua_pop(L, 1);
  runner_message(msg);
  return 0;
}

/* Whether lt.cuda.is_available() returns true; errors count as no. */
static int cuda_is_available(lua_State *L) {
  if (push_lt_field(L, "cuda", "is_available") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return 0;
  }
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    return 0;
  }
  int available = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return available;
}

static int is_cuda_name(const char *device) {
  if (strncmp(device, "cuda", 4) != 0) return 0;
  if (device[4] == '\0') return 1;
  if (device[4] != ':' || device[5] == '\0') return 0;
  for (const char *p = device + 5; *p != '\0'; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

int lt_env_set_device(lua_State *L, const char *device) {
  char msg[256];
  if (is_cuda_name(device)) {
    if (!cuda_is_available(L)) {
      snprintf(msg, sizeof msg, "--device %s: CUDA is not available (no CUDA device found, or lt was built without CUDA)", device);
      runner_message(msg);
      return 0;
    }
  } else if (strcmp(device, "cpu") != 0) {
    snprintf(msg, sizeof msg, "--device %s: unknown device (expected cpu or cuda)", device);
    runner_message(msg);
    return 0;
  }
  lua_getglobal(L, "lt");
  lua_pushstring(L, device);
  lua_setfield(L, -2, "default_device");
  lua_pop(L, 1);
  return 1;
}

int lt_env_check_memory_report(lua_State *L) {
  int type = push_lt_field(L, "memory", "report");
  lua_pop(L, 1);
  if (type != LUA_TFUNCTION) {
    runner_message("--memory-report: lt.memory.report is not available in this build");
    return 0;
  }
  return 1;
}

int lt_env_start_memory_report(lua_State *L) {
  if (!lt_env_check_memory_report(L)) return 0;
  /* The report is asked for on the command line, so the script need not call
   * lt.memory.record(true) for a timeline (recording costs about 130 ns per
   * allocation and free); a script's own record(true) starts a fresh log. */
  lt_status st = lt_memory_history_start_default();
  if (st != LT_OK) {
    runner_message(lt_last_error());
    return 0;
  }
  return 1;
}

int lt_env_write_memory_report(lua_State *L, const char *path) {
  if (!lt_env_check_memory_report(L)) return 0;
  push_lt_field(L, "memory", "report");
  lua_pushstring(L, path);
  return runner_report(L, runner_call(L, 1, 0)) == LUA_OK;
}
