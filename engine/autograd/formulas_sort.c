/* Gradients of sort, topk, gather, scatter and scatter_add, PyTorch's
 * formulas written with the ops themselves (so each is differentiable in
 * turn):
 *   sort, topk:   grad_t   = zeros(t).scatter(dim, indices, g)
 *   gather:       grad_t   = zeros(t).scatter_add(dim, index, g)
 *   scatter:      grad_t   = g.scatter(dim, index, 0)   grad_src = g.gather(dim, index)
 *   scatter_add:  grad_t   = g                          grad_src = g.gather(dim, index)
 * sort's and topk's indices never repeat along dim, so their scatter places
 * every element of g. Where index is smaller than src, the src positions no
 * index reaches took no part and get zeros (PyTorch refuses that backward:
 * its gather has index's shape, not src's). */
#include "autograd/grad_calc.h"
#include "autograd/record_sort.h"
#include "lt/sort.h"

enum { SAVED_INDEX = 0 };
enum { P_DIM = 0, P_BASE = 1 };

/* zeros of input 0's shape (g's dtype and device) with g written (or added)
 * at the positions index names. */
static lt_tensor *scatter_into_zeros(ag_calc *c, const ag_node *n, const lt_tensor *g, bool add) {
  const ag_input *in = &n->inputs[0];
  lt_tensor *zeros = ag_zeros(c, in->shape, in->ndim, g->dtype, g->storage->device);
  if (c->st != LT_OK) return NULL;
  lt_tensor *r = NULL;
  lt_status st = lt_scatter(zeros, (int)n->p.i[P_DIM], ag_saved_tensor(n, SAVED_INDEX),
                            n->p.i[P_BASE], g, 0.0, add, &r);
  return ag_keep(c, st, r);
}

/* ---- sort and topk ---- */

static lt_status sort_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  ag_calc c;
  ag_calc_init(&c);
  grad_in[0] = ag_out(&c, scatter_into_zeros(&c, n, grad_out[0], false));
  return ag_calc_end(&c);
}

static lt_status record_index_node(const char *name, ag_backward_fn fn, const lt_tensor *t,
                                   int dim, int64_t index_base, const lt_tensor *index,
                                   lt_tensor *r) {
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(&t, 1)) return LT_OK;
  ag_node *n = ag_node_new(name, fn, 1);
  if (!n) return LT_ERR_OOM;
  n->p.i[P_DIM] = dim;
  n->p.i[P_BASE] = index_base;
  n->p.ni = 2;
  ag_node_set_input(n, 0, t);
  lt_status st = ag_node_save(n, SAVED_INDEX, index);
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}

lt_status ag_record_sort(const char *name, const lt_tensor *t, int dim, int64_t index_base,
                         const lt_tensor *indices, lt_tensor *values) {
  return record_index_node(name, sort_backward, t, dim, index_base, indices, values);
}

/* ---- gather ---- */

static lt_status gather_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  ag_calc c;
  ag_calc_init(&c);
  grad_in[0] = ag_out(&c, scatter_into_zeros(&c, n, grad_out[0], true));
  return ag_calc_end(&c);
}

lt_status ag_record_gather(const lt_tensor *t, int dim, const lt_tensor *index,
                           int64_t index_base, lt_tensor *r) {
  return record_index_node("GatherBackward", gather_backward, t, dim, index_base, index, r);
}

/* ---- scatter and scatter_add: p.flag[0] add ---- */

static lt_status scatter_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  const lt_tensor *g = grad_out[0], *index = ag_saved_tensor(n, SAVED_INDEX);
  const int dim = (int)n->p.i[P_DIM];
  const int64_t base = n->p.i[P_BASE];
  ag_calc c;
  ag_calc_init(&c);
  if (ag_needs(n, 0)) {
    if (n->p.flag[0]) {
      grad_in[0] = ag_out(&c, g);
    } else { /* the overwritten positions took no part */
      lt_tensor *r = NULL;
      lt_status st = lt_scatter(g, dim, index, base, NULL, 0.0, false, &r);
      grad_in[0] = ag_out(&c, ag_keep(&c, st, r));
    }
  }
  if (ag_needs(n, 1)) {
    lt_tensor *picked = NULL;
    lt_status st = lt_gather(g, dim, index, base, &picked);
    picked = ag_keep(&c, st, picked);
    /* Zeros after the part of src that index covers, dim by dim. */
    const ag_input *src = &n->inputs[1];
    int64_t pad[2 * LT_MAX_DIMS];
    bool smaller = false;
    for (int d = 0; d < src->ndim; d++) {
      const int slot = 2 * (src->ndim - 1 - d); /* constant_pad_nd: last dim first */
      pad[slot] = 0;
      pad[slot + 1] = src->shape[d] - index->shape[d];
      smaller = smaller || pad[slot + 1] > 0;
    }
    if (smaller && c.st == LT_OK) {
      lt_tensor *padded = NULL;
      st = lt_constant_pad_nd(picked, pad, 2 * src->ndim, 0.0, &padded);
      picked = ag_keep(&c, st, padded);
    }
    grad_in[1] = ag_out(&c, picked);
  }
  return ag_calc_end(&c);
}

lt_status ag_record_scatter(bool add, const lt_tensor *t, int dim, const lt_tensor *index,
                            int64_t index_base, const lt_tensor *src, lt_tensor *r) {
  const lt_tensor *ins[2] = {t, src};
  if (!lt_dtype_is_floating(r->dtype) || !ag_any_requires_grad(ins, 2)) return LT_OK;
  ag_node *n = ag_node_new(add ? "ScatterAddBackward" : "ScatterBackward", scatter_backward, 2);
  if (!n) return LT_ERR_OOM;
  n->p.i[P_DIM] = dim;
  n->p.i[P_BASE] = index_base;
  n->p.ni = 2;
  n->p.flag[0] = add;
  /* In place (r is t) t's history is still the one from before the write,
   * so the edge is its old value's; attaching makes the node the new one. */
  ag_node_set_input(n, 0, t);
  ag_node_set_input(n, 1, src);
  lt_status st = ag_node_save(n, SAVED_INDEX, index);
  if (st == LT_OK) st = ag_node_attach(n, r, 0);
  ag_node_release(n);
  return st;
}
