// mse_loss over same-shaped contiguous a and b, as cpu_nn_mse.c: every term
// (a - b)^2 is computed in double; reduction none stores each term in the
// input's dtype, mean and sum add the terms in double.
//
// The sum is a two-pass tree reduction: a fixed number of blocks (chosen
// from n alone) each fold a grid-strided share of the terms and a
// shared-memory tree into one partial, then one block folds the partials.
// The order depends only on n, so a result repeats run to run; it is not the
// CPU's order, so a float64 sum may differ from the CPU's in the last bits.
#include <stdint.h>

#include "cuda/cuda_nn_kernels.h"

#define MSE_THREADS 256      // a power of two (the trees halve it)
#define MSE_MAX_BLOCKS 1024  // partials of the first pass
#define MSE_PER_THREAD 8     // terms per thread before another block is worth it

// (a - b)^2 in double, with the product rounded on its own (__dmul_rn keeps
// the compiler from fusing it into the following add), as the CPU does.
template <typename T> __device__ inline double mse_term(const T *a, const T *b, int64_t e) {
  const double d = (double)a[e] - (double)b[e];
  return __dmul_rn(d, d);
}

template <typename T>
__global__ void mse_none_kernel(const T *a, const T *b, T *loss, int64_t n) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)blockDim.x * gridDim.x)
    loss[e] = (T)mse_term(a, b, e);
}

// Folds the block's values s[0 .. MSE_THREADS) into s[0].
__device__ inline void block_tree_sum(double *s) {
  __syncthreads();
  for (int half = MSE_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
}

template <typename T>
__global__ void mse_partial_kernel(const T *a, const T *b, int64_t n, double *partial) {
  __shared__ double s[MSE_THREADS];
  double sum = 0.0;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)blockDim.x * gridDim.x)
    sum += mse_term(a, b, e);
  s[threadIdx.x] = sum;
  block_tree_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// One block: the partials folded, then the mean or the sum stored. With no
// terms (n = 0) the sum is 0 and the mean 0 / 0 = NaN, as on the CPU.
template <typename T>
__global__ void mse_finish_kernel(const double *partial, int64_t nparts, int64_t n, bool mean,
                                  T *loss) {
  __shared__ double s[MSE_THREADS];
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < nparts; j += blockDim.x) sum += partial[j];
  s[threadIdx.x] = sum;
  block_tree_sum(s);
  if (threadIdx.x == 0) {
    const double total = s[0];
    loss[0] = (T)(mean ? total / (double)n : total);
  }
}

template <typename T>
static lt_status mse_loss_t(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                            lt_reduction reduction) {
  const cudaStream_t stream = cuda_stream();
  const char *op = "mse_loss";
  const int64_t n = lt_numel(a);
  const T *ad = (const T *)lt_data(a), *bd = (const T *)lt_data(b);
  T *ld = (T *)lt_data(loss);
  if (reduction == LT_REDUCTION_NONE) {
    if (n == 0) return LT_OK;
    mse_none_kernel<T><<<cuda_blocks_for(n), CUDA_THREADS, 0, stream>>>(ad, bd, ld, n);
    return cuda_check_launch(op, "mse_none_kernel");
  }
  int64_t blocks = (n + MSE_THREADS * MSE_PER_THREAD - 1) / (MSE_THREADS * MSE_PER_THREAD);
  if (blocks > MSE_MAX_BLOCKS) blocks = MSE_MAX_BLOCKS;
  cuda_workspace ws;
  double *partial = NULL;
  if (n > 0) {
    LT_TRY(ws.get(loss->storage->device, (size_t)blocks * sizeof(double)));
    partial = (double *)ws.ptr;
    mse_partial_kernel<T><<<(unsigned)blocks, MSE_THREADS, 0, stream>>>(ad, bd, n, partial);
    LT_TRY(cuda_check_launch(op, "mse_partial_kernel"));
  } else {
    blocks = 0; // still launch the finish: the 0-dim loss must be written
  }
  mse_finish_kernel<T><<<1, MSE_THREADS, 0, stream>>>(
      partial, blocks, n, reduction == LT_REDUCTION_MEAN, ld);
  return cuda_check_launch(op, "mse_finish_kernel");
}

lt_status cuda_nn_mse_loss(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                           lt_reduction reduction) {
  cuda_device_guard guard(loss->storage->device);
  if (a->dtype == LT_FLOAT64) return mse_loss_t<double>(loss, a, b, reduction);
  return mse_loss_t<float>(loss, a, b, reduction);
}

// ga = 2 (a - b) s, s = gl[e] (none), gl / n (mean) or gl (sum), in double
// and in the CPU's order of operations ((2 (a - b)) s, then one rounding).
template <typename T>
__global__ void mse_backward_kernel(const T *a, const T *b, const T *gl, T *ga, int64_t n,
                                    bool per_element, bool mean) {
  double scale = 0.0;
  if (!per_element) {
    const double g = (double)gl[0];
    scale = mean ? g / (double)n : g;
  }
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (int64_t)blockDim.x * gridDim.x) {
    const double s = per_element ? (double)gl[e] : scale;
    ga[e] = (T)(2.0 * ((double)a[e] - (double)b[e]) * s);
  }
}

lt_status cuda_nn_mse_loss_backward(lt_tensor *ga, const lt_tensor *gl, const lt_tensor *a,
                                    const lt_tensor *b, lt_reduction reduction) {
  cuda_device_guard guard(ga->storage->device);
  const cudaStream_t stream = cuda_stream();
  const int64_t n = lt_numel(a);
  if (n == 0) return LT_OK;
  const bool per_element = reduction == LT_REDUCTION_NONE, mean = reduction == LT_REDUCTION_MEAN;
  if (ga->dtype == LT_FLOAT64)
    mse_backward_kernel<double><<<cuda_blocks_for(n), CUDA_THREADS, 0, stream>>>(
        (const double *)lt_data(a), (const double *)lt_data(b), (const double *)lt_data(gl),
        (double *)lt_data(ga), n, per_element, mean);
  else
    mse_backward_kernel<float><<<cuda_blocks_for(n), CUDA_THREADS, 0, stream>>>(
        (const float *)lt_data(a), (const float *)lt_data(b), (const float *)lt_data(gl),
        (float *)lt_data(ga), n, per_element, mean);
  return cuda_check_launch("mse_loss_backward", "mse_backward_kernel");
}
