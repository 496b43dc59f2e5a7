/* The "mpi" backend: CPU tensors through Open MPI's collectives. A
 * synchronous call uses the blocking collective, MPI's fastest (its
 * non-blocking ones took 1.5 to 2x longer here, scripts/bench/allreduce.sh):
 * the front has already seen every rank arrive with a matching call within
 * the timeout, so it can stall only if a rank dies inside it, and mpirun then
 * ends the job. async_op uses the non-blocking one, waited for with the
 * deadline; Open MPI progresses it inside MPI calls (wait, is_completed, the
 * next collective). */
#include <limits.h>
#include <stdlib.h>

#include "dist/mpi_internal.h"

struct dist_request {
  MPI_Request request;
};

static MPI_Comm comm_of(dist_group *g) { return g->comm->payload; }

MPI_Datatype dist_mpi_type(lt_dtype dt) {
  switch (dt) {
  case LT_FLOAT32: return MPI_FLOAT;
  case LT_FLOAT64: return MPI_DOUBLE;
  case LT_FLOAT16:
  case LT_BFLOAT16: return MPI_UINT16_T; /* reduced by mpi_half_ops.c */
  case LT_INT64: return MPI_INT64_T;
  case LT_INT32: return MPI_INT32_T;
  case LT_UINT8:
  case LT_BOOL:
  case LT_NDTYPES: break;
  }
  return MPI_UINT8_T;
}

MPI_Op dist_mpi_op(lt_dtype dt, lt_reduce_op op) {
  if (dt == LT_FLOAT16 || dt == LT_BFLOAT16) return dist_mpi_half_op(dt, op);
  /* bool: sum is "any" and prod "all", as PyTorch's NCCL backend. */
  if (dt == LT_BOOL) return (op == LT_REDUCE_SUM || op == LT_REDUCE_MAX) ? MPI_MAX : MPI_MIN;
  switch (op) {
  case LT_REDUCE_MAX: return MPI_MAX;
  case LT_REDUCE_MIN: return MPI_MIN;
  case LT_REDUCE_PROD: return MPI_PROD;
  case LT_REDUCE_SUM:
  case LT_REDUCE_AVG:
  case LT_NREDUCE_OPS: break;
  }
  return MPI_SUM; /* avg: divided after (dist_collectives.c) */
}

/* MPI counts are ints. */
static lt_status check_count(const char *op, size_t count) {
  if (count > (size_t)INT_MAX)
    return lt_error(LT_ERR_ARG, "%s: %zu elements are more than the mpi backend moves in one call (%d)",
                    op, count, INT_MAX);
  return LT_OK;
}

/* The end of every call: the blocking call's code, or the request handed out. */
static lt_status started(const char *op, const char *call, int rc, dist_request *r, dist_request **req) {
  if (rc != MPI_SUCCESS) {
    free(r);
    return dist_mpi_error(op, call, rc);
  }
  if (req != NULL) *req = r;
  return LT_OK;
}

static dist_request *new_request(dist_request **req) {
  if (req == NULL) return NULL;
  dist_request *r = malloc(sizeof *r);
  if (r != NULL) r->request = MPI_REQUEST_NULL;
  return r;
}

#define NEW_REQUEST(op)                                                             \
  dist_request *r = new_request(req);                                               \
  if (req != NULL && r == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);

static lt_status mpi_all_reduce(dist_group *g, void *buf, size_t count, lt_dtype dt, lt_reduce_op op,
                                dist_request **req) {
  LT_TRY(check_count("all_reduce", count));
  NEW_REQUEST("all_reduce");
  MPI_Datatype t = dist_mpi_type(dt);
  MPI_Op o = dist_mpi_op(dt, op);
  int rc = r ? MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, t, o, comm_of(g), &r->request)
             : MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, t, o, comm_of(g));
  return started("all_reduce", "MPI_Allreduce", rc, r, req);
}

static lt_status mpi_broadcast(dist_group *g, void *buf, size_t count, lt_dtype dt, int src,
                               dist_request **req) {
  LT_TRY(check_count("broadcast", count));
  NEW_REQUEST("broadcast");
  int rc = r ? MPI_Ibcast(buf, (int)count, dist_mpi_type(dt), src, comm_of(g), &r->request)
             : MPI_Bcast(buf, (int)count, dist_mpi_type(dt), src, comm_of(g));
  return started("broadcast", "MPI_Bcast", rc, r, req);
}

static lt_status mpi_all_gather(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                dist_request **req) {
  LT_TRY(check_count("all_gather", count * (size_t)g->size));
  NEW_REQUEST("all_gather");
  MPI_Datatype t = dist_mpi_type(dt);
  int n = (int)count;
  int rc = r ? MPI_Iallgather(in, n, t, out, n, t, comm_of(g), &r->request)
             : MPI_Allgather(in, n, t, out, n, t, comm_of(g));
  return started("all_gather", "MPI_Allgather", rc, r, req);
}

static lt_status mpi_reduce_scatter(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                    lt_reduce_op op, dist_request **req) {
  LT_TRY(check_count("reduce_scatter", count * (size_t)g->size));
  NEW_REQUEST("reduce_scatter");
  MPI_Datatype t = dist_mpi_type(dt);
  int rc = r ? MPI_Ireduce_scatter_block(in, out, (int)count, t, dist_mpi_op(dt, op), comm_of(g), &r->request)
             : MPI_Reduce_scatter_block(in, out, (int)count, t, dist_mpi_op(dt, op), comm_of(g));
  return started("reduce_scatter", "MPI_Reduce_scatter_block", rc, r, req);
}

static lt_status mpi_all_to_all(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                dist_request **req) {
  LT_TRY(check_count("all_to_all", count * (size_t)g->size));
  NEW_REQUEST("all_to_all");
  MPI_Datatype t = dist_mpi_type(dt);
  int n = (int)count;
  int rc = r ? MPI_Ialltoall(in, n, t, out, n, t, comm_of(g), &r->request)
             : MPI_Alltoall(in, n, t, out, n, t, comm_of(g));
  return started("all_to_all", "MPI_Alltoall", rc, r, req);
}

static lt_status mpi_test(dist_request *r, bool *done) {
  int flag = 0;
  int rc = MPI_Test(&r->request, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return dist_mpi_error("wait", "MPI_Test", rc);
  *done = flag != 0;
  return LT_OK;
}

static void mpi_release(dist_request *r) { free(r); }

static lt_status mpi_open(dist_group *g) {
  g->device = lt_cpu();
  return LT_OK;
}

static void mpi_close(dist_group *g, bool broken) {
  (void)g;
  (void)broken;
}

const dist_backend dist_mpi_backend = {
    .name = "mpi",
    .device_type = LT_DEVICE_CPU,
    .stream_ordered = false,
    .native_avg = false,
    .open = mpi_open,
    .close = mpi_close,
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_to_all = mpi_all_to_all,
    .test = mpi_test,
    .release = mpi_release,
};
