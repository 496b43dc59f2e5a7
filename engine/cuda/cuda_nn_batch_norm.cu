// batch_norm over x [N, C, S] (contiguous), matching cpu/cpu_nn_batch_norm.c:
//   training: mean and biased variance of each channel over N and S;
//             save_mean = mean, save_invstd = 1 / sqrt(var + eps); running
//             stats (when given) become (1 - momentum) running + momentum
//             batch, with the unbiased variance;
//   eval:     save_mean = running_mean, save_invstd = 1 / sqrt(running_var
//             + eps), running stats untouched;
//   out = (x - mean) invstd w + b, with w = 1 and b = 0 when NULL.
// Backward: gw = sum(go xhat), gb = sum(go) per channel and
//   training: gx = w invstd (go - mean(go) - xhat mean(go xhat)),
//   eval:     gx = w invstd go (the statistics are constants),
// with xhat = (x - mean) invstd from the saved statistics.
//
// Dtypes (the table's half_batch_norm): x, out, go and gx are float32,
// float64, float16 or bfloat16; every per-channel tensor (weight, bias,
// running and saved statistics, gw, gb) has x's dtype, or float32 for 16-bit
// x. That is cuDNN's mixed-precision batch norm (the scale/bias/mean/var
// descriptor cudnnDeriveBNTensorDescriptor derives for half data is float)
// and what PyTorch does on CUDA, where autocast leaves batch norm in the
// input's dtype with the module's float32 parameters and statistics.
//
// cuDNN does the work where it can: x is viewed as the NCHW tensor
// [N, C, S, 1] and normalised per channel (CUDNN_BATCHNORM_SPATIAL), scale,
// bias and statistics sharing the descriptor cudnnDeriveBNTensorDescriptor
// gives. cuDNN's resultRunningVariance is the sample (unbiased) variance's
// moving average and its resultSaveInvVariance 1 / sqrt(biased var + eps),
// the CPU's definitions. The plain kernels below take the rest: eval-mode
// backward (cuDNN's backward is the training formula), a backward that needs
// no gx (cuDNN would want an x-sized scratch gx), eps under
// CUDNN_BN_MIN_EPSILON, one value per channel in training, tensors past
// cuDNN's 32-bit limits, operands not 16-byte aligned (views at an odd
// offset: cuDNN may use vector loads), empty batches, anything cuDNN
// answers CUDNN_STATUS_NOT_SUPPORTED, and every bfloat16 call (PyTorch
// keeps bfloat16 off cuDNN's batch norm too, running its native kernels).
// They compute exactly the CPU's formulas, in double, one block per channel
// with shared-memory tree sums (no atomics: results depend only on the
// shapes); 16-bit elements are widened on load and rounded through float on
// store, which is the CPU reference's float32 conversion followed by its
// rounding to 16 bits.
//
// Every launch, copy and cuDNN call of one op runs on lt's current stream,
// read once (cuda_stream()) by the entry point under its device guard and
// passed down, so that an op never straddles two streams.
#include <math.h>

#include <initializer_list>

#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_cudnn.h"
#include "cuda/cuda_nn_kernels.h"

#define BN_THREADS 256 // a power of two: the tree halves it

// cuDNN's backward wants an epsilon (>= CUDNN_BN_MIN_EPSILON) but with the
// saved mean and inverse deviation given it reads those instead of
// recomputing them, so the value does not enter the result. The contract
// passes no eps to backward; this one is valid for every cuDNN version.
#define BN_BACKWARD_EPS (CUDNN_BN_MIN_EPSILON > 1e-5 ? CUDNN_BN_MIN_EPSILON : 1e-5)

