/* Files and data loading seen from Lua: lt.save / lt.load (safetensors),
 * lt.read_idx (IDX, for lt.data), lt.index_select and t:index_select,
 * lt.randperm, and lt.get_rng_state / lt.set_rng_state (so that a training
 * run can store its generator in a checkpoint's metadata). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "lt/index.h"
#include "lt/io.h"
#include "tensor_handle.h"

#define LOADED_FILE_NAME "lt.LoadedSafetensors"

/* ---- lt.save(path, {name = tensor, ...}, {metadata = {key = "value"}}) ---- */

/* A scratch array owned by Lua, so that an error cannot leak it. */
static void *scratch(lua_State *L, size_t count, size_t elsize) {
  return lua_newuserdatauv(L, (count ? count : 1) * elsize, 0);
}

static int count_entries(lua_State *L, int idx) {
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (n == INT32_MAX) ltb_error(L, "save: too many entries");
    n++;
  }
  return n;
}

/* The tensors table at idx into names[] and tensors[] (borrowed: the table
 * keeps them alive for the call). */
static int read_tensors_table(lua_State *L, int idx, const char ***names, lt_tensor ***tensors) {
  if (!lua_istable(L, idx))
    ltb_error(L, "save: expected a table of tensors {name = tensor, ...}, got %s",
               luaL_typename(L, idx));
  int n = count_entries(L, idx);
  *names = scratch(L, (size_t)n, sizeof **names);
  *tensors = scratch(L, (size_t)n, sizeof **tensors);
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      ltb_error(L, "save: tensor names must be strings, got a %s key", luaL_typename(L, -2));
    ltb_handle *h = ltb_test_handle(L, -1);
    if (!h)
      ltb_error(L, "save: '%s' is a %s, not a tensor", lua_tostring(L, -2),
                 luaL_typename(L, -1));
    if (!h->tensor) ltb_error(L, "save: attempt to use a freed tensor ('%s')", lua_tostring(L, -2));
    lt_tensor *t = h->tensor;
    size_t len;
    (*names)[i] = lua_tolstring(L, -2, &len);
    if (strlen((*names)[i]) != len) ltb_error(L, "save: a tensor name contains a NUL character");
    (*tensors)[i] = t;
    i++;
    lua_pop(L, 1);
  }
  return n;
}

/* opts.metadata into keys[] and values[]: strings, or numbers written as Lua
 * writes them (an epoch, a learning rate); they come back as strings. The
 * converted strings are kept alive in a table left on the stack. */
static int read_metadata(lua_State *L, int opts, const char ***keys, const char ***values) {
  *keys = *values = NULL;
  if (lua_isnoneornil(L, opts)) return 0;
  if (!lua_istable(L, opts))
    ltb_error(L, "save: expected an options table {metadata = {...}}, got %s",
               luaL_typename(L, opts));
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "metadata") != 0)
      ltb_error(L, "save: unknown option '%s'", luaL_tolstring(L, -2, NULL));
    lua_pop(L, 1);
  }
  if (lua_getfield(L, opts, "metadata") != LUA_TTABLE)
    ltb_error(L, "save: option 'metadata' must be a table of strings, got %s",
               luaL_typename(L, -1));
  int meta = lua_gettop(L);
  int n = count_entries(L, meta);
  *keys = scratch(L, (size_t)n, sizeof **keys);
  *values = scratch(L, (size_t)n, sizeof **values);
  lua_createtable(L, n, 0); /* keeps converted numbers alive */
  int keep = lua_gettop(L), i = 0;
  lua_pushnil(L);
  while (lua_next(L, meta)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      ltb_error(L, "save: metadata keys must be strings, got a %s key", luaL_typename(L, -2));
    int type = lua_type(L, -1);
    if (type != LUA_TSTRING && type != LUA_TNUMBER)
      ltb_error(L, "save: metadata value of '%s' must be a string or a number, got %s",
                 lua_tostring(L, -2), luaL_typename(L, -1));
    size_t len;
    (*keys)[i] = lua_tolstring(L, -2, &len);
    if (strlen((*keys)[i]) != len) ltb_error(L, "save: a metadata key contains a NUL character");
    if (type == LUA_TSTRING && strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
      ltb_error(L, "save: metadata value of '%s' contains a NUL character", (*keys)[i]);
    if (type == LUA_TNUMBER) {
      luaL_tolstring(L, -1, NULL);
      lua_rawseti(L, keep, i + 1);
      lua_rawgeti(L, keep, i + 1);
      (*values)[i] = lua_tostring(L, -1);
      lua_pop(L, 1);
    } else {
      (*values)[i] = lua_tostring(L, -1);
    }
    i++;
    lua_pop(L, 1);
  }
  return n;
}

