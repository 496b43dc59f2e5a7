// Batched matrix product: floating dtypes through cuBLAS (one strided-batched
// call when each operand's batch dims collapse to one stride, else one call
// per batch entry) with cublasGemmStridedBatchedEx: float32 in float32 (TF32
// when lt_cuda_matmul_tf32()), float64 in float64, float16/bfloat16 with
// float32 accumulation (tensor cores); integers through a plain kernel
// accumulating in wrapping int64 (cuBLAS has no int64 GEMM).
//
// Also home of what cuda_blas.h declares: the per-device cuBLAS/cuBLASLt
// handles, the per-(device, stream) workspaces from the caching allocator,
// and cuda_gemm.
//
// cuBLAS is column-major and lt row-major: a row-major n x m matrix is the
// column-major m x n one, so out^T = b^T a^T is computed with b first.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_blas.h"
#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

// ---- handles, workspaces, the GEMM helper (declared in cuda_blas.h) ----

struct blas_slot {
  cublasHandle_t blas;
  cublasLtHandle_t lt;
};

static blas_slot slots[LT_MAX_DEVICES];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

lt_status cuda_cublas_fail(const char *op, const char *call, cublasStatus_t s) {
  const char *load_error = cuda_blas_load_error();
  return lt_error(LT_ERR_DEVICE, "cuda: %s: %s: %s", op, call,
                  load_error ? load_error : cublasGetStatusString(s));
}

static lt_status check_slot(lt_device dev) {
  if (dev.type != LT_DEVICE_CUDA || dev.index < 0 || dev.index >= LT_MAX_DEVICES)
    return lt_error(LT_ERR_INTERNAL, "cuda: cublas: no handle slot for device %d:%d",
                    (int)dev.type, (int)dev.index);
  return LT_OK;
}

// Called with dev current: cublasCreate binds the handle to the current device.
lt_status cuda_cublas_handle(lt_device dev, cublasHandle_t *out) {
  *out = NULL;
  LT_TRY(check_slot(dev));
  pthread_mutex_lock(&slots_lock);
  blas_slot *sl = &slots[dev.index];
  const char *call = NULL;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (!sl->blas) {
    cublasHandle_t h = NULL;
    call = "cublasCreate";
    s = cublasCreate(&h);
    // The stream and the workspace are not set here: the handle serves every
    // stream of the device, so cuda_blas_session sets both before each use.
    // 16-bit GEMMs promise float32 accumulation: forbid split-K reductions in
    // the 16-bit output type (cuBLAS allows them by default for mixed
    // precision). Default math otherwise: float32 uses TF32 only when a call
    // asks for CUBLAS_COMPUTE_32F_FAST_TF32.
    if (s == CUBLAS_STATUS_SUCCESS)
      call = "cublasSetMathMode",
      s = cublasSetMathMode(h, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s == CUBLAS_STATUS_SUCCESS)
      sl->blas = h;
    else if (h)
      (void)cublasDestroy(h);
  }
  *out = sl->blas;
  pthread_mutex_unlock(&slots_lock);
  if (s != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail("cublas", call, s);
  return LT_OK;
}

lt_status cuda_cublaslt_handle(lt_device dev, cublasLtHandle_t *out) {
  *out = NULL;
  LT_TRY(check_slot(dev));
  pthread_mutex_lock(&slots_lock);
  blas_slot *sl = &slots[dev.index];
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (!sl->lt) s = cublasLtCreate(&sl->lt);
  *out = sl->lt;
  pthread_mutex_unlock(&slots_lock);
  if (s != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail("cublas", "cublasLtCreate", s);
  return LT_OK;
}

// ---- workspace size: LT_CUBLAS_WORKSPACE_BYTES or by compute capability ----

#define WORKSPACE_ENV "LT_CUBLAS_WORKSPACE_BYTES"
#define WORKSPACE_MAX ((unsigned long long)4 << 30)

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool env_set, env_bad;
static size_t env_bytes;
static char env_text[64]; // the value as given, for the error message (cut short)

static void read_workspace_env(void) {
  const char *s = getenv(WORKSPACE_ENV);
  if (!s || !*s) return;
  env_set = true;
  snprintf(env_text, sizeof env_text, "%s", s);
  // Digits only: strtoull alone would take "-1" as the largest value, " 8"
  // with a space, and "8MiB" as 8.
  for (const char *p = s; *p; p++)
    if (*p < '0' || *p > '9') {
      env_bad = true;
      return;
    }
  errno = 0;
  char *end = NULL;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || !end || *end != '\0' || v > WORKSPACE_MAX) {
    env_bad = true;
    return;
  }
  // cuBLAS wants the workspace 256-byte aligned; a size in whole 256-byte
  // units keeps any use of its end aligned too.
  env_bytes = (size_t)((v + 255) / 256 * 256);
}

lt_status cuda_blas_workspace_bytes(const char *op, lt_device dev, size_t *bytes) {
  *bytes = 0;
  pthread_once(&env_once, read_workspace_env);
  if (env_bad)
    return lt_error(LT_ERR_ARG,
                    "cuda: %s: " WORKSPACE_ENV "=\"%s\" is not a byte count (a whole number "
                    "from 0 to %llu)",
                    op, env_text, WORKSPACE_MAX);
  if (env_set) {
    *bytes = env_bytes;
    return LT_OK;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev.index) != cudaSuccess) {
    (void)cudaGetLastError();
    major = 0; // unknown: the smaller size
  }
  *bytes = (size_t)(major >= 9 ? 32 : 8) << 20;
  return LT_OK;
}

