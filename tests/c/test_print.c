/* tostring(t) against PyTorch: every expected string below is repr(t) as
 * PyTorch 1.13 prints it, so number formats, widths, wrapping, summaries and
 * suffixes all follow torch/_tensor_str.py. lt writes "dtype=int32" where
 * PyTorch writes "dtype=torch.int32"; where that changes a line break, the
 * expected string is torch's own _tensor_str and _add_suffixes applied to
 * lt's suffixes. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "lt/lt.h"

/* A tensor of dtype dt with the given shape holding values (row-major). */
static lt_tensor *from_doubles(const double *values, const int64_t *shape, int ndim,
                               lt_dtype dt) {
  lt_tensor *t = NULL;
  CHECK(lt_from_buffer(values, LT_FLOAT64, shape, ndim, dt, lt_cpu(), &t) == LT_OK);
  return t;
}

/* 0, 1, 2, ... scaled by step. */
static lt_tensor *arange(const int64_t *shape, int ndim, lt_dtype dt, double step) {
  lt_tensor *t = NULL;
  CHECK(lt_empty(shape, ndim, dt, lt_cpu(), &t) == LT_OK);
  char *p = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++)
    lt_store_double(p + i * (int64_t)lt_dtype_size(dt), dt, (double)i * step);
  return t;
}

/* Checks the string of t and releases t. */
static void check_prints(lt_tensor *t, const char *expected) {
  char *s = lt_tensor_to_string(t);
  CHECK_EQ_STR(s, expected);
  free(s);
  lt_tensor_release(t);
}

static void test_floats(void) {
  int64_t three[] = {3}, two[] = {2}, four[] = {4};
  check_prints(from_doubles((double[]){1, 2, 3}, three, 1, LT_FLOAT32), "tensor([1., 2., 3.])");
  check_prints(from_doubles((double[]){3.5}, NULL, 0, LT_FLOAT32), "tensor(3.5000)");
  check_prints(from_doubles((double[]){3}, NULL, 0, LT_FLOAT32), "tensor(3.)");
  check_prints(from_doubles((double[]){0.12345, -1.5, 10}, three, 1, LT_FLOAT32),
               "tensor([ 0.1235, -1.5000, 10.0000])");
  /* Scientific when max/min > 1000, max > 1e8 or (non-integers) min < 1e-4. */
  check_prints(from_doubles((double[]){1e10, 1}, two, 1, LT_FLOAT32),
               "tensor([1.0000e+10, 1.0000e+00])");
  check_prints(from_doubles((double[]){1e-5, 0.5}, two, 1, LT_FLOAT32),
               "tensor([1.0000e-05, 5.0000e-01])");
  /* Non-finite values do not count toward the format or the width. */
  check_prints(from_doubles((double[]){1, NAN, INFINITY, -INFINITY}, four, 1, LT_FLOAT32),
               "tensor([1., nan, inf, -inf])");
  check_prints(from_doubles((double[]){-0.0}, (int64_t[]){1}, 1, LT_FLOAT32), "tensor([-0.])");
  check_prints(from_doubles((double[]){0, 0}, two, 1, LT_FLOAT32), "tensor([0., 0.])");
  check_prints(from_doubles((double[]){0, 1, 2, 3, 4, 5, 6, 7}, (int64_t[]){2, 2, 2}, 3,
                            LT_FLOAT32),
               "tensor([[[0., 1.],\n"
               "         [2., 3.]],\n"
               "\n"
               "        [[4., 5.],\n"
               "         [6., 7.]]])");
}

static void test_other_dtypes(void) {
  check_prints(from_doubles((double[]){1, 2, 3, 4}, (int64_t[]){2, 2}, 2, LT_INT64),
               "tensor([[1, 2],\n"
               "        [3, 4]])");
  check_prints(from_doubles((double[]){1, 0}, (int64_t[]){2}, 1, LT_BOOL),
               "tensor([ True, False])");
  check_prints(from_doubles((double[]){1.5, 2}, (int64_t[]){2}, 1, LT_FLOAT16),
               "tensor([1.5000, 2.0000], dtype=float16)");
  check_prints(from_doubles((double[]){5}, NULL, 0, LT_INT32), "tensor(5, dtype=int32)");
  check_prints(from_doubles((double[]){0, 7, 255}, (int64_t[]){3}, 1, LT_UINT8),
               "tensor([  0,   7, 255], dtype=uint8)");
  /* Wrapped at 80 columns; the suffix fits on the last line. */
  check_prints(arange((int64_t[]){30}, 1, LT_FLOAT64, 0.1),
               "tensor([0.0000, 0.1000, 0.2000, 0.3000, 0.4000, 0.5000, 0.6000, 0.7000, 0.8000,\n"
               "        0.9000, 1.0000, 1.1000, 1.2000, 1.3000, 1.4000, 1.5000, 1.6000, 1.7000,\n"
               "        1.8000, 1.9000, 2.0000, 2.1000, 2.2000, 2.3000, 2.4000, 2.5000, 2.6000,\n"
               "        2.7000, 2.8000, 2.9000], dtype=float64)");
  /* The suffix moves to its own line when it would pass 80 columns. */
  check_prints(from_doubles((double[]){1e9, 2, 3, 4, 5, -6}, (int64_t[]){6}, 1, LT_INT32),
               "tensor([1000000000,          2,          3,          4,          5,         -6],\n"
               "       dtype=int32)");
}

