/* lt.memory.*, lt.del, lt.gc; collector charging and the out-of-memory hook.
 *
 * Lua's collector sees only the few bytes of a tensor handle, never the
 * storage behind it, so a loop that drops big tensors would outrun it. Each
 * fresh storage is therefore charged to the collector as debt; when the debt
 * of a device passes a threshold (an eighth of what that device holds now, or
 * of its limit) the collector runs: a full collection when the Lua heap is
 * small next to the debt (a training script's heap is a few hundred KiB and
 * a full collection of it takes tens of microseconds, while the tensors it
 * frees are megabytes: so dropped graphs go back within a fraction of a step,
 * as PyTorch's refcounting would free them), else a step sized by the debt.
 * Small tensors cost one addition and one comparison. If an allocation fails
 * anyway, the allocator calls our hook, which runs a full collection before
 * it retries. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "args.h"
#include "memory.h"
#include "tensor_handle.h"

/* ---- collector charging ---- */

enum { NSLOTS = 1 + LT_MAX_DEVICES }; /* the cpu, then each cuda device */

/* The two measures of what is allocated (peak collections below): the
 * allocator's blocks, the bytes asked for. */
typedef struct usage {
  size_t blocks, requested;
} usage;

typedef struct pressure {
  size_t debt;      /* bytes charged since the last step */
  size_t threshold; /* debt that triggers the next step (0: step at once) */
  usage live_max;   /* the most bytes found live by a collection since the
                       peak was last reset (peak collections below) */
  size_t charged;   /* bytes charged since the last full collection */
  unsigned useless; /* peak collections in a row that freed next to nothing */
  unsigned backoff; /* the slack's doublings (peak_mark) */
  usage marks;      /* the marks last set (set_marks) */
} pressure;

static pressure pressures[NSLOTS];

static int slot_of(lt_device dev) {
  if (dev.type == LT_DEVICE_CPU || dev.index < 0 || dev.index >= LT_MAX_DEVICES) return 0;
  return 1 + dev.index;
}

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)

static size_t next_threshold(lt_device dev) {
  size_t t = lt_memory_allocated(dev) / 8;
  if (t < 256 * KIB) t = 256 * KIB;
  if (t > 64 * MIB) t = 64 * MIB;
  const size_t limit = lt_get_limit(dev);
  if (limit > 0 && t > limit / 8) t = limit / 8;
  return t;
}

/* Tensors of at least this size remember the script line that made them, for
 * out-of-memory messages; smaller ones skip the lookup, except while the
 * memory history records (then every allocation carries its line). */
#define ORIGIN_MIN_BYTES MIB

static const char origins_key = 0; /* registry: interned origin strings and mark labels */

/* ltb_intern_top (memory.h): the allocator and the history keep the
 * pointer, so the string lives as long as the state, in a registry table
 * that is never replaced. */
const char *ltb_intern_top(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &origins_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return NULL;
  }
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -1);
    lua_rawset(L, -3); /* origins[s] = s */
    lua_pushvalue(L, -2);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
  return lua_tostring(L, -1);
}

/* lt's own Lua library (lua/lt/...): a tensor made there for the caller
 * (F.linear, a module's forward) is charged to the caller's line. */
static bool in_lt_library(const lua_Debug *ar) {
  return strstr(ar->source, "lua/lt/") != NULL;
}

/* The registry key of the modules' __call (lua/lt/nn/module.lua), which
 * calls forward and stays on the stack while it runs: not a layer of its
 * own in an origin ("nn.Linear:forward", not "nn.Linear:layer > ..."). */
static const char FORWARD_CALLER_KEY[] = "lt.forward_caller";

int ltb_set_forward_caller(lua_State *L) { return ltb_store_function(L, FORWARD_CALLER_KEY); }

/* Whether the frame ar (with "S" info) runs the modules' __call. */
static bool is_forward_caller(lua_State *L, lua_Debug *ar) {
  if (ar->linedefined <= 0) return false;
  lua_getinfo(L, "f", ar);
  lua_getfield(L, LUA_REGISTRYINDEX, FORWARD_CALLER_KEY);
  const bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return same;
}

/* Whether the value on top of the stack is the function at fn, or a
 * wrapper of it: methods.wrap's closure (lua/lt/methods.lua), which checks
 * self and tail-calls the method it holds as its upvalue fn. */
