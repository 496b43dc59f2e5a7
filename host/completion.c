/* Tab completion; see completion.h. Candidates are gathered in a protected call because
 * resolving `a.b.` may run __index metamethods, which may fail. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <editline/readline.h>

#include "completion.h"

static const char *const keywords[] = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL,
};

enum { MAX_INDEX_CHAIN = 16 }; /* __index tables followed before giving up (cycles) */

static int is_keyword(const char *name) {
  for (int i = 0; keywords[i] != NULL; i++)
    if (strcmp(name, keywords[i]) == 0) return 1;
  return 0;
}

static int is_identifier(const char *name, size_t len) {
  if (len == 0 || (name[0] >= '0' && name[0] <= '9')) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return 0;
  }
  return !is_keyword(name);
}

/* Adds prefix..key to the set at index `set` for each identifier key of the table at `table`
 * that starts with `partial` (only function values when methods_only). Names starting with
 * '_' are private by Lua's convention (lt._set_grad, _ENV, _G): offered only once the partial
 * name starts with '_' too. */
static void add_table_keys(lua_State *L, int set, int table, const char *prefix,
                           const char *partial, int methods_only, int skip_metamethods) {
  size_t partial_len = strlen(partial);
  lua_pushnil(L);
  while (lua_next(L, table) != 0) {
    size_t len;
    if (lua_type(L, -2) == LUA_TSTRING) {
      const char *key = lua_tolstring(L, -2, &len);
      int wanted = strncmp(key, partial, partial_len) == 0 && is_identifier(key, len) &&
                   (!methods_only || lua_type(L, -1) == LUA_TFUNCTION) &&
                   !(skip_metamethods && strncmp(key, "__", 2) == 0) &&
                   (key[0] != '_' || partial[0] == '_');
      if (wanted) {
        lua_pushfstring(L, "%s%s", prefix, key);
        lua_pushboolean(L, 1);
        lua_rawset(L, set);
      }
    }
    lua_pop(L, 1);
  }
}

/* The keys of the table at `table` and of each __index table of its metatable chain, with
 * metamethods left out: a class and the classes it derives from (Linear, then Module). */
static void add_class_chain_keys(lua_State *L, int set, int table, const char *prefix,
                                 const char *partial, int methods_only) {
  lua_pushvalue(L, table);
  for (int depth = 0; depth < MAX_INDEX_CHAIN && lua_type(L, -1) == LUA_TTABLE; depth++) {
    int current = lua_gettop(L);
    add_table_keys(L, set, current, prefix, partial, methods_only, 1);
    if (!lua_getmetatable(L, current)) break;
    if (lua_getfield(L, -1, "__index") != LUA_TTABLE || lua_rawequal(L, -1, current)) break;
    lua_replace(L, current);
    lua_settop(L, current);
  }
  lua_settop(L, table);
}

/* When __index is a function (typical of userdata that also handle t[i] or fields, and of
 * lt's modules, whose parameters live in slots), its methods usually sit in a table the
 * function holds as an upvalue: list those tables' keys and their class chains' (not _ENV's:
 * that would be every global). */
static void add_upvalue_table_keys(lua_State *L, int set, int function, const char *prefix,
                                   const char *partial, int methods_only) {
  const char *name;
  for (int i = 1; (name = lua_getupvalue(L, function, i)) != NULL; i++) {
    if (lua_type(L, -1) == LUA_TTABLE && strcmp(name, "_ENV") != 0)
      add_class_chain_keys(L, set, lua_gettop(L), prefix, partial, methods_only);
    lua_pop(L, 1);
  }
}

/* The keys of the value at `value`: its own (a table's), then those of each __index table
 * of its metatable chain; an __index function contributes its upvalue tables and the
 * metatable's own non-metamethod functions. */
static void add_reachable_keys(lua_State *L, int set, int value, const char *prefix,
                               const char *partial, int methods_only) {
  lua_pushvalue(L, value);
  for (int depth = 0; depth < MAX_INDEX_CHAIN; depth++) {
    int current = lua_gettop(L);
    if (lua_type(L, current) == LUA_TTABLE)
      add_table_keys(L, set, current, prefix, partial, methods_only, 0);
    if (!lua_getmetatable(L, current)) break;
    int meta = lua_gettop(L);
    int index_type = lua_getfield(L, meta, "__index");
    if (index_type == LUA_TTABLE && !lua_rawequal(L, -1, current)) {
      lua_replace(L, current);
      lua_settop(L, current);
      continue;
    }
    if (index_type == LUA_TFUNCTION) {
      add_upvalue_table_keys(L, set, lua_gettop(L), prefix, partial, methods_only);
      add_table_keys(L, set, meta, prefix, partial, 1, 1);
    }
    break;
  }
  lua_settop(L, value);
}

