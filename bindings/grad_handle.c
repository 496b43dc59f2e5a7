/* t.grad seen from Lua, and dropping gradients (t.grad = nil, zero_grad,
 * lt.del(t), t:free()).
 *
 * The handle of t.grad is cached in the user value of t's handle, so that
 * t.grad == t.grad. Like every handle it holds a reference to its tensor: a
 * script that kept it (`local g = p.grad`) keeps the gradient's memory and
 * can go on using it, as `g = p.grad; p.grad = None` does in PyTorch. But a
 * read that nobody kept (`p.grad:mul_(2)`, a print) would then hold the
 * gradient after zero_grad until the collector found the handle, and the
 * next backward would stack a second set of gradients on the first.
 *
 * Only a collection can tell whether a handle is still reachable, so a drop
 * forgets the cached handle and, when that handle now holds the last
 * reference to its storage, runs one full collection for the whole drop
 * (one for all the parameters of a zero_grad): a handle nobody kept is
 * finalized then and its bytes go back at once; a kept one stays valid. A
 * collection costs time in proportion to the Lua heap, so it runs only when
 * the bytes at stake are not small next to the heap; otherwise the
 * collector's own pacing (bindings/memory.c) reclaims them later. Library
 * code never leaves a cached handle behind (it reads gradients with
 * core._grad, frees those handles at their last use, and the optimizers
 * read them in C), so a training loop that does not read p.grad itself
 * never pays for a collection here. */
#include "args.h"
#include "bindings.h"
#include "tensor_handle.h"

/* A drop collects when bytes * SWEEP_HEAP_RATIO >= the Lua heap: a full
 * collection takes about 0.6 ms per MiB of heap, so at most a few
 * microseconds per KiB of gradient given back. */
#define SWEEP_HEAP_RATIO 16

/* The sweep whose collection is running (0: none) and what the handles it
 * watches gave back so far (their finalizer reports it). */
static unsigned sweep_running;
static size_t sweep_given;
static unsigned sweep_last_id;

void ltb_sweep_begin(ltb_grad_sweep *sw) {
  sw->bytes = 0;
  if (++sweep_last_id == 0) sweep_last_id = 1;
  sw->id = sweep_last_id;
}

void ltb_sweep_note(const ltb_handle *h, size_t bytes) {
  if (sweep_running != 0 && h->watch == sweep_running) sweep_given += bytes;
}

void ltb_take_grad_handle(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getiuservalue(L, idx, 1);
  lua_pushnil(L);
  lua_setiuservalue(L, idx, 1);
}

void ltb_sweep_add(lua_State *L, ltb_grad_sweep *sw) {
  ltb_handle *h = ltb_test_handle(L, -1);
  const lt_tensor *t = h ? h->tensor : NULL;
  if (t && t->refcount == 1 && t->storage->refcount == 1) {
    const lt_storage *s = t->storage;
    sw->bytes += s->block ? lt_block_size(s->block) : s->nbytes;
    h->watch = sw->id;
  }
  lua_pop(L, 1);
}

size_t ltb_sweep_finish(lua_State *L, ltb_grad_sweep *sw) {
  if (sw->bytes == 0) return 0;
  size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
  if (sw->bytes < heap / SWEEP_HEAP_RATIO) return 0;
  /* A finalizer run by this collection may drop gradients in turn. */
  const unsigned outer_running = sweep_running;
  const size_t outer_given = sweep_given;
  sweep_running = sw->id;
  sweep_given = 0;
  lua_gc(L, LUA_GCCOLLECT);
  const size_t given = sweep_given;
  sweep_running = outer_running;
  sweep_given = outer_given;
  return given;
}

int ltb_push_grad(lua_State *L, int idx, lt_tensor *t) {
  lt_tensor *g = t->grad;
  if (g == NULL) {
    lua_pushnil(L);
    return 1;
  }
  idx = lua_absindex(L, idx);
  lua_getiuservalue(L, idx, 1);
  ltb_handle *cached = ltb_test_handle(L, -1);
  if (cached && cached->tensor == g) return 1;
  lua_pop(L, 1);
  ltb_handle *h = ltb_new_handle(L);
  lt_tensor_retain(g);
  h->tensor = g;
  lua_pushvalue(L, -1);
  lua_setiuservalue(L, idx, 1);
  return 1;
}

