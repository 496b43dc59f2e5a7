/* sum, mean and prod over any set of dims. Floating inputs accumulate in
 * double, integers and bool in int64 (wrapping). Each output element is
 * reduced by one thread in a fixed order; a single output over many elements
 * is split into fixed blocks whose partials are combined in block order, so
 * results are bitwise the same for any thread count. */
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_convert.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_reduce_geom.h"
#include "lt/threads.h"

/* ---- the sum or product of one run ---- */

/* Eight independent lanes let the compiler vectorise and keep the summation
 * order fixed (it depends only on n). */
#define LANE_SUM(ACC, EXPR_I)                                                   \
  do {                                                                          \
    ACC lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                     \
    int64_t i = 0;                                                              \
    for (; i + 8 <= n; i += 8)                                                  \
      for (int j = 0; j < 8; j++) lane[j] += (ACC)(EXPR_I(i + j));              \
    ACC tail = 0;                                                               \
    for (; i < n; i++) tail += (ACC)(EXPR_I(i));                                \
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +                        \
           ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;                  \
  } while (0)

/* float32 runs, the common case (a loss's sum, sum() before backward): 32 double lanes,
 * four AVX-512 registers, so that the adds do not wait on each other's latency, in the
 * clones' vector widths; the lanes are added pairwise in a fixed order. */
#define FLOAT_LANES 32
LT_CPU_CLONES static double sum_floats(const float *p, int64_t n) {
  double lane[FLOAT_LANES] = {0};
  int64_t i = 0;
  for (; i + FLOAT_LANES <= n; i += FLOAT_LANES)
    for (int j = 0; j < FLOAT_LANES; j++) lane[j] += (double)p[i + j];
  double tail = 0;
  for (; i < n; i++) tail += (double)p[i];
  for (int w = FLOAT_LANES / 2; w > 0; w /= 2)
    for (int j = 0; j < w; j++) lane[j] += lane[j + w];
  return lane[0] + tail;
}

static double sum_doubles(const double *p, int64_t n) {
#define AT_I(i) p[i]
  LANE_SUM(double, AT_I);
#undef AT_I
}

static uint64_t sum_int64s(const int64_t *p, int64_t n) {
#define AT_I(i) (uint64_t) p[i]
  LANE_SUM(uint64_t, AT_I);
#undef AT_I
}

typedef struct accum {
  bool floating;
  lt_reduce_op op;
  lt_dtype dt;
  double f;   /* floating accumulator */
  uint64_t i; /* integer accumulator (unsigned: wraps) */
} accum;

static void accum_init(accum *a, lt_reduce_op op, lt_dtype dt) {
  a->floating = lt_dtype_is_floating(dt);
  a->op = op;
  a->dt = dt;
  a->f = op == LT_REDUCE_PROD ? 1.0 : 0.0;
  a->i = op == LT_REDUCE_PROD ? 1 : 0;
}

static void accum_run(void *vacc, const char *p, int64_t stride, int64_t n, int64_t k) {
  (void)k;
  accum *a = vacc;
  const int64_t es = (int64_t)lt_dtype_size(a->dt);
  if (a->op != LT_REDUCE_PROD && stride == es && a->dt == LT_FLOAT32) {
    a->f += sum_floats((const float *)(const void *)p, n);
    return;
  }
  if (a->op != LT_REDUCE_PROD && stride == es && a->dt == LT_FLOAT64) {
    a->f += sum_doubles((const double *)(const void *)p, n);
    return;
  }
  union { double d[CPU_BUF]; int64_t i[CPU_BUF]; } buf;
  for (int64_t off = 0; off < n; off += CPU_BUF) {
    const int64_t m = n - off < CPU_BUF ? n - off : CPU_BUF;
    cpu_load(a->floating ? CPU_KIND_F64 : CPU_KIND_I64, &buf, p + off * stride, stride, a->dt, m);
    if (a->op == LT_REDUCE_PROD) {
      if (a->floating)
        for (int64_t i = 0; i < m; i++) a->f *= buf.d[i];
      else
        for (int64_t i = 0; i < m; i++) a->i *= (uint64_t)buf.i[i];
    } else if (a->floating) {
      a->f += sum_doubles(buf.d, m);
    } else {
      a->i += sum_int64s(buf.i, m);
    }
  }
}

