/* The optimizer kernels seen from Lua (lt.core._optim): one fused step per
 * parameter, or per list of parameters (the multi-tensor forms the
 * optimizers use: one engine call per group and device); lua/lt/optim keeps
 * the state and the parameter groups. Arguments are positional so that a
 * step does no string work in the binding. */
#include "args.h"
#include "bindings.h"
#include "lt/optim.h"
#include "tensor_handle.h"

static lt_tensor *opt_tensor(lua_State *L, int idx, const char *op) {
  return lua_isnoneornil(L, idx) ? NULL : ltb_check_tensor(L, idx, op);
}

/* The gradient argument: a tensor, or `true` for the parameter's own .grad
 * read here in C. The optimizers pass `true`, so a step creates no Lua handle
 * for the gradient: zero_grad's `p.grad = nil` then frees its memory at once
 * instead of when the collector finds the handle. */
static lt_tensor *grad_arg(lua_State *L, int idx, const lt_tensor *param, const char *op) {
  if (lua_isboolean(L, idx)) {
    if (param->grad == NULL) ltb_error(L, "%s: the parameter has no gradient", op);
    return param->grad;
  }
  return ltb_check_tensor(L, idx, op);
}

/* has_grad(param): whether param.grad is set, without making a handle for it. */
static int optim_has_grad(lua_State *L) {
  lt_tensor *param = ltb_check_tensor(L, 1, "has_grad");
  lua_pushboolean(L, param->grad != NULL);
  return 1;
}

/* sgd_step(name, param, grad|true, buf|nil, init_buffer, lr, momentum, dampening,
 *          weight_decay, nesterov, maximize) */
static int optim_sgd_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = grad_arg(L, 3, param, name);
  lt_tensor *buf = opt_tensor(L, 4, name);
  bool init_buffer = lua_toboolean(L, 5);
  lt_sgd_options o;
  o.lr = ltb_check_number(L, 6, name, "lr");
  o.momentum = ltb_check_number(L, 7, name, "momentum");
  o.dampening = ltb_check_number(L, 8, name, "dampening");
  o.weight_decay = ltb_check_number(L, 9, name, "weight_decay");
  o.nesterov = lua_toboolean(L, 10);
  o.maximize = lua_toboolean(L, 11);
  lt_status st = lt_sgd_step_(name, param, grad, buf, init_buffer, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* adam_step(name, param, grad|true, exp_avg, exp_avg_sq, max_exp_avg_sq|nil, step,
 *           lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, maximize) */
static int optim_adam_step(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lt_tensor *param = ltb_check_tensor(L, 2, name);
  lt_tensor *grad = grad_arg(L, 3, param, name);
  lt_tensor *exp_avg = ltb_check_tensor(L, 4, name);
  lt_tensor *exp_avg_sq = ltb_check_tensor(L, 5, name);
  lt_tensor *max_exp_avg_sq = opt_tensor(L, 6, name);
  int64_t step = (int64_t)ltb_check_integer(L, 7, name, "step");
  lt_adam_options o;
  o.lr = ltb_check_number(L, 8, name, "lr");
  o.beta1 = ltb_check_number(L, 9, name, "beta1");
  o.beta2 = ltb_check_number(L, 10, name, "beta2");
  o.eps = ltb_check_number(L, 11, name, "eps");
  o.weight_decay = ltb_check_number(L, 12, name, "weight_decay");
  o.amsgrad = lua_toboolean(L, 13);
  o.decoupled_weight_decay = lua_toboolean(L, 14);
  o.maximize = lua_toboolean(L, 15);
  lt_status st = lt_adam_step_(name, param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- multi-tensor steps: Lua arrays of tensors ----
 * The C arrays live in a userdata on the stack, so that a Lua error raised
 * while reading the lists frees them with everything else. */

/* The length of the list at idx (a table), named `what` in errors. */
static int64_t list_len(lua_State *L, int idx, const char *op, const char *what) {
  if (!lua_istable(L, idx))
    ltb_error(L, "%s: %s must be a list of tensors, got %s", op, what, luaL_typename(L, idx));
  return (int64_t)luaL_len(L, idx);
}

/* n tensors of the list at idx into out; n must be its length. */
static void read_tensors(lua_State *L, int idx, int64_t n, const char *op, const char *what,
                         lt_tensor **out) {
  if (list_len(L, idx, op, what) != n)
    ltb_error(L, "%s: %s has %I entries but there are %I parameters", op, what,
               (lua_Integer)luaL_len(L, idx), (lua_Integer)n);
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, idx, (lua_Integer)(i + 1));
    ltb_handle *h = ltb_test_handle(L, -1);
    if (!h) ltb_error(L, "%s: %s[%I] is not a tensor (got %s)", op, what,
                       (lua_Integer)(i + 1), luaL_typename(L, -1));
    if (!h->tensor) ltb_error(L, "%s: attempt to use a freed tensor (%s[%I])", op, what, (lua_Integer)(i + 1));
    out[i] = h->tensor;
    lua_pop(L, 1); /* the list keeps the handle, and so the tensor, alive */
  }
}

/* Each parameter's own .grad (no Lua handle; see grad_arg). */
static void own_grads(lua_State *L, int64_t n, lt_tensor *const *params, const char *op,
                      lt_tensor **out) {
  for (int64_t i = 0; i < n; i++) {
    if (!params[i]->grad) ltb_error(L, "%s: parameter %I has no gradient", op, (lua_Integer)(i + 1));
    out[i] = params[i]->grad;
  }
}

/* Gradients: a list of tensors, or `true` for each parameter's own .grad
 * read here in C (no Lua handle; see grad_arg). */
static void read_grads(lua_State *L, int idx, int64_t n, lt_tensor *const *params,
                       const char *op, lt_tensor **out) {
  if (!lua_isboolean(L, idx)) {
    read_tensors(L, idx, n, op, "grads", out);
    return;
  }
  own_grads(L, n, params, op, out);
}

/* Scratch for k arrays of n pointers, freed by the collector. */
static lt_tensor **scratch(lua_State *L, int64_t n, int k) {
  return lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * (size_t)k * sizeof(lt_tensor *), 0);
}

