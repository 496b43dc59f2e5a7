// softmax and log_softmax along the middle dim of a contiguous
// [outer, size, inner] tensor, and their gradients, matching
// engine/cpu/cpu_nn_softmax.c: the maximum is subtracted before
// exponentiating (NaN propagates through it), and every element's arithmetic
// and every sum runs in double, as on the CPU, so that float32 results agree
// with it to rounding. Each line (the `size` elements of one (outer, inner)
// pair) is reduced by one group of threads in one kernel: max, sum of exp,
// then the write, re-reading the line (cached) instead of storing exp.
//
// The group depends on the layout:
//   inner == 1, short rows:  one warp per row (shuffles only);
//   inner == 1, long rows:   one block per row (shuffles + shared memory);
//   inner > 1, many columns: one thread per (outer, inner) column walking
//                            size; neighbouring threads read neighbouring
//                            inner positions, so every step is coalesced;
//   inner > 1, few columns:  a 32 x 8 tile: 32 neighbouring columns (still
//                            coalesced) with 8 threads sharing each column's
//                            walk, joined in shared memory.
// Every reduction combines partial results in a fixed order that depends only
// on the launch shape, which depends only on the tensor shape: results are
// the same on every run (no atomics).
#include <math.h>

#include "cuda/cuda_group_reduce.cuh"
#include "cuda/cuda_nn_kernels.h"

#define SM_THREADS 256
#define SM_WARP_MAX_SIZE 1024   // rows up to this long get one warp
#define SM_TILE_Y 8             // threads sharing one column in the tile kernel
#define SM_MANY_COLUMNS 32768   // enough columns to fill the GPU one thread each
#define SM_TILE_MIN_SIZE 64     // shorter lines gain nothing from sharing
#define SM_MAX_BLOCKS (65535 * 8) // grid-stride loops cover the rest

namespace {

using namespace cuda_group;

// blockDim (32, Y): the threads with one threadIdx.x share a column; sh holds
// Y * 32 doubles.
struct tile_group {
  double *sh;
  __device__ int rank() const { return (int)threadIdx.y; }
  __device__ int count() const { return (int)blockDim.y; }
  template <class Op> __device__ double all(double v, Op op) const {
    __syncthreads();
    sh[threadIdx.y * 32 + threadIdx.x] = v;
    __syncthreads();
    double r = sh[threadIdx.x];
    for (int y = 1; y < (int)blockDim.y; y++) r = op(r, sh[y * 32 + threadIdx.x]);
    return r;
  }
};

// ---- one line ----
// Forward: a = x. Backward: a = go, b = y (the forward's output).
// n elements at stride apart; n is 0 for a tile thread past the last column
// (it still joins the group's reductions).

template <typename T, class G>
__device__ void softmax_line(const G &g, const T *x, T *out, int64_t n, int64_t stride,
                             bool want_log) {
  const int64_t r0 = g.rank(), step = g.count();
  double m = -INFINITY;
  for (int64_t k = r0; k < n; k += step) m = max_nan(m, (double)x[k * stride]);
  m = g.all(m, op_max());
  double s = 0.0;
  for (int64_t k = r0; k < n; k += step) s += exp((double)x[k * stride] - m);
  s = g.all(s, op_sum());
  if (want_log) {
    // A row of -inf has max -inf: x - max is NaN there, as in PyTorch.
    const double lse = m + log(s);
    for (int64_t k = r0; k < n; k += step) out[k * stride] = (T)((double)x[k * stride] - lse);
  } else {
    const double inv = 1.0 / s;
    for (int64_t k = r0; k < n; k += step)
      out[k * stride] = (T)(exp((double)x[k * stride] - m) * inv);
  }
}

// softmax:     gx = y (go - sum(go y))
// log_softmax: gx = go - exp(y) sum(go)
template <typename T, class G>
__device__ void softmax_backward_line(const G &g, const T *go, const T *y, T *gx, int64_t n,
                                      int64_t stride, bool want_log) {
  const int64_t r0 = g.rank(), step = g.count();
  double dot = 0.0;
  for (int64_t k = r0; k < n; k += step) {
    const double gv = (double)go[k * stride];
    dot += want_log ? gv : gv * (double)y[k * stride];
  }
  dot = g.all(dot, op_sum());
  for (int64_t k = r0; k < n; k += step) {
    const double gv = (double)go[k * stride], yv = (double)y[k * stride];
    gx[k * stride] = (T)(want_log ? gv - exp(yv) * dot : yv * (gv - dot));
  }
}

template <typename T, bool BACKWARD, class G>
__device__ inline void run_line(const G &g, const T *a, const T *b, T *out, int64_t n,
                                int64_t stride, bool want_log) {
  if (BACKWARD)
    softmax_backward_line<T>(g, a, b, out, n, stride, want_log);
  else
    softmax_line<T>(g, a, out, n, stride, want_log);
}

// ---- kernels ----

// inner == 1: warp w of the grid takes rows w, w + warps, ... (warp-uniform).
template <typename T, bool BACKWARD>
__global__ void softmax_warp_kernel(const T *a, const T *b, T *out, int64_t rows, int64_t size,
                                    bool want_log) {
  const int64_t per_block = blockDim.x >> 5;
  warp_group g;
  for (int64_t r = (int64_t)blockIdx.x * per_block + (threadIdx.x >> 5); r < rows;
       r += (int64_t)gridDim.x * per_block) {
    const int64_t base = r * size;
    run_line<T, BACKWARD>(g, a + base, BACKWARD ? b + base : b, out + base, size, 1, want_log);
  }
}

// inner == 1, long rows: block-uniform loop over rows.
template <typename T, bool BACKWARD>
__global__ void softmax_block_kernel(const T *a, const T *b, T *out, int64_t rows, int64_t size,
                                     bool want_log) {
  __shared__ double sh[32];
  block_group g = {sh};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * size;
    run_line<T, BACKWARD>(g, a + base, BACKWARD ? b + base : b, out + base, size, 1, want_log);
  }
}

