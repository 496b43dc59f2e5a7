// sum/mean/prod and max/min with indices, as tree reductions: one block per
// output element (a grid-stride loop over outputs; short rows take a thread
// per output instead), each thread folding a
// strided share of the reduced elements, then a shared-memory tree. Floats
// accumulate in double and integers in wrapping int64, as on the CPU; the
// order depends only on the shapes, so results are the same on every run.
// Few outputs over many elements (a full sum, argmax of everything) split
// each output's reduced range into fixed parts, one block each, whose
// partial results a second kernel combines in part order: the split depends
// only on the shapes, so results still repeat run to run, and a large sum
// no longer runs on a single block (one SM).
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
  // No element to read (as cpu_reduce_geom.c): the other sizes and strides of
  // such a view may have products past INT64_MAX, so the kept dims (the
  // output's sizes, which fit) step by 0 and the reduced set stays empty.
  const bool empty = lt_numel(in) == 0;
  if (empty) g->reduced.numel = 0;
  const int64_t es = (int64_t)lt_dtype_size(in->dtype);
  for (int d = 0; d < in->ndim; d++) {
    if (empty && reduced[d]) continue;
    reduce_dims *r = reduced[d] ? &g->reduced : &g->kept;
    r->numel *= in->shape[d];
    if (in->shape[d] == 1) continue; // never moves a pointer
    const int64_t stride = empty ? 0 : in->stride[d] * es;
    // As cpu_reduce_geom.c's dims_push: a dim that continues the previous
    // one of its set merges into it (same row-major positions, same offsets),
    // so a contiguous tensor costs one 64-bit division per element in
    // dims_offset instead of one per dim.
    if (r->ndim > 0 && r->stride[r->ndim - 1] == stride * in->shape[d]) {
      r->shape[r->ndim - 1] *= in->shape[d];
      r->stride[r->ndim - 1] = stride;
      continue;
    }
    r->shape[r->ndim] = in->shape[d];
    r->stride[r->ndim] = stride;
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

// The result of one output from its accumulator.
__device__ inline void store_accum(const accum &a, int op, bool floating, int64_t count,
                                   char *dst, int out_dtype) {
  if (floating) {
    double v = a.f;
    if (op == LT_REDUCE_MEAN) v = count > 0 ? v / (double)count : nan("");
    cuda_store<double>(dst, out_dtype, v);
  } else {
    cuda_store<int64_t>(dst, out_dtype, (int64_t)a.i);
  }
}

// Folds the element at q into a: a sum or a product, floats in double and
// integers wrapping.
__device__ inline void fold(accum &a, const char *q, int dtype, bool floating, bool prod) {
  if (floating) {
    const double v = cuda_load<double>(q, dtype);
    a.f = prod ? a.f * v : a.f + v;
  } else {
    const uint64_t v = (uint64_t)cuda_load<int64_t>(q, dtype);
    a.i = prod ? a.i * v : a.i + v;
  }
}

// Work unit u = (output o, part p): block-uniform loop over units. Part p
// covers the reduced positions [p chunk, (p + 1) chunk). With partial, each
// unit's accumulator goes there (reduce_finish_kernel combines them);
// otherwise (parts == 1) the output is written directly.
__global__ void reduce_kernel(reduce_geom g, int op, bool floating, int64_t parts, int64_t chunk,
                              accum *partial, char *out, int out_dtype, int64_t out_esize) {
  __shared__ double sf[REDUCE_THREADS];
  __shared__ uint64_t si[REDUCE_THREADS];
  const bool prod = op == LT_REDUCE_PROD;
  const int64_t units = g.kept.numel * parts;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t o = u / parts, p = u % parts;
    const int64_t r0 = p * chunk;
    const int64_t r1 = r0 + chunk < g.reduced.numel ? r0 + chunk : g.reduced.numel;
    const char *base = g.base + dims_offset(g.kept, o);
    accum a = {prod ? 1.0 : 0.0, prod ? (uint64_t)1 : (uint64_t)0};
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
      fold(a, base + dims_offset(g.reduced, r), g.dtype, floating, prod);
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
      const accum r = {sf[0], si[0]};
      if (partial)
        partial[u] = r;
      else
        store_accum(r, op, floating, g.reduced.numel, out + o * out_esize, out_dtype);
    }
    __syncthreads(); // the shared arrays are reused by the next unit
  }
}

// Short rows (at most REDUCE_SHORT_ROW reduced elements, as a sum over a
// small last dim): one thread per output, folding its row in order. The
// block-per-output kernel would keep 256 threads and eight barriers busy for
// a few elements per output.
#define REDUCE_SHORT_ROW 32

__global__ void reduce_rows_kernel(reduce_geom g, int op, bool floating, char *out, int out_dtype,
                                   int64_t out_esize) {
  const bool prod = op == LT_REDUCE_PROD;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < g.kept.numel;
       o += (int64_t)blockDim.x * gridDim.x) {
    const char *base = g.base + dims_offset(g.kept, o);
    accum a = {prod ? 1.0 : 0.0, prod ? (uint64_t)1 : (uint64_t)0};
    for (int64_t r = 0; r < g.reduced.numel; r++) {
      fold(a, base + dims_offset(g.reduced, r), g.dtype, floating, prod);
    }
    store_accum(a, op, floating, g.reduced.numel, out + o * out_esize, out_dtype);
  }
}

