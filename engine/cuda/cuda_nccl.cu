// NCCL's hooks (dist/nccl_hooks.h) over the real libnccl, opened with dlopen
// the first time a group with backend "nccl" starts, not linked: a CUDA
// build of lt then starts, and trains on one GPU, where NCCL is not
// installed, and a process that never starts a group never maps it (as
// cuBLAS: cuda_blas_loader.cu). The calls are looked up by NCCL's names and
// typed by its header, so a prototype that does not match does not compile.
// Without the header at build time there are no hooks here, and the
// backend says why at init (dist/nccl_hooks.c).
#include <dlfcn.h>
#include <mutex>
#include <stdio.h>
#include <string.h>

#include "dist/nccl_hooks.h"

#ifndef LT_NCCL_SONAME
#define LT_NCCL_SONAME "libnccl.so.2"
#endif
#ifndef LT_CUDA_LIBDIR
#define LT_CUDA_LIBDIR ""
#endif

#if __has_include(<nccl.h>)
#include <nccl.h>

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(lt_nccl_id), "lt_nccl_id must hold an ncclUniqueId");

// The calls lt makes, looked up once.
struct nccl_api {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclGetErrorString) get_error_string;
};

nccl_api api;
bool loaded;
char load_error[512];
std::once_flag load_once;

