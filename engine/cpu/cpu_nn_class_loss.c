/* cross_entropy and nll_loss over logits / log-probabilities [N, C, inner]
 * and targets [N, inner] (raw labels, index_base applied here; ignored
 * labels contribute nothing and do not count in the mean's denominator).
 *
 * cross_entropy fuses log_softmax and the negative log likelihood: one pass
 * per element finds the max and logsumexp (lse), and the loss follows from
 * lse and the target's logit without writing log-probabilities:
 *   loss = (1 - eps) w[y] (lse - z[y]) + eps / C sum_c w[c] (lse - z[c])
 * Backward rebuilds p = exp(z - lse) from the saved lse:
 *   d loss / d z[c] = (1 - eps) w[y] (p[c] - [c = y]) + eps / C (p[c] W - w[c])
 * with W = sum_c w[c] (label smoothing as PyTorch 1.13 defines it).
 *
 * Reductions run in NN_SUM_BLOCKS fixed blocks of elements summed in order,
 * so results do not depend on the thread count. */
#include <math.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_nn.h"
#include "cpu/cpu_rows.h"
#include "cpu/cpu_vmath.h"
#include "lt/threads.h"

typedef struct class_job {
  const void *z, *weight, *gl, *lse_in;
  const int64_t *target;
  void *loss, *lse, *gz;
  int64_t n, c, inner, elements, blocks;
  const lt_class_loss_opts *o;
  bool f64, per_element, log_probs; /* log_probs: nll_loss (z holds log p) */
  double scale;                     /* backward: d loss_total / d loss_e for mean/sum */
  double partial_loss[NN_SUM_BLOCKS], partial_weight[NN_SUM_BLOCKS];
} class_job;

static void class_job_init(class_job *j, const lt_tensor *z, const lt_tensor *target,
                           const lt_tensor *weight, const lt_class_loss_opts *o) {
  j->z = lt_data(z);
  j->target = lt_data(target);
  j->weight = weight ? lt_data(weight) : NULL;
  j->n = z->shape[0];
  j->c = z->shape[1];
  j->inner = z->shape[2];
  j->elements = j->n * j->inner;
  j->blocks = j->elements < NN_SUM_BLOCKS ? j->elements : NN_SUM_BLOCKS;
  j->o = o;
  j->f64 = nn_is_f64(z);
  j->per_element = o->reduction == LT_REDUCTION_NONE;
}

/* The element's class (0-based) or -1 when ignored. */
static int64_t class_of(const class_job *j, int64_t e) {
  const int64_t t = j->target[e];
  return t == j->o->ignore_index ? -1 : t - j->o->index_base;
}

NN_INLINE double class_weight(const class_job *j, int64_t c, bool f64) {
  return j->weight ? nn_ld(j->weight, c, f64) : 1.0;
}

/* Element e = (n, i) has logits at z[n C inner + c inner + i]. */
static int64_t logit_base(const class_job *j, int64_t e) {
  return (e / j->inner) * j->c * j->inner + e % j->inner;
}

/* log sum_c exp(z[c]) of the element whose logits start at base, in double. */
NN_INLINE double logsumexp(const class_job *j, int64_t base, bool f64) {
  double max = -INFINITY;
  for (int64_t c = 0; c < j->c; c++) {
    const double v = nn_ld(j->z, base + c * j->inner, f64);
    if (v > max || isnan(v)) max = v;
  }
  double sum = 0.0;
  for (int64_t c = 0; c < j->c; c++) sum += exp(nn_ld(j->z, base + c * j->inner, f64) - max);
  return max + log(sum);
}

/* The same for `rows` contiguous float32 rows from element e (class-last logits, the usual
 * [N, C]), in float lanes that vectorise (cpu_rows.h, a group of rows at once): a NaN logit
 * makes its exponential, the sum and the result NaN, as the double form's max does. */
NN_INLINE void logsumexp_rows_f32(const class_job *j, int64_t e, int rows, double *lse, bool fused) {
  const float *z = (const float *)j->z + e * j->c;
  float max[ROW_GROUP];
  rows_max_f32(z, j->c, j->c, rows, max);
  rows_reduce_f32(ROW_EXP_FOR(fused), z, NULL, NULL, j->c, j->c, max, rows, lse);
  for (int g = 0; g < rows; g++) lse[g] = (double)max[g] + log(lse[g]);
}

/* The log-sum-exp of element e (of a block ending before e1): float32 class-last rows a
 * group at a time into lses, whose first row is element *first; the rest one by one.
 * fused: the exponential's FMAs fused (vm_cpu_has_fma), a constant where inlined. */
