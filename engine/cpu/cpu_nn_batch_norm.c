/* batch_norm over x [N, C, S] (Ioffe and Szegedy 2015), one channel per
 * task: a channel's statistics, its running-stat update and its normalised
 * output are computed together while the channel is in cache. Statistics
 * are two-pass (mean, then the mean of squared deviations) in double, which
 * avoids the cancellation of E[x^2] - E[x]^2. float16 and bfloat16 x, out,
 * grad_output and grad_input are read and written as they are (the
 * backend's half_batch_norm), with float32 per-channel tensors: values are
 * widened as they are read and results rounded once. */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "lt/threads.h"

typedef struct bn_job {
  const void *x, *go, *w, *b;
  void *out, *gx, *gw, *gb, *mean, *invstd, *rm, *rv;
  int64_t n, c, s;
  bool training, f64; /* f64: every operand is float64 */
  lt_dtype dt;        /* of x, out, go, gx */
  double momentum, eps;
} bn_job;

static int64_t channel_grain(const bn_job *j) {
  const int64_t per_channel = j->n * j->s;
  return NN_GRAIN / (per_channel > 0 ? per_channel : 1) + 1;
}

/* Sums over a channel are latency-bound with one accumulator: each add waits
 * for the previous one. BN_LANES independent double accumulators, each fed
 * a fixed subset of positions and added in a fixed order at the end, let
 * the adds overlap (and vectorise) while the result stays a function of the
 * data alone, not of the thread count. */
#define BN_LANES 8

typedef struct bn_lanes {
  double v[BN_LANES];
} bn_lanes;

static inline void lanes_clear(bn_lanes *l) {
  for (int k = 0; k < BN_LANES; k++) l->v[k] = 0.0;
}

static inline double lanes_total(const bn_lanes *l) {
  return ((l->v[0] + l->v[1]) + (l->v[2] + l->v[3])) +
         ((l->v[4] + l->v[5]) + (l->v[6] + l->v[7]));
}

/* acc += x[base + p] over one row of s positions: lane k takes p = k, k +
 * BN_LANES, ..., and the tail goes to lanes 0, 1, ... in order. */
NN_INLINE void row_sum(bn_lanes *acc, const void *x, int64_t base, int64_t s, lt_dtype dt) {
  int64_t p = 0;
  for (; p + BN_LANES <= s; p += BN_LANES)
    for (int k = 0; k < BN_LANES; k++) acc->v[k] += nn_ld_dt(x, base + p + k, dt);
  for (int k = 0; p < s; p++, k++) acc->v[k] += nn_ld_dt(x, base + p, dt);
}

/* acc += (x[base + p] - mean)^2 over one row. */
NN_INLINE void row_sq(bn_lanes *acc, const void *x, int64_t base, int64_t s, double mean,
                      lt_dtype dt) {
  int64_t p = 0;
  for (; p + BN_LANES <= s; p += BN_LANES)
    for (int k = 0; k < BN_LANES; k++) {
      const double d = nn_ld_dt(x, base + p + k, dt) - mean;
      acc->v[k] += d * d;
    }
  for (int k = 0; p < s; p++, k++) {
    const double d = nn_ld_dt(x, base + p, dt) - mean;
    acc->v[k] += d * d;
  }
}

/* The elementwise passes of float32 run in float, as PyTorch's CPU kernel
 * does: the per-channel constants are worked out in double and rounded to
 * float once, then each row is a plain float loop over restrict pointers
 * that the compiler vectorises four lanes wide, with no conversions to and
 * from double per element. float64 keeps the double loops (gradient checks
 * compare it against finite differences). out is a fresh tensor, never x. */
static void affine_row_f32(const float *restrict x, float *restrict y, int64_t s, float scale,
                           float shift) {
  for (int64_t p = 0; p < s; p++) y[p] = x[p] * scale + shift;
}

/* The same for 16-bit rows, in float, rounded once. */
NN_INLINE void affine_row_lowp(const uint16_t *restrict x, uint16_t *restrict y, int64_t s,
                               float scale, float shift, lt_dtype dt) {
  for (int64_t p = 0; p < s; p++) nn_st_dt(y, p, dt, nn_ld_dt(x, p, dt) * scale + shift);
}

