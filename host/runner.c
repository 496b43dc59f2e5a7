/* Script, string and library runners; see runner.h. */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "interrupt.h"
#include "runner.h"
#include "version.h"

void runner_message(const char *msg) {
  fprintf(stderr, "%s: %s\n", LT_PROGNAME, msg);
  fflush(stderr);
}

static char last_error[1024];

const char *runner_last_error(void) { return last_error; }

int runner_report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    runner_message(msg);
    snprintf(last_error, sizeof last_error, "%s", msg);
    lua_pop(L, 1);
  }
  return status;
}

/* Message handler: the error as text plus a traceback, for errors of any type. */
static int add_traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      return 1; /* an object that describes itself: no traceback, as lua.c */
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int runner_call(lua_State *L, int narg, int nresults) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, add_traceback);
  lua_insert(L, base);
  interrupt_begin_run(L);
  int status = lua_pcall(L, narg, nresults, base);
  interrupt_end_run(L);
  lua_remove(L, base);
  return status;
}

static int run_loaded(lua_State *L, int status) {
  if (status == LUA_OK) status = runner_call(L, 0, 0);
  return runner_report(L, status);
}

int runner_string(lua_State *L, const char *code, const char *chunkname) {
  return run_loaded(L, luaL_loadbuffer(L, code, strlen(code), chunkname));
}

int runner_file(lua_State *L, const char *path) {
  return run_loaded(L, luaL_loadfile(L, path));
}

int runner_library(lua_State *L, const char *spec) {
  char global[256];
  const char *module = strchr(spec, '=');
  size_t global_len;
  if (module != NULL) { /* -l g=mod */
    global_len = (size_t)(module - spec);
    module++;
  } else { /* -l mod: the global stops at a '-' (loadlib.c's LUA_IGMARK), as in lua.c */
    module = spec;
    const char *mark = strchr(spec, '-');
    global_len = mark != NULL ? (size_t)(mark - spec) : strlen(spec);
  }
  if (global_len >= sizeof global) global_len = sizeof global - 1;
  memcpy(global, spec, global_len);
  global[global_len] = '\0';

  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  int status = runner_call(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, global);
  return runner_report(L, status);
}

/* Pushes arg[1..#arg] for the main chunk's `...`; returns how many. */
static int push_script_args(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -n - 1);
  return n;
}

int runner_script(lua_State *L, char **argv) {
  const char *path = argv[0];
  if (strcmp(path, "-") == 0 && strcmp(argv[-1], "--") != 0) path = NULL; /* stdin */
  int status = luaL_loadfile(L, path);
  if (status == LUA_OK) {
    int n = push_script_args(L);
    status = runner_call(L, n, 0);
  }
  return runner_report(L, status);
}