// Everything up to the entry points has internal linkage (an unnamed
// namespace): kernel and struct names cannot collide with other files'.
namespace {

// ---- element access ----

// 16-bit storage as raw bits (cuda_convert.cuh's convention: no operand
// needs the CUDA types' constructors); distinct types so that templates
// pick the right widening.
struct bn_f16 {
  uint16_t bits;
};
struct bn_bf16 {
  uint16_t bits;
};

// Element i of p widened to double, the kernels' compute type.
__device__ inline double bn_ld(const float *p, int64_t i) { return (double)p[i]; }
__device__ inline double bn_ld(const double *p, int64_t i) { return p[i]; }
__device__ inline double bn_ld(const bn_f16 *p, int64_t i) {
  return (double)cuda_half_bits_to_float(p[i].bits);
}
__device__ inline double bn_ld(const bn_bf16 *p, int64_t i) {
  return (double)cuda_bf16_bits_to_float(p[i].bits);
}

// Stores v as element i of p. 16-bit goes through float, as the CPU path
// does (a float32 result converted to 16 bits).
__device__ inline void bn_st(float *p, int64_t i, double v) { p[i] = (float)v; }
__device__ inline void bn_st(double *p, int64_t i, double v) { p[i] = v; }
__device__ inline void bn_st(bn_f16 *p, int64_t i, double v) {
  p[i].bits = cuda_float_to_half_bits((float)v);
}
__device__ inline void bn_st(bn_bf16 *p, int64_t i, double v) {
  p[i].bits = cuda_float_to_bf16_bits((float)v);
}

// ---- plain kernels ----
// X: the storage type of x, out, go, gx; P: that of the per-channel tensors.

// The block's sum of v (every thread passes one), returned to every thread.
// blockDim.x must be BN_THREADS.
__device__ inline double bn_block_sum(double *part, double v) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double r = part[0];
  __syncthreads(); // part is written again by the next sum
  return r;
}

template <typename X, typename P> struct bn_forward_args {
  const X *x;
  X *out;
  const P *w, *b;
  P *mean, *invstd, *rm, *rv;
  int64_t n, c, s;
  bool training;
  double momentum, eps;
};

// Element k (0 <= k < N S) of channel c sits at (i C + c) S + p with
// i = k / S, p = k % S.
__device__ inline int64_t bn_index(int64_t k, int64_t c, int64_t channels, int64_t s) {
  return ((k / s) * channels + c) * s + k % s;
}

template <typename X, typename P> __global__ void bn_forward_kernel(bn_forward_args<X, P> a) {
  __shared__ double part[BN_THREADS];
  const int64_t count = a.n * a.s;
  for (int64_t c = blockIdx.x; c < a.c; c += gridDim.x) {
    double mean, invstd;
    if (a.training) {
      // Two passes, as the CPU: the mean, then the mean squared deviation.
      double acc = 0.0;
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
        acc += bn_ld(a.x, bn_index(k, c, a.c, a.s));
      mean = bn_block_sum(part, acc) / (double)count;
      acc = 0.0;
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
        const double d = bn_ld(a.x, bn_index(k, c, a.c, a.s)) - mean;
        acc += d * d;
      }
      const double sq = bn_block_sum(part, acc);
      invstd = 1.0 / sqrt(sq / (double)count + a.eps);
      if (threadIdx.x == 0) {
        const double m = a.momentum;
        if (a.rm) bn_st(a.rm, c, (1.0 - m) * bn_ld(a.rm, c) + m * mean);
        if (a.rv) bn_st(a.rv, c, (1.0 - m) * bn_ld(a.rv, c) + m * (sq / (double)(count - 1)));
      }
    } else {
      mean = bn_ld(a.rm, c);
      invstd = 1.0 / sqrt(bn_ld(a.rv, c) + a.eps);
    }
    if (threadIdx.x == 0) {
      bn_st(a.mean, c, mean);
      bn_st(a.invstd, c, invstd);
    }
    // y = x scale + shift, scale = w invstd, shift = b - mean scale.
    const double w = a.w ? bn_ld(a.w, c) : 1.0, b = a.b ? bn_ld(a.b, c) : 0.0;
    const double scale = w * invstd, shift = b - mean * scale;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = bn_index(k, c, a.c, a.s);
      bn_st(a.out, i, bn_ld(a.x, i) * scale + shift);
    }
  }
}

template <typename X, typename P> struct bn_backward_args {
  const X *x, *go;
  X *gx;
  const P *w, *mean, *invstd;
  P *gw, *gb;
  int64_t n, c, s;
  bool training;
};

