// The cuDNN of the CUDA emulator (tests only, never shipped): a reference
// implementation of exactly the legacy cuDNN calls lt makes
// (engine/cuda/cuda_cudnn.cu, cuda_nn_conv2d.cu, cuda_nn_batch_norm.cu),
// linked into the emulator's test executable instead of libcudnn.
//
// Why: the point of running lt's CUDA sources on the CPU is to catch lt's
// mistakes before a GPU sees them, so each call here follows NVIDIA's
// documented cuDNN semantics, not what lt happens to expect: descriptors are
// validated as the API reference says (bad values -> CUDNN_STATUS_BAD_PARAM,
// unsupported configurations -> CUDNN_STATUS_NOT_SUPPORTED), alpha/beta are
// read as double for double data and as float otherwise, beta == 0 means the
// output is not read, a workspace smaller than the chosen algorithm needs is
// refused, and batch norm keeps the unbiased running variance next to the
// saved 1 / sqrt(biased variance + epsilon).
//
// The model:
// - Device memory is host memory; each call first runs the work queued on
//   its handle's stream (device_work), then does its own before it
//   returns; device pointers are dereferenced
//   directly (through memcpy: nothing here assumes alignment).
// - Everything is computed in double with naive loops (tests use small
//   sizes) and rounded once to the output's data type; float16 and bfloat16
//   go through the toolkit's host conversions.
// - The algorithm heuristics return a few results with distinct algorithms,
//   statuses, math types and workspace sizes (0 for some, a few KiB for
//   others, depending on the math type), so that a caller's algorithm choice
//   and workspace handling are exercised. The workspace given to a call is
//   overwritten with garbage first, as a real kernel's scratch would be, so
//   that a workspace overlapping live data shows up.
// - Every handle and descriptor is registered while it lives: using a
//   destroyed or never-created one is CUDNN_STATUS_BAD_PARAM, and
//   emu_cudnn_live_objects() (C linkage, not a cuDNN function) counts them
//   for leak checks.
// - Checks beyond the API reference, which real cuDNN leaves undefined, are
//   marked "emulator:" below: a handle used while another device is current.
// - LT_EMU_CUDNN_LOG=1 prints why each failing call failed, on stderr.
//
// Only the 4-d NCHW/NHWC forms lt uses are implemented; anything else (5-d,
// vectorised formats, integer data) answers CUDNN_STATUS_NOT_SUPPORTED.
#include <cudnn.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>
#include <mutex>
#include <new>
#include <unordered_set>
#include <utility>
#include <vector>

#include "emu_library.h"

// The runtime's device queries, when the test executable has a runtime
// (emu_runtime.cc); weak, so that the self-test links without one and the
// device checks are then skipped.
extern "C" cudaError_t cudaGetDevice(int *device) __attribute__((weak));
extern "C" cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device) __attribute__((weak));

// ---- the opaque structs behind cuDNN's handle and descriptor typedefs ----

namespace {

// A 4-d strided view: dims in N, C, H, W order (K, C, H, W for a filter) and
// the element stride of each, whatever the memory format.
struct layout {
  cudnnDataType_t dt;
  int d[4];
  int64_t st[4];
  int64_t off(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return a * st[0] + b * st[1] + c * st[2] + e * st[3];
  }
  int64_t count() const { return (int64_t)d[0] * d[1] * d[2] * d[3]; }
  bool same_dims(const layout &o) const {
    return d[0] == o.d[0] && d[1] == o.d[1] && d[2] == o.d[2] && d[3] == o.d[3];
  }
};

} // namespace

struct cudnnContext {
  int device; // current when the handle was made (-1: no runtime to ask)
  cudaStream_t stream;
};

struct cudnnTensorStruct {
  bool set; // false until a cudnnSetTensor4dDescriptor succeeds
  layout l;
};

struct cudnnFilterStruct {
  bool set;
  layout l; // K, C (per group), R, S
};

struct cudnnConvolutionStruct {
  bool set; // false until a cudnnSetConvolution2dDescriptor succeeds
  int pad[2], stride[2], dilation[2];
  cudnnConvolutionMode_t mode;
  cudnnDataType_t compute;
  int groups;           // cudnnSetConvolutionGroupCount; 1 when made
  cudnnMathType_t math; // cudnnSetConvolutionMathType; DEFAULT when made
};

namespace {

// ---- diagnostics ----

bool log_enabled() {
  static const bool on = [] {
    const char *s = getenv("LT_EMU_CUDNN_LOG");
    return s && *s && strcmp(s, "0") != 0;
  }();
  return on;
}

// Returns s, and says why on stderr when LT_EMU_CUDNN_LOG is set.
__attribute__((format(printf, 3, 4))) cudnnStatus_t fail(cudnnStatus_t s, const char *fn,
                                                         const char *why, ...) {
  if (log_enabled()) {
    char msg[512];
    va_list ap;
    va_start(ap, why);
    vsnprintf(msg, sizeof msg, why, ap);
    va_end(ap);
    fprintf(stderr, "emu_cudnn: %s: %s: %s\n", fn, cudnnGetErrorString(s), msg);
  }
  return s;
}

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    const cudnnStatus_t try_s_ = (expr);                                                           \
    if (try_s_ != CUDNN_STATUS_SUCCESS) return try_s_;                                             \
  } while (0)

// ---- the registry of live handles and descriptors ----

std::mutex registry_lock;
std::unordered_set<const void *> &registry() {
  static auto *live = new std::unordered_set<const void *>; // outlives exit-time destructors
  return *live;
}

template <class T> cudnnStatus_t make(const char *fn, T **out) {
  if (!out) return fail(CUDNN_STATUS_BAD_PARAM, fn, "NULL output pointer");
  T *p = new (std::nothrow) T();
  if (!p) return fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, fn, "out of memory");
  std::lock_guard<std::mutex> g(registry_lock);
  registry().insert(p);
  *out = p;
  return CUDNN_STATUS_SUCCESS;
}

bool alive(const void *p) {
  if (!p) return false;
  std::lock_guard<std::mutex> g(registry_lock);
  return registry().count(p) != 0;
}

// Descriptors: destroying NULL is a no-op, as with free; destroying something
// that is not live (twice, or never made) is refused.
template <class T> cudnnStatus_t unmake(const char *fn, T *p) {
  if (!p) return CUDNN_STATUS_SUCCESS;
  {
    std::lock_guard<std::mutex> g(registry_lock);
    if (registry().erase(p) == 0)
      return fail(CUDNN_STATUS_BAD_PARAM, fn, "%p is not a live object", (const void *)p);
  }
  delete p;
  return CUDNN_STATUS_SUCCESS;
}

// ---- data types and elements ----

// Whether t is one of cudnnDataType_t's enumerants (a descriptor may hold any
// of them; the operations below accept only the floating-point four).
bool valid_dtype(int t) { return t >= CUDNN_DATA_FLOAT && t <= CUDNN_DATA_COMPLEX_FP64; }

bool float_dtype(cudnnDataType_t t) {
  return t == CUDNN_DATA_FLOAT || t == CUDNN_DATA_DOUBLE || t == CUDNN_DATA_HALF ||
         t == CUDNN_DATA_BFLOAT16;
}

