/* CUDA streams and events seen from Lua, after torch.cuda.Stream and
 * torch.cuda.Event: lt.cuda.Stream, current_stream, default_stream,
 * set_stream, stream (the scope that `with torch.cuda.stream(s):` is in
 * Python), lt.cuda.Event, and t:record_stream(s).
 *
 * A Stream userdata is a plain value (device, id): the engine never destroys
 * its streams, so there is nothing to free and two userdata naming the same
 * stream compare equal. An Event owns a cudaEvent_t and frees it on __gc or
 * __close, as liolib.c's file handles do.
 *
 * Arguments are checked before CUDA is asked for, so that a wrong call gives
 * the same error with or without a GPU. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

#define STREAM_NAME "lt.cuda.Stream"
#define EVENT_NAME "lt.cuda.Event"
#define STREAM_GUARD_NAME "lt.cuda.StreamGuard"

typedef struct stream_ud {
  int device; /* N of cuda:N */
  lt_cuda_stream id;
} stream_ud;

typedef struct event_ud {
  lt_cuda_event *event; /* NULL once freed */
  int device;           /* kept for __tostring after the event is freed */
  bool timing;
} event_ud;

/* ---- helpers ---- */

/* What a wrong argument is, in words: its __name when it has one (a tensor
 * says "lt.Tensor", not "userdata"). */
static const char *type_name(lua_State *L, int idx) {
  int type = luaL_getmetafield(L, idx, "__name");
  if (type == LUA_TSTRING) {
    const char *name = lua_tostring(L, -1); /* kept alive by the metatable */
    lua_pop(L, 1);
    return name;
  }
  if (type != LUA_TNIL) lua_pop(L, 1);
  return luaL_typename(L, idx);
}

/* Raises an engine failure under the Lua function's name; the engine's message
 * names its own call ("cuda.event_elapsed_ms: ..."), which is kept after it. */
static int raise_from(lua_State *L, const char *op, lt_status st) {
  const char *msg = lt_last_error();
  size_t n = strlen(op);
  if (st == LT_ERR_OOM || (strncmp(msg, op, n) == 0 && msg[n] == ':')) return ltb_raise(L, st);
  return ltb_error(L, "%s: %s", op, msg);
}

static void push_cuda_device(lua_State *L, int device) {
  lt_device dev = {LT_DEVICE_CUDA, (signed char)device};
  ltb_push_device(L, dev);
}

/* The CUDA device an argument names: none or nil (the current device),
 * "cuda:N", "cuda" (the current device) or the number N. The CPU, other
 * types, and a device that does not exist are errors. */
static int check_cuda_device(lua_State *L, int idx, const char *op) {
  lt_device dev = {LT_DEVICE_CUDA, 0};
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TNONE:
    case LUA_TNIL:
      ltb_require_device(L, dev, op);
      return lt_cuda_current_device();
    case LUA_TSTRING:
      dev = ltb_parse_device(L, lua_tostring(L, idx), op);
      if (dev.type != LT_DEVICE_CUDA)
        ltb_error(L, "%s: expected a CUDA device, got '%s'", op, lua_tostring(L, idx));
      break;
    case LUA_TNUMBER: {
      lua_Integer i = ltb_check_integer(L, idx, op, "the device number");
      if (i < 0 || i >= LT_MAX_DEVICES) ltb_error(L, "%s: invalid device number %I", op, i);
      dev.index = (signed char)i;
      break;
    }
    default:
      ltb_error(L, "%s: expected a device (\"cuda:N\" or a number), got %s", op,
                 type_name(L, idx));
  }
  ltb_require_device(L, dev, op);
  return dev.index;
}

static stream_ud *push_stream(lua_State *L, int device, lt_cuda_stream id) {
  stream_ud *s = lua_newuserdatauv(L, sizeof *s, 0);
  s->device = device;
  s->id = id;
  luaL_setmetatable(L, STREAM_NAME);
  return s;
}

static stream_ud *check_stream(lua_State *L, int idx, const char *op) {
  stream_ud *s = luaL_testudata(L, idx, STREAM_NAME);
  if (s == NULL)
    ltb_error(L, "%s: expected a CUDA stream (lt.cuda.Stream), got %s", op, type_name(L, idx));
  return s;
}

/* The stream at idx, or the current stream of device when the argument is
 * absent; a given stream must be on device (CUDA records and waits on an
 * event only from a stream of the event's device). */
