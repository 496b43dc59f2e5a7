/* Argument translation between Lua calls (1-based, loosely typed, options
 * tables) and the engine's 0-based C API, and the one way engine errors become
 * Lua errors. Every message names the op and the values as the user wrote them. */
#ifndef LTB_ARGS_H
#define LTB_ARGS_H

#include <stdbool.h>

#include <lauxlib.h>
#include <lua.h>

#include "lt/cuda.h"
#include "lt/lt.h"

/* Raises the engine's last error as a Lua error (never returns). An out of
 * memory error gets the largest live tensors appended. */
int ltb_raise(lua_State *L, lt_status st);
/* luaL_error's formats and result, positioned as ltb_raise positions engine
 * errors: at the innermost caller outside lt's Lua library, so that a bad
 * argument passed on by F.relu or a module is reported at the script's line.
 * Every binding raises its own errors through it. */
int ltb_error(lua_State *L, const char *fmt, ...);
/* core._set_error_where(fn): lt.user_where's where(), which places every
 * error raised by the bindings (ltb_error, ltb_raise) at the user's line. */
int ltb_set_error_where(lua_State *L);
/* A setter's body: its argument 1, a function, kept in the registry at key
 * (the hooks that Lua code hands to the bindings). */
int ltb_store_function(lua_State *L, const char *key);

/* An integer argument; floats with an integral value are accepted. */
lua_Integer ltb_check_integer(lua_State *L, int arg, const char *op, const char *what);
lua_Integer ltb_opt_integer(lua_State *L, int arg, const char *op, const char *what,
                            lua_Integer def);
/* A number argument (integer or float). */
double ltb_check_number(lua_State *L, int arg, const char *op, const char *what);

/* A user's dimension (1-based, -1 the last) as the engine's 0-based one,
 * checked against ndim (a 0-dim tensor accepts 1 and -1, as PyTorch). */
int ltb_wrap_dim(lua_State *L, lua_Integer dim, int ndim, const char *op);
int ltb_check_dim(lua_State *L, int arg, int ndim, const char *op);

/* Sizes given as integers from arg `first` on, or as one table there. With
 * allow_infer, -1 is accepted (view, reshape, expand). Returns the index of
 * the first argument after the sizes (where an options table may follow). */
int ltb_check_sizes(lua_State *L, int first, const char *op, bool allow_infer, int64_t *shape,
                    int *ndim);

/* Dims given as integers from arg `first` on, or as one table (permute, sum). */
int ltb_check_dims(lua_State *L, int first, int ndim, const char *op, int *dims, int *count);

/* Options tables: {dtype=, device=, requires_grad=, copy=}. */
enum {
  LTB_OPT_DTYPE = 1,
  LTB_OPT_DEVICE = 2,
  LTB_OPT_REQUIRES_GRAD = 4,
  LTB_OPT_COPY = 8,
  LTB_OPT_NON_BLOCKING = 16
};
typedef struct ltb_options {
  bool has_dtype, has_device;
  lt_dtype dtype;
  lt_device device;
  bool requires_grad;
  bool copy;
  bool non_blocking;
} ltb_options;
/* Reads the options table at idx (none or nil: defaults); rejects unknown keys
 * and keys outside `allowed`. */
void ltb_read_options(lua_State *L, int idx, const char *op, unsigned allowed, ltb_options *o);

lt_dtype ltb_check_dtype(lua_State *L, int idx, const char *op);
/* Parses a device name and checks that the device exists (a clear error when
 * CUDA is absent). */
lt_device ltb_check_device(lua_State *L, int idx, const char *op);
/* A file path argument: a string without an embedded NUL. */
const char *ltb_check_path(lua_State *L, int idx, const char *op);
lt_device ltb_parse_device(lua_State *L, const char *name, const char *op);
/* Device argument of lt.memory.* and friends: nil or none means
 * lt.default_device (set by `lt --device`), else "cpu". */
lt_device ltb_opt_device(lua_State *L, int idx, const char *op);
void ltb_require_device(lua_State *L, lt_device dev, const char *op);

void ltb_push_dtype(lua_State *L, lt_dtype dt);
void ltb_push_device(lua_State *L, lt_device dev);

/* Registers the metatable of a scope guard (lt.no_grad(), lt.autocast{}):
 * __close and a close method restore the previous state, __tostring names it. */
void ltb_register_guard(lua_State *L, const char *name, lua_CFunction close,
                        lua_CFunction tostring);

/* Raises "<op>: only floating point tensors can require gradients, got int64". */
void ltb_check_grad_dtype(lua_State *L, lt_dtype dt, const char *op);

/* Did you mean (bindings/closest.c): the string key of the tables at t1 and
 * t2 (0: none) closest to name, or NULL when none is close; valid while the
 * tables hold it. ltb_open_closest adds lt.core._closest(name, names). */
size_t ltb_edit_distance(const char *a, const char *b);
const char *ltb_closest_key(lua_State *L, int t1, int t2, const char *name);
/* The closest of the first n of names (a NULL ends them sooner), or NULL. */
const char *ltb_closest_name(const char *name, const char *const *names, int n);
/* Raises "op: unknown option 'key' (did you mean 'x'?)", or, when no name is
 * close, "(expected one of a, b, c)": the one wording of an unknown option. */
void ltb_unknown_option(lua_State *L, const char *op, const char *key, const char *const *names, int n);
void ltb_open_closest(lua_State *L, int core_idx);

#endif
