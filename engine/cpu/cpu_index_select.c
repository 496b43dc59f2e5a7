/* index_select on the CPU: each selected slice is a run of contiguous bytes
 * (everything inside dim), copied with one memcpy. */
#include <string.h>

#include "cpu/cpu_index.h"
#include "lt/threads.h"

/* Bytes copied per thread chunk below which a gather stays on one thread. */
#define GATHER_GRAIN_BYTES ((int64_t)1 << 18)

typedef struct gather_job {
  char *out;
  const char *in;
  const int64_t *rows;
  int64_t n;           /* slices selected per outer index */
  int64_t in_size;     /* in's size along dim */
  int64_t base;        /* subtracted from each row */
  size_t slice_bytes;  /* bytes of one slice: the dims after dim */
} gather_job;

/* Output slices [begin, end), numbered outer * n + k. */
static void gather_range(void *ctx, int64_t begin, int64_t end) {
  const gather_job *job = ctx;
  for (int64_t s = begin; s < end; s++) {
    int64_t outer = s / job->n, k = s % job->n;
    const char *src = job->in + (size_t)(outer * job->in_size + job->rows[k] - job->base) *
                                   job->slice_bytes;
    memcpy(job->out + (size_t)s * job->slice_bytes, src, job->slice_bytes);
  }
}

lt_status cpu_index_select(lt_tensor *out, const lt_tensor *in, int dim, const int64_t *rows,
                           int64_t n, int64_t base) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; d++) outer *= in->shape[d];
  for (int d = dim + 1; d < in->ndim; d++) inner *= in->shape[d];
  gather_job job = {lt_data(out), lt_data(in), rows, n, in->shape[dim], base,
                    (size_t)inner * lt_dtype_size(in->dtype)};
  int64_t slices = outer * n;
  if (slices == 0 || job.slice_bytes == 0) return LT_OK;
  int64_t grain = GATHER_GRAIN_BYTES / (int64_t)job.slice_bytes;
  lt_parallel_for(slices, grain > 0 ? grain : 1, gather_range, &job);
  return LT_OK;
}