static void test_empty(void) {
  lt_tensor *t = NULL;
  CHECK(lt_empty((int64_t[]){0, 3}, 2, LT_FLOAT32, lt_cpu(), &t) == LT_OK);
  check_prints(t, "tensor([], size=(0, 3))");
  CHECK(lt_empty((int64_t[]){0}, 1, LT_INT64, lt_cpu(), &t) == LT_OK);
  check_prints(t, "tensor([], dtype=int64)");
  CHECK(lt_empty((int64_t[]){2, 0}, 2, LT_FLOAT16, lt_cpu(), &t) == LT_OK);
  check_prints(t, "tensor([], size=(2, 0), dtype=float16)");
}

static void test_summaries(void) {
  check_prints(arange((int64_t[]){2000}, 1, LT_FLOAT32, 0.25),
               "tensor([0.0000e+00, 2.5000e-01, 5.0000e-01,  ..., 4.9925e+02, 4.9950e+02,\n"
               "        4.9975e+02])");
  check_prints(arange((int64_t[]){40, 30}, 2, LT_INT64, 1),
               "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
               "        [  30,   31,   32,  ...,   57,   58,   59],\n"
               "        [  60,   61,   62,  ...,   87,   88,   89],\n"
               "        ...,\n"
               "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
               "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
               "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]])");
  check_prints(arange((int64_t[]){2, 30, 20}, 3, LT_FLOAT32, 1),
               "tensor([[[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.7000e+01,\n"
               "          1.8000e+01, 1.9000e+01],\n"
               "         [2.0000e+01, 2.1000e+01, 2.2000e+01,  ..., 3.7000e+01,\n"
               "          3.8000e+01, 3.9000e+01],\n"
               "         [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 5.7000e+01,\n"
               "          5.8000e+01, 5.9000e+01],\n"
               "         ...,\n"
               "         [5.4000e+02, 5.4100e+02, 5.4200e+02,  ..., 5.5700e+02,\n"
               "          5.5800e+02, 5.5900e+02],\n"
               "         [5.6000e+02, 5.6100e+02, 5.6200e+02,  ..., 5.7700e+02,\n"
               "          5.7800e+02, 5.7900e+02],\n"
               "         [5.8000e+02, 5.8100e+02, 5.8200e+02,  ..., 5.9700e+02,\n"
               "          5.9800e+02, 5.9900e+02]],\n"
               "\n"
               "        [[6.0000e+02, 6.0100e+02, 6.0200e+02,  ..., 6.1700e+02,\n"
               "          6.1800e+02, 6.1900e+02],\n"
               "         [6.2000e+02, 6.2100e+02, 6.2200e+02,  ..., 6.3700e+02,\n"
               "          6.3800e+02, 6.3900e+02],\n"
               "         [6.4000e+02, 6.4100e+02, 6.4200e+02,  ..., 6.5700e+02,\n"
               "          6.5800e+02, 6.5900e+02],\n"
               "         ...,\n"
               "         [1.1400e+03, 1.1410e+03, 1.1420e+03,  ..., 1.1570e+03,\n"
               "          1.1580e+03, 1.1590e+03],\n"
               "         [1.1600e+03, 1.1610e+03, 1.1620e+03,  ..., 1.1770e+03,\n"
               "          1.1780e+03, 1.1790e+03],\n"
               "         [1.1800e+03, 1.1810e+03, 1.1820e+03,  ..., 1.1970e+03,\n"
               "          1.1980e+03, 1.1990e+03]]])");
}

static void test_views_and_flags(void) {
  /* A transposed view prints in its own order, not the storage's. */
  lt_tensor *t = arange((int64_t[]){2, 3}, 2, LT_FLOAT32, 1), *tr = NULL;
  CHECK(lt_transpose(t, 0, 1, &tr) == LT_OK);
  lt_tensor_release(t);
  check_prints(tr, "tensor([[0., 3.],\n"
                   "        [1., 4.],\n"
                   "        [2., 5.]])");

  t = from_doubles((double[]){1, 2}, (int64_t[]){2}, 1, LT_FLOAT32);
  t->requires_grad = true;
  check_prints(t, "tensor([1., 2.], requires_grad=true)");

  int64_t shape[] = {2, 7};
  double values[] = {868, -81, -588, 472, 229, 118, 67, 150, 352, 500, 864, -800, 576, -241};
  t = from_doubles(values, shape, 2, LT_BFLOAT16);
  t->requires_grad = true;
  check_prints(t, "tensor([[ 868.,  -81., -588.,  472.,  229.,  118.,   67.],\n"
                  "        [ 150.,  352.,  500.,  864., -800.,  576., -241.]], dtype=bfloat16,\n"
                  "       requires_grad=true)");

  CHECK(lt_tensor_to_string(NULL) == NULL);
}

int main(void) {
  test_floats();
  test_other_dtypes();
  test_empty();
  test_summaries();
  test_views_and_flags();
  return check_summary("test_print");
}