static bool is_or_wraps(lua_State *L, int fn) {
  if (lua_rawequal(L, -1, fn)) return true;
  if (!lua_isfunction(L, -1) || lua_iscfunction(L, -1)) return false;
  bool found = false;
  const char *up;
  for (int i = 1; !found && (up = lua_getupvalue(L, -1, i)) != NULL; i++) {
    found = strcmp(up, "fn") == 0 && lua_rawequal(L, -1, fn);
    lua_pop(L, 1);
  }
  return found;
}

/* The name under which the class at idx (or a class it inherits from:
 * its metatable's __index) holds the function at fn, or NULL. A method has
 * no name of its own in the debug information when it was entered by a tail
 * call, as every guarded method is. */
static const char *method_name(lua_State *L, int idx, int fn, char *buf, size_t n) {
  const int top = lua_gettop(L);
  const char *found = NULL;
  lua_pushvalue(L, idx);
  for (int depth = 0; depth < 8 && !found && lua_istable(L, -1); depth++) {
    lua_pushnil(L);
    while (!found && lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && is_or_wraps(L, fn)) {
        snprintf(buf, n, "%s", lua_tostring(L, -2));
        found = buf;
      }
      lua_pop(L, 1);
    }
    if (found) break;
    if (!lua_getmetatable(L, -1)) break;
    lua_getfield(L, -1, "__index");
    lua_replace(L, -3);
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return found;
}

/* "nn.Conv2d:forward" when the frame at ar is a method of an nn module (its
 * first local, self, a table whose metatable has __lt_module); "nn.Linear()"
 * for a module's constructor; else "recipes.training.fit": the file's path under
 * lua/lt/ as a dotted name, then the function's. Only for frames of lt's
 * library (in_lt_library), whose source holds "lua/lt/". Returns whether
 * it is a module's method. The
 * frame's function (lua_getinfo "f") is on top of the stack, popped here. */
static bool describe_library_frame(lua_State *L, lua_Debug *ar, char *out, size_t n) {
  char buf[64];
  const int fn = lua_gettop(L);
  const char *name = ar->name;
  const char *local = lua_getlocal(L, ar, 1);
  bool module = local && strcmp(local, "self") == 0 && lua_istable(L, -1) &&
                lua_getmetatable(L, -1) && lua_getfield(L, -1, "__lt_module") == LUA_TBOOLEAN &&
                lua_toboolean(L, -1) && lua_getfield(L, fn + 2, "__name") == LUA_TSTRING;
  if (module) {
    if (!name && lua_getfield(L, fn + 2, "__class") == LUA_TTABLE)
      name = method_name(L, -1, fn, buf, sizeof buf);
    if (name) snprintf(out, n, "nn.%s:%s", lua_tostring(L, fn + 4), name);
    else snprintf(out, n, "nn.%s", lua_tostring(L, fn + 4));
  } else if (local && strcmp(local, "cls") == 0 && lua_istable(L, fn + 1) &&
             lua_getfield(L, fn + 1, "_name") == LUA_TSTRING) {
    snprintf(out, n, "nn.%s()", lua_tostring(L, -1)); /* module.lua's construct(cls, ...) */
  } else {
    /* the path under lua/lt/ with dots: "recipes.training.fit", "nn.functional.linear" */
    const char *path = strstr(ar->source, "lua/lt/") + strlen("lua/lt/");
    size_t len = strlen(path);
    if (len > 4 && strcmp(path + len - 4, ".lua") == 0) len -= 4;
    char where[64];
    snprintf(where, sizeof where, "%.*s", (int)len, path);
    for (char *c = where; *c; c++)
      if (*c == '/') *c = '.';
    snprintf(out, n, "%s.%s", where, name ? name : "?");
  }
  lua_settop(L, fn - 1);
  return module;
}

/* The line to blame: the innermost Lua function outside lt's library (the
 * script's own forward, not the training.fit call around it); the innermost
 * Lua function at all when every one is inside it. op gets the library code
 * it was made in ("" when none): the library function the script's line
 * called, then the innermost nn module method (or library function) below
 * it when that is another: "recipes.training.fit > nn.Conv2d:forward". */
