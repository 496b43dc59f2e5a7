// Self-test of the emulator's runtime and scheduler (emu_runtime.cc,
// emu_cuda.h): written as CUDA, translated like engine/cuda/*.cu, and run on
// the CPU. The emulator is what lt's kernels are judged by, so it must itself
// run barriers and shuffles as a GPU does and refuse what a GPU refuses.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>

static int failures = 0;
#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);   \
      failures++;                                                        \
    }                                                                    \
  } while (0)

// A block-wide tree sum through shared memory: wrong without its barriers.
__global__ void block_sum(const int *in, int *out) {
  __shared__ int sh[256];
  sh[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

// A warp butterfly: every lane ends with the warp's sum.
__global__ void warp_sum(const double *in, double *out) {
  double v = in[threadIdx.x];
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  out[threadIdx.x] = v + __shfl_sync(0xffffffffu, v, 3) * 0.0;
}

// 2-D blocks and grids: every thread writes its own coordinates.
__global__ void coords(int *out) {
  const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * (gridDim.x * blockDim.x) + x] = (int)(y * 1000 + x);
}

// Shared memory the block did not write holds garbage (all one bits here),
// not what an earlier launch left there.
__global__ void shared_probe(int write, int *out) {
  __shared__ int sh[1];
  if (write && threadIdx.x == 0) sh[0] = 7;
  __syncthreads();
  if (threadIdx.x == 0) out[0] = sh[0];
}

// A barrier half the block never reaches: a hang on a GPU.
__global__ void divergent_barrier(int *out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    out[threadIdx.x] = 2;
    // these threads wait at a second barrier the others never reach
    __syncthreads();
    __syncthreads();
  }
}

// A full-mask shuffle in a block of 16 threads: undefined on a GPU.
__global__ void short_warp_shuffle(double *out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0, 1);
}

// The host reaches device memory only through the runtime, as on a GPU (the
// emulator takes the host's access away): put copies in and waits, get
// copies one element out.
template <class T> static void put(T *dev, const T *host, size_t n) {
  CHECK(cudaMemcpyAsync(dev, host, n * sizeof(T), cudaMemcpyHostToDevice, 0) == cudaSuccess);
  CHECK(cudaStreamSynchronize(0) == cudaSuccess);
}
template <class T> static T get(const T *dev) {
  T v;
  CHECK(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, 0) == cudaSuccess);
  return v;
}

