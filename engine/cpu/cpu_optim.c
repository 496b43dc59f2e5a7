/* Optimizer kernels: one pass per parameter reading the gradient and the
 * state once and writing the parameter and state once, where PyTorch's
 * single-tensor step runs four to seven elementwise passes. The per-element
 * arithmetic repeats PyTorch's operations in the same order and precision
 * (float for float32, double for float64), so results agree to a few ulps.
 * 16-bit tensors are widened to float in stack buffers and rounded once when
 * stored. Big tensors are split over the thread pool. The multi-tensor
 * forms run the same kernels tensor after tensor. */
#include <math.h>
#include <stdatomic.h>
#include <stddef.h>

#include "core/optim_backend.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_foreach.h"
#include "lt/threads.h"

/* Elements per task: below this a parameter is updated by one thread. */
#define OPTIM_GRAIN 32768

/* ---- SGD ---- */

typedef struct sgd_ctx {
  char *param, *buf;
  const char *grad;
  lt_dtype dtype;
  bool init_buffer;
  const lt_sgd_options *o;
} sgd_ctx;

/* The body for element type T: d_p (maximize, weight decay), the momentum
 * buffer (mul_ then add_ with alpha 1 - dampening), nesterov, add_ with
 * alpha -lr. Scalars are cast to T as PyTorch casts a Python float alpha. */
#define SGD_BODY(T)                                                             \
  do {                                                                          \
    const T wd = (T)o->weight_decay, mom = (T)o->momentum;                      \
    const T keep = (T)(1.0 - o->dampening), neg_lr = (T)(-o->lr);               \
    const bool maximize = o->maximize, nesterov = o->nesterov;                  \
    const bool decay = o->weight_decay != 0.0;                                  \
    if (b && !init && !maximize && !nesterov && !decay) {                       \
      /* The usual case (momentum, nothing else), written out: the general    \
       * loop's flag tests keep the compiler from vectorising it. */           \
      for (int64_t i = 0; i < n; i++) {                                         \
        T bi = b[i] * mom;                                                      \
        bi = bi + keep * g[i];                                                  \
        b[i] = bi;                                                              \
        p[i] = p[i] + neg_lr * bi;                                              \
      }                                                                         \
      break;                                                                    \
    }                                                                           \
    for (int64_t i = 0; i < n; i++) {                                           \
      T d = maximize ? -g[i] : g[i];                                            \
      if (decay) d = d + wd * p[i];                                             \
      if (b) {                                                                  \
        T bi = init ? d : b[i] * mom;                                           \
        if (!init) bi = bi + keep * d;                                          \
        b[i] = bi;                                                              \
        d = nesterov ? d + mom * bi : bi;                                       \
      }                                                                         \
      p[i] = p[i] + neg_lr * d;                                                 \
    }                                                                           \
  } while (0)

/* restrict: a parameter, its gradient and its state never share memory, and
 * saying so lets the compiler vectorise the loop (it would not otherwise). */
LT_CPU_CLONES static void sgd_float(float *restrict p, const float *restrict g, float *restrict b, int64_t n,
                      bool init, const lt_sgd_options *o) {
  SGD_BODY(float);
}

static void sgd_double(double *restrict p, const double *restrict g, double *restrict b,
                       int64_t n, bool init, const lt_sgd_options *o) {
  SGD_BODY(double);
}

