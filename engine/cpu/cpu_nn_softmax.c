/* softmax and log_softmax along the middle dim of [outer, size, inner],
 * numerically stable: the maximum is subtracted before exponentiating
 * (exp(x - max) <= 1 never overflows) and sums are kept in double. Work is
 * split over (outer, block of inner) pairs; each block walks the reduced dim
 * with unit-stride rows of up to SOFTMAX_BLOCK elements. float16 and
 * bfloat16 elements are widened as they are read and each result rounded
 * once (the backend's half_pointwise): the exponentials are not stored and
 * read back in 16 bits but recomputed in the last pass. */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_vmath.h"
#include "lt/threads.h"

#define SOFTMAX_BLOCK 64

typedef struct softmax_job {
  const void *x, *go, *y;
  void *out;
  lt_nn_dim_geom g;
  int64_t blocks_per_outer;
  bool log;
  lt_dtype dt;
} softmax_job;

/* The elements [i0, i1) of inner in outer slice o start at base; element
 * (k, i) is at base + k * inner + i. */
static void block_bounds(const softmax_job *j, int64_t task, int64_t *base, int64_t *i0,
                         int64_t *i1) {
  const int64_t o = task / j->blocks_per_outer, blk = task % j->blocks_per_outer;
  *base = o * j->g.size * j->g.inner;
  *i0 = blk * SOFTMAX_BLOCK;
  *i1 = *i0 + SOFTMAX_BLOCK < j->g.inner ? *i0 + SOFTMAX_BLOCK : j->g.inner;
}

NN_INLINE void softmax_impl(const softmax_job *j, int64_t t0, int64_t t1, lt_dtype dt) {
  const bool lowp = nn_is_lowp(dt);
  const int64_t size = j->g.size, inner = j->g.inner;
  for (int64_t t = t0; t < t1; t++) {
    int64_t base, i0, i1;
    block_bounds(j, t, &base, &i0, &i1);
    double max[SOFTMAX_BLOCK], sum[SOFTMAX_BLOCK];
    for (int64_t i = i0; i < i1; i++) max[i - i0] = -INFINITY, sum[i - i0] = 0.0;
    for (int64_t k = 0; k < size; k++)
      for (int64_t i = i0; i < i1; i++) {
        const double v = nn_ld_dt(j->x, base + k * inner + i, dt);
        /* NaN propagates: it becomes the maximum and poisons the row. */
        if (v > max[i - i0] || isnan(v)) max[i - i0] = v;
      }
    for (int64_t k = 0; k < size; k++)
      for (int64_t i = i0; i < i1; i++) {
        const int64_t at = base + k * inner + i;
        const double e = exp(nn_ld_dt(j->x, at, dt) - max[i - i0]);
        sum[i - i0] += e;
        if (!j->log && !lowp) nn_st_dt(j->out, at, dt, e);
      }
    for (int64_t i = i0; i < i1; i++) {
      /* A row of -inf has max -inf: PyTorch gives NaN there, as does x - max. */
      if (j->log)
        sum[i - i0] = max[i - i0] + log(sum[i - i0]);
      else
        sum[i - i0] = 1.0 / sum[i - i0];
    }
    for (int64_t k = 0; k < size; k++)
      for (int64_t i = i0; i < i1; i++) {
        const int64_t at = base + k * inner + i;
        if (j->log)
          nn_st_dt(j->out, at, dt, nn_ld_dt(j->x, at, dt) - sum[i - i0]);
        else if (lowp)
          nn_st_dt(j->out, at, dt, exp(nn_ld_dt(j->x, at, dt) - max[i - i0]) * sum[i - i0]);
        else
          nn_st_dt(j->out, at, dt, nn_ld_dt(j->out, at, dt) * sum[i - i0]);
      }
  }
}

