/* The interactive loop: read a statement (over several lines when incomplete), run it,
 * print what it returns and keep the first result in the global `_`. */
#ifndef LT_HOST_REPL_H
#define LT_HOST_REPL_H

#include <lua.h>

void repl_run(lua_State *L);

#endif