template <typename X, typename P> __global__ void bn_backward_kernel(bn_backward_args<X, P> a) {
  __shared__ double part[BN_THREADS];
  const int64_t count = a.n * a.s;
  for (int64_t c = blockIdx.x; c < a.c; c += gridDim.x) {
    const double mean = bn_ld(a.mean, c), invstd = bn_ld(a.invstd, c);
    const double w = a.w ? bn_ld(a.w, c) : 1.0;
    double acc_go = 0.0, acc_go_xc = 0.0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = bn_index(k, c, a.c, a.s);
      const double g = bn_ld(a.go, i);
      acc_go += g;
      acc_go_xc += g * (bn_ld(a.x, i) - mean);
    }
    const double sum_go = bn_block_sum(part, acc_go);
    const double sum_go_xhat = bn_block_sum(part, acc_go_xc) * invstd;
    if (threadIdx.x == 0) {
      if (a.gw) bn_st(a.gw, c, sum_go_xhat);
      if (a.gb) bn_st(a.gb, c, sum_go);
    }
    if (!a.gx) continue; // uniform over the block: no barrier is skipped unevenly
    const double k_ = w * invstd;
    const double mean_go = a.training ? sum_go / (double)count : 0.0;
    const double proj = a.training ? sum_go_xhat / (double)count : 0.0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t i = bn_index(k, c, a.c, a.s);
      const double xhat = (bn_ld(a.x, i) - mean) * invstd;
      bn_st(a.gx, i, k_ * (bn_ld(a.go, i) - mean_go - xhat * proj));
    }
  }
}

// Eval mode after cuDNN's inference: the statistics backward will use.
template <typename T>
__global__ void bn_eval_stats_kernel(const T *rm, const T *rv, T *mean, T *invstd, int64_t c,
                                     double eps) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < c;
       i += (int64_t)blockDim.x * gridDim.x) {
    mean[i] = rm[i];
    invstd[i] = (T)(1.0 / sqrt((double)rv[i] + eps));
  }
}

template <typename T> __global__ void bn_fill_kernel(T *p, int64_t n, T v) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)blockDim.x * gridDim.x)
    p[i] = v;
}

static unsigned channel_blocks(int64_t channels) {
  return (unsigned)(channels < 65535 * 8 ? channels : 65535 * 8);
}

// ---- helpers ----

static bool is_half(lt_dtype dt) { return dt == LT_FLOAT16 || dt == LT_BFLOAT16; }

// The dtype of the per-channel tensors for an x of dtype dt.
static lt_dtype param_dtype(lt_dtype dt) { return is_half(dt) ? LT_FLOAT32 : dt; }

// The dtype contract above, checked once per call on the host: a mismatch
// would have a kernel or cuDNN read elements of the wrong size. data: the
// x-sized tensors besides x, params: the per-channel ones (NULL skipped).
static lt_status check_dtypes(const char *op, const lt_tensor *x,
                              std::initializer_list<const lt_tensor *> data,
                              std::initializer_list<const lt_tensor *> params) {
  const lt_dtype dt = x->dtype;
  if (dt != LT_FLOAT32 && dt != LT_FLOAT64 && !is_half(dt))
    return lt_error(LT_ERR_DTYPE,
                    "cuda: %s: expected float32, float64, float16 or bfloat16, got %s", op,
                    lt_dtype_name(dt));
  for (const lt_tensor *t : data)
    if (t && t->dtype != dt)
      return lt_error(LT_ERR_DTYPE, "cuda: %s: expected %s (as the input), got %s", op,
                      lt_dtype_name(dt), lt_dtype_name(t->dtype));
  const lt_dtype pdt = param_dtype(dt);
  for (const lt_tensor *t : params)
    if (t && t->dtype != pdt)
      return lt_error(LT_ERR_DTYPE,
                      "cuda: %s: expected %s per-channel tensors for %s input, got %s", op,
                      lt_dtype_name(pdt), lt_dtype_name(dt), lt_dtype_name(t->dtype));
  return LT_OK;
}

static void *data_or_null(const lt_tensor *t) { return t ? lt_data(t) : NULL; }

// Whether cuDNN's int dims and element count hold [N, C, S, 1].
static bool fits_cudnn(int64_t n, int64_t c, int64_t s) {
  if (!cuda_cudnn_fits_int(n) || !cuda_cudnn_fits_int(c) || !cuda_cudnn_fits_int(s)) return false;
  if (n == 0 || c == 0 || s == 0) return true;
  const int64_t lim = 0x7fffffffLL;
  return n <= lim / c && n * c <= lim / s;
}

