/* Batched matrix product. float32 goes to oneDNN's dnnl_sgemm (measured
 * faster than OpenBLAS on our machines: README, "Choice of BLAS"), float64 to
 * OpenBLAS's cblas_dgemm,
 * one call per batch entry, or a single call when b is shared by the whole
 * batch and a's rows are evenly spaced (a linear layer on a 3-D input);
 * transposed matrices are passed with BLAS's transpose flag instead of being
 * copied. Integers use a plain triple loop accumulating in int64 (wrapping). */
#include <cblas.h>
#include <dnnl.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_kernels.h"
#include "lt/threads.h"

/* How BLAS (row-major) can read a rows x cols matrix with element strides
 * (rs, cs): as is, transposed, or not at all. Strides of size-1 dims do not
 * matter, so they are chosen to satisfy BLAS's leading-dimension rules. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                        enum CBLAS_TRANSPOSE *trans, int64_t *ld) {
  const int64_t min_ld_plain = cols > 1 ? cols : 1, min_ld_trans = rows > 1 ? rows : 1;
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= min_ld_plain)) {
    *trans = CblasNoTrans;
    *ld = rows == 1 ? min_ld_plain : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= min_ld_trans)) {
    *trans = CblasTrans;
    *ld = cols == 1 ? min_ld_trans : cs;
    return true;
  }
  return false;
}

typedef struct mm_geom {
  int nbatch_dims;
  int64_t batch_shape[LT_MAX_DIMS];
  int64_t a_bstride[LT_MAX_DIMS], b_bstride[LT_MAX_DIMS]; /* elements */
  int64_t nbatch, n, k, m;
} mm_geom;

static void mm_geom_init(mm_geom *g, const lt_tensor *out, const lt_tensor *a,
                         const lt_tensor *b) {
  const int nd = out->ndim;
  g->nbatch_dims = nd - 2;
  g->nbatch = 1;
  for (int d = 0; d < nd - 2; d++) {
    g->batch_shape[d] = out->shape[d];
    g->a_bstride[d] = a->shape[d] == 1 ? 0 : a->stride[d];
    g->b_bstride[d] = b->shape[d] == 1 ? 0 : b->stride[d];
    g->nbatch *= out->shape[d];
  }
  g->n = a->shape[nd - 2];
  g->k = a->shape[nd - 1];
  g->m = b->shape[nd - 1];
}

/* Element offsets of batch entry e in a and b. */
static void batch_offsets(const mm_geom *g, int64_t e, int64_t *aoff, int64_t *boff) {
  *aoff = *boff = 0;
  for (int d = g->nbatch_dims - 1; d >= 0; d--) {
    int64_t i = e % g->batch_shape[d];
    e /= g->batch_shape[d];
    *aoff += i * g->a_bstride[d];
    *boff += i * g->b_bstride[d];
  }
}

/* Whether the whole batch is one tall matrix: b shared by every entry and
 * a's rows (over batch and row dims) evenly spaced at *row_stride, as for a
 * linear layer applied to a 3-D input. */
static bool fold_rows(const mm_geom *g, const lt_tensor *a, int64_t *row_stride) {
  const int nd = a->ndim;
  const int64_t min_ld = g->k > 1 ? g->k : 1;
  if (a->stride[nd - 1] != 1 && g->k > 1) return false;
  bool have = false;
  int64_t s = min_ld, expected = 0;
  for (int d = nd - 2; d >= 0; d--) { /* the row dim, then batch dims inside out */
    const bool row_dim = d == nd - 2;
    const int64_t size = row_dim ? g->n : g->batch_shape[d];
    const int64_t stride = row_dim ? a->stride[d] : g->a_bstride[d];
    if (size == 1) continue;
    if (!row_dim && g->b_bstride[d] != 0) return false;
    if (!have) {
      s = stride;
      expected = stride * size;
      have = true;
    } else if (stride != expected) {
      return false;
    } else {
      expected *= size;
    }
  }
  if (s < min_ld) return false;
  *row_stride = s;
  return true;
}

