/* The one thread pool: OpenMP's. Every kernel splits its work with
 * lt_parallel_for, and oneDNN runs in the same pool. OpenBLAS (float64 GEMM)
 * keeps the pool it started when it loaded and is told the same count, capped
 * at that pool.
 *
 * Threads are started here, never in the middle of a kernel: libgomp exits
 * the process when it cannot create a thread, and an OpenBLAS thread that
 * cannot get its buffer loops forever (the process then hangs at exit,
 * joining it). So a new count is first probed with plain pthreads of
 * OpenMP's stack size, leaving room for the work, then the OpenMP pool is
 * started at once (libgomp keeps its threads for later, smaller teams), and
 * OpenBLAS is never asked to grow. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "lt/threads.h"

#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lt/error.h"

#define PROBE_RESERVE ((size_t)256 << 20)

/* 0 until first use; then the count every parallel region asks for. */
static _Atomic int num_threads = 0;
/* Under lock: the OpenMP threads started so far (the caller's included),
 * and OpenBLAS's pool (0 until first looked at). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int pool_threads = 1;
static int blas_pool = 0;

/* The stack size libgomp gives its workers: OMP_STACKSIZE, else
 * GOMP_STACKSIZE, as "size[B|K|M|G]" in KiB by default; 0 when neither is
 * set (libgomp then uses the pthread default, and so does the probe). */
static size_t omp_stack_size(void) {
  const char *text = getenv("OMP_STACKSIZE");
  if (text == NULL) text = getenv("GOMP_STACKSIZE");
  if (text == NULL) return 0;
  char *end;
  errno = 0;
  unsigned long long size = strtoull(text, &end, 10);
  if (errno != 0 || end == text) return 0;
  while (isspace((unsigned char)*end)) end++;
  unsigned shift = 10;
  switch (tolower((unsigned char)*end)) {
    case 'b': shift = 0; end++; break;
    case 'k': shift = 10; end++; break;
    case 'm': shift = 20; end++; break;
    case 'g': shift = 30; end++; break;
  }
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0' || size > (SIZE_MAX >> shift)) return 0;
  return (size_t)(size << shift);
}

/* A stand-in for an OpenMP worker: its stack, and its first malloc, which
 * gives it a malloc arena (64 MiB of address space, kept for the workers
 * that come after: the kernels' buffers are allocated there). A worker
 * whose arena does not fit is a worker that cannot run, so it fails. */
static void *probe_thread(void *gate) {
  void *block = malloc(64);
  pthread_mutex_lock(gate);
  pthread_mutex_unlock(gate);
  free(block);
  return block != NULL ? NULL : gate;
}

/* Starts up to extra threads, all alive at once as OpenMP's would be, then
 * joins them. Returns how many started and got memory; *err is the first
 * failure. */
static int probe_threads(int extra, int *err) {
  *err = 0;
  /* Held while probing: the threads must leave room for what the work needs
   * next (oneDNN's kernels and buffers, OpenBLAS's 128 MiB buffer, which it
   * retries forever if it cannot map). */
  void *reserve = mmap(NULL, PROBE_RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve == MAP_FAILED) {
    *err = errno;
    return 0;
  }
  pthread_t *ids = malloc(sizeof *ids * (size_t)extra);
  if (ids == NULL) {
    munmap(reserve, PROBE_RESERVE);
    *err = ENOMEM;
    return 0;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  size_t stack = omp_stack_size();
  if (stack > 0) pthread_attr_setstacksize(&attr, stack);
  pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&gate);
  int started = 0;
  while (started < extra) {
    int rc = pthread_create(&ids[started], &attr, probe_thread, &gate);
    if (rc != 0) {
      *err = rc;
      break;
    }
    started++;
  }
  pthread_mutex_unlock(&gate);
  int worked = started;
  for (int i = 0; i < started; i++) {
    void *failed;
    pthread_join(ids[i], &failed);
    if (failed != NULL) worked--;
  }
  if (worked < started && *err == 0) *err = ENOMEM;
  pthread_mutex_destroy(&gate);
  pthread_attr_destroy(&attr);
  free(ids);
  munmap(reserve, PROBE_RESERVE);
  return worked;
}

/* Under lock: makes the OpenMP pool n threads strong if the system lets it.
 * Returns the count that is running (n, or fewer with *err set). */
static int start_pool(int n, int *err) {
  *err = 0;
  if (n <= pool_threads || omp_in_parallel()) return n;
  int started = probe_threads(n - pool_threads, err);
  if (started < n - pool_threads) return pool_threads + started;
  int team = 1;
#pragma omp parallel num_threads(n)
  {
#pragma omp master
    team = omp_get_num_threads();
  }
  /* OMP_THREAD_LIMIT or OMP_DYNAMIC may give fewer; lt_parallel_for copes. */
  pool_threads = team > pool_threads ? team : pool_threads;
  return n;
}

/* Under lock: n becomes the count of every parallel region. */
static void apply(int n) {
  num_threads = n;
  omp_set_num_threads(n);
  if (blas_pool == 0) blas_pool = openblas_get_num_threads();
  /* A pthread OpenBLAS would start threads past its pool without checking
   * that they started; an OpenMP one runs in the pool probed above. */
  if (openblas_get_parallel() == 2) openblas_set_num_threads(n);
  else openblas_set_num_threads(n < blas_pool ? n : blas_pool);
}

int lt_get_num_threads(void) {
  int n = num_threads;
  if (n != 0) return n;
  pthread_mutex_lock(&lock);
  n = num_threads;
  if (n == 0) {
    /* OpenMP's default already honours OMP_NUM_THREADS and otherwise gives
     * the number of cores; when that many cannot start, as many as can. */
    n = omp_get_max_threads();
    if (n < 1) n = 1;
    int err;
    n = start_pool(n, &err);
    apply(n);
  }
  pthread_mutex_unlock(&lock);
  return n;
}

lt_status lt_set_num_threads(int n) {
  if (n < 1) n = 1;
  pthread_mutex_lock(&lock);
  int err;
  int got = start_pool(n, &err);
  if (got < n) {
    pthread_mutex_unlock(&lock);
    return lt_error(LT_ERR_ARG, "set_num_threads: could only start %d of %d threads (%s)", got, n,
                    strerror(err));
  }
  apply(n);
  pthread_mutex_unlock(&lock);
  return LT_OK;
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