// Whether every operand (NULL skipped) starts 16-byte aligned, as vector
// loads want; the caching allocator's blocks always do, only views at an
// offset may not, and those take the plain kernels rather than risk a
// misaligned access inside cuDNN.
static bool aligned_for_cudnn(std::initializer_list<const lt_tensor *> ts) {
  for (const lt_tensor *t : ts)
    if (t && ((uintptr_t)lt_data(t) & 15) != 0) return false;
  return true;
}

// Per-channel scratch vectors of C elements each, in one workspace block:
// scratch(k) is the k-th. Filled by the caller. Each vector starts on a
// 256-byte boundary (the block itself does), so that a scratch operand meets
// the same alignment the user's operands were checked for
// (aligned_for_cudnn) whatever C is.
struct bn_scratch {
  cuda_workspace ws;
  size_t pitch; // bytes from one vector to the next
  lt_status get(lt_device dev, int count, int64_t channels, size_t esize) {
    pitch = ((size_t)channels * esize + 255) / 256 * 256;
    return count > 0 ? ws.get(dev, (size_t)count * pitch) : LT_OK;
  }
  void *vec(int k) const { return (char *)ws.ptr + (size_t)k * pitch; }
};

// p: C per-channel elements, double when f64, float otherwise.
static lt_status fill_ones(const char *op, cudaStream_t stream, void *p, int64_t c, bool f64) {
  if (f64)
    bn_fill_kernel<double><<<cuda_blocks_for(c), CUDA_THREADS, 0, stream>>>((double *)p, c, 1.0);
  else
    bn_fill_kernel<float><<<cuda_blocks_for(c), CUDA_THREADS, 0, stream>>>((float *)p, c, 1.0f);
  return cuda_check_launch(op, "bn_fill_kernel");
}

static lt_status fill_zeros(const char *op, cudaStream_t stream, void *p, int64_t c,
                            size_t es) {
  CUDA_TRY(op, cudaMemsetAsync(p, 0, (size_t)c * es, stream));
  return LT_OK;
}

// ---- the plain paths ----

template <typename X, typename P>
static lt_status plain_forward_t(const char *op, cudaStream_t stream, lt_tensor *out,
                                 lt_tensor *save_mean, lt_tensor *save_invstd, const lt_tensor *x,
                                 lt_tensor *running_mean, lt_tensor *running_var,
                                 const lt_tensor *w, const lt_tensor *b, bool training,
                                 double momentum, double eps) {
  bn_forward_args<X, P> a;
  a.x = (const X *)lt_data(x);
  a.out = (X *)lt_data(out);
  a.w = (const P *)data_or_null(w);
  a.b = (const P *)data_or_null(b);
  a.mean = (P *)lt_data(save_mean);
  a.invstd = (P *)lt_data(save_invstd);
  a.rm = (P *)data_or_null(running_mean);
  a.rv = (P *)data_or_null(running_var);
  a.n = x->shape[0], a.c = x->shape[1], a.s = x->shape[2];
  a.training = training;
  a.momentum = momentum;
  a.eps = eps;
  bn_forward_kernel<X, P><<<channel_blocks(a.c), BN_THREADS, 0, stream>>>(a);
  return cuda_check_launch(op, "bn_forward_kernel");
}

static lt_status plain_forward(const char *op, cudaStream_t stream, lt_tensor *out,
                               lt_tensor *save_mean, lt_tensor *save_invstd, const lt_tensor *x,
                               lt_tensor *running_mean, lt_tensor *running_var, const lt_tensor *w,
                               const lt_tensor *b, bool training, double momentum, double eps) {
  switch (x->dtype) {
    case LT_FLOAT64:
      return plain_forward_t<double, double>(op, stream, out, save_mean, save_invstd, x,
                                             running_mean, running_var, w, b, training, momentum,
                                             eps);
    case LT_FLOAT16:
      return plain_forward_t<bn_f16, float>(op, stream, out, save_mean, save_invstd, x,
                                            running_mean, running_var, w, b, training, momentum,
                                            eps);
    case LT_BFLOAT16:
      return plain_forward_t<bn_bf16, float>(op, stream, out, save_mean, save_invstd, x,
                                             running_mean, running_var, w, b, training, momentum,
                                             eps);
    default: // float32 (check_dtypes let nothing else through)
      return plain_forward_t<float, float>(op, stream, out, save_mean, save_invstd, x, running_mean,
                                           running_var, w, b, training, momentum, eps);
  }
}