static void sgd_range(void *vctx, int64_t begin, int64_t end) {
  const sgd_ctx *c = vctx;
  const size_t es = lt_dtype_size(c->dtype);
  char *p = c->param + begin * es, *b = c->buf ? c->buf + begin * es : NULL;
  const char *g = c->grad + begin * es;
  const int64_t n = end - begin;
  if (c->dtype == LT_FLOAT32) {
    sgd_float((float *)p, (const float *)g, (float *)b, n, c->init_buffer, c->o);
    return;
  }
  if (c->dtype == LT_FLOAT64) {
    sgd_double((double *)p, (const double *)g, (double *)b, n, c->init_buffer, c->o);
    return;
  }
  /* float16 / bfloat16: widen a chunk, update in float, round once. */
  float pf[CPU_BUF], gf[CPU_BUF], bf[CPU_BUF];
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
    const int64_t at = off * (int64_t)es;
    cpu_load(CPU_KIND_F32, pf, p + at, (int64_t)es, c->dtype, m);
    cpu_load(CPU_KIND_F32, gf, g + at, (int64_t)es, c->dtype, m);
    if (b && !c->init_buffer) cpu_load(CPU_KIND_F32, bf, b + at, (int64_t)es, c->dtype, m);
    sgd_float(pf, gf, b ? bf : NULL, m, c->init_buffer, c->o);
    cpu_store(CPU_KIND_F32, p + at, (int64_t)es, c->dtype, pf, m);
    if (b) cpu_store(CPU_KIND_F32, b + at, (int64_t)es, c->dtype, bf, m);
  }
}

static lt_status cpu_sgd(lt_tensor *param, const lt_tensor *grad, lt_tensor *buf,
                         bool init_buffer, const lt_sgd_options *o) {
  sgd_ctx c = {lt_data(param), buf ? lt_data(buf) : NULL, lt_data(grad), param->dtype,
               init_buffer, o};
  lt_parallel_for(lt_numel(param), OPTIM_GRAIN, sgd_range, &c);
  return LT_OK;
}

/* ---- Adam / AdamW ---- */

typedef struct adam_ctx {
  char *param, *m, *v, *vmax;
  const char *grad;
  lt_dtype dtype;
  const lt_adam_scalars *s;
} adam_ctx;

/* AdamW's param.mul_(1 - lr*wd); Adam's grad.add(param, alpha=wd);
 * exp_avg.mul_(b1).add_(grad, alpha=1-b1);
 * exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1-b2); amsgrad's maximum
 * (NaN propagates as torch.maximum); denom = sqrt(v) / bc2_sqrt + eps;
 * param.addcdiv_(exp_avg, denom, value=-step_size). */
#define ADAM_BODY(T, SQRT)                                                      \
  do {                                                                          \
    const T b1 = (T)s->beta1, b2 = (T)s->beta2;                                 \
    const T omb1 = (T)(1.0 - s->beta1), omb2 = (T)(1.0 - s->beta2);             \
    const T wd = (T)s->weight_decay, scale = (T)s->param_scale;                 \
    const T bc2 = (T)s->bias_correction2_sqrt, eps = (T)s->eps;                 \
    const T neg_step = (T)(-s->step_size);                                      \
    for (int64_t i = 0; i < n; i++) {                                           \
      T gi = s->maximize ? -g[i] : g[i];                                        \
      T pi = p[i];                                                              \
      if (s->param_scale != 1.0) pi = pi * scale;                               \
      if (s->weight_decay != 0.0) gi = gi + wd * pi;                            \
      T mi = m[i] * b1;                                                         \
      mi = mi + omb1 * gi;                                                      \
      T vi = v[i] * b2;                                                         \
      vi = vi + omb2 * gi * gi;                                                 \
      m[i] = mi;                                                                \
      v[i] = vi;                                                                \
      if (vmax) {                                                               \
        if (vi > vmax[i] || vi != vi) vmax[i] = vi;                             \
        vi = vmax[i];                                                           \
      }                                                                         \
      const T denom = SQRT(vi) / bc2 + eps;                                     \
      p[i] = pi + neg_step * mi / denom;                                        \
    }                                                                           \
  } while (0)

LT_CPU_CLONES static void adam_float(float *restrict p, const float *restrict g, float *restrict m,
                       float *restrict v, float *restrict vmax, int64_t n,
                       const lt_adam_scalars *s) {
  ADAM_BODY(float, sqrtf);
}

static void adam_double(double *restrict p, const double *restrict g, double *restrict m,
                        double *restrict v, double *restrict vmax, int64_t n,
                        const lt_adam_scalars *s) {
  ADAM_BODY(double, sqrt);
}