// ---- one workspace per (device, stream), kept for the process ----
//
// Only lt's compute thread reaches this table (see cuda_blas.h), so it takes
// no lock; lt_alloc must not run under one anyway, since its out-of-memory
// hook runs a Lua collection whose finalizers may run more lt code.

struct blas_workspace {
  void *ptr;
  lt_block *block; // NULL until taken (and when the size is 0)
  size_t bytes;
  bool ready;
};

static blas_workspace workspaces[LT_MAX_DEVICES][CUDA_STREAM_SLOTS];

lt_status cuda_blas_workspace(const char *op, lt_device dev, cudaStream_t stream, void **ptr,
                              size_t *bytes) {
  *ptr = NULL;
  *bytes = 0;
  LT_TRY(check_slot(dev));
  // The block is tagged with dev's current stream (lt_alloc asks the raw
  // allocator), so only that stream's workspace can be taken here.
  const int slot = cuda_stream_slot(dev.index, stream);
  if (slot < 0 || stream != cuda_stream_of(dev.index))
    return lt_error(LT_ERR_INTERNAL,
                    "cuda: %s: cuBLAS workspace asked for stream 0x%llx, not the current stream "
                    "of cuda:%d",
                    op, (unsigned long long)(uintptr_t)stream, (int)dev.index);
  blas_workspace *w = &workspaces[dev.index][slot];
  if (!w->ready) {
    size_t want;
    LT_TRY(cuda_blas_workspace_bytes(op, dev, &want));
    void *p = NULL;
    lt_block *b = NULL;
    // Taken while stream is current on dev (the caller's guard and
    // cuda_stream()), so the allocator tags the block with it.
    if (want > 0) LT_TRY(lt_alloc(dev, want, LT_CAT_WORKSPACE, &p, &b));
    if (w->ready) {
      // The allocation's out-of-memory hook ran lt code that filled this
      // slot meanwhile: keep that one.
      if (b) lt_free(b);
    } else {
      w->ptr = p;
      w->block = b;
      w->bytes = want;
      w->ready = true;
    }
  }
  *ptr = w->ptr;
  *bytes = w->bytes;
  return LT_OK;
}

