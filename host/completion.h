/* Tab completion for the REPL: globals, keywords, and fields reached through tables and
 * metatables (`lt.nn.<TAB>`, `t:<TAB>` lists a userdata's methods). */
#ifndef LT_HOST_COMPLETION_H
#define LT_HOST_COMPLETION_H

#include <lua.h>

/* Hooks completion into libedit; names are looked up in L. */
void completion_install(lua_State *L);

#endif
