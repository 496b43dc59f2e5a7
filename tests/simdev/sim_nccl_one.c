/* NCCL's stand-in (dist/nccl_hooks.h) for the test hosts of a build without
 * MPI: a world of one, the path a GPU machine without Open MPI takes
 * (engine/dist/mpi_none.c, scripts/gpu_check.sh), so it runs here too. Every
 * collective over one rank is a copy; a send to oneself meets its receive
 * at ncclGroupEnd. Device memory is opened as in sim_nccl.c (the emulator's
 * emu_library_begin/end, absent in lt_simdev). Tests only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/nccl_hooks.h"
#include "lt/dtype.h"

enum { OK = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };

void emu_library_begin(void *stream) __attribute__((weak));
void emu_library_end(void) __attribute__((weak));

struct lt_nccl_comm {
  int device;
};

static const char *detail = "";

static lt_nccl_result failed(lt_nccl_result code, const char *why) {
  detail = why;
  return code;
}

static const char *one_unavailable(void) { return NULL; }

static lt_nccl_result one_get_unique_id(lt_nccl_id *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->bytes, sizeof id->bytes, "lt-sim-nccl world of one");
  return OK;
}

static lt_nccl_result one_comm_init_rank(lt_nccl_comm **out, int nranks, const lt_nccl_id *id, int rank) {
  (void)id;
  *out = NULL;
  if (nranks != 1 || rank != 0) return failed(INVALID_ARGUMENT, "without MPI the stand-in has a world of one");
  lt_nccl_comm *c = calloc(1, sizeof *c);
  if (c == NULL) return failed(SYSTEM_ERROR, "out of memory");
  c->device = lt_cuda_current_device();
  *out = c;
  return OK;
}

static lt_nccl_result one_comm_destroy(lt_nccl_comm *c) {
  if (c == NULL) return failed(INVALID_ARGUMENT, "no communicator");
  free(c);
  return OK;
}

/* One rank's collective: out is in (sum, avg, max, min and prod of one value,
 * a broadcast from itself, a gather of one block). */
static lt_nccl_result copy(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *c,
                           lt_cuda_stream stream) {
  if (c == NULL) return failed(INVALID_ARGUMENT, "no communicator");
  if (emu_library_begin) emu_library_begin((void *)stream);
  if (in != out) memmove(out, in, count * lt_dtype_size(dt));
  if (emu_library_end) emu_library_end();
  return OK;
}

static lt_nccl_result one_all_reduce(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                                     lt_nccl_comm *c, lt_cuda_stream stream) {
  (void)op;
  return copy(in, out, count, dt, c, stream);
}

static lt_nccl_result one_broadcast(const void *in, void *out, size_t count, lt_dtype dt, int root,
                                    lt_nccl_comm *c, lt_cuda_stream stream) {
  if (root != 0) return failed(INVALID_ARGUMENT, "root is not rank 0 of a world of one");
  return copy(in, out, count, dt, c, stream);
}

static lt_nccl_result one_all_gather(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *c,
                                     lt_cuda_stream stream) {
  return copy(in, out, count, dt, c, stream);
}

/* ---- sends and receives to oneself, matched in order at ncclGroupEnd ---- */

static const void *send_buf;
static void *recv_buf;
static size_t send_bytes, recv_bytes;
static lt_cuda_stream group_stream;
static int group_depth;

static lt_nccl_result one_group_start(void) {
  group_depth++;
  return OK;
}

static lt_nccl_result one_group_end(void) {
  if (group_depth == 0) return failed(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0 || (send_buf == NULL && recv_buf == NULL)) return OK;
  lt_nccl_result r = OK;
  if (send_buf == NULL || recv_buf == NULL || send_bytes != recv_bytes) {
    r = failed(INVALID_USAGE, "a send to oneself needs a receive of the same size in its group");
  } else {
    if (emu_library_begin) emu_library_begin((void *)group_stream);
    memmove(recv_buf, send_buf, send_bytes);
    if (emu_library_end) emu_library_end();
  }
  send_buf = recv_buf = NULL;
  return r;
}

static lt_nccl_result one_send(const void *in, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c,
                               lt_cuda_stream stream) {
  if (c == NULL || peer != 0 || group_depth == 0 || send_buf != NULL)
    return failed(INVALID_USAGE, "one send to rank 0, inside a group");
  send_buf = in;
  send_bytes = count * lt_dtype_size(dt);
  group_stream = stream;
  return OK;
}

static lt_nccl_result one_recv(void *out, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c,
                               lt_cuda_stream stream) {
  if (c == NULL || peer != 0 || group_depth == 0 || recv_buf != NULL)
    return failed(INVALID_USAGE, "one receive from rank 0, inside a group");
  recv_buf = out;
  recv_bytes = count * lt_dtype_size(dt);
  group_stream = stream;
  return OK;
}

/* ncclCommGetAsyncError: a world of one has no peer to lose. */
static lt_nccl_result one_comm_get_async_error(lt_nccl_comm *c, lt_nccl_result *async) {
  *async = OK;
  return c == NULL ? INVALID_ARGUMENT : OK;
}

static const char *one_error_string(lt_nccl_result r) {
  static char text[200];
  snprintf(text, sizeof text, "%s (simulated NCCL, world of one: %s)", r == OK ? "no error" : "error", detail);
  return text;
}

static const lt_nccl_hooks one_nccl_hooks = {
    .name = "simulated",
    .unavailable = one_unavailable,
    .get_unique_id = one_get_unique_id,
    .comm_init_rank = one_comm_init_rank,
    .comm_destroy = one_comm_destroy,
    .comm_abort = one_comm_destroy,
    .comm_get_async_error = one_comm_get_async_error,
    .all_reduce = one_all_reduce,
    .broadcast = one_broadcast,
    .all_gather = one_all_gather,
    .reduce_scatter = one_all_reduce,
    .send = one_send,
    .recv = one_recv,
    .group_start = one_group_start,
    .group_end = one_group_end,
    .get_error_string = one_error_string,
};

__attribute__((constructor)) static void install_sim_nccl_one(void) { lt_nccl_set_hooks(&one_nccl_hooks); }
