/* Work handles (async_op): waiting with the group's deadline (first for the
 * payloads queued up to this one to start, dist_queue.c), ending the work
 * (averages divided, staged results copied out) once, and their life around
 * the group's: a handle dropped early stays with the group until its
 * collective ends, and destroy starts what is queued and waits for what is
 * in flight. */
#include <stdlib.h>

#include "dist/dist_work.h"
#include "lt/autograd.h"
#include "lt/ops.h"

/* A write by a collective counts as an in-place op (autograd compares
 * versions and names the writer). */
static void note_write(lt_tensor *t, const char *op) {
  t->storage->version++;
  t->storage->last_inplace_op = op;
}

/* Row r of a [world, n] buffer, shaped as like. */
static lt_status row_as(const lt_tensor *buffer, int r, const lt_tensor *like, lt_tensor **out) {
  lt_tensor *row = NULL;
  LT_TRY(lt_select(buffer, 0, r, &row));
  lt_status st = lt_view(row, like->shape, like->ndim, out);
  lt_tensor_release(row);
  return st;
}

static lt_status finish_copies(lt_dist_work *w, int world) {
  if (w->divide) LT_TRY(lt_binary_scalar_(LT_OP_DIV, w->buffer, (double)world, true));
  if (w->target != NULL) return lt_copy_(w->target, w->buffer);
  if (w->outs == NULL) {
    if (!w->divide) note_write(w->buffer, w->op);
    return LT_OK;
  }
  for (int r = 0; r < w->nouts; r++) {
    lt_tensor *row = NULL;
    LT_TRY(row_as(w->buffer, r, w->outs[r], &row));
    lt_status st = lt_copy_(w->outs[r], row);
    lt_tensor_release(row);
    LT_TRY(st);
  }
  return LT_OK;
}

lt_status dist_work_copy_out(lt_dist_work *w) {
  if (w->copied) return LT_OK;
  w->copied = true;
  /* The copies are not part of any graph: collectives are not differentiable. */
  bool prev = lt_set_grad_enabled(false);
  lt_status st = finish_copies(w, w->group->size);
  lt_set_grad_enabled(prev);
  return st;
}

lt_status dist_work_finish(lt_dist_work *w) {
  if (w->finished) return LT_OK;
  w->finished = true;
  if (w->request != NULL) {
    w->group->backend->release(w->request);
    w->request = NULL;
  }
  return dist_work_copy_out(w);
}

void dist_work_clear(lt_dist_work *w) {
  if (w->buffer) lt_tensor_release(w->buffer);
  if (w->target) lt_tensor_release(w->target);
  if (w->keep) lt_tensor_release(w->keep);
  for (int i = 0; i < w->nouts; i++) lt_tensor_release(w->outs[i]);
  free(w->outs);
  w->buffer = w->target = w->keep = NULL;
  w->outs = NULL;
  w->nouts = 0;
}

lt_status dist_work_hand_out(dist_group *g, const lt_dist_work *w, lt_dist_work **out) {
  lt_dist_work *h = malloc(sizeof *h);
  if (h == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", w->op);
  *h = *w;
  h->group = g;
  h->next = g->works;
  g->works = h;
  *out = h;
  return LT_OK;
}

static void unlink_work(lt_dist_work *w) {
  if (w->group == NULL) return;
  for (lt_dist_work **p = &w->group->works; *p != NULL; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  w->group = NULL;
}

static lt_status test_work(void *ctx, bool *done) {
  lt_dist_work *w = ctx;
  return w->group->backend->test(w->request, done);
}

/* A failure found after the call returned (a disagreement, a copy): raised
 * by every wait and is_completed of w. */
static lt_status late_failure(const lt_dist_work *w) {
  if (w->failure == LT_OK) return LT_OK;
  return lt_error(w->failure, "%s", w->failure_message);
}

static lt_status broken_error(const char *op, const dist_group *g) {
  return lt_error(LT_ERR_IO, "%s: the process group is broken: %s", op, g->broken_reason);
}

lt_status lt_dist_wait(lt_dist_work *w) {
  if (w->finished) return late_failure(w);
  dist_group *g = w->group;
  if (g->broken) return broken_error("wait", g);
  /* The payloads of w and of the calls before it start (in call order). */
  if (w->queued) LT_TRY(dist_queue_flush(g, w));
  if (w->finished) return late_failure(w); /* skipped on every rank */
  lt_status st = dist_poll(w->op, g->timeout_s, w->start, test_work, w);
  if (st != LT_OK) {
    dist_group_break(g, w->op);
    return st;
  }
  LT_TRY(dist_work_finish(w));
  return late_failure(w);
}

/* Whether w is done, launching what is ready; polled in a loop, it ends as
 * a wait does: with another rank's failure or past the deadline. */
static lt_status test_completed(dist_group *g, lt_dist_work *w, bool *done) {
  LT_TRY(dist_queue_progress(g));
  if (!w->queued && !w->finished) {
    lt_status st = g->backend->test(w->request, done);
    if (st != LT_OK) {
      dist_group_break(g, w->op); /* as a wait that fails: the collective will not end */
      return st;
    }
    if (*done) LT_TRY(dist_work_finish(w));
  }
  *done = w->finished;
  if (*done) return late_failure(w);
  lt_status st = dist_poll_check(w->op, g->timeout_s, w->start);
  if (st != LT_OK) dist_group_break(g, w->op);
  return st;
}

lt_status lt_dist_is_completed(lt_dist_work *w, bool *done) {
  *done = w->finished;
  if (w->finished) return late_failure(w);
  /* It would never complete: an error, not false forever to a polling loop. */
  if (w->group->broken) return broken_error("is_completed", w->group);
  return test_completed(w->group, w, done);
}

static void free_work(lt_dist_work *w) {
  unlink_work(w);
  dist_work_clear(w);
  free(w->calls);
  free(w);
}

void dist_work_drop_orphan(lt_dist_work *w) {
  if (w->finished && w->orphan) free_work(w);
}

void lt_dist_work_free(lt_dist_work *w) {
  if (w == NULL) return;
  if (w->finished) free_work(w);
  else w->orphan = true; /* its buffers may still be written: the group keeps it */
}

lt_status dist_works_settle(dist_group *g) {
  /* Every payload starts (in call order), then every one in flight ends. */
  lt_status first = g->broken ? LT_OK : dist_queue_flush(g, NULL);
  for (lt_dist_work *w = g->works; w != NULL; w = w->next) {
    if (w->finished || w->queued || g->broken) continue;
    lt_status st = lt_dist_wait(w);
    if (first == LT_OK) first = st;
  }
  lt_dist_work *w = g->works;
  while (w != NULL) {
    lt_dist_work *next = w->next;
    if (w->finished && w->orphan) free_work(w);
    else if (w->finished) unlink_work(w);
    w = next;
  }
  return first;
}