static bool find_origin_frame(lua_State *L, lua_Debug *ar, char *op, size_t op_size) {
  enum { MAX_LEVELS = 64 };
  char inner[96] = "", entry[96] = "";
  bool inner_is_module = false, found = false;
  int library_frames = 0, inner_level = 0, outer_level = 0;
  lua_Debug innermost_library, outer;
  for (int level = 1; level <= MAX_LEVELS && lua_getstack(L, level, ar); level++) {
    if (!lua_getinfo(L, "Sl", ar) || ar->currentline <= 0) continue; /* a C function */
    if (!in_lt_library(ar)) {
      found = true;
      break;
    }
    if (is_forward_caller(L, ar)) continue; /* the forward below is the layer */
    if (library_frames++ == 0) innermost_library = *ar;
    outer = *ar;
    outer_level = level;
    /* Frames above the innermost module method need no description, but
     * the outermost one (described below, once known). */
    if (inner_is_module) continue;
    lua_getinfo(L, "nf", ar);
    bool module = describe_library_frame(L, ar, entry, sizeof entry);
    if (inner[0] == '\0' || module) {
      memcpy(inner, entry, sizeof inner);
      inner_is_module = module;
      inner_level = level;
    }
  }
  op[0] = '\0';
  if (library_frames > 0) {
    if (outer_level == inner_level) {
      snprintf(op, op_size, "%s", inner);
    } else {
      /* outer's frame is still on the stack: its lua_Debug is still valid */
      lua_getinfo(L, "nf", &outer);
      describe_library_frame(L, &outer, entry, sizeof entry);
      snprintf(op, op_size, "%s > %s", entry, inner);
    }
  }
  if (!found && library_frames > 0) {
    *ar = innermost_library;
    found = true;
  }
  return found;
}

static void record_origin(lua_State *L, lt_block *block) {
  lua_Debug ar;
  char op[200];
  if (!block || !find_origin_frame(L, &ar, op, sizeof op)) return;
  lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
  const char *origin = ltb_intern_top(L);
  const char *op_interned = NULL;
  if (op[0] != '\0') {
    lua_pushstring(L, op);
    op_interned = ltb_intern_top(L);
  }
  if (origin) lt_block_set_origin(block, origin, op_interned);
  lua_pop(L, op[0] != '\0' ? 2 : 1);
}

void ltb_charge(lua_State *L, const lt_tensor *t) {
  const lt_storage *s = t->storage;
  size_t bytes = s->block ? lt_block_size(s->block) : s->nbytes;
  if (bytes >= ORIGIN_MIN_BYTES || lt_memory_history_recording()) record_origin(L, s->block);
  pressure *p = &pressures[slot_of(s->device)];
  p->charged += bytes;
  /* The debt is what was charged before this tensor: the garbage a step
   * could find. This one is live, so a big result alone runs nothing, and
   * a loop that gives back what it makes (ltb_uncharge) never steps. */
  if (p->debt < p->threshold) {
    /* The threshold follows what is allocated now, not at the last step:
     * after a phase that held 256 MiB, dropped 1 MiB tensors would pile
     * up to 32 MiB before the next one. */
    const size_t now = next_threshold(s->device);
    if (now < p->threshold) p->threshold = now;
    if (p->debt < p->threshold) {
      p->debt += bytes;
      return;
    }
  }
  size_t kib = p->debt / KIB;
  p->debt = bytes;
  size_t heap_kib = (size_t)lua_gc(L, LUA_GCCOUNT);
  if (heap_kib <= 4 * kib)
    lua_gc(L, LUA_GCCOLLECT);
  else
    lua_gc(L, LUA_GCSTEP, kib > INT_MAX ? INT_MAX : (int)kib);
  p->threshold = next_threshold(s->device);
}

void ltb_uncharge(lt_device dev, size_t bytes) {
  pressure *p = &pressures[slot_of(dev)];
  p->debt = bytes < p->debt ? p->debt - bytes : 0;
}

static void clear_debts(void) {
  for (int i = 0; i < NSLOTS; i++) pressures[i].debt = pressures[i].charged = 0;
}


/* ---- out of memory ---- */

static lua_State *hook_state; /* the main thread of the state that installed the hook */
static bool in_hook;          /* a collection started by the hook is running */
static lt_device last_oom_device;

static void oom_hook(void *ud, lt_device dev, size_t nbytes) {
  (void)nbytes;
  last_oom_device = dev;
  if (in_hook || ud == NULL) return; /* a finalizer allocating would re-enter */
  in_hook = true;
  lua_gc((lua_State *)ud, LUA_GCCOLLECT);
  in_hook = false;
  clear_debts();
}

