// Elementwise nn kernels over contiguous same-shaped tensors, matching
// engine/cpu/cpu_nn_activation.c: GELU (exact erf form and the tanh
// approximation) with its derivative, and dropout's masked scaling. Each
// element is computed in double from the stored value and rounded once to
// the output dtype, as on the CPU, so float32 results agree with it to
// rounding (the kernels stay memory-bound on H100-class FP64 throughput).
//
// One grid-stride kernel per (dtype, op): when every pointer is 16-byte
// aligned (the mask to the vector's element count) the body moves float4 /
// double2 vectors, and a scalar tail finishes the last numel % width
// elements; otherwise the whole range goes element by element.
#include <math.h>

#include "cuda/cuda_nn_kernels.h"

#define ACT_THREADS 256
#define ACT_MAX_BLOCKS (65535 * 8)

namespace {

// Same constants, same expressions as the CPU.
// (constexpr: immediates in the code, no loads.)
constexpr double SQRT_2_OVER_PI = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double INV_SQRT_2PI = 0.39894228040143267794;   // 1 / sqrt(2 pi)
constexpr double GELU_KAPPA = 0.044715;
constexpr double SQRT_HALF = 0.70710678118654752440;      // 1 / sqrt(2)

__device__ inline double gelu_value(double x, bool tanh_form) {
  if (tanh_form) {
    const double inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    return 0.5 * x * (1.0 + tanh(inner));
  }
  return 0.5 * x * (1.0 + erf(x * SQRT_HALF));
}

__device__ inline double gelu_derivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    const double t = tanh(inner);
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_KAPPA * x * x);
  }
  // d/dx x Phi(x) = Phi(x) + x phi(x)
  return 0.5 * (1.0 + erf(x * SQRT_HALF)) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

// Each op maps (a, b, mask byte) to the output; b and the mask are read only
// by the ops that have them.
struct gelu_op {
  bool tanh_form;
  template <typename T> __device__ T operator()(T a, T, uint8_t) const {
    return (T)gelu_value((double)a, tanh_form);
  }
};

struct gelu_backward_op { // a = go, b = x
  bool tanh_form;
  template <typename T> __device__ T operator()(T go, T x, uint8_t) const {
    return (T)((double)go * gelu_derivative((double)x, tanh_form));
  }
};

struct masked_scale_op { // a = x; a dropped element is 0 even when x is NaN
  double scale;
  template <typename T> __device__ T operator()(T x, T, uint8_t m) const {
    return m ? (T)((double)x * scale) : (T)0;
  }
};

// ---- vectors ----

template <typename T> struct vec_traits;
template <> struct vec_traits<float> {
  static const int width = 4;
  __device__ static void load(const float *p, int64_t v, float *o) {
    const float4 q = reinterpret_cast<const float4 *>(p)[v];
    o[0] = q.x, o[1] = q.y, o[2] = q.z, o[3] = q.w;
  }
  __device__ static void store(float *p, int64_t v, const float *o) {
    reinterpret_cast<float4 *>(p)[v] = make_float4(o[0], o[1], o[2], o[3]);
  }
  __device__ static void load_mask(const uint8_t *p, int64_t v, uint8_t *o) {
    const uchar4 q = reinterpret_cast<const uchar4 *>(p)[v];
    o[0] = q.x, o[1] = q.y, o[2] = q.z, o[3] = q.w;
  }
};
template <> struct vec_traits<double> {
  static const int width = 2;
  __device__ static void load(const double *p, int64_t v, double *o) {
    const double2 q = reinterpret_cast<const double2 *>(p)[v];
    o[0] = q.x, o[1] = q.y;
  }
  __device__ static void store(double *p, int64_t v, const double *o) {
    reinterpret_cast<double2 *>(p)[v] = make_double2(o[0], o[1]);
  }
  __device__ static void load_mask(const uint8_t *p, int64_t v, uint8_t *o) {
    const uchar2 q = reinterpret_cast<const uchar2 *>(p)[v];
    o[0] = q.x, o[1] = q.y;
  }
};