size_t dtype_size(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return 2;
    default: return 4;
  }
}

const char *dtype_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT: return "FLOAT";
    case CUDNN_DATA_DOUBLE: return "DOUBLE";
    case CUDNN_DATA_HALF: return "HALF";
    case CUDNN_DATA_BFLOAT16: return "BFLOAT16";
    default: return "(not a floating-point type)";
  }
}

// Element i (in elements) of base, widened to double. Only for float_dtype.
double load(const void *base, int64_t i, cudnnDataType_t t) {
  const char *p = (const char *)base + i * (int64_t)dtype_size(t);
  switch (t) {
    case CUDNN_DATA_DOUBLE: {
      double v;
      memcpy(&v, p, sizeof v);
      return v;
    }
    case CUDNN_DATA_HALF: {
      unsigned short b;
      memcpy(&b, p, sizeof b);
      return (double)__half2float(__ushort_as_half(b));
    }
    case CUDNN_DATA_BFLOAT16: {
      unsigned short b;
      memcpy(&b, p, sizeof b);
      return (double)__bfloat162float(__ushort_as_bfloat16(b));
    }
    default: {
      float v;
      memcpy(&v, p, sizeof v);
      return (double)v;
    }
  }
}

// Stores v as element i of base, rounded to t (16-bit types through float:
// the toolkit's host conversions start from float).
void store(void *base, int64_t i, cudnnDataType_t t, double v) {
  char *p = (char *)base + i * (int64_t)dtype_size(t);
  switch (t) {
    case CUDNN_DATA_DOUBLE: memcpy(p, &v, sizeof v); return;
    case CUDNN_DATA_HALF: {
      const unsigned short b = __half_as_ushort(__float2half_rn((float)v));
      memcpy(p, &b, sizeof b);
      return;
    }
    case CUDNN_DATA_BFLOAT16: {
      const unsigned short b = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
      memcpy(p, &b, sizeof b);
      return;
    }
    default: {
      const float f = (float)v;
      memcpy(p, &f, sizeof f);
      return;
    }
  }
}

// A scaling factor (alpha, beta): host memory, double for double data and
// float for every other data type (cuDNN's rule, 16-bit data included).
double scalar(const void *p, cudnnDataType_t data) {
  if (data == CUDNN_DATA_DOUBLE) {
    double v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  float v;
  memcpy(&v, p, sizeof v);
  return (double)v;
}

// dst = alpha * result + beta * dst; with beta == 0 dst is not read, so it
// may hold anything, NaN included (cuDNN's documented blending).
void blend(void *base, int64_t i, cudnnDataType_t t, double alpha, double beta, double result) {
  double v = alpha * result;
  if (beta != 0.0) v += beta * load(base, i, t);
  store(base, i, t, v);
}

// The elements of a view as a packed NCHW vector of doubles.
std::vector<double> gather(const layout &l, const void *base) {
  std::vector<double> v((size_t)l.count());
  size_t i = 0;
  for (int a = 0; a < l.d[0]; a++)
    for (int b = 0; b < l.d[1]; b++)
      for (int c = 0; c < l.d[2]; c++)
        for (int e = 0; e < l.d[3]; e++) v[i++] = load(base, l.off(a, b, c, e), l.dt);
  return v;
}

// Blends a packed NCHW result into a view.
void scatter(const layout &l, void *base, const std::vector<double> &r, double alpha, double beta) {
  size_t i = 0;
  for (int a = 0; a < l.d[0]; a++)
    for (int b = 0; b < l.d[1]; b++)
      for (int c = 0; c < l.d[2]; c++)
        for (int e = 0; e < l.d[3]; e++) blend(base, l.off(a, b, c, e), l.dt, alpha, beta, r[i++]);
}

// ---- descriptor contents ----

// A format's strides for dims [a, b, c, e] (N C H W, or K C R S); format is
// NCHW or NHWC (check_4d).
void set_layout(layout *l, cudnnTensorFormat_t format, cudnnDataType_t dt, int a, int b, int c,
                int e) {
  l->dt = dt;
  l->d[0] = a, l->d[1] = b, l->d[2] = c, l->d[3] = e;
  if (format == CUDNN_TENSOR_NCHW) {
    l->st[3] = 1;
    l->st[2] = e;
    l->st[1] = (int64_t)c * e;
    l->st[0] = (int64_t)b * c * e;
  } else { // NHWC: the channels innermost
    l->st[1] = 1;
    l->st[3] = b;
    l->st[2] = (int64_t)e * b;
    l->st[0] = (int64_t)c * e * b;
  }
}

// The checks shared by cudnnSetTensor4dDescriptor and cudnnSetFilter4dDescriptor.
cudnnStatus_t check_4d(const char *fn, cudnnTensorFormat_t format, cudnnDataType_t dt, int a, int b,
                       int c, int e) {
  if (!valid_dtype(dt)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid data type %d", (int)dt);
  if (format == CUDNN_TENSOR_NCHW_VECT_C)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "NCHW_VECT_C is not emulated");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid format %d", (int)format);
  // The 4-d reference text names negative dims; zero is refused too, the
  // rule cuDNN's Nd setters document ("negative or zero"): the legacy
  // descriptors do not describe empty tensors, so callers must skip empty
  // operands themselves (stricter than the 4-d text, on purpose).
  if (a <= 0 || b <= 0 || c <= 0 || e <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "dims %d x %d x %d x %d: each must be positive", a, b,
                c, e);
  const int64_t n = (int64_t)a * b * c * e;
  if (n > INT_MAX)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "%lld elements exceed the 2^31 - 1 limit",
                (long long)n);
  return CUDNN_STATUS_SUCCESS;
}

