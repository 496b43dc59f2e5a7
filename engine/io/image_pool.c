/* The decode pool (lt/data_io.h): POSIX threads that read and decode image
 * files while the thread running Lua computes.
 *
 * All shared state (the job list, each job's state and result, the counters,
 * the stop flag) is read and written under the one mutex; the only work done
 * outside it is a job's decode, on data that nothing else touches while the
 * job is RUNNING: a running job is never freed or unlinked by anyone but its
 * worker (a clear marks it orphaned instead, and a taker waits for it).
 *
 * The worker threads block every signal, so that the host's handlers
 * (Ctrl-C in the REPL) run on the Lua thread, as they expect. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lt/data_io.h"

#define POOL_MAX_THREADS 64

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct job {
  struct job *prev, *next; /* the pool's list, in submission order */
  int64_t key;
  char *path;
  lt_image_spec spec;
  int state;
  bool claimed;  /* a taker owns it and waits for it to finish */
  bool orphaned; /* cleared while running: its worker frees it */
  lt_status status;
  char *error; /* the failure's message (lt_error's is per thread) */
  lt_image image;
} job;

struct lt_image_pool {
  pthread_mutex_t mu;
  pthread_cond_t work; /* a job was queued, or the pool stops */
  pthread_cond_t done; /* a job finished */
  pthread_t threads[POOL_MAX_THREADS];
  int nthreads;
  bool stopping;
  job *head, *tail;
  int64_t njobs, queued, running, max_jobs;
  lt_image_pool_stats stats;
};

static void job_free(job *j) {
  if (!j) return;
  free(j->path);
  free(j->error);
  lt_image_free(&j->image);
  free(j);
}

static void unlink_job(lt_image_pool *p, job *j) {
  if (j->prev) j->prev->next = j->next;
  else p->head = j->next;
  if (j->next) j->next->prev = j->prev;
  else p->tail = j->prev;
  j->prev = j->next = NULL;
  p->njobs--;
}

/* Decodes j's file into j (outside the lock: j is RUNNING or owned by the
 * caller). */
static void run_job(job *j) {
  lt_image img;
  lt_status st = lt_image_decode_file(j->path, &j->spec, &img);
  j->status = st;
  if (st == LT_OK) {
    j->image = img;
  } else {
    j->error = strdup(lt_last_error());
  }
}

static void *worker(void *arg) {
  lt_image_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && p->queued == 0) pthread_cond_wait(&p->work, &p->mu);
    if (p->stopping) break;
    job *j = p->head;
    while (j && j->state != JOB_QUEUED) j = j->next;
    if (!j) { /* queued counts listed QUEUED jobs, so never; but never spin */
      p->queued = 0;
      continue;
    }
    j->state = JOB_RUNNING;
    p->queued--;
    p->running++;
    pthread_mutex_unlock(&p->mu);
    run_job(j);
    pthread_mutex_lock(&p->mu);
    p->running--;
    if (j->orphaned) {
      job_free(j);
    } else {
      j->state = JOB_DONE;
      p->stats.decoded++;
    }
    pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

lt_status lt_image_pool_new(int threads, int max_jobs, lt_image_pool **out) {
  *out = NULL;
  if (threads < 1 || threads > POOL_MAX_THREADS)
    return lt_error(LT_ERR_ARG, "image pool: threads must be 1 to %d, got %d", POOL_MAX_THREADS, threads);
  if (max_jobs < 1) return lt_error(LT_ERR_ARG, "image pool: max_jobs must be positive, got %d", max_jobs);
  lt_image_pool *p = calloc(1, sizeof *p);
  if (!p) return lt_error(LT_ERR_OOM, "image pool: out of memory");
  p->max_jobs = max_jobs;
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return lt_error(LT_ERR_INTERNAL, "image pool: cannot create a mutex");
  }
  if (pthread_cond_init(&p->work, NULL) != 0 || pthread_cond_init(&p->done, NULL) != 0) {
    /* Destroying a condition variable that failed to initialise is
     * undefined; leaking one on this path (never seen) is the lesser evil. */
    pthread_mutex_destroy(&p->mu);
    free(p);
    return lt_error(LT_ERR_INTERNAL, "image pool: cannot create a condition variable");
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old); /* inherited by the threads */
  for (int i = 0; i < threads; i++) {
    if (pthread_create(&p->threads[i], NULL, worker, p) != 0) break;
    p->nthreads++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (p->nthreads == 0) {
    lt_image_pool_free(p);
    return lt_error(LT_ERR_INTERNAL, "image pool: cannot start a thread");
  }
  p->stats.threads = p->nthreads;
  *out = p;
  return LT_OK;
}

