/* embedding: a row gather forward; backward adds each gradient row into the
 * dense weight gradient. Rows may repeat, so backward is split by column
 * blocks (every thread owns whole columns and adds rows in index order):
 * no races, and the sums do not depend on the thread count. */
#include <string.h>

#include "cpu/cpu_nn.h"
#include "lt/threads.h"

typedef struct embedding_job {
  const char *weight, *go;
  char *out, *gw;
  const int64_t *indices;
  int64_t m, n, d, base, padding_row;
  size_t es;
  bool f64;
} embedding_job;

static void gather_range(void *ctx, int64_t r0, int64_t r1) {
  const embedding_job *j = ctx;
  const size_t row_bytes = (size_t)j->d * j->es;
  for (int64_t r = r0; r < r1; r++)
    memcpy(j->out + (size_t)r * row_bytes,
           j->weight + (size_t)(j->indices[r] - j->base) * row_bytes, row_bytes);
}

lt_status cpu_nn_embedding(lt_tensor *out, const lt_tensor *weight, const lt_tensor *indices,
                           int64_t index_base) {
  embedding_job j = {.weight = lt_data(weight), .out = lt_data(out), .indices = lt_data(indices),
                     .m = lt_numel(indices), .d = weight->shape[1], .base = index_base,
                     .es = lt_dtype_size(weight->dtype)};
  lt_parallel_for(j.m, NN_GRAIN / (j.d + 1) + 1, gather_range, &j);
  return LT_OK;
}

#define EMBEDDING_COL_BLOCK 64

NN_INLINE void scatter_impl(const embedding_job *j, int64_t b0, int64_t b1, bool f64) {
  for (int64_t blk = b0; blk < b1; blk++) {
    const int64_t c0 = blk * EMBEDDING_COL_BLOCK;
    const int64_t c1 = c0 + EMBEDDING_COL_BLOCK < j->d ? c0 + EMBEDDING_COL_BLOCK : j->d;
    for (int64_t row = 0; row < j->n; row++)
      for (int64_t c = c0; c < c1; c++) nn_st(j->gw, row * j->d + c, f64, 0.0);
    for (int64_t r = 0; r < j->m; r++) {
      const int64_t row = j->indices[r] - j->base;
      if (row == j->padding_row) continue;
      for (int64_t c = c0; c < c1; c++) {
        const int64_t at = row * j->d + c;
        nn_st(j->gw, at, f64, nn_ld(j->gw, at, f64) + nn_ld(j->go, r * j->d + c, f64));
      }
    }
  }
}

static void scatter_range(void *ctx, int64_t b0, int64_t b1) {
  const embedding_job *j = ctx;
  if (j->f64)
    scatter_impl(j, b0, b1, true);
  else
    scatter_impl(j, b0, b1, false);
}

lt_status cpu_nn_embedding_backward(lt_tensor *gw, const lt_tensor *go, const lt_tensor *indices,
                                    int64_t index_base, int64_t padding_row) {
  embedding_job j = {.go = lt_data(go), .gw = lt_data(gw), .indices = lt_data(indices),
                     .m = lt_numel(indices), .n = gw->shape[0], .d = gw->shape[1],
                     .base = index_base, .padding_row = padding_row, .f64 = nn_is_f64(gw)};
  const int64_t blocks = (j.d + EMBEDDING_COL_BLOCK - 1) / EMBEDDING_COL_BLOCK;
  const int64_t per_block = (j.m + j.n) * EMBEDDING_COL_BLOCK;
  lt_parallel_for(blocks, NN_GRAIN / (per_block + 1) + 1, scatter_range, &j);
  return LT_OK;
}
