/* cuBLAS and cuBLASLt for the CUDA kernels that need a GEMM (matmul, linear):
 * one handle of each per device, one workspace per (device, stream) from
 * lt's caching allocator, and a row-major GEMM helper. Compiled by nvcc only
 * (C++); implemented in cuda_matmul.cu.
 *
 * Handles are made on first use with the device current (cuBLAS binds a
 * handle to the device current at cublasCreate) and live until the process
 * ends. They are used from lt's one compute thread (the Lua state), so the
 * stream and workspace set on a handle are not raced; creation alone takes
 * a lock. */
#ifndef LT_CUDA_BLAS_H
#define LT_CUDA_BLAS_H

#include <cublasLt.h>
#include <cublas_v2.h>

#include "cuda/cuda_internal.h"

/* Float32 GEMMs (matmul, linear) use TF32 tensor cores only when
 * lt_cuda_matmul_tf32() (lt/cuda.h) says so: off by default, as PyTorch's
 * allow_tf32 = False. */

/* The cuBLAS handle of dev (dev must be current: run under a
 * cuda_device_guard). It is shared by every stream of the device, so use it
 * only through cuda_blas_session, which binds it to the current stream and
 * that stream's workspace before each use. */
lt_status cuda_cublas_handle(lt_device dev, cublasHandle_t *out);
/* The cuBLASLt handle of dev (cuBLASLt takes the stream and workspace per
 * call, so this handle holds neither). */
lt_status cuda_cublaslt_handle(lt_device dev, cublasLtHandle_t *out);

/* "cuda: <op>: <call>: <cuBLAS's reason>" as an LT_ERR_DEVICE; the reason is
 * why the libraries could not be opened when they could not. */
lt_status cuda_cublas_fail(const char *op, const char *call, cublasStatus_t s);

/* Why cuBLAS or cuBLASLt could not be opened or lacks a function, or NULL
 * (cuda_blas_loader.cu: they are opened on first use, not linked). */
const char *cuda_blas_load_error(void);

/* The size of a cuBLAS workspace on dev: env LT_CUBLAS_WORKSPACE_BYTES (a
 * whole number of bytes, at most 4 GiB, rounded up to a multiple of 256; 0
 * runs cuBLAS without one), else 32 MiB on compute capability 9.x and later
 * (cuBLAS's recommendation for Hopper) and 8 MiB before. A malformed
 * LT_CUBLAS_WORKSPACE_BYTES is an LT_ERR_ARG naming the variable, op and the
 * value, from every GEMM, so that it cannot go unnoticed. cuBLAS documents
 * that a workspace under 16 KiB may make some routines fail with
 * CUBLAS_STATUS_ALLOC_FAILED; such a GEMM then fails with that status named
 * (the variable is for experiments). */
lt_status cuda_blas_workspace_bytes(const char *op, lt_device dev, size_t *bytes);

/* The workspace of (dev, stream) for cuBLAS and cuBLASLt: taken from the
 * caching allocator (category workspace) the first time a GEMM runs on that
 * stream, while stream is current (so the block is tagged with it), and kept
 * for the process as PyTorch keeps its cuBLAS workspaces: lt.memory.stats
 * shows them under by_category.workspace, and empty_cache does not release
 * them. Sharing one workspace between every cuBLAS and cuBLASLt call on a
 * stream is safe because those calls run one after another in stream order
 * (as PyTorch's unified cuBLAS/cuBLASLt workspace). An out-of-memory while
 * taking it is the op's error (LT_ERR_OOM, after the allocator's collect,
 * empty-cache and retry). *ptr is NULL and *bytes 0 when the size is 0.
 * stream must be dev's current stream (the block is tagged with it) and dev
 * must be current. */
lt_status cuda_blas_workspace(const char *op, lt_device dev, cudaStream_t stream, void **ptr,
                              size_t *bytes);

/* One or more classic-cuBLAS calls on the current stream: begin binds dev's
 * handle to the current stream (cublasSetStream) and then to that stream's
 * workspace (cublasSetWorkspace: cublasSetStream resets the workspace to
 * cuBLAS's own, so the order matters), every time, since the handle is
 * shared by all of the device's streams. Nothing to undo afterwards: the
 * workspace lives as long as the handle. */
struct cuda_blas_session {
  cublasHandle_t handle;
  cudaStream_t stream; /* the stream the calls are queued on */
  cuda_blas_session() : handle(NULL), stream(0) {}
  lt_status begin(const char *op, lt_device dev);
  cuda_blas_session(const cuda_blas_session &) = delete;
  cuda_blas_session &operator=(const cuda_blas_session &) = delete;
};

/* The cuBLAS element type and compute type of a floating dtype: float32 in
 * float32 (TF32 when lt_cuda_matmul_tf32()), float64 in float64, float16 and
 * bfloat16 in float32 (tensor cores). False for any other dtype. Alpha and
 * beta are double for float64 and float otherwise. */
bool cuda_blas_types(lt_dtype dt, cudaDataType_t *data, cublasComputeType_t *compute);

/* Row-major C[m, n] = op(A)[m, k] op(B)[k, n] + beta C with alpha = 1, on
 * the current stream, for float32/float64/float16/bfloat16 operands of one
 * dtype. op(A) = A^T when transa, i.e. A is stored [k, m]; likewise B. lda, ldb,
 * ldc are row-major leading dimensions (elements between rows, at least 1
 * and at least the stored row length). k = 0 gives beta C (beta 0 or 1
 * only); m = 0 or n = 0 does nothing. op names the lt op in messages. dev
 * must be current (the caller holds a cuda_device_guard). */
lt_status cuda_gemm(const char *op, lt_device dev, lt_dtype dt, bool transa, bool transb,
                    int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                    int64_t ldb, double beta, void *c, int64_t ldc);

#endif
