/* The generator: Philox known answers, reproducibility from a seed, the same
 * numbers on any thread count and through any strides, the distributions'
 * moments and ranges, and the argument errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/philox.h"
#include "lt/lt.h"

static lt_tensor *make(int64_t n, lt_dtype dt) {
  lt_tensor *t = NULL;
  CHECK(lt_empty(&n, 1, dt, lt_cpu(), &t) == LT_OK);
  return t;
}

static double at(const lt_tensor *t, int64_t i) {
  return lt_load_double((const char *)lt_data(t) + i * (int64_t)lt_dtype_size(t->dtype), t->dtype);
}

static bool same_bytes(const lt_tensor *a, const lt_tensor *b) {
  return lt_nbytes(a) == lt_nbytes(b) && memcmp(lt_data(a), lt_data(b), lt_nbytes(a)) == 0;
}

/* Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds). */
static void test_philox_known_answers(void) {
  static const struct { uint32_t counter[4], key[2], expected[4]; } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
    uint32_t out[4];
    lt_philox4x32_10(kat[i].counter, kat[i].key, out);
    for (int k = 0; k < 4; k++) CHECK_EQ_INT(out[k], kat[i].expected[k]);
  }
}

static void test_seed_and_state(void) {
  lt_tensor *a = make(1000, LT_FLOAT32), *b = make(1000, LT_FLOAT32);
  lt_manual_seed(42);
  CHECK(lt_uniform_(a, 0, 1) == LT_OK);
  lt_manual_seed(42);
  CHECK(lt_uniform_(b, 0, 1) == LT_OK);
  CHECK(same_bytes(a, b));
  /* The next call draws new numbers. */
  lt_rng_state before = lt_rng_get_state();
  CHECK(lt_uniform_(b, 0, 1) == LT_OK);
  CHECK(!same_bytes(a, b));
  CHECK_EQ_INT(lt_rng_get_state().offset, before.offset + 250); /* 4 floats per block */
  /* Restoring a state replays it. */
  lt_tensor *c = make(1000, LT_FLOAT32);
  lt_rng_set_state(before);
  CHECK(lt_uniform_(c, 0, 1) == LT_OK);
  CHECK(same_bytes(b, c));
  /* Another seed, other numbers. */
  lt_manual_seed(43);
  CHECK(lt_uniform_(c, 0, 1) == LT_OK);
  CHECK(!same_bytes(a, c));
  /* Every in-place fill is a write autograd must see. */
  uint64_t version = a->storage->version;
  CHECK(lt_normal_(a, 0, 1) == LT_OK);
  CHECK(a->storage->version > version);
  lt_tensor_release(a);
  lt_tensor_release(b);
  lt_tensor_release(c);
}

/* One fill on 1 thread and on 2 threads gives the same bits. */
static void test_thread_count_independence(void) {
  const int64_t n = 1 << 20;
  int saved = lt_get_num_threads();
  lt_dtype dtypes[] = {LT_FLOAT32, LT_FLOAT64, LT_INT64};
  for (int k = 0; k < 3; k++) {
    lt_tensor *one = make(n, dtypes[k]), *two = make(n, dtypes[k]);
    for (int threads = 1; threads <= 2; threads++) {
      lt_tensor *t = threads == 1 ? one : two;
      lt_set_num_threads(threads);
      CHECK_EQ_INT(lt_get_num_threads(), threads);
      lt_manual_seed(7);
      if (dtypes[k] == LT_INT64) {
        CHECK(lt_randint_(t, -1000, 1000) == LT_OK);
      } else {
        CHECK(lt_normal_(t, 0, 1) == LT_OK);
        CHECK(lt_uniform_(t, -2, 2) == LT_OK); /* second call: offset moved */
      }
    }
    CHECK(same_bytes(one, two));
    lt_tensor_release(one);
    lt_tensor_release(two);
  }
  lt_set_num_threads(saved);
}