static stream_ud opt_stream_on(lua_State *L, int idx, int device, const char *op,
                               const char *what) {
  stream_ud out = {device, 0};
  if (lua_isnoneornil(L, idx)) {
    out.id = lt_cuda_current_stream(device);
    return out;
  }
  out = *check_stream(L, idx, op);
  if (out.device != device)
    ltb_error(L, "%s: the stream is on cuda:%d but the %s is on cuda:%d", op, out.device, what,
               device);
  return out;
}

static event_ud *check_event(lua_State *L, int idx, const char *op) {
  event_ud *e = luaL_testudata(L, idx, EVENT_NAME);
  if (e == NULL)
    ltb_error(L, "%s: expected a CUDA event (lt.cuda.Event), got %s", op, type_name(L, idx));
  if (e->event == NULL) ltb_error(L, "%s: attempt to use a freed CUDA event", op);
  return e;
}

/* Pushes an Event userdata before the engine makes the event, so that a Lua
 * memory error cannot leak it. */
static event_ud *new_event(lua_State *L, int device, bool timing, const char *op) {
  event_ud *e = lua_newuserdatauv(L, sizeof *e, 0);
  e->event = NULL;
  e->device = device;
  e->timing = timing;
  luaL_setmetatable(L, EVENT_NAME);
  lt_status st = lt_cuda_event_new(device, timing, &e->event);
  if (st != LT_OK) raise_from(L, op, st);
  return e;
}

/* ---- lt.cuda.Stream and friends ---- */

static int cuda_stream_new(lua_State *L) {
  const char *op = "cuda.Stream";
  int device = check_cuda_device(L, 1, op);
  stream_ud *s = push_stream(L, device, 0);
  lt_status st = lt_cuda_stream_new(device, &s->id);
  if (st != LT_OK) return raise_from(L, op, st);
  return 1;
}

static int cuda_current_stream(lua_State *L) {
  int device = check_cuda_device(L, 1, "cuda.current_stream");
  push_stream(L, device, lt_cuda_current_stream(device));
  return 1;
}

static int cuda_default_stream(lua_State *L) {
  int device = check_cuda_device(L, 1, "cuda.default_stream");
  push_stream(L, device, 0);
  return 1;
}

/* As torch.cuda.set_stream, this also makes the stream's device current:
 * work queued next goes to s wherever it was current before. */
static int cuda_set_stream(lua_State *L) {
  const char *op = "cuda.set_stream";
  stream_ud *s = check_stream(L, 1, op);
  lt_status st = lt_cuda_set_stream(s->device, s->id);
  if (st == LT_OK) st = lt_cuda_set_device(s->device);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

/* ---- lt.cuda.stream(s, fn, ...) and local g <close> = lt.cuda.stream(s) ---- */

/* What a scope changed and must put back: the current device, its current
 * stream, and the current stream of the stream's device. */
typedef struct stream_guard {
  int device, prev_device;
  lt_cuda_stream prev_stream, prev_stream_of_prev_device;
  bool open;
} stream_guard;

static lt_status guard_enter(stream_guard *g, const stream_ud *s) {
  g->device = s->device;
  g->prev_device = lt_cuda_current_device();
  g->prev_stream = lt_cuda_current_stream(s->device);
  g->prev_stream_of_prev_device = lt_cuda_current_stream(g->prev_device);
  lt_status st = lt_cuda_set_stream(s->device, s->id);
  if (st != LT_OK) return st;
  st = lt_cuda_set_device(s->device);
  if (st != LT_OK) {
    (void)lt_cuda_set_stream(s->device, g->prev_stream); /* undo the half done */
    return st;
  }
  g->open = true;
  return LT_OK;
}

/* Puts everything back even when one step fails, and reports the first
 * failure. */
static lt_status guard_leave(stream_guard *g) {
  if (!g->open) return LT_OK;
  g->open = false;
  lt_status st = lt_cuda_set_stream(g->device, g->prev_stream);
  if (g->prev_device != g->device) {
    lt_status st2 = lt_cuda_set_stream(g->prev_device, g->prev_stream_of_prev_device);
    if (st == LT_OK) st = st2;
  }
  lt_status st3 = lt_cuda_set_device(g->prev_device);
  return st != LT_OK ? st : st3;
}

/* __close and g:close(). When an error is on its way (the second argument
 * of __close), a failure to restore is not raised over it. */
static int guard_close(lua_State *L) {
  stream_guard *g = luaL_checkudata(L, 1, STREAM_GUARD_NAME);
  lt_status st = guard_leave(g);
  if (st != LT_OK && lua_isnoneornil(L, 2)) return raise_from(L, "cuda.stream", st);
  return 0;
}

static int guard_tostring(lua_State *L) {
  stream_guard *g = luaL_checkudata(L, 1, STREAM_GUARD_NAME);
  lua_pushfstring(L, "stream guard (cuda:%d, %s)", g->device, g->open ? "open" : "closed");
  return 1;
}

static bool is_callable(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TFUNCTION) return true;
  if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return false;
  lua_pop(L, 1);
  return true;
}

