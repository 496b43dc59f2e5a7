/* The CPU nn kernel table. */
#include "cpu/cpu_nn_kernels.h"

const lt_nn_backend lt_cpu_nn_backend = {
    .name = "cpu",
    .half_matmul = true, /* float32 tiles widened from 16-bit operands */
    .half_max_pool = true,
    .half_pointwise = true, /* 16-bit elements widened as read, rounded once as written */
    .half_batch_norm = true, /* 16-bit x, out, go, gx read and written as they are */
    .attention_strided = true, /* row strides are the GEMMs' leading dimensions */
    .linear = cpu_nn_linear,
    .linear_backward = cpu_nn_linear_backward,
    .conv2d = cpu_nn_conv2d,
    .conv2d_backward = cpu_nn_conv2d_backward,
    .max_pool2d = cpu_nn_max_pool2d,
    .max_pool2d_backward = cpu_nn_max_pool2d_backward,
    .avg_pool2d = cpu_nn_avg_pool2d,
    .avg_pool2d_backward = cpu_nn_avg_pool2d_backward,
    .batch_norm = cpu_nn_batch_norm,
    .batch_norm_backward = cpu_nn_batch_norm_backward,
    .layer_norm = cpu_nn_layer_norm,
    .layer_norm_backward = cpu_nn_layer_norm_backward,
    .gelu = cpu_nn_gelu,
    .gelu_backward = cpu_nn_gelu_backward,
    .masked_scale = cpu_nn_masked_scale,
    .softmax = cpu_nn_softmax,
    .softmax_backward = cpu_nn_softmax_backward,
    .cross_entropy = cpu_nn_cross_entropy,
    .cross_entropy_backward = cpu_nn_cross_entropy_backward,
    .nll_loss = cpu_nn_nll_loss,
    .nll_loss_backward = cpu_nn_nll_loss_backward,
    .mse_loss = cpu_nn_mse_loss,
    .mse_loss_backward = cpu_nn_mse_loss_backward,
    .embedding = cpu_nn_embedding,
    .embedding_backward = cpu_nn_embedding_backward,
    .attention = cpu_nn_attention,
    .attention_backward = cpu_nn_attention_backward,
};
