/* An N-d strided iterator over up to four operands that share one shape
 * (operand 0, the output, defines it; the others broadcast with stride 0).
 * Adjacent dims that every operand walks contiguously are merged, so a
 * contiguous tensor is a single run however many dims it has; the loop
 * callback then sees whole runs and can be a plain vectorisable loop. */
#ifndef LT_CPU_ITER_H
#define LT_CPU_ITER_H

#include <stdint.h>

#include "lt/tensor.h"

#define CPU_ITER_MAX_OPS 4
/* Elements below which a loop stays on one thread (about 32K, so that the
 * fork/join cost stays small next to the work). */
#define CPU_GRAIN 32768

typedef struct cpu_iter {
  int nops;
  int ndim; /* after merging; at least 1 */
  int64_t numel;
  int64_t shape[LT_MAX_DIMS];                   /* outermost first */
  int64_t stride[CPU_ITER_MAX_OPS][LT_MAX_DIMS]; /* in bytes */
  char *data[CPU_ITER_MAX_OPS];
} cpu_iter;

/* ops[0] is the output; ops[i] may be NULL (a scalar held by the caller:
 * data NULL, stride 0). */
void cpu_iter_init(cpu_iter *it, const lt_tensor *const *ops, int nops);

/* Called once per run of n elements: ptrs[i] is operand i's first element,
 * strides[i] its step in bytes. */
typedef void (*cpu_loop_fn)(void *ctx, char **ptrs, const int64_t *strides, int64_t n);

/* Elements [begin, end) in row-major order. */
void cpu_iter_run_range(const cpu_iter *it, int64_t begin, int64_t end, cpu_loop_fn loop,
                        void *ctx);
/* Every element, split over the thread pool above CPU_GRAIN elements. Each
 * element is visited once, so results never depend on the thread count. */
void cpu_iter_run(const cpu_iter *it, cpu_loop_fn loop, void *ctx);

#endif
