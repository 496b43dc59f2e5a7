// embedding: a row gather forward; backward sums gradient rows into the
// dense weight gradient, deterministically and in the CPU's order.
//
// Backward: rows may repeat, and cpu_nn_embedding.c adds the gradient rows
// of each weight row in index order (rounding to T after each add). Here
// every position r of the indices becomes the key (row << pbits) | r, unique
// per position, and the keys are sorted (a bitonic sort: with unique keys
// any correct sort gives the one ascending order, so stability does not
// matter). Each row's positions then lie together in ascending order, and
// one thread per (first slot of a row, column) walks that row's run adding
// in the CPU's order with the CPU's rounding. No atomics: every gw element is
// written by one thread, and the result is the CPU's bit for bit. Rows no
// index hits (and padding_row) keep the zeros written first.
#include <stdint.h>

#include "cuda/cuda_nn_kernels.h"

// ---- forward ----

template <typename T>
__global__ void gather_rows_kernel(T *out, const T *weight, const int64_t *indices, int64_t m,
                                   int64_t d, int64_t base) {
  const int64_t total = m * d;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t r = i / d, c = i % d;
    out[i] = weight[(indices[r] - base) * d + c];
  }
}

lt_status cuda_nn_embedding(lt_tensor *out, const lt_tensor *weight, const lt_tensor *indices,
                            int64_t index_base) {
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream();
  const int64_t m = lt_numel(indices), d = weight->shape[1];
  const int64_t total = m * d;
  if (total == 0) return LT_OK;
  const int64_t *idx = (const int64_t *)lt_data(indices);
  // ops/nn_embedding.c hands over the weight in its own dtype (a gather only
  // copies bytes, so float16 and bfloat16 run natively): move elements of
  // the weight's size as raw bits, never as float.
  switch (lt_dtype_size(weight->dtype)) {
    case 8:
      gather_rows_kernel<uint64_t><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
          (uint64_t *)lt_data(out), (const uint64_t *)lt_data(weight), idx, m, d, index_base);
      break;
    case 4:
      gather_rows_kernel<uint32_t><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
          (uint32_t *)lt_data(out), (const uint32_t *)lt_data(weight), idx, m, d, index_base);
      break;
    case 2:
      gather_rows_kernel<uint16_t><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
          (uint16_t *)lt_data(out), (const uint16_t *)lt_data(weight), idx, m, d, index_base);
      break;
    default:
      return lt_error(LT_ERR_DTYPE, "cuda: embedding: unsupported weight dtype %s",
                      lt_dtype_name(weight->dtype));
  }
  return cuda_check_launch("embedding", "gather_rows_kernel");
}

// ---- backward ----

// Bitonic sort of npad (a power of two, at least SORT_TILE) uint64 keys,
// ascending. Stages of compare-exchange distance j >= SORT_TILE run as
// global passes; everything below runs within SORT_TILE-element tiles in
// shared memory.
#define SORT_TILE 2048
#define SORT_THREADS (SORT_TILE / 2) // one compare-exchange pair per thread

// Pair t of a pass at distance j: i has bit j clear, its partner is i + j.
// The direction alternates with bit k of i (k: the size of the sequences
// being merged), which is what makes the merged sequences bitonic.
__device__ inline void pair_of(int64_t t, int64_t j, int64_t *i, int64_t *l) {
  *i = 2 * j * (t / j) + t % j;
  *l = *i + j;
}

__global__ void bitonic_global_kernel(uint64_t *s, int64_t npad, int64_t k, int64_t j) {
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < npad / 2;
       t += (int64_t)blockDim.x * gridDim.x) {
    int64_t i, l;
    pair_of(t, j, &i, &l);
    const bool ascending = (i & k) == 0;
    const uint64_t a = s[i], b = s[l];
    if ((a > b) == ascending) s[i] = b, s[l] = a;
  }
}

// stage 0: sorts each tile completely (merge sizes k = 2 .. SORT_TILE).
// stage k > SORT_TILE: finishes merge stage k for distances below SORT_TILE.
// Directions use the global index, so tiles alternate as the sort needs.
__global__ void bitonic_tile_kernel(uint64_t *s, int64_t stage) {
  __shared__ uint64_t t[SORT_TILE];
  const int64_t base = (int64_t)blockIdx.x * SORT_TILE;
  const int p = threadIdx.x;
  t[p] = s[base + p];
  t[p + SORT_THREADS] = s[base + p + SORT_THREADS];
  __syncthreads();
  const int64_t k0 = stage ? stage : 2, k1 = stage ? stage : SORT_TILE;
  for (int64_t k = k0; k <= k1; k <<= 1)
    for (int64_t j = (k >> 1) < SORT_TILE / 2 ? (k >> 1) : SORT_TILE / 2; j > 0; j >>= 1) {
      int64_t i, l;
      pair_of(p, j, &i, &l);
      const bool ascending = ((base + i) & k) == 0;
      const uint64_t a = t[i], b = t[l];
      if ((a > b) == ascending) t[i] = b, t[l] = a;
      __syncthreads();
    }
  s[base + p] = t[p];
  s[base + p + SORT_THREADS] = t[p + SORT_THREADS];
}