/* sgd_many(name, params, grads|true, bufs|nil, init_buffers|nil, lr, momentum,
 *          dampening, weight_decay, nesterov, maximize): one SGD step of every
 * parameter in the list (one device); init_buffers a list of booleans. */
static int optim_sgd_many(lua_State *L) {
  lua_settop(L, 11); /* the scratch userdata goes above the arguments */
  const char *name = luaL_checkstring(L, 1);
  const int64_t n = list_len(L, 2, name, "params");
  lt_tensor **params = scratch(L, n, 3), **grads = params + n, **bufs = params + 2 * n;
  bool *init = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(bool), 0);
  read_tensors(L, 2, n, name, "params", params);
  read_grads(L, 3, n, params, name, grads);
  const bool has_bufs = !lua_isnoneornil(L, 4);
  if (has_bufs) read_tensors(L, 4, n, name, "momentum_buffers", bufs);
  const bool has_init = !lua_isnoneornil(L, 5);
  if (has_init) list_len(L, 5, name, "init_buffers");
  for (int64_t i = 0; i < n; i++) {
    if (has_init) {
      lua_geti(L, 5, (lua_Integer)(i + 1));
      init[i] = lua_toboolean(L, -1);
      lua_pop(L, 1);
    } else {
      init[i] = false;
    }
  }
  lt_sgd_options o;
  o.lr = ltb_check_number(L, 6, name, "lr");
  o.momentum = ltb_check_number(L, 7, name, "momentum");
  o.dampening = ltb_check_number(L, 8, name, "dampening");
  o.weight_decay = ltb_check_number(L, 9, name, "weight_decay");
  o.nesterov = lua_toboolean(L, 10);
  o.maximize = lua_toboolean(L, 11);
  lt_status st = lt_sgd_step_many_(name, n, params, grads, has_bufs ? bufs : NULL, init, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* adam_many(name, params, grads|true, exp_avgs, exp_avg_sqs, max_exp_avg_sqs|nil,
 *           steps, lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled,
 *           maximize): steps is the list of step counts after this step. */
static int optim_adam_many(lua_State *L) {
  lua_settop(L, 15); /* the scratch userdata goes above the arguments */
  const char *name = luaL_checkstring(L, 1);
  const int64_t n = list_len(L, 2, name, "params");
  lt_tensor **params = scratch(L, n, 5), **grads = params + n, **m = params + 2 * n;
  lt_tensor **v = params + 3 * n, **vmax = params + 4 * n;
  int64_t *steps = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(int64_t), 0);
  read_tensors(L, 2, n, name, "params", params);
  read_grads(L, 3, n, params, name, grads);
  read_tensors(L, 4, n, name, "exp_avgs", m);
  read_tensors(L, 5, n, name, "exp_avg_sqs", v);
  const bool has_vmax = !lua_isnoneornil(L, 6);
  if (has_vmax) read_tensors(L, 6, n, name, "max_exp_avg_sqs", vmax);
  if (list_len(L, 7, name, "steps") != n)
    ltb_error(L, "%s: steps has %I entries but there are %I parameters", name,
               (lua_Integer)luaL_len(L, 7), (lua_Integer)n);
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, 7, (lua_Integer)(i + 1));
    int ok = 0;
    steps[i] = (int64_t)lua_tointegerx(L, -1, &ok);
    if (!ok) ltb_error(L, "%s: steps[%I] must be an integer, got %s", name, (lua_Integer)(i + 1),
                        luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  lt_adam_options o;
  o.lr = ltb_check_number(L, 8, name, "lr");
  o.beta1 = ltb_check_number(L, 9, name, "beta1");
  o.beta2 = ltb_check_number(L, 10, name, "beta2");
  o.eps = ltb_check_number(L, 11, name, "eps");
  o.weight_decay = ltb_check_number(L, 12, name, "weight_decay");
  o.amsgrad = lua_toboolean(L, 13);
  o.decoupled_weight_decay = lua_toboolean(L, 14);
  o.maximize = lua_toboolean(L, 15);
  lt_status st = lt_adam_step_many_(name, n, params, grads, m, v, has_vmax ? vmax : NULL, steps, &o);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- whole steps: every group and device in one engine call ----
 * calls is a list of positional tables, one per list of parameters on one
 * device; the gradients are the parameters' own .grad (no Lua handle). The
 * engine checks and prepares every list before it writes anything, so a
 * failing step changes nothing (see lt_sgd_step_calls_). */

/* The number of calls and the total number of parameters in them. */
static int64_t count_calls(lua_State *L, const char *op, int64_t *total) {
  const int64_t ncalls = list_len(L, 2, op, "calls");
  *total = 0;
  for (int64_t k = 1; k <= ncalls; k++) {
    if (lua_geti(L, 2, (lua_Integer)k) != LUA_TTABLE)
      ltb_error(L, "%s: calls[%I] must be a table, got %s", op, (lua_Integer)k, luaL_typename(L, -1));
    lua_geti(L, -1, 1);
    *total += list_len(L, lua_gettop(L), op, "params");
    lua_pop(L, 2);
  }
  return ncalls;
}

/* Field pos of the call table at idx onto the stack; returns its index. */
static int call_field(lua_State *L, int idx, int pos) {
  lua_geti(L, idx, pos);
  return lua_gettop(L);
}

static double call_number(lua_State *L, int idx, int pos, const char *op, const char *what) {
  const double v = ltb_check_number(L, call_field(L, idx, pos), op, what);
  lua_pop(L, 1);
  return v;
}

static bool call_bool(lua_State *L, int idx, int pos) {
  lua_geti(L, idx, pos);
  const bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* The walk over calls[k] that every *_calls function shares: the scratch
 * holds k arrays of `total` tensor pointers (0 the parameters, 1 their
 * gradients, then the state lists), each call taking its slice. */
typedef struct call_walk {
  const char *name;
  int64_t total, ncalls, at;
  lt_tensor **ts;
} call_walk;

/* name at 1, calls at 2, and scratch for `lists` arrays above them. */
static call_walk walk_begin(lua_State *L, int lists) {
  lua_settop(L, 2); /* the scratch userdata goes above the arguments */
  call_walk w = {luaL_checkstring(L, 1), 0, 0, 0, NULL};
  w.ncalls = count_calls(L, w.name, &w.total);
  w.ts = scratch(L, w.total, lists);
  return w;
}

/* The current call's slice of scratch array j. */
static lt_tensor **walk_list(const call_walk *w, int j) { return w->ts + j * w->total + w->at; }

/* calls[k] (0-based) onto the stack with its parameters (field 1) and their
 * own gradients read into lists 0 and 1; returns the call table's index. */
static int walk_call(lua_State *L, const call_walk *w, int64_t k, int64_t *n) {
  lua_geti(L, 2, (lua_Integer)(k + 1));
  const int c = lua_gettop(L);
  const int params_idx = call_field(L, c, 1);
  *n = list_len(L, params_idx, w->name, "params");
  read_tensors(L, params_idx, *n, w->name, "params", walk_list(w, 0));
  own_grads(L, *n, walk_list(w, 0), w->name, walk_list(w, 1));
  return c;
}

/* Ends the call at c: drops the call table and its fields (the calls list
 * keeps them) and moves the slices past its n parameters. */
static void walk_next(lua_State *L, call_walk *w, int c, int64_t n) {
  lua_settop(L, c - 1);
  w->at += n;
}

/* A required list of n state tensors (call field pos) into out. */
static void call_tensors(lua_State *L, int c, int pos, int64_t n, const char *op, const char *what,
                         lt_tensor **out) {
  read_tensors(L, call_field(L, c, pos), n, op, what, out);
}

/* An optional list of state buffers (call field pos; false when unused) into
 * out; returns whether there was one. */
static bool call_buffers(lua_State *L, int c, int pos, int64_t n, const char *op, const char *what,
                         lt_tensor **out) {
  const int idx = call_field(L, c, pos);
  const bool has = lua_toboolean(L, idx);
  if (has) read_tensors(L, idx, n, op, what, out);
  return has;
}

/* The step counts after this step (call field pos, one integer per parameter). */
static void call_steps(lua_State *L, int c, int pos, int64_t n, const char *op, int64_t *out) {
  const int idx = call_field(L, c, pos);
  if (list_len(L, idx, op, "steps") != n)
    ltb_error(L, "%s: steps has %I entries but there are %I parameters", op,
              (lua_Integer)luaL_len(L, idx), (lua_Integer)n);
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, idx, (lua_Integer)(i + 1));
    int ok = 0;
    out[i] = (int64_t)lua_tointegerx(L, -1, &ok);
    if (!ok) ltb_error(L, "%s: steps[%I] must be an integer, got %s", op, (lua_Integer)(i + 1),
                       luaL_typename(L, -1));
    lua_pop(L, 1);
  }
}

