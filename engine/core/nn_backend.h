/* The nn kernel table: convolution, pooling, normalisation, activations and
 * losses of one device type, with the same shape for cpu/ and cuda/ (kept
 * apart from core/backend.h so the two tables grow independently). ops/nn_*.c
 * validate, convert 16-bit floats to float32, make operands contiguous and
 * allocate results; the kernels then see only live, contiguous float32 or
 * float64 tensors of one dtype (index tensors int64, masks bool) with the
 * shapes documented here, and never validate. The flags below name the
 * kernels that take 16-bit operands as they are instead. Gradient outputs
 * that are not needed are NULL. */
#ifndef LT_CORE_NN_BACKEND_H
#define LT_CORE_NN_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/attention.h"
#include "lt/nn.h"

/* A contiguous tensor seen as [outer, size, inner] around one dim. */
typedef struct lt_nn_dim_geom {
  int64_t outer, size, inner;
} lt_nn_dim_geom;

/* Scaled dot-product attention over nbatch = prod(batch) independent
 * problems (the broadcast batch and head dims, row-major). q, k, v and the
 * mask are each contiguous in their own shapes; problem b's operand starts
 * at lt_nn_attn_offset(g, g->q_stride, b) elements (k_stride, ...: the
 * element strides of the batch dims, 0 where the operand broadcasts), and
 * its rows are contiguous: q [L, E], k [S, E], v [S, Ev]. Mask element
 * (i, j) of problem b is at its offset + i * mask_row + j * mask_col (0 along
 * a broadcast dim). Results, gradients, grad_out and the saved output are
 * contiguous over the whole broadcast batch: [nbatch, L, Ev], lse [nbatch, L].
 * Dropout (dropout_p > 0) keeps element (b, i, j) when lane n % 4 of Philox
 * block offset + n / 4 (n = (b L + i) S + j, key seed) is below (1 - p) 2^32,
 * lt_bernoulli_'s rule, and scales kept ones by 1 / (1 - p). */
typedef enum lt_nn_attn_mask {
  LT_NN_ATTN_NO_MASK = 0,
  LT_NN_ATTN_BOOL_MASK,     /* bool: false removes the key */
  LT_NN_ATTN_ADDITIVE_MASK, /* the compute dtype: added to the scores */
} lt_nn_attn_mask;

typedef struct lt_nn_attn_geom {
  int nb;                      /* batch dims */
  int64_t batch[LT_MAX_DIMS];  /* their broadcast sizes */
  int64_t nbatch, l, s, e, ev; /* problems, queries, keys, q/k width, v width */
  int64_t q_stride[LT_MAX_DIMS], k_stride[LT_MAX_DIMS], v_stride[LT_MAX_DIMS],
      mask_stride[LT_MAX_DIMS];
  int64_t mask_row, mask_col;
  /* Row strides of q, k, v in elements: e, e and ev for contiguous rows;
   * others only where the backend has attention_strided (see below). */
  int64_t q_ld, k_ld, v_ld;
  lt_nn_attn_mask mask;
  bool causal; /* key j > query i removed */
  double scale;
  double dropout_p;
  uint64_t seed, offset;
} lt_nn_attn_geom;

/* The first element of problem b in an operand with the given batch strides. */
static inline int64_t lt_nn_attn_offset(const lt_nn_attn_geom *g, const int64_t *stride,
                                        int64_t b) {
  int64_t off = 0;
  for (int d = g->nb - 1; d >= 0; d--) {
    off += (b % g->batch[d]) * stride[d];
    b /= g->batch[d];
  }
  return off;
}

