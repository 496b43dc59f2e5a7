/* Tests of in-place writes through views with autograd: the write is
 * recorded on the base (CopySlices) and the views get a history over the
 * base's new one (AsStridedBackward). Float64 central differences of
 * functions that write through views, the refusals that remain (a view of a
 * leaf that requires grad, a view made under no_grad, overlapping views),
 * version checks through views, no_grad, and memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lt/lt.h"
#include "tensor_helpers.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static uint64_t lcg_state = 4242;
static double uniform01(void) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(lcg_state >> 11) / (double)(1ULL << 53);
}

/* Values in [0.5, 1.5): away from the kinks and zeros of the ops used. */
static lt_tensor *random_tensor(const int64_t *shape, int ndim, bool grad) {
  lt_tensor *t = NULL;
  if (lt_empty(shape, ndim, LT_FLOAT64, lt_cpu(), &t) != LT_OK) return NULL;
  double *p = lt_data(t);
  for (int64_t i = 0; i < lt_numel(t); i++) p[i] = 0.5 + uniform01();
  if (grad) lt_requires_grad_(t, true);
  return t;
}

/* Runs a chain of calls, stopping at the first failure. */
#define STEP(call)                  \
  do {                              \
    if (st == LT_OK) st = (call);   \
  } while (0)

/* ---- the functions under test (in: float64 inputs; out: a new reference) ---- */

/* y = x * 2; y[:, 1:3] *= 3 */
static lt_status f_narrow_mul(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *v = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 2.0, false, false, &y);
  STEP(lt_narrow(y, 1, 1, 2, &v));
  STEP(lt_binary_scalar_(LT_OP_MUL, v, 3.0, false));
  if (v) lt_tensor_release(v);
  if (st != LT_OK && y) lt_tensor_release(y), y = NULL;
  *out = y;
  return st;
}

/* y = x * 1; y[1] += b (b requires grad); y.sigmoid() */
static lt_status f_select_add(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *v = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_select(y, 0, 1, &v));
  STEP(lt_binary_(LT_OP_ADD, v, in[1]));
  STEP(lt_unary(LT_OP_SIGMOID, y, out));
  release_all((lt_tensor *[]){y, v}, 2);
  return st;
}

/* buf = zeros(4, 3); buf[0] = r0 (a leaf); buf[2] = r2 * r2; buf * x */
static lt_status f_copy_rows(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *buf = NULL, *row0 = NULL, *row2 = NULL, *sq = NULL;
  lt_status st = lt_zeros(SHAPE(4, 3), 2, LT_FLOAT64, lt_cpu(), &buf);
  STEP(lt_narrow(buf, 0, 0, 1, &row0));
  STEP(lt_copy_(row0, in[0]));
  STEP(lt_select(buf, 0, 2, &row2));
  STEP(lt_binary(LT_OP_MUL, in[1], in[1], &sq));
  STEP(lt_copy_(row2, sq));
  STEP(lt_binary(LT_OP_MUL, buf, in[2], out));
  release_all((lt_tensor *[]){buf, row0, row2, sq}, 4);
  return st;
}

/* y = x.sin(); t = y.T (4x3); t *= b; y */
static lt_status f_transpose_mul(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *t = NULL;
  lt_status st = lt_unary(LT_OP_SIN, in[0], &y); /* saves x, not y */
  STEP(lt_transpose(y, 0, 1, &t));
  STEP(lt_binary_(LT_OP_MUL, t, in[1]));
  if (t) lt_tensor_release(t);
  if (st != LT_OK && y) lt_tensor_release(y), y = NULL;
  *out = y;
  return st;
}

/* y = x * 1 (4x3); v1 = y[0:3]; v2 = y[1:4]; v1 *= b; v2.tanh_(); v1 * v2:
 * v1 is used after v2's write changed part of it. */
static lt_status f_two_writes(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *v1 = NULL, *v2 = NULL, *p = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_narrow(y, 0, 0, 3, &v1));
  STEP(lt_narrow(y, 0, 1, 3, &v2));
  STEP(lt_binary_(LT_OP_MUL, v1, in[1]));
  STEP(lt_unary_(LT_OP_TANH, v2));
  STEP(lt_binary(LT_OP_MUL, v1, v2, out));
  release_all((lt_tensor *[]){y, v1, v2, p}, 4);
  return st;
}

/* y = x * 1 (3x4x2); v = y[1].narrow(0, 1, 2) (a view of a view); v *= b;
 * v.clamp_(max=1.2); y */