static int raise_unless_ok(lua_State *L, lt_status st) { return st == LT_OK ? 0 : ltb_raise(L, st); }

/* Room for n items of size bytes, freed by the collector (at least one item). */
static void *walk_array(lua_State *L, int64_t n, size_t size) {
  return lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * size, 0);
}

/* sgd_calls(name, calls): calls[k] = {params, bufs|false, init_buffers|false,
 * lr, momentum, dampening, weight_decay, nesterov, maximize}. */
static int optim_sgd_calls(lua_State *L) {
  call_walk w = walk_begin(L, 3);
  bool *init = walk_array(L, w.total, sizeof(bool));
  lt_sgd_call *calls = walk_array(L, w.ncalls, sizeof *calls);
  for (int64_t k = 0; k < w.ncalls; k++) {
    int64_t n;
    const int c = walk_call(L, &w, k, &n);
    lt_sgd_call *call = &calls[k];
    const bool has_bufs = call_buffers(L, c, 2, n, w.name, "momentum_buffers", walk_list(&w, 2));
    const int init_idx = call_field(L, c, 3);
    const bool has_init = lua_toboolean(L, init_idx);
    if (has_init && list_len(L, init_idx, w.name, "init_buffers") != n)
      ltb_error(L, "%s: init_buffers has %I entries but there are %I parameters", w.name,
                 (lua_Integer)luaL_len(L, init_idx), (lua_Integer)n);
    for (int64_t i = 0; i < n; i++) {
      init[w.at + i] = false;
      if (has_init) {
        lua_geti(L, init_idx, (lua_Integer)(i + 1));
        init[w.at + i] = lua_toboolean(L, -1);
        lua_pop(L, 1);
      }
    }
    call->n = n;
    call->params = walk_list(&w, 0);
    call->grads = walk_list(&w, 1);
    call->momentum_buffers = has_bufs ? walk_list(&w, 2) : NULL;
    call->init_buffers = init + w.at;
    call->options.lr = call_number(L, c, 4, w.name, "lr");
    call->options.momentum = call_number(L, c, 5, w.name, "momentum");
    call->options.dampening = call_number(L, c, 6, w.name, "dampening");
    call->options.weight_decay = call_number(L, c, 7, w.name, "weight_decay");
    call->options.nesterov = call_bool(L, c, 8);
    call->options.maximize = call_bool(L, c, 9);
    walk_next(L, &w, c, n);
  }
  return raise_unless_ok(L, lt_sgd_step_calls_(w.name, w.ncalls, calls));
}

