/* How an in-place op's destination shares memory with one of its inputs.
 *
 * An elementwise kernel reads and writes in an order of its own, so an input
 * that shares some but not all of its elements with the destination (x and
 * x:narrow(...) shifted by one, x and x:t()) reads values already
 * overwritten. PyTorch's TensorIterator refuses such pairs when it can prove
 * the overlap (at::get_overlap_status: both views non-overlapping and dense)
 * and lets the rest through; lt refuses the same pairs with the same words,
 * and computes the rest, which it cannot prove disjoint, through a copy of
 * the input. */
#include <stdlib.h>

#include "ops/ops_internal.h"

/* The first and last byte (inclusive) that t's elements touch. Dims of size
 * 1 and broadcast dims (stride 0) add nothing. */
static void byte_span(const lt_tensor *t, int64_t *first, int64_t *last) {
  const int64_t item = (int64_t)lt_dtype_size(t->dtype);
  int64_t lo = t->offset, hi = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    const int64_t reach = (t->shape[d] - 1) * t->stride[d];
    if (reach < 0) lo += reach;
    else hi += reach;
  }
  *first = lo * item;
  *last = hi * item + item - 1;
}

static int by_stride(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Every byte of t's span belongs to exactly one element (PyTorch's
 * is_non_overlapping_and_dense): its strides, ordered, are the contiguous
 * strides of some permutation of its shape. */
static bool dense(const lt_tensor *t) {
  int64_t dims[LT_MAX_DIMS][2];
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 1) continue;
    dims[n][0] = t->shape[d];
    dims[n][1] = t->stride[d];
    n++;
  }
  qsort(dims, (size_t)n, sizeof dims[0], by_stride);
  int64_t expect = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i][1] != expect) return false;
    expect *= dims[i][0];
  }
  return true;
}

/* Each element of out reads the element of in at the same address: in,
 * broadcast to out's shape (aligned at the last dim), has out's strides. */
static bool same_elements(const lt_tensor *out, const lt_tensor *in) {
  if (lt_dtype_size(out->dtype) != lt_dtype_size(in->dtype) || out->offset != in->offset)
    return false;
  const int lead = out->ndim - in->ndim;
  if (lead < 0) return false;
  for (int d = 0; d < out->ndim; d++) {
    if (out->shape[d] == 1) continue;
    const int s = d - lead;
    const bool broadcast = s < 0 || in->shape[s] != out->shape[d];
    if (broadcast || in->stride[s] != out->stride[d]) return false;
  }
  return true;
}

static bool within(int64_t byte, int64_t first, int64_t last) {
  return byte >= first && byte <= last;
}

ops_overlap ops_overlap_of(const lt_tensor *out, const lt_tensor *in) {
  if (!out || !in || out->storage != in->storage) return OPS_OVERLAP_NONE;
  if (lt_numel(out) == 0 || lt_numel(in) == 0) return OPS_OVERLAP_NONE;
  if (same_elements(out, in)) return OPS_OVERLAP_SAME;
  int64_t of, ol, inf, inl;
  byte_span(out, &of, &ol);
  byte_span(in, &inf, &inl);
  if (ol < inf || inl < of) return OPS_OVERLAP_NONE;
  if (lt_dtype_size(out->dtype) != lt_dtype_size(in->dtype)) return OPS_OVERLAP_PARTIAL;
  /* A dense view owns every element slot of its span, so an end element of
   * the other view inside that span is an element of both. */
  const bool out_dense = dense(out), in_dense = dense(in);
  if (out_dense && in_dense) return OPS_OVERLAP_PARTIAL;
  if (out_dense && (within(inf, of, ol) || within(inl, of, ol))) return OPS_OVERLAP_PARTIAL;
  if (in_dense && (within(of, inf, inl) || within(ol, inf, inl))) return OPS_OVERLAP_PARTIAL;
  return OPS_OVERLAP_UNKNOWN;
}

lt_status ops_overlap_error(const char *op) {
  return lt_error(LT_ERR_ARG,
                  "%s: unsupported operation: some elements of the input tensor and the "
                  "written-to tensor refer to a single memory location. Please clone() the "
                  "tensor before performing the operation.",
                  op);
}

lt_status ops_inplace_input(const char *op, const lt_tensor *out, const lt_tensor *in,
                            bool refuse_partial, const lt_tensor **use, lt_tensor **copy) {
  *use = in;
  *copy = NULL;
  const ops_overlap ov = ops_overlap_of(out, in);
  if (ov == OPS_OVERLAP_NONE || ov == OPS_OVERLAP_SAME) return LT_OK;
  if (ov == OPS_OVERLAP_PARTIAL && refuse_partial) return ops_overlap_error(op);
  /* Read everything before anything is written: the copy is recorded by
   * autograd (CloneBackward), so gradients still reach the input. */
  LT_TRY(lt_clone(in, copy));
  *use = *copy;
  return LT_OK;
}

lt_status ops_check_disjoint(const char *op, const lt_tensor *out, const char *out_name,
                             const lt_tensor *in, const char *in_name) {
  if (ops_overlap_of(out, in) == OPS_OVERLAP_NONE) return LT_OK;
  return lt_error(LT_ERR_ARG,
                  "%s: unsupported operation: %s (written) and %s (read) share memory; clone "
                  "one of them first",
                  op, out_name, in_name);
}
