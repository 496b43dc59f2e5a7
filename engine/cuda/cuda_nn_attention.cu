// Scaled dot-product attention, tiled after FlashAttention (Dao et al. 2022)
// and FlashAttention-2 (Dao 2023), matching engine/cpu/cpu_nn_attention.c:
// an online softmax over blocks of keys in forward (running max m and sum l
// per query, the output rescaled by exp(m_old - m_new) when m grows), the
// log-sum-exp kept for backward, and in backward the probabilities
// recomputed a tile at a time with D = rowsum(dO * O), dS = P (dP - D).
// No L x S matrix is stored anywhere.
//
// A straightforward kernel, correctness first: one warp per query row
// (forward, dQ) or key row (dK, dV), ATTN_WARPS rows per block. The other
// side is walked in tiles of 32 rows, lane t taking row t of the tile, so a
// tile's 32 scores are one per lane and the softmax's max and sum are warp
// shuffles. The tile's operands are staged in shared memory ATTN_CHUNK
// columns at a time (any head size fits: no dynamic shared memory), shared
// by the block's warps. Each warp accumulates its row of the result in
// global memory directly, each lane owning the columns lane, lane + 32, ...:
// no two threads ever write one element, so there are no atomics, and the
// results are the same bits on every run.
//
// Dropout regenerates the keep mask from Philox (core/philox.h) with the
// CPU's numbering, so both backends drop the same elements.
#include <math.h>

#include "cuda/cuda_nn_kernels.h"

extern "C" {
#include "core/philox.h"
}

#define ATTN_WARPS 8 // rows per block
#define ATTN_THREADS (ATTN_WARPS * 32)
#define ATTN_TILE 32  // rows of the other side per tile: one per lane
#define ATTN_CHUNK 32 // columns staged in shared memory at a time

