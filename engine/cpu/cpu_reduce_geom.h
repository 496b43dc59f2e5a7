/* Geometry shared by the reduction kernels: the input's dims split into kept
 * dims (one output element per index) and reduced dims (walked for each
 * output), each group with size-1 dims dropped and mergeable dims merged.
 * Merging keeps row-major order, so the k-th element a walk visits is the
 * k-th in the reduced dims' row-major order (argmax over all dims relies on
 * it). */
#ifndef LT_CPU_REDUCE_GEOM_H
#define LT_CPU_REDUCE_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "lt/tensor.h"

typedef struct cpu_dims {
  int ndim;
  int64_t shape[LT_MAX_DIMS];
  int64_t stride[LT_MAX_DIMS]; /* bytes */
  int64_t numel;
} cpu_dims;

typedef struct cpu_reduce_geom {
  const char *base; /* the input's first element */
  cpu_dims kept, reduced;
} cpu_reduce_geom;

void cpu_reduce_geom_init(cpu_reduce_geom *g, const lt_tensor *in, const bool *reduced);

/* Byte offset of kept index o (row-major over the kept dims). */
int64_t cpu_dims_offset(const cpu_dims *d, int64_t o);

/* Calls run(ctx, p, stride, n, k) for the runs of d's elements [begin, end)
 * starting at base, in row-major order; k is the first run element's
 * position in that order. */
typedef void (*cpu_run_fn)(void *ctx, const char *p, int64_t stride, int64_t n, int64_t k);
void cpu_dims_walk(const cpu_dims *d, const char *base, int64_t begin, int64_t end,
                   cpu_run_fn run, void *ctx);

/* Fixed partitions of a long single reduction: block b covers
 * [b * size, min(n, (b + 1) * size)). The count depends only on n, never on
 * threads, so partial results combine in the same order every time. */
#define CPU_REDUCE_MAX_BLOCKS 512
#define CPU_REDUCE_MIN_BLOCK 16384
int64_t cpu_reduce_block_size(int64_t n, int64_t *nblocks);

#endif