/* Element i of a view gets what element i of a contiguous tensor would. */
static void test_strided_fill(void) {
  int64_t shape[] = {3, 4};
  lt_tensor *base = NULL, *view = NULL, *plain = NULL;
  CHECK(lt_empty(shape, 2, LT_FLOAT32, lt_cpu(), &base) == LT_OK);
  CHECK(lt_transpose(base, 0, 1, &view) == LT_OK); /* 4 x 3, not contiguous */
  CHECK(!lt_is_contiguous(view));
  int64_t vshape[] = {4, 3};
  CHECK(lt_empty(vshape, 2, LT_FLOAT32, lt_cpu(), &plain) == LT_OK);
  lt_manual_seed(3);
  CHECK(lt_uniform_(view, 0, 1) == LT_OK);
  lt_manual_seed(3);
  CHECK(lt_uniform_(plain, 0, 1) == LT_OK);
  const float *b = lt_data(base), *p = lt_data(plain);
  int mismatches = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++)
      if (b[j * 4 + i] != p[i * 3 + j]) mismatches++;
  CHECK_EQ_INT(mismatches, 0);
  lt_tensor_release(view);
  lt_tensor_release(base);
  lt_tensor_release(plain);
}

static void moments(const lt_tensor *t, double *mean, double *std) {
  int64_t n = lt_numel(t);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = at(t, i);
    sum += v;
    sq += v * v;
  }
  *mean = sum / (double)n;
  *std = sqrt(sq / (double)n - *mean * *mean);
}

static void test_normal(void) {
  const int64_t n = 1000000;
  lt_dtype dtypes[] = {LT_FLOAT32, LT_FLOAT64, LT_FLOAT16, LT_BFLOAT16};
  lt_manual_seed(1);
  for (int k = 0; k < 4; k++) {
    lt_tensor *t = make(n, dtypes[k]);
    double mean, std;
    CHECK(lt_normal_(t, 0, 1) == LT_OK);
    moments(t, &mean, &std);
    CHECK(fabs(mean) < 0.01);
    CHECK(fabs(std - 1) < 0.01);
    CHECK(lt_normal_(t, 2, 3) == LT_OK);
    moments(t, &mean, &std);
    CHECK(fabs(mean - 2) < 0.03);
    CHECK(fabs(std - 3) < 0.03);
    lt_tensor_release(t);
  }
  /* std 0 is allowed and gives the mean. */
  lt_tensor *t = make(10, LT_FLOAT32);
  CHECK(lt_normal_(t, 1.5, 0) == LT_OK);
  CHECK(at(t, 0) == 1.5 && at(t, 9) == 1.5);
  lt_tensor_release(t);
}

static void test_uniform(void) {
  const int64_t n = 1000000;
  lt_dtype dtypes[] = {LT_FLOAT32, LT_FLOAT64, LT_FLOAT16, LT_BFLOAT16};
  lt_manual_seed(2);
  for (int k = 0; k < 4; k++) {
    lt_tensor *t = make(n, dtypes[k]);
    CHECK(lt_uniform_(t, -1, 3) == LT_OK);
    double lo = INFINITY, hi = -INFINITY, mean, std;
    for (int64_t i = 0; i < n; i++) {
      lo = fmin(lo, at(t, i));
      hi = fmax(hi, at(t, i));
    }
    CHECK(lo >= -1 && lo < -0.99);
    CHECK(hi < 3 && hi > 2.98); /* never high itself, even after rounding */
    moments(t, &mean, &std);
    CHECK(fabs(mean - 1) < 0.01);
    CHECK(fabs(std - 4 / sqrt(12)) < 0.01);
    lt_tensor_release(t);
  }
  /* low == high gives low, as PyTorch. */
  lt_tensor *t = make(5, LT_FLOAT32);
  CHECK(lt_uniform_(t, 1, 1) == LT_OK);
  CHECK(at(t, 0) == 1 && at(t, 4) == 1);
  lt_tensor_release(t);
  /* Integer targets truncate the drawn values. */
  t = make(10000, LT_INT64);
  CHECK(lt_uniform_(t, 0, 10) == LT_OK);
  bool in_range = true;
  for (int64_t i = 0; i < 10000; i++) in_range = in_range && at(t, i) >= 0 && at(t, i) <= 9;
  CHECK(in_range);
  lt_tensor_release(t);
}

