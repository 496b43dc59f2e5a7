/* What the MPI files of engine/dist share (built only with MPI). */
#ifndef LT_DIST_MPI_INTERNAL_H
#define LT_DIST_MPI_INTERNAL_H

#include <mpi.h>

#include "dist/dist_internal.h"

struct dist_comm {
  MPI_Comm comm; /* the descriptions, barriers, bootstraps: started in call order */
  /* The mpi backend's payload collectives: an async call's starts later,
   * from whichever call sees its description exchange done, so on its own
   * communicator it cannot cross a later call's exchange (MPI matches the
   * collectives of one communicator by their order on each rank). */
  MPI_Comm payload;
};

/* The error of a failed MPI call: "<op>: <call> failed: <MPI's words>". */
lt_status dist_mpi_error(const char *op, const char *call, int code);

/* MPI has no 16-bit float types: float16 and bfloat16 travel as 16-bit
 * integers and are reduced by user-defined ops (mpi_half_ops.c), made when
 * MPI starts and freed before it is finalized. */
void dist_mpi_half_ops_create(void);
void dist_mpi_half_ops_free(void);
MPI_Op dist_mpi_half_op(lt_dtype dt, lt_reduce_op op);

/* How lt's dtypes and reductions travel in MPI (mpi_backend.c; the simulated
 * NCCL, tests/simdev/sim_nccl.c, moves its buffers the same way): 16-bit
 * floats as 16-bit integers with the half ops, bool as bytes reduced with
 * max ("any", for sum) and min ("all", for prod), avg as a sum divided after. */
MPI_Datatype dist_mpi_type(lt_dtype dt);
MPI_Op dist_mpi_op(lt_dtype dt, lt_reduce_op op);

#endif
