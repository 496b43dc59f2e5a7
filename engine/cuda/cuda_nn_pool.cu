// max_pool2d and avg_pool2d over planes [P, H, W], native kernels with the
// semantics of cpu_nn_pool.c (lt needs max pooling's argmax, which cuDNN
// does not return).
//
// Forward: one thread per output element, walking its window in the CPU's
// order, so values and indices match the CPU's bit for bit (max: first
// maximum or last NaN wins; avg: double sum over the clipped window).
//
// Backward is a gather: one thread per input element visits, in the CPU's
// output order (row-major over the plane's outputs), the outputs that can
// have it in their window (for max pooling, which gets no options, found
// from the saved indices) and adds their share. Every input element is
// written once, by one thread: no atomics, no separate zeroing, and the sums
// are added in the same order as the CPU's scatter, with the same rounding.
#include <math.h>
#include <stdint.h>

#include "cuda/cuda_nn_kernels.h"

struct pool_geom {
  int64_t planes, h, w, out_h, out_w;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t divisor_override;
  bool count_include_pad;
};

static pool_geom pool_geom_make(int64_t planes, int64_t h, int64_t w, int64_t out_h,
                                int64_t out_w, const lt_pool2d_opts *o) {
  pool_geom g;
  g.planes = planes, g.h = h, g.w = w, g.out_h = out_h, g.out_w = out_w;
  g.kh = o->kernel[0], g.kw = o->kernel[1];
  g.sh = o->stride[0], g.sw = o->stride[1];
  g.ph = o->padding[0], g.pw = o->padding[1];
  // Resolved by ops/ for max pooling; avg pooling has no dilation (and o may
  // hold 0 there), so 0 is read as 1 to keep the arithmetic defined.
  g.dh = o->dilation[0] > 0 ? o->dilation[0] : 1;
  g.dw = o->dilation[1] > 0 ? o->dilation[1] : 1;
  g.divisor_override = o->divisor_override;
  g.count_include_pad = o->count_include_pad;
  return g;
}

// Floor and ceiling of a / b for b > 0 and any sign of a.
__device__ inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
__device__ inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// ---- max ----

template <typename T>
__global__ void max_pool_kernel(pool_geom g, const T *x, T *out, int64_t *indices) {
  const int64_t ohw = g.out_h * g.out_w, total = g.planes * ohw;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t ow = i % g.out_w, oh = (i / g.out_w) % g.out_h, p = i / ohw;
    const T *xp = x + p * g.h * g.w;
    // The window's first and one-past-last tap, then its first tap inside
    // the input (padding never holds a value).
    int64_t hs = oh * g.sh - g.ph;
    const int64_t he = hs + (g.kh - 1) * g.dh + 1;
    while (hs < 0) hs += g.dh;
    int64_t ws = ow * g.sw - g.pw;
    const int64_t we = ws + (g.kw - 1) * g.dw + 1;
    while (ws < 0) ws += g.dw;
    // As the CPU (and PyTorch): start from -inf at the first tap inside the
    // input; a strictly greater value takes over (first maximum wins) and
    // any NaN is remembered (last NaN wins, and then the value is NaN).
    int64_t best_at = hs * g.w + ws, nan_at = -1;
    T best = (T)(-INFINITY);
    for (int64_t ih = hs; ih < he && ih < g.h; ih += g.dh)
      for (int64_t iw = ws; iw < we && iw < g.w; iw += g.dw) {
        const int64_t pos = ih * g.w + iw;
        const T v = xp[pos];
        if (v > best) best = v, best_at = pos;
        if (v != v) nan_at = pos;
      }
    if (nan_at >= 0) best_at = nan_at, best = (T)NAN;
    out[i] = best;
    indices[i] = best_at;
  }
}

lt_status cuda_nn_max_pool2d(lt_tensor *out, lt_tensor *indices, const lt_tensor *x,
                             const lt_pool2d_opts *o) {
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  const pool_geom g = pool_geom_make(x->shape[0], x->shape[1], x->shape[2], out->shape[1],
                                     out->shape[2], o);
  const int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return LT_OK;
  if (out->dtype == LT_FLOAT64)
    max_pool_kernel<double><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const double *)lt_data(x), (double *)lt_data(out), (int64_t *)lt_data(indices));
  else
    max_pool_kernel<float><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const float *)lt_data(x), (float *)lt_data(out), (int64_t *)lt_data(indices));
  return cuda_check_launch("max_pool2d", "max_pool_kernel");
}

