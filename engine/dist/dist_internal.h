/* What the files of engine/dist share: the process group, the backend table
 * (one per backend: the moving of contiguous buffers), the MPI runtime every
 * backend stands on (started once, the failure notices, the arrival checks),
 * and the polling against a deadline. Validation, the exchange of each call's
 * description and the staging of non-contiguous tensors live in the front
 * (dist_collectives.c), once for every backend. */
#ifndef LT_DIST_INTERNAL_H
#define LT_DIST_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "lt/distributed.h"

typedef struct dist_comm dist_comm;       /* an MPI communicator (mpi_runtime.c) */
typedef struct dist_request dist_request; /* a backend's collective in flight */
typedef struct dist_group dist_group;

typedef struct dist_backend {
  const char *name;
  lt_device_type device_type; /* the tensors it moves */
  /* Work is ordered on the device's current stream (NCCL): results may be
   * copied out right after the collective is queued, and a synchronous call
   * does not wait for the device. */
  bool stream_ordered;
  bool native_avg; /* else avg is a sum, divided by the world size after */
  lt_status (*open)(dist_group *g);
  void (*close)(dist_group *g, bool broken); /* broken: a collective timed out */
  /* count elements of dt; req NULL: return when done, else *req is the
   * collective in flight. Buffers are contiguous; in and out never overlap. */
  lt_status (*all_reduce)(dist_group *g, void *buf, size_t count, lt_dtype dt, lt_reduce_op op,
                          dist_request **req);
  lt_status (*broadcast)(dist_group *g, void *buf, size_t count, lt_dtype dt, int src,
                         dist_request **req);
  /* out holds world-size blocks of count elements. */
  lt_status (*all_gather)(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                          dist_request **req);
  /* in holds world-size blocks of count elements; out one. */
  lt_status (*reduce_scatter)(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                              lt_reduce_op op, dist_request **req);
  /* in and out hold world-size blocks of count elements. */
  lt_status (*all_to_all)(dist_group *g, const void *in, void *out, size_t count, lt_dtype dt,
                          dist_request **req);
  lt_status (*test)(dist_request *req, bool *done);
  void (*release)(dist_request *req); /* a finished request */
} dist_backend;

/* One record of the works a group has handed out (dist_work.c). */
struct lt_dist_work;

struct dist_group {
  const dist_backend *backend;
  int rank, size;
  double timeout_s;
  dist_comm *comm;   /* the group's own communicator (descriptions, barrier) */
  void *impl;        /* the backend's state (NCCL's communicator) */
  lt_device device;  /* the device of the tensors (cuda:<local rank> for NCCL) */
  /* Set when a wait timed out: a collective of this group is in flight on
   * some ranks and not others, so no later call can be matched. */
  bool broken;
  char broken_reason[200];
  void *call_in, *call_all; /* the exchange's buffers (a description, one per rank) */
  struct lt_dist_work *works; /* handed out and not yet freed or finished */
  /* async calls whose payload is not launched yet, in call order
   * (dist_queue.c): launched from the head only, so that every rank starts
   * the payload collectives in the same order. */
  struct lt_dist_work *queue_head, *queue_tail;
};

/* The default group, or an error naming op (none, or broken). */
lt_status dist_group_get(const char *op, dist_group **out);
/* Marks g broken after a timeout in op (the message is already set). */
void dist_group_break(dist_group *g, const char *op);

/* Calls test until done, failing past the group's timeout (counted from
 * start, a dist_now()) or when another rank's failure notice arrives. */
typedef lt_status (*dist_test_fn)(void *ctx, bool *done);
lt_status dist_poll(const char *op, double timeout_s, double start, dist_test_fn test, void *ctx);
double dist_now(void); /* seconds, monotonic */
/* One look of dist_poll's, for a caller that polls by itself (is_completed
 * in a loop): another rank's failure notice, or the deadline passed. */
lt_status dist_poll_check(const char *op, double timeout_s, double start);

/* ---- the MPI runtime (mpi_runtime.c; mpi_none.c without MPI) ---- */
/* A communicator of all ranks for a new group, made after every rank has
 * arrived (within timeout_s); the first call starts MPI. */
lt_status dist_mpi_comm_open(const char *op, double timeout_s, dist_comm **out, int *rank, int *size);
void dist_mpi_comm_close(dist_comm *c);
/* Every rank's bytes of in into all (rank r's at r * bytes). */
lt_status dist_mpi_exchange(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                            double timeout_s);
/* The same exchange started without waiting (async_op): *out is the
 * exchange in flight, or NULL when it completed at once (a world of one).
 * in and all must live until it is seen done, or for good if it never is. */
typedef struct dist_exchange dist_exchange;
lt_status dist_mpi_exchange_start(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                                  dist_exchange **out);
/* Whether *x is done; once it is, it is freed and *x becomes NULL. */
lt_status dist_mpi_exchange_test(dist_exchange **x, const char *op, bool *done);
lt_status dist_mpi_barrier(dist_comm *c, const char *op, double timeout_s);
/* bytes of rank src's buf to every rank's (NCCL's bootstrap id). */
lt_status dist_mpi_broadcast_bytes(dist_comm *c, void *buf, size_t bytes, int src, const char *op,
                                   double timeout_s);
/* This rank's number among the ranks of its machine. */
lt_status dist_mpi_local_rank(dist_comm *c, int *local_rank);
/* An error naming op when another rank has sent its failure notice. */
lt_status dist_mpi_check_notice(const char *op);
void dist_mpi_abort_job(const char *message);

#ifdef LT_HAVE_MPI
extern const dist_backend dist_mpi_backend;
#endif
extern const dist_backend dist_nccl_backend; /* every build: NCCL is reached through hooks */

#endif
