/* cuBLAS and cuBLASLt are opened on first use (engine/cuda/cuda_blas_loader.cu).
 * Runs without a GPU: the libraries open and forward without a device, and
 * their status strings need none. Built twice (tests/CMakeLists.txt): with
 * the toolkit's sonames, where the first call opens them and forwards to
 * cuBLAS; and with sonames that do not exist (LT_TEST_MISSING_LIBS), where
 * every call fails cleanly and the error names the library. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda_blas.h"

static bool mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

int main(void) {
  CHECK(!mapped("libcublas"));  // not linked: nothing is open before the first call
  const char *ok_text = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  CHECK(ok_text != NULL);
  cublasLtMatmulDesc_t desc = NULL;
  const cublasStatus_t s = cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
#ifdef LT_TEST_MISSING_LIBS
  CHECK(!mapped("libcublas"));
  CHECK(strcmp(ok_text, "cuBLAS is not loaded") == 0);
  CHECK(s == CUBLAS_STATUS_NOT_INITIALIZED);
  const char *why = cuda_blas_load_error();
  CHECK(why != NULL && strstr(why, "cannot load libcublasLt.so.missing") != NULL);
  if (why) printf("load error: %s\n", why);
#else
  CHECK(mapped("libcublasLt"));
  CHECK(mapped("libcublas.so"));
  CHECK(strcmp(ok_text, "cuBLAS is not loaded") != 0);  // cuBLAS's own text
  CHECK(cuda_blas_load_error() == NULL);
  // A descriptor needs no device: the call reached cuBLASLt and succeeded.
  CHECK(s == CUBLAS_STATUS_SUCCESS);
  if (s == CUBLAS_STATUS_SUCCESS) CHECK(cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS);
#endif
  return check_summary("test_blas_loader");
}