template <typename X, typename P>
static lt_status plain_backward_t(const char *op, cudaStream_t stream, lt_tensor *gx, lt_tensor *gw,
                                  lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
                                  const lt_tensor *w, const lt_tensor *mean,
                                  const lt_tensor *invstd, bool training) {
  bn_backward_args<X, P> a;
  a.x = (const X *)lt_data(x);
  a.go = (const X *)lt_data(go);
  a.gx = (X *)data_or_null(gx);
  a.w = (const P *)data_or_null(w);
  a.mean = (const P *)lt_data(mean);
  a.invstd = (const P *)lt_data(invstd);
  a.gw = (P *)data_or_null(gw);
  a.gb = (P *)data_or_null(gb);
  a.n = x->shape[0], a.c = x->shape[1], a.s = x->shape[2];
  a.training = training;
  bn_backward_kernel<X, P><<<channel_blocks(a.c), BN_THREADS, 0, stream>>>(a);
  return cuda_check_launch(op, "bn_backward_kernel");
}

static lt_status plain_backward(const char *op, cudaStream_t stream, lt_tensor *gx, lt_tensor *gw,
                                lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
                                const lt_tensor *w, const lt_tensor *mean, const lt_tensor *invstd,
                                bool training) {
  switch (x->dtype) {
    case LT_FLOAT64:
      return plain_backward_t<double, double>(op, stream, gx, gw, gb, go, x, w, mean, invstd,
                                              training);
    case LT_FLOAT16:
      return plain_backward_t<bn_f16, float>(op, stream, gx, gw, gb, go, x, w, mean, invstd,
                                             training);
    case LT_BFLOAT16:
      return plain_backward_t<bn_bf16, float>(op, stream, gx, gw, gb, go, x, w, mean, invstd,
                                              training);
    default: // float32
      return plain_backward_t<float, float>(op, stream, gx, gw, gb, go, x, w, mean, invstd,
                                            training);
  }
}

// ---- the cuDNN paths ----
// Each sets *unsupported (and returns LT_OK, having written nothing) when
// cuDNN answers CUDNN_STATUS_NOT_SUPPORTED, so that the caller can run the
// plain kernels instead.


// x's [N, C, S, 1] descriptor (x's own dtype, 16-bit included) and the
// derived per-channel one (float for 16-bit x, x's dtype otherwise: the
// dtype the per-channel tensors have).
static lt_status bn_descs(const char *op, const lt_tensor *x, cudnn_tensor_desc *xd,
                          cudnn_tensor_desc *pd) {
  cudnnDataType_t dt;
  if (!cuda_cudnn_dtype(x->dtype, &dt))
    return lt_error(LT_ERR_DTYPE, "cuda: %s: no cuDNN data type for %s", op,
                    lt_dtype_name(x->dtype));
  LT_TRY(xd->set4d(op, dt, x->shape[0], x->shape[1], x->shape[2], 1));
  LT_TRY(pd->create(op));
  CUDNN_TRY(op, cudnnDeriveBNTensorDescriptor, (pd->d, xd->d, CUDNN_BATCHNORM_SPATIAL));
  return LT_OK;
}

