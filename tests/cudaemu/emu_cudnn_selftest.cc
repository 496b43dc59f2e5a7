// Self-test of the emulator's cuDNN (emu_cudnn.cc), built with it alone:
//   g++ -std=c++17 -I/usr/local/cuda/include -I<cudnn include dir>
//       emu_cudnn.cc emu_cudnn_selftest.cc -o emu_cudnn_selftest
// Why: emu_cudnn.cc is the reference lt's CUDA code is judged against, so it
// needs checks of its own that do not go through lt: convolutions against a
// hand-computed case and the adjoint identity
//   <conv(x, w), dy> = <x, bwd_data(dy, w)> = <w, bwd_filter(x, dy)>,
// batch norm against a direct computation, the workspace contract, and the
// documented BAD_PARAM cases. Prints one line per group and exits nonzero on
// any failure.
#include <cudnn.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" size_t emu_cudnn_live_objects(void);

namespace {

int failures = 0, checks = 0;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("  FAIL %s:%d: ", __FILE__, __LINE__);                                                \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

// A call that must answer want.
#define EXPECT(want, call)                                                                         \
  do {                                                                                             \
    const cudnnStatus_t got_ = (call);                                                             \
    CHECK(got_ == (want), "%s -> %s, expected %s", #call, cudnnGetErrorString(got_),               \
          cudnnGetErrorString(want));                                                              \
  } while (0)
#define OK(call) EXPECT(CUDNN_STATUS_SUCCESS, call)

bool close(double a, double b, double tol) { return fabs(a - b) <= tol * (1.0 + fabs(b)); }

// Deterministic pseudo-random values in [-1, 1).
uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
double rnd() {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng_state >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}
std::vector<double> random_vec(size_t n) {
  std::vector<double> v(n);
  for (double &e : v) e = rnd();
  return v;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

// ---- descriptors ----

cudnnTensorDescriptor_t tensor(cudnnDataType_t dt, int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  OK(cudnnCreateTensorDescriptor(&d));
  OK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dt, n, c, h, w));
  return d;
}

cudnnFilterDescriptor_t filter(cudnnDataType_t dt, int k, int c, int h, int w) {
  cudnnFilterDescriptor_t d;
  OK(cudnnCreateFilterDescriptor(&d));
  OK(cudnnSetFilter4dDescriptor(d, dt, CUDNN_TENSOR_NCHW, k, c, h, w));
  return d;
}

struct conv_params {
  int pad[2] = {0, 0}, stride[2] = {1, 1}, dil[2] = {1, 1}, groups = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
};

cudnnConvolutionDescriptor_t convolution(const conv_params &p, cudnnDataType_t compute) {
  cudnnConvolutionDescriptor_t d;
  OK(cudnnCreateConvolutionDescriptor(&d));
  OK(cudnnSetConvolution2dDescriptor(d, p.pad[0], p.pad[1], p.stride[0], p.stride[1], p.dil[0],
                                     p.dil[1], p.mode, compute));
  OK(cudnnSetConvolutionGroupCount(d, p.groups));
  return d;
}

// ---- typed buffers: "device memory" is host memory ----

struct buffer {
  cudnnDataType_t dt;
  std::vector<unsigned char> bytes;
  static size_t esize(cudnnDataType_t t) {
    return t == CUDNN_DATA_DOUBLE ? 8 : t == CUDNN_DATA_FLOAT ? 4 : 2;
  }
  buffer(cudnnDataType_t t, size_t n) : dt(t), bytes(n * esize(t)) {}
  buffer(cudnnDataType_t t, const std::vector<double> &v) : buffer(t, v.size()) {
    for (size_t i = 0; i < v.size(); i++) set(i, v[i]);
  }
  size_t size() const { return bytes.size() / esize(dt); }
  void *ptr() { return bytes.data(); }
  void set(size_t i, double v) {
    unsigned char *p = &bytes[i * esize(dt)];
    if (dt == CUDNN_DATA_DOUBLE) {
      memcpy(p, &v, 8);
    } else if (dt == CUDNN_DATA_FLOAT) {
      const float f = (float)v;
      memcpy(p, &f, 4);
    } else if (dt == CUDNN_DATA_HALF) {
      const unsigned short b = __half_as_ushort(__float2half_rn((float)v));
      memcpy(p, &b, 2);
    } else {
      const unsigned short b = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
      memcpy(p, &b, 2);
    }
  }
  double get(size_t i) const {
    const unsigned char *p = &bytes[i * esize(dt)];
    if (dt == CUDNN_DATA_DOUBLE) {
      double v;
      memcpy(&v, p, 8);
      return v;
    }
    if (dt == CUDNN_DATA_FLOAT) {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
    unsigned short b;
    memcpy(&b, p, 2);
    return dt == CUDNN_DATA_HALF ? __half2float(__ushort_as_half(b))
                                 : __bfloat162float(__ushort_as_bfloat16(b));
  }
  std::vector<double> values() const {
    std::vector<double> v(size());
    for (size_t i = 0; i < v.size(); i++) v[i] = get(i);
    return v;
  }
};

// Scaling factors in the type cuDNN reads for data type dt.
struct scale {
  double d;
  float f;
  scale(double v) : d(v), f((float)v) {}
  const void *for_type(cudnnDataType_t dt) const {
    return dt == CUDNN_DATA_DOUBLE ? (const void *)&d : (const void *)&f;
  }
};

// ---- one convolution problem ----

struct conv_problem {
  cudnnHandle_t h;
  cudnnDataType_t dt;
  int n, c, hh, ww, k, r, s;
  conv_params p;
  int ho, wo;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;