namespace {

const unsigned FULL_MASK = 0xffffffffu;

template <typename T> struct attn_ptrs {
  const T *q, *k, *v, *mask, *go, *o, *lse_in;
  const bool *bmask;
  T *out, *lse, *gq, *gk, *gv, *d;
};

__device__ inline int64_t batch_offset(const lt_nn_attn_geom &g, const int64_t *stride,
                                       int64_t b) {
  int64_t off = 0;
  for (int d = g.nb - 1; d >= 0; d--) {
    off += (b % g.batch[d]) * stride[d];
    b /= g.batch[d];
  }
  return off;
}

template <typename T> __device__ inline T dev_exp(T x);
template <> __device__ inline float dev_exp<float>(float x) { return expf(x); }
template <> __device__ inline double dev_exp<double>(double x) { return exp(x); }
template <typename T> __device__ inline T dev_log(T x);
template <> __device__ inline float dev_log<float>(float x) { return logf(x); }
template <> __device__ inline double dev_log<double>(double x) { return log(x); }

// max with NaN propagating from either side.
template <typename T> __device__ inline T nan_max(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}

template <typename T> __device__ inline T warp_max(T v) {
  for (int k = 16; k > 0; k >>= 1) v = nan_max(v, (T)__shfl_xor_sync(FULL_MASK, v, k));
  return __shfl_sync(FULL_MASK, v, 0); // every lane bit-identical
}

template <typename T> __device__ inline T warp_sum(T v) {
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(FULL_MASK, v, k);
  return __shfl_sync(FULL_MASK, v, 0);
}

// The keep factor of element (b, i, j): 1 / (1 - p) or 0, lt_bernoulli_'s
// rule on lane n % 4 of Philox block offset + n / 4, n = (b L + i) S + j.
template <typename T>
__device__ inline T keep_factor(const lt_nn_attn_geom &g, int64_t b, int64_t i, int64_t j) {
  if (g.dropout_p <= 0.0) return (T)1;
  const uint64_t n = ((uint64_t)(b * g.l + i)) * (uint64_t)g.s + (uint64_t)j;
  const uint64_t block = g.offset + n / 4;
  const uint32_t counter[4] = {(uint32_t)block, (uint32_t)(block >> 32), 0u, 0u};
  const uint32_t key[2] = {(uint32_t)g.seed, (uint32_t)(g.seed >> 32)};
  uint32_t w[4];
  lt_philox4x32_10(counter, key, w);
  const double keep = 1.0 - g.dropout_p;
  return w[n % 4] * (1.0 / 4294967296.0) < keep ? (T)(1.0 / keep) : (T)0;
}

// The score of query i and key j of problem b from the raw dot product:
// scaled, masked (-inf where removed). valid: j < S, i < L and the pair in
// range of the causal mask.
template <typename T>
__device__ inline T masked_score(const lt_nn_attn_geom &g, const attn_ptrs<T> &p, int64_t b,
                                 int64_t i, int64_t j, T dot, bool valid) {
  if (!valid) return (T)-INFINITY;
  T s = (T)g.scale * dot;
  if (g.mask != LT_NN_ATTN_NO_MASK) {
    const int64_t at = batch_offset(g, g.mask_stride, b) + i * g.mask_row + j * g.mask_col;
    if (g.mask == LT_NN_ATTN_BOOL_MASK) {
      if (!p.bmask[at]) s = (T)-INFINITY;
    } else {
      s += p.mask[at];
    }
  }
  return s;
}

// tile[t][c] = rows[r0 + t][c0 + c] of a [*, width] operand, zeros past
// nrows rows or width columns; the whole block loads.
template <typename T>
__device__ inline void stage(T (*tile)[ATTN_CHUNK + 1], const T *rows, int64_t r0, int64_t nrows,
                             int64_t c0, int64_t width) {
  for (int at = threadIdx.x; at < ATTN_TILE * ATTN_CHUNK; at += ATTN_THREADS) {
    const int t = at / ATTN_CHUNK, c = at % ATTN_CHUNK;
    const int64_t r = r0 + t, col = c0 + c;
    tile[t][c] = r < nrows && col < width ? rows[r * width + col] : (T)0;
  }
}

// sum_c row[c] tile[lane][c] over the columns [c0, c0 + ATTN_CHUNK) of a
// row of the given width.
template <typename T>
__device__ inline T chunk_dot(const T *row, const T (*tile)[ATTN_CHUNK + 1], int64_t c0,
                              int64_t width) {
  const int lane = threadIdx.x & 31;
  const int n = width - c0 < ATTN_CHUNK ? (int)(width - c0) : ATTN_CHUNK;
  T acc = 0;
  for (int c = 0; c < n; c++) acc += row[c0 + c] * tile[lane][c];
  return acc;
}

// sum_t coef(lane t) tile[t][lane]: column c0 + lane of coef^T tile.
template <typename T> __device__ inline T chunk_combine(T coef, const T (*tile)[ATTN_CHUNK + 1]) {
  const int lane = threadIdx.x & 31;
  T acc = 0;
  for (int t = 0; t < ATTN_TILE; t++) acc += __shfl_sync(FULL_MASK, coef, t) * tile[t][lane];
  return acc;
}

// ---- forward: one warp per query row ----

template <typename T> __global__ void attn_forward_kernel(lt_nn_attn_geom g, attn_ptrs<T> p) {
  __shared__ T tile[ATTN_TILE][ATTN_CHUNK + 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_blocks = (g.l + ATTN_WARPS - 1) / ATTN_WARPS;
  const int64_t b = blockIdx.x / row_blocks, i0 = (blockIdx.x % row_blocks) * ATTN_WARPS;
  const int64_t i = i0 + warp;
  const bool active = i < g.l; // warp-uniform
  const T *q = p.q + batch_offset(g, g.q_stride, b) + (active ? i : 0) * g.e;
  const T *k = p.k + batch_offset(g, g.k_stride, b), *v = p.v + batch_offset(g, g.v_stride, b);
  T *out = p.out + (b * g.l + (active ? i : 0)) * g.ev;
  if (active)
    for (int64_t c = lane; c < g.ev; c += 32) out[c] = 0;
  // The keys the block's queries see (a block-uniform bound for the barriers).
  const int64_t last = i0 + ATTN_WARPS < g.l ? i0 + ATTN_WARPS : g.l;
  const int64_t kend = g.causal ? (last < g.s ? last : g.s) : g.s;
  T m = (T)-INFINITY, l = 0;
  for (int64_t j0 = 0; j0 < kend; j0 += ATTN_TILE) {
    T dot = 0;
    for (int64_t e0 = 0; e0 < g.e; e0 += ATTN_CHUNK) {
      __syncthreads(); // the previous chunk's readers are done
      stage(tile, k, j0, g.s, e0, g.e);
      __syncthreads();
      if (active) dot += chunk_dot(q, tile, e0, g.e);
    }
    const int64_t j = j0 + lane;
    const bool valid = active && j < g.s && (!g.causal || j <= i);
    const T s = masked_score(g, p, b, i, j, dot, valid);
    T pd = 0, alpha = 1;
    if (active) {
      const T mnew = nan_max(m, warp_max(s));
      if (mnew != (T)-INFINITY) { // otherwise every key so far removed: P is 0
        const T pr = s == (T)-INFINITY ? (T)0 : dev_exp(s - mnew);
        alpha = m == (T)-INFINITY ? (T)0 : dev_exp(m - mnew);
        l = l * alpha + warp_sum(pr);
        m = mnew;
        pd = valid ? pr * keep_factor<T>(g, b, i, j) : (T)0;
      }
    }
    for (int64_t c0 = 0; c0 < g.ev; c0 += ATTN_CHUNK) {
      __syncthreads();
      stage(tile, v, j0, g.s, c0, g.ev);
      __syncthreads();
      if (active) {
        const T add = chunk_combine(pd, tile);
        if (c0 + lane < g.ev) out[c0 + lane] = out[c0 + lane] * alpha + add;
      }
    }
  }
  if (!active) return;
  const bool empty = l == (T)0; // no key: zeros (as accumulated) and lse +inf
  for (int64_t c = lane; c < g.ev; c += 32)
    if (!empty) out[c] = out[c] / l;
  if (lane == 0) p.lse[b * g.l + i] = empty ? (T)INFINITY : m + dev_log(l);
}

// ---- backward ----

// D[r] = sum_c dO[r, c] O[r, c], one warp per row.
template <typename T> __global__ void attn_d_kernel(lt_nn_attn_geom g, attn_ptrs<T> p) {
  const int64_t r = (int64_t)blockIdx.x * ATTN_WARPS + (threadIdx.x >> 5);
  if (r >= g.nbatch * g.l) return; // warp-uniform
  const int lane = threadIdx.x & 31;
  double sum = 0.0;
  for (int64_t c = lane; c < g.ev; c += 32)
    sum += (double)p.go[r * g.ev + c] * (double)p.o[r * g.ev + c];
  sum = warp_sum(sum);
  if (lane == 0) p.d[r] = (T)sum;
}

// P = exp(s - lse) (0 where removed or the row has no key, lse +inf).
template <typename T> __device__ inline T prob(T s, T lse) {
  return s == (T)-INFINITY ? (T)0 : dev_exp(s - lse);
}

// dQ: one warp per query row, tiles of keys.
template <typename T> __global__ void attn_dq_kernel(lt_nn_attn_geom g, attn_ptrs<T> p) {
  __shared__ T tile[ATTN_TILE][ATTN_CHUNK + 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_blocks = (g.l + ATTN_WARPS - 1) / ATTN_WARPS;
  const int64_t b = blockIdx.x / row_blocks, i0 = (blockIdx.x % row_blocks) * ATTN_WARPS;
  const int64_t i = i0 + warp;
  const bool active = i < g.l;
  const int64_t ri = b * g.l + (active ? i : 0);
  const T *q = p.q + batch_offset(g, g.q_stride, b) + (active ? i : 0) * g.e;
  const T *k = p.k + batch_offset(g, g.k_stride, b), *v = p.v + batch_offset(g, g.v_stride, b);
  const T *go = p.go + ri * g.ev;
  T *gq = p.gq + ri * g.e;
  if (active)
    for (int64_t c = lane; c < g.e; c += 32) gq[c] = 0;
  const T lse = active ? p.lse_in[ri] : (T)0, d = active ? p.d[ri] : (T)0;
  const int64_t last = i0 + ATTN_WARPS < g.l ? i0 + ATTN_WARPS : g.l;
  const int64_t kend = g.causal ? (last < g.s ? last : g.s) : g.s;
  for (int64_t j0 = 0; j0 < kend; j0 += ATTN_TILE) {
    T dot = 0, dp = 0;
    for (int64_t e0 = 0; e0 < g.e; e0 += ATTN_CHUNK) {
      __syncthreads();
      stage(tile, k, j0, g.s, e0, g.e);
      __syncthreads();
      if (active) dot += chunk_dot(q, tile, e0, g.e);
    }
    for (int64_t c0 = 0; c0 < g.ev; c0 += ATTN_CHUNK) {
      __syncthreads();
      stage(tile, v, j0, g.s, c0, g.ev);
      __syncthreads();
      if (active) dp += chunk_dot(go, tile, c0, g.ev);
    }
    const int64_t j = j0 + lane;
    const bool valid = active && j < g.s && (!g.causal || j <= i);
    const T pr = valid ? prob(masked_score(g, p, b, i, j, dot, true), lse) : (T)0;
    const T ds = valid ? pr * (dp * keep_factor<T>(g, b, i, j) - d) : (T)0;
    for (int64_t e0 = 0; e0 < g.e; e0 += ATTN_CHUNK) { // dQ += scale dS K
      __syncthreads();
      stage(tile, k, j0, g.s, e0, g.e);
      __syncthreads();
      if (active) {
        const T add = chunk_combine(ds, tile);
        if (e0 + lane < g.e) gq[e0 + lane] += (T)g.scale * add;
      }
    }
  }
}

// dK and dV: one warp per key row, tiles of queries.
template <typename T> __global__ void attn_dkv_kernel(lt_nn_attn_geom g, attn_ptrs<T> p) {
  __shared__ T tile[ATTN_TILE][ATTN_CHUNK + 1];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t row_blocks = (g.s + ATTN_WARPS - 1) / ATTN_WARPS;
  const int64_t b = blockIdx.x / row_blocks, j0 = (blockIdx.x % row_blocks) * ATTN_WARPS;
  const int64_t j = j0 + warp;
  const bool active = j < g.s;
  const T *q = p.q + batch_offset(g, g.q_stride, b);
  const T *kj = p.k + batch_offset(g, g.k_stride, b) + (active ? j : 0) * g.e;
  const T *vj = p.v + batch_offset(g, g.v_stride, b) + (active ? j : 0) * g.ev;
  const T *go = p.go + b * g.l * g.ev;
  T *gk = p.gk ? p.gk + (b * g.s + (active ? j : 0)) * g.e : NULL;
  T *gv = p.gv ? p.gv + (b * g.s + (active ? j : 0)) * g.ev : NULL;
  if (active) {
    if (gk)
      for (int64_t c = lane; c < g.e; c += 32) gk[c] = 0;
    if (gv)
      for (int64_t c = lane; c < g.ev; c += 32) gv[c] = 0;
  }
  // Under the causal mask key j is seen from query j on: start at the tile
  // holding the block's first key.
  const int64_t first = g.causal ? j0 / ATTN_TILE * ATTN_TILE : 0;
  for (int64_t i0 = first; i0 < g.l; i0 += ATTN_TILE) {
    const int64_t i = i0 + lane;
    T dot = 0, dp = 0;
    for (int64_t e0 = 0; e0 < g.e; e0 += ATTN_CHUNK) { // q_i . k_j, lane i
      __syncthreads();
      stage(tile, q, i0, g.l, e0, g.e);
      __syncthreads();
      if (active) dot += chunk_dot(kj, tile, e0, g.e);
    }
    for (int64_t c0 = 0; c0 < g.ev; c0 += ATTN_CHUNK) { // dO_i . v_j
      __syncthreads();
      stage(tile, go, i0, g.l, c0, g.ev);
      __syncthreads();
      if (active) dp += chunk_dot(vj, tile, c0, g.ev);
    }
    const bool valid = active && i < g.l && (!g.causal || j <= i);
    T pd = 0, ds = 0;
    if (valid) {
      const int64_t ri = b * g.l + i;
      const T pr = prob(masked_score(g, p, b, i, j, dot, true), p.lse_in[ri]);
      const T z = keep_factor<T>(g, b, i, j);
      pd = pr * z;
      ds = pr * (dp * z - p.d[ri]);
    }
    for (int64_t c0 = 0; gv && c0 < g.ev; c0 += ATTN_CHUNK) { // dV += (P z)^T dO
      __syncthreads();
      stage(tile, go, i0, g.l, c0, g.ev);
      __syncthreads();
      if (active) {
        const T add = chunk_combine(pd, tile);
        if (c0 + lane < g.ev) gv[c0 + lane] += add;
      }
    }
    for (int64_t e0 = 0; gk && e0 < g.e; e0 += ATTN_CHUNK) { // dK += scale dS^T Q
      __syncthreads();
      stage(tile, q, i0, g.l, e0, g.e);
      __syncthreads();
      if (active) {
        const T add = chunk_combine(ds, tile);
        if (e0 + lane < g.e) gk[e0 + lane] += (T)g.scale * add;
      }
    }
  }
}

// One block per ATTN_WARPS rows of each problem; more than the grid's x
// limit is refused (a grid-stride loop would need the barriers rethought).
lt_status blocks_for(const char *op, int64_t nbatch, int64_t rows, unsigned *blocks) {
  const int64_t n = nbatch * ((rows + ATTN_WARPS - 1) / ATTN_WARPS);
  if (n > 2147483647)
    return lt_error(LT_ERR_ARG, "cuda: %s: %lld problems of %lld rows need more than 2^31 - 1 blocks",
                    op, (long long)nbatch, (long long)rows);
  *blocks = (unsigned)n;
  return LT_OK;
}

template <typename T>
attn_ptrs<T> pointers(const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                      const lt_tensor *mask, const lt_nn_attn_geom *g) {
  attn_ptrs<T> p = {};
  p.q = (const T *)cuda_bytes(q);
  p.k = (const T *)cuda_bytes(k);
  p.v = (const T *)cuda_bytes(v);
  if (g->mask == LT_NN_ATTN_BOOL_MASK) p.bmask = (const bool *)cuda_bytes(mask);
  if (g->mask == LT_NN_ATTN_ADDITIVE_MASK) p.mask = (const T *)cuda_bytes(mask);
  return p;
}

template <typename T>
lt_status forward(lt_tensor *out, lt_tensor *lse, const lt_tensor *q, const lt_tensor *k,
                  const lt_tensor *v, const lt_tensor *mask, const lt_nn_attn_geom *g) {
  attn_ptrs<T> p = pointers<T>(q, k, v, mask, g);
  p.out = (T *)cuda_bytes(out);
  p.lse = (T *)cuda_bytes(lse);
  if (g->nbatch == 0 || g->l == 0) return LT_OK;
  unsigned blocks = 0;
  LT_TRY(blocks_for("scaled_dot_product_attention", g->nbatch, g->l, &blocks));
  attn_forward_kernel<T><<<blocks, ATTN_THREADS, 0, cuda_stream()>>>(*g, p);
  return cuda_check_launch("scaled_dot_product_attention", "attn_forward_kernel");
}

template <typename T>
lt_status backward(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv, const lt_tensor *go,
                   const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                   const lt_tensor *out, const lt_tensor *lse, const lt_tensor *mask,
                   const lt_nn_attn_geom *g) {
  const char *op = "scaled_dot_product_attention_backward";
  const cudaStream_t stream = cuda_stream();
  attn_ptrs<T> p = pointers<T>(q, k, v, mask, g);
  p.go = (const T *)cuda_bytes(go);
  p.o = (const T *)cuda_bytes(out);
  p.lse_in = (const T *)cuda_bytes(lse);
  p.gq = gq ? (T *)cuda_bytes(gq) : NULL;
  p.gk = gk ? (T *)cuda_bytes(gk) : NULL;
  p.gv = gv ? (T *)cuda_bytes(gv) : NULL;
  if (g->nbatch == 0) return LT_OK;
  unsigned q_blocks = 0, k_blocks = 0;
  LT_TRY(blocks_for(op, g->nbatch, g->l, &q_blocks));
  LT_TRY(blocks_for(op, g->nbatch, g->s, &k_blocks));
  cuda_workspace ws; // D [nbatch, L]
  if (g->l > 0) {
    LT_TRY(ws.get(q->storage->device, (size_t)(g->nbatch * g->l) * sizeof(T)));
    p.d = (T *)ws.ptr;
    attn_d_kernel<T><<<q_blocks, ATTN_THREADS, 0, stream>>>(*g, p);
    LT_TRY(cuda_check_launch(op, "attn_d_kernel"));
  }
  if ((gk || gv) && g->s > 0) {
    attn_dkv_kernel<T><<<k_blocks, ATTN_THREADS, 0, stream>>>(*g, p);
    LT_TRY(cuda_check_launch(op, "attn_dkv_kernel"));
  }
  if (gq && g->l > 0) {
    attn_dq_kernel<T><<<q_blocks, ATTN_THREADS, 0, stream>>>(*g, p);
    LT_TRY(cuda_check_launch(op, "attn_dq_kernel"));
  }
  return LT_OK;
}

} // namespace

lt_status cuda_nn_attention(lt_tensor *out, lt_tensor *lse, const lt_tensor *q,
                            const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask,
                            const lt_nn_attn_geom *g) {
  cuda_device_guard guard(out->storage->device);
  if (q->dtype == LT_FLOAT64) return forward<double>(out, lse, q, k, v, mask, g);
  return forward<float>(out, lse, q, k, v, mask, g);
}

lt_status cuda_nn_attention_backward(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv,
                                     const lt_tensor *go, const lt_tensor *q, const lt_tensor *k,
                                     const lt_tensor *v, const lt_tensor *out,
                                     const lt_tensor *lse, const lt_tensor *mask,
                                     const lt_nn_attn_geom *g) {
  cuda_device_guard guard(q->storage->device);
  if (q->dtype == LT_FLOAT64) return backward<double>(gq, gk, gv, go, q, k, v, out, lse, mask, g);
  return backward<float>(gq, gk, gv, go, q, k, v, out, lse, mask, g);
}
