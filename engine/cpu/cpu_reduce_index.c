/* max/min with their indices (max(dim), argmax, max of everything).
 * Values compare as double for floating dtypes (exact for every one of them)
 * and as int64 for integers and bool. A NaN beats every number and the first
 * NaN is reported; among equal values the first wins. The winning element's
 * bytes are copied to the values output, so values are exact. */
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_reduce_geom.h"
#include "lt/threads.h"

typedef struct best {
  bool is_max, floating, found;
  lt_dtype dt;
  double f;
  int64_t i;
  int64_t index;    /* position in the reduced dims' row-major order */
  const char *where; /* the element itself */
} best;

static void best_init(best *b, bool is_max, lt_dtype dt) {
  memset(b, 0, sizeof *b);
  b->is_max = is_max;
  b->dt = dt;
  b->floating = lt_dtype_is_floating(dt);
}

/* Whether candidate (f or i) replaces the current best: strictly better, or
 * a NaN over a number. A NaN best is final. */
static inline bool better_float(const best *b, double f) {
  if (!b->found) return true;
  if (isnan(b->f)) return false;
  if (isnan(f)) return true;
  return b->is_max ? f > b->f : f < b->f;
}

static inline bool better_int(const best *b, int64_t i) {
  if (!b->found) return true;
  return b->is_max ? i > b->i : i < b->i;
}

static void best_run(void *vb, const char *p, int64_t stride, int64_t n, int64_t k) {
  best *b = vb;
  union { double d[CPU_BUF]; int64_t i[CPU_BUF]; } buf;
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
    const char *q = p + off * stride;
    if (b->floating) {
      if (b->found && isnan(b->f)) return;
      cpu_load(CPU_KIND_F64, buf.d, q, stride, b->dt, m);
      for (int64_t j = 0; j < m; j++) {
        if (better_float(b, buf.d[j])) {
          b->found = true;
          b->f = buf.d[j];
          b->index = k + off + j;
          b->where = q + j * stride;
        }
      }
    } else {
      cpu_load(CPU_KIND_I64, buf.i, q, stride, b->dt, m);
      for (int64_t j = 0; j < m; j++) {
        if (better_int(b, buf.i[j])) {
          b->found = true;
          b->i = buf.i[j];
          b->index = k + off + j;
          b->where = q + j * stride;
        }
      }
    }
  }
}

/* Combines a later block's best into an earlier one's (ties keep earlier). */
static void best_merge(best *into, const best *later) {
  if (!later->found) return;
  bool take = into->floating ? better_float(into, later->f) : better_int(into, later->i);
  if (take) *into = *later;
}

typedef struct index_job {
  const cpu_reduce_geom *g;
  bool is_max;
  lt_dtype dt;
  lt_tensor *values, *indices;
  int64_t index_base;
  best *partials;
  int64_t block;
} index_job;

static void write_best(const index_job *job, const best *b, int64_t o) {
  if (job->values) {
    const size_t es = lt_dtype_size(job->dt);
    memcpy((char *)lt_data(job->values) + o * (int64_t)es, b->where, es);
  }
  if (job->indices) {
    int64_t *idx = lt_data(job->indices);
    idx[o] = b->index + job->index_base;
  }
}

static void index_outputs(void *vjob, int64_t begin, int64_t end) {
  const index_job *job = vjob;
  const cpu_reduce_geom *g = job->g;
  for (int64_t o = begin; o < end; o++) {
    best b;
    best_init(&b, job->is_max, job->dt);
    cpu_dims_walk(&g->reduced, g->base + cpu_dims_offset(&g->kept, o), 0, g->reduced.numel,
                  best_run, &b);
    write_best(job, &b, o);
  }
}

static void index_blocks(void *vjob, int64_t begin, int64_t end) {
  const index_job *job = vjob;
  const cpu_reduce_geom *g = job->g;
  for (int64_t blk = begin; blk < end; blk++) {
    best *b = &job->partials[blk];
    best_init(b, job->is_max, job->dt);
    int64_t lo = blk * job->block, hi = lo + job->block;
    if (hi > g->reduced.numel) hi = g->reduced.numel;
    cpu_dims_walk(&g->reduced, g->base, lo, hi, best_run, b);
  }
}

lt_status cpu_reduce_index(bool is_max, lt_tensor *values, lt_tensor *indices,
                           const lt_tensor *in, int dim, int64_t index_base) {
  bool reduced[LT_MAX_DIMS];
  for (int d = 0; d < in->ndim; d++) reduced[d] = dim < 0 || d == dim;
  cpu_reduce_geom g;
  cpu_reduce_geom_init(&g, in, reduced);
  index_job job = {&g, is_max, in->dtype, values, indices, index_base, NULL, 0};
  const int64_t nout = g.kept.numel, rsize = g.reduced.numel;
  if (nout == 0 || rsize == 0) return LT_OK;

  if (nout == 1 && rsize > CPU_REDUCE_MIN_BLOCK) {
    best partials[CPU_REDUCE_MAX_BLOCKS];
    int64_t nblocks;
    job.block = cpu_reduce_block_size(rsize, &nblocks);
    job.partials = partials;
    lt_parallel_for(nblocks, 2, index_blocks, &job);
    for (int64_t b = 1; b < nblocks; b++) best_merge(&partials[0], &partials[b]);
    write_best(&job, &partials[0], 0);
    return LT_OK;
  }
  int64_t grain = 32768 / rsize;
  if (grain < 1) grain = 1;
  lt_parallel_for(nout, grain, index_outputs, &job);
  return LT_OK;
}
