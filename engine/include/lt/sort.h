/* Sorting, top-k, gather and scatter along a dimension, and sampling of
 * category indices: the index ops a transformer needs beyond lt/index.h.
 * Dims are 0-based; index values (given and returned) count from
 * index_base (1 for Lua users). */
#ifndef LT_SORT_H
#define LT_SORT_H

#include "lt/api.h"

#include <stdbool.h>
#include <stdint.h>

#include "lt/rng.h"
#include "lt/tensor.h"

/* torch.sort(t, dim, descending, stable=True): values (t's dtype) and
 * indices (int64) of t's shape, each slice along dim ordered. Always stable:
 * equal elements keep their order, so the result is deterministic and equal
 * to PyTorch's stable=True. NaN is greater than every number (last
 * ascending, first descending); -0.0 and 0.0 are equal. Either output may be
 * NULL. The gradient goes back to each value's original position. */
LT_API lt_status lt_sort(const lt_tensor *t, int dim, bool descending, int64_t index_base,
                         lt_tensor **values, lt_tensor **indices);

/* torch.topk: the k largest (or smallest) along dim, in order, as the first k
 * of lt_sort's stable order (ties: the earlier position first). k must lie in
 * [0, size of dim]. */
LT_API lt_status lt_topk(const lt_tensor *t, int64_t k, int dim, bool largest, int64_t index_base,
                         lt_tensor **values, lt_tensor **indices);

/* torch.gather: out has index's shape and out[p] = t[p with p[dim] replaced
 * by index[p] - index_base]. index is int64 with t's number of dims, no
 * larger than t in the dims other than dim; values outside dim's range are
 * an LT_ERR_INDEX error naming the value. Its gradient is a scatter_add. */
LT_API lt_status lt_gather(const lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                           lt_tensor **out);

/* torch.scatter / scatter_add: a copy of t with, for every position p of
 * index, out[p with p[dim] = index[p] - index_base] set to (add: increased
 * by) src[p], or by value when src is NULL (scatter only: add needs src).
 * index is int64 with t's number of dims, no larger than src in any dim and
 * no larger than t in the dims other than dim; src has t's dtype. Where
 * index repeats a target, scatter keeps the last src in index's row-major
 * order (PyTorch leaves it undefined) and scatter_add adds in that order, so
 * both are deterministic on every device. An index value out of range is an
 * LT_ERR_INDEX error naming it, and nothing is written. */
LT_API lt_status lt_scatter(const lt_tensor *t, int dim, const lt_tensor *index,
                            int64_t index_base, const lt_tensor *src, double value, bool add,
                            lt_tensor **out);
/* The same, written into t. */
LT_API lt_status lt_scatter_(lt_tensor *t, int dim, const lt_tensor *index, int64_t index_base,
                             const lt_tensor *src, double value, bool add);

/* torch.multinomial: num_samples category indices per row of the 1-D or 2-D
 * non-negative weights (need not sum to 1), int64 counting from index_base,
 * on probs' device. Without replacement the indices of a row are distinct.
 * Draws come from the generator (gen NULL: the global one, which moves on),
 * on the host whatever the device, so a seed gives the same draws on every
 * device. Negative, infinite or NaN weights, a row of zeros, and more
 * samples than categories with a non-zero weight without replacement are
 * errors naming the values. */
LT_API lt_status lt_multinomial(const lt_tensor *probs, int64_t num_samples, bool replacement,
                                int64_t index_base, lt_rng_state *gen, lt_tensor **out);

#endif