// Backward of max pooling gets no pooling options (gx, go, indices only), so
// the outputs that may have picked an input element are found from the
// saved indices themselves, in three steps:
//   1. for every output row oh, the least and greatest input row that any
//      output of that row picked (over all planes and output columns), and
//      the same for every output column ow;
//   2. for every input row ih, the first and last output row whose interval
//      contains ih (and the same for input columns);
//   3. gx at (p, ih, iw) = the sum, over outputs (oh, ow) in those ranges in
//      row-major order, of go where the saved index is ih * W + iw.
// An output that picked (ih, iw) has ih within its row's interval and iw
// within its column's, so step 3 sees every contribution; and since every
// index lies in its output's window, the ranges are no wider than the
// windows' reach (about ceil(kernel / stride) outputs per axis). Indices
// outside the plane (which the CPU would write out of bounds with) are
// ignored. The CPU adds go into gx in output order, rounding to T after each
// add; acc does the same, so the sums match bit for bit.

#define POOL_RANGE_THREADS 256

// Step 1: blocks [0, out_h) take output rows, blocks [out_h, out_h + out_w)
// output columns; each folds min/max over P x (out_w or out_h) indices with
// a shared-memory tree. ranges holds rmin, rmax [out_h], cmin, cmax [out_w].
__global__ void pick_bounds_kernel(pool_geom g, const int64_t *indices, int64_t *ranges) {
  __shared__ int64_t smin[POOL_RANGE_THREADS], smax[POOL_RANGE_THREADS];
  const int64_t hw = g.h * g.w, ohw = g.out_h * g.out_w;
  for (int64_t b = blockIdx.x; b < g.out_h + g.out_w; b += gridDim.x) {
    const bool rows = b < g.out_h;
    const int64_t line = rows ? b : b - g.out_h;     // oh or ow
    const int64_t across = rows ? g.out_w : g.out_h; // outputs of the line per plane
    int64_t lo = INT64_MAX, hi = -1;
    for (int64_t j = threadIdx.x; j < g.planes * across; j += blockDim.x) {
      const int64_t p = j / across, t = j % across;
      const int64_t e = rows ? line * g.out_w + t : t * g.out_w + line;
      const int64_t at = indices[p * ohw + e];
      if (at < 0 || at >= hw) continue;
      const int64_t v = rows ? at / g.w : at % g.w;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    smin[threadIdx.x] = lo;
    smax[threadIdx.x] = hi;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if ((int)threadIdx.x < half) {
        const int64_t a = smin[threadIdx.x + half], c = smax[threadIdx.x + half];
        if (a < smin[threadIdx.x]) smin[threadIdx.x] = a;
        if (c > smax[threadIdx.x]) smax[threadIdx.x] = c;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      int64_t *mn = rows ? ranges : ranges + 2 * g.out_h;
      int64_t *mx = mn + (rows ? g.out_h : g.out_w);
      mn[line] = smin[0];
      mx[line] = smax[0];
    }
    __syncthreads(); // the shared arrays are reused by the next line
  }
}

// Step 2: threads [0, H) take input rows, [H, H + W) input columns. ranges
// continues with oh0, oh1 [H] and ow0, ow1 [W]; an empty range is [0, -1].
__global__ void pick_ranges_kernel(pool_geom g, int64_t *ranges) {
  const int64_t *rmin = ranges, *rmax = rmin + g.out_h;
  const int64_t *cmin = rmax + g.out_h, *cmax = cmin + g.out_w;
  int64_t *oh0 = ranges + 2 * (g.out_h + g.out_w), *oh1 = oh0 + g.h;
  int64_t *ow0 = oh1 + g.h, *ow1 = ow0 + g.w;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < g.h + g.w;
       t += (int64_t)blockDim.x * gridDim.x) {
    const bool rows = t < g.h;
    const int64_t v = rows ? t : t - g.h, n = rows ? g.out_h : g.out_w;
    const int64_t *mn = rows ? rmin : cmin, *mx = rows ? rmax : cmax;
    int64_t first = 0, last = -1;
    bool any = false;
    for (int64_t o = 0; o < n; o++)
      if (mn[o] <= v && v <= mx[o]) {
        if (!any) first = o;
        last = o;
        any = true;
      }
    (rows ? oh0 : ow0)[v] = first;
    (rows ? oh1 : ow1)[v] = last;
  }
}

