/* The foreach kernels of the optimizer table: the p-norm over a list of
 * tensors and their in-place scale by one value (lt_foreach_norm,
 * lt_foreach_mul_). float32 magnitudes are summed in FE_LANES float lanes
 * and widened into a double every FE_BLOCK elements (as cpu_rows.h's sums),
 * so the loops vectorise and a long gradient keeps a double sum's accuracy;
 * the lanes are added in a fixed order, so every clone gives the same bits.
 * The norm runs on one thread: it reads each element once (memory-bound),
 * and its result must not depend on the thread count. 16-bit tensors are
 * widened to float in stack buffers, float64 is summed in double. */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_foreach.h"
#include "cpu/cpu_vmath.h"
#include "lt/dtype.h"
#include "lt/threads.h"

#define FE_LANES 16
#define FE_BLOCK 1024
#define SCALE_GRAIN 32768 /* elements per task of the scale */

/* How the norm folds magnitudes: a sum of squares, of magnitudes, of p-th
 * powers, or the largest. */
typedef enum fold_kind { FOLD_SQUARES, FOLD_ABS, FOLD_POW, FOLD_MAX } fold_kind;

typedef struct norm_acc {
  fold_kind kind;
  double p, sum, max; /* max: NaN once any element was NaN */
} norm_acc;

static double max_nan(double a, double b) { return (b > a || b != b) ? b : a; }

static double lanes_sum(const float *lane) {
  float t[FE_LANES / 2];
  for (int l = 0; l < FE_LANES / 2; l++) t[l] = lane[l] + lane[l + FE_LANES / 2];
  for (int w = FE_LANES / 4; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) t[l] += t[l + w];
  return (double)t[0];
}

/* sum of x^2 (squares) or |x| over n floats. */
LT_CPU_CLONES static double f32_sum(const float *x, int64_t n, bool squares) {
  double total = 0.0;
  for (int64_t k = 0; k < n;) {
    const int64_t end = n - k < FE_BLOCK ? n : k + FE_BLOCK;
    float lane[FE_LANES] = {0};
    if (squares) {
      for (; k + FE_LANES <= end; k += FE_LANES)
        for (int l = 0; l < FE_LANES; l++) lane[l] += x[k + l] * x[k + l];
    } else {
      for (; k + FE_LANES <= end; k += FE_LANES)
        for (int l = 0; l < FE_LANES; l++) lane[l] += vm_fabs(x[k + l]);
    }
    double part = lanes_sum(lane);
    for (; k < end; k++) part += squares ? (double)x[k] * x[k] : fabs((double)x[k]);
    total += part;
  }
  return total;
}

/* The largest |x| of n floats, NaN if any is NaN. */
LT_CPU_CLONES static float f32_abs_max(const float *x, int64_t n) {
  float lane[FE_LANES] = {0};
  int64_t k = 0;
  for (; k + FE_LANES <= n; k += FE_LANES)
    for (int l = 0; l < FE_LANES; l++) {
      const float a = vm_fabs(x[k + l]);
      lane[l] = vm_select((a > lane[l]) | (a != a), a, lane[l]);
    }
  float m = 0.0f;
  for (int l = 0; l < FE_LANES; l++) m = (lane[l] > m || lane[l] != lane[l]) ? lane[l] : m;
  for (; k < n; k++) {
    const float a = fabsf(x[k]);
    m = (a > m || a != a) ? a : m;
  }
  return m;
}

static void fold_f32(norm_acc *acc, const float *x, int64_t n) {
  switch (acc->kind) {
    case FOLD_SQUARES: acc->sum += f32_sum(x, n, true); break;
    case FOLD_ABS: acc->sum += f32_sum(x, n, false); break;
    case FOLD_MAX: acc->max = max_nan(acc->max, (double)f32_abs_max(x, n)); break;
    case FOLD_POW:
      for (int64_t k = 0; k < n; k++) acc->sum += pow(fabs((double)x[k]), acc->p);
      break;
  }
}

