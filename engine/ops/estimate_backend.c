/* The kernel tables that serve every device while an estimate runs
 * (lt.memory.estimate): ops/ validates, computes result shapes and dtypes
 * and allocates results exactly as in a real run, then calls one of these,
 * which computes nothing. The memory they hand back is address space only
 * (alloc/estimate.c), so nothing may read or write it.
 *
 * Kernels that take scratch memory of their own take it here too, so that
 * the estimate's peak includes it: on the CPU, convolution and 16-bit linear
 * run their planning and take and give back their workspace, then return
 * before touching data (they check lt_estimating). cuDNN's and cuBLAS's
 * workspaces depend on the algorithm the library picks on the real device
 * and are not modelled.
 *
 * read_element (item) gives a real tensor's element (real tensors keep
 * their data), and 0 for a tensor made during the estimate. */
#include <string.h>

#include "core/backend.h"
#include "core/nn_backend.h"
#include "core/optim_backend.h"

/* ---- the core table ---- */

static lt_status e_binary(lt_binary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a,
                          const lt_tensor *b, lt_scalar s, bool scalar_first) {
  (void)op, (void)compute, (void)out, (void)a, (void)b, (void)s, (void)scalar_first;
  return LT_OK;
}

static lt_status e_unary(lt_unary_op op, lt_dtype compute, lt_tensor *out, const lt_tensor *a) {
  (void)op, (void)compute, (void)out, (void)a;
  return LT_OK;
}

static lt_status e_clamp(lt_dtype compute, lt_tensor *out, const lt_tensor *a, bool has_lo,
                         lt_scalar lo, bool has_hi, lt_scalar hi) {
  (void)compute, (void)out, (void)a, (void)has_lo, (void)lo, (void)has_hi, (void)hi;
  return LT_OK;
}

static lt_status e_where(lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                         const lt_tensor *b) {
  (void)out, (void)cond, (void)a, (void)b;
  return LT_OK;
}

static lt_status e_copy(lt_tensor *dst, const lt_tensor *src) {
  (void)dst, (void)src;
  return LT_OK;
}

static lt_status e_fill(lt_tensor *dst, double value) {
  (void)dst, (void)value;
  return LT_OK;
}

/* The real backends, for reading a real tensor's element. */
static const lt_backend *real_backends[LT_NDEVICE_TYPES];

static lt_status e_read_element(const lt_tensor *t, void *host_dst) {
  const lt_device dev = t->storage->device;
  const lt_backend *real = (unsigned)dev.type < LT_NDEVICE_TYPES ? real_backends[dev.type] : NULL;
  if (!t->storage->meta && real) return real->read_element(t, host_dst);
  memset(host_dst, 0, lt_dtype_size(t->dtype));
  return LT_OK;
}

static lt_status e_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in,
                          const bool *reduced) {
  (void)op, (void)out, (void)in, (void)reduced;
  return LT_OK;
}

static lt_status e_reduce_index(bool is_max, lt_tensor *values, lt_tensor *indices,
                                const lt_tensor *in, int dim, int64_t index_base) {
  (void)is_max, (void)values, (void)indices, (void)in, (void)dim, (void)index_base;
  return LT_OK;
}

static lt_status e_matmul(lt_tensor *out, const lt_tensor *a, const lt_tensor *b) {
  (void)out, (void)a, (void)b;
  return LT_OK;
}

static lt_status e_index_select(lt_tensor *out, const lt_tensor *in, int dim,
                                const int64_t *rows, int64_t n, int64_t base) {
  (void)out, (void)in, (void)dim, (void)rows, (void)n, (void)base;
  return LT_OK;
}

static lt_status e_sort(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                        bool descending, int64_t k, int64_t index_base) {
  (void)values, (void)indices, (void)in, (void)dim, (void)descending, (void)k, (void)index_base;
  return LT_OK;
}

static lt_status e_gather(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                          int64_t base) {
  (void)out, (void)in, (void)dim, (void)index, (void)base;
  return LT_OK;
}

static lt_status e_scatter(bool add, lt_tensor *out, int dim, const lt_tensor *index,
                           int64_t base, const lt_tensor *src, lt_scalar value) {
  (void)add, (void)out, (void)dim, (void)index, (void)base, (void)src, (void)value;
  return LT_OK;
}

