// layer_norm over the rows of a contiguous x [M, D], matching
// engine/cpu/cpu_nn_layer_norm.c: the mean and the biased variance are two
// passes over the row (the variance sums squared deviations from the mean,
// not E[x^2] - mean^2), rstd = 1 / sqrt(var + eps), and every sum and every
// element's arithmetic is in double, as on the CPU. mean and rstd are stored
// in x's dtype and backward reads them back as stored, as the CPU does.
//
// Forward and the input gradient: one group per row (a warp for rows up to
// LN_WARP_MAX_D, a block otherwise), threads striding along the row, so
// loads are coalesced. The weight and bias gradients are column sums over
// the rows: a first kernel sums 32 columns x a fixed chunk of rows per block
// (coalesced along the row, 8 thread rows joined in shared memory) into a
// double workspace, a second adds each column's chunks in order. The chunks
// depend only on M, so the sums are the same on every run (no atomics).
#include <math.h>

#include "cuda/cuda_nn_kernels.h"

#define LN_THREADS 256
#define LN_WARP_MAX_D 1024     // rows up to this long get one warp
#define LN_COL_Y 8             // thread rows per block of the column sums
#define LN_ROWS_PER_CHUNK 64   // at least this many rows per chunk ...
#define LN_MAX_CHUNKS 256      // ... and at most this many chunks
#define LN_MAX_BLOCKS (65535 * 8)