/* ---- peak collections ----
 *
 * The debt rule above lets garbage reach an eighth of what is allocated; at
 * the moment of a step's peak that eighth is a peak PyTorch would not have.
 * So the allocator also asks (its peak hook) before an allocation would lift
 * what is allocated above a mark a little over the most ever found live
 * since the peak was reset: a full collection then gives back everything the
 * script dropped, and the allocation sets a new peak only if live tensors
 * need it. There are two marks, one on each measure of "allocated": the
 * requested bytes (what tensors asked for, what PyTorch's figures count)
 * within a tight slack, and the allocator's blocks (each rounded up to 512
 * bytes) within a looser one. The peak thus stays within the slacks of the
 * one reference counting would give (a collection before every
 * instruction), and in a training loop a mark is crossed about once a step.
 * A collection costs time in proportion to the Lua heap, so past
 * PEAK_HEAP_FREE it runs only when the tensors charged since the last one
 * are not small next to the heap; until then the marks move up by what is
 * missing. While live bytes only grow (a script filling a list with tensors)
 * collections find nothing: past PEAK_USELESS_FREE of them in a row (a
 * forward pass saving its activations makes a few), each one that frees less
 * than an eighth of both slacks doubles the next slacks, so such a phase costs
 * a logarithmic number of them, and one that frees something brings the
 * slacks back. */

/* The requested slack is a floor of 2 KiB in practice: below a model's output
 * (the logits a step drops while its backward runs, 5 KiB for 128 rows of 10
 * classes, 2.5 KiB in bfloat16 under autocast), so that such garbage never
 * makes a peak PyTorch would not have.
 * The blocks' slack is wider because a tiny tensor's block is 512 bytes
 * whatever it holds: a small model's step drops a few of them (a 1 x 10
 * logits and a loss: 44 bytes asked, 1 KiB of blocks), and a 4 KiB slack on
 * blocks would collect every four steps, a tenth of a batch-1 step's time. */
#define PEAK_SLACK_DIV 100000 /* 0.001% */
#define PEAK_SLACK_MIN (2 * KIB)
#define PEAK_BLOCK_SLACK_DIV 256 /* 0.4% */
#define PEAK_BLOCK_SLACK_MIN (16 * KIB)
/* A heap up to this size is collected at every mark: a training script's is
 * a few hundred KiB, whose full collection takes well under 0.1 ms. */
#define PEAK_HEAP_FREE (4 * MIB)

#define PEAK_USELESS_FREE 64
#define PEAK_BACKOFF_MAX 20 /* the slacks grow to at most 2^20 times */

static usage usage_now(lt_device dev) { return (usage){lt_memory_allocated(dev), lt_memory_requested(dev)}; }

static usage usage_plus(usage u, size_t nbytes) { return (usage){u.blocks + nbytes, u.requested + nbytes}; }

static size_t slack_of(size_t live, size_t div, size_t floor, unsigned backoff) {
  size_t slack = live / div;
  if (slack < floor) slack = floor;
  return slack << backoff;
}

static usage peak_slack(usage live, unsigned backoff) {
  return (usage){slack_of(live.blocks, PEAK_BLOCK_SLACK_DIV, PEAK_BLOCK_SLACK_MIN, backoff),
                 slack_of(live.requested, PEAK_SLACK_DIV, PEAK_SLACK_MIN, backoff)};
}

static void set_marks(lt_device dev, usage live, usage slack) {
  const usage marks = {live.blocks + slack.blocks, live.requested + slack.requested};
  pressures[slot_of(dev)].marks = marks;
  lt_alloc_set_collect_marks(dev, marks.blocks, marks.requested);
}

/* A young collection first: the collector runs in generational mode
 * (luaopen_lt_core), and what a script dropped since the last collection,
 * the usual garbage at a mark (a loop dropping each result, a step's
 * temporaries), is young. It marks only the young objects and the old ones
 * they touch, a few tenths of a microsecond where a full collection of lt's
 * heap takes tens. If the allocation then fits under the marks, they stay as
 * they were (what is live was not measured: old garbage may remain); else a
 * full collection runs.
 *
 * A full collection in generational mode makes every survivor old, the
 * handles of the tensors a loop is using included, and when the loop drops
 * them at its next peak the young collection finds nothing (a forward and
 * backward each iteration, where the peak falls while the iteration's
 * tensors are alive). Then the collector goes incremental, whose full
 * collection costs about 4/5 of a generational one, and tries generational
 * again every PEAK_GEN_RETRY peaks, through the full collection that the
 * switch runs anyway. lt owns the mode: collectgarbage("incremental") or
 * ("generational") holds only until the next peak collection. */
#define PEAK_GEN_RETRY 16

static bool generational = true;
static unsigned peaks_incremental; /* peak collections since the switch to incremental */

/* young_collection_fits's answers. */
typedef enum { YOUNG_NOT_TRIED, YOUNG_SHORT, YOUNG_FITS } young_result;

