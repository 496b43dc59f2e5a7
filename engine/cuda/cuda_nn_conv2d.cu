// conv2d through cuDNN: forward (cudnnConvolutionForward, then the bias with
// cudnnAddTensor), backward data, backward filter and the bias gradient
// (cudnnConvolutionBackwardBias), matching cpu/cpu_nn_conv2d.c:
//   out = W * x (+ b),  gx = W^T * go,  gw = sum over images of go * x,
//   gb[o] = sum of go over images and positions,
// with cross-correlation, padding, stride, dilation and groups.
//
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7, ranked):
// the first that succeeds and whose workspace fits the limit
// (lt_cuda_cudnn_workspace_limit), else the one needing the least workspace;
// the choice is cached per shape (cuda_cudnn.cu). Workspaces come from lt's
// caching allocator; when one cannot be had, the least-workspace algorithm is
// tried before the out-of-memory error is returned.
//
// Math types: float64 computes in double; float32 in float with FMA kernels
// only (CUDNN_FMA_MATH excludes TF32) unless lt_cuda_cudnn_tf32() allows
// tensor cores; float16 and bfloat16 compute in float on tensor cores
// (CUDNN_TENSOR_OP_MATH). CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (which may
// round float32 operands down to float16) is never used.
//
// cuDNN's legacy API takes int dims and at most 2^31 - 1 elements per
// tensor, so batches larger than that run as several calls over slices of
// images (the weight and bias gradients accumulate across them).
#include <string.h>

#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_cudnn.h"
#include "cuda/cuda_nn_kernels.h"

#define CONV_THREADS 256      // a power of two: the tree reduction halves it
#define CONV_MAX_CANDIDATES 32 // more than cuDNN has algorithms in any direction

// Everything up to the entry points has internal linkage (an unnamed
// namespace): kernel and struct names cannot collide with other files'.
namespace {

// ---- plain kernels: the bias where cuDNN cannot help ----

// out[n, o, p] += b[o] over out [N, O, L], any float dtype (computed in
// double, rounded once on the store).
__global__ void conv_add_bias_kernel(char *out, const char *b, int dt, int64_t es, int64_t o,
                                     int64_t l, int64_t total) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t oc = (i / l) % o;
    const double v = cuda_load<double>(out + i * es, dt) + cuda_load<double>(b + oc * es, dt);
    cuda_store<double>(out + i * es, dt, v);
  }
}

// gb[o] = sum of go[n, o, p] over n and p, one block per channel, summed in
// double like the CPU, then a shared-memory tree (no atomics: the result
// depends only on the shapes).
__global__ void conv_bias_grad_kernel(char *gb, const char *go, int dt, int64_t es, int64_t n,
                                      int64_t o, int64_t l) {
  __shared__ double part[CONV_THREADS];
  const int64_t count = n * l;
  for (int64_t oc = blockIdx.x; oc < o; oc += gridDim.x) {
    double acc = 0.0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t img = k / l, p = k % l;
      acc += cuda_load<double>(go + ((img * o + oc) * l + p) * es, dt);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) cuda_store<double>(gb + oc * es, dt, part[0]);
    __syncthreads(); // part is reused by the next channel
  }
}

static unsigned channel_blocks(int64_t channels) {
  return (unsigned)(channels < 65535 * 8 ? channels : 65535 * 8);
}

static lt_status add_bias_plain(const char *op, lt_tensor *out, const lt_tensor *b) {
  const int64_t total = lt_numel(out);
  if (total == 0) return LT_OK;
  const int64_t es = (int64_t)lt_dtype_size(out->dtype);
  const int64_t l = out->shape[2] * out->shape[3];
  conv_add_bias_kernel<<<cuda_blocks_for(total), CUDA_THREADS, 0, cuda_stream()>>>(
      cuda_bytes(out), cuda_bytes(b), (int)out->dtype, es, out->shape[1], l, total);
  return cuda_check_launch(op, "conv_add_bias_kernel");
}

