/* Known ranges of int64 storages (core/known_range.h): what notes a range,
 * what inherits it and what invalidates it. On a device these let a label
 * check skip the copy to the host; the bookkeeping itself is device-free and
 * is checked here on the CPU. */
#include "check.h"
#include "core/known_range.h"
#include "lt/index.h"
#include "lt/lt.h"
#include "tensor_helpers.h"

static lt_tensor *int64_vector(const int64_t *v, int64_t n) {
  lt_tensor *t = NULL;
  CHECK(lt_from_buffer(v, LT_INT64, &n, 1, LT_INT64, lt_cpu(), &t) == LT_OK);
  return t;
}

static void test_note_and_within(void) {
  const int64_t v[] = {3, 0, 7, 2};
  lt_tensor *t = int64_vector(v, 4);
  CHECK(!lt_known_range_within(t, 0, 9)); /* nothing noted yet */
  lt_known_range_scan(t, lt_data(t), 4);
  CHECK(lt_known_range_within(t, 0, 9));
  CHECK(lt_known_range_within(t, 0, 7));
  CHECK(!lt_known_range_within(t, 0, 6)); /* 7 would be out */
  CHECK(!lt_known_range_within(t, 1, 9)); /* 0 would be out */
  lt_tensor_release(t);
}

static void test_partial_views_note_nothing(void) {
  const int64_t v[] = {3, 0, 7, 2};
  lt_tensor *t = int64_vector(v, 4), *part = NULL;
  CHECK(lt_narrow(t, 0, 1, 2, &part) == LT_OK);
  /* part's values say nothing of the storage's other elements */
  lt_known_range_scan(part, lt_data(part), 2);
  CHECK(!lt_known_range_within(t, -100, 100));
  /* a whole-storage note holds for every view of it */
  lt_known_range_note(t, 0, 7);
  CHECK(lt_known_range_within(part, 0, 7));
  lt_tensor_release(part);
  lt_tensor_release(t);
}

static void test_writes_invalidate(void) {
  const int64_t v[] = {1, 2, 3};
  lt_tensor *t = int64_vector(v, 3);
  lt_known_range_note(t, 1, 3);
  CHECK(lt_fill_(t, 50.0) == LT_OK); /* an in-place write bumps the version */
  CHECK(!lt_known_range_within(t, 1, 3));
  CHECK(!lt_known_range_within(t, -1000, 1000)); /* unknown, not merely wider */
  lt_tensor_release(t);
}

static void test_copies_and_gathers_inherit(void) {
  const int64_t v[] = {4, 9, 5, 6};
  lt_tensor *t = int64_vector(v, 4), *c = NULL, *g = NULL, *idx = NULL, *f = NULL;
  lt_known_range_note(t, 4, 9);
  CHECK(lt_clone(t, &c) == LT_OK);
  CHECK(lt_known_range_within(c, 4, 9));
  const int64_t rows[] = {2, 2};
  idx = int64_vector(rows, 2);
  CHECK(lt_index_select(t, 0, idx, 1, &g) == LT_OK);
  CHECK_EQ_INT(((int64_t *)lt_data(g))[0], 9);
  CHECK(lt_known_range_within(g, 4, 9)); /* a gather keeps the source's range */
  /* a float copy is not an index: no range */
  CHECK(lt_to_dtype(t, LT_FLOAT32, false, &f) == LT_OK);
  CHECK(!f->storage->range_known);
  /* copy_ into a whole tensor passes the range on; into part of one, it
   * leaves the destination's storage unknown */
  lt_tensor *dst = NULL, *part = NULL;
  CHECK(lt_empty((int64_t[]){4}, 1, LT_INT64, lt_cpu(), &dst) == LT_OK);
  CHECK(lt_copy_(dst, t) == LT_OK);
  CHECK(lt_known_range_within(dst, 4, 9));
  CHECK(lt_narrow(dst, 0, 0, 2, &part) == LT_OK);
  CHECK(lt_copy_(part, idx) == LT_OK);
  CHECK(!lt_known_range_within(dst, -1000, 1000));
  lt_tensor_release(part);
  lt_tensor_release(dst);
  /* the source's write does not reach the copies' own storages */
  CHECK(lt_fill_(t, 0.0) == LT_OK);
  CHECK(lt_known_range_within(c, 4, 9));
  lt_tensor *ts[] = {t, c, g, idx, f};
  release_all(ts, 5);
}

/* max_pool2d's indices are bounded by the input plane: the backward skips
 * reading them, until a write makes them unknown and a bad one is caught. */
