/* A stand-in for NCCL (dist/nccl_hooks.h) in the hosts that have no GPU: the
 * simulated device (lt_simdev, whose device memory is host memory), and the
 * CUDA emulator (lt_cudaemu, whose device memory the host may touch only
 * inside a library call: emu_library_begin/end), where lt's own NCCL code
 * reaches it through libnccl-emu.so (tests/cudaemu/emu_nccl.cc). Tests
 * only; built with MPI (sim_nccl_one.c without).
 *
 * It moves the device buffers between the processes of an mpirun job with
 * MPI, one process per device as NCCL is used, so lt's nccl backend (its
 * bootstrap, device choice, stream order, work handles and failure paths)
 * runs as it would over NCCL, with `init_process_group{backend = "nccl"}`.
 * Semantics are NCCL's as the backend uses them: ncclCommInitRank waits for
 * every rank and checks that they hold the same id and distinct devices;
 * collectives run in the order of the call's stream (the simulated stream
 * completes work as it is queued; the emulator's queue is run first, as its
 * cuBLAS does), so a collective is done when its call returns; sends and
 * receives between ncclGroupStart and ncclGroupEnd run together at the end.
 * Communicators are split from MPI_COMM_WORLD: lt's groups span the world. */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/mpi_internal.h"
#include "dist/nccl_hooks.h"
#include "lt/dtype.h"

/* NCCL's result codes. */
enum { OK = 0, SYSTEM_ERROR = 2, INTERNAL_ERROR = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, REMOTE_ERROR = 6 };

/* The emulator's: run the stream's queued work, open device memory (weak:
 * absent in lt_simdev, whose device memory is plain host memory). */
void emu_library_begin(void *stream) __attribute__((weak));
void emu_library_end(void) __attribute__((weak));

struct lt_nccl_comm {
  MPI_Comm comm;
  int rank, size, device;
};

static char detail[256]; /* the last failure, for get_error_string */

__attribute__((format(printf, 2, 3))) static lt_nccl_result failed(lt_nccl_result code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return code;
}

static const char *sim_unavailable(void) { return NULL; }

static lt_nccl_result sim_get_unique_id(lt_nccl_id *id) {
  static unsigned serial;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  memset(id, 0, sizeof *id);
  snprintf(id->bytes, sizeof id->bytes, "lt-sim-nccl %d %ld %u", rank, (long)getpid(), ++serial);
  return OK;
}

/* What each rank tells the others at init. */
typedef struct member {
  lt_nccl_id id;
  char host[64];
  int device;
} member;

static lt_nccl_result sim_comm_init_rank(lt_nccl_comm **out, int nranks, const lt_nccl_id *id, int rank) {
  *out = NULL;
  int started = 0;
  MPI_Initialized(&started);
  if (!started) return failed(SYSTEM_ERROR, "%s: MPI is not started", "ncclCommInitRank");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failed(INVALID_ARGUMENT, "%s: rank %d of %d", "ncclCommInitRank", rank, nranks);
  lt_nccl_comm *c = calloc(1, sizeof *c);
  member *all = calloc((size_t)nranks, sizeof *all);
  member me = {.id = *id, .device = lt_cuda_current_device()};
  if (c == NULL || all == NULL) {
    free(c), free(all);
    return failed(SYSTEM_ERROR, "%s: out of memory", "ncclCommInitRank");
  }
  c->comm = MPI_COMM_NULL;
  gethostname(me.host, sizeof me.host - 1);
  /* Every world rank takes part, ordered by its NCCL rank. */
  lt_nccl_result r = OK;
  if (MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c->comm) != MPI_SUCCESS)
    r = failed(SYSTEM_ERROR, "%s: MPI_Comm_split failed", "ncclCommInitRank");
  int size = 0;
  if (r == OK) MPI_Comm_size(c->comm, &size);
  if (r == OK && size != nranks)
    r = failed(INVALID_ARGUMENT, "%s: nranks is %d but %d processes joined", "ncclCommInitRank", nranks, size);
  if (r == OK && MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, c->comm) != MPI_SUCCESS)
    r = failed(SYSTEM_ERROR, "%s: MPI_Allgather failed", "ncclCommInitRank");
  for (int i = 0; r == OK && i < nranks; i++) {
    if (memcmp(&all[i].id, &all[0].id, sizeof all[0].id) != 0)
      r = failed(INVALID_ARGUMENT, "%s: rank %d holds another unique id than rank %d", "ncclCommInitRank", i, 0);
    for (int j = 0; r == OK && j < i; j++)
      if (all[j].device == all[i].device && strcmp(all[j].host, all[i].host) == 0)
        r = failed(INVALID_USAGE, "%s: duplicate GPU detected: ranks %d and %d use the same device",
                   "ncclCommInitRank", j, i);
  }
  free(all);
  if (r != OK) {
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c);
    return r;
  }
  c->rank = rank;
  c->size = nranks;
  c->device = me.device;
  *out = c;
  return OK;
}

static lt_nccl_result sim_comm_destroy(lt_nccl_comm *c) {
  if (c == NULL) return INVALID_ARGUMENT;
  MPI_Comm_free(&c->comm);
  free(c);
  return OK;
}

