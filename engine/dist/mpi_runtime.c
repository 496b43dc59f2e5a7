/* Open MPI under every backend: started by the first init_process_group (so a
 * plain `lt script.lua` never pays for it) and finalized at exit (so groups
 * can be destroyed and made again); a communicator per group; the waits that
 * make every rank arrive before a collective that has no deadline of its own;
 * and the failure notices, so that an error on one rank stops the others
 * with that error instead of leaving them to wait for their timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/mpi_internal.h"

enum { TAG_NOTICE = 1, TAG_ANSWER = 2 };
#define NOTICE_BYTES 1024
/* How long a failing rank waits for the others to answer its notice (those
 * inside a collective answer at once; the others are ended by its abort). */
#define ABORT_GRACE_S 2.0
/* How long a rank stopped by a notice waits to be ended by the failing
 * rank's abort before it aborts by itself. */
#define ENDED_BY_OTHER_S 5.0

static bool started, finalized, we_initialized;
/* An arrival wait timed out: MPI_COMM_WORLD's collectives are out of step
 * between the ranks, so no new group can be made in this process. */
static bool arrival_broken;
static MPI_Comm control = MPI_COMM_NULL; /* the notices' point-to-point messages */
static MPI_Request notice_request = MPI_REQUEST_NULL;
static char notice[NOTICE_BYTES];
static int notice_from = -1; /* the rank whose failure notice arrived, -1: none */

lt_status dist_mpi_error(const char *op, const char *call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", code);
  return lt_error(LT_ERR_IO, "%s: %s failed: %s", op, call, text);
}

static void sleep_ms(long ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

static void finalize_at_exit(void) {
  if (finalized) return;
  finalized = true;
  if (notice_request != MPI_REQUEST_NULL) {
    MPI_Cancel(&notice_request);
    MPI_Wait(&notice_request, MPI_STATUS_IGNORE);
  }
  dist_mpi_half_ops_free();
  if (control != MPI_COMM_NULL) MPI_Comm_free(&control);
  if (we_initialized) MPI_Finalize();
}

static lt_status start_mpi(const char *op) {
  if (finalized) return lt_error(LT_ERR_ARG, "%s: MPI was already finalized in this process", op);
  if (started) return LT_OK;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    /* Only the thread running Lua calls MPI; lt's kernel threads never do. */
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Init_thread", rc);
    we_initialized = true;
  }
  /* Errors come back as codes, which become lt errors, instead of aborting. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  started = true;
  atexit(finalize_at_exit);
  return LT_OK;
}

typedef struct wait_ctx {
  MPI_Request *request;
  const char *op;
} wait_ctx;

static lt_status test_request(void *ctx, bool *done) {
  wait_ctx *w = ctx;
  int flag = 0;
  int rc = MPI_Test(w->request, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return dist_mpi_error(w->op, "MPI_Test", rc);
  *done = flag != 0;
  return LT_OK;
}

/* Waits for a request with the deadline. On failure the request stays in
 * flight: its buffers must outlive it (the callers' are static or the
 * group's, which a broken group never frees). */
static lt_status wait_for(MPI_Request *request, const char *op, double timeout_s, double start) {
  wait_ctx ctx = {request, op};
  return dist_poll(op, timeout_s, start, test_request, &ctx);
}

/* Every rank has reached this point (MPI_Comm_dup has no deadline: a rank
 * that never came would hang the others in it). */
static lt_status arrive(const char *op, double timeout_s) {
  if (arrival_broken)
    return lt_error(LT_ERR_IO, "%s: an earlier %s timed out waiting for the other ranks, so MPI cannot make "
                    "a new process group in this process", op, op);
  double start = dist_now();
  MPI_Request request;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &request);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Ibarrier", rc);
  lt_status st = wait_for(&request, op, timeout_s, start);
  if (st != LT_OK) arrival_broken = true;
  return st;
}

static lt_status open_control(const char *op) {
  if (control != MPI_COMM_NULL) return LT_OK;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &control);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Comm_dup", rc);
  rc = MPI_Irecv(notice, NOTICE_BYTES, MPI_CHAR, MPI_ANY_SOURCE, TAG_NOTICE, control, &notice_request);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Irecv", rc);
  dist_mpi_half_ops_create();
  return LT_OK;
}

lt_status dist_mpi_comm_open(const char *op, double timeout_s, dist_comm **out, int *rank, int *size) {
  LT_TRY(start_mpi(op));
  LT_TRY(arrive(op, timeout_s));
  LT_TRY(open_control(op));
  dist_comm *c = malloc(sizeof *c);
  if (c == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
  if (rc == MPI_SUCCESS) {
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->payload);
    if (rc != MPI_SUCCESS) MPI_Comm_free(&c->comm);
  }
  if (rc != MPI_SUCCESS) {
    free(c);
    return dist_mpi_error(op, "MPI_Comm_dup", rc);
  }
  MPI_Comm_rank(c->comm, rank);
  MPI_Comm_size(c->comm, size);
  *out = c;
  return LT_OK;
}

void dist_mpi_comm_close(dist_comm *c) {
  if (c == NULL) return;
  /* MPI frees a communicator once the operations still in flight on it end. */
  if (!finalized) {
    MPI_Comm_free(&c->comm);
    MPI_Comm_free(&c->payload);
  }
  free(c);
}

lt_status dist_mpi_exchange(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                            double timeout_s) {
  double start = dist_now();
  MPI_Request request;
  int rc = MPI_Iallgather(in, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->comm, &request);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Iallgather", rc);
  return wait_for(&request, op, timeout_s, start);
}

