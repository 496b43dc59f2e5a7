/* The one thread pool: OpenMP's. Every kernel splits its work with
 * lt_parallel_for, and OpenBLAS is told the same thread count so that GEMM and
 * our own loops agree on how many cores they may use. */
#include "lt/threads.h"

#include <cblas.h>
#include <omp.h>

/* 0 until first use; then the count every parallel region asks for. */
static _Atomic int num_threads = 0;

int lt_get_num_threads(void) {
  int n = num_threads;
  if (n == 0) {
    /* OpenMP's default already honours OMP_NUM_THREADS and otherwise gives
     * the number of cores. */
    n = omp_get_max_threads();
    if (n < 1) n = 1;
    num_threads = n;
  }
  return n;
}

void lt_set_num_threads(int n) {
  if (n < 1) n = 1;
  num_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

void lt_parallel_for(int64_t n, int64_t grain, lt_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = lt_get_num_threads();
  /* Nested calls run serially: the outer region already uses every thread. */
  if (n < grain || threads <= 1 || omp_in_parallel()) {
    fn(ctx, 0, n);
    return;
  }
  /* As PyTorch's at::parallel_for: no more chunks than pieces of grain size,
   * so a thread never gets too little work to pay for its wake-up. */
  int64_t pieces = (n + grain - 1) / grain;
  int chunks = pieces < threads ? (int)pieces : threads;
  if (chunks <= 1) {
    fn(ctx, 0, n);
    return;
  }
#pragma omp parallel num_threads(chunks)
  {
    /* The runtime may give fewer threads than asked; split by the team we got
     * so that [0, n) is always covered exactly once. */
    int64_t team = omp_get_num_threads();
    int64_t id = omp_get_thread_num();
    int64_t chunk = (n + team - 1) / team;
    int64_t begin = id * chunk;
    int64_t end = begin + chunk < n ? begin + chunk : n;
    if (begin < end) fn(ctx, begin, end);
  }
}
