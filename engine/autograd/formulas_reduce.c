/* Gradients of reductions: sum, mean, prod over dims; max/min over a dim
 * (to the returned index) and over everything (shared evenly among ties). */
#include "autograd/grad_calc.h"
#include "autograd/node.h"
#include "autograd/record.h"

/* The reduced-dim flags a node keeps in p.i (one per input dim). */
static void reduced_flags(const ag_node *n, bool *reduced) {
  for (int d = 0; d < n->inputs[0].ndim; d++) reduced[d] = n->p.i[d] != 0;
}

/* The reduced dims as a list for lt_sum/lt_prod (0 of them: a 0-dim input,
 * which "every dim" also covers). */
static int reduced_list(const ag_node *n, int *dims) {
  int nd = 0;
  for (int d = 0; d < n->inputs[0].ndim; d++)
    if (n->p.i[d]) dims[nd++] = d;
  return nd;
}

/* prod: the product of the other elements, computed without dividing by
 * zero: with no zero in a slice it is prod / x; with one zero, the zero's
 * place gets the product of the non-zeros and the others nothing; with two
 * or more every place gets zero. */
static lt_tensor *prod_grad(ag_calc *c, const lt_tensor *x, const lt_tensor *gk, const int *dims,
                            int nd) {
  lt_tensor *is_zero = ag_bin_s(c, LT_OP_EQ, x, 0.0);
  lt_tensor *zeros = ag_sum(c, ag_cast(c, is_zero, x->dtype), dims, nd, true);
  lt_tensor *one = ag_scalar(c, 1.0, x->dtype, x->storage->device);
  lt_tensor *nonzero_prod = ag_prod(c, ag_where(c, is_zero, one, x), dims, nd, true);
  lt_tensor *no_zero = ag_bin(c, LT_OP_DIV, nonzero_prod, x);
  lt_tensor *one_zero = ag_keep_where(c, is_zero, ag_expand(c, nonzero_prod, x->shape, x->ndim));
  lt_tensor *d = ag_where(c, ag_bin_s(c, LT_OP_EQ, zeros, 0.0), no_zero,
                          ag_keep_where(c, ag_bin_s(c, LT_OP_EQ, zeros, 1.0), one_zero));
  return ag_bin(c, LT_OP_MUL, gk, d);
}

static lt_status reduce_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const ag_input *in = &n->inputs[0];
  bool reduced[LT_MAX_DIMS];
  reduced_flags(n, reduced);
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *gk = ag_unreduce(&c, grad_out[0], reduced, in->ndim, n->p.flag[0]);
  lt_tensor *gi = NULL;
  switch ((lt_reduce_op)n->p.op) {
    case LT_REDUCE_SUM: gi = ag_expand(&c, gk, in->shape, in->ndim); break;
    case LT_REDUCE_MEAN:
      gi = ag_expand(&c, ag_bin_s(&c, LT_OP_DIV, gk, n->p.s[0]), in->shape, in->ndim);
      break;
    case LT_REDUCE_PROD: {
      int dims[LT_MAX_DIMS];
      int nd = reduced_list(n, dims);
      gi = prod_grad(&c, ag_saved_tensor(n, 0), gk, dims, nd);
      break;
    }
  }
  grad_in[0] = ag_out(&c, gi);
  return ag_calc_end(&c);
}

lt_status ag_record_reduce(lt_reduce_op op, const lt_tensor *t, const bool *reduced, bool keepdim,
                           lt_tensor *r) {
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(&t, 1)) return LT_OK;
  static const char *const names[] = {[LT_REDUCE_SUM] = "SumBackward",
                                      [LT_REDUCE_MEAN] = "MeanBackward",
                                      [LT_REDUCE_PROD] = "ProdBackward"};
  ag_node *n = ag_node_new(names[op], reduce_backward, 1);
  if (!n) return LT_ERR_OOM;
  n->p.op = op;
  n->p.flag[0] = keepdim;
  int64_t count = 1;
  for (int d = 0; d < t->ndim; d++) {
    n->p.i[d] = reduced[d];
    if (reduced[d]) count *= t->shape[d];
  }
  n->p.s[0] = (double)count;
  ag_node_set_input(n, 0, t);
  lt_status st = op == LT_REDUCE_PROD ? ag_node_save(n, 0, t) : LT_OK;
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}