struct dist_exchange {
  MPI_Request request;
};

lt_status dist_mpi_exchange_start(dist_comm *c, const void *in, void *all, size_t bytes, const char *op,
                                  dist_exchange **out) {
  dist_exchange *x = malloc(sizeof *x);
  if (x == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  int rc = MPI_Iallgather(in, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, c->comm, &x->request);
  if (rc != MPI_SUCCESS) {
    free(x);
    return dist_mpi_error(op, "MPI_Iallgather", rc);
  }
  *out = x;
  return LT_OK;
}

lt_status dist_mpi_exchange_test(dist_exchange **x, const char *op, bool *done) {
  wait_ctx ctx = {&(*x)->request, op};
  LT_TRY(test_request(&ctx, done));
  if (*done) {
    free(*x);
    *x = NULL;
  }
  return LT_OK;
}

lt_status dist_mpi_barrier(dist_comm *c, const char *op, double timeout_s) {
  double start = dist_now();
  MPI_Request request;
  int rc = MPI_Ibarrier(c->comm, &request);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Ibarrier", rc);
  return wait_for(&request, op, timeout_s, start);
}

lt_status dist_mpi_broadcast_bytes(dist_comm *c, void *buf, size_t bytes, int src, const char *op,
                                   double timeout_s) {
  double start = dist_now();
  MPI_Request request;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, src, c->comm, &request);
  if (rc != MPI_SUCCESS) return dist_mpi_error(op, "MPI_Ibcast", rc);
  return wait_for(&request, op, timeout_s, start);
}

lt_status dist_mpi_local_rank(dist_comm *c, int *local_rank) {
  MPI_Comm local;
  int rank = 0;
  MPI_Comm_rank(c->comm, &rank);
  int rc = MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  if (rc != MPI_SUCCESS) return dist_mpi_error("init_process_group", "MPI_Comm_split_type", rc);
  MPI_Comm_rank(local, local_rank);
  MPI_Comm_free(&local);
  return LT_OK;
}

static int own_rank(void) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

lt_status dist_mpi_check_notice(const char *op) {
  if (notice_from < 0 && notice_request != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Test(&notice_request, &flag, &status) == MPI_SUCCESS && flag) {
      notice_from = status.MPI_SOURCE;
      notice[NOTICE_BYTES - 1] = '\0';
    }
  }
  if (notice_from >= 0)
    return lt_error(LT_ERR_IO, "%s: rank %d stopped because rank %d failed: %s", op, own_rank(), notice_from,
                    notice);
  return LT_OK;
}

/* This rank stops because notice_from failed, and has printed why: it says
 * so to that rank, whose abort then ends the job. */
static void answer_notice(void) {
  int one = 1;
  MPI_Request request;
  if (MPI_Isend(&one, 1, MPI_INT, notice_from, TAG_ANSWER, control, &request) != MPI_SUCCESS) return;
  double start = dist_now();
  while (dist_now() - start < ENDED_BY_OTHER_S) {
    int flag = 0;
    MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    sleep_ms(1);
  }
}

/* This rank failed first: every other rank gets the message (its first line,
 * without the traceback) and may print it as its own error before the abort. */
static void send_notices(const char *message) {
  int rank = 0, size = 1;
  MPI_Comm_rank(control, &rank);
  MPI_Comm_size(control, &size);
  char text[NOTICE_BYTES];
  snprintf(text, sizeof text, "%s", message != NULL ? message : "(no message)");
  char *traceback = strstr(text, "\nstack traceback:");
  if (traceback != NULL) *traceback = '\0';
  MPI_Request *sends = calloc((size_t)size, sizeof *sends);
  bool *answered = calloc((size_t)size, sizeof *answered);
  if (sends == NULL || answered == NULL) goto done;
  int waiting = size - 1;
  for (int r = 0; r < size; r++) {
    sends[r] = MPI_REQUEST_NULL;
    if (r != rank) MPI_Isend(text, (int)strlen(text) + 1, MPI_CHAR, r, TAG_NOTICE, control, &sends[r]);
  }
  double start = dist_now();
  while (waiting > 0 && dist_now() - start < ABORT_GRACE_S) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_ANSWER, control, &flag, &status);
    int from = -1;
    if (flag) {
      int value;
      MPI_Recv(&value, 1, MPI_INT, status.MPI_SOURCE, TAG_ANSWER, control, MPI_STATUS_IGNORE);
      from = status.MPI_SOURCE;
    } else if (notice_request != MPI_REQUEST_NULL &&
               MPI_Test(&notice_request, &flag, &status) == MPI_SUCCESS && flag) {
      /* A rank that failed on its own at the same time aborts too and will
       * not answer; listen again for the next one. */
      from = status.MPI_SOURCE;
      MPI_Irecv(notice, NOTICE_BYTES, MPI_CHAR, MPI_ANY_SOURCE, TAG_NOTICE, control, &notice_request);
    }
    if (from >= 0 && from < size && !answered[from]) {
      answered[from] = true;
      waiting--;
    }
    if (from < 0) sleep_ms(1);
  }
done:
  free(sends);
  free(answered);
}

void dist_mpi_abort_job(const char *message) {
  if (!started || finalized) return;
  fflush(NULL); /* MPI_Abort ends the process without flushing stdio */
  if (control != MPI_COMM_NULL) {
    if (notice_from >= 0) answer_notice();
    else send_notices(message);
  }
  fflush(NULL);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
