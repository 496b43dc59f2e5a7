/* layer_norm over the rows of x [M, D] (Ba, Kiros and Hinton 2016): rows
 * are independent tasks for the forward and the input gradient; the weight
 * and bias gradients sum over rows, split by column blocks so each column is
 * summed in row order whatever the thread count. */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_rows.h"
#include "lt/threads.h"

typedef struct ln_job {
  const void *x, *go, *w, *b, *mean, *rstd;
  void *out, *gx, *gw, *gb, *mean_out, *rstd_out;
  int64_t m, d;
  double eps;
  bool f64;
} ln_job;

static int64_t row_grain(int64_t d) { return NN_GRAIN / (d > 0 ? d : 1) + 1; }

NN_INLINE void ln_forward_impl(const ln_job *j, int64_t r0, int64_t r1, bool f64) {
  const int64_t d = j->d;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t base = r * d;
    double sum = 0.0;
    for (int64_t k = 0; k < d; k++) sum += nn_ld(j->x, base + k, f64);
    const double mean = d > 0 ? sum / (double)d : NAN;
    double sq = 0.0;
    for (int64_t k = 0; k < d; k++) {
      const double v = nn_ld(j->x, base + k, f64) - mean;
      sq += v * v;
    }
    const double rstd = 1.0 / sqrt((d > 0 ? sq / (double)d : NAN) + j->eps);
    nn_st(j->mean_out, r, f64, mean);
    nn_st(j->rstd_out, r, f64, rstd);
    for (int64_t k = 0; k < d; k++) {
      double y = (nn_ld(j->x, base + k, f64) - mean) * rstd;
      if (j->w) y *= nn_ld(j->w, k, f64);
      if (j->b) y += nn_ld(j->b, k, f64);
      nn_st(j->out, base + k, f64, y);
    }
  }
}

/* float32: the same two passes over each row (mean, then centred squares, so no
 * cancellation) in float lanes that vectorise (cpu_rows.h, sums into double per block),
 * and the normalised row in float. */

/* The mean and rstd of `rows` rows from row r (cpu_rows.h's groups). */
NN_INLINE void ln_row_group_stats_f32(const ln_job *j, int64_t r, int rows) {
  const int64_t d = j->d;
  const float *x = (const float *)j->x + r * d;
  double sum[ROW_GROUP], squares[ROW_GROUP], mean[ROW_GROUP];
  float meanf[ROW_GROUP];
  rows_reduce_f32(ROW_SUM, x, NULL, NULL, d, d, NULL, rows, sum);
  for (int g = 0; g < rows; g++) mean[g] = d > 0 ? sum[g] / (double)d : NAN, meanf[g] = (float)mean[g];
  rows_reduce_f32(ROW_SQUARES, x, NULL, NULL, d, d, meanf, rows, squares);
  for (int g = 0; g < rows; g++) {
    const double var = d > 0 ? squares[g] / (double)d : NAN;
    ((float *)j->mean_out)[r + g] = meanf[g];
    ((float *)j->rstd_out)[r + g] = (float)(1.0 / sqrt(var + j->eps));
  }
}

NN_INLINE void ln_row_normalise_f32(const ln_job *j, int64_t r) {
  const int64_t d = j->d;
  const float *x = (const float *)j->x + r * d, *w = j->w, *b = j->b;
  float *y = (float *)j->out + r * d;
  const float m = ((const float *)j->mean_out)[r], s = ((const float *)j->rstd_out)[r];
  if (w && b)
    for (int64_t k = 0; k < d; k++) y[k] = (x[k] - m) * s * w[k] + b[k];
  else
    for (int64_t k = 0; k < d; k++) {
      float v = (x[k] - m) * s;
      if (w) v *= w[k];
      if (b) v += b[k];
      y[k] = v;
    }
}

NN_INLINE void ln_forward_f32(const ln_job *j, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + ROW_GROUP <= r1; r += ROW_GROUP) ln_row_group_stats_f32(j, r, ROW_GROUP);
  for (; r < r1; r++) ln_row_group_stats_f32(j, r, 1);
  for (r = r0; r < r1; r++) ln_row_normalise_f32(j, r);
}

