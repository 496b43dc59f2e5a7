// A reference cuBLAS and cuBLASLt for the CUDA emulator tests.
//
// What: the cuBLAS and cuBLASLt functions lt's CUDA backend calls (the list
// is in engine/cuda/cuda_blas_loader.cu), computed on the CPU with naive
// loops. Built as a shared library (libltemu_cublas.so), lt's loader opens
// it in place of both libcublas.so and libcublasLt.so and looks each
// function up by name; the header prototypes are included, so a signature
// that differs from cuBLAS's does not compile.
//
// Why: the emulator runs lt's real CUDA code on a machine without a GPU, to
// test how lt *uses* the CUDA libraries. So this file follows NVIDIA's
// documented semantics, not lt's reading of them:
//  - column-major storage, op(A)/op(B), leading dimensions, strided batches,
//    the scale type (of alpha and beta) each compute type prescribes, the
//    type combinations of the documented tables, cuBLASLt layouts,
//    descriptors, preferences, heuristics and the bias epilogue;
//  - arguments are checked as cuBLAS checks them, with the same statuses;
//  - where the documentation leaves a call undefined (an output overlapping
//    an input or itself, a pointer less aligned than the chosen algorithm
//    assumes, a workspace smaller than it needs, a handle used after
//    destroy), a GPU would corrupt data or fault later, far from the cause:
//    here the call fails at once;
//  - documented features lt does not use are refused with
//    CUBLAS_STATUS_NOT_SUPPORTED rather than approximated, so that no test
//    passes on a guess.
// Every failure prints one line on stderr ("emu_cublas: <function>: <why>"):
// a status alone rarely says which argument was wrong.
//
// The emulator's device memory is host memory; each call first runs the work
// queued on its stream (device_work), then does its own before it
// returns. Products are
// accumulated in double whatever the types (at least as accurate as any
// cuBLAS algorithm, which is what a reference wants); alpha, beta, C and the
// bias are applied in double, and the result is rounded once to the output
// type (16-bit outputs through float, as the float32 scale type does on the
// GPU). Test sizes are small, so no blocking or threading.

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_set>

#include "emu_library.h"

// ---- handles ----
//
// cuBLAS only declares these two structs (the handles are opaque to
// callers), so defining them here gives typed handles without casts.

struct cublasContext {
  cudaStream_t stream = nullptr;  // whose queued work runs before each GEMM
  void *workspace = nullptr;      // nullptr: cuBLAS's own pool, nothing to emulate
  size_t workspace_bytes = 0;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;  // has no effect on a double-accumulating reference
};

struct cublasLtContext {
  int unused = 0;  // cuBLASLt takes stream and workspace per call: nothing to keep
};


namespace {

// ---- diagnostics ----

const char *status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cublasStatus_t";
}

__attribute__((format(printf, 3, 4))) cublasStatus_t fail(cublasStatus_t s, const char *fn,
                                                          const char *fmt, ...) {
  char why[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  fprintf(stderr, "emu_cublas: %s: %s (%s)\n", fn, why, status_name(s));
  return s;
}

// ---- live objects ----
//
// Using a handle or descriptor that was never created, or was destroyed, is
// undefined in cuBLAS. Keeping the live ones in a set lets the emulator
// answer that with an error instead of reading freed memory. The sets are
// never destroyed, so a call made during process exit still finds them.

class live_set {
 public:
  void add(const void *p) {
    std::lock_guard<std::mutex> g(mu_);
    set_.insert(p);
  }
  bool contains(const void *p) {
    std::lock_guard<std::mutex> g(mu_);
    return p && set_.count(p) != 0;
  }
  bool remove(const void *p) {
    std::lock_guard<std::mutex> g(mu_);
    return p && set_.erase(p) != 0;
  }

 private:
  std::mutex mu_;
  std::unordered_set<const void *> set_;
};

live_set &blas_handles() { static live_set *s = new live_set; return *s; }
live_set &lt_handles() { static live_set *s = new live_set; return *s; }
live_set &matmul_descs() { static live_set *s = new live_set; return *s; }
live_set &layouts() { static live_set *s = new live_set; return *s; }
live_set &prefs() { static live_set *s = new live_set; return *s; }

// ---- element types ----

size_t type_size(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    default: return 0;  // not emulated
  }
}

const char *type_name(int t) {
  switch (t) {
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "another cudaDataType";
  }
}

// Element i of an array of type t. Only the four emulated types reach here.
double load(const void *base, cudaDataType_t t, int64_t i) {
  const char *p = static_cast<const char *>(base) + i * static_cast<int64_t>(type_size(t));
  switch (t) {
    case CUDA_R_32F: { float v; memcpy(&v, p, sizeof v); return v; }
    case CUDA_R_64F: { double v; memcpy(&v, p, sizeof v); return v; }
    case CUDA_R_16F: { uint16_t b; memcpy(&b, p, sizeof b); return __half2float(__ushort_as_half(b)); }
    case CUDA_R_16BF: {
      uint16_t b;
      memcpy(&b, p, sizeof b);
      return __bfloat162float(__ushort_as_bfloat16(b));
    }
    default: abort();  // unreachable: types are checked before any data is touched
  }
}

// Stores v rounded once to t; 16-bit types go through float, the type the
// GPU's float32 epilogue holds the value in before the final conversion.
void store(void *base, cudaDataType_t t, int64_t i, double v) {
  char *p = static_cast<char *>(base) + i * static_cast<int64_t>(type_size(t));
  switch (t) {
    case CUDA_R_32F: { const float f = static_cast<float>(v); memcpy(p, &f, sizeof f); return; }
    case CUDA_R_64F: memcpy(p, &v, sizeof v); return;
    case CUDA_R_16F: {
      const uint16_t b = __half_as_ushort(__float2half_rn(static_cast<float>(v)));
      memcpy(p, &b, sizeof b);
      return;
    }
    case CUDA_R_16BF: {
      const uint16_t b = __bfloat16_as_ushort(__float2bfloat16_rn(static_cast<float>(v)));
      memcpy(p, &b, sizeof b);
      return;
    }
    default: abort();
  }
}