static void fold_f64(norm_acc *acc, const double *x, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    const double a = fabs(x[k]);
    switch (acc->kind) {
      case FOLD_SQUARES: acc->sum += x[k] * x[k]; break;
      case FOLD_ABS: acc->sum += a; break;
      case FOLD_MAX: acc->max = max_nan(acc->max, a); break;
      case FOLD_POW: acc->sum += pow(a, acc->p); break;
    }
  }
}

static void fold_tensor(norm_acc *acc, const lt_tensor *t) {
  const int64_t n = lt_numel(t);
  const char *x = lt_data(t);
  if (t->dtype == LT_FLOAT32) {
    fold_f32(acc, (const float *)x, n);
  } else if (t->dtype == LT_FLOAT64) {
    fold_f64(acc, (const double *)x, n);
  } else { /* float16, bfloat16: widened a buffer at a time */
    const int64_t es = (int64_t)lt_dtype_size(t->dtype);
    float buf[CPU_BUF];
    for (int64_t off = 0; off < n; off += CPU_BUF) {
      const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
      cpu_load(CPU_KIND_F32, buf, x + off * es, es, t->dtype, m);
      fold_f32(acc, buf, m);
    }
  }
}

lt_status cpu_norm_many(int64_t n, lt_tensor *const *ts, double p, lt_tensor *out) {
  norm_acc acc = {.kind = p == 2.0 ? FOLD_SQUARES : p == 1.0 ? FOLD_ABS : isinf(p) ? FOLD_MAX : FOLD_POW,
                  .p = p};
  for (int64_t i = 0; i < n; i++) fold_tensor(&acc, ts[i]);
  double norm;
  switch (acc.kind) {
    case FOLD_SQUARES: norm = sqrt(acc.sum); break;
    case FOLD_ABS: norm = acc.sum; break;
    case FOLD_MAX: norm = acc.max; break;
    default: norm = pow(acc.sum, 1.0 / p); break;
  }
  lt_store_double(lt_data(out), out->dtype, norm);
  return LT_OK;
}

/* ---- scale ---- */

typedef struct scale_ctx {
  char *x;
  lt_dtype dtype;
  double value;
} scale_ctx;

LT_CPU_CLONES static void scale_f32(float *x, int64_t n, float c) {
  for (int64_t k = 0; k < n; k++) x[k] *= c;
}

static void scale_range(void *vctx, int64_t begin, int64_t end) {
  const scale_ctx *c = vctx;
  const int64_t es = (int64_t)lt_dtype_size(c->dtype);
  char *x = c->x + begin * es;
  const int64_t n = end - begin;
  if (c->dtype == LT_FLOAT32) {
    scale_f32((float *)x, n, (float)c->value);
  } else if (c->dtype == LT_FLOAT64) {
    double *d = (double *)x;
    for (int64_t k = 0; k < n; k++) d[k] *= c->value;
  } else { /* in float, rounded once, as mul_ */
    float buf[CPU_BUF];
    for (int64_t off = 0; off < n; off += CPU_BUF) {
      const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
      cpu_load(CPU_KIND_F32, buf, x + off * es, es, c->dtype, m);
      scale_f32(buf, m, (float)c->value);
      cpu_store(CPU_KIND_F32, x + off * es, es, c->dtype, buf, m);
    }
  }
}

lt_status cpu_scale_many(int64_t n, lt_tensor *const *ts, const lt_tensor *scalar) {
  /* The scalar's value as its dtype holds it; a float32 one converts to float
   * exactly, as mul_ by a 0-dim tensor of the tensor's dtype computes. */
  const double value = lt_load_double(lt_data(scalar), scalar->dtype);
  for (int64_t i = 0; i < n; i++) {
    scale_ctx c = {.x = lt_data(ts[i]), .dtype = ts[i]->dtype, .value = value};
    lt_parallel_for(lt_numel(ts[i]), SCALE_GRAIN, scale_range, &c);
  }
  return LT_OK;
}