static void adam_range(void *vctx, int64_t begin, int64_t end) {
  const adam_ctx *c = vctx;
  const size_t es = lt_dtype_size(c->dtype);
  const int64_t at0 = begin * (int64_t)es, n = end - begin;
  char *p = c->param + at0, *m = c->m + at0, *v = c->v + at0;
  char *vmax = c->vmax ? c->vmax + at0 : NULL;
  const char *g = c->grad + at0;
  if (c->dtype == LT_FLOAT32) {
    adam_float((float *)p, (const float *)g, (float *)m, (float *)v, (float *)vmax, n, c->s);
    return;
  }
  if (c->dtype == LT_FLOAT64) {
    adam_double((double *)p, (const double *)g, (double *)m, (double *)v, (double *)vmax, n,
                c->s);
    return;
  }
  /* float16 / bfloat16: the whole update in float, so eps 1e-8 survives. */
  float pf[CPU_BUF], gf[CPU_BUF], mf[CPU_BUF], vf[CPU_BUF], xf[CPU_BUF];
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t k = n - off < CPU_BUF ? n - off : CPU_BUF;
    const int64_t at = off * (int64_t)es;
    cpu_load(CPU_KIND_F32, pf, p + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, gf, g + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, mf, m + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, vf, v + at, (int64_t)es, c->dtype, k);
    if (vmax) cpu_load(CPU_KIND_F32, xf, vmax + at, (int64_t)es, c->dtype, k);
    adam_float(pf, gf, mf, vf, vmax ? xf : NULL, k, c->s);
    cpu_store(CPU_KIND_F32, p + at, (int64_t)es, c->dtype, pf, k);
    cpu_store(CPU_KIND_F32, m + at, (int64_t)es, c->dtype, mf, k);
    cpu_store(CPU_KIND_F32, v + at, (int64_t)es, c->dtype, vf, k);
    if (vmax) cpu_store(CPU_KIND_F32, vmax + at, (int64_t)es, c->dtype, xf, k);
  }
}

static lt_status cpu_adam(lt_tensor *param, const lt_tensor *grad, lt_tensor *exp_avg,
                          lt_tensor *exp_avg_sq, lt_tensor *max_exp_avg_sq,
                          const lt_adam_scalars *s) {
  adam_ctx c = {lt_data(param), lt_data(exp_avg), lt_data(exp_avg_sq),
                max_exp_avg_sq ? lt_data(max_exp_avg_sq) : NULL, lt_data(grad), param->dtype, s};
  lt_parallel_for(lt_numel(param), OPTIM_GRAIN, adam_range, &c);
  return LT_OK;
}

/* ---- RMSprop ---- */

typedef struct rmsprop_ctx {
  char *param, *v, *buf, *gavg;
  const char *grad;
  lt_dtype dtype;
  const lt_rmsprop_options *o;
} rmsprop_ctx;

/* torch.optim.RMSprop's single-tensor step: grad.add(param, alpha=wd);
 * square_avg.mul_(alpha).addcmul_(grad, grad, value=1-alpha); centered:
 * grad_avg.lerp_(grad, 1-alpha) (lerp's two forms, chosen by the weight as
 * ATen's scalar lerp chooses) and square_avg.addcmul(grad_avg, grad_avg,
 * value=-1).sqrt_(), else square_avg.sqrt(); add_(eps); momentum:
 * buf.mul_(momentum).addcdiv_(grad, avg), param.add_(buf, alpha=-lr); else
 * param.addcdiv_(grad, avg, value=-lr). */