// inner > 1: one thread per (outer, inner) column.
template <typename T, bool BACKWARD>
__global__ void softmax_column_kernel(const T *a, const T *b, T *out, int64_t outer,
                                      int64_t size, int64_t inner, bool want_log) {
  thread_group g;
  const int64_t cols = outer * inner;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
       c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t base = (c / inner) * size * inner + c % inner;
    run_line<T, BACKWARD>(g, a + base, BACKWARD ? b + base : b, out + base, size, inner,
                          want_log);
  }
}

// inner > 1, few columns: block t covers columns [32 j, 32 j + 32) of outer
// slice o (t = o * tiles + j); the loop is block-uniform.
template <typename T, bool BACKWARD>
__global__ void softmax_tile_kernel(const T *a, const T *b, T *out, int64_t outer, int64_t size,
                                    int64_t inner, bool want_log) {
  __shared__ double sh[SM_TILE_Y * 32];
  tile_group g = {sh};
  const int64_t tiles = (inner + 31) / 32;
  for (int64_t t = blockIdx.x; t < outer * tiles; t += gridDim.x) {
    const int64_t i = (t % tiles) * 32 + threadIdx.x;
    const bool active = i < inner;
    const int64_t base = (t / tiles) * size * inner + (active ? i : 0);
    run_line<T, BACKWARD>(g, a + base, BACKWARD ? b + base : b, out + base, active ? size : 0,
                          inner, want_log);
  }
}

unsigned grid_for(int64_t units, int64_t per_block) {
  int64_t n = (units + per_block - 1) / per_block;
  if (n < 1) n = 1;
  if (n > SM_MAX_BLOCKS) n = SM_MAX_BLOCKS;
  return (unsigned)n;
}

template <typename T, bool BACKWARD>
lt_status softmax_launch(const char *op, T *out, const T *a, const T *b, lt_nn_dim_geom g,
                         bool want_log) {
  const cudaStream_t stream = cuda_stream();
  const char *kernel;
  if (g.inner == 1) {
    if (g.size <= SM_WARP_MAX_SIZE) {
      kernel = "softmax_warp_kernel";
      softmax_warp_kernel<T, BACKWARD><<<grid_for(g.outer, SM_THREADS / 32), SM_THREADS, 0,
                                         stream>>>(a, b, out, g.outer, g.size, want_log);
    } else {
      kernel = "softmax_block_kernel";
      softmax_block_kernel<T, BACKWARD><<<grid_for(g.outer, 1), SM_THREADS, 0, stream>>>(
          a, b, out, g.outer, g.size, want_log);
    }
  } else if (g.outer * g.inner >= SM_MANY_COLUMNS || g.size < SM_TILE_MIN_SIZE) {
    kernel = "softmax_column_kernel";
    softmax_column_kernel<T, BACKWARD><<<grid_for(g.outer * g.inner, SM_THREADS), SM_THREADS, 0,
                                         stream>>>(a, b, out, g.outer, g.size, g.inner, want_log);
  } else {
    kernel = "softmax_tile_kernel";
    const int64_t tiles = g.outer * ((g.inner + 31) / 32);
    softmax_tile_kernel<T, BACKWARD><<<grid_for(tiles, 1), dim3(32, SM_TILE_Y), 0,
                                       stream>>>(a, b, out, g.outer, g.size, g.inner, want_log);
  }
  return cuda_check_launch(op, kernel);
}

} // namespace

lt_status cuda_nn_softmax(lt_tensor *out, const lt_tensor *x, lt_nn_dim_geom g, bool log) {
  cuda_device_guard guard(out->storage->device);
  const char *op = log ? "log_softmax" : "softmax";
  if (g.outer <= 0 || g.size <= 0 || g.inner <= 0) return LT_OK; // no elements
  if (x->dtype == LT_FLOAT64)
    return softmax_launch<double, false>(op, (double *)cuda_bytes(out),
                                         (const double *)cuda_bytes(x), NULL, g, log);
  return softmax_launch<float, false>(op, (float *)cuda_bytes(out), (const float *)cuda_bytes(x),
                                      NULL, g, log);
}

lt_status cuda_nn_softmax_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *y,
                                   lt_nn_dim_geom g, bool log) {
  cuda_device_guard guard(gx->storage->device);
  const char *op = log ? "log_softmax_backward" : "softmax_backward";
  if (g.outer <= 0 || g.size <= 0 || g.inner <= 0) return LT_OK;
  if (y->dtype == LT_FLOAT64)
    return softmax_launch<double, true>(op, (double *)cuda_bytes(gx),
                                        (const double *)cuda_bytes(go),
                                        (const double *)cuda_bytes(y), g, log);
  return softmax_launch<float, true>(op, (float *)cuda_bytes(gx), (const float *)cuda_bytes(go),
                                     (const float *)cuda_bytes(y), g, log);
}
