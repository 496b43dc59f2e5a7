/* The collectives' front, the same for every backend: check the arguments on
 * this rank, agree with the other ranks on the call (every rank's
 * description of it, exchanged with the group's deadline: a rank that is not
 * there, or that called something else, is an error naming both ranks'
 * values on every rank, before any tensor moves), stage non-contiguous
 * tensors and lists in contiguous buffers, then hand the buffers to the
 * backend and end the call (dist_work.c). A synchronous call waits for the
 * exchange, then makes the backend's blocking call (the fastest); an async
 * call starts the exchange and returns, and its payload starts from the
 * group's queue once the exchange is seen done (dist_queue.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_work.h"
#include "lt/autograd.h"
#include "lt/ops.h"

typedef enum call_kind {
  CALL_ALL_REDUCE = 1,
  CALL_BROADCAST,
  CALL_ALL_GATHER,
  CALL_REDUCE_SCATTER,
  CALL_ALL_TO_ALL,
  CALL_FAILED /* this rank's checks or staging failed */
} call_kind;

static const char *const kind_names[] = {"?", "all_reduce", "broadcast", "all_gather", "reduce_scatter",
                                         "all_to_all", "failed"};

/* What every rank says about its call; equal on every rank or an error. */
typedef struct dist_call {
  int32_t kind, dtype, op, root, ndim, unused;
  int64_t shape[LT_MAX_DIMS];
} dist_call;

size_t dist_call_bytes(void) { return sizeof(dist_call); }

static void describe(char *buf, size_t len, const dist_call *c) {
  char shape[128];
  lt_format_shape(shape, sizeof shape, c->shape, c->ndim);
  snprintf(buf, len, "%s %s", lt_dtype_name((lt_dtype)c->dtype), shape);
}

/* The first rank whose description differs from rank 0's, named with rank
 * 0's: every rank computes the same message from the same descriptions. */
lt_status dist_call_disagreement(const char *op, const void *descriptions, int size) {
  const dist_call *all = descriptions;
  for (int r = 0; r < size; r++)
    if (all[r].kind == CALL_FAILED)
      return lt_error(LT_ERR_ARG, "%s: rank %d failed before the collective started (its own error says "
                      "why)", op, r);
  for (int r = 1; r < size; r++) {
    const dist_call *a = &all[0], *b = &all[r];
    if (memcmp(a, b, sizeof *a) == 0) continue;
    if (a->kind != b->kind)
      return lt_error(LT_ERR_ARG, "%s: the ranks called different collectives: rank 0 called %s, rank %d "
                      "called %s", op, kind_names[a->kind], r, kind_names[b->kind]);
    if (a->dtype != b->dtype || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) != 0) {
      char da[160], db[160];
      describe(da, sizeof da, a);
      describe(db, sizeof db, b);
      return lt_error(a->dtype != b->dtype ? LT_ERR_DTYPE : LT_ERR_SHAPE,
                      "%s: tensors differ between ranks: rank 0 has %s, rank %d has %s", op, da, r, db);
    }
    if (a->op != b->op)
      return lt_error(LT_ERR_ARG, "%s: the ranks asked for different ops: rank 0 '%s', rank %d '%s'", op,
                      lt_reduce_op_name((lt_reduce_op)a->op), r, lt_reduce_op_name((lt_reduce_op)b->op));
    return lt_error(LT_ERR_ARG, "%s: the ranks named different sources: rank 0 src=%d, rank %d src=%d", op,
                    a->root, r, b->root);
  }
  return LT_OK;
}