typedef struct lt_nn_backend {
  const char *name;
  /* linear and conv2d (forward and backward) take float16 and bfloat16
   * operands as they are, accumulating in float32, instead of
   * getting them converted to float32 by ops/ (CUDA: tensor cores; the CPU:
   * float32 blocks widened as they are packed, cpu_nn_lowp.h). */
  bool half_matmul;
  /* batch_norm (forward and backward) takes float16 and bfloat16 x, out,
   * go and gx as they are, with float32 weight, bias, running and saved
   * statistics and weight/bias gradients (cuDNN's mixed-precision batch
   * norm, PyTorch's rule on CUDA), computing in float32 or wider; otherwise
   * ops/ converts x and go to float32 too. */
  bool half_batch_norm;

  /* out [M, O] = x [M, K] w[O, K]^T + b [O] (b may be NULL). */
  lt_status (*linear)(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                      const lt_tensor *b);
  /* gx [M, K], gw [O, K], gb [O] from go [M, O]. add_gw / add_gb: gw / gb
   * already hold a gradient and get this one added (GEMM beta = 1), never
   * with 16-bit operands. */
  lt_status (*linear_backward)(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go,
                               const lt_tensor *x, const lt_tensor *w, bool add_gw, bool add_gb);

  /* out [N, O, Ho, Wo] from x [N, C, H, W], w [O, C/g, kh, kw], b [O] or NULL. */
  lt_status (*conv2d)(lt_tensor *out, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                      const lt_conv2d_opts *o);
  lt_status (*conv2d_backward)(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb, const lt_tensor *go,
                               const lt_tensor *x, const lt_tensor *w, const lt_conv2d_opts *o);

  /* Planes: x [P, H, W] -> out, indices [P, Ho, Wo]; stride and dilation
   * already resolved (non-zero). */
  lt_status (*max_pool2d)(lt_tensor *out, lt_tensor *indices, const lt_tensor *x,
                          const lt_pool2d_opts *o);
  /* gx [P, H, W] (the kernel zeroes it) from go and indices [P, Ho, Wo]. */
  lt_status (*max_pool2d_backward)(lt_tensor *gx, const lt_tensor *go, const lt_tensor *indices);
  lt_status (*avg_pool2d)(lt_tensor *out, const lt_tensor *x, const lt_pool2d_opts *o);
  lt_status (*avg_pool2d_backward)(lt_tensor *gx, const lt_tensor *go, const lt_pool2d_opts *o);

  /* x [N, C, S]; running stats, weight, bias [C] or NULL; save_* [C]. With
   * half_batch_norm, x/out (go/gx) may be float16 or bfloat16 while every
   * [C] tensor is float32. */
  lt_status (*batch_norm)(lt_tensor *out, lt_tensor *save_mean, lt_tensor *save_invstd,
                          const lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                          const lt_tensor *w, const lt_tensor *b, bool training,
                          double momentum, double eps);
  lt_status (*batch_norm_backward)(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                   const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                   const lt_tensor *mean, const lt_tensor *invstd, bool training);

  /* x [M, D]; w, b [D] or NULL; mean, rstd [M]. */
  lt_status (*layer_norm)(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd, const lt_tensor *x,
                          const lt_tensor *w, const lt_tensor *b, double eps);
  lt_status (*layer_norm_backward)(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                   const lt_tensor *go, const lt_tensor *x,
                                   const lt_tensor *mean, const lt_tensor *rstd,
                                   const lt_tensor *w);

  /* Elementwise over same-shaped tensors. */
  lt_status (*gelu)(lt_tensor *out, const lt_tensor *x, lt_gelu_approx approx);
  lt_status (*gelu_backward)(lt_tensor *gx, const lt_tensor *go, const lt_tensor *x,
                             lt_gelu_approx approx);
  /* out = x * mask * scale, mask bool. */
  lt_status (*masked_scale)(lt_tensor *out, const lt_tensor *x, const lt_tensor *mask,
                            double scale);

  /* (log_)softmax along the middle dim of g. */
  lt_status (*softmax)(lt_tensor *out, const lt_tensor *x, lt_nn_dim_geom g, bool log);
  lt_status (*softmax_backward)(lt_tensor *gx, const lt_tensor *go, const lt_tensor *y,
                                lt_nn_dim_geom g, bool log);

  /* Class losses over logits [N, C, inner] and targets [N, inner] already
   * checked to be ignore_index or in range. loss: [N, inner] for reduction
   * none, else 0-dim. lse [N, inner]. */
  lt_status (*cross_entropy)(lt_tensor *loss, lt_tensor *lse, const lt_tensor *logits,
                             const lt_tensor *target, const lt_tensor *weight,
                             const lt_class_loss_opts *o);
  /* gl: [N, inner] for reduction none, else 0-dim. */
  lt_status (*cross_entropy_backward)(lt_tensor *glogits, const lt_tensor *gl,
                                      const lt_tensor *logits, const lt_tensor *target,
                                      const lt_tensor *weight, const lt_tensor *lse,
                                      const lt_class_loss_opts *o);
  lt_status (*nll_loss)(lt_tensor *loss, const lt_tensor *lp, const lt_tensor *target,
                        const lt_tensor *weight, const lt_class_loss_opts *o);
  lt_status (*nll_loss_backward)(lt_tensor *glp, const lt_tensor *gl, const lt_tensor *target,
                                 const lt_tensor *weight, const lt_class_loss_opts *o);
  /* a, b same shape; loss as for the class losses; ga = d loss / d a. */
  lt_status (*mse_loss)(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                        lt_reduction reduction);
  lt_status (*mse_loss_backward)(lt_tensor *ga, const lt_tensor *gl, const lt_tensor *a,
                                 const lt_tensor *b, lt_reduction reduction);

  /* out [M, d] = weight[indices - base]; indices [M] already in range. */
  lt_status (*embedding)(lt_tensor *out, const lt_tensor *weight, const lt_tensor *indices,
                         int64_t index_base);
  /* gw [n, d] (the kernel zeroes it); padding_row 0-based or -1. */
  lt_status (*embedding_backward)(lt_tensor *gw, const lt_tensor *go, const lt_tensor *indices,
                                  int64_t index_base, int64_t padding_row);
  /* max_pool2d (forward and backward) takes float16 and bfloat16 x, out, go
   * and gx as they are (a maximum is exact in any dtype); otherwise ops/
   * converts them to float32. */
  bool half_max_pool;
  /* gelu and softmax/log_softmax (forward and backward) take float16 and
   * bfloat16 operands as they are, computing each element in double and
   * rounding it once; otherwise ops/ converts them to float32 (a float32
   * copy of the input and of the result). */
  bool half_pointwise;

  /* Scaled dot-product attention (see lt_nn_attn_geom): out [nbatch, L, Ev]
   * and lse [nbatch, L] (log of the row's sum of exponentials, +inf for a
   * row with every key removed, whose output is zeros). Never stores an
   * L x S matrix; scratch of the kernel's own blocks only. */
  lt_status (*attention)(lt_tensor *out, lt_tensor *lse, const lt_tensor *q, const lt_tensor *k,
                         const lt_tensor *v, const lt_tensor *mask, const lt_nn_attn_geom *g);
  /* gq [nbatch, L, E], gk [nbatch, S, E], gv [nbatch, S, Ev] (over the
   * broadcast batch; each may be NULL) from go and out [nbatch, L, Ev] and
   * lse, the probabilities recomputed a block at a time. */
  lt_status (*attention_backward)(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv,
                                  const lt_tensor *go, const lt_tensor *q, const lt_tensor *k,
                                  const lt_tensor *v, const lt_tensor *out, const lt_tensor *lse,
                                  const lt_tensor *mask, const lt_nn_attn_geom *g);
  /* attention and attention_backward read q, k and v where they lie: any
   * batch strides and row strides (q_ld, k_ld, v_ld) over rows of contiguous
   * elements, as the heads of a [B, T, 3C] projection split by chunk and
   * transposed are, instead of ops/ copying each to contiguous first. */
  bool attention_strided;
} lt_nn_backend;

/* The nn kernels for dev's type, or NULL when it has none. */
const lt_nn_backend *lt_nn_backend_for(lt_device dev);

extern const lt_nn_backend lt_cpu_nn_backend;

#endif
