/* The CPU nn kernels; cpu_nn_backend.c puts them in the table (see
 * core/nn_backend.h for what each expects). */
#ifndef LT_CPU_NN_KERNELS_H
#define LT_CPU_NN_KERNELS_H

#include "core/nn_backend.h"

lt_status cpu_nn_linear(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                        const lt_tensor *b);
lt_status cpu_nn_linear_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                 const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                 bool add_gw, bool add_gb);
lt_status cpu_nn_conv2d(lt_tensor *out, const lt_tensor *x, const lt_tensor *w,
                        const lt_tensor *b, const lt_conv2d_opts *o);
lt_status cpu_nn_conv2d_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                 const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                 const lt_conv2d_opts *o);
lt_status cpu_nn_max_pool2d(lt_tensor *out, lt_tensor *indices, const lt_tensor *x,
                            const lt_pool2d_opts *o);
lt_status cpu_nn_max_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                     const lt_tensor *indices);
lt_status cpu_nn_avg_pool2d(lt_tensor *out, const lt_tensor *x, const lt_pool2d_opts *o);
lt_status cpu_nn_avg_pool2d_backward(lt_tensor *gx, const lt_tensor *go,
                                     const lt_pool2d_opts *o);
lt_status cpu_nn_batch_norm(lt_tensor *out, lt_tensor *save_mean, lt_tensor *save_invstd,
                            const lt_tensor *x, lt_tensor *running_mean, lt_tensor *running_var,
                            const lt_tensor *w, const lt_tensor *b, bool training,
                            double momentum, double eps);
lt_status cpu_nn_batch_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                     const lt_tensor *go, const lt_tensor *x, const lt_tensor *w,
                                     const lt_tensor *mean, const lt_tensor *invstd,
                                     bool training);
lt_status cpu_nn_layer_norm(lt_tensor *out, lt_tensor *mean, lt_tensor *rstd, const lt_tensor *x,
                            const lt_tensor *w, const lt_tensor *b, double eps);
lt_status cpu_nn_layer_norm_backward(lt_tensor *gx, lt_tensor *gw, lt_tensor *gb,
                                     const lt_tensor *go, const lt_tensor *x,
                                     const lt_tensor *mean, const lt_tensor *rstd,
                                     const lt_tensor *w);
lt_status cpu_nn_gelu(lt_tensor *out, const lt_tensor *x, lt_gelu_approx approx);
lt_status cpu_nn_gelu_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *x,
                               lt_gelu_approx approx);
lt_status cpu_nn_masked_scale(lt_tensor *out, const lt_tensor *x, const lt_tensor *mask,
                              double scale);
lt_status cpu_nn_softmax(lt_tensor *out, const lt_tensor *x, lt_nn_dim_geom g, bool log);
lt_status cpu_nn_softmax_backward(lt_tensor *gx, const lt_tensor *go, const lt_tensor *y,
                                  lt_nn_dim_geom g, bool log);
lt_status cpu_nn_cross_entropy(lt_tensor *loss, lt_tensor *lse, const lt_tensor *logits,
                               const lt_tensor *target, const lt_tensor *weight,
                               const lt_class_loss_opts *o);
lt_status cpu_nn_cross_entropy_backward(lt_tensor *glogits, const lt_tensor *gl,
                                        const lt_tensor *logits, const lt_tensor *target,
                                        const lt_tensor *weight, const lt_tensor *lse,
                                        const lt_class_loss_opts *o);
lt_status cpu_nn_nll_loss(lt_tensor *loss, const lt_tensor *lp, const lt_tensor *target,
                          const lt_tensor *weight, const lt_class_loss_opts *o);
lt_status cpu_nn_nll_loss_backward(lt_tensor *glp, const lt_tensor *gl, const lt_tensor *target,
                                   const lt_tensor *weight, const lt_class_loss_opts *o);
lt_status cpu_nn_mse_loss(lt_tensor *loss, const lt_tensor *a, const lt_tensor *b,
                          lt_reduction reduction);
lt_status cpu_nn_mse_loss_backward(lt_tensor *ga, const lt_tensor *gl, const lt_tensor *a,
                                   const lt_tensor *b, lt_reduction reduction);
lt_status cpu_nn_embedding(lt_tensor *out, const lt_tensor *weight, const lt_tensor *indices,
                           int64_t index_base);
lt_status cpu_nn_embedding_backward(lt_tensor *gw, const lt_tensor *go, const lt_tensor *indices,
                                    int64_t index_base, int64_t padding_row);
lt_status cpu_nn_attention(lt_tensor *out, lt_tensor *lse, const lt_tensor *q, const lt_tensor *k,
                           const lt_tensor *v, const lt_tensor *mask, const lt_nn_attn_geom *g);
lt_status cpu_nn_attention_backward(lt_tensor *gq, lt_tensor *gk, lt_tensor *gv,
                                    const lt_tensor *go, const lt_tensor *q, const lt_tensor *k,
                                    const lt_tensor *v, const lt_tensor *out, const lt_tensor *lse,
                                    const lt_tensor *mask, const lt_nn_attn_geom *g);

#endif