// A descriptor argument that must be live and set.
cudnnStatus_t tensor_arg(const char *fn, const char *name, const cudnnTensorStruct *t) {
  if (!alive(t)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is not a live descriptor", name);
  if (!t->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s was never set", name);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t filter_arg(const char *fn, const char *name, const cudnnFilterStruct *f) {
  if (!alive(f)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is not a live descriptor", name);
  if (!f->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s was never set", name);
  return CUDNN_STATUS_SUCCESS;
}

// The handle of a call: live, and (emulator:) used with the device it was
// made on current. cuDNN ties a handle to the device current at cudnnCreate;
// calling it under another device launches on the wrong context, which the
// reference leaves undefined; here it fails.
cudnnStatus_t handle_arg(const char *fn, const cudnnContext *h) {
  if (!alive(h)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "the handle is not a live handle");
  int dev = -1;
  if (h->device >= 0 && cudaGetDevice && cudaGetDevice(&dev) == cudaSuccess && dev != h->device)
    return fail(CUDNN_STATUS_EXECUTION_FAILED, fn,
                "emulator: the handle belongs to device %d but device %d is current", h->device,
                dev);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t nonnull(const char *fn,
                      std::initializer_list<std::pair<const char *, const void *>> ps) {
  for (const auto &p : ps)
    if (!p.second) return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s is NULL", p.first);
  return CUDNN_STATUS_SUCCESS;
}

// Garbage over the first bytes of a workspace, as the kernels' scratch would
// leave there.
void scribble(void *ws, size_t bytes) {
  if (ws && bytes) memset(ws, 0xA5, bytes);
}

// ---- convolution geometry ----

// One convolution's shapes, checked: x is the input (or dx), w the filter
// (or dw), y the output (or dy).
struct conv_geom {
  layout x, w, y;
  cudnnDataType_t dt;
  int n, c, h, wd; // input
  int k, cg, r, s; // filter: out channels, in channels per group, kernel
  int ho, wo;      // output
  int groups;
  int pad[2], stride[2], dil[2];
  bool flip; // CUDNN_CONVOLUTION: the filter applies mirrored
  cudnnMathType_t math;
  cudnnDataType_t compute;
};

// The documented checks of a convolution call. size_mismatch: the status
// for an output whose spatial size is not the one the descriptor gives
// (cudnnConvolutionForward documents NOT_SUPPORTED, the rest BAD_PARAM).
cudnnStatus_t conv_check(const char *fn, const cudnnContext *h, const cudnnTensorStruct *xd,
                         const cudnnFilterStruct *wd, const cudnnConvolutionStruct *cd,
                         const cudnnTensorStruct *yd, cudnnStatus_t size_mismatch, conv_geom *g) {
  TRY(handle_arg(fn, h));
  TRY(tensor_arg(fn, "the input (x) descriptor", xd));
  TRY(filter_arg(fn, "the filter descriptor", wd));
  TRY(tensor_arg(fn, "the output (y) descriptor", yd));
  if (!alive(cd)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "the convolution descriptor is not live");
  if (!cd->set) return fail(CUDNN_STATUS_BAD_PARAM, fn, "the convolution descriptor was never set");
  g->x = xd->l, g->w = wd->l, g->y = yd->l;
  g->dt = xd->l.dt;
  if (wd->l.dt != g->dt || yd->l.dt != g->dt)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "data types differ: x %d, w %d, y %d", (int)g->dt,
                (int)wd->l.dt, (int)yd->l.dt);
  g->n = xd->l.d[0], g->c = xd->l.d[1], g->h = xd->l.d[2], g->wd = xd->l.d[3];
  g->k = wd->l.d[0], g->cg = wd->l.d[1], g->r = wd->l.d[2], g->s = wd->l.d[3];
  g->groups = cd->groups;
  for (int i = 0; i < 2; i++) {
    g->pad[i] = cd->pad[i];
    g->stride[i] = cd->stride[i];
    g->dil[i] = cd->dilation[i];
  }
  g->flip = cd->mode == CUDNN_CONVOLUTION;
  g->math = cd->math;
  g->compute = cd->compute;
  if ((int64_t)g->cg * g->groups != g->c)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "x has %d channels but the filter takes %d per group over %d groups", g->c, g->cg,
                g->groups);
  if (g->k % g->groups != 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "%d output channels are not a multiple of %d groups",
                g->k, g->groups);
  if (yd->l.d[0] != g->n || yd->l.d[1] != g->k)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "y is %d x %d x . x . but x has %d images and the filter %d output channels",
                yd->l.d[0], yd->l.d[1], g->n, g->k);
  const int in[2] = {g->h, g->wd}, ker[2] = {g->r, g->s};
  int out[2];
  for (int i = 0; i < 2; i++) {
    const int64_t padded = (int64_t)in[i] + 2 * (int64_t)g->pad[i];
    const int64_t span = (int64_t)g->dil[i] * (ker[i] - 1) + 1;
    if (span > padded)
      return fail(CUDNN_STATUS_BAD_PARAM, fn,
                  "the dilated filter (%lld) is larger than the padded input (%lld)",
                  (long long)span, (long long)padded);
    out[i] = (int)((padded - span) / g->stride[i] + 1);
  }
  g->ho = yd->l.d[2], g->wo = yd->l.d[3];
  if (g->ho != out[0] || g->wo != out[1])
    return fail(size_mismatch, fn, "y is %d x %d spatially but the convolution gives %d x %d",
                g->ho, g->wo, out[0], out[1]);
  // The documented data type configurations of the 2-d convolutions
  // (FLOAT, DOUBLE, TRUE_HALF, PSEUDO_HALF, PSEUDO_BFLOAT16); the integer
  // ones are not emulated.
  const cudnnDataType_t ct = g->compute;
  const bool ok = (g->dt == CUDNN_DATA_FLOAT && ct == CUDNN_DATA_FLOAT) ||
                  (g->dt == CUDNN_DATA_DOUBLE && ct == CUDNN_DATA_DOUBLE) ||
                  (g->dt == CUDNN_DATA_HALF && (ct == CUDNN_DATA_HALF || ct == CUDNN_DATA_FLOAT)) ||
                  (g->dt == CUDNN_DATA_BFLOAT16 && ct == CUDNN_DATA_FLOAT);
  if (!ok)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn,
                "data type %s with compute type %d is not a supported configuration",
                dtype_name(g->dt), (int)ct);
  return CUDNN_STATUS_SUCCESS;
}

// Calls f(xi, wi, yi) for every product of the convolution: indices into
// packed NCHW x, KCRS w and NKHW y. Taps that fall into the padding are
// skipped (they multiply zeros). Forward, backward data and backward filter
// are the same sum read three ways.
template <class F> void for_each_tap(const conv_geom &g, F f) {
  const int kg = g.k / g.groups; // output channels per group
  for (int n = 0; n < g.n; n++)
    for (int k = 0; k < g.k; k++) {
      const int grp = k / kg;
      for (int oh = 0; oh < g.ho; oh++)
        for (int ow = 0; ow < g.wo; ow++) {
          const int64_t yi = (((int64_t)n * g.k + k) * g.ho + oh) * g.wo + ow;
          for (int c = 0; c < g.cg; c++)
            for (int r = 0; r < g.r; r++) {
              const int64_t ih = (int64_t)oh * g.stride[0] - g.pad[0] + (int64_t)r * g.dil[0];
              if (ih < 0 || ih >= g.h) continue;
              for (int s = 0; s < g.s; s++) {
                const int64_t iw = (int64_t)ow * g.stride[1] - g.pad[1] + (int64_t)s * g.dil[1];
                if (iw < 0 || iw >= g.wd) continue;
                const int rr = g.flip ? g.r - 1 - r : r, ss = g.flip ? g.s - 1 - s : s;
                const int64_t xi =
                    (((int64_t)n * g.c + (int64_t)grp * g.cg + c) * g.h + ih) * g.wd + iw;
                const int64_t wi = (((int64_t)k * g.cg + c) * g.r + rr) * g.s + ss;
                f(xi, wi, yi);
              }
            }
        }
    }
}

// ---- algorithms ----
// Which algorithms "exist" for which convolutions, and the workspace each
// needs. The numbers are made up but deterministic, depend on the shapes and
// on the math type (tensor-core kernels stage their operands), and are
// nonzero for some algorithms and zero for others, so that every path of a
// caller's workspace handling runs.

enum conv_dir { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER };

const char *const dir_fn[3] = {"cudnnGetConvolutionForwardWorkspaceSize",
                               "cudnnGetConvolutionBackwardDataWorkspaceSize",
                               "cudnnGetConvolutionBackwardFilterWorkspaceSize"};

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

bool tensor_op_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Extra bytes a tensor-core kernel wants for its staged operands (none for
// double, which has no such kernels here).
size_t staging(const conv_geom &g, cudnnMathType_t math) {
  return tensor_op_math(math) && g.dt != CUDNN_DATA_DOUBLE ? 4096 : 0;
}

// The FFT algorithms take unit strides and dilations, and not double or
// bfloat16 data.
bool fft_ok(const conv_geom &g) {
  return g.stride[0] == 1 && g.stride[1] == 1 && g.dil[0] == 1 && g.dil[1] == 1 &&
         g.dt != CUDNN_DATA_DOUBLE && g.dt != CUDNN_DATA_BFLOAT16;
}

size_t fft_bytes(const conv_geom &g) {
  const size_t plane = (size_t)(g.h + 2 * g.pad[0]) * (size_t)(g.wd + 2 * g.pad[1]);
  return round_up(16384 + 8 * plane * (size_t)(g.cg + g.k / g.groups), 1024);
}

// The workspace algo needs in direction dir with math type math, or why it
// cannot run: algo values outside the enum are BAD_PARAM; the algorithms the
// heuristics never offer, and FFT where it does not apply, NOT_SUPPORTED.
// Says nothing itself: an unsupported entry is an answer to the heuristics,
// a failure only to the callers that log it.
cudnnStatus_t algo_need(conv_dir dir, int algo, const conv_geom &g, cudnnMathType_t math,
                        size_t *bytes) {
  *bytes = 0;
  const size_t taps = (size_t)g.cg * g.r * g.s;
  const size_t es = dtype_size(g.dt);
  const int count = dir == DIR_FWD        ? (int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT
                    : dir == DIR_BWD_DATA ? (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                          : (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  if (algo < 0 || algo >= count) return CUDNN_STATUS_BAD_PARAM;
  switch (dir) {
    case DIR_FWD:
      switch (algo) {
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: // an index table
          *bytes = round_up(4096 + 4 * taps, 256) + staging(g, math);
          return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: // one image's im2col matrix
          *bytes = round_up(es * taps * (size_t)g.ho * g.wo, 256);
          return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
          if (!fft_ok(g)) break;
          *bytes = fft_bytes(g) + staging(g, math);
          return CUDNN_STATUS_SUCCESS;
        default: break;
      }
      break;
    case DIR_BWD_DATA:
      switch (algo) {
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
          *bytes = round_up(8192 + 4 * taps, 256) + staging(g, math);
          return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
          if (!fft_ok(g)) break;
          *bytes = fft_bytes(g);
          return CUDNN_STATUS_SUCCESS;
        default: break;
      }
      break;
    case DIR_BWD_FILTER:
      switch (algo) {
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
          *bytes = round_up(2048 + es * taps * (size_t)g.ho * g.wo, 256) + staging(g, math);
          return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
          if (!fft_ok(g)) break;
          *bytes = fft_bytes(g);
          return CUDNN_STATUS_SUCCESS;
        case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: // partial sums per filter element
          *bytes = round_up(4 * (size_t)g.k * taps, 256);
          return CUDNN_STATUS_SUCCESS;
        default: break;
      }
      break;
  }
  return CUDNN_STATUS_NOT_SUPPORTED;
}

// algo_need for a call that fails when the algorithm cannot run.
cudnnStatus_t algo_workspace(const char *fn, conv_dir dir, int algo, const conv_geom &g,
                             cudnnMathType_t math, size_t *bytes) {
  const cudnnStatus_t s = algo_need(dir, algo, g, math, bytes);
  if (s != CUDNN_STATUS_SUCCESS)
    fail(s, fn, "algorithm %d %s", algo,
         s == CUDNN_STATUS_BAD_PARAM ? "is not an enumerant" : "does not support this convolution");
  return s;
}

// The heuristics' ranking, best first; some entries are unsupported for some
// or all shapes and come back with that status, as cuDNN's lists do.
const int fwd_rank[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                        CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                        CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
const int bwd_data_rank[] = {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
const int bwd_filter_rank[] = {
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0};

bool nondeterministic(conv_dir dir, int algo) {
  if (dir == DIR_BWD_DATA) return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  if (dir == DIR_BWD_FILTER)
    return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
           algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  return false;
}

// The math type a result reports: the plain GEMM-like kernels run on CUDA
// cores, so under a tensor-op math type they report DEFAULT; the rest run
// with the descriptor's. A result never reports a math type the descriptor
// does not permit.
cudnnMathType_t reported_math(conv_dir dir, int algo, cudnnMathType_t desc) {
  const bool plain = (dir == DIR_FWD && (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                                         algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM)) ||
                     (dir != DIR_FWD && algo == 0);
  return plain && tensor_op_math(desc) ? CUDNN_DEFAULT_MATH : desc;
}

// Fills up to requested perf results for dir (the three perf structs share
// one shape).
template <class Perf, class Algo>
cudnnStatus_t heuristics(const char *fn, conv_dir dir, const conv_geom &g, const int *rank,
                         int ranked, int requested, int *returned, Perf *perf) {
  if (requested <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "requestedAlgoCount %d is not positive", requested);
  const int n = requested < ranked ? requested : ranked;
  for (int i = 0; i < n; i++) {
    Perf p;
    memset(&p, 0, sizeof p);
    p.algo = (Algo)rank[i];
    p.mathType = reported_math(dir, rank[i], g.math);
    size_t bytes = 0;
    p.status = algo_need(dir, rank[i], g, p.mathType, &bytes);
    p.memory = p.status == CUDNN_STATUS_SUCCESS ? bytes : 0;
    p.time = p.status == CUDNN_STATUS_SUCCESS ? 0.125f * (float)(i + 1) : -1.0f;
    p.determinism = nondeterministic(dir, rank[i]) ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
    perf[i] = p;
  }
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}

// The common part of the three convolution calls: the algorithm can run with
// the descriptor's math type, the workspace is large enough, the scaling
// factors and data are there.
cudnnStatus_t conv_prepare(const char *fn, conv_dir dir, int algo, const conv_geom &g, void *ws,
                           size_t ws_bytes, const void *alpha, const void *beta) {
  size_t need = 0;
  TRY(algo_workspace(fn, dir, algo, g, g.math, &need));
  if (need > 0 && !ws)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "algorithm %d needs %zu bytes of workspace, got NULL",
                algo, need);
  if (ws_bytes < need)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "algorithm %d needs %zu bytes of workspace with math type %d, got %zu", algo, need,
                (int)g.math, ws_bytes);
  TRY(nonnull(fn, {{"alpha", alpha}, {"beta", beta}}));
  scribble(ws, need);
  return CUDNN_STATUS_SUCCESS;
}

// ---- batch normalization ----

struct bn_geom {
  layout x;      // x, and the same dims for y / dy / dx
  layout p;      // scale, bias, mean, variance: 1 x C x 1 x 1 or 1 x C x H x W
  bool spatial;  // SPATIAL / SPATIAL_PERSISTENT: normalised over N, H, W
  int64_t count; // elements per normalised group
};

bool valid_bn_mode(int m) {
  return m == CUDNN_BATCHNORM_PER_ACTIVATION || m == CUDNN_BATCHNORM_SPATIAL ||
         m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
}

// The per-channel descriptor's data type for data of type t: double for
// double, float for the rest (16-bit included), the derived-descriptor rule.
cudnnDataType_t bn_param_dtype(cudnnDataType_t t) {
  return t == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// The checks every batch-norm call shares: x's descriptor against the
// others of the same shape (ys) and the per-channel one.
cudnnStatus_t bn_check(const char *fn, const cudnnContext *h, int mode, const cudnnTensorStruct *xd,
                       std::initializer_list<std::pair<const char *, const cudnnTensorStruct *>> ys,
                       const cudnnTensorStruct *pd, double epsilon, bn_geom *g) {
  TRY(handle_arg(fn, h));
  if (!valid_bn_mode(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid mode %d", mode);
  TRY(tensor_arg(fn, "xDesc", xd));
  for (const auto &y : ys) {
    TRY(tensor_arg(fn, y.first, y.second));
    if (!y.second->l.same_dims(xd->l) || y.second->l.dt != xd->l.dt)
      return fail(CUDNN_STATUS_BAD_PARAM, fn, "%s differs from xDesc in dims or data type",
                  y.first);
  }
  TRY(tensor_arg(fn, "the scale/bias/mean/var descriptor", pd));
  if (!float_dtype(xd->l.dt))
    return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "data type %d", (int)xd->l.dt);
  g->x = xd->l;
  g->p = pd->l;
  g->spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  const layout &x = xd->l, &p = pd->l;
  const bool dims_ok =
      p.d[0] == 1 && p.d[1] == x.d[1] &&
      (g->spatial ? p.d[2] == 1 && p.d[3] == 1 : p.d[2] == x.d[2] && p.d[3] == x.d[3]);
  if (!dims_ok)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the per-channel descriptor is %d x %d x %d x %d, expected 1 x %d x %s", p.d[0],
                p.d[1], p.d[2], p.d[3], x.d[1], g->spatial ? "1 x 1" : "H x W of x");
  if (p.dt != bn_param_dtype(x.dt))
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "the per-channel descriptor is %s for %s data; it must be %s", dtype_name(p.dt),
                dtype_name(x.dt), dtype_name(bn_param_dtype(x.dt)));
  if (!(epsilon >= CUDNN_BN_MIN_EPSILON)) // NaN too
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "epsilon %g is below CUDNN_BN_MIN_EPSILON (%g)",
                epsilon, (double)CUDNN_BN_MIN_EPSILON);
  g->count = g->spatial ? (int64_t)x.d[0] * x.d[2] * x.d[3] : (int64_t)x.d[0];
  return CUDNN_STATUS_SUCCESS;
}

// Calls f(c, ph, pw) for each per-channel element (ph = pw = 0 in the
// spatial modes), then the members: m(n, c, h, w) for every x element it
// normalises.
template <class F> void bn_for_params(const bn_geom &g, F f) {
  for (int c = 0; c < g.p.d[1]; c++)
    for (int ph = 0; ph < g.p.d[2]; ph++)
      for (int pw = 0; pw < g.p.d[3]; pw++) f(c, ph, pw);
}

template <class M> void bn_for_members(const bn_geom &g, int c, int ph, int pw, M m) {
  const int h0 = g.spatial ? 0 : ph, h1 = g.spatial ? g.x.d[2] : ph + 1;
  const int w0 = g.spatial ? 0 : pw, w1 = g.spatial ? g.x.d[3] : pw + 1;
  for (int n = 0; n < g.x.d[0]; n++)
    for (int h = h0; h < h1; h++)
      for (int w = w0; w < w1; w++) m(n, c, h, w);
}

// The batch mean and biased variance of one group (two passes, as a
// reference should).
void bn_stats(const bn_geom &g, const void *x, int c, int ph, int pw, double *mean, double *var) {
  double sum = 0.0;
  bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
    sum += load(x, g.x.off(n, cc, h, w), g.x.dt);
  });
  const double m = sum / (double)g.count;
  double sq = 0.0;
  bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
    const double d = load(x, g.x.off(n, cc, h, w), g.x.dt) - m;
    sq += d * d;
  });
  *mean = m;
  *var = sq / (double)g.count;
}