static lt_status f_view_of_view(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *s = NULL, *v = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_select(y, 0, 1, &s));
  STEP(lt_narrow(s, 0, 1, 2, &v));
  STEP(lt_binary_(LT_OP_MUL, v, in[1]));
  STEP(lt_clamp_(v, false, 0.0, true, 1.2));
  release_all((lt_tensor *[]){s, v}, 2);
  if (st != LT_OK && y) lt_tensor_release(y), y = NULL;
  *out = y;
  return st;
}

/* y = x * 1 (3x4); e = y[0:1].expand(3, 4) (a view made before the write);
 * y[2].zero_(); y[1] *= 5; e * y: e's history is over y's newest one, and
 * its gradient sums over the expanded dim. */
static lt_status f_expanded_view(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *n = NULL, *e = NULL, *r2 = NULL, *r1 = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_narrow(y, 0, 0, 1, &n));
  STEP(lt_expand(n, SHAPE(3, 4), 2, &e));
  STEP(lt_select(y, 0, 2, &r2));
  STEP(lt_zero_(r2));
  STEP(lt_select(y, 0, 1, &r1));
  STEP(lt_binary_scalar_(LT_OP_MUL, r1, 5.0, false));
  STEP(lt_binary(LT_OP_MUL, e, y, out));
  release_all((lt_tensor *[]){y, n, e, r2, r1}, 5);
  return st;
}

/* y = x * 1; v = y[0:2]; y *= 3 (the base itself); v: its history follows. */
static lt_status f_base_write(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *v = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_narrow(y, 0, 0, 2, &v));
  STEP(lt_binary_(LT_OP_MUL, y, in[1]));
  if (y) lt_tensor_release(y);
  if (st != LT_OK && v) lt_tensor_release(v), v = NULL;
  *out = v;
  return st;
}

/* y = x * 1 (3x4); y[:, 1:3].T += b; y[0].fill_(2); y (through a transposed
 * narrow view, as `out:narrow(2, 1, k):add_(bias)`) */
static lt_status f_narrow_t_add(lt_tensor *const *in, const void *ctx, lt_tensor **out) {
  (void)ctx;
  lt_tensor *y = NULL, *v = NULL, *t = NULL, *r = NULL;
  lt_status st = lt_binary_scalar(LT_OP_MUL, in[0], 1.0, false, false, &y);
  STEP(lt_narrow(y, 1, 1, 2, &v));
  STEP(lt_transpose(v, 0, 1, &t));
  STEP(lt_binary_(LT_OP_ADD, t, in[1]));
  STEP(lt_select(y, 0, 0, &r));
  STEP(lt_fill_(r, 2.0));
  release_all((lt_tensor *[]){v, t, r}, 3);
  if (st != LT_OK && y) lt_tensor_release(y), y = NULL;
  *out = y;
  return st;
}