// The soname through the loader's search path (LD_LIBRARY_PATH, where a
// PyTorch wheel's libnccl may be), then the toolkit lt was built against.
void *open_lib() {
  void *h = dlopen(LT_NCCL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (h || !LT_CUDA_LIBDIR[0]) return h;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", LT_CUDA_LIBDIR, LT_NCCL_SONAME);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

template <typename F> bool find(void *h, F *fn, const char *name) {
  *fn = reinterpret_cast<F>(dlsym(h, name));
  if (!*fn) // a library older than the header lt was built with
    snprintf(load_error, sizeof load_error, "%s has no symbol %s", LT_NCCL_SONAME, name);
  return *fn != nullptr;
}

void load() {
  void *h = open_lib();
  if (!h) {
    const char *why = dlerror();
    snprintf(load_error, sizeof load_error,
             "cannot load %s (%s): install NCCL, or put its lib directory on LD_LIBRARY_PATH", LT_NCCL_SONAME,
             why ? why : "unknown error");
    return;
  }
  loaded = find(h, &api.get_unique_id, "ncclGetUniqueId") && find(h, &api.comm_init_rank, "ncclCommInitRank") &&
           find(h, &api.comm_destroy, "ncclCommDestroy") && find(h, &api.comm_abort, "ncclCommAbort") &&
           find(h, &api.comm_get_async_error, "ncclCommGetAsyncError") &&
           find(h, &api.all_reduce, "ncclAllReduce") && find(h, &api.broadcast, "ncclBroadcast") &&
           find(h, &api.all_gather, "ncclAllGather") && find(h, &api.reduce_scatter, "ncclReduceScatter") &&
           find(h, &api.send, "ncclSend") && find(h, &api.recv, "ncclRecv") &&
           find(h, &api.group_start, "ncclGroupStart") && find(h, &api.group_end, "ncclGroupEnd") &&
           find(h, &api.get_error_string, "ncclGetErrorString");
}

const char *unavailable() {
  std::call_once(load_once, load);
  return loaded ? nullptr : load_error;
}

ncclDataType_t type_of(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: return ncclFloat32;
    case LT_FLOAT64: return ncclFloat64;
    case LT_FLOAT16: return ncclFloat16;
    case LT_BFLOAT16: return ncclBfloat16;
    case LT_INT64: return ncclInt64;
    case LT_INT32: return ncclInt32;
    case LT_UINT8:
    case LT_BOOL:
    case LT_NDTYPES: break;
  }
  return ncclUint8;
}

ncclRedOp_t op_of(lt_dtype dt, lt_reduce_op op) {
  // bool: sum is "any" and prod "all", as PyTorch's NCCL backend.
  if (dt == LT_BOOL) return (op == LT_REDUCE_SUM || op == LT_REDUCE_MAX) ? ncclMax : ncclMin;
  switch (op) {
    case LT_REDUCE_AVG: return ncclAvg;
    case LT_REDUCE_MAX: return ncclMax;
    case LT_REDUCE_MIN: return ncclMin;
    case LT_REDUCE_PROD: return ncclProd;
    case LT_REDUCE_SUM:
    case LT_NREDUCE_OPS: break;
  }
  return ncclSum;
}

ncclComm_t comm_of(lt_nccl_comm *c) { return reinterpret_cast<ncclComm_t>(c); }
cudaStream_t stream_of(lt_cuda_stream s) { return reinterpret_cast<cudaStream_t>(s); }

// Every call is reached only after unavailable() said NULL (nccl_backend.c).
lt_nccl_result get_unique_id(lt_nccl_id *id) {
  return api.get_unique_id(reinterpret_cast<ncclUniqueId *>(id));
}

lt_nccl_result comm_init_rank(lt_nccl_comm **comm, int nranks, const lt_nccl_id *id, int rank) {
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclComm_t c = nullptr;
  ncclResult_t r = api.comm_init_rank(&c, nranks, uid, rank);
  *comm = reinterpret_cast<lt_nccl_comm *>(c);
  return r;
}

lt_nccl_result comm_destroy(lt_nccl_comm *c) { return api.comm_destroy(comm_of(c)); }
lt_nccl_result comm_abort(lt_nccl_comm *c) { return api.comm_abort(comm_of(c)); }

lt_nccl_result comm_get_async_error(lt_nccl_comm *c, lt_nccl_result *async) {
  ncclResult_t a = ncclSuccess;
  ncclResult_t r = api.comm_get_async_error(comm_of(c), &a);
  *async = a;
  return r;
}

lt_nccl_result all_reduce(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op, lt_nccl_comm *c,
                          lt_cuda_stream s) {
  return api.all_reduce(in, out, count, type_of(dt), op_of(dt, op), comm_of(c), stream_of(s));
}

lt_nccl_result broadcast(const void *in, void *out, size_t count, lt_dtype dt, int root, lt_nccl_comm *c,
                         lt_cuda_stream s) {
  return api.broadcast(in, out, count, type_of(dt), root, comm_of(c), stream_of(s));
}

lt_nccl_result all_gather(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *c,
                          lt_cuda_stream s) {
  return api.all_gather(in, out, count, type_of(dt), comm_of(c), stream_of(s));
}

lt_nccl_result reduce_scatter(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                              lt_nccl_comm *c, lt_cuda_stream s) {
  return api.reduce_scatter(in, out, count, type_of(dt), op_of(dt, op), comm_of(c), stream_of(s));
}

lt_nccl_result send(const void *in, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c, lt_cuda_stream s) {
  return api.send(in, count, type_of(dt), peer, comm_of(c), stream_of(s));
}

lt_nccl_result recv(void *out, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c, lt_cuda_stream s) {
  return api.recv(out, count, type_of(dt), peer, comm_of(c), stream_of(s));
}

lt_nccl_result group_start() { return api.group_start(); }
lt_nccl_result group_end() { return api.group_end(); }

const char *error_string(lt_nccl_result r) {
  return loaded ? api.get_error_string(static_cast<ncclResult_t>(r)) : load_error;
}

}  // namespace

extern "C" const lt_nccl_hooks *lt_nccl_runtime_hooks(void) {
  static const lt_nccl_hooks hooks = {
      "nccl",         unavailable,          get_unique_id, comm_init_rank, comm_destroy,
      comm_abort,     comm_get_async_error, all_reduce,    broadcast,      all_gather,
      reduce_scatter, send,                 recv,          group_start,    group_end,
      error_string,
  };
  return &hooks;
}

#else  // no nccl.h when lt was built: core's table without NCCL says so at init

extern "C" const lt_nccl_hooks *lt_nccl_runtime_hooks(void) { return nullptr; }

#endif
