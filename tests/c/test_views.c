/* Views share storage and never copy: shapes, strides, offsets and errors of
 * view, reshape, transpose, permute, narrow, select, expand, squeeze,
 * unsqueeze, flatten and contiguous. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "lt/lt.h"

static lt_tensor *arange_2x3x4(void) {
  float data[24];
  for (int i = 0; i < 24; i++) data[i] = (float)i;
  int64_t shape[] = {2, 3, 4};
  lt_tensor *t = NULL;
  CHECK(lt_from_buffer(data, LT_FLOAT32, shape, 3, LT_FLOAT32, lt_cpu(), &t) == LT_OK);
  return t;
}

static float at(const lt_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
  int64_t idx[3] = {i0, i1, i2}, off = t->offset;
  for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
  return ((float *)t->storage->data)[off];
}

static void test_view_and_reshape(void) {
  lt_tensor *t = arange_2x3x4(), *v = NULL, *r = NULL, *tr = NULL;
  int64_t shape[] = {6, -1};
  CHECK(lt_view(t, shape, 2, &v) == LT_OK);
  CHECK_EQ_INT(v->shape[1], 4);
  CHECK(v->storage == t->storage);
  int64_t bad[] = {5, 5};
  CHECK(lt_view(t, bad, 2, &r) == LT_ERR_SHAPE);
  CHECK(strstr(lt_last_error(), "view: shape [5, 5] is invalid for input of size 24") != NULL);
  /* a transposed tensor cannot be viewed flat, but reshape copies */
  CHECK(lt_transpose(t, 0, 2, &tr) == LT_OK);
  int64_t flat[] = {24};
  CHECK(lt_view(tr, flat, 1, &r) == LT_ERR_SHAPE);
  CHECK(strstr(lt_last_error(), "use reshape") != NULL);
  CHECK(lt_reshape(tr, flat, 1, &r) == LT_OK);
  CHECK(r->storage != t->storage);
  CHECK(((float *)lt_data(r))[1] == 12.0f); /* tr[0][0][1] = t[1][0][0] */
  lt_tensor_release(r);
  lt_tensor_release(tr);
  lt_tensor_release(v);
  lt_tensor_release(t);
}

static void test_select_narrow(void) {
  lt_tensor *t = arange_2x3x4(), *s = NULL, *n = NULL;
  CHECK(lt_select(t, 1, 2, &s) == LT_OK); /* t[:, 2] */
  CHECK_EQ_INT(s->ndim, 2);
  CHECK(at(s, 1, 3, 0) == 23.0f);
  CHECK(lt_select(t, 0, 2, &n) == LT_ERR_INDEX);
  CHECK(strstr(lt_last_error(), "index 3 is out of bounds for dimension 1 with size 2") != NULL);
  CHECK(lt_select(t, 0, -1, &n) == LT_OK);
  CHECK(at(n, 0, 0, 0) == 12.0f);
  lt_tensor_release(n);
  CHECK(lt_narrow(t, 2, 1, 2, &n) == LT_OK);
  CHECK_EQ_INT(n->shape[2], 2);
  CHECK(at(n, 0, 0, 0) == 1.0f);
  lt_tensor_release(n);
  CHECK(lt_narrow(t, 2, 3, 2, &n) == LT_ERR_INDEX);
  lt_tensor_release(s);
  lt_tensor_release(t);
}

static void test_permute_expand_squeeze(void) {
  lt_tensor *t = arange_2x3x4(), *p = NULL, *e = NULL, *u = NULL, *q = NULL, *f = NULL;
  int perm[] = {2, 0, 1};
  CHECK(lt_permute(t, perm, 3, &p) == LT_OK);
  CHECK_EQ_INT(p->shape[0], 4);
  CHECK(at(p, 3, 1, 2) == 23.0f);
  CHECK(!lt_is_contiguous(p));
  int dup[] = {0, 0, 1};
  CHECK(lt_permute(t, dup, 3, &e) == LT_ERR_ARG);
  CHECK(lt_unsqueeze(t, 0, &u) == LT_OK);
  CHECK_EQ_INT(u->ndim, 4);
  int64_t ex[] = {5, 2, 3, 4};
  CHECK(lt_expand(u, ex, 4, &e) == LT_OK);
  CHECK_EQ_INT(e->stride[0], 0);
  int64_t bad[] = {3, 3, 4};
  lt_tensor *bad_e = NULL;
  CHECK(lt_expand(t, bad, 3, &bad_e) == LT_ERR_SHAPE);
  CHECK(lt_squeeze(u, 0, &q) == LT_OK);
  CHECK_EQ_INT(q->ndim, 3);
  CHECK(lt_flatten(t, 1, 2, &f) == LT_OK);
  CHECK_EQ_INT(f->ndim, 2);
  CHECK_EQ_INT(f->shape[1], 12);
  lt_tensor *c = NULL;
  CHECK(lt_contiguous(p, &c) == LT_OK);
  CHECK(lt_is_contiguous(c));
  CHECK(((float *)lt_data(c))[1] == 4.0f); /* p[0][0][1] = t[0][1][0] */
  lt_tensor_release(c);
  lt_tensor_release(f);
  lt_tensor_release(q);
  lt_tensor_release(e);
  lt_tensor_release(u);
  lt_tensor_release(p);
  lt_tensor_release(t);
}