static void test_randint(void) {
  const int64_t n = 200000;
  lt_tensor *t = make(n, LT_INT64);
  lt_manual_seed(5);
  CHECK(lt_randint_(t, -3, 4) == LT_OK);
  int64_t counts[8] = {0};
  bool in_range = true;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = ((const int64_t *)lt_data(t))[i];
    if (v < -3 || v > 4) in_range = false;
    else counts[v + 3]++;
  }
  CHECK(in_range);
  for (int k = 0; k < 8; k++) CHECK(labs((long)(counts[k] - n / 8)) < n / 80); /* within 10% */
  /* A single value, and the whole int64 range, both work. */
  CHECK(lt_randint_(t, 9, 9) == LT_OK);
  CHECK(((const int64_t *)lt_data(t))[n - 1] == 9);
  CHECK(lt_randint_(t, INT64_MIN, INT64_MAX) == LT_OK);
  lt_tensor_release(t);

  /* Other dtypes: uint8 over its full range, integers stored in floats. */
  lt_tensor *u = make(100000, LT_UINT8);
  CHECK(lt_randint_(u, 0, 255) == LT_OK);
  bool seen[256] = {false};
  for (int64_t i = 0; i < 100000; i++) seen[((const uint8_t *)lt_data(u))[i]] = true;
  int distinct = 0;
  for (int k = 0; k < 256; k++) distinct += seen[k];
  CHECK_EQ_INT(distinct, 256);
  lt_tensor_release(u);
  lt_tensor *f = make(1000, LT_FLOAT32);
  CHECK(lt_randint_(f, 1, 10) == LT_OK);
  bool integers = true;
  for (int64_t i = 0; i < 1000; i++)
    integers = integers && at(f, i) == floor(at(f, i)) && at(f, i) >= 1 && at(f, i) <= 10;
  CHECK(integers);
  lt_tensor_release(f);
}

static void test_bernoulli(void) {
  const int64_t n = 1000000;
  lt_tensor *t = make(n, LT_FLOAT32);
  double mean, std;
  CHECK(lt_bernoulli_(t, 0.3) == LT_OK);
  moments(t, &mean, &std);
  CHECK(fabs(mean - 0.3) < 0.01);
  CHECK(lt_bernoulli_(t, 0) == LT_OK);
  moments(t, &mean, &std);
  CHECK(mean == 0);
  CHECK(lt_bernoulli_(t, 1) == LT_OK);
  moments(t, &mean, &std);
  CHECK(mean == 1);
  lt_tensor_release(t);
  lt_tensor *b = make(1000, LT_BOOL);
  CHECK(lt_bernoulli_(b, 0.5) == LT_OK);
  bool zero_or_one = true;
  for (int64_t i = 0; i < 1000; i++) zero_or_one = zero_or_one && ((uint8_t *)lt_data(b))[i] <= 1;
  CHECK(zero_or_one);
  lt_tensor_release(b);
}

static void test_errors(void) {
  lt_tensor *t = make(4, LT_FLOAT32);
  lt_rng_state before = lt_rng_get_state();
  CHECK(lt_randint_(t, 5, 3) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "randint: low 5 is greater than high 3");
  CHECK(lt_uniform_(t, 1, 0) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "uniform_: low 1 is greater than high 0") != NULL);
  CHECK(lt_uniform_(t, 0, INFINITY) == LT_ERR_ARG);
  CHECK(lt_normal_(t, 0, -1) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "normal_: std must be non-negative, got -1");
  CHECK(lt_bernoulli_(t, 1.5) == LT_ERR_ARG);
  CHECK_EQ_STR(lt_last_error(), "bernoulli_: p must be in [0, 1], got 1.5");
  CHECK(lt_bernoulli_(t, NAN) == LT_ERR_ARG);
  CHECK(lt_uniform_(NULL, 0, 1) == LT_ERR_FREED);
  lt_tensor *u = make(4, LT_UINT8);
  CHECK(lt_randint_(u, 0, 300) == LT_ERR_ARG);
  CHECK(strstr(lt_last_error(), "uint8") != NULL);
  lt_tensor_release(u);
  /* An expanded tensor has one memory location for many elements. */
  lt_tensor *one = make(1, LT_FLOAT32), *wide = NULL;
  int64_t shape[] = {5};
  CHECK(lt_expand(one, shape, 1, &wide) == LT_OK);
  CHECK(lt_normal_(wide, 0, 1) == LT_ERR_ARG);
  lt_tensor_release(wide);
  lt_tensor_release(one);
  /* Failed calls leave the generator where it was. */
  CHECK_EQ_INT(lt_rng_get_state().offset, before.offset);
  lt_tensor_release(t);
}

int main(void) {
  test_philox_known_answers();
  test_seed_and_state();
  test_thread_count_independence();
  test_strided_fill();
  test_normal();
  test_uniform();
  test_randint();
  test_bernoulli();
  test_errors();
  return check_summary("test_rng");
}
