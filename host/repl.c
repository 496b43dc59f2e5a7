/* The REPL; see repl.h. Input handling follows lua.c: try "return <line>" first so that
 * expressions print, and keep reading while the parser stops at "<eof>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "completion.h"
#include "interrupt.h"
#include "line_input.h"
#include "repl.h"
#include "repl_help.h"
#include "repl_history.h"
#include "runner.h"

enum chunk_result { CHUNK_READY, CHUNK_NONE, CHUNK_END };

static const char *prompt(lua_State *L, int first_line) {
  const char *name = first_line ? "_PROMPT" : "_PROMPT2";
  lua_getglobal(L, name);
  const char *text = lua_tostring(L, -1); /* still referenced by the global */
  lua_pop(L, 1);
  if (text == NULL) text = first_line ? "> " : ">> ";
  return text;
}

/* Whether the status and message on the top of the stack mean "statement not finished". */
static int is_incomplete(lua_State *L, int status) {
  static const char eof_mark[] = "<eof>";
  const size_t mark_len = sizeof eof_mark - 1;
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  return len >= mark_len && strcmp(msg + len - mark_len, eof_mark) == 0;
}

/* "return <line>" compiled: the line is an expression list whose values get printed. */
static int try_as_expression(lua_State *L, const char *line) {
  const char *code = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
  lua_remove(L, -2); /* the code string */
  if (status != LUA_OK) lua_pop(L, 1);
  return status == LUA_OK;
}

/* Reads one statement. CHUNK_END: end of input; CHUNK_NONE: Ctrl-C dropped it; CHUNK_READY:
 * the compiled chunk is on the stack (*status LUA_OK) or its syntax error message is. */
static enum chunk_result read_chunk(lua_State *L, int *status) {
  char *line;
  line_status got = line_input_read(prompt(L, 1), &line);
  if (got == LINE_END) return CHUNK_END;
  if (got == LINE_INTERRUPTED) return CHUNK_NONE;
  if (repl_help_push(L, line)) { /* ?x: lt.help's doc of x */
    size_t len;
    const char *code = lua_tolstring(L, -1, &len);
    *status = luaL_loadbuffer(L, code, len, "=stdin");
    lua_remove(L, -2); /* the code */
    repl_history_add(line);
    free(line);
    return CHUNK_READY;
  }
  if (try_as_expression(L, line)) {
    repl_history_add(line);
    free(line);
    *status = LUA_OK;
    return CHUNK_READY;
  }
  lua_pushstring(L, line);
  free(line);
  for (;;) {
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    *status = luaL_loadbuffer(L, text, len, "=stdin");
    if (!is_incomplete(L, *status)) break;
    lua_pop(L, 1); /* the "<eof>" message */
    got = line_input_read(prompt(L, 0), &line);
    if (got == LINE_INTERRUPTED) {
      lua_pop(L, 1);
      return CHUNK_NONE;
    }
    if (got == LINE_END) { /* report the unfinished statement, as lua.c */
      *status = luaL_loadbuffer(L, text, len, "=stdin");
      break;
    }
    lua_pushliteral(L, "\n");
    lua_pushstring(L, line);
    free(line);
    lua_concat(L, 3);
  }
  repl_history_add(lua_tostring(L, -2));
  lua_remove(L, -2); /* the text */
  return CHUNK_READY;
}

/* A table without __tostring: printed by lt.pp's format. */
static int is_plain_table(lua_State *L, int i) {
  if (lua_type(L, i) != LUA_TTABLE) return 0;
  if (luaL_getmetafield(L, i, "__tostring") == LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

/* Pushes the text of the value at i: a plain table through lt.pp's format (lua/lt/pp.lua:
 * {3, 4}, keys sorted, nested tables to a depth), anything else through tostring (tensors
 * and modules have __tostring). */
static const char *result_text(lua_State *L, int i, size_t *len) {
  if (is_plain_table(L, i)) {
    int top = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    /* lt.pp loads on first use (lt's lazy namespaces, lua/lt/init.lua) */
    if (lua_getfield(L, -1, "lt") == LUA_TTABLE && lua_getfield(L, -1, "pp") == LUA_TTABLE &&
        lua_getfield(L, -1, "format") == LUA_TFUNCTION) {
      lua_pushvalue(L, i);
      lua_call(L, 1, 1);
      lua_replace(L, top + 1);
      lua_settop(L, top + 1);
      return lua_tolstring(L, -1, len);
    }
    lua_settop(L, top); /* lt is not loaded: Lua's own text */
  }
  return luaL_tolstring(L, i, len);
}

/* Protected: prints each argument (result_text), tab-separated as print does, without
 * going through a global `print` the session may have replaced. */
static int print_values(lua_State *L) {
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *text = result_text(L, i, &len);
    if (i > 1) fputc('\t', stdout);
    fwrite(text, 1, len, stdout);
    lua_pop(L, 1);
  }
  fputc('\n', stdout);
  fflush(stdout);
  return 0;
}

/* Results are on the stack above `base`. Only the first is kept (as `_`): holding every
 * result, as Torch7's trepl did, keeps every tensor ever printed alive. */
static void show_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n == 0) return;
  lua_pushvalue(L, base + 1);
  lua_setglobal(L, "_");
  lua_pushcfunction(L, print_values);
  lua_insert(L, base + 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    const char *msg = lua_pushfstring(L, "error printing the result (%s)", lua_tostring(L, -1));
    runner_message(msg);
  }
}

void repl_run(lua_State *L) {
  if (line_input_open()) { /* piped input is neither recorded nor completed */
    repl_history_load();
    completion_install(L);
  }
  repl_help_install(L);
  interrupt_enter_prompt_mode();
  for (;;) {
    lua_settop(L, 0);
    int status = LUA_OK;
    enum chunk_result got = read_chunk(L, &status);
    if (got == CHUNK_END) break;
    if (got == CHUNK_NONE) continue;
    if (status == LUA_OK) status = runner_call(L, 0, LUA_MULTRET);
    if (status == LUA_OK) show_results(L, 0);
    else runner_report(L, status);
  }
  lua_settop(L, 0);
  interrupt_leave_prompt_mode();
  fputc('\n', stdout);
  fflush(stdout);
}