NN_INLINE double element_lse(const class_job *j, int64_t e, int64_t e1, bool f64, double *lses,
                             int64_t *first, bool fused) {
  if (f64 || j->inner != 1) return logsumexp(j, logit_base(j, e), f64);
  if (e < *first || e >= *first + ROW_GROUP) {
    if (e1 - e < ROW_GROUP) {
      double lse;
      logsumexp_rows_f32(j, e, 1, &lse, fused);
      return lse;
    }
    *first = e;
    logsumexp_rows_f32(j, e, ROW_GROUP, lses, fused);
  }
  return lses[e - *first];
}

NN_INLINE void forward_impl(class_job *j, int64_t b0, int64_t b1, bool f64, bool fused) {
  const double eps = j->o->label_smoothing;
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t e0 = blk * j->elements / j->blocks, e1 = (blk + 1) * j->elements / j->blocks;
    double block_loss = 0.0, block_weight = 0.0, lses[ROW_GROUP];
    int64_t first = -ROW_GROUP; /* no row's lse in lses yet */
    for (int64_t e = e0; e < e1; e++) {
      const int64_t base = logit_base(j, e), y = class_of(j, e);
      double lse = 0.0;
      if (!j->log_probs) {
        lse = element_lse(j, e, e1, f64, lses, &first, fused);
        nn_st(j->lse, e, f64, lse);
      }
      double loss = 0.0, wy = 0.0;
      if (y >= 0) {
        wy = class_weight(j, y, f64);
        loss = (1.0 - eps) * wy * (lse - nn_ld(j->z, base + y * j->inner, f64));
        if (eps > 0.0) {
          double smooth = 0.0;
          for (int64_t c = 0; c < j->c; c++)
            smooth += class_weight(j, c, f64) * (lse - nn_ld(j->z, base + c * j->inner, f64));
          loss += eps / (double)j->c * smooth;
        }
      }
      if (j->per_element) nn_st(j->loss, e, f64, loss);
      block_loss += loss;
      block_weight += wy;
    }
    j->partial_loss[blk] = block_loss;
    j->partial_weight[blk] = block_weight;
  }
}

LT_CPU_CLONES static void forward_range(void *ctx, int64_t b0, int64_t b1) {
  class_job *j = ctx;
  if (j->f64)
    forward_impl(j, b0, b1, true, false);
  else if (vm_cpu_has_fma())
    forward_impl(j, b0, b1, false, true);
  else
    forward_impl(j, b0, b1, false, false);
}

static void run_forward(class_job *j) {
  if (j->blocks > 0)
    lt_parallel_for(j->blocks, NN_GRAIN / ((j->elements / j->blocks) * (j->c + 1) + 1) + 1,
                    forward_range, j);
  if (j->per_element) return;
  double total = 0.0, weight = 0.0;
  for (int64_t b = 0; b < j->blocks; b++) total += j->partial_loss[b], weight += j->partial_weight[b];
  /* mean over no (or only ignored) elements is 0 / 0 = NaN, as in PyTorch */
  nn_st(j->loss, 0, j->f64, j->o->reduction == LT_REDUCTION_MEAN ? total / weight : total);
}

lt_status cpu_nn_cross_entropy(lt_tensor *loss, lt_tensor *lse, const lt_tensor *logits,
                               const lt_tensor *target, const lt_tensor *weight,
                               const lt_class_loss_opts *o) {
  class_job j = {0};
  class_job_init(&j, logits, target, weight, o);
  j.loss = lt_data(loss);
  j.lse = lt_data(lse);
  run_forward(&j);
  return LT_OK;
}

lt_status cpu_nn_nll_loss(lt_tensor *loss, const lt_tensor *lp, const lt_tensor *target,
                          const lt_tensor *weight, const lt_class_loss_opts *o) {
  class_job j = {0};
  class_job_init(&j, lp, target, weight, o);
  j.loss = lt_data(loss);
  j.log_probs = true; /* lse = 0: loss = -w[y] log p[y] */
  run_forward(&j);
  return LT_OK;
}

/* The mean's denominator: the summed weight of the elements not ignored. */
static double total_weight(const class_job *j) {
  double w = 0.0;
  for (int64_t e = 0; e < j->elements; e++) {
    const int64_t y = class_of(j, e);
    if (y >= 0) w += j->weight ? nn_ld(j->weight, y, j->f64) : 1.0;
  }
  return w;
}

