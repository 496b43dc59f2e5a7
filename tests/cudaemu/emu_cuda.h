// The device side of the CUDA emulator (tests only, never shipped): forced
// into every engine/cuda/*.cu when it is compiled by the host C++ compiler for
// `lt_cudaemu` (tests/cudaemu/README.md). It gives kernels what nvcc would:
// threadIdx and friends, __syncthreads, warp shuffles, the _rn intrinsics,
// shared memory, and the <<<grid, block, shmem, stream>>> launch, which
// translate.cmake rewrites as `kernel | ::emu::cfg(__FILE__, __LINE__, grid,
// block, shmem, stream)(args...)`: the launch below runs every thread of the
// grid on the CPU before it returns (emu_runtime.cc), one block at a time,
// each thread a fiber that yields at barriers. The CUDA headers themselves
// are the toolkit's, so types and host functions (half conversions, dim3)
// are the real ones.
#ifndef LT_EMU_CUDA_H
#define LT_EMU_CUDA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>

// Without nvcc the toolkit's headers define __shared__ as nothing, which
// would give every thread its own copy. Blocks run one at a time, so a
// function-local static is exactly one block's shared memory. All of them sit
// in one section, which the runtime fills with all one bits before a block
// (emu_runtime.cc: poison_shared), as shared memory holds garbage on a GPU.
#undef __shared__
#define __shared__ static __attribute__((section("emu_shared")))

namespace emu {

// The coordinates of the thread running now; the scheduler sets them before
// it resumes a thread.
struct coords_t {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
};
extern coords_t coords;

void syncthreads(const char *file, int line);
// Every lane of the calling warp puts in its bits and gets src_lane's back;
// mask must name every lane of the warp (lt uses full masks only).
uint64_t warp_exchange(unsigned mask, uint64_t bits, int src_lane, const char *what);
int lane_id();

// One kernel launch: checked when it is made (configuration errors are kept
// for cudaGetLastError, as the runtime does, and nothing runs), then queued
// on its stream and run to completion on the CPU when the stream's work is
// needed (emu_runtime.cc). body runs one thread (the coordinates are in
// coords); run_kernel owns it.
struct kernel_body {
  virtual void run() const = 0;
  virtual ~kernel_body() {}
};
void run_kernel(const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                cudaStream_t stream, kernel_body *body);
// Whether p points into memory a kernel on the current device may touch
// (its device memory or pinned host memory); prints what it is not.
bool kernel_may_touch(const void *p, const char *file, int line, int arg);

// Pointer arguments are checked at the launch; a pointer inside a struct
// argument (a geometry) is not seen.
template <class A> inline bool check_arg(const A &a, const char *file, int line, int arg) {
  if constexpr (std::is_pointer<A>::value)
    return !a || kernel_may_touch((const void *)a, file, line, arg);
  else
    return true;
}
template <class... A> struct launch {
  const char *file;
  int line;
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  std::tuple<A...> args;
};

struct cfg {
  const char *file;
  int line;
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  cfg(const char *f, int l, dim3 g, dim3 b, size_t s = 0, cudaStream_t st = 0)
      : file(f), line(l), grid(g), block(b), shmem(s), stream(st) {}
  // The kernel's arguments, copied as a launch copies them.
  template <class... A> launch<typename std::decay<A>::type...> operator()(A &&...a) const {
    return launch<typename std::decay<A>::type...>{
        file, line, grid, block, shmem, stream,
        std::tuple<typename std::decay<A>::type...>(static_cast<A &&>(a)...)};
  }
};

// `kernel | cfg(...)(args...)`: found by argument-dependent lookup on launch.
template <class... P, class... A> void operator|(void (*kernel)(P...), const launch<A...> &l) {
  // The arguments are copied with the launch, as CUDA copies them.
  struct body_t : kernel_body {
    void (*kernel)(P...);
    std::tuple<A...> args;
    body_t(void (*k)(P...), const std::tuple<A...> &a) : kernel(k), args(a) {}
    void run() const override {
      std::apply([this](const A &...a) { kernel(a...); }, args);
    }
  };
  bool ok = true;
  std::apply(
      [&l, &ok](const A &...a) {
        int arg = 0;
        ((ok = check_arg(a, l.file, l.line, ++arg) && ok), ...);
      },
      l.args);
  if (!ok) return;
  run_kernel(l.file, l.line, l.grid, l.block, l.shmem, l.stream, new body_t(kernel, l.args));
}

template <class T> inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  uint64_t b = 0;
  memcpy(&b, &v, sizeof v);
  return b;
}
template <class T> inline T from_bits(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof v);
  return v;
}

}  // namespace emu

#define threadIdx (::emu::coords.thread)
#define blockIdx (::emu::coords.block)
#define blockDim (::emu::coords.block_dim)
#define gridDim (::emu::coords.grid_dim)
#define warpSize 32

// A macro, so that the barrier knows its place: threads of one block waiting
// at different __syncthreads is a bug the emulator reports.
#define __syncthreads() ::emu::syncthreads(__FILE__, __LINE__)

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = emu::lane_id();
  const int s = (lane & ~(width - 1)) + (src & (width - 1));
  return emu::from_bits<T>(emu::warp_exchange(mask, emu::to_bits(v), s, "__shfl_sync"));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = emu::lane_id();
  int s = lane ^ lane_mask;
  if ((s & ~(width - 1)) != (lane & ~(width - 1))) s = lane; // outside the segment: own value
  return emu::from_bits<T>(emu::warp_exchange(mask, emu::to_bits(v), s, "__shfl_xor_sync"));
}

// Round-to-nearest arithmetic that nvcc never contracts into an FMA: on the
// host every float operation already rounds to nearest, and the emulator is
// built without FMA contraction (-ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return sqrt(a); }
inline unsigned __float_as_uint(float f) { return emu::from_bits<unsigned>(emu::to_bits(f)); }

#endif
