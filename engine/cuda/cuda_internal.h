/* Private helpers shared by the .cu files of engine/cuda: error text, the
 * slot's start-up, the current-device guard and the strided geometry that
 * every elementwise kernel walks. Compiled by nvcc only (C++). */
#ifndef LT_CUDA_INTERNAL_H
#define LT_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "core/cuda_hooks.h"
#include "core/device_kernels.h"
#include "lt/alloc.h"
#include "lt/cuda.h"
}

/* lt_data as bytes: C++ does no pointer arithmetic on void *. */
static inline char *cuda_bytes(const lt_tensor *t) { return (char *)lt_data(t); }

/* Every CUDA failure names the call and carries cudaGetErrorString, so that a
 * user report says which call failed and why. Clears the error state
 * (cudaGetLastError) so that the next call does not report it again. */
static inline lt_status cuda_fail(const char *op, const char *call, cudaError_t e) {
  (void)cudaGetLastError();
  return lt_error(LT_ERR_DEVICE, "cuda: %s: %s: %s", op, call, cudaGetErrorString(e));
}

#define CUDA_TRY(op, call)                                       \
  do {                                                           \
    cudaError_t cuda_try_e_ = (call);                            \
    if (cuda_try_e_ != cudaSuccess) return cuda_fail(op, #call, cuda_try_e_); \
  } while (0)

/* A kernel launch reports configuration errors only through cudaGetLastError;
 * execution errors surface at the next synchronising call (item, copy to the
 * host), which is where PyTorch reports them too. */
static inline lt_status cuda_check_launch(const char *op, const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return lt_error(LT_ERR_DEVICE, "cuda: %s: launching %s: %s", op, kernel, cudaGetErrorString(e));
  return LT_OK;
}

/* Installs the raw allocator (cuda_memory.cu); run once, the first time a
 * device is found, when cuda_device.cu also registers the kernel tables. */
void lt_cuda_install_allocator(void);
const char *cuda_last_alloc_error(void); /* cuda_memory.cu: lt_cuda_last_alloc_error */
void cuda_stream_hooks(lt_cuda_hooks *h); /* cuda_stream.cu: sets the stream and event hooks */
extern const lt_backend cuda_backend;             /* cuda_backend.cu */
extern const lt_nn_backend cuda_nn_backend;       /* cuda_nn_backend.cu */
extern const lt_optim_backend cuda_optim_backend; /* cuda_optim.cu */

/* ---- streams (cuda_stream.cu) ----
 * Every kernel, library call and copy of lt runs on the current stream of
 * the current device (lt_cuda_set_stream changes it; lt/cuda.h). The
 * caching allocator tags blocks with the stream current at allocation and
 * reuses them only on that stream, so stream order keeps reuse safe.
 *
 * cuda_stream() is that stream for the device current now (cudaGetDevice):
 * ops call it under their cuda_device_guard, so it is the stream of the
 * op's device. Evaluate it once per op into a local and pass the local to
 * every launch, copy and library call of the op, so that one op never
 * straddles two streams. It never fails: if cudaGetDevice does (a broken
 * context, where the op's own calls fail next and report it), it answers 0,
 * the legacy default stream. */
cudaStream_t cuda_stream(void);
/* The current stream of device (N of cuda:N) without making it current;
 * 0 for an index out of range. */
cudaStream_t cuda_stream_of(int device);
/* Streams per device in the pool lt_cuda_stream_new hands out. */
#define CUDA_STREAM_POOL_SIZE 32
/* A small number naming stream among device's streams, for per-stream
 * tables (the cuBLAS workspaces): 0 for the default stream, 1 + its place in
 * the pool for a pool stream, -1 for anything else (a foreign stream or a
 * device out of range). */
int cuda_stream_slot(int device, cudaStream_t stream);
#define CUDA_STREAM_SLOTS (CUDA_STREAM_POOL_SIZE + 1)

/* A library workspace (cuDNN, scratch buffers of lt's own kernels) taken
 * from the caching allocator under the workspace category, so that
 * statistics and the memory history show it and an out-of-memory there
 * takes the usual path (collect, empty the cache, retry, a catchable error).
 * Given back when the scope ends, while the library call or kernel that
 * uses it may still be queued: that is safe because the block was allocated
 * on the current stream and the allocator hands it out again only to
 * allocations on that same stream, whose work runs after the queued call
 * (stream order). So the workspace must be used only on the stream current
 * when get() ran. (cuBLAS's workspace is per stream and kept for the
 * process: cuda_blas.h.) */
struct cuda_workspace {
  void *ptr;
  lt_block *block;
  cuda_workspace() : ptr(NULL), block(NULL) {}
  lt_status get(lt_device dev, size_t nbytes) {
    return lt_alloc(dev, nbytes, LT_CAT_WORKSPACE, &ptr, &block);
  }
  ~cuda_workspace() {
    if (block) lt_free(block);
  }
  cuda_workspace(const cuda_workspace &) = delete;
  cuda_workspace &operator=(const cuda_workspace &) = delete;
};

/* Makes dev the current device for the guard's lifetime: kernels and cuBLAS
 * run on the current device, and a tensor on cuda:1 must not be touched from
 * cuda:0's context. Restores the caller's device afterwards. A failed switch
 * leaves the caller's device current and is kept in error/error_call (most
 * callers need not look: a kernel on the wrong device then fails with its
 * own error; code that records events or queues on stream 0 of a device it
 * names checks, since stream 0 means "the current device's"). */
struct cuda_device_guard {
  int previous;
  bool changed;
  cudaError_t error;      /* cudaSuccess, or why dev could not be made current */
  const char *error_call; /* "cudaGetDevice" or "cudaSetDevice" when error is set */
  explicit cuda_device_guard(lt_device dev)
      : previous(0), changed(false), error(cudaSuccess), error_call(NULL) {
    if (dev.type != LT_DEVICE_CUDA) return;
    cudaError_t e = cudaGetDevice(&previous);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      error = e, error_call = "cudaGetDevice";
      return;
    }
    if (previous == dev.index) return;
    e = cudaSetDevice(dev.index);
    if (e == cudaSuccess)
      changed = true;
    else // left pending on purpose: the op's next launch check reports it
      error = e, error_call = "cudaSetDevice";
  }
  ~cuda_device_guard() {
    if (changed) (void)cudaSetDevice(previous);
  }
  cuda_device_guard(const cuda_device_guard &) = delete;
  cuda_device_guard &operator=(const cuda_device_guard &) = delete;
};