static lt_status cudnn_forward(const char *op, cudaStream_t stream, lt_tensor *out,
                               lt_tensor *save_mean, lt_tensor *save_invstd, const lt_tensor *x,
                               lt_tensor *running_mean, lt_tensor *running_var, const lt_tensor *w,
                               const lt_tensor *b, bool training, double momentum, double eps,
                               bool *unsupported) {
  *unsupported = false;
  const lt_device dev = out->storage->device;
  // Scaling factors are double for double data and float for every other
  // data type, 16-bit included; the per-channel tensors are double or float
  // on the same rule.
  const bool f64 = x->dtype == LT_FLOAT64;
  const int64_t c = x->shape[1];
  const size_t pes = lt_dtype_size(param_dtype(x->dtype));
  cudnnHandle_t h;
  LT_TRY(cuda_cudnn_handle(op, dev, &h)); // bound to the current stream: stream
  cudnn_tensor_desc xd, pd;
  LT_TRY(bn_descs(op, x, &xd, &pd));

  // cuDNN needs scale and bias; running stats are both given or both NULL
  // (cuDNN takes both or neither), so a lone one gets a discarded partner.
  const bool lone_running = training && (running_mean == NULL) != (running_var == NULL);
  const int count = (w ? 0 : 1) + (b ? 0 : 1) + (lone_running ? 1 : 0);
  bn_scratch scratch;
  LT_TRY(scratch.get(dev, count, c, pes));
  int next = 0;
  void *scale = data_or_null(w), *bias = data_or_null(b);
  void *rm = data_or_null(running_mean), *rv = data_or_null(running_var);
  if (!scale) {
    scale = scratch.vec(next++);
    LT_TRY(fill_ones(op, stream, scale, c, f64));
  }
  if (!bias) {
    bias = scratch.vec(next++);
    LT_TRY(fill_zeros(op, stream, bias, c, pes));
  }
  if (lone_running) {
    void *spare = scratch.vec(next++);
    LT_TRY(fill_zeros(op, stream, spare, c, pes)); // any finite value: it is thrown away
    if (!rm) rm = spare;
    if (!rv) rv = spare;
  }

  const void *one = cuda_cudnn_one(f64), *zero = cuda_cudnn_zero(f64);
  cudnnStatus_t st;
  const char *call;
  if (training) {
    call = "cudnnBatchNormalizationForwardTraining";
    st = cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, one, zero, xd.d,
                                                lt_data(x), xd.d, lt_data(out), pd.d, scale,
                                                bias, momentum, rm, rv, eps, lt_data(save_mean),
                                                lt_data(save_invstd));
  } else {
    call = "cudnnBatchNormalizationForwardInference";
    st = cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, one, zero, xd.d,
                                                 lt_data(x), xd.d, lt_data(out), pd.d, scale,
                                                 bias, rm, rv, eps);
  }
  if (cuda_cudnn_not_supported(st)) {
    *unsupported = true;
    return LT_OK;
  }
  if (st != CUDNN_STATUS_SUCCESS) return cuda_cudnn_fail(op, call, st);
  if (!training) { // what backward needs: the running statistics, as the CPU saves them
    if (f64)
      bn_eval_stats_kernel<double><<<cuda_blocks_for(c), CUDA_THREADS, 0, stream>>>(
          (const double *)rm, (const double *)rv, (double *)lt_data(save_mean),
          (double *)lt_data(save_invstd), c, eps);
    else
      bn_eval_stats_kernel<float><<<cuda_blocks_for(c), CUDA_THREADS, 0, stream>>>(
          (const float *)rm, (const float *)rv, (float *)lt_data(save_mean),
          (float *)lt_data(save_invstd), c, eps);
    LT_TRY(cuda_check_launch(op, "bn_eval_stats_kernel"));
  }
  return LT_OK;
}

// Training-mode backward with gx wanted.
static lt_status cudnn_backward(const char *op, cudaStream_t stream, lt_tensor *gx, lt_tensor *gw,
                                lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
                                const lt_tensor *w, const lt_tensor *mean, const lt_tensor *invstd,
                                bool *unsupported) {
  *unsupported = false;
  const lt_device dev = go->storage->device;
  const bool f64 = x->dtype == LT_FLOAT64; // as in cudnn_forward
  const int64_t c = x->shape[1];
  const size_t pes = lt_dtype_size(param_dtype(x->dtype));
  cudnnHandle_t h;
  LT_TRY(cuda_cudnn_handle(op, dev, &h)); // bound to the current stream: stream
  cudnn_tensor_desc xd, pd;
  LT_TRY(bn_descs(op, x, &xd, &pd));

  // cuDNN always writes the scale and bias gradients: scratch for the ones
  // not wanted, and ones for a missing scale.
  const int count = (w ? 0 : 1) + (gw ? 0 : 1) + (gb ? 0 : 1);
  bn_scratch scratch;
  LT_TRY(scratch.get(dev, count, c, pes));
  int next = 0;
  void *scale = data_or_null(w);
  void *dscale = data_or_null(gw), *dbias = data_or_null(gb);
  if (!scale) {
    scale = scratch.vec(next++);
    LT_TRY(fill_ones(op, stream, scale, c, f64));
  }
  if (!dscale) dscale = scratch.vec(next++);
  if (!dbias) dbias = scratch.vec(next++);

  const void *one = cuda_cudnn_one(f64), *zero = cuda_cudnn_zero(f64);
  const cudnnStatus_t st = cudnnBatchNormalizationBackward(
      h, CUDNN_BATCHNORM_SPATIAL, one, zero, one, zero, xd.d, lt_data(x), xd.d, lt_data(go),
      xd.d, lt_data(gx), pd.d, scale, dscale, dbias, BN_BACKWARD_EPS, lt_data(mean),
      lt_data(invstd));
  if (cuda_cudnn_not_supported(st)) {
    *unsupported = true;
    return LT_OK;
  }
  if (st != CUDNN_STATUS_SUCCESS)
    return cuda_cudnn_fail(op, "cudnnBatchNormalizationBackward", st);
  return LT_OK;
}

} // namespace