namespace {

const unsigned FULL_MASK = 0xffffffffu;

template <typename T> struct ln_ptrs {
  const T *x, *w, *b;          // w, b: [D] or NULL
  T *out, *mean_out, *rstd_out; // forward
  const T *go, *mean, *rstd;   // backward
  T *gx;
  int64_t m, d;
  double eps;
};

__device__ inline double warp_sum(double v) {
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(FULL_MASK, v, k);
  return __shfl_sync(FULL_MASK, v, 0); // every lane bit-identical
}

// A group of threads reducing one row: rank/count split the row, sum()
// gives every member the same total.
struct warp_group {
  __device__ int rank() const { return (int)(threadIdx.x & 31); }
  __device__ int count() const { return 32; }
  __device__ double sum(double v) const { return warp_sum(v); }
};

// blockDim.x a multiple of 32; sh holds 32 doubles.
struct block_group {
  double *sh;
  __device__ int rank() const { return (int)threadIdx.x; }
  __device__ int count() const { return (int)blockDim.x; }
  __device__ double sum(double v) const {
    v = warp_sum(v);
    __syncthreads(); // the previous call's readers are done with sh
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = sh[0];
    const int warps = (int)(blockDim.x >> 5);
    for (int w = 1; w < warps; w++) r += sh[w];
    return r;
  }
};

// ---- forward ----

// D == 0 gives mean and rstd NaN, as on the CPU (no output elements).
template <typename T, class G> __device__ void ln_forward_row(const G &g, const ln_ptrs<T> &p,
                                                              int64_t r) {
  const int64_t d = p.d, r0 = g.rank(), step = g.count();
  const T *x = p.x + r * d;
  double s = 0.0;
  for (int64_t k = r0; k < d; k += step) s += (double)x[k];
  s = g.sum(s);
  const double mean = d > 0 ? s / (double)d : nan("");
  double sq = 0.0;
  for (int64_t k = r0; k < d; k += step) {
    const double v = (double)x[k] - mean;
    sq += v * v;
  }
  sq = g.sum(sq);
  const double rstd = 1.0 / sqrt((d > 0 ? sq / (double)d : nan("")) + p.eps);
  if (g.rank() == 0) {
    p.mean_out[r] = (T)mean;
    p.rstd_out[r] = (T)rstd;
  }
  T *out = p.out + r * d;
  for (int64_t k = r0; k < d; k += step) {
    double y = ((double)x[k] - mean) * rstd;
    if (p.w) y *= (double)p.w[k];
    if (p.b) y += (double)p.b[k];
    out[k] = (T)y;
  }
}

// gx = rstd (g - mean(g) - xhat mean(g xhat)) with g = go w.
template <typename T, class G> __device__ void ln_input_grad_row(const G &g, const ln_ptrs<T> &p,
                                                                 int64_t r) {
  const int64_t d = p.d, r0 = g.rank(), step = g.count();
  const T *x = p.x + r * d, *go = p.go + r * d;
  const double mean = (double)p.mean[r], rstd = (double)p.rstd[r];
  double sum_g = 0.0, sum_g_xhat = 0.0;
  for (int64_t k = r0; k < d; k += step) {
    const double gv = (double)go[k] * (p.w ? (double)p.w[k] : 1.0);
    sum_g += gv;
    sum_g_xhat += gv * ((double)x[k] - mean) * rstd;
  }
  sum_g = g.sum(sum_g);
  sum_g_xhat = g.sum(sum_g_xhat);
  const double mean_g = sum_g / (double)d, mean_g_xhat = sum_g_xhat / (double)d;
  T *gx = p.gx + r * d;
  for (int64_t k = r0; k < d; k += step) {
    const double gv = (double)go[k] * (p.w ? (double)p.w[k] : 1.0);
    const double xhat = ((double)x[k] - mean) * rstd;
    gx[k] = (T)(rstd * (gv - mean_g - xhat * mean_g_xhat));
  }
}

template <typename T, bool BACKWARD, class G>
__device__ inline void ln_row(const G &g, const ln_ptrs<T> &p, int64_t r) {
  if (BACKWARD)
    ln_input_grad_row<T>(g, p, r);
  else
    ln_forward_row<T>(g, p, r);
}

// Warp-uniform loop over rows.
template <typename T, bool BACKWARD> __global__ void ln_warp_kernel(ln_ptrs<T> p) {
  warp_group g;
  const int64_t per_block = blockDim.x >> 5;
  for (int64_t r = (int64_t)blockIdx.x * per_block + (threadIdx.x >> 5); r < p.m;
       r += (int64_t)gridDim.x * per_block)
    ln_row<T, BACKWARD>(g, p, r);
}

template <typename T, bool BACKWARD> __global__ void ln_block_kernel(ln_ptrs<T> p) {
  __shared__ double sh[32];
  block_group g = {sh};
  for (int64_t r = blockIdx.x; r < p.m; r += gridDim.x) ln_row<T, BACKWARD>(g, p, r);
}

// ---- weight and bias gradients ----

// Block (cx, chunk): columns k = 32 cx + threadIdx.x, rows [chunk rows,
// (chunk + 1) rows); thread row y takes rows y, y + LN_COL_Y, ... of the
// chunk. part_w / part_b [chunks, D] (either may be NULL).
template <typename T>
__global__ void ln_param_partial_kernel(ln_ptrs<T> p, int64_t rows, double *part_w,
                                        double *part_b) {
  __shared__ double sw[LN_COL_Y][32];
  __shared__ double sb[LN_COL_Y][32];
  const int64_t k = (int64_t)blockIdx.x * 32 + threadIdx.x;
  const int64_t r0 = (int64_t)blockIdx.y * rows;
  const int64_t r1 = r0 + rows < p.m ? r0 + rows : p.m;
  double gw = 0.0, gb = 0.0;
  if (k < p.d) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += LN_COL_Y) {
      const double mean = (double)p.mean[r], rstd = (double)p.rstd[r];
      const double gv = (double)p.go[r * p.d + k];
      gw += gv * ((double)p.x[r * p.d + k] - mean) * rstd;
      gb += gv;
    }
  }
  sw[threadIdx.y][threadIdx.x] = gw;
  sb[threadIdx.y][threadIdx.x] = gb;
  __syncthreads();
  if (threadIdx.y == 0 && k < p.d) {
    for (int y = 1; y < LN_COL_Y; y++) {
      gw += sw[y][threadIdx.x];
      gb += sb[y][threadIdx.x];
    }
    if (part_w) part_w[blockIdx.y * p.d + k] = gw;
    if (part_b) part_b[blockIdx.y * p.d + k] = gb;
  }
}

// One thread per column: its chunks in order. chunks == 0 (M == 0) gives
// zeros, the sum over no rows.
template <typename T>
__global__ void ln_param_final_kernel(const double *part_w, const double *part_b, int64_t chunks,
                                      int64_t d, T *gw, T *gb) {
  for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < d;
       k += (int64_t)gridDim.x * blockDim.x) {
    double sw = 0.0, sb = 0.0;
    for (int64_t c = 0; c < chunks; c++) {
      if (gw) sw += part_w[c * d + k];
      if (gb) sb += part_b[c * d + k];
    }
    if (gw) gw[k] = (T)sw;
    if (gb) gb[k] = (T)sb;
  }
}

unsigned grid_for(int64_t units, int64_t per_block) {
  int64_t n = (units + per_block - 1) / per_block;
  if (n < 1) n = 1;
  if (n > LN_MAX_BLOCKS) n = LN_MAX_BLOCKS;
  return (unsigned)n;
}

