/* The CUDA nn kernels; cuda_nn_backend.cu puts them in the table. The same
 * signatures and contracts as core/nn_backend.h: operands are live,
 * contiguous and on one device, float32 or float64 (index tensors int64,
 * masks bool). linear and conv2d also take float16 and bfloat16 operands as
 * they are (the table's half_matmul), so that autocast reaches the tensor
 * cores; they accumulate in float32. */
#ifndef LT_CUDA_NN_KERNELS_H
#define LT_CUDA_NN_KERNELS_H

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/nn_backend.h"
}

/* cuda_nn_linear.cu (cuBLAS) */
lt_status cuda_nn_linear(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                         const lt_tensor *b);
lt_status cuda_nn_linear_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                  const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                  bool add_gw, bool add_gb);

/* cuda_nn_conv2d.cu (cuDNN) */
lt_status cuda_nn_conv2d(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                         const lt_tensor *b, const lt_conv2d_opts *o);
lt_status cuda_nn_conv2d_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                  const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                  const lt_conv2d_opts *o);

/* cuda_nn_pool.cu */
lt_status cuda_nn_max_pool2d(lt_tensor *out, lt_tensor *indices, const lt_tensor *x,
                             const lt_pool2d_opts *o);
lt_status cuda_nn_max_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                      const lt_tensor *indices);
lt_status cuda_nn_avg_pool2d(lt_tensor *out, const lt_tensor *x, const lt_pool2d_opts *o);
lt_status cuda_nn_avg_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                      const lt_pool2d_opts *o);

/* cuda_nn_batch_norm.cu (cuDNN). Also takes float16 and bfloat16 x, out,
 * go and gx as they are, with float32 per-channel tensors (the table's
 * half_batch_norm); computes in float32 or wider. */
lt_status cuda_nn_batch_norm(lt_tensor *out, lt_tensor *save_mean, lt_tensor *save_invstd,
                             const lt_tensor *x, lt_tensor *running_mean,
                             lt_tensor *running_var, const lt_tensor *w, const lt_tensor *b,
                             bool training, double momentum, double eps);
lt_status cuda_nn_batch_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                      const lt_tensor *go, const lt_tensor *x,
                                      const lt_tensor *w, const lt_tensor *mean,
                                      const lt_tensor *invstd, bool training);

/* cuda_nn_layer_norm.cu */
lt_status cuda_nn_layer_norm(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd,
                             const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                             double eps);
lt_status cuda_nn_layer_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                      const lt_tensor *go, const lt_tensor *x,
                                      const lt_tensor *mean, const lt_tensor *rstd,
                                      const lt_tensor *w);

/* cuda_nn_activation.cu */
lt_status cuda_nn_gelu(lt_tensor *out, const lt_tensor *x, lt_gelu_approx approx);
lt_status cuda_nn_gelu_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *x,
                                lt_gelu_approx approx);
lt_status cuda_nn_masked_scale(lt_tensor *out, const lt_tensor *x, const lt_tensor *mask,
                               double scale);

/* cuda_nn_softmax.cu */
lt_status cuda_nn_softmax(lt_tensor *out, const lt_tensor *x, lt_nn_dim_geom g, bool log);
lt_status cuda_nn_softmax_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *y,
                                   lt_nn_dim_geom g, bool log);

/* cuda_nn_class_loss.cu (cross_entropy fused over log_softmax and nll) */
lt_status cuda_nn_cross_entropy(lt_tensor *loss, lt_tensor *lse, const lt_tensor *logits,
                                const lt_tensor *target, const lt_tensor *weight,
                                const lt_class_loss_opts *o);
lt_status cuda_nn_cross_entropy_backward(lt_tensor *glogits, const lt_tensor *gl,
                                         const lt_tensor *logits, const lt_tensor *target,
                                         const lt_tensor *weight, const lt_tensor *lse,
                                         const lt_class_loss_opts *o);
lt_status cuda_nn_nll_loss(lt_tensor *loss, const lt_tensor *lp, const lt_tensor *target,
                           const lt_tensor *weight, const lt_class_loss_opts *o);
lt_status cuda_nn_nll_loss_backward(lt_tensor *glp, const lt_tensor *gl, const lt_tensor *target,
                                    const lt_tensor *weight, const lt_class_loss_opts *o);

/* cuda_nn_mse.cu */
lt_status cuda_nn_mse_loss(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                           lt_reduction reduction);
lt_status cuda_nn_mse_loss_backward(lt_tensor *ga, const lt_tensor *gl, const lt_tensor *a,
                                    const lt_tensor *b, lt_reduction reduction);

/* cuda_nn_embedding.cu */
lt_status cuda_nn_embedding(lt_tensor *out, const lt_tensor *weight, const lt_tensor *indices,
                            int64_t index_base);
lt_status cuda_nn_embedding_backward(lt_tensor *gw, const lt_tensor *go,
                                     const lt_tensor *indices, int64_t index_base,
                                     int64_t padding_row);

/* cuda_nn_attention.cu (tiled, FlashAttention's online softmax) */
lt_status cuda_nn_attention(lt_tensor *out, lt_tensor *lse, const lt_tensor *q,
                            const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask,
                            const lt_nn_attn_geom *g);
lt_status cuda_nn_attention_backward(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv,
                                     const lt_tensor *go, const lt_tensor *q, const lt_tensor *k,
                                     const lt_tensor *v, const lt_tensor *out,
                                     const lt_tensor *lse, const lt_tensor *mask,
                                     const lt_nn_attn_geom *g);

#endif
