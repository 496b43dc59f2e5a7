/* IPython's and trepl's help syntax at the REPL: `?x`, `??x`, `x?` print lt.help's doc of x. */
#ifndef LT_HOST_REPL_HELP_H
#define LT_HOST_REPL_HELP_H

#include <lua.h>

/* When line asks for help, pushes the Lua code that gives it and returns 1; else pushes
 * nothing and returns 0. `?` alone is lt.help() (the list of areas); `?name` and `name?`
 * (name a dotted path such as lt.nn.Linear or t:sum) look the name up, so that a name
 * that is no variable (F.relu before `local F` exists, "sum") is still found; `?expr`
 * describes the value of any other expression. A line ending in `?` that is not a name is
 * left to Lua (a comment: `-- really?`). */
int repl_help_push(lua_State *L, const char *line);

/* Makes `help(x)` work as in Python: the global help is lt.help, unless the session or a
 * script run before it has its own help. */
void repl_help_install(lua_State *L);

#endif
