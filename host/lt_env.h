/* Opening lt into a fresh state: standard libraries, `require "lt"` wired to the linked-in
 * bindings and the Lua library directory, the global `lt`, and lt's own command-line options. */
#ifndef LT_HOST_LT_ENV_H
#define LT_HOST_LT_ENV_H

#include <lua.h>

/* Opens the standard libraries, registers package.preload["lt.core"], puts the lt Lua
 * directory first on package.path and sets the global lt = require "lt". exe_path is argv[0].
 * Reports any failure and returns 0. */
int lt_env_open(lua_State *L, const char *exe_path);

/* --threads N: lt.set_num_threads(N). Reports failure and returns 0. */
int lt_env_set_threads(lua_State *L, int threads);

/* --device NAME: accepts cpu (and cuda[:N] once lt.cuda.is_available() says so) and stores it
 * in lt.default_device. Reports failure and returns 0. */
int lt_env_set_device(lua_State *L, const char *device);

/* --memory-report: whether lt.memory.report exists (checked before the run, so a long run
 * does not end without its report), recording started before the script (so that the page
 * has a timeline), and the call itself once the run is over. */
int lt_env_check_memory_report(lua_State *L);
int lt_env_start_memory_report(lua_State *L);
int lt_env_write_memory_report(lua_State *L, const char *path);

#endif
