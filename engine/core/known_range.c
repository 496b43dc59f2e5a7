/* Known ranges of int64 storages (core/known_range.h). */
#include "core/known_range.h"

/* t's elements are exactly its storage's, in order. */
static bool covers_storage(const lt_tensor *t) {
  return t->dtype == LT_INT64 && t->offset == 0 && lt_is_contiguous(t) &&
         (size_t)lt_numel(t) * sizeof(int64_t) == t->storage->nbytes;
}

void lt_known_range_note(const lt_tensor *t, int64_t lo, int64_t hi) {
  if (!covers_storage(t) || lo > hi) return;
  lt_storage *s = t->storage;
  s->range_known = true;
  s->range_min = lo;
  s->range_max = hi;
  s->range_version = s->version;
}

/* The storage's range, when it is still valid for an int64 view of it. */
static bool valid_range(const lt_tensor *t) {
  const lt_storage *s = t->storage;
  return t->dtype == LT_INT64 && s->range_known && s->range_version == s->version;
}

bool lt_known_range_within(const lt_tensor *t, int64_t lo, int64_t hi) {
  if (!valid_range(t)) return false;
  return t->storage->range_min >= lo && t->storage->range_max <= hi;
}

void lt_known_range_inherit(const lt_tensor *dst, const lt_tensor *src) {
  if (valid_range(src)) lt_known_range_note(dst, src->storage->range_min, src->storage->range_max);
}

void lt_known_range_scan(const lt_tensor *t, const int64_t *v, int64_t n) {
  if (n <= 0 || !covers_storage(t)) return;
  int64_t lo = v[0], hi = v[0];
  for (int64_t i = 1; i < n; i++) {
    lo = v[i] < lo ? v[i] : lo;
    hi = v[i] > hi ? v[i] : hi;
  }
  lt_known_range_note(t, lo, hi);
}