NN_INLINE void bn_forward_impl(const bn_job *j, int64_t c0, int64_t c1, lt_dtype dt) {
  const bool f64 = dt == LT_FLOAT64;
  const int64_t count = j->n * j->s;
  for (int64_t c = c0; c < c1; c++) {
    double mean, invstd;
    if (j->training) {
      bn_lanes acc;
      lanes_clear(&acc);
      for (int64_t i = 0; i < j->n; i++) row_sum(&acc, j->x, (i * j->c + c) * j->s, j->s, dt);
      mean = lanes_total(&acc) / (double)count;
      lanes_clear(&acc);
      for (int64_t i = 0; i < j->n; i++) row_sq(&acc, j->x, (i * j->c + c) * j->s, j->s, mean, dt);
      const double sq = lanes_total(&acc);
      const double var = sq / (double)count;
      invstd = 1.0 / sqrt(var + j->eps);
      if (j->rm) {
        const double m = j->momentum;
        nn_st(j->rm, c, f64, (1.0 - m) * nn_ld(j->rm, c, f64) + m * mean);
      }
      if (j->rv) { /* the running variance is the unbiased one */
        const double m = j->momentum, unbiased = sq / (double)(count - 1);
        nn_st(j->rv, c, f64, (1.0 - m) * nn_ld(j->rv, c, f64) + m * unbiased);
      }
    } else {
      mean = nn_ld(j->rm, c, f64);
      invstd = 1.0 / sqrt(nn_ld(j->rv, c, f64) + j->eps);
    }
    nn_st(j->mean, c, f64, mean);
    nn_st(j->invstd, c, f64, invstd);
    /* y = x * scale + shift with scale = w invstd, shift = b - mean scale. */
    const double w = j->w ? nn_ld(j->w, c, f64) : 1.0, b = j->b ? nn_ld(j->b, c, f64) : 0.0;
    const double scale = w * invstd, shift = b - mean * scale;
    for (int64_t i = 0; i < j->n; i++) {
      const int64_t base = (i * j->c + c) * j->s;
      if (f64)
        for (int64_t p = 0; p < j->s; p++)
          nn_st(j->out, base + p, f64, nn_ld(j->x, base + p, f64) * scale + shift);
      else if (dt == LT_FLOAT32)
        affine_row_f32((const float *)j->x + base, (float *)j->out + base, j->s, (float)scale,
                       (float)shift);
      else
        affine_row_lowp((const uint16_t *)j->x + base, (uint16_t *)j->out + base, j->s,
                        (float)scale, (float)shift, dt);
    }
  }
}

LT_CPU_CLONES static void bn_forward_range(void *ctx, int64_t c0, int64_t c1) {
  const bn_job *j = ctx;
  switch (j->dt) {
    case LT_FLOAT64: bn_forward_impl(j, c0, c1, LT_FLOAT64); break;
    case LT_FLOAT16: bn_forward_impl(j, c0, c1, LT_FLOAT16); break;
    case LT_BFLOAT16: bn_forward_impl(j, c0, c1, LT_BFLOAT16); break;
    default: bn_forward_impl(j, c0, c1, LT_FLOAT32); break;
  }
}

lt_status cpu_nn_batch_norm(lt_tensor *out, lt_tensor *save_mean, lt_tensor *save_invstd,
                            const lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                            const lt_tensor *w, const lt_tensor *b, bool training,
                            double momentum, double eps) {
  bn_job j = {.x = lt_data(x),
              .w = w ? lt_data(w) : NULL,
              .b = b ? lt_data(b) : NULL,
              .out = lt_data(out),
              .mean = lt_data(save_mean),
              .invstd = lt_data(save_invstd),
              .rm = running_mean ? lt_data(running_mean) : NULL,
              .rv = running_var ? lt_data(running_var) : NULL,
              .n = x->shape[0],
              .c = x->shape[1],
              .s = x->shape[2],
              .training = training,
              .f64 = nn_is_f64(x),
              .dt = x->dtype,
              .momentum = momentum,
              .eps = eps};
  lt_parallel_for(j.c, channel_grain(&j), bn_forward_range, &j);
  return LT_OK;
}

/* go_acc += go and gx_acc += go (x - mean) over one row, lanes as row_sum. */
NN_INLINE void row_sums_backward(bn_lanes *go_acc, bn_lanes *gx_acc, const void *go,
                                 const void *x, int64_t base, int64_t s, double mean,
                                 lt_dtype dt) {
  int64_t p = 0;
  for (; p + BN_LANES <= s; p += BN_LANES)
    for (int k = 0; k < BN_LANES; k++) {
      const double g = nn_ld_dt(go, base + p + k, dt);
      go_acc->v[k] += g;
      gx_acc->v[k] += g * (nn_ld_dt(x, base + p + k, dt) - mean);
    }
  for (int k = 0; p < s; p++, k++) {
    const double g = nn_ld_dt(go, base + p, dt);
    go_acc->v[k] += g;
    gx_acc->v[k] += g * (nn_ld_dt(x, base + p, dt) - mean);
  }
}

/* gx = k (go - mean_go - (x - mean) xproj) over one float32 row, the
 * float counterpart of bn_backward_impl's double loop (see affine_row_f32).
 * gx is a fresh tensor, never x or go. */