static const lt_backend estimate_backend = {
    .name = "estimate",
    .binary = e_binary,
    .unary = e_unary,
    .clamp = e_clamp,
    .where = e_where,
    .copy = e_copy,
    .copy_non_blocking = e_copy,
    .fill = e_fill,
    .read_element = e_read_element,
    .reduce = e_reduce,
    .reduce_index = e_reduce_index,
    .matmul = e_matmul,
    .index_select = e_index_select,
    .sort = e_sort,
    .gather = e_gather,
    .scatter = e_scatter,
};

const lt_backend *lt_estimate_backend(lt_device_type type, const lt_backend *real) {
  if ((unsigned)type < LT_NDEVICE_TYPES) real_backends[type] = real;
  return &estimate_backend;
}

/* ---- the nn table ---- */

/* The nn and optimizer kernels compute nothing while estimating: each
 * signature gets a function that ignores its arguments and returns at once. */
#define E_NO_WORK(name, params, uses)                                                            \
  static lt_status name params {                                                                 \
    uses;                                                                                        \
    return LT_OK;                                                                                \
  }

E_NO_WORK(e_linear, (lt_tensor * out, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b),
          (void)out; (void)x; (void)w; (void)b)
E_NO_WORK(e_linear_backward,
          (lt_tensor * gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
           const lt_tensor *w, bool add_gw, bool add_gb),
          (void)gx; (void)gw; (void)gb; (void)go; (void)x; (void)w; (void)add_gw; (void)add_gb)
E_NO_WORK(e_conv2d,
          (lt_tensor * out, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
           const lt_conv2d_opts *o),
          (void)out; (void)x; (void)w; (void)b; (void)o)
E_NO_WORK(e_conv2d_backward,
          (lt_tensor * gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
           const lt_tensor *w, const lt_conv2d_opts *o),
          (void)gx; (void)gw; (void)gb; (void)go; (void)x; (void)w; (void)o)
E_NO_WORK(e_max_pool2d,
          (lt_tensor * out, lt_tensor *indices, const lt_tensor *x, const lt_pool2d_opts *o),
          (void)out; (void)indices; (void)x; (void)o)
E_NO_WORK(e_max_pool2d_backward, (lt_tensor * gx, const lt_tensor *go, const lt_tensor *indices),
          (void)gx; (void)go; (void)indices)
E_NO_WORK(e_avg_pool2d, (lt_tensor * out, const lt_tensor *x, const lt_pool2d_opts *o),
          (void)out; (void)x; (void)o)
E_NO_WORK(e_avg_pool2d_backward, (lt_tensor * gx, const lt_tensor *go, const lt_pool2d_opts *o),
          (void)gx; (void)go; (void)o)
E_NO_WORK(e_batch_norm,
          (lt_tensor * out, lt_tensor *save_mean, lt_tensor *save_invstd, const lt_tensor *x,
           lt_tensor *running_mean, lt_tensor *running_var, const lt_tensor *w,
           const lt_tensor *b, bool training, double momentum, double eps),
          (void)out; (void)save_mean; (void)save_invstd; (void)x; (void)running_mean;
          (void)running_var; (void)w; (void)b; (void)training; (void)momentum; (void)eps)
E_NO_WORK(e_batch_norm_backward,
          (lt_tensor * gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
           const lt_tensor *w, const lt_tensor *mean, const lt_tensor *invstd, bool training),
          (void)gx; (void)gw; (void)gb; (void)go; (void)x; (void)w; (void)mean; (void)invstd;
          (void)training)
E_NO_WORK(e_layer_norm,
          (lt_tensor * out, lt_tensor *mean, lt_tensor *rstd, const lt_tensor *x,
           const lt_tensor *w, const lt_tensor *b, double eps),
          (void)out; (void)mean; (void)rstd; (void)x; (void)w; (void)b; (void)eps)
E_NO_WORK(e_layer_norm_backward,
          (lt_tensor * gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go, const lt_tensor *x,
           const lt_tensor *mean, const lt_tensor *rstd, const lt_tensor *w),
          (void)gx; (void)gw; (void)gb; (void)go; (void)x; (void)mean; (void)rstd; (void)w)
E_NO_WORK(e_gelu, (lt_tensor * out, const lt_tensor *x, lt_gelu_approx approx),
          (void)out; (void)x; (void)approx)
E_NO_WORK(e_gelu_backward,
          (lt_tensor * gx, const lt_tensor *go, const lt_tensor *x, lt_gelu_approx approx),
          (void)gx; (void)go; (void)x; (void)approx)
