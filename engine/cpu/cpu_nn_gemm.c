/* The GEMM under linear and conv2d: oneDNN's sgemm for float32 (as
 * cpu_matmul.c), OpenBLAS's dgemm for float64. */
#include <cblas.h>
#include <dnnl.h>
#include <string.h>

#include "cpu/cpu_nn.h"

lt_status cpu_nn_gemm(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                      int64_t ldc) {
  if (m == 0 || n == 0) return LT_OK;
  if (k == 0) { /* an empty sum: C = beta C (BLAS may reject the degenerate call) */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        char *row = (char *)c + (size_t)(i * ldc) * (f64 ? sizeof(double) : sizeof(float));
        nn_st(row, j, f64, beta == 0.0 ? 0.0 : beta * nn_ld(row, j, f64));
      }
    return LT_OK;
  }
  if (f64) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta,
                c, (blasint)ldc);
    return LT_OK;
  }
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, (float)alpha, a, lda, b,
                                ldb, (float)beta, c, ldc);
  if (st != dnnl_success)
    return lt_error(LT_ERR_INTERNAL, "nn: dnnl_sgemm failed (status %d) for %lld x %lld x %lld",
                    (int)st, (long long)m, (long long)n, (long long)k);
  return LT_OK;
}

void cpu_nn_zero(void *p, int64_t n, bool f64) {
  if (n > 0) memset(p, 0, (size_t)n * (f64 ? sizeof(double) : sizeof(float)));
}
