/* gather and scatter along a dim on the CPU. Both walk the positions p of
 * index; each reads or writes the tensor that lies at p itself (gather's
 * out, scatter's src) and the one addressed through the index (gather's in,
 * scatter's out at p with p[dim] = index[p] - base).
 *
 * The work is split into lines: the positions that differ only along dim.
 * Two positions can hit the same target only when they share every other
 * coordinate, i.e. lie on one line, so lines run in parallel and each is
 * walked in order along dim: a repeated target is written in index's
 * row-major order (the last write wins, adds happen in that order) whatever
 * the thread count, which is the order the CUDA kernel keeps too. */
#include <string.h>

#include "core/half.h"
#include "cpu/cpu_index.h"
#include "lt/threads.h"

/* Positions per thread chunk below which a walk stays on one thread. */
#define WALK_GRAIN 32768

typedef struct walk_job {
  bool scatter, add;
  int ndim, dim;
  lt_dtype dt;
  size_t es;
  int64_t base;
  int64_t shape[LT_MAX_DIMS]; /* index's */
  int64_t istride[LT_MAX_DIMS], astride[LT_MAX_DIMS], bstride[LT_MAX_DIMS];
  const char *index;
  char *a, *b; /* a: the tensor at p (src, or gather's out); b: through the index */
} walk_job;

/* x += y for one element of dt, rounded to dt after the add (as PyTorch's
 * CPU scatter_add, which adds in the element type); integers wrap. */
static void add_element(lt_dtype dt, char *x, const char *y) {
  switch (dt) {
    case LT_FLOAT32: {
      float u, v;
      memcpy(&u, x, 4), memcpy(&v, y, 4);
      u += v;
      memcpy(x, &u, 4);
      break;
    }
    case LT_FLOAT64: {
      double u, v;
      memcpy(&u, x, 8), memcpy(&v, y, 8);
      u += v;
      memcpy(x, &u, 8);
      break;
    }
    case LT_FLOAT16: {
      uint16_t u, v;
      memcpy(&u, x, 2), memcpy(&v, y, 2);
      u = lt_f32_to_f16(lt_f16_to_f32(u) + lt_f16_to_f32(v));
      memcpy(x, &u, 2);
      break;
    }
    case LT_BFLOAT16: {
      uint16_t u, v;
      memcpy(&u, x, 2), memcpy(&v, y, 2);
      u = lt_f32_to_bf16(lt_bf16_to_f32(u) + lt_bf16_to_f32(v));
      memcpy(x, &u, 2);
      break;
    }
    case LT_INT64: { /* unsigned: wraps, never overflows */
      uint64_t u, v;
      memcpy(&u, x, 8), memcpy(&v, y, 8);
      u += v;
      memcpy(x, &u, 8);
      break;
    }
    case LT_INT32: {
      uint32_t u, v;
      memcpy(&u, x, 4), memcpy(&v, y, 4);
      u += v;
      memcpy(x, &u, 4);
      break;
    }
    case LT_UINT8: *(uint8_t *)x = (uint8_t)(*(uint8_t *)x + *(const uint8_t *)y); break;
    default: *(uint8_t *)x = (*(uint8_t *)x | *(const uint8_t *)y) != 0; break; /* bool: or */
  }
}

static void walk_lines(void *ctx, int64_t begin, int64_t end) {
  const walk_job *job = ctx;
  const int dim = job->dim;
  const int64_t len = job->shape[dim];
  const size_t es = job->es;
  for (int64_t line = begin; line < end; line++) {
    /* The line's coordinates in the other dims, last dim fastest. */
    int64_t rest = line, io = 0, ao = 0, bo = 0;
    for (int d = job->ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      const int64_t c = rest % job->shape[d];
      rest /= job->shape[d];
      io += c * job->istride[d];
      ao += c * job->astride[d];
      bo += c * job->bstride[d];
    }
    for (int64_t j = 0; j < len; j++) {
      int64_t v;
      memcpy(&v, job->index + (size_t)(io + j * job->istride[dim]) * sizeof v, sizeof v);
      char *a = job->a + (ao + j * job->astride[dim]) * (int64_t)es;
      char *b = job->b + (bo + (v - job->base) * job->bstride[dim]) * (int64_t)es;
      if (!job->scatter)
        memcpy(a, b, es);
      else if (job->add)
        add_element(job->dt, b, a);
      else
        memcpy(b, a, es);
    }
  }
}

static lt_status run(walk_job *job, const lt_tensor *index) {
  const int64_t numel = lt_numel(index);
  if (numel == 0) return LT_OK;
  job->ndim = index->ndim;
  for (int d = 0; d < index->ndim; d++) {
    job->shape[d] = index->shape[d];
    job->istride[d] = index->stride[d];
  }
  job->index = lt_data(index);
  const int64_t len = job->shape[job->dim], lines = numel / len;
  const int64_t grain = WALK_GRAIN / len;
  lt_parallel_for(lines, grain > 0 ? grain : 1, walk_lines, job);
  return LT_OK;
}

lt_status cpu_gather(lt_tensor *out, const lt_tensor *in, int dim, const lt_tensor *index,
                     int64_t base) {
  walk_job job = {.scatter = false, .dim = dim, .dt = in->dtype, .es = lt_dtype_size(in->dtype),
                  .base = base, .a = lt_data(out), .b = lt_data(in)};
  for (int d = 0; d < index->ndim; d++) {
    job.astride[d] = out->stride[d];
    job.bstride[d] = in->stride[d];
  }
  return run(&job, index);
}

lt_status cpu_scatter(bool add, lt_tensor *out, int dim, const lt_tensor *index, int64_t base,
                      const lt_tensor *src, lt_scalar value) {
  /* A number src is one element of out's dtype read at every position. */
  uint64_t element = 0;
  if (!src) {
    if (lt_dtype_is_integral(out->dtype)) lt_store_int64(&element, out->dtype, value.i);
    else lt_store_double(&element, out->dtype, value.f); /* floats, and bool: != 0 */
  }
  walk_job job = {.scatter = true, .add = add, .dim = dim, .dt = out->dtype,
                  .es = lt_dtype_size(out->dtype), .base = base,
                  .a = src ? lt_data(src) : (char *)&element, .b = lt_data(out)};
  for (int d = 0; d < index->ndim; d++) {
    job.astride[d] = src ? src->stride[d] : 0;
    job.bstride[d] = out->stride[d];
  }
  return run(&job, index);
}
