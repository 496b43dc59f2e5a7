/* lt.distributed (torch.distributed's functions over the default process
 * group): the options tables read, lists of tensors unpacked, and the work
 * handles of async_op as userdata. The collectives are the engine's
 * (engine/dist); lua/lt/distributed.lua adds ReduceOp. */
#include <string.h>

#include "args.h"
#include "bindings.h"
#include "lt/distributed.h"
#include "tensor_handle.h"

#define WORK_NAME "lt.distributed.Work"
#define DEFAULT_TIMEOUT_S 300.0

typedef struct work_handle {
  lt_dist_work *work; /* NULL once collected */
} work_handle;

static const char *const reduce_names[] = {"sum", "avg", "max", "min", "prod"};

/* ---- options ---- */

typedef struct call_options {
  lt_reduce_op op;
  int src;
  bool async_op;
} call_options;

enum { OPT_OP = 1, OPT_SRC = 2, OPT_ASYNC = 4 };

static lt_reduce_op parse_op(lua_State *L, const char *op) {
  if (lua_type(L, -1) != LUA_TSTRING)
    ltb_error(L, "%s: op must be a string (sum, avg, max, min or prod), got %s", op, luaL_typename(L, -1));
  const char *name = lua_tostring(L, -1);
  for (int i = 0; i < LT_NREDUCE_OPS; i++)
    if (strcmp(name, reduce_names[i]) == 0) return (lt_reduce_op)i;
  const char *near = ltb_closest_name(name, reduce_names, LT_NREDUCE_OPS);
  if (near) ltb_error(L, "%s: unknown op '%s' (did you mean '%s'?)", op, name, near);
  ltb_error(L, "%s: unknown op '%s' (expected one of sum, avg, max, min, prod)", op, name);
  return LT_REDUCE_SUM;
}

/* The options table at idx (none or nil: defaults), keys outside allowed refused. */
static call_options read_options(lua_State *L, int idx, const char *op, unsigned allowed) {
  call_options o = {LT_REDUCE_SUM, 0, false};
  if (lua_isnoneornil(L, idx)) return o;
  if (!lua_istable(L, idx)) ltb_error(L, "%s: expected an options table, got %s", op, luaL_typename(L, idx));
  const char *names[3];
  int n = 0;
  if (allowed & OPT_OP) names[n++] = "op";
  if (allowed & OPT_SRC) names[n++] = "src";
  names[n++] = "async_op";
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    if (key && strcmp(key, "op") == 0 && (allowed & OPT_OP)) {
      o.op = parse_op(L, op);
    } else if (key && strcmp(key, "src") == 0 && (allowed & OPT_SRC)) {
      lua_Integer src = ltb_check_integer(L, -1, op, "src");
      if (src < 0 || src > 1 << 30) ltb_error(L, "%s: src must be a rank (0 or more), got %I", op, src);
      o.src = (int)src;
    } else if (key && strcmp(key, "async_op") == 0) {
      if (!lua_isboolean(L, -1))
        ltb_error(L, "%s: async_op must be a boolean, got %s", op, luaL_typename(L, -1));
      o.async_op = lua_toboolean(L, -1);
    } else {
      ltb_unknown_option(L, op, key ? key : luaL_typename(L, -2), names, n);
    }
    lua_pop(L, 1);
  }
  return o;
}

/* The tensors of the list at idx, in a scratch block that Lua collects
 * (a raised error leaks nothing); *n: how many. */
static lt_tensor **check_list(lua_State *L, int idx, const char *op, const char *what, int *n) {
  if (!lua_istable(L, idx))
    ltb_error(L, "%s: expected %s (a list of tensors), got %s", op, what, luaL_typename(L, idx));
  lua_Integer len = luaL_len(L, idx);
  if (len < 1 || len > 1 << 20) ltb_error(L, "%s: %s must hold one tensor per rank, got %I", op, what, len);
  lt_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)len, 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    ts[i - 1] = ltb_list_tensor(L, op, i);
    lua_pop(L, 1);
  }
  *n = (int)len;
  return ts; /* the block stays on the stack until the call returns */
}

/* ---- work handles ---- */

static work_handle *check_work(lua_State *L, int idx) {
  work_handle *w = luaL_checkudata(L, idx, WORK_NAME);
  return w;
}