// ---- compute types ----

const char *compute_name(int c) {
  switch (c) {
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_16F_PEDANTIC: return "CUBLAS_COMPUTE_16F_PEDANTIC";
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: return "CUBLAS_COMPUTE_32F_EMULATED_16BFX9";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    case CUBLAS_COMPUTE_64F_PEDANTIC: return "CUBLAS_COMPUTE_64F_PEDANTIC";
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: return "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT";
    case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
    case CUBLAS_COMPUTE_32I_PEDANTIC: return "CUBLAS_COMPUTE_32I_PEDANTIC";
    default: return "an unknown compute type";
  }
}

enum class api { blas, lt };  // the two documented type tables differ slightly

// The scale type (of alpha and beta) the documented tables give a compute
// type, or false when this emulator does not emulate the compute type
// (the integer ones, and the emulated-float64 one in classic cuBLAS, whose
// cublasGemmEx table does not list it).
bool scale_type_of(api which, cublasComputeType_t c, cudaDataType_t *scale) {
  switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: *scale = CUDA_R_16F; return true;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: *scale = CUDA_R_32F; return true;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC: *scale = CUDA_R_64F; return true;
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      *scale = CUDA_R_64F;
      return which == api::lt;
    default: return false;
  }
}

// Whether (compute type, A and B type, C type) is a row of the documented
// table, restricted to the real floating types emulated here. The two APIs'
// tables agree on these rows. The "fast" and "emulated" compute types allow
// cuBLAS to lower the precision of the inputs; computing exactly is one of
// the results they allow, so they need no special arithmetic here.
bool types_supported(cublasComputeType_t c, cudaDataType_t ab, cudaDataType_t out) {
  switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: return ab == CUDA_R_16F && out == CUDA_R_16F;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      if (ab == CUDA_R_16F || ab == CUDA_R_16BF) return out == ab || out == CUDA_R_32F;
      return ab == CUDA_R_32F && out == CUDA_R_32F;
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9: return ab == CUDA_R_32F && out == CUDA_R_32F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: return ab == CUDA_R_64F && out == CUDA_R_64F;
    default: return false;
  }
}

// ---- the GEMM itself ----

// A matrix as cuBLAS stores it: column-major, element (r, c) at r + c * ld.
// trans reads it as op(X) = X^T (CUBLAS_OP_C is the same for real types).
struct operand {
  const void *p;
  cudaDataType_t type;
  int64_t ld;
  bool trans;
  double at(int64_t i, int64_t j) const { return load(p, type, trans ? j + i * ld : i + j * ld); }
};

struct gemm_args {
  int64_t m, n, k;
  double alpha, beta;
  operand a, b;
  const void *c;  // read only when beta != 0
  cudaDataType_t c_type;
  int64_t ldc;
  void *d;
  cudaDataType_t d_type;
  int64_t ldd;
  const void *bias;  // nullptr: no bias epilogue
  cudaDataType_t bias_type;
};

// D = alpha op(A) op(B) + beta C, plus bias[i] on every element of row i
// (cuBLASLt's bias epilogue: added after the scaling). When beta is 0, C is
// not read at all, so NaNs or garbage there do not reach D, as documented.
// C and D may be the same matrix: each element is read before it is written.
void gemm(const gemm_args &g) {
  for (int64_t j = 0; j < g.n; j++)
    for (int64_t i = 0; i < g.m; i++) {
      double acc = 0.0;
      for (int64_t l = 0; l < g.k; l++) acc += g.a.at(i, l) * g.b.at(l, j);
      double v = g.alpha * acc;
      if (g.beta != 0.0) v += g.beta * load(g.c, g.c_type, i + j * g.ldc);
      if (g.bias) v += load(g.bias, g.bias_type, i);
      store(g.d, g.d_type, i + j * g.ldd, v);
    }
}

// ---- memory checks ----

// `count` column-major rows x cols matrices of es-byte elements, `stride`
// elements apart; name is for messages.
struct region {
  const char *name;
  const void *p;
  size_t es;
  int64_t rows, cols, ld, stride, count;
  bool empty() const { return rows <= 0 || cols <= 0 || count <= 0; }
  int64_t one_span() const { return (cols - 1) * ld + rows; }  // elements one matrix reaches
  uintptr_t lo() const {
    return reinterpret_cast<uintptr_t>(p) + std::min<int64_t>(0, stride * (count - 1)) * es;
  }
  uintptr_t hi() const {
    return reinterpret_cast<uintptr_t>(p) +
           (std::max<int64_t>(0, stride * (count - 1)) + one_span()) * es;
  }
  template <typename F> void each_byte(F f) const {
    for (int64_t b = 0; b < count; b++)
      for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) {
          const uintptr_t e = reinterpret_cast<uintptr_t>(p) + (b * stride + j * ld + i) * es;
          for (size_t x = 0; x < es; x++)
            if (!f(e + x)) return;
        }
  }
};

