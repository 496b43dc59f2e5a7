// sort and topk on the device: one block per slice along dim, a bitonic sort of
// (key, position) pairs. The keys are core/sort_key.h's (the CPU's too);
// compared together with the position, every pair is distinct, so the one
// ascending order of the pairs is the stable order, whatever sorting
// network produces it. The slice is padded to a power of two with pairs
// (UINT64_MAX, position >= size), which sort after every real pair (a NaN
// included). Slices of up to SORT_SHARED elements sort in shared memory;
// longer ones in a global workspace, still one block each (__syncthreads
// orders a block's global writes too), a chunk of slices at a time. topk
// sorts the whole slice and writes its first k.
#include <stdint.h>

#include "core/sort_key.h"
#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

#define SORT_SHARED 2048
#define SORT_MAX_THREADS 1024
// Workspace for the global path, per chunk of slices (at least one slice).
#define SORT_CHUNK_BYTES ((int64_t)64 << 20)

struct sort_geom {
  const char *in;
  char *values;     // NULL: not wanted
  int64_t *indices; // NULL: not wanted
  int dtype, es;
  int64_t size, k, inner, slices, base; // k: how many of each slice are written
  bool descending;
};

__device__ inline uint64_t sort_key_at(const sort_geom &g, const char *p) {
  uint64_t k;
  switch (g.dtype) {
    case LT_FLOAT32: k = lt_sort_key_f32(*(const float *)p); break;
    case LT_FLOAT64: k = lt_sort_key_f64(*(const double *)p); break;
    case LT_FLOAT16: k = lt_sort_key_f32(cuda_half_bits_to_float(*(const uint16_t *)p)); break;
    case LT_BFLOAT16: k = lt_sort_key_f32(cuda_bf16_bits_to_float(*(const uint16_t *)p)); break;
    case LT_INT64: k = lt_sort_key_i64(*(const int64_t *)p); break;
    case LT_INT32: k = lt_sort_key_i64(*(const int32_t *)p); break;
    default: k = *(const uint8_t *)p; break; // uint8, bool
  }
  return g.descending ? ~k : k;
}

// The first element of slice s: (outer o, inner i) at o * size * inner + i.
__device__ inline int64_t slice_start(const sort_geom &g, int64_t s) {
  return (s / g.inner) * g.size * g.inner + s % g.inner;
}

// Loads slice s into key/pos[0..npad), padding past size.
__device__ void load_slice(const sort_geom &g, int64_t s, uint64_t *key, int64_t *pos,
                           int64_t npad) {
  const int64_t start = slice_start(g, s);
  for (int64_t j = threadIdx.x; j < npad; j += blockDim.x) {
    key[j] = j < g.size ? sort_key_at(g, g.in + (start + j * g.inner) * g.es) : UINT64_MAX;
    pos[j] = j;
  }
}

// Sorts npad (a power of two) pairs ascending: merges of size k = 2, 4, ...,
// each a run of compare-exchange passes at distances k/2 down to 1, pair t
// of a pass being (i, i + j) with bit j of i clear, ascending where bit k of
// i is clear (which makes the merged runs bitonic).
__device__ void bitonic_sort(uint64_t *key, int64_t *pos, int64_t npad) {
  for (int64_t k = 2; k <= npad; k <<= 1)
    for (int64_t j = k >> 1; j > 0; j >>= 1) {
      for (int64_t t = threadIdx.x; t < npad / 2; t += blockDim.x) {
        const int64_t i = 2 * j * (t / j) + t % j, l = i + j;
        const bool ascending = (i & k) == 0;
        const uint64_t ka = key[i], kb = key[l];
        const int64_t pa = pos[i], pb = pos[l];
        const bool greater = ka > kb || (ka == kb && pa > pb);
        if (greater == ascending) {
          key[i] = kb, key[l] = ka;
          pos[i] = pb, pos[l] = pa;
        }
      }
      __syncthreads();
    }
}

template <typename U>
__device__ inline void copy_element(char *dst, const char *src) {
  *(U *)dst = *(const U *)src;
}