  conv_problem(cudnnHandle_t handle, cudnnDataType_t t, int n_, int c_, int h_, int w_, int k_,
               int r_, int s_, const conv_params &p_)
      : h(handle), dt(t), n(n_), c(c_), hh(h_), ww(w_), k(k_), r(r_), s(s_), p(p_) {
    ho = (hh + 2 * p.pad[0] - (p.dil[0] * (r - 1) + 1)) / p.stride[0] + 1;
    wo = (ww + 2 * p.pad[1] - (p.dil[1] * (s - 1) + 1)) / p.stride[1] + 1;
    xd = tensor(dt, n, c, hh, ww);
    yd = tensor(dt, n, k, ho, wo);
    wd = filter(dt, k, c / p.groups, r, s);
    cd = convolution(p, dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT);
  }
  ~conv_problem() {
    OK(cudnnDestroyTensorDescriptor(xd));
    OK(cudnnDestroyTensorDescriptor(yd));
    OK(cudnnDestroyFilterDescriptor(wd));
    OK(cudnnDestroyConvolutionDescriptor(cd));
  }
  size_t x_count() const { return (size_t)n * c * hh * ww; }
  size_t y_count() const { return (size_t)n * k * ho * wo; }
  size_t w_count() const { return (size_t)k * (c / p.groups) * r * s; }

  // Each runs the given algorithm with exactly the workspace it asks for.
  cudnnStatus_t forward(buffer &x, buffer &w, buffer &y, double alpha = 1, double beta = 0,
                        int algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
    size_t bytes = 0;
    OK(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, (cudnnConvolutionFwdAlgo_t)algo,
                                               &bytes));
    std::vector<unsigned char> ws(bytes);
    const scale a(alpha), b(beta);
    return cudnnConvolutionForward(h, a.for_type(dt), xd, x.ptr(), wd, w.ptr(), cd,
                                   (cudnnConvolutionFwdAlgo_t)algo, bytes ? ws.data() : NULL, bytes,
                                   b.for_type(dt), yd, y.ptr());
  }
  cudnnStatus_t backward_data(buffer &dy, buffer &w, buffer &dx, double alpha = 1, double beta = 0,
                              int algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1) {
    size_t bytes = 0;
    OK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, yd, cd, xd,
                                                    (cudnnConvolutionBwdDataAlgo_t)algo, &bytes));
    std::vector<unsigned char> ws(bytes);
    const scale a(alpha), b(beta);
    return cudnnConvolutionBackwardData(
        h, a.for_type(dt), wd, w.ptr(), yd, dy.ptr(), cd, (cudnnConvolutionBwdDataAlgo_t)algo,
        bytes ? ws.data() : NULL, bytes, b.for_type(dt), xd, dx.ptr());
  }
  cudnnStatus_t backward_filter(buffer &x, buffer &dy, buffer &dw, double alpha = 1,
                                double beta = 0, int algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1) {
    size_t bytes = 0;
    OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, xd, yd, cd, wd, (cudnnConvolutionBwdFilterAlgo_t)algo, &bytes));
    std::vector<unsigned char> ws(bytes);
    const scale a(alpha), b(beta);
    return cudnnConvolutionBackwardFilter(
        h, a.for_type(dt), xd, x.ptr(), yd, dy.ptr(), cd, (cudnnConvolutionBwdFilterAlgo_t)algo,
        bytes ? ws.data() : NULL, bytes, b.for_type(dt), wd, dw.ptr());
  }
};

// The forward convolution written out directly (gather form, independent of
// the emulator's loops): packed NCHW x, KCRS w.
std::vector<double> reference_forward(const conv_problem &q, const std::vector<double> &x,
                                      const std::vector<double> &w) {
  const int cg = q.c / q.p.groups, kg = q.k / q.p.groups;
  std::vector<double> y(q.y_count(), 0.0);
  for (int n = 0; n < q.n; n++)
    for (int k = 0; k < q.k; k++)
      for (int oh = 0; oh < q.ho; oh++)
        for (int ow = 0; ow < q.wo; ow++) {
          double acc = 0.0;
          for (int c = 0; c < cg; c++)
            for (int r = 0; r < q.r; r++)
              for (int s = 0; s < q.s; s++) {
                const int ih = oh * q.p.stride[0] - q.p.pad[0] + r * q.p.dil[0];
                const int iw = ow * q.p.stride[1] - q.p.pad[1] + s * q.p.dil[1];
                if (ih < 0 || ih >= q.hh || iw < 0 || iw >= q.ww) continue;
                const int ci = (k / kg) * cg + c;
                const bool flip = q.p.mode == CUDNN_CONVOLUTION;
                const int rr = flip ? q.r - 1 - r : r, ss = flip ? q.s - 1 - s : s;
                acc += x[((size_t)(n * q.c + ci) * q.hh + ih) * q.ww + iw] *
                       w[((size_t)(k * cg + c) * q.r + rr) * q.s + ss];
              }
          y[((size_t)(n * q.k + k) * q.ho + oh) * q.wo + ow] = acc;
        }
  return y;
}