const char *status_name(cudnnStatus_t s) {
  switch ((int)s) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
      return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH:
      return "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH";
    case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
    case CUDNN_STATUS_LICENSE_ERROR: return "CUDNN_STATUS_LICENSE_ERROR";
    case CUDNN_STATUS_RUNTIME_IN_PROGRESS: return "CUDNN_STATUS_RUNTIME_IN_PROGRESS";
    case CUDNN_STATUS_RUNTIME_FP_OVERFLOW: return "CUDNN_STATUS_RUNTIME_FP_OVERFLOW";
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case 2001: return "CUDNN_STATUS_INVALID_VALUE";
    case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
      return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT:
      return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES:
      return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH:
      return "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH";
    case CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN:
      return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
      return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART";
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
      return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
      return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    case CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT:
      return "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT";
    case CUDNN_STATUS_NOT_SUPPORTED_PADDING: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    case CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API:
      return "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API";
    case CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE:
      return "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE:
      return "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE";
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM:
      return "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM";
    case CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED:
      return "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
      return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    case CUDNN_STATUS_EXECUTION_FAILED_CUBLAS: return "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS";
    case CUDNN_STATUS_EXECUTION_FAILED_CUDART: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    case CUDNN_STATUS_EXECUTION_FAILED_CURAND: return "CUDNN_STATUS_EXECUTION_FAILED_CURAND";
    default: return "CUDNN_UNKNOWN_STATUS_FOUND";
  }
}

} // namespace

