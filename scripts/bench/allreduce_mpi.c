/* The baseline of scripts/bench/allreduce.sh: MPI_Allreduce (float32 sum, in
 * place) of 1, 16 and 64 MiB called from C, median of the repeats, printed as
 * "mpi <MiB> <ms>" by rank 0. With "nonblocking" it times MPI_Iallreduce
 * polled with MPI_Test instead, the way lt waits with a deadline.
 *   mpirun -np 2 allreduce_mpi [repeats] [nonblocking] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int repeats = argc > 1 ? atoi(argv[1]) : 10;
  int nonblocking = argc > 2 && strcmp(argv[2], "nonblocking") == 0;
  if (repeats < 1) repeats = 1;
  static const int sizes_mib[] = {1, 16, 64};
  double *times = malloc(sizeof(double) * (size_t)repeats);
  for (int s = 0; s < 3; s++) {
    size_t count = (size_t)sizes_mib[s] * 1024 * 1024 / sizeof(float);
    float *buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) buf[i] = 1.0f;
    for (int r = -1; r < repeats; r++) { /* r = -1: warm-up, not timed */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (nonblocking) {
        MPI_Request req;
        int done = 0;
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        while (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      } else {
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
      if (r >= 0) times[r] = (MPI_Wtime() - t0) * 1e3;
    }
    qsort(times, (size_t)repeats, sizeof(double), by_value);
    if (rank == 0) printf("%s %d %.3f\n", nonblocking ? "mpi_nonblocking" : "mpi", sizes_mib[s], times[repeats / 2]);
    free(buf);
  }
  free(times);
  MPI_Finalize();
  return 0;
}
