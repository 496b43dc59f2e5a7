/* lt_parallel_for: every index visited exactly once, in contiguous chunks, on
 * any thread count; serial below the grain and when nested. */
#include <omp.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "lt/threads.h"

typedef struct visit_log {
  int64_t n;
  unsigned char *hits; /* per index: times visited */
  int calls;           /* fn invocations (atomic) */
  int in_parallel;     /* calls made from inside a parallel region */
} visit_log;

static void record(void *ctx, int64_t begin, int64_t end) {
  visit_log *log = ctx;
#pragma omp atomic
  log->calls++;
  if (omp_in_parallel()) {
#pragma omp atomic
    log->in_parallel++;
  }
  for (int64_t i = begin; i < end; i++) log->hits[i]++;
}

static visit_log run(int64_t n, int64_t grain) {
  visit_log log = {n, calloc((size_t)(n > 0 ? n : 1), 1), 0, 0};
  lt_parallel_for(n, grain, record, &log);
  bool once = true;
  for (int64_t i = 0; i < n; i++) once = once && log.hits[i] == 1;
  CHECK(once);
  free(log.hits);
  return log;
}

/* An outer parallel loop whose body runs an inner one: the inner is serial.
 * (No CHECK in here: the counters in check.h are not atomic.) */
static void nested_body(void *ctx, int64_t begin, int64_t end) {
  int *inner_calls = ctx;
  for (int64_t i = begin; i < end; i++) {
    unsigned char hits[1000] = {0};
    visit_log log = {1000, hits, 0, 0};
    lt_parallel_for(1000, 1, record, &log);
#pragma omp atomic
    *inner_calls += log.calls;
  }
}

int main(void) {
  int saved = lt_get_num_threads();
  CHECK(saved >= 1);

  lt_set_num_threads(2);
  CHECK_EQ_INT(lt_get_num_threads(), 2);
  visit_log log = run(100000, 1000);
  CHECK_EQ_INT(log.calls, 2);
  CHECK_EQ_INT(log.in_parallel, 2);
  log = run(999, 1000); /* below the grain: one call on the whole range */
  CHECK_EQ_INT(log.calls, 1);
  CHECK_EQ_INT(log.in_parallel, 0);
  log = run(1500, 1000); /* two pieces of grain size at most: two chunks */
  CHECK_EQ_INT(log.calls, 2);
  log = run(0, 1); /* nothing to do: no call */
  CHECK_EQ_INT(log.calls, 0);
  log = run(7, 0); /* grain 0 treated as 1 */
  CHECK_EQ_INT(log.calls, 2);

  lt_set_num_threads(5); /* more threads than cores still covers every index */
  log = run(12345, 1);
  CHECK(log.calls >= 1 && log.calls <= 5);

  lt_set_num_threads(1);
  log = run(100000, 1);
  CHECK_EQ_INT(log.calls, 1);
  CHECK_EQ_INT(log.in_parallel, 0);

  lt_set_num_threads(0); /* clamped to 1 */
  CHECK_EQ_INT(lt_get_num_threads(), 1);

  lt_set_num_threads(2);
  int inner_calls = 0;
  lt_parallel_for(4, 1, nested_body, &inner_calls);
  CHECK_EQ_INT(inner_calls, 4); /* each inner loop ran as one serial call */

  lt_set_num_threads(saved);
  return check_summary("test_threads");
}