static void describe_call(dist_call *mine, lt_status local, const lt_dist_work *w, const lt_tensor *t) {
  memset(mine, 0, sizeof *mine);
  mine->kind = local == LT_OK ? w->kind : CALL_FAILED;
  mine->dtype = t->dtype;
  mine->op = w->reduce_op;
  mine->root = w->root;
  mine->ndim = t->ndim;
  memcpy(mine->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

/* Every rank's description of its call, exchanged once this rank's checks
 * and buffers are done: a rank whose own part failed (local) still takes part,
 * as "failed", so that every rank returns an error and none waits inside the
 * collective for it. After agreement nothing can fail before the backend's
 * call. On failure w's buffers are freed. */
static lt_status agree(dist_group *g, lt_dist_work *w, lt_status local, const lt_tensor *t) {
  const char *name = w->op;
  describe_call(g->call_in, local, w, t);
  lt_status st = dist_mpi_exchange(g->comm, g->call_in, g->call_all, sizeof(dist_call), name, g->timeout_s);
  if (st != LT_OK) {
    dist_group_break(g, name); /* the exchange may still be in flight */
  } else if (local != LT_OK) {
    st = local; /* this rank's own error (the exchange set none) */
  } else {
    st = dist_call_disagreement(name, g->call_all, g->size);
  }
  if (st != LT_OK) dist_work_clear(w);
  return st;
}

/* async_op: the description goes out without waiting, in buffers of the
 * work's own (the group's serve one exchange at a time), and the work joins
 * the group's queue. A rank whose own part failed still takes part: its call
 * raises its own error at once, and the work, handed to nobody, stays queued
 * until its exchange ends (the other ranks' waits name this rank). */
static lt_status agree_async(dist_group *g, lt_dist_work *w, lt_status local, const lt_tensor *t,
                             lt_dist_work **work) {
  char mine_error[512];
  if (local != LT_OK) snprintf(mine_error, sizeof mine_error, "%s", lt_last_error());
  size_t bytes = sizeof(dist_call);
  w->calls = calloc((size_t)g->size + 1, bytes);
  if (w->calls == NULL) {
    dist_work_clear(w);
    return lt_error(LT_ERR_OOM, "%s: out of memory", w->op);
  }
  describe_call(w->calls, local, w, t);
  void *all = (char *)w->calls + bytes;
  lt_status st = dist_mpi_exchange_start(g->comm, w->calls, all, bytes, w->op, &w->exchange);
  if (st != LT_OK) {
    dist_group_break(g, w->op); /* the other ranks' exchanges wait for this one */
    free(w->calls);
    dist_work_clear(w);
    return st;
  }
  if (local != LT_OK) dist_work_clear(w); /* no rank will run the payload */
  lt_dist_work *h = NULL;
  st = dist_work_hand_out(g, w, &h);
  if (st != LT_OK) {
    /* This rank cannot queue the payload the others will start: the group
     * breaks, and the buffers are leaked (the exchange writes them). */
    dist_group_break(g, w->op);
    return st;
  }
  dist_queue_push(g, h);
  h->orphan = local != LT_OK;
  /* What is ready starts now (a world of one: this call's payload); a
   * failure here broke the group, and the wait says so. */
  (void)dist_queue_progress(g);
  if (local != LT_OK) return lt_error(local, "%s", mine_error);
  *work = h;
  return LT_OK;
}

/* The payload of an agreed call: the backend's collective on w's buffers. */
lt_status dist_call_start(dist_group *g, lt_dist_work *w, dist_request **req) {
  const dist_backend *b = g->backend;
  void *buf = lt_data(w->buffer);
  const void *in = w->keep != NULL ? lt_data(w->keep) : NULL;
  lt_reduce_op op = (lt_reduce_op)w->reduce_op;
  switch ((call_kind)w->kind) {
  case CALL_ALL_REDUCE: return b->all_reduce(g, buf, w->count, w->dtype, op, req);
  case CALL_BROADCAST: return b->broadcast(g, buf, w->count, w->dtype, w->root, req);
  case CALL_ALL_GATHER: return b->all_gather(g, in, buf, w->count, w->dtype, req);
  case CALL_REDUCE_SCATTER: return b->reduce_scatter(g, in, buf, w->count, w->dtype, op, req);
  case CALL_ALL_TO_ALL: return b->all_to_all(g, in, buf, w->count, w->dtype, req);
  case CALL_FAILED: break;
  }
  return lt_error(LT_ERR_INTERNAL, "%s: no collective for call kind %d", w->op, w->kind);
}

/* ---- this rank's checks ---- */

static lt_status check_tensor(dist_group *g, const char *op, const lt_tensor *t, const char *what) {
  if (t->storage->meta)
    return lt_error(LT_ERR_ARG, "%s: %s was made inside lt.memory.estimate and has no data", op, what);
  lt_device d = t->storage->device;
  if (d.type != g->device.type || d.index != g->device.index) {
    char want[24], got[24];
    snprintf(want, sizeof want, g->device.type == LT_DEVICE_CPU ? "cpu" : "cuda:%d", g->device.index);
    snprintf(got, sizeof got, d.type == LT_DEVICE_CPU ? "cpu" : "cuda:%d", d.index);
    return lt_error(LT_ERR_DEVICE, "%s: the %s backend moves tensors on %s (this rank's device); %s is on %s",
                    op, g->backend->name, want, what, got);
  }
  return LT_OK;
}

/* A tensor the call writes: a result written into an expand view would land
 * twice in one element. */
static lt_status check_written(const char *op, const lt_tensor *t, const char *what) {
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] == 0 && t->shape[i] > 1)
      return lt_error(LT_ERR_ARG, "%s: %s has elements that share memory (an expand view: stride 0 in "
                      "dimension %lld); clone it first", op, what, LT_USER_INDEX(i));
  return LT_OK;
}

