/* The C half of lt.autograd.Function (lua/lt/autograd.lua builds the class
 * on it): core._autograd_function(name, outputs, inputs, saved, runner) ties
 * the outputs of a forward to its tensor inputs with one custom node whose
 * backward calls runner, a Lua closure over the class and its ctx.
 *
 * The node's user data holds the saved tensors as aliases (same storage, no
 * autograd metadata: saving an output makes no reference cycle) with their
 * storage versions, and a registry reference to runner. Nodes are freed where
 * no Lua state is at hand (inside lt_backward, in a tensor's __gc), so the
 * saved tensors are released at once but the reference is queued and dropped
 * by the next call that has the state. */
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "autograd.h"
#include "tensor_handle.h"

typedef struct saved_tensor {
  lt_tensor *alias;
  uint64_t version;
} saved_tensor;

typedef struct fn_state {
  lua_State *main; /* the state's main thread: says whose registry runner_ref is in */
  int runner_ref;
  char *name; /* the class name, for messages */
  int nsaved;
  saved_tensor saved[];
} fn_state;

/* The thread of the innermost t:backward, where Lua backward functions run. */
static _Thread_local lua_State *backward_thread;

/* ---- registry references waiting for their state ---- */

typedef struct stale_ref {
  lua_State *main;
  int ref;
} stale_ref;

static stale_ref *stale;
static int nstale, stale_cap;

static void queue_unref(lua_State *main, int ref) {
  if (nstale == stale_cap) {
    int cap = stale_cap ? 2 * stale_cap : 16;
    stale_ref *grown = realloc(stale, (size_t)cap * sizeof *grown);
    if (!grown) return; /* out of host memory: the closure stays referenced */
    stale = grown;
    stale_cap = cap;
  }
  stale[nstale++] = (stale_ref){main, ref};
}

static lua_State *main_thread(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *m = lua_tothread(L, -1);
  lua_pop(L, 1);
  return m;
}

/* Drops (unref = true) or forgets the queued references of L's state. */
static void settle_stale_refs(lua_State *L, lua_State *main, bool unref) {
  int kept = 0;
  for (int i = 0; i < nstale; i++) {
    if (stale[i].main != main)
      stale[kept++] = stale[i];
    else if (unref)
      luaL_unref(L, LUA_REGISTRYINDEX, stale[i].ref);
  }
  nstale = kept;
}

static void drop_stale_refs(lua_State *L) { settle_stale_refs(L, main_thread(L), true); }

/* A closing state's entries must go: a later state could get its address. */
static int forget_closing_state(lua_State *L) {
  lua_State **main = lua_touserdata(L, 1);
  settle_stale_refs(L, *main, false);
  return 0;
}

/* ---- the node's user data ---- */

static void free_state(void *ud) {
  fn_state *s = ud;
  for (int k = 0; k < s->nsaved; k++)
    lt_autograd_release_saved(s->saved[k].alias);
  if (s->runner_ref != LUA_NOREF) queue_unref(s->main, s->runner_ref);
  free(s->name);
  free(s);
}

/* ---- backward: runner(saved, grad_1, ..., grad_nout) -> grad of each input ---- */

/* A handle on t for the duration of one backward call. */
static void push_temporary(lua_State *L, lt_tensor *t, int temps_idx) {
  ltb_handle *h = ltb_new_handle(L);
  lt_tensor_retain(t);
  h->tensor = t;
  lua_pushvalue(L, -1);
  lua_rawseti(L, temps_idx, (lua_Integer)luaL_len(L, temps_idx) + 1);
}

/* Runs protected: (state, grad_outputs, nout, grad_inputs, nin). */
static int call_runner(lua_State *L) {
  fn_state *s = lua_touserdata(L, 1);
  lt_tensor *const *grad_outputs = lua_touserdata(L, 2);
  const int nout = (int)lua_tointeger(L, 3);
  lt_tensor **grad_inputs = lua_touserdata(L, 4);
  const int nin = (int)lua_tointeger(L, 5);
  luaL_checkstack(L, nout + nin + 8, "backward of a Lua function");
  lua_newtable(L); /* 6: handles to release after the call */
  const int temps = 6;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->runner_ref);
  lua_createtable(L, s->nsaved, 0);
  for (int k = 0; k < s->nsaved; k++) {
    push_temporary(L, s->saved[k].alias, temps);
    lua_rawseti(L, -2, k + 1);
  }
  for (int o = 0; o < nout; o++) push_temporary(L, grad_outputs[o], temps);
  lua_call(L, 1 + nout, nin);
  const int first = lua_gettop(L) - nin + 1;
  for (int i = 0; i < nin; i++) {
    const int idx = first + i;
    if (lua_isnil(L, idx)) continue;
    lt_tensor *g = ltb_test_tensor(L, idx);
    if (!g)
      return ltb_error(L, "expected a tensor or nil as the gradient of input %d, got %s", i + 1,
                        luaL_typename(L, idx));
    lt_tensor_retain(g);
    grad_inputs[i] = g;
  }
  /* Saved tensors and incoming gradients are not kept past the call: their
   * memory goes back as soon as the engine lets go of it. */
  const lua_Integer ntemps = luaL_len(L, temps);
  for (lua_Integer k = 1; k <= ntemps; k++) {
    lua_rawgeti(L, temps, k);
    ltb_release(lua_touserdata(L, -1));
    lua_pop(L, 1);
  }
  return 0;
}

