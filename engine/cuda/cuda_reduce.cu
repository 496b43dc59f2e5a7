// sum/mean/prod and max/min with indices, as tree reductions: one block per
// output element (a grid-stride loop over outputs), each thread folding a
// strided share of the reduced elements, then a shared-memory tree. Floats
// accumulate in double and integers in wrapping int64, as on the CPU; the
// order depends only on the shapes, so results are the same on every run.
// A first version: a single output over many elements uses one block, and
// reductions over the innermost dim do not yet read coalesced.
#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

#define REDUCE_THREADS 256

// The input split into kept dims (one output each, row-major in order) and
// reduced dims (walked per output, row-major: reduce_index's positions).
struct reduce_dims {
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  int64_t stride[LT_MAX_DIMS]; // bytes
  int64_t numel;
};

struct reduce_geom {
  const char *base;
  int dtype;
  reduce_dims kept, reduced;
};

static void reduce_geom_init(reduce_geom *g, const lt_tensor *in, const bool *reduced) {
  g->base = (const char *)cuda_bytes(in);
  g->dtype = (int)in->dtype;
  g->kept.ndim = g->reduced.ndim = 0;
  g->kept.numel = g->reduced.numel = 1;
  const int64_t es = (int64_t)lt_dtype_size(in->dtype);
  for (int d = 0; d < in->ndim; d++) {
    reduce_dims *r = reduced[d] ? &g->reduced : &g->kept;
    r->numel *= in->shape[d];
    if (in->shape[d] == 1) continue; // never moves a pointer
    r->shape[r->ndim] = in->shape[d];
    r->stride[r->ndim] = in->stride[d] * es;
    r->ndim++;
  }
}

__device__ inline int64_t dims_offset(const reduce_dims &d, int64_t i) {
  int64_t off = 0;
  for (int k = d.ndim - 1; k >= 0; k--) {
    off += (i % d.shape[k]) * d.stride[k];
    i /= d.shape[k];
  }
  return off;
}

// ---- sum, mean, prod ----

struct accum {
  double f;
  uint64_t i; // unsigned: wraps
};