/* ---- float32 rows (the last dim: inner 1) ----
 * A row at a time, in float with cpu_rows.h's lanes and cpu_vmath.h's exp, so that each
 * pass vectorises (a GPT row of 64 is four AVX-512 vectors, with no scalar tail). A NaN
 * anywhere makes its exponential NaN, hence the sum and the whole row (the maximum need
 * not look for it); a row of -inf has max -inf and gives NaN, as PyTorch. */
/* `rows` rows from row r (cpu_rows.h's groups: a constant where inlined). */
NN_INLINE void softmax_row_group_f32(const softmax_job *j, int64_t r, int rows, bool fused) {
  const int64_t n = j->g.size;
  const float *x = (const float *)j->x + r * n;
  float *y = (float *)j->out + r * n;
  float m[ROW_GROUP];
  double sum[ROW_GROUP];
  rows_max_f32(x, n, n, rows, m);
  rows_reduce_f32(ROW_EXP_FOR(fused), x, NULL, j->log ? NULL : y, n, n, m, rows, sum);
  for (int g = 0; g < rows; g++) {
    if (j->log) {
      const float shift = (float)((double)m[g] + log(sum[g]));
      row_scale_add_f32(y + g * n, x + g * n, n, 1.0f, -shift); /* x - shift, exactly */
    } else {
      /* exponentials are >= +0: adding 0 keeps them */
      row_scale_add_f32(y + g * n, y + g * n, n, (float)(1.0 / sum[g]), 0.0f);
    }
  }
}

/* fused: the exponential's FMAs fused (vm_cpu_has_fma), a constant where inlined. */
NN_INLINE void softmax_rows_f32(const softmax_job *j, int64_t r0, int64_t r1, bool fused) {
  int64_t r = r0;
  for (; r + ROW_GROUP <= r1; r += ROW_GROUP) softmax_row_group_f32(j, r, ROW_GROUP, fused);
  for (; r < r1; r++) softmax_row_group_f32(j, r, 1, fused);
}

LT_CPU_CLONES static void softmax_rows_range(void *ctx, int64_t r0, int64_t r1) {
  if (vm_cpu_has_fma())
    softmax_rows_f32(ctx, r0, r1, true);
  else
    softmax_rows_f32(ctx, r0, r1, false);
}

/* The gradients of the generic backward below, a float32 row at a time: one dot product
 * (or sum) and one fused update. */
NN_INLINE void softmax_backward_row_group_f32(const softmax_job *j, int64_t r, int rows, bool fused) {
  const int64_t n = j->g.size;
  const float *go0 = (const float *)j->go + r * n, *y0 = (const float *)j->y + r * n;
  double dots[ROW_GROUP];
  rows_reduce_f32(j->log ? ROW_SUM : ROW_DOT, go0, y0, NULL, n, n, NULL, rows, dots);
  for (int g = 0; g < rows; g++) {
    const float *go = go0 + g * n, *y = y0 + g * n;
    float *gx = (float *)j->out + (r + g) * n;
    const float dot = (float)dots[g];
    int64_t k = 0;
    if (j->log) {
      for (; k + ROW_LANES <= n; k += ROW_LANES)
        rv_store(gx + k, rv_load(go + k) - rv_exp_neg_for(fused, rv_load(y + k)) * dot);
      for (; k < n; k++) gx[k] = go[k] - vm_exp_neg_for(fused, y[k]) * dot;
    } else {
      for (; k + ROW_LANES <= n; k += ROW_LANES)
        rv_store(gx + k, rv_load(y + k) * (rv_load(go + k) - dot));
      for (; k < n; k++) gx[k] = y[k] * (go[k] - dot);
    }
  }
}

NN_INLINE void softmax_backward_rows_f32(const softmax_job *j, int64_t r0, int64_t r1, bool fused) {
  int64_t r = r0;
  for (; r + ROW_GROUP <= r1; r += ROW_GROUP) softmax_backward_row_group_f32(j, r, ROW_GROUP, fused);
  for (; r < r1; r++) softmax_backward_row_group_f32(j, r, 1, fused);
}