static lt_status bias_grad_plain(const char *op, lt_tensor *gb, const lt_tensor *go) {
  const int64_t o = go->shape[1];
  if (o == 0) return LT_OK;
  const int64_t es = (int64_t)lt_dtype_size(go->dtype);
  conv_bias_grad_kernel<<<channel_blocks(o), CONV_THREADS, 0, cuda_stream()>>>(
      cuda_bytes(gb), cuda_bytes(go), (int)go->dtype, es, go->shape[0], o,
      go->shape[2] * go->shape[3]);
  return cuda_check_launch(op, "conv_bias_grad_kernel");
}

static lt_status zero_tensor(const char *op, lt_tensor *t) {
  if (!t || lt_numel(t) == 0) return LT_OK;
  // All-zero bytes are +0.0 in every float dtype.
  CUDA_TRY(op, cudaMemsetAsync(lt_data(t), 0, (size_t)lt_numel(t) * lt_dtype_size(t->dtype),
                               cuda_stream()));
  return LT_OK;
}

// ---- the shared setup ----

struct conv_setup {
  const char *op;
  lt_device dev;
  cudnnHandle_t handle;
  lt_dtype dtype;
  cudnnDataType_t cdt;
  bool f64;
  bool tf32;
  const lt_conv2d_opts *opts;
  int64_t n, c, h, w, o, cg, kh, kw, ho, wo;
  int64_t x_image, y_image; // elements per image of x and of out / go
  int64_t chunk;            // images per cuDNN call
  size_t es;
  cudnn_tensor_desc xd, yd; // set per slice of images
  cudnn_filter_desc wd;
  cudnn_conv_desc cd;
};

