/* "Did you mean": the known name closest to a misspelt one, for the errors
 * of an unknown tensor method and of an unknown option (also lt.core._closest
 * for the Lua library). Closeness is the optimal string alignment distance
 * (Levenshtein's edits plus swapping two neighbours, the commonest typo); a
 * name is offered only when at most about a third of it differs, so "sotr"
 * finds "sort" and "foo" finds nothing. */
#include <lauxlib.h>
#include <string.h>

#include "args.h"

#define MAX_NAME 64 /* longer names are never offered: no lt name is that long */

static size_t min3(size_t a, size_t b, size_t c) {
  size_t m = a < b ? a : b;
  return m < c ? m : c;
}

/* Three rows of the dynamic programme: the two before the current one are
 * needed for a swap. */
size_t ltb_edit_distance(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  if (na > MAX_NAME || nb > MAX_NAME) return (size_t)-1;
  size_t rows[3][MAX_NAME + 1];
  size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= nb; j++) prev[j] = j;
  for (size_t i = 1; i <= na; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < cur[j])
        cur[j] = prev2[j - 2] + 1;
    }
    size_t *t = prev2;
    prev2 = prev, prev = cur, cur = t;
  }
  return prev[nb];
}

/* The string key of the table at idx closest to name, into *best (distance
 * *best_d), skipping names that start with '_' (private) unless name does. */
static void scan_keys(lua_State *L, int idx, const char *name, const char **best, size_t *best_d) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    const char *key = lua_tostring(L, -1);
    if (key[0] == '_' && name[0] != '_') continue;
    size_t d = ltb_edit_distance(name, key);
    /* Ties go to the alphabetically first, so the hint does not depend on
     * the table's traversal order. */
    if (d < *best_d || (d == *best_d && *best && strcmp(key, *best) < 0)) {
      *best = key; /* the table keeps the string alive */
      *best_d = d;
    }
  }
}

/* best if it is close enough to name to be offered. */
static const char *if_close(const char *name, const char *best, size_t best_d) {
  size_t allowed = strlen(name) / 3;
  if (allowed < 1) allowed = 1;
  return best && best_d <= allowed ? best : NULL;
}

const char *ltb_closest_key(lua_State *L, int t1, int t2, const char *name) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  if (t1) scan_keys(L, t1, name, &best, &best_d);
  if (t2) scan_keys(L, t2, name, &best, &best_d);
  return if_close(name, best, best_d);
}

const char *ltb_closest_name(const char *name, const char *const *names, int n) {
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (int i = 0; i < n && names[i]; i++) {
    size_t d = ltb_edit_distance(name, names[i]);
    if (d < best_d) best = names[i], best_d = d;
  }
  return if_close(name, best, best_d);
}

void ltb_unknown_option(lua_State *L, const char *op, const char *key, const char *const *names, int n) {
  const char *near = ltb_closest_name(key, names, n);
  if (near) ltb_error(L, "%s: unknown option '%s' (did you mean '%s'?)", op, key, near);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < n && names[i]; i++) {
    if (i > 0) luaL_addstring(&b, ", ");
    luaL_addstring(&b, names[i]);
  }
  luaL_pushresult(&b);
  ltb_error(L, "%s: unknown option '%s' (expected one of %s)", op, key, lua_tostring(L, -1));
}

/* lt.core._closest(name, names): the closest string key of the table names
 * (or the closest string in its array part), or nil. */
static int closest_fn(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  /* An array of names becomes a set, so that both shapes scan the same way. */
  lua_newtable(L);
  lua_Integer n = luaL_len(L, 2);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, 2, i) == LUA_TSTRING) {
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    } else {
      lua_pop(L, 1);
    }
  }
  const char *best = ltb_closest_key(L, 2, lua_gettop(L), name);
  if (best) lua_pushstring(L, best);
  else lua_pushnil(L);
  return 1;
}

void ltb_open_closest(lua_State *L, int core_idx) {
  lua_pushcfunction(L, closest_fn);
  lua_setfield(L, core_idx, "_closest");
}