LT_CPU_CLONES static void ln_forward_range(void *ctx, int64_t r0, int64_t r1) {
  const ln_job *j = ctx;
  if (j->f64)
    ln_forward_impl(j, r0, r1, true);
  else
    ln_forward_f32(j, r0, r1);
}

lt_status cpu_nn_layer_norm(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd, const lt_tensor *x,
                            const lt_tensor *w, const lt_tensor *b, double eps) {
  ln_job j = {.x = lt_data(x),
              .w = w ? lt_data(w) : NULL,
              .b = b ? lt_data(b) : NULL,
              .out = lt_data(out),
              .mean_out = lt_data(mean),
              .rstd_out = lt_data(rstd),
              .m = x->shape[0],
              .d = x->shape[1],
              .eps = eps,
              .f64 = nn_is_f64(x)};
  lt_parallel_for(j.m, row_grain(j.d), ln_forward_range, &j);
  return LT_OK;
}

/* gx = rstd (g - mean(g) - xhat mean(g xhat)) with g = go w. */
NN_INLINE void ln_input_grad_impl(const ln_job *j, int64_t r0, int64_t r1, bool f64) {
  const int64_t d = j->d;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t base = r * d;
    const double mean = nn_ld(j->mean, r, f64), rstd = nn_ld(j->rstd, r, f64);
    double sum_g = 0.0, sum_g_xhat = 0.0;
    for (int64_t k = 0; k < d; k++) {
      const double g = nn_ld(j->go, base + k, f64) * (j->w ? nn_ld(j->w, k, f64) : 1.0);
      sum_g += g;
      sum_g_xhat += g * (nn_ld(j->x, base + k, f64) - mean) * rstd;
    }
    const double mean_g = sum_g / (double)d, mean_g_xhat = sum_g_xhat / (double)d;
    for (int64_t k = 0; k < d; k++) {
      const double g = nn_ld(j->go, base + k, f64) * (j->w ? nn_ld(j->w, k, f64) : 1.0);
      const double xhat = (nn_ld(j->x, base + k, f64) - mean) * rstd;
      nn_st(j->gx, base + k, f64, rstd * (g - mean_g - xhat * mean_g_xhat));
    }
  }
}

/* float32: the two sums in float lanes (cpu_rows.h) over g = go w and xhat, kept for the
 * row in a stack buffer while it fits, then one fused update. */
#define LN_ROW_MAX 4096

/* `rows` rows from row r, g = go w and xhat of each kept in buffers of LN_ROW_MAX. */
NN_INLINE void ln_input_grad_group_f32(const ln_job *j, int64_t r, int rows, float *g, float *xhat) {
  const int64_t d = j->d;
  const float *w = j->w;
  for (int q = 0; q < rows; q++) {
    const float *x = (const float *)j->x + (r + q) * d, *go = (const float *)j->go + (r + q) * d;
    const float mean = ((const float *)j->mean)[r + q], rstd = ((const float *)j->rstd)[r + q];
    for (int64_t k = 0; k < d; k++) {
      g[q * d + k] = w ? go[k] * w[k] : go[k];
      xhat[q * d + k] = (x[k] - mean) * rstd;
    }
  }
  double sum_g[ROW_GROUP], sum_g_xhat[ROW_GROUP];
  rows_reduce_f32(ROW_SUM, g, NULL, NULL, d, d, NULL, rows, sum_g);
  rows_reduce_f32(ROW_DOT, g, xhat, NULL, d, d, NULL, rows, sum_g_xhat);
  for (int q = 0; q < rows; q++) {
    const float rstd = ((const float *)j->rstd)[r + q];
    const float mean_g = (float)(sum_g[q] / (double)d), mean_g_xhat = (float)(sum_g_xhat[q] / (double)d);
    const float *gq = g + q * d, *xq = xhat + q * d;
    float *gx = (float *)j->gx + (r + q) * d;
    for (int64_t k = 0; k < d; k++) gx[k] = rstd * (gq[k] - mean_g - xq[k] * mean_g_xhat);
  }
}

NN_INLINE void ln_input_grad_f32(const ln_job *j, int64_t r0, int64_t r1) {
  float g[LN_ROW_MAX], xhat[LN_ROW_MAX];
  int64_t r = r0;
  if (j->d * ROW_GROUP <= LN_ROW_MAX)
    for (; r + ROW_GROUP <= r1; r += ROW_GROUP) ln_input_grad_group_f32(j, r, ROW_GROUP, g, xhat);
  for (; r < r1; r++) ln_input_grad_group_f32(j, r, 1, g, xhat);
}