static void test_storage_sharing_and_release(void) {
  lt_memory_stats before, after;
  lt_memory_get_stats(lt_cpu(), &before);
  int64_t shape[] = {1000};
  lt_tensor *t = NULL, *v = NULL;
  CHECK(lt_empty(shape, 1, LT_FLOAT32, lt_cpu(), &t) == LT_OK);
  lt_memory_get_stats(lt_cpu(), &after);
  CHECK_EQ_INT(after.allocated_bytes[LT_POOL_ALL].current - before.allocated_bytes[LT_POOL_ALL].current, 4096);
  CHECK(lt_narrow(t, 0, 0, 10, &v) == LT_OK);
  CHECK_EQ_INT(lt_tensor_release(t), 0); /* the view keeps the storage */
  CHECK_EQ_INT(lt_tensor_release(v), 4096);
  lt_memory_get_stats(lt_cpu(), &after);
  CHECK_EQ_INT(after.allocated_bytes[LT_POOL_ALL].current, before.allocated_bytes[LT_POOL_ALL].current);
}

static void test_broadcast_shapes(void) {
  int64_t a[] = {2, 1, 4}, b[] = {3, 1}, out[LT_MAX_DIMS];
  int n;
  CHECK(lt_broadcast_shapes("add", a, 3, b, 2, out, &n) == LT_OK);
  CHECK_EQ_INT(n, 3);
  CHECK(out[0] == 2 && out[1] == 3 && out[2] == 4);
  int64_t c[] = {5};
  CHECK(lt_broadcast_shapes("add", a, 3, c, 1, out, &n) == LT_ERR_SHAPE);
  CHECK(strstr(lt_last_error(), "add: shapes [2, 1, 4] and [5] cannot be broadcast") != NULL);
}

/* ---- sizes near INT64_MAX (found by an outside review) ---- */

#define HAS(part) (strstr(lt_last_error(), part) != NULL)