static lt_status run_lua_backward(void *ud, lt_tensor *const *grad_outputs, int nout,
                                  lt_tensor **grad_inputs, int nin) {
  fn_state *s = ud;
  for (int k = 0; k < s->nsaved; k++) {
    const saved_tensor *sv = &s->saved[k];
    if (sv->alias->storage->version == sv->version) continue;
    const char *by = sv->alias->storage->last_inplace_op;
    return lt_error(LT_ERR_AUTOGRAD,
                    "backward: a tensor saved by %sBackward (save_for_backward) was modified by "
                    "an in-place operation (%s): version %llu, expected %llu",
                    s->name, by ? by : "an in-place op",
                    (unsigned long long)sv->alias->storage->version,
                    (unsigned long long)sv->version);
  }
  lua_State *L = backward_thread ? backward_thread : s->main;
  if (!lua_checkstack(L, 8))
    return lt_error(LT_ERR_OOM, "backward: no Lua stack left for %s.backward", s->name);
  const int top = lua_gettop(L);
  lua_pushcfunction(L, call_runner);
  lua_pushlightuserdata(L, s);
  lua_pushlightuserdata(L, (void *)grad_outputs);
  lua_pushinteger(L, nout);
  lua_pushlightuserdata(L, grad_inputs);
  lua_pushinteger(L, nin);
  const int status = lua_pcall(L, 5, 0, 0);
  lt_status st = LT_OK;
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    st = lt_error(LT_ERR_AUTOGRAD, "%s.backward: %s", s->name,
                  msg ? msg : "(the error object is not a string)");
    for (int i = 0; i < nin; i++)
      if (grad_inputs[i]) lt_tensor_release(grad_inputs[i]), grad_inputs[i] = NULL;
  }
  lua_settop(L, top);
  return st;
}

lua_State *ltb_backward_thread(void) { return backward_thread; }

lt_status ltb_run_backward(lua_State *L, lt_tensor *root, const lt_tensor *grad, bool retain) {
  lua_State *outer = backward_thread;
  backward_thread = L;
  lt_status st = lt_backward(root, grad, retain);
  backward_thread = outer;
  drop_stale_refs(L);
  return st;
}

/* ---- core._autograd_function(name, outputs, inputs, saved, runner) ---- */

/* The tensors of the list at idx into ts (n of them). */
static void read_tensor_list(lua_State *L, int idx, lt_tensor **ts, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, idx, i + 1);
    ltb_handle *h = ltb_test_handle(L, -1);
    if (!h)
      ltb_error(L, "autograd.Function: %s %d is not a tensor (%s)", what, i + 1,
                 luaL_typename(L, -1));
    if (!h->tensor) ltb_error(L, "autograd.Function: attempt to use a freed tensor (%s %d)", what, i + 1);
    ts[i] = h->tensor;
    lua_pop(L, 1);
  }
}

static int autograd_function(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TFUNCTION);
  lua_settop(L, 5);
  drop_stale_refs(L);
  const int nout = (int)luaL_len(L, 2), nin = (int)luaL_len(L, 3), nsaved = (int)luaL_len(L, 4);
  /* Scratch arrays in a userdata: a Lua error cannot leak them. */
  lt_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(nout + nin + nsaved + 1), 0);
  lt_tensor **outs = ts, **ins = ts + nout, **saved = ts + nout + nin;
  read_tensor_list(L, 2, outs, nout, "output");
  read_tensor_list(L, 3, ins, nin, "input");
  read_tensor_list(L, 4, saved, nsaved, "saved tensor");
  const char *node_name = lua_pushfstring(L, "%sBackward", name);

  fn_state *s = calloc(1, sizeof *s + (size_t)nsaved * sizeof(saved_tensor));
  char *name_copy = malloc(strlen(name) + 1);
  if (!s || !name_copy) {
    free(s);
    free(name_copy);
    return ltb_error(L, "autograd.Function: out of host memory");
  }
  strcpy(name_copy, name);
  s->name = name_copy;
  s->main = main_thread(L);
  s->runner_ref = LUA_NOREF;
  lt_status st = LT_OK;
  for (int k = 0; k < nsaved && st == LT_OK; k++) {
    /* Kept for backward: memory statistics count it as an activation. */
    st = lt_autograd_save(saved[k], &s->saved[k].alias);
    if (st != LT_OK) break;
    s->nsaved = k + 1;
    s->saved[k].version = saved[k]->storage->version;
  }
  if (st != LT_OK) {
    free_state(s);
    return ltb_raise(L, st);
  }
  lua_pushvalue(L, 5);
  s->runner_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  /* The engine owns s from here: it frees it at once when nothing is
   * recorded, else with the node. */
  st = lt_autograd_custom(outs, nout, ins, nin, node_name, run_lua_backward, s, free_state);
  drop_stale_refs(L);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

void ltb_open_autograd_function(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  lua_pushcfunction(L, autograd_function);
  lua_setfield(L, core_idx, "_autograd_function");
  /* A sentinel whose finalizer runs when the state closes. */
  static const char sentinel_key = 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &sentinel_key) == LUA_TNIL) {
    lua_State **main = lua_newuserdatauv(L, sizeof *main, 0);
    *main = main_thread(L);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, forget_closing_state);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &sentinel_key);
  }
  lua_pop(L, 1);
}
