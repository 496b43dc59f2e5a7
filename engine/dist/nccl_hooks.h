/* NCCL as a table of hooks, as the CUDA runtime is (core/cuda_hooks.h): the
 * "nccl" backend (nccl_backend.c) calls the hooks in force, never libnccl
 * itself. A CUDA build's default is the real library, opened with dlopen
 * the first time a group with backend "nccl" starts (cuda/cuda_nccl.cu), so
 * lt does not load libnccl at start-up; the simulated device and the CUDA
 * emulator install a stand-in over MPI (tests/simdev/sim_nccl.c); other
 * builds have none, and the backend says so.
 *
 * Each entry means the NCCL call it is named after, with lt's dtype, reduce
 * op and stream in place of NCCL's types, so the engine needs no nccl.h.
 * Results are NCCL's codes (0: success); get_error_string words one. */
#ifndef LT_DIST_NCCL_HOOKS_H
#define LT_DIST_NCCL_HOOKS_H

#include <stddef.h>

#include "lt/cuda.h"
#include "lt/distributed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lt_nccl_comm lt_nccl_comm; /* the implementation's communicator */
typedef struct lt_nccl_id {
  char bytes[128]; /* NCCL_UNIQUE_ID_BYTES */
} lt_nccl_id;
typedef int lt_nccl_result;
enum { LT_NCCL_SUCCESS = 0, LT_NCCL_IN_PROGRESS = 7 /* ncclInProgress */ };

typedef struct lt_nccl_hooks {
  const char *name; /* "none", "nccl", "simulated" */
  /* NULL when the calls below can be made, else why not (no library, no
   * NCCL in this build); loads the library on the first call. */
  const char *(*unavailable)(void);
  lt_nccl_result (*get_unique_id)(lt_nccl_id *id);
  /* Binds the communicator to the current CUDA device, as NCCL does. */
  lt_nccl_result (*comm_init_rank)(lt_nccl_comm **comm, int nranks, const lt_nccl_id *id, int rank);
  lt_nccl_result (*comm_destroy)(lt_nccl_comm *comm);
  lt_nccl_result (*comm_abort)(lt_nccl_comm *comm);
  /* ncclCommGetAsyncError: *async is LT_NCCL_SUCCESS (or LT_NCCL_IN_PROGRESS) while
   * the communicator is well, else the error a queued collective met (a rank gone, the
   * network), after which nothing queued on it will finish: it must be aborted. */
  lt_nccl_result (*comm_get_async_error)(lt_nccl_comm *comm, lt_nccl_result *async);
  /* Queued on stream (a stream of the communicator's device). bool moves as
   * bytes, its sum and max being "any", prod and min "all" (PyTorch's NCCL
   * meaning); op is never avg for integers (the front refuses it). */
  lt_nccl_result (*all_reduce)(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                               lt_nccl_comm *comm, lt_cuda_stream stream);
  lt_nccl_result (*broadcast)(const void *in, void *out, size_t count, lt_dtype dt, int root,
                              lt_nccl_comm *comm, lt_cuda_stream stream);
  /* count: the elements each rank gives (all_gather) or gets (reduce_scatter). */
  lt_nccl_result (*all_gather)(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *comm,
                               lt_cuda_stream stream);
  lt_nccl_result (*reduce_scatter)(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                                   lt_nccl_comm *comm, lt_cuda_stream stream);
  lt_nccl_result (*send)(const void *in, size_t count, lt_dtype dt, int peer, lt_nccl_comm *comm,
                         lt_cuda_stream stream);
  lt_nccl_result (*recv)(void *out, size_t count, lt_dtype dt, int peer, lt_nccl_comm *comm,
                         lt_cuda_stream stream);
  /* Sends and receives between these two run together (all_to_all). */
  lt_nccl_result (*group_start)(void);
  lt_nccl_result (*group_end)(void);
  const char *(*get_error_string)(lt_nccl_result result);
} lt_nccl_hooks;

/* Installs hooks (every entry set; the table must outlive lt), before the
 * first group with backend "nccl" starts. */
void lt_nccl_set_hooks(const lt_nccl_hooks *hooks);
/* The hooks in force: those installed, else the build's own. */
const lt_nccl_hooks *lt_nccl_hooks_get(void);

/* The real library's hooks (cuda/cuda_nccl.cu; only in a program that has
 * the CUDA sources), or NULL when lt was built without NCCL's header. */
const lt_nccl_hooks *lt_nccl_runtime_hooks(void);

#ifdef __cplusplus
}
#endif

#endif