template <typename T, bool BACKWARD> lt_status ln_rows_launch(const char *op, const ln_ptrs<T> &p) {
  const cudaStream_t stream = cuda_stream();
  if (p.d <= LN_WARP_MAX_D) {
    ln_warp_kernel<T, BACKWARD><<<grid_for(p.m, LN_THREADS / 32), LN_THREADS, 0, stream>>>(p);
    return cuda_check_launch(op, "ln_warp_kernel");
  }
  ln_block_kernel<T, BACKWARD><<<grid_for(p.m, 1), LN_THREADS, 0, stream>>>(p);
  return cuda_check_launch(op, "ln_block_kernel");
}

template <typename T>
lt_status ln_forward(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd, const lt_tensor *x,
                     const lt_tensor *w, const lt_tensor *b, double eps) {
  ln_ptrs<T> p = {};
  p.x = (const T *)cuda_bytes(x);
  p.w = w ? (const T *)cuda_bytes(w) : NULL;
  p.b = b ? (const T *)cuda_bytes(b) : NULL;
  p.out = (T *)cuda_bytes(out);
  p.mean_out = (T *)cuda_bytes(mean);
  p.rstd_out = (T *)cuda_bytes(rstd);
  p.m = x->shape[0];
  p.d = x->shape[1];
  p.eps = eps;
  if (p.m == 0) return LT_OK; // D == 0 still writes NaN statistics per row
  return ln_rows_launch<T, false>("layer_norm", p);
}

template <typename T>
lt_status ln_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go,
                      const lt_tensor *x, const lt_tensor *mean, const lt_tensor *rstd,
                      const lt_tensor *w) {
  const cudaStream_t stream = cuda_stream();
  const char *op = "layer_norm_backward";
  ln_ptrs<T> p = {};
  p.x = (const T *)cuda_bytes(x);
  p.w = w ? (const T *)cuda_bytes(w) : NULL;
  p.go = (const T *)cuda_bytes(go);
  p.mean = (const T *)cuda_bytes(mean);
  p.rstd = (const T *)cuda_bytes(rstd);
  p.gx = gx ? (T *)cuda_bytes(gx) : NULL;
  p.m = x->shape[0];
  p.d = x->shape[1];
  if (gx && p.m > 0 && p.d > 0) {
    const lt_status st = ln_rows_launch<T, true>(op, p);
    if (st != LT_OK) return st;
  }
  if ((!gw && !gb) || p.d == 0) return LT_OK;

  // Chunks of rows: a function of M alone, so the order of the sums is too.
  int64_t chunks = (p.m + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
  if (chunks > LN_MAX_CHUNKS) chunks = LN_MAX_CHUNKS;
  const int64_t rows = chunks > 0 ? (p.m + chunks - 1) / chunks : 0;
  if (rows > 0) chunks = (p.m + rows - 1) / rows;
  cuda_workspace ws;
  double *part_w = NULL, *part_b = NULL;
  if (chunks > 0) {
    const int64_t parts = (gw ? 1 : 0) + (gb ? 1 : 0);
    const lt_status st =
        ws.get(x->storage->device, (size_t)(parts * chunks * p.d) * sizeof(double));
    if (st != LT_OK) return st;
    double *next = (double *)ws.ptr;
    if (gw) part_w = next, next += chunks * p.d;
    if (gb) part_b = next;
    const dim3 grid((unsigned)((p.d + 31) / 32), (unsigned)chunks);
    ln_param_partial_kernel<T><<<grid, dim3(32, LN_COL_Y), 0, stream>>>(p, rows, part_w, part_b);
    const lt_status s2 = cuda_check_launch(op, "ln_param_partial_kernel");
    if (s2 != LT_OK) return s2;
  }
  ln_param_final_kernel<T><<<grid_for(p.d, LN_THREADS), LN_THREADS, 0, stream>>>(
      part_w, part_b, chunks, p.d, gw ? (T *)cuda_bytes(gw) : NULL,
      gb ? (T *)cuda_bytes(gb) : NULL);
  return cuda_check_launch(op, "ln_param_final_kernel");
}

} // namespace

lt_status cuda_nn_layer_norm(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd,
                             const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                             double eps) {
  cuda_device_guard guard(out->storage->device);
  if (x->dtype == LT_FLOAT64) return ln_forward<double>(out, mean, rstd, x, w, b, eps);
  return ln_forward<float>(out, mean, rstd, x, w, b, eps);
}

lt_status cuda_nn_layer_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                      const lt_tensor *go, const lt_tensor *x,
                                      const lt_tensor *mean, const lt_tensor *rstd,
                                      const lt_tensor *w) {
  // The gradient outputs may each be NULL; x is always there, on the same device.
  cuda_device_guard guard(x->storage->device);
  if (x->dtype == LT_FLOAT64) return ln_backward<double>(gx, gw, gb, go, x, mean, rstd, w);
  return ln_backward<float>(gx, gw, gb, go, x, mean, rstd, w);
}
