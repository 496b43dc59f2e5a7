/* The nn ops of lt/nn.h for Lua: lt.core._functional, which
 * lua/lt/nn/functional.lua exposes as lt.nn.functional. Dims, class labels,
 * embedding indices and pooling indices are 1-based here; options come as a
 * table. Parsing is done in C so that a training step pays no Lua-side
 * wrapper per op. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "nn_options.h"
#include "tensor_handle.h"

/* The Lua users' base for labels and indices. */
#define LUA_INDEX_BASE 1

/* A tensor or nil at arg (bias, weight, running statistics). */
static lt_tensor *opt_tensor(lua_State *L, int arg, const char *op, const char *what) {
  if (lua_isnoneornil(L, arg)) return NULL;
  lt_tensor *t = ltb_test_tensor(L, arg);
  if (!t) ltb_error(L, "%s: expected a tensor or nil for %s, got %s", op, what,
                     luaL_typename(L, arg));
  return t;
}

/* ---- layers ---- */

static int f_linear(lua_State *L) {
  lt_tensor *x = ltb_check_tensor(L, 1, "linear"), *w = ltb_check_tensor(L, 2, "linear");
  lt_tensor *b = opt_tensor(L, 3, "linear", "the bias"), *out = NULL;
  lt_status st = lt_linear(x, w, b, &out);
  return ltb_push_result(L, st, out);
}

static const char *const conv2d_keys[] = {"stride", "padding", "dilation", "groups", NULL};

static lt_conv2d_opts read_conv2d_opts(lua_State *L, int idx, const char *op) {
  const int opts = ltb_nn_options(L, idx, op, conv2d_keys);
  lt_conv2d_opts o = lt_conv2d_default_opts();
  ltb_nn_opt_pair(L, opts, op, "stride", o.stride);
  ltb_nn_opt_pair(L, opts, op, "padding", o.padding);
  ltb_nn_opt_pair(L, opts, op, "dilation", o.dilation);
  ltb_nn_opt_integer(L, opts, op, "groups", &o.groups);
  return o;
}

static int f_conv2d(lua_State *L) {
  const char *op = "conv2d";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *w = ltb_check_tensor(L, 2, op);
  lt_tensor *b = opt_tensor(L, 3, op, "the bias"), *out = NULL;
  lt_conv2d_opts o = read_conv2d_opts(L, 4, op);
  lt_status st = lt_conv2d(x, w, b, &o, &out);
  return ltb_push_result(L, st, out);
}

/* check_conv2d(name, opts): the engine's checks of conv2d's options, for
 * nn.Conv2d when it is made, in the engine's words under the module's name. */
static int f_check_conv2d(lua_State *L) {
  const char *op = luaL_checkstring(L, 1);
  lt_conv2d_opts o = read_conv2d_opts(L, 2, op);
  lt_status st = lt_conv2d_check_opts(op, &o);
  return st == LT_OK ? 0 : ltb_raise(L, st);
}

/* ---- pooling ---- */

static const char *const max_pool_keys[] = {"stride", "padding", "dilation", "ceil_mode",
                                            "return_indices", NULL};
static const char *const avg_pool_keys[] = {"stride", "padding", "ceil_mode", "count_include_pad",
                                            "divisor_override", NULL};

/* Kernel size at arg karg, the options at karg + 1. */
static lt_pool2d_opts read_pool_opts(lua_State *L, const char *op, bool is_max, int karg, int *opts) {
  int64_t k[2];
  ltb_nn_check_pair(L, karg, op, "kernel_size", k);
  lt_pool2d_opts o = lt_pool2d_default_opts(k[0], k[1]);
  *opts = ltb_nn_options(L, karg + 1, op, is_max ? max_pool_keys : avg_pool_keys);
  ltb_nn_opt_pair(L, *opts, op, "stride", o.stride);
  ltb_nn_opt_pair(L, *opts, op, "padding", o.padding);
  ltb_nn_opt_bool(L, *opts, op, "ceil_mode", &o.ceil_mode);
  if (is_max) {
    ltb_nn_opt_pair(L, *opts, op, "dilation", o.dilation);
  } else {
    ltb_nn_opt_bool(L, *opts, op, "count_include_pad", &o.count_include_pad);
    int64_t divisor = 0;
    if (ltb_nn_opt_integer(L, *opts, op, "divisor_override", &divisor) && divisor < 1)
      ltb_error(L, "%s: divisor_override must be positive, got %I", op, (lua_Integer)divisor);
    o.divisor_override = divisor;
  }
  return o;
}

/* F.max_pool2d(x, k, opts): with return_indices, also the argmax of each
 * window as a 1-based position within its input plane. */