/* Returns nothing for a synchronous call, the work handle for async_op. */
static int finish_call(lua_State *L, lt_status st, lt_dist_work *work, work_handle *h) {
  if (st != LT_OK) return ltb_raise(L, st);
  if (h == NULL) return 0;
  h->work = work;
  return 1; /* the handle made before the call is on the stack top */
}

static work_handle *new_work_handle(lua_State *L, bool async_op) {
  if (!async_op) return NULL;
  work_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->work = NULL;
  luaL_setmetatable(L, WORK_NAME);
  return h;
}

static int work_wait(lua_State *L) {
  work_handle *h = check_work(L, 1);
  if (h->work != NULL) {
    lt_status st = lt_dist_wait(h->work);
    if (st != LT_OK) return ltb_raise(L, st);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int work_is_completed(lua_State *L) {
  work_handle *h = check_work(L, 1);
  bool done = true;
  if (h->work != NULL) {
    lt_status st = lt_dist_is_completed(h->work, &done);
    if (st != LT_OK) return ltb_raise(L, st);
  }
  lua_pushboolean(L, done);
  return 1;
}

static int work_gc(lua_State *L) {
  work_handle *h = check_work(L, 1);
  lt_dist_work_free(h->work); /* unfinished work stays with its group */
  h->work = NULL;
  return 0;
}

static int work_tostring(lua_State *L) {
  work_handle *h = check_work(L, 1);
  bool done = true;
  if (h->work != NULL && lt_dist_is_completed(h->work, &done) != LT_OK) done = false;
  lua_pushfstring(L, "lt.distributed.Work (%s)", done ? "completed" : "in flight");
  return 1;
}

/* ---- the group ---- */

static int init_process_group(lua_State *L) {
  const char *op = "init_process_group";
  const char *backend = "mpi";
  double timeout = DEFAULT_TIMEOUT_S;
  if (!lua_isnoneornil(L, 1)) {
    if (!lua_istable(L, 1))
      return ltb_error(L, "%s: expected an options table, got %s", op, luaL_typename(L, 1));
    static const char *const names[] = {"backend", "timeout"};
    lua_pushnil(L);
    while (lua_next(L, 1)) {
      const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (key && strcmp(key, "backend") == 0) {
        if (lua_type(L, -1) != LUA_TSTRING)
          return ltb_error(L, "%s: backend must be a string (\"mpi\" or \"nccl\"), got %s", op,
                           luaL_typename(L, -1));
        backend = lua_tostring(L, -1);
      } else if (key && strcmp(key, "timeout") == 0) {
        timeout = ltb_check_number(L, -1, op, "timeout");
        if (!(timeout > 0))
          return ltb_error(L, "%s: timeout must be a positive number of seconds, got %f", op, timeout);
      } else {
        ltb_unknown_option(L, op, key ? key : luaL_typename(L, -2), names, 2);
      }
      lua_pop(L, 1);
    }
    if (strcmp(backend, "mpi") != 0 && strcmp(backend, "nccl") != 0) {
      static const char *const backends[] = {"mpi", "nccl"};
      const char *near = ltb_closest_name(backend, backends, 2);
      if (near) return ltb_error(L, "%s: unknown backend '%s' (did you mean '%s'?)", op, backend, near);
      return ltb_error(L, "%s: unknown backend '%s' (expected mpi or nccl)", op, backend);
    }
  }
  lt_status st = lt_dist_init(backend, timeout);
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static int is_initialized(lua_State *L) {
  lua_pushboolean(L, lt_dist_is_initialized());
  return 1;
}

static int is_available(lua_State *L) {
  lua_pushboolean(L, lt_dist_backend_compiled("mpi") || lt_dist_backend_compiled("nccl"));
  return 1;
}

static int is_mpi_available(lua_State *L) {
  lua_pushboolean(L, lt_dist_backend_compiled("mpi"));
  return 1;
}

static int is_nccl_available(lua_State *L) {
  lua_pushboolean(L, lt_dist_backend_compiled("nccl"));
  return 1;
}

static int get_rank(lua_State *L) {
  int rank = 0;
  lt_status st = lt_dist_rank("get_rank", &rank);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_pushinteger(L, rank);
  return 1;
}

static int get_world_size(lua_State *L) {
  int size = 0;
  lt_status st = lt_dist_world_size("get_world_size", &size);
  if (st != LT_OK) return ltb_raise(L, st);
  lua_pushinteger(L, size);
  return 1;
}

static int get_backend(lua_State *L) {
  const char *name = lt_dist_backend_name();
  if (name == NULL) {
    int rank;
    return ltb_raise(L, lt_dist_rank("get_backend", &rank));
  }
  lua_pushstring(L, name);
  return 1;
}

static int barrier(lua_State *L) {
  lt_status st = lt_dist_barrier();
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

static int destroy_process_group(lua_State *L) {
  lt_status st = lt_dist_destroy();
  if (st != LT_OK) return ltb_raise(L, st);
  return 0;
}

/* ---- collectives ---- */

static int all_reduce(lua_State *L) {
  const char *op = "all_reduce";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  call_options o = read_options(L, 2, op, OPT_OP | OPT_ASYNC);
  work_handle *h = new_work_handle(L, o.async_op);
  lt_dist_work *work = NULL;
  lt_status st = lt_dist_all_reduce(t, o.op, h ? &work : NULL);
  return finish_call(L, st, work, h);
}

static int broadcast(lua_State *L) {
  const char *op = "broadcast";
  lt_tensor *t = ltb_check_tensor(L, 1, op);
  call_options o = read_options(L, 2, op, OPT_SRC | OPT_ASYNC);
  work_handle *h = new_work_handle(L, o.async_op);
  lt_dist_work *work = NULL;
  lt_status st = lt_dist_broadcast(t, o.src, h ? &work : NULL);
  return finish_call(L, st, work, h);
}

static int all_gather(lua_State *L) {
  const char *op = "all_gather";
  lt_tensor *in = ltb_check_tensor(L, 2, op);
  call_options o = read_options(L, 3, op, OPT_ASYNC);
  int n = 0;
  lt_tensor **outs = check_list(L, 1, op, "the output list", &n);
  work_handle *h = new_work_handle(L, o.async_op);
  lt_dist_work *work = NULL;
  lt_status st = lt_dist_all_gather(outs, n, in, h ? &work : NULL);
  return finish_call(L, st, work, h);
}

static int reduce_scatter(lua_State *L) {
  const char *op = "reduce_scatter";
  lt_tensor *out = ltb_check_tensor(L, 1, op);
  call_options o = read_options(L, 3, op, OPT_OP | OPT_ASYNC);
  int n = 0;
  lt_tensor **ins = check_list(L, 2, op, "the input list", &n);
  work_handle *h = new_work_handle(L, o.async_op);
  lt_dist_work *work = NULL;
  lt_status st = lt_dist_reduce_scatter(out, (const lt_tensor *const *)ins, n, o.op, h ? &work : NULL);
  return finish_call(L, st, work, h);
}

static int all_to_all(lua_State *L) {
  const char *op = "all_to_all";
  call_options o = read_options(L, 3, op, OPT_ASYNC);
  int nout = 0, nin = 0;
  lt_tensor **outs = check_list(L, 1, op, "the output list", &nout);
  lt_tensor **ins = check_list(L, 2, op, "the input list", &nin);
  work_handle *h = new_work_handle(L, o.async_op);
  lt_dist_work *work = NULL;
  lt_status st = lt_dist_all_to_all(outs, nout, (const lt_tensor *const *)ins, nin, h ? &work : NULL);
  return finish_call(L, st, work, h);
}

static const luaL_Reg functions[] = {
    {"init_process_group", init_process_group},
    {"is_initialized", is_initialized},
    {"is_available", is_available},
    {"is_mpi_available", is_mpi_available},
    {"is_nccl_available", is_nccl_available},
    {"get_rank", get_rank},
    {"get_world_size", get_world_size},
    {"get_backend", get_backend},
    {"barrier", barrier},
    {"destroy_process_group", destroy_process_group},
    {"all_reduce", all_reduce},
    {"broadcast", broadcast},
    {"all_gather", all_gather},
    {"reduce_scatter", reduce_scatter},
    {"all_to_all", all_to_all},
    {NULL, NULL},
};

static const luaL_Reg work_methods[] = {
    {"wait", work_wait},
    {"is_completed", work_is_completed},
    {NULL, NULL},
};

void ltb_open_distributed(lua_State *L, int core_idx) {
  if (luaL_newmetatable(L, WORK_NAME)) {
    luaL_newlib(L, work_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, work_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, work_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, functions);
  lua_setfield(L, core_idx, "_distributed");
}

/* The host's hook after an error nobody caught (lt_bindings.h). */
void ltb_distributed_failed(const char *message) { lt_dist_abort_job(message); }