static young_result young_collection_fits(lua_State *L, lt_device dev, size_t nbytes) {
  pressure *p = &pressures[slot_of(dev)];
  if (!generational || !lua_gc(L, LUA_GCISRUNNING) || p->live_max.blocks == 0) return YOUNG_NOT_TRIED;
  in_hook = true;
  lua_gc(L, LUA_GCSTEP, 0); /* generational mode: a young collection */
  in_hook = false;
  if (!lt_alloc_within_marks(dev, nbytes, p->marks.blocks, p->marks.requested)) return YOUNG_SHORT;
  lt_alloc_set_collect_marks(dev, p->marks.blocks, p->marks.requested);
  for (int i = 0; i < NSLOTS; i++) pressures[i].debt = 0;
  return YOUNG_FITS;
}

/* The full collection of a peak, in the mode the young collection's result asks for. */
static void peak_full_collection(lua_State *L, young_result young) {
  in_hook = true;
  if (young == YOUNG_SHORT) {
    lua_gc(L, LUA_GCINC, 0, 0, 0);
    generational = false;
    peaks_incremental = 0;
    lua_gc(L, LUA_GCCOLLECT);
  } else if (!generational && ++peaks_incremental >= PEAK_GEN_RETRY) {
    lua_gc(L, LUA_GCGEN, 0, 0); /* a full collection that makes the survivors old */
    generational = true;
  } else {
    lua_gc(L, LUA_GCCOLLECT);
  }
  in_hook = false;
}

static void peak_hook(void *ud, lt_device dev, size_t nbytes) {
  pressure *p = &pressures[slot_of(dev)];
  lua_State *L = ud;
  const usage need = usage_plus(usage_now(dev), nbytes);
  if (in_hook || L == NULL) {
    set_marks(dev, need, peak_slack(need, p->backoff));
    return;
  }
  const size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) * KIB;
  if (heap > PEAK_HEAP_FREE && p->charged < heap / 4) {
    /* A large heap (a script keeping data in Lua tables) makes a collection
     * dear: wait until the tensors made since the last one are worth it. */
    const size_t wait = heap / 4 - p->charged;
    set_marks(dev, need, (usage){wait, wait});
    return;
  }
  const young_result young = young_collection_fits(L, dev, nbytes);
  if (young == YOUNG_FITS) return;
  const usage before = usage_now(dev);
  peak_full_collection(L, young);
  clear_debts();
  const usage after = usage_now(dev), live = usage_plus(after, nbytes);
  const usage slack = peak_slack(p->live_max, p->backoff);
  if (before.blocks - after.blocks < slack.blocks / 8 && before.requested - after.requested < slack.requested / 8) {
    if (p->useless < PEAK_USELESS_FREE + PEAK_BACKOFF_MAX) p->useless++;
  } else {
    p->useless = 0;
  }
  p->backoff = p->useless > PEAK_USELESS_FREE ? p->useless - PEAK_USELESS_FREE : 0;
  if (live.blocks > p->live_max.blocks) p->live_max.blocks = live.blocks;
  if (live.requested > p->live_max.requested) p->live_max.requested = live.requested;
  set_marks(dev, p->live_max, peak_slack(p->live_max, p->backoff));
}

/* After reset_peak: the next allocation collects and measures what is live. */
static void restart_peak_marks(lt_device dev) {
  pressures[slot_of(dev)].live_max = (usage){0, 0};
  pressures[slot_of(dev)].backoff = pressures[slot_of(dev)].useless = 0;
  lt_alloc_set_collect_marks(dev, 1, 0);
}

static void restart_all_peak_marks(void) {
  restart_peak_marks(lt_cpu());
  for (int i = 0; i < LT_MAX_DEVICES; i++) restart_peak_marks((lt_device){LT_DEVICE_CUDA, (signed char)i});
}

/* Closing the state must uninstall the hook: this sentinel's __gc runs last,
 * after the tensors' (it was marked for finalization before any of them). */
static int hook_sentinel_gc(lua_State *L) {
  if (hook_state == lua_touserdata(L, lua_upvalueindex(1))) {
    lt_alloc_set_oom_hook(NULL, NULL);
    lt_alloc_set_peak_hook(NULL, NULL);
    hook_state = NULL;
    /* The history's origins and labels are strings of this state. */
    lt_memory_history_clear();
  }
  return 0;
}