void lt_image_pool_free(lt_image_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = true;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  /* A worker finishes the job it is decoding before it sees the flag, and
   * frees it if it was orphaned: after the joins only listed jobs remain. */
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  for (job *j = p->head, *next; j; j = next) {
    next = j->next;
    job_free(j);
  }
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

lt_status lt_image_pool_submit(lt_image_pool *p, int64_t key, const char *path,
                               const lt_image_spec *spec, bool *accepted) {
  *accepted = false;
  /* Allocated before the lock: malloc may be slow and the threads wait on it. */
  job *j = calloc(1, sizeof *j);
  char *copy = strdup(path);
  if (!j || !copy) {
    free(j);
    free(copy);
    return lt_error(LT_ERR_OOM, "image pool: out of memory queueing %s", path);
  }
  j->key = key;
  j->path = copy;
  j->spec = *spec;
  j->state = JOB_QUEUED;
  job *drop = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->njobs >= p->max_jobs) {
    for (job *k = p->head; k; k = k->next)
      if (k->state == JOB_DONE && !k->claimed) {
        drop = k;
        break;
      }
    if (drop) {
      unlink_job(p, drop);
      p->stats.dropped++;
    } else {
      p->stats.refused++;
      pthread_mutex_unlock(&p->mu);
      job_free(j);
      return LT_OK;
    }
  }
  j->prev = p->tail;
  if (p->tail) p->tail->next = j;
  else p->head = j;
  p->tail = j;
  p->njobs++;
  p->queued++;
  p->stats.submitted++;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  job_free(drop);
  *accepted = true;
  return LT_OK;
}

lt_status lt_image_pool_take(lt_image_pool *p, int64_t key, lt_image *out, bool *found) {
  memset(out, 0, sizeof *out);
  *found = false;
  pthread_mutex_lock(&p->mu);
  job *j = p->head;
  while (j && (j->key != key || j->claimed)) j = j->next;
  if (!j) {
    p->stats.missed++;
    pthread_mutex_unlock(&p->mu);
    return LT_OK;
  }
  *found = true;
  if (j->state == JOB_QUEUED) {
    /* No thread has started it: decoding it here is sooner than waiting
     * for the jobs queued before it. */
    unlink_job(p, j);
    p->queued--;
    p->stats.stolen++;
    pthread_mutex_unlock(&p->mu);
    run_job(j);
  } else {
    if (j->state == JOB_RUNNING) {
      j->claimed = true;
      p->stats.waited++;
      while (j->state != JOB_DONE) pthread_cond_wait(&p->done, &p->mu);
    } else {
      p->stats.ready++;
    }
    unlink_job(p, j);
    pthread_mutex_unlock(&p->mu);
  }
  lt_status st = j->status;
  if (st == LT_OK) {
    *out = j->image;
    j->image.data = NULL;
  } else {
    lt_error(st, "%s", j->error ? j->error : "image: out of memory keeping an error message");
  }
  job_free(j);
  return st;
}

void lt_image_pool_wait_idle(lt_image_pool *p) {
  pthread_mutex_lock(&p->mu);
  while (p->queued + p->running > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

void lt_image_pool_clear(lt_image_pool *p) {
  job *freed = NULL;
  pthread_mutex_lock(&p->mu);
  for (job *j = p->head, *next; j; j = next) {
    next = j->next;
    if (j->claimed) continue; /* a taker waits for it */
    unlink_job(p, j);
    if (j->state == JOB_RUNNING) {
      j->orphaned = true;
    } else {
      if (j->state == JOB_QUEUED) p->queued--;
      j->next = freed; /* freed after the lock is released */
      freed = j;
    }
  }
  pthread_mutex_unlock(&p->mu);
  while (freed) {
    job *next = freed->next;
    job_free(freed);
    freed = next;
  }
}

lt_image_pool_stats lt_image_pool_get_stats(lt_image_pool *p) {
  pthread_mutex_lock(&p->mu);
  lt_image_pool_stats s = p->stats;
  s.pending = p->njobs;
  pthread_mutex_unlock(&p->mu);
  return s;
}