#define RMSPROP_BODY(T, SQRT)                                                   \
  do {                                                                          \
    const T wd = (T)o->weight_decay, alpha = (T)o->alpha;                       \
    const T w = (T)(1.0 - o->alpha), eps = (T)o->eps;                           \
    const T mom = (T)o->momentum, neg_lr = (T)(-o->lr);                         \
    const bool small = fabs(1.0 - o->alpha) < 0.5;                              \
    const T one_minus_w = (T)1 - w;                                             \
    for (int64_t i = 0; i < n; i++) {                                           \
      T gi = o->maximize ? -g[i] : g[i];                                        \
      if (o->weight_decay != 0.0) gi = gi + wd * p[i];                          \
      T vi = v[i] * alpha;                                                      \
      vi = vi + w * gi * gi;                                                    \
      v[i] = vi;                                                                \
      T avg;                                                                    \
      if (ga) {                                                                 \
        const T a = ga[i];                                                      \
        const T ai = small ? a + w * (gi - a) : gi - (gi - a) * one_minus_w;    \
        ga[i] = ai;                                                             \
        avg = SQRT(vi - ai * ai);                                               \
      } else {                                                                  \
        avg = SQRT(vi);                                                         \
      }                                                                         \
      avg = avg + eps;                                                          \
      if (b) {                                                                  \
        T bi = b[i] * mom;                                                      \
        bi = bi + gi / avg;                                                     \
        b[i] = bi;                                                              \
        p[i] = p[i] + neg_lr * bi;                                              \
      } else {                                                                  \
        p[i] = p[i] + neg_lr * gi / avg;                                        \
      }                                                                         \
    }                                                                           \
  } while (0)

LT_CPU_CLONES static void rmsprop_float(float *restrict p, const float *restrict g,
                                        float *restrict v, float *restrict b,
                                        float *restrict ga, int64_t n,
                                        const lt_rmsprop_options *o) {
  RMSPROP_BODY(float, sqrtf);
}

static void rmsprop_double(double *restrict p, const double *restrict g, double *restrict v,
                           double *restrict b, double *restrict ga, int64_t n,
                           const lt_rmsprop_options *o) {
  RMSPROP_BODY(double, sqrt);
}

static void rmsprop_range(void *vctx, int64_t begin, int64_t end) {
  const rmsprop_ctx *c = vctx;
  const size_t es = lt_dtype_size(c->dtype);
  const int64_t at0 = begin * (int64_t)es, n = end - begin;
  char *p = c->param + at0, *v = c->v + at0;
  char *b = c->buf ? c->buf + at0 : NULL, *ga = c->gavg ? c->gavg + at0 : NULL;
  const char *g = c->grad + at0;
  if (c->dtype == LT_FLOAT32) {
    rmsprop_float((float *)p, (const float *)g, (float *)v, (float *)b, (float *)ga, n, c->o);
    return;
  }
  if (c->dtype == LT_FLOAT64) {
    rmsprop_double((double *)p, (const double *)g, (double *)v, (double *)b, (double *)ga, n,
                   c->o);
    return;
  }
  /* float16 / bfloat16: in float, rounded once, so eps survives. */
  float pf[CPU_BUF], gf[CPU_BUF], vf[CPU_BUF], bf[CPU_BUF], af[CPU_BUF];
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t k = n - off < CPU_BUF ? n - off : CPU_BUF;
    const int64_t at = off * (int64_t)es;
    cpu_load(CPU_KIND_F32, pf, p + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, gf, g + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, vf, v + at, (int64_t)es, c->dtype, k);
    if (b) cpu_load(CPU_KIND_F32, bf, b + at, (int64_t)es, c->dtype, k);
    if (ga) cpu_load(CPU_KIND_F32, af, ga + at, (int64_t)es, c->dtype, k);
    rmsprop_float(pf, gf, vf, b ? bf : NULL, ga ? af : NULL, k, c->o);
    cpu_store(CPU_KIND_F32, p + at, (int64_t)es, c->dtype, pf, k);
    cpu_store(CPU_KIND_F32, v + at, (int64_t)es, c->dtype, vf, k);
    if (b) cpu_store(CPU_KIND_F32, b + at, (int64_t)es, c->dtype, bf, k);
    if (ga) cpu_store(CPU_KIND_F32, ga + at, (int64_t)es, c->dtype, af, k);
  }
}

/* ---- Adagrad ---- */

typedef struct adagrad_ctx {
  char *param, *sum;
  const char *grad;
  lt_dtype dtype;
  double clr;
  const lt_adagrad_options *o;
} adagrad_ctx;

/* torch.optim.Adagrad's single-tensor dense step: grad.add(param,
 * alpha=wd); state_sum.addcmul_(grad, grad, value=1); std =
 * state_sum.sqrt().add_(eps); param.addcdiv_(grad, std, value=-clr). */