// s[r] = (row of position r) << pbits | r; the padding above m gets
// UINT64_MAX, which sorts last (real keys are below 2^63).
__global__ void row_keys_kernel(const int64_t *indices, int64_t m, int64_t npad, int64_t base,
                                int pbits, uint64_t *s) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < npad;
       r += (int64_t)blockDim.x * gridDim.x)
    s[r] = r < m ? ((uint64_t)(indices[r] - base) << pbits) | (uint64_t)r : UINT64_MAX;
}

// One thread per (sorted slot i, column c); only the slot that starts a run
// of one row works, adding go over the run in its (ascending) position
// order. Threads of a warp share i and take adjacent columns, so each step
// reads a contiguous stretch of a gradient row.
template <typename T>
__global__ void run_sums_kernel(const uint64_t *s, int64_t m, int64_t d, int pbits,
                                int64_t padding_row, const T *go, T *gw) {
  const uint64_t pos_mask = ((uint64_t)1 << pbits) - 1;
  const int64_t total = m * d;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
       t += (int64_t)blockDim.x * gridDim.x) {
    const int64_t i = t / d, c = t % d;
    const uint64_t row = s[i] >> pbits;
    if (i > 0 && (s[i - 1] >> pbits) == row) continue; // not the start of a run
    if ((int64_t)row == padding_row) continue;          // its gradient stays zero
    T acc = (T)0;
    for (int64_t j = i; j < m && (s[j] >> pbits) == row; j++)
      acc = acc + go[(int64_t)(s[j] & pos_mask) * d + c];
    gw[(int64_t)row * d + c] = acc;
  }
}

// Bits to hold every value below n (at least 1).
static int bits_below(int64_t n) {
  int b = 1;
  while (b < 63 && ((int64_t)1 << b) < n) b++;
  return b;
}

lt_status cuda_nn_embedding_backward(lt_tensor *gw, const lt_tensor *go, const lt_tensor *indices,
                                     int64_t index_base, int64_t padding_row) {
  const char *op = "embedding_backward";
  cuda_device_guard guard(gw->storage->device);
  const cudaStream_t stream = cuda_stream();
  const int64_t m = lt_numel(indices), n = gw->shape[0], d = gw->shape[1];
  if (n * d == 0) return LT_OK;
  CUDA_TRY(op, cudaMemsetAsync(lt_data(gw), 0, lt_nbytes(gw), stream));
  if (m == 0) return LT_OK;

  const int pbits = bits_below(m), rbits = bits_below(n);
  if (pbits + rbits > 63)
    return lt_error(LT_ERR_ARG, "cuda: %s: %lld indices into %lld rows are too many to sort",
                    op, (long long)m, (long long)n);
  int64_t npad = SORT_TILE;
  while (npad < m) npad <<= 1;
  cuda_workspace ws;
  LT_TRY(ws.get(gw->storage->device, (size_t)npad * sizeof(uint64_t)));
  uint64_t *s = (uint64_t *)ws.ptr;

  row_keys_kernel<<<cuda_blocks_for(npad), CUDA_THREADS, 0, stream>>>(
      (const int64_t *)lt_data(indices), m, npad, index_base, pbits, s);
  LT_TRY(cuda_check_launch(op, "row_keys_kernel"));
  const unsigned tiles = (unsigned)(npad / SORT_TILE);
  bitonic_tile_kernel<<<tiles, SORT_THREADS, 0, stream>>>(s, 0);
  LT_TRY(cuda_check_launch(op, "bitonic_tile_kernel"));
  for (int64_t k = 2 * SORT_TILE; k <= npad; k <<= 1) {
    for (int64_t j = k >> 1; j >= SORT_TILE; j >>= 1) {
      bitonic_global_kernel<<<cuda_blocks_for(npad / 2), CUDA_THREADS, 0, stream>>>(
          s, npad, k, j);
      LT_TRY(cuda_check_launch(op, "bitonic_global_kernel"));
    }
    bitonic_tile_kernel<<<tiles, SORT_THREADS, 0, stream>>>(s, k);
    LT_TRY(cuda_check_launch(op, "bitonic_tile_kernel"));
  }

  const int64_t total = m * d;
  if (gw->dtype == LT_FLOAT64)
    run_sums_kernel<double><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        s, m, d, pbits, padding_row, (const double *)lt_data(go), (double *)lt_data(gw));
  else
    run_sums_kernel<float><<<cuda_blocks_for(total), CUDA_THREADS, 0, stream>>>(
        s, m, d, pbits, padding_row, (const float *)lt_data(go), (float *)lt_data(gw));
  return cuda_check_launch(op, "run_sums_kernel");
}