/* ---- max/min over a dim: the gradient goes to the returned index ---- */

enum { P_DIM = 0, P_INDEX_BASE = 1 };

static lt_status index_reduce_backward(ag_node *n, lt_tensor *const *grad_out,
                                       lt_tensor **grad_in) {
  const ag_input *in = &n->inputs[0];
  const lt_tensor *g = grad_out[0];
  ag_calc c;
  ag_calc_init(&c);
  if (in->ndim == 0) { /* a 0-dim tensor is its own max */
    grad_in[0] = ag_out(&c, g);
    return ag_calc_end(&c);
  }
  const int dim = (int)n->p.i[P_DIM];
  const bool keepdim = n->p.flag[0];
  const lt_tensor *idx = ag_saved_tensor(n, 0);
  lt_tensor *gk = keepdim ? (lt_tensor *)g : ag_unsqueeze(&c, g, dim);
  lt_tensor *ik = keepdim ? (lt_tensor *)idx : ag_unsqueeze(&c, idx, dim);
  lt_tensor *positions = ag_arange_along(&c, in->shape[dim], n->p.i[P_INDEX_BASE], dim, in->ndim,
                                         g->storage->device);
  lt_tensor *chosen = ag_bin(&c, LT_OP_EQ, positions, ik);
  grad_in[0] = ag_out(&c, ag_keep_where(&c, chosen, gk));
  return ag_calc_end(&c);
}

bool ag_will_record(const lt_tensor *t) {
  return lt_dtype_is_floating(t->dtype) && ag_any_requires_grad(&t, 1);
}

lt_status ag_record_index_reduce(bool is_max, const lt_tensor *t, int dim, bool keepdim,
                                 int64_t index_base, lt_tensor *values,
                                 const lt_tensor *indices) {
  if (!values || !ag_will_record(t)) return LT_OK;
  ag_node *n = ag_node_new(is_max ? "MaxBackward" : "MinBackward", index_reduce_backward, 1);
  if (!n) return LT_ERR_OOM;
  n->p.i[P_DIM] = dim;
  n->p.i[P_INDEX_BASE] = index_base;
  n->p.flag[0] = keepdim;
  ag_node_set_input(n, 0, t);
  lt_status st = ag_node_save(n, 0, indices);
  if (st == LT_OK) st = ag_node_attach(n, values, 0);
  ag_node_release(n);
  return st;
}

/* ---- max/min of everything: shared evenly among the elements equal to it
 * (NaN counts as equal to a NaN result), as PyTorch's
 * evenly_distribute_backward ---- */

static lt_status reduce_all_backward(ag_node *n, lt_tensor *const *grad_out,
                                     lt_tensor **grad_in) {
  const lt_tensor *x = ag_saved_tensor(n, 0), *r = ag_saved_tensor(n, 1);
  ag_calc c;
  ag_calc_init(&c);
  lt_tensor *equal = ag_bin(&c, LT_OP_EQ, x, r);
  lt_tensor *both_nan = ag_bin(&c, LT_OP_MUL, ag_bin(&c, LT_OP_NE, x, x), ag_bin(&c, LT_OP_NE, r, r));
  lt_tensor *mask = ag_cast(&c, ag_bin(&c, LT_OP_MAXIMUM, equal, both_nan), x->dtype);
  lt_tensor *share = ag_bin(&c, LT_OP_DIV, grad_out[0], ag_sum(&c, mask, NULL, 0, false));
  grad_in[0] = ag_out(&c, ag_bin(&c, LT_OP_MUL, mask, share));
  return ag_calc_end(&c);
}

lt_status ag_record_reduce_all(bool is_max, const lt_tensor *t, lt_tensor *r) {
  if (!ag_will_record(t)) return LT_OK;
  ag_node *n = ag_node_new(is_max ? "MaxBackward" : "MinBackward", reduce_all_backward, 1);
  if (!n) return LT_ERR_OOM;
  ag_node_set_input(n, 0, t);
  lt_status st = ag_node_save(n, 0, t);
  if (st == LT_OK) st = ag_node_save(n, 1, r);
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}