// Fills s from x [N, C, H, W], w [O, C/g, kh, kw] and y (out or go)
// [N, O, Ho, Wo], all non-empty; makes the filter and convolution
// descriptors and the handle.
static lt_status setup_init(conv_setup *s, const char *op, const lt_tensor *x,
                            const lt_tensor *w, const lt_tensor *y, const lt_conv2d_opts *o) {
  s->op = op;
  s->dev = y->storage->device;
  s->dtype = x->dtype;
  if (!cuda_cudnn_dtype(x->dtype, &s->cdt))
    return lt_error(LT_ERR_DTYPE, "cuda: %s: cuDNN convolution does not take %s", op,
                    lt_dtype_name(x->dtype));
  s->f64 = x->dtype == LT_FLOAT64;
  s->tf32 = x->dtype == LT_FLOAT32 && lt_cuda_cudnn_tf32();
  s->opts = o;
  s->n = x->shape[0], s->c = x->shape[1], s->h = x->shape[2], s->w = x->shape[3];
  s->o = w->shape[0], s->cg = w->shape[1], s->kh = w->shape[2], s->kw = w->shape[3];
  s->ho = y->shape[2], s->wo = y->shape[3];
  s->x_image = s->c * s->h * s->w;
  s->y_image = s->o * s->ho * s->wo;
  s->es = lt_dtype_size(x->dtype);
  // Images per call: as many as keep each tensor within 2^31 - 1 elements.
  const int64_t per = s->x_image > s->y_image ? s->x_image : s->y_image;
  const int64_t fit = 0x7fffffffLL / per;
  if (fit < 1)
    return lt_error(LT_ERR_SHAPE,
                    "cuda: %s: one image of input [%lld, %lld, %lld] or output [%lld, %lld, "
                    "%lld] exceeds cuDNN's 2^31 - 1 elements",
                    op, (long long)s->c, (long long)s->h, (long long)s->w, (long long)s->o,
                    (long long)s->ho, (long long)s->wo);
  s->chunk = s->n < fit ? s->n : fit;
  LT_TRY(cuda_cudnn_handle(op, s->dev, &s->handle));
  LT_TRY(s->wd.set4d(op, s->cdt, s->o, s->cg, s->kh, s->kw));
  // Products accumulate in double for float64 and in float for the rest.
  LT_TRY(s->cd.set2d(op, o->padding, o->stride, o->dilation, o->groups,
                     s->f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  return LT_OK;
}

// Descriptors for a slice of nb images.
static lt_status setup_slice(conv_setup *s, int64_t nb) {
  LT_TRY(s->xd.set4d(s->op, s->cdt, nb, s->c, s->h, s->w));
  LT_TRY(s->yd.set4d(s->op, s->cdt, nb, s->o, s->ho, s->wo));
  return LT_OK;
}

// ---- math types ----

// Set on the descriptor before asking the heuristics, so that they rank the
// kernels that may run.
static cudnnMathType_t requested_math(const conv_setup *s) {
  if (s->f64) return CUDNN_DEFAULT_MATH;
  if (s->dtype == LT_FLOAT32) return s->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  return CUDNN_TENSOR_OP_MATH;
}

// The math type a candidate runs with. float32 without TF32 is pinned to
// FMA kernels whatever the candidate reports; with TF32 the candidate's own
// type is kept (DEFAULT and TENSOR_OP both permit TF32 on sm_80+) except
// that operand down-conversion is never allowed.
static cudnnMathType_t effective_math(const conv_setup *s, cudnnMathType_t candidate) {
  if (s->f64) return CUDNN_DEFAULT_MATH;
  if (s->dtype == LT_FLOAT32) {
    if (!s->tf32) return CUDNN_FMA_MATH;
    return candidate == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? CUDNN_TENSOR_OP_MATH : candidate;
  }
  return CUDNN_TENSOR_OP_MATH;
}

// ---- algorithm choice ----

struct algo_candidate {
  int algo;
  cudnnStatus_t status;
  cudnnMathType_t math;
};

static const char *heuristics_name(int dir) {
  switch (dir) {
    case CUDA_CONV_FORWARD: return "cudnnGetConvolutionForwardAlgorithm_v7";
    case CUDA_CONV_BACKWARD_DATA: return "cudnnGetConvolutionBackwardDataAlgorithm_v7";
    default: return "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  }
}

// cuDNN's ranked candidates for dir, as algo_candidate (the three directions
// have three perf structs of the same shape).
static lt_status heuristics(conv_setup *s, int dir, algo_candidate *out, int *count) {
  *count = 0;
  int max = 0, got = 0;
  if (dir == CUDA_CONV_FORWARD) {
    CUDNN_TRY(s->op, cudnnGetConvolutionForwardAlgorithmMaxCount, (s->handle, &max));
    cudnnConvolutionFwdAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    if (max > CONV_MAX_CANDIDATES) max = CONV_MAX_CANDIDATES;
    CUDNN_TRY(s->op, cudnnGetConvolutionForwardAlgorithm_v7,
              (s->handle, s->xd.d, s->wd.d, s->cd.d, s->yd.d, max, &got, perf));
    for (int i = 0; i < got; i++) out[i] = {(int)perf[i].algo, perf[i].status, perf[i].mathType};
  } else if (dir == CUDA_CONV_BACKWARD_DATA) {
    CUDNN_TRY(s->op, cudnnGetConvolutionBackwardDataAlgorithmMaxCount, (s->handle, &max));
    cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    if (max > CONV_MAX_CANDIDATES) max = CONV_MAX_CANDIDATES;
    CUDNN_TRY(s->op, cudnnGetConvolutionBackwardDataAlgorithm_v7,
              (s->handle, s->wd.d, s->yd.d, s->cd.d, s->xd.d, max, &got, perf));
    for (int i = 0; i < got; i++) out[i] = {(int)perf[i].algo, perf[i].status, perf[i].mathType};
  } else {
    CUDNN_TRY(s->op, cudnnGetConvolutionBackwardFilterAlgorithmMaxCount, (s->handle, &max));
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_MAX_CANDIDATES];
    if (max > CONV_MAX_CANDIDATES) max = CONV_MAX_CANDIDATES;
    CUDNN_TRY(s->op, cudnnGetConvolutionBackwardFilterAlgorithm_v7,
              (s->handle, s->xd.d, s->yd.d, s->cd.d, s->wd.d, max, &got, perf));
    for (int i = 0; i < got; i++) out[i] = {(int)perf[i].algo, perf[i].status, perf[i].mathType};
  }
  *count = got < 0 ? 0 : got;
  return LT_OK;
}

// The workspace algo needs with the math type currently on the descriptor.
static cudnnStatus_t workspace_size(const conv_setup *s, int dir, int algo, size_t *bytes) {
  *bytes = 0;
  switch (dir) {
    case CUDA_CONV_FORWARD:
      return cudnnGetConvolutionForwardWorkspaceSize(s->handle, s->xd.d, s->wd.d, s->cd.d,
                                                     s->yd.d, (cudnnConvolutionFwdAlgo_t)algo,
                                                     bytes);
    case CUDA_CONV_BACKWARD_DATA:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          s->handle, s->wd.d, s->yd.d, s->cd.d, s->xd.d, (cudnnConvolutionBwdDataAlgo_t)algo,
          bytes);
    default:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          s->handle, s->xd.d, s->yd.d, s->cd.d, s->wd.d, (cudnnConvolutionBwdFilterAlgo_t)algo,
          bytes);
  }
}