bool all_close(const std::vector<double> &got, const std::vector<double> &want, double tol,
               const char *what) {
  for (size_t i = 0; i < want.size(); i++)
    if (!close(got[i], want[i], tol)) {
      printf("  %s[%zu] = %.17g, expected %.17g\n", what, i, got[i], want[i]);
      return false;
    }
  return true;
}

// ---- the checks ----

void test_hand_conv(cudnnHandle_t h) {
  printf("conv: a hand-computed 3x3 input, 2x2 filter\n");
  const std::vector<double> xv = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv = {1, 2, 3, 4};
  for (cudnnDataType_t dt : {CUDNN_DATA_DOUBLE, CUDNN_DATA_FLOAT}) {
    conv_params p;
    {
      conv_problem q(h, dt, 1, 1, 3, 3, 1, 2, 2, p);
      buffer x(dt, xv), w(dt, wv), y(dt, 4);
      OK(q.forward(x, w, y));
      CHECK(all_close(y.values(), {37, 47, 67, 77}, 0, "y"), "cross-correlation");
      // alpha/beta: y = 2 * conv + 0.5 * y
      buffer y2(dt, std::vector<double>{10, 10, 10, 10});
      OK(q.forward(x, w, y2, 2.0, 0.5));
      CHECK(all_close(y2.values(), {79, 99, 139, 159}, 0, "y"), "alpha 2, beta 0.5");
      // beta == 0: y is not read, NaN there must not leak through
      buffer y3(dt, std::vector<double>{NAN, NAN, NAN, NAN});
      OK(q.forward(x, w, y3));
      CHECK(all_close(y3.values(), {37, 47, 67, 77}, 0, "y"), "beta 0 with NaN in y");
      // backward data, dy = 1: each input sums the filter taps that touch it
      buffer dy(dt, std::vector<double>{1, 1, 1, 1}), dx(dt, 9);
      OK(q.backward_data(dy, w, dx));
      CHECK(all_close(dx.values(), {1, 3, 2, 4, 10, 6, 3, 7, 4}, 0, "dx"), "backward data");
      // backward filter, dy = 1: each tap sums the inputs it sees
      buffer dw(dt, 4);
      OK(q.backward_filter(x, dy, dw));
      CHECK(all_close(dw.values(), {12, 16, 24, 28}, 0, "dw"), "backward filter");
      // beta = 1 accumulates
      OK(q.backward_filter(x, dy, dw, 1.0, 1.0));
      CHECK(all_close(dw.values(), {24, 32, 48, 56}, 0, "dw"), "backward filter, beta 1");
    }
    {
      p.mode = CUDNN_CONVOLUTION; // the filter applies mirrored
      conv_problem q(h, dt, 1, 1, 3, 3, 1, 2, 2, p);
      buffer x(dt, xv), w(dt, wv), y(dt, 4);
      OK(q.forward(x, w, y));
      CHECK(all_close(y.values(), {23, 33, 53, 63}, 0, "y"), "convolution mode");
    }
    {
      conv_params p2;
      p2.pad[0] = p2.pad[1] = 1;
      p2.stride[0] = p2.stride[1] = 2;
      conv_problem q(h, dt, 1, 1, 3, 3, 1, 2, 2, p2);
      CHECK(q.ho == 2 && q.wo == 2, "padded strided output %d x %d", q.ho, q.wo);
      buffer x(dt, xv), w(dt, wv), y(dt, 4);
      OK(q.forward(x, w, y));
      CHECK(all_close(y.values(), {4, 18, 36, 77}, 0, "y"), "padding 1, stride 2");
    }
    {
      conv_params p3;
      p3.dil[0] = p3.dil[1] = 2;
      conv_problem q(h, dt, 1, 1, 3, 3, 1, 2, 2, p3);
      buffer x(dt, xv), w(dt, wv), y(dt, 1);
      OK(q.forward(x, w, y));
      CHECK(all_close(y.values(), {64}, 0, "y"), "dilation 2");
    }
  }
}

void test_adjoint(cudnnHandle_t h) {
  printf("conv: reference forward and the adjoint identity (padding, stride, dilation, groups)\n");
  for (cudnnConvolutionMode_t mode : {CUDNN_CROSS_CORRELATION, CUDNN_CONVOLUTION}) {
    conv_params p;
    p.pad[0] = 1, p.pad[1] = 2;
    p.stride[0] = 2, p.stride[1] = 1;
    p.dil[0] = 2, p.dil[1] = 1;
    p.groups = 2;
    p.mode = mode;
    const cudnnDataType_t dt = CUDNN_DATA_DOUBLE;
    conv_problem q(h, dt, 2, 4, 7, 6, 6, 3, 2, p);
    const std::vector<double> xv = random_vec(q.x_count()), wv = random_vec(q.w_count()),
                              dyv = random_vec(q.y_count());
    buffer x(dt, xv), w(dt, wv), dy(dt, dyv), y(dt, q.y_count()), dx(dt, q.x_count()),
        dw(dt, q.w_count());
    OK(q.forward(x, w, y));
    CHECK(all_close(y.values(), reference_forward(q, xv, wv), 1e-12, "y"),
          "forward against the direct loops (mode %d)", (int)mode);
    OK(q.backward_data(dy, w, dx));
    OK(q.backward_filter(x, dy, dw));
    const double a = dot(y.values(), dyv), b = dot(xv, dx.values()), c = dot(wv, dw.values());
    CHECK(close(a, b, 1e-12) && close(a, c, 1e-12),
          "<conv(x,w),dy> = %.17g, <x,bwd_data> = %.17g, <w,bwd_filter> = %.17g", a, b, c);
    // Every algorithm computes the same thing.
    for (int algo : {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_GEMM}) {
      buffer y2(dt, q.y_count());
      OK(q.forward(x, w, y2, 1, 0, algo));
      CHECK(all_close(y2.values(), y.values(), 0, "y"), "algo %d", algo);
    }
  }
}

