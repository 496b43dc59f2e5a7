/* Memory controls seen from Lua: lt.memory.*, lt.del, lt.gc, charging tensor
 * bytes to Lua's collector and the out-of-memory hook (DESIGN Memory model). */
#ifndef LTB_MEMORY_H
#define LTB_MEMORY_H

#include <lua.h>

#include "lt/cuda.h"
#include "lt/lt.h"

/* Charges a freshly allocated storage to Lua's collector (called once per
 * new storage, when its first handle is made). */
void ltb_charge(lua_State *L, const lt_tensor *t);
/* Bytes a script gave back itself (t:free(), lt.del, a <close> variable):
 * taken off the device's debt, so that a loop that releases what it makes
 * never runs the collector for it. */
void ltb_uncharge(lt_device dev, size_t bytes);
/* core._set_forward_caller(fn): the modules' __call, which origins skip. */
int ltb_set_forward_caller(lua_State *L);

/* Pushes the text appended to an out-of-memory error: the largest live
 * tensors of the device that ran out, with their category and origin. */
void ltb_push_oom_details(lua_State *L);

/* Replaces the string on the top of the stack by an interned copy that lives
 * as long as the state, and returns it (origins and mark labels are kept by
 * pointer). Returns NULL, the string left as it was, before ltb_open_memory. */
const char *ltb_intern_top(lua_State *L);

/* Adds record, mark and snapshot (bindings/memory_history.c) to the
 * lt.memory table at memory_idx. */
void ltb_open_memory_history(lua_State *L, int memory_idx);

/* Sets core.memory, core.del and core.gc on the table at core_idx and
 * installs the allocator's out-of-memory hook for this Lua state. */
void ltb_open_memory(lua_State *L, int core_idx);

#endif
