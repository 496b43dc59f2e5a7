/* Ctrl-C. While Lua code runs, SIGINT sets a debug hook that raises "interrupted!" at the
 * next instruction (as lua.c does: the only safe way to stop Lua from a signal handler).
 * While the REPL waits for input, SIGINT only raises a flag the line reader looks at. */
#ifndef LT_HOST_INTERRUPT_H
#define LT_HOST_INTERRUPT_H

#include <lua.h>

/* Around a protected call: Ctrl-C stops L's running code; a second Ctrl-C before the hook
 * fires (code stuck in C) ends the process. interrupt_end_run restores what was before. */
void interrupt_begin_run(lua_State *L);
void interrupt_end_run(lua_State *L);

/* For the REPL's lifetime: Ctrl-C at the prompt is flagged instead of ending the process. */
void interrupt_enter_prompt_mode(void);
void interrupt_leave_prompt_mode(void);

/* Whether Ctrl-C was pressed at the prompt since the last call; clears the flag. */
int interrupt_take_prompt_flag(void);
int interrupt_prompt_flag_is_set(void);

#endif
