/* A collective's record (dist_work.c): the call, the request in flight and
 * what ends it (dividing an average, copying a staged result into the
 * caller's tensors). A synchronous call fills one on the stack and ends it at
 * once; async_op hands it out as the work handle, queued on the group until
 * its payload starts (dist_queue.c). */
#ifndef LT_DIST_WORK_H
#define LT_DIST_WORK_H

#include "dist/dist_internal.h"

struct lt_dist_work {
  dist_group *group;         /* NULL once the group is destroyed (the work had ended) */
  struct lt_dist_work *next; /* in group->works */
  struct lt_dist_work *queue_next; /* in group->queue_head's list */
  const char *op;
  double start; /* the call: every wait's deadline counts from it */
  /* The payload collective, launched from these (dist_call_start). */
  int kind, reduce_op, root;
  size_t count;
  lt_dtype dtype;
  /* async_op: the description exchange in flight (NULL once seen done) and
   * its buffers, this rank's description then every rank's (calls). */
  dist_exchange *exchange;
  void *calls;
  bool queued; /* in the group's queue: the payload is not launched yet */
  /* A disagreement seen after the call returned: the payload was skipped on
   * every rank, and wait/is_completed raise this error. */
  lt_status failure;
  char failure_message[512];
  dist_request *request; /* NULL when none is in flight */
  bool finished;
  bool copied; /* the end's copies are done (or queued on the stream) */
  bool orphan; /* the caller dropped its handle before the end */
  /* Owned references. buffer: what the backend writes (the caller's tensor
   * itself, or a contiguous stand-in); target: the tensor a stand-in is
   * copied into; outs: the tensors the rows of a [world, n] buffer are copied
   * into; keep: a send buffer that must live while the request does. */
  lt_tensor *buffer, *target, *keep;
  lt_tensor **outs;
  int nouts;
  bool divide; /* avg on a backend without one: buffer /= world size */
};

/* The bytes of one call's description (dist_collectives.c). */
size_t dist_call_bytes(void);
/* The error naming where every rank's descriptions (all, from the
 * exchange) differ, or LT_OK: the same on every rank. */
lt_status dist_call_disagreement(const char *op, const void *all, int size);
/* Starts w's payload collective on the backend (req NULL: blocking). */
lt_status dist_call_start(dist_group *g, lt_dist_work *w, dist_request **req);

/* The queue of async calls whose payload waits for their exchange
 * (dist_queue.c). push: w's exchange has started. progress: launches the
 * payloads from the head whose exchanges are done, without waiting. flush:
 * launches every payload up to last (NULL: all), waiting for their
 * exchanges with their deadlines (a timeout breaks the group). */
void dist_queue_push(dist_group *g, lt_dist_work *w);
lt_status dist_queue_progress(dist_group *g);
lt_status dist_queue_flush(dist_group *g, const lt_dist_work *last);

/* Ends w after its request is done (or at once when there is none). */
lt_status dist_work_finish(lt_dist_work *w);
/* The end's division and copies, once (a stream-ordered backend queues
 * them right after the collective). */
lt_status dist_work_copy_out(lt_dist_work *w);
/* Frees w's references (not w). */
void dist_work_clear(lt_dist_work *w);
/* Hands out a copy of the stack record w as a work handle on g. */
lt_status dist_work_hand_out(dist_group *g, const lt_dist_work *w, lt_dist_work **out);
/* Frees w when it has ended and its caller has dropped it. */
void dist_work_drop_orphan(lt_dist_work *w);
/* Before destroy: waits for g's work in flight (failures break g), frees
 * the ended orphans, detaches the ended works the caller still holds. */
lt_status dist_works_settle(dist_group *g);

#endif