/* The gradient of one contiguous float32 row of logits (class-last), the formula below in
 * float with cpu_vmath.h's exp so that it vectorises; the target's -1 goes in after. */
NN_INLINE void backward_row_f32(const class_job *j, int64_t base, int64_t y, float lse, double s,
                                double wy, double wsum, bool fused) {
  const double eps = j->o->label_smoothing;
  const float *z = (const float *)j->z + base, *w = j->weight;
  float *gz = (float *)j->gz + base;
  const float hard = (float)(s * (1.0 - eps) * wy), soft = (float)(s * eps / (double)j->c);
  const float soft_p = soft * (float)wsum;
  if (eps > 0.0)
    for (int64_t c = 0; c < j->c; c++) {
      const float p = vm_exp_neg_for(fused, z[c] - lse);
      gz[c] = hard * p + (soft_p * p - soft * (w ? w[c] : 1.0f));
    }
  else
    row_scaled_exp_f32(fused, gz, z, j->c, lse, hard);
  gz[y] -= hard;
}

NN_INLINE void backward_impl(const class_job *j, int64_t e0, int64_t e1, bool f64, bool fused) {
  const double eps = j->o->label_smoothing;
  double wsum = 0.0;
  if (!j->log_probs && eps > 0.0)
    for (int64_t c = 0; c < j->c; c++) wsum += class_weight(j, c, f64);
  for (int64_t e = e0; e < e1; e++) {
    const int64_t base = logit_base(j, e), y = class_of(j, e);
    if (y < 0) {
      for (int64_t c = 0; c < j->c; c++) nn_st(j->gz, base + c * j->inner, f64, 0.0);
      continue;
    }
    const double s = j->per_element ? nn_ld(j->gl, e, f64) : j->scale;
    const double wy = class_weight(j, y, f64);
    if (j->log_probs) {
      for (int64_t c = 0; c < j->c; c++) nn_st(j->gz, base + c * j->inner, f64, 0.0);
      nn_st(j->gz, base + y * j->inner, f64, -wy * s);
      continue;
    }
    const double lse = nn_ld(j->lse_in, e, f64);
    if (!f64 && j->inner == 1) {
      backward_row_f32(j, base, y, (float)lse, s, wy, wsum, fused);
      continue;
    }
    for (int64_t c = 0; c < j->c; c++) {
      const double p = exp(nn_ld(j->z, base + c * j->inner, f64) - lse);
      double g = (1.0 - eps) * wy * (p - (c == y ? 1.0 : 0.0));
      if (eps > 0.0) g += eps / (double)j->c * (p * wsum - class_weight(j, c, f64));
      nn_st(j->gz, base + c * j->inner, f64, s * g);
    }
  }
}

LT_CPU_CLONES static void backward_range(void *ctx, int64_t e0, int64_t e1) {
  const class_job *j = ctx;
  if (j->f64)
    backward_impl(j, e0, e1, true, false);
  else if (vm_cpu_has_fma())
    backward_impl(j, e0, e1, false, true);
  else
    backward_impl(j, e0, e1, false, false);
}

static void run_backward(class_job *j) {
  if (!j->per_element) {
    const double g = nn_ld(j->gl, 0, j->f64);
    j->scale = j->o->reduction == LT_REDUCTION_MEAN ? g / total_weight(j) : g;
  }
  lt_parallel_for(j->elements, NN_GRAIN / (j->c + 1) + 1, backward_range, j);
}

lt_status cpu_nn_cross_entropy_backward(lt_tensor *glogits, const lt_tensor *gl,
                                        const lt_tensor *logits, const lt_tensor *target,
                                        const lt_tensor *weight, const lt_tensor *lse,
                                        const lt_class_loss_opts *o) {
  class_job j = {0};
  class_job_init(&j, logits, target, weight, o);
  j.gl = lt_data(gl);
  j.lse_in = lt_data(lse);
  j.gz = lt_data(glogits);
  run_backward(&j);
  return LT_OK;
}

lt_status cpu_nn_nll_loss_backward(lt_tensor *glp, const lt_tensor *gl, const lt_tensor *target,
                                   const lt_tensor *weight, const lt_class_loss_opts *o) {
  class_job j = {0};
  class_job_init(&j, glp, target, weight, o);
  j.z = NULL; /* not read: the gradient depends on targets and weights only */
  j.gl = lt_data(gl);
  j.gz = lt_data(glp);
  j.log_probs = true;
  run_backward(&j);
  return LT_OK;
}