/* adam_calls(name, calls): calls[k] = {params, exp_avgs, exp_avg_sqs,
 * max_exp_avg_sqs|false, steps, lr, beta1, beta2, eps, weight_decay, amsgrad,
 * decoupled, maximize}; steps are the counts after this step. */
static int optim_adam_calls(lua_State *L) {
  call_walk w = walk_begin(L, 5);
  int64_t *steps = walk_array(L, w.total, sizeof(int64_t));
  lt_adam_call *calls = walk_array(L, w.ncalls, sizeof *calls);
  for (int64_t k = 0; k < w.ncalls; k++) {
    int64_t n;
    const int c = walk_call(L, &w, k, &n);
    lt_adam_call *call = &calls[k];
    call_tensors(L, c, 2, n, w.name, "exp_avgs", walk_list(&w, 2));
    call_tensors(L, c, 3, n, w.name, "exp_avg_sqs", walk_list(&w, 3));
    const bool has_vmax = call_buffers(L, c, 4, n, w.name, "max_exp_avg_sqs", walk_list(&w, 4));
    call_steps(L, c, 5, n, w.name, steps + w.at);
    call->n = n;
    call->params = walk_list(&w, 0);
    call->grads = walk_list(&w, 1);
    call->exp_avgs = walk_list(&w, 2);
    call->exp_avg_sqs = walk_list(&w, 3);
    call->max_exp_avg_sqs = has_vmax ? walk_list(&w, 4) : NULL;
    call->steps = steps + w.at;
    call->options.lr = call_number(L, c, 6, w.name, "lr");
    call->options.beta1 = call_number(L, c, 7, w.name, "beta1");
    call->options.beta2 = call_number(L, c, 8, w.name, "beta2");
    call->options.eps = call_number(L, c, 9, w.name, "eps");
    call->options.weight_decay = call_number(L, c, 10, w.name, "weight_decay");
    call->options.amsgrad = call_bool(L, c, 11);
    call->options.decoupled_weight_decay = call_bool(L, c, 12);
    call->options.maximize = call_bool(L, c, 13);
    walk_next(L, &w, c, n);
  }
  return raise_unless_ok(L, lt_adam_step_calls_(w.name, w.ncalls, calls));
}