void test_16bit(cudnnHandle_t h) {
  printf("conv: float16 / bfloat16 data computed in float against double\n");
  for (cudnnDataType_t dt : {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) {
    conv_params p;
    p.pad[0] = p.pad[1] = 1;
    conv_problem q(h, dt, 2, 3, 5, 5, 4, 3, 3, p);
    buffer x(dt, random_vec(q.x_count())), w(dt, random_vec(q.w_count())), y(dt, q.y_count());
    OK(q.forward(x, w, y, 1, 0, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM));
    // The reference from the rounded inputs; one rounding of the output.
    const std::vector<double> want = reference_forward(q, x.values(), w.values());
    const double tol = dt == CUDNN_DATA_HALF ? 1e-3 : 8e-3;
    CHECK(all_close(y.values(), want, tol, "y"), "data type %d", (int)dt);
  }
}

void test_algorithms(cudnnHandle_t h) {
  printf("conv: heuristics, workspace sizes and the workspace contract\n");
  conv_params p;
  p.pad[0] = p.pad[1] = 1;
  const cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  conv_problem q(h, dt, 2, 3, 6, 6, 4, 3, 3, p);
  int max = 0, got = 0;
  OK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
  CHECK(max >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "max count %d", max);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf((size_t)max);
  for (cudnnMathType_t math : {CUDNN_FMA_MATH, CUDNN_TENSOR_OP_MATH}) {
    OK(cudnnSetConvolutionMathType(q.cd, math));
    OK(cudnnGetConvolutionForwardAlgorithm_v7(h, q.xd, q.wd, q.cd, q.yd, max, &got, perf.data()));
    CHECK(got >= 3 && got <= max, "%d results", got);
    bool zero = false, nonzero = false, unsupported = false, other_math = false;
    for (int i = 0; i < got; i++) {
      for (int j = 0; j < i; j++)
        CHECK(perf[i].algo != perf[j].algo, "algorithm %d listed twice", (int)perf[i].algo);
      if (perf[i].status != CUDNN_STATUS_SUCCESS) {
        unsupported = true;
        continue;
      }
      other_math |= perf[i].mathType != math;
      CHECK(math != CUDNN_FMA_MATH || perf[i].mathType == CUDNN_FMA_MATH, "FMA math reported as %d",
            (int)perf[i].mathType);
      // The workspace query agrees with the perf result under its math type.
      size_t bytes = 1;
      OK(cudnnSetConvolutionMathType(q.cd, perf[i].mathType));
      OK(cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, q.wd, q.cd, q.yd, perf[i].algo, &bytes));
      OK(cudnnSetConvolutionMathType(q.cd, math));
      CHECK(bytes == perf[i].memory, "algo %d: %zu bytes vs perf %zu", (int)perf[i].algo, bytes,
            perf[i].memory);
      (bytes ? nonzero : zero) = true;
    }
    CHECK(zero && nonzero && unsupported, "zero %d, nonzero %d, unsupported %d", zero, nonzero,
          unsupported);
    CHECK(math != CUDNN_TENSOR_OP_MATH || other_math, "no DEFAULT-math result under TENSOR_OP");
  }
  // The tensor-op workspace of the first algorithm is larger than its FMA one.
  size_t fma_bytes = 0, tc_bytes = 0;
  const cudnnConvolutionFwdAlgo_t best = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  OK(cudnnSetConvolutionMathType(q.cd, CUDNN_FMA_MATH));
  OK(cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, q.wd, q.cd, q.yd, best, &fma_bytes));
  OK(cudnnSetConvolutionMathType(q.cd, CUDNN_TENSOR_OP_MATH));
  OK(cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, q.wd, q.cd, q.yd, best, &tc_bytes));
  CHECK(fma_bytes > 0 && tc_bytes > fma_bytes, "workspace FMA %zu, TENSOR_OP %zu", fma_bytes,
        tc_bytes);
  // Running: NULL or too small a workspace is BAD_PARAM; the FMA size under
  // TENSOR_OP math is too small too.
  buffer x(dt, random_vec(q.x_count())), w(dt, random_vec(q.w_count())), y(dt, q.y_count());
  std::vector<unsigned char> ws(tc_bytes);
  const float one = 1.0f, zero = 0.0f;
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd, best, NULL, tc_bytes,
                                 &zero, q.yd, y.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd, best, ws.data(),
                                 fma_bytes, &zero, q.yd, y.ptr()));
  OK(cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd, best, ws.data(), tc_bytes,
                             &zero, q.yd, y.ptr()));
  CHECK(ws[0] != 0 || ws[tc_bytes - 1] != 0, "the workspace was not written");
  // A zero-workspace algorithm runs with NULL.
  OK(cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd,
                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, q.yd,
                             y.ptr()));
  // FFT takes unit strides only; an algorithm the heuristics never offer is
  // NOT_SUPPORTED; one outside the enum is BAD_PARAM.
  size_t bytes = 0;
  EXPECT(CUDNN_STATUS_NOT_SUPPORTED,
         cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, q.wd, q.cd, q.yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &bytes));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, q.wd, q.cd, q.yd,
                                                 (cudnnConvolutionFwdAlgo_t)99, &bytes));
  // The backward directions list results the same way.
  OK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> dperf((size_t)max);
  OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, q.wd, q.yd, q.cd, q.xd, max, &got,
                                                 dperf.data()));
  CHECK(got >= 3, "%d backward-data results", got);
  OK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> fperf((size_t)max);
  OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, q.xd, q.yd, q.cd, q.wd, max, &got,
                                                   fperf.data()));
  CHECK(got >= 3, "%d backward-filter results", got);
  OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, q.xd, q.yd, q.cd, q.wd, 1, &got,
                                                   fperf.data()));
  CHECK(got == 1, "requested 1, got %d", got);
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                     h, q.xd, q.yd, q.cd, q.wd, 0, &got, fperf.data()));
  // Backward data with too small a workspace.
  size_t need = 0;
  OK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, q.wd, q.yd, q.cd, q.xd,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &need));
  CHECK(need > 0, "backward data ALGO_1 needs no workspace");
  buffer dx(dt, q.x_count());
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionBackwardData(h, &one, q.wd, w.ptr(), q.yd, y.ptr(), q.cd,
                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws.data(), need - 1, &zero,
                                      q.xd, dx.ptr()));
}