// cuBLAS leaves a call undefined when its output shares memory with an
// input, or with itself (two batch entries writing one element): the GPU's
// threads race. Returns what overlaps, or "" when nothing does. Byte ranges
// decide the common case; only when they intersect are the elements
// compared one by one, since strided views may interleave without sharing
// an element.
std::string overlap(const region &out, std::initializer_list<region> ins) {
  if (out.empty()) return "";
  const bool self = out.count > 1 && std::llabs(out.stride) < out.one_span();
  bool any_in = false;
  for (const region &in : ins)
    any_in = any_in || (!in.empty() && in.p && in.lo() < out.hi() && out.lo() < in.hi());
  if (!self && !any_in) return "";
  // Too large to compare exactly (the tests' sizes never are): let it pass.
  if (static_cast<double>(out.rows) * out.cols * out.count * out.es > 64e6) return "";
  std::unordered_set<uintptr_t> written;
  bool twice = false;
  out.each_byte([&](uintptr_t a) {
    twice = !written.insert(a).second;
    return !twice;  // stop at the first byte written twice
  });
  if (twice) return std::string("two batch entries of ") + out.name + " share memory";
  for (const region &in : ins) {
    if (in.empty() || !in.p) continue;
    bool shared = false;
    in.each_byte([&](uintptr_t a) {
      shared = written.count(a) != 0;
      return !shared;
    });
    if (shared) return std::string(out.name) + " shares memory with " + in.name;
  }
  return "";
}

uintptr_t address(const void *p) { return reinterpret_cast<uintptr_t>(p); }

// The largest power of two (up to 256) that divides p's address, as an
// algorithm choosing by alignment sees it; 256 for NULL.
uint32_t alignment_of(const void *p) {
  uint32_t a = 256;
  while (a > 1 && address(p) % a != 0) a >>= 1;
  return a;
}

// cuBLAS may use all of its workspace as scratch and leaves nothing defined
// there. Filling its start with 0xff bytes (a NaN in every floating type
// here) turns a workspace that aliases live data into NaNs in the results
// instead of a pass by luck. Capped: the point is the aliasing, not the size.
void scribble(void *ws, size_t bytes) {
  if (ws) memset(ws, 0xff, std::min(bytes, static_cast<size_t>(64) << 10));
}

bool valid_op(int op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

cublasStatus_t check_handle(const char *fn, cublasHandle_t h) {
  if (!h) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is NULL");
  if (!blas_handles().contains(h))
    return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn,
                "%p is not a live cuBLAS handle (never created, or destroyed)",
                static_cast<void *>(h));
  return CUBLAS_STATUS_SUCCESS;
}

bool valid_gemm_algo(int a) {
  return (a >= CUBLAS_GEMM_DEFAULT && a <= CUBLAS_GEMM_ALGO23) ||
         (a >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && a <= CUBLAS_GEMM_ALGO15_TENSOR_OP) ||
         a == CUBLAS_GEMM_AUTOTUNE;
}

// cublasGemmEx is cublasGemmStridedBatchedEx with one batch entry: both go
// through here. The checks are those of the documented error table, in the
// order handle (NOT_INITIALIZED), values (INVALID_VALUE), then support
// (NOT_SUPPORTED).
cublasStatus_t gemm_ex(const char *fn, cublasHandle_t h, cublasOperation_t ta,
                       cublasOperation_t tb, int m, int n, int k, const void *alpha,
                       const void *A, cudaDataType at, int lda, long long sa, const void *B,
                       cudaDataType bt, int ldb, long long sb, const void *beta, void *C,
                       cudaDataType ct, int ldc, long long sc, int batch,
                       cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  cublasStatus_t s = check_handle(fn, h);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  device_work work(h->stream);
  const cublasStatus_t bad = CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0) return fail(bad, fn, "m = %d, n = %d, k = %d: negative", m, n, k);
  if (batch < 0) return fail(bad, fn, "batchCount = %d is negative", batch);
  if (!valid_op(ta) || !valid_op(tb))
    return fail(bad, fn, "transa = %d, transb = %d: each must be CUBLAS_OP_N, _T or _C", ta, tb);
  // The leading dimensions are checked against the matrices as stored.
  const int a_rows = ta == CUBLAS_OP_N ? m : k, b_rows = tb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, a_rows))
    return fail(bad, fn, "lda = %d < max(1, %s = %d) (A is stored %s)", lda,
                ta == CUBLAS_OP_N ? "m" : "k", a_rows, ta == CUBLAS_OP_N ? "m x k" : "k x m");
  if (ldb < std::max(1, b_rows))
    return fail(bad, fn, "ldb = %d < max(1, %s = %d) (B is stored %s)", ldb,
                tb == CUBLAS_OP_N ? "k" : "n", b_rows, tb == CUBLAS_OP_N ? "k x n" : "n x k");
  if (ldc < std::max(1, m)) return fail(bad, fn, "ldc = %d < max(1, m = %d)", ldc, m);
  if (!alpha || !beta) return fail(bad, fn, "alpha or beta is NULL");
  if (!valid_gemm_algo(algo)) return fail(bad, fn, "algo = %d is not a cublasGemmAlgo_t", algo);

  cudaDataType_t scale;
  if (!scale_type_of(api::blas, compute, &scale))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "computeType %s (%d) is not emulated",
                compute_name(compute), compute);
  // The error table names unsupported types under both INVALID_VALUE and
  // NOT_SUPPORTED; the latter is the one that speaks of combinations.
  if (at != bt || !type_size(at) || !type_size(ct) || !types_supported(compute, at, ct))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                "Atype %s, Btype %s, Ctype %s with %s is not in cublasGemmEx's table",
                type_name(at), type_name(bt), type_name(ct), compute_name(compute));

  // The scalars are read in the scale type: a double passed where a float is
  // expected (or the reverse) shows up as a wrong result, as on the GPU.
  const double al = load(alpha, scale, 0), be = load(beta, scale, 0);
  if (be != 0.0 && !C) return fail(bad, fn, "C is NULL while beta is not 0");
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to compute
  if (!C || (k > 0 && (!A || !B)))
    return fail(bad, fn, "a matrix pointer is NULL (A %p, B %p, C %p)", A, B,
                static_cast<void *>(C));

  const size_t es_ab = type_size(at), es_c = type_size(ct);
  if (address(A) % es_ab || address(B) % es_ab || address(C) % es_c)
    return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn,
                "a matrix is not aligned to its element size (A %p, B %p, C %p): a GPU "
                "kernel would fault on a misaligned address",
                A, B, static_cast<void *>(C));
  // C is the output: it may be read (beta != 0) but that is in place by design.
  const std::string o = overlap(
      region{"C", C, es_c, m, n, ldc, sc, batch},
      {region{"A", A, es_ab, a_rows, ta == CUBLAS_OP_N ? k : m, lda, sa, k > 0 ? batch : 0},
       region{"B", B, es_ab, b_rows, tb == CUBLAS_OP_N ? n : k, ldb, sb, k > 0 ? batch : 0}});
  if (!o.empty()) return fail(bad, fn, "%s: undefined in cuBLAS, refused here", o.c_str());

  scribble(h->workspace, h->workspace_bytes);
  for (int e = 0; e < batch; e++) {
    gemm_args g;
    g.m = m, g.n = n, g.k = k, g.alpha = al, g.beta = be;
    g.a = operand{static_cast<const char *>(A) + e * sa * static_cast<long long>(es_ab), at, lda,
                  ta != CUBLAS_OP_N};
    g.b = operand{static_cast<const char *>(B) + e * sb * static_cast<long long>(es_ab), bt, ldb,
                  tb != CUBLAS_OP_N};
    char *ce = static_cast<char *>(C) + e * sc * static_cast<long long>(es_c);
    g.c = ce, g.c_type = ct, g.ldc = ldc;
    g.d = ce, g.d_type = ct, g.ldd = ldc;
    g.bias = nullptr, g.bias_type = ct;
    gemm(g);
  }
  return CUBLAS_STATUS_SUCCESS;
}