/* rmsprop_calls(name, calls): calls[k] = {params, square_avgs,
 * momentum_buffers|false, grad_avgs|false, lr, alpha, eps, weight_decay,
 * momentum, centered, maximize}. */
static int optim_rmsprop_calls(lua_State *L) {
  call_walk w = walk_begin(L, 5);
  lt_rmsprop_call *calls = walk_array(L, w.ncalls, sizeof *calls);
  for (int64_t k = 0; k < w.ncalls; k++) {
    int64_t n;
    const int c = walk_call(L, &w, k, &n);
    lt_rmsprop_call *call = &calls[k];
    call_tensors(L, c, 2, n, w.name, "square_avgs", walk_list(&w, 2));
    const bool has_bufs = call_buffers(L, c, 3, n, w.name, "momentum_buffers", walk_list(&w, 3));
    const bool has_gavg = call_buffers(L, c, 4, n, w.name, "grad_avgs", walk_list(&w, 4));
    call->n = n;
    call->params = walk_list(&w, 0);
    call->grads = walk_list(&w, 1);
    call->square_avgs = walk_list(&w, 2);
    call->momentum_buffers = has_bufs ? walk_list(&w, 3) : NULL;
    call->grad_avgs = has_gavg ? walk_list(&w, 4) : NULL;
    call->options.lr = call_number(L, c, 5, w.name, "lr");
    call->options.alpha = call_number(L, c, 6, w.name, "alpha");
    call->options.eps = call_number(L, c, 7, w.name, "eps");
    call->options.weight_decay = call_number(L, c, 8, w.name, "weight_decay");
    call->options.momentum = call_number(L, c, 9, w.name, "momentum");
    call->options.centered = call_bool(L, c, 10);
    call->options.maximize = call_bool(L, c, 11);
    walk_next(L, &w, c, n);
  }
  return raise_unless_ok(L, lt_rmsprop_step_calls_(w.name, w.ncalls, calls));
}

