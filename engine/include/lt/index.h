/* Gathering along a dimension and random permutations of indices: what a data
 * loader needs to shuffle a data set and cut it into batches. */
#ifndef LT_INDEX_H
#define LT_INDEX_H

#include "lt/api.h"

#include "lt/rng.h"
#include "lt/tensor.h"

/* torch.index_select: out takes t's shape with dim's size replaced by the
 * number of indices, and out's k-th slice along dim is t's slice index[k].
 * index is a 1-D (or 0-dim) int64 or int32 tensor whose values count from
 * index_base (1 for Lua users); a value outside dim's range is an
 * LT_ERR_INDEX error naming it. The result is a new contiguous tensor on t's
 * device; its gradient scatters back into t's rows (repeats summed). */
LT_API lt_status lt_index_select(const lt_tensor *t, int dim, const lt_tensor *index,
                          int64_t index_base, lt_tensor **out);

/* A random permutation of base, base + 1, ..., base + n - 1: an int64 CPU
 * tensor. Fisher-Yates driven by Philox draws in a fixed order, so it depends
 * only on the generator's state, never on the thread count. With gen NULL it
 * draws from the global generator (as lt_uniform_ does, moving it on); else
 * from *gen, which moves on the same way and leaves the global one alone. */
LT_API lt_status lt_randperm(int64_t n, int64_t base, lt_rng_state *gen, lt_tensor **out);

#endif
