// The CUDA device slot: the runtime's CUDA hooks (core/cuda_hooks.h), device
// discovery, and starting the slot (the raw allocator of cuda_memory.cu and
// the kernel tables) the first time a device is found.
#include <pthread.h>

#include "cuda/cuda_kernels.h"

static int device_count_cached = -1;

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

// Installed only when a device exists: without one, CUDA tensors keep failing
// with "no kernels for device" / "no memory allocator" instead of calling
// into a runtime that has nothing to run on.
static void start_slot(void) {
  static const lt_device_kernels kernels = {&cuda_backend, &cuda_nn_backend, &cuda_optim_backend};
  lt_cuda_install_allocator();
  lt_device_kernels_register(LT_DEVICE_CUDA, &kernels);
  lt_storage_set_pending_wait(cuda_wait_pending_copy);
}

static int rt_device_count(void) {
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

static int rt_current_device(void) {
  int d = 0;
  if (lt_cuda_is_available() && cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError(); // not left for the next op's launch check to report
    d = 0;
  }
  return d;
}

static lt_status rt_set_device(int index) {
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

static lt_status rt_synchronize(void) {
  if (!lt_cuda_is_available()) return LT_OK;
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); // reported here, not again by the next launch check
    return lt_error(LT_ERR_DEVICE, "cuda.synchronize: cudaDeviceSynchronize: %s", cudaGetErrorString(e));
  }
  return LT_OK;
}

static lt_cuda_hooks runtime_hooks;

static void fill_hooks(void) {
  lt_cuda_hooks *h = &runtime_hooks;
  h->name = "cuda";
  h->compiled = true;
  h->device_count = rt_device_count;
  h->current_device = rt_current_device;
  h->set_device = rt_set_device;
  h->synchronize = rt_synchronize;
  h->last_alloc_error = cuda_last_alloc_error;
  cuda_stream_hooks(h);
}

extern "C" const lt_cuda_hooks *lt_cuda_runtime_hooks(void) {
  static pthread_once_t filled = PTHREAD_ONCE_INIT;
  pthread_once(&filled, fill_hooks);
  return &runtime_hooks;
}

// A host that compiles these sources into itself without the CUDA build (the
// emulator, tests/cudaemu) has core's no-CUDA hooks by default: they register
// when the program starts. (With the CUDA build they are the default anyway.)
__attribute__((constructor)) static void register_runtime_hooks(void) {
  lt_cuda_set_hooks(lt_cuda_runtime_hooks());
}