int main() {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n >= 2);

  int *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc((void **)&in, 4 * 256 * sizeof(int)) == cudaSuccess);
  CHECK(cudaMalloc((void **)&out, 4096 * sizeof(int)) == cudaSuccess);
  int host[4 * 256];
  for (int i = 0; i < 4 * 256; i++) host[i] = i;
  put(in, host, 4 * 256);
  block_sum<<<4, 256>>>(in, out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess); // queued work runs when waited for
  for (int b = 0; b < 4; b++) {
    const int lo = b * 256, hi = lo + 255;
    CHECK(get(out + b) == (lo + hi) * 256 / 2);
  }

  double *din = nullptr, *dout = nullptr;
  CHECK(cudaMalloc((void **)&din, 64 * sizeof(double)) == cudaSuccess);
  CHECK(cudaMalloc((void **)&dout, 64 * sizeof(double)) == cudaSuccess);
  double dhost[64];
  for (int i = 0; i < 64; i++) dhost[i] = i;
  put(din, dhost, 64);
  warp_sum<<<1, 64>>>(din, dout);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  for (int i = 0; i < 64; i++) CHECK(get(dout + i) == (i < 32 ? 496.0 : 1520.0));

  coords<<<dim3(3, 2), dim3(8, 4)>>>(out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(get(out) == 0 && get(out + 23) == 23 && get(out + 24) == 1000 &&
        get(out + 7 * 24 + 23) == 7023);

  shared_probe<<<1, 32>>>(1, out);
  CHECK(get(out) == 7);
  shared_probe<<<1, 32>>>(0, out);
  CHECK(get(out) == -1);

  // The host cannot read device memory through a pointer, as on a GPU: a
  // child process that tries dies (a SIGSEGV, or the sanitizer's exit).
  if (!getenv("LT_EMU_HOST_ACCESS")) {
    const pid_t child = fork();
    if (child == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 2); // the sanitizer's report of the fault is expected
      volatile int v = *(volatile int *)in;
      (void)v;
      _exit(0);
    }
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }

  // What a GPU refuses or cannot finish, as errors the caller can see.
  // (A kernel that cannot finish fails when its stream is waited for.)
  divergent_barrier<<<1, 32>>>(out);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  short_warp_shuffle<<<1, 16>>>(dout);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  block_sum<<<1, 2048>>>(in, out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  block_sum<<<0, 256>>>(in, out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  block_sum<<<1, 256>>>(host, out);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);

  // A stream and memory of cuda:1 while cuda:0 is current.
  cudaStream_t s1;
  CHECK(cudaSetDevice(1) == cudaSuccess);
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
  int *in1 = nullptr;
  CHECK(cudaMalloc((void **)&in1, 256 * sizeof(int)) == cudaSuccess);
  CHECK(cudaSetDevice(0) == cudaSuccess);
  block_sum<<<1, 256, 0, s1>>>(in, out);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  block_sum<<<1, 256>>>(in1, out);
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  cudaEvent_t e0;
  CHECK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming) == cudaSuccess);
  CHECK(cudaEventRecord(e0, s1) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaSuccess); // cleared by the read
  CHECK(cudaSetDevice(7) == cudaErrorInvalidDevice);
  (void)cudaGetLastError();

  // Streams run their work when it is needed, so an order the program did
  // not ask for is not there by luck: a kernel on stream b that reads what
  // stream a writes sees it only after b waits for a's event.
  if (!getenv("LT_EMU_STREAMS")) {
    cudaStream_t a, b;
    cudaEvent_t written;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming) == cudaSuccess);
    int ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1;
    put(in, ones, 256);
    CHECK(cudaMemsetAsync(in, 0, 256 * sizeof(int), a) == cudaSuccess); // a: zeros
    block_sum<<<1, 256, 0, b>>>(in, out);                                // b: no wait
    CHECK(cudaStreamSynchronize(b) == cudaSuccess);
    CHECK(get(out) == 256); // ran before a's memset: the missing wait shows
    CHECK(cudaEventQuery(written) == cudaSuccess); // never recorded
    CHECK(cudaMemsetAsync(in, 0, 256 * sizeof(int), a) == cudaSuccess);
    CHECK(cudaEventRecord(written, a) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(b, written, 0) == cudaSuccess);
    put(in, ones, 256); // undone by a's queued memset
    block_sum<<<1, 256, 0, b>>>(in, out);
    CHECK(cudaStreamQuery(b) == cudaErrorNotReady); // queued; a query makes it run
    CHECK(cudaStreamQuery(b) == cudaSuccess);
    CHECK(get(out) == 0);
    // A copy from pinned memory reads it when it runs, not when it is queued.
    int *pin = nullptr;
    CHECK(cudaHostAlloc((void **)&pin, 256 * sizeof(int), 0) == cudaSuccess);
    for (int i = 0; i < 256; i++) pin[i] = 2;
    CHECK(cudaMemcpyAsync(in, pin, 256 * sizeof(int), cudaMemcpyHostToDevice, a) == cudaSuccess);
    for (int i = 0; i < 256; i++) pin[i] = 3; // too early: the copy is still queued
    CHECK(cudaStreamSynchronize(a) == cudaSuccess);
    CHECK(get(in) == 3);
    // From pageable memory the bytes are taken at the call.
    int page[256];
    for (int i = 0; i < 256; i++) page[i] = 4;
    CHECK(cudaMemcpyAsync(in, page, sizeof page, cudaMemcpyHostToDevice, a) == cudaSuccess);
    page[0] = 5;
    CHECK(cudaStreamSynchronize(a) == cudaSuccess);
    CHECK(get(in) == 4);
    CHECK(cudaFreeHost(pin) == cudaSuccess);
    CHECK(cudaEventDestroy(written) == cudaSuccess);
    CHECK(cudaStreamDestroy(a) == cudaSuccess && cudaStreamDestroy(b) == cudaSuccess);
  }

  // Memory limits and accounting (LT_EMU_CUDA_MEMORY, default 4 GiB).
  size_t free0 = 0, total = 0, free1 = 0;
  CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess);
  void *big = nullptr;
  CHECK(cudaMalloc(&big, total) == cudaErrorMemoryAllocation && big == nullptr);
  (void)cudaGetLastError();
  CHECK(cudaMalloc(&big, 1 << 20) == cudaSuccess);
  CHECK(cudaMemGetInfo(&free1, &total) == cudaSuccess && free0 - free1 == (1u << 20));
  CHECK(cudaFree(big) == cudaSuccess);
  CHECK(cudaFree(host) == cudaErrorInvalidValue);
  (void)cudaGetLastError();

  CHECK(cudaEventDestroy(e0) == cudaSuccess);
  CHECK(cudaFree(in) == cudaSuccess && cudaFree(out) == cudaSuccess);
  CHECK(cudaFree(din) == cudaSuccess && cudaFree(dout) == cudaSuccess);
  CHECK(cudaSetDevice(1) == cudaSuccess && cudaFree(in1) == cudaSuccess);
  CHECK(cudaStreamDestroy(s1) == cudaSuccess);
  if (failures) return 1;
  printf("emu_selftest: all checks passed\n");
  return 0;
}