static void accum_merge(accum *into, const accum *part) {
  if (into->op == LT_REDUCE_PROD) {
    into->f *= part->f;
    into->i *= part->i;
  } else {
    into->f += part->f;
    into->i += part->i;
  }
}

static void store_result(const accum *a, lt_tensor *out, int64_t o, int64_t count) {
  char *dst = (char *)lt_data(out) + o * (int64_t)lt_dtype_size(out->dtype);
  if (!a->floating) {
    lt_store_int64(dst, out->dtype, (int64_t)a->i);
    return;
  }
  double v = a->f;
  if (a->op == LT_REDUCE_MEAN) v = count > 0 ? v / (double)count : NAN;
  lt_store_double(dst, out->dtype, v);
}

/* ---- many outputs: one per thread-loop index ---- */

typedef struct reduce_job {
  lt_reduce_op op;
  const cpu_reduce_geom *g;
  lt_tensor *out;
  lt_dtype dt;
  accum *partials; /* single output: one per block */
  int64_t block;
} reduce_job;

static void reduce_outputs(void *vjob, int64_t begin, int64_t end) {
  const reduce_job *job = vjob;
  const cpu_reduce_geom *g = job->g;
  for (int64_t o = begin; o < end; o++) {
    accum a;
    accum_init(&a, job->op, job->dt);
    const char *base = g->base + cpu_dims_offset(&g->kept, o);
    cpu_dims_walk(&g->reduced, base, 0, g->reduced.numel, accum_run, &a);
    store_result(&a, job->out, o, g->reduced.numel);
  }
}

static void reduce_blocks(void *vjob, int64_t begin, int64_t end) {
  const reduce_job *job = vjob;
  const cpu_reduce_geom *g = job->g;
  for (int64_t b = begin; b < end; b++) {
    accum *a = &job->partials[b];
    accum_init(a, job->op, job->dt);
    int64_t lo = b * job->block, hi = lo + job->block;
    if (hi > g->reduced.numel) hi = g->reduced.numel;
    cpu_dims_walk(&g->reduced, g->base, lo, hi, accum_run, a);
  }
}

/* ---- reducing outer dims of rows (sum over dim 0 of a matrix) ----
 * Walking each output's reduced elements would stride through memory, so
 * tiles of adjacent outputs are accumulated together, one input row at a
 * time; each output still sums its elements in the same order. */

#define COLUMN_TILE 256

typedef struct column_job {
  lt_reduce_op op;
  const cpu_reduce_geom *g;
  lt_tensor *out;
  lt_dtype dt;
  cpu_dims outer;     /* the kept dims except the innermost */
  int64_t inner;      /* size of the innermost kept dim (stride: one element) */
  int64_t tiles_per_row;
} column_job;

typedef struct column_tile {
  const column_job *job;
  int64_t width;
  bool floating;
  double f[COLUMN_TILE];
  uint64_t i[COLUMN_TILE];
} column_tile;

static void column_row(void *vtile, const char *p, int64_t stride, int64_t n, int64_t k) {
  (void)k;
  column_tile *t = vtile;
  const lt_reduce_op op = t->job->op;
  const lt_dtype dt = t->job->dt;
  union { double d[COLUMN_TILE]; int64_t i[COLUMN_TILE]; } buf;
  for (int64_t r = 0; r < n; r++) {
    const char *row = p + r * stride;
    if (t->floating) {
      const double *x = buf.d;
      if (dt == LT_FLOAT32 && op != LT_REDUCE_PROD) {
        const float *xf = (const float *)(const void *)row;
        for (int64_t j = 0; j < t->width; j++) t->f[j] += xf[j];
        continue;
      }
      cpu_load(CPU_KIND_F64, buf.d, row, (int64_t)lt_dtype_size(dt), dt, t->width);
      if (op == LT_REDUCE_PROD)
        for (int64_t j = 0; j < t->width; j++) t->f[j] *= x[j];
      else
        for (int64_t j = 0; j < t->width; j++) t->f[j] += x[j];
    } else {
      cpu_load(CPU_KIND_I64, buf.i, row, (int64_t)lt_dtype_size(dt), dt, t->width);
      if (op == LT_REDUCE_PROD)
        for (int64_t j = 0; j < t->width; j++) t->i[j] *= (uint64_t)buf.i[j];
      else
        for (int64_t j = 0; j < t->width; j++) t->i[j] += (uint64_t)buf.i[j];
    }
  }
}

