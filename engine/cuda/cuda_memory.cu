// The CUDA device's raw memory for the caching allocator (engine/alloc):
// plain cudaMalloc/cudaFree. Pooling, splitting, statistics and limits live
// in the one caching allocator every device shares, so this file stays thin.
#include <stdio.h>

#include "cuda/cuda_internal.h"

// The raw allocator can only say "no room" (NULL), so the reason of a failure
// that is not plain exhaustion (a bad device, a driver error) is kept here for
// lt_cuda_last_alloc_error, with the call and cudaGetErrorString.
static char last_error[256];

static void remember(const char *call, size_t nbytes, cudaError_t e) {
  snprintf(last_error, sizeof last_error, "cuda: %s(%zu bytes): %s", call, nbytes,
           cudaGetErrorString(e));
}

static void *cuda_raw_alloc(void *ctx, size_t nbytes) {
  (void)ctx;
  void *ptr = NULL;
  // The caching allocator asks for whole segments (2 MiB and up) on the
  // current device; it never asks for zero bytes.
  cudaError_t e = cudaMalloc(&ptr, nbytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // an out-of-memory must not poison the next call
    remember("cudaMalloc", nbytes, e);
    return NULL;
  }
  return ptr;
}

static void cuda_raw_free(void *ctx, void *ptr, size_t nbytes) {
  (void)ctx;
  // cudaFree synchronises the device, so no kernel still uses the segment.
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaFree", nbytes, e);
  }
}

void lt_cuda_install_allocator(void) {
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaMemGetInfo", 0, e);
    total_bytes = 0; // unknown: fractional limits then have no base
  }
  lt_raw_allocator raw = {cuda_raw_alloc, cuda_raw_free, NULL, total_bytes};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
}

extern "C" const char *lt_cuda_last_alloc_error(void) {
  return last_error[0] ? last_error : NULL;
}
