/* Waiting with a deadline: the one loop under every wait of engine/dist, so
 * that a collective some rank never joins, or joins after another rank has
 * failed, ends in an error naming the op instead of a hang. */
#include <sched.h>
#include <time.h>

#include "dist/dist_internal.h"

double dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

lt_status dist_poll_check(const char *op, double timeout_s, double start) {
  LT_TRY(dist_mpi_check_notice(op));
  if (dist_now() - start > timeout_s)
    return lt_error(LT_ERR_IO,
                    "%s: timed out after %g s (the process group's timeout) waiting for the other "
                    "ranks: a rank did not reach this call, or is stuck before it", op, timeout_s);
  return LT_OK;
}

lt_status dist_poll(const char *op, double timeout_s, double start, dist_test_fn test, void *ctx) {
  for (;;) {
    bool done = false;
    LT_TRY(test(ctx, &done));
    if (done) return LT_OK;
    LT_TRY(dist_poll_check(op, timeout_s, start));
    double waited = dist_now() - start;
    /* MPI progresses a collective only inside its calls (the test), so the
     * loop keeps testing; past the first millisecond it lets other processes
     * run (ranks may outnumber cores), past 100 ms it sleeps between tests. */
    if (waited > 0.1) {
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    } else if (waited > 0.001) {
      sched_yield();
    }
  }
}
