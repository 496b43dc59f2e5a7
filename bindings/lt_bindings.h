/* What the host needs from the bindings. */
#ifndef LT_BINDINGS_H
#define LT_BINDINGS_H

#include <lua.h>

#include "lt/api.h"

/* The C half of `require "lt"`: returns the lt.core table (tensor
 * constructors, ops, memory controls). lua/lt/init.lua builds the public `lt`
 * table on it. */
LT_API int luaopen_lt_core(lua_State *L); /* exported: require "lt.core" from lua5.4 */

#endif