// ---- cuBLASLt descriptors ----
//
// Attributes are kept as raw bytes of their documented size (each fits in
// 8), with a table saying what the emulator does with each.

enum class use {
  emulated,  // read and honoured
  hint,      // accepted and ignored: it steers the choice of algorithm only, or
             // matters only with batches or epilogues that are refused anyway
  scaling,   // fp8 scaling: documented to make cublasLtMatmul fail with
             // INVALID_VALUE for the (non-fp8) types here when set
  absent,    // a feature this emulator does not have: NOT_SUPPORTED when set
};

struct attr_spec {
  int id;
  const char *name;
  size_t size;
  use how;
};

constexpr int kMaxAttr = 64;

struct attr_values {
  uint64_t raw[kMaxAttr] = {};
  template <typename T> T get(int id) const {
    T v;
    memcpy(&v, &raw[id], sizeof v);
    return v;
  }
  template <typename T> void put(int id, T v) {
    raw[id] = 0;
    memcpy(&raw[id], &v, sizeof v);
  }
};

template <size_t N> const attr_spec *find_attr(const attr_spec (&table)[N], int id) {
  for (const attr_spec &a : table)
    if (a.id == id) return &a;
  return nullptr;
}

// SetAttribute: an unknown attribute, a NULL buffer or a size other than the
// attribute's are INVALID_VALUE, as documented.
template <size_t N>
cublasStatus_t set_attr(const char *fn, const attr_spec (&table)[N], attr_values &v, int id,
                        const void *buf, size_t size) {
  const attr_spec *a = find_attr(table, id);
  if (!a) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", id);
  if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s: buf is NULL", a->name);
  if (size != a->size)
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s takes %zu bytes, not %zu", a->name, a->size,
                size);
  v.raw[id] = 0;
  memcpy(&v.raw[id], buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

#define DESC(x) CUBLASLT_MATMUL_DESC_##x, #x
const attr_spec desc_attrs[] = {
    {DESC(COMPUTE_TYPE), 4, use::emulated},
    {DESC(SCALE_TYPE), 4, use::emulated},
    {DESC(POINTER_MODE), 4, use::emulated},
    {DESC(TRANSA), 4, use::emulated},
    {DESC(TRANSB), 4, use::emulated},
    {DESC(TRANSC), 4, use::emulated},
    {DESC(FILL_MODE), 4, use::emulated},
    {DESC(EPILOGUE), 4, use::emulated},
    {DESC(BIAS_POINTER), sizeof(void *), use::emulated},
    {DESC(BIAS_BATCH_STRIDE), 8, use::hint},
    {DESC(EPILOGUE_AUX_POINTER), sizeof(void *), use::hint},
    {DESC(EPILOGUE_AUX_LD), 8, use::hint},
    {DESC(EPILOGUE_AUX_BATCH_STRIDE), 8, use::hint},
    {DESC(ALPHA_VECTOR_BATCH_STRIDE), 8, use::hint},
    {DESC(SM_COUNT_TARGET), 4, use::hint},
    {DESC(A_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(B_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(C_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(D_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(AMAX_D_POINTER), sizeof(void *), use::scaling},
    {DESC(EPILOGUE_AUX_DATA_TYPE), 4, use::hint},
    {DESC(EPILOGUE_AUX_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(EPILOGUE_AUX_AMAX_POINTER), sizeof(void *), use::scaling},
    {DESC(FAST_ACCUM), 1, use::hint},
    {DESC(BIAS_DATA_TYPE), 4, use::emulated},
    {DESC(A_SCALE_MODE), 4, use::scaling},
    {DESC(B_SCALE_MODE), 4, use::scaling},
    {DESC(C_SCALE_MODE), 4, use::scaling},
    {DESC(D_SCALE_MODE), 4, use::scaling},
    {DESC(EPILOGUE_AUX_SCALE_MODE), 4, use::scaling},
    {DESC(D_OUT_SCALE_POINTER), sizeof(void *), use::scaling},
    {DESC(D_OUT_SCALE_MODE), 4, use::scaling},
    {DESC(EMULATION_DESCRIPTOR), sizeof(void *), use::absent},
};
#undef DESC

#define PREF(x) CUBLASLT_MATMUL_PREF_##x, #x
const attr_spec pref_attrs[] = {
    {PREF(SEARCH_MODE), 4, use::emulated},
    {PREF(MAX_WORKSPACE_BYTES), 8, use::emulated},
    // The emulated algorithm never splits k, i.e. uses reduction scheme
    // NONE, which every mask admits.
    {PREF(REDUCTION_SCHEME_MASK), 4, use::hint},
    {PREF(MIN_ALIGNMENT_A_BYTES), 4, use::emulated},
    {PREF(MIN_ALIGNMENT_B_BYTES), 4, use::emulated},
    {PREF(MIN_ALIGNMENT_C_BYTES), 4, use::emulated},
    {PREF(MIN_ALIGNMENT_D_BYTES), 4, use::emulated},
    {PREF(MAX_WAVES_COUNT), 4, use::hint},
    {PREF(IMPL_MASK), 8, use::hint},
};
#undef PREF

struct matmul_desc {
  attr_values v, initial;  // initial: the defaults, to tell what was set
};

struct matrix_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  // Order is CUBLASLT_ORDER_COL and the batch count 1: lt sets no layout
  // attribute, and this library does not export cublasLtMatrixLayoutSetAttribute.
};

struct matmul_pref {
  attr_values v;
};

// The descriptors are the emulator's own structs behind cuBLASLt's opaque
// pointer types; only this file ever looks behind them.
matmul_desc *desc_of(cublasLtMatmulDesc_t d) { return reinterpret_cast<matmul_desc *>(d); }
matrix_layout *layout_of(cublasLtMatrixLayout_t l) { return reinterpret_cast<matrix_layout *>(l); }
matmul_pref *pref_of(cublasLtMatmulPreference_t p) { return reinterpret_cast<matmul_pref *>(p); }

// ---- cuBLASLt problems ----

// A matmul as its descriptors describe it, checked against the documentation.
struct lt_problem {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  bool transa, transb;
  const matrix_layout *a, *b, *c, *d;
  bool c_is_d_desc;  // Cdesc omitted or the same descriptor as Ddesc
  int64_t m, n, k;
  const void *bias;  // the BIAS_POINTER set on the descriptor
  bool has_bias;
  cudaDataType_t bias_type;
  uint64_t kernel;  // what selects a kernel: types, transposes, epilogue
};

// One FNV-1a step: enough of a fingerprint to tell two configurations apart.
uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

// A layout's own constraints. Column-major: ld is the stride between
// columns, at least the rows; an out-of-place C may have ld 0 (one column
// broadcast to all), as documented for cublasLtMatmul.
cublasStatus_t check_layout(const char *fn, const matrix_layout *l, const char *name,
                            bool may_broadcast) {
  if (!type_size(l->type))
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "%s's type %s (%d) is not emulated", name,
                type_name(l->type), l->type);
  if (l->rows > INT32_MAX || l->cols > INT32_MAX)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                "%s is %llu x %llu: beyond int32, which cuBLASLt does not support", name,
                static_cast<unsigned long long>(l->rows), static_cast<unsigned long long>(l->cols));
  const int64_t min_ld = std::max<int64_t>(1, static_cast<int64_t>(l->rows));
  if (l->ld < 0 || (l->ld < min_ld && !(may_broadcast && l->ld == 0)))
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%s's ld = %lld < max(1, rows = %llu)", name,
                static_cast<long long>(l->ld), static_cast<unsigned long long>(l->rows));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t resolve(const char *fn, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                       cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                       cublasLtMatrixLayout_t Ddesc, lt_problem *p) {
  const cublasStatus_t bad = CUBLAS_STATUS_INVALID_VALUE, unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  if (!matmul_descs().contains(desc))
    return fail(bad, fn, "computeDesc %p is not a live matmul descriptor", static_cast<void *>(desc));
  // "If Cdesc is omitted, this function assumes it to be equal to Ddesc."
  p->c_is_d_desc = !Cdesc || Cdesc == Ddesc;
  if (!Cdesc) Cdesc = Ddesc;
  const struct { cublasLtMatrixLayout_t l; const char *name; } ls[] = {
      {Adesc, "Adesc"}, {Bdesc, "Bdesc"}, {Cdesc, "Cdesc"}, {Ddesc, "Ddesc"}};
  for (const auto &l : ls)
    if (!layouts().contains(l.l))
      return fail(bad, fn, "%s %p is not a live matrix layout", l.name, static_cast<void *>(l.l));
  p->a = layout_of(Adesc), p->b = layout_of(Bdesc), p->c = layout_of(Cdesc), p->d = layout_of(Ddesc);

  const attr_values &v = desc_of(desc)->v, &init = desc_of(desc)->initial;
  p->compute = static_cast<cublasComputeType_t>(v.get<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE));
  p->scale = static_cast<cudaDataType_t>(v.get<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE));
  const int32_t ta = v.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA),
                tb = v.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB),
                tc = v.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSC);
  if (!valid_op(ta) || !valid_op(tb) || !valid_op(tc))
    return fail(bad, fn, "TRANSA %d, TRANSB %d, TRANSC %d: each must be CUBLAS_OP_N, _T or _C", ta,
                tb, tc);
  if (tc != CUBLAS_OP_N) return fail(unsupported, fn, "TRANSC must be CUBLAS_OP_N (documented)");
  p->transa = ta != CUBLAS_OP_N, p->transb = tb != CUBLAS_OP_N;
  if (v.get<int32_t>(CUBLASLT_MATMUL_DESC_FILL_MODE) != CUBLAS_FILL_MODE_FULL)
    return fail(unsupported, fn, "FILL_MODE other than CUBLAS_FILL_MODE_FULL is not emulated");
  const int32_t pm = v.get<int32_t>(CUBLASLT_MATMUL_DESC_POINTER_MODE);
  if (pm != CUBLASLT_POINTER_MODE_HOST && pm != CUBLASLT_POINTER_MODE_DEVICE)
    return fail(unsupported, fn, "POINTER_MODE %d (vector alpha/beta) is not emulated", pm);
  const uint32_t epilogue = v.get<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_BIAS)
    return fail(unsupported, fn,
                "EPILOGUE %u is not emulated (only CUBLASLT_EPILOGUE_DEFAULT and _BIAS are)",
                epilogue);
  for (const attr_spec &a : desc_attrs) {
    if (v.raw[a.id] == init.raw[a.id]) continue;
    if (a.how == use::scaling)
      return fail(bad, fn, "%s is set: matrix scaling is for fp8 types, not these", a.name);
    if (a.how == use::absent) return fail(unsupported, fn, "%s is set: not emulated", a.name);
  }

  cublasStatus_t s;
  if ((s = check_layout(fn, p->a, "A", false)) != CUBLAS_STATUS_SUCCESS ||
      (s = check_layout(fn, p->b, "B", false)) != CUBLAS_STATUS_SUCCESS ||
      (s = check_layout(fn, p->c, "C", !p->c_is_d_desc)) != CUBLAS_STATUS_SUCCESS ||
      (s = check_layout(fn, p->d, "D", false)) != CUBLAS_STATUS_SUCCESS)
    return s;

  // Layouts describe the matrices as stored; op(A) is m x k, op(B) k x n, D m x n.
  p->m = static_cast<int64_t>(p->d->rows), p->n = static_cast<int64_t>(p->d->cols);
  const int64_t a_r = p->a->rows, a_c = p->a->cols, b_r = p->b->rows, b_c = p->b->cols;
  const int64_t a_m = p->transa ? a_c : a_r;
  p->k = p->transa ? a_r : a_c;
  const int64_t b_k = p->transb ? b_c : b_r, b_n = p->transb ? b_r : b_c;
  if (a_m != p->m || b_k != p->k || b_n != p->n)
    return fail(bad, fn,
                "shapes do not agree: D is %lld x %lld, op(A) %lld x %lld (A %lld x %lld, TRANSA "
                "%d), op(B) %lld x %lld (B %lld x %lld, TRANSB %d)",
                (long long)p->m, (long long)p->n, (long long)a_m, (long long)p->k, (long long)a_r,
                (long long)a_c, ta, (long long)b_k, (long long)b_n, (long long)b_r,
                (long long)b_c, tb);
  if (p->c->rows != p->d->rows || p->c->cols != p->d->cols || p->c->type != p->d->type)
    return fail(bad, fn, "C (%llu x %llu, %s) and D (%llu x %llu, %s) differ in shape or type",
                (unsigned long long)p->c->rows, (unsigned long long)p->c->cols,
                type_name(p->c->type), (unsigned long long)p->d->rows,
                (unsigned long long)p->d->cols, type_name(p->d->type));

  cudaDataType_t scale;
  if (!scale_type_of(api::lt, p->compute, &scale))
    return fail(unsupported, fn, "compute type %s (%d) is not emulated", compute_name(p->compute),
                p->compute);
  if (p->scale != scale)
    return fail(unsupported, fn, "scale type %s with %s: the table gives %s", type_name(p->scale),
                compute_name(p->compute), type_name(scale));
  if (p->a->type != p->b->type || !types_supported(p->compute, p->a->type, p->d->type))
    return fail(unsupported, fn, "A %s, B %s, C/D %s with %s is not in cublasLtMatmul's table",
                type_name(p->a->type), type_name(p->b->type), type_name(p->d->type),
                compute_name(p->compute));

  // The bias vector has D's type unless BIAS_DATA_TYPE says otherwise (-1:
  // unset); for the types here the table allows only D's type.
  p->has_bias = epilogue == CUBLASLT_EPILOGUE_BIAS;
  p->bias = v.get<const void *>(CUBLASLT_MATMUL_DESC_BIAS_POINTER);
  const int32_t bt = v.get<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
  p->bias_type = bt == -1 ? p->d->type : static_cast<cudaDataType_t>(bt);
  if (p->has_bias && p->bias_type != p->d->type)
    return fail(unsupported, fn, "bias type %s with D of type %s is not in the table",
                type_name(p->bias_type), type_name(p->d->type));

  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t x : {static_cast<uint64_t>(p->compute), static_cast<uint64_t>(p->scale),
                     static_cast<uint64_t>(p->a->type), static_cast<uint64_t>(p->d->type),
                     static_cast<uint64_t>(p->transa), static_cast<uint64_t>(p->transb),
                     static_cast<uint64_t>(epilogue), static_cast<uint64_t>(p->bias_type)})
    h = mix(h, x);
  p->kernel = h;
  return CUBLAS_STATUS_SUCCESS;
}