// ---- the cuDNN entry points ----

extern "C" {

size_t emu_cudnn_live_objects(void) {
  std::lock_guard<std::mutex> g(registry_lock);
  return registry().size();
}

const char *cudnnGetErrorString(cudnnStatus_t status) { return status_name(status); }

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  TRY(make("cudnnCreate", handle));
  int dev = -1;
  if (cudaGetDevice && cudaGetDevice(&dev) != cudaSuccess) dev = -1;
  (*handle)->device = dev;
  (*handle)->stream = 0; // the legacy default stream until cudnnSetStream
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  if (!handle) return fail(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy", "NULL handle");
  return unmake("cudnnDestroy", handle);
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  const char *fn = "cudnnSetStream";
  if (!alive(handle)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "the handle is not a live handle");
  // A stream of another device than the handle's is refused (the
  // reference's stream/handle-context mismatch), where the runtime can say
  // which device a stream belongs to.
  int dev = -1;
  if (streamId && handle->device >= 0 && cudaStreamGetDevice &&
      cudaStreamGetDevice(streamId, &dev) == cudaSuccess && dev != handle->device)
    return fail(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH, fn,
                "the stream belongs to device %d, the handle to device %d", dev, handle->device);
  handle->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

// ---- tensor descriptors ----

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
  return make("cudnnCreateTensorDescriptor", tensorDesc);
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  return unmake("cudnnDestroyTensorDescriptor", tensorDesc);
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnTensorFormat_t format, cudnnDataType_t dataType,
                                         int n, int c, int h, int w) {
  const char *fn = "cudnnSetTensor4dDescriptor";
  if (!alive(tensorDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live descriptor");
  TRY(check_4d(fn, format, dataType, n, c, h, w));
  set_layout(&tensorDesc->l, format, dataType, n, c, h, w);
  tensorDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

// ---- filter descriptors ----

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
  return make("cudnnCreateFilterDescriptor", filterDesc);
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  return unmake("cudnnDestroyFilterDescriptor", filterDesc);
}

// format orders the filter in memory: NCHW is K, C, R, S; NHWC is K, R, S, C.
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w) {
  const char *fn = "cudnnSetFilter4dDescriptor";
  if (!alive(filterDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live descriptor");
  TRY(check_4d(fn, format, dataType, k, c, h, w));
  set_layout(&filterDesc->l, format, dataType, k, c, h, w);
  filterDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

// ---- convolution descriptors ----

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
  TRY(make("cudnnCreateConvolutionDescriptor", convDesc));
  (*convDesc)->groups = 1;
  (*convDesc)->math = CUDNN_DEFAULT_MATH;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  return unmake("cudnnDestroyConvolutionDescriptor", convDesc);
}

// Sets padding, strides, dilations, mode and compute type; the group count
// and math type keep their values (they have setters of their own).
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType) {
  const char *fn = "cudnnSetConvolution2dDescriptor";
  if (!alive(convDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live descriptor");
  if (pad_h < 0 || pad_w < 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "negative padding %d x %d", pad_h, pad_w);
  if (u <= 0 || v <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "stride %d x %d is not positive", u, v);
  if (dilation_h <= 0 || dilation_w <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "dilation %d x %d is not positive", dilation_h,
                dilation_w);
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid mode %d", (int)mode);
  if (!valid_dtype(computeType))
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid compute type %d", (int)computeType);
  convDesc->pad[0] = pad_h, convDesc->pad[1] = pad_w;
  convDesc->stride[0] = u, convDesc->stride[1] = v;
  convDesc->dilation[0] = dilation_h, convDesc->dilation[1] = dilation_w;
  convDesc->mode = mode;
  convDesc->compute = computeType;
  convDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  const char *fn = "cudnnSetConvolutionGroupCount";
  if (!alive(convDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live descriptor");
  if (groupCount < 1)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "group count %d is not positive", groupCount);
  convDesc->groups = groupCount;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType) {
  const char *fn = "cudnnSetConvolutionMathType";
  if (!alive(convDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "not a live descriptor");
  if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
      mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid math type %d", (int)mathType);
  convDesc->math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

// ---- algorithm heuristics and workspace sizes ----

// The most results the _v7 calls may return: every algorithm, and each again
// with tensor-core math, as the reference counts them.
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  const char *fn = "cudnnGetConvolutionForwardAlgorithmMaxCount";
  TRY(handle_arg(fn, handle));
  TRY(nonnull(fn, {{"count", count}}));
  *count = 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  const char *fn = "cudnnGetConvolutionBackwardDataAlgorithmMaxCount";
  TRY(handle_arg(fn, handle));
  TRY(nonnull(fn, {{"count", count}}));
  *count = 2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  const char *fn = "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount";
  TRY(handle_arg(fn, handle));
  TRY(nonnull(fn, {{"count", count}}));
  *count = 2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults) {
  const char *fn = "cudnnGetConvolutionForwardAlgorithm_v7";
  TRY(nonnull(fn, {{"returnedAlgoCount", returnedAlgoCount}, {"perfResults", perfResults}}));
  conv_geom g;
  TRY(conv_check(fn, handle, srcDesc, filterDesc, convDesc, destDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return heuristics<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      fn, DIR_FWD, g, fwd_rank, (int)(sizeof fwd_rank / sizeof *fwd_rank), requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults) {
  const char *fn = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  TRY(nonnull(fn, {{"returnedAlgoCount", returnedAlgoCount}, {"perfResults", perfResults}}));
  conv_geom g;
  TRY(conv_check(fn, handle, gradDesc, filterDesc, convDesc, diffDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return heuristics<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      fn, DIR_BWD_DATA, g, bwd_data_rank, (int)(sizeof bwd_data_rank / sizeof *bwd_data_rank),
      requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults) {
  const char *fn = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  TRY(nonnull(fn, {{"returnedAlgoCount", returnedAlgoCount}, {"perfResults", perfResults}}));
  conv_geom g;
  TRY(conv_check(fn, handle, srcDesc, gradDesc, convDesc, diffDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return heuristics<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      fn, DIR_BWD_FILTER, g, bwd_filter_rank,
      (int)(sizeof bwd_filter_rank / sizeof *bwd_filter_rank), requestedAlgoCount,
      returnedAlgoCount, perfResults);
}

// The workspace the algorithm needs with the math type now on convDesc.
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
  const char *fn = dir_fn[DIR_FWD];
  TRY(nonnull(fn, {{"sizeInBytes", sizeInBytes}}));
  conv_geom g;
  TRY(conv_check(fn, handle, xDesc, wDesc, convDesc, yDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return algo_workspace(fn, DIR_FWD, (int)algo, g, g.math, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes) {
  const char *fn = dir_fn[DIR_BWD_DATA];
  TRY(nonnull(fn, {{"sizeInBytes", sizeInBytes}}));
  conv_geom g;
  TRY(conv_check(fn, handle, dxDesc, wDesc, convDesc, dyDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return algo_workspace(fn, DIR_BWD_DATA, (int)algo, g, g.math, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *sizeInBytes) {
  const char *fn = dir_fn[DIR_BWD_FILTER];
  TRY(nonnull(fn, {{"sizeInBytes", sizeInBytes}}));
  conv_geom g;
  TRY(conv_check(fn, handle, xDesc, gradDesc, convDesc, dyDesc, CUDNN_STATUS_BAD_PARAM, &g));
  return algo_workspace(fn, DIR_BWD_FILTER, (int)algo, g, g.math, sizeInBytes);
}

// ---- convolutions: output = alpha * op(inputs) + beta * output ----

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y) {
  const char *fn = "cudnnConvolutionForward";
  conv_geom g;
  TRY(conv_check(fn, handle, xDesc, wDesc, convDesc, yDesc, CUDNN_STATUS_NOT_SUPPORTED, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"x", x}, {"w", w}, {"y", y}}));
  TRY(conv_prepare(fn, DIR_FWD, (int)algo, g, workSpace, workSpaceSizeInBytes, alpha, beta));
  const std::vector<double> X = gather(g.x, x), W = gather(g.w, w);
  std::vector<double> Y((size_t)g.y.count(), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) { Y[yi] += X[xi] * W[wi]; });
  scatter(g.y, y, Y, scalar(alpha, g.dt), scalar(beta, g.dt));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx) {
  const char *fn = "cudnnConvolutionBackwardData";
  conv_geom g;
  TRY(conv_check(fn, handle, dxDesc, wDesc, convDesc, dyDesc, CUDNN_STATUS_BAD_PARAM, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"w", w}, {"dy", dy}, {"dx", dx}}));
  TRY(conv_prepare(fn, DIR_BWD_DATA, (int)algo, g, workSpace, workSpaceSizeInBytes, alpha, beta));
  const std::vector<double> W = gather(g.w, w), DY = gather(g.y, dy);
  std::vector<double> DX((size_t)g.x.count(), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) { DX[xi] += DY[yi] * W[wi]; });
  scatter(g.x, dx, DX, scalar(alpha, g.dt), scalar(beta, g.dt));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw) {
  const char *fn = "cudnnConvolutionBackwardFilter";
  conv_geom g;
  TRY(conv_check(fn, handle, xDesc, dwDesc, convDesc, dyDesc, CUDNN_STATUS_BAD_PARAM, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"x", x}, {"dy", dy}, {"dw", dw}}));
  TRY(conv_prepare(fn, DIR_BWD_FILTER, (int)algo, g, workSpace, workSpaceSizeInBytes, alpha, beta));
  const std::vector<double> X = gather(g.x, x), DY = gather(g.y, dy);
  std::vector<double> DW((size_t)g.w.count(), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) { DW[wi] += X[xi] * DY[yi]; });
  scatter(g.w, dw, DW, scalar(alpha, g.dt), scalar(beta, g.dt));
  return CUDNN_STATUS_SUCCESS;
}

// db[c] = alpha * (sum of dy over images and positions of channel c) + beta * db[c];
// db is 1 x C x 1 x 1.
cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const void *beta, const cudnnTensorDescriptor_t dbDesc,
                                           void *db) {
  const char *fn = "cudnnConvolutionBackwardBias";
  TRY(handle_arg(fn, handle));
  device_work work(handle->stream);
  TRY(tensor_arg(fn, "dyDesc", dyDesc));
  TRY(tensor_arg(fn, "dbDesc", dbDesc));
  TRY(nonnull(fn, {{"alpha", alpha}, {"beta", beta}, {"dy", dy}, {"db", db}}));
  const layout &a = dyDesc->l, &b = dbDesc->l;
  if (b.d[0] != 1 || b.d[2] != 1 || b.d[3] != 1)
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "db is %d x %d x %d x %d, not 1 x C x 1 x 1", b.d[0],
                b.d[1], b.d[2], b.d[3]);
  if (b.d[1] != a.d[1])
    return fail(CUDNN_STATUS_BAD_PARAM, fn, "db has %d channels, dy %d", b.d[1], a.d[1]);
  if (a.dt != b.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "dy and db differ in data type");
  if (!float_dtype(a.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "data type %d", (int)a.dt);
  const double al = scalar(alpha, a.dt), be = scalar(beta, a.dt);
  for (int c = 0; c < a.d[1]; c++) {
    double sum = 0.0;
    for (int n = 0; n < a.d[0]; n++)
      for (int h = 0; h < a.d[2]; h++)
        for (int w = 0; w < a.d[3]; w++) sum += load(dy, a.off(n, c, h, w), a.dt);
    blend(db, b.off(0, c, 0, 0), b.dt, al, be, sum);
  }
  return CUDNN_STATUS_SUCCESS;
}

// C = alpha * A + beta * C, each dim of A either C's or 1 (then broadcast).
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
                             const cudnnTensorDescriptor_t aDesc, const void *A, const void *beta,
                             const cudnnTensorDescriptor_t cDesc, void *C) {
  const char *fn = "cudnnAddTensor";
  TRY(handle_arg(fn, handle));
  device_work work(handle->stream);
  TRY(tensor_arg(fn, "aDesc", aDesc));
  TRY(tensor_arg(fn, "cDesc", cDesc));
  TRY(nonnull(fn, {{"alpha", alpha}, {"beta", beta}, {"A", A}, {"C", C}}));
  const layout &a = aDesc->l, &c = cDesc->l;
  for (int i = 0; i < 4; i++)
    if (a.d[i] != c.d[i] && a.d[i] != 1)
      return fail(CUDNN_STATUS_BAD_PARAM, fn, "dim %d of A is %d, neither 1 nor C's %d", i, a.d[i],
                  c.d[i]);
  if (a.dt != c.dt) return fail(CUDNN_STATUS_BAD_PARAM, fn, "A and C differ in data type");
  if (!float_dtype(a.dt)) return fail(CUDNN_STATUS_NOT_SUPPORTED, fn, "data type %d", (int)a.dt);
  const std::vector<double> av = gather(a, A); // A may overlap C
  const double al = scalar(alpha, c.dt), be = scalar(beta, c.dt);
  for (int n = 0; n < c.d[0]; n++)
    for (int ch = 0; ch < c.d[1]; ch++)
      for (int h = 0; h < c.d[2]; h++)
        for (int w = 0; w < c.d[3]; w++) {
          const int64_t ai =
              (((int64_t)(a.d[0] == 1 ? 0 : n) * a.d[1] + (a.d[1] == 1 ? 0 : ch)) * a.d[2] +
               (a.d[2] == 1 ? 0 : h)) *
                  a.d[3] +
              (a.d[3] == 1 ? 0 : w);
          blend(C, c.off(n, ch, h, w), c.dt, al, be, av[(size_t)ai]);
        }
  return CUDNN_STATUS_SUCCESS;
}

// ---- batch normalization ----

// 1 x C x 1 x 1 (spatial modes) or 1 x C x H x W (per activation), double for
// double data and float for every other type.
cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derivedBnDesc,
                                            const cudnnTensorDescriptor_t xDesc,
                                            cudnnBatchNormMode_t mode) {
  const char *fn = "cudnnDeriveBNTensorDescriptor";
  if (!alive(derivedBnDesc)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "derivedBnDesc is not live");
  TRY(tensor_arg(fn, "xDesc", xDesc));
  if (!valid_bn_mode(mode)) return fail(CUDNN_STATUS_BAD_PARAM, fn, "invalid mode %d", (int)mode);
  const layout &x = xDesc->l;
  const bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  set_layout(&derivedBnDesc->l, CUDNN_TENSOR_NCHW, bn_param_dtype(x.dt), 1, x.d[1],
             spatial ? 1 : x.d[2], spatial ? 1 : x.d[3]);
  derivedBnDesc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

// y = alpha * (scale * (x - mean) / sqrt(var + eps) + bias) + beta * y over
// the batch's own statistics; the running ones (when given) move towards the
// batch's by exponentialAverageFactor, the variance's with the unbiased
// (count - 1) estimate; resultSaveMean / resultSaveInvVariance (when given)
// get the mean and 1 / sqrt(biased var + eps). A group of one element has no
// unbiased variance: its running variance becomes NaN, as 0 / 0 gives.
cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
    void *resultRunningVariance, double epsilon, void *resultSaveMean,
    void *resultSaveInvVariance) {
  const char *fn = "cudnnBatchNormalizationForwardTraining";
  bn_geom g;
  TRY(bn_check(fn, handle, mode, xDesc, {{"yDesc", yDesc}}, bnScaleBiasMeanVarDesc, epsilon, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"alpha", alpha},
                   {"beta", beta},
                   {"x", x},
                   {"y", y},
                   {"bnScale", bnScale},
                   {"bnBias", bnBias}}));
  if (!resultRunningMean != !resultRunningVariance)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "exactly one of resultRunningMean and resultRunningVariance is NULL");
  if (!resultSaveMean != !resultSaveInvVariance)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "exactly one of resultSaveMean and resultSaveInvVariance is NULL");
  const layout &yl = yDesc->l, &p = g.p;
  const double al = scalar(alpha, g.x.dt), be = scalar(beta, g.x.dt);
  const double f = exponentialAverageFactor;
  bn_for_params(g, [&](int c, int ph, int pw) {
    double mean, var;
    bn_stats(g, x, c, ph, pw, &mean, &var);
    const double invstd = 1.0 / sqrt(var + epsilon);
    const int64_t pi = p.off(0, c, ph, pw);
    const double scale = load(bnScale, pi, p.dt), bias = load(bnBias, pi, p.dt);
    bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
      const double xv = load(x, g.x.off(n, cc, h, w), g.x.dt);
      blend(y, yl.off(n, cc, h, w), yl.dt, al, be, scale * (xv - mean) * invstd + bias);
    });
    if (resultRunningMean) {
      const double unbiased = var * (double)g.count / (double)(g.count - 1);
      store(resultRunningMean, pi, p.dt, (1.0 - f) * load(resultRunningMean, pi, p.dt) + f * mean);
      store(resultRunningVariance, pi, p.dt,
            (1.0 - f) * load(resultRunningVariance, pi, p.dt) + f * unbiased);
    }
    if (resultSaveMean) {
      store(resultSaveMean, pi, p.dt, mean);
      store(resultSaveInvVariance, pi, p.dt, invstd);
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

// y = alpha * (scale * (x - estimatedMean) / sqrt(estimatedVariance + eps) + bias) + beta * y.
cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, const void *estimatedMean, const void *estimatedVariance, double epsilon) {
  const char *fn = "cudnnBatchNormalizationForwardInference";
  bn_geom g;
  TRY(bn_check(fn, handle, mode, xDesc, {{"yDesc", yDesc}}, bnScaleBiasMeanVarDesc, epsilon, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"alpha", alpha},
                   {"beta", beta},
                   {"x", x},
                   {"y", y},
                   {"bnScale", bnScale},
                   {"bnBias", bnBias},
                   {"estimatedMean", estimatedMean},
                   {"estimatedVariance", estimatedVariance}}));
  const layout &yl = yDesc->l, &p = g.p;
  const double al = scalar(alpha, g.x.dt), be = scalar(beta, g.x.dt);
  bn_for_params(g, [&](int c, int ph, int pw) {
    const int64_t pi = p.off(0, c, ph, pw);
    const double mean = load(estimatedMean, pi, p.dt);
    const double invstd = 1.0 / sqrt(load(estimatedVariance, pi, p.dt) + epsilon);
    const double scale = load(bnScale, pi, p.dt), bias = load(bnBias, pi, p.dt);
    bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
      const double xv = load(x, g.x.off(n, cc, h, w), g.x.dt);
      blend(y, yl.off(n, cc, h, w), yl.dt, al, be, scale * (xv - mean) * invstd + bias);
    });
  });
  return CUDNN_STATUS_SUCCESS;
}

