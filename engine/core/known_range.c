/* Known ranges of int64 storages (core/known_range.h). */
#include <stdlib.h>

#include "core/known_range.h"
#include "lt/threads.h"

/* t's elements are exactly its storage's, in order. */
static bool covers_storage(const lt_tensor *t) {
  return t->dtype == LT_INT64 && t->offset == 0 && lt_is_contiguous(t) &&
         (size_t)lt_numel(t) * sizeof(int64_t) == t->storage->nbytes;
}

static void note_bounds(const lt_tensor *t, const lt_index_bounds *b) {
  if (!covers_storage(t) || b->lo > b->hi) return;
  lt_storage *s = t->storage;
  s->range_known = true;
  s->range = *b;
  s->range_version = s->version;
}

void lt_known_range_note(const lt_tensor *t, int64_t lo, int64_t hi) {
  /* Bounds alone: the rests are known only to lie within them too. */
  const lt_index_bounds b = {lo, hi, {lo, lo}, {hi, hi}};
  note_bounds(t, &b);
}

/* The storage's bounds, when they are still valid for an int64 view of it;
 * NULL otherwise. */
static const lt_index_bounds *valid_bounds(const lt_tensor *t) {
  const lt_storage *s = t->storage;
  if (t->dtype != LT_INT64 || !s->range_known || s->range_version != s->version) return NULL;
  return &s->range;
}

/* [a, b] (empty when a > b) inside [lo, hi]. */
static bool inside(int64_t a, int64_t b, int64_t lo, int64_t hi) {
  return a > b || (a >= lo && b <= hi);
}

bool lt_known_range_within(const lt_tensor *t, int64_t lo, int64_t hi) {
  const lt_index_bounds *b = valid_bounds(t);
  return b && inside(b->lo, b->hi, lo, hi);
}

bool lt_known_range_within_except(const lt_tensor *t, int64_t lo, int64_t hi, int64_t except) {
  const lt_index_bounds *b = valid_bounds(t);
  if (!b) return false;
  if (inside(b->lo, b->hi, lo, hi)) return true;
  /* Every element is the end value `except` or one of the rest. */
  if (except == b->lo && inside(b->rest_lo[0], b->rest_hi[0], lo, hi)) return true;
  return except == b->hi && inside(b->rest_lo[1], b->rest_hi[1], lo, hi);
}

void lt_known_range_inherit(const lt_tensor *dst, const lt_tensor *src) {
  /* A copy or a gather holds some of src's elements: every bound still holds. */
  const lt_index_bounds *b = valid_bounds(src);
  if (b) note_bounds(dst, b);
}

/* One pass over v[begin, end): bounds of everything, or (rest) of the
 * elements other than lo and other than hi. */
static void scan_part(const int64_t *v, int64_t begin, int64_t end, bool rest,
                      lt_index_bounds *b) {
  for (int64_t i = begin; i < end; i++) {
    if (!rest) {
      b->lo = v[i] < b->lo ? v[i] : b->lo;
      b->hi = v[i] > b->hi ? v[i] : b->hi;
      continue;
    }
    if (v[i] != b->lo) {
      b->rest_lo[0] = v[i] < b->rest_lo[0] ? v[i] : b->rest_lo[0];
      b->rest_hi[0] = v[i] > b->rest_hi[0] ? v[i] : b->rest_hi[0];
    }
    if (v[i] != b->hi) {
      b->rest_lo[1] = v[i] < b->rest_lo[1] ? v[i] : b->rest_lo[1];
      b->rest_hi[1] = v[i] > b->rest_hi[1] ? v[i] : b->rest_hi[1];
    }
  }
}

/* Large tensors (a dataset's token ids moved to a device) are scanned in
 * parts on the thread pool; each part's bounds are merged after. */
#define SCAN_PART ((int64_t)1 << 20)
#define SCAN_PARTS_MAX 1024

typedef struct scan_job {
  const int64_t *v;
  int64_t n;
  bool rest;
  lt_index_bounds parts[SCAN_PARTS_MAX];
} scan_job;

static void scan_parts(void *ctx, int64_t p0, int64_t p1) {
  scan_job *j = ctx;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t begin = p * j->n / SCAN_PARTS_MAX, end = (p + 1) * j->n / SCAN_PARTS_MAX;
    scan_part(j->v, begin, end, j->rest, &j->parts[p]);
  }
}

static void merge(lt_index_bounds *into, const lt_index_bounds *part) {
  into->lo = part->lo < into->lo ? part->lo : into->lo;
  into->hi = part->hi > into->hi ? part->hi : into->hi;
  for (int k = 0; k < 2; k++) {
    into->rest_lo[k] = part->rest_lo[k] < into->rest_lo[k] ? part->rest_lo[k] : into->rest_lo[k];
    into->rest_hi[k] = part->rest_hi[k] > into->rest_hi[k] ? part->rest_hi[k] : into->rest_hi[k];
  }
}

/* Both passes over v[0, n) into b (b->lo/hi start at v[0], the rests empty). */
static void scan_all(const int64_t *v, int64_t n, lt_index_bounds *b) {
  /* Small tensors, or no room for the parts: one thread. */
  scan_job *j = n < SCAN_PART * 4 ? NULL : malloc(sizeof *j);
  if (!j) {
    scan_part(v, 0, n, false, b);
    if (b->lo < b->hi) scan_part(v, 0, n, true, b);
    return;
  }
  j->v = v, j->n = n;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && b->lo >= b->hi) break;
    j->rest = pass == 1;
    for (int p = 0; p < SCAN_PARTS_MAX; p++) j->parts[p] = *b; /* the rests read lo and hi */
    lt_parallel_for(SCAN_PARTS_MAX, 1, scan_parts, j);
    for (int p = 0; p < SCAN_PARTS_MAX; p++) merge(b, &j->parts[p]);
  }
  free(j);
}

void lt_known_range_scan(const lt_tensor *t, const int64_t *v, int64_t n) {
  if (n <= 0 || !covers_storage(t)) return;
  /* The rests: [0] the elements above lo, [1] those below hi (empty when
   * every element is the same). */
  lt_index_bounds b = {v[0], v[0], {INT64_MAX, INT64_MAX}, {INT64_MIN, INT64_MIN}};
  scan_all(v, n, &b);
  note_bounds(t, &b);
}
