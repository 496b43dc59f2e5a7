// The CUDA device slot: device discovery and the raw allocator that the
// engine's caching allocator (engine/alloc) draws segments from. Kernels,
// cuBLAS and cuDNN come with the CUDA backend issue.
#include <cuda_runtime.h>

extern "C" {
#include "lt/alloc.h"
#include "lt/cuda.h"
}

static int device_count_cached = -1;

extern "C" bool lt_cuda_compiled(void) { return true; }

extern "C" int lt_cuda_device_count(void) {
  if (device_count_cached < 0) {
    int n = 0;
    // With no driver or no device this fails; lt then runs on the CPU only.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    device_count_cached = n;
  }
  return device_count_cached;
}

extern "C" bool lt_cuda_is_available(void) { return lt_cuda_device_count() > 0; }

extern "C" int lt_cuda_current_device(void) {
  int d = 0;
  if (lt_cuda_is_available() && cudaGetDevice(&d) != cudaSuccess) d = 0;
  return d;
}

extern "C" lt_status lt_cuda_set_device(int index) {
  int n = lt_cuda_device_count();
  if (index < 0 || index >= n)
    return lt_error(LT_ERR_DEVICE, "cuda.set_device: device %d out of range (%d device%s)", index, n,
                    n == 1 ? "" : "s");
  cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess)
    return lt_error(LT_ERR_DEVICE, "cuda.set_device: cudaSetDevice(%d): %s", index, cudaGetErrorString(e));
  return LT_OK;
}

extern "C" lt_status lt_cuda_synchronize(void) {
  if (!lt_cuda_is_available()) return LT_OK;
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    return lt_error(LT_ERR_DEVICE, "cuda.synchronize: cudaDeviceSynchronize: %s", cudaGetErrorString(e));
  return LT_OK;
}
