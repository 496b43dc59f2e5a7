// For the emulator's reference libraries (emu_cublas.cc, emu_cudnn.cc): how
// one library call does its device work in the emulated runtime's terms.
#ifndef LT_EMU_LIBRARY_H
#define LT_EMU_LIBRARY_H

#include <cuda_runtime.h>

// emu_runtime.cc's: the work queued on the call's stream runs first (the
// library reads its inputs now), and device memory, which the host cannot
// touch otherwise, is open until the end. Weak: the self-tests link without
// a runtime, and then device memory is plain host memory.
extern "C" void emu_library_begin(cudaStream_t stream) __attribute__((weak));
extern "C" void emu_library_end(void) __attribute__((weak));

// The device work of one call, for the scope's lifetime.
struct device_work {
  explicit device_work(cudaStream_t stream) {
    if (emu_library_begin) emu_library_begin(stream);
  }
  ~device_work() {
    if (emu_library_end) emu_library_end();
  }
  device_work(const device_work &) = delete;
  device_work &operator=(const device_work &) = delete;
};

#endif