static void install_oom_hook(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  hook_state = main;
  generational = true; /* luaopen_lt_core's mode */
  lt_alloc_set_oom_hook(oom_hook, main);
  /* LT_PEAK_COLLECT=0 turns peak collections off, as
   * lt.memory._peak_collect(false) does: for the benchmarks that measure
   * what they cost and save (scripts/bench). */
  const char *peak_env = getenv("LT_PEAK_COLLECT");
  if (!(peak_env && strcmp(peak_env, "0") == 0)) lt_alloc_set_peak_hook(peak_hook, main);
  restart_all_peak_marks();
  /* lt.core opened again in this state (package.loaded cleared, as busted
   * does between files): keep the one sentinel, or the old one's __gc would
   * uninstall the hook when it is collected. */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hook_state) != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_newuserdatauv(L, 1, 0);
  lua_createtable(L, 0, 1);
  lua_pushlightuserdata(L, main);
  lua_pushcclosure(L, hook_sentinel_gc, 1);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &hook_state);
}

static void format_bytes(char *buf, size_t n, size_t bytes) {
  if (bytes >= MIB) snprintf(buf, n, "%.1f MiB", (double)bytes / (double)MIB);
  else if (bytes >= KIB) snprintf(buf, n, "%.1f KiB", (double)bytes / (double)KIB);
  else snprintf(buf, n, "%zu bytes", bytes);
}

void ltb_push_oom_details(lua_State *L) {
  enum { N = 5 };
  size_t sizes[N];
  const char *origins[N];
  lt_category cats[N];
  int n = lt_memory_largest(last_oom_device, N, sizes, origins, cats);
  if (n <= 0) {
    lua_pushliteral(L, "");
    return;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  char dev[16], line[LUA_IDSIZE + 96], size[32];
  snprintf(line, sizeof line, "\nlargest live tensors on %s:", lt_device_name(last_oom_device, dev));
  luaL_addstring(&b, line);
  for (int i = 0; i < n; i++) {
    format_bytes(size, sizeof size, sizes[i]);
    snprintf(line, sizeof line, "\n  %s (%s)%s%s", size, lt_category_name(cats[i]),
             origins[i] ? " created at " : "", origins[i] ? origins[i] : "");
    luaL_addstring(&b, line);
  }
  luaL_pushresult(&b);
}

/* ---- lt.memory.* ---- */

static lt_memory_stats get_stats(lua_State *L, int idx, const char *op) {
  lt_memory_stats s;
  lt_memory_get_stats(ltb_opt_device(L, idx, op), &s);
  return s;
}

static int memory_allocated(lua_State *L) {
  lua_pushinteger(L, get_stats(L, 1, "allocated").allocated_bytes[LT_POOL_ALL].current);
  return 1;
}

static int memory_max_allocated(lua_State *L) {
  lua_pushinteger(L, get_stats(L, 1, "max_allocated").allocated_bytes[LT_POOL_ALL].peak);
  return 1;
}

static int memory_reserved(lua_State *L) {
  lua_pushinteger(L, get_stats(L, 1, "reserved").reserved_bytes[LT_POOL_ALL].current);
  return 1;
}

static int memory_max_reserved(lua_State *L) {
  lua_pushinteger(L, get_stats(L, 1, "max_reserved").reserved_bytes[LT_POOL_ALL].peak);
  return 1;
}

static int memory_reset_peak(lua_State *L) {
  const lt_device dev = ltb_opt_device(L, 1, "reset_peak");
  lt_memory_reset_peak(dev);
  restart_peak_marks(dev);
  return 0;
}

static void set_int(lua_State *L, const char *key, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, key);
}

static void push_stat(lua_State *L, const lt_stat *s) {
  lua_createtable(L, 0, 4);
  set_int(L, "current", s->current);
  set_int(L, "peak", s->peak);
  set_int(L, "allocated", s->allocated);
  set_int(L, "freed", s->freed);
}

static void set_pools(lua_State *L, const char *key, const lt_stat pools[LT_NPOOLS]) {
  lua_createtable(L, 0, 3);
  push_stat(L, &pools[LT_POOL_ALL]);
  lua_setfield(L, -2, "all");
  push_stat(L, &pools[LT_POOL_SMALL]);
  lua_setfield(L, -2, "small_pool");
  push_stat(L, &pools[LT_POOL_LARGE]);
  lua_setfield(L, -2, "large_pool");
  lua_setfield(L, -2, key);
}