/* ncclCommGetAsyncError. Nothing fails on its own here (a collective is done when its call
 * returns); a test breaks a communicator through the environment: LT_SIM_NCCL_ASYNC_ERROR=R
 * makes rank R's report ncclRemoteError, as NCCL does when a peer dies or the network fails
 * under a queued collective. */
static lt_nccl_result sim_comm_get_async_error(lt_nccl_comm *c, lt_nccl_result *async) {
  if (c == NULL) return INVALID_ARGUMENT;
  const char *broken = getenv("LT_SIM_NCCL_ASYNC_ERROR");
  *async = broken != NULL && atoi(broken) == c->rank
               ? failed(REMOTE_ERROR, "rank %d's communicator broken by LT_SIM_NCCL_ASYNC_ERROR", c->rank)
               : OK;
  return OK;
}

/* ---- moving device buffers ---- */

static void begin(lt_cuda_stream stream) {
  if (emu_library_begin) emu_library_begin((void *)stream);
}
static void end(void) {
  if (emu_library_end) emu_library_end();
}

/* ncclAvg: the sum divided by the number of ranks, rounded once to dt. */
static void avg(void *buf, size_t count, lt_dtype dt, int size) {
  for (size_t i = 0; i < count; i++) {
    switch (dt) {
    case LT_FLOAT32: ((float *)buf)[i] /= (float)size; break;
    case LT_FLOAT64: ((double *)buf)[i] /= size; break;
    case LT_FLOAT16: {
      uint16_t *h = buf;
      h[i] = lt_float_to_half(lt_half_to_float(h[i]) / (float)size);
      break;
    }
    case LT_BFLOAT16: {
      uint16_t *h = buf;
      h[i] = lt_float_to_bfloat16(lt_bfloat16_to_float(h[i]) / (float)size);
      break;
    }
    default: break; /* integers: the front refuses avg */
    }
  }
}

/* MPI counts are ints; NCCL's are size_t. */
static lt_nccl_result check(const lt_nccl_comm *c, size_t count, const char *call) {
  if (c == NULL) return failed(INVALID_ARGUMENT, "%s: no communicator", call);
  if (count > (size_t)INT32_MAX / 8 / (size_t)c->size)
    return failed(INVALID_ARGUMENT, "%s: the stand-in moves at most %d elements per rank (got more)", call,
                  INT32_MAX / 8 / c->size);
  return OK;
}

static lt_nccl_result done(int rc, const char *call) {
  if (rc == MPI_SUCCESS) return OK;
  return failed(SYSTEM_ERROR, "%s: MPI error %d", call, rc);
}

static lt_nccl_result sim_all_reduce(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                                     lt_nccl_comm *c, lt_cuda_stream stream) {
  lt_nccl_result r = check(c, count, "ncclAllReduce");
  if (r != OK) return r;
  begin(stream);
  int rc = MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, (int)count, dist_mpi_type(dt), dist_mpi_op(dt, op),
                         c->comm);
  if (rc == MPI_SUCCESS && op == LT_REDUCE_AVG) avg(out, count, dt, c->size);
  end();
  return done(rc, "ncclAllReduce");
}

static lt_nccl_result sim_broadcast(const void *in, void *out, size_t count, lt_dtype dt, int root,
                                    lt_nccl_comm *c, lt_cuda_stream stream) {
  lt_nccl_result r = check(c, count, "ncclBroadcast");
  if (r != OK) return r;
  if (root < 0 || root >= c->size) return failed(INVALID_ARGUMENT, "%s: root %d of %d", "ncclBroadcast", root, c->size);
  begin(stream);
  size_t bytes = count * lt_dtype_size(dt);
  if (c->rank == root && in != out) memmove(out, in, bytes);
  int rc = MPI_Bcast(out, (int)bytes, MPI_BYTE, root, c->comm);
  end();
  return done(rc, "ncclBroadcast");
}

static lt_nccl_result sim_all_gather(const void *in, void *out, size_t count, lt_dtype dt, lt_nccl_comm *c,
                                     lt_cuda_stream stream) {
  lt_nccl_result r = check(c, count, "ncclAllGather");
  if (r != OK) return r;
  begin(stream);
  int bytes = (int)(count * lt_dtype_size(dt));
  int rc = MPI_Allgather(in, bytes, MPI_BYTE, out, bytes, MPI_BYTE, c->comm);
  end();
  return done(rc, "ncclAllGather");
}

static lt_nccl_result sim_reduce_scatter(const void *in, void *out, size_t count, lt_dtype dt, lt_reduce_op op,
                                         lt_nccl_comm *c, lt_cuda_stream stream) {
  lt_nccl_result r = check(c, count, "ncclReduceScatter");
  if (r != OK) return r;
  begin(stream);
  int rc =
      MPI_Reduce_scatter_block(in, out, (int)count, dist_mpi_type(dt), dist_mpi_op(dt, op), c->comm);
  if (rc == MPI_SUCCESS && op == LT_REDUCE_AVG) avg(out, count, dt, c->size);
  end();
  return done(rc, "ncclReduceScatter");
}