static void test_shape_overflow(void) {
  const int64_t big = INT64_MAX, g = (int64_t)1 << 32, q = (int64_t)1 << 62;
  int64_t n = 0;
  const int64_t square[] = {g, g}, wide[] = {0, q, q}, one_stride[] = {0, q}, limit[] = {LT_MAX_NUMEL};
  CHECK(lt_check_shape("ones", square, 2, LT_FLOAT32, &n) == LT_ERR_SHAPE);
  CHECK(HAS("ones: shape [4294967296, 4294967296] has too many elements (numel: integer "
            "multiplication overflow)"));
  CHECK(lt_check_shape("ones", wide, 3, LT_FLOAT32, &n) == LT_ERR_SHAPE);
  CHECK(HAS("ones: shape [0, 4611686018427387904, 4611686018427387904] is too large for its "
            "strides (Stride calculation overflowed)"));
  CHECK(lt_check_shape("ones", one_stride, 2, LT_FLOAT32, &n) == LT_ERR_SHAPE); /* in bytes */
  const int64_t fits_stride[] = {0, LT_MAX_NUMEL};
  CHECK(lt_check_shape("ones", fits_stride, 2, LT_FLOAT64, &n) == LT_OK && n == 0);
  CHECK(lt_check_shape("ones", limit, 1, LT_FLOAT64, &n) == LT_OK && n == LT_MAX_NUMEL);
  const int64_t past[] = {LT_MAX_NUMEL + 1};
  CHECK(lt_check_shape("randperm", past, 1, LT_INT64, &n) == LT_ERR_SHAPE);
  CHECK(HAS("randperm: shape [576460752303423488] has too many elements"));
  lt_tensor *t = NULL;
  CHECK(lt_empty_named("zeros", wide, 3, LT_FLOAT32, lt_cpu(), &t) == LT_ERR_SHAPE && !t);
  CHECK(HAS("zeros: shape [0, 4611686018427387904"));
  CHECK(lt_full_named("full", square, 2, 1.0, LT_FLOAT32, lt_cpu(), &t) == LT_ERR_SHAPE && !t);
  CHECK(HAS("full: shape [4294967296, 4294967296] has too many elements"));
  CHECK(lt_empty(square, 2, LT_FLOAT32, lt_cpu(), &t) == LT_ERR_SHAPE);
  CHECK(HAS("empty: shape [4294967296, 4294967296]"));

  /* broadcasting: each operand fits, the result would not */
  int64_t a[] = {g, 1}, b[] = {1, g}, out[LT_MAX_DIMS];
  int nout;
  CHECK(lt_broadcast_shapes("mul", a, 2, b, 2, out, &nout) == LT_ERR_SHAPE);
  CHECK(HAS("mul: shape [4294967296, 4294967296] has too many elements"));

  /* narrow: start + length past INT64_MAX */
  int64_t three = 3;
  lt_tensor *x = NULL, *v = NULL;
  CHECK(lt_full(&three, 1, 1.0, LT_FLOAT32, lt_cpu(), &x) == LT_OK);
  CHECK(lt_narrow(x, 0, 1, big, &v) == LT_ERR_INDEX && !v);
  CHECK(HAS("narrow: start 2 and length 9223372036854775807 do not fit size 3"));
  CHECK(lt_narrow(x, 0, 999999, 4, &v) == LT_ERR_INDEX && !v);
  CHECK(lt_narrow(x, 0, -big, 1, &v) == LT_ERR_INDEX && !v);
  CHECK(lt_narrow(x, 0, 3, 0, &v) == LT_OK && lt_numel(v) == 0);
  lt_tensor_release(v);

  /* expand: [2^32, 2^32] must not wrap to 0 elements */
  lt_tensor *one = NULL, *e = NULL;
  const int64_t ones_shape[] = {1, 1};
  CHECK(lt_full(ones_shape, 2, 1.0, LT_FLOAT32, lt_cpu(), &one) == LT_OK);
  CHECK(lt_expand(one, square, 2, &e) == LT_ERR_SHAPE && !e);
  CHECK(HAS("expand: the shape [4294967296, 4294967296] has too many elements (numel: integer "
            "multiplication overflow)"));
  const int64_t fits[] = {(int64_t)1 << 40, (int64_t)1 << 18};
  CHECK(lt_expand(one, fits, 2, &e) == LT_OK && lt_numel(e) == (int64_t)1 << 58);
  lt_tensor_release(e);

  /* a view with no element may keep huge sizes (as PyTorch's view) */
  lt_tensor *z = NULL, *zv = NULL, *u = NULL, *f = NULL;
  int64_t zero = 0;
  const int64_t huge[] = {0, big, 3};
  CHECK(lt_empty(&zero, 1, LT_FLOAT32, lt_cpu(), &z) == LT_OK);
  CHECK(lt_view(z, huge, 3, &zv) == LT_OK);
  CHECK_EQ_INT(lt_numel(zv), 0);
  CHECK(lt_is_contiguous(zv));
  CHECK(lt_unsqueeze(zv, 1, &u) == LT_OK && u->ndim == 4 && u->shape[2] == big);
  CHECK(lt_flatten(zv, 1, 2, &f) == LT_ERR_SHAPE && !f);
  CHECK(HAS("flatten: dimensions 2 to 3 of [0, 9223372036854775807, 3] hold too many elements"));
  CHECK(lt_flatten(zv, 0, 2, &f) == LT_OK && f->ndim == 1 && f->shape[0] == 0);
  lt_tensor_release(f);
  lt_tensor_release(u);
  lt_tensor_release(zv);
  lt_tensor_release(z);

  /* The last check of every view: a header whose geometry is broken (as
   * no view op makes it) cannot give a view past its storage. */
  lt_tensor broken = *x;
  broken.shape[0] = 100;
  CHECK(lt_narrow(&broken, 0, 0, 100, &v) == LT_ERR_INDEX && !v);
  CHECK(HAS("narrow: the view of shape [100] (strides [1], offset 0) reaches outside its storage "
            "of 3 elements"));
  broken = *x;
  broken.offset = 1000000;
  CHECK(lt_select(&broken, 0, 0, &v) == LT_ERR_INDEX && !v);
  CHECK(HAS("select: the view of shape [] (strides [], offset 1000000) reaches outside"));
  lt_tensor_release(one);
  lt_tensor_release(x);
}

int main(void) {
  test_view_and_reshape();
  test_select_narrow();
  test_permute_expand_squeeze();
  test_storage_sharing_and_release();
  test_broadcast_shapes();
  test_shape_overflow();
  return check_summary("test_views");
}
