/* cuBLAS and cuBLASLt for the CUDA kernels that need a GEMM (matmul, linear):
 * one handle of each per device, a workspace from lt's caching allocator for
 * every call, and a row-major GEMM helper. Compiled by nvcc only (C++);
 * implemented in cuda_matmul.cu.
 *
 * Handles are made on first use with the device current (cuBLAS binds a
 * handle to the device current at cublasCreate) and live until the process
 * ends. They are used from lt's one compute thread (the Lua state), so the
 * workspace set on a handle is not raced; creation alone takes a lock. */
#ifndef LT_CUDA_BLAS_H
#define LT_CUDA_BLAS_H

#include <cublasLt.h>
#include <cublas_v2.h>

#include "cuda/cuda_internal.h"

/* Float32 GEMMs (matmul, linear) use TF32 tensor cores only when
 * lt_cuda_matmul_tf32() (lt/cuda.h) says so: off by default, as PyTorch's
 * allow_tf32 = False. */

/* The cuBLAS handle of dev (dev must be current: run under a
 * cuda_device_guard), bound to LT_CUDA_STREAM. Callers set a workspace before
 * each call through cuda_blas_session; a handle left without one runs
 * without a workspace. */
lt_status cuda_cublas_handle(lt_device dev, cublasHandle_t *out);
/* The cuBLASLt handle of dev (cuBLASLt takes the stream and workspace per
 * call, so this handle holds neither). */
lt_status cuda_cublaslt_handle(lt_device dev, cublasLtHandle_t *out);

/* "cuda: <op>: <call>: <cuBLAS's reason>" as an LT_ERR_DEVICE. */
lt_status cuda_cublas_fail(const char *op, const char *call, cublasStatus_t s);

/* The workspace size cuBLAS's documentation recommends (cublasSetWorkspace):
 * 32 MiB on Hopper (compute capability 9.x) and later, 4 MiB before. */
size_t cuda_blas_workspace_bytes(lt_device dev);

/* Takes a cuBLAS workspace from the caching allocator (category workspace,
 * so that lt's statistics count it). Out of memory is not an error here:
 * *bytes is then 0 and the call runs without a workspace (cuBLAS then leaves
 * out the algorithms that need one, e.g. some split-K ones). */
lt_status cuda_blas_workspace(lt_device dev, cuda_workspace *ws, size_t *bytes);

/* One or more classic-cuBLAS calls: the handle with a fresh workspace set.
 * The destructor detaches the workspace (cublasSetWorkspace(NULL, 0)) before
 * giving the block back, so that no later call on the handle can use memory
 * the allocator has handed on. Several calls in one session share the
 * workspace: they run in stream order. */
struct cuda_blas_session {
  cublasHandle_t handle;
  cuda_workspace ws;
  size_t ws_bytes;
  cuda_blas_session() : handle(NULL), ws_bytes(0) {}
  lt_status begin(const char *op, lt_device dev);
  ~cuda_blas_session() {
    if (handle) (void)cublasSetWorkspace(handle, NULL, 0);
  }
  cuda_blas_session(const cuda_blas_session &) = delete;
  cuda_blas_session &operator=(const cuda_blas_session &) = delete;
};

/* The cuBLAS element type and compute type of a floating dtype: float32 in
 * float32 (TF32 when lt_cuda_matmul_tf32()), float64 in float64, float16 and
 * bfloat16 in float32 (tensor cores). False for any other dtype. Alpha and
 * beta are double for float64 and float otherwise. */
bool cuda_blas_types(lt_dtype dt, cudaDataType_t *data, cublasComputeType_t *compute);

/* Row-major C[m, n] = op(A)[m, k] op(B)[k, n] + beta C with alpha = 1, on
 * dev's stream, for float32/float64/float16/bfloat16 operands of one dtype.
 * op(A) = A^T when transa, i.e. A is stored [k, m]; likewise B. lda, ldb,
 * ldc are row-major leading dimensions (elements between rows, at least 1
 * and at least the stored row length). k = 0 gives beta C (beta 0 or 1
 * only); m = 0 or n = 0 does nothing. op names the lt op in messages. dev
 * must be current (the caller holds a cuda_device_guard). */
lt_status cuda_gemm(const char *op, lt_device dev, lt_dtype dt, bool transa, bool transb,
                    int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                    int64_t ldb, double beta, void *c, int64_t ldc);

#endif