void test_bias(cudnnHandle_t h) {
  printf("bias: cudnnAddTensor and cudnnConvolutionBackwardBias\n");
  for (cudnnDataType_t dt : {CUDNN_DATA_DOUBLE, CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    const int n = 2, c = 3, hw = 4;
    cudnnTensorDescriptor_t yd = tensor(dt, n, c, 2, 2), bd = tensor(dt, 1, c, 1, 1);
    std::vector<double> yv(n * c * hw);
    for (size_t i = 0; i < yv.size(); i++) yv[i] = (double)i;
    buffer y(dt, yv), b(dt, std::vector<double>{1, 2, 3});
    const scale one(1.0), half(0.5), two(2.0), zero(0.0);
    OK(cudnnAddTensor(h, two.for_type(dt), bd, b.ptr(), half.for_type(dt), yd, y.ptr()));
    bool ok = true;
    for (size_t i = 0; i < yv.size(); i++)
      ok &= close(y.get(i), 2.0 * (1 + (int)(i / hw) % c) + 0.5 * yv[i], 1e-3);
    CHECK(ok, "AddTensor, data type %d", (int)dt);
    // db = sum of dy per channel, then beta blends.
    buffer dy(dt, yv), db(dt, std::vector<double>{NAN, NAN, NAN});
    OK(cudnnConvolutionBackwardBias(h, one.for_type(dt), yd, dy.ptr(), zero.for_type(dt), bd,
                                    db.ptr()));
    std::vector<double> want(c, 0.0);
    for (size_t i = 0; i < yv.size(); i++) want[(i / hw) % c] += yv[i];
    CHECK(all_close(db.values(), want, 1e-3, "db"), "BackwardBias, data type %d", (int)dt);
    OK(cudnnConvolutionBackwardBias(h, one.for_type(dt), yd, dy.ptr(), one.for_type(dt), bd,
                                    db.ptr()));
    for (double &e : want) e *= 2;
    CHECK(all_close(db.values(), want, 1e-3, "db"), "BackwardBias, beta 1");
    // A bias that is not 1 x C x 1 x 1 is refused; so is one that does not broadcast.
    cudnnTensorDescriptor_t bad = tensor(dt, 1, c, 2, 1), bad2 = tensor(dt, 1, 2, 1, 1);
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionBackwardBias(h, one.for_type(dt), yd, dy.ptr(),
                                                                zero.for_type(dt), bad, db.ptr()));
    EXPECT(CUDNN_STATUS_BAD_PARAM,
           cudnnAddTensor(h, one.for_type(dt), bad2, b.ptr(), one.for_type(dt), yd, y.ptr()));
    for (cudnnTensorDescriptor_t d : {yd, bd, bad, bad2}) OK(cudnnDestroyTensorDescriptor(d));
  }
}

// ---- batch norm against a direct computation (packed NCHW, spatial) ----

struct bn_direct {
  std::vector<double> y, mean, invstd, rmean, rvar, dx, dscale, dbias;
};

bn_direct bn_reference(int n, int c, int hw, const std::vector<double> &x,
                       const std::vector<double> &scale, const std::vector<double> &bias,
                       const std::vector<double> &rmean0, const std::vector<double> &rvar0,
                       const std::vector<double> &dy, double factor, double eps) {
  bn_direct r;
  const double m = (double)n * hw;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  for (int ch = 0; ch < c; ch++) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) s += x[(size_t)(i * c + ch) * hw + j];
    const double mean = s / m;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        const double d = x[(size_t)(i * c + ch) * hw + j] - mean;
        ss += d * d;
      }
    const double var = ss / m, invstd = 1.0 / sqrt(var + eps);
    r.mean.push_back(mean);
    r.invstd.push_back(invstd);
    r.rmean.push_back((1 - factor) * rmean0[ch] + factor * mean);
    r.rvar.push_back((1 - factor) * rvar0[ch] + factor * ss / (m - 1));
    double gb = 0, gs = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        const size_t k = (size_t)(i * c + ch) * hw + j;
        const double xhat = (x[k] - mean) * invstd;
        r.y[k] = scale[ch] * xhat + bias[ch];
        gb += dy[k];
        gs += dy[k] * xhat;
      }
    r.dbias.push_back(gb);
    r.dscale.push_back(gs);
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        const size_t k = (size_t)(i * c + ch) * hw + j;
        const double xhat = (x[k] - mean) * invstd;
        r.dx[k] = scale[ch] * invstd * (dy[k] - gb / m - xhat * gs / m);
      }
  }
  return r;
}

