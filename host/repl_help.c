/* `?x` at the REPL; see repl_help.h. The line is rewritten into a call of lt.help before it
 * is compiled, so the doc prints as the statement's output and nothing is returned (the
 * REPL prints no result). */
#include <ctype.h>
#include <string.h>

#include <lauxlib.h>

#include "repl_help.h"

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* Whether s[0..n) is a name path: identifiers joined by '.' or ':' (lt.nn.Linear, t:sum). */
static int is_name_path(const char *s, size_t n) {
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)s[i];
    const int sep = c == '.' || c == ':';
    if (!(isalnum(c) || c == '_' || sep)) return 0;
    if (sep && (i + 1 == n || s[i + 1] == '.' || s[i + 1] == ':')) return 0;
  }
  return 1;
}

int repl_help_push(lua_State *L, const char *line) {
  const char *s = line, *e = line + strlen(line);
  while (s < e && is_space(*s)) s++;
  while (e > s && is_space(e[-1])) e--;
  int prefix = 0, suffix = 0;
  while (s < e && *s == '?') s++, prefix = 1;
  while (e > s && e[-1] == '?') e--, suffix = 1; /* after a prefix too: ?x? */
  if (!prefix && !suffix) return 0;
  while (s < e && is_space(*s)) s++;
  while (e > s && is_space(e[-1])) e--;
  const size_t n = (size_t)(e - s);
  const int name = is_name_path(s, n);
  if (!prefix && !name) return 0;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (n == 0) {
    luaL_addstring(&b, "lt.help()");
  } else if (name) { /* only identifier characters: safe inside the quotes */
    luaL_addstring(&b, "lt.help(\"");
    luaL_addlstring(&b, s, n);
    luaL_addstring(&b, "\")");
  } else {
    luaL_addstring(&b, "lt.help(");
    luaL_addlstring(&b, s, n);
    luaL_addstring(&b, "\n)"); /* a newline: a trailing comment in expr cannot swallow the ')' */
  }
  luaL_pushresult(&b);
  return 1;
}

void repl_help_install(lua_State *L) {
  const int top = lua_gettop(L);
  if (lua_getglobal(L, "help") == LUA_TNIL && lua_getglobal(L, "lt") == LUA_TTABLE &&
      lua_getfield(L, -1, "help") == LUA_TFUNCTION)
    lua_setglobal(L, "help");
  lua_settop(L, top);
}
