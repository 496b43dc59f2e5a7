/* What the host needs from the bindings. */
#ifndef LT_BINDINGS_H
#define LT_BINDINGS_H

#include <lua.h>

#include "lt/api.h"

/* The C half of `require "lt"`: returns the lt.core table (tensor
 * constructors, ops, memory controls). lua/lt/init.lua builds the public `lt`
 * table on it. */
LT_API int luaopen_lt_core(lua_State *L); /* exported: require "lt.core" from lua5.4 */

/* After an error nobody caught ends the run: under mpirun with a process
 * group made, tells the other ranks and aborts the job (MPI_Abort), so that
 * none waits for a collective this rank will never join; else nothing. */
void ltb_distributed_failed(const char *message);

#endif
