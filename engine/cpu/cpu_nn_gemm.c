/* The GEMM under linear and conv2d: oneDNN's sgemm for float32 (as
 * cpu_matmul.c), OpenBLAS's dgemm for float64; for float16 and bfloat16,
 * sgemm on float32 tiles widened from them (cpu_nn_gemm_lowp). */
#include <cblas.h>
#include <dnnl.h>
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "lt/alloc.h"
#include "lt/threads.h"

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

NN_INLINE void widen_impl(float *dst, const char *src, lt_dtype dt, int64_t rows, int64_t cols,
                          int64_t ld) {
  for (int64_t r = 0; r < rows; r++)
    nn_load_run(dst + r * cols, src + (size_t)(r * ld) * 2, dt, 1, cols);
}

LT_CPU_CLONES static void widen_cloned(float *dst, const void *src, lt_dtype dt, int64_t rows,
                                       int64_t cols, int64_t ld) {
  if (dt == LT_BFLOAT16)
    widen_impl(dst, src, LT_BFLOAT16, rows, cols, ld);
  else
    widen_impl(dst, src, LT_FLOAT16, rows, cols, ld);
}

LT_CPU_CLONES static void narrow_cloned(void *dst, lt_dtype dt, const float *src, int64_t rows,
                                        int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; r++)
    nn_store_run((char *)dst + (size_t)(r * ld) * 2, dt, src + r * cols, cols);
}

/* The clones stay static (their ifuncs would be exported whatever the
 * visibility: a GCC limitation); other files call these. */
void cpu_nn_widen(float *dst, const void *src, lt_dtype dt, int64_t rows, int64_t cols,
                  int64_t ld) {
  widen_cloned(dst, src, dt, rows, cols, ld);
}

void cpu_nn_narrow(void *dst, lt_dtype dt, const float *src, int64_t rows, int64_t cols,
                   int64_t ld) {
  narrow_cloned(dst, dt, src, rows, cols, ld);
}

/* ---- 16-bit GEMM ----
 * C is cut into tiles of mb x nb, the sum into chunks of kb; per tile and
 * chunk the two operand tiles are widened into float32 and one sgemm adds
 * their product to a float32 accumulator, which is rounded once into C. The
 * tiles of all tasks together take at most a quarter of C's bytes, or 64 KiB
 * where that is still at most C's (one workspace, category workspace), so
 * that no float32 copy of an operand is made and a linear's weight gradient
 * (the step's peak in a small model under autocast) adds little beside it.
 * Tiles of 128 x 64 x 64 and up run as fast as whole-matrix ones (measured on
 * the benchmark's MLP and transformer block); the 64 KiB floor keeps a small
 * C's tiles that large. */

#define LOWP_TILE 256
#define LOWP_MIN_TILE 64
#define LOWP_BUDGET_SHARE 4
#define LOWP_BUDGET_FLOOR ((size_t)64 << 10)

/* The workspace bytes the tiles may take for a C of cbytes, in 512-byte
 * blocks (the allocator's rounding). */
static size_t lowp_budget(size_t cbytes) {
  const size_t floor_bytes = cbytes < LOWP_BUDGET_FLOOR ? cbytes : LOWP_BUDGET_FLOOR;
  size_t budget = cbytes / LOWP_BUDGET_SHARE;
  if (budget < floor_bytes) budget = floor_bytes;
  return budget < 512 ? 512 : (budget + 511) / 512 * 512;
}

typedef struct lowp_job {
  lt_dtype dt;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc, mb, nb, kb, tiles_n, tiles, tasks;
  const char *a, *b, *bias;
  char *c, *ws;
  size_t task_bytes;
  lt_status status;
} lowp_job;

static int64_t lmin(int64_t a, int64_t b) { return a < b ? a : b; }

static size_t lowp_task_bytes(int64_t mb, int64_t nb, int64_t kb) {
  return (size_t)(mb * kb + kb * nb + mb * nb) * sizeof(float);
}

/* op(X) rows [r0, r1), columns [c0, c1) of a stored matrix X (ld), widened in
 * X's own orientation: a pointer and its leading dimension for sgemm. */
static float *lowp_operand(float *dst, const char *x, int64_t ld, bool trans, lt_dtype dt,
                           int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t *ldo) {
  if (trans) { /* stored [cols of op, rows of op] */
    cpu_nn_widen(dst, x + (size_t)(c0 * ld + r0) * 2, dt, c1 - c0, r1 - r0, ld);
    *ldo = r1 - r0;
  } else {
    cpu_nn_widen(dst, x + (size_t)(r0 * ld + c0) * 2, dt, r1 - r0, c1 - c0, ld);
    *ldo = c1 - c0;
  }
  return dst;
}

