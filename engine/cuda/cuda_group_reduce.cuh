// Groups of threads that reduce one line together (a thread, a warp, a
// block), shared by the softmax and class-loss kernels: every member gets the
// same, bit-identical result, combined in an order fixed by the shape alone,
// so results repeat run to run without atomics.
#ifndef LT_CUDA_GROUP_REDUCE_CUH
#define LT_CUDA_GROUP_REDUCE_CUH

namespace cuda_group {

const unsigned FULL_MASK = 0xffffffffu;

// The maximum with NaN winning (as `v > max || isnan(v)` on the CPU).
__device__ inline double max_nan(double a, double b) { return (a > b || a != a) ? a : b; }

struct op_sum {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct op_max {
  __device__ double operator()(double a, double b) const { return max_nan(a, b); }
};

// Butterfly over the warp, then lane 0's value for everyone, so that every
// lane holds bit-identical results (max of +0 and -0 is order-dependent).
template <class Op> __device__ inline double warp_all(double v, Op op) {
  for (int m = 16; m > 0; m >>= 1) v = op(v, __shfl_xor_sync(FULL_MASK, v, m));
  return __shfl_sync(FULL_MASK, v, 0);
}

// ---- thread groups that cooperate on one line ----
// rank/count: this thread's share of the line; all(v, op): the line's
// combined value, the same in every thread of the group. Every thread of the
// group must call all() the same number of times.

struct thread_group {
  __device__ int rank() const { return 0; }
  __device__ int count() const { return 1; }
  template <class Op> __device__ double all(double v, Op) const { return v; }
};

struct warp_group {
  __device__ int rank() const { return (int)(threadIdx.x & 31); }
  __device__ int count() const { return 32; }
  template <class Op> __device__ double all(double v, Op op) const { return warp_all(v, op); }
};

// blockDim.x threads, a multiple of 32, at most 1024; sh holds 32 doubles.
struct block_group {
  double *sh;
  __device__ int rank() const { return (int)threadIdx.x; }
  __device__ int count() const { return (int)blockDim.x; }
  template <class Op> __device__ double all(double v, Op op) const {
    v = warp_all(v, op);
    __syncthreads(); // the previous call's readers are done with sh
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    // Every thread folds the warp totals in the same order: same result.
    double r = sh[0];
    const int warps = (int)(blockDim.x >> 5);
    for (int w = 1; w < warps; w++) r = op(r, sh[w]);
    return r;
  }
};

}  // namespace cuda_group

#endif
