/* The strided iterator behind every elementwise CPU kernel. */
#include "cpu/cpu_iter.h"

#include "lt/threads.h"

void cpu_iter_init(cpu_iter *it, const lt_tensor *const *ops, int nops) {
  const lt_tensor *out = ops[0];
  it->nops = nops;
  it->numel = lt_numel(out);
  for (int k = 0; k < nops; k++) it->data[k] = ops[k] ? (char *)lt_data(ops[k]) : NULL;
  if (it->numel == 0) { /* nothing to visit; a view with no element may have sizes and
                           strides whose products pass INT64_MAX */
    it->ndim = 1;
    it->shape[0] = 0;
    for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    return;
  }

  /* Full-rank geometry, dropping size-1 dims (they never move a pointer). */
  int nd = 0;
  for (int d = 0; d < out->ndim; d++) {
    if (out->shape[d] == 1) continue;
    it->shape[nd] = out->shape[d];
    for (int k = 0; k < nops; k++) {
      const lt_tensor *t = ops[k];
      int64_t s = 0;
      int td = t ? d - (out->ndim - t->ndim) : -1; /* right-aligned broadcast */
      if (t && td >= 0 && t->shape[td] != 1)
        s = t->stride[td] * (int64_t)lt_dtype_size(t->dtype);
      it->stride[k][nd] = s;
    }
    nd++;
  }
  if (nd == 0) { /* a single element */
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    nd = 1;
  }

  /* Merge dim d into d+1 when every operand steps over the inner dim
   * exactly once per step of the outer one. */
  int m = 0;
  for (int d = 1; d < nd; d++) {
    bool mergeable = true;
    for (int k = 0; k < nops; k++)
      if (it->stride[k][m] != it->stride[k][d] * it->shape[d]) mergeable = false;
    if (mergeable) {
      it->shape[m] *= it->shape[d];
      for (int k = 0; k < nops; k++) it->stride[k][m] = it->stride[k][d];
    } else {
      m++;
      it->shape[m] = it->shape[d];
      for (int k = 0; k < nops; k++) it->stride[k][m] = it->stride[k][d];
    }
  }
  it->ndim = m + 1;
}

void cpu_iter_run_range(const cpu_iter *it, int64_t begin, int64_t end, cpu_loop_fn loop,
                        void *ctx) {
  if (begin >= end) return;
  const int last = it->ndim - 1;
  const int64_t inner = it->shape[last];
  int64_t idx[LT_MAX_DIMS];
  int64_t rest = begin;
  for (int d = last; d >= 0; d--) {
    idx[d] = rest % it->shape[d];
    rest /= it->shape[d];
  }
  int64_t inner_stride[CPU_ITER_MAX_OPS];
  for (int k = 0; k < it->nops; k++) inner_stride[k] = it->stride[k][last];

  int64_t pos = begin;
  while (pos < end) {
    char *ptrs[CPU_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) {
      char *p = it->data[k];
      if (p)
        for (int d = 0; d <= last; d++) p += idx[d] * it->stride[k][d];
      ptrs[k] = p;
    }
    int64_t n = inner - idx[last];
    if (n > end - pos) n = end - pos;
    loop(ctx, ptrs, inner_stride, n);
    pos += n;
    idx[last] += n;
    for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) { /* carry */
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

typedef struct run_job {
  const cpu_iter *it;
  cpu_loop_fn loop;
  void *ctx;
} run_job;

static void run_chunk(void *vjob, int64_t begin, int64_t end) {
  const run_job *job = vjob;
  cpu_iter_run_range(job->it, begin, end, job->loop, job->ctx);
}

void cpu_iter_run(const cpu_iter *it, cpu_loop_fn loop, void *ctx) {
  if (it->numel <= 0) return;
  if (it->numel < CPU_GRAIN) {
    cpu_iter_run_range(it, 0, it->numel, loop, ctx);
    return;
  }
  run_job job = {it, loop, ctx};
  lt_parallel_for(it->numel, CPU_GRAIN, run_chunk, &job);
}
