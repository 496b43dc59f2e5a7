/* The one thread pool every kernel uses (OpenMP underneath; BLAS is told the
 * same count). */
#ifndef LT_THREADS_H
#define LT_THREADS_H

#include "lt/api.h"

#include <stdint.h>

#include "lt/error.h"

/* Starts the threads at once; when the system cannot start n (a limit on
 * address space or processes) it fails with the count that can start, and
 * the previous count stays. n below 1 means 1. */
LT_API lt_status lt_set_num_threads(int n);
/* The count set, or on first use OpenMP's default (OMP_NUM_THREADS, else the
 * cores), lowered to what the system can start. */
LT_API int lt_get_num_threads(void);

/* Calls fn(ctx, begin, end) over [0, n) in chunks, in parallel when n is at
 * least grain and more than one thread is set. fn must not allocate tensors. */
typedef void (*lt_range_fn)(void *ctx, int64_t begin, int64_t end);
LT_API void lt_parallel_for(int64_t n, int64_t grain, lt_range_fn fn, void *ctx);

#endif
