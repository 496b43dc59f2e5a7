// Batched matrix product: floating dtypes through cuBLAS (one strided-batched
// call when each operand's batch dims collapse to one stride, else one call
// per batch entry), float16/bfloat16 through cublasGemmStridedBatchedEx with
// float32 accumulation (tensor cores), integers through a plain kernel
// accumulating in wrapping int64 (cuBLAS has no int64 GEMM).
//
// cuBLAS is column-major and lt row-major: a row-major n x m matrix is the
// column-major m x n one, so out^T = b^T a^T is computed with b first.
#include <cublas_v2.h>
#include <limits.h>
#include <pthread.h>

#include "cuda/cuda_convert.cuh"
#include "cuda/cuda_kernels.h"

// ---- one cuBLAS handle per device, made on first use ----

static cublasHandle_t handles[LT_MAX_DEVICES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static lt_status cublas_fail(const char *call, cublasStatus_t s) {
  return lt_error(LT_ERR_DEVICE, "cuda: matmul: %s: %s", call, cublasGetStatusString(s));
}

// Called with dev already current (the handle binds to the current device).
static lt_status handle_for(lt_device dev, cublasHandle_t *out) {
  pthread_mutex_lock(&handles_lock);
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (!handles[dev.index]) s = cublasCreate(&handles[dev.index]);
  *out = handles[dev.index];
  pthread_mutex_unlock(&handles_lock);
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail("cublasCreate", s);
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
  int_matmul_kernel<<<cuda_blocks_for(total), CUDA_THREADS>>>(g, (const char *)cuda_bytes(a),
                                                              (const char *)cuda_bytes(b),
                                                              (char *)cuda_bytes(out));
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
  cublasStatus_t s;
  const char *call;
  if (dt == LT_FLOAT32) {
    const float one = 1.0f, zero = 0.0f;
    call = "cublasSgemmStridedBatched";
    s = cublasSgemmStridedBatched(h, c.op_b, c.op_a, c.m, c.n, c.k, &one, (const float *)bp,
                                  (int)c.ldb, sb, (const float *)ap, (int)c.lda, sa, &zero,
                                  (float *)cp, (int)c.ldc, sc, count);
  } else if (dt == LT_FLOAT64) {
    const double one = 1.0, zero = 0.0;
    call = "cublasDgemmStridedBatched";
    s = cublasDgemmStridedBatched(h, c.op_b, c.op_a, c.m, c.n, c.k, &one, (const double *)bp,
                                  (int)c.ldb, sb, (const double *)ap, (int)c.lda, sa, &zero,
                                  (double *)cp, (int)c.ldc, sc, count);
  } else {
    // 16-bit inputs and output, float32 accumulation: the tensor-core path.
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = dt == LT_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
    call = "cublasGemmStridedBatchedEx";
    s = cublasGemmStridedBatchedEx(h, c.op_b, c.op_a, c.m, c.n, c.k, &one, bp, t, (int)c.ldb, sb,
                                   ap, t, (int)c.lda, sa, &zero, cp, t, (int)c.ldc, sc, count,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) return cublas_fail(call, s);
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
    CUDA_TRY("matmul", cudaMemsetAsync(cuda_bytes(out), 0, lt_nbytes(out)));
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

  cublasHandle_t h;
  LT_TRY(handle_for(out->storage->device, &h));
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