E_NO_WORK(e_masked_scale,
          (lt_tensor * out, const lt_tensor *x, const lt_tensor *mask, double scale),
          (void)out; (void)x; (void)mask; (void)scale)
E_NO_WORK(e_softmax, (lt_tensor * out, const lt_tensor *x, lt_nn_dim_geom g, bool log),
          (void)out; (void)x; (void)g; (void)log)
E_NO_WORK(e_softmax_backward,
          (lt_tensor * gx, const lt_tensor *go, const lt_tensor *y, lt_nn_dim_geom g, bool log),
          (void)gx; (void)go; (void)y; (void)g; (void)log)
E_NO_WORK(e_cross_entropy,
          (lt_tensor * loss, lt_tensor *lse, const lt_tensor *logits, const lt_tensor *target,
           const lt_tensor *weight, const lt_class_loss_opts *o),
          (void)loss; (void)lse; (void)logits; (void)target; (void)weight; (void)o)
E_NO_WORK(e_cross_entropy_backward,
          (lt_tensor * glogits, const lt_tensor *gl, const lt_tensor *logits,
           const lt_tensor *target, const lt_tensor *weight, const lt_tensor *lse,
           const lt_class_loss_opts *o),
          (void)glogits; (void)gl; (void)logits; (void)target; (void)weight; (void)lse; (void)o)
E_NO_WORK(e_nll_loss,
          (lt_tensor * loss, const lt_tensor *lp, const lt_tensor *target,
           const lt_tensor *weight, const lt_class_loss_opts *o),
          (void)loss; (void)lp; (void)target; (void)weight; (void)o)
E_NO_WORK(e_nll_loss_backward,
          (lt_tensor * glp, const lt_tensor *gl, const lt_tensor *target,
           const lt_tensor *weight, const lt_class_loss_opts *o),
          (void)glp; (void)gl; (void)target; (void)weight; (void)o)
E_NO_WORK(e_mse_loss,
          (lt_tensor * loss, const lt_tensor *a, const lt_tensor *b, lt_reduction reduction),
          (void)loss; (void)a; (void)b; (void)reduction)
E_NO_WORK(e_mse_loss_backward,
          (lt_tensor * ga, const lt_tensor *gl, const lt_tensor *a, const lt_tensor *b,
           lt_reduction reduction),
          (void)ga; (void)gl; (void)a; (void)b; (void)reduction)
E_NO_WORK(e_embedding,
          (lt_tensor * out, const lt_tensor *weight, const lt_tensor *indices,
           int64_t index_base),
          (void)out; (void)weight; (void)indices; (void)index_base)
E_NO_WORK(e_embedding_backward,
          (lt_tensor * gw, const lt_tensor *go, const lt_tensor *indices, int64_t index_base,
           int64_t padding_row),
          (void)gw; (void)go; (void)indices; (void)index_base; (void)padding_row)

E_NO_WORK(e_attention,
          (lt_tensor * out, lt_tensor *lse, const lt_tensor *q, const lt_tensor *k,
           const lt_tensor *v, const lt_tensor *mask, const lt_nn_attn_geom *g),
          (void)out; (void)lse; (void)q; (void)k; (void)v; (void)mask; (void)g)
E_NO_WORK(e_attention_backward,
          (lt_tensor * gq, lt_tensor *gk, lt_tensor *gv, const lt_tensor *go, const lt_tensor *q,
           const lt_tensor *k, const lt_tensor *v, const lt_tensor *out, const lt_tensor *lse,
           const lt_tensor *mask, const lt_nn_attn_geom *g),
          (void)gq; (void)gk; (void)gv; (void)go; (void)q; (void)k; (void)v; (void)out; (void)lse;
          (void)mask; (void)g)

/* One table per device type: the real table's flags decide which operands
 * ops/ converts (and so allocates), and they must be the real run's. */
static lt_nn_backend estimate_nn[LT_NDEVICE_TYPES];