lt_status cuda_blas_session::begin(const char *op, lt_device dev) {
  cublasHandle_t h;
  LT_TRY(cuda_cublas_handle(dev, &h));
  const cudaStream_t s = cuda_stream();
  void *ws;
  size_t ws_bytes;
  LT_TRY(cuda_blas_workspace(op, dev, s, &ws, &ws_bytes));
  // cublasSetStream resets the handle's workspace to cuBLAS's own pool, so
  // the workspace is set after it, every time.
  cublasStatus_t st = cublasSetStream(h, s);
  if (st != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail(op, "cublasSetStream", st);
  st = cublasSetWorkspace(h, ws, ws_bytes);
  if (st != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail(op, "cublasSetWorkspace", st);
  handle = h;
  stream = s;
  return LT_OK;
}

bool cuda_blas_types(lt_dtype dt, cudaDataType_t *data, cublasComputeType_t *compute) {
  switch (dt) {
    case LT_FLOAT32:
      *data = CUDA_R_32F;
      *compute = lt_cuda_matmul_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      return true;
    case LT_FLOAT64: *data = CUDA_R_64F, *compute = CUBLAS_COMPUTE_64F; return true;
    case LT_FLOAT16: *data = CUDA_R_16F, *compute = CUBLAS_COMPUTE_32F; return true;
    case LT_BFLOAT16: *data = CUDA_R_16BF, *compute = CUBLAS_COMPUTE_32F; return true;
    default: return false;
  }
}

// Alpha and beta in the scale type cuBLAS expects for a compute type: double
// for CUBLAS_COMPUTE_64F, float for the float32 ones.
struct gemm_scalars {
  double d1, dbeta;
  float f1, fbeta;
  bool f64;
  gemm_scalars(cublasComputeType_t ct, double beta)
      : d1(1.0), dbeta(beta), f1(1.0f), fbeta((float)beta), f64(ct == CUBLAS_COMPUTE_64F) {}
  const void *one() const { return f64 ? (const void *)&d1 : (const void *)&f1; }
  const void *beta() const { return f64 ? (const void *)&dbeta : (const void *)&fbeta; }
};

lt_status cuda_gemm(const char *op, lt_device dev, lt_dtype dt, bool transa, bool transb,
                    int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                    int64_t ldb, double beta, void *c, int64_t ldc) {
  cudaDataType_t type;
  cublasComputeType_t ct;
  if (!cuda_blas_types(dt, &type, &ct))
    return lt_error(LT_ERR_INTERNAL, "cuda: %s: no GEMM for %s", op, lt_dtype_name(dt));
  if (m == 0 || n == 0) return LT_OK;
  const size_t es = lt_dtype_size(dt);
  if (k == 0) { // an empty sum: C = beta C, without asking cuBLAS about k = 0
    if (beta == 1.0) return LT_OK;
    if (beta != 0.0)
      return lt_error(LT_ERR_INTERNAL, "cuda: %s: a k = 0 GEMM takes beta 0 or 1", op);
    CUDA_TRY(op, cudaMemset2DAsync(c, (size_t)ldc * es, 0, (size_t)n * es, (size_t)m,
                                   cuda_stream()));
    return LT_OK;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
      ldc > INT_MAX)
    return lt_error(LT_ERR_ARG, "cuda: %s: a GEMM of %lld x %lld x %lld exceeds cuBLAS's int range",
                    op, (long long)m, (long long)n, (long long)k);
  cuda_blas_session blas;
  LT_TRY(blas.begin(op, dev));
  // Row-major C[m, n] is the column-major n x m matrix C^T = op(B)^T op(A)^T:
  // B goes first. A row-major matrix read column-major is its transpose, so
  // an untransposed row-major operand is passed with CUBLAS_OP_N and a
  // transposed one with CUBLAS_OP_T, with the row-major leading dimension.
  const gemm_scalars sc(ct, beta);
  const cublasStatus_t s =
      cublasGemmEx(blas.handle, transb ? CUBLAS_OP_T : CUBLAS_OP_N, transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                   (int)n, (int)m, (int)k, sc.one(), b, type, (int)ldb, a, type, (int)lda,
                   sc.beta(), c, type, (int)ldc, ct, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail(op, "cublasGemmEx", s);
  return LT_OK;
}

// ---- geometry ----

// How cuBLAS can read a rows x cols row-major-indexed matrix with element
// strides (rs, cs) as the column-major cols x rows matrix it needs: with
// CUBLAS_OP_N when rows are contiguous (ld = rs), CUBLAS_OP_T when columns are
// (ld = cs). Strides of size-1 dims do not matter, so they are chosen to meet
// cuBLAS's leading-dimension rules.
static bool gemm_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t *op,
                        int64_t *ld) {
  const int64_t min_ld_plain = cols > 1 ? cols : 1, min_ld_trans = rows > 1 ? rows : 1;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= min_ld_plain)) {
    *op = CUBLAS_OP_N;
    *ld = rows == 1 ? min_ld_plain : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= min_ld_trans)) {
    *op = CUBLAS_OP_T;
    *ld = cols == 1 ? min_ld_trans : cs;
    return true;
  }
  return false;
}