static lt_status gemm(lt_dtype dt, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int64_t n,
                 int64_t m, int64_t k, const char *a, int64_t lda, const char *b, int64_t ldb,
                 char *c, int64_t ldc) {
  if (dt == LT_FLOAT32) {
    /* dnnl_sgemm is row-major like the CBLAS call. */
    dnnl_status_t st = dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', n, m,
                                  k, 1.0f, (const float *)(const void *)a, lda,
                                  (const float *)(const void *)b, ldb, 0.0f, (float *)(void *)c, ldc);
    if (st != dnnl_success)
      return lt_error(LT_ERR_INTERNAL, "matmul: dnnl_sgemm failed (status %d) for %lld x %lld x %lld",
                      (int)st, (long long)n, (long long)m, (long long)k);
    return LT_OK;
  }
  cblas_dgemm(CblasRowMajor, ta, tb, (blasint)n, (blasint)m, (blasint)k, 1.0,
              (const double *)(const void *)a, (blasint)lda, (const double *)(const void *)b,
              (blasint)ldb, 0.0, (double *)(void *)c, (blasint)ldc);
  return LT_OK;
}

static lt_status matmul_blas(const mm_geom *g, lt_tensor *out, const lt_tensor *a,
                             const lt_tensor *b) {
  const int nd = out->ndim;
  const int64_t es = (int64_t)lt_dtype_size(out->dtype);
  enum CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  if (!blas_layout(g->n, g->k, a->stride[nd - 2], a->stride[nd - 1], &ta, &lda) ||
      !blas_layout(g->k, g->m, b->stride[nd - 2], b->stride[nd - 1], &tb, &ldb))
    return lt_error(LT_ERR_INTERNAL, "matmul: operand matrices must be row- or column-major");
  const char *ad = lt_data(a), *bd = lt_data(b);
  char *od = lt_data(out);
  const int64_t ldc = g->m > 1 ? g->m : 1;

  int64_t row_stride;
  if (g->nbatch > 1 && fold_rows(g, a, &row_stride)) {
    int64_t aoff, boff;
    batch_offsets(g, 0, &aoff, &boff);
    return gemm(out->dtype, CblasNoTrans, tb, g->nbatch * g->n, g->m, g->k, ad, row_stride,
                bd + boff * es, ldb, od, ldc);
  }
  for (int64_t e = 0; e < g->nbatch; e++) {
    int64_t aoff, boff;
    batch_offsets(g, e, &aoff, &boff);
    LT_TRY(gemm(out->dtype, ta, tb, g->n, g->m, g->k, ad + aoff * es, lda, bd + boff * es, ldb,
                od + e * g->n * g->m * es, ldc));
  }
  return LT_OK;
}

/* Integers: c[i][j] = sum_p a[i][p] * b[p][j], wrapping like the dtype. */
typedef struct int_mm_job {
  const mm_geom *g;
  const lt_tensor *a, *b;
  lt_tensor *out;
} int_mm_job;

static void int_matmul_rows(void *vjob, int64_t begin, int64_t end) {
  const int_mm_job *job = vjob;
  const mm_geom *g = job->g;
  const lt_tensor *a = job->a, *b = job->b;
  const int nd = a->ndim;
  const lt_dtype dt = a->dtype;
  const int64_t es = (int64_t)lt_dtype_size(dt);
  const char *ad = lt_data(a), *bd = lt_data(b);
  char *od = lt_data(job->out);
  for (int64_t r = begin; r < end; r++) { /* r runs over batch entries x rows */
    const int64_t e = r / g->n, i = r % g->n;
    int64_t aoff, boff;
    batch_offsets(g, e, &aoff, &boff);
    const char *arow = ad + (aoff + i * a->stride[nd - 2]) * es;
    for (int64_t j = 0; j < g->m; j++) {
      uint64_t acc = 0;
      for (int64_t p = 0; p < g->k; p++) {
        int64_t x = lt_load_int64(arow + p * a->stride[nd - 1] * es, dt);
        int64_t y = lt_load_int64(bd + (boff + p * b->stride[nd - 2] + j * b->stride[nd - 1]) * es, dt);
        acc += (uint64_t)x * (uint64_t)y;
      }
      lt_store_int64(od + (r * g->m + j) * es, dt, (int64_t)acc);
    }
  }
}

lt_status cpu_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  mm_geom g;
  mm_geom_init(&g, out, a, b);
  if (g.nbatch == 0 || g.n == 0 || g.m == 0) return LT_OK;
  if (g.k == 0) return cpu_fill(out, 0.0); /* an empty sum */
  if (out->dtype == LT_FLOAT32 || out->dtype == LT_FLOAT64) return matmul_blas(&g, out, a, b);
  int_mm_job job = {&g, a, b, out};
  int64_t grain = 32768 / (g.k * g.m > 0 ? g.k * g.m : 1);
  lt_parallel_for(g.nbatch * g.n, grain > 0 ? grain : 1, int_matmul_rows, &job);
  return LT_OK;
}