__global__ void reduce_kernel(reduce_geom g, int op, bool floating, char *out, int out_dtype,
                              int64_t out_esize) {
  __shared__ double sf[REDUCE_THREADS];
  __shared__ uint64_t si[REDUCE_THREADS];
  const bool prod = op == LT_REDUCE_PROD;
  for (int64_t o = blockIdx.x; o < g.kept.numel; o += gridDim.x) {
    const char *base = g.base + dims_offset(g.kept, o);
    accum a = {prod ? 1.0 : 0.0, prod ? (uint64_t)1 : (uint64_t)0};
    for (int64_t r = threadIdx.x; r < g.reduced.numel; r += blockDim.x) {
      const char *p = base + dims_offset(g.reduced, r);
      if (floating) {
        const double v = cuda_load<double>(p, g.dtype);
        a.f = prod ? a.f * v : a.f + v;
      } else {
        const uint64_t v = (uint64_t)cuda_load<int64_t>(p, g.dtype);
        a.i = prod ? a.i * v : a.i + v;
      }
    }
    sf[threadIdx.x] = a.f;
    si[threadIdx.x] = a.i;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if ((int)threadIdx.x < half) {
        if (prod) {
          sf[threadIdx.x] *= sf[threadIdx.x + half];
          si[threadIdx.x] *= si[threadIdx.x + half];
        } else {
          sf[threadIdx.x] += sf[threadIdx.x + half];
          si[threadIdx.x] += si[threadIdx.x + half];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      char *dst = out + o * out_esize;
      if (floating) {
        double v = sf[0];
        if (op == LT_REDUCE_MEAN) v = g.reduced.numel > 0 ? v / (double)g.reduced.numel : nan("");
        cuda_store<double>(dst, out_dtype, v);
      } else {
        cuda_store<int64_t>(dst, out_dtype, (int64_t)si[0]);
      }
    }
    __syncthreads(); // the shared arrays are reused by the next output
  }
}

static unsigned output_blocks(int64_t nout) {
  return (unsigned)(nout < 65535 * 8 ? nout : 65535 * 8);
}

lt_status cuda_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced) {
  reduce_geom g;
  reduce_geom_init(&g, in, reduced);
  if (g.kept.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream(); // the op device's current stream
  reduce_kernel<<<output_blocks(g.kept.numel), REDUCE_THREADS, 0, stream>>>(
      g, (int)op, lt_dtype_is_floating(in->dtype), (char *)cuda_bytes(out), (int)out->dtype,
      (int64_t)lt_dtype_size(out->dtype));
  return cuda_check_launch(op == LT_REDUCE_SUM ? "sum" : op == LT_REDUCE_MEAN ? "mean" : "prod",
                           "reduce_kernel");
}

// ---- max/min with indices ----

// Whether candidate (v, k) beats the current best (bv, bk): a NaN beats every
// number, the first NaN wins, then the better value, then the first index.
// Threads see interleaved positions, so ties are settled by index, not by
// arrival order.
__device__ inline bool better_float(bool is_max, double v, int64_t k, double bv, int64_t bk) {
  if (bk < 0) return true;
  const bool vn = v != v, bn = bv != bv;
  if (vn || bn) return vn && (!bn || k < bk);
  if (v == bv) return k < bk;
  return is_max ? v > bv : v < bv;
}

__device__ inline bool better_int(bool is_max, int64_t v, int64_t k, int64_t bv, int64_t bk) {
  if (bk < 0) return true;
  if (v == bv) return k < bk;
  return is_max ? v > bv : v < bv;
}

__global__ void reduce_index_kernel(reduce_geom g, bool is_max, bool floating, int64_t esize,
                                    char *values, int64_t *indices, int64_t index_base) {
  __shared__ double sf[REDUCE_THREADS];
  __shared__ int64_t si[REDUCE_THREADS];
  __shared__ int64_t sk[REDUCE_THREADS]; // position in the reduced row-major order, -1: none
  for (int64_t o = blockIdx.x; o < g.kept.numel; o += gridDim.x) {
    const char *base = g.base + dims_offset(g.kept, o);
    double bf = 0;
    int64_t bi = 0, bk = -1;
    for (int64_t r = threadIdx.x; r < g.reduced.numel; r += blockDim.x) {
      const char *p = base + dims_offset(g.reduced, r);
      if (floating) {
        const double v = cuda_load<double>(p, g.dtype);
        if (better_float(is_max, v, r, bf, bk)) bf = v, bk = r;
      } else {
        const int64_t v = cuda_load<int64_t>(p, g.dtype);
        if (better_int(is_max, v, r, bi, bk)) bi = v, bk = r;
      }
    }
    sf[threadIdx.x] = bf;
    si[threadIdx.x] = bi;
    sk[threadIdx.x] = bk;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      const int t = threadIdx.x;
      if (t < half && sk[t + half] >= 0) {
        const bool take = floating ? better_float(is_max, sf[t + half], sk[t + half], sf[t], sk[t])
                                   : better_int(is_max, si[t + half], sk[t + half], si[t], sk[t]);
        if (take) {
          sf[t] = sf[t + half];
          si[t] = si[t + half];
          sk[t] = sk[t + half];
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0 && sk[0] >= 0) {
      // The winner's own bytes: values are exact whatever the dtype.
      if (values) {
        const char *src = base + dims_offset(g.reduced, sk[0]);
        for (int64_t b = 0; b < esize; b++) values[o * esize + b] = src[b];
      }
      if (indices) indices[o] = sk[0] + index_base;
    }
    __syncthreads();
  }
}

lt_status cuda_reduce_index(bool is_max, lt_tensor *values, lt_tensor *indices,
                            const lt_tensor *in, int dim, int64_t index_base) {
  bool reduced[LT_MAX_DIMS];
  for (int d = 0; d < in->ndim; d++) reduced[d] = dim < 0 || d == dim;
  reduce_geom g;
  reduce_geom_init(&g, in, reduced);
  if (g.kept.numel == 0 || g.reduced.numel == 0) return LT_OK;
  cuda_device_guard guard(in->storage->device);
  const cudaStream_t stream = cuda_stream(); // the op device's current stream
  reduce_index_kernel<<<output_blocks(g.kept.numel), REDUCE_THREADS, 0, stream>>>(
      g, is_max, lt_dtype_is_floating(in->dtype), (int64_t)lt_dtype_size(in->dtype),
      values ? (char *)cuda_bytes(values) : NULL, indices ? (int64_t *)cuda_bytes(indices) : NULL,
      index_base);
  return cuda_check_launch(is_max ? "max" : "min", "reduce_index_kernel");
}