static void reduce_column_tiles(void *vjob, int64_t begin, int64_t end) {
  const column_job *job = vjob;
  const cpu_reduce_geom *g = job->g;
  const int64_t es = (int64_t)lt_dtype_size(job->dt);
  column_tile tile;
  tile.job = job;
  tile.floating = lt_dtype_is_floating(job->dt);
  for (int64_t tix = begin; tix < end; tix++) {
    const int64_t outer = tix / job->tiles_per_row;
    const int64_t col0 = (tix % job->tiles_per_row) * COLUMN_TILE;
    tile.width = job->inner - col0 < COLUMN_TILE ? job->inner - col0 : COLUMN_TILE;
    const double f0 = job->op == LT_REDUCE_PROD ? 1.0 : 0.0;
    const uint64_t i0 = job->op == LT_REDUCE_PROD ? 1 : 0;
    for (int64_t j = 0; j < tile.width; j++) tile.f[j] = f0, tile.i[j] = i0;
    const char *base = g->base + cpu_dims_offset(&job->outer, outer) + col0 * es;
    cpu_dims_walk(&g->reduced, base, 0, g->reduced.numel, column_row, &tile);
    for (int64_t j = 0; j < tile.width; j++) {
      accum a;
      accum_init(&a, job->op, job->dt);
      a.f = tile.f[j];
      a.i = tile.i[j];
      store_result(&a, job->out, outer * job->inner + col0 + j, g->reduced.numel);
    }
  }
}

/* Whether outputs are adjacent in memory while each one's elements are not:
 * the innermost kept dim is contiguous and the reduced dims lie outside it. */
static bool column_layout(const cpu_reduce_geom *g, int64_t es) {
  if (g->kept.ndim == 0 || g->reduced.ndim == 0) return false;
  if (g->kept.stride[g->kept.ndim - 1] != es) return false;
  return g->reduced.stride[g->reduced.ndim - 1] != es && g->kept.shape[g->kept.ndim - 1] >= 8;
}

static void reduce_columns(lt_reduce_op op, const cpu_reduce_geom *g, lt_tensor *out,
                           lt_dtype dt) {
  column_job job;
  job.op = op;
  job.g = g;
  job.out = out;
  job.dt = dt;
  job.outer = g->kept;
  job.outer.ndim--;
  job.inner = g->kept.shape[g->kept.ndim - 1];
  job.outer.numel = g->kept.numel / job.inner;
  job.tiles_per_row = (job.inner + COLUMN_TILE - 1) / COLUMN_TILE;
  const int64_t ntiles = job.outer.numel * job.tiles_per_row;
  int64_t grain = 32768 / (g->reduced.numel * COLUMN_TILE);
  lt_parallel_for(ntiles, grain > 0 ? grain : 1, reduce_column_tiles, &job);
}

lt_status cpu_reduce(lt_reduce_op op, lt_tensor *out, const lt_tensor *in, const bool *reduced) {
  cpu_reduce_geom g;
  cpu_reduce_geom_init(&g, in, reduced);
  reduce_job job = {op, &g, out, in->dtype, NULL, 0};
  const int64_t nout = g.kept.numel, rsize = g.reduced.numel;
  if (nout == 0) return LT_OK;

  if (nout == 1 && rsize > CPU_REDUCE_MIN_BLOCK) {
    accum partials[CPU_REDUCE_MAX_BLOCKS];
    int64_t nblocks;
    job.block = cpu_reduce_block_size(rsize, &nblocks);
    job.partials = partials;
    lt_parallel_for(nblocks, 2, reduce_blocks, &job);
    accum total;
    accum_init(&total, op, in->dtype);
    for (int64_t b = 0; b < nblocks; b++) accum_merge(&total, &partials[b]);
    store_result(&total, out, 0, rsize);
    return LT_OK;
  }
  if (column_layout(&g, (int64_t)lt_dtype_size(in->dtype)) && rsize > 0) {
    reduce_columns(op, &g, out, in->dtype);
    return LT_OK;
  }
  /* Enough outputs per task that each task reads about a grain of input. */
  int64_t grain = rsize > 0 ? 32768 / rsize : 32768;
  if (grain < 1) grain = 1;
  lt_parallel_for(nout, grain, reduce_outputs, &job);
  return LT_OK;
}
