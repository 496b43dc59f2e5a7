/* Autocast's policy for the ops that are not elementwise: one row per op
 * that autocast touches, after PyTorch's one list per device
 * (autocast_mode.cpp). The elementwise rows in lt/ops.h carry the same
 * decision in their autocast column (FLOAT32: PyTorch's CUDA float32 list).
 * An op with no row runs in its inputs' dtype under autocast.
 *
 * X(ID, name, policy, regions)
 *   policy   LOWER    the region's float16/bfloat16 (the products)
 *            FLOAT32  float32 (reductions that overflow, softmax, norms, losses)
 *   regions  ANY      in CPU and CUDA regions
 *            CUDA     in CUDA regions only: PyTorch's CPU list leaves the op
 *                     out, so a CPU region runs it in its inputs' dtype
 * Each op's entry point asks its row (AC_ENTRY in ops/autocast_internal.h);
 * tests/lua/amp_spec.lua checks every row, reading the list back through
 * lt.core._autocast_ops(). */
#ifndef LT_OPS_AUTOCAST_POLICY_H
#define LT_OPS_AUTOCAST_POLICY_H

#define LT_AUTOCAST_OPS(X)                                        \
  X(MATMUL, matmul, LOWER, ANY)                                   \
  X(LINEAR, linear, LOWER, ANY)                                   \
  X(CONV2D, conv2d, LOWER, ANY)                                   \
  X(ATTENTION, scaled_dot_product_attention, LOWER, ANY)          \
  X(CROSS_ENTROPY, cross_entropy, FLOAT32, ANY)                   \
  X(NLL_LOSS, nll_loss, FLOAT32, ANY)                             \
  X(MSE_LOSS, mse_loss, FLOAT32, ANY)                             \
  X(PROD, prod, FLOAT32, ANY)                                     \
  X(SUM, sum, FLOAT32, CUDA)                                      \
  X(SOFTMAX, softmax, FLOAT32, CUDA)                              \
  X(LOG_SOFTMAX, log_softmax, FLOAT32, CUDA)                      \
  X(LAYER_NORM, layer_norm, FLOAT32, CUDA)

typedef enum ac_op {
#define LT_AC_ENUM(ID, name, policy, regions) AC_OP_##ID,
  LT_AUTOCAST_OPS(LT_AC_ENUM)
#undef LT_AC_ENUM
      AC_OP_COUNT
} ac_op;

#endif
