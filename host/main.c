/* lt: a Lua 5.4 interpreter with the lt library opened as the global `lt`. Runs like `lua`
 * (lua.c is the model), so `busted --lua=lt` and plain Lua scripts work, plus lt's options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "lt_bindings.h"
#include "lt_env.h"
#include "options.h"
#include "repl.h"
#include "runner.h"
#include "version.h"

/* The global arg: arg[0] the script, its arguments at 1.., the interpreter and options
 * below 0. Without a script arg[0] is the interpreter, as in lua.c. */
static void create_arg_table(lua_State *L, int argc, char **argv, int script) {
  int zero = script > 0 ? script : 0;
  lua_createtable(L, argc - zero - 1 > 0 ? argc - zero - 1 : 0, zero + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - zero);
  }
  lua_setglobal(L, "arg");
}

/* LUA_INIT_5_4, else LUA_INIT: "@file" runs a file, anything else is code. */
static int run_lua_init(lua_State *L) {
  const char *name = "=LUA_INIT_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return runner_file(L, init + 1);
  return runner_string(L, init, name);
}

static int run_actions(lua_State *L, const lt_options *opts) {
  for (int i = 0; i < opts->n_actions; i++) {
    const lt_action *action = &opts->actions[i];
    int status = LUA_OK;
    switch (action->letter) {
      case 'e': status = runner_string(L, action->value, "=(command line)"); break;
      case 'l': status = runner_library(L, action->value); break;
      case 'W': lua_warning(L, "@on", 0); break;
    }
    if (status != LUA_OK) return 0;
  }
  return 1;
}

static int apply_lt_options(lua_State *L, const lt_options *opts) {
  if (opts->threads > 0 && !lt_env_set_threads(L, opts->threads)) return 0;
  if (opts->device != NULL && !lt_env_set_device(L, opts->device)) return 0;
  if (opts->memory_report != NULL && !lt_env_start_memory_report(L)) return 0;
  return 1;
}

/* The steps after the state exists; returns 1 on success. Runs inside a protected call so
 * that even a memory error while setting up is reported, not fatal. */
static int run_everything(lua_State *L, int argc, char **argv, const lt_options *opts) {
  if (opts->has_v) {
    printf("%s\n", LT_VERSION_LINE);
    fflush(stdout);
  }
  if (opts->has_E) { /* ask the package library to ignore LUA_PATH and LUA_CPATH */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  create_arg_table(L, argc, argv, opts->script);
  lua_gc(L, LUA_GCRESTART); /* incremental mode: see luaopen_lt_core */
  if (!lt_env_open(L, argv[0])) return 0;
  if (!apply_lt_options(L, opts)) return 0;
  if (!opts->has_E && run_lua_init(L) != LUA_OK) return 0;
  if (!run_actions(L, opts)) return 0;

  int ok = 1;
  if (opts->script > 0 && runner_script(L, argv + opts->script) != LUA_OK) ok = 0;
  if (ok) {
    if (opts->has_i) {
      repl_run(L);
    } else if (opts->script == 0 && !opts->has_e && !opts->has_v) {
      if (isatty(STDIN_FILENO)) {
        printf("%s\n", LT_VERSION_LINE);
        repl_run(L);
      } else if (runner_file(L, NULL) != LUA_OK) { /* stdin as a script, as lua does */
        ok = 0;
      }
    }
  }
  /* The report is written after a failed run too: that is when it is wanted most. */
  if (opts->memory_report != NULL && !lt_env_write_memory_report(L, opts->memory_report))
    ok = 0;
  return ok;
}

static int protected_main(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  const lt_options *opts = lua_touserdata(L, 3);
  lua_settop(L, 0);
  luaL_checkversion(L);
  lua_pushboolean(L, run_everything(L, argc, argv, opts));
  return 1;
}

/* libgomp reads OMP_WAIT_POLICY when it loads, before main. Its default
 * spins after each parallel region, and on a loaded machine a spinning
 * thread takes the core its partner needs: two threads ran 2-5x slower than
 * one (scripts/bench/contention.sh). So unless the user chose (OMP_WAIT_POLICY
 * or GOMP_SPINCOUNT), lt starts itself again with passive waiting, and then
 * takes both variables out again so that the programs it runs inherit the
 * user's environment. */
#define REEXEC_MARK "LT_WAIT_POLICY_SET"
static void choose_wait_policy(char **argv) {
  if (getenv(REEXEC_MARK) != NULL) {
    unsetenv(REEXEC_MARK);
    unsetenv("OMP_WAIT_POLICY");
    return;
  }
  if (getenv("OMP_WAIT_POLICY") != NULL || getenv("GOMP_SPINCOUNT") != NULL) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0 || setenv(REEXEC_MARK, "1", 1) != 0) return;
  execv("/proc/self/exe", argv);
  /* No /proc: go on with libgomp's default. */
  unsetenv(REEXEC_MARK);
  unsetenv("OMP_WAIT_POLICY");
}

int main(int argc, char **argv) {
  choose_wait_policy(argv);
  lt_options opts;
  if (!options_parse(argc, argv, &opts)) {
    options_free(&opts);
    return EXIT_FAILURE;
  }
  if (opts.help) {
    options_print_usage(stdout);
    options_free(&opts);
    return EXIT_SUCCESS;
  }
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    runner_message("cannot create state: not enough memory");
    options_free(&opts);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no collections while the state is being built, as lua.c */
  lua_pushcfunction(L, protected_main);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  lua_pushlightuserdata(L, &opts);
  int status = lua_pcall(L, 3, 1, 0);
  int ok = lua_toboolean(L, -1);
  runner_report(L, status);
  /* Under mpirun the other ranks would wait for this one in their next
   * collective: they are told, and the job ends (nothing without MPI). */
  if (status != LUA_OK || !ok) ltb_distributed_failed(runner_last_error());
  lua_close(L);
  options_free(&opts);
  return (status == LUA_OK && ok) ? EXIT_SUCCESS : EXIT_FAILURE;
}