/* adagrad_calls(name, calls): calls[k] = {params, sums, steps, lr, lr_decay,
 * weight_decay, eps, maximize}; steps are the counts after this step. */
static int optim_adagrad_calls(lua_State *L) {
  call_walk w = walk_begin(L, 3);
  int64_t *steps = walk_array(L, w.total, sizeof(int64_t));
  lt_adagrad_call *calls = walk_array(L, w.ncalls, sizeof *calls);
  for (int64_t k = 0; k < w.ncalls; k++) {
    int64_t n;
    const int c = walk_call(L, &w, k, &n);
    lt_adagrad_call *call = &calls[k];
    call_tensors(L, c, 2, n, w.name, "sums", walk_list(&w, 2));
    call_steps(L, c, 3, n, w.name, steps + w.at);
    call->n = n;
    call->params = walk_list(&w, 0);
    call->grads = walk_list(&w, 1);
    call->sums = walk_list(&w, 2);
    call->steps = steps + w.at;
    call->options.lr = call_number(L, c, 4, w.name, "lr");
    call->options.lr_decay = call_number(L, c, 5, w.name, "lr_decay");
    call->options.weight_decay = call_number(L, c, 6, w.name, "weight_decay");
    call->options.eps = call_number(L, c, 7, w.name, "eps");
    call->options.maximize = call_bool(L, c, 8);
    walk_next(L, &w, c, n);
  }
  return raise_unless_ok(L, lt_adagrad_step_calls_(w.name, w.ncalls, calls));
}

/* unscale_many(tensors, found_inf, inv_scale[, of_params]): GradScaler's
 * unscale of every gradient in the list, setting found_inf (a float32
 * tensor of one element) to 1 on an inf or NaN; nothing waits for the
 * device. With of_params true the list holds parameters and their .grad is
 * unscaled (no Lua handle is made for it). */