static void grad_row_f32(const float *restrict x, const float *restrict go, float *restrict gx,
                         int64_t s, float mean, float xproj, float mean_go, float k) {
  for (int64_t p = 0; p < s; p++) gx[p] = k * (go[p] - mean_go - (x[p] - mean) * xproj);
}

NN_INLINE void grad_row_lowp(const uint16_t *restrict x, const uint16_t *restrict go,
                             uint16_t *restrict gx, int64_t s, float mean, float xproj,
                             float mean_go, float k, lt_dtype dt) {
  for (int64_t p = 0; p < s; p++) {
    const float v = k * ((float)nn_ld_dt(go, p, dt) - mean_go - ((float)nn_ld_dt(x, p, dt) - mean) * xproj);
    nn_st_dt(gx, p, dt, v);
  }
}

/* Training: y depends on x also through the batch statistics, so
 *   gx = w invstd (go - mean(go) - xhat mean(go xhat));
 * eval: the statistics are constants and gx = w invstd go. */
NN_INLINE void bn_backward_impl(const bn_job *j, int64_t c0, int64_t c1, lt_dtype dt) {
  const bool f64 = dt == LT_FLOAT64;
  const double count = (double)(j->n * j->s);
  for (int64_t c = c0; c < c1; c++) {
    const double mean = nn_ld(j->mean, c, f64), invstd = nn_ld(j->invstd, c, f64);
    const double w = j->w ? nn_ld(j->w, c, f64) : 1.0;
    bn_lanes go_acc, gx_acc;
    lanes_clear(&go_acc);
    lanes_clear(&gx_acc);
    for (int64_t i = 0; i < j->n; i++)
      row_sums_backward(&go_acc, &gx_acc, j->go, j->x, (i * j->c + c) * j->s, j->s, mean, dt);
    const double sum_go = lanes_total(&go_acc), sum_go_xhat = lanes_total(&gx_acc) * invstd;
    if (j->gw) nn_st(j->gw, c, f64, sum_go_xhat);
    if (j->gb) nn_st(j->gb, c, f64, sum_go);
    if (!j->gx) continue;
    const double k = w * invstd;
    const double mean_go = j->training ? sum_go / count : 0.0;
    const double proj = j->training ? sum_go_xhat / count : 0.0;
    for (int64_t i = 0; i < j->n; i++) {
      const int64_t base = (i * j->c + c) * j->s;
      if (f64) {
        for (int64_t p = 0; p < j->s; p++) {
          const double xhat = (nn_ld(j->x, base + p, f64) - mean) * invstd;
          nn_st(j->gx, base + p, f64, k * (nn_ld(j->go, base + p, f64) - mean_go - xhat * proj));
        }
      } else if (dt == LT_FLOAT32) {
        /* (x - mean) invstd proj as (x - mean) (invstd proj): one float
         * multiply less per element. */
        grad_row_f32((const float *)j->x + base, (const float *)j->go + base,
                     (float *)j->gx + base, j->s, (float)mean, (float)(invstd * proj),
                     (float)mean_go, (float)k);
      } else {
        grad_row_lowp((const uint16_t *)j->x + base, (const uint16_t *)j->go + base,
                      (uint16_t *)j->gx + base, j->s, (float)mean, (float)(invstd * proj),
                      (float)mean_go, (float)k, dt);
      }
    }
  }
}

LT_CPU_CLONES static void bn_backward_range(void *ctx, int64_t c0, int64_t c1) {
  const bn_job *j = ctx;
  switch (j->dt) {
    case LT_FLOAT64: bn_backward_impl(j, c0, c1, LT_FLOAT64); break;
    case LT_FLOAT16: bn_backward_impl(j, c0, c1, LT_FLOAT16); break;
    case LT_BFLOAT16: bn_backward_impl(j, c0, c1, LT_BFLOAT16); break;
    default: bn_backward_impl(j, c0, c1, LT_FLOAT32); break;
  }
}

lt_status cpu_nn_batch_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                     const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                     const lt_tensor *mean, const lt_tensor *invstd,
                                     bool training) {
  bn_job j = {.x = lt_data(x),
              .go = lt_data(go),
              .w = w ? lt_data(w) : NULL,
              .gx = gx ? lt_data(gx) : NULL,
              .gw = gw ? lt_data(gw) : NULL,
              .gb = gb ? lt_data(gb) : NULL,
              .mean = (void *)lt_data(mean),
              .invstd = (void *)lt_data(invstd),
              .n = x->shape[0],
              .c = x->shape[1],
              .s = x->shape[2],
              .training = training,
              .f64 = nn_is_f64(x),
              .dt = x->dtype};
  lt_parallel_for(j.c, channel_grain(&j), bn_backward_range, &j);
  return LT_OK;
}