void test_batch_norm(cudnnHandle_t h) {
  printf("batch norm: training forward / backward and inference against direct loops\n");
  const int n = 3, c = 2, hh = 2, ww = 3, hw = hh * ww;
  const double eps = 1e-5, factor = 0.1;
  for (cudnnDataType_t dt : {CUDNN_DATA_DOUBLE, CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    for (cudnnBatchNormMode_t mode :
         {CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_SPATIAL_PERSISTENT}) {
      const double tol = dt == CUDNN_DATA_DOUBLE ? 1e-12 : dt == CUDNN_DATA_FLOAT ? 1e-5 : 4e-3;
      cudnnTensorDescriptor_t xd = tensor(dt, n, c, hh, ww), pd;
      OK(cudnnCreateTensorDescriptor(&pd));
      OK(cudnnDeriveBNTensorDescriptor(pd, xd, mode));
      const cudnnDataType_t pt = dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
      buffer x(dt, random_vec((size_t)n * c * hw)), dy(dt, random_vec((size_t)n * c * hw));
      buffer scale_b(pt, std::vector<double>{1.5, -0.5}), bias_b(pt, std::vector<double>{0.25, 2});
      buffer rmean(pt, std::vector<double>{0.5, -1}), rvar(pt, std::vector<double>{2, 0.5});
      buffer smean(pt, c), sinv(pt, c), y(dt, x.size()), dx(dt, x.size());
      const bn_direct want = bn_reference(n, c, hw, x.values(), scale_b.values(), bias_b.values(),
                                          rmean.values(), rvar.values(), dy.values(), factor, eps);
      const scale one(1.0), zero(0.0);
      OK(cudnnBatchNormalizationForwardTraining(
          h, mode, one.for_type(dt), zero.for_type(dt), xd, x.ptr(), xd, y.ptr(), pd, scale_b.ptr(),
          bias_b.ptr(), factor, rmean.ptr(), rvar.ptr(), eps, smean.ptr(), sinv.ptr()));
      CHECK(all_close(y.values(), want.y, tol, "y"), "forward y, type %d mode %d", dt, mode);
      CHECK(all_close(smean.values(), want.mean, tol, "saveMean"), "saveMean");
      CHECK(all_close(sinv.values(), want.invstd, tol, "saveInvVariance"), "saveInvVariance");
      CHECK(all_close(rmean.values(), want.rmean, tol, "runningMean"), "running mean");
      CHECK(all_close(rvar.values(), want.rvar, tol, "runningVariance"),
            "running variance (unbiased)");
      // Backward from the saved statistics, and recomputing them.
      for (bool saved : {true, false}) {
        buffer dscale(pt, std::vector<double>{NAN, NAN}), dbias(pt, std::vector<double>{NAN, NAN});
        OK(cudnnBatchNormalizationBackward(
            h, mode, one.for_type(dt), zero.for_type(dt), one.for_type(dt), zero.for_type(dt), xd,
            x.ptr(), xd, dy.ptr(), xd, dx.ptr(), pd, scale_b.ptr(), dscale.ptr(), dbias.ptr(), eps,
            saved ? smean.ptr() : NULL, saved ? sinv.ptr() : NULL));
        CHECK(all_close(dx.values(), want.dx, dt == CUDNN_DATA_HALF ? 2e-2 : tol, "dx"),
              "backward dx (saved %d)", saved);
        CHECK(all_close(dscale.values(), want.dscale, tol, "dscale"), "dscale");
        CHECK(all_close(dbias.values(), want.dbias, tol, "dbias"), "dbias");
        // The betas blend: dx += 2 * dx, dscale = 0.5 * dscale + dscale.
        const scale two(2.0), half(0.5);
        buffer dx2(dt, dx.values());
        OK(cudnnBatchNormalizationBackward(
            h, mode, two.for_type(dt), one.for_type(dt), half.for_type(dt), one.for_type(dt), xd,
            x.ptr(), xd, dy.ptr(), xd, dx2.ptr(), pd, scale_b.ptr(), dscale.ptr(), dbias.ptr(), eps,
            saved ? smean.ptr() : NULL, saved ? sinv.ptr() : NULL));
        std::vector<double> w3 = want.dx, s3 = want.dscale;
        for (double &e : w3) e *= 3;
        for (double &e : s3) e *= 1.5;
        CHECK(all_close(dx2.values(), w3, dt == CUDNN_DATA_HALF ? 2e-2 : tol, "dx"),
              "betaDataDiff");
        CHECK(all_close(dscale.values(), s3, tol, "dscale"), "betaParamDiff");
      }
      // Inference from the (updated) running statistics.
      OK(cudnnBatchNormalizationForwardInference(h, mode, one.for_type(dt), zero.for_type(dt), xd,
                                                 x.ptr(), xd, y.ptr(), pd, scale_b.ptr(),
                                                 bias_b.ptr(), rmean.ptr(), rvar.ptr(), eps));
      bool ok = true;
      const std::vector<double> xv = x.values(), sv = scale_b.values(), bv = bias_b.values(),
                                mv = rmean.values(), vv = rvar.values();
      for (size_t k = 0; k < xv.size(); k++) {
        const int ch = (int)(k / hw) % c;
        ok &= close(y.get(k), sv[ch] * (xv[k] - mv[ch]) / sqrt(vv[ch] + eps) + bv[ch], tol);
      }
      CHECK(ok, "inference, type %d", dt);
      OK(cudnnDestroyTensorDescriptor(xd));
      OK(cudnnDestroyTensorDescriptor(pd));
    }
  }
  // Per activation: each (c, h, w) normalised over the batch alone.
  {
    const cudnnDataType_t dt = CUDNN_DATA_DOUBLE;
    cudnnTensorDescriptor_t xd = tensor(dt, 4, 2, 1, 3), pd;
    OK(cudnnCreateTensorDescriptor(&pd));
    OK(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_PER_ACTIVATION));
    buffer x(dt, random_vec(24)), y(dt, 24), sc(dt, std::vector<double>(6, 1.0)),
        bi(dt, std::vector<double>(6, 0.0)), sm(dt, 6), si(dt, 6);
    const double one = 1, zero = 0;
    OK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_PER_ACTIVATION, &one, &zero, xd,
                                              x.ptr(), xd, y.ptr(), pd, sc.ptr(), bi.ptr(), 1.0,
                                              NULL, NULL, 0.0, sm.ptr(), si.ptr()));
    bool ok = true;
    for (int f = 0; f < 6; f++) {
      double s = 0, ss = 0;
      for (int i = 0; i < 4; i++) s += x.get((size_t)i * 6 + f);
      for (int i = 0; i < 4; i++) ss += pow(x.get((size_t)i * 6 + f) - s / 4, 2);
      ok &= close(sm.get(f), s / 4, 1e-12) && close(si.get(f), 1 / sqrt(ss / 4), 1e-12);
      for (int i = 0; i < 4; i++)
        ok &= close(y.get((size_t)i * 6 + f), (x.get((size_t)i * 6 + f) - s / 4) / sqrt(ss / 4),
                    1e-12);
    }
    CHECK(ok, "per-activation forward training");
    OK(cudnnDestroyTensorDescriptor(xd));
    OK(cudnnDestroyTensorDescriptor(pd));
  }
  // The derived descriptor's data type: float for 16-bit data.
  for (cudnnDataType_t dt : {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) {
    cudnnTensorDescriptor_t xd = tensor(dt, 2, 3, 2, 2), pd, wrong = tensor(dt, 1, 3, 1, 1);
    OK(cudnnCreateTensorDescriptor(&pd));
    OK(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL));
    buffer x(dt, random_vec(24)), y(dt, 24), p(CUDNN_DATA_FLOAT, std::vector<double>{1, 1, 1});
    const float one = 1, zero = 0;
    OK(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x.ptr(),
                                               xd, y.ptr(), pd, p.ptr(), p.ptr(), p.ptr(), p.ptr(),
                                               1e-5));
    // Per-channel tensors in the data's own 16-bit type are refused.
    EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnBatchNormalizationForwardInference(
                                       h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x.ptr(), xd,
                                       y.ptr(), wrong, p.ptr(), p.ptr(), p.ptr(), p.ptr(), 1e-5));
    for (cudnnTensorDescriptor_t d : {xd, pd, wrong}) OK(cudnnDestroyTensorDescriptor(d));
  }
}