static void test_gradchecks(void) {
  {
    lt_tensor *x = random_tensor(SHAPE(3, 4), 2, true);
    CHECK(gradcheck("narrow+mul_", "CopySlices", f_narrow_mul, &x, 1, NULL));
    /* the values: columns 2 and 3 of 2x times 3 */
    lt_tensor *y = NULL;
    CHECK(f_narrow_mul(&x, NULL, &y) == LT_OK);
    CHECK(fabs(gc_element(y, 1) - 6 * gc_element(x, 1)) < 1e-12);
    CHECK(fabs(gc_element(y, 0) - 2 * gc_element(x, 0)) < 1e-12);
    lt_tensor_release(y);
    lt_tensor_release(x);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(3, 4), 2, true), random_tensor(SHAPE(4), 1, true)};
    CHECK(gradcheck("select+add_", "SigmoidBackward", f_select_add, in, 2, NULL));
    release_all(in, 2);
  }
  {
    lt_tensor *in[3] = {random_tensor(SHAPE(1, 3), 2, true), random_tensor(SHAPE(3), 1, true),
                        random_tensor(SHAPE(4, 3), 2, true)};
    CHECK(gradcheck("copy_ rows into zeros", "MulBackward", f_copy_rows, in, 3, NULL));
    /* rows 1 and 3 were never written: x's gradient there is buf's zeros */
    CHECK(in[2]->grad && gc_element(in[2]->grad, 3) == 0.0 && gc_element(in[2]->grad, 11) == 0.0);
    CHECK(in[2]->grad && gc_element(in[2]->grad, 0) != 0.0);
    release_all(in, 3);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(3, 4), 2, true), random_tensor(SHAPE(4, 3), 2, true)};
    CHECK(gradcheck("transpose+mul_", "CopySlices", f_transpose_mul, in, 2, NULL));
    release_all(in, 2);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(4, 3), 2, true), random_tensor(SHAPE(3, 3), 2, true)};
    CHECK(gradcheck("two overlapping writes", "MulBackward", f_two_writes, in, 2, NULL));
    release_all(in, 2);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(3, 4, 2), 3, true), random_tensor(SHAPE(2, 2), 2, true)};
    CHECK(gradcheck("view of a view", "CopySlices", f_view_of_view, in, 2, NULL));
    release_all(in, 2);
  }
  {
    lt_tensor *x = random_tensor(SHAPE(3, 4), 2, true);
    CHECK(gradcheck("expanded view after writes", "MulBackward", f_expanded_view, &x, 1, NULL));
    lt_tensor_release(x);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(3, 4), 2, true), random_tensor(SHAPE(3, 4), 2, true)};
    CHECK(gradcheck("write to the base", "AsStridedBackward", f_base_write, in, 2, NULL));
    release_all(in, 2);
  }
  {
    lt_tensor *in[2] = {random_tensor(SHAPE(3, 4), 2, true), random_tensor(SHAPE(2, 3), 2, true)};
    CHECK(gradcheck("narrow.T+add_, fill_", "CopySlices", f_narrow_t_add, in, 2, NULL));
    release_all(in, 2);
  }
}

static void test_refusals(void) {
  /* a view of a leaf that requires grad: refused before the write, naming
   * the op; allowed under no_grad */
  lt_tensor *x = random_tensor(SHAPE(3, 4), 2, true), *v = NULL;
  CHECK(lt_narrow(x, 1, 0, 2, &v) == LT_OK);
  const double before = gc_element(x, 0);
  CHECK(lt_binary_scalar_(LT_OP_MUL, v, 3.0, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "mul_: a view of a leaf tensor that requires grad is used in an "
                                "in-place operation") != NULL);
  CHECK(gc_element(x, 0) == before);
  bool prev = lt_set_grad_enabled(false);
  CHECK(lt_binary_scalar_(LT_OP_MUL, v, 3.0, false) == LT_OK);
  lt_set_grad_enabled(prev);
  CHECK(gc_element(x, 0) == 3 * before && lt_is_leaf(x));
  lt_tensor_release(v);

  /* a view made under no_grad does not know its base: a write with grad
   * into it keeps the old refusal */
  lt_tensor *buf = NULL, *w = NULL, *src = random_tensor(SHAPE(4), 1, true);
  CHECK(lt_zeros(SHAPE(3, 4), 2, LT_FLOAT64, lt_cpu(), &buf) == LT_OK);
  prev = lt_set_grad_enabled(false);
  CHECK(lt_select(buf, 0, 1, &w) == LT_OK);
  lt_set_grad_enabled(prev);
  CHECK(lt_copy_(w, src) != LT_OK);
  CHECK(strstr(lt_last_error(), "copy_: in-place write with grad into a view made under no_grad") !=
        NULL);
  CHECK(!buf->requires_grad);
  lt_tensor_release(w);

  /* an expanded view is refused by the writability check, as before */
  lt_tensor *y = NULL, *n = NULL, *e = NULL;
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 1.0, false, false, &y) == LT_OK);
  CHECK(lt_narrow(y, 0, 0, 1, &n) == LT_OK);
  CHECK(lt_expand(n, SHAPE(3, 4), 2, &e) == LT_OK);
  CHECK(lt_binary_scalar_(LT_OP_MUL, e, 2.0, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "more than one element") != NULL);
  CHECK(strcmp(lt_grad_fn_name(y), "MulBackward") == 0);

  /* requires_grad_ on a view made leaf: it forgets its base */
  lt_tensor *b2 = NULL, *v2 = NULL;
  CHECK(lt_zeros(SHAPE(3, 4), 2, LT_FLOAT64, lt_cpu(), &b2) == LT_OK);
  CHECK(lt_narrow(b2, 0, 0, 2, &v2) == LT_OK);
  CHECK(lt_requires_grad_(v2, true) == LT_OK && lt_is_leaf(v2));
  CHECK(lt_unary_(LT_OP_RELU, v2) != LT_OK);
  CHECK(strstr(lt_last_error(), "relu_: a leaf tensor that requires grad") != NULL);
  lt_tensor *all[] = {x, buf, src, y, n, e, b2, v2};
  release_all(all, 8);
}

