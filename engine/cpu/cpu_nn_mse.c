/* mse_loss over same-shaped contiguous a and b; the mean and sum run in
 * NN_SUM_BLOCKS fixed blocks added in order (thread-count independent). */
#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "lt/threads.h"

typedef struct mse_job {
  const void *a, *b, *gl;
  void *loss, *ga;
  int64_t n, blocks;
  bool f64, per_element;
  double scale;
  double partial[NN_SUM_BLOCKS];
} mse_job;

NN_INLINE void mse_impl(mse_job *j, int64_t b0, int64_t b1, bool f64) {
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t e0 = blk * j->n / j->blocks, e1 = (blk + 1) * j->n / j->blocks;
    double sum = 0.0;
    for (int64_t e = e0; e < e1; e++) {
      const double d = nn_ld(j->a, e, f64) - nn_ld(j->b, e, f64);
      if (j->per_element) nn_st(j->loss, e, f64, d * d);
      sum += d * d;
    }
    j->partial[blk] = sum;
  }
}

LT_CPU_CLONES static void mse_range(void *ctx, int64_t b0, int64_t b1) {
  mse_job *j = ctx;
  if (j->f64)
    mse_impl(j, b0, b1, true);
  else
    mse_impl(j, b0, b1, false);
}

lt_status cpu_nn_mse_loss(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                          lt_reduction reduction) {
  mse_job j = {.a = lt_data(a), .b = lt_data(b), .loss = lt_data(loss), .n = lt_numel(a),
               .f64 = nn_is_f64(a), .per_element = reduction == LT_REDUCTION_NONE};
  j.blocks = j.n < NN_SUM_BLOCKS ? j.n : NN_SUM_BLOCKS;
  if (j.blocks > 0) lt_parallel_for(j.blocks, NN_GRAIN / (j.n / j.blocks + 1) + 1, mse_range, &j);
  if (!j.per_element) {
    double total = 0.0;
    for (int64_t blk = 0; blk < j.blocks; blk++) total += j.partial[blk];
    nn_st(j.loss, 0, j.f64, reduction == LT_REDUCTION_MEAN ? total / (double)j.n : total);
  }
  return LT_OK;
}

NN_INLINE void mse_backward_impl(const mse_job *j, int64_t e0, int64_t e1, bool f64) {
  for (int64_t e = e0; e < e1; e++) {
    const double s = j->per_element ? nn_ld(j->gl, e, f64) : j->scale;
    nn_st(j->ga, e, f64, 2.0 * (nn_ld(j->a, e, f64) - nn_ld(j->b, e, f64)) * s);
  }
}

LT_CPU_CLONES static void mse_backward_range(void *ctx, int64_t e0, int64_t e1) {
  const mse_job *j = ctx;
  if (j->f64)
    mse_backward_impl(j, e0, e1, true);
  else
    mse_backward_impl(j, e0, e1, false);
}

lt_status cpu_nn_mse_loss_backward(lt_tensor *ga, const lt_tensor *gl, const lt_tensor *a,
                                   const lt_tensor *b, lt_reduction reduction) {
  mse_job j = {.a = lt_data(a), .b = lt_data(b), .gl = lt_data(gl), .ga = lt_data(ga),
               .n = lt_numel(a), .f64 = nn_is_f64(a),
               .per_element = reduction == LT_REDUCTION_NONE};
  if (!j.per_element) {
    const double g = nn_ld(j.gl, 0, j.f64);
    j.scale = reduction == LT_REDUCTION_MEAN ? g / (double)j.n : g;
  }
  lt_parallel_for(j.n, NN_GRAIN, mse_backward_range, &j);
  return LT_OK;
}
