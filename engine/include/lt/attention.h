/* Scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention):
 *
 *   out = dropout(softmax(q k^T * scale + mask)) v
 *
 * with q [..., L, E], k [..., S, E], v [..., S, Ev] -> out [..., L, Ev]; the
 * leading (batch, head) dims of q, k, v and the mask broadcast together, as
 * in PyTorch. The op is memory-efficient by construction: the kernels work
 * through keys a block at a time with an online softmax (FlashAttention, Dao
 * et al. 2022; FlashAttention-2, Dao 2023), so the L x S matrix of scores or
 * probabilities is never stored, in forward or backward. What backward keeps
 * is q, k, v, the output and one log-sum-exp per query row; it recomputes
 * the probabilities a block at a time. Dropout's keep mask is not stored
 * either: it is a function of the generator's seed and offset at the call
 * (counter-based Philox, lt/rng.h), which backward is given again.
 *
 * Masks: a bool attn_mask marks with true the keys a query takes part with
 * (PyTorch's convention), a floating one is added to the scores; either
 * broadcasts to [..., L, S]. is_causal is PyTorch's top-left aligned lower
 * triangle (query i sees keys 0..i) and excludes attn_mask. A query row
 * whose mask removes every key gets zeros, and zero gradients, as PyTorch's
 * current math path (its _safe_softmax; before 2.5 it gave NaN).
 *
 * dtypes: float32 and float64; float16 and bfloat16 compute in float32 and
 * round the output once. The log-sum-exp is in the compute dtype. */
#ifndef LT_ATTENTION_H
#define LT_ATTENTION_H

#include "lt/api.h"

#include <stdbool.h>
#include <stdint.h>

#include "lt/tensor.h"

typedef struct lt_attention_opts {
  const lt_tensor *attn_mask; /* NULL, bool, or floating (added) */
  double dropout_p;           /* in [0, 1): 0 means no dropout */
  bool is_causal;
  bool has_scale; /* otherwise 1 / sqrt(E) */
  double scale;
} lt_attention_opts;

/* No mask, no dropout, not causal, the default scale. */
LT_API lt_attention_opts lt_attention_default_opts(void);

/* Where one call's dropout draw lies in lt's generator: the keep decision of
 * element (b, i, j) of the [batch, L, S] probabilities is the one
 * lt_bernoulli_(t, 1 - p) would make for that element of a tensor of that
 * shape filled at this state. */
typedef struct lt_attention_draw {
  uint64_t seed, offset;
} lt_attention_draw;

/* out [..., L, Ev]; logsumexp [..., L] (the batch dims broadcast; may be
 * NULL); draw (may be NULL) receives the dropout draw. o NULL: the defaults. With dropout the
 * generator moves past the draw's blocks, as a dropout of [..., L, S] would. */
LT_API lt_status lt_scaled_dot_product_attention(const lt_tensor *q, const lt_tensor *k,
                                                 const lt_tensor *v, const lt_attention_opts *o,
                                                 lt_tensor **out, lt_tensor **logsumexp,
                                                 lt_attention_draw *draw);

/* The gradients of q, k and v (those flagged as needed, of their own shapes
 * and dtypes) from grad_out and what the forward saved: its inputs, its
 * output, the log-sum-exp and the draw. The mask takes no gradient. */
LT_API lt_status lt_scaled_dot_product_attention_backward(
    const lt_tensor *grad_out, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
    const lt_tensor *out, const lt_tensor *logsumexp, const lt_attention_opts *o,
    lt_attention_draw draw, bool need_q, bool need_k, bool need_v, lt_tensor **grad_q,
    lt_tensor **grad_k, lt_tensor **grad_v);

#endif