static lt_status check_op(const char *op, lt_reduce_op rop, lt_dtype dt) {
  if ((unsigned)rop >= LT_NREDUCE_OPS) return lt_error(LT_ERR_ARG, "%s: unknown reduce op %d", op, (int)rop);
  if (rop == LT_REDUCE_AVG && !lt_dtype_is_floating(dt))
    return lt_error(LT_ERR_DTYPE, "%s: op 'avg' needs a floating-point tensor, got %s", op,
                    lt_dtype_name(dt));
  return LT_OK;
}

static bool same_shape(const lt_tensor *a, const lt_tensor *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* A list of the world size's tensors, each of like's shape, dtype and device. */
static lt_status check_list(dist_group *g, const char *op, const char *list, const lt_tensor *const *ts,
                            int n, const lt_tensor *like, const char *like_name, bool written) {
  if (n != g->size)
    return lt_error(LT_ERR_ARG, "%s: %s must hold one tensor per rank (the world size, %d), got %d", op, list,
                    g->size, n);
  for (int i = 0; i < n; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s[%d]", list, i + 1);
    LT_TRY(check_tensor(g, op, ts[i], what));
    if (written) LT_TRY(check_written(op, ts[i], what));
    if (ts[i]->dtype != like->dtype || !same_shape(ts[i], like)) {
      char a[128], b[128];
      lt_format_shape(a, sizeof a, ts[i]->shape, ts[i]->ndim);
      lt_format_shape(b, sizeof b, like->shape, like->ndim);
      return lt_error(ts[i]->dtype != like->dtype ? LT_ERR_DTYPE : LT_ERR_SHAPE,
                      "%s: %s is %s %s but %s is %s %s (every tensor of the call has one shape and dtype)",
                      op, what, lt_dtype_name(ts[i]->dtype), a, like_name, lt_dtype_name(like->dtype), b);
    }
  }
  return LT_OK;
}

/* ---- staging ---- */

/* Staging copies are no part of any graph: collectives are not differentiable. */
static lt_status contiguous_copy(const lt_tensor *t, lt_tensor **out) {
  bool prev = lt_set_grad_enabled(false);
  lt_status st = lt_contiguous(t, out);
  lt_set_grad_enabled(prev);
  return st;
}

/* t as the buffer a backend writes: t itself when contiguous, else a
 * contiguous copy that the end of the call copies back into t. */
static lt_status stage_inout(lt_tensor *t, lt_dist_work *w) {
  if (lt_is_contiguous(t)) {
    lt_tensor_retain(t);
    w->buffer = t;
    return LT_OK;
  }
  LT_TRY(contiguous_copy(t, &w->buffer));
  lt_tensor_retain(t);
  w->target = t;
  return LT_OK;
}

/* A [world, numel] buffer of like's dtype and device. */
static lt_status new_rows(const char *op, int world, const lt_tensor *like, lt_tensor **out) {
  int64_t shape[2] = {world, lt_numel(like)};
  return lt_empty_named(op, shape, 2, like->dtype, like->storage->device, out);
}

/* ins copied into the rows of a new buffer. */
static lt_status stage_rows_in(const char *op, const lt_tensor *const *ins, int n, lt_tensor **out) {
  LT_TRY(new_rows(op, n, ins[0], out));
  bool prev = lt_set_grad_enabled(false);
  lt_status st = LT_OK;
  for (int r = 0; r < n && st == LT_OK; r++) {
    lt_tensor *row = NULL, *flat = NULL;
    st = lt_select(*out, 0, r, &row);
    if (st == LT_OK) st = lt_view(row, ins[r]->shape, ins[r]->ndim, &flat);
    if (st == LT_OK) st = lt_copy_(flat, ins[r]);
    if (row) lt_tensor_release(row);
    if (flat) lt_tensor_release(flat);
  }
  lt_set_grad_enabled(prev);
  return st;
}

/* The rows of the work's buffer go to outs when the call ends. */
static lt_status keep_outs(lt_dist_work *w, lt_tensor *const *outs, int n) {
  w->outs = calloc((size_t)n, sizeof *w->outs);
  if (w->outs == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", w->op);
  for (int i = 0; i < n; i++) {
    lt_tensor_retain(outs[i]);
    w->outs[i] = outs[i];
  }
  w->nouts = n;
  return LT_OK;
}

/* ---- the calls ---- */

/* The group, with the payloads of earlier async calls started: all of them
 * before a synchronous call's (waiting as needed: MPI's order), those
 * already agreed before an async call's. */
static lt_status begin(const char *op, lt_dist_work **work, dist_group **g) {
  LT_TRY(dist_group_get(op, g));
  return work != NULL ? dist_queue_progress(*g) : dist_queue_flush(*g, NULL);
}

/* t: the tensor the call is described by (its dtype and element count are
 * the payload's). */
static void work_init(lt_dist_work *w, dist_group *g, const char *op, call_kind kind, const lt_tensor *t,
                      int reduce_op, int root) {
  memset(w, 0, sizeof *w);
  w->group = g;
  w->op = op;
  w->start = dist_now();
  w->kind = kind;
  w->reduce_op = reduce_op;
  w->root = root;
  w->count = (size_t)lt_numel(t);
  w->dtype = t->dtype;
}

/* Ends the call once this rank's checks and staging are done (local):
 * synchronous, the blocking exchange, then the blocking payload, ended at
 * once; async_op, queued (agree_async). A failed start breaks the group:
 * the other ranks may be inside the collective. */
static lt_status run_call(dist_group *g, lt_dist_work *w, lt_status local, const lt_tensor *t,
                          lt_dist_work **work) {
  if (work != NULL) return agree_async(g, w, local, t, work);
  LT_TRY(agree(g, w, local, t));
  lt_status st = dist_call_start(g, w, NULL);
  if (st != LT_OK) dist_group_break(g, w->op);
  else st = dist_work_finish(w);
  dist_work_clear(w);
  return st;
}

lt_status lt_dist_all_reduce(lt_tensor *t, lt_reduce_op op, lt_dist_work **work) {
  const char *name = "all_reduce";
  dist_group *g = NULL;
  LT_TRY(begin(name, work, &g));
  lt_dist_work w;
  work_init(&w, g, name, CALL_ALL_REDUCE, t, op, -1);
  lt_status st = check_tensor(g, name, t, "the tensor");
  if (st == LT_OK) st = check_written(name, t, "the tensor");
  if (st == LT_OK) st = check_op(name, op, t->dtype);
  if (st == LT_OK) st = stage_inout(t, &w);
  w.divide = op == LT_REDUCE_AVG && !g->backend->native_avg;
  return run_call(g, &w, st, t, work);
}

lt_status lt_dist_broadcast(lt_tensor *t, int src, lt_dist_work **work) {
  const char *name = "broadcast";
  dist_group *g = NULL;
  LT_TRY(begin(name, work, &g));
  lt_dist_work w;
  work_init(&w, g, name, CALL_BROADCAST, t, 0, src);
  lt_status st = check_tensor(g, name, t, "the tensor");
  if (st == LT_OK) st = check_written(name, t, "the tensor");
  if (st == LT_OK && (src < 0 || src >= g->size))
    st = lt_error(LT_ERR_INDEX, "%s: src %d is not a rank of the group (0 to %d)", name, src, g->size - 1);
  if (st == LT_OK) st = stage_inout(t, &w);
  return run_call(g, &w, st, t, work);
}

lt_status lt_dist_all_gather(lt_tensor *const *outs, int n, const lt_tensor *in, lt_dist_work **work) {
  const char *name = "all_gather";
  dist_group *g = NULL;
  LT_TRY(begin(name, work, &g));
  lt_dist_work w;
  work_init(&w, g, name, CALL_ALL_GATHER, in, 0, -1);
  lt_status st = check_tensor(g, name, in, "the input");
  if (st == LT_OK)
    st = check_list(g, name, "the output list", (const lt_tensor *const *)outs, n, in, "the input", true);
  if (st == LT_OK) st = contiguous_copy(in, &w.keep);
  if (st == LT_OK) st = new_rows(name, n, in, &w.buffer);
  if (st == LT_OK) st = keep_outs(&w, outs, n);
  return run_call(g, &w, st, in, work);
}

lt_status lt_dist_reduce_scatter(lt_tensor *out, const lt_tensor *const *ins, int n, lt_reduce_op op,
                                 lt_dist_work **work) {
  const char *name = "reduce_scatter";
  dist_group *g = NULL;
  LT_TRY(begin(name, work, &g));
  lt_dist_work w;
  work_init(&w, g, name, CALL_REDUCE_SCATTER, out, op, -1);
  lt_status st = check_tensor(g, name, out, "the output");
  if (st == LT_OK) st = check_written(name, out, "the output");
  if (st == LT_OK) st = check_op(name, op, out->dtype);
  if (st == LT_OK) st = check_list(g, name, "the input list", ins, n, out, "the output", false);
  if (st == LT_OK) st = stage_rows_in(name, ins, n, &w.keep);
  if (st == LT_OK) st = stage_inout(out, &w);
  w.divide = op == LT_REDUCE_AVG && !g->backend->native_avg;
  return run_call(g, &w, st, out, work);
}

lt_status lt_dist_all_to_all(lt_tensor *const *outs, int nout, const lt_tensor *const *ins, int nin,
                             lt_dist_work **work) {
  const char *name = "all_to_all";
  dist_group *g = NULL;
  LT_TRY(begin(name, work, &g));
  lt_dist_work w;
  work_init(&w, g, name, CALL_ALL_TO_ALL, ins[0], 0, -1);
  const char *first = "the input list[1]";
  lt_status st = check_tensor(g, name, ins[0], first);
  if (st == LT_OK) st = check_list(g, name, "the input list", ins, nin, ins[0], first, false);
  if (st == LT_OK)
    st = check_list(g, name, "the output list", (const lt_tensor *const *)outs, nout, ins[0], first, true);
  if (st == LT_OK) st = stage_rows_in(name, ins, nin, &w.keep);
  if (st == LT_OK) st = new_rows(name, nout, ins[0], &w.buffer);
  if (st == LT_OK) st = keep_outs(&w, outs, nout);
  return run_call(g, &w, st, ins[0], work);
}
