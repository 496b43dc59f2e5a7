/* Elementwise nn kernels: GELU (Hendrycks and Gimpel 2016; exact erf form
 * and the tanh approximation) with its derivative, and the masked scaling
 * of dropout. Contiguous operands, split in chunks over the thread pool;
 * float16 and bfloat16 elements are widened as they are read and rounded
 * once as they are written (the backend's half_pointwise). */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_nn_lowp.h"
#include "cpu/cpu_vmath.h"
#include "lt/threads.h"

typedef struct act_job {
  const void *x, *go;
  const uint8_t *mask;
  void *out;
  lt_gelu_approx approx;
  double scale;
  lt_dtype dt;
} act_job;

static const double SQRT_2_OVER_PI = 0.79788456080286535588; /* sqrt(2 / pi) */
static const double INV_SQRT_2PI = 0.39894228040143267794;   /* 1 / sqrt(2 pi) */
static const double GELU_KAPPA = 0.044715;
static const double SQRT_HALF = 0.70710678118654752440; /* 1 / sqrt(2) */

static double gelu_value(double x, lt_gelu_approx approx) {
  if (approx == LT_GELU_TANH) {
    const double inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    return 0.5 * x * (1.0 + tanh(inner));
  }
  return 0.5 * x * (1.0 + erf(x * SQRT_HALF));
}

static double gelu_derivative(double x, lt_gelu_approx approx) {
  if (approx == LT_GELU_TANH) {
    const double inner = SQRT_2_OVER_PI * (x + GELU_KAPPA * x * x * x);
    const double t = tanh(inner);
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_KAPPA * x * x);
  }
  /* d/dx x Phi(x) = Phi(x) + x phi(x) */
  return 0.5 * (1.0 + erf(x * SQRT_HALF)) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

NN_INLINE void gelu_impl(const act_job *j, int64_t i0, int64_t i1, lt_dtype dt) {
  for (int64_t i = i0; i < i1; i++) nn_st_dt(j->out, i, dt, gelu_value(nn_ld_dt(j->x, i, dt), j->approx));
}

/* float32: the same formulas in float, with cpu_vmath.h's tanh and exp and its Phi(x) - 1/2
 * made for GELU (vm_phi_centered), so that the loops vectorise (PyTorch computes float32
 * GELU in float too); the approximation is chosen once per range, outside the loops. The
 * erf form is x (1/2 + (Phi - 1/2)): -inf gives NaN as in double, large negative x -0.
 * The derivative's exp(-x^2/2) never has a positive argument: vm_expf_neg. fused: the
 * FMAs fused (vm_cpu_has_fma), a constant where inlined. */
NN_INLINE void gelu_f32(const act_job *j, int64_t i0, int64_t i1, bool fused) {
  const float *x = j->x;
  float *o = j->out;
  const float c = (float)SQRT_2_OVER_PI, kappa = (float)GELU_KAPPA;
  if (j->approx == LT_GELU_TANH) {
    for (int64_t i = i0; i < i1; i++) {
      const float v = x[i];
      o[i] = 0.5f * v * (1.0f + vm_tanhf(c * (v + kappa * v * v * v)));
    }
  } else {
    for (int64_t i = i0; i < i1; i++) o[i] = x[i] * (0.5f + vm_phi_centered_for(fused, x[i]));
  }
}

NN_INLINE void gelu_backward_f32(const act_job *j, int64_t i0, int64_t i1, bool fused) {
  const float *x = j->x, *go = j->go;
  float *o = j->out;
  const float c = (float)SQRT_2_OVER_PI, kappa = (float)GELU_KAPPA, inv_sqrt_2pi = (float)INV_SQRT_2PI;
  if (j->approx == LT_GELU_TANH) {
    for (int64_t i = i0; i < i1; i++) {
      const float v = x[i], t = vm_tanhf(c * (v + kappa * v * v * v));
      o[i] = go[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c * (1.0f + 3.0f * kappa * v * v));
    }
  } else {
    for (int64_t i = i0; i < i1; i++) {
      const float v = x[i];
      const float pdf = vm_exp_neg_for(fused, -0.5f * v * v);
      o[i] = go[i] * ((0.5f + vm_phi_centered_for(fused, v)) + v * inv_sqrt_2pi * pdf);
    }
  }
}

LT_CPU_CLONES static void gelu_range(void *ctx, int64_t i0, int64_t i1) {
  const act_job *j = ctx;
  if (j->dt != LT_FLOAT32)
    NN_BY_DTYPE(j->dt, gelu_impl, j, i0, i1);
  else if (vm_cpu_has_fma())
    gelu_f32(j, i0, i1, true);
  else
    gelu_f32(j, i0, i1, false);
}

lt_status cpu_nn_gelu(lt_tensor *out, const lt_tensor *x, lt_gelu_approx approx) {
  act_job j = {.x = lt_data(x), .out = lt_data(out), .approx = approx, .dt = x->dtype};
  lt_parallel_for(lt_numel(x), NN_GRAIN / 8, gelu_range, &j);
  return LT_OK;
}

NN_INLINE void gelu_backward_impl(const act_job *j, int64_t i0, int64_t i1, lt_dtype dt) {
  for (int64_t i = i0; i < i1; i++)
    nn_st_dt(j->out, i, dt, nn_ld_dt(j->go, i, dt) * gelu_derivative(nn_ld_dt(j->x, i, dt), j->approx));
}

LT_CPU_CLONES static void gelu_backward_range(void *ctx, int64_t i0, int64_t i1) {
  const act_job *j = ctx;
  if (j->dt != LT_FLOAT32)
    NN_BY_DTYPE(j->dt, gelu_backward_impl, j, i0, i1);
  else if (vm_cpu_has_fma())
    gelu_backward_f32(j, i0, i1, true);
  else
    gelu_backward_f32(j, i0, i1, false);
}

lt_status cpu_nn_gelu_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *x,
                               lt_gelu_approx approx) {
  act_job j = {.x = lt_data(x), .go = lt_data(go), .out = lt_data(gx), .approx = approx,
               .dt = x->dtype};
  lt_parallel_for(lt_numel(x), NN_GRAIN / 8, gelu_backward_range, &j);
  return LT_OK;
}

NN_INLINE void masked_scale_impl(const act_job *j, int64_t i0, int64_t i1, lt_dtype dt) {
  for (int64_t i = i0; i < i1; i++)
    nn_st_dt(j->out, i, dt, j->mask[i] ? nn_ld_dt(j->x, i, dt) * j->scale : 0.0);
}

LT_CPU_CLONES static void masked_scale_range(void *ctx, int64_t i0, int64_t i1) {
  const act_job *j = ctx;
  NN_BY_DTYPE(j->dt, masked_scale_impl, j, i0, i1);
}

lt_status cpu_nn_masked_scale(lt_tensor *out, const lt_tensor *x, const lt_tensor *mask,
                              double scale) {
  act_job j = {.x = lt_data(x), .mask = lt_data(mask), .out = lt_data(out), .scale = scale,
               .dt = x->dtype};
  lt_parallel_for(lt_numel(x), NN_GRAIN, masked_scale_range, &j);
  return LT_OK;
}
