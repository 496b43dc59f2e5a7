/* sort and topk on the CPU: every slice along dim is sorted on its own as
 * (key, position) pairs. The keys are the values mapped to unsigned
 * integers whose order is the wanted one (core/sort_key.h, shared with the
 * CUDA kernel), so one comparison serves every dtype, NaN and -0.0; pairs
 * compare by key, then position, so all are distinct and there is exactly
 * one sorted order, the stable one, whatever the algorithm.
 *
 * A bottom-up merge sort orders a slice. For topk with k well below the
 * slice's size, a quickselect first moves the k smallest pairs to the
 * front (linear on average; after too many rounds, which only crafted data
 * causes, it gives way to the full sort) and only those are merge sorted.
 * Slices are split among the threads in fixed contiguous ranges, each task
 * with its own scratch from the caching allocator. */
#include <string.h>

#include "core/half.h"
#include "core/sort_key.h"
#include "cpu/cpu_index.h"
#include "lt/alloc.h"
#include "lt/threads.h"

typedef struct pair {
  uint64_t key;
  int64_t pos;
} pair;

static inline bool less(pair a, pair b) {
  return a.key < b.key || (a.key == b.key && a.pos < b.pos);
}

typedef struct sort_job {
  const char *in;
  char *values;
  int64_t *indices;
  lt_dtype dt;
  size_t es;
  int64_t size, k, inner, slices, tasks;
  bool descending;
  int64_t base;
  pair *scratch; /* 2 * size pairs per task */
} sort_job;

static uint64_t key_at(const sort_job *job, const char *p) {
  switch (job->dt) {
    case LT_FLOAT32: { float f; memcpy(&f, p, 4); return lt_sort_key_f32(f); }
    case LT_FLOAT64: { double d; memcpy(&d, p, 8); return lt_sort_key_f64(d); }
    case LT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return lt_sort_key_f32(lt_f16_to_f32(h)); }
    case LT_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return lt_sort_key_f32(lt_bf16_to_f32(h)); }
    case LT_INT64: { int64_t v; memcpy(&v, p, 8); return lt_sort_key_i64(v); }
    case LT_INT32: { int32_t v; memcpy(&v, p, 4); return lt_sort_key_i64(v); }
    default: return *(const uint8_t *)p; /* uint8, bool */
  }
}

/* Sorts a[0..n) using tmp (n pairs); the result ends in a or tmp, which is
 * returned. Runs of 8 are first sorted by insertion. */
static pair *merge_sort(pair *a, pair *tmp, int64_t n) {
  const int64_t RUN = 8;
  for (int64_t s = 0; s < n; s += RUN) {
    int64_t e = s + RUN < n ? s + RUN : n;
    for (int64_t i = s + 1; i < e; i++) {
      pair v = a[i];
      int64_t j = i;
      while (j > s && less(v, a[j - 1])) a[j] = a[j - 1], j--;
      a[j] = v;
    }
  }
  pair *from = a, *to = tmp;
  for (int64_t width = RUN; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n;
      int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) to[o++] = less(from[j], from[i]) ? from[j++] : from[i++];
      while (i < mid) to[o++] = from[i++];
      while (j < hi) to[o++] = from[j++];
    }
    pair *swap = from;
    from = to;
    to = swap;
  }
  return from;
}

static inline void swap_pairs(pair *a, int64_t i, int64_t j) {
  pair t = a[i];
  a[i] = a[j];
  a[j] = t;
}

/* Moves the k smallest of a[0..n) (0 < k < n) to a[0..k), in no order:
 * Hoare partitions around a median of three, keeping the side that holds
 * place k - 1. False when it gave up after too many rounds. */
static bool select_smallest(pair *a, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1, rounds = 0, limit = 8;
  for (int64_t m = n; m > 1; m >>= 1) limit += 2;
  while (hi > lo) {
    if (++rounds > limit) return false;
    const int64_t mid = lo + (hi - lo) / 2;
    if (less(a[mid], a[lo])) swap_pairs(a, mid, lo);
    if (less(a[hi], a[lo])) swap_pairs(a, hi, lo);
    if (less(a[hi], a[mid])) swap_pairs(a, hi, mid);
    const pair pivot = a[mid];
    int64_t i = lo, j = hi;
    while (i <= j) {
      while (less(a[i], pivot)) i++;
      while (less(pivot, a[j])) j--;
      if (i <= j) swap_pairs(a, i++, j--);
    }
    if (k - 1 <= j) hi = j;      /* place k - 1 lies in [lo, j] */
    else if (k - 1 >= i) lo = i; /* or in [i, hi] */
    else break;                  /* or between them: the pivot itself, in place */
  }
  return true;
}

static void sort_tasks(void *ctx, int64_t begin, int64_t end) {
  const sort_job *job = ctx;
  const int64_t n = job->size, k = job->k;
  for (int64_t task = begin; task < end; task++) {
    pair *a = job->scratch + task * 2 * n, *tmp = a + n;
    const int64_t first = task * job->slices / job->tasks;
    const int64_t last = (task + 1) * job->slices / job->tasks;
    for (int64_t s = first; s < last; s++) {
      /* slice s = (outer o, inner i): element j at (o * size + j) * inner + i,
       * written at (o * k + j) * inner + i */
      const int64_t o = s / job->inner, i = s % job->inner;
      const int64_t start = o * n * job->inner + i, out_start = o * k * job->inner + i;
      for (int64_t j = 0; j < n; j++) {
        uint64_t key = key_at(job, job->in + (size_t)(start + j * job->inner) * job->es);
        a[j].key = job->descending ? ~key : key;
        a[j].pos = j;
      }
      const pair *sorted;
      if (k < n / 4 && select_smallest(a, n, k)) sorted = merge_sort(a, tmp, k);
      else sorted = merge_sort(a, tmp, n);
      for (int64_t j = 0; j < k; j++) {
        const int64_t at = out_start + j * job->inner;
        if (job->values)
          memcpy(job->values + (size_t)at * job->es,
                 job->in + (size_t)(start + sorted[j].pos * job->inner) * job->es, job->es);
        if (job->indices) job->indices[at] = sorted[j].pos + job->base;
      }
    }
  }
}

lt_status cpu_sort(lt_tensor *values, lt_tensor *indices, const lt_tensor *in, int dim,
                   bool descending, int64_t k, int64_t index_base) {
  int64_t inner = 1;
  for (int d = dim + 1; d < in->ndim; d++) inner *= in->shape[d];
  const int64_t size = in->shape[dim], numel = lt_numel(in);
  if (numel == 0 || k == 0) return LT_OK;
  const int64_t slices = numel / size;
  /* A task per thread at most, and none smaller than about 32k elements. */
  int64_t tasks = lt_get_num_threads();
  const int64_t by_work = numel / 32768 + 1;
  if (tasks > by_work) tasks = by_work;
  if (tasks > slices) tasks = slices;
  void *scratch;
  lt_block *block;
  LT_TRY(lt_alloc(lt_cpu(), (size_t)(tasks * 2 * size) * sizeof(pair), LT_CAT_WORKSPACE, &scratch,
                  &block));
  sort_job job = {lt_data(in),
                  values ? lt_data(values) : NULL,
                  indices ? lt_data(indices) : NULL,
                  in->dtype,
                  lt_dtype_size(in->dtype),
                  size,
                  k,
                  inner,
                  slices,
                  tasks,
                  descending,
                  index_base,
                  scratch};
  lt_parallel_for(tasks, 1, sort_tasks, &job);
  lt_free(block);
  return LT_OK;
}