// The cached choice for dir over a slice of nb images (descriptors already
// set for it), or a new one from the heuristics.
static lt_status choose_algo(conv_setup *s, int dir, int64_t nb, cuda_conv_choice *out) {
  cuda_conv_key key;
  memset(&key, 0, sizeof key);
  key.device = s->dev.index;
  key.dir = dir;
  key.dtype = (int64_t)s->dtype;
  key.tf32 = s->tf32;
  key.x[0] = nb, key.x[1] = s->c, key.x[2] = s->h, key.x[3] = s->w;
  key.w[0] = s->o, key.w[1] = s->cg, key.w[2] = s->kh, key.w[3] = s->kw;
  for (int i = 0; i < 2; i++) {
    key.stride[i] = s->opts->stride[i];
    key.padding[i] = s->opts->padding[i];
    key.dilation[i] = s->opts->dilation[i];
  }
  key.groups = s->opts->groups;
  if (cuda_cudnn_algo_lookup(&key, out)) return LT_OK;

  CUDNN_TRY(s->op, cudnnSetConvolutionMathType, (s->cd.d, requested_math(s)));
  algo_candidate cand[CONV_MAX_CANDIDATES];
  int count = 0;
  LT_TRY(heuristics(s, dir, cand, &count));
  const size_t limit = lt_cuda_cudnn_workspace_limit();
  bool have_best = false, have_small = false;
  cuda_conv_choice c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < count; i++) { // best ranked first
    if (cand[i].status != CUDNN_STATUS_SUCCESS) continue;
    const cudnnMathType_t math = effective_math(s, cand[i].math);
    // The workspace may depend on the math type: ask with the one that runs.
    if (cudnnSetConvolutionMathType(s->cd.d, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (workspace_size(s, dir, cand[i].algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    if (!have_small || bytes < c.small_workspace) { // ties keep the better ranked
      c.small_algo = cand[i].algo;
      c.small_workspace = bytes;
      c.small_math = math;
      have_small = true;
    }
    if (!have_best && bytes <= limit) {
      c.algo = cand[i].algo;
      c.workspace = bytes;
      c.math = math;
      have_best = true;
    }
  }
  if (!have_small)
    return lt_error(LT_ERR_DEVICE,
                    "cuda: %s: %s: no usable algorithm for input [%lld, %lld, %lld, %lld], "
                    "weight [%lld, %lld, %lld, %lld], stride %lld x %lld, padding %lld x %lld, "
                    "dilation %lld x %lld, groups %lld, %s",
                    s->op, heuristics_name(dir), (long long)nb, (long long)s->c, (long long)s->h,
                    (long long)s->w, (long long)s->o, (long long)s->cg, (long long)s->kh,
                    (long long)s->kw, (long long)key.stride[0], (long long)key.stride[1],
                    (long long)key.padding[0], (long long)key.padding[1],
                    (long long)key.dilation[0], (long long)key.dilation[1],
                    (long long)key.groups, lt_dtype_name(s->dtype));
  if (!have_best) { // nothing fits the limit: the smallest workspace
    c.algo = c.small_algo;
    c.workspace = c.small_workspace;
    c.math = c.small_math;
  }
  cuda_cudnn_algo_store(&key, &c);
  *out = c;
  return LT_OK;
}

// ---- one convolution call over a slice of images ----

struct conv_ptrs {
  const void *x, *w, *y; // y: out (forward) or go (backward)
  void *out;             // out, gx or gw
  const void *beta;      // gw accumulates over slices
};

static lt_status run_dir(conv_setup *s, int dir, int64_t nb, const conv_ptrs &p) {
  cuda_conv_choice c;
  LT_TRY(choose_algo(s, dir, nb, &c));
  cuda_workspace ws;
  int algo = c.algo;
  size_t bytes = c.workspace;
  cudnnMathType_t math = c.math;
  if (bytes > 0) {
    lt_status st = ws.get(s->dev, bytes);
    if (st == LT_ERR_OOM && c.small_workspace < bytes) {
      // The allocator has already collected and emptied its cache; a leaner
      // algorithm may still fit.
      algo = c.small_algo;
      bytes = c.small_workspace;
      math = c.small_math;
      st = bytes > 0 ? ws.get(s->dev, bytes) : LT_OK;
    }
    if (st != LT_OK) return st;
  }
  CUDNN_TRY(s->op, cudnnSetConvolutionMathType, (s->cd.d, math));
  const void *one = cuda_cudnn_one(s->f64);
  switch (dir) {
    case CUDA_CONV_FORWARD:
      CUDNN_TRY(s->op, cudnnConvolutionForward,
                (s->handle, one, s->xd.d, p.x, s->wd.d, p.w, s->cd.d,
                 (cudnnConvolutionFwdAlgo_t)algo, ws.ptr, bytes, p.beta, s->yd.d, p.out));
      break;
    case CUDA_CONV_BACKWARD_DATA:
      CUDNN_TRY(s->op, cudnnConvolutionBackwardData,
                (s->handle, one, s->wd.d, p.w, s->yd.d, p.y, s->cd.d,
                 (cudnnConvolutionBwdDataAlgo_t)algo, ws.ptr, bytes, p.beta, s->xd.d, p.out));
      break;
    default:
      CUDNN_TRY(s->op, cudnnConvolutionBackwardFilter,
                (s->handle, one, s->xd.d, p.x, s->yd.d, p.y, s->cd.d,
                 (cudnnConvolutionBwdFilterAlgo_t)algo, ws.ptr, bytes, p.beta, s->wd.d, p.out));
      break;
  }
  return LT_OK;
}

// ---- bias ----

// out slice (descriptor s->yd) += b broadcast over [1, O, 1, 1].
static lt_status add_bias_slice(conv_setup *s, void *y, const lt_tensor *b, lt_tensor *out) {
  cudnn_tensor_desc bd;
  LT_TRY(bd.set4d(s->op, s->cdt, 1, s->o, 1, 1));
  const void *one = cuda_cudnn_one(s->f64);
  const cudnnStatus_t st = cudnnAddTensor(s->handle, one, bd.d, lt_data(b), one, s->yd.d, y);
  if (cuda_cudnn_not_supported(st)) return add_bias_plain(s->op, out, b); // whole out
  if (st != CUDNN_STATUS_SUCCESS) return cuda_cudnn_fail(s->op, "cudnnAddTensor", st);
  return LT_OK;
}

} // namespace

// ---- entry points ----

lt_status cuda_nn_conv2d(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                         const lt_tensor *b, const lt_conv2d_opts *o) {
  const char *op = "conv2d";
  cuda_device_guard guard(out->storage->device);
  if (lt_numel(out) == 0) return LT_OK;
  cudnnDataType_t cdt;
  if (!cuda_cudnn_dtype(out->dtype, &cdt))
    return lt_error(LT_ERR_DTYPE, "cuda: %s: cuDNN convolution does not take %s", op,
                    lt_dtype_name(out->dtype));
  if (lt_numel(x) == 0 || lt_numel(w) == 0) {
    // No channels, or an input that is all padding: every output is the bias
    // (or 0), as the CPU's GEMM over an empty or all-zero column matrix gives.
    LT_TRY(zero_tensor(op, out));
    return b ? add_bias_plain(op, out, b) : LT_OK;
  }
  conv_setup s;
  LT_TRY(setup_init(&s, op, x, w, out, o));
  for (int64_t n0 = 0; n0 < s.n; n0 += s.chunk) {
    const int64_t nb = s.n - n0 < s.chunk ? s.n - n0 : s.chunk;
    LT_TRY(setup_slice(&s, nb));
    conv_ptrs p;
    p.x = cuda_bytes(x) + (size_t)(n0 * s.x_image) * s.es;
    p.w = lt_data(w);
    p.y = NULL;
    p.out = cuda_bytes(out) + (size_t)(n0 * s.y_image) * s.es;
    p.beta = cuda_cudnn_zero(s.f64);
    LT_TRY(run_dir(&s, CUDA_CONV_FORWARD, nb, p));
    if (b) {
      if (s.chunk < s.n) {
        // Several slices: the plain kernel adds the bias to all of out once,
        // after the last slice.
        if (n0 + nb >= s.n) LT_TRY(add_bias_plain(op, out, b));
      } else {
        LT_TRY(add_bias_slice(&s, p.out, b, out));
      }
    }
  }
  return LT_OK;
}

lt_status cuda_nn_conv2d_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                  const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                  const lt_conv2d_opts *o) {
  const char *op = "conv2d_backward";
  cuda_device_guard guard(go->storage->device);
  cudnnDataType_t cdt;
  if (!cuda_cudnn_dtype(go->dtype, &cdt))
    return lt_error(LT_ERR_DTYPE, "cuda: %s: cuDNN convolution does not take %s", op,
                    lt_dtype_name(go->dtype));
  const bool empty = lt_numel(go) == 0 || lt_numel(x) == 0 || lt_numel(w) == 0;
  if (empty) {
    // As the CPU: gb sums go (0 over no values); nothing flows back to x or
    // w through an empty go, an empty weight or an input that is all
    // padding, so gx and gw are zeros.
    if (gb && lt_numel(gb) > 0)
      LT_TRY(lt_numel(go) == 0 ? zero_tensor(op, gb) : bias_grad_plain(op, gb, go));
    LT_TRY(zero_tensor(op, gx));
    LT_TRY(zero_tensor(op, gw));
    return LT_OK;
  }
  if (!gx && !gw && !gb) return LT_OK;
  conv_setup s;
  LT_TRY(setup_init(&s, op, x, w, go, o));
  const bool sliced = s.chunk < s.n;
  // Over several slices the bias gradient is one plain reduction over all
  // of go (int64 indices), summed in double like the CPU.
  if (gb && sliced) LT_TRY(bias_grad_plain(op, gb, go));
  for (int64_t n0 = 0; n0 < s.n; n0 += s.chunk) {
    const int64_t nb = s.n - n0 < s.chunk ? s.n - n0 : s.chunk;
    LT_TRY(setup_slice(&s, nb));
    const char *xs = cuda_bytes(x) + (size_t)(n0 * s.x_image) * s.es;
    const char *gos = cuda_bytes(go) + (size_t)(n0 * s.y_image) * s.es;
    if (gb && !sliced) {
      cudnn_tensor_desc bd;
      LT_TRY(bd.set4d(op, s.cdt, 1, s.o, 1, 1));
      const cudnnStatus_t st =
          cudnnConvolutionBackwardBias(s.handle, cuda_cudnn_one(s.f64), s.yd.d, gos,
                                       cuda_cudnn_zero(s.f64), bd.d, lt_data(gb));
      if (cuda_cudnn_not_supported(st))
        LT_TRY(bias_grad_plain(op, gb, go));
      else if (st != CUDNN_STATUS_SUCCESS)
        return cuda_cudnn_fail(op, "cudnnConvolutionBackwardBias", st);
    }
    if (gx) {
      conv_ptrs p;
      p.x = NULL;
      p.w = lt_data(w);
      p.y = gos;
      p.out = cuda_bytes(gx) + (size_t)(n0 * s.x_image) * s.es;
      p.beta = cuda_cudnn_zero(s.f64);
      LT_TRY(run_dir(&s, CUDA_CONV_BACKWARD_DATA, nb, p));
    }
    if (gw) {
      conv_ptrs p;
      p.x = xs;
      p.w = NULL;
      p.y = gos;
      p.out = lt_data(gw);
      // The first slice writes gw, the later ones add to it.
      p.beta = n0 == 0 ? cuda_cudnn_zero(s.f64) : cuda_cudnn_one(s.f64);
      LT_TRY(run_dir(&s, CUDA_CONV_BACKWARD_FILTER, nb, p));
    }
  }
  return LT_OK;
}