static void test_versions_and_no_grad(void) {
  /* a tensor saved before a write through its view: backward fails */
  lt_tensor *x = random_tensor(SHAPE(3, 4), 2, true), *w = random_tensor(SHAPE(3, 4), 2, true);
  lt_tensor *y = NULL, *z = NULL, *v = NULL, *loss = NULL;
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 1.0, false, false, &y) == LT_OK);
  CHECK(lt_binary(LT_OP_MUL, y, w, &z) == LT_OK); /* saves y */
  CHECK(lt_narrow(y, 0, 1, 1, &v) == LT_OK);
  CHECK(lt_binary_scalar_(LT_OP_ADD, v, 1.0, false) == LT_OK);
  CHECK(lt_sum(z, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "a tensor saved by MulBackward was modified by an in-place "
                                "operation (add_)") != NULL);
  release_all((lt_tensor *[]){y, z, v, loss}, 4);

  /* the output saved by sigmoid, written through a view */
  lt_tensor *s = NULL, *sv = NULL;
  loss = NULL;
  CHECK(lt_unary(LT_OP_SIGMOID, x, &s) == LT_OK);
  CHECK(lt_select(s, 1, 0, &sv) == LT_OK);
  CHECK(lt_binary_scalar_(LT_OP_MUL, sv, 2.0, false) == LT_OK);
  CHECK(strcmp(lt_grad_fn_name(s), "CopySlices") == 0);
  CHECK(lt_sum(s, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "SigmoidBackward") && strstr(lt_last_error(), "(mul_)"));
  release_all((lt_tensor *[]){s, sv, loss}, 3);

  /* the inner op's saved tensors: a second backward needs retain_graph */
  lt_tensor *b = random_tensor(SHAPE(4), 1, true), *r = NULL;
  y = v = loss = NULL;
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 1.0, false, false, &y) == LT_OK);
  CHECK(lt_select(y, 0, 0, &r) == LT_OK);
  CHECK(lt_binary_(LT_OP_MUL, r, b) == LT_OK); /* saves b and r's old values */
  CHECK(lt_sum(y, NULL, 0, false, &loss) == LT_OK);
  CHECK(lt_backward(loss, NULL, true) == LT_OK);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  CHECK(b->grad && fabs(gc_element(b->grad, 0) - 2 * gc_element(x, 0)) < 1e-12);
  CHECK(lt_backward(loss, NULL, false) != LT_OK);
  CHECK(strstr(lt_last_error(), "second time") != NULL);
  release_all((lt_tensor *[]){y, r, loss}, 3);

  /* under no_grad nothing is recorded */
  y = v = NULL;
  CHECK(lt_binary_scalar(LT_OP_MUL, x, 1.0, false, false, &y) == LT_OK);
  CHECK(lt_narrow(y, 0, 0, 1, &v) == LT_OK);
  bool prev = lt_set_grad_enabled(false);
  lt_tensor *row = NULL;
  CHECK(lt_narrow(w, 0, 0, 1, &row) == LT_OK);
  CHECK(lt_copy_(v, row) == LT_OK);
  lt_set_grad_enabled(prev);
  CHECK(strcmp(lt_grad_fn_name(y), "MulBackward") == 0);
  release_all((lt_tensor *[]){x, w, y, v, b, row}, 6);
}

/* A graph with writes through views frees everything when dropped. */
static void test_memory(void) {
  const size_t before = allocated_bytes();
  lt_tensor *in[3] = {random_tensor(SHAPE(1, 3), 2, true), random_tensor(SHAPE(3), 1, true),
                      random_tensor(SHAPE(4, 3), 2, true)};
  lt_tensor *out = NULL, *loss = NULL;
  CHECK(f_copy_rows(in, NULL, &out) == LT_OK);
  CHECK(lt_sum(out, NULL, 0, false, &loss) == LT_OK);
  lt_tensor_release(out);
  CHECK(lt_backward(loss, NULL, false) == LT_OK);
  lt_tensor_release(loss);
  release_all(in, 3);
  CHECK_EQ_INT(allocated_bytes(), before);
}

int main(void) {
  test_gradchecks();
  test_refusals();
  test_versions_and_no_grad();
  test_memory();
  return check_summary("test_autograd_views");
}
