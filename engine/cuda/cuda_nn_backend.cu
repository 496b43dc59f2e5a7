// The CUDA nn kernel table, registered with the elementwise table when the
// CUDA slot starts (cuda_device.cu).
#include "cuda/cuda_nn_kernels.h"

extern const lt_nn_backend cuda_nn_backend = {
    /* name */ "cuda",
    /* half_matmul */ true,
    /* half_batch_norm */ true, // cuDNN's float16 batch norm, float32 parameters
    /* linear */ cuda_nn_linear,
    /* linear_backward */ cuda_nn_linear_backward,
    /* conv2d */ cuda_nn_conv2d,
    /* conv2d_backward */ cuda_nn_conv2d_backward,
    /* max_pool2d */ cuda_nn_max_pool2d,
    /* max_pool2d_backward */ cuda_nn_max_pool2d_backward,
    /* avg_pool2d */ cuda_nn_avg_pool2d,
    /* avg_pool2d_backward */ cuda_nn_avg_pool2d_backward,
    /* batch_norm */ cuda_nn_batch_norm,
    /* batch_norm_backward */ cuda_nn_batch_norm_backward,
    /* layer_norm */ cuda_nn_layer_norm,
    /* layer_norm_backward */ cuda_nn_layer_norm_backward,
    /* gelu */ cuda_nn_gelu,
    /* gelu_backward */ cuda_nn_gelu_backward,
    /* masked_scale */ cuda_nn_masked_scale,
    /* softmax */ cuda_nn_softmax,
    /* softmax_backward */ cuda_nn_softmax_backward,
    /* cross_entropy */ cuda_nn_cross_entropy,
    /* cross_entropy_backward */ cuda_nn_cross_entropy_backward,
    /* nll_loss */ cuda_nn_nll_loss,
    /* nll_loss_backward */ cuda_nn_nll_loss_backward,
    /* mse_loss */ cuda_nn_mse_loss,
    /* mse_loss_backward */ cuda_nn_mse_loss_backward,
    /* embedding */ cuda_nn_embedding,
    /* embedding_backward */ cuda_nn_embedding_backward,
    /* half_max_pool */ false, // the kernels read float32: ops/ converts 16-bit
    /* half_pointwise */ false, // gelu and softmax read float32: ops/ converts 16-bit
    /* attention */ cuda_nn_attention,
    /* attention_backward */ cuda_nn_attention_backward,
    /* attention_strided */ false, // the kernels index rows by E and Ev: ops/ makes q, k, v contiguous
};