// The algorithm a heuristic returns: what it was chosen for, so that
// cublasLtMatmul can check the call keeps to it.
enum algo_word { kMagic, kWorkspace, kAlignA, kAlignB, kAlignC, kAlignD, kAlignBias, kKernel };
constexpr uint64_t kAlgoMagic = 0x4c54454d55414c47ull;  // "LTEMUALG"

}  // namespace

// ---- exported: classic cuBLAS ----
//
// cublas_v2.h maps cublasCreate, cublasDestroy, cublasSetStream and
// cublasSetWorkspace to these _v2 names, which are the library's symbols.

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "handle is NULL");
  *handle = new cublasContext();
  blas_handles().add(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (!blas_handles().remove(handle))
    return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy", "%p is not a live cuBLAS handle",
                static_cast<void *>(handle));
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  const cublasStatus_t s = check_handle("cublasSetStream", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  handle->stream = stream;
  // Documented: cublasSetStream unconditionally resets the workspace to the
  // default pool, so a workspace set before it is no longer used.
  handle->workspace = nullptr;
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
  const cublasStatus_t s = check_handle("cublasSetWorkspace", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (address(workspace) % 256 != 0)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace",
                "workspace %p is not aligned to 256 bytes", workspace);
  handle->workspace = workspace;
  handle->workspace_bytes = workspace ? bytes : 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  const cublasStatus_t s = check_handle("cublasSetMathMode", handle);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  // One base mode, optionally with the one flag.
  const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
      base != CUBLAS_TF32_TENSOR_OP_MATH && base != CUBLAS_FP32_EMULATED_BF16X9_MATH &&
      base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode", "mode %d is not a cublasMath_t",
                static_cast<int>(mode));
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library or handle was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was passed";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device does not support the operation";
    case CUBLAS_STATUS_MAPPING_ERROR: return "access to device memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the operation is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "a license error";
  }
  return "unknown cuBLAS status";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  return gemm_ex("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B,
                 Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return gemm_ex("cublasGemmStridedBatchedEx", handle, transa, transb, m, n, k, alpha, A, Atype,
                 lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                 computeType, algo);
}