static int memory_stats(lua_State *L) {
  const lt_device dev = ltb_opt_device(L, 1, "stats");
  lt_memory_stats s;
  lt_memory_get_stats(dev, &s);
  lua_createtable(L, 0, 20);
  set_pools(L, "allocation", s.allocation);
  set_pools(L, "segment", s.segment);
  set_pools(L, "active", s.active);
  set_pools(L, "inactive_split", s.inactive_split);
  set_pools(L, "allocated_bytes", s.allocated_bytes);
  set_pools(L, "reserved_bytes", s.reserved_bytes);
  set_pools(L, "active_bytes", s.active_bytes);
  set_pools(L, "inactive_split_bytes", s.inactive_split_bytes);
  set_pools(L, "requested_bytes", s.requested_bytes);
  lua_createtable(L, 0, LT_NCATEGORIES);
  for (int c = 0; c < LT_NCATEGORIES; c++) {
    push_stat(L, &s.category_bytes[c]);
    lua_setfield(L, -2, lt_category_name((lt_category)c));
  }
  lua_setfield(L, -2, "by_category");
  lua_createtable(L, 0, LT_NCATEGORIES);
  for (int c = 0; c < LT_NCATEGORIES; c++) {
    lua_pushinteger(L, (lua_Integer)s.peak_category_bytes[c]);
    lua_setfield(L, -2, lt_category_name((lt_category)c));
  }
  lua_setfield(L, -2, "peak_by_category");
  set_int(L, "num_alloc_retries", s.num_alloc_retries);
  set_int(L, "num_ooms", s.num_ooms);
  set_int(L, "num_collections", s.num_collections);
  set_int(L, "num_peak_collections", s.num_peak_collections);
  set_int(L, "num_segment_fallbacks", s.num_segment_fallbacks);
  set_int(L, "num_device_allocs", s.num_device_allocs);
  set_int(L, "num_device_frees", s.num_device_frees);
  set_int(L, "limit", (int64_t)s.limit);
  /* The driver's view (cudaMemGetInfo; the CPU's available and physical
   * memory), so that lt's figures line up with nvidia-smi's. */
  size_t dev_free = 0, dev_total = 0;
  if (lt_device_memory_info(dev, &dev_free, &dev_total)) {
    set_int(L, "device_free_bytes", (int64_t)dev_free);
    set_int(L, "device_total_bytes", (int64_t)dev_total);
  }
  return 1;
}

static int memory_empty_cache(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_empty_cache(ltb_opt_device(L, 1, "empty_cache")));
  return 1;
}

/* Total memory of the device, for fractional limits; 0 when unknown. */
static size_t device_total_bytes(lt_device dev) {
  size_t dev_free = 0, dev_total = 0;
  lt_device_memory_info(dev, &dev_free, &dev_total);
  return dev_total;
}

/* set_limit(bytes | fraction | nil, dev). An integer, or a float above 1, is
 * a byte count; a float in (0, 1] is a fraction of the device's memory, as
 * torch.cuda.set_per_process_memory_fraction; nil or 0 removes the limit. */
static int memory_set_limit(lua_State *L) {
  const char *op = "set_limit";
  lt_device dev = ltb_opt_device(L, 2, op);
  ltb_require_device(L, dev, op); /* a limit on a device that is not there is a mistake */
  size_t bytes = 0;
  if (!lua_isnoneornil(L, 1)) {
    if (lua_type(L, 1) != LUA_TNUMBER)
      return ltb_error(L, "%s: expected a number of bytes, a fraction or nil, got %s", op,
                        luaL_typename(L, 1));
    if (lua_isinteger(L, 1)) {
      lua_Integer n = lua_tointeger(L, 1);
      if (n < 0) return ltb_error(L, "%s: the limit must not be negative, got %I", op, n);
      bytes = (size_t)n;
    } else {
      double f = lua_tonumber(L, 1);
      if (!(f >= 0.0) || f > 9.0e18)
        return ltb_error(L, "%s: invalid limit %f", op, (lua_Number)f);
      if (f > 0.0 && f <= 1.0) {
        size_t total = device_total_bytes(dev);
        char name[16];
        if (total == 0)
          return ltb_error(L, "%s: the total memory of %s is unknown: give the limit in bytes",
                            op, lt_device_name(dev, name));
        bytes = (size_t)(f * (double)total);
        if (bytes == 0) bytes = 1; /* a positive fraction is never "no limit" */
      } else {
        bytes = (size_t)f;
      }
    }
  }
  lt_set_limit(dev, bytes);
  pressures[slot_of(dev)].threshold = 0; /* recomputed against the new limit */
  lua_pushinteger(L, (lua_Integer)bytes);
  return 1;
}

static int memory_get_limit(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)lt_get_limit(ltb_opt_device(L, 1, "get_limit")));
  return 1;
}

