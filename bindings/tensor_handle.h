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
} ltb_handle;

/* Pushes the tensor metatable (cached in the registry under a private key). */
void ltb_push_tensor_metatable(lua_State *L);

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

/* Pushes an empty handle (tensor NULL, metatable set). Create it before the
 * engine call that fills it so that a Lua memory error cannot leak a tensor. */
ltb_handle *ltb_new_handle(lua_State *L);
/* Finishes a call: raises the engine's error when st is not LT_OK, else stores
 * out (whose reference the handle now owns) in h, charges freshly allocated
 * storage to the collector and returns 1 (the handle is on the stack top). */
int ltb_finish(lua_State *L, ltb_handle *h, lt_status st, lt_tensor *out);
/* Like ltb_finish for ops that may hand back their input (contiguous, to):
 * when out is the tensor at self_idx, pushes that same userdata instead. */
int ltb_finish_or_self(lua_State *L, ltb_handle *h, lt_status st, lt_tensor *out, int self_idx);

/* Drops the handle's reference (idempotent); returns the bytes the allocator
 * got back (0 while a view or another reference keeps the storage). */
size_t ltb_release(ltb_handle *h);
/* Release of the handle at idx by t:free() and lt.del: also drops the handle's
 * cached t.grad handle, so that a gradient nobody else holds is collectable. */
size_t ltb_release_at(lua_State *L, int idx, ltb_handle *h);

/* core._set_data(t, src): t's handle takes src's tensor (PyTorch's t.data = src). */
int ltb_set_data(lua_State *L);

/* Builds the tensor metatable; expects the methods table at methods_idx. */
void ltb_open_tensor_handle(lua_State *L, int methods_idx);

#endif