LT_CPU_CLONES static void ln_input_grad_range(void *ctx, int64_t r0, int64_t r1) {
  const ln_job *j = ctx;
  if (j->f64)
    ln_input_grad_impl(j, r0, r1, true);
  else if (j->d <= LN_ROW_MAX)
    ln_input_grad_f32(j, r0, r1);
  else
    ln_input_grad_impl(j, r0, r1, false);
}

#define LN_COL_BLOCK 64

NN_INLINE void ln_param_grad_impl(const ln_job *j, int64_t b0, int64_t b1, bool f64) {
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t k0 = blk * LN_COL_BLOCK;
    const int64_t k1 = k0 + LN_COL_BLOCK < j->d ? k0 + LN_COL_BLOCK : j->d;
    double gw[LN_COL_BLOCK] = {0}, gb[LN_COL_BLOCK] = {0};
    for (int64_t r = 0; r < j->m; r++) {
      const double mean = nn_ld(j->mean, r, f64), rstd = nn_ld(j->rstd, r, f64);
      for (int64_t k = k0; k < k1; k++) {
        const double g = nn_ld(j->go, r * j->d + k, f64);
        gw[k - k0] += g * (nn_ld(j->x, r * j->d + k, f64) - mean) * rstd;
        gb[k - k0] += g;
      }
    }
    for (int64_t k = k0; k < k1; k++) {
      if (j->gw) nn_st(j->gw, k, f64, gw[k - k0]);
      if (j->gb) nn_st(j->gb, k, f64, gb[k - k0]);
    }
  }
}

/* float32: each row's products in float, added to the columns' double sums in row order
 * (the same order as above), a vector of columns at a time. */
NN_INLINE void ln_param_grad_f32(const ln_job *j, int64_t b0, int64_t b1) {
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t k0 = blk * LN_COL_BLOCK;
    const int64_t k1 = k0 + LN_COL_BLOCK < j->d ? k0 + LN_COL_BLOCK : j->d;
    double gw[LN_COL_BLOCK] = {0}, gb[LN_COL_BLOCK] = {0};
    for (int64_t r = 0; r < j->m; r++) {
      const float mean = ((const float *)j->mean)[r], rstd = ((const float *)j->rstd)[r];
      const float *x = (const float *)j->x + r * j->d, *go = (const float *)j->go + r * j->d;
      for (int64_t k = k0; k < k1; k++) {
        gw[k - k0] += (double)(go[k] * ((x[k] - mean) * rstd));
        gb[k - k0] += (double)go[k];
      }
    }
    for (int64_t k = k0; k < k1; k++) {
      if (j->gw) ((float *)j->gw)[k] = (float)gw[k - k0];
      if (j->gb) ((float *)j->gb)[k] = (float)gb[k - k0];
    }
  }
}

LT_CPU_CLONES static void ln_param_grad_range(void *ctx, int64_t b0, int64_t b1) {
  const ln_job *j = ctx;
  if (j->f64)
    ln_param_grad_impl(j, b0, b1, true);
  else
    ln_param_grad_f32(j, b0, b1);
}

lt_status cpu_nn_layer_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                     const lt_tensor *go, const lt_tensor *x,
                                     const lt_tensor *mean, const lt_tensor *rstd,
                                     const lt_tensor *w) {
  ln_job j = {.x = lt_data(x),
              .go = lt_data(go),
              .w = w ? lt_data(w) : NULL,
              .mean = lt_data(mean),
              .rstd = lt_data(rstd),
              .gx = gx ? lt_data(gx) : NULL,
              .gw = gw ? lt_data(gw) : NULL,
              .gb = gb ? lt_data(gb) : NULL,
              .m = x->shape[0],
              .d = x->shape[1],
              .f64 = nn_is_f64(x)};
  if (gx && j.d > 0) lt_parallel_for(j.m, row_grain(j.d), ln_input_grad_range, &j);
  if (gw || gb) {
    const int64_t blocks = (j.d + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
    lt_parallel_for(blocks, row_grain(j.m * LN_COL_BLOCK), ln_param_grad_range, &j);
  }
  return LT_OK;
}