/* ---- lt.del, lt.gc ---- */

static int memory_del(lua_State *L) {
  size_t total = 0;
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    if (lua_isnil(L, i)) continue;
    ltb_handle *h = ltb_test_handle(L, i);
    if (!h) return ltb_error(L, "del: expected tensors, got %s (argument %d)", luaL_typename(L, i), i);
    total += ltb_release_at(L, i, h);
  }
  lua_pushinteger(L, (lua_Integer)total);
  return 1;
}

static size_t allocated_everywhere(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  size_t total = (size_t)s.allocated_bytes[LT_POOL_ALL].current;
  int n = lt_cuda_device_count();
  for (int i = 0; i < n && i < LT_MAX_DEVICES; i++) {
    lt_device d = {LT_DEVICE_CUDA, (signed char)i};
    lt_memory_get_stats(d, &s);
    total += (size_t)s.allocated_bytes[LT_POOL_ALL].current;
  }
  return total;
}

/* A full collection; returns the bytes the allocator got back during it. The
 * collector is generational after it (peak collections above): a script that
 * asks for one starts from a known mode. */
static int memory_gc(lua_State *L) {
  size_t before = allocated_everywhere();
  if (generational) {
    lua_gc(L, LUA_GCCOLLECT);
  } else {
    lua_gc(L, LUA_GCGEN, 0, 0); /* a full collection */
    generational = true;
  }
  size_t after = allocated_everywhere();
  clear_debts();
  lua_pushinteger(L, (lua_Integer)(before > after ? before - after : 0));
  return 1;
}

/* lt.memory._peak_collect(on): peak collections on or off (benchmarks). */
static int memory_peak_collect(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main = lua_tothread(L, -1);
  lua_pop(L, 1);
  lt_alloc_set_peak_hook(lua_toboolean(L, 1) ? peak_hook : NULL, main);
  restart_all_peak_marks();
  return 0;
}

/* lt.memory._estimate_begin(), _estimate_end(), _estimating(),
 * _estimate_oom(dev): the engine's side of lt.memory.estimate
 * (lua/lt/memory_estimate.lua). The end puts back every gradient the
 * estimate changed, then the real allocators. */
/* The collector's pacing when the estimate began: the estimate runs from it
 * as the real step will, and the real step starts from it again. */
static pressure pressures_before_estimate[NSLOTS];

static int memory_estimate_begin(lua_State *L) {
  lt_status st = lt_alloc_estimate_begin();
  if (st != LT_OK) return ltb_raise(L, st);
  memcpy(pressures_before_estimate, pressures, sizeof pressures);
  return 0;
}

static int memory_estimate_end(lua_State *L) {
  (void)L;
  lt_grad_journal_restore();
  lt_alloc_estimate_end();
  memcpy(pressures, pressures_before_estimate, sizeof pressures);
  return 0;
}

static int memory_estimating(lua_State *L) {
  lua_pushboolean(L, lt_estimating());
  return 1;
}

static int memory_estimate_oom(lua_State *L) {
  char msg[512];
  if (!lt_alloc_estimate_oom(ltb_opt_device(L, 1, "estimate"), msg, sizeof msg)) return 0;
  lua_pushstring(L, msg);
  return 1;
}

static const luaL_Reg memory_functions[] = {
    {"_peak_collect", memory_peak_collect},
    {"_estimate_begin", memory_estimate_begin},
    {"_estimate_end", memory_estimate_end},
    {"_estimating", memory_estimating},
    {"_estimate_oom", memory_estimate_oom},
    {"allocated", memory_allocated},
    {"max_allocated", memory_max_allocated},
    {"reserved", memory_reserved},
    {"max_reserved", memory_max_reserved},
    {"reset_peak", memory_reset_peak},
    {"stats", memory_stats},
    {"empty_cache", memory_empty_cache},
    {"set_limit", memory_set_limit},
    {"get_limit", memory_get_limit},
    {NULL, NULL},
};

void ltb_open_memory(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  /* Blocks keep pointers into the origins table's strings: never replace it. */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &origins_key) == LUA_TNIL) {
    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &origins_key);
  }
  lua_pop(L, 1);
  install_oom_hook(L);
  luaL_newlib(L, memory_functions);
  ltb_open_memory_history(L, -1);
  lua_setfield(L, core_idx, "memory");
  lua_pushcfunction(L, memory_del);
  lua_setfield(L, core_idx, "del");
  lua_pushcfunction(L, memory_gc);
  lua_setfield(L, core_idx, "gc");
}