// Each output's parts combined in part order.
__global__ void reduce_finish_kernel(const accum *partial, int64_t nout, int64_t parts, int op,
                                     bool floating, int64_t count, char *out, int out_dtype,
                                     int64_t out_esize) {
  const bool prod = op == LT_REDUCE_PROD;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < nout;
       o += (int64_t)blockDim.x * gridDim.x) {
    accum a = partial[o * parts];
    for (int64_t p = 1; p < parts; p++) {
      const accum b = partial[o * parts + p];
      if (prod) {
        a.f *= b.f;
        a.i *= b.i;
      } else {
        a.f += b.f;
        a.i += b.i;
      }
    }
    store_accum(a, op, floating, count, out + o * out_esize, out_dtype);
  }
}

static unsigned output_blocks(int64_t nout) {
  return (unsigned)(nout < 65535 * 8 ? nout : 65535 * 8);
}

// How many parts each output's reduced range is split into (a function of
// the shapes alone): 1 when there are enough outputs to fill the GPU, else
// enough parts of at least REDUCE_MIN_CHUNK elements for about
// REDUCE_TARGET_UNITS blocks in all.
#define REDUCE_MIN_CHUNK 16384
#define REDUCE_TARGET_UNITS 4096
#define REDUCE_MAX_PARTS 1024

static void reduce_split(int64_t nout, int64_t nred, int64_t *parts, int64_t *chunk) {
  int64_t p = 1;
  if (nout < REDUCE_TARGET_UNITS && nred >= 2 * REDUCE_MIN_CHUNK) {
    p = nred / REDUCE_MIN_CHUNK;
    const int64_t fill = (REDUCE_TARGET_UNITS + nout - 1) / nout;
    if (p > fill) p = fill;
    if (p > REDUCE_MAX_PARTS) p = REDUCE_MAX_PARTS;
    if (p < 1) p = 1;
  }
  *chunk = p > 1 ? (nred + p - 1) / p : nred;
  *parts = p > 1 ? (nred + *chunk - 1) / *chunk : 1; // no empty trailing part
}

lt_status cuda_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced) {
  reduce_geom g;
  reduce_geom_init(&g, in, reduced);
  if (g.kept.numel == 0) return LT_OK;
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream(); // the op device's current stream
  const char *name = op == LT_REDUCE_SUM ? "sum" : op == LT_REDUCE_MEAN ? "mean" : "prod";
  const bool floating = lt_dtype_is_floating(in->dtype);
  char *o = (char *)cuda_bytes(out);
  const int64_t es = (int64_t)lt_dtype_size(out->dtype);
  if (g.reduced.numel <= REDUCE_SHORT_ROW) {
    reduce_rows_kernel<<<cuda_blocks_for(g.kept.numel), CUDA_THREADS, 0, stream>>>(
        g, (int)op, floating, o, (int)out->dtype, es);
    return cuda_check_launch(name, "reduce_rows_kernel");
  }
  int64_t parts, chunk;
  reduce_split(g.kept.numel, g.reduced.numel, &parts, &chunk);
  // Given back at scope end while the kernels may be queued: safe on the
  // stream it was taken on (cuda_internal.h).
  cuda_workspace ws;
  accum *partial = NULL;
  if (parts > 1) {
    LT_TRY(ws.get(out->storage->device, (size_t)(g.kept.numel * parts) * sizeof(accum)));
    partial = (accum *)ws.ptr;
  }
  reduce_kernel<<<output_blocks(g.kept.numel * parts), REDUCE_THREADS, 0, stream>>>(
      g, (int)op, floating, parts, chunk, partial, o, (int)out->dtype, es);
  LT_TRY(cuda_check_launch(name, "reduce_kernel"));
  if (!partial) return LT_OK;
  reduce_finish_kernel<<<cuda_blocks_for(g.kept.numel), CUDA_THREADS, 0, stream>>>(
      partial, g.kept.numel, parts, (int)op, floating, g.reduced.numel, o, (int)out->dtype, es);
  return cuda_check_launch(name, "reduce_finish_kernel");
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

// Keeps the element at q (reduced position r) if it beats the best so far
// (bf or bi, at position bk; -1: none yet).
__device__ inline void consider(const char *q, int64_t r, int dtype, bool floating, bool is_max,
                                double &bf, int64_t &bi, int64_t &bk) {
  if (floating) {
    const double v = cuda_load<double>(q, dtype);
    if (better_float(is_max, v, r, bf, bk)) bf = v, bk = r;
  } else {
    const int64_t v = cuda_load<int64_t>(q, dtype);
    if (better_int(is_max, v, r, bi, bk)) bi = v, bk = r;
  }
}

// A unit's best: value (as double or int64) and reduced position, -1: none.
struct best {
  double f;
  int64_t i, k;
};

// The winner's bytes and index for output o.
__device__ inline void write_best(const reduce_geom &g, const char *base, int64_t k, int64_t esize,
                                  char *values, int64_t *indices, int64_t index_base, int64_t o) {
  // The winner's own bytes: values are exact whatever the dtype.
  if (values) {
    const char *src = base + dims_offset(g.reduced, k);
    for (int64_t b = 0; b < esize; b++) values[o * esize + b] = src[b];
  }
  if (indices) indices[o] = k + index_base;
}

// Units and parts as in reduce_kernel.
__global__ void reduce_index_kernel(reduce_geom g, bool is_max, bool floating, int64_t esize,
                                    int64_t parts, int64_t chunk, best *partial, char *values,
                                    int64_t *indices, int64_t index_base) {
  __shared__ double sf[REDUCE_THREADS];
  __shared__ int64_t si[REDUCE_THREADS];
  __shared__ int64_t sk[REDUCE_THREADS]; // position in the reduced row-major order, -1: none
  const int64_t units = g.kept.numel * parts;
  for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
    const int64_t o = u / parts, p = u % parts;
    const int64_t r0 = p * chunk;
    const int64_t r1 = r0 + chunk < g.reduced.numel ? r0 + chunk : g.reduced.numel;
    const char *base = g.base + dims_offset(g.kept, o);
    double bf = 0;
    int64_t bi = 0, bk = -1;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
      consider(base + dims_offset(g.reduced, r), r, g.dtype, floating, is_max, bf, bi, bk);
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
    if (threadIdx.x == 0) {
      if (partial) {
        const best b = {sf[0], si[0], sk[0]};
        partial[u] = b;
      } else if (sk[0] >= 0) {
        write_best(g, base, sk[0], esize, values, indices, index_base, o);
      }
    }
    __syncthreads();
  }
}

