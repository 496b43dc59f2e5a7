/* SIGINT handling for scripts and the REPL; see interrupt.h. */
#include <signal.h>
#include <stddef.h>

#include <lauxlib.h>

#include "interrupt.h"

static lua_State *volatile running_state; /* set while a protected call runs */
static volatile sig_atomic_t in_prompt_mode;
static volatile sig_atomic_t prompt_interrupted;

static void stop_running_code(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void on_sigint(int sig);

static void install(void (*handler)(int), int restart_syscalls) {
  struct sigaction action;
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  /* No SA_RESTART at the prompt: the blocked read() must return so the line can be dropped. */
  action.sa_flags = restart_syscalls ? SA_RESTART : 0;
  sigaction(SIGINT, &action, NULL);
}

static void on_sigint(int sig) {
  (void)sig;
  lua_State *L = running_state;
  if (L != NULL) {
    install(SIG_DFL, 1); /* a second Ctrl-C ends a process stuck in C code */
    /* lua_sethook is the one Lua call lua.c deems safe in a signal handler. */
    lua_sethook(L, stop_running_code,
                LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
  } else if (in_prompt_mode) {
    prompt_interrupted = 1;
  }
}

void interrupt_begin_run(lua_State *L) {
  running_state = L;
  install(on_sigint, 1);
}

void interrupt_end_run(lua_State *L) {
  running_state = NULL;
  if (in_prompt_mode) install(on_sigint, 0);
  else install(SIG_DFL, 1);
  /* A Ctrl-C that came just as the call ended must not stop the next one. */
  if (lua_gethook(L) == stop_running_code) lua_sethook(L, NULL, 0, 0);
}

void interrupt_enter_prompt_mode(void) {
  in_prompt_mode = 1;
  prompt_interrupted = 0;
  install(on_sigint, 0);
}

void interrupt_leave_prompt_mode(void) {
  in_prompt_mode = 0;
  install(SIG_DFL, 1);
}

int interrupt_take_prompt_flag(void) {
  int was_set = prompt_interrupted;
  prompt_interrupted = 0;
  return was_set;
}

int interrupt_prompt_flag_is_set(void) {
  return prompt_interrupted;
}