/* Protected: text at 1, a fresh set table at 2. Fills the set. */
static int collect(lua_State *L) {
  const char *text = lua_tostring(L, 1);
  const char *dot = strrchr(text, '.');
  const char *colon = strrchr(text, ':');
  const char *sep = dot > colon ? dot : colon;
  if (sep == NULL) { /* a global or a keyword */
    lua_pushglobaltable(L);
    add_reachable_keys(L, 2, 3, "", text, 0);
    size_t len = strlen(text);
    for (int i = 0; keywords[i] != NULL; i++) {
      if (strncmp(keywords[i], text, len) != 0) continue;
      lua_pushboolean(L, 1);
      lua_setfield(L, 2, keywords[i]);
    }
    return 0;
  }
  if (colon != NULL && colon != sep) return 0; /* a:b.c is not a name */

  /* Resolve the path before the separator, one identifier at a time from the globals. */
  lua_pushglobaltable(L);
  const char *start = text;
  while (start < sep) {
    const char *end = memchr(start, '.', (size_t)(sep - start));
    if (end == NULL) end = sep;
    lua_pushlstring(L, start, (size_t)(end - start));
    if (!is_identifier(lua_tostring(L, -1), (size_t)(end - start))) return 0;
    if (!lua_istable(L, -2) && !lua_isuserdata(L, -2) && !lua_isstring(L, -2)) return 0;
    lua_gettable(L, -2);
    lua_remove(L, -2);
    start = end + 1;
  }
  if (lua_isnil(L, -1)) return 0;
  lua_pushlstring(L, text, (size_t)(sep - text) + 1);
  add_reachable_keys(L, 2, 3, lua_tostring(L, -1), sep + 1, *sep == ':');
  return 0;
}

static int compare_strings(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted completions of `text` (e.g. "string.fo") as a NULL-terminated, malloc'd array of
 * malloc'd strings; NULL when there are none. */
static char **completion_candidates(lua_State *L, const char *text) {
  int top = lua_gettop(L);
  lua_pushcfunction(L, collect);
  lua_pushstring(L, text);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_insert(L, top + 1); /* keep the set after the call */
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    lua_settop(L, top);
    return NULL;
  }
  size_t count = 0;
  for (lua_pushnil(L); lua_next(L, top + 1) != 0; lua_pop(L, 1)) count++;
  char **list = count > 0 ? calloc(count + 1, sizeof *list) : NULL;
  size_t n = 0;
  if (list != NULL) {
    for (lua_pushnil(L); lua_next(L, top + 1) != 0; lua_pop(L, 1)) {
      char *copy = strdup(lua_tostring(L, -2));
      if (copy != NULL) list[n++] = copy;
    }
    qsort(list, n, sizeof *list, compare_strings);
  }
  lua_settop(L, top);
  return list;
}

/* libedit glue: the candidates of the current word, handed out one by one. */
static lua_State *completion_state;
static char **pending;
static size_t next_pending;

static char *next_candidate(const char *text, int state) {
  (void)text;
  if (pending == NULL) return NULL;
  if (state == 0) next_pending = 0;
  char *candidate = pending[next_pending];
  if (candidate == NULL) return NULL;
  next_pending++;
  return strdup(candidate);
}

static void free_pending(void) {
  if (pending == NULL) return;
  for (size_t i = 0; pending[i] != NULL; i++) free(pending[i]);
  free(pending);
  pending = NULL;
}

static char **complete_word(const char *text, int start, int end) {
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* no fallback to file names */
  rl_completion_append_character = '\0';
  free_pending();
  pending = completion_candidates(completion_state, text);
  if (pending == NULL) return NULL;
  char **matches = rl_completion_matches(text, next_candidate);
  free_pending();
  return matches;
}

void completion_install(lua_State *L) {
  completion_state = L;
  /* '.' and ':' are not breaks, so `lt.nn.Li` and `t:si` reach us whole. */
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{}()[],+-*/%^~#";
  rl_attempted_completion_function = complete_word;
}