#define ADAGRAD_BODY(T, SQRT)                                                   \
  do {                                                                          \
    const T wd = (T)o->weight_decay, eps = (T)o->eps, neg_clr = (T)(-clr);      \
    for (int64_t i = 0; i < n; i++) {                                           \
      T gi = o->maximize ? -g[i] : g[i];                                        \
      if (o->weight_decay != 0.0) gi = gi + wd * p[i];                          \
      const T si = s[i] + gi * gi;                                              \
      s[i] = si;                                                                \
      const T std = SQRT(si) + eps;                                             \
      p[i] = p[i] + neg_clr * gi / std;                                         \
    }                                                                           \
  } while (0)

LT_CPU_CLONES static void adagrad_float(float *restrict p, const float *restrict g,
                                        float *restrict s, int64_t n, double clr,
                                        const lt_adagrad_options *o) {
  ADAGRAD_BODY(float, sqrtf);
}

static void adagrad_double(double *restrict p, const double *restrict g, double *restrict s,
                           int64_t n, double clr, const lt_adagrad_options *o) {
  ADAGRAD_BODY(double, sqrt);
}

static void adagrad_range(void *vctx, int64_t begin, int64_t end) {
  const adagrad_ctx *c = vctx;
  const size_t es = lt_dtype_size(c->dtype);
  const int64_t at0 = begin * (int64_t)es, n = end - begin;
  char *p = c->param + at0, *s = c->sum + at0;
  const char *g = c->grad + at0;
  if (c->dtype == LT_FLOAT32) {
    adagrad_float((float *)p, (const float *)g, (float *)s, n, c->clr, c->o);
    return;
  }
  if (c->dtype == LT_FLOAT64) {
    adagrad_double((double *)p, (const double *)g, (double *)s, n, c->clr, c->o);
    return;
  }
  float pf[CPU_BUF], gf[CPU_BUF], sf[CPU_BUF];
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t k = n - off < CPU_BUF ? n - off : CPU_BUF;
    const int64_t at = off * (int64_t)es;
    cpu_load(CPU_KIND_F32, pf, p + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, gf, g + at, (int64_t)es, c->dtype, k);
    cpu_load(CPU_KIND_F32, sf, s + at, (int64_t)es, c->dtype, k);
    adagrad_float(pf, gf, sf, k, c->clr, c->o);
    cpu_store(CPU_KIND_F32, p + at, (int64_t)es, c->dtype, pf, k);
    cpu_store(CPU_KIND_F32, s + at, (int64_t)es, c->dtype, sf, k);
  }
}

/* ---- multi-tensor forms ----
 * Each tensor is already split over the pool when it is big; small ones run
 * one after another, as the single steps would. */

static lt_status cpu_sgd_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                              lt_tensor *const *bufs, const bool *init_buffers,
                              const lt_sgd_options *o) {
  for (int64_t i = 0; i < n; i++)
    LT_TRY(cpu_sgd(params[i], grads[i], bufs ? bufs[i] : NULL, init_buffers[i], o));
  return LT_OK;
}

static lt_status cpu_adam_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                               lt_tensor *const *exp_avgs, lt_tensor *const *exp_avg_sqs,
                               lt_tensor *const *max_exp_avg_sqs, const lt_adam_scalars *s) {
  for (int64_t i = 0; i < n; i++)
    LT_TRY(cpu_adam(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                    max_exp_avg_sqs ? max_exp_avg_sqs[i] : NULL, &s[i]));
  return LT_OK;
}

static lt_status cpu_rmsprop_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                                  lt_tensor *const *square_avgs, lt_tensor *const *bufs,
                                  lt_tensor *const *grad_avgs, const lt_rmsprop_options *o) {
  for (int64_t i = 0; i < n; i++) {
    rmsprop_ctx c = {lt_data(params[i]),
                     lt_data(square_avgs[i]),
                     bufs ? lt_data(bufs[i]) : NULL,
                     grad_avgs ? lt_data(grad_avgs[i]) : NULL,
                     lt_data(grads[i]),
                     params[i]->dtype,
                     o};
    lt_parallel_for(lt_numel(params[i]), OPTIM_GRAIN, rmsprop_range, &c);
  }
  return LT_OK;
}

