// cuBLAS and cuBLASLt are opened on first use (dlopen), not linked.
//
// Why: loading libcublasLt runs initialisers that make about 150 MiB of the
// process resident before main (measured on CUDA 13: a C program that is
// linked with -lcublasLt and does nothing has an RSS of 153 MB, against
// 1.2 MB unlinked). A CUDA build of lt that trains on the CPU, or only asks
// lt.cuda.is_available(), would pay that for nothing. PyTorch pays it: it
// links them. The rest of the CUDA runtime (cudart, cuDNN) is small and
// stays linked.
//
// How: the functions below carry cuBLAS's own names and prototypes (from its
// headers, so a mismatch does not compile), and the kernels call cuBLAS as
// usual. Each one, on its first call, opens the libraries and looks up the
// real symbol, then forwards to it. The executable does not export these
// names, so a library that links cuBLAS itself (a cuDNN engine) gets the real
// ones. When a library cannot be opened every call returns
// CUBLAS_STATUS_NOT_INITIALIZED, and cuda_blas_load_error() says why for the
// first error message (cuda_matmul.cu).
#include <dlfcn.h>
#include <mutex>
#include <stdio.h>

#include "cuda/cuda_blas.h"

#ifndef LT_CUBLAS_SONAME
#define LT_CUBLAS_SONAME "libcublas.so"
#endif
#ifndef LT_CUBLASLT_SONAME
#define LT_CUBLASLT_SONAME "libcublasLt.so"
#endif
#ifndef LT_CUDA_LIBDIR
#define LT_CUDA_LIBDIR ""
#endif

namespace {

struct blas_libs {
  void *blas = nullptr, *lt = nullptr;
  char error[512] = "";
};

blas_libs libs;
std::once_flag libs_once;

// The soname through the loader's search path (LD_LIBRARY_PATH, lt's
// RUNPATH, the system's), then the toolkit lt was built against.
void *open_lib(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h || !LT_CUDA_LIBDIR[0]) return h;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", LT_CUDA_LIBDIR, soname);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

void open_libs() {
  // cuBLAS needs cuBLASLt: open that first, so a failure names it.
  libs.lt = open_lib(LT_CUBLASLT_SONAME);
  if (libs.lt) libs.blas = open_lib(LT_CUBLAS_SONAME);
  if (!libs.lt || !libs.blas) {
    const char *why = dlerror();
    snprintf(libs.error, sizeof libs.error, "cannot load %s: %s",
             libs.lt ? LT_CUBLAS_SONAME : LT_CUBLASLT_SONAME, why ? why : "unknown error");
  }
}

void *symbol(bool lt, const char *name) {
  std::call_once(libs_once, open_libs);
  void *h = lt ? libs.lt : libs.blas;
  if (!h) return nullptr;
  void *fn = dlsym(h, name);
  if (!fn) // the library is older than the headers lt was built with
    snprintf(libs.error, sizeof libs.error, "%s has no symbol %s",
             lt ? LT_CUBLASLT_SONAME : LT_CUBLAS_SONAME, name);
  return fn;
}

}  // namespace

const char *cuda_blas_load_error(void) { return libs.error[0] ? libs.error : nullptr; }

// The header's name for a function may be a macro (cublasCreate is
// cublasCreate_v2): expand it before making the symbol's string.
#define LT_STR_(x) #x
#define LT_STR(x) LT_STR_(x)

// One forwarding function. A function-local static is initialised once, in a
// thread-safe way (C++11), so the lookup happens on the first call only.
#define LT_FORWARD(lt, ret, fail, name, params, args)                       \
  extern "C" __attribute__((visibility("hidden"))) ret name params {         \
    typedef ret(*fn_type) params;                                           \
    static fn_type fn = reinterpret_cast<fn_type>(symbol(lt, LT_STR(name))); \
    if (!fn) return fail;                                                   \
    return fn args;                                                         \
  }

#define NOT_LOADED CUBLAS_STATUS_NOT_INITIALIZED

LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasCreate, (cublasHandle_t * h), (h))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasDestroy, (cublasHandle_t h), (h))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasSetStream, (cublasHandle_t h, cudaStream_t s),
           (h, s))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasSetWorkspace,
           (cublasHandle_t h, void *workspace, size_t bytes), (h, workspace, bytes))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasSetMathMode, (cublasHandle_t h, cublasMath_t m),
           (h, m))
LT_FORWARD(false, const char *, "cuBLAS is not loaded", cublasGetStatusString, (cublasStatus_t s),
           (s))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasGemmEx,
           (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
            const void *alpha, const void *a, cudaDataType at, int lda, const void *b,
            cudaDataType bt, int ldb, const void *beta, void *c, cudaDataType ct, int ldc,
            cublasComputeType_t compute, cublasGemmAlgo_t algo),
           (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo))
LT_FORWARD(false, cublasStatus_t, NOT_LOADED, cublasGemmStridedBatchedEx,
           (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
            const void *alpha, const void *a, cudaDataType at, int lda, long long sa,
            const void *b, cudaDataType bt, int ldb, long long sb, const void *beta, void *c,
            cudaDataType ct, int ldc, long long sc, int batch, cublasComputeType_t compute,
            cublasGemmAlgo_t algo),
           (h, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c, ct, ldc, sc,
            batch, compute, algo))

LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtCreate, (cublasLtHandle_t * h), (h))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulDescCreate,
           (cublasLtMatmulDesc_t * d, cublasComputeType_t compute, cudaDataType_t scale),
           (d, compute, scale))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d),
           (d))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulDescSetAttribute,
           (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *buf,
            size_t size),
           (d, attr, buf, size))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatrixLayoutCreate,
           (cublasLtMatrixLayout_t * l, cudaDataType type, uint64_t rows, uint64_t cols,
            int64_t ld),
           (l, type, rows, cols, ld))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatrixLayoutDestroy,
           (cublasLtMatrixLayout_t l), (l))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulPreferenceCreate,
           (cublasLtMatmulPreference_t * p), (p))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulPreferenceDestroy,
           (cublasLtMatmulPreference_t p), (p))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulPreferenceSetAttribute,
           (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
            const void *buf, size_t size),
           (p, attr, buf, size))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmulAlgoGetHeuristic,
           (cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
            cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t out,
            cublasLtMatmulPreference_t p, int requested, cublasLtMatmulHeuristicResult_t results[],
            int *returned),
           (h, d, a, b, c, out, p, requested, results, returned))
LT_FORWARD(true, cublasStatus_t, NOT_LOADED, cublasLtMatmul,
           (cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *a,
            cublasLtMatrixLayout_t al, const void *b, cublasLtMatrixLayout_t bl, const void *beta,
            const void *c, cublasLtMatrixLayout_t cl, void *out, cublasLtMatrixLayout_t ol,
            const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
            cudaStream_t stream),
           (h, d, alpha, a, al, b, bl, beta, c, cl, out, ol, algo, workspace, workspace_bytes,
            stream))