/* check_pool2d(name, is_max, kernel_size, opts): the engine's checks of the
 * pooling options, for nn.MaxPool2d / nn.AvgPool2d when they are made. */
static int f_check_pool2d(lua_State *L) {
  const char *op = luaL_checkstring(L, 1);
  const bool is_max = lua_toboolean(L, 2);
  int opts;
  lt_pool2d_opts o = read_pool_opts(L, op, is_max, 3, &opts);
  lt_status st = lt_pool2d_check_opts(op, &o, is_max);
  return st == LT_OK ? 0 : ltb_raise(L, st);
}

static int f_max_pool2d(lua_State *L) {
  const char *op = "max_pool2d";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL, *indices = NULL, *one_based = NULL;
  int opts;
  lt_pool2d_opts o = read_pool_opts(L, op, true, 2, &opts);
  bool return_indices = false;
  ltb_nn_opt_bool(L, opts, op, "return_indices", &return_indices);
  ltb_handle *h = ltb_new_handle(L);
  ltb_handle *hi = return_indices ? ltb_new_handle(L) : NULL;
  lt_status st = lt_max_pool2d(x, &o, &out, &indices);
  if (st == LT_OK && return_indices)
    st = lt_binary_scalar(LT_OP_ADD, indices, 1.0, true, false, &one_based);
  if (indices) lt_tensor_release(indices);
  if (st != LT_OK && out) lt_tensor_release(out), out = NULL;
  ltb_finish(L, h, st, out); /* raises on failure */
  if (!return_indices) return 1;
  ltb_finish(L, hi, LT_OK, one_based);
  return 2;
}

static int f_avg_pool2d(lua_State *L) {
  const char *op = "avg_pool2d";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL;
  int opts;
  lt_pool2d_opts o = read_pool_opts(L, op, false, 2, &opts);
  lt_status st = lt_avg_pool2d(x, &o, &out);
  return ltb_push_result(L, st, out);
}

/* ---- normalisation ---- */

static const char *const batch_norm_keys[] = {"training", "momentum", "eps", NULL};

/* F.batch_norm(x, running_mean, running_var, weight, bias, {training=false,
 * momentum=0.1, eps=1e-5}) */
static int f_batch_norm(lua_State *L) {
  const char *op = "batch_norm";
  lt_tensor *x = ltb_check_tensor(L, 1, op);
  lt_tensor *rm = opt_tensor(L, 2, op, "running_mean"), *rv = opt_tensor(L, 3, op, "running_var");
  lt_tensor *w = opt_tensor(L, 4, op, "the weight"), *b = opt_tensor(L, 5, op, "the bias");
  const int opts = ltb_nn_options(L, 6, op, batch_norm_keys);
  bool training = false;
  double momentum = 0.1, eps = 1e-5;
  ltb_nn_opt_bool(L, opts, op, "training", &training);
  ltb_nn_opt_number(L, opts, op, "momentum", &momentum);
  ltb_nn_opt_number(L, opts, op, "eps", &eps);
  lt_tensor *out = NULL;
  lt_status st = lt_batch_norm(x, rm, rv, w, b, training, momentum, eps, &out, NULL, NULL);
  return ltb_push_result(L, st, out);
}

static const char *const layer_norm_keys[] = {"eps", NULL};

/* F.layer_norm(x, normalized_shape, weight, bias, {eps=1e-5}) */
static int f_layer_norm(lua_State *L) {
  const char *op = "layer_norm";
  lt_tensor *x = ltb_check_tensor(L, 1, op);
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    shape[0] = ltb_check_integer(L, 2, op, "normalized_shape");
    ndim = 1;
  } else if (lua_istable(L, 2)) {
    const lua_Integer n = luaL_len(L, 2);
    if (n < 1 || n > LT_MAX_DIMS)
      return ltb_error(L, "%s: normalized_shape must have 1 to %d sizes, got %I", op,
                        LT_MAX_DIMS, n);
    for (int d = 0; d < (int)n; d++) {
      lua_rawgeti(L, 2, d + 1);
      shape[ndim++] = ltb_check_integer(L, -1, op, "normalized_shape");
      lua_pop(L, 1);
    }
  } else {
    return ltb_error(L, "%s: normalized_shape must be an integer or a table of sizes, got %s",
                      op, luaL_typename(L, 2));
  }
  lt_tensor *w = opt_tensor(L, 3, op, "the weight"), *b = opt_tensor(L, 4, op, "the bias");
  const int opts = ltb_nn_options(L, 5, op, layer_norm_keys);
  double eps = 1e-5;
  ltb_nn_opt_number(L, opts, op, "eps", &eps);
  lt_tensor *out = NULL;
  lt_status st = lt_layer_norm(x, shape, ndim, w, b, eps, &out, NULL, NULL);
  return ltb_push_result(L, st, out);
}

