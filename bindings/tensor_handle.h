/* The tensor handle: the Lua userdata that holds one reference to an engine
 * tensor. Modelled on Lua's own file handles (liolib.c): a pointer that one
 * idempotent release sets to NULL, after which every use is an error. */
#ifndef LTB_TENSOR_HANDLE_H
#define LTB_TENSOR_HANDLE_H

#include <lauxlib.h>
#include <lua.h>

#include "lt/lt.h"

#define LTB_TENSOR_NAME "lt.Tensor"

typedef struct ltb_handle {
  lt_tensor *tensor; /* NULL once released */
  unsigned watch;    /* the gradient drop waiting for this handle's release (grad_handle.c) */
} ltb_handle;

/* The handle at idx, or NULL if the value is not a tensor handle (freed or not). */
ltb_handle *ltb_test_handle(lua_State *L, int idx);
/* The tensor at idx; NULL if the value is not a tensor; raises "attempt to use
 * a freed tensor" for a released handle. */
lt_tensor *ltb_test_tensor(lua_State *L, int idx);
/* The tensor at idx; raises "<op>: expected a tensor, got <type>" otherwise. */
lt_tensor *ltb_check_tensor(lua_State *L, int idx, const char *op);
/* The tensor at the top of the stack, element i of a list argument of op;
 * raises "op: element i of the list is a freed tensor" (or not a tensor). */
lt_tensor *ltb_list_tensor(lua_State *L, const char *op, lua_Integer i);

/* Pushes an empty handle (tensor NULL, metatable set), for a call that fills
 * it as it goes (several results, or a tensor it must own before it raises);
 * a call with one result uses ltb_push_result instead. Created before the
 * engine call, so that a Lua memory error cannot leak a tensor. */
ltb_handle *ltb_new_handle(lua_State *L);
/* Finishes a call: raises the engine's error when st is not LT_OK, else stores
 * out (whose reference the handle now owns) in h, charges freshly allocated
 * storage to the collector and returns 1 (the handle is on the stack top). */
int ltb_finish(lua_State *L, ltb_handle *h, lt_status st, lt_tensor *out);
/* Finishes a call whose handle was not made before it: raises the engine's
 * error when st is not LT_OK, else pushes a new handle owning out, charges
 * fresh storage and returns 1. The handle is made after the engine call so
 * that a collection inside it (at a peak) does not find it on the stack:
 * in generational mode a full collection makes every survivor old, and an
 * old handle dropped at once would wait for the next full collection
 * (bindings/memory.c, young collections). A Lua memory error while making
 * the handle leaves out as the orphan, released by the next such call. */
int ltb_push_result(lua_State *L, lt_status st, lt_tensor *out);
/* For ops that may hand back their input (contiguous, to, dropout in eval):
 * when out is the tensor at self_idx, pushes that same userdata instead. */
int ltb_push_result_or_self(lua_State *L, lt_status st, lt_tensor *out, int self_idx);

/* Drops the handle's reference (idempotent); returns the bytes the allocator
 * got back (0 while a view or another reference keeps the storage). */
size_t ltb_release(ltb_handle *h);
/* Release of the handle at idx by t:free() and lt.del: also forgets the
 * handle's cached t.grad handle, which gives the gradient back at once when
 * the script did not keep that handle (grad_handle.c); returns the bytes
 * given back, the gradient's included. */
size_t ltb_release_at(lua_State *L, int idx, ltb_handle *h);

/* ---- t.grad and dropping gradients (grad_handle.c) ---- */

/* Pushes t.grad for the handle at idx (holding t): the cached handle, or a
 * new one that becomes the cached one; nil when t has no gradient. */
int ltb_push_grad(lua_State *L, int idx, lt_tensor *t);
/* t.grad = g (NULL: nil; checked by the caller) for the handle at idx; the
 * value at value_idx becomes the cached handle. */
void ltb_set_grad(lua_State *L, int idx, lt_tensor *t, lt_tensor *g, int value_idx);
/* Raises "grad: ..." unless g can be t's gradient (shape, dtype, device). */
void ltb_check_grad_matches(lua_State *L, const lt_tensor *t, const lt_tensor *g);

/* A drop of gradients: the bytes that the cached handles it forgot hold
 * alone, and its id (the handles it watches carry it). */
typedef struct ltb_grad_sweep {
  size_t bytes;
  unsigned id;
} ltb_grad_sweep;
void ltb_sweep_begin(ltb_grad_sweep *sw);
/* Pushes the cached t.grad handle of the handle at idx (nil when none) and
 * forgets it. */
void ltb_take_grad_handle(lua_State *L, int idx);
/* Pops the value ltb_take_grad_handle pushed, once the engine has dropped
 * its own reference: a handle that now holds the last reference to its
 * storage is watched by the sweep. */
void ltb_sweep_add(lua_State *L, ltb_grad_sweep *sw);
/* Collects when the watched bytes are worth it; returns the bytes the
 * watched handles that nobody kept gave back. */
size_t ltb_sweep_finish(lua_State *L, ltb_grad_sweep *sw);
/* Called by the handle's finalizer with the bytes its release gave back. */
void ltb_sweep_note(const ltb_handle *h, size_t bytes);
/* Sets core._zero_grads and core._grad. */
void ltb_open_grad_handle(lua_State *L, int core_idx);

/* core._set_data(t, src): t's handle takes src's tensor (PyTorch's t.data = src). */
int ltb_set_data(lua_State *L);

/* Builds the tensor metatable; expects the methods table at methods_idx. */
void ltb_open_tensor_handle(lua_State *L, int methods_idx);

/* core._set_slicing(get, set): the Lua side of t[{...}] (tensor_handle.c). */
void ltb_open_slicing(lua_State *L, int core_idx);

#endif