/* fn's results, run with s current; the previous stream and device come back
 * after fn, also when it fails, and fn's error is raised again as it was. */
static int cuda_stream_scope(lua_State *L) {
  const char *op = "cuda.stream";
  stream_ud *s = check_stream(L, 1, op);
  bool guard_only = lua_gettop(L) == 1 || (lua_gettop(L) == 2 && lua_isnil(L, 2));
  if (!guard_only && !is_callable(L, 2))
    return ltb_error(L, "%s: expected a function (or nothing, for a guard), got %s", op,
                      type_name(L, 2));
  /* The guard exists before anything changes, so that a Lua memory error
   * here leaves the current stream as it was. */
  stream_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->open = false;
  luaL_setmetatable(L, STREAM_GUARD_NAME);
  lt_status st = guard_enter(g, s);
  if (st != LT_OK) return raise_from(L, op, st);
  if (guard_only) return 1;
  lua_replace(L, 1); /* the guard takes s's slot: fn and its arguments follow */
  int status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
  st = guard_leave(g);
  if (status != LUA_OK) return lua_error(L); /* fn's error value, unchanged */
  if (st != LT_OK) return raise_from(L, op, st);
  return lua_gettop(L) - 1;
}

/* ---- Stream methods and metamethods ---- */

static int stream_synchronize(lua_State *L) {
  const char *op = "Stream:synchronize";
  stream_ud *s = check_stream(L, 1, op);
  lt_status st = lt_cuda_stream_synchronize(s->device, s->id);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

static int stream_query(lua_State *L) {
  const char *op = "Stream:query";
  stream_ud *s = check_stream(L, 1, op);
  bool done = false;
  lt_status st = lt_cuda_stream_query(s->device, s->id, &done);
  if (st != LT_OK) return raise_from(L, op, st);
  lua_pushboolean(L, done);
  return 1;
}

/* s:wait_stream(other): work queued on s from now on waits for the work
 * queued on other so far. Across devices this goes through an event, as
 * torch's wait_stream always does. */
static int stream_wait_stream(lua_State *L) {
  const char *op = "Stream:wait_stream";
  stream_ud *s = check_stream(L, 1, op);
  stream_ud *other = check_stream(L, 2, op);
  if (other->device == s->device) {
    lt_status st = lt_cuda_stream_wait_stream(s->device, s->id, other->id);
    if (st != LT_OK) return raise_from(L, op, st);
    return 0;
  }
  lt_cuda_event *ev = NULL;
  lt_status st = lt_cuda_event_new(other->device, false, &ev);
  if (st == LT_OK) st = lt_cuda_event_record(ev, other->id);
  if (st == LT_OK) st = lt_cuda_stream_wait_event(s->device, s->id, ev);
  /* The wait is queued: CUDA keeps what it needs of the event after this. */
  if (st != LT_OK) lua_pushstring(L, lt_last_error()); /* freeing may not touch the message */
  lt_cuda_event_free(ev);
  if (st != LT_OK) return ltb_error(L, "%s: %s", op, lua_tostring(L, -1));
  return 0;
}

static int stream_wait_event(lua_State *L) {
  const char *op = "Stream:wait_event";
  stream_ud *s = check_stream(L, 1, op);
  event_ud *e = check_event(L, 2, op);
  lt_status st = lt_cuda_stream_wait_event(s->device, s->id, e->event);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

/* s:record_event([e]) -> e, or a new event (no timing) when none is given. */
static int stream_record_event(lua_State *L) {
  const char *op = "Stream:record_event";
  stream_ud *s = check_stream(L, 1, op);
  event_ud *e;
  if (lua_isnoneornil(L, 2)) {
    e = new_event(L, s->device, false, op);
  } else {
    e = check_event(L, 2, op);
    if (e->device != s->device)
      return ltb_error(L, "%s: the event is on cuda:%d but the stream is on cuda:%d", op,
                        e->device, s->device);
    lua_settop(L, 2);
  }
  lt_status st = lt_cuda_event_record(e->event, s->id);
  if (st != LT_OK) return raise_from(L, op, st);
  return 1;
}

/* s.device and s.id, then the methods (the table upvalue, which the REPL's
 * completion also reads). */
static int stream_index(lua_State *L) {
  const stream_ud *s = luaL_checkudata(L, 1, STREAM_NAME);
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (key && strcmp(key, "device") == 0) {
    push_cuda_device(L, s->device);
    return 1;
  }
  if (key && strcmp(key, "id") == 0) {
    lua_pushinteger(L, (lua_Integer)s->id);
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

static int stream_newindex(lua_State *L) {
  return ltb_error(L, "cannot set field '%s' of a CUDA stream", luaL_tolstring(L, 2, NULL));
}

static int stream_eq(lua_State *L) {
  const stream_ud *a = luaL_testudata(L, 1, STREAM_NAME);
  const stream_ud *b = luaL_testudata(L, 2, STREAM_NAME);
  lua_pushboolean(L, a && b && a->device == b->device && a->id == b->id);
  return 1;
}

static int stream_tostring(lua_State *L) {
  const stream_ud *s = luaL_checkudata(L, 1, STREAM_NAME);
  if (s->id == 0)
    lua_pushfstring(L, "<lt.cuda.Stream cuda:%d default stream>", s->device);
  else
    lua_pushfstring(L, "<lt.cuda.Stream cuda:%d id=%p>", s->device, (void *)s->id);
  return 1;
}

/* ---- lt.cuda.Event{enable_timing=, device=} ---- */

static int cuda_event_new(lua_State *L) {
  const char *op = "cuda.Event";
  bool timing = false;
  bool has_opts = !lua_isnoneornil(L, 1);
  if (has_opts) {
    if (!lua_istable(L, 1))
      return ltb_error(L, "%s: expected an options table {enable_timing=, device=}, got %s", op,
                        type_name(L, 1));
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (key && strcmp(key, "enable_timing") == 0) {
        if (!lua_isboolean(L, -1))
          return ltb_error(L, "%s: option 'enable_timing' must be a boolean, got %s", op,
                            type_name(L, -1));
        timing = lua_toboolean(L, -1);
      } else if (!key || strcmp(key, "device") != 0) {
        if (key)
          return ltb_error(L, "%s: unknown option '%s' (expected enable_timing or device)", op,
                            key);
        return ltb_error(L, "%s: unexpected %s key in the options table", op,
                          luaL_typename(L, -2));
      }
      lua_pop(L, 1);
    }
  }
  /* The device last: every option is checked with or without CUDA. */
  if (has_opts) lua_getfield(L, 1, "device");
  else lua_pushnil(L);
  int device = check_cuda_device(L, -1, op);
  new_event(L, device, timing, op);
  return 1;
}

/* ---- Event methods and metamethods ---- */

/* e:record([stream]): the current stream of the event's device by default. */
static int event_record(lua_State *L) {
  const char *op = "Event:record";
  event_ud *e = check_event(L, 1, op);
  stream_ud s = opt_stream_on(L, 2, e->device, op, "event");
  lt_status st = lt_cuda_event_record(e->event, s.id);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

static int event_synchronize(lua_State *L) {
  const char *op = "Event:synchronize";
  event_ud *e = check_event(L, 1, op);
  lt_status st = lt_cuda_event_synchronize(e->event);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

static int event_query(lua_State *L) {
  const char *op = "Event:query";
  event_ud *e = check_event(L, 1, op);
  bool done = false;
  lt_status st = lt_cuda_event_query(e->event, &done);
  if (st != LT_OK) return raise_from(L, op, st);
  lua_pushboolean(L, done);
  return 1;
}

/* start:elapsed_time(end) -> milliseconds, as torch.cuda.Event.elapsed_time. */
static int event_elapsed_time(lua_State *L) {
  const char *op = "Event:elapsed_time";
  event_ud *start = check_event(L, 1, op);
  event_ud *end = check_event(L, 2, op);
  double ms = 0;
  lt_status st = lt_cuda_event_elapsed_ms(start->event, end->event, &ms);
  if (st != LT_OK) return raise_from(L, op, st);
  lua_pushnumber(L, (lua_Number)ms);
  return 1;
}

/* e:wait([stream]): work queued on stream (by default the current device's
 * current stream, as torch's) from now on waits for the event. The stream
 * may be on another device than the event: cudaStreamWaitEvent orders work
 * across devices. */
static int event_wait(lua_State *L) {
  const char *op = "Event:wait";
  event_ud *e = check_event(L, 1, op);
  stream_ud s;
  if (lua_isnoneornil(L, 2)) {
    s.device = lt_cuda_current_device();
    s.id = lt_cuda_current_stream(s.device);
  } else {
    s = *check_stream(L, 2, op);
  }
  lt_status st = lt_cuda_stream_wait_event(s.device, s.id, e->event);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

/* __gc and __close: one idempotent release. */
static int event_gc(lua_State *L) {
  event_ud *e = luaL_checkudata(L, 1, EVENT_NAME);
  lt_cuda_event_free(e->event);
  e->event = NULL;
  return 0;
}

static int event_index(lua_State *L) {
  const event_ud *e = luaL_checkudata(L, 1, EVENT_NAME);
  const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (key && strcmp(key, "device") == 0) {
    push_cuda_device(L, e->device);
    return 1;
  }
  if (key && strcmp(key, "enable_timing") == 0) {
    lua_pushboolean(L, e->timing);
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

static int event_newindex(lua_State *L) {
  return ltb_error(L, "cannot set field '%s' of a CUDA event", luaL_tolstring(L, 2, NULL));
}

static int event_tostring(lua_State *L) {
  const event_ud *e = luaL_checkudata(L, 1, EVENT_NAME);
  lua_pushfstring(L, "<lt.cuda.Event cuda:%d%s%s>", e->device, e->timing ? " timing" : "",
                  e->event ? "" : " (freed)");
  return 1;
}

/* ---- t:record_stream(s) ---- */

/* Tells the allocator that work queued on s uses t's bytes, so that they are
 * not handed out again before that work is done (torch.Tensor.record_stream). */
static int tensor_record_stream(lua_State *L) {
  const char *op = "record_stream";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  lt_device dev = t->storage->device;
  if (dev.type != LT_DEVICE_CUDA) {
    ltb_push_device(L, dev);
    return ltb_error(L, "%s: expected a CUDA tensor, got a tensor on %s", op,
                      lua_tostring(L, -1));
  }
  stream_ud *s = check_stream(L, 2, op);
  if (s->device != dev.index)
    return ltb_error(L, "%s: the stream is on cuda:%d but the tensor is on cuda:%d", op,
                      s->device, (int)dev.index);
  lt_status st = lt_storage_record_stream(t->storage, (lt_stream_id)s->id);
  if (st != LT_OK) return raise_from(L, op, st);
  return 0;
}

/* ---- registration ---- */

/* A metatable whose __index serves fields through index_fn and then the
 * methods table (an upvalue). */
static void new_class(lua_State *L, const char *name, const luaL_Reg *methods,
                      lua_CFunction index_fn, const luaL_Reg *meta) {
  luaL_newmetatable(L, name); /* sets __name */
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushcclosure(L, index_fn, 1);
  lua_setfield(L, -2, "__index");
  luaL_setfuncs(L, meta, 0);
  lua_pop(L, 1);
}

void ltb_open_cuda_stream(lua_State *L, int methods_idx, int cuda_idx) {
  methods_idx = lua_absindex(L, methods_idx);
  cuda_idx = lua_absindex(L, cuda_idx);

  static const luaL_Reg stream_methods[] = {
      {"synchronize", stream_synchronize},   {"query", stream_query},
      {"wait_stream", stream_wait_stream},   {"wait_event", stream_wait_event},
      {"record_event", stream_record_event}, {NULL, NULL},
  };
  static const luaL_Reg stream_meta[] = {
      {"__newindex", stream_newindex},
      {"__eq", stream_eq},
      {"__tostring", stream_tostring},
      {NULL, NULL},
  };
  new_class(L, STREAM_NAME, stream_methods, stream_index, stream_meta);

  static const luaL_Reg event_methods[] = {
      {"record", event_record}, {"synchronize", event_synchronize},
      {"query", event_query},   {"elapsed_time", event_elapsed_time},
      {"wait", event_wait},     {NULL, NULL},
  };
  static const luaL_Reg event_meta[] = {
      {"__newindex", event_newindex},
      {"__gc", event_gc},
      {"__close", event_gc},
      {"__tostring", event_tostring},
      {NULL, NULL},
  };
  new_class(L, EVENT_NAME, event_methods, event_index, event_meta);

  ltb_register_guard(L, STREAM_GUARD_NAME, guard_close, guard_tostring);

  static const luaL_Reg functions[] = {
      {"Stream", cuda_stream_new},
      {"current_stream", cuda_current_stream},
      {"default_stream", cuda_default_stream},
      {"set_stream", cuda_set_stream},
      {"stream", cuda_stream_scope},
      {"Event", cuda_event_new},
      {NULL, NULL},
  };
  lua_pushvalue(L, cuda_idx);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);

  lua_pushcfunction(L, tensor_record_stream);
  lua_setfield(L, methods_idx, "record_stream");
}
