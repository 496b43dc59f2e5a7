/* The MPI runtime of a build without MPI (dist_internal.h): a world of one.
 * Its backends are those that need no MPI to move data (nccl; the mpi
 * backend is not built, and init_process_group says why), and a world of one
 * needs no bootstrap: every rank's description is this rank's, a barrier
 * waits for nobody. A GPU machine without Open MPI can so still start a
 * group with backend "nccl" (scripts/gpu_check.sh does). A launcher that
 * started several ranks is refused: they could not meet. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

struct dist_comm {
  int unused;
};

/* The world size a launcher announces (Open MPI, PMI, torchrun's), or 1. */
static int launched_size(void) {
  static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (v != NULL && atoi(v) > 1) return atoi(v);
  }
  return 1;
}

lt_status dist_mpi_comm_open(const char *op, double timeout_s, dist_comm **out, int *rank, int *size) {
  (void)timeout_s;
  int launched = launched_size();
  if (launched > 1)
    return lt_error(LT_ERR_ARG, "%s: this lt was built without MPI, so it can start only a world of one, and "
                    "the launcher started %d ranks (install Debian's libopenmpi-dev and openmpi-bin, then "
                    "build again: see the README)", op, launched);
  dist_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  *out = c;
  *rank = 0;
  *size = 1;
  return LT_OK;
}

void dist_mpi_comm_close(dist_comm *c) { free(c); }

lt_status dist_mpi_exchange(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                            double timeout_s) {
  (void)c, (void)op, (void)timeout_s;
  memcpy(all, in, bytes);
  return LT_OK;
}

/* Complete at once: *out NULL says so, and no test is ever made. */
lt_status dist_mpi_exchange_start(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                                  dist_exchange **out) {
  (void)c, (void)op;
  memcpy(all, in, bytes);
  *out = NULL;
  return LT_OK;
}

lt_status dist_mpi_exchange_test(dist_exchange **x, const char *op, bool *done) {
  (void)x, (void)op;
  *done = true;
  return LT_OK;
}

lt_status dist_mpi_barrier(dist_comm *c, const char *op, double timeout_s) {
  (void)c, (void)op, (void)timeout_s;
  return LT_OK;
}

lt_status dist_mpi_broadcast_bytes(dist_comm *c, void *buf, size_t bytes, int src, const char *op,
                                   double timeout_s) {
  (void)c, (void)buf, (void)bytes, (void)src, (void)op, (void)timeout_s;
  return LT_OK;
}

lt_status dist_mpi_local_rank(dist_comm *c, int *local_rank) {
  (void)c;
  *local_rank = 0;
  return LT_OK;
}

lt_status dist_mpi_check_notice(const char *op) {
  (void)op;
  return LT_OK;
}

void dist_mpi_abort_job(const char *message) { (void)message; }
