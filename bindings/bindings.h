/* What the binding files share with each other: each area registers its
 * functions, and a few tensor helpers are used by more than one area. */
#ifndef LTB_BINDINGS_H
#define LTB_BINDINGS_H

#include <stdbool.h>

#include <lua.h>

#include "lt/lt.h"

/* Each adds its methods to the table at methods_idx and its free functions
 * (lt.zeros, lt.matmul, ...) to the table at core_idx. */
void ltb_open_tensor_create(lua_State *L, int methods_idx, int core_idx);
void ltb_open_tensor_methods(lua_State *L, int methods_idx, int core_idx);
void ltb_open_tensor_math(lua_State *L, int methods_idx, int core_idx);
void ltb_open_tensor_reduce(lua_State *L, int methods_idx, int core_idx);
/* lt.save, lt.load, lt.read_idx, lt.index_select (and t:index_select),
 * lt.randperm, lt.get_rng_state, lt.set_rng_state. */
void ltb_open_io(lua_State *L, int methods_idx, int core_idx);
/* t:sort, argsort, topk, gather, scatter, scatter_add (and their in-place
 * forms), multinomial; all but the in-place ones also as lt.sort(t, ...). */
void ltb_open_tensor_sort(lua_State *L, int methods_idx, int core_idx);
/* lt.core._cifar10_read, _csv_read, _image_* and _image_pool (bindings/data_io.c). */
void ltb_open_data_io(lua_State *L, int core_idx);
/* lt.core._optim (fused optimizer steps) and lt.memory.set_category/category
 * (the latter after ltb_open_memory). */
void ltb_open_optim(lua_State *L, int core_idx);
void ltb_open_category(lua_State *L, int core_idx);
/* lt.clock, lt.peak_rss, lt.stdout_is_tty (bindings/system.c). */
void ltb_open_system(lua_State *L, int core_idx);
/* lt.core._distributed: lt.distributed's functions (bindings/distributed.c). */
void ltb_open_distributed(lua_State *L, int core_idx);

/* t:backward, lt.no_grad, lt.enable_grad, lt.is_grad_enabled,
 * lt.set_grad_enabled and lt.core._autograd_function (lt.autograd.Function). */
void ltb_open_autograd(lua_State *L, int methods_idx, int core_idx);
/* lt.core._functional: the nn ops behind lt.nn.functional. */
void ltb_open_nn(lua_State *L, int core_idx);
/* lt.autocast, lt.is_autocast_enabled, lt.get_autocast_dtype (bindings/autocast.c). */
void ltb_open_autocast(lua_State *L, int core_idx);

/* lt.cuda.Stream, current_stream, default_stream, set_stream, stream and
 * Event into the lt.cuda table at cuda_idx, t:record_stream into the tensor
 * methods at methods_idx (bindings/cuda_stream.c). */
void ltb_open_cuda_stream(lua_State *L, int methods_idx, int cuda_idx);

/* Closures over one elementwise op (the metamethods use them too). */
void ltb_push_binary_function(lua_State *L, lt_binary_op op);
void ltb_push_unary_function(lua_State *L, lt_unary_op op);

/* select with a user's index (1-based, negative from the end) along dim. */
lt_status ltb_select(const lt_tensor *t, int dim, lua_Integer index, lt_tensor **out);
/* Pushes a fresh table of t's sizes. */
void ltb_push_shape(lua_State *L, const lt_tensor *t);
/* Sets t.requires_grad, refusing non-floating dtypes. */
void ltb_set_requires_grad(lua_State *L, lt_tensor *t, bool on, const char *op);

#endif