// ---- exported: cuBLASLt ----

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  if (!handle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "handle is NULL");
  *handle = new cublasLtContext();
  lt_handles().add(*handle);
  return CUBLAS_STATUS_SUCCESS;
}

// lt keeps its cuBLASLt handles for the life of the process and never calls
// this; it is here so that the self-test can clean up.
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!lt_handles().remove(handle))
    return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy",
                "%p is not a live cuBLASLt handle", static_cast<void *>(handle));
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (!matmulDesc)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is NULL");
  // The types are checked where they are used (heuristic, matmul), since
  // SetAttribute may still change them.
  matmul_desc *d = new matmul_desc();
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_N);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_FULL);
  d->v.put<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1);
  d->v.put<int32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
  d->initial = d->v;
  matmul_descs().add(d);
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  if (!matmulDesc) return CUBLAS_STATUS_SUCCESS;
  if (!matmul_descs().remove(matmulDesc))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy",
                "%p is not a live matmul descriptor", static_cast<void *>(matmulDesc));
  delete desc_of(matmulDesc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes) {
  const char *fn = "cublasLtMatmulDescSetAttribute";
  if (!matmul_descs().contains(matmulDesc))
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%p is not a live matmul descriptor",
                static_cast<void *>(matmulDesc));
  return set_attr(fn, desc_attrs, desc_of(matmulDesc)->v, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is NULL");
  // Checked where used, as the matmul descriptor is (check_layout).
  matrix_layout *l = new matrix_layout{type, rows, cols, ld};
  layouts().add(l);
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (!matLayout) return CUBLAS_STATUS_SUCCESS;
  if (!layouts().remove(matLayout))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy",
                "%p is not a live matrix layout", static_cast<void *>(matLayout));
  delete layout_of(matLayout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is NULL");
  matmul_pref *p = new matmul_pref();
  // Documented defaults: best-fit search, no workspace, every reduction
  // scheme, 256-byte alignment of every matrix, no wave limit, every
  // implementation.
  p->v.put<uint32_t>(CUBLASLT_MATMUL_PREF_SEARCH_MODE, CUBLASLT_SEARCH_BEST_FIT);
  p->v.put<uint64_t>(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 0);
  p->v.put<uint32_t>(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_MASK);
  for (int a : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    p->v.put<uint32_t>(a, 256);
  p->v.put<float>(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 0.0f);
  p->v.put<uint64_t>(CUBLASLT_MATMUL_PREF_IMPL_MASK, ~static_cast<uint64_t>(0));
  prefs().add(p);
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (!pref) return CUBLAS_STATUS_SUCCESS;
  if (!prefs().remove(pref))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy",
                "%p is not a live preference", static_cast<void *>(pref));
  delete pref_of(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes) {
  const char *fn = "cublasLtMatmulPreferenceSetAttribute";
  if (!prefs().contains(pref))
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "%p is not a live preference",
                static_cast<void *>(pref));
  return set_attr(fn, pref_attrs, pref_of(pref)->v, attr, buf, sizeInBytes);
}

