/* linear: y = x W^T + b as one GEMM that reads W transposed through the
 * GEMM's transpose flag (no copy) and adds the bias in the same pass: the
 * output rows start as copies of b and the GEMM accumulates into them
 * (beta = 1). Backward is two GEMMs and a column sum. float16 and
 * bfloat16 go through cpu_nn_gemm_lowp: float32 tiles, results rounded once,
 * the bias added in float32 before the rounding. */
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "lt/alloc.h"
#include "lt/threads.h"

lt_status cpu_nn_linear(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                        const lt_tensor *b) {
  const bool f64 = nn_is_f64(x);
  const int64_t m = x->shape[0], k = x->shape[1], o = w->shape[0];
  const size_t es = lt_dtype_size(x->dtype);
  char *od = lt_data(out);
  const int64_t ldk = k > 1 ? k : 1, ldo = o > 1 ? o : 1;
  if (nn_is_lowp(x->dtype))
    return cpu_nn_gemm_lowp(x->dtype, x->storage->device, false, true, m, o, k, lt_data(x), ldk,
                            lt_data(w), ldk, b ? lt_data(b) : NULL, od, ldo);
  if (lt_estimating()) return LT_OK; /* no scratch: nothing to plan */
  if (b) {
    const void *bd = lt_data(b);
    for (int64_t i = 0; i < m; i++) memcpy(od + (size_t)(i * o) * es, bd, (size_t)o * es);
  }
  return cpu_nn_gemm(f64, false, true, m, o, k, 1.0, lt_data(x), ldk, lt_data(w), ldk,
                     b ? 1.0 : 0.0, od, ldo);
}

/* Column sums of a [rows, cols] matrix, split by column blocks so that every
 * column is summed by one thread in row order; with add, added to what dst
 * holds (the sum rounded first, as a separate add would). */
typedef struct colsum_job {
  const void *src;
  void *dst;
  int64_t rows, cols;
  lt_dtype dt;
  bool add;
} colsum_job;

#define COLSUM_BLOCK 64

NN_INLINE void colsum_impl(const colsum_job *j, int64_t b0, int64_t b1, lt_dtype dt) {
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t c0 = blk * COLSUM_BLOCK;
    const int64_t c1 = c0 + COLSUM_BLOCK < j->cols ? c0 + COLSUM_BLOCK : j->cols;
    double acc[COLSUM_BLOCK] = {0};
    for (int64_t r = 0; r < j->rows; r++)
      for (int64_t c = c0; c < c1; c++) acc[c - c0] += nn_ld_dt(j->src, r * j->cols + c, dt);
    if (j->add) /* the sum rounded to dt first, then the add rounded: dst += sum */
      for (int64_t c = c0; c < c1; c++) {
        const double prior = nn_ld_dt(j->dst, c, dt);
        nn_st_dt(j->dst, c, dt, acc[c - c0]);
        const double sum = nn_ld_dt(j->dst, c, dt);
        nn_st_dt(j->dst, c, dt, prior + sum);
      }
    else
      for (int64_t c = c0; c < c1; c++) nn_st_dt(j->dst, c, dt, acc[c - c0]);
  }
}

LT_CPU_CLONES static void colsum_range(void *ctx, int64_t b0, int64_t b1) {
  const colsum_job *j = ctx;
  switch (j->dt) {
    case LT_FLOAT64: colsum_impl(j, b0, b1, LT_FLOAT64); break;
    case LT_FLOAT16: colsum_impl(j, b0, b1, LT_FLOAT16); break;
    case LT_BFLOAT16: colsum_impl(j, b0, b1, LT_BFLOAT16); break;
    default: colsum_impl(j, b0, b1, LT_FLOAT32); break;
  }
}

static void cpu_nn_column_sums(void *dst, const void *src, int64_t rows, int64_t cols,
                               lt_dtype dt, bool add) {
  colsum_job j = {src, dst, rows, cols, dt, add};
  const int64_t blocks = (cols + COLSUM_BLOCK - 1) / COLSUM_BLOCK;
  const int64_t per_block = rows * COLSUM_BLOCK;
  lt_parallel_for(blocks, NN_GRAIN / (per_block > 0 ? per_block : 1) + 1, colsum_range, &j);
}

lt_status cpu_nn_linear_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                 const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                 bool add_gw, bool add_gb) {
  const bool f64 = nn_is_f64(go);
  const int64_t m = x->shape[0], k = x->shape[1], o = w->shape[0];
  const int64_t ldk = k > 1 ? k : 1, ldo = o > 1 ? o : 1;
  if (nn_is_lowp(go->dtype)) {
    if (add_gw || add_gb)
      return lt_error(LT_ERR_INTERNAL, "linear_backward: no accumulating form for %s",
                      lt_dtype_name(go->dtype));
    const lt_dtype dt = go->dtype;
    const lt_device dev = go->storage->device;
    if (gx)
      LT_TRY(cpu_nn_gemm_lowp(dt, dev, false, false, m, k, o, lt_data(go), ldo, lt_data(w), ldk,
                              NULL, lt_data(gx), ldk));
    if (gw)
      LT_TRY(cpu_nn_gemm_lowp(dt, dev, true, false, o, k, m, lt_data(go), ldo, lt_data(x), ldk,
                              NULL, lt_data(gw), ldk));
    if (gb && !lt_estimating()) cpu_nn_column_sums(lt_data(gb), lt_data(go), m, o, dt, false);
    return LT_OK;
  }
  if (lt_estimating()) return LT_OK;
  if (gx) /* [m, k] = go [m, o] W [o, k] */
    LT_TRY(cpu_nn_gemm(f64, false, false, m, k, o, 1.0, lt_data(go), ldo, lt_data(w), ldk, 0.0,
                       lt_data(gx), ldk));
  if (gw) /* [o, k] = go^T [o, m] x [m, k] (+ gw) */
    LT_TRY(cpu_nn_gemm(f64, true, false, o, k, m, 1.0, lt_data(go), ldo, lt_data(x), ldk,
                       add_gw ? 1.0 : 0.0, lt_data(gw), ldk));
  if (gb) cpu_nn_column_sums(lt_data(gb), lt_data(go), m, o, go->dtype, add_gb);
  return LT_OK;
}
