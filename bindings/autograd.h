/* Shared by the two autograd binding files (autograd.c and
 * autograd_function.c). */
#ifndef LTB_AUTOGRAD_H
#define LTB_AUTOGRAD_H

#include <lua.h>

#include "lt/lt.h"

/* lt_backward from Lua: Lua backward functions of lt.autograd.Function
 * nodes run on L's thread. Returns the engine's status (not raised). */
lt_status ltb_run_backward(lua_State *L, lt_tensor *root, const lt_tensor *grad, bool retain);

/* The thread of the innermost t:backward (NULL outside one): where Lua code
 * called from inside the engine's backward runs. */
lua_State *ltb_backward_thread(void);

/* core._grad_hook_add/_remove/_dispatcher, used by lua/lt/grad_hooks.lua. */
void ltb_open_grad_hooks(lua_State *L, int core_idx);

/* core._autograd_function, used by lua/lt/autograd.lua. */
void ltb_open_autograd_function(lua_State *L, int core_idx);

#endif
