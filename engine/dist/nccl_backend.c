/* The "nccl" backend: CUDA tensors through NCCL, each rank on
 * cuda:<its local rank>, bootstrapped as NCCL's documentation shows (rank 0's
 * ncclGetUniqueId broadcast over MPI, then ncclCommInitRank on every rank).
 * Collectives are queued on the device's current stream, as every lt op is:
 * a synchronous call does not wait for the device, and the work handle of
 * async_op is an event recorded after the collective. The front's exchange
 * of each call's description still runs over MPI on the host (in a build
 * without MPI, a world of one: mpi_none.c).
 *
 * NCCL and CUDA are reached through hooks only (dist/nccl_hooks.h, lt/cuda.h),
 * so this file is built everywhere: over the real libraries in CUDA builds,
 * over the simulated device's and the emulator's stand-ins in tests. */
#include <stdlib.h>

#include "dist/dist_internal.h"
#include "dist/nccl_hooks.h"
#include "lt/cuda.h"

typedef struct nccl_state {
  const lt_nccl_hooks *nccl;
  lt_nccl_comm *comm;
  int device;
} nccl_state;

/* A work handle's collective: the event recorded after it, and what to ask NCCL about its
 * communicator while it runs (a group's requests end before the group closes: a broken
 * group is never tested again, a sound one settles its works first). */
struct dist_request {
  lt_cuda_event *event;
  const nccl_state *state;
  const char *op;
};

static lt_status nccl_fail(const lt_nccl_hooks *nccl, const char *op, const char *call, lt_nccl_result r) {
  return lt_error(LT_ERR_IO, "%s: %s failed: %s", op, call, nccl->get_error_string(r));
}

static nccl_state *state_of(dist_group *g) { return g->impl; }

static lt_cuda_stream stream_of(dist_group *g) { return lt_cuda_current_stream(state_of(g)->device); }

/* This rank's NCCL and device, checked on every rank before any rank enters
 * ncclCommInitRank (which waits for all of them without a deadline). */
static lt_status pick_device(dist_group *g, const lt_nccl_hooks *nccl, int *device) {
  const char *op = "init_process_group";
  const char *why = nccl->unavailable();
  if (why != NULL) return lt_error(LT_ERR_DEVICE, "%s: backend 'nccl' on rank %d: %s", op, g->rank, why);
  int count = lt_cuda_device_count();
  if (count < 1)
    return lt_error(LT_ERR_DEVICE, "%s: backend 'nccl' needs a CUDA device, and rank %d has none (use "
                    "backend 'mpi')", op, g->rank);
  int local = 0;
  LT_TRY(dist_mpi_local_rank(g->comm, &local));
  if (local >= count)
    return lt_error(LT_ERR_DEVICE, "%s: rank %d is rank %d of its machine, which has %d CUDA devices: nccl "
                    "needs a device per rank (start fewer ranks per machine)", op, g->rank, local, count);
  *device = local;
  return lt_cuda_set_device(local);
}

