// The CUDA device slot: device discovery, and starting the slot (the raw
// allocator of cuda_memory.cu and the kernel table of cuda_backend.cu) the
// first time a device is found.
#include <pthread.h>

#include "cuda/cuda_kernels.h"

static int device_count_cached = -1;

extern "C" bool lt_cuda_compiled(void) { return true; }

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

// Installed only when a device exists: without one, CUDA tensors keep failing
// with "no kernels for device" / "no memory allocator" instead of calling
// into a runtime that has nothing to run on.
static void start_slot(void) {
  lt_cuda_install_allocator();
  lt_cuda_install_backend();
  lt_cuda_install_nn_backend();
  lt_cuda_install_optim_backend();
  lt_storage_set_pending_wait(cuda_wait_pending_copy);
}

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
  if (device_count_cached > 0) pthread_once(&start_once, start_slot);
  return device_count_cached;
}

extern "C" bool lt_cuda_is_available(void) { return lt_cuda_device_count() > 0; }

extern "C" int lt_cuda_current_device(void) {
  int d = 0;
  if (lt_cuda_is_available() && cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError(); // not left for the next op's launch check to report
    d = 0;
  }
  return d;
}

extern "C" lt_status lt_cuda_set_device(int index) {
  int n = lt_cuda_device_count();
  if (index < 0 || index >= n)
    return lt_error(LT_ERR_DEVICE, "cuda.set_device: device %d out of range (%d device%s)", index, n,
                    n == 1 ? "" : "s");
  cudaError_t e = cudaSetDevice(index);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // reported here, not again by the next launch check
    return lt_error(LT_ERR_DEVICE, "cuda.set_device: cudaSetDevice(%d): %s", index, cudaGetErrorString(e));
  }
  return LT_OK;
}

extern "C" lt_status lt_cuda_synchronize(void) {
  if (!lt_cuda_is_available()) return LT_OK;
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // reported here, not again by the next launch check
    return lt_error(LT_ERR_DEVICE, "cuda.synchronize: cudaDeviceSynchronize: %s", cudaGetErrorString(e));
  }
  return LT_OK;
}
