// The CUDA device's raw memory for the caching allocator (engine/alloc):
// cudaMalloc/cudaFree on the device the allocator names, and cudaHostAlloc
// for the pinned host pool. Pooling, splitting, statistics and limits live in
// the one caching allocator every device shares, so this file stays thin.
#include <stdio.h>

#include "cuda/cuda_internal.h"

// The raw allocator can only say "no room" (NULL), so the reason of a failure
// that is not plain exhaustion (a bad device, a driver error) is kept here for
// lt_cuda_last_alloc_error, with the call and cudaGetErrorString.
static char last_error[256];

static void remember(const char *call, int index, size_t nbytes, cudaError_t e) {
  snprintf(last_error, sizeof last_error, "cuda: %s(%zu bytes) on cuda:%d: %s", call, nbytes,
           index, cudaGetErrorString(e));
}

static void *cuda_raw_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  void *ptr = NULL;
  // The caching allocator asks for whole segments (2 MiB and up) of device
  // index, whichever device the caller made current.
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  cudaError_t e = cudaMalloc(&ptr, nbytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // an out-of-memory must not poison the next call
    remember("cudaMalloc", index, nbytes, e);
    return NULL;
  }
  return ptr;
}

static void cuda_raw_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  // cudaFree synchronises the device, so no kernel still uses the segment.
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaFree", index, nbytes, e);
  }
}

static bool cuda_mem_info(void *ctx, int index, size_t *free_bytes, size_t *total_bytes) {
  (void)ctx;
  lt_device dev = {LT_DEVICE_CUDA, (signed char)index};
  cuda_device_guard guard(dev);
  cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaMemGetInfo", index, 0, e);
    return false;
  }
  return true;
}

// ---- pinned host memory ----

static void *pinned_alloc(void *ctx, int index, size_t nbytes) {
  (void)ctx;
  (void)index;
  void *ptr = NULL;
  // Portable: usable by every device's copies, not only the current one's.
  cudaError_t e = cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaHostAlloc", 0, nbytes, e);
    return NULL;
  }
  return ptr;
}

static void pinned_free(void *ctx, int index, void *ptr, size_t nbytes) {
  (void)ctx;
  (void)index;
  // cudaFreeHost waits for the copies still reading or writing the pages.
  cudaError_t e = cudaFreeHost(ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    remember("cudaFreeHost", 0, nbytes, e);
  }
}

void lt_cuda_install_allocator(void) {
  lt_raw_allocator raw = {cuda_raw_alloc, cuda_raw_free, cuda_mem_info, NULL};
  lt_alloc_set_backend(LT_DEVICE_CUDA, &raw);
  lt_raw_allocator pinned = {pinned_alloc, pinned_free, NULL, NULL};
  lt_alloc_set_pinned_backend(&pinned);
}

extern "C" const char *lt_cuda_last_alloc_error(void) {
  return last_error[0] ? last_error : NULL;
}