// ---- entry points ----

lt_status cuda_nn_batch_norm(lt_tensor *out, lt_tensor *save_mean, lt_tensor *save_invstd,
                             const lt_tensor *x, lt_tensor *running_mean,
                             lt_tensor *running_var, const lt_tensor *w, const lt_tensor *b,
                             bool training, double momentum, double eps) {
  const char *op = "batch_norm";
  cuda_device_guard guard(out->storage->device);
  const cudaStream_t stream = cuda_stream(); // of out's device, current now
  LT_TRY(check_dtypes(op, x, {out},
                      {save_mean, save_invstd, running_mean, running_var, w, b}));
  const int64_t n = x->shape[0], c = x->shape[1], s = x->shape[2];
  if (c == 0) return LT_OK; // no channel: nothing to write
  if (!training && (!running_mean || !running_var))
    return lt_error(LT_ERR_ARG,
                    "cuda: %s: running_mean and running_var must be given in evaluation mode", op);
  // An empty batch (C > 0) still has per-channel results (NaN statistics in
  // training, the running ones in eval), which the plain kernel writes, one
  // block per channel, exactly as the CPU does.
  bool plain = n * s == 0 || eps < CUDNN_BN_MIN_EPSILON || (training && n * s == 1) ||
               !fits_cudnn(n, c, s) || x->dtype == LT_BFLOAT16 ||
               !aligned_for_cudnn(
                   {x, out, w, b, running_mean, running_var, save_mean, save_invstd});
  if (!plain) {
    bool unsupported = false;
    LT_TRY(cudnn_forward(op, stream, out, save_mean, save_invstd, x, running_mean, running_var, w,
                         b, training, momentum, eps, &unsupported));
    plain = unsupported;
  }
  if (!plain) return LT_OK;
  return plain_forward(op, stream, out, save_mean, save_invstd, x, running_mean, running_var, w, b,
                       training, momentum, eps);
}

lt_status cuda_nn_batch_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                      const lt_tensor *go, const lt_tensor *x,
                                      const lt_tensor *w, const lt_tensor *mean,
                                      const lt_tensor *invstd, bool training) {
  const char *op = "batch_norm_backward";
  cuda_device_guard guard(go->storage->device);
  const cudaStream_t stream = cuda_stream(); // of go's device, current now
  LT_TRY(check_dtypes(op, x, {go, gx}, {w, mean, invstd, gw, gb}));
  const int64_t n = x->shape[0], c = x->shape[1], s = x->shape[2];
  if (c == 0 || (!gx && !gw && !gb)) return LT_OK;
  // Eval mode, no gx, an empty batch (gw = 0 * invstd, gb = 0 per channel,
  // as the CPU) or bfloat16 go to the plain kernel.
  bool plain = !training || !gx || n * s <= 1 || !fits_cudnn(n, c, s) ||
               x->dtype == LT_BFLOAT16 || !aligned_for_cudnn({x, go, gx, w, mean, invstd, gw, gb});
  if (!plain) {
    bool unsupported = false;
    LT_TRY(cudnn_backward(op, stream, gx, gw, gb, go, x, w, mean, invstd, &unsupported));
    plain = unsupported;
  }
  if (!plain) return LT_OK;
  return plain_backward(op, stream, gx, gw, gb, go, x, w, mean, invstd, training);
}