static void lowp_range(void *ctx, int64_t t0, int64_t t1) {
  lowp_job *j = ctx;
  for (int64_t t = t0; t < t1; t++) {
    float *at = (float *)(void *)(j->ws + (size_t)t * j->task_bytes);
    float *bt = at + j->mb * j->kb, *acc = bt + j->kb * j->nb;
    for (int64_t tile = t * j->tiles / j->tasks; tile < (t + 1) * j->tiles / j->tasks; tile++) {
      const int64_t m0 = tile / j->tiles_n * j->mb, n0 = tile % j->tiles_n * j->nb;
      const int64_t m1 = lmin(m0 + j->mb, j->m), n1 = lmin(n0 + j->nb, j->n);
      for (int64_t k0 = 0; k0 < j->k; k0 += j->kb) {
        const int64_t k1 = lmin(k0 + j->kb, j->k);
        int64_t lda, ldb;
        lowp_operand(at, j->a, j->lda, j->ta, j->dt, m0, m1, k0, k1, &lda);
        lowp_operand(bt, j->b, j->ldb, j->tb, j->dt, k0, k1, n0, n1, &ldb);
        dnnl_status_t st = dnnl_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', m1 - m0, n1 - n0,
                                      k1 - k0, 1.0f, at, lda, bt, ldb, k0 > 0 ? 1.0f : 0.0f,
                                      acc, n1 - n0);
        if (st != dnnl_success) {
#pragma omp critical(lt_lowp_status)
          if (j->status == LT_OK)
            j->status = lt_error(LT_ERR_INTERNAL,
                                 "nn: dnnl_sgemm failed (status %d) for %lld x %lld x %lld",
                                 (int)st, (long long)(m1 - m0), (long long)(n1 - n0),
                                 (long long)(k1 - k0));
        }
      }
      if (j->k == 0) memset(acc, 0, (size_t)((m1 - m0) * (n1 - n0)) * sizeof(float));
      if (j->bias)
        for (int64_t i = 0; i < m1 - m0; i++)
          for (int64_t q = n0; q < n1; q++) acc[i * (n1 - n0) + q - n0] += (float)nn_ld_dt(j->bias, q, j->dt);
      cpu_nn_narrow(j->c + (size_t)(m0 * j->ldc + n0) * 2, j->dt, acc, m1 - m0, n1 - n0, j->ldc);
    }
  }
}

lt_status cpu_nn_gemm_lowp(lt_dtype dt, lt_device dev, bool ta, bool tb, int64_t m, int64_t n,
                           int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb,
                           const void *bias, void *c, int64_t ldc) {
  if (m == 0 || n == 0) return LT_OK;
  lowp_job j = {.dt = dt, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                .ldc = ldc, .a = a, .b = b, .bias = bias, .c = c, .status = LT_OK};
  const size_t budget = lowp_budget((size_t)(m * n) * 2);
  int64_t mb = lmin(m, LOWP_TILE), nb = lmin(n, LOWP_TILE), kb = lmin(k > 0 ? k : 1, LOWP_TILE);
  int64_t tiles = ((m + mb - 1) / mb) * ((n + nb - 1) / nb);
  int64_t tasks = lmin(tiles, lt_get_num_threads());
  /* Halve the largest tile side until the tasks' tiles fit; below
   * LOWP_MIN_TILE fewer tasks run first. */
  while ((size_t)tasks * lowp_task_bytes(mb, nb, kb) > budget) {
    const int64_t big = mb > nb ? (mb > kb ? mb : kb) : (nb > kb ? nb : kb);
    if (tasks > 1 && big <= LOWP_MIN_TILE) {
      tasks--;
    } else if (big == 1) {
      break; /* 12 bytes: fits any 512-byte budget */
    } else if (big == kb) {
      kb = (kb + 1) / 2;
    } else if (big == mb) {
      mb = (mb + 1) / 2;
    } else {
      nb = (nb + 1) / 2;
    }
    tiles = ((m + mb - 1) / mb) * ((n + nb - 1) / nb);
    tasks = lmin(tasks, tiles);
  }
  j.mb = mb;
  j.nb = nb;
  j.kb = kb;
  j.tiles_n = (n + nb - 1) / nb;
  j.tiles = tiles;
  j.tasks = tasks;
  j.task_bytes = lowp_task_bytes(mb, nb, kb);
  void *ws;
  lt_block *block;
  LT_TRY(lt_alloc(dev, (size_t)tasks * j.task_bytes, LT_CAT_WORKSPACE, &ws, &block));
  if (lt_estimating()) { /* the workspace was all an estimate needs */
    lt_free(block);
    return LT_OK;
  }
  j.ws = ws;
  lt_parallel_for(tasks, 1, lowp_range, &j);
  lt_free(block);
  return j.status;
}