// One algorithm fits every problem here (the naive loop), so the heuristic
// answers with exactly one result. Its workspace size is the preference's
// whole maximum: any size up to the maximum is a valid answer, and the
// largest one best catches a cublasLtMatmul given less workspace than the
// heuristic was allowed.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
    cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount) {
  const char *fn = "cublasLtMatmulAlgoGetHeuristic";
  if (!lt_handles().contains(lightHandle))
    return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "%p is not a live cuBLASLt handle",
                static_cast<void *>(lightHandle));
  if (requestedAlgoCount <= 0)
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount = %d", requestedAlgoCount);
  if (!heuristicResultsArray || !returnAlgoCount)
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "heuristicResultsArray or returnAlgoCount is NULL");
  *returnAlgoCount = 0;
  if (!prefs().contains(preference))
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "preference %p is not a live preference",
                static_cast<void *>(preference));
  lt_problem p;
  const cublasStatus_t s = resolve(fn, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const attr_values &pv = pref_of(preference)->v;
  if (pv.get<uint32_t>(CUBLASLT_MATMUL_PREF_SEARCH_MODE) != CUBLASLT_SEARCH_BEST_FIT)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "only CUBLASLT_SEARCH_BEST_FIT is emulated");

  cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
  memset(&r, 0, sizeof r);
  uint64_t *w = r.algo.data;
  w[kMagic] = kAlgoMagic;
  w[kWorkspace] = pv.get<uint64_t>(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
  // The algorithm may assume the alignments the preference promises
  // (default 256 bytes), and for the bias the alignment of the BIAS_POINTER
  // set now: the heuristic does not dereference it but reads its alignment.
  w[kAlignA] = pv.get<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
  w[kAlignB] = pv.get<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
  w[kAlignC] = pv.get<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
  w[kAlignD] = pv.get<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
  w[kAlignBias] = p.has_bias ? alignment_of(p.bias) : 1;
  w[kKernel] = p.kernel;
  r.workspaceSize = static_cast<size_t>(w[kWorkspace]);
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  const char *fn = "cublasLtMatmul";
  device_work work(stream);
  const cublasStatus_t bad = CUBLAS_STATUS_INVALID_VALUE;
  if (!lt_handles().contains(lightHandle))
    return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "%p is not a live cuBLASLt handle",
                static_cast<void *>(lightHandle));
  lt_problem p;
  const cublasStatus_t s = resolve(fn, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (!alpha || !beta) return fail(bad, fn, "alpha or beta is NULL");

  // algo NULL: cuBLASLt runs its own heuristic with the default preference,
  // which allows no workspace; the emulator then assumes nothing of the
  // pointers but their element alignment.
  uint64_t need_ws = 0, al_a = 1, al_b = 1, al_c = 1, al_d = 1, al_bias = 1;
  if (algo) {
    const uint64_t *w = algo->data;
    if (w[kMagic] != kAlgoMagic)
      return fail(bad, fn, "algo was not returned by cublasLtMatmulAlgoGetHeuristic");
    if (w[kKernel] != p.kernel)
      return fail(bad, fn,
                  "algo was chosen for other types, transposes or epilogue than this call's");
    need_ws = w[kWorkspace], al_a = w[kAlignA], al_b = w[kAlignB], al_c = w[kAlignC];
    al_d = w[kAlignD], al_bias = w[kAlignBias];
  }
  if (workspaceSizeInBytes < need_ws)
    return fail(bad, fn, "workspaceSizeInBytes = %zu < the %llu bytes the algo requires",
                workspaceSizeInBytes, static_cast<unsigned long long>(need_ws));
  if (workspace && address(workspace) % 256 != 0)
    return fail(bad, fn, "workspace %p is not aligned to 256 bytes", workspace);
  if (!workspace && need_ws > 0)
    return fail(bad, fn, "workspace is NULL but the algo requires %llu bytes",
                static_cast<unsigned long long>(need_ws));

  const double al = load(alpha, p.scale, 0), be = load(beta, p.scale, 0);
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  if (!D || (be != 0.0 && !C) || (p.k > 0 && (!A || !B)))
    return fail(bad, fn, "a matrix pointer is NULL (A %p, B %p, C %p, D %p, beta %g)", A, B, C, D,
                be);
  if (p.has_bias && !p.bias) return fail(bad, fn, "EPILOGUE_BIAS but BIAS_POINTER is NULL");
  // In place (C == D) requires Cdesc == Ddesc; out of place, C and D may
  // differ only in their leading dimension (documented).
  if (C == D && !p.c_is_d_desc && p.c->ld != p.d->ld)
    return fail(bad, fn, "C == D (in place) but Cdesc's ld %lld differs from Ddesc's %lld",
                static_cast<long long>(p.c->ld), static_cast<long long>(p.d->ld));

  // The algorithm was chosen for the alignments the preference promised:
  // breaking the promise is what makes a real kernel fault or misbehave.
  const struct { const char *name; const void *ptr; uint64_t want; } al_checks[] = {
      {"A", A, al_a}, {"B", B, al_b}, {"C", C, al_c}, {"D", D, al_d},
      {"bias", p.has_bias ? p.bias : nullptr, al_bias}};
  for (const auto &c : al_checks)
    if (c.ptr && c.want > 1 && address(c.ptr) % c.want != 0)
      return fail(bad, fn,
                  "%s %p is not %llu-byte aligned, as the algo was chosen for (the preference's "
                  "MIN_ALIGNMENT, or for the bias the BIAS_POINTER given to the heuristic)",
                  c.name, c.ptr, static_cast<unsigned long long>(c.want));
  const size_t es_ab = type_size(p.a->type), es_d = type_size(p.d->type);
  if (address(A) % es_ab || address(B) % es_ab || address(C) % es_d || address(D) % es_d ||
      (p.has_bias && address(p.bias) % type_size(p.bias_type)))
    return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn,
                "a pointer is not aligned to its element size: a GPU kernel would fault on a "
                "misaligned address");

  const bool c_read = be != 0.0 && C != D;  // in place, C is D: not an input to guard
  const std::string o = overlap(
      region{"D", D, es_d, p.m, p.n, p.d->ld, 0, 1},
      {region{"A", A, es_ab, static_cast<int64_t>(p.a->rows), static_cast<int64_t>(p.a->cols),
              p.a->ld, 0, p.k > 0 ? 1 : 0},
       region{"B", B, es_ab, static_cast<int64_t>(p.b->rows), static_cast<int64_t>(p.b->cols),
              p.b->ld, 0, p.k > 0 ? 1 : 0},
       region{"C", C, es_d, p.m, p.n, p.c->ld, 0, c_read ? 1 : 0},
       region{"bias", p.bias, type_size(p.bias_type), p.m, 1, p.m, 0, p.has_bias ? 1 : 0}});
  if (!o.empty()) return fail(bad, fn, "%s: undefined in cuBLASLt, refused here", o.c_str());

  scribble(workspace, static_cast<size_t>(need_ws));
  gemm_args g;
  g.m = p.m, g.n = p.n, g.k = p.k, g.alpha = al, g.beta = be;
  g.a = operand{A, p.a->type, p.a->ld, p.transa};
  g.b = operand{B, p.b->type, p.b->ld, p.transb};
  g.c = C, g.c_type = p.c->type, g.ldc = p.c->ld;
  g.d = D, g.d_type = p.d->type, g.ldd = p.d->ld;
  g.bias = p.has_bias ? p.bias : nullptr, g.bias_type = p.bias_type;
  gemm(g);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