// Writes the first k of slice s in the sorted order pos[0..k), the outputs
// having k along dim.
__device__ void store_slice(const sort_geom &g, int64_t s, const int64_t *pos) {
  const int64_t start = slice_start(g, s);
  const int64_t out_start = (s / g.inner) * g.k * g.inner + s % g.inner;
  for (int64_t j = threadIdx.x; j < g.k; j += blockDim.x) {
    const int64_t at = out_start + j * g.inner, from = start + pos[j] * g.inner;
    if (g.values) {
      char *d = g.values + at * g.es;
      const char *p = g.in + from * g.es;
      switch (g.es) {
        case 8: copy_element<uint64_t>(d, p); break;
        case 4: copy_element<uint32_t>(d, p); break;
        case 2: copy_element<uint16_t>(d, p); break;
        default: copy_element<uint8_t>(d, p); break;
      }
    }
    if (g.indices) g.indices[at] = pos[j] + g.base;
  }
}

__global__ void sort_shared_kernel(sort_geom g, int64_t npad) {
  __shared__ uint64_t key[SORT_SHARED];
  __shared__ int64_t pos[SORT_SHARED];
  for (int64_t s = blockIdx.x; s < g.slices; s += gridDim.x) {
    load_slice(g, s, key, pos, npad);
    __syncthreads();
    bitonic_sort(key, pos, npad);
    store_slice(g, s, pos);
    __syncthreads(); // the next slice overwrites what this one reads
  }
}

// Block b sorts slice first + b in its own npad pairs of the workspace.
__global__ void sort_global_kernel(sort_geom g, int64_t npad, int64_t first, uint64_t *keys,
                                   int64_t *positions) {
  const int64_t s = first + blockIdx.x;
  uint64_t *key = keys + (int64_t)blockIdx.x * npad;
  int64_t *pos = positions + (int64_t)blockIdx.x * npad;
  load_slice(g, s, key, pos, npad);
  __syncthreads();
  bitonic_sort(key, pos, npad);
  store_slice(g, s, pos);
}

lt_status cuda_sort(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                    bool descending, int64_t k, int64_t index_base) {
  const char *op = "sort";
  int64_t inner = 1;
  for (int d = dim + 1; d < in->ndim; d++) inner *= in->shape[d];
  const int64_t size = in->shape[dim], numel = lt_numel(in);
  if (numel == 0 || k == 0) return LT_OK;
  sort_geom g;
  g.in = cuda_bytes(in);
  g.values = values ? cuda_bytes(values) : NULL;
  g.indices = indices ? (int64_t *)lt_data(indices) : NULL;
  g.dtype = in->dtype;
  g.es = (int)lt_dtype_size(in->dtype);
  g.size = size;
  g.k = k;
  g.inner = inner;
  g.slices = numel / size;
  g.base = index_base;
  g.descending = descending;
  int64_t npad = 1;
  while (npad < size) npad <<= 1;
  const int64_t half = npad / 2;
  const unsigned threads =
      (unsigned)(half < 1 ? 1 : half < SORT_MAX_THREADS ? half : SORT_MAX_THREADS);
  cuda_device_guard guard(in->storage->device);
  const cudaStream_t stream = cuda_stream();
  if (npad <= SORT_SHARED) {
    const unsigned blocks = (unsigned)(g.slices < 65535 * 8 ? g.slices : 65535 * 8);
    sort_shared_kernel<<<blocks, threads, 0, stream>>>(g, npad);
    return cuda_check_launch(op, "sort_shared_kernel");
  }
  const int64_t pair_bytes = (int64_t)(sizeof(uint64_t) + sizeof(int64_t));
  int64_t chunk = SORT_CHUNK_BYTES / (npad * pair_bytes);
  if (chunk < 1) chunk = 1;
  if (chunk > g.slices) chunk = g.slices;
  if (chunk > 65535) chunk = 65535;
  cuda_workspace ws;
  LT_TRY(ws.get(in->storage->device, (size_t)(chunk * npad * pair_bytes)));
  uint64_t *keys = (uint64_t *)ws.ptr;
  int64_t *positions = (int64_t *)(keys + chunk * npad);
  for (int64_t first = 0; first < g.slices; first += chunk) {
    const int64_t n = g.slices - first < chunk ? g.slices - first : chunk;
    sort_global_kernel<<<(unsigned)n, threads, 0, stream>>>(g, npad, first, keys, positions);
    LT_TRY(cuda_check_launch(op, "sort_global_kernel"));
  }
  return LT_OK;
}