void test_bad_params(cudnnHandle_t h) {
  printf("BAD_PARAM and NOT_SUPPORTED cases\n");
  cudnnTensorDescriptor_t t;
  cudnnFilterDescriptor_t f;
  cudnnConvolutionDescriptor_t cd;
  OK(cudnnCreateTensorDescriptor(&t));
  OK(cudnnCreateFilterDescriptor(&f));
  OK(cudnnCreateConvolutionDescriptor(&cd));
  const cudnnDataType_t F = CUDNN_DATA_FLOAT;
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, F, -1, 2, 3, 4));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, F, 0, 2, 3, 4));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetTensor4dDescriptor(t, (cudnnTensorFormat_t)7, F, 1, 2, 3, 4));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, (cudnnDataType_t)-3, 1, 2, 3, 4));
  EXPECT(CUDNN_STATUS_NOT_SUPPORTED,
         cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, F, 65536, 65536, 1, 1));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetFilter4dDescriptor(f, F, CUDNN_TENSOR_NCHW, 2, -2, 3, 3));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetConvolution2dDescriptor(cd, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, F));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetConvolution2dDescriptor(cd, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION, F));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 0, CUDNN_CROSS_CORRELATION, F));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, (cudnnConvolutionMode_t)2, F));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionGroupCount(cd, 0));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetConvolutionMathType(cd, (cudnnMathType_t)9));
  // Never-set descriptors cannot be used.
  size_t bytes = 0;
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnGetConvolutionForwardWorkspaceSize(h, t, f, cd, t,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &bytes));
  OK(cudnnDestroyTensorDescriptor(t));
  OK(cudnnDestroyFilterDescriptor(f));
  OK(cudnnDestroyConvolutionDescriptor(cd));
  // ... nor destroyed ones, which cannot be destroyed twice either.
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, F, 1, 1, 1, 1));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnDestroyTensorDescriptor(t));

  // Convolution shapes that do not fit together.
  conv_params p;
  conv_problem q(h, F, 1, 4, 5, 5, 2, 3, 3, p);
  const float one = 1, zero = 0;
  buffer x(F, q.x_count()), w(F, q.w_count()), y(F, q.y_count());
  cudnnTensorDescriptor_t y_wrong = tensor(F, 1, 2, 4, 3), x3 = tensor(F, 1, 3, 5, 5),
                          xd16 = tensor(CUDNN_DATA_HALF, 1, 4, 5, 5);
  EXPECT(CUDNN_STATUS_NOT_SUPPORTED,
         cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, y_wrong,
                                 y.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionBackwardData(h, &one, q.wd, w.ptr(), y_wrong, y.ptr(), q.cd,
                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, NULL, 0, &zero, q.xd,
                                      x.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnConvolutionForward(h, &one, x3, x.ptr(), q.wd, w.ptr(), q.cd,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                                         NULL, 0, &zero, q.yd, y.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionForward(h, &one, xd16, x.ptr(), q.wd, w.ptr(), q.cd,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, q.yd,
                                 y.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionForward(h, NULL, q.xd, x.ptr(), q.wd, w.ptr(), q.cd,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, q.yd,
                                 y.ptr()));
  // 4 input channels in 3 groups; 2 output channels in 4 groups.
  OK(cudnnSetConvolutionGroupCount(q.cd, 4));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnConvolutionForward(h, &one, q.xd, x.ptr(), q.wd, w.ptr(), q.cd,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, q.yd,
                                 y.ptr()));
  OK(cudnnSetConvolutionGroupCount(q.cd, 1));
  // A filter larger than the padded input.
  cudnnFilterDescriptor_t big = filter(F, 2, 4, 7, 3);
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnGetConvolutionForwardWorkspaceSize(h, q.xd, big, q.cd, q.yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &bytes));
  // Double data with a float compute type is not a supported configuration.
  {
    conv_problem qd(h, CUDNN_DATA_DOUBLE, 1, 1, 3, 3, 1, 2, 2, p);
    OK(cudnnSetConvolution2dDescriptor(qd.cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, F));
    EXPECT(CUDNN_STATUS_NOT_SUPPORTED,
           cudnnGetConvolutionForwardWorkspaceSize(
               h, qd.xd, qd.wd, qd.cd, qd.yd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &bytes));
  }
  for (cudnnTensorDescriptor_t d : {y_wrong, x3, xd16}) OK(cudnnDestroyTensorDescriptor(d));
  OK(cudnnDestroyFilterDescriptor(big));

  // Batch norm: epsilon below the minimum, half of a pair, a bad mode.
  cudnnTensorDescriptor_t xd = tensor(F, 2, 3, 2, 2), pd;
  OK(cudnnCreateTensorDescriptor(&pd));
  OK(cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL));
  buffer bx(F, random_vec(24)), by(F, 24), pv(F, std::vector<double>{1, 1, 1}), s1(F, 3), s2(F, 3);
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationForwardTraining(
             h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, bx.ptr(), xd, by.ptr(), pd, pv.ptr(),
             pv.ptr(), 0.1, NULL, NULL, CUDNN_BN_MIN_EPSILON - 1e-3, s1.ptr(), s2.ptr()));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd,
                                                bx.ptr(), xd, by.ptr(), pd, pv.ptr(), pv.ptr(), 0.1,
                                                s1.ptr(), NULL, 1e-5, NULL, NULL));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd,
                                                bx.ptr(), xd, by.ptr(), pd, pv.ptr(), pv.ptr(), 0.1,
                                                NULL, NULL, 1e-5, s1.ptr(), NULL));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd,
                                         bx.ptr(), xd, by.ptr(), xd, by.ptr(), pd, pv.ptr(),
                                         s1.ptr(), s2.ptr(), 1e-5, s1.ptr(), NULL));
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd,
                                         bx.ptr(), xd, by.ptr(), xd, by.ptr(), pd, pv.ptr(), NULL,
                                         s2.ptr(), 1e-5, NULL, NULL));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnDeriveBNTensorDescriptor(pd, xd, (cudnnBatchNormMode_t)5));
  // The spatial descriptor does not fit the per-activation mode.
  EXPECT(CUDNN_STATUS_BAD_PARAM,
         cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_PER_ACTIVATION, &one, &zero, xd,
                                                 bx.ptr(), xd, by.ptr(), pd, pv.ptr(), pv.ptr(),
                                                 pv.ptr(), pv.ptr(), 1e-5));
  OK(cudnnDestroyTensorDescriptor(xd));
  OK(cudnnDestroyTensorDescriptor(pd));
  EXPECT(CUDNN_STATUS_BAD_PARAM, cudnnSetStream(NULL, 0));
  CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0,
        "error string");
}

} // namespace

int main() {
  cudnnHandle_t h;
  OK(cudnnCreate(&h));
  OK(cudnnSetStream(h, 0));
  test_hand_conv(h);
  test_adjoint(h);
  test_16bit(h);
  test_algorithms(h);
  test_bias(h);
  test_batch_norm(h);
  test_bad_params(h);
  OK(cudnnDestroy(h));
  CHECK(emu_cudnn_live_objects() == 0, "%zu handles or descriptors leaked",
        emu_cudnn_live_objects());
  printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
  return failures ? 1 : 0;
}