static int optim_unscale_many(lua_State *L) {
  const char *op = "unscale_many";
  lua_settop(L, 4); /* the scratch userdata goes above the arguments */
  const int64_t n = list_len(L, 1, op, "grads");
  lt_tensor **grads = scratch(L, n, 1);
  read_tensors(L, 1, n, op, "grads", grads);
  if (lua_toboolean(L, 4)) {
    for (int64_t i = 0; i < n; i++) {
      if (!grads[i]->grad)
        ltb_error(L, "%s: parameter %I has no gradient", op, (lua_Integer)(i + 1));
      grads[i] = grads[i]->grad;
    }
  }
  lt_tensor *found_inf = ltb_check_tensor(L, 2, op);
  const double inv_scale = ltb_check_number(L, 3, op, "inv_scale");
  lt_status st = lt_amp_unscale_many_(n, grads, found_inf, (float)inv_scale);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* unscale_calls(lists, flags, inv_scale): unscale_many over several
 * devices at once: lists[k] holds parameters whose .grad is unscaled (no Lua
 * handle), flags[k] their found_inf. Nothing is written unless every list
 * passes its checks and gets its temporaries. */
static int optim_unscale_calls(lua_State *L) {
  const char *op = "unscale_many";
  lua_settop(L, 3); /* the scratch userdata goes above the arguments */
  const int64_t ncalls = list_len(L, 1, op, "lists");
  if (list_len(L, 2, op, "flags") != ncalls)
    ltb_error(L, "%s: flags has %I entries but there are %I lists", op, (lua_Integer)luaL_len(L, 2),
               (lua_Integer)ncalls);
  const double inv_scale = ltb_check_number(L, 3, op, "inv_scale");
  int64_t total = 0;
  for (int64_t k = 1; k <= ncalls; k++) {
    lua_geti(L, 1, (lua_Integer)k);
    total += list_len(L, lua_gettop(L), op, "params");
    lua_pop(L, 1);
  }
  lt_tensor **ts = scratch(L, total, 2);
  lt_unscale_call *calls = lua_newuserdatauv(L, (size_t)(ncalls > 0 ? ncalls : 1) * sizeof *calls, 0);
  int64_t at = 0;
  for (int64_t k = 0; k < ncalls; k++) {
    lua_geti(L, 1, (lua_Integer)(k + 1));
    const int list = lua_gettop(L);
    const int64_t n = list_len(L, list, op, "params");
    read_tensors(L, list, n, op, "params", ts + at);
    own_grads(L, n, ts + at, op, ts + total + at);
    lua_geti(L, 2, (lua_Integer)(k + 1));
    calls[k].n = n;
    calls[k].grads = ts + total + at;
    calls[k].found_inf = ltb_check_tensor(L, -1, op);
    lua_settop(L, list - 1); /* the lists keep the handles alive */
    at += n;
  }
  lt_status st = lt_amp_unscale_calls_(ncalls, calls, (float)inv_scale);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* The tensors of the list at idx into a scratch array pushed on the stack:
 * the list's own tensors, or with of_params each parameter's .grad (no Lua
 * handle), parameters without one skipped. *n gets the count. */
static lt_tensor **foreach_list(lua_State *L, int idx, bool of_params, const char *op, int64_t *n) {
  const int64_t len = list_len(L, idx, op, "tensors");
  lt_tensor **ts = scratch(L, len, 1);
  read_tensors(L, idx, len, op, "tensors", ts);
  int64_t k = 0;
  for (int64_t i = 0; i < len; i++) {
    lt_tensor *t = of_params ? ts[i]->grad : ts[i];
    if (t) ts[k++] = t;
  }
  *n = k;
  return ts;
}

/* norm_many(tensors, p[, of_params]): lt_foreach_norm over the list (with
 * of_params, over the parameters' gradients; see foreach_list), a new 0-dim
 * tensor; nil when the list leaves nothing to take the norm of. */
static int optim_norm_many(lua_State *L) {
  const char *op = "foreach_norm";
  lua_settop(L, 3); /* the scratch userdata goes above the arguments */
  const double p = ltb_check_number(L, 2, op, "p");
  int64_t n;
  lt_tensor **ts = foreach_list(L, 1, lua_toboolean(L, 3), op, &n);
  if (n == 0) {
    lua_pushnil(L);
    return 1;
  }
  lt_tensor *out = NULL;
  lt_status st = lt_foreach_norm(n, ts, p, &out);
  return ltb_push_result(L, st, out);
}

/* scale_many(tensors, scalar[, of_params]): lt_foreach_mul_ over the list
 * (with of_params, the parameters' gradients), by a one-element tensor. */
static int optim_scale_many(lua_State *L) {
  const char *op = "foreach_mul_";
  lua_settop(L, 3);
  lt_tensor *scalar = ltb_check_tensor(L, 2, op);
  int64_t n;
  lt_tensor **ts = foreach_list(L, 1, lua_toboolean(L, 3), op, &n);
  if (n == 0) return 0;
  lt_status st = lt_foreach_mul_(n, ts, scalar);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static const luaL_Reg optim_functions[] = {
    {"sgd_step", optim_sgd_step},
    {"adam_step", optim_adam_step},
    {"sgd_many", optim_sgd_many},
    {"adam_many", optim_adam_many},
    {"sgd_calls", optim_sgd_calls},
    {"adam_calls", optim_adam_calls},
    {"rmsprop_calls", optim_rmsprop_calls},
    {"adagrad_calls", optim_adagrad_calls},
    {"unscale_many", optim_unscale_many},
    {"unscale_calls", optim_unscale_calls},
    {"norm_many", optim_norm_many},
    {"scale_many", optim_scale_many},
    {"has_grad", optim_has_grad},
    {NULL, NULL},
};

void ltb_open_optim(lua_State *L, int core_idx) {
  core_idx = lua_absindex(L, core_idx);
  luaL_newlib(L, optim_functions);
  lua_setfield(L, core_idx, "_optim");
}