static int lt_save_fn(lua_State *L) {
  lua_settop(L, 3); /* the scratch arrays go above the arguments */
  const char *path = ltb_check_path(L, 1, "save");
  const char **names, **keys, **values;
  lt_tensor **tensors;
  int n = read_tensors_table(L, 2, &names, &tensors);
  int nmeta = read_metadata(L, 3, &keys, &values);
  lt_status st = lt_safetensors_save(path, names, tensors, n, keys, values, nmeta);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* core._write_file(who, path, text): path replaced by text, completely or
 * not at all (the safetensors writer's temporary and rename). */
static int write_file_fn(lua_State *L) {
  const char *who = luaL_checkstring(L, 1);
  const char *path = luaL_checkstring(L, 2);
  size_t n = 0;
  const char *text = luaL_checklstring(L, 3, &n);
  lt_status st = lt_write_file_atomically(who, path, text, n);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- lt.load(path) -> tensors, metadata ---- */

static int loaded_gc(lua_State *L) {
  lt_safetensors_free(luaL_checkudata(L, 1, LOADED_FILE_NAME));
  return 0;
}

static int lt_load_fn(lua_State *L) {
  const char *path = ltb_check_path(L, 1, "load");
  /* The loaded file lives in a userdata until each tensor has its handle,
   * so that a Lua error on the way (out of memory) frees the rest. */
  lt_safetensors *file = lua_newuserdatauv(L, sizeof *file, 0);
  memset(file, 0, sizeof *file);
  luaL_setmetatable(L, LOADED_FILE_NAME);
  int box = lua_gettop(L);
  lt_status st = lt_safetensors_load(path, file);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_createtable(L, 0, file->count);
  int tensors = lua_gettop(L);
  for (int i = 0; i < file->count; i++) {
    ltb_handle *h = ltb_new_handle(L);
    ltb_finish(L, h, LT_OK, file->tensors[i]);
    file->tensors[i] = NULL; /* the handle owns it now */
    lua_setfield(L, tensors, file->names[i]);
  }
  lua_createtable(L, 0, file->nmeta);
  for (int i = 0; i < file->nmeta; i++) {
    lua_pushstring(L, file->meta_values[i]);
    lua_setfield(L, -2, file->meta_keys[i]);
  }
  lt_safetensors_free(file);
  lua_remove(L, box);
  return 2;
}

/* ---- lt.read_idx(path) ---- */

static int lt_read_idx_fn(lua_State *L) {
  const char *path = ltb_check_path(L, 1, "read_idx");
  lt_tensor *out = NULL;
  lt_status st = lt_idx_read(path, &out);
  return ltb_push_result(L, st, out);
}

/* ---- index_select(t, dim, index) ---- */

static int index_select_fn(lua_State *L) {
  const char *op = "index_select";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  int dim = ltb_check_dim(L, 2, t->ndim, op);
  lt_tensor *index = ltb_check_tensor(L, 3, op);
  lt_tensor *out = NULL;
  lt_status st = lt_index_select(t, dim, index, 1, &out);
  return ltb_push_result(L, st, out);
}

/* ---- lt.randperm(n, {seed=}) ---- */

/* 1..n in random order (int64). With a seed, from a private generator with
 * that seed (the global one is untouched): the same seed, the same order. */
static int lt_randperm_fn(lua_State *L) {
  const char *op = "randperm";
  lua_Integer n = ltb_check_integer(L, 1, op, "n");
  if (n < 0) return ltb_error(L, "%s: n must be non-negative, got %I", op, n);
  lt_rng_state gen = {0, 0}, *use = NULL;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "seed") != 0)
        return ltb_error(L, "%s: unknown option '%s'", op, luaL_tolstring(L, -2, NULL));
      gen.seed = (uint64_t)ltb_check_integer(L, -1, op, "the seed");
      use = &gen;
      lua_pop(L, 1);
    }
  }
  lt_tensor *out = NULL;
  lt_status st = lt_randperm((int64_t)n, 1, use, &out);
  return ltb_push_result(L, st, out);
}

/* ---- generator state as a string: "philox:<seed>:<offset>" ---- */

#define RNG_STATE_PREFIX "philox:"

static int lt_get_rng_state_fn(lua_State *L) {
  lt_rng_state s = lt_rng_get_state();
  char buf[64];
  snprintf(buf, sizeof buf, RNG_STATE_PREFIX "%" PRIu64 ":%" PRIu64, s.seed, s.offset);
  lua_pushstring(L, buf);
  return 1;
}

/* An unsigned decimal ending at `stop`; false unless it is all digits and fits. */
static bool parse_u64(const char *s, char stop, uint64_t *out, const char **end) {
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  char *e;
  unsigned long long v = strtoull(s, &e, 10);
  if (errno != 0 || *e != stop) return false;
  *out = (uint64_t)v;
  *end = e;
  return true;
}

static int lt_set_rng_state_fn(lua_State *L) {
  const char *text = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
  lt_rng_state s;
  const char *p;
  if (!text || strncmp(text, RNG_STATE_PREFIX, strlen(RNG_STATE_PREFIX)) != 0 ||
      !parse_u64(text + strlen(RNG_STATE_PREFIX), ':', &s.seed, &p) ||
      !parse_u64(p + 1, '\0', &s.offset, &p))
    return ltb_error(L, "set_rng_state: expected a state string from lt.get_rng_state() "
                      "(\"philox:<seed>:<offset>\"), got %s",
                      text ? lua_pushfstring(L, "'%s'", text) : luaL_typename(L, 1));
  lt_rng_set_state(s);
  return 0;
}

void ltb_open_io(lua_State *L, int methods_idx, int core_idx) {
  methods_idx = lua_absindex(L, methods_idx);
  core_idx = lua_absindex(L, core_idx);
  luaL_newmetatable(L, LOADED_FILE_NAME);
  lua_pushcfunction(L, loaded_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg functions[] = {
      {"save", lt_save_fn},
      {"load", lt_load_fn},
      {"_write_file", write_file_fn},
      {"read_idx", lt_read_idx_fn},
      {"index_select", index_select_fn},
      {"randperm", lt_randperm_fn},
      {"get_rng_state", lt_get_rng_state_fn},
      {"set_rng_state", lt_set_rng_state_fn},
      {NULL, NULL},
  };
  lua_pushvalue(L, core_idx);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, index_select_fn);
  lua_setfield(L, methods_idx, "index_select");
}