/* ---- activations ---- */

static const char *const gelu_keys[] = {"approximate", NULL};

static int f_gelu(lua_State *L) {
  const char *op = "gelu";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL;
  const int opts = ltb_nn_options(L, 2, op, gelu_keys);
  lt_gelu_approx approx = LT_GELU_NONE;
  if (opts && lua_getfield(L, opts, "approximate") != LUA_TNIL) {
    const char *a = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (a && strcmp(a, "tanh") == 0)
      approx = LT_GELU_TANH;
    else if (!a || strcmp(a, "none") != 0)
      return ltb_error(L, "%s: approximate must be 'none' or 'tanh', got %s", op,
                        a ? a : luaL_typename(L, -1));
  }
  lt_status st = lt_gelu(x, approx, &out);
  return ltb_push_result(L, st, out);
}

static int softmax_like(lua_State *L, const char *op, bool log) {
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL;
  if (lua_isnoneornil(L, 2))
    return ltb_error(L, "%s: expected the dimension to normalise over (1 to %d, or -1)", op,
                      x->ndim > 0 ? x->ndim : 1);
  const int dim = ltb_check_dim(L, 2, x->ndim, op);
  lt_status st = log ? lt_log_softmax(x, dim, &out) : lt_softmax(x, dim, &out);
  return ltb_push_result(L, st, out);
}

static int f_softmax(lua_State *L) { return softmax_like(L, "softmax", false); }
static int f_log_softmax(lua_State *L) { return softmax_like(L, "log_softmax", true); }

static const char *const dropout_keys[] = {"training", "inplace", NULL};

/* A boolean at arg (none or nil: *out unchanged). */
static void opt_bool_arg(lua_State *L, int arg, const char *op, const char *what, bool *out) {
  if (lua_isnoneornil(L, arg)) return;
  if (!lua_isboolean(L, arg))
    ltb_error(L, "%s: %s must be a boolean, got %s", op, what, luaL_typename(L, arg));
  *out = lua_toboolean(L, arg);
}

/* F.dropout(x, p=0.5, training=true, inplace=false), PyTorch's positional
 * form; or F.dropout(x, p, {training=, inplace=}), lt's keyword form. In
 * place, x itself is written and returned. */
static int f_dropout(lua_State *L) {
  const char *op = "dropout";
  lt_tensor *x = ltb_check_tensor(L, 1, op), *out = NULL;
  const double p = lua_isnoneornil(L, 2) ? 0.5 : ltb_check_number(L, 2, op, "p");
  bool training = true, inplace = false;
  if (lua_istable(L, 3)) {
    if (!lua_isnone(L, 4))
      return ltb_error(L, "%s: expected nothing after the options table, got %s", op,
                        luaL_typename(L, 4));
    const int opts = ltb_nn_options(L, 3, op, dropout_keys);
    ltb_nn_opt_bool(L, opts, op, "training", &training);
    ltb_nn_opt_bool(L, opts, op, "inplace", &inplace);
  } else {
    opt_bool_arg(L, 3, op, "training", &training);
    opt_bool_arg(L, 4, op, "inplace", &inplace);
  }
  if (inplace) {
    lt_status st = lt_dropout_(x, p, training, NULL);
    if (st != LT_OK) return ltb_raise(L, st);
    lua_settop(L, 1);
    return 1;
  }
  lt_status st = lt_dropout(x, p, training, &out, NULL);
  return ltb_push_result_or_self(L, st, out, 1);
}

/* ---- embedding ---- */

static const char *const embedding_keys[] = {"padding_idx", NULL};

/* F.embedding(indices, weight, {padding_idx=}) with 1-based indices. */
static int f_embedding(lua_State *L) {
  const char *op = "embedding";
  lt_tensor *idx = ltb_check_tensor(L, 1, op), *w = ltb_check_tensor(L, 2, op), *out = NULL;
  const int opts = ltb_nn_options(L, 3, op, embedding_keys);
  lt_embedding_opts o = {LUA_INDEX_BASE, false, 0};
  o.has_padding_idx = ltb_nn_opt_integer(L, opts, op, "padding_idx", &o.padding_idx);
  if (o.has_padding_idx && o.padding_idx == 0)
    return ltb_error(L, "%s: padding_idx 0 is not an index (indices start at 1; -1 is the last)",
                      op);
  lt_status st = lt_embedding(w, idx, &o, &out);
  return ltb_push_result(L, st, out);
}