// Whether t's batch dims (all but the last two, walked over out's batch
// shape; broadcast ones at stride 0) step by one stride over the flattened
// batch index: then one strided-batched call covers them.
static bool batch_stride(const lt_tensor *t, const lt_tensor *out, int64_t *stride) {
  int64_t s = 0, expected = 0;
  bool first = true;
  for (int d = out->ndim - 3; d >= 0; d--) {
    if (out->shape[d] == 1) continue;
    const int64_t st = t->shape[d] == 1 ? 0 : t->stride[d];
    if (!first && st != expected) return false;
    if (first) s = st;
    first = false;
    expected = st * out->shape[d];
  }
  *stride = s;
  return true;
}

static int64_t batch_offset(const lt_tensor *t, const lt_tensor *out, int64_t e) {
  int64_t off = 0;
  for (int d = out->ndim - 3; d >= 0; d--) {
    const int64_t i = e % out->shape[d];
    e /= out->shape[d];
    if (t->shape[d] != 1) off += i * t->stride[d];
  }
  return off;
}

// ---- integers ----

struct int_mm {
  int64_t nbatch, n, k, m;
  int nbd;
  int64_t batch_shape[LT_MAX_DIMS];
  int64_t a_bs[LT_MAX_DIMS], b_bs[LT_MAX_DIMS]; // elements, 0 when broadcast
  int64_t a_rs, a_cs, b_rs, b_cs;
  int dtype;
  int64_t esize;
};

__global__ void int_matmul_kernel(int_mm g, const char *a, const char *b, char *out) {
  const int64_t total = g.nbatch * g.n * g.m;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)blockDim.x * gridDim.x) {
    const int64_t col = i % g.m, row = (i / g.m) % g.n;
    int64_t e = i / (g.m * g.n), aoff = 0, boff = 0;
    for (int d = g.nbd - 1; d >= 0; d--) {
      const int64_t j = e % g.batch_shape[d];
      e /= g.batch_shape[d];
      aoff += j * g.a_bs[d];
      boff += j * g.b_bs[d];
    }
    uint64_t acc = 0; // wraps, as on the CPU
    for (int64_t k = 0; k < g.k; k++) {
      const int64_t x = cuda_load<int64_t>(a + (aoff + row * g.a_rs + k * g.a_cs) * g.esize, g.dtype);
      const int64_t y = cuda_load<int64_t>(b + (boff + k * g.b_rs + col * g.b_cs) * g.esize, g.dtype);
      acc += (uint64_t)x * (uint64_t)y;
    }
    cuda_store<int64_t>(out + i * g.esize, g.dtype, (int64_t)acc);
  }
}

static lt_status int_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  const int nd = out->ndim;
  int_mm g;
  g.nbd = nd - 2;
  g.nbatch = 1;
  for (int d = 0; d < nd - 2; d++) {
    g.batch_shape[d] = out->shape[d];
    g.a_bs[d] = a->shape[d] == 1 ? 0 : a->stride[d];
    g.b_bs[d] = b->shape[d] == 1 ? 0 : b->stride[d];
    g.nbatch *= out->shape[d];
  }
  g.n = a->shape[nd - 2];
  g.k = a->shape[nd - 1];
  g.m = b->shape[nd - 1];
  g.a_rs = a->stride[nd - 2], g.a_cs = a->stride[nd - 1];
  g.b_rs = b->stride[nd - 2], g.b_cs = b->stride[nd - 1];
  g.dtype = (int)out->dtype;
  g.esize = (int64_t)lt_dtype_size(out->dtype);
  const int64_t total = g.nbatch * g.n * g.m;
  if (total == 0) return LT_OK;
  int_matmul_kernel<<<cuda_blocks_for(total), CUDA_THREADS, 0, cuda_stream()>>>(
      g, (const char *)cuda_bytes(a), (const char *)cuda_bytes(b), (char *)cuda_bytes(out));
  return cuda_check_launch("matmul", "int_matmul_kernel");
}

// ---- floating: cuBLAS ----

