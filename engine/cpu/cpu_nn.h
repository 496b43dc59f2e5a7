/* Shared pieces of the CPU nn kernels (cpu_nn_*.c).
 *
 * One body per kernel serves float32 and float64: kernels are written as
 * always-inline functions over values read and written through nn_ld/nn_st
 * with a bool f64 argument, and called once with each constant, so the
 * compiler emits a specialised loop for each dtype without a macro template.
 * Reductions accumulate in double, which keeps float32 results within
 * rounding of PyTorch's and makes them independent of the thread count. */
#ifndef LT_CPU_NN_H
#define LT_CPU_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/nn_backend.h"

#define NN_INLINE static inline __attribute__((always_inline))

NN_INLINE double nn_ld(const void *p, int64_t i, bool f64) {
  return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

NN_INLINE void nn_st(void *p, int64_t i, bool f64, double v) {
  if (f64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}

static inline bool nn_is_f64(const lt_tensor *t) { return t->dtype == LT_FLOAT64; }

/* Elements below which a loop stays on one thread. */
#define NN_GRAIN 32768

/* Blocks a reduction over many rows is split into: each block sums its rows
 * in order and the blocks are added in order, so the result does not depend
 * on how many threads ran them. */
#define NN_SUM_BLOCKS 64

/* Row-major C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C; op transposes
 * when ta/tb is set. float32 goes to oneDNN's dnnl_sgemm, float64 to
 * OpenBLAS's cblas_dgemm. */
lt_status cpu_nn_gemm(bool f64, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c,
                      int64_t ldc);

/* The same for float16 / bfloat16 operands (dt) and C: C = op(A) op(B)
 * (+ bias[j] on every row when bias is given, dt too), summed in float32
 * and rounded once; scratch from dev's allocator, at most C's bytes. */
lt_status cpu_nn_gemm_lowp(lt_dtype dt, lt_device dev, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                           const void *bias, void *c, int64_t ldc);

/* Zeroes n elements of a float32/float64 buffer. */
void cpu_nn_zero(void *p, int64_t n, bool f64);

#endif
