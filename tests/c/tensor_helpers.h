/* Small tensor helpers shared by the C tests: the allocator's byte count for
 * leak checks, and releasing a batch of results. */
#ifndef LT_TEST_TENSOR_HELPERS_H
#define LT_TEST_TENSOR_HELPERS_H

#include "lt/lt.h"

/* Bytes allocated on the CPU device now (all pools). */
static inline size_t allocated_bytes(void) {
  lt_memory_stats s;
  lt_memory_get_stats(lt_cpu(), &s);
  return (size_t)s.allocated_bytes[LT_POOL_ALL].current;
}

/* Releases the non-NULL tensors among ts[0..n). */
static inline void release_all(lt_tensor **ts, int n) {
  for (int i = 0; i < n; i++)
    if (ts[i]) lt_tensor_release(ts[i]);
}

#endif