// Step 3.
template <typename T>
__global__ void max_pool_backward_kernel(pool_geom g, const T *go, const int64_t *indices,
                                         const int64_t *ranges, T *gx) {
  const int64_t hw = g.h * g.w, total = g.planes * hw, ohw = g.out_h * g.out_w;
  const int64_t *oh0 = ranges + 2 * (g.out_h + g.out_w), *oh1 = oh0 + g.h;
  const int64_t *ow0 = oh1 + g.h, *ow1 = ow0 + g.w;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t pos = i % hw, p = i / hw, ih = pos / g.w, iw = pos % g.w;
    const int64_t *ip = indices + p * ohw;
    const T *gp = go + p * ohw;
    const int64_t w0 = ow0[iw], w1 = ow1[iw];
    T acc = (T)0;
    for (int64_t oh = oh0[ih], h1 = oh1[ih]; oh <= h1; oh++)
      for (int64_t ow = w0; ow <= w1; ow++) {
        const int64_t e = oh * g.out_w + ow;
        if (ip[e] == pos) acc = acc + gp[e];
      }
    gx[i] = acc;
  }
}

lt_status cuda_nn_max_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                      const lt_tensor *indices) {
  cuda_device_guard guard(gx->storage->device);
  const cudaStream_t stream = cuda_stream();
  const char *op = "max_pool2d_backward";
  const lt_pool2d_opts none = lt_pool2d_opts(); // only the shapes are used
  const pool_geom g = pool_geom_make(gx->shape[0], gx->shape[1], gx->shape[2], go->shape[1],
                                     go->shape[2], &none);
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return LT_OK;
  if (g.out_h * g.out_w == 0) { // nothing was picked: all zeros
    CUDA_TRY(op, cudaMemsetAsync(lt_data(gx), 0, lt_nbytes(gx), stream));
    return LT_OK;
  }
  cuda_workspace ws;
  LT_TRY(ws.get(gx->storage->device,
                (size_t)(2 * (g.out_h + g.out_w + g.h + g.w)) * sizeof(int64_t)));
  int64_t *ranges = (int64_t *)ws.ptr;
  const int64_t lines = g.out_h + g.out_w;
  pick_bounds_kernel<<<(unsigned)(lines < 65535 * 8 ? lines : 65535 * 8), POOL_RANGE_THREADS, 0,
                       stream>>>(g, (const int64_t *)lt_data(indices), ranges);
  LT_TRY(cuda_check_launch(op, "pick_bounds_kernel"));
  pick_ranges_kernel<<<cuda_blocks_for(g.h + g.w), CUDA_THREADS, 0, stream>>>(g, ranges);
  LT_TRY(cuda_check_launch(op, "pick_ranges_kernel"));
  if (gx->dtype == LT_FLOAT64)
    max_pool_backward_kernel<double><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const double *)lt_data(go), (const int64_t *)lt_data(indices), ranges,
        (double *)lt_data(gx));
  else
    max_pool_backward_kernel<float><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const float *)lt_data(go), (const int64_t *)lt_data(indices), ranges,
        (float *)lt_data(gx));
  return cuda_check_launch(op, "max_pool_backward_kernel");
}

// ---- average ----

// The window of output (oh, ow) clipped to the input, and its divisor: the
// CPU's avg_window_at, line for line (the same arithmetic on the same int64
// and double values, so the same divisor).
struct avg_window {
  int64_t h0, h1, w0, w1;
  double divisor;
};

__device__ inline avg_window avg_window_at(const pool_geom &g, int64_t oh, int64_t ow) {
  avg_window a;
  a.h0 = oh * g.sh - g.ph;
  a.w0 = ow * g.sw - g.pw;
  // The window may reach into the right/bottom padding, not past it.
  a.h1 = a.h0 + g.kh < g.h + g.ph ? a.h0 + g.kh : g.h + g.ph;
  a.w1 = a.w0 + g.kw < g.w + g.pw ? a.w0 + g.kw : g.w + g.pw;
  const int64_t padded_count = (a.h1 - a.h0) * (a.w1 - a.w0);
  if (a.h0 < 0) a.h0 = 0;
  if (a.w0 < 0) a.w0 = 0;
  if (a.h1 > g.h) a.h1 = g.h;
  if (a.w1 > g.w) a.w1 = g.w;
  if (g.divisor_override)
    a.divisor = (double)g.divisor_override;
  else if (g.count_include_pad)
    a.divisor = (double)padded_count;
  else
    a.divisor = (double)((a.h1 - a.h0) * (a.w1 - a.w0));
  return a;
}

