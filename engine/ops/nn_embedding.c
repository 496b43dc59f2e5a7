/* embedding (torch.nn.functional.embedding): index checks, dispatch. */
#include <string.h>

#include "ops/nn_internal.h"

static lt_status describe_index(const char *op, long long value, long long n, long long base) {
  return lt_error(LT_ERR_INDEX, "%s: index %lld is out of range for %lld embeddings (indices are %lld to %lld)",
                  op, value, n, base, base + n - 1);
}

/* padding_idx as a 0-based row, or -1 for none. */
static lt_status padding_row(const char *op, const lt_embedding_opts *o, int64_t n,
                             int64_t *row) {
  *row = -1;
  if (!o->has_padding_idx) return LT_OK;
  const int64_t r = o->padding_idx < 0 ? o->padding_idx + n : o->padding_idx - o->index_base;
  if (r < 0 || r >= n)
    return lt_error(LT_ERR_INDEX, "%s: padding_idx %lld is out of range for %lld embeddings", op,
                    (long long)o->padding_idx, (long long)n);
  *row = r;
  return LT_OK;
}

static lt_status embedding_forward(const lt_tensor *weight, const lt_tensor *indices,
                                   const lt_embedding_opts *o, lt_tensor **out) {
  const char *op = "embedding";
  *out = NULL;
  LT_TRY(nn_check_float(op, "weight", weight));
  LT_TRY(nn_check_index(op, "indices", indices, weight));
  if (!o) return lt_error(LT_ERR_ARG, "%s: expected options, got nothing", op);
  char sw[OPS_SHAPE_BUF];
  if (weight->ndim != 2)
    return lt_error(LT_ERR_SHAPE, "%s: expected weight with 2 dimensions [n, d], got %s", op,
                    ops_shape_str(sw, weight->shape, weight->ndim));
  if (indices->ndim + 1 > LT_MAX_DIMS)
    return lt_error(LT_ERR_SHAPE, "%s: indices have too many dimensions (%d)", op, indices->ndim);
  int64_t row;
  LT_TRY(padding_row(op, o, weight->shape[0], &row));
  const lt_device dev = weight->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  int64_t shape[LT_MAX_DIMS];
  memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof *shape);
  shape[indices->ndim] = weight->shape[1];
  /* A gather copies bytes: every floating dtype runs natively. */
  nn_scope s = {0};
  lt_tensor *wc, *ic, *r;
  lt_status st = nn_prepare(&s, weight, weight->dtype, &wc);
  if (st == LT_OK) st = nn_prepare(&s, indices, LT_INT64, &ic);
  if (st == LT_OK)
    st = nn_check_index_range(op, ic, weight->shape[0], o->index_base, false, 0, describe_index);
  if (st == LT_OK) st = nn_result(&s, shape, indices->ndim + 1, weight->dtype, dev, &r);
  if (st == LT_OK) {
    const int64_t m = lt_numel(indices), rshape[2] = {m, weight->shape[1]};
    lt_tensor iv, rv;
    nn_view(&iv, ic, &m, 1);
    nn_view(&rv, r, rshape, 2);
    st = be->embedding(&rv, wc, &iv, o->index_base);
  }
  if (st == LT_OK) lt_tensor_retain(r), *out = r;
  nn_scope_end(&s);
  return st;
}

lt_status lt_embedding(const lt_tensor *weight, const lt_tensor *indices,
                       const lt_embedding_opts *o, lt_tensor **out) {
  *out = NULL;
  /* Off while the operands are converted: those copies need no history. */
  const bool grad_mode = lt_set_grad_enabled(false);
  lt_status st = embedding_forward(weight, indices, o, out);
  lt_set_grad_enabled(grad_mode);
  if (st == LT_OK) st = ag_record_embedding(weight, indices, o, *out);
  return nn_settle(st, out, NULL);
}

lt_status lt_embedding_backward(const lt_tensor *grad_out, const lt_tensor *indices,
                                int64_t num_weights, const lt_embedding_opts *o,
                                lt_tensor **grad_weight) {
  const char *op = "embedding_backward";
  *grad_weight = NULL;
  LT_TRY(nn_check_float(op, "grad_output", grad_out));
  LT_TRY(nn_check_index(op, "indices", indices, grad_out));
  if (!o) return lt_error(LT_ERR_ARG, "%s: expected options, got nothing", op);
  if (num_weights < 0)
    return lt_error(LT_ERR_ARG, "%s: num_weights must be non-negative, got %lld", op,
                    (long long)num_weights);
  const bool fits = grad_out->ndim == indices->ndim + 1 &&
                    nn_same_shape(grad_out->shape, indices->ndim, indices->shape, indices->ndim);
  if (!fits) {
    char sg[OPS_SHAPE_BUF], si[OPS_SHAPE_BUF];
    return lt_error(LT_ERR_SHAPE, "%s: expected grad_output of shape indices %s + [d], got %s", op,
                    ops_shape_str(si, indices->shape, indices->ndim),
                    ops_shape_str(sg, grad_out->shape, grad_out->ndim));
  }
  int64_t row;
  LT_TRY(padding_row(op, o, num_weights, &row));
  const lt_device dev = grad_out->storage->device;
  const lt_nn_backend *be;
  LT_TRY(nn_backend(op, dev, &be));
  const lt_dtype ct = nn_compute_dtype(grad_out->dtype);
  const int64_t d = grad_out->shape[grad_out->ndim - 1], m = lt_numel(indices);
  const int64_t gshape[2] = {num_weights, d}, goshape[2] = {m, d};
  nn_scope s = {0};
  lt_tensor *goc, *ic, *gw;
  lt_status st = nn_prepare(&s, grad_out, ct, &goc);
  if (st == LT_OK) st = nn_prepare(&s, indices, LT_INT64, &ic);
  if (st == LT_OK)
    st = nn_check_index_range(op, ic, num_weights, o->index_base, false, 0, describe_index);
  if (st == LT_OK) st = nn_result(&s, gshape, 2, ct, dev, &gw);
  if (st == LT_OK) {
    lt_tensor gov, iv;
    nn_view(&gov, goc, goshape, 2);
    nn_view(&iv, ic, &m, 1);
    st = be->embedding_backward(gw, &gov, &iv, o->index_base, row);
  }
  if (st == LT_OK) st = nn_deliver(gw, grad_out->dtype, grad_weight);
  nn_scope_end(&s);
  return st;
}