struct gemm_call {
  cublasOperation_t op_b, op_a;
  int m, n, k;
  int64_t ldb, lda, ldc;
};

static lt_status gemm_batched(cublasHandle_t h, lt_dtype dt, const gemm_call &c, const void *bp,
                              int64_t sb, const void *ap, int64_t sa, void *cp, int64_t sc,
                              int count) {
  // One call for every floating dtype: float32 in float32 (or TF32 when
  // lt_cuda_matmul_tf32()), float64 in float64, 16-bit inputs and output with
  // float32 accumulation (the tensor-core path).
  cudaDataType_t t;
  cublasComputeType_t ct;
  if (!cuda_blas_types(dt, &t, &ct))
    return lt_error(LT_ERR_INTERNAL, "cuda: matmul: no GEMM for %s", lt_dtype_name(dt));
  const gemm_scalars s(ct, 0.0);
  const cublasStatus_t st = cublasGemmStridedBatchedEx(
      h, c.op_b, c.op_a, c.m, c.n, c.k, s.one(), bp, t, (int)c.ldb, sb, ap, t, (int)c.lda, sa,
      s.beta(), cp, t, (int)c.ldc, sc, count, ct, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return cuda_cublas_fail("matmul", "cublasGemmStridedBatchedEx", st);
  return LT_OK;
}

lt_status cuda_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  cuda_device_guard guard(out->storage->device);
  if (!lt_dtype_is_floating(out->dtype)) return int_matmul(out, a, b);

  const int nd = out->ndim;
  const int64_t n = a->shape[nd - 2], k = a->shape[nd - 1], m = b->shape[nd - 1];
  int64_t nbatch = 1;
  for (int d = 0; d < nd - 2; d++) nbatch *= out->shape[d];
  if (nbatch == 0 || n == 0 || m == 0) return LT_OK;
  if (k == 0) { // an empty sum: zeros, without asking cuBLAS about k = 0
    CUDA_TRY("matmul", cudaMemsetAsync(cuda_bytes(out), 0, lt_nbytes(out), cuda_stream()));
    return LT_OK;
  }
  if (n > INT_MAX || m > INT_MAX || k > INT_MAX)
    return lt_error(LT_ERR_ARG, "cuda: matmul: a dimension of %lld x %lld @ %lld x %lld exceeds cuBLAS's int range",
                    (long long)n, (long long)k, (long long)k, (long long)m);

  gemm_call c;
  c.m = (int)m, c.n = (int)n, c.k = (int)k, c.ldc = m;
  // b (k x m) is read as the column-major m x k matrix b^T, a (n x k) as a^T.
  if (!gemm_layout(k, m, b->stride[nd - 2], b->stride[nd - 1], &c.op_b, &c.ldb) ||
      !gemm_layout(n, k, a->stride[nd - 2], a->stride[nd - 1], &c.op_a, &c.lda))
    return lt_error(LT_ERR_ARG, "cuda: matmul: operands must be row- or column-major matrices "
                                "(make them contiguous first)");
  if (c.lda > INT_MAX || c.ldb > INT_MAX)
    return lt_error(LT_ERR_ARG, "cuda: matmul: a leading dimension exceeds cuBLAS's int range");

  // One stream and workspace for every call below: they run in stream order.
  cuda_blas_session blas;
  LT_TRY(blas.begin("matmul", out->storage->device));
  const cublasHandle_t h = blas.handle;
  const size_t es = lt_dtype_size(out->dtype);
  const char *ap = (const char *)cuda_bytes(a), *bp = (const char *)cuda_bytes(b);
  char *cp = (char *)cuda_bytes(out);
  int64_t sa, sb;
  if (batch_stride(a, out, &sa) && batch_stride(b, out, &sb) && nbatch <= INT_MAX)
    return gemm_batched(h, out->dtype, c, bp, sb, ap, sa, cp, n * m, (int)nbatch);
  // Batch dims that do not collapse (a permuted batch): one call per entry.
  for (int64_t e = 0; e < nbatch; e++) {
    LT_TRY(gemm_batched(h, out->dtype, c, bp + batch_offset(b, out, e) * (int64_t)es, 0,
                        ap + batch_offset(a, out, e) * (int64_t)es, 0,
                        cp + e * n * m * (int64_t)es, 0, 1));
  }
  return LT_OK;
}