// out[i] = op(a[i], b[i], mask[i]) for i < n; b and mask may be NULL. The
// first nvec * width elements go as vectors (nvec 0 when unaligned).
template <typename T, class Op>
__global__ void act_kernel(T *out, const T *a, const T *b, const uint8_t *mask, int64_t n,
                           int64_t nvec, Op op) {
  typedef vec_traits<T> V;
  const int W = V::width;
  const int64_t start = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t v = start; v < nvec; v += step) {
    T av[W], bv[W], ov[W];
    uint8_t mv[W];
    V::load(a, v, av);
    if (b) V::load(b, v, bv);
    if (mask) V::load_mask(mask, v, mv);
#pragma unroll
    for (int j = 0; j < W; j++) ov[j] = op(av[j], b ? bv[j] : (T)0, mask ? mv[j] : (uint8_t)1);
    V::store(out, v, ov);
  }
  for (int64_t i = nvec * W + start; i < n; i += step)
    out[i] = op(a[i], b ? b[i] : (T)0, mask ? mask[i] : (uint8_t)1);
}

bool aligned(const void *p, uintptr_t bytes) { return p == NULL || (uintptr_t)p % bytes == 0; }

template <typename T, class Op>
lt_status act_launch(const char *op_name, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                     const lt_tensor *mask, Op op) {
  const int64_t n = lt_numel(out);
  if (n == 0) return LT_OK;
  const int W = vec_traits<T>::width;
  T *po = (T *)cuda_bytes(out);
  const T *pa = (const T *)cuda_bytes(a);
  const T *pb = b ? (const T *)cuda_bytes(b) : NULL;
  const uint8_t *pm = mask ? (const uint8_t *)cuda_bytes(mask) : NULL;
  const bool vec = aligned(po, 16) && aligned(pa, 16) && aligned(pb, 16) &&
                   aligned(pm, (uintptr_t)W);
  const int64_t nvec = vec ? n / W : 0;
  // Threads for the larger of the two loops: vectors, or the scalar rest.
  const int64_t work = vec ? nvec + (n - nvec * W) : n;
  int64_t blocks = (work + ACT_THREADS - 1) / ACT_THREADS;
  if (blocks > ACT_MAX_BLOCKS) blocks = ACT_MAX_BLOCKS;
  act_kernel<T, Op><<<(unsigned)blocks, ACT_THREADS, 0, cuda_stream()>>>(po, pa, pb, pm, n,
                                                                         nvec, op);
  return cuda_check_launch(op_name, "act_kernel");
}

} // namespace

lt_status cuda_nn_gelu(lt_tensor *out, const lt_tensor *x, lt_gelu_approx approx) {
  cuda_device_guard guard(out->storage->device);
  const gelu_op op = {approx == LT_GELU_TANH};
  if (x->dtype == LT_FLOAT64) return act_launch<double>("gelu", out, x, NULL, NULL, op);
  return act_launch<float>("gelu", out, x, NULL, NULL, op);
}

lt_status cuda_nn_gelu_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *x,
                                lt_gelu_approx approx) {
  cuda_device_guard guard(gx->storage->device);
  const gelu_backward_op op = {approx == LT_GELU_TANH};
  if (x->dtype == LT_FLOAT64) return act_launch<double>("gelu_backward", gx, go, x, NULL, op);
  return act_launch<float>("gelu_backward", gx, go, x, NULL, op);
}

lt_status cuda_nn_masked_scale(lt_tensor *out, const lt_tensor *x, const lt_tensor *mask,
                               double scale) {
  cuda_device_guard guard(out->storage->device);
  const masked_scale_op op = {scale};
  if (x->dtype == LT_FLOAT64) return act_launch<double>("masked_scale", out, x, NULL, mask, op);
  return act_launch<float>("masked_scale", out, x, NULL, mask, op);
}