static void test_pool_indices(void) {
  int64_t shape[] = {1, 2, 4, 4};
  lt_tensor *x = NULL, *out = NULL, *idx = NULL, *gx = NULL;
  CHECK(lt_empty(shape, 4, LT_FLOAT32, lt_cpu(), &x) == LT_OK);
  CHECK(lt_normal_(x, 0.0, 1.0) == LT_OK);
  const lt_pool2d_opts o = lt_pool2d_default_opts(2, 2);
  CHECK(lt_max_pool2d(x, &o, &out, &idx) == LT_OK);
  CHECK(lt_known_range_within(idx, 0, 15));
  CHECK(!lt_known_range_within(idx, 0, 14));
  CHECK(lt_max_pool2d_backward(out, idx, shape, 4, &gx) == LT_OK);
  lt_tensor_release(gx);
  gx = NULL;
  CHECK(lt_fill_(idx, 16.0) == LT_OK);
  CHECK(lt_max_pool2d_backward(out, idx, shape, 4, &gx) == LT_ERR_INDEX && gx == NULL);
  lt_tensor *ts[] = {x, out, idx};
  release_all(ts, 3);
}

/* A special value at either end (ignore_index -100 below the labels, 255
 * above) is skipped by the rests the scan records. */
static void test_except_an_end_value(void) {
  const int64_t below[] = {-100, 3, 5, -100}, above[] = {255, 2, 7}, same[] = {-100, -100};
  lt_tensor *a = int64_vector(below, 4), *b = int64_vector(above, 3), *c = int64_vector(same, 2);
  lt_known_range_scan(a, below, 4);
  lt_known_range_scan(b, above, 3);
  lt_known_range_scan(c, same, 2);
  CHECK(!lt_known_range_within(a, 0, 9));
  CHECK(lt_known_range_within_except(a, 0, 9, -100));
  CHECK(!lt_known_range_within_except(a, 0, 4, -100)); /* 5 is out */
  CHECK(!lt_known_range_within_except(a, 0, 9, -1));   /* -100 is not the one skipped */
  CHECK(lt_known_range_within_except(b, 0, 20, 255));
  CHECK(!lt_known_range_within_except(b, 0, 5, 255)); /* 7 is out */
  CHECK(lt_known_range_within_except(c, 0, 9, -100)); /* every element ignored */
  /* bounds alone (no scan) say nothing of what lies between */
  lt_known_range_note(a, -100, 10);
  CHECK(!lt_known_range_within_except(a, 0, 10, -100));
  lt_known_range_note(a, 1, 10);
  CHECK(lt_known_range_within_except(a, 1, 10, -100));
  lt_tensor *ts[] = {a, b, c};
  release_all(ts, 3);
}

/* A large tensor is scanned in parts on the thread pool: the same bounds. */
static void test_large_scan(void) {
  int64_t n = (int64_t)5 << 20;
  lt_tensor *t = NULL;
  CHECK(lt_empty(&n, 1, LT_INT64, lt_cpu(), &t) == LT_OK);
  int64_t *v = lt_data(t);
  for (int64_t i = 0; i < n; i++) v[i] = i % 1000;
  v[n - 3] = -100; /* the ignored value, near the end of the last part */
  v[7] = -100;
  lt_known_range_scan(t, v, n);
  CHECK(!lt_known_range_within(t, 0, 999));
  CHECK(lt_known_range_within(t, -100, 999));
  CHECK(lt_known_range_within_except(t, 0, 999, -100));
  CHECK(!lt_known_range_within_except(t, 1, 999, -100));
  v[n / 2] = 5000; /* unseen by the note: a direct write, which ops never do */
  lt_known_range_scan(t, v, n);
  CHECK(!lt_known_range_within_except(t, 0, 999, -100));
  CHECK(lt_known_range_within_except(t, -100, 999, 5000));
  lt_tensor_release(t);
}

/* randint_ knows the bounds it drew from. */
static void test_randint_bounds(void) {
  int64_t n = 100;
  lt_tensor *t = NULL;
  CHECK(lt_empty(&n, 1, LT_INT64, lt_cpu(), &t) == LT_OK);
  CHECK(lt_randint_(t, 1, 10) == LT_OK);
  CHECK(lt_known_range_within(t, 1, 10));
  CHECK(!lt_known_range_within(t, 1, 9));
  lt_tensor_release(t);
}

int main(void) {
  const size_t before = allocated_bytes();
  test_note_and_within();
  test_partial_views_note_nothing();
  test_writes_invalidate();
  test_copies_and_gathers_inherit();
  test_pool_indices();
  test_randint_bounds();
  test_except_an_end_value();
  test_large_scan();
  CHECK_EQ_INT(allocated_bytes(), before);
  return check_summary("test_known_range");
}