/* t.grad = g: g checked against t by the caller (NULL for nil); g's handle
 * (or nil) is at value_idx and becomes the cached one. */
void ltb_set_grad(lua_State *L, int idx, lt_tensor *t, lt_tensor *g, int value_idx) {
  idx = lua_absindex(L, idx);
  value_idx = lua_absindex(L, value_idx);
  lt_status noted = lt_grad_journal_note(t);
  if (noted != LT_OK) ltb_raise(L, noted);
  ltb_grad_sweep sw;
  ltb_sweep_begin(&sw);
  ltb_take_grad_handle(L, idx);
  if (g) lt_tensor_retain(g);
  lt_tensor *old = t->grad;
  t->grad = g;
  if (old) lt_tensor_release(old);
  lua_pushvalue(L, value_idx);
  lua_setiuservalue(L, idx, 1);
  ltb_sweep_add(L, &sw);
  ltb_sweep_finish(L, &sw);
}

/* core._zero_grads(params, set_to_none): every parameter's gradient dropped
 * (one collection for all, see above) or zero-filled in place, without a
 * handle for any of them. Parameters without a gradient are skipped. */
static int zero_grads(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const bool set_to_none = lua_toboolean(L, 2);
  const lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) { /* all checked before any is changed */
    lua_rawgeti(L, 1, i);
    ltb_list_tensor(L, "zero_grad", i);
    lua_pop(L, 1);
  }
  ltb_grad_sweep sw;
  ltb_sweep_begin(&sw);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lt_tensor *p = ((ltb_handle *)lua_touserdata(L, -1))->tensor;
    if (p->grad != NULL) {
      if (set_to_none) {
        lt_status noted = lt_grad_journal_note(p);
        if (noted != LT_OK) {
          ltb_sweep_finish(L, &sw);
          return ltb_raise(L, noted);
        }
        ltb_take_grad_handle(L, -1);
        lt_tensor *old = p->grad;
        p->grad = NULL;
        lt_tensor_release(old);
        ltb_sweep_add(L, &sw);
      } else {
        lt_status st = lt_fill_(p->grad, 0.0);
        if (st != LT_OK) {
          ltb_sweep_finish(L, &sw);
          return ltb_raise(L, st);
        }
      }
    }
    lua_pop(L, 1);
  }
  ltb_sweep_finish(L, &sw);
  return 0;
}

/* core._grad(t): a new handle on t.grad (nil when none), not cached in t:
 * for library code that frees it at its last use, so that no handle of its
 * making holds a gradient past zero_grad. */
static int grad_uncached(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "_grad");
  if (t->grad == NULL) {
    lua_pushnil(L);
    return 1;
  }
  ltb_handle *h = ltb_new_handle(L);
  lt_tensor_retain(t->grad);
  h->tensor = t->grad;
  return 1;
}

/* core._set_grad(t, g | nil): t.grad = g without caching a handle for it:
 * for library code that puts back a gradient it took with core._grad and
 * frees its own handle (lt.microbatch undoing a failed attempt). */
static int set_grad_uncached(lua_State *L) {
  lt_tensor *t = ltb_check_tensor(L, 1, "_set_grad");
  lt_tensor *g = lua_isnil(L, 2) ? NULL : ltb_check_tensor(L, 2, "_set_grad");
  if (g) ltb_check_grad_matches(L, t, g);
  lt_status noted = lt_grad_journal_note(t);
  if (noted != LT_OK) ltb_raise(L, noted);
  ltb_grad_sweep sw;
  ltb_sweep_begin(&sw);
  ltb_take_grad_handle(L, 1);
  if (g) lt_tensor_retain(g);
  lt_tensor *old = t->grad;
  t->grad = g;
  if (old) lt_tensor_release(old);
  ltb_sweep_add(L, &sw);
  ltb_sweep_finish(L, &sw);
  return 0;
}

void ltb_open_grad_handle(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  lua_pushcfunction(L, zero_grads);
  lua_setfield(L, core_idx, "_zero_grads");
  lua_pushcfunction(L, grad_uncached);
  lua_setfield(L, core_idx, "_grad");
  lua_pushcfunction(L, set_grad_uncached);
  lua_setfield(L, core_idx, "_set_grad");
}