// Short rows, a thread per output (as reduce_rows_kernel).
__global__ void reduce_index_rows_kernel(reduce_geom g, bool is_max, bool floating, int64_t esize,
                                         char *values, int64_t *indices, int64_t index_base) {
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < g.kept.numel;
       o += (int64_t)blockDim.x * gridDim.x) {
    const char *base = g.base + dims_offset(g.kept, o);
    double bf = 0;
    int64_t bi = 0, bk = -1;
    for (int64_t r = 0; r < g.reduced.numel; r++) {
      consider(base + dims_offset(g.reduced, r), r, g.dtype, floating, is_max, bf, bi, bk);
    }
    write_best(g, base, bk, esize, values, indices, index_base, o);
  }
}

// Each output's parts combined in part order (ties: the first position).
__global__ void reduce_index_finish_kernel(reduce_geom g, bool is_max, bool floating,
                                           int64_t esize, int64_t parts, const best *partial,
                                           char *values, int64_t *indices, int64_t index_base) {
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < g.kept.numel;
       o += (int64_t)blockDim.x * gridDim.x) {
    best b = partial[o * parts];
    for (int64_t p = 1; p < parts; p++) {
      const best c = partial[o * parts + p];
      if (c.k < 0) continue;
      const bool take = floating ? better_float(is_max, c.f, c.k, b.f, b.k)
                                 : better_int(is_max, c.i, c.k, b.i, b.k);
      if (take) b = c;
    }
    if (b.k >= 0)
      write_best(g, g.base + dims_offset(g.kept, o), b.k, esize, values, indices, index_base, o);
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
  const char *name = is_max ? "max" : "min";
  const bool floating = lt_dtype_is_floating(in->dtype);
  const int64_t esize = (int64_t)lt_dtype_size(in->dtype);
  char *v = values ? (char *)cuda_bytes(values) : NULL;
  int64_t *ix = indices ? (int64_t *)cuda_bytes(indices) : NULL;
  if (g.reduced.numel <= REDUCE_SHORT_ROW) {
    reduce_index_rows_kernel<<<cuda_blocks_for(g.kept.numel), CUDA_THREADS, 0, stream>>>(
        g, is_max, floating, esize, v, ix, index_base);
    return cuda_check_launch(name, "reduce_index_rows_kernel");
  }
  int64_t parts, chunk;
  reduce_split(g.kept.numel, g.reduced.numel, &parts, &chunk);
  cuda_workspace ws; // see cuda_reduce
  best *partial = NULL;
  if (parts > 1) {
    LT_TRY(ws.get(in->storage->device, (size_t)(g.kept.numel * parts) * sizeof(best)));
    partial = (best *)ws.ptr;
  }
  reduce_index_kernel<<<output_blocks(g.kept.numel * parts), REDUCE_THREADS, 0, stream>>>(
      g, is_max, floating, esize, parts, chunk, partial, v, ix, index_base);
  LT_TRY(cuda_check_launch(name, "reduce_index_kernel"));
  if (!partial) return LT_OK;
  reduce_index_finish_kernel<<<cuda_blocks_for(g.kept.numel), CUDA_THREADS, 0, stream>>>(
      g, is_max, floating, esize, parts, partial, v, ix, index_base);
  return cuda_check_launch(name, "reduce_index_finish_kernel");
}