LT_CPU_CLONES static void softmax_backward_rows_range(void *ctx, int64_t r0, int64_t r1) {
  if (vm_cpu_has_fma())
    softmax_backward_rows_f32(ctx, r0, r1, true);
  else
    softmax_backward_rows_f32(ctx, r0, r1, false);
}

/* Runs the rows of a float32 last-dim job; false for any other job. */
static bool run_rows(const softmax_job *j, lt_range_fn fn) {
  if (j->dt != LT_FLOAT32 || j->g.inner != 1) return false;
  if (j->g.outer > 0 && j->g.size > 0)
    lt_parallel_for(j->g.outer, NN_GRAIN / j->g.size + 1, fn, (void *)j);
  return true;
}

LT_CPU_CLONES static void softmax_range(void *ctx, int64_t t0, int64_t t1) {
  const softmax_job *j = ctx;
  NN_BY_DTYPE(j->dt, softmax_impl, j, t0, t1);
}

static void run(softmax_job *j, lt_range_fn fn) {
  j->blocks_per_outer = (j->g.inner + SOFTMAX_BLOCK - 1) / SOFTMAX_BLOCK;
  const int64_t tasks = j->g.outer * j->blocks_per_outer;
  const int64_t per_task = j->g.size * (j->g.inner < SOFTMAX_BLOCK ? j->g.inner : SOFTMAX_BLOCK);
  if (tasks > 0 && j->g.size > 0)
    lt_parallel_for(tasks, NN_GRAIN / (per_task > 0 ? per_task : 1) + 1, fn, j);
}

lt_status cpu_nn_softmax(lt_tensor *out, const lt_tensor *x, lt_nn_dim_geom g, bool log) {
  softmax_job j = {.x = lt_data(x), .out = lt_data(out), .g = g, .log = log, .dt = x->dtype};
  if (!run_rows(&j, softmax_rows_range)) run(&j, softmax_range);
  return LT_OK;
}

/* softmax:     gx = y (go - sum(go y))
 * log_softmax: gx = go - exp(y) sum(go) */
NN_INLINE void softmax_backward_impl(const softmax_job *j, int64_t t0, int64_t t1, lt_dtype dt) {
  const int64_t size = j->g.size, inner = j->g.inner;
  for (int64_t t = t0; t < t1; t++) {
    int64_t base, i0, i1;
    block_bounds(j, t, &base, &i0, &i1);
    double dot[SOFTMAX_BLOCK];
    for (int64_t i = i0; i < i1; i++) dot[i - i0] = 0.0;
    for (int64_t k = 0; k < size; k++)
      for (int64_t i = i0; i < i1; i++) {
        const int64_t at = base + k * inner + i;
        const double go = nn_ld_dt(j->go, at, dt);
        dot[i - i0] += j->log ? go : go * nn_ld_dt(j->y, at, dt);
      }
    for (int64_t k = 0; k < size; k++)
      for (int64_t i = i0; i < i1; i++) {
        const int64_t at = base + k * inner + i;
        const double go = nn_ld_dt(j->go, at, dt), y = nn_ld_dt(j->y, at, dt);
        nn_st_dt(j->out, at, dt, j->log ? go - exp(y) * dot[i - i0] : y * (go - dot[i - i0]));
      }
  }
}

LT_CPU_CLONES static void softmax_backward_range(void *ctx, int64_t t0, int64_t t1) {
  const softmax_job *j = ctx;
  NN_BY_DTYPE(j->dt, softmax_backward_impl, j, t0, t1);
}

lt_status cpu_nn_softmax_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *y,
                                  lt_nn_dim_geom g, bool log) {
  softmax_job j = {.go = lt_data(go), .y = lt_data(y), .out = lt_data(gx), .g = g, .log = log,
                   .dt = y->dtype};
  if (!run_rows(&j, softmax_backward_rows_range)) run(&j, softmax_backward_range);
  return LT_OK;
}
