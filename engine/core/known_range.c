/* Known ranges of int64 storages (core/known_range.h). */
#include "core/known_range.h"

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

void lt_known_range_scan(const lt_tensor *t, const int64_t *v, int64_t n) {
  if (n <= 0 || !covers_storage(t)) return;
  lt_index_bounds b = {v[0], v[0], {INT64_MAX, INT64_MAX}, {INT64_MIN, INT64_MIN}};
  for (int64_t i = 1; i < n; i++) {
    b.lo = v[i] < b.lo ? v[i] : b.lo;
    b.hi = v[i] > b.hi ? v[i] : b.hi;
  }
  /* The rests: [0] the elements above lo, [1] those below hi (empty when
   * every element is the same). */
  for (int64_t i = 0; b.lo < b.hi && i < n; i++) {
    if (v[i] != b.lo) {
      b.rest_lo[0] = v[i] < b.rest_lo[0] ? v[i] : b.rest_lo[0];
      b.rest_hi[0] = v[i] > b.rest_hi[0] ? v[i] : b.rest_hi[0];
    }
    if (v[i] != b.hi) {
      b.rest_lo[1] = v[i] < b.rest_lo[1] ? v[i] : b.rest_lo[1];
      b.rest_hi[1] = v[i] > b.rest_hi[1] ? v[i] : b.rest_hi[1];
    }
  }
  note_bounds(t, &b);
}
