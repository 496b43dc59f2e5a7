/* Gradient of scaled_dot_product_attention: the kernels' backward
 * (FlashAttention-2's, recomputing the probabilities block by block from
 * the saved log-sum-exp) given exactly what the forward kept. */
#include "autograd/formulas_nn.h"

enum { SAVED_Q = 0, SAVED_K, SAVED_V, SAVED_OUT, SAVED_LSE, SAVED_MASK };
enum { IN_Q = 0, IN_K, IN_V };

/* p.s[0] dropout_p, p.s[1] the scale as given, p.flag[0] is_causal,
 * p.flag[1] whether a scale was given, p.i[0..1] the draw's seed and offset. */
static lt_status attention_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  lt_attention_opts o = lt_attention_default_opts();
  o.attn_mask = ag_saved_tensor(n, SAVED_MASK);
  o.dropout_p = n->p.s[0];
  o.is_causal = n->p.flag[0];
  o.has_scale = n->p.flag[1];
  o.scale = n->p.s[1];
  const lt_attention_draw draw = {(uint64_t)n->p.i[0], (uint64_t)n->p.i[1]};
  return lt_scaled_dot_product_attention_backward(
      grad_out[0], ag_saved_tensor(n, SAVED_Q), ag_saved_tensor(n, SAVED_K),
      ag_saved_tensor(n, SAVED_V), ag_saved_tensor(n, SAVED_OUT), ag_saved_tensor(n, SAVED_LSE),
      &o, draw, ag_needs(n, IN_Q), ag_needs(n, IN_K), ag_needs(n, IN_V), &grad_in[IN_Q],
      &grad_in[IN_K], &grad_in[IN_V]);
}

lt_status ag_record_attention(const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                              const lt_attention_opts *o, lt_attention_draw draw,
                              const lt_tensor *lse, lt_tensor *r) {
  const lt_tensor *ins[3] = {q, k, v};
  lt_status st;
  ag_node *n = ag_nn_node("ScaledDotProductEfficientAttentionBackward", attention_backward, ins,
                          3, r, &st);
  if (!n) return st;
  n->p.s[0] = o->dropout_p;
  n->p.s[1] = o->scale;
  n->p.flag[0] = o->is_causal;
  n->p.flag[1] = o->has_scale;
  n->p.i[0] = (int64_t)draw.seed;
  n->p.i[1] = (int64_t)draw.offset;
  n->p.ni = 2;
  st = ag_nn_save(n, st, SAVED_Q, q);
  st = ag_nn_save(n, st, SAVED_K, k);
  st = ag_nn_save(n, st, SAVED_V, v);
  st = ag_nn_save(n, st, SAVED_OUT, r);
  st = ag_nn_save(n, st, SAVED_LSE, lse);
  st = ag_nn_save(n, st, SAVED_MASK, o->attn_mask);
  return ag_nn_finish(n, st, r);
}
