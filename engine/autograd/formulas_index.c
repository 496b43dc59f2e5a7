/* Gradients of the gathers: embedding and index_select. Both scatter the
 * output's gradient back to the rows it was read from, summing repeats (an
 * index_add into zeros); embedding_backward is that scatter for rows of a
 * matrix, so index_select moves its dim to the front and reuses it. */
#include "autograd/formulas_nn.h"
#include "autograd/grad_calc.h"

enum { SAVED_INDICES = 0 };

/* ---- embedding: p.i[0] index_base, p.i[1] padding_idx, flag[0] has one ---- */

static lt_status embedding_backward(ag_node *n, lt_tensor *const *grad_out, lt_tensor **grad_in) {
  lt_embedding_opts o = {n->p.i[0], n->p.flag[0], n->p.i[1]};
  return lt_embedding_backward(grad_out[0], ag_saved_tensor(n, SAVED_INDICES),
                               n->inputs[0].shape[0], &o, &grad_in[0]);
}

lt_status ag_record_embedding(const lt_tensor *weight, const lt_tensor *indices,
                              const lt_embedding_opts *o, lt_tensor *r) {
  const lt_tensor *ins[1] = {weight};
  lt_status st;
  ag_node *n = ag_nn_node("EmbeddingBackward", embedding_backward, ins, 1, r, &st);
  if (!n) return st;
  n->p.i[0] = o->index_base;
  n->p.i[1] = o->padding_idx;
  n->p.ni = 2;
  n->p.flag[0] = o->has_padding_idx;
  st = ag_nn_save(n, st, SAVED_INDICES, indices);
  return ag_nn_finish(n, st, r);
}

/* ---- index_select: p.i[0] dim, p.i[1] index_base ---- */

static lt_status index_select_backward(ag_node *n, lt_tensor *const *grad_out,
                                       lt_tensor **grad_in) {
  const ag_input *in = &n->inputs[0];
  const int dim = (int)n->p.i[0], nd = in->ndim;
  const lt_tensor *g = grad_out[0];
  /* g with dim first: [k, rest...], and the order that undoes it. */
  int front[LT_MAX_DIMS], back[LT_MAX_DIMS];
  front[0] = dim;
  for (int d = 0, k = 1; d < nd; d++)
    if (d != dim) front[k++] = d;
  for (int d = 0; d < nd; d++) back[d] = d < dim ? d + 1 : (d == dim ? 0 : d);
  int64_t rest = 1, rows_shape[LT_MAX_DIMS];
  rows_shape[0] = in->shape[dim];
  for (int k = 1; k < nd; k++) {
    rows_shape[k] = in->shape[front[k]];
    rest *= rows_shape[k];
  }
  const int64_t count = g->shape[dim];
  const int64_t matrix[2] = {count, rest};
  ag_calc c;
  ag_calc_init(&c);
  const lt_tensor *idx = ag_saved_tensor(n, SAVED_INDICES);
  idx = ag_reshape(&c, idx, &count, 1);
  if (idx && idx->dtype != LT_INT64) idx = ag_cast(&c, idx, LT_INT64);
  lt_tensor *g2 = ag_reshape(&c, ag_permute(&c, g, front, nd), matrix, 2);
  lt_tensor *summed = NULL;
  if (c.st == LT_OK) {
    const lt_embedding_opts o = {n->p.i[1], false, 0};
    lt_status st = lt_embedding_backward(g2, idx, in->shape[dim], &o, &summed);
    summed = ag_keep(&c, st, summed);
  }
  lt_tensor *rows = ag_reshape(&c, summed, rows_shape, nd);
  grad_in[0] = ag_out(&c, ag_permute(&c, rows, back, nd));
  return ag_calc_end(&c);
}

lt_status ag_record_index_select(const lt_tensor *t, int dim, const lt_tensor *index,
                                 int64_t index_base, lt_tensor *r) {
  const lt_tensor *ins[1] = {t};
  lt_status st;
  ag_node *n = ag_nn_node("IndexSelectBackward", index_select_backward, ins, 1, r, &st);
  if (!n) return st;
  n->p.i[0] = dim;
  n->p.i[1] = index_base;
  n->p.ni = 2;
  /* The forward takes a CPU index for a tensor on a device (a data loader's
   * order); the backward's scatter runs on the device, so it keeps a copy
   * there (its range noted on the way, so the scatter's check reads nothing
   * back). */
  lt_tensor *moved = NULL;
  if (st == LT_OK && !lt_device_eq(index->storage->device, t->storage->device))
    st = lt_to_device(index, t->storage->device, &moved);
  st = ag_nn_save(n, st, SAVED_INDICES, moved ? moved : index);
  if (moved) lt_tensor_release(moved);
  return ag_nn_finish(n, st, r);
}