static lt_status cpu_adagrad_many(int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
                                  lt_tensor *const *sums, const double *clrs,
                                  const lt_adagrad_options *o) {
  for (int64_t i = 0; i < n; i++) {
    adagrad_ctx c = {lt_data(params[i]), lt_data(sums[i]), lt_data(grads[i]),
                     params[i]->dtype,   clrs[i],          o};
    lt_parallel_for(lt_numel(params[i]), OPTIM_GRAIN, adagrad_range, &c);
  }
  return LT_OK;
}

/* ---- GradScaler's unscale ---- */

typedef struct unscale_ctx {
  char *grad;
  lt_dtype dtype;
  float inv_scale;
  atomic_bool found; /* set by any task that saw an inf or NaN */
} unscale_ctx;

/* The check reads each value before it is scaled, in one pass. `bad`
 * accumulates with | rather than a branch so the loop vectorises. */
#define UNSCALE_BODY(T, ISFINITE)                                               \
  do {                                                                          \
    int bad = 0;                                                                \
    for (int64_t i = 0; i < n; i++) {                                           \
      bad |= !ISFINITE(g[i]);                                                   \
      g[i] = g[i] * inv;                                                        \
    }                                                                           \
    return bad != 0;                                                            \
  } while (0)

static bool unscale_float(float *g, int64_t n, float inv) { UNSCALE_BODY(float, isfinite); }
/* float64 multiplies by the float32 scale widened, as mul_ with a number. */
static bool unscale_double(double *g, int64_t n, double inv) { UNSCALE_BODY(double, isfinite); }

static void unscale_range(void *vctx, int64_t begin, int64_t end) {
  unscale_ctx *c = vctx;
  const size_t es = lt_dtype_size(c->dtype);
  char *g = c->grad + begin * (int64_t)es;
  const int64_t n = end - begin;
  bool bad = false;
  if (c->dtype == LT_FLOAT32) {
    bad = unscale_float((float *)g, n, c->inv_scale);
  } else if (c->dtype == LT_FLOAT64) {
    bad = unscale_double((double *)g, n, (double)c->inv_scale);
  } else {
    /* float16 / bfloat16: in float, rounded once, as mul_ computes them. */
    float gf[CPU_BUF];
    for (int64_t off = 0; off < n; off += CPU_BUF) {
      const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
      const int64_t at = off * (int64_t)es;
      cpu_load(CPU_KIND_F32, gf, g + at, (int64_t)es, c->dtype, m);
      if (unscale_float(gf, m, c->inv_scale)) bad = true;
      cpu_store(CPU_KIND_F32, g + at, (int64_t)es, c->dtype, gf, m);
    }
  }
  if (bad) atomic_store_explicit(&c->found, true, memory_order_relaxed);
}

static lt_status cpu_unscale_many(int64_t n, lt_tensor *const *grads, float inv_scale,
                                  lt_tensor *found_inf) {
  bool found = false;
  for (int64_t i = 0; i < n; i++) {
    unscale_ctx c = {.grad = lt_data(grads[i]), .dtype = grads[i]->dtype, .inv_scale = inv_scale};
    atomic_init(&c.found, false);
    lt_parallel_for(lt_numel(grads[i]), OPTIM_GRAIN, unscale_range, &c);
    if (atomic_load(&c.found)) found = true;
  }
  /* Only ever set: the caller zeroes the flag and may gather several calls. */
  if (found) *(float *)lt_data(found_inf) = 1.0f;
  return LT_OK;
}

const lt_optim_backend lt_cpu_optim_backend = {
    .name = "cpu",
    .sgd_many = cpu_sgd_many,
    .adam_many = cpu_adam_many,
    .unscale_many = cpu_unscale_many,
    .rmsprop_many = cpu_rmsprop_many,
    .adagrad_many = cpu_adagrad_many,
    .norm_many = cpu_norm_many,
    .scale_many = cpu_scale_many,
};
