/* The default process group: made, queried, waited on (barrier), destroyed;
 * and the backends this build has. A group that saw a wait fail (a timeout,
 * another rank's failure) is broken: a collective may be in flight on some
 * ranks and not on others, so nothing later could be matched; it refuses
 * every call until it is destroyed, and keeps its buffers for good (MPI may
 * still write them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "dist/dist_work.h"
#include "dist/nccl_hooks.h"

static dist_group *current;
/* Broken groups, kept reachable: their buffers may still be written. */
static dist_group *abandoned[64];
static int nabandoned;

static const dist_backend *const backends[] = {
#ifdef LT_HAVE_MPI
    &dist_mpi_backend,
#endif
    &dist_nccl_backend, /* over the NCCL hooks: says why when there is no NCCL */
    NULL,
};

static const dist_backend *find_backend(const char *name) {
  for (int i = 0; backends[i] != NULL; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

/* nccl: whether this program has NCCL hooks (a CUDA build, the simulated
 * device), not whether libnccl loads, which only starting a group tries. */
bool lt_dist_backend_compiled(const char *backend) {
  if (backend != NULL && strcmp(backend, "nccl") == 0) return strcmp(lt_nccl_hooks_get()->name, "none") != 0;
  return backend != NULL && find_backend(backend) != NULL;
}

const char *lt_reduce_op_name(lt_reduce_op op) {
  static const char *const names[] = {"sum", "avg", "max", "min", "prod"};
  return (unsigned)op < LT_NREDUCE_OPS ? names[op] : "?";
}

static const char *missing_backend(const char *backend) {
  if (strcmp(backend, "mpi") == 0)
    return "this lt was built without MPI (install Debian's libopenmpi-dev and openmpi-bin, then build "
           "again: see the README)";
  return "unknown backend (expected mpi or nccl)";
}

lt_status lt_dist_init(const char *backend, double timeout_s) {
  const char *op = "init_process_group";
  if (current != NULL)
    return lt_error(LT_ERR_ARG, "%s: the default process group is already initialized (call "
                    "destroy_process_group first)", op);
  if (!(timeout_s > 0))
    return lt_error(LT_ERR_ARG, "%s: timeout must be a positive number of seconds, got %g", op, timeout_s);
  const dist_backend *b = find_backend(backend);
  if (b == NULL) return lt_error(LT_ERR_ARG, "%s: backend '%s': %s", op, backend, missing_backend(backend));
  dist_group *g = calloc(1, sizeof *g);
  if (g == NULL) return lt_error(LT_ERR_OOM, "%s: out of memory", op);
  g->backend = b;
  g->timeout_s = timeout_s;
  lt_status st = dist_mpi_comm_open(op, timeout_s, &g->comm, &g->rank, &g->size);
  if (st == LT_OK) {
    g->call_in = calloc(1, dist_call_bytes());
    g->call_all = calloc((size_t)g->size, dist_call_bytes());
    if (g->call_in == NULL || g->call_all == NULL) st = lt_error(LT_ERR_OOM, "%s: out of memory", op);
  }
  if (st == LT_OK) {
    st = b->open(g);
    /* The backend's start may have left an exchange in flight: keep the buffers. */
    if (st != LT_OK) {
      dist_mpi_comm_close(g->comm);
      if (nabandoned < (int)(sizeof abandoned / sizeof abandoned[0])) abandoned[nabandoned++] = g;
      return st;
    }
  }
  if (st != LT_OK) {
    dist_mpi_comm_close(g->comm);
    free(g->call_in);
    free(g->call_all);
    free(g);
    return st;
  }
  current = g;
  return LT_OK;
}

bool lt_dist_is_initialized(void) { return current != NULL; }

lt_status dist_group_get(const char *op, dist_group **out) {
  if (current == NULL)
    return lt_error(LT_ERR_ARG, "%s: the default process group is not initialized (call "
                    "lt.distributed.init_process_group first)", op);
  if (current->broken)
    return lt_error(LT_ERR_IO, "%s: the process group is broken: %s (call destroy_process_group, then "
                    "init_process_group to go on)", op, current->broken_reason);
  *out = current;
  return LT_OK;
}

void dist_group_break(dist_group *g, const char *op) {
  if (g->broken) return;
  g->broken = true;
  snprintf(g->broken_reason, sizeof g->broken_reason, "%s failed (%s)", op, lt_last_error());
}

/* Rank and size stay readable on a broken group: scripts print them in errors. */
lt_status lt_dist_rank(const char *op, int *rank) {
  if (current == NULL) return dist_group_get(op, NULL);
  *rank = current->rank;
  return LT_OK;
}

lt_status lt_dist_world_size(const char *op, int *size) {
  if (current == NULL) return dist_group_get(op, NULL);
  *size = current->size;
  return LT_OK;
}

const char *lt_dist_backend_name(void) { return current != NULL ? current->backend->name : NULL; }

lt_status lt_dist_barrier(void) {
  dist_group *g = NULL;
  LT_TRY(dist_group_get("barrier", &g));
  LT_TRY(dist_queue_progress(g)); /* a later call: the async payloads that are ready start */
  lt_status st = dist_mpi_barrier(g->comm, "barrier", g->timeout_s);
  if (st != LT_OK) dist_group_break(g, "barrier");
  return st;
}

lt_status lt_dist_destroy(void) {
  dist_group *g = current;
  if (g == NULL)
    return lt_error(LT_ERR_ARG, "destroy_process_group: the default process group is not initialized");
  current = NULL;
  /* Work in flight ends before its communicator goes; what cannot end
   * (a broken group) keeps the group and its buffers alive. */
  lt_status st = dist_works_settle(g);
  bool keep = g->broken || g->works != NULL;
  g->backend->close(g, g->broken);
  dist_mpi_comm_close(g->comm);
  g->comm = NULL;
  if (keep && nabandoned < (int)(sizeof abandoned / sizeof abandoned[0])) {
    abandoned[nabandoned++] = g;
  } else if (!keep) {
    free(g->call_in);
    free(g->call_all);
    free(g);
  }
  return st;
}

void lt_dist_abort_job(const char *message) { dist_mpi_abort_job(message); }