static lt_status nccl_open(dist_group *g) {
  const char *op = "init_process_group";
  const lt_nccl_hooks *nccl = lt_nccl_hooks_get();
  int device = 0;
  lt_nccl_id id = {{0}};
  lt_status mine = pick_device(g, nccl, &device);
  if (mine == LT_OK && g->rank == 0) {
    lt_nccl_result r = nccl->get_unique_id(&id);
    if (r != LT_NCCL_SUCCESS) mine = nccl_fail(nccl, op, "ncclGetUniqueId", r);
  }
  /* Every rank learns whether every rank can go on (in the group's exchange
   * buffers, which outlive a wait that fails). */
  int *ok = g->call_in, *all = g->call_all;
  *ok = mine == LT_OK;
  lt_status st = dist_mpi_exchange(g->comm, ok, all, sizeof *ok, op, g->timeout_s);
  int failed = -1;
  for (int r = 0; st == LT_OK && r < g->size; r++)
    if (!all[r] && failed < 0) failed = r;
  if (mine != LT_OK) return mine;
  LT_TRY(st);
  if (failed >= 0)
    return lt_error(LT_ERR_DEVICE, "%s: rank %d could not start nccl (its error says why)", op, failed);
  LT_TRY(dist_mpi_broadcast_bytes(g->comm, &id, sizeof id, 0, op, g->timeout_s));
  nccl_state *s = calloc(1, sizeof *s);
  if (s == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  /* NCCL binds the communicator to the current device: pick_device set it. */
  lt_nccl_result r = nccl->comm_init_rank(&s->comm, g->size, &id, g->rank);
  if (r != LT_NCCL_SUCCESS) {
    free(s);
    return nccl_fail(nccl, op, "ncclCommInitRank", r);
  }
  s->nccl = nccl;
  s->device = device;
  g->impl = s;
  g->device.type = LT_DEVICE_CUDA;
  g->device.index = (signed char)device;
  return LT_OK;
}

static void nccl_close(dist_group *g, bool broken) {
  nccl_state *s = state_of(g);
  if (s == NULL) return;
  /* A broken group may have a collective that never ends: abort it. Else
   * the device finishes what was queued first (synchronous collectives hand
   * out nothing to wait for, on any of the device's streams). */
  if (broken) {
    s->nccl->comm_abort(s->comm);
  } else {
    int current = lt_cuda_current_device();
    if (lt_cuda_set_device(s->device) == LT_OK) (void)lt_cuda_synchronize();
    (void)lt_cuda_set_device(current);
    s->nccl->comm_destroy(s->comm);
  }
  free(s);
  g->impl = NULL;
}

/* A collective that met an error (a rank gone, the network) would never finish, and its
 * event never fire: NCCL reports it on the communicator, asked at every test of a work
 * handle and before every collective, so a wait ends with NCCL's words instead of the
 * group's timeout, and a synchronous caller learns it at its next call (either breaks the
 * group, and closing it aborts the communicator). */
static lt_status communicator_sound(const nccl_state *s, const char *op) {
  lt_nccl_result async = LT_NCCL_SUCCESS;
  lt_nccl_result r = s->nccl->comm_get_async_error(s->comm, &async);
  if (r != LT_NCCL_SUCCESS) return nccl_fail(s->nccl, op, "ncclCommGetAsyncError", r);
  if (async != LT_NCCL_SUCCESS && async != LT_NCCL_IN_PROGRESS)
    return lt_error(LT_ERR_IO, "%s: NCCL reported an asynchronous error on the communicator: %s", op,
                    s->nccl->get_error_string(async));
  return LT_OK;
}

/* After a collective was queued: nothing more, or an event for the work handle. */
static lt_status queued(dist_group *g, const char *op, const char *call, lt_nccl_result r, dist_request **req) {
  nccl_state *s = state_of(g);
  if (r != LT_NCCL_SUCCESS) return nccl_fail(s->nccl, op, call, r);
  if (req == NULL) return LT_OK;
  dist_request *q = malloc(sizeof *q);
  if (q == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  q->state = s;
  q->op = op;
  lt_status st = lt_cuda_event_new(s->device, false, &q->event);
  if (st == LT_OK) st = lt_cuda_event_record(q->event, stream_of(g));
  if (st != LT_OK) {
    lt_cuda_event_free(q->event);
    free(q);
    return st;
  }
  *req = q;
  return LT_OK;
}

static lt_status nccl_all_reduce(dist_group *g, void *buf, size_t count, lt_dtype dt, lt_reduce_op op,
                                 dist_request **req) {
  nccl_state *s = state_of(g);
  LT_TRY(communicator_sound(s, "all_reduce"));
  lt_nccl_result r = s->nccl->all_reduce(buf, buf, count, dt, op, s->comm, stream_of(g));
  return queued(g, "all_reduce", "ncclAllReduce", r, req);
}

static lt_status nccl_broadcast(dist_group *g, void *buf, size_t count, lt_dtype dt, int src,
                                dist_request **req) {
  nccl_state *s = state_of(g);
  LT_TRY(communicator_sound(s, "broadcast"));
  lt_nccl_result r = s->nccl->broadcast(buf, buf, count, dt, src, s->comm, stream_of(g));
  return queued(g, "broadcast", "ncclBroadcast", r, req);
}

static lt_status nccl_all_gather(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                 dist_request **req) {
  nccl_state *s = state_of(g);
  LT_TRY(communicator_sound(s, "all_gather"));
  lt_nccl_result r = s->nccl->all_gather(in, out, count, dt, s->comm, stream_of(g));
  return queued(g, "all_gather", "ncclAllGather", r, req);
}

static lt_status nccl_reduce_scatter(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                     lt_reduce_op op, dist_request **req) {
  nccl_state *s = state_of(g);
  LT_TRY(communicator_sound(s, "reduce_scatter"));
  lt_nccl_result r = s->nccl->reduce_scatter(in, out, count, dt, op, s->comm, stream_of(g));
  return queued(g, "reduce_scatter", "ncclReduceScatter", r, req);
}

/* Older NCCL has no all-to-all: a send and a receive per rank in one group call. */
static lt_status nccl_all_to_all(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                                 dist_request **req) {
  nccl_state *s = state_of(g);
  LT_TRY(communicator_sound(s, "all_to_all"));
  size_t block = count * lt_dtype_size(dt);
  lt_cuda_stream stream = stream_of(g);
  lt_nccl_result r = s->nccl->group_start();
  if (r != LT_NCCL_SUCCESS) return queued(g, "all_to_all", "ncclGroupStart", r, req);
  for (int peer = 0; r == LT_NCCL_SUCCESS && peer < g->size; peer++) {
    size_t at = (size_t)peer * block;
    r = s->nccl->send((const char *)in + at, count, dt, peer, s->comm, stream);
    if (r == LT_NCCL_SUCCESS) r = s->nccl->recv((char *)out + at, count, dt, peer, s->comm, stream);
  }
  /* The group is closed even after a failed call, so the next one starts clean. */
  lt_nccl_result end = s->nccl->group_end();
  if (r == LT_NCCL_SUCCESS) r = end;
  return queued(g, "all_to_all", "ncclSend/ncclRecv", r, req);
}

static lt_status nccl_test(dist_request *q, bool *done) {
  LT_TRY(communicator_sound(q->state, q->op));
  return lt_cuda_event_query(q->event, done);
}

static void nccl_release(dist_request *q) {
  lt_cuda_event_free(q->event);
  free(q);
}

const dist_backend dist_nccl_backend = {
    .name = "nccl",
    .device_type = LT_DEVICE_CUDA,
    .stream_ordered = true,
    .native_avg = true,
    .open = nccl_open,
    .close = nccl_close,
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .all_gather = nccl_all_gather,
    .reduce_scatter = nccl_reduce_scatter,
    .all_to_all = nccl_all_to_all,
    .test = nccl_test,
    .release = nccl_release,
};