template <typename T>
__global__ void avg_pool_kernel(pool_geom g, const T *x, T *out) {
  const int64_t ohw = g.out_h * g.out_w, total = g.planes * ohw;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t ow = i % g.out_w, oh = (i / g.out_w) % g.out_h, p = i / ohw;
    const T *xp = x + p * g.h * g.w;
    const avg_window a = avg_window_at(g, oh, ow);
    double sum = 0.0; // in double, row-major over the window, as the CPU
    for (int64_t ih = a.h0; ih < a.h1; ih++)
      for (int64_t iw = a.w0; iw < a.w1; iw++) sum += (double)xp[ih * g.w + iw];
    const bool empty = a.h0 >= a.h1 || a.w0 >= a.w1;
    out[i] = (T)(empty ? 0.0 : sum / a.divisor);
  }
}

lt_status cuda_nn_avg_pool2d(lt_tensor *out, const lt_tensor *x, const lt_pool2d_opts *o) {
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  const pool_geom g = pool_geom_make(x->shape[0], x->shape[1], x->shape[2], out->shape[1],
                                     out->shape[2], o);
  const int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return LT_OK;
  if (out->dtype == LT_FLOAT64)
    avg_pool_kernel<double><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const double *)lt_data(x), (double *)lt_data(out));
  else
    avg_pool_kernel<float><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const float *)lt_data(x), (float *)lt_data(out));
  return cuda_check_launch("avg_pool2d", "avg_pool_kernel");
}

// gx at (p, ih, iw) = the sum of go / divisor over the outputs whose clipped
// window contains (ih, iw). Clipping only removes rows outside [0, H), so
// for an input row the condition is oh * sh - ph <= ih < oh * sh - ph + kh,
// i.e. oh in [floor((ih + ph - kh) / sh) + 1, floor((ih + ph) / sh)]; the
// clipped window is checked again per output so that the sum is exactly the
// CPU's. The CPU adds the double go / divisor to the T-typed gx, rounding to
// T after each add, in output order; acc does the same.
template <typename T>
__global__ void avg_pool_backward_kernel(pool_geom g, const T *go, T *gx) {
  const int64_t hw = g.h * g.w, total = g.planes * hw, ohw = g.out_h * g.out_w;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t pos = i % hw, p = i / hw, ih = pos / g.w, iw = pos % g.w;
    int64_t oh0 = floor_div(ih + g.ph - g.kh, g.sh) + 1, oh1 = floor_div(ih + g.ph, g.sh);
    int64_t ow0 = floor_div(iw + g.pw - g.kw, g.sw) + 1, ow1 = floor_div(iw + g.pw, g.sw);
    if (oh0 < 0) oh0 = 0;
    if (ow0 < 0) ow0 = 0;
    if (oh1 > g.out_h - 1) oh1 = g.out_h - 1;
    if (ow1 > g.out_w - 1) ow1 = g.out_w - 1;
    const T *gp = go + p * ohw;
    T acc = (T)0;
    for (int64_t oh = oh0; oh <= oh1; oh++)
      for (int64_t ow = ow0; ow <= ow1; ow++) {
        const avg_window a = avg_window_at(g, oh, ow);
        if (ih < a.h0 || ih >= a.h1 || iw < a.w0 || iw >= a.w1) continue;
        const double share = (double)gp[oh * g.out_w + ow] / a.divisor;
        acc = (T)((double)acc + share);
      }
    gx[i] = acc;
  }
}

lt_status cuda_nn_avg_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                      const lt_pool2d_opts *o) {
  cuda_device_guard guard(gx->storage->device);
  const cudaStream_t stream = cuda_stream();
  const pool_geom g = pool_geom_make(gx->shape[0], gx->shape[1], gx->shape[2], go->shape[1],
                                     go->shape[2], o);
  const int64_t total = g.planes * g.h * g.w;
  if (total == 0) return LT_OK;
  // With no outputs every range is empty and the kernel writes zeros.
  if (gx->dtype == LT_FLOAT64)
    avg_pool_backward_kernel<double><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const double *)lt_data(go), (double *)lt_data(gx));
  else
    avg_pool_backward_kernel<float><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        g, (const float *)lt_data(go), (float *)lt_data(gx));
  return cuda_check_launch("avg_pool2d_backward", "avg_pool_backward_kernel");
}
