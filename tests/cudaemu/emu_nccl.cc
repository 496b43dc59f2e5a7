// An emulated libnccl for lt_cudaemu: NCCL's C API (the calls lt makes, with
// nccl.h's own prototypes) over the simulated device's stand-in, so the
// emulator runs lt's real NCCL code (engine/cuda/cuda_nccl.cu: the dlopen,
// the symbol lookups, the dtype and op mapping, the grouped sends) as it
// runs lt's cuBLAS calls against libcublasLt-emu.so. Built as
// libnccl-emu.so, which lt_cudaemu opens by name in place of libnccl.so.2.
//
// The stand-in (tests/simdev/sim_nccl.c) lives in lt_cudaemu, which exports
// it as lt_sim_nccl_hooks; it moves the device buffers between the mpirun
// ranks with MPI, in the order of the call's stream. Tests only.
#include <nccl.h>
#include <stdint.h>

#include "dist/nccl_hooks.h"

extern "C" const lt_nccl_hooks *lt_sim_nccl_hooks(void);

namespace {

const lt_nccl_hooks *sim() { return lt_sim_nccl_hooks(); }

// NCCL's types back to lt's: the inverse of cuda_nccl.cu's mapping, and an
// invalid argument for a type or op lt never asks for.
bool dtype_of(ncclDataType_t t, lt_dtype *dt) {
  switch (t) {
    case ncclFloat32: *dt = LT_FLOAT32; return true;
    case ncclFloat64: *dt = LT_FLOAT64; return true;
    case ncclFloat16: *dt = LT_FLOAT16; return true;
    case ncclBfloat16: *dt = LT_BFLOAT16; return true;
    case ncclInt64: *dt = LT_INT64; return true;
    case ncclInt32: *dt = LT_INT32; return true;
    case ncclUint8: *dt = LT_UINT8; return true;
    default: return false;
  }
}

bool op_of(ncclRedOp_t o, lt_reduce_op *op) {
  switch (o) {
    case ncclSum: *op = LT_REDUCE_SUM; return true;
    case ncclAvg: *op = LT_REDUCE_AVG; return true;
    case ncclMax: *op = LT_REDUCE_MAX; return true;
    case ncclMin: *op = LT_REDUCE_MIN; return true;
    case ncclProd: *op = LT_REDUCE_PROD; return true;
    default: return false;
  }
}

lt_nccl_comm *comm_of(ncclComm_t c) { return reinterpret_cast<lt_nccl_comm *>(c); }
lt_cuda_stream stream_of(cudaStream_t s) { return reinterpret_cast<lt_cuda_stream>(s); }
ncclResult_t result(lt_nccl_result r) { return static_cast<ncclResult_t>(r); }

}  // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  static_assert(sizeof(ncclUniqueId) == sizeof(lt_nccl_id), "lt_nccl_id must hold an ncclUniqueId");
  return result(sim()->get_unique_id(reinterpret_cast<lt_nccl_id *>(id)));
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  lt_nccl_comm *c = nullptr;
  ncclResult_t r = result(sim()->comm_init_rank(&c, nranks, reinterpret_cast<const lt_nccl_id *>(&id), rank));
  *comm = reinterpret_cast<ncclComm_t>(c);
  return r;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return result(sim()->comm_destroy(comm_of(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return result(sim()->comm_abort(comm_of(comm))); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async) {
  lt_nccl_result a = LT_NCCL_SUCCESS;
  ncclResult_t r = result(sim()->comm_get_async_error(comm_of(comm), &a));
  *async = result(a);
  return r;
}

ncclResult_t ncclAllReduce(const void *in, void *out, size_t count, ncclDataType_t t, ncclRedOp_t o,
                           ncclComm_t comm, cudaStream_t s) {
  lt_dtype dt;
  lt_reduce_op op;
  if (!dtype_of(t, &dt) || !op_of(o, &op)) return ncclInvalidArgument;
  return result(sim()->all_reduce(in, out, count, dt, op, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclBroadcast(const void *in, void *out, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
  lt_dtype dt;
  if (!dtype_of(t, &dt)) return ncclInvalidArgument;
  return result(sim()->broadcast(in, out, count, dt, root, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclAllGather(const void *in, void *out, size_t count, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t s) {
  lt_dtype dt;
  if (!dtype_of(t, &dt)) return ncclInvalidArgument;
  return result(sim()->all_gather(in, out, count, dt, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclReduceScatter(const void *in, void *out, size_t count, ncclDataType_t t, ncclRedOp_t o,
                               ncclComm_t comm, cudaStream_t s) {
  lt_dtype dt;
  lt_reduce_op op;
  if (!dtype_of(t, &dt) || !op_of(o, &op)) return ncclInvalidArgument;
  return result(sim()->reduce_scatter(in, out, count, dt, op, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclSend(const void *in, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  lt_dtype dt;
  if (!dtype_of(t, &dt)) return ncclInvalidArgument;
  return result(sim()->send(in, count, dt, peer, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclRecv(void *out, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
  lt_dtype dt;
  if (!dtype_of(t, &dt)) return ncclInvalidArgument;
  return result(sim()->recv(out, count, dt, peer, comm_of(comm), stream_of(s)));
}

ncclResult_t ncclGroupStart() { return result(sim()->group_start()); }
ncclResult_t ncclGroupEnd() { return result(sim()->group_end()); }

const char *ncclGetErrorString(ncclResult_t r) { return sim()->get_error_string(r); }

}  // extern "C"