/* ---- strided geometry (the device-side twin of cpu_iter) ----
 * Up to four operands sharing operand 0's shape; the others broadcast with
 * stride 0. Size-1 dims are dropped and dims every operand walks contiguously
 * are merged, so a contiguous tensor is one dim and its index arithmetic is a
 * single multiply. Passed to kernels by value (well under the 4 KiB limit). */
#define CUDA_MAX_OPS 4

struct cuda_geom {
  int ndim; /* at least 1 */
  int nops;
  int64_t numel;
  int64_t shape[LT_MAX_DIMS];                   /* outermost first */
  int64_t stride[CUDA_MAX_OPS][LT_MAX_DIMS];    /* in bytes */
  char *data[CUDA_MAX_OPS];
  int dtype[CUDA_MAX_OPS];
};

/* ops[0] is the output; ops[k] may be NULL (a scalar: data NULL, stride 0). */
void cuda_geom_init(cuda_geom *g, const lt_tensor *const *ops, int nops);

/* Byte offsets of element i (row-major over g.shape) for every operand. */
__device__ inline void cuda_geom_offsets(const cuda_geom &g, int64_t i, int64_t *off) {
  for (int k = 0; k < g.nops; k++) off[k] = 0;
  for (int d = g.ndim - 1; d >= 0; d--) {
    const int64_t n = g.shape[d];
    const int64_t idx = d == 0 ? i : i % n;
    i = d == 0 ? 0 : i / n;
    for (int k = 0; k < g.nops; k++) off[k] += idx * g.stride[k][d];
  }
}

/* Blocks for a grid-stride loop over n elements. */
#define CUDA_THREADS 256
static inline unsigned cuda_blocks_for(int64_t n) {
  int64_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8; /* the loop covers the rest */
  return (unsigned)b;
}

#endif
