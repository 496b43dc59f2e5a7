/* The group's queue of async calls whose payload collective has not started.
 * An async call only starts the exchange of its description and returns; its
 * payload starts once that exchange is seen done and agreeing, from whichever
 * later call looks (its wait or is_completed, the next collective, destroy),
 * so that backward goes on computing while the ranks meet. MPI matches the
 * collectives of a communicator by their order on each rank, and ranks look
 * at different moments: payloads start from the head only, so every rank
 * starts them in call order. Every rank sees the same descriptions, so a
 * disagreement makes every rank skip the same payload, and the group goes on. */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist_work.h"

void dist_queue_push(dist_group *g, lt_dist_work *w) {
  w->queued = true;
  w->queue_next = NULL;
  if (g->queue_tail != NULL) g->queue_tail->queue_next = w;
  else g->queue_head = w;
  g->queue_tail = w;
}

static lt_dist_work *pop(dist_group *g) {
  lt_dist_work *w = g->queue_head;
  g->queue_head = w->queue_next;
  if (g->queue_head == NULL) g->queue_tail = NULL;
  w->queue_next = NULL;
  w->queued = false;
  return w;
}

/* w's payload will not run on any rank: its wait raises why (the message is
 * kept now; later calls set others). */
static void skip(lt_dist_work *w, lt_status why) {
  w->failure = why;
  snprintf(w->failure_message, sizeof w->failure_message, "%s", lt_last_error());
  w->finished = true;
  dist_work_clear(w);
  dist_work_drop_orphan(w);
}

/* The head's exchange is done: its payload starts, or is skipped. */
static lt_status launch_head(dist_group *g) {
  lt_dist_work *w = pop(g);
  lt_status st = dist_call_disagreement(w->op, (const char *)w->calls + dist_call_bytes(), g->size);
  free(w->calls);
  w->calls = NULL;
  if (st != LT_OK) {
    skip(w, st);
    return LT_OK;
  }
  st = dist_call_start(g, w, &w->request);
  if (st != LT_OK) {
    dist_group_break(g, w->op); /* the other ranks may be inside it */
    skip(w, st);
    return st;
  }
  /* On a stream, the copies are queued after the collective at once. */
  if (g->backend->stream_ordered && (st = dist_work_copy_out(w)) != LT_OK) {
    w->failure = st;
    snprintf(w->failure_message, sizeof w->failure_message, "%s", lt_last_error());
  }
  return LT_OK;
}

static lt_status test_exchange(void *ctx, bool *done) {
  lt_dist_work *w = ctx;
  *done = w->exchange == NULL;
  if (*done) return LT_OK;
  return dist_mpi_exchange_test(&w->exchange, w->op, done);
}

lt_status dist_queue_progress(dist_group *g) {
  while (g->queue_head != NULL && !g->broken) {
    lt_dist_work *w = g->queue_head;
    bool done = false;
    lt_status st = test_exchange(w, &done);
    if (st != LT_OK) {
      dist_group_break(g, w->op);
      return st;
    }
    if (!done) return LT_OK;
    LT_TRY(launch_head(g));
  }
  return LT_OK;
}

lt_status dist_queue_flush(dist_group *g, const lt_dist_work *last) {
  while (g->queue_head != NULL && !g->broken) {
    lt_dist_work *w = g->queue_head;
    bool at_last = w == last;
    lt_status st = dist_poll(w->op, g->timeout_s, w->start, test_exchange, w);
    if (st != LT_OK) {
      dist_group_break(g, w->op); /* the exchange stays in flight: w keeps its buffers */
      return st;
    }
    LT_TRY(launch_head(g)); /* may free w (a dropped one that was skipped) */
    if (at_last) break;
  }
  return LT_OK;
}
