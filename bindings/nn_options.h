/* Options tables of the functional nn ops (F.conv2d(x, w, b, {stride=2}),
 * ...): unknown keys refused, each value checked and converted, every message
 * naming the op and the option. */
#ifndef LTB_NN_OPTIONS_H
#define LTB_NN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <lua.h>

#include "lt/nn.h"

/* The options table at idx (none or nil: an empty one) holds only the keys
 * of `known` (NULL-terminated). Returns idx made absolute, or 0 for none. */
int ltb_nn_options(lua_State *L, int idx, const char *op, const char *const *known);

/* Each reader leaves *out unchanged when the option is absent (opts 0 or
 * key nil) and returns whether it was given. */
bool ltb_nn_opt_bool(lua_State *L, int opts, const char *op, const char *key, bool *out);
bool ltb_nn_opt_number(lua_State *L, int opts, const char *op, const char *key, double *out);
bool ltb_nn_opt_integer(lua_State *L, int opts, const char *op, const char *key, int64_t *out);
/* One integer for both sides or a pair {h, w}: the Lua types only; the
 * engine checks the values (lt_conv2d_check_opts, lt_pool2d_check_opts). */
bool ltb_nn_opt_pair(lua_State *L, int opts, const char *op, const char *key, int64_t out[2]);
/* "mean" (default), "sum" or "none". */
bool ltb_nn_opt_reduction(lua_State *L, int opts, const char *op, lt_reduction *out);
/* A tensor or nil. */
bool ltb_nn_opt_tensor(lua_State *L, int opts, const char *op, const char *key,
                       lt_tensor **out);

/* A size argument (kernel size) at arg: an integer or a pair {h, w}. */
void ltb_nn_check_pair(lua_State *L, int arg, const char *op, const char *what, int64_t out[2]);

#endif