/* ---- attention ---- */

static const char *const attention_keys[] = {"attn_mask", "dropout_p", "is_causal", "scale", NULL};

/* F.scaled_dot_product_attention(q, k, v, {attn_mask=, dropout_p=0,
 * is_causal=false, scale=1/sqrt(E)}): PyTorch's keyword arguments as an
 * options table. The engine checks the values. */
static int f_scaled_dot_product_attention(lua_State *L) {
  const char *op = "scaled_dot_product_attention";
  lt_tensor *q = ltb_check_tensor(L, 1, op), *k = ltb_check_tensor(L, 2, op);
  lt_tensor *v = ltb_check_tensor(L, 3, op), *mask = NULL, *out = NULL;
  const int opts = ltb_nn_options(L, 4, op, attention_keys);
  lt_attention_opts o = lt_attention_default_opts();
  ltb_nn_opt_tensor(L, opts, op, "attn_mask", &mask);
  o.attn_mask = mask;
  ltb_nn_opt_number(L, opts, op, "dropout_p", &o.dropout_p);
  ltb_nn_opt_bool(L, opts, op, "is_causal", &o.is_causal);
  o.has_scale = ltb_nn_opt_number(L, opts, op, "scale", &o.scale);
  lt_status st = lt_scaled_dot_product_attention(q, k, v, &o, &out, NULL, NULL);
  return ltb_push_result(L, st, out);
}

/* ---- losses ---- */

static const char *const cross_entropy_keys[] = {"reduction", "ignore_index", "label_smoothing",
                                                 "weight", NULL};
static const char *const nll_loss_keys[] = {"reduction", "ignore_index", "weight", NULL};
static const char *const mse_loss_keys[] = {"reduction", NULL};

static int class_loss(lua_State *L, const char *op, bool fused) {
  lt_tensor *input = ltb_check_tensor(L, 1, op), *target = ltb_check_tensor(L, 2, op);
  const int opts = ltb_nn_options(L, 3, op, fused ? cross_entropy_keys : nll_loss_keys);
  lt_class_loss_opts o = lt_class_loss_default_opts();
  o.index_base = LUA_INDEX_BASE;
  lt_tensor *weight = NULL, *out = NULL;
  ltb_nn_opt_reduction(L, opts, op, &o.reduction);
  ltb_nn_opt_integer(L, opts, op, "ignore_index", &o.ignore_index);
  if (fused) ltb_nn_opt_number(L, opts, op, "label_smoothing", &o.label_smoothing);
  ltb_nn_opt_tensor(L, opts, op, "weight", &weight);
  lt_status st = fused ? lt_cross_entropy(input, target, weight, &o, &out, NULL)
                       : lt_nll_loss(input, target, weight, &o, &out);
  return ltb_push_result(L, st, out);
}

static int f_cross_entropy(lua_State *L) { return class_loss(L, "cross_entropy", true); }
static int f_nll_loss(lua_State *L) { return class_loss(L, "nll_loss", false); }

static int f_mse_loss(lua_State *L) {
  const char *op = "mse_loss";
  lt_tensor *a = ltb_check_tensor(L, 1, op), *b = ltb_check_tensor(L, 2, op), *out = NULL;
  const int opts = ltb_nn_options(L, 3, op, mse_loss_keys);
  lt_reduction r = LT_REDUCTION_MEAN;
  ltb_nn_opt_reduction(L, opts, op, &r);
  lt_status st = lt_mse_loss(a, b, r, &out);
  return ltb_push_result(L, st, out);
}

/* ---- registration ---- */

static const luaL_Reg functional[] = {
    {"linear", f_linear},
    {"conv2d", f_conv2d},
    {"max_pool2d", f_max_pool2d},
    {"check_conv2d", f_check_conv2d},
    {"check_pool2d", f_check_pool2d},
    {"avg_pool2d", f_avg_pool2d},
    {"batch_norm", f_batch_norm},
    {"layer_norm", f_layer_norm},
    {"gelu", f_gelu},
    {"softmax", f_softmax},
    {"log_softmax", f_log_softmax},
    {"dropout", f_dropout},
    {"embedding", f_embedding},
    {"scaled_dot_product_attention", f_scaled_dot_product_attention},
    {"cross_entropy", f_cross_entropy},
    {"nll_loss", f_nll_loss},
    {"mse_loss", f_mse_loss},
    {NULL, NULL},
};

void ltb_open_nn(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  luaL_newlib(L, functional);
  lua_setfield(L, core_idx, "_functional");
}