const lt_nn_backend *lt_estimate_nn_backend(lt_device_type type, const lt_nn_backend *real) {
  if ((unsigned)type >= LT_NDEVICE_TYPES || !real) return NULL;
  lt_nn_backend *e = &estimate_nn[type];
  *e = (lt_nn_backend){
      .name = "estimate",
      .half_matmul = real->half_matmul,
      .half_batch_norm = real->half_batch_norm,
      .half_max_pool = real->half_max_pool,
      .half_pointwise = real->half_pointwise,
      .attention_strided = real->attention_strided,
      .linear = e_linear,
      .linear_backward = e_linear_backward,
      .conv2d = e_conv2d,
      .conv2d_backward = e_conv2d_backward,
      .max_pool2d = e_max_pool2d,
      .max_pool2d_backward = e_max_pool2d_backward,
      .avg_pool2d = e_avg_pool2d,
      .avg_pool2d_backward = e_avg_pool2d_backward,
      .batch_norm = e_batch_norm,
      .batch_norm_backward = e_batch_norm_backward,
      .layer_norm = e_layer_norm,
      .layer_norm_backward = e_layer_norm_backward,
      .gelu = e_gelu,
      .gelu_backward = e_gelu_backward,
      .masked_scale = e_masked_scale,
      .softmax = e_softmax,
      .softmax_backward = e_softmax_backward,
      .cross_entropy = e_cross_entropy,
      .cross_entropy_backward = e_cross_entropy_backward,
      .nll_loss = e_nll_loss,
      .nll_loss_backward = e_nll_loss_backward,
      .mse_loss = e_mse_loss,
      .mse_loss_backward = e_mse_loss_backward,
      .embedding = e_embedding,
      .embedding_backward = e_embedding_backward,
      .attention = e_attention,
      .attention_backward = e_attention_backward,
  };
  if (type == LT_DEVICE_CPU) { /* the kernels with scratch plan and take it, then return */
    e->linear = real->linear;
    e->linear_backward = real->linear_backward;
    e->conv2d = real->conv2d;
    e->conv2d_backward = real->conv2d_backward;
    e->attention = real->attention;
    e->attention_backward = real->attention_backward;
  }
  return e;
}

/* ---- the optimizer table ---- */

E_NO_WORK(e_sgd_many,
          (int64_t n, lt_tensor *const *params, lt_tensor *const *grads, lt_tensor *const *bufs,
           const bool *init_buffers, const lt_sgd_options *o),
          (void)n; (void)params; (void)grads; (void)bufs; (void)init_buffers; (void)o)
E_NO_WORK(e_adam_many,
          (int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
           lt_tensor *const *exp_avgs, lt_tensor *const *exp_avg_sqs,
           lt_tensor *const *max_exp_avg_sqs, const lt_adam_scalars *s),
          (void)n; (void)params; (void)grads; (void)exp_avgs; (void)exp_avg_sqs;
          (void)max_exp_avg_sqs; (void)s)
E_NO_WORK(e_unscale_many,
          (int64_t n, lt_tensor *const *grads, float inv_scale, lt_tensor *found_inf),
          (void)n; (void)grads; (void)inv_scale; (void)found_inf)

E_NO_WORK(e_rmsprop_many,
          (int64_t n, lt_tensor *const *params, lt_tensor *const *grads,
           lt_tensor *const *square_avgs, lt_tensor *const *bufs, lt_tensor *const *grad_avgs,
           const lt_rmsprop_options *o),
          (void)n; (void)params; (void)grads; (void)square_avgs; (void)bufs; (void)grad_avgs;
          (void)o)
E_NO_WORK(e_adagrad_many,
          (int64_t n, lt_tensor *const *params, lt_tensor *const *grads, lt_tensor *const *sums,
           const double *clrs, const lt_adagrad_options *o),
          (void)n; (void)params; (void)grads; (void)sums; (void)clrs; (void)o)

E_NO_WORK(e_norm_many, (int64_t n, lt_tensor *const *ts, double p, lt_tensor *out),
          (void)n; (void)ts; (void)p; (void)out)
E_NO_WORK(e_scale_many, (int64_t n, lt_tensor *const *ts, const lt_tensor *scalar),
          (void)n; (void)ts; (void)scalar)

static const lt_optim_backend estimate_optim = {
    .name = "estimate",
    .sgd_many = e_sgd_many,
    .adam_many = e_adam_many,
    .unscale_many = e_unscale_many,
    .rmsprop_many = e_rmsprop_many,
    .adagrad_many = e_adagrad_many,
    .norm_many = e_norm_many,
    .scale_many = e_scale_many,
};

const lt_optim_backend *lt_estimate_optim_backend(void) { return &estimate_optim; }
