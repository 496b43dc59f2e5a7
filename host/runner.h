/* Running Lua code the way lua.c does: protected calls with a traceback, errors reported as
 * "lt: message" on stderr. Every function returns a Lua status (LUA_OK on success). */
#ifndef LT_HOST_RUNNER_H
#define LT_HOST_RUNNER_H

#include <lua.h>

/* Prints "lt: msg" (msg on stderr; NULL prints nothing but the program name). */
void runner_message(const char *msg);

/* If status is an error, prints the message on the top of the stack and pops it. */
int runner_report(lua_State *L, int status);
/* The last error runner_report printed ("" if none), for the failure hook of main.c. */
const char *runner_last_error(void);

/* Calls the function below its narg arguments with a traceback handler; Ctrl-C stops it. */
int runner_call(lua_State *L, int narg, int nresults);

int runner_string(lua_State *L, const char *code, const char *chunkname);
int runner_file(lua_State *L, const char *path); /* NULL: stdin */

/* -l "mod" or -l "g=mod": global g (or mod up to a '-') = require(mod). */
int runner_library(lua_State *L, const char *spec);

/* The main script argv[0] ("-" is stdin unless after "--") with the global arg's positive
 * entries as its `...`. */
int runner_script(lua_State *L, char **argv);

#endif
