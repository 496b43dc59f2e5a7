/* Kept/reduced geometry and the walk of the reduced elements. */
#include "cpu/cpu_reduce_geom.h"

static void dims_push(cpu_dims *d, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (d->ndim > 0 && d->stride[d->ndim - 1] == stride * size) { /* merge into the outer dim */
    d->shape[d->ndim - 1] *= size;
    d->stride[d->ndim - 1] = stride;
    return;
  }
  d->shape[d->ndim] = size;
  d->stride[d->ndim] = stride;
  d->ndim++;
}

void cpu_reduce_geom_init(cpu_reduce_geom *g, const lt_tensor *in, const bool *reduced) {
  const int64_t es = (int64_t)lt_dtype_size(in->dtype);
  g->base = lt_data(in);
  g->kept.ndim = g->reduced.ndim = 0;
  g->kept.numel = g->reduced.numel = 1;
  /* No element to read (a 0 among the reduced sizes): the outputs only get
   * their initial value. The other sizes and strides of such a view may have
   * products past INT64_MAX, so none is formed: the kept dims (the output's
   * sizes, which fit) step by 0. */
  if (lt_numel(in) == 0) {
    g->reduced.numel = 0;
    for (int d = 0; d < in->ndim; d++)
      if (!reduced[d]) {
        g->kept.numel *= in->shape[d];
        dims_push(&g->kept, in->shape[d], 0);
      }
    return;
  }
  for (int d = 0; d < in->ndim; d++) {
    cpu_dims *target = reduced[d] ? &g->reduced : &g->kept;
    target->numel *= in->shape[d];
    dims_push(target, in->shape[d], in->stride[d] * es);
  }
}

int64_t cpu_dims_offset(const cpu_dims *d, int64_t o) {
  int64_t off = 0;
  for (int i = d->ndim - 1; i >= 0; i--) {
    off += (o % d->shape[i]) * d->stride[i];
    o /= d->shape[i];
  }
  return off;
}

void cpu_dims_walk(const cpu_dims *d, const char *base, int64_t begin, int64_t end,
                   cpu_run_fn run, void *ctx) {
  if (begin >= end) return;
  if (d->ndim == 0) { /* a single element */
    run(ctx, base, 0, 1, 0);
    return;
  }
  const int last = d->ndim - 1;
  int64_t idx[LT_MAX_DIMS], rest = begin;
  for (int i = last; i >= 0; i--) {
    idx[i] = rest % d->shape[i];
    rest /= d->shape[i];
  }
  int64_t pos = begin;
  while (pos < end) {
    const char *p = base;
    for (int i = 0; i <= last; i++) p += idx[i] * d->stride[i];
    int64_t n = d->shape[last] - idx[last];
    if (n > end - pos) n = end - pos;
    run(ctx, p, d->stride[last], n, pos);
    pos += n;
    idx[last] += n;
    for (int i = last; i > 0 && idx[i] == d->shape[i]; i--) {
      idx[i] = 0;
      idx[i - 1]++;
    }
  }
}

int64_t cpu_reduce_block_size(int64_t n, int64_t *nblocks) {
  int64_t size = CPU_REDUCE_MIN_BLOCK;
  if ((n + size - 1) / size > CPU_REDUCE_MAX_BLOCKS)
    size = (n + CPU_REDUCE_MAX_BLOCKS - 1) / CPU_REDUCE_MAX_BLOCKS;
  *nblocks = n > 0 ? (n + size - 1) / size : 0;
  return size;
}