/* ---- grouped sends and receives: posted at ncclGroupEnd, all at once ---- */

typedef struct p2p {
  bool send;
  void *buf;
  int bytes, peer;
  lt_nccl_comm *comm;
  lt_cuda_stream stream;
} p2p;

enum { MAX_P2P = 1024 };
static p2p pending[MAX_P2P];
static int npending, group_depth;

static lt_nccl_result sim_group_start(void) {
  group_depth++;
  return OK;
}

static lt_nccl_result run_pending(void) {
  lt_nccl_result r = OK;
  MPI_Request requests[MAX_P2P];
  if (npending > 0) begin(pending[0].stream);
  for (int i = 0; i < npending; i++) {
    p2p *p = &pending[i];
    int rc = p->send ? MPI_Isend(p->buf, p->bytes, MPI_BYTE, p->peer, 0, p->comm->comm, &requests[i])
                     : MPI_Irecv(p->buf, p->bytes, MPI_BYTE, p->peer, 0, p->comm->comm, &requests[i]);
    if (rc != MPI_SUCCESS) {
      r = done(rc, p->send ? "ncclSend" : "ncclRecv");
      requests[i] = MPI_REQUEST_NULL;
    }
  }
  int rc = npending > 0 ? MPI_Waitall(npending, requests, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
  if (npending > 0) end();
  npending = 0;
  return r != OK ? r : done(rc, "ncclGroupEnd");
}

static lt_nccl_result sim_group_end(void) {
  if (group_depth == 0) return failed(INVALID_USAGE, "%s: no ncclGroupStart", "ncclGroupEnd");
  return --group_depth == 0 ? run_pending() : OK;
}

static lt_nccl_result queue(bool send, const void *buf, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c,
                            lt_cuda_stream stream) {
  const char *call = send ? "ncclSend" : "ncclRecv";
  lt_nccl_result r = check(c, count, call);
  if (r != OK) return r;
  if (peer < 0 || peer >= c->size) return failed(INVALID_ARGUMENT, "%s: peer %d of %d", call, peer, c->size);
  if (npending == MAX_P2P) return failed(INVALID_USAGE, "%s: more than %d calls in one group", call, MAX_P2P);
  if (npending > 0 && pending[0].stream != stream)
    return failed(INVALID_USAGE, "%s: the stand-in runs a group on one stream", call);
  pending[npending++] = (p2p){send, (void *)buf, (int)(count * lt_dtype_size(dt)), peer, c, stream};
  /* Outside a group a call is a group of its own, as NCCL's. */
  return group_depth == 0 ? run_pending() : OK;
}

static lt_nccl_result sim_send(const void *in, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c,
                               lt_cuda_stream stream) {
  return queue(true, in, count, dt, peer, c, stream);
}

static lt_nccl_result sim_recv(void *out, size_t count, lt_dtype dt, int peer, lt_nccl_comm *c,
                               lt_cuda_stream stream) {
  return queue(false, out, count, dt, peer, c, stream);
}

static const char *sim_error_string(lt_nccl_result r) {
  static const char *const words[] = {"no error", "unhandled cuda error", "unhandled system error",
                                      "internal error", "invalid argument", "invalid usage",
                                      "remote process exited or there was a network error"};
  static char text[400];
  snprintf(text, sizeof text, "%s (simulated NCCL: %s)", r >= 0 && r <= 6 ? words[r] : "unknown result",
           detail[0] ? detail : "no detail");
  return text;
}

static const lt_nccl_hooks sim_nccl_hooks = {
    .name = "simulated",
    .unavailable = sim_unavailable,
    .get_unique_id = sim_get_unique_id,
    .comm_init_rank = sim_comm_init_rank,
    .comm_destroy = sim_comm_destroy,
    .comm_abort = sim_comm_destroy, /* nothing is ever left in flight here */
    .comm_get_async_error = sim_comm_get_async_error,
    .all_reduce = sim_all_reduce,
    .broadcast = sim_broadcast,
    .all_gather = sim_all_gather,
    .reduce_scatter = sim_reduce_scatter,
    .send = sim_send,
    .recv = sim_recv,
    .group_start = sim_group_start,
    .group_end = sim_group_end,
    .get_error_string = sim_error_string,
};

/* Exported: the emulator's libnccl-emu.so (tests/cudaemu/emu_nccl.cc) calls
 * the stand-in through it. */
__attribute__((visibility("default"))) const lt_nccl_hooks *lt_sim_nccl_hooks(void) { return &sim_nccl_hooks; }

/* lt_simdev calls the stand-in directly. lt_cudaemu goes through lt's own
 * NCCL code (cuda/cuda_nccl.cu), which opens libnccl-emu.so for libnccl
 * (LT_NCCL_SONAME), when it was built with NCCL's header. */
__attribute__((constructor)) static void install_sim_nccl(void) {
  const lt_nccl_hooks *hooks = &sim_nccl_hooks;
#ifdef LT_SIM_NCCL_THROUGH_LIBRARY
  if (lt_nccl_runtime_hooks() != NULL) hooks = lt_nccl_runtime_hooks();
#endif
  lt_nccl_set_hooks(hooks);
}