// The training-mode gradients, with xhat = (x - mean) * invstd and M the
// group size:
//   dBias = sum dy, dScale = sum dy xhat,
//   dx = scale invstd (dy - dBias / M - xhat dScale / M),
// blended: dx with alphaDataDiff / betaDataDiff, dScale and dBias with
// alphaParamDiff / betaParamDiff. mean and invstd are savedMean /
// savedInvVariance when given (epsilon then does not enter), else recomputed
// from x with epsilon.
cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alphaDataDiff,
    const void *betaDataDiff, const void *alphaParamDiff, const void *betaParamDiff,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t dyDesc,
    const void *dy, const cudnnTensorDescriptor_t dxDesc, void *dx,
    const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScale, void *dBnScaleResult,
    void *dBnBiasResult, double epsilon, const void *savedMean, const void *savedInvVariance) {
  const char *fn = "cudnnBatchNormalizationBackward";
  bn_geom g;
  TRY(bn_check(fn, handle, mode, xDesc, {{"dyDesc", dyDesc}, {"dxDesc", dxDesc}}, dBnScaleBiasDesc,
               epsilon, &g));
  device_work work(handle->stream);
  TRY(nonnull(fn, {{"alphaDataDiff", alphaDataDiff},
                   {"betaDataDiff", betaDataDiff},
                   {"alphaParamDiff", alphaParamDiff},
                   {"betaParamDiff", betaParamDiff},
                   {"x", x},
                   {"dy", dy},
                   {"dx", dx},
                   {"bnScale", bnScale},
                   {"dBnScaleResult", dBnScaleResult},
                   {"dBnBiasResult", dBnBiasResult}}));
  if (!savedMean != !savedInvVariance)
    return fail(CUDNN_STATUS_BAD_PARAM, fn,
                "exactly one of savedMean and savedInvVariance is NULL");
  const layout &dyl = dyDesc->l, &dxl = dxDesc->l, &p = g.p;
  const double ad = scalar(alphaDataDiff, g.x.dt), bd = scalar(betaDataDiff, g.x.dt);
  const double ap = scalar(alphaParamDiff, g.x.dt), bp = scalar(betaParamDiff, g.x.dt);
  const double m = (double)g.count;
  bn_for_params(g, [&](int c, int ph, int pw) {
    const int64_t pi = p.off(0, c, ph, pw);
    double mean, invstd;
    if (savedMean) {
      mean = load(savedMean, pi, p.dt);
      invstd = load(savedInvVariance, pi, p.dt);
    } else {
      double var;
      bn_stats(g, x, c, ph, pw, &mean, &var);
      invstd = 1.0 / sqrt(var + epsilon);
    }
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
      const double d = load(dy, dyl.off(n, cc, h, w), dyl.dt);
      sum_dy += d;
      sum_dy_xhat += d * (load(x, g.x.off(n, cc, h, w), g.x.dt) - mean) * invstd;
    });
    const double k = load(bnScale, pi, p.dt) * invstd;
    // Each dx element is written after its own x and dy are read, so dx may
    // be dy or x in place.
    bn_for_members(g, c, ph, pw, [&](int n, int cc, int h, int w) {
      const double xhat = (load(x, g.x.off(n, cc, h, w), g.x.dt) - mean) * invstd;
      const double d = load(dy, dyl.off(n, cc, h, w), dyl.dt);
      blend(dx, dxl.off(n, cc, h, w), dxl.dt, ad, bd,
            k * (d - sum_dy / m - xhat * sum_dy_xhat / m));
    });
    blend(dBnScaleResult, pi, p.dt, ap, bp, sum_dy_xhat);
    blend(dBnBiasResult, pi, p.dt, ap, bp, sum_dy);
  });
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
