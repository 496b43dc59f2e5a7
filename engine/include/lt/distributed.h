/* Collectives between processes (torch.distributed's meaning): one default
 * process group of the ranks mpirun started, over a backend (engine/dist/):
 * "mpi" moves CPU tensors with Open MPI, "nccl" moves CUDA tensors with NCCL
 * (bootstrapped over MPI). Ranks are 0-based, as MPI's and device numbers.
 *
 * Every collective first exchanges a small description of the call (which
 * collective, dtype, shape, op, root) between the ranks, polled against the
 * group's timeout: a rank that does not arrive, ranks that disagree, or a rank
 * that failed (lt_dist_abort_job) become errors naming the op and the values
 * instead of a hang or corrupted memory. Only then the tensors move. */
#ifndef LT_DISTRIBUTED_H
#define LT_DISTRIBUTED_H

#include "lt/api.h"

#include <stdbool.h>

#include "lt/error.h"
#include "lt/tensor.h"

typedef enum lt_reduce_op {
  LT_REDUCE_SUM = 0,
  LT_REDUCE_AVG,
  LT_REDUCE_MAX,
  LT_REDUCE_MIN,
  LT_REDUCE_PROD,
  LT_NREDUCE_OPS
} lt_reduce_op;

LT_API const char *lt_reduce_op_name(lt_reduce_op op); /* "sum", ... */

/* Whether this lt was built with the backend ("mpi", "nccl"). */
LT_API bool lt_dist_backend_compiled(const char *backend);

/* Creates the default process group (MPI is started on the first call and
 * finalized at exit, so a group can be destroyed and made again). timeout_s
 * bounds every wait of the group's collectives. */
LT_API lt_status lt_dist_init(const char *backend, double timeout_s);
LT_API bool lt_dist_is_initialized(void);
/* Errors name op when no group exists. */
LT_API lt_status lt_dist_rank(const char *op, int *rank);
LT_API lt_status lt_dist_world_size(const char *op, int *size);
LT_API const char *lt_dist_backend_name(void); /* NULL without a group */
LT_API lt_status lt_dist_barrier(void);
/* Frees the group's communicators; work still in flight is kept alive (its
 * buffers may yet be written) until it completes or the process ends. */
LT_API lt_status lt_dist_destroy(void);

/* A collective started with a work out-parameter (async_op): its tensors hold
 * the result once lt_dist_wait returns (on NCCL: for work queued later on the
 * current stream). With work NULL the call returns when done. An async call
 * returns before the ranks have compared their calls: a disagreement is the
 * error of its wait and is_completed, on every rank, and the collective is
 * skipped everywhere. Wait, is_completed and every later call of the group
 * start the async collectives whose comparison has ended, in call order. */
typedef struct lt_dist_work lt_dist_work;
LT_API lt_status lt_dist_wait(lt_dist_work *work);
LT_API lt_status lt_dist_is_completed(lt_dist_work *work, bool *done);
/* Drops the caller's handle; unfinished work stays with the group. */
LT_API void lt_dist_work_free(lt_dist_work *work);

/* In place: every rank's t becomes the reduction of all ranks' t. */
LT_API lt_status lt_dist_all_reduce(lt_tensor *t, lt_reduce_op op, lt_dist_work **work);
/* Every rank's t becomes rank src's. */
LT_API lt_status lt_dist_broadcast(lt_tensor *t, int src, lt_dist_work **work);
/* outs[r] becomes rank r's in (n: the world size; every out in's shape). */
LT_API lt_status lt_dist_all_gather(lt_tensor *const *outs, int n, const lt_tensor *in,
                                    lt_dist_work **work);
/* out becomes the reduction over ranks of their ins[rank] (n: the world size). */
LT_API lt_status lt_dist_reduce_scatter(lt_tensor *out, const lt_tensor *const *ins, int n,
                                        lt_reduce_op op, lt_dist_work **work);
/* outs[r] becomes rank r's ins[this rank] (every tensor of one shape). */
LT_API lt_status lt_dist_all_to_all(lt_tensor *const *outs, int nout, const lt_tensor *const *ins,
                                    int nin, lt_dist_work **work);

/* After an error nobody caught (the host calls it): tells the other ranks
 * which error stopped this one, so that they stop with it instead of waiting
 * for their timeout, waits a little for them to say so, and aborts the job
 * (MPI_Abort). Returns at once when MPI was never started. */
LT_API void lt_dist_abort_job(const char *message);

#endif
