/* Storage categories from Lua: lt.memory.set_category(t, name) and
 * lt.memory.category(t). nn.Parameter marks parameter storages and the
 * optimizers their state, so that lt.memory.stats().by_category says where
 * memory goes. A category belongs to the storage: every view shares it. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

/* The categories a script may set (workspace belongs to the libraries). */
static const lt_category settable[] = {LT_CAT_PARAMETER, LT_CAT_GRADIENT, LT_CAT_OPTIMIZER,
                                       LT_CAT_ACTIVATION, LT_CAT_OTHER};

static lt_category check_category(lua_State *L, int idx, const char *op) {
  const char *name = luaL_checkstring(L, idx);
  for (size_t i = 0; i < sizeof settable / sizeof settable[0]; i++)
    if (strcmp(name, lt_category_name(settable[i])) == 0) return settable[i];
  ltb_error(L,
             "%s: unknown category '%s' (expected parameter, gradient, optimizer, activation or "
             "other)",
             op, name);
  return LT_CAT_OTHER;
}

/* Returns t, so that a constructor can be wrapped: set_category(lt.zeros(n), "optimizer"). */
static int memory_set_category(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "set_category");
  lt_category cat = check_category(L, 2, "set_category");
  lt_block_set_category(t->storage->block, cat);
  lua_settop(L, 1);
  return 1;
}

static int memory_category(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "category");
  lua_pushstring(L, lt_category_name(lt_block_category(t->storage->block)));
  return 1;
}

void ltb_open_category(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  lua_getfield(L, core_idx, "memory");
  lua_pushcfunction(L, memory_set_category);
  lua_setfield(L, -2, "set_category");
  lua_pushcfunction(L, memory_category);
  lua_setfield(L, -2, "category");
  lua_pop(L, 1);
}
