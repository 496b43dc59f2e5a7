/* lt.memory.record, lt.memory.mark and lt.memory.snapshot: the allocator's
 * event log (engine/alloc/history.c) seen from Lua. lt.memory.report
 * (lua/lt/memory_report.lua) draws a snapshot as an HTML page.
 *
 * While recording, every new storage gets the Lua line that created it as
 * its origin (bindings/memory.c, ltb_charge), whatever its size. */
#include <string.h>

#include <lauxlib.h>

#include "args.h"
#include "memory.h"

static const char *const kind_names[] = {
    [LT_EVENT_ALLOC] = "alloc",       [LT_EVENT_FREE] = "free", [LT_EVENT_CATEGORY] = "category",
    [LT_EVENT_MARK] = "mark",         [LT_EVENT_EXISTING] = "existing",
    [LT_EVENT_SEGMENT_ALLOC] = "segment_alloc", [LT_EVENT_SEGMENT_FREE] = "segment_free",
};

/* record(on [, {max_events=}]): starts (a fresh log) or stops recording.
 * Returns whether it was recording before. */
static int memory_record(lua_State *L) {
  const char *op = "record";
  luaL_argexpected(L, lua_isboolean(L, 1), 1, "boolean");
  bool on = lua_toboolean(L, 1);
  size_t max_events = 0;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      lua_pop(L, 1);
      const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
      if (strcmp(key, "max_events") != 0)
        return ltb_error(L, "%s: unknown option '%s' (expected max_events)", op, key);
    }
    lua_getfield(L, 2, "max_events");
    if (!lua_isnil(L, -1)) {
      lua_Integer n = ltb_check_integer(L, -1, op, "max_events");
      if (n < 1) return ltb_error(L, "%s: max_events must be positive, got %I", op, n);
      max_events = (size_t)n;
    }
    lua_pop(L, 1);
  }
  lua_pushboolean(L, lt_memory_history_recording());
  if (on) {
    lt_status st = lt_memory_history_start(max_events);
    if (st != LT_OK) return ltb_raise(L, st);
  } else {
    lt_memory_history_stop();
  }
  return 1;
}

/* mark(label): a labelled moment on the timeline ("epoch 2"); nothing when
 * not recording. */
static int memory_mark(lua_State *L) {
  luaL_checkstring(L, 1);
  if (!lt_memory_history_recording()) return 0;
  lua_settop(L, 1);
  lua_pushstring(L, lua_tostring(L, 1)); /* a number label becomes a string */
  const char *label = ltb_intern_top(L);
  if (label) lt_memory_mark(label);
  return 0;
}

static void set_string(lua_State *L, const char *key, const char *value) {
  lua_pushstring(L, value);
  lua_setfield(L, -2, key);
}

static void set_integer(lua_State *L, const char *key, lua_Integer value) {
  lua_pushinteger(L, value);
  lua_setfield(L, -2, key);
}

static void push_event(lua_State *L, const lt_memory_event *e) {
  lua_createtable(L, 0, 13);
  set_string(L, "kind", e->kind < sizeof kind_names / sizeof kind_names[0] ? kind_names[e->kind] : "?");
  lua_pushnumber(L, (lua_Number)e->time_ns * 1e-9);
  lua_setfield(L, -2, "time");
  if (e->kind == LT_EVENT_MARK) {
    if (e->origin) set_string(L, "label", e->origin);
    return;
  }
  char device[16];
  set_string(L, "device", lt_device_name(e->device, device));
  set_integer(L, "id", (lua_Integer)e->id);
  set_integer(L, "size", (lua_Integer)e->size);
  if (e->kind == LT_EVENT_SEGMENT_ALLOC || e->kind == LT_EVENT_SEGMENT_FREE) return;
  set_integer(L, "segment", (lua_Integer)e->segment);
  set_integer(L, "offset", (lua_Integer)e->offset);
  if (e->flags & LT_EVENT_COLLECTED) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "collected");
  }
  set_integer(L, "requested", (lua_Integer)e->requested);
  set_string(L, "category", lt_category_name((lt_category)e->category));
  if (e->kind == LT_EVENT_CATEGORY)
    set_string(L, "previous", lt_category_name((lt_category)e->previous_category));
  if (e->origin) set_string(L, "origin", e->origin);
  if (e->op) set_string(L, "op", e->op);
}

/* snapshot(): {events = {...}, recording=, dropped=, max_events=, stats =
 * lt.memory.stats()}. Events are copied out in chunks so that the log's lock
 * is never held while Lua allocates. */
static int memory_snapshot(lua_State *L) {
  enum { CHUNK = 128 };
  lt_memory_history_info info;
  lt_memory_history_get_info(&info);
  lua_createtable(L, 0, 5);
  lua_createtable(L, info.count > (size_t)INT32_MAX ? INT32_MAX : (int)info.count, 0);
  lt_memory_event chunk[CHUNK];
  size_t first = 0, n;
  while ((n = lt_memory_history_read(first, chunk, CHUNK)) > 0) {
    for (size_t i = 0; i < n; i++) {
      push_event(L, &chunk[i]);
      lua_rawseti(L, -2, (lua_Integer)(first + i + 1));
    }
    first += n;
  }
  lua_setfield(L, -2, "events");
  lua_pushboolean(L, info.recording);
  lua_setfield(L, -2, "recording");
  set_integer(L, "dropped", (lua_Integer)info.dropped);
  set_integer(L, "max_events", (lua_Integer)info.max_events);
  lua_getfield(L, lua_upvalueindex(1), "stats");
  lua_call(L, 0, 1);
  lua_setfield(L, -2, "stats");
  return 1;
}

void ltb_open_memory_history(lua_State *L, int memory_idx) {
  memory_idx = lua_absindex(L, memory_idx);
  lua_pushcfunction(L, memory_record);
  lua_setfield(L, memory_idx, "record");
  lua_pushcfunction(L, memory_mark);
  lua_setfield(L, memory_idx, "mark");
  lua_pushvalue(L, memory_idx);
  lua_pushcclosure(L, memory_snapshot, 1);
  lua_setfield(L, memory_idx, "snapshot");
}
