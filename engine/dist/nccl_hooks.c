/* The NCCL hooks in force (dist/nccl_hooks.h), and the table of a build that
 * has no NCCL: it says so, and every call fails without touching anything. */
#include "dist/nccl_hooks.h"

enum { NONE_ERROR = 5 }; /* ncclInvalidUsage's code */

static const char *none_unavailable(void) {
  return "this lt has no NCCL: the nccl backend needs a CUDA build that found NCCL's header (nccl.h; "
         "libnccl itself is opened when a group starts), or the simulated device";
}

static lt_nccl_result none_id(lt_nccl_id *id) {
  (void)id;
  return NONE_ERROR;
}

static lt_nccl_result none_init(lt_nccl_comm **comm, int nranks, const lt_nccl_id *id, int rank) {
  (void)nranks, (void)id, (void)rank;
  *comm = NULL;
  return NONE_ERROR;
}

static lt_nccl_result none_comm(lt_nccl_comm *comm) {
  (void)comm;
  return NONE_ERROR;
}

static lt_nccl_result none_async_error(lt_nccl_comm *comm, lt_nccl_result *async) {
  (void)comm;
  *async = NONE_ERROR;
  return NONE_ERROR;
}

static lt_nccl_result none_reduce(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                                  lt_nccl_comm *comm, lt_cuda_stream stream) {
  (void)in, (void)out, (void)count, (void)dt, (void)op, (void)comm, (void)stream;
  return NONE_ERROR;
}

static lt_nccl_result none_broadcast(const void *in, void *out, size_t count, lt_dtype dt, int root,
                                     lt_nccl_comm *comm, lt_cuda_stream stream) {
  (void)in, (void)out, (void)count, (void)dt, (void)root, (void)comm, (void)stream;
  return NONE_ERROR;
}

static lt_nccl_result none_gather(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *comm,
                                  lt_cuda_stream stream) {
  (void)in, (void)out, (void)count, (void)dt, (void)comm, (void)stream;
  return NONE_ERROR;
}

static lt_nccl_result none_send(const void *in, size_t count, lt_dtype dt, int peer, lt_nccl_comm *comm,
                                lt_cuda_stream stream) {
  (void)in, (void)count, (void)dt, (void)peer, (void)comm, (void)stream;
  return NONE_ERROR;
}

static lt_nccl_result none_recv(void *out, size_t count, lt_dtype dt, int peer, lt_nccl_comm *comm,
                                lt_cuda_stream stream) {
  (void)out, (void)count, (void)dt, (void)peer, (void)comm, (void)stream;
  return NONE_ERROR;
}

static lt_nccl_result none_group(void) { return NONE_ERROR; }

static const char *none_error_string(lt_nccl_result result) {
  (void)result;
  return none_unavailable();
}

static const lt_nccl_hooks no_nccl_hooks = {
    .name = "none",
    .unavailable = none_unavailable,
    .get_unique_id = none_id,
    .comm_init_rank = none_init,
    .comm_destroy = none_comm,
    .comm_abort = none_comm,
    .comm_get_async_error = none_async_error,
    .all_reduce = none_reduce,
    .broadcast = none_broadcast,
    .all_gather = none_gather,
    .reduce_scatter = none_reduce,
    .send = none_send,
    .recv = none_recv,
    .group_start = none_group,
    .group_end = none_group,
    .get_error_string = none_error_string,
};

static const lt_nccl_hooks *installed;

void lt_nccl_set_hooks(const lt_nccl_hooks *hooks) { installed = hooks; }

const lt_nccl_hooks *lt_nccl_hooks_get(void) {
  if (installed == NULL) {
#if LT_HAVE_CUDA
    installed = lt_nccl_runtime_hooks(); /* NULL when built without nccl.h */
#endif
    if (installed == NULL) installed = &no_nccl_hooks;
  }
  return installed;
}
