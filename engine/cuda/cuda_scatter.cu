// gather and scatter along a dim on the device, the same walk over index's
// positions p as cpu_scatter.c: a reads or writes the tensor at p itself
// (gather's out, scatter's src), b the one addressed through the index
// (gather's in, scatter's out at p with p[dim] = index[p] - base).
//
// gather: one thread per position (numbered line by line, which is a
// one-to-one numbering of the positions). scatter: one thread per line (the
// positions that differ only along dim), which walks its line in order.
// Positions of different lines never hit the same target, so no two threads
// write one element: no atomics, a repeated target is written in index's
// row-major order (the last write wins, adds in that order, each rounded to
// the element type as the CPU does), and the result is the CPU's bit for bit
// whatever the launch. The price is parallelism over lines only, which a
// scatter along a long dim of few lines does not have.
#include <stdint.h>
#include <string.h>

#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

struct walk_geom {
  int ndim, dim, dtype, es;
  int64_t shape[LT_MAX_DIMS]; // index's
  int64_t istride[LT_MAX_DIMS], astride[LT_MAX_DIMS], bstride[LT_MAX_DIMS];
  int64_t base, count; // count: positions (gather) or lines (scatter)
  const int64_t *index;
  char *a, *b;
  uint64_t value; // scatter of a number: its bits in out's dtype (a NULL)
};

// The offsets of the line's first position (coordinate 0 along dim).
__device__ inline void line_offsets(const walk_geom &g, int64_t line, int64_t *io, int64_t *ao,
                                    int64_t *bo) {
  *io = *ao = *bo = 0;
  for (int d = g.ndim - 1; d >= 0; d--) {
    if (d == g.dim) continue;
    const int64_t c = line % g.shape[d];
    line /= g.shape[d];
    *io += c * g.istride[d];
    *ao += c * g.astride[d];
    *bo += c * g.bstride[d];
  }
}

template <typename U>
__global__ void gather_kernel(walk_geom g) {
  const int64_t len = g.shape[g.dim];
  for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < g.count;
       p += (int64_t)blockDim.x * gridDim.x) {
    int64_t io, ao, bo;
    const int64_t j = p % len;
    line_offsets(g, p / len, &io, &ao, &bo);
    const int64_t v = g.index[io + j * g.istride[g.dim]];
    ((U *)g.a)[ao + j * g.astride[g.dim]] = ((const U *)g.b)[bo + (v - g.base) * g.bstride[g.dim]];
  }
}

// x + y in the compute type; integers wrap (two's complement, no overflow).
template <typename C> __device__ inline C add_wrap(C x, C y) { return x + y; }
template <> __device__ inline int64_t add_wrap<int64_t>(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x + (uint64_t)y);
}

// Copies: U is the element's bits.
template <typename U>
__global__ void scatter_kernel(walk_geom g) {
  const int64_t len = g.shape[g.dim];
  U value; // the low bytes of g.value (both sides little-endian)
  memcpy(&value, &g.value, sizeof value);
  for (int64_t line = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; line < g.count;
       line += (int64_t)blockDim.x * gridDim.x) {
    int64_t io, ao, bo;
    line_offsets(g, line, &io, &ao, &bo);
    for (int64_t j = 0; j < len; j++) {
      const int64_t v = g.index[io + j * g.istride[g.dim]];
      U *b = (U *)g.b + bo + (v - g.base) * g.bstride[g.dim];
      *b = g.a ? ((const U *)g.a)[ao + j * g.astride[g.dim]] : value;
    }
  }
}

// Adds: C is the compute type (float for float32 and the 16-bit floats,
// double, int64 for integers and bool), one load, add and store per element.
template <typename C>
__global__ void scatter_add_kernel(walk_geom g) {
  const int64_t len = g.shape[g.dim];
  for (int64_t line = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; line < g.count;
       line += (int64_t)blockDim.x * gridDim.x) {
    int64_t io, ao, bo;
    line_offsets(g, line, &io, &ao, &bo);
    for (int64_t j = 0; j < len; j++) {
      const int64_t v = g.index[io + j * g.istride[g.dim]];
      char *b = g.b + (bo + (v - g.base) * g.bstride[g.dim]) * g.es;
      const char *a = g.a + (ao + j * g.astride[g.dim]) * g.es;
      cuda_store<C>(b, g.dtype, add_wrap<C>(cuda_load<C>(b, g.dtype), cuda_load<C>(a, g.dtype)));
    }
  }
}

static void init_geom(walk_geom *g, int dim, const lt_tensor *index, int64_t base) {
  g->ndim = index->ndim;
  g->dim = dim;
  for (int d = 0; d < index->ndim; d++) {
    g->shape[d] = index->shape[d];
    g->istride[d] = index->stride[d];
  }
  g->base = base;
  g->index = (const int64_t *)lt_data(index);
  g->value = 0;
}

lt_status cuda_gather(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                      int64_t base) {
  const int64_t numel = lt_numel(index);
  if (numel == 0) return LT_OK;
  walk_geom g;
  init_geom(&g, dim, index, base);
  g.dtype = in->dtype;
  g.es = (int)lt_dtype_size(in->dtype);
  for (int d = 0; d < index->ndim; d++) {
    g.astride[d] = out->stride[d];
    g.bstride[d] = in->stride[d];
  }
  g.count = numel;
  g.a = cuda_bytes(out);
  g.b = cuda_bytes(in);
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  const unsigned blocks = cuda_blocks_for(numel);
  switch (g.es) {
    case 8: gather_kernel<uint64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    case 4: gather_kernel<uint32_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    case 2: gather_kernel<uint16_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    default: gather_kernel<uint8_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
  }
  return cuda_check_launch("gather", "gather_kernel");
}

lt_status cuda_scatter(bool add, lt_tensor *out, int dim, const lt_tensor *index, int64_t base,
                       const lt_tensor *src, lt_scalar value) {
  const int64_t numel = lt_numel(index);
  if (numel == 0) return LT_OK;
  walk_geom g;
  init_geom(&g, dim, index, base);
  g.dtype = out->dtype;
  g.es = (int)lt_dtype_size(out->dtype);
  for (int d = 0; d < index->ndim; d++) {
    g.astride[d] = src ? src->stride[d] : 0;
    g.bstride[d] = out->stride[d];
  }
  g.count = numel / index->shape[dim];
  g.a = src ? cuda_bytes(src) : NULL;
  g.b = cuda_bytes(out);
  if (!src) { // one element of out's dtype, as the CPU makes it
    if (lt_dtype_is_integral(out->dtype)) lt_store_int64(&g.value, out->dtype, value.i);
    else lt_store_double(&g.value, out->dtype, value.f);
  }
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  const unsigned blocks = cuda_blocks_for(g.count);
  if (add) {
    switch (g.dtype) {
      case LT_FLOAT64: scatter_add_kernel<double><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      case LT_FLOAT32:
      case LT_FLOAT16:
      case LT_BFLOAT16: scatter_add_kernel<float><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      default: scatter_add_kernel<int64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    }
  } else {
    switch (g.es) {
      case 8: scatter_kernel<uint64_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      case 4: scatter_kernel<uint32_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      case 2: scatter_kernel<uint16_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
      default: scatter_kernel<uint8_t><<<blocks, CUDA_THREADS, 0, stream>>>(g); break;
    }
  }
  return cuda_check_launch(add ? "scatter_add" : "scatter",
                           add ? "scatter_add_kernel" : "scatter_kernel");
}
